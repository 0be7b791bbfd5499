//! Revocation by the master CA: `vouch revoke`, `vouch clean` and `vouch revoke --serial`,
//! each stored, audited and put on the CRL.

use super::force_guard::AdminHold;
use super::revocation_input::{normal_serial, reason_code, REASONS};
use super::{check_name, Authority};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::store::{CertRecord, Expected, Revocation, State, WriteLock};
use time::OffsetDateTime;

/// How [`Authority::revoke`] and [`Authority::revoke_serial`] end their answer for a
/// certificate revoked before (nothing changed): the CLI says no more after it.
pub const ALREADY_REVOKED: &str = "was already revoked";

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
        self.revoke_guarded(certname, reason, clean, true, now)
    }

    /// [`Authority::revoke`] as `vouch revoke`, `vouch clean` and the API ask it: unless
    /// `force`, a master's service certname and the store's last valid administrator
    /// certificate are refused ([`Authority::refuse_unforced`]), judged under the store's
    /// lock (and, for a valid administrator's certificate, the fleet's lock on such
    /// revocations: [`crate::store::Store::hold_admin_revocations`]) so that two revocations
    /// at once cannot each count the other as the one left.
    pub fn revoke_guarded(
        &self,
        certname: &str,
        reason: &str,
        clean: bool,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        let msg = self.revoke_retried(certname, reason, clean, force, now)?;
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
    fn revoke_retried(
        &self,
        certname: &str,
        reason: &str,
        clean: bool,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        let mut done = Vec::new();
        for _ in 0..4 {
            match self.revoke_once(certname, reason, clean, force, now) {
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
        self.revoke_serial_guarded(given, reason, true, now)
    }

    /// [`Authority::revoke_serial`] as `vouch revoke --serial` asks it: unless `force`, the
    /// guard of [`Authority::revoke_guarded`], under the store's lock.
    pub fn revoke_serial_guarded(
        &self,
        given: &str,
        reason: &str,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        let serial = normal_serial(given).ok_or_else(|| Error::SerialInvalid { given: given.to_string() })?;
        self.store.flush_unlocked()?;
        let lock = self.store.lock()?;
        // Held until the revocation is written (a valid administrator's certificate only).
        let mut hold = self.refuse_unforced_serial(&lock, given, force, now)?;
        let rec = self.record_by_serial(serial)?;
        confirm(&mut hold)?;
        self.revoke_found(&lock, rec, reason, now)
    }

    /// The certificate `vouch revoke --serial` names (`serial`, or the same with a leading
    /// zero octet): its record, else its inventory line; a record that does not read, a
    /// conductor's serial and an unknown one are errors.
    fn record_by_serial(&self, serial: String) -> Result<CertRecord, Error> {
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
        Ok(rec)
    }

    /// `vouch revoke --serial` once its certificate `rec` is found, under `lock`: revoked, or
    /// what was revoked before put on the CRL (recorded again where no revocation lists it).
    fn revoke_found(
        &self,
        lock: &WriteLock,
        rec: CertRecord,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        // The certname's current certificate, when it is this one and can be read: revoked as
        // `vouch revoke CERTNAME` would (a shared store marks the certname's entry too).
        // The same serial of another CA (two CAs' sequential serials) is another certificate.
        let own = self.ca_id();
        let issuer = |r: &CertRecord| r.issuer.clone().unwrap_or_else(|| own.clone());
        let (expected, entry_revoked) = match self.store.current(&rec.certname) {
            Ok(Some(c)) if c.record.serial == rec.serial && issuer(&c.record) == issuer(&rec) => {
                (Some(c.expected()), c.record.state == State::Revoked)
            }
            _ => (None, false),
        };
        // Another master's certificate (a shared store): its revocations are that CA's, never
        // among this CA's own.
        let another_ca = rec.issuer.as_ref().is_some_and(|i| *i != self.ca_id());
        match rec.state {
            // Revoked by its revocation, while its certname's entry still says issued (a
            // revocation cut short between its writes, on a shared store: revocation-unfinished):
            // finished as `vouch revoke CERTNAME` finishes it, at the revocation's time and reason.
            State::Revoked if expected.is_some() && !entry_revoked => {
                return self.finish_unfinished(lock, &rec, expected.as_ref(), reason, now);
            }
            // Revoked by its record: on the CRL only if a revocation lists it (a lost line of
            // revocations.txt: recorded again, at its first time and reason).
            State::Revoked if another_ca || self.store.revocations()?.iter().any(|r| r.serial == rec.serial) => {
                if !another_ca {
                    self.crl_for_revoked(lock, &rec.certname, &rec.serial, false, now)?;
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
                self.store.revoke(lock, &rev, &rec, None)?;
                self.finish_revocation(lock, &rev, now)?;
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
            self.store.revoke(lock, &rev, &rec, expected.as_ref())?;
            self.finish_revocation(lock, &rev, now)?;
            return Ok(format!(
                "serial {} ({}) was listed as revoked, its record said issued: it says revoked now",
                rec.serial, rec.certname
            ));
        }
        self.revoke_locked(lock, &rec, expected.as_ref(), reason, false, now)?;
        Ok(format!("revoked serial {} ({})", rec.serial, rec.certname))
    }

    /// `vouch revoke --serial` of a certificate whose revocation is stored and whose
    /// certname's entry (`expected`) still says issued: the revocation recorded again (kept
    /// where it is, at its own time and reason) and the entry made to say revoked, then the
    /// audit line and the CRL, as the revocation's first run would have.
    fn finish_unfinished(
        &self,
        lock: &WriteLock,
        rec: &CertRecord,
        expected: Option<&Expected>,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        let rev = Revocation::of(
            rec,
            rec.revoked_at.clone().unwrap_or_else(|| format_rfc3339(now)),
            rec.reason.clone().unwrap_or_else(|| reason.to_string()),
            false,
        );
        self.store.revoke(lock, &rev, rec, expected)?;
        self.finish_revocation(lock, &rev, now)?;
        Ok(format!(
            "serial {} ({}) was revoked, its certname's entry still said issued: it says revoked now",
            rec.serial, rec.certname
        ))
    }

    fn revoke_once(
        &self,
        certname: &str,
        reason: &str,
        clean: bool,
        force: bool,
        now: OffsetDateTime,
    ) -> Result<String, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        check_name(certname)?;
        // A revocation checkpoints first, under the lock: what the flush can write before, it does.
        self.store.flush_unlocked()?;
        let lock = self.store.lock()?;
        // Held until the revocation is written (a valid administrator's certificate only).
        let mut hold = self.refuse_unforced_held(&lock, certname, force, now)?;
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
        confirm(&mut hold)?;
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
}

/// Just before a revocation is written: the fleet's lock on administrators' revocations, if
/// held, is still this holder's (its time moved on); one taken over meanwhile writes nothing.
fn confirm(hold: &mut Option<AdminHold<'_>>) -> Result<(), Error> {
    match hold {
        Some(h) => Ok(h.confirm()?),
        None => Ok(()),
    }
}
