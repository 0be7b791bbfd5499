//! Issuing for a request: decide, prepare, sign, then the group commit under the store's
//! lock (check the store, claim the attributes, store the batch, audit), then answer.

use super::cpu_gate::CPU_GATE;
use super::group_commit::{Committed, Job, OneTimeUse};
use super::outcome::{IssueOutcome, Stored};
use super::pending::{keep_always, KeepGate};
use super::replay::holder_digest;
use super::seen::Seen;
use super::{warn, Authority};
use crate::decision::{self, Refused, Request};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::certificate::{self, Authorization};
use crate::store::{CertRecord, Issuance, Revocation, State, StoreError, Supersede, WriteLock};
use time::OffsetDateTime;

impl Authority {
    /// The store's record of a certificate about to be stored (state `Issued`).
    pub(super) fn issued_record(
        prepared: &certificate::Prepared,
        attributes_expiry: Option<String>,
        conductor: Option<String>,
        conductor_cert: Option<String>,
    ) -> CertRecord {
        CertRecord {
            serial: prepared.serial_hex.clone(),
            certname: prepared.certname.clone(),
            state: State::Issued,
            digest: prepared.digest(),
            not_before: format_rfc3339(prepared.not_before),
            not_after: format_rfc3339(prepared.not_after),
            attributes_expiry,
            conductor,
            conductor_cert,
            revoked_at: None,
            reason: None,
            issuer: None,
            claim: None,
        }
    }

    /// The certificate `auth` allows, under the policy's profile (capped at the vouching
    /// conductor's notAfter when the policy says so), with a fresh serial; not yet signed.
    /// `ttl`: a shorter lifetime an administrator asked for (an approval carries its own);
    /// `serial`: one drawn before (and found unused: [`Seen`]), else a fresh one is drawn.
    fn prepare(
        &self,
        auth: Authorization,
        ttl: Option<std::time::Duration>,
        serial: Option<Vec<u8>>,
        now: OffsetDateTime,
    ) -> Result<certificate::Prepared, Error> {
        let mut profile = self.policy.profile;
        // An agent that renews itself gets the auto-renewal lifetime (Puppet Server's
        // auto-renewal-cert-ttl), when the policy sets one.
        if let (true, Some(v)) = (auth.auto_renew(), profile.auto_renewal_validity) {
            profile.validity = v;
        }
        if let (true, Authorization::Vouched(g)) = (self.policy.cap_at_conductor, &auth) {
            profile.cap = crate::encoding::time::parse_rfc3339(&g.conductor().not_after).ok();
        }
        // An administrator may ask for less than the policy's lifetime, never more.
        let ttl = match &auth {
            Authorization::Approved(proof) => proof.ttl,
            _ => ttl,
        };
        if let Some(ttl) = ttl {
            profile.validity = profile.validity.min(ttl);
        }
        certificate::prepare(
            auth,
            &profile,
            &self.policy.mirror_oid,
            &self.policy.allowed_extensions,
            &serial.map_or_else(Self::new_serial, Ok)?,
            &self.ca,
            now,
        )
        .map_err(Error::from)
    }

    pub(super) fn new_serial() -> Result<Vec<u8>, Error> {
        let mut b = [0u8; 16];
        aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::Crypto { detail: "no randomness available".into() })?;
        b[0] = (b[0] & 0x7f) | 0x40;
        Ok(b.to_vec())
    }

    /// Prepares, signs, stores (one synchronous write). Called with the lock held. The
    /// certificate stands once stored; a superseded predecessor whose CRL could not be
    /// written after it is reported in [`Stored::superseded_crl`] (and logged), not as an error.
    /// `replacing`: the certname's entry as read under this lock, and whether its
    /// certificate is superseded (revoked) by this one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn issue_locked(
        &self,
        lock: &WriteLock,
        replacing: Option<(&crate::store::Current, bool)>,
        auth: Authorization,
        attributes_expiry: Option<String>,
        conductor: Option<String>,
        conductor_cert: Option<String>,
        now: OffsetDateTime,
    ) -> Result<Stored, Error> {
        let mut prepared = self.prepare(auth, None, None, now)?;
        // A fresh random serial; on the (2^-126) chance it was used before, draw again.
        let mut tries = 0;
        while self.store.record(&prepared.serial_hex)?.is_some() && tries < 4 {
            tries += 1;
            prepared.reserial(&Self::new_serial()?);
        }
        let mut record = Self::issued_record(&prepared, attributes_expiry, conductor.clone(), conductor_cert);
        // A renewal keeps the claim of the attributes that vouched for the original.
        record.claim = replacing.and_then(|(c, _)| c.record.claim.clone()).filter(|_| record.conductor.is_some());
        let issued = prepared.issue(&self.ca)?;
        let supersedes = replacing.filter(|(_, s)| *s).map(|(c, _)| Self::supersede(&c.record, &c.pem, now));
        let iss = Issuance {
            record,
            pem: issued.pem.clone(),
            claim: None,
            expected: replacing.map(|(c, _)| c.expected()),
            supersedes: supersedes.clone(),
        };
        match self.store.issue(lock, &[iss]) {
            Ok(()) => {}
            Err(StoreError::AfterCommit { source }) => warn("store", &source.to_string()),
            Err(e) => return Err(e.into()),
        }
        // Stored: the certificate stands whatever its predecessor's audit line or CRL meet
        // (reported, as the group commit does), and its own "issued" line is still written.
        let mut superseded_crl = None;
        if let Some(s) = &supersedes {
            // Its audit line and its CRL apart: only a CRL not written is `superseded_crl`
            // (a failed audit line with the CRL written is a warning, the CRL lists it).
            let audited = self.audit_revocation(&s.revocation);
            let written = self.write_crl_locked(lock, now);
            if let Err(e) = audited {
                warn("audit", &e.to_string());
            }
            if let Err(e) = written {
                warn("store", &e.to_string());
                superseded_crl = Some((s.revocation.serial.clone(), e));
            }
        }
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "issued", "certname": issued.certname,
            "serial": issued.serial_hex, "not_after": format_rfc3339(issued.not_after),
            "conductor": conductor,
        }))?;
        Ok(Stored { issued, superseded_crl })
    }

    /// The revocation of `rec` (its certificate `pem`) as superseded at `now`.
    pub(super) fn supersede(rec: &CertRecord, pem: &str, now: OffsetDateTime) -> Supersede {
        Supersede {
            revocation: Revocation::of(rec, format_rfc3339(now), "superseded".into(), false),
            record: rec.clone(),
            certificate: Some(pem.to_string()),
        }
    }

    /// `vouch sign`: decide, and on a grant issue at once.
    pub fn issue(&self, csr: &[u8], certname: Option<&str>, now: OffsetDateTime) -> Result<IssueOutcome, Error> {
        self.issue_parsed(csr, None, certname, now)
    }

    /// [`Authority::issue`] with the CSR already parsed by the caller (`csr::parse(csr)`).
    pub fn issue_parsed(
        &self,
        csr: &[u8],
        parsed: Option<crate::encoding::csr::Csr>,
        certname: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<IssueOutcome, Error> {
        self.issue_gated(csr, parsed, certname, now, &keep_always, None)
    }

    /// [`Authority::issue`] with a lifetime shorter than the policy's, if `ttl` (an
    /// administrator's `puppetserver ca sign --ttl`, checked by [`Authority::check_ttl`]).
    pub fn issue_with_ttl(
        &self,
        csr: &[u8],
        certname: Option<&str>,
        ttl: Option<std::time::Duration>,
        now: OffsetDateTime,
    ) -> Result<IssueOutcome, Error> {
        self.issue_inner(csr, None, certname, now, &keep_always, ttl, None)
    }

    /// [`Authority::issue_parsed`] where a refused request is kept only if `gate` allows
    /// (`vouch serve`: the client address's rate); a grant never asks it. `seen`: what the
    /// caller read of the certname before ([`Authority::see`]), which admission then takes.
    pub fn issue_gated(
        &self,
        csr: &[u8],
        parsed: Option<crate::encoding::csr::Csr>,
        certname: Option<&str>,
        now: OffsetDateTime,
        gate: KeepGate<'_>,
        seen: Option<Seen>,
    ) -> Result<IssueOutcome, Error> {
        self.issue_inner(csr, parsed, certname, now, gate, None, seen)
    }

    #[allow(clippy::too_many_arguments)]
    fn issue_inner(
        &self,
        csr: &[u8],
        parsed: Option<crate::encoding::csr::Csr>,
        certname: Option<&str>,
        now: OffsetDateTime,
        gate: KeepGate<'_>,
        ttl: Option<std::time::Duration>,
        seen: Option<Seen>,
    ) -> Result<IssueOutcome, Error> {
        // Once a second at most in a long-running process: revocations write the CRL
        // themselves, so this only catches a CRL about to lapse.
        let second = now.unix_timestamp();
        if self.maintained.swap(second, std::sync::atomic::Ordering::AcqRel) != second {
            self.maintain(now)?;
        }
        let parsed = match parsed {
            Some(c) => Ok(c),
            None => crate::encoding::csr::parse(csr),
        };
        let certname = match certname {
            Some(c) => c.to_string(),
            None => parsed.as_ref().ok().and_then(|c| c.common_names.first().cloned()).unwrap_or_default(),
        };
        // The service's and the administrators' names, before anything else (every skin —
        // the API, an administrator's re-decision, `vouch sign` — comes through here). Audited,
        // not kept: such a request can never be granted.
        if let Some(reason) = self.reserved_refusal(&certname, parsed.as_ref().ok()) {
            let refused = Refused { reasons: vec![reason], conductor: None, held: None };
            self.audit_raw(&crate::store::audit::decision_line(now, &certname, Err(&refused), "sign"))?;
            return Ok(IssueOutcome::Refused(refused));
        }
        // The decision's and the certificate's signatures, at most one per core at a time
        // (see [`CpuGate`]); the store's batch below runs outside the gate.
        // The root CRL as it is now (one `stat`; read again only when it changed).
        self.refresh_own_crl();
        let permit = CPU_GATE.enter();
        // Version 3: the template's use is counted in the store's admission, once the store's
        // checks passed too (a request refused there spends no use); a template already full
        // or an instance enrolled elsewhere is refused here, before a certificate is signed.
        let outcome = decision::decide_parsed(&Request { csr, certname: &certname }, parsed, &self.policy, now);
        let outcome = match outcome {
            Ok(g) => super::peek_template_use(self.journal(false).as_deref(), g)?,
            Err(r) => Err(r),
        };
        let grant = match outcome {
            Err(refused) => {
                drop(permit);
                return self.refuse(&certname, csr, refused, now, gate);
            }
            Ok(g) => g,
        };
        let job = self.prepare_job(grant, &certname, ttl, seen, now);
        drop(permit);
        let job = job?;
        let outcome = self.store_job(job)?;
        match outcome {
            Committed::Issued(issued) => Ok(IssueOutcome::Issued(issued)),
            Committed::Refused(refused) => self.refuse(&certname, csr, refused, now, gate),
        }
    }

    /// Stores a prepared job: in the group commit's next batch (the file store), or on its own
    /// (a shared store orders concurrent writers itself).
    fn store_job(&self, job: Job) -> Result<Committed, Error> {
        if self.store.batches() {
            let outcome = self.group.submit(
                job,
                |jobs| self.commit_batch(jobs),
                || {
                    Err(Error::Store {
                        detail: "the batch this issuance was part of failed before it was answered; \
                                 'GET certificate' shows whether it was stored"
                            .into(),
                    })
                },
            );
            // Out of the batch's seat and the lock: a checkpoint due now delays this one
            // request, not the batches after it.
            if let Err(e) = self.store.checkpoint_unlocked() {
                warn("store", &format!("checkpoint: {e}"));
            }
            outcome
        } else {
            // A shared store orders concurrent writers itself: each request stores its own.
            self.commit_batch(vec![job])
                .pop()
                .unwrap_or_else(|| Err(Error::Store { detail: "the request was not processed".into() }))
        }
    }

    /// Builds and signs the certificate for a grant, outside the store lock (so that
    /// concurrent requests sign on every core); the group commit decides whether it
    /// is stored or thrown away. `seen`: the certname as read before the decision (its serial
    /// becomes the certificate's, its view the admission's).
    pub(super) fn prepare_job(
        &self,
        grant: decision::Grant,
        certname: &str,
        ttl: Option<std::time::Duration>,
        seen: Option<Seen>,
        now: OffsetDateTime,
    ) -> Result<Job, Error> {
        use base64::Engine;
        let replay = OneTimeUse {
            key: grant.replay_key(),
            expiry: grant.attributes_expiry(),
            holder: holder_digest(&grant.csr().spki),
        };
        let spki = grant.csr().spki.clone();
        let template = super::template_use::template_use_of(&grant);
        let version = grant.version();
        let conductor = grant.conductor().clone();
        let conductor_der = grant.conductor_der().to_vec();
        let conductor_cert = base64::engine::general_purpose::STANDARD.encode(&conductor_der);
        let mut decision = crate::store::audit::decision_value(now, certname, Ok(&grant), "sign");
        let (view, serial) = match seen {
            Some(s) => (Some(s.view), s.serial),
            None => (None, None),
        };
        let prepared = self.prepare(Authorization::Vouched(Box::new(grant)), ttl, serial, now)?;
        let mut record = Self::issued_record(
            &prepared,
            Some(format_rfc3339(replay.expiry)),
            Some(conductor.fingerprint.clone()),
            Some(conductor_cert),
        );
        record.claim = Some(crate::store::claim_digest(&replay.key.key));
        // With the serial it is about to get: the line names the certificate even if the
        // process dies before the "issued" line.
        decision["serial"] = record.serial.clone().into();
        let decision_line = decision.to_string();
        let issued = prepared.issue(&self.ca)?;
        Ok(Job {
            certname: certname.to_string(),
            issued,
            record,
            replay,
            template,
            spki,
            version,
            conductor,
            conductor_der,
            decision_line,
            now,
            seen: view,
        })
    }
}
