//! The CA store behind a narrow trait, and its embedded default: local files.
//!
//! File layout under `DIR/ca/` (after Puppet's cadir):
//!
//! ```text
//! signed/<certname>.pem      the current certificate of each certname
//! requests/<certname>.pem    pending (refused) requests, with <certname>.json: the reasons
//! serials/<ab>/<serial>.json one record per serial ever reserved (created O_EXCL: a serial is never reused)
//! inventory.txt              Puppet's inventory: "0x<serial> <notBefore> <notAfter> /CN=<certname>"
//! revocations.txt            "<serial> <time> <reason> <certname> [cleaned]", one line per revocation
//! pending/                   redo journal: one marker per operation in flight
//! tmp/                       staging for atomic writes (emptied by recovery)
//! ca_crl.pem, crl_number     the CRL and its counter
//! .lock                      flock: one writer at a time, across processes
//! ```
//!
//! Every write is atomic (temporary file, fsync, rename or link, fsync the
//! directory). An operation first writes its marker under `pending/`, then
//! its steps, each idempotent, then removes the marker; whoever takes the lock
//! next redoes or abandons what a killed process left.

use crate::fsutil;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A store failure.
#[derive(Debug)]
pub enum StoreError {
    Io { path: PathBuf, op: &'static str, source: io::Error },
    Corrupt { path: PathBuf, detail: String },
    SerialTaken { serial: String },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io { path, op, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            StoreError::Corrupt { path, detail } => {
                write!(f, "store file {} is damaged: {detail}", path.display())
            }
            StoreError::SerialTaken { serial } => write!(f, "serial {serial} is already used"),
        }
    }
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, op, source }
}

/// The life of a serial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Reserved before signing; the signature may or may not exist.
    Intent,
    Issued,
    Revoked,
    /// Reserved, never issued (the process died before the certificate was stored).
    Abandoned,
}

/// What the store knows of one serial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertRecord {
    pub serial: String,
    pub certname: String,
    pub state: State,
    /// SHA-256 over what is to be signed (certname, serial, classification, validity).
    pub digest: String,
    pub not_before: String,
    pub not_after: String,
    /// The expiry of the attributes that vouched for it (renewals keep the original's).
    #[serde(default)]
    pub attributes_expiry: Option<String>,
    /// The SHA-256 fingerprint of the conductor certificate that vouched (renewals keep the original's).
    #[serde(default)]
    pub conductor: Option<String>,
    /// That conductor certificate itself, base64 DER, so that renewal can check it against the
    /// current policy (CRLs, trust, scopes). Absent in records written before vouch kept it:
    /// such certificates cannot be renewed (`conductor-not-recorded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conductor_cert: Option<String>,
    #[serde(default)]
    pub revoked_at: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A revocation, as the CRL needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    pub serial: String,
    pub time: String,
    pub reason: String,
    pub certname: String,
    pub cleaned: bool,
}

/// A pending request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    pub certname: String,
    pub time: String,
    pub reasons: Vec<String>,
}

/// Proof that the caller holds the store's write lock.
pub struct WriteLock {
    _file: File,
}

/// The operations vouch needs from a CA store. The file store implements it
/// today; an LDAP store shared by several masters will implement it next.
/// Mutations take a [`WriteLock`]: one writer at a time.
pub trait Store {
    /// Takes the write lock (blocking) and finishes any operation a killed process left.
    fn lock(&self) -> Result<WriteLock, StoreError>;
    /// The record of the current certificate of `certname`, with its PEM.
    fn current(&self, certname: &str) -> Result<Option<(CertRecord, String)>, StoreError>;
    /// A serial's record.
    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError>;
    /// Reserves a serial and records the intent to sign (fails if the serial exists).
    fn reserve(&self, lock: &WriteLock, intent: &CertRecord) -> Result<(), StoreError>;
    /// Stores a signed certificate for a reserved serial and marks it issued.
    fn commit(&self, lock: &WriteLock, record: &CertRecord, pem: &str) -> Result<(), StoreError>;
    /// Marks a reserved serial as never issued.
    fn abandon(&self, lock: &WriteLock, serial: &str) -> Result<(), StoreError>;
    /// Revokes a serial; `cleaned` also forgets the certname's current certificate.
    fn revoke(&self, lock: &WriteLock, rev: &Revocation) -> Result<(), StoreError>;
    /// All revocations, oldest first.
    fn revocations(&self) -> Result<Vec<Revocation>, StoreError>;
    /// All issued certificates as (serial, notBefore, notAfter, certname), oldest first.
    fn inventory(&self) -> Result<Vec<(String, String, String, String)>, StoreError>;
    /// Keeps a refused request for the operator to see.
    fn put_request(&self, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError>;
    fn remove_request(&self, certname: &str) -> Result<(), StoreError>;
    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError>;
    /// One pending request with its CSR (PEM), if there is one.
    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError>;
}

/// The embedded default store: files under `DIR/ca/`.
#[derive(Debug, Clone)]
pub struct FileStore {
    pub root: PathBuf,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Marker {
    Issue { record: CertRecord },
    Revoke { serial: String, time: String, reason: String, certname: String, cleaned: bool },
}

impl FileStore {
    pub fn new(ca_dir: impl Into<PathBuf>) -> Self {
        FileStore { root: ca_dir.into() }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn signed_path(&self, certname: &str) -> PathBuf {
        self.root.join("signed").join(format!("{certname}.pem"))
    }

    fn serial_path(&self, serial: &str) -> PathBuf {
        let shard = serial.get(..2).unwrap_or("00");
        self.root.join("serials").join(shard).join(format!("{serial}.json"))
    }

    fn ensure_dirs(&self) -> Result<(), StoreError> {
        for d in ["signed", "requests", "serials", "pending", "tmp"] {
            let p = self.p(d);
            fs::create_dir_all(&p).map_err(io_err(&p, "create directory"))?;
        }
        Ok(())
    }

    fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StoreError> {
        match fs::read(path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: path.to_path_buf(), op: "read", source: e }),
        }
    }

    fn write_record(&self, rec: &CertRecord, new: bool) -> Result<(), StoreError> {
        let path = self.serial_path(&rec.serial);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(parent, "create directory"))?;
        }
        let bytes =
            serde_json::to_vec(rec).map_err(|e| StoreError::Corrupt { path: path.clone(), detail: e.to_string() })?;
        let tmp = self.p("tmp");
        let res = if new {
            fsutil::write_new_in(&tmp, &path, &bytes, 0o644)
        } else {
            fsutil::write_replace_in(&tmp, &path, &bytes, 0o644)
        };
        res.map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                StoreError::SerialTaken { serial: rec.serial.clone() }
            } else {
                StoreError::Io { path, op: "write", source: e }
            }
        })
    }

    fn marker_path(&self, serial: &str, op: &str) -> PathBuf {
        self.p("pending").join(format!("{op}-{serial}.json"))
    }

    fn write_marker(&self, path: &Path, m: &Marker) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(m)
            .map_err(|e| StoreError::Corrupt { path: path.to_path_buf(), detail: e.to_string() })?;
        fsutil::write_replace_in(&self.p("tmp"), path, &bytes, 0o644).map_err(io_err(path, "write"))
    }

    fn remove_marker(&self, path: &Path) -> Result<(), StoreError> {
        match fs::remove_file(path) {
            Ok(()) => fsutil::sync_dir(&self.p("pending")).map_err(io_err(path, "sync")),
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
        fsutil::append_line(&path, line).map_err(io_err(&path, "append to"))
    }

    fn inventory_line(rec: &CertRecord) -> String {
        format!("0x{} {} {} /CN={}", rec.serial, rec.not_before, rec.not_after, rec.certname)
    }

    fn revocation_line(r: &Revocation) -> String {
        format!("{} {} {} {}{}", r.serial, r.time, r.reason, r.certname, if r.cleaned { " cleaned" } else { "" })
    }

    fn serial_of_pem(pem: &str) -> Option<String> {
        let (_, der) = crate::pem::find(pem.as_bytes(), &["CERTIFICATE"]).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        Some(crate::issue::hex(cert.raw_serial()))
    }

    fn redo_issue(&self, rec: &CertRecord) -> Result<(), StoreError> {
        let on_disk = match fs::read_to_string(self.signed_path(&rec.certname)) {
            Ok(pem) => Self::serial_of_pem(&pem),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StoreError::Io { path: self.signed_path(&rec.certname), op: "read", source: e }),
        };
        if on_disk.as_deref() == Some(rec.serial.as_str()) {
            self.append_once("inventory.txt", &Self::inventory_line(rec))?;
            crash_point("issue:inventory");
            let mut done = rec.clone();
            done.state = State::Issued;
            self.write_record(&done, false)?;
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
                    self.write_record(&gone, false)
                }
            }
        }
    }

    fn redo_revoke(&self, r: &Revocation) -> Result<(), StoreError> {
        if let Some(mut rec) = self.record(&r.serial)? {
            rec.state = State::Revoked;
            rec.revoked_at = Some(r.time.clone());
            rec.reason = Some(r.reason.clone());
            self.write_record(&rec, false)?;
            crash_point("revoke:record");
        }
        self.append_once("revocations.txt", &Self::revocation_line(r))?;
        crash_point("revoke:log");
        if r.cleaned {
            let p = self.signed_path(&r.certname);
            let current = fs::read_to_string(&p).ok().and_then(|pem| Self::serial_of_pem(&pem));
            if current.as_deref() == Some(r.serial.as_str()) {
                fs::remove_file(&p).map_err(io_err(&p, "remove"))?;
                fsutil::sync_dir(&self.p("signed")).map_err(io_err(&p, "sync"))?;
                crash_point("revoke:forget");
            }
            let _ = self.remove_request(&r.certname);
        }
        Ok(())
    }

    /// Finishes what killed processes left under `pending/`, and removes the
    /// temporary files killed writers left in `tmp/` (store writes stage there, under the lock).
    /// Needs the lock.
    fn recover(&self) -> Result<(), StoreError> {
        // Temporary files of killed writers (store writes under the lock stage in tmp/).
        let tmp = self.p("tmp");
        let entries = fs::read_dir(&tmp).map_err(io_err(&tmp, "read directory"))?;
        for e in entries {
            let _ = fs::remove_file(e.map_err(io_err(&tmp, "read directory"))?.path());
        }
        let dir = self.p("pending");
        let entries = fs::read_dir(&dir).map_err(io_err(&dir, "read directory"))?;
        for e in entries {
            let path = e.map_err(io_err(&dir, "read directory"))?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                // A temporary file a killed write left behind.
                let _ = fs::remove_file(&path);
                continue;
            }
            match Self::read_json::<Marker>(&path)? {
                Some(Marker::Issue { record }) => self.redo_issue(&record)?,
                Some(Marker::Revoke { serial, time, reason, certname, cleaned }) => {
                    self.redo_revoke(&Revocation { serial, time, reason, certname, cleaned })?
                }
                None => {}
            }
            self.remove_marker(&path)?;
        }
        Ok(())
    }
}

/// Fault injection for the crash tests: when `VOUCH_TEST_ABORT_AT` names this
/// step, the process aborts here, as if killed. Steps: issue:marker,
/// issue:record, issue:signed, issue:inventory, issue:issued, revoke:marker,
/// revoke:record, revoke:log, revoke:forget.
fn crash_point(step: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("VOUCH_TEST_ABORT_AT").ok()).as_deref() == Some(step) {
        std::process::abort();
    }
}

/// Reads up to the last `n` bytes of a file ("" if it does not exist).
fn read_tail(path: &Path, n: u64) -> io::Result<String> {
    let mut f = match File::open(path) {
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

impl Store for FileStore {
    fn lock(&self) -> Result<WriteLock, StoreError> {
        self.ensure_dirs()?;
        let path = self.p(".lock");
        let file =
            OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io_err(&path, "open"))?;
        // SAFETY: flock on a valid, open file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(StoreError::Io { path, op: "lock", source: io::Error::last_os_error() });
        }
        let lock = WriteLock { _file: file };
        self.recover()?;
        Ok(lock)
    }

    fn current(&self, certname: &str) -> Result<Option<(CertRecord, String)>, StoreError> {
        let path = self.signed_path(certname);
        let pem = match fs::read_to_string(&path) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let serial = Self::serial_of_pem(&pem)
            .ok_or_else(|| StoreError::Corrupt { path: path.clone(), detail: "not a certificate".into() })?;
        let rec = self
            .record(&serial)?
            .ok_or_else(|| StoreError::Corrupt { path, detail: format!("serial {serial} has no record") })?;
        Ok(Some((rec, pem)))
    }

    fn record(&self, serial: &str) -> Result<Option<CertRecord>, StoreError> {
        Self::read_json(&self.serial_path(serial))
    }

    fn reserve(&self, _lock: &WriteLock, intent: &CertRecord) -> Result<(), StoreError> {
        // The marker first: a process killed at any later point is found by recovery.
        let marker = self.marker_path(&intent.serial, "issue");
        self.write_marker(&marker, &Marker::Issue { record: intent.clone() })?;
        crash_point("issue:marker");
        if let Err(e) = self.write_record(intent, true) {
            self.remove_marker(&marker)?;
            return Err(e);
        }
        crash_point("issue:record");
        Ok(())
    }

    fn commit(&self, _lock: &WriteLock, record: &CertRecord, pem: &str) -> Result<(), StoreError> {
        let path = self.signed_path(&record.certname);
        fsutil::write_replace_in(&self.p("tmp"), &path, pem.as_bytes(), 0o644).map_err(io_err(&path, "write"))?;
        crash_point("issue:signed");
        self.redo_issue(record)?;
        self.remove_marker(&self.marker_path(&record.serial, "issue"))
    }

    fn abandon(&self, _lock: &WriteLock, serial: &str) -> Result<(), StoreError> {
        if let Some(mut rec) = self.record(serial)? {
            rec.state = State::Abandoned;
            self.write_record(&rec, false)?;
        }
        self.remove_marker(&self.marker_path(serial, "issue"))
    }

    fn revoke(&self, _lock: &WriteLock, r: &Revocation) -> Result<(), StoreError> {
        let marker = self.marker_path(&r.serial, "revoke");
        self.write_marker(
            &marker,
            &Marker::Revoke {
                serial: r.serial.clone(),
                time: r.time.clone(),
                reason: r.reason.clone(),
                certname: r.certname.clone(),
                cleaned: r.cleaned,
            },
        )?;
        crash_point("revoke:marker");
        self.redo_revoke(r)?;
        self.remove_marker(&marker)
    }

    fn revocations(&self) -> Result<Vec<Revocation>, StoreError> {
        let path = self.p("revocations.txt");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let mut out = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if let [serial, time, reason, certname, rest @ ..] = f.as_slice() {
                out.push(Revocation {
                    serial: serial.to_string(),
                    time: time.to_string(),
                    reason: reason.to_string(),
                    certname: certname.to_string(),
                    cleaned: rest.first() == Some(&"cleaned"),
                });
            }
        }
        Ok(out)
    }

    fn inventory(&self) -> Result<Vec<(String, String, String, String)>, StoreError> {
        let path = self.p("inventory.txt");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        Ok(text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                match f.as_slice() {
                    [serial, nb, na, cn] => Some((
                        serial.trim_start_matches("0x").to_string(),
                        nb.to_string(),
                        na.to_string(),
                        cn.trim_start_matches("/CN=").to_string(),
                    )),
                    _ => None,
                }
            })
            .collect())
    }

    fn put_request(&self, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        self.ensure_dirs()?;
        let pem = self.p("requests").join(format!("{}.pem", req.certname));
        fsutil::write_replace(&pem, csr_pem, 0o644).map_err(io_err(&pem, "write"))?;
        let meta = self.p("requests").join(format!("{}.json", req.certname));
        let bytes =
            serde_json::to_vec(req).map_err(|e| StoreError::Corrupt { path: meta.clone(), detail: e.to_string() })?;
        fsutil::write_replace(&meta, &bytes, 0o644).map_err(io_err(&meta, "write"))
    }

    fn remove_request(&self, certname: &str) -> Result<(), StoreError> {
        for ext in ["pem", "json"] {
            let p = self.p("requests").join(format!("{certname}.{ext}"));
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::Io { path: p, op: "remove", source: e }),
            }
        }
        Ok(())
    }

    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        let dir = self.p("requests");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(StoreError::Io { path: dir, op: "read directory", source: e }),
        };
        let mut out = Vec::new();
        for e in entries {
            let path = e.map_err(io_err(&dir, "read directory"))?.path();
            if path.extension().and_then(|x| x.to_str()) == Some("json") {
                if let Some(r) = Self::read_json::<PendingRequest>(&path)? {
                    out.push(r);
                }
            }
        }
        out.sort_by(|a, b| a.certname.cmp(&b.certname));
        Ok(out)
    }

    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError> {
        let meta = self.p("requests").join(format!("{certname}.json"));
        let Some(req) = Self::read_json::<PendingRequest>(&meta)? else { return Ok(None) };
        let pem_path = self.p("requests").join(format!("{certname}.pem"));
        match fs::read(&pem_path) {
            Ok(pem) => Ok(Some((req, pem))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: pem_path, op: "read", source: e }),
        }
    }
}
