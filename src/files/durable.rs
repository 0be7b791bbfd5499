//! Crash-safe file writes: atomic (temporary file, then link or rename), synced
//! (file and directory), never through a symbolic link.
#![deny(clippy::arithmetic_side_effects)]
#![deny(unsafe_code)]

use rustix::fs::{OFlags, RenameFlags, CWD};
use rustix::io::Errno;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// `flags` for [`OpenOptionsExt::custom_flags`] (which takes the C `int`).
pub fn custom_flags(flags: OFlags) -> i32 {
    // Open flags are small positive constants (below 2^31): the cast keeps every bit.
    flags.bits() as i32
}

/// A unique temporary name beside `path`.
pub fn temp_beside(path: &Path) -> PathBuf {
    temp_in(parent(path), path)
}

/// A unique temporary name in `dir` (same filesystem as `path`) for writing `path`.
/// Unique, not secret: process id, clock and a counter (files are created with
/// O_EXCL, so a collision is an error, never a clobber). No CSPRNG here: the
/// first use of aws-lc's RNG costs ~100 ms of entropy collection, which the
/// autosign hook must not pay.
pub fn temp_in(dir: &Path, path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = *PID.get_or_init(std::process::id);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dir.join(format!(".{name}.tmp-{pid}-{nanos:x}-{n}"))
}

/// Creates `dir` and its missing parents 0755 whatever the umask allows (a umask of 002,
/// common for ordinary users, would make them group-writable, which the trust rule then
/// refuses): vouch's own directories are writable by their owner only.
pub fn create_dirs(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)
}

/// [`create_dirs`], each directory it creates private (0700).
pub fn create_private_dirs(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// [`create_dirs`] for one directory whose parent exists.
fn create_dir_0755(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().mode(0o755).create(dir)
}

/// Runs `op`, which writes `path`; if that fails because `path`'s directory does not
/// exist, creates it (durably: its parent is fsynced) and runs `op` again. Cheaper than
/// creating the directory every time.
pub fn in_dir<T>(path: &Path, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    match op() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = parent(path);
            create_dirs(dir)?;
            if let Some(up) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(up)?;
            }
            op()
        }
        r => r,
    }
}

/// fsyncs a directory so that a rename or link in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn write_temp(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    write_temp_sync(tmp_dir, path, bytes, mode, true)
}

fn write_temp_sync(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32, sync: bool) -> io::Result<PathBuf> {
    write_temp_with(tmp_dir, path, bytes, mode, sync, None)
}

/// A temporary file for `path` in `tmp_dir` holding `bytes`, dated `modified` if given.
fn write_temp_with(
    tmp_dir: &Path,
    path: &Path,
    bytes: &[u8],
    mode: u32,
    sync: bool,
    modified: Option<std::time::SystemTime>,
) -> io::Result<PathBuf> {
    let tmp = temp_in(tmp_dir, path);
    let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
    let res = f.write_all(bytes).and_then(|_| modified.map_or(Ok(()), |t| f.set_modified(t))).and_then(|_| {
        if sync {
            f.sync_all()
        } else {
            Ok(())
        }
    });
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Writes a new file atomically: it appears whole or not at all, and an
/// existing file is never replaced (`AlreadyExists`).
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_new_in(parent(path), path, bytes, mode)
}

/// [`write_new`] with the temporary file in `tmp_dir` (same filesystem).
pub fn write_new_in(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = write_temp(tmp_dir, path, bytes, mode)?;
    let res = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    res?;
    sync_dir(parent(path))
}

/// Replaces a file atomically (temp file, fsync, rename, fsync directory).
pub fn write_replace(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_replace_in(parent(path), path, bytes, mode)
}

/// [`write_replace`] with the temporary file in `tmp_dir` (same filesystem).
pub fn write_replace_in(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = write_temp(tmp_dir, path, bytes, mode)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(parent(path))
}

/// [`write_replace`] whose file appears already dated `modified` (when given): the date is
/// set on the temporary file before the rename, so no reader ever sees the new content with
/// another date (a CRL's `Last-Modified` answers `If-Modified-Since`).
pub fn write_replace_dated(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    modified: Option<std::time::SystemTime>,
) -> io::Result<()> {
    let tmp = write_temp_with(parent(path), path, bytes, mode, true, modified)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(parent(path))
}

/// [`write_replace_in`] without fsync: atomic against a killed process (the file
/// is whole or absent), not against power loss. For files a write-ahead log can
/// rebuild: the store's [`crate::store`] log is synced instead, once per batch.
pub fn write_replace_unsynced_in(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = write_temp_sync(tmp_dir, path, bytes, mode, false)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// [`write_new`] without fsync (see [`write_replace_unsynced_in`]). The file is made with no
/// name at all (O_TMPFILE in `path`'s directory), written, then linked as `path`: one
/// directory entry added, none removed, no temporary name for a killed process to leave.
/// Where the filesystem cannot (no O_TMPFILE, no /proc), a temporary file and link(2).
pub fn write_new_unsynced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_new_unsynced_in(parent(path), path, bytes, mode)
}

/// [`write_new_unsynced`] whose fallback's temporary file is in `tmp_dir` (same filesystem).
pub fn write_new_unsynced_in(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    if let Some(written) = write_new_unnamed(path, bytes, mode) {
        return written;
    }
    let tmp = write_temp_sync(tmp_dir, path, bytes, mode, false)?;
    let res = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    res
}

/// [`write_new_unsynced`] through O_TMPFILE and /proc/self/fd; `None` where the kernel, the
/// filesystem or a missing /proc cannot (nothing was created then).
fn write_new_unnamed(path: &Path, bytes: &[u8], mode: u32) -> Option<io::Result<()>> {
    use std::os::fd::AsRawFd;
    static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return None;
    }
    let mode = rustix::fs::Mode::from_raw_mode(mode);
    let fd = match rustix::fs::open(parent(path), OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC, mode) {
        Ok(fd) => fd,
        // No O_TMPFILE here (an old kernel takes it for O_DIRECTORY: EISDIR).
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => return None,
        Err(e) => return Some(Err(e.into())),
    };
    let mut f = File::from(fd);
    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    Some(f.write_all(bytes).and_then(|()| {
        rustix::fs::linkat(CWD, proc_path.as_str(), CWD, path, rustix::fs::AtFlags::SYMLINK_FOLLOW)
            .map_err(io::Error::from)
    }))
}

/// Writes `bytes` as the file at `path`: a new file as [`write_new_unsynced`], an existing
/// one replaced as [`write_replace_unsynced_in`] (temporary file in `tmp_dir`).
pub fn write_unsynced_in(tmp_dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    match write_new_unsynced_in(tmp_dir, path, bytes, mode) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => write_replace_unsynced_in(tmp_dir, path, bytes, mode),
        r => r,
    }
}

/// Overwrites the file at `path` in place (written from its start; no temporary file, no
/// rename, no inode freed) when the new bytes are at least as long as the old, or writes it
/// as [`write_new_unsynced`] if there is none. Neither synced nor atomic: a reader at the
/// same moment may see a mix of old and new bytes. Only for files whose readers take what
/// does not parse as the most restrictive answer (the replay journal's entries). Shorter
/// new bytes replace the file whole (temporary file, rename): cut to length after the
/// write, a kill between the two would leave the old tail behind for good.
pub fn overwrite_unsynced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    for _ in 0..2 {
        // Non-blocking: a FIFO planted there must not hang the writer.
        let flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let opened = OpenOptions::new().write(true).custom_flags(custom_flags(flags)).open(path);
        match opened {
            Ok(f) => {
                let m = f.metadata()?;
                if m.is_file() && m.len() <= bytes.len() as u64 {
                    return f.write_all_at(bytes, 0);
                }
                // Shorter, or not a regular file (a link, a FIFO, a directory...): replaced
                // whole, never written through.
                return write_replace_unsynced_in(parent(path), path, bytes, mode);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match write_new_unsynced(path, bytes, mode) {
                // Created meanwhile by someone else: overwritten on the second round.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                r => return r,
            },
            // A link (O_NOFOLLOW) or anything else that does not open: replaced whole.
            Err(_) => return write_replace_unsynced_in(parent(path), path, bytes, mode),
        }
    }
    Err(io::Error::other(format!("{} kept changing while it was written", path.display())))
}

/// Opens `path` with `opts` and `flags`, never waiting on a FIFO or a device planted there:
/// the open is non-blocking (a FIFO opens at once, or fails), then anything but a regular
/// file is refused. A regular file under a lease (an NFS delegation, a Samba oplock) answers
/// a non-blocking open with EAGAIN: that one is opened again blocking, which waits for the
/// lease as a plain open does (FIFOs never answer EAGAIN).
fn open_checked(opts: &OpenOptions, path: &Path, flags: OFlags) -> io::Result<File> {
    let mut nonblocking = opts.clone();
    nonblocking.custom_flags(custom_flags(flags | OFlags::NONBLOCK));
    let f = match nonblocking.open(path) {
        Err(e) if Errno::from_io_error(&e) == Some(Errno::AGAIN) => {
            let mut blocking = opts.clone();
            blocking.custom_flags(custom_flags(flags));
            blocking.open(path)
        }
        r => r,
    }
    .map_err(|e| link_error(path, e))?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file (a FIFO, a device or a directory is never used)"));
    }
    Ok(f)
}

/// Opens the regular file `path` for reading, never through a symbolic link and never
/// waiting on a FIFO or a device planted there ([`open_checked`]).
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_checked(OpenOptions::new().read(true), path, OFlags::NOFOLLOW | OFlags::CLOEXEC)
}

/// Reads the regular file `path` whole, following a symbolic link (for the files an
/// operator may link: the root certificate, the CA bundle), never waiting on a FIFO or a
/// device ([`open_checked`]).
pub fn read_regular_followed(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_checked(OpenOptions::new().read(true), path, OFlags::CLOEXEC)?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// [`read_regular_followed`], refusing a file larger than `limit` bytes (`InvalidData`)
/// without reading more than one byte past it.
pub fn read_regular_followed_at_most(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let f = open_checked(OpenOptions::new().read(true), path, OFlags::CLOEXEC)?;
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {limit} bytes")));
    }
    Ok(buf)
}

/// Reads the regular file `path` whole ([`open_regular`]).
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_regular(path)?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(buf)
}

/// Flushes every dirty page and inode of the filesystem holding the directory `path`
/// (syncfs(2)).
pub fn sync_filesystem(path: &Path) -> io::Result<()> {
    Ok(rustix::fs::syncfs(&open_dir(path)?)?)
}

/// Opens the directory `path` (a link there is followed), never waiting on a FIFO: one
/// there fails at once (O_DIRECTORY).
pub fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(custom_flags(OFlags::DIRECTORY | OFlags::CLOEXEC)).open(path)
}

/// Opens `path` with `opts`, never through a symbolic link (O_NOFOLLOW): for every file
/// vouch writes in place (appends, truncates, the lock file). A link there is an error
/// that names it. (Whole-file writes need no such care: they create a temporary file
/// with O_EXCL and rename or link it over the path, which replaces a link, never follows it.)
pub fn open_nofollow(opts: &OpenOptions, path: &Path) -> io::Result<File> {
    // Regular files only: a FIFO or a device planted at one of these paths is refused at
    // once, never waited on (flock does not look at the open's flags).
    open_checked(opts, path, OFlags::NOFOLLOW | OFlags::CLOEXEC)
}

/// A symbolic link where vouch wanted a file or directory of its own.
fn is_link_error(path: &Path, e: &io::Error) -> bool {
    // O_NOFOLLOW on a link: ELOOP (and ENOTDIR with O_DIRECTORY on some systems).
    matches!(Errno::from_io_error(e), Some(Errno::LOOP | Errno::NOTDIR))
        && fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn link_error(path: &Path, e: io::Error) -> io::Error {
    if is_link_error(path, &e) {
        symlink_refused(path)
    } else {
        e
    }
}

/// The error for a symbolic link found where vouch keeps its own files.
pub fn symlink_refused(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is a symbolic link; vouch never writes, truncates or cleans through a link in its data \
             (whoever planted it could aim vouch at any file): remove the link",
            path.display()
        ),
    )
}

/// Makes sure `dir` is a real directory, not a symbolic link (lstat), creating it if it
/// is missing (its parent must exist). A link or another kind of file is an error.
pub fn ensure_real_dir(dir: &Path) -> io::Result<()> {
    for _ in 0..3 {
        match fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => return Err(symlink_refused(dir)),
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a directory: move it away", dir.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match create_dir_0755(dir) {
                Ok(()) => return Ok(()),
                // Created by someone else meanwhile: look again at what it is.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("{} keeps changing: check what else writes there", dir.display())))
}

/// Refuses `path` if it is a symbolic link (lstat); a missing `path` is fine.
pub fn refuse_link(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(symlink_refused(path)),
        _ => Ok(()),
    }
}

/// A directory opened with O_NOFOLLOW | O_DIRECTORY: names in it are listed and removed
/// relative to this descriptor (unlinkat), so swapping the directory for a symbolic link
/// at any moment cannot aim a removal elsewhere.
pub struct NoFollowDir {
    dir: File,
    path: PathBuf,
}

impl NoFollowDir {
    /// Opens `path`; a symbolic link there is an error naming it. NotFound passes through.
    pub fn open(path: &Path) -> io::Result<NoFollowDir> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(custom_flags(OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC))
            .open(path)
            .map_err(|e| link_error(path, e))?;
        Ok(NoFollowDir { dir, path: path.to_path_buf() })
    }

    /// Opens the directory at `path`, following a symbolic link there (the operator's
    /// choice, as for a directory the policy names), never waiting on a FIFO (O_DIRECTORY).
    pub fn open_followed(path: &Path) -> io::Result<NoFollowDir> {
        let dir =
            OpenOptions::new().read(true).custom_flags(custom_flags(OFlags::DIRECTORY | OFlags::CLOEXEC)).open(path)?;
        Ok(NoFollowDir { dir, path: path.to_path_buf() })
    }

    /// Opens the directory `name` in this one, relative to this descriptor (so a path
    /// swapped meanwhile changes nothing), never through a symbolic link.
    pub fn open_child(&self, name: &std::ffi::OsStr) -> io::Result<NoFollowDir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.dir, name, flags, rustix::fs::Mode::empty())?;
        Ok(NoFollowDir { dir: File::from(fd), path: self.path.join(name) })
    }

    /// The names in the directory (without "." and "..").
    pub fn names(&self) -> io::Result<Vec<std::ffi::OsString>> {
        self.first_names(usize::MAX)
    }

    /// The first `max` names in the directory, read from its start (without "." and "..").
    pub fn first_names(&self, max: usize) -> io::Result<Vec<std::ffi::OsString>> {
        use std::os::unix::ffi::OsStrExt;
        // A duplicate descriptor (sharing the directory's offset), read from its start.
        let mut stream = rustix::fs::Dir::new(self.dir.try_clone()?)?;
        stream.rewind();
        let mut names = Vec::new();
        while names.len() < max {
            let Some(entry) = stream.read() else { break };
            let entry = entry?;
            let bytes = entry.file_name().to_bytes();
            if bytes != b"." && bytes != b".." {
                names.push(std::ffi::OsStr::from_bytes(bytes).to_os_string());
            }
        }
        Ok(names)
    }

    /// Removes the file (or symbolic link: never its target) `name` in the directory.
    pub fn unlink(&self, name: &std::ffi::OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.dir, name, rustix::fs::AtFlags::empty())?)
    }

    /// Removes the empty directory `name` in the directory (a link to one is not removed).
    pub fn rmdir(&self, name: &std::ffi::OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.dir, name, rustix::fs::AtFlags::REMOVEDIR)?)
    }

    /// The directory's path joined with `name` (for messages and reads).
    pub fn path_of(&self, name: &std::ffi::OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// fsyncs the directory.
    pub fn sync(&self) -> io::Result<()> {
        self.dir.sync_all()
    }
}

/// Removes the file `name` in `dir` without following a symbolic link at `dir`
/// (see [`NoFollowDir`]).
pub fn remove_in(dir: &Path, name: &str) -> io::Result<()> {
    NoFollowDir::open(dir)?.unlink(std::ffi::OsStr::new(name))
}

/// Appends lines with a single write (O_APPEND), then one fdatasync. Never through a
/// symbolic link ([`open_nofollow`]).
pub fn append_lines(path: &Path, lines: &[String]) -> io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = open_nofollow(OpenOptions::new().append(true).create(true).mode(0o640), path)?;
    let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len().saturating_add(1)).fold(0, usize::saturating_add));
    for l in lines {
        buf.extend_from_slice(l.as_bytes());
        buf.push(b'\n');
    }
    f.write_all(&buf)?;
    f.sync_data()
}

/// Renames `from` to `to` only if `to` does not exist (Linux renameat2 NOREPLACE).
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE)?;
    sync_dir(parent(to))
}

/// Appends one line with a single write (O_APPEND), then fdatasync.
pub fn append_line(path: &Path, line: &str) -> io::Result<()> {
    append_lines(path, &[line.to_string()])
}

#[cfg(test)]
mod tests;
