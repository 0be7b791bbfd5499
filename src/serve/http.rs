//! The network skin of `vouch serve`: TLS, HTTP/1.1, limits, signals and logs.

use super::api::{self, ApiRequest, ApiResponse, Client, Event};
use super::setup::SetupReport;
use super::ServeOptions;
use crate::authority::Authority;
use crate::encoding::time::{format_http_date, parse_http_date};
use crate::error::Error;
use crate::issuance::bootstrap::DataDir;
use crate::obs::metrics::{Route, StoreStage, METRICS};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Instant;
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

/// What every connection shares. SIGHUP swaps the authority (policy) and TLS config.
struct Shared {
    opts: ServeOptions,
    /// Open connections per client address (at most `opts.max_per_peer` each).
    per_peer: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
    authority: RwLock<Arc<Authority>>,
    tls: RwLock<Arc<rustls::ServerConfig>>,
}

impl Shared {
    fn authority(&self) -> Arc<Authority> {
        match self.authority.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
    fn tls(&self) -> Arc<rustls::ServerConfig> {
        match self.tls.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

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
                reasons = %reasons.join("; "),
                codes = %codes.join(","),
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

fn crypto(detail: impl std::fmt::Display) -> Error {
    Error::Crypto { detail: detail.to_string() }
}

/// The TLS configuration: the service's certificate and the master CA; client
/// certificates optional (bootstrap is anonymous) and, when sent, verified against
/// the master CA. Revocation is checked per request against the store itself.
fn tls_config(dir: &DataDir) -> Result<rustls::ServerConfig, Error> {
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let read = |p: std::path::PathBuf| crate::error::read_input(&p, crate::files::input::Kind::Cert);
    let cert_path = dir.dir.join(crate::issuance::bootstrap::SERVER_CERT);
    let cert_pem = read(cert_path.clone())?;
    let server_der = crate::encoding::pem::find(&cert_pem, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: cert_path, detail: e.to_string() })?
        .1;
    let ca_path = dir.file(crate::issuance::bootstrap::CA_CERT);
    let ca_der = crate::encoding::pem::find(&read(ca_path.clone())?, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: ca_path, detail: e.to_string() })?
        .1;
    let key_path = dir.dir.join(crate::issuance::bootstrap::SERVER_KEY);
    let key_der = crate::encoding::pem::find(&read(key_path.clone())?, &["PRIVATE KEY"])
        .map_err(|e| Error::Key { path: key_path, detail: e.to_string() })?
        .1;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca_der.clone())).map_err(crypto)?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(crypto)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(crypto)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(server_der), CertificateDer::from(ca_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der)),
        )
        .map_err(crypto)?;
    // No TLS 1.3 session tickets: a ticket arriving after the response makes Ruby's
    // Net::HTTP (Puppet's agent) block on its kept-alive connection until the server
    // closes it (the 30-second stall Ruby's Net::HTTP showed against Puppet Server 7.9.5). Without them,
    // TLS 1.3 works with Puppet agents at full speed.
    config.send_tls13_tickets = 0;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Percent-decodes a URL path; `None` if it is not valid UTF-8 or has a bad escape.
fn percent_decode(path: &str) -> Option<String> {
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn response(r: ApiResponse) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("X-Puppet-Version", api::PUPPET_VERSION)
        .header("Content-Type", r.content_type);
    if let Some(t) = r.last_modified {
        b = b.header("Last-Modified", format_http_date(t));
    }
    b.body(Full::new(Bytes::from(r.body))).unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

fn plain(status: u16, text: &str) -> ApiResponse {
    ApiResponse { status, content_type: "text/plain", body: text.as_bytes().to_vec(), last_modified: None }
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
    let method = req.method().as_str().to_string();
    let method_log = method.clone();
    let raw_path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let if_modified_since =
        req.headers().get("if-modified-since").and_then(|v| v.to_str().ok()).and_then(parse_http_date);
    let declared = req.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let max = shared.opts.max_body;
    let path = percent_decode(&raw_path);
    let route = path.as_deref().map_or(Route::Other, route_of);
    let outcome: Result<(ApiResponse, Vec<Event>, String, std::time::Duration), ApiResponse> = async {
        let path = path.ok_or_else(|| plain(400, "Bad Request: malformed URL"))?;
        if declared.is_some_and(|n: usize| n > max) {
            return Err(plain(413, &format!("Payload Too Large: request bodies are limited to {max} bytes")));
        }
        let body =
            match tokio::time::timeout(shared.opts.body_timeout, Limited::new(req.into_body(), max).collect()).await {
                Err(_) => return Err(plain(408, "Request Timeout: the body did not arrive in time")),
                Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                    return Err(plain(413, &format!("Payload Too Large: request bodies are limited to {max} bytes")))
                }
                Ok(Err(_)) => return Err(plain(400, "Bad Request: the body could not be read")),
                Ok(Ok(c)) => c.to_bytes().to_vec(),
            };
        let auth = shared.authority();
        let handed = Instant::now();
        let joined = tokio::task::spawn_blocking(move || {
            let now = OffsetDateTime::now_utc();
            let client = match peer_cert.as_deref() {
                None => Client::Anonymous,
                Some(der) => match auth.presented(der, now) {
                    Ok(p) => Client::Known(p),
                    Err(e) => Client::Rejected { reason: e.to_string() },
                },
            };
            let who = match &client {
                Client::Known(p) => p.certname.clone(),
                Client::Rejected { .. } => "rejected".to_string(),
                Client::Anonymous => "-".to_string(),
            };
            let req = ApiRequest { method, path, query, body, if_modified_since, client };
            let (resp, events) = api::handle(&auth, &req, now);
            (resp, events, who)
        })
        .await;
        let took = handed.elapsed();
        joined
            .map(|(resp, events, who)| (resp, events, who, took))
            .map_err(|_| plain(500, "Internal Server Error: the request handler failed"))
    }
    .await;
    let (resp, events, who) = match outcome {
        Ok((resp, events, who, took)) => {
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
    tracing::info!(
        event = "request",
        peer = %peer,
        client = who.as_str(),
        method = method_log.as_str(),
        path = raw_path.as_str(),
        status = resp.status,
        bytes = resp.body.len() as u64,
        ms = (started.elapsed().as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
    );
    Ok(response(resp))
}

/// Accepts until SIGTERM or SIGINT, then lets requests in flight finish (10 s at most).
pub(super) async fn serve(
    opts: ServeOptions,
    report: SetupReport,
    listener: std::net::TcpListener,
    metrics: Option<std::net::TcpListener>,
) -> Result<(), Error> {
    let dir = DataDir::new(&opts.dir);
    let authority = Authority::open(&dir)?;
    let tls = tls_config(&dir)?;
    let listener = TcpListener::from_std(listener).map_err(|source| Error::Listen {
        addr: opts.listen,
        flag: crate::error::LISTEN_FLAG,
        source,
    })?;
    let inspect = |source| Error::Io { path: "socket".into(), op: "inspect", source };
    let local = listener.local_addr().map_err(inspect)?;
    let metrics = match (metrics, opts.metrics_listen) {
        (Some(l), Some(addr)) => {
            let l =
                TcpListener::from_std(l).map_err(|source| Error::Listen { addr, flag: "--metrics-listen", source })?;
            let local = l.local_addr().map_err(inspect)?;
            Some((l, local))
        }
        _ => None,
    };
    let metrics_local = metrics.as_ref().map(|(_, a)| *a);
    // Signals first: whoever reads the banner may signal at once (a supervisor, a test).
    let sig = |k: SignalKind| signal(k).map_err(|source| Error::Io { path: "signal".into(), op: "install", source });
    let (mut term, mut int, mut hup) =
        (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?, sig(SignalKind::hangup())?);
    banner(&report, local, metrics_local);
    let shared = Arc::new(Shared {
        per_peer: std::sync::Mutex::new(std::collections::HashMap::new()),
        opts: opts.clone(),
        authority: RwLock::new(Arc::new(authority)),
        tls: RwLock::new(Arc::new(tls)),
    });
    let limit = Arc::new(tokio::sync::Semaphore::new(opts.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // Maintenance (CRL refresh, the store's checkpoint) on its own clock, whatever the traffic:
    // never on the accept path, which only waits for connections and signals.
    let (stop_maintenance, stopped) = tokio::sync::watch::channel(false);
    if let Some((l, _)) = metrics {
        let crls = Arc::new(super::metrics::CrlAges::new(&dir));
        tokio::spawn(super::metrics::serve(l, crls, opts.header_timeout, opts.connection_lifetime, stopped.clone()));
    }
    let maintenance = tokio::spawn(maintain_every(shared.clone(), MAINTENANCE_EVERY, stopped));
    tracing::info!(
        event = "listening",
        address = %local,
        metrics = metrics_local.map(tracing::field::display),
        pid = std::process::id(),
    );
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => { reload(&shared); continue; }
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(event = "accept", error = %e);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => { reload(&shared); continue; }
        };
        let _ = stream.set_nodelay(true);
        let Some(peer_slot) = PeerSlot::take(&shared, peer.ip()) else {
            tracing::warn!(
                event = "connection",
                peer = %peer,
                error = %format_args!("more than {} connections from this address; closed", shared.opts.max_per_peer),
            );
            drop(stream);
            continue;
        };
        let shared = shared.clone();
        let acceptor = tokio_rustls::TlsAcceptor::from(shared.tls());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _permit = permit;
            let _peer_slot = peer_slot;
            let _open = METRICS.connection();
            let tls = match tokio::time::timeout(shared.opts.handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::info!(event = "tls", peer = %peer, error = %e);
                    return;
                }
                Err(_) => {
                    tracing::info!(event = "tls", peer = %peer, error = "handshake timed out");
                    return;
                }
            };
            let peer_cert = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| Arc::new(c.to_vec()));
            let header_timeout = shared.opts.header_timeout;
            let svc_shared = shared.clone();
            let service =
                hyper::service::service_fn(move |req| serve_request(svc_shared.clone(), peer, peer_cert.clone(), req));
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .max_buf_size(64 * 1024);
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
        });
    }
    tracing::info!(event = "stopping", reason = "signal");
    drop(listener);
    // No maintenance run starts any more; one in progress finishes (it may hold the store's lock).
    let _ = stop_maintenance.send(true);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {
            tracing::warn!(event = "stopping", detail = "connections still open after 10 s; closing them");
        }
    }
    if let Err(e) = maintenance.await {
        store_failed(StoreStage::Maintenance, &e);
    }
    let auth = shared.authority();
    match tokio::task::spawn_blocking(move || auth.checkpoint()).await {
        Ok(Err(e)) => store_failed(StoreStage::Checkpoint, &e),
        Err(e) => store_failed(StoreStage::Checkpoint, &e),
        Ok(Ok(())) => {}
    }
    tracing::info!(event = "stopped");
    Ok(())
}

/// A maintenance run or checkpoint failed: logged (the event is the stage's name) and counted.
fn store_failed(stage: StoreStage, e: &dyn std::fmt::Display) {
    METRICS.store_error(stage);
    tracing::error!(event = stage.label(), error = %e);
}

/// How often `vouch serve` maintains the store: the CRLs regenerated when due (a revocation
/// not yet on them, or less than `[crl] refresh_before` left) and the store's log checkpointed.
const MAINTENANCE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Maintains the store every `period` until `stop` says so. One run at a time, on the
/// blocking pool: a run may wait for the store's lock (a `vouch` command beside the server)
/// and nothing else waits with it; the next run starts a full period after the previous one
/// ended, however long it took.
async fn maintain_every(
    shared: Arc<Shared>,
    period: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // `prepare` maintained the store just before the server started: the first run is one period later.
    let mut clock = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = clock.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        // The authority in force now (SIGHUP may have reloaded the policy).
        let auth = shared.authority();
        let run = tokio::task::spawn_blocking(move || {
            if let Err(e) = auth.maintain(OffsetDateTime::now_utc()) {
                store_failed(StoreStage::Maintenance, &e);
            }
            // The store's log into its files (a syncfs), once a period at most.
            if let Err(e) = auth.checkpoint() {
                store_failed(StoreStage::Checkpoint, &e);
            }
        });
        if let Err(e) = run.await {
            store_failed(StoreStage::Maintenance, &e);
        }
    }
}

/// One of a client address's connection slots, given back on drop.
struct PeerSlot {
    shared: Arc<Shared>,
    ip: std::net::IpAddr,
}

impl PeerSlot {
    fn take(shared: &Arc<Shared>, ip: std::net::IpAddr) -> Option<PeerSlot> {
        let mut map = match shared.per_peer.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let n = map.entry(ip).or_insert(0);
        if *n >= shared.opts.max_per_peer {
            return None;
        }
        *n += 1;
        Some(PeerSlot { shared: shared.clone(), ip })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = match self.shared.per_peer.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(n) = map.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// SIGHUP: reload the policy and the service certificate; on any error keep the old ones.
fn reload(shared: &Shared) {
    let dir = DataDir::new(&shared.opts.dir);
    match Authority::open(&dir) {
        Ok(a) => {
            if let Ok(mut w) = shared.authority.write() {
                *w = Arc::new(a);
            }
            tracing::info!(event = "reload", what = "policy", ok = true);
        }
        Err(e) => tracing::error!(
            event = "reload",
            what = "policy",
            ok = false,
            error = %e,
            detail = "the previous policy stays in force",
        ),
    }
    match tls_config(&dir) {
        Ok(t) => {
            if let Ok(mut w) = shared.tls.write() {
                *w = Arc::new(t);
            }
        }
        Err(e) => tracing::error!(event = "reload", what = "tls", ok = false, error = %e),
    }
}

fn banner(r: &SetupReport, local: SocketAddr, metrics: Option<SocketAddr>) {
    let mut out = String::new();
    let dir = r.dir.display();
    if r.created_ca {
        out.push_str(&format!("vouch: created a new CA in {dir}\n"));
    } else {
        out.push_str(&format!("vouch: serving the CA in {dir}\n"));
    }
    for n in &r.notes {
        out.push_str(&format!("  {n}\n"));
    }
    out.push_str(&format!("  root CA fingerprint (SHA-256): {}\n", r.root_fingerprint));
    out.push_str(&format!("  policy:                        {}\n", r.policy.display()));
    if let Some((c, k)) = &r.conductor {
        out.push_str(&format!("  conductor credentials:         {} {}\n", c.display(), k.display()));
    }
    if let Some((c, k)) = &r.admin {
        out.push_str(&format!("  admin credentials:             {} {}\n", c.display(), k.display()));
    }
    out.push_str(&format!(
        "  service certificate:           {} ({})\n",
        r.server_cert.display(),
        r.server_names.join(", ")
    ));
    out.push_str(&format!("  listening on https://{local}/puppet-ca/v1\n"));
    if let Some(m) = metrics {
        out.push_str(&format!("  metrics on http://{m}/metrics\n"));
    }
    out.push_str(&agent_settings(r, local));
    // Not print!, which panics when stdout cannot be written.
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush());
}

/// What an agent's puppet.conf needs, for the banner. vouch is the agent's CA only (no
/// catalogs): `ca_server`/`ca_port` point at vouch, `server` stays the Puppet Server. The
/// certname is the one the conductor signed; the service's own names are reserved.
fn agent_settings(r: &SetupReport, local: SocketAddr) -> String {
    // Agents on this host reach a loopback listener as localhost; others by the certname.
    let host = if local.ip().is_loopback() && r.server_names.iter().any(|n| n == "localhost") {
        "localhost".to_string()
    } else {
        r.server_certname.clone()
    };
    let mut out = String::new();
    out.push_str("\nAn agent's puppet.conf needs (vouch is its CA only; catalogs come from your Puppet Server):\n");
    out.push_str("  [main]\n  certname = <the name the conductor signed>\n");
    out.push_str(&format!("  ca_server = {host}\n  ca_port = {}\n", local.port()));
    out.push_str(&format!("  ca_fingerprint = {}\n", r.bundle_fingerprint.replace(':', "")));
    out.push_str("  server = <your Puppet Server>\n");
    out.push_str(
        "certname: as in 'vouch conductor sign --certname NAME'; never this host's name when it is a name of\n\
         this service (the service certificate's names above are reserved: refused, 400)\n",
    );
    out.push_str(
        "ca_fingerprint: the SHA-256 of the CA bundle this service sends (master CA + root), which is why it\n\
         differs from the root CA fingerprint above\n",
    );
    out.push_str("then: puppet ssl bootstrap (certificate only; puppet agent --test also needs the Puppet Server)\n");
    out
}
