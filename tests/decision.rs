//! The decision core, driven through the library with every fixture.

mod common;

use common::*;
use std::path::Path;
use time::OffsetDateTime;
use vouch::decision::{decide, Refusal, Request};
use vouch::vouching::classification::ClassificationError;
use vouch::Policy;

fn policy(name: &str) -> Policy {
    Policy::load(&fixture(name)).expect("fixture policy loads")
}

fn codes(file: &str, certname: &str, policy: &Policy) -> Vec<&'static str> {
    let csr = std::fs::read(fixture(&format!("csr/{file}"))).unwrap();
    match decide(&Request { csr: &csr, certname }, policy, fixture_time()) {
        Ok(grant) => {
            assert_eq!(grant.certname(), certname);
            vec![]
        }
        Err(r) => r.reasons.iter().map(Refusal::code).collect(),
    }
}

#[test]
fn every_fixture_gets_exactly_its_expected_reasons() {
    let p = policy("policy.toml");
    let mut failures = vec![];
    for (file, certname, want) in CASES {
        let got = codes(file, certname, &p);
        if got != *want {
            failures.push(format!("{file} as {certname}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn per_conductor_scopes() {
    let p = policy("policy-scoped.toml");
    let mut failures = vec![];
    for (file, certname, want) in SCOPED_CASES {
        let got = codes(file, certname, &p);
        if got != *want {
            failures.push(format!("{file} as {certname}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_is_in_the_table() {
    let listed: Vec<&str> = CASES.iter().map(|(f, _, _)| *f).collect();
    for entry in std::fs::read_dir(fixture("csr")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(listed.contains(&name.as_str()), "fixture {name} has no expectation in tests/common/mod.rs");
    }
}

#[test]
fn mirror_required_policy_refuses_a_missing_mirror() {
    let p = policy("policy-mirror-required.toml");
    assert_eq!(codes("mirror-missing.csr.pem", CERTNAME, &p), ["mirror-missing"]);
    assert_eq!(codes("valid-p256-conductor.csr.pem", CERTNAME, &p), Vec::<&str>::new());
}

#[test]
fn exact_refusal_values() {
    let p = policy("policy.toml");
    let csr = std::fs::read(fixture("csr/attributes-expired.csr.pem")).unwrap();
    let r = decide(&Request { csr: &csr, certname: CERTNAME }, &p, fixture_time()).unwrap_err();
    assert_eq!(
        r.reasons,
        [Refusal::AttributesExpired { expiry: "2030-06-01T11:00:00Z".into(), now: "2030-06-01T12:00:00Z".into() }]
    );
    assert_eq!(r.conductor.as_ref().map(|c| c.subject.as_str()), Some("CN=conductor-p256"));
    let csr = std::fs::read(fixture("csr/classification-too-large.csr.pem")).unwrap();
    let r = decide(&Request { csr: &csr, certname: CERTNAME }, &p, fixture_time()).unwrap_err();
    assert!(matches!(
        r.reasons.as_slice(),
        [Refusal::ClassificationInvalid { error: ClassificationError::TooLarge { max: 65536, .. } }]
    ));
}

#[test]
fn time_is_a_parameter() {
    let p = policy("policy.toml");
    let csr = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let req = Request { csr: &csr, certname: CERTNAME };
    assert!(decide(&req, &p, fixture_time()).is_ok());
    // One second after the signed expiry (2030-06-02T12:00:00Z) the same CSR is refused.
    let later = fixture_time() + time::Duration::days(1) + time::Duration::seconds(1);
    let r = decide(&req, &p, later).unwrap_err();
    assert_eq!(r.reasons.iter().map(Refusal::code).collect::<Vec<_>>(), ["attributes-expired"]);
}

#[test]
fn every_refusal_has_a_message_and_a_hint() {
    let p = policy("policy.toml");
    for (file, certname, _) in CASES {
        let csr = std::fs::read(fixture(&format!("csr/{file}"))).unwrap();
        if let Err(r) = decide(&Request { csr: &csr, certname }, &p, fixture_time()) {
            for reason in r.reasons {
                assert!(!reason.to_string().is_empty() && !reason.hint().is_empty(), "{file}");
            }
        }
    }
}

#[test]
fn real_puppet_agent_csr_parses_and_is_refused_for_its_defects() {
    // Made by Puppet 7's own code path: multi-line PEM in a "PrintableString",
    // fake signature, expiry 2025-11-22, self-signed conductor certificate.
    let p = policy("policy.toml");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/puppet7/offline-node.example.csr.pem");
    let csr = std::fs::read(&path).expect("fixtures/puppet7 is in the repository");
    let r = decide(&Request { csr: &csr, certname: "offline-node.example" }, &p, fixture_time()).unwrap_err();
    let codes: Vec<_> = r.reasons.iter().map(Refusal::code).collect();
    for want in ["attributes-expired", "signature-invalid", "conductor-eku-missing"] {
        assert!(codes.contains(&want), "{codes:?}");
    }
    // Its self-signed conductor certificate has lapsed by the fixture time; either way it is not trusted.
    assert!(codes.contains(&"conductor-expired") || codes.contains(&"conductor-untrusted"), "{codes:?}");
    assert!(!codes.iter().any(|c| c.starts_with("csr-") || *c == "attribute-missing"), "{codes:?}");
    // The body exactly as Puppet Server hands it to an autosign executable.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/puppet7/crlf-body-as-received-by-hook.pem");
    let body = std::fs::read(&path).unwrap();
    let r = decide(&Request { csr: &body, certname: "crlf-node.example" }, &p, fixture_time());
    let codes: Vec<_> = r.unwrap_err().reasons.iter().map(Refusal::code).collect();
    assert!(!codes.iter().any(|c| c.starts_with("csr-")), "the CRLF body parses: {codes:?}");
}

#[test]
fn signature_vectors_verify_and_deterministic_ones_reproduce() {
    use base64::Engine;
    for (version, name) in ["p256", "p384", "rsa2048", "ed25519"].iter().flat_map(|n| [(1, *n), (2, *n)]) {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("vectors/v{version}-{name}.json"))).unwrap(),
        )
        .unwrap();
        let a = &v["attributes"];
        let get = |oid: &str| a[oid].as_str().unwrap().to_string();
        let canonical = if version == 1 {
            vouch::vouching::attrs::canonical_v1(
                &get("1.3.6.1.4.1.34380.2.2"),
                &get("1.3.6.1.4.1.34380.2.3"),
                &get("1.3.6.1.4.1.34380.2.4"),
                &get("1.3.6.1.4.1.34380.2.5"),
            )
        } else {
            vouch::vouching::attrs::canonical_v2(
                &get("1.3.6.1.4.1.34380.2.2"),
                &get("1.3.6.1.4.1.34380.2.3"),
                &get("1.3.6.1.4.1.34380.2.4"),
                &get("1.3.6.1.4.1.34380.2.5"),
                &get("1.3.6.1.4.1.34380.2.6"),
                &get("1.3.6.1.4.1.34380.2.7"),
            )
        };
        assert_eq!(canonical, v["canonical_string"].as_str().unwrap().as_bytes(), "{name}");
        let key = vouch::issuance::keys::load_pem(v["conductor_private_key_pem"].as_str().unwrap()).unwrap();
        let sig = base64::engine::general_purpose::STANDARD.decode(get("1.3.6.1.4.1.34380.2.1")).unwrap();
        let cert = base64::engine::general_purpose::STANDARD.decode(get("1.3.6.1.4.1.34380.2.4")).unwrap();
        let der = rustls_pki_types::CertificateDer::from(cert.as_slice());
        let ee = webpki::EndEntityCert::try_from(&der).unwrap();
        let alg: &dyn rustls_pki_types::SignatureVerificationAlgorithm = match name {
            "p256" => webpki::aws_lc_rs::ECDSA_P256_SHA256,
            "p384" => webpki::aws_lc_rs::ECDSA_P384_SHA384,
            "rsa2048" => webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
            _ => webpki::aws_lc_rs::ED25519,
        };
        ee.verify_signature(alg, &canonical, &sig).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let mut flipped = canonical.clone();
        flipped[0] ^= 1;
        assert!(ee.verify_signature(alg, &flipped, &sig).is_err());
        if name == "rsa2048" || name == "ed25519" {
            let again = rcgen::SigningKey::sign(&key, &canonical).unwrap();
            assert_eq!(again, sig, "{name} signatures are deterministic");
        }
    }
}

#[test]
fn strict_policy_accepts_only_short_lived_version_2() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("ca")).unwrap();
    std::fs::copy(fixture("pki/root_crt.pem"), t.path().join("ca/root_crt.pem")).unwrap();
    let p = t.path().join("strict.toml");
    std::fs::copy(root().join("policy/strict.toml"), &p).unwrap();
    let strict = Policy::load(&p).unwrap();
    assert_eq!(strict.versions, [2]);
    assert!(strict.mirror_required && strict.replay_journal.is_some());
    // A version the policy does not accept is the one reason (its other checks would be
    // another version's); the fixtures' attributes live 24 hours: too long for strict's 1 hour.
    assert_eq!(codes("valid-p256-conductor.csr.pem", CERTNAME, &strict), ["version-unsupported"]);
    assert_eq!(codes("valid-v2.csr.pem", CERTNAME, &strict), ["expiry-too-far"]);
    // Half an hour before the signed expiry, the version 2 CSR passes.
    let late = fixture_time() + time::Duration::hours(23) + time::Duration::minutes(30);
    let csr = std::fs::read(fixture("csr/valid-v2.csr.pem")).unwrap();
    assert!(decide(&Request { csr: &csr, certname: CERTNAME }, &strict, late).is_ok());
}

#[test]
fn a_cached_conductor_chain_still_expires_and_belongs_to_its_policy_alone() {
    let p = policy("policy.toml");
    let csr = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let req = Request { csr: &csr, certname: CERTNAME };
    assert!(p.chain_cache.is_empty());
    assert!(decide(&req, &p, fixture_time()).is_ok());
    assert_eq!(p.chain_cache.len(), 1, "the verified chain is remembered");
    assert!(decide(&req, &p, fixture_time()).is_ok(), "and a second decision uses it");
    let at = |t: OffsetDateTime| match decide(&req, &p, t) {
        Ok(_) => vec![],
        Err(r) => r.reasons.iter().map(Refusal::code).collect::<Vec<_>>(),
    };
    // The conductor certificate is valid through 2030: the cache does not outlive it, nor
    // make it valid before its time.
    assert!(at(fixture_time() + time::Duration::days(365)).contains(&"conductor-expired"));
    assert!(at(fixture_time() - time::Duration::days(365)).contains(&"conductor-not-yet-valid"));
    // Another policy that trusts another root refuses the same conductor: caches are per policy.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap().replace(
        "trusted_roots = [\"pki/root_crt.pem\"]",
        &format!("trusted_roots = [\"{}\"]", fixture("pki/rogue_root_crt.pem").display()),
    );
    let other_path = dir.path().join("policy.toml");
    std::fs::write(&other_path, text.replace("\"pki/", &format!("\"{}/pki/", fixture("").display()))).unwrap();
    let other = Policy::load(&other_path).unwrap();
    let r = decide(&req, &other, fixture_time()).unwrap_err();
    assert!(r.reasons.iter().any(|x| x.code() == "conductor-untrusted"), "{:?}", r.reasons);
}

/// A classification a trusted conductor signed is parsed once per policy: the second
/// decision with it takes it from the cache and grants the same; one that does not parse is
/// never cached (each request with it is parsed and refused again).
#[test]
fn a_parsed_classification_is_reused_and_a_refused_one_is_never_cached() {
    let p = policy("policy.toml");
    let csr = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let req = Request { csr: &csr, certname: CERTNAME };
    assert!(p.classification_cache.is_empty());
    let first = decide(&req, &p, fixture_time()).unwrap();
    assert_eq!(p.classification_cache.len(), 1, "the parsed classification is remembered");
    let second = decide(&req, &p, fixture_time()).unwrap();
    assert_eq!(first.classification(), second.classification());
    for bad in ["classification-alias-bomb", "classification-yaml-tag", "classification-unknown-key"] {
        assert!(!codes(&format!("{bad}.csr.pem"), CERTNAME, &p).is_empty(), "{bad}");
        assert!(!codes(&format!("{bad}.csr.pem"), CERTNAME, &p).is_empty(), "{bad}, again");
    }
    assert_eq!(p.classification_cache.len(), 1, "refused classifications are not cached");
}

/// A CSR for `certname` carrying version 1 attributes signed by `cert_der`/`key`.
fn vouched_csr(cert_der: &[u8], key: &rcgen::KeyPair, certname: &str, classification: &str) -> Vec<u8> {
    let class = vouch::vouching::classification::Classification::from_yaml(classification, 65536).unwrap();
    let expiry = fixture_time() + time::Duration::hours(1);
    let v = vouch::vouching::attrs::vouch(
        cert_der,
        key,
        &class,
        expiry,
        vouch::vouching::attrs::CertEncoding::Base64Der,
        None,
    )
    .unwrap();
    let attrs = vouch::vouching::attrs::CsrAttributes::from_vouched(&v, Some(vouch::policy::DEFAULT_MIRROR_OID));
    let spec = attrs.csr_spec(certname).unwrap();
    vouch::encoding::csr::build(&spec, &rcgen::KeyPair::generate().unwrap()).unwrap()
}

/// fixtures/policy.toml with absolute paths, plus `extra`.
fn policy_with(extra: &str) -> (tempfile::TempDir, Policy) {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap();
    let text = text.replace("\"pki/", &format!("\"{}/pki/", fixture("").display()));
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, format!("{text}\n{extra}")).unwrap();
    let p = Policy::load(&path).unwrap();
    (dir, p)
}

/// Issue 13, point 6: the exact pattern and certname, from an untrusted self-made
/// conductor whose subject matches the scope, is refused for its chain (scopes are not
/// judged for it), and from a trusted conductor, out of scope. The recursive matcher
/// backtracked exponentially on this (8 s of CPU per request in a release build, minutes
/// in a test build): this test would not finish in practice on it.
#[test]
fn scope_globs_run_in_linear_time_and_only_for_a_trusted_conductor() {
    let pattern = "*-*-*-*-*-*-*-*x.example.test";
    let extra = format!(
        "[[conductor]]\nname = \"evil\"\nsubject = \"CN=evil-launcher\"\ncertnames = [\"{pattern}\"]\n\n\
         [[conductor]]\nname = \"p256\"\nsubject = \"CN=conductor-p256\"\ncertnames = [\"{pattern}\"]\n"
    );
    let (_dir, p) = policy_with(&extra);
    let certname = format!("a{}a.example.test", "-".repeat(61));
    // A self-made conductor: right EKU and key usage, subject matching the "evil" scope.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::CommonName, "evil-launcher");
    params.not_before = fixture_time() - time::Duration::days(30);
    params.not_after = fixture_time() + time::Duration::days(30);
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![rcgen::ExtendedKeyUsagePurpose::Other(vouch::encoding::oids::EKU_CONDUCTOR.to_vec())];
    let cert = params.self_signed(&key).unwrap();
    let csr = vouched_csr(cert.der(), &key, &certname, "classes: [ntp]\n");
    let r = decide(&Request { csr: &csr, certname: &certname }, &p, fixture_time()).unwrap_err();
    let codes: Vec<_> = r.reasons.iter().map(Refusal::code).collect();
    assert_eq!(codes, ["conductor-untrusted"], "{:?}", r.reasons);
    // The trusted conductor-p256 and the same certname: the scope is judged, in linear time.
    let pem = std::fs::read(fixture("pki/conductor-p256.pem")).unwrap();
    let der = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap().1;
    let key =
        vouch::issuance::keys::load_pem(&std::fs::read_to_string(fixture("pki/conductor-p256.key")).unwrap()).unwrap();
    let csr = vouched_csr(&der, &key, &certname, "classes: [ntp]\n");
    let r = decide(&Request { csr: &csr, certname: &certname }, &p, fixture_time()).unwrap_err();
    assert_eq!(r.reasons.iter().map(Refusal::code).collect::<Vec<_>>(), ["certname-out-of-scope"]);
    let fine = "a-b-c-d-e-f-g-hx.example.test";
    let csr = vouched_csr(&der, &key, fine, "classes: [ntp]\n");
    assert!(decide(&Request { csr: &csr, certname: fine }, &p, fixture_time()).is_ok());
}

/// A policy like fixtures/policy.toml (fixture PKI by absolute path) plus `extra`.
fn policy_plus(dir: &Path, extra: &str) -> Result<Policy, vouch::policy::PolicyError> {
    let pki = fixture("pki");
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap().replace("\"pki/", &format!("\"{}/", s(&pki)));
    let path = dir.join("policy.toml");
    std::fs::write(&path, format!("{text}\n{extra}")).unwrap();
    Policy::load(&path)
}

/// A version 2 CSR from conductor-p256 for `certname` asking for `names` in a subjectAltName
/// request (each a DER GeneralName: `[0x82, len, name...]` is a dNSName).
fn csr_with_alt_names(certname: &str, names: &[Vec<u8>]) -> Vec<u8> {
    csr_with_alt_names_bound(certname, names, true)
}

/// [`csr_with_alt_names`], with version 1 attributes (the certname not signed) unless `bound`.
fn csr_with_alt_names_bound(certname: &str, names: &[Vec<u8>], bound: bool) -> Vec<u8> {
    use vouch::encoding::der;
    let cert = std::fs::read(fixture("pki/conductor-p256.pem")).unwrap();
    let (_, cert_der) = vouch::encoding::pem::find(&cert, &["CERTIFICATE"]).unwrap();
    let key =
        vouch::issuance::keys::load_pem(&std::fs::read_to_string(fixture("pki/conductor-p256.key")).unwrap()).unwrap();
    let class = vouch::vouching::classification::Classification::from_yaml("classes: [role::puppet]\n", 65536).unwrap();
    let expiry = fixture_time() + time::Duration::hours(1);
    let a = vouch::vouching::attrs::vouch(
        &cert_der,
        &key,
        &class,
        expiry,
        vouch::vouching::attrs::CertEncoding::Base64Der,
        Some(certname).filter(|_| bound),
    )
    .unwrap();
    let attrs = vouch::vouching::attrs::CsrAttributes::from_vouched(&a, Some(vouch::policy::DEFAULT_MIRROR_OID));
    let node_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut parts = vouch::encoding::csr::parts(&attrs.csr_spec(certname).unwrap(), &node_key);
    let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let san =
        der::sequence(&[&der::oid(vouch::encoding::oids::SUBJECT_ALT_NAME), &der::octet_string(&der::sequence(&refs))]);
    // Append the request to the one Extensions SEQUENCE (the mirror is already in it).
    let exts = parts.extension_request.pop().unwrap();
    let body = der::Reader::new(&exts).any().unwrap().content;
    parts.extension_request.push(der::sequence(&[body, &san]));
    vouch::encoding::csr::assemble(&parts, &node_key).unwrap()
}

fn dns(name: &str) -> Vec<u8> {
    let mut v = vec![0x82, u8::try_from(name.len()).unwrap()];
    v.extend_from_slice(name.as_bytes());
    v
}

/// Alt names are a server's: only a certname its conductor's scope lists in `servers` gets
/// them, each one matching the scope's `dns_alt_names`, and they are issued as asked; an
/// ordinary node, a name outside the scope, an IP address or a wildcard is refused with its
/// own reason; a policy without such a scope refuses every alt name; and
/// `allow_subject_alt_names = true` (which once accepted names and issued none) does not load.
#[test]
fn alt_names_only_for_servers_each_allowed_by_the_scope() {
    let tmp = tempfile::tempdir().unwrap();
    let scope = "[[conductor]]\nname = \"fleet\"\nsubject = \"CN=conductor-p256\"\n\
                 servers = [\"compile*.example.test\"]\ndns_alt_names = [\"puppet\", \"puppet.example.test\"]\n";
    let p = policy_plus(tmp.path(), scope).unwrap();
    let decide_codes = |certname: &str, names: &[Vec<u8>], p: &Policy| {
        let csr = csr_with_alt_names(certname, names);
        decide(&Request { csr: &csr, certname }, p, fixture_time()).map_err(Box::new)
    };
    let server = "compile01.example.test";
    // A server: its certname (Puppet lists it) and two allowed names, issued exactly.
    let g = decide_codes(server, &[dns(server), dns("puppet"), dns("puppet.example.test")], &p).unwrap();
    assert_eq!(g.alt_names(), ["puppet", "puppet.example.test"]);
    // Only its certname: nothing more.
    let g = decide_codes(server, &[dns(server)], &p).unwrap();
    assert!(g.alt_names().is_empty());
    let refused = |certname: &str, names: &[Vec<u8>], p: &Policy| -> Vec<&'static str> {
        decide_codes(certname, names, p).unwrap_err().reasons.iter().map(Refusal::code).collect()
    };
    assert_eq!(
        refused("web01.example.test", &[dns("web01.example.test"), dns("puppet")], &p),
        ["alt-names-not-a-server"]
    );
    assert_eq!(refused(server, &[dns("puppet"), dns("db.example.test")], &p), ["alt-name-out-of-scope"]);
    assert_eq!(refused(server, &[dns("puppet"), vec![0x87, 4, 127, 0, 0, 1]], &p), ["alt-name-unsupported"]);
    assert_eq!(refused(server, &[dns("*.example.test")], &p), ["alt-name-unsupported"]);
    assert_eq!(refused(server, &[dns("PUPPET")], &p), ["alt-name-unsupported"]);
    // An IP address written as a DNS name (review of issue 17, finding 9), even one a pattern matches.
    assert_eq!(refused(server, &[dns("10.0.0.5")], &p), ["alt-name-unsupported"]);
    let any = policy_plus(
        tmp.path(),
        &scope
            .replace("dns_alt_names = [\"puppet\"", "dns_alt_names = [\"*\", \"10.0.0.*\", \"127.0.0.1\", \"puppet\""),
    )
    .unwrap();
    assert!(decide_codes(server, &[dns("db01")], &any).is_ok(), "the wide scope allows one-label names");
    assert_eq!(refused(server, &[dns("10.0.0.5")], &any), ["alt-name-unsupported"]);
    assert_eq!(refused(server, &[dns("127.0.0.1")], &any), ["alt-name-unsupported"]);
    // Without a scope that lists dns_alt_names, the policy allows none.
    let plain = policy("policy.toml");
    assert_eq!(refused(server, &[dns(server), dns("puppet")], &plain), ["subject-alt-name-requested"]);
    assert_eq!(refused(server, &[dns(server)], &plain), ["subject-alt-name-requested"]);
    // Version 1 attributes do not sign the certname: a CN the node chose is no server (review
    // of issue 17, finding 2), whatever `servers` matches.
    let v1 = csr_with_alt_names_bound(server, &[dns(server), dns("puppet")], false);
    let r = decide(&Request { csr: &v1, certname: server }, &p, fixture_time()).unwrap_err();
    assert_eq!(r.reasons.iter().map(Refusal::code).collect::<Vec<_>>(), ["alt-names-certname-not-vouched"]);
    // ... while version 1 without alt names is still granted.
    let v1 = csr_with_alt_names_bound(server, &[dns(server)], false);
    assert!(decide(&Request { csr: &v1, certname: server }, &p, fixture_time()).is_ok());
    // No administrator path grants alt names (the API's "signed" decides again like this).
    // A scope without servers cannot list names, and the old switch does not load.
    let half = scope.replace("servers = [\"compile*.example.test\"]\n", "");
    assert!(policy_plus(tmp.path(), &half).unwrap_err().to_string().contains("servers"));
    let on = std::fs::read_to_string(fixture("policy.toml"))
        .unwrap()
        .replace("allow_subject_alt_names = false", "allow_subject_alt_names = true");
    let path = tmp.path().join("on.toml");
    std::fs::write(&path, on.replace("\"pki/", &format!("\"{}/", s(&fixture("pki"))))).unwrap();
    let e = Policy::load(&path).unwrap_err().to_string();
    assert!(e.contains("allow_subject_alt_names") && e.contains("dns_alt_names"), "{e}");
}
