//! Issuance, the store and the lifecycle commands, through the real binary,
//! with `openssl` as the independent verifier of everything vouch issues.

mod common;

use common::{ok, s};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Ca {
    _t: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
}

impl Ca {
    fn new(key_type: &str) -> Ca {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vouch");
        let work = t.path().to_path_buf();
        let ca = Ca { _t: t, dir, work };
        ok(&ca.vouch(&["ca", "init", "--key-type", key_type]));
        let cert = ca.work.join("cloud1.pem");
        let key = ca.work.join("cloud1.key");
        ok(&ca.vouch(&["conductor", "new", "cloud1", "--cert-out", s(&cert), "--key-out", s(&key)]));
        ca
    }

    fn vouch(&self, args: &[&str]) -> Output {
        self.vouch_in(args, None)
    }

    fn vouch_in(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.args(args).env("VOUCH_DIR", &self.dir).env_remove("VOUCH_POLICY");
        c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(input) = stdin {
            let _ = child.stdin.take().unwrap().write_all(input);
        }
        child.wait_with_output().unwrap()
    }

    /// Vouched attributes for a node (with `classification` YAML) and a CSR with a fresh key.
    fn vouched_csr(&self, name: &str, tag: &str, classification: &str, expires_in: &str) -> PathBuf {
        let class = self.work.join(format!("{name}-{tag}.class.yaml"));
        std::fs::write(&class, classification).unwrap();
        let attrs = self.work.join(format!("{name}-{tag}.attrs.yaml"));
        ok(&self.vouch(&[
            "conductor",
            "sign",
            "--cert",
            s(&self.work.join("cloud1.pem")),
            "--key",
            s(&self.work.join("cloud1.key")),
            "--classification",
            s(&class),
            "--certname",
            name,
            "--expires-in",
            expires_in,
            "--out",
            s(&attrs),
        ]));
        self.csr_from(name, tag, &attrs)
    }

    fn csr_from(&self, name: &str, tag: &str, attrs: &Path) -> PathBuf {
        let csr = self.work.join(format!("{name}-{tag}.csr"));
        let key = self.work.join(format!("{name}-{tag}.key"));
        ok(&self.vouch(&[
            "csr",
            "--certname",
            name,
            "--attributes",
            s(attrs),
            "--key-out",
            s(&key),
            "--csr-out",
            s(&csr),
        ]));
        csr
    }

    fn ca_file(&self, f: &str) -> PathBuf {
        self.dir.join("ca").join(f)
    }

    /// The master CA's certificate, then the root's, in one file (openssl's -CAfile).
    fn chain(&self) -> PathBuf {
        let chain = self.work.join("chain.pem");
        let ca = std::fs::read_to_string(self.ca_file("ca_crt.pem")).unwrap();
        let root = std::fs::read_to_string(self.ca_file("root_crt.pem")).unwrap();
        std::fs::write(&chain, format!("{ca}{root}")).unwrap();
        chain
    }

    fn set_policy(&self, from: &str, to: &str) {
        let p = self.dir.join("policy.toml");
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "{from}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
    }
}

fn openssl(args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl").args(args).output().expect("openssl is installed (apt-get install -y openssl)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

const WEB: &str = "classes:\n  - profile::web\nparameters:\n  tier: frontend\nenvironment: production\n";
const DB: &str = "classes:\n  - profile::db\n";

/// Splits `vouch sign` output: the certificate, then the chain.
fn split_pem(pem: &str) -> Vec<String> {
    pem.split_inclusive("-----END CERTIFICATE-----\n").map(str::to_string).collect()
}

#[test]
fn issued_certificates_verify_with_openssl_and_carry_the_classification() {
    for key_type in ["p256", "rsa2048", "ed25519", "p384"] {
        let ca = Ca::new(key_type);
        let csr = ca.vouched_csr("web01.example.test", "a", WEB, "1h");
        let out = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
        let parts = split_pem(&out);
        assert_eq!(parts.len(), 3, "certificate, master CA, root: {out}");
        let cert = ca.work.join("web01.pem");
        std::fs::write(&cert, &parts[0]).unwrap();
        assert_eq!(parts[1], std::fs::read_to_string(ca.ca_file("ca_crt.pem")).unwrap());
        assert_eq!(parts[2], std::fs::read_to_string(ca.ca_file("root_crt.pem")).unwrap());
        let (good, text) = openssl(&[
            "verify",
            "-CAfile",
            s(&ca.ca_file("root_crt.pem")),
            "-untrusted",
            s(&ca.ca_file("ca_crt.pem")),
            "-purpose",
            "sslclient",
            s(&cert),
        ]);
        assert!(good, "{key_type}: {text}");
        let (_, text) = openssl(&["x509", "-in", s(&cert), "-noout", "-text"]);
        for want in [
            "Subject: CN = web01.example.test",
            "DNS:web01.example.test",
            "CA:FALSE",
            "TLS Web Server Authentication, TLS Web Client Authentication",
            "Digital Signature",
            "X509v3 Subject Key Identifier",
            "X509v3 Authority Key Identifier",
            "1.3.6.1.4.1.34380.2.5:",
            "1.3.6.1.4.1.34380.1.2.5:",
            "Issuer: CN = vouch Master CA",
        ] {
            assert!(text.contains(want), "{key_type}: missing {want}:\n{text}");
        }
        // Serial: 16 random octets, positive.
        let (_, serial) = openssl(&["x509", "-in", s(&cert), "-noout", "-serial"]);
        assert_eq!(serial.trim().trim_start_matches("serial=").len(), 32, "{serial}");
        // Validity: 5 years, notBefore a day back, within the master CA's.
        let (_, dates) = openssl(&["x509", "-in", s(&cert), "-noout", "-startdate", "-enddate"]);
        assert!(dates.contains("notBefore") && dates.contains("notAfter"));
        // The classifier reads it back from the certificate.
        let enc = ok(&ca.vouch(&["enc", "web01.example.test"]));
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&enc).unwrap();
        assert_eq!(v["classes"][0], "profile::web");
        assert_eq!(v["parameters"]["tier"], "frontend");
        assert_eq!(v["environment"], "production");
        let enc2 = ok(&ca.vouch(&["enc", "--cert", s(&cert)]));
        assert_eq!(enc, enc2);
    }
}

#[test]
fn refused_requests_stay_pending_with_reasons_and_nothing_is_issued() {
    let ca = Ca::new("p256");
    let csr = ca.vouched_csr("web01.example.test", "a", WEB, "1h");
    let out = ca.vouch(&["sign", "--csr", s(&csr), "--certname", "web02.example.test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[common-name-mismatch]"));
    let list: serde_json::Value = serde_json::from_str(&ok(&ca.vouch(&["list", "--all", "--format", "json"]))).unwrap();
    let entries = list.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{list}");
    assert_eq!(entries[0]["state"], "requested");
    assert_eq!(entries[0]["name"], "web02.example.test");
    assert!(entries[0]["reasons"][0].as_str().unwrap().contains("common-name-mismatch"));
    assert!(!ca.ca_file("signed/web02.example.test.pem").exists());
    assert!(std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap_or_default().is_empty());
    let out = ca.vouch(&["enc", "web02.example.test"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no certificate for web02.example.test"));
}

#[test]
fn duplicates_refused_by_default_and_superseded_by_policy() {
    let ca = Ca::new("p256");
    let first = ca.vouched_csr("web01.example.test", "a", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&first)]));
    // A reinstalled host: new key, fresh attributes. Refused by default, as Puppet does.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = ca.vouched_csr("web01.example.test", "b", DB, "1h");
    let out = ca.vouch(&["sign", "--csr", s(&second)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[certificate-exists]"));

    ca.set_policy("on_existing = \"refuse\"", "on_existing = \"supersede\"");
    // Replaying the first attributes with a new key does not supersede (same expiry).
    let replay = ca.csr_from("web01.example.test", "replay", &ca.work.join("web01.example.test-a.attrs.yaml"));
    let out = ca.vouch(&["sign", "--csr", s(&replay)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[supersede-replay]"), "{out:?}");
    // The same CSR again (same key) does not supersede either.
    let out = ca.vouch(&["sign", "--csr", s(&first)]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[supersede-same-key]") || stderr.contains("[supersede-replay]"), "{stderr}");
    // Fresh attributes and a new key: the old certificate is revoked (superseded).
    let old_serial = ok(&ca.vouch(&["list", "--all", "--format", "json"]));
    ok(&ca.vouch(&["sign", "--csr", s(&second)]));
    let enc = ok(&ca.vouch(&["enc", "web01.example.test"]));
    assert!(enc.contains("profile::db"), "{enc}");
    let list: serde_json::Value = serde_json::from_str(&ok(&ca.vouch(&["list", "--all", "--format", "json"]))).unwrap();
    let signed: Vec<_> = list.as_array().unwrap().iter().filter(|e| e["state"] == "signed").collect();
    assert_eq!(signed.len(), 1, "never two valid certificates for one certname: {list}");
    assert!(!old_serial.contains(signed[0]["serial"].as_str().unwrap()));
    let (_, crl) = openssl(&["crl", "-in", s(&ca.ca_file("ca_crl.pem")), "-noout", "-text"]);
    assert!(crl.contains("Superseded"), "{crl}");
}

#[test]
fn revoke_crl_clean_and_renew() {
    let ca = Ca::new("p256");
    for n in ["a", "b", "c"] {
        let name = format!("{n}.example.test");
        let csr = ca.vouched_csr(&name, "x", WEB, "1h");
        let out = ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join(format!("{n}.pem")))]));
        assert!(out.is_empty());
    }
    // Renew: same key, same classification, new serial; the old one is superseded.
    let before = std::fs::read_to_string(ca.work.join("a.pem")).unwrap();
    ok(&ca.vouch(&["renew", "a.example.test", "--out", s(&ca.work.join("a2.pem"))]));
    let after = std::fs::read_to_string(ca.work.join("a2.pem")).unwrap();
    let pubkey = |p: &str| {
        let f = ca.work.join("tmp.pem");
        std::fs::write(&f, split_pem(p)[0].as_bytes()).unwrap();
        openssl(&["x509", "-in", s(&f), "-noout", "-pubkey"]).1
    };
    assert_eq!(pubkey(&before), pubkey(&after));
    assert!(ok(&ca.vouch(&["enc", "a.example.test"])).contains("profile::web"));
    // Revoke b: it appears on the CRL and openssl's CRL check fails for it.
    ok(&ca.vouch(&["revoke", "b.example.test", "--reason", "key-compromise"]));
    let crl = ca.work.join("crl.pem");
    ok(&ca.vouch(&["crl", "--out", s(&crl)]));
    let (_, text) = openssl(&["crl", "-in", s(&crl), "-noout", "-text"]);
    assert!(text.contains("Key Compromise") && text.contains("Superseded"), "{text}");
    let chain = ca.chain();
    let b = ca.work.join("b-only.pem");
    std::fs::write(&b, split_pem(&std::fs::read_to_string(ca.work.join("b.pem")).unwrap())[0].as_bytes()).unwrap();
    let (good, text) = openssl(&["verify", "-crl_check", "-CAfile", s(&chain), "-CRLfile", s(&crl), s(&b)]);
    assert!(!good && text.contains("revoked"), "{text}");
    let c = ca.work.join("c-only.pem");
    std::fs::write(&c, split_pem(&std::fs::read_to_string(ca.work.join("c.pem")).unwrap())[0].as_bytes()).unwrap();
    let (good, text) = openssl(&["verify", "-crl_check", "-CAfile", s(&chain), "-CRLfile", s(&crl), s(&c)]);
    assert!(good, "{text}");
    // A revoked node has no classification.
    assert_eq!(ca.vouch(&["enc", "b.example.test"]).status.code(), Some(2));
    // Clean c: revoked and forgotten.
    ok(&ca.vouch(&["clean", "c.example.test"]));
    let list = ok(&ca.vouch(&["list", "--all"]));
    assert!(!list.contains("c.example.test"), "{list}");
    assert!(list.contains("b.example.test") && list.contains("a.example.test"), "{list}");
    assert!(!ca.ca_file("signed/c.example.test.pem").exists());
    // Revoke of an unknown name: a clear error.
    let out = ca.vouch(&["revoke", "nobody.example.test"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no certificate for nobody.example.test"));
}

/// `vouch list --all` streams: the JSON array, written element by element, is one valid
/// array holding every current certificate and request (and nothing cleaned, nothing
/// superseded); JSON lines hold the same objects; the text keeps its three sections.
#[test]
fn list_streams_complete_json_jsonl_and_text() {
    let ca = Ca::new("p256");
    let mut serials = std::collections::BTreeMap::new();
    for n in ["a", "b", "c", "d"] {
        let name = format!("{n}.example.test");
        let csr = ca.vouched_csr(&name, "x", WEB, "1h");
        let out = ca.work.join(format!("{n}.pem"));
        ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&out)]));
        let (_, serial) = openssl(&["x509", "-in", s(&out), "-noout", "-serial"]);
        serials.insert(name, serial.trim().trim_start_matches("serial=").to_lowercase());
    }
    // a renewed (its first certificate superseded: listed once, with the new serial), b
    // revoked, c cleaned, e refused (pending).
    ok(&ca.vouch(&["renew", "a.example.test", "--out", s(&ca.work.join("a2.pem"))]));
    let (_, renewed) = openssl(&["x509", "-in", s(&ca.work.join("a2.pem")), "-noout", "-serial"]);
    let renewed = renewed.trim().trim_start_matches("serial=").to_lowercase();
    assert_ne!(renewed, serials["a.example.test"]);
    serials.insert("a.example.test".into(), renewed);
    ok(&ca.vouch(&["revoke", "b.example.test"]));
    ok(&ca.vouch(&["clean", "c.example.test"]));
    let csr = ca.vouched_csr("e.example.test", "x", WEB, "1h");
    assert_eq!(ca.vouch(&["sign", "--csr", s(&csr), "--certname", "f.example.test"]).status.code(), Some(1));

    let expected: std::collections::BTreeSet<(String, String, Option<String>)> = [
        ("a.example.test", "signed"),
        ("b.example.test", "revoked"),
        ("d.example.test", "signed"),
        ("f.example.test", "requested"),
    ]
    .iter()
    .map(|(n, st)| (n.to_string(), st.to_string(), serials.get(*n).cloned()))
    .collect();
    let seen = |items: &[serde_json::Value]| -> std::collections::BTreeSet<(String, String, Option<String>)> {
        let set: std::collections::BTreeSet<_> = items
            .iter()
            .map(|e| {
                if e["state"] != "requested" {
                    assert!(e["not_after"].as_str().is_some_and(|t| t.len() >= 20), "{e}");
                }
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["state"].as_str().unwrap().to_string(),
                    e["serial"].as_str().map(str::to_string),
                )
            })
            .collect();
        assert_eq!(set.len(), items.len(), "each entry once: {items:?}");
        set
    };

    let json = ok(&ca.vouch(&["list", "--all", "--format", "json"]));
    assert!(json.starts_with("[\n") && json.ends_with("\n]\n"), "{json}");
    let array: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(seen(array.as_array().unwrap()), expected, "{json}");
    // Requests first.
    assert_eq!(array[0]["name"], "f.example.test", "{json}");
    assert!(array[0]["reasons"][0].as_str().unwrap().contains("common-name-mismatch"), "{json}");

    let jsonl = ok(&ca.vouch(&["list", "--all", "--format", "jsonl"]));
    assert!(jsonl.ends_with('\n'), "{jsonl}");
    let lines: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(&lines, array.as_array().unwrap(), "the same objects, in the same order");

    let listed = ca.vouch(&["list", "--all"]);
    // Below a pending request, on stderr: how an administrator approves one.
    assert!(String::from_utf8_lossy(&listed.stderr).contains("vouch approve NAME --fingerprint"), "{listed:?}");
    let text = ok(&listed);
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle:?} in {text}"));
    assert!(at("Requested Certificates:") < at("f.example.test"), "{text}");
    assert!(at("f.example.test") < at("Signed Certificates:"), "{text}");
    assert!(at("Signed Certificates:") < at("a.example.test") && at("a.example.test") < at("Revoked Certificates:"));
    assert!(at("Signed Certificates:") < at("d.example.test") && at("d.example.test") < at("Revoked Certificates:"));
    assert!(at("Revoked Certificates:") < at("b.example.test"), "{text}");
    assert!(!text.contains("c.example.test") && !text.contains("(none)"), "{text}");
    assert!(text.contains(&format!("a.example.test  serial {}  expires ", serials["a.example.test"])), "{text}");

    // Without --all: the requests only; with none, empty but valid.
    let pending = ok(&ca.vouch(&["list", "--format", "jsonl"]));
    assert_eq!(pending.lines().count(), 1, "{pending}");
    ok(&ca.vouch(&["clean", "f.example.test"]));
    assert_eq!(ok(&ca.vouch(&["list", "--format", "json"])), "[]\n");
    assert_eq!(ok(&ca.vouch(&["list", "--format", "jsonl"])), "");
    let none = ca.vouch(&["list"]);
    assert_eq!(ok(&none), "Requested Certificates:\n    (none)\n");
    assert!(none.stderr.is_empty(), "{none:?}");
}

#[test]
fn crl_is_regenerated_before_it_lapses() {
    let ca = Ca::new("p256");
    ok(&ca.vouch(&["crl"]));
    let number = || std::fs::read_to_string(ca.ca_file("crl_number")).unwrap().trim().parse::<u64>().unwrap();
    let n0 = number();
    // Touching the store now does not regenerate (30 days left, threshold 10).
    ok(&ca.vouch(&["list"]));
    assert_eq!(number(), n0);
    // 25 days later, any command that touches the store regenerates it.
    let later = time::OffsetDateTime::now_utc() + time::Duration::days(25);
    let later = vouch::encoding::time::format_rfc3339(later);
    ok(&ca.vouch(&["--now", &later, "list"]));
    assert!(number() > n0, "the CRL was not regenerated");
    let (_, text) = openssl(&["crl", "-in", s(&ca.ca_file("ca_crl.pem")), "-noout", "-nextupdate"]);
    assert!(text.contains("nextUpdate"), "{text}");
    // Each CRL is dated (Last-Modified, whole seconds) after the one it replaced, however
    // quickly they follow: an agent asking If-Modified-Since never keeps an older one.
    let second = || {
        std::fs::metadata(ca.ca_file("ca_crl.pem"))
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    // Puppet's agent asks If-Modified-Since its own copy's time, the moment it saved it: a
    // copy saved in the second a new CRL is written must read as older than that CRL.
    // (First the clock passes the dates the writes above ran ahead to.)
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    while unix_now() <= second() {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let saved = unix_now();
    ok(&ca.vouch(&["crl"]));
    assert!(second() > saved, "a CRL written in the second an agent saved its copy: {} <= {saved}", second());
    let mut last = second();
    for _ in 0..3 {
        ok(&ca.vouch(&["crl"]));
        let now = second();
        assert!(now > last, "a new CRL in the same second as the last: {now} <= {last}");
        last = now;
    }
}

/// A revoked certificate leaves the CRL once it has been expired for a whole CRL period
/// (RFC 5280 5.1.2.6); until then it stays, and a revocation an older vouch recorded without
/// the certificate's notAfter stays for ever.
#[test]
fn a_revocation_leaves_the_crl_a_crl_period_after_its_certificate_expired() {
    let ca = Ca::new("p256");
    let csr = ca.vouched_csr("old.example.test", "x", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join("old.pem"))]));
    ok(&ca.vouch(&["revoke", "old.example.test"]));
    // As an older vouch wrote it: no notAfter.
    let legacy = "0badc0de0badc0de0badc0de0badc0de";
    let mut revs = std::fs::OpenOptions::new().append(true).open(ca.ca_file("revocations.txt")).unwrap();
    writeln!(revs, "{legacy} 2026-01-01T00:00:00Z keyCompromise legacy.example.test").unwrap();
    let pem = std::fs::read(ca.work.join("old.pem")).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let not_after = cert.validity().not_after.to_datetime();
    let old: String = cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
    let listed = |at: time::OffsetDateTime| -> Vec<String> {
        let out = ca.work.join("crl.pem");
        ok(&ca.vouch(&["--now", &vouch::encoding::time::format_rfc3339(at), "crl", "--out", s(&out)]));
        let crl = std::fs::read(&out).unwrap();
        let (_, der) = vouch::encoding::pem::find(&crl, &["X509 CRL"]).unwrap();
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        let mut serials: Vec<String> = crl
            .iter_revoked_certificates()
            .map(|r| r.raw_serial().iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        serials.sort();
        serials
    };
    let mut both = vec![old.clone(), legacy.to_string()];
    both.sort();
    assert_eq!(listed(time::OffsetDateTime::now_utc()), both, "revoked: listed");
    assert_eq!(listed(not_after + time::Duration::days(1)), both, "expired, but not a CRL period ago");
    assert_eq!(listed(not_after + time::Duration::days(31)), vec![legacy.to_string()], "expired long since: off");
}

/// The file store keeps no superseded certificate: a renewed node's old serial leaves the CRL
/// by its record's expiry, as before (only the shared store, whose writers need no CA key,
/// requires the certificate to say so), and nothing is warned.
#[test]
fn a_renewed_certificate_leaves_the_file_stores_crl_a_crl_period_after_it_expired() {
    let ca = Ca::new("p256");
    let csr = ca.vouched_csr("renewed.example.test", "x", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join("old.pem"))]));
    ok(&ca.vouch(&["renew", "renewed.example.test", "--out", s(&ca.work.join("new.pem"))]));
    let pem = std::fs::read(ca.work.join("old.pem")).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let not_after = cert.validity().not_after.to_datetime();
    let old: String = cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
    let listed = |at: time::OffsetDateTime| {
        let out = ca.work.join("crl.pem");
        let o = ca.vouch(&["--now", &vouch::encoding::time::format_rfc3339(at), "crl", "--out", s(&out)]);
        ok(&o);
        let crl = std::fs::read(&out).unwrap();
        let (_, der) = vouch::encoding::pem::find(&crl, &["X509 CRL"]).unwrap();
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        let listed = crl
            .iter_revoked_certificates()
            .any(|r| r.raw_serial().iter().map(|b| format!("{b:02x}")).collect::<String>() == old);
        (listed, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    assert!(listed(time::OffsetDateTime::now_utc()).0, "superseded: listed");
    let (still, said) = listed(not_after + time::Duration::days(31));
    assert!(!still, "expired long since, still on the CRL: {said}");
    assert!(!said.contains("crl-entry-kept"), "{said}");
}

/// Many concurrent `vouch sign` processes: distinct names all issue; one name issues once.
#[test]
fn concurrent_signers_never_duplicate() {
    let ca = Ca::new("p256");
    let same: Vec<PathBuf> = (0..8).map(|i| ca.vouched_csr("same.example.test", &format!("k{i}"), WEB, "1h")).collect();
    let distinct: Vec<PathBuf> =
        (0..12).map(|i| ca.vouched_csr(&format!("n{i}.example.test"), "k", WEB, "1h")).collect();
    let children: Vec<_> = same
        .iter()
        .chain(distinct.iter())
        .map(|csr| {
            Command::new(env!("CARGO_BIN_EXE_vouch"))
                .args(["sign", "--csr", s(csr)])
                .env("VOUCH_DIR", &ca.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = children.into_iter().map(|c| c.wait_with_output().unwrap().status.code().unwrap()).collect();
    assert_eq!(
        codes[..8].iter().filter(|&&c| c == 0).count(),
        1,
        "exactly one certificate for same.example.test: {codes:?}"
    );
    assert!(codes[8..].iter().all(|&c| c == 0), "{codes:?}");
    let inv = std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap();
    assert_eq!(inv.lines().count(), 13);
    let mut serials: Vec<&str> = inv.lines().map(|l| l.split(' ').next().unwrap()).collect();
    serials.sort();
    serials.dedup();
    assert_eq!(serials.len(), 13, "no serial twice");
}

/// Puppet runs `external_nodes = PATH` with only the certname: a symlink named
/// vouch-enc behaves as `vouch enc`, and a node without a valid certificate gets
/// a non-zero exit (no catalog), never an empty classification.
#[test]
fn vouch_enc_symlink_is_the_external_node_classifier() {
    let ca = Ca::new("p256");
    let csr = ca.vouched_csr("web01.example.test", "a", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let link = ca.work.join("vouch-enc");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vouch"), &link).unwrap();
    let out = Command::new(&link).arg("web01.example.test").env("VOUCH_DIR", &ca.dir).output().unwrap();
    let enc = ok(&out);
    assert!(enc.contains("profile::web") && enc.contains("\"environment\": \"production\""), "{enc}");
    let out = Command::new(&link).arg("unknown.example.test").env("VOUCH_DIR", &ca.dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// With issuance.cap_at_conductor, a node certificate ends no later than the
/// conductor certificate that vouched for it.
#[test]
fn validity_capped_at_the_conductor_when_the_policy_says_so() {
    let ca = Ca::new("p256");
    ca.set_policy("cap_at_conductor = false", "cap_at_conductor = true");
    let csr = ca.vouched_csr("web01.example.test", "a", WEB, "1h");
    let pem = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let cert = ca.work.join("capped.pem");
    std::fs::write(&cert, &split_pem(&pem)[0]).unwrap();
    let end = |p: &Path| openssl(&["x509", "-in", s(p), "-noout", "-enddate"]).1;
    assert_eq!(end(&cert), end(&ca.work.join("cloud1.pem")), "capped at the conductor's notAfter (1 year)");
    // Without the cap: five years.
    ca.set_policy("cap_at_conductor = true", "cap_at_conductor = false");
    let csr = ca.vouched_csr("web02.example.test", "b", WEB, "1h");
    let pem = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    std::fs::write(&cert, &split_pem(&pem)[0]).unwrap();
    assert_ne!(end(&cert), end(&ca.work.join("cloud1.pem")));
}

/// Every refused fixture is refused by the CA path too (`vouch sign`), with its
/// reasons, and nothing is issued; the granted ones are issued.
#[test]
fn every_fixture_through_vouch_sign_and_nothing_refused_is_issued() {
    use common::{fixture, fixture_now, CASES};
    let ca = Ca::new("p256");
    // The CA's policy: the fixture policy, with absolute paths to the fixture PKI.
    let pki = fixture("pki");
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap().replace("\"pki/", &format!("\"{}/", s(&pki)));
    std::fs::write(ca.dir.join("policy.toml"), text).unwrap();
    let now = fixture_now();
    let mut issued = 0;
    for (file, certname, want) in CASES {
        let path = fixture(&format!("csr/{file}"));
        let before = std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap_or_default();
        let out = ca.vouch(&["--now", &now, "sign", "--csr", s(&path), "--certname", certname]);
        let err = String::from_utf8_lossy(&out.stderr);
        if *want == ["csr-missing"] {
            // No request in the file at all: an input error for the operator's command (the
            // hook, which Puppet runs, refuses it: tests/cli.rs).
            assert_eq!(out.status.code(), Some(2), "{file}: {err}");
            assert!(err.contains("no certificate request found"), "{file}: {err}");
            assert!(out.stdout.is_empty(), "{file}");
        } else if want.is_empty() {
            assert_eq!(out.status.code(), Some(0), "{file}: {err}");
            issued += 1;
            // The next granted fixture reuses the name: clean it.
            ok(&ca.vouch(&["--now", &now, "clean", certname]));
        } else {
            assert_eq!(out.status.code(), Some(1), "{file}: {err}");
            for w in *want {
                assert!(err.contains(&format!("[{w}]")), "{file}: want [{w}]: {err}");
            }
            assert!(out.stdout.is_empty(), "{file}: a refused request printed a certificate");
            let after = std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap_or_default();
            assert_eq!(before, after, "{file}: a refused request changed the inventory");
        }
    }
    let expected = CASES.iter().filter(|(_, _, w)| w.is_empty()).count();
    assert_eq!(issued, expected);
}

/// Extension requests the policy allows (here pp_uuid) are copied into the
/// certificate, and kept on renewal; nothing else the node asked for is.
#[test]
fn allowed_extension_requests_are_copied() {
    let ca = Ca::new("p256");
    ca.set_policy("allow = []", "allow = [\"pp_uuid\"]");
    let class = ca.work.join("c.yaml");
    std::fs::write(&class, WEB).unwrap();
    let attrs = ca.work.join("a.yaml");
    ok(&ca.vouch(&[
        "conductor",
        "sign",
        "--cert",
        s(&ca.work.join("cloud1.pem")),
        "--key",
        s(&ca.work.join("cloud1.key")),
        "--classification",
        s(&class),
        "--expires-in",
        "1h",
        "--out",
        s(&attrs),
    ]));
    let yaml = std::fs::read_to_string(&attrs).unwrap();
    let yaml = yaml
        .replace("extension_requests:\n", "extension_requests:\n  'pp_uuid': 'ED803750-E3C7-44F5-BB08-41A04433FE2E'\n");
    std::fs::write(&attrs, yaml).unwrap();
    let csr = ca.csr_from("web01.example.test", "u", &attrs);
    let pem = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let cert = ca.work.join("u.pem");
    std::fs::write(&cert, &split_pem(&pem)[0]).unwrap();
    let (_, text) = openssl(&["x509", "-in", s(&cert), "-noout", "-text"]);
    assert!(
        text.contains("1.3.6.1.4.1.34380.1.1.1") && text.contains("ED803750-E3C7-44F5-BB08-41A04433FE2E"),
        "{text}"
    );
    let renewed = ok(&ca.vouch(&["renew", "web01.example.test"]));
    std::fs::write(&cert, &split_pem(&renewed)[0]).unwrap();
    let (_, text) = openssl(&["x509", "-in", s(&cert), "-noout", "-text"]);
    assert!(text.contains("ED803750-E3C7-44F5-BB08-41A04433FE2E"), "renewal keeps it: {text}");
}

/// Renewal checks the conductor that vouched for the certificate (recorded in the store at
/// issuance) against the current policy: its scope, the trusted roots, the conductor CRLs.
/// A record from before vouch kept the conductor certificate cannot be renewed.
#[test]
fn renewal_rechecks_the_vouching_conductor() {
    let ca = Ca::new("p256");
    let name = "a.example.test";
    let csr = ca.vouched_csr(name, "x", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let policy = ca.dir.join("policy.toml");
    let original = std::fs::read_to_string(&policy).unwrap();
    let signed = || std::fs::read_to_string(ca.ca_file(&format!("signed/{name}.pem"))).unwrap();
    let issued = signed();
    let refused = |code: &str| {
        let out = ca.vouch(&["renew", name]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "renewal must be refused with {code}: {stderr}");
        assert!(stderr.contains(&format!("[{code}]")) && stderr.contains("hint:"), "{code}: {stderr}");
        assert_eq!(signed(), issued, "nothing issued, nothing revoked");
        std::fs::write(&policy, &original).unwrap();
    };
    let conductor_pem = std::fs::read(ca.work.join("cloud1.pem")).unwrap();
    let (_, conductor_der) = vouch::encoding::pem::find(&conductor_pem, &["CERTIFICATE"]).unwrap();
    let (_, conductor) = x509_parser::parse_x509_certificate(&conductor_der).unwrap();
    let subject = conductor.subject().to_string();

    // Scopes now exist and none matches this conductor.
    std::fs::write(&policy, format!("{original}\n[[conductor]]\nname = \"other\"\nsubject = \"CN=someone-else\"\n"))
        .unwrap();
    refused("conductor-unscoped");
    // Its scope no longer covers this certname.
    std::fs::write(
        &policy,
        format!(
            "{original}\n[[conductor]]\nname = \"web\"\nsubject = \"{subject}\"\ncertnames = [\"web*.example.test\"]\n"
        ),
    )
    .unwrap();
    refused("certname-out-of-scope");
    // Its root is no longer trusted.
    std::fs::copy(common::fixture("pki/rogue_root_crt.pem"), ca.dir.join("other_root.pem")).unwrap();
    ca.set_policy("trusted_roots = [\"ca/root_crt.pem\"]", "trusted_roots = [\"other_root.pem\"]");
    refused("conductor-untrusted");
    // It was revoked: a CRL from its issuer (the root) lists it.
    let root_pem = std::fs::read_to_string(ca.ca_file("root_crt.pem")).unwrap();
    let root_key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(ca.ca_file("root_key.pem")).unwrap()).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&root_pem, &root_key).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let crl = rcgen::CertificateRevocationListParams {
        this_update: now,
        next_update: now + time::Duration::days(7),
        crl_number: rcgen::SerialNumber::from_slice(&[1]),
        issuing_distribution_point: None,
        revoked_certs: vec![rcgen::RevokedCertParams {
            serial_number: rcgen::SerialNumber::from_slice(conductor.raw_serial()),
            revocation_time: now,
            reason_code: Some(rcgen::RevocationReason::KeyCompromise),
            invalidity_date: None,
        }],
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&issuer)
    .unwrap();
    std::fs::write(ca.dir.join("conductors_crl.pem"), crl.pem().unwrap()).unwrap();
    ca.set_policy("crls = []", "crls = [\"conductors_crl.pem\"]");
    refused("conductor-revoked");

    // A record written before vouch kept the conductor certificate: refused, not waved through.
    let list: serde_json::Value = serde_json::from_str(&ok(&ca.vouch(&["list", "--all", "--format", "json"]))).unwrap();
    let serial =
        list.as_array().unwrap().iter().find(|e| e["name"] == name).unwrap()["serial"].as_str().unwrap().to_string();
    let record_path = ca.ca_file(&format!("serials/{}/{serial}.json", &serial[..2]));
    let record_text = std::fs::read_to_string(&record_path).unwrap();
    let mut record: serde_json::Value = serde_json::from_str(&record_text).unwrap();
    assert!(record["conductor_cert"].is_string(), "issuance records the conductor: {record}");
    record.as_object_mut().unwrap().remove("conductor_cert");
    std::fs::write(&record_path, record.to_string()).unwrap();
    refused("conductor-not-recorded");
    std::fs::write(&record_path, record_text).unwrap();

    // Under a policy that still accepts it (a matching scope included), renewal works, twice:
    // the renewed record keeps the original conductor.
    std::fs::write(
        &policy,
        format!(
            "{original}\n[[conductor]]\nname = \"all\"\nsubject = \"{subject}\"\ncertnames = [\"*.example.test\"]\n"
        ),
    )
    .unwrap();
    ok(&ca.vouch(&["renew", name]));
    ok(&ca.vouch(&["renew", name]));
    assert_ne!(signed(), issued);
    // The conductor's own expiry does not stop renewal (a node's identity does not lapse
    // with its launcher's): 400 days on, the 365-day conductor has expired.
    let later = vouch::encoding::time::format_rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(400));
    ok(&ca.vouch(&["--now", &later, "renew", name]));
    let audit = std::fs::read_to_string(ca.dir.join("audit.log")).unwrap();
    assert_eq!(audit.matches("\"renewal-refused\"").count(), 5, "{audit}");
}

/// `text` as Puppet's ENC terminus reads it (`Puppet::Util::Yaml.safe_load(output, [Symbol])`,
/// puppet/indirector/node/exec.rb), written back as JSON.
fn as_puppet_reads_it(text: &str) -> serde_json::Value {
    common::require("ruby", "ruby");
    let mut child = Command::new("ruby")
        .args(["-e", "require 'puppet'; require 'json'; print JSON.generate(Puppet::Util::Yaml.safe_load($stdin.read, [Symbol]))"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let json = ok(&out);
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Values that JSON written naively hands to Puppet's YAML 1.1 reader as something else:
/// `1e300` is a string there, NEL inside a quoted scalar folds into a space.
const TRICKY: &str = "classes: [ntp]\nparameters:\n  big: 1.0e+300\n  small: 1.0e-7\n  flag: 'off'\n  \
                      sym: ':sym'\n  nel: \"a\\u0085b\\u2028c\"\n  huge: 12345678901234567890\n  nested: {k: [1, 2.5, ~]}\n";
/// A classification with no JSON form: a null key (the example).
const NULL_KEY: &str = "classes: [ntp]\nparameters:\n  pad: {~: x}\n  flag: 'off'\n";

/// A Puppet Server CA directory (ca_crt.pem, ca_crl.pem, signed/) whose signed
/// certificates carry the given classifications in the mirror extension, as Puppet Server
/// copies them from CSRs an older vouch approved.
fn puppet_cadir(dir: &Path, nodes: &[(&str, &str)]) {
    use base64::Engine;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "Puppet CA: test");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    std::fs::create_dir_all(dir.join("signed")).unwrap();
    std::fs::write(dir.join("ca_crt.pem"), ca_cert.pem()).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let crl = rcgen::CertificateRevocationListParams {
        this_update: now - time::Duration::hours(1),
        next_update: now + time::Duration::days(30),
        crl_number: rcgen::SerialNumber::from_slice(&[1]),
        issuing_distribution_point: None,
        revoked_certs: vec![],
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&issuer)
    .unwrap();
    std::fs::write(dir.join("ca_crl.pem"), crl.pem().unwrap()).unwrap();
    for (name, classification) in nodes {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name.push(rcgen::DnType::CommonName, *name);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        p.not_before = now - time::Duration::days(1);
        p.not_after = now + time::Duration::days(30);
        let b64 = base64::engine::general_purpose::STANDARD.encode(classification);
        p.custom_extensions = vec![rcgen::CustomExtension::from_oid_content(
            vouch::policy::DEFAULT_MIRROR_OID,
            vouch::encoding::der::utf8_string(&b64),
        )];
        let cert = p.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join("signed").join(format!("{name}.pem")), cert.pem()).unwrap();
    }
}

/// Issue 13, point 3: the ENC prints exactly what the decision judged, as JSON that
/// Puppet's own reader takes back unchanged, in every mode (store, --puppet-cadir,
/// --cert); a classification with no such form is an error there, never the signed YAML.
#[test]
fn the_enc_prints_exactly_what_was_judged_in_every_mode() {
    // What was judged, plus the parameter that says where it came from (issue 15: the
    // certificate, or an administrator's override).
    let want = {
        let c = vouch::vouching::classification::Classification::from_yaml(TRICKY, 65536).unwrap();
        let mut v = vouch::vouching::classification::to_json(&c.value, "c").unwrap();
        v["parameters"]["vouch_source"] = "certificate".into();
        v
    };
    // The CA's store.
    let ca = Ca::new("p256");
    let csr = ca.vouched_csr("web01.example.test", "tricky", TRICKY, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join("web01.pem"))]));
    let text = ok(&ca.vouch(&["enc", "web01.example.test"]));
    assert_eq!(as_puppet_reads_it(&text), want, "store mode: {text}");
    // Hook mode (Puppet Server's cadir) and a certificate file.
    let cadir = ca.work.join("puppet-ca");
    puppet_cadir(&cadir, &[("web01.example.test", TRICKY), ("web02.example.test", NULL_KEY)]);
    let text = ok(&ca.vouch(&["enc", "--puppet-cadir", s(&cadir), "web01.example.test"]));
    assert_eq!(as_puppet_reads_it(&text), want, "--puppet-cadir: {text}");
    // --cert verifies the file against the CA that signed it (Puppet Server's here).
    let file = cadir.join("signed/web01.example.test.pem");
    let (bundle, crl) = (cadir.join("ca_crt.pem"), cadir.join("ca_crl.pem"));
    let trust = ["--cacert", s(&bundle), "--crl", s(&crl)];
    let text = ok(&ca.vouch(&[&["enc", "--cert", s(&file)][..], &trust].concat()));
    assert_eq!(as_puppet_reads_it(&text), want, "--cert: {text}");
    // No JSON form: refused, and nothing printed for Puppet to misread.
    let bad = cadir.join("signed/web02.example.test.pem");
    for args in [
        vec!["enc", "--puppet-cadir", s(&cadir), "web02.example.test"],
        [&["enc", "--cert", s(&bad)][..], &trust].concat(),
    ] {
        let out = ca.vouch(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(err.contains("not a string"), "{args:?}: {err}");
    }
    // And at decision time, in CA mode (the hook and every mode share the decision; the
    // fixture classification-key-not-json goes through each in tests/cli.rs and here).
    let csr = ca.work.join("web02.csr");
    let attrs = ca.work.join("web02.attrs.yaml");
    let conductor =
        vouch::encoding::pem::find(&std::fs::read(ca.work.join("cloud1.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1;
    let key = vouch::issuance::keys::load_pem(&std::fs::read_to_string(ca.work.join("cloud1.key")).unwrap()).unwrap();
    let raw = vouch::vouching::classification::Classification {
        yaml: NULL_KEY.into(),
        value: serde_yaml_ng::from_str(NULL_KEY).unwrap(),
    };
    let expiry = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let v = vouch::vouching::attrs::vouch(
        &conductor,
        &key,
        &raw,
        expiry,
        vouch::vouching::attrs::CertEncoding::Base64Der,
        None,
    )
    .unwrap();
    let a = vouch::vouching::attrs::CsrAttributes::from_vouched(&v, Some(vouch::policy::DEFAULT_MIRROR_OID));
    std::fs::write(&attrs, vouch::vouching::attrs::render(&a, vouch::vouching::attrs::Format::PuppetYaml).unwrap())
        .unwrap();
    ok(&ca.vouch(&[
        "csr",
        "--certname",
        "web02.example.test",
        "--attributes",
        s(&attrs),
        "--key-out",
        s(&ca.work.join("web02.key")),
        "--csr-out",
        s(&csr),
    ]));
    let out = ca.vouch(&["sign", "--csr", s(&csr)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[classification-unrepresentable]") && err.contains("not a string"), "{err}");
}

/// `vouch revoke --serial`: a certificate whose certname's file is lost (or whose record is
/// lost too, known only by its inventory line) is still revoked and lands on the CRL, which
/// openssl then refuses it by; the serial is taken as openssl prints it (upper case, no
/// leading zero octet, colons) or as vouch lists it; an unknown or malformed serial is an
/// error that writes nothing; a second revocation says so; the certname and --serial are
/// exclusive.
#[test]
fn revoke_by_serial_reaches_a_certificate_whose_file_is_lost() {
    let ca = Ca::new("p256");
    let mut serials = Vec::new();
    for n in ["a", "b", "c"] {
        let name = format!("{n}.example.test");
        let csr = ca.vouched_csr(&name, "x", WEB, "1h");
        ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join(format!("{n}.pem")))]));
        let only = ca.work.join(format!("{n}-only.pem"));
        std::fs::write(
            &only,
            split_pem(&std::fs::read_to_string(ca.work.join(format!("{n}.pem"))).unwrap())[0].as_bytes(),
        )
        .unwrap();
        // openssl's form: "serial=43A4…", upper case, without a leading zero octet.
        let (good, out) = openssl(&["x509", "-in", s(&only), "-noout", "-serial"]);
        assert!(good, "{out}");
        serials.push((only, out.trim().to_string()));
    }
    // Checkpointed (a command that takes the lock), then a's file is lost and b's record too.
    ok(&ca.vouch(&["crl"]));
    std::fs::remove_file(ca.ca_file("signed/a.example.test.pem")).unwrap();
    let b_hex = serials[1].1.trim_start_matches("serial=").to_ascii_lowercase();
    std::fs::remove_file(ca.ca_file("signed/b.example.test.pem")).unwrap();
    for shard in std::fs::read_dir(ca.ca_file("serials")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.file_stem().unwrap().to_str().unwrap().trim_start_matches("00") == b_hex {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
    // By name, a's certificate cannot be reached any more.
    assert_eq!(ca.vouch(&["revoke", "a.example.test"]).status.code(), Some(2));
    let out = ok(&ca.vouch(&["revoke", "--serial", &serials[0].1, "--reason", "key-compromise"]));
    assert!(out.contains("revoked serial") && out.contains("a.example.test"), "{out}");
    // b in the colon form `openssl x509 -text` shows.
    let colons: Vec<String> = b_hex.as_bytes().chunks(2).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    let out = ok(&ca.vouch(&["revoke", "--serial", &colons.join(":")]));
    assert!(out.contains("b.example.test"), "{out}");
    let again = ok(&ca.vouch(&["revoke", "--serial", &serials[0].1]));
    assert!(again.contains("already revoked"), "{again}");
    // Unknown, malformed, both forms at once: errors, nothing written.
    let crl_before = std::fs::read(ca.ca_file("ca_crl.pem")).unwrap();
    for (args, code, says) in [
        (vec!["revoke", "--serial", "0123456789abcdef"], Some(2), "no record of serial"),
        (vec!["revoke", "--serial", "xyz"], Some(2), "is not a certificate serial"),
        (vec!["revoke", "--serial", &"ab".repeat(21)], Some(2), "is not a certificate serial"),
        (vec!["revoke", "c.example.test", "--serial", &serials[2].1], Some(2), "cannot be used with"),
        (vec!["revoke"], Some(2), "required"),
    ] {
        let o = ca.vouch(&args);
        assert_eq!(o.status.code(), code, "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(std::fs::read(ca.ca_file("ca_crl.pem")).unwrap(), crl_before);
    // openssl refuses a and b by the CRL, accepts c.
    let crl = ca.work.join("crl.pem");
    ok(&ca.vouch(&["crl", "--out", s(&crl)]));
    let chain = ca.chain();
    for (i, (only, _)) in serials.iter().enumerate() {
        let (good, text) = openssl(&["verify", "-crl_check", "-CAfile", s(&chain), "-CRLfile", s(&crl), s(only)]);
        assert_eq!(good, i == 2, "{i}: {text}");
        if i < 2 {
            assert!(text.contains("revoked"), "{text}");
        }
    }
}

/// A superseded certificate is on the CRL as soon as it is superseded, even when the
/// revocation's audit line cannot be written (the CRL used to be skipped then, until the
/// next maintenance): by `renew`, and by a supersede through `sign`'s group commit. The
/// CRL file is read straight after the failing command: no other vouch command runs.
#[test]
fn a_superseded_certificate_is_on_the_crl_when_its_audit_line_fails() {
    let ca = Ca::new("p256");
    let failing = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
            .args(args)
            .env("VOUCH_DIR", &ca.dir)
            .env_remove("VOUCH_POLICY")
            .env("VOUCH_TEST_FAIL_AT", "audit:revocation")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(stderr.contains("injected failure"), "the revocation's audit line did not fail: {stderr}");
        out
    };
    let serial_of = |pem: &Path| {
        let (_, out) = openssl(&["x509", "-in", s(pem), "-noout", "-serial"]);
        out.trim().trim_start_matches("serial=").to_uppercase()
    };
    let crl_text = || openssl(&["crl", "-in", s(&ca.ca_file("ca_crl.pem")), "-noout", "-text"]).1.to_uppercase();

    // renew: the old certificate is superseded; the command reports the audit failure.
    let csr = ca.vouched_csr("a.example.test", "x", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join("a.pem"))]));
    let old = serial_of(&ca.work.join("a.pem"));
    assert!(!crl_text().contains(&old));
    failing(&["renew", "a.example.test", "--out", s(&ca.work.join("a2.pem"))]);
    let text = crl_text();
    assert!(text.contains(&old) && text.contains("SUPERSEDED"), "{old} is not on the CRL:\n{text}");

    // sign with on_existing = supersede: the group commit's path.
    ca.set_policy("on_existing = \"refuse\"", "on_existing = \"supersede\"");
    let first = ca.vouched_csr("b.example.test", "1", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&first), "--out", s(&ca.work.join("b.pem"))]));
    let old = serial_of(&ca.work.join("b.pem"));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = ca.vouched_csr("b.example.test", "2", DB, "1h");
    failing(&["sign", "--csr", s(&second)]);
    let text = crl_text();
    assert!(text.contains(&old), "{old} is not on the CRL:\n{text}");
}

/// Review (renew exit 3): `vouch renew` exits 3 and says "the CRL could not be written" only
/// when the CRL could not be written. A revocation whose audit line fails but whose CRL is
/// written (the old serial IS on it) is no such case: the audit failure is reported (a
/// warning, as before), the exit is not 3 and the message does not claim the CRL is missing.
#[test]
fn review_renew_whose_audit_line_fails_but_crl_is_written_does_not_exit_3() {
    let ca = Ca::new("p256");
    let serial_of = |pem: &Path| {
        let (_, out) = openssl(&["x509", "-in", s(pem), "-noout", "-serial"]);
        out.trim().trim_start_matches("serial=").to_uppercase()
    };
    let csr = ca.vouched_csr("a.example.test", "x", WEB, "1h");
    ok(&ca.vouch(&["sign", "--csr", s(&csr), "--out", s(&ca.work.join("a.pem"))]));
    let old = serial_of(&ca.work.join("a.pem"));
    let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .args(["renew", "a.example.test", "--out", s(&ca.work.join("a2.pem"))])
        .env("VOUCH_DIR", &ca.dir)
        .env_remove("VOUCH_POLICY")
        .env("VOUCH_TEST_FAIL_AT", "audit:revocation")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains("injected failure"), "the revocation's audit line did not fail: {stderr}");
    let text = openssl(&["crl", "-in", s(&ca.ca_file("ca_crl.pem")), "-noout", "-text"]).1.to_uppercase();
    assert!(text.contains(&old), "{old} is not on the CRL:\n{text}");
    assert_ne!(out.status.code(), Some(3), "the CRL was written, yet renew exited 3: {stderr}");
    assert!(!stderr.contains("the CRL could not be written"), "the CRL was written: {stderr}");
    assert!(std::fs::read_to_string(ca.work.join("a2.pem")).unwrap().contains("BEGIN CERTIFICATE"));
}
