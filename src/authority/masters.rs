//! One fleet, any master: the master CAs that share a store (LDAP) under one root, their
//! CRLs, and what every master serves of them.
//!
//! - **The master CAs**: every master registers its CA in the store (`ou=cas`). A master
//!   counts a CA found there only if this directory's root signed it and it is a CA
//!   ([`fleet_masters`]); anything else is left out and warned about (`foreign-master-ca`,
//!   once per value). The ones counted are this master's *siblings*: intermediates for
//!   verifying a node or an administrator of any master (TLS, renewal, `vouch enc`), never
//!   trust anchors.
//! - **The CA bundle** (`DIR/ca/fleet_bundle.pem`): every master CA of the fleet in the order
//!   of their ids, then the root, each PEM as vouch writes it. Every master writes the same
//!   bytes from the same store, and serves them at `GET certificate/ca`.
//! - **The CRLs**: each master publishes its own CRL in the store whenever it writes one
//!   ([`Authority::publish_own_crl`]); every master takes its siblings' into
//!   `DIR/ca/fleet_crls.pem` (in the order of their ids) when one verifies with that master
//!   CA's key and is numbered higher than the one held, and serves them after its own and
//!   the root's at `GET certificate_revocation_list/ca`.
//! - **A CRL that lapses** (a master lost, its CRL no longer re-signed) is warned about by
//!   every master once within the policy's `crl.refresh_before` of its nextUpdate
//!   (`master-crl-due`), and counted (`vouch_master_crls_due`).
//!
//! [`Authority::refresh_fleet`] does all of it: in `vouch serve`'s start and maintenance
//! (every 5 s), and in `vouch crl --fetch`'s local form.

use super::crl_der::{crl_number_in, CrlNumber};
use super::documents::{file_id, FileId};
use super::own_crl::read_root_der;
use super::root_crl_share::first_time;
use super::signed::signed_by_root;
use super::Authority;
use crate::issuance::bootstrap::{self, DataDir};
use crate::policy::RootCrl;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use time::OffsetDateTime;

/// The fleet's CA bundle, under `DIR/ca`.
pub const FLEET_BUNDLE: &str = "fleet_bundle.pem";
/// The other masters' CRLs, under `DIR/ca`.
pub const FLEET_CRLS: &str = "fleet_crls.pem";
/// The largest master CRL taken from the store (100,000 revocations are about 6.6 MB).
pub const MAX_MASTER_CRL: usize = 64 << 20;

/// The other master CAs of the fleet (DER), as last read from the store and checked: shared
/// by the authority (verification) and the TLS layer (client certificates).
#[derive(Debug, Default)]
pub struct Siblings {
    cas: RwLock<Arc<Vec<Vec<u8>>>>,
    /// The revision of each other master's CRL entry when it was last read (by master CA
    /// id): an unchanged entry is not read again (a large fleet's CRLs are megabytes).
    read_revisions: Mutex<HashMap<String, u64>>,
    /// This master's CRL file as last published, and the store entry's revision then.
    published: Mutex<Option<(Option<FileId>, u64)>>,
    /// Maintenance runs so far: every [`FULL_READ_EVERY`]th reads every entry whole, whatever
    /// its revision says (someone who may write the store can set a revision back).
    runs: std::sync::atomic::AtomicU64,
    /// The names each other master's service carried when last read (by master CA id): kept
    /// while its entry is missing (removed from the store), as long as that master counts.
    pub(super) names: Mutex<HashMap<String, Vec<String>>>,
}

/// Every this many maintenance runs (5 s each: a minute), the store's CRL entries are read
/// whole and this master's compared, whatever their revisions say.
const FULL_READ_EVERY: u64 = 12;

/// The highest CRL number taken of each other master CA (`DIR/ca/fleet_crl_numbers`, one
/// `ID NUMBER` a line): never lowered, kept when a master CA leaves the store for a while,
/// so that no CRL numbered lower is taken when it comes back.
pub const FLEET_CRL_NUMBERS: &str = "fleet_crl_numbers";

impl Siblings {
    /// The master CAs known now (a cheap copy of a pointer).
    pub fn get(&self) -> Arc<Vec<Vec<u8>>> {
        self.cas.read().map(|c| c.clone()).unwrap_or_default()
    }

    pub(crate) fn set(&self, cas: Vec<Vec<u8>>) {
        if let Ok(mut c) = self.cas.write() {
            *c = Arc::new(cas);
        }
    }
}

/// A master CA found in the store and not counted: its subject and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    pub subject: String,
    pub why: String,
}

/// The master CAs of `found` (the store's, DER) that are this fleet's: signed by `root` (DER),
/// CAs, and not revoked by the root (`root_crl`: the root CRL and recorded root revocations
/// this directory counts), other than `own`, in the order of their ids, each once; and the
/// others with why.
pub fn fleet_masters(
    root: &[u8],
    own: &[u8],
    found: Vec<Vec<u8>>,
    root_crl: Option<&RootCrl>,
) -> (Vec<Vec<u8>>, Vec<Foreign>) {
    let mut ours = BTreeMap::new();
    let mut foreign = Vec::new();
    for der in found {
        if der == own {
            continue;
        }
        match master_of(&der, root).and_then(|()| not_revoked(&der, root_crl)) {
            Ok(()) => {
                ours.insert(crate::store::ca_id(&der), der);
            }
            Err(why) => foreign.push(Foreign { subject: subject_of(&der), why }),
        }
    }
    (ours.into_values().collect(), foreign)
}

/// Whether `der` is a CA certificate `root` signed.
fn master_of(der: &[u8], root: &[u8]) -> Result<(), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("not a certificate: {e}"))?;
    let is_ca = matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
    if !is_ca {
        return Err("it is no CA certificate (basicConstraints without cA)".into());
    }
    super::signed::signed_by_one_of(der, &[root.to_vec()])
        .map_err(|e| format!("this fleet's root did not sign it ({e})"))
}

/// Whether the root revoked the master CA `der` (its serial on the root CRL, or recorded as
/// a root revocation where the root key is): a master CA revoked is no master of the fleet.
fn not_revoked(der: &[u8], root_crl: Option<&RootCrl>) -> Result<(), String> {
    let Some(crl) = root_crl else { return Ok(()) };
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("not a certificate: {e}"))?;
    let raw = cert.raw_serial();
    let listed = crl.recorded.contains(RootCrl::serial_value(raw))
        || crl.crl.as_ref().is_some_and(|c| matches!(c.find_serial(raw), Ok(Some(_))));
    match listed {
        true => Err(format!("the root revoked it (serial {})", crate::encoding::hex(raw))),
        false => Ok(()),
    }
}

fn subject_of(der: &[u8]) -> String {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| c.subject().to_string())
        .unwrap_or_else(|_| "(not a certificate)".into())
}

/// The fleet's CA bundle: every master CA (`own` and `siblings`) in the order of their ids,
/// then the root.
pub fn bundle_text(root: &[u8], own: &[u8], siblings: &[Vec<u8>]) -> String {
    let mut masters: BTreeMap<String, &[u8]> =
        siblings.iter().map(|d| (crate::store::ca_id(d), d.as_slice())).collect();
    masters.insert(crate::store::ca_id(own), own);
    let mut out = String::new();
    for der in masters.values() {
        out.push_str(&crate::encoding::pem::encode("CERTIFICATE", der));
    }
    out.push_str(&crate::encoding::pem::encode("CERTIFICATE", root));
    out
}

/// The CRL number of `der` if it is a CRL the master CA `ca` (DER) signed; else why not.
pub fn master_crl_number(der: &[u8], ca: &[u8]) -> Result<u128, String> {
    if der.len() > MAX_MASTER_CRL {
        return Err(format!("it is larger than any master CRL vouch reads ({} bytes)", der.len()));
    }
    webpki::OwnedCertRevocationList::from_der(der).map_err(|e| format!("it is not a CRL vouch can read: {e:?}"))?;
    signed_by_root(der, ca).map_err(|why| format!("that master CA did not sign it ({why})"))?;
    match crl_number_in(der) {
        Some(CrlNumber::Fits(n)) => Ok(n),
        Some(CrlNumber::TooLarge(n)) => Err(format!("its CRL number {n} is larger than vouch counts (128 bits)")),
        _ => Err("it has no CRL number".into()),
    }
}

/// A CRL's nextUpdate.
fn next_update(der: &[u8]) -> Option<OffsetDateTime> {
    let (_, crl) = x509_parser::parse_x509_crl(der).ok()?;
    crl.next_update().map(|t| t.to_datetime())
}

/// [`FLEET_CRL_NUMBERS`] as it reads (a line that does not read is left out).
fn read_numbers(dir: &DataDir) -> BTreeMap<String, u128> {
    let text = std::fs::read_to_string(dir.file(FLEET_CRL_NUMBERS)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (id, n) = l.split_once(' ')?;
            Some((id.to_string(), n.trim().parse::<u128>().ok()?))
        })
        .collect()
}

/// The sibling CRLs this master holds (`DIR/ca/fleet_crls.pem`): by master CA id, each with
/// its number; one that no sibling signed is left out.
fn held_crls(dir: &DataDir, siblings: &[Vec<u8>]) -> BTreeMap<String, (u128, Vec<u8>)> {
    let mut held = BTreeMap::new();
    let Ok(text) = crate::files::durable::read_regular_followed(&dir.file(FLEET_CRLS)) else { return held };
    for der in crate::encoding::pem::find_all(&text, "X509 CRL").unwrap_or_default() {
        for ca in siblings {
            if let Ok(n) = master_crl_number(&der, ca) {
                let id = crate::store::ca_id(ca);
                if held.get(&id).is_none_or(|(m, _)| *m < n) {
                    held.insert(id, (n, der.clone()));
                }
                break;
            }
        }
    }
    held
}

/// What [`Authority::refresh_fleet`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fleet {
    /// The other master CAs counted.
    pub siblings: usize,
    /// Master CAs in the store that are not this fleet's.
    pub foreign: Vec<Foreign>,
    /// Sibling CRLs taken from the store in this run (their master CA ids).
    pub taken: Vec<String>,
    /// Sibling master CAs (ids) whose CRL is missing here or within `refresh_before` of its
    /// nextUpdate (or past it) with no newer one in the store.
    pub due: Vec<String>,
    /// Whether the bundle file changed.
    pub bundle_changed: bool,
    /// How many names the other masters' services carry (reserved here).
    pub reserved_names: usize,
}

/// The seconds each sibling CRL held has left until its nextUpdate, by master CA id, as the
/// last [`Authority::refresh_fleet`] saw them (`vouch_master_crl_seconds_left`).
pub static CRL_SECONDS_LEFT: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());

fn warn_foreign(f: &Foreign) {
    if first_time(format!("foreign-master-ca {} {}", f.subject, f.why)) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Fleet);
        tracing::warn!(
            event = "foreign-master-ca",
            subject = %f.subject,
            detail = %f.why,
            hint = "left out: only a CA this fleet's root signed is a master of the fleet; remove the entry from the \
                    store's ou=cas if it is not one",
        );
    }
}

fn warn_refused_crl(id: &str, why: &str, der: &[u8]) {
    if first_time(format!("master-crl-refused {}", crate::encoding::sha256_hex(der))) {
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Fleet);
        tracing::warn!(
            event = "master-crl-refused",
            ca = id,
            detail = why,
            hint = "the CRL held here for that master stays in force: only a CRL signed by that master CA and \
                    numbered higher replaces it",
        );
    }
}

impl Authority {
    /// Reads the fleet from the shared store: its master CAs (the siblings counted from now
    /// on, and `DIR/ca/fleet_bundle.pem`), this master's CRL published again where the store's
    /// is older, and the siblings' CRLs taken into `DIR/ca/fleet_crls.pem`. The file store:
    /// nothing. A store that cannot be read leaves what is held (an error, for the log).
    pub fn refresh_fleet(&self, now: OffsetDateTime) -> Result<Fleet, crate::error::Error> {
        let mut out = Fleet::default();
        if !self.store.shares_root_crl() {
            return Ok(out);
        }
        let root = read_root_der(&self.dir)
            .map_err(|detail| crate::error::Error::Cert { path: self.dir.file(bootstrap::ROOT_CERT), detail })?;
        let root_crl = self.policy.trust.own_crl.get();
        let found = self.store.issuers()?;
        if !found.contains(&self.ca.cert_der) {
            self.register_again();
        }
        let (siblings, foreign) = fleet_masters(&root, &self.ca.cert_der, found, root_crl.as_deref());
        foreign.iter().for_each(warn_foreign);
        out.foreign = foreign;
        out.siblings = siblings.len();
        self.fleet.set(siblings.clone());
        out.bundle_changed = self.write_if_changed(FLEET_BUNDLE, bundle_text(&root, &self.ca.cert_der, &siblings))?;
        if out.bundle_changed {
            tracing::info!(
                event = "fleet-bundle",
                masters = siblings.len() + 1,
                fingerprint = %crate::encoding::sha256_hex(bundle_text(&root, &self.ca.cert_der, &siblings).as_bytes()),
                detail = "the CA bundle served now names every master CA of the fleet",
            );
        }
        self.publish_own_crl_if_changed()?;
        self.take_sibling_crls(&siblings, now, &mut out)?;
        out.reserved_names = self.refresh_fleet_names(&siblings, now, true)?;
        Ok(out)
    }

    /// The fleet's CA bundle as the store says now, read without writing anything (the file
    /// store: this master's own chain).
    pub fn fleet_bundle_now(&self) -> Result<String, crate::error::Error> {
        if !self.store.shares_root_crl() {
            return Ok(self.chain_pem().to_string());
        }
        self.read_fleet_names()?;
        let root = read_root_der(&self.dir)
            .map_err(|detail| crate::error::Error::Cert { path: self.dir.file(bootstrap::ROOT_CERT), detail })?;
        Ok(bundle_text(&root, &self.ca.cert_der, &self.fleet.get()))
    }

    /// This master's CA entry is gone from the store while it runs (removed by hand, as if to
    /// retire it): registered again, and said, since it still issues and its certificates
    /// need their CA in the store (a master is retired once stopped: docs/ldap.md).
    fn register_again(&self) {
        let pem = crate::encoding::pem::encode("CERTIFICATE", &self.ca.cert_der);
        let result = self.store.register_ca(&pem);
        crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Fleet);
        tracing::warn!(
            event = "master-ca-registered-again",
            ca = %self.ca_id(),
            registered = result.as_ref().is_ok_and(|added| *added),
            error = result.err().map(|e| e.to_string()),
            detail = "this master's CA was gone from the store's ou=cas while it runs: registered again",
            hint = "to retire a master, stop it first, then remove its entries (docs/ldap.md, 'A master lost for good')",
        );
    }

    /// Takes each sibling's CRL from the store where it is newer than the one held, and says
    /// which are due.
    fn take_sibling_crls(
        &self,
        siblings: &[Vec<u8>],
        now: OffsetDateTime,
        out: &mut Fleet,
    ) -> Result<(), crate::error::Error> {
        let mut held = held_crls(&self.dir, siblings);
        let mut highest = read_numbers(&self.dir);
        let whole = self.full_read_due();
        for ca in siblings {
            let id = crate::store::ca_id(ca);
            // Read again only when the entry changed since (or nothing is held for it).
            let revision = self.store.master_crl_revision(&id)?;
            let seen = self.fleet.read_revisions.lock().ok().and_then(|r| r.get(&id).copied());
            if !whole && revision.is_some() && revision == seen && held.contains_key(&id) {
                continue;
            }
            let Some(der) = self.store.master_crl(&id)? else { continue };
            if let (Some(rev), Ok(mut r)) = (revision, self.fleet.read_revisions.lock()) {
                r.insert(id.clone(), rev);
            }
            // Higher than the one held, and never lower than the highest taken before (the same
            // CRL again is taken back once dropped: a master CA that left `ou=cas` for a while).
            let floor = highest.get(&id).copied().unwrap_or(0);
            let newer = |n: u128| held.get(&id).is_none_or(|(m, _)| *m < n);
            match master_crl_number(&der, ca) {
                Ok(n) if newer(n) && n >= floor => {
                    out.taken.push(id.clone());
                    highest.insert(id.clone(), n);
                    held.insert(id, (n, der));
                }
                Ok(n) if newer(n) => warn_refused_crl(
                    &id,
                    &format!("the CRL in the store for master CA {id} is numbered {n}, lower than one taken before ({floor})"),
                    &der,
                ),
                Ok(_) => {}
                Err(why) => warn_refused_crl(&id, &format!("the CRL in the store for master CA {id}: {why}"), &der),
            }
        }
        let text: String = held.values().map(|(_, der)| crate::encoding::pem::encode("X509 CRL", der)).collect();
        if !text.is_empty() || self.dir.file(FLEET_CRLS).exists() {
            self.write_if_changed(FLEET_CRLS, text)?;
        }
        if !out.taken.is_empty() {
            let lines: String = highest.iter().map(|(id, n)| format!("{id} {n}\n")).collect();
            self.write_if_changed(FLEET_CRL_NUMBERS, lines)?;
        }
        for id in &out.taken {
            tracing::info!(event = "master-crl-taken", ca = %id, number = held.get(id).map_or(0, |(n, _)| *n));
        }
        self.say_due(siblings, &held, now, out);
        Ok(())
    }

    /// Warns once per CRL about each sibling whose CRL is missing or near its nextUpdate.
    fn say_due(
        &self,
        siblings: &[Vec<u8>],
        held: &BTreeMap<String, (u128, Vec<u8>)>,
        now: OffsetDateTime,
        out: &mut Fleet,
    ) {
        let refresh = time::Duration::try_from(self.policy.crl_refresh_before).unwrap_or(time::Duration::days(10));
        let mut left = Vec::new();
        for ca in siblings {
            let id = crate::store::ca_id(ca);
            let (number, next) = match held.get(&id) {
                Some((n, der)) => (Some(*n), next_update(der)),
                None => (None, None),
            };
            if let Some(t) = next {
                left.push((id.clone(), (t - now).whole_seconds()));
            }
            if next.is_some_and(|t| t - now >= refresh) {
                continue;
            }
            out.due.push(id.clone());
            if first_time(format!("master-crl-due {id} {number:?}")) {
                tracing::warn!(
                    event = "master-crl-due",
                    ca = %id,
                    subject = %subject_of(ca),
                    next_update = %next.map(crate::encoding::time::format_rfc3339).unwrap_or_else(|| "none held".into()),
                    detail = "no newer CRL of this master CA is in the store: is that master running?",
                    hint = "docs/ldap.md, 'A master lost for good': restore its key on another host, or retire it",
                );
            }
        }
        crate::obs::metrics::METRICS.fleet_crls_due(out.due.len());
        if let Ok(mut l) = CRL_SECONDS_LEFT.lock() {
            *l = left;
        }
    }

    /// Writes `text` to `DIR/ca/NAME` (atomically, synced, 0644) unless it holds it already:
    /// whether it was written.
    fn write_if_changed(&self, name: &str, text: String) -> Result<bool, crate::error::Error> {
        let path = self.dir.file(name);
        if std::fs::read(&path).is_ok_and(|b| b == text.as_bytes()) {
            return Ok(false);
        }
        crate::files::durable::write_replace(&path, text.as_bytes(), 0o644)
            .map_err(|source| crate::error::Error::Io { path, op: "write", source })?;
        Ok(true)
    }

    /// Whether this maintenance run reads every entry whole ([`FULL_READ_EVERY`]): counted
    /// once a run, from [`Authority::publish_own_crl_if_changed`]'s call.
    fn full_read_due(&self) -> bool {
        self.fleet.runs.load(std::sync::atomic::Ordering::Relaxed) % FULL_READ_EVERY == 1
    }

    /// [`Authority::publish_own_crl`] unless the CRL file and the store's entry are both as
    /// they were when it was last published from here (the usual maintenance run: one read
    /// of the entry's revision); every [`FULL_READ_EVERY`]th run, whatever they say.
    fn publish_own_crl_if_changed(&self) -> Result<(), crate::error::Error> {
        self.fleet.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = file_id(&self.dir.file("ca_crl.pem"))?;
        let revision = self.store.master_crl_revision(&self.ca_id())?;
        let last = self.fleet.published.lock().ok().and_then(|p| *p);
        if !self.full_read_due() && revision.is_some() && last == Some((file, revision.unwrap_or(0))) {
            return Ok(());
        }
        self.publish_own_crl();
        let after = self.store.master_crl_revision(&self.ca_id())?;
        if let (Some(rev), Ok(mut p)) = (after, self.fleet.published.lock()) {
            *p = Some((file, rev));
        }
        Ok(())
    }

    /// Publishes this master's CRL (`DIR/ca/ca_crl.pem`) in the shared store, in place of one
    /// there only if that is numbered lower or does not verify with this master CA: after
    /// each CRL written, and in every [`Authority::refresh_fleet`] (a publication that
    /// failed is made then). Never fails: a failure is warned about.
    pub fn publish_own_crl(&self) {
        if !self.store.shares_root_crl() {
            return;
        }
        let path = self.dir.file("ca_crl.pem");
        let der = match crate::files::durable::read_regular_followed(&path)
            .map_err(|e| e.to_string())
            .and_then(|pem| crate::encoding::pem::find(&pem, &["X509 CRL"]).map(|(_, d)| d).map_err(|e| e.to_string()))
        {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(event = "master-crl-not-published", path = %path.display(), detail = %e);
                return;
            }
        };
        let own = &self.ca.cert_der;
        let Ok(number) = master_crl_number(&der, own) else { return };
        let replaces = |old: &[u8]| master_crl_number(old, own).map_or(true, |n| n < number);
        if let Err(e) = self.store.publish_master_crl(&self.ca_id(), &der, &replaces) {
            if first_time(format!("master-crl-not-published {e}")) {
                tracing::warn!(
                    event = "master-crl-not-published",
                    detail = %e,
                    hint = "the other masters serve the CRL of this master they hold; the next maintenance run \
                            publishes it again",
                );
            }
        }
    }
}
