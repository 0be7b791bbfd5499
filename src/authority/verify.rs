//! `vouch store verify`: checks that the store agrees with itself and with the CA: every
//! current certificate is whole, signed by a master CA of the store, and agrees with its
//! record; the inventory and the records agree; every revoked certificate is on the
//! revocation list and on the CRL; and whatever the store checks of its own layout
//! ([`crate::store::Store::check_layout`]). It first does what every command does (a CRL
//! that is due is written, as [`Authority::maintain`] does); then it reads only: first
//! without the store's lock (issuance goes on), and, if that reading finds anything, again
//! holding the lock, so that what it reports is of a settled store (taking the lock first
//! finishes any recovery, as every command that takes it does).

use super::own_crl::root_crl_problem;
use super::signed::signed_by_one_of;
use super::Authority;
use crate::error::Error;
use crate::store::verify::Finding;
use crate::store::{CertRecord, Listed, State, StoreError};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use time::OffsetDateTime;

/// How much `vouch store verify` read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    /// Current certificates read and checked.
    pub certificates: u64,
    /// Inventory lines checked.
    pub inventory: u64,
    /// Revocations checked (this master CA's).
    pub revocations: u64,
    /// Findings reported.
    pub findings: u64,
}

/// A certificate's facts, as verify compares them with its record.
struct CertFacts {
    serial: String,
    cn: Option<String>,
    not_after: String,
}

/// The serial (lowercase hex, as the store writes it), the CN and the notAfter of a PEM certificate.
fn facts(pem: &str) -> Result<(CertFacts, Vec<u8>), String> {
    // Exactly one PEM block, a CERTIFICATE, and nothing but white space around it: what vouch
    // writes. Another block before it (`X509 CERTIFICATE`, which OpenSSL also reads as a
    // certificate) would be what an agent takes, unchecked.
    let blocks = pem.matches("-----BEGIN ").count();
    let start = pem.find("-----BEGIN CERTIFICATE-----");
    let end = pem.find("-----END CERTIFICATE-----").map(|i| i + "-----END CERTIFICATE-----".len());
    match (blocks, start, end) {
        (1, Some(a), Some(b))
            if pem.get(..a).is_some_and(|t| t.trim().is_empty())
                && pem.get(b..).is_some_and(|t| t.trim().is_empty()) => {}
        _ => return Err("not exactly one PEM CERTIFICATE block (another block, or text around it)".into()),
    }
    let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).map_err(|e| e.to_string())?;
    let (rest, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| e.to_string())?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the certificate", rest.len()));
    }
    let serial = crate::encoding::hex(cert.raw_serial());
    let cn = cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok()).map(str::to_string);
    let not_after = crate::encoding::time::format_rfc3339(cert.validity().not_after.to_datetime());
    Ok((CertFacts { serial, cn, not_after }, der))
}

/// A certificate's subject, for a message.
fn subject_of(der: &[u8]) -> String {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| c.subject().to_string())
        .unwrap_or_else(|_| "(unreadable)".into())
}

/// Two RFC 3339 times that name the same second (the store writes `Z`; a record from
/// another writer may not).
fn same_time(a: &str, b: &str) -> bool {
    match (crate::encoding::time::parse_rfc3339(a), crate::encoding::time::parse_rfc3339(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// One reading's count, and where its findings go.
struct Pass<'a> {
    seen: Verified,
    report: &'a mut dyn FnMut(Finding),
    /// A first reading, without the lock: it stops at the first finding.
    first_only: bool,
}

impl Pass<'_> {
    /// Counts a finding and reports it.
    fn say(&mut self, f: Finding) {
        self.seen.findings += 1;
        (self.report)(f);
    }

    /// Whether a first reading has what it looks for: the rest is read again with the lock.
    fn done(&self) -> bool {
        self.first_only && self.seen.findings > 0
    }
}

/// What the layout check found that the checks after it take into account.
struct Layout {
    /// The revoked serials it found missing from the revocation list (not named twice).
    unrecorded: HashSet<String>,
    /// It could not read the inventory (named once).
    inventory_unreadable: bool,
}

/// A current certificate's facts (`cert`, DER `der`) against its record `rec` and its
/// listing `l`: serial, name, issuer (one of `cas`) and notAfter.
fn compare_with_record(
    pass: &mut Pass<'_>,
    l: &Listed,
    rec: &CertRecord,
    cert: &CertFacts,
    der: &[u8],
    cas: &[Vec<u8>],
) {
    if l.serial != rec.serial {
        pass.say(Finding::ListedNotCurrent {
            certname: l.certname.clone(),
            listed: l.serial.clone(),
            current: rec.serial.clone(),
        });
    }
    if cert.serial != rec.serial {
        pass.say(Finding::SerialMismatch {
            certname: l.certname.clone(),
            certificate: cert.serial.clone(),
            record: rec.serial.clone(),
        });
    }
    if cert.cn.as_deref() != Some(l.certname.as_str()) || rec.certname != l.certname {
        pass.say(Finding::NameMismatch {
            certname: l.certname.clone(),
            certificate: cert.cn.clone().unwrap_or_default(),
            record: rec.certname.clone(),
        });
    }
    if let Err(detail) = signed_by_one_of(der, cas) {
        pass.say(Finding::NotSignedByCa { certname: l.certname.clone(), serial: cert.serial.clone(), detail });
    }
    if !same_time(&cert.not_after, &rec.not_after) {
        pass.say(Finding::NotAfterMismatch {
            certname: l.certname.clone(),
            serial: cert.serial.clone(),
            certificate: cert.not_after.clone(),
            record: rec.not_after.clone(),
        });
    }
}

/// A current certificate's record state against its listing `l`; and a revoked one of this
/// master CA (`own_id`) on the revocation list (`revoked_serials`).
fn check_record_state(
    pass: &mut Pass<'_>,
    l: &Listed,
    rec: &CertRecord,
    own_id: &str,
    layout: &Layout,
    revoked_serials: &HashSet<&str>,
) {
    let ours = |rec: &CertRecord| rec.issuer.as_deref().is_none_or(|i| i == own_id);
    let state_problem = match rec.state {
        State::Issued if l.revoked => Some("listed as revoked, its record says issued"),
        State::Revoked if !l.revoked => Some("listed as signed, its record says revoked"),
        State::Issued | State::Revoked => None,
        State::Intent => Some("its record is an intent (reserved, never settled)"),
        State::Abandoned => Some("its record says abandoned (never issued)"),
    };
    if let Some(detail) = state_problem {
        pass.say(Finding::StateMismatch {
            certname: l.certname.clone(),
            serial: rec.serial.clone(),
            detail: detail.to_string(),
        });
    }
    if rec.state == State::Revoked
        && ours(rec)
        && !layout.unrecorded.contains(&rec.serial)
        && !revoked_serials.contains(rec.serial.as_str())
    {
        pass.say(Finding::RevokedNotRecorded { certname: l.certname.clone(), serial: rec.serial.clone() });
    }
}

impl Authority {
    /// Checks the store (see the module's documentation), handing each inconsistency to
    /// `report` as it is found. An error: the store could not be read at all (nothing
    /// could be checked past that point).
    ///
    /// A first reading runs without the store's lock, so that issuance goes on meanwhile (a
    /// whole store of a million certificates takes minutes to read): a store with no finding
    /// is done then. At the first finding it stops, and the whole check runs again with the
    /// lock held (which also finishes any recovery a killed process left), and only what
    /// that second reading finds is reported: a writer caught in the middle of a batch by the
    /// first reading is never reported.
    pub fn verify_store(&self, now: OffsetDateTime, report: &mut dyn FnMut(Finding)) -> Result<Verified, Error> {
        // As every command does, a CRL that is due is written first (under the lock, taken
        // only then).
        // A CRL that cannot be written does not stop the check: it is a finding
        // (crl-not-written, from the reading with the lock below), with what the CRL misses
        // (revoked-not-on-crl, crl-expired).
        // Taking the lock replays a write-ahead log not yet checkpointed (a `vouch sign` just
        // before), which reads the inventory: one vouch may not read stops that, and is the
        // finding it is once the log is checkpointed (the reading below finds it then), not an
        // error. Nothing else is read: the store is not settled until the log is replayed.
        let mut unreadable = |e: Error| -> Result<Verified, Error> {
            match e {
                Error::InventoryUnreadable { path, op, source } => {
                    report(Finding::InventoryUnreadable {
                        detail: format!(
                            "cannot {op} {}: {source} (the store's log, not yet checkpointed, cannot be replayed \
                             over it: nothing else was checked)",
                            path.display()
                        ),
                    });
                    Ok(Verified { findings: 1, ..Verified::default() })
                }
                e => Err(e),
            }
        };
        let crls_written = match self.maintain_with(now, true) {
            Ok(w) => w,
            Err(e) => return unreadable(e),
        };
        // A store whose own state only its lock settles (the file store: a log with a batch
        // that does not verify) is read with the lock from the start; so is one whose CRL
        // could not be written.
        if crls_written && self.store.settled_unlocked() {
            let mut found = false;
            if let Ok(first) = self.verify_pass(None, now, &mut |_| found = true) {
                if !found {
                    return Ok(first);
                }
            }
        }
        // Taking the lock finishes what a killed process left (a revocation among it); then a
        // CRL that is due now (that revocation's) is written under this lock.
        let lock = match self.store.lock() {
            Ok(lock) => lock,
            Err(e) => return unreadable(e.into()),
        };
        let mut not_written = Vec::new();
        if self.crl_due(now)? {
            if let Err(e) = self.write_crl_locked(&lock, now) {
                not_written.push(Finding::CrlNotWritten { crl: "the CRL".into(), detail: e.to_string() });
            }
        }
        if self.root_crl_due(now) {
            if let Err(e) = self.write_root_crl_locked(&lock, now) {
                not_written.push(Finding::CrlNotWritten { crl: "the root's CRL".into(), detail: e.to_string() });
            }
        }
        let mut verified = self.verify_pass(Some(&lock), now, report)?;
        for f in not_written {
            verified.findings = verified.findings.saturating_add(1);
            report(f);
        }
        Ok(verified)
    }

    /// One reading of the whole store: with `lock` held, every finding goes to `report`;
    /// without (`None`), the reading stops at the first one.
    fn verify_pass(
        &self,
        lock: Option<&crate::store::WriteLock>,
        now: OffsetDateTime,
        report: &mut dyn FnMut(Finding),
    ) -> Result<Verified, Error> {
        let mut pass = Pass { seen: Verified::default(), report, first_only: lock.is_none() };
        // The other master CAs the store names count only if the fleet's root signed them.
        let root = self.root_der(&mut |f| pass.say(f))?;
        let cas = self.trusted_cas(&root, &mut pass)?;
        // The root CRL the decision counts for conductors: one that does not read, or that the
        // root did not sign (a master CA's CRL copied there), refuses every conductor of the root.
        if let Some(detail) = root_crl_problem(&self.dir) {
            pass.say(Finding::RootCrlUnreadable { detail });
        }
        self.check_staging(&mut |f| pass.say(f));
        let layout = self.check_store_layout(lock, now, &mut pass)?;
        if pass.done() {
            return Ok(pass.seen);
        }

        let revocations = self.store.revocations()?;
        let revoked_serials: HashSet<&str> = revocations.iter().map(|r| r.serial.as_str()).collect();
        pass.seen.revocations = revoked_serials.len() as u64;

        let listed = self.listed_certnames(layout.inventory_unreadable)?;
        if self.check_current_certificates(&mut pass, &listed, &cas, &layout, &revoked_serials).is_break() {
            return Ok(pass.seen);
        }
        if self.check_inventory(&mut pass, &listed, layout.inventory_unreadable).is_break() {
            return Ok(pass.seen);
        }
        if self.check_revocation_records(&mut pass, &revocations).is_break() {
            return Ok(pass.seen);
        }

        // The CRL this master serves lists every revocation that is still due on it.
        self.verify_crl(now, &revocations, &mut |f| pass.say(f))?;
        self.check_bundle(&root, &mut |f| pass.say(f));
        Ok(pass.seen)
    }

    /// The master CAs a current certificate may be signed by: this one, and the others the
    /// store names that the fleet's root (`root`) signed (any other is a finding).
    fn trusted_cas(&self, root: &Vec<u8>, pass: &mut Pass<'_>) -> Result<Vec<Vec<u8>>, Error> {
        let mut cas = vec![self.ca.cert_der.clone()];
        for other in self.store.issuers()?.into_iter().filter(|d| *d != self.ca.cert_der) {
            match signed_by_one_of(&other, std::slice::from_ref(root)) {
                Ok(()) => cas.push(other),
                Err(detail) => pass.say(Finding::ForeignIssuer { subject: subject_of(&other), detail }),
            }
        }
        Ok(cas)
    }

    /// The store's own layout ([`crate::store::Store::check_layout`]), its findings reported,
    /// with what the checks after it take into account.
    fn check_store_layout(
        &self,
        lock: Option<&crate::store::WriteLock>,
        now: OffsetDateTime,
        pass: &mut Pass<'_>,
    ) -> Result<Layout, Error> {
        // The store's own layout first: a damaged record explains what follows. The revoked
        // serials it finds missing from the revocation list are not named twice below.
        // An inventory the layout check could not read is named once (the file store's
        // listing is its inventory's: no current certificate can be listed then).
        let mut unrecorded: HashSet<String> = HashSet::new();
        let mut inventory_unreadable = false;
        self.store.check_layout(lock, now, &mut |f| {
            if let Finding::RevokedNotRecorded { serial, .. } = &f {
                unrecorded.insert(serial.clone());
            }
            inventory_unreadable |= matches!(f, Finding::InventoryUnreadable { .. });
            pass.say(f)
        })?;
        Ok(Layout { unrecorded, inventory_unreadable })
    }

    /// Every certname's current certificate as the store lists it (certname and serial), each
    /// certname once; none when the listing reads the inventory the layout check could not.
    fn listed_certnames(&self, inventory_unreadable: bool) -> Result<Vec<Listed>, Error> {
        // Every certname's current certificate. The listing is collected (certname and serial
        // only) so that no read of the store runs inside the store's own walk.
        // A certname listed twice (the file store lists each inventory line that is the
        // certname's current certificate: a duplicated line) is checked once.
        let mut listed: Vec<Listed> = Vec::new();
        let mut names = HashSet::new();
        let listing = crate::store::each_until_error(&*self.store, |l| -> Result<(), StoreError> {
            if names.insert(l.certname.clone()) {
                listed.push(l);
            }
            Ok(())
        });
        match listing {
            Ok(()) => {}
            // The listing reads the inventory the layout check could not read (named above).
            Err(StoreError::Io { .. }) if inventory_unreadable => listed.clear(),
            Err(e) => return Err(e.into()),
        }
        drop(names);
        Ok(listed)
    }

    /// Each listed current certificate against its record ([`Authority::check_current`]),
    /// then the serials more than one certname lists. `Break`: a first reading found something.
    fn check_current_certificates(
        &self,
        pass: &mut Pass<'_>,
        listed: &[Listed],
        cas: &[Vec<u8>],
        layout: &Layout,
        revoked_serials: &HashSet<&str>,
    ) -> ControlFlow<()> {
        let own_id = crate::store::ca_id(&self.ca.cert_der);
        let mut by_serial: HashMap<&str, Vec<&str>> = HashMap::with_capacity(listed.len());
        for l in listed {
            if pass.done() {
                return ControlFlow::Break(());
            }
            pass.seen.certificates += 1;
            by_serial.entry(l.serial.as_str()).or_default().push(l.certname.as_str());
            self.check_current(pass, l, cas, &own_id, layout, revoked_serials);
        }
        for (serial, mut certnames) in by_serial.into_iter().filter(|(_, c)| c.len() > 1) {
            certnames.sort();
            let certnames = certnames.into_iter().map(str::to_string).collect();
            pass.say(Finding::SerialTwice { serial: serial.to_string(), certnames });
        }
        ControlFlow::Continue(())
    }

    /// One listed certname's current certificate: it reads, is whole, and agrees with its
    /// record and with the listing.
    fn check_current(
        &self,
        pass: &mut Pass<'_>,
        l: &Listed,
        cas: &[Vec<u8>],
        own_id: &str,
        layout: &Layout,
        revoked_serials: &HashSet<&str>,
    ) {
        let current = match self.store.current(&l.certname) {
            Ok(Some(c)) => c,
            // Listed with the lock held, so not cleaned since (on LDAP, another master may
            // have cleaned it meanwhile: the message says to run again).
            Ok(None) => {
                pass.say(Finding::CurrentMissing { certname: l.certname.clone(), serial: l.serial.clone() });
                return;
            }
            Err(e) => {
                pass.say(Finding::CurrentUnreadable { certname: l.certname.clone(), detail: e.to_string() });
                return;
            }
        };
        let rec = &current.record;
        let (cert, der) = match facts(&current.pem) {
            Ok(x) => x,
            Err(detail) => {
                pass.say(Finding::CertificateDamaged { certname: l.certname.clone(), detail });
                return;
            }
        };
        compare_with_record(pass, l, rec, &cert, &der, cas);
        check_record_state(pass, l, rec, own_id, layout, revoked_serials);
    }

    /// The inventory against the records, then every listed certificate in the inventory.
    /// `Break`: a first reading found something.
    fn check_inventory(&self, pass: &mut Pass<'_>, listed: &[Listed], inventory_unreadable: bool) -> ControlFlow<()> {
        // The inventory against the records (read once the listing's names are dropped). One
        // that cannot be read is a finding: the checks after it still run.
        let inventory = match self.store.inventory() {
            Ok(i) => i,
            Err(_) if inventory_unreadable => Vec::new(),
            Err(e) => {
                pass.say(Finding::InventoryUnreadable { detail: e.to_string() });
                Vec::new()
            }
        };
        let mut inventory_serials: HashSet<&str> = HashSet::with_capacity(inventory.len());
        for e in &inventory {
            if pass.done() {
                return ControlFlow::Break(());
            }
            pass.seen.inventory += 1;
            if !inventory_serials.insert(e.serial.as_str()) {
                pass.say(Finding::InventorySerialTwice { serial: e.serial.clone() });
                continue;
            }
            self.check_inventory_line(pass, e);
        }
        for l in listed {
            if !inventory_serials.contains(l.serial.as_str()) {
                pass.say(Finding::NotInInventory { certname: l.certname.clone(), serial: l.serial.clone() });
            }
        }
        ControlFlow::Continue(())
    }

    /// One inventory line against the record of its serial.
    fn check_inventory_line(&self, pass: &mut Pass<'_>, e: &crate::store::InventoryEntry) {
        match self.store.record(&e.serial) {
            Ok(None) => {
                pass.say(Finding::InventoryWithoutRecord { serial: e.serial.clone(), certname: e.certname.clone() })
            }
            Ok(Some(rec)) => {
                let detail = if rec.certname != e.certname {
                    Some(format!("it names {:?}, the record {:?}", e.certname, rec.certname))
                } else if !matches!(rec.state, State::Issued | State::Revoked) {
                    Some(format!("the record's state is {:?}, not issued or revoked", rec.state))
                } else {
                    None
                };
                if let Some(detail) = detail {
                    pass.say(Finding::InventoryDisagrees { serial: e.serial.clone(), detail });
                }
            }
            // One unreadable record is a finding, not the end of the check.
            Err(err) => {
                pass.say(Finding::InventoryDisagrees { serial: e.serial.clone(), detail: format!("its record: {err}") })
            }
        }
    }

    /// Every revocation against its record. `Break`: a first reading found something.
    fn check_revocation_records(
        &self,
        pass: &mut Pass<'_>,
        revocations: &[crate::store::Revocation],
    ) -> ControlFlow<()> {
        // Every revocation's record says revoked (a revocation with no record of its own, as
        // older versions and supersede marks left, is allowed).
        // Its notAfter is the record's: the CRL drops an entry by it.
        let mut checked = HashSet::new();
        for r in revocations.iter().filter(|r| checked.insert(r.serial.as_str())) {
            if pass.done() {
                return ControlFlow::Break(());
            }
            self.check_revocation_certificate(pass, r);
            if let Ok(Some(rec)) = self.store.record(&r.serial) {
                if rec.state == State::Issued {
                    pass.say(Finding::RevocationNotInRecord { serial: r.serial.clone(), certname: r.certname.clone() });
                }
                if let Some(t) = r.not_after.as_deref().filter(|_| !rec.not_after.is_empty()) {
                    if !same_time(t, &rec.not_after) {
                        pass.say(Finding::RevocationDisagrees {
                            serial: r.serial.clone(),
                            detail: format!(
                                "the revocation list says the certificate expires {t}, its record {}: \
                                 the CRL drops the entry by the list's",
                                rec.not_after
                            ),
                        });
                    }
                }
            }
        }
        ControlFlow::Continue(())
    }
}

impl Authority {
    /// A revocation's expiry against its certificate's, where the store still holds the
    /// certificate (the certname's current one is this serial, or the revocation keeps it):
    /// a revocation recorded by an older version, with no expiry, is not compared.
    fn check_revocation_certificate(&self, pass: &mut Pass<'_>, r: &crate::store::Revocation) {
        let Some(stated) = r.not_after.as_deref() else { return };
        let pem = match self.store.current(&r.certname) {
            Ok(Some(current)) if current.record.serial == r.serial => Some(current.pem),
            _ => self.store.revoked_certificate(&r.serial).ok().flatten(),
        };
        let Some(pem) = pem else { return };
        let Ok((cert, der)) = facts(&pem) else { return };
        // Only a certificate this master CA signed tells (one made by anyone else, with the
        // serial and the date changed alike, would silence the finding).
        if signed_by_one_of(&der, std::slice::from_ref(&self.ca.cert_der)).is_err() {
            return;
        }
        if cert.serial == r.serial && !same_time(stated, &cert.not_after) {
            pass.say(Finding::RevocationNotAfterMismatch {
                serial: r.serial.clone(),
                certname: r.certname.clone(),
                revocation: stated.to_string(),
                certificate: cert.not_after,
            });
        }
    }
}
