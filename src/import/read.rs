//! The files of a Puppet 7/8 (or OpenVox) CA directory, read as they are: the only I/O of
//! the import's reading side. What they mean is [`super::check`]'s.

use crate::error::{Error, PuppetCaDefect};
use crate::files::input::Kind;
use std::path::{Path, PathBuf};

/// What a Puppet CA directory holds that the import takes over.
#[derive(Debug, Default)]
pub struct CadirFiles {
    /// `ca_crt.pem`: the CA's certificate, then its root's (one certificate: a self-signed CA).
    pub ca_crt: Vec<u8>,
    pub ca_key: String,
    /// `root_key.pem`: `puppetserver ca setup` keeps it; an operator may have moved it away.
    pub root_key: Option<String>,
    /// `ca_crl.pem`: the CA's CRL, then its root's.
    pub ca_crl: Vec<u8>,
    pub inventory: String,
    pub serial: String,
    /// `signed/*.pem`: (file name, bytes), sorted by name.
    pub signed: Vec<(String, Vec<u8>)>,
    /// How many pending requests `requests/` holds (not imported).
    pub requests: usize,
    /// The private keys that group or others could read or write where they were, or that
    /// another user owned: a copy may be out of this CA's hands.
    pub exposed_keys: Vec<ExposedKey>,
}

/// A private key of the Puppet CA directory that others could read: by its mode, or because
/// a user other than root and the one importing owns it (an owner may read its file whatever
/// the mode, and change the mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposedKey {
    /// `ca_key.pem` or `root_key.pem`.
    pub file: String,
    pub mode: u32,
    /// The owner's uid, when it is neither root nor the user importing.
    pub other_owner: Option<u32>,
}

/// The error for `cadir` and `defect`.
pub fn refuse(cadir: &Path, defect: PuppetCaDefect) -> Error {
    Error::PuppetImport { cadir: cadir.to_path_buf(), defect }
}

/// One of the Puppet CA directory's files, as a regular file (a link to one is followed) of
/// at most `kind`'s size: a FIFO, a device or a directory there is refused at once, never
/// waited on or read without end.
fn read_file(path: &Path, kind: Kind) -> std::io::Result<Vec<u8>> {
    crate::files::durable::read_regular_followed_at_most(path, kind.limit())
}

/// Why the file `path` (`name` in the CA directory) could not be read: this user may not
/// (named with its path and the system's error, never as damaged), or it does not read as
/// a file of the CA directory (too large, not a regular file, an I/O error).
fn read_failed(path: &Path, name: &str, e: &std::io::Error) -> PuppetCaDefect {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        return PuppetCaDefect::PermissionDenied { path: path.display().to_string(), detail: e.to_string() };
    }
    PuppetCaDefect::Unreadable { file: name.into(), detail: e.to_string() }
}

/// Reads `cadir`'s files; a missing one is [`PuppetCaDefect::Missing`], one that cannot be
/// read [`PuppetCaDefect::Unreadable`].
pub fn read(cadir: &Path) -> Result<CadirFiles, Error> {
    let file = |name: &str, kind: Kind| -> Result<Option<Vec<u8>>, Error> {
        let p = cadir.join(name);
        match read_file(&p, kind) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(refuse(cadir, read_failed(&p, name, &e))),
        }
    };
    let need = |name: &str, kind: Kind| -> Result<Vec<u8>, Error> {
        file(name, kind)?.ok_or_else(|| refuse(cadir, PuppetCaDefect::Missing { file: name.into() }))
    };
    let text = |name: &str, bytes: Vec<u8>| -> Result<String, Error> {
        String::from_utf8(bytes).map_err(|_| {
            refuse(cadir, PuppetCaDefect::Unreadable { file: name.into(), detail: "it is not UTF-8 text".into() })
        })
    };
    let dir_meta =
        std::fs::metadata(cadir).map_err(|e| refuse(cadir, PuppetCaDefect::Directory { detail: e.to_string() }))?;
    if !dir_meta.is_dir() {
        return Err(refuse(cadir, PuppetCaDefect::Directory { detail: "it is not a directory".into() }));
    }
    let ca_crt = need("ca_crt.pem", Kind::Cert)?;
    let ca_key = text("ca_key.pem", need("ca_key.pem", Kind::Key)?)?;
    let root_key = file("root_key.pem", Kind::Key)?.map(|b| text("root_key.pem", b)).transpose()?;
    let ca_crl = need("ca_crl.pem", Kind::TrustFile)?;
    let inventory = text("inventory.txt", need("inventory.txt", Kind::TrustFile)?)?;
    let serial = text("serial", need("serial", Kind::Cert)?)?;
    let signed = read_signed(cadir)?;
    let requests = count_dir(&cadir.join("requests"));
    let exposed_keys = exposed_keys(cadir);
    Ok(CadirFiles { ca_crt, ca_key, root_key, ca_crl, inventory, serial, signed, requests, exposed_keys })
}

/// `ca_key.pem` and `root_key.pem` where group or others have any access to them (their
/// mode's last two digits not 0), or that a user other than root and this one owns (the check
/// vouch makes of its own keys, `files::trust`).
fn exposed_keys(cadir: &Path) -> Vec<ExposedKey> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let me = crate::files::trust::euid();
    ["ca_key.pem", "root_key.pem"]
        .iter()
        .filter_map(|name| {
            let meta = std::fs::metadata(cadir.join(name)).ok()?;
            let mode = meta.permissions().mode() & 0o7777;
            let other_owner = Some(meta.uid()).filter(|uid| *uid != 0 && *uid != me);
            (mode & 0o077 != 0 || other_owner.is_some()).then(|| ExposedKey {
                file: (*name).to_string(),
                mode,
                other_owner,
            })
        })
        .collect()
}

/// `signed/*.pem`, sorted by file name; anything else there is left alone.
fn read_signed(cadir: &Path) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let dir = cadir.join("signed");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(cadir, PuppetCaDefect::Missing { file: "signed/".into() }))
        }
        Err(source) => return Err(Error::Io { path: dir, op: "read", source }),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io { path: dir.clone(), op: "read", source })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".pem") {
            continue;
        }
        let p: PathBuf = entry.path();
        let bytes =
            read_file(&p, Kind::Cert).map_err(|e| refuse(cadir, read_failed(&p, &format!("signed/{name}"), &e)))?;
        out.push((name, bytes));
    }
    out.sort();
    Ok(out)
}

/// How many `.pem` files `dir` holds (0 when it cannot be read).
fn count_dir(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|e| e.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().ends_with(".pem")).count())
        .unwrap_or(0)
}
