//! `conductor new`: a conductor certificate, issued by the root key in the data directory
//! and recorded in its `root_issued.txt` before it leaves.
#![deny(clippy::arithmetic_side_effects)]

use super::cert_parts::{crypto, fingerprint, load_cert_and_key, name, random_serial, sub_time, CertAndKey};
use super::data_dir::{DataDir, ROOT_CERT, ROOT_KEY};
use crate::encoding::oids;
use crate::error::Error;
use crate::issuance::keys::KeyType;
use crate::issuance::root_issued::{self, Kind};
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use time::{Duration, OffsetDateTime};

/// What `conductor new` wants.
pub struct ConductorSpec<'a> {
    pub name: &'a str,
    pub key_type: KeyType,
    /// Validity in days, at least 1; capped at the root's notAfter.
    pub days: u32,
}

/// What `conductor new` made.
#[derive(Debug)]
pub struct NewConductor {
    pub cert_pem: String,
    pub key_pem: String,
    pub fingerprint: String,
    pub not_after: OffsetDateTime,
    /// The validity asked for reached past the root's notAfter, which it now ends at.
    pub capped: bool,
}

/// Issues a conductor certificate from the root: EKU .2.0, key usage digitalSignature.
/// Returns (certificate PEM, key PEM, fingerprint).
pub fn new_conductor(
    dir: &DataDir,
    spec: &ConductorSpec<'_>,
    now: OffsetDateTime,
) -> Result<(String, String, String), Error> {
    let c = issue_conductor(dir, spec, now)?;
    Ok((c.cert_pem, c.key_pem, c.fingerprint))
}

/// [`new_conductor`] for a key that already exists (`spec.key_type` is not used): a start of
/// `vouch serve` completing a credential whose key was written before its certificate.
/// Returns (certificate PEM, fingerprint).
pub fn new_conductor_for_key(
    dir: &DataDir,
    spec: &ConductorSpec<'_>,
    key: &KeyPair,
    now: OffsetDateTime,
) -> Result<(String, String), Error> {
    let c = issue_conductor_with(dir, spec, key, now)?;
    Ok((c.cert_pem, c.fingerprint))
}

/// [`new_conductor`], with the validity it got and whether the root's notAfter capped it.
pub fn issue_conductor(dir: &DataDir, spec: &ConductorSpec<'_>, now: OffsetDateTime) -> Result<NewConductor, Error> {
    let key = spec.key_type.generate().map_err(crypto)?;
    issue_conductor_with(dir, spec, &key, now)
}

/// X.509's upper bound for a commonName (RFC 5280 ub-common-name), in characters.
pub const MAX_COMMON_NAME: usize = 64;

/// A conductor's name becomes its certificate's CN: not empty (nor only spaces), at most
/// 64 characters, no control characters.
pub fn check_conductor_name(name: &str) -> Result<(), Error> {
    let bad = |why: String| Err(Error::Usage { detail: format!("conductor name {name:?}: {why}") });
    if name.trim().is_empty() {
        return bad("it is empty; give the name its certificate's CN carries, e.g. cloud1".into());
    }
    let n = name.chars().count();
    if n > MAX_COMMON_NAME {
        return bad(format!("it has {n} characters; a certificate's CN holds at most {MAX_COMMON_NAME} (RFC 5280)"));
    }
    if name.chars().any(char::is_control) {
        return bad("it holds a control character".into());
    }
    Ok(())
}

/// The root key is in `DIR/ca/`, else [`Error::RootKeyElsewhere`]: a master CA made with
/// `ca init --root-key` never had it there, and an operator may have moved it off the host.
pub fn require_root_key(dir: &DataDir) -> Result<(), Error> {
    match std::fs::symlink_metadata(dir.file(ROOT_KEY)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::RootKeyElsewhere { dir: dir.dir.clone(), key: dir.file(ROOT_KEY) })
        }
        _ => Ok(()),
    }
}

/// [`issue_conductor`] for the key `key`: the name, the root and its key checked, the
/// validity capped at the root's notAfter, the certificate recorded in `root_issued.txt`.
fn issue_conductor_with(
    dir: &DataDir,
    spec: &ConductorSpec<'_>,
    key: &KeyPair,
    now: OffsetDateTime,
) -> Result<NewConductor, Error> {
    check_conductor_name(spec.name)?;
    dir.require(ROOT_CERT)?;
    if spec.days == 0 {
        return Err(Error::Usage {
            detail: "--days 0 would make a certificate that has already expired; give at least 1".into(),
        });
    }
    crate::files::trust::check_trusted(&dir.dir)?;
    crate::files::trust::check_trusted(&dir.ca())?;
    require_root_key(dir)?;
    crate::files::trust::check_private_key(&dir.file(ROOT_KEY))?;
    let CertAndKey { cert_der: root_der, key: root_key } =
        load_cert_and_key(&dir.file(ROOT_CERT), &dir.file(ROOT_KEY))?;
    let root_pem = crate::encoding::pem::encode("CERTIFICATE", &root_der);
    let issuer = Issuer::from_ca_cert_pem(&root_pem, &root_key).map_err(crypto)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = name(spec.name);
    p.serial_number = Some(random_serial()?);
    p.not_before = sub_time(now, Duration::minutes(5), "the conductor's notBefore")?;
    let (_, root) = x509_parser::parse_x509_certificate(&root_der)
        .map_err(|e| Error::Cert { path: dir.file(ROOT_CERT), detail: e.to_string() })?;
    let root_not_after = root.validity().not_after.to_datetime();
    if root_not_after <= now {
        return Err(Error::NotValid {
            certname: "the root CA".into(),
            detail: format!("it expired at {}", crate::encoding::time::format_rfc3339(root_not_after)),
        });
    }
    // Past the year 9999 is past the root's notAfter too: capped alike.
    let asked = now.checked_add(Duration::days(i64::from(spec.days)));
    let capped = asked.is_none_or(|t| t > root_not_after);
    p.not_after = match asked {
        Some(t) if !capped => t,
        _ => root_not_after,
    };
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::Other(oids::EKU_CONDUCTOR.to_vec())];
    p.use_authority_key_identifier_extension = true;
    let not_after = p.not_after;
    let cert = p.signed_by(key, &issuer).map_err(crypto)?;
    // Recorded before it leaves: `vouch conductor revoke --serial` knows it by this line.
    root_issued::record(&dir.ca(), cert.der(), Kind::Conductor)?;
    Ok(NewConductor {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        fingerprint: fingerprint(cert.der()),
        not_after,
        capped,
    })
}
