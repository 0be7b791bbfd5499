//! Pruning the journal's instance claims (`instances/`, not bucketed): each removed a day
//! after the expiry it holds. Resumable: a cursor file (`instances/.prune-cursor`, the
//! last name examined) makes each run start where the last one stopped, in name order,
//! wrapping around, so a run cut short by its budget still makes progress. Its time of
//! change is the stamp that spaces the runs of bound requests ([`EVERY`]).

use super::prune::{Pruned, PRUNED_IN_MAINTENANCE, PRUNE_AT_CLAIM};
use super::Journal;
use crate::files::durable::NoFollowDir;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use time::OffsetDateTime;

/// Requests of bound templates prune the claims at most this often per journal.
const EVERY: time::Duration = time::Duration::minutes(10);

/// The cursor's name in `instances/` (no claim's: those are hex; dot names are skipped).
pub(super) const CURSOR: &str = ".prune-cursor";

impl Journal {
    fn instances_dir(&self) -> std::path::PathBuf {
        self.dir.join(super::templates::INSTANCES)
    }

    /// The prune of a bound template's request (a hook, a command; never in a process
    /// whose maintenance prunes: `vouch serve`). Bound: at most one run per [`EVERY`] per
    /// journal (the cursor's time of change, stamped before the run, so hooks starting
    /// meanwhile skip it), each listing `instances/` once and reading claims for at most
    /// [`PRUNE_AT_CLAIM`]; a request of version 1 or 2, or of an unbound template, never
    /// runs it. Never fails the request: a failure is logged.
    pub(super) fn prune_instances_now_and_then(&self) {
        if PRUNED_IN_MAINTENANCE.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let now = OffsetDateTime::now_utc();
        let cursor = self.instances_dir().join(CURSOR);
        let stamp = std::fs::symlink_metadata(&cursor).and_then(|m| m.modified()).map(OffsetDateTime::from);
        if stamp.is_ok_and(|t| t <= now && now - t < EVERY) {
            return;
        }
        let start = std::time::Instant::now();
        let over = || start.elapsed() >= PRUNE_AT_CLAIM;
        self.prune_instance_claims(now, &over, &mut Pruned { removed: 0, left: false });
    }

    /// Removes instance claims 25 hours after the expiry each holds (a day, and the hour a
    /// bucket adds), from the name after the cursor on, until `over`; what is not a regular
    /// file is left (with a warning), never read. Errors are logged, never returned (`pruned.left` set).
    pub(super) fn prune_instance_claims(&self, now: OffsetDateTime, over: &dyn Fn() -> bool, pruned: &mut Pruned) {
        if let Err(e) = self.try_prune_instance_claims(now, over, pruned) {
            tracing::warn!(
                event = "instance-claims-prune-failed",
                path = %self.instances_dir().display(),
                detail = %e,
            );
            pruned.left = true;
        }
    }

    /// [`Journal::prune_instance_claims`]; how many claims it examined.
    fn try_prune_instance_claims(
        &self,
        now: OffsetDateTime,
        over: &dyn Fn() -> bool,
        pruned: &mut Pruned,
    ) -> io::Result<usize> {
        let path = self.instances_dir();
        // Followed if it is a link (moved to another disk), as the journal's directory is.
        let dir = match NoFollowDir::open_followed(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let cursor_path = path.join(CURSOR);
        // Stamped first (the same cursor), so other requests skip while this one runs.
        let after = crate::files::durable::read_regular(&cursor_path).ok().map(OsString::from_vec);
        write_cursor(&path, after.as_ref().map_or(&[][..], |a| a.as_bytes()));
        let mut names: Vec<OsString> = dir.names()?.into_iter().filter(|n| !n.as_bytes().starts_with(b".")).collect();
        names.sort_unstable();
        let first = after.as_ref().map_or(0, |a| names.partition_point(|n| n <= a));
        let mut examined = 0;
        let mut last: Option<&OsString> = None;
        for name in names[first..].iter().chain(&names[..first]) {
            if over() {
                pruned.left = true;
                break;
            }
            examined += 1;
            last = Some(name);
            let claim = match super::templates::read_instance_claim(&dir.path_of(name)) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(event = "instance-claim-unreadable", path = %dir.path_of(name).display(), detail = %e);
                    continue;
                }
            };
            let expiry = claim.and_then(|(_, e)| crate::encoding::time::parse_rfc3339(&e).ok());
            if expiry.and_then(|t| t.checked_add(time::Duration::hours(25))).is_some_and(|t| t < now) {
                match dir.unlink(name) {
                    Ok(()) => pruned.removed += 1,
                    Err(_) => pruned.left = true,
                }
            }
        }
        // Cut short: the next run starts after the last name examined; done: from the start.
        let next = if pruned.left { last.map_or(&[][..], |n| n.as_bytes()) } else { &[][..] };
        write_cursor(&path, next);
        Ok(examined)
    }
}

/// Writes the cursor (and so its stamp); a failure only means the next run starts earlier.
fn write_cursor(dir: &std::path::Path, name: &[u8]) {
    let path = dir.join(CURSOR);
    if let Err(e) = crate::files::durable::write_replace_unsynced_in(dir, &path, name, 0o644) {
        tracing::warn!(event = "instance-claims-cursor-unwritten", path = %path.display(), detail = %e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn claims(dir: &std::path::Path, n: usize) {
        std::fs::create_dir_all(dir).unwrap();
        for i in 0..n {
            std::fs::write(dir.join(format!("{i:02x}")), "aa 2030-01-01T00:00:00Z\n").unwrap();
        }
    }

    fn left(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| !e.as_ref().unwrap().file_name().as_bytes().starts_with(b"."))
            .count()
    }

    #[test]
    fn a_prune_cut_short_resumes_after_the_last_claim_it_examined() {
        let t = tempfile::tempdir().unwrap();
        let j = Journal::new(t.path());
        let dir = t.path().join(super::super::templates::INSTANCES);
        claims(&dir, 5);
        let now = time::macros::datetime!(2030-01-03 00:00 UTC);
        // Each run examines two claims, then its budget is over.
        let run = || {
            let calls = Cell::new(0);
            let over = || {
                calls.set(calls.get() + 1);
                calls.get() > 2
            };
            let mut p = Pruned { removed: 0, left: false };
            (j.try_prune_instance_claims(now, &over, &mut p).unwrap(), p)
        };
        assert_eq!(run(), (2, Pruned { removed: 2, left: true }));
        assert_eq!(left(&dir), 3);
        // Not from the start again: the two examined are gone, the next two go.
        assert_eq!(run(), (2, Pruned { removed: 2, left: true }));
        assert_eq!(run(), (1, Pruned { removed: 1, left: false }));
        assert_eq!(left(&dir), 0);
        // Live claims are examined and kept, round and round.
        std::fs::write(dir.join("ff"), "aa 2040-01-01T00:00:00Z\n").unwrap();
        assert_eq!(run(), (1, Pruned { removed: 0, left: false }));
        assert_eq!(left(&dir), 1);
    }

    #[test]
    fn what_is_not_a_regular_file_is_left_never_read() {
        let t = tempfile::tempdir().unwrap();
        let j = Journal::new(t.path());
        let dir = t.path().join(super::super::templates::INSTANCES);
        claims(&dir, 2);
        let o = std::process::Command::new("mkfifo").arg(dir.join("01fifo")).output().unwrap();
        assert!(o.status.success());
        let now = time::macros::datetime!(2030-01-03 00:00 UTC);
        let mut p = Pruned { removed: 0, left: false };
        assert_eq!(j.try_prune_instance_claims(now, &|| false, &mut p).unwrap(), 3);
        assert_eq!(p, Pruned { removed: 2, left: false });
        assert!(dir.join("01fifo").exists());
    }
}
