//! One connection's HTTP/1.1 and each request on it: limits, the hand-over to the API
//! on the blocking pool, the answer's headers, the request's log line and metrics.

use super::api::{self, ApiRequest, ApiResponse, Client, Event};
use super::shared::Shared;
use crate::authority::Authority;
use crate::encoding::time::{format_http_date, parse_http_date};
use crate::error::Error;
use crate::obs::metrics::{Route, METRICS};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::Watcher;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use time::OffsetDateTime;

/// Logs an API event and counts it (decisions by outcome and refusal code).
fn record_event(e: &Event, peer: SocketAddr) {
    match e {
        Event::Decision { certname, granted, serial, reasons, codes } => {
            METRICS.decision(*granted, codes);
            tracing::info!(
                event = "decision",
                certname = certname.as_str(),
                verdict = if *granted { "granted" } else { "refused" },
                serial = serial.as_deref(),
                reasons = reasons.join("; ").as_str(),
                codes = codes.join(",").as_str(),
                peer = %peer,
            );
        }
        Event::Renewed { certname, old_serial, serial } => tracing::info!(
            event = "renewed",
            certname = certname.as_str(),
            old_serial = old_serial.as_str(),
            serial = serial.as_str(),
        ),
        Event::Admin { client, action, certname } => tracing::info!(
            event = "admin",
            client = client.as_str(),
            action = action.as_str(),
            certname = certname.as_str(),
        ),
        Event::Denied { client, reason } => {
            tracing::warn!(event = "denied", client = client.as_str(), reason = reason.as_str(), peer = %peer)
        }
        Event::Failed { method, path, error } => tracing::error!(
            event = "failed",
            method = method.as_str(),
            path = path.as_str(),
            error = error.as_str(),
            peer = %peer,
        ),
    }
}

/// The route a (decoded) request path is counted under.
fn route_of(path: &str) -> Route {
    if path == "/status/v1/simple" || path == "/status/v1/simple/" {
        return Route::Status;
    }
    match path.strip_prefix(api::PREFIX) {
        Some(rest) => Route::of_endpoint(rest.split('/').next().unwrap_or_default()),
        None => Route::Other,
    }
}

fn response(r: ApiResponse) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("X-Puppet-Version", api::PUPPET_VERSION)
        .header("Content-Type", r.content_type);
    if let Some(t) = r.last_modified {
        b = b.header("Last-Modified", format_http_date(t));
    }
    if r.gzip {
        b = b.header("Content-Encoding", "gzip");
    }
    if r.varies {
        b = b.header("Vary", "Accept-Encoding");
    }
    if let Some(secs) = r.retry_after {
        b = b.header("Retry-After", secs.to_string());
    } else if r.status == 503 {
        // The agent waits and retries (the shared store was unreachable, or lost a race).
        b = b.header("Retry-After", api::RETRY_AFTER_SECS.to_string());
    }
    b.body(Full::new(r.body)).unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn plain(status: u16, text: &str) -> ApiResponse {
    ApiResponse {
        status,
        content_type: "text/plain",
        body: Bytes::copy_from_slice(text.as_bytes()),
        last_modified: None,
        gzip: false,
        varies: false,
        retry_after: None,
    }
}

/// Whether an `Accept-Encoding` value takes gzip: listed (or `*`) without `q=0`
/// (RFC 9110 12.5.3; Puppet's agents send `gzip;q=1.0,deflate;q=0.6,identity;q=0.3`).
/// An explicit `gzip` entry decides over `*`.
fn accepts_gzip(value: &str) -> bool {
    let mut gzip = None;
    let mut any = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or_default().trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            gzip = Some(q > 0.0);
        } else if coding == "*" {
            any = Some(q > 0.0);
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// What the log line and the API need from a request's head.
struct Head {
    method: String,
    /// The path as sent (percent-encoded), for the log.
    raw_path: String,
    query: String,
    if_modified_since: Option<OffsetDateTime>,
    accept_gzip: bool,
    /// The declared Content-Length, if any.
    declared: Option<usize>,
}

impl Head {
    fn of(parts: &hyper::http::request::Parts) -> Head {
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        Head {
            method: parts.method.as_str().to_string(),
            raw_path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or("").to_string(),
            if_modified_since: header("if-modified-since").and_then(parse_http_date),
            accept_gzip: header("accept-encoding").is_some_and(accepts_gzip),
            declared: header("content-length").and_then(|v| v.parse().ok()),
        }
    }
}

/// An answer from the API, with its events, the client's name for the log and the time
/// the blocking pool took (its queue included).
struct Handled {
    resp: ApiResponse,
    events: Vec<Event>,
    who: String,
    took: std::time::Duration,
}

/// Serves one request: read the body within limits, hand it to the API on the
/// blocking pool, log one line.
async fn serve_request(
    shared: Arc<Shared>,
    peer: SocketAddr,
    peer_cert: Option<Arc<Vec<u8>>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let started = Instant::now();
    let (parts, body) = req.into_parts();
    let head = Head::of(&parts);
    let path = crate::encoding::percent_decode(&head.raw_path);
    let route = path.as_deref().map_or(Route::Other, route_of);
    let (resp, events, who) = match answer(&shared, peer, peer_cert, &head, path, body).await {
        Ok(Handled { resp, events, who, took }) => {
            // An issuance: from the hand-over to the blocking pool (its queue included) to the
            // answer, so decision, signature and the group commit's synchronous write.
            if events.iter().any(|e| matches!(e, Event::Decision { granted: true, .. } | Event::Renewed { .. })) {
                METRICS.issuance(took);
            }
            (resp, events, who)
        }
        Err(resp) => (resp, Vec::new(), "-".to_string()),
    };
    for e in &events {
        record_event(e, peer);
    }
    METRICS.request(route, resp.status);
    log_request(peer, &who, &head, &resp, started);
    Ok(response(resp))
}

/// The API's answer to a request whose path decoded, or the skin's own (400, 408, 413, 500).
async fn answer(
    shared: &Shared,
    peer: SocketAddr,
    peer_cert: Option<Arc<Vec<u8>>>,
    head: &Head,
    path: Option<String>,
    body: Incoming,
) -> Result<Handled, ApiResponse> {
    let path = path.ok_or_else(|| plain(400, "Bad Request: malformed URL"))?;
    let body = read_body(shared, head.declared, body).await?;
    let auth = shared.authority();
    // An agent fetching its certificate, the CA bundle or the CRLs: from memory where they
    // are there, no hand-off.
    if peer_cert.is_none() {
        if let Some(resp) = api::from_memory(&auth, &head.method, &path, head.if_modified_since, head.accept_gzip) {
            return Ok(Handled { resp, events: Vec::new(), who: "-".to_string(), took: std::time::Duration::ZERO });
        }
    }
    let handed = Instant::now();
    let kept_rate = shared.kept_rate.clone();
    let (method, query, if_modified_since, accept_gzip) =
        (head.method.clone(), head.query.clone(), head.if_modified_since, head.accept_gzip);
    let joined = tokio::task::spawn_blocking(move || {
        crate::store::ldap::may_block(|| {
            let now = OffsetDateTime::now_utc();
            let client = match client_of(&auth, peer_cert.as_deref().map(Vec::as_slice), now) {
                Ok(c) => c,
                // The store cannot say whether the certificate is still current: ask again later.
                Err(e) => {
                    let events = vec![api::Event::Failed { method, path, error: e.to_string() }];
                    return (api::unavailable(), events, "-".to_string());
                }
            };
            let who = who(&client);
            let kept_rate = Some((peer.ip(), kept_rate));
            let req = ApiRequest { method, path, query, body, if_modified_since, accept_gzip, client, kept_rate };
            let (resp, events) = api::handle(&auth, &req, now);
            (resp, events, who)
        })
    })
    .await;
    let took = handed.elapsed();
    joined
        .map(|(resp, events, who)| Handled { resp, events, who, took })
        .map_err(|_| plain(500, "Internal Server Error: the request handler failed"))
}

/// The body, within `max_body` bytes and `body_timeout`.
async fn read_body(shared: &Shared, declared: Option<usize>, body: Incoming) -> Result<Vec<u8>, ApiResponse> {
    let max = shared.opts.max_body;
    let too_large = || plain(413, &format!("Payload Too Large: request bodies are limited to {max} bytes"));
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    match tokio::time::timeout(shared.opts.body_timeout, Limited::new(body, max).collect()).await {
        Err(_) => Err(plain(408, "Request Timeout: the body did not arrive in time")),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(_)) => Err(plain(400, "Bad Request: the body could not be read")),
        Ok(Ok(c)) => Ok(c.to_bytes().to_vec()),
    }
}

/// Who the client is, from the certificate it presented (checked against the store now);
/// an error if the store cannot be reached.
fn client_of(auth: &Authority, peer_cert: Option<&[u8]>, now: OffsetDateTime) -> Result<Client, Error> {
    Ok(match peer_cert {
        None => Client::Anonymous,
        Some(der) => match auth.presented(der, now) {
            Ok(p) => Client::Known(p),
            Err(e @ Error::StoreUnavailable { .. }) => return Err(e),
            Err(e) => Client::Rejected { reason: e.to_string() },
        },
    })
}

/// The client's name in the request's log line.
fn who(client: &Client) -> String {
    match client {
        Client::Known(p) => p.certname.clone(),
        Client::Rejected { .. } => "rejected".to_string(),
        Client::Anonymous => "-".to_string(),
    }
}

/// The request's log line.
fn log_request(peer: SocketAddr, who: &str, head: &Head, resp: &ApiResponse, started: Instant) {
    tracing::info!(
        event = "request",
        peer = %peer,
        client = who,
        method = head.method.as_str(),
        path = head.raw_path.as_str(),
        status = resp.status,
        bytes = resp.body.len() as u64,
        ms = (started.elapsed().as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
    );
}

/// HTTP/1.1 with keep-alive on a TLS connection, until the client closes it, the server
/// stops or the connection's lifetime ends.
pub(super) async fn serve_http(
    shared: Arc<Shared>,
    tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    peer: SocketAddr,
    watcher: Watcher,
) {
    let peer_cert = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| Arc::new(c.to_vec()));
    let header_timeout = shared.opts.header_timeout;
    let svc_shared = shared.clone();
    let service =
        hyper::service::service_fn(move |req| serve_request(svc_shared.clone(), peer, peer_cert.clone(), req));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true).max_buf_size(64 * 1024);
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    // A connection lives at most `connection_lifetime`, whatever it does: a client
    // that stops reading its answers (the write never completes, so no header or
    // idle timer runs) cannot hold a slot for ever.
    match tokio::time::timeout(shared.opts.connection_lifetime, watcher.watch(conn)).await {
        Ok(Err(e)) if !e.is_incomplete_message() => {
            tracing::info!(event = "connection", peer = %peer, error = %e);
        }
        Ok(_) => {}
        Err(_) => {
            tracing::info!(event = "connection", peer = %peer, error = "connection lifetime reached; closed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn accept_encoding_as_rfc_9110_reads_it() {
        assert!(accepts_gzip("gzip;q=1.0,deflate;q=0.6,identity;q=0.3"), "Puppet's agents");
        assert!(accepts_gzip("deflate, GZIP"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0, identity"));
        assert!(!accepts_gzip("gzip;q=0, *"), "an explicit q=0 wins over *");
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip(""));
        assert!(!accepts_gzip("gzip;q=nonsense;q=0"), "the first q that reads decides");
        assert!(accepts_gzip("gzip;q=bogus"), "an unreadable q is 1");
    }
}
