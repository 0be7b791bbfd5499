//! What every connection of `vouch serve` shares: the options, the limits per client address,
//! and the authority and TLS config that SIGHUP swaps. Below both the server (which makes it
//! and reloads it) and the HTTP layer (which reads it).

use super::peers::PerAddress;
use super::rate::KeptRate;
use super::ServeOptions;
use crate::authority::Authority;
use std::sync::{Arc, RwLock};

/// What every connection shares. SIGHUP swaps the authority (policy) and TLS config.
pub(super) struct Shared {
    pub(super) opts: ServeOptions,
    /// Open connections per client address and network (`opts.max_per_peer`; shares of
    /// `opts.max_connections` once half are in use).
    pub(super) per_peer: Arc<PerAddress>,
    /// Refused requests kept per client address (`requests.kept_per_minute`), across reloads.
    pub(super) kept_rate: Arc<KeptRate>,
    pub(super) authority: RwLock<Arc<Authority>>,
    pub(super) tls: RwLock<Arc<rustls::ServerConfig>>,
}

impl Shared {
    pub(super) fn authority(&self) -> Arc<Authority> {
        match self.authority.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
    pub(super) fn tls(&self) -> Arc<rustls::ServerConfig> {
        match self.tls.read() {
            Ok(a) => a.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}
