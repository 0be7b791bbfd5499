//! Why `vouch conductor sign --template` signs nothing ([`TemplateProblem`]): one variant per
//! reason, each with its code, words and hint beside it. A template the CA's policy at hand
//! would refuse for every node is refused here, with the code the CA would give it.

use crate::decision::Refusal;
use vouch_derive::{Code, Hint, Message};

/// What is wrong with a template to sign ([`super::Error::Template`]).
#[derive(Debug, Clone, PartialEq, Eq, Code, Message, Hint)]
#[non_exhaustive]
pub enum TemplateProblem {
    /// `--template` with `--version 1` or `2`.
    #[code = "template-version"]
    #[message = "--template signs signature version 3, not {version}"]
    #[hint = "drop --version (or give --version 3): a template is always version 3"]
    Version { version: u32 },
    /// `--certname-pattern` breaks the pattern rules.
    #[code = "template-pattern-malformed"]
    #[message = "--certname-pattern {pattern:?}: {problem}"]
    #[hint = "give --certname-pattern PREFIX*.DOMAIN: one '*' at the end of the first label and a domain of at \
              least two labels, lowercase (e.g. 'web-*.asg.example.com')"]
    PatternMalformed { pattern: String, problem: String },
    /// `--max-uses 0`, or above what the policy at hand (else vouch) allows.
    #[code = "template-max-uses-invalid"]
    #[message = "--max-uses {given}: a template yields from 1 to {max} certificates ({whose})"]
    #[hint = "give --max-uses a number of certificates within that range (one per instance the group may \
              launch before the template is signed again); a larger maximum is the CA's templates.max_uses"]
    MaxUses {
        given: u64,
        max: u64,
        /// Whose maximum: the policy's `templates.max_uses`, or vouch's own.
        whose: String,
    },
    /// `--identity-binding ''`: an empty binding would sign an unbound template unasked.
    #[code = "identity-binding-empty"]
    #[message = "--identity-binding is empty"]
    #[hint = "give --identity-binding 'aws:{instance-id}.DOMAIN' to bind the template to the instance's identity, \
              or leave --identity-binding out to sign an unbound template (where the policy allows them)"]
    BindingEmpty,
    /// `--identity-binding` is not one the CA reads.
    #[code = "identity-binding-malformed"]
    #[message = "--identity-binding {binding:?}: {problem}"]
    #[hint = "give --identity-binding 'aws:{instance-id}.DOMAIN' ({instance-id} once, then the names the pattern \
              matches: for --certname-pattern 'web-*.asg.example.com', 'aws:web-{instance-id}.asg.example.com')"]
    BindingMalformed { binding: String, problem: String },
    /// The binding derives names the pattern never matches: every node would be refused.
    #[code = "identity-binding-outside-pattern"]
    #[message = "the identity binding derives names such as {example}, which the pattern {pattern} never matches: \
                 the CA would refuse every node"]
    #[hint = "give a binding whose names fit the pattern: for --certname-pattern 'web-*.asg.example.com', \
              --identity-binding 'aws:web-{instance-id}.asg.example.com'"]
    BindingOutsidePattern { example: String, pattern: String },
    /// `--dir` (or `VOUCH_DIR`) names no directory: no policy would be checked, silently.
    #[code = "template-policy-dir-missing"]
    #[message = "--dir (or VOUCH_DIR) {dir} names no directory (it does not exist, or is not one): no policy \
                 there can be checked"]
    #[hint = "give --dir the CA's data directory (its policy.toml is what the template is checked against, as \
              the CA will check every node), or, on a host that holds no CA, leave --dir and VOUCH_DIR out and \
              give VOUCH_POLICY=FILE, a copy of the CA's policy.toml"]
    PolicyDirMissing { dir: String },
    /// No CA's policy at hand (none found, or one that cannot be read): the template is
    /// checked against the default policy, which would refuse every node of it.
    #[code = "template-refused-by-default-policy"]
    #[message = "{why}, so the template was checked against the default policy (that of a CA whose \
                 policy.toml sets neither attributes.versions nor [templates]), which would refuse every node: \
                 {reasons}"]
    #[hint = "give this command the CA's policy: --dir DIR (the CA's data directory) or VOUCH_POLICY=FILE (a copy \
              of the CA's policy.toml, on a conductor host); the template is then checked against what that CA \
              allows (docs/operator-guide.md, Autoscaling groups)"]
    DefaultPolicyRefuses {
        /// Why no policy is at hand.
        why: String,
        /// Each reason, `[code] message`, joined by "; ".
        reasons: String,
    },
    /// The policy at hand does not accept signature version 3.
    #[code = "version-unsupported"]
    #[message("the policy accepts signature versions {accepted:?}, not 3 (templates)")]
    #[hint = "add 3 to attributes.versions in the CA's policy (`versions = [1, 2, 3]`): templates are off by \
              default"]
    VersionOff { accepted: Vec<u32> },
    /// The expiry lies further ahead than the policy's `templates.max_lifetime`.
    #[code = "expiry-too-far"]
    #[message = "the template expires {expiry}, further ahead than the policy's templates.max_lifetime \
                 ({max_lifetime}): the CA would refuse every node while it lies that far ahead"]
    #[hint = "sign with a shorter --expires-in (at most templates.max_lifetime), or raise templates.max_lifetime \
              in the CA's policy"]
    ExpiryTooFar { expiry: String, max_lifetime: String },
    /// Unbound, and the policy forbids unbound templates.
    #[code = "template-unbound-forbidden"]
    #[message = "the policy forbids unbound templates (templates.allow_unbound = false)"]
    #[hint = "give --identity-binding 'aws:{instance-id}.DOMAIN' (the policy's [[identity.aws]] verifies it), or \
              set templates.allow_unbound = true in the CA's policy (anyone who reads the user-data can then \
              enroll names of the pattern)"]
    UnboundForbidden,
    /// Bound, and the policy has no verifier for the instance identity.
    #[code = "identity-verifier-missing"]
    #[message = "the template is bound to the instance identity ({binding}), and the policy has no [[identity.aws]] \
                 entry to verify it: the CA would refuse every node"]
    #[hint = "add an [[identity.aws]] entry to the CA's policy (docs/operator-guide.md, \"Templates bound to the \
              instance\"), or leave --identity-binding out (where templates.allow_unbound = true)"]
    VerifierMissing { binding: String },
    /// The conductor's scope refuses what the template vouches for (its pattern, classes,
    /// environment, parameters, lifetime; or no scope applies): the CA's own reason.
    #[code(with = refusal.code())]
    #[message = "{refusal}"]
    #[hint(with = scope_hint(refusal))]
    Scope { refusal: Refusal },
}

/// [`TemplateProblem::Scope`]'s hint: what to change at signing, or in the scope.
fn scope_hint(r: &Refusal) -> &'static str {
    match r {
        Refusal::TemplatePatternOutOfScope { .. } => {
            "give a --certname-pattern within one of the scope's certnames (scope web-*.example.com: \
             web-eu-*.example.com), or widen the [[conductor]] scope's certnames in the CA's policy"
        }
        Refusal::ClassOutOfScope { .. }
        | Refusal::EnvironmentOutOfScope { .. }
        | Refusal::ParameterOutOfScope { .. } => {
            "sign a --classification that the conductor's [[conductor]] scope allows (its classes, environments \
             and parameters), or widen that scope in the CA's policy"
        }
        Refusal::LifetimeOutOfScope { .. } => {
            "sign with a shorter --expires-in (within the scope's max_lifetime), or raise it in the CA's policy"
        }
        other => other.hint(),
    }
}
