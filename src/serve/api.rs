//! The Puppet CA API v1 (`/puppet-ca/v1/…`) as Puppet Server 7 answers it, over an
//! [`Authority`]. No sockets, no TLS, no clock: a request (with the client's
//! certificate, already checked against the store) and the time go in, a response
//! and the log events come out. The HTTP skin in `serve::http` does the rest.

use crate::authority::{Authority, IssueOutcome, Presented};
use crate::error::Error;
use crate::store::State;
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
    pub client: Client,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub last_modified: Option<OffsetDateTime>,
}

impl ApiResponse {
    fn text(status: u16, body: impl Into<String>) -> Self {
        ApiResponse { status, content_type: "text/plain", body: body.into().into_bytes(), last_modified: None }
    }
    fn json(status: u16, value: &serde_json::Value) -> Self {
        ApiResponse {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
            last_modified: None,
        }
    }
    fn empty(status: u16) -> Self {
        ApiResponse { status, content_type: "text/plain", body: Vec::new(), last_modified: None }
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

/// A failure inside vouch: the client learns only that; the log has the error, its
/// hint and the request (paths in the message would tell anyone the data directory).
fn internal(e: &Error, req: &ApiRequest, events: &mut Vec<Event>) -> ApiResponse {
    let mut detail = e.to_string();
    if let Some(h) = e.hint() {
        detail.push_str(&format!(" ({h})"));
    }
    if matches!(e, Error::Store { .. }) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Request);
    }
    events.push(Event::Failed { method: req.method.clone(), path: req.path.clone(), error: detail });
    ApiResponse::text(500, "Internal Server Error: the CA could not complete this request; its log says why")
}

fn not_found(kind: &str, name: &str) -> ApiResponse {
    ApiResponse::text(404, format!("Could not find {kind} {name}"))
}

fn forbidden(req: &ApiRequest) -> ApiResponse {
    ApiResponse::text(
        403,
        format!(
            "Forbidden request: {} (method :{}). Please see the server logs for details.",
            req.path,
            req.method.to_ascii_lowercase()
        ),
    )
}

fn method_not_allowed(req: &ApiRequest) -> ApiResponse {
    ApiResponse::text(405, format!("Method Not Allowed: {} is not allowed on {}", req.method, req.path))
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
        return Ok(ApiResponse::text(404, format!("Not Found: no route for {}", req.path)));
    };
    let (endpoint, name) = match rest.split_once('/') {
        Some((e, n)) => (e, Some(n)),
        None => (rest, None),
    };
    let m = req.method.as_str();
    match (endpoint, name) {
        ("certificate", Some("ca")) if m == "GET" => read_file(auth, crate::issuance::bootstrap::CA_BUNDLE),
        ("certificate_revocation_list", Some("ca")) if m == "GET" => crl(auth, req),
        ("certificate", Some(n)) if m == "GET" => certificate(auth, n),
        // Admin only (Puppet agents never read it back): a pending request may carry good
        // attributes, and nobody else needs to see them.
        ("certificate_request", Some(n)) if m == "GET" => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(_) => request(auth, n),
        },
        ("certificate_request", Some(n)) if m == "PUT" => submit(auth, req, n, now, events),
        ("certificate_status", Some(n)) => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(who) => match m {
                "GET" => status_one(auth, n),
                "PUT" => status_put(auth, req, n, &who, now, events),
                "DELETE" => status_delete(auth, n, &who, now, events),
                _ => Ok(method_not_allowed(req)),
            },
        },
        ("certificate_statuses", Some(_)) => match admin(auth, req, events) {
            Err(resp) => Ok(resp),
            Ok(_) if m == "GET" => statuses(auth, &req.query),
            Ok(_) => Ok(method_not_allowed(req)),
        },
        ("certificate_renewal", None) if m == "POST" => renewal(auth, req, now, events),
        ("expirations", None) if m == "GET" => match &req.client {
            Client::Known(_) => expirations(auth),
            _ => Ok(forbidden(req)),
        },
        ("certificate" | "certificate_revocation_list" | "certificate_request", Some(_))
        | ("certificate_renewal" | "expirations", None) => Ok(method_not_allowed(req)),
        _ => Ok(ApiResponse::text(404, format!("Not Found: no route for {}", req.path))),
    }
}

fn read_file(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    let path = auth.dir.file(name);
    let body = std::fs::read(&path).map_err(|source| Error::Io { path, op: "read", source })?;
    Ok(ApiResponse { status: 200, content_type: "text/plain", body, last_modified: None })
}

fn crl(auth: &Authority, req: &ApiRequest) -> Result<ApiResponse, Error> {
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

fn certificate(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
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
            None => {
                ApiResponse { status: 200, content_type: "text/plain", body: pem.into_bytes(), last_modified: None }
            }
        },
        _ => not_found("certificate", name),
    })
}

fn request(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if certname_ok(name).is_err() {
        return Ok(not_found("certificate_request", name));
    }
    Ok(match auth.request(name)? {
        Some((_, pem)) => ApiResponse { status: 200, content_type: "text/plain", body: pem, last_modified: None },
        None => not_found("certificate_request", name),
    })
}

/// The answer to a request under a reserved name: 400, as Puppet Server answers a name it
/// will not sign, with what the agent's operator must change (an agent on the service's own
/// host takes the host name as its certname unless told otherwise).
fn reserved_answer(name: &str, reason: &crate::decision::Refusal) -> ApiResponse {
    ApiResponse::text(400, format!("{reason}; ignoring certificate request for {name}. Hint: {}", reason.hint()))
}

fn reserved_not_found(name: &str, reason: &crate::decision::Refusal) -> ApiResponse {
    ApiResponse::text(404, format!("Could not find certificate {name}: {reason}. Hint: {}", reason.hint()))
}

fn submit(
    auth: &Authority,
    req: &ApiRequest,
    name: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    // The service's own names and the administrators' are never a node's (the names on the
    // certificates actually presented, whatever --server-name says now).
    if let Some(reason) = auth.reserved.refusal(name, None) {
        events.push(Event::Decision {
            certname: name.to_string(),
            granted: false,
            serial: None,
            reasons: vec![format!("[{}] {reason}", reason.code())],
            codes: vec![reason.code()],
        });
        return Ok(reserved_answer(name, &reason));
    }
    // A name with a valid certificate: Puppet's answer, before any decision and without
    // keeping anything (else anyone could hide a signed node behind a junk request).
    // With on_existing = supersede the decision below judges a vouched replacement.
    // This read is lock-free, a shortcut only: a certificate granted meanwhile (racing
    // requests for one name) is found again under the store's lock, where a refusal is
    // kept or not (Authority::refuse), and answered below as this one.
    if auth.policy.on_existing == crate::policy::OnExisting::Refuse {
        if let Some((rec, _)) = auth.certificate(name)? {
            let valid = rec.state == State::Issued
                && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now);
            if valid {
                return Ok(ApiResponse::text(
                    400,
                    format!("{name} already has a signed certificate; ignoring certificate request"),
                ));
            }
        }
    }
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ApiResponse::text(400, "The certificate request is empty"));
    }
    let parsed = match crate::encoding::csr::parse(&req.body) {
        Ok(c) => c,
        Err(e) => {
            return Ok(ApiResponse::text(400, format!("The certificate request for {name} is not a valid CSR: {e}")))
        }
    };
    // A node with a valid certificate that submits again gets Puppet's answer
    // (400: the agent then just downloads its certificate); the policy's
    // on_existing rule (refuse or supersede) is applied by the decision below.
    match auth.issue_parsed(&req.body, Some(parsed), Some(name), now)? {
        IssueOutcome::Issued(issued) => {
            events.push(Event::Decision {
                certname: name.to_string(),
                granted: true,
                serial: Some(issued.serial_hex),
                reasons: Vec::new(),
                codes: Vec::new(),
            });
            Ok(ApiResponse::empty(200))
        }
        IssueOutcome::Refused(refused) => {
            let exists =
                refused.reasons.iter().any(|r| matches!(r, crate::decision::Refusal::CertificateExists { .. }));
            let reserved =
                refused.reasons.iter().find(|r| matches!(r, crate::decision::Refusal::NameReserved { .. })).cloned();
            events.push(refused_event(name, &refused));
            if let Some(reason) = reserved {
                return Ok(reserved_answer(name, &reason));
            }
            // As Puppet Server with a refusing autosign hook: 200, the request stays
            // pending, the reasons are in the server's log and in certificate_status
            // (admins only); the node learns nothing it could use to probe the policy.
            if exists {
                return Ok(ApiResponse::text(
                    400,
                    format!("{name} already has a signed certificate; ignoring certificate request"),
                ));
            }
            Ok(ApiResponse::empty(200))
        }
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

fn digest_hex(alg: &'static aws_lc_rs::digest::Algorithm, der: &[u8]) -> String {
    aws_lc_rs::digest::digest(alg, der).as_ref().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

fn fingerprints(der: &[u8]) -> serde_json::Value {
    let sha256 = digest_hex(&aws_lc_rs::digest::SHA256, der);
    serde_json::json!({
        "SHA1": digest_hex(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, der),
        "SHA256": sha256,
        "SHA512": digest_hex(&aws_lc_rs::digest::SHA512, der),
        "default": sha256,
    })
}

fn status_of(auth: &Authority, name: &str) -> Result<Option<serde_json::Value>, Error> {
    // A current certificate first: a pending request (anyone can make one) never hides it.
    if let Some(v) = cert_status(auth, name)? {
        if v["state"] == "signed" {
            return Ok(Some(v));
        }
    }
    if let Some((req, pem)) = auth.request(name)? {
        let der = crate::encoding::pem::find(&pem, &["CERTIFICATE REQUEST"]).map(|(_, d)| d).unwrap_or_default();
        let fp = fingerprints(&der);
        return Ok(Some(serde_json::json!({
            "name": name, "state": "requested",
            "fingerprint": fp["SHA256"], "fingerprints": fp,
            "dns_alt_names": [], "subject_alt_names": [], "authorization_extensions": {},
            "requested_at": req.time,
            "reasons": req.reasons,
        })));
    }
    cert_status(auth, name)
}

fn cert_status(auth: &Authority, name: &str) -> Result<Option<serde_json::Value>, Error> {
    let Some((rec, pem)) = auth.certificate(name)? else { return Ok(None) };
    let der = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
    let fp = fingerprints(&der);
    let mut sans = Vec::new();
    let mut not_before = None;
    let mut not_after = None;
    let mut auth_ext = serde_json::Map::new();
    if let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) {
        not_before = Some(crate::encoding::time::format_puppet(cert.validity().not_before.to_datetime()));
        not_after = Some(crate::encoding::time::format_puppet(cert.validity().not_after.to_datetime()));
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for n in &san.value.general_names {
                match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => sans.push(format!("DNS:{d}")),
                    x509_parser::extensions::GeneralName::IPAddress(ip) => {
                        let ip = match ip.len() {
                            4 => <[u8; 4]>::try_from(*ip).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                            16 => <[u8; 16]>::try_from(*ip).ok().map(|b| std::net::IpAddr::from(b).to_string()),
                            _ => None,
                        };
                        if let Some(ip) = ip {
                            sans.push(format!("IP Address:{ip}"));
                        }
                    }
                    _ => {}
                }
            }
        }
        for e in cert.extensions() {
            let arcs: Option<Vec<u64>> = e.oid.iter().map(|i| i.collect());
            if let Some(arcs) = arcs.filter(|a| crate::encoding::oids::is_under(a, crate::encoding::oids::PP_AUTH)) {
                let name = crate::encoding::oids::PUPPET_SHORT_NAMES
                    .iter()
                    .find(|(_, o)| *o == arcs.as_slice())
                    .map(|(n, _)| n.to_string())
                    .unwrap_or_else(|| arcs.iter().map(u64::to_string).collect::<Vec<_>>().join("."));
                let value = crate::encoding::der::Reader::new(e.value)
                    .any()
                    .ok()
                    .map(|t| String::from_utf8_lossy(t.content).into_owned())
                    .unwrap_or_default();
                auth_ext.insert(name, serde_json::Value::String(value));
            }
        }
    }
    // Puppet gives the serial as a JSON integer; vouch's serials are up to 128 bits, more
    // than a JSON integer carries safely, so larger ones come as a decimal string
    // (`serial` always has the hex form). (serde_json's json! panics on a u128.)
    let serial_number = match u128::from_str_radix(&rec.serial, 16) {
        Ok(n) => match u64::try_from(n) {
            Ok(small) => serde_json::Value::from(small),
            Err(_) => serde_json::Value::String(n.to_string()),
        },
        Err(_) => serde_json::Value::Null,
    };
    let dns: Vec<&String> = sans.iter().filter(|s| s.starts_with("DNS:")).collect();
    let state = match rec.state {
        State::Issued => "signed",
        State::Revoked => "revoked",
        // Never issued: nothing to show.
        State::Intent | State::Abandoned => return Ok(None),
    };
    Ok(Some(serde_json::json!({
        "name": name, "state": state,
        "fingerprint": fp["SHA256"], "fingerprints": fp,
        "dns_alt_names": dns, "subject_alt_names": sans,
        "authorization_extensions": auth_ext,
        "serial_number": serial_number, "serial": rec.serial,
        "not_before": not_before, "not_after": not_after,
        "conductor": rec.conductor, "attributes_expiry": rec.attributes_expiry,
    })))
}

fn status_one(auth: &Authority, name: &str) -> Result<ApiResponse, Error> {
    if certname_ok(name).is_err() {
        return Ok(not_found("certificate_status", name));
    }
    Ok(match status_of(auth, name)? {
        Some(v) => ApiResponse::json(200, &v),
        None => not_found("certificate_status", name),
    })
}

fn statuses(auth: &Authority, query: &str) -> Result<ApiResponse, Error> {
    let state = query.split('&').find_map(|kv| kv.strip_prefix("state=")).map(str::to_string);
    if let Some(s) = state.as_deref().filter(|s| !["requested", "signed", "revoked"].contains(s)) {
        return Ok(ApiResponse::text(400, format!("Invalid state {s:?}: one of requested, signed, revoked")));
    }
    let all = state.as_deref() != Some("requested");
    let mut out = Vec::new();
    for entry in auth.list(all)? {
        let want = match state.as_deref() {
            None => true,
            Some(s) => entry.state == s,
        };
        if want {
            if let Some(v) = status_of(auth, &entry.name)? {
                if state.as_deref().is_none_or(|s| v["state"] == s) {
                    out.push(v);
                }
            }
        }
    }
    Ok(ApiResponse::json(200, &serde_json::Value::Array(out)))
}

fn status_put(
    auth: &Authority,
    req: &ApiRequest,
    name: &str,
    who: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    let desired = serde_json::from_slice::<serde_json::Value>(&req.body)
        .ok()
        .and_then(|v| v.get("desired_state").and_then(|s| s.as_str()).map(str::to_string));
    let Some(desired) = desired else {
        return Ok(ApiResponse::text(
            400,
            "Bad Request: the body must be JSON like {\"desired_state\":\"signed\"} or {\"desired_state\":\"revoked\"}",
        ));
    };
    events.push(Event::Admin { client: who.to_string(), action: desired.clone(), certname: name.to_string() });
    match desired.as_str() {
        "signed" => {
            // An administrator asks vouch to decide again (after fixing the policy, say):
            // the pending CSR is judged by the current policy like any other. vouch
            // never signs what no conductor vouched for.
            let Some((_, pem)) = auth.request(name)? else {
                return Ok(match auth.certificate(name)? {
                    Some((rec, _)) if rec.state == State::Issued => {
                        ApiResponse::text(409, format!("{name} is already signed (serial {})", rec.serial))
                    }
                    _ => not_found("certificate_request", name),
                });
            };
            match auth.issue(&pem, Some(name), now)? {
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
        "revoked" => match auth.revoke(name, "unspecified", false, now) {
            Ok(_) => Ok(ApiResponse::empty(204)),
            Err(Error::NotFound { .. }) => Ok(not_found("certificate", name)),
            Err(e) => Err(e),
        },
        other => {
            Ok(ApiResponse::text(400, format!("Bad Request: desired_state {other:?} is not one of: signed, revoked")))
        }
    }
}

fn status_delete(
    auth: &Authority,
    name: &str,
    who: &str,
    now: OffsetDateTime,
    events: &mut Vec<Event>,
) -> Result<ApiResponse, Error> {
    if let Err(resp) = certname_ok(name) {
        return Ok(resp);
    }
    if auth.request(name)?.is_none() && auth.certificate(name)?.is_none() {
        return Ok(not_found("certificate_status", name));
    }
    events.push(Event::Admin { client: who.to_string(), action: "clean".into(), certname: name.to_string() });
    auth.revoke(name, "unspecified", true, now)?;
    Ok(ApiResponse::empty(204))
}

fn renewal(
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
        let issued_at = crate::encoding::time::parse_rfc3339(&rec.not_before).ok().map(|t| t + backdate);
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
            Ok(ApiResponse {
                status: 200,
                content_type: "text/plain",
                body: issued.pem.into_bytes(),
                last_modified: None,
            })
        }
        Err(Error::NotValid { detail, .. }) => {
            events.push(Event::Denied { client: p.certname.clone(), reason: detail.clone() });
            Ok(ApiResponse::text(409, format!("Conflict: cannot renew {}: {detail}", p.certname)))
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

fn expirations(auth: &Authority) -> Result<ApiResponse, Error> {
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
