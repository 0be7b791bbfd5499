//! Object identifiers vouch knows by name.

/// Puppet's private enterprise number arc, 1.3.6.1.4.1.34380.
pub const PUPPET: &[u64] = &[1, 3, 6, 1, 4, 1, 34380];

/// EKU "allowed to create new instances" carried by conductor certificates.
pub const EKU_CONDUCTOR: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 0];
/// .2.1 signature, base64.
pub const ATTR_SIGNATURE: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 1];
/// .2.2 signature version.
pub const ATTR_VERSION: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 2];
/// .2.3 expiry, RFC 3339.
pub const ATTR_EXPIRY: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 3];
/// .2.4 the conductor's certificate.
pub const ATTR_CONDUCTOR: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 4];
/// .2.5 node classification, base64 YAML.
pub const ATTR_CLASSIFICATION: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 5];
/// .2.6 the certname the conductor vouches for (version 2).
pub const ATTR_CERTNAME: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 6];
/// .2.7 a random one-time nonce (version 2).
pub const ATTR_NONCE: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 7];
/// .2.8 a template's certname pattern (version 3).
pub const ATTR_TEMPLATE_PATTERN: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 8];
/// .2.9 at most how many certificates a template yields (version 3).
pub const ATTR_MAX_USES: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 9];
/// .2.10 a template's instance identity binding, empty for none (version 3).
pub const ATTR_IDENTITY_BINDING: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 10];
/// .2.11 the instance's identity document, supplied by the node (unsigned; version 3).
pub const ATTR_IDENTITY_DOCUMENT: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 11];
/// The arc the attributes live in.
pub const VOUCH_ARC: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2];

/// ppRegCertExt: copied into certificates by Puppet Server, visible in `$trusted`.
pub const PP_REG: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 1];
/// ppPrivCertExt: site-defined, copied and visible likewise.
pub const PP_PRIV: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 2];
/// ppAuthCertExt: grants API rights (`pp_cli_auth`, `pp_auth_role`); never requested.
pub const PP_AUTH: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 3];
/// Puppet's `pp_auth_auto_renew`: a CSR *attribute* (Puppet 8: PrintableString "true") by
/// which an agent says it renews its own certificate.
pub const PP_AUTH_AUTO_RENEW: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 3, 2];
/// Puppet's `pp_cli_auth`: the certificate may administer the CA.
pub const PP_CLI_AUTH: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 1, 3, 39];

/// PKCS#9 extensionRequest.
pub const EXTENSION_REQUEST: &[u64] = &[1, 2, 840, 113549, 1, 9, 14];
/// Microsoft's extension request attribute.
pub const MS_EXTENSION_REQUEST: &[u64] = &[1, 3, 6, 1, 4, 1, 311, 2, 1, 14];
/// X.509 subjectAltName.
pub const SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];
/// X.520 commonName.
pub const COMMON_NAME: &[u64] = &[2, 5, 4, 3];

pub const RSA_ENCRYPTION: &[u64] = &[1, 2, 840, 113549, 1, 1, 1];
pub const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
pub const ED25519: &[u64] = &[1, 3, 101, 112];
pub const SECP256R1: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
pub const SECP384R1: &[u64] = &[1, 3, 132, 0, 34];

pub const SHA256_WITH_RSA: &[u64] = &[1, 2, 840, 113549, 1, 1, 11];
pub const SHA384_WITH_RSA: &[u64] = &[1, 2, 840, 113549, 1, 1, 12];
pub const SHA512_WITH_RSA: &[u64] = &[1, 2, 840, 113549, 1, 1, 13];
pub const ECDSA_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];
pub const ECDSA_SHA384: &[u64] = &[1, 2, 840, 10045, 4, 3, 3];

/// Puppet's short names for the ppRegCertExt / ppAuthCertExt OIDs, as in
/// `puppet/ssl/oids.rb`, so that policies and attribute files can use them.
pub const PUPPET_SHORT_NAMES: &[(&str, &[u64])] = &[
    ("pp_uuid", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 1]),
    ("pp_instance_id", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 2]),
    ("pp_image_name", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 3]),
    ("pp_preshared_key", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 4]),
    ("pp_cost_center", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 5]),
    ("pp_product", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 6]),
    ("pp_project", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 7]),
    ("pp_application", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 8]),
    ("pp_service", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 9]),
    ("pp_employee", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 10]),
    ("pp_created_by", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 11]),
    ("pp_environment", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 12]),
    ("pp_role", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 13]),
    ("pp_software_version", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 14]),
    ("pp_department", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 15]),
    ("pp_cluster", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 16]),
    ("pp_provisioner", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 17]),
    ("pp_region", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 18]),
    ("pp_datacenter", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 19]),
    ("pp_zone", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 20]),
    ("pp_network", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 21]),
    ("pp_securitypolicy", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 22]),
    ("pp_cloudplatform", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 23]),
    ("pp_apptier", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 24]),
    ("pp_hostname", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 25]),
    ("pp_owner", &[1, 3, 6, 1, 4, 1, 34380, 1, 1, 26]),
    ("pp_authorization", &[1, 3, 6, 1, 4, 1, 34380, 1, 3, 1]),
    ("pp_auth_role", &[1, 3, 6, 1, 4, 1, 34380, 1, 3, 13]),
    ("pp_cli_auth", &[1, 3, 6, 1, 4, 1, 34380, 1, 3, 39]),
];

/// Whether `oid` lies strictly below `arc`.
pub fn is_under(oid: &[u64], arc: &[u64]) -> bool {
    oid.len() > arc.len() && oid.starts_with(arc)
}

/// Parses a dotted OID (`1.3.6.1...`) or a Puppet short name (`pp_uuid`).
pub fn parse(s: &str) -> Option<Vec<u64>> {
    let s = s.trim();
    if let Some((_, arcs)) = PUPPET_SHORT_NAMES.iter().find(|(n, _)| *n == s) {
        return Some(arcs.to_vec());
    }
    let arcs: Option<Vec<u64>> = s
        .split('.')
        .map(|p| {
            if p.is_empty() || (p.len() > 1 && p.starts_with('0')) || !p.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                p.parse().ok()
            }
        })
        .collect();
    let arcs = arcs?;
    // The first two arcs are encoded as one number, 40 * first + second: it must fit in a u64.
    if arcs.len() < 2 || arcs[0] > 2 || (arcs[0] < 2 && arcs[1] >= 40) || arcs[1] > u64::MAX - 80 {
        return None;
    }
    Some(arcs)
}

/// Dotted form.
pub fn dotted(arcs: &[u64]) -> String {
    crate::encoding::der::oid_to_string(arcs)
}

/// Short name if Puppet has one, else dotted form.
pub fn display(arcs: &[u64]) -> String {
    PUPPET_SHORT_NAMES
        .iter()
        .find(|(_, a)| *a == arcs)
        .map(|(n, a)| format!("{n} ({})", dotted(a)))
        .unwrap_or_else(|| dotted(arcs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_dotted() {
        assert_eq!(parse("pp_cli_auth").unwrap(), [1, 3, 6, 1, 4, 1, 34380, 1, 3, 39]);
        assert_eq!(parse("1.3.6.1.4.1.34380.2.5").unwrap(), ATTR_CLASSIFICATION);
        for bad in ["", "1", "1..2", "1.03", "3.1", "1.40", "a.b", "1.2.-3"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(is_under(&[1, 3, 6, 1, 4, 1, 34380, 1, 3, 39], PP_AUTH));
        assert!(!is_under(PP_AUTH, PP_AUTH));
    }
}
