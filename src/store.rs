//! The CA store behind a narrow trait, and its embedded default: local files.
//!
//! File layout under `DIR/ca/` (after Puppet's cadir):
//!
//! ```text
//! signed/<certname>.pem      the current certificate of each certname
//! requests/<certname>.pem    pending (refused) requests, with <certname>.json: the reasons
//! serials/<ab>/<serial>.json one record per serial ever issued (a serial is used once: checked under the lock)
//! inventory.txt              Puppet's inventory: "0x<serial> <notBefore> <notAfter> /CN=<certname>"
//! revocations.txt            "<serial> <time> <reason> <certname> [cleaned]", one line per revocation
//! pending/                   redo journal: one marker per operation in flight
//! tmp/                       staging for atomic writes (emptied by recovery)
//! ca_crl.pem, crl_number     the CRL and its counter
//! .lock                      flock: one writer at a time, across processes
//! wal.log                    write-ahead log of issuances since the last checkpoint
//! ```
//!
//! **Issuance** is a group commit: a batch of signed certificates is appended
//! to `wal.log` in one write, closed by a commit line (entry count, SHA-256), and
//! made durable with one `fdatasync`; only then
//! are the files above written (records, `signed/`, inventory, the replay
//! journal's entries), atomically (temporary file, rename) but without fsync.
//! A *checkpoint* (`syncfs`, then a fresh `wal.log` whose header records the
//! inventory's length) makes those files durable on their own; it runs when the
//! log passes 8 MiB, before any revocation, and when `vouch serve` is idle.
//! Recovery: a process trusts the files only for log entries it applied itself;
//! whoever takes the lock and finds a log it did not write (a killed process's,
//! or one from before a power loss) truncates the inventory to the header's
//! length, re-applies every entry in order (each step is idempotent) and
//! checkpoints. A torn last batch was never acknowledged and is dropped.
//!
//! **Revocation** (rare) keeps the per-operation protocol: every write atomic
//! and synced (temporary file, fsync, rename or link, fsync the directory); the
//! operation first writes its marker under `pending/`, then its steps, each
//! idempotent, then removes the marker; whoever takes the lock next redoes
//! what a killed process left. It checkpoints first, so no entry written before a
//! revocation is ever replayed after it.

use crate::fsutil;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// A store failure.
#[derive(Debug)]
pub enum StoreError {
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    Corrupt {
        path: PathBuf,
        detail: String,
    },
    SerialTaken {
        serial: String,
    },
    /// A certname that fails the certname rules: it never becomes a file name.
    CertnameInvalid {
        certname: String,
        problem: crate::decide::CertnameProblem,
    },
    /// The batch is durable in the store's log, but a step after that failed (applying it
    /// to the files, or a checkpoint): the certificates exist; the next lock holder
    /// finishes the job.
    AfterCommit {
        source: Box<StoreError>,
    },
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
            StoreError::CertnameInvalid { certname, problem } => {
                write!(f, "{certname:?} is not a valid certname: {problem}")
            }
            StoreError::AfterCommit { source } => write!(
                f,
                "the certificates are stored (in the store's log), but then: {source}; \
                 the next command that takes the store's lock finishes writing them"
            ),
        }
    }
}

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

/// A replay-journal claim an issuance spent: the log replays it after a crash,
/// since the journal's entry is written without fsync (see [`crate::replay::Journal::sync`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpentClaim {
    pub journal: PathBuf,
    pub key: String,
    /// The attributes' expiry (RFC 3339): it names the journal's bucket.
    pub expiry: String,
    pub certname: String,
    pub holder: String,
    pub time: String,
}

/// One signed certificate to store: its record (state `Issued`), its PEM, and the
/// claim that made its attributes one-time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issuance {
    pub record: CertRecord,
    pub pem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<SpentClaim>,
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
    /// Stores a batch of signed certificates, each becoming its certname's current one.
    /// Ok: all of them are durable. [`StoreError::AfterCommit`]: all of them are durable
    /// too, but a later step failed. Any other error: none was stored. Fails with
    /// [`StoreError::SerialTaken`], storing nothing, if a serial was ever used.
    fn issue(&self, lock: &WriteLock, batch: &[Issuance]) -> Result<(), StoreError>;
    /// Makes everything stored so far durable in the store's own layout (the file
    /// store: flushes its write-ahead log into its files).
    fn checkpoint(&self, lock: &WriteLock) -> Result<(), StoreError>;
    /// Revokes a serial; `cleaned` also forgets the certname's current certificate.
    fn revoke(&self, lock: &WriteLock, rev: &Revocation) -> Result<(), StoreError>;
    /// All revocations, oldest first.
    fn revocations(&self) -> Result<Vec<Revocation>, StoreError>;
    /// All issued certificates as (serial, notBefore, notAfter, certname), oldest first.
    fn inventory(&self) -> Result<Vec<(String, String, String, String)>, StoreError>;
    /// Keeps a refused request for the operator to see (under the lock: its CSR and its
    /// reasons are two files, written by one writer at a time).
    fn put_request(&self, lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError>;
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

    /// `DIR/ca/signed/<certname>.pem`. The certname is checked first (it becomes a file
    /// name): one that fails the certname rules is an error, and no file is touched.
    pub fn signed_path(&self, certname: &str) -> Result<PathBuf, StoreError> {
        Ok(self.root.join("signed").join(Self::file_name(certname, "pem")?))
    }

    /// `<certname>.<ext>`, for a certname that passes the certname rules
    /// ([`crate::decide::check_certname`]: no '/', no "..", no leading '.', ...).
    fn file_name(certname: &str, ext: &str) -> Result<String, StoreError> {
        crate::decide::check_certname(certname)
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
    fn ensure_dirs(&self) -> Result<(), StoreError> {
        fsutil::create_dirs(&self.root).map_err(io_err(&self.root, "create directory"))?;
        for d in ["signed", "requests", "serials", "pending", "tmp"] {
            let p = self.p(d);
            fsutil::ensure_real_dir(&p).map_err(io_err(&p, "use directory"))?;
        }
        // The files written in place (appended, truncated, locked): refused before anything
        // is decided or logged; their O_NOFOLLOW opens are the race-free backstop.
        for f in [".lock", WAL, "inventory.txt", "revocations.txt"] {
            let p = self.p(f);
            fsutil::refuse_link(&p).map_err(io_err(&p, "use"))?;
        }
        Ok(())
    }

    /// Refuses a serial record's shard directory (`serials/<ab>/`) that is a symbolic link.
    fn check_shard(path: &Path) -> Result<(), StoreError> {
        match path.parent() {
            Some(shard) => fsutil::refuse_link(shard).map_err(io_err(shard, "use directory")),
            None => Ok(()),
        }
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

    /// Replaces a serial's record, synced (the revocation protocol, and redoing the
    /// issuance markers older versions left).
    fn write_record(&self, rec: &CertRecord) -> Result<(), StoreError> {
        let path = self.serial_path(&rec.serial);
        let bytes =
            serde_json::to_vec(rec).map_err(|e| StoreError::Corrupt { path: path.clone(), detail: e.to_string() })?;
        let tmp = self.p("tmp");
        Self::check_shard(&path)?;
        fsutil::in_dir(&path, || fsutil::write_replace_in(&tmp, &path, &bytes, 0o644)).map_err(|e| StoreError::Io {
            path: path.clone(),
            op: "write",
            source: e,
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
        let pending = self.p("pending");
        let dir = fsutil::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
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
        let signed = self.signed_path(&rec.certname)?;
        let on_disk = match fs::read_to_string(&signed) {
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
        if let Some(mut rec) = self.record(&r.serial)? {
            rec.state = State::Revoked;
            rec.revoked_at = Some(r.time.clone());
            rec.reason = Some(r.reason.clone());
            self.write_record(&rec)?;
            crash_point("revoke:record");
        }
        self.append_once("revocations.txt", &Self::revocation_line(r))?;
        crash_point("revoke:log");
        if r.cleaned {
            let p = self.signed_path(&r.certname)?;
            let current = fs::read_to_string(&p).ok().and_then(|pem| Self::serial_of_pem(&pem));
            if current.as_deref() == Some(r.serial.as_str()) {
                // Through the directory's descriptor: a signed/ swapped for a link is refused.
                let signed = self.p("signed");
                let dir = fsutil::NoFollowDir::open(&signed).map_err(io_err(&signed, "open"))?;
                dir.unlink(p.file_name().unwrap_or_default()).map_err(io_err(&p, "remove"))?;
                dir.sync().map_err(io_err(&p, "sync"))?;
                crash_point("revoke:forget");
            }
            let _ = self.remove_request(&r.certname);
        }
        Ok(())
    }

    fn wal_path(&self) -> PathBuf {
        self.p(WAL)
    }

    fn wal_id(&self) -> Result<Option<WalId>, StoreError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.wal_path();
        let mut f = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let m = f.metadata().map_err(io_err(&path, "read"))?;
        // The header's generation (the first line, well within 256 bytes).
        let mut head = [0u8; 256];
        let n = f.read(&mut head).map_err(io_err(&path, "read"))?;
        let line = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
        let mut generation = [0u8; 32];
        if let Ok(h) = serde_json::from_slice::<WalHeader>(line) {
            let g = h.generation.as_bytes();
            let k = g.len().min(32);
            generation[..k].copy_from_slice(&g[..k]);
        }
        Ok(Some(WalId { dev: m.dev(), ino: m.ino(), len: m.len(), ctime: (m.ctime(), m.ctime_nsec()), generation }))
    }

    /// What this process last left in the log (None: it trusts nothing there).
    fn known(&self) -> Option<WalId> {
        known_logs().lock().unwrap_or_else(|e| e.into_inner()).get(&self.root).copied()
    }

    fn set_known(&self, id: Option<WalId>) {
        let mut map = known_logs().lock().unwrap_or_else(|e| e.into_inner());
        match id {
            Some(id) => map.insert(self.root.clone(), id),
            None => map.remove(&self.root),
        };
    }

    /// Reads the log: its header, the entries of every batch whose commit line verifies,
    /// and the length they end at. A torn last batch (a power loss during its write: never
    /// acknowledged) lies beyond it and is dropped; damage before a later good batch is an error.
    fn read_wal(&self) -> Result<(WalHeader, Vec<Issuance>, u64), StoreError> {
        let path = self.wal_path();
        let bytes = fs::read(&path).map_err(io_err(&path, "read"))?;
        let corrupt = |detail: String| StoreError::Corrupt { path: path.clone(), detail };
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(n) = bytes.get(start..).and_then(|rest| rest.iter().position(|b| *b == b'\n')) {
            lines.push((start, start + n + 1));
            start += n + 1;
        }
        let Some(&(h0, h1)) = lines.first() else { return Err(corrupt("no header".into())) };
        let header: WalHeader = serde_json::from_slice(&bytes[h0..h1]).map_err(|e| corrupt(format!("header: {e}")))?;
        if header.wal != WAL_VERSION {
            return Err(corrupt(format!(
                "log format {} (this vouch reads {WAL_VERSION}): finish it with the vouch that wrote it",
                header.wal
            )));
        }
        let mut entries = Vec::new();
        let mut pending: Vec<Issuance> = Vec::new();
        let mut batch_start = h1;
        let mut end = h1 as u64;
        let mut damaged: Option<String> = None;
        for &(a, b) in lines.iter().skip(1) {
            let line = &bytes[a..b];
            if let Ok(c) = serde_json::from_slice::<WalCommit>(line) {
                let whole =
                    damaged.is_none() && c.batch == pending.len() && c.sha256 == sha256_hex(&bytes[batch_start..a]);
                if !whole {
                    // Damage followed by a later commit: that batch was written after this one
                    // was synced, so this is not a torn write but a damaged log.
                    let later = lines.iter().enumerate().any(|(j, &(x, y))| {
                        x > a
                            && serde_json::from_slice::<WalCommit>(&bytes[x..y]).is_ok_and(|c| {
                                // It verifies over its own batch: the lines just before it.
                                j.checked_sub(c.batch)
                                    .and_then(|k| lines.get(k))
                                    .is_some_and(|&(s0, _)| s0 > a && c.sha256 == sha256_hex(&bytes[s0..x]))
                            })
                    });
                    if later {
                        let at = damaged.take().unwrap_or_else(|| format!("the batch ending at byte {b}"));
                        return Err(corrupt(format!("{at} does not match its commit line")));
                    }
                    break;
                }
                entries.append(&mut pending);
                end = b as u64;
                batch_start = b;
                continue;
            }
            match serde_json::from_slice::<Issuance>(line) {
                Ok(e) if damaged.is_none() => pending.push(e),
                Ok(_) => {}
                Err(e) => {
                    damaged.get_or_insert_with(|| format!("entry at byte {a} ({e})"));
                }
            }
        }
        Ok((header, entries, end))
    }

    /// Writes a fresh log (header only) recording the inventory's current length. Synced.
    fn reset_wal(&self) -> Result<(), StoreError> {
        let inv = self.p("inventory.txt");
        let inventory_len = match fs::metadata(&inv) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(StoreError::Io { path: inv, op: "read", source: e }),
        };
        let path = self.wal_path();
        let mut g = [0u8; 16];
        aws_lc_rs::rand::fill(&mut g)
            .map_err(|_| StoreError::Corrupt { path: path.clone(), detail: "no randomness available".into() })?;
        let generation = crate::issue::hex(&g);
        let mut header = serde_json::to_vec(&WalHeader { wal: WAL_VERSION, inventory_len, generation })
            .map_err(|e| StoreError::Corrupt { path: path.clone(), detail: e.to_string() })?;
        header.push(b'\n');
        fsutil::write_replace_in(&self.p("tmp"), &path, &header, 0o644).map_err(io_err(&path, "write"))?;
        self.set_known(self.wal_id()?);
        Ok(())
    }

    /// Applies one log entry to the files, without fsync: the record, the certificate, the
    /// inventory line, the replay journal's claim marked issued. Idempotent. `live`: the
    /// batch this process just logged (its claims were made under this lock, for these
    /// holders); otherwise a replay, which checks each claim before marking it.
    fn apply(&self, e: &Issuance, inventory: &mut File, live: bool) -> Result<(), StoreError> {
        use std::io::Write;
        let rec = &e.record;
        let path = self.serial_path(&rec.serial);
        let bytes = serde_json::to_vec(rec)
            .map_err(|err| StoreError::Corrupt { path: path.clone(), detail: err.to_string() })?;
        let tmp = self.p("tmp");
        Self::check_shard(&path)?;
        fsutil::in_dir(&path, || fsutil::write_replace_unsynced_in(&tmp, &path, &bytes, 0o644))
            .map_err(io_err(&path, "write"))?;
        crash_point("wal:record");
        let signed = self.signed_path(&rec.certname)?;
        fsutil::write_replace_unsynced_in(&self.p("tmp"), &signed, e.pem.as_bytes(), 0o644)
            .map_err(io_err(&signed, "write"))?;
        let line = format!("{}\n", Self::inventory_line(rec));
        inventory.write_all(line.as_bytes()).map_err(io_err(&self.p("inventory.txt"), "append to"))?;
        if let Some(c) = &e.claim {
            let expiry = crate::authority::parse_time(&c.expiry);
            let time = crate::authority::parse_time(&c.time);
            if let (Some(expiry), Some(time)) = (expiry, time) {
                let journal = crate::replay::Journal::unsynced(&c.journal);
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
                    let _ = writeln!(
                        std::io::stderr(),
                        "{}",
                        serde_json::json!({
                            "event": "replay-conflict", "certname": c.certname, "serial": rec.serial,
                            "detail": "the replay journal's entry for these attributes names another requester; \
                                       both hold certificates from one set of attributes: revoke one",
                        })
                    );
                }
            }
        }
        Ok(())
    }

    fn open_inventory(&self) -> Result<File, StoreError> {
        let path = self.p("inventory.txt");
        fsutil::open_nofollow(OpenOptions::new().append(true).create(true), &path).map_err(io_err(&path, "open"))
    }

    /// Flushes what the log holds into the files (syncfs on the store's filesystem and
    /// on each replay journal's, if elsewhere), then starts a fresh log.
    fn checkpoint_now(&self, entries: &[Issuance]) -> Result<(), StoreError> {
        use std::os::unix::fs::MetadataExt;
        fsutil::sync_filesystem(&self.root).map_err(io_err(&self.root, "sync"))?;
        let here = fs::metadata(&self.root).map(|m| m.dev()).ok();
        let mut synced: Vec<&Path> = Vec::new();
        for c in entries.iter().filter_map(|e| e.claim.as_ref()) {
            if synced.contains(&c.journal.as_path()) {
                continue;
            }
            synced.push(&c.journal);
            if fs::metadata(&c.journal).map(|m| m.dev()).ok() != here {
                fsutil::sync_filesystem(&c.journal).map_err(io_err(&c.journal, "sync"))?;
            }
        }
        crash_point("checkpoint:synced");
        self.reset_wal()
    }

    /// At lock time: a log this process did not leave is re-applied and checkpointed.
    fn recover_wal(&self) -> Result<(), StoreError> {
        let Some(id) = self.wal_id()? else { return self.reset_wal() };
        if self.known() == Some(id) {
            return Ok(());
        }
        let (header, entries, end) = self.read_wal()?;
        if entries.is_empty() {
            if end == id.len {
                self.set_known(Some(id));
                return Ok(());
            }
            return self.reset_wal();
        }
        // A writer killed between its write and its fdatasync left entries that only the
        // page cache holds: make them durable before anything is applied from them.
        File::open(self.wal_path()).and_then(|f| f.sync_data()).map_err(io_err(&self.wal_path(), "sync"))?;
        let inv = self.p("inventory.txt");
        if fs::metadata(&inv).map(|m| m.len()).unwrap_or(0) > header.inventory_len {
            let f = fsutil::open_nofollow(OpenOptions::new().write(true), &inv).map_err(io_err(&inv, "open"))?;
            f.set_len(header.inventory_len).map_err(io_err(&inv, "truncate"))?;
        }
        let mut inventory = self.open_inventory()?;
        for e in &entries {
            self.apply(e, &mut inventory, false).map_err(damaged(&self.wal_path()))?;
        }
        self.checkpoint_now(&entries)
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
            let dir = fsutil::NoFollowDir::open(&tmp).map_err(io_err(&tmp, "open"))?;
            for name in dir.names().map_err(io_err(&tmp, "read directory"))? {
                let _ = dir.unlink(&name);
            }
        }
        let pending = self.p("pending");
        let dir = fsutil::NoFollowDir::open(&pending).map_err(io_err(&pending, "open"))?;
        for name in dir.names().map_err(io_err(&pending, "read directory"))? {
            let path = dir.path_of(&name);
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                // A temporary file a killed write left behind.
                let _ = dir.unlink(&name);
                continue;
            }
            match Self::read_json::<Marker>(&path)? {
                Some(Marker::Issue { record }) => self.redo_issue(&record).map_err(damaged(&path))?,
                Some(Marker::Revoke { serial, time, reason, certname, cleaned }) => {
                    self.redo_revoke(&Revocation { serial, time, reason, certname, cleaned }).map_err(damaged(&path))?
                }
                None => {}
            }
            self.remove_marker(&path)?;
        }
        Ok(())
    }
}

/// The write-ahead log's file name under `DIR/ca/`.
pub const WAL: &str = "wal.log";
/// The log's format: 2 = batches closed by a commit line.
const WAL_VERSION: u32 = 2;
/// The log is checkpointed once it grows past this.
const CHECKPOINT_BYTES: u64 = 8 << 20;

#[derive(Serialize, Deserialize)]
struct WalHeader {
    wal: u32,
    inventory_len: u64,
    /// Random, new with every log: tells two logs apart whatever the filesystem's timestamps.
    #[serde(default)]
    generation: String,
}

/// The line that ends each batch in the log: how many entries it holds and the SHA-256
/// of their bytes. Entries count only under a commit line that verifies.
#[derive(Serialize, Deserialize)]
struct WalCommit {
    batch: usize,
    sha256: String,
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::issue::hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

/// A log file's identity, length and change time, as this process last left it
/// (the change time tells a reused inode number of the same length apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WalId {
    dev: u64,
    ino: u64,
    len: u64,
    ctime: (i64, i64),
    generation: [u8; 32],
}

/// Per store directory: the log as this process last left it, fully applied.
fn known_logs() -> &'static Mutex<std::collections::HashMap<PathBuf, WalId>> {
    static KNOWN: OnceLock<Mutex<std::collections::HashMap<PathBuf, WalId>>> = OnceLock::new();
    KNOWN.get_or_init(|| Mutex::new(std::collections::HashMap::new()))
}

/// Fault injection for the crash tests: when `VOUCH_TEST_ABORT_AT` names this
/// step, the process aborts here, as if killed. Steps: wal:before,
/// wal:appended, wal:record, wal:applied, checkpoint:synced, revoke:marker,
/// revoke:record, revoke:log, revoke:forget (and issue:* for markers older
/// versions left).
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
        let first = !self.prepared(false);
        // Every time (a few lstat calls): a directory swapped for a link since is refused.
        self.ensure_dirs()?;
        let path = self.p(".lock");
        let file = fsutil::open_nofollow(OpenOptions::new().create(true).truncate(false).write(true), &path)
            .map_err(io_err(&path, "open"))?;
        // SAFETY: flock on a valid, open file descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(StoreError::Io { path, op: "lock", source: io::Error::last_os_error() });
        }
        let lock = WriteLock { _file: file };
        self.recover(first)?;
        self.recover_wal()?;
        if first {
            self.prepared(true);
        }
        Ok(lock)
    }

    fn current(&self, certname: &str) -> Result<Option<(CertRecord, String)>, StoreError> {
        let path = self.signed_path(certname)?;
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

    fn issue(&self, _lock: &WriteLock, batch: &[Issuance]) -> Result<(), StoreError> {
        use std::io::Write;
        if batch.is_empty() {
            return Ok(());
        }
        // An earlier batch under this same lock may have failed after its log entry was
        // synced (this process then trusts the log no more): apply it before anything else
        // (it may hold these certnames' current certificates). Otherwise the log is as this
        // process left it: nobody else writes while the lock is held.
        let known = match self.known() {
            Some(k) => k,
            None => {
                self.recover_wal()?;
                self.known().ok_or_else(|| StoreError::Corrupt {
                    path: self.wal_path(),
                    detail: "the log could not be recovered".into(),
                })?
            }
        };
        let mut seen = std::collections::HashSet::new();
        for e in batch {
            let serial = &e.record.serial;
            if !seen.insert(serial.as_str()) || self.serial_path(serial).exists() {
                return Err(StoreError::SerialTaken { serial: serial.clone() });
            }
        }
        let path = self.wal_path();
        let mut buf = Vec::new();
        for e in batch {
            serde_json::to_writer(&mut buf, e)
                .map_err(|err| StoreError::Corrupt { path: path.clone(), detail: err.to_string() })?;
            buf.push(b'\n');
        }
        let commit = WalCommit { batch: batch.len(), sha256: sha256_hex(&buf) };
        serde_json::to_writer(&mut buf, &commit)
            .map_err(|err| StoreError::Corrupt { path: path.clone(), detail: err.to_string() })?;
        buf.push(b'\n');
        crash_point("wal:before");
        let mut f = fsutil::open_nofollow(OpenOptions::new().append(true), &path).map_err(io_err(&path, "open"))?;
        let before = f.metadata().map_err(io_err(&path, "read"))?.len();
        if let Err(e) = f.write_all(&buf).and_then(|_| f.sync_data()) {
            // Nothing was acknowledged: take the partial write back (durably, as far as the
            // disk still answers), and trust the log no more.
            let _ = f.set_len(before).and_then(|_| f.sync_data());
            self.set_known(None);
            return Err(StoreError::Io { path, op: "append to", source: e });
        }
        crash_point("wal:appended");
        let id = {
            use std::os::unix::fs::MetadataExt;
            f.metadata().ok().map(|m| WalId {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                ctime: (m.ctime(), m.ctime_nsec()),
                generation: known.generation,
            })
        };
        let applied =
            self.open_inventory().and_then(|mut inv| batch.iter().try_for_each(|e| self.apply(e, &mut inv, true)));
        if let Err(e) = applied {
            // Durable in the log; the next lock holder (or this one's next issue) applies it.
            self.set_known(None);
            return Err(StoreError::AfterCommit { source: Box::new(e) });
        }
        crash_point("wal:applied");
        let after = |e: StoreError| {
            self.set_known(None);
            StoreError::AfterCommit { source: Box::new(e) }
        };
        let id = match id {
            Some(id) => Some(id),
            None => self.wal_id().map_err(after)?,
        };
        self.set_known(id);
        if id.is_some_and(|id| id.len > CHECKPOINT_BYTES) {
            let (_, entries, _) = self.read_wal().map_err(after)?;
            self.checkpoint_now(&entries).map_err(after)?;
        }
        Ok(())
    }

    fn checkpoint(&self, _lock: &WriteLock) -> Result<(), StoreError> {
        if self.known().is_none() {
            self.recover_wal()?;
        }
        let (_, entries, _) = self.read_wal()?;
        if entries.is_empty() {
            return Ok(());
        }
        self.checkpoint_now(&entries)
    }

    fn revoke(&self, lock: &WriteLock, r: &Revocation) -> Result<(), StoreError> {
        // No entry written before a revocation may stay in the log: replayed after it, it
        // would undo it (entries written after it are fine).
        self.checkpoint(lock)?;
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

    fn put_request(&self, _lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError> {
        let pem = self.p("requests").join(Self::file_name(&req.certname, "pem")?);
        let meta = self.p("requests").join(Self::file_name(&req.certname, "json")?);
        self.ensure_dirs()?;
        fsutil::write_replace(&pem, csr_pem, 0o644).map_err(io_err(&pem, "write"))?;
        let bytes =
            serde_json::to_vec(req).map_err(|e| StoreError::Corrupt { path: meta.clone(), detail: e.to_string() })?;
        fsutil::write_replace(&meta, &bytes, 0o644).map_err(io_err(&meta, "write"))
    }

    fn remove_request(&self, certname: &str) -> Result<(), StoreError> {
        // The .json first: it is what makes a request pending (requests() lists .json files,
        // put_request writes it last), so without one there is nothing to remove, and
        // issuance (which calls this for every certificate) pays three system calls
        // (open the directory without following a link, unlinkat, close).
        let names = [Self::file_name(certname, "json")?, Self::file_name(certname, "pem")?];
        let requests = self.p("requests");
        // Through the directory's descriptor: a requests/ that is a link is refused.
        let dir = match fsutil::NoFollowDir::open(&requests) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::Io { path: requests, op: "open", source: e }),
        };
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

    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError> {
        let dir = self.p("requests");
        // Listed without the lock too (clean's look-up, the API): never through a link.
        fsutil::refuse_link(&dir).map_err(io_err(&dir, "use directory"))?;
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
        let dir = self.p("requests");
        fsutil::refuse_link(&dir).map_err(io_err(&dir, "use directory"))?;
        let meta = dir.join(Self::file_name(certname, "json")?);
        let Some(req) = Self::read_json::<PendingRequest>(&meta)? else { return Ok(None) };
        let pem_path = self.p("requests").join(Self::file_name(certname, "pem")?);
        match fs::read(&pem_path) {
            Ok(pem) => Ok(Some((req, pem))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path: pem_path, op: "read", source: e }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuance(serial: &str, certname: &str) -> Issuance {
        Issuance {
            record: CertRecord {
                serial: serial.into(),
                certname: certname.into(),
                state: State::Issued,
                digest: "d".into(),
                not_before: "2030-01-01T00:00:00Z".into(),
                not_after: "2031-01-01T00:00:00Z".into(),
                attributes_expiry: None,
                conductor: None,
                conductor_cert: None,
                revoked_at: None,
                reason: None,
            },
            pem: format!("pem of {serial}"),
            claim: None,
        }
    }

    /// A batch whose apply failed after its log entry was synced is applied before the next
    /// batch or checkpoint under the same lock (found by review: it used to be discarded).
    #[test]
    fn an_entry_whose_apply_failed_is_applied_before_the_next_write_under_the_same_lock() {
        for next in ["issue", "checkpoint"] {
            let d = tempfile::tempdir().unwrap();
            let store = FileStore::new(d.path().join("ca"));
            {
                let lock = store.lock().unwrap();
                // A transient failure for y's certificate file (stands for ENOSPC, EIO).
                std::fs::create_dir_all(store.signed_path("y.example").unwrap()).unwrap();
                let e = store.issue(&lock, &[issuance("aa01", "y.example")]).unwrap_err();
                assert!(matches!(e, StoreError::AfterCommit { .. }), "{e}");
                std::fs::remove_dir(store.signed_path("y.example").unwrap()).unwrap();
                match next {
                    "issue" => store.issue(&lock, &[issuance("bb02", "z.example")]).unwrap(),
                    _ => store.checkpoint(&lock).unwrap(),
                }
            }
            store.checkpoint(&store.lock().unwrap()).unwrap();
            let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
            assert_eq!(
                std::fs::read_to_string(store.signed_path("y.example").unwrap()).unwrap(),
                "pem of aa01",
                "{next}"
            );
            assert_eq!(inv.matches("0xaa01 ").count(), 1, "{next}: {inv}");
        }
    }

    /// A torn last batch (never acknowledged) is dropped, whatever part of it reached the
    /// disk; damage before a later committed batch stops the store instead.
    #[test]
    fn a_torn_last_batch_is_dropped_and_damage_before_a_good_batch_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        {
            let lock = store.lock().unwrap();
            store.issue(&lock, &[issuance("aa01", "a.example"), issuance("aa02", "b.example")]).unwrap();
            store.issue(&lock, &[issuance("aa03", "c.example")]).unwrap();
        }
        let wal = store.wal_path();
        let good = std::fs::read(&wal).unwrap();
        let lines: Vec<&[u8]> = good.split_inclusive(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 1 + 3 + 2, "header, 3 entries, 2 commit lines");
        // The second batch torn: its commit line missing, or a hole of zeros in its entry.
        let first_batch: Vec<u8> = lines[..4].concat();
        for torn in [
            [first_batch.clone(), lines[4].to_vec()].concat(),
            [first_batch.clone(), vec![0u8; lines[4].len()], lines[5].to_vec()].concat(),
        ] {
            std::fs::write(&wal, &torn).unwrap();
            let (_, entries, end) = store.read_wal().unwrap();
            assert_eq!(entries.iter().map(|e| e.record.serial.as_str()).collect::<Vec<_>>(), ["aa01", "aa02"]);
            assert_eq!(end, first_batch.len() as u64);
        }
        // A torn tail holding a stale commit line that does not verify: still just torn.
        let stale = [first_batch.clone(), b"garbage\n".to_vec(), lines[5].to_vec()].concat();
        std::fs::write(&wal, &stale).unwrap();
        assert_eq!(store.read_wal().unwrap().1.len(), 2);
        // A damaged entry in the first batch, the second one whole: the log is damaged.
        let mut damaged = good.clone();
        let at = lines[0].len() + 10;
        damaged[at] ^= 0x20;
        std::fs::write(&wal, &damaged).unwrap();
        assert!(matches!(store.read_wal(), Err(StoreError::Corrupt { .. })));
        std::fs::write(&wal, &good).unwrap();
        assert_eq!(store.read_wal().unwrap().1.len(), 3);
    }
}
