//! Connections to one LDAP server: where it is (`ldap://`, `ldaps://`, `ldapi://`), how to
//! bind, and a small pool of blocking connections that reconnects by itself.

use super::super::StoreError;
use ldap3::{LdapConn, LdapConnSettings};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How vouch binds.
#[derive(Clone)]
pub enum Bind {
    /// Simple bind with a DN and the password read from a file.
    Simple { dn: String, password: String },
    /// SASL EXTERNAL (ldapi://: the server maps our uid/gid).
    External,
    /// No bind (anonymous): only for servers whose ACLs allow it.
    Anonymous,
}

impl std::fmt::Debug for Bind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bind::Simple { dn, .. } => write!(f, "simple bind as {dn:?}"),
            Bind::External => f.write_str("SASL EXTERNAL"),
            Bind::Anonymous => f.write_str("anonymous"),
        }
    }
}

/// One LDAP server: its address (`scheme://authority`, without the base DN), and how to
/// reach and bind to it.
#[derive(Clone, Debug)]
pub struct Server {
    /// `ldap://host:port`, `ldaps://host:port` or `ldapi://%2Fpath`.
    pub address: String,
    pub bind: Bind,
    /// ldaps: the CA certificates (PEM) the server's certificate must chain to.
    pub tls_ca: Option<PathBuf>,
    /// Bound on connecting and on each operation.
    pub timeout: Duration,
}

/// LDAP result codes vouch acts on (RFC 4511).
pub mod rc {
    pub const SUCCESS: u32 = 0;
    pub const SIZE_LIMIT_EXCEEDED: u32 = 4;
    pub const ADMIN_LIMIT_EXCEEDED: u32 = 11;
    pub const NO_SUCH_ATTRIBUTE: u32 = 16;
    pub const TYPE_OR_VALUE_EXISTS: u32 = 20;
    pub const NO_SUCH_OBJECT: u32 = 32;
    pub const INVALID_CREDENTIALS: u32 = 49;
    pub const INSUFFICIENT_ACCESS: u32 = 50;
    pub const BUSY: u32 = 51;
    pub const UNAVAILABLE: u32 = 52;
    pub const UNWILLING: u32 = 53;
    pub const ALREADY_EXISTS: u32 = 68;
}

/// A pool of bound connections to one server. A connection that fails is dropped; the
/// next operation connects anew, so vouch resumes by itself when the server returns.
pub struct Pool {
    pub server: Server,
    idle: Mutex<Vec<LdapConn>>,
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// Connections kept idle at most (more concurrent operations open more, then close them):
/// as many as `vouch serve` has blocking threads, each of which uses one connection of a
/// pool at a time, so that a steady load opens no connection after the first ones.
pub const MAX_IDLE: usize = 32;

fn unavailable(server: &Server, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable { detail: format!("LDAP server {}: {e}", server.address) }
}

impl Pool {
    pub fn new(server: Server) -> Result<Self, StoreError> {
        let tls = match (&server.tls_ca, server.address.starts_with("ldaps://")) {
            (Some(path), _) => Some(Arc::new(tls_config(path)?)),
            (None, true) => {
                return Err(StoreError::Ldap {
                    op: "connect",
                    dn: server.address.clone(),
                    detail: "an ldaps:// store needs --ldap-ca FILE (the CA certificates its server's \
                             certificate chains to)"
                        .into(),
                })
            }
            (None, false) => None,
        };
        Ok(Pool { server, idle: Mutex::new(Vec::new()), tls })
    }

    fn connect(&self) -> Result<LdapConn, StoreError> {
        let mut settings = LdapConnSettings::new().set_conn_timeout(self.server.timeout);
        if let Some(cfg) = &self.tls {
            settings = settings.set_config(cfg.clone());
        }
        let mut conn = LdapConn::with_settings(settings, &self.server.address).map_err(|e| self.connect_failed(e))?;
        crate::obs::metrics::METRICS.ldap("bind");
        let res = match &self.server.bind {
            Bind::Simple { dn, password } => {
                conn.with_timeout(self.server.timeout).simple_bind(dn, password).map_err(|e| self.connect_failed(e))?
            }
            Bind::External => {
                conn.with_timeout(self.server.timeout).sasl_external_bind().map_err(|e| self.connect_failed(e))?
            }
            Bind::Anonymous => return Ok(conn),
        };
        match res.rc {
            rc::SUCCESS => Ok(conn),
            rc::BUSY | rc::UNAVAILABLE => Err(unavailable(&self.server, format!("bind: {}", res.text))),
            rc::INVALID_CREDENTIALS => Err(StoreError::Ldap {
                op: "bind",
                dn: self.bind_name(),
                detail: format!(
                    "invalid credentials (49) at {}: check --ldap-bind-dn and --ldap-password-file",
                    self.server.address
                ),
            }),
            code => Err(StoreError::Ldap {
                op: "bind",
                dn: self.bind_name(),
                detail: format!("result {code} at {}: {}", self.server.address, res.text),
            }),
        }
    }

    /// Who binds, for messages: the DN, or the mechanism.
    fn bind_name(&self) -> String {
        match &self.server.bind {
            Bind::Simple { dn, .. } => dn.clone(),
            Bind::External => "SASL EXTERNAL".into(),
            Bind::Anonymous => "anonymous".into(),
        }
    }

    /// A connection that could not be made: unavailable (retry later), unless the server's
    /// TLS certificate was refused (another CA, another name, expired), which waiting never
    /// changes: a configuration error then.
    fn connect_failed(&self, e: ldap3::LdapError) -> StoreError {
        let text = e.to_string();
        if text.contains("invalid peer certificate") || text.contains("InvalidCertificate") {
            return StoreError::Ldap {
                op: "TLS verification",
                dn: self.server.address.clone(),
                detail: format!("{text}: the server's certificate must chain to --ldap-ca and name the URL's host"),
            };
        }
        unavailable(&self.server, e)
    }

    /// Runs `f` on a bound connection. An I/O failure (the server went away) drops the
    /// connection and is retried once on a fresh one (a pooled connection may have been
    /// closed by a server restart); a second failure is [`StoreError::Unavailable`].
    /// `f` returns the LDAP result; what its codes mean is the caller's business.
    ///
    /// ldap3's blocking connection drives its own small runtime, which tokio forbids inside
    /// another runtime's async context (`vouch serve`'s start-up, its signal handling): there
    /// the operation runs on a thread of its own.
    pub fn run<T: Send>(
        &self,
        f: impl FnMut(&mut LdapConn) -> ldap3::result::Result<T> + Send,
    ) -> Result<T, StoreError> {
        on_plain_thread(|| self.run_here(f)).map(|(v, _)| v)
    }

    /// [`Pool::run`] for a write, saying whether it was sent twice: the first attempt failed
    /// after its request may have reached the server (an answer that timed out, a connection
    /// lost while waiting), so the server may have applied it before the second. The caller
    /// then reads what is there before it believes a "lost race" answer (`resent.rs`).
    pub fn run_write<T: Send>(
        &self,
        f: impl FnMut(&mut LdapConn) -> ldap3::result::Result<T> + Send,
    ) -> Result<(T, bool), StoreError> {
        on_plain_thread(|| self.run_here(f))
    }

    fn run_here<T>(
        &self,
        mut f: impl FnMut(&mut LdapConn) -> ldap3::result::Result<T>,
    ) -> Result<(T, bool), StoreError> {
        let mut last = None;
        for attempt in 0..2 {
            let pooled = if attempt == 0 { self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() } else { None };
            let mut conn = match pooled {
                Some(c) => c,
                None => self.connect()?,
            };
            conn.with_timeout(self.server.timeout);
            match f(&mut conn) {
                Ok(v) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < MAX_IDLE {
                        idle.push(conn);
                    }
                    return Ok((v, attempt > 0));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(unavailable(&self.server, last.map(|e| e.to_string()).unwrap_or_default()))
    }
}

impl Drop for Pool {
    /// Idle connections own runtimes, which tokio forbids dropping in an async context (an
    /// Authority replaced at SIGHUP may be dropped there): they are dropped on a thread of
    /// their own.
    fn drop(&mut self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        if idle.is_empty() {
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            drop(idle);
        } else {
            let _ = std::thread::Builder::new().name("vouch-ldap-close".into()).spawn(move || drop(idle));
        }
    }
}

thread_local! {
    /// Set while this thread runs work that may block (see [`may_block`]).
    static MAY_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` marking this thread as one that may block on LDAP directly: the closures `vouch
/// serve` hands to tokio's blocking pool, which are inside a runtime but never drive it.
pub fn may_block<T>(f: impl FnOnce() -> T) -> T {
    let before = MAY_BLOCK.with(|m| m.replace(true));
    let out = f();
    MAY_BLOCK.with(|m| m.set(before));
    out
}

/// Runs `f` here, or on a scoped thread of its own when this thread is inside a tokio
/// runtime and not marked by [`may_block`] (see [`Pool::run`]).
fn on_plain_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() || MAY_BLOCK.with(std::cell::Cell::get) {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// A TLS client configuration trusting only the certificates in `path` (PEM).
fn tls_config(path: &std::path::Path) -> Result<rustls::ClientConfig, StoreError> {
    let bad = |detail: String| StoreError::Ldap { op: "read --ldap-ca", dn: path.display().to_string(), detail };
    let bytes =
        crate::files::input::read_path(path, crate::files::input::Kind::Cert).map_err(|e| bad(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    let certs = crate::encoding::pem::find_all(&bytes, "CERTIFICATE").map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    for der in certs {
        roots.add(rustls_pki_types::CertificateDer::from(der)).map_err(|e| bad(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
