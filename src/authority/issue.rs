//! Issuing for a request: decide, prepare, sign, then the group commit under the store's
//! lock (check the store, claim the attributes, store the batch, audit), then answer.

use super::pending::{keep_always, KeepGate};
use super::replay::holder_digest;
use super::{warn, Authority};
use crate::decision::{self, Refusal, Refused, Request};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::certificate::{self, Authorization, Issued};
use crate::policy::OnExisting;
use crate::store::{
    CertRecord, ClaimUse, Expected, Issuance, Revocation, SpentClaim, State, StoreError, Supersede, WriteLock,
};
use crate::vouching::replay_key::ReplayKey;
use time::OffsetDateTime;

/// The outcome of [`Authority::issue`].
#[derive(Debug)]
pub enum IssueOutcome {
    Issued(Issued),
    Refused(Refused),
}

/// Most issuances stored with one synchronous write.
pub(super) const MAX_BATCH: usize = 128;

/// A vouched request, decided and signed, waiting for the group commit.
/// What makes a job's attributes one-time: claimed in the replay journal under the lock.
struct OneTimeUse {
    key: ReplayKey,
    /// The attributes' expiry (it names the journal's bucket).
    expiry: OffsetDateTime,
    /// The requesting key's digest: the holder of the claim.
    holder: String,
}

pub(super) struct Job {
    certname: String,
    issued: Issued,
    record: CertRecord,
    replay: OneTimeUse,
    spki: Vec<u8>,
    version: u32,
    conductor: decision::Conductor,
    /// The conductor's certificate (DER), judged again under the store's lock.
    conductor_der: Vec<u8>,
    decision_line: String,
    now: OffsetDateTime,
}

/// What the group commit made of a job.
pub(super) enum Committed {
    Issued(Issued),
    Refused(Refused),
}

/// Each job's answer, once it has one.
type Answers = Vec<Option<Result<Committed, Error>>>;

/// A round's jobs: admitted (stored now) and deferred (another job for the certname was admitted).
struct Round {
    admitted: Vec<(usize, Admitted)>,
    deferred: Vec<usize>,
}

/// What admission read of the certname and decided: the entry the store write expects,
/// and the valid certificate it supersedes.
pub(super) struct Admitted {
    expected: Option<Expected>,
    supersedes: Option<Supersede>,
}

/// The admission of a job: stored now, or refused.
pub(super) enum Admission {
    Admitted(Admitted),
    Refused(Refused),
}

/// How a round of the group commit ended.
enum RoundEnd {
    Stored,
    /// The store failed: no further round.
    Failed,
    /// These jobs lost a compare-and-swap on a shared store (nothing written for them).
    Conflict(Vec<usize>),
}

/// How often a job that lost a race on a shared store is admitted again before its node is
/// told to retry (503).
const MAX_CONFLICT_RETRIES: usize = 3;

/// The same error again, for each job of a batch (an [`Error`] is not `Clone`): an
/// unavailable or conflicting shared store stays so (503), anything else is a store failure.
fn same_kind(e: &Error) -> Error {
    match e {
        Error::StoreUnavailable { detail } => Error::StoreUnavailable { detail: detail.clone() },
        Error::StoreUnconfirmed { detail } => Error::StoreUnconfirmed { detail: detail.clone() },
        Error::StoreConflict { what } => Error::StoreConflict { what: what.clone() },
        e => Error::Store { detail: e.to_string() },
    }
}

/// How storing a round failed: before the store's commit (nothing stored) or after it (stored).
enum StoreFailure {
    Before(Error),
    AfterCommit(Error),
}

/// What `on_existing` makes of a valid certificate the job would replace.
enum Existing {
    /// The job is refused (its attributes held).
    Refuse(Refusal),
    /// The job is stored, and this certificate revoked as superseded.
    Supersede(Box<CertRecord>),
}

/// Whether the store's current certificate is issued and not expired at `now`.
fn still_valid(rec: &CertRecord, now: OffsetDateTime) -> bool {
    rec.state == State::Issued && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now)
}

/// A certificate stored by [`Authority::issue_locked`] (a renewal, a local certificate).
#[derive(Debug)]
pub struct Stored {
    pub issued: Issued,
    /// The superseded predecessor's serial, and why the CRL could not be written after its
    /// revocation (which IS stored): the CRL does not list it yet.
    pub superseded_crl: Option<(String, Error)>,
}

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
    fn prepare(&self, auth: Authorization, now: OffsetDateTime) -> Result<certificate::Prepared, Error> {
        let mut profile = self.policy.profile;
        if let (true, Authorization::Vouched(g)) = (self.policy.cap_at_conductor, &auth) {
            profile.cap = crate::encoding::time::parse_rfc3339(&g.conductor().not_after).ok();
        }
        certificate::prepare(
            auth,
            &profile,
            &self.policy.mirror_oid,
            &self.policy.allowed_extensions,
            &Self::new_serial()?,
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
        let mut prepared = self.prepare(auth, now)?;
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
        let supersedes = replacing.filter(|(_, s)| *s).map(|(c, _)| Self::supersede(&c.record, now));
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

    /// The revocation of `rec` as superseded at `now`.
    pub(super) fn supersede(rec: &CertRecord, now: OffsetDateTime) -> Supersede {
        Supersede {
            revocation: Revocation::of(rec, format_rfc3339(now), "superseded".into(), false),
            record: rec.clone(),
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
        self.issue_gated(csr, parsed, certname, now, &keep_always)
    }

    /// [`Authority::issue_parsed`] where a refused request is kept only if `gate` allows
    /// (`vouch serve`: the client address's rate); a grant never asks it.
    pub fn issue_gated(
        &self,
        csr: &[u8],
        parsed: Option<crate::encoding::csr::Csr>,
        certname: Option<&str>,
        now: OffsetDateTime,
        gate: KeepGate<'_>,
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
        let outcome = decision::decide_parsed(&Request { csr, certname: &certname }, parsed, &self.policy, now);
        let grant = match outcome {
            Err(refused) => {
                drop(permit);
                return self.refuse(&certname, csr, refused, now, gate);
            }
            Ok(g) => g,
        };
        let job = self.prepare_job(grant, &certname, now);
        drop(permit);
        let job = job?;
        let outcome = if self.store.batches() {
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
            outcome?
        } else {
            // A shared store orders concurrent writers itself: each request stores its own.
            self.commit_batch(vec![job])
                .pop()
                .unwrap_or_else(|| Err(Error::Store { detail: "the request was not processed".into() }))?
        };
        match outcome {
            Committed::Issued(issued) => Ok(IssueOutcome::Issued(issued)),
            Committed::Refused(refused) => self.refuse(&certname, csr, refused, now, gate),
        }
    }

    /// Builds and signs the certificate for a grant, outside the store lock (so that
    /// concurrent requests sign on every core); the group commit decides whether it
    /// is stored or thrown away.
    pub(super) fn prepare_job(
        &self,
        grant: decision::Grant,
        certname: &str,
        now: OffsetDateTime,
    ) -> Result<Job, Error> {
        use base64::Engine;
        let replay = OneTimeUse {
            key: grant.replay_key(),
            expiry: grant.attributes_expiry(),
            holder: holder_digest(&grant.csr().spki),
        };
        let spki = grant.csr().spki.clone();
        let version = grant.version();
        let conductor = grant.conductor().clone();
        let conductor_der = grant.conductor_der().to_vec();
        let conductor_cert = base64::engine::general_purpose::STANDARD.encode(&conductor_der);
        let mut decision = crate::store::audit::decision_value(now, certname, Ok(&grant), "sign");
        let prepared = self.prepare(Authorization::Vouched(Box::new(grant)), now)?;
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
            spki,
            version,
            conductor,
            conductor_der,
            decision_line,
            now,
        })
    }

    /// Stores a batch of signed jobs under one lock: each is checked against the
    /// store (an existing certificate, attributes already used) and claimed in the
    /// replay journal, then all admitted ones are audited (decisions, one synchronous
    /// write), stored (one more), audited again (issued) and answered. Two jobs for one certname never share a
    /// batch: the second waits for the next round and meets the first's certificate.
    pub(super) fn commit_batch(&self, jobs: Vec<Job>) -> Vec<Result<Committed, Error>> {
        let lock = match self.store.lock() {
            Ok(l) => l,
            Err(e) => {
                let e = Error::from(e);
                return jobs.iter().map(|_| Err(same_kind(&e))).collect();
            }
        };
        // The root CRL as it is now that the lock is held: `vouch conductor revoke` writes it
        // under this lock, so a revocation it reported done is counted by every job below.
        self.refresh_own_crl();
        let mut answers: Answers = jobs.iter().map(|_| None).collect();
        let mut remaining: Vec<usize> = (0..jobs.len()).collect();
        let mut conflicts = 0;
        while !remaining.is_empty() {
            let round = self.admit_round(&lock, &jobs, remaining, &mut answers);
            let (failed, lost) = match self.store_round(&lock, &jobs, round.admitted, &mut answers) {
                RoundEnd::Stored => (false, Vec::new()),
                RoundEnd::Failed => (true, Vec::new()),
                RoundEnd::Conflict(lost) => (false, lost),
            };
            if !lost.is_empty() {
                // Another master (or request) changed the certname between admission and the
                // store's write: admitted again, the job meets what it wrote. Bounded.
                conflicts += 1;
                if conflicts > MAX_CONFLICT_RETRIES {
                    for &i in &lost {
                        answers[i] = Some(Err(Error::StoreConflict {
                            what: format!("the certificate of {}", jobs[i].certname),
                        }));
                    }
                } else {
                    remaining = lost.into_iter().chain(round.deferred).collect();
                    continue;
                }
            }
            if failed {
                // No further round on a store that just failed: the deferred jobs are answered
                // with an error and retried by their nodes.
                for i in round.deferred {
                    answers[i] = Some(Err(Error::Store {
                        detail: "the store failed while this request waited; nothing was issued for it, retry".into(),
                    }));
                }
                break;
            }
            remaining = round.deferred;
        }
        answers
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Store { detail: "the request was not processed".into() })))
            .collect()
    }

    /// One round of [`Authority::commit_batch`]: [`Authority::admit`] for each remaining job
    /// (answering those refused or failed), one job per certname; a second job for a
    /// certname is deferred to the next round.
    fn admit_round(&self, lock: &WriteLock, jobs: &[Job], remaining: Vec<usize>, answers: &mut Answers) -> Round {
        let mut names = std::collections::HashSet::new();
        let mut round = Round { admitted: Vec::new(), deferred: Vec::new() };
        for i in remaining {
            let job = &jobs[i];
            if names.contains(job.certname.as_str()) {
                round.deferred.push(i);
                continue;
            }
            match self.admit(lock, job) {
                Ok(Admission::Admitted(a)) => {
                    names.insert(job.certname.as_str());
                    round.admitted.push((i, a));
                }
                Ok(Admission::Refused(refused)) => answers[i] = Some(Ok(Committed::Refused(refused))),
                Err(e) => answers[i] = Some(Err(e)),
            }
        }
        round
    }

    /// Audits the admitted jobs' decisions, stores them (one synchronous write each) and
    /// answers them. Returns whether storing failed.
    fn store_round(
        &self,
        lock: &WriteLock,
        jobs: &[Job],
        round: Vec<(usize, Admitted)>,
        answers: &mut Answers,
    ) -> RoundEnd {
        let admitted: Vec<usize> = round.iter().map(|(i, _)| *i).collect();
        let admitted = admitted.as_slice();
        let revoked: Vec<Revocation> =
            round.iter().filter_map(|(_, a)| a.supersedes.as_ref().map(|s| s.revocation.clone())).collect();
        let batch: Vec<Issuance> = round.into_iter().map(|(i, a)| self.issuance(&jobs[i], a)).collect();
        // The decisions first, synced: a certificate the log holds always has its
        // decision in the audit log, whenever the process dies.
        let decisions: Vec<String> = admitted.iter().map(|&i| jobs[i].decision_line.clone()).collect();
        let stored = match self.audit_lines(&decisions) {
            Err(e) => Err(StoreFailure::Before(e)),
            Ok(()) => match self.store.issue(lock, &batch) {
                Ok(()) => Ok(()),
                Err(StoreError::AfterCommit { source }) => Err(StoreFailure::AfterCommit(Error::from(*source))),
                Err(e) => Err(StoreFailure::Before(Error::from(e))),
            },
        };
        let mut end = if stored.is_err() { RoundEnd::Failed } else { RoundEnd::Stored };
        if matches!(stored, Ok(()) | Err(StoreFailure::AfterCommit(_))) {
            // The superseded certificates are revoked: audited, and the CRL written.
            let now = jobs.first().map(|j| j.now).unwrap_or_else(OffsetDateTime::now_utc);
            for r in &revoked {
                if let Err(e) = self.after_revocation(lock, r, now) {
                    warn("store", &e.to_string());
                }
            }
        }
        match stored {
            // Stored (durable in the log), even when a step after that failed: issued.
            Ok(()) => self.answer_issued(jobs, admitted, answers),
            Err(StoreFailure::AfterCommit(e)) => {
                warn("store", &e.to_string());
                self.answer_issued(jobs, admitted, answers);
            }
            // A shared store's compare-and-swap lost (nothing was written): admitted again.
            Err(StoreFailure::Before(Error::StoreConflict { .. })) if !self.store.batches() => {
                end = RoundEnd::Conflict(admitted.to_vec());
            }
            Err(StoreFailure::Before(e)) => {
                for &i in admitted {
                    // Nothing was stored: the claim stays this key's, unmarked, so the
                    // node's retry is approved and nobody else's is.
                    answers[i] = Some(Err(same_kind(&e)));
                }
            }
        }
        end
    }

    /// What the store keeps for a job: its record, its certificate and, with a replay
    /// journal, its spent claim.
    fn issuance(&self, job: &Job, admitted: Admitted) -> Issuance {
        Issuance {
            expected: admitted.expected,
            supersedes: admitted.supersedes,
            record: job.record.clone(),
            pem: job.issued.pem.clone(),
            claim: self.policy.replay_journal.as_ref().map(|dir| SpentClaim {
                journal: dir.clone(),
                // The file store's log records it relative to the data directory.
                journal_in_dir: None,
                key: job.replay.key.key.clone(),
                expiry: format_rfc3339(job.replay.expiry),
                certname: job.certname.clone(),
                holder: job.replay.holder.clone(),
                time: format_rfc3339(job.now),
            }),
        }
    }

    /// The stored jobs: their "issued" audit lines, then their answers.
    fn answer_issued(&self, jobs: &[Job], admitted: &[usize], answers: &mut Answers) {
        let lines: Vec<String> = admitted
            .iter()
            .map(|&i| {
                let job = &jobs[i];
                serde_json::json!({
                    "time": format_rfc3339(job.now), "event": "issued", "certname": job.certname,
                    "serial": job.issued.serial_hex, "not_after": format_rfc3339(job.issued.not_after),
                    "conductor": job.conductor.fingerprint,
                })
                .to_string()
            })
            .collect();
        // The certificates exist whatever happens to these lines: a failure is
        // reported, not turned into a refusal (the node would be told "no" and
        // then be served its certificate). Not synced: the decisions, with their serials,
        // were synced before the store's write; the next batch's sync covers these.
        if let Err(e) = self.audit_lines_unsynced(&lines) {
            warn("audit", &e.to_string());
        }
        // Requests refused earlier under these names are answered now.
        let names: Vec<&str> = admitted.iter().map(|&i| jobs[i].certname.as_str()).collect();
        let _ = self.store.remove_requests(&names);
        for &i in admitted {
            answers[i] = Some(Ok(Committed::Issued(jobs[i].issued.clone())));
        }
    }

    /// Under the lock: may `job` be stored now? If so its attributes are claimed, and the
    /// admission says what the store write expects and supersedes; else the refusal.
    pub(super) fn admit(&self, _lock: &WriteLock, job: &Job) -> Result<Admission, Error> {
        // A conductor revoked since the decision (while this job waited for the lock).
        if let Some(reason) = decision::own_crl_refusal(&job.conductor_der, &self.policy, job.now) {
            return Ok(Admission::Refused(Refused {
                reasons: vec![reason],
                conductor: Some(job.conductor.clone()),
                held: None,
            }));
        }
        let mut supersede = None;
        // Never supersede (revoke) another node's certificate stored under this name.
        let current = self.current_checked(&job.certname)?;
        let expected = current.as_ref().map(crate::store::Current::expected);
        if let Some(crate::store::Current { record: rec, pem, .. }) = current {
            if still_valid(&rec, job.now) {
                if let Some(refused) = self.protected_refusal(job, &rec, &pem) {
                    return Ok(Admission::Refused(refused));
                }
                match self.on_existing(job, rec, &pem) {
                    Existing::Supersede(rec) => supersede = Some(rec),
                    Existing::Refuse(reason) => {
                        // The attributes are good: they become this key's, as in any kept refusal.
                        let held = Some(decision::Held {
                            replay_key: job.replay.key.clone(),
                            expiry: job.replay.expiry,
                            spki: job.spki.clone(),
                        });
                        return Ok(Admission::Refused(Refused {
                            reasons: vec![reason],
                            conductor: Some(job.conductor.clone()),
                            held,
                        }));
                    }
                }
            }
        }
        if self.store.record(&job.record.serial)?.is_some() {
            return Err(Error::Store {
                detail: format!("serial {} was drawn twice (p = 2^-126); nothing was issued, retry", job.record.serial),
            });
        }
        if let Some(refused) = self.claim_one_time_use(job)? {
            return Ok(Admission::Refused(refused));
        }
        Ok(Admission::Admitted(Admitted { expected, supersedes: supersede.map(|old| Self::supersede(&old, job.now)) }))
    }

    /// The service's or an administrator's certificate is never superseded by a node,
    /// whatever the policy says (judged by the record and the certificate, so also
    /// after a restart with other --server-name values, or a `vouch admin new`).
    fn protected_refusal(&self, job: &Job, rec: &CertRecord, pem: &str) -> Option<Refused> {
        let holder = self.protected(rec, pem)?;
        let reason = Refusal::NameReserved {
            certname: job.certname.clone(),
            name: job.certname.clone(),
            holder: holder.to_string(),
        };
        Some(Refused { reasons: vec![reason], conductor: Some(job.conductor.clone()), held: None })
    }

    /// The policy's `on_existing` for a valid certificate `rec` (PEM `pem`) the job would replace.
    fn on_existing(&self, job: &Job, rec: CertRecord, pem: &str) -> Existing {
        let certname = &job.certname;
        let old_spki = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .ok()
            .and_then(|(_, der)| {
                x509_parser::parse_x509_certificate(&der).ok().map(|(_, c)| c.public_key().raw.to_vec())
            })
            .unwrap_or_default();
        let later = match (
            &rec.attributes_expiry,
            crate::encoding::time::parse_rfc3339(rec.attributes_expiry.as_deref().unwrap_or("")).ok(),
        ) {
            (Some(_), Some(old)) => job.replay.expiry > old,
            _ => true,
        };
        match self.policy.on_existing {
            OnExisting::Refuse => {
                Existing::Refuse(Refusal::CertificateExists { certname: certname.clone(), serial: rec.serial.clone() })
            }
            // Compared in canonical form: a re-encoding of the same key is the same key.
            OnExisting::Supersede if crate::encoding::csr::same_key(&old_spki, &job.spki) => {
                Existing::Refuse(Refusal::SupersedeSameKey { certname: certname.clone() })
            }
            // Version 1 attributes name no certname: they never take over a name.
            OnExisting::Supersede if !later || job.version != 2 => {
                Existing::Refuse(Refusal::SupersedeReplay { certname: certname.clone() })
            }
            OnExisting::Supersede => Existing::Supersede(Box::new(rec)),
        }
    }

    /// One-time use, claimed under the lock and before anything is stored. The entry is
    /// written unsynced: the store's log, synced before anyone is answered, names it.
    /// The refusal if the attributes were used before.
    fn claim_one_time_use(&self, job: &Job) -> Result<Option<Refused>, Error> {
        let Some(journal) = self.journal(false) else { return Ok(None) };
        let OneTimeUse { key, expiry, holder } = &job.replay;
        let claim = journal.claim(
            key,
            *expiry,
            &job.certname,
            holder,
            ClaimUse::Reusable,
            Some(&job.record.serial),
            job.now,
        )?;
        if let crate::store::journal::Claim::Used { certname: first_certname, time } = claim {
            return Ok(Some(Refused {
                reasons: vec![Refusal::AttributesReplayed { first_certname, first_time: time }],
                conductor: Some(job.conductor.clone()),
                held: None,
            }));
        }
        Ok(None)
    }
}

/// The signature work of concurrent requests (verifying a CSR, a conductor and its
/// attributes, signing the certificate) is pure CPU: more of it at once than there are cores
/// only makes the scheduler take turns, and the group commit's leader (which holds the
/// store's lock for the whole batch) waits its turn among dozens of signers. The gate lets
/// as many in as there are cores; the others wait, asleep, in arrival order of wake-ups.
struct CpuGate {
    free: std::sync::Mutex<Option<usize>>,
    opened: std::sync::Condvar,
}

/// Leaves the gate when dropped.
struct Permit<'a>(&'a CpuGate);

static CPU_GATE: CpuGate = CpuGate { free: std::sync::Mutex::new(None), opened: std::sync::Condvar::new() };

impl CpuGate {
    fn enter(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let n = free.get_or_insert_with(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            if *n > 0 {
                *n -= 1;
                return Permit(self);
            }
            free = self.opened.wait(free).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = free.as_mut() {
            *m = m.saturating_add(1);
        }
        drop(free);
        self.0.opened.notify_one();
    }
}

#[cfg(test)]
mod gate_tests {
    use super::CPU_GATE;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Never more signers inside than there are cores, and every one gets in.
    #[test]
    fn the_cpu_gate_lets_in_one_signer_per_core_and_everyone_in_turn() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..32)
            .map(|_| {
                let (inside, most) = (inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _p = CPU_GATE.enter();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!(most >= 1 && most <= cores, "{most} inside at once on {cores} cores");
    }
}
