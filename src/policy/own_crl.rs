//! The CA's own root CRL, as the decision counts it.

use std::sync::{Arc, RwLock};

/// The root's CRL the CA keeps in its data directory (`DIR/ca/root_crl.pem`: written where the
/// root key is, by `vouch conductor revoke` and when it is due; copied by the operator to the
/// masters without the root key). The decision counts it whatever `conductors.crls` lists: a
/// conductor it revokes is refused (`conductor-revoked`) with no change to the policy.
///
/// Empty for a policy read outside a data directory (`vouch check` and `vouch autosign`
/// without `--dir`). The clones of a policy share it: the authority that reads the file puts
/// what it read here ([`OwnCrl::set`]), and every decision after that sees it. Never cached
/// with the conductors' chains (the policy's [`super::ChainCache`]): it is looked up at every
/// decision, so a CRL replaced while `vouch serve` runs counts from the next request on.
#[derive(Clone, Default)]
pub struct OwnCrl(Arc<RwLock<Option<Arc<RootCrl>>>>);

/// The root CRL as read, with the root certificate it must be signed by.
#[derive(Debug)]
pub struct RootCrl {
    /// The data directory's root certificate (DER): a serial on the CRL revokes a conductor
    /// only if this root issued that conductor and signed this CRL (checked by webpki).
    pub root: Vec<u8>,
    /// Owned (the `Owned` variant): its serials in a map, each look-up one search.
    pub crl: webpki::CertRevocationList<'static>,
}

impl OwnCrl {
    /// The CRL as last read, if there is one.
    pub fn get(&self) -> Option<Arc<RootCrl>> {
        match self.0.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces what the decisions count (`None`: no root CRL).
    pub fn set(&self, crl: Option<Arc<RootCrl>>) {
        match self.0.write() {
            Ok(mut held) => *held = crl,
            Err(poisoned) => *poisoned.into_inner() = crl,
        }
    }
}

impl std::fmt::Debug for OwnCrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() { "OwnCrl(read)" } else { "OwnCrl(none)" })
    }
}
