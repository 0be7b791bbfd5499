//! `vouch store verify` on the shared store: the entries a multi-supplier 389 Directory
//! Server made of two writes that each supplier accepted (`nsds5ReplConflict`, class
//! `ldapsubentry`, found only by a filter that names them). Each is a lost first-use-wins
//! decision: a one-time-use claim or a certname's registry entry added on both suppliers,
//! the loser renamed aside with the certificate it held (valid, in a node's hands, listed
//! nowhere). vouch's bind DN reads them under its base, though not the replication set-up
//! that would warn before; OpenLDAP knows no such attribute and finds none.

use super::LdapStore;
use crate::store::verify::Finding;
use crate::store::StoreError;
use ldap3::Scope;
use std::ops::ControlFlow;

/// Conflict entries of every class, `ldapsubentry` among them (named, or 389 DS hides them).
const FILTER: &str = "(&(nsds5ReplConflict=*)(|(objectClass=ldapsubentry)(objectClass=*)))";

impl LdapStore {
    /// Every replication conflict entry under the store's base, each a finding naming the
    /// certificate it holds (if any).
    pub(super) fn replication_conflicts(&self, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let mut found = Vec::new();
        let attrs = ["nsds5ReplConflict", "vouchSerial", "vouchCertname"];
        self.search_each(&self.base, Scope::Subtree, FILTER, &attrs, |e| {
            found.push(Finding::ReplicationConflict {
                dn: e.dn.clone(),
                conflict: e.text("nsds5ReplConflict").unwrap_or_default(),
                certname: e.text("vouchCertname").unwrap_or_else(|| "-".into()),
                serial: e.text("vouchSerial").unwrap_or_else(|| "-".into()),
            });
            Ok(ControlFlow::Continue(()))
        })?;
        found.into_iter().for_each(f);
        Ok(())
    }
}
