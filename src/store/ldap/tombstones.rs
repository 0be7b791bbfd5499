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
//! certificates, as a conflict). A later purge takes it over once the server's
//! `modifyTimestamp` of it is [`STUCK`] old, by the same swap (of two, one wins); and a purger
//! that took more than [`OWN_DEADLINE`] between its swap and its delete does not delete (the
//! later purge will), so the two never both delete unless a process stalls for minutes between
//! reading its clock and sending a delete.
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

/// How old (the server's `modifyTimestamp`) a `purging` entry is before a later purge takes
/// it over: its purger died between its two writes.
const STUCK: time::Duration = time::Duration::minutes(10);

/// The longest a purger waits between its swap and its delete: later, it leaves the delete to
/// a later purge ([`STUCK`] is far beyond it).
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
            "(&(objectClass=vouchRegistered)(|(vouchState={CLEANED})(vouchState={PURGING}))(vouchNotAfter<={}))",
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
            match self.purge_one(&e, lock.is_some(), now) {
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
    fn purge_one(&self, e: &Entry, remove: bool, now: OffsetDateTime) -> Result<Option<Tombstone>, StoreError> {
        let certname = e.need("vouchCertname")?;
        check_certname(&certname)?;
        let (serial, ca, state) = (e.need("vouchSerial")?, e.need("vouchCa")?, e.need("vouchState")?);
        check_hex("serial", &serial)?;
        check_hex("CA id", &ca)?;
        if e.bytes("vouchSupersedes").is_some() {
            return Ok(None);
        }
        if state == PURGING {
            // Another purge's, under way unless it is STUCK old.
            let changed = e.text("modifyTimestamp").unwrap_or_default();
            let Some(stuck) = now.checked_sub(STUCK) else { return Ok(None) };
            if changed.get(..14).is_none_or(|t| t > &gtime(stuck)[..14]) {
                return Ok(None);
            }
        }
        // Its revocation entry keeps what the tombstone holds (the certificate, where an
        // older version did not put it there); none: the tombstone is kept.
        let revocation = self.revocation_dn(&ca, &serial);
        if self.read_attrs(&self.primary, &revocation, &["1.1"])?.is_none() {
            return Err(e.damaged(format!("no revocation entry {revocation}: the tombstone is kept")));
        }
        self.keep_certificate(&revocation, e.bytes("vouchCertificate"))?;
        let found = Tombstone {
            certname,
            serial,
            not_after: e.text("vouchNotAfter").map(|t| gtime_to_rfc3339(&t)).unwrap_or_default(),
        };
        if !remove {
            return Ok(Some(found));
        }
        // 1. Swapped into PURGING (its revision and state as read): a new certificate swapped
        //    in first makes this fail.
        let revision = e.revision()?;
        let mut mods = cas("vouchRevision", revision.to_string(), revision.saturating_add(1).to_string()).to_vec();
        mods.extend(cas("vouchState", state.as_str(), PURGING));
        let swapped = Instant::now();
        if self.modify(&e.dn, mods)? != rc::SUCCESS {
            return Ok(None);
        }
        crate::store::crash_point("ldap:tombstone-purging");
        // 2. Deleted by this process, at once; too late, left to a later purge.
        if swapped.elapsed() > OWN_DEADLINE {
            return Ok(None);
        }
        self.delete(&e.dn)?;
        Ok(Some(found))
    }
}
