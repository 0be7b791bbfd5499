//! Recovery at lock time: a log this process did not leave is made durable, the inventory
//! cut back to the log's header (keeping lines appended from outside), every entry
//! re-applied, and the log checkpointed.

use super::super::{damaged, io_err, FileStore};
use super::journals_of;
use crate::store::{Issuance, StoreError};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

impl FileStore {
    /// At lock time: a log this process did not leave is re-applied and checkpointed.
    pub(in crate::store::file) fn recover_wal(&self) -> Result<(), StoreError> {
        let Some(id) = self.wal_id()? else { return self.reset_wal() };
        if self.known() == Some(id) {
            return Ok(());
        }
        // Someone else wrote or replaced the log (or this process's last write failed): what
        // this process remembers is not trusted, whatever `.lock` says (a lock holder that
        // writes no mark, such as an older vouch, is noticed here when it touched the log).
        self.forget_everything();
        let (header, mut entries, end) = self.read_wal()?;
        self.warn_foreign_journals(self.place_journals(&mut entries)?);
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
        self.cut_inventory_to(header.inventory_len, &entries)?;
        self.forget_everything();
        let mut inventory = std::io::BufWriter::with_capacity(64 << 10, self.open_inventory()?);
        for e in &entries {
            self.apply(e, &mut inventory, false).map_err(damaged(&self.wal_path()))?;
        }
        inventory.flush().map_err(io_err(&self.p("inventory.txt"), "append to"))?;
        self.checkpoint_now(&journals_of(&entries))
    }

    /// Says, for each journal path an older vouch's log names in another data directory,
    /// which journal its claims are marked in instead ([`FileStore::place_journals`]).
    fn warn_foreign_journals(&self, moved: Vec<(PathBuf, PathBuf)>) {
        for (named, used) in moved {
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
    }

    /// Before a replay: the inventory cut back to `inventory_len` (the log's header's), the
    /// lines appended past it that the log's `entries` do not hold written back after it.
    fn cut_inventory_to(&self, inventory_len: u64, entries: &[Issuance]) -> Result<(), StoreError> {
        let inv = self.p("inventory.txt");
        if fs::metadata(&inv).map(|m| m.len()).unwrap_or(0) > inventory_len {
            let kept = self.inventory_lines_not_logged(inventory_len, entries)?;
            if kept.is_empty() {
                let f = crate::files::durable::open_nofollow(OpenOptions::new().write(true), &inv)
                    .map_err(io_err(&inv, "open"))?;
                f.set_len(inventory_len).map_err(io_err(&inv, "truncate"))?;
            } else {
                // Lines to write back: the cut inventory with them, written whole and synced
                // before it replaces the old one, so that a process dying in this replay loses
                // none of them (the next replay finds them past the header's length again).
                let len = usize::try_from(inventory_len)
                    .map_err(|_| StoreError::Corrupt { path: inv.clone(), detail: "too long".into() })?;
                let mut whole = Vec::with_capacity(len.saturating_add(kept.len()));
                crate::files::durable::open_regular(&inv)
                    .and_then(|f| f.take(inventory_len).read_to_end(&mut whole))
                    .map_err(io_err(&inv, "read"))?;
                if whole.len() != len {
                    return Err(StoreError::Corrupt { path: inv, detail: "shorter than the log's header says".into() });
                }
                whole.extend_from_slice(&kept);
                crate::files::durable::write_replace_in(&self.p("tmp"), &inv, &whole, 0o644)
                    .map_err(io_err(&inv, "write"))?;
            }
        }
        Ok(())
    }

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
}

#[cfg(test)]
mod tests;
