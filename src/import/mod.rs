//! `vouch import --puppet-cadir DIR`: an existing Puppet 7/8 (or OpenVox) CA taken over whole,
//! so that the agents it enrolled keep their certificates, CA bundle and CRL. The Puppet CA
//! directory is read ([`read`]) and checked whole ([`check`], pure) before anything is
//! written; then a new `DIR/ca/` is staged beside where it goes ([`stage`]: the CA's files,
//! then every certificate and revocation through the file store) and renamed into place, as
//! `ca init` does: it appears whole or not at all, and an existing one is never replaced.

pub mod check;
mod read;
mod stage;

use crate::authority::Authority;
use crate::error::Error;
use crate::issuance::bootstrap::{self, create_private_dir, DataDir};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

pub use read::ExposedKey;
pub use stage::IMPORT_NOTE;

/// What an import made.
#[derive(Debug)]
pub struct ImportReport {
    pub ca_dir: PathBuf,
    pub policy: PathBuf,
    /// The CA's subject (vouch's master CA from now on).
    pub ca_subject: String,
    /// SHA-256 fingerprint of the root (the CA itself when self-signed).
    pub root_fingerprint: String,
    pub self_signed: bool,
    /// The root key came along (`root_key.pem`): conductors can be made here.
    pub root_key: bool,
    pub certificates: usize,
    pub revocations: usize,
    pub inventory_lines: usize,
    /// The certnames whose certificates carry `pp_cli_auth` (Puppet Server's own).
    pub cli_auth: Vec<String>,
    /// Pending requests left behind in Puppet's `requests/`.
    pub requests_left: usize,
    /// Puppet's next serial (hex) and its CRL's number.
    pub puppet_next_serial: String,
    pub puppet_crl_number: u128,
    /// vouch's first CRL could not be written (the import stands; `vouch crl` writes it).
    pub crl_error: Option<String>,
    /// The Puppet CA's private keys that group or others could access, or another user owned.
    pub exposed_keys: Vec<read::ExposedKey>,
    /// The staging directories stopped runs had left in the data directory: removed, or left.
    pub staging: crate::issuance::staging::Cleared,
}

/// Imports the Puppet CA directory `cadir` into the new data directory `dir`. Refuses a
/// `dir` that holds a CA or a policy, and a Puppet CA directory with any defect, before
/// anything is written.
pub fn import_puppet_cadir(dir: &DataDir, cadir: &Path, now: OffsetDateTime) -> Result<ImportReport, Error> {
    bootstrap::check_new_data_dir(dir)?;
    let files = read::read(cadir)?;
    let plan = check::plan(&files).map_err(|d| read::refuse(cadir, d))?;
    let (_, ca) = x509_parser::parse_x509_certificate(&plan.ca_der)
        .map_err(|e| Error::Cert { path: cadir.join("ca_crt.pem"), detail: e.to_string() })?;
    let ca_subject = ca.subject().to_string();
    let note = format!(
        "imported from the Puppet CA directory {} at {}\nCA: {ca_subject}\ncertificates: {}\nrevocations: {}\n\
         puppet next serial: 0x{}\npuppet CRL number: {}\n",
        cadir.display(),
        crate::encoding::time::format_rfc3339(now),
        plan.signed.len(),
        plan.revoked.len(),
        plan.next_serial,
        plan.crl_number
    );
    // Everything is checked: what a stopped import or `ca init` left beside `ca/` goes first.
    let staging = crate::issuance::staging::clear(&dir.dir);
    create_private_dir(&dir.dir)?;
    let policy = bootstrap::with_default_policy(dir, || install(dir, &plan, &note))?;
    // vouch's own CRLs, numbered above Puppet's (the CRL files' numbers say where Puppet was).
    let crl_error = Authority::open(dir).and_then(|a| a.crl(now).and_then(|_| a.maintain(now))).err();
    Ok(ImportReport {
        ca_dir: dir.ca(),
        policy,
        ca_subject,
        root_fingerprint: bootstrap::fingerprint(&plan.root_der),
        self_signed: plan.self_signed,
        root_key: plan.root_key.is_some(),
        certificates: plan.signed.len(),
        revocations: plan.revoked.len(),
        inventory_lines: plan.inventory.len(),
        cli_auth: plan.signed.iter().filter(|s| s.cli_auth).map(|s| s.certname.clone()).collect(),
        requests_left: files.requests,
        puppet_next_serial: plan.next_serial,
        puppet_crl_number: plan.crl_number,
        crl_error: crl_error.map(|e| e.to_string()),
        exposed_keys: files.exposed_keys,
        staging,
    })
}

/// Stages `DIR/ca/` beside where it goes and renames it into place (never over an existing
/// one); the staging directory is removed on failure.
fn install(dir: &DataDir, plan: &check::Plan, note: &str) -> Result<(), Error> {
    crate::issuance::bootstrap::install_staged_ca(dir, |staging| {
        stage::write_ca_files(staging, plan, note).and_then(|()| stage::store_certificates(staging, plan))
    })
}
