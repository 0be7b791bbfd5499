//! Before anything is made: the data directory is checked (owned, private), and one
//! `vouch serve` holds it at a time.

use super::files::io;
use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir, ADMIN_KEY, CONDUCTOR_KEY, SERVER_KEY};
use std::path::Path;

/// Where the data directory itself cannot be locked (an NFS mount, whose flock on a
/// directory opened read-only may fail): the lock is taken on this file in it instead.
pub const SERVING_LOCK: &str = "serve.lock";

/// One `vouch serve` per data directory: a second one, started beside it (another
/// `--server-name`, another port), would issue its own service certificate and revoke the
/// running one's, and two first runs at once would race to make the CA. The exclusive
/// `flock` is on the data directory itself (no file of its own: nothing is created, and no
/// lock file can be removed from under the running server, as `rm DIR/serve.lock` could);
/// where a directory cannot be locked, on `DIR/serve.lock`. It is held until the process
/// ends (the system drops it even when the process is killed); a second process is
/// refused before it changes anything. Within one process (a library caller preparing
/// twice, under one path or two) the lock is taken once.
pub fn hold_serving_lock(dir: &Path) -> Result<(), Error> {
    use rustix::fs::{flock, FlockOperation};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let mut path = dir.to_path_buf();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io(&path, "open"))?;
    for fallback in [false, true] {
        if fallback {
            path = dir.join(SERVING_LOCK);
            file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
                .open(&path)
                .map_err(io(&path, "open"))?;
            if !file.metadata().map_err(io(&path, "read"))?.is_file() {
                return Err(io(&path, "open")(std::io::Error::other("not a regular file")));
            }
        }
        let meta = file.metadata().map_err(io(&path, "read"))?;
        // The same directory under another path (a link to it, relative and absolute),
        // locked already by this process through another open file (a second flock on it
        // would be refused as if another process held it). The new descriptor is closed: an
        // flock belongs to the open file it was taken on, which stays open.
        let same = |m: &std::fs::Metadata| m.dev() == meta.dev() && m.ino() == meta.ino();
        if held.iter().any(|f| f.metadata().is_ok_and(|m| same(&m))) {
            return Ok(());
        }
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                held.push(file);
                return Ok(());
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(Error::ServeRunning { dir: dir.to_path_buf(), holder: crate::store::holder_of_file(&file) })
            }
            Err(e) if fallback => return Err(io(&path, "lock")(e.into())),
            Err(_) => {}
        }
    }
    Err(io(dir, "lock")(std::io::Error::other("no lock could be taken")))
}

/// A new data directory is private; an existing one (and ca/, the policy, every key vouch
/// keeps there) must be owned by root or this user and not writable by group or others:
/// the one rule of `crate::files::trust::check_trusted`, as for every other command.
pub(super) fn check_data_dir(dir: &DataDir) -> Result<(), Error> {
    dir.usable()?;
    if !dir.dir.exists() {
        bootstrap::create_private_dir(&dir.dir)?;
    }
    crate::files::trust::check_trusted(&dir.dir)?;
    // A directory this user may not read (root's 0700 DIR, run as nobody) would look empty,
    // so a first run; say whose it is instead, as every other command does.
    for d in [dir.dir.clone(), dir.ca()] {
        if std::fs::read_dir(&d).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) {
            return dir.require(bootstrap::CA_CERT);
        }
    }
    if dir.ca().exists() {
        crate::files::trust::check_trusted(&dir.ca())?;
    }
    for key in [SERVER_KEY, ADMIN_KEY, CONDUCTOR_KEY] {
        let key = dir.dir.join(key);
        if key.exists() {
            crate::files::trust::check_private_key(&key)?;
        }
    }
    Ok(())
}
