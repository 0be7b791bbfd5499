//! Administrators' classifications (`ou=overrides`): one entry per certname, its revision
//! counting every set and clear, changed by compare-and-swap on that revision (the old
//! value deleted and the new one added in one modify).

use super::conn::rc;
use super::entry::{check_certname, gtime, set};
use super::ops::cas;
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
                self.add(&dn, attrs)?
            } else {
                // Compare-and-swap on the revision (ops::cas): a stale writer changes nothing.
                let mut mods = cas("vouchRevision", current.to_string(), next.to_string()).to_vec();
                mods.extend([
                    Mod::Replace(b"vouchTime".to_vec(), set(gtime(now))),
                    Mod::Replace(
                        b"vouchClassification".to_vec(),
                        classification.map(|c| set(c.as_bytes().to_vec())).unwrap_or_default(),
                    ),
                ]);
                self.modify(&dn, mods)?
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
