//! The mark that a data directory's master moved to a shared store: `ca/MOVED-TO-SHARED-STORE`,
//! holding the store's URL (and the same name in the policy's replay journal, retired with it).
//! Read by the data directory before a command opens its file store, by the file store under
//! its lock (a `vouch migrate` may mark it while a command waits), and by the file journal
//! before each use: one reading, deny by default.

use std::path::Path;

/// The file in `ca/` that says the data directory's master moved to a shared store: its file
/// store is opened and locked by nobody but `vouch migrate`'s copy.
pub const RETIRED_MARKER: &str = "MOVED-TO-SHARED-STORE";

/// The most of a marker that is read.
const MARKER_MAX: u64 = 4096;

/// The shared store the marker in `ca_dir` (or a journal's directory) names, if there is a marker. Deny by default:
/// anything under that name counts (a directory, a link, a FIFO, bytes that are not UTF-8);
/// only a regular file's first bytes are read, never blocking, and the store named with its
/// control characters replaced.
pub fn retired_to(ca_dir: &Path) -> Option<String> {
    let path = ca_dir.join(RETIRED_MARKER);
    let unreadable = |e: std::io::Error| format!("(a marker vouch cannot read: {e})");
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(unreadable(e)),
        Ok(m) if !m.file_type().is_file() => Some("(a marker that is not a regular file)".into()),
        Ok(_) => Some(read_marker(&path).unwrap_or_else(unreadable)),
    }
}

/// A regular file's first [`MARKER_MAX`] bytes as text, trimmed, control characters as `?`
/// (opened without following a link and without blocking: a FIFO put there meanwhile is
/// refused, not waited on).
fn read_marker(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MARKER_MAX).read_to_end(&mut bytes)?;
    let to: String =
        String::from_utf8_lossy(&bytes).trim().chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    Ok(if to.is_empty() { "(unnamed)".to_string() } else { to })
}
