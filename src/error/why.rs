//! Why a certificate does not renew ([`Unrenewable`]), why a name cannot be an
//! administrator's ([`AdminNameTaken`]) and why a revocation needs `--force`
//! ([`NeedsForce`]): each reason's words and hint, stated beside it.

use vouch_derive::{Hint, Message};

/// Why a certificate does not renew ([`super::Error::NotRenewable`]).
#[derive(Debug, Clone, PartialEq, Eq, Message, Hint)]
#[non_exhaustive]
pub enum Unrenewable {
    /// A revoked node certificate.
    #[message = "is revoked"]
    #[hint = "a revoked certificate is never renewed: the node gets a new one from a new request with \
              attributes a conductor signs (`puppet ssl bootstrap` against `vouch serve`, or `vouch sign \
              --csr FILE`); `vouch clean NAME` forgets the revoked one"]
    Revoked,
    /// A node certificate past its notAfter.
    #[message = "expired at {not_after}"]
    #[hint = "an expired certificate is not renewed (renew before notAfter: `vouch list --all` shows it): the node \
              gets a new one from a new request with attributes a conductor signs (`puppet ssl bootstrap` \
              against `vouch serve`, or `vouch sign --csr FILE`)"]
    Expired { not_after: String },
    /// An administrator's certificate (`vouch admin new`, `DIR/admin/`), revoked or not.
    #[message("is an administrator's (`vouch admin new`), not a node's{}", and_revoked(*revoked))]
    #[hint = "administrator certificates are not renewed: make a new one with `vouch admin new NAME --cert-out \
              FILE --key-out FILE` (another name, or this one once its certificate is revoked or expired), \
              then revoke the old one when the new one is in use"]
    Administrator { revoked: bool },
    /// The certificate `vouch serve` presents (or presented), revoked or not.
    #[message("is the certificate of the CA service (`vouch serve`), not a node's{}", and_revoked(*revoked))]
    #[hint = "the service's certificate is not renewed by `vouch renew`: `vouch serve` replaces it itself when \
              it starts (30 days before its expiry, once it is revoked, or when --server-name changes): restart \
              `vouch serve`"]
    Service { revoked: bool },
    /// A node certificate an administrator approved (`vouch approve`): no conductor to check again.
    #[message = "was approved by an administrator (no conductor vouched for it), and approvals do not renew"]
    #[hint = "before it expires, approve the node again: `vouch clean NAME`, let the node send a new request \
              (`puppet ssl bootstrap`), then `vouch approve NAME` (its classification set with `vouch override \
              set`)"]
    Approved,
}

/// The end of an [`Unrenewable`]'s words for a certificate that is revoked too.
fn and_revoked(revoked: bool) -> &'static str {
    if revoked {
        ", and revoked"
    } else {
        ""
    }
}

/// Why a name cannot be an administrator's ([`super::Error::AdminNameRefused`]).
#[derive(Debug, Clone, PartialEq, Eq, Message, Hint)]
#[non_exhaustive]
pub enum AdminNameTaken {
    /// Puppet reserves it for its CA ([`crate::decision::RESERVED_CERTNAMES`]).
    #[message = "Puppet reserves the name for its CA"]
    #[hint = "choose another name for the administrator, such as alice"]
    Puppet,
    /// A name of this CA's service: on the certificate `vouch serve` presents, one it always
    /// keeps (`localhost`, the loopback addresses), or that of its valid certificate in the store.
    #[message = "it is a name of this CA's service (on the certificate `vouch serve` presents, or one it always \
                 keeps: localhost and the loopback addresses)"]
    #[hint = "an administrator needs a name of its own: choose another, such as alice (the service keeps its \
              names)"]
    Service,
    /// A node's certname: its current certificate (revoked or not) holds the name until cleaned.
    #[message("it is a node's certname: {}", node_certificate(serial, *revoked))]
    #[hint(with = node_name_hint(*revoked))]
    Node { serial: String, revoked: bool },
    /// An administrator's valid certificate has it already.
    #[message = "an administrator already has a valid certificate under it (serial {serial})"]
    #[hint = "choose another name for the new administrator; to replace that administrator's certificate, \
              revoke it first (`vouch revoke NAME`)"]
    Administrator { serial: String },
    /// A name Puppet servers answer to: `puppet`, this host's name, or one the policy gives
    /// servers (`detail` says which).
    #[message = "it is a Puppet server's name: {detail}"]
    #[hint = "an administrator needs a name no node or server uses (agents and servers would meet it where they \
              expect a server): choose another, such as alice"]
    Server { detail: String },
}

/// [`AdminNameTaken::Node`]'s words: the node's certificate, or its revoked one, holds the name.
fn node_certificate(serial: &str, revoked: bool) -> String {
    if revoked {
        format!("the node's revoked certificate (serial {serial}) still holds it")
    } else {
        format!("the node has a certificate (serial {serial})")
    }
}

/// [`AdminNameTaken::Node`]'s hint: a revoked certificate's name is freed by `vouch clean`.
fn node_name_hint(revoked: bool) -> &'static str {
    if revoked {
        "choose another name for the administrator, or free this one: `vouch clean NAME` forgets the \
         node's revoked certificate, then run `vouch admin new NAME` again"
    } else {
        "choose another name for the administrator; the node's name is free only once the node is retired \
         and forgotten (`vouch clean NAME` revokes and forgets its certificate)"
    }
}

/// Why `vouch revoke` / `vouch clean` of a certname needs `--force`
/// ([`super::Error::NeedsForce`]).
#[derive(Debug, Clone, PartialEq, Eq, Message, Hint)]
#[non_exhaustive]
pub enum NeedsForce {
    /// A master's service certname (`whose`: "this master" or "another master").
    #[message = "is the certname of {whose}'s service certificate: revoked, it stays the certificate that master \
                 presents, and every agent refuses that master until its vouch serve restarts and issues its own \
                 certificate again"]
    #[hint = "give --force to revoke it anyway, then restart that master's vouch serve at once (it issues a new \
              service certificate at start); a node's certname is never a master's"]
    Service { whose: &'static str },
    /// A certificate that may be this master's service certificate: `DIR/server/server_crt.pem`,
    /// which names it, cannot be read (deny by default), and `sign` says why it may be.
    #[message("may be this master's service certificate: it carries {sign}, and {} cannot be read to tell \
               ({why}); revoked, it may stay the certificate this master presents, and every agent refuses that \
               master until its vouch serve restarts", file.display())]
    #[hint = "restore DIR/server/server_crt.pem from the running master (or a backup), or give --force to revoke \
              it anyway, then restart this master's vouch serve at once (it issues a new service certificate at \
              start)"]
    MaybeService { sign: &'static str, file: std::path::PathBuf, why: String },
    /// The last valid administrator certificate of the store (the fleet's, on a shared store).
    #[message = "holds the store's last valid administrator certificate (serial {serial}): revoked, no client may \
                 use vouch serve's administrator API until another administrator certificate is made"]
    #[hint = "make another administrator first ('vouch admin new NAME --cert-out FILE --key-out FILE' on a \
              master's data directory), then revoke this one; or give --force to revoke it anyway"]
    LastAdministrator { serial: String },
}
