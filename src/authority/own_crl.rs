//! The root CRL and the root revocations as the decision counts them
//! ([`crate::policy::OwnCrl`]): read when the authority opens, and again whenever either file
//! changes; one that does not read refuses every conductor of this root.

use super::documents::{file_id, FileId};
use super::root_revocations::read_root_revocations;
use super::signed::signed_by_root;
use super::Authority;
use crate::issuance::bootstrap::{self, DataDir};
use crate::policy::{Policy, RootCrl};
use std::sync::Arc;

pub use crate::policy::own_crl::NOT_SIGNED_BY_ROOT;
use crate::policy::own_crl::ROOT_REVOCATIONS;

/// The most vouch reads of a root CRL: it lists conductors only (some 40 bytes each).
pub(super) const MAX_ROOT_CRL: u64 = 16 << 20;

/// What the decision counts in `dir` ([`crate::policy::OwnCrl`]): the root CRL
/// (`DIR/ca/root_crl.pem`, PEM or DER; a link there is followed, as for the root certificate:
/// an operator may link the copy) and the root revocations recorded beside it
/// (`root_revocations.txt`, where the root key is), with the root certificate. `None` when
/// neither file exists (not an error: a further master before a root CRL is copied there).
/// A file that exists but does not read (cut short, not a regular file, not a CRL, too large)
/// is no error either: it is what the decision is told ([`RootCrl::unreadable`]), and every
/// conductor of this root is refused until it reads.
pub fn read_own_crl(dir: &DataDir) -> Option<Arc<RootCrl>> {
    let root = read_root_der(dir);
    let crl = read_root_crl(dir, root.as_deref().ok());
    let recorded = match read_root_revocations(dir) {
        Ok(list) => Ok(list.iter().map(|r| r.serial_bytes()).collect::<std::collections::HashSet<_>>()),
        Err(e) => Err(e.to_string()),
    };
    if matches!((&crl, &recorded), (Ok(None), Ok(r)) if r.is_empty()) {
        return None;
    }
    let problems: Vec<String> =
        [crl.as_ref().err(), recorded.as_ref().err(), root.as_ref().err()].into_iter().flatten().cloned().collect();
    Some(Arc::new(RootCrl {
        root: root.ok(),
        crl: crl.ok().flatten(),
        recorded: recorded.unwrap_or_default(),
        unreadable: (!problems.is_empty()).then(|| problems.join("; ")),
    }))
}

/// The data directory's root certificate (DER), or why it does not read.
pub fn read_root_der(dir: &DataDir) -> Result<Vec<u8>, String> {
    let root_path = dir.file(bootstrap::ROOT_CERT);
    crate::files::durable::read_regular_followed(&root_path)
        .map_err(|e| format!("cannot read {}: {e}", root_path.display()))
        .and_then(|pem| {
            crate::encoding::pem::find(&pem, &["CERTIFICATE"])
                .map(|(_, der)| der)
                .map_err(|e| format!("{}: {e}", root_path.display()))
        })
}

/// `DIR/ca/root_crl.pem` as a CRL; `Ok(None)`: there is none; `Err`: it is there and does not
/// read as a CRL, or (deny by default) it is not the root's: its issuer is not `root`'s
/// subject or its signature does not verify with `root`'s key (a master CA's `ca_crl.pem`
/// copied there by mistake would otherwise count as a root CRL that lists nothing). Without
/// `root` (it did not read), the CRL is read unchecked: the root's own problem refuses every
/// conductor of this root anyway.
fn read_root_crl(dir: &DataDir, root: Option<&[u8]>) -> Result<Option<webpki::CertRevocationList<'static>>, String> {
    let path = dir.file(bootstrap::ROOT_CRL);
    let bytes = match crate::files::durable::read_regular_followed_at_most(&path, MAX_ROOT_CRL) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let der = if bytes.first() == Some(&0x30) {
        bytes
    } else {
        crate::encoding::pem::find(&bytes, &["X509 CRL"])
            .map(|(_, d)| d)
            .map_err(|e| format!("{}: {e}", path.display()))?
    };
    let crl = webpki::OwnedCertRevocationList::from_der(&der)
        .map_err(|e| format!("{} is not a CRL vouch can read: {e:?}", path.display()))?;
    if let Some(root) = root {
        signed_by_root(&der, root).map_err(|why| format!("{} {NOT_SIGNED_BY_ROOT} ({why})", path.display()))?;
    }
    Ok(Some(crl.into()))
}

/// Whether `dir`'s root CRL exists, reads as a CRL and is the root's (see [`read_own_crl`]).
pub(super) fn root_crl_reads(dir: &DataDir) -> bool {
    let root = read_root_der(dir);
    matches!(read_root_crl(dir, root.as_deref().ok()), Ok(Some(_)))
}

/// Why `dir`'s root CRL, where there is one, cannot count (`vouch store verify`'s
/// `root-crl-unreadable`): it does not read, or the root did not sign it. `None`: there is
/// none, or it is the root's.
pub(super) fn root_crl_problem(dir: &DataDir) -> Option<String> {
    let root = read_root_der(dir).ok();
    read_root_crl(dir, root.as_deref()).err()
}

/// The decision of `policy` counts the root CRL and the root revocations of `dir` (`vouch
/// autosign --dir`, `vouch check --dir`, as the CA does). One that cannot be read is a
/// `root-crl-unreadable` warning, and every conductor of this root is refused.
pub fn count_own_crl(dir: &DataDir, policy: &Policy) {
    let own = read_own_crl(dir);
    if let Some(detail) = own.as_ref().and_then(|o| o.unreadable.as_deref()) {
        unreadable(detail);
    }
    policy.trust.own_crl.set(own);
}

fn unreadable(detail: &str) {
    tracing::warn!(
        event = "root-crl-unreadable",
        detail,
        hint = "every conductor of this root is refused (conductor-revocation-unknown) until it reads: where the \
                root key is, any command that touches the store (`vouch list`) writes the root CRL again (with \
                --store ldap://..., `vouch conductor publish-crl` there publishes it to every master sharing the \
                store); a master on a file store needs a copy of the root's own (ROOT_DIR/ca/root_crl.pem, signed \
                by the root; a master CA's ca_crl.pem is not it) here",
    );
}

impl Authority {
    /// Reads `DIR/ca/root_crl.pem` and `DIR/ca/root_revocations.txt` again if either changed
    /// since they were last read (one `stat` each when they did not), for the decisions to
    /// count ([`crate::policy::OwnCrl`]). One that cannot be read is a `root-crl-unreadable`
    /// warning, and every conductor of this root is refused until it reads (deny by default:
    /// at the first read there is nothing older to keep, and a copy that arrived damaged
    /// must not leave its revocations uncounted).
    pub fn refresh_own_crl(&self) {
        let ids = (file_id(&self.dir.file(bootstrap::ROOT_CRL)), file_id(&self.dir.file(ROOT_REVOCATIONS)));
        let ids: Option<(Option<FileId>, Option<FileId>)> = match ids {
            (Ok(a), Ok(b)) => Some((a, b)),
            // A `stat` that fails: read again (and fail closed) at every decision.
            _ => None,
        };
        let mut seen = self.own_crl_seen.lock().unwrap_or_else(|e| e.into_inner());
        if ids.is_some() && *seen == ids {
            return;
        }
        // The identities are taken before the read: a file replaced meanwhile is read again.
        *seen = ids;
        let own = read_own_crl(&self.dir);
        if let Some(detail) = own.as_ref().and_then(|o| o.unreadable.as_deref()) {
            unreadable(detail);
        }
        self.policy.trust.own_crl.set(own);
    }

    /// [`root_crl_reads`] for this directory, read again only when the root certificate or
    /// the root CRL changed since it last read (one `stat` each otherwise: `maintain` asks
    /// once a second, and a signature check each time was most of its cost). The identities
    /// are taken before the read: a file replaced meanwhile is read again next time.
    pub(super) fn root_crl_reads(&self) -> bool {
        let ids = match (file_id(&self.dir.file(bootstrap::ROOT_CERT)), file_id(&self.dir.file(bootstrap::ROOT_CRL))) {
            (Ok(a), Ok(b @ Some(_))) => Some((a, b)),
            _ => None,
        };
        let mut read = self.root_crl_read.lock().unwrap_or_else(|e| e.into_inner());
        if ids.is_some() && *read == ids {
            return true;
        }
        let reads = root_crl_reads(&self.dir);
        *read = if reads { ids } else { None };
        reads
    }
}
