//! The verifier against documents the test cloud signed (fixtures/iid-*: made with
//! `openssl cms -sign -nodetach -binary -stream -nocerts -md sha256`, AWS's BER form).

use super::*;
use crate::policy::{AwsIdentityRule, Pattern};
use time::macros::datetime;

const CLOUD: &str = include_str!("../../fixtures/iid-cloud.pem");
const OTHER: &str = include_str!("../../fixtures/iid-other.pem");
const GOOD: &[u8] = include_bytes!("../../fixtures/iid-good.p7");
const BINDING: &str = "aws:{instance-id}.web.asg.example.com";
const NOW: time::OffsetDateTime = datetime!(2026-11-29 07:00 UTC);

fn der(pem: &str) -> Vec<u8> {
    crate::encoding::pem::find_all(pem.as_bytes(), "CERTIFICATE").unwrap().remove(0)
}

fn rule(certs: &[&str]) -> AwsIdentityRule {
    AwsIdentityRule {
        name: "web".into(),
        certificates: certs.iter().map(|p| der(p)).collect(),
        accounts: vec!["111122223333".into()],
        regions: vec!["eu-west-1".into()],
        certnames: vec![Pattern::certname("*.web.asg.example.com").unwrap()],
        max_document_age: std::time::Duration::from_secs(3600),
    }
}

fn verify(doc: &[u8]) -> Result<VerifiedInstance, IdentityRefusal> {
    AwsIdentity { rules: &[rule(&[CLOUD])] }.verify(BINDING, doc, NOW)
}

fn code(doc: &[u8]) -> &'static str {
    match verify(doc) {
        Ok(v) => panic!("accepted: {v:?}"),
        Err(r) => r.code(),
    }
}

#[test]
fn a_good_document_names_the_instance_and_its_certname() {
    let want = VerifiedInstance {
        instance_id: "i-0123456789abcdef0".into(),
        certname: "i-0123456789abcdef0.web.asg.example.com".into(),
        account: "111122223333".into(),
        region: "eu-west-1".into(),
    };
    assert_eq!(verify(GOOD).unwrap(), want);
    // DER (definite lengths) and no signed attributes verify too.
    assert_eq!(verify(include_bytes!("../../fixtures/iid-good-der.p7")).unwrap(), want);
    assert_eq!(verify(include_bytes!("../../fixtures/iid-good-noattr.p7")).unwrap(), want);
    assert!(want.require_certname("i-0123456789abcdef0.web.asg.example.com").is_ok());
    let r = want.require_certname("web01.web.asg.example.com").unwrap_err();
    assert_eq!(r.code(), "identity-certname-not-derived");
}

#[test]
fn each_bad_document_has_its_own_code() {
    assert_eq!(code(include_bytes!("../../fixtures/iid-other-signer.p7")), "identity-unknown-signer");
    assert_eq!(code(include_bytes!("../../fixtures/iid-account-other.p7")), "identity-account-not-allowed");
    assert_eq!(code(include_bytes!("../../fixtures/iid-region-other.p7")), "identity-region-not-allowed");
    assert_eq!(code(include_bytes!("../../fixtures/iid-detached.p7")), "identity-document-detached");
    assert_eq!(code(b"{\"instanceId\": \"i-0123456789abcdef0\"}"), "identity-not-pkcs7");
    assert_eq!(code(&GOOD[..GOOD.len() - 40]), "identity-not-pkcs7");
    assert_eq!(code(&vec![0x30; MAX_DOCUMENT_BYTES + 1]), "identity-document-too-large");
}

/// The same length, other bytes: the signature was made over the original document.
fn swap(doc: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = doc.windows(from.len()).position(|w| w == from).unwrap();
    let mut out = doc.to_vec();
    out[at..at + to.len()].copy_from_slice(to);
    out
}

#[test]
fn a_signature_over_other_bytes_is_refused() {
    let changed = swap(GOOD, b"i-0123456789abcdef0", b"i-0123456789abcdef1");
    assert_eq!(code(&changed), "identity-digest-mismatch");
    // Without signed attributes the signature itself fails.
    let noattr = include_bytes!("../../fixtures/iid-good-noattr.p7");
    assert_eq!(code(&swap(noattr, b"i-0123456789abcdef0", b"i-0123456789abcdef1")), "identity-bad-signature");
    // The signed attributes changed (signingTime's year): the signature fails.
    let at = GOOD.windows(3).position(|w| w == [0x17, 0x0d, b'2']).unwrap();
    let mut attrs = GOOD.to_vec();
    attrs[at + 3] ^= 1;
    assert_eq!(code(&attrs), "identity-bad-signature");
}

#[test]
fn the_entry_the_certname_falls_under_decides() {
    // Signed by a certificate of another entry only.
    let rules = [
        AwsIdentityRule { certnames: vec![Pattern::certname("*.db.example.com").unwrap()], ..rule(&[CLOUD]) },
        rule(&[OTHER]),
    ];
    let r = AwsIdentity { rules: &rules }.verify(BINDING, GOOD, NOW).unwrap_err();
    assert_eq!(r.code(), "identity-unknown-signer");
    let r = AwsIdentity { rules: &[rule(&[CLOUD])] }.verify("aws:{instance-id}.db.example.com", GOOD, NOW);
    assert_eq!(r.unwrap_err().code(), "identity-not-configured");
    let r = AwsIdentity { rules: &[] }.verify(BINDING, GOOD, NOW);
    assert_eq!(r.unwrap_err().code(), "identity-unknown-signer");
}

#[test]
fn bindings_are_read_strictly() {
    for (b, code) in [
        ("gcp:{instance-id}.example.com", "identity-provider-unsupported"),
        ("aws:web.example.com", "identity-binding-invalid"),
        ("aws:{instance-id}.{instance-id}.example.com", "identity-binding-invalid"),
        ("aws:{instance-id}.{x}.example.com", "identity-binding-invalid"),
        ("{instance-id}.example.com", "identity-binding-invalid"),
    ] {
        let r = AwsIdentity { rules: &[rule(&[CLOUD])] }.verify(b, GOOD, NOW);
        assert_eq!(r.unwrap_err().code(), code, "{b}");
    }
}

#[test]
fn the_provider_certificate_must_be_valid_now() {
    let r = AwsIdentity { rules: &[rule(&[CLOUD])] }.verify(BINDING, GOOD, datetime!(2020-01-01 0:00 UTC));
    assert_eq!(r.unwrap_err().code(), "identity-provider-certificate-expired");
}

#[test]
fn the_attribute_is_bounded_base64() {
    assert_eq!(attribute::decode(&attribute::encode(GOOD)).unwrap(), GOOD);
    let wrapped: String = attribute::encode(GOOD)
        .chars()
        .enumerate()
        .flat_map(|(i, c)| (i % 64 == 63).then_some('\n').into_iter().chain(std::iter::once(c)))
        .collect();
    assert_eq!(attribute::decode(&wrapped).unwrap(), GOOD);
    assert_eq!(attribute::decode("not base64!").unwrap_err().code(), "identity-document-not-base64");
    let huge = "A".repeat(attribute::MAX_TEXT + 1);
    assert_eq!(attribute::decode(&huge).unwrap_err().code(), "identity-document-too-large");
}

#[test]
fn the_document_fields_are_checked_before_they_make_a_certname() {
    for (json, what) in [
        (r#"{"instanceId":"i-../../etc","accountId":"111122223333","region":"eu-west-1"}"#, "instanceId"),
        (r#"{"instanceId":"i-01234567","accountId":"1111","region":"eu-west-1"}"#, "accountId"),
        (r#"{"instanceId":"i-01234567","accountId":"111122223333","region":"EU WEST"}"#, "region"),
        (r#"{"accountId":"111122223333"}"#, "instanceId"),
    ] {
        let r = AwsDocument::parse(json.as_bytes()).unwrap_err();
        assert_eq!(r.code(), "identity-document-invalid");
        assert!(r.to_string().contains(what), "{r}");
    }
    assert!(
        AwsDocument::parse(br#"{"instanceId":"i-01234567","accountId":"111122223333","region":"eu-west-1"}"#).is_ok()
    );
}

#[test]
fn the_cloud_init_part_is_yaml_with_the_script() {
    let part = cloud_init::runcmd("{instance-id}.web.asg.example.com");
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&part).unwrap();
    let cmd = &v["runcmd"][0];
    assert_eq!(cmd[0].as_str(), Some("/usr/bin/python3"));
    assert!(cmd[2].as_str().unwrap().contains("1.3.6.1.4.1.34380.2.11"));
    // The instance id comes from the unsigned metadata document: checked before it is used.
    assert!(cmd[2].as_str().unwrap().contains(r#"re.fullmatch(r"i-([0-9a-f]{8}|[0-9a-f]{17})", instance)"#));
    assert_eq!(cmd[3].as_str(), Some("{instance-id}.web.asg.example.com"));
}

#[test]
fn a_request_is_judged_by_its_binding() {
    let rules = [rule(&[CLOUD])];
    let p = Providers { aws: &rules };
    let doc = attribute::encode(GOOD);
    let certname = "i-0123456789abcdef0.web.asg.example.com";
    assert_eq!(p.judge("", Some(&doc), certname, NOW).unwrap(), None);
    assert_eq!(p.judge(BINDING, Some(&doc), certname, NOW).unwrap().unwrap().certname, certname);
    let code = |b: &str, d: Option<&str>, c: &str| p.judge(b, d, c, NOW).unwrap_err().code();
    assert_eq!(code(BINDING, None, certname), "identity-document-missing");
    assert_eq!(code(BINDING, Some(&doc), "web01.web.asg.example.com"), "identity-certname-not-derived");
    assert_eq!(code("azure:{instance-id}.example.com", Some(&doc), certname), "identity-provider-unsupported");
    assert_eq!(code(BINDING, Some("%%%"), certname), "identity-document-not-base64");
}

#[test]
fn every_byte_flipped_or_cut_never_panics_nor_changes_the_instance() {
    let want = verify(GOOD).unwrap();
    let mut accepted = 0;
    for i in 0..GOOD.len() {
        let mut m = GOOD.to_vec();
        m[i] ^= 0x41;
        if let Ok(v) = verify(&m) {
            // No byte outside the signature's cover is left unchecked.
            assert_eq!(v, want, "byte {i}");
            accepted += 1;
        }
        assert!(verify(&GOOD[..i]).is_err(), "cut at {i}");
    }
    assert_eq!(accepted, 0, "{accepted} flipped bytes were accepted");
}

#[test]
fn a_bound_cloud_config_starts_the_agent_after_the_document_is_in() {
    let rendered = "#cloud-config\npuppet:\n  csr_attributes:\n    custom_attributes:\n      '1': 'x'\n";
    let v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&cloud_init::bound_cloud_config(rendered, "{instance-id}.example.com")).unwrap();
    assert_eq!(v["puppet"]["start_service"].as_bool(), Some(false));
    assert_eq!(v["puppet"]["exec"].as_bool(), Some(false));
    assert_eq!(v["puppet"]["csr_attributes"]["custom_attributes"]["1"].as_str(), Some("x"));
    assert_eq!(v["runcmd"][0][3].as_str(), Some("{instance-id}.example.com"));
    assert_eq!(v["runcmd"][1][0].as_str(), Some("puppet"));
}

/// The fixtures' instance was launched at 06:00 (pendingTime); the rule allows 1h.
#[test]
fn a_document_is_honoured_only_from_launch_to_its_maximum_age() {
    let at = |now| AwsIdentity { rules: &[rule(&[CLOUD])] }.verify(BINDING, GOOD, now).map_err(|r| r.code());
    assert!(at(datetime!(2026-11-29 07:00 UTC)).is_ok());
    assert_eq!(at(datetime!(2026-11-29 07:00:01 UTC)), Err("identity-document-stale"));
    assert_eq!(at(datetime!(2026-12-29 06:00 UTC)), Err("identity-document-stale"));
    let six = AwsIdentityRule { max_document_age: std::time::Duration::from_secs(6 * 3600), ..rule(&[CLOUD]) };
    assert!(AwsIdentity { rules: std::slice::from_ref(&six) }
        .verify(BINDING, GOOD, datetime!(2026-11-29 11:59 UTC))
        .is_ok());
    // The cloud's clock may run up to 5 minutes ahead of the CA's (the fixtures' provider
    // certificate is valid only from 06:51, so the age alone is checked here).
    let doc = |pending: &str| {
        let json = format!(
            "{{\"instanceId\": \"i-01234567\", \"accountId\": \"111122223333\", \"region\": \"eu-west-1\"{pending}}}"
        );
        AwsDocument::parse(json.as_bytes()).unwrap()
    };
    let age = |pending: &str, now| aws::check_age(&doc(pending), &six, now).map_err(|r| r.code());
    let launched = ", \"pendingTime\": \"2026-11-29T06:00:00Z\"";
    assert!(age(launched, datetime!(2026-11-29 05:55 UTC)).is_ok());
    assert_eq!(age(launched, datetime!(2026-11-29 05:54:59 UTC)), Err("identity-document-from-the-future"));
    assert_eq!(age(launched, datetime!(2026-11-29 12:00:01 UTC)), Err("identity-document-stale"));
    assert_eq!(age("", datetime!(2026-11-29 06:00 UTC)), Err("identity-document-invalid"));
    assert_eq!(
        age(", \"pendingTime\": \"yesterday\"", datetime!(2026-11-29 06:00 UTC)),
        Err("identity-document-invalid")
    );
}
