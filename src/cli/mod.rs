//! The command line: a thin skin over the library.
#![deny(clippy::arithmetic_side_effects)]

use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir};
use crate::issuance::keys::KeyType;
use crate::vouching::attrs::{CertEncoding, Format};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// `say` with a newline, formatted.
macro_rules! sayln {
    ($($arg:tt)*) => {
        say(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `sayln!` for the line a command prints once its change is made: if stdout cannot take
/// it, the error still says what was done (exit 2), never the quiet end of a closed pipe.
macro_rules! say_done {
    ($($arg:tt)*) => {{
        let done = format!($($arg)*);
        say(&format!("{done}\n")).map_err(|e| crate::error::Error::Partial { done, error: Box::new(e) })
    }};
}

mod admin;
mod approve;
pub mod args;
#[cfg(feature = "bench")]
mod bench;
mod ca;
mod certs;
mod compile;
mod conductor;
mod csr;
mod fleet;
mod hook;
mod identity;
mod import;
mod output;
mod serve;
mod store;
mod template;
mod template_uses;

pub use certs::REVOCATION_REASONS;
pub use output::say;

pub use args::{command, parse_from, Cli, Command};
use args::{AdminCommand, CaCommand, CertEncodingArg, ConductorCommand, FormatArg, KeyTypeArg};

impl From<KeyTypeArg> for KeyType {
    fn from(k: KeyTypeArg) -> Self {
        match k {
            KeyTypeArg::P256 => KeyType::P256,
            KeyTypeArg::P384 => KeyType::P384,
            KeyTypeArg::Ed25519 => KeyType::Ed25519,
            KeyTypeArg::Rsa2048 => KeyType::Rsa2048,
            KeyTypeArg::Rsa3072 => KeyType::Rsa3072,
            KeyTypeArg::Rsa4096 => KeyType::Rsa4096,
        }
    }
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::PuppetYaml => Format::PuppetYaml,
            FormatArg::Txt => Format::Txt,
            FormatArg::CloudConfig => Format::CloudConfig,
            FormatArg::Json => Format::Json,
        }
    }
}

impl From<CertEncodingArg> for CertEncoding {
    fn from(e: CertEncodingArg) -> Self {
        match e {
            CertEncodingArg::Base64Der => CertEncoding::Base64Der,
            CertEncodingArg::Pem => CertEncoding::Pem,
        }
    }
}

/// The fallback policy location for the autosign hook.
pub const SYSTEM_POLICY: &str = "/etc/vouch/policy.toml";

/// Exit codes.
pub const EXIT_OK: i32 = 0;
pub const EXIT_REFUSED: i32 = 1;
pub const EXIT_ERROR: i32 = 2;
/// The shared store could not be reached (EX_TEMPFAIL): nothing was done; the same command
/// later may succeed (the systemd unit restarts `vouch serve` on it, not on 2).
pub const EXIT_TEMPFAIL: i32 = 75;
/// `vouch revoke` / `vouch clean` / `vouch reconcile --confirm`: the revocation is stored (the
/// certificate is revoked), but the CRL could not be written after it
/// ([`Error::RevokedCrlNotWritten`], [`Error::ReconcileCrlNotWritten`]): not a plain
/// failure (2: nothing done, or nothing known), not success (the CRL does not list it yet).
pub const EXIT_REVOKED_CRL_NOT_WRITTEN: i32 = 3;
/// Standard output's reader went away (a closed pipe: `vouch list --all | head -1`): the
/// status a shell reports for a process killed by SIGPIPE (128 + 13), with nothing on stderr,
/// as coreutils end. vouch keeps SIGPIPE ignored (`vouch serve` writes to sockets and must
/// never die of it) and ends with this status instead ([`Error::StdoutClosed`]).
pub const EXIT_PIPE: i32 = 141;

/// The range `--now` accepts: certificate times must stay encodable (years 0 to 9999 after
/// backdating and validity) and the Unix-time checks meaningful.
const NOW_MIN_YEAR: i32 = 1970;
const NOW_MAX_YEAR: i32 = 9000;

fn now(cli: &Cli) -> Result<OffsetDateTime, Error> {
    match &cli.now {
        None => Ok(OffsetDateTime::now_utc()),
        Some(s) => {
            let t = crate::encoding::time::parse_rfc3339(s)
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
/// `$XDG_DATA_HOME/vouch` (else `~/.local/share/vouch`) for everyone else. A relative
/// `XDG_DATA_HOME` or `HOME` is ignored, with a warning (see [`xdg_base`], [`home`]); with
/// neither usable, no directory is guessed ([`Error::NoDataDir`]: never /var/lib/vouch, which
/// is root's, nor a directory under whatever the current directory is).
pub fn default_dir() -> Result<PathBuf, Error> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if crate::files::trust::euid() == 0 {
        return Ok(PathBuf::from(DEFAULT_DIR));
    }
    let fallback = home().map(|h| h.join(".local/share/vouch"));
    match (xdg_base("XDG_DATA_HOME", fallback.as_deref(), &WARNED), fallback) {
        (Some(x), _) => Ok(x.join("vouch")),
        (None, Some(f)) => Ok(f),
        (None, None) => Err(Error::NoDataDir {
            why: match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => format!("HOME is a relative path ({}), and XDG_DATA_HOME is not an absolute one", {
                    PathBuf::from(h).display()
                }),
                None => "HOME is not set, and XDG_DATA_HOME is not an absolute path".into(),
            },
        }),
    }
}

/// `HOME`, if it is set and absolute. A relative one would name a directory under whatever
/// the current directory is: ignored, as a relative XDG variable is ([`xdg_base`]), with a
/// warning on stderr (once a process).
pub(crate) fn home() -> Option<PathBuf> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let value = PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?);
    if value.is_absolute() {
        return Some(value);
    }
    WARNED.call_once(|| {
        output::note(&format!(
            "vouch: warning: HOME is a relative path ({}), which would name a directory under the current one: \
             ignored",
            value.display()
        ))
    });
    None
}

/// An XDG base directory variable's path: set, not empty, and absolute. The XDG Base
/// Directory specification: "All paths set in these environment variables must be absolute.
/// If an implementation encounters a relative path in any of these variables it should
/// consider the path invalid and ignore it." A relative one (which would name a directory
/// under whatever the current directory is) is ignored, with a warning on stderr naming
/// `fallback`, the directory used instead, if any (once a process: `warned`).
pub(crate) fn xdg_base(var: &str, fallback: Option<&Path>, warned: &std::sync::Once) -> Option<PathBuf> {
    let value = PathBuf::from(std::env::var_os(var).filter(|v| !v.is_empty())?);
    if value.is_absolute() {
        return Some(value);
    }
    warned.call_once(|| {
        let instead = match fallback {
            Some(f) => format!("using {} instead", f.display()),
            None => "and no other directory is usable".to_string(),
        };
        output::note(&format!(
            "vouch: warning: {var} is a relative path ({}), which the XDG Base Directory specification says \
             to ignore: {instead}",
            value.display(),
        ))
    });
    None
}

fn dir(cli: &Cli) -> Result<DataDir, Error> {
    Ok(DataDir::new(match &cli.dir {
        Some(d) => d.clone(),
        None => default_dir()?,
    }))
}

fn read_file(path: &Path, kind: crate::files::input::Kind) -> Result<Vec<u8>, Error> {
    crate::error::read_input(path, kind)
}

/// A command that judges beside a data directory (`--dir`: `autosign`, `check`) without
/// `--store`, where that directory's master uses a shared store: refused, whatever policy
/// (and so whatever file journal) it was given, as the directory's own commands are.
pub(super) fn refuse_retired_beside(cli: &Cli) -> Result<(), Error> {
    match cli.dir.as_deref() {
        Some(d) if cli.store_url().is_files() => bootstrap::DataDir::new(d).refuse_retired_file_store(),
        _ => Ok(()),
    }
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
        let p = d.join(bootstrap::POLICY);
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
    let cli = &cli;
    match &cli.command {
        Command::Ca(CaCommand::Init { key_type, root_cert, root_key }) => {
            ca::init(cli, key_type, root_cert.as_deref().zip(root_key.as_deref()))
        }
        Command::Conductor(ConductorCommand::New { name, cert_out, key_out, key_type, days }) => {
            conductor::new(cli, name, cert_out, key_out, key_type, days)
        }
        Command::Conductor(ConductorCommand::Sign(a)) => conductor::sign(cli, a),
        Command::Conductor(ConductorCommand::Revoke { cert: None, serial: None, .. }) => Err(Error::Usage {
            detail: "one of --cert FILE (the conductor's certificate) and --serial HEX (its serial) is required \
                     (both may be given, of the same certificate); nothing was revoked"
                .into(),
        }),
        Command::Conductor(ConductorCommand::Revoke { cert, serial, reason }) => {
            conductor::revoke(cli, cert.as_deref(), serial.as_deref(), reason)
        }
        Command::Conductor(ConductorCommand::PublishCrl) => conductor::publish_crl(cli),
        Command::Csr(a) => csr::make(a),
        Command::Autosign(a) => hook::autosign(cli, a),
        Command::Check(a) => certs::check(cli, a),
        Command::Identity(c) => identity::run(cli, c),
        Command::Template(c) => template_uses::run(cli, c),
        Command::Sign(a) => certs::sign(cli, a),
        Command::Serve(a) => serve::serve(cli, a),
        #[cfg(feature = "bench")]
        Command::Bench(b) => bench::bench(cli, b),
        #[cfg(not(feature = "bench"))]
        Command::Bench { .. } => Err(Error::Usage {
            detail: "this vouch was built without `vouch bench`: cargo build --release --features bench --bin vouch"
                .into(),
        }),
        Command::Admin(AdminCommand::New { name, cert_out, key_out, key_type }) => {
            admin::new(cli, name, cert_out, key_out, key_type)
        }
        Command::List { all, format, conductor } => certs::list(cli, all, format, conductor.as_deref()),
        Command::Revoke { certname: Some(certname), serial: None, reason, force } => {
            certs::revoke(cli, certname, reason, *force)
        }
        Command::Revoke { serial: Some(serial), reason, force, .. } => {
            certs::revoke_serial(cli, serial, reason, *force)
        }
        Command::Revoke { certname: None, serial: None, .. } => {
            Err(Error::Usage { detail: "give a certname or --serial".into() })
        }
        Command::Clean { certname, force } => certs::clean(cli, certname, *force),
        Command::Approve(a) => approve::approve(cli, a),
        Command::Crl { out, fetch: true, ca_url: Some(url), cacert: Some(cacert) } => {
            compile::crl_fetch(url, cacert, out.as_deref().unwrap_or(Path::new("-")))
        }
        Command::Crl { out, .. } => certs::crl(cli, out),
        Command::Renew { certname, out } => certs::renew(cli, certname, out),
        Command::Ldap(c) => store::ldap(cli, c),
        Command::Store(c) => store::store_cmd(cli, c),
        Command::Override(c) => store::override_cmd(cli, c),
        Command::Import(a) => import::import(cli, a),
        Command::Migrate { to } => store::migrate(cli, to),
        Command::Reconcile(a) => fleet::reconcile(cli, a),
        Command::Purge { tombstones: true, confirm, .. } => fleet::purge_tombstones(cli, *confirm),
        Command::Purge { names, confirm, .. } => fleet::purge(cli, names, *confirm),
        Command::Audit(c) => fleet::audit(cli, c),
        Command::Enc { certname, cert, remote, puppet_cadir, policy } => {
            hook::enc(cli, certname.as_deref(), cert.as_deref(), remote, puppet_cadir.as_deref(), policy.as_deref())
        }
    }
}
