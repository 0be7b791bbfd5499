//! The CA's data directory: the names of its files, where they are, and the checks that it
//! is usable and trusted; a new one is created private.
#![deny(clippy::arithmetic_side_effects)]

use crate::error::Error;
use std::path::{Path, PathBuf};

/// File names inside `DIR/ca/`, after Puppet's cadir.
pub const ROOT_CERT: &str = "root_crt.pem";
pub const ROOT_KEY: &str = "root_key.pem";
pub const CA_CERT: &str = "ca_crt.pem";
pub const CA_KEY: &str = "ca_key.pem";
pub const CA_BUNDLE: &str = "ca_bundle.pem";
/// The root's CRL (the master CA's is `ca_crl.pem`).
pub const ROOT_CRL: &str = "root_crl.pem";
pub const POLICY: &str = "policy.toml";
/// In `DIR/ca/`: written (atomically) when the directory's master opens a shared store
/// (`vouch serve --store URL`, any command given `--store URL`); it names the store's URL
/// (no credentials). The directory's file store is retired from then on: a command that
/// would open it (no `--store`) refuses instead of answering from an empty store.
pub const SHARED_STORE_MARKER: &str = crate::store::RETIRED_MARKER;

/// Credentials `vouch serve` keeps in the data directory (paths relative to it).
pub const SERVER_CERT: &str = "server/server_crt.pem";
pub const SERVER_KEY: &str = "server/server_key.pem";
pub const ADMIN_CERT: &str = "admin/admin_crt.pem";
pub const ADMIN_KEY: &str = "admin/admin_key.pem";
pub const CONDUCTOR_CERT: &str = "conductor/conductor_crt.pem";
pub const CONDUCTOR_KEY: &str = "conductor/conductor_key.pem";

/// Paths of a CA data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    pub dir: PathBuf,
}

impl DataDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DataDir { dir: dir.into() }
    }
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca")
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.ca().join(name)
    }
    pub fn policy(&self) -> PathBuf {
        self.dir.join(POLICY)
    }

    /// Refuses a DIR that exists but is no directory, or that this user may not reach;
    /// a missing DIR is fine (commands that create one do).
    pub fn usable(&self) -> Result<(), Error> {
        let unusable = |detail: String| Error::DataDir { dir: self.dir.clone(), detail };
        match std::fs::metadata(&self.dir) {
            Ok(m) if !m.is_dir() => Err(unusable("it is not a directory".into())),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(unusable(format!(
                "permission denied: user {} may not reach it (a directory on its path is closed to it)",
                crate::files::trust::user_name(crate::files::trust::euid())
            ))),
            Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::NOTDIR) => {
                Err(unusable("a component of its path is not a directory".into()))
            }
            _ => Ok(()),
        }
    }

    /// Requires the CA's `name` file in `ca/` (the master CA's or the root's certificate):
    /// when it is not there, says why: DIR is not a directory, this user may not enter
    /// it (and who owns it), or there is simply no CA yet.
    pub fn require(&self, name: &str) -> Result<(), Error> {
        use std::os::unix::fs::MetadataExt;
        let file = self.file(name);
        let e = match std::fs::metadata(&file) {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        self.usable()?;
        let unusable = |detail: String| Error::DataDir { dir: self.dir.clone(), detail };
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            // Which directory refused: DIR itself, else ca/.
            let closed = [self.dir.clone(), self.ca()]
                .into_iter()
                .find(|d| std::fs::read_dir(d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied))
                .unwrap_or_else(|| self.ca());
            let owner = std::fs::metadata(&closed)
                .map(|m| {
                    format!("owned by {} (mode {:04o})", crate::files::trust::user_name(m.uid()), m.mode() & 0o7777)
                })
                .unwrap_or_else(|_| "not this user's".into());
            return Err(unusable(format!(
                "permission denied: {} is {owner} and vouch runs as {}: run vouch as its owner (sudo -u OWNER vouch …)",
                closed.display(),
                crate::files::trust::user_name(crate::files::trust::euid())
            )));
        }
        if e.kind() == std::io::ErrorKind::NotFound {
            let staged = super::staging::find(&self.dir).into_iter().next().map(|s| s.path);
            return Err(Error::NoCa { dir: self.dir.clone(), staged });
        }
        Err(Error::Io { path: file, op: "read", source: e })
    }

    /// Refuses a data directory that a user other than root or the one running vouch
    /// could change: DIR (and the directory holding it), `ca/` and the master CA's key
    /// (owned by root or this user, not writable by group or others; the key not readable
    /// by them either). The policy is checked where it is loaded ([`crate::Policy::load`]).
    pub fn check(&self) -> Result<(), Error> {
        crate::files::trust::check_trusted(&self.dir)?;
        crate::files::trust::check_trusted(&self.ca())?;
        crate::files::trust::check_private_key(&self.file(CA_KEY))?;
        // The store's own directories: whoever may write signed/ or serials/ plants
        // certificates and records; the store creates them, so a missing one is fine.
        // Never a link either (the store refuses one at every lock too; this also covers
        // what commands read before they lock, such as clean's look-up).
        for sub in ["signed", "requests", "serials", "pending", "tmp"] {
            let p = self.ca().join(sub);
            if std::fs::symlink_metadata(&p).is_ok() {
                crate::files::durable::refuse_link(&p).map_err(|source| Error::Io {
                    path: p.clone(),
                    op: "use directory",
                    source,
                })?;
                crate::files::trust::check_trusted(&p)?;
            }
        }
        Ok(())
    }
}

impl DataDir {
    /// The shared store this directory's master uses ([`SHARED_STORE_MARKER`]), if any. Deny
    /// by default: anything under that name counts (a directory, a link, a FIFO, bytes that
    /// are not UTF-8); only a regular file's first bytes are read, never blocking, and the
    /// store named with its control characters replaced.
    pub fn shared_store(&self) -> Option<String> {
        crate::store::retired_to(&self.ca())
    }

    /// Refuses to open the file store of a directory whose master uses a shared store:
    /// before anything is created or rewritten in it.
    pub fn refuse_retired_file_store(&self) -> Result<(), Error> {
        match self.shared_store() {
            Some(to) => Err(Error::FileStoreRetired { dir: self.dir.clone(), to }),
            None => Ok(()),
        }
    }

    /// Marks the directory's file store retired in favour of the shared store `to`
    /// (idempotent; written atomically).
    pub fn mark_shared_store(&self, to: &str) -> Result<(), Error> {
        if self.shared_store().is_some_and(|t| t == to) {
            return Ok(());
        }
        let path = self.file(SHARED_STORE_MARKER);
        crate::files::durable::write_replace(&path, format!("{to}\n").as_bytes(), 0o644).map_err(|source| Error::Io {
            path,
            op: "write",
            source,
        })
    }
}

/// Creates a data directory (and missing parents) 0700: the one rule for a new DIR,
/// whether `ca init`, `vouch serve` or anything else makes it.
pub fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        op: "create directory",
        source,
    })
}
