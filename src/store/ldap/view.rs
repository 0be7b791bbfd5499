//! What issuance reads of a certname before it stores a certificate for it, in one search
//! ([`Store::issuance_view`](crate::store::Store::issuance_view)): the certname's registry
//! entry, its pending request if one is kept, and every certificate entry (registered or
//! revoked, under any master CA) with the serial about to be used. Three base reads and a
//! search in one round trip; a subtree search from the base DN on two indexed attributes
//! (`vouchCertname`, `vouchSerial`).

use super::entry::{check_certname, check_hex, Entry};
use super::LdapStore;
use crate::store::{Current, IssuanceView, Store, StoreError};
use ldap3::Scope;

/// Whether the entry has the object class `class`.
fn is(e: &Entry, class: &str) -> bool {
    e.attrs.get("objectclass").is_some_and(|v| v.iter().any(|c| c.eq_ignore_ascii_case(class.as_bytes())))
}

impl LdapStore {
    /// [`Store::issuance_view`]: one search. More than one registry entry for the certname (a
    /// tampered store: entries of its class outside `ou=certnames`) is settled by the base read
    /// of the certname's own entry, as [`Store::current`] reads it.
    pub(super) fn view(&self, certname: &str, serial: Option<&str>) -> Result<IssuanceView, StoreError> {
        check_certname(certname)?;
        if let Some(s) = serial {
            check_hex("serial", s)?;
        }
        let by_name =
            format!("(&(vouchCertname={certname})(|(objectClass=vouchRegistered)(objectClass=vouchRequest)))");
        let filter = match serial {
            Some(s) => {
                format!("(|{by_name}(&(vouchSerial={s})(|(objectClass=vouchRegistered)(objectClass=vouchRevocation))))")
            }
            None => by_name,
        };
        let attrs = [
            "objectClass",
            "vouchCertname",
            "vouchSerial",
            "vouchState",
            "vouchRecord",
            "vouchCertificate",
            "vouchRevision",
        ];
        let found = self.search(&self.base, Scope::Subtree, &filter, &attrs)?;
        let named = |e: &&Entry| e.text("vouchCertname").as_deref() == Some(certname);
        let registered: Vec<&Entry> = found.iter().filter(|e| is(e, "vouchRegistered")).filter(named).collect();
        let current = match registered.as_slice() {
            [] => None,
            [e] => Self::current_of(e)?,
            _ => self.current(certname)?,
        };
        let request = found.iter().filter(|e| is(e, "vouchRequest")).any(|e| named(&e));
        let serial = serial.map(|s| {
            let used = found.iter().any(|e| {
                (is(e, "vouchRegistered") || is(e, "vouchRevocation")) && e.text("vouchSerial").as_deref() == Some(s)
            });
            (s.to_string(), used)
        });
        Ok(IssuanceView { current, request: Some(request), serial })
    }

    /// A registry entry as [`Store::current`] reads it (a cleaned certname's tombstone: none).
    pub(super) fn current_of(e: &Entry) -> Result<Option<Current>, StoreError> {
        if super::tombstone(e) {
            return Ok(None);
        }
        Ok(Some(Current { record: e.record()?, pem: e.need("vouchCertificate")?, revision: e.revision()? }))
    }
}
