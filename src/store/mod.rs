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

pub mod audit;
mod file;
pub mod group;
pub mod journal;

pub use file::{FileStore, WAL};

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::path::PathBuf;

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
        problem: crate::decision::CertnameProblem,
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

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            StoreError::AfterCommit { source } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// A store failure as a command error: a certname that fails the rules stays one.
impl From<StoreError> for crate::error::Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::CertnameInvalid { certname, problem } => {
                crate::error::Error::CertnameInvalid { certname, problem }
            }
            e => crate::error::Error::Store { detail: e.to_string() },
        }
    }
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
/// since the journal's entry is written without fsync (see [`crate::store::journal::Journal::sync`]).
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

/// One line of the inventory (Puppet's `inventory.txt`): a certificate ever issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryEntry {
    /// Lowercase hex, without Puppet's `0x`.
    pub serial: String,
    pub not_before: String,
    pub not_after: String,
    pub certname: String,
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
    /// All issued certificates, oldest first.
    fn inventory(&self) -> Result<Vec<InventoryEntry>, StoreError>;
    /// Keeps a refused request for the operator to see (under the lock: its CSR and its
    /// reasons are two files, written by one writer at a time).
    fn put_request(&self, lock: &WriteLock, req: &PendingRequest, csr_pem: &[u8]) -> Result<(), StoreError>;
    fn remove_request(&self, certname: &str) -> Result<(), StoreError>;
    fn requests(&self) -> Result<Vec<PendingRequest>, StoreError>;
    /// One pending request with its CSR (PEM), if there is one.
    fn request(&self, certname: &str) -> Result<Option<(PendingRequest, Vec<u8>)>, StoreError>;
}
