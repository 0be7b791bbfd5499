//! `PUT certificate_status/NAME {"desired_state":"signed"[, "cert_ttl": SECONDS]}`: an
//! administrator signs a pending request (`puppetserver ca sign`). A request carrying a
//! conductor's attributes is decided again by the policy, as it was when it came; one
//! carrying none (a node no conductor launched) is an administrator's approval
//! ([`Authority::approve`]): only under `issuance.admin_approval`, with the classification an
//! administrator set for the name. Answers as Puppet Server does: 204 signed, 404 nothing
//! under the name, 409 why not (with the reason's code and hint), 400 a bad `cert_ttl`.

use super::{not_found, refused_event, ApiResponse, Event};
use crate::authority::{carries_attributes, Approval, Authority, IssueOutcome};
use crate::error::{Error, NotApprovable};
use crate::store::State;
use std::time::Duration;
use time::OffsetDateTime;

/// `cert_ttl` from the body: absent (or null) is the policy's lifetime; anything but a
/// non-negative integer is refused with Puppet Server's words.
pub(super) fn cert_ttl(body: &serde_json::Value, name: &str) -> Result<Option<Duration>, ApiResponse> {
    match body.get("cert_ttl") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(secs) => Ok(Some(Duration::from_secs(secs))),
            None => {
                let shown: String =
                    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()).chars().take(40).collect();
                // Digits that are no u64 (too large), or a number sent as text: Puppet's words
                // would say "not an integer" of an integer.
                let digits = !shown.is_empty() && shown.bytes().all(|b| b.is_ascii_digit());
                let why = if digits {
                    format!(
                        "must be a number of seconds from 1 to the policy's lifetime (issuance.validity), not \"{shown}\""
                    )
                } else {
                    format!("must be an integer, not \"{shown}\"")
                };
                Err(ApiResponse::text(400, format!("cert_ttl specified for host {name} {why}")))
            }
        },
    }
}

/// Signs `name`'s pending request for the administrator `who`.
pub(super) fn sign(
    auth: &Authority,
    name: &str,
    who: &str,
    ttl: Option<Duration>,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    let Some((_, pem)) = auth.request(name)? else {
        return Ok(match auth.certificate(name)? {
            Some((rec, _)) if rec.state == State::Issued => {
                ApiResponse::text(409, format!("{name} is already signed (serial {})", rec.serial))
            }
            _ => not_found("certificate_request", name),
        });
    };
    let bare = crate::encoding::csr::parse(&pem).is_ok_and(|c| !carries_attributes(&c));
    if !bare {
        return vouched(auth, name, &pem, ttl, now, events);
    }
    match auth.approve(&Approval { certname: name, by: who, ttl, fingerprint: None }, now) {
        Ok(issued) => {
            events.push(Event::Decision {
                certname: name.to_string(),
                granted: true,
                serial: Some(issued.serial_hex),
                reasons: vec![format!("approved by the administrator {who}")],
                codes: vec![],
            });
            Ok(ApiResponse::empty(204))
        }
        Err(Error::NotApproved { why, .. }) => Ok(not_approved(name, &why, events)),
        Err(Error::Classification { error, .. }) => {
            let why = format!("the classification set for it is unusable: {error}");
            Ok(ApiResponse::text(409, format!("Conflict: {name} cannot be signed: {why}")))
        }
        Err(e) => Err(e),
    }
}

/// The answer to an approval refused for `why`: 400 for a lifetime beyond the policy's (a
/// bad parameter, as Puppet Server answers a bad `cert_ttl`), else 409; the reason's code,
/// words and hint in the body, and a refused decision in the log.
fn not_approved(name: &str, why: &NotApprovable, events: &mut Vec<Event>) -> ApiResponse {
    let status = if matches!(why, NotApprovable::TtlTooLong { .. }) { 400 } else { 409 };
    let code = why.code();
    events.push(Event::Decision {
        certname: name.to_string(),
        granted: false,
        serial: None,
        reasons: vec![format!("{code}: {why}")],
        codes: vec![code],
    });
    let word = if status == 400 { "Bad Request" } else { "Conflict" };
    ApiResponse::text(status, format!("{word}: {name} cannot be signed: {code}: {why}. Hint: {}", why.hint()))
}

/// A request carrying a conductor's attributes: judged again by the current policy (after
/// an administrator fixed it, say). vouch never signs what a conductor's refused word
/// asked for. Its alt names too: only a server's scope allows them, never an administrator
/// (there is no `--allow-dns-alt-names` here).
fn vouched(
    auth: &Authority,
    name: &str,
    pem: &[u8],
    ttl: Option<Duration>,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(Error::NotApproved { why, .. }) = auth.check_ttl(name, ttl) {
        return Ok(not_approved(name, &why, events));
    }
    match auth.issue_with_ttl(pem, Some(name), ttl, now)? {
        IssueOutcome::Issued(i) => {
            events.push(Event::Decision {
                certname: name.to_string(),
                granted: true,
                serial: Some(i.serial_hex),
                reasons: vec![],
                codes: vec![],
            });
            Ok(ApiResponse::empty(204))
        }
        IssueOutcome::Refused(r) => {
            let body = format!("Conflict: {name} cannot be signed: {}", r.tagged_reasons().join("; "));
            events.push(refused_event(name, &r));
            Ok(ApiResponse::text(409, body))
        }
    }
}
