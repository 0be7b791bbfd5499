//! Entries of the file store with no usable name, under stable generated names
//! (`vouch reconcile` lists them, `vouch purge NAME` removes them).
//!
//! - `signed/`: a file that is not `<certname>.pem` for a valid certname, a file that does
//!   not parse as a certificate, a certificate without a CN or whose CN is not its file name.
//! - `requests/`: a request whose name Puppet would refuse (fails the certname rules), whose
//!   `.json` does not parse, a file that is neither `.json` nor `.pem`, or an entry that is
//!   not a regular file (a directory, a link, a FIFO: never opened).
//!
//! The name is `unnamed-` and the first 12 hex digits of the SHA-256 of the entry's path
//! inside the store (`signed/X.pem`) and its content: the same on every run and on any copy
//! of the store (never an inode, a time or an absolute path).

use super::{Junk, StoreError};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The largest store file junk detection reads whole (a larger one is junk by its size).
const MAX_READ: u64 = 1024 * 1024;

/// The generated name of an entry made of `files` (path inside the store, content).
pub fn generated_name(files: &[(&str, &[u8])]) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    for (path, content) in files {
        ctx.update(path.as_bytes());
        ctx.update(&[0]);
        ctx.update(&(content.len() as u64).to_be_bytes());
        ctx.update(content);
    }
    let hex = crate::encoding::hex(ctx.finish().as_ref());
    format!("unnamed-{}", hex.get(..12).unwrap_or_default())
}

fn io_err(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io { path, op, source }
}

/// Each name in `dir`, streamed (never the whole directory in memory); a missing directory has none.
fn each_name(dir: &Path, mut f: impl FnMut(&OsStr) -> Result<(), StoreError>) -> Result<(), StoreError> {
    let d = match crate::files::durable::NoFollowDir::open(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::Io { path: dir.to_path_buf(), op: "open", source: e }),
    };
    drop(d);
    let fd = std::fs::File::open(dir).map_err(io_err(dir, "open"))?;
    let mut stream = rustix::fs::Dir::new(fd).map_err(|e| StoreError::Io {
        path: dir.to_path_buf(),
        op: "read directory",
        source: e.into(),
    })?;
    while let Some(entry) = stream.read() {
        let entry =
            entry.map_err(|e| StoreError::Io { path: dir.to_path_buf(), op: "read directory", source: e.into() })?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        f(OsStr::from_bytes(bytes))?;
    }
    Ok(())
}

/// A file's content (at most [`MAX_READ`] bytes: a larger file is read that far; it is junk anyway).
/// A file that is not regular (a directory, a link, a FIFO, a device) is not read: `None`.
/// Nor is one this process may not read (its mode, an ACL): `None`, since what it holds is
/// unknown, it is not called junk (`vouch purge` would remove it); the checks of the
/// certname's certificate name it as unreadable.
fn read(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    use std::io::Read;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::Io { path: path.to_path_buf(), op: "stat", source: e }),
    }
    let f = match crate::files::durable::open_nofollow(std::fs::OpenOptions::new().read(true), path) {
        Ok(f) => f,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied) => {
            return Ok(None)
        }
        Err(e) => return Err(StoreError::Io { path: path.to_path_buf(), op: "read", source: e }),
    };
    let mut buf = Vec::new();
    f.take(MAX_READ).read_to_end(&mut buf).map_err(io_err(path, "read"))?;
    Ok(Some(buf))
}

/// Why a `signed/` file is junk by its name alone, if it is.
fn signed_name_problem(file_name: &OsStr) -> Option<String> {
    let Some(stem) = file_name.to_str().and_then(|n| n.strip_suffix(".pem")) else {
        return Some("not a <certname>.pem file".into());
    };
    crate::decision::check_certname(stem).err().map(|p| format!("its name is no certname: {p}"))
}

/// Why a `signed/` file is junk, if it is.
fn signed_problem(file_name: &OsStr, content: &[u8]) -> Option<String> {
    if let Some(p) = signed_name_problem(file_name) {
        return Some(p);
    }
    let stem = file_name.to_str().and_then(|n| n.strip_suffix(".pem")).unwrap_or_default();
    let Ok((_, der)) = crate::encoding::pem::find(content, &["CERTIFICATE"]) else {
        return Some("does not parse: no PEM certificate".into());
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
        return Some("does not parse as an X.509 certificate".into());
    };
    let cn = cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(str::to_string);
    match cn {
        None => Some("the certificate has no CN".into()),
        Some(cn) if cn != stem => Some(format!("its CN {cn:?} differs from its file name")),
        Some(_) => None,
    }
}

/// Every junk entry of the file store under `root` (`DIR/ca`), handed to `f`.
pub fn scan(root: &Path, f: &mut dyn FnMut(Junk) -> Result<(), StoreError>) -> Result<(), StoreError> {
    let signed = root.join("signed");
    each_name(&signed, |name| signed_entry(&signed, name, f))?;
    let requests = root.join("requests");
    each_name(&requests, |name| request_entry(&requests, name, f))
}

/// The entry `name` of `signed/` (the directory `signed`), handed to `f` if it is junk.
fn signed_entry(
    signed: &Path,
    name: &OsStr,
    f: &mut dyn FnMut(Junk) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let path = signed.join(name);
    let meta = std::fs::symlink_metadata(&path).map_err(io_err(&path, "stat"))?;
    let rel = format!("signed/{}", name.to_string_lossy());
    if !meta.is_file() {
        // A directory or link where a certificate belongs: named by its path alone.
        return f(Junk {
            name: generated_name(&[(&rel, b"")]),
            kind: "signed".into(),
            detail: "not a regular file".into(),
            files: vec![rel],
        });
    }
    let Some(content) = read(&path)? else {
        // Not read (vouch may not, or it is gone): junk by its name alone, if that is no
        // certname's (no check of a certname's certificate would name it); otherwise
        // those checks name it as unreadable.
        let still_there = std::fs::symlink_metadata(&path).is_ok();
        return match signed_name_problem(name).filter(|_| still_there) {
            Some(detail) => f(Junk {
                name: generated_name(&[(&rel, b"")]),
                kind: "signed".into(),
                detail: format!("{detail} (not readable by vouch)"),
                files: vec![rel],
            }),
            None => Ok(()),
        };
    };
    let problem =
        if meta.len() > MAX_READ { Some("larger than any certificate".into()) } else { signed_problem(name, &content) };
    match problem {
        Some(detail) => {
            f(Junk { name: generated_name(&[(&rel, &content)]), kind: "signed".into(), detail, files: vec![rel] })
        }
        None => Ok(()),
    }
}

/// The entry `name` of `requests/` (the directory `requests`), handed to `f` if it is junk.
fn request_entry(
    requests: &Path,
    name: &OsStr,
    f: &mut dyn FnMut(Junk) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let n = name.to_string_lossy();
    let (stem, ext) = match n.rsplit_once('.') {
        Some((s, e @ ("json" | "pem"))) => (s.to_string(), e),
        _ => ("".to_string(), ""),
    };
    let path = requests.join(name);
    let rel = format!("requests/{n}");
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::Io { path, op: "stat", source: e }),
    };
    if !meta.is_file() {
        // A directory, link or FIFO where a request belongs: never opened (a FIFO would
        // block, a link would be followed); named by its path alone.
        return f(Junk {
            name: generated_name(&[(&rel, b"")]),
            kind: "request".into(),
            detail: "not a regular file".into(),
            files: vec![rel],
        });
    }
    if ext.is_empty() {
        let content = read(&path)?.unwrap_or_default();
        return f(Junk {
            name: generated_name(&[(&rel, &content)]),
            kind: "request".into(),
            detail: "neither a request's .json nor its .pem".into(),
            files: vec![rel],
        });
    }
    let valid = crate::decision::check_certname(&stem);
    if ext == "pem" {
        return request_pem_entry(requests, &stem, &path, rel, &valid, f);
    }
    request_json_entry(requests, &stem, &path, rel, &valid, f)
}

/// A request's `.pem` at `path` (`rel` in the store), junk when the name is no certname's
/// and it has no `.json` (else it is reported with its `.json`, if it has one).
fn request_pem_entry(
    requests: &Path,
    stem: &str,
    path: &Path,
    rel: String,
    valid: &Result<(), crate::decision::CertnameProblem>,
    f: &mut dyn FnMut(Junk) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    // Reported with its .json, if it has one.
    let json = requests.join(format!("{stem}.json"));
    if valid.is_err() && !json.exists() {
        let content = read(path)?.unwrap_or_default();
        let detail = match valid {
            Err(p) => format!("a request for a name Puppet refuses: {p}"),
            Ok(()) => String::new(),
        };
        return f(Junk { name: generated_name(&[(&rel, &content)]), kind: "request".into(), detail, files: vec![rel] });
    }
    Ok(())
}

/// A request's `.json` at `path` (`rel` in the store), junk when the name is no certname's
/// or it does not parse or names another certname: reported with its `.pem`, if any.
fn request_json_entry(
    requests: &Path,
    stem: &str,
    path: &Path,
    rel: String,
    valid: &Result<(), crate::decision::CertnameProblem>,
    f: &mut dyn FnMut(Junk) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    // Not read (vouch may not, or it is gone): what it holds is unknown, so a request
    // with a valid name is not junk (`vouch purge` would remove it); one whose name
    // Puppet refuses is, by its name alone.
    let Some(content) = read(path)?.or_else(|| valid.is_err().then(Vec::new)) else { return Ok(()) };
    let detail = match valid {
        Err(p) => Some(format!("a request for a name Puppet refuses: {p}")),
        Ok(()) => match serde_json::from_slice::<super::PendingRequest>(&content) {
            Err(e) => Some(format!("its .json does not parse: {e}")),
            Ok(r) if r.certname != stem => Some(format!("its .json names {:?}", r.certname)),
            Ok(_) => None,
        },
    };
    let Some(detail) = detail else { return Ok(()) };
    let pem_rel = format!("requests/{stem}.pem");
    let pem = read(&requests.join(format!("{stem}.pem")))?;
    let mut files: Vec<(&str, &[u8])> = vec![(&rel, &content)];
    if let Some(p) = &pem {
        files.push((&pem_rel, p));
    }
    let name = generated_name(&files);
    let mut listed = vec![rel.clone()];
    if pem.is_some() {
        listed.push(pem_rel.clone());
    }
    f(Junk { name, kind: "request".into(), detail, files: listed })
}

/// Removes the files of `junk` (paths inside `root`), each through its directory's
/// descriptor (a directory swapped for a link is refused), then syncs the directories.
pub fn purge(root: &Path, junk: &Junk) -> Result<(), StoreError> {
    for rel in &junk.files {
        let (dir, name) = rel.split_once('/').unwrap_or(("", rel));
        if !matches!(dir, "signed" | "requests") || name.is_empty() || name.contains('/') {
            return Err(StoreError::Corrupt { path: root.join(rel), detail: "not a store entry".into() });
        }
        let d = root.join(dir);
        let nd = crate::files::durable::NoFollowDir::open(&d).map_err(io_err(&d, "open"))?;
        let path = d.join(name);
        // unlinkat never follows a link; a directory (EISDIR) is removed only if empty (a
        // full one stays: the operator looks at it), through the directory's descriptor too.
        let r = match nd.unlink(OsStr::new(name)) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error()) => nd.rmdir(OsStr::new(name)),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::PERM.raw_os_error()) => {
                // Linux answers EPERM for unlink on a directory.
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => nd.rmdir(OsStr::new(name)),
                    _ => Err(e),
                }
            }
            r => r,
        };
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::Io { path, op: "remove", source: e }),
        }
        nd.sync().map_err(io_err(&d, "sync"))?;
    }
    Ok(())
}
