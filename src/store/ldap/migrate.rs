//! `vouch migrate` into the shared store: a file store's current certificates, revocations
//! and replay-journal entries, each written as the store writes its own (idempotent: an
//! entry already there is reported, never replaced).

use super::conn::rc;
use super::entry::{check_certname, check_hex};
use super::LdapStore;
use crate::encoding::time::parse_rfc3339;
use crate::store::{CertRecord, Current, Issuance, Revocation, Store, StoreError};

impl LdapStore {
    /// `vouch migrate`: a certname's current certificate from the file store. `Ok(None)`:
    /// copied; `Ok(Some(serial))`: the registry already has that (the same: already copied).
    pub fn import_current(&self, c: &Current) -> Result<Option<String>, StoreError> {
        let iss =
            Issuance { record: c.record.clone(), pem: c.pem.clone(), claim: None, expected: None, supersedes: None };
        match self.register(&iss) {
            Ok(()) => Ok(None),
            Err(StoreError::Conflict { .. }) => {
                Ok(Some(self.current(&c.record.certname)?.map(|x| x.record.serial).unwrap_or_default()))
            }
            Err(e) => Err(e),
        }
    }

    /// `vouch migrate`: a revocation, with its certificate (PEM) where the file store still
    /// holds it; true if it was not there yet.
    pub fn import_revocation(&self, rev: &Revocation, rec: &CertRecord, pem: Option<&str>) -> Result<bool, StoreError> {
        self.add_revocation_with(rev, rec, pem.map(str::as_bytes))
    }

    /// `vouch migrate`: one file journal entry, named by its digest (the file's name), with
    /// what it says (`held`: a refused request's; `issued`: spent; else claimed, reusable by
    /// its holder). True if it was not there yet.
    pub fn import_claim(&self, digest: &str, entry: &serde_json::Value) -> Result<bool, StoreError> {
        check_hex("journal entry", digest)?;
        let field = |k: &str| entry[k].as_str().map(str::to_string);
        let (Some(certname), Some(holder), Some(time), Some(expiry)) =
            (field("certname"), field("holder"), field("time"), field("expiry"))
        else {
            return Err(StoreError::Ldap {
                op: "import",
                dn: digest.to_string(),
                detail: "the journal entry lacks certname, holder, time or expiry".into(),
            });
        };
        check_certname(&certname)?;
        check_hex("holder", &holder)?;
        let parse = |t: &str| {
            parse_rfc3339(t).map_err(|e| StoreError::Ldap {
                op: "import",
                dn: digest.to_string(),
                detail: e.to_string(),
            })
        };
        let state = if entry["held"].as_bool() == Some(true) {
            "held"
        } else if entry["issued"].as_bool() == Some(true) {
            "spent"
        } else {
            "claimed"
        };
        let attrs = Self::claim_attrs(digest, &certname, &holder, state, None, parse(&expiry)?, parse(&time)?);
        // Any copied entry may be under a legacy key (its digest does not say): the journal's
        // mark that it holds none goes first.
        self.unmark_no_legacy()?;
        Ok(self.add(&self.journal_dn(digest), attrs)? == rc::SUCCESS)
    }
}
