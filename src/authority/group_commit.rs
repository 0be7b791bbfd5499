//! The group commit: signed jobs stored in batches under the store's lock. Each job is
//! admitted (checked against the store, its attributes claimed), the admitted ones audited,
//! stored with one synchronous write, audited again and answered.

use super::{warn, Authority};
use crate::decision::{self, Refusal, Refused};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::certificate::Issued;
use crate::policy::OnExisting;
use crate::store::{
    CertRecord, ClaimUse, Expected, Issuance, IssuanceView, Revocation, SpentClaim, State, StoreError, Supersede,
    WriteLock,
};
use crate::vouching::replay_key::ReplayKey;
use time::OffsetDateTime;

/// Most issuances stored with one synchronous write.
pub(super) const MAX_BATCH: usize = 128;

/// A vouched request, decided and signed, waiting for the group commit.
/// What makes a job's attributes one-time: claimed in the replay journal under the lock.
pub(super) struct OneTimeUse {
    pub(super) key: ReplayKey,
    /// The attributes' expiry (it names the journal's bucket).
    pub(super) expiry: OffsetDateTime,
    /// The requesting key's digest: the holder of the claim.
    pub(super) holder: String,
}

pub(super) struct Job {
    pub(super) certname: String,
    pub(super) issued: Issued,
    pub(super) record: CertRecord,
    pub(super) replay: OneTimeUse,
    /// Version 3: the template's use, counted at admission (after the store's checks).
    pub(super) template: Option<crate::store::templates::TemplateUse>,
    pub(super) spki: Vec<u8>,
    pub(super) version: u32,
    pub(super) conductor: decision::Conductor,
    /// The conductor's certificate (DER), judged again under the store's lock.
    pub(super) conductor_der: Vec<u8>,
    pub(super) decision_line: String,
    pub(super) now: OffsetDateTime,
    /// The certname as read before the decision, with a store whose writes compare
    /// (`seen.rs`): admission's reading in the first round.
    pub(super) seen: Option<IssuanceView>,
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
    /// Whether a pending request may be kept under the certname (removed once issued);
    /// false only when admission's reading said none is.
    request: bool,
}

/// The admission of a job: stored now, or refused (one per job, moved at once: its size
/// does not matter).
#[allow(clippy::large_enum_variant)]
pub(super) enum Admission {
    Admitted(Admitted),
    Refused(Refused),
}

/// How a round of the group commit ended.
enum RoundEnd {
    Stored,
    /// The store failed: no further round.
    Failed,
    /// These jobs lost a compare-and-swap on a shared store (nothing written for them): what.
    Conflict(Vec<usize>, String),
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

impl Authority {
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
            // A conflict round reads afresh: what was seen before the decision changed.
            let round = self.admit_round(&lock, &jobs, remaining, conflicts == 0, &mut answers);
            let (failed, lost) = match self.store_round(&lock, &jobs, round.admitted, &mut answers) {
                RoundEnd::Stored => (false, Vec::new()),
                RoundEnd::Failed => (true, Vec::new()),
                RoundEnd::Conflict(lost, what) => (false, lost.into_iter().map(|i| (i, what.clone())).collect()),
            };
            if !lost.is_empty() {
                // Another master (or request) changed the certname between admission and the
                // store's write: admitted again, the job meets what it wrote. Bounded.
                conflicts += 1;
                if conflicts > MAX_CONFLICT_RETRIES {
                    for (i, what) in lost {
                        answers[i] = Some(Err(Error::StoreConflict {
                            what: if what.is_empty() {
                                format!("the certificate of {}", jobs[i].certname)
                            } else {
                                what
                            },
                        }));
                    }
                } else {
                    remaining = lost.into_iter().map(|(i, _)| i).chain(round.deferred).collect();
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
    /// certname is deferred to the next round. `first`: no round lost a race yet (admission
    /// may take what the job saw before its decision).
    fn admit_round(
        &self,
        lock: &WriteLock,
        jobs: &[Job],
        remaining: Vec<usize>,
        first: bool,
        answers: &mut Answers,
    ) -> Round {
        let mut names = std::collections::HashSet::new();
        let mut round = Round { admitted: Vec::new(), deferred: Vec::new() };
        for i in remaining {
            let job = &jobs[i];
            if names.contains(job.certname.as_str()) {
                round.deferred.push(i);
                continue;
            }
            match self.admit(lock, job, first) {
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
        let requests: Vec<bool> = round.iter().map(|(_, a)| a.request).collect();
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
            Ok(()) => self.answer_issued(jobs, admitted, &requests, answers),
            Err(StoreFailure::AfterCommit(e)) => {
                warn("store", &e.to_string());
                self.answer_issued(jobs, admitted, &requests, answers);
            }
            // A shared store's compare-and-swap lost (nothing was written): admitted again.
            Err(StoreFailure::Before(Error::StoreConflict { what })) if !self.store.batches() => {
                end = RoundEnd::Conflict(admitted.to_vec(), if admitted.len() == 1 { what } else { String::new() });
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

    /// The stored jobs: their "issued" audit lines, then their answers. `requests`: for each,
    /// whether a pending request may be kept under its name ([`Admitted::request`]).
    fn answer_issued(&self, jobs: &[Job], admitted: &[usize], requests: &[bool], answers: &mut Answers) {
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
        // Requests refused earlier under these names are answered now. (One kept after
        // admission's reading said none was is another request's, refused meanwhile.)
        let names: Vec<&str> =
            admitted.iter().zip(requests).filter(|(_, r)| **r).map(|(&i, _)| jobs[i].certname.as_str()).collect();
        let _ = self.store.remove_requests(&names);
        for &i in admitted {
            answers[i] = Some(Ok(Committed::Issued(jobs[i].issued.clone())));
        }
    }

    /// Under the lock: may `job` be stored now? If so its attributes are claimed, and the
    /// admission says what the store write expects and supersedes; else the refusal.
    /// `first`: no round lost a race yet ([`Authority::admission_view`]).
    pub(super) fn admit(&self, _lock: &WriteLock, job: &Job, first: bool) -> Result<Admission, Error> {
        // A conductor revoked since the decision (while this job waited for the lock).
        if let Some(reason) = decision::own_crl_refusal(&job.conductor_der, &self.policy, job.now) {
            return Ok(Admission::Refused(Refused {
                reasons: vec![reason],
                conductor: Some(job.conductor.clone()),
                held: None,
            }));
        }
        let mut supersede = None;
        let view = self.admission_view(job, first)?;
        let serial_unused = view.serial_unused(&job.record.serial);
        let request = view.request != Some(false);
        // Never supersede (revoke) another node's certificate stored under this name.
        let current = self.checked(&job.certname, view.current)?;
        let expected = current.as_ref().map(crate::store::Current::expected);
        if let Some(crate::store::Current { record: rec, pem, .. }) = current {
            if still_valid(&rec, job.now) {
                if let Some(refused) = self.protected_refusal(job, &rec, &pem) {
                    return Ok(Admission::Refused(refused));
                }
                match self.on_existing(job, rec, &pem) {
                    Existing::Supersede(rec) => supersede = Some((rec, pem.clone())),
                    Existing::Refuse(reason) => {
                        // The attributes are good: they become this key's, as in any kept refusal;
                        // never a template's (version 3): a refused request holds none of its uses.
                        let held = job.template.is_none().then(|| decision::Held {
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
        if !serial_unused && self.store.record(&job.record.serial)?.is_some() {
            return Err(Error::Store {
                detail: format!("serial {} was drawn twice (p = 2^-126); nothing was issued, retry", job.record.serial),
            });
        }
        if let Some(refused) = self.claim_one_time_use(job)? {
            return Ok(Admission::Refused(refused));
        }
        Ok(Admission::Admitted(Admitted {
            expected,
            supersedes: supersede.map(|(old, pem)| Self::supersede(&old, &pem, job.now)),
            request,
        }))
    }

    /// What admission reads of a job's certname. With a store whose writes compare: what the
    /// job saw before its decision (in the first round; `seen.rs`), else one fresh read of the
    /// certname, its pending request and the job's serial. With any other store: the current
    /// certificate, read under the lock (the serial is looked up after, as always).
    fn admission_view(&self, job: &Job, first: bool) -> Result<IssuanceView, Error> {
        if !self.store.writes_compare() {
            return Ok(IssuanceView { current: self.store.current(&job.certname)?, ..IssuanceView::default() });
        }
        match &job.seen {
            Some(v) if first => Ok(v.clone()),
            _ => Ok(self.store.issuance_view(&job.certname, Some(&job.record.serial))?),
        }
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
    /// The refusal if the attributes were used before. Version 3: first the template's use
    /// (the instance claimed fleet-wide if bound, then counted: cells synced on their own),
    /// here, after every other check of admission, so a request refused spends no use; per
    /// instance and idempotent, so a retry after a store failure spends none again.
    fn claim_one_time_use(&self, job: &Job) -> Result<Option<Refused>, Error> {
        let Some(journal) = self.journal(false) else { return Ok(None) };
        if let Some(u) = &job.template {
            if let Some(reason) = super::template_use::counted_refusal(journal.count_use(u)?, u) {
                let conductor = Some(job.conductor.clone());
                return Ok(Some(Refused { reasons: vec![reason], conductor, held: None }));
            }
        }
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
