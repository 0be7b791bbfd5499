//! Steps 2 to 5 of the decision: the names the CSR carries, and the vouched attributes as
//! it carries them (each exactly once, as text), their version and their expiry.

use super::certname::{check_certname, is_reserved_certname};
use super::refusal::Refusal;
use crate::encoding::csr::Csr;
use crate::encoding::der::tag;
use crate::encoding::oids;
use crate::policy::Policy;
use crate::vouching::attrs;
use time::OffsetDateTime;

/// Step 2: the certname passes the rules and is not reserved; the CSR's one CN is it.
pub(super) fn check_names(certname: &str, csr: &Csr, reasons: &mut Vec<Refusal>) {
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
pub(super) struct AttributeValues {
    pub(super) signature: Option<String>,
    pub(super) version: Option<String>,
    pub(super) expiry: Option<String>,
    pub(super) conductor: Option<String>,
    pub(super) classification: Option<String>,
    /// Version 2 only: the certname and nonce the conductor bound them to.
    pub(super) certname: Option<String>,
    pub(super) nonce: Option<String>,
    pub(super) is_v2: bool,
    /// Version 3 only: the template (.2.8, .2.9, .2.7, .2.10) and the node's identity
    /// document (.2.11, unsigned, optional).
    pub(super) template: Option<crate::vouching::template::Template>,
    pub(super) identity_document: Option<String>,
    pub(super) is_v3: bool,
}

/// Step 3: each attribute exactly once with one text value; in version 2 also the
/// certname (which must be the one asked for) and a well-formed nonce.
pub(super) fn read_attributes(
    csr: &Csr,
    certname: &str,
    policy: &Policy,
    reasons: &mut Vec<Refusal>,
) -> AttributeValues {
    let mut take = |oid: &[u64]| take_text(csr, oid, reasons);
    let signature = take(oids::ATTR_SIGNATURE);
    let version = take(oids::ATTR_VERSION);
    let expiry = take(oids::ATTR_EXPIRY);
    let conductor = take(oids::ATTR_CONDUCTOR);
    let classification = take(oids::ATTR_CLASSIFICATION);
    // Version 2 adds the certname and the nonce; in version 1 they are unexpected.
    let is_v2 = version.as_deref() == Some("2");
    let (vouched_certname, nonce) =
        if is_v2 { (take(oids::ATTR_CERTNAME), take(oids::ATTR_NONCE)) } else { (None, None) };
    // Version 3 adds the template's four values; the identity document is optional. A
    // policy that does not accept it refuses version 3 for that alone (version-unsupported).
    let is_v3 = version.as_deref() == Some("3") && policy.versions.contains(&3);
    let (template, identity_document) = if is_v3 { read_template(csr, reasons) } else { (None, None) };
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
    if let Some(t) = &template {
        if !attrs::is_nonce(&t.id) {
            reasons.push(Refusal::NonceMalformed { value: t.id.clone() });
        }
    }
    AttributeValues {
        signature,
        version,
        expiry,
        conductor,
        classification,
        certname: vouched_certname,
        nonce,
        is_v2,
        template,
        identity_document,
        is_v3,
    }
}

/// One attribute's text value; the reason it has none (missing, duplicated, several values, not text).
fn take_text(csr: &Csr, oid: &[u64], reasons: &mut Vec<Refusal>) -> Option<String> {
    // The dotted OID only for a refusal: the text of every request's five attributes is read.
    let dotted = || oids::dotted(oid);
    let found: Vec<_> = csr.attributes_with(oid).collect();
    match found.as_slice() {
        [] => reasons.push(Refusal::AttributeMissing { oid: dotted() }),
        [a] => match a.values.as_slice() {
            [v] if matches!(v.tag, tag::PRINTABLE_STRING | tag::UTF8_STRING | tag::IA5_STRING) => {
                match String::from_utf8(v.bytes.clone()) {
                    Ok(s) => return Some(s),
                    Err(_) => reasons.push(Refusal::AttributeNotText { oid: dotted() }),
                }
            }
            [_] => reasons.push(Refusal::AttributeNotText { oid: dotted() }),
            vals => reasons.push(Refusal::AttributeValueCount { oid: dotted(), count: vals.len() }),
        },
        many => reasons.push(Refusal::AttributeDuplicated { oid: dotted(), count: many.len() }),
    }
    None
}

/// Version 3's attributes: the template (.2.8, .2.9, .2.7, .2.10, each exactly once) and the
/// node's identity document (.2.11, optional, at most once).
fn read_template(
    csr: &Csr,
    reasons: &mut Vec<Refusal>,
) -> (Option<crate::vouching::template::Template>, Option<String>) {
    let mut take = |oid: &[u64]| take_text(csr, oid, reasons);
    let values = (
        take(oids::ATTR_TEMPLATE_PATTERN),
        take(oids::ATTR_MAX_USES),
        take(oids::ATTR_NONCE),
        take(oids::ATTR_IDENTITY_BINDING),
    );
    let template = match values {
        (Some(pattern), Some(max_uses), Some(id), Some(binding)) => {
            Some(crate::vouching::template::Template { pattern, max_uses, id, binding })
        }
        _ => None,
    };
    let document = if csr.attributes_with(oids::ATTR_IDENTITY_DOCUMENT).next().is_some() {
        take(oids::ATTR_IDENTITY_DOCUMENT)
    } else {
        None
    };
    (template, document)
}

/// Step 3, continued: no attribute in vouch's arc beyond the version's, no Microsoft
/// extension request, and exactly one extensionRequest with one value.
pub(super) fn check_no_stray_requests(csr: &Csr, is_v2: bool, is_v3: bool, reasons: &mut Vec<Refusal>) {
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
    if is_v3 {
        known.extend([
            oids::ATTR_TEMPLATE_PATTERN,
            oids::ATTR_MAX_USES,
            oids::ATTR_NONCE,
            oids::ATTR_IDENTITY_BINDING,
            oids::ATTR_IDENTITY_DOCUMENT,
        ]);
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
pub(super) fn check_version(version: Option<&str>, policy: &Policy, reasons: &mut Vec<Refusal>) -> Option<u32> {
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
pub(super) fn check_expiry(
    expiry: Option<&str>,
    policy: &Policy,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Option<OffsetDateTime> {
    let expired = |expiry, now| Refusal::AttributesExpired { expiry, now };
    check_expiry_within(expiry, policy.max_attribute_lifetime, now, expired, reasons)
}

/// An RFC 3339 expiry after `now` (else the refusal `expired` makes of the expiry and now)
/// and at most `max_lifetime` ahead: attributes' and templates' alike.
pub(super) fn check_expiry_within(
    expiry: Option<&str>,
    max_lifetime: std::time::Duration,
    now: OffsetDateTime,
    expired: impl Fn(String, String) -> Refusal,
    reasons: &mut Vec<Refusal>,
) -> Option<OffsetDateTime> {
    let e = expiry?;
    match crate::encoding::time::parse_rfc3339(e) {
        Err(_) => reasons.push(Refusal::ExpiryMalformed { value: e.to_string() }),
        Ok(t) if t <= now => reasons.push(expired(e.to_string(), crate::encoding::time::format_rfc3339(now))),
        Ok(t) if t - now > max_lifetime => reasons.push(Refusal::ExpiryTooFar {
            expiry: e.to_string(),
            max_lifetime: crate::policy::format_duration(max_lifetime),
        }),
        Ok(t) => return Some(t),
    }
    None
}
