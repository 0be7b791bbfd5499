//! `GET certificate/NAME`: a node's current certificate.

use super::{certname_ok, not_found, ApiResponse};
use crate::authority::Authority;
use crate::error::Error;
use crate::store::State;

pub(super) fn certificate(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if let Some(resp) = refused_by_name(auth, name) {
        return Ok(resp);
    }
    Ok(answer(auth, name, auth.certificate(name)?))
}

/// The same answer as [`certificate`] from what the store remembers (no I/O that can wait);
/// `None` if it does not remember `name`.
pub(super) fn remembered(auth: &Authority, name: &str) -> Option<ApiResponse> {
    if let Some(resp) = refused_by_name(auth, name) {
        return Some(resp);
    }
    let current = auth.store.remembered_current(name)?;
    Some(answer(auth, name, Some((current.record, current.pem))))
}

/// 404 for a name no node can have, before the store is asked.
fn refused_by_name(auth: &Authority, name: &str) -> Option<ApiResponse> {
    if certname_ok(name).is_err() {
        return Some(not_found("certificate", name));
    }
    // Nodes' certificates only. The service's certificate (presented in every TLS handshake
    // anyway) and the administrators' are not handed out here: an agent whose certname is one
    // of their names (an agent on the service's own host, taking the host name) would download
    // a certificate for another key and fail on it at every retry ("does not match its private
    // key"); with 404 it reports the certificate as not signed, and its request's 400 and the
    // server's log say why.
    auth.reserved_refusal(name, None).map(|reason| reserved_not_found(name, &reason))
}

/// The answer for the certname's current certificate as the store has it.
fn answer(auth: &Authority, name: &str, current: Option<(crate::store::CertRecord, String)>) -> ApiResponse {
    match current {
        Some((rec, pem)) if rec.state == State::Issued => match auth.protected(&rec, &pem) {
            Some(holder) => {
                let reason = crate::decision::Refusal::NameReserved {
                    certname: name.to_string(),
                    name: name.to_string(),
                    holder: holder.to_string(),
                };
                reserved_not_found(name, &reason)
            }
            // Only a current, unrevoked certificate: a node whose old certificate was revoked and
            // that asked again must wait for the new decision, not receive the revoked one.
            None => ApiResponse::bytes(200, "text/plain", pem.into_bytes()),
        },
        _ => not_found("certificate", name),
    }
}

fn reserved_not_found(name: &str, reason: &crate::decision::Refusal) -> ApiResponse {
    ApiResponse::text(
        404,
        format!("Could not find certificate {}: {reason}. Hint: {}", super::shown(name), reason.hint()),
    )
}
