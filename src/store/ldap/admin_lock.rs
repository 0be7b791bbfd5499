//! The fleet's lock on revocations of valid administrator certificates in the shared store
//! (the rules: [`crate::store::admin_lock`]): the entry `vouchCa=admin-revocation-lock`
//! directly under the base DN, beside the CRLs' entries and of their class (`vouchIssuer`:
//! no schema change), its value in `vouchCertificate`. `vouch ldap init` adds it free; the
//! first taker adds it where it is missing (one add of a DN succeeds). Every change is one
//! modify deleting the exact value read and adding the new one ([`cas`]): of two masters
//! taking the lock from the same value, one modify applies, the other finds no such value
//! and writes nothing. Plain adds and modifies only: OpenLDAP and 389 Directory Server alike.
//! Under the base DN, where only the masters' bind DN writes: the hooks' account (the
//! journal's) can neither hold the lock nor free it.

use super::conn::rc;
use super::entry::set;
use super::ops::cas;
use super::LdapStore;
use crate::encoding::time::format_rfc3339;
use crate::store::admin_lock::{self, next_step, Hold, Step, FREE};
use crate::store::StoreError;
use std::io::Write;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// The RDN of the lock's entry, directly under the base DN (its `vouchCa` value is no master
/// CA's id: those are hex, under `ou=cas`).
pub const ADMIN_LOCK_RDN: &str = "vouchCa=admin-revocation-lock";

/// The attribute holding the lock's value.
const VALUE: &str = "vouchCertificate";

/// How long a taker waits before it reads a held lock again.
const POLL: Duration = Duration::from_millis(100);

impl LdapStore {
    /// The lock's entry.
    pub fn admin_lock_dn(&self) -> String {
        format!("{ADMIN_LOCK_RDN},{}", self.base)
    }

    /// The entry's attributes, holding `value`.
    fn admin_lock_entry(value: &str) -> Vec<(&'static str, std::collections::HashSet<Vec<u8>>)> {
        vec![
            ("objectClass", set("vouchIssuer")),
            ("vouchCa", set(ADMIN_LOCK_RDN.trim_start_matches("vouchCa="))),
            ("vouchRevision", set("0")),
            (VALUE, set(value.as_bytes().to_vec())),
        ]
    }

    /// `vouch ldap init`: the lock's entry, free, where there is none; whether it was added.
    pub(super) fn init_admin_lock(&self) -> Result<bool, StoreError> {
        Ok(self.add(&self.admin_lock_dn(), Self::admin_lock_entry(FREE))? == rc::SUCCESS)
    }

    /// The lock's value (`None`: no entry; an entry without a value reads as empty, which no
    /// taker takes over).
    fn admin_lock_value(&self) -> Result<Option<String>, StoreError> {
        let e = self.read_attrs(&self.primary, &self.admin_lock_dn(), &[VALUE])?;
        Ok(e.map(|e| e.text(VALUE).unwrap_or_default()))
    }

    /// Takes the lock: from free, or from a holder whose time passed; waits for a live holder
    /// [`admin_lock::WAIT_BEYOND_LEASE`] longer than a [`admin_lock::lease`] at most, then
    /// fails closed ([`StoreError::AdminRevocationBusy`]). A command line's wait is told on
    /// stderr, once.
    pub(super) fn take_admin_lock(&self) -> Result<LdapHold<'_>, StoreError> {
        let holder = format!("{}-{}-{}", self.ca.as_deref().unwrap_or("hook"), std::process::id(), nonce()?);
        let (dn, lease) = (self.admin_lock_dn(), admin_lock::lease());
        let started = Instant::now();
        let limit = lease.saturating_add(admin_lock::WAIT_BEYOND_LEASE);
        let mut told = false;
        // The value last read and when this master first read it (its own monotonic clock).
        let mut seen: Option<(Option<String>, Instant)> = None;
        loop {
            let now = OffsetDateTime::now_utc();
            let mine = admin_lock::held(&holder, now.saturating_add(to_time(lease)));
            let read = self.admin_lock_value()?;
            let since = match &seen {
                Some((value, at)) if *value == read => *at,
                _ => Instant::now(),
            };
            seen = Some((read.clone(), since));
            let code = match next_step(read.as_deref(), since.elapsed(), lease) {
                Step::Add => self.add(&dn, Self::admin_lock_entry(&mine))?,
                Step::Swap { old } => self.modify(&dn, cas(VALUE, old, mine.as_str()).to_vec())?,
                Step::Wait { holder: other, until } => {
                    let until = format_rfc3339(until);
                    let left = limit.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Err(StoreError::AdminRevocationBusy { holder: other, until, lost: false });
                    }
                    if !told && self.announce.load(std::sync::atomic::Ordering::Relaxed) {
                        // Never eprintln!: it panics when stderr cannot be written.
                        let _ = writeln!(
                            std::io::stderr(),
                            "vouch: waiting for another master's revocation of an administrator certificate (the \
                             fleet's lock on them is held by {other} until {until})"
                        );
                        told = true;
                    }
                    std::thread::sleep(POLL.min(left));
                    continue;
                }
                Step::Damaged { value } => {
                    return Err(StoreError::Ldap {
                        op: "take the lock on revocations of administrator certificates",
                        dn,
                        detail: format!(
                            "its vouchCertificate is {value:?}, which vouch never writes (\"free\", or \"HOLDER \
                             until TIME\"): nothing is taken over; if no revocation runs, set it to free with \
                             ldapmodify (docs/ldap.md, \"Revoking an administrator\")"
                        ),
                    })
                }
            };
            if code == rc::SUCCESS {
                crate::store::crash_point("admin-lock:taken");
                return Ok(LdapHold { store: self, holder, confirms: 0, value: mine });
            }
            // Another master took it from the same value first: read it again (within the wait).
            if started.elapsed() >= limit {
                let until = "its own time".to_string();
                return Err(StoreError::AdminRevocationBusy { holder: "another master".into(), until, lost: false });
            }
        }
    }
}

/// A lease as the time crate's duration (a minute if it were out of its range).
fn to_time(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MINUTE)
}

/// 8 random bytes, hex: one take of the lock from another by the same process.
fn nonce() -> Result<String, StoreError> {
    let mut b = [0u8; 8];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| StoreError::Unavailable { detail: "no randomness available".into() })?;
    Ok(crate::encoding::hex(&b))
}

/// The lock, held by this process ([`LdapStore::take_admin_lock`]); given back (swapped to
/// free) when dropped, unless another master took it over meanwhile.
pub(super) struct LdapHold<'a> {
    store: &'a LdapStore,
    holder: String,
    /// Confirms made: each writes `HOLDER.N`, so that a confirm always changes the value
    /// (a taker watching it counts its lease again), even within the second of the take.
    confirms: u32,
    /// The value this holder last wrote.
    value: String,
}

impl Hold for LdapHold<'_> {
    fn confirm(&mut self) -> Result<(), StoreError> {
        let lease = admin_lock::lease();
        let now = OffsetDateTime::now_utc();
        self.confirms = self.confirms.saturating_add(1);
        let me = format!("{}.{}", self.holder, self.confirms);
        let next = admin_lock::held(&me, now.saturating_add(to_time(lease)));
        let dn = self.store.admin_lock_dn();
        let sent = Instant::now();
        if self.store.modify(&dn, cas(VALUE, self.value.as_str(), next.as_str()).to_vec())? == rc::SUCCESS {
            self.value = next;
            if admin_lock::confirmed_in_time(sent.elapsed(), lease) {
                return Ok(());
            }
            // Heard too late to be sure no taker's lease ends before this write would: nothing
            // is written (the hold is given back when dropped, if still this holder's).
            let took_ms = u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX);
            return Err(StoreError::AdminLockLate { took_ms });
        }
        // Taken over: whoever holds it now, as far as a read tells.
        let now_read = self.store.admin_lock_value()?.unwrap_or_default();
        let (holder, until) = match admin_lock::parse_held(&now_read) {
            Some((h, u)) => (h.to_string(), format_rfc3339(u)),
            None => ("another master".to_string(), "its own time".to_string()),
        };
        // Nothing of this hold is left to give back.
        self.value.clear();
        Err(StoreError::AdminRevocationBusy { holder, until, lost: true })
    }
}

impl Drop for LdapHold<'_> {
    fn drop(&mut self) {
        if self.value.is_empty() {
            return;
        }
        let dn = self.store.admin_lock_dn();
        // Not this holder's any more (taken over after its time): nothing to give back. Not
        // given back (the server unreachable): the next taker takes it over once its time passes.
        if let Err(err) = self.store.modify(&dn, cas(VALUE, self.value.as_str(), FREE).to_vec()) {
            let detail = format!("the lock was not given back (it passes at its time): {err}");
            tracing::warn!(event = "warning", what = "store", dn = %dn, detail = %detail);
        }
    }
}
