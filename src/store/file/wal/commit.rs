//! Committing a batch: appended to the log in one write and synced (only then is it
//! committed), then applied to the files: records, certificates, inventory lines, claims.

use super::super::{crash_point, io_err, FileStore};
use super::format::{appended_id, encode_batch};
use super::{journals_of, journals_written, WalId};
use crate::store::{Issuance, StoreError};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

impl FileStore {
    /// [`Store::issue`]: appends the batch to the log in one write, closed by its commit
    /// line, syncs it, then applies it to the files.
    pub(in crate::store::file) fn commit_batch(&self, batch: &[Issuance]) -> Result<(), StoreError> {
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

    /// Applies one log entry to the files, without fsync: the record, the certificate, the
    /// inventory line, the replay journal's claim marked issued. Idempotent. `live`: the
    /// batch this process just logged (its claims were made under this lock, for these
    /// holders); otherwise a replay, which checks each claim before marking it.
    pub(super) fn apply(
        &self,
        e: &Issuance,
        inventory: &mut impl std::io::Write,
        live: bool,
    ) -> Result<(), StoreError> {
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
    pub(super) fn open_inventory(&self) -> Result<File, StoreError> {
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
}
