//! `GET certificate/NAME`: a node's current certificate.

use super::{certname_ok, not_found, ApiResponse};
use crate::authority::Authority;
use crate::error::Error;
use crate::store::State;

pub(super) fn certificate(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if certname_ok(name).is_err() {
        return Ok(not_found("certificate", name));
    }
    // Nodes' certificates only. The service's certificate (presented in every TLS handshake
    // anyway) and the administrators' are not handed out here: an agent whose certname is one
    // of their names (an agent on the service's own host, taking the host name) would download
    // a certificate for another key and fail on it at every retry ("does not match its private
    // key"); with 404 it reports the certificate as not signed, and its request's 400 and the
    // server's log say why.
    if let Some(reason) = auth.reserved.refusal(name, None) {
        return Ok(reserved_not_found(name, &reason));
    }
    Ok(match auth.certificate(name)? {
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
    })
}

fn reserved_not_found(name: &str, reason: &crate::decision::Refusal) -> ApiResponse {
    ApiResponse::text(404, format!("Could not find certificate {name}: {reason}. Hint: {}", reason.hint()))
}
