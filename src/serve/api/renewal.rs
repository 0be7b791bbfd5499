//! `POST certificate_renewal`: a node renews its own certificate (same key, same vouched
//! attributes).

use super::{forbidden, ApiRequest, ApiResponse, Client, Event};
use crate::authority::Authority;
use crate::error::Error;
use time::OffsetDateTime;

pub(super) fn renewal(
    auth: &Authority,
    req: &ApiRequest,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    let p = match &req.client {
        Client::Known(p) => p,
        Client::Rejected { reason } => {
            events.push(Event::Denied { client: "-".into(), reason: reason.clone() });
            return Ok(forbidden(req));
        }
        Client::Anonymous => {
            return Ok(ApiResponse::text(400, "Bad Request: a certificate renewal needs the client's certificate"));
        }
    };
    // Not too often: every renewal puts the old certificate on the CRL.
    if let Some((rec, _)) = auth.certificate(&p.certname)? {
        let backdate = time::Duration::try_from(auth.policy.profile.backdate).unwrap_or(time::Duration::DAY);
        let min_age = time::Duration::try_from(auth.policy.renewal_min_age).unwrap_or(time::Duration::HOUR);
        let issued_at =
            crate::encoding::time::parse_rfc3339(&rec.not_before).ok().and_then(|t| t.checked_add(backdate));
        if issued_at.is_some_and(|t| now - t < min_age) {
            events.push(Event::Denied { client: p.certname.clone(), reason: "renewal too soon".into() });
            return Ok(ApiResponse::text(
                429,
                format!(
                    "Too Many Requests: {} was issued less than {} ago (issuance.renewal_min_age); renew later",
                    p.certname,
                    crate::policy::format_duration(auth.policy.renewal_min_age)
                ),
            ));
        }
    }
    // The certificate renews itself only: same certname, same key, same classification.
    match auth.renew_if_current(&p.certname, Some(&p.serial), now) {
        Ok(issued) => {
            events.push(Event::Renewed {
                certname: p.certname.clone(),
                old_serial: p.serial.clone(),
                serial: issued.serial_hex.clone(),
            });
            Ok(ApiResponse::bytes(200, "text/plain", issued.pem.into_bytes()))
        }
        Err(Error::NotValid { detail, .. }) => {
            events.push(Event::Denied { client: p.certname.clone(), reason: detail.clone() });
            Ok(ApiResponse::text(409, format!("Conflict: cannot renew {}: {detail}", p.certname)))
        }
        // Revoked, expired, or not a node's: "cannot renew NAME: its certificate (serial S) …".
        Err(e @ Error::NotRenewable { .. }) => {
            events.push(Event::Denied { client: p.certname.clone(), reason: e.to_string() });
            Ok(ApiResponse::text(409, format!("Conflict: {e}")))
        }
        // The conductor that vouched is no longer acceptable (revoked, untrusted, out of scope).
        Err(Error::Refused { refused, .. }) => {
            let reasons = refused.tagged_reasons();
            events.push(Event::Denied { client: p.certname.clone(), reason: reasons.join("; ") });
            Ok(ApiResponse::text(
                403,
                format!(
                    "Forbidden: {} cannot be renewed: the conductor that vouched for it is no longer accepted",
                    p.certname
                ),
            ))
        }
        Err(e) => Err(e),
    }
}
