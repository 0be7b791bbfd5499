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
use std::ops::ControlFlow;

/// Whether the entry has the object class `class`.
fn is(e: &Entry, class: &str) -> bool {
    e.attrs.get("objectclass").is_some_and(|v| v.iter().any(|c| c.eq_ignore_ascii_case(class.as_bytes())))
}

/// Whether two DNs are the same as vouch writes them (case and spaces after separators aside).
fn same_dn(a: &str, b: &str) -> bool {
    let norm =
        |s: &str| s.split(',').map(|rdn| rdn.trim().replace(" = ", "=").to_ascii_lowercase()).collect::<Vec<_>>();
    norm(a) == norm(b)
}

impl LdapStore {
    /// [`Store::issuance_view`]: one search. Only the entries at the certname's own DNs count;
    /// any other registry entry with the certname (a tampered store: entries of its class
    /// outside `ou=certnames`) makes the answer the base read of the certname's own entry, as
    /// [`Store::current`] reads it (and leaves whether a request is pending unknown).
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
        // Only the entries at the certname's own DNs are its own: an entry of the class
        // elsewhere (under `ou=journal`, which the hooks' account may write) is not. One
        // found elsewhere sends the answer to the exact read, as a DN the server spells
        // otherwise would.
        let (registry_dn, request_dn) = (self.registry_dn(certname), self.request_dn(certname));
        let registered: Vec<&Entry> = found.iter().filter(|e| is(e, "vouchRegistered")).filter(named).collect();
        let current = match registered.as_slice() {
            [] => None,
            [e] if same_dn(&e.dn, &registry_dn) => Self::current_of(e)?,
            _ => self.current(certname)?,
        };
        let requests: Vec<&Entry> = found.iter().filter(|e| is(e, "vouchRequest")).filter(named).collect();
        let request = match requests.as_slice() {
            [] => Some(false),
            [e] if same_dn(&e.dn, &request_dn) => Some(true),
            // Not known: the removal after an issuance runs as always.
            _ => None,
        };
        let serial = serial.map(|s| {
            let used = found.iter().any(|e| {
                (is(e, "vouchRegistered") || is(e, "vouchRevocation")) && e.text("vouchSerial").as_deref() == Some(s)
            });
            (s.to_string(), used)
        });
        Ok(IssuanceView { current, request, serial })
    }

    /// Every listed certname's current certificate from one paged search of the registry
    /// (the entries whole), as [`Store::current`] reads each: a listing of every certificate
    /// in a round trip per thousand instead of one per certificate. An entry not at its
    /// certname's own DN (nothing vouch writes) is answered by the read of that DN instead,
    /// as [`Store::issuance_view`] does.
    pub(super) fn each_current(
        &self,
        f: &mut (dyn FnMut(Current) -> ControlFlow<()> + Send),
    ) -> Result<(), StoreError> {
        let base = self.container("certnames");
        let filter = format!(
            "(&(objectClass=vouchRegistered)(!(vouchState={}))(!(vouchState={})))",
            super::CLEANED,
            super::PURGING
        );
        self.search_each(&base, Scope::OneLevel, &filter, &["*"], |e| {
            let certname = e.need("vouchCertname")?;
            check_certname(&certname)?;
            let current = if same_dn(&e.dn, &self.registry_dn(&certname)) {
                Self::current_of(&e)?
            } else {
                self.current(&certname)?
            };
            Ok(current.map_or(ControlFlow::Continue(()), &mut *f))
        })
    }

    /// A registry entry as [`Store::current`] reads it (a cleaned certname's tombstone: none).
    pub(super) fn current_of(e: &Entry) -> Result<Option<Current>, StoreError> {
        if super::tombstone(e) {
            return Ok(None);
        }
        Ok(Some(Current { record: e.record()?, pem: e.need("vouchCertificate")?, revision: e.revision()? }))
    }
}
