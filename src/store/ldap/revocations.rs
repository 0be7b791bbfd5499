//! Revocations in the shared store: each revoked certificate's entry under the CA that
//! issued it (counted in that CA's entry: its CRL is then due), the registry entry of a
//! revoked certificate, this CA's revocations for its CRL, and the completion of the
//! supersede marks a process that died left (the revocation it did not write).

use super::conn::rc;
use super::entry::{check_certname, check_hex, gtime, set, Entry};
use super::ops::cas;
use super::replicas::Written;
use super::{LdapStore, CLEANED};
use crate::encoding::time::{format_rfc3339, parse_rfc3339};
use crate::store::{CertRecord, Expected, Revocation, State, StoreError};
use ldap3::{Mod, Scope};
use std::ops::ControlFlow;
use time::OffsetDateTime;

/// How many times a revocation is counted again after other writers changed the CA's
/// revision first ([`LdapStore::count_revocation`]).
const COUNT_TRIES: u32 = 64;

/// The pause before the next attempt of a compare-and-swap that lost: random, up to 2^n ms
/// (at most 32 ms), so that writers that collided do not collide again in step.
fn backoff(attempt: u32) -> std::time::Duration {
    use std::hash::BuildHasher;
    let ceiling = 1u64 << attempt.min(5);
    let r = std::collections::hash_map::RandomState::new().hash_one(attempt) % ceiling.saturating_add(1);
    std::time::Duration::from_millis(r)
}

impl LdapStore {
    /// Finishes what a process that died left: the revocation of every certificate a
    /// registry write superseded (marked `vouchSupersedes`) whose revocation entry was not
    /// written. Idempotent; safe beside live writers (each step is). An entry that cannot be
    /// completed (damaged) is reported and skipped: the others are still completed.
    pub fn complete(&self) -> Result<usize, StoreError> {
        let marked = self.search(&self.container("certnames"), Scope::OneLevel, "(vouchSupersedes=*)", &["*"])?;
        let mut done = 0;
        for e in marked {
            match self.complete_entry(&e) {
                Ok(true) => done += 1,
                Ok(false) => {}
                Err(StoreError::Unavailable { detail }) => return Err(StoreError::Unavailable { detail }),
                Err(err) => tracing::warn!(event = "warning", what = "store", dn = %e.dn, detail = %err),
            }
        }
        Ok(done)
    }

    /// Completes one registry entry's `vouchSupersedes` mark (`<ca>:<serial>[:<claim>]`), if it
    /// has one: the superseded certificate's revocation, then the mark removed (only while the
    /// entry still holds the certificate that set it). Returns whether there was a mark.
    pub(super) fn complete_entry(&self, e: &Entry) -> Result<bool, StoreError> {
        let Some(mark) = e.text("vouchSupersedes") else { return Ok(false) };
        let serial_now = e.need("vouchSerial")?;
        check_hex("serial", &serial_now)?;
        let certname = e.need("vouchCertname")?;
        check_certname(&certname)?;
        let mut parts = mark.split(':');
        let (Some(ca), Some(serial), claim) = (parts.next(), parts.next(), parts.next()) else {
            return Err(e.damaged(format!("vouchSupersedes {mark:?}")));
        };
        check_hex("CA id", ca)?;
        check_hex("serial", serial)?;
        if let Some(c) = claim {
            check_hex("claim", c)?;
        }
        // The superseded certificate's record, rebuilt from the mark: it was the certname's
        // certificate before this one (its claim, if any, stays spent through the entry).
        let old = CertRecord {
            issuer: Some(ca.to_string()),
            claim: claim.map(str::to_string),
            ..CertRecord::bare(serial, &certname, State::Revoked)
        };
        let rev = Revocation {
            serial: serial.to_string(),
            time: format_rfc3339(OffsetDateTime::now_utc()),
            reason: "superseded".into(),
            certname,
            cleaned: false,
            // Rebuilt from the mark, which names no date: the entry stays on the CRL.
            not_after: None,
        };
        self.add_revocation(&rev, &old)?;
        self.remove_mark(&e.dn, &mark, &serial_now)?;
        Ok(true)
    }

    /// Removes the supersede mark `mark` from the registry entry `dn` while the entry still
    /// holds the certificate `serial` that set it: one modify deleting that exact mark and
    /// checking the serial (ops::cas of the serial for itself). A mark already removed, or an
    /// entry that moved on, is left as it is (the modify applies nothing).
    pub(super) fn remove_mark(&self, dn: &str, mark: &str, serial: &str) -> Result<u32, StoreError> {
        let mut mods = vec![Mod::Delete(b"vouchSupersedes".to_vec(), set(mark.as_bytes().to_vec()))];
        mods.extend(cas("vouchSerial", serial, serial));
        self.modify(dn, mods)
    }

    /// Counts a revocation in the entry of the CA `ca` (its CRL is then due at every master
    /// that issues for it): the revision read swapped for the next (ops::cas), read again
    /// while other writers win (bounded, with a growing random pause). No entry for the CA:
    /// nothing to count.
    pub(super) fn count_revocation(&self, ca: &str) -> Result<(), StoreError> {
        let dn = self.ca_dn(ca);
        for attempt in 0..COUNT_TRIES {
            let Some(e) = self.read_attrs(&self.primary, &dn, &["vouchRevision"])? else { return Ok(()) };
            let mods = match e.bytes("vouchRevision") {
                Some(old) => {
                    let next = e.revision().map(|n| n.saturating_add(1)).unwrap_or(1);
                    cas("vouchRevision", old.to_vec(), next.to_string()).to_vec()
                }
                None => vec![Mod::Replace(b"vouchRevision".to_vec(), set("1"))],
            };
            match self.modify(&dn, mods)? {
                rc::SUCCESS | rc::NO_SUCH_OBJECT => return Ok(()),
                _ => std::thread::sleep(backoff(attempt)),
            }
        }
        Err(StoreError::Conflict {
            what: format!("the revision of {dn} kept changing under {COUNT_TRIES} attempts to count a revocation"),
        })
    }

    /// After a compare-and-swap on the registry entry `dn` failed: completes a mark a process
    /// that died left there (a later writer must never erase it unfinished), then reports
    /// the conflict (the caller reads the entry again).
    pub(super) fn conflict_at(&self, dn: &str, what: String) -> StoreError {
        if let Ok(Some(e)) = self.read(&self.primary, dn) {
            if let Err(err) = self.complete_entry(&e) {
                tracing::warn!(event = "warning", what = "store", dn = %dn, detail = %err);
            }
        }
        StoreError::Conflict { what }
    }

    /// [`LdapStore::complete`], at most once a minute per process (and at its first lock).
    pub(super) fn complete_now_and_then(&self) -> Result<(), StoreError> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let last = self.completed.load(std::sync::atomic::Ordering::Acquire);
        if now.saturating_sub(last) < 60 {
            return Ok(());
        }
        self.completed.store(now, std::sync::atomic::Ordering::Release);
        match self.complete() {
            Ok(_) => Ok(()),
            Err(e) => {
                // Try again at the next lock.
                self.completed.store(i64::MIN, std::sync::atomic::Ordering::Release);
                Err(e)
            }
        }
    }

    /// Adds the revocation entry of `rev` under the CA that issued it, and counts it in
    /// that CA's entry (its CRL is then due). An existing entry is kept (idempotent), and
    /// made `cleaned` if this revocation is.
    pub(super) fn add_revocation(&self, rev: &Revocation, rec: &CertRecord) -> Result<bool, StoreError> {
        self.add_revocation_with(rev, rec, None)
    }

    /// [`LdapStore::add_revocation`], the revoked certificate (`pem`, when known) kept in
    /// the entry: what lets its serial leave the CRL once it expired, whatever the entry's
    /// record says (crate::authority's `certified_expiry`).
    pub(super) fn add_revocation_with(
        &self,
        rev: &Revocation,
        rec: &CertRecord,
        pem: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let (ca, added) = self.add_revocation_entry(rev, rec, pem)?;
        // Counted again if an earlier attempt wrote the entry and died before counting it
        // (one more CRL is harmless; a revocation missing from it is not), and confirmed on
        // the replicas before the answer, as the first attempt would have.
        self.count_revocation(&ca)?;
        self.confirm_on_replicas(&self.revocation_dn(&ca, &rev.serial), Written::Change)?;
        Ok(added)
    }

    /// The revocation entry of `rev` (added, or made `cleaned` where it exists): the CA it
    /// is under, and whether it was added. Not counted ([`LdapStore::count_revocation`]).
    fn add_revocation_entry(
        &self,
        rev: &Revocation,
        rec: &CertRecord,
        pem: Option<&[u8]>,
    ) -> Result<(String, bool), StoreError> {
        let ca = match &rec.issuer {
            Some(ca) => ca.clone(),
            None => self.own_ca()?.to_string(),
        };
        check_hex("CA id", &ca)?;
        check_hex("serial", &rev.serial)?;
        let dn = self.revocation_dn(&ca, &rev.serial);
        let mut record = rec.clone();
        record.state = State::Revoked;
        record.revoked_at = Some(rev.time.clone());
        record.reason = Some(rev.reason.clone());
        record.issuer = Some(ca.clone());
        let json = serde_json::to_vec(&serde_json::json!({
            "record": record, "cleaned": rev.cleaned,
        }))
        .map_err(|e| StoreError::Ldap { op: "encode", dn: dn.clone(), detail: e.to_string() })?;
        let time = parse_rfc3339(&rev.time).unwrap_or_else(|_| OffsetDateTime::now_utc());
        let mut attrs = vec![
            ("objectClass", set("vouchRevocation")),
            ("vouchSerial", set(rev.serial.as_bytes().to_vec())),
            ("vouchCertname", set(rev.certname.as_bytes().to_vec())),
            ("vouchTime", set(gtime(time))),
            ("vouchRecord", set(json.clone())),
        ];
        if let Some(pem) = pem {
            attrs.push(("vouchCertificate", set(pem.to_vec())));
        }
        // The claim that vouched for it stays spent (LdapStore::claim_issued finds it here).
        if let Some(c) = &rec.claim {
            check_hex("claim", c)?;
            attrs.push(("vouchKey", set(c.as_bytes().to_vec())));
        }
        let code = self.add(&dn, attrs)?;
        if code == rc::ALREADY_EXISTS {
            self.keep_certificate(&dn, pem)?;
            if rev.cleaned {
                let prior = self.read(&self.primary, &dn)?;
                let was_cleaned = prior
                    .as_ref()
                    .and_then(|e| e.bytes("vouchRecord"))
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                    .is_some_and(|v| v["cleaned"] == serde_json::Value::Bool(true));
                if !was_cleaned {
                    let mut v: serde_json::Value = prior
                        .as_ref()
                        .and_then(|e| e.bytes("vouchRecord"))
                        .and_then(|b| serde_json::from_slice(b).ok())
                        .unwrap_or_else(|| serde_json::json!({ "record": record }));
                    v["cleaned"] = serde_json::Value::Bool(true);
                    let bytes = serde_json::to_vec(&v).map_err(|e| StoreError::Ldap {
                        op: "encode",
                        dn: dn.clone(),
                        detail: e.to_string(),
                    })?;
                    self.modify(&dn, vec![Mod::Replace(b"vouchRecord".to_vec(), set(bytes))])?;
                }
            }
            return Ok((ca, false));
        }
        Ok((ca, true))
    }

    /// [`Store::revoke`](crate::store::Store::revoke): the revocation's entry (counted in the
    /// CA's entry, confirmed on the replicas), then the registry entry of the certificate
    /// revoked (marked revoked, or made a tombstone if `cleaned`: [`CLEANED`]), only while it
    /// is still `expected`. In that order, so that a step that fails (the server gone, the
    /// process killed, a standby that did not show it) leaves at worst a revocation entry
    /// whose registry entry still says issued: the CRL lists it, `vouch store verify` names
    /// it (revocation-unfinished) and `vouch revoke CERTNAME` (or `--serial`) finishes it, changing
    /// nothing twice.
    pub(super) fn revoke_registered(
        &self,
        rev: &Revocation,
        rec: &CertRecord,
        expected: Option<&Expected>,
    ) -> Result<(), StoreError> {
        check_certname(&rev.certname)?;
        let dn = self.registry_dn(&rev.certname);
        // The registry entry as it is now: its certificate, when it is the one revoked (also
        // for a revocation recorded again by serial, with nothing expected), is kept in the
        // revocation; its revision is what the registry write swaps.
        if let Some(exp) = expected {
            check_hex("serial", &exp.serial)?;
        }
        let attrs = ["vouchSerial", "vouchRevision", "vouchState", "vouchCertificate"];
        let now = self.read_attrs(&self.primary, &dn, &attrs)?;
        let pem = now
            .as_ref()
            .filter(|e| e.text("vouchSerial").as_deref() == Some(rev.serial.as_str()))
            .filter(|e| e.text("vouchState").as_deref() != Some(CLEANED))
            .and_then(|e| e.bytes("vouchCertificate").map(<[u8]>::to_vec));
        // The entry, counted and confirmed on the replicas first: a retry after a standby that
        // did not show it finds the certname's entry still issued, and confirms again.
        self.add_revocation_with(rev, rec, pem.as_deref())?;
        crate::store::crash_point("ldap:revocation-added");
        match expected {
            Some(exp) => self.mark_revoked(&dn, rev, rec, exp, now.as_ref()),
            None => Ok(()),
        }
    }

    /// The registry entry `dn` (read as `now`) says revoked, or is made a tombstone when the
    /// revocation is `cleaned`, by compare-and-swap on its revision (ops::cas): only while it
    /// is still the certificate `exp`. If another writer replaced it meanwhile (a renewal
    /// with the same key racing a revocation for key compromise), the caller is told of the
    /// conflict: it reads the certname again and revokes what is current now.
    fn mark_revoked(
        &self,
        dn: &str,
        rev: &Revocation,
        rec: &CertRecord,
        exp: &Expected,
        now: Option<&Entry>,
    ) -> Result<(), StoreError> {
        let conflict = || {
            format!(
                "the certificate of {} was changed by someone else meanwhile (a concurrent request or another master)",
                rev.certname
            )
        };
        let Some(e) = now.filter(|e| e.text("vouchSerial").as_deref() == Some(exp.serial.as_str())) else {
            // Already forgotten (a clean that raced another clean): nothing more to do.
            if now.is_none() && rev.cleaned {
                return Ok(());
            }
            return Err(self.conflict_at(dn, conflict()));
        };
        let cleaned_before = e.text("vouchState").as_deref() == Some(CLEANED);
        if cleaned_before {
            return if rev.cleaned { Ok(()) } else { Err(StoreError::Conflict { what: conflict() }) };
        }
        let revision = e.revision()?;
        let mut r = rec.clone();
        r.state = State::Revoked;
        r.revoked_at = Some(rev.time.clone());
        r.reason = Some(rev.reason.clone());
        let json = serde_json::to_vec(&r).map_err(|err| StoreError::Ldap {
            op: "encode",
            dn: dn.to_string(),
            detail: err.to_string(),
        })?;
        let state = if rev.cleaned { CLEANED } else { "revoked" };
        let mut mods = cas("vouchRevision", revision.to_string(), revision.saturating_add(1).to_string()).to_vec();
        mods.push(Mod::Replace(b"vouchState".to_vec(), set(state)));
        mods.push(Mod::Replace(b"vouchRecord".to_vec(), set(json)));
        match self.modify(dn, mods)? {
            rc::SUCCESS => Ok(()),
            _ => Err(self.conflict_at(dn, conflict())),
        }
    }

    /// [`Store::revocations`](crate::store::Store::revocations): this CA's revocation
    /// entries, oldest first (a damaged one left out, said).
    pub(super) fn own_revocations(&self) -> Result<Vec<Revocation>, StoreError> {
        let ca = self.own_ca()?.to_string();
        let mut out = Vec::new();
        let base = self.ca_dn(&ca);
        self.search_each(&base, Scope::OneLevel, "(objectClass=vouchRevocation)", &["vouchRecord"], |e| {
            // A damaged entry is reported and left out: the CRL of every other revocation
            // (and the issuance that regenerates it) must not stop on it.
            let parsed = serde_json::from_slice::<serde_json::Value>(e.bytes("vouchRecord").unwrap_or_default())
                .ok()
                .and_then(|v| serde_json::from_value::<CertRecord>(v["record"].clone()).ok().map(|r| (v, r)))
                .filter(|(_, r)| check_hex("serial", &r.serial).is_ok());
            let Some((v, rec)) = parsed else {
                crate::obs::metrics::METRICS.store_error(crate::obs::metrics::StoreStage::Maintenance);
                tracing::warn!(event = "warning", what = "store", dn = %e.dn, detail = "damaged revocation entry left out of the CRL");
                return Ok(ControlFlow::Continue(()));
            };
            out.push(Revocation {
                serial: rec.serial.clone(),
                time: rec.revoked_at.clone().unwrap_or_default(),
                reason: rec.reason.clone().unwrap_or_else(|| "unspecified".into()),
                certname: rec.certname.clone(),
                cleaned: v["cleaned"] == serde_json::Value::Bool(true),
                not_after: Some(rec.not_after.clone()).filter(|t| !t.is_empty()),
            });
            Ok(ControlFlow::Continue(()))
        })?;
        out.sort_by(|a, b| a.time.cmp(&b.time).then_with(|| a.serial.cmp(&b.serial)));
        Ok(out)
    }

    /// An existing revocation entry (`dn`) without its certificate (recorded by an older
    /// version) gets `pem`, when known: before `vouch clean` removes the registry entry that
    /// holds it, so that the serial can still leave the CRL once it expired.
    pub(super) fn keep_certificate(&self, dn: &str, pem: Option<&[u8]>) -> Result<(), StoreError> {
        let Some(pem) = pem else { return Ok(()) };
        let held = self.read_attrs(&self.primary, dn, &["vouchCertificate"])?;
        if held.is_some_and(|e| e.bytes("vouchCertificate").is_none()) {
            // A concurrent writer that added one first wins (the add of a value already
            // there fails); either is a certificate of this serial or is ignored when read.
            let added = self.modify(dn, vec![Mod::Add(b"vouchCertificate".to_vec(), set(pem.to_vec()))]);
            if let Err(e @ StoreError::Unavailable { .. }) = added {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The certificate a revocation entry of this CA's serial keeps (PEM), if any.
    pub(super) fn revocation_certificate(&self, serial: &str) -> Result<Option<String>, StoreError> {
        check_hex("serial", serial)?;
        let dn = self.revocation_dn(self.own_ca()?, serial);
        Ok(self
            .read_attrs(&self.primary, &dn, &["vouchCertificate"])?
            .and_then(|e| e.bytes("vouchCertificate").map(|b| String::from_utf8_lossy(b).into_owned())))
    }
}
