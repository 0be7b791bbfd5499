//! The CA's public documents: its certificate bundle, its CRLs (master CA and root) and
//! when they expire.

use super::{ApiRequest, ApiResponse};
use crate::authority::documents::Document;
use crate::authority::Authority;
use crate::error::Error;
use time::OffsetDateTime;

/// `GET certificate/ca`: the CA bundle, from memory ([`crate::authority::documents`]).
pub(super) fn bundle(auth: &Authority, req: &ApiRequest) -> Result<ApiResponse, Error> {
    Ok(document(auth.ca_document.get()?, req.accept_gzip, None))
}

/// [`bundle`] when it is in memory and current, without any reading: `None` otherwise.
pub(super) fn bundle_from_memory(auth: &Authority, accept_gzip: bool) -> Option<ApiResponse> {
    Some(document(auth.ca_document.current()?, accept_gzip, None))
}

/// [`crl`] when the CRLs are in memory and current, without any reading: `None` otherwise.
pub(super) fn crl_from_memory(
    auth: &Authority,
    if_modified_since: Option<OffsetDateTime>,
    accept_gzip: bool,
) -> Option<ApiResponse> {
    Some(crl_answer(auth.crl_document.current()?, if_modified_since, accept_gzip))
}

/// `GET certificate_revocation_list/ca`: the master CA's and the root's CRLs, from memory;
/// 304 when unchanged since the agent's copy (`If-Modified-Since`).
pub(super) fn crl(auth: &Authority, req: &ApiRequest) -> Result<ApiResponse, Error> {
    Ok(crl_answer(auth.crl_document.get()?, req.if_modified_since, req.accept_gzip))
}

fn crl_answer(doc: Document, if_modified_since: Option<OffsetDateTime>, accept_gzip: bool) -> ApiResponse {
    // The answer holds the master CA's and the root's CRLs: it changed when either did.
    if let (Some(since), Some(modified)) = (if_modified_since, doc.modified) {
        if modified <= since {
            return ApiResponse { last_modified: Some(modified), varies: true, ..ApiResponse::empty(304) };
        }
    }
    let modified = doc.modified;
    document(doc, accept_gzip, modified)
}

/// A document's answer: compressed for a client that takes gzip, as Puppet Server answers.
fn document(doc: Document, accept_gzip: bool, last_modified: Option<OffsetDateTime>) -> ApiResponse {
    let (body, gzip) = if accept_gzip { (doc.gzip, true) } else { (doc.plain, false) };
    ApiResponse { last_modified, gzip, varies: true, ..ApiResponse::bytes(200, "text/plain", body) }
}

pub(super) fn expirations(auth: &Authority) -> Result<ApiResponse, Error> {
    let mut ca_certs = serde_json::Map::new();
    let bundle = auth.ca_document.get()?.plain;
    for der in crate::encoding::pem::find_all(&bundle, "CERTIFICATE").unwrap_or_default() {
        if let Ok((_, c)) = x509_parser::parse_x509_certificate(&der) {
            ca_certs.insert(
                c.subject().to_string(),
                crate::encoding::time::format_puppet(c.validity().not_after.to_datetime()).into(),
            );
        }
    }
    let mut crls = serde_json::Map::new();
    for der in crate::encoding::pem::find_all(&auth.crl_document.get()?.plain, "X509 CRL").unwrap_or_default() {
        if let Ok((_, c)) = x509_parser::parse_x509_crl(&der) {
            if let Some(next) = c.next_update() {
                crls.insert(c.issuer().to_string(), crate::encoding::time::format_puppet(next.to_datetime()).into());
            }
        }
    }
    Ok(ApiResponse::json(200, &serde_json::json!({ "ca-certs": ca_certs, "crls": crls })))
}
