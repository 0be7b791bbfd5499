//! `vouch conductor sign --template`: a template (signature version 3) checked before it is
//! signed, against its own rules and against the CA's policy at hand (--dir's, VOUCH_POLICY,
//! /etc/vouch): what that policy would refuse for every node is refused here, with the CA's
//! code ([`TemplateProblem`]), and nothing is written. With no policy at hand, against the
//! default policy (deny by default): what a CA whose policy sets neither
//! `attributes.versions` nor `[templates]` would refuse is refused, every reason named.

use super::args::ConductorSignArgs;
use super::find_policy;
use super::output::note;
use super::Cli;
use crate::error::{Error, TemplateProblem};
use crate::policy::Policy;
use crate::vouching::attrs::VouchedAttributes;
use crate::vouching::classification::Classification;
use crate::vouching::template::{self as tpl, TemplateRequest};
use std::path::PathBuf;
use time::OffsetDateTime;

/// The CA's policy at hand, and where it was found.
type AtHand = Option<(PathBuf, Policy)>;

/// The policy at hand, or why there is none (no policy found, or one that cannot be read).
type Found = Result<(PathBuf, Policy), String>;

fn refuse(problem: TemplateProblem, at: &AtHand) -> Error {
    Error::Template { problem, policy: at.as_ref().map(|(p, _)| p.clone()) }
}

/// Signs the template of `a` once every check passed: its pattern, uses and binding, then
/// what the policy at hand allows.
pub(super) fn sign_template(
    cli: &Cli,
    a: &ConductorSignArgs,
    cert_der: &[u8],
    key: &rcgen::KeyPair,
    classification: &Classification,
    expiry: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<VouchedAttributes, Error> {
    if let Some(version) = a.version.filter(|v| *v != 3) {
        return Err(refuse(TemplateProblem::Version { version }, &None));
    }
    let given = a.certname_pattern.clone().unwrap_or_default();
    let pattern = given.to_lowercase();
    if pattern != given {
        note(&format!(
            "vouch: note: --certname-pattern {given:?} is signed as {pattern:?}: Puppet's certnames are lower case"
        ));
    }
    tpl::check_pattern(&pattern)
        .map_err(|problem| refuse(TemplateProblem::PatternMalformed { pattern: pattern.clone(), problem }, &None))?;
    let binding = binding(a)?;
    check_binding_fits_pattern(&binding, &pattern)?;
    let found = policy_at_hand(cli)?;
    let at: AtHand = found.as_ref().ok().cloned();
    let max_uses = a.max_uses.unwrap_or(0);
    let (max, whose) = match &at {
        Some((_, p)) => (p.templates.max_uses.min(tpl::MAX_USES), "the policy's templates.max_uses"),
        None => (tpl::MAX_USES, "vouch's own maximum; no policy at hand"),
    };
    if !(1..=max).contains(&max_uses) {
        return Err(refuse(TemplateProblem::MaxUses { given: max_uses, max, whose: whose.into() }, &at));
    }
    let req = TemplateRequest { pattern: &pattern, max_uses, binding: &binding };
    let vouched = tpl::vouch_template(cert_der, key, classification, expiry, a.cert_encoding.into(), &req)
        .map_err(|detail| Error::Key { path: a.key.clone(), detail })?;
    match &found {
        Ok((_, policy)) => {
            if let Some(problem) = policy_problem(policy, &vouched, classification, &req, expiry, now) {
                return Err(refuse(problem, &at));
            }
        }
        Err(why) => {
            let reasons = default_problems(&req, expiry, now);
            if !reasons.is_empty() {
                let reasons = reasons.iter().map(|p| format!("[{}] {p}", p.code())).collect::<Vec<_>>().join("; ");
                return Err(refuse(TemplateProblem::DefaultPolicyRefuses { why: why.clone(), reasons }, &None));
            }
        }
    }
    if binding.is_empty() {
        note(&format!(
            "vouch: warning: this template is not bound to an instance identity: anyone who reads the user-data \
             can enroll names matching {pattern} until it expires or is used up"
        ));
    }
    Ok(vouched)
}

/// `--identity-binding`, checked: absent is unbound (empty); given empty is a mistake.
fn binding(a: &ConductorSignArgs) -> Result<String, Error> {
    let binding = match a.identity_binding.as_deref() {
        None => return Ok(String::new()),
        Some("") => return Err(refuse(TemplateProblem::BindingEmpty, &None)),
        Some(b) => b.to_string(),
    };
    tpl::check_binding(&binding)
        .map_err(|problem| refuse(TemplateProblem::BindingMalformed { binding: binding.clone(), problem }, &None))?;
    Ok(binding)
}

/// The policy the template is checked against: --dir's (a --dir that does not exist is an
/// error: a mistyped one would silently check nothing), VOUCH_POLICY, /etc/vouch. None found,
/// or one that cannot be read: why, and the template is checked against the default policy.
fn policy_at_hand(cli: &Cli) -> Result<Found, Error> {
    if let Some(d) = cli.dir.as_deref().filter(|d| !d.is_dir()) {
        return Err(refuse(TemplateProblem::PolicyDirMissing { dir: d.display().to_string() }, &None));
    }
    let path = match find_policy(None, cli.dir.as_deref()) {
        Ok(path) => path,
        Err(e) => return Ok(Err(format!("no CA's policy is at hand ({e})"))),
    };
    Ok(match Policy::load(&path) {
        Ok(policy) => Ok((path, policy)),
        Err(e) => Err(format!("the policy at hand cannot be read ({e})")),
    })
}

/// A binding's certnames must fit the template's pattern: the CA requires both of every
/// node, so a binding that derives names the pattern never matches makes a template no
/// instance can use. Checked with an instance id of AWS's form.
fn check_binding_fits_pattern(binding: &str, pattern: &str) -> Result<(), Error> {
    let Some(template) = binding.strip_prefix("aws:") else { return Ok(()) };
    let example = template.replace("{instance-id}", "i-0123456789abcdef0");
    if tpl::pattern_matches(pattern, &example) {
        return Ok(());
    }
    Err(refuse(TemplateProblem::BindingOutsidePattern { example, pattern: pattern.to_string() }, &None))
}

/// What the CA's policy would refuse of every use of this template: signature version 3
/// not accepted, an expiry past templates.max_lifetime, the conductor's scope (pattern,
/// classification, lifetime), an unbound template it forbids, a bound one it cannot verify.
fn policy_problem(
    policy: &Policy,
    vouched: &VouchedAttributes,
    classification: &Classification,
    req: &TemplateRequest<'_>,
    expiry: OffsetDateTime,
    now: OffsetDateTime,
) -> Option<TemplateProblem> {
    if !policy.versions.contains(&3) {
        return Some(TemplateProblem::VersionOff { accepted: policy.versions.clone() });
    }
    if let Some(problem) = expiry_problem(policy.templates.max_lifetime, expiry, now) {
        return Some(problem);
    }
    let scope =
        crate::decision::template_scope_refusals(&vouched.conductor, req.pattern, classification, expiry, policy, now);
    if let Some(refusal) = scope.into_iter().next() {
        return Some(TemplateProblem::Scope { refusal });
    }
    if req.binding.is_empty() && !policy.templates.allow_unbound {
        return Some(TemplateProblem::UnboundForbidden);
    }
    if !req.binding.is_empty() && policy.identity.is_empty() {
        return Some(TemplateProblem::VerifierMissing { binding: req.binding.to_string() });
    }
    None
}

/// An expiry further ahead than `max_lifetime` (`templates.max_lifetime`).
fn expiry_problem(
    max_lifetime: std::time::Duration,
    expiry: OffsetDateTime,
    now: OffsetDateTime,
) -> Option<TemplateProblem> {
    let limit = time::Duration::try_from(max_lifetime).unwrap_or(time::Duration::MAX);
    now.checked_add(limit).is_some_and(|latest| expiry > latest).then(|| TemplateProblem::ExpiryTooFar {
        expiry: crate::encoding::time::format_rfc3339(expiry),
        max_lifetime: crate::policy::format_duration(max_lifetime),
    })
}

/// What the default policy would refuse of every use of this template, every reason: the
/// rules of a CA whose policy sets neither `attributes.versions` nor `[templates]` (version 3
/// not accepted, `templates.max_lifetime` 30 days, unbound templates forbidden) and has no
/// `[[identity.aws]]` entry to verify a bound one. Its scopes are unknown: it has none.
fn default_problems(req: &TemplateRequest<'_>, expiry: OffsetDateTime, now: OffsetDateTime) -> Vec<TemplateProblem> {
    let templates = crate::policy::Templates::default();
    let mut out = Vec::new();
    if !crate::policy::DEFAULT_VERSIONS.contains(&3) {
        out.push(TemplateProblem::VersionOff { accepted: crate::policy::DEFAULT_VERSIONS.to_vec() });
    }
    out.extend(expiry_problem(templates.max_lifetime, expiry, now));
    if req.binding.is_empty() && !templates.allow_unbound {
        out.push(TemplateProblem::UnboundForbidden);
    }
    if !req.binding.is_empty() {
        out.push(TemplateProblem::VerifierMissing { binding: req.binding.to_string() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_largest_max_uses_is_the_policys_and_the_templates() {
        assert_eq!(super::super::args::MAX_TEMPLATE_USES, crate::policy::MAX_USES_LIMIT);
        assert_eq!(super::super::args::MAX_TEMPLATE_USES, tpl::MAX_USES);
    }

    #[test]
    fn a_binding_must_derive_names_of_the_pattern() {
        assert!(check_binding_fits_pattern("", "web-*.a.example.com").is_ok());
        assert!(check_binding_fits_pattern("aws:web-{instance-id}.a.example.com", "web-*.a.example.com").is_ok());
        assert!(check_binding_fits_pattern("aws:{instance-id}.web.a.example.com", "web-*.a.example.com").is_err());
    }
}
