//! `certificate_request/NAME`: a node submits its CSR (PUT, decided at once); an
//! administrator reads a pending one back (GET).

use super::{certname_ok, not_found, refused_event, ApiRequest, ApiResponse, Event};
use crate::authority::{Authority, IssueOutcome, Seen};
use crate::error::Error;
use crate::store::State;
use time::OffsetDateTime;

pub(super) fn request(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if certname_ok(name).is_err() {
        return Ok(not_found("certificate_request", name));
    }
    Ok(match auth.request(name)? {
        Some((_, pem)) => ApiResponse::bytes(200, "text/plain", pem),
        None => not_found("certificate_request", name),
    })
}

/// The answer to a request under a reserved name: 400, as Puppet Server answers a name it
/// will not sign, with what the agent's operator must change (an agent on the service's own
/// host takes the host name as its certname unless told otherwise).
fn reserved_answer(name: &str, reason: &crate::decision::Refusal) -> ApiResponse {
    ApiResponse::text(400, format!("{reason}; ignoring certificate request for {name}. Hint: {}", reason.hint()))
}

/// `PUT certificate_request/NAME`: the checks Puppet Server makes before any decision, then
/// the decision (and, when granted, the certificate) in one step.
pub(super) fn submit(
    auth: &Authority,
    req: &ApiRequest,
    name: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    if let Some(resp) = reserved_name(auth, name, events) {
        return Ok(resp);
    }
    // With a store whose writes compare (LDAP), the one read of the name before the
    // decision: the check below and, if granted, admission take it (Authority::see).
    let seen = match auth.policy.on_existing {
        crate::policy::OnExisting::Refuse => auth.see(name)?,
        _ => None,
    };
    if let Some(resp) = already_signed(auth, name, seen.as_ref(), now)? {
        return Ok(resp);
    }
    let parsed = match parse_body(&req.body, name) {
        Ok(c) => c,
        Err(resp) => return Ok(resp),
    };
    // A node with a valid certificate that submits again gets Puppet's answer
    // (400: the agent then just downloads its certificate); the policy's
    // on_existing rule (refuse or supersede) is applied by the decision below.
    // A refused request under a new name is kept only within its client address's rate (a grant
    // never asks; a name already pending is replaced).
    let per_minute = auth.policy.requests.kept_per_minute;
    let gate = || match &req.kept_rate {
        Some((ip, rate)) => rate.take(*ip, per_minute, std::time::Instant::now()),
        None => Ok(()),
    };
    let outcome = auth.issue_gated(&req.body, Some(parsed), Some(name), now, &gate, seen)?;
    Ok(answer(name, outcome, events))
}

/// The service's own names and the administrators' are never a node's (the names on the
/// certificates actually presented, whatever --server-name says now): refused at once.
fn reserved_name(auth: &Authority, name: &str, events: &mut Vec<Event>) -> Option<ApiResponse> {
    let reason = auth.reserved_refusal(name, None)?;
    events.push(Event::Decision {
        certname: name.to_string(),
        granted: false,
        serial: None,
        reasons: vec![format!("[{}] {reason}", reason.code())],
        codes: vec![reason.code()],
    });
    Some(reserved_answer(name, &reason))
}

/// A name with a valid certificate: Puppet's answer, before any decision and without
/// keeping anything (else anyone could hide a signed node behind a junk request).
/// With on_existing = supersede the decision judges a vouched replacement.
/// This read is lock-free, a shortcut only: a certificate granted meanwhile (racing
/// requests for one name) is found again under the store's lock, where a refusal is
/// kept or not (Authority::refuse), and answered by [`answer`] as this one. `seen`: the name
/// as already read, else it is read here.
fn already_signed(
    auth: &Authority,
    name: &str,
    seen: Option<&Seen>,
    now: OffsetDateTime,
) -> Result<Option<ApiResponse>, Error> {
    if auth.policy.on_existing != crate::policy::OnExisting::Refuse {
        return Ok(None);
    }
    let rec = match seen {
        Some(s) => s.current().map(|c| c.record.clone()),
        None => auth.certificate(name)?.map(|(rec, _)| rec),
    };
    let Some(rec) = rec else { return Ok(None) };
    let valid = rec.state == State::Issued
        && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
    Ok(valid.then(|| signed_answer(name)))
}

/// 400, as Puppet Server answers a node that already has a signed certificate.
fn signed_answer(name: &str) -> ApiResponse {
    ApiResponse::text(400, format!("{name} already has a signed certificate; ignoring certificate request"))
}

/// The request's body as a CSR, or the 400 that says why it is none.
fn parse_body(body: &[u8], name: &str) -> Result<crate::encoding::csr::Csr, ApiResponse> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiResponse::text(400, "The certificate request is empty"));
    }
    crate::encoding::csr::parse(body)
        .map_err(|e| ApiResponse::text(400, format!("The certificate request for {name} is not a valid CSR: {e}")))
}

/// The answer to a decided request, and its decision event.
fn answer(name: &str, outcome: IssueOutcome, events: &mut Vec<Event>) -> ApiResponse {
    match outcome {
        IssueOutcome::Issued(issued) => {
            events.push(Event::Decision {
                certname: name.to_string(),
                granted: true,
                serial: Some(issued.serial_hex),
                reasons: Vec::new(),
                codes: Vec::new(),
            });
            ApiResponse::empty(200)
        }
        IssueOutcome::Refused(refused) => {
            let exists =
                refused.reasons.iter().any(|r| matches!(r, crate::decision::Refusal::CertificateExists { .. }));
            let reserved =
                refused.reasons.iter().find(|r| matches!(r, crate::decision::Refusal::NameReserved { .. })).cloned();
            events.push(refused_event(name, &refused));
            if let Some(reason) = reserved {
                return reserved_answer(name, &reason);
            }
            // As Puppet Server with a refusing autosign hook: 200, the request stays
            // pending, the reasons are in the server's log and in certificate_status
            // (admins only); the node learns nothing it could use to probe the policy.
            if exists {
                return signed_answer(name);
            }
            ApiResponse::empty(200)
        }
    }
}
