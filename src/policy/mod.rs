//! The policy: which conductors are trusted and what they may vouch for.
//!
//! A policy file (TOML) is read and validated once into [`Policy`], a type
//! that cannot hold a bad value. Every error names the file, the line and the key.

use crate::encoding::oids;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

/// A policy file problem, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: Option<String>,
    pub message: String,
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "policy {}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, " line {l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, " key '{k}'")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PolicyError {}

/// The trusted roots and intermediates for conductor certificates (DER).
#[derive(Debug, Clone, Default)]
pub struct TrustBundle {
    pub roots: Vec<Vec<u8>>,
    pub intermediates: Vec<Vec<u8>>,
    /// CRLs of conductor issuers (DER): a conductor on one is refused.
    pub crls: Vec<Vec<u8>>,
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Where it was read from.
    pub source: PathBuf,
    pub trust: TrustBundle,
    /// Accepted signature versions.
    pub versions: Vec<u32>,
    /// How far ahead an attribute expiry may lie.
    pub max_attribute_lifetime: Duration,
    /// Cap on the decoded classification.
    pub classification_max_bytes: usize,
    /// The extension request that mirrors the classification (under ppRegCertExt or ppPrivCertExt).
    pub mirror_oid: Vec<u64>,
    /// Refuse CSRs without the mirror request.
    pub mirror_required: bool,
    /// Allow a requested subjectAltName.
    pub allow_subject_alt_names: bool,
    /// Other extension requests a node may add (never the ppAuthCertExt arc).
    pub allowed_extensions: Vec<Vec<u64>>,
    /// Where decisions are appended, one JSON line each.
    pub audit_log: Option<PathBuf>,
    /// Node certificate validity and backdating.
    pub profile: Profile,
    /// What a vouched CSR for a certname that already has a valid certificate gets.
    pub on_existing: OnExisting,
    /// End node certificates no later than the conductor certificate that vouched for them.
    pub cap_at_conductor: bool,
    /// `POST certificate_renewal` (a node renewing itself) is refused for a certificate
    /// issued less than this long ago: each renewal adds a CRL entry (superseded).
    pub renewal_min_age: Duration,
    /// How long a CRL is valid (its nextUpdate).
    pub crl_validity: Duration,
    /// Regenerate the CRL when less than this remains before its nextUpdate.
    pub crl_refresh_before: Duration,
    /// The one-time-use journal (None: disabled, which only tests should do).
    pub replay_journal: Option<PathBuf>,
    /// Per-conductor scopes. Empty: every trusted conductor may vouch for anything;
    /// otherwise a conductor must match one scope (the first that matches applies).
    pub scopes: Vec<Scope>,
    /// Conductor chains this policy verified, so each is verified once, not per CSR.
    pub chain_cache: ChainCache,
    /// `vouch serve`: SHA-256 fingerprints (`AB:CD:…`) of client certificates that may
    /// administer the CA besides those carrying `pp_cli_auth`.
    pub admin_fingerprints: Vec<String>,
}

/// Node certificate validity settings: validated with the policy, read by issuance
/// ([`crate::issuance::certificate::prepare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Lifetime of node certificates (Puppet: 5 years).
    pub validity: std::time::Duration,
    /// How far notBefore is set back, for nodes whose clocks lag (Puppet: 24 hours).
    pub backdate: std::time::Duration,
    /// A latest notAfter (the vouching conductor's, when the policy caps at it).
    pub cap: Option<time::OffsetDateTime>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            validity: std::time::Duration::from_secs(5 * 365 * 86_400),
            backdate: std::time::Duration::from_secs(86_400),
            cap: None,
        }
    }
}

/// Conductor certificates whose chain to this policy's trust verified, by SHA-256 of
/// their DER, with the time window in which that holds (the intersection of the
/// validity periods of the leaf and the intermediates used). A hit inside the window
/// skips webpki's path building and signature checks; anything else (a miss, a time
/// outside the window) verifies in full. Only verified chains enter, so filling it
/// needs certificates from a trusted root; it is cleared when it reaches
/// [`ChainCache::CAPACITY`]. Trust, intermediates and CRLs are fixed for a loaded
/// policy (SIGHUP loads a new one, with an empty cache), so the result is the same
/// as a full verification.
#[derive(Debug, Clone, Default)]
pub struct ChainCache(std::sync::Arc<std::sync::Mutex<ChainWindows>>);

/// SHA-256 of a conductor certificate → (first, last) Unix second its chain holds.
type ChainWindows = std::collections::HashMap<[u8; 32], (i64, i64)>;

impl ChainCache {
    pub const CAPACITY: usize = 4096;

    /// Whether `digest`'s chain is known good at `unix_time`.
    pub fn holds(&self, digest: &[u8; 32], unix_time: i64) -> bool {
        let map = match self.0.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        map.get(digest).is_some_and(|(from, until)| *from <= unix_time && unix_time <= *until)
    }

    /// Records a verified chain and its window.
    pub fn insert(&self, digest: [u8; 32], window: (i64, i64)) {
        let mut map = match self.0.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        map.insert(digest, window);
    }

    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one conductor (or group of conductors) may vouch for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub name: String,
    /// SHA-256 of the conductor certificate, lowercase hex without colons.
    pub fingerprint: Option<String>,
    /// The conductor certificate's subject, as written in the policy (e.g. `CN=cloud1`).
    pub subject: Option<String>,
    /// The subject of the certificate that issued the conductor's (its intermediate).
    pub issuer: Option<String>,
    /// `subject` parsed: compared with the certificate's DER name, never as a string.
    pub subject_dn: Option<crate::encoding::dn::Dn>,
    /// `issuer` parsed likewise.
    pub issuer_dn: Option<crate::encoding::dn::Dn>,
    /// Certname patterns; `*` matches any run of characters except `.`.
    pub certnames: Option<Vec<Pattern>>,
    /// Class name patterns; `*` matches any run of characters.
    pub classes: Option<Vec<Pattern>>,
    pub environments: Option<Vec<String>>,
    /// Top-level parameter names the classification may set.
    pub parameters: Option<Vec<String>>,
    pub max_lifetime: Option<Duration>,
}

/// A scope pattern, compiled once when the policy is loaded: `*` matches any run of
/// characters (for certnames: any run without a `.`), everything else itself, the
/// whole text (anchored). Matched by the `regex` crate's automata, in time linear in
/// the text whatever the pattern: a certname the agent chooses can never make it
/// backtrack (the recursive matcher this replaces took seconds on
/// `*-*-*-*-*-*-*-*x.example.test` against `a` + 61 `-` + `a.example.test`).
#[derive(Debug, Clone)]
pub struct Pattern {
    /// As written in the policy.
    pub text: String,
    re: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

impl Pattern {
    /// Compiles `pattern`; `*` never matches `stop` when one is given.
    pub fn new(pattern: &str, stop: Option<char>) -> Result<Pattern, String> {
        let star = match stop {
            Some(c) => format!("[^{}]*", regex::escape(&c.to_string())),
            None => "(?s:.*)".to_string(),
        };
        let body: Vec<String> = pattern.split('*').map(regex::escape).collect();
        let source = format!(r"\A(?:{})\z", body.join(&star));
        // Bounded: a policy line cannot make a huge automaton either.
        let re = regex::RegexBuilder::new(&source)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("pattern {pattern:?} cannot be compiled: {e}"))?;
        Ok(Pattern { text: pattern.to_string(), re })
    }

    /// A certname pattern: `*` stops at `.`.
    pub fn certname(pattern: &str) -> Result<Pattern, String> {
        Pattern::new(pattern, Some('.'))
    }

    /// A class pattern: `*` matches anything; a leading `::` (top scope) is ignored,
    /// as it is in the class names matched against it.
    pub fn class(pattern: &str) -> Result<Pattern, String> {
        let mut p = Pattern::new(pattern.trim_start_matches("::"), None)?;
        p.text = pattern.to_string();
        Ok(p)
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.re.is_match(text)
    }
}

/// Glob match: `*` matches any run of characters, except `stop` when given
/// (compiles the pattern each call: for tests and one-off checks; scopes compile theirs
/// once, as [`Pattern`]s). A pattern that cannot be compiled matches nothing.
pub fn glob(pattern: &str, text: &str, stop: Option<char>) -> bool {
    Pattern::new(pattern, stop).is_ok_and(|p| p.is_match(text))
}

/// The rule for a certname that already has a valid certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExisting {
    /// Refuse, as Puppet does (the operator cleans the old certificate first).
    Refuse,
    /// Revoke the old certificate (reason superseded) and issue the new one, but only
    /// for a new key and attributes that expire later than those that vouched for the
    /// old certificate (so replaying the old attributes cannot supersede it).
    Supersede,
}

/// The default mirror OID: ppPrivCertExt .5, after the seed's .2.5.
pub const DEFAULT_MIRROR_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 2, 5];

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

/// Parses a duration like `90s`, `30m`, `24h`, `7d`, `2w`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        "y" => 365 * 86_400,
        _ => return None,
    };
    n.checked_mul(mult).map(Duration::from_secs)
}

/// Why `s` is not a usable (positive) duration, for messages: zero and negative durations
/// are named as such, anything else is "not a duration"; `examples` like "30m, 24h or 7d".
pub fn duration_problem(s: &str, examples: &str) -> String {
    let t = s.trim();
    if t.strip_prefix('-').is_some_and(|rest| parse_duration(rest).is_some()) {
        format!("'{s}' is negative: a duration must be positive, like {examples}")
    } else if parse_duration(t).is_some_and(|d| d.is_zero()) {
        format!("'{s}' is zero: a duration must be positive, like {examples}")
    } else {
        format!("'{s}' is not a duration like {examples}")
    }
}

/// Formats a duration in the largest whole unit.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    for (unit, n) in [("y", 365 * 86_400), ("w", 604_800), ("d", 86_400), ("h", 3600), ("m", 60)] {
        if s >= n && s % n == 0 {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
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

/// The default policy `vouch ca init` writes.
pub fn default_policy_text(root_file: &str) -> String {
    format!(
        r#"# vouch policy: which cloud conductors are trusted, and what they may vouch for.
# Paths are relative to this file. Every key is documented in policy/README.md.

[conductors]
# Conductor certificates must chain to one of these roots and carry the EKU
# 1.3.6.1.4.1.34380.2.0 ("allowed to create new instances") on their own certificate.
trusted_roots = ["{root_file}"]
# Intermediates through which conductor certificates may chain (PEM files).
intermediates = []
# CRLs (PEM or DER) of the conductors' issuers: a revoked conductor is refused.
# Keep them fresh: an expired CRL here still counts (revocations never lapse).
crls = []

[attributes]
# Signature versions accepted. Version 2 binds the certname and a one-time
# nonce; version 1 (the seed's) binds neither: accept only [2] once every
# conductor signs version 2 (policy/strict.toml).
versions = [1, 2]
# How far in the future a signed expiry (attribute .2.3) may lie.
max_lifetime = "7d"

[classification]
# Largest decoded classification YAML accepted, in bytes.
max_bytes = 65536
# The extension request that mirrors the signed classification, so that Puppet
# Server copies it into the certificate and $trusted['extensions'] shows it.
# It must equal attribute .2.5 byte for byte whenever it is present.
mirror_oid = "1.3.6.1.4.1.34380.1.2.5"
# Refuse CSRs that lack the mirror request.
mirror_required = false

[extensions]
# Requested subjectAltNames let a node claim other names (CVE-2011-3872).
allow_subject_alt_names = false
# Further extension requests nodes may add (OIDs or pp_* names). The node alone
# controls them: never list one that your manifests or Hiera trust for roles.
# Only ppRegCertExt (1.3.6.1.4.1.34380.1.1.*) and ppPrivCertExt (1.3.6.1.4.1.34380.1.2.*)
# OIDs can be listed; the ppAuthCertExt arc (pp_cli_auth, pp_auth_role) never.
allow = []

[issuance]
# Node certificates: lifetime (Puppet's default is 5 years, capped at the master
# CA's own notAfter) and how far notBefore is set back for lagging clocks.
validity = "5y"
backdate = "1d"
# A vouched CSR for a certname that already has a valid certificate:
#   "refuse"    as Puppet does; 'vouch clean NAME' first;
#   "supersede" for reinstalled hosts: the old certificate is revoked (superseded)
#               and a new one issued, only for a new key whose attributes expire
#               later than those that vouched for the old certificate.
on_existing = "refuse"
# End node certificates no later than the conductor certificate that vouched
# for them (step-ca's rule). Off: conductor credentials rotate often, and a
# node's identity should not lapse with the launcher's; turn on for fleets that
# treat the conductor's lifetime as the upper bound of trust.
cap_at_conductor = false
# vouch serve: a node renewing itself (POST certificate_renewal) must hold its
# certificate at least this long (each renewal adds a CRL entry). Operators'
# `vouch renew` is not limited.
renewal_min_age = "1h"

[crl]
# The CRL's nextUpdate, and when to regenerate it: every command that touches
# the store regenerates it when less than refresh_before remains.
validity = "30d"
refresh_before = "10d"

[replay]
# One-time use: every attributes set that was approved is recorded here (version 2
# by its conductor's certificate and nonce together, so no other conductor can
# spend a nonce it learnt; version 1 by the SHA-256 of its signed string: not by
# the signature, which ECDSA lets anyone re-encode), and a second CSR presenting
# the same set is refused, whatever its certname. Entries expire with the
# attributes. Every process deciding with this policy must share this directory.
enabled = true
journal = "replay"

[audit]
# One JSON line per decision, issuance and revocation.
log = "audit.log"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        let root = crate::encoding::pem::encode("CERTIFICATE", &test_cert());
        Policy::parse(Path::new("/etc/vouch/policy.toml"), text, move |_| Ok(root.clone().into_bytes()))
    }

    fn test_cert() -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::new(vec!["x".to_string()]).unwrap().self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn empty_paths_are_refused_by_name() {
        for (text, key) in [("[audit]\nlog = \"\"\n", "audit.log"), ("[replay]\njournal = \" \"\n", "replay.journal")] {
            let e = parse(&format!("[conductors]\ntrusted_roots = [\"r.pem\"]\n{text}")).map(|_| ()).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    #[test]
    fn default_parses() {
        let p = parse(&default_policy_text("ca/root_crt.pem")).unwrap();
        assert_eq!(p.versions, [1, 2]);
        assert_eq!(p.replay_journal.as_deref(), Some(Path::new("/etc/vouch/replay")));
        assert_eq!(p.mirror_oid, DEFAULT_MIRROR_OID);
        assert_eq!(p.audit_log.as_deref(), Some(Path::new("/etc/vouch/audit.log")));
        assert_eq!(p.max_attribute_lifetime, Duration::from_secs(7 * 86400));
    }

    #[test]
    fn errors_name_line_and_key() {
        let e = parse("[conductors]\ntrusted_roots = [\"r.pem\"]\n\n[extensions]\nallow = [\"pp_cli_auth\"]\n")
            .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(5), Some("extensions.allow")));
        let e = parse("[conductors]\ntrusted_roots = [\"r.pem\"]\nbogus = 1\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("bogus")));
        let e =
            parse("[conductors]\ntrusted_roots = [\"r.pem\"]\n[attributes]\nmax_lifetime = \"soon\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("attributes.max_lifetime")));
        let e = parse(
            "[conductors]\ntrusted_roots = [\"r.pem\"]\n[classification]\nmirror_oid = \"1.3.6.1.4.1.34380.2.5\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("classification.mirror_oid")));
        let e = parse("[conductors]\ntrusted_roots = [\"r.pem\"]\n[attributes]\nversions = [1, 3]\n").unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(e.to_string().starts_with("policy /etc/vouch/policy.toml line 4 key 'attributes.versions'"));
    }

    #[test]
    fn scope_names_are_parsed_distinguished_names() {
        let scope = |m: &str| format!("[conductors]\ntrusted_roots = [\"r.pem\"]\n[[conductor]]\nname = \"x\"\n{m}\n");
        let p = parse(&scope("subject = \"CN=launcher\\\\, O=Example\"")).unwrap();
        assert_eq!(p.scopes[0].subject_dn.as_ref().map(|d| d.0.len()), Some(1), "one RDN: the comma is escaped");
        let p = parse(&scope("subject = \"CN=launcher, O=Example\"")).unwrap();
        assert_eq!(p.scopes[0].subject_dn.as_ref().map(|d| d.0.len()), Some(2));
        for (bad, key) in [
            ("subject = \"CN=a;b\"", "conductor.subject"),
            ("issuer = \"Bogus=root\"", "conductor.issuer"),
            ("subject = \"CN=#0403\"", "conductor.subject"),
        ] {
            let e = parse(&scope(bad)).unwrap_err();
            assert_eq!((e.line, e.key.as_deref()), (Some(5), Some(key)), "{bad}: {e}");
        }
    }

    #[test]
    fn extensions_allow_only_pp_reg_and_pp_priv() {
        let policy =
            |oid: &str| format!("[conductors]\ntrusted_roots = [\"r.pem\"]\n[extensions]\nallow = [\"{oid}\"]\n");
        for good in ["pp_uuid", "pp_role", "1.3.6.1.4.1.34380.1.1.99", "1.3.6.1.4.1.34380.1.2.1"] {
            assert!(parse(&policy(good)).is_ok(), "{good}");
        }
        for bad in [
            "2.5.29.19",               // basicConstraints
            "2.5.29.37",               // extended key usage
            "2.5.29.15",               // key usage
            "2.5.29.99",               // anything under 2.5.29
            "2.5.29",                  // the arc itself
            "1.3.6.1.4.1.34380.2",     // vouch's arc
            "1.3.6.1.4.1.34380.2.5",   // vouch's classification extension
            "1.3.6.1.4.1.34380.1.3.1", // ppAuthCertExt
            "pp_cli_auth",
            "1.3.6.1.4.1.34380.1.1",   // the ppRegCertExt arc itself
            "1.3.6.1.4.1.34380.1.2.5", // the mirror OID
            "1.3.6.1.4.1.311.20.2",    // a Microsoft template name
            "1.2.3.4",
        ] {
            let e = parse(&policy(bad)).unwrap_err();
            assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("extensions.allow")), "{bad}: {e}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob("web*.example.com", "web01.example.com", Some('.')));
        assert!(!glob("web*.example.com", "web01.evil.example.com", Some('.')));
        assert!(!glob("web*.example.com", "db01.example.com", Some('.')));
        assert!(glob("profile::web*", "profile::web::nginx", None));
        assert!(glob("*", "anything", None));
        assert!(!glob("ntp", "ntpd", None));
        // Every other character is itself, never a regular expression.
        assert!(!glob("web.example.com", "webxexample.com", Some('.')));
        assert!(glob("a+b(c)?[d]$^|{1}\\", "a+b(c)?[d]$^|{1}\\", None));
        assert!(!glob("a+b", "aab", None));
        assert!(glob("**", "", None) && glob("", "", None) && !glob("", "x", None));
        assert!(glob("web*", "web", Some('.')) && !glob("web*", "web.x", Some('.')));
        assert!(!glob("web*", "web\nx.y", Some('.')) && glob("web*", "web\nx", Some('.')));
        assert!(glob("profile::*", "profile::a\nb", None));
        let class = Pattern::class("::profile::web*").unwrap();
        assert!(class.is_match("profile::web::nginx") && !class.is_match("::profile::web"));
    }

    #[test]
    fn scope_patterns_match_in_linear_time() {
        // The issue's exact pattern and certname: exponential for a backtracking matcher
        // (seconds of CPU), a single pass for the automaton. No timing assertion: the
        // test would not finish in practice with the old matcher.
        let p = Pattern::certname("*-*-*-*-*-*-*-*x.example.test").unwrap();
        let evil = format!("a{}a.example.test", "-".repeat(61));
        assert!(!p.is_match(&evil));
        assert!(p.is_match("a-b-c-d-e-f-g-hx.example.test"));
        let class = Pattern::class("*a*a*a*a*a*a*a*a*a*a*b").unwrap();
        assert!(!class.is_match(&"a".repeat(5000)));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("24h"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_duration("h"), None);
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration("5y"), Some(Duration::from_secs(5 * 365 * 86400)));
        assert_eq!(format_duration(Duration::from_secs(86400)), "1d");
    }
}
