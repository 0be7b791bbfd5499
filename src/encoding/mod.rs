//! Wire formats, with no policy: DER, OIDs, PEM, distinguished names, PKCS#10
//! certificate requests, and the time formats vouch reads and writes.

pub mod csr;
pub mod der;
pub mod dn;
pub mod oids;
pub mod pem;
pub mod server_name;
pub mod time;

/// Lowercase hex, two digits a byte (serials, digests, fingerprints without colons).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
