//! `vouch migrate` into the shared store: a file store's current certificates, revocations,
//! replay-journal entries and template cells (use counts, use records, instance claims),
//! each written as the store writes its own (idempotent: an entry already there is
//! reported, never replaced; a lower template count is raised, never lowered).

use super::conn::rc;
use super::entry::{check_certname, check_hex};
use super::replicas::Written;
use super::templates::{LdapCells, LdapInstances};
use super::LdapStore;
use crate::encoding::time::parse_rfc3339;
use crate::store::journal::Cell;
use crate::store::templates::{Cells, Count, InstanceClaims};
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

/// What `vouch migrate` did with one of a template's cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Imported {
    Copied,
    /// Already there (a count: as high or higher; a use record: recorded).
    Present,
    /// A count the LDAP store held lower than the file store's, raised from `from` uses.
    Raised {
        from: u64,
    },
    /// A count the LDAP store held from uses of its own (not an earlier copy of this
    /// store's): set to the sum of both, from `shared` uses.
    Summed {
        shared: u64,
    },
    /// An instance claim the LDAP store gives to another use: kept.
    HeldByAnother {
        holder: String,
    },
}

impl LdapStore {
    /// `vouch migrate`: a template's use count. Absent: added. Counted in the LDAP store on
    /// its own (`ours(LAST)` false for the LDAP count's last use: not this store's count
    /// copied by an earlier run): set to the sum of both, which may deny a use counted in
    /// both but never gives one twice. Else lower than `cell`'s: raised; as high or higher:
    /// kept (never lowered). Each change by the compare-and-swap a use makes (after the use
    /// record of the count's last instance, as a use moving past it writes it).
    pub fn import_template_count(
        &self,
        cell: &Cell<Count>,
        ours: &dyn Fn(&str) -> bool,
    ) -> Result<Imported, StoreError> {
        check_hex("template count", &cell.digest)?;
        let cells = LdapCells { store: self, template: cell.digest.clone(), expiry: cell.until };
        for _ in 0..64 {
            match cells.read_count()? {
                None => {
                    if cells.swap_count(None, &cell.value)? {
                        return Ok(Imported::Copied);
                    }
                }
                Some(c) if c.uses > 0 && cell.value.uses > 0 && c.last != cell.value.last && !ours(&c.last) => {
                    if !c.last.is_empty() {
                        cells.record_use(&c.last, c.uses)?;
                    }
                    let sum = Count { uses: c.uses.saturating_add(cell.value.uses), last: c.last.clone() };
                    if cells.swap_count(Some(&c), &sum)? {
                        return Ok(Imported::Summed { shared: c.uses });
                    }
                }
                Some(c) if c.uses >= cell.value.uses => return Ok(Imported::Present),
                Some(c) => {
                    if !c.last.is_empty() {
                        cells.record_use(&c.last, c.uses)?;
                    }
                    if cells.swap_count(Some(&c), &cell.value)? {
                        return Ok(Imported::Raised { from: c.uses });
                    }
                }
            }
        }
        Err(StoreError::Conflict { what: format!("the template count {}", self.journal_dn(&cell.digest)) })
    }

    /// `vouch migrate`: whether the instance's use record `digest` is in the store.
    pub fn template_use_present(&self, digest: &str) -> Result<bool, StoreError> {
        check_hex("template use", digest)?;
        let cells = LdapCells { store: self, template: digest.to_string(), expiry: time::OffsetDateTime::UNIX_EPOCH };
        Ok(cells.read_use(digest)?.is_some())
    }

    /// `vouch migrate`: an instance's use record, unless one is there. Its file does not
    /// name its template: the entry's holder slot names the use itself (nothing reads it).
    pub fn import_template_use(&self, cell: &Cell<u64>) -> Result<Imported, StoreError> {
        check_hex("template use", &cell.digest)?;
        let cells = LdapCells { store: self, template: cell.digest.clone(), expiry: cell.until };
        let dn = self.journal_dn(&cell.digest);
        if self.add(&dn, cells.attrs(&cell.digest, &format!("use:{}", cell.value)))? != rc::SUCCESS {
            return Ok(Imported::Present);
        }
        self.confirm_on_replicas(&dn, Written::Claim)?;
        Ok(Imported::Copied)
    }

    /// `vouch migrate`: an instance claim for its holder, taken as a use takes it (added, or
    /// a released one taken over); one another use holds is kept.
    pub fn import_instance_claim(&self, cell: &Cell<String>) -> Result<Imported, StoreError> {
        check_hex("instance claim", &cell.digest)?;
        check_hex("holder", &cell.value)?;
        let claims = LdapInstances { store: self, expiry: cell.until };
        match claims.instance_holder(&cell.digest)? {
            Some(h) if h == cell.value => return Ok(Imported::Present),
            Some(holder) => return Ok(Imported::HeldByAnother { holder }),
            None => {}
        }
        if claims.claim_instance(&cell.digest, &cell.value)? {
            return Ok(Imported::Copied);
        }
        let holder = claims.instance_holder(&cell.digest)?.unwrap_or_default();
        Ok(Imported::HeldByAnother { holder })
    }
}
