//! `vouch list`: pending requests, and signed and revoked certificates.

use super::Authority;
use crate::error::Error;
use crate::store::{Listed, PendingRequest, StoreError};

/// One line of `vouch list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListEntry {
    pub name: String,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl From<PendingRequest> for ListEntry {
    fn from(r: PendingRequest) -> Self {
        ListEntry { name: r.certname, state: "requested", serial: None, not_after: None, reasons: r.reasons }
    }
}

impl From<Listed> for ListEntry {
    fn from(l: Listed) -> Self {
        ListEntry {
            name: l.certname,
            state: if l.revoked { "revoked" } else { "signed" },
            serial: Some(l.serial),
            not_after: Some(l.not_after),
            reasons: vec![],
        }
    }
}

impl Authority {
    /// `vouch list`, collected: requests; with `all`, signed and revoked certificates too
    /// (the API's `certificate_statuses`, which answers one JSON document). Holds the fleet
    /// in memory: [`Authority::list_each`] does not.
    pub fn list(&self, all: bool) -> Result<Vec<ListEntry>, Error> {
        let mut out = Vec::new();
        self.list_each(all, |e| {
            out.push(e);
            Ok(())
        })?;
        Ok(out)
    }

    /// `vouch list`, streamed: hands `f` the pending requests (by certname), then with `all`
    /// each certname's current certificate in the store's order
    /// ([`Authority::for_each_certificate`]). Stops at `f`'s first error, and returns it.
    pub fn list_each(&self, all: bool, mut f: impl FnMut(ListEntry) -> Result<(), Error> + Send) -> Result<(), Error> {
        for r in self.store.requests()? {
            f(r.into())?;
        }
        if all {
            self.for_each_certificate(|l| f(l.into()))?;
        }
        Ok(())
    }

    /// Every certname's current certificate (certname, serial, notAfter, revoked), handed to
    /// `f` one at a time in the store's order, in constant memory
    /// ([`crate::store::Store::for_each_listed`]). Stops at `f`'s first error, and returns it.
    pub fn for_each_certificate<E: From<StoreError> + Send>(
        &self,
        f: impl FnMut(Listed) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        crate::store::each_until_error(&*self.store, f)
    }
}
