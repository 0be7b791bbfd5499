//! Wire formats, with no policy: DER, OIDs, PEM, distinguished names, PKCS#10
//! certificate requests, and the time formats vouch reads and writes.

pub mod csr;
pub mod der;
pub mod dn;
pub mod oids;
pub mod pem;
pub mod server_name;
pub mod text;
pub mod time;

/// Lowercase hex, two digits a byte (serials, digests, fingerprints without colons).
pub fn hex(bytes: &[u8]) -> String {
    // One allocation (this runs several times per certificate: serials, digests, fingerprints).
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

/// Whether `signature` over `signed` (a certificate's or a CRL's to-be-signed part) verifies
/// with `issuer`'s key by `algorithm`, among the algorithms vouch accepts on a CSR.
pub fn verify_x509_signature(
    algorithm: &x509_parser::x509::AlgorithmIdentifier<'_>,
    issuer: &x509_parser::certificate::X509Certificate<'_>,
    signed: &[u8],
    signature: &[u8],
) -> Result<(), String> {
    let alg: Option<Vec<u64>> = algorithm.algorithm.iter().map(|i| i.collect());
    let alg = alg.ok_or("an unreadable signature algorithm")?;
    let spki = issuer.public_key();
    let kind = csr::spki_kind(spki.raw).map_err(|e| format!("its issuer's key: {e}"))?;
    let algorithm = csr::verification_algorithm(&alg, kind).map_err(|e| format!("its signature: {e}"))?;
    aws_lc_rs::signature::UnparsedPublicKey::new(algorithm, &spki.subject_public_key.data)
        .verify(signed, signature)
        .map_err(|_| format!("its signature does not verify with the key of {}", issuer.subject()))
}

/// Percent-decodes a URL component (`%2F` → `/`); `None` for an escape that is not two hex
/// digits, or a result that is not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_takes_two_hex_digits_and_nothing_else() {
        assert_eq!(percent_decode("%2Frun%2fslapd").as_deref(), Some("/run/slapd"));
        assert_eq!(percent_decode("a%20b").as_deref(), Some("a b"));
        for bad in ["%", "%2", "%zz", "%+f", "%-1", "%c3"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
        assert_eq!(sha256_hex(b"").len(), 64);
    }
}

#[cfg(test)]
mod hex_tests {
    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(super::hex(&[]), "");
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa0, 0xff, 0x12]), "000fa0ff12");
        let all: Vec<u8> = (0..=255).collect();
        let want: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::hex(&all), want);
    }

    #[test]
    fn oids_are_dotted_decimal() {
        use crate::encoding::der::oid_to_string;
        assert_eq!(oid_to_string(&[]), "");
        assert_eq!(oid_to_string(&[2]), "2");
        assert_eq!(oid_to_string(&[1, 3, 6, 1, 4, 1, 34380, 2, 5]), "1.3.6.1.4.1.34380.2.5");
        assert_eq!(oid_to_string(&[2, u64::MAX]), format!("2.{}", u64::MAX));
    }
}
