//! The file store's write-ahead log (`DIR/ca/wal.log`): batches of issuances appended
//! in one write and synced once, applied to the files after, checkpointed and recovered
//! (see [`crate::store`] for the protocol).

use super::{crash_point, damaged, io_err, FileStore};
use crate::store::{Issuance, SpentClaim, StoreError};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The write-ahead log's file name under `DIR/ca/`.
pub const WAL: &str = "wal.log";
/// The log's format: 2 = batches closed by a commit line.
const WAL_VERSION: u32 = 2;
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

#[derive(Serialize, Deserialize)]
struct WalHeader {
    wal: u32,
    inventory_len: u64,
    /// Random, new with every log: tells two logs apart whatever the filesystem's timestamps.
    #[serde(default)]
    generation: String,
}

/// The line that ends each batch in the log: how many entries it holds and the SHA-256
/// of their bytes. Entries count only under a commit line that verifies.
#[derive(Serialize, Deserialize)]
struct WalCommit {
    batch: usize,
    sha256: String,
}

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

/// Per store directory: the descriptor its `syncfs` goes through ([`FileStore::keep_flush_handle`]).
fn flush_handles() -> &'static Mutex<std::collections::HashMap<PathBuf, File>> {
    static HANDLES: OnceLock<Mutex<std::collections::HashMap<PathBuf, File>>> = OnceLock::new();
    HANDLES.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// The store directories a flush failed for, since their log was last distrusted.
fn failed_flushes() -> &'static Mutex<std::collections::HashSet<PathBuf>> {
    static FAILED: OnceLock<Mutex<std::collections::HashSet<PathBuf>>> = OnceLock::new();
    FAILED.get_or_init(|| Mutex::new(std::collections::HashSet::new()))
}

/// Held through every flush: flushes go one at a time, so that a write-back error (reported
/// once, to the first `syncfs` after it) is reported to the flush that covered it, and
/// noted in [`failed_flushes`] before another flush can begin.
static FLUSHING: Mutex<()> = Mutex::new(());

/// Per store directory: the checkpoint its log is due for.
fn checkpoints_due() -> &'static Mutex<std::collections::HashMap<PathBuf, Due>> {
    static DUE: OnceLock<Mutex<std::collections::HashMap<PathBuf, Due>>> = OnceLock::new();
    DUE.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// The replay journal's default place in a data directory (the policy's default `replay`).
const DEFAULT_JOURNAL: &str = "replay";

/// An entry as the log holds it: an [`Issuance`] (its serialized form, which the log is
/// read back as), its claim also naming the journal relative to the data directory when
/// the journal lies inside it.
#[derive(Serialize)]
struct Logged<'a> {
    record: &'a crate::store::CertRecord,
    pem: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    claim: Option<std::borrow::Cow<'a, SpentClaim>>,
}

/// `path` relative to `dir`, if it lies inside it: `dir` as the path starts, then plain
/// names only (no `..`). Lexical: the paths as this process names them.
fn inside(path: &Path, dir: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(dir).ok()?;
    plain(rel).then(|| rel.to_path_buf())
}

/// A relative path of plain names (at least one): one that stays inside the directory it
/// is joined to.
fn plain(rel: &Path) -> bool {
    rel.components().next().is_some() && rel.components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// `path` without its last components when they are `suffix`: the directory `suffix` is in.
fn strip_suffix<'a>(path: &'a Path, suffix: &Path) -> Option<&'a Path> {
    let at = path.ancestors().nth(suffix.components().count())?;
    (path.strip_prefix(at).ok()? == suffix).then_some(at)
}

/// Whether `a` and `b` are the same directory (both exist: device and inode).
fn same_dir(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| {
        let p = if p.as_os_str().is_empty() { Path::new(".") } else { p };
        fs::metadata(p).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
    };
    id(a).is_some_and(|a| Some(a) == id(b))
}

/// A batch as the log holds it: one JSON line per entry, then its commit line. `dir`: the
/// data directory, relative to which a journal inside it is named.
fn encode_batch(batch: &[Issuance], path: &Path, dir: Option<&Path>) -> Result<Vec<u8>, StoreError> {
    use std::borrow::Cow;
    let mut buf = Vec::new();
    for e in batch {
        let claim = e.claim.as_ref().map(|c| match dir.and_then(|d| inside(&c.journal, d)) {
            Some(rel) => Cow::Owned(SpentClaim { journal_in_dir: Some(rel), ..c.clone() }),
            None => Cow::Borrowed(c),
        });
        let logged = Logged { record: &e.record, pem: &e.pem, claim };
        serde_json::to_writer(&mut buf, &logged)
            .map_err(|err| StoreError::Corrupt { path: path.to_path_buf(), detail: err.to_string() })?;
        buf.push(b'\n');
    }
    let commit = WalCommit { batch: batch.len(), sha256: crate::encoding::sha256_hex(&buf) };
    serde_json::to_writer(&mut buf, &commit)
        .map_err(|err| StoreError::Corrupt { path: path.to_path_buf(), detail: err.to_string() })?;
    buf.push(b'\n');
    Ok(buf)
}

/// The log's identity just after this process appended to it (`None` if it cannot tell).
fn appended_id(f: &File, generation: [u8; 32]) -> Option<WalId> {
    use std::os::unix::fs::MetadataExt;
    f.metadata().ok().map(|m| WalId {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        ctime: (m.ctime(), m.ctime_nsec()),
        generation,
    })
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
    /// [`Store::issue`]: appends the batch to the log in one write, closed by its commit
    /// line, syncs it, then applies it to the files.
    pub(super) fn commit_batch(&self, batch: &[Issuance]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let known = self.known_or_recovered()?;
        self.check_serials(batch)?;
        let path = self.wal_path();
        let buf = encode_batch(batch, &path, self.root.parent())?;
        crash_point("wal:before");
        let f = self.append_synced(&path, &buf)?;
        crash_point("wal:appended");
        {
            let mut written = journals_written().lock().unwrap_or_else(|e| e.into_inner());
            let dirs = written.entry(self.root.clone()).or_default();
            for j in journals_of(batch) {
                if !dirs.contains(&j) {
                    dirs.push(j);
                }
            }
        }
        let id = appended_id(&f, known.generation);
        self.apply_committed(batch)?;
        crash_point("wal:applied");
        self.remember(batch.iter().map(|e| crate::store::Current {
            record: e.record.clone(),
            pem: e.pem.clone(),
            revision: 0,
        }));
        self.after_commit(id)
    }

    /// The log as this process left it. An earlier batch under this same lock may have failed
    /// after its log entry was synced (this process then trusts the log no more): it is
    /// applied before anything else (it may hold these certnames' current certificates).
    /// Otherwise the log is as this process left it: nobody else writes while the lock is held.
    fn known_or_recovered(&self) -> Result<WalId, StoreError> {
        match self.known() {
            Some(k) => Ok(k),
            None => {
                self.recover_wal()?;
                self.known().ok_or_else(|| StoreError::Corrupt {
                    path: self.wal_path(),
                    detail: "the log could not be recovered".into(),
                })
            }
        }
    }

    /// Each serial once in the batch, and none the store has already.
    fn check_serials(&self, batch: &[Issuance]) -> Result<(), StoreError> {
        let mut seen = std::collections::HashSet::new();
        for e in batch {
            let serial = &e.record.serial;
            if !seen.insert(serial.as_str()) || self.serial_path(serial).exists() {
                return Err(StoreError::SerialTaken { serial: serial.clone() });
            }
        }
        Ok(())
    }

    /// Appends `buf` to the log at `path` in one write and syncs it (fdatasync): only then
    /// is the batch committed.
    fn append_synced(&self, path: &Path, buf: &[u8]) -> Result<File, StoreError> {
        use std::io::Write;
        let mut f = crate::files::durable::open_nofollow(OpenOptions::new().append(true), path)
            .map_err(io_err(path, "open"))?;
        let before = f.metadata().map_err(io_err(path, "read"))?.len();
        if let Err(e) = f.write_all(buf).and_then(|_| f.sync_data()) {
            // Nothing was acknowledged: take the partial write back (durably, as far as the
            // disk still answers), and trust the log no more.
            let _ = f.set_len(before).and_then(|_| f.sync_data());
            self.set_known(None);
            return Err(StoreError::Io { path: path.to_path_buf(), op: "append to", source: e });
        }
        Ok(f)
    }

    /// Applies a batch the log holds (synced) to the files.
    fn apply_committed(&self, batch: &[Issuance]) -> Result<(), StoreError> {
        // The batch's inventory lines in one write (at the end, or when a step fails).
        let applied = self.open_inventory().and_then(|inv| {
            let mut inv = std::io::BufWriter::with_capacity(64 << 10, inv);
            batch.iter().try_for_each(|e| self.apply(e, &mut inv, true))?;
            inv.flush().map_err(io_err(&self.p("inventory.txt"), "append to"))
        });
        if let Err(e) = applied {
            // Durable in the log; the next lock holder (or this one's next issue) applies it.
            // Until then the files may hold part of it: nothing remembered is trusted.
            self.set_known(None);
            self.forget_everything();
            return Err(StoreError::AfterCommit { source: Box::new(e) });
        }
        Ok(())
    }

    /// After a batch is applied: the log as this process leaves it, checkpointed once it
    /// has grown past [`CHECKPOINT_BYTES`].
    fn after_commit(&self, id: Option<WalId>) -> Result<(), StoreError> {
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
    pub(super) fn checkpoint_due(&self) -> Result<(), StoreError> {
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

    /// [`Store::flush_unlocked`]: `syncfs`, without the lock, when the log holds entries
    /// (read without the lock: at worst a flush too many, or one left to the checkpoint).
    ///
    /// [`Store::flush_unlocked`]: crate::store::Store::flush_unlocked
    pub(super) fn flush_log_files(&self) -> Result<(), StoreError> {
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
    pub(super) fn checkpoint_log(&self) -> Result<(), StoreError> {
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

    pub(super) fn wal_path(&self) -> PathBuf {
        self.p(WAL)
    }

    /// Opens the log to read it: never through a link, never waiting on a FIFO; only a
    /// regular file (`None`: there is none).
    fn open_log(&self) -> Result<Option<File>, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.wal_path();
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path);
        let f = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                let source = crate::files::durable::symlink_refused(&path);
                return Err(StoreError::Io { path, op: "use", source });
            }
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        if !f.metadata().map_err(io_err(&path, "read"))?.is_file() {
            return Err(StoreError::Corrupt { path, detail: "not a regular file".into() });
        }
        Ok(Some(f))
    }

    fn wal_id(&self) -> Result<Option<WalId>, StoreError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.wal_path();
        let Some(mut f) = self.open_log()? else { return Ok(None) };
        let m = f.metadata().map_err(io_err(&path, "read"))?;
        // The header's generation (the first line, well within 256 bytes).
        let mut head = [0u8; 256];
        let n = f.read(&mut head).map_err(io_err(&path, "read"))?;
        let line = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
        let mut generation = [0u8; 32];
        if let Ok(h) = serde_json::from_slice::<WalHeader>(line) {
            let g = h.generation.as_bytes();
            let k = g.len().min(32);
            generation[..k].copy_from_slice(&g[..k]);
        }
        Ok(Some(WalId { dev: m.dev(), ino: m.ino(), len: m.len(), ctime: (m.ctime(), m.ctime_nsec()), generation }))
    }

    /// Trusts nothing this process knows of the log: the next lock re-applies every entry
    /// it holds (rewriting their files) and checkpoints. Under the lock, or before the first.
    pub(super) fn distrust_log(&self) {
        self.set_known(None);
        self.forget_everything();
    }

    /// Whether a flush of this store failed since the last time this was asked (and the log
    /// was distrusted): every lock asks, and a checkpoint under the lock asks after its own
    /// flush. Forgets the failure. (A failed flush may have lost what it was to make durable
    /// from the page cache, and a write-back error is reported once, to the first flush after
    /// it; the flush that failed cannot distrust the log itself without the lock, and a batch
    /// in progress would trust it again.)
    pub(super) fn flush_failed_since(&self) -> bool {
        failed_flushes().lock().unwrap_or_else(|e| e.into_inner()).remove(&self.root)
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

    /// Reads the log: its header, the entries of every batch whose commit line verifies,
    /// and the length they end at. A torn last batch (a power loss during its write: never
    /// acknowledged) lies beyond it and is dropped; damage before a later good batch is an error.
    fn read_wal(&self) -> Result<(WalHeader, Vec<Issuance>, u64), StoreError> {
        let path = self.wal_path();
        let mut bytes = Vec::new();
        let Some(mut f) = self.open_log()? else {
            return Err(StoreError::Io { path, op: "read", source: io::ErrorKind::NotFound.into() });
        };
        f.read_to_end(&mut bytes).map_err(io_err(&path, "read"))?;
        let corrupt = |detail: String| StoreError::Corrupt { path: path.clone(), detail };
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(n) = bytes.get(start..).and_then(|rest| rest.iter().position(|b| *b == b'\n')) {
            lines.push((start, start + n + 1));
            start += n + 1;
        }
        let Some(&(h0, h1)) = lines.first() else { return Err(corrupt("no header".into())) };
        let header: WalHeader = serde_json::from_slice(&bytes[h0..h1]).map_err(|e| corrupt(format!("header: {e}")))?;
        if header.wal != WAL_VERSION {
            return Err(corrupt(format!(
                "log format {} (this vouch reads {WAL_VERSION}): finish it with the vouch that wrote it",
                header.wal
            )));
        }
        let mut entries = Vec::new();
        let mut pending: Vec<Issuance> = Vec::new();
        let mut batch_start = h1;
        let mut end = h1 as u64;
        let mut damaged: Option<String> = None;
        for &(a, b) in lines.iter().skip(1) {
            let line = &bytes[a..b];
            if let Ok(c) = serde_json::from_slice::<WalCommit>(line) {
                let whole = damaged.is_none()
                    && c.batch == pending.len()
                    && c.sha256 == crate::encoding::sha256_hex(&bytes[batch_start..a]);
                if !whole {
                    // Damage followed by a later commit: that batch was written after this one
                    // was synced, so this is not a torn write but a damaged log.
                    let later = lines.iter().enumerate().any(|(j, &(x, y))| {
                        x > a
                            && serde_json::from_slice::<WalCommit>(&bytes[x..y]).is_ok_and(|c| {
                                // It verifies over its own batch: the lines just before it.
                                j.checked_sub(c.batch).and_then(|k| lines.get(k)).is_some_and(|&(s0, _)| {
                                    s0 > a && c.sha256 == crate::encoding::sha256_hex(&bytes[s0..x])
                                })
                            })
                    });
                    if later {
                        let at = damaged.take().unwrap_or_else(|| format!("the batch ending at byte {b}"));
                        return Err(corrupt(format!("{at} does not match its commit line")));
                    }
                    break;
                }
                entries.append(&mut pending);
                end = b as u64;
                batch_start = b;
                continue;
            }
            match serde_json::from_slice::<Issuance>(line) {
                Ok(e) if damaged.is_none() => pending.push(e),
                Ok(_) => {}
                Err(e) => {
                    damaged.get_or_insert_with(|| format!("entry at byte {a} ({e})"));
                }
            }
        }
        Ok((header, entries, end))
    }

    /// Whether the log (if any) reads whole and is applied: every byte after its header
    /// belongs to a batch whose commit line verifies, and every entry's record is in the
    /// files. Read without the lock, a batch being appended or applied right now is neither:
    /// asked again for up to 0.1 s before the answer is no (a batch that a killed process
    /// logged and never applied stays so until the next lock holder applies it).
    pub(super) fn log_settled(&self) -> bool {
        for attempt in 0..5 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let len = match fs::symlink_metadata(self.wal_path()) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
                Err(_) => return false,
            };
            let Ok((_, entries, end)) = self.read_wal() else { continue };
            if end == len && entries.iter().all(|e| self.serial_path(&e.record.serial).exists()) {
                return true;
            }
        }
        false
    }

    /// Writes a fresh log (header only) recording the inventory's current length. Synced.
    fn reset_wal(&self) -> Result<(), StoreError> {
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

    /// A new log's header line: a new generation, and the length of the inventory that
    /// the log's entries come after.
    fn wal_header(path: &Path, inventory_len: u64) -> Result<Vec<u8>, StoreError> {
        let mut g = [0u8; 16];
        aws_lc_rs::rand::fill(&mut g)
            .map_err(|_| StoreError::Corrupt { path: path.to_path_buf(), detail: "no randomness available".into() })?;
        let generation = crate::encoding::hex(&g);
        let mut header = serde_json::to_vec(&WalHeader { wal: WAL_VERSION, inventory_len, generation })
            .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() })?;
        header.push(b'\n');
        Ok(header)
    }

    /// Applies one log entry to the files, without fsync: the record, the certificate, the
    /// inventory line, the replay journal's claim marked issued. Idempotent. `live`: the
    /// batch this process just logged (its claims were made under this lock, for these
    /// holders); otherwise a replay, which checks each claim before marking it.
    fn apply(&self, e: &Issuance, inventory: &mut impl std::io::Write, live: bool) -> Result<(), StoreError> {
        let rec = &e.record;
        let path = self.serial_path(&rec.serial);
        let bytes = serde_json::to_vec(rec)
            .map_err(|err| StoreError::Corrupt { path: path.clone(), detail: err.to_string() })?;
        let tmp = self.p("tmp");
        Self::check_shard(&path)?;
        crate::files::durable::in_dir(&path, || crate::files::durable::write_unsynced_in(&tmp, &path, &bytes, 0o644))
            .map_err(io_err(&path, "write"))?;
        crash_point("wal:record");
        let signed = self.signed_path(&rec.certname)?;
        crate::files::durable::write_unsynced_in(&tmp, &signed, e.pem.as_bytes(), 0o644)
            .map_err(io_err(&signed, "write"))?;
        let line = format!("{}\n", Self::inventory_line(rec));
        inventory.write_all(line.as_bytes()).map_err(io_err(&self.p("inventory.txt"), "append to"))?;
        if let Some(c) = &e.claim {
            let expiry = crate::encoding::time::parse_rfc3339(&c.expiry).ok();
            let time = crate::encoding::time::parse_rfc3339(&c.time).ok();
            if let (Some(expiry), Some(time)) = (expiry, time) {
                let journal = crate::store::journal::Journal::unsynced(&c.journal);
                let kept = if live {
                    journal.spend(&c.key, expiry, &c.certname, &c.holder, time).map(|()| true)
                } else {
                    journal.restore_issued(&c.key, expiry, &c.certname, &c.holder, time)
                }
                .map_err(io_err(&c.journal, "record one-time use in"))?;
                if !kept {
                    // The claim was lost (a power loss) and someone else claimed the same
                    // attributes meanwhile: two certificates came from them. Said loudly;
                    // recovery goes on (refusing to start would not undo it).
                    tracing::error!(
                        event = "replay-conflict",
                        certname = %c.certname,
                        serial = %rec.serial,
                        detail = "the replay journal's entry for these attributes names another requester; \
                                  both hold certificates from one set of attributes: revoke one",
                    );
                }
            }
        }
        Ok(())
    }

    /// The inventory, opened to append to. A last line cut short (an append from outside, a
    /// power loss, a line written back by hand without its newline) is ended first: what
    /// vouch appends starts on a line of its own, never glued onto it (the certificate's
    /// serial unreadable, the certificate unlisted).
    fn open_inventory(&self) -> Result<File, StoreError> {
        use std::os::unix::fs::FileExt;
        let path = self.p("inventory.txt");
        let mut f =
            crate::files::durable::open_nofollow(OpenOptions::new().read(true).append(true).create(true), &path)
                .map_err(io_err(&path, "open"))?;
        let len = f.metadata().map_err(io_err(&path, "read"))?.len();
        if let Some(at) = len.checked_sub(1) {
            let mut last = [0u8; 1];
            f.read_exact_at(&mut last, at).map_err(io_err(&path, "read"))?;
            if last != *b"\n" {
                f.write_all(b"\n").map_err(io_err(&path, "append to"))?;
            }
        }
        Ok(f)
    }

    /// Flushes what the log holds into the files (syncfs on the store's filesystem and
    /// on each replay journal's its entries wrote to, if elsewhere), then starts a fresh log.
    fn checkpoint_now(&self, journals: &[PathBuf]) -> Result<(), StoreError> {
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

    /// Opens, once per process and store, the descriptor the store's `syncfs` goes
    /// through: opened before this process writes anything there, it hears of every
    /// write-back error since (the kernel reports one to the descriptors open when it
    /// happened; a descriptor opened later hears nothing of it).
    pub(super) fn keep_flush_handle(&self) {
        let mut map = flush_handles().lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(&self.root) {
            if let Ok(f) = crate::files::durable::open_dir(&self.root) {
                map.insert(self.root.clone(), f);
            }
        }
    }

    /// `syncfs` on the store's filesystem, and on each of `journals` that is elsewhere.
    fn sync_files(&self, journals: &[PathBuf]) -> Result<(), StoreError> {
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

    /// At lock time: a log this process did not leave is re-applied and checkpointed.
    /// The inventory's lines after `from` (the log's header's length) that the log's
    /// `entries` do not hold, and that stand for a certificate the store knows (the line
    /// its serial's record says, as vouch writes it; once, and not already before `from`):
    /// lines appended by someone else meanwhile (an import, an older vouch's redo). The
    /// replay cuts the inventory back to `from` and appends the entries' lines again; these
    /// are written back first, not lost. What is not such a line (a torn one, a power loss's
    /// garbage or stale copy, a line its record does not say or does not read) is dropped.
    fn inventory_lines_not_logged(&self, from: u64, entries: &[Issuance]) -> Result<Vec<u8>, StoreError> {
        use std::io::{Seek, SeekFrom};
        let inv = self.p("inventory.txt");
        let mut f = crate::files::durable::open_regular(&inv).map_err(io_err(&inv, "read"))?;
        let mut tail = Vec::new();
        f.seek(SeekFrom::Start(from)).and_then(|_| f.read_to_end(&mut tail)).map_err(io_err(&inv, "read"))?;
        let logged: std::collections::HashSet<&str> = entries.iter().map(|e| e.record.serial.as_str()).collect();
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<(String, &[u8])> = Vec::new();
        let mut rest = tail.as_slice();
        while let Some(n) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(n + 1);
            rest = after;
            let serial = std::str::from_utf8(line)
                .ok()
                .and_then(|l| l.strip_prefix("0x"))
                .and_then(|l| l.split(' ').next())
                .filter(|s| !s.is_empty() && s.len() <= 40 && s.bytes().all(|b| b.is_ascii_hexdigit()));
            if let Some(serial) = serial {
                if logged.contains(serial) || seen.contains(serial) {
                    continue;
                }
                // The line its record says, as vouch writes it: not another certname or
                // other dates (stale blocks after a power loss, a hand edit), nor a line for
                // a record that does not read.
                let said = Self::read_json::<crate::store::CertRecord>(&self.serial_path(serial))
                    .ok()
                    .flatten()
                    .is_some_and(|rec| line.strip_suffix(b"\n") == Some(Self::inventory_line(&rec).as_bytes()));
                if said {
                    seen.insert(serial.to_string());
                    kept.push((serial.to_string(), line));
                }
            }
        }
        if kept.is_empty() {
            return Ok(Vec::new());
        }
        // Not a second copy of a line the inventory holds before `from` (read line by line).
        f.seek(SeekFrom::Start(0)).map_err(io_err(&inv, "read"))?;
        let mut listed = std::collections::HashSet::new();
        for l in std::io::BufRead::split(std::io::BufReader::new((&mut f).take(from)), b'\n') {
            let l = l.map_err(io_err(&inv, "read"))?;
            if let Some(s) = l.strip_prefix(b"0x").and_then(|l| l.split(|b| *b == b' ').next()) {
                if let Some(s) = std::str::from_utf8(s).ok().filter(|s| seen.contains(*s)) {
                    listed.insert(s.to_string());
                }
            }
        }
        Ok(kept.into_iter().filter(|(s, _)| !listed.contains(s)).flat_map(|(_, l)| l.iter().copied()).collect())
    }

    /// Where the claims of entries read from the log are marked, set in each claim's
    /// `journal`. An entry that names its journal relative to the data directory (this
    /// vouch's, for a journal inside it) has it in this store's data directory, wherever that
    /// is now. An older vouch's entry names an absolute path (or one relative to its working
    /// directory), which may be another data directory's journal (this one was moved or copied
    /// from there, its log not yet checkpointed): see [`FileStore::legacy_journal`]. Returns
    /// the paths named that are another data directory's, each once, with the journal used
    /// instead (for the replay to say so).
    fn place_journals(&self, entries: &mut [Issuance]) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
        let Some(dir) = self.root.parent() else { return Ok(Vec::new()) };
        let mut placed: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut moved = Vec::new();
        for c in entries.iter_mut().filter_map(|e| e.claim.as_mut()) {
            if let Some(rel) = &c.journal_in_dir {
                if !plain(rel) {
                    return Err(StoreError::Corrupt {
                        path: self.wal_path(),
                        detail: format!("a claim names its journal as {rel:?}, not a path inside the data directory"),
                    });
                }
                c.journal = dir.join(rel);
                continue;
            }
            if let Some((_, to)) = placed.iter().find(|(from, _)| *from == c.journal) {
                c.journal = to.clone();
                continue;
            }
            let (to, foreign) = self.legacy_journal(dir, &c.journal);
            if foreign {
                moved.push((c.journal.clone(), to.clone()));
            }
            placed.push((c.journal.clone(), to.clone()));
            c.journal = to;
        }
        Ok(moved)
    }

    /// Where the claim of an older vouch's log entry naming the journal `named` is marked
    /// (`dir`: this store's data directory), and whether `named` is another data directory's.
    /// This store's journal is the policy's (or `DIR/replay` when the store was not told one),
    /// and its shape, the path a data directory has it at, is the policy journal's path
    /// inside `dir` (`replay` if it is elsewhere):
    /// 1. `named` is this store's journal (the same path, or the same directory): there.
    /// 2. `named` lies inside `dir`: there (this store's, as it was written).
    /// 3. `named` is `X/<shape>`: `X` is this data directory reached by another path (the
    ///    same directory): `dir/<shape>`; `X` is gone, or a data directory of this same CA
    ///    (its `ca/ca_crt.pem` this store's): the data directory this one was moved or copied
    ///    from: this store's journal, never `named` (the claims are this CA's; written there
    ///    they would be missing here, and land in a directory this store must not touch, or
    ///    recreate one that was removed). The caller says so.
    /// 4. Otherwise, a journal configured outside this CA's data directories (a directory
    ///    shared by several masters, or another master's data directory's journal that this
    ///    one shares, when the policy names it no more): there, as written. (A path ending in
    ///    `replay` alone does not make it another data directory's: this vouch's own log names
    ///    a journal outside DIR by its path too.)
    fn legacy_journal(&self, dir: &Path, named: &Path) -> (PathBuf, bool) {
        let (own, shape) = match &self.journal {
            Some(j) => (j.clone(), inside(j, dir).unwrap_or_else(|| PathBuf::from(DEFAULT_JOURNAL))),
            None => (dir.join(DEFAULT_JOURNAL), PathBuf::from(DEFAULT_JOURNAL)),
        };
        if named == own || same_dir(named, &own) {
            return (own, false);
        }
        if inside(named, dir).is_some() {
            return (named.to_path_buf(), false);
        }
        match strip_suffix(named, &shape) {
            Some(x) if same_dir(x, dir) => (dir.join(&shape), false),
            Some(x) if self.copy_of_this_ca(x) => (own, true),
            _ => (named.to_path_buf(), false),
        }
    }

    /// Whether `x`, a directory an older log's journal path names, is (or was) a data
    /// directory of this store's CA: gone (moved here), or holding this CA's certificate in
    /// `ca/` (copied here). Read without following a link or waiting on a FIFO, 64 KiB at most.
    fn copy_of_this_ca(&self, x: &Path) -> bool {
        let x = if x.as_os_str().is_empty() { Path::new(".") } else { x };
        if fs::symlink_metadata(x).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
            return true;
        }
        let cert = |ca: &Path| {
            let mut buf = Vec::new();
            let path = ca.join("ca_crt.pem"); // the master CA's certificate (issuance::bootstrap::CA_CERT)
            let f = crate::files::durable::open_regular(&path).ok()?;
            f.take(64 << 10).read_to_end(&mut buf).ok()?;
            Some(buf)
        };
        cert(&self.root).is_some_and(|ours| cert(&x.join("ca")).is_some_and(|theirs| theirs == ours))
    }

    pub(super) fn recover_wal(&self) -> Result<(), StoreError> {
        let Some(id) = self.wal_id()? else { return self.reset_wal() };
        if self.known() == Some(id) {
            return Ok(());
        }
        // Someone else wrote or replaced the log (or this process's last write failed): what
        // this process remembers is not trusted, whatever `.lock` says (a lock holder that
        // writes no mark, such as an older vouch, is noticed here when it touched the log).
        self.forget_everything();
        let (header, mut entries, end) = self.read_wal()?;
        for (named, used) in self.place_journals(&mut entries)? {
            tracing::warn!(
                event = "warning",
                what = "replay journal",
                detail = %format!(
                    "the write-ahead log ({}) names the replay journal {}, another data directory's (an older \
                     vouch's log, in a data directory moved or copied here before it was checkpointed): its \
                     claims are marked in this store's journal {} instead, and nothing is written to {}",
                    self.wal_path().display(),
                    named.display(),
                    used.display(),
                    named.display()
                ),
            );
        }
        if entries.is_empty() {
            // Lines appended to the inventory since the header was written (an import, an
            // older vouch's redo): a new header records them, after a flush makes them
            // durable; otherwise the next batch's replay would cut the inventory back to the
            // old header's length, and them with it.
            let inv = self.p("inventory.txt");
            let inventory_len = fs::symlink_metadata(&inv).map(|m| m.len()).unwrap_or(0);
            if inventory_len != header.inventory_len {
                return self.checkpoint_now(&[]);
            }
            if end == id.len {
                self.set_known(Some(id));
                return Ok(());
            }
            return self.reset_wal();
        }
        // A writer killed between its write and its fdatasync left entries that only the
        // page cache holds: make them durable before anything is applied from them.
        File::open(self.wal_path()).and_then(|f| f.sync_data()).map_err(io_err(&self.wal_path(), "sync"))?;
        let inv = self.p("inventory.txt");
        if fs::metadata(&inv).map(|m| m.len()).unwrap_or(0) > header.inventory_len {
            let kept = self.inventory_lines_not_logged(header.inventory_len, &entries)?;
            if kept.is_empty() {
                let f = crate::files::durable::open_nofollow(OpenOptions::new().write(true), &inv)
                    .map_err(io_err(&inv, "open"))?;
                f.set_len(header.inventory_len).map_err(io_err(&inv, "truncate"))?;
            } else {
                // Lines to write back: the cut inventory with them, written whole and synced
                // before it replaces the old one, so that a process dying in this replay loses
                // none of them (the next replay finds them past the header's length again).
                let len = usize::try_from(header.inventory_len)
                    .map_err(|_| StoreError::Corrupt { path: inv.clone(), detail: "too long".into() })?;
                let mut whole = Vec::with_capacity(len.saturating_add(kept.len()));
                crate::files::durable::open_regular(&inv)
                    .and_then(|f| f.take(header.inventory_len).read_to_end(&mut whole))
                    .map_err(io_err(&inv, "read"))?;
                if whole.len() != len {
                    return Err(StoreError::Corrupt { path: inv, detail: "shorter than the log's header says".into() });
                }
                whole.extend_from_slice(&kept);
                crate::files::durable::write_replace_in(&self.p("tmp"), &inv, &whole, 0o644)
                    .map_err(io_err(&inv, "write"))?;
            }
        }
        self.forget_everything();
        let mut inventory = std::io::BufWriter::with_capacity(64 << 10, self.open_inventory()?);
        for e in &entries {
            self.apply(e, &mut inventory, false).map_err(damaged(&self.wal_path()))?;
        }
        inventory.flush().map_err(io_err(&self.p("inventory.txt"), "append to"))?;
        self.checkpoint_now(&journals_of(&entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    use crate::store::file::test_issuance as issuance;

    /// Inventory lines someone else appended (an import, an older vouch's redo) survive a
    /// replay of the log: with an empty log, the next lock holder's new header records them;
    /// with batches in the log, the replay writes them back after cutting the inventory to
    /// the header's length. A torn line, or one for a serial the store has no record of, is
    /// not kept.
    #[test]
    fn inventory_lines_appended_from_outside_survive_a_replay_of_the_log() {
        let append = |store: &FileStore, text: &str| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        let record = |store: &FileStore, serial: &str, name: &str| {
            store.write_record(&issuance(serial, name).record).unwrap();
        };
        let foreign = "0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=imported.example\n";
        for logged in [false, true] {
            let d = tempfile::tempdir().unwrap();
            let store = FileStore::new(d.path().join("ca"));
            store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
            store.checkpoint(&store.lock().unwrap()).unwrap();
            if logged {
                // A batch in the log, then the foreign lines (this process knows its log).
                store.issue(&store.lock().unwrap(), &[issuance("aa02", "b.example")]).unwrap();
            }
            record(&store, "cc01", "imported.example");
            append(&store, foreign);
            // Not kept: no record for its serial; a torn last line.
            append(&store, "0xdd01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=ghost.example\n0xcc0");
            // Another process takes the lock (or this one after a crash), then issues; the
            // one after it replays the log from its header.
            store.set_known(None);
            store.issue(&store.lock().unwrap(), &[issuance("aa03", "c.example")]).unwrap();
            store.set_known(None);
            drop(store.lock().unwrap());
            let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
            assert_eq!(inv.matches("0xcc01 ").count(), 1, "logged {logged}: {inv}");
            for serial in ["0xaa01 ", "0xaa03 "] {
                assert_eq!(inv.matches(serial).count(), 1, "logged {logged}: {inv}");
            }
            assert_eq!(inv.matches("0xaa02 ").count(), usize::from(logged), "logged {logged}: {inv}");
            if logged {
                // Cut with the replay (the empty log's new header would have kept them).
                assert!(!inv.contains("ghost.example"), "{inv}");
            }
            // The torn line: cut with the replay; with an empty log, recorded by its new
            // header as a line of its own (verify reports it: inventory-line-damaged), the
            // next line appended after it, not glued onto it.
            assert!(inv.ends_with('\n') && inv.contains("0xcc0\n") != logged, "logged {logged}: {inv}");
            assert!(inv.lines().any(|l| l.starts_with("0xaa03 ")), "logged {logged}: {inv}");
        }
    }

    /// Review: the lines a replay writes back are those that stand for a certificate the
    /// store knows. A line whose serial has a record but that says something else (another
    /// certname, other dates: a power loss's stale blocks, a hand edit) and a line that
    /// repeats one before the header's length (an older copy of it) are not written back:
    /// before eb219c7 the replay dropped them, now it keeps them (verify then reports
    /// inventory-disagrees, inventory-serial-twice).
    #[test]
    fn review_a_replay_writes_back_only_lines_its_records_say() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        store.checkpoint(&store.lock().unwrap()).unwrap();
        store.issue(&store.lock().unwrap(), &[issuance("aa02", "b.example")]).unwrap();
        store.write_record(&issuance("cc01", "imported.example").record).unwrap();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
            f.write_all(
                b"0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=someone-else.example\n\
                  0xaa01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=a.example\n\
                  0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=imported.example\n",
            )
            .unwrap();
        }
        store.set_known(None);
        drop(store.lock().unwrap());
        let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert!(!inv.contains("someone-else"), "a line its record does not say:\n{inv}");
        assert_eq!(inv.matches("0xaa01 ").count(), 1, "a line before the header's length, twice:\n{inv}");
        assert_eq!(inv.matches("0xaa02 ").count(), 1, "{inv}");
        // The line its record says, after a garbled one of the same serial: kept, once.
        assert_eq!(inv.matches("0xcc01 ").count(), 1, "{inv}");
        assert!(inv.contains("/CN=imported.example\n"), "{inv}");
    }

    /// Review: a torn last inventory line (an append cut short, from outside or by a power
    /// loss) and an empty log: the lock that renews the log's header must not make the torn
    /// bytes part of the inventory that vouch appends after, or the next certificate's line is
    /// glued onto them (`0xcc00xaa03 …`: its serial unreadable, the certificate unlisted).
    #[test]
    fn review_a_torn_inventory_line_before_an_empty_log_does_not_swallow_the_next_line() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        store.checkpoint(&store.lock().unwrap()).unwrap();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
            f.write_all(b"0xcc0").unwrap();
        }
        // Another process takes the lock (or this one after a crash), issues; then another.
        store.set_known(None);
        store.issue(&store.lock().unwrap(), &[issuance("aa03", "c.example")]).unwrap();
        store.set_known(None);
        drop(store.lock().unwrap());
        let listed: Vec<String> =
            crate::store::Store::inventory(&store).unwrap().into_iter().map(|e| e.serial).collect();
        assert!(listed.contains(&"aa03".to_string()), "{listed:?}");
        let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert!(inv.lines().any(|l| l.starts_with("0xaa03 ")), "{inv}");
        // The same without any recovery: the process that knows its log issues after the
        // torn bytes were appended.
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
            f.write_all(b"0xdd0").unwrap();
        }
        store.issue(&store.lock().unwrap(), &[issuance("aa04", "d.example")]).unwrap();
        let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert!(inv.lines().any(|l| l.starts_with("0xaa04 ")), "{inv}");
    }

    /// A batch whose apply failed after its log entry was synced is applied before the next
    /// batch or checkpoint under the same lock (found by review: it used to be discarded).
    #[test]
    fn an_entry_whose_apply_failed_is_applied_before_the_next_write_under_the_same_lock() {
        for next in ["issue", "checkpoint"] {
            let d = tempfile::tempdir().unwrap();
            let store = FileStore::new(d.path().join("ca"));
            {
                let lock = store.lock().unwrap();
                // A transient failure for y's certificate file (stands for ENOSPC, EIO).
                std::fs::create_dir_all(store.signed_path("y.example").unwrap()).unwrap();
                let e = store.issue(&lock, &[issuance("aa01", "y.example")]).unwrap_err();
                assert!(matches!(e, StoreError::AfterCommit { .. }), "{e}");
                std::fs::remove_dir(store.signed_path("y.example").unwrap()).unwrap();
                match next {
                    "issue" => store.issue(&lock, &[issuance("bb02", "z.example")]).unwrap(),
                    _ => store.checkpoint(&lock).unwrap(),
                }
            }
            store.checkpoint(&store.lock().unwrap()).unwrap();
            let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
            assert_eq!(
                std::fs::read_to_string(store.signed_path("y.example").unwrap()).unwrap(),
                "pem of aa01",
                "{next}"
            );
            assert_eq!(inv.matches("0xaa01 ").count(), 1, "{next}: {inv}");
        }
    }

    /// The checkpoint outside the lock: the files of the entries before the due point are
    /// flushed unlocked while more batches are logged; the cut log keeps exactly those
    /// later batches, after a header with the inventory's length at the due point, so that a
    /// recovery from it re-applies them and nothing else.
    #[test]
    fn a_log_cut_outside_the_lock_keeps_the_batches_logged_during_the_flush() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        let big = |serial: &str, name: &str| Issuance {
            pem: format!("{serial}:{}", "x".repeat(4000)),
            ..issuance(serial, name)
        };
        let mut n = 0;
        while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
            n += 1;
            assert!(n < 100, "no checkpoint came due");
            store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
        }
        // The flush begins (claimed as checkpoint_due claims it); two batches come in meanwhile.
        let due = {
            let mut map = checkpoints_due().lock().unwrap();
            let d = map.get_mut(&store.root).unwrap();
            d.running = true;
            d.clone()
        };
        assert!(due.log_len > CHECKPOINT_BYTES);
        let inventory_at_due = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert_eq!(due.inventory_len, inventory_at_due.len() as u64);
        for (serial, name) in [("bb01", "b1.example"), ("bb02", "b2.example")] {
            store.issue(&store.lock().unwrap(), &[big(serial, name)]).unwrap();
        }
        // Still due and claimed: the later batches did not move the due point.
        assert_eq!(checkpoints_due().lock().unwrap().get(&store.root).map(|d| d.log_len), Some(due.log_len));
        store.sync_files(&due.journals).unwrap();
        {
            let _lock = store.lock().unwrap();
            store.cut_log(&due).unwrap();
        }
        let (header, entries, _) = store.read_wal().unwrap();
        assert_eq!(header.inventory_len, due.inventory_len);
        assert_eq!(entries.iter().map(|e| e.record.serial.as_str()).collect::<Vec<_>>(), ["bb01", "bb02"]);
        // A recovery from the cut log (another process's, or after a crash): the later
        // batches are re-applied once, the earlier ones are left as they are.
        std::fs::remove_file(store.signed_path("b2.example").unwrap()).unwrap();
        store.set_known(None);
        store.checkpoint(&store.lock().unwrap()).unwrap();
        let inventory = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert!(inventory.starts_with(&inventory_at_due));
        assert_eq!(inventory.lines().count(), n + 2, "{inventory}");
        assert_eq!(inventory.matches("0xbb02 ").count(), 1);
        assert!(std::fs::read_to_string(store.signed_path("b2.example").unwrap()).unwrap().starts_with("bb02:"));
        assert_eq!(store.read_wal().unwrap().1.len(), 0, "checkpointed");
    }

    /// A log changed since its checkpoint came due (here: checkpointed under the lock, as a
    /// revocation does) is not cut: the due point belongs to a log that is gone.
    #[test]
    fn a_due_point_of_a_log_that_was_replaced_cuts_nothing() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        let big = |serial: &str, name: &str| Issuance {
            pem: format!("{serial}:{}", "x".repeat(4000)),
            ..issuance(serial, name)
        };
        let mut n = 0;
        while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
            n += 1;
            store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
        }
        let due = checkpoints_due().lock().unwrap().get(&store.root).cloned().unwrap();
        store.checkpoint(&store.lock().unwrap()).unwrap();
        assert!(checkpoints_due().lock().unwrap().get(&store.root).is_none(), "a checkpoint settles what was due");
        // The new log grows past the old due point (and comes due itself: not claimed here).
        let mut m = 0;
        while std::fs::metadata(store.wal_path()).unwrap().len() <= due.log_len {
            m += 1;
            store.issue(&store.lock().unwrap(), &[big(&format!("bb{m:02}"), &format!("b{m}.example"))]).unwrap();
        }
        let before = std::fs::read(store.wal_path()).unwrap();
        {
            let _lock = store.lock().unwrap();
            store.cut_log(&due).unwrap();
        }
        assert_eq!(std::fs::read(store.wal_path()).unwrap(), before, "the old due point cut the new log");
        // Its own due point does cut it.
        store.checkpoint_due().unwrap();
        assert!(std::fs::read(store.wal_path()).unwrap().len() < before.len());
        assert_eq!(store.read_wal().unwrap().1.len(), 0);
    }

    /// Found by review: a size-triggered flush that fails no longer makes the process stop
    /// trusting its log. Before 63124fb the failed `syncfs` ran in `after_commit` under the
    /// lock and `set_known(None)` followed, so the next lock re-applied every entry from the
    /// log (rewriting their files) before any checkpoint. Now `checkpoint_due` only drops the
    /// due point; the next batch past the size notes it again and its `syncfs` (on a fresh
    /// descriptor: errseq reports a write-back error to the descriptors open when it happened,
    /// so this one hears nothing) succeeds, and the cut drops entries whose files a failed
    /// write-back never put on the disk. The failed flush is made here with a journal
    /// directory that is gone (ENOENT stands for EIO); the lost write-back by removing the
    /// file it was writing.
    #[test]
    fn a_failed_unlocked_flush_does_not_let_a_later_cut_drop_what_it_failed_to_write() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("ca");
        let store = FileStore::new(root.clone());
        let big = |serial: &str, name: &str| Issuance {
            pem: format!("{serial}:{}", "x".repeat(4000)),
            ..issuance(serial, name)
        };
        let mut n = 0;
        while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
            n += 1;
            assert!(n < 100, "no checkpoint came due");
            store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
        }
        // The unlocked flush fails. (Made here by a replay journal that is gone: the store's
        // own flush goes through a descriptor kept since the first lock, which a directory
        // moved away would not fail.)
        let gone = d.path().join("journal-gone");
        checkpoints_due().lock().unwrap().get_mut(&store.root).unwrap().journals.push(gone);
        assert!(store.checkpoint_due().is_err(), "the flush should have failed");
        // What that failed write-back did not put on the disk: a1's certificate.
        let lost = store.signed_path("a1.example").unwrap();
        std::fs::remove_file(&lost).unwrap();
        // The next batch comes due again; its flush succeeds and the log is cut.
        store.issue(&store.lock().unwrap(), &[big("cc01", "c1.example")]).unwrap();
        store.checkpoint_due().unwrap();
        let in_log = store.read_wal().unwrap().1.iter().any(|e| e.record.certname == "a1.example");
        assert!(
            in_log || lost.exists(),
            "a1's certificate is neither in the log nor in the files: a flush that failed was followed by a cut \
             that trusted the files it had not written"
        );
    }

    /// Found by review: the unlocked flush (before a revocation's lock, and before the
    /// minutely checkpoint's) opens `wal.log` following a symbolic link, before `lock()`'s
    /// `ensure_dirs` refuses one. A `wal.log` linked to a FIFO makes it wait forever (before
    /// 63124fb, `vouch revoke` and the checkpoint were refused with "symbolic link").
    #[test]
    fn the_unlocked_flush_refuses_a_log_that_is_a_symbolic_link() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        std::fs::remove_file(store.wal_path()).unwrap();
        std::os::unix::fs::symlink(&fifo, store.wal_path()).unwrap();
        assert!(store.lock().is_err(), "the lock refuses the link");
        let answered = answered_unless_waiting_on(&fifo, || store.flush_unlocked().is_err());
        assert_eq!(answered, Some(true), "the flush followed the link and waited on the FIFO");
    }

    /// Runs `f` on a thread of its own and returns its answer if it came within 5 s. If not,
    /// `f` waits on `fifo` (an open for reading waits for a writer): writers are opened there,
    /// each leaving at once, until it returns, so that the test ends either way.
    fn answered_unless_waiting_on(fifo: &Path, f: impl FnOnce() -> bool + Send) -> Option<bool> {
        use std::os::unix::fs::OpenOptionsExt;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let _ = tx.send(f());
            });
            let answered = rx.recv_timeout(std::time::Duration::from_secs(5));
            if answered.is_err() {
                let released = std::time::Instant::now();
                while rx.recv_timeout(std::time::Duration::from_millis(20)).is_err() {
                    assert!(released.elapsed() < std::time::Duration::from_secs(30), "it never returned");
                    let _w = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo);
                }
            }
            answered.ok()
        })
    }

    /// Found by review of 5cae2f9: the store's `syncfs` goes through a descriptor of
    /// `DIR/ca` opened at the process's first lock and kept for good. `DIR/ca` may be a link
    /// (the operator's choice: see `ensure_dirs`); switched to a store on another filesystem
    /// (the store moved to another disk), the process notices at its next lock (`.lock` is
    /// another file: everything is distrusted and the log re-applied there), but every flush
    /// after, the recovery's checkpoint included, still syncs the filesystem it left: the new
    /// store's files are never flushed before its log is started over, and a write-back error
    /// there is never heard of. (`sync_files` also skips a replay journal on the new
    /// filesystem, taking it as flushed with the store.) Needs /dev/shm on a filesystem
    /// other than the temporary directory's.
    #[test]
    fn the_stores_flush_follows_a_store_link_switched_to_another_filesystem() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir_in("/dev/shm").unwrap();
        let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
        assert_ne!(dev(d.path()), dev(other.path()), "needs /dev/shm on a filesystem of its own");
        let (first, second) = (d.path().join("first"), other.path().join("second"));
        std::fs::create_dir(&first).unwrap();
        let link = d.path().join("ca");
        std::os::unix::fs::symlink(&first, &link).unwrap();
        let store = FileStore::new(&link);
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        // The store copied to another disk, and the link switched to the copy.
        let copied = std::process::Command::new("cp").arg("-a").arg(&first).arg(&second).status().unwrap();
        assert!(copied.success());
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&second, &link).unwrap();
        store.issue(&store.lock().unwrap(), &[issuance("bb02", "b.example")]).unwrap();
        store.checkpoint(&store.lock().unwrap()).unwrap();
        let flushed = match flush_handles().lock().unwrap().get(&store.root) {
            Some(f) => f.metadata().unwrap().dev(),
            None => dev(&link),
        };
        assert_eq!(
            flushed,
            dev(&link),
            "the store's syncfs goes to the filesystem of the directory it was at first, not the one it is on"
        );
    }

    /// Found by review of 5cae2f9 (older than it): the unlocked flush now refuses a `wal.log`
    /// that is not a regular file without waiting on it, but the lock does not: `ensure_dirs`
    /// refuses a link only, and `recover_wal`'s `wal_id` opens the log for reading with a plain
    /// open, which waits for a writer on a FIFO, holding the store's lock: every request and
    /// command after waits with it.
    #[test]
    fn the_lock_refuses_a_log_that_is_a_fifo_instead_of_waiting_on_it() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        std::fs::remove_file(store.wal_path()).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(store.wal_path()).status().unwrap().success());
        let answered = answered_unless_waiting_on(&store.wal_path(), || store.lock().is_err());
        assert_eq!(answered, Some(true), "the lock waited on the FIFO at wal.log, holding the store's lock");
    }

    /// Review of 0296b27: `sync_files` holds FLUSHING only through the `syncfs` calls; the
    /// caller notes a failure (`map_err(|e| self.flush_failed(e))`) after the guard is dropped.
    /// So a flush that failed without the lock is not noted "before another flush can begin":
    /// a checkpoint under the lock that runs in that gap flushes (through the same kept
    /// descriptor: a write-back error is reported once, the failed flush took it), asks
    /// `flush_failed_since` (nothing noted yet), and starts the log over: the entries whose
    /// files the failed write-back may have lost leave the log; the failure, noted a moment
    /// later, makes the next lock re-apply a log that no longer holds them. The failing
    /// thread is held in that gap here (as a preemption would hold it): parked on the
    /// `failed_flushes` mutex the test holds, then moved into a signal handler that waits,
    /// so the mutex is free for the checkpoint. The failed flush is made with a replay
    /// journal that is gone (ENOENT stands for EIO).
    #[test]
    #[allow(unsafe_code)]
    fn a_failed_flush_is_noted_before_a_checkpoint_under_the_lock_can_flush() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        static PARK: AtomicBool = AtomicBool::new(false);
        static PARKED: AtomicBool = AtomicBool::new(false);
        extern "C" fn park(_: libc::c_int) {
            PARKED.store(true, SeqCst);
            while PARK.load(SeqCst) {
                // SAFETY: async-signal-safe.
                unsafe { libc::sched_yield() };
            }
        }
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        journals_written().lock().unwrap().entry(store.root.clone()).or_default().push(d.path().join("journal-gone"));
        // SAFETY: installs a handler that only touches atomics and calls sched_yield.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = park as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let failed = failed_flushes();
        let (lo, hi) = (failed as *const _ as usize, failed as *const _ as usize + std::mem::size_of_val(failed));
        let store = &store;
        std::thread::scope(|scope| {
            let held = failed.lock().unwrap();
            PARK.store(true, SeqCst);
            let (tx, rx) = std::sync::mpsc::channel();
            let flusher = scope.spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                store.flush_unlocked().is_err()
            });
            let tid = rx.recv().unwrap();
            // Waits until the flusher's flush has failed and it waits for the failed_flushes
            // mutex (a futex wait on its address).
            let started = std::time::Instant::now();
            loop {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(20),
                    "the flush never came to note its failure"
                );
                let sc = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
                let mut f = sc.split_whitespace();
                let nr = f.next().and_then(|n| n.parse::<i64>().ok());
                let addr = f.next().and_then(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16).ok());
                if nr == Some(libc::SYS_futex) && addr.is_some_and(|a| (lo..hi).contains(&a)) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // The flusher is moved off the mutex (as if preempted before it took it).
            // SAFETY: signals a thread of this process that is alive (it waits above).
            assert_eq!(unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) }, 0);
            while !PARKED.load(SeqCst) {
                std::thread::yield_now();
            }
            drop(held);
            // Meanwhile, a checkpoint under the lock (serve's minutely one, a revocation's).
            // (Were the failure noted under FLUSHING, this one would wait for the parked
            // flusher: it is let go after a while.)
            let checkpointer = scope.spawn(|| store.checkpoint(&store.lock().unwrap()));
            let waited = std::time::Instant::now();
            while !checkpointer.is_finished() && waited.elapsed() < std::time::Duration::from_secs(2) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            PARK.store(false, SeqCst);
            let checkpointed = checkpointer.join().unwrap();
            assert!(flusher.join().unwrap(), "the flush should have failed");
            let in_log = store.read_wal().unwrap().1.iter().any(|e| e.record.certname == "a.example");
            assert!(
                in_log,
                "a flush failed before the checkpoint's flush began, yet the checkpoint ({checkpointed:?}) started \
                 the log over: the failure is noted only after FLUSHING is released"
            );
        });
    }

    /// Review of 0296b27 (older: `sync_filesystem`'s plain open): a replay journal on another
    /// filesystem is flushed through `File::open` of its path, which waits on a FIFO there (a
    /// journal directory replaced by one). Now that flush holds FLUSHING, the process-wide
    /// mutex every flush takes: the unlocked flush waits forever, and every checkpoint under
    /// the store's lock after it (a batch past the size, a revocation's, serve's minutely
    /// one) waits for FLUSHING holding the lock. Needs /dev/shm on a filesystem other than
    /// the temporary directory's.
    #[test]
    fn a_flush_refuses_a_journal_that_is_a_fifo_instead_of_waiting_on_it() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir_in("/dev/shm").unwrap();
        let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
        assert_ne!(dev(d.path()), dev(other.path()), "needs /dev/shm on a filesystem of its own");
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        let journal = other.path().join("replay");
        assert!(std::process::Command::new("mkfifo").arg(&journal).status().unwrap().success());
        journals_written().lock().unwrap().entry(store.root.clone()).or_default().push(journal.clone());
        let answered = answered_unless_waiting_on(&journal, || store.flush_unlocked().is_err());
        assert_eq!(answered, Some(true), "the flush waited on the FIFO at the journal, holding FLUSHING");
    }

    /// An issuance whose attributes were claimed in the replay journal `journal`.
    fn claimed(serial: &str, certname: &str, journal: &Path) -> Issuance {
        Issuance {
            claim: Some(SpentClaim {
                journal: journal.to_path_buf(),
                journal_in_dir: None,
                key: format!("key of {serial}"),
                expiry: "2031-01-01T00:00:00Z".into(),
                certname: certname.into(),
                holder: "h".into(),
                time: "2030-01-01T00:00:00Z".into(),
            }),
            ..issuance(serial, certname)
        }
    }

    /// The entry of `certname` in the replay journal `dir` (its contents), if any.
    fn journal_entry(dir: &Path, certname: &str) -> Option<String> {
        let mut found = None;
        for bucket in std::fs::read_dir(dir).ok()?.flatten() {
            for e in std::fs::read_dir(bucket.path()).unwrap().flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap();
                if text.contains(&format!("\"certname\":\"{certname}\"")) {
                    assert!(found.replace(text).is_none(), "two entries for {certname} in {}", dir.display());
                }
            }
        }
        found
    }

    /// Writes `entries` as the log of `store`, the way a vouch older than `journal_in_dir`
    /// wrote it (each claim's journal as an absolute path only), unknown to this process.
    fn write_old_log(store: &FileStore, entries: &[Issuance]) {
        drop(store.lock().unwrap());
        let inventory_len = std::fs::metadata(store.p("inventory.txt")).map(|m| m.len()).unwrap_or(0);
        let mut log = FileStore::wal_header(&store.wal_path(), inventory_len).unwrap();
        log.extend(encode_batch(entries, &store.wal_path(), None).unwrap());
        assert!(!String::from_utf8_lossy(&log).contains("journal_in_dir"));
        std::fs::write(store.wal_path(), log).unwrap();
        store.set_known(None);
    }

    /// A data directory copied elsewhere (a backup restored, `cp -a`, a volume mounted at
    /// another path) with its log not checkpointed: the log names the store's own journal
    /// relative to the data directory, and the replay marks the claims in the copy's
    /// journal, never in the directory it was copied from (before, the log held the absolute
    /// path: the copy's replay protection missed them, and the old directory was written to,
    /// or recreated after its removal).
    #[test]
    fn a_copied_data_directory_replays_its_claims_into_its_own_journal() {
        let d = tempfile::tempdir().unwrap();
        let (old, new) = (d.path().join("old"), d.path().join("new"));
        let store = FileStore::new(old.join("ca"));
        store.issue(&store.lock().unwrap(), &[claimed("aa01", "a.example", &old.join("replay"))]).unwrap();
        let log = std::fs::read_to_string(store.wal_path()).unwrap();
        assert!(log.contains("\"journal_in_dir\":\"replay\""), "{log}");
        let copied = std::process::Command::new("cp").arg("-a").arg(&old).arg(&new).status().unwrap();
        assert!(copied.success());
        std::fs::remove_dir_all(&old).unwrap();
        // The copy's journal entry lost as a power loss could (it is written unsynced).
        std::fs::remove_dir_all(new.join("replay")).unwrap();
        let copy = FileStore::new(new.join("ca"));
        drop(copy.lock().unwrap());
        let entry = journal_entry(&new.join("replay"), "a.example").expect("the claim in the copy's journal");
        assert!(entry.contains("\"issued\":true"), "{entry}");
        assert!(!old.exists(), "the replay wrote into the directory the store was copied from");
    }

    /// A data directory moved (or removed) while a process that opened its store runs on
    /// (`vouch serve`): the next lock is refused, and nothing is made at the old path. Before,
    /// the lock made `ca/` there again, empty, and the process went on issuing into it, its
    /// claims into a new, empty replay journal at the old path: attributes spent before the
    /// move were good again there.
    #[test]
    fn a_store_moved_while_its_process_runs_is_not_made_again_at_the_old_path() {
        let d = tempfile::tempdir().unwrap();
        let (old, new) = (d.path().join("old"), d.path().join("new"));
        let store = FileStore::new(old.join("ca"));
        store.issue(&store.lock().unwrap(), &[claimed("aa01", "a.example", &old.join("replay"))]).unwrap();
        std::fs::rename(&old, &new).unwrap();
        match store.lock() {
            Err(StoreError::Io { path, source, .. }) => {
                assert_eq!(path, old.join("ca"));
                assert!(source.to_string().contains("moved or removed"), "{source}");
            }
            other => panic!("the lock of a moved store: {:?}", other.map(drop)),
        }
        assert!(!old.exists(), "the lock made the moved store again at its old path");
        // At its new place, a process opens it as usual.
        let moved = FileStore::new(new.join("ca"));
        drop(moved.lock().unwrap());
        assert!(moved.serial_path("aa01").exists());
    }

    /// A log an older vouch wrote names each claim's journal by its absolute path: one in
    /// another data directory (this one moved or copied from there) is replayed into this
    /// store's own journal, and said to the caller; this store's journal, a journal
    /// configured outside any data directory, or this data directory reached through another
    /// path, are written where the log says.
    #[test]
    fn an_older_vouchs_log_replays_claims_of_another_data_directorys_journal_into_this_ones() {
        let d = tempfile::tempdir().unwrap();
        let (old, new, shared) = (d.path().join("old"), d.path().join("new"), d.path().join("shared"));
        let store = FileStore::new(new.join("ca"));
        // The directory it was copied from still there (`cp -a`), or gone (moved).
        for old_there in [true, false] {
            if old_there {
                // A copy of this CA's data directory: its certificate the same.
                std::fs::create_dir_all(old.join("ca")).unwrap();
                std::fs::write(old.join("ca/ca_crt.pem"), "this CA").unwrap();
            }
            std::fs::create_dir_all(new.join("ca")).unwrap();
            std::fs::write(new.join("ca/ca_crt.pem"), "this CA").unwrap();
            write_old_log(
                &store,
                &[claimed("aa01", "moved.example", &old.join("replay")), claimed("aa02", "shared.example", &shared)],
            );
            drop(store.lock().unwrap());
            let entry = journal_entry(&new.join("replay"), "moved.example").expect("the claim in this store's journal");
            assert!(entry.contains("\"issued\":true"), "{entry}");
            assert!(!old.join("replay").exists(), "the replay wrote into the other data directory");
            assert_eq!(old.exists(), old_there, "the replay recreated the other data directory");
            // A journal configured outside any data directory: where it is.
            assert!(journal_entry(&shared, "shared.example").is_some_and(|e| e.contains("\"issued\":true")));
            assert!(journal_entry(&new.join("replay"), "shared.example").is_none());
            std::fs::remove_dir_all(new.join("replay")).unwrap();
            std::fs::remove_dir_all(&shared).unwrap();
            let _ = std::fs::remove_dir_all(&old);
            std::fs::remove_dir_all(new.join("ca")).unwrap();
        }
        // Which journal each path the log names stands for, and which are said to be another's.
        let place = |store: &FileStore, named: &Path| {
            let mut entries = vec![claimed("aa03", "c.example", named)];
            let moved = store.place_journals(&mut entries).unwrap();
            let used = entries[0].claim.as_ref().unwrap().journal.clone();
            let said = moved == [(named.to_path_buf(), used.clone())];
            assert!(said || moved.is_empty(), "{moved:?}");
            (used, said)
        };
        std::fs::create_dir_all(new.join("ca")).unwrap();
        assert_eq!(place(&store, &old.join("replay")), (new.join("replay"), true));
        assert_eq!(place(&store, &new.join("replay")), (new.join("replay"), false));
        assert_eq!(place(&store, &new.join("elsewhere")), (new.join("elsewhere"), false));
        assert_eq!(place(&store, &shared.join("journal")), (shared.join("journal"), false));
        // A directory that is no data directory of this CA, though its journal is named
        // `replay` (a shared journal's, another master's data directory with a CA of its
        // own): there, as written. A copy of this CA's: this store's.
        std::fs::write(new.join("ca/ca_crt.pem"), "this CA").unwrap();
        let (plain_dir, master1) = (d.path().join("plain"), d.path().join("master1"));
        std::fs::create_dir_all(&plain_dir).unwrap();
        assert_eq!(place(&store, &plain_dir.join("replay")), (plain_dir.join("replay"), false));
        std::fs::create_dir_all(master1.join("ca")).unwrap();
        std::fs::write(master1.join("ca/ca_crt.pem"), "another CA").unwrap();
        assert_eq!(place(&store, &master1.join("replay")), (master1.join("replay"), false));
        std::fs::write(master1.join("ca/ca_crt.pem"), "this CA").unwrap();
        assert_eq!(place(&store, &master1.join("replay")), (new.join("replay"), true));
        // This data directory through a link: the same directory, no other's.
        let alias = d.path().join("alias");
        std::os::unix::fs::symlink(&new, &alias).unwrap();
        assert_eq!(place(&store, &alias.join("replay")), (new.join("replay"), false));
        // The policy's journal, wherever it is, is where its claims go; a custom one inside
        // the data directory gives the shape another data directory's has.
        let told = |j: &Path| FileStore::new(new.join("ca")).with_journal(Some(j.to_path_buf()));
        assert_eq!(place(&told(&shared.join("replay")), &shared.join("replay")), (shared.join("replay"), false));
        let custom = told(&new.join("state/journal"));
        assert_eq!(place(&custom, &old.join("state/journal")), (new.join("state/journal"), true));
        assert_eq!(place(&custom, &old.join("replay")), (old.join("replay"), false));
        // A path relative to the data directory that leaves it: vouch never wrote it.
        let mut planted = vec![claimed("aa04", "d.example", &old.join("replay"))];
        planted[0].claim.as_mut().unwrap().journal_in_dir = Some(PathBuf::from("../old/replay"));
        assert!(matches!(store.place_journals(&mut planted), Err(StoreError::Corrupt { .. })));
    }

    /// A torn last batch (never acknowledged) is dropped, whatever part of it reached the
    /// disk; damage before a later committed batch stops the store instead.
    #[test]
    fn a_torn_last_batch_is_dropped_and_damage_before_a_good_batch_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        {
            let lock = store.lock().unwrap();
            store.issue(&lock, &[issuance("aa01", "a.example"), issuance("aa02", "b.example")]).unwrap();
            store.issue(&lock, &[issuance("aa03", "c.example")]).unwrap();
        }
        let wal = store.wal_path();
        let good = std::fs::read(&wal).unwrap();
        let lines: Vec<&[u8]> = good.split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 1 + 3 + 2, "header, 3 entries, 2 commit lines");
        // The second batch torn: its commit line missing, or a hole of zeros in its entry.
        let first_batch: Vec<u8> = lines[..4].concat();
        for torn in [
            [first_batch.clone(), lines[4].to_vec()].concat(),
            [first_batch.clone(), vec![0u8; lines[4].len()], lines[5].to_vec()].concat(),
        ] {
            std::fs::write(&wal, &torn).unwrap();
            let (_, entries, end) = store.read_wal().unwrap();
            assert_eq!(entries.iter().map(|e| e.record.serial.as_str()).collect::<Vec<_>>(), ["aa01", "aa02"]);
            assert_eq!(end, first_batch.len() as u64);
        }
        // A torn tail holding a stale commit line that does not verify: still just torn.
        let stale = [first_batch.clone(), b"garbage\n".to_vec(), lines[5].to_vec()].concat();
        std::fs::write(&wal, &stale).unwrap();
        assert_eq!(store.read_wal().unwrap().1.len(), 2);
        // A damaged entry in the first batch, the second one whole: the log is damaged.
        let mut damaged = good.clone();
        let at = lines[0].len() + 10;
        damaged[at] ^= 0x20;
        std::fs::write(&wal, &damaged).unwrap();
        assert!(matches!(store.read_wal(), Err(StoreError::Corrupt { .. })));
        std::fs::write(&wal, &good).unwrap();
        assert_eq!(store.read_wal().unwrap().1.len(), 3);
    }
}
