//! The journal's template cells read whole, for `vouch migrate`: each unexpired template
//! count (`BUCKET/T.count`), use record (`BUCKET/I.use`) and instance claim
//! (`instances/C`), with the time until which the journal keeps it. Read-only, as regular
//! files only (never through a link).

use super::templates::{read_instance_claim, INSTANCES};
use super::{parse_bucket, Journal};
use crate::store::templates::{parse_count, Count};
use crate::store::StoreError;
use std::io;
use std::path::Path;
use time::{Duration, OffsetDateTime};

/// What the journal's prune keeps past a bucket's hour or a claim's expiry (a day, and the
/// hour a bucket spans): the same margin as [`Journal::prune`].
const KEPT: Duration = Duration::hours(25);

/// One cell: its digest (the file's name without its suffix), what it holds, and `until`:
/// an expiry no earlier than the one the journal prunes it by (the end of its bucket's hour,
/// or a second past the claim's expiry), so a store pruning `until` + a day keeps it as long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell<T> {
    pub digest: String,
    pub value: T,
    pub until: OffsetDateTime,
}

/// The journal's template cells, unexpired at the time they were read.
#[derive(Debug, Default)]
pub struct TemplateCells {
    pub counts: Vec<Cell<Count>>,
    /// Use records: the use number each instance holds.
    pub uses: Vec<Cell<u64>>,
    /// Instance claims: their holder (the digest of the use that took them).
    pub instances: Vec<Cell<String>>,
}

fn io_error(path: &Path, op: &'static str, source: io::Error) -> StoreError {
    StoreError::Io { path: path.to_path_buf(), op, source }
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The names in `dir` (none if it does not exist).
fn names(dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io_error(dir, "read directory", e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|err| io_error(dir, "read directory", err))?;
        if let Some(name) = e.file_name().to_str() {
            out.push(name.to_string());
        }
    }
    out.sort();
    Ok(out)
}

fn read_text(path: &Path) -> Result<String, StoreError> {
    crate::files::durable::read_regular(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| io_error(path, "read a template cell in", e))
}

impl Journal {
    /// Every template count, use record and instance claim the prune would keep at `now`.
    /// A count or use record that does not read is an error (a limit never silently dropped).
    pub fn template_cells_at(&self, now: OffsetDateTime) -> Result<TemplateCells, StoreError> {
        let mut cells = TemplateCells::default();
        for bucket in names(&self.dir)? {
            let Some(hour) = parse_bucket(&bucket) else { continue };
            if hour.checked_add(KEPT).is_some_and(|t| t < now) {
                continue;
            }
            let until = hour.saturating_add(Duration::hours(1));
            let dir = self.dir.join(&bucket);
            for name in names(&dir)? {
                let path = dir.join(&name);
                if let Some(t) = name.strip_suffix(".count").filter(|t| is_digest(t)) {
                    let value = parse_count(&read_text(&path)?).ok_or_else(|| StoreError::Corrupt {
                        path: path.clone(),
                        detail: "a template's use count is not USES:LAST".into(),
                    })?;
                    cells.counts.push(Cell { digest: t.to_string(), value, until });
                } else if let Some(i) = name.strip_suffix(".use").filter(|i| is_digest(i)) {
                    let value = read_text(&path)?.trim_end().parse().map_err(|_| StoreError::Corrupt {
                        path: path.clone(),
                        detail: "a template use record is not a number".into(),
                    })?;
                    cells.uses.push(Cell { digest: i.to_string(), value, until });
                }
            }
        }
        self.instance_cells(now, &mut cells.instances)?;
        Ok(cells)
    }

    /// The instance claims held by a use (a hex holder) whose expiry is not a day past.
    fn instance_cells(&self, now: OffsetDateTime, out: &mut Vec<Cell<String>>) -> Result<(), StoreError> {
        let dir = self.dir.join(INSTANCES);
        for name in names(&dir)?.into_iter().filter(|n| is_digest(n)) {
            let Some((holder, expiry)) = read_instance_claim(&dir.join(&name))? else { continue };
            let Ok(expiry) = crate::encoding::time::parse_rfc3339(&expiry) else {
                return Err(StoreError::Corrupt { path: dir.join(&name), detail: "an instance claim's expiry".into() });
            };
            if !is_digest(&holder) || expiry.checked_add(KEPT).is_some_and(|t| t < now) {
                continue;
            }
            out.push(Cell { digest: name, value: holder, until: expiry.saturating_add(Duration::seconds(1)) });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::templates::{Counted, TemplateUse};
    use time::macros::datetime;

    #[test]
    fn unexpired_counts_uses_and_claims_are_read_with_an_expiry_no_earlier_than_the_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        let expiry = datetime!(2030-01-01 10:30 UTC);
        let u = TemplateUse {
            template_key: "a".into(),
            instance_key: "a-x".into(),
            max_uses: 2,
            expiry,
            instance_claim: Some("aws:111122223333:i-0000000a".into()),
        };
        assert_eq!(j.count_template_use(&u).unwrap(), Counted::Use { number: 1, fresh: true });
        let cells = j.template_cells_at(expiry).unwrap();
        assert_eq!(cells.counts.len(), 1);
        assert_eq!(cells.counts[0].value.uses, 1);
        assert_eq!(cells.counts[0].until, datetime!(2030-01-01 11:00 UTC));
        assert_eq!(cells.uses.iter().map(|c| c.value).collect::<Vec<_>>(), [1]);
        assert_eq!(cells.instances.len(), 1);
        assert_eq!(cells.instances[0].until, expiry + Duration::seconds(1));
        // A claim given back (a holder that is no use's digest) is not read as taken.
        let released = dir.path().join(INSTANCES).join("ab".repeat(32));
        std::fs::write(&released, format!("released {}\n", crate::encoding::time::format_rfc3339(expiry))).unwrap();
        assert_eq!(j.template_cells_at(expiry).unwrap().instances.len(), 1);
        // A count that does not read stops the copy (a limit never silently dropped).
        let count = dir.path().join("2030010110").join(format!("{}.count", cells.counts[0].digest));
        std::fs::write(&count, "two\n").unwrap();
        assert!(matches!(j.template_cells_at(expiry), Err(StoreError::Corrupt { .. })));
        // A day and an hour past: the prune would remove them, so they are not read.
        let cells = j.template_cells_at(expiry + Duration::hours(26)).unwrap();
        assert!(cells.counts.is_empty() && cells.uses.is_empty() && cells.instances.is_empty());
    }
}
