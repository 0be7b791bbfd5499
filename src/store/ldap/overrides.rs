//! Administrators' classifications (`ou=overrides`): one entry per certname, its revision
//! counting every set and clear, changed by compare-and-swap on that revision.

use super::conn::rc;
use super::entry::{check_certname, gtime, set};
use super::LdapStore;
use crate::encoding::time::format_rfc3339;
use crate::store::{Override, Store, StoreError};
use ldap3::Mod;
use time::OffsetDateTime;

impl LdapStore {
    /// [`Store::put_override`](crate::store::Store::put_override): an add where none was
    /// ever set, else a modify asserting the revision read (or expected), retried while
    /// other writers change it (without `expect`).
    pub(super) fn write_override(
        &self,
        certname: &str,
        classification: Option<&str>,
        expect: Option<u64>,
        now: OffsetDateTime,
    ) -> Result<Override, StoreError> {
        check_certname(certname)?;
        let dn = self.override_dn(certname);
        let have = || -> Result<u64, StoreError> { Ok(self.get_override(certname)?.map(|o| o.revision).unwrap_or(0)) };
        for _ in 0..16 {
            let current = match expect {
                Some(n) => n,
                None => self.get_override(certname)?.map(|o| o.revision).unwrap_or(0),
            };
            let Some(next) = current.checked_add(1) else {
                return Err(crate::store::override_conflict(certname, current, have()?));
            };
            let done = Override {
                certname: certname.to_string(),
                classification: classification.map(str::to_string),
                revision: next,
                time: format_rfc3339(now),
            };
            let code = if current == 0 {
                let mut attrs = vec![
                    ("objectClass", set("vouchOverride")),
                    ("vouchCertname", set(certname.as_bytes().to_vec())),
                    ("vouchRevision", set(next.to_string())),
                    ("vouchTime", set(gtime(now))),
                ];
                if let Some(c) = classification {
                    attrs.push(("vouchClassification", set(c.as_bytes().to_vec())));
                }
                match self.add(&dn, attrs)? {
                    rc::SUCCESS => rc::SUCCESS,
                    _ => rc::ASSERTION_FAILED,
                }
            } else {
                let mods = vec![
                    Mod::Replace(b"vouchRevision".to_vec(), set(next.to_string())),
                    Mod::Replace(b"vouchTime".to_vec(), set(gtime(now))),
                    Mod::Replace(
                        b"vouchClassification".to_vec(),
                        classification.map(|c| set(c.as_bytes().to_vec())).unwrap_or_default(),
                    ),
                ];
                self.modify(&dn, mods, Some(&format!("(vouchRevision={current})")))?
            };
            if code == rc::SUCCESS {
                return Ok(done);
            }
            if let Some(n) = expect {
                return Err(crate::store::override_conflict(certname, n, have()?));
            }
        }
        Err(StoreError::Conflict { what: format!("the override of {certname} kept changing under concurrent writers") })
    }
}
