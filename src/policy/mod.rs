//! The policy: which conductors are trusted and what they may vouch for.
//!
//! A policy file (TOML) is read and validated once into [`Policy`], a type
//! that cannot hold a bad value. Every error names the file, the line and the key.

mod chain_cache;
mod classification_cache;
mod default;
mod digest_map;
mod duration;
pub mod identity;
pub mod own_crl;
mod parse;
mod pattern;
mod raw;
mod requests;
mod templates;

pub use chain_cache::{ChainCache, Window};
pub use classification_cache::ClassificationCache;
pub use default::default_policy_text;
pub use digest_map::digest;
pub use duration::{duration_problem, format_duration, format_duration_roughly, parse_duration};
pub use identity::AwsIdentityRule;
pub use own_crl::{OwnCrl, RootCrl};
pub use pattern::{glob, Pattern};
pub use requests::RequestLimits;
pub use templates::{Templates, MAX_USES_LIMIT};

use std::path::PathBuf;
use std::time::Duration;

/// The signature versions a policy that sets no `attributes.versions` accepts.
pub const DEFAULT_VERSIONS: &[u32] = &[1, 2];

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
    /// The data directory's own root CRL (not from the policy file): a conductor on it is
    /// refused too, whatever `crls` lists.
    pub own_crl: OwnCrl,
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
    /// Always false: `extensions.allow_subject_alt_names = true` is refused when the policy
    /// loads (it once accepted alt names and issued none). Alt names are allowed per scope
    /// ([`Scope::servers`], [`Scope::dns_alt_names`]).
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
    /// An administrator may approve a pending request no conductor vouched for, issuing
    /// the classification the administrators set for its name (`vouch approve`). Off by default.
    pub admin_approval: bool,
    /// `POST certificate_renewal` (a node renewing itself) is refused for a certificate
    /// issued less than this long ago: each renewal adds a CRL entry (superseded).
    pub renewal_min_age: Duration,
    /// `[requests]`: refused requests kept at most (in the store; per client address a minute).
    pub requests: RequestLimits,
    /// `[templates]`: signature version 3 (templates for autoscaling groups).
    pub templates: Templates,
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
    /// Classifications this policy parsed, so a role shared by many nodes is parsed once.
    pub classification_cache: ClassificationCache,
    /// `vouch serve`: SHA-256 fingerprints (`AB:CD:…`) of client certificates that may
    /// administer the CA besides those carrying `pp_cli_auth`.
    pub admin_fingerprints: Vec<String>,
    /// `[[identity.aws]]`: who signs the identity documents of instances a bound template
    /// names, and which accounts, regions and certnames each entry allows.
    pub identity: Vec<AwsIdentityRule>,
}

/// Node certificate validity settings: validated with the policy, read by issuance
/// ([`crate::issuance::certificate::prepare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Lifetime of node certificates (Puppet: 5 years).
    pub validity: std::time::Duration,
    /// How far notBefore is set back, for nodes whose clocks lag (Puppet: 24 hours).
    pub backdate: std::time::Duration,
    /// Lifetime of the certificates of agents that renew themselves (a CSR carrying
    /// `pp_auth_auto_renew` = "true", Puppet 8; and every `POST certificate_renewal`), as
    /// Puppet Server's `auto-renewal-cert-ttl`. None: `validity`, as for every node.
    pub auto_renewal_validity: Option<std::time::Duration>,
    /// A latest notAfter (the vouching conductor's, when the policy caps at it).
    pub cap: Option<time::OffsetDateTime>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            validity: std::time::Duration::from_secs(5 * 365 * 86_400),
            backdate: std::time::Duration::from_secs(86_400),
            auto_renewal_validity: None,
            cap: None,
        }
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
    /// Certname patterns of the servers this conductor vouches for: only they may be issued
    /// subjectAltNames (always with [`Scope::dns_alt_names`]).
    pub servers: Option<Vec<Pattern>>,
    /// The DNS names a server of this scope may carry besides its certname (`puppet`, a
    /// load balancer's name); each requested name must match one.
    pub dns_alt_names: Option<Vec<Pattern>>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
        let e = parse("[conductors]\ntrusted_roots = [\"r.pem\"]\n[attributes]\nversions = [1, 4]\n").unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(e.to_string().starts_with("policy /etc/vouch/policy.toml line 4 key 'attributes.versions'"));
    }

    #[test]
    fn a_mirror_on_a_trusted_fact_and_a_longer_auto_renewal_lifetime_are_refused() {
        let e = parse(
            "[conductors]\ntrusted_roots = [\"r.pem\"]\n[classification]\nmirror_oid = \"1.3.6.1.4.1.34380.1.1.13\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(4), Some("classification.mirror_oid")));
        assert!(e.to_string().contains("pp_role"), "{e}");
        let e = parse(
            "[conductors]\ntrusted_roots = [\"r.pem\"]\n[issuance]\nvalidity = \"30d\"\nauto_renewal_validity = \"90d\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(5), Some("issuance.auto_renewal_validity")));
        let p = parse(
            "[conductors]\ntrusted_roots = [\"r.pem\"]\n[issuance]\nvalidity = \"90d\"\nauto_renewal_validity = \"30d\"\n",
        )
        .unwrap();
        assert_eq!(p.profile.auto_renewal_validity, Some(Duration::from_secs(30 * 86400)));
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
        // The exact pattern and certname: exponential for a backtracking matcher
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
        assert_eq!(format_duration_roughly(Duration::from_secs(86400)), "1d");
        assert_eq!(format_duration_roughly(Duration::from_secs(251_606_285_846)), "about 7978y 19w");
        assert_eq!(format_duration_roughly(Duration::from_secs(7 * 86400 + 5 * 3600)), "173h");
        assert_eq!(format_duration_roughly(Duration::from_secs(7 * 86400 + 5 * 3600 + 7)), "about 1w 5h");
        assert_eq!(format_duration_roughly(Duration::from_secs(7 * 86400 + 30)), "1w 30s");
        assert_eq!(format_duration_roughly(Duration::from_secs(59)), "59s");
        assert_eq!(
            duration_problem("99999999999999999999h", "2h"),
            "'99999999999999999999h' is too large a duration: give one like 2h"
        );
        assert_eq!(
            duration_problem("9999999999999999h", "2h"),
            "'9999999999999999h' is too large a duration: give one like 2h"
        );
        assert_eq!(duration_problem("2x", "2h"), "'2x' is not a duration like 2h");
        assert_eq!(duration_problem("h", "2h"), "'h' is not a duration like 2h");
    }
}
