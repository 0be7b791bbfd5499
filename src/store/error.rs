//! A store failure ([`StoreError`]), and what it is as a command error.

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
    /// The store cannot be reached (the LDAP server is down or refuses us): nothing was
    /// decided or written; the same request later may succeed.
    Unavailable {
        detail: String,
    },
    /// A change written to the primary that a replica did not show in time (it stands on
    /// the primary; the same command again confirms it).
    Unconfirmed {
        detail: String,
    },
    /// Someone else changed the entry since it was read (a compare-and-swap failed): nothing
    /// was written by this call.
    Conflict {
        what: String,
    },
    /// A file journal that a master using a shared store has retired: whoever still claims
    /// in it (a hook run without --store) would not share one-time use with the fleet.
    JournalMoved {
        path: PathBuf,
        to: String,
    },
    /// The data directory's file store, retired by its master's move to a shared store
    /// (found under the store's lock: `vouch migrate` marked it while this waited).
    FileStoreRetired {
        dir: PathBuf,
        to: String,
    },
    /// The fleet's lock on revocations of administrator certificates ([`super::admin_lock`])
    /// is another master's (`holder`, until `until`) past the bounded wait, or (`lost`) this
    /// holder's time passed and another master took it over before the revocation was
    /// written: nothing was written.
    AdminRevocationBusy {
        holder: String,
        until: String,
        lost: bool,
    },
    /// This holder's confirm of that lock was answered `took_ms` after it was sent, more than
    /// half the lock's time: nothing was written (a taker's lease could end before the write).
    AdminLockLate {
        took_ms: u64,
    },
    /// The LDAP server answered with an error vouch does not expect (schema missing, access
    /// denied, a damaged entry).
    Ldap {
        op: &'static str,
        dn: String,
        detail: String,
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
            StoreError::Unavailable { detail } => write!(f, "the store is unavailable: {detail}"),
            StoreError::Unconfirmed { detail } => write!(f, "not confirmed on the replicas: {detail}"),
            StoreError::Conflict { what } => write!(f, "{what}; nothing was written"),
            StoreError::Ldap { op, dn, detail } => write!(f, "LDAP {op} of {dn:?} failed: {detail}"),
            StoreError::AdminRevocationBusy { holder, until, lost } => {
                let busy = crate::error::Busy::of_admin_lock(holder, until, *lost);
                write!(f, "{busy}")
            }
            StoreError::AdminLockLate { took_ms } => {
                write!(f, "{}", crate::error::Busy::AdminLockLate { took_ms: *took_ms })
            }
            StoreError::FileStoreRetired { dir, to } => {
                write!(f, "the file store of {} is retired: its master moved to the shared store {to}", dir.display())
            }
            StoreError::JournalMoved { path, to } => write!(
                f,
                "the replay journal {} is retired: the fleet's one-time use is in the shared store {to} \
                 (give --store or VOUCH_STORE, as the masters do)",
                path.display()
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
            StoreError::Unavailable { detail } => crate::error::Error::StoreUnavailable { detail },
            StoreError::Unconfirmed { detail } => crate::error::Error::StoreUnconfirmed { detail },
            // The file store's inventory its user may not read (its owner or mode).
            StoreError::Io { path, op, source }
                if source.kind() == io::ErrorKind::PermissionDenied
                    && path.file_name().is_some_and(|n| n == "inventory.txt") =>
            {
                crate::error::Error::InventoryUnreadable { path, op, source }
            }
            e @ StoreError::JournalMoved { .. } => crate::error::Error::StoreUrl { detail: e.to_string() },
            StoreError::Conflict { what } => crate::error::Error::StoreConflict { what },
            StoreError::FileStoreRetired { dir, to } => crate::error::Error::FileStoreRetired { dir, to },
            StoreError::AdminRevocationBusy { holder, until, lost } => {
                crate::error::Error::Busy(crate::error::Busy::of_admin_lock(&holder, &until, lost))
            }
            StoreError::AdminLockLate { took_ms } => {
                crate::error::Error::Busy(crate::error::Busy::AdminLockLate { took_ms })
            }
            e @ StoreError::Ldap { .. } => crate::error::Error::StoreLdap { detail: e.to_string() },
            e => crate::error::Error::Store { detail: e.to_string() },
        }
    }
}
