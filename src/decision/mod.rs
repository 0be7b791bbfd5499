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
pub use conductor::{recheck_conductor, Conductor};
pub use refusal::Refusal;

use conductor::{check_conductor, verify_signature};
use scope::{check_scope, scope_applies};

use crate::encoding::csr::{self, Csr, CsrError};
use crate::encoding::der::tag;
use crate::encoding::hex;
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
}

impl Grant {
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
pub fn decide_parsed(
    req: &Request<'_>,
    parsed: Result<Csr, CsrError>,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<Grant, Refused> {
    let mut reasons = Vec::new();
    let refuse = |reasons: Vec<Refusal>, conductor| Err(Refused { reasons, conductor, held: None });

    // 1. The CSR itself.
    let csr = match parsed {
        Ok(c) => c,
        Err(e) => {
            let r = match e {
                CsrError::NotFound { detail } => Refusal::CsrMissing { detail },
                CsrError::Malformed { detail } => Refusal::CsrMalformed { detail },
                CsrError::UnsupportedSignatureAlgorithm { oid } => Refusal::CsrSignatureAlgorithmUnsupported { oid },
                CsrError::UnsupportedKey { detail } => Refusal::CsrKeyUnsupported { detail },
                CsrError::BadSelfSignature => Refusal::CsrSignatureInvalid,
            };
            let mut all = vec![r];
            if let Err(problem) = check_certname(req.certname) {
                all.push(Refusal::CertnameInvalid { certname: req.certname.to_string(), problem });
            }
            return refuse(all, None);
        }
    };
    // The key's size was checked when the request was parsed (csr::check_key_size).

    // 2. Names.
    if let Err(problem) = check_certname(req.certname) {
        reasons.push(Refusal::CertnameInvalid { certname: req.certname.to_string(), problem });
    } else if is_reserved_certname(req.certname) {
        reasons.push(Refusal::CertnameReserved { certname: req.certname.to_string() });
    }
    match csr.common_names.as_slice() {
        [cn] if cn == req.certname => {}
        [cn] => {
            reasons.push(Refusal::CommonNameMismatch { common_name: cn.clone(), certname: req.certname.to_string() })
        }
        other => reasons.push(Refusal::CommonNameCount { count: other.len() }),
    }

    // 3. Attributes: each of the five exactly once, with exactly one text value.
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
    let conductor_value = take(oids::ATTR_CONDUCTOR);
    let classification_value = take(oids::ATTR_CLASSIFICATION);
    // Version 2 adds the certname and the nonce; in version 1 they are unexpected.
    let is_v2 = version.as_deref() == Some("2");
    let (vouched_certname, nonce) =
        if is_v2 { (take(oids::ATTR_CERTNAME), take(oids::ATTR_NONCE)) } else { (None, None) };
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
    if let Some(signed) = &vouched_certname {
        if signed != req.certname {
            reasons.push(Refusal::CertnameNotVouched { signed: signed.clone(), certname: req.certname.to_string() });
        }
    }
    if let Some(n) = &nonce {
        if !attrs::is_nonce(n) {
            reasons.push(Refusal::NonceMalformed { value: n.clone() });
        }
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

    // 4. Version.
    let mut version_num = None;
    if let Some(v) = &version {
        let canonical = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'));
        match v.parse::<u32>() {
            Ok(n) if canonical => {
                if policy.versions.contains(&n) {
                    version_num = Some(n);
                } else {
                    reasons.push(Refusal::VersionUnsupported { version: v.clone(), accepted: policy.versions.clone() });
                }
            }
            _ => reasons.push(Refusal::VersionMalformed { value: v.clone() }),
        }
    }

    // 5. Expiry.
    let mut expiry_time = None;
    if let Some(e) = &expiry {
        match crate::encoding::time::parse_rfc3339(e) {
            Err(_) => reasons.push(Refusal::ExpiryMalformed { value: e.clone() }),
            Ok(t) => {
                if t <= now {
                    reasons.push(Refusal::AttributesExpired {
                        expiry: e.clone(),
                        now: crate::encoding::time::format_rfc3339(now),
                    });
                } else if t - now > policy.max_attribute_lifetime {
                    reasons.push(Refusal::ExpiryTooFar {
                        expiry: e.clone(),
                        max_lifetime: crate::policy::format_duration(policy.max_attribute_lifetime),
                    });
                } else {
                    expiry_time = Some(t);
                }
            }
        }
    }

    // 6. The conductor certificate and its chain; 7. the signature over the canonical string.
    let mut conductor = None;
    // Whether a trusted conductor signed exactly these values.
    let mut vouched = false;
    // SHA-256 of the verified canonical string: the one-time-use key (a signature is
    // malleable — an ECDSA (r, s) is also valid as (r, n-s) — so it cannot be the key).
    let mut signed_digest = String::new();
    let mut conductor_der = Vec::new();
    // Whether the conductor's certificate chains to a trusted root and carries the
    // conductor EKU and key usage: only then are scopes judged (step 9).
    let mut conductor_trusted = false;
    if let Some(cv) = &conductor_value {
        match check_conductor(cv, policy, now) {
            Err(r) => reasons.push(r),
            Ok((info, leaf_der, chain_reasons)) => {
                let chain_ok = chain_reasons.is_empty();
                conductor_trusted = chain_ok;
                reasons.extend(chain_reasons);
                if let (Some(sig), Some(v), Some(e), Some(c)) = (&signature, &version, &expiry, &classification_value) {
                    // Verified even when the chain failed, so that the reasons are complete;
                    // a signature by an untrusted certificate grants nothing.
                    let msg = match (is_v2, &vouched_certname, &nonce) {
                        (false, _, _) => Some(attrs::canonical_v1(v, e, cv, c)),
                        (true, Some(cn), Some(n)) => Some(attrs::canonical_v2(v, e, cv, c, cn, n)),
                        // A missing .2.6/.2.7 is already a reason; nothing to verify against.
                        (true, _, _) => None,
                    };
                    if let Some(msg) = msg {
                        match verify_signature(&leaf_der, &info.subject, sig, &msg) {
                            Err(r) => reasons.push(r),
                            Ok(()) => {
                                vouched = chain_ok;
                                signed_digest =
                                    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &msg).as_ref());
                            }
                        }
                    }
                }
                conductor = Some(info);
                conductor_der = leaf_der;
            }
        }
    }

    // 8. Classification. Its YAML is parsed only once a trusted conductor is known to
    // have signed it: unsigned YAML never reaches the parser (an alias bomb costs
    // ~0.1 s of CPU before the parser's limits refuse it; nobody unvouched gets that).
    let mut classification = None;
    if let (true, Some(c)) = (vouched, &classification_value) {
        match Classification::from_base64(c, policy.classification_max_bytes) {
            Ok(parsed) => classification = Some(parsed),
            Err(ClassificationError::Unrepresentable { detail }) => {
                reasons.push(Refusal::ClassificationUnrepresentable { detail })
            }
            Err(error) => reasons.push(Refusal::ClassificationInvalid { error }),
        }
    }

    // 9. Per-conductor scope: what this conductor may vouch for. Judged only for a
    // conductor whose chain verified: an untrusted certificate is refused anyway, and
    // its subject (anyone can make one that matches a scope) gets no further work done.
    if let (false, Some(c), true) = (policy.scopes.is_empty(), &conductor, conductor_trusted) {
        match policy.scopes.iter().find(|sc| scope_applies(sc, c)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: c.subject.clone() }),
            Some(scope) => check_scope(scope, req.certname, expiry_time, now, classification.as_ref(), &mut reasons),
        }
    }

    // 10. Extension requests: the node controls them all.
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
            if !policy.allow_subject_alt_names {
                reasons.push(Refusal::SubjectAltNameRequested);
            }
        } else if oids::is_under(&ext.oid, oids::PP_AUTH) {
            reasons.push(Refusal::AuthorizationExtensionRequested { oid: shown });
        } else if ext.oid == policy.mirror_oid {
            mirror_seen = true;
            let matches = match (&classification_value, ext.utf8_value()) {
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

    if !reasons.is_empty() {
        // Held only by a request for the name they vouch for: attributes presented under
        // another name prove nothing about their owner, and must not lock the node out.
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
        let held = match (vouched && for_this_name, expiry_time) {
            (true, Some(expiry)) => Some(Held {
                replay_key: replay_key(
                    match (&vouched_certname, &nonce) {
                        (Some(_), Some(n)) if is_v2 => Some(n.as_str()),
                        _ => None,
                    },
                    &conductor_der,
                    &signed_digest,
                ),
                expiry,
                spki: csr.spki.clone(),
            }),
            _ => None,
        };
        return Err(Refused { reasons, conductor, held });
    }
    let binding = match (vouched_certname, nonce) {
        (Some(certname), Some(nonce)) => Some(attrs::Binding { certname, nonce }),
        _ => None,
    };
    match (classification, classification_value, conductor, expiry_time, version_num, signature) {
        (
            Some(classification),
            Some(classification_b64),
            Some(conductor),
            Some(expiry),
            Some(version),
            Some(_signature),
        ) if (version == 2) == binding.is_some() && !signed_digest.is_empty() => Ok(Grant {
            certname: req.certname.to_string(),
            csr,
            classification,
            classification_b64,
            conductor,
            expiry,
            version,
            decided_at: now,
            binding,
            signed_digest,
            conductor_der,
        }),
        // Unreachable when no reason was recorded; refuse rather than grant on doubt.
        (_, _, conductor, _, _, _) => {
            refuse(vec![Refusal::AttributeMissing { oid: "(internal: incomplete decision)".into() }], conductor)
        }
    }
}
