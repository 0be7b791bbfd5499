//! The file store's listing ([`crate::store::Store::for_each_listed`]) in constant memory.
//!
//! The inventory has a line per certificate ever issued, oldest first; a certname's
//! current certificate is its latest line, unless revoked with clean. Finding "latest"
//! and "revoked" exactly would take a map of the fleet (what `vouch list --all` held
//! before: 500 MB at 1,000,000 certificates). Instead, two fixed-size Bloom filters
//! (4 MiB each, whatever the store holds) say which certnames may appear more than once
//! and which serials may be revoked; a line that is neither is the certname's current,
//! unrevoked certificate for certain (no false negatives), and only the others (renewed or
//! revoked certificates, and the filters' false positives) are checked against the
//! certname's current certificate and its record (two small reads, as any look-up).
//! Reading walks the inventory twice, sequentially; memory is the filters plus one line.

use super::{io_err, FileStore};
use crate::store::{Listed, State, Store, StoreError};
use std::io::{self, BufRead};
use std::ops::ControlFlow;

/// log2 of each filter's size in bits: 2^25 bits = 4 MiB. With three probes, the
/// false-positive rate is 0.06% at 1,000,000 entries and about 20% at 10,000,000 (each
/// false positive costs one look-up, never a wrong answer).
const FILTER_BITS_LOG2: u32 = 25;
const PROBES: usize = 3;

/// A Bloom filter: "maybe present" or "certainly absent".
pub(super) struct Bloom {
    bits: Vec<u64>,
    mask: u64,
}

impl Bloom {
    pub(super) fn new(bits_log2: u32) -> Self {
        let bits = 1u64 << bits_log2;
        Bloom { bits: vec![0; (bits >> 6) as usize], mask: bits.wrapping_sub(1) }
    }

    fn probes(&self, item: &[u8]) -> [(usize, u64); PROBES] {
        use std::hash::{BuildHasher, Hasher};
        let hash = |seed: u8| {
            let mut h =
                std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().build_hasher();
            h.write_u8(seed);
            h.write(item);
            h.finish()
        };
        let (h1, h2) = (hash(1), hash(2) | 1);
        let mut out = [(0, 0); PROBES];
        let mut i = 0u64;
        for p in out.iter_mut() {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) & self.mask;
            *p = ((bit >> 6) as usize, 1u64 << (bit & 63));
            i = i.wrapping_add(1);
        }
        out
    }

    /// Adds `item`; returns whether it may have been present already.
    pub(super) fn insert(&mut self, item: &[u8]) -> bool {
        let mut present = true;
        for (word, bit) in self.probes(item) {
            if let Some(w) = self.bits.get_mut(word) {
                present &= *w & bit != 0;
                *w |= bit;
            }
        }
        present
    }

    pub(super) fn maybe(&self, item: &[u8]) -> bool {
        self.probes(item).into_iter().all(|(word, bit)| self.bits.get(word).is_some_and(|w| w & bit != 0))
    }
}

/// One inventory line's fields: "0x<serial> <notBefore> <notAfter> /CN=<certname>".
struct Line<'a> {
    serial: &'a str,
    not_after: &'a str,
    certname: &'a str,
}

fn parse(line: &[u8]) -> Option<Line<'_>> {
    let text = std::str::from_utf8(line).ok()?.trim_end_matches('\n');
    let mut f = text.split(' ');
    let (serial, _not_before, not_after, cn) = (f.next()?, f.next()?, f.next()?, f.next()?);
    if f.next().is_some() {
        return None;
    }
    Some(Line { serial: serial.trim_start_matches("0x"), not_after, certname: cn.trim_start_matches("/CN=") })
}

impl FileStore {
    /// Each line of a log file, in order, to `f` (nothing if the file does not exist).
    fn each_line(
        &self,
        rel: &str,
        mut f: impl FnMut(&[u8]) -> Result<ControlFlow<()>, StoreError>,
    ) -> Result<(), StoreError> {
        let path = self.p(rel);
        let file = match crate::files::durable::open_regular(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::Io { path, op: "read", source: e }),
        };
        let mut reader = io::BufReader::with_capacity(256 * 1024, file);
        let mut buf = Vec::with_capacity(256);
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf).map_err(io_err(&path, "read"))? == 0 {
                return Ok(());
            }
            if f(&buf)?.is_break() {
                return Ok(());
            }
        }
    }

    pub(super) fn listed(&self, f: &mut (dyn FnMut(Listed) -> ControlFlow<()> + Send)) -> Result<(), StoreError> {
        // Serials that may be revoked (cleaned or not).
        let mut revoked = Bloom::new(FILTER_BITS_LOG2);
        self.each_line("revocations.txt", |l| {
            if let Some(serial) = l.split(|b| *b == b' ').next().filter(|s| !s.is_empty()) {
                revoked.insert(serial);
            }
            Ok(ControlFlow::Continue(()))
        })?;
        // Certnames that may have more than one line.
        let mut seen = Bloom::new(FILTER_BITS_LOG2);
        let mut repeated = Bloom::new(FILTER_BITS_LOG2);
        self.each_line("inventory.txt", |l| {
            if let Some(line) = parse(l) {
                if seen.insert(line.certname.as_bytes()) {
                    repeated.insert(line.certname.as_bytes());
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        // Certnames whose certificate file cannot be read (damaged, unreadable, not a regular
        // file), with their latest line: listed once at the end, so that each is still
        // checked (`vouch store verify` names it) and the walk goes on. Only damaged names
        // are held here.
        let mut unreadable: Vec<Listed> = Vec::new();
        let mut stopped = false;
        self.each_line("inventory.txt", |l| {
            let Some(line) = parse(l) else { return Ok(ControlFlow::Continue(())) };
            if crate::decision::check_certname(line.certname).is_err() {
                // Not a line vouch wrote: it names no file to check it against.
                return Ok(ControlFlow::Continue(()));
            }
            let listed = if !repeated.maybe(line.certname.as_bytes()) && !revoked.maybe(line.serial.as_bytes()) {
                // The certname's only line, never revoked: its current certificate.
                file_listed(line.certname.to_string(), line.serial.to_string(), line.not_after, false)
            } else {
                // Listed only if this line is the certname's current certificate (none:
                // cleaned; another serial: a later line is).
                let current = match self.current(line.certname) {
                    Ok(c) => c,
                    Err(StoreError::CertnameInvalid { .. }) => return Ok(ControlFlow::Continue(())),
                    Err(_) => {
                        let revoked = matches!(self.record(line.serial), Ok(Some(r)) if r.state == State::Revoked);
                        let listed =
                            file_listed(line.certname.to_string(), line.serial.to_string(), line.not_after, revoked);
                        match unreadable.iter_mut().find(|u| u.certname == listed.certname) {
                            Some(u) => *u = listed,
                            None => unreadable.push(listed),
                        }
                        return Ok(ControlFlow::Continue(()));
                    }
                };
                let Some(current) = current else { return Ok(ControlFlow::Continue(())) };
                let rec = current.record;
                if rec.serial != line.serial {
                    return Ok(ControlFlow::Continue(()));
                }
                let revoked = match rec.state {
                    State::Issued => false,
                    State::Revoked => true,
                    State::Intent | State::Abandoned => return Ok(ControlFlow::Continue(())),
                };
                file_listed(rec.certname, rec.serial, line.not_after, revoked)
            };
            let flow = f(listed);
            stopped = flow.is_break();
            Ok(flow)
        })?;
        for listed in unreadable {
            if stopped || f(listed).is_break() {
                break;
            }
        }
        Ok(())
    }
}

impl FileStore {
    /// How many pending requests `requests/` holds (their `.json` files, regular ones only,
    /// as [`Store::requests`] lists them), counted up to `at_most`: names only, nothing read.
    pub(super) fn count_request_files(&self, at_most: usize) -> Result<usize, StoreError> {
        let dir = self.p("requests");
        crate::files::durable::refuse_link(&dir).map_err(io_err(&dir, "use directory"))?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(StoreError::Io { path: dir, op: "read directory", source: e }),
        };
        let mut n = 0usize;
        for e in entries {
            let e = e.map_err(io_err(&dir, "read directory"))?;
            let json = e.path().extension().is_some_and(|x| x == "json");
            if json && e.file_type().is_ok_and(|t| t.is_file()) {
                n = n.saturating_add(1);
                if n >= at_most {
                    break;
                }
            }
        }
        Ok(n)
    }
}

/// A certificate the file store lists (its own master CA's: no issuer named).
fn file_listed(certname: String, serial: String, not_after: &str, revoked: bool) -> Listed {
    Listed { certname, serial, not_after: not_after.to_string(), revoked, issuer: None }
}

#[cfg(test)]
mod tests {
    use super::Bloom;

    #[test]
    fn bloom_never_forgets_and_rarely_lies() {
        let mut b = Bloom::new(16);
        let said_present = (0..1000).filter(|i| b.insert(format!("node-{i}").as_bytes())).count();
        assert!(said_present < 10, "{said_present}");
        assert!((0..1000).all(|i| b.maybe(format!("node-{i}").as_bytes())));
        assert!(b.insert(b"node-7"));
        let false_positives = (1000..11000).filter(|i| b.maybe(format!("node-{i}").as_bytes())).count();
        assert!(false_positives < 100, "{false_positives}");
    }
}
