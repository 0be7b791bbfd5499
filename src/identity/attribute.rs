//! CSR attribute 1.3.6.1.4.1.34380.2.11: the node's identity document, as the text of a
//! Puppet `custom_attributes` entry: the base64 (standard alphabet, padded, on one line;
//! whitespace is ignored) of the PKCS#7 DER the metadata service serves at
//! `/latest/dynamic/instance-identity/rsa2048`. Its size is bounded before it is decoded.

use super::aws::MAX_DOCUMENT_BYTES;
use super::refusal::IdentityRefusal;
use base64::Engine;

/// The attribute's OID.
pub const OID: &str = "1.3.6.1.4.1.34380.2.11";
/// The attribute's OID arcs.
pub const ARCS: &[u64] = &[1, 3, 6, 1, 4, 1, 34380, 2, 11];

/// The largest attribute text read: the base64 of [`MAX_DOCUMENT_BYTES`], with room for line
/// breaks.
pub const MAX_TEXT: usize = MAX_DOCUMENT_BYTES / 3 * 4 + 4 + MAX_DOCUMENT_BYTES / 32;

/// The PKCS#7 bytes the attribute's text carries.
pub fn decode(text: &str) -> Result<Vec<u8>, IdentityRefusal> {
    if text.len() > MAX_TEXT {
        return Err(IdentityRefusal::DocumentTooLarge { size: text.len(), max: MAX_TEXT });
    }
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(compact).map_err(|_| IdentityRefusal::NotBase64)
}

/// The attribute's text for a document.
pub fn encode(document: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(document)
}
