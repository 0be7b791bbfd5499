//! Writes a checked [`Plan`] into a staging directory laid out as `DIR/ca/`: the CA's files,
//! Puppet's CRLs and their numbers, then every certificate and revocation through the file
//! store itself (its log, its records, its inventory), so that what the import writes is
//! what vouch writes. The caller renames the staging directory into place.

use super::check::{Plan, Revoked};
use crate::error::Error;
use crate::issuance::bootstrap::{CA_BUNDLE, CA_CERT, CA_KEY, ROOT_CERT, ROOT_CRL, ROOT_KEY};
use crate::issuance::root_issued::{Issued, Kind, ROOT_ISSUED};
use crate::store::{CertRecord, FileStore, Issuance, Revocation, State, Store};
use std::path::Path;

/// What the import records of where the CA came from (`DIR/ca/puppet_import.txt`).
pub const IMPORT_NOTE: &str = "puppet_import.txt";

/// How many certificates one write of the store's log takes.
const BATCH: usize = 512;

fn write(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let p = dir.join(name);
    crate::files::durable::write_new(&p, bytes, mode).map_err(|source| Error::Io { path: p, op: "write", source })
}

/// The CA's own files in `staging`: certificates, keys (0600), the bundle, Puppet's CRLs
/// (the CA's as `ca_crl.pem`, the root's as `root_crl.pem`) and their numbers, the inventory
/// lines of certificates no longer in `signed/`, and the import's note.
pub fn write_ca_files(staging: &Path, plan: &Plan, note: &str) -> Result<(), Error> {
    let pem = |der: &[u8]| crate::encoding::pem::encode("CERTIFICATE", der);
    let (ca, root) = (pem(&plan.ca_der), pem(&plan.root_der));
    // The CA, then its root, as vouch's bundle always is (a self-signed CA twice).
    let bundle = format!("{ca}{root}");
    write(staging, ROOT_CERT, root.as_bytes(), 0o644)?;
    write(staging, CA_CERT, ca.as_bytes(), 0o644)?;
    write(staging, CA_KEY, plan.ca_key.as_bytes(), 0o600)?;
    write(staging, CA_BUNDLE, bundle.as_bytes(), 0o644)?;
    if let Some(k) = &plan.root_key {
        write(staging, ROOT_KEY, k.as_bytes(), 0o600)?;
        // The root key issued the master CA: `vouch conductor revoke --serial` must refuse it.
        let line = format!("{}\n", Issued::of(&plan.ca_der, Kind::Ca)?.line());
        write(staging, ROOT_ISSUED, line.as_bytes(), 0o640)?;
    }
    let crl_pem = |der: &[u8]| crate::encoding::pem::encode("X509 CRL", der);
    write(staging, "ca_crl.pem", crl_pem(&plan.ca_crl).as_bytes(), 0o644)?;
    write(staging, "crl_number", format!("{}\n", plan.crl_number).as_bytes(), 0o644)?;
    if let (Some((der, number)), false) = (&plan.root_crl, plan.self_signed) {
        write(staging, ROOT_CRL, crl_pem(der).as_bytes(), 0o644)?;
        write(staging, "root_crl_number", format!("{number}\n").as_bytes(), 0o644)?;
        let lines: String = plan.root_revoked.iter().map(|(s, t, r)| format!("{s} {t} {r}\n")).collect();
        write(staging, "root_revocations.txt", lines.as_bytes(), 0o640)?;
    }
    // Certificates that left signed/ (cleaned, replaced) keep their inventory lines, before
    // the store appends those of signed/.
    let current: std::collections::HashSet<&str> = plan.signed.iter().map(|s| s.serial.as_str()).collect();
    let gone: String = plan
        .inventory
        .iter()
        .filter(|l| kept(l, &current))
        .map(|l| format!("0x{} {} {} /CN={}\n", l.serial, l.not_before, l.not_after, l.certname))
        .collect();
    write(staging, "inventory.txt", gone.as_bytes(), 0o644)?;
    write_gone_records(staging, plan, &current)?;
    write(staging, IMPORT_NOTE, note.as_bytes(), 0o644)
}

/// Whether an inventory line of a certificate no longer in `signed/` is kept: one whose name
/// is a certname (the line of Puppet's own CA certificate, `/CN=Puppet CA: HOST`, is not: its
/// serial is Puppet's, below any vouch draws, see puppet-ca-migration.md).
fn kept(l: &super::check::InventoryLine, current: &std::collections::HashSet<&str>) -> bool {
    !current.contains(l.serial.as_str()) && crate::decision::check_certname(&l.certname).is_ok()
}

/// A record for each certificate of the inventory that left `signed/` (as the file store
/// keeps records: `serials/<first two digits>/<serial>.json`), so that its serial is known
/// (never reused, revocable with `vouch revoke --serial`): revoked when Puppet's CRL lists it
/// (the revocation fills in when and why), else issued.
fn write_gone_records(staging: &Path, plan: &Plan, current: &std::collections::HashSet<&str>) -> Result<(), Error> {
    let revoked: std::collections::HashSet<&str> = plan.revoked.iter().map(|r| r.serial.as_str()).collect();
    for l in plan.inventory.iter().filter(|l| kept(l, current)) {
        let state = if revoked.contains(l.serial.as_str()) { State::Revoked } else { State::Issued };
        let rec = CertRecord {
            not_before: l.not_before.clone(),
            not_after: l.not_after.clone(),
            ..CertRecord::bare(&l.serial, &l.certname, state)
        };
        let shard = staging.join("serials").join(l.serial.get(..2).unwrap_or("00"));
        crate::files::durable::create_dirs(&shard).map_err(|source| Error::Io {
            path: shard.clone(),
            op: "create directory",
            source,
        })?;
        let bytes = serde_json::to_vec(&rec).map_err(|e| Error::Store { detail: e.to_string() })?;
        // A serial listed twice by the inventory keeps its first record.
        let p = shard.join(format!("{}.json", l.serial));
        match crate::files::durable::write_new(&p, &bytes, 0o644) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            r => r.map_err(|source| Error::Io { path: p, op: "write", source })?,
        }
    }
    Ok(())
}

/// Every certificate of `signed/` stored as issued, then every revocation of Puppet's CRL,
/// through the file store in `staging`; its log checkpointed at the end.
pub fn store_certificates(staging: &Path, plan: &Plan) -> Result<(), Error> {
    let store = FileStore::new(staging);
    let lock = store.lock()?;
    let issuances: Vec<Issuance> = plan
        .signed
        .iter()
        .map(|s| Issuance {
            record: CertRecord {
                digest: s.digest.clone(),
                not_before: s.not_before.clone(),
                not_after: s.not_after.clone(),
                ..CertRecord::bare(&s.serial, &s.certname, State::Issued)
            },
            pem: s.pem.clone(),
            claim: None,
            expected: None,
            supersedes: None,
        })
        .collect();
    for batch in issuances.chunks(BATCH) {
        store.issue(&lock, batch)?;
    }
    store.checkpoint(&lock)?;
    for r in &plan.revoked {
        let rev = revocation(r);
        let rec = store.record(&r.serial)?.unwrap_or_else(|| CertRecord {
            not_after: r.not_after.clone().unwrap_or_default(),
            ..CertRecord::bare(&r.serial, &rev.certname, State::Revoked)
        });
        store.revoke(&lock, &rev, &rec, None)?;
    }
    store.checkpoint(&lock)?;
    Ok(())
}

/// A revocation of Puppet's CRL as the store records it: never `cleaned` (a certname's
/// current certificate stays where Puppet left it).
fn revocation(r: &Revoked) -> Revocation {
    Revocation {
        serial: r.serial.clone(),
        time: r.time.clone(),
        reason: r.reason.clone(),
        certname: r.certname.clone().unwrap_or_else(|| format!("unknown-0x{}", r.serial)),
        cleaned: false,
        not_after: r.not_after.clone(),
    }
}
