//! Taking `DIR/ca/.lock`, and for the command line's commands a word when that means waiting:
//! after [`NOTICE_AFTER`] of waiting for another process, one line on stderr names the holder
//! (as far as the system tells: `/proc/locks` gives the pid of a lock's holder on this host,
//! `/proc/PID/cmdline` its command line), then the wait goes on. `vouch serve` never asks for
//! the line: its requests wait their turn quietly ([`crate::store::Store::announce_lock_waits`]).
#![deny(clippy::arithmetic_side_effects)]

use rustix::fs::{flock, FlockOperation};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

/// How long a command waits for the store's lock before it says so.
pub(super) const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// The most of a command line the notice shows (characters).
const COMMAND_MAX: usize = 200;

/// The most of `/proc/locks` read (a host with very many locks: the holder may be missed).
const PROC_LOCKS_MAX: u64 = 4 << 20;

/// The most open files of the named holder looked at to confirm it holds the lock.
const HOLDER_FDS_MAX: usize = 1 << 16;

/// Takes the exclusive `flock` on `file` (the store's `.lock` at `path`), waiting as long as
/// it takes. With `announce`, a wait longer than [`NOTICE_AFTER`] is told on stderr, once:
/// the lock is first asked for without waiting; only if another process holds it does a
/// thread wait on a timer (never polling) while this one waits in `flock`.
pub(super) fn lock_exclusive(file: &File, path: &Path, announce: bool) -> io::Result<()> {
    if !announce {
        return flock(file, FlockOperation::LockExclusive).map_err(io::Error::from);
    }
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::WOULDBLOCK) => {}
        Err(e) => return Err(e.into()),
    }
    let id = {
        use std::os::unix::fs::MetadataExt;
        file.metadata().ok().map(|m| (m.dev(), m.ino()))
    };
    let shown = path.to_path_buf();
    let (acquired, wait) = std::sync::mpsc::channel::<()>();
    // No thread (none can be made): the wait goes on without its notice.
    let notice = std::thread::Builder::new().name("vouch-lock-wait".into()).spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(NOTICE_AFTER) {
            let holder = id.map_or_else(|| Holder::Unknown.describe(), |(dev, ino)| holder_of(dev, ino).describe());
            // Never eprintln!: it panics when stderr cannot be written.
            let _ = writeln!(io::stderr(), "vouch: waiting for the store's lock ({holder}) on {}", shown.display());
        }
    });
    let locked = flock(file, FlockOperation::LockExclusive).map_err(io::Error::from);
    drop(acquired);
    if let Ok(thread) = notice {
        let _ = thread.join();
    }
    locked
}

/// Who holds the `flock` on the file `file` is open on, in words ("held by another process:
/// pid N (vouch serve …)"), as far as this host tells.
pub(crate) fn holder_of_file(file: &File) -> String {
    use std::os::unix::fs::MetadataExt;
    file.metadata().ok().map_or_else(|| Holder::Unknown.describe(), |m| holder_of(m.dev(), m.ino()).describe())
}

/// Who holds a lock, as far as this host tells.
#[derive(Debug, PartialEq, Eq)]
enum Holder {
    /// `/proc/locks` names no holder this process can see (another host sharing the
    /// directory, another PID namespace, no `/proc`).
    Unknown,
    /// A process of this host, and its command line if readable.
    Process { pid: u32, command: Option<Vec<String>> },
}

impl Holder {
    fn describe(&self) -> String {
        match self {
            Holder::Unknown => "held by another process".into(),
            Holder::Process { pid, command: None } => format!("held by another process: pid {pid}"),
            Holder::Process { pid, command: Some(args) } => {
                let vouch = args
                    .first()
                    .and_then(|a| Path::new(a).file_name())
                    .is_some_and(|n| n.to_string_lossy().starts_with("vouch"));
                let mut shown: String = args
                    .join(" ")
                    .chars()
                    .map(|c| if c.is_control() || crate::encoding::text::reorders_or_hides(c) { '?' } else { c })
                    .take(COMMAND_MAX.saturating_add(1))
                    .collect();
                if shown.chars().count() > COMMAND_MAX {
                    shown = shown.chars().take(COMMAND_MAX).chain("…".chars()).collect();
                }
                let who = if vouch { "another vouch process" } else { "another process" };
                format!("held by {who}: pid {pid}, `{shown}`")
            }
        }
    }
}

/// The holder of the `flock` on the file `(dev, ino)`, from `/proc/locks` and `/proc/PID/cmdline`.
fn holder_of(dev: u64, ino: u64) -> Holder {
    let mut locks = String::new();
    let read = File::open("/proc/locks").and_then(|f| f.take(PROC_LOCKS_MAX).read_to_string(&mut locks));
    if read.is_err() {
        return Holder::Unknown;
    }
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let Some(pid) = holder_in(&locks, major, minor, ino, std::process::id()) else {
        return Holder::Unknown;
    };
    // The pid that took the lock, which is not always a process that holds it: an flock
    // belongs to the open file, which the taker may have handed to a child before it exited
    // (`exec 9<>FILE; flock 9`), its pid free for any other process since.
    if holds(pid, major, minor, ino) == Some(false) {
        return Holder::Unknown;
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok().filter(|c| !c.is_empty()).map(|c| {
        c.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
    });
    Holder::Process { pid, command }
}

/// The pid holding a granted `flock` on `(major:minor, ino)` in `/proc/locks`' text, other
/// than `own` (a waiter's request shows as a `->` line, never granted). Lines look like
/// `1: FLOCK  ADVISORY  WRITE 2793 fe:00:5309295 0 EOF` (device numbers in hex).
fn holder_in(proc_locks: &str, major: u32, minor: u32, ino: u64, own: u32) -> Option<u32> {
    proc_locks.lines().find_map(|line| flock_on(line, major, minor, ino).filter(|pid| *pid != 0 && *pid != own))
}

/// The pid of a granted `flock` on `(major:minor, ino)`, if `line` (of `/proc/locks`, or a
/// `lock:` line of `/proc/PID/fdinfo/FD` without its prefix) is one.
fn flock_on(line: &str, major: u32, minor: u32, ino: u64) -> Option<u32> {
    let mut f = line.split_whitespace().skip(1);
    if f.next()? != "FLOCK" {
        return None;
    }
    let (_, _, pid, id) = (f.next()?, f.next()?, f.next()?, f.next()?);
    let mut parts = id.split(':');
    let (ma, mi, i) = (parts.next()?, parts.next()?, parts.next()?);
    let same = u32::from_str_radix(ma, 16).ok()? == major
        && u32::from_str_radix(mi, 16).ok()? == minor
        && i.parse::<u64>().ok()? == ino;
    let pid = pid.parse::<u32>().ok()?;
    same.then_some(pid)
}

/// Whether process `pid` has an open file that holds the `flock` on `(major:minor, ino)`, as
/// the `lock:` lines of its `/proc/PID/fdinfo/*` say: `Some(false)` when it has none (or no
/// longer exists), `None` when that cannot be told (another user's process).
fn holds(pid: u32, major: u32, minor: u32, ino: u64) -> Option<bool> {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fdinfo")) {
        Ok(fds) => fds,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let mut untold = false;
    for fd in fds.take(HOLDER_FDS_MAX) {
        let mut info = String::new();
        let read = fd.and_then(|fd| File::open(fd.path())).and_then(|f| f.take(1 << 16).read_to_string(&mut info));
        match read {
            Ok(_) => {}
            // Closed meanwhile: not the holder's.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => {
                untold = true;
                continue;
            }
        }
        if info.lines().filter_map(|l| l.strip_prefix("lock:")).any(|l| flock_on(l, major, minor, ino).is_some()) {
            return Some(true);
        }
    }
    if untold {
        None
    } else {
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::{holder_in, Holder};

    const LOCKS: &str = "\
1: POSIX  ADVISORY  WRITE 700 fe:00:42 0 EOF
2: FLOCK  ADVISORY  WRITE 4242 fe:00:5309295 0 EOF
2: -> FLOCK  ADVISORY  WRITE 99 fe:00:5309295 0 EOF
3: FLOCK  ADVISORY  READ 31 103:02:5309295 0 EOF
";

    /// The granted flock on the file is found (not a POSIX lock, not a waiter's `->` line,
    /// not the same inode on another device); none when the only one is this process's.
    #[test]
    fn the_holder_is_the_granted_flock_on_the_same_file() {
        assert_eq!(holder_in(LOCKS, 0xfe, 0, 5309295, 99), Some(4242));
        assert_eq!(holder_in(LOCKS, 0x103, 2, 5309295, 99), Some(31));
        assert_eq!(holder_in(LOCKS, 0xfe, 0, 42, 99), None, "a POSIX lock is not the store's");
        assert_eq!(holder_in(LOCKS, 0xfe, 0, 5309295, 4242), None, "this process's own");
        assert_eq!(holder_in("garbage\n\n1:\n", 0xfe, 0, 5309295, 99), None);
    }

    /// A pid that took the lock is confirmed by its open files: this process, holding an
    /// flock on a file, holds it; on another file, or a process that does not exist, not.
    #[test]
    fn the_holder_is_confirmed_by_its_open_files() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (held, other) = (dir.path().join("held"), dir.path().join("other"));
        let file = std::fs::File::create(&held).unwrap();
        std::fs::File::create(&other).unwrap();
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
        let id = |p: &std::path::Path| {
            let m = std::fs::metadata(p).unwrap();
            (rustix::fs::major(m.dev()), rustix::fs::minor(m.dev()), m.ino())
        };
        let ((ma, mi, ino), (oma, omi, oino)) = (id(&held), id(&other));
        let me = std::process::id();
        assert_eq!(super::holds(me, ma, mi, ino), Some(true));
        assert_eq!(super::holds(me, oma, omi, oino), Some(false));
        // Above the largest pid Linux gives (2^22).
        assert_eq!(super::holds(u32::MAX, ma, mi, ino), Some(false));
    }

    /// A vouch holder is named as one, with its command line (control characters shown as
    /// `?`, cut after 200 characters); any other process as another process.
    #[test]
    fn a_holder_is_described_by_its_command_line() {
        let args = |a: &[&str]| Some(a.iter().map(|s| s.to_string()).collect());
        let serve = Holder::Process { pid: 7, command: args(&["/usr/bin/vouch", "--dir", "/var/lib/vouch", "serve"]) };
        assert_eq!(
            serve.describe(),
            "held by another vouch process: pid 7, `/usr/bin/vouch --dir /var/lib/vouch serve`"
        );
        let enc = Holder::Process { pid: 8, command: args(&["vouch-enc", "web\n01"]) };
        assert_eq!(enc.describe(), "held by another vouch process: pid 8, `vouch-enc web?01`");
        let other = Holder::Process { pid: 9, command: args(&["flock", "/x/ca/.lock", "sleep", "60"]) };
        assert_eq!(other.describe(), "held by another process: pid 9, `flock /x/ca/.lock sleep 60`");
        let long = "a".repeat(300);
        let cut = Holder::Process { pid: 10, command: args(&["vouch", &long]) }.describe();
        assert!(cut.ends_with(&format!("{}…`", "a".repeat(194))), "{cut}");
        assert_eq!(Holder::Process { pid: 11, command: None }.describe(), "held by another process: pid 11");
        assert_eq!(Holder::Unknown.describe(), "held by another process");
    }

    /// Review (cli-frictions): the characters that reorder or hide text on a terminal that
    /// renders bidirectional text (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates, zero-width
    /// ones) are shown as `?` too, as the control characters are: a command line, which its
    /// process sets as it likes, cannot make the rest of the line read otherwise.
    #[test]
    fn a_command_line_cannot_reorder_or_hide_the_notice() {
        let args = |a: &[&str]| Some(a.iter().map(|s| s.to_string()).collect());
        for c in ['\u{202e}', '\u{2066}', '\u{2069}', '\u{200f}', '\u{200b}', '\u{feff}', '\u{61c}', '\u{9b}'] {
            let arg = format!("x{c}y");
            let shown = Holder::Process { pid: 12, command: args(&["sleep", &arg]) }.describe();
            assert_eq!(shown, "held by another process: pid 12, `sleep x?y`", "{:?}", c);
        }
        let kept = Holder::Process { pid: 13, command: args(&["echo", "café", "日本"]) }.describe();
        assert_eq!(kept, "held by another process: pid 13, `echo café 日本`");
    }
}
