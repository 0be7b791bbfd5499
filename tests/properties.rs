//! Properties of the signed attributes: the canonical strings are an injective
//! encoding of the values vouch accepts, and changing any single byte of any
//! signed value makes the decision refuse.

mod common;

use common::*;
use vouch::encoding::csr::{build, printable, CsrSpec};
use vouch::encoding::oids;
use vouch::vouching::attrs::{self, canonical_v1, canonical_v2};
use vouch::{decide, Policy, Request};

/// Splits a canonical string back into (OID, value) pairs, for values without newlines.
fn split(canonical: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(canonical).unwrap();
    assert!(text.ends_with('\n'));
    text[..text.len() - 1]
        .split('\n')
        .map(|line| {
            let (k, v) = line.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn canonical_strings_round_trip() {
    let values = ["1", "2030-06-02T12:00:00Z", "MIIBcert+/=", "Y2xhc3Nlczog", "web01.example.test", "0123abcd"];
    let v1 = canonical_v1(values[0], values[1], values[2], values[3]);
    let back: Vec<String> = split(&v1).into_iter().map(|(_, v)| v).collect();
    assert_eq!(back, &values[..4]);
    let v2 = canonical_v2("2", values[1], values[2], values[3], values[4], values[5]);
    let pairs = split(&v2);
    let oids: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        oids,
        [
            "1.3.6.1.4.1.34380.2.2",
            "1.3.6.1.4.1.34380.2.3",
            "1.3.6.1.4.1.34380.2.4",
            "1.3.6.1.4.1.34380.2.5",
            "1.3.6.1.4.1.34380.2.6",
            "1.3.6.1.4.1.34380.2.7"
        ]
    );
    assert_eq!(pairs[4].1, values[4]);
    // Distinct value tuples give distinct strings (no shifting bytes between fields):
    // every value vouch accepts is free of '\n' except a PEM .2.4, which must be exactly
    // one PEM block, so no field can absorb the next one's "OID=" line.
    assert_ne!(canonical_v1("1", "a", "b\n1.3.6.1.4.1.34380.2.5=c", "d"), canonical_v1("1", "a", "b", "c"));
    let pem = vouch::encoding::pem::encode("CERTIFICATE", b"x");
    assert!(attrs::decode_conductor_cert(&format!("{pem}1.3.6.1.4.1.34380.2.5=c")).is_err());
}

/// Every single-byte change of every signed value of a valid version 2 CSR is refused.
#[test]
fn any_single_byte_change_of_a_signed_value_is_refused() {
    let policy = Policy::load(&fixture("policy.toml")).unwrap();
    let cert_pem = std::fs::read_to_string(fixture("pki/conductor-ed25519.pem")).unwrap();
    let (_, cert_der) = vouch::encoding::pem::find(cert_pem.as_bytes(), &["CERTIFICATE"]).unwrap();
    let key = vouch::issuance::keys::load_pem(&std::fs::read_to_string(fixture("pki/conductor-ed25519.key")).unwrap())
        .unwrap();
    let class = vouch::vouching::classification::Classification::from_yaml("classes: [ntp]\n", 65536).unwrap();
    let expiry = fixture_time() + time::Duration::hours(1);
    let a = attrs::vouch(&cert_der, &key, &class, expiry, attrs::CertEncoding::Base64Der, Some(CERTNAME)).unwrap();
    let b = a.binding.clone().unwrap();
    let node_key = vouch::issuance::keys::KeyType::Ed25519.generate().unwrap();
    let csr_with = |vals: &[String; 7]| -> Vec<u8> {
        let oids = [
            oids::ATTR_SIGNATURE,
            oids::ATTR_VERSION,
            oids::ATTR_EXPIRY,
            oids::ATTR_CONDUCTOR,
            oids::ATTR_CLASSIFICATION,
            oids::ATTR_CERTNAME,
            oids::ATTR_NONCE,
        ];
        let spec = CsrSpec {
            common_name: CERTNAME.into(),
            attributes: oids.iter().zip(vals).map(|(o, v)| (o.to_vec(), vec![printable(v)])).collect(),
            extension_requests: vec![],
            ..Default::default()
        };
        build(&spec, &node_key).unwrap()
    };
    let original: [String; 7] = [
        a.signature.clone(),
        a.version.clone(),
        a.expiry.clone(),
        a.conductor.clone(),
        a.classification.clone(),
        b.certname.clone(),
        b.nonce.clone(),
    ];
    let granted = |vals: &[String; 7]| {
        decide(&Request { csr: &csr_with(vals), certname: CERTNAME }, &policy, fixture_time()).is_ok()
    };
    assert!(granted(&original), "the unmodified attributes are granted");
    let mut tried = 0;
    for field in 0..7 {
        let len = original[field].len();
        // Every position of the short values; a spread of positions in the long ones.
        let step = if len > 64 { len / 48 } else { 1 };
        for pos in (0..len).step_by(step) {
            for replacement in [b'A', b'0', b'/'] {
                let mut bytes = original[field].clone().into_bytes();
                if bytes[pos] == replacement {
                    continue;
                }
                bytes[pos] = replacement;
                let mut vals = original.clone();
                vals[field] = String::from_utf8(bytes).unwrap();
                tried += 1;
                assert!(!granted(&vals), "field {field} byte {pos} -> {:?} was granted", replacement as char);
            }
        }
    }
    assert!(tried > 300, "{tried}");
}
