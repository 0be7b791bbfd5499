//! The one bounded reader for every file or stream a user names (`--csr`, `--cert`, `--key`,
//! `--attributes`, `--classification`, `--policy` and the trust anchors it names, Puppet
//! Server's CA files, standard input): at most the limit of its kind plus one byte is read,
//! so `/dev/zero`, an endless FIFO or a huge file is refused at once instead of filling memory.
#![deny(clippy::arithmetic_side_effects)]

use std::io::Read;
use std::path::Path;

/// What an input is, and so how much of it vouch reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A certificate request (`--csr`, the hook's stdin).
    Csr,
    /// A certificate or certificate bundle (`--cert`, a CA's certificates).
    Cert,
    /// A PEM private key (`--key`, the CA's keys).
    Key,
    /// An attributes file (`vouch csr --attributes`).
    Attributes,
    /// A classification (`--classification`): its own 64 KiB cap.
    Classification,
    /// A policy file.
    Policy,
    /// A file a policy names (trusted roots, intermediates, CRLs) or a Puppet Server CRL.
    TrustFile,
}

/// The limits, in bytes.
pub const CSR_MAX: u64 = 1024 * 1024;
pub const CERT_MAX: u64 = 1024 * 1024;
pub const KEY_MAX: u64 = 1024 * 1024;
pub const ATTRIBUTES_MAX: u64 = 1024 * 1024;
pub const POLICY_MAX: u64 = 4 * 1024 * 1024;
pub const TRUST_FILE_MAX: u64 = 16 * 1024 * 1024;

impl Kind {
    pub fn limit(self) -> u64 {
        match self {
            Kind::Csr => CSR_MAX,
            Kind::Cert => CERT_MAX,
            Kind::Key => KEY_MAX,
            Kind::Attributes => ATTRIBUTES_MAX,
            // A usize always fits in a u64 on the platforms vouch builds for.
            Kind::Classification => {
                u64::try_from(crate::vouching::classification::DEFAULT_MAX_BYTES).unwrap_or(64 * 1024)
            }
            Kind::Policy => POLICY_MAX,
            Kind::TrustFile => TRUST_FILE_MAX,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Csr => "certificate request",
            Kind::Cert => "certificate",
            Kind::Key => "private key",
            Kind::Attributes => "attributes file",
            Kind::Classification => "classification",
            Kind::Policy => "policy",
            Kind::TrustFile => "certificate or CRL file",
        }
    }

    /// The name with its article: "an attributes file", "a policy".
    pub fn a_name(self) -> String {
        let name = self.name();
        let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        format!("{article} {name}")
    }
}

/// A limit for people: 64 KiB, 1 MiB.
pub fn show_limit(n: u64) -> String {
    if n >= 1024 * 1024 && n % (1024 * 1024) == 0 {
        format!("{} MiB", n / (1024 * 1024))
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// The error for an input over its limit: kind `FileTooLarge`, the message naming the limit.
pub fn too_large(kind: Kind) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("it is larger than {}, the most vouch reads of {}", show_limit(kind.limit()), kind.a_name()),
    )
}

/// Reads at most the kind's limit from `r`; one byte more is an error ([`too_large`]).
pub fn read_bounded(r: impl Read, kind: Kind) -> std::io::Result<Vec<u8>> {
    let limit = kind.limit();
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if u64::try_from(buf.len()).unwrap_or(u64::MAX) > limit {
        return Err(too_large(kind));
    }
    Ok(buf)
}

/// Reads the file at `path` (any kind of file: a FIFO or device too) up to the kind's limit.
pub fn read_path(path: &Path, kind: Kind) -> std::io::Result<Vec<u8>> {
    read_bounded(std::fs::File::open(path)?, kind)
}

/// [`read_path`] as UTF-8 text.
pub fn read_path_text(path: &Path, kind: Kind) -> std::io::Result<String> {
    String::from_utf8(read_path(path, kind)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_limit_and_refuses_one_byte_more() {
        let limit = usize::try_from(Kind::Csr.limit()).unwrap();
        assert_eq!(read_bounded(&vec![7u8; limit][..], Kind::Csr).unwrap().len(), limit);
        let e = read_bounded(std::io::repeat(0), Kind::Csr).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("1 MiB"), "{e}");
        assert!(read_bounded(std::io::repeat(0), Kind::Classification).unwrap_err().to_string().contains("64 KiB"));
    }
}

/// One line of a text stream, at most `max` bytes (without its newline).
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line (its newline removed; the last line may have none).
    Text(Vec<u8>),
    /// A line longer than `max` (never held whole; the stream is left inside it: stop, or
    /// [`skip_line`]).
    TooLong,
}

/// Reads the next line of `r` into a buffer of at most `max` bytes: `None` at the end. A
/// longer line is answered [`Line::TooLong`] after `max` bytes, so a stream without
/// newlines (`/dev/zero`) never grows memory.
pub fn read_line_bounded(r: &mut impl std::io::BufRead, max: usize) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let n = std::io::BufRead::read_until(
        &mut std::io::Read::take(r.by_ref(), (max as u64).saturating_add(1)),
        b'\n',
        &mut buf,
    )?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(Line::Text(buf)));
    }
    if buf.len() <= max {
        return Ok(Some(Line::Text(buf)));
    }
    Ok(Some(Line::TooLong))
}

/// Reads through the rest of a line [`read_line_bounded`] found too long (in bounded steps;
/// on a stream that never ends, neither does this: use it on files only).
pub fn skip_line(r: &mut impl std::io::BufRead) -> std::io::Result<()> {
    loop {
        let (done, used) = {
            let avail = r.fill_buf()?;
            if avail.is_empty() {
                (true, 0)
            } else {
                match avail.iter().position(|b| *b == b'\n') {
                    Some(i) => (true, i.saturating_add(1)),
                    None => (false, avail.len()),
                }
            }
        };
        r.consume(used);
        if done {
            return Ok(());
        }
    }
}
