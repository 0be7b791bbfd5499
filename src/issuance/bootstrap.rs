//! `ca init`: the CA's own keys and certificates (a new root and master CA, or a further master
//! CA under an existing root) and the default policy, in a new data directory. The data
//! directory itself (`data_dir`), `conductor new` (`conductor`) and what the CA's own
//! certificates are made of (`cert_parts`) have modules of their own, re-exported here.
#![deny(clippy::arithmetic_side_effects)]

pub use super::cert_parts::{add_time, fingerprint, load_cert_and_key, random_serial, sub_time, CertAndKey};
pub use super::conductor::{
    check_conductor_name, issue_conductor, new_conductor, new_conductor_for_key, require_root_key, ConductorSpec,
    NewConductor, MAX_COMMON_NAME,
};
pub use super::data_dir::{
    create_private_dir, DataDir, ADMIN_CERT, ADMIN_KEY, CA_BUNDLE, CA_CERT, CA_KEY, CONDUCTOR_CERT, CONDUCTOR_KEY,
    POLICY, ROOT_CERT, ROOT_CRL, ROOT_KEY, SERVER_CERT, SERVER_KEY,
};

use super::cert_parts::{crypto, name};
use crate::error::Error;
use crate::issuance::keys::KeyType;
use crate::issuance::root_issued::{self, Issued, Kind, ROOT_ISSUED};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};
use time::{Duration, OffsetDateTime};

/// What `ca init` made.
#[derive(Debug)]
pub struct InitReport {
    pub root_fingerprint: String,
    pub key_type: KeyType,
    pub policy: PathBuf,
    pub ca_dir: PathBuf,
    /// The master CA's notAfter.
    pub master_not_after: OffsetDateTime,
    /// The master CA's 15 years reached past the root's notAfter, which it now ends at.
    pub master_capped: bool,
    /// The staging directories stopped runs had left in the data directory: removed, or left.
    pub staging: super::staging::Cleared,
}

/// Creates the root CA, the master CA and the default policy. Refuses to
/// touch an existing CA. The `ca/` directory appears whole or not at all.
pub fn init(dir: &DataDir, key_type: KeyType, now: OffsetDateTime) -> Result<InitReport, Error> {
    check_new_data_dir(dir)?;
    let staging = super::staging::clear(&dir.dir);
    create_private_dir(&dir.dir)?;
    let ca = new_ca(key_type, now)?;
    let policy = with_default_policy(dir, || install_ca(dir, &ca.files))?;
    Ok(InitReport {
        root_fingerprint: fingerprint(ca.root_der.as_slice()),
        key_type,
        policy,
        ca_dir: dir.ca(),
        master_not_after: ca.master_not_after,
        master_capped: false,
        staging,
    })
}

/// An existing root CA's certificate and key files, for a further master CA under it.
#[derive(Debug, Clone, Copy)]
pub struct ExistingRoot<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

/// `ca init --root-cert --root-key`: a further master CA (a new key) under an existing root, and
/// the default policy, in a new data directory laid out as [`init`] lays one out, except that the
/// root key is only read, never written to it. Everything is checked (the directory, the root,
/// its key) before anything is created.
pub fn init_under_root(
    dir: &DataDir,
    key_type: KeyType,
    root: ExistingRoot<'_>,
    now: OffsetDateTime,
) -> Result<InitReport, Error> {
    check_new_data_dir(dir)?;
    let loaded = load_root(root, now)?;
    let ca = new_master_under(key_type, &loaded, root.cert, now)?;
    // The root key is the root's data directory's (ROOT_DIR/ca/root_key.pem beside this very
    // root certificate): the new master is recorded there, where `vouch conductor revoke`
    // runs, before it exists anywhere. A key kept elsewhere has no list to record in: there a
    // serial is unknown, which `vouch conductor revoke --serial` refuses anyway.
    if let Some(root_ca) = root_data_dir_of(root.key, &loaded.der) {
        crate::files::trust::check_trusted(&root_ca)?;
        root_issued::record(&root_ca, &ca.master_der, Kind::Ca)?;
    }
    let staging = super::staging::clear(&dir.dir);
    create_private_dir(&dir.dir)?;
    let policy = with_default_policy(dir, || install_ca(dir, &ca.files))?;
    Ok(InitReport {
        root_fingerprint: fingerprint(&loaded.der),
        key_type,
        policy,
        ca_dir: dir.ca(),
        master_not_after: ca.master_not_after,
        master_capped: ca.master_capped,
        staging,
    })
}

/// `ROOT_DIR/ca` when `key` is `ROOT_DIR/ca/root_key.pem` and `ROOT_DIR/ca/root_crt.pem` is
/// the root `root_der` (the root's own data directory); else `None`.
fn root_data_dir_of(key: &Path, root_der: &[u8]) -> Option<PathBuf> {
    let ca = root_key_ca_dir(key)?;
    let pem = crate::files::durable::read_regular_followed(&ca.join(ROOT_CERT)).ok()?;
    let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok()?;
    (der == root_der).then_some(ca)
}

/// `ROOT_DIR/ca` (absolute) when the key file `key` is named `ca/root_key.pem`, however it
/// is spelled (`root_key.pem` given from inside `ca/` is one); else `None`.
pub fn root_key_ca_dir(key: &Path) -> Option<PathBuf> {
    let key = std::path::absolute(key).ok()?;
    let ca = key.parent()?;
    (key.file_name().is_some_and(|n| n == ROOT_KEY) && ca.file_name().is_some_and(|n| n == "ca"))
        .then(|| ca.to_path_buf())
}

/// A data directory `ca init` may create a CA in: usable, without a CA or a policy (but the
/// default policy an interrupted `ca init` or import left, [`interrupted_runs_policy`]), and
/// (if it exists) trusted. Nothing is created.
pub(crate) fn check_new_data_dir(dir: &DataDir) -> Result<(), Error> {
    dir.usable()?;
    if dir.ca().exists() {
        return Err(Error::AlreadyExists { path: dir.ca() });
    }
    if dir.policy().exists() && !interrupted_runs_policy(dir) {
        return Err(Error::AlreadyExists { path: dir.policy() });
    }
    // An existing DIR must be this user's (or root's): its owner could swap the policy later.
    Ok(crate::files::trust::check_trusted(&dir.dir)?)
}

/// The policy a new CA gets, trusting its root.
fn default_policy() -> String {
    crate::policy::default_policy_text(&format!("ca/{ROOT_CERT}"))
}

/// Whether `DIR/policy.toml` is what a `ca init` or import stopped before its `ca/` appeared
/// left: the default policy byte for byte, a regular file, and no `ca/` beside it. Such a run
/// is taken up again: the policy is what it would write anyway.
fn interrupted_runs_policy(dir: &DataDir) -> bool {
    !dir.ca().exists()
        && crate::files::durable::read_regular(&dir.policy()).is_ok_and(|b| b == default_policy().as_bytes())
}

/// Writes the default policy (or keeps the one an interrupted run left), then runs `install`,
/// which makes `ca/` appear whole: the policy first, so that no moment leaves a CA without
/// one (a CA without a policy is never given a default one once it may have had another).
/// The policy this call wrote is removed again when `install` fails.
pub(crate) fn with_default_policy(
    dir: &DataDir,
    install: impl FnOnce() -> Result<(), Error>,
) -> Result<PathBuf, Error> {
    let policy = dir.policy();
    let created = match crate::files::durable::write_new(&policy, default_policy().as_bytes(), 0o644) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && interrupted_runs_policy(dir) => false,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(Error::AlreadyExists { path: policy }),
        Err(source) => return Err(Error::Io { path: policy, op: "write", source }),
    };
    if let Err(e) = install() {
        if created {
            let _ = std::fs::remove_file(&policy);
        }
        return Err(e);
    }
    Ok(policy)
}

/// The files of a new `ca/`, as PEM text.
struct CaFiles {
    /// `None` for a further master CA: the root key stays where it is.
    root_key: Option<String>,
    root_cert: String,
    ca_key: String,
    ca_cert: String,
    /// The master CA's line of `root_issued.txt` ([`super::root_issued`]).
    root_issued: String,
}

/// A new CA's files, and what `ca init` reports of it.
struct NewCa {
    files: CaFiles,
    root_der: Vec<u8>,
    /// The master CA's certificate (DER).
    master_der: Vec<u8>,
    master_not_after: OffsetDateTime,
    master_capped: bool,
}

/// The master CA's validity: 15 years (capped, under an existing root, at the root's notAfter).
const MASTER_YEARS: i64 = 15;

/// The master CA's certificate parameters (path length 0), from `not_before` to `not_after`.
fn master_params(cn: &str, not_before: OffsetDateTime, not_after: OffsetDateTime) -> Result<CertificateParams, Error> {
    let mut master = CertificateParams::default();
    master.distinguished_name = name(cn);
    master.serial_number = Some(random_serial()?);
    master.not_before = not_before;
    master.not_after = not_after;
    master.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    master.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    master.use_authority_key_identifier_extension = true;
    Ok(master)
}

/// The root CA (20 years, self-signed) and the master CA (15 years, path length 0), both
/// backdated a day.
fn new_ca(key_type: KeyType, now: OffsetDateTime) -> Result<NewCa, Error> {
    let root_from = sub_time(now, Duration::days(1), "the root CA's notBefore")?;
    let root_until = add_time(now, Duration::days(365 * 20), "the root CA's 20-year validity")?;
    let master_until = add_time(now, Duration::days(365 * MASTER_YEARS), "the master CA's 15-year validity")?;

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
    let ca_cert =
        master_params("vouch Master CA", root_from, master_until)?.signed_by(&ca_key, &root_issuer).map_err(crypto)?;
    Ok(NewCa {
        files: CaFiles {
            root_key: Some(root_key.serialize_pem()),
            root_cert: root_cert.pem(),
            ca_key: ca_key.serialize_pem(),
            ca_cert: ca_cert.pem(),
            root_issued: Issued::of(ca_cert.der(), Kind::Ca)?.line(),
        },
        root_der: root_cert.der().to_vec(),
        master_der: ca_cert.der().to_vec(),
        master_not_after: master_until,
        master_capped: false,
    })
}

/// An existing root CA, checked: its certificate (DER) and key, and its validity.
struct LoadedRoot {
    der: Vec<u8>,
    key: KeyPair,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

/// Reads an existing root CA for `ca init --root-cert --root-key`: the key through the checks
/// the CA's own keys pass (owner root or this user, no group or other access), and refused
/// unless the certificate is a self-issued CA certificate that may sign a master CA
/// (basicConstraints cA, no path length 0, keyUsage keyCertSign), valid at `now`, whose public
/// key is the key's.
fn load_root(root: ExistingRoot<'_>, now: OffsetDateTime) -> Result<LoadedRoot, Error> {
    check_not_swapped(root)?;
    crate::files::trust::check_private_key(root.key)?;
    let CertAndKey { cert_der, key } = load_cert_and_key(root.cert, root.key)?;
    let bad = |detail: String| Error::RootCa { path: root.cert.to_path_buf(), detail };
    let (_, x) = x509_parser::parse_x509_certificate(&cert_der)
        .map_err(|e| Error::Cert { path: root.cert.to_path_buf(), detail: e.to_string() })?;
    match x.basic_constraints() {
        Ok(Some(bc)) if bc.value.ca => {
            if bc.value.path_len_constraint == Some(0) {
                return Err(bad("its path length constraint is 0: it may sign no further CA (is it a master CA, \
                                ca_crt.pem, rather than the root, root_crt.pem?)"
                    .into()));
            }
        }
        Ok(_) => return Err(bad("it is not a CA certificate (its basicConstraints do not say cA=TRUE)".into())),
        Err(e) => return Err(bad(format!("its basicConstraints cannot be read: {e}"))),
    }
    match x.key_usage() {
        Ok(Some(ku)) if ku.value.key_cert_sign() => {}
        Ok(Some(_)) => return Err(bad("its keyUsage does not allow keyCertSign: it may not sign certificates".into())),
        Ok(None) => return Err(bad("it has no keyUsage extension allowing keyCertSign".into())),
        Err(e) => return Err(bad(format!("its keyUsage cannot be read: {e}"))),
    }
    if x.subject().as_raw() != x.issuer().as_raw() {
        return Err(bad(format!(
            "it is not a root: it was issued by {}, not by itself (give the certificate at the top of the chain)",
            x.issuer()
        )));
    }
    let not_before = x.validity().not_before.to_datetime();
    let not_after = x.validity().not_after.to_datetime();
    if not_after <= now {
        return Err(bad(format!("it expired at {}", crate::encoding::time::format_rfc3339(not_after))));
    }
    if not_before > now {
        return Err(bad(format!(
            "it is not valid before {} (is this machine's clock right?)",
            crate::encoding::time::format_rfc3339(not_before)
        )));
    }
    if key.public_key_raw() != x.public_key().subject_public_key.data.as_ref() {
        return Err(Error::RootKeyMismatch { cert: root.cert.to_path_buf(), key: root.key.to_path_buf() });
    }
    Ok(LoadedRoot { der: cert_der, key, not_before, not_after })
}

/// `--root-cert` and `--root-key` given the wrong way round (or either one given the other's
/// kind of file): said first, before the key file's checks would tell the operator to chmod a
/// certificate. A file that cannot be read is left to those checks.
fn check_not_swapped(root: ExistingRoot<'_>) -> Result<(), Error> {
    use crate::error::Mistake;
    use crate::files::input::Kind;
    let read = |p: &Path, kind: Kind| crate::files::durable::read_regular_followed_at_most(p, kind.limit());
    let has = |b: &[u8], label: &str| b.windows(label.len()).any(|w| w == label.as_bytes());
    let (key_block, cert_block) = ("PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----");
    let cert_is_key = read(root.cert, Kind::Cert).is_ok_and(|b| has(&b, key_block) && !has(&b, cert_block));
    let key_is_cert = read(root.key, Kind::Key).is_ok_and(|b| has(&b, cert_block) && !has(&b, key_block));
    let (cert, key) = (root.cert.to_path_buf(), root.key.to_path_buf());
    match (cert_is_key, key_is_cert) {
        (true, true) => Err(Error::Mistake(Mistake::RootFilesSwapped { cert, key })),
        (true, false) => Err(Error::Mistake(Mistake::RootCertIsKey { cert })),
        (false, true) => Err(Error::Mistake(Mistake::RootKeyIsCert { key })),
        (false, false) => Ok(()),
    }
}

/// Distinguishes a further master CA's name from every other master's: 32 random bits, in hex.
fn master_suffix() -> Result<String, Error> {
    let mut b = [0u8; 4];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::Crypto { detail: "no randomness available".into() })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A further master CA under `root` ("vouch Master CA" and a random suffix; 15 years, capped at
/// the root's notAfter; backdated a day, not before the root's notBefore). Its issuer name must
/// be the root's subject byte for byte, or the chain would not verify.
fn new_master_under(
    key_type: KeyType,
    root: &LoadedRoot,
    cert_path: &Path,
    now: OffsetDateTime,
) -> Result<NewCa, Error> {
    let from = sub_time(now, Duration::days(1), "the master CA's notBefore")?.max(root.not_before);
    let asked = now.checked_add(Duration::days(365 * MASTER_YEARS));
    let master_capped = asked.is_none_or(|t| t > root.not_after);
    let until = match asked {
        Some(t) if !master_capped => t,
        _ => root.not_after,
    };
    let issuer = Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(root.der.as_slice()), &root.key)
        .map_err(crypto)?;
    let ca_key = key_type.generate().map_err(crypto)?;
    let cn = format!("vouch Master CA {}", master_suffix()?);
    let ca_cert = master_params(&cn, from, until)?.signed_by(&ca_key, &issuer).map_err(crypto)?;
    let parse = |der: &[u8]| {
        x509_parser::parse_x509_certificate(der)
            .map(|(_, c)| (c.subject().as_raw().to_vec(), c.issuer().as_raw().to_vec()))
            .map_err(|e| Error::Cert { path: cert_path.to_path_buf(), detail: e.to_string() })
    };
    let ((root_subject, _), (_, master_issuer)) = (parse(&root.der)?, parse(ca_cert.der())?);
    if root_subject != master_issuer {
        return Err(Error::RootCa {
            path: cert_path.to_path_buf(),
            detail: "its subject name cannot be copied exactly into a new certificate's issuer name (an encoding \
                     vouch does not reproduce): a master CA under it would not chain to it"
                .into(),
        });
    }
    Ok(NewCa {
        files: CaFiles {
            root_key: None,
            root_cert: crate::encoding::pem::encode("CERTIFICATE", &root.der),
            ca_key: ca_key.serialize_pem(),
            ca_cert: ca_cert.pem(),
            root_issued: Issued::of(ca_cert.der(), Kind::Ca)?.line(),
        },
        root_der: root.der.clone(),
        master_der: ca_cert.der().to_vec(),
        master_not_after: until,
        master_capped,
    })
}

/// Stages the CA's files in a temporary directory, then renames it into place as `ca/`
/// (removing the staging directory on failure).
fn install_ca(dir: &DataDir, ca: &CaFiles) -> Result<(), Error> {
    install_staged_ca(dir, |staging| write_ca_files(staging, ca))
}

/// Makes `DIR/ca/` whole or not at all: a 0700 staging directory beside it, filled by
/// `fill`, then renamed into place (never over an existing `ca/`: [`Error::AlreadyExists`]);
/// the staging directory is removed on failure. `ca init` and `vouch import` both use it.
pub(crate) fn install_staged_ca(
    dir: &DataDir,
    fill: impl FnOnce(&std::path::Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let staging = crate::files::durable::temp_beside(&dir.ca());
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&staging).map_err(|source| Error::Io {
            path: staging.clone(),
            op: "create directory",
            source,
        })?;
    }
    let result = fill(&staging).and_then(|()| {
        crate::files::fault::crash_point("ca:staged");
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

/// The keys (0600), the certificates and the bundle (0644), in `staging`; the root key only
/// when this CA made it. `root_issued.txt` (0640) first, naming the master CA the root key
/// issued: the whole `ca/` appears at once, never the certificate without its line.
fn write_ca_files(staging: &Path, ca: &CaFiles) -> Result<(), Error> {
    let bundle = format!("{}{}", ca.ca_cert, ca.root_cert);
    let issued = format!("{}\n", ca.root_issued);
    let files: [(&str, Option<&str>, u32); 6] = [
        (ROOT_ISSUED, Some(&issued), 0o640),
        (ROOT_KEY, ca.root_key.as_deref(), 0o600),
        (CA_KEY, Some(&ca.ca_key), 0o600),
        (ROOT_CERT, Some(&ca.root_cert), 0o644),
        (CA_CERT, Some(&ca.ca_cert), 0o644),
        (CA_BUNDLE, Some(&bundle), 0o644),
    ];
    for (file, content, mode) in files {
        let Some(content) = content else { continue };
        let p = staging.join(file);
        crate::files::durable::write_new(&p, content.as_bytes(), mode).map_err(|source| Error::Io {
            path: p.clone(),
            op: "write",
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA certificate and its key, written to `dir` as NAME.pem and NAME.key (0600); signed by
    /// `issuer` (self-signed without one).
    fn write_ca(
        dir: &Path,
        name_: &str,
        key_usages: Vec<KeyUsagePurpose>,
        issuer: Option<(&rcgen::Certificate, &KeyPair)>,
    ) -> (PathBuf, PathBuf, rcgen::Certificate, KeyPair) {
        let key = KeyType::P256.generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let mut p = CertificateParams::default();
        p.distinguished_name = name(name_);
        p.not_before = sub_time(now, Duration::days(1), "test").unwrap();
        p.not_after = add_time(now, Duration::days(365), "test").unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = key_usages;
        let cert = match issuer {
            None => p.self_signed(&key).unwrap(),
            Some((c, k)) => {
                let i = Issuer::from_ca_cert_der(c.der(), k).unwrap();
                p.signed_by(&key, &i).unwrap()
            }
        };
        let (cp, kp) = (dir.join(format!("{name_}.pem")), dir.join(format!("{name_}.key")));
        crate::files::durable::write_new(&cp, cert.pem().as_bytes(), 0o644).unwrap();
        crate::files::durable::write_new(&kp, key.serialize_pem().as_bytes(), 0o600).unwrap();
        (cp, kp, cert, key)
    }

    fn refusal(cert: &Path, key: &Path) -> String {
        match load_root(ExistingRoot { cert, key }, OffsetDateTime::now_utc()) {
            Err(Error::RootCa { detail, .. }) => detail,
            Err(e) => panic!("not Error::RootCa: {e}"),
            Ok(_) => panic!("{} accepted as a root", cert.display()),
        }
    }

    #[test]
    fn a_root_must_be_self_issued_and_allowed_to_sign_certificates() {
        let t = tempfile::tempdir().unwrap();
        let sign = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let (rc, rk, root, root_key) = write_ca(t.path(), "root", sign.clone(), None);
        assert!(load_root(ExistingRoot { cert: &rc, key: &rk }, OffsetDateTime::now_utc()).is_ok());
        // An intermediate without a path length limit: a CA that may sign a CA, but no root.
        let (ic, ik, ..) = write_ca(t.path(), "inter", sign, Some((&root, &root_key)));
        assert!(refusal(&ic, &ik).contains("it is not a root"), "{}", refusal(&ic, &ik));
        let (nc, nk, ..) = write_ca(t.path(), "nokeyusage", Vec::new(), None);
        assert!(refusal(&nc, &nk).contains("no keyUsage"), "{}", refusal(&nc, &nk));
        let (cc, ck, ..) = write_ca(t.path(), "crlonly", vec![KeyUsagePurpose::CrlSign], None);
        assert!(refusal(&cc, &ck).contains("does not allow keyCertSign"), "{}", refusal(&cc, &ck));
    }
}
