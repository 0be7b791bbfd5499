//! The CA's own root CRL, as the decision counts it.

use std::sync::{Arc, RwLock};

/// The root's revocations, one line each (`DIR/ca/`). Here, below the decision and the
/// errors that name it, rather than with the authority that writes it.
pub const ROOT_REVOCATIONS: &str = "root_revocations.txt";

/// The words the authority's `read_root_crl` uses for a root CRL that another CA signed (the
/// refusal's hint and `vouch store verify` tell it apart by them).
pub const NOT_SIGNED_BY_ROOT: &str = "is not signed by this data directory's root";

/// The root's CRL the CA keeps in its data directory (`DIR/ca/root_crl.pem`: written where the
/// root key is, by `vouch conductor revoke` and when it is due; taken from the shared store by
/// the masters without the root key, or copied there by the operator on a file store), with the root revocations recorded beside it
/// (`DIR/ca/root_revocations.txt`, where the root key is). The decision counts them whatever
/// `conductors.crls` lists: a conductor they revoke is refused (`conductor-revoked`) with no
/// change to the policy; while either file is there but cannot be read, every conductor this
/// root issued is refused (`conductor-revocation-unknown`): deny by default.
///
/// Empty for a policy read outside a data directory (`vouch check` and `vouch autosign`
/// without `--dir`). The clones of a policy share it: the authority that reads the files puts
/// what it read here ([`OwnCrl::set`]), and every decision after that sees it. Never cached
/// with the conductors' chains (the policy's [`super::ChainCache`]): it is looked up at every
/// decision, so a CRL replaced while `vouch serve` runs counts from the next request on.
#[derive(Clone, Default)]
pub struct OwnCrl(Arc<RwLock<Option<Arc<RootCrl>>>>);

/// The root CRL and the recorded root revocations as read, with the root certificate they
/// belong to.
#[derive(Debug)]
pub struct RootCrl {
    /// The data directory's root certificate (DER): a serial on the CRL revokes a conductor
    /// only if this root issued that conductor and signed this CRL (checked by webpki); a
    /// recorded serial, or an unreadable file, counts only for a conductor this root issued.
    /// `None`: the root certificate itself could not be read (every conductor is refused).
    pub root: Option<Vec<u8>>,
    /// Owned (the `Owned` variant): its serials in a map, each look-up one search. `None`:
    /// there is no root CRL (a further master before one is copied there).
    pub crl: Option<webpki::CertRevocationList<'static>>,
    /// The serials `root_revocations.txt` records (their value: octets without leading zero
    /// octets), counted even before the root CRL lists them (a crash or a failure between the
    /// record and the CRL).
    pub recorded: std::collections::HashSet<Vec<u8>>,
    /// Why the root CRL or the recorded revocations could not be read (they exist, but are
    /// cut short, not a regular file, not a CRL...): whether a conductor is revoked is then
    /// unknown, and every conductor this root issued is refused.
    pub unreadable: Option<String>,
}

impl RootCrl {
    /// What the decision counts when the files are there but could not be read.
    pub fn unreadable(root: Option<Vec<u8>>, detail: String) -> RootCrl {
        RootCrl { root, crl: None, recorded: Default::default(), unreadable: Some(detail) }
    }

    /// A serial's value (the certificate's raw serial octets, DER's leading zero octet for a
    /// serial whose first bit is set taken off) as [`RootCrl::recorded`] holds it.
    pub fn serial_value(raw: &[u8]) -> &[u8] {
        let mut s = raw;
        while s.len() > 1 && s.first() == Some(&0) {
            s = &s[1..];
        }
        s
    }
}

impl OwnCrl {
    /// The CRL as last read, if there is one.
    pub fn get(&self) -> Option<Arc<RootCrl>> {
        match self.0.read() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces what the decisions count (`None`: no root CRL and no recorded revocation).
    pub fn set(&self, crl: Option<Arc<RootCrl>>) {
        match self.0.write() {
            Ok(mut held) => *held = crl,
            Err(poisoned) => *poisoned.into_inner() = crl,
        }
    }
}

impl std::fmt::Debug for OwnCrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.get() {
            None => "OwnCrl(none)",
            Some(c) if c.unreadable.is_some() => "OwnCrl(unreadable)",
            Some(_) => "OwnCrl(read)",
        })
    }
}
