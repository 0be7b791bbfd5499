//! The CA's public documents: its certificate bundle, its CRLs (master CA and root) and
//! when they expire.

use super::{ApiRequest, ApiResponse};
use crate::authority::Authority;
use crate::error::Error;
use time::OffsetDateTime;

pub(super) fn read_file(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    let path = auth.dir.file(name);
    let body = std::fs::read(&path).map_err(|source| Error::Io { path, op: "read", source })?;
    Ok(ApiResponse { status: 200, content_type: "text/plain", body, last_modified: None })
}

pub(super) fn crl(auth: &Authority, req: &ApiRequest) -> Result<ApiResponse, Error> {
    // The answer holds the master CA's and the root's CRLs: it changed when either did.
    let mtime = |name: &str| {
        std::fs::metadata(auth.dir.file(name))
            .and_then(|m| m.modified())
            .ok()
            .map(OffsetDateTime::from)
            .map(|t| t.replace_nanosecond(0).unwrap_or(t))
    };
    let modified = match (mtime("ca_crl.pem"), mtime(crate::issuance::bootstrap::ROOT_CRL)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if let (Some(since), Some(modified)) = (req.if_modified_since, modified) {
        if modified <= since {
            return Ok(ApiResponse { last_modified: Some(modified), ..ApiResponse::empty(304) });
        }
    }
    let body = auth.crl_bundle()?.into_bytes();
    Ok(ApiResponse { status: 200, content_type: "text/plain", body, last_modified: modified })
}

pub(super) fn expirations(auth: &Authority) -> Result<ApiResponse, Error> {
    let mut ca_certs = serde_json::Map::new();
    let bundle = std::fs::read(auth.dir.file(crate::issuance::bootstrap::CA_BUNDLE)).map_err(|source| Error::Io {
        path: auth.dir.file(crate::issuance::bootstrap::CA_BUNDLE),
        op: "read",
        source,
    })?;
    for der in crate::encoding::pem::find_all(&bundle, "CERTIFICATE").unwrap_or_default() {
        if let Ok((_, c)) = x509_parser::parse_x509_certificate(&der) {
            ca_certs.insert(
                c.subject().to_string(),
                crate::encoding::time::format_puppet(c.validity().not_after.to_datetime()).into(),
            );
        }
    }
    let mut crls = serde_json::Map::new();
    for der in crate::encoding::pem::find_all(auth.crl_bundle()?.as_bytes(), "X509 CRL").unwrap_or_default() {
        if let Ok((_, c)) = x509_parser::parse_x509_crl(&der) {
            if let Some(next) = c.next_update() {
                crls.insert(c.issuer().to_string(), crate::encoding::time::format_puppet(next.to_datetime()).into());
            }
        }
    }
    Ok(ApiResponse::json(200, &serde_json::json!({ "ca-certs": ca_certs, "crls": crls })))
}
