//! A write sent twice. The pool sends a request again on a fresh connection when the first
//! attempt failed after it may have reached the server (its answer timed out, the connection
//! broke while waiting): the server may have applied the first, and the second then answers
//! as if another writer had won (an add finds the entry, a compare-and-swap finds the value
//! changed). Believed, that turns a write that happened into an error: a renewal whose new
//! certificate is stored would be answered 503 while the old one is revoked. So after a
//! resent write that "lost", the entry is read: when it holds exactly what this write made
//! it (a fresh serial, a claim's holder: values no other writer writes), the write was ours.

use super::conn::rc;
use super::entry::Entry;
use super::LdapStore;
use crate::store::StoreError;
use ldap3::Mod;
use std::collections::HashSet;

/// The results of a modify that a first, applied attempt of the same modify would cause.
pub(super) fn lost_race(code: u32) -> bool {
    matches!(code, rc::ASSERTION_FAILED | rc::NO_SUCH_ATTRIBUTE | rc::TYPE_OR_VALUE_EXISTS)
}

/// Whether `entry` holds every value of attribute `name` in `values`.
fn holds_all(entry: &Entry, name: &[u8], values: &HashSet<Vec<u8>>) -> bool {
    let held = entry.attrs.get(&String::from_utf8_lossy(name).to_ascii_lowercase());
    values.iter().all(|v| held.is_some_and(|h| h.contains(v)))
}

/// Whether `entry` holds any value of attribute `name` (any of `values`; all when empty).
fn holds_any(entry: &Entry, name: &[u8], values: &HashSet<Vec<u8>>) -> bool {
    match entry.attrs.get(&String::from_utf8_lossy(name).to_ascii_lowercase()) {
        None => false,
        Some(held) if values.is_empty() => !held.is_empty(),
        Some(held) => values.iter().any(|v| held.contains(v)),
    }
}

/// Whether `entry` is what the modifications `mods` leave: each value added or replaced is
/// there (a replacement exactly), each value deleted is not. An increment cannot be told.
fn shows(entry: &Entry, mods: &[Mod<Vec<u8>>]) -> bool {
    mods.iter().all(|m| match m {
        Mod::Add(name, values) => holds_all(entry, name, values),
        Mod::Replace(name, values) if values.is_empty() => !holds_any(entry, name, values),
        Mod::Replace(name, values) => {
            holds_all(entry, name, values)
                && entry
                    .attrs
                    .get(&String::from_utf8_lossy(name).to_ascii_lowercase())
                    .is_some_and(|held| held.len() == values.len())
        }
        Mod::Delete(name, values) => !holds_any(entry, name, values),
        Mod::Increment(..) => false,
    })
}

impl LdapStore {
    /// After an add sent twice answered "already exists": whether the entry holds every value
    /// the add gave it (the first attempt made it).
    pub(super) fn add_landed(&self, dn: &str, attrs: &[(Vec<u8>, HashSet<Vec<u8>>)]) -> Result<bool, StoreError> {
        let Some(entry) = self.read(&self.primary, dn)? else { return Ok(false) };
        let landed = attrs.iter().all(|(name, values)| holds_all(&entry, name, values));
        if landed {
            tracing::info!(event = "ldap-write-resent", op = "add", dn, "the first attempt was applied");
        }
        Ok(landed)
    }

    /// After a modify sent twice answered as a lost race: whether the entry is what the
    /// modify leaves (the first attempt applied it).
    pub(super) fn modify_landed(&self, dn: &str, mods: &[Mod<Vec<u8>>]) -> Result<bool, StoreError> {
        let Some(entry) = self.read(&self.primary, dn)? else { return Ok(false) };
        let landed = shows(&entry, mods);
        if landed {
            tracing::info!(event = "ldap-write-resent", op = "modify", dn, "the first attempt was applied");
        }
        Ok(landed)
    }
}
