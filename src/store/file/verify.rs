//! The file store's own layout, as `vouch store verify` checks it (first without the lock,
//! beside writers: what was appended to the inventory meanwhile is read before a record or a
//! file is called unlisted; then, if that reading found anything, with the lock held, after
//! recovery): no operation marker left under `pending/`, every inventory line whole, every
//! record under `serials/` whole JSON and settled (no intent), every issued or revoked
//! record in the inventory, never two unexpired certificates of one certname that are not
//! revoked, and no junk.

use super::super::verify::Finding;
use super::super::{CertRecord, State, StoreError};
use super::{io_err, FileStore};
use std::collections::{HashMap, HashSet};

impl FileStore {
    pub(super) fn check_files(&self, now: time::OffsetDateTime, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        self.check_pending(f)?;

        // The inventory's lines, read as written (Store::inventory leaves a damaged line out).
        // One that cannot be read (its mode, a disk error) is a finding, and what is checked
        // against it is not checked (every file would look unlisted); the rest still is.
        let mut inv = InventorySeen::default();
        let readable = match self.read_or_empty("inventory.txt") {
            Ok(text) => {
                inv.take(&text, f);
                true
            }
            Err(e @ StoreError::Io { .. }) => {
                f(Finding::InventoryUnreadable { detail: e.to_string() });
                false
            }
            Err(e) => return Err(e),
        };
        self.check_signed_listed(&mut inv, readable, f)?;
        let revoked = self.check_revocation_lines(f)?;
        let mut pass = RecordPass {
            now,
            inv: &mut inv,
            readable,
            revoked: &revoked,
            valid: HashMap::new(),
            twice: HashMap::new(),
        };
        self.check_records(&mut pass, f)?;
        let RecordPass { valid, twice, .. } = pass;
        drop(valid);
        let mut twice: Vec<(String, Vec<String>)> = twice.into_iter().collect();
        twice.sort();
        for (certname, mut serials) in twice {
            serials.sort();
            f(Finding::TwoValidCertificates { certname, serials });
        }
        self.check_junk(&inv, readable, f)
    }

    /// Reports every operation marker left under `pending/`.
    fn check_pending(&self, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let pending = self.p("pending");
        let dir = crate::files::durable::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
        for name in dir.names().map_err(io_err(&pending, "read directory"))? {
            f(Finding::OperationLeftHalfDone { path: dir.path_of(&name).display().to_string() });
        }
        Ok(())
    }

    /// Reports a certificate file under `signed/` whose certname the inventory does not list.
    fn check_signed_listed(
        &self,
        inv: &mut InventorySeen,
        readable: bool,
        f: &mut dyn FnMut(Finding),
    ) -> Result<(), StoreError> {
        // Every certificate file names a certname the inventory knows (the listing, and so the
        // checks over the trait, start from the inventory: a file it lacks is seen only here).
        let signed = self.p("signed");
        let dir = crate::files::durable::NoFollowDir::open(&signed).map_err(io_err(&signed, "open"))?;
        for name in dir.names().map_err(io_err(&signed, "read directory"))? {
            let Some(certname) = name.to_str().and_then(|n| n.strip_suffix(".pem")) else { continue };
            if !readable || crate::decision::check_certname(certname).is_err() || inv.names_or_newer(self, certname, f)
            {
                continue; // the inventory unknown, junk (the scan below names it), or listed
            }
            let serial = self.file_serial(certname).unwrap_or_else(|| "(unreadable)".into());
            f(Finding::NotInInventory { certname: certname.to_string(), serial });
        }
        Ok(())
    }

    /// Reports each damaged line of the revocation list; returns the serials it revokes.
    fn check_revocation_lines(&self, f: &mut dyn FnMut(Finding)) -> Result<HashSet<Key>, StoreError> {
        // The revocation list's lines (Store::revocations leaves out one it cannot read).
        let text = self.read_or_empty("revocations.txt")?;
        let mut revoked: HashSet<Key> = HashSet::new();
        for (i, line) in text.split(|b| *b == b'\n').enumerate().filter(|(_, l)| !l.is_empty()) {
            let parsed = super::parse_revocation_line(line);
            if let Some((r, _)) = &parsed {
                revoked.insert(key(r.serial.as_bytes()));
            }
            if !parsed.is_some_and(|(_, whole)| whole) {
                f(Finding::RevocationLineDamaged {
                    line: i + 1,
                    text: String::from_utf8_lossy(line.get(..200).unwrap_or(line)).into_owned(),
                });
            }
        }
        Ok(revoked)
    }

    /// Checks every record: one shard directory at a time.
    fn check_records(&self, pass: &mut RecordPass, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        let serials = self.p("serials");
        let shards = crate::files::durable::NoFollowDir::open(&serials).map_err(io_err(&serials, "open"))?;
        for shard in shards.names().map_err(io_err(&serials, "read directory"))? {
            let shard_path = shards.path_of(&shard);
            let Ok(dir) = crate::files::durable::NoFollowDir::open(&shard_path) else {
                f(Finding::RecordDamaged {
                    path: shard_path.display().to_string(),
                    detail: "not a directory vouch can open (each serials/<ab> is a directory of records)".into(),
                });
                continue;
            };
            for name in dir.names().map_err(io_err(&shard_path, "read directory"))? {
                let path = dir.path_of(&name);
                if let Some(rec) = Self::record_in_shard(&path, f) {
                    self.check_record(rec, pass, f);
                }
            }
        }
        Ok(())
    }

    /// The record at `path` in a shard directory, if it is one: a temporary file is skipped,
    /// and a record that does not read, or is of another serial than its file name's, is
    /// reported.
    fn record_in_shard(path: &std::path::Path, f: &mut dyn FnMut(Finding)) -> Option<CertRecord> {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            return None; // a temporary file a killed writer left: never read as a record
        }
        let rec = match Self::read_json::<CertRecord>(path) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                f(Finding::RecordDamaged {
                    path: path.display().to_string(),
                    detail: format!("not a readable record: {e}"),
                });
                return None;
            }
        };
        if path.file_stem().and_then(|s| s.to_str()) != Some(rec.serial.as_str()) {
            f(Finding::RecordDamaged {
                path: path.display().to_string(),
                detail: format!("a whole record, but of serial {}, not of its file name's", rec.serial),
            });
            return None;
        }
        Some(rec)
    }

    /// Checks one record: settled, revoked in the revocation list if so, listed in the
    /// inventory, and, issued and unexpired, the certname's current file and its only one.
    fn check_record(&self, rec: CertRecord, pass: &mut RecordPass, f: &mut dyn FnMut(Finding)) {
        if rec.state == State::Revoked && !pass.revoked.contains(&key(rec.serial.as_bytes())) {
            f(Finding::RevokedNotRecorded { certname: rec.certname.clone(), serial: rec.serial.clone() });
        }
        match rec.state {
            State::Intent => f(Finding::IntentLeft { serial: rec.serial, certname: rec.certname }),
            State::Abandoned => {}
            State::Issued | State::Revoked => {
                if pass.readable && !pass.inv.serial_or_newer(self, &rec.serial, f) {
                    f(Finding::RecordNotInInventory { serial: rec.serial.clone(), certname: rec.certname.clone() });
                }
                if rec.state == State::Issued && unexpired(&rec.not_after, pass.now) {
                    self.check_current_file(&rec, pass.inv, f);
                    pass.note_valid(rec);
                }
            }
        }
    }

    /// For an unexpired issued record of a certname with several inventory lines: the
    /// certname's file holds this certificate.
    fn check_current_file(&self, rec: &CertRecord, inv: &InventorySeen, f: &mut dyn FnMut(Finding)) {
        // A certname with one inventory line is checked through the listing;
        // one with several (renewed, re-enrolled) is listed by its file, so
        // the file is checked against the newest certificate here.
        let lines = inv.names.get(&key(rec.certname.as_bytes())).copied().unwrap_or(0);
        if lines > 1 {
            match self.file_serial(&rec.certname) {
                None if !self.signed_path(&rec.certname).is_ok_and(|p| p.exists()) => {
                    f(Finding::CurrentMissing { certname: rec.certname.clone(), serial: rec.serial.clone() })
                }
                Some(held) if held == rec.serial => {}
                held => f(Finding::IssuedNotCurrent {
                    certname: rec.certname.clone(),
                    serial: rec.serial.clone(),
                    file: held.unwrap_or_else(|| "no readable certificate".into()),
                }),
            }
        }
    }

    /// Reports the junk the store holds.
    fn check_junk(&self, inv: &InventorySeen, readable: bool, f: &mut dyn FnMut(Finding)) -> Result<(), StoreError> {
        // Junk; a damaged certificate file of a certname the inventory lists is not (the
        // checks of each current certificate name it, and `vouch purge` would remove the
        // certname's certificate). With the inventory unread, any certname's may be listed.
        super::super::junk::scan(&self.root, &mut |j| {
            let of_listed = j.kind == "signed"
                && j.files.iter().any(|p| {
                    p.strip_prefix("signed/").and_then(|n| n.strip_suffix(".pem")).is_some_and(|n| {
                        if readable {
                            inv.names.contains_key(&key(n.as_bytes()))
                        } else {
                            crate::decision::check_certname(n).is_ok()
                        }
                    })
                });
            if !of_listed {
                f(Finding::Junk { name: j.name, kind: j.kind, detail: j.detail, files: j.files });
            }
            Ok(())
        })
    }
}

/// The record pass's state: what each record is checked against (read before it), and what
/// it gathers.
struct RecordPass<'a> {
    now: time::OffsetDateTime,
    inv: &'a mut InventorySeen,
    /// Whether the inventory was read (else nothing is checked against it).
    readable: bool,
    revoked: &'a HashSet<Key>,
    /// Each certname's first unexpired issued serial; a certname met again goes to `twice`.
    valid: HashMap<Key, String>,
    twice: HashMap<String, Vec<String>>,
}

impl RecordPass<'_> {
    /// Notes an unexpired issued record: its certname's first, or one more of it.
    fn note_valid(&mut self, rec: CertRecord) {
        match self.valid.entry(key(rec.certname.as_bytes())) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(rec.serial);
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                let serials = self.twice.entry(rec.certname).or_insert_with(|| vec![o.get().clone()]);
                serials.push(rec.serial);
            }
        }
    }
}

impl FileStore {
    /// The bytes of the store file `rel` (nothing if it does not exist).
    fn read_or_empty(&self, rel: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.p(rel);
        match crate::files::durable::read_regular(&path) {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(StoreError::Io { path, op: "read", source: e }),
        }
    }

    /// The serial of the certificate in `signed/<certname>.pem` (at most 1 MiB read: a larger
    /// file is no certificate of vouch's), if it holds one.
    fn file_serial(&self, certname: &str) -> Option<String> {
        use std::io::Read;
        let path = self.signed_path(certname).ok()?;
        let mut pem = Vec::new();
        crate::files::durable::open_regular(&path).ok()?.take(1 << 20).read_to_end(&mut pem).ok()?;
        Self::serial_of_pem(&String::from_utf8_lossy(&pem))
    }
}

/// The inventory as the layout check has read it. Serials and certnames are held as 128-bit
/// digests (a store of millions stays in tens of MB): two names whose digests collide would
/// hide one finding, with odds of about n² / 2¹²⁹.
#[derive(Default)]
struct InventorySeen {
    serials: HashSet<Key>,
    /// Certname → its inventory lines (more than one: renewed, superseded or re-enrolled).
    names: HashMap<Key, u32>,
    /// Bytes read, and lines.
    len: u64,
    lines: usize,
}

impl InventorySeen {
    /// Takes `bytes` (the inventory from where it was last read), reporting a line that is
    /// not whole.
    fn take(&mut self, bytes: &[u8], f: &mut dyn FnMut(Finding)) {
        self.len += bytes.len() as u64;
        for line in bytes.split(|b| *b == b'\n') {
            self.lines += 1;
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
            let time = |t: &[u8]| std::str::from_utf8(t).is_ok_and(|t| crate::encoding::time::parse_rfc3339(t).is_ok());
            let whole = std::str::from_utf8(line).is_ok()
                && matches!(fields.as_slice(), [s, nb, na, cn]
                    if s.starts_with(b"0x") && cn.starts_with(b"/CN=") && time(nb) && time(na));
            if let (true, Some(cn)) = (whole, fields.get(3)) {
                *self.names.entry(key(cn.get(4..).unwrap_or_default())).or_default() += 1;
            }
            match fields.first().filter(|_| whole).and_then(|s| std::str::from_utf8(s).ok()) {
                Some(serial) => {
                    self.serials.insert(key(serial.trim_start_matches("0x").as_bytes()));
                }
                None => f(Finding::InventoryLineDamaged {
                    line: self.lines,
                    text: String::from_utf8_lossy(line.get(..200).unwrap_or(line)).into_owned(),
                }),
            }
        }
        // The split counts one line past a final newline.
        if bytes.last() == Some(&b'\n') {
            self.lines -= 1;
        }
    }

    /// Reads what was appended to the inventory since it was last read (whole lines only):
    /// read without the lock, the store may have issued meanwhile.
    fn newer(&mut self, store: &FileStore, f: &mut dyn FnMut(Finding)) {
        use std::io::{Read, Seek};
        let path = store.p("inventory.txt");
        let Ok(mut file) = crate::files::durable::open_regular(&path) else { return };
        let mut tail = Vec::new();
        if file.seek(std::io::SeekFrom::Start(self.len)).is_err() || file.read_to_end(&mut tail).is_err() {
            return;
        }
        let whole = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if let Some(lines) = tail.get(..whole).filter(|l| !l.is_empty()) {
            self.take(lines, f);
        }
    }

    /// Whether the inventory lists `certname`, read again if it did not when last read.
    fn names_or_newer(&mut self, store: &FileStore, certname: &str, f: &mut dyn FnMut(Finding)) -> bool {
        let k = key(certname.as_bytes());
        if !self.names.contains_key(&k) {
            self.newer(store, f);
        }
        self.names.contains_key(&k)
    }

    /// Whether the inventory lists `serial`, read again if it did not when last read.
    fn serial_or_newer(&mut self, store: &FileStore, serial: &str, f: &mut dyn FnMut(Finding)) -> bool {
        let k = key(serial.as_bytes());
        if !self.serials.contains(&k) {
            self.newer(store, f);
        }
        self.serials.contains(&k)
    }
}

/// A 128-bit digest standing for a serial or a certname in the sets above.
type Key = [u8; 16];

fn key(bytes: &[u8]) -> Key {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut k = [0u8; 16];
    k.copy_from_slice(d.as_ref().get(..16).unwrap_or(&[0u8; 16]));
    k
}

/// Whether the RFC 3339 time `not_after` is after `now`; a time that does not parse counts
/// as unexpired (the stricter reading for this check).
fn unexpired(not_after: &str, now: time::OffsetDateTime) -> bool {
    crate::encoding::time::parse_rfc3339(not_after).map_or(true, |t| t > now)
}
