//! Flushing the store's files to disk (`syncfs`), one flush at a time, through a
//! descriptor kept open from before this process wrote; a failed flush is remembered until
//! the next lock asks (the log is then distrusted).

use super::super::{io_err, FileStore};
use super::journals_written;
use crate::store::StoreError;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// Per store directory: the descriptor its `syncfs` goes through ([`FileStore::keep_flush_handle`]).
pub(super) fn flush_handles() -> &'static Mutex<std::collections::HashMap<PathBuf, File>> {
    static HANDLES: OnceLock<Mutex<std::collections::HashMap<PathBuf, File>>> = OnceLock::new();
    HANDLES.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// The store directories a flush failed for, since their log was last distrusted.
pub(super) fn failed_flushes() -> &'static Mutex<std::collections::HashSet<PathBuf>> {
    static FAILED: OnceLock<Mutex<std::collections::HashSet<PathBuf>>> = OnceLock::new();
    FAILED.get_or_init(|| Mutex::new(std::collections::HashSet::new()))
}

/// Held through every flush: flushes go one at a time, so that a write-back error (reported
/// once, to the first `syncfs` after it) is reported to the flush that covered it, and
/// noted in [`failed_flushes`] before another flush can begin.
static FLUSHING: Mutex<()> = Mutex::new(());

impl FileStore {
    /// [`Store::flush_unlocked`]: `syncfs`, without the lock, when the log holds entries
    /// (read without the lock: at worst a flush too many, or one left to the checkpoint).
    ///
    /// [`Store::flush_unlocked`]: crate::store::Store::flush_unlocked
    pub(in crate::store::file) fn flush_log_files(&self) -> Result<(), StoreError> {
        let path = self.wal_path();
        let mut head = Vec::with_capacity(4096);
        // Never through a link, never waiting on a FIFO: only a regular file is read.
        let Some(f) = self.open_log()? else { return Ok(()) };
        f.take(4096).read_to_end(&mut head).map_err(io_err(&path, "read"))?;
        // Anything after the header line is an entry (or a torn one: flushed all the same).
        let entries = head.iter().position(|b| *b == b'\n').is_some_and(|n| n + 1 < head.len());
        if !entries {
            return Ok(());
        }
        let journals = journals_written().lock().unwrap_or_else(|e| e.into_inner()).get(&self.root).cloned();
        self.sync_files(&journals.unwrap_or_default())
    }

    /// Whether a flush of this store failed since the last time this was asked (and the log
    /// was distrusted): every lock asks, and a checkpoint under the lock asks after its own
    /// flush. Forgets the failure. (A failed flush may have lost what it was to make durable
    /// from the page cache, and a write-back error is reported once, to the first flush after
    /// it; the flush that failed cannot distrust the log itself without the lock, and a batch
    /// in progress would trust it again.)
    pub(in crate::store::file) fn flush_failed_since(&self) -> bool {
        failed_flushes().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.root)
    }

    /// Opens, once per process and store, the descriptor the store's `syncfs` goes
    /// through: opened before this process writes anything there, it hears of every
    /// write-back error since (the kernel reports one to the descriptors open when it
    /// happened; a descriptor opened later hears nothing of it).
    pub(in crate::store::file) fn keep_flush_handle(&self) {
        let mut map = flush_handles().lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(&self.root) {
            if let Ok(f) = crate::files::durable::open_dir(&self.root) {
                map.insert(self.root.clone(), f);
            }
        }
    }

    /// `syncfs` on the store's filesystem, and on each of `journals` that is elsewhere.
    pub(super) fn sync_files(&self, journals: &[PathBuf]) -> Result<(), StoreError> {
        let _one_at_a_time = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
        let flushed = self.sync_files_now(journals);
        if flushed.is_err() {
            // Noted before the next flush can begin (it would not hear of this error).
            failed_flushes().lock().unwrap_or_else(|e| e.into_inner()).insert(self.root.clone());
        }
        flushed
    }

    /// [`FileStore::sync_files`], holding [`FLUSHING`].
    fn sync_files_now(&self, journals: &[PathBuf]) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        let here = fs::metadata(&self.root).map_err(io_err(&self.root, "sync"))?;
        let kept = {
            let mut map = flush_handles().lock().unwrap_or_else(|e| e.into_inner());
            // The kept descriptor is of another directory now (`DIR/ca` is a link switched
            // to another store): this store's is kept from now on.
            let held = map.get(&self.root).and_then(|f| f.metadata().ok()).map(|m| (m.dev(), m.ino()));
            if held.is_some_and(|id| id != (here.dev(), here.ino())) {
                map.remove(&self.root);
                if let Ok(f) = crate::files::durable::open_dir(&self.root) {
                    map.insert(self.root.clone(), f);
                }
            }
            map.get(&self.root).map(File::try_clone)
        };
        match kept {
            Some(handle) => handle
                .and_then(|f| rustix::fs::syncfs(&f).map_err(io::Error::from))
                .map_err(io_err(&self.root, "sync"))?,
            None => crate::files::durable::sync_filesystem(&self.root).map_err(io_err(&self.root, "sync"))?,
        }
        for j in journals {
            if fs::metadata(j).map(|m| m.dev()).ok() != Some(here.dev()) {
                crate::files::durable::sync_filesystem(j).map_err(io_err(j, "sync"))?;
            }
        }
        Ok(())
    }
}
