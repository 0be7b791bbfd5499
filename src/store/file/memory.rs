//! What this process remembers of a file store: the certificates it stored lately, so that
//! `GET certificate` right after the node's `PUT` is answered without reading two files.
//!
//! A memory is only as good as the knowledge that nobody else changed the store since:
//! every process that takes the store's lock first writes its own mark (16 random bytes)
//! into `.lock`, before it changes anything. A process trusts what it remembers only while
//! `.lock` is still the file it opened and holds its own mark (one `stat`, one `pread` of
//! an open descriptor); when it finds another's mark, it forgets everything. A process that changes the store itself (a
//! revocation, a replayed log, a purge) forgets what that change touches.

use super::{io_err, FileStore};
use crate::store::{Current, StoreError};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// Certificates remembered per store: enough for every agent of a burst to fetch its new
/// certificate from memory (a few KB each: about 8 MB at most).
const KEEP: usize = 2048;

/// The length of a holder's mark in `.lock`.
const MARK: usize = 16;

struct Memory {
    /// This process's mark.
    mark: [u8; MARK],
    /// `.lock`, held open to read whose mark it holds, with its device and inode numbers.
    lockfile: Option<(File, u64, u64)>,
    certs: HashMap<String, Current>,
    /// Oldest first: the first to be forgotten when more than [`KEEP`] are remembered.
    order: VecDeque<String>,
}

impl Memory {
    fn forget_all(&mut self) {
        self.certs.clear();
        self.order.clear();
    }

    /// Whether `.lock` (at `path`) still holds this process's mark: read through the
    /// descriptor only while it is still the file at that path (a `.lock` removed or
    /// replaced, or a `DIR/ca` link switched, would otherwise keep answering with this
    /// process's mark while other processes lock and mark the new one). False if it cannot tell.
    fn still_ours(&self, path: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some((f, dev, ino)) = &self.lockfile else { return false };
        let same = std::fs::metadata(path).is_ok_and(|m| m.dev() == *dev && m.ino() == *ino);
        let mut held = [0u8; MARK];
        same && matches!(f.read_at(&mut held, 0), Ok(MARK)) && held == self.mark
    }
}

fn memories() -> &'static Mutex<HashMap<PathBuf, Memory>> {
    static MEMORIES: OnceLock<Mutex<HashMap<PathBuf, Memory>>> = OnceLock::new();
    MEMORIES.get_or_init(|| Mutex::new(HashMap::new()))
}

impl FileStore {
    fn with_memory<T>(&self, f: impl FnOnce(&mut Memory) -> T) -> Option<T> {
        let mut all = memories().lock().unwrap_or_else(|e| e.into_inner());
        all.get_mut(&self.root).map(f)
    }

    /// Under the lock, before anything is changed: makes `.lock` (open as `lockfile`) hold
    /// this process's mark. Whoever held the lock before may have changed anything, so if
    /// the mark was another's, this process forgets what it remembered.
    ///
    /// Returns whether another process may have held the lock since this one last did (a
    /// mark not this process's, or `.lock` replaced): then nothing this process knows of the
    /// store is trusted, the write-ahead log included (the other may have died half-way
    /// through recovering it, the log unchanged and the inventory already cut back).
    pub(super) fn mark_holder(&self, lockfile: &File) -> Result<bool, StoreError> {
        let path = self.p(".lock");
        let mut all = memories().lock().unwrap_or_else(|e| e.into_inner());
        if !all.contains_key(&self.root) {
            let mut mark = [0u8; MARK];
            aws_lc_rs::rand::fill(&mut mark)
                .map_err(|_| StoreError::Corrupt { path: path.clone(), detail: "no randomness available".into() })?;
            all.insert(
                self.root.clone(),
                Memory { mark, lockfile: None, certs: HashMap::new(), order: VecDeque::new() },
            );
        }
        let Some(mem) = all.get_mut(&self.root) else { return Ok(true) };
        let mut held = [0u8; MARK];
        let read = lockfile.read_at(&mut held, 0).map_err(io_err(&path, "read"))?;
        let mut another = false;
        if read != MARK || held != mem.mark {
            another = true;
            mem.forget_all();
            if let Err(e) = lockfile.write_all_at(&mem.mark, 0) {
                mem.lockfile = None;
                return Err(StoreError::Io { path, op: "write", source: e });
            }
        }
        // Look-ups read the mark through a descriptor of their own: never a duplicate of the
        // locked one (flock belongs to the open file, which a duplicate would keep locked).
        // Opened again if `.lock` was replaced since.
        use std::os::unix::fs::MetadataExt;
        let locked = lockfile.metadata().map(|m| (m.dev(), m.ino())).map_err(io_err(&path, "read"))?;
        if mem.lockfile.as_ref().is_some_and(|(_, dev, ino)| (*dev, *ino) != locked) {
            another = true;
            mem.lockfile = None;
            mem.forget_all();
        }
        if mem.lockfile.is_none() {
            let read = crate::files::durable::open_nofollow(std::fs::OpenOptions::new().read(true), &path);
            // Its own identity: if `.lock` was replaced between the lock and this open, the
            // mark read through it is not this process's, and nothing is trusted.
            mem.lockfile =
                read.ok().and_then(|f| f.metadata().ok().map(|m| (m.dev(), m.ino())).map(|(d, i)| (f, d, i)));
        }
        Ok(another)
    }

    /// A certificate this process stored, if it still knows it to be the certname's current one.
    pub(super) fn remembered(&self, certname: &str) -> Option<Current> {
        let path = self.p(".lock");
        self.with_memory(|m| {
            if !m.certs.contains_key(certname) {
                return None;
            }
            if !m.still_ours(&path) {
                m.forget_all();
                return None;
            }
            m.certs.get(certname).cloned()
        })
        .flatten()
    }

    /// Remembers the certificates of a batch this process just stored under its lock.
    pub(super) fn remember(&self, stored: impl Iterator<Item = Current>) {
        self.with_memory(|m| {
            for c in stored {
                let name = c.record.certname.clone();
                if m.certs.insert(name.clone(), c).is_none() {
                    m.order.push_back(name);
                }
                while m.order.len() > KEEP {
                    if let Some(old) = m.order.pop_front() {
                        m.certs.remove(&old);
                    }
                }
            }
        });
    }

    /// Forgets one certname (its certificate is being revoked or removed).
    pub(super) fn forget(&self, certname: &str) {
        self.with_memory(|m| {
            if m.certs.remove(certname).is_some() {
                m.order.retain(|n| n != certname);
            }
        });
    }

    /// Forgets everything (the files were changed by a replay, a redo or a purge).
    pub(super) fn forget_everything(&self) {
        self.with_memory(Memory::forget_all);
    }
}

#[cfg(test)]
mod tests {
    use crate::store::file::FileStore;
    use crate::store::{Revocation, State, Store};

    use crate::store::file::test_issuance as issuance;

    /// What a process stored is answered from memory only while `.lock` holds its mark:
    /// another lock holder's mark, or a revocation of its own, makes it read the files again.
    #[test]
    fn remembered_only_until_another_holder_marks_the_lock_or_the_certificate_is_revoked() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        let lock = store.lock().unwrap();
        store.issue(&lock, &[issuance("aa01", "a.example"), issuance("aa02", "b.example")]).unwrap();
        drop(lock);
        let a = store.remembered_current("a.example").expect("remembered after its issuance");
        assert_eq!(a.pem, "pem of aa01");
        assert!(store.remembered_current("c.example").is_none());
        // Another process takes the lock: its mark replaces this one's.
        std::fs::write(d.path().join("ca/.lock"), b"another holder's").unwrap();
        assert!(store.remembered_current("a.example").is_none(), "another holder may have changed it");
        assert!(store.remembered_current("b.example").is_none());
        // The files hold it all the same.
        assert_eq!(std::fs::read_to_string(store.signed_path("a.example").unwrap()).unwrap(), "pem of aa01");
        // This process's next lock marks it again, remembering nothing from before.
        let lock = store.lock().unwrap();
        assert!(store.remembered_current("a.example").is_none());
        store.issue(&lock, &[issuance("aa03", "c.example")]).unwrap();
        assert!(store.remembered_current("c.example").is_some());
        let rec = store.record("aa03").unwrap().unwrap();
        let rev = Revocation::of(&rec, "2030-06-01T00:00:00Z".into(), "keyCompromise".into(), false);
        store.revoke(&lock, &rev, &rec, None).unwrap();
        assert!(store.remembered_current("c.example").is_none(), "revoked: forgotten");
        assert_eq!(store.record("aa03").unwrap().unwrap().state, State::Revoked);
    }
}

/// Cases where the memory could outlive what the files say (found by an independent review).
#[cfg(test)]
mod outlived {
    use crate::store::file::FileStore;
    use crate::store::{Revocation, SpentClaim, State, Store, StoreError};

    use crate::store::file::test_issuance as issuance;

    /// `.lock` unlinked (or renamed) while this process remembers: the next lock holder
    /// (another process: here a store opened under another spelling of the same directory,
    /// so another mark and another memory) marks a new `.lock` and revokes; this process's
    /// descriptor still reads its own mark, but it is no longer the file at `.lock`.
    #[test]
    fn a_certificate_revoked_under_a_replaced_lock_file_is_not_answered_from_memory() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        assert!(store.remembered_current("a.example").is_some());
        std::fs::remove_file(d.path().join("ca/.lock")).unwrap();
        // Another spelling of the same directory (Path equality ignores "." but not ".."):
        // another memory, another mark, as in another process.
        let other = FileStore::new(d.path().join("ca/../ca"));
        let lock = other.lock().unwrap();
        let rec = other.record("aa01").unwrap().unwrap();
        let rev = Revocation::of(&rec, "2030-06-01T00:00:00Z".into(), "keyCompromise".into(), false);
        other.revoke(&lock, &rev, &rec, None).unwrap();
        drop(lock);
        assert_eq!(other.record("aa01").unwrap().unwrap().state, State::Revoked);
        let seen = store.remembered_current("a.example").map(|c| c.record.state);
        assert_eq!(seen, None, "revoked by another process, still answered from memory as issued");
    }

    /// A lock holder that writes no mark (an older vouch, run beside the server: emulated here
    /// by flock on `.lock` and the store's own revoke): the mark stays this process's, but the
    /// holder replayed and replaced the log this process left, which its next lock notices.
    /// (One that touches no log is not noticed: docs/data-directory.md asks for one version
    /// of vouch per data directory.)
    #[test]
    fn a_lock_holder_that_writes_no_mark_is_noticed_when_it_touched_the_log() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        let old = FileStore::new(d.path().join("ca/../ca"));
        {
            let f = std::fs::OpenOptions::new().write(true).open(d.path().join("ca/.lock")).unwrap();
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
            let rec = old.record("aa01").unwrap().unwrap();
            let rev = Revocation::of(&rec, "2030-06-01T00:00:00Z".into(), "keyCompromise".into(), false);
            old.revoke(&crate::store::WriteLock::shared(), &rev, &rec, None).unwrap();
        }
        assert_eq!(old.record("aa01").unwrap().unwrap().state, State::Revoked);
        drop(store.lock().unwrap());
        let seen = store.remembered_current("a.example").map(|c| c.record.state);
        assert_eq!(seen, None, "revoked by a holder without a mark, still answered from memory as issued");
    }

    /// A batch whose apply fails after the certificate file was written (AfterCommit): the
    /// log and `signed/` hold the new certificate; the memory must not answer the one it replaced.
    #[test]
    fn a_batch_whose_apply_failed_is_not_answered_from_memory() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        let lock = store.lock().unwrap();
        store.issue(&lock, &[issuance("aa01", "x.example")]).unwrap();
        // The replay journal is a plain file: marking the claim spent fails, after the record,
        // the certificate and the inventory line (stands for EIO, ENOSPC on the journal's disk).
        let journal = d.path().join("journal");
        std::fs::write(&journal, b"").unwrap();
        let mut next = issuance("bb02", "x.example");
        next.claim = Some(SpentClaim {
            journal,
            journal_in_dir: None,
            key: "k".into(),
            expiry: "2031-01-01T00:00:00Z".into(),
            certname: "x.example".into(),
            holder: "h".into(),
            time: "2030-01-01T00:00:00Z".into(),
        });
        let e = store.issue(&lock, &[next]).unwrap_err();
        assert!(matches!(e, StoreError::AfterCommit { .. }), "{e}");
        assert_eq!(std::fs::read_to_string(store.signed_path("x.example").unwrap()).unwrap(), "pem of bb02");
        let remembered = store.remembered_current("x.example").map(|c| c.pem);
        assert_eq!(remembered, None, "the certificate the log replaced, answered from memory");
    }
}
