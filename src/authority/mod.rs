//! The authority: decide → prepare → sign (each request on its own thread) →
//! group commit (under the store lock: check the store, claim the attributes,
//! store the batch with one synchronous write, audit) → answer. The decision
//! knows no keys; the issuer knows no policy; this module joins them and owns
//! the order of the steps.

use crate::decision::{self, Refusal, Refused, Request};
use crate::encoding::time::format_rfc3339;
use crate::error::Error;
use crate::issuance::bootstrap::{self, CaDir};
use crate::issuance::certificate::{self, Authorization, Issued, MasterCa, RenewalProof};
use crate::policy::{OnExisting, Policy};
use crate::store::group::GroupCommit;
use crate::store::{
    CertRecord, FileStore, Issuance, PendingRequest, Revocation, SpentClaim, State, Store, StoreError, WriteLock,
};
use crate::vouching::classification::Classification;
use time::OffsetDateTime;

/// A certname given to a command (CLI, API, hook) must pass the certname rules before
/// anything is looked up: it becomes a file name in the store.
fn check_name(certname: &str) -> Result<(), Error> {
    decision::check_certname(certname)
        .map_err(|problem| Error::CertnameInvalid { certname: certname.to_string(), problem })
}

/// The outcome of `sign`.
#[derive(Debug)]
pub enum SignOutcome {
    Issued(Issued),
    Refused(Refused),
}

/// One line of `vouch list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ListEntry {
    pub name: String,
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

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

fn reason_code(r: &str) -> Option<rcgen::RevocationReason> {
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

/// The largest refused request kept under `requests/` when no trusted conductor vouched
/// for it (see [`Authority::sign`]).
pub const KEEP_UNVOUCHED_MAX: usize = 16 * 1024;

/// An open CA: its directory, policy, store and master CA.
pub struct Authority {
    pub dir: CaDir,
    pub policy: Policy,
    pub store: FileStore,
    ca: MasterCa,
    /// Vouched issuances from concurrent callers (`vouch serve`), stored in batches.
    group: GroupCommit<Job, Result<Committed, Error>>,
    /// The second (Unix time) of the last [`Authority::maintain`] from [`Authority::sign`].
    maintained: std::sync::atomic::AtomicI64,
    /// The names on the service's and the administrator's certificates: never a node's.
    pub reserved: ReservedNames,
}

/// Reports a failure that must not become a refusal (the certificates exist): a `warning`
/// event in the log (that of `vouch serve`, or what a CLI user sees on stderr), counted
/// as a store error.
fn warn(what: &str, detail: &str) {
    let stage = match what {
        "audit" => crate::obs::metrics::StoreStage::Audit,
        _ => crate::obs::metrics::StoreStage::AfterCommit,
    };
    crate::obs::metrics::METRICS.store_error(stage);
    tracing::warn!(event = "warning", what, detail);
}

/// Most issuances stored with one synchronous write.
const MAX_BATCH: usize = 128;

/// A vouched request, decided and signed, waiting for the group commit.
struct Job {
    certname: String,
    issued: Issued,
    record: CertRecord,
    /// The replay key, the attributes' expiry, and the requesting key's digest.
    replay: (crate::vouching::replay_key::ReplayKey, OffsetDateTime, String),
    spki: Vec<u8>,
    version: u32,
    conductor: decision::Conductor,
    decision_line: String,
    now: OffsetDateTime,
}

/// What the group commit made of a job.
enum Committed {
    Issued(Issued),
    Refused(Refused),
}

impl Authority {
    /// Opens the CA in `dir` with its `policy.toml`.
    pub fn open(dir: &CaDir) -> Result<Self, Error> {
        dir.require(bootstrap::CA_CERT)?;
        dir.check()?;
        let policy = Policy::load(&dir.policy())?;
        let (cert_der, key) =
            bootstrap::load_cert_and_key(&dir.file(bootstrap::CA_CERT), &dir.file(bootstrap::CA_KEY))?;
        let chain = std::fs::read_to_string(dir.file(bootstrap::CA_BUNDLE)).map_err(|source| Error::Io {
            path: dir.file(bootstrap::CA_BUNDLE),
            op: "read",
            source,
        })?;
        let ca = MasterCa::new(cert_der, key, chain)?;
        Ok(Authority {
            store: FileStore::new(dir.ca()),
            dir: dir.clone(),
            policy,
            ca,
            group: GroupCommit::new(MAX_BATCH),
            maintained: std::sync::atomic::AtomicI64::new(i64::MIN),
            reserved: ReservedNames::load(dir),
        })
    }

    /// The PEM chain sent after each certificate: master CA, then root.
    pub fn chain_pem(&self) -> &str {
        &self.ca.chain_pem
    }

    fn audit(&self, value: serde_json::Value) -> Result<(), Error> {
        self.audit_lines(&[value.to_string()])
    }

    /// The store's record of a certificate about to be stored (state `Issued`).
    fn issued_record(
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
        }
    }

    fn new_serial() -> Result<Vec<u8>, Error> {
        let mut b = [0u8; 16];
        aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::Crypto { detail: "no randomness available".into() })?;
        b[0] = (b[0] & 0x7f) | 0x40;
        Ok(b.to_vec())
    }

    /// Prepares, signs, stores (one synchronous write). Called with the lock held.
    fn issue_locked(
        &self,
        lock: &WriteLock,
        auth: Authorization,
        attributes_expiry: Option<String>,
        conductor: Option<String>,
        conductor_cert: Option<String>,
        now: OffsetDateTime,
    ) -> Result<Issued, Error> {
        let mut profile = self.policy.profile;
        if let (true, Authorization::Vouched(g)) = (self.policy.cap_at_conductor, &auth) {
            profile.cap = crate::encoding::time::parse_rfc3339(&g.conductor().not_after).ok();
        }
        let mut prepared = certificate::prepare(
            auth,
            &profile,
            &self.policy.mirror_oid,
            &self.policy.allowed_extensions,
            &Self::new_serial()?,
            &self.ca,
            now,
        )?;
        // A fresh random serial; on the (2^-126) chance it was used before, draw again.
        let mut tries = 0;
        while self.store.record(&prepared.serial_hex)?.is_some() && tries < 4 {
            tries += 1;
            prepared.reserial(&Self::new_serial()?);
        }
        let record = Self::issued_record(&prepared, attributes_expiry, conductor.clone(), conductor_cert);
        let issued = prepared.sign(&self.ca)?;
        self.store.issue(lock, &[Issuance { record, pem: issued.pem.clone(), claim: None }])?;
        self.audit(serde_json::json!({
            "time": format_rfc3339(now), "event": "issued", "certname": issued.certname,
            "serial": issued.serial_hex, "not_after": format_rfc3339(issued.not_after),
            "conductor": conductor,
        }))?;
        Ok(issued)
    }

    /// `vouch sign`: decide, and on a grant issue at once.
    pub fn sign(&self, csr: &[u8], certname: Option<&str>, now: OffsetDateTime) -> Result<SignOutcome, Error> {
        self.sign_parsed(csr, None, certname, now)
    }

    /// [`Authority::sign`] with the CSR already parsed by the caller (`csr::parse(csr)`).
    pub fn sign_parsed(
        &self,
        csr: &[u8],
        parsed: Option<crate::encoding::csr::Csr>,
        certname: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<SignOutcome, Error> {
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
        if let Some(reason) = self.reserved.refusal(&certname, parsed.as_ref().ok()) {
            let refused = Refused { reasons: vec![reason], conductor: None, held: None };
            self.audit_raw(&crate::store::audit::decision_line(now, &certname, Err(&refused), "sign"))?;
            return Ok(SignOutcome::Refused(refused));
        }
        let outcome = decision::decide_parsed(&Request { csr, certname: &certname }, parsed, &self.policy, now);
        let grant = match outcome {
            Err(refused) => return self.refuse(&certname, csr, refused, now),
            Ok(g) => g,
        };
        let job = self.prepare_job(grant, &certname, now)?;
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
        )?;
        match outcome {
            Committed::Issued(issued) => Ok(SignOutcome::Issued(issued)),
            Committed::Refused(refused) => self.refuse(&certname, csr, refused, now),
        }
    }

    /// Builds and signs the certificate for a grant, outside the store lock (so that
    /// concurrent requests sign on every core); the group commit decides whether it
    /// is stored or thrown away.
    fn prepare_job(&self, grant: decision::Grant, certname: &str, now: OffsetDateTime) -> Result<Job, Error> {
        use base64::Engine;
        let replay = (grant.replay_key(), grant.attributes_expiry(), holder_digest(&grant.csr().spki));
        let spki = grant.csr().spki.clone();
        let version = grant.version();
        let conductor = grant.conductor().clone();
        let conductor_cert = base64::engine::general_purpose::STANDARD.encode(grant.conductor_der());
        let mut decision = crate::store::audit::decision_value(now, certname, Ok(&grant), "sign");
        let mut profile = self.policy.profile;
        if self.policy.cap_at_conductor {
            profile.cap = crate::encoding::time::parse_rfc3339(&conductor.not_after).ok();
        }
        let prepared = certificate::prepare(
            Authorization::Vouched(Box::new(grant)),
            &profile,
            &self.policy.mirror_oid,
            &self.policy.allowed_extensions,
            &Self::new_serial()?,
            &self.ca,
            now,
        )?;
        let record = Self::issued_record(
            &prepared,
            Some(format_rfc3339(replay.1)),
            Some(conductor.fingerprint.clone()),
            Some(conductor_cert),
        );
        // With the serial it is about to get: the line names the certificate even if the
        // process dies before the "issued" line.
        decision["serial"] = record.serial.clone().into();
        let decision_line = decision.to_string();
        let issued = prepared.sign(&self.ca)?;
        Ok(Job { certname: certname.to_string(), issued, record, replay, spki, version, conductor, decision_line, now })
    }

    /// Stores a batch of signed jobs under one lock: each is checked against the
    /// store (an existing certificate, attributes already used) and claimed in the
    /// replay journal, then all admitted ones are audited (decisions, one synchronous
    /// write), stored (one more), audited again (issued) and answered. Two jobs for one certname never share a
    /// batch: the second waits for the next round and meets the first's certificate.
    fn commit_batch(&self, jobs: Vec<Job>) -> Vec<Result<Committed, Error>> {
        let lock = match self.store.lock() {
            Ok(l) => l,
            Err(e) => {
                let detail = e.to_string();
                return jobs.iter().map(|_| Err(Error::Store { detail: detail.clone() })).collect();
            }
        };
        let mut results: Vec<Option<Result<Committed, Error>>> = jobs.iter().map(|_| None).collect();
        let mut remaining: Vec<usize> = (0..jobs.len()).collect();
        while !remaining.is_empty() {
            let mut names = std::collections::HashSet::new();
            let mut admitted = Vec::new();
            let mut deferred = Vec::new();
            for i in remaining {
                let job = &jobs[i];
                if names.contains(job.certname.as_str()) {
                    deferred.push(i);
                    continue;
                }
                match self.admit(&lock, job) {
                    Ok(None) => {
                        names.insert(job.certname.as_str());
                        admitted.push(i);
                    }
                    Ok(Some(refused)) => results[i] = Some(Ok(Committed::Refused(refused))),
                    Err(e) => results[i] = Some(Err(e)),
                }
            }
            let batch: Vec<Issuance> = admitted
                .iter()
                .map(|&i| {
                    let job = &jobs[i];
                    Issuance {
                        record: job.record.clone(),
                        pem: job.issued.pem.clone(),
                        claim: self.policy.replay_journal.as_ref().map(|dir| SpentClaim {
                            journal: dir.clone(),
                            key: job.replay.0.key.clone(),
                            expiry: format_rfc3339(job.replay.1),
                            certname: job.certname.clone(),
                            holder: job.replay.2.clone(),
                            time: format_rfc3339(job.now),
                        }),
                    }
                })
                .collect();
            // The decisions first, synced: a certificate the log holds always has its
            // decision in the audit log, whenever the process dies.
            let decisions: Vec<String> = admitted.iter().map(|&i| jobs[i].decision_line.clone()).collect();
            let stored = match self.audit_lines(&decisions) {
                Err(e) => Err((e, false)),
                Ok(()) => match self.store.issue(&lock, &batch) {
                    Ok(()) => Ok(()),
                    Err(StoreError::AfterCommit { source }) => Err((Error::from(*source), true)),
                    Err(e) => Err((Error::from(e), false)),
                },
            };
            let failed = stored.is_err();
            match stored {
                // Stored (durable in the log), even when a step after that failed: issued.
                Ok(()) | Err((_, true)) => {
                    if let Err((e, _)) = &stored {
                        warn("store", &e.to_string());
                    }
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
                    // then be served its certificate).
                    if let Err(e) = self.audit_lines(&lines) {
                        warn("audit", &e.to_string());
                    }
                    for &i in &admitted {
                        // A request refused earlier under this name is answered now.
                        let _ = self.store.remove_request(&jobs[i].certname);
                        results[i] = Some(Ok(Committed::Issued(jobs[i].issued.clone())));
                    }
                }
                Err((e, false)) => {
                    let detail = e.to_string();
                    for &i in &admitted {
                        // Nothing was stored: the claim stays this key's, unmarked, so the
                        // node's retry is approved and nobody else's is.
                        results[i] = Some(Err(Error::Store { detail: detail.clone() }));
                    }
                }
            }
            if failed {
                // No further round on a store that just failed: the deferred jobs are answered
                // with an error and retried by their nodes.
                for i in deferred {
                    results[i] = Some(Err(Error::Store {
                        detail: "the store failed while this request waited; nothing was issued for it, retry".into(),
                    }));
                }
                break;
            }
            remaining = deferred;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Store { detail: "the request was not processed".into() })))
            .collect()
    }

    /// Under the lock: may `job` be stored now? `None` if so (its attributes are then
    /// claimed, and a certificate it supersedes revoked); else the refusal.
    fn admit(&self, lock: &WriteLock, job: &Job) -> Result<Option<Refused>, Error> {
        let certname = &job.certname;
        let now = job.now;
        let mut extra = Vec::new();
        let mut supersede = None;
        if let Some((rec, pem)) = self.store.current(certname)? {
            let valid = rec.state == State::Issued
                && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
            // The service's or an administrator's certificate is never superseded by a node,
            // whatever the policy says (judged by the record and the certificate, so also
            // after a restart with other --server-name values, or a `vouch admin new`).
            if valid {
                if let Some(holder) = self.protected(&rec, &pem) {
                    let reason = Refusal::NameReserved {
                        certname: certname.clone(),
                        name: certname.clone(),
                        holder: holder.to_string(),
                    };
                    return Ok(Some(Refused {
                        reasons: vec![reason],
                        conductor: Some(job.conductor.clone()),
                        held: None,
                    }));
                }
            }
            if valid {
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
                    (Some(_), Some(old)) => job.replay.1 > old,
                    _ => true,
                };
                match self.policy.on_existing {
                    OnExisting::Refuse => extra
                        .push(Refusal::CertificateExists { certname: certname.clone(), serial: rec.serial.clone() }),
                    // Compared in canonical form: a re-encoding of the same key is the same key.
                    OnExisting::Supersede if crate::encoding::csr::same_key(&old_spki, &job.spki) => {
                        extra.push(Refusal::SupersedeSameKey { certname: certname.clone() })
                    }
                    // Version 1 attributes name no certname: they never take over a name.
                    OnExisting::Supersede if !later || job.version != 2 => {
                        extra.push(Refusal::SupersedeReplay { certname: certname.clone() })
                    }
                    OnExisting::Supersede => supersede = Some(rec),
                }
            }
        }
        if !extra.is_empty() {
            // The attributes are good: they become this key's, as in any kept refusal.
            let held =
                Some(decision::Held { replay_key: job.replay.0.clone(), expiry: job.replay.1, spki: job.spki.clone() });
            return Ok(Some(Refused { reasons: extra, conductor: Some(job.conductor.clone()), held }));
        }
        if self.store.record(&job.record.serial)?.is_some() {
            return Err(Error::Store {
                detail: format!("serial {} was drawn twice (p = 2^-126); nothing was issued, retry", job.record.serial),
            });
        }
        // One-time use, claimed under the lock and before anything is stored. The entry is
        // written unsynced: the store's log, synced before anyone is answered, names it.
        if let Some(dir) = &self.policy.replay_journal {
            let (key, expiry, holder) = &job.replay;
            let claim = crate::store::journal::Journal::unsynced(dir)
                .claim(key, *expiry, certname, holder, true, now)
                .map_err(|source| Error::Io { path: dir.clone(), op: "record one-time use in", source })?;
            if let crate::store::journal::Claim::Used { certname: first_certname, time } = claim {
                return Ok(Some(Refused {
                    reasons: vec![Refusal::AttributesReplayed { first_certname, first_time: time }],
                    conductor: Some(job.conductor.clone()),
                    held: None,
                }));
            }
        }
        if let Some(old) = supersede {
            self.revoke_locked(lock, &old, "superseded", false, now)?;
        }
        Ok(None)
    }

    /// Whether a stored certificate is the service's or an administrator's: issued here for
    /// vouch itself (no conductor, no attributes: `vouch serve`'s certificates and `vouch
    /// admin new`), the certificate the service presents, or listed in `[serve] admins`.
    pub fn protected(&self, rec: &CertRecord, pem: &str) -> Option<Holder> {
        let der = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
        if !self.policy.admin_fingerprints.is_empty()
            && self.policy.admin_fingerprints.contains(&bootstrap::fingerprint(&der))
        {
            return Some(Holder::Admin);
        }
        if let Some(h) = self.reserved.holder(&rec.certname) {
            return Some(h);
        }
        if rec.conductor.is_none() && rec.attributes_expiry.is_none() {
            let admin = x509_parser::parse_x509_certificate(&der).ok().is_some_and(|(_, c)| {
                c.extensions()
                    .iter()
                    .any(|e| e.oid.iter().is_some_and(|i| i.eq(crate::encoding::oids::PP_CLI_AUTH.iter().copied())))
            });
            return Some(if admin { Holder::Admin } else { Holder::Service });
        }
        None
    }

    fn audit_lines(&self, lines: &[String]) -> Result<(), Error> {
        if let Some(log) = &self.policy.audit_log {
            crate::files::durable::append_lines(log, lines).map_err(|source| Error::Io {
                path: log.clone(),
                op: "append to",
                source,
            })?;
        }
        Ok(())
    }

    /// Makes every issuance so far durable in the store's own files (see [`crate::store`]).
    pub fn checkpoint(&self) -> Result<(), Error> {
        let lock = self.store.lock()?;
        Ok(self.store.checkpoint(&lock)?)
    }

    fn audit_raw(&self, line: &str) -> Result<(), Error> {
        self.audit_lines(&[line.to_string()])
    }

    fn refuse(&self, certname: &str, csr: &[u8], refused: Refused, now: OffsetDateTime) -> Result<SignOutcome, Error> {
        let mut refused = hold_refused(&self.policy, refused, certname, now)?;
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
            return Ok(SignOutcome::Refused(refused));
        }
        // Under the store's lock, as issuance: whether the name has a certificate is read
        // there (a request racing the node's own, granted one, is not kept beside it), and
        // the request's two files are written by one writer at a time (its CSR never ends
        // beside another request's reasons).
        let lock = self.store.lock()?;
        if self.policy.on_existing == OnExisting::Refuse
            && !refused.reasons.iter().any(|r| matches!(r, Refusal::CertificateExists { .. }))
        {
            if let Some((rec, _)) = self.store.current(certname)? {
                if rec.state == State::Issued
                    && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now)
                {
                    refused
                        .reasons
                        .push(Refusal::CertificateExists { certname: certname.to_string(), serial: rec.serial });
                }
            }
        }
        self.audit_raw(&crate::store::audit::decision_line(now, certname, Err(&refused), "sign"))?;
        // Refused because the name has a certificate: nothing to keep (as Puppet answers such a
        // request; a pending request beside a signed node would only hide it).
        if refused.reasons.iter().any(Refusal::is_about_the_existing_certificate) {
            return Ok(SignOutcome::Refused(refused));
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
        Ok(SignOutcome::Refused(refused))
    }

    fn revoke_locked(
        &self,
        lock: &WriteLock,
        rec: &CertRecord,
        reason: &str,
        cleaned: bool,
        now: OffsetDateTime,
    ) -> Result<(), Error> {
        let rev = Revocation {
            serial: rec.serial.clone(),
            time: format_rfc3339(now),
            reason: reason.to_string(),
            certname: rec.certname.clone(),
            cleaned,
        };
        self.store.revoke(lock, &rev)?;
        self.audit(serde_json::json!({
            "time": rev.time, "event": if cleaned { "cleaned" } else { "revoked" },
            "certname": rev.certname, "serial": rev.serial, "reason": rev.reason,
        }))?;
        self.write_crl_locked(lock, now)
    }

    /// `vouch revoke` / `vouch clean`.
    pub fn revoke(&self, certname: &str, reason: &str, clean: bool, now: OffsetDateTime) -> Result<String, Error> {
        if reason_code(reason).is_none() {
            return Err(Error::Usage {
                detail: format!("unknown revocation reason {reason:?}; one of {}", REASONS.join(", ")),
            });
        }
        check_name(certname)?;
        let lock = self.store.lock()?;
        let Some((rec, _)) = self.store.current(certname)? else {
            if clean {
                self.store.remove_request(certname)?;
                return Ok(format!("no certificate for {certname}; pending request removed if there was one"));
            }
            return Err(Error::NotFound { certname: certname.to_string() });
        };
        if rec.state == State::Revoked && !clean {
            return Ok(format!("{certname} (serial {}) was already revoked", rec.serial));
        }
        if rec.state == State::Revoked {
            // Clean a revoked certificate: forget it without a second CRL entry.
            let rev = Revocation {
                serial: rec.serial.clone(),
                time: rec.revoked_at.clone().unwrap_or_else(|| format_rfc3339(now)),
                reason: rec.reason.clone().unwrap_or_else(|| reason.to_string()),
                certname: certname.to_string(),
                cleaned: true,
            };
            self.store.revoke(&lock, &rev)?;
            return Ok(format!("cleaned {certname} (serial {})", rec.serial));
        }
        self.revoke_locked(&lock, &rec, reason, clean, now)?;
        Ok(format!("{} {certname} (serial {})", if clean { "revoked and cleaned" } else { "revoked" }, rec.serial))
    }

    /// `vouch renew`: same key, same classification, new serial and validity; the
    /// old certificate is revoked (superseded) so a certname never has two valid ones.
    pub fn renew(&self, certname: &str, now: OffsetDateTime) -> Result<Issued, Error> {
        self.renew_if_current(certname, None, now)
    }

    /// Renews only if `expected_serial` (when given) is still the certname's current
    /// certificate, checked under the store lock: a node renewing with a certificate that
    /// was meanwhile renewed, revoked or cleaned gets an error, never a second renewal.
    pub fn renew_if_current(
        &self,
        certname: &str,
        expected_serial: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Issued, Error> {
        check_name(certname)?;
        let lock = self.store.lock()?;
        let (rec, pem) =
            self.store.current(certname)?.ok_or_else(|| Error::NotFound { certname: certname.to_string() })?;
        if let Some(expected) = expected_serial.filter(|e| *e != rec.serial) {
            return Err(Error::NotValid {
                certname: certname.to_string(),
                detail: format!("serial {expected} is no longer its current certificate (that is {})", rec.serial),
            });
        }
        if rec.state != State::Issued
            || crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_none_or(|t| t <= now)
        {
            return Err(Error::NotValid {
                certname: certname.to_string(),
                detail: format!("its certificate is {:?}", rec.state).to_lowercase(),
            });
        }
        let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .map_err(|e| Error::Store { detail: format!("{certname}: {e}") })?;
        self.verify_ours(&der, now)?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| Error::Store { detail: format!("{certname}: {e}") })?;
        let spki = cert.public_key().raw.to_vec();
        let key_kind = crate::encoding::csr::spki_kind(&spki).map_err(|e| Error::Store { detail: e.to_string() })?;
        let classification_b64 = certificate::classification_of(&der, &self.policy.mirror_oid)
            .map_err(|detail| Error::Store { detail })?
            .ok_or_else(|| Error::NotValid {
                certname: certname.to_string(),
                detail: "its certificate carries no classification".into(),
            })?;
        let extra = cert
            .extensions()
            .iter()
            .filter_map(|e| {
                let arcs: Vec<u64> = e.oid.iter()?.collect();
                self.policy.allowed_extensions.contains(&arcs).then(|| (arcs, e.value.to_vec()))
            })
            .collect();
        // The conductor that vouched must still be acceptable under the current policy.
        self.recheck_conductor(&rec, &classification_b64, now)?;
        let proof = RenewalProof { certname: certname.to_string(), spki, key_kind, classification_b64, extra };
        self.revoke_locked(&lock, &rec, "superseded", false, now)?;
        self.issue_locked(
            &lock,
            Authorization::Renewal(proof),
            rec.attributes_expiry.clone(),
            rec.conductor.clone(),
            rec.conductor_cert.clone(),
            now,
        )
    }

    /// Renewal: refuses (audited) unless the conductor recorded for `rec` passes
    /// [`decision::recheck_conductor`] under the current policy. A record without the
    /// conductor's certificate (written before vouch kept it) is refused.
    fn recheck_conductor(&self, rec: &CertRecord, classification_b64: &str, now: OffsetDateTime) -> Result<(), Error> {
        use base64::Engine;
        let certname = &rec.certname;
        let der = rec.conductor_cert.as_deref().and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let outcome = match der {
            None => Err(Refused {
                reasons: vec![Refusal::ConductorNotRecorded { certname: certname.clone() }],
                conductor: None,
                held: None,
            }),
            Some(der) => match Classification::from_base64(classification_b64, self.policy.classification_max_bytes) {
                // Scopes judge the classification; one the current policy cannot read is refused.
                Err(error) => Err(Refused {
                    reasons: vec![Refusal::ClassificationInvalid { error }],
                    conductor: None,
                    held: None,
                }),
                Ok(classification) => {
                    decision::recheck_conductor(&der, certname, Some(&classification), &self.policy, now)
                }
            },
        };
        match outcome {
            Ok(_) => Ok(()),
            Err(refused) => {
                self.audit(serde_json::json!({
                    "time": format_rfc3339(now), "event": "renewal-refused", "certname": certname,
                    "serial": rec.serial, "conductor": refused.conductor,
                    "reasons": refused.reasons.iter().map(|r| serde_json::json!({
                        "code": r.code(), "message": r.to_string(),
                    })).collect::<Vec<_>>(),
                }))?;
                Err(Error::Refused { certname: certname.clone(), refused: Box::new(refused) })
            }
        }
    }

    /// Checks a certificate chains to this CA (master, then root) and is valid at `now`.
    pub fn verify_ours(&self, der: &[u8], now: OffsetDateTime) -> Result<(), Error> {
        let root = std::fs::read(self.dir.file(bootstrap::ROOT_CERT)).map_err(|source| Error::Io {
            path: self.dir.file(bootstrap::ROOT_CERT),
            op: "read",
            source,
        })?;
        let (_, root_der) =
            crate::encoding::pem::find(&root, &["CERTIFICATE"]).map_err(|e| Error::Store { detail: e.to_string() })?;
        let root_cd = rustls_pki_types::CertificateDer::from(root_der.as_slice());
        let anchor =
            webpki::anchor_from_trusted_cert(&root_cd).map_err(|e| Error::Store { detail: format!("{e:?}") })?;
        let inter = [rustls_pki_types::CertificateDer::from(self.ca.cert_der.as_slice())];
        let ee_cd = rustls_pki_types::CertificateDer::from(der);
        let ee = webpki::EndEntityCert::try_from(&ee_cd).map_err(|e| Error::Store { detail: format!("{e:?}") })?;
        let secs = u64::try_from(now.unix_timestamp()).unwrap_or(0);
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &inter,
            rustls_pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs)),
            webpki::KeyUsage::client_auth(),
            None,
            None,
        )
        .map(|_| ())
        .map_err(|e| Error::NotValid {
            certname: String::new(),
            detail: format!("it does not verify against this CA: {e:?}"),
        })
    }

    /// `vouch enc CERTNAME`: the classification from the node's current certificate.
    pub fn enc(&self, certname: &str, now: OffsetDateTime) -> Result<Classification, Error> {
        check_name(certname)?;
        let (rec, pem) =
            self.store.current(certname)?.ok_or_else(|| Error::NotFound { certname: certname.to_string() })?;
        if rec.state != State::Issued {
            return Err(Error::NotValid {
                certname: certname.to_string(),
                detail: "its certificate is revoked".into(),
            });
        }
        let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"])
            .map_err(|e| Error::Store { detail: e.to_string() })?;
        self.verify_ours(&der, now).map_err(|e| match e {
            Error::NotValid { detail, .. } => Error::NotValid { certname: certname.to_string(), detail },
            other => other,
        })?;
        classification_from_cert(&der, &self.policy.mirror_oid, self.policy.classification_max_bytes, certname)
    }

    /// Whether the CRL is missing or within `refresh_before` of its nextUpdate.
    /// Reads the small `crl_next_update` file written beside the CRL, so that
    /// the hot path never parses a large CRL.
    pub fn crl_due(&self, now: OffsetDateTime) -> Result<bool, Error> {
        let next = match std::fs::read_to_string(self.dir.file("crl_next_update")) {
            Ok(s) => crate::encoding::time::parse_rfc3339(s.trim()).ok(),
            Err(_) => None,
        };
        let Some(next) = next else { return Ok(true) };
        // A revocation recorded after the last CRL (e.g. a crash between the two) makes it due.
        let recorded = std::fs::read_to_string(self.dir.file("crl_revocations_size")).ok();
        let now_size = std::fs::metadata(self.dir.file("revocations.txt")).map(|m| m.len()).unwrap_or(0);
        if recorded.as_deref().map(str::trim) != Some(now_size.to_string().as_str()) {
            return Ok(true);
        }
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        Ok(next - now < refresh || !self.dir.file("ca_crl.pem").exists())
    }

    /// Regenerates the CRL if it is due. Every command that touches the store calls this.
    pub fn maintain(&self, now: OffsetDateTime) -> Result<(), Error> {
        if self.crl_due(now)? {
            let lock = self.store.lock()?;
            if self.crl_due(now)? {
                self.write_crl_locked(&lock, now)?;
            }
        }
        if self.root_crl_due(now) {
            let lock = self.store.lock()?;
            if self.root_crl_due(now) {
                self.write_root_crl_locked(&lock, now)?;
            }
        }
        Ok(())
    }

    /// `vouch crl`: regenerates and returns the CRL PEM.
    pub fn crl(&self, now: OffsetDateTime) -> Result<String, Error> {
        let lock = self.store.lock()?;
        self.write_crl_locked(&lock, now)?;
        std::fs::read_to_string(self.dir.file("ca_crl.pem")).map_err(|source| Error::Io {
            path: self.dir.file("ca_crl.pem"),
            op: "read",
            source,
        })
    }

    fn write_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let number_path = self.dir.file("crl_number");
        let number = next_crl_number(&number_path)?;
        let mut seen = std::collections::HashSet::new();
        let mut revoked = Vec::new();
        for r in self.store.revocations()? {
            if !seen.insert(r.serial.clone()) {
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
        crate::files::durable::write_replace(&path, pem.as_bytes(), 0o644).map_err(|source| Error::Io {
            path: path.clone(),
            op: "write",
            source,
        })?;
        // Written after the CRL: a crash between the two leaves an older date, which only
        // makes the next command regenerate sooner.
        let size = std::fs::metadata(self.dir.file("revocations.txt")).map(|m| m.len()).unwrap_or(0);
        let size_path = self.dir.file("crl_revocations_size");
        crate::files::durable::write_replace(&size_path, format!("{size}\n").as_bytes(), 0o644)
            .map_err(|source| Error::Io { path: size_path, op: "write", source })?;
        let next = self.dir.file("crl_next_update");
        crate::files::durable::write_replace(
            &next,
            format!("{}\n", format_rfc3339(params.next_update)).as_bytes(),
            0o644,
        )
        .map_err(|source| Error::Io { path: next, op: "write", source })
    }

    /// `vouch list`: requests; with `all`, signed and revoked certificates too.
    pub fn list(&self, all: bool) -> Result<Vec<ListEntry>, Error> {
        let mut out: Vec<ListEntry> = self
            .store
            .requests()?
            .into_iter()
            .map(|r| ListEntry {
                name: r.certname,
                state: "requested",
                serial: None,
                not_after: None,
                reasons: r.reasons,
            })
            .collect();
        if all {
            let revs: std::collections::HashMap<String, bool> =
                self.store.revocations()?.into_iter().map(|r| (r.serial, r.cleaned)).fold(
                    std::collections::HashMap::new(),
                    |mut m, (s, c)| {
                        let e = m.entry(s).or_insert(false);
                        *e |= c;
                        m
                    },
                );
            let mut latest: std::collections::HashMap<String, (String, String)> = std::collections::HashMap::new();
            let mut order = Vec::new();
            for e in self.store.inventory()? {
                if latest.insert(e.certname.clone(), (e.serial, e.not_after)).is_none() {
                    order.push(e.certname);
                }
            }
            order.sort();
            for cn in order {
                let Some((serial, na)) = latest.remove(&cn) else {
                    continue;
                };
                let state = match revs.get(&serial) {
                    Some(true) => continue,
                    Some(false) => "revoked",
                    None => "signed",
                };
                out.push(ListEntry { name: cn, state, serial: Some(serial), not_after: Some(na), reasons: vec![] });
            }
        }
        Ok(out)
    }
}

/// Records the grant's replay key in the policy's journal; a second use of the
/// same attributes becomes a refusal. Without a journal (tests only) it is a no-op.
pub fn claim_once(
    policy: &Policy,
    grant: decision::Grant,
    reusable: bool,
    now: OffsetDateTime,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(dir) = &policy.replay_journal else { return Ok(Ok(grant)) };
    let journal = crate::store::journal::Journal::new(dir);
    // The CSR's SPKI is canonical (csr::canonical_spki): one key, one holder, however encoded.
    let holder = holder_digest(&grant.csr().spki);
    let claim = journal
        .claim(&grant.replay_key(), grant.attributes_expiry(), grant.certname(), &holder, reusable, now)
        .map_err(|source| Error::Io { path: dir.clone(), op: "record one-time use in", source })?;
    Ok(match claim {
        crate::store::journal::Claim::Fresh => Ok(grant),
        crate::store::journal::Claim::Used { certname, time } => Err(Refused {
            reasons: vec![Refusal::AttributesReplayed { first_certname: certname, first_time: time }],
            conductor: Some(grant.conductor().clone()),
            held: None,
        }),
    })
}

/// A refused request whose attributes a trusted conductor did sign: records the
/// request's key as their holder in the replay journal, so that a copy of the pending
/// request (it may be shown, and Puppet Server serves it) cannot be replayed with
/// another key. If another key already holds them, the refusal also says so.
pub fn hold_refused(
    policy: &Policy,
    mut refused: Refused,
    certname: &str,
    now: OffsetDateTime,
) -> Result<Refused, Error> {
    let (Some(dir), Some(held)) = (&policy.replay_journal, &refused.held) else { return Ok(refused) };
    let journal = crate::store::journal::Journal::new(dir);
    let holder = holder_digest(&held.spki);
    let claim = journal.hold(&held.replay_key, held.expiry, certname, &holder, now).map_err(|source| Error::Io {
        path: dir.clone(),
        op: "record the holder of attributes in",
        source,
    })?;
    if let crate::store::journal::Claim::Used { certname, time } = claim {
        refused.reasons.push(Refusal::AttributesReplayed { first_certname: certname, first_time: time });
    }
    Ok(refused)
}

/// `vouch check`: what the replay journal says of a decision, read only (nothing is
/// written, created or pruned). A grant whose attributes were already used (a hook's
/// approval, a CA's certificate, another key) becomes an `attributes-replayed` refusal
/// naming who used them; a refusal whose vouched attributes another key holds gets that
/// reason too. Without a journal, or before it exists, the outcome is unchanged.
pub fn peek_replay(
    policy: &Policy,
    outcome: Result<decision::Grant, Refused>,
    certname: &str,
) -> Result<Result<decision::Grant, Refused>, Error> {
    let Some(dir) = &policy.replay_journal else { return Ok(outcome) };
    let journal = crate::store::journal::Journal::new(dir);
    let peek = |key: &crate::vouching::replay_key::ReplayKey, expiry: OffsetDateTime, spki: &[u8]| {
        journal.peek(key, expiry, certname, &holder_digest(spki)).map_err(|source| Error::Io {
            path: dir.clone(),
            op: "read one-time use in",
            source,
        })
    };
    Ok(match outcome {
        Ok(grant) => match peek(&grant.replay_key(), grant.attributes_expiry(), &grant.csr().spki)? {
            crate::store::journal::Claim::Fresh => Ok(grant),
            crate::store::journal::Claim::Used { certname, time } => Err(Refused {
                reasons: vec![Refusal::AttributesReplayed { first_certname: certname, first_time: time }],
                conductor: Some(grant.conductor().clone()),
                held: None,
            }),
        },
        Err(mut refused) => {
            if let Some(held) = &refused.held {
                if let crate::store::journal::Claim::Used { certname, time } =
                    peek(&held.replay_key, held.expiry, &held.spki)?
                {
                    refused.reasons.push(Refusal::AttributesReplayed { first_certname: certname, first_time: time });
                }
            }
            Err(refused)
        }
    })
}

fn holder_digest(spki: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, spki).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The classification a certificate carries, validated, for `vouch enc`.
pub fn classification_from_cert(
    der: &[u8],
    mirror_oid: &[u64],
    max: usize,
    name: &str,
) -> Result<Classification, Error> {
    let b64 = certificate::classification_of(der, mirror_oid)
        .map_err(|detail| Error::NotValid { certname: name.to_string(), detail })?
        .ok_or_else(|| Error::NotValid {
            certname: name.to_string(),
            detail: "its certificate carries no classification".into(),
        })?;
    Classification::from_base64(&b64, max).map_err(|e| Error::NotValid {
        certname: name.to_string(),
        detail: format!("its classification is unusable: {e}"),
    })
}

/// What [`Authority::issue_local`] makes: a service or administrator certificate.
#[derive(Debug, Clone, Copy)]
pub struct LocalSpec<'a> {
    pub certname: &'a str,
    pub role: certificate::LocalRole,
    /// Extra DNS names and IP addresses (service certificates).
    pub dns_names: &'a [String],
    pub ip_addresses: &'a [std::net::IpAddr],
    pub key_type: crate::issuance::keys::KeyType,
    /// Supersede a current certificate of the same name (else refuse).
    pub replace: bool,
}

/// A certificate presented by a TLS client, checked against the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    pub certname: String,
    pub serial: String,
    /// Carries Puppet's `pp_cli_auth` = "true".
    pub cli_auth: bool,
    /// SHA-256 fingerprint, `AB:CD:…`.
    pub fingerprint: String,
}

impl Authority {
    /// The root CRL (empty: vouch's root signs only the master CA and conductors) is
    /// due when missing or within `refresh_before` of its nextUpdate, and only if
    /// the root key is on this machine (an operator may keep it offline).
    fn root_crl_due(&self, now: OffsetDateTime) -> bool {
        if !self.dir.file(bootstrap::ROOT_KEY).exists() {
            return false;
        }
        let next = std::fs::read_to_string(self.dir.file("root_crl_next_update"))
            .ok()
            .and_then(|s| crate::encoding::time::parse_rfc3339(s.trim()).ok());
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        match next {
            Some(next) => next - now < refresh || !self.dir.file(bootstrap::ROOT_CRL).exists(),
            None => true,
        }
    }

    /// Writes the root's CRL. Puppet agents check revocation for the whole chain
    /// (`certificate_revocation = chain`), so they need a CRL from the root too.
    fn write_root_crl_locked(&self, _lock: &WriteLock, now: OffsetDateTime) -> Result<(), Error> {
        let (root_der, root_key) =
            bootstrap::load_cert_and_key(&self.dir.file(bootstrap::ROOT_CERT), &self.dir.file(bootstrap::ROOT_KEY))?;
        let issuer =
            rcgen::Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(root_der.as_slice()), root_key)
                .map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let number_path = self.dir.file("root_crl_number");
        let number = next_crl_number(&number_path)?;
        // A year, or the policy's CRL validity if longer.
        let validity = time::Duration::try_from(self.policy.crl_validity).unwrap_or(time::Duration::days(30));
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now.checked_add(validity.max(time::Duration::days(365))).ok_or_else(|| Error::Date {
                detail: "the root CRL's nextUpdate would be past the year 9999".into(),
            })?,
            crl_number: rcgen::SerialNumber::from_slice(&number.to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: Vec::new(),
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
        write(self.dir.file(bootstrap::ROOT_CRL), pem.as_bytes())?;
        write(self.dir.file("root_crl_next_update"), format!("{}\n", format_rfc3339(params.next_update)).as_bytes())
    }

    /// The CRLs of the whole chain, as Puppet's agents want them: the master CA's, then the root's.
    pub fn crl_bundle(&self) -> Result<String, Error> {
        let read = |name: &str| {
            std::fs::read_to_string(self.dir.file(name)).map_err(|source| Error::Io {
                path: self.dir.file(name),
                op: "read",
                source,
            })
        };
        let mut out = read("ca_crl.pem")?;
        if self.dir.file(bootstrap::ROOT_CRL).exists() {
            out.push_str(&read(bootstrap::ROOT_CRL)?);
        }
        Ok(out)
    }

    /// Issues a certificate for the service itself or for an administrator, with a
    /// key generated here (returned as PEM, for the caller to write 0600). With
    /// `replace`, a current certificate of the same name is revoked (superseded).
    pub fn issue_local(&self, spec: &LocalSpec<'_>, now: OffsetDateTime) -> Result<(Issued, String), Error> {
        let key = spec.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let issued = self.issue_local_for_key(spec, &key, now)?;
        Ok((issued, key.serialize_pem()))
    }

    /// [`Authority::issue_local`] for a key that already exists (written before the
    /// certificate is asked for, so an interrupted run leaves a key to finish with, never a
    /// certificate whose key is lost); `spec.key_type` is not used.
    pub fn issue_local_for_key(
        &self,
        spec: &LocalSpec<'_>,
        key: &rcgen::KeyPair,
        now: OffsetDateTime,
    ) -> Result<Issued, Error> {
        let LocalSpec { certname, role, dns_names, ip_addresses, key_type: _, replace } = *spec;
        decision::check_certname(certname).map_err(|r| Error::Usage { detail: format!("{r}") })?;
        if decision::is_reserved_certname(certname) {
            return Err(Error::Usage { detail: format!("{certname:?} is reserved by Puppet for the CA itself") });
        }
        let spki = rcgen::PublicKeyData::subject_public_key_info(key);
        let key_kind = crate::encoding::csr::spki_kind(&spki).map_err(|e| Error::Crypto { detail: e.to_string() })?;
        let lock = self.store.lock()?;
        if let Some((rec, _)) = self.store.current(certname)? {
            let valid = rec.state == State::Issued
                && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
            if valid && !replace {
                return Err(Error::Usage {
                    detail: format!(
                        "{certname} already has a valid certificate (serial {}); revoke or clean it first",
                        rec.serial
                    ),
                });
            }
            // `replace` supersedes vouch's own certificate for that name (the service's
            // previous one), never a node's: a --server-name naming a node must not revoke it.
            if valid && (rec.conductor.is_some() || rec.attributes_expiry.is_some()) {
                return Err(Error::Usage {
                    detail: format!(
                        "{certname} is a node's certname: it has a valid certificate (serial {}) a conductor \
                         vouched for, which vouch will not revoke to take the name; choose another --server-name, \
                         or revoke or clean the node first ('vouch revoke {certname}')",
                        rec.serial
                    ),
                });
            }
            if valid {
                self.revoke_locked(&lock, &rec, "superseded", false, now)?;
            }
        }
        let proof = certificate::LocalProof {
            certname: certname.to_string(),
            spki,
            key_kind,
            role,
            dns_names: dns_names.to_vec(),
            ip_addresses: ip_addresses.to_vec(),
        };
        self.issue_locked(&lock, Authorization::Local(proof), None, None, None, now)
    }

    /// Checks a certificate a TLS client presented: issued by this CA, valid now, and
    /// still the current, unrevoked certificate of its certname in the store (so a
    /// revoked, superseded or cleaned certificate is refused at once, without a CRL).
    pub fn presented(&self, der: &[u8], now: OffsetDateTime) -> Result<Presented, Error> {
        self.verify_ours(der, now)?;
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| Error::NotValid { certname: String::new(), detail: e.to_string() })?;
        let certname = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string)
            .ok_or_else(|| Error::NotValid { certname: String::new(), detail: "it has no common name".into() })?;
        decision::check_certname(&certname)
            .map_err(|r| Error::NotValid { certname: certname.clone(), detail: r.to_string() })?;
        let serial = crate::encoding::hex(cert.raw_serial());
        match self.store.record(&serial)? {
            Some(rec) if rec.state == State::Issued && rec.certname == certname => {}
            Some(rec) => {
                return Err(Error::NotValid {
                    certname,
                    detail: format!("serial {serial} is {:?} in the store", rec.state).to_lowercase(),
                })
            }
            None => return Err(Error::NotValid { certname, detail: format!("serial {serial} is unknown here") }),
        }
        match self.store.current(&certname)? {
            Some((rec, _)) if rec.serial == serial => {}
            _ => {
                return Err(Error::NotValid {
                    certname,
                    detail: format!("serial {serial} is no longer its current certificate"),
                })
            }
        }
        let cli_auth = cert.extensions().iter().any(|e| {
            let arcs: Option<Vec<u64>> = e.oid.iter().map(|i| i.collect());
            arcs.as_deref() == Some(crate::encoding::oids::PP_CLI_AUTH)
                && crate::encoding::der::Reader::new(e.value).any().is_ok_and(|t| t.content == b"true")
        });
        Ok(Presented { certname, serial, cli_auth, fingerprint: bootstrap::fingerprint(der) })
    }

    /// One pending request, its reasons and CSR PEM.
    pub fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, Error> {
        Ok(self.store.request(certname)?)
    }

    /// The state of a serial in the store.
    pub fn store_record(&self, serial: &str) -> Result<Option<State>, Error> {
        Ok(self.store.record(serial)?.map(|r| r.state))
    }

    /// The certname's current certificate record and PEM.
    pub fn certificate(&self, certname: &str) -> Result<Option<(CertRecord, String)>, Error> {
        Ok(self.store.current(certname)?)
    }
}

/// Whose name a reserved name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A name on the certificate `vouch serve` presents (`DIR/server/server_crt.pem`).
    Service,
    /// An administrator's certificate (`DIR/admin/`, `vouch admin new`, `[serve] admins`).
    Admin,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Holder::Service => "the certificate this CA's service presents",
            Holder::Admin => "an administrator's certificate",
        })
    }
}

/// Names no node may have, whatever the flags `vouch serve` was started with: every name
/// (CN, DNS and IP subjectAltNames) on the certificate the service actually presents and
/// on the administrator certificate in the data directory. Read from those files when the
/// authority opens (the service certificate only changes when `vouch serve` starts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservedNames {
    names: Vec<(String, Holder)>,
}

impl ReservedNames {
    /// The names on the certificates in `dir` (missing or unreadable files reserve nothing:
    /// `vouch serve` cannot present a certificate it cannot read).
    pub fn load(dir: &CaDir) -> Self {
        let mut r = ReservedNames::default();
        for (rel, holder) in [
            (crate::issuance::bootstrap::SERVER_CERT, Holder::Service),
            (crate::issuance::bootstrap::ADMIN_CERT, Holder::Admin),
        ] {
            if let Ok(pem) = std::fs::read(dir.dir.join(rel)) {
                if let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) {
                    for n in names_on_certificate(&der) {
                        r.add(n, holder);
                    }
                }
            }
        }
        r
    }

    fn add(&mut self, name: String, holder: Holder) {
        let name = Self::normal(&name);
        if !self.names.iter().any(|(n, _)| *n == name) {
            self.names.push((name, holder));
        }
    }

    /// A DNS name as resolvers and TLS clients compare it: case-insensitive, and a
    /// trailing dot (the fully qualified form, `vm.`) names the same host as `vm`.
    fn normal(name: &str) -> String {
        name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
    }

    /// Whose name `name` is, if reserved (compared as host names are: see [`Self::normal`]).
    pub fn holder(&self, name: &str) -> Option<Holder> {
        let name = Self::normal(name);
        self.names.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
    }

    /// The refusal for a request under `certname` (or asking for a subjectAltName) that a
    /// reserved name covers, if any.
    pub fn refusal(&self, certname: &str, csr: Option<&crate::encoding::csr::Csr>) -> Option<Refusal> {
        let requested = csr.map(requested_alt_names).unwrap_or_default();
        std::iter::once(certname.to_string()).chain(requested).find_map(|name| {
            self.holder(&name).map(|holder| Refusal::NameReserved {
                certname: certname.to_string(),
                name,
                holder: holder.to_string(),
            })
        })
    }
}

/// The CNs, DNS names and IP addresses (as text: a DNS name "127.0.0.1" matches the
/// address for some clients) a certificate names.
pub fn names_on_certificate(der: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let Ok((_, c)) = x509_parser::parse_x509_certificate(der) else { return out };
    out.extend(c.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_string));
    if let Ok(Some(san)) = c.subject_alternative_name() {
        out.extend(general_names(&san.value.general_names));
    }
    out
}

fn general_names(names: &[x509_parser::extensions::GeneralName<'_>]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => <[u8; 4]>::try_from(*b).ok().map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*b).ok().map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The DNS names and IP addresses a CSR asks for in subjectAltName (Puppet Server copies
/// them into the certificate when its own setting allows; vouch's CA never does).
fn requested_alt_names(csr: &crate::encoding::csr::Csr) -> Vec<String> {
    use x509_parser::prelude::FromDer;
    csr.extensions
        .iter()
        .filter(|e| e.oid == crate::encoding::oids::SUBJECT_ALT_NAME)
        .filter_map(|e| x509_parser::extensions::SubjectAlternativeName::from_der(&e.value).ok())
        .flat_map(|(_, san)| general_names(&san.general_names))
        .collect()
}

/// The number the next CRL gets: one more than the one in `path` (a missing or unreadable
/// file counts as 0); checked, since the file is the operator's to edit.
fn next_crl_number(path: &std::path::Path) -> Result<u64, Error> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        .checked_add(1)
        .ok_or_else(|| Error::Store { detail: format!("{} is at its largest value", path.display()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_match_as_host_names_do() {
        let mut r = ReservedNames::default();
        r.add("VM".into(), Holder::Service);
        r.add("puppet.example.test.".into(), Holder::Service);
        for name in ["vm", "VM", "vm.", "Vm.", "puppet.example.test", "PUPPET.example.test."] {
            assert!(r.holder(name).is_some(), "{name}");
        }
        for name in ["vm..", "vm1", "example.test", ""] {
            assert!(r.holder(name).is_none(), "{name}");
        }
    }
}
