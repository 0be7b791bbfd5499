//! A refused request: audited, its vouched attributes held for its key, and kept as a
//! pending request for the operator (`vouch list`) when it may be: never under a reserved
//! name or beside the name's valid certificate, and within bounds (anyone can send refused
//! requests, under any number of names): at most `requests.max_pending` in the store, and
//! what the caller's gate allows (`vouch serve`: `requests.kept_per_minute` per client
//! address). A request beyond either is refused all the same and not kept
//! ([`Error::Limited`]). Granted requests never come here.

use super::outcome::IssueOutcome;
use super::replay::hold_refused;
use super::{Authority, KEEP_UNVOUCHED_MAX};
use crate::decision::{self, Refusal, Refused};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::limits::Limited;
use crate::policy::OnExisting;
use crate::store::{PendingRequest, State, WriteLock};
use time::OffsetDateTime;

/// Asked just before a refused request would be kept: `Err` keeps nothing (`vouch serve`
/// passes the client address's rate; commands pass [`keep_always`]).
pub type KeepGate<'a> = &'a dyn Fn() -> Result<(), Limited>;

/// The gate of commands and administrators: no rate (the store's count still bounds).
pub fn keep_always() -> Result<(), Limited> {
    Ok(())
}

impl Authority {
    pub(super) fn refuse(
        &self,
        certname: &str,
        csr: &[u8],
        refused: Refused,
        now: OffsetDateTime,
        gate: KeepGate<'_>,
    ) -> Result<IssueOutcome, Error> {
        let mut refused = hold_refused(self.journal(true).as_deref(), refused, certname, now)?;
        // Kept for the operator: requests a trusted conductor vouched for (whatever their
        // size), and others up to KEEP_UNVOUCHED_MAX bytes (a tampered agent's CSR is a few
        // KB). Larger unvouched bodies are only logged: anyone can send them, under any
        // number of names.
        // Never kept under a reserved name (the service's, an administrator's, Puppet's `ca`):
        // no decision can grant it.
        let reserved = refused.reasons.iter().any(|r| matches!(r, Refusal::NameReserved { .. }));
        let keepable = !reserved
            && (refused.held.is_some() || csr.len() <= KEEP_UNVOUCHED_MAX)
            && decision::check_certname(certname).is_ok()
            && !decision::is_reserved_certname(certname);
        if !keepable {
            self.audit_raw(&crate::store::audit::decision_line(now, certname, Err(&refused), "sign"))?;
            return Ok(IssueOutcome::Refused(refused));
        }
        // Under the store's lock, as issuance: whether the name has a certificate is read
        // there (a request racing the node's own, granted one, is not kept beside it), and
        // the request's two files are written by one writer at a time (its CSR never ends
        // beside another request's reasons).
        let lock = self.store.lock()?;
        self.note_existing(certname, &mut refused, now)?;
        self.audit_raw(&crate::store::audit::decision_line(now, certname, Err(&refused), "sign"))?;
        // Refused because the name has a certificate: nothing to keep (as Puppet answers such a
        // request; a pending request beside a signed node would only hide it).
        if refused.reasons.iter().any(Refusal::is_about_the_existing_certificate) {
            return Ok(IssueOutcome::Refused(refused));
        }
        self.room_for(&lock, certname, gate)?;
        if self.would_replace_a_bare_request(certname, csr)? {
            return Ok(IssueOutcome::Refused(refused));
        }
        let pem = match crate::encoding::csr::parse(csr) {
            Ok(c) => crate::encoding::pem::encode("CERTIFICATE REQUEST", &c.der),
            Err(_) => String::from_utf8_lossy(csr).into_owned(),
        };
        let req = PendingRequest {
            certname: certname.to_string(),
            time: format_rfc3339(now),
            reasons: refused.tagged_reasons(),
        };
        self.store.put_request(&lock, &req, pem.as_bytes())?;
        self.unkeep_beside_a_certificate(certname, now)?;
        Ok(IssueOutcome::Refused(refused))
    }

    /// With a store whose writes compare (masters sharing it, whose issuances hold no lock
    /// with this one): a certificate of the name stored since [`Self::note_existing`] read
    /// none, by an issuance whose read before its decision saw no request, would leave the
    /// request just kept beside it. Read again after keeping it, and if the name now has a
    /// valid certificate the request goes. (An issuance whose read came before the keeping and
    /// whose registry write after this read still leaves it: docs/limitations.md.)
    fn unkeep_beside_a_certificate(&self, certname: &str, now: OffsetDateTime) -> Result<(), Error> {
        if !self.store.writes_compare() || self.valid_certificate(certname, now)?.is_none() {
            return Ok(());
        }
        self.store.remove_request(certname)?;
        Ok(())
    }

    /// With `on_existing = "refuse"`, a valid certificate of the name is a reason of its own.
    fn note_existing(&self, certname: &str, refused: &mut Refused, now: OffsetDateTime) -> Result<(), Error> {
        if self.policy.on_existing != OnExisting::Refuse
            || refused.reasons.iter().any(|r| matches!(r, Refusal::CertificateExists { .. }))
        {
            return Ok(());
        }
        if let Some(serial) = self.valid_certificate(certname, now)? {
            refused.reasons.push(Refusal::CertificateExists { certname: certname.to_string(), serial });
        }
        Ok(())
    }

    /// With `on_existing = "refuse"`: the serial of the name's valid (issued, unexpired)
    /// certificate, if it has one (one read).
    fn valid_certificate(&self, certname: &str, now: OffsetDateTime) -> Result<Option<String>, Error> {
        if self.policy.on_existing != OnExisting::Refuse {
            return Ok(None);
        }
        Ok(self
            .store
            .current(certname)?
            .map(|c| c.record)
            .filter(|rec| {
                rec.state == State::Issued
                    && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now)
            })
            .map(|rec| rec.serial))
    }

    /// Whether keeping `csr` would replace a pending request of `certname` that carries no
    /// conductor's attributes (one only an administrator's approval can issue) with another
    /// key's: it is not kept, as Puppet Server keeps the first request of a name ("already
    /// has a requested certificate"), so that the request an administrator listed is the one
    /// `puppetserver ca sign` approves. A request carrying attributes (decided again, never
    /// approved), or the same key's, replaces it as before.
    fn would_replace_a_bare_request(&self, certname: &str, csr: &[u8]) -> Result<bool, Error> {
        let Some((_, pending)) = self.store.request(certname)? else { return Ok(false) };
        let Ok(pending) = crate::encoding::csr::parse(&pending) else { return Ok(false) };
        if super::approve::carries_attributes(&pending) {
            return Ok(false);
        }
        let same_key = crate::encoding::csr::parse(csr).is_ok_and(|new| new.spki == pending.spki);
        if !same_key {
            tracing::warn!(
                event = "request-not-replaced",
                certname,
                hint = "a request without attributes is pending under this name from another key: it stays (an \
                        administrator approves the one listed); `vouch clean NAME` removes it",
            );
        }
        Ok(!same_key)
    }

    /// Whether the store may keep a request under `certname`: one pending already is
    /// replaced (nothing grows); a new name only if `gate` allows it (the client address's
    /// rate) and below `requests.max_pending`.
    fn room_for(&self, _lock: &WriteLock, certname: &str, gate: KeepGate<'_>) -> Result<(), Error> {
        let max = self.policy.requests.max_pending;
        if self.store.request(certname)?.is_some() {
            return Ok(());
        }
        gate().map_err(Error::Limited)?;
        if self.store.count_requests(max)? >= max {
            return Err(Error::Limited(Limited::PendingFull { max }));
        }
        Ok(())
    }
}
