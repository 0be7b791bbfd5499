//! `vouch store verify` on the shared store: what the trait's reads cannot see. A
//! revocation cut short between its writes (its entry under the CA added, the certname's
//! registry entry still saying issued) reads as revoked by serial and as valid by certname:
//! each such certificate is named (revocation-unfinished).

use super::{LdapStore, CLEANED, PURGING};
use crate::store::verify::Finding;
use crate::store::StoreError;
use ldap3::Scope;
use std::collections::HashMap;
use std::ops::ControlFlow;

impl LdapStore {
    /// Every registry entry that says issued for a serial a revocation entry (of any master
    /// CA) lists: two paged searches, the revoked serials held in memory.
    pub(super) fn unfinished_revocations(&self, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let mut revoked: HashMap<String, String> = HashMap::new();
        let attrs = ["vouchSerial", "vouchCertname"];
        self.search_each(&self.container("cas"), Scope::Subtree, "(objectClass=vouchRevocation)", &attrs, |e| {
            if let (Some(serial), Some(certname)) = (e.text("vouchSerial"), e.text("vouchCertname")) {
                revoked.insert(serial.to_ascii_lowercase(), certname);
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if revoked.is_empty() {
            return Ok(());
        }
        let filter = format!(
            "(&(objectClass=vouchRegistered)(!(vouchState=revoked))(!(vouchState={CLEANED}))(!(vouchState={PURGING})))"
        );
        let mut found = Vec::new();
        self.search_each(&self.container("certnames"), Scope::OneLevel, &filter, &attrs, |e| {
            if let (Some(serial), Some(certname)) = (e.text("vouchSerial"), e.text("vouchCertname")) {
                if revoked.contains_key(&serial.to_ascii_lowercase()) {
                    found.push(Finding::RevocationUnfinished { serial, certname });
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        found.into_iter().for_each(f);
        Ok(())
    }
}
