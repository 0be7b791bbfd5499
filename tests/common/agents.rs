//! Agents made with the library (fast): version 2 attributes from a data directory's
//! conductor, and the CSR a Puppet agent makes from them.

use std::path::Path;

/// Version 2 attributes for `certname` from the conductor `vouch serve`'s first run made in
/// `dir` (`conductor/conductor_crt.pem` and its key), classified as `classification`,
/// expiring in an hour.
pub fn vouched(dir: &Path, certname: &str, classification: &str) -> vouch::vouching::attrs::CsrAttributes {
    let cert_pem = std::fs::read(dir.join("conductor/conductor_crt.pem")).unwrap();
    let (_, cert_der) = vouch::encoding::pem::find(&cert_pem, &["CERTIFICATE"]).unwrap();
    let ckey =
        vouch::issuance::keys::load_pem(&std::fs::read_to_string(dir.join("conductor/conductor_key.pem")).unwrap())
            .unwrap();
    let class = vouch::vouching::classification::Classification::from_yaml(classification, 65536).unwrap();
    let expiry = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let a = vouch::vouching::attrs::vouch(
        &cert_der,
        &ckey,
        &class,
        expiry,
        vouch::vouching::attrs::CertEncoding::Base64Der,
        Some(certname),
    )
    .unwrap();
    vouch::vouching::attrs::CsrAttributes::from_vouched(&a, Some(vouch::policy::DEFAULT_MIRROR_OID))
}

/// A CSR as a Puppet agent makes it from those attributes, signed by `key` (PEM).
pub fn csr_for(certname: &str, attrs: &vouch::vouching::attrs::CsrAttributes, key: &rcgen::KeyPair) -> Vec<u8> {
    let spec = attrs.csr_spec(certname).unwrap();
    vouch::encoding::pem::encode("CERTIFICATE REQUEST", &vouch::encoding::csr::build(&spec, key).unwrap()).into_bytes()
}

/// A new P-256 key.
pub fn p256() -> rcgen::KeyPair {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap()
}
