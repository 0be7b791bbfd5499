//! `vouch conductor revoke`: a conductor the root issued, put on the root's CRL. Each root
//! revocation is a line of `DIR/ca/root_revocations.txt` (appended, synced, under the store's
//! lock), and the root CRL (`DIR/ca/root_crl.pem`) is written again at once with every line.
//! The decision counts that CRL whatever the policy lists ([`crate::policy::OwnCrl`]): the
//! authority reads it when it opens, and again whenever the file changes.

use super::crl::{normal_serial, reason_code, REASONS};
use super::documents::{file_id, FileId};
use super::Authority;
use super::Holder;
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir};
use crate::issuance::root_issued::{self, Kind};
use crate::policy::{Policy, RootCrl};
use crate::store::{CertRecord, StoreError};
use std::path::Path;
use std::sync::Arc;
use time::OffsetDateTime;

pub use crate::policy::own_crl::{NOT_SIGNED_BY_ROOT, ROOT_REVOCATIONS};
/// The size of [`ROOT_REVOCATIONS`] the root CRL on disk covers (`DIR/ca/`).
pub(super) const ROOT_CRL_STAMP: &str = "root_crl_revocations_size";

/// One line of `root_revocations.txt`: `SERIAL TIME REASON[ fingerprint=HEX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRevocation {
    /// The serial's value: lowercase hex, an even number of digits, no leading zero octet.
    pub serial: String,
    /// RFC 3339.
    pub time: String,
    /// As RFC 5280 names it (keyCompromise).
    pub reason: String,
    /// The revoked certificate's SHA-256 (lowercase hex), when its certificate was given.
    pub fingerprint: Option<String>,
}

impl RootRevocation {
    fn line(&self) -> String {
        let mut line = format!("{} {} {}", self.serial, self.time, self.reason);
        if let Some(fp) = &self.fingerprint {
            line.push_str(" fingerprint=");
            line.push_str(fp);
        }
        line
    }

    /// A line as [`RootRevocation::line`] writes it; `None`: no serial a CRL could hold. The
    /// serial is whole only where a space follows it: a line cut off inside its serial (an
    /// even number of digits left) would otherwise put another serial on the CRL.
    fn parse(line: &str) -> Option<Self> {
        let (serial, rest) = line.split_once(' ')?;
        if serial.is_empty()
            || serial.len() % 2 != 0
            || serial.len() > 40
            || !serial.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return None;
        }
        let serial = serial.to_ascii_lowercase();
        let mut fields = rest.split(' ');
        let time = fields.next().unwrap_or_default().to_string();
        let reason = fields.next().unwrap_or_default().to_string();
        let fingerprint = fields.find_map(|f| f.strip_prefix("fingerprint=")).map(str::to_string);
        Some(RootRevocation { serial: serial_value(&serial), time, reason, fingerprint })
    }

    /// The serial's octets, for the CRL.
    pub(super) fn serial_bytes(&self) -> Vec<u8> {
        hex_octets(&self.serial)
    }
}

fn hex_octets(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).filter_map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// A serial (lowercase hex, an even number of digits) as its value: without the leading zero
/// octets DER puts before a serial whose first bit is set (`openssl x509 -serial` prints
/// none; the certificate's own bytes carry one), so that both forms name one serial.
fn serial_value(hex: &str) -> String {
    crate::issuance::root_issued::serial_value(hex)
}

/// A value that changes whenever a root revocation is recorded: the size of the list.
pub(super) fn revocations_stamp(dir: &DataDir) -> String {
    std::fs::symlink_metadata(dir.file(ROOT_REVOCATIONS)).map(|m| m.len()).unwrap_or(0).to_string()
}

/// Every root revocation recorded, in order (none without the file). A line that names no
/// serial a CRL could hold is left out, with a `root-revocation-lines-damaged` warning.
pub(super) fn read_root_revocations(dir: &DataDir) -> Result<Vec<RootRevocation>, Error> {
    let path = dir.file(ROOT_REVOCATIONS);
    let text = match super::crl::read_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let mut damaged = 0usize;
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match RootRevocation::parse(line.trim()) {
            Some(r) => out.push(r),
            None => damaged = damaged.saturating_add(1),
        }
    }
    if damaged > 0 {
        tracing::warn!(
            event = "root-revocation-lines-damaged",
            path = %path.display(),
            lines = damaged,
            detail = "lines that name no serial are left off the root CRL",
        );
    }
    Ok(out)
}

/// Appends one root revocation, synced, on a line of its own (after a last line cut short).
fn append_root_revocation(dir: &DataDir, r: &RootRevocation) -> Result<(), Error> {
    let path = dir.file(ROOT_REVOCATIONS);
    let before = match super::crl::read_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let line = if before.is_empty() || before.ends_with('\n') { r.line() } else { format!("\n{}", r.line()) };
    crate::files::durable::append_line(&path, &line).map_err(|source| Error::Io { path, op: "append to", source })
}

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

/// Whether the CRL `der` names `root` (DER) as its issuer and its signature verifies with
/// `root`'s key; else why not.
pub(super) fn signed_by_root(der: &[u8], root: &[u8]) -> Result<(), String> {
    let (_, root) = x509_parser::parse_x509_certificate(root).map_err(|e| format!("the root certificate: {e}"))?;
    let (_, crl) = x509_parser::parse_x509_crl(der).map_err(|e| format!("the CRL: {e}"))?;
    if crl.issuer().as_raw() != root.subject().as_raw() {
        return Err(format!("its issuer is {}, the root is {}", crl.issuer(), root.subject()));
    }
    crate::encoding::verify_x509_signature(
        &crl.signature_algorithm,
        &root,
        crl.tbs_cert_list.as_ref(),
        &crl.signature_value.data,
    )
    .map_err(|e| format!("it names the root {} as its issuer, but its signature does not verify: {e}", root.subject()))
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

/// What `vouch conductor revoke` is given: a certificate, a serial, or both.
#[derive(Debug, Clone, Copy)]
pub struct RootTarget<'a> {
    /// The certificate (DER) and the file it was read from.
    pub cert: Option<(&'a Path, &'a [u8])>,
    /// The serial as the operator copied it.
    pub serial: Option<&'a str>,
}

/// What `vouch conductor revoke` did.
#[derive(Debug, Clone)]
pub struct RootRevoked {
    pub serial: String,
    /// What the certificate is, in words.
    pub what: String,
    /// Whether this data directory holds the certificate (given with --cert, or the
    /// conductor `vouch serve`'s first run made): else it is known by its line of
    /// `root_issued.txt` or by the store's records.
    pub held: bool,
    /// The conductor's SHA-256 (lowercase hex), where known.
    pub fingerprint: Option<String>,
    /// Revoked before (nothing was changed): when and why.
    pub before: Option<RootRevocation>,
    /// The reason recorded now.
    pub reason: String,
    /// The root CRL's path.
    pub crl: std::path::PathBuf,
}

/// The node certificates a conductor vouched for that are still current.
#[derive(Debug, Clone, Default)]
pub struct Vouched {
    /// Unrevoked, unexpired current certificates whose record names the conductor.
    pub current: u64,
    /// The conductor as the records name it (subject, SHA-256), found by its serial.
    pub conductor: Option<(String, String)>,
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

    /// `vouch conductor revoke`: puts a certificate the root issued (a conductor) on the
    /// root's CRL, recorded in `root_revocations.txt`, and writes the root CRL at once.
    /// Needs the root key. A serial revoked before is not recorded again (its CRL written if
    /// it does not list it yet). Node certificates the conductor vouched for are not touched.
    pub fn revoke_by_root(
        &self,
        target: &RootTarget<'_>,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<RootRevoked, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        let Target { serial, what, fingerprint, held } = self.root_target(target, now)?;
        let fingerprint = Some(fingerprint);
        let key = self.dir.file(bootstrap::ROOT_KEY);
        if let Err(e) = std::fs::symlink_metadata(&key) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Err(Error::ConductorRevokeNoRootKey { dir: self.dir.dir.clone(), key });
            }
        }
        crate::files::trust::check_trusted(&self.dir.dir)?;
        crate::files::trust::check_trusted(&self.dir.ca())?;
        crate::files::trust::check_private_key(&key)?;
        let crl = self.dir.file(bootstrap::ROOT_CRL);
        let not_written =
            |error: Error| Error::ConductorRevokedCrlNotWritten { serial: serial.clone(), error: Box::new(error) };
        let lock = self.store.lock()?;
        if let Some(before) = read_root_revocations(&self.dir)?.into_iter().find(|r| r.serial == serial) {
            // Recorded by an earlier run whose CRL may not have been written.
            if self.root_crl_due(now) {
                self.write_root_crl_locked(&lock, now).map_err(not_written)?;
            }
            self.refresh_own_crl();
            return Ok(RootRevoked {
                fingerprint: fingerprint.or_else(|| before.fingerprint.clone()),
                reason: before.reason.clone(),
                serial,
                what,
                held,
                before: Some(before),
                crl,
            });
        }
        let rev = RootRevocation {
            serial: serial.clone(),
            time: format_rfc3339(now),
            reason: reason.to_string(),
            fingerprint: fingerprint.clone(),
        };
        append_root_revocation(&self.dir, &rev)?;
        // Killed here: the next command that writes CRLs (this one again, `vouch list`, `vouch
        // serve`'s maintenance) finds the list longer than the CRL covers and writes it.
        crate::store::crash_point("conductor-revoke:recorded");
        self.write_root_crl_locked(&lock, now).map_err(not_written)?;
        drop(lock);
        self.refresh_own_crl();
        self.audit(serde_json::json!({
            "time": rev.time, "event": "root-revoked", "serial": serial, "reason": reason,
            "certificate": what, "fingerprint": fingerprint,
        }))
        .map_err(|error| Error::Partial {
            done: format!("{what} (serial {serial}) is revoked: the root CRL {} lists it", crl.display()),
            error: Box::new(error),
        })?;
        Ok(RootRevoked { serial, what, held, fingerprint, before: None, reason: reason.to_string(), crl })
    }

    /// The conductor to revoke. Refused: a certificate the root did not issue, a CA (the root,
    /// a master CA), a certificate that is no conductor; and, deny by default, a serial given
    /// alone that cannot be identified as a conductor of this root ([`Error::ConductorRevokeUnknownSerial`]):
    /// a serial says nothing of what it is, and on the root CRL a master CA's would revoke every
    /// node certificate under it.
    fn root_target(&self, target: &RootTarget<'_>, now: OffsetDateTime) -> Result<Target, Error> {
        let root_path = self.dir.file(bootstrap::ROOT_CERT);
        let root_pem = crate::files::durable::read_regular_followed(&root_path).map_err(|source| Error::Io {
            path: root_path.clone(),
            op: "read",
            source,
        })?;
        let (_, root_der) = crate::encoding::pem::find(&root_pem, &["CERTIFICATE"])
            .map_err(|e| Error::Cert { path: root_path.clone(), detail: e.to_string() })?;
        let (_, root) = x509_parser::parse_x509_certificate(&root_der)
            .map_err(|e| Error::Cert { path: root_path.clone(), detail: e.to_string() })?;
        let given = match target.serial {
            Some(g) => {
                Some(serial_value(&normal_serial(g).ok_or_else(|| Error::SerialInvalid { given: g.to_string() })?))
            }
            None => None,
        };
        let serial_of =
            |c: &x509_parser::certificate::X509Certificate<'_>| serial_value(&crate::encoding::hex(c.raw_serial()));
        let master_der = self.ca.cert_der.as_slice();
        let (_, master) = x509_parser::parse_x509_certificate(master_der)
            .map_err(|e| Error::Store { detail: format!("the master CA's certificate: {e}") })?;
        let ca_refused = |serial: String, what: String| Error::ConductorRevokeCa { serial, what };
        if let Some((path, der)) = target.cert {
            let (_, cert) = x509_parser::parse_x509_certificate(der)
                .map_err(|e| Error::Cert { path: path.to_path_buf(), detail: e.to_string() })?;
            let serial = serial_of(&cert);
            if let Some(g) = given.as_ref().filter(|g| **g != serial) {
                return Err(Error::Usage {
                    detail: format!(
                        "--serial {g} is not the serial of {} (its serial is {serial}); give one of the two, or both \
                         of the same certificate",
                        path.display()
                    ),
                });
            }
            if der == root_der.as_slice() {
                return Err(ca_refused(serial, format!("the root CA itself ({})", root.subject())));
            }
            if let Err(detail) = super::verify::signed_by_one_of(der, std::slice::from_ref(&root_der)) {
                let detail = if cert.issuer().as_raw() == master.subject().as_raw() {
                    let instead = match [serial.clone(), format!("00{serial}")]
                        .iter()
                        .find_map(|c| self.store.record(c).ok().flatten())
                    {
                        Some(rec) => self.revoke_serial_would(&rec, Some(der)),
                        None => format!("`vouch revoke --serial {serial}` revokes it (on this CA's CRL)"),
                    };
                    format!(
                        "this CA's master CA issued it, not the root (a node's, the service's or an administrator's \
                         certificate). {instead}"
                    )
                } else {
                    detail
                };
                return Err(Error::ConductorNotOurs {
                    path: path.to_path_buf(),
                    root: root.subject().to_string(),
                    detail,
                });
            }
            let is_ca = matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
            if der == master_der || is_ca {
                let what = if der == master_der {
                    format!("this master CA ({})", cert.subject())
                } else {
                    format!("a CA certificate under the root ({})", cert.subject())
                };
                return Err(ca_refused(serial, what));
            }
            if !has_conductor_eku(&cert) {
                return Err(Error::NotAConductor {
                    path: path.to_path_buf(),
                    subject: cert.subject().to_string(),
                    serial,
                });
            }
            let fingerprint = crate::encoding::sha256_hex(der);
            return Ok(Target { serial, what: format!("conductor {}", cert.subject()), fingerprint, held: true });
        }
        let Some(serial) = given else {
            return Err(Error::Usage {
                detail: "give the conductor's certificate (--cert FILE) or its --serial".into(),
            });
        };
        // What the root issued that this directory holds: the root itself, this master CA, the
        // masters sharing the store, and the conductor `vouch serve`'s first run made.
        if serial_of(&root) == serial {
            return Err(ca_refused(serial, format!("the root CA itself ({})", root.subject())));
        }
        if serial_of(&master) == serial && master.issuer().as_raw() == root.subject().as_raw() {
            return Err(ca_refused(serial, format!("this master CA ({})", master.subject())));
        }
        for other in self.store.issuers()? {
            let Ok((_, c)) = x509_parser::parse_x509_certificate(&other) else { continue };
            if serial_of(&c) == serial && c.issuer().as_raw() == root.subject().as_raw() {
                return Err(ca_refused(serial, format!("the master CA {} sharing this store", c.subject())));
            }
        }
        // A certificate this store holds is a master CA's (a node's, the service's, an
        // administrator's), never a conductor: on the root CRL it would revoke nothing, and
        // the operator would believe it revoked.
        for candidate in [serial.clone(), format!("00{serial}")] {
            match self.store.record(&candidate) {
                Ok(Some(rec)) => {
                    let instead = self.revoke_serial_would(&rec, None);
                    return Err(Error::ConductorRevokeStoreSerial {
                        serial: candidate,
                        certname: rec.certname,
                        instead,
                    });
                }
                Ok(None) => {}
                Err(StoreError::Corrupt { .. }) => {
                    let instead = format!("`vouch revoke --serial {candidate}` revokes it (on this CA's CRL)");
                    return Err(Error::ConductorRevokeStoreSerial {
                        serial: candidate,
                        certname: "a certificate whose record does not read".into(),
                        instead,
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Its record lost, the inventory may still name it (as `vouch revoke --serial` finds it).
        let candidates = [serial.clone(), format!("00{serial}")];
        if let Some(e) = self.store.inventory()?.into_iter().rev().find(|e| candidates.contains(&e.serial)) {
            let rec = CertRecord::bare(&e.serial, &e.certname, crate::store::State::Issued);
            let instead = self.revoke_serial_would(&rec, None);
            return Err(Error::ConductorRevokeStoreSerial { serial: e.serial, certname: e.certname, instead });
        }
        // What the root key issued here: a master CA refused, a conductor known.
        let issued = self.dir.file(root_issued::ROOT_ISSUED);
        if let Some(i) = root_issued::find(&self.dir.ca(), &serial)? {
            return match i.kind {
                Kind::Ca => Err(ca_refused(
                    serial,
                    format!("the master CA {} this root issued ({} records it)", i.subject, issued.display()),
                )),
                Kind::Conductor => Ok(Target {
                    serial,
                    what: format!("conductor {}", i.subject),
                    fingerprint: i.fingerprint,
                    held: false,
                }),
            };
        }
        // The service's own conductor (`vouch serve`'s first run).
        let local = self.dir.dir.join(bootstrap::CONDUCTOR_CERT);
        if let Ok(pem) = crate::files::durable::read_regular(&local) {
            if let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) {
                if let Ok((_, c)) = x509_parser::parse_x509_certificate(&der) {
                    if serial_of(&c) == serial && is_conductor_of(&c, &der, std::slice::from_ref(&root_der)) {
                        return Ok(Target {
                            serial,
                            what: format!("conductor {}, the service's own at {}", c.subject(), local.display()),
                            fingerprint: crate::encoding::sha256_hex(&der),
                            held: true,
                        });
                    }
                }
            }
        }
        // The conductor that vouched for a current node, as its record holds it.
        if let Some((subject, fingerprint)) = self.vouched_by(&serial, None, now)?.conductor {
            return Ok(Target {
                serial,
                what: format!("conductor {subject}, named by the store's records"),
                fingerprint,
                held: false,
            });
        }
        Err(Error::ConductorRevokeUnknownSerial { serial, issued })
    }

    /// What `vouch revoke --serial` would do to a certificate of this CA's store (`der`: the
    /// certificate, when given; else the certname's current one, when it is this serial): the
    /// service's own TLS certificate and an administrator's are revoked too, and the operator
    /// must know what follows before running it.
    fn revoke_serial_would(&self, rec: &CertRecord, der: Option<&[u8]>) -> String {
        let pem = match der {
            Some(d) => crate::encoding::pem::encode("CERTIFICATE", d),
            None => match self.store.current(&rec.certname) {
                Ok(Some(c)) if c.record.serial == rec.serial => c.pem,
                _ => String::new(),
            },
        };
        let holder = if pem.is_empty() { self.reserved.holder(&rec.certname) } else { self.protected(rec, &pem) };
        let serial = &rec.serial;
        match holder {
            Some(Holder::Service) => format!(
                "It is the service's own TLS certificate: `vouch revoke --serial {serial}` would put it on this CA's \
                 CRL, and agents that check the CRL refuse to connect to `vouch serve` until it is restarted (it \
                 issues itself a new certificate then)"
            ),
            Some(Holder::Admin) => format!(
                "It is an administrator's certificate: `vouch revoke --serial {serial}` would put it on this CA's \
                 CRL, and `vouch serve` refuses it (403) from then on (`vouch admin new NAME` makes another)"
            ),
            Some(Holder::OtherMaster) => format!(
                "It carries a name of another master's service: `vouch revoke --serial {serial}` would put it on \
                 its CA's CRL, and agents that check the CRL refuse to connect to that master until it is \
                 restarted (it issues itself a new certificate then)"
            ),
            None => format!("`vouch revoke --serial {serial}` revokes it (on this CA's CRL)"),
        }
    }

    /// `vouch revoke --serial`: the conductor of this root with `serial` (lowercase hex, as
    /// [`normal_serial`] gives it), in words, when this data directory knows it as one:
    /// `root_issued.txt` records it, or it is the service's own conductor.
    pub(super) fn conductor_by_serial(&self, serial: &str) -> Option<String> {
        let serial = serial_value(serial);
        if let Ok(Some(i)) = root_issued::find(&self.dir.ca(), &serial) {
            if i.kind == Kind::Conductor {
                return Some(format!(
                    "conductor {} ({} records it)",
                    i.subject,
                    self.dir.file(root_issued::ROOT_ISSUED).display()
                ));
            }
        }
        let local = self.dir.dir.join(bootstrap::CONDUCTOR_CERT);
        let pem = crate::files::durable::read_regular(&local).ok()?;
        let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok()?;
        let (_, c) = x509_parser::parse_x509_certificate(&der).ok()?;
        let root = root_der_of(&self.dir).ok()?;
        (serial_value(&crate::encoding::hex(c.raw_serial())) == serial
            && is_conductor_of(&c, &der, std::slice::from_ref(&root)))
        .then(|| format!("the service's own conductor {} ({})", c.subject(), local.display()))
    }

    /// The current (unrevoked, unexpired) node certificates that the conductor with
    /// `fingerprint`, else the root-issued conductor with `serial` (its certificate as the
    /// records hold it), vouched for. Reads each current certificate's record: one read per
    /// certificate, without the store's lock.
    pub fn vouched_by(&self, serial: &str, fingerprint: Option<&str>, now: OffsetDateTime) -> Result<Vouched, Error> {
        use base64::Engine;
        let root_der = root_der_of(&self.dir)?;
        let mut out = Vouched::default();
        // The conductors met so far (fingerprint: whether it is the one), each parsed once.
        let mut judged = std::collections::HashMap::<String, bool>::new();
        let found = &mut out;
        self.for_each_certificate(|l| -> Result<(), Error> {
            let current =
                !l.revoked && crate::encoding::time::parse_rfc3339(&l.not_after).ok().is_some_and(|t| t > now);
            if !current {
                return Ok(());
            }
            let rec = match self.store.record(&l.serial) {
                Ok(Some(rec)) => rec,
                Ok(None) | Err(StoreError::Corrupt { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let Some(fp) = rec.conductor.as_deref() else { return Ok(()) };
            let matched = match fingerprint {
                Some(want) => fp == want,
                None => *judged.entry(fp.to_string()).or_insert_with(|| {
                    let der = rec
                        .conductor_cert
                        .as_deref()
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                        .unwrap_or_default();
                    match x509_parser::parse_x509_certificate(&der) {
                        Ok((_, c))
                            if serial_value(&crate::encoding::hex(c.raw_serial())) == serial
                                && is_conductor_of(&c, &der, std::slice::from_ref(&root_der)) =>
                        {
                            found.conductor.get_or_insert((c.subject().to_string(), fp.to_string()));
                            true
                        }
                        _ => false,
                    }
                }),
            };
            if matched {
                found.current = found.current.saturating_add(1);
            }
            Ok(())
        })?;
        Ok(out)
    }
}

/// Whether `c` (DER `der`) is a conductor the root (`root`: its certificate, DER) issued:
/// signed by the root's key, the extended key usage 1.3.6.1.4.1.34380.2.0, no CA.
fn is_conductor_of(c: &x509_parser::certificate::X509Certificate<'_>, der: &[u8], root: &[Vec<u8>]) -> bool {
    let is_ca = matches!(c.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
    !is_ca && has_conductor_eku(c) && super::verify::signed_by_one_of(der, root).is_ok()
}

fn has_conductor_eku(c: &x509_parser::certificate::X509Certificate<'_>) -> bool {
    matches!(c.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(crate::encoding::oids::EKU_CONDUCTOR.iter().copied()))))
}

/// The conductor `vouch conductor revoke` is given.
struct Target {
    serial: String,
    /// What it is, in words.
    what: String,
    /// Its SHA-256 (lowercase hex).
    fingerprint: String,
    /// See [`RootRevoked::held`].
    held: bool,
}

/// The data directory's root certificate (DER).
fn root_der_of(dir: &DataDir) -> Result<Vec<u8>, Error> {
    let path = dir.file(bootstrap::ROOT_CERT);
    let pem = crate::files::durable::read_regular_followed(&path).map_err(|source| Error::Io {
        path: path.clone(),
        op: "read",
        source,
    })?;
    let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: path.clone(), detail: e.to_string() })?;
    x509_parser::parse_x509_certificate(&der).map_err(|e| Error::Cert { path, detail: e.to_string() })?;
    Ok(der)
}

#[cfg(test)]
mod tests {
    use super::{serial_value, RootRevocation};

    #[test]
    fn a_root_revocation_line_reads_back_and_serials_compare_by_value() {
        let r = RootRevocation {
            serial: "8a01".into(),
            time: "2030-01-01T00:00:00Z".into(),
            reason: "keyCompromise".into(),
            fingerprint: Some("ab".repeat(32)),
        };
        assert_eq!(RootRevocation::parse(&r.line()), Some(r.clone()));
        let bare = RootRevocation { fingerprint: None, ..r.clone() };
        assert_eq!(RootRevocation::parse(&bare.line()), Some(bare));
        // The certificate's bytes (a leading zero octet) and openssl's form name one serial.
        assert_eq!(serial_value("008a01"), "8a01");
        assert_eq!(serial_value("00"), "00");
        assert_eq!(
            RootRevocation::parse("008a01 2030-01-01T00:00:00Z keyCompromise").map(|r| r.serial_bytes()),
            Some(vec![0x8a, 0x01])
        );
        // Cut off inside its serial: no space after it, no serial.
        for bad in ["", "8a01", "xyz 2030 keyCompromise", "8a0 2030 keyCompromise", &format!("{} x", "ab".repeat(21))] {
            assert_eq!(RootRevocation::parse(bad), None, "{bad:?}");
        }
    }
}
