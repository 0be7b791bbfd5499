//! The CA's own keys and certificates: `ca init` and `conductor new`.

use crate::error::Error;
use crate::fsutil;
use crate::keys::KeyType;
use crate::oids;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

/// File names inside `DIR/ca/`, after Puppet's cadir.
pub const ROOT_CERT: &str = "root_crt.pem";
pub const ROOT_KEY: &str = "root_key.pem";
pub const CA_CERT: &str = "ca_crt.pem";
pub const CA_KEY: &str = "ca_key.pem";
pub const CA_BUNDLE: &str = "ca_bundle.pem";
/// The root's CRL (the master CA's is `ca_crl.pem`).
pub const ROOT_CRL: &str = "root_crl.pem";
pub const POLICY: &str = "policy.toml";

/// Paths of a CA data directory.
#[derive(Debug, Clone)]
pub struct CaDir {
    pub dir: PathBuf,
}

impl CaDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CaDir { dir: dir.into() }
    }
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca")
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.ca().join(name)
    }
    pub fn policy(&self) -> PathBuf {
        self.dir.join(POLICY)
    }
}

/// A random positive serial of 128 bits (at least 64 bits of entropy, RFC 5280 ≤ 20 octets).
pub fn random_serial() -> Result<SerialNumber, Error> {
    let mut b = [0u8; 16];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::Crypto { detail: "no randomness available".into() })?;
    b[0] &= 0x7f;
    b[0] |= 0x40; // keep 16 octets, positive
    Ok(SerialNumber::from_slice(&b))
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

fn crypto(e: rcgen::Error) -> Error {
    Error::Crypto { detail: e.to_string() }
}

/// What `ca init` made.
#[derive(Debug)]
pub struct InitReport {
    pub root_fingerprint: String,
    pub key_type: KeyType,
    pub policy: PathBuf,
    pub ca_dir: PathBuf,
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

/// Creates the root CA, the master CA and the default policy. Refuses to
/// touch an existing CA. The `ca/` directory appears whole or not at all.
pub fn init(dir: &CaDir, key_type: KeyType, now: OffsetDateTime) -> Result<InitReport, Error> {
    let io = |path: &Path, op: &'static str| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, op, source }
    };
    for existing in [dir.ca(), dir.policy()] {
        if existing.exists() {
            return Err(Error::AlreadyExists { path: existing });
        }
    }
    std::fs::create_dir_all(&dir.dir).map_err(io(&dir.dir, "create directory"))?;

    let root_key = key_type.generate().map_err(crypto)?;
    let mut root = CertificateParams::default();
    root.distinguished_name = name("vouch Root CA");
    root.serial_number = Some(random_serial()?);
    root.not_before = now - Duration::days(1);
    root.not_after = now + Duration::days(365 * 20);
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    root.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let root_cert = root.self_signed(&root_key).map_err(crypto)?;
    let root_issuer = Issuer::new(root, &root_key);

    let ca_key = key_type.generate().map_err(crypto)?;
    let mut master = CertificateParams::default();
    master.distinguished_name = name("vouch Master CA");
    master.serial_number = Some(random_serial()?);
    master.not_before = now - Duration::days(1);
    master.not_after = now + Duration::days(365 * 15);
    master.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    master.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    master.use_authority_key_identifier_extension = true;
    let ca_cert = master.signed_by(&ca_key, &root_issuer).map_err(crypto)?;

    // Stage everything in a temporary directory, then rename it into place.
    let staging = fsutil::temp_beside(&dir.ca());
    std::fs::create_dir(&staging).map_err(io(&staging, "create directory"))?;
    let result = (|| {
        let files: [(&str, String, u32); 5] = [
            (ROOT_KEY, root_key.serialize_pem(), 0o600),
            (CA_KEY, ca_key.serialize_pem(), 0o600),
            (ROOT_CERT, root_cert.pem(), 0o644),
            (CA_CERT, ca_cert.pem(), 0o644),
            (CA_BUNDLE, format!("{}{}", ca_cert.pem(), root_cert.pem()), 0o644),
        ];
        for (file, content, mode) in files {
            let p = staging.join(file);
            fsutil::write_new(&p, content.as_bytes(), mode).map_err(io(&p, "write"))?;
        }
        fsutil::rename_noreplace(&staging, &dir.ca()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::AlreadyExists { path: dir.ca() }
            } else {
                Error::Io { path: dir.ca(), op: "rename", source: e }
            }
        })
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let policy_text = crate::policy::default_policy_text(&format!("ca/{ROOT_CERT}"));
    let policy = dir.policy();
    fsutil::write_new(&policy, policy_text.as_bytes(), 0o644).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::AlreadyExists { path: policy.clone() }
        } else {
            Error::Io { path: policy.clone(), op: "write", source: e }
        }
    })?;
    Ok(InitReport { root_fingerprint: fingerprint(root_cert.der()), key_type, policy, ca_dir: dir.ca() })
}

/// Loads a certificate (first PEM block) and a key from files.
pub fn load_cert_and_key(cert: &Path, key: &Path) -> Result<(Vec<u8>, KeyPair), Error> {
    let cert_bytes =
        std::fs::read(cert).map_err(|source| Error::Io { path: cert.to_path_buf(), op: "read", source })?;
    let der = if cert_bytes.first() == Some(&0x30) {
        cert_bytes
    } else {
        crate::pem::find(&cert_bytes, &["CERTIFICATE"])
            .map(|(_, d)| d)
            .map_err(|e| Error::Cert { path: cert.to_path_buf(), detail: e.to_string() })?
    };
    x509_parser::parse_x509_certificate(&der)
        .map_err(|e| Error::Cert { path: cert.to_path_buf(), detail: e.to_string() })?;
    let key_text =
        std::fs::read_to_string(key).map_err(|source| Error::Io { path: key.to_path_buf(), op: "read", source })?;
    let kp = crate::keys::load_pem(&key_text).map_err(|detail| Error::Key { path: key.to_path_buf(), detail })?;
    Ok((der, kp))
}

/// What `conductor new` wants.
pub struct ConductorSpec<'a> {
    pub name: &'a str,
    pub key_type: KeyType,
    pub days: u32,
}

/// Issues a conductor certificate from the root: EKU .2.0, key usage digitalSignature.
/// Returns (certificate PEM, key PEM, fingerprint).
pub fn new_conductor(
    dir: &CaDir,
    spec: &ConductorSpec<'_>,
    now: OffsetDateTime,
) -> Result<(String, String, String), Error> {
    let key = spec.key_type.generate().map_err(crypto)?;
    let (cert, fingerprint) = new_conductor_for_key(dir, spec, &key, now)?;
    Ok((cert, key.serialize_pem(), fingerprint))
}

/// [`new_conductor`] for a key that already exists (`spec.key_type` is not used).
/// Returns (certificate PEM, fingerprint).
pub fn new_conductor_for_key(
    dir: &CaDir,
    spec: &ConductorSpec<'_>,
    key: &KeyPair,
    now: OffsetDateTime,
) -> Result<(String, String), Error> {
    if !dir.file(ROOT_CERT).exists() {
        return Err(Error::NoCa { dir: dir.dir.clone() });
    }
    let (root_der, root_key) = load_cert_and_key(&dir.file(ROOT_CERT), &dir.file(ROOT_KEY))?;
    let root_pem = crate::pem::encode("CERTIFICATE", &root_der);
    let issuer = Issuer::from_ca_cert_pem(&root_pem, &root_key).map_err(crypto)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = name(spec.name);
    p.serial_number = Some(random_serial()?);
    p.not_before = now - Duration::minutes(5);
    p.not_after = now + Duration::days(i64::from(spec.days));
    let (_, root) = x509_parser::parse_x509_certificate(&root_der)
        .map_err(|e| Error::Cert { path: dir.file(ROOT_CERT), detail: e.to_string() })?;
    let root_not_after = root.validity().not_after.to_datetime();
    if p.not_after > root_not_after {
        p.not_after = root_not_after;
    }
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::Other(oids::EKU_CONDUCTOR.to_vec())];
    p.use_authority_key_identifier_extension = true;
    let cert = p.signed_by(key, &issuer).map_err(crypto)?;
    Ok((cert.pem(), fingerprint(cert.der())))
}
