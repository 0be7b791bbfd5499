//! Revocations in the shared store: each revoked certificate's entry under the CA that
//! issued it (counted in that CA's entry: its CRL is then due), the registry entry of a
//! revoked certificate, this CA's revocations for its CRL, and the completion of the
//! supersede marks a process that died left (the revocation it did not write).

use super::conn::rc;
use super::entry::{check_certname, check_hex, gtime, set, Entry};
use super::replicas::Written;
use super::LdapStore;
use crate::encoding::time::{format_rfc3339, parse_rfc3339};
use crate::store::{CertRecord, Expected, Revocation, State, StoreError};
use ldap3::{Mod, Scope};
use std::collections::HashSet;
use std::ops::ControlFlow;
use time::OffsetDateTime;

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
        self.modify(
            &e.dn,
            vec![Mod::Delete(b"vouchSupersedes".to_vec(), HashSet::new())],
            Some(&format!("(vouchSerial={serial_now})")),
        )?;
        Ok(true)
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
                    self.modify(&dn, vec![Mod::Replace(b"vouchRecord".to_vec(), set(bytes))], None)?;
                }
            }
            // Written by an earlier attempt that may have died before counting it: counted
            // again (one more CRL is harmless; a revocation missing from it is not), and
            // confirmed on the replicas before the answer, as the first attempt would have.
            self.modify(&self.ca_dn(&ca), vec![Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec())], None)?;
            self.confirm_on_replicas(&dn, Written::Change)?;
            return Ok(false);
        }
        // The CA's counter: its CRL is due at every master that issues for it.
        self.modify(&self.ca_dn(&ca), vec![Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec())], None)?;
        self.confirm_on_replicas(&dn, Written::Change)?;
        Ok(true)
    }

    /// [`Store::revoke`](crate::store::Store::revoke): the revocation's entry, then the
    /// registry entry of the certificate revoked (marked revoked, or removed if `cleaned`),
    /// only while it is still `expected`.
    pub(super) fn revoke_registered(
        &self,
        rev: &Revocation,
        rec: &CertRecord,
        expected: Option<&Expected>,
    ) -> Result<(), StoreError> {
        check_certname(&rev.certname)?;
        // The certname's certificate, when it is the one revoked (expected, or a revocation
        // recorded again by serial): kept in the revocation.
        let pem = match expected {
            Some(exp) if exp.serial != rev.serial => None,
            _ => self
                .read_attrs(&self.primary, &self.registry_dn(&rev.certname), &["vouchSerial", "vouchCertificate"])?
                .filter(|e| e.text("vouchSerial").as_deref() == Some(rev.serial.as_str()))
                .and_then(|e| e.bytes("vouchCertificate").map(<[u8]>::to_vec)),
        };
        self.add_revocation_with(rev, rec, pem.as_deref())?;
        let Some(exp) = expected else { return Ok(()) };
        // The registry entry of the certificate being revoked (a superseded one is not it).
        check_hex("serial", &exp.serial)?;
        let dn = self.registry_dn(&rev.certname);
        // Only while it is still the certname's certificate. If another writer replaced it
        // meanwhile (a renewal with the same key racing a revocation for key compromise), the
        // revocation entry above stands and the caller is told of the conflict: it reads the
        // certname again and revokes what is current now.
        let code = if rev.cleaned {
            // A delete would erase an unfinished supersede mark: only without one.
            self.delete(&dn, Some(&format!("(&(vouchSerial={})(!(vouchSupersedes=*)))", exp.serial)))?
        } else {
            let mut r = rec.clone();
            r.state = State::Revoked;
            r.revoked_at = Some(rev.time.clone());
            r.reason = Some(rev.reason.clone());
            let json = serde_json::to_vec(&r).map_err(|e| StoreError::Ldap {
                op: "encode",
                dn: dn.clone(),
                detail: e.to_string(),
            })?;
            self.modify(
                &dn,
                vec![
                    Mod::Replace(b"vouchState".to_vec(), set("revoked")),
                    Mod::Replace(b"vouchRecord".to_vec(), set(json)),
                    Mod::Increment(b"vouchRevision".to_vec(), b"1".to_vec()),
                ],
                Some(&format!("(vouchSerial={})", exp.serial)),
            )?
        };
        match code {
            rc::SUCCESS => Ok(()),
            // Already forgotten (a clean that raced another clean): nothing more to do.
            rc::NO_SUCH_OBJECT if rev.cleaned => Ok(()),
            _ => Err(self.conflict_at(&dn, format!("the certificate of {} was changed by someone else meanwhile (a concurrent request or another master)", rev.certname))),
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
    fn keep_certificate(&self, dn: &str, pem: Option<&[u8]>) -> Result<(), StoreError> {
        let Some(pem) = pem else { return Ok(()) };
        let held = self.read_attrs(&self.primary, dn, &["vouchCertificate"])?;
        if held.is_some_and(|e| e.bytes("vouchCertificate").is_none()) {
            // A concurrent writer that added one first wins (the add of a value already
            // there fails); either is a certificate of this serial or is ignored when read.
            let added = self.modify(dn, vec![Mod::Add(b"vouchCertificate".to_vec(), set(pem.to_vec()))], None);
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
