//! The command line: a thin skin over the library.
#![deny(clippy::arithmetic_side_effects)]

use crate::authority::{Authority, ListEntry, SignOutcome};
use crate::decision::{self, Request};
use crate::encoding::{csr, oids};
use crate::error::Error;
use crate::issuance::bootstrap::{self, CaDir, ConductorSpec};
use crate::issuance::keys::KeyType;
use crate::policy::{self, Policy};
use crate::vouching::attrs::{self, CertEncoding, CsrAttributes, Format};
use crate::vouching::classification::Classification;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

pub mod args;

#[cfg(feature = "bench")]
use args::BenchCommand;
pub use args::{command, parse_from, Cli, Command};
use args::{
    AdminCommand, AutosignArgs, CaCommand, CertEncodingArg, CheckArgs, ConductorCommand, CsrArgs, FormatArg,
    KeyTypeArg, OutFormat, SignArgs,
};

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
/// `$XDG_DATA_HOME/vouch` (else `~/.local/share/vouch`) for everyone else.
pub fn default_dir() -> PathBuf {
    if crate::files::trust::euid() == 0 {
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

fn read_file(path: &Path, kind: crate::files::input::Kind) -> Result<Vec<u8>, Error> {
    crate::error::read_input(path, kind)
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

/// Writes one output file by the rule of [`crate::files::output::write_output`]; `None` is stdout.
fn write_out(out: Option<&Path>, text: &str, mode: u32) -> Result<(), Error> {
    write_file(out.unwrap_or(Path::new("-")), text, mode, Replace::Yes).map(|_| ())
}

fn write_file(path: &Path, text: &str, mode: u32, replace: Replace) -> Result<crate::files::output::Written, Error> {
    let shown = if path.as_os_str() == "-" { PathBuf::from("stdout") } else { path.to_path_buf() };
    crate::files::output::write_output(path, text.as_bytes(), mode, replace == Replace::Yes)
        .map_err(|e| output_error(shown, e))
}

/// Writes a private key and then what pairs with it (a certificate, a CSR), both new files:
/// if the second write fails, a key file just created is removed again, so the two exist
/// as a pair or not at all.
fn write_pair(key_out: &Path, key: &str, other_out: &Path, other: &str) -> Result<(), Error> {
    let written = write_file(key_out, key, 0o600, Replace::Never)?;
    if let Err(e) = write_file(other_out, other, 0o644, Replace::Never) {
        let removed = written == crate::files::output::Written::Created && std::fs::remove_file(key_out).is_ok();
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

fn output_error(path: PathBuf, e: crate::files::output::OutputError) -> Error {
    use crate::files::output::OutputError as E;
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
/// spends attributes, makes a key), by the rule [`crate::files::output::write_output`] will apply: no
/// symbolic link, no directory, an existing directory to create it in, no existing regular
/// file where the output never replaces one (a private key and what pairs with it), and no
/// two outputs of one command at the same place (compared as canonical parent directory +
/// file name, so `a.pem`, `./a.pem` and `DIR/../a.pem` are one). `-` (stdout) is not a path.
fn preflight(outputs: &[(&Path, Replace)]) -> Result<(), Error> {
    use crate::files::output::OutputError as E;
    let mut seen: Vec<(PathBuf, std::ffi::OsString, &Path)> = Vec::new();
    for &(p, replace) in outputs {
        if p.as_os_str() == "-" {
            continue;
        }
        let refuse = |detail: String| Error::Output { path: p.to_path_buf(), detail };
        match crate::files::output::output_kind(p) {
            Ok(Some(t)) if t.is_symlink() => return Err(output_error(p.to_path_buf(), E::Symlink)),
            Ok(Some(t)) if t.is_dir() => return Err(output_error(p.to_path_buf(), E::Directory)),
            Ok(Some(_)) if replace == Replace::Never && crate::files::output::output_occupied(p) => {
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
    match &cli.command {
        Command::Ca(CaCommand::Init { key_type }) => {
            let d = dir(&cli)?;
            let r = bootstrap::init(&d, (*key_type).into(), now(&cli)?)?;
            sayln!("Created a {} root CA and master CA in {}", r.key_type.name(), r.ca_dir.display())?;
            sayln!("Root CA fingerprint (SHA-256 of the root certificate): {}", r.root_fingerprint)?;
            sayln!("Policy: {}", r.policy.display())?;
            sayln!("Next: vouch conductor new NAME --dir {} --cert-out NAME.pem --key-out NAME.key", d.dir.display())?;
            Ok(EXIT_OK)
        }
        Command::Conductor(ConductorCommand::New { name, cert_out, key_out, key_type, days }) => {
            bootstrap::check_conductor_name(name)?;
            preflight(&[(cert_out, Replace::Never), (key_out, Replace::Never)])?;
            let d = dir(&cli)?;
            let spec = ConductorSpec { name, key_type: (*key_type).into(), days: *days };
            let c = bootstrap::issue_conductor(&d, &spec, now(&cli)?)?;
            // A conductor certificate is kept nowhere else: unwritten, it is simply lost.
            write_pair(key_out, &c.key_pem, cert_out, &c.cert_pem)?;
            if c.capped {
                note(&format!(
                    "vouch: note: --days {days} reaches past the root CA's notAfter; the certificate ends with it, {}",
                    crate::encoding::time::format_rfc3339(c.not_after)
                ));
            }
            sayln!("Conductor {name}: certificate {} key {}", cert_out.display(), key_out.display())?;
            sayln!(
                "Valid until {}; fingerprint (SHA-256): {}",
                crate::encoding::time::format_rfc3339(c.not_after),
                c.fingerprint
            )?;
            Ok(EXIT_OK)
        }
        Command::Conductor(ConductorCommand::Sign(a)) => conductor_sign(&cli, a),
        Command::Csr(a) => make_csr(a),
        Command::Autosign(a) => autosign(&cli, a),
        Command::Check(a) => check(&cli, a),
        Command::Sign(a) => {
            preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let csr = read_file(&a.csr, crate::files::input::Kind::Csr)?;
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
                        crate::encoding::time::format_rfc3339(i.not_after)
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
            opts.key_type = a.key_type.into();
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
        #[cfg(feature = "bench")]
        Command::Bench(b) => bench(&cli, b),
        Command::Admin(AdminCommand::New { name, cert_out, key_out, key_type }) => {
            preflight(&[(cert_out, Replace::Never), (key_out, Replace::Never)])?;
            let auth = Authority::open(&dir(&cli)?)?;
            let (issued, key) = auth.issue_local(
                &crate::authority::LocalSpec {
                    certname: name,
                    role: crate::issuance::certificate::LocalRole::Admin,
                    dns_names: &[],
                    ip_addresses: &[],
                    key_type: (*key_type).into(),
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
                crate::encoding::time::format_rfc3339(i.not_after)
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
    let (cert_der, key) = bootstrap::load_cert_and_key(&a.cert, &a.key)?;
    let (source, yaml) = if a.classification == "-" {
        let bytes = crate::error::read_stdin(crate::files::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: "(stdin)".into(),
            error: crate::vouching::classification::ClassificationError::NotUtf8,
        })?;
        ("(stdin)".to_string(), s)
    } else {
        let p = PathBuf::from(&a.classification);
        let bytes = read_file(&p, crate::files::input::Kind::Classification)?;
        let s = String::from_utf8(bytes).map_err(|_| Error::Classification {
            source: a.classification.clone(),
            error: crate::vouching::classification::ClassificationError::NotUtf8,
        })?;
        (a.classification.clone(), s)
    };
    let classification = Classification::from_yaml(&yaml, crate::vouching::classification::DEFAULT_MAX_BYTES)
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
            let t = crate::encoding::time::parse_rfc3339(t)
                .map_err(|e| Error::Expiry { detail: format!("{t:?} is not RFC 3339: {e}") })?;
            if t <= now {
                return Err(Error::Expiry {
                    detail: format!("{} is already past", crate::encoding::time::format_rfc3339(t)),
                });
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
            crate::decision::check_certname(&c)
                .map_err(|p| Error::Usage { detail: format!("--certname {c:?} is not a valid certname: {p}") })?;
            if crate::decision::is_reserved_certname(&c) {
                return Err(Error::Usage {
                    detail: format!("--certname {c:?} is reserved by Puppet for the CA itself"),
                });
            }
            Some(c)
        }
        (_, None) => None,
    };
    let vouched = attrs::sign(&cert_der, &key, &classification, expiry, a.cert_encoding.into(), certname.as_deref())
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
    let text = attrs::render(&out, a.format.into()).map_err(|detail| Error::Usage { detail })?;
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
            crate::encoding::time::format_rfc3339(expiry),
            policy::format_duration(std::time::Duration::from_secs(u64::try_from(ahead.whole_seconds()).unwrap_or(0))),
            policy::format_duration(max)
        ));
    }
}

fn make_csr(a: &CsrArgs) -> Result<i32, Error> {
    let certname = a.certname.to_lowercase();
    let text = String::from_utf8(read_file(&a.attributes, crate::files::input::Kind::Attributes)?)
        .map_err(|_| Error::Attributes { path: a.attributes.clone(), detail: "not UTF-8".into() })?;
    let parsed = attrs::parse_file(&text).map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    let spec = parsed.csr_spec(&certname).map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    preflight(&[(&a.key_out, Replace::Never), (&a.csr_out, Replace::Never)])?;
    let key = KeyType::from(a.key_type).generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
    let der = csr::build(&spec, &key).map_err(|e| Error::Crypto { detail: e.to_string() })?;
    write_pair(
        &a.key_out,
        &key.serialize_pem(),
        &a.csr_out,
        &crate::encoding::pem::encode("CERTIFICATE REQUEST", &der),
    )?;
    Ok(EXIT_OK)
}

#[cfg(feature = "bench")]
fn bench(cli: &Cli, b: &BenchCommand) -> Result<i32, Error> {
    let json = |v: &dyn erased_json::Json| -> Result<(), Error> {
        sayln!("{}", v.to_json().map_err(|e| Error::Usage { detail: e.to_string() })?)
    };
    match b {
        BenchCommand::Decide { ca_keys, client_keys, seconds, format } => {
            if !(0.01..=600.0).contains(seconds) {
                return Err(Error::Usage { detail: "--seconds must be between 0.01 and 600".into() });
            }
            let rows = crate::bench::decide(
                &ca_keys.iter().map(|&k| k.into()).collect::<Vec<KeyType>>(),
                &client_keys.iter().map(|&k| k.into()).collect::<Vec<KeyType>>(),
                std::time::Duration::from_secs_f64(*seconds),
            )?;
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
                ca_bundle: ca_bundle
                    .clone()
                    .unwrap_or_else(|| d.join("ca").join(crate::issuance::bootstrap::CA_BUNDLE)),
                conductor_cert: conductor_cert
                    .clone()
                    .unwrap_or_else(|| d.join(crate::issuance::bootstrap::CONDUCTOR_CERT)),
                conductor_key: conductor_key
                    .clone()
                    .unwrap_or_else(|| d.join(crate::issuance::bootstrap::CONDUCTOR_KEY)),
                client_key: (*client_key).into(),
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

#[cfg(feature = "bench")]
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

fn print_refusals(r: &decision::Refused, to: &mut dyn Write) {
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
    let limit = crate::files::input::CSR_MAX;
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
        Err(decision::Refused {
            reasons: vec![decision::Refusal::CsrMalformed { detail: "the request body is larger than 1 MiB".into() }],
            conductor: None,
            held: None,
        })
    } else if let Some(reason) = reserved {
        Err(decision::Refused { reasons: vec![reason], conductor: None, held: None })
    } else {
        decision::decide(&Request { csr: &body, certname: &a.certname }, &policy, now)
    };
    // One-time use: record the grant's nonce (or v1 signature) before answering.
    let outcome = match outcome {
        Ok(grant) => crate::authority::claim_once(&policy, grant, false, now)?,
        // Puppet Server keeps the refused CSR and serves it: its attributes become this key's.
        Err(refused) => Err(crate::authority::hold_refused(&policy, refused, &a.certname, now)?),
    };
    let line = crate::store::audit::decision_line(now, &a.certname, outcome.as_ref(), "autosign");
    if let Some(log) = &policy.audit_log {
        crate::files::durable::append_line(log, &line).map_err(|source| Error::Io {
            path: log.clone(),
            op: "append to",
            source,
        })?;
    }
    match outcome {
        Ok(g) => {
            // A grant that cannot be reported is not a grant: exit 2 (Puppet Server does not sign).
            sayln!(
                "vouch: granted {} (vouched by {}, attributes expire {})",
                g.certname(),
                g.conductor().subject,
                crate::encoding::time::format_rfc3339(g.attributes_expiry())
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
    let body = read_file(&a.csr, crate::files::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &body, a.certname.as_deref())?;
    let now = now(cli)?;
    let outcome = decision::decide(&Request { csr: &body, certname: &certname }, &policy, now);
    // One-time use as the journal stands (read, never written): used attributes are refused.
    let outcome = crate::authority::peek_replay(&policy, outcome, &certname)?;
    match a.format {
        OutFormat::Json => sayln!("{}", crate::store::audit::decision_line(now, &certname, outcome.as_ref(), "check"))?,
        OutFormat::Text => match &outcome {
            Ok(g) => sayln!(
                "granted {} (vouched by {}, attributes expire {})\n{}",
                g.certname(),
                g.conductor().subject,
                crate::encoding::time::format_rfc3339(g.attributes_expiry()),
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
        _ => (policy::DEFAULT_MIRROR_OID.to_vec(), crate::vouching::classification::DEFAULT_MAX_BYTES),
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
            let der = crate::hook::cadir::verified_signed_cert(cadir, name, now)?;
            let (mirror, max) = classification_settings(cli, policy_path)?;
            crate::authority::classification_from_cert(&der, &mirror, max, name)?
        }
        (Some(name), None, None) => {
            let auth = Authority::open(&dir(cli)?)?;
            auth.maintain(now)?;
            auth.enc(name, now)?
        }
        (None, Some(path), None) => {
            let bytes = read_file(path, crate::files::input::Kind::Cert)?;
            let der = if bytes.first() == Some(&0x30) {
                bytes
            } else {
                crate::encoding::pem::find(&bytes, &["CERTIFICATE"])
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
