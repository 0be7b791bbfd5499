//! Template use counts in the file journal (signature version 3; the algorithm is
//! [`crate::store::templates`]): in the bucket of the template's expiry, `T.count` (the
//! count, `USES:LAST`, replaced whole by rename), `T.lock` (flock: the compare-and-swap
//! reads, compares and replaces under it) and one `I.use` per counted instance (created
//! with link(2), never replaced). `T` and `I` are the SHA-256 of the template's and the
//! instance's keys. Every write is synced, also in the CA's unsynced journal: the
//! store's write-ahead log does not name counts. Pruned with the bucket.

use super::{bucket, Journal};
use crate::store::templates::{count_use, format_count, parse_count, peek_use, Cells, Count, Counted, TemplateUse};
use crate::store::StoreError;
use std::io;
use std::path::PathBuf;

struct FileCells {
    dir: PathBuf,
    template: String,
}

fn io_error(path: &std::path::Path, op: &'static str, source: io::Error) -> StoreError {
    StoreError::Io { path: path.to_path_buf(), op, source }
}

impl FileCells {
    fn count_path(&self) -> PathBuf {
        self.dir.join(format!("{}.count", self.template))
    }
    fn use_path(&self, instance: &str) -> PathBuf {
        self.dir.join(format!("{instance}.use"))
    }
}

impl Cells for FileCells {
    fn read_count(&self) -> Result<Option<Count>, StoreError> {
        let path = self.count_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => parse_count(&text)
                .map(Some)
                .ok_or_else(|| StoreError::Corrupt { path, detail: "a template's use count is not USES:LAST".into() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&path, "read a template's use count in", e)),
        }
    }

    fn swap_count(&self, old: Option<&Count>, new: &Count) -> Result<bool, StoreError> {
        use rustix::fs::{flock, FlockOperation};
        crate::files::durable::create_dirs(&self.dir).map_err(|e| io_error(&self.dir, "create", e))?;
        let lock_path = self.dir.join(format!("{}.lock", self.template));
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(true).create(true);
        let lock = crate::files::durable::open_nofollow(&opts, &lock_path)
            .map_err(|e| io_error(&lock_path, "open the template count lock", e))?;
        flock(&lock, FlockOperation::LockExclusive)
            .map_err(|e| io_error(&lock_path, "lock the template count", e.into()))?;
        if self.read_count()?.as_ref() != old {
            return Ok(false);
        }
        let path = self.count_path();
        crate::files::durable::write_replace(&path, format!("{}\n", format_count(new)).as_bytes(), 0o644)
            .map_err(|e| io_error(&path, "write a template's use count in", e))?;
        // The lock is released when `lock` is closed, after the synced replace.
        drop(lock);
        Ok(true)
    }

    fn read_use(&self, instance: &str) -> Result<Option<u64>, StoreError> {
        let path = self.use_path(instance);
        match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim_end()
                .parse()
                .map(Some)
                .map_err(|_| StoreError::Corrupt { path, detail: "a template use record is not a number".into() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&path, "read a template use in", e)),
        }
    }

    fn record_use(&self, instance: &str, number: u64) -> Result<(), StoreError> {
        let path = self.use_path(instance);
        let written = crate::files::durable::in_dir(&path, || {
            crate::files::durable::write_new(&path, format!("{number}\n").as_bytes(), 0o644)
        });
        match written {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io_error(&path, "record a template use in", e)),
        }
    }
}

/// The digest an instance's use record is named by (the same in the LDAP store).
fn use_digest(u: &TemplateUse) -> String {
    crate::store::claim_digest(&format!("template-use:{}", u.instance_key))
}

impl Journal {
    fn template_cells(&self, u: &TemplateUse) -> FileCells {
        FileCells { dir: self.dir.join(bucket(u.expiry)), template: crate::store::claim_digest(&u.template_key) }
    }

    /// Counts one instance's use of a template ([`crate::store::templates`]).
    pub fn count_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        count_use(&self.template_cells(u), &use_digest(u), u.max_uses)
    }

    /// What [`Journal::count_template_use`] would meet, writing nothing.
    pub fn peek_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        peek_use(&self.template_cells(u), &use_digest(u), u.max_uses)
    }
}
