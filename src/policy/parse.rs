//! Reading a policy file: TOML into raw sections, each validated into [`Policy`].

use super::raw::{
    RawAttributes, RawAudit, RawClassification, RawConductors, RawExtensions, RawIssuance, RawPolicy, RawReplay,
    RawScope, RawServe,
};
use super::{duration_problem, parse_duration, ChainCache};
use super::{OnExisting, Pattern, Policy, PolicyError, Profile, Scope, TrustBundle, DEFAULT_MIRROR_OID};
use crate::encoding::oids;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

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
    ///
    /// Each section is validated in the order the first error is reported in: conductors,
    /// attributes, classification, extensions, serve, audit and replay paths, issuance,
    /// crl, then the `[[conductor]]` scopes.
    pub fn parse(
        path: &Path,
        text: &str,
        read: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Policy, PolicyError> {
        let file = PolicyFile { path, text, base: path.parent().unwrap_or(Path::new(".")), read: &read };
        let raw: RawPolicy = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let key = msg
                .split('`')
                .nth(1)
                .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
                .unwrap_or("");
            file.err(e.span(), key, msg.clone())
        })?;
        let trust = file.conductors(&raw.conductors)?;
        let attributes = file.attributes(raw.attributes)?;
        let classification = file.classification(raw.classification)?;
        let allowed_extensions = file.extensions(&raw.extensions, &classification.mirror_oid)?;
        let admin_fingerprints = file.serve(&raw.serve)?;
        let places = file.places(raw.audit, raw.replay)?;
        let issuance = file.issuance(&raw.issuance)?;
        let requests = super::requests::limits(&raw.requests, &|span, key, m| file.err(span, key, m))?;
        let templates =
            super::templates::templates(&raw.templates, &|span, key, m| file.err(span, key, m), &|v, k, d| {
                file.duration(v, k, d)
            })?;
        let crl_validity = file.duration(&raw.crl.validity, "crl.validity", 30 * 86_400)?;
        let crl_refresh_before = file.duration(&raw.crl.refresh_before, "crl.refresh_before", 10 * 86_400)?;
        let identity = super::identity::rules(raw.identity, &|span, key, m| file.err(span, key, m), &|items, key| {
            file.certificates(items, key)
        })?;
        let scopes = raw.conductor.into_iter().map(|sc| file.scope(sc)).collect::<Result<Vec<_>, _>>()?;
        Ok(Policy {
            chain_cache: ChainCache::default(),
            classification_cache: super::ClassificationCache::default(),
            admin_fingerprints,
            source: path.to_path_buf(),
            trust,
            versions: attributes.versions,
            max_attribute_lifetime: attributes.max_lifetime,
            classification_max_bytes: classification.max_bytes,
            mirror_oid: classification.mirror_oid,
            mirror_required: classification.mirror_required,
            allow_subject_alt_names: false,
            allowed_extensions,
            audit_log: places.audit_log,
            renewal_min_age: issuance.renewal_min_age,
            requests,
            templates,
            profile: issuance.profile,
            on_existing: issuance.on_existing,
            cap_at_conductor: issuance.cap_at_conductor,
            admin_approval: issuance.admin_approval,
            crl_validity,
            crl_refresh_before,
            scopes,
            replay_journal: places.replay_journal,
            identity,
        })
    }
}

/// The policy file being parsed: where errors point, and how the files it names are read.
struct PolicyFile<'a> {
    path: &'a Path,
    text: &'a str,
    /// Relative paths in the policy are relative to its directory.
    base: &'a Path,
    read: &'a dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
}

/// `[attributes]`, validated.
struct AttributesSection {
    versions: Vec<u32>,
    max_lifetime: Duration,
}

/// `[classification]`, validated.
struct ClassificationSection {
    max_bytes: usize,
    mirror_oid: Vec<u64>,
    mirror_required: bool,
}

/// `audit.log` and `replay.journal`, resolved.
struct Places {
    audit_log: Option<PathBuf>,
    replay_journal: Option<PathBuf>,
}

/// `[issuance]`, validated.
struct IssuanceSection {
    renewal_min_age: Duration,
    profile: Profile,
    on_existing: OnExisting,
    cap_at_conductor: bool,
    admin_approval: bool,
}

impl PolicyFile<'_> {
    fn err(&self, span: Option<std::ops::Range<usize>>, key: &str, message: String) -> PolicyError {
        PolicyError {
            file: self.path.to_path_buf(),
            line: span.map(|s| line_of(self.text, s.start)),
            key: if key.is_empty() { None } else { Some(key.to_string()) },
            message,
        }
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }

    /// A duration key: `default` seconds when absent; more than zero and at most 100 years.
    fn duration(&self, v: &Option<Spanned<String>>, key: &str, default: u64) -> Result<Duration, PolicyError> {
        match v {
            None => Ok(Duration::from_secs(default)),
            Some(s) => match parse_duration(s.get_ref()) {
                // Bounded so that no date arithmetic can overflow (100 years).
                Some(d) if d.as_secs() > 0 && d.as_secs() <= 100 * 365 * 86_400 => Ok(d),
                Some(d) if d.as_secs() > 0 => {
                    Err(self.err(Some(s.span()), key, format!("'{}' is longer than 100 years", s.get_ref())))
                }
                _ => Err(self.err(Some(s.span()), key, duration_problem(s.get_ref(), "30m, 24h, 7d or 5y"))),
            },
        }
    }

    /// The PEM certificates in each file named by `items`; every one must parse.
    fn certificates(&self, items: &[Spanned<String>], key: &str) -> Result<Vec<Vec<u8>>, PolicyError> {
        let mut out = Vec::new();
        for item in items {
            let file = self.resolve(item.get_ref());
            let bytes = (self.read)(&file)
                .map_err(|e| self.err(Some(item.span()), key, format!("cannot read {}: {e}", file.display())))?;
            let ders = crate::encoding::pem::find_all(&bytes, "CERTIFICATE")
                .map_err(|e| self.err(Some(item.span()), key, format!("{}: {e}", file.display())))?;
            if ders.is_empty() {
                return Err(self.err(Some(item.span()), key, format!("{} holds no PEM certificate", file.display())));
            }
            for der in &ders {
                x509_parser::parse_x509_certificate(der).map_err(|e| {
                    self.err(
                        Some(item.span()),
                        key,
                        format!("{} holds a certificate that does not parse: {e}", file.display()),
                    )
                })?;
            }
            out.extend(ders);
        }
        Ok(out)
    }

    /// The CRL (DER, or one PEM block) in each file named by `conductors.crls`.
    fn crls(&self, items: &[Spanned<String>]) -> Result<Vec<Vec<u8>>, PolicyError> {
        let mut out = Vec::new();
        for item in items {
            let file = self.resolve(item.get_ref());
            let bytes = (self.read)(&file).map_err(|e| {
                self.err(Some(item.span()), "conductors.crls", format!("cannot read {}: {e}", file.display()))
            })?;
            let der = if bytes.first() == Some(&0x30) {
                bytes
            } else {
                crate::encoding::pem::find(&bytes, &["X509 CRL"])
                    .map(|(_, d)| d)
                    .map_err(|e| self.err(Some(item.span()), "conductors.crls", format!("{}: {e}", file.display())))?
            };
            webpki::BorrowedCertRevocationList::from_der(&der).map_err(|e| {
                self.err(Some(item.span()), "conductors.crls", format!("{} is not a CRL: {e:?}", file.display()))
            })?;
            out.push(der);
        }
        Ok(out)
    }

    /// `[conductors]`: the trust for conductor certificates.
    fn conductors(&self, raw: &RawConductors) -> Result<TrustBundle, PolicyError> {
        if raw.trusted_roots.is_empty() {
            return Err(self.err(None, "conductors.trusted_roots", "at least one trusted root is required".into()));
        }
        Ok(TrustBundle {
            roots: self.certificates(&raw.trusted_roots, "conductors.trusted_roots")?,
            intermediates: self.certificates(&raw.intermediates, "conductors.intermediates")?,
            crls: self.crls(&raw.crls)?,
            own_crl: super::OwnCrl::default(),
        })
    }

    /// `[attributes]`: the signature versions accepted, how far ahead an expiry may lie.
    fn attributes(&self, raw: RawAttributes) -> Result<AttributesSection, PolicyError> {
        let versions = match raw.versions {
            None => super::DEFAULT_VERSIONS.to_vec(),
            Some(v) => {
                let span = v.span();
                let list = v.into_inner();
                if list.is_empty() || list.iter().any(|&x| !(1..=3).contains(&x)) {
                    return Err(self.err(
                        Some(span),
                        "attributes.versions",
                        format!("supported signature versions are 1, 2 and 3; got {list:?}"),
                    ));
                }
                list
            }
        };
        let max_lifetime = self.duration(&raw.max_lifetime, "attributes.max_lifetime", 7 * 86_400)?;
        Ok(AttributesSection { versions, max_lifetime })
    }

    /// `[classification]`: the size cap and the mirror extension.
    fn classification(&self, raw: RawClassification) -> Result<ClassificationSection, PolicyError> {
        let max_bytes = match raw.max_bytes {
            None => crate::vouching::classification::DEFAULT_MAX_BYTES,
            Some(n) => {
                let v = *n.get_ref();
                if !(1..=1_048_576).contains(&v) {
                    return Err(self.err(
                        Some(n.span()),
                        "classification.max_bytes",
                        format!("{v} is out of range 1..=1048576"),
                    ));
                }
                v as usize
            }
        };
        let mirror_oid = match raw.mirror_oid {
            None => DEFAULT_MIRROR_OID.to_vec(),
            Some(s) => {
                let o = oids::parse(s.get_ref()).ok_or_else(|| {
                    self.err(Some(s.span()), "classification.mirror_oid", format!("'{}' is not an OID", s.get_ref()))
                })?;
                if !(oids::is_under(&o, oids::PP_REG) || oids::is_under(&o, oids::PP_PRIV)) {
                    return Err(self.err(
                        Some(s.span()),
                        "classification.mirror_oid",
                        "must lie under ppRegCertExt (1.3.6.1.4.1.34380.1.1) or ppPrivCertExt \
                         (1.3.6.1.4.1.34380.1.2): Puppet Server copies only those into certificates"
                            .into(),
                    ));
                }
                // A registered name is a trusted fact a conductor signs (`extensions:`): the
                // mirror there would be checked instead of the fact, and written in its place.
                if let Some(name) = crate::vouching::classification::trusted::registered_name(&o) {
                    return Err(self.err(
                        Some(s.span()),
                        "classification.mirror_oid",
                        format!(
                            "is {name}'s OID, a registered trusted fact a classification signs: take one \
                             under ppPrivCertExt (1.3.6.1.4.1.34380.1.2), the default 1.3.6.1.4.1.34380.1.2.5"
                        ),
                    ));
                }
                o
            }
        };
        Ok(ClassificationSection { max_bytes, mirror_oid, mirror_required: raw.mirror_required.unwrap_or(false) })
    }

    /// `extensions.allow`: the extension requests a node may add (only pp_reg and pp_priv,
    /// never the mirror OID, which is always checked against the signed classification).
    fn extensions(&self, raw: &RawExtensions, mirror_oid: &[u64]) -> Result<Vec<Vec<u64>>, PolicyError> {
        if let Some(on) = raw.allow_subject_alt_names.as_ref().filter(|v| *v.get_ref()) {
            // It used to accept requested alt names and issue none; alt names are now a
            // server's, allowed per conductor scope and checked name by name.
            return Err(self.err(
                Some(on.span()),
                "extensions.allow_subject_alt_names",
                "alt names are allowed only for servers: remove this line and give the [[conductor]] scope that \
                 vouches for them `servers` (their certname patterns) and `dns_alt_names` (the names they may carry)"
                    .into(),
            ));
        }
        let mut allowed = Vec::new();
        for item in &raw.allow {
            let refuse = |message: String| self.err(Some(item.span()), "extensions.allow", message);
            let o = oids::parse(item.get_ref())
                .ok_or_else(|| refuse(format!("'{}' is neither an OID nor a pp_* name", item.get_ref())))?;
            if oids::is_under(&o, oids::PP_AUTH) {
                return Err(refuse(format!(
                    "{} is in the ppAuthCertExt arc, which grants API rights; vouch never allows it",
                    item.get_ref()
                )));
            }
            if o == oids::SUBJECT_ALT_NAME {
                return Err(refuse("use allow_subject_alt_names for subjectAltName".into()));
            }
            if o == mirror_oid {
                return Err(refuse(
                    "this is the classification mirror OID; it is always checked against the signed classification"
                        .into(),
                ));
            }
            if o == oids::VOUCH_ARC || oids::is_under(&o, oids::VOUCH_ARC) {
                return Err(refuse(format!(
                    "{} is in vouch's own arc (1.3.6.1.4.1.34380.2), whose extensions only vouch writes",
                    item.get_ref()
                )));
            }
            // Anything else (basicConstraints, key usage, EKU, any 2.5.29.*, private OIDs) would
            // be copied next to, or instead of, what vouch itself writes into the certificate.
            if !(oids::is_under(&o, oids::PP_REG) || oids::is_under(&o, oids::PP_PRIV)) {
                return Err(refuse(format!(
                    "{} is outside ppRegCertExt (1.3.6.1.4.1.34380.1.1.*) and ppPrivCertExt \
                     (1.3.6.1.4.1.34380.1.2.*), the only extensions a node may request",
                    item.get_ref()
                )));
            }
            allowed.push(o);
        }
        Ok(allowed)
    }

    /// `serve.admins`: SHA-256 fingerprints, normalised to `AB:CD:…`.
    fn serve(&self, raw: &RawServe) -> Result<Vec<String>, PolicyError> {
        let mut fingerprints = Vec::new();
        if let Some(admins) = &raw.admins {
            for a in admins.get_ref() {
                let hex: String = a.chars().filter(|c| *c != ':').collect::<String>().to_ascii_uppercase();
                if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(self.err(
                        Some(admins.span()),
                        "serve.admins",
                        format!("{a:?} is not a SHA-256 fingerprint (64 hex digits, colons optional)"),
                    ));
                }
                let pairs: Vec<String> =
                    hex.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
                fingerprints.push(pairs.join(":"));
            }
        }
        Ok(fingerprints)
    }

    /// `audit.log` and `replay.journal` (default `replay`, unless `replay.enabled = false`).
    fn places(&self, audit: RawAudit, replay: RawReplay) -> Result<Places, PolicyError> {
        // An empty path would resolve to the policy's directory: refuse it by name.
        if audit.log.as_deref().is_some_and(|l| l.trim().is_empty()) {
            return Err(self.err(
                None,
                "audit.log",
                "is empty: name a file, or remove the key to keep no audit log".into(),
            ));
        }
        if replay.journal.as_deref().is_some_and(|l| l.trim().is_empty()) {
            return Err(self.err(None, "replay.journal", "is empty: name a directory (default \"replay\")".into()));
        }
        Ok(Places {
            audit_log: audit.log.map(|l| self.resolve(&l)),
            replay_journal: if replay.enabled.unwrap_or(true) {
                Some(self.resolve(replay.journal.as_deref().unwrap_or("replay")))
            } else {
                None
            },
        })
    }

    /// `[issuance]`: node certificate validity, what an existing certificate gets, renewal.
    fn issuance(&self, raw: &RawIssuance) -> Result<IssuanceSection, PolicyError> {
        // "0s" (no minimum) is allowed here, unlike in the other durations.
        let renewal_min_age = match &raw.renewal_min_age {
            Some(v) if matches!(v.get_ref().trim(), "0" | "0s") => Duration::ZERO,
            v => self.duration(v, "issuance.renewal_min_age", 3_600)?,
        };
        let profile = Profile {
            validity: self.duration(&raw.validity, "issuance.validity", 5 * 365 * 86_400)?,
            backdate: self.duration(&raw.backdate, "issuance.backdate", 86_400)?,
            auto_renewal_validity: match &raw.auto_renewal_validity {
                None => None,
                v => Some(self.duration(v, "issuance.auto_renewal_validity", 90 * 86_400)?),
            },
            cap: None,
        };
        // A node chooses to ask for auto-renewal (`pp_auth_auto_renew`): a longer lifetime for
        // it would be any node's for the asking.
        if let (Some(auto), Some(span)) =
            (profile.auto_renewal_validity, raw.auto_renewal_validity.as_ref().map(|v| v.span()))
        {
            if auto > profile.validity {
                return Err(self.err(
                    Some(span),
                    "issuance.auto_renewal_validity",
                    format!(
                        "{} is longer than issuance.validity ({}): any node gets it by asking for auto-renewal; \
                         make it at most issuance.validity",
                        crate::policy::format_duration(auto),
                        crate::policy::format_duration(profile.validity)
                    ),
                ));
            }
        }
        let on_existing = match raw.on_existing.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("refuse", _)) => OnExisting::Refuse,
            Some(("supersede", _)) => OnExisting::Supersede,
            Some((other, span)) => {
                return Err(self.err(
                    Some(span),
                    "issuance.on_existing",
                    format!("'{other}' is not one of: refuse, supersede"),
                ))
            }
        };
        Ok(IssuanceSection {
            renewal_min_age,
            profile,
            on_existing,
            cap_at_conductor: raw.cap_at_conductor.unwrap_or(false),
            admin_approval: raw.admin_approval.unwrap_or(false),
        })
    }

    /// One `[[conductor]]` scope.
    fn scope(&self, sc: RawScope) -> Result<Scope, PolicyError> {
        if sc.fingerprint.is_none() && sc.subject.is_none() && sc.issuer.is_none() {
            return Err(self.err(
                None,
                "conductor",
                format!("scope '{}' matches no conductor: give fingerprint, subject or issuer", sc.name),
            ));
        }
        let fingerprint = match sc.fingerprint {
            None => None,
            Some(f) => {
                let hexed: String = f.get_ref().chars().filter(|c| *c != ':').collect::<String>().to_lowercase();
                if hexed.len() != 64 || !hexed.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(self.err(
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
                    return Err(self.err(
                        Some(m.span()),
                        "conductor.max_lifetime",
                        duration_problem(m.get_ref(), "30m or 1h"),
                    ))
                }
            },
        };
        let certnames = self.patterns(sc.certnames, "conductor.certnames", Pattern::certname)?;
        let servers = self.patterns(sc.servers, "conductor.servers", Pattern::certname)?;
        let dns_alt_names = self.patterns(sc.dns_alt_names, "conductor.dns_alt_names", Pattern::certname)?;
        // Alt names are a server's: a scope that allows them says which of its certnames are servers.
        if dns_alt_names.is_some() != servers.is_some() {
            return Err(self.err(
                None,
                "conductor",
                format!(
                    "scope '{}': dns_alt_names (the names a server may be issued) and servers (the certnames \
                     that are servers) go together; give both or neither",
                    sc.name
                ),
            ));
        }
        let classes = self.patterns(sc.classes, "conductor.classes", Pattern::class)?;
        let subject_dn = self.dn(&sc.subject, "conductor.subject")?;
        let issuer_dn = self.dn(&sc.issuer, "conductor.issuer")?;
        Ok(Scope {
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
            servers,
            dns_alt_names,
        })
    }

    /// A scope's distinguished name, parsed as vouch prints them.
    fn dn(&self, v: &Option<Spanned<String>>, key: &str) -> Result<Option<crate::encoding::dn::Dn>, PolicyError> {
        match v {
            None => Ok(None),
            Some(text) => crate::encoding::dn::Dn::parse(text.get_ref()).map(Some).map_err(|e| {
                self.err(
                    Some(text.span()),
                    key,
                    format!("not a distinguished name as vouch prints them (CN=…, O=…): {e}"),
                )
            }),
        }
    }

    /// A scope's pattern list, each compiled.
    fn patterns(
        &self,
        list: Option<Vec<String>>,
        key: &str,
        make: fn(&str) -> Result<Pattern, String>,
    ) -> Result<Option<Vec<Pattern>>, PolicyError> {
        list.map(|l| l.iter().map(|p| make(p).map_err(|m| self.err(None, key, m))).collect()).transpose()
    }
}
