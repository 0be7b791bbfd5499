//! The service and its measurement: `vouch serve`, `vouch bench`.

use super::formats::KeyTypeArg;
#[cfg(feature = "bench")]
use super::formats::OutFormat;
use super::values::{
    check_server_name, parse_socket_addr, whole_number, MAX_BODY_LIMIT, MAX_CONNECTIONS, MAX_LIFETIME_SECS,
    MAX_THREADS, MAX_TIMEOUT_SECS,
};
use clap::Args;
#[cfg(feature = "bench")]
use clap::Subcommand;
#[cfg(feature = "bench")]
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// IP address and port to listen on (0.0.0.0:8140 for every interface).
    #[arg(long, default_value = "127.0.0.1:8140", value_parser = parse_socket_addr)]
    pub listen: std::net::SocketAddr,
    /// A DNS name or IP address agents use to reach this service (repeatable); the first
    /// is the service certificate's certname [default: this host's name, localhost].
    #[arg(long = "server-name", value_parser = check_server_name)]
    pub server_names: Vec<String>,
    /// Key type for a CA created on the first run (a CA in place keeps its own) and, unless
    /// --service-key-type says another, for a service certificate issued now.
    #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
    pub key_type: KeyTypeArg,
    /// Key type of the service's own TLS key, whatever the CA's: every agent's TLS handshake
    /// is signed with it (p256 under an RSA CA halves a whole bootstrap's CPU). A service
    /// certificate with another key type is issued again at start [default: --key-type's,
    /// and the certificate in place is kept whatever its key].
    #[arg(long, value_enum)]
    pub service_key_type: Option<KeyTypeArg>,
    /// Largest request body accepted, in bytes (1 to 67108864).
    #[arg(long, default_value_t = 256 * 1024, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_BODY_LIMIT)))]
    pub max_body: u64,
    /// Seconds allowed for a request's headers and for an idle kept-alive connection (1 to 3600).
    #[arg(long, default_value_t = 30, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_TIMEOUT_SECS)))]
    pub header_timeout: u64,
    /// Seconds allowed for a request body and for the TLS handshake (1 to 3600).
    #[arg(long, default_value_t = 30, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_TIMEOUT_SECS)))]
    pub body_timeout: u64,
    /// Connections served at once, 1 to 1000000 (more wait in the kernel's backlog).
    #[arg(long, default_value_t = 1024, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_CONNECTIONS)))]
    pub max_connections: u64,
    /// Connections from one client address at once, 1 to 1000000 (more are closed at once); once half of --max-connections are in use, a sixteenth of them per address and a quarter per /24.
    #[arg(long, default_value_t = 256, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_CONNECTIONS)))]
    pub max_connections_per_address: u64,
    /// Seconds a connection may stay open, whatever it does (1 to 604800).
    #[arg(long, default_value_t = 300, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_LIFETIME_SECS)))]
    pub connection_lifetime: u64,
    /// Worker threads, 1 to 1024 [default: one per core].
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(MAX_THREADS)))]
    pub threads: Option<u64>,
    /// Also serve Prometheus metrics over plain HTTP at http://ADDR/metrics, such as
    /// 127.0.0.1:9140 (this host only) [default: no metrics].
    #[arg(long, env = "VOUCH_METRICS_LISTEN", value_name = "ADDR", value_parser = parse_socket_addr)]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// `vouch bench` (a vouch built with `--features bench`).
#[cfg(feature = "bench")]
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Decision, and decision + issuance (no store), per core, next to the signature floor.
    Decide {
        /// CA key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa4096,rsa2048,p256,ed25519")]
        ca_keys: Vec<KeyTypeArg>,
        /// Client (agent) key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa2048,rsa4096,p256")]
        client_keys: Vec<KeyTypeArg>,
        /// Seconds spent on each measurement (0.01 to 600).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        seconds: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// `vouch autosign` as Puppet Server runs it: process start to exit, median and p99.
    Hook {
        /// How many times the hook runs (1 to 100000).
        #[arg(long, default_value_t = 200, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(100_000)))]
        runs: u64,
        /// Without the replay journal and the audit log (no fsync).
        #[arg(long)]
        no_journal: bool,
    },
    /// N agents at once against a CA service (vouch serve or Puppet Server): PUT + GET each.
    Serve {
        /// The service's IP address and port.
        #[arg(long, default_value = "127.0.0.1:8140", value_parser = parse_socket_addr)]
        addr: std::net::SocketAddr,
        /// The name its certificate carries.
        #[arg(long, default_value = "localhost")]
        host: String,
        /// The CA bundle to trust [default: DIR/ca/ca_bundle.pem].
        #[arg(long, value_name = "FILE")]
        ca_bundle: Option<PathBuf>,
        /// The conductor certificate that vouches for the CSRs [default: DIR/conductor/conductor_crt.pem].
        #[arg(long, value_name = "FILE")]
        conductor_cert: Option<PathBuf>,
        /// The conductor's private key [default: DIR/conductor/conductor_key.pem].
        #[arg(long, value_name = "FILE")]
        conductor_key: Option<PathBuf>,
        /// Concurrency levels, comma-separated.
        #[arg(long, default_value = "1,8,64,256", allow_hyphen_values = true)]
        agents: String,
        /// Certificates each agent asks for (1 to 100000).
        #[arg(long, default_value_t = 10, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u64>(s, 1, Some(100_000)))]
        per_agent: u64,
        /// The agents' key type (Puppet agents: RSA).
        #[arg(long, value_enum, default_value_t = KeyTypeArg::Rsa2048)]
        client_key: KeyTypeArg,
        /// The server's PID, to report its peak RSS.
        #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| whole_number::<u32>(s, 1, None))]
        server_pid: Option<u32>,
        /// Each certificate is a whole agent bootstrap, as `puppet ssl bootstrap` does it: a new
        /// TLS connection, GET the CA bundle, GET the CRLs (no copy yet), PUT the CSR, GET the certificate.
        #[arg(long)]
        bootstrap: bool,
        /// Each certificate replaced by two GETs of the CA certificate on the agent's connection:
        /// what TLS, HTTP, the request log and the threads cost with no CSR, decision, signature
        /// or store. A floor to set beside a real run, never a CA's work.
        #[arg(long, conflicts_with = "bootstrap")]
        transport_only: bool,
        /// Do not ask for gzip-compressed answers (Puppet's agents do: `Accept-Encoding: gzip`).
        #[arg(long)]
        no_gzip: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
}
