//! The messages and hints of [`super::Error`]'s variants that depend on a field (an I/O
//! error's kind, an optional path, a list): one named function each, called from the
//! variant's `#[message]` or `#[hint]`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The flag of `vouch serve`'s own address (see [`super::Error::Listen`]).
pub const LISTEN_FLAG: &str = "--listen";

/// The hint of a revocation stored whose CRL could not be written after it.
pub(super) const CRL_AFTER_REVOCATION: &str =
    "the revocation is done, do not repeat it: fix the cause above, then run `vouch crl` to write \
     the CRL (any command that touches the store also writes it; until then `vouch store verify` \
     reports the certificate as revoked-not-on-crl)";

/// [`super::Error::Io`]'s hint, by the kind of the I/O error.
pub(super) fn io_hint(source: &std::io::Error) -> &'static str {
    match source.kind() {
        std::io::ErrorKind::FileTooLarge => {
            "is it the right file? vouch reads no more of an input than any real one needs"
        }
        std::io::ErrorKind::StorageFull => {
            "the disk (or quota) is full: free space on that filesystem, or write elsewhere, and retry"
        }
        _ => "check that the path exists and that this user may access it",
    }
}

/// [`super::Error::Policy`]'s hint, by its message: a file another user could change, one that
/// cannot be read, or a key to fix.
pub(super) fn policy_hint(e: &crate::policy::PolicyError) -> &'static str {
    if e.message.contains("; fix: ") {
        "another user could change this file or its directory: follow the fix shown, or move the file"
    } else if e.message.starts_with("cannot read it") {
        "check the policy's path and that this user may read it; a CA's policy that is gone is restored \
         from a backup (a CA that has issued is never given a default policy again: its data directory's \
         CA is kept as it is); only a new CA gets one from 'vouch ca init' or the first 'vouch serve'"
    } else {
        "fix the named key; policy/README.md documents every key"
    }
}

/// [`super::Error::Store`]'s hint: a damaged store is restored, anything else retried.
pub(super) fn store_hint(detail: &str) -> &'static str {
    if detail.contains("is damaged") {
        "running the command again cannot help: `vouch store verify` names what is damaged; restore the named \
         file from a backup of DIR/ca (a certificate: or from the node's own copy, its first PEM block only); \
         `vouch revoke --serial SERIAL` revokes a certificate whatever its file holds"
    } else {
        "the store was left consistent; check the named file and retry"
    }
}

/// [`super::Error::Listen`]'s message, by the kind of the I/O error; the service's own address is
/// "the" address, another one says which it is.
pub(super) fn listen_message(addr: &std::net::SocketAddr, flag: &str, source: &std::io::Error) -> String {
    let which = if flag == LISTEN_FLAG { String::new() } else { format!(" ({flag})") };
    match source.kind() {
        std::io::ErrorKind::AddrInUse => format!("cannot listen on {addr}{which}: the address is already in use"),
        std::io::ErrorKind::AddrNotAvailable => {
            format!("cannot listen on {addr}{which}: no network interface of this machine has that address")
        }
        std::io::ErrorKind::PermissionDenied => format!("cannot listen on {addr}{which}: permission denied"),
        _ => format!("cannot listen on {addr}{which}: {source}"),
    }
}

/// [`super::Error::Listen`]'s hint, by the flag that gave the address and the kind of the I/O error.
pub(super) fn listen_hint(flag: &str, source: &std::io::Error) -> &'static str {
    if flag != LISTEN_FLAG {
        return match source.kind() {
            std::io::ErrorKind::AddrInUse => {
                "another process listens there: stop it, or choose another port with \
                 --metrics-listen ADDRESS:PORT; nothing was created"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "listen on an address of this machine (ip addr), such as 127.0.0.1:PORT"
            }
            std::io::ErrorKind::PermissionDenied => "ports below 1024 need root or CAP_NET_BIND_SERVICE",
            _ => "choose another --metrics-listen ADDRESS:PORT",
        };
    }
    match source.kind() {
        std::io::ErrorKind::AddrInUse => {
            "another process listens there (another vouch serve, a Puppet Server?): stop it, or choose \
             another port with --listen ADDRESS:PORT; nothing was created"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "listen on an address of this machine (ip addr), or on 0.0.0.0:PORT for all of them"
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need root or CAP_NET_BIND_SERVICE; Puppet's CA port is 8140"
        }
        _ => "choose another --listen ADDRESS:PORT",
    }
}

/// [`super::Error::CurrentMissing`]'s message: where the store keeps the certificate, when it is a file.
pub(super) fn current_missing(certname: &str, serial: &str, file: &Option<PathBuf>) -> String {
    let missing = format!(
        "the inventory lists {certname} (serial {serial}) but its current certificate is missing from the store"
    );
    match file {
        Some(p) => format!("{missing} ({} does not exist); nothing was changed", p.display()),
        None => format!("{missing}; nothing was changed"),
    }
}

/// [`super::Error::CrlNotFromBundle`]'s message: the CA whose CRL is missing (or any), and the
/// issuers of the CRLs there that no CA of the bundle signed.
pub(super) fn crl_not_from_bundle(source: &str, ca: &Option<String>, bundle: &Path, foreign: &[String]) -> String {
    let mut m = match ca {
        Some(ca) => format!(
            "{source} holds no CRL signed by {ca} of {} (the certificate's chain goes through it)",
            bundle.display()
        ),
        None => format!("{source} holds no CRL signed by a CA of {}", bundle.display()),
    };
    if !foreign.is_empty() {
        let _ = write!(m, "; signed by no CA of {}: a CRL of {}", bundle.display(), foreign.join(", a CRL of "));
    }
    m
}

/// [`super::Error::ReconcileCrlNotWritten`]'s message: the first certificates revoked by name, then
/// how many more.
pub(super) fn reconcile_crl_not_written(
    revoked: u64,
    named: &[(String, String)],
    cleaned: u64,
    requests_dropped: u64,
    error: &impl std::fmt::Display,
) -> String {
    let mut names: Vec<String> =
        named.iter().map(|(certname, serial)| format!("{certname} (serial {serial})")).collect();
    let more = revoked.saturating_sub(named.len() as u64);
    if more > 0 {
        names.push(format!("and {more} more"));
    }
    format!(
        "reconcile revoked {revoked} certificate{}: {} (forgot {cleaned}, dropped {requests_dropped} \
         pending requests); they ARE revoked: the revocations are stored, but the CRL could not be \
         written after them, so the published CRL does not list them yet: {error}",
        if revoked == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// [`super::Error::NoCa`]'s note when a stopped `ca init` or import left its staging
/// directory (the new `ca/`, never renamed into place) in the data directory.
pub(super) fn staged_note(staged: &Option<PathBuf>) -> String {
    match staged {
        Some(p) => format!(
            " (a `ca init` or `vouch import` was stopped before it finished: its staging directory {} is there)",
            p.display()
        ),
        None => String::new(),
    }
}

/// [`super::Error::NoCa`]'s hint: with a stopped run's staging directory, the same command again.
pub(super) fn no_ca_hint(staged: &Option<PathBuf>) -> &'static str {
    match staged {
        Some(_) => {
            "run the same `vouch import` (or `vouch ca init`) again: it removes what the stopped run left and \
                    finishes; a new `ca init` instead would make an unrelated CA"
        }
        None => "run 'vouch ca init --dir DIR' first, or point --dir / VOUCH_DIR at the CA",
    }
}
