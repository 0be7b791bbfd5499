//! The files of `vouch serve`'s credentials: written new (a key never replaced) or as a
//! pair (key first), and read back.

use crate::error::Error;
use crate::issuance::bootstrap;
use std::path::Path;

pub(super) fn io(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io { path, op, source }
}

fn mkdir_private(dir: &Path) -> Result<(), Error> {
    bootstrap::create_private_dir(dir)
}

/// Writes a certificate and its key (0600) as a pair, replacing older ones: key first,
/// so a crash leaves at worst a key whose certificate is missing (made again next start).
pub(super) fn write_pair(cert: &Path, cert_pem: &str, key: &Path, key_pem: &str) -> Result<(), Error> {
    if let Some(parent) = cert.parent() {
        mkdir_private(parent)?;
    }
    crate::files::durable::write_replace(key, key_pem.as_bytes(), 0o600).map_err(io(key, "write"))?;
    crate::files::durable::write_replace(cert, cert_pem.as_bytes(), 0o644).map_err(io(cert, "write"))
}

/// Writes a new private key (0600) where none is; never replaces one.
pub(super) fn write_new_key(path: &Path, key: &rcgen::KeyPair) -> Result<(), Error> {
    if let Some(parent) = path.parent() {
        mkdir_private(parent)?;
    }
    crate::files::durable::write_new(path, key.serialize_pem().as_bytes(), 0o600).map_err(io(path, "write"))
}

/// Writes a certificate where none is; never replaces one.
pub(super) fn write_new_cert(path: &Path, pem: &str) -> Result<(), Error> {
    crate::files::durable::write_new(path, pem.as_bytes(), 0o644).map_err(io(path, "write"))
}

pub(super) fn read_key(path: &Path) -> Result<rcgen::KeyPair, Error> {
    let text = crate::files::input::read_path_text(path, crate::files::input::Kind::Key).map_err(io(path, "read"))?;
    crate::issuance::keys::load_pem(&text).map_err(|detail| Error::Key { path: path.to_path_buf(), detail })
}
