//! The fleet's lock on revocations of valid administrator certificates, as a shared store
//! keeps it (docs/ldap.md, "Revoking an administrator"): the last-administrator guard's count
//! and the revocation it allows run under one holder at a time across every master, as the
//! file store's one lock makes them run on one host. One value, [`FREE`] or `HOLDER until
//! UNTIL` (RFC 3339, UTC, for the people reading it), changed only by compare-and-swap: taken
//! from free, taken over from a holder whose exact value a taker has itself seen unchanged for
//! a whole lease on its own monotonic clock (a master killed while it held it; no master's
//! wall clock is compared with another's), confirmed (the value changed) just before the
//! revocation is written, given back to free after it. A holder whose confirm took more than
//! half a lease writes nothing ([`confirmed_in_time`]): a taker's lease, counted from the
//! moment it first read the confirmed value, cannot end before the holder's write does. What
//! a master does with the value it read is decided here, with no I/O and no clock: the store
//! reads, writes and tells the time (`ldap/admin_lock.rs`).

use crate::encoding::time::{format_rfc3339, parse_rfc3339};
use std::time::Duration;
use time::OffsetDateTime;

/// The value of a lock no one holds.
pub const FREE: &str = "free";

/// What separates a holder from its time in a held value.
const UNTIL: &str = " until ";

/// How long a holder holds the lock without confirming it: longer than a guard's count and a
/// revocation take (a walk over the fleet's certificates, two writes, the CRL), short enough
/// that a master killed while it held it keeps the others waiting no longer.
pub const LEASE: Duration = Duration::from_secs(30);

/// How much longer than a [`lease`] a revocation waits for the lock before it fails closed
/// (another master's holder, until its time passes and the lock is taken over).
pub const WAIT_BEYOND_LEASE: Duration = Duration::from_secs(10);

/// [`LEASE`]; in a build with fault injection, `VOUCH_TEST_ADMIN_LOCK_SECS` if set (the tests
/// of a killed holder wait seconds, not half a minute).
pub fn lease() -> Duration {
    #[cfg(feature = "fault-injection")]
    {
        static SET: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let set = SET.get_or_init(|| std::env::var("VOUCH_TEST_ADMIN_LOCK_SECS").ok().and_then(|v| v.parse().ok()));
        if let Some(secs) = set {
            return Duration::from_secs(*secs);
        }
    }
    LEASE
}

/// The lock, held ([`crate::store::Store::hold_admin_revocations`]); given back when dropped.
pub trait Hold: Send {
    /// Just before the revocation is written: checks that this holder still holds the lock
    /// (one whose time passed may have been taken over: then an error, and nothing may be
    /// written) and holds it a full [`lease`] from now.
    fn confirm(&mut self) -> Result<(), crate::store::StoreError>;
}

/// A holder's value: `holder` (no spaces) holding the lock until `until`.
pub fn held(holder: &str, until: OffsetDateTime) -> String {
    format!("{holder}{UNTIL}{}", format_rfc3339(until))
}

/// What a read of the lock tells a master that wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No lock entry: add it, held (the add of one DN succeeds once).
    Add,
    /// Free, or held by a holder whose time passed: swap exactly this value for the taker's.
    Swap { old: String },
    /// Held by `holder` until `until`: wait, and read it again.
    Wait { holder: String, until: OffsetDateTime },
    /// A value vouch never writes: nothing is taken over (fail closed).
    Damaged { value: String },
}

/// What to do with the lock's value `read` (`None`: no entry), which this master has seen
/// unchanged for `unchanged_for` (by its own monotonic clock, from its first read of that
/// exact value), for a lock of `lease`.
pub fn next_step(read: Option<&str>, unchanged_for: Duration, lease: Duration) -> Step {
    let Some(value) = read else { return Step::Add };
    if value == FREE {
        return Step::Swap { old: value.to_string() };
    }
    match parse_held(value) {
        Some(_) if unchanged_for >= lease => Step::Swap { old: value.to_string() },
        Some((holder, until)) => Step::Wait { holder: holder.to_string(), until },
        None => Step::Damaged { value: value.to_string() },
    }
}

/// Whether a holder whose confirm was answered `took` after it was sent may write its
/// revocation: only within half a `lease`, so that the write ends before any taker's lease
/// (counted from its first read of the confirmed value, at the earliest when the confirm was
/// sent) can.
pub fn confirmed_in_time(took: Duration, lease: Duration) -> bool {
    took <= lease / 2
}

/// The holder and time of a held value; `None` for anything else.
pub fn parse_held(value: &str) -> Option<(&str, OffsetDateTime)> {
    let (holder, until) = value.split_once(UNTIL)?;
    let usable = !holder.is_empty() && holder.bytes().all(|b| b.is_ascii_graphic());
    usable.then_some(())?;
    Some((holder, parse_rfc3339(until).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> OffsetDateTime {
        parse_rfc3339(s).unwrap()
    }

    /// No entry is added; free is taken; a holder is waited for until this master has seen
    /// its exact value unchanged for a whole lease (whatever time the value names: a holder's
    /// clock ahead or behind changes nothing), then taken over; anything else is never taken.
    #[test]
    fn each_value_read_says_what_to_do() {
        let lease = Duration::from_secs(30);
        let (none, almost) = (Duration::ZERO, Duration::from_millis(29_999));
        assert_eq!(next_step(None, none, lease), Step::Add);
        assert_eq!(next_step(Some("free"), none, lease), Step::Swap { old: "free".into() });
        // A time long past, as a holder whose clock runs behind writes it: still waited for.
        let live = held("ab12-77-c0ffee", at("2000-01-01T00:00:00Z"));
        assert_eq!(live, "ab12-77-c0ffee until 2000-01-01T00:00:00Z");
        let wait = Step::Wait { holder: "ab12-77-c0ffee".into(), until: at("2000-01-01T00:00:00Z") };
        assert_eq!(next_step(Some(&live), none, lease), wait);
        assert_eq!(next_step(Some(&live), almost, lease), wait);
        assert_eq!(next_step(Some(&live), lease, lease), Step::Swap { old: live.clone() });
        for damaged in
            ["", "FREE ", "held", " until 2026-11-29T17:00:01Z", "a b until 2026-11-29T17:00:01Z", "x until soon"]
        {
            let step = next_step(Some(damaged), Duration::from_secs(3600), lease);
            assert_eq!(step, Step::Damaged { value: damaged.into() }, "{damaged:?}");
        }
    }

    /// A confirm answered within half a lease lets the holder write; a later one does not.
    #[test]
    fn a_confirm_heard_late_writes_nothing() {
        let lease = Duration::from_secs(30);
        assert!(confirmed_in_time(Duration::from_millis(3), lease));
        assert!(confirmed_in_time(Duration::from_secs(15), lease));
        assert!(!confirmed_in_time(Duration::from_millis(15_001), lease));
    }
}
