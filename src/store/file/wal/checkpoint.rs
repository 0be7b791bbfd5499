//! Checkpoints: once the log grows past its size, the files it holds are flushed and the
//! log starts over, either under the lock at once or noted as due and made outside it
//! (the log then cut back to the batches appended since).

use super::super::{crash_point, io_err, FileStore};
use super::{journals_of, journals_written, WalId};
use crate::store::StoreError;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The log is checkpointed once it grows past this: outside the lock
/// ([`FileStore::checkpoint_due`]), by whoever issued last.
const CHECKPOINT_BYTES: u64 = if cfg!(test) { 16 << 10 } else { 8 << 20 };

/// [`CHECKPOINT_BYTES`]; in a build with fault injection, `VOUCH_TEST_CHECKPOINT_BYTES`
/// if set (the crash tests reach it with a few certificates).
fn checkpoint_bytes() -> u64 {
    #[cfg(feature = "fault-injection")]
    {
        static SET: OnceLock<Option<u64>> = OnceLock::new();
        let set = SET.get_or_init(|| std::env::var("VOUCH_TEST_CHECKPOINT_BYTES").ok().and_then(|v| v.parse().ok()));
        if let Some(b) = set {
            return *b;
        }
    }
    CHECKPOINT_BYTES
}

/// A checkpoint the log is due for, to be made outside the lock: the log (its generation)
/// and, at the end of the batch that passed [`CHECKPOINT_BYTES`], its length and the
/// inventory's. Every entry before that length was applied to the files before it was noted.
#[derive(Debug, Clone)]
struct Due {
    generation: [u8; 32],
    log_len: u64,
    inventory_len: u64,
    journals: Vec<PathBuf>,
    /// A thread is flushing the files for it.
    running: bool,
}

/// Per store directory: the checkpoint its log is due for.
fn checkpoints_due() -> &'static Mutex<std::collections::HashMap<PathBuf, Due>> {
    static DUE: OnceLock<Mutex<std::collections::HashMap<PathBuf, Due>>> = OnceLock::new();
    DUE.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

impl FileStore {
    /// After a batch is applied: the log as this process leaves it, checkpointed once it
    /// has grown past [`CHECKPOINT_BYTES`].
    pub(super) fn after_commit(&self, id: Option<WalId>) -> Result<(), StoreError> {
        let after = |e: StoreError| {
            self.set_known(None);
            StoreError::AfterCommit { source: Box::new(e) }
        };
        let id = match id {
            Some(id) => Some(id),
            None => self.wal_id().map_err(after)?,
        };
        self.set_known(id);
        let size = checkpoint_bytes();
        if let Some(id) = id.filter(|id| id.len > size) {
            // Every entry in the log is this process's (it knows the log): the journals they
            // wrote to are remembered, the log is not read again.
            let journals = journals_written().lock().unwrap_or_else(|e| e.into_inner()).get(&self.root).cloned();
            let journals = journals.unwrap_or_default();
            // A log four times the size was not cut outside the lock (nobody called for it,
            // or it failed every time): checkpointed under it, as this batch passed it.
            if id.len > size.saturating_mul(4) {
                self.checkpoint_now(&journals).map_err(after)?;
            } else {
                self.note_due(id, journals);
            }
        }
        Ok(())
    }

    /// Notes the checkpoint the log is due for (see [`Due`]), unless one is being made.
    /// Under the lock, right after a batch was applied.
    fn note_due(&self, id: WalId, journals: Vec<PathBuf>) {
        let inv = self.p("inventory.txt");
        // Unknown: no checkpoint outside the lock; the log grows to the limit for one under it.
        let Ok(inventory_len) = fs::symlink_metadata(&inv).map(|m| m.len()) else { return };
        let mut due = checkpoints_due().lock().unwrap_or_else(|e| e.into_inner());
        if due.get(&self.root).is_some_and(|d| d.running) {
            return;
        }
        let d = Due { generation: id.generation, log_len: id.len, inventory_len, journals, running: false };
        due.insert(self.root.clone(), d);
    }

    /// [`Store::checkpoint_unlocked`]: the checkpoint the log is due for, made without
    /// holding the lock through the flush. `syncfs` runs unlocked (others keep issuing
    /// meanwhile: it can take long, and it flushes whatever else the filesystem holds); then,
    /// under the lock, the log starts over with only the batches appended since the due
    /// point, under a header recording the inventory's length at that point. If the log
    /// changed otherwise meanwhile (a checkpoint or recovery under the lock, a failed
    /// write), nothing is cut.
    ///
    /// [`Store::checkpoint_unlocked`]: crate::store::Store::checkpoint_unlocked
    pub(in crate::store::file) fn checkpoint_due(&self) -> Result<(), StoreError> {
        let due = {
            let mut map = checkpoints_due().lock().unwrap_or_else(|e| e.into_inner());
            match map.get_mut(&self.root) {
                Some(d) if !d.running => {
                    d.running = true;
                    d.clone()
                }
                _ => return Ok(()),
            }
        };
        let done = self.sync_files(&due.journals).and_then(|()| {
            crash_point("checkpoint:unlocked-synced");
            let _lock = crate::store::Store::lock(self)?;
            self.cut_log(&due)
        });
        // Settled either way: after a failure, the next batch past the size notes it again.
        let mut map = checkpoints_due().lock().unwrap_or_else(|e| e.into_inner());
        if map.get(&self.root).is_some_and(|d| d.running && d.generation == due.generation) {
            map.remove(&self.root);
        }
        done
    }

    /// Under the lock, after the files of every entry before `due.log_len` were flushed:
    /// a fresh log (synced, then renamed over the old) holding the batches after it.
    fn cut_log(&self, due: &Due) -> Result<(), StoreError> {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let Some(known) = self.known() else { return Ok(()) };
        if known.generation != due.generation || known.len < due.log_len {
            return Ok(());
        }
        let path = self.wal_path();
        let Some(f) = self.open_log()? else { return Ok(()) };
        let m = f.metadata().map_err(io_err(&path, "read"))?;
        if (m.dev(), m.ino(), m.len()) != (known.dev, known.ino, known.len) {
            // Not the log this process left: the next lock's recovery sees to it.
            return Ok(());
        }
        // The inventory cut back below the due point (by a recovery this process did not
        // see through): the header would name a length the file does not have.
        let inv = self.p("inventory.txt");
        if fs::symlink_metadata(&inv).map(|m| m.len()).unwrap_or(0) < due.inventory_len {
            return Ok(());
        }
        let tail_len = usize::try_from(known.len - due.log_len)
            .map_err(|_| StoreError::Corrupt { path: path.clone(), detail: "log too long to cut".into() })?;
        let mut tail = vec![0u8; tail_len];
        f.read_exact_at(&mut tail, due.log_len).map_err(io_err(&path, "read"))?;
        let mut bytes = Self::wal_header(&path, due.inventory_len)?;
        bytes.extend_from_slice(&tail);
        crate::files::durable::write_replace_in(&self.p("tmp"), &path, &bytes, 0o644)
            .map_err(io_err(&path, "write"))?;
        crash_point("checkpoint:cut");
        self.set_known(self.wal_id()?);
        Ok(())
    }

    /// [`Store::checkpoint`].
    pub(in crate::store::file) fn checkpoint_log(&self) -> Result<(), StoreError> {
        if self.known().is_none() {
            self.recover_wal()?;
        }
        let (_, mut entries, _) = self.read_wal()?;
        if entries.is_empty() {
            return Ok(());
        }
        self.place_journals(&mut entries)?;
        self.checkpoint_now(&journals_of(&entries))
    }

    /// Flushes what the log holds into the files (syncfs on the store's filesystem and
    /// on each replay journal's its entries wrote to, if elsewhere), then starts a fresh log.
    pub(super) fn checkpoint_now(&self, journals: &[PathBuf]) -> Result<(), StoreError> {
        // Under the lock. This flush failed, or one without the lock did before it: the log
        // is distrusted (re-applied at the next lock), not started over.
        let synced = self.sync_files(journals);
        let failed = self.flush_failed_since();
        if synced.is_err() || failed {
            self.distrust_log();
            return Err(synced.err().unwrap_or_else(|| StoreError::Io {
                path: self.root.clone(),
                op: "sync",
                source: io::Error::other("an earlier flush of the store failed: its log is re-applied first"),
            }));
        }
        crash_point("checkpoint:synced");
        self.reset_wal()
    }

    /// Writes a fresh log (header only) recording the inventory's current length. Synced.
    pub(super) fn reset_wal(&self) -> Result<(), StoreError> {
        let inv = self.p("inventory.txt");
        let inventory_len = match fs::metadata(&inv) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(StoreError::Io { path: inv, op: "read", source: e }),
        };
        let path = self.wal_path();
        let header = Self::wal_header(&path, inventory_len)?;
        crate::files::durable::write_replace_in(&self.p("tmp"), &path, &header, 0o644)
            .map_err(io_err(&path, "write"))?;
        journals_written().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.root);
        checkpoints_due().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.root);
        self.set_known(self.wal_id()?);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
