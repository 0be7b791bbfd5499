//! The CA's public documents (its certificate bundle, its CRLs) as `vouch serve` hands
//! them out: read from their files once per change, kept in memory with a gzip copy, and
//! answered from memory. With 100,000 revocations the CRLs are 6.6 MB; every agent's
//! bootstrap fetches them, so reading, copying and compressing them per request would be
//! the service's largest cost.
//!
//! A change is noticed by each file's identity (device, inode, size, modification and
//! change time), taken with one `stat` per file and request: vouch replaces these files
//! by rename, so a rewritten file is a new inode, whichever process wrote it.

use crate::error::Error;
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use time::OffsetDateTime;

/// One document: its bytes (plain and gzip-compressed) and when it last changed.
#[derive(Debug, Clone)]
pub struct Document {
    pub plain: Bytes,
    pub gzip: Bytes,
    /// The newest modification time of its files, whole seconds (HTTP dates have no more).
    pub modified: Option<OffsetDateTime>,
}

/// A file's identity as `stat` gives it; `None` for a file that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

pub(crate) fn file_id(path: &Path) -> Result<Option<FileId>, Error> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(FileId {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io { path: path.to_path_buf(), op: "read", source }),
    }
}

/// A document made of files read in order (the CRL bundle: the master CA's, then the
/// root's); `required` files must exist, the others are left out when missing.
pub struct Cached {
    files: Vec<(PathBuf, bool)>,
    /// Only the first of `files` that exists is the document (the fleet's CA bundle, else
    /// this master's); at least one must.
    first_only: bool,
    held: Mutex<Option<(Vec<Option<FileId>>, Document)>>,
}

impl Cached {
    pub fn new(files: Vec<(PathBuf, bool)>) -> Self {
        Cached { files, first_only: false, held: Mutex::new(None) }
    }

    /// A document that is the first of `files` that exists (one must).
    pub fn first_of(files: Vec<PathBuf>) -> Self {
        Cached { files: files.into_iter().map(|p| (p, false)).collect(), first_only: true, held: Mutex::new(None) }
    }

    /// The document as its files are now: from memory if none changed since it was read.
    /// One caller at a time reads and compresses a changed document; the others wait for it
    /// rather than each doing the same work (a fleet's agents all ask at once).
    pub fn get(&self) -> Result<Document, Error> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        // The identities are taken before the bytes are read: a file replaced meanwhile is
        // read again next time (its identity no longer matches), never kept stale.
        let ids = self.files.iter().map(|(p, _)| file_id(p)).collect::<Result<Vec<_>, _>>()?;
        if let Some((seen, doc)) = held.as_ref() {
            if *seen == ids {
                return Ok(doc.clone());
            }
        }
        let doc = self.read()?;
        *held = Some((ids, doc.clone()));
        Ok(doc)
    }

    /// The document from memory if it is there and none of its files changed since, without
    /// ever reading or compressing (no waiting on another caller doing so): `None`, ask [`Cached::get`].
    pub fn current(&self) -> Option<Document> {
        let held = self.held.try_lock().ok()?;
        let (seen, doc) = held.as_ref()?;
        let ids = self.files.iter().map(|(p, _)| file_id(p)).collect::<Result<Vec<_>, _>>().ok()?;
        (*seen == ids).then(|| doc.clone())
    }

    fn read(&self) -> Result<Document, Error> {
        let mut plain = Vec::new();
        let mut modified: Option<OffsetDateTime> = None;
        for (path, required) in &self.files {
            // The bytes and their date from one open file: a CRL replaced meanwhile is never
            // dated as the newer one (an agent would then keep the older, If-Modified-Since).
            if self.first_only && !plain.is_empty() {
                break;
            }
            let mut file = match std::fs::File::open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => continue,
                Err(source) => return Err(Error::Io { path: path.clone(), op: "read", source }),
            };
            let meta = file.metadata().map_err(|source| Error::Io { path: path.clone(), op: "read", source })?;
            std::io::Read::read_to_end(&mut file, &mut plain).map_err(|source| Error::Io {
                path: path.clone(),
                op: "read",
                source,
            })?;
            let m = meta.modified().ok().map(OffsetDateTime::from).map(|t| t.replace_nanosecond(0).unwrap_or(t));
            modified = match (modified, m) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        if self.first_only && plain.is_empty() {
            let path = self.files.last().map(|(p, _)| p.clone()).unwrap_or_default();
            return Err(Error::Io { path, op: "read", source: std::io::ErrorKind::NotFound.into() });
        }
        let gzip = gzip(&plain).map_err(|source| Error::Io {
            path: self.files.first().map(|(p, _)| p.clone()).unwrap_or_default(),
            op: "compress",
            source,
        })?;
        Ok(Document { plain: Bytes::from(plain), gzip: Bytes::from(gzip), modified })
    }
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    // The fast level: 6.6 MB of CRLs in about 0.1 s (to 2.2 MB; the default level takes twice
    // as long for 10% less), while requests for the new CRL wait.
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 2), flate2::Compression::fast());
    enc.write_all(bytes)?;
    enc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_is_read_again_and_gzip_round_trips() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a.pem");
        let b = t.path().join("b.pem");
        std::fs::write(&a, "first\n").unwrap();
        let c = Cached::new(vec![(a.clone(), true), (b.clone(), false)]);
        let d1 = c.get().unwrap();
        assert_eq!(&d1.plain[..], b"first\n");
        let mut out = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&d1.gzip[..]), &mut out).unwrap();
        assert_eq!(out, "first\n");
        // The optional file appears: the document changes.
        std::fs::write(&b, "second\n").unwrap();
        assert_eq!(&c.get().unwrap().plain[..], b"first\nsecond\n");
        // Replaced by rename (as vouch writes), same size: a new inode, read again.
        let tmp = t.path().join("tmp");
        std::fs::write(&tmp, "FIRST\n").unwrap();
        std::fs::rename(&tmp, &a).unwrap();
        assert_eq!(&c.get().unwrap().plain[..], b"FIRST\nsecond\n");
        // A required file gone: an error, not the old bytes.
        std::fs::remove_file(&a).unwrap();
        assert!(c.get().is_err());
    }
}
