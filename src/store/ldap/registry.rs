//! The certname registry (`ou=certnames`): each certname's current certificate, written by
//! compare-and-swap (an add where no entry was expected, else a modify swapping the revision
//! admission read for the next: ops::cas), with the supersede mark an issuance leaves until the
//! certificate it replaced is revoked; and the reads of certificates across the store.

use super::conn::rc;
use super::entry::{check_certname, check_hex, gtime, set, Entry};
use super::ops::cas;
use super::replicas::Written;
use super::{LdapStore, CLEANED, PURGING};
use crate::encoding::time::parse_rfc3339;
use crate::store::{CertRecord, Expected, InventoryEntry, Issuance, State, StoreError, Supersede};
use ldap3::{Mod, Scope};
use std::collections::HashSet;

/// The conflict a registry write that lost its race reports.
fn changed_meanwhile(certname: &str) -> String {
    format!(
        "the certificate of {certname} was changed by someone else meanwhile (a concurrent request or another master)"
    )
}

impl LdapStore {
    /// The registry entry's attributes for a certificate.
    fn registry_attrs(rec: &CertRecord, pem: &str, revision: u64) -> Result<Vec<(&'static str, Vec<u8>)>, StoreError> {
        let json = serde_json::to_vec(rec).map_err(|e| StoreError::Ldap {
            op: "encode",
            dn: rec.certname.clone(),
            detail: e.to_string(),
        })?;
        let mut v = vec![
            ("vouchRevision", revision.to_string().into_bytes()),
            ("vouchState", if rec.state == State::Revoked { b"revoked".to_vec() } else { b"issued".to_vec() }),
            ("vouchSerial", rec.serial.clone().into_bytes()),
            ("vouchCa", rec.issuer.clone().unwrap_or_default().into_bytes()),
            ("vouchRecord", json),
            ("vouchCertificate", pem.as_bytes().to_vec()),
        ];
        if let Ok(t) = parse_rfc3339(&rec.not_after) {
            v.push(("vouchNotAfter", gtime(t).into_bytes()));
        }
        if let Some(c) = &rec.claim {
            check_hex("claim", c)?;
            v.push(("vouchKey", c.clone().into_bytes()));
        }
        Ok(v)
    }

    /// Writes one issuance to the registry: an add if no entry was expected, else a modify
    /// asserting the expected serial and revision. [`StoreError::Conflict`] if another
    /// writer got there first.
    pub(super) fn register(&self, iss: &Issuance) -> Result<(), StoreError> {
        let mut rec = iss.record.clone();
        check_certname(&rec.certname)?;
        check_hex("serial", &rec.serial)?;
        rec.issuer = Some(self.own_ca()?.to_string());
        let dn = self.registry_dn(&rec.certname);
        let supersedes = match &iss.supersedes {
            Some(s) => Some(self.supersede_mark(s)?),
            None => None,
        };
        match &iss.expected {
            None => self.register_new(&dn, &rec, &iss.pem, supersedes.as_deref())?,
            Some(exp) => self.register_over(&dn, &rec, &iss.pem, supersedes.as_deref(), exp)?,
        }
        let serial = rec.serial.clone();
        self.confirm_on_replicas_that(&dn, Written::Change, |e| {
            e.text("vouchSerial").as_deref() == Some(serial.as_str())
        })?;
        if let (Some(s), Some(mark)) = (&iss.supersedes, &supersedes) {
            crate::store::crash_point("ldap:registered");
            self.revoke_superseded(&dn, s, mark, &rec.serial)?;
        }
        Ok(())
    }

    /// The `vouchSupersedes` mark of the certificate an issuance supersedes:
    /// `<ca>:<serial>[:<claim>]`.
    fn supersede_mark(&self, s: &Supersede) -> Result<String, StoreError> {
        let ca = s.record.issuer.clone().unwrap_or(self.own_ca()?.to_string());
        check_hex("CA id", &ca)?;
        check_hex("serial", &s.revocation.serial)?;
        match &s.record.claim {
            Some(c) => {
                check_hex("claim", c)?;
                Ok(format!("{ca}:{}:{c}", s.revocation.serial))
            }
            None => Ok(format!("{ca}:{}", s.revocation.serial)),
        }
    }

    /// The registry write where no entry was expected: one add (an entry there already is
    /// another writer's: a conflict).
    fn register_new(&self, dn: &str, rec: &CertRecord, pem: &str, supersedes: Option<&str>) -> Result<(), StoreError> {
        let mut attrs: Vec<(&str, HashSet<Vec<u8>>)> =
            vec![("objectClass", set("vouchRegistered")), ("vouchCertname", set(rec.certname.as_bytes().to_vec()))];
        for (k, v) in Self::registry_attrs(rec, pem, 1)? {
            attrs.push((k, set(v)));
        }
        if let Some(m) = supersedes {
            attrs.push(("vouchSupersedes", set(m.as_bytes().to_vec())));
        }
        if self.add(dn, attrs)? != rc::ALREADY_EXISTS {
            return Ok(());
        }
        // A cleaned certname's entry stays as a tombstone (LdapStore::clean_registered): the
        // new certificate replaces it by compare-and-swap on the revision read. Any other
        // entry is another writer's.
        let Some(e) = self.read_attrs(&self.primary, dn, &["vouchState", "vouchSerial", "vouchRevision"])? else {
            return Err(StoreError::Conflict { what: changed_meanwhile(&rec.certname) });
        };
        match e.text("vouchState").as_deref() {
            Some(CLEANED) => {}
            // Its purge deletes it next (tombstones.rs): the caller tries again.
            Some(PURGING) => {
                return Err(StoreError::Conflict {
                    what: format!(
                        "the tombstone of {} is being purged (vouch purge --tombstones; `vouch store verify` \
                         names one left unfinished)",
                        rec.certname
                    ),
                })
            }
            _ => return Err(StoreError::Conflict { what: changed_meanwhile(&rec.certname) }),
        }
        let exp = Expected { serial: e.need("vouchSerial")?, revision: e.revision()? };
        self.register_over(dn, rec, pem, supersedes, &exp)
    }

    /// The registry write over the entry admission read: one modify that swaps the revision
    /// it read for the next (ops::cas; every change of a registry entry's certificate or
    /// state bumps its revision), every other attribute replaced. Before it, one read: the
    /// entry must still hold the serial and revision expected, and no unfinished supersede
    /// mark of another writer (it would be lost: completed first, and a conflict reported).
    /// A mark is only ever set by a write that bumps the revision, so an entry still at the
    /// revision read when the modify applies has no mark.
    fn register_over(
        &self,
        dn: &str,
        rec: &CertRecord,
        pem: &str,
        supersedes: Option<&str>,
        exp: &Expected,
    ) -> Result<(), StoreError> {
        check_hex("serial", &exp.serial)?;
        let next = exp
            .revision
            .checked_add(1)
            .ok_or_else(|| StoreError::Conflict { what: changed_meanwhile(&rec.certname) })?;
        let now = self.read_attrs(&self.primary, dn, &["vouchSerial", "vouchRevision", "vouchSupersedes"])?;
        let unchanged = now.as_ref().is_some_and(|e| {
            e.text("vouchSerial").as_deref() == Some(exp.serial.as_str()) && e.revision().ok() == Some(exp.revision)
        });
        if !unchanged || now.as_ref().is_some_and(|e| e.bytes("vouchSupersedes").is_some()) {
            return Err(self.conflict_at(dn, changed_meanwhile(&rec.certname)));
        }
        let mut mods: Vec<Mod<Vec<u8>>> = cas("vouchRevision", exp.revision.to_string(), next.to_string()).to_vec();
        for (k, v) in Self::registry_attrs(rec, pem, next)? {
            if k != "vouchRevision" {
                mods.push(Mod::Replace(k.as_bytes().to_vec(), set(v)));
            }
        }
        for attr in [&b"vouchNotAfter"[..], b"vouchKey"] {
            if !mods.iter().any(|m| matches!(m, Mod::Replace(k, _) if k == attr)) {
                mods.push(Mod::Replace(attr.to_vec(), HashSet::new()));
            }
        }
        mods.push(Mod::Replace(
            b"vouchSupersedes".to_vec(),
            supersedes.map(|m| set(m.as_bytes().to_vec())).unwrap_or_default(),
        ));
        if self.modify(dn, mods)? != rc::SUCCESS {
            return Err(self.conflict_at(dn, changed_meanwhile(&rec.certname)));
        }
        Ok(())
    }

    /// After the registry write: the superseded certificate's revocation, then the mark
    /// removed (while the entry still holds the new certificate, `serial`). A failure here
    /// is [`StoreError::AfterCommit`]: the new certificate stands.
    fn revoke_superseded(&self, dn: &str, s: &Supersede, mark: &str, serial: &str) -> Result<(), StoreError> {
        // The certname is the new certificate's: now the old one's revocation, then the mark.
        let after = (|| {
            // The superseded certificate stays with its revocation: what lets its serial leave
            // the CRL once it expired (crate::authority's certified_expiry).
            self.add_revocation_with(&s.revocation, &s.record, s.certificate.as_deref().map(str::as_bytes))?;
            self.remove_mark(dn, mark, serial)
        })();
        if let Err(e) = after {
            return Err(StoreError::AfterCommit { source: Box::new(e) });
        }
        Ok(())
    }

    /// One search over the whole store: a revoked serial's revocation entry (under whichever
    /// master CA issued it) wins over the registry entry that may still name it.
    pub(super) fn record_by_serial(&self, serial: &str) -> Result<Option<CertRecord>, StoreError> {
        if check_hex("serial", serial).is_err() {
            return Ok(None);
        }
        let found = self.search(
            &self.base,
            Scope::Subtree,
            &format!("(&(|(objectClass=vouchRevocation)(objectClass=vouchRegistered))(vouchSerial={serial}))"),
            &["objectClass", "vouchRecord"],
        )?;
        let revoked = |e: &Entry| {
            e.attrs.get("objectclass").is_some_and(|v| v.iter().any(|c| c.eq_ignore_ascii_case(b"vouchRevocation")))
        };
        let Some(e) = found.iter().find(|e| revoked(e)).or_else(|| found.first()) else { return Ok(None) };
        if !revoked(e) {
            return Ok(Some(e.record()?));
        }
        let v: serde_json::Value = serde_json::from_slice(e.bytes("vouchRecord").unwrap_or_default())
            .map_err(|err| e.damaged(format!("vouchRecord: {err}")))?;
        serde_json::from_value(v["record"].clone()).map(Some).map_err(|err| e.damaged(format!("vouchRecord: {err}")))
    }

    /// [`Store::inventory`](crate::store::Store::inventory): every certificate the registry
    /// and the revocation entries name, once each, oldest first.
    pub(super) fn inventory_entries(&self) -> Result<Vec<InventoryEntry>, StoreError> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let registered = self.search(
            &self.container("certnames"),
            Scope::OneLevel,
            "(objectClass=vouchRegistered)",
            &["vouchRecord"],
        )?;
        let revoked =
            self.search(&self.container("cas"), Scope::Subtree, "(objectClass=vouchRevocation)", &["vouchRecord"])?;
        for e in registered.iter().chain(revoked.iter()) {
            let rec = match e.bytes("vouchRecord").and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok()) {
                Some(v) if v.get("record").is_some() => {
                    serde_json::from_value::<CertRecord>(v["record"].clone()).map_err(|x| e.damaged(x.to_string()))?
                }
                _ => e.record()?,
            };
            if seen.insert(rec.serial.clone()) && !rec.not_before.is_empty() {
                out.push(InventoryEntry {
                    serial: rec.serial,
                    not_before: rec.not_before,
                    not_after: rec.not_after,
                    certname: rec.certname,
                });
            }
        }
        out.sort_by(|a, b| a.not_before.cmp(&b.not_before).then_with(|| a.serial.cmp(&b.serial)));
        Ok(out)
    }
}
