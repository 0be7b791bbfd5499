//! Template use counts in the file journal (signature version 3; the algorithm is
//! [`crate::store::templates`]): in the bucket of the template's expiry, `T.count` (the
//! count, `USES:LAST`, replaced whole by rename), `T.lock` (flock: the compare-and-swap
//! reads, compares and replaces under it) and one `I.use` per counted instance (created
//! with link(2), never replaced). `T` and `I` are the SHA-256 of the template's and the
//! instance's keys. Every write is synced, also in the CA's unsynced journal: the
//! store's write-ahead log does not name counts. Pruned with the bucket.
//!
//! Instance claims (templates bound to the instance) are not bucketed (one instance meets
//! templates of different expiries): `instances/C` (C: the SHA-256 of the claim key), made
//! with link(2) and synced like a use record, holding `HOLDER EXPIRY`; removed by the prune
//! a day after EXPIRY, the expiry of the template that took it.

use super::{bucket, Journal};
use crate::store::templates::{
    format_count, parse_count, peek_template, use_template, Cells, Count, Counted, InstanceClaims, TemplateUse,
};
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

/// The journal's instance claims (see the module's comment).
pub(super) struct FileInstances {
    pub(super) dir: PathBuf,
    pub(super) expiry: time::OffsetDateTime,
}

/// The name of the directory of instance claims in the journal.
pub(super) const INSTANCES: &str = "instances";

/// An instance claim's holder and expiry, as its file holds them.
/// Read as a regular file only: never through a link, never waiting on a FIFO planted there.
pub(super) fn read_instance_claim(path: &std::path::Path) -> Result<Option<(String, String)>, StoreError> {
    match crate::files::durable::read_regular(path) {
        Ok(bytes) => match String::from_utf8_lossy(&bytes).trim_end().split_once(' ') {
            Some((holder, expiry)) => Ok(Some((holder.to_string(), expiry.to_string()))),
            None => Err(StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: "an instance claim is not HOLDER EXPIRY".into(),
            }),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, "read an instance claim in", e)),
    }
}

impl InstanceClaims for FileInstances {
    fn claim_instance(&self, key: &str, holder: &str) -> Result<bool, StoreError> {
        let path = self.dir.join(key);
        let text = format!("{holder} {}\n", crate::encoding::time::format_rfc3339(self.expiry));
        let written =
            crate::files::durable::in_dir(&path, || crate::files::durable::write_new(&path, text.as_bytes(), 0o644));
        match written {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Ok(self.instance_holder(key)?.as_deref() == Some(holder))
            }
            Err(e) => Err(io_error(&path, "claim an instance in", e)),
        }
    }

    fn instance_holder(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(read_instance_claim(&self.dir.join(key))?.map(|(holder, _)| holder))
    }

    /// Read, compare, remove: the file, once it names `holder`, is replaced by no one
    /// (claims are made with link(2), never over an existing one), and the prune removes
    /// only a claim a day past its expiry, never one this use (of a template not yet
    /// expired) just took; so the file removed is the one read.
    fn release_instance(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        if self.instance_holder(key)?.as_deref() != Some(holder) {
            return Ok(());
        }
        let path = self.dir.join(key);
        // Not synced: a removal lost to a power cut leaves the claim taken (until the prune).
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error(&path, "give back an instance claim in", e)),
            _ => Ok(()),
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

    fn instances(&self, u: &TemplateUse) -> FileInstances {
        FileInstances { dir: self.dir.join(INSTANCES), expiry: u.expiry }
    }

    /// Counts one instance's use of a template, its instance claimed first if the template
    /// is bound ([`crate::store::templates`]).
    pub fn count_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        let claim = u.instance_claim.as_deref();
        if claim.is_some() {
            self.prune_instances_now_and_then();
        }
        use_template(&self.template_cells(u), &self.instances(u), &use_digest(u), claim, u.max_uses)
    }

    /// What [`Journal::count_template_use`] would meet, writing nothing.
    pub fn peek_template_use(&self, u: &TemplateUse) -> Result<Counted, StoreError> {
        let claim = u.instance_claim.as_deref();
        peek_template(&self.template_cells(u), &self.instances(u), &use_digest(u), claim, u.max_uses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn an_instance_claim_holds_across_templates_until_a_day_after_its_templates_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        let expiry = datetime!(2030-01-01 00:00 UTC);
        let claim = Some("aws:111122223333:i-0000000a".to_string());
        let u = TemplateUse {
            template_key: "a".into(),
            instance_key: "a-x".into(),
            max_uses: 2,
            expiry,
            instance_claim: claim,
        };
        let other = TemplateUse { template_key: "b".into(), instance_key: "b-x".into(), ..u.clone() };
        assert_eq!(j.count_template_use(&u).unwrap(), Counted::Use { number: 1, fresh: true });
        assert_eq!(j.count_template_use(&other).unwrap(), Counted::InstanceReplayed);
        j.prune(expiry + time::Duration::hours(24)).unwrap();
        assert_eq!(j.peek_template_use(&other).unwrap(), Counted::InstanceReplayed);
        j.prune(expiry + time::Duration::hours(26)).unwrap();
        let claims = std::fs::read_dir(dir.path().join(INSTANCES)).unwrap();
        let claims: Vec<_> = claims.map(|e| e.unwrap().file_name()).collect();
        assert_eq!(claims, [super::super::prune_instances::CURSOR], "only the prune's cursor is left");
        assert_eq!(j.peek_template_use(&other).unwrap(), Counted::Use { number: 1, fresh: true });
    }
}
