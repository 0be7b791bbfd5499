//! A compile server's commands: `vouch crl --fetch` and `vouch enc --ca-url`, and the
//! verified `vouch enc --cert`.

use super::args::EncRemoteArgs;
use super::output::{say, write_out};
use super::{dir, now, read_file, Cli, EXIT_OK};
use crate::authority::Authority;
use crate::compile::enc::Settings;
use crate::compile::log::LogTo;
use crate::compile::{fetch_crl, CaService, Fetched};
use crate::error::Error;
use std::path::{Path, PathBuf};

/// The default config file of `vouch enc --ca-url`, read when it exists.
pub const ENC_CONFIG: &str = "/etc/vouch/enc.toml";

pub(super) fn crl_fetch(ca_url: &str, cacert: &Path, out: &Path) -> Result<i32, Error> {
    let kept = fetch_target(out)?;
    let bundle = read_file(cacert, crate::files::input::Kind::TrustFile)?;
    let ca = CaService::new(ca_url, &bundle, None)?;
    if out.as_os_str() == "-" {
        // To stdout: the whole CRLs every time (nothing to compare If-Modified-Since with).
        let resp = ca.get(crate::compile::CRL_PATH, &[])?;
        if resp.status != 200 {
            return Err(Error::Usage {
                detail: format!("{ca_url}: GET {} answered {}", crate::compile::CRL_PATH, resp.status),
            });
        }
        let checked = crate::compile::check_crl_body(&resp.body, (&bundle, cacert), ca_url, None)?;
        warn_ignored(&checked.ignored);
        write_out(None, &String::from_utf8_lossy(&checked.pem), 0o644)?;
        return Ok(EXIT_OK);
    }
    match fetch_crl(&ca, (&bundle, cacert), out)? {
        Fetched::Replaced { last_modified, ignored } => {
            warn_ignored(&ignored);
            restore_owner_and_mode(out, kept)?;
            sayln!(
                "vouch: wrote the CA's CRLs to {} (Last-Modified: {})",
                out.display(),
                last_modified.as_deref().unwrap_or("not sent")
            )?
        }
        Fetched::Unchanged => sayln!("vouch: {} is current (the CA answered 304)", out.display())?,
    }
    Ok(EXIT_OK)
}

/// The CRLs of the CA's answer left out (signed by no CA of --cacert), on stderr.
fn warn_ignored(ignored: &[String]) {
    for line in ignored {
        eprintln!("vouch: warning: {line}");
    }
}

/// Where `crl --fetch` may write: `-` (stdout), a new file, or a regular file, which is
/// replaced by rename (Puppet Server and its agents never see half a CRL). A symbolic link,
/// a directory, a device, a FIFO or a socket is refused before anything is fetched: renaming
/// over `/dev/null` would replace the device with a file. Returns the owner and mode of the
/// file being replaced, which the new one keeps (Puppet's hostcrl may be `puppet`'s, 0640).
fn fetch_target(out: &Path) -> Result<Option<(u32, u32, u32)>, Error> {
    use std::os::unix::fs::MetadataExt;
    if out.as_os_str() == "-" {
        return Ok(None);
    }
    let refuse = |detail: &str| Error::Output { path: out.to_path_buf(), detail: detail.to_string() };
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.file_type().is_symlink() => {
            Err(super::output::output_error(out.to_path_buf(), crate::files::output::OutputError::Symlink))
        }
        Ok(m) if m.is_dir() => Err(refuse("it is a directory; give the path of the CRL file (Puppet's hostcrl)")),
        Ok(m) if !m.is_file() => Err(refuse(
            "it is a device, FIFO or socket: `crl --fetch` replaces its --out by rename, so it needs a regular \
             file (new or existing); use --out - for stdout",
        )),
        Ok(m) => Ok(Some((m.uid(), m.gid(), m.mode() & 0o7777))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io { path: out.to_path_buf(), op: "look at", source }),
    }
}

/// Gives the fetched file the owner and mode of the one it replaced (a non-root user cannot
/// give a file away: then it stays this user's, with the mode kept).
fn restore_owner_and_mode(out: &Path, kept: Option<(u32, u32, u32)>) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let Some((uid, gid, mode)) = kept else { return Ok(()) };
    let _ = std::os::unix::fs::lchown(out, Some(uid), Some(gid));
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(mode)).map_err(|source| Error::Io {
        path: out.to_path_buf(),
        op: "set the mode of",
        source,
    })
}

/// The config file's keys (all optional; the command line and the environment win).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EncConfig {
    ca_url: Option<String>,
    cacert: Option<PathBuf>,
    crl_refresh: Option<String>,
    crl: Option<Vec<PathBuf>>,
    cache_dir: Option<PathBuf>,
    cache_max: Option<usize>,
    log: Option<String>,
    client_cert: Option<PathBuf>,
    client_key: Option<PathBuf>,
}

fn load_config(a: &EncRemoteArgs) -> Result<EncConfig, Error> {
    let path = match &a.config {
        Some(p) => p.clone(),
        None if Path::new(ENC_CONFIG).exists() => PathBuf::from(ENC_CONFIG),
        None => return Ok(EncConfig::default()),
    };
    let text = read_file(&path, crate::files::input::Kind::TrustFile)?;
    let text =
        String::from_utf8(text).map_err(|_| Error::Usage { detail: format!("{}: not UTF-8", path.display()) })?;
    toml::from_str(&text).map_err(|e| Error::Usage { detail: format!("{}: {e}", path.display()) })
}

fn default_cache_dir() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/cache/vouch/enc");
    }
    static WARNED: std::sync::Once = std::sync::Once::new();
    // A relative HOME is ignored (as an unset one), as the data directory's is (`home`).
    let fallback = super::home().map(|h| h.join(".cache")).unwrap_or_else(|| PathBuf::from("/var/cache"));
    // A relative XDG_CACHE_HOME is ignored, as a relative XDG_DATA_HOME is (see `xdg_base`).
    super::xdg_base("XDG_CACHE_HOME", Some(&fallback.join("vouch/enc")), &WARNED).unwrap_or(fallback).join("vouch/enc")
}

/// The remote classifier's settings, if --ca-url (or the environment, or the config file)
/// names a CA.
pub(super) fn enc_settings(
    a: &EncRemoteArgs,
    mirror_oid: Vec<u64>,
    max_bytes: usize,
) -> Result<Option<Settings>, Error> {
    let c = load_config(a)?;
    let Some(ca_url) = a.ca_url.clone().or(c.ca_url) else { return Ok(None) };
    let cacert = a.cacert.clone().or(c.cacert).ok_or_else(|| Error::Usage {
        detail: "--ca-url needs --cacert BUNDLE (VOUCH_ENC_CACERT, or cacert in the config file)".into(),
    })?;
    let refresh_text = a.crl_refresh.clone().or(c.crl_refresh).unwrap_or_else(|| "60s".into());
    let crl_refresh =
        crate::policy::parse_duration(&refresh_text).filter(|d| d.as_secs() > 0).ok_or_else(|| Error::Usage {
            detail: format!("--crl-refresh {}", crate::policy::duration_problem(&refresh_text, "60s or 5m")),
        })?;
    let identity = match (a.client_cert.clone().or(c.client_cert), a.client_key.clone().or(c.client_key)) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err(Error::Usage { detail: "give both --client-cert and --client-key, or neither".into() }),
    };
    Ok(Some(Settings {
        ca_url,
        cacert,
        crl_refresh,
        crl_files: if a.crl.is_empty() { c.crl.unwrap_or_default() } else { a.crl.clone() },
        cache_dir: a.cache_dir.clone().or(c.cache_dir).unwrap_or_else(default_cache_dir),
        cache_max: a.cache_max.or(c.cache_max).unwrap_or(10_000).max(1),
        log: LogTo::parse(a.log.as_deref().or(c.log.as_deref()).unwrap_or("syslog")),
        identity,
        mirror_oid,
        max_bytes,
    }))
}

pub(super) fn enc_remote(cli: &Cli, s: &Settings, certname: &str) -> Result<i32, Error> {
    let json = crate::compile::enc::run(s, certname, now(cli)?)?;
    write_out(None, &json, 0o644)?;
    Ok(EXIT_OK)
}

/// A CRL file's bytes and where they came from.
type CrlFile = (Vec<u8>, PathBuf);

/// `enc --cert FILE [CERTNAME]`: the certificate's DER, verified. Against --cacert and the
/// CRLs of --crl and --ca-url when --cacert is given; else against the --dir CA's bundle
/// and CRLs. Returns the DER and the certname it names.
pub(super) fn verified_cert_file(
    cli: &Cli,
    path: &Path,
    certname: Option<&str>,
    a: &EncRemoteArgs,
) -> Result<(Vec<u8>, String), Error> {
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
    let name = match certname {
        Some(n) => n.to_string(),
        None => c.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or("").to_string(),
    };
    let now = now(cli)?;
    let (bundle, bundle_path, crls): (Vec<u8>, PathBuf, Vec<CrlFile>) = match &a.cacert {
        Some(cacert) => {
            let bundle = read_file(cacert, crate::files::input::Kind::TrustFile)?;
            let mut crls = Vec::new();
            for f in &a.crl {
                crls.push((read_file(f, crate::files::input::Kind::TrustFile)?, f.clone()));
            }
            if let Some(url) = &a.ca_url {
                let ca = CaService::new(url, &bundle, None)?;
                let r = ca.get(crate::compile::CRL_PATH, &[])?;
                if r.status != 200 {
                    return Err(Error::Remote {
                        url: url.clone(),
                        detail: format!("GET the CRL answered {}", r.status),
                    });
                }
                let checked = crate::compile::check_crl_body(&r.body, (&bundle, cacert), url, None)?;
                warn_ignored(&checked.ignored);
                crls.push((checked.pem, PathBuf::from(format!("{url}{}", crate::compile::CRL_PATH))));
            }
            if crls.is_empty() {
                return Err(Error::Usage {
                    detail: "--cert with --cacert needs the CA's CRLs: --crl FILE (Puppet's hostcrl) or --ca-url URL"
                        .into(),
                });
            }
            (bundle, cacert.clone(), crls)
        }
        None if a.ca_url.is_some() || !a.crl.is_empty() => {
            return Err(Error::Usage {
                detail: "--cert with --ca-url or --crl needs --cacert BUNDLE (the CA bundle to verify against)".into(),
            })
        }
        None => {
            let d = dir(cli)?;
            let auth = Authority::open_for_cli(&d, &cli.store_url())?;
            auth.maintain(now)?;
            // A shared store: every master CA of the fleet (read, nothing written: `vouch serve`
            // keeps the fleet's files) and the CRLs this master holds of them.
            let bundle = auth.fleet_bundle_now()?.into_bytes();
            let crl = auth.crl_document.get()?.plain.to_vec();
            (bundle, d.file("ca_bundle.pem"), vec![(crl, d.file("ca_crl.pem"))])
        }
    };
    let refs: Vec<(&[u8], &Path)> = crls.iter().map(|(b, p)| (b.as_slice(), p.as_path())).collect();
    let warnings = crate::hook::puppet_cadir::verify_leaf(
        &der,
        &name,
        (&bundle, &bundle_path),
        &refs,
        crate::hook::puppet_cadir::CrlExpiry::Ignore,
        now,
    )?;
    for w in warnings {
        eprintln!("vouch: warning: {w}");
    }
    Ok((der, name))
}
