//! `vouch autosign`: Puppet Server's policy-based autosign executable. The decision, then
//! one-time use (a grant claims its attributes; a refusal that a trusted conductor vouched
//! for holds them for this key, since Puppet Server keeps and serves the refused CSR),
//! then the audit line, all before Puppet Server is answered.

use crate::authority::{claim_once, hold_refused, ReservedNames};
use crate::decision::{self, Grant, Refusal, Refused, Request};
use crate::encoding::csr;
use crate::error::Error;
use crate::policy::Policy;
use time::OffsetDateTime;

/// Judges the request body Puppet Server passed on stdin for `certname` (`None`: it was
/// larger than 1 MiB), records one-time use and appends the audit line.
pub fn judge(
    policy: &Policy,
    journal: Option<&dyn crate::store::ReplayJournal>,
    reserved: &ReservedNames,
    certname: &str,
    body: Option<&[u8]>,
    now: OffsetDateTime,
) -> Result<Result<Grant, Refused>, Error> {
    let outcome = match body {
        None => Err(Refused {
            reasons: vec![Refusal::CsrMalformed { detail: "the request body is larger than 1 MiB".into() }],
            conductor: None,
            held: None,
        }),
        Some(body) => match reserved.refusal(certname, csr::parse(body).ok().as_ref()) {
            Some(reason) => Err(Refused { reasons: vec![reason], conductor: None, held: None }),
            None => decision::decide(&Request { csr: body, certname }, policy, now),
        },
    };
    // One-time use: record the grant's nonce (or v1 signature) before answering.
    let outcome = match outcome {
        // Version 3: the template's use is counted first (once per instance, so the claim
        // that follows never spends a second one).
        Ok(grant) => match crate::authority::count_template_use(journal, grant, now)? {
            Ok(grant) => claim_once(journal, grant, crate::store::ClaimUse::Once, now)?,
            Err(refused) => Err(refused),
        },
        // Puppet Server keeps the refused CSR and serves it: its attributes become this key's.
        Err(refused) => Err(hold_refused(journal, refused, certname, now)?),
    };
    let line = crate::store::audit::decision_line(now, certname, outcome.as_ref(), "autosign");
    if let Some(log) = &policy.audit_log {
        // Chained like the CA's log; no checkpoints (the hook holds no CA key: Puppet Server is the CA).
        let chained = crate::store::audit::AuditLog::new(log);
        chained
            .append(&[line], None, time::OffsetDateTime::now_utc(), false)
            .map(|_| ())
            .map_err(|source| Error::Io { path: log.clone(), op: "append to", source })?;
    }
    Ok(outcome)
}
