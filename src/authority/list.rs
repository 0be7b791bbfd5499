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
    /// The id of the master CA that issued it (a shared store: each master has its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl From<PendingRequest> for ListEntry {
    fn from(r: PendingRequest) -> Self {
        ListEntry {
            name: r.certname,
            state: "requested",
            serial: None,
            not_after: None,
            reasons: r.reasons,
            issuer: None,
        }
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
            issuer: l.issuer,
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

    /// `vouch list --all --conductor FINGERPRINT`: each certname's current certificate,
    /// signed or revoked, whose record names the conductor with this SHA-256 (lowercase hex,
    /// [`normal_fingerprint`]) as the one that vouched (renewals keep the original's), in the
    /// store's order. Reads each current certificate's record (one read per certificate), in
    /// constant memory; a record that does not read is left out (`vouch store verify` names it).
    pub fn list_each_vouched_by(
        &self,
        fingerprint: &str,
        mut f: impl FnMut(ListEntry) -> Result<(), Error> + Send,
    ) -> Result<(), Error> {
        self.for_each_certificate(|l| match self.store.record(&l.serial) {
            Ok(Some(rec)) if rec.conductor.as_deref() == Some(fingerprint) => f(l.into()),
            Ok(_) | Err(StoreError::Corrupt { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        })
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

    /// Every certname's current certificate with its record and PEM, handed to `f` one at a
    /// time in the store's order ([`crate::store::Store::for_each_current`]: on the LDAP store
    /// one paged search, not a read per certificate). Stops at `f`'s first error, and returns it.
    pub fn for_each_current(
        &self,
        mut f: impl FnMut(crate::store::Current) -> Result<(), Error> + Send,
    ) -> Result<(), Error> {
        let mut failed = None;
        self.store.for_each_current(&mut |c| match f(c) {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                std::ops::ControlFlow::Break(())
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// What to answer for a certname that has no current certificate ([`Store::current`]
    /// found none): [`Error::CurrentMissing`] when the store still lists it (`vouch list
    /// --all` shows it, and `vouch store verify` reports current-missing: its certificate
    /// file was deleted), else [`Error::NotFound`] (never issued, or cleaned). `file`: where
    /// the store keeps the certificate, for the message (the file store's path).
    ///
    /// The check walks the listing ([`crate::store::Store::for_each_listed`]) up to the name,
    /// the same walk `vouch list` and `vouch store verify` make, so the answer agrees with
    /// them; it reads the store without its lock, only on this error path.
    ///
    /// [`Store::current`]: crate::store::Store::current
    pub fn no_current(&self, certname: &str, file: Option<std::path::PathBuf>) -> Error {
        let mut found = None;
        let walked = self.store.for_each_listed(&mut |l| {
            if l.certname == certname {
                found = Some(l.serial);
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        match (walked, found) {
            (Err(e), _) => e.into(),
            // Issued meanwhile (the walk takes no lock): no damage to report.
            (Ok(()), Some(_)) if matches!(self.store.current(certname), Ok(Some(_))) => {
                Error::NotFound { certname: certname.to_string() }
            }
            (Ok(()), Some(serial)) => Error::CurrentMissing { certname: certname.to_string(), serial, file },
            (Ok(()), None) => Error::NotFound { certname: certname.to_string() },
        }
    }
}

/// A certificate's SHA-256 fingerprint as the store's records hold a conductor's: lowercase
/// hex, no colons, from either form (`AB:CD:…` as `vouch conductor new` prints it, or
/// `abcd…`); `None`: not 32 octets of hex.
pub fn normal_fingerprint(given: &str) -> Option<String> {
    let hex: String = given.trim().chars().filter(|c| *c != ':').collect::<String>().to_ascii_lowercase();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}
