//! Whether the journal may hold entries under a legacy replay key (the nonce alone, as vouch
//! keyed version 2 attributes before binding the key to the conductor:
//! [`ReplayKey::legacy`](crate::vouching::replay_key::ReplayKey::legacy)), which a claim must
//! then read too. vouch never writes such a key: only `vouch migrate` can bring one in,
//! copying a file journal's entries (named by their digests, which do not tell a legacy key's
//! from another). Deny by default: a claim reads the legacy key unless the journal's container
//! holds the positive mark [`NO_LEGACY_MARK`] (a `description` value of `ou=journal`: no
//! schema change). Only `vouch ldap init` writes it, and only on an empty journal (a store no
//! `vouch migrate` wrote into, whatever version); `vouch migrate` removes it (the exact value)
//! before it copies an entry and again after its last one. A process trusts a reading of the
//! mark for a minute; a failed read counts as no mark.

use super::conn::rc;
use super::entry::set;
use super::LdapStore;
use crate::store::StoreError;
use ldap3::{Mod, Scope};
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

/// The `description` value of `ou=journal` that says it holds no legacy keys' entries.
pub const NO_LEGACY_MARK: &str = "vouch:journal:no-legacy-keys";

/// How long a process trusts a reading of the mark (seconds).
const RECHECK: i64 = 60;

impl LdapStore {
    /// Whether a claim must read the legacy key too: unless the journal is marked (see the
    /// module). A failed read of the mark answers yes.
    pub(super) fn legacy_claims(&self) -> bool {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        if now.saturating_sub(self.legacy_checked.load(Ordering::Acquire)) < RECHECK {
            return !self.no_legacy_seen.load(Ordering::Acquire);
        }
        let Ok(e) = self.read_attrs(&self.primary, &self.container("journal"), &["description"]) else {
            return true;
        };
        let marked = e.is_some_and(|e| {
            e.attrs.get("description").is_some_and(|v| v.iter().any(|d| d.as_slice() == NO_LEGACY_MARK.as_bytes()))
        });
        self.no_legacy_seen.store(marked, Ordering::Release);
        self.legacy_checked.store(now, Ordering::Release);
        !marked
    }

    /// `vouch ldap init`: marks an empty journal as holding no legacy keys' entries. The mark
    /// is added first and the journal looked at after: an entry `vouch migrate` copies
    /// meanwhile is either seen here (the mark removed again) or followed by migrate's own
    /// removal. True if the journal is marked (now or before).
    pub fn mark_no_legacy(&self) -> Result<bool, StoreError> {
        let dn = self.container("journal");
        if self.journal_holds_entries()? {
            return self.no_legacy_marked();
        }
        match self.modify(&dn, vec![Mod::Add(b"description".to_vec(), set(NO_LEGACY_MARK))])? {
            rc::SUCCESS | rc::TYPE_OR_VALUE_EXISTS => {}
            code => return Err(mark_error(dn, "mark", code)),
        }
        if self.journal_holds_entries()? {
            self.unmark_no_legacy()?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether the journal holds the mark now (one read).
    fn no_legacy_marked(&self) -> Result<bool, StoreError> {
        let e = self.read_attrs(&self.primary, &self.container("journal"), &["description"])?;
        Ok(e.is_some_and(|e| {
            e.attrs.get("description").is_some_and(|v| v.iter().any(|d| d.as_slice() == NO_LEGACY_MARK.as_bytes()))
        }))
    }

    /// Whether any entry is under `ou=journal` (the first one found ends the search).
    fn journal_holds_entries(&self) -> Result<bool, StoreError> {
        let mut any = false;
        self.search_each(&self.container("journal"), Scope::OneLevel, "(objectClass=*)", &["1.1"], |_| {
            any = true;
            Ok(ControlFlow::Break(()))
        })?;
        Ok(any)
    }

    /// `vouch migrate`: removes the mark (a delete of its exact value; none there is fine),
    /// before it copies a journal entry and after its last one.
    pub fn unmark_no_legacy(&self) -> Result<(), StoreError> {
        let dn = self.container("journal");
        match self.modify(&dn, vec![Mod::Delete(b"description".to_vec(), set(NO_LEGACY_MARK))])? {
            rc::SUCCESS | rc::NO_SUCH_ATTRIBUTE => {
                self.no_legacy_seen.store(false, Ordering::Release);
                Ok(())
            }
            code => Err(mark_error(dn, "unmark", code)),
        }
    }
}

fn mark_error(dn: String, what: &str, code: u32) -> StoreError {
    StoreError::Ldap {
        op: "modify",
        dn,
        detail: format!("could not {what} the journal as holding no legacy-keyed entries (result code {code})"),
    }
}
