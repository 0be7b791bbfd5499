//! `--store-confirm-replicas`: an entry written to the primary is awaited on every
//! `--store-replica` before the answer, and what a time-out means depends on what was
//! written: a claim or a hold (nothing signed yet: the requester retries) or a change that
//! stands on the primary (a certificate, a revocation, the root CRL: the same command run
//! again confirms it, changing nothing twice). Also the count of pending requests, bounded.

use super::{Entry, LdapStore, REPLICA_WAIT};
use crate::store::StoreError;
use ldap3::Scope;
use std::ops::ControlFlow;
use std::time::Duration;

/// What the entry being confirmed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// A claim or a hold of attributes: nothing was signed; the requester may retry.
    Claim,
    /// A change that stands on the primary whatever the replicas show.
    Change,
}

impl LdapStore {
    /// Waits until the entry `dn` is readable on every replica (bounded by [`REPLICA_WAIT`]).
    pub(super) fn confirm_on_replicas(&self, dn: &str, written: Written) -> Result<(), StoreError> {
        self.confirm_on_replicas_that(dn, written, |_| true)
    }

    /// [`LdapStore::confirm_on_replicas`] for an entry that must also satisfy `ok` there (a
    /// registry entry holding the new serial).
    pub(super) fn confirm_on_replicas_that(
        &self,
        dn: &str,
        written: Written,
        ok: impl Fn(&Entry) -> bool,
    ) -> Result<(), StoreError> {
        if !self.confirm_replicas {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + REPLICA_WAIT;
        for replica in &self.replicas {
            loop {
                // An unreachable replica is one that does not show it (yet).
                if self.read(replica, dn).ok().flatten().as_ref().is_some_and(&ok) {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    let missing = format!(
                        "{dn} did not show on replica {} within {} ms",
                        replica.server.address,
                        REPLICA_WAIT.as_millis()
                    );
                    return Err(match written {
                        Written::Claim => StoreError::Unavailable {
                            detail: format!(
                                "{missing} (a claim: nothing was signed, it stays this key's and a retry may succeed)"
                            ),
                        },
                        Written::Change => StoreError::Unconfirmed { detail: missing },
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// How many pending requests the store keeps, counted up to `at_most` (no further: the
    /// caller only asks whether there is room).
    pub(super) fn count_request_entries(&self, at_most: usize) -> Result<usize, StoreError> {
        let mut n = 0usize;
        self.search_each(&self.container("requests"), Scope::OneLevel, "(objectClass=vouchRequest)", &["1.1"], |_| {
            n = n.saturating_add(1);
            Ok(if n >= at_most { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })?;
        Ok(n)
    }
}
