//! Where the claims of replayed log entries are marked: in this data directory's replay
//! journal when the log names one inside it (or, for an older vouch's log, one of another
//! data directory of this same CA), else in the journal the entry names.

use super::super::FileStore;
use crate::store::{Issuance, StoreError};
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The replay journal's default place in a data directory (the policy's default `replay`).
const DEFAULT_JOURNAL: &str = "replay";

/// `path` relative to `dir`, if it lies inside it: `dir` as the path starts, then plain
/// names only (no `..`). Lexical: the paths as this process names them.
pub(super) fn inside(path: &Path, dir: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(dir).ok()?;
    plain(rel).then(|| rel.to_path_buf())
}

/// A relative path of plain names (at least one): one that stays inside the directory it
/// is joined to.
pub(super) fn plain(rel: &Path) -> bool {
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

impl FileStore {
    /// Where the claims of entries read from the log are marked, set in each claim's
    /// `journal`. An entry that names its journal relative to the data directory (this
    /// vouch's, for a journal inside it) has it in this store's data directory, wherever that
    /// is now. An older vouch's entry names an absolute path (or one relative to its working
    /// directory), which may be another data directory's journal (this one was moved or copied
    /// from there, its log not yet checkpointed): see [`FileStore::legacy_journal`]. Returns
    /// the paths named that are another data directory's, each once, with the journal used
    /// instead (for the replay to say so).
    pub(super) fn place_journals(&self, entries: &mut [Issuance]) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
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
}
