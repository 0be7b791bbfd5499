//! What a node's request reads of its certname before the decision, with a store whose writes
//! compare ([`Store::writes_compare`](crate::store::Store::writes_compare): the LDAP store):
//! one read ([`Store::issuance_view`](crate::store::Store::issuance_view)) that answers the
//! early "already signed" check and that admission takes as its own after the decision, with a
//! serial drawn before it and found unused by it. A certname changed in between (another
//! master, a concurrent request, a revocation) makes the store's write fail, storing nothing,
//! and the issuance is admitted again on a fresh reading (the group commit's conflict rounds).

use super::Authority;
use crate::error::Error;
use crate::store::{Current, IssuanceView};

/// One read of a certname before its request's decision ([`Authority::see`]).
pub struct Seen {
    pub(super) view: IssuanceView,
    /// The serial drawn before the read, if the read found it unused: the certificate's.
    pub(super) serial: Option<Vec<u8>>,
}

impl Seen {
    /// The certname's current certificate as read (unchecked: what `GET certificate` shows).
    pub fn current(&self) -> Option<&Current> {
        self.view.current.as_ref()
    }
}

impl Authority {
    /// With a store whose writes compare: a fresh serial and one read of `certname`
    /// ([`Seen`]); `None` with any other store (the file store's admission reads under its
    /// lock, and a read before it would be one more).
    pub fn see(&self, certname: &str) -> Result<Option<Seen>, Error> {
        if !self.store.writes_compare() {
            return Ok(None);
        }
        let serial = Self::new_serial()?;
        let hex = crate::encoding::hex(&serial);
        let view = self.store.issuance_view(certname, Some(&hex))?;
        let serial = view.serial_unused(&hex).then_some(serial);
        Ok(Some(Seen { view, serial }))
    }
}
