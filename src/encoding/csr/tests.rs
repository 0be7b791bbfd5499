//! The certificate request parser and builder, against each other and against crafted DER.

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
        assert!(is_malformed(parse(&assemble(&parts, key).unwrap())));
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
    assert!(is_malformed(parse(&assemble(&parts, &p256).unwrap())));
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
    let no_null = der::sequence(&[&der::sequence(&[&der::oid(oids::RSA_ENCRYPTION)]), &der::bit_string(&key(&n, &e))]);
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
    assert!(parse(&assemble(&p, &key).unwrap()).is_ok());
    p.subject = der::sequence(&[&der::set_of(vec![der::sequence(&[
        &der::oid(oids::COMMON_NAME),
        &der::utf8_string("a.example"),
        &der::utf8_string("evil.example"),
    ])])]);
    assert!(is_malformed(parse(&assemble(&p, &key).unwrap())));
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
        parse(&assemble(&p, &key).unwrap())
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
    let csr = parse(&assemble(&p, &key).unwrap()).unwrap();
    assert_eq!((csr.extension_request_attributes, csr.extension_request_values), (1, 1));
    p.extension_request.push(der::sequence(&[]));
    let csr = parse(&assemble(&p, &key).unwrap()).unwrap();
    assert_eq!((csr.extension_request_attributes, csr.extension_request_values), (1, 2));
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for input in [&b""[..], b"\x30", b"\x30\x03\x30\x01\x00", b"hello", b"-----BEGIN CERTIFICATE REQUEST-----\n"] {
        assert!(parse(input).is_err());
    }
}
