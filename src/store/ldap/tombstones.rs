//! The purge of cleaned certnames' tombstones (`vouch purge --tombstones`).
//!
//! A cleaned certname's registry entry stays as a tombstone ([`CLEANED`]): a delete cannot be
//! made conditional without the assertion control. Nothing reads it as a certificate (it reads
//! as no entry); the revocation entry under the CA that issued it keeps what the CRL and the
//! claims need (the certificate, its record, the claim's key). So a tombstone may go once its
//! certificate expired a CRL period ago: off every CRL by then, and past any use. Its
//! revocation entry is given the certificate first where it lacks it (written by an older
//! version), so that nothing the tombstone held is lost.
//!
//! The race: a delete is unconditional, and a new certificate of the name replaces a
//! tombstone by compare-and-swap on its revision (`registry.rs`); a delete that landed after
//! that swap would erase the new certificate's entry. So the purge is two writes:
//! 1. the tombstone swapped (its revision and its state, read) into [`PURGING`]: a state no
//!    issuance replaces (it reports a conflict, and its caller tries again) and that reads
//!    as no entry. A new certificate swapped in first makes this modify fail: nothing purged;
//! 2. the delete, by the process whose swap won, at once. Between the two, nobody changes
//!    the entry (no writer accepts a `purging` entry), so the delete removes the tombstone
//!    and nothing else.
//!
//! A purger that died between the two leaves the entry `purging` (its name then refuses new
//! certificates, as a conflict; `vouch store verify` names it, purge-unfinished). A later
//! purge takes it over by the same swap (its revision, the state kept `purging`; of two, one
//! wins) and deletes only when the SERVER's times say the entry was `purging` for
//! [`TAKEOVER`] at least: the `modifyTimestamp` read before its swap (the last purger's swap)
//! and the one its own swap gave (the server's now). Younger, it leaves the entry for a later
//! run. Neither the client's clock nor `--now` shortens that margin (they only decide which
//! certificates count as expired, and whether a takeover is worth trying: the earlier of
//! `--now` and the wall clock). A purger deletes within [`OWN_DEADLINE`] of its swap (its
//! monotonic clock), or leaves the delete to a later purge.
//!
//! The residual: a delete sent in time but held in transit (a stalled network, a queue on
//! the server) for longer than [`TAKEOVER`] less [`OWN_DEADLINE`] lands after a takeover's
//! delete and, if a new certificate of the name was issued meanwhile, erases that entry. TCP
//! gives up on a connection whose data goes unacknowledged for about 15 minutes (Linux's
//! default retransmission limit), well inside the margin, so this needs a server that
//! accepted the request and sat on it for half an hour. Deleting a `purging` entry twice is
//! harmless; only a delete after a NEW certificate is the danger, and issuance never
//! replaces a `purging` entry.
//!
//! A `purging` entry whose certificate has not expired a CRL period ago is no purge's (a
//! purge swaps only tombstones past that): the purge says so and leaves it (`vouch store
//! verify` names it, purging-live-certificate).
//!
//! Masters of a version before tombstones read one as the name's revoked certificate, and
//! may replace it (also a `purging` one) with their own swap: run no purge during a rolling
//! upgrade (docs/ldap.md).

use super::conn::rc;
use super::entry::{check_certname, check_hex, gtime, gtime_to_rfc3339, Entry};
use super::ops::cas;
use super::{LdapStore, CLEANED, PURGING};
use crate::store::{StoreError, Tombstone, WriteLock};
use ldap3::Scope;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// How long (the server's times) a `purging` entry stays so before a later purge deletes it:
/// its purger died between its two writes, or its delete is lost.
pub(crate) const TAKEOVER: time::Duration = time::Duration::minutes(30);

/// The longest a purger waits between its swap and its delete: later, it leaves the delete to
/// a later purge ([`TAKEOVER`] is far beyond it).
const OWN_DEADLINE: Duration = Duration::from_secs(120);

impl LdapStore {
    /// [`Store::purge_tombstones`](crate::store::Store::purge_tombstones): one paged search for
    /// the tombstones (and purges left unfinished), each whose certificate expired before
    /// `before` listed, and removed when `lock` is given.
    pub(super) fn old_tombstones(
        &self,
        lock: Option<&WriteLock>,
        before: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Vec<Tombstone>, StoreError> {
        let filter = format!(
            "(&(objectClass=vouchRegistered)(|(vouchState={PURGING})(&(vouchState={CLEANED})(vouchNotAfter<={}))))",
            gtime(before)
        );
        let attrs = [
            "vouchCertname",
            "vouchSerial",
            "vouchCa",
            "vouchState",
            "vouchRevision",
            "vouchNotAfter",
            "vouchSupersedes",
            "vouchCertificate",
            "modifyTimestamp",
        ];
        let found = self.search(&self.container("certnames"), Scope::OneLevel, &filter, &attrs)?;
        let mut out = Vec::new();
        for e in found {
            match self.purge_one(&e, lock.is_some(), before, now) {
                Ok(Some(t)) => out.push(t),
                Ok(None) => {}
                Err(err @ StoreError::Unavailable { .. }) => return Err(err),
                Err(err) => tracing::warn!(event = "warning", what = "store", dn = %e.dn, detail = %err),
            }
        }
        Ok(out)
    }

    /// One tombstone: listed (`Some`) if it may go, and removed if `remove`; `None` when it
    /// stays (a supersede mark to finish first, a purge of another process under way, no
    /// revocation entry to keep its certificate, or a new certificate swapped in meanwhile).
    fn purge_one(
        &self,
        e: &Entry,
        remove: bool,
        before: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<Option<Tombstone>, StoreError> {
        let certname = e.need("vouchCertname")?;
        check_certname(&certname)?;
        let (serial, ca, state) = (e.need("vouchSerial")?, e.need("vouchCa")?, e.need("vouchState")?);
        check_hex("serial", &serial)?;
        check_hex("CA id", &ca)?;
        if e.bytes("vouchSupersedes").is_some() {
            return Ok(None);
        }
        // Its revocation entry keeps what the tombstone holds (the certificate, where an
        // older version did not put it there); none: the tombstone is kept. A `purging` entry
        // without one is a live certificate's, no purge's: said, and left.
        let revocation = self.revocation_dn(&ca, &serial);
        if self.read_attrs(&self.primary, &revocation, &["1.1"])?.is_none() {
            return Err(e.damaged(if state == PURGING {
                format!(
                    "{certname} is marked purging, but its certificate {serial} was never revoked (no \
                     revocation entry {revocation}): no purge's; left as it is (vouch store verify names it)"
                )
            } else {
                format!("no revocation entry {revocation}: the tombstone is kept")
            }));
        }
        let not_after = e.text("vouchNotAfter").unwrap_or_default();
        if state == PURGING && (not_after.get(..14).is_none_or(|t| t > &gtime(before)[..14]) || !old_enough(e, now)) {
            // Another purge's, under way (or too recent to tell), or one this purge's time
            // and CRL period would not have started.
            return Ok(None);
        }
        let found = Tombstone { certname, serial, not_after: gtime_to_rfc3339(&not_after) };
        if !remove {
            // A dry run writes nothing (the certificate is copied when the purge is confirmed).
            return Ok(Some(found));
        }
        self.keep_certificate(&revocation, e.bytes("vouchCertificate"))?;
        // 1. Swapped into PURGING (its revision and state as read): a new certificate swapped
        //    in first makes this fail; so does another purge's takeover.
        let revision = e.revision()?;
        let mut mods = cas("vouchRevision", revision.to_string(), revision.saturating_add(1).to_string()).to_vec();
        if state != PURGING {
            mods.extend(cas("vouchState", state.as_str(), PURGING));
        }
        let swapped = Instant::now();
        if self.modify(&e.dn, mods)? != rc::SUCCESS {
            return Ok(None);
        }
        crate::store::crash_point("ldap:tombstone-purging");
        // A takeover: the server's times, before and after its swap, must be TAKEOVER apart.
        if state == PURGING && !self.held_long_enough(e, revision.saturating_add(1))? {
            return Ok(None);
        }
        // 2. Deleted by this process, at once; too late, left to a later purge.
        if swapped.elapsed() > OWN_DEADLINE {
            return Ok(None);
        }
        self.delete(&e.dn)?;
        Ok(Some(found))
    }

    /// After a takeover's swap: whether the entry (still at the `revision` the swap wrote)
    /// was `purging` for [`TAKEOVER`] by the server's clock, from the `modifyTimestamp` read
    /// before the swap (`e`) to the one the swap gave it.
    fn held_long_enough(&self, e: &Entry, revision: u64) -> Result<bool, StoreError> {
        let Some(now) = self.read_attrs(&self.primary, &e.dn, &["vouchRevision", "modifyTimestamp"])? else {
            return Ok(false);
        };
        if now.revision()? != revision {
            return Ok(false);
        }
        let (Some(since), Some(until)) = (server_time(e), server_time(&now)) else { return Ok(false) };
        Ok(until - since >= takeover_age())
    }
}

/// The server's `modifyTimestamp` of an entry (GeneralizedTime, to the second).
fn server_time(e: &Entry) -> Option<OffsetDateTime> {
    let t = e.text("modifyTimestamp")?;
    let format = time::macros::format_description!("[year][month][day][hour][minute][second]");
    time::PrimitiveDateTime::parse(t.get(..14)?, &format).ok().map(|t| t.assume_utc())
}

/// Whether a takeover is worth trying: the entry's `modifyTimestamp` [`TAKEOVER`] old by the
/// earlier of `now` and the wall clock (a later `--now` does not make it so). Only a hint: the
/// delete waits for the server's own times ([`LdapStore::held_long_enough`]).
fn old_enough(e: &Entry, now: OffsetDateTime) -> bool {
    let now = now.min(OffsetDateTime::now_utc());
    server_time(e).is_some_and(|since| now - since >= takeover_age())
}

/// [`TAKEOVER`]; the tests (built with fault injection) may set it in seconds
/// (`VOUCH_TEST_TAKEOVER_SECS`), to see a takeover without waiting half an hour.
fn takeover_age() -> time::Duration {
    #[cfg(feature = "fault-injection")]
    if let Some(s) = std::env::var("VOUCH_TEST_TAKEOVER_SECS").ok().and_then(|s| s.parse().ok()) {
        return time::Duration::seconds(s);
    }
    TAKEOVER
}
