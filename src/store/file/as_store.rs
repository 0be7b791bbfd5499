//! The file store as a [`Store`]: each of the trait's methods on the files under `DIR/ca/`
//! (the log, the listing, the junk scan and the verification each have their own file).

use super::{crash_point, io_err, lockwait, parse_revocation_line, FileStore, Marker};
use crate::store::{
    CertRecord, Current, Expected, InventoryEntry, Issuance, Listed, Override, PendingRequest, Revocation, Store,
    StoreError, WriteLock,
};
use std::fs::{self, OpenOptions};
use std::io;
use std::ops::ControlFlow;
use std::path::Path;

impl Store for FileStore {
    fn lock(&self) -> Result<WriteLock, StoreError> {
        let first = !self.prepared(false);
        // Every time (a few lstat calls): a directory swapped for a link since is refused.
        self.ensure_dirs()?;
        if first {
            self.keep_flush_handle();
        }
        let path = self.p(".lock");
        let file = crate::files::durable::open_nofollow(
            OpenOptions::new().create(true).truncate(false).read(true).write(true),
            &path,
        )
        .map_err(io_err(&path, "open"))?;
        let announce = self.announce.load(std::sync::atomic::Ordering::Relaxed);
        if let Err(source) = lockwait::lock_exclusive(&file, &path, announce) {
            return Err(StoreError::Io { path, op: "lock", source });
        }
        // Under the lock: a migrate that held it may have retired the store meanwhile.
        self.refuse_retired()?;
        // Before anything is changed: the mark that tells other processes to forget. Another
        // holder since this process's last lock: its log is re-read, whatever its identity.
        // A flush that failed without the lock: the same.
        if self.mark_holder(&file)? | self.flush_failed_since() {
            self.distrust_log();
        }
        let lock = WriteLock { _file: Some(file) };
        self.recover(first)?;
        self.recover_wal()?;
        if first {
            self.prepared(true);
        }
        Ok(lock)
    }

    fn batches(&self) -> bool {
        true
    }

    /// From now on, a wait of more than a second for the lock (another process holds it)
    /// is told on stderr, once per wait, naming the holder when this host can tell.
    fn announce_lock_waits(&self) {
        self.announce.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn current(&self, certname: &str) -> Result<Option<Current>, StoreError> {
        if let Some(c) = self.remembered(certname) {
            return Ok(Some(c));
        }
        let path = self.signed_path(certname)?;
        let pem = match crate::files::durable::read_regular(&path) {
            Ok(p) => String::from_utf8(p).map_err(|_| StoreError::Corrupt {
                path: path.clone(),
                detail: "not a certificate (not UTF-8)".into(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let serial = Self::serial_of_pem(&pem)
            .ok_or_else(|| StoreError::Corrupt { path: path.clone(), detail: "not a certificate".into() })?;
        let rec = self
            .record(&serial)?
            .ok_or_else(|| StoreError::Corrupt { path, detail: format!("serial {serial} has no record") })?;
        Ok(Some(Current { record: rec, pem, revision: 0 }))
    }

    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError> {
        Self::read_json(&self.serial_path(serial))
    }

    fn issue(&self, lock: &WriteLock, batch: &[Issuance]) -> Result<(), StoreError> {
        // Under the lock nobody else writes: a superseded certificate is revoked first (its
        // own synced protocol), so no crash leaves two valid certificates for one certname.
        for s in batch.iter().filter_map(|i| i.supersedes.as_ref()) {
            self.revoke(lock, &s.revocation, &s.record, None)?;
        }
        self.commit_batch(batch)
    }

    fn checkpoint(&self, _lock: &WriteLock) -> Result<(), StoreError> {
        self.checkpoint_log()
    }

    fn checkpoint_unlocked(&self) -> Result<(), StoreError> {
        self.checkpoint_due()
    }

    fn flush_unlocked(&self) -> Result<(), StoreError> {
        self.flush_log_files()
    }

    fn revoke(
        &self,
        lock: &WriteLock,
        r: &Revocation,
        _rec: &CertRecord,
        _expected: Option<&Expected>,
    ) -> Result<(), StoreError> {
        // No entry written before a revocation may stay in the log: replayed after it, it
        // would undo it (entries written after it are fine).
        self.checkpoint(lock)?;
        self.forget(&r.certname);
        let marker = self.marker_path(&r.serial, "revoke");
        self.write_marker(
            &marker,
            &Marker::Revoke {
                serial: r.serial.clone(),
                time: r.time.clone(),
                reason: r.reason.clone(),
                certname: r.certname.clone(),
                cleaned: r.cleaned,
                not_after: r.not_after.clone(),
            },
        )?;
        crash_point("revoke:marker");
        self.redo_revoke(r)?;
        self.remove_marker(&marker)
    }

    fn revocations(&self) -> Result<Vec<Revocation>, StoreError> {
        let path = self.p("revocations.txt");
        let bytes = match crate::files::durable::read_regular(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        // A line that is not whole names no certificate the CRL could list: left out here,
        // said in the log, reported by `vouch store verify` (revocation-line-damaged).
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate().filter(|(_, l)| !l.is_empty()) {
            match parse_revocation_line(line) {
                Some((r, _)) => out.push(r),
                None => damaged.push(i + 1),
            }
        }
        if let Some(first) = damaged.first() {
            tracing::warn!(
                event = "revocation-lines-damaged",
                path = %path.display(),
                lines = damaged.len(),
                first_line = first,
                detail = "left out of the CRL: they name no serial it could list; `vouch store verify` shows them",
            );
        }
        Ok(out)
    }

    fn revocations_stamp(&self) -> Result<String, StoreError> {
        let path = self.p("revocations.txt");
        match fs::metadata(&path) {
            Ok(m) => Ok(m.len().to_string()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok("0".into()),
            Err(e) => Err(StoreError::Io { path, op: "read", source: e }),
        }
    }

    fn for_each_listed(&self, f: &mut (dyn FnMut(Listed) -> ControlFlow<()> + Send)) -> Result<(), StoreError> {
        self.listed(f)
    }

    fn junk(&self, f: &mut dyn FnMut(crate::store::Junk) -> Result<(), StoreError>) -> Result<(), StoreError> {
        crate::store::junk::scan(&self.root, f)
    }

    fn purge(&self, _lock: &WriteLock, junk: &crate::store::Junk) -> Result<(), StoreError> {
        self.forget_everything();
        crate::store::junk::purge(&self.root, junk)
    }

    fn get_override(&self, certname: &str) -> Result<Option<Override>, StoreError> {
        let path = self.p("overrides").join(Self::file_name(certname, "json")?);
        Self::read_json(&path)
    }

    fn put_override(
        &self,
        certname: &str,
        classification: Option<&str>,
        expect: Option<u64>,
        now: time::OffsetDateTime,
    ) -> Result<Override, StoreError> {
        let path = self.p("overrides").join(Self::file_name(certname, "json")?);
        // Compare and swap under the store's lock: one writer at a time.
        let _lock = self.lock()?;
        let dir = self.p("overrides");
        crate::files::durable::create_dirs(&dir).map_err(io_err(&dir, "create directory"))?;
        crate::files::durable::ensure_real_dir(&dir).map_err(io_err(&dir, "use directory"))?;
        let have = Self::read_json::<Override>(&path)?.map(|o| o.revision).unwrap_or(0);
        if let Some(n) = expect.filter(|n| *n != have) {
            return Err(crate::store::override_conflict(certname, n, have));
        }
        let next = have
            .checked_add(1)
            .ok_or_else(|| StoreError::Corrupt { path: path.clone(), detail: "revision at its largest".into() })?;
        let o = Override {
            certname: certname.to_string(),
            classification: classification.map(str::to_string),
            revision: next,
            time: crate::encoding::time::format_rfc3339(now),
        };
        let bytes =
            serde_json::to_vec(&o).map_err(|e| StoreError::Corrupt { path: path.clone(), detail: e.to_string() })?;
        crate::files::durable::write_replace(&path, &bytes, 0o644).map_err(io_err(&path, "write"))?;
        Ok(o)
    }

    fn describe(&self) -> String {
        format!("files in {}", self.root.display())
    }

    fn settled_unlocked(&self) -> bool {
        self.log_settled()
    }

    fn check_layout(
        &self,
        _lock: Option<&WriteLock>,
        now: time::OffsetDateTime,
        f: &mut dyn FnMut(crate::store::verify::Finding),
    ) -> Result<(), StoreError> {
        self.check_files(now, f)
    }

    fn remembered_current(&self, certname: &str) -> Option<Current> {
        self.remembered(certname)
    }

    fn issuers(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        Ok(Vec::new())
    }

    fn inventory(&self) -> Result<Vec<InventoryEntry>, StoreError> {
        let path = self.p("inventory.txt");
        // Line by line: one that is not UTF-8 (a disk error) is left out, as one cut short is.
        let bytes = match crate::files::durable::read_regular(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        Ok(bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| std::str::from_utf8(l).ok())
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                match f.as_slice() {
                    [serial, nb, na, cn] => Some(InventoryEntry {
                        serial: serial.trim_start_matches("0x").to_string(),
                        not_before: nb.to_string(),
                        not_after: na.to_string(),
                        certname: cn.trim_start_matches("/CN=").to_string(),
                    }),
                    _ => None,
                }
            })
            .collect())
    }

    fn put_request(&self, _lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        let pem = self.p("requests").join(Self::file_name(&req.certname, "pem")?);
        let meta = self.p("requests").join(Self::file_name(&req.certname, "json")?);
        self.ensure_dirs()?;
        crate::files::durable::write_replace(&pem, csr_pem, 0o644).map_err(io_err(&pem, "write"))?;
        let bytes =
            serde_json::to_vec(req).map_err(|e| StoreError::Corrupt { path: meta.clone(), detail: e.to_string() })?;
        crate::files::durable::write_replace(&meta, &bytes, 0o644).map_err(io_err(&meta, "write"))
    }

    fn remove_request(&self, certname: &str) -> Result<(), StoreError> {
        self.remove_requests(&[certname]).pop().unwrap_or(Ok(()))
    }

    fn remove_requests(&self, certnames: &[&str]) -> Vec<Result<(), StoreError>> {
        let requests = self.p("requests");
        // Through the directory's descriptor, opened once for the batch: a requests/ that is
        // a link is refused.
        let dir = match crate::files::durable::NoFollowDir::open(&requests) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return certnames.iter().map(|_| Ok(())).collect(),
            Err(e) => {
                let failed = |e: &io::Error| StoreError::Io {
                    path: requests.clone(),
                    op: "open",
                    source: io::Error::new(e.kind(), e.to_string()),
                };
                return certnames.iter().map(|_| Err(failed(&e))).collect();
            }
        };
        certnames.iter().map(|c| Self::remove_request_in(&dir, &requests, c)).collect()
    }

    fn count_requests(&self, at_most: usize) -> Result<usize, StoreError> {
        self.count_request_files(at_most)
    }

    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        let dir = self.p("requests");
        // Listed without the lock too (clean's look-up, the API): never through a link.
        crate::files::durable::refuse_link(&dir).map_err(io_err(&dir, "use directory"))?;
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path: dir, op: "read directory", source: e }),
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(io_err(&dir, "read directory"))?;
            let path = e.path();
            // Only regular files (a directory, link or FIFO is junk: never read, store::junk).
            let regular = std::fs::symlink_metadata(&path).map(|m| m.is_file()).unwrap_or(false);
            if regular && path.extension().and_then(|x| x.to_str()) == Some("json") {
                // A request that does not parse, or whose name Puppet refuses, is junk: left
                // out here, listed by `vouch reconcile` and removed by `vouch purge` (store::junk).
                let named = path
                    .file_stem()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| crate::decision::check_certname(n).is_ok());
                match Self::read_json::<PendingRequest>(&path) {
                    Ok(Some(r)) if named => out.push(r),
                    Ok(_) | Err(StoreError::Corrupt { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        out.sort_by(|a, b| a.certname.cmp(&b.certname));
        Ok(out)
    }

    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError> {
        let dir = self.p("requests");
        crate::files::durable::refuse_link(&dir).map_err(io_err(&dir, "use directory"))?;
        let meta = dir.join(Self::file_name(certname, "json")?);
        let Some(req) = Self::read_json::<PendingRequest>(&meta)? else { return Ok(None) };
        let pem_path = self.p("requests").join(Self::file_name(certname, "pem")?);
        match crate::files::durable::read_regular(&pem_path) {
            Ok(pem) => Ok(Some((req, pem))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: pem_path, op: "read", source: e }),
        }
    }
}

impl FileStore {
    /// Removes `certname`'s pending request through the open `requests/` directory. The
    /// .json first: it is what makes a request pending (requests() lists .json files,
    /// put_request writes it last), so without one there is nothing to remove, and issuance
    /// (which calls this for every certificate) pays one system call (unlinkat).
    fn remove_request_in(
        dir: &crate::files::durable::NoFollowDir,
        requests: &Path,
        certname: &str,
    ) -> Result<(), StoreError> {
        let names = [Self::file_name(certname, "json")?, Self::file_name(certname, "pem")?];
        for (name, ext) in names.iter().zip(["json", "pem"]) {
            let p = requests.join(name);
            match dir.unlink(std::ffi::OsStr::new(name)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && ext == "json" => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Io { path: p, op: "remove", source: e }),
            }
        }
        Ok(())
    }
}
