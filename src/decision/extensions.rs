//! Steps 10 and 11 of the decision: the extension requests a node makes (a signed trusted
//! fact only with its signed value), and the alt names only a server may carry (each allowed
//! by its conductor's scope).

use super::attributes::AttributeValues;
use super::certname::check_certname;
use super::refusal::Refusal;
use super::scope::check_server_names;
use super::signer::Signer;
use crate::encoding::csr::Csr;
use crate::encoding::oids;
use crate::policy::Policy;
use crate::vouching::classification::trusted::TrustedFact;

/// Step 10: extension requests, which the node controls entirely: none twice, none
/// critical, no subjectAltName unless allowed, nothing in ppAuthCertExt, the mirror equal
/// to the signed classification, a registered extension the classification names (`pp_role`)
/// equal to its signed value, anything else only if the policy allows it.
pub(super) fn check_extension_requests(
    csr: &Csr,
    signed_classification: Option<&str>,
    trusted: &[TrustedFact],
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
        } else if let Some(fact) = trusted.iter().find(|f| f.oid == ext.oid) {
            // Signed: the request may repeat the value (Puppet Server, in hook mode, copies
            // it), never ask for another.
            if ext.utf8_value() != Some(fact.value.as_str()) {
                reasons.push(Refusal::TrustedFactMismatch {
                    name: fact.name.to_string(),
                    requested: ext.utf8_value().map_or_else(|| "(not a UTF8String)".to_string(), str::to_string),
                    signed: fact.value.clone(),
                });
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
    // Where the CA is Puppet Server (the mirror required), what the CSR does not request is
    // not in the certificate: a signed fact left out would be lost, silently.
    if policy.mirror_required {
        for fact in trusted.iter().filter(|f| !seen.contains(f.oid.as_slice())) {
            reasons.push(Refusal::TrustedFactMissing { name: fact.name.to_string() });
        }
    }
}

/// The trusted facts (`pp_role`, …) of a classification that parsed (so its `extensions` did
/// too; refused on doubt all the same).
pub(super) fn signed_trusted_facts(
    classification: Option<&crate::vouching::classification::Classification>,
    reasons: &mut Vec<Refusal>,
) -> Vec<TrustedFact> {
    match classification.map(|c| crate::vouching::classification::trusted::trusted_facts(&c.value)) {
        Some(Ok(t)) => t,
        Some(Err(error)) => {
            reasons.push(Refusal::ClassificationInvalid { error });
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// Whether the agent says it renews its own certificate, as Puppet 8 and OpenVox 8 agents do
/// (`hostcert_renewal_interval` > 0): one `pp_auth_auto_renew` attribute
/// (1.3.6.1.4.1.34380.1.3.2, an attribute, not an extension request) holding one text value
/// `true`. Any other form is not asking (Puppet Server reads the first value; vouch reads
/// only the exact form), and is not a refusal: it only chooses between two lifetimes the
/// policy gives.
pub fn asks_auto_renewal(csr: &Csr) -> bool {
    use crate::encoding::der::tag;
    let found: Vec<_> = csr.attributes_with(oids::PP_AUTH_AUTO_RENEW).collect();
    match found.as_slice() {
        [a] => match a.values.as_slice() {
            [v] => matches!(v.tag, tag::PRINTABLE_STRING | tag::UTF8_STRING | tag::IA5_STRING) && v.bytes == b"true",
            _ => false,
        },
        _ => false,
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
pub(super) fn check_alt_names(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::csr::{self, build, printable, CsrSpec};
    use crate::vouching::classification::trusted::registered_oid;

    fn policy(extra: &str) -> Policy {
        let key = rcgen::KeyPair::generate().unwrap();
        let root = rcgen::CertificateParams::new(vec!["r".to_string()]).unwrap().self_signed(&key).unwrap();
        let pem = crate::encoding::pem::encode("CERTIFICATE", root.der());
        let text = format!("[conductors]\ntrusted_roots = [\"r.pem\"]\n{extra}");
        Policy::parse(std::path::Path::new("/etc/vouch/policy.toml"), &text, move |_| Ok(pem.clone().into_bytes()))
            .unwrap()
    }

    fn request(spec: CsrSpec) -> Csr {
        let key = rcgen::KeyPair::generate().unwrap();
        csr::parse(&build(&spec, &key).unwrap()).unwrap()
    }

    fn role(value: &str) -> (Vec<u64>, String) {
        (registered_oid("pp_role").unwrap().1, value.to_string())
    }

    fn signed_role(value: &str) -> Vec<TrustedFact> {
        vec![TrustedFact { name: "pp_role", oid: role(value).0, value: value.to_string() }]
    }

    fn codes(csr: &Csr, trusted: &[TrustedFact], policy: &Policy) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        check_extension_requests(csr, None, trusted, policy, &mut reasons);
        reasons.iter().map(Refusal::code).collect()
    }

    #[test]
    fn a_signed_pp_role_may_be_requested_with_its_value_only() {
        let p = policy("");
        let web = request(CsrSpec { extension_requests: vec![role("web")], ..Default::default() });
        let db = request(CsrSpec { extension_requests: vec![role("db")], ..Default::default() });
        assert!(codes(&web, &signed_role("web"), &p).is_empty());
        assert_eq!(codes(&db, &signed_role("web"), &p), ["trusted-fact-mismatch"]);
        // Not signed: today's rule, the policy's extensions.allow (empty here).
        assert_eq!(codes(&web, &[], &p), ["puppet-extension-not-allowed"]);
        // Allowed by the policy, but signed otherwise: the signed value wins.
        let allowing = policy("[extensions]\nallow = [\"pp_role\"]\n");
        assert!(codes(&db, &[], &allowing).is_empty());
        assert_eq!(codes(&db, &signed_role("web"), &allowing), ["trusted-fact-mismatch"]);
    }

    #[test]
    fn where_the_mirror_is_required_a_signed_fact_must_be_requested() {
        let none = request(CsrSpec::default());
        // vouch as the CA writes the signed facts itself: a request need not carry them.
        assert!(codes(&none, &signed_role("web"), &policy("")).is_empty());
        let hook = policy("[classification]\nmirror_required = true\n");
        let c = codes(&none, &signed_role("web"), &hook);
        assert!(c.contains(&"trusted-fact-missing") && c.contains(&"mirror-missing"), "{c:?}");
        let web = request(CsrSpec { extension_requests: vec![role("web")], ..Default::default() });
        assert!(!codes(&web, &signed_role("web"), &hook).contains(&"trusted-fact-missing"));
    }

    #[test]
    fn a_mismatch_names_both_values() {
        let db = request(CsrSpec { extension_requests: vec![role("db")], ..Default::default() });
        let mut reasons = Vec::new();
        check_extension_requests(&db, None, &signed_role("web"), &policy(""), &mut reasons);
        assert_eq!(
            reasons,
            [Refusal::TrustedFactMismatch { name: "pp_role".into(), requested: "db".into(), signed: "web".into() }]
        );
    }

    #[test]
    fn auto_renewal_is_asked_only_in_puppet_8s_form() {
        let with = |values: Vec<Vec<u8>>| {
            request(CsrSpec { attributes: vec![(oids::PP_AUTH_AUTO_RENEW.to_vec(), values)], ..Default::default() })
        };
        assert!(asks_auto_renewal(&with(vec![printable("true")])));
        assert!(!asks_auto_renewal(&with(vec![printable("false")])));
        assert!(!asks_auto_renewal(&with(vec![printable("TRUE")])));
        assert!(!asks_auto_renewal(&with(vec![printable("true"), printable("true")])));
        assert!(!asks_auto_renewal(&request(CsrSpec::default())));
    }
}
