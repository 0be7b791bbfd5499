//! A small BER reader: what a cloud's PKCS#7 needs beyond DER. AWS's identity signatures
//! use indefinite lengths (`30 80 … 00 00`) and constructed OCTET STRINGs, so the strict
//! reader of `encoding::der` refuses them. Every read is bounds-checked, nesting is
//! bounded, and nothing here panics whatever the bytes.

/// How deep indefinite-length elements may nest (AWS's go five deep).
const MAX_DEPTH: usize = 32;

/// One element: its tag, its content (without an end-of-contents marker) and its whole
/// encoding.
#[derive(Debug, Clone, Copy)]
pub struct Element<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub raw: &'a [u8],
}

/// Reads consecutive elements.
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

    /// The next element, whatever its tag.
    pub fn any(&mut self) -> Result<Element<'a>, String> {
        let (element, used) = element(self.rest, 0)?;
        self.rest = &self.rest[used..];
        Ok(element)
    }

    /// The next element, which must carry `tag`.
    pub fn expect(&mut self, tag: u8, what: &str) -> Result<Element<'a>, String> {
        let e = self.any().map_err(|e| format!("{what}: {e}"))?;
        if e.tag != tag {
            return Err(format!("{what}: expected tag 0x{tag:02x}, found 0x{:02x}", e.tag));
        }
        Ok(e)
    }

    /// The next element if it carries `tag`, else nothing read.
    pub fn optional(&mut self, tag: u8) -> Result<Option<Element<'a>>, String> {
        match self.rest.first() {
            Some(&t) if t == tag => self.any().map(Some),
            _ => Ok(None),
        }
    }

    /// Requires that nothing is left.
    pub fn finish(&self, what: &str) -> Result<(), String> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(format!("{what}: {} unexpected trailing bytes", self.rest.len()))
        }
    }
}

/// Parses one element at the start of `bytes`: it and how many bytes it took.
fn element(bytes: &[u8], depth: usize) -> Result<(Element<'_>, usize), String> {
    if depth > MAX_DEPTH {
        return Err(format!("elements nest deeper than {MAX_DEPTH}"));
    }
    let (&tag, after_tag) = bytes.split_first().ok_or("unexpected end of data")?;
    if tag & 0x1f == 0x1f {
        return Err("multi-byte tags are not supported".into());
    }
    let (&l0, after_l0) = after_tag.split_first().ok_or("unexpected end of data in a length")?;
    if l0 == 0x80 {
        if tag & 0x20 == 0 {
            return Err("a primitive element has an indefinite length".into());
        }
        // Indefinite: nested elements up to the end-of-contents marker 00 00.
        let mut at = 0;
        loop {
            let rest = &after_l0[at..];
            if rest.starts_with(&[0, 0]) {
                let total = 2 + at + 2;
                return Ok((Element { tag, content: &after_l0[..at], raw: &bytes[..total] }, total));
            }
            if rest.is_empty() {
                return Err("an indefinite-length element has no end-of-contents".into());
            }
            let (_, used) = element(rest, depth + 1)?;
            at += used;
        }
    }
    let (len, header) = if l0 < 0x80 {
        (usize::from(l0), 2)
    } else {
        let n = usize::from(l0 & 0x7f);
        if n > 4 || after_l0.len() < n {
            return Err("a length is too large or cut short".into());
        }
        let len = after_l0[..n].iter().fold(0usize, |v, &b| (v << 8) | usize::from(b));
        (len, 2 + n)
    };
    let end = header.checked_add(len).ok_or("a length overflows")?;
    if bytes.len() < end {
        return Err(format!("an element claims {len} bytes but only {} remain", bytes.len() - header));
    }
    Ok((Element { tag, content: &bytes[header..end], raw: &bytes[..end] }, end))
}

/// The bytes of an OCTET STRING, primitive (`04`) or constructed (`24`, its chunks joined).
pub fn octets(e: &Element<'_>) -> Result<Vec<u8>, String> {
    fn collect(e: &Element<'_>, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
        match e.tag {
            0x04 => {
                out.extend_from_slice(e.content);
                Ok(())
            }
            0x24 if depth < MAX_DEPTH => {
                let mut r = Reader::new(e.content);
                while !r.is_empty() {
                    collect(&r.any()?, out, depth + 1)?;
                }
                Ok(())
            }
            t => Err(format!("expected an OCTET STRING, found tag 0x{t:02x}")),
        }
    }
    let mut out = Vec::new();
    collect(e, &mut out, 0)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indefinite_lengths_and_constructed_octets() {
        // [0] indefinite { OCTET STRING constructed indefinite { "ab", "c" } }
        let bytes = [0xa0, 0x80, 0x24, 0x80, 0x04, 2, b'a', b'b', 0x04, 1, b'c', 0, 0, 0, 0];
        let mut r = Reader::new(&bytes);
        let outer = r.expect(0xa0, "outer").unwrap();
        r.finish("all").unwrap();
        let inner = Reader::new(outer.content).any().unwrap();
        assert_eq!(octets(&inner).unwrap(), b"abc");
    }

    #[test]
    fn broken_input_is_an_error_never_a_panic() {
        for bad in [&[0x30, 0x80][..], &[0x30, 0x85, 1, 1, 1, 1, 1], &[0x04, 0x80, 0, 0], &[0x30, 5, 1], &[0x1f, 1]] {
            assert!(Reader::new(bad).any().is_err(), "{bad:?}");
        }
        let deep: Vec<u8> = std::iter::repeat_n([0x30u8, 0x80], 100).flatten().collect();
        assert!(Reader::new(&deep).any().is_err());
    }
}
