//! What vouch reads of a CRL's DER by walking its headers, without parsing it whole: its
//! number (the crlNumber extension) and the serials of its entries.

/// The key identifier a CRL of the CA `ca_der` (DER) carries as its authorityKeyIdentifier:
/// the CA certificate's own subjectKeyIdentifier, whatever way it was derived (a CA imported
/// from Puppet has SHA-1 identifiers), else rcgen's SHA-256 one (what vouch's own CAs carry).
/// A CRL whose identifier is not its CA's is not found by OpenSSL ("unable to get certificate CRL").
pub(crate) fn key_id_of(ca_der: &[u8]) -> rcgen::KeyIdMethod {
    let ski = x509_parser::parse_x509_certificate(ca_der).ok().and_then(|(_, c)| {
        c.iter_extensions().find_map(|e| match e.parsed_extension() {
            x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
            _ => None,
        })
    });
    ski.map_or(rcgen::KeyIdMethod::Sha256, rcgen::KeyIdMethod::PreSpecified)
}

/// What the first CRL in a PEM file says its number is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CrlNumber {
    Fits(u128),
    /// No CRL, or one without a number.
    None,
    TooLarge(String),
}

pub(super) fn crl_number_of(pem: &[u8]) -> CrlNumber {
    let Ok((_, der)) = crate::encoding::pem::find(pem, &["X509 CRL"]) else { return CrlNumber::None };
    crl_number_in(&der).unwrap_or(CrlNumber::None)
}

/// The crlNumber extension (2.5.29.20) of a DER CertificateList, read by walking its
/// TLV headers: the revoked certificates (millions of bytes on a large CRL) are stepped
/// over, not parsed; nor is the signature checked (the number is only compared, never
/// trusted for more). `None`: not such a CRL.
pub(super) fn crl_number_in(der: &[u8]) -> Option<CrlNumber> {
    use x509_parser::asn1_rs::{Any, Class, FromDer, Tag};
    const CRL_NUMBER: [u8; 3] = [0x55, 0x1d, 0x14];
    let (_, list) = Any::from_der(der).ok()?;
    let (_, tbs) = Any::from_der(list.data).ok()?;
    if list.tag() != Tag::Sequence || tbs.tag() != Tag::Sequence {
        return None;
    }
    // TBSCertList's fields in order; the extensions are its last, [0] EXPLICIT.
    let mut fields = tbs.data;
    while !fields.is_empty() {
        let (rest, field) = Any::from_der(fields).ok()?;
        fields = rest;
        if field.class() != Class::ContextSpecific || field.tag() != Tag(0) {
            continue;
        }
        let (_, extensions) = Any::from_der(field.data).ok()?;
        let mut each = extensions.data;
        while !each.is_empty() {
            let (rest, extension) = Any::from_der(each).ok()?;
            each = rest;
            let (after_id, id) = Any::from_der(extension.data).ok()?;
            if id.tag() != Tag::Oid || id.data != CRL_NUMBER {
                continue;
            }
            // extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING (an INTEGER).
            let (after, mut value) = Any::from_der(after_id).ok()?;
            if value.tag() == Tag::Boolean {
                value = Any::from_der(after).ok()?.1;
            }
            let (_, int) = Any::from_der(value.data).ok()?;
            if value.tag() != Tag::OctetString || int.tag() != Tag::Integer {
                return None;
            }
            return Some(integer_number(int.data));
        }
        return Some(CrlNumber::None);
    }
    Some(CrlNumber::None)
}

/// A DER INTEGER's content as a CRL number: non-negative, in 128 bits or too large.
fn integer_number(bytes: &[u8]) -> CrlNumber {
    if bytes.first().is_none_or(|b| b & 0x80 != 0) {
        return CrlNumber::None; // empty, or negative: no CRL number
    }
    let digits = bytes.iter().position(|b| *b != 0).map_or(&[][..], |i| &bytes[i..]);
    if digits.len() > 16 {
        return CrlNumber::TooLarge(x509_parser::num_bigint::BigUint::from_bytes_be(digits).to_string());
    }
    CrlNumber::Fits(digits.iter().fold(0u128, |n, b| (n << 8) | u128::from(*b)))
}

/// The serials (DER content octets) of a CRL's entries, read with a walk of its DER
/// (RFC 5280 5.1: tbsCertList's optional version, signature, issuer, thisUpdate, optional
/// nextUpdate, then the optional revokedCertificates), without building each entry. `None`
/// when it is not laid out so: the caller then parses it whole.
pub(super) fn crl_serials(der: &[u8]) -> Option<Vec<&[u8]>> {
    use crate::encoding::der::Reader;
    let list = Reader::new(der).next_tag(0x30, "CertificateList").ok()?;
    let tbs = Reader::new(list.content).next_tag(0x30, "tbsCertList").ok()?;
    let mut r = Reader::new(tbs.content);
    let mut next = r.any().ok()?;
    if next.tag == 0x02 {
        next = r.any().ok()?;
    }
    // signature, issuer
    if next.tag != 0x30 || r.next_tag(0x30, "issuer").is_err() {
        return None;
    }
    let this_update = r.any().ok()?;
    if !matches!(this_update.tag, 0x17 | 0x18) {
        return None;
    }
    let mut serials = Vec::new();
    while !r.is_empty() {
        let field = r.any().ok()?;
        match field.tag {
            0x17 | 0x18 => continue,
            0x30 => {
                let mut entries = Reader::new(field.content);
                while !entries.is_empty() {
                    let entry = entries.next_tag(0x30, "revokedCertificate").ok()?;
                    serials.push(Reader::new(entry.content).next_tag(0x02, "userCertificate").ok()?.content);
                }
            }
            0xa0 => break,
            _ => return None,
        }
    }
    Some(serials)
}

#[cfg(test)]
mod tests {
    use super::{crl_number_in, crl_number_of, crl_serials, CrlNumber};

    /// The serials read by walking a CRL are the ones x509-parser reads parsing it whole:
    /// none, a few and many entries (rcgen's CRLs, with a nextUpdate and extensions), and
    /// openssl's fixture; what is not a CRL reads as none, never as other serials.
    #[test]
    fn the_serials_read_by_walking_a_crl_are_x509_parsers() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let mut ders: Vec<Vec<u8>> =
            [0usize, 1, 3, 2000].iter().map(|n| numbered_crl(&issuer, &[7], *n).der().to_vec()).collect();
        let fixture = std::fs::read(format!("{}/fixtures/pki/conductors_crl.pem", env!("CARGO_MANIFEST_DIR"))).unwrap();
        ders.push(crate::encoding::pem::find(&fixture, &["X509 CRL"]).unwrap().1);
        for der in &ders {
            let (_, crl) = x509_parser::parse_x509_crl(der).unwrap();
            let parsed: Vec<&[u8]> = crl.iter_revoked_certificates().map(|e| e.raw_serial()).collect();
            assert_eq!(crl_serials(der), Some(parsed));
        }
        assert_eq!(crl_serials(&[]), None);
        assert_eq!(crl_serials(&crate::encoding::der::sequence(&[&crate::encoding::der::sequence(&[])])), None);
        let cert = std::fs::read(format!("{}/fixtures/pki/root_crt.pem", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let cert = crate::encoding::pem::find(&cert, &["CERTIFICATE"]).unwrap().1;
        assert_eq!(crl_serials(&cert), None, "a certificate is no CRL");
    }

    /// A CA that may sign CRLs: its parameters and its key (the caller makes the issuer).
    fn crl_signer() -> (rcgen::CertificateParams, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.key_usages = vec![rcgen::KeyUsagePurpose::CrlSign, rcgen::KeyUsagePurpose::KeyCertSign];
        (ca, key)
    }

    /// A CRL numbered `number` (big-endian octets) listing `revoked` serials 1, 2, ….
    fn numbered_crl(
        issuer: &rcgen::Issuer<'_, &rcgen::KeyPair>,
        number: &[u8],
        revoked: usize,
    ) -> rcgen::CertificateRevocationList {
        let now = time::OffsetDateTime::now_utc();
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now + time::Duration::days(1),
            crl_number: rcgen::SerialNumber::from_slice(number),
            issuing_distribution_point: None,
            revoked_certs: (0..revoked)
                .map(|i| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from_slice(&(i as u64 + 1).to_be_bytes()),
                    revocation_time: now,
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        params.signed_by(issuer).unwrap()
    }

    /// The number read by walking the CRL's headers is the one x509-parser reads parsing it
    /// whole, for numbers of every size, with and without revoked certificates, the
    /// extension critical or not; what is not a numbered CRL reads as none.
    #[test]
    fn the_crl_number_read_by_walking_is_the_one_a_whole_parse_reads() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let big = |n: usize| {
            let mut b = vec![0x7f];
            b.extend(std::iter::repeat_n(0xab, n - 1));
            b
        };
        let numbers: Vec<Vec<u8>> =
            vec![vec![0], vec![1], vec![0x80], u64::MAX.to_be_bytes().to_vec(), big(16), big(17), big(20)];
        for number in &numbers {
            for revoked in [0usize, 3, 2000] {
                let crl = numbered_crl(&issuer, number, revoked);
                let (_, parsed) = x509_parser::parse_x509_crl(crl.der()).unwrap();
                let whole = parsed.crl_number().unwrap();
                let want =
                    u128::try_from(whole).map_or_else(|_| CrlNumber::TooLarge(whole.to_string()), CrlNumber::Fits);
                assert_eq!(crl_number_in(crl.der()), Some(want), "{number:02x?} with {revoked} revoked");
                assert_eq!(
                    crl_number_of(crl.pem().unwrap().as_bytes()),
                    crl_number_in(crl.der()).unwrap(),
                    "{number:02x?}"
                );
                // Cut anywhere inside: never a panic; a cut CRL reads as none or as a number
                // (the number comes before the signature's end: only compared, never trusted).
                for cut in [1, 2, 10, crl.der().len() / 2, crl.der().len() - 1] {
                    let _ = crl_number_in(&crl.der()[..cut]);
                }
            }
        }
        assert_eq!(crl_number_of(b"not a CRL"), CrlNumber::None);
        assert_eq!(crl_number_in(&[0x30, 0x03, 0x02, 0x01, 0x01]), None);
        // A negative INTEGER is no number.
        assert_eq!(super::integer_number(&[0xff]), CrlNumber::None);
        assert_eq!(super::integer_number(&[0x00, 0x00, 0x05]), CrlNumber::Fits(5));
    }

    /// Review: the walker against a whole parse over damaged CRLs (every truncation, every
    /// single bit flipped, every byte set to a few values, a few thousand random multi-byte
    /// changes). Never a panic; and wherever the whole parse reads a number, the walker reads
    /// one at least as large (a lower one, or none, could take the next CRL's number back),
    /// and it never calls a number too large that the whole parse does not.
    #[test]
    fn review_the_crl_number_walker_never_reads_lower_than_a_whole_parse_on_damaged_crls() {
        let (ca, key) = crl_signer();
        let issuer = rcgen::Issuer::new(ca, &key);
        let whole = |der: &[u8]| match x509_parser::parse_x509_crl(der) {
            Ok((_, c)) => match c.crl_number() {
                Some(n) => u128::try_from(n).map_or_else(|_| CrlNumber::TooLarge(n.to_string()), CrlNumber::Fits),
                None => CrlNumber::None,
            },
            Err(_) => CrlNumber::None,
        };
        // (Fits, None) is allowed: on input that is not DER (the [0] wrapper's tag or length,
        // or the crlNumber's OID tag, changed) x509-parser still reads a number, the walker
        // none; the next number then comes from `crl_number` and the clock, as for a CRL
        // that does not parse. A lower number, or a number too large only to one of them, is not.
        let mut bad = Vec::new();
        let mut lenient = 0usize;
        let mut check = |der: &[u8], what: String| {
            let walked = crl_number_in(der).unwrap_or(CrlNumber::None);
            let full = whole(der);
            let fine = match (&full, &walked) {
                (CrlNumber::Fits(n), CrlNumber::Fits(m)) => m >= n,
                (CrlNumber::Fits(_), CrlNumber::None) => {
                    lenient += 1;
                    true
                }
                (CrlNumber::TooLarge(a), CrlNumber::TooLarge(b)) => a == b,
                (CrlNumber::None, CrlNumber::None | CrlNumber::Fits(_)) => true,
                _ => false,
            };
            if !fine && bad.len() < 20 {
                bad.push(format!("{what}: whole parse {full:?}, walked {walked:?}"));
            }
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (number, revoked) in [(vec![0x01, 0x86, 0xa0u8], 0usize), (vec![0x7f; 16], 2), (vec![0x05], 1)] {
            let der = numbered_crl(&issuer, &number, revoked).der().to_vec();
            for cut in 0..der.len() {
                check(&der[..cut], format!("{number:02x?} cut at {cut}"));
            }
            for i in 0..der.len() {
                for bit in 0..8 {
                    let mut d = der.clone();
                    d[i] ^= 1 << bit;
                    check(&d, format!("{number:02x?} byte {i} bit {bit}"));
                }
                for v in [0x00, 0x01, 0x02, 0x04, 0x30, 0x80, 0x81, 0x82, 0xa0, 0xff] {
                    let mut d = der.clone();
                    d[i] = v;
                    check(&d, format!("{number:02x?} byte {i} = {v:02x}"));
                }
            }
            for _ in 0..20000 {
                let mut d = der.clone();
                for _ in 0..(rand() % 4 + 1) {
                    let i = (rand() as usize) % d.len();
                    d[i] = rand() as u8;
                }
                check(&d, format!("{number:02x?} random {:02x?}", d));
            }
        }
        assert!(bad.is_empty(), "{}\n({lenient} read by x509-parser only)", bad.join("\n"));
    }

    /// Review: hand-built CRLs with the extensions in other shapes, read by the walker and
    /// by a whole parse: the crlNumber after or before another extension, critical, two of
    /// them, the extensions followed by another field, a non-minimal INTEGER.
    #[test]
    fn review_the_crl_number_walker_reads_crafted_extension_lists_as_a_whole_parse() {
        fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
            let mut v = vec![tag];
            let n = content.len();
            if n < 128 {
                v.push(n as u8);
            } else if n < 256 {
                v.extend([0x81, n as u8]);
            } else {
                v.extend([0x82, (n >> 8) as u8, n as u8]);
            }
            v.extend_from_slice(content);
            v
        }
        let cat = |parts: &[Vec<u8>]| parts.concat();
        let oid_crl_number = tlv(0x06, &[0x55, 0x1d, 0x14]);
        let number_ext = |n: &[u8], critical: bool| {
            let mut parts = vec![oid_crl_number.clone()];
            if critical {
                parts.push(tlv(0x01, &[0xff]));
            }
            parts.push(tlv(0x04, &tlv(0x02, n)));
            tlv(0x30, &cat(&parts))
        };
        let aki = tlv(0x30, &cat(&[tlv(0x06, &[0x55, 0x1d, 0x23]), tlv(0x04, &tlv(0x30, &tlv(0x80, &[7; 20])))]));
        let sigalg = tlv(0x30, &tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]));
        let issuer = tlv(0x30, &tlv(0x31, &tlv(0x30, &cat(&[tlv(0x06, &[0x55, 0x04, 0x03]), tlv(0x0c, b"ca")]))));
        let time = tlv(0x17, b"260101000000Z");
        let next = tlv(0x17, b"270101000000Z");
        let revoked = tlv(0x30, &tlv(0x30, &cat(&[tlv(0x02, &[0x01]), tlv(0x17, b"260101000000Z")])));
        let crl = |exts: &[Vec<u8>], after: &[Vec<u8>]| {
            let mut tbs =
                vec![tlv(0x02, &[1]), sigalg.clone(), issuer.clone(), time.clone(), next.clone(), revoked.clone()];
            tbs.push(tlv(0xa0, &tlv(0x30, &cat(exts))));
            tbs.extend_from_slice(after);
            tlv(0x30, &cat(&[tlv(0x30, &cat(&tbs)), sigalg.clone(), tlv(0x03, &[0, 0x30, 0x00])]))
        };
        let whole = |der: &[u8]| match x509_parser::parse_x509_crl(der) {
            Ok((_, c)) => match c.crl_number() {
                Some(n) => u128::try_from(n).map_or_else(|_| CrlNumber::TooLarge(n.to_string()), CrlNumber::Fits),
                None => CrlNumber::None,
            },
            Err(_) => CrlNumber::None,
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("number last", crl(&[aki.clone(), number_ext(&[0x05], false)], &[])),
            ("number first", crl(&[number_ext(&[0x05], false), aki.clone()], &[])),
            ("critical", crl(&[aki.clone(), number_ext(&[0x05], true)], &[])),
            ("two numbers", crl(&[number_ext(&[0x05], false), number_ext(&[0x09], false)], &[])),
            ("two numbers, larger first", crl(&[number_ext(&[0x09], false), number_ext(&[0x05], false)], &[])),
            ("a field after the extensions", crl(&[number_ext(&[0x05], false)], &[tlv(0x02, &[0x01])])),
            ("non-minimal", crl(&[number_ext(&[0x00, 0x00, 0x05], false)], &[])),
            ("21 octets", crl(&[number_ext(&[0x7f; 21], false)], &[])),
        ];
        for (what, der) in &cases {
            let walked = crl_number_in(der).unwrap_or(CrlNumber::None);
            match whole(der) {
                // Not DER (a field after the extensions, a non-minimal INTEGER): x509-parser
                // reads no number; the walker's is compared with the others, never lower.
                CrlNumber::None => assert_eq!(walked, CrlNumber::Fits(5), "{what}"),
                full => assert_eq!(walked, full, "{what}"),
            }
        }
    }
}
