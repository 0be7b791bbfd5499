//! The rule for every file a command writes (`--out`, `--cert-out`, `--key-out`, `--csr-out`).

use super::durable::{write_new, write_replace};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What an output path already holds, and so how [`write_output`] writes it.
#[derive(Debug)]
pub enum OutputError {
    /// A symbolic link: never followed, never replaced.
    Symlink,
    /// A directory.
    Directory,
    /// A regular file, and this output never replaces one.
    Exists,
    /// Writing failed.
    Io(io::Error),
}

impl From<io::Error> for OutputError {
    fn from(e: io::Error) -> Self {
        OutputError::Io(e)
    }
}

/// How [`write_output`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new file, created atomically.
    Created,
    /// An existing regular file, replaced atomically (temporary file + rename).
    Replaced,
    /// Through an existing device, FIFO or socket, or to standard output (`-`).
    Through,
}

/// What an output path is, without following a symbolic link.
pub fn output_kind(path: &Path) -> io::Result<Option<fs::FileType>> {
    if path.as_os_str() == "-" {
        return Ok(None);
    }
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m.file_type())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether writing `path` would replace a regular file (or be refused as a link or
/// directory): what a command that must not overwrite checks before doing any work.
pub fn output_occupied(path: &Path) -> bool {
    matches!(output_kind(path), Ok(Some(t)) if !is_special(&t))
}

fn is_special(t: &fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
}

/// The one rule for every file a command writes (`--out`, `--cert-out`, `--key-out`,
/// `--csr-out`):
/// - `-` is standard output;
/// - a device, FIFO or socket is written through, never replaced, and a failed write is an error;
/// - a symbolic link is refused (never followed: its target could be any file);
/// - a directory is refused;
/// - a new path is created atomically (temporary file beside it, then link) with `mode`;
/// - an existing regular file is replaced atomically (temporary file + rename) when
///   `replace` is true, else refused ([`OutputError::Exists`]).
pub fn write_output(path: &Path, bytes: &[u8], mode: u32, replace: bool) -> Result<Written, OutputError> {
    if path.as_os_str() == "-" {
        let mut out = io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()?;
        return Ok(Written::Through);
    }
    match output_kind(path)? {
        None => match write_new(path, bytes, mode) {
            Ok(()) => Ok(Written::Created),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(OutputError::Exists),
            Err(e) => Err(OutputError::Io(e)),
        },
        Some(t) if t.is_symlink() => Err(OutputError::Symlink),
        Some(t) if t.is_dir() => Err(OutputError::Directory),
        Some(t) if is_special(&t) => {
            use std::os::unix::fs::FileTypeExt;
            // O_NOFOLLOW: a link swapped in since the look is refused (ELOOP), not followed.
            let mut f = OpenOptions::new()
                .write(true)
                .custom_flags(crate::files::durable::custom_flags(
                    rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NOCTTY,
                ))
                .open(path)
                .map_err(|e| {
                    if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::LOOP) {
                        OutputError::Symlink
                    } else {
                        e.into()
                    }
                })?;
            let now = f.metadata()?.file_type();
            if !(now.is_char_device() || now.is_block_device() || now.is_fifo()) {
                return Err(OutputError::Exists);
            }
            f.write_all(bytes)?;
            f.flush()?;
            Ok(Written::Through)
        }
        Some(_) if !replace => Err(OutputError::Exists),
        Some(_) => {
            write_replace(path, bytes, mode)?;
            Ok(Written::Replaced)
        }
    }
}
