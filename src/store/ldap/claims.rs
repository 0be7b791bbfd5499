//! One-time use in the shared store (`ou=journal`): each claim of vouched attributes is the
//! add of the entry named by its key's digest (exactly one add of a DN succeeds), taken
//! over by a compare-and-swap modify only by the same key and certname while the claim is held or
//! no certificate was stored for it; expired entries are pruned now and then.

use super::conn::rc;
use super::entry::{check_certname, check_hex, gtime, gtime_to_rfc3339, set, Entry};
use super::ops::cas;
use super::replicas::Written;
use super::LdapStore;
use crate::store::journal::Claim;
use crate::store::{ClaimUse, ReplayJournal, Store, StoreError};
use crate::vouching::replay_key::ReplayKey;
use ldap3::{Mod, Scope};
use std::collections::HashSet;
use time::OffsetDateTime;

impl LdapStore {
    /// The journal entry of a claim key (and its legacy key's, if it exists).
    fn journal_entry(&self, key: &str) -> Result<(String, Option<Entry>), StoreError> {
        let dn = self.journal_dn(&crate::store::claim_digest(key));
        let e = self.read(&self.primary, &dn)?;
        Ok((dn, e))
    }

    fn used(e: &Entry) -> Claim {
        Claim::Used {
            certname: e.text("vouchCertname").unwrap_or_else(|| "?".into()),
            time: e.text("vouchTime").map(|t| gtime_to_rfc3339(&t)).unwrap_or_else(|| "?".into()),
        }
    }

    /// Whether the certificate a claim named was stored (it is, or was, its certname's):
    /// then the claim is spent.
    ///
    /// Judged by the claim itself, never by the serial last written into the journal entry
    /// (requests racing with one key overwrite it): a certificate for the claim is in the
    /// registry (`vouchKey` on the certname's entry), or one was revoked (`vouchKey` on its
    /// revocation entry, under whichever CA issued it).
    fn claim_issued(&self, e: &Entry) -> Result<bool, StoreError> {
        let digest = e.need("vouchKey")?;
        check_hex("journal entry", &digest)?;
        let registered = self.search(
            &self.container("certnames"),
            Scope::OneLevel,
            &format!("(&(objectClass=vouchRegistered)(vouchKey={digest}))"),
            &["1.1"],
        )?;
        if !registered.is_empty() {
            return Ok(true);
        }
        let revoked = self.search(
            &self.container("cas"),
            Scope::Subtree,
            &format!("(&(objectClass=vouchRevocation)(vouchKey={digest}))"),
            &["1.1"],
        )?;
        Ok(!revoked.is_empty())
    }

    /// Prunes journal entries whose attributes expired more than a day ago, at most once an
    /// hour per process. By the wall clock, never a later `--now` (a command run with a
    /// future `--now` removed every claim of the fleet's journal: spent attributes good again).
    fn prune_now_and_then(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);
        let now = now.min(OffsetDateTime::now_utc());
        let t = now.unix_timestamp();
        if t.saturating_sub(LAST.load(std::sync::atomic::Ordering::Acquire)) < 3600 {
            return Ok(());
        }
        LAST.store(t, std::sync::atomic::Ordering::Release);
        let Some(cutoff) = now.checked_sub(time::Duration::hours(25)) else { return Ok(()) };
        let old = self.search(
            &self.container("journal"),
            Scope::OneLevel,
            &format!("(&(objectClass=vouchClaim)(vouchExpiry<={}))", gtime(cutoff)),
            &["1.1"],
        )?;
        for e in old {
            self.delete(&e.dn)?;
        }
        Ok(())
    }

    pub(super) fn claim_attrs(
        key_digest: &str,
        certname: &str,
        holder: &str,
        state: &str,
        serial: Option<&str>,
        expiry: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Vec<(&'static str, HashSet<Vec<u8>>)> {
        let mut v = vec![
            ("objectClass", set("vouchClaim")),
            ("vouchKey", set(key_digest.as_bytes().to_vec())),
            ("vouchCertname", set(certname.as_bytes().to_vec())),
            ("vouchHolder", set(holder.as_bytes().to_vec())),
            ("vouchState", set(state)),
            ("vouchTime", set(gtime(now))),
            ("vouchExpiry", set(gtime(expiry))),
        ];
        if let Some(s) = serial {
            v.push(("vouchSerial", set(s.as_bytes().to_vec())));
        }
        v
    }
}

impl ReplayJournal for LdapStore {
    /// First use wins: one add of the entry named by the key's digest. If it exists, the
    /// same key and certname may claim again while the claim is held (a refused request's)
    /// or, for the CA, while no certificate was stored for it; anyone else is refused.
    fn claim(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        usage: ClaimUse,
        serial: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Claim, StoreError> {
        check_certname(certname)?;
        check_hex("holder", holder)?;
        if let Some(s) = serial {
            check_hex("serial", s)?;
        }
        self.prune_now_and_then(now)?;
        if let Some(legacy) = key.legacy.as_ref().filter(|_| self.legacy_claims()) {
            if let (_, Some(prior)) = self.journal_entry(legacy)? {
                return Ok(Self::used(&prior));
            }
        }
        let digest = crate::store::claim_digest(&key.key);
        let dn = self.journal_dn(&digest);
        let state = match usage {
            ClaimUse::Reusable => "claimed",
            ClaimUse::Once => "spent",
        };
        // A held or stale claim is taken over by a compare-and-swap modify; a writer racing us
        // makes it fail (no such value), and we read again (bounded).
        for _ in 0..8 {
            let code = self.add(&dn, Self::claim_attrs(&digest, certname, holder, state, serial, expiry, now))?;
            if code == rc::SUCCESS {
                if usage == ClaimUse::Reusable {
                    crate::store::crash_point("ldap:claimed");
                }
                self.confirm_on_replicas(&dn, Written::Claim)?;
                return Ok(Claim::Fresh);
            }
            let Some(prior) = self.read(&self.primary, &dn)? else { continue };
            let same = prior.text("vouchHolder").as_deref() == Some(holder)
                && prior.text("vouchCertname").as_deref() == Some(certname);
            let prior_state = prior.text("vouchState").unwrap_or_default();
            let open = match (prior_state.as_str(), usage) {
                ("held", _) => true,
                ("claimed", ClaimUse::Reusable) => !self.claim_issued(&prior)?,
                _ => false,
            };
            if !(same && open) {
                return Ok(Self::used(&prior));
            }
            // Only while the entry still is in the state read and this holder's (ops::cas: the
            // values read deleted, the new ones added, in one modify): `open` holds only for a
            // held or claimed entry.
            let mut mods = cas("vouchState", prior_state.as_str(), state).to_vec();
            mods.extend(cas("vouchHolder", holder, holder));
            mods.push(Mod::Replace(b"vouchTime".to_vec(), set(gtime(now))));
            mods.push(Mod::Replace(
                b"vouchSerial".to_vec(),
                serial.map(|s| set(s.as_bytes().to_vec())).unwrap_or_default(),
            ));
            if self.modify(&dn, mods)? == rc::SUCCESS {
                self.confirm_on_replicas(&dn, Written::Claim)?;
                return Ok(Claim::Fresh);
            }
        }
        Err(StoreError::Conflict {
            what: format!("the replay-journal entry {dn} kept changing under concurrent claims"),
        })
    }

    fn hold(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> Result<Claim, StoreError> {
        check_certname(certname)?;
        check_hex("holder", holder)?;
        if let Some(legacy) = key.legacy.as_ref().filter(|_| self.legacy_claims()) {
            if let (_, Some(prior)) = self.journal_entry(legacy)? {
                let same = prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname);
                if !same {
                    return Ok(Self::used(&prior));
                }
            }
        }
        let digest = crate::store::claim_digest(&key.key);
        let dn = self.journal_dn(&digest);
        // Held for this key only once every replica shows it (a failover must not free it).
        if self.add(&dn, Self::claim_attrs(&digest, certname, holder, "held", None, expiry, now))? == rc::SUCCESS {
            self.confirm_on_replicas(&dn, Written::Claim)?;
            return Ok(Claim::Fresh);
        }
        match self.read(&self.primary, &dn)? {
            Some(prior)
                if prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname) =>
            {
                self.confirm_on_replicas(&dn, Written::Claim)?;
                Ok(Claim::Fresh)
            }
            Some(prior) => Ok(Self::used(&prior)),
            // Pruned between the two calls: it expired long ago.
            None => Ok(Claim::Fresh),
        }
    }

    fn peek(
        &self,
        key: &ReplayKey,
        _expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
    ) -> Result<Claim, StoreError> {
        let legacy = key.legacy.as_ref().filter(|_| self.legacy_claims());
        for k in std::iter::once(&key.key).chain(legacy) {
            if let (_, Some(prior)) = self.journal_entry(k)? {
                let same = prior.text("vouchHolder").as_deref() == Some(holder)
                    && prior.text("vouchCertname").as_deref() == Some(certname);
                if !(same && prior.text("vouchState").as_deref() == Some("held")) {
                    return Ok(Self::used(&prior));
                }
            }
        }
        Ok(Claim::Fresh)
    }

    fn count_use(
        &self,
        u: &crate::store::templates::TemplateUse,
    ) -> Result<crate::store::templates::Counted, StoreError> {
        self.count_template_use(u)
    }

    fn peek_use(
        &self,
        u: &crate::store::templates::TemplateUse,
    ) -> Result<crate::store::templates::Counted, StoreError> {
        self.peek_template_use(u)
    }

    fn describe(&self) -> String {
        Store::describe(self)
    }
}
