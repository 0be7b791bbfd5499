//! The fleet's CRLs in the shared store: the root's (`vouchCa=root-crl`) and each master
//! CA's own (`vouchCa=crl-<id>`), entries directly under the base DN of vouch's existing
//! object class `vouchIssuer` (the CRL's DER in `vouchCertificate`, `vouchRevision` counting
//! its changes). Whoever reads one verifies it (the store is not trusted for that): the
//! root's against the root certificate, a master's against that master CA's key.
//!
//! A publication replaces the value only where the caller's `replaces` says so of the one
//! there (numbered lower, or not the signer's), by compare-and-swap: one modify that deletes
//! the exact value read and adds the new one. If another master changed it meanwhile, the
//! delete finds no such value, nothing is written, and the entry is read again (at most
//! [`CRL_TRIES`] times). The revision read is swapped the same way for the one read plus one
//! (a value that does not read as a number by the time in seconds), never incremented by
//! the server (389 Directory Server does not implement the increment).
//! Only the attributes vouch uses are read (an entry given other, large attributes costs
//! nothing more).

use super::ops::cas;
use super::{conn::rc, set, LdapStore, SERVICE_PREFIX};
use crate::store::{Published, StoreError};
use ldap3::{Mod, Scope};

/// How many times a publication reads the entry again after another writer changed it.
const CRL_TRIES: usize = 5;

/// Whether two DNs are the same as far as vouch writes them: case and spaces around the
/// separators aside.
fn same_dn(a: &str, b: &str) -> bool {
    let norm = |d: &str| -> String {
        d.split(',')
            .map(|rdn| rdn.split('=').map(str::trim).collect::<Vec<_>>().join("="))
            .collect::<Vec<_>>()
            .join(",")
    };
    norm(a).eq_ignore_ascii_case(&norm(b))
}

/// The revision a publication writes after `read` (the one there, if it reads as a number).
fn next_revision(read: Option<u64>) -> u64 {
    match read {
        Some(n) => n.saturating_add(1),
        None => u64::try_from(time::OffsetDateTime::now_utc().unix_timestamp()).unwrap_or(1),
    }
}

impl LdapStore {
    /// The CRL (DER) an entry holds, unchecked; `None` when there is no entry or no value.
    pub(super) fn crl_entry(&self, dn: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .read_attrs(&self.primary, dn, &["vouchCertificate"])?
            .and_then(|e| e.bytes("vouchCertificate").map(<[u8]>::to_vec)))
    }

    /// The revision of a CRL entry (every publication adds one), read without its value;
    /// `None` when there is no entry or no revision that reads.
    pub(super) fn crl_revision(&self, dn: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.read_attrs(&self.primary, dn, &["vouchRevision"])?.and_then(|e| e.revision().ok()))
    }

    /// Publishes `der` at `dn` (`vouchCa` value `name`): an add where there is no entry; else
    /// the compare-and-swap described in the module's doc. Also a master's service
    /// certificate ([`LdapStore::service_dn`]), under the same rule.
    pub(super) fn publish_crl_entry(
        &self,
        dn: &str,
        name: &str,
        der: &[u8],
        replaces: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Published, StoreError> {
        for _ in 0..CRL_TRIES {
            let Some(entry) = self.read_attrs(&self.primary, dn, &["vouchCertificate", "vouchRevision"])? else {
                let code = self.add(
                    dn,
                    vec![
                        ("objectClass", set("vouchIssuer")),
                        ("vouchCa", set(name)),
                        ("vouchRevision", set("1")),
                        ("vouchCertificate", set(der.to_vec())),
                    ],
                )?;
                if code == rc::SUCCESS {
                    self.confirm_on_replicas(dn, super::replicas::Written::Change)?;
                    return Ok(Published::Stored);
                }
                // Added by another master meanwhile: read it.
                continue;
            };
            let next = next_revision(entry.revision().ok()).to_string().into_bytes();
            // The revision read is swapped too (ops::cas): an entry any other writer changed
            // meanwhile is left as it is, and read again.
            let mut mods: Vec<Mod<Vec<u8>>> = match entry.bytes("vouchRevision") {
                Some(old) => cas("vouchRevision", old.to_vec(), next).to_vec(),
                None => vec![Mod::Replace(b"vouchRevision".to_vec(), set(next))],
            };
            match entry.bytes("vouchCertificate") {
                Some(old) if old == der => return Ok(Published::Same),
                Some(old) if !replaces(old) => return Ok(Published::Kept),
                Some(old) => mods.extend(cas("vouchCertificate", old.to_vec(), der.to_vec())),
                // An entry left without a value (an operator's edit): filled only while empty
                // (a value added meanwhile makes the add fail: the one attribute takes one).
                None => mods.push(Mod::Add(b"vouchCertificate".to_vec(), set(der.to_vec()))),
            };
            match self.modify(dn, mods)? {
                rc::SUCCESS => {
                    self.confirm_on_replicas(dn, super::replicas::Written::Change)?;
                    return Ok(Published::Stored);
                }
                // Changed or removed meanwhile: read again.
                _ => continue,
            }
        }
        Err(StoreError::Conflict {
            what: format!(
                "the CRL in {dn:?} changed under each of {CRL_TRIES} attempts to publish this one (other masters \
                 publishing at the same time)"
            ),
        })
    }

    /// The service certificates the masters `ids` published (`vouchCa=service-<id>`): each
    /// master CA's id and the certificate (DER), unchecked. One search, one level under the
    /// base DN, by equality on each entry's name (vouchCa has no substring rule).
    pub(super) fn service_entries(&self, ids: &[String]) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut filter = String::from("(&(objectClass=vouchIssuer)(|");
        for id in ids {
            super::check_hex("master CA id", id)?;
            filter.push_str(&format!("(vouchCa={SERVICE_PREFIX}{id})"));
        }
        filter.push_str("))");
        let mut out = Vec::new();
        for e in self.search(&self.base, Scope::OneLevel, &filter, &["vouchCa", "vouchCertificate"])? {
            let (Some(name), Some(der)) = (e.text("vouchCa"), e.bytes("vouchCertificate")) else { continue };
            let Some(id) = name.strip_prefix(SERVICE_PREFIX) else { continue };
            // Only the entry at its own DN (another entry carrying the same value is no master's).
            if same_dn(&e.dn, &self.service_dn(id)) {
                out.push((id.to_string(), der.to_vec()));
            }
        }
        Ok(out)
    }
}
