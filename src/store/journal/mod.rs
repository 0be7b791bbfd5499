//! One-time use: a journal of attributes already used.
//!
//! Each use is a small file named by the SHA-256 of the replay key (the
//! version 2 nonce, or the version 1 signature), created with link(2) so that
//! of two processes racing with the same attributes exactly one wins. Files
//! live in a directory per UTC hour of the attributes' expiry, so entries
//! expire with the attributes: whole buckets are removed a day after their
//! hour has passed, without scanning entries.

mod export;
mod prune;
mod prune_instances;
mod templates;

pub use export::{Cell, TemplateCells};
pub use prune::{parse_bucket, prune_in_maintenance, Pruned};

use crate::encoding::time::format_rfc3339;
use crate::vouching::replay_key::ReplayKey;
use std::io;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The result of claiming attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First use: recorded now.
    Fresh,
    /// Already used.
    Used { certname: String, time: String },
}

/// The journal (a directory; shared by every process that decides with this policy).
#[derive(Debug, Clone)]
pub struct Journal {
    pub dir: PathBuf,
    /// Whether each entry is fsynced. The CA's group commit writes entries
    /// unsynced and makes them durable through its write-ahead log instead
    /// ([`crate::store`]), which names every claim it issued for.
    pub sync: bool,
}

fn bucket(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}{:02}{:02}{:02}", t.year(), u8::from(t.month()), t.day(), t.hour())
}

impl Journal {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Journal { dir: dir.into(), sync: true }
    }

    /// A journal whose entries are not fsynced (see [`Journal::sync`]).
    pub fn unsynced(dir: impl Into<PathBuf>) -> Self {
        Journal { dir: dir.into(), sync: false }
    }

    fn replace(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if self.sync {
            crate::files::durable::write_replace(path, bytes, 0o644)
        } else {
            // In place where the entry grows (marked spent: the CA rewrites an entry it
            // claimed under its lock a moment ago, and its synced log rewrites it after a
            // crash); a reader that meets a half-written entry takes it as used (the most
            // restrictive answer: see `read_entry`). An entry that shrinks (held, then
            // claimed) is replaced whole.
            crate::files::durable::overwrite_unsynced(path, bytes, 0o644)
        }
    }

    fn entry(&self, key: &str, expiry: OffsetDateTime) -> PathBuf {
        let name = super::claim_digest(key);
        self.dir.join(bucket(expiry)).join(name)
    }

    /// Records the use of `key` (attributes expiring at `expiry`) for `certname`
    /// by `holder` (a digest of the requesting public key), unless another holder
    /// used it before. Atomic across processes. The same holder may claim again:
    /// a node that resubmits its own CSR after a crash is not locked out, and
    /// nobody else can use a certificate for its key.
    ///
    /// A claim that is not `reusable` (the hook's: Puppet Server signs on its answer) is
    /// recorded as spent at once, so that no CA sharing the journal issues for the same
    /// attributes again, even to the same key.
    pub fn claim(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        reusable: bool,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        if let Some(prior) = self.legacy_prior(key, expiry)? {
            let same = prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname);
            let open = prior["held"].as_bool() == Some(true) || (reusable && prior["issued"].as_bool() != Some(true));
            if !(same && open) {
                return Ok(Self::used(&prior));
            }
        }
        let record = Self::entry_value(certname, holder, expiry, now, false, !reusable).to_string();
        let (path, prior) = self.create(&key.key, expiry, &record, now)?;
        let Some(prior) = prior else { return Ok(Claim::Fresh) };
        let same = prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname);
        // Held by this key when an earlier request with them was refused for
        // another reason: this is the first approval; from now on it counts as one.
        if same && prior["held"].as_bool() == Some(true) {
            self.replace(&path, record.as_bytes())?;
            return Ok(Claim::Fresh);
        }
        // Re-claim by the same key and name only where allowed (the CA, until it has
        // issued for this claim; never the hook, whose approval Puppet Server acts on).
        if same && reusable && prior["issued"].as_bool() != Some(true) {
            return Ok(Claim::Fresh);
        }
        Ok(Self::used(&prior))
    }

    /// Makes attributes from a refused request this key's (`holder`) without approving
    /// anything: a later request with them and another key is refused as a replay, the
    /// same key may still be approved once. Returns `Used` if another key holds them.
    pub fn hold(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> io::Result<Claim> {
        if let Some(prior) = self.legacy_prior(key, expiry)? {
            if prior["holder"].as_str() != Some(holder) || prior["certname"].as_str() != Some(certname) {
                return Ok(Self::used(&prior));
            }
        }
        let record = Self::record(certname, holder, expiry, now, true);
        match self.create(&key.key, expiry, &record, now)?.1 {
            None => Ok(Claim::Fresh),
            Some(prior) if prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname) => {
                Ok(Claim::Fresh)
            }
            Some(prior) => Ok(Self::used(&prior)),
        }
    }

    fn record(certname: &str, holder: &str, expiry: OffsetDateTime, now: OffsetDateTime, held: bool) -> String {
        Self::entry_value(certname, holder, expiry, now, held, false).to_string()
    }

    /// An entry: who holds the attributes, since when, until when; `held` (a refused
    /// request's key), `issued` (spent: a certificate was stored for them).
    fn entry_value(
        certname: &str,
        holder: &str,
        expiry: OffsetDateTime,
        now: OffsetDateTime,
        held: bool,
        issued: bool,
    ) -> serde_json::Value {
        let mut v = serde_json::json!({
            "certname": certname, "holder": holder, "time": format_rfc3339(now), "expiry": format_rfc3339(expiry),
        });
        if held {
            v["held"] = serde_json::Value::Bool(true);
        }
        if issued {
            v["issued"] = serde_json::Value::Bool(true);
        }
        v
    }

    /// Creates the entry for `key` with `record` unless it exists (link(2): atomic across
    /// processes); returns its path and, if it existed, what it holds.
    fn create(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        record: &str,
        now: OffsetDateTime,
    ) -> io::Result<(PathBuf, Option<serde_json::Value>)> {
        self.prune_now_and_then(now)?;
        let path = self.entry(key, expiry);
        let created = crate::files::durable::in_dir(&path, || {
            if self.sync {
                crate::files::durable::write_new(&path, record.as_bytes(), 0o644)
            } else {
                crate::files::durable::write_new_unsynced(&path, record.as_bytes(), 0o644)
            }
        });
        match created {
            Ok(()) => Ok((path, None)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let prior = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or(serde_json::Value::Null);
                Ok((path, Some(prior)))
            }
            Err(e) => Err(e),
        }
    }

    /// The entry an older vouch wrote for the same attributes under their legacy key, if any.
    fn legacy_prior(&self, key: &ReplayKey, expiry: OffsetDateTime) -> io::Result<Option<serde_json::Value>> {
        let Some(legacy) = &key.legacy else { return Ok(None) };
        Self::read_entry(&self.entry(legacy, expiry))
    }

    /// An entry's JSON; `Null` for one that exists but does not read as JSON (it still
    /// counts as a use), `None` for none.
    fn read_entry(path: &Path) -> io::Result<Option<serde_json::Value>> {
        match std::fs::read(path) {
            Ok(b) => Ok(Some(serde_json::from_slice(&b).unwrap_or(serde_json::Value::Null))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What a claim of `key` by `holder` for `certname` would meet, without writing
    /// anything (no entry, no directory, no pruning): `vouch check`. Judged as a claim
    /// that is not reusable (an approval is one use), except where this key holds the
    /// attributes from a refused request (its first approval is still to come).
    pub fn peek(&self, key: &ReplayKey, expiry: OffsetDateTime, certname: &str, holder: &str) -> io::Result<Claim> {
        for k in std::iter::once(&key.key).chain(key.legacy.as_ref()) {
            if let Some(prior) = Self::read_entry(&self.entry(k, expiry))? {
                let same = prior["holder"].as_str() == Some(holder) && prior["certname"].as_str() == Some(certname);
                if !(same && prior["held"].as_bool() == Some(true)) {
                    return Ok(Self::used(&prior));
                }
            }
        }
        Ok(Claim::Fresh)
    }

    fn used(prior: &serde_json::Value) -> Claim {
        Claim::Used {
            certname: prior["certname"].as_str().unwrap_or("?").to_string(),
            time: prior["time"].as_str().unwrap_or("?").to_string(),
        }
    }

    /// Marks the entry for `key` spent by `holder` for `certname`, without reading it: for
    /// the CA, which claimed it for this holder under its store lock a moment ago (and
    /// still holds that lock). [`Journal::restore_issued`] is the careful form for replays.
    pub fn spend(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        time: OffsetDateTime,
    ) -> io::Result<()> {
        let path = self.entry(key, expiry);
        let v = Self::entry_value(certname, holder, expiry, time, false, true).to_string();
        crate::files::durable::in_dir(&path, || self.replace(&path, v.as_bytes()))
    }

    /// Marks the entry for `key` issued to `holder` for `certname`, writing it whole if
    /// it is missing: what the store does once a certificate is durable in its log (live,
    /// and again when it replays the log after a crash, for an unsynced entry that may
    /// have been lost). Idempotent. Returns false, changing nothing, if the entry names
    /// another holder or certname (it was lost in a power loss and someone else claimed
    /// the attributes meanwhile: the caller reports it). An entry that cannot be read is
    /// an error; one that reads as no JSON (emptied by a power loss) is rewritten.
    pub fn restore_issued(
        &self,
        key: &str,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        time: OffsetDateTime,
    ) -> io::Result<bool> {
        let path = self.entry(key, expiry);
        let prior: Option<serde_json::Value> = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).ok(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if let Some(p) = &prior {
            if p["holder"].as_str() != Some(holder) || p["certname"].as_str() != Some(certname) {
                return Ok(false);
            }
            if p["issued"].as_bool() == Some(true) {
                return Ok(true);
            }
        }
        self.spend(key, expiry, certname, holder, time)?;
        Ok(true)
    }

    /// Whether the journal directory exists (for status output).
    pub fn exists(&self) -> bool {
        Path::new(&self.dir).is_dir()
    }
}

/// The file a master on a shared store leaves in the policy's journal directory: its
/// content names the store (no credentials). A journal with it refuses every use. The name
/// and its reading are the data directory's ([`super::retired_to`]): deny by default.
pub const MOVED_MARKER: &str = super::RETIRED_MARKER;

impl Journal {
    /// Refuses a journal a master on a shared store retired ([`MOVED_MARKER`]): anything at
    /// that name counts (a directory, a link, a FIFO, an unreadable file), and nothing there
    /// is waited on.
    fn not_moved(&self) -> Result<(), super::StoreError> {
        match super::retired_to(&self.dir) {
            Some(to) => Err(super::StoreError::JournalMoved { path: self.dir.clone(), to }),
            None => Ok(()),
        }
    }

    /// Marks this journal retired in favour of the shared store `to` (idempotent).
    pub fn retire(&self, to: &str) -> std::io::Result<()> {
        let path = self.dir.join(MOVED_MARKER);
        if super::retired_to(&self.dir).is_some_and(|t| t == to) {
            return Ok(());
        }
        crate::files::durable::create_dirs(&self.dir)?;
        crate::files::durable::write_replace(&path, format!("{to}\n").as_bytes(), 0o644)
    }
}

impl super::ReplayJournal for Journal {
    fn claim(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        usage: super::ClaimUse,
        _serial: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Claim, super::StoreError> {
        self.not_moved()?;
        Journal::claim(self, key, expiry, certname, holder, usage == super::ClaimUse::Reusable, now)
            .map_err(|source| super::StoreError::Io { path: self.dir.clone(), op: "record one-time use in", source })
    }

    fn hold(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
        now: OffsetDateTime,
    ) -> Result<Claim, super::StoreError> {
        self.not_moved()?;
        Journal::hold(self, key, expiry, certname, holder, now).map_err(|source| super::StoreError::Io {
            path: self.dir.clone(),
            op: "record the holder of attributes in",
            source,
        })
    }

    fn peek(
        &self,
        key: &ReplayKey,
        expiry: OffsetDateTime,
        certname: &str,
        holder: &str,
    ) -> Result<Claim, super::StoreError> {
        self.not_moved()?;
        Journal::peek(self, key, expiry, certname, holder).map_err(|source| super::StoreError::Io {
            path: self.dir.clone(),
            op: "read one-time use in",
            source,
        })
    }

    fn count_use(&self, u: &super::templates::TemplateUse) -> Result<super::templates::Counted, super::StoreError> {
        self.not_moved()?;
        self.count_template_use(u)
    }

    fn peek_use(&self, u: &super::templates::TemplateUse) -> Result<super::templates::Counted, super::StoreError> {
        self.not_moved()?;
        self.peek_template_use(u)
    }

    fn describe(&self) -> String {
        format!("replay journal {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_prune_within_its_budget_finishes_later_and_removes_links_as_links() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("replay");
        let j = Journal::new(&dir);
        let now = datetime!(2030-06-01 12:00 UTC);
        for (bucket, n) in [("2030010100", 1000), ("2030010101", 10), ("2030060113", 1)] {
            std::fs::create_dir_all(dir.join(bucket)).unwrap();
            for i in 0..n {
                std::fs::write(dir.join(bucket).join(format!("{i:064x}")), "{}").unwrap();
            }
        }
        // A bucket that is a link: removed as a link; what it points to is left alone.
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("2030010102")).unwrap();
        // No time at all: nothing removed, something left.
        assert_eq!(j.prune_within(now, std::time::Duration::ZERO).unwrap(), Pruned { removed: 0, left: true });
        assert!(dir.join("2030010100").is_dir());
        assert_eq!(j.prune_within(now, std::time::Duration::MAX).unwrap(), Pruned { removed: 1010, left: false });
        assert!(!dir.join("2030010100").exists() && !dir.join("2030010101").exists());
        assert!(std::fs::symlink_metadata(dir.join("2030010102")).is_err(), "the link is gone");
        assert!(elsewhere.join("keep").exists(), "what it pointed to is not");
        assert!(dir.join("2030060113").is_dir(), "a bucket less than a day past its hour is kept");
        // A bucket holding something that is not a file is left, and said to be.
        std::fs::create_dir_all(dir.join("2030010103/odd")).unwrap();
        assert_eq!(j.prune_within(now, std::time::Duration::MAX).unwrap(), Pruned { removed: 0, left: true });
        assert!(dir.join("2030010103/odd").is_dir());
    }

    /// Found by review of 54a3d60: a journal directory reached through a symbolic link (the
    /// policy's `[replay] journal` pointing at a shared mount, say: the policy check follows
    /// it, and claims write through it) is refused by the new prune, which opens the journal
    /// directory itself with O_NOFOLLOW. A hook's or a command's first claim prunes and
    /// passes that error on, so every claim fails (the hook signs nothing); `vouch serve`'s
    /// maintenance fails every minute and the journal is never pruned. Before, `read_dir`
    /// followed the link and the claim went through.
    #[test]
    fn a_journal_directory_reached_through_a_link_is_claimed_in_and_pruned() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("shared").join("replay");
        std::fs::create_dir_all(real.join("2030010100")).unwrap();
        std::fs::write(real.join("2030010100").join(format!("{:064x}", 1)), "{}").unwrap();
        let dir = d.path().join("replay");
        std::os::unix::fs::symlink(&real, &dir).unwrap();
        let j = Journal::new(&dir);
        let now = datetime!(2030-06-01 12:00 UTC);
        let exp = datetime!(2030-06-01 13:30 UTC);
        match j.claim(&"k".into(), exp, "a", "key1", false, now) {
            Ok(c) => assert_eq!(c, Claim::Fresh),
            Err(e) => panic!("a claim in a journal reached through a link failed: {e}"),
        }
        assert!(real.join("2030060113").is_dir(), "the claim was written through the link");
        match j.prune_within(now, std::time::Duration::MAX) {
            Ok(p) => assert!(!p.left, "{p:?}"),
            Err(e) => panic!("the maintenance's prune of a journal reached through a link failed: {e}"),
        }
        assert!(!real.join("2030010100").exists(), "the expired bucket is pruned");
    }

    /// Found by review of 54a3d60: the prune opens each bucket by its path under the journal
    /// directory (O_NOFOLLOW applies to the bucket's own name only), not relative to the
    /// journal's descriptor it listed the buckets through. The journal directory swapped for a
    /// link while a prune runs (seconds, with a busy hour's bucket) aims the buckets opened
    /// after the swap elsewhere: the files in a directory of the same name there are removed.
    #[test]
    fn a_prune_never_removes_files_outside_the_journal_when_its_directory_becomes_a_link() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("replay");
        let now = datetime!(2030-06-01 12:00 UTC);
        let buckets = ["2030010100", "2030010101", "2030010102", "2030010103"];
        const EACH: usize = 2000;
        for b in buckets {
            std::fs::create_dir_all(dir.join(b)).unwrap();
            for i in 0..EACH {
                std::fs::write(dir.join(b).join(format!("{i:064x}")), "{}").unwrap();
            }
        }
        // Not the journal: files vouch must never remove, in directories named like buckets.
        let elsewhere = d.path().join("elsewhere");
        for b in buckets {
            std::fs::create_dir_all(elsewhere.join(b)).unwrap();
            std::fs::write(elsewhere.join(b).join("keep"), "x").unwrap();
        }
        let moved = d.path().join("replay.moved");
        std::thread::scope(|scope| {
            let pruner = scope.spawn(|| Journal::new(&dir).prune_within(now, std::time::Duration::MAX));
            // Once the prune has begun (a bucket lost entries), the journal's path becomes a link.
            loop {
                let begun =
                    buckets.iter().any(|b| std::fs::read_dir(dir.join(b)).map(|r| r.count() < EACH).unwrap_or(true));
                if begun {
                    break;
                }
                assert!(!pruner.is_finished(), "the prune ended before it was seen to begin");
            }
            std::fs::rename(&dir, &moved).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
            pruner.join().unwrap().unwrap();
        });
        for b in buckets {
            assert!(
                elsewhere.join(b).join("keep").exists(),
                "the prune removed {} outside the journal",
                elsewhere.join(b).join("keep").display()
            );
        }
    }

    #[test]
    fn once_then_used_then_pruned() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        let now = datetime!(2030-06-01 12:00 UTC);
        let exp = datetime!(2030-06-01 13:30 UTC);
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(), Claim::Fresh);
        assert_eq!(
            j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(),
            Claim::Fresh,
            "the same requester again"
        );
        let used = Claim::Used { certname: "a".into(), time: "2030-06-01T12:00:00Z".into() };
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", false, now).unwrap(), used, "not reusable (hook)");
        assert_eq!(j.claim(&"k".into(), exp, "b", "key1", true, now).unwrap(), used, "another certname");
        assert_eq!(j.claim(&"k".into(), exp, "a", "key2", true, now).unwrap(), used, "another key");
        assert!(j.restore_issued("k", exp, "a", "key1", now).unwrap());
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(), used, "spent once issued");
        assert_eq!(j.claim(&"other".into(), exp, "b", "key2", true, now).unwrap(), Claim::Fresh);
        assert!(d.path().join("2030060113").is_dir());
        j.prune(datetime!(2030-06-02 14:00 UTC)).unwrap();
        assert!(d.path().join("2030060113").is_dir(), "kept for a day after its hour");
        j.prune(datetime!(2030-06-02 15:00 UTC)).unwrap();
        assert!(!d.path().join("2030060113").exists());
        assert_eq!(parse_bucket("2030060113"), Some(datetime!(2030-06-01 13:00 UTC)));
        assert_eq!(parse_bucket("20300601"), None);
    }

    #[test]
    fn restored_as_issued_unless_another_holder_claimed_meanwhile() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::unsynced(d.path());
        let now = datetime!(2030-06-01 12:00 UTC);
        let exp = datetime!(2030-06-01 13:30 UTC);
        let used = Claim::Used { certname: "a".into(), time: "2030-06-01T12:00:00Z".into() };
        // The CA's claim, then the mark once the certificate is durable.
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(), Claim::Fresh);
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(), Claim::Fresh, "retry before the log");
        assert!(j.restore_issued("k", exp, "a", "key1", now).unwrap());
        assert_eq!(j.claim(&"k".into(), exp, "a", "key1", true, now).unwrap(), used, "spent once stored");
        // Lost entirely (a power loss): the log's replay writes it back.
        assert!(j.restore_issued("k2", exp, "b", "key3", now).unwrap());
        let used_b = Claim::Used { certname: "b".into(), time: "2030-06-01T12:00:00Z".into() };
        assert_eq!(j.claim(&"k2".into(), exp, "b", "key3", true, now).unwrap(), used_b, "restored as spent");
        // Someone else's entry is never overwritten.
        assert!(!j.restore_issued("k2", exp, "b", "key4", now).unwrap());
        assert_eq!(j.claim(&"k2".into(), exp, "b", "key3", true, now).unwrap(), used_b);
        // Emptied by a power loss: rewritten.
        let emptied = j.entry("k3", exp);
        std::fs::write(&emptied, b"").unwrap();
        assert!(j.restore_issued("k3", exp, "c", "key5", now).unwrap());
        let used_c = Claim::Used { certname: "c".into(), time: "2030-06-01T12:00:00Z".into() };
        assert_eq!(j.claim(&"k3".into(), exp, "c", "key5", true, now).unwrap(), used_c);
    }
}
