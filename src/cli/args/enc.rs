//! `vouch enc` on a compile server: where the certificates and CRLs come from.

use super::values::whole_number;
use clap::Args;
use std::path::PathBuf;

/// `vouch enc` on a compile server (the CA is vouch serve elsewhere). Puppet Server passes the
/// ENC only the certname: every setting also comes from the environment or a config file.
#[derive(Args, Debug, Default)]
pub struct EncRemoteArgs {
    /// vouch serve's address, https://HOST:PORT: the node's certificate is fetched from it
    /// (GET certificate/CERTNAME), verified against --cacert and the CA's CRL.
    #[arg(long, env = "VOUCH_ENC_CA_URL", value_name = "URL", conflicts_with = "puppet_cadir")]
    pub ca_url: Option<String>,
    /// The CA bundle (PEM: the master CA and the root) certificates must chain to.
    #[arg(long, env = "VOUCH_ENC_CACERT", value_name = "BUNDLE")]
    pub cacert: Option<PathBuf>,
    /// How long a fetched CRL and a cached certificate are used before asking the CA again
    /// (a revocation is refused at most this long after it; see --crl) [default: 60s].
    #[arg(long, env = "VOUCH_ENC_CRL_REFRESH", value_name = "DURATION", allow_hyphen_values = true)]
    pub crl_refresh: Option<String>,
    /// A CRL file checked too (repeatable), such as Puppet's hostcrl kept by `vouch crl --fetch`:
    /// a certificate listed there is refused at once.
    #[arg(long, env = "VOUCH_ENC_CRL", value_name = "FILE", value_delimiter = ',')]
    pub crl: Vec<PathBuf>,
    /// The cache of CRLs and certificates [default: /var/cache/vouch/enc for root, else
    /// $XDG_CACHE_HOME/vouch/enc or ~/.cache/vouch/enc].
    #[arg(long, env = "VOUCH_ENC_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// At most this many certificates are cached (the oldest are dropped) [default: 10000].
    #[arg(long, env = "VOUCH_ENC_CACHE_MAX", value_name = "N", allow_negative_numbers = true, value_parser = |s: &str| whole_number::<usize>(s, 0, None))]
    pub cache_max: Option<usize>,
    /// Where refusals and answers from a stale cache are logged: syslog (/dev/log, the
    /// default), stderr, or a file (Puppet Server discards an ENC's stderr).
    #[arg(long, env = "VOUCH_ENC_LOG", value_name = "syslog|stderr|FILE")]
    pub log: Option<String>,
    /// An administrator's certificate (PEM): with --client-key, administrators' overrides are
    /// read from the CA (classification_override/CERTNAME) and printed instead.
    #[arg(long, env = "VOUCH_ENC_CLIENT_CERT", value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// The key of --client-cert.
    #[arg(long, env = "VOUCH_ENC_CLIENT_KEY", value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// A TOML file with any of these settings (ca_url, cacert, crl_refresh, crl, cache_dir,
    /// cache_max, log, client_cert, client_key); the command line and the environment win
    /// [default: /etc/vouch/enc.toml when it exists].
    #[arg(long, env = "VOUCH_ENC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}
