//! The autosign decision: a pure function of the CSR bytes, the certname asked
//! about, the policy (with its trust anchors) and the time. No I/O, no clock.
//!
//! It returns a [`Grant`], which only this module can construct and which
//! issuance consumes, or every [`Refusal`] that applies.

// A refusal carries every reason and who vouched; it is returned once per decision,
// so its size does not matter.
#![allow(clippy::result_large_err)]

mod attributes;
mod certname;
mod conductor;
mod extensions;
pub mod identity;
mod refusal;
mod scope;
mod signer;
mod template;

/// A signed trusted fact (`pp_role`, …), as grants and renewals carry it.
pub use crate::vouching::classification::trusted::TrustedFact;
pub use certname::{check_certname, is_reserved_certname, CertnameProblem, MAX_CERTNAME, RESERVED_CERTNAMES};
pub use conductor::{own_crl_refusal, recheck_conductor, Conductor};
pub use extensions::{asks_auto_renewal, requested_alt_names};
pub use identity::{IdentityRefusal, InstanceIdentity, VerifiedInstance};
pub use refusal::Refusal;
pub use template::{pattern_out_of_scope, pattern_within, template_scope_refusals, TemplateGrant};

use attributes::{check_expiry, check_names, check_no_stray_requests, check_version, read_attributes, AttributeValues};
use extensions::{check_alt_names, check_extension_requests, signed_trusted_facts};
use signer::{check_conductor_scope, check_signer, read_classification, Signer};

use crate::encoding::csr::{self, Csr, CsrError};
use crate::policy::Policy;
use crate::vouching::attrs;
use crate::vouching::classification::Classification;
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
    trusted: Vec<TrustedFact>,
    auto_renew: bool,
    template: Option<TemplateGrant>,
}

impl Grant {
    /// The signed trusted facts (`pp_role`, …) the certificate carries as Puppet's extensions.
    pub fn trusted_facts(&self) -> &[TrustedFact] {
        &self.trusted
    }
    /// The agent renews its own certificate (`pp_auth_auto_renew`, Puppet 8).
    pub fn auto_renew(&self) -> bool {
        self.auto_renew
    }
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
    /// Version 3: the template this request uses, and whose use it is.
    pub fn template(&self) -> Option<&TemplateGrant> {
        self.template.as_ref()
    }
    /// What makes these attributes one-time (see [`replay_key`]); version 3: this
    /// instance's use of its template (first use wins per instance).
    pub fn replay_key(&self) -> ReplayKey {
        if let Some(t) = &self.template {
            return ReplayKey { key: t.instance_key.clone(), legacy: None };
        }
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

/// [`decide`] with an instance identity verifier for templates bound to one (version 3).
pub fn decide_with(
    req: &Request<'_>,
    policy: &Policy,
    now: OffsetDateTime,
    identity: Option<&dyn InstanceIdentity>,
) -> Result<Grant, Refused> {
    decide_parsed_with(req, csr::parse(req.csr), policy, now, identity)
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
    // The policy's `[[identity.aws]]` entries verify bound templates; without any, a bound
    // template is refused as having no verifier.
    let providers = crate::identity::Providers { aws: &policy.identity };
    let identity: Option<&dyn InstanceIdentity> = if policy.identity.is_empty() { None } else { Some(&providers) };
    decide_parsed_with(req, parsed, policy, now, identity)
}

/// [`decide_parsed`] with an instance identity verifier (see [`decide_with`]).
pub fn decide_parsed_with(
    req: &Request<'_>,
    parsed: Result<Csr, CsrError>,
    policy: &Policy,
    now: OffsetDateTime,
    identity: Option<&dyn InstanceIdentity>,
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
    let values = read_attributes(&csr, req.certname, policy, &mut reasons);
    check_no_stray_requests(&csr, values.is_v2, values.is_v3, &mut reasons);
    // 4. Version. One the policy does not accept is the one reason: its attributes and its
    // canonical string are another version's, and every later step would only add noise (a
    // template's own attributes "unexpected", its signature "invalid").
    let version = check_version(values.version.as_deref(), policy, &mut reasons);
    if let Some(unsupported) = reasons.iter().find(|r| matches!(r, Refusal::VersionUnsupported { .. })) {
        return Err(Refused { reasons: vec![unsupported.clone()], conductor: None, held: None });
    }
    // 5. Expiry (a template's: its own limit and code).
    let expiry = if values.is_v3 {
        template::check_template_expiry(values.expiry.as_deref(), policy, now, &mut reasons)
    } else {
        check_expiry(values.expiry.as_deref(), policy, now, &mut reasons)
    };
    // 6. The conductor certificate and its chain; 7. the signature over the canonical string.
    let signer = check_signer(&values, policy, now, &mut reasons);
    // 8. Classification.
    let classification = read_classification(&signer, values.classification.as_deref(), policy, &mut reasons);
    // 9. Per-conductor scope.
    check_conductor_scope(&signer, req.certname, expiry, now, classification.as_ref(), policy, &mut reasons);
    // 10. Extension requests (a signed trusted fact only with its signed value).
    let trusted = signed_trusted_facts(classification.as_ref(), &mut reasons);
    check_extension_requests(&csr, values.classification.as_deref(), &trusted, policy, &mut reasons);
    // 11. Alt names: only a server's, each allowed by its scope.
    let alt_names = check_alt_names(&csr, &signer, &values, version, req.certname, policy, &mut reasons);
    // 12. Version 3: the template's pattern, uses and identity binding.
    let template = template::check_template(&values, &signer, req.certname, policy, identity, now, &mut reasons);

    if !reasons.is_empty() {
        let held = held_attributes(&reasons, &values, &signer, expiry, &csr);
        return Err(Refused { reasons, conductor: signer.conductor, held });
    }
    let parts = Granted { csr, classification, expiry, version, alt_names, trusted, template, decided_at: now };
    grant(req, values, signer, parts)
}

/// What the steps found, for [`grant`].
struct Granted {
    csr: Csr,
    classification: Option<Classification>,
    expiry: Option<OffsetDateTime>,
    version: Option<u32>,
    alt_names: Vec<String>,
    trusted: Vec<TrustedFact>,
    template: Option<TemplateGrant>,
    decided_at: OffsetDateTime,
}

/// The grant of a request no step refused.
fn grant(req: &Request<'_>, values: AttributeValues, signer: Signer, g: Granted) -> Result<Grant, Refused> {
    let binding = match (values.certname, values.nonce) {
        (Some(certname), Some(nonce)) if values.is_v2 => Some(attrs::Binding { certname, nonce }),
        _ => None,
    };
    let auto_renew = extensions::asks_auto_renewal(&g.csr);
    match (g.classification, values.classification, signer.conductor, g.expiry, g.version, values.signature) {
        (
            Some(classification),
            Some(classification_b64),
            Some(conductor),
            Some(expiry),
            Some(version),
            Some(_signature),
        ) if (version == 2) == binding.is_some()
            && (version == 3) == g.template.is_some()
            && !signer.signed_digest.is_empty() =>
        {
            Ok(Grant {
                certname: req.certname.to_string(),
                csr: g.csr,
                classification,
                classification_b64,
                conductor,
                expiry,
                version,
                decided_at: g.decided_at,
                binding,
                signed_digest: signer.signed_digest,
                conductor_der: signer.conductor_der,
                alt_names: g.alt_names,
                trusted: g.trusted,
                auto_renew,
                template: g.template,
            })
        }
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
    // A template (version 3) is many-use: a refused request holds none of its uses.
    match (signer.vouched && for_this_name && !values.is_v3, expiry) {
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
