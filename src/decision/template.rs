//! Signature version 3, a template signed once for an autoscaling group: its expiry
//! (`templates.max_lifetime`, `template-expired`), its pattern (well formed, matching the
//! certname, within the conductor's scope), its max uses (within `templates.max_uses`),
//! its identity binding (unbound only if the policy allows; bound: the verifier seam,
//! [`super::identity`]). Counting the use is outside the pure core (the store's count).

use super::attributes::AttributeValues;
use super::identity::InstanceIdentity;
use super::refusal::Refusal;
use super::scope::scope_applies;
use super::signer::Signer;
use crate::policy::Policy;
use crate::vouching::template::{self as tpl, Instance};
use time::OffsetDateTime;

/// What a granted version 3 request uses of its template: the store counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateGrant {
    /// The template's id (.2.7).
    pub id: String,
    pub pattern: String,
    pub max_uses: u64,
    /// What the count is keyed by ([`tpl::template_key`]).
    pub template_key: String,
    /// Whom this use belongs to: the instance id (bound) or the certname (unbound).
    pub instance: Instance,
    /// The one-time key of this instance's use ([`tpl::instance_key`]).
    pub instance_key: String,
    /// A bound template's instance, fleet-wide (`aws:ACCOUNT:INSTANCE-ID`): claimed once,
    /// whichever template it enrolls with first (`identity-instance-replayed` under another).
    pub instance_claim: Option<String>,
}

/// Step 5 for a template: an RFC 3339 expiry after `now`, no further ahead than
/// `templates.max_lifetime`; past it, `template-expired`.
pub(super) fn check_template_expiry(
    expiry: Option<&str>,
    policy: &Policy,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Option<OffsetDateTime> {
    let expired = |expiry, now| Refusal::TemplateExpired { expiry, now };
    super::attributes::check_expiry_within(expiry, policy.templates.max_lifetime, now, expired, reasons)
}

/// Whether every certname the template pattern matches is matched by the scope pattern
/// `scope` (a glob whose `*` matches any run of characters other than `.`). Judged label
/// by label: the same number of labels; each of the template's literal labels matched by
/// the scope's; and the scope's first label ends with `*` and matches the template's prefix
/// (its last `*` then also takes the rest of any first label). Sufficient, not necessary: a scope that allows the names another way
/// (`w*e*` for `web-*`) is read as not containing them (deny by default).
pub fn pattern_within(pattern: &str, scope: &str) -> bool {
    let (Some((first, domain)), Some((scope_first, scope_domain))) = (pattern.split_once('.'), scope.split_once('.'))
    else {
        return false;
    };
    let Some(prefix) = first.strip_suffix('*') else { return false };
    let glob = |p: &str, t: &str| crate::policy::glob(p, t, Some('.'));
    let labels: Vec<&str> = domain.split('.').collect();
    let scope_labels: Vec<&str> = scope_domain.split('.').collect();
    labels.len() == scope_labels.len()
        && labels.iter().zip(&scope_labels).all(|(l, s)| glob(s, l))
        && scope_first.ends_with('*')
        && glob(scope_first, prefix)
}

/// The scope refusal of a template pattern that escapes the scope applying to the
/// conductor (`None`: no scopes, no scope applies (refused elsewhere), or it lists no
/// certnames, or one of them contains the pattern).
pub fn pattern_out_of_scope(pattern: &str, scope: &crate::policy::Scope) -> Option<Refusal> {
    let certnames = scope.certnames.as_ref()?;
    if certnames.iter().any(|p| pattern_within(pattern, &p.text)) {
        return None;
    }
    Some(Refusal::TemplatePatternOutOfScope { scope: scope.name.clone(), pattern: pattern.to_string() })
}

/// For `vouch conductor sign --template`: the refusals the policy at hand would give every
/// use of the template for this conductor's scope (`conductor`: the .2.4 value): its pattern,
/// then what the scope allows of its classification and lifetime, before anything is signed.
/// Empty where no scope applies a limit (or the certificate does not read).
pub fn template_scope_refusals(
    conductor: &str,
    pattern: &str,
    classification: &crate::vouching::classification::Classification,
    expiry: OffsetDateTime,
    policy: &Policy,
    now: OffsetDateTime,
) -> Vec<Refusal> {
    if policy.scopes.is_empty() {
        return vec![];
    }
    let Ok((info, _, _)) = super::conductor::check_conductor(conductor, policy, now) else { return vec![] };
    match policy.scopes.iter().find(|sc| scope_applies(sc, &info)) {
        None => vec![Refusal::ConductorUnscoped { subject: info.subject }],
        Some(scope) => {
            let mut reasons: Vec<Refusal> = pattern_out_of_scope(pattern, scope).into_iter().collect();
            super::scope::check_vouched(scope, Some(expiry), now, Some(classification), &mut reasons);
            reasons
        }
    }
}

/// Step 12: the template's own rules; the [`TemplateGrant`] when every one holds.
pub(super) fn check_template(
    values: &AttributeValues,
    signer: &Signer,
    certname: &str,
    policy: &Policy,
    identity: Option<&dyn InstanceIdentity>,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Option<TemplateGrant> {
    let t = values.template.as_ref()?;
    let before = reasons.len();
    match tpl::check_pattern(&t.pattern) {
        Err(problem) => reasons.push(Refusal::TemplatePatternMalformed { pattern: t.pattern.clone(), problem }),
        Ok(()) => {
            if !tpl::pattern_matches(&t.pattern, certname) {
                reasons.push(Refusal::CertnameNotInTemplate {
                    certname: certname.to_string(),
                    pattern: t.pattern.clone(),
                });
            }
            if let (Some(c), true) = (&signer.conductor, signer.trusted) {
                let scope = policy.scopes.iter().find(|sc| scope_applies(sc, c));
                reasons.extend(scope.and_then(|sc| pattern_out_of_scope(&t.pattern, sc)));
            }
        }
    }
    // Well formed (vouch's own bound), then within the policy's: a policy lowered below what
    // a template was signed for says so, never that the value is malformed.
    let max_uses = match tpl::parse_max_uses(&t.max_uses, tpl::MAX_USES) {
        Err(problem) => {
            reasons.push(Refusal::TemplateMaxUsesInvalid { value: t.max_uses.clone(), problem });
            None
        }
        Ok(n) if n > policy.templates.max_uses => {
            reasons.push(Refusal::TemplateMaxUsesAbovePolicy { max_uses: n, policy_max: policy.templates.max_uses });
            None
        }
        Ok(n) => Some(n),
    };
    let instance = match tpl::check_binding(&t.binding) {
        Err(problem) => {
            reasons.push(Refusal::IdentityBindingMalformed { value: t.binding.clone(), problem });
            None
        }
        Ok(()) if t.binding.is_empty() => {
            check_unbound(policy.templates.allow_unbound, values.identity_document.is_some(), reasons);
            Some((Instance::Certname(certname.to_string()), None))
        }
        Ok(()) => bound_instance(&t.binding, values, signer, certname, identity, now, reasons),
    };
    match (max_uses, instance, reasons.len() == before && signer.vouched) {
        (Some(max_uses), Some((instance, instance_claim)), true) => {
            let template_key = tpl::template_key(&signer.conductor_der, &t.id);
            let instance_key = tpl::instance_key(&template_key, &instance);
            Some(TemplateGrant {
                id: t.id.clone(),
                pattern: t.pattern.clone(),
                max_uses,
                template_key,
                instance,
                instance_key,
                instance_claim,
            })
        }
        _ => None,
    }
}

/// An unbound template: only if the policy allows them, and never with an identity document
/// (.2.11): no conductor bound this template to an instance, so a document the node adds
/// would vouch for nothing (deny by default).
fn check_unbound(allow_unbound: bool, has_document: bool, reasons: &mut Vec<Refusal>) {
    if !allow_unbound {
        reasons.push(Refusal::TemplateUnbound);
    }
    if has_document {
        reasons.push(Refusal::IdentityDocumentUnbound);
    }
}

/// A bound template: the verifier must accept the node's document and derive this certname.
/// The (unsigned) document reaches the verifier only once a trusted conductor's signature
/// over the binding verified. The instance, and its fleet-wide claim key
/// (`PROVIDER:ACCOUNT:INSTANCE-ID`).
fn bound_instance(
    binding: &str,
    values: &AttributeValues,
    signer: &Signer,
    certname: &str,
    identity: Option<&dyn InstanceIdentity>,
    now: OffsetDateTime,
    reasons: &mut Vec<Refusal>,
) -> Option<(Instance, Option<String>)> {
    let Some(verifier) = identity else {
        reasons.push(Refusal::IdentityVerifierMissing { binding: binding.to_string() });
        return None;
    };
    let Some(document) = &values.identity_document else {
        reasons.push(Refusal::IdentityDocumentMissing);
        return None;
    };
    if !signer.vouched {
        return None;
    }
    match verifier.verify(binding, document.as_bytes(), now) {
        Err(reason) => reasons.push(Refusal::IdentityRefused { reason }),
        Ok(v) if v.certname != certname => {
            reasons.push(Refusal::IdentityCertnameMismatch { derived: v.certname, certname: certname.to_string() })
        }
        Ok(v) => {
            let provider = binding.split_once(':').map_or(binding, |(p, _)| p);
            let claim = format!("{provider}:{}:{}", v.account, v.instance_id);
            return Some((Instance::InstanceId(v.instance_id), Some(claim)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{check_unbound, pattern_within};

    #[test]
    fn an_unbound_template_with_an_identity_document_is_refused() {
        let codes = |allow, doc| {
            let mut reasons = Vec::new();
            check_unbound(allow, doc, &mut reasons);
            reasons.iter().map(|r| r.code()).collect::<Vec<_>>()
        };
        assert_eq!(codes(true, false), Vec::<&str>::new());
        assert_eq!(codes(true, true), ["identity-document-unbound"]);
        assert_eq!(codes(false, true), ["template-unbound-forbidden", "identity-document-unbound"]);
    }

    #[test]
    fn an_identity_refusal_is_the_refusal_with_its_own_code_message_and_hint() {
        use crate::identity::IdentityRefusal;
        let reason = IdentityRefusal::AccountNotAllowed { account: "999988887777".into(), entry: "web".into() };
        let r = super::Refusal::IdentityRefused { reason: reason.clone() };
        assert_eq!(r.code(), "identity-account-not-allowed");
        assert_eq!(r.hint(), reason.hint());
        assert!(r.to_string().ends_with(&reason.to_string()), "{r}");
    }

    #[test]
    fn containment() {
        assert!(pattern_within("web-*.asg.example.com", "web-*.asg.example.com"));
        assert!(pattern_within("web-eu-*.asg.example.com", "web-*.asg.example.com"));
        assert!(pattern_within("web-*.asg.example.com", "*.*.example.com"));
        assert!(!pattern_within("*.asg.example.com", "web-*.asg.example.com"));
        assert!(!pattern_within("web-*.asg.example.com", "web-*.example.com"));
        assert!(!pattern_within("web-*.asg.example.com", "web-1.asg.example.com"));
        assert!(!pattern_within("web-*.asg.example.com", "web-1*.asg.example.com"));
        assert!(!pattern_within("*.asg.example.com", "w*.asg.example.com"));
        assert!(pattern_within("*.asg.example.com", "*.asg.example.com"));
        assert!(!pattern_within("web-*.other.example.com", "web-*.asg.example.com"));
    }
}
