//! A small, strict DER reader and writer: just what PKCS#10 and the vouch
//! attributes need. Every read is bounds-checked and returns an error, never
//! panics, whatever bytes it is given.

use std::fmt;

/// Universal tags used here.
pub mod tag {
    pub const BOOLEAN: u8 = 0x01;
    pub const INTEGER: u8 = 0x02;
    pub const BIT_STRING: u8 = 0x03;
    pub const OCTET_STRING: u8 = 0x04;
    pub const NULL: u8 = 0x05;
    pub const OID: u8 = 0x06;
    pub const UTF8_STRING: u8 = 0x0c;
    pub const PRINTABLE_STRING: u8 = 0x13;
    pub const T61_STRING: u8 = 0x14;
    pub const IA5_STRING: u8 = 0x16;
    pub const SEQUENCE: u8 = 0x30;
    pub const SET: u8 = 0x31;
    /// `[0]` constructed, context-specific.
    pub const CONTEXT_0: u8 = 0xa0;
}

/// What went wrong while reading DER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerError(pub String);

impl fmt::Display for DerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DerError {}

fn err<T>(msg: impl Into<String>) -> Result<T, DerError> {
    Err(DerError(msg.into()))
}

/// One TLV element: its tag, its content, and the whole encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub raw: &'a [u8],
}

/// Reads consecutive TLV elements from a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads the next element, whatever its tag.
    pub fn any(&mut self) -> Result<Tlv<'a>, DerError> {
        let bytes = self.rest;
        let (&t, after_tag) = bytes.split_first().ok_or_else(|| DerError("unexpected end of data".into()))?;
        if t & 0x1f == 0x1f {
            return err("multi-byte tags are not supported");
        }
        let (&l0, mut after_len) =
            after_tag.split_first().ok_or_else(|| DerError("unexpected end of data in a length".into()))?;
        let len: usize = if l0 < 0x80 {
            usize::from(l0)
        } else {
            let n = usize::from(l0 & 0x7f);
            if n == 0 {
                return err("indefinite lengths are not DER");
            }
            if n > 4 {
                return err("length too large");
            }
            if after_len.len() < n {
                return err("unexpected end of data in a length");
            }
            let mut v: usize = 0;
            for &b in &after_len[..n] {
                v = (v << 8) | usize::from(b);
            }
            if v < 0x80 || (n > 1 && after_len[0] == 0) {
                return err("non-minimal length encoding");
            }
            after_len = &after_len[n..];
            v
        };
        if after_len.len() < len {
            return err(format!("element claims {len} bytes but only {} remain", after_len.len()));
        }
        let header = bytes.len() - after_len.len();
        let content = &after_len[..len];
        let raw = &bytes[..header + len];
        self.rest = &after_len[len..];
        Ok(Tlv { tag: t, content, raw })
    }

    /// Reads the next element and requires its tag.
    pub fn next_tag(&mut self, want: u8, what: &str) -> Result<Tlv<'a>, DerError> {
        let tlv = self.any().map_err(|e| DerError(format!("{what}: {e}")))?;
        if tlv.tag != want {
            return err(format!("{what}: expected tag 0x{want:02x}, found 0x{:02x}", tlv.tag));
        }
        Ok(tlv)
    }

    /// Requires that nothing is left.
    pub fn finish(&self, what: &str) -> Result<(), DerError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            err(format!("{what}: {} unexpected trailing bytes", self.rest.len()))
        }
    }
}

/// Decodes the content of an OBJECT IDENTIFIER into arcs.
pub fn oid_arcs(content: &[u8]) -> Result<Vec<u64>, DerError> {
    if content.is_empty() {
        return err("empty OID");
    }
    let mut arcs = Vec::new();
    let mut v: u64 = 0;
    let mut in_arc = false;
    for &b in content {
        if !in_arc && b == 0x80 {
            return err("non-minimal OID arc");
        }
        if v > (u64::MAX >> 7) {
            return err("OID arc too large");
        }
        v = (v << 7) | u64::from(b & 0x7f);
        in_arc = true;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = if v < 40 {
                    0
                } else if v < 80 {
                    1
                } else {
                    2
                };
                arcs.push(first);
                arcs.push(v - first * 40);
            } else {
                arcs.push(v);
            }
            v = 0;
            in_arc = false;
        }
    }
    if in_arc {
        return err("truncated OID");
    }
    Ok(arcs)
}

/// Formats OID arcs as a dotted string.
pub fn oid_to_string(arcs: &[u64]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(arcs.len() * 4);
    for (i, a) in arcs.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        let _ = write!(out, "{a}");
    }
    out
}

// ---- writing ----

/// Encodes a length.
fn push_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// Encodes one TLV.
pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    push_len(&mut out, content.len());
    out.extend_from_slice(content);
    out
}

/// Encodes a constructed element from already-encoded parts.
pub fn constructed(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let content: Vec<u8> = parts.concat();
    tlv(tag, &content)
}

pub fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    constructed(tag::SEQUENCE, parts)
}

/// A DER SET OF: the elements sorted by their encodings, as X.690 requires.
pub fn set_of(mut elements: Vec<Vec<u8>>) -> Vec<u8> {
    elements.sort();
    let refs: Vec<&[u8]> = elements.iter().map(Vec::as_slice).collect();
    constructed(tag::SET, &refs)
}

/// Encodes an OBJECT IDENTIFIER from arcs (at least two; first 0..=2).
pub fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut content = Vec::new();
    let (first, rest) = match arcs {
        // oids::parse bounds what users give; saturating, so that no arcs can panic here.
        [a, b, rest @ ..] => (a.saturating_mul(40).saturating_add(*b), rest),
        [a] => (a.saturating_mul(40), &[][..]),
        [] => (0, &[][..]),
    };
    push_base128(&mut content, first);
    for &a in rest {
        push_base128(&mut content, a);
    }
    tlv(tag::OID, &content)
}

fn push_base128(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 10];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = (v & 0x7f) as u8 | if i == tmp.len() - 1 { 0 } else { 0x80 };
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

pub fn utf8_string(s: &str) -> Vec<u8> {
    tlv(tag::UTF8_STRING, s.as_bytes())
}

/// A "PrintableString" as Puppet writes it: the bytes as they are, without
/// checking the PrintableString character set.
pub fn printable_string_raw(bytes: &[u8]) -> Vec<u8> {
    tlv(tag::PRINTABLE_STRING, bytes)
}

pub fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(bytes.len() + 1);
    content.push(0);
    content.extend_from_slice(bytes);
    tlv(tag::BIT_STRING, &content)
}

pub fn octet_string(bytes: &[u8]) -> Vec<u8> {
    tlv(tag::OCTET_STRING, bytes)
}

pub fn boolean(v: bool) -> Vec<u8> {
    tlv(tag::BOOLEAN, &[if v { 0xff } else { 0 }])
}

pub fn small_integer(v: u8) -> Vec<u8> {
    if v & 0x80 != 0 {
        tlv(tag::INTEGER, &[0, v])
    } else {
        tlv(tag::INTEGER, &[v])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oid_roundtrip() {
        let arcs = [1, 3, 6, 1, 4, 1, 34380, 2, 0];
        let enc = oid(&arcs);
        assert_eq!(enc, [0x06, 0x0a, 0x2b, 6, 1, 4, 1, 0x82, 0x8c, 0x4c, 2, 0]);
        let mut r = Reader::new(&enc);
        let t = r.next_tag(tag::OID, "oid").unwrap();
        assert_eq!(oid_arcs(t.content).unwrap(), arcs);
    }

    #[test]
    fn long_lengths() {
        let content = vec![7u8; 300];
        let enc = tlv(tag::OCTET_STRING, &content);
        assert_eq!(&enc[..4], &[0x04, 0x82, 0x01, 0x2c]);
        let mut r = Reader::new(&enc);
        assert_eq!(r.any().unwrap().content.len(), 300);
        assert!(r.is_empty());
    }

    #[test]
    fn truncated_and_bad_lengths_are_errors() {
        for bad in [
            &[0x30u8][..],
            &[0x30, 0x05, 1, 2],
            &[0x30, 0x80],
            &[0x30, 0x81, 0x05, 1, 2, 3, 4, 5],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &[0x1f, 0x01, 0x00],
        ] {
            assert!(Reader::new(bad).any().is_err(), "{bad:?}");
        }
        assert!(oid_arcs(&[0x2b, 0x80, 0x01]).is_err());
        assert!(oid_arcs(&[0x2b, 0x86]).is_err());
    }
}
