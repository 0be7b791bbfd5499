//! `vouch serve`: the Puppet CA API over HTTPS, for stock Puppet agents.
//!
//! A thin skin: TLS (rustls, client certificates optional), HTTP/1.1 (hyper), limits
//! and logs here; every answer comes from [`api::handle`] over the [`Authority`].
//! Blocking store work runs on tokio's blocking pool; the store's own lock
//! serialises writers, also against `vouch` commands run beside the server.

pub mod api;
mod banner;
// Also the compile server's client of vouch serve (`vouch enc --ca-url`, `vouch crl --fetch`).
pub mod client;
mod client_auth;
mod http;
mod metrics;
mod peers;
pub mod rate;
mod server;
pub mod setup;
mod shared;
mod tls;

use crate::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The service's blocking threads: each request that issues holds one while it decides,
/// signs and waits for its batch (see `run`).
const BLOCKING_THREADS: usize = 32;

// An LDAP store's pools keep one idle connection per blocking thread: more threads than
// that would open and bind a connection per operation under a steady load.
const _: () = assert!(crate::store::ldap::MAX_IDLE >= BLOCKING_THREADS);

/// How the service runs. Every limit has a documented default (README, "vouch serve").
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub dir: PathBuf,
    /// The store (`--store`): the data directory's files, or a shared LDAP store.
    pub store: crate::store::StoreUrl,
    pub listen: SocketAddr,
    /// DNS names and IP addresses for the service's certificate; the first name is its certname.
    pub server_names: Vec<String>,
    pub key_type: crate::issuance::keys::KeyType,
    /// The service certificate's key type, when the operator chose one (`--service-key-type`):
    /// a certificate in place with another is issued again.
    pub service_key_type: Option<crate::issuance::keys::KeyType>,
    /// Largest request body accepted (a CSR is 1–4 KB; Puppet Server takes up to 1 MB).
    pub max_body: usize,
    /// Time allowed for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed for a request's headers, and for an idle kept-alive connection.
    pub header_timeout: Duration,
    /// Time allowed to receive a request's body.
    pub body_timeout: Duration,
    /// Connections served at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// Connections from one client address (IPv6: one /64) at once; more are closed at once.
    /// Once half of `max_connections` are in use, an address holds at most a sixteenth of
    /// them and a network (IPv4 /24, IPv6 /48) a quarter (`serve::peers`).
    pub max_per_peer: usize,
    /// The longest a connection may stay open, whatever it does.
    pub connection_lifetime: Duration,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Where Prometheus metrics are served over plain HTTP (`GET /metrics`); none by default.
    pub metrics_listen: Option<SocketAddr>,
}

impl ServeOptions {
    pub fn new(dir: PathBuf) -> Self {
        ServeOptions {
            dir,
            store: crate::store::StoreUrl::default(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8140)),
            server_names: Vec::new(),
            key_type: crate::issuance::keys::KeyType::default(),
            service_key_type: None,
            max_body: 256 * 1024,
            handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_per_peer: 256,
            connection_lifetime: Duration::from_secs(300),
            threads: 0,
            metrics_listen: None,
        }
    }
}

/// Prepares the data directory (first run: CA, policy, credentials) and serves until SIGTERM.
pub fn run(opts: ServeOptions) -> Result<(), Error> {
    // The addresses first: a port that is taken must not leave a new CA behind.
    let bind = |addr: SocketAddr, flag: &'static str| {
        std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| Error::Listen { addr, flag, source })
    };
    if let Some(m) = opts.metrics_listen {
        let overlap = m.ip() == opts.listen.ip() || m.ip().is_unspecified() || opts.listen.ip().is_unspecified();
        if m.port() != 0 && m.port() == opts.listen.port() && overlap {
            return Err(Error::Usage {
                detail: format!(
                    "--metrics-listen {m} is the service's own --listen {}: give the metrics a port of their own",
                    opts.listen
                ),
            });
        }
    }
    let listener = bind(opts.listen, crate::error::LISTEN_FLAG)?;
    let metrics = opts.metrics_listen.map(|addr| bind(addr, "--metrics-listen")).transpose()?;
    let report = setup::prepare(&opts)?;
    // Claims (under the store's lock) no longer prune the replay journal: the maintenance
    // runs do, without the lock, a bounded part at a time.
    crate::store::journal::prune_in_maintenance();
    // Eight malloc arenas, not glibc's default of up to 8 per core: freed memory stays spread
    // over fewer of them (with the default, 256 agents took 71 MB). Not two: the group commit's
    // leader, which holds the store's lock, then appears to wait on the arenas' locks behind the
    // signers (measured together with the 32 threads below: docs/benchmarks.md, section 9).
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    #[allow(unsafe_code)]
    let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, 8) };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Blocking threads decide, sign and wait for the group commit, so they bound its batch: the
    // batch's leader (one at a time, the store's lock held) is what limits the rate, and each
    // batch costs two synchronous writes however small it is. 32 threads (with the 8 arenas
    // above): batches of about 15 at 64 agents instead of 8, a median of 11% more certificates
    // a second over five alternating pairs, 32-33 MB instead of 27-28 MB (41 MB at 256 agents);
    // 64 threads added nothing more (docs/benchmarks.md, section 9). 256 threads took 83 MB.
    // An LDAP store's pools keep as many connections idle (each thread uses one at a time).
    builder.enable_all().max_blocking_threads(BLOCKING_THREADS).thread_name("vouch-serve");
    if opts.threads > 0 {
        builder.worker_threads(opts.threads);
    }
    let rt = builder.build().map_err(|source| Error::Io { path: "tokio runtime".into(), op: "start", source })?;
    rt.block_on(server::serve(opts, report, listener, metrics))
}
