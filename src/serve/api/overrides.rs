//! `classification_override/NAME` (GET, PUT, DELETE): an administrator's classification for
//! a node, which `vouch enc` prints instead of its certificate's. Administrators only; a
//! stale writer (`expect_revision` no longer current) gets 409 and the current revision.
//!
//! PUT body: `{"classification": "<YAML or JSON text>", "expect_revision": N}` (the revision
//! is optional: without it the write applies to whatever is current). DELETE takes
//! `?expect_revision=N` likewise.

use super::{certname_ok, ApiRequest, ApiResponse};
use crate::authority::Authority;
use crate::error::Error;
use time::OffsetDateTime;

fn state(o: Option<crate::store::Override>, name: &str) -> serde_json::Value {
    match o {
        Some(o) => serde_json::json!({
            "name": name, "classification": o.classification, "revision": o.revision, "time": o.time,
        }),
        None => serde_json::json!({ "name": name, "classification": null, "revision": 0 }),
    }
}

pub(super) fn get(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    Ok(ApiResponse::json(200, &state(auth.get_override(name)?, name)))
}

/// PUT (set) or DELETE (clear).
pub(super) fn change(
    auth: &Authority,
    req: &ApiRequest,
    name: &str,
    now: OffsetDateTime,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    let (classification, expect) = if req.method == "PUT" {
        let body: serde_json::Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => return Ok(ApiResponse::text(400, format!("Bad Request: the body is not JSON: {e}"))),
        };
        let Some(text) = body["classification"].as_str() else {
            return Ok(ApiResponse::text(400, "Bad Request: give {\"classification\": \"<YAML or JSON text>\"}"));
        };
        let expect = match &body["expect_revision"] {
            serde_json::Value::Null => None,
            v => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    return Ok(ApiResponse::text(400, "Bad Request: expect_revision is a number (0: none set yet)"))
                }
            },
        };
        (Some(text.to_string()), expect)
    } else {
        let expect = req.query.split('&').find_map(|kv| kv.strip_prefix("expect_revision="));
        let expect = match expect.map(str::parse::<u64>) {
            None => None,
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => return Ok(ApiResponse::text(400, "Bad Request: expect_revision is a number")),
        };
        (None, expect)
    };
    match auth.set_override(name, classification.as_deref(), expect, now) {
        Ok(o) => Ok(ApiResponse::json(200, &state(Some(o), name))),
        Err(Error::StoreConflict { what }) => {
            let mut v = state(auth.get_override(name)?, name);
            v["error"] = format!("conflict: {what}").into();
            Ok(ApiResponse::json(409, &v))
        }
        Err(Error::Classification { error, .. }) => {
            Ok(ApiResponse::text(400, format!("Bad Request: the classification is refused: {error}")))
        }
        Err(e) => Err(e),
    }
}
