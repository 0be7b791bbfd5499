//! Reading a policy file: TOML into raw sections, each validated into [`Policy`].

use super::{duration_problem, parse_duration, ChainCache};
use super::{OnExisting, Pattern, Policy, PolicyError, Profile, Scope, TrustBundle, DEFAULT_MIRROR_OID};
use crate::encoding::oids;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    conductors: RawConductors,
    #[serde(default)]
    attributes: RawAttributes,
    #[serde(default)]
    classification: RawClassification,
    #[serde(default)]
    extensions: RawExtensions,
    #[serde(default)]
    audit: RawAudit,
    #[serde(default)]
    issuance: RawIssuance,
    #[serde(default)]
    crl: RawCrl,
    #[serde(default)]
    replay: RawReplay,
    #[serde(default)]
    conductor: Vec<RawScope>,
    #[serde(default)]
    serve: RawServe,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServe {
    admins: Option<toml::Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    name: String,
    fingerprint: Option<Spanned<String>>,
    subject: Option<Spanned<String>>,
    issuer: Option<Spanned<String>>,
    certnames: Option<Vec<String>>,
    classes: Option<Vec<String>>,
    environments: Option<Vec<String>>,
    parameters: Option<Vec<String>>,
    max_lifetime: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawReplay {
    enabled: Option<bool>,
    journal: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawIssuance {
    cap_at_conductor: Option<bool>,
    renewal_min_age: Option<Spanned<String>>,
    validity: Option<Spanned<String>>,
    backdate: Option<Spanned<String>>,
    on_existing: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCrl {
    validity: Option<Spanned<String>>,
    refresh_before: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConductors {
    trusted_roots: Vec<Spanned<String>>,
    #[serde(default)]
    intermediates: Vec<Spanned<String>>,
    #[serde(default)]
    crls: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAttributes {
    versions: Option<Spanned<Vec<u32>>>,
    max_lifetime: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawClassification {
    max_bytes: Option<Spanned<i64>>,
    mirror_oid: Option<Spanned<String>>,
    mirror_required: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExtensions {
    allow_subject_alt_names: Option<bool>,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAudit {
    log: Option<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

impl Policy {
    /// Reads and validates a policy file; relative paths in it are relative to its directory.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        // Whoever may change the policy, or a trust anchor it names, decides what is signed:
        // refuse files (and their directories) that a user other than root or this one can change.
        crate::files::trust::check_trusted(path).map_err(|u| PolicyError {
            file: path.to_path_buf(),
            line: None,
            key: None,
            message: format!("refusing to trust it: {u}"),
        })?;
        let text = crate::files::input::read_path_text(path, crate::files::input::Kind::Policy).map_err(|e| {
            PolicyError { file: path.to_path_buf(), line: None, key: None, message: format!("cannot read it: {e}") }
        })?;
        let policy = Policy::parse(path, &text, |p| {
            crate::files::trust::check_trusted(p)
                .map_err(|u| std::io::Error::other(format!("refusing to trust it: {u}")))?;
            crate::files::input::read_path(p, crate::files::input::Kind::TrustFile)
        })?;
        // The replay journal and the audit log, when they exist (vouch creates them
        // otherwise): whoever may change them can erase one-time use or the record of
        // decisions, or (a link planted in a directory they can write) aim vouch's pruning
        // and appends elsewhere.
        for (key, p) in [("replay.journal", &policy.replay_journal), ("audit.log", &policy.audit_log)] {
            let Some(p) = p else { continue };
            if std::fs::symlink_metadata(p).is_ok() {
                crate::files::trust::check_trusted(p).map_err(|u| PolicyError {
                    file: path.to_path_buf(),
                    line: None,
                    key: Some(key.to_string()),
                    message: format!("refusing to trust it: {u}"),
                })?;
            }
        }
        Ok(policy)
    }

    /// Parses policy text; `read` loads the certificate files it names.
    pub fn parse(
        path: &Path,
        text: &str,
        read: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Policy, PolicyError> {
        let err = |span: Option<std::ops::Range<usize>>, key: &str, message: String| PolicyError {
            file: path.to_path_buf(),
            line: span.map(|s| line_of(text, s.start)),
            key: if key.is_empty() { None } else { Some(key.to_string()) },
            message,
        };
        let raw: RawPolicy = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let key = msg
                .split('`')
                .nth(1)
                .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
                .unwrap_or("");
            err(e.span(), key, msg.clone())
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };

        let load_certs = |items: &[Spanned<String>], key: &str| -> Result<Vec<Vec<u8>>, PolicyError> {
            let mut out = Vec::new();
            for item in items {
                let file = resolve(item.get_ref());
                let bytes = read(&file)
                    .map_err(|e| err(Some(item.span()), key, format!("cannot read {}: {e}", file.display())))?;
                let ders = crate::encoding::pem::find_all(&bytes, "CERTIFICATE")
                    .map_err(|e| err(Some(item.span()), key, format!("{}: {e}", file.display())))?;
                if ders.is_empty() {
                    return Err(err(Some(item.span()), key, format!("{} holds no PEM certificate", file.display())));
                }
                for der in &ders {
                    x509_parser::parse_x509_certificate(der).map_err(|e| {
                        err(
                            Some(item.span()),
                            key,
                            format!("{} holds a certificate that does not parse: {e}", file.display()),
                        )
                    })?;
                }
                out.extend(ders);
            }
            Ok(out)
        };
        if raw.conductors.trusted_roots.is_empty() {
            return Err(err(None, "conductors.trusted_roots", "at least one trusted root is required".into()));
        }
        let trust = TrustBundle {
            roots: load_certs(&raw.conductors.trusted_roots, "conductors.trusted_roots")?,
            intermediates: load_certs(&raw.conductors.intermediates, "conductors.intermediates")?,
            crls: {
                let mut out = Vec::new();
                for item in &raw.conductors.crls {
                    let file = resolve(item.get_ref());
                    let bytes = read(&file).map_err(|e| {
                        err(Some(item.span()), "conductors.crls", format!("cannot read {}: {e}", file.display()))
                    })?;
                    let der = if bytes.first() == Some(&0x30) {
                        bytes
                    } else {
                        crate::encoding::pem::find(&bytes, &["X509 CRL"]).map(|(_, d)| d).map_err(|e| {
                            err(Some(item.span()), "conductors.crls", format!("{}: {e}", file.display()))
                        })?
                    };
                    webpki::BorrowedCertRevocationList::from_der(&der).map_err(|e| {
                        err(Some(item.span()), "conductors.crls", format!("{} is not a CRL: {e:?}", file.display()))
                    })?;
                    out.push(der);
                }
                out
            },
        };

        let dur = |v: &Option<Spanned<String>>, key: &str, default: u64| -> Result<Duration, PolicyError> {
            match v {
                None => Ok(Duration::from_secs(default)),
                Some(s) => match parse_duration(s.get_ref()) {
                    // Bounded so that no date arithmetic can overflow (100 years).
                    Some(d) if d.as_secs() > 0 && d.as_secs() <= 100 * 365 * 86_400 => Ok(d),
                    Some(d) if d.as_secs() > 0 => {
                        Err(err(Some(s.span()), key, format!("'{}' is longer than 100 years", s.get_ref())))
                    }
                    _ => Err(err(Some(s.span()), key, duration_problem(s.get_ref(), "30m, 24h, 7d or 5y"))),
                },
            }
        };
        let versions = match raw.attributes.versions {
            None => vec![1, 2],
            Some(v) => {
                let span = v.span();
                let list = v.into_inner();
                if list.is_empty() || list.iter().any(|&x| !(1..=2).contains(&x)) {
                    return Err(err(
                        Some(span),
                        "attributes.versions",
                        format!("supported signature versions are 1 and 2; got {list:?}"),
                    ));
                }
                list
            }
        };
        let max_attribute_lifetime = dur(&raw.attributes.max_lifetime, "attributes.max_lifetime", 7 * 86_400)?;
        let classification_max_bytes = match raw.classification.max_bytes {
            None => crate::vouching::classification::DEFAULT_MAX_BYTES,
            Some(n) => {
                let v = *n.get_ref();
                if !(1..=1_048_576).contains(&v) {
                    return Err(err(
                        Some(n.span()),
                        "classification.max_bytes",
                        format!("{v} is out of range 1..=1048576"),
                    ));
                }
                v as usize
            }
        };
        let mirror_oid = match raw.classification.mirror_oid {
            None => DEFAULT_MIRROR_OID.to_vec(),
            Some(s) => {
                let o = oids::parse(s.get_ref()).ok_or_else(|| {
                    err(Some(s.span()), "classification.mirror_oid", format!("'{}' is not an OID", s.get_ref()))
                })?;
                if !(oids::is_under(&o, oids::PP_REG) || oids::is_under(&o, oids::PP_PRIV)) {
                    return Err(err(
                        Some(s.span()),
                        "classification.mirror_oid",
                        "must lie under ppRegCertExt (1.3.6.1.4.1.34380.1.1) or ppPrivCertExt \
                         (1.3.6.1.4.1.34380.1.2): Puppet Server copies only those into certificates"
                            .into(),
                    ));
                }
                o
            }
        };
        let mut allowed_extensions = Vec::new();
        for item in &raw.extensions.allow {
            let o = oids::parse(item.get_ref()).ok_or_else(|| {
                err(
                    Some(item.span()),
                    "extensions.allow",
                    format!("'{}' is neither an OID nor a pp_* name", item.get_ref()),
                )
            })?;
            if oids::is_under(&o, oids::PP_AUTH) {
                return Err(err(
                    Some(item.span()),
                    "extensions.allow",
                    format!(
                        "{} is in the ppAuthCertExt arc, which grants API rights; vouch never allows it",
                        item.get_ref()
                    ),
                ));
            }
            if o == oids::SUBJECT_ALT_NAME {
                return Err(err(
                    Some(item.span()),
                    "extensions.allow",
                    "use allow_subject_alt_names for subjectAltName".into(),
                ));
            }
            if o == mirror_oid {
                return Err(err(
                    Some(item.span()),
                    "extensions.allow",
                    "this is the classification mirror OID; it is always checked against the signed classification"
                        .into(),
                ));
            }
            if o == oids::VOUCH_ARC || oids::is_under(&o, oids::VOUCH_ARC) {
                return Err(err(
                    Some(item.span()),
                    "extensions.allow",
                    format!(
                        "{} is in vouch's own arc (1.3.6.1.4.1.34380.2), whose extensions only vouch writes",
                        item.get_ref()
                    ),
                ));
            }
            // Anything else (basicConstraints, key usage, EKU, any 2.5.29.*, private OIDs) would
            // be copied next to, or instead of, what vouch itself writes into the certificate.
            if !(oids::is_under(&o, oids::PP_REG) || oids::is_under(&o, oids::PP_PRIV)) {
                return Err(err(
                    Some(item.span()),
                    "extensions.allow",
                    format!(
                        "{} is outside ppRegCertExt (1.3.6.1.4.1.34380.1.1.*) and ppPrivCertExt \
                         (1.3.6.1.4.1.34380.1.2.*), the only extensions a node may request",
                        item.get_ref()
                    ),
                ));
            }
            allowed_extensions.push(o);
        }
        let mut admin_fingerprints = Vec::new();
        if let Some(admins) = &raw.serve.admins {
            for a in admins.get_ref() {
                let hex: String = a.chars().filter(|c| *c != ':').collect::<String>().to_ascii_uppercase();
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(err(
                        Some(admins.span()),
                        "serve.admins",
                        format!("{a:?} is not a SHA-256 fingerprint (64 hex digits, colons optional)"),
                    ));
                }
                let pairs: Vec<String> =
                    hex.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
                admin_fingerprints.push(pairs.join(":"));
            }
        }
        // An empty path would resolve to the policy's directory: refuse it by name.
        if raw.audit.log.as_deref().is_some_and(|l| l.trim().is_empty()) {
            return Err(err(None, "audit.log", "is empty: name a file, or remove the key to keep no audit log".into()));
        }
        if raw.replay.journal.as_deref().is_some_and(|l| l.trim().is_empty()) {
            return Err(err(None, "replay.journal", "is empty: name a directory (default \"replay\")".into()));
        }
        Ok(Policy {
            chain_cache: ChainCache::default(),
            admin_fingerprints,
            source: path.to_path_buf(),
            trust,
            versions,
            max_attribute_lifetime,
            classification_max_bytes,
            mirror_oid,
            mirror_required: raw.classification.mirror_required.unwrap_or(false),
            allow_subject_alt_names: raw.extensions.allow_subject_alt_names.unwrap_or(false),
            allowed_extensions,
            audit_log: raw.audit.log.map(|l| resolve(&l)),
            // "0s" (no minimum) is allowed here, unlike in the other durations.
            renewal_min_age: match &raw.issuance.renewal_min_age {
                Some(v) if matches!(v.get_ref().trim(), "0" | "0s") => Duration::ZERO,
                v => dur(v, "issuance.renewal_min_age", 3_600)?,
            },
            profile: Profile {
                validity: dur(&raw.issuance.validity, "issuance.validity", 5 * 365 * 86_400)?,
                backdate: dur(&raw.issuance.backdate, "issuance.backdate", 86_400)?,
                cap: None,
            },
            on_existing: match raw.issuance.on_existing.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
                None | Some(("refuse", _)) => OnExisting::Refuse,
                Some(("supersede", _)) => OnExisting::Supersede,
                Some((other, span)) => {
                    return Err(err(
                        Some(span),
                        "issuance.on_existing",
                        format!("'{other}' is not one of: refuse, supersede"),
                    ))
                }
            },
            cap_at_conductor: raw.issuance.cap_at_conductor.unwrap_or(false),
            crl_validity: dur(&raw.crl.validity, "crl.validity", 30 * 86_400)?,
            crl_refresh_before: dur(&raw.crl.refresh_before, "crl.refresh_before", 10 * 86_400)?,
            scopes: {
                let mut scopes = Vec::new();
                for sc in raw.conductor {
                    if sc.fingerprint.is_none() && sc.subject.is_none() && sc.issuer.is_none() {
                        return Err(err(
                            None,
                            "conductor",
                            format!("scope '{}' matches no conductor: give fingerprint, subject or issuer", sc.name),
                        ));
                    }
                    let fingerprint = match sc.fingerprint {
                        None => None,
                        Some(f) => {
                            let hexed: String =
                                f.get_ref().chars().filter(|c| *c != ':').collect::<String>().to_lowercase();
                            if hexed.len() != 64 || !hexed.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return Err(err(
                                    Some(f.span()),
                                    "conductor.fingerprint",
                                    "must be the certificate's SHA-256 in hex (64 digits, colons allowed)".into(),
                                ));
                            }
                            Some(hexed)
                        }
                    };
                    let max_lifetime = match sc.max_lifetime {
                        None => None,
                        Some(m) => match parse_duration(m.get_ref()) {
                            Some(d) if d.as_secs() > 0 => Some(d),
                            _ => {
                                return Err(err(
                                    Some(m.span()),
                                    "conductor.max_lifetime",
                                    duration_problem(m.get_ref(), "30m or 1h"),
                                ))
                            }
                        },
                    };
                    let dn = |v: &Option<Spanned<String>>,
                              key: &str|
                     -> Result<Option<crate::encoding::dn::Dn>, PolicyError> {
                        match v {
                            None => Ok(None),
                            Some(text) => crate::encoding::dn::Dn::parse(text.get_ref()).map(Some).map_err(|e| {
                                err(
                                    Some(text.span()),
                                    key,
                                    format!("not a distinguished name as vouch prints them (CN=…, O=…): {e}"),
                                )
                            }),
                        }
                    };
                    let patterns = |list: Option<Vec<String>>,
                                    key: &str,
                                    make: fn(&str) -> Result<Pattern, String>|
                     -> Result<Option<Vec<Pattern>>, PolicyError> {
                        list.map(|l| l.iter().map(|p| make(p).map_err(|m| err(None, key, m))).collect()).transpose()
                    };
                    let certnames = patterns(sc.certnames, "conductor.certnames", Pattern::certname)?;
                    let classes = patterns(sc.classes, "conductor.classes", Pattern::class)?;
                    let subject_dn = dn(&sc.subject, "conductor.subject")?;
                    let issuer_dn = dn(&sc.issuer, "conductor.issuer")?;
                    scopes.push(Scope {
                        name: sc.name,
                        fingerprint,
                        subject: sc.subject.map(Spanned::into_inner),
                        issuer: sc.issuer.map(Spanned::into_inner),
                        subject_dn,
                        issuer_dn,
                        certnames,
                        classes,
                        environments: sc.environments,
                        parameters: sc.parameters,
                        max_lifetime,
                    });
                }
                scopes
            },
            replay_journal: if raw.replay.enabled.unwrap_or(true) {
                Some(resolve(raw.replay.journal.as_deref().unwrap_or("replay")))
            } else {
                None
            },
        })
    }
}
