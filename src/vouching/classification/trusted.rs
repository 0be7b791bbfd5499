//! Signed trusted facts: the classification's `extensions` mapping, whose keys are Puppet's
//! registered extension names (`pp_role`, `pp_environment`, …, the ppRegCertExt arc
//! 1.3.6.1.4.1.34380.1.1) and whose values are strings. The certificate carries each as
//! Puppet's own extension, so `$trusted['extensions']['pp_role']` is what the conductor signed.
//!
//! Only the registered arc: the authorization arc (ppAuthCertExt, `pp_authorization`,
//! `pp_auth_role`, `pp_cli_auth`) grants rights in Puppet Server's auth.conf and is never
//! signed into a node certificate, nor is any private (ppPrivCertExt) or unnamed OID.

use super::ClassificationError;
use crate::encoding::oids;
use serde_yaml_ng::Value;

/// Puppet's registered extensions (lib/puppet/ssl/oids.rb, Puppet 7 and 8): short name and
/// last arc under 1.3.6.1.4.1.34380.1.1.
pub const REGISTERED: &[(&str, u64)] = &[
    ("pp_uuid", 1),
    ("pp_instance_id", 2),
    ("pp_image_name", 3),
    ("pp_preshared_key", 4),
    ("pp_cost_center", 5),
    ("pp_product", 6),
    ("pp_project", 7),
    ("pp_application", 8),
    ("pp_service", 9),
    ("pp_employee", 10),
    ("pp_created_by", 11),
    ("pp_environment", 12),
    ("pp_role", 13),
    ("pp_software_version", 14),
    ("pp_department", 15),
    ("pp_cluster", 16),
    ("pp_provisioner", 17),
    ("pp_region", 18),
    ("pp_datacenter", 19),
    ("pp_zone", 20),
    ("pp_network", 21),
    ("pp_securitypolicy", 22),
    ("pp_cloudplatform", 23),
    ("pp_apptier", 24),
    ("pp_hostname", 25),
    ("pp_owner", 26),
];

/// One signed trusted fact: Puppet's short name, its OID, the signed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedFact {
    pub name: &'static str,
    pub oid: Vec<u64>,
    pub value: String,
}

/// The OID of a registered name.
pub fn registered_oid(name: &str) -> Option<(&'static str, Vec<u64>)> {
    REGISTERED.iter().find(|(n, _)| *n == name).map(|(n, arc)| {
        let mut oid = oids::PP_REG.to_vec();
        oid.push(*arc);
        (*n, oid)
    })
}

/// The registered short name of `oid`, if it is one.
pub fn registered_name(oid: &[u64]) -> Option<&'static str> {
    let arc = oid.strip_prefix(oids::PP_REG)?;
    match arc {
        [last] => REGISTERED.iter().find(|(_, a)| a == last).map(|(n, _)| *n),
        _ => None,
    }
}

/// The longest value of one trusted fact (bytes): Puppet's own values (a role, an environment,
/// a UUID, an instance id) are short.
pub const MAX_FACT_BYTES: usize = 1024;

fn invalid<T>(detail: String) -> Result<T, ClassificationError> {
    Err(ClassificationError::Invalid { detail })
}

/// The trusted facts of a classification (its top-level `extensions`), in the order written;
/// none when it has no such key. Refuses a key that is not a registered name and a value
/// that is not a string (a YAML number or boolean would reach Puppet as a string it did not
/// sign: `0123`, `on`).
pub fn trusted_facts(classification: &Value) -> Result<Vec<TrustedFact>, ClassificationError> {
    let Some(ext) = classification.get("extensions") else { return Ok(Vec::new()) };
    let map = match ext {
        Value::Null => return Ok(Vec::new()),
        Value::Mapping(m) => m,
        _ => return invalid("extensions must be a mapping of Puppet registered extension names (pp_role, …)".into()),
    };
    let mut facts = Vec::with_capacity(map.len());
    for (k, v) in map {
        let Some(key) = k.as_str() else {
            return invalid(format!("extensions has the key {k:?}, which is not a string"));
        };
        let Some((name, oid)) = registered_oid(key) else {
            let shown: String = key.chars().take(64).collect();
            return invalid(format!(
                "extensions.{shown:?} is not one of Puppet's registered extensions (pp_role, pp_environment, … \
                 under 1.3.6.1.4.1.34380.1.1); authorization extensions (pp_authorization, pp_auth_role, \
                 pp_cli_auth) are never signed"
            ));
        };
        match v {
            // Each value travels three times in a node's request (the classification, its
            // extension request, the certificate): a long one makes a request `vouch serve`
            // refuses (413) after the conductor signed it.
            Value::String(value) if value.len() > MAX_FACT_BYTES => {
                return invalid(format!(
                    "extensions.{name} is {} bytes long; a trusted fact is at most {MAX_FACT_BYTES} bytes",
                    value.len()
                ))
            }
            Value::String(value) => facts.push(TrustedFact { name, oid, value: value.clone() }),
            _ => return invalid(format!("extensions.{name} must be a string (quote it)")),
        }
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(yaml: &str) -> Result<Vec<TrustedFact>, ClassificationError> {
        trusted_facts(&serde_yaml_ng::from_str(yaml).unwrap())
    }

    #[test]
    fn registered_names_become_their_oids_in_order() {
        let f = facts("extensions:\n  pp_role: web\n  pp_environment: \"prod\"\n").unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].name, f[0].value.as_str()), ("pp_role", "web"));
        assert_eq!(oids::dotted(&f[0].oid), "1.3.6.1.4.1.34380.1.1.13");
        assert_eq!(oids::dotted(&f[1].oid), "1.3.6.1.4.1.34380.1.1.12");
        assert_eq!(registered_name(&f[0].oid), Some("pp_role"));
        assert!(facts("classes: [a]\n").unwrap().is_empty());
    }

    #[test]
    fn authorization_private_unknown_and_non_string_values_are_refused() {
        let long = format!("extensions:\n  pp_role: {}\n", "x".repeat(MAX_FACT_BYTES + 1));
        assert!(facts(&long).is_err(), "a value of {} bytes", MAX_FACT_BYTES + 1);
        assert!(facts(&format!("extensions:\n  pp_role: {}\n", "x".repeat(MAX_FACT_BYTES))).is_ok());
        for bad in [
            "extensions:\n  pp_auth_role: admin\n",
            "extensions:\n  pp_authorization: x\n",
            "extensions:\n  pp_cli_auth: 'true'\n",
            "extensions:\n  pp_rolez: x\n",
            "extensions:\n  1.3.6.1.4.1.34380.1.1.13: x\n",
            "extensions:\n  pp_role: 1\n",
            "extensions:\n  pp_role: [a]\n",
            "extensions: [pp_role]\n",
        ] {
            assert!(matches!(facts(bad), Err(ClassificationError::Invalid { .. })), "{bad}");
        }
        assert_eq!(registered_name(&[1, 3, 6, 1, 4, 1, 34380, 1, 3, 13]), None);
        assert_eq!(registered_name(&[1, 3, 6, 1, 4, 1, 34380, 1, 1, 99]), None);
    }
}
