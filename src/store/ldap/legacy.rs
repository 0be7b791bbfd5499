//! The mark that the journal may hold entries under a legacy replay key (the nonce alone, as
//! vouch keyed version 2 attributes before binding the key to the conductor:
//! [`ReplayKey::legacy`](crate::vouching::replay_key::ReplayKey::legacy)). vouch never writes
//! such a key: only `vouch migrate` can bring one in, copying a file journal's entries (named
//! by their digests, which do not tell a legacy key's from another). So migrate marks the
//! journal's container (a `description` value of `ou=journal`: no schema change) before it
//! copies the first entry, and a claim reads the entry under the legacy key only in a store so
//! marked. A process reads the mark at its first claim and again at most once a minute until
//! it sees it (then for good: a legacy entry lives as long as its attributes).

use super::conn::rc;
use super::entry::set;
use super::LdapStore;
use crate::store::StoreError;
use ldap3::Mod;
use std::sync::atomic::Ordering;

/// The `description` value of `ou=journal` that says it may hold legacy keys' entries.
pub const LEGACY_MARK: &str = "vouch: replay-journal entries copied by vouch migrate (legacy keys possible)";

/// How long a process trusts a reading that found no mark (seconds).
const RECHECK: i64 = 60;

impl LdapStore {
    /// Whether the journal may hold entries under legacy keys: the mark (see the module).
    pub(super) fn legacy_claims(&self) -> Result<bool, StoreError> {
        if self.legacy_marked.load(Ordering::Acquire) {
            return Ok(true);
        }
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        if now.saturating_sub(self.legacy_checked.load(Ordering::Acquire)) < RECHECK {
            return Ok(false);
        }
        let e = self.read_attrs(&self.primary, &self.container("journal"), &["description"])?;
        let marked = e.is_some_and(|e| {
            e.attrs.get("description").is_some_and(|v| v.iter().any(|d| d.as_slice() == LEGACY_MARK.as_bytes()))
        });
        if marked {
            self.legacy_marked.store(true, Ordering::Release);
        } else {
            self.legacy_checked.store(now, Ordering::Release);
        }
        Ok(marked)
    }

    /// Marks the journal as one that may hold legacy keys' entries (`vouch migrate`, before
    /// the first entry it copies); idempotent.
    pub(super) fn mark_legacy_claims(&self) -> Result<(), StoreError> {
        if self.legacy_marked.load(Ordering::Acquire) {
            return Ok(());
        }
        let dn = self.container("journal");
        match self.modify(&dn, vec![Mod::Add(b"description".to_vec(), set(LEGACY_MARK))])? {
            rc::SUCCESS | rc::TYPE_OR_VALUE_EXISTS => {
                self.legacy_marked.store(true, Ordering::Release);
                Ok(())
            }
            code => Err(StoreError::Ldap {
                op: "modify",
                dn,
                detail: format!("could not mark the journal as holding copied entries (result code {code})"),
            }),
        }
    }
}
