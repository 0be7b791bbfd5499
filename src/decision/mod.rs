//! The autosign decision: a pure function of the CSR bytes, the certname asked
//! about, the policy (with its trust anchors) and the time. No I/O, no clock.
//!
//! It returns a [`Grant`], which only this module can construct and which
//! issuance consumes, or every [`Refusal`] that applies.

// A refusal carries every reason and who vouched; it is returned once per decision,
// so its size does not matter.
#![allow(clippy::result_large_err)]

mod certname;
mod conductor;
mod refusal;
mod scope;

pub use certname::{check_certname, is_reserved_certname, CertnameProblem, MAX_CERTNAME, RESERVED_CERTNAMES};
pub use conductor::{own_crl_refusal, recheck_conductor, Conductor};
pub use refusal::Refusal;

use conductor::{check_conductor, verify_signature};
use scope::{check_scope, scope_applies};

use crate::encoding::csr::{self, Csr, CsrError};
use crate::encoding::der::tag;
use crate::encoding::oids;
use crate::policy::Policy;
use crate::vouching::attrs;
use crate::vouching::classification::{Classification, ClassificationError};
use time::OffsetDateTime;

/// A granted decision. Only [`decide`] constructs one; issuing consumes it.
#[derive(Debug)]
pub struct Grant {
    certname: String,
    csr: Csr,
    classification: Classification,
    classification_b64: String,
    conductor: Conductor,
    expiry: OffsetDateTime,
    version: u32,
    decided_at: OffsetDateTime,
    binding: Option<attrs::Binding>,
    signed_digest: String,
    conductor_der: Vec<u8>,
    alt_names: Vec<String>,
}

impl Grant {
    /// The DNS names besides the certname that the certificate carries: requested by a
    /// server and each allowed by its scope's `dns_alt_names` (step 11).
    pub fn alt_names(&self) -> &[String] {
        &self.alt_names
    }
    pub fn certname(&self) -> &str {
        &self.certname
    }
    pub fn csr(&self) -> &Csr {
        &self.csr
    }
    pub fn classification(&self) -> &Classification {
        &self.classification
    }
    /// The signed .2.5 value, byte for byte.
    pub fn classification_base64(&self) -> &str {
        &self.classification_b64
    }
    pub fn conductor(&self) -> &Conductor {
        &self.conductor
    }
    /// The conductor's certificate (DER), which the store keeps so renewal can check it again.
    pub fn conductor_der(&self) -> &[u8] {
        &self.conductor_der
    }
    pub fn attributes_expiry(&self) -> OffsetDateTime {
        self.expiry
    }
    pub fn version(&self) -> u32 {
        self.version
    }
    pub fn decided_at(&self) -> OffsetDateTime {
        self.decided_at
    }
    /// The vouched certname and nonce (version 2).
    pub fn binding(&self) -> Option<&attrs::Binding> {
        self.binding.as_ref()
    }
    /// What makes these attributes one-time (see [`replay_key`]).
    pub fn replay_key(&self) -> ReplayKey {
        replay_key(self.binding.as_ref().map(|b| b.nonce.as_str()), &self.conductor_der, &self.signed_digest)
    }
}

use crate::vouching::replay_key::{replay_key, ReplayKey};

/// A refusal with what could be learnt before refusing (for logs).
#[derive(Debug, Clone)]
pub struct Refused {
    pub reasons: Vec<Refusal>,
    /// The conductor, if its certificate could be read.
    pub conductor: Option<Conductor>,
    /// Set when a trusted conductor did sign exactly these unexpired attributes and the
    /// CSR was refused for another reason: the attributes are good, so whoever keeps the
    /// request must make them this key's (see [`Held`]).
    pub held: Option<Held>,
}

impl Refused {
    /// Every reason as `[code] message`, the form logs, pending requests and the API use.
    pub fn tagged_reasons(&self) -> Vec<String> {
        self.reasons.iter().map(|r| format!("[{}] {r}", r.code())).collect()
    }
}

/// Vouched attributes in a refused CSR, and the key that presented them. A refused
/// request is kept (and may be shown), so its attributes must not stay usable by
/// another key: the store records this key as their holder, as a grant would.
#[derive(Debug, Clone)]
pub struct Held {
    pub replay_key: ReplayKey,
    pub expiry: OffsetDateTime,
    /// The CSR's public key (canonical SubjectPublicKeyInfo).
    pub spki: Vec<u8>,
}

/// What the decision needs.
pub struct Request<'a> {
    /// The CSR, PEM (junk and CRLF tolerated) or DER.
    pub csr: &'a [u8],
    /// The certname the agent asks for.
    pub certname: &'a str,
}

/// Decides. `now` is the time the decision is made for.
pub fn decide(req: &Request<'_>, policy: &Policy, now: OffsetDateTime) -> Result<Grant, Refused> {
    decide_parsed(req, csr::parse(req.csr), policy, now)
}

/// [`decide`] for a CSR the caller already parsed (`csr::parse(req.csr)`), so that a
/// service that checks the CSR's shape first does not parse and verify it twice.
///
/// The numbered steps below each push every reason they find, so a refusal lists them
/// all, in this order.
pub fn decide_parsed(
    req: &Request<'_>,
    parsed: Result<Csr, CsrError>,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<Grant, Refused> {
    // 1. The CSR itself. The key's size was checked when it was parsed (csr::check_key_size).
    let csr = match parsed {
        Ok(c) => c,
        Err(e) => return Err(Refused { reasons: unreadable_request(e, req.certname), conductor: None, held: None }),
    };
    let mut reasons = Vec::new();
    // 2. Names.
    check_names(req.certname, &csr, &mut reasons);
    // 3. Attributes: each of the five exactly once, with exactly one text value.
    let values = read_attributes(&csr, req.certname, &mut reasons);
    check_no_stray_requests(&csr, values.is_v2, &mut reasons);
    // 4. Version.
    let version = check_version(values.version.as_deref(), policy, &mut reasons);
    // 5. Expiry.
    let expiry = check_expiry(values.expiry.as_deref(), policy, now, &mut reasons);
    // 6. The conductor certificate and its chain; 7. the signature over the canonical string.
    let signer = check_signer(&values, policy, now, &mut reasons);
    // 8. Classification.
    let classification = read_classification(&signer, values.classification.as_deref(), policy, &mut reasons);
    // 9. Per-conductor scope.
    check_conductor_scope(&signer, req.certname, expiry, now, classification.as_ref(), policy, &mut reasons);
    // 10. Extension requests.
    check_extension_requests(&csr, values.classification.as_deref(), policy, &mut reasons);
    // 11. Alt names: only a server's, each allowed by its scope.
    let alt_names = check_alt_names(&csr, &signer, &values, version, req.certname, policy, &mut reasons);

    if !reasons.is_empty() {
        let held = held_attributes(&reasons, &values, &signer, expiry, &csr);
        return Err(Refused { reasons, conductor: signer.conductor, held });
    }
    let binding = match (values.certname, values.nonce) {
        (Some(certname), Some(nonce)) => Some(attrs::Binding { certname, nonce }),
        _ => None,
    };
    match (classification, values.classification, signer.conductor, expiry, version, values.signature) {
        (
            Some(classification),
            Some(classification_b64),
            Some(conductor),
            Some(expiry),
            Some(version),
            Some(_signature),
        ) if (version == 2) == binding.is_some() && !signer.signed_digest.is_empty() => Ok(Grant {
            certname: req.certname.to_string(),
            csr,
            classification,
            classification_b64,
            conductor,
            expiry,
            version,
            decided_at: now,
            binding,
            signed_digest: signer.signed_digest,
            conductor_der: signer.conductor_der,
            alt_names,
        }),
        // Unreachable when no reason was recorded; refuse rather than grant on doubt.
        (_, _, conductor, _, _, _) => Err(Refused {
            reasons: vec![Refusal::AttributeMissing { oid: "(internal: incomplete decision)".into() }],
            conductor,
            held: None,
        }),
    }
}

/// Step 1: a request that could not be read, and the certname if it fails the rules too.
fn unreadable_request(e: CsrError, certname: &str) -> Vec<Refusal> {
    let r = match e {
        CsrError::NotFound { detail } => Refusal::CsrMissing { detail },
        CsrError::Malformed { detail } => Refusal::CsrMalformed { detail },
        CsrError::UnsupportedSignatureAlgorithm { oid } => Refusal::CsrSignatureAlgorithmUnsupported { oid },
        CsrError::UnsupportedKey { detail } => Refusal::CsrKeyUnsupported { detail },
        CsrError::BadSelfSignature => Refusal::CsrSignatureInvalid,
    };
    let mut all = vec![r];
    if let Err(problem) = check_certname(certname) {
        all.push(Refusal::CertnameInvalid { certname: certname.to_string(), problem });
    }
    all
}

/// Step 2: the certname passes the rules and is not reserved; the CSR's one CN is it.
fn check_names(certname: &str, csr: &Csr, reasons: &mut Vec<Refusal>) {
    if let Err(problem) = check_certname(certname) {
        reasons.push(Refusal::CertnameInvalid { certname: certname.to_string(), problem });
    } else if is_reserved_certname(certname) {
        reasons.push(Refusal::CertnameReserved { certname: certname.to_string() });
    }
    match csr.common_names.as_slice() {
        [cn] if cn == certname => {}
        [cn] => reasons.push(Refusal::CommonNameMismatch { common_name: cn.clone(), certname: certname.to_string() }),
        other => reasons.push(Refusal::CommonNameCount { count: other.len() }),
    }
}

/// The vouched attributes' values as the CSR carries them (each present exactly once).
struct AttributeValues {
    signature: Option<String>,
    version: Option<String>,
    expiry: Option<String>,
    conductor: Option<String>,
    classification: Option<String>,
    /// Version 2 only: the certname and nonce the conductor bound them to.
    certname: Option<String>,
    nonce: Option<String>,
    is_v2: bool,
}

/// Step 3: each attribute exactly once with one text value; in version 2 also the
/// certname (which must be the one asked for) and a well-formed nonce.
fn read_attributes(csr: &Csr, certname: &str, reasons: &mut Vec<Refusal>) -> AttributeValues {
    let mut take = |oid: &[u64]| -> Option<String> {
        let dotted = oids::dotted(oid);
        let found: Vec<_> = csr.attributes_with(oid).collect();
        match found.as_slice() {
            [] => reasons.push(Refusal::AttributeMissing { oid: dotted }),
            [a] => match a.values.as_slice() {
                [v] if matches!(v.tag, tag::PRINTABLE_STRING | tag::UTF8_STRING | tag::IA5_STRING) => {
                    match String::from_utf8(v.bytes.clone()) {
                        Ok(s) => return Some(s),
                        Err(_) => reasons.push(Refusal::AttributeNotText { oid: dotted }),
                    }
                }
                [_] => reasons.push(Refusal::AttributeNotText { oid: dotted }),
                vals => reasons.push(Refusal::AttributeValueCount { oid: dotted, count: vals.len() }),
            },
            many => reasons.push(Refusal::AttributeDuplicated { oid: dotted, count: many.len() }),
        }
        None
    };
    let signature = take(oids::ATTR_SIGNATURE);
    let version = take(oids::ATTR_VERSION);
    let expiry = take(oids::ATTR_EXPIRY);
    let conductor = take(oids::ATTR_CONDUCTOR);
    let classification = take(oids::ATTR_CLASSIFICATION);
    // Version 2 adds the certname and the nonce; in version 1 they are unexpected.
    let is_v2 = version.as_deref() == Some("2");
    let (vouched_certname, nonce) =
        if is_v2 { (take(oids::ATTR_CERTNAME), take(oids::ATTR_NONCE)) } else { (None, None) };
    if let Some(signed) = &vouched_certname {
        if signed != certname {
            reasons.push(Refusal::CertnameNotVouched { signed: signed.clone(), certname: certname.to_string() });
        }
    }
    if let Some(n) = &nonce {
        if !attrs::is_nonce(n) {
            reasons.push(Refusal::NonceMalformed { value: n.clone() });
        }
    }
    AttributeValues { signature, version, expiry, conductor, classification, certname: vouched_certname, nonce, is_v2 }
}

/// Step 3, continued: no attribute in vouch's arc beyond the version's, no Microsoft
/// extension request, and exactly one extensionRequest with one value.
fn check_no_stray_requests(csr: &Csr, is_v2: bool, reasons: &mut Vec<Refusal>) {
    let mut known = vec![
        oids::ATTR_SIGNATURE,
        oids::ATTR_VERSION,
        oids::ATTR_EXPIRY,
        oids::ATTR_CONDUCTOR,
        oids::ATTR_CLASSIFICATION,
    ];
    if is_v2 {
        known.extend([oids::ATTR_CERTNAME, oids::ATTR_NONCE]);
    }
    // Sets, not lists: the CSR (the agent) chooses how many attributes and extensions
    // there are, and a list search per item would be quadratic in that.
    let mut seen_unexpected = std::collections::HashSet::new();
    for a in &csr.attributes {
        if (oids::is_under(&a.oid, oids::VOUCH_ARC) || a.oid == oids::VOUCH_ARC)
            && !known.contains(&a.oid.as_slice())
            && seen_unexpected.insert(a.oid.as_slice())
        {
            reasons.push(Refusal::AttributeUnexpected { oid: oids::dotted(&a.oid) });
        }
        if a.oid == oids::MS_EXTENSION_REQUEST {
            reasons.push(Refusal::ExtensionRequestAmbiguous {
                detail: "the CSR carries a Microsoft extension request attribute (1.3.6.1.4.1.311.2.1.14)".into(),
            });
        }
    }
    if csr.extension_request_attributes > 1 {
        reasons.push(Refusal::ExtensionRequestAmbiguous {
            detail: format!("{} extensionRequest attributes", csr.extension_request_attributes),
        });
    } else if csr.extension_request_values != csr.extension_request_attributes {
        // One attribute whose SET holds several Extensions values (or none): never merged.
        reasons.push(Refusal::ExtensionRequestAmbiguous {
            detail: format!(
                "the extensionRequest attribute holds {} values; exactly one is accepted",
                csr.extension_request_values
            ),
        });
    }
}

/// Step 4: a canonical decimal version the policy accepts.
fn check_version(version: Option<&str>, policy: &Policy, reasons: &mut Vec<Refusal>) -> Option<u32> {
    let v = version?;
    let canonical = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'));
    match v.parse::<u32>() {
        Ok(n) if canonical => {
            if policy.versions.contains(&n) {
                return Some(n);
            }
            reasons.push(Refusal::VersionUnsupported { version: v.to_string(), accepted: policy.versions.clone() });
        }
        _ => reasons.push(Refusal::VersionMalformed { value: v.to_string() }),
    }
    None
}

/// Step 5: an RFC 3339 expiry after `now` and no further ahead than the policy allows.
fn check_expiry(
    expiry: Option<&str>,
    policy: &Policy,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Option<OffsetDateTime> {
    let e = expiry?;
    match crate::encoding::time::parse_rfc3339(e) {
        Err(_) => reasons.push(Refusal::ExpiryMalformed { value: e.to_string() }),
        Ok(t) => {
            if t <= now {
                reasons.push(Refusal::AttributesExpired {
                    expiry: e.to_string(),
                    now: crate::encoding::time::format_rfc3339(now),
                });
            } else if t - now > policy.max_attribute_lifetime {
                reasons.push(Refusal::ExpiryTooFar {
                    expiry: e.to_string(),
                    max_lifetime: crate::policy::format_duration(policy.max_attribute_lifetime),
                });
            } else {
                return Some(t);
            }
        }
    }
    None
}

/// Who signed the attributes, as steps 6 and 7 found.
#[derive(Default)]
struct Signer {
    conductor: Option<Conductor>,
    /// Whether a trusted conductor signed exactly these values.
    vouched: bool,
    /// SHA-256 of the verified canonical string: the one-time-use key (a signature is
    /// malleable — an ECDSA (r, s) is also valid as (r, n-s) — so it cannot be the key).
    signed_digest: String,
    conductor_der: Vec<u8>,
    /// Whether the conductor's certificate chains to a trusted root and carries the
    /// conductor EKU and key usage: only then are scopes judged (step 9).
    trusted: bool,
}

/// Steps 6 and 7: the conductor certificate and its chain, then the signature over the
/// canonical string (verified even when the chain failed, so that the reasons are
/// complete; a signature by an untrusted certificate grants nothing).
fn check_signer(values: &AttributeValues, policy: &Policy, now: OffsetDateTime, reasons: &mut Vec<Refusal>) -> Signer {
    let mut signer = Signer::default();
    let Some(cv) = &values.conductor else { return signer };
    let (info, leaf_der, chain_reasons) = match check_conductor(cv, policy, now) {
        Err(r) => {
            reasons.push(r);
            return signer;
        }
        Ok(found) => found,
    };
    let chain_ok = chain_reasons.is_empty();
    signer.trusted = chain_ok;
    reasons.extend(chain_reasons);
    if let (Some(sig), Some(v), Some(e), Some(c)) =
        (&values.signature, &values.version, &values.expiry, &values.classification)
    {
        let msg = match (values.is_v2, &values.certname, &values.nonce) {
            (false, _, _) => Some(attrs::canonical_v1(v, e, cv, c)),
            (true, Some(cn), Some(n)) => Some(attrs::canonical_v2(v, e, cv, c, cn, n)),
            // A missing .2.6/.2.7 is already a reason; nothing to verify against.
            (true, _, _) => None,
        };
        if let Some(msg) = msg {
            match verify_signature(&leaf_der, &info.subject, sig, &msg) {
                Err(r) => reasons.push(r),
                Ok(()) => {
                    signer.vouched = chain_ok;
                    signer.signed_digest = crate::encoding::sha256_hex(&msg);
                }
            }
        }
    }
    signer.conductor = Some(info);
    signer.conductor_der = leaf_der;
    signer
}

/// Step 8: the classification. Its YAML is parsed only once a trusted conductor is known
/// to have signed it: unsigned YAML never reaches the parser (an alias bomb costs ~0.1 s of
/// CPU before the parser's limits refuse it; nobody unvouched gets that).
fn read_classification(
    signer: &Signer,
    value: Option<&str>,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) -> Option<Classification> {
    let c = value.filter(|_| signer.vouched)?;
    let digest = crate::policy::ClassificationCache::digest(c);
    if let Some(parsed) = policy.classification_cache.get(&digest) {
        return Some(parsed);
    }
    match Classification::from_base64(c, policy.classification_max_bytes) {
        Ok(parsed) => {
            policy.classification_cache.insert(digest, &parsed);
            return Some(parsed);
        }
        Err(ClassificationError::Unrepresentable { detail }) => {
            reasons.push(Refusal::ClassificationUnrepresentable { detail })
        }
        Err(error) => reasons.push(Refusal::ClassificationInvalid { error }),
    }
    None
}

/// Step 9: what this conductor may vouch for. Judged only for a conductor whose chain
/// verified: an untrusted certificate is refused anyway, and its subject (anyone can make
/// one that matches a scope) gets no further work done.
fn check_conductor_scope(
    signer: &Signer,
    certname: &str,
    expiry: Option<OffsetDateTime>,
    now: OffsetDateTime,
    classification: Option<&Classification>,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) {
    if let (false, Some(c), true) = (policy.scopes.is_empty(), &signer.conductor, signer.trusted) {
        match policy.scopes.iter().find(|sc| scope_applies(sc, c)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: c.subject.clone() }),
            Some(scope) => check_scope(scope, certname, expiry, now, classification, reasons),
        }
    }
}

/// Step 10: extension requests, which the node controls entirely: none twice, none
/// critical, no subjectAltName unless allowed, nothing in ppAuthCertExt, the mirror equal
/// to the signed classification, anything else only if the policy allows it.
fn check_extension_requests(
    csr: &Csr,
    signed_classification: Option<&str>,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) {
    let mut seen: std::collections::HashSet<&[u64]> = std::collections::HashSet::new();
    let mut mirror_seen = false;
    for ext in &csr.extensions {
        let shown = oids::display(&ext.oid);
        if !seen.insert(ext.oid.as_slice()) {
            reasons.push(Refusal::ExtensionDuplicated { oid: shown });
            continue;
        }
        // Whatever the extension, a node does not get to make it critical: Puppet Server
        // (hook mode) copies the flag, and relying parties must then understand it or fail.
        if ext.critical {
            reasons.push(Refusal::ExtensionCritical { oid: shown.clone() });
        }
        if ext.oid == oids::SUBJECT_ALT_NAME {
            // Judged in step 11, against the conductor's scope.
        } else if oids::is_under(&ext.oid, oids::PP_AUTH) {
            reasons.push(Refusal::AuthorizationExtensionRequested { oid: shown });
        } else if ext.oid == policy.mirror_oid {
            mirror_seen = true;
            let matches = match (signed_classification, ext.utf8_value()) {
                (Some(signed), Some(requested)) => signed == requested,
                _ => false,
            };
            if !matches {
                reasons.push(Refusal::MirrorMismatch { oid: shown });
            }
        } else if policy.allowed_extensions.contains(&ext.oid) {
        } else if oids::is_under(&ext.oid, oids::PUPPET) {
            reasons.push(Refusal::PuppetExtensionNotAllowed { oid: shown });
        } else {
            reasons.push(Refusal::ExtensionNotAllowed { oid: shown });
        }
    }
    if policy.mirror_required && !mirror_seen {
        reasons.push(Refusal::MirrorMissing { oid: oids::dotted(&policy.mirror_oid) });
    }
}

/// The DNS names a CSR's subjectAltName request holds (at most one request: step 10
/// refuses duplicates), or why vouch will not issue them. IP addresses, e-mail addresses,
/// URIs and the like are never issued; each DNS name must pass the certname rules (so no
/// wildcard, no uppercase, no trailing dot).
pub fn requested_alt_names(csr: &Csr) -> Result<Vec<String>, Refusal> {
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::FromDer;
    let mut names = Vec::new();
    for ext in csr.extensions.iter().filter(|e| e.oid == oids::SUBJECT_ALT_NAME) {
        let (rest, san) = x509_parser::extensions::SubjectAlternativeName::from_der(&ext.value)
            .map_err(|e| Refusal::AltNameUnsupported { detail: format!("unreadable subjectAltName: {e}") })?;
        if !rest.is_empty() {
            return Err(Refusal::AltNameUnsupported { detail: "bytes after the subjectAltName".into() });
        }
        for n in &san.general_names {
            match n {
                GeneralName::DNSName(d) => {
                    check_certname(d).map_err(|p| Refusal::AltNameUnsupported {
                        detail: format!("DNS name {d:?} is not a valid host name: {p}"),
                    })?;
                    // "10.0.0.5" as a dNSName matches the address for some clients: an
                    // address is never issued, under either name form.
                    if d.parse::<std::net::IpAddr>().is_ok() {
                        return Err(Refusal::AltNameUnsupported {
                            detail: format!("DNS name {d:?} is an IP address; vouch issues DNS names only"),
                        });
                    }
                    if !names.iter().any(|k| k == d) {
                        names.push(d.to_string());
                    }
                }
                other => {
                    return Err(Refusal::AltNameUnsupported {
                        detail: format!("{other} is not a DNS name; vouch issues DNS names only"),
                    })
                }
            }
        }
    }
    Ok(names)
}

/// Step 11: the alt names requested (besides the certname, which every certificate carries)
/// are issued only to a server: a certname the conductor's scope lists in `servers`, each
/// name matching the scope's `dns_alt_names`. Returns the names to issue.
fn check_alt_names(
    csr: &Csr,
    signer: &Signer,
    values: &AttributeValues,
    version: Option<u32>,
    certname: &str,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) -> Vec<String> {
    if !csr.extensions.iter().any(|e| e.oid == oids::SUBJECT_ALT_NAME) {
        return Vec::new();
    }
    // A policy with no scope listing dns_alt_names allows none: the request is not even read.
    if !policy.scopes.iter().any(|s| s.dns_alt_names.is_some()) {
        reasons.push(Refusal::SubjectAltNameRequested);
        return Vec::new();
    }
    let requested = match requested_alt_names(csr) {
        Ok(n) => n,
        Err(r) => {
            reasons.push(r);
            return Vec::new();
        }
    };
    // Puppet lists the certname itself among the alt names it asks for.
    let extra: Vec<String> = requested.into_iter().filter(|n| n != certname).collect();
    if extra.is_empty() {
        return extra;
    }
    // The `servers` patterns judge the certname, so a conductor must have signed it (version
    // 2, .2.6; a different one is refused in step 3): in version 1 it is only the CN the node chose.
    if !values.is_v2 || values.certname.is_none() {
        reasons.push(Refusal::AltNamesCertnameNotVouched {
            certname: certname.to_string(),
            version: version.unwrap_or(1),
        });
        return Vec::new();
    }
    // An untrusted or unreadable conductor is refused already (steps 6, 9); no scope is judged.
    let (Some(c), true) = (&signer.conductor, signer.trusted) else { return Vec::new() };
    check_server_names(c, certname, &extra, policy, reasons);
    extra
}

/// Whether the scope applying to conductor `c` lets `certname` (a server) carry `names`
/// besides its certname; pushes the reasons it does not. A conductor matching no scope is
/// refused for that elsewhere.
pub(crate) fn check_server_names(
    c: &Conductor,
    certname: &str,
    names: &[String],
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) {
    if names.is_empty() {
        return;
    }
    let Some(scope) = policy.scopes.iter().find(|sc| scope_applies(sc, c)) else {
        if policy.scopes.is_empty() {
            reasons.push(Refusal::AltNamesNotServer { certname: certname.to_string(), scope: None });
        }
        return;
    };
    let is_server = scope.servers.as_ref().is_some_and(|s| s.iter().any(|p| p.is_match(certname)));
    let Some(allowed) = scope.dns_alt_names.as_ref().filter(|_| is_server) else {
        reasons.push(Refusal::AltNamesNotServer { certname: certname.to_string(), scope: Some(scope.name.clone()) });
        return;
    };
    for name in names {
        if !allowed.iter().any(|p| p.is_match(name)) {
            reasons.push(Refusal::AltNameOutOfScope { scope: scope.name.clone(), name: name.clone() });
        }
    }
}

/// For a refusal: the attributes a trusted conductor did sign, unexpired, held by this
/// request's key. Only a request for the name they vouch for holds them: attributes
/// presented under another name prove nothing about their owner, and must not lock the
/// node out.
fn held_attributes(
    reasons: &[Refusal],
    values: &AttributeValues,
    signer: &Signer,
    expiry: Option<OffsetDateTime>,
    csr: &Csr,
) -> Option<Held> {
    let for_this_name = !reasons.iter().any(|r| {
        matches!(
            r,
            Refusal::CertnameNotVouched { .. }
                | Refusal::CertnameInvalid { .. }
                | Refusal::CertnameReserved { .. }
                | Refusal::CommonNameCount { .. }
                | Refusal::CommonNameMismatch { .. }
        )
    });
    match (signer.vouched && for_this_name, expiry) {
        (true, Some(expiry)) => Some(Held {
            replay_key: replay_key(
                match (&values.certname, &values.nonce) {
                    (Some(_), Some(n)) if values.is_v2 => Some(n.as_str()),
                    _ => None,
                },
                &signer.conductor_der,
                &signer.signed_digest,
            ),
            expiry,
            spki: csr.spki.clone(),
        }),
        _ => None,
    }
}
