//! Before anything is made: the data directory is checked (owned, private); one `vouch serve`
//! holds it at a time ([`crate::issuance::serving_lock`]).

use crate::error::Error;
use crate::issuance::bootstrap::{self, DataDir, ADMIN_KEY, CONDUCTOR_KEY, SERVER_KEY};

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
