//! The master CA's CRL: when it is due, kept fresh by `maintain` (with the root's), and
//! written from the revocation log (entries of the previous CRL the log lost kept on it).

use super::crl_der::crl_serials;
use super::crl_expiry::{warn_kept_by_certificate, Certified};
use super::crl_files::{after_second, modified_second, next_crl_number, read_text};
use super::revocation_input::reason_code;
use super::Authority;
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::store::{Revocation, WriteLock};
use time::OffsetDateTime;

impl Authority {
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
    /// logged one) and its certificate agrees ([`Authority::certified_leaves`]); anything
    /// else (no record, an unreadable one, one without a notAfter, on LDAP no certificate to tell)
    /// keeps it, as the previous CRL had it (its revocation time and reason). No previous CRL, or
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
                // The record's notAfter is the store's: the certificate must say so too.
                Ok(Some(rec)) => {
                    self.off_the_crl(&Revocation::of(&rec, String::new(), String::new(), false), now)
                        && self.certified_leaves(&self.certified_expiry(&hex, &rec.certname, now)?)
                }
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

    /// The CRL's entries from the revocation log, and every serial it names (lowercase hex).
    /// A certificate that expired more than a CRL period ago leaves the CRL: every CRL
    /// issued while it was valid, and a whole period of CRLs after, listed it (RFC 5280
    /// 5.1.2.6 requires one). Short lifetimes keep a churning fleet's CRL small. The expiry a
    /// revocation states is the store's, which any writer of the store may change: a serial
    /// the previous CRL listed leaves only when its certificate says so too
    /// ([`Authority::certified_expiry`]); so only the serials leaving at this write are
    /// checked; one without a certificate to tell stays where the store keeps every revoked
    /// certificate (LDAP), and leaves by the store's word on the file store (said once per CRL).
    fn revoked_entries(
        &self,
        now: OffsetDateTime,
    ) -> Result<(Vec<rcgen::RevokedCertParams>, std::collections::HashSet<String>), Error> {
        let mut seen = std::collections::HashSet::new();
        let mut revoked = Vec::new();
        let mut previous: Option<std::collections::HashSet<String>> = None;
        let mut kept = Vec::new();
        for r in self.store.revocations()? {
            if !seen.insert(r.serial.clone()) {
                continue;
            }
            if self.off_the_crl(&r, now) {
                let previous = previous.get_or_insert_with(|| self.previous_crl_serials());
                if !previous.contains(&r.serial) {
                    continue;
                }
                match self.certified_expiry(&r.serial, &r.certname, now)? {
                    Certified::Due(t) => kept.push((r.serial.clone(), format!("its certificate expires {t}"))),
                    Certified::Unknown(why) if self.store.keeps_revoked_certificates() => {
                        kept.push((r.serial.clone(), why))
                    }
                    Certified::Off | Certified::Unknown(_) => continue,
                }
            }
            let serial = (0..r.serial.len())
                .step_by(2)
                .filter_map(|i| r.serial.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Vec<u8>>();
            revoked.push(rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from_slice(&serial),
                // Never later than now: a relying party that reads the date (Java's, Puppet
                // Server's) takes a certificate revoked in the future as valid until then, and
                // the date is the store's, which a writer without the CA key may change.
                revocation_time: crate::encoding::time::parse_rfc3339(&r.time).ok().map_or(now, |t| t.min(now)),
                reason_code: reason_code(&r.reason),
                invalidity_date: None,
            });
        }
        warn_kept_by_certificate(&kept);
        Ok((revoked, seen))
    }

    pub(super) fn write_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let number_path = self.dir.file("crl_number");
        let number = next_crl_number(&number_path, &self.dir.file("ca_crl.pem"), now)?;
        // Read before the revocations: one recorded meanwhile makes the next CRL due.
        let stamp = self.store.revocations_stamp()?;
        let (mut revoked, seen) = self.revoked_entries(now)?;
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
            key_identifier_method: super::crl_der::key_id_of(&self.ca.cert_der),
        };
        let crl = params.signed_by(&self.ca.issuer).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let pem = crl.pem().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        crate::files::durable::write_replace(&number_path, format!("{number}\n").as_bytes(), 0o644)
            .map_err(|source| Error::Io { path: number_path.clone(), op: "write", source })?;
        let path = self.dir.file("ca_crl.pem");
        let dated = Some(after_second(modified_second(&path), std::time::SystemTime::now()));
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
