//! The credentials a start makes or finishes: the conductor credential to start with and the
//! administrator's (never replacing one that exists).

use super::super::ServeOptions;
use super::files::{read_key, write_new_cert, write_new_key};
use crate::authority::{Authority, LocalSpec};
use crate::error::Error;
use crate::issuance::bootstrap::{self, ConductorSpec, DataDir};
use crate::issuance::certificate::LocalRole;
use crate::store::State;
use std::path::Path;
use time::OffsetDateTime;

/// The administrator certificate's certname.
pub const ADMIN_NAME: &str = "vouch-admin";

/// How a start left a credential (a certificate and its key under DIR).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Both files were there: nothing touched.
    Found,
    /// Neither was there: a new key, then its certificate.
    Created,
    /// The key was there without its certificate (a start interrupted between the two):
    /// its certificate is written now.
    Completed,
    /// Not made, and why (one banner line).
    Missing(String),
}

/// The starting conductor credential: made when missing, finished when a start was
/// interrupted after its key (the key is written first), never replaced.
pub(super) fn conductor_credential(
    dir: &DataDir,
    cert: &Path,
    key: &Path,
    opts: &ServeOptions,
    now: OffsetDateTime,
) -> Result<Step, Error> {
    let spec = ConductorSpec { name: "conductor", key_type: opts.key_type, days: 365 };
    match (cert.exists(), key.exists()) {
        (true, true) => Ok(Step::Found),
        (true, false) => Ok(Step::Missing(format!(
            "{} has no key beside it ({} is missing): it cannot sign; remove the certificate to have a new \
             conductor credential made at the next start, or make one with 'vouch conductor new'",
            cert.display(),
            key.display()
        ))),
        (false, true) => {
            let k = read_key(key)?;
            let (pem, _) = bootstrap::new_conductor_for_key(dir, &spec, &k, now)?;
            write_new_cert(cert, &pem)?;
            Ok(Step::Completed)
        }
        (false, false) => {
            let k = opts.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
            write_new_key(key, &k)?;
            let (pem, _) = bootstrap::new_conductor_for_key(dir, &spec, &k, now)?;
            write_new_cert(cert, &pem)?;
            Ok(Step::Created)
        }
    }
}

/// The administrator credential: made when vouch-admin has no certificate; finished when a
/// start was interrupted after its key (the certificate from the store if it was issued for
/// that key, else issued now); never replaced, and never superseding a vouch-admin
/// certificate whose key is elsewhere.
pub(super) fn admin_credential(
    auth: &Authority,
    cert: &Path,
    key: &Path,
    opts: &ServeOptions,
    now: OffsetDateTime,
) -> Result<Step, Error> {
    let current = auth.certificate(ADMIN_NAME)?;
    let valid = current.as_ref().filter(|(rec, _)| {
        rec.state == State::Issued && crate::encoding::time::parse_rfc3339(&rec.not_after).ok().is_some_and(|t| t > now)
    });
    let admin = AdminCredential { auth, cert, key, key_type: opts.key_type, now, valid };
    match (cert.exists(), key.exists()) {
        (true, true) => Ok(admin.found()),
        (true, false) => Ok(Step::Missing(format!(
            "{} has no key beside it ({} is missing): remove the certificate and revoke {ADMIN_NAME} ('vouch revoke \
             --force {ADMIN_NAME}', the store's last administrator needs --force) to have a new one made at the next \
             start, or make one with 'vouch admin new NAME'",
            cert.display(),
            key.display()
        ))),
        (false, true) => admin.key_only(),
        (false, false) => admin.neither(),
    }
}

/// The administrator credential's files, and vouch-admin's current, valid certificate in
/// the store (its record and PEM), if it has one.
struct AdminCredential<'a> {
    auth: &'a Authority,
    cert: &'a Path,
    key: &'a Path,
    key_type: crate::issuance::keys::KeyType,
    now: OffsetDateTime,
    valid: Option<&'a (crate::store::CertRecord, String)>,
}

impl AdminCredential<'_> {
    fn spec(&self) -> LocalSpec<'static> {
        LocalSpec {
            certname: ADMIN_NAME,
            role: LocalRole::Admin,
            dns_names: &[],
            ip_addresses: &[],
            key_type: self.key_type,
            replace: false,
        }
    }

    /// Both files are present, but is the certificate still vouch-admin's current, valid one?
    fn found(&self) -> Step {
        let der = |pem: &[u8]| crate::encoding::pem::find(pem, &["CERTIFICATE"]).ok().map(|(_, d)| d);
        let file = std::fs::read(self.cert).ok().and_then(|p| der(&p));
        let current = self.valid.and_then(|(_, pem)| der(pem.as_bytes()));
        if file.is_some() && file == current {
            Step::Found
        } else {
            Step::Missing(format!(
                "the administrator credential {} is no longer {ADMIN_NAME}'s valid certificate (revoked, \
                 expired or replaced): it is refused (403); remove it and its key to have a new one made at \
                 the next start, or make another administrator with 'vouch admin new NAME'",
                self.cert.display()
            ))
        }
    }

    /// The key without its certificate (a start interrupted between the two): the store's
    /// certificate if it was issued for this key, else one issued now unless vouch-admin
    /// has a valid one for another key.
    fn key_only(&self) -> Result<Step, Error> {
        let k = read_key(self.key)?;
        let Some((rec, pem)) = self.valid else {
            let issued = self.auth.issue_local_for_key(&self.spec(), &k, self.now)?;
            write_new_cert(self.cert, &issued.pem)?;
            return Ok(Step::Completed);
        };
        let spki = rcgen::PublicKeyData::subject_public_key_info(&k);
        let issued_for = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).ok().and_then(|(_, der)| {
            x509_parser::parse_x509_certificate(&der).ok().map(|(_, c)| c.public_key().raw.to_vec())
        });
        if issued_for.is_some_and(|old| crate::encoding::csr::same_key(&old, &spki)) {
            write_new_cert(self.cert, pem)?;
            Ok(Step::Completed)
        } else {
            Ok(Step::Missing(format!(
                "{} has no certificate, and {ADMIN_NAME}'s current certificate (serial {}) is for \
                 another key, held elsewhere: nothing was replaced; revoke it ('vouch revoke --force \
                 {ADMIN_NAME}', the store's last administrator needs --force) to have one issued for this key \
                 at the next start, or make another administrator with 'vouch admin new NAME'",
                self.key.display(),
                rec.serial
            )))
        }
    }

    /// Neither file: a new key and certificate, unless vouch-admin has a valid certificate.
    fn neither(&self) -> Result<Step, Error> {
        // Issued before and still valid (its files moved elsewhere): never a second one
        // silently. A revoked or expired one holds nothing: a new one is made below.
        if let Some((rec, _)) = self.valid {
            // A shared store: the name is another master's administrator, not a lost one.
            if let Some(other) = rec.issuer.as_ref().filter(|i| **i != self.auth.ca_id()) {
                return Ok(Step::Missing(format!(
                    "no administrator credential in {}: {ADMIN_NAME} is the administrator of another master \
                     sharing this store (master CA {other}), and an administrator of any master of the fleet is \
                     one at every master, so none was made here; 'vouch admin new NAME' makes another",
                    self.cert.parent().unwrap_or(self.cert).display(),
                )));
            }
            return Ok(Step::Missing(format!(
                "no administrator credential in {}: {ADMIN_NAME} already has a valid certificate (serial {}, \
                 held elsewhere), so none was made; revoke it ('vouch revoke --force {ADMIN_NAME}', the store's \
                 last administrator needs --force) to have a new one made at the next start, or make another \
                 administrator with 'vouch admin new NAME'",
                self.cert.parent().unwrap_or(self.cert).display(),
                rec.serial,
            )));
        }
        let k = self.key_type.generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
        write_new_key(self.key, &k)?;
        let issued = self.auth.issue_local_for_key(&self.spec(), &k, self.now)?;
        write_new_cert(self.cert, &issued.pem)?;
        Ok(Step::Created)
    }
}
