//! Revocation and the CRLs (the master CA's, kept fresh by `maintain`, and the root's).

use super::{check_name, Authority};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::bootstrap;
use crate::store::{CertRecord, Expected, Revocation, State, WriteLock};
use time::OffsetDateTime;

/// How [`Authority::revoke`] and [`Authority::revoke_serial`] end their answer for a
/// certificate revoked before (nothing changed): the CLI says no more after it.
pub const ALREADY_REVOKED: &str = "was already revoked";

/// RFC 5280 revocation reasons vouch records.
pub const REASONS: &[&str] = &[
    "unspecified",
    "keyCompromise",
    "caCompromise",
    "affiliationChanged",
    "superseded",
    "cessationOfOperation",
    "privilegeWithdrawn",
];

pub(super) fn reason_code(r: &str) -> Option<rcgen::RevocationReason> {
    use rcgen::RevocationReason as R;
    Some(match r {
        "unspecified" => R::Unspecified,
        "keyCompromise" => R::KeyCompromise,
        "caCompromise" => R::CaCompromise,
        "affiliationChanged" => R::AffiliationChanged,
        "superseded" => R::Superseded,
        "cessationOfOperation" => R::CessationOfOperation,
        "privilegeWithdrawn" => R::PrivilegeWithdrawn,
        _ => return None,
    })
}

/// The number the next CRL gets. A CRL number never goes back (RFC 5280 5.2.3; a compile
/// server refuses a CRL numbered lower than the one it holds), whatever happened to the
/// files: it is one more than the last one issued (the larger of the number in
/// `number_file`, the operator's to edit, and the crlNumber of the CRL in `crl_file`), and
/// at least the current Unix time. The time is what keeps a data directory restored from a
/// backup (both files older) or a damaged `number_file` from numbering a CRL below one
/// already published (in microseconds: numbers jump, which RFC 5280 allows). Numbers are
/// counted in 128 bits (RFC 5280 allows 20 octets): a CRL on disk numbered beyond them (not
/// vouch's) is refused, vouch could only number the next one lower.
pub(super) fn next_crl_number(
    number_file: &std::path::Path,
    crl_file: &std::path::Path,
    now: OffsetDateTime,
) -> Result<u128, Error> {
    let mut unknown = Vec::new();
    let from_file = match read_text(number_file) {
        Ok(s) => s.trim().parse::<u128>().ok().or_else(|| {
            unknown.push((number_file, "not a number"));
            None
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => {
            unknown.push((number_file, "unreadable"));
            None
        }
    };
    let from_crl = match crate::files::durable::read_regular(crl_file) {
        Ok(pem) => match crl_number_of(&pem) {
            CrlNumber::Fits(n) => Some(n),
            CrlNumber::None => {
                unknown.push((crl_file, "a CRL with no number vouch can read"));
                None
            }
            CrlNumber::TooLarge(n) => {
                return Err(Error::Store {
                    detail: format!(
                        "{} is numbered {n}, beyond the 128-bit numbers vouch gives its CRLs: the next CRL \
                         would be numbered lower, which relying parties refuse; nothing was written. \
                         Move that CRL away only if it was never published",
                        crl_file.display()
                    ),
                })
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => {
            unknown.push((crl_file, "unreadable"));
            None
        }
    };
    for (path, why) in unknown {
        tracing::warn!(
            event = "crl-number-unknown",
            path = %path.display(),
            detail = %format!("{why}: the CRL number continues from the other file and the current time"),
        );
    }
    let last = from_file.unwrap_or(0).max(from_crl.unwrap_or(0));
    let next = last
        .checked_add(1)
        .ok_or_else(|| Error::Store { detail: format!("{} is at its largest value", number_file.display()) })?;
    // Microseconds: faster than CRLs are ever written, so a burst never runs the count ahead
    // of the clock (a restore soon after would then fall below it).
    Ok(next.max(u128::try_from(now.unix_timestamp_nanos() / 1000).unwrap_or(0)))
}

/// A serial as the store keeps it (lowercase hex, an even number of digits, at most 40) from
/// what an operator copies: `openssl x509 -serial`'s `serial=43A4…`, `openssl x509 -text`'s
/// `43:a4:…`, a `0x` prefix, or vouch's own form. An odd number of digits gets a leading zero.
pub(super) fn normal_serial(given: &str) -> Option<String> {
    let t = given.trim();
    let t = t.strip_prefix("serial=").unwrap_or(t);
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    // Colons only between octets (`43:a4:…`), each one or two digits.
    let mut hex = if t.contains(':') {
        let parts: Vec<&str> = t.split(':').collect();
        if parts.iter().any(|p| p.is_empty() || p.len() > 2) {
            return None;
        }
        parts.iter().map(|p| format!("{p:0>2}")).collect::<String>()
    } else {
        t.to_string()
    }
    .to_ascii_lowercase();
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if hex.len() % 2 == 1 {
        hex.insert(0, '0');
    }
    (hex.len() <= 40).then_some(hex)
}

/// What the first CRL in a PEM file says its number is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CrlNumber {
    Fits(u128),
    /// No CRL, or one without a number.
    None,
    TooLarge(String),
}

fn crl_number_of(pem: &[u8]) -> CrlNumber {
    let Ok((_, der)) = crate::encoding::pem::find(pem, &["X509 CRL"]) else { return CrlNumber::None };
    crl_number_in(&der).unwrap_or(CrlNumber::None)
}

/// The crlNumber extension (2.5.29.20) of a DER CertificateList, read by walking its
/// TLV headers: the revoked certificates (millions of bytes on a large CRL) are stepped
/// over, not parsed; nor is the signature checked (the number is only compared, never
/// trusted for more). `None`: not such a CRL.
pub(super) fn crl_number_in(der: &[u8]) -> Option<CrlNumber> {
    use x509_parser::asn1_rs::{Any, Class, FromDer, Tag};
    const CRL_NUMBER: [u8; 3] = [0x55, 0x1d, 0x14];
    let (_, list) = Any::from_der(der).ok()?;
    let (_, tbs) = Any::from_der(list.data).ok()?;
    if list.tag() != Tag::Sequence || tbs.tag() != Tag::Sequence {
        return None;
    }
    // TBSCertList's fields in order; the extensions are its last, [0] EXPLICIT.
    let mut fields = tbs.data;
    while !fields.is_empty() {
        let (rest, field) = Any::from_der(fields).ok()?;
        fields = rest;
        if field.class() != Class::ContextSpecific || field.tag() != Tag(0) {
            continue;
        }
        let (_, extensions) = Any::from_der(field.data).ok()?;
        let mut each = extensions.data;
        while !each.is_empty() {
            let (rest, extension) = Any::from_der(each).ok()?;
            each = rest;
            let (after_id, id) = Any::from_der(extension.data).ok()?;
            if id.tag() != Tag::Oid || id.data != CRL_NUMBER {
                continue;
            }
            // extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING (an INTEGER).
            let (after, mut value) = Any::from_der(after_id).ok()?;
            if value.tag() == Tag::Boolean {
                value = Any::from_der(after).ok()?.1;
            }
            let (_, int) = Any::from_der(value.data).ok()?;
            if value.tag() != Tag::OctetString || int.tag() != Tag::Integer {
                return None;
            }
            return Some(integer_number(int.data));
        }
        return Some(CrlNumber::None);
    }
    Some(CrlNumber::None)
}

/// A DER INTEGER's content as a CRL number: non-negative, in 128 bits or too large.
fn integer_number(bytes: &[u8]) -> CrlNumber {
    if bytes.first().is_none_or(|b| b & 0x80 != 0) {
        return CrlNumber::None; // empty, or negative: no CRL number
    }
    let digits = bytes.iter().position(|b| *b != 0).map_or(&[][..], |i| &bytes[i..]);
    if digits.len() > 16 {
        return CrlNumber::TooLarge(x509_parser::num_bigint::BigUint::from_bytes_be(digits).to_string());
    }
    CrlNumber::Fits(digits.iter().fold(0u128, |n, b| (n << 8) | u128::from(*b)))
}

impl Authority {
    /// Revokes `rec` (`expected`: the certname's entry, when `rec` is its current certificate).
    pub(super) fn revoke_locked(
        &self,
        lock: &WriteLock,
        rec: &CertRecord,
        expected: Option<&Expected>,
        reason: &str,
        cleaned: bool,
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        let rev = Revocation::of(rec, format_rfc3339(now), reason.to_string(), cleaned);
        self.store.revoke(lock, &rev, rec, expected)?;
        self.finish_revocation(lock, &rev, now)
    }

    /// After an operator's revocation is stored: the certificate is revoked from here on,
    /// whatever fails next. The CRL is written even if the audit line could not be (the
    /// revocation must reach the CRL); a CRL that cannot be written is
    /// [`Error::RevokedCrlNotWritten`], which says the revocation stands.
    fn finish_revocation(&self, lock: &WriteLock, rev: &Revocation, now: OffsetDateTime) -> Result<(), Error> {
        let cleaned = rev.cleaned;
        let audited = self.audit_revocation(rev);
        let done = || {
            format!(
                "{} {} (serial {})",
                if cleaned { "revoked and cleaned" } else { "revoked" },
                rev.certname,
                rev.serial
            )
        };
        if let Err(error) = self.write_crl_locked(lock, now) {
            if let Err(e) = &audited {
                super::warn("audit", &format!("{}: the audit line was not written either: {e}", done()));
            }
            return Err(Error::RevokedCrlNotWritten {
                certname: rev.certname.clone(),
                serial: rev.serial.clone(),
                cleaned,
                error: Box::new(error),
            });
        }
        audited.map_err(|error| Error::Partial {
            done: format!("{}: stored, and the CRL lists it", done()),
            error: Box::new(error),
        })
    }

    /// A revocation stored before (an earlier `vouch revoke` whose CRL could not be written):
    /// the CRL is written now if it is due, so that it lists it; one that still cannot be
    /// written is [`Error::RevokedCrlNotWritten`], as it was then (never a plain success).
    fn crl_for_revoked(
        &self,
        lock: &WriteLock,
        certname: &str,
        serial: &str,
        cleaned: bool,
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        if !self.crl_due(now)? {
            return Ok(());
        }
        self.write_crl_locked(lock, now).map_err(|error| Error::RevokedCrlNotWritten {
            certname: certname.to_string(),
            serial: serial.to_string(),
            cleaned,
            error: Box::new(error),
        })
    }

    /// The audit line of a stored revocation.
    pub(super) fn audit_revocation(&self, rev: &Revocation) -> Result<(), Error> {
        // Compiled only into the tests' build: a plain build holds neither the step nor the
        // variable's name (.ci/run checks).
        #[cfg(feature = "fault-injection")]
        if crate::store::fail_point("audit:revocation") {
            return Err(Error::Io {
                path: self.policy.audit_log.clone().unwrap_or_default(),
                op: "append to",
                source: std::io::Error::other("injected failure (VOUCH_TEST_FAIL_AT=audit:revocation)"),
            });
        }
        self.audit(serde_json::json!({
            "time": rev.time, "event": if rev.cleaned { "cleaned" } else { "revoked" },
            "certname": rev.certname, "serial": rev.serial, "reason": rev.reason,
        }))
    }

    /// What follows a stored revocation: its audit line, and the CRL. The CRL is written
    /// even when the audit line could not be: the revocation is stored, and a CRL without it
    /// would let the certificate be trusted until the next maintenance. The first failure is
    /// returned.
    pub(super) fn after_revocation(
        &self,
        lock: &WriteLock,
        rev: &Revocation,
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        let audited = self.audit_revocation(rev);
        let written = self.write_crl_locked(lock, now);
        audited.and(written)
    }

    /// `vouch revoke` / `vouch clean`. With a shared store, a certificate replaced while it
    /// was being revoked (a renewal racing a revocation for key compromise) is revoked, and
    /// the certname read again and its current certificate revoked too (bounded).
    pub fn revoke(&self, certname: &str, reason: &str, clean: bool, now: OffsetDateTime) -> Result<String, Error> {
        let msg = self.revoke_retried(certname, reason, clean, now)?;
        if !clean {
            return Ok(msg);
        }
        match self.clear_override_after_clean(certname, now) {
            Ok(Some(cleared)) => Ok(format!("{msg}; {cleared}")),
            Ok(None) => Ok(msg),
            Err(error) => Err(Error::Partial { done: msg, error: Box::new(error) }),
        }
    }

    /// [`Authority::revoke`] without what a clean does after it.
    fn revoke_retried(&self, certname: &str, reason: &str, clean: bool, now: OffsetDateTime) -> Result<String, Error> {
        let mut done = Vec::new();
        for _ in 0..4 {
            match self.revoke_once(certname, reason, clean, now) {
                Err(Error::StoreConflict { .. }) => {
                    done.push("a certificate replaced meanwhile was revoked".to_string())
                }
                Ok(msg) if done.is_empty() => return Ok(msg),
                Ok(msg) => return Ok(format!("{msg} ({})", done.join("; "))),
                Err(e) => return Err(e),
            }
        }
        Err(Error::StoreConflict {
            what: format!("the certificate of {certname} kept changing while it was being revoked"),
        })
    }

    /// `vouch revoke --serial`: revokes the certificate with this serial, whether or not its
    /// certname's file can still be read (lost, damaged, or replaced by a newer certificate).
    /// Found by its record, else by its inventory line (a record lost too: the revocation
    /// still puts it on the CRL). A serial as openssl prints it (no leading zero octet) finds
    /// the one the store keeps with it.
    pub fn revoke_serial(&self, given: &str, reason: &str, now: OffsetDateTime) -> Result<String, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        let serial = normal_serial(given).ok_or_else(|| Error::SerialInvalid { given: given.to_string() })?;
        self.store.flush_unlocked()?;
        let lock = self.store.lock()?;
        let candidates = [serial.clone(), format!("00{serial}")];
        let mut rec = None;
        // A record that does not read: the inventory line may still name the certificate.
        let mut damaged = None;
        for s in &candidates {
            match self.store.record(s) {
                Ok(Some(r)) => {
                    rec = Some(r);
                    break;
                }
                Ok(None) => {}
                Err(e @ crate::store::StoreError::Corrupt { .. }) => {
                    damaged.get_or_insert(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        if rec.is_none() {
            rec = self.store.inventory()?.into_iter().rev().find(|e| candidates.contains(&e.serial)).map(|e| {
                CertRecord {
                    not_before: e.not_before,
                    not_after: e.not_after,
                    ..CertRecord::bare(&e.serial, &e.certname, State::Issued)
                }
            });
        }
        let rec = match (rec, damaged) {
            (Some(rec), _) => rec,
            (None, Some(e)) => return Err(e.into()),
            (None, None) => {
                // A conductor's serial: the root issued it, and the root's CRL revokes it.
                return Err(match self.conductor_by_serial(&serial) {
                    Some(what) => Error::SerialIsConductor { serial, what },
                    None => Error::SerialUnknown { serial },
                });
            }
        };
        // The certname's current certificate, when it is this one and can be read: revoked as
        // `vouch revoke CERTNAME` would (a shared store marks the certname's entry too).
        let expected = match self.store.current(&rec.certname) {
            Ok(Some(c)) if c.record.serial == rec.serial => Some(c.expected()),
            _ => None,
        };
        // Another master's certificate (a shared store): its revocations are that CA's, never
        // among this CA's own.
        let another_ca = rec.issuer.as_ref().is_some_and(|i| *i != self.ca_id());
        match rec.state {
            // Revoked by its record: on the CRL only if a revocation lists it (a lost line of
            // revocations.txt: recorded again, at its first time and reason).
            State::Revoked if another_ca || self.store.revocations()?.iter().any(|r| r.serial == rec.serial) => {
                if !another_ca {
                    self.crl_for_revoked(&lock, &rec.certname, &rec.serial, false, now)?;
                }
                return Ok(format!("serial {} ({}) {ALREADY_REVOKED}", rec.serial, rec.certname));
            }
            State::Revoked => {
                let rev = Revocation::of(
                    &rec,
                    rec.revoked_at.clone().unwrap_or_else(|| format_rfc3339(now)),
                    rec.reason.clone().unwrap_or_else(|| reason.to_string()),
                    false,
                );
                self.store.revoke(&lock, &rev, &rec, None)?;
                self.finish_revocation(&lock, &rev, now)?;
                return Ok(format!(
                    "serial {} ({}) was revoked by its record, but no revocation listed it: recorded again, \
                     on the CRL now",
                    rec.serial, rec.certname
                ));
            }
            // Reserved, and no certificate of its certname carries it (one that does was
            // issued: revoked below).
            State::Intent | State::Abandoned if expected.is_none() => {
                return Err(Error::SerialNeverIssued {
                    serial: rec.serial,
                    certname: rec.certname,
                    state: format!("{:?}", rec.state).to_lowercase(),
                })
            }
            State::Issued | State::Intent | State::Abandoned => {}
        }
        // A revocation the list holds already (its record said issued: revocation-not-in-record):
        // the record is made to say it, at its time and reason, as the CRL carries it.
        if let Some(listed) = self.store.revocations()?.into_iter().find(|r| r.serial == rec.serial) {
            let rev = Revocation::of(&rec, listed.time, listed.reason, false);
            self.store.revoke(&lock, &rev, &rec, expected.as_ref())?;
            self.finish_revocation(&lock, &rev, now)?;
            return Ok(format!(
                "serial {} ({}) was listed as revoked, its record said issued: it says revoked now",
                rec.serial, rec.certname
            ));
        }
        self.revoke_locked(&lock, &rec, expected.as_ref(), reason, false, now)?;
        Ok(format!("revoked serial {} ({})", rec.serial, rec.certname))
    }

    fn revoke_once(&self, certname: &str, reason: &str, clean: bool, now: OffsetDateTime) -> Result<String, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        check_name(certname)?;
        // A revocation checkpoints first, under the lock: what the flush can write before, it does.
        self.store.flush_unlocked()?;
        let lock = self.store.lock()?;
        // Never another node's certificate in this certname's name (a damaged store).
        let Some(current) = self.current_checked(certname)? else {
            if clean {
                self.store.remove_request(certname)?;
                return Ok(format!("no certificate for {certname}; pending request removed if there was one"));
            }
            return Err(Error::NotFound { certname: certname.to_string() });
        };
        let expected = current.expected();
        let rec = current.record;
        if rec.state == State::Revoked && !clean {
            self.crl_for_revoked(&lock, certname, &rec.serial, false, now)?;
            return Ok(format!("{certname} (serial {}) {ALREADY_REVOKED}", rec.serial));
        }
        if rec.state == State::Revoked {
            // Clean a revoked certificate: forget it without a second CRL entry.
            let rev = Revocation {
                certname: certname.to_string(),
                ..Revocation::of(
                    &rec,
                    rec.revoked_at.clone().unwrap_or_else(|| format_rfc3339(now)),
                    rec.reason.clone().unwrap_or_else(|| reason.to_string()),
                    true,
                )
            };
            self.store.revoke(&lock, &rev, &rec, Some(&expected))?;
            self.crl_for_revoked(&lock, certname, &rec.serial, true, now)?;
            return Ok(format!("cleaned {certname} (serial {})", rec.serial));
        }
        self.revoke_locked(&lock, &rec, Some(&expected), reason, clean, now)?;
        Ok(format!("{} {certname} (serial {})", if clean { "revoked and cleaned" } else { "revoked" }, rec.serial))
    }

    /// Whether the CRL is missing or within `refresh_before` of its nextUpdate.
    /// Reads the small `crl_next_update` file written beside the CRL, so that
    /// the hot path never parses a large CRL.
    pub fn crl_due(&self, now: OffsetDateTime) -> Result<bool, Error> {
        let next = match read_text(self.dir.file("crl_next_update")) {
            Ok(s) => crate::encoding::time::parse_rfc3339(s.trim()).ok(),
            Err(_) => None,
        };
        let Some(next) = next else { return Ok(true) };
        // A revocation recorded after the last CRL (e.g. a crash between the two) makes it due.
        // (Another master's revocation of this CA's certificate, with a shared store.)
        let recorded = read_text(self.dir.file("crl_revocations_size")).ok();
        let stamp = self.store.revocations_stamp()?;
        if recorded.as_deref().map(str::trim) != Some(stamp.as_str()) {
            return Ok(true);
        }
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        Ok(next - now < refresh || !self.dir.file("ca_crl.pem").exists())
    }

    /// Regenerates the CRL if it is due. Every command that touches the store calls this.
    pub fn maintain(&self, now: OffsetDateTime) -> Result<(), Error> {
        self.maintain_with(now, false).map(drop)
    }

    /// [`Authority::maintain`] for the commands that show the store (`vouch list`, `vouch
    /// store verify`): a CRL that cannot be written is a `crl-not-written` warning and the
    /// command goes on, so that the store can be seen (and checked) when the CRL cannot be
    /// written: after `vouch revoke` said the revocation is stored but its CRL is not.
    pub fn maintain_or_warn(&self, now: OffsetDateTime) -> Result<(), Error> {
        self.maintain_with(now, true).map(drop)
    }

    /// [`Authority::maintain`]; with `warn_only`, a CRL that cannot be written is a warning,
    /// and the answer `false` (every CRL that was due written: `true`).
    pub(super) fn maintain_with(&self, now: OffsetDateTime, warn_only: bool) -> Result<bool, Error> {
        let mut all = true;
        if self.crl_due(now)? {
            let lock = self.store.lock()?;
            if self.crl_due(now)? {
                all &= crl_written(self.write_crl_locked(&lock, now), warn_only)?;
            }
        }
        if self.root_crl_due(now) {
            let lock = self.store.lock()?;
            if self.root_crl_due(now) {
                let written = crl_written(self.write_root_crl_locked(&lock, now), warn_only)?;
                all &= written;
                drop(lock);
                // Written again (due, or a revocation's CRL left unwritten): the fleet's copy too.
                if written && self.store.shares_root_crl() {
                    if let Err(e) = self.publish_root_crl() {
                        tracing::warn!(
                            event = "root-crl-not-published",
                            detail = %e,
                            hint = "the root CRL here is current; `vouch conductor publish-crl` publishes it in the \
                                    shared store",
                        );
                    }
                }
            }
        }
        Ok(all)
    }

    /// Whether a revocation has left the CRL: its certificate expired more than a CRL period
    /// (the policy's `crl_validity`) before `now`.
    pub(super) fn off_the_crl(&self, r: &Revocation, now: OffsetDateTime) -> bool {
        let period = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        r.not_after
            .as_deref()
            .and_then(|t| crate::encoding::time::parse_rfc3339(t).ok())
            .and_then(|t| t.checked_add(period))
            .is_some_and(|t| t < now)
    }

    /// `vouch crl`: regenerates and returns the CRL PEM.
    pub fn crl(&self, now: OffsetDateTime) -> Result<String, Error> {
        let lock = self.store.lock()?;
        self.write_crl_locked(&lock, now)?;
        read_text(self.dir.file("ca_crl.pem")).map_err(|source| Error::Io {
            path: self.dir.file("ca_crl.pem"),
            op: "read",
            source,
        })
    }

    /// The entries of the CRL written last (`DIR/ca/ca_crl.pem`) that the revocation log no
    /// longer names (`logged`: every serial it names, lowercase hex) and that may not leave
    /// the CRL: the log cut short or damaged (a disk, a restore, a hand) would otherwise
    /// publish a CRL without them, and the certificates would be valid again for every
    /// relying party. An entry leaves only when the store's record of its serial (whatever its
    /// state) says it expired more than a CRL period ago ([`Self::off_the_crl`], as for a
    /// logged one); anything else (no record, an unreadable one, one without a notAfter) keeps
    /// it, as the previous CRL had it (its revocation time and reason). No previous CRL, or
    /// one that does not read as this CA's: nothing kept.
    fn kept_from_previous_crl(
        &self,
        logged: &std::collections::HashSet<String>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, rcgen::RevokedCertParams)>, Error> {
        let path = self.dir.file("ca_crl.pem");
        let Ok(bytes) = crate::files::durable::read_regular(&path) else { return Ok(Vec::new()) };
        let Ok((_, der)) = crate::encoding::pem::find(&bytes, &["X509 CRL"]) else { return Ok(Vec::new()) };
        // The usual case, first and cheaply: every serial of the previous CRL is in the log
        // (entries that aged off the CRL stay in the log too), so nothing is parsed further.
        if crl_serials(&der).is_some_and(|serials| serials.iter().all(|s| logged.contains(&crate::encoding::hex(s)))) {
            return Ok(Vec::new());
        }
        let Ok((_, crl)) = x509_parser::parse_x509_crl(&der) else { return Ok(Vec::new()) };
        // Only this CA's own CRL (a file put there from elsewhere lists nothing of its own):
        // its signature verifies with this CA's key. The name alone is no proof: every
        // `vouch ca init` names its master CA alike, and a CRL of another CA (or of this
        // CA's earlier key) would have its entries listed on every CRL this CA signs.
        let Ok((_, ca)) = x509_parser::parse_x509_certificate(&self.ca.cert_der) else { return Ok(Vec::new()) };
        if crl.issuer().as_raw() != ca.subject().as_raw()
            || crate::encoding::verify_x509_signature(
                &crl.signature_algorithm,
                &ca,
                crl.tbs_cert_list.as_ref(),
                &crl.signature_value.data,
            )
            .is_err()
        {
            return Ok(Vec::new());
        }
        let mut kept = Vec::new();
        for entry in crl.iter_revoked_certificates() {
            let hex = crate::encoding::hex(entry.raw_serial());
            if logged.contains(&hex) {
                continue;
            }
            let left = match self.store.record(&hex) {
                // Its notAfter is the certificate's whatever the record's state (one restored
                // from an older backup says issued): expired a period ago, no relying party
                // takes it, and only this lets the entry ever leave.
                Ok(Some(rec)) => self.off_the_crl(&Revocation::of(&rec, String::new(), String::new(), false), now),
                Ok(None) => false,
                Err(e @ crate::store::StoreError::Unavailable { .. }) => return Err(e.into()),
                Err(_) => false,
            };
            if left {
                continue;
            }
            let reason = entry.reason_code().and_then(|(_, code)| match code.0 {
                0 => reason_code("unspecified"),
                1 => reason_code("keyCompromise"),
                2 => reason_code("caCompromise"),
                3 => reason_code("affiliationChanged"),
                4 => reason_code("superseded"),
                5 => reason_code("cessationOfOperation"),
                9 => reason_code("privilegeWithdrawn"),
                _ => None,
            });
            kept.push((
                hex,
                rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from_slice(entry.raw_serial()),
                    revocation_time: entry.revocation_date.to_datetime(),
                    reason_code: reason,
                    invalidity_date: None,
                },
            ));
        }
        Ok(kept)
    }

    pub(super) fn write_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let number_path = self.dir.file("crl_number");
        let number = next_crl_number(&number_path, &self.dir.file("ca_crl.pem"), now)?;
        // Read before the revocations: one recorded meanwhile makes the next CRL due.
        let stamp = self.store.revocations_stamp()?;
        let mut seen = std::collections::HashSet::new();
        let mut revoked = Vec::new();
        // A certificate that expired more than a CRL period ago leaves the CRL: every CRL
        // issued while it was valid, and a whole period of CRLs after, listed it (RFC 5280
        // 5.1.2.6 requires one). Short lifetimes keep a churning fleet's CRL small.
        for r in self.store.revocations()? {
            if !seen.insert(r.serial.clone()) || self.off_the_crl(&r, now) {
                continue;
            }
            let serial = (0..r.serial.len())
                .step_by(2)
                .filter_map(|i| r.serial.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Vec<u8>>();
            revoked.push(rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(&serial),
                revocation_time: crate::encoding::time::parse_rfc3339(&r.time).ok().unwrap_or(now),
                reason_code: reason_code(&r.reason),
                invalidity_date: None,
            });
        }
        let kept = self.kept_from_previous_crl(&seen, now)?;
        if !kept.is_empty() {
            let named: Vec<&str> = kept.iter().take(5).map(|(hex, _)| hex.as_str()).collect();
            let more = kept.len().saturating_sub(named.len());
            super::warn(
                "store",
                &format!(
                    "the revocation log lists no line for {} certificate(s) the previous CRL listed and the store \
                     does not know to have left it ({}{}): kept on the new CRL; `vouch store verify` names the \
                     revocations the log is missing, `vouch revoke --serial` records each again",
                    kept.len(),
                    named.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                ),
            );
            revoked.extend(kept.into_iter().map(|(_, r)| r));
        }
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now
                .checked_add(time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30)))
                .ok_or_else(|| Error::Date { detail: "the CRL's nextUpdate would be past the year 9999".into() })?,
            crl_number: rcgen::SerialNumber::from_slice(&number.to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.ca.issuer).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let pem = crl.pem().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        crate::files::durable::write_replace(&number_path, format!("{number}\n").as_bytes(), 0o644)
            .map_err(|source| Error::Io { path: number_path.clone(), op: "write", source })?;
        let path = self.dir.file("ca_crl.pem");
        let dated = after_second(modified_second(&path));
        crate::files::durable::write_replace_dated(&path, pem.as_bytes(), 0o644, dated)
            .map_err(|source| Error::Io { path: path.clone(), op: "write", source })?;
        // Written after the CRL: a crash between the two leaves an older date, which only
        // makes the next command regenerate sooner.
        let size = stamp;
        let size_path = self.dir.file("crl_revocations_size");
        crate::files::durable::write_replace(&size_path, format!("{size}\n").as_bytes(), 0o644)
            .map_err(|source| Error::Io { path: size_path, op: "write", source })?;
        let next = self.dir.file("crl_next_update");
        crate::files::durable::write_replace(
            &next,
            format!("{}\n", format_rfc3339(params.next_update)).as_bytes(),
            0o644,
        )
        .map_err(|source| Error::Io { path: next, op: "write", source })?;
        // The fleet's copy: every other master serves it from the store.
        self.publish_own_crl();
        Ok(())
    }

    /// The root CRL (the conductors `vouch conductor revoke` revoked, listed in
    /// `root_revocations.txt`) is due when missing, within `refresh_before` of its
    /// nextUpdate, or older than the last root revocation recorded (a crash between the
    /// record and the CRL, or a writer that read the list before it), and only if the root
    /// key is on this machine (an operator may keep it offline).
    pub(super) fn root_crl_due(&self, now: OffsetDateTime) -> bool {
        if !self.dir.file(bootstrap::ROOT_KEY).exists() {
            return false;
        }
        // No stamp yet (a CRL written before root revocations existed) stands for none.
        let recorded = read_text(self.dir.file(super::root_revoke::ROOT_CRL_STAMP)).unwrap_or_else(|_| "0".into());
        if recorded.trim() != super::root_revoke::revocations_stamp(&self.dir) {
            return true;
        }
        // A root CRL that does not read (damaged, truncated) revokes nothing in the decision:
        // written again (it is small: the root signs only master CAs and conductors).
        if !super::root_revoke::root_crl_reads(&self.dir) {
            return true;
        }
        let next = read_text(self.dir.file("root_crl_next_update"))
            .ok()
            .and_then(|s| crate::encoding::time::parse_rfc3339(s.trim()).ok());
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        match next {
            Some(next) => next - now < refresh || !self.dir.file(bootstrap::ROOT_CRL).exists(),
            None => true,
        }
    }

    /// Writes the root's CRL: every revocation `root_revocations.txt` records (conductors,
    /// by `vouch conductor revoke`), with its time and reason. Puppet agents check revocation
    /// for the whole chain (`certificate_revocation = chain`), so they need a CRL from the
    /// root too; the decision counts it for conductors ([`crate::policy::OwnCrl`]).
    pub(super) fn write_root_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let bootstrap::CertAndKey { cert_der: root_der, key: root_key } =
            bootstrap::load_cert_and_key(&self.dir.file(bootstrap::ROOT_CERT), &self.dir.file(bootstrap::ROOT_KEY))?;
        let issuer =
            rcgen::Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(root_der.as_slice()), root_key)
                .map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let number_path = self.dir.file("root_crl_number");
        let number = next_crl_number(&number_path, &self.dir.file("root_crl.pem"), now)?;
        // Read before the revocations: one recorded meanwhile makes the next CRL due.
        let stamp = super::root_revoke::revocations_stamp(&self.dir);
        let revoked = super::root_revoke::read_root_revocations(&self.dir)?
            .into_iter()
            .map(|r| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(&r.serial_bytes()),
                revocation_time: crate::encoding::time::parse_rfc3339(&r.time).ok().unwrap_or(now),
                reason_code: reason_code(&r.reason),
                invalidity_date: None,
            })
            .collect();
        // A year, or the policy's CRL validity if longer.
        let validity = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now.checked_add(validity.max(time::Duration::days(365))).ok_or_else(|| Error::Date {
                detail: "the root CRL's nextUpdate would be past the year 9999".into(),
            })?,
            crl_number: rcgen::SerialNumber::from_slice(&number.to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&issuer).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let pem = crl.pem().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let write = |path: std::path::PathBuf, bytes: &[u8]| {
            crate::files::durable::write_replace(&path, bytes, 0o644).map_err(|source| Error::Io {
                path,
                op: "write",
                source,
            })
        };
        write(number_path, format!("{number}\n").as_bytes())?;
        let root_crl = self.dir.file(bootstrap::ROOT_CRL);
        let dated = after_second(modified_second(&root_crl));
        crate::files::durable::write_replace_dated(&root_crl, pem.as_bytes(), 0o644, dated)
            .map_err(|source| Error::Io { path: root_crl.clone(), op: "write", source })?;
        write(self.dir.file("root_crl_next_update"), format!("{}\n", format_rfc3339(params.next_update)).as_bytes())?;
        // After the CRL: a crash between the two leaves the older stamp, which only makes
        // the next command write the root CRL again.
        write(self.dir.file(super::root_revoke::ROOT_CRL_STAMP), format!("{stamp}\n").as_bytes())
    }
}

/// A CRL's write, its failure a `crl-not-written` warning instead when `warn_only`: whether
/// it was written.
fn crl_written(written: Result<(), Error>, warn_only: bool) -> Result<bool, Error> {
    match written {
        Err(e) if warn_only => {
            tracing::warn!(
                event = "crl-not-written",
                detail = %e,
                hint = "fix the cause, then run `vouch crl` (the CRL does not list the revocations made since \
                        it was last written)",
            );
            Ok(false)
        }
        r => r.map(|()| true),
    }
}

/// A file's modification time in whole seconds since the epoch, if it exists.
pub(super) fn modified_second(path: &std::path::Path) -> Option<u64> {
    let m = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    m.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// The modification time a CRL about to replace one last modified in second `before` must
/// carry: a later second than that one (`None`: its natural time already is). Agents ask for
/// the CRLs with If-Modified-Since, which has whole seconds: two CRLs written within one
/// second would look the same to an agent holding the first, which would keep it. Set on the
/// new file before it replaces the old one, so it is never served with the old one's date.
pub(super) fn after_second(before: Option<u64>) -> Option<std::time::SystemTime> {
    let before = before?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    (now <= before).then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(before.saturating_add(1)))
}

/// The serials (DER content octets) of a CRL's entries, read with a walk of its DER
/// (RFC 5280 5.1: tbsCertList's optional version, signature, issuer, thisUpdate, optional
/// nextUpdate, then the optional revokedCertificates), without building each entry. `None`
/// when it is not laid out so: the caller then parses it whole.
fn crl_serials(der: &[u8]) -> Option<Vec<&[u8]>> {
    use crate::encoding::der::Reader;
    let list = Reader::new(der).next_tag(0x30, "CertificateList").ok()?;
    let tbs = Reader::new(list.content).next_tag(0x30, "tbsCertList").ok()?;
    let mut r = Reader::new(tbs.content);
    let mut next = r.any().ok()?;
    if next.tag == 0x02 {
        next = r.any().ok()?;
    }
    // signature, issuer
    if next.tag != 0x30 || r.next_tag(0x30, "issuer").is_err() {
        return None;
    }
    let this_update = r.any().ok()?;
    if !matches!(this_update.tag, 0x17 | 0x18) {
        return None;
    }
    let mut serials = Vec::new();
    while !r.is_empty() {
        let field = r.any().ok()?;
        match field.tag {
            0x17 | 0x18 => continue,
            0x30 => {
                let mut entries = Reader::new(field.content);
                while !entries.is_empty() {
                    let entry = entries.next_tag(0x30, "revokedCertificate").ok()?;
                    serials.push(Reader::new(entry.content).next_tag(0x02, "userCertificate").ok()?.content);
                }
            }
            0xa0 => break,
            _ => return None,
        }
    }
    Some(serials)
}

/// A small file vouch writes beside the CRL, as text, never waiting on a FIFO planted there
/// ([`crate::files::durable::read_regular`]).
pub(super) fn read_text(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    let bytes = crate::files::durable::read_regular(path.as_ref())?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::{after_second, crl_number_in, crl_number_of, crl_serials, CrlNumber};

    /// The serials read by walking a CRL are the ones x509-parser reads parsing it whole:
    /// none, a few and many entries (rcgen's CRLs, with a nextUpdate and extensions), and
    /// openssl's fixture; what is not a CRL reads as none, never as other serials.
    #[test]
    fn the_serials_read_by_walking_a_crl_are_x509_parsers() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let mut ders: Vec<Vec<u8>> =
            [0usize, 1, 3, 2000].iter().map(|n| numbered_crl(&issuer, &[7], *n).der().to_vec()).collect();
        let fixture = std::fs::read(format!("{}/fixtures/pki/conductors_crl.pem", env!("CARGO_MANIFEST_DIR"))).unwrap();
        ders.push(crate::encoding::pem::find(&fixture, &["X509 CRL"]).unwrap().1);
        for der in &ders {
            let (_, crl) = x509_parser::parse_x509_crl(der).unwrap();
            let parsed: Vec<&[u8]> = crl.iter_revoked_certificates().map(|e| e.raw_serial()).collect();
            assert_eq!(crl_serials(der), Some(parsed));
        }
        assert_eq!(crl_serials(&[]), None);
        assert_eq!(crl_serials(&crate::encoding::der::sequence(&[&crate::encoding::der::sequence(&[])])), None);
        let cert = std::fs::read(format!("{}/fixtures/pki/root_crt.pem", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let cert = crate::encoding::pem::find(&cert, &["CERTIFICATE"]).unwrap().1;
        assert_eq!(crl_serials(&cert), None, "a certificate is no CRL");
    }

    /// A CA that may sign CRLs: its parameters and its key (the caller makes the issuer).
    fn crl_signer() -> (rcgen::CertificateParams, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.key_usages = vec![rcgen::KeyUsagePurpose::CrlSign, rcgen::KeyUsagePurpose::KeyCertSign];
        (ca, key)
    }

    /// A CRL numbered `number` (big-endian octets) listing `revoked` serials 1, 2, ….
    fn numbered_crl(
        issuer: &rcgen::Issuer<'_, &rcgen::KeyPair>,
        number: &[u8],
        revoked: usize,
    ) -> rcgen::CertificateRevocationList {
        let now = time::OffsetDateTime::now_utc();
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now + time::Duration::days(1),
            crl_number: rcgen::SerialNumber::from_slice(number),
            issuing_distribution_point: None,
            revoked_certs: (0..revoked)
                .map(|i| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from_slice(&(i as u64 + 1).to_be_bytes()),
                    revocation_time: now,
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        params.signed_by(issuer).unwrap()
    }

    /// The number read by walking the CRL's headers is the one x509-parser reads parsing it
    /// whole, for numbers of every size, with and without revoked certificates, the
    /// extension critical or not; what is not a numbered CRL reads as none.
    #[test]
    fn the_crl_number_read_by_walking_is_the_one_a_whole_parse_reads() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let big = |n: usize| {
            let mut b = vec![0x7f];
            b.extend(std::iter::repeat_n(0xab, n - 1));
            b
        };
        let numbers: Vec<Vec<u8>> =
            vec![vec![0], vec![1], vec![0x80], u64::MAX.to_be_bytes().to_vec(), big(16), big(17), big(20)];
        for number in &numbers {
            for revoked in [0usize, 3, 2000] {
                let crl = numbered_crl(&issuer, number, revoked);
                let (_, parsed) = x509_parser::parse_x509_crl(crl.der()).unwrap();
                let whole = parsed.crl_number().unwrap();
                let want =
                    u128::try_from(whole).map_or_else(|_| CrlNumber::TooLarge(whole.to_string()), CrlNumber::Fits);
                assert_eq!(crl_number_in(crl.der()), Some(want), "{number:02x?} with {revoked} revoked");
                assert_eq!(
                    crl_number_of(crl.pem().unwrap().as_bytes()),
                    crl_number_in(crl.der()).unwrap(),
                    "{number:02x?}"
                );
                // Cut anywhere inside: never a panic; a cut CRL reads as none or as a number
                // (the number comes before the signature's end: only compared, never trusted).
                for cut in [1, 2, 10, crl.der().len() / 2, crl.der().len() - 1] {
                    let _ = crl_number_in(&crl.der()[..cut]);
                }
            }
        }
        assert_eq!(crl_number_of(b"not a CRL"), CrlNumber::None);
        assert_eq!(crl_number_in(&[0x30, 0x03, 0x02, 0x01, 0x01]), None);
        // A negative INTEGER is no number.
        assert_eq!(super::integer_number(&[0xff]), CrlNumber::None);
        assert_eq!(super::integer_number(&[0x00, 0x00, 0x05]), CrlNumber::Fits(5));
    }

    /// Review: the walker against a whole parse over damaged CRLs (every truncation, every
    /// single bit flipped, every byte set to a few values, a few thousand random multi-byte
    /// changes). Never a panic; and wherever the whole parse reads a number, the walker reads
    /// one at least as large (a lower one, or none, could take the next CRL's number back),
    /// and it never calls a number too large that the whole parse does not.
    #[test]
    fn review_the_crl_number_walker_never_reads_lower_than_a_whole_parse_on_damaged_crls() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let whole = |der: &[u8]| match x509_parser::parse_x509_crl(der) {
            Ok((_, c)) => match c.crl_number() {
                Some(n) => u128::try_from(n).map_or_else(|_| CrlNumber::TooLarge(n.to_string()), CrlNumber::Fits),
                None => CrlNumber::None,
            },
            Err(_) => CrlNumber::None,
        };
        // (Fits, None) is allowed: on input that is not DER (the [0] wrapper's tag or length,
        // or the crlNumber's OID tag, changed) x509-parser still reads a number, the walker
        // none; the next number then comes from `crl_number` and the clock, as for a CRL
        // that does not parse. A lower number, or a number too large only to one of them, is not.
        let mut bad = Vec::new();
        let mut lenient = 0usize;
        let mut check = |der: &[u8], what: String| {
            let walked = crl_number_in(der).unwrap_or(CrlNumber::None);
            let full = whole(der);
            let fine = match (&full, &walked) {
                (CrlNumber::Fits(n), CrlNumber::Fits(m)) => m >= n,
                (CrlNumber::Fits(_), CrlNumber::None) => {
                    lenient += 1;
                    true
                }
                (CrlNumber::TooLarge(a), CrlNumber::TooLarge(b)) => a == b,
                (CrlNumber::None, CrlNumber::None | CrlNumber::Fits(_)) => true,
                _ => false,
            };
            if !fine && bad.len() < 20 {
                bad.push(format!("{what}: whole parse {full:?}, walked {walked:?}"));
            }
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (number, revoked) in [(vec![0x01, 0x86, 0xa0u8], 0usize), (vec![0x7f; 16], 2), (vec![0x05], 1)] {
            let der = numbered_crl(&issuer, &number, revoked).der().to_vec();
            for cut in 0..der.len() {
                check(&der[..cut], format!("{number:02x?} cut at {cut}"));
            }
            for i in 0..der.len() {
                for bit in 0..8 {
                    let mut d = der.clone();
                    d[i] ^= 1 << bit;
                    check(&d, format!("{number:02x?} byte {i} bit {bit}"));
                }
                for v in [0x00, 0x01, 0x02, 0x04, 0x30, 0x80, 0x81, 0x82, 0xa0, 0xff] {
                    let mut d = der.clone();
                    d[i] = v;
                    check(&d, format!("{number:02x?} byte {i} = {v:02x}"));
                }
            }
            for _ in 0..20000 {
                let mut d = der.clone();
                for _ in 0..(rand() % 4 + 1) {
                    let i = (rand() as usize) % d.len();
                    d[i] = rand() as u8;
                }
                check(&d, format!("{number:02x?} random {:02x?}", d));
            }
        }
        assert!(bad.is_empty(), "{}\n({lenient} read by x509-parser only)", bad.join("\n"));
    }

    /// Review: hand-built CRLs with the extensions in other shapes, read by the walker and
    /// by a whole parse: the crlNumber after or before another extension, critical, two of
    /// them, the extensions followed by another field, a non-minimal INTEGER.
    #[test]
    fn review_the_crl_number_walker_reads_crafted_extension_lists_as_a_whole_parse() {
        fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
            let mut v = vec![tag];
            let n = content.len();
            if n < 128 {
                v.push(n as u8);
            } else if n < 256 {
                v.extend([0x81, n as u8]);
            } else {
                v.extend([0x82, (n >> 8) as u8, n as u8]);
            }
            v.extend_from_slice(content);
            v
        }
        let cat = |parts: &[Vec<u8>]| parts.concat();
        let oid_crl_number = tlv(0x06, &[0x55, 0x1d, 0x14]);
        let number_ext = |n: &[u8], critical: bool| {
            let mut parts = vec![oid_crl_number.clone()];
            if critical {
                parts.push(tlv(0x01, &[0xff]));
            }
            parts.push(tlv(0x04, &tlv(0x02, n)));
            tlv(0x30, &cat(&parts))
        };
        let aki = tlv(0x30, &cat(&[tlv(0x06, &[0x55, 0x1d, 0x23]), tlv(0x04, &tlv(0x30, &tlv(0x80, &[7; 20])))]));
        let sigalg = tlv(0x30, &tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]));
        let issuer = tlv(0x30, &tlv(0x31, &tlv(0x30, &cat(&[tlv(0x06, &[0x55, 0x04, 0x03]), tlv(0x0c, b"ca")]))));
        let time = tlv(0x17, b"260101000000Z");
        let next = tlv(0x17, b"270101000000Z");
        let revoked = tlv(0x30, &tlv(0x30, &cat(&[tlv(0x02, &[0x01]), tlv(0x17, b"260101000000Z")])));
        let crl = |exts: &[Vec<u8>], after: &[Vec<u8>]| {
            let mut tbs =
                vec![tlv(0x02, &[1]), sigalg.clone(), issuer.clone(), time.clone(), next.clone(), revoked.clone()];
            tbs.push(tlv(0xa0, &tlv(0x30, &cat(exts))));
            tbs.extend_from_slice(after);
            tlv(0x30, &cat(&[tlv(0x30, &cat(&tbs)), sigalg.clone(), tlv(0x03, &[0, 0x30, 0x00])]))
        };
        let whole = |der: &[u8]| match x509_parser::parse_x509_crl(der) {
            Ok((_, c)) => match c.crl_number() {
                Some(n) => u128::try_from(n).map_or_else(|_| CrlNumber::TooLarge(n.to_string()), CrlNumber::Fits),
                None => CrlNumber::None,
            },
            Err(_) => CrlNumber::None,
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("number last", crl(&[aki.clone(), number_ext(&[0x05], false)], &[])),
            ("number first", crl(&[number_ext(&[0x05], false), aki.clone()], &[])),
            ("critical", crl(&[aki.clone(), number_ext(&[0x05], true)], &[])),
            ("two numbers", crl(&[number_ext(&[0x05], false), number_ext(&[0x09], false)], &[])),
            ("two numbers, larger first", crl(&[number_ext(&[0x09], false), number_ext(&[0x05], false)], &[])),
            ("a field after the extensions", crl(&[number_ext(&[0x05], false)], &[tlv(0x02, &[0x01])])),
            ("non-minimal", crl(&[number_ext(&[0x00, 0x00, 0x05], false)], &[])),
            ("21 octets", crl(&[number_ext(&[0x7f; 21], false)], &[])),
        ];
        for (what, der) in &cases {
            let walked = crl_number_in(der).unwrap_or(CrlNumber::None);
            match whole(der) {
                // Not DER (a field after the extensions, a non-minimal INTEGER): x509-parser
                // reads no number; the walker's is compared with the others, never lower.
                CrlNumber::None => assert_eq!(walked, CrlNumber::Fits(5), "{what}"),
                full => assert_eq!(walked, full, "{what}"),
            }
        }
    }

    /// The serial forms an operator copies are read; colons only between octets.
    #[test]
    fn serials_are_read_as_openssl_and_vouch_print_them() {
        use super::normal_serial as n;
        assert_eq!(n("serial=43A4F0").as_deref(), Some("43a4f0"));
        assert_eq!(n("43:a4:f0").as_deref(), Some("43a4f0"));
        assert_eq!(n("0x3a4f0").as_deref(), Some("03a4f0"));
        assert_eq!(n(" 43a4f0\n").as_deref(), Some("43a4f0"));
        assert_eq!(n("4:a4").as_deref(), Some("04a4"));
        for bad in ["", "59::28", ":59", "59:", "-5928", "xyz", "43a:4f0", &"ab".repeat(21)] {
            assert_eq!(n(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_new_crl_is_dated_a_second_after_the_one_it_replaces_only_when_needed() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let at = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(after_second(Some(now + 5)), Some(at(now + 6)), "a burst pushed the last one ahead");
        assert_eq!(after_second(Some(now.saturating_sub(10))), None, "its own time is later already");
        assert_eq!(after_second(None), None, "nothing to follow");
    }
}
