//! `vouch conductor revoke`: a conductor the root issued, put on the root's CRL. Each root
//! revocation is a line of `DIR/ca/root_revocations.txt` (appended, synced, under the store's
//! lock), and the root CRL (`DIR/ca/root_crl.pem`) is written again at once with every line.
//! The decision counts that CRL whatever the policy lists ([`crate::policy::OwnCrl`]): the
//! authority reads it when it opens, and again whenever the file changes.

use super::revocation_input::{normal_serial, reason_code, REASONS};
use super::root_revocations::{append_root_revocation, read_root_revocations, serial_value, RootRevocation};
use super::signed::signed_by_one_of;
use super::Authority;
use super::Holder;
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir};
use crate::issuance::root_issued::{self, Kind};
use crate::store::{CertRecord, StoreError};
use std::path::Path;
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;

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
        let master_der = self.ca.cert_der.as_slice();
        let (_, master) = x509_parser::parse_x509_certificate(master_der)
            .map_err(|e| Error::Store { detail: format!("the master CA's certificate: {e}") })?;
        if let Some((path, der)) = target.cert {
            return self.target_by_cert(path, der, given.as_deref(), &root_der, &root, &master);
        }
        let Some(serial) = given else {
            return Err(Error::Usage {
                detail: "give the conductor's certificate (--cert FILE) or its --serial".into(),
            });
        };
        self.refuse_ca_serial(&serial, &root, &master)?;
        self.refuse_store_serial(&serial)?;
        self.conductor_by_given_serial(serial, &root_der, now)
    }

    /// [`Authority::root_target`] given the certificate (`der`, read from `path`; `given`: the
    /// --serial given with it): a conductor the root (`root_der`, `root`) issued, else refused.
    fn target_by_cert(
        &self,
        path: &Path,
        der: &[u8],
        given: Option<&str>,
        root_der: &Vec<u8>,
        root: &X509Certificate<'_>,
        master: &X509Certificate<'_>,
    ) -> Result<Target, Error> {
        let master_der = self.ca.cert_der.as_slice();
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
        if let Err(detail) = signed_by_one_of(der, std::slice::from_ref(root_der)) {
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
            return Err(Error::ConductorNotOurs { path: path.to_path_buf(), root: root.subject().to_string(), detail });
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
            return Err(Error::NotAConductor { path: path.to_path_buf(), subject: cert.subject().to_string(), serial });
        }
        let fingerprint = crate::encoding::sha256_hex(der);
        Ok(Target { serial, what: format!("conductor {}", cert.subject()), fingerprint, held: true })
    }

    /// A serial given alone that names a CA the root issued (the root itself, this master CA,
    /// a master CA sharing the store): refused.
    fn refuse_ca_serial(
        &self,
        serial: &str,
        root: &X509Certificate<'_>,
        master: &X509Certificate<'_>,
    ) -> Result<(), Error> {
        let serial = serial.to_string();
        // What the root issued that this directory holds: the root itself, this master CA, the
        // masters sharing the store, and the conductor `vouch serve`'s first run made.
        if serial_of(root) == serial {
            return Err(ca_refused(serial, format!("the root CA itself ({})", root.subject())));
        }
        if serial_of(master) == serial && master.issuer().as_raw() == root.subject().as_raw() {
            return Err(ca_refused(serial, format!("this master CA ({})", master.subject())));
        }
        for other in self.store.issuers()? {
            let Ok((_, c)) = x509_parser::parse_x509_certificate(&other) else { continue };
            if serial_of(&c) == serial && c.issuer().as_raw() == root.subject().as_raw() {
                return Err(ca_refused(serial, format!("the master CA {} sharing this store", c.subject())));
            }
        }
        Ok(())
    }

    /// A serial given alone that names a certificate this CA's store holds (by its record, or
    /// by its inventory line): refused, with what `vouch revoke --serial` would do instead.
    fn refuse_store_serial(&self, serial: &str) -> Result<(), Error> {
        let serial = serial.to_string();
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
        Ok(())
    }

    /// A serial given alone, once no CA's and no store's: the conductor this data directory
    /// knows by it (`root_issued.txt`, the service's own, the store's records), else refused.
    fn conductor_by_given_serial(
        &self,
        serial: String,
        root_der: &Vec<u8>,
        now: OffsetDateTime,
    ) -> Result<Target, Error> {
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
                    if serial_of(&c) == serial && is_conductor_of(&c, &der, std::slice::from_ref(root_der)) {
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
    !is_ca && has_conductor_eku(c) && signed_by_one_of(der, root).is_ok()
}

fn has_conductor_eku(c: &x509_parser::certificate::X509Certificate<'_>) -> bool {
    matches!(c.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(crate::encoding::oids::EKU_CONDUCTOR.iter().copied()))))
}

/// A certificate's serial as its value (no leading zero octet).
fn serial_of(c: &X509Certificate<'_>) -> String {
    serial_value(&crate::encoding::hex(c.raw_serial()))
}

/// `vouch conductor revoke` refused for a CA's serial.
fn ca_refused(serial: String, what: String) -> Error {
    Error::ConductorRevokeCa { serial, what }
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
