//! Pruning the journal: whole buckets removed a day after their hour has passed (their
//! attributes expired long since), within a time budget at a claim, or without one in
//! `vouch serve`'s maintenance; never through a link.

use super::Journal;
use std::io;
use std::path::PathBuf;
use std::time::Duration;
use time::OffsetDateTime;

pub fn parse_bucket(s: &str) -> Option<OffsetDateTime> {
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| s.get(a..b).and_then(|x| x.parse::<u32>().ok());
    let date = time::Date::from_calendar_date(
        i32::try_from(n(0, 4)?).ok()?,
        time::Month::try_from(u8::try_from(n(4, 6)?).ok()?).ok()?,
        u8::try_from(n(6, 8)?).ok()?,
    )
    .ok()?;
    let hour = time::Time::from_hms(u8::try_from(n(8, 10)?).ok()?, 0, 0).ok()?;
    Some(date.with_time(hour).assume_utc())
}

/// How long a claim may spend removing expired buckets, in a process whose maintenance
/// does not prune (a hook, a command): a hook is never held up long; what is left is removed
/// by the next one.
pub(super) const PRUNE_AT_CLAIM: std::time::Duration = std::time::Duration::from_millis(250);

pub(super) static PRUNED_IN_MAINTENANCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Claims in this process no longer prune: its maintenance calls [`Journal::prune_within`]
/// outside the store's lock instead (`vouch serve`).
pub fn prune_in_maintenance() {
    PRUNED_IN_MAINTENANCE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// What [`Journal::prune_within`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Entries removed.
    pub removed: u64,
    /// An expired bucket is left (the budget ran out, or something in it is not a file).
    pub left: bool,
}

impl Journal {
    /// [`Journal::prune`], at most once a minute per directory in a long-running
    /// process, for at most [`PRUNE_AT_CLAIM`] (a hook process prunes once). Not at all in
    /// a process whose maintenance prunes ([`prune_in_maintenance`]: `vouch serve` claims
    /// under the store's lock, and a bucket of a busy hour holds hundreds of thousands of
    /// entries: 200,000 took 18 s to remove here).
    pub(super) fn prune_now_and_then(&self, now: OffsetDateTime) -> io::Result<()> {
        if PRUNED_IN_MAINTENANCE.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        // The wall clock, never a decision's `now` (`--now` may name any time: a far
        // future one would remove every bucket, and attributes could be used again).
        let now = now.min(OffsetDateTime::now_utc());
        static LAST: std::sync::Mutex<Vec<(PathBuf, OffsetDateTime)>> = std::sync::Mutex::new(Vec::new());
        {
            let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
            match last.iter_mut().find(|(d, _)| *d == self.dir) {
                Some((_, t)) if (now - *t).abs() < time::Duration::minutes(1) => return Ok(()),
                Some((_, t)) => *t = now,
                None => last.push((self.dir.clone(), now)),
            }
        }
        // Buckets only: instance claims are pruned by bound requests
        // ([`Journal::prune_instances_now_and_then`]) and by maintenance.
        self.prune_buckets_within(now, PRUNE_AT_CLAIM, false).map(|_| ())
    }

    /// Removes buckets whose hour ended more than a day ago (their attributes
    /// expired long since; the day covers clocks that disagree).
    pub fn prune(&self, now: OffsetDateTime) -> io::Result<()> {
        self.prune_within(now, std::time::Duration::MAX).map(|_| ())
    }

    /// [`Journal::prune`] for about `budget` at most: entries are removed one at a time
    /// and the clock is read every 256; a bucket left half-removed is finished by a later
    /// call. Never needs the store's lock: no claim goes into a bucket this old. Returns
    /// how many entries it removed and whether an expired bucket is left.
    pub fn prune_within(&self, now: OffsetDateTime, budget: std::time::Duration) -> io::Result<Pruned> {
        self.prune_buckets_within(now, budget, true)
    }

    /// [`Journal::prune_within`], the instance claims too if `instances`.
    fn prune_buckets_within(&self, now: OffsetDateTime, budget: Duration, instances: bool) -> io::Result<Pruned> {
        let start = std::time::Instant::now();
        let over = || start.elapsed() >= budget;
        let mut pruned = Pruned { removed: 0, left: false };
        // The journal's directory as the policy names it (a link there is followed, as
        // claims follow it); everything under it through this descriptor.
        let root = match crate::files::durable::NoFollowDir::open_followed(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(pruned),
            Err(e) => return Err(e),
        };
        for name in root.names()? {
            let expired = name
                .to_str()
                .and_then(parse_bucket)
                .and_then(|h| h.checked_add(time::Duration::hours(25)))
                .is_some_and(|t| t < now);
            if !expired {
                continue;
            }
            if over() {
                pruned.left = true;
                break;
            }
            // Opened relative to the journal's descriptor, never through a link: a bucket
            // that is a link (or a file) is removed as such, never followed.
            let bucket = match root.open_child(&name) {
                Ok(b) => b,
                Err(_) => {
                    if root.unlink(&name).is_err() {
                        pruned.left = true;
                    }
                    continue;
                }
            };
            // A chunk of names at a time (a busy hour's bucket holds hundreds of thousands).
            let mut finished = true;
            let mut kept = std::collections::HashSet::new();
            loop {
                let chunk = bucket.first_names(kept.len() + 256)?;
                let fresh: Vec<_> = chunk.into_iter().filter(|n| !kept.contains(n)).collect();
                if fresh.is_empty() {
                    break;
                }
                if over() {
                    finished = false;
                    break;
                }
                for (i, entry) in fresh.into_iter().enumerate() {
                    if i % 32 == 31 && over() {
                        finished = false;
                        break;
                    }
                    // An entry is a file; anything else (a directory someone made) is left,
                    // and so is the bucket.
                    match bucket.unlink(&entry) {
                        Ok(()) => pruned.removed += 1,
                        Err(_) => {
                            kept.insert(entry);
                        }
                    }
                }
                if !finished {
                    break;
                }
            }
            if !finished || root.rmdir(&name).is_err() {
                pruned.left = true;
                if !finished {
                    break;
                }
            }
        }
        if instances {
            self.prune_instance_claims(now, &over, &mut pruned);
        }
        Ok(pruned)
    }
}
