//! `DIR/ca/root_issued.txt`: every certificate this data directory issued with the root key
//! (the master CA of `ca init`, a further master of `ca init --root-cert --root-key` whose key
//! is this directory's, the conductors of `conductor new` and of `vouch serve`'s first run),
//! one line each, appended and synced BEFORE the certificate is written out or returned. A
//! serial alone says nothing of what it is: this list is how `vouch conductor revoke
//! --serial` tells a conductor of this root from a master CA under it, whose every node
//! certificate a root CRL listing it would revoke.
#![deny(clippy::arithmetic_side_effects)]

use crate::error::Error;
use std::path::Path;

/// The root's issuance, one line each (`DIR/ca/`).
pub const ROOT_ISSUED: &str = "root_issued.txt";

/// What the root issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A conductor (extended key usage 1.3.6.1.4.1.34380.2.0, no CA).
    Conductor,
    /// A master CA.
    Ca,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Conductor => "conductor",
            Kind::Ca => "ca",
        }
    }
}

/// One line of `root_issued.txt`: `SERIAL NOT_AFTER KIND SHA256 SUBJECT` (the subject last: it
/// holds spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The serial's value: lowercase hex, an even number of digits, no leading zero octet.
    pub serial: String,
    /// RFC 3339.
    pub not_after: String,
    pub kind: Kind,
    /// SHA-256 of the certificate (lowercase hex).
    pub fingerprint: String,
    /// As RFC 4514 prints it (CN=…), control characters replaced by `?`.
    pub subject: String,
}

/// A serial (lowercase hex, an even number of digits) as its value: without the leading zero
/// octets DER puts before a serial whose first bit is set (`openssl x509 -serial` prints none).
pub fn serial_value(hex: &str) -> String {
    let mut s = hex;
    while s.len() > 2 && s.starts_with("00") {
        s = s.get(2..).unwrap_or_default();
    }
    s.to_string()
}

impl Issued {
    /// The line for the certificate `der`, issued as `kind`.
    pub fn of(der: &[u8], kind: Kind) -> Result<Issued, Error> {
        let (_, c) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| Error::Store { detail: format!("a certificate the root key just signed: {e}") })?;
        Ok(Issued {
            serial: serial_value(&crate::encoding::hex(c.raw_serial())),
            not_after: crate::encoding::time::format_rfc3339(c.validity().not_after.to_datetime()),
            kind,
            fingerprint: crate::encoding::sha256_hex(der),
            subject: c.subject().to_string().chars().map(|ch| if ch.is_control() { '?' } else { ch }).collect(),
        })
    }

    pub fn line(&self) -> String {
        format!("{} {} {} {} {}", self.serial, self.not_after, self.kind.word(), self.fingerprint, self.subject)
    }

    /// A line as [`Issued::line`] writes it, its fields apart by any run of ASCII whitespace
    /// (a line edited by hand, tabs, CRLF); `None`: a line cut short or damaged (its serial and
    /// kind are whole only where whitespace follows each).
    pub fn parse(line: &str) -> Option<Issued> {
        let (serial, rest) = whole_serial(line)?;
        let (not_after, rest) = field(rest)?;
        let (kind, rest) = field(rest)?;
        let kind = match kind {
            "conductor" => Kind::Conductor,
            "ca" => Kind::Ca,
            _ => return None,
        };
        let (fingerprint, subject) = field(rest).unwrap_or((rest, ""));
        if fingerprint.is_empty() {
            return None;
        }
        // Printed to a terminal: a line written by hand may hold what [`Issued::of`] replaces.
        let subject = subject.trim_end().chars().map(|ch| if ch.is_control() { '?' } else { ch }).collect();
        Some(Issued { serial, not_after: not_after.to_string(), kind, fingerprint: fingerprint.to_string(), subject })
    }
}

/// The first field of `s` and what follows it (leading whitespace gone); `None` when no
/// whitespace follows it (perhaps cut short).
fn field(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (f, rest) = s.split_once(|c: char| c.is_ascii_whitespace())?;
    Some((f, rest.trim_start_matches(|c: char| c.is_ascii_whitespace())))
}

/// A line's serial (its value, [`serial_value`]) when whole: hex, an even number of digits,
/// whitespace after it; and the rest of the line.
fn whole_serial(line: &str) -> Option<(String, &str)> {
    let (serial, rest) = field(line)?;
    if serial.is_empty() || serial.len() % 2 != 0 || serial.len() > 42 || !serial.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    Some((serial_value(&serial.to_ascii_lowercase()), rest))
}

/// Appends the line of `der` (issued as `kind`) to `ca_dir/root_issued.txt`: one write on a
/// line of its own (after a last line cut short), fdatasync, and the directory synced when
/// the file is new. Before the certificate leaves vouch: a certificate the list does not name
/// is one `vouch conductor revoke --serial` refuses.
pub fn record(ca_dir: &Path, der: &[u8], kind: Kind) -> Result<(), Error> {
    let entry = Issued::of(der, kind)?;
    let path = ca_dir.join(ROOT_ISSUED);
    // A list another user may write is no record of anything (see [`read`]).
    crate::files::trust::check_trusted(&path)?;
    let before = match crate::files::durable::read_regular(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let line = match &before {
        Some(b) if !b.is_empty() && !b.ends_with(b"\n") => format!("\n{}", entry.line()),
        _ => entry.line(),
    };
    crate::files::durable::append_line(&path, &line).map_err(|source| Error::Io {
        path: path.clone(),
        op: "append to",
        source,
    })?;
    if before.is_none() {
        crate::files::durable::sync_dir(ca_dir).map_err(|source| Error::Io {
            path: ca_dir.to_path_buf(),
            op: "sync",
            source,
        })?;
    }
    crate::files::fault::crash_point("root-issued:recorded");
    Ok(())
}

/// Every line of `ca_dir/root_issued.txt` that reads (none without the file), and how many
/// lines did not. The list decides whether a serial alone is a conductor's or a master CA's:
/// one owned by another user, or that group or others may write, is refused
/// ([`crate::files::trust::check_trusted`]), whatever it says.
pub fn read(ca_dir: &Path) -> Result<(Vec<Issued>, usize), Error> {
    let (lines, damaged) = scan(ca_dir)?;
    Ok((lines, damaged.len()))
}

/// The lines that read, and for each one that does not, the serial it begins with when that
/// serial is whole (`None`: not even that).
fn scan(ca_dir: &Path) -> Result<(Vec<Issued>, Vec<Option<String>>), Error> {
    let path = ca_dir.join(ROOT_ISSUED);
    crate::files::trust::check_trusted(&path)?;
    let bytes = match crate::files::durable::read_regular(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => return Err(Error::Io { path, op: "read", source }),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut damaged = Vec::new();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match Issued::parse(line) {
            Some(i) => out.push(i),
            None => damaged.push(whole_serial(line).map(|(s, _)| s)),
        }
    }
    Ok((out, damaged))
}

/// What `ca_dir/root_issued.txt` says of `serial` (its value, as [`serial_value`] gives it).
/// Deny by default: a serial recorded as a CA on any line is a CA, whatever another line says;
/// and one a damaged line begins with is no conductor of this list (that line may have been
/// its CA line).
pub fn find(ca_dir: &Path, serial: &str) -> Result<Option<Issued>, Error> {
    let (all, damaged) = scan(ca_dir)?;
    let mut found: Option<Issued> = None;
    for i in all.into_iter().filter(|i| i.serial == serial) {
        if i.kind == Kind::Ca {
            return Ok(Some(i));
        }
        found.get_or_insert(i);
    }
    if damaged.iter().flatten().any(|s| s == serial) {
        return Ok(None);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_and_a_damaged_one_does_not() {
        let i = Issued {
            serial: "4a01".into(),
            not_after: "2030-01-01T00:00:00Z".into(),
            kind: Kind::Ca,
            fingerprint: "ab".repeat(32),
            subject: "CN=vouch Master CA 0a1b2c3d".into(),
        };
        assert_eq!(Issued::parse(&i.line()), Some(i.clone()));
        let c = Issued { kind: Kind::Conductor, subject: "CN=c1".into(), ..i.clone() };
        assert_eq!(Issued::parse(&c.line()), Some(c));
        assert_eq!(Issued::parse("004a01 2030-01-01T00:00:00Z ca ab CN=x").map(|i| i.serial), Some("4a01".into()));
        for bad in ["", "4a01", "4a01 2030", "4a01 2030 co", "4a01 2030 node ab CN=x", "4a0 2030 ca ab CN=x"] {
            assert_eq!(Issued::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_serial_recorded_as_a_ca_anywhere_is_a_ca() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join(ROOT_ISSUED),
            "4a01 2030-01-01T00:00:00Z conductor ab CN=c\n4a01 2030-01-01T00:00:00Z ca ab CN=m\n4a02 2030-01",
        )
        .unwrap();
        assert_eq!(find(d.path(), "4a01").unwrap().map(|i| i.kind), Some(Kind::Ca));
        assert_eq!(find(d.path(), "4a02").unwrap(), None, "cut short");
        assert_eq!(read(d.path()).unwrap().1, 1);
    }

    #[test]
    fn tabs_read_and_a_damaged_line_leaves_its_serial_unknown() {
        let t = "4A01\t2030-01-01T00:00:00Z  ca\tab CN=m\r\n";
        assert_eq!(Issued::parse(t.trim_end()).map(|i| (i.serial, i.kind)), Some(("4a01".into(), Kind::Ca)));
        let d = tempfile::tempdir().unwrap();
        let conductor = "4a01 2030-01-01T00:00:00Z conductor ab CN=c\n4a02 2030-01-01T00:00:00Z conductor ab CN=d\n";
        std::fs::write(d.path().join(ROOT_ISSUED), format!("4a01 2030-01-01T00:00:00Z\n{conductor}4a0")).unwrap();
        assert_eq!(find(d.path(), "4a01").unwrap(), None, "a damaged line begins with it");
        assert_eq!(find(d.path(), "4a02").unwrap().map(|i| i.kind), Some(Kind::Conductor));
        assert_eq!(read(d.path()).unwrap().1, 2);
    }
}
