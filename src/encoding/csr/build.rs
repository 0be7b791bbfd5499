//! Building a PKCS#10 request as a Puppet agent does (for `vouch csr`, tests and fixtures).

use crate::encoding::der::{self, tag};
use crate::encoding::oids;

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
    assemble(&parts(spec, key), key)
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

/// Assembles the certificationRequestInfo from `parts` and self-signs it with `key`.
pub fn assemble(parts: &RequestParts, key: &rcgen::KeyPair) -> Result<Vec<u8>, rcgen::Error> {
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
