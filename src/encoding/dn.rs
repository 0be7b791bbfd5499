//! Distinguished names compared structurally, never as display strings.
//!
//! A policy names a conductor's subject or issuer as vouch prints it (`CN=cloud1`,
//! `CN=launcher, O=Example`): RDNs in certificate (DER) order separated by `,`,
//! several attributes of one RDN separated by `+`, RFC 4514 escapes (`\,`, `\+`,
//! `\\`, `\"`, `\;`, `\<`, `\>`, `\=`, `\#`, `\ `, `\XX` hex). That text is parsed into
//! a [`Dn`], and a certificate's name is read from its DER into a [`Dn`]; the two
//! are compared attribute by attribute (type OID and decoded value, byte for byte).
//! A comma or plus sign inside a value is part of that value, so `CN=a\, O=b` (one
//! attribute) can never equal `CN=a, O=b` (two RDNs), although a display string
//! would show both as `CN=a, O=b`.

use crate::encoding::der::{self, tag, Reader};
use crate::encoding::oids;

/// One attribute value: text when the DER string type decodes, else the raw TLV
/// (which no policy text ever equals).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Text(String),
    Other(Vec<u8>),
}

/// A name: RDNs in DER order, each a sorted set of (attribute type, value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dn(pub Vec<Vec<(Vec<u64>, Value)>>);

/// Attribute type names accepted in policy text (and what vouch prints for them).
const NAMES: &[(&str, &[u64])] = &[
    ("CN", &[2, 5, 4, 3]),
    ("C", &[2, 5, 4, 6]),
    ("L", &[2, 5, 4, 7]),
    ("ST", &[2, 5, 4, 8]),
    ("O", &[2, 5, 4, 10]),
    ("OU", &[2, 5, 4, 11]),
    ("serialNumber", &[2, 5, 4, 5]),
    ("street", &[2, 5, 4, 9]),
    ("title", &[2, 5, 4, 12]),
    ("surname", &[2, 5, 4, 4]),
    ("givenName", &[2, 5, 4, 42]),
    ("DC", &[0, 9, 2342, 19200300, 100, 1, 25]),
    ("UID", &[0, 9, 2342, 19200300, 100, 1, 1]),
    ("uid", &[0, 9, 2342, 19200300, 100, 1, 1]),
    ("Email", &[1, 2, 840, 113549, 1, 9, 1]),
    ("emailAddress", &[1, 2, 840, 113549, 1, 9, 1]),
];

fn attribute_type(name: &str) -> Option<Vec<u64>> {
    if let Some((_, oid)) = NAMES.iter().find(|(n, _)| *n == name) {
        return Some(oid.to_vec());
    }
    // x509-parser prints unknown types as their OID; accept dotted form (without a name).
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return oids::parse(name);
    }
    None
}

fn decode_value(t: u8, content: &[u8], raw: &[u8]) -> Value {
    const NUMERIC: u8 = 0x12;
    const VISIBLE: u8 = 0x1a;
    const UNIVERSAL: u8 = 0x1c;
    const BMP: u8 = 0x1e;
    let text = match t {
        tag::UTF8_STRING | tag::PRINTABLE_STRING | tag::IA5_STRING | tag::T61_STRING | NUMERIC | VISIBLE => {
            String::from_utf8(content.to_vec()).ok()
        }
        BMP if content.len() % 2 == 0 => {
            let units: Vec<u16> = content.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()
        }
        UNIVERSAL if content.len() % 4 == 0 => content
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect::<Option<String>>(),
        _ => None,
    };
    match text {
        Some(s) => Value::Text(s),
        None => Value::Other(raw.to_vec()),
    }
}

impl Dn {
    /// Reads a DER Name (SEQUENCE OF SET OF AttributeTypeAndValue), strictly.
    pub fn from_der(name: &[u8]) -> Result<Dn, String> {
        let e = |e: der::DerError| e.to_string();
        let mut top = Reader::new(name);
        let seq = top.next_tag(tag::SEQUENCE, "Name").map_err(e)?;
        top.finish("Name").map_err(e)?;
        let mut rdns = Reader::new(seq.content);
        let mut out = Vec::new();
        while !rdns.is_empty() {
            let set = rdns.next_tag(tag::SET, "RDN").map_err(e)?;
            let mut avas = Reader::new(set.content);
            let mut rdn = Vec::new();
            while !avas.is_empty() {
                let ava = avas.next_tag(tag::SEQUENCE, "AttributeTypeAndValue").map_err(e)?;
                let mut f = Reader::new(ava.content);
                let oid = f.next_tag(tag::OID, "attribute type").map_err(e)?;
                let value = f.any().map_err(e)?;
                f.finish("AttributeTypeAndValue").map_err(e)?;
                rdn.push((der::oid_arcs(oid.content).map_err(e)?, decode_value(value.tag, value.content, value.raw)));
            }
            if rdn.is_empty() {
                return Err("an empty RDN".into());
            }
            rdn.sort();
            out.push(rdn);
        }
        Ok(Dn(out))
    }

    /// Parses policy text: `TYPE=value` attributes, `+` within an RDN, `,` between RDNs
    /// (in certificate order, as vouch prints names), RFC 4514 escapes in values.
    pub fn parse(text: &str) -> Result<Dn, String> {
        // Split into RDNs and attributes on unescaped ',' and '+', unescaping values.
        let mut rdns: Vec<Vec<(Vec<u64>, Value)>> = Vec::new();
        let mut rdn: Vec<(Vec<u64>, Value)> = Vec::new();
        let mut chars = text.chars();
        loop {
            let oid = read_type(&mut chars, text)?;
            let (value, end) = read_value(&mut chars, text)?;
            rdn.push((oid, Value::Text(value)));
            match end {
                Some('+') => {}
                Some(_) => {
                    rdn.sort();
                    rdns.push(std::mem::take(&mut rdn));
                }
                None => {
                    rdn.sort();
                    rdns.push(rdn);
                    break;
                }
            }
        }
        Ok(Dn(rdns))
    }
}

/// Attribute type, up to '='.
fn read_type(chars: &mut std::str::Chars<'_>, text: &str) -> Result<Vec<u64>, String> {
    let mut ty = String::new();
    let mut has_value = false;
    for c in chars.by_ref() {
        if c == '=' {
            has_value = true;
            break;
        }
        ty.push(c);
    }
    let ty = ty.trim();
    if !has_value {
        return Err(format!("{text:?}: {ty:?} has no '=value'"));
    }
    attribute_type(ty).ok_or_else(|| {
        format!(
            "{ty:?} is not an attribute type (CN, O, OU, C, L, ST, DC, UID, serialNumber, emailAddress, … or a dotted OID)"
        )
    })
}

/// A value's octets as they are read.
#[derive(Default)]
struct ValueOctets {
    octets: Vec<u8>,
    /// Length up to the last character that is not an unescaped space.
    keep: usize,
    /// Whether the value starts with an escaped '#' (`\#`, text, not BER).
    first_escaped_hash: bool,
}

/// Value, up to an unescaped ',' or '+' or the end, as octets (a `\XX` escape is one
/// octet of UTF-8). Unescaped spaces at either end are not part of it (vouch prints ", "
/// between RDNs); `\ ` keeps one. Returns the value and the separator that ended it.
fn read_value(chars: &mut std::str::Chars<'_>, text: &str) -> Result<(String, Option<char>), String> {
    let mut value = ValueOctets::default();
    let mut end = None;
    while let Some(c) = chars.next() {
        match c {
            ',' | '+' => {
                end = Some(c);
                break;
            }
            '\\' => read_escape(chars, text, &mut value)?,
            '"' | ';' | '<' | '>' => {
                return Err(format!("{text:?}: '{c}' must be escaped with '\\' inside a value"));
            }
            ' ' if value.octets.is_empty() => {}
            _ => {
                let mut buf = [0u8; 4];
                value.octets.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                if c != ' ' {
                    value.keep = value.octets.len();
                }
            }
        }
    }
    value.octets.truncate(value.keep);
    let text_value = String::from_utf8(value.octets).map_err(|_| format!("{text:?}: a '\\XX' escape is not UTF-8"))?;
    if text_value.starts_with('#') && !value.first_escaped_hash {
        return Err(format!("{text:?}: '#…' (BER-encoded) values are not accepted; give the value as text"));
    }
    Ok((text_value, end))
}

/// What follows a '\': one of the special characters, or two hex digits (one octet).
fn read_escape(chars: &mut std::str::Chars<'_>, text: &str, value: &mut ValueOctets) -> Result<(), String> {
    let Some(n) = chars.next() else { return Err(format!("{text:?} ends with a lone '\\'")) };
    if "\\,+\"=;<># ".contains(n) {
        if value.octets.is_empty() && n == '#' {
            value.first_escaped_hash = true;
        }
        let mut buf = [0u8; 4];
        value.octets.extend_from_slice(n.encode_utf8(&mut buf).as_bytes());
    } else {
        let m = chars.next().unwrap_or(' ');
        let hex: String = [n, m].iter().collect();
        match (n.is_ascii_hexdigit() && m.is_ascii_hexdigit(), u8::from_str_radix(&hex, 16)) {
            (true, Ok(b)) => value.octets.push(b),
            _ => return Err(format!("{text:?}: '\\{hex}' is not an escape")),
        }
    }
    value.keep = value.octets.len();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(rdns: &[&[(&[u64], &str)]]) -> Vec<u8> {
        let rdn_ders: Vec<Vec<u8>> = rdns
            .iter()
            .map(|rdn| {
                der::set_of(rdn.iter().map(|(oid, v)| der::sequence(&[&der::oid(oid), &der::utf8_string(v)])).collect())
            })
            .collect();
        let refs: Vec<&[u8]> = rdn_ders.iter().map(Vec::as_slice).collect();
        der::sequence(&refs)
    }

    const CN: &[u64] = &[2, 5, 4, 3];
    const O: &[u64] = &[2, 5, 4, 10];

    #[test]
    fn policy_text_as_vouch_prints_names() {
        let two = Dn::from_der(&name(&[&[(CN, "launcher")], &[(O, "Example Fleet")]])).unwrap();
        assert_eq!(Dn::parse("CN=launcher, O=Example Fleet").unwrap(), two);
        assert_eq!(Dn::parse("CN=launcher,O=Example Fleet").unwrap(), two);
        assert_ne!(Dn::parse("O=Example Fleet, CN=launcher").unwrap(), two, "order is the certificate's");
        let multi = Dn::from_der(&name(&[&[(CN, "a"), (O, "b")]])).unwrap();
        assert_eq!(Dn::parse("CN=a + O=b").unwrap(), multi);
        assert_eq!(Dn::parse("O=b+CN=a").unwrap(), multi, "attributes of one RDN are a set");
        assert_eq!(Dn::parse("2.5.4.3=a+2.5.4.10=b").unwrap(), multi);
    }

    #[test]
    fn names_that_display_alike_never_match() {
        // One CN holding ", O=Example Fleet" displays exactly like two RDNs.
        let lookalike = Dn::from_der(&name(&[&[(CN, "launcher, O=Example Fleet")]])).unwrap();
        assert_ne!(Dn::parse("CN=launcher, O=Example Fleet").unwrap(), lookalike);
        assert_eq!(Dn::parse("CN=launcher\\, O=Example Fleet").unwrap(), lookalike);
        let plus = Dn::from_der(&name(&[&[(CN, "a + O=b")]])).unwrap();
        assert_ne!(Dn::parse("CN=a + O=b").unwrap(), plus);
        assert_eq!(Dn::parse("CN=a \\+ O=b").unwrap(), plus);
        // A non-string value never equals text, whatever its bytes.
        let octets =
            der::sequence(&[&der::set_of(vec![der::sequence(&[&der::oid(CN), &der::octet_string(b"launcher")])])]);
        assert_ne!(Dn::parse("CN=launcher").unwrap(), Dn::from_der(&octets).unwrap());
    }

    #[test]
    fn escapes_and_errors() {
        let v = |s: &str| Dn::parse(s).map(|d| d.0[0][0].1.clone());
        assert_eq!(v("CN=a\\2cb").unwrap(), Value::Text("a,b".into()));
        assert_eq!(v("CN=caf\\c3\\a9").unwrap(), Value::Text("café".into()));
        assert_eq!(v("CN=\\ a\\ ").unwrap(), Value::Text(" a ".into()));
        assert_eq!(v("CN= a ").unwrap(), Value::Text("a".into()));
        assert_eq!(v("CN=a=b").unwrap(), Value::Text("a=b".into()));
        for bad in ["", "XX=a", "CN", "CN=a\\", "CN=a\\q", "CN=a;b", "CN=\"a\"", "CN=#0403", "CN=\\c3"] {
            assert!(Dn::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn der_read_strictly() {
        let good = name(&[&[(CN, "a")]]);
        assert!(Dn::from_der(&good).is_ok());
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(Dn::from_der(&trailing).is_err());
        let extra = der::sequence(&[&der::set_of(vec![der::sequence(&[
            &der::oid(CN),
            &der::utf8_string("a"),
            &der::utf8_string("b"),
        ])])]);
        assert!(Dn::from_der(&extra).is_err());
    }
}
