//! The command line: a thin skin over the library.
#![deny(clippy::arithmetic_side_effects)]

use crate::attrs::{self, CertEncoding, CsrAttributes, Format};
use crate::authority::{Authority, ListEntry, SignOutcome};
use crate::ca::{self, CaDir, ConductorSpec};
use crate::classification::Classification;
use crate::decide::{self, Request};
use crate::error::Error;
use crate::keys::KeyType;
use crate::policy::{self, Policy};
use crate::{csr, fsutil, oids};
use clap::{Args, Parser, Subcommand};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The fallback policy location for the autosign hook.
pub const SYSTEM_POLICY: &str = "/etc/vouch/policy.toml";

#[derive(Parser, Debug)]
#[command(name = "vouch", version, about = "A CA that autosigns Puppet agents vouched for by a cloud conductor")]
pub struct Cli {
    /// The CA's data directory
    /// [default: /var/lib/vouch for root, else $XDG_DATA_HOME/vouch or ~/.local/share/vouch].
    /// It, `ca/`, the policy and the CA keys must be owned by root or the user running vouch and
    /// not be writable by group or others; a new one is created 0700.
    #[arg(long, global = true, env = "VOUCH_DIR", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Decide as of this RFC 3339 time instead of the clock (for tests and investigations).
    #[arg(long, global = true, hide = true)]
    pub now: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands that never read the data directory: `--dir` is hidden from their help.
const WITHOUT_DIR: [&[&str]; 3] = [&["csr"], &["bench", "decide"], &["bench", "hook"]];

/// vouch's command line, with `--dir` shown only where it is used: the commands that never
/// read the data directory get their own hidden `--dir` (accepted and ignored, so that
/// `VOUCH_DIR` or a habitual `--dir` never breaks them), which global propagation leaves alone.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    fn hide_dir(c: clap::Command, path: &[&str]) -> clap::Command {
        match path.split_first() {
            None => c.arg(
                clap::Arg::new("dir")
                    .long("dir")
                    .env("VOUCH_DIR")
                    .value_name("DIR")
                    .value_parser(clap::value_parser!(PathBuf))
                    .hide(true),
            ),
            Some((first, rest)) => c.mut_subcommand(*first, |sub| hide_dir(sub, rest)),
        }
    }
    let mut c = Cli::command();
    for path in WITHOUT_DIR {
        c = hide_dir(c, path);
    }
    c
}

/// Parses a command line (with [`command`]).
pub fn parse_from(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut c = command();
    let m = c.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&m).map_err(|e| e.format(&mut c))
}

/// The revocation reasons `vouch revoke --reason` accepts, kebab-case and as RFC 5280 names them.
pub const REVOCATION_REASONS: [(&str, &str); 7] = [
    ("unspecified", "unspecified"),
    ("key-compromise", "keyCompromise"),
    ("ca-compromise", "caCompromise"),
    ("affiliation-changed", "affiliationChanged"),
    ("superseded", "superseded"),
    ("cessation-of-operation", "cessationOfOperation"),
    ("privilege-withdrawn", "privilegeWithdrawn"),
];

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage the CA itself.
    #[command(subcommand)]
    Ca(CaCommand),
    /// Conductor credentials and signing.
    #[command(subcommand)]
    Conductor(ConductorCommand),
    /// Make a key and a CSR carrying attributes, exactly as a Puppet agent does.
    Csr(CsrArgs),
    /// Puppet Server's policy-based autosign executable: certname as argument, CSR on stdin, exit 0 signs.
    Autosign(AutosignArgs),
    /// Explain the decision for a CSR (like autosign, but reads a file and prints every reason).
    Check(CheckArgs),
    /// Decide on a CSR and, on a grant, issue its certificate from the master CA
    /// (prints the certificate, then the master CA and root certificates).
    Sign(SignCsrArgs),
    /// Serve the Puppet CA API over HTTPS for Puppet agents (creates a CA on the first run).
    Serve(ServeArgs),
    /// Measure vouch next to the cost of its signatures (decision, hook, service).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Administrator certificates for `vouch serve` (Puppet's pp_cli_auth).
    #[command(subcommand)]
    Admin(AdminCommand),
    /// List requests; with --all, signed and revoked certificates too.
    List {
        /// Also list signed and revoked certificates (default: pending requests only).
        #[arg(long)]
        all: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// Revoke a certname's certificate and regenerate the CRL.
    Revoke {
        /// The node whose current certificate is revoked.
        certname: String,
        /// Why, kebab-case or as RFC 5280 spells it: unspecified, key-compromise (keyCompromise),
        /// ca-compromise (caCompromise), affiliation-changed (affiliationChanged), superseded,
        /// cessation-of-operation (cessationOfOperation), privilege-withdrawn (privilegeWithdrawn).
        #[arg(long, default_value = "unspecified")]
        reason: String,
    },
    /// Revoke a certname's certificate and forget it (and any pending request);
    /// exit 2 if the CA has neither for that name.
    Clean {
        /// The node to revoke and forget.
        certname: String,
    },
    /// Regenerate the CRL (signed by the master CA) and print or write it.
    Crl {
        /// Write the CRL here (an existing file is replaced; - or no --out: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// A new certificate for the same key and classification, new validity; the old one is superseded.
    Renew {
        /// The node whose current certificate is renewed.
        certname: String,
        /// Write the certificate and chain here (an existing file is replaced; - or no --out: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Print a node's classification from its certificate, as Puppet's external node classifier.
    Enc {
        /// The node (its current certificate in the store, or in --puppet-cadir).
        certname: Option<String>,
        /// Read this certificate file instead; trusts the file's origin, checks only its validity.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["certname", "puppet_cadir"])]
        cert: Option<PathBuf>,
        /// Hook mode: read CERTNAME's certificate from Puppet Server's CA directory
        /// (DIR/signed/CERTNAME.pem), verified against DIR/ca_crt.pem and DIR/ca_crl.pem.
        #[arg(long, value_name = "DIR", requires = "certname")]
        puppet_cadir: Option<PathBuf>,
        /// The policy whose classification settings (mirror OID, size cap) apply
        /// [default: the --dir CA's policy, if any, else vouch's defaults].
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
}

/// The rule for every file vouch writes, shown in each output option's help.
const OUTPUT_RULE: &str = "Outputs: - is stdout; a device or FIFO is written through; a symbolic link or \
                           directory is refused; a regular file is written atomically (temporary file, \
                           rename). A private key, and the certificate or CSR made with it, never \
                           replace an existing file; every other output (attributes, certificates, \
                           CRLs) replaces it.";

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct SignCsrArgs {
    /// The certificate request (PEM or DER) to decide on.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// Write the certificate and chain here (an existing file is replaced; - or no --out: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum CaCommand {
    /// Create a root CA, a master CA and a default policy in DIR (created 0700 if new).
    Init {
        /// Key type of the root and master CA.
        #[arg(long, value_enum, default_value_t = KeyType::P256)]
        key_type: KeyType,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConductorCommand {
    /// Issue a conductor certificate (EKU 1.3.6.1.4.1.34380.2.0) from the root.
    #[command(after_help = OUTPUT_RULE)]
    New {
        /// The conductor's name (its certificate's CN).
        name: String,
        /// Write the conductor's certificate here (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        cert_out: PathBuf,
        /// Write the conductor's private key here, mode 0600 (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        key_out: PathBuf,
        /// The conductor's key type.
        #[arg(long, value_enum, default_value_t = KeyType::P256)]
        key_type: KeyType,
        /// Validity in days, at least 1 (capped at the root's notAfter).
        #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..))]
        days: u32,
    },
    /// Sign a node's attributes with a conductor key.
    Sign(SignArgs),
}

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct SignArgs {
    /// The conductor's certificate (PEM or DER), carrying EKU 1.3.6.1.4.1.34380.2.0.
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// The conductor's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// YAML classification file, or - for stdin.
    #[arg(long, value_name = "FILE")]
    pub classification: String,
    /// Lifetime of the attributes: 90s, 30m, 2h, 1d (the CA's policy caps it: 7d by default;
    /// vouch warns when the policy at hand, from --dir, VOUCH_POLICY or /etc/vouch, would refuse).
    #[arg(long, conflicts_with = "expires", required_unless_present = "expires")]
    pub expires_in: Option<String>,
    /// Absolute expiry, RFC 3339.
    #[arg(long)]
    pub expires: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::PuppetYaml)]
    pub format: Format,
    /// Write the attributes here, mode 0600 (an existing file is replaced; - or no --out: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// How attribute .2.4 carries the conductor certificate.
    #[arg(long, value_enum, default_value_t = CertEncoding::Base64Der)]
    pub cert_encoding: CertEncoding,
    /// The classification mirror extension request OID (must match the CA's policy).
    #[arg(long, default_value = "1.3.6.1.4.1.34380.1.2.5")]
    pub mirror_oid: String,
    /// Do not add the classification mirror extension request.
    #[arg(long)]
    pub no_mirror: bool,
    /// Bind the attributes to this certname (signature version 2, with a one-time nonce).
    #[arg(long)]
    pub certname: Option<String>,
    /// Signature version: 2 whenever --certname is given, else 1 (the seed's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=2))]
    pub version: Option<u32>,
}

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct CsrArgs {
    /// The node's certname (the CSR's CN).
    #[arg(long)]
    pub certname: String,
    /// The attributes file written by 'vouch conductor sign' (yaml, txt, json or cloud-config).
    #[arg(long, value_name = "FILE")]
    pub attributes: PathBuf,
    /// The node's key type.
    #[arg(long, value_enum, default_value_t = KeyType::P256)]
    pub key_type: KeyType,
    /// Write the node's new private key here, mode 0600 (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub key_out: PathBuf,
    /// Write the CSR (PEM) here (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub csr_out: PathBuf,
}

#[derive(Args, Debug)]
pub struct AutosignArgs {
    /// The certname Puppet Server asks about; the CSR is read from stdin.
    pub certname: String,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

/// Upper bounds of `vouch serve`'s numeric limits (each also at least 1).
pub const MAX_BODY_LIMIT: u64 = 64 * 1024 * 1024;
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const MAX_LIFETIME_SECS: u64 = 7 * 86_400;
pub const MAX_CONNECTIONS: u64 = 1_000_000;
pub const MAX_THREADS: u64 = 1024;

/// `--listen`/`--addr`: an IP address and a port, with the fix for a bare port or name.
fn parse_socket_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse::<std::net::SocketAddr>().map_err(|_| {
        let port = s.trim().trim_start_matches(':');
        if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            format!("'{s}' is a port without an address: give 127.0.0.1:{port} (this host only) or 0.0.0.0:{port} (every interface; [::]:{port} for IPv6)")
        } else {
            format!("'{s}' is not an IP address and port such as 127.0.0.1:8140, 0.0.0.0:8140 or [::1]:8140 (host names are not accepted)")
        }
    })
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// IP address and port to listen on (0.0.0.0:8140 for every interface).
    #[arg(long, default_value = "127.0.0.1:8140", value_parser = parse_socket_addr)]
    pub listen: std::net::SocketAddr,
    /// A DNS name or IP address agents use to reach this service (repeatable); the first
    /// is the service certificate's certname [default: this host's name, localhost].
    #[arg(long = "server-name", value_parser = crate::serve::setup::check_server_name)]
    pub server_names: Vec<String>,
    /// Key type for a CA created on the first run and for the service's certificate.
    #[arg(long, value_enum, default_value_t = KeyType::P256)]
    pub key_type: KeyType,
    /// Largest request body accepted, in bytes (1 to 67108864).
    #[arg(long, default_value_t = 256 * 1024, value_parser = clap::value_parser!(u64).range(1..=MAX_BODY_LIMIT))]
    pub max_body: u64,
    /// Seconds allowed for a request's headers and for an idle kept-alive connection (1 to 3600).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_SECS))]
    pub header_timeout: u64,
    /// Seconds allowed for a request body and for the TLS handshake (1 to 3600).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=MAX_TIMEOUT_SECS))]
    pub body_timeout: u64,
    /// Connections served at once, 1 to 1000000 (more wait in the kernel's backlog).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=MAX_CONNECTIONS))]
    pub max_connections: u64,
    /// Connections from one client address at once, 1 to 1000000 (more are closed at once).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=MAX_CONNECTIONS))]
    pub max_connections_per_address: u64,
    /// Seconds a connection may stay open, whatever it does (1 to 604800).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=MAX_LIFETIME_SECS))]
    pub connection_lifetime: u64,
    /// Worker threads, 1 to 1024 [default: one per core].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_THREADS))]
    pub threads: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Decision, and decision + issuance (no store), per core, next to the signature floor.
    Decide {
        /// CA key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa4096,rsa2048,p256,ed25519")]
        ca_keys: Vec<KeyType>,
        /// Client (agent) key types, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "rsa2048,rsa4096,p256")]
        client_keys: Vec<KeyType>,
        /// Seconds spent on each measurement (0.01 to 600).
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// `vouch autosign` as Puppet Server runs it: process start to exit, median and p99.
    Hook {
        /// How many times the hook runs (1 to 100000).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
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
        #[arg(long, default_value = "1,8,64,256")]
        agents: String,
        /// Certificates each agent asks for (1 to 100000).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        per_agent: u64,
        /// The agents' key type (Puppet agents: RSA).
        #[arg(long, value_enum, default_value_t = KeyType::Rsa2048)]
        client_key: KeyType,
        /// The server's PID, to report its peak RSS.
        #[arg(long)]
        server_pid: Option<u32>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Issue an administrator certificate (clientAuth, pp_cli_auth) from the master CA.
    #[command(after_help = OUTPUT_RULE)]
    New {
        /// The administrator's certname.
        name: String,
        /// Write the administrator's certificate here (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        cert_out: PathBuf,
        /// Write the administrator's private key here, mode 0600 (never replaces an existing file).
        #[arg(long, value_name = "FILE")]
        key_out: PathBuf,
        /// The administrator's key type.
        #[arg(long, value_enum, default_value_t = KeyType::P256)]
        key_type: KeyType,
    },
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The certificate request (PEM or DER) to explain.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub format: OutFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    Text,
    Json,
}

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_REFUSED: i32 = 1;
pub const EXIT_ERROR: i32 = 2;

/// The range `--now` accepts: certificate times must stay encodable (years 0 to 9999 after
/// backdating and validity) and the Unix-time checks meaningful.
const NOW_MIN_YEAR: i32 = 1970;
const NOW_MAX_YEAR: i32 = 9000;

fn now(cli: &Cli) -> Result<OffsetDateTime, Error> {
    match &cli.now {
        None => Ok(OffsetDateTime::now_utc()),
        Some(s) => {
            let t = OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|e| Error::Usage { detail: format!("--now {s:?} is not RFC 3339: {e}") })?;
            if !(NOW_MIN_YEAR..NOW_MAX_YEAR).contains(&t.year()) {
                return Err(Error::Usage {
                    detail: format!("--now {s:?} is outside the years {NOW_MIN_YEAR} to {}", NOW_MAX_YEAR - 1),
                });
            }
            Ok(t)
        }
    }
}

/// The data directory when neither --dir nor VOUCH_DIR is given, for root.
pub const DEFAULT_DIR: &str = "/var/lib/vouch";

/// The data directory: --dir, VOUCH_DIR, then /var/lib/vouch for root and
/// `$XDG_DATA_HOME/vouch` (else `~/.local/share/vouch`) for everyone else.
pub fn default_dir() -> PathBuf {
    if fsutil::euid() == 0 {
        return PathBuf::from(DEFAULT_DIR);
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("vouch");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/share/vouch"),
        None => PathBuf::from(DEFAULT_DIR),
    }
}

fn dir(cli: &Cli) -> Result<CaDir, Error> {
    Ok(CaDir::new(cli.dir.clone().unwrap_or_else(default_dir)))
}

fn read_file(path: &Path, kind: crate::input::Kind) -> Result<Vec<u8>, Error> {
    crate::input::read(path, kind)
}

/// Writes to standard output and flushes, reporting a failed write (a full disk, a closed
/// pipe) as an error instead of panicking as `println!` does.
pub fn say(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(|source| Error::Io {
        path: "stdout".into(),
        op: "write",
        source,
    })
}

/// `say` with a newline, formatted.
macro_rules! sayln {
    ($($arg:tt)*) => {
        say(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// A line on standard error; a failure to write it is ignored (never a panic).
fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Whether an output may replace an existing regular file (see [`OUTPUT_RULE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replace {
    /// Attributes, certificates, CRLs: replaced atomically.
    Yes,
    /// Private keys and what pairs with them: never.
    Never,
}

/// Writes one output file by the rule of [`fsutil::write_output`]; `None` is stdout.
fn write_out(out: Option<&Path>, text: &str, mode: u32) -> Result<(), Error> {
    write_file(out.unwrap_or(Path::new("-")), text, mode, Replace::Yes).map(|_| ())
}

fn write_file(path: &Path, text: &str, mode: u32, replace: Replace) -> Result<fsutil::Written, Error> {
    let shown = if path.as_os_str() == "-" { PathBuf::from("stdout") } else { path.to_path_buf() };
    fsutil::write_output(path, text.as_bytes(), mode, replace == Replace::Yes).map_err(|e| output_error(shown, e))
}

/// Writes a private key and then what pairs with it (a certificate, a CSR), both new files:
/// if the second write fails, a key file just created is removed again, so the two exist
/// as a pair or not at all.
fn write_pair(key_out: &Path, key: &str, other_out: &Path, other: &str) -> Result<(), Error> {
    let written = write_file(key_out, key, 0o600, Replace::Never)?;
    if let Err(e) = write_file(other_out, other, 0o644, Replace::Never) {
        let removed = written == fsutil::Written::Created && std::fs::remove_file(key_out).is_ok();
        return Err(Error::Partial {
            done: if removed {
                format!("the private key written to {} was removed again", key_out.display())
            } else {
                format!("the private key was written to {} without its pair", key_out.display())
            },
            error: Box::new(e),
        });
    }
    Ok(())
}

fn output_error(path: PathBuf, e: fsutil::OutputError) -> Error {
    use fsutil::OutputError as E;
    match e {
        E::Exists => Error::AlreadyExists { path },
        E::Symlink => Error::Output {
            path,
            detail: "it is a symbolic link; vouch never writes through one (it would replace or \
                     fill whatever file the link points to): give the target's path"
                .into(),
        },
        E::Directory => Error::Output { path, detail: "it is a directory".into() },
        E::Io(source) => Error::Io { path, op: "write", source },
    }
}

/// Checks every output of a command BEFORE the command changes anything (issues, revokes,
/// spends attributes, makes a key), by the rule [`fsutil::write_output`] will apply: no
/// symbolic link, no directory, an existing directory to create it in, no existing regular
/// file where the output never replaces one (a private key and what pairs with it), and no
/// two outputs of one command at the same place (compared as canonical parent directory +
/// file name, so `a.pem`, `./a.pem` and `DIR/../a.pem` are one). `-` (stdout) is not a path.
fn preflight(outputs: &[(&Path, Replace)]) -> Result<(), Error> {
    use fsutil::OutputError as E;
    let mut seen: Vec<(PathBuf, std::ffi::OsString, &Path)> = Vec::new();
    for &(p, replace) in outputs {
        if p.as_os_str() == "-" {
            continue;
        }
        let refuse = |detail: String| Error::Output { path: p.to_path_buf(), detail };
        match fsutil::output_kind(p) {
            Ok(Some(t)) if t.is_symlink() => return Err(output_error(p.to_path_buf(), E::Symlink)),
            Ok(Some(t)) if t.is_dir() => return Err(output_error(p.to_path_buf(), E::Directory)),
            Ok(Some(_)) if replace == Replace::Never && fsutil::output_occupied(p) => {
                return Err(output_error(p.to_path_buf(), E::Exists))
            }
            Ok(_) => {}
            Err(source) => return Err(Error::Io { path: p.to_path_buf(), op: "look at", source }),
        }
        let Some(file) = p.file_name() else {
            return Err(refuse("it names no file (it ends in '..' or '/')".into()));
        };
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let canonical = match std::fs::canonicalize(parent) {
            Ok(c) if c.is_dir() => c,
            Ok(_) => return Err(refuse(format!("{} is not a directory", parent.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(refuse(format!("its directory {} does not exist", parent.display())))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(refuse(format!("{} is not a directory", parent.display())))
            }
            Err(source) => return Err(Error::Io { path: parent.to_path_buf(), op: "look at", source }),
        };
        if let Some((_, _, first)) = seen.iter().find(|(d, f, _)| *d == canonical && f.as_os_str() == file) {
            return Err(refuse(format!(
                "it is the same file as {}: each output of a command needs its own path",
                first.display()
            )));
        }
        seen.push((canonical, file.to_os_string(), p));
    }
    Ok(())
}

/// A write that failed after the command changed the CA (or made a key): the error says
/// what was done and where to find it, then why the write failed.
fn after(done: impl Into<String>) -> impl FnOnce(Error) -> Error {
    let done = done.into();
    move |e| Error::Partial { done, error: Box::new(e) }
}

/// Where the store keeps a certname's current certificate.
fn stored_cert(auth: &Authority, certname: &str) -> String {
    auth.dir.ca().join("signed").join(format!("{certname}.pem")).display().to_string()
}

/// Finds the policy: --policy, then VOUCH_POLICY, then VOUCH_DIR (or --dir), then /etc/vouch.
pub fn find_policy(explicit: Option<&Path>, dir: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("VOUCH_POLICY").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    if let Some(d) = dir {
        let p = d.join(ca::POLICY);
        if p.exists() {
            return Ok(p);
        }
        tried.push(p);
    }
    let sys = PathBuf::from(SYSTEM_POLICY);
    if sys.exists() {
        return Ok(sys);
    }
    tried.push(sys);
    Err(Error::PolicyNotFound { tried })
}

/// Runs the command; returns the exit code.
pub fn run(cli: Cli) -> Result<i32, Error> {
    match &cli.command {
        Command::Ca(CaCommand::Init { key_type }) => {
            let d = dir(&cli)?;
            let r = ca::init(&d, *key_type, now(&cli)?)?;
            sayln!("Created a {} root CA and master CA in {}", r.key_type.name(), r.ca_dir.display())?;
            sayln!("Root CA fingerprint (SHA-256 of the root certificate): {}", r.root_fingerprint)?;
            sayln!("Policy: {}", r.policy.display())?;
            sayln!("Next: vouch conductor new NAME --dir {} --cert-out NAME.pem --key-out NAME.key", d.dir.display())?;
            Ok(EXIT_OK)
        }
        Command::Conductor(ConductorCommand::New { name, cert_out, key_out, key_type, days }) => {
            ca::check_conductor_name(name)?;
            preflight(&[(cert_out, Replace::Never), (key_out, Replace::Never)])?;
            let d = dir(&cli)?;
            let spec = ConductorSpec { name, key_type: *key_type, days: *days };
            let c = ca::issue_conductor(&d, &spec, now(&cli)?)?;
            // A conductor certificate is kept nowhere else: unwritten, it is simply lost.
            write_pair(key_out, &c.key_pem, cert_out, &c.cert_pem)?;
            if c.capped {
                note(&format!(
                    "vouch: note: --days {days} reaches past the root CA's notAfter; the certificate ends with it, {}",
                    attrs::format_expiry(c.not_after)
                ));
            }
            sayln!("Conductor {name}: certificate {} key {}", cert_out.display(), key_out.display())?;
            sayln!("Valid until {}; fingerprint (SHA-256): {}", attrs::format_expiry(c.not_after), c.fingerprint)?;
            Ok(EXIT_OK)
        }
        Command::Conductor(ConductorCommand::Sign(a)) => conductor_sign(&cli, a),
        Command::Csr(a) => make_csr(a),
        Command::Autosign(a) => autosign(&cli, a),
        Command::Check(a) => check(&cli, a),
        Command::Sign(a) => {
            preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let csr = read_file(&a.csr, crate::input::Kind::Csr)?;
            let certname = certname_for(&a.csr, &csr, a.certname.as_deref())?;
            match auth.sign(&csr, Some(&certname), now(&cli)?)? {
                SignOutcome::Issued(i) => {
                    write_out(a.out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(
                        format!(
                            "the certificate for {} was issued (serial {}) and is in the store: `vouch list --all`, {}",
                            i.certname,
                            i.serial_hex,
                            stored_cert(&auth, &i.certname)
                        ),
                    ))?;
                    note(&format!(
                        "vouch: issued {} serial {} valid until {}",
                        i.certname,
                        i.serial_hex,
                        crate::attrs::format_expiry(i.not_after)
                    ));
                    Ok(EXIT_OK)
                }
                SignOutcome::Refused(r) => {
                    print_refusals(&r, &mut std::io::stderr());
                    Ok(EXIT_REFUSED)
                }
            }
        }
        Command::Serve(a) => {
            if cli.now.is_some() {
                return Err(Error::Usage { detail: "vouch serve runs on the clock; --now is not accepted".into() });
            }
            // Each limit was range-checked by clap (at least 1; the upper bounds above).
            let size = |v: u64, flag: &str| {
                usize::try_from(v)
                    .map_err(|_| Error::Usage { detail: format!("{flag} {v} is larger than this machine can count") })
            };
            let mut opts = crate::serve::ServeOptions::new(dir(&cli)?.dir);
            opts.listen = a.listen;
            opts.server_names = a.server_names.clone();
            opts.key_type = a.key_type;
            opts.max_body = size(a.max_body, "--max-body")?;
            opts.header_timeout = std::time::Duration::from_secs(a.header_timeout);
            opts.body_timeout = std::time::Duration::from_secs(a.body_timeout);
            opts.handshake_timeout = opts.body_timeout;
            opts.max_connections = size(a.max_connections, "--max-connections")?;
            opts.max_per_peer = size(a.max_connections_per_address, "--max-connections-per-address")?;
            opts.connection_lifetime = std::time::Duration::from_secs(a.connection_lifetime);
            opts.threads = match a.threads {
                Some(t) => size(t, "--threads")?,
                None => 0,
            };
            crate::serve::run(opts)?;
            Ok(EXIT_OK)
        }
        Command::Bench(b) => bench(&cli, b),
        Command::Admin(AdminCommand::New { name, cert_out, key_out, key_type }) => {
            preflight(&[(cert_out, Replace::Never), (key_out, Replace::Never)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let (issued, key) = auth.issue_local(
                &crate::authority::LocalSpec {
                    certname: name,
                    role: crate::issue::LocalRole::Admin,
                    dns_names: &[],
                    ip_addresses: &[],
                    key_type: *key_type,
                    replace: false,
                },
                now(&cli)?,
            )?;
            let stored = stored_cert(&auth, name);
            write_file(key_out, &key, 0o600, Replace::Never).map_err(after(format!(
                "the administrator certificate {name} was issued (serial {}) and is in the store ({stored}), \
                 but its private key is lost: revoke it with `vouch revoke {name}` and issue a new one",
                issued.serial_hex
            )))?;
            write_file(cert_out, &issued.pem, 0o644, Replace::Never).map_err(after(format!(
                "the administrator certificate {name} was issued (serial {}) and is in the store: \
                 copy {stored}; its private key is in {}",
                issued.serial_hex,
                key_out.display()
            )))?;
            sayln!(
                "Administrator {name}: certificate {} key {} (serial {}; revoke with 'vouch revoke {name}')",
                cert_out.display(),
                key_out.display(),
                issued.serial_hex
            )?;
            Ok(EXIT_OK)
        }
        Command::List { all, format } => {
            let auth = Authority::open(&dir(&cli)?)?;
            auth.maintain(now(&cli)?)?;
            let entries = auth.list(*all)?;
            let text = match format {
                OutFormat::Json => {
                    serde_json::to_string_pretty(&entries).map_err(|e| Error::Usage { detail: e.to_string() })? + "\n"
                }
                OutFormat::Text => render_list(&entries, *all),
            };
            write_out(None, &text, 0o644)?;
            Ok(EXIT_OK)
        }
        Command::Revoke { certname, reason } => {
            let reason = canonical_reason(reason)?;
            let auth = Authority::open(&dir(&cli)?)?;
            sayln!("{}", auth.revoke(certname, reason, false, now(&cli)?)?)?;
            Ok(EXIT_OK)
        }
        Command::Clean { certname } => {
            let auth = Authority::open(&dir(&cli)?)?;
            // Like revoke and renew, a name the CA knows nothing about is an error (exit 2).
            let pending = auth.list(false)?.iter().any(|e| e.name == *certname);
            if !pending && auth.certificate(certname)?.is_none() {
                return Err(Error::NotFound { certname: certname.clone() });
            }
            sayln!("{}", auth.revoke(certname, "cessationOfOperation", true, now(&cli)?)?)?;
            Ok(EXIT_OK)
        }
        Command::Crl { out } => {
            preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let pem = auth.crl(now(&cli)?)?;
            write_out(out.as_deref(), &pem, 0o644)?;
            Ok(EXIT_OK)
        }
        Command::Renew { certname, out } => {
            preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let now = now(&cli)?;
            auth.maintain(now)?;
            let i = auth.renew(certname, now)?;
            write_out(out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(format!(
                "{} was renewed: the new certificate (serial {}) is in the store and the old one is revoked \
                 (superseded): `vouch list --all`, {}",
                i.certname,
                i.serial_hex,
                stored_cert(&auth, &i.certname)
            )))?;
            note(&format!(
                "vouch: renewed {} serial {} valid until {}",
                i.certname,
                i.serial_hex,
                crate::attrs::format_expiry(i.not_after)
            ));
            Ok(EXIT_OK)
        }
        Command::Enc { certname, cert, puppet_cadir, policy } => {
            enc(&cli, certname.as_deref(), cert.as_deref(), puppet_cadir.as_deref(), policy.as_deref())
        }
    }
}

/// The certname for `sign` and `check`: --certname, else the CSR's CN. Without --certname,
/// a file vouch cannot read a certname from (garbage, not a request, a malformed one) is an
/// input error (exit 2) saying why, not a refusal for an empty certname. With --certname the
/// decision judges the bytes, as the hook does (`input-garbage`, `csr-bad-self-signature`, … exit 1).
/// The certname `sign` and `check` judge: `--certname`, else the request's CN. A file holding no
/// certificate request at all (garbage, empty, another kind of file) is an input error (exit 2)
/// either way; a request that is there but defective is the decision's to refuse (exit 1).
fn certname_for(path: &Path, body: &[u8], explicit: Option<&str>) -> Result<String, Error> {
    if let Some(c) = explicit {
        return match csr::parse(body) {
            Err(e @ csr::CsrError::NotFound { .. }) => {
                Err(Error::Csr { path: path.to_path_buf(), detail: e.to_string() })
            }
            _ => Ok(c.to_string()),
        };
    }
    let hint = "vouch takes the certname from the request's CN; give --certname NAME to see every reason it is refused";
    let parsed =
        csr::parse(body).map_err(|e| Error::Csr { path: path.to_path_buf(), detail: format!("{e}; {hint}") })?;
    parsed
        .common_names
        .first()
        .cloned()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::Csr { path: path.to_path_buf(), detail: format!("its subject has no CN; {hint}") })
}

fn conductor_sign(cli: &Cli, a: &SignArgs) -> Result<i32, Error> {
    preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let (cert_der, key) = ca::load_cert_and_key(&a.cert, &a.key)?;
    let (source, yaml) = if a.classification == "-" {
        let bytes = crate::input::read_stdin(crate::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: "(stdin)".into(),
            error: crate::classification::ClassificationError::NotUtf8,
        })?;
        ("(stdin)".to_string(), s)
    } else {
        let p = PathBuf::from(&a.classification);
        let bytes = read_file(&p, crate::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: a.classification.clone(),
            error: crate::classification::ClassificationError::NotUtf8,
        })?;
        (a.classification.clone(), s)
    };
    let classification = Classification::from_yaml(&yaml, crate::classification::DEFAULT_MAX_BYTES)
        .map_err(|error| Error::Classification { source, error })?;
    let now = now(cli)?;
    let expiry = match (&a.expires_in, &a.expires) {
        (Some(text), None) => {
            let d = policy::parse_duration(text).filter(|d| d.as_secs() > 0).ok_or_else(|| Error::Expiry {
                detail: format!("--expires-in {}", policy::duration_problem(text, "90s, 30m, 2h or 1d")),
            })?;
            time::Duration::try_from(d)
                .ok()
                .and_then(|d| now.checked_add(d))
                .ok_or_else(|| Error::Expiry { detail: format!("--expires-in {text} reaches past the year 9999") })?
        }
        (None, Some(t)) => {
            let t = OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .map_err(|e| Error::Expiry { detail: format!("{t:?} is not RFC 3339: {e}") })?;
            if t <= now {
                return Err(Error::Expiry { detail: format!("{} is already past", attrs::format_expiry(t)) });
            }
            t
        }
        _ => return Err(Error::Expiry { detail: "give exactly one of --expires-in and --expires".into() }),
    };
    // Refuse early what the CA would refuse: a certificate without the conductor EKU.
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der)
        .map_err(|e| Error::Cert { path: a.cert.clone(), detail: e.to_string() })?;
    let has_eku = matches!(cert.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(oids::EKU_CONDUCTOR.iter().copied()))));
    if !has_eku {
        return Err(Error::Cert {
            path: a.cert.clone(),
            detail: "it lacks the extended key usage 1.3.6.1.4.1.34380.2.0; a CA would refuse what it signs".into(),
        });
    }
    let certname = match (a.version, &a.certname) {
        (Some(1), Some(_)) => {
            return Err(Error::Usage {
                detail: "signature version 1 cannot bind a certname; drop --version 1 to sign version 2".into(),
            })
        }
        (Some(2), None) => {
            return Err(Error::Usage { detail: "signature version 2 binds a certname: give --certname NAME".into() })
        }
        (_, Some(c)) => {
            let c = c.to_lowercase();
            crate::decide::check_certname(&c)
                .map_err(|p| Error::Usage { detail: format!("--certname {c:?} is not a valid certname: {p}") })?;
            if crate::decide::is_reserved_certname(&c) {
                return Err(Error::Usage {
                    detail: format!("--certname {c:?} is reserved by Puppet for the CA itself"),
                });
            }
            Some(c)
        }
        (_, None) => None,
    };
    let vouched = attrs::sign(&cert_der, &key, &classification, expiry, a.cert_encoding, certname.as_deref())
        .map_err(|detail| Error::Key { path: a.key.clone(), detail })?;
    let mirror = if a.no_mirror {
        None
    } else {
        let o = oids::parse(&a.mirror_oid)
            .filter(|o| oids::is_under(o, oids::PP_REG) || oids::is_under(o, oids::PP_PRIV))
            .ok_or_else(|| Error::Usage {
                detail: format!("--mirror-oid {:?} must be an OID under 1.3.6.1.4.1.34380.1.1 or .1.2", a.mirror_oid),
            })?;
        Some(o)
    };
    let out = CsrAttributes::from_vouched(&vouched, mirror.as_deref());
    let text = attrs::render(&out, a.format).map_err(|detail| Error::Usage { detail })?;
    write_out(a.out.as_deref(), &text, 0o600)?;
    warn_if_policy_refuses(cli, expiry, now);
    Ok(EXIT_OK)
}

/// The default of a policy's `attributes.max_lifetime` (src/policy.rs).
const DEFAULT_MAX_LIFETIME: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// The CA decides, not the conductor; but an expiry further ahead than the policy at hand
/// (--dir's, VOUCH_POLICY, /etc/vouch; else vouch's default) allows is a mistake worth a
/// warning now rather than a refusal at the node's first boot.
fn warn_if_policy_refuses(cli: &Cli, expiry: OffsetDateTime, now: OffsetDateTime) {
    let (max, whose) = match find_policy(None, cli.dir.as_deref()) {
        Ok(path) => match Policy::load(&path) {
            Ok(p) => (p.max_attribute_lifetime, format!("the policy {}", path.display())),
            Err(_) => return,
        },
        Err(_) => (DEFAULT_MAX_LIFETIME, "vouch's default policy".to_string()),
    };
    // The difference of two OffsetDateTimes cannot overflow (both lie within years -9999..=9999).
    #[allow(clippy::arithmetic_side_effects)]
    let ahead = expiry - now;
    if ahead > max {
        note(&format!(
            "vouch: warning: these attributes expire {} ({} from now), but {whose} refuses attributes \
             expiring more than {} ahead (attributes.max_lifetime): sign with a shorter --expires-in, \
             or raise that limit on the CA",
            attrs::format_expiry(expiry),
            policy::format_duration(std::time::Duration::from_secs(u64::try_from(ahead.whole_seconds()).unwrap_or(0))),
            policy::format_duration(max)
        ));
    }
}

fn make_csr(a: &CsrArgs) -> Result<i32, Error> {
    let certname = a.certname.to_lowercase();
    let text = String::from_utf8(read_file(&a.attributes, crate::input::Kind::Attributes)?)
        .map_err(|_| Error::Attributes { path: a.attributes.clone(), detail: "not UTF-8".into() })?;
    let parsed = attrs::parse_file(&text).map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    let spec = csr::CsrSpec::from_attributes(&certname, &parsed)
        .map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    preflight(&[(&a.key_out, Replace::Never), (&a.csr_out, Replace::Never)])?;
    let key = a.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
    let der = csr::build(&spec, &key).map_err(|e| Error::Crypto { detail: e.to_string() })?;
    write_pair(&a.key_out, &key.serialize_pem(), &a.csr_out, &crate::pem::encode("CERTIFICATE REQUEST", &der))?;
    Ok(EXIT_OK)
}

fn bench(cli: &Cli, b: &BenchCommand) -> Result<i32, Error> {
    let json = |v: &dyn erased_json::Json| -> Result<(), Error> {
        sayln!("{}", v.to_json().map_err(|e| Error::Usage { detail: e.to_string() })?)
    };
    match b {
        BenchCommand::Decide { ca_keys, client_keys, seconds, format } => {
            if !(0.01..=600.0).contains(seconds) {
                return Err(Error::Usage { detail: "--seconds must be between 0.01 and 600".into() });
            }
            let rows = crate::bench::decide(ca_keys, client_keys, std::time::Duration::from_secs_f64(*seconds))?;
            match format {
                OutFormat::Json => json(&rows)?,
                OutFormat::Text => {
                    sayln!("one core; floor = CSR verify + conductor certificate verify + attribute verify + CA sign")?;
                    sayln!(
                        "{:<8} {:<8} {:>12} {:>12} {:>12} {:>7}",
                        "CA key",
                        "client",
                        "decide/s",
                        "issue/s",
                        "floor/s",
                        "ratio"
                    )?;
                    for r in &rows {
                        sayln!(
                            "{:<8} {:<8} {:>12.0} {:>12.0} {:>12.0} {:>6.0}%",
                            r.ca_key,
                            r.client_key,
                            r.decide_per_s,
                            r.issue_per_s,
                            r.floor_per_s,
                            r.ratio * 100.0
                        )?;
                    }
                }
            }
        }
        BenchCommand::Hook { runs, no_journal } => {
            let r = crate::bench::hook(usize::try_from(*runs).unwrap_or(100_000), !no_journal)?;
            sayln!(
                "vouch autosign, process start to exit, {} runs ({}): median {:.2} ms, p99 {:.2} ms",
                r.runs,
                if r.journal_and_audit { "replay journal and audit log on" } else { "no journal, no audit log" },
                r.median_ms,
                r.p99_ms
            )?;
        }
        BenchCommand::Serve {
            addr,
            host,
            ca_bundle,
            conductor_cert,
            conductor_key,
            agents,
            per_agent,
            client_key,
            server_pid,
            format,
        } => {
            let d = dir(cli)?.dir;
            let load = crate::bench::ServeLoad {
                addr: *addr,
                host: host.clone(),
                ca_bundle: ca_bundle.clone().unwrap_or_else(|| d.join("ca").join(crate::ca::CA_BUNDLE)),
                conductor_cert: conductor_cert.clone().unwrap_or_else(|| d.join(crate::serve::setup::CONDUCTOR_CERT)),
                conductor_key: conductor_key.clone().unwrap_or_else(|| d.join(crate::serve::setup::CONDUCTOR_KEY)),
                client_key: *client_key,
                agents: crate::bench::parse_levels(agents)?,
                per_agent: usize::try_from(*per_agent).unwrap_or(100_000),
                server_pid: *server_pid,
            };
            if *format == OutFormat::Text {
                sayln!(
                    "{:>7} {:>7} {:>8} {:>9} {:>10} {:>9} {:>9} {:>10} {:>16} {:>16}",
                    "agents",
                    "certs",
                    "failed",
                    "seconds",
                    "certs/s",
                    "p50 ms",
                    "p99 ms",
                    "peak RSS",
                    "server CPU/cert",
                    "client CPU/cert"
                )?;
            }
            let rows = crate::bench::serve(&load, |r| {
                if *format == OutFormat::Text {
                    let _ = sayln!(
                        "{:>7} {:>7} {:>8} {:>9.2} {:>10.1} {:>9.1} {:>9.1} {:>10} {:>16} {:>16}",
                        r.agents,
                        r.certificates,
                        r.failures,
                        r.seconds,
                        r.certs_per_s,
                        r.p50_ms,
                        r.p99_ms,
                        r.server_peak_rss_mb.map(|m| format!("{m:.0} MB")).unwrap_or_else(|| "-".into()),
                        r.server_cpu_ms_per_cert.map(|m| format!("{m:.3} ms")).unwrap_or_else(|| "-".into()),
                        r.client_cpu_ms_per_cert.map(|m| format!("{m:.3} ms")).unwrap_or_else(|| "-".into())
                    );
                }
            })?;
            if *format == OutFormat::Json {
                json(&rows)?;
            }
        }
    }
    Ok(EXIT_OK)
}

mod erased_json {
    pub trait Json {
        fn to_json(&self) -> serde_json::Result<String>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> serde_json::Result<String> {
            serde_json::to_string_pretty(self)
        }
    }
}

fn print_refusals(r: &decide::Refused, to: &mut dyn Write) {
    for reason in &r.reasons {
        let _ = writeln!(to, "vouch: refused [{}]: {reason}", reason.code());
        let _ = writeln!(to, "  hint: {}", reason.hint());
    }
}

fn autosign(cli: &Cli, a: &AutosignArgs) -> Result<i32, Error> {
    // Puppet Server writes the whole PUT body and closes stdin: read it first, so the
    // server never meets a closed pipe for a request vouch judges. At most 1 MiB + 1 byte
    // is read and nothing more (an endless stdin must not keep the hook alive): a larger
    // body is refused at once.
    let mut body = Vec::new();
    let limit = crate::input::CSR_MAX;
    std::io::stdin().lock().take(limit.saturating_add(1)).read_to_end(&mut body).map_err(|source| Error::Io {
        path: "stdin".into(),
        op: "read",
        source,
    })?;
    let too_large = u64::try_from(body.len()).unwrap_or(u64::MAX) > limit;
    let policy_path = find_policy(a.policy.as_deref(), cli.dir.as_deref())?;
    let policy = Policy::load(&policy_path)?;
    let now = now(cli)?;
    // Beside a `vouch serve` in the same DIR: its service's and administrators' names are never a node's.
    let reserved =
        cli.dir.as_deref().map(|d| crate::authority::ReservedNames::load(&CaDir::new(d))).unwrap_or_default();
    let reserved = if too_large { None } else { reserved.refusal(&a.certname, csr::parse(&body).ok().as_ref()) };
    let outcome = if too_large {
        Err(decide::Refused {
            reasons: vec![decide::Refusal::CsrMalformed { detail: "the request body is larger than 1 MiB".into() }],
            conductor: None,
            held: None,
        })
    } else if let Some(reason) = reserved {
        Err(decide::Refused { reasons: vec![reason], conductor: None, held: None })
    } else {
        decide::decide(&Request { csr: &body, certname: &a.certname }, &policy, now)
    };
    // One-time use: record the grant's nonce (or v1 signature) before answering.
    let outcome = match outcome {
        Ok(grant) => crate::authority::claim_once(&policy, grant, false, now)?,
        // Puppet Server keeps the refused CSR and serves it: its attributes become this key's.
        Err(refused) => Err(crate::authority::hold_refused(&policy, refused, &a.certname, now)?),
    };
    let line = crate::audit::decision_line(now, &a.certname, outcome.as_ref(), "autosign");
    if let Some(log) = &policy.audit_log {
        fsutil::append_line(log, &line).map_err(|source| Error::Io { path: log.clone(), op: "append to", source })?;
    }
    match outcome {
        Ok(g) => {
            // A grant that cannot be reported is not a grant: exit 2 (Puppet Server does not sign).
            sayln!(
                "vouch: granted {} (vouched by {}, attributes expire {})",
                g.certname(),
                g.conductor().subject,
                attrs::format_expiry(g.attributes_expiry())
            )?;
            Ok(EXIT_OK)
        }
        Err(r) => {
            print_refusals(&r, &mut std::io::stderr());
            Ok(EXIT_REFUSED)
        }
    }
}

fn check(cli: &Cli, a: &CheckArgs) -> Result<i32, Error> {
    let policy_path = find_policy(a.policy.as_deref(), cli.dir.as_deref())?;
    let policy = Policy::load(&policy_path)?;
    let body = read_file(&a.csr, crate::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &body, a.certname.as_deref())?;
    let now = now(cli)?;
    let outcome = decide::decide(&Request { csr: &body, certname: &certname }, &policy, now);
    // One-time use as the journal stands (read, never written): used attributes are refused.
    let outcome = crate::authority::peek_replay(&policy, outcome, &certname)?;
    match a.format {
        OutFormat::Json => sayln!("{}", crate::audit::decision_line(now, &certname, outcome.as_ref(), "check"))?,
        OutFormat::Text => match &outcome {
            Ok(g) => sayln!(
                "granted {} (vouched by {}, attributes expire {})\n{}",
                g.certname(),
                g.conductor().subject,
                attrs::format_expiry(g.attributes_expiry()),
                g.classification()
                    .to_enc_json()
                    .map_err(|error| Error::Classification { source: a.csr.display().to_string(), error })?
            )?,
            Err(r) => {
                let mut text = Vec::new();
                print_refusals(r, &mut text);
                say(&String::from_utf8_lossy(&text))?
            }
        },
    }
    Ok(if outcome.is_ok() { EXIT_OK } else { EXIT_REFUSED })
}

/// The RFC 5280 name of a revocation reason given kebab-case (key-compromise) or as
/// RFC 5280 spells it (keyCompromise); any other is a usage error listing both spellings.
fn canonical_reason(r: &str) -> Result<&'static str, Error> {
    REVOCATION_REASONS
        .iter()
        .find(|(kebab, rfc)| r == *kebab || r == *rfc || r.eq_ignore_ascii_case(rfc) || r.replace('_', "-") == *kebab)
        .map(|(_, rfc)| *rfc)
        .ok_or_else(|| Error::Usage {
            detail: format!(
                "unknown revocation reason {r:?}; one of {}",
                REVOCATION_REASONS.iter().map(|(k, rfc)| format!("{k} ({rfc})")).collect::<Vec<_>>().join(", ")
            ),
        })
}

fn render_list(entries: &[ListEntry], all: bool) -> String {
    let mut out = String::new();
    for (title, state) in [
        ("Requested Certificates:", "requested"),
        ("Signed Certificates:", "signed"),
        ("Revoked Certificates:", "revoked"),
    ] {
        if !all && state != "requested" {
            continue;
        }
        let group: Vec<&ListEntry> = entries.iter().filter(|e| e.state == state).collect();
        out.push_str(title);
        out.push('\n');
        if group.is_empty() {
            out.push_str("    (none)\n");
        }
        for e in group {
            match state {
                "requested" => out.push_str(&format!("    {}  ({})\n", e.name, e.reasons.join("; "))),
                _ => out.push_str(&format!(
                    "    {}  serial {}  expires {}\n",
                    e.name,
                    e.serial.as_deref().unwrap_or("?"),
                    e.not_after.as_deref().unwrap_or("?")
                )),
            }
        }
    }
    out
}

/// The classification settings for reading a certificate outside vouch's store:
/// an explicit --policy (which must load), else the --dir CA's policy if it loads,
/// else vouch's defaults.
fn classification_settings(cli: &Cli, explicit: Option<&Path>) -> Result<(Vec<u64>, usize), Error> {
    if let Some(p) = explicit {
        let p = Policy::load(p)?;
        return Ok((p.mirror_oid, p.classification_max_bytes));
    }
    Ok(match cli.dir.as_ref().map(|d| Policy::load(&CaDir::new(d).policy())) {
        Some(Ok(p)) => (p.mirror_oid, p.classification_max_bytes),
        _ => (policy::DEFAULT_MIRROR_OID.to_vec(), crate::classification::DEFAULT_MAX_BYTES),
    })
}

fn enc(
    cli: &Cli,
    certname: Option<&str>,
    cert: Option<&Path>,
    puppet_cadir: Option<&Path>,
    policy_path: Option<&Path>,
) -> Result<i32, Error> {
    let now = now(cli)?;
    let classification = match (certname, cert, puppet_cadir) {
        (Some(name), None, Some(cadir)) => {
            let der = crate::puppetca::verified_signed_cert(cadir, name, now)?;
            let (mirror, max) = classification_settings(cli, policy_path)?;
            crate::authority::classification_from_cert(&der, &mirror, max, name)?
        }
        (Some(name), None, None) => {
            let auth = Authority::open(&dir(cli)?)?;
            auth.maintain(now)?;
            auth.enc(name, now)?
        }
        (None, Some(path), None) => {
            let bytes = read_file(path, crate::input::Kind::Cert)?;
            let der = if bytes.first() == Some(&0x30) {
                bytes
            } else {
                crate::pem::find(&bytes, &["CERTIFICATE"])
                    .map(|(_, d)| d)
                    .map_err(|e| Error::Cert { path: path.to_path_buf(), detail: e.to_string() })?
            };
            let (_, c) = x509_parser::parse_x509_certificate(&der)
                .map_err(|e| Error::Cert { path: path.to_path_buf(), detail: e.to_string() })?;
            let name = c.subject().to_string();
            if c.validity().not_after.to_datetime() <= now || c.validity().not_before.to_datetime() > now {
                return Err(Error::NotValid {
                    certname: name,
                    detail: "the certificate is outside its validity period".into(),
                });
            }
            let (mirror, max) = classification_settings(cli, policy_path)?;
            crate::authority::classification_from_cert(&der, &mirror, max, &name)?
        }
        _ => return Err(Error::Usage { detail: "give a CERTNAME, --cert FILE or --puppet-cadir DIR CERTNAME".into() }),
    };
    let json = classification.to_enc_json().map_err(|e| Error::NotValid {
        certname: certname.unwrap_or("").to_string(),
        detail: format!("its classification is unusable: {e}"),
    })?;
    write_out(None, &json, 0o644)?;
    Ok(EXIT_OK)
}
