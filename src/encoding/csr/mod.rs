//! PKCS#10 certificate signing requests: a lenient reader for what Puppet
//! agents really send, and a writer that encodes exactly as a Puppet agent does.
//!
//! This module knows no policy. It reports what the CSR says; the decision
//! core judges it.

mod build;

pub use build::{assemble, build, parts, printable, signature_algorithm_der, CsrSpec, RequestParts};

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
        let text = crate::encoding::pem::text(input);
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
    let request = read_envelope(&der)?;
    let info = read_request_info(request.info)?;
    check_item_counts(&info.items)?;
    let common_names = parse_common_names(info.subject)?;
    let (key_kind, key_bits) = parse_spki(info.spki)?;
    // The key before the signature: a key vouch cannot verify with is reported as such,
    // not as a signature that does not verify.
    check_key_size(key_kind)?;
    verify_self_signature(&request, key_kind, key_bits)?;
    let spki = canonical_spki(info.spki.raw)?;
    let Items { attributes, extension_request_attributes, extension_request_values, extensions } = info.items;
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

/// The CertificationRequest's three parts.
struct Envelope<'a> {
    /// certificationRequestInfo, the signed part.
    info: Tlv<'a>,
    /// signatureAlgorithm.
    algorithm: Tlv<'a>,
    /// signature, a BIT STRING.
    signature: Tlv<'a>,
}

fn read_envelope(der: &[u8]) -> Result<Envelope<'_>, CsrError> {
    let mut top = Reader::new(der);
    let outer = top.next_tag(tag::SEQUENCE, "CertificationRequest").map_err(malformed)?;
    top.finish("CertificationRequest").map_err(malformed)?;
    let mut r = Reader::new(outer.content);
    let info = r.next_tag(tag::SEQUENCE, "certificationRequestInfo").map_err(malformed)?;
    let algorithm = r.next_tag(tag::SEQUENCE, "signatureAlgorithm").map_err(malformed)?;
    let signature = r.next_tag(tag::BIT_STRING, "signature").map_err(malformed)?;
    r.finish("CertificationRequest").map_err(malformed)?;
    Ok(Envelope { info, algorithm, signature })
}

/// certificationRequestInfo, read.
struct RequestInfo<'a> {
    subject: Tlv<'a>,
    spki: Tlv<'a>,
    items: Items,
}

/// What the attributes hold: the attributes themselves and the extensions requested.
#[derive(Default)]
struct Items {
    attributes: Vec<Attribute>,
    extension_request_attributes: usize,
    extension_request_values: usize,
    extensions: Vec<RequestedExtension>,
}

fn read_request_info(cri: Tlv<'_>) -> Result<RequestInfo<'_>, CsrError> {
    let mut info = Reader::new(cri.content);
    let version = info.next_tag(tag::INTEGER, "version").map_err(malformed)?;
    if version.content != [0] {
        return Err(malformed("version is not 1 (0)"));
    }
    let subject = info.next_tag(tag::SEQUENCE, "subject").map_err(malformed)?;
    let spki = info.next_tag(tag::SEQUENCE, "subjectPKInfo").map_err(malformed)?;
    let mut items = Items::default();
    if !info.is_empty() {
        let attrs = info.next_tag(tag::CONTEXT_0, "attributes").map_err(malformed)?;
        let mut ar = Reader::new(attrs.content);
        while !ar.is_empty() {
            let a = ar.next_tag(tag::SEQUENCE, "attribute").map_err(malformed)?;
            read_attribute(a, &mut items)?;
        }
    }
    info.finish("certificationRequestInfo").map_err(malformed)?;
    Ok(RequestInfo { subject, spki, items })
}

/// One attribute: an extensionRequest's extensions join `items.extensions`, any other
/// attribute `items.attributes`.
fn read_attribute(a: Tlv<'_>, items: &mut Items) -> Result<(), CsrError> {
    let mut fields = Reader::new(a.content);
    let oid_tlv = fields.next_tag(tag::OID, "attribute type").map_err(malformed)?;
    let oid = der::oid_arcs(oid_tlv.content).map_err(malformed)?;
    let set = fields.next_tag(tag::SET, "attribute values").map_err(malformed)?;
    fields.finish("attribute").map_err(malformed)?;
    if oid == oids::EXTENSION_REQUEST {
        items.extension_request_attributes += 1;
        let mut vr = Reader::new(set.content);
        while !vr.is_empty() {
            let exts = vr.next_tag(tag::SEQUENCE, "extensionRequest").map_err(malformed)?;
            items.extension_request_values += 1;
            parse_extensions(exts, &mut items.extensions)?;
        }
        return Ok(());
    }
    let mut values = Vec::new();
    let mut vr = Reader::new(set.content);
    while !vr.is_empty() {
        let v = vr.any().map_err(malformed)?;
        values.push(AttrValue { tag: v.tag, bytes: v.content.to_vec() });
    }
    items.attributes.push(Attribute { oid, values });
    Ok(())
}

/// A Puppet CSR carries a handful; thousands are a denial-of-service attempt.
fn check_item_counts(items: &Items) -> Result<(), CsrError> {
    if items.attributes.len() > MAX_ITEMS || items.extensions.len() > MAX_ITEMS {
        return Err(malformed(format!(
            "{} attributes and {} extension requests; at most {MAX_ITEMS} of each are accepted",
            items.attributes.len(),
            items.extensions.len()
        )));
    }
    Ok(())
}

/// The self-signature: its algorithm in its one encoding, a whole-octet BIT STRING, an
/// algorithm that goes with the key, and a signature that verifies over the request info.
fn verify_self_signature(request: &Envelope<'_>, key_kind: KeyKind, key_bits: &[u8]) -> Result<(), CsrError> {
    let alg_oid = read_signature_algorithm(request.algorithm)?;
    if request.signature.content.first() != Some(&0) {
        return Err(malformed("signature BIT STRING has unused bits"));
    }
    let signature = &request.signature.content[1..];
    let algorithm = verification_algorithm(&alg_oid, key_kind)?;
    sig::UnparsedPublicKey::new(algorithm, key_bits)
        .verify(request.info.raw, signature)
        .map_err(|_| CsrError::BadSelfSignature)
}

/// The signatureAlgorithm's OID, its parameters checked.
fn read_signature_algorithm(alg: Tlv<'_>) -> Result<Vec<u64>, CsrError> {
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
        // Any other algorithm is refused as unsupported, whatever its parameters.
        _ => {}
    }
    Ok(alg_oid)
}

/// The verification algorithm for a signature algorithm and key, or unsupported.
pub(crate) fn verification_algorithm(
    alg_oid: &[u64],
    key_kind: KeyKind,
) -> Result<&'static dyn sig::VerificationAlgorithm, CsrError> {
    Ok(match (alg_oid, key_kind) {
        (oids::SHA256_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA256,
        (oids::SHA384_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA384,
        (oids::SHA512_WITH_RSA, KeyKind::Rsa { .. }) => &sig::RSA_PKCS1_2048_8192_SHA512,
        (oids::ECDSA_SHA256, KeyKind::P256) => &sig::ECDSA_P256_SHA256_ASN1,
        (oids::ECDSA_SHA384, KeyKind::P256) => &sig::ECDSA_P256_SHA384_ASN1,
        (oids::ECDSA_SHA256, KeyKind::P384) => &sig::ECDSA_P384_SHA256_ASN1,
        (oids::ECDSA_SHA384, KeyKind::P384) => &sig::ECDSA_P384_SHA384_ASN1,
        (oids::ED25519, KeyKind::Ed25519) => &sig::ED25519,
        _ => return Err(CsrError::UnsupportedSignatureAlgorithm { oid: oids::dotted(alg_oid) }),
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

#[cfg(test)]
mod tests;
