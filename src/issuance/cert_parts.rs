//! What the CA's own certificates (root, master CA, conductors) are made of and read with:
//! validity arithmetic that names what overflowed, random serials, a name of only a CN,
//! fingerprints, and a certificate read from files with its key.
#![deny(clippy::arithmetic_side_effects)]

use crate::error::Error;
use rcgen::{DistinguishedName, DnType, KeyPair, SerialNumber};
use std::path::Path;
use time::{Duration, OffsetDateTime};

/// `t + d`, or an error naming `what` when the result leaves the representable range.
pub fn add_time(t: OffsetDateTime, d: Duration, what: &str) -> Result<OffsetDateTime, Error> {
    t.checked_add(d).ok_or_else(|| Error::Date {
        detail: format!("{what}: {} plus {d} is past the year 9999", crate::encoding::time::format_rfc3339(t)),
    })
}

/// `t - d`, or an error naming `what` when the result leaves the representable range.
pub fn sub_time(t: OffsetDateTime, d: Duration, what: &str) -> Result<OffsetDateTime, Error> {
    t.checked_sub(d).ok_or_else(|| Error::Date {
        detail: format!("{what}: {} minus {d} is before the year 1", crate::encoding::time::format_rfc3339(t)),
    })
}

/// A random positive serial of 128 bits (at least 64 bits of entropy, RFC 5280 ≤ 20 octets).
pub fn random_serial() -> Result<SerialNumber, Error> {
    let mut b = [0u8; 16];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::Crypto { detail: "no randomness available".into() })?;
    b[0] &= 0x7f;
    b[0] |= 0x40; // keep 16 octets, positive
    Ok(SerialNumber::from_slice(&b))
}

/// A distinguished name of only the common name `cn`.
pub(super) fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// An rcgen failure, as vouch reports one.
pub(super) fn crypto(e: rcgen::Error) -> Error {
    Error::Crypto { detail: e.to_string() }
}

/// SHA-256 fingerprint as Puppet prints it: `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A certificate and its private key, as [`load_cert_and_key`] reads them.
pub struct CertAndKey {
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    pub key: KeyPair,
}

/// Loads a certificate (first PEM block) and a key from files.
pub fn load_cert_and_key(cert: &Path, key: &Path) -> Result<CertAndKey, Error> {
    let cert_bytes = crate::error::read_input(cert, crate::files::input::Kind::Cert)?;
    let der = if cert_bytes.first() == Some(&0x30) {
        cert_bytes
    } else {
        crate::encoding::pem::find(&cert_bytes, &["CERTIFICATE"])
            .map(|(_, d)| d)
            .map_err(|e| Error::Cert { path: cert.to_path_buf(), detail: e.to_string() })?
    };
    x509_parser::parse_x509_certificate(&der)
        .map_err(|e| Error::Cert { path: cert.to_path_buf(), detail: e.to_string() })?;
    let key_text = crate::files::input::read_path_text(key, crate::files::input::Kind::Key)
        .map_err(|source| Error::Io { path: key.to_path_buf(), op: "read", source })?;
    let kp =
        crate::issuance::keys::load_pem(&key_text).map_err(|detail| Error::Key { path: key.to_path_buf(), detail })?;
    Ok(CertAndKey { cert_der: der, key: kp })
}
