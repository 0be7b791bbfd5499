//! Per-conductor scopes: which certnames, classes, environments and parameters a
//! conductor may vouch for.

use super::{Conductor, Refusal};
use crate::policy::{Policy, Scope};
use crate::vouching::classification::Classification;
use time::OffsetDateTime;

/// Whether a scope applies to a conductor. Names are compared structurally
/// (`crate::encoding::dn`): two names that merely display alike never match.
pub(super) fn scope_applies(scope: &Scope, c: &Conductor) -> bool {
    let name = |want: &Option<crate::encoding::dn::Dn>, got: &Option<crate::encoding::dn::Dn>| match (want, got) {
        (None, _) => true,
        (Some(w), Some(g)) => w == g,
        // A certificate name vouch could not read matches no configured name.
        (Some(_), None) => false,
    };
    scope.fingerprint.as_deref().is_none_or(|f| f == c.fingerprint)
        && name(&scope.subject_dn, &c.subject_dn)
        && name(&scope.issuer_dn, &c.issuer_dn)
}

pub(super) fn check_scope(
    scope: &crate::policy::Scope,
    certname: &str,
    expiry: Option<OffsetDateTime>,
    now: OffsetDateTime,
    classification: Option<&Classification>,
    reasons: &mut Vec<Refusal>,
) {
    if let Some(patterns) = &scope.certnames {
        if !patterns.iter().any(|p| p.is_match(certname)) {
            reasons.push(Refusal::CertnameOutOfScope { scope: scope.name.clone(), certname: certname.to_string() });
        }
    }
    check_vouched(scope, expiry, now, classification, reasons);
}

/// What the scope allows of what the conductor vouched for besides the certname: the
/// attributes' lifetime and the classification's classes, environment and parameters (also
/// judged when a template is signed, `vouch conductor sign --template`).
pub(super) fn check_vouched(
    scope: &crate::policy::Scope,
    expiry: Option<OffsetDateTime>,
    now: OffsetDateTime,
    classification: Option<&Classification>,
    reasons: &mut Vec<Refusal>,
) {
    let name = scope.name.clone();
    if let (Some(max), Some(exp)) = (scope.max_lifetime, expiry) {
        if exp - now > max {
            reasons.push(Refusal::LifetimeOutOfScope {
                scope: name.clone(),
                max_lifetime: crate::policy::format_duration(max),
            });
        }
    }
    let Some(value) = classification.map(|c| &c.value) else { return };
    if let Some(allowed) = &scope.classes {
        let classes: Vec<String> = match value.get("classes") {
            Some(serde_yaml_ng::Value::Sequence(list)) => {
                list.iter().filter_map(|v| v.as_str().map(String::from)).collect()
            }
            Some(serde_yaml_ng::Value::Mapping(m)) => m.keys().filter_map(|v| v.as_str().map(String::from)).collect(),
            _ => vec![],
        };
        for class in classes {
            let bare = class.trim_start_matches("::");
            if !allowed.iter().any(|p| p.is_match(bare)) {
                reasons.push(Refusal::ClassOutOfScope { scope: name.clone(), class });
            }
        }
    }
    if let Some(allowed) = &scope.environments {
        match value.get("environment").and_then(|e| e.as_str()) {
            Some(env) if allowed.iter().any(|a| a == env) => {}
            other => reasons.push(Refusal::EnvironmentOutOfScope {
                scope: name.clone(),
                environment: other.unwrap_or("(none: the agent would choose)").to_string(),
            }),
        }
    }
    if let Some(allowed) = &scope.parameters {
        if let Some(serde_yaml_ng::Value::Mapping(params)) = value.get("parameters") {
            for k in params.keys().filter_map(|k| k.as_str()) {
                if !allowed.iter().any(|a| a == k) {
                    reasons.push(Refusal::ParameterOutOfScope { scope: name.clone(), parameter: k.to_string() });
                }
            }
        }
    }
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
