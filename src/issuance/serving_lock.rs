//! One process at a time holds a data directory beside its file store's other writers: `vouch
//! serve` for as long as it runs, `vouch migrate` for its copy, and a command opening the
//! directory on a shared store while it marks the directory's file store retired. The holder
//! records what it is in `DIR/serve.lock`, so that a refusal names it.

use crate::error::{Error, ServingHolder};
use std::fs::File;
use std::path::Path;

/// Where the data directory itself cannot be locked (an NFS mount, whose flock on a
/// directory opened read-only may fail): the lock is taken on this file in it instead. The
/// holder's record is written in it either way.
pub const SERVING_LOCK: &str = "serve.lock";

/// The most of a record that is read.
const RECORD_MAX: u64 = 256;

/// The open files holding this process's serving locks.
static HELD: std::sync::Mutex<Vec<File>> = std::sync::Mutex::new(Vec::new());

fn io(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, op, source }
}

/// One `vouch serve` per data directory: a second one, started beside it (another
/// `--server-name`, another port), would issue its own service certificate and revoke the
/// running one's, and two first runs at once would race to make the CA; and no `vouch serve`
/// beside a `vouch migrate` (`as_what`: which of them takes it). The exclusive `flock` is on
/// the data directory itself (no lock file can be removed from under the running server, as
/// `rm DIR/serve.lock` could); where a directory cannot be locked, on `DIR/serve.lock`. It is
/// held until the process ends (the system drops it even when the process is killed); a
/// second process is refused before it changes anything ([`Error::ServeRunning`], naming the
/// holder its record names). Within one process (a library caller preparing twice, under one
/// path or two) the lock is taken once.
pub fn hold_serving_lock(dir: &Path, as_what: ServingHolder) -> Result<(), Error> {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    match take(dir, &held)? {
        Taken::Already => Ok(()),
        Taken::Now(file) => {
            record(dir, as_what);
            held.push(file);
            Ok(())
        }
        Taken::Busy { holder, who } => Err(Error::ServeRunning { dir: dir.to_path_buf(), holder, who }),
    }
}

/// Runs `f` holding `dir`'s serving lock (unless this process holds it already: a `vouch serve`
/// opening its own directory), released after it; `Err` with the holder's description and
/// record when another process holds it. A holder that is itself such a command (it ends once
/// it has marked the directory) is waited for, a while (10 s at most).
pub fn while_holding<T>(
    dir: &Path,
    f: impl FnOnce() -> Result<T, Error>,
) -> Result<Result<T, Error>, (String, ServingHolder)> {
    let mut tries = 0u32;
    let file = loop {
        let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        match take(dir, &held) {
            Ok(Taken::Already) => {
                drop(held);
                return Ok(f());
            }
            Ok(Taken::Now(file)) => break file,
            // Looked at again a few times whatever the record says (a holder that has just
            // taken the lock may not have written its record yet).
            Ok(Taken::Busy { holder, who })
                if (who != ServingHolder::SharedStoreOpen && tries >= 5) || tries >= 100 =>
            {
                return Err((holder, who))
            }
            Ok(Taken::Busy { .. }) => {}
            Err(e) => return Ok(Err(e)),
        }
        drop(held);
        tries = tries.saturating_add(1);
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    record(dir, ServingHolder::SharedStoreOpen);
    let done = f();
    drop(file);
    Ok(done)
}

/// What [`take`] found.
enum Taken {
    /// This process holds it already.
    Already,
    /// Taken now, on this open file.
    Now(File),
    /// Another process holds it: its description (`/proc/locks`) and its record.
    Busy { holder: String, who: ServingHolder },
}

/// The serving lock of `dir`, without waiting (`held`: this process's).
fn take(dir: &Path, held: &[File]) -> Result<Taken, Error> {
    use rustix::fs::{flock, FlockOperation};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut path = dir.to_path_buf();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io(&path, "open"))?;
    for fallback in [false, true] {
        if fallback {
            path = dir.join(SERVING_LOCK);
            file = open_record(&path, true).map_err(io(&path, "open"))?;
        }
        let meta = file.metadata().map_err(io(&path, "read"))?;
        // The same directory under another path (a link to it, relative and absolute),
        // locked already by this process through another open file (a second flock on it
        // would be refused as if another process held it). The new descriptor is closed: an
        // flock belongs to the open file it was taken on, which stays open.
        let same = |m: &std::fs::Metadata| m.dev() == meta.dev() && m.ino() == meta.ino();
        if held.iter().any(|f| f.metadata().is_ok_and(|m| same(&m))) {
            return Ok(Taken::Already);
        }
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Taken::Now(file)),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Ok(Taken::Busy { holder: crate::store::holder_of_file(&file), who: read_record(dir) })
            }
            Err(e) if fallback => return Err(io(&path, "lock")(e.into())),
            Err(_) => {}
        }
    }
    Err(io(dir, "lock")(std::io::Error::other("no lock could be taken")))
}

/// `DIR/serve.lock`, opened without following a link or blocking (a regular file only);
/// created 0600 when `create`.
fn open_record(path: &Path, create: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The word each holder records.
fn word(who: ServingHolder) -> &'static str {
    match who {
        ServingHolder::Serve => "serve",
        ServingHolder::Migrate => "migrate",
        ServingHolder::SharedStoreOpen => "shared-store-open",
        ServingHolder::Unknown => "unknown",
    }
}

/// Records in `DIR/serve.lock` what holds the lock (in place: where that file is the lock, it
/// stays the same file). A record that cannot be written leaves the lock as it is: a refused
/// process then says the generic words.
fn record(dir: &Path, who: ServingHolder) {
    use std::io::Write;
    let path = dir.join(SERVING_LOCK);
    let written = open_record(&path, true).and_then(|mut f| {
        f.set_len(0)?;
        f.write_all(format!("vouch {} pid {}\n", word(who), std::process::id()).as_bytes())
    });
    if let Err(e) = written {
        tracing::warn!(event = "serving-lock-not-recorded", path = %path.display(), detail = %e);
    }
}

/// What the record in `DIR/serve.lock` names; [`ServingHolder::Unknown`] for anything else
/// (missing, unreadable, from an older vouch).
fn read_record(dir: &Path) -> ServingHolder {
    use std::io::Read;
    let mut text = String::new();
    let read = open_record(&dir.join(SERVING_LOCK), false).and_then(|f| f.take(RECORD_MAX).read_to_string(&mut text));
    let named = text.strip_prefix("vouch ").and_then(|t| t.split_whitespace().next());
    match (read, named) {
        (Ok(_), Some("serve")) => ServingHolder::Serve,
        (Ok(_), Some("migrate")) => ServingHolder::Migrate,
        (Ok(_), Some("shared-store-open")) => ServingHolder::SharedStoreOpen,
        _ => ServingHolder::Unknown,
    }
}
