//! The root CRL through a shared store (LDAP). Where the root key is, `vouch conductor
//! revoke` (and `vouch conductor publish-crl`) publishes `DIR/ca/root_crl.pem` in the store
//! ([`crate::store::Store::publish_root_crl`]: only in place of a lower-numbered one). Every
//! master takes it from there ([`take_shared_root_crl`]: when its authority opens, and in
//! `vouch serve`'s maintenance) if it verifies as a CRL signed by this data directory's own
//! root certificate, its CRL number is higher than the local copy's and it lists every serial
//! the local copy lists (a root CRL never drops a conductor); then it is written
//! to `DIR/ca/root_crl.pem` (atomically, synced) and counts from the next decision on. One
//! that does not verify, or is not numbered higher, is left where it is: the local file
//! stays, and a warning says so once per distinct value (never less strict: a forged or an
//! older CRL could only drop revocations).

use super::crl_der::{crl_number_in, CrlNumber};
use super::own_crl::{read_root_der, MAX_ROOT_CRL};
use super::signed::signed_by_root;
use super::Authority;
use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir};
use crate::store::{Published, Store, StoreError};
use std::collections::HashSet;
use std::sync::Mutex;

/// What [`take_shared_root_crl`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The store is not shared, or this directory holds the root key (its own root CRL is
    /// the one the fleet takes): nothing read.
    NotShared,
    /// The store holds no root CRL.
    Nothing,
    /// The store's is the one here already (or numbered the same).
    Same,
    /// Written to `DIR/ca/root_crl.pem`: its CRL number.
    Taken(u128),
    /// Left in the store, the local file kept: why (warned once per distinct value).
    Refused(String),
    /// The store could not be read, or the file not written: the local file kept.
    Failed(String),
}

/// The SHA-256 of every refused value (and every failure's message) warned about: each
/// once per process, not at every maintenance run.
static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// How many values [`WARNED`] remembers: past it, it starts again empty (a value then may be
/// warned about once more), so that a store whose entry changes at every run (someone who
/// may write it) does not grow a long-running `vouch serve`'s memory without end.
const MAX_WARNED: usize = 1024;

/// Whether `key` is warned about for the first time.
pub(super) fn first_time(key: String) -> bool {
    let mut w = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    let set = w.get_or_insert_with(HashSet::new);
    if set.len() >= MAX_WARNED && !set.contains(&key) {
        set.clear();
    }
    set.insert(key)
}

/// The CRL's DER from a file's bytes (PEM or DER).
fn der_of(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    if bytes.first() == Some(&0x30) {
        return Ok(bytes);
    }
    crate::encoding::pem::find(&bytes, &["X509 CRL"]).map(|(_, d)| d).map_err(|e| e.to_string())
}

/// The CRL number of `der` if it is a CRL the root (`root`, DER) signed, as webpki and the
/// decision read it; else why not.
fn verified_number(der: &[u8], root: &[u8]) -> Result<u128, String> {
    webpki::OwnedCertRevocationList::from_der(der).map_err(|e| format!("it is not a CRL vouch can read: {e:?}"))?;
    signed_by_root(der, root).map_err(|why| format!("it {} ({why})", crate::policy::own_crl::NOT_SIGNED_BY_ROOT))?;
    match crl_number_in(der) {
        Some(CrlNumber::Fits(n)) => Ok(n),
        Some(CrlNumber::TooLarge(n)) => Err(format!("its CRL number {n} is larger than vouch counts (128 bits)")),
        _ => Err("it has no CRL number".into()),
    }
}

/// The serials (their value: no leading zero octet) `old` (a CRL's DER) lists and `new`
/// does not, as lowercase hex. A root CRL never drops a conductor (vouch keeps every root
/// revocation): one numbered higher that misses a serial the other lists is no later CRL of
/// the same revocations (a data directory restored from a backup, another copy of the
/// root's) and would undo those revocations. `Err`: either does not parse.
fn dropped_serials(old: &[u8], new: &[u8]) -> Result<Vec<String>, String> {
    let serials = |der: &[u8]| -> Result<std::collections::HashSet<Vec<u8>>, String> {
        let (_, crl) = x509_parser::parse_x509_crl(der).map_err(|e| format!("the CRL: {e}"))?;
        Ok(crl
            .iter_revoked_certificates()
            .map(|r| crate::policy::RootCrl::serial_value(r.raw_serial()).to_vec())
            .collect())
    };
    let new = serials(new)?;
    let mut dropped: Vec<String> =
        serials(old)?.into_iter().filter(|s| !new.contains(s)).map(|s| crate::encoding::hex(&s)).collect();
    dropped.sort();
    Ok(dropped)
}

/// The CRL number of the local root CRL (and its DER): `Ok(None)` when there is none, or
/// when it is a CRL of another issuer than `root` (DER; a master CA's `ca_crl.pem` copied
/// there by mistake: no root CRL, its number unrelated to the root's, and every conductor
/// refused while it is there); `Err`: it is there and does not read, or its number does not
/// (kept: deny by default; a damaged copy of a newer root CRL is never replaced by an older).
fn local_number(dir: &DataDir, root: &[u8]) -> Result<Option<(u128, Vec<u8>)>, String> {
    let path = dir.file(bootstrap::ROOT_CRL);
    let bytes = match crate::files::durable::read_regular_followed_at_most(&path, MAX_ROOT_CRL) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let der = der_of(bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if another_issuer(&der, root) {
        tracing::warn!(
            event = "root-crl-of-another-issuer",
            path = %path.display(),
            detail = "it is no CRL of this directory's root (another issuer): the store's root CRL replaces it",
        );
        return Ok(None);
    }
    match crl_number_in(&der) {
        Some(CrlNumber::Fits(n)) => Ok(Some((n, der))),
        _ => Err(format!("{} has no CRL number vouch can read", path.display())),
    }
}

/// Whether `der` reads as a CRL whose issuer is not `root`'s subject (both DER).
fn another_issuer(der: &[u8], root: &[u8]) -> bool {
    let Ok((_, root)) = x509_parser::parse_x509_certificate(root) else { return false };
    let Ok((_, crl)) = x509_parser::parse_x509_crl(der) else { return false };
    crl.issuer().as_raw() != root.subject().as_raw()
}

/// An exclusive `flock` on `DIR/ca` (the directory itself: no file of its own), held while
/// the returned file is open; `None` where it could not be taken.
fn lock_ca_dir(dir: &DataDir) -> Option<std::fs::File> {
    let ca = std::fs::File::open(dir.ca()).ok()?;
    rustix::fs::flock(&ca, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(ca)
}

fn refused(why: String, der: &[u8], dn: &str) -> Taken {
    if first_time(crate::encoding::sha256_hex(der)) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::SharedRootCrl);
        tracing::warn!(
            event = "shared-root-crl-refused",
            store = dn,
            detail = %why,
            hint = "the local root CRL stays in force: only a CRL signed by this directory's root and numbered \
                    higher replaces it; where the root key is, `vouch conductor publish-crl --store URL` publishes \
                    the genuine one again",
        );
    }
    Taken::Refused(why)
}

fn failed(why: String) -> Taken {
    if first_time(why.clone()) {
        tracing::warn!(
            event = "shared-root-crl-unread",
            detail = %why,
            hint = "the local root CRL stays in force; the next maintenance run (or command) tries again",
        );
    }
    Taken::Failed(why)
}

/// Takes the root CRL published in the shared `store` into `dir` (`DIR/ca/root_crl.pem`) if
/// it verifies with `dir`'s root certificate and is numbered higher than the local one (or
/// there is none). Never fails: what it could not do is said (a warning, once per distinct
/// value) and the local file kept. The caller reads the root CRL again after it
/// ([`Authority::refresh_own_crl`], [`super::count_own_crl`]).
pub fn take_shared_root_crl(dir: &DataDir, store: &dyn Store) -> Taken {
    // Where the root key is, the root CRL is written from its own revocations: taking another
    // there would be overwritten at its next writing anyway.
    if !store.shares_root_crl() || dir.file(bootstrap::ROOT_KEY).exists() {
        return Taken::NotShared;
    }
    let (der, root, number) = match shared_root_crl_checked(dir, store) {
        Ok(checked) => checked,
        Err(taken) => return taken,
    };
    // The local file compared and replaced in one step: two processes of this master taking
    // at once (the hook and `vouch serve`'s maintenance) could otherwise write an older CRL
    // over the newer one the other wrote meanwhile. Without the lock (a filesystem without
    // flock on a directory), taken as before.
    let _held = lock_ca_dir(dir);
    if let Some(kept) = local_kept(dir, store, &root, &der, number) {
        return kept;
    }
    write_taken(dir, store, &der, number)
}

/// The root CRL the shared `store` holds (DER), `dir`'s root certificate (DER) and the CRL's
/// number, once it verifies with that root; else what [`take_shared_root_crl`] answers.
fn shared_root_crl_checked(dir: &DataDir, store: &dyn Store) -> Result<(Vec<u8>, Vec<u8>, u128), Taken> {
    let der = match store.shared_root_crl() {
        Ok(Some(der)) => der,
        Ok(None) => return Err(Taken::Nothing),
        Err(e) => return Err(failed(format!("the root CRL in {} could not be read: {e}", store.describe()))),
    };
    let root = match read_root_der(dir) {
        Ok(r) => r,
        Err(e) => return Err(failed(format!("the shared root CRL cannot be checked: {e}"))),
    };
    let checked = if u64::try_from(der.len()).unwrap_or(u64::MAX) > MAX_ROOT_CRL {
        Err(format!("it is larger than any root CRL vouch reads ({} bytes)", der.len()))
    } else {
        verified_number(&der, &root)
    };
    let number = match checked {
        Ok(n) => n,
        Err(why) => {
            return Err(refused(format!("the root CRL in {}: {why}", store.describe()), &der, &store.describe()))
        }
    };
    Ok((der, root, number))
}

/// Whether the local root CRL stays (`Some`: what [`take_shared_root_crl`] answers): the
/// store's `der` (numbered `number`) is the same, lower, drops a conductor it revokes, or
/// the local one does not read.
fn local_kept(dir: &DataDir, store: &dyn Store, root: &[u8], der: &[u8], number: u128) -> Option<Taken> {
    match local_number(dir, root) {
        Ok(Some((local, _))) if local == number => return Some(Taken::Same),
        Ok(Some((local, _))) if local > number => {
            return Some(refused(
                format!(
                    "the root CRL in {} is numbered {number}, lower than this directory's ({local}): an older one",
                    store.describe()
                ),
                der,
                &store.describe(),
            ))
        }
        Ok(Some((local, local_der))) => match dropped_serials(&local_der, der) {
            Ok(dropped) if dropped.is_empty() => {}
            Ok(dropped) => {
                return Some(refused(
                    format!(
                        "the root CRL in {} (number {number}) does not list {} conductor(s) this directory's \
                         (number {local}) revokes (serial {}): taken, it would undo their revocation",
                        store.describe(),
                        dropped.len(),
                        dropped.join(", ")
                    ),
                    der,
                    &store.describe(),
                ))
            }
            Err(why) => {
                return Some(refused(
                    format!("the local root CRL is kept: its revocations do not read ({why})"),
                    der,
                    &store.describe(),
                ))
            }
        },
        Ok(None) => {}
        Err(why) => {
            return Some(refused(
                format!("the local root CRL is kept: {why}; the store's (number {number}) is not taken in its place"),
                der,
                &store.describe(),
            ))
        }
    }
    None
}

/// Writes the store's root CRL `der` (numbered `number`) to `DIR/ca/root_crl.pem`.
fn write_taken(dir: &DataDir, store: &dyn Store, der: &[u8], number: u128) -> Taken {
    let path = dir.file(bootstrap::ROOT_CRL);
    let pem = crate::encoding::pem::encode("X509 CRL", der);
    let dated =
        Some(super::crl_files::after_second(super::crl_files::modified_second(&path), std::time::SystemTime::now()));
    if let Err(e) = crate::files::durable::write_replace_dated(&path, pem.as_bytes(), 0o644, dated) {
        return failed(format!(
            "the root CRL from {} could not be written to {}: {e}",
            store.describe(),
            path.display()
        ));
    }
    tracing::info!(event = "shared-root-crl-taken", number = %number, path = %path.display());
    Taken::Taken(number)
}

impl Authority {
    /// [`take_shared_root_crl`] for this authority's store, then the decisions count it.
    pub fn take_shared_root_crl(&self) -> Taken {
        let taken = take_shared_root_crl(&self.dir, self.store.as_ref());
        if matches!(taken, Taken::Taken(_)) {
            self.refresh_own_crl();
        }
        taken
    }

    /// `vouch conductor publish-crl` (and `vouch conductor revoke` with a shared store):
    /// publishes `DIR/ca/root_crl.pem` in the shared store, in place of the one there only if
    /// that is numbered lower or is not this root's. Returns what the store did and the
    /// CRL's number.
    pub fn publish_root_crl(&self) -> Result<(Published, u128), Error> {
        if !self.store.shares_root_crl() {
            return Err(Error::RootCrlNotShared { store: self.store.describe() });
        }
        let path = self.dir.file(bootstrap::ROOT_CRL);
        let bytes = match crate::files::durable::read_regular_followed_at_most(&path, MAX_ROOT_CRL) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::RootCrlMissing { path }),
            Err(source) => return Err(Error::Io { path, op: "read", source }),
        };
        let der = der_of(bytes).map_err(|detail| Error::RootCrlNotPublishable { path: path.clone(), detail })?;
        let root = read_root_der(&self.dir)
            .map_err(|detail| Error::Cert { path: self.dir.file(bootstrap::ROOT_CERT), detail })?;
        let number = verified_number(&der, &root)
            .map_err(|detail| Error::RootCrlNotPublishable { path: path.clone(), detail })?;
        // The store's is replaced if it is not this root's (forged, damaged), or numbered lower
        // and listing no conductor this one does not (never undo a revocation).
        let dropped = std::cell::RefCell::new(Vec::new());
        let replaces = |old: &[u8]| {
            dropped.borrow_mut().clear();
            match verified_number(old, &root) {
                Err(_) => true,
                Ok(n) if n >= number => false,
                Ok(_) => match dropped_serials(old, &der) {
                    Ok(d) if d.is_empty() => true,
                    Ok(d) => {
                        *dropped.borrow_mut() = d;
                        false
                    }
                    // The store's is the root's (verified) but its entries do not read: kept.
                    Err(_) => false,
                },
            }
        };
        let published = self.store.publish_root_crl(&der, &replaces).map_err(|e| match e {
            StoreError::Conflict { what } => Error::StoreConflict { what },
            e => Error::from(e),
        })?;
        let dropped = dropped.into_inner();
        if published == Published::Kept && !dropped.is_empty() {
            return Err(Error::RootCrlDropsRevocations { path, store: self.store.describe(), serials: dropped });
        }
        Ok((published, number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review: whoever may write the store can put a new value in the entry at every
    /// maintenance run (every 5 s), each refused and remembered so as to be warned once:
    /// what a long-running `vouch serve` remembers stays bounded.
    #[test]
    fn the_values_warned_about_are_remembered_up_to_a_bound() {
        for i in 0..(3 * MAX_WARNED) {
            assert!(first_time(format!("review-bound-{i}")));
        }
        let held = WARNED.lock().unwrap().as_ref().map_or(0, HashSet::len);
        assert!(held <= MAX_WARNED, "{held} values remembered");
    }
}
