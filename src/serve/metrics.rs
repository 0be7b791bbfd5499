//! `vouch serve --metrics-listen ADDR`: the metrics ([`crate::obs::metrics`]) in
//! Prometheus' text format, over plain HTTP on a listener of their own: `GET /metrics`,
//! 404 for any other path. A scrape reads atomics and the CRL files' headers; it never
//! takes the store's lock and never waits for a request of the CA API.

use super::peers::PerAddress;
use crate::obs::metrics::{Gauge, METRICS};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Scrapes served at once (Prometheus uses one connection; more wait in the backlog).
const MAX_CONNECTIONS: usize = 16;
/// At most this many of them from one address: one client cannot hold every slot.
const MAX_PER_ADDRESS: usize = 4;

/// A file's identity and version, without reading it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileId {
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

/// The CRLs whose age is reported: `vouch_crl_age_seconds{crl="ca"}` (the master CA's,
/// what agents download first) and `{crl="root"}`.
pub(super) struct CrlAges {
    files: [(&'static str, PathBuf); 2],
    /// Per file: what identified its content when it was read, and its thisUpdate (Unix seconds).
    cache: Mutex<[Option<(FileId, i64)>; 2]>,
}

impl CrlAges {
    pub(super) fn new(dir: &crate::issuance::bootstrap::DataDir) -> Self {
        CrlAges {
            files: [("ca", dir.file("ca_crl.pem")), ("root", dir.file(crate::issuance::bootstrap::ROOT_CRL))],
            cache: Mutex::new([None, None]),
        }
    }

    /// Seconds since each CRL's thisUpdate; a CRL that cannot be read is left out. A CRL
    /// is parsed again only when its file changed (a CRL with many entries is large).
    fn gauge(&self, now: SystemTime) -> Gauge {
        use std::os::unix::fs::MetadataExt;
        let mut cache = match self.cache.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        let now = now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let mut series = Vec::new();
        for ((label, path), cached) in self.files.iter().zip(cache.iter_mut()) {
            let Ok(meta) = std::fs::metadata(path) else {
                *cached = None;
                continue;
            };
            let id = FileId { ino: meta.ino(), len: meta.len(), modified: meta.modified().ok() };
            let this_update = match *cached {
                Some((seen, t)) if seen == id => Some(t),
                _ => this_update(path),
            };
            *cached = this_update.map(|t| (id, t));
            if let Some(t) = this_update {
                series.push((vec![("crl", (*label).to_string())], now - t as f64));
            }
        }
        Gauge {
            name: "vouch_crl_age_seconds",
            help: "Seconds since the served CRL's thisUpdate, per CRL (the master CA's: ca; the root's: root).",
            series,
        }
    }
}

/// A CRL file's thisUpdate (Unix seconds).
fn this_update(path: &std::path::Path) -> Option<i64> {
    // The CA's own file, as the API reads it to serve it.
    let pem = std::fs::read(path).ok()?;
    let (_, der) = crate::encoding::pem::find(&pem, &["X509 CRL"]).ok()?;
    let (_, crl) = x509_parser::parse_x509_crl(&der).ok()?;
    Some(crl.last_update().timestamp())
}

/// The exposition: every metric, the CRLs' ages computed now.
fn render(crls: &CrlAges) -> String {
    METRICS.render(&[crls.gauge(SystemTime::now())])
}

fn answer(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn scrape(crls: Arc<CrlAges>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.uri().path() != "/metrics" {
        return Ok(answer(StatusCode::NOT_FOUND, TEXT, "Not Found: the metrics are at /metrics\n".into()));
    }
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        let mut r = answer(StatusCode::METHOD_NOT_ALLOWED, TEXT, "Method Not Allowed: GET /metrics\n".into());
        r.headers_mut().insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    // Rendered here, on the async worker: it reads atomics and stats two files (re-reading a
    // CRL only when it changed). The blocking pool is where API requests decide, sign and wait
    // for the store's lock; a scrape queued behind them would go dark exactly when the CA is
    // stuck.
    Ok(answer(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", render(&crls)))
}

/// Serves scrapes until `stop` says so. Connections get the API's header timeout and
/// lifetime; at most [`MAX_CONNECTIONS`] at once, [`MAX_PER_ADDRESS`] of them from one address.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    crls: Arc<CrlAges>,
    header_timeout: Duration,
    lifetime: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let per_address = PerAddress::new(MAX_PER_ADDRESS, MAX_CONNECTIONS);
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(event = "accept", listener = "metrics", error = %e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let slot = match per_address.take(peer.ip()) {
            Ok(s) => s,
            Err(crowded) => {
                tracing::warn!(event = "connection", listener = "metrics", peer = %peer, error = %crowded);
                drop(stream);
                continue;
            }
        };
        let crls = crls.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| scrape(crls.clone(), req));
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = tokio::time::timeout(lifetime, conn.as_mut()) => {
                    if let Ok(Err(e)) = r {
                        if !e.is_incomplete_message() {
                            tracing::info!(event = "connection", listener = "metrics", peer = %peer, error = %e);
                        }
                    }
                }
                // The server stops: a kept-alive scrape connection closes at once.
                _ = stop.changed() => {}
            }
        });
    }
}
