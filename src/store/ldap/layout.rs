//! `vouch store verify` on the shared store: what the trait's reads cannot see. A
//! revocation cut short between its writes (its entry under the CA added, the certname's
//! registry entry still saying issued) reads as revoked by serial and as valid by certname:
//! each such certificate is named (revocation-unfinished). A registry entry left `purging`
//! (tombstones.rs) is named too: a purge left unfinished (purge-unfinished), or, when its
//! certificate was never revoked (no revocation entry), no purge's at all
//! (purging-live-certificate).

use super::entry::{check_hex, gtime_to_rfc3339};
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

    /// Every registry entry left `purging`: a purge's, unfinished, or (no revocation entry of
    /// its serial: its certificate was never revoked) no purge's.
    pub(super) fn purging_entries(&self, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let attrs = ["vouchSerial", "vouchCertname", "vouchCa", "vouchNotAfter", "modifyTimestamp"];
        let filter = format!("(&(objectClass=vouchRegistered)(vouchState={PURGING}))");
        let found = self.search(&self.container("certnames"), Scope::OneLevel, &filter, &attrs)?;
        for e in found {
            let (serial, certname, ca) = (e.need("vouchSerial")?, e.need("vouchCertname")?, e.need("vouchCa")?);
            check_hex("serial", &serial)?;
            check_hex("CA id", &ca)?;
            if self.read_attrs(&self.primary, &self.revocation_dn(&ca, &serial), &["1.1"])?.is_none() {
                let not_after = gtime_to_rfc3339(&e.text("vouchNotAfter").unwrap_or_default());
                f(Finding::PurgingLiveCertificate { serial, certname, not_after });
            } else {
                let since = gtime_to_rfc3339(&e.text("modifyTimestamp").unwrap_or_default());
                f(Finding::PurgeUnfinished { serial, certname, since });
            }
        }
        Ok(())
    }
}
