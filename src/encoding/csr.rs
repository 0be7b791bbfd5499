//! PKCS#10 certificate signing requests: a lenient reader for what Puppet
//! agents really send, and a writer that encodes exactly as a Puppet agent does.
//!
//! This module knows no policy. It reports what the CSR says; the decision
//! core judges it.

use crate::encoding::der::{self, tag, Reader, Tlv};
use crate::encoding::oids;
use aws_lc_rs::signature as sig;

/// Why a CSR could not be read or its self-signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsrError {
    /// No PEM block and not DER either.
    NotFound { detail: String },
    /// The DER structure is broken.
    Malformed { detail: String },
    /// A signature algorithm vouch does not verify (e.g. RSA-PSS, DSA).
    UnsupportedSignatureAlgorithm { oid: String },
    /// A public key type vouch does not accept.
    UnsupportedKey { detail: String },
    /// The CSR's signature does not verify with its own public key.
    BadSelfSignature,
}

impl std::fmt::Display for CsrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CsrError::NotFound { detail } => write!(f, "no certificate request found: {detail}"),
            CsrError::Malformed { detail } => {
                write!(f, "the certificate request is malformed: {detail}")
            }
            CsrError::UnsupportedSignatureAlgorithm { oid } => {
                write!(f, "the certificate request is signed with an unsupported algorithm {oid}")
            }
            CsrError::UnsupportedKey { detail } => write!(f, "unsupported public key: {detail}"),
            CsrError::BadSelfSignature => f.write_str("the certificate request's self-signature does not verify"),
        }
    }
}

impl std::error::Error for CsrError {}

fn malformed(e: impl std::fmt::Display) -> CsrError {
    CsrError::Malformed { detail: e.to_string() }
}

/// The kind of a public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    Rsa { bits: usize },
    P256,
    P384,
    Ed25519,
}

impl std::fmt::Display for KeyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyKind::Rsa { bits } => write!(f, "RSA-{bits}"),
            KeyKind::P256 => f.write_str("ECDSA P-256"),
            KeyKind::P384 => f.write_str("ECDSA P-384"),
            KeyKind::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

/// One value of a CSR attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrValue {
    /// The DER tag it came with (Puppet writes PrintableString, 0x13).
    pub tag: u8,
    /// Its content bytes, undecoded.
    pub bytes: Vec<u8>,
}

/// A CSR attribute with all its values, in the order they came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub oid: Vec<u64>,
    pub values: Vec<AttrValue>,
}

/// A requested extension (from the extensionRequest attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedExtension {
    pub oid: Vec<u64>,
    pub critical: bool,
    /// The extnValue OCTET STRING's content (itself DER, e.g. a UTF8String).
    pub value: Vec<u8>,
}

impl RequestedExtension {
    /// The value as a string if it is a DER UTF8String, as Puppet writes them.
    pub fn utf8_value(&self) -> Option<&str> {
        let mut r = Reader::new(&self.value);
        let t = r.any().ok()?;
        if t.tag != tag::UTF8_STRING || !r.is_empty() {
            return None;
        }
        std::str::from_utf8(t.content).ok()
    }
}

/// A parsed, self-signature-checked CSR.
#[derive(Debug, Clone)]
pub struct Csr {
    /// The whole DER encoding.
    pub der: Vec<u8>,
    /// Every commonName in the subject, decoded leniently.
    pub common_names: Vec<String>,
    /// The SubjectPublicKeyInfo, DER, in its one canonical encoding (see [`canonical_spki`]).
    pub spki: Vec<u8>,
    pub key_kind: KeyKind,
    /// All attributes except extensionRequest, in order.
    pub attributes: Vec<Attribute>,
    /// The extensionRequest attributes seen (more than one is a defect the decision reports).
    pub extension_request_attributes: usize,
    /// The values in all extensionRequest attributes' SETs (other than one per attribute
    /// is a defect the decision reports: two values are never merged silently).
    pub extension_request_values: usize,
    /// Extensions requested, in order.
    pub extensions: Vec<RequestedExtension>,
}

impl Csr {
    /// All attributes with `oid`.
    pub fn attributes_with(&self, oid: &[u64]) -> impl Iterator<Item = &Attribute> {
        let oid = oid.to_vec();
        self.attributes.iter().filter(move |a| a.oid == oid)
    }
}

/// The most attributes, and the most extension requests, a CSR may carry.
pub const MAX_ITEMS: usize = 64;

/// Reads a CSR from PEM (anywhere in the input, CRLF and junk tolerated) or DER,
/// and verifies its self-signature.
pub fn parse(input: &[u8]) -> Result<Csr, CsrError> {
    let der = if input.first() == Some(&tag::SEQUENCE) {
        input.to_vec()
    } else {
        // Whatever reads this body after vouch (Puppet Server's BouncyCastle, OpenSSL) must
        // find the same request: exactly one PEM block, its BEGIN and END lines starting at
        // column 0, and no other "-----BEGIN" anywhere (junk lines around it are tolerated,
        // as Puppet Server hands them over).
        let text = String::from_utf8_lossy(input);
        let begins = text.matches("-----BEGIN").count();
        if begins > 1 {
            return Err(malformed(format!("the input holds {begins} PEM blocks; exactly one is accepted")));
        }
        let at_line_start = |marker: &str| text.find(marker).is_some_and(|i| i == 0 || text[..i].ends_with('\n'));
        if begins == 1 && !(at_line_start("-----BEGIN") && at_line_start("-----END")) {
            return Err(malformed("the PEM BEGIN and END lines must start at the beginning of a line"));
        }
        match crate::encoding::pem::find(input, &["CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST"]) {
            Ok((_, der)) => der,
            Err(crate::encoding::pem::PemError::NoBlock { .. }) => {
                return Err(CsrError::NotFound {
                    detail: "the input holds no '-----BEGIN CERTIFICATE REQUEST-----' block and is not DER".into(),
                })
            }
            Err(e) => return Err(malformed(e)),
        }
    };
    parse_der(der)
}

fn parse_der(der: Vec<u8>) -> Result<Csr, CsrError> {
    let mut top = Reader::new(&der);
    let outer = top.next_tag(tag::SEQUENCE, "CertificationRequest").map_err(malformed)?;
    top.finish("CertificationRequest").map_err(malformed)?;
    let mut r = Reader::new(outer.content);
    let cri = r.next_tag(tag::SEQUENCE, "certificationRequestInfo").map_err(malformed)?;
    let alg = r.next_tag(tag::SEQUENCE, "signatureAlgorithm").map_err(malformed)?;
    let sigbits = r.next_tag(tag::BIT_STRING, "signature").map_err(malformed)?;
    r.finish("CertificationRequest").map_err(malformed)?;

    let mut info = Reader::new(cri.content);
    let version = info.next_tag(tag::INTEGER, "version").map_err(malformed)?;
    if version.content != [0] {
        return Err(malformed("version is not 1 (0)"));
    }
    let subject = info.next_tag(tag::SEQUENCE, "subject").map_err(malformed)?;
    let spki = info.next_tag(tag::SEQUENCE, "subjectPKInfo").map_err(malformed)?;
    let mut attributes = Vec::new();
    let mut extensions = Vec::new();
    let mut extension_request_attributes = 0;
    let mut extension_request_values = 0;
    if !info.is_empty() {
        let attrs = info.next_tag(tag::CONTEXT_0, "attributes").map_err(malformed)?;
        let mut ar = Reader::new(attrs.content);
        while !ar.is_empty() {
            let a = ar.next_tag(tag::SEQUENCE, "attribute").map_err(malformed)?;
            let mut fields = Reader::new(a.content);
            let oid_tlv = fields.next_tag(tag::OID, "attribute type").map_err(malformed)?;
            let oid = der::oid_arcs(oid_tlv.content).map_err(malformed)?;
            let set = fields.next_tag(tag::SET, "attribute values").map_err(malformed)?;
            fields.finish("attribute").map_err(malformed)?;
            if oid == oids::EXTENSION_REQUEST {
                extension_request_attributes += 1;
                let mut vr = Reader::new(set.content);
                while !vr.is_empty() {
                    let exts = vr.next_tag(tag::SEQUENCE, "extensionRequest").map_err(malformed)?;
                    extension_request_values += 1;
                    parse_extensions(exts, &mut extensions)?;
                }
                continue;
            }
            let mut values = Vec::new();
            let mut vr = Reader::new(set.content);
            while !vr.is_empty() {
                let v = vr.any().map_err(malformed)?;
                values.push(AttrValue { tag: v.tag, bytes: v.content.to_vec() });
            }
            attributes.push(Attribute { oid, values });
        }
    }
    info.finish("certificationRequestInfo").map_err(malformed)?;
    // A Puppet CSR carries a handful; thousands are a denial-of-service attempt.
    if attributes.len() > MAX_ITEMS || extensions.len() > MAX_ITEMS {
        return Err(malformed(format!(
            "{} attributes and {} extension requests; at most {MAX_ITEMS} of each are accepted",
            attributes.len(),
            extensions.len()
        )));
    }

    let common_names = parse_common_names(subject)?;
    let (key_kind, key_bits) = parse_spki(spki)?;
    // The key before the signature: a key vouch cannot verify with is reported as such,
    // not as a signature that does not verify.
    check_key_size(key_kind)?;

    // Self-signature.
    let mut ar = Reader::new(alg.content);
    let alg_oid_tlv = ar.next_tag(tag::OID, "signature algorithm").map_err(malformed)?;
    let alg_oid = der::oid_arcs(alg_oid_tlv.content).map_err(malformed)?;
    // The signatureAlgorithm lies outside the signed part, so anyone can rewrite it: it must
    // be exactly the one encoding its RFC prescribes, or another reader (OpenSSL, Puppet
    // Server) may read the same request differently.
    match alg_oid.as_slice() {
        // RFC 5754 section 3.2 / RFC 4055 section 5 (RSA PKCS#1 v1.5): parameters NULL. (The RFCs
        // also tell readers to accept them absent; vouch, like webpki, takes the one DER form
        // every writer, Puppet's agent included, produces.)
        oids::SHA256_WITH_RSA | oids::SHA384_WITH_RSA | oids::SHA512_WITH_RSA => {
            let null = ar.next_tag(tag::NULL, "RSA signature algorithm parameters").map_err(malformed)?;
            if !null.content.is_empty() {
                return Err(malformed("RSA signature algorithm parameters: NULL with content"));
            }
            ar.finish("RSA signature algorithm (after its NULL parameters)").map_err(malformed)?;
        }
        // RFC 5758 section 3.2 (ECDSA) and RFC 8410 section 3 (Ed25519): parameters absent.
        oids::ECDSA_SHA256 | oids::ECDSA_SHA384 | oids::ED25519 => {
            ar.finish("signature algorithm (ECDSA and Ed25519 take no parameters)").map_err(malformed)?;
        }
        // Any other algorithm is refused below as unsupported, whatever its parameters.
        _ => {}
    }
    if sigbits.content.first() != Some(&0) {
        return Err(malformed("signature BIT STRING has unused bits"));
    }
    let signature = &sigbits.content[1..];
    let algorithm: &'static dyn sig::VerificationAlgorithm = match (alg_oid.as_slice(), key_kind) {
        (oids::SHA256_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA256,
        (oids::SHA384_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA384,
        (oids::SHA512_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA512,
        (oids::ECDSA_SHA256, KeyKind::P256) => &sig::ECDSA_P256_SHA256_ASN1,
        (oids::ECDSA_SHA384, KeyKind::P256) => &sig::ECDSA_P256_SHA384_ASN1,
        (oids::ECDSA_SHA256, KeyKind::P384) => &sig::ECDSA_P384_SHA256_ASN1,
        (oids::ECDSA_SHA384, KeyKind::P384) => &sig::ECDSA_P384_SHA384_ASN1,
        (oids::ED25519, KeyKind::Ed25519) => &sig::ED25519,
        _ => return Err(CsrError::UnsupportedSignatureAlgorithm { oid: oids::dotted(&alg_oid) }),
    };
    sig::UnparsedPublicKey::new(algorithm, key_bits)
        .verify(cri.raw, signature)
        .map_err(|_| CsrError::BadSelfSignature)?;

    let spki = canonical_spki(spki.raw)?;
    Ok(Csr {
        der,
        common_names,
        spki,
        key_kind,
        attributes,
        extension_request_attributes,
        extension_request_values,
        extensions,
    })
}

fn parse_extensions(exts: Tlv<'_>, out: &mut Vec<RequestedExtension>) -> Result<(), CsrError> {
    let mut er = Reader::new(exts.content);
    while !er.is_empty() {
        let ext = er.next_tag(tag::SEQUENCE, "extension").map_err(malformed)?;
        let mut f = Reader::new(ext.content);
        let oid_tlv = f.next_tag(tag::OID, "extension id").map_err(malformed)?;
        let oid = der::oid_arcs(oid_tlv.content).map_err(malformed)?;
        let mut next = f.any().map_err(malformed)?;
        let mut critical = false;
        if next.tag == tag::BOOLEAN {
            // DER: one octet, 0x00 or 0xff. Anything else could be read differently by
            // Puppet Server's parser than by vouch.
            critical = match next.content {
                [0x00] => false,
                [0xff] => true,
                other => {
                    return Err(malformed(format!(
                        "extension critical flag is not a DER BOOLEAN ({} octets: {other:02x?})",
                        other.len()
                    )))
                }
            };
            next = f.any().map_err(malformed)?;
        }
        if next.tag != tag::OCTET_STRING {
            return Err(malformed("extension value is not an OCTET STRING"));
        }
        f.finish("extension").map_err(malformed)?;
        out.push(RequestedExtension { oid, critical, value: next.content.to_vec() });
    }
    Ok(())
}

fn parse_common_names(subject: Tlv<'_>) -> Result<Vec<String>, CsrError> {
    let mut names = Vec::new();
    let mut rdns = Reader::new(subject.content);
    while !rdns.is_empty() {
        let rdn = rdns.next_tag(tag::SET, "subject RDN").map_err(malformed)?;
        let mut avas = Reader::new(rdn.content);
        while !avas.is_empty() {
            let ava = avas.next_tag(tag::SEQUENCE, "subject attribute").map_err(malformed)?;
            let mut f = Reader::new(ava.content);
            let oid_tlv = f.next_tag(tag::OID, "subject attribute type").map_err(malformed)?;
            let value = f.any().map_err(malformed)?;
            // Nothing may follow the value: bytes after it are ignored by some readers.
            f.finish("subject attribute").map_err(malformed)?;
            if der::oid_arcs(oid_tlv.content).map_err(malformed)? == oids::COMMON_NAME {
                let s = match value.tag {
                    tag::UTF8_STRING | tag::PRINTABLE_STRING | tag::IA5_STRING | tag::T61_STRING => {
                        String::from_utf8(value.content.to_vec())
                            .map_err(|_| malformed("the subject commonName is not UTF-8"))?
                    }
                    t => return Err(malformed(format!("the subject commonName has string type 0x{t:02x}"))),
                };
                names.push(s);
            }
        }
    }
    Ok(names)
}

/// The key kind of a DER SubjectPublicKeyInfo.
pub fn spki_kind(spki_der: &[u8]) -> Result<KeyKind, CsrError> {
    let mut r = Reader::new(spki_der);
    let spki = r.next_tag(tag::SEQUENCE, "SubjectPublicKeyInfo").map_err(malformed)?;
    parse_spki(spki).map(|(k, _)| k)
}

/// The one canonical DER encoding of a SubjectPublicKeyInfo: the key read strictly
/// (exact algorithm parameters, minimal integers, uncompressed EC points, nothing
/// trailing anywhere) and encoded again. Two encodings of one key give the same bytes,
/// so "the same key" is a byte comparison of canonical forms.
pub fn canonical_spki(spki_der: &[u8]) -> Result<Vec<u8>, CsrError> {
    let mut r = Reader::new(spki_der);
    let spki = r.next_tag(tag::SEQUENCE, "SubjectPublicKeyInfo").map_err(malformed)?;
    r.finish("SubjectPublicKeyInfo").map_err(malformed)?;
    let (kind, key) = parse_spki(spki)?;
    let alg = match kind {
        KeyKind::Rsa { .. } => der::sequence(&[&der::oid(oids::RSA_ENCRYPTION), &der::tlv(tag::NULL, &[])]),
        KeyKind::P256 => der::sequence(&[&der::oid(oids::EC_PUBLIC_KEY), &der::oid(oids::SECP256R1)]),
        KeyKind::P384 => der::sequence(&[&der::oid(oids::EC_PUBLIC_KEY), &der::oid(oids::SECP384R1)]),
        KeyKind::Ed25519 => der::sequence(&[&der::oid(oids::ED25519)]),
    };
    let key = match kind {
        KeyKind::Rsa { .. } => {
            let (n, e) = rsa_integers(key)?;
            der::sequence(&[&der::tlv(tag::INTEGER, n), &der::tlv(tag::INTEGER, e)])
        }
        _ => key.to_vec(),
    };
    Ok(der::sequence(&[&alg, &der::bit_string(&key)]))
}

/// Whether two SubjectPublicKeyInfos hold the same key, whatever their encodings.
/// One that cannot be read is compared as raw bytes (it is then a different key from
/// any readable one).
pub fn same_key(a: &[u8], b: &[u8]) -> bool {
    match (canonical_spki(a), canonical_spki(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The RSA modulus sizes vouch verifies signatures with (aws-lc's RSA_PKCS1_2048_8192).
pub const RSA_BITS: std::ops::RangeInclusive<usize> = 2048..=8192;

/// Refuses a key vouch cannot verify signatures with (an RSA modulus outside
/// [`RSA_BITS`]) as an unsupported key.
pub fn check_key_size(kind: KeyKind) -> Result<(), CsrError> {
    match kind {
        KeyKind::Rsa { bits } if !RSA_BITS.contains(&bits) => Err(CsrError::UnsupportedKey {
            detail: format!("RSA key of {bits} bits; {} to {} bits are accepted", RSA_BITS.start(), RSA_BITS.end()),
        }),
        _ => Ok(()),
    }
}

/// Returns the key kind and the subjectPublicKey bits, read strictly.
fn parse_spki<'a>(spki: Tlv<'a>) -> Result<(KeyKind, &'a [u8]), CsrError> {
    let mut r = Reader::new(spki.content);
    let alg = r.next_tag(tag::SEQUENCE, "public key algorithm").map_err(malformed)?;
    let bits = r.next_tag(tag::BIT_STRING, "public key").map_err(malformed)?;
    r.finish("SubjectPublicKeyInfo").map_err(malformed)?;
    if bits.content.first() != Some(&0) {
        return Err(malformed("public key BIT STRING has unused bits"));
    }
    let key = &bits.content[1..];
    let mut ar = Reader::new(alg.content);
    let oid_tlv = ar.next_tag(tag::OID, "public key algorithm").map_err(malformed)?;
    let oid = der::oid_arcs(oid_tlv.content).map_err(malformed)?;
    let kind = match oid.as_slice() {
        oids::RSA_ENCRYPTION => {
            // RFC 3279: the parameters MUST be NULL.
            let null = ar.next_tag(tag::NULL, "RSA parameters").map_err(malformed)?;
            if !null.content.is_empty() {
                return Err(malformed("RSA parameters: NULL with content"));
            }
            KeyKind::Rsa { bits: rsa_modulus_bits(key)? }
        }
        oids::EC_PUBLIC_KEY => {
            let curve = ar.next_tag(tag::OID, "EC curve").map_err(malformed)?;
            let (kind, coordinate) = match der::oid_arcs(curve.content).map_err(malformed)?.as_slice() {
                oids::SECP256R1 => (KeyKind::P256, 32),
                oids::SECP384R1 => (KeyKind::P384, 48),
                other => return Err(CsrError::UnsupportedKey { detail: format!("EC curve {}", oids::dotted(other)) }),
            };
            // Uncompressed points only: a compressed point is a second encoding of the same key.
            if key.len() != 1 + 2 * coordinate || key[0] != 0x04 {
                return Err(malformed("EC public key is not an uncompressed point of its curve"));
            }
            kind
        }
        oids::ED25519 => {
            if key.len() != 32 {
                return Err(malformed("Ed25519 public key is not 32 octets"));
            }
            KeyKind::Ed25519
        }
        other => return Err(CsrError::UnsupportedKey { detail: format!("algorithm {}", oids::dotted(other)) }),
    };
    // No parameters beyond those read above (RFC 8410: Ed25519 has none).
    ar.finish("public key algorithm").map_err(malformed)?;
    Ok((kind, key))
}

/// The modulus and exponent contents of a DER RSAPublicKey, each a minimal positive INTEGER.
fn rsa_integers(key: &[u8]) -> Result<(&[u8], &[u8]), CsrError> {
    let mut r = Reader::new(key);
    let seq = r.next_tag(tag::SEQUENCE, "RSAPublicKey").map_err(malformed)?;
    r.finish("RSAPublicKey").map_err(malformed)?;
    let mut f = Reader::new(seq.content);
    let n = f.next_tag(tag::INTEGER, "RSA modulus").map_err(malformed)?;
    let e = f.next_tag(tag::INTEGER, "RSA exponent").map_err(malformed)?;
    f.finish("RSAPublicKey").map_err(malformed)?;
    for (what, int) in [("modulus", n.content), ("exponent", e.content)] {
        match int {
            [] => return Err(malformed(format!("RSA {what} is empty"))),
            [b, ..] if b & 0x80 != 0 => return Err(malformed(format!("RSA {what} is negative"))),
            [0, b, ..] if b & 0x80 == 0 => return Err(malformed(format!("RSA {what} is not minimally encoded"))),
            [0] => return Err(malformed(format!("RSA {what} is zero"))),
            _ => {}
        }
    }
    Ok((n.content, e.content))
}

fn rsa_modulus_bits(key: &[u8]) -> Result<usize, CsrError> {
    let (n, _) = rsa_integers(key)?;
    let digits = match n {
        [0, rest @ ..] => rest,
        all => all,
    };
    let lead = digits.first().copied().unwrap_or(0);
    Ok(digits.len().saturating_sub(1) * 8 + (8 - lead.leading_zeros() as usize))
}

/// What to put into a CSR. Values are written as Puppet writes them: each
/// attribute value as a raw "PrintableString", each extension as a UTF8String.
#[derive(Debug, Clone, Default)]
pub struct CsrSpec {
    pub common_name: String,
    /// (OID, values): each value a whole DER TLV (see [`printable`]); normally
    /// one value each, fixtures may carry more.
    pub attributes: Vec<(Vec<u64>, Vec<Vec<u8>>)>,
    /// (OID, UTF-8 value).
    pub extension_requests: Vec<(Vec<u64>, String)>,
    /// Extension requests (by OID) to mark critical; only fixtures do this.
    pub critical: Vec<Vec<u64>>,
}

/// A value as Puppet encodes custom attributes: a "PrintableString" holding the raw bytes.
pub fn printable(value: &str) -> Vec<u8> {
    der::printable_string_raw(value.as_bytes())
}

/// Encodes and signs a CSR with `key`.
pub fn build(spec: &CsrSpec, key: &rcgen::KeyPair) -> Result<Vec<u8>, rcgen::Error> {
    sign_parts(&parts(spec, key), key)
}

/// The pieces of a certificationRequestInfo, already DER-encoded, so that fixtures and
/// tests can build requests that are wrong in one precise way.
#[derive(Debug, Clone)]
pub struct RequestParts {
    /// The subject Name.
    pub subject: Vec<u8>,
    pub spki: Vec<u8>,
    /// Each Attribute, except extensionRequest.
    pub attributes: Vec<Vec<u8>>,
    /// The values of the extensionRequest attribute's SET (normally one Extensions
    /// SEQUENCE); empty: no extensionRequest attribute.
    pub extension_request: Vec<Vec<u8>>,
}

/// Encodes `spec` (with `key`'s public key) as Puppet would.
pub fn parts(spec: &CsrSpec, key: &rcgen::KeyPair) -> RequestParts {
    use rcgen::PublicKeyData;
    let subject = der::sequence(&[&der::set_of(vec![der::sequence(&[
        &der::oid(oids::COMMON_NAME),
        &der::utf8_string(&spec.common_name),
    ])])]);
    let attributes = spec
        .attributes
        .iter()
        .map(|(oid, values)| der::sequence(&[&der::oid(oid), &der::set_of(values.clone())]))
        .collect();
    let mut extension_request = vec![];
    if !spec.extension_requests.is_empty() {
        let exts: Vec<Vec<u8>> = spec
            .extension_requests
            .iter()
            .map(|(oid, v)| {
                let value = der::octet_string(&der::utf8_string(v));
                if spec.critical.contains(oid) {
                    der::sequence(&[&der::oid(oid), &der::boolean(true), &value])
                } else {
                    der::sequence(&[&der::oid(oid), &value])
                }
            })
            .collect();
        let refs: Vec<&[u8]> = exts.iter().map(Vec::as_slice).collect();
        extension_request.push(der::sequence(&refs));
    }
    RequestParts { subject, spki: key.subject_public_key_info(), attributes, extension_request }
}

/// Assembles the certificationRequestInfo from `parts` and signs it with `key`.
pub fn sign_parts(parts: &RequestParts, key: &rcgen::KeyPair) -> Result<Vec<u8>, rcgen::Error> {
    let mut attrs = parts.attributes.clone();
    if !parts.extension_request.is_empty() {
        attrs.push(der::sequence(&[&der::oid(oids::EXTENSION_REQUEST), &der::set_of(parts.extension_request.clone())]));
    }
    attrs.sort();
    let attr_refs: Vec<&[u8]> = attrs.iter().map(Vec::as_slice).collect();
    let attributes = der::constructed(tag::CONTEXT_0, &attr_refs);
    let cri = der::sequence(&[&der::small_integer(0), &parts.subject, &parts.spki, &attributes]);
    let signature = rcgen::SigningKey::sign(key, &cri)?;
    let alg = signature_algorithm_der(key.algorithm());
    Ok(der::sequence(&[&cri, &alg, &der::bit_string(&signature)]))
}

/// The AlgorithmIdentifier DER for the signature algorithms vouch signs with.
pub fn signature_algorithm_der(alg: &'static rcgen::SignatureAlgorithm) -> Vec<u8> {
    if alg == &rcgen::PKCS_ECDSA_P256_SHA256 {
        der::sequence(&[&der::oid(oids::ECDSA_SHA256)])
    } else if alg == &rcgen::PKCS_ECDSA_P384_SHA384 {
        der::sequence(&[&der::oid(oids::ECDSA_SHA384)])
    } else if alg == &rcgen::PKCS_ED25519 {
        der::sequence(&[&der::oid(oids::ED25519)])
    } else {
        // RSA PKCS#1 v1.5 with SHA-256 takes an explicit NULL parameter.
        der::sequence(&[&der::oid(oids::SHA256_WITH_RSA), &der::tlv(tag::NULL, &[])])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_parse_roundtrip() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let spec = CsrSpec {
            common_name: "web01.example".into(),
            attributes: vec![(oids::ATTR_VERSION.to_vec(), vec![printable("1")])],
            extension_requests: vec![(oids::PP_REG.iter().copied().chain([13]).collect(), "web".into())],
            ..Default::default()
        };
        let der = build(&spec, &key).unwrap();
        let csr = parse(&der).unwrap();
        assert_eq!(csr.common_names, ["web01.example"]);
        assert_eq!(csr.key_kind, KeyKind::Ed25519);
        assert_eq!(csr.attributes.len(), 1);
        assert_eq!(csr.extensions[0].utf8_value(), Some("web"));
        let mut bad = der.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(parse(&bad).unwrap_err(), CsrError::BadSelfSignature);
    }

    #[test]
    fn too_many_extension_requests_are_refused() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let ext = |i: u64| (vec![1, 2, 3, i], "x".to_string());
        let ok = CsrSpec {
            common_name: "a.example".into(),
            extension_requests: (0..64).map(ext).collect(),
            ..Default::default()
        };
        assert!(parse(&build(&ok, &key).unwrap()).is_ok());
        let many = CsrSpec {
            common_name: "a.example".into(),
            extension_requests: (0..65).map(ext).collect(),
            ..Default::default()
        };
        assert!(matches!(parse(&build(&many, &key).unwrap()), Err(CsrError::Malformed { .. })));
    }

    #[test]
    fn exactly_one_pem_block_at_column_zero() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let spec = CsrSpec { common_name: "a.example".into(), ..Default::default() };
        let pem = crate::encoding::pem::encode("CERTIFICATE REQUEST", &build(&spec, &key).unwrap());
        assert!(parse(pem.as_bytes()).is_ok());
        assert!(parse(format!("junk\r\n{}junk\r\n", pem.replace('\n', "\r\n")).as_bytes()).is_ok());
        // Two blocks: another reader could take the second one.
        assert!(matches!(parse(format!("{pem}{pem}").as_bytes()), Err(CsrError::Malformed { .. })));
        // A BEGIN not at column 0 is invisible to OpenSSL and BouncyCastle.
        assert!(matches!(parse(format!("x{pem}").as_bytes()), Err(CsrError::Malformed { .. })));
    }

    fn spec() -> CsrSpec {
        CsrSpec {
            common_name: "a.example".into(),
            extension_requests: vec![(oids::PP_REG.iter().copied().chain([1]).collect(), "x".into())],
            ..Default::default()
        }
    }

    fn is_malformed(r: Result<Csr, CsrError>) -> bool {
        matches!(r, Err(CsrError::Malformed { .. }))
    }

    /// `spki` with `extra` appended inside its AlgorithmIdentifier.
    fn with_alg_params(spki: &[u8], extra: &[u8]) -> Vec<u8> {
        let mut r = Reader::new(spki);
        let outer = r.next_tag(tag::SEQUENCE, "spki").unwrap();
        let mut f = Reader::new(outer.content);
        let alg = f.next_tag(tag::SEQUENCE, "alg").unwrap();
        let bits = f.any().unwrap();
        der::sequence(&[&der::sequence(&[alg.content, extra]), bits.raw])
    }

    #[test]
    fn canonical_spki_is_the_encoding_of_every_accepted_key() {
        use rcgen::PublicKeyData;
        for kt in [
            crate::issuance::keys::KeyType::P256,
            crate::issuance::keys::KeyType::P384,
            crate::issuance::keys::KeyType::Ed25519,
            crate::issuance::keys::KeyType::Rsa2048,
        ] {
            let key = kt.generate().unwrap();
            let spki = key.subject_public_key_info();
            assert_eq!(canonical_spki(&spki).unwrap(), spki, "{kt:?}");
            let csr = parse(&build(&spec(), &key).unwrap()).unwrap();
            assert_eq!(csr.spki, spki);
            assert!(same_key(&csr.spki, &spki));
        }
    }

    #[test]
    fn spki_re_encodings_of_the_same_key_are_refused() {
        use rcgen::PublicKeyData;
        let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let ed_spki = ed.subject_public_key_info();
        let p256 = crate::issuance::keys::KeyType::P256.generate().unwrap();
        let p256_spki = p256.subject_public_key_info();
        let null = der::tlv(tag::NULL, &[]);
        // Parameters where there are none (Ed25519), or trailing after the curve (EC).
        for (key, spki) in [(&ed, with_alg_params(&ed_spki, &null)), (&p256, with_alg_params(&p256_spki, &null))] {
            let mut parts = parts(&spec(), key);
            parts.spki = spki.clone();
            assert!(is_malformed(parse(&sign_parts(&parts, key).unwrap())));
            assert!(canonical_spki(&spki).is_err());
            assert!(!same_key(&spki, &parts_spki(key)));
        }
        // Bytes after the BIT STRING, and after the whole SPKI.
        let mut trailing = ed_spki.clone();
        trailing.extend_from_slice(&null);
        assert!(canonical_spki(&trailing).is_err());
        let inner = Reader::new(&ed_spki).any().unwrap().content.to_vec();
        assert!(canonical_spki(&der::sequence(&[&inner, &null])).is_err());
        // A compressed EC point is the same key in another encoding.
        let point = &p256_spki[p256_spki.len() - 65..];
        let mut compressed = vec![0x02 | (point[64] & 1)];
        compressed.extend_from_slice(&point[1..33]);
        let alg = Reader::new(Reader::new(&p256_spki).any().unwrap().content).any().unwrap().raw.to_vec();
        let spki = der::sequence(&[&alg, &der::bit_string(&compressed)]);
        let mut parts = parts(&spec(), &p256);
        parts.spki = spki.clone();
        assert!(is_malformed(parse(&sign_parts(&parts, &p256).unwrap())));
        assert!(canonical_spki(&spki).is_err());
    }

    fn parts_spki(key: &rcgen::KeyPair) -> Vec<u8> {
        use rcgen::PublicKeyData;
        key.subject_public_key_info()
    }

    #[test]
    fn rsa_spki_read_strictly() {
        let rsa_alg = der::sequence(&[&der::oid(oids::RSA_ENCRYPTION), &der::tlv(tag::NULL, &[])]);
        let n = [&[0x00u8, 0xc1][..], &[0x5a; 255][..]].concat();
        let e = [0x01u8, 0x00, 0x01];
        let key = |n: &[u8], e: &[u8]| der::sequence(&[&der::tlv(tag::INTEGER, n), &der::tlv(tag::INTEGER, e)]);
        let good = der::sequence(&[&rsa_alg, &der::bit_string(&key(&n, &e))]);
        assert_eq!(canonical_spki(&good).unwrap(), good);
        assert_eq!(spki_kind(&good).unwrap(), KeyKind::Rsa { bits: 2048 });
        let padded = [&[0u8][..], &n[..]].concat();
        let no_null =
            der::sequence(&[&der::sequence(&[&der::oid(oids::RSA_ENCRYPTION)]), &der::bit_string(&key(&n, &e))]);
        for bad in [
            // Modulus with a superfluous leading zero.
            der::sequence(&[&rsa_alg, &der::bit_string(&key(&padded, &e))]),
            // Negative modulus.
            der::sequence(&[&rsa_alg, &der::bit_string(&key(&n[1..], &e))]),
            // Parameters absent (RFC 3279: NULL).
            no_null,
            // Bytes after the RSAPublicKey.
            der::sequence(&[&rsa_alg, &der::bit_string(&[key(&n, &e), vec![0, 0]].concat())]),
        ] {
            assert!(canonical_spki(&bad).is_err(), "{bad:02x?}");
        }
    }

    #[test]
    fn bytes_after_a_name_value_are_refused() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let mut p = parts(&spec(), &key);
        assert!(parse(&sign_parts(&p, &key).unwrap()).is_ok());
        p.subject = der::sequence(&[&der::set_of(vec![der::sequence(&[
            &der::oid(oids::COMMON_NAME),
            &der::utf8_string("a.example"),
            &der::utf8_string("evil.example"),
        ])])]);
        assert!(is_malformed(parse(&sign_parts(&p, &key).unwrap())));
    }

    #[test]
    fn critical_flag_must_be_a_der_boolean() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let ext = |flag: &[u8]| {
            let value = der::octet_string(&der::utf8_string("x"));
            let oid = der::oid(&oids::PP_REG.iter().copied().chain([1]).collect::<Vec<_>>());
            der::sequence(&[&der::sequence(&[&oid, &der::tlv(tag::BOOLEAN, flag), &value])])
        };
        let with = |flag: &[u8]| {
            let mut p = parts(&spec(), &key);
            p.extension_request = vec![ext(flag)];
            parse(&sign_parts(&p, &key).unwrap())
        };
        assert!(with(&[0xff]).unwrap().extensions[0].critical);
        assert!(!with(&[0x00]).unwrap().extensions[0].critical);
        for bad in [&[][..], &[0x01], &[0x00, 0xff], &[0xff, 0xff]] {
            assert!(is_malformed(with(bad)), "{bad:02x?}");
        }
    }

    #[test]
    fn extension_request_values_are_counted_not_merged() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let mut p = parts(&spec(), &key);
        let csr = parse(&sign_parts(&p, &key).unwrap()).unwrap();
        assert_eq!((csr.extension_request_attributes, csr.extension_request_values), (1, 1));
        p.extension_request.push(der::sequence(&[]));
        let csr = parse(&sign_parts(&p, &key).unwrap()).unwrap();
        assert_eq!((csr.extension_request_attributes, csr.extension_request_values), (1, 2));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for input in [&b""[..], b"\x30", b"\x30\x03\x30\x01\x00", b"hello", b"-----BEGIN CERTIFICATE REQUEST-----\n"] {
            assert!(parse(input).is_err());
        }
    }
}
