//! Writing what a command produces: standard output, the output rule for files, and the
//! checks every command makes before it changes anything.

use crate::authority::Authority;
use crate::decision::{self};
use crate::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes to standard output and flushes, reporting a failed write (a full disk, a closed
/// pipe) as an error instead of panicking as `println!` does.
pub fn say(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|_| out.flush()).map_err(stdout_error)
}

/// The one place a failed write to standard output becomes an error. A reader that went
/// away (a closed pipe: `vouch list --all | head -1`) is [`Error::StdoutClosed`], which
/// `main` ends quietly with [`super::EXIT_PIPE`]; any other failure names stdout.
pub(crate) fn stdout_error(source: std::io::Error) -> Error {
    if source.kind() == std::io::ErrorKind::BrokenPipe {
        Error::StdoutClosed
    } else {
        Error::Io { path: "stdout".into(), op: "write", source }
    }
}

/// `text` to begin a sentence: its first letter capitalised. The stores describe themselves
/// for mid-sentence use ("migrating files in DIR into LDAP …"): the file store as
/// "files in DIR", the LDAP store as "LDAP URL"; a line that begins with the description
/// (`vouch store verify`'s summary) begins with "Files in DIR" either way.
pub(super) fn sentence_start(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A line on standard error; a failure to write it is ignored (never a panic).
pub(super) fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// What `ca init` or `vouch import` found of the staging directories stopped runs had left in
/// the data directory (hidden: `.ca.tmp-…`, holding copies of the CA's keys): each removed,
/// or left, named on stderr.
pub(super) fn say_staging(c: &crate::issuance::staging::Cleared) {
    for p in &c.removed {
        note(&format!(
            "vouch: note: removed {}: the staging directory of a `vouch ca init` or `vouch import` that was stopped \
             before it finished (it held copies of the CA's private keys and was no part of any CA)",
            p.display()
        ));
    }
    for s in &c.left {
        note(&format!(
            "vouch: warning: {} is the staging directory of a `vouch ca init` or `vouch import` ({}): it holds \
             copies of the CA's private keys and is no part of any CA; once no such run is under way, remove it \
             (rm -rf {})",
            s.path.display(),
            s.state,
            s.path.display()
        ));
    }
}

/// Whether an output may replace an existing regular file (see [`OUTPUT_RULE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Replace {
    /// Attributes, certificates, CRLs: replaced atomically.
    Yes,
    /// Private keys and what pairs with them: never.
    Never,
    /// A private key whose certificate the CA keeps (`admin new`): only a new regular file,
    /// never stdout, a device or a FIFO (a key written to /dev/null is lost while its
    /// certificate stays valid in the store).
    NewFile,
}

/// Why `path` cannot take a [`Replace::NewFile`] output (none: a path a new regular file
/// can be created at, or one [`preflight`] refuses for every output).
fn not_a_new_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if path.as_os_str() == "-" {
        return Some("it is standard output");
    }
    let t = crate::files::output::output_kind(path).ok()??;
    Some(if t.is_char_device() || t.is_block_device() {
        "it is a device"
    } else if t.is_fifo() {
        "it is a FIFO"
    } else if t.is_socket() {
        "it is a socket"
    } else if t.is_dir() {
        "it is a directory"
    } else {
        return None;
    })
}

/// Writes one output file by the rule of [`crate::files::output::write_output`]; `None` is stdout.
pub(super) fn write_out(out: Option<&Path>, text: &str, mode: u32) -> Result<(), Error> {
    write_file(out.unwrap_or(Path::new("-")), text, mode, Replace::Yes).map(|_| ())
}

pub(super) fn write_file(
    path: &Path,
    text: &str,
    mode: u32,
    replace: Replace,
) -> Result<crate::files::output::Written, Error> {
    let to_stdout = path.as_os_str() == "-";
    if replace == Replace::NewFile {
        if let Some(detail) = not_a_new_file(path) {
            return Err(Error::KeyOutput { path: path.to_path_buf(), detail: detail.into() });
        }
    }
    crate::files::output::write_output(path, text.as_bytes(), mode, replace == Replace::Yes).map_err(|e| match e {
        crate::files::output::OutputError::Io(source) if to_stdout => stdout_error(source),
        e => output_error(if to_stdout { PathBuf::from("stdout") } else { path.to_path_buf() }, e),
    })
}

/// Writes a private key and then what pairs with it (a certificate, a CSR), both new files:
/// if the second write fails, a key file just created is removed again, so the two exist
/// as a pair or not at all.
pub(super) fn write_pair(key_out: &Path, key: &str, other_out: &Path, other: &str) -> Result<(), Error> {
    let written = write_file(key_out, key, 0o600, Replace::Never)?;
    if let Err(e) = write_file(other_out, other, 0o644, Replace::Never) {
        let removed = written == crate::files::output::Written::Created && std::fs::remove_file(key_out).is_ok();
        return Err(Error::Unfinished {
            done: if removed {
                format!("the private key written to {} was removed again", key_out.display())
            } else {
                format!("the private key was written to {} without its pair", key_out.display())
            },
            error: Box::new(e),
        });
    }
    Ok(())
}

pub(super) fn output_error(path: PathBuf, e: crate::files::output::OutputError) -> Error {
    use crate::files::output::OutputError as E;
    match e {
        E::Exists => Error::AlreadyExists { path },
        E::Symlink => Error::Output {
            path,
            detail: "it is a symbolic link; vouch never writes through one (it would replace or \
                     fill whatever file the link points to): give the target's path"
                .into(),
        },
        E::Directory => Error::Output { path, detail: "it is a directory".into() },
        E::Io(source) => Error::Io { path, op: "write", source },
    }
}

/// Checks every output of a command BEFORE the command changes anything (issues, revokes,
/// spends attributes, makes a key), by the rule [`crate::files::output::write_output`] will apply: no
/// symbolic link, no directory, an existing directory to create it in, no existing regular
/// file where the output never replaces one (a private key and what pairs with it), and no
/// two outputs of one command at the same place (compared as canonical parent directory +
/// file name, so `a.pem`, `./a.pem` and `DIR/../a.pem` are one). `-` (stdout) is not a path.
pub(super) fn preflight(outputs: &[(&Path, Replace)]) -> Result<(), Error> {
    use crate::files::output::OutputError as E;
    let mut seen: Vec<(PathBuf, std::ffi::OsString, &Path)> = Vec::new();
    for &(p, replace) in outputs {
        if replace == Replace::NewFile {
            if let Some(detail) = not_a_new_file(p) {
                return Err(Error::KeyOutput { path: p.to_path_buf(), detail: detail.into() });
            }
        }
        if p.as_os_str() == "-" {
            continue;
        }
        let refuse = |detail: String| Error::Output { path: p.to_path_buf(), detail };
        match crate::files::output::output_kind(p) {
            Ok(Some(t)) if t.is_symlink() => return Err(output_error(p.to_path_buf(), E::Symlink)),
            Ok(Some(t)) if t.is_dir() => return Err(output_error(p.to_path_buf(), E::Directory)),
            Ok(Some(_)) if replace != Replace::Yes && crate::files::output::output_occupied(p) => {
                return Err(output_error(p.to_path_buf(), E::Exists))
            }
            Ok(_) => {}
            Err(source) => return Err(Error::Io { path: p.to_path_buf(), op: "look at", source }),
        }
        let Some(file) = p.file_name() else {
            return Err(refuse("it names no file (it ends in '..' or '/')".into()));
        };
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let canonical = match std::fs::canonicalize(parent) {
            Ok(c) if c.is_dir() => c,
            Ok(_) => return Err(refuse(format!("{} is not a directory", parent.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(refuse(format!("its directory {} does not exist", parent.display())))
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) => {
                return Err(refuse(format!("{} is not a directory", parent.display())))
            }
            Err(source) => return Err(Error::Io { path: parent.to_path_buf(), op: "look at", source }),
        };
        if let Some((_, _, first)) = seen.iter().find(|(d, f, _)| *d == canonical && f.as_os_str() == file) {
            return Err(refuse(format!(
                "it is the same file as {}: each output of a command needs its own path",
                first.display()
            )));
        }
        seen.push((canonical, file.to_os_string(), p));
    }
    Ok(())
}

/// A write that failed after the command changed the CA (or made a key): the error says
/// what was done and where to find it, then why the write failed.
pub(super) fn after(done: impl Into<String>) -> impl FnOnce(Error) -> Error {
    let done = done.into();
    move |e| Error::Partial { done, error: Box::new(e) }
}

/// Where the store keeps a certname's current certificate.
pub(super) fn stored_cert(auth: &Authority, certname: &str) -> String {
    auth.dir.ca().join("signed").join(format!("{certname}.pem")).display().to_string()
}

pub(super) fn print_refusals(r: &decision::Refused, to: &mut dyn Write) {
    for reason in &r.reasons {
        let _ = writeln!(to, "vouch: refused [{}]: {reason}", reason.code());
        let _ = writeln!(to, "  hint: {}", reason.hint());
    }
}
