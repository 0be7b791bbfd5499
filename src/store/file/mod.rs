//! The embedded default store: files under `DIR/ca/` (layout and protocol: [`crate::store`]).

mod as_store;
mod listing;
mod lockwait;
pub(crate) use lockwait::holder_of_file;
mod memory;
mod verify;
mod wal;

pub use wal::WAL;

#[cfg(test)]
use super::Issuance;
use super::{retired_to, CertRecord, Revocation, State, Store, StoreError};
pub(crate) use crate::files::fault::crash_point;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A certname that fails the rules inside a store file (a log entry, a redo marker): vouch
/// never wrote it, so the file is damaged (or planted), and it is reported as such.
fn damaged(path: &Path) -> impl FnOnce(StoreError) -> StoreError {
    let path = path.to_path_buf();
    move |e| match e {
        StoreError::CertnameInvalid { .. } => StoreError::Corrupt { path, detail: e.to_string() },
        e => e,
    }
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, op, source }
}

/// The embedded default store: files under `DIR/ca/`.
#[derive(Debug, Clone)]
pub struct FileStore {
    pub root: PathBuf,
    /// The replay journal this CA's policy names (`None`: not told, or none): where a
    /// replay of a log written by an older vouch marks the claims it names in another data
    /// directory's journal (see `FileStore::place_journals`).
    journal: Option<PathBuf>,
    /// Whether a lock that keeps this process waiting says so on stderr
    /// ([`Store::announce_lock_waits`]).
    announce: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether a lock is taken on a store whose directory's master moved to a shared store
    /// ([`super::RETIRED_MARKER`]): only `vouch migrate`'s copy does ([`FileStore::reading_retired`]).
    retired_ok: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Marker {
    Issue {
        record: CertRecord,
    },
    Revoke {
        serial: String,
        time: String,
        reason: String,
        certname: String,
        cleaned: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_after: Option<String>,
    },
}

impl FileStore {
    pub fn new(ca_dir: impl Into<PathBuf>) -> Self {
        FileStore { root: ca_dir.into(), journal: None, announce: Default::default(), retired_ok: false }
    }

    /// The store as `vouch migrate` reads it: locked even where its master moved to a
    /// shared store (the copy re-run after an interruption).
    pub fn reading_retired(self) -> Self {
        FileStore { retired_ok: true, ..self }
    }

    /// Refuses a lock, once it is held, on a store whose master moved to a shared store: a
    /// command that checked the directory before `vouch migrate` marked it, and waited
    /// for the lock migrate held, must not write into the retired store. Anything at the
    /// marker's name counts (as the data directory reads it: deny by default).
    fn refuse_retired(&self) -> Result<(), StoreError> {
        match retired_to(&self.root).filter(|_| !self.retired_ok) {
            None => Ok(()),
            Some(to) => {
                let dir = self.root.parent().map(Path::to_path_buf).unwrap_or_else(|| self.root.clone());
                Err(StoreError::FileStoreRetired { dir, to })
            }
        }
    }

    /// The store, told the replay journal its CA's policy names.
    pub fn with_journal(self, journal: Option<PathBuf>) -> Self {
        FileStore { journal, ..self }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `DIR/ca/signed/<certname>.pem`. The certname is checked first (it becomes a file
    /// name): one that fails the certname rules is an error, and no file is touched.
    pub fn signed_path(&self, certname: &str) -> Result<PathBuf, StoreError> {
        Ok(self.root.join("signed").join(Self::file_name(certname, "pem")?))
    }

    /// `<certname>.<ext>`, for a certname that passes the certname rules
    /// ([`crate::decision::check_certname`]: no '/', no "..", no leading '.', ...).
    fn file_name(certname: &str, ext: &str) -> Result<String, StoreError> {
        crate::decision::check_certname(certname)
            .map_err(|problem| StoreError::CertnameInvalid { certname: certname.to_string(), problem })?;
        Ok(format!("{certname}.{ext}"))
    }

    fn serial_path(&self, serial: &str) -> PathBuf {
        let shard = serial.get(..2).unwrap_or("00");
        self.root.join("serials").join(shard).join(format!("{serial}.json"))
    }

    /// Whether this process already prepared this store (its directories, and `tmp/`
    /// emptied of what killed writers left): once per process and store, not per lock.
    fn prepared(&self, mark: bool) -> bool {
        static DONE: OnceLock<Mutex<std::collections::HashSet<PathBuf>>> = OnceLock::new();
        let done = DONE.get_or_init(|| Mutex::new(std::collections::HashSet::new()));
        let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
        if mark {
            done.insert(self.root.clone());
        }
        done.contains(&self.root)
    }

    /// Creates the store's directories, and makes sure each is a real directory: vouch
    /// writes, renames and removes files in them, so a symbolic link there (lstat) is
    /// refused, never followed. (`DIR/ca` itself may be a link: the operator's choice.)
    ///
    /// `DIR/ca` is created only before this process first prepared the store: one gone since
    /// (the data directory moved or removed under a running `vouch serve`) is refused, never
    /// made again empty, where the process would go on issuing into a store and a replay
    /// journal that know nothing of what was issued and spent before.
    fn ensure_dirs(&self) -> Result<(), StoreError> {
        if !self.prepared(false) {
            crate::files::durable::create_dirs(&self.root).map_err(io_err(&self.root, "create directory"))?;
        } else if let Err(e) = fs::metadata(&self.root) {
            let gone = e.kind() == io::ErrorKind::NotFound;
            return Err(StoreError::Io {
                path: self.root.clone(),
                op: "use directory",
                source: if gone {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "it is gone since this process opened it (the data directory was moved or removed): \
                         restart vouch with the data directory where it is now",
                    )
                } else {
                    e
                },
            });
        }
        for d in ["signed", "requests", "serials", "pending", "tmp"] {
            let p = self.p(d);
            crate::files::durable::ensure_real_dir(&p).map_err(io_err(&p, "use directory"))?;
        }
        // The files written in place (appended, truncated, locked): refused before anything
        // is decided or logged; their O_NOFOLLOW opens are the race-free backstop.
        for f in [".lock", WAL, "inventory.txt", "revocations.txt"] {
            let p = self.p(f);
            crate::files::durable::refuse_link(&p).map_err(io_err(&p, "use"))?;
        }
        Ok(())
    }

    /// Refuses a serial record's shard directory (`serials/<ab>/`) that is a symbolic link.
    fn check_shard(path: &Path) -> Result<(), StoreError> {
        match path.parent() {
            Some(shard) => crate::files::durable::refuse_link(shard).map_err(io_err(shard, "use directory")),
            None => Ok(()),
        }
    }

    fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StoreError> {
        match crate::files::durable::read_regular(path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: path.to_path_buf(), op: "read", source: e }),
        }
    }

    /// Replaces a serial's record, synced (the revocation protocol, and redoing the
    /// issuance markers older versions left).
    fn write_record(&self, rec: &CertRecord) -> Result<(), StoreError> {
        let path = self.serial_path(&rec.serial);
        let bytes =
            serde_json::to_vec(rec).map_err(|e| StoreError::Corrupt { path: path.clone(), detail: e.to_string() })?;
        let tmp = self.p("tmp");
        Self::check_shard(&path)?;
        crate::files::durable::in_dir(&path, || crate::files::durable::write_replace_in(&tmp, &path, &bytes, 0o644))
            .map_err(|e| StoreError::Io { path: path.clone(), op: "write", source: e })
    }

    fn marker_path(&self, serial: &str, op: &str) -> PathBuf {
        self.p("pending").join(format!("{op}-{serial}.json"))
    }

    fn write_marker(&self, path: &Path, m: &Marker) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(m)
            .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() })?;
        crate::files::durable::write_replace_in(&self.p("tmp"), path, &bytes, 0o644).map_err(io_err(path, "write"))
    }

    fn remove_marker(&self, path: &Path) -> Result<(), StoreError> {
        let pending = self.p("pending");
        let dir = crate::files::durable::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
        let name = path.file_name().unwrap_or_default();
        match dir.unlink(name) {
            Ok(()) => dir.sync().map_err(io_err(path, "sync")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io { path: path.to_path_buf(), op: "remove", source: e }),
        }
    }

    /// Appends `line` to a log unless the log already ends with it (idempotent redo).
    fn append_once(&self, rel: &str, line: &str) -> Result<(), StoreError> {
        let path = self.p(rel);
        let tail = read_tail(&path, 4096).map_err(io_err(&path, "read"))?;
        if tail.lines().last() == Some(line) {
            return Ok(());
        }
        // A last line cut short (a power loss, a line written back by hand without its
        // newline): the new line starts on a line of its own, never glued onto that one (a
        // revocation's serial inside another line's field is off the CRL).
        if !tail.is_empty() && !tail.ends_with('\n') {
            return crate::files::durable::append_line(&path, &format!("\n{line}")).map_err(io_err(&path, "append to"));
        }
        crate::files::durable::append_line(&path, line).map_err(io_err(&path, "append to"))
    }

    fn inventory_line(rec: &CertRecord) -> String {
        format!("0x{} {} {} /CN={}", rec.serial, rec.not_before, rec.not_after, rec.certname)
    }

    /// `SERIAL TIME REASON CERTNAME[ cleaned][ not_after=TIME]`.
    fn revocation_line(r: &Revocation) -> String {
        let mut line = format!("{} {} {} {}", r.serial, r.time, r.reason, r.certname);
        if r.cleaned {
            line.push_str(" cleaned");
        }
        if let Some(t) = &r.not_after {
            line.push_str(" not_after=");
            line.push_str(t);
        }
        line
    }

    fn serial_of_pem(pem: &str) -> Option<String> {
        let (_, der) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        Some(crate::encoding::hex(cert.raw_serial()))
    }

    fn redo_issue(&self, rec: &CertRecord) -> Result<(), StoreError> {
        let signed = self.signed_path(&rec.certname)?;
        let on_disk = match read_text(&signed) {
            Ok(pem) => Self::serial_of_pem(&pem),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::Io { path: signed, op: "read", source: e }),
        };
        if on_disk.as_deref() == Some(rec.serial.as_str()) {
            self.append_once("inventory.txt", &Self::inventory_line(rec))?;
            crash_point("issue:inventory");
            let mut done = rec.clone();
            done.state = State::Issued;
            self.write_record(&done)?;
            crash_point("issue:issued");
            Ok(())
        } else {
            // Never issued. Mark the reservation abandoned, unless the serial's record
            // is someone else's (the process died before its O_EXCL create).
            match self.record(&rec.serial)? {
                Some(r) if r.certname != rec.certname || r.state != State::Intent => Ok(()),
                _ => {
                    let mut gone = rec.clone();
                    gone.state = State::Abandoned;
                    self.write_record(&gone)
                }
            }
        }
    }

    fn redo_revoke(&self, r: &Revocation) -> Result<(), StoreError> {
        match self.record(&r.serial) {
            Ok(Some(mut rec)) => {
                rec.state = State::Revoked;
                rec.revoked_at = Some(r.time.clone());
                rec.reason = Some(r.reason.clone());
                self.write_record(&rec)?;
                crash_point("revoke:record");
            }
            Ok(None) => {}
            // A record that does not read (`vouch revoke --serial` found the certificate by
            // its inventory line): left as it is, verify reports it; the revocation is listed
            // all the same, so that the CRL carries it.
            Err(StoreError::Corrupt { .. }) => {}
            Err(e) => return Err(e),
        }
        self.append_once("revocations.txt", &Self::revocation_line(r))?;
        crash_point("revoke:log");
        if r.cleaned {
            let p = self.signed_path(&r.certname)?;
            let current = read_text(&p).ok().and_then(|pem| Self::serial_of_pem(&pem));
            if current.as_deref() == Some(r.serial.as_str()) {
                // Through the directory's descriptor: a signed/ swapped for a link is refused.
                let signed = self.p("signed");
                let dir = crate::files::durable::NoFollowDir::open(&signed).map_err(io_err(&signed, "open"))?;
                dir.unlink(p.file_name().unwrap_or_default()).map_err(io_err(&p, "remove"))?;
                dir.sync().map_err(io_err(&p, "sync"))?;
                crash_point("revoke:forget");
            }
            let _ = self.remove_request(&r.certname);
        }
        Ok(())
    }

    /// Finishes what killed processes left under `pending/`, and removes the
    /// temporary files killed writers left in `tmp/` (store writes stage there, under the lock).
    /// Needs the lock.
    fn recover(&self, first: bool) -> Result<(), StoreError> {
        // Temporary files of killed writers (store writes under the lock stage in tmp/):
        // garbage, never read; removed by each process's first lock.
        // Both directories are read and cleaned through descriptors opened with O_NOFOLLOW:
        // a tmp/ or pending/ that is (or becomes) a symbolic link is refused, so the clean-up
        // never removes files elsewhere.
        if first {
            let tmp = self.p("tmp");
            let dir = crate::files::durable::NoFollowDir::open(&tmp).map_err(io_err(&tmp, "open"))?;
            for name in dir.names().map_err(io_err(&tmp, "read directory"))? {
                let _ = dir.unlink(&name);
            }
        }
        let pending = self.p("pending");
        let dir = crate::files::durable::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
        for name in dir.names().map_err(io_err(&pending, "read directory"))? {
            let path = dir.path_of(&name);
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                // A temporary file a killed write left behind.
                let _ = dir.unlink(&name);
                continue;
            }
            self.forget_everything();
            match Self::read_json::<Marker>(&path)? {
                Some(Marker::Issue { record }) => self.redo_issue(&record).map_err(damaged(&path))?,
                Some(Marker::Revoke { serial, time, reason, certname, cleaned, not_after }) => self
                    .redo_revoke(&Revocation { serial, time, reason, certname, cleaned, not_after })
                    .map_err(damaged(&path))?,
                None => {}
            }
            self.remove_marker(&path)?;
        }
        Ok(())
    }
}

/// A stored certificate for the store's unit tests: serial, certname, a fake PEM.
#[cfg(test)]
pub(crate) fn test_issuance(serial: &str, certname: &str) -> Issuance {
    Issuance {
        record: CertRecord {
            digest: "d".into(),
            not_before: "2030-01-01T00:00:00Z".into(),
            not_after: "2031-01-01T00:00:00Z".into(),
            ..CertRecord::bare(serial, certname, State::Issued)
        },
        pem: format!("pem of {serial}"),
        claim: None,
        expected: None,
        supersedes: None,
    }
}

/// A line of `revocations.txt`: `Some((revocation, whole))` where it begins with a serial a
/// CRL can hold (an even number of hex digits, at most 40: 20 octets, RFC 5280 4.1.2.2,
/// followed by a space), else
/// `None` (an odd digit, or none, would put another serial or an empty one on a CRL). A
/// revocation with its serial is kept, on the CRL, whatever else is damaged: `whole` says
/// whether the rest is as [`FileStore::revocation_line`] writes it (an RFC 3339 time, a
/// reason and a certname; `vouch store verify` reports a line that is not). A CR before the
/// line's end (an editor's CRLF) is not part of it.
pub(crate) fn parse_revocation_line(line: &[u8]) -> Option<(Revocation, bool)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // The serial is whole only where a space follows it: a line cut off inside its serial
    // (an even number of digits left) would otherwise put another serial on the CRL.
    let space = line.iter().position(|b| *b == b' ')?;
    let (serial, rest) = line.split_at(space);
    if serial.is_empty() || serial.len() % 2 != 0 || serial.len() > 40 || !serial.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut fields = rest.get(1..).unwrap_or_default().split(|b| *b == b' ');
    // The time, the reason and the certname are read as they are (a damaged time dates the
    // CRL entry at the CRL's own time, as it always did).
    let text = |f: Option<&[u8]>| f.map(|f| String::from_utf8_lossy(f).into_owned()).unwrap_or_default();
    let (time, reason, certname) = (text(fields.next()), text(fields.next()), text(fields.next()));
    let rest: Vec<&[u8]> = fields.collect();
    let whole = crate::encoding::time::parse_rfc3339(&time).is_ok() && !reason.is_empty() && !certname.is_empty();
    let r = Revocation {
        serial: String::from_utf8_lossy(serial).into_owned(),
        time,
        reason,
        certname,
        cleaned: rest.contains(&b"cleaned".as_slice()),
        not_after: rest
            .iter()
            .find_map(|f| f.strip_prefix(b"not_after="))
            .and_then(|t| std::str::from_utf8(t).ok())
            .map(str::to_string),
    };
    Some((r, whole))
}

/// A store file's text: [`crate::files::durable::read_regular`] (a FIFO there never hangs the
/// reader), as UTF-8.
fn read_text(path: &Path) -> io::Result<String> {
    String::from_utf8(crate::files::durable::read_regular(path)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Reads up to the last `n` bytes of a file ("" if it does not exist).
fn read_tail(path: &Path, n: u64) -> io::Result<String> {
    let mut f = match crate::files::durable::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(n)))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
