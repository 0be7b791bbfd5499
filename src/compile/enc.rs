//! `vouch enc --ca-url URL --cacert BUNDLE CERTNAME`: the external node classifier of a
//! compile server whose CA is `vouch serve`.
//!
//! Every answer comes from a certificate verified on this call: it chains to `--cacert`,
//! is valid now for client authentication, is listed on no CRL (the CRL this classifier
//! fetched from the CA and refreshes every `--crl-refresh`, and every `--crl` file such as
//! Puppet's `hostcrl` kept by `vouch crl --fetch`), and names CERTNAME as its CN.
//!
//! The cache (`--cache-dir`): `crl.pem` (the CA's CRLs, one per CA) with its fetch state
//! and `crl.checked` (when, and against which bundle), and one entry per certificate serial
//! (`serial/SERIAL.json`: the certificate, the administrators' override if one was read,
//! when it was fetched) found through `name/CERTNAME`. An entry younger than
//! `--crl-refresh` answers without asking the CA; an older one is fetched again, and is used
//! when the CA cannot be reached (vouch serve restarting), always verified against the CRLs
//! first. Every CRL counts only until its nextUpdate: past it (the CA unreachable all that
//! time) the classifier refuses. At most `--cache-max` entries are kept (the oldest go).
//!
//! What the cache holds counts only for this call's `--cacert`, matched by signature (see
//! [`crate::hook::ca_chain`]): CRLs checked against another bundle are fetched again, and so
//! are CRLs lacking one that a CA of the node's chain signed (once, before refusing); a
//! cached certificate that does not chain to the bundle is dropped and fetched again.

use super::log::{report, LogTo, Severity};
use super::{fetch_crl, unix, CaService, Fetched};
use crate::authority::Source;
use crate::error::Error;
use crate::vouching::classification::Classification;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use time::OffsetDateTime;

/// The classifier's settings (command line, environment or config file).
#[derive(Debug, Clone)]
pub struct Settings {
    pub ca_url: String,
    pub cacert: PathBuf,
    pub crl_refresh: Duration,
    /// More CRL files to check (Puppet's hostcrl): a certificate on any is refused.
    pub crl_files: Vec<PathBuf>,
    pub cache_dir: PathBuf,
    pub cache_max: usize,
    pub log: LogTo,
    /// An administrator's certificate and key: with them, overrides are read too.
    pub identity: Option<(PathBuf, PathBuf)>,
    pub mirror_oid: Vec<u64>,
    pub max_bytes: usize,
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Fetched from the CA on this call.
    Fetched,
    /// From the cache, still fresh.
    Cached,
    /// From the cache because the CA could not be reached.
    Stale,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    certname: String,
    serial: String,
    pem: String,
    /// Unix seconds.
    fetched_at: i64,
    /// The administrators' override (YAML or JSON text), when overrides were read.
    #[serde(default)]
    override_text: Option<String>,
}

fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    crate::error::read_input(path, crate::files::input::Kind::TrustFile)
}

fn io<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io { path: path.to_path_buf(), op, source }
}

fn fresh(fetched_at: i64, now: OffsetDateTime, refresh: Duration) -> bool {
    let age = unix(now).saturating_sub(fetched_at);
    age >= 0 && u64::try_from(age).unwrap_or(u64::MAX) < refresh.as_secs()
}

/// Classifies `certname`: the ENC JSON and where it came from. Refusals are errors.
pub fn classify(s: &Settings, certname: &str, now: OffsetDateTime) -> Result<(String, Served), Error> {
    crate::decision::check_certname(certname)
        .map_err(|problem| Error::CertnameInvalid { certname: certname.to_string(), problem })?;
    let bundle = read_file(&s.cacert)?;
    let identity = match &s.identity {
        Some((c, k)) => Some((read_file(c)?, read_file(k)?)),
        None => None,
    };
    let ca = CaService::new(&s.ca_url, &bundle, identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())))?;
    // The cache decides what is printed (certificates, overrides): it is this user's alone.
    for d in [s.cache_dir.clone(), s.cache_dir.join("serial"), s.cache_dir.join("name")] {
        crate::files::durable::create_private_dirs(&d).map_err(io(&s.cache_dir, "create"))?;
        crate::files::trust::check_private_dir(&d)?;
    }
    let (entry, der, served) = verified_entry(s, &ca, &bundle, identity.is_some(), certname, now)?;

    // An override counts only when this classifier reads overrides (an administrator's
    // credentials configured): a cached one otherwise is not trusted.
    let override_text = entry.override_text.as_ref().filter(|_| identity.is_some());
    let (classification, source) = match override_text {
        Some(text) => (
            Classification::from_yaml(text, s.max_bytes).map_err(|e| Error::NotValid {
                certname: certname.to_string(),
                detail: format!("its override is unusable: {e}"),
            })?,
            Source::Override,
        ),
        None => (
            crate::authority::classification_from_cert(&der, &s.mirror_oid, s.max_bytes, certname)?,
            Source::Certificate,
        ),
    };
    let json = crate::authority::enc_json_with_source(&classification, source).map_err(|e| Error::NotValid {
        certname: certname.to_string(),
        detail: format!("its classification is unusable: {e}"),
    })?;
    Ok((json, served))
}

/// The node's entry and certificate (DER), verified against the bundle and the CRLs. When
/// the cached CRLs hold none a CA of the node's chain signed (another CA's, or a master
/// the bundle gained since), they are fetched once more before refusing.
fn verified_entry(
    s: &Settings,
    ca: &CaService,
    bundle: &[u8],
    overrides: bool,
    certname: &str,
    now: OffsetDateTime,
) -> Result<(Entry, Vec<u8>, Served), Error> {
    let crl_path = s.cache_dir.join("crl.pem");
    let fetched = refresh_crl(s, ca, bundle, &crl_path, now, false)?;
    let (entry, served) = entry_for(s, ca, bundle, overrides, certname, now)?;
    let (_, der) = crate::encoding::pem::find(entry.pem.as_bytes(), &["CERTIFICATE"])
        .map_err(|e| Error::NotValid { certname: certname.to_string(), detail: e.to_string() })?;
    match verify(s, bundle, &crl_path, &der, certname, now) {
        Err(e @ Error::CrlNotFromBundle { .. }) if !fetched && from_cache(&e, &crl_path) => {
            match refresh_crl(s, ca, bundle, &crl_path, now, true) {
                Ok(_) => verify(s, bundle, &crl_path, &der, certname, now)?,
                // The CA's answer names the cause better (its CRLs are another CA's).
                Err(answer @ Error::CrlNotFromBundle { .. }) => return Err(answer),
                Err(other) => {
                    warn(s, &format!("vouch enc: the CRLs could not be fetched again: {other}"));
                    return Err(e);
                }
            }
        }
        other => other?,
    }
    Ok((entry, der, served))
}

/// Whether `e` is about the cached CRLs (not a `--crl` file).
fn from_cache(e: &Error, crl_path: &Path) -> bool {
    matches!(e, Error::CrlNotFromBundle { source, .. } if *source == crl_path.display().to_string())
}

/// Verifies the node's certificate against the bundle, the cached CRLs and every `--crl`
/// file; a CRL there that no CA of the bundle signed is ignored, said in the log.
fn verify(
    s: &Settings,
    bundle: &[u8],
    crl_path: &Path,
    der: &[u8],
    certname: &str,
    now: OffsetDateTime,
) -> Result<(), Error> {
    let mut crls: Vec<(Vec<u8>, PathBuf)> = vec![(read_file(crl_path)?, crl_path.to_path_buf())];
    for f in &s.crl_files {
        crls.push((read_file(f)?, f.clone()));
    }
    let crl_refs: Vec<(&[u8], &Path)> = crls.iter().map(|(b, p)| (b.as_slice(), p.as_path())).collect();
    // Every CRL only until its nextUpdate: a cached copy kept past it while the CA is
    // unreachable could miss a revocation for ever.
    let warnings = crate::hook::puppet_cadir::verify_leaf(
        der,
        certname,
        (bundle, &s.cacert),
        &crl_refs,
        crate::hook::puppet_cadir::CrlExpiry::Enforce,
        now,
    )?;
    for w in warnings {
        warn(s, &format!("vouch enc: {w}"));
    }
    Ok(())
}

/// A warning to the log (and to stderr when the log cannot take it).
fn warn(s: &Settings, message: &str) {
    if !report(&s.log, Some(&s.cache_dir), Severity::Warning, message) && s.log != LogTo::Stderr {
        let _ = writeln!(std::io::stderr(), "{message}");
    }
}

/// When the cached CRLs were last fetched (or found current), and the SHA-256 of the bundle
/// they were checked against: `crl.checked` holds `UNIX-SECONDS BUNDLE-SHA256`.
fn crl_checked(path: &Path) -> Option<(i64, String)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut words = text.split_whitespace();
    let at = words.next()?.parse().ok()?;
    Some((at, words.next()?.to_string()))
}

/// The cached CRLs, fetched again when older than `--crl-refresh`, when checked against
/// another bundle than this call's (a CA rebuilt, restored, or a master joining), or when
/// `force`d (they lack a CRL the node's chain needs; then the fetch is whole and its failure
/// the answer). A CA that cannot be reached otherwise leaves the cached CRLs in use (said in
/// the log) until their nextUpdate; past it, or without them, the call fails. Returns whether
/// the CA answered on this call.
fn refresh_crl(
    s: &Settings,
    ca: &CaService,
    bundle: &[u8],
    crl_path: &Path,
    now: OffsetDateTime,
    force: bool,
) -> Result<bool, Error> {
    let checked = s.cache_dir.join("crl.checked");
    let bundle_sha256 = crate::encoding::sha256_hex(bundle);
    let current = crl_checked(&checked).is_some_and(|(t, b)| fresh(t, now, s.crl_refresh) && b == bundle_sha256);
    if crl_path.exists() && current && !force {
        return Ok(false);
    }
    if force {
        let _ = std::fs::remove_file(super::state_path(crl_path));
    }
    match fetch_crl(ca, (bundle, &s.cacert), crl_path) {
        Ok(fetched) => {
            if let Fetched::Replaced { ignored, .. } = fetched {
                for line in ignored {
                    warn(s, &format!("vouch enc: {line}"));
                }
            }
            let stamp = format!("{} {bundle_sha256}\n", unix(now));
            crate::files::durable::write_replace(&checked, stamp.as_bytes(), 0o600).map_err(io(&checked, "write"))?;
            Ok(true)
        }
        Err(e) if crl_path.exists() && !force => {
            if let Some(lapsed) = lapsed_crl(crl_path, now) {
                return Err(Error::Remote {
                    url: ca.url().to_string(),
                    detail: format!(
                        "the CRL could not be refreshed ({e}), and the cached one in {} is past its nextUpdate \
                         ({lapsed}): it may miss revocations since",
                        crl_path.display()
                    ),
                });
            }
            warn(s, &format!("vouch enc: the CRL was not refreshed, using the cached one ({e})"));
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The earliest nextUpdate (RFC 3339) of the CRLs in `path` that is not after `now`, if any
/// (a CRL without nextUpdate, or unreadable, counts as lapsed: verification refuses it anyway).
fn lapsed_crl(path: &Path, now: OffsetDateTime) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let Ok(pem) = std::fs::read(path) else { return Some("unreadable".into()) };
    let ders = crate::encoding::pem::find_all(&pem, "X509 CRL").unwrap_or_default();
    if ders.is_empty() {
        return Some("no CRL".into());
    }
    for d in &ders {
        let next = x509_parser::revocation_list::CertificateRevocationList::from_der(d)
            .ok()
            .and_then(|(_, c)| c.next_update())
            .map(|t| t.to_datetime());
        match next {
            Some(t) if t > now => {}
            Some(t) => return Some(crate::encoding::time::format_rfc3339(t)),
            None => return Some("none".into()),
        }
    }
    None
}

fn serial_path(s: &Settings, serial: &str) -> PathBuf {
    s.cache_dir.join("serial").join(format!("{serial}.json"))
}

fn cached(s: &Settings, certname: &str) -> Option<Entry> {
    let serial = std::fs::read_to_string(s.cache_dir.join("name").join(certname)).ok()?;
    let serial = serial.trim();
    if serial.is_empty() || !serial.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let e: Entry = serde_json::from_slice(&std::fs::read(serial_path(s, serial)).ok()?).ok()?;
    (e.certname == certname).then_some(e)
}

/// Whether `pem`'s certificate chains to a CA of `bundle` (by signature).
fn issued_under(pem: &str, bundle: &[u8]) -> bool {
    let Ok((_, der)) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]) else { return false };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else { return false };
    let ders = crate::encoding::pem::find_all(bundle, "CERTIFICATE").unwrap_or_default();
    let Ok(cas) = crate::hook::ca_chain::parse_bundle(&ders) else { return false };
    crate::hook::ca_chain::chain_of(&cert, &cas).is_some()
}

/// The node's entry: fresh from the cache, else from the CA (stored), else — the CA
/// unreachable — whatever the cache holds. A cached certificate that does not chain to this
/// call's bundle (another CA's: rebuilt, restored) counts for nothing: it is dropped.
fn entry_for(
    s: &Settings,
    ca: &CaService,
    bundle: &[u8],
    overrides: bool,
    certname: &str,
    now: OffsetDateTime,
) -> Result<(Entry, Served), Error> {
    let old = cached(s, certname).filter(|e| {
        let ours = issued_under(&e.pem, bundle);
        if !ours {
            let _ = std::fs::remove_file(serial_path(s, &e.serial));
            let _ = std::fs::remove_file(s.cache_dir.join("name").join(certname));
        }
        ours
    });
    if let Some(e) = old.as_ref().filter(|e| fresh(e.fetched_at, now, s.crl_refresh)) {
        return Ok((clone_entry(e), Served::Cached));
    }
    match fetch_entry(ca, overrides, certname, now) {
        Ok(e) => {
            store(s, &e)?;
            Ok((e, Served::Fetched))
        }
        Err(Error::NotFound { certname }) => {
            let _ = std::fs::remove_file(s.cache_dir.join("name").join(&certname));
            Err(Error::NotFound { certname })
        }
        Err(e @ Error::Remote { .. }) => match old {
            Some(entry) => {
                warn(
                    s,
                    &format!(
                        "vouch enc: {certname}: answering from the cache (serial {}, fetched at {}): {e}",
                        entry.serial,
                        OffsetDateTime::from_unix_timestamp(entry.fetched_at)
                            .map(crate::encoding::time::format_rfc3339)
                            .unwrap_or_default()
                    ),
                );
                Ok((entry, Served::Stale))
            }
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

fn clone_entry(e: &Entry) -> Entry {
    Entry {
        certname: e.certname.clone(),
        serial: e.serial.clone(),
        pem: e.pem.clone(),
        fetched_at: e.fetched_at,
        override_text: e.override_text.clone(),
    }
}

/// GET certificate/NAME (public), and with an administrator's identity the override.
fn fetch_entry(ca: &CaService, overrides: bool, certname: &str, now: OffsetDateTime) -> Result<Entry, Error> {
    let resp = ca.get(&format!("/puppet-ca/v1/certificate/{certname}"), &[])?;
    match resp.status {
        200 => {}
        404 => return Err(Error::NotFound { certname: certname.to_string() }),
        other => {
            return Err(Error::Remote {
                url: ca.url().to_string(),
                detail: format!("GET certificate/{certname} answered {other}"),
            })
        }
    }
    let (_, der) = crate::encoding::pem::find(&resp.body, &["CERTIFICATE"])
        .map_err(|e| Error::NotValid { certname: certname.to_string(), detail: format!("the CA's answer: {e}") })?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| Error::NotValid { certname: certname.to_string(), detail: format!("the CA's answer: {e}") })?;
    let serial = crate::encoding::hex(cert.raw_serial());
    let override_text = if overrides {
        let r = ca.get(&format!("/puppet-ca/v1/classification_override/{certname}"), &[])?;
        if r.status != 200 {
            return Err(Error::Remote {
                url: ca.url().to_string(),
                detail: format!(
                    "GET classification_override/{certname} answered {} (are --client-cert/--client-key an \
                     administrator's?)",
                    r.status
                ),
            });
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| Error::Remote {
            url: ca.url().to_string(),
            detail: format!("classification_override/{certname}: not JSON: {e}"),
        })?;
        v["classification"].as_str().map(str::to_string)
    } else {
        None
    };
    Ok(Entry {
        certname: certname.to_string(),
        serial,
        pem: crate::encoding::pem::encode("CERTIFICATE", &der),
        fetched_at: unix(now),
        override_text,
    })
}

/// Stores an entry (atomically) and keeps the cache within `--cache-max` entries.
fn store(s: &Settings, e: &Entry) -> Result<(), Error> {
    let path = serial_path(s, &e.serial);
    let bytes = serde_json::to_vec(e).map_err(|err| Error::Usage { detail: err.to_string() })?;
    crate::files::durable::write_replace_unsynced_in(&s.cache_dir, &path, &bytes, 0o600).map_err(io(&path, "write"))?;
    let name = s.cache_dir.join("name").join(&e.certname);
    crate::files::durable::write_replace_unsynced_in(&s.cache_dir, &name, format!("{}\n", e.serial).as_bytes(), 0o600)
        .map_err(io(&name, "write"))?;
    let dir = s.cache_dir.join("serial");
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&dir)
        .map_err(io(&dir, "read"))?
        .filter_map(|d| d.ok())
        .filter_map(|d| Some((d.metadata().ok()?.modified().ok()?, d.path())))
        .collect();
    if entries.len() > s.cache_max {
        entries.sort();
        let excess = entries.len().saturating_sub(s.cache_max);
        for (_, p) in entries.into_iter().take(excess) {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok(())
}

/// Runs the classifier for the command line: the JSON to print; a refusal is logged too
/// (Puppet Server shows an ENC's stderr nowhere) and returned (exit 2).
pub fn run(s: &Settings, certname: &str, now: OffsetDateTime) -> Result<String, Error> {
    classify(s, certname, now).map(|(json, _)| json).inspect_err(|e| {
        if s.log != LogTo::Stderr {
            let hint = e.hint().map(|h| format!(" (hint: {h})")).unwrap_or_default();
            // Not echoed when the log cannot take it: the error itself goes to stderr.
            report(&s.log, Some(&s.cache_dir), Severity::Warning, &format!("vouch enc: refused {certname}: {e}{hint}"));
        }
    })
}
