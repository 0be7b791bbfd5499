//! The log's bytes: its header line, its entries and their batches' commit lines; writing
//! a batch's or a header's bytes, and reading the log back (only a regular file, never
//! through a link), dropping a torn last batch.

use super::super::{io_err, FileStore};
use super::journals::inside;
use super::WalId;
use crate::store::{Issuance, SpentClaim, StoreError};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// The log's format: 2 = batches closed by a commit line.
const WAL_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
pub(super) struct WalHeader {
    wal: u32,
    pub(super) inventory_len: u64,
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

/// A batch as the log holds it: one JSON line per entry, then its commit line. `dir`: the
/// data directory, relative to which a journal inside it is named.
pub(super) fn encode_batch(batch: &[Issuance], path: &Path, dir: Option<&Path>) -> Result<Vec<u8>, StoreError> {
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
pub(super) fn appended_id(f: &File, generation: [u8; 32]) -> Option<WalId> {
    use std::os::unix::fs::MetadataExt;
    f.metadata().ok().map(|m| WalId {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        ctime: (m.ctime(), m.ctime_nsec()),
        generation,
    })
}

/// Each line of `bytes` as its span (start, end past its newline); bytes after the last
/// newline are in none.
fn line_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut start = 0;
    while let Some(n) = bytes.get(start..).and_then(|rest| rest.iter().position(|b| *b == b'\n')) {
        lines.push((start, start + n + 1));
        start += n + 1;
    }
    lines
}

/// Whether a commit line starting after byte `a` of the log verifies over its own batch.
fn a_later_batch_verifies(bytes: &[u8], lines: &[(usize, usize)], a: usize) -> bool {
    lines.iter().enumerate().any(|(j, &(x, y))| {
        x > a
            && serde_json::from_slice::<WalCommit>(&bytes[x..y]).is_ok_and(|c| {
                // It verifies over its own batch: the lines just before it.
                j.checked_sub(c.batch)
                    .and_then(|k| lines.get(k))
                    .is_some_and(|&(s0, _)| s0 > a && c.sha256 == crate::encoding::sha256_hex(&bytes[s0..x]))
            })
    })
}

impl FileStore {
    /// Opens the log to read it: never through a link, never waiting on a FIFO; only a
    /// regular file (`None`: there is none).
    pub(super) fn open_log(&self) -> Result<Option<File>, StoreError> {
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

    pub(super) fn wal_id(&self) -> Result<Option<WalId>, StoreError> {
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

    /// Reads the log: its header, the entries of every batch whose commit line verifies,
    /// and the length they end at. A torn last batch (a power loss during its write: never
    /// acknowledged) lies beyond it and is dropped; damage before a later good batch is an error.
    pub(super) fn read_wal(&self) -> Result<(WalHeader, Vec<Issuance>, u64), StoreError> {
        let path = self.wal_path();
        let mut bytes = Vec::new();
        let Some(mut f) = self.open_log()? else {
            return Err(StoreError::Io { path, op: "read", source: io::ErrorKind::NotFound.into() });
        };
        f.read_to_end(&mut bytes).map_err(io_err(&path, "read"))?;
        let corrupt = |detail: String| StoreError::Corrupt { path: path.clone(), detail };
        let lines = line_spans(&bytes);
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
                    let later = a_later_batch_verifies(&bytes, &lines, a);
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
    pub(in crate::store::file) fn log_settled(&self) -> bool {
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

    /// A new log's header line: a new generation, and the length of the inventory that
    /// the log's entries come after.
    pub(super) fn wal_header(path: &Path, inventory_len: u64) -> Result<Vec<u8>, StoreError> {
        let mut g = [0u8; 16];
        aws_lc_rs::rand::fill(&mut g)
            .map_err(|_| StoreError::Corrupt { path: path.to_path_buf(), detail: "no randomness available".into() })?;
        let generation = crate::encoding::hex(&g);
        let mut header = serde_json::to_vec(&WalHeader { wal: WAL_VERSION, inventory_len, generation })
            .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() })?;
        header.push(b'\n');
        Ok(header)
    }
}
