//! The CA's own keys and certificates: `ca init` and `conductor new`.
#![deny(clippy::arithmetic_side_effects)]

use crate::encoding::oids;
use crate::error::Error;
use crate::issuance::keys::KeyType;
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

/// Credentials `vouch serve` keeps in the data directory (paths relative to it).
pub const SERVER_CERT: &str = "server/server_crt.pem";
pub const SERVER_KEY: &str = "server/server_key.pem";
pub const ADMIN_CERT: &str = "admin/admin_crt.pem";
pub const ADMIN_KEY: &str = "admin/admin_key.pem";
pub const CONDUCTOR_CERT: &str = "conductor/conductor_crt.pem";
pub const CONDUCTOR_KEY: &str = "conductor/conductor_key.pem";

/// Paths of a CA data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    pub dir: PathBuf,
}

impl DataDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DataDir { dir: dir.into() }
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

    /// Refuses a DIR that exists but is no directory, or that this user may not reach;
    /// a missing DIR is fine (commands that create one do).
    pub fn usable(&self) -> Result<(), Error> {
        let unusable = |detail: String| Error::DataDir { dir: self.dir.clone(), detail };
        match std::fs::metadata(&self.dir) {
            Ok(m) if !m.is_dir() => Err(unusable("it is not a directory".into())),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(unusable(format!(
                "permission denied: user {} may not reach it (a directory on its path is closed to it)",
                crate::files::trust::user_name(crate::files::trust::euid())
            ))),
            Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::NOTDIR) => {
                Err(unusable("a component of its path is not a directory".into()))
            }
            _ => Ok(()),
        }
    }

    /// Requires the CA's `name` file in `ca/` (the master CA's or the root's certificate):
    /// when it is not there, says why: DIR is not a directory, this user may not enter
    /// it (and who owns it), or there is simply no CA yet.
    pub fn require(&self, name: &str) -> Result<(), Error> {
        use std::os::unix::fs::MetadataExt;
        let file = self.file(name);
        let e = match std::fs::metadata(&file) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        self.usable()?;
        let unusable = |detail: String| Error::DataDir { dir: self.dir.clone(), detail };
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            // Which directory refused: DIR itself, else ca/.
            let closed = [self.dir.clone(), self.ca()]
                .into_iter()
                .find(|d| std::fs::read_dir(d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied))
                .unwrap_or_else(|| self.ca());
            let owner = std::fs::metadata(&closed)
                .map(|m| {
                    format!("owned by {} (mode {:04o})", crate::files::trust::user_name(m.uid()), m.mode() & 0o7777)
                })
                .unwrap_or_else(|_| "not this user's".into());
            return Err(unusable(format!(
                "permission denied: {} is {owner} and vouch runs as {}: run vouch as its owner (sudo -u OWNER vouch …)",
                closed.display(),
                crate::files::trust::user_name(crate::files::trust::euid())
            )));
        }
        if e.kind() == std::io::ErrorKind::NotFound {
            return Err(Error::NoCa { dir: self.dir.clone() });
        }
        Err(Error::Io { path: file, op: "read", source: e })
    }

    /// Refuses a data directory that a user other than root or the one running vouch
    /// could change: DIR (and the directory holding it), `ca/` and the master CA's key
    /// (owned by root or this user, not writable by group or others; the key not readable
    /// by them either). The policy is checked where it is loaded ([`crate::Policy::load`]).
    pub fn check(&self) -> Result<(), Error> {
        crate::files::trust::check_trusted(&self.dir)?;
        crate::files::trust::check_trusted(&self.ca())?;
        crate::files::trust::check_private_key(&self.file(CA_KEY))?;
        // The store's own directories: whoever may write signed/ or serials/ plants
        // certificates and records; the store creates them, so a missing one is fine.
        // Never a link either (the store refuses one at every lock too; this also covers
        // what commands read before they lock, such as clean's look-up).
        for sub in ["signed", "requests", "serials", "pending", "tmp"] {
            let p = self.ca().join(sub);
            if std::fs::symlink_metadata(&p).is_ok() {
                crate::files::durable::refuse_link(&p).map_err(|source| Error::Io {
                    path: p.clone(),
                    op: "use directory",
                    source,
                })?;
                crate::files::trust::check_trusted(&p)?;
            }
        }
        Ok(())
    }
}

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

/// Creates a data directory (and missing parents) 0700: the one rule for a new DIR,
/// whether `ca init`, `vouch serve` or anything else makes it.
pub fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        op: "create directory",
        source,
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
pub fn init(dir: &DataDir, key_type: KeyType, now: OffsetDateTime) -> Result<InitReport, Error> {
    prepare_data_dir(dir)?;
    let ca = new_ca(key_type, now)?;
    install_ca(dir, &ca)?;
    let policy = write_default_policy(dir)?;
    Ok(InitReport { root_fingerprint: fingerprint(ca.root_cert.der()), key_type, policy, ca_dir: dir.ca() })
}

/// The data directory, made ready for `ca init`: usable, without a CA or a policy, trusted, private.
fn prepare_data_dir(dir: &DataDir) -> Result<(), Error> {
    dir.usable()?;
    for existing in [dir.ca(), dir.policy()] {
        if existing.exists() {
            return Err(Error::AlreadyExists { path: existing });
        }
    }
    // An existing DIR must be this user's (or root's): its owner could swap the policy later.
    crate::files::trust::check_trusted(&dir.dir)?;
    create_private_dir(&dir.dir)
}

/// A new root CA and the master CA it signs, with their keys.
struct NewCa {
    root_key: KeyPair,
    root_cert: rcgen::Certificate,
    ca_key: KeyPair,
    ca_cert: rcgen::Certificate,
}

/// The root CA (20 years, self-signed) and the master CA (15 years, path length 0), both
/// backdated a day.
fn new_ca(key_type: KeyType, now: OffsetDateTime) -> Result<NewCa, Error> {
    let root_from = sub_time(now, Duration::days(1), "the root CA's notBefore")?;
    let root_until = add_time(now, Duration::days(365 * 20), "the root CA's 20-year validity")?;
    let master_until = add_time(now, Duration::days(365 * 15), "the master CA's 15-year validity")?;

    let root_key = key_type.generate().map_err(crypto)?;
    let mut root = CertificateParams::default();
    root.distinguished_name = name("vouch Root CA");
    root.serial_number = Some(random_serial()?);
    root.not_before = root_from;
    root.not_after = root_until;
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    root.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let root_cert = root.self_signed(&root_key).map_err(crypto)?;
    let root_issuer = Issuer::new(root, &root_key);

    let ca_key = key_type.generate().map_err(crypto)?;
    let mut master = CertificateParams::default();
    master.distinguished_name = name("vouch Master CA");
    master.serial_number = Some(random_serial()?);
    master.not_before = root_from;
    master.not_after = master_until;
    master.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    master.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    master.use_authority_key_identifier_extension = true;
    let ca_cert = master.signed_by(&ca_key, &root_issuer).map_err(crypto)?;
    Ok(NewCa { root_key, root_cert, ca_key, ca_cert })
}

/// Stages the CA's files in a temporary directory, then renames it into place as `ca/`
/// (removing the staging directory on failure).
fn install_ca(dir: &DataDir, ca: &NewCa) -> Result<(), Error> {
    let staging = crate::files::durable::temp_beside(&dir.ca());
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&staging).map_err(|source| Error::Io {
            path: staging.clone(),
            op: "create directory",
            source,
        })?;
    }
    let result = write_ca_files(&staging, ca).and_then(|()| {
        crate::files::durable::rename_noreplace(&staging, &dir.ca()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::AlreadyExists { path: dir.ca() }
            } else {
                Error::Io { path: dir.ca(), op: "rename", source: e }
            }
        })
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

/// The keys (0600), the certificates and the bundle (0644), in `staging`.
fn write_ca_files(staging: &Path, ca: &NewCa) -> Result<(), Error> {
    let files: [(&str, String, u32); 5] = [
        (ROOT_KEY, ca.root_key.serialize_pem(), 0o600),
        (CA_KEY, ca.ca_key.serialize_pem(), 0o600),
        (ROOT_CERT, ca.root_cert.pem(), 0o644),
        (CA_CERT, ca.ca_cert.pem(), 0o644),
        (CA_BUNDLE, format!("{}{}", ca.ca_cert.pem(), ca.root_cert.pem()), 0o644),
    ];
    for (file, content, mode) in files {
        let p = staging.join(file);
        crate::files::durable::write_new(&p, content.as_bytes(), mode).map_err(|source| Error::Io {
            path: p.clone(),
            op: "write",
            source,
        })?;
    }
    Ok(())
}

/// The default policy, trusting the new root, as `DIR/policy.toml` (never over an existing one).
fn write_default_policy(dir: &DataDir) -> Result<PathBuf, Error> {
    let policy_text = crate::policy::default_policy_text(&format!("ca/{ROOT_CERT}"));
    let policy = dir.policy();
    crate::files::durable::write_new(&policy, policy_text.as_bytes(), 0o644).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::AlreadyExists { path: policy.clone() }
        } else {
            Error::Io { path: policy.clone(), op: "write", source: e }
        }
    })?;
    Ok(policy)
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
    Ok(NewConductor {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        fingerprint: fingerprint(cert.der()),
        not_after,
        capped,
    })
}
