//! The running server of `vouch serve`: its listeners, signals (SIGTERM and SIGINT stop it,
//! SIGHUP reloads), the accept loop and its limits (connections at once, per client address),
//! each connection's TLS handshake, the store's maintenance, and the shutdown.

use super::banner::banner;
use super::http::serve_http;
use super::peers::{PeerSlot, PerAddress};
use super::setup::SetupReport;
use super::shared::Shared;
use super::tls::tls_config;
use super::ServeOptions;
use crate::authority::Authority;
use crate::error::Error;
use crate::issuance::bootstrap::DataDir;
use crate::obs::metrics::{StoreStage, METRICS};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use time::OffsetDateTime;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Accepts until SIGTERM or SIGINT, then lets requests in flight finish (10 s at most).
pub(super) async fn serve(
    opts: ServeOptions,
    report: SetupReport,
    listener: std::net::TcpListener,
    metrics: Option<std::net::TcpListener>,
) -> Result<(), Error> {
    let dir = DataDir::new(&opts.dir);
    let authority = Authority::open_with(&dir, &opts.store)?;
    let tls = tls_config(&dir, authority.fleet.clone())?;
    let Listeners { api: listener, local, metrics } = Listeners::from_std(&opts, listener, metrics)?;
    let metrics_local = metrics.as_ref().map(|(_, a)| *a);
    // Signals first: whoever reads the banner may signal at once (a supervisor, a test).
    let mut signals = Signals::install()?;
    banner(&report, local, metrics_local);
    let shared = Arc::new(Shared {
        per_peer: PerAddress::new(opts.max_per_peer, opts.max_connections),
        kept_rate: Arc::default(),
        opts,
        authority: RwLock::new(Arc::new(authority)),
        tls: RwLock::new(Arc::new(tls)),
    });
    let graceful = GracefulShutdown::new();
    let background = Background::start(&shared, &dir, metrics);
    tracing::info!(
        event = "listening",
        address = %local,
        metrics = metrics_local.map(tracing::field::display),
        pid = std::process::id(),
    );
    accept_loop(&shared, &listener, &mut signals, &graceful).await;
    tracing::info!(event = "stopping", reason = "signal");
    drop(listener);
    background.stop(&shared, graceful).await;
    tracing::info!(event = "stopped");
    Ok(())
}

/// The bound listeners, handed to tokio, with the addresses they are bound to.
struct Listeners {
    api: TcpListener,
    local: SocketAddr,
    metrics: Option<(TcpListener, SocketAddr)>,
}

impl Listeners {
    fn from_std(
        opts: &ServeOptions,
        api: std::net::TcpListener,
        metrics: Option<std::net::TcpListener>,
    ) -> Result<Listeners, Error> {
        let api = TcpListener::from_std(api).map_err(|source| Error::Listen {
            addr: opts.listen,
            flag: crate::error::LISTEN_FLAG,
            source,
        })?;
        let inspect = |source| Error::Io { path: "socket".into(), op: "inspect", source };
        let local = api.local_addr().map_err(inspect)?;
        let metrics = match (metrics, opts.metrics_listen) {
            (Some(l), Some(addr)) => {
                let l = TcpListener::from_std(l).map_err(|source| Error::Listen {
                    addr,
                    flag: "--metrics-listen",
                    source,
                })?;
                let local = l.local_addr().map_err(inspect)?;
                Some((l, local))
            }
            _ => None,
        };
        Ok(Listeners { api, local, metrics })
    }
}

/// The signals `vouch serve` answers: SIGTERM and SIGINT stop it, SIGHUP reloads.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

/// What the accept loop waited for, or the signal that came first.
enum Wake<T> {
    Ready(T),
    Stop,
    Reload,
}

impl Signals {
    fn install() -> Result<Signals, Error> {
        let sig =
            |k: SignalKind| signal(k).map_err(|source| Error::Io { path: "signal".into(), op: "install", source });
        Ok(Signals {
            term: sig(SignalKind::terminate())?,
            int: sig(SignalKind::interrupt())?,
            hup: sig(SignalKind::hangup())?,
        })
    }

    /// `f`'s output, unless a signal comes first.
    async fn or<T>(&mut self, f: impl std::future::Future<Output = T>) -> Wake<T> {
        tokio::select! {
            v = f => Wake::Ready(v),
            _ = self.term.recv() => Wake::Stop,
            _ = self.int.recv() => Wake::Stop,
            _ = self.hup.recv() => Wake::Reload,
        }
    }
}

/// Accepts connections (at most `max_connections` at once) until SIGTERM or SIGINT;
/// SIGHUP reloads and goes on.
async fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, signals: &mut Signals, graceful: &GracefulShutdown) {
    let limit = Arc::new(tokio::sync::Semaphore::new(shared.opts.max_connections.max(1)));
    loop {
        let permit = match signals.or(limit.clone().acquire_owned()).await {
            Wake::Ready(Ok(p)) => p,
            Wake::Ready(Err(_)) | Wake::Stop => return,
            Wake::Reload => {
                reload(shared);
                continue;
            }
        };
        let (stream, peer) = match signals.or(listener.accept()).await {
            Wake::Ready(Ok(x)) => x,
            Wake::Ready(Err(e)) => {
                tracing::warn!(event = "accept", error = %e);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
            Wake::Stop => return,
            Wake::Reload => {
                reload(shared);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let peer_slot = match shared.per_peer.take(peer.ip()) {
            Ok(s) => s,
            Err(crowded) => {
                tracing::warn!(event = "connection", peer = %peer, error = %crowded);
                drop(stream);
                continue;
            }
        };
        let connection = Connection {
            shared: shared.clone(),
            acceptor: tokio_rustls::TlsAcceptor::from(shared.tls()),
            watcher: graceful.watcher(),
            stream,
            peer,
            permit,
            peer_slot,
        };
        tokio::spawn(connection.run());
    }
}

/// An accepted connection, holding its place under `max_connections` and its client
/// address's slot until it ends.
struct Connection {
    shared: Arc<Shared>,
    acceptor: tokio_rustls::TlsAcceptor,
    watcher: Watcher,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    permit: tokio::sync::OwnedSemaphorePermit,
    peer_slot: PeerSlot,
}

impl Connection {
    /// The TLS handshake (within `handshake_timeout`), then HTTP/1.1.
    async fn run(self) {
        let Connection { shared, acceptor, watcher, stream, peer, permit, peer_slot } = self;
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
        serve_http(shared, tls, peer, watcher).await;
    }
}

/// What runs beside the accept loop: the store's maintenance and the metrics listener.
struct Background {
    /// Set to stop both.
    stop: tokio::sync::watch::Sender<bool>,
    maintenance: tokio::task::JoinHandle<()>,
}

impl Background {
    /// Maintenance (CRL refresh, the store's checkpoint) on its own clock, whatever the traffic:
    /// never on the accept path, which only waits for connections and signals.
    fn start(shared: &Arc<Shared>, dir: &DataDir, metrics: Option<(TcpListener, SocketAddr)>) -> Background {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        if let Some((l, _)) = metrics {
            let crls = Arc::new(super::metrics::CrlAges::new(dir));
            let opts = &shared.opts;
            tokio::spawn(super::metrics::serve(
                l,
                crls,
                opts.header_timeout,
                opts.connection_lifetime,
                stopped.clone(),
            ));
        }
        // A shared store: other masters revoke this CA's certificates too, and the CRL
        // follows within SHARED_MAINTENANCE_EVERY (a read of one counter entry).
        let period = if shared.authority().store.batches() { MAINTENANCE_EVERY } else { SHARED_MAINTENANCE_EVERY };
        let maintenance = tokio::spawn(maintain_every(shared.clone(), period, stopped));
        Background { stop, maintenance }
    }

    /// After the accept loop: requests in flight finish (10 s at most), then a last checkpoint.
    async fn stop(self, shared: &Shared, graceful: GracefulShutdown) {
        // No maintenance run starts any more; one in progress finishes (it may hold the store's lock).
        let _ = self.stop.send(true);
        tokio::select! {
            _ = graceful.shutdown() => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {
                tracing::warn!(event = "stopping", detail = "connections still open after 10 s; closing them");
            }
        }
        if let Err(e) = self.maintenance.await {
            store_failed(StoreStage::Maintenance, &e);
        }
        let auth = shared.authority();
        match tokio::task::spawn_blocking(move || crate::store::ldap::may_block(|| auth.checkpoint())).await {
            Ok(Err(e)) => store_failed(StoreStage::Checkpoint, &e),
            Err(e) => store_failed(StoreStage::Checkpoint, &e),
            Ok(Ok(())) => {}
        }
    }
}

/// A maintenance run or checkpoint failed: logged (the event is the stage's name) and counted.
fn store_failed(stage: StoreStage, e: &dyn std::fmt::Display) {
    METRICS.store_error(stage);
    tracing::error!(event = stage.label(), error = %e);
}

/// How often `vouch serve` maintains the store: the CRLs regenerated when due (a revocation
/// not yet on them, or less than `[crl] refresh_before` left) and the store's log checkpointed.
const MAINTENANCE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
/// How long one maintenance run may spend removing the replay journal's expired entries
/// (about 100,000 here; a busy hour's bucket is finished over the next runs).
const PRUNE_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);
/// The same with a shared (LDAP) store, where another master's revocation makes the CRL due.
const SHARED_MAINTENANCE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Maintains the store every `period` until `stop` says so. One run at a time, on the
/// blocking pool: a run may wait for the store's lock (a `vouch` command beside the server)
/// and nothing else waits with it; the next run starts a full period after the previous one
/// ended, however long it took.
async fn maintain_every(
    shared: Arc<Shared>,
    period: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // The first run at once (`prepare` made missing CRLs only, and left a due one to this
    // run, off the start-up path), then one a period.
    let mut clock = tokio::time::interval(period);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The public documents read (and the CRLs compressed) before the first agent asks.
    let auth = shared.authority();
    let _ = tokio::task::spawn_blocking(move || refresh_documents(&auth)).await;
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
            crate::store::ldap::may_block(|| {
                if let Err(e) = auth.maintain(OffsetDateTime::now_utc()) {
                    store_failed(StoreStage::Maintenance, &e);
                }
                // The store's log into its files (a syncfs), once a period at most.
                if let Err(e) = auth.checkpoint() {
                    store_failed(StoreStage::Checkpoint, &e);
                }
                // The replay journal's expired buckets, here rather than in a claim (which
                // holds the store's lock), a bounded part each period.
                match auth.prune_journal(OffsetDateTime::now_utc(), PRUNE_BUDGET) {
                    Ok(Some(p)) if p.removed > 0 || p.left => {
                        tracing::info!(event = "journal-pruned", removed = p.removed, more_left = p.left);
                    }
                    Ok(_) => {}
                    Err(e) => store_failed(StoreStage::Maintenance, &e),
                }
                // The fleet's root CRL from the shared store, where it is newer than the one
                // here (revoked by a master holding the root key): counted from the next request.
                if auth.store.shares_root_crl() {
                    auth.take_shared_root_crl();
                    // The fleet: every master CA and every master's CRL, from the store.
                    if let Err(e) = auth.refresh_fleet(OffsetDateTime::now_utc()) {
                        store_failed(StoreStage::Fleet, &e);
                    }
                }
                // A CRL written meanwhile (here or by a `vouch` command) is compressed now,
                // not by the request that first asks for it.
                refresh_documents(&auth);
            })
        });
        if let Err(e) = run.await {
            store_failed(StoreStage::Maintenance, &e);
        }
    }
}

/// Reads the CA bundle and the CRLs into memory if they changed (see
/// [`crate::authority::documents`]); a failure is the requests' to report. The root CRL the
/// decisions count is read again too if it changed (each decision also looks: a `vouch
/// conductor revoke` beside the server counts from the next request on).
fn refresh_documents(auth: &Authority) {
    let _ = auth.crl_document.get();
    let _ = auth.ca_document.get();
    auth.refresh_own_crl();
}

/// SIGHUP: reload the policy and the service certificate; on any error keep the old ones.
fn reload(shared: &Shared) {
    let dir = DataDir::new(&shared.opts.dir);
    let mut siblings = shared.authority().fleet.clone();
    match Authority::open_with(&dir, &shared.opts.store) {
        Ok(a) => {
            // The fleet as read so far, kept: the new TLS configuration shares it.
            a.fleet.set(siblings.get().to_vec());
            siblings = a.fleet.clone();
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
    match tls_config(&dir, siblings) {
        Ok(t) => {
            if let Ok(mut w) = shared.tls.write() {
                *w = Arc::new(t);
            }
        }
        Err(e) => tracing::error!(event = "reload", what = "tls", ok = false, error = %e),
    }
}
