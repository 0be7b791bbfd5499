//! The Puppet CA API v1 (`/puppet-ca/v1/…`) as Puppet Server 7 answers it, over an
//! [`Authority`]. No sockets, no TLS, no clock: a request (with the client's
//! certificate, already checked against the store) and the time go in, a response
//! and the log events come out. The HTTP skin (`serve::server`, `serve::http`) does the rest.
//!
//! `mod.rs` holds the types, the routing and the answers every endpoint shares; one file
//! per group of endpoints: `ca` (the CA bundle, the CRLs, expirations), `certificate`
//! (a node's certificate), `request` (certificate requests: submitted, read back),
//! `status` (the administrators' certificate_status and certificate_statuses), `sign` (an
//! administrator's signing: a decision again, or an approval), `renewal`.

mod ca;
mod certificate;
mod overrides;
mod renewal;
mod request;
mod sign;
mod status;

use crate::authority::{Authority, Presented};
use crate::error::Error;
use time::OffsetDateTime;

/// The Puppet version vouch answers as in `X-Puppet-Version` (what the agents here run).
pub const PUPPET_VERSION: &str = "7.23.0";
pub(super) const PREFIX: &str = "/puppet-ca/v1/";

/// Who is asking, as far as TLS and the store can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Client {
    /// No client certificate (bootstrap).
    Anonymous,
    /// A certificate of this CA that is current and unrevoked in the store.
    Known(Presented),
    /// A certificate that chains to this CA but is revoked, superseded, cleaned or expired.
    Rejected { reason: String },
}

/// A request, reduced to what the API looks at.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The raw query string (`state=requested`).
    pub query: String,
    pub body: Vec<u8>,
    pub if_modified_since: Option<OffsetDateTime>,
    /// Whether the client takes a gzip-compressed answer (`Accept-Encoding`; Puppet's agents do).
    pub accept_gzip: bool,
    pub client: Client,
    /// The client's address, and the buckets that bound the refused requests kept per
    /// address (`requests.kept_per_minute`); `None`: no such bound (a library caller).
    pub kept_rate: Option<(std::net::IpAddr, std::sync::Arc<crate::serve::rate::KeptRate>)>,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResponse {
    pub status: u16,
    pub content_type: &'static str,
    /// Shared, not copied: the CRLs of a large fleet are megabytes, handed out from memory.
    pub body: bytes::Bytes,
    pub last_modified: Option<OffsetDateTime>,
    /// The body is gzip-compressed (`Content-Encoding`).
    pub gzip: bool,
    /// The answer depends on `Accept-Encoding` (`Vary`), compressed or not.
    pub varies: bool,
    /// `Retry-After` in seconds (a 503 without one gets [`RETRY_AFTER_SECS`]).
    pub retry_after: Option<u64>,
}

impl ApiResponse {
    fn text(status: u16, body: impl Into<String>) -> Self {
        ApiResponse::bytes(status, "text/plain", body.into().into_bytes())
    }
    fn json(status: u16, value: &serde_json::Value) -> Self {
        ApiResponse::bytes(status, "application/json", value.to_string().into_bytes())
    }
    fn bytes(status: u16, content_type: &'static str, body: impl Into<bytes::Bytes>) -> Self {
        let (last_modified, gzip, varies, retry_after) = (None, false, false, None);
        ApiResponse { status, content_type, body: body.into(), last_modified, gzip, varies, retry_after }
    }
    fn empty(status: u16) -> Self {
        ApiResponse::bytes(status, "text/plain", bytes::Bytes::new())
    }
}

/// Something worth a log line besides the request itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `codes`: the refusal codes of `reasons`, in order (empty when granted).
    Decision {
        certname: String,
        granted: bool,
        serial: Option<String>,
        reasons: Vec<String>,
        codes: Vec<&'static str>,
    },
    Renewed {
        certname: String,
        old_serial: String,
        serial: String,
    },
    Admin {
        client: String,
        action: String,
        certname: String,
    },
    Denied {
        client: String,
        reason: String,
    },
    Failed {
        method: String,
        path: String,
        error: String,
    },
}

/// The event for a refused decision on `name`.
fn refused_event(name: &str, refused: &crate::decision::Refused) -> Event {
    Event::Decision {
        certname: name.to_string(),
        granted: false,
        serial: None,
        reasons: refused.tagged_reasons(),
        codes: refused.reasons.iter().map(|r| r.code()).collect(),
    }
}

/// Handles one request. Never panics on any input; internal failures become 500s
/// whose text names the failure (the agent logs it) and whose event says more.
pub fn handle(auth: &Authority, req: &ApiRequest, now: OffsetDateTime) -> (ApiResponse, Vec<Event>) {
    let mut events = Vec::new();
    let resp = match route(auth, req, now, &mut events) {
        Ok(r) => r,
        Err(e) => internal(&e, req, &mut events),
    };
    (resp, events)
}

/// The answer to a request that needs nothing but memory, without the blocking pool:
/// `GET certificate/NAME` of a certificate the store remembers storing (an agent fetching
/// the certificate it was just granted), and the CA bundle and the CRLs while their files
/// are unchanged (every bootstrap fetches both). `None`: [`handle`] it. The same answer
/// [`handle`] gives, and no event (these requests have none).
pub fn from_memory(
    auth: &Authority,
    method: &str,
    path: &str,
    if_modified_since: Option<OffsetDateTime>,
    accept_gzip: bool,
) -> Option<ApiResponse> {
    if method != "GET" {
        return None;
    }
    let rest = path.strip_prefix(PREFIX)?;
    if rest == "certificate/ca" {
        return ca::bundle_from_memory(auth, accept_gzip);
    }
    if rest == "certificate_revocation_list/ca" {
        return ca::crl_from_memory(auth, if_modified_since, accept_gzip);
    }
    certificate::remembered(auth, rest.strip_prefix("certificate/")?)
}

/// The seconds a 503 asks the client to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 5;

/// 503: the shared store is unreachable (or a concurrent writer won): nothing was done.
pub fn unavailable() -> ApiResponse {
    ApiResponse::text(
        503,
        "Service Unavailable: the CA's store is unreachable or busy; nothing was issued or changed, retry later",
    )
}

/// A failure inside vouch: the client learns only that; the log has the error, its
/// hint and the request (paths in the message would tell anyone the data directory).
fn internal(e: &Error, req: &ApiRequest, events: &mut Vec<Event>) -> ApiResponse {
    let mut detail = e.to_string();
    if let Some(h) = e.hint() {
        detail.push_str(&format!(" ({h})"));
    }
    if let Error::Limited(l) = e {
        events.push(Event::Denied { client: "-".into(), reason: l.to_string() });
        let text = format!(
            "{}: {l}; retry later",
            if l.status() == 429 { "Too Many Requests" } else { "Service Unavailable" }
        );
        return ApiResponse { retry_after: Some(l.retry_after()), ..ApiResponse::text(l.status(), text) };
    }
    if matches!(
        e,
        Error::StoreUnavailable { .. } | Error::StoreUnconfirmed { .. } | Error::StoreConflict { .. } | Error::Busy(_)
    ) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Request);
        events.push(Event::Failed { method: req.method.clone(), path: req.path.clone(), error: detail });
        return unavailable();
    }
    if matches!(
        e,
        Error::Store { .. }
            | Error::StoreDamaged { .. }
            | Error::CurrentMissing { .. }
            | Error::InventoryUnreadable { .. }
    ) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Request);
    }
    events.push(Event::Failed { method: req.method.clone(), path: req.path.clone(), error: detail });
    ApiResponse::text(500, "Internal Server Error: the CA could not complete this request; its log says why")
}

fn not_found(kind: &str, name: &str) -> ApiResponse {
    ApiResponse::text(404, format!("Could not find {kind} {}", shown(name)))
}

/// A name from a request as an answer quotes it: as given when it is printable ASCII, else
/// with every character that is not printable escaped (`\u{202e}`: a direction override or
/// a terminal escape never reaches a reader's screen raw).
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    if name.bytes().all(|b| b.is_ascii_graphic()) {
        name.into()
    } else {
        name.escape_debug().to_string().into()
    }
}

fn forbidden(req: &ApiRequest) -> ApiResponse {
    ApiResponse::text(
        403,
        format!(
            "Forbidden request: {} (method :{}). Please see the server logs for details.",
            shown(&req.path),
            req.method.to_ascii_lowercase()
        ),
    )
}

fn method_not_allowed(req: &ApiRequest) -> ApiResponse {
    ApiResponse::text(405, format!("Method Not Allowed: {} is not allowed on {}", req.method, shown(&req.path)))
}

/// A certname in a URL: Puppet's rules (lowercase, no path tricks).
fn certname_ok(name: &str) -> Result<(), ApiResponse> {
    crate::decision::check_certname(name).map_err(|p| ApiResponse::text(400, format!("Invalid certname {name:?}: {p}")))
}

fn route(
    auth: &Authority,
    req: &ApiRequest,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if req.path == "/status/v1/simple" || req.path == "/status/v1/simple/" {
        return Ok(ApiResponse::text(200, "running"));
    }
    let Some(rest) = req.path.strip_prefix(PREFIX) else {
        return Ok(ApiResponse::text(404, format!("Not Found: no route for {}", shown(&req.path))));
    };
    let (endpoint, name) = match rest.split_once('/') {
        Some((e, n)) => (e, Some(n)),
        None => (rest, None),
    };
    let m = req.method.as_str();
    match (endpoint, name) {
        ("certificate", Some("ca")) if m == "GET" => ca::bundle(auth, req),
        ("certificate_revocation_list", Some("ca")) if m == "GET" => ca::crl(auth, req),
        ("certificate", Some(n)) if m == "GET" => certificate::certificate(auth, n),
        // Admin only (Puppet agents never read it back): a pending request may carry good
        // attributes, and nobody else needs to see them.
        ("certificate_request", Some(n)) if m == "GET" => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(_) => request::request(auth, n),
        },
        ("certificate_request", Some(n)) if m == "PUT" => request::submit(auth, req, n, now, events),
        ("certificate_status", Some(n)) => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(who) => match m {
                "GET" => status::status_one(auth, n),
                "PUT" => status::status_put(auth, req, n, &who, now, events),
                "DELETE" => status::status_delete(auth, n, &who, now, events),
                _ => Ok(method_not_allowed(req)),
            },
        },
        ("certificate_statuses", Some(_)) => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(_) if m == "GET" => status::statuses(auth, &req.query),
            Ok(_) => Ok(method_not_allowed(req)),
        },
        ("classification_override", Some(n)) => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(_) => match m {
                "GET" => overrides::get(auth, n),
                "PUT" | "DELETE" => overrides::change(auth, req, n, now),
                _ => Ok(method_not_allowed(req)),
            },
        },
        ("certificate_renewal", None) if m == "POST" => renewal::renewal(auth, req, now, events),
        ("expirations", None) if m == "GET" => match &req.client {
            Client::Known(_) => ca::expirations(auth),
            _ => Ok(forbidden(req)),
        },
        ("certificate" | "certificate_revocation_list" | "certificate_request", Some(_))
        | ("certificate_renewal" | "expirations", None) => Ok(method_not_allowed(req)),
        _ => Ok(ApiResponse::text(404, format!("Not Found: no route for {}", shown(&req.path)))),
    }
}

/// The client, if it may administer the CA (`pp_cli_auth`, or listed in the policy).
fn admin(auth: &Authority, req: &ApiRequest, events: &mut Vec<Event>) -> Result<String, ApiResponse> {
    match &req.client {
        Client::Known(p) if p.cli_auth || auth.policy.admin_fingerprints.contains(&p.fingerprint) => {
            Ok(p.certname.clone())
        }
        Client::Known(p) => {
            events.push(Event::Denied { client: p.certname.clone(), reason: "not an administrator".into() });
            Err(forbidden(req))
        }
        Client::Rejected { reason } => {
            events.push(Event::Denied { client: "-".into(), reason: reason.clone() });
            Err(forbidden(req))
        }
        Client::Anonymous => {
            events.push(Event::Denied { client: "-".into(), reason: "no client certificate".into() });
            Err(forbidden(req))
        }
    }
}
