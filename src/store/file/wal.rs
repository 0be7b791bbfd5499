//! The file store's write-ahead log (`DIR/ca/wal.log`): batches of issuances appended
//! in one write and synced once, applied to the files after, checkpointed and recovered
//! (see [`crate::store`] for the protocol). This file holds what this process knows of its
//! log; `format` its bytes, `commit` a batch's writing, `checkpoint` and `flush` making it
//! durable and starting it over, `replay` its recovery, `journals` where replayed claims go.

mod checkpoint;
mod commit;
mod flush;
mod format;
mod journals;
mod replay;

use super::FileStore;
use crate::store::Issuance;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The write-ahead log's file name under `DIR/ca/`.
pub const WAL: &str = "wal.log";

/// A log file's identity, length and change time, as this process last left it
/// (the change time tells a reused inode number of the same length apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WalId {
    dev: u64,
    ino: u64,
    len: u64,
    ctime: (i64, i64),
    generation: [u8; 32],
}

/// Per store directory: the log as this process last left it, fully applied.
fn known_logs() -> &'static Mutex<std::collections::HashMap<PathBuf, WalId>> {
    static KNOWN: OnceLock<Mutex<std::collections::HashMap<PathBuf, WalId>>> = OnceLock::new();
    KNOWN.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// Per store directory: the replay journals that entries this process logged since the last
/// checkpoint wrote to (the checkpoint syncs their filesystems), so that a checkpoint of its
/// own log needs no second reading of it.
fn journals_written() -> &'static Mutex<std::collections::HashMap<PathBuf, Vec<PathBuf>>> {
    static WRITTEN: OnceLock<Mutex<std::collections::HashMap<PathBuf, Vec<PathBuf>>>> = OnceLock::new();
    WRITTEN.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// The replay journals a log's entries wrote to, each once.
fn journals_of(entries: &[Issuance]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for c in entries.iter().filter_map(|e| e.claim.as_ref()) {
        if !dirs.contains(&c.journal) {
            dirs.push(c.journal.clone());
        }
    }
    dirs
}

impl FileStore {
    pub(super) fn wal_path(&self) -> PathBuf {
        self.p(WAL)
    }

    /// Trusts nothing this process knows of the log: the next lock re-applies every entry
    /// it holds (rewriting their files) and checkpoints. Under the lock, or before the first.
    pub(super) fn distrust_log(&self) {
        self.set_known(None);
        self.forget_everything();
    }

    /// What this process last left in the log (None: it trusts nothing there).
    fn known(&self) -> Option<WalId> {
        known_logs().lock().unwrap_or_else(|e| e.into_inner()).get(&self.root).copied()
    }

    fn set_known(&self, id: Option<WalId>) {
        let mut map = known_logs().lock().unwrap_or_else(|e| e.into_inner());
        match id {
            Some(id) => map.insert(self.root.clone(), id),
            None => map.remove(&self.root),
        };
    }
}
