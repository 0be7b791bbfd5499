//! PKCS#7 / CMS SignedData (RFC 5652), read as a cloud's identity signature carries it:
//! the content attached, one signer named by issuer and serial number, SHA-256, signed
//! attributes present or not. Only the parts a verification needs are kept.

use super::ber::{octets, Element, Reader};

const SIGNED_DATA: &[u64] = &[1, 2, 840, 113_549, 1, 7, 2];
const DATA: &[u64] = &[1, 2, 840, 113_549, 1, 7, 1];
pub(super) const SHA256: &[u64] = &[2, 16, 840, 1, 101, 3, 4, 2, 1];
pub(super) const RSA_ENCRYPTION: &[u64] = &[1, 2, 840, 113_549, 1, 1, 1];
pub(super) const SHA256_WITH_RSA: &[u64] = &[1, 2, 840, 113_549, 1, 1, 11];
const CONTENT_TYPE_ATTR: &[u64] = &[1, 2, 840, 113_549, 1, 9, 3];
const MESSAGE_DIGEST_ATTR: &[u64] = &[1, 2, 840, 113_549, 1, 9, 4];

/// What went wrong, before any signature is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pkcs7Problem {
    /// Not a SignedData at all, or broken.
    Malformed(String),
    /// A SignedData without the document in it.
    Detached,
    /// Other than one signer.
    SignerCount(usize),
}

/// One SignedData, reduced to what its verification needs.
#[derive(Debug, Clone)]
pub struct SignedData {
    /// The signed content: the identity document.
    pub content: Vec<u8>,
    /// The signer's certificate issuer (its DER Name) and serial number (INTEGER content).
    pub issuer: Vec<u8>,
    pub serial: Vec<u8>,
    /// The signer's digest and signature algorithms (OID arcs).
    pub digest_algorithm: Vec<u64>,
    pub signature_algorithm: Vec<u64>,
    /// The signed attributes: their DER as signed (tag `31`), their contentType and
    /// messageDigest values.
    pub signed_attributes: Option<SignedAttributes>,
    pub signature: Vec<u8>,
}

/// The signed attributes of the one signer.
#[derive(Debug, Clone)]
pub struct SignedAttributes {
    pub der: Vec<u8>,
    pub content_type: Option<Vec<u64>>,
    pub message_digest: Option<Vec<u8>>,
}

fn malformed(e: impl Into<String>) -> Pkcs7Problem {
    Pkcs7Problem::Malformed(e.into())
}

fn oid(e: &Element<'_>) -> Result<Vec<u64>, Pkcs7Problem> {
    if e.tag != 0x06 {
        return Err(malformed(format!("expected an OBJECT IDENTIFIER, found tag 0x{:02x}", e.tag)));
    }
    crate::encoding::der::oid_arcs(e.content).map_err(|e| malformed(e.0))
}

/// An AlgorithmIdentifier's OID; its parameters must be absent or NULL (those of SHA-256
/// and RSA are).
fn algorithm(e: &Element<'_>) -> Result<Vec<u64>, Pkcs7Problem> {
    if e.tag != 0x30 {
        return Err(malformed("an AlgorithmIdentifier is not a SEQUENCE"));
    }
    let mut r = Reader::new(e.content);
    let id = oid(&r.any().map_err(malformed)?)?;
    if !r.is_empty() && r.any().map_err(malformed)?.raw != [0x05, 0x00] {
        return Err(malformed("an AlgorithmIdentifier has parameters other than NULL"));
    }
    r.finish("AlgorithmIdentifier").map_err(malformed)?;
    Ok(id)
}

/// An INTEGER that must be 1 (the versions of SignedData and SignerInfo with an issuer and
/// serial number and id-data content).
fn version_one(r: &mut Reader<'_>, what: &str) -> Result<(), Pkcs7Problem> {
    if r.expect(0x02, what).map_err(malformed)?.content != [1] {
        return Err(malformed(format!("{what} is not 1")));
    }
    Ok(())
}

/// Parses a ContentInfo holding a SignedData.
pub fn parse(bytes: &[u8]) -> Result<SignedData, Pkcs7Problem> {
    let mut top = Reader::new(bytes);
    let info = top.expect(0x30, "ContentInfo").map_err(malformed)?;
    top.finish("ContentInfo").map_err(malformed)?;
    let mut r = Reader::new(info.content);
    if oid(&r.any().map_err(malformed)?)? != SIGNED_DATA {
        return Err(malformed("the content type is not signedData"));
    }
    let explicit = r.expect(0xa0, "content").map_err(malformed)?;
    let sd = Reader::new(explicit.content).expect(0x30, "SignedData").map_err(malformed)?;
    let mut r = Reader::new(sd.content);
    version_one(&mut r, "the SignedData version")?;
    let digests = r.expect(0x31, "digestAlgorithms").map_err(malformed)?;
    let mut d = Reader::new(digests.content);
    let mut digest_algorithms = Vec::new();
    while !d.is_empty() {
        digest_algorithms.push(algorithm(&d.any().map_err(malformed)?)?);
    }
    let content = encapsulated(&r.expect(0x30, "encapContentInfo").map_err(malformed)?)?;
    // certificates [0] and crls [1]: whatever they hold, the signer's certificate comes from
    // the policy, never from the document.
    r.optional(0xa0).map_err(malformed)?;
    r.optional(0xa1).map_err(malformed)?;
    let infos = r.expect(0x31, "signerInfos").map_err(malformed)?;
    r.finish("SignedData").map_err(malformed)?;
    let mut signers = Reader::new(infos.content);
    let mut all = Vec::new();
    while !signers.is_empty() {
        all.push(signers.any().map_err(malformed)?);
    }
    let [one] = all.as_slice() else { return Err(Pkcs7Problem::SignerCount(all.len())) };
    let signed = signer(one, content)?;
    if !digest_algorithms.contains(&signed.digest_algorithm) {
        return Err(malformed("the signer's digest algorithm is not among digestAlgorithms"));
    }
    Ok(signed)
}

/// encapContentInfo: id-data and the document, which must be attached.
fn encapsulated(e: &Element<'_>) -> Result<Vec<u8>, Pkcs7Problem> {
    let mut r = Reader::new(e.content);
    if oid(&r.any().map_err(malformed)?)? != DATA {
        return Err(malformed("the encapsulated content is not id-data"));
    }
    let Some(explicit) = r.optional(0xa0).map_err(malformed)? else { return Err(Pkcs7Problem::Detached) };
    let inner = Reader::new(explicit.content).any().map_err(malformed)?;
    octets(&inner).map_err(malformed)
}

/// One SignerInfo (version 1: issuerAndSerialNumber).
fn signer(e: &Element<'_>, content: Vec<u8>) -> Result<SignedData, Pkcs7Problem> {
    if e.tag != 0x30 {
        return Err(malformed("a SignerInfo is not a SEQUENCE"));
    }
    let mut r = Reader::new(e.content);
    version_one(&mut r, "the SignerInfo version")?;
    let sid = r.expect(0x30, "issuerAndSerialNumber (a subjectKeyIdentifier is not supported)").map_err(malformed)?;
    let mut sid_r = Reader::new(sid.content);
    let issuer = sid_r.expect(0x30, "issuer").map_err(malformed)?.raw.to_vec();
    let serial = sid_r.expect(0x02, "serialNumber").map_err(malformed)?.content.to_vec();
    let digest_algorithm = algorithm(&r.any().map_err(malformed)?)?;
    let signed_attributes = match r.optional(0xa0).map_err(malformed)? {
        Some(a) => Some(attributes(&a)?),
        None => None,
    };
    let signature_algorithm = algorithm(&r.any().map_err(malformed)?)?;
    let signature = r.expect(0x04, "signature").map_err(malformed)?.content.to_vec();
    r.optional(0xa1).map_err(malformed)?;
    r.finish("SignerInfo").map_err(malformed)?;
    Ok(SignedData { content, issuer, serial, digest_algorithm, signature_algorithm, signed_attributes, signature })
}

/// The signed attributes: signed as a SET (`31`) in DER, carried as `[0]` IMPLICIT.
fn attributes(e: &Element<'_>) -> Result<SignedAttributes, Pkcs7Problem> {
    if e.raw.get(1) == Some(&0x80) {
        return Err(malformed("the signed attributes are not DER (indefinite length)"));
    }
    let mut der = e.raw.to_vec();
    der[0] = 0x31;
    let (mut content_type, mut message_digest) = (None, None);
    let mut r = Reader::new(e.content);
    while !r.is_empty() {
        let attr = r.expect(0x30, "an attribute").map_err(malformed)?;
        let mut a = Reader::new(attr.content);
        let id = oid(&a.any().map_err(malformed)?)?;
        let values = a.expect(0x31, "attribute values").map_err(malformed)?;
        let mut v = Reader::new(values.content);
        let first = v.any().map_err(malformed)?;
        let several = !v.is_empty();
        if id == CONTENT_TYPE_ATTR || id == MESSAGE_DIGEST_ATTR {
            let seen = if id == CONTENT_TYPE_ATTR { content_type.is_some() } else { message_digest.is_some() };
            if several || seen {
                return Err(malformed("contentType or messageDigest appears twice"));
            }
        }
        if id == CONTENT_TYPE_ATTR {
            content_type = Some(oid(&first)?);
        } else if id == MESSAGE_DIGEST_ATTR {
            message_digest = Some(octets(&first).map_err(malformed)?);
        }
    }
    Ok(SignedAttributes { der, content_type, message_digest })
}

/// Whether the content type attribute, when present, names id-data.
pub fn is_data(arcs: &[u64]) -> bool {
    arcs == DATA
}
