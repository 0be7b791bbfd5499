//! Template use counts in the shared store (signature version 3; the algorithm is
//! [`crate::store::templates`]), as `vouchClaim` entries under `ou=journal` (no schema
//! change), pruned with the journal by their `vouchExpiry`:
//!
//! - the count: `vouchKey=T` (T: the digest of the template's key), `vouchState:
//!   count:USES:LAST`, changed by ONE modify that deletes the exact old value and adds the
//!   new one: if another master changed it first, the delete finds no such value and the
//!   whole modify fails (noSuchAttribute), nothing written; the first count is an add
//!   (entryAlreadyExists when another master made it first);
//! - one use record per counted instance: `vouchKey=U` (the digest of `template-use:` and
//!   the instance's key: not its replay-journal claim's DN), `vouchState: use:N`, made by
//!   an add and never changed;
//! - one instance claim per instance of a bound template: `vouchKey=C` (the digest of
//!   `instance-claim:` and `aws:ACCOUNT:INSTANCE-ID`), `vouchState: instance`, `vouchHolder`:
//!   the use that took it; made by an add (entryAlreadyExists: another master took it
//!   first; its holder read back). A use that then finds its template full gives it back
//!   by swapping its holder to `released` (one modify deleting the exact old value); the
//!   next use of the instance takes a released claim over by the same kind of swap (no
//!   assertion control, no increment: also 389 Directory Server).

use super::conn::rc;
use super::entry::{gtime, set};
use super::replicas::Written;
use super::LdapStore;
use crate::store::templates::{
    format_count, parse_count, peek_template, use_template, Cells, Count, Counted, InstanceClaims, TemplateUse,
};
use crate::store::StoreError;
use ldap3::Mod;
use std::collections::HashSet;
use time::OffsetDateTime;

/// The certname slot of a template's entries (vouchClaim requires one; they vouch for none).
const CERTNAME: &str = "template";

struct LdapCells<'a> {
    store: &'a LdapStore,
    template: String,
    expiry: OffsetDateTime,
}

impl LdapCells<'_> {
    fn attrs(&self, key: &str, state: &str) -> Vec<(&'static str, HashSet<Vec<u8>>)> {
        vec![
            ("objectClass", set("vouchClaim")),
            ("vouchKey", set(key.as_bytes().to_vec())),
            ("vouchCertname", set(CERTNAME)),
            ("vouchHolder", set(self.template.as_bytes().to_vec())),
            ("vouchState", set(state.as_bytes().to_vec())),
            ("vouchTime", set(gtime(OffsetDateTime::now_utc()))),
            ("vouchExpiry", set(gtime(self.expiry))),
        ]
    }

    fn state(&self, key: &str) -> Result<Option<String>, StoreError> {
        let dn = self.store.journal_dn(key);
        Ok(self.store.read(&self.store.primary, &dn)?.and_then(|e| e.text("vouchState")))
    }

    fn corrupt(&self, key: &str, detail: &str) -> StoreError {
        StoreError::Ldap { op: "read a template count", dn: self.store.journal_dn(key), detail: detail.to_string() }
    }
}

impl Cells for LdapCells<'_> {
    fn read_count(&self) -> Result<Option<Count>, StoreError> {
        match self.state(&self.template)? {
            None => Ok(None),
            Some(s) => s
                .strip_prefix("count:")
                .and_then(parse_count)
                .map(Some)
                .ok_or_else(|| self.corrupt(&self.template, "its vouchState is not count:USES:LAST")),
        }
    }

    fn swap_count(&self, old: Option<&Count>, new: &Count) -> Result<bool, StoreError> {
        let dn = self.store.journal_dn(&self.template);
        let new_state = format!("count:{}", format_count(new));
        let code = match old {
            None => self.store.add(&dn, self.attrs(&self.template, &new_state))?,
            Some(old) => {
                let old_state = format!("count:{}", format_count(old));
                let mods = vec![
                    Mod::Delete(b"vouchState".to_vec(), set(old_state.into_bytes())),
                    Mod::Add(b"vouchState".to_vec(), set(new_state.into_bytes())),
                ];
                self.store.modify(&dn, mods)?
            }
        };
        if code != rc::SUCCESS {
            return Ok(false);
        }
        self.store.confirm_on_replicas(&dn, Written::Claim)?;
        Ok(true)
    }

    fn read_use(&self, instance: &str) -> Result<Option<u64>, StoreError> {
        match self.state(instance)? {
            None => Ok(None),
            Some(s) => s
                .strip_prefix("use:")
                .and_then(|n| n.parse().ok())
                .map(Some)
                .ok_or_else(|| self.corrupt(instance, "its vouchState is not use:N")),
        }
    }

    fn record_use(&self, instance: &str, number: u64) -> Result<(), StoreError> {
        let dn = self.store.journal_dn(instance);
        // entryAlreadyExists: recorded before (by this instance's retry, or a helper).
        self.store.add(&dn, self.attrs(instance, &format!("use:{number}")))?;
        self.store.confirm_on_replicas(&dn, Written::Claim)
    }
}

/// The store's instance claims: `vouchClaim` entries of certname slot `instance`, their
/// holder in `vouchHolder`.
struct LdapInstances<'a> {
    store: &'a LdapStore,
    expiry: OffsetDateTime,
}

impl InstanceClaims for LdapInstances<'_> {
    fn claim_instance(&self, key: &str, holder: &str) -> Result<bool, StoreError> {
        let dn = self.store.journal_dn(key);
        let attrs = vec![
            ("objectClass", set("vouchClaim")),
            ("vouchKey", set(key.as_bytes().to_vec())),
            ("vouchCertname", set("instance")),
            ("vouchHolder", set(holder.as_bytes().to_vec())),
            ("vouchState", set("instance")),
            ("vouchTime", set(gtime(OffsetDateTime::now_utc()))),
            ("vouchExpiry", set(gtime(self.expiry))),
        ];
        for _ in 0..3 {
            if self.store.add(&dn, attrs.clone())? == rc::SUCCESS {
                self.store.confirm_on_replicas(&dn, Written::Claim)?;
                return Ok(true);
            }
            // entryAlreadyExists: whoever took it (pruned meanwhile: expired, added again).
            match self.raw_holder(key)? {
                // Given back: taken over by one swap (the released value deleted, so one
                // taker wins), its expiry now this use's.
                Some(h) if h == RELEASED => {
                    let mods = vec![
                        Mod::Delete(b"vouchHolder".to_vec(), set(RELEASED)),
                        Mod::Add(b"vouchHolder".to_vec(), set(holder.as_bytes().to_vec())),
                        Mod::Replace(b"vouchExpiry".to_vec(), set(gtime(self.expiry))),
                    ];
                    if self.store.modify(&dn, mods)? == rc::SUCCESS {
                        self.store.confirm_on_replicas(&dn, Written::Claim)?;
                        return Ok(true);
                    }
                }
                Some(h) => {
                    if h == holder {
                        self.store.confirm_on_replicas(&dn, Written::Claim)?;
                    }
                    return Ok(h == holder);
                }
                None => {}
            }
        }
        Err(StoreError::Conflict { what: format!("the instance claim {dn}") })
    }

    fn instance_holder(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.raw_holder(key)?.filter(|h| h != RELEASED))
    }

    /// A compare-and-swap of the holder to [`RELEASED`] (the delete of this holder's exact
    /// value fails, noSuchAttribute, if another holds it). The entry is kept, never deleted:
    /// a delete after the swap could remove a claim another use took over meanwhile.
    fn release_instance(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        let dn = self.store.journal_dn(key);
        let mods = vec![
            Mod::Delete(b"vouchHolder".to_vec(), set(holder.as_bytes().to_vec())),
            Mod::Add(b"vouchHolder".to_vec(), set(RELEASED)),
        ];
        if self.store.modify(&dn, mods)? == rc::SUCCESS {
            self.store.confirm_on_replicas(&dn, Written::Claim)?;
        }
        Ok(())
    }
}

/// The holder of an instance claim given back ([`InstanceClaims::release_instance`]): no
/// use's digest (those are hex).
const RELEASED: &str = "released";

impl LdapInstances<'_> {
    fn raw_holder(&self, key: &str) -> Result<Option<String>, StoreError> {
        let dn = self.store.journal_dn(key);
        Ok(self.store.read(&self.store.primary, &dn)?.and_then(|e| e.text("vouchHolder")))
    }
}

impl LdapStore {
    fn template_cells(&self, u: &TemplateUse) -> (LdapCells<'_>, String) {
        let cells = LdapCells { store: self, template: crate::store::claim_digest(&u.template_key), expiry: u.expiry };
        (cells, crate::store::claim_digest(&format!("template-use:{}", u.instance_key)))
    }

    /// Counts one instance's use of a template, its instance claimed first if the template
    /// is bound ([`crate::store::templates`]).
    pub(super) fn count_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        let (cells, instance) = self.template_cells(u);
        let claims = LdapInstances { store: self, expiry: u.expiry };
        use_template(&cells, &claims, &instance, u.instance_claim.as_deref(), u.max_uses)
    }

    /// What [`LdapStore::count_template_use`] would meet, writing nothing.
    pub(super) fn peek_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        let (cells, instance) = self.template_cells(u);
        let claims = LdapInstances { store: self, expiry: u.expiry };
        peek_template(&cells, &claims, &instance, u.instance_claim.as_deref(), u.max_uses)
    }
}
