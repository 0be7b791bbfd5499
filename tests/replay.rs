//! One-time use and certname binding, through the real binary: the hook and the
//! CA share the journal; replays under another certname, under the same
//! certname after the first certificate, and racing replays are refused.

mod common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Env {
    _t: tempfile::TempDir,
    dir: PathBuf,
    w: PathBuf,
}

impl Env {
    fn new() -> Env {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vouch");
        let w = t.path().to_path_buf();
        let e = Env { _t: t, dir, w };
        ok(&e.vouch(&["ca", "init"], None));
        ok(&e.vouch(
            &["conductor", "new", "c", "--cert-out", s(&e.w.join("c.pem")), "--key-out", s(&e.w.join("c.key"))],
            None,
        ));
        std::fs::write(e.w.join("class.yaml"), "classes: [ntp]\n").unwrap();
        e
    }
    fn vouch(&self, args: &[&str], stdin: Option<&[u8]>) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.args(args).env("VOUCH_DIR", &self.dir).env_remove("VOUCH_POLICY");
        c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(b) = stdin {
            let _ = child.stdin.take().unwrap().write_all(b);
        }
        child.wait_with_output().unwrap()
    }
    /// Attributes (v2 when `certname` is given, else v1).
    fn attrs(&self, tag: &str, certname: Option<&str>) -> PathBuf {
        let out = self.w.join(format!("{tag}.yaml"));
        let (cert, key, class) = (self.w.join("c.pem"), self.w.join("c.key"), self.w.join("class.yaml"));
        let mut args = vec!["conductor", "sign", "--cert", s(&cert), "--key", s(&key)];
        args.extend(["--classification", s(&class), "--expires-in", "1h", "--out", s(&out)]);
        if let Some(c) = certname {
            args.extend(["--certname", c]);
        }
        ok(&self.vouch(&args, None));
        out
    }
    /// A CSR with a fresh key for `name` carrying `attrs`.
    fn csr(&self, name: &str, attrs: &Path, tag: &str) -> Vec<u8> {
        let csr = self.w.join(format!("{tag}.csr"));
        let key = self.w.join(format!("{tag}.key"));
        ok(&self.vouch(
            &["csr", "--certname", name, "--attributes", s(attrs), "--key-out", s(&key), "--csr-out", s(&csr)],
            None,
        ));
        std::fs::read(csr).unwrap()
    }
    fn hook(&self, name: &str, csr: &[u8]) -> (i32, String) {
        let out = self.vouch(&["autosign", name], Some(csr));
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn version_2_binds_the_certname() {
    let e = Env::new();
    let a = e.attrs("a", Some("web01.example.test"));
    let text = std::fs::read_to_string(&a).unwrap();
    assert!(text.contains("'1.3.6.1.4.1.34380.2.2': '2'") && text.contains("1.3.6.1.4.1.34380.2.7"), "{text}");
    // Replayed under another certname: refused before one-time use is even consulted.
    let (code, err) = e.hook("db01.example.test", &e.csr("db01.example.test", &a, "stolen"));
    assert_eq!(code, 1);
    assert!(err.contains("[certname-not-vouched]"), "{err}");
    // The rightful node still gets through.
    let (code, err) = e.hook("web01.example.test", &e.csr("web01.example.test", &a, "mine"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn attributes_are_good_once_in_hook_and_ca() {
    let e = Env::new();
    // Version 1 (no certname): a replay under another name is caught by the journal.
    let v1 = e.attrs("v1", None);
    let first = e.csr("web01.example.test", &v1, "v1-first");
    assert_eq!(e.hook("web01.example.test", &first).0, 0);
    let (code, err) = e.hook("db01.example.test", &e.csr("db01.example.test", &v1, "v1-replay"));
    assert_eq!(code, 1);
    assert!(err.contains("[attributes-replayed]") && err.contains("web01.example.test"), "{err}");
    // The hook's approval is final (Puppet Server signs on it): even the same CSR again is refused.
    assert_eq!(e.hook("web01.example.test", &first).0, 1);
    // Version 2: after the first certificate, the same attributes with a new key under the
    // same certname are refused, by the CA as by the hook.
    let v2 = e.attrs("v2", Some("web02.example.test"));
    let csr1 = e.w.join("v2-1.csr");
    std::fs::write(&csr1, e.csr("web02.example.test", &v2, "v2-1")).unwrap();
    ok(&e.vouch(&["sign", "--csr", s(&csr1)], None));
    let csr2 = e.w.join("v2-2.csr");
    std::fs::write(&csr2, e.csr("web02.example.test", &v2, "v2-2")).unwrap();
    ok(&e.vouch(&["clean", "web02.example.test"], None));
    let out = e.vouch(&["sign", "--csr", s(&csr2)], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[attributes-replayed]"));
    let (code, err) = e.hook("web02.example.test", &std::fs::read(&csr2).unwrap());
    assert_eq!(code, 1, "{err}");
    // Fresh attributes work.
    let v2b = e.attrs("v2b", Some("web02.example.test"));
    let csr3 = e.w.join("v2-3.csr");
    std::fs::write(&csr3, e.csr("web02.example.test", &v2b, "v2-3")).unwrap();
    ok(&e.vouch(&["sign", "--csr", s(&csr3)], None));
    // The journal entries live under the hour of the attributes' expiry.
    let buckets: Vec<_> = std::fs::read_dir(e.dir.join("replay")).unwrap().collect();
    assert!(!buckets.is_empty());
}

#[test]
fn racing_replays_exactly_one_wins() {
    let e = Env::new();
    let a = e.attrs("race", None);
    let csrs: Vec<Vec<u8>> = (0..10).map(|i| e.csr(&format!("n{i}.example.test"), &a, &format!("r{i}"))).collect();
    let children: Vec<_> = csrs
        .iter()
        .enumerate()
        .map(|(i, csr)| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"))
                .args(["autosign", &format!("n{i}.example.test")])
                .env("VOUCH_DIR", &e.dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            c.stdin.take().unwrap().write_all(csr).unwrap();
            c
        })
        .collect();
    let wins = children
        .into_iter()
        .filter(|_| true)
        .map(|c| c.wait_with_output().unwrap().status.success())
        .filter(|&w| w)
        .count();
    assert_eq!(wins, 1, "exactly one of ten racing hooks approves the same attributes");
}

/// A revoked (e.g. compromised) key cannot get a new certificate by presenting
/// its still-unexpired attributes again.
#[test]
fn a_revoked_key_cannot_reuse_its_attributes() {
    let e = Env::new();
    let a = e.attrs("k", Some("web09.example.test"));
    let csr = e.w.join("k.csr");
    std::fs::write(&csr, e.csr("web09.example.test", &a, "k")).unwrap();
    ok(&e.vouch(&["sign", "--csr", s(&csr)], None));
    ok(&e.vouch(&["revoke", "web09.example.test", "--reason", "key-compromise"], None));
    let out = e.vouch(&["sign", "--csr", s(&csr)], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[attributes-replayed]"));
}

/// Two PEM blocks, or a BEGIN line not at column 0: another reader (Puppet Server's
/// BouncyCastle, OpenSSL) could pick a different request than vouch checked. Refused.
#[test]
fn smuggled_second_request_is_refused() {
    let e = Env::new();
    let a = e.attrs("sm", Some("web01.example.test"));
    let honest = e.csr("web01.example.test", &a, "honest");
    let other = e.csr("web01.example.test", &a, "other");
    let mut body = b"x".to_vec();
    body.extend(&honest);
    body.extend(&other);
    let (code, err) = e.hook("web01.example.test", &body);
    assert_eq!(code, 1);
    assert!(err.contains("[csr-malformed]") && err.contains("exactly one"), "{err}");
    let mut shifted = b"x".to_vec();
    shifted.extend(&honest);
    let (code, err) = e.hook("web01.example.test", &shifted);
    assert_eq!(code, 1, "{err}");
    // vouch-autosign --help must never exit 0 ("sign").
    let link = e.w.join("vouch-autosign");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vouch"), &link).unwrap();
    let out = Command::new(&link).arg("--help").env("VOUCH_DIR", &e.dir).stdin(Stdio::null()).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
}

/// Puppet Server keeps a refused CSR and serves it to anyone (`GET certificate_request`):
/// good attributes in a CSR refused for another reason become its key's, so a copy made
/// with another key is refused, while the node itself, same key, is approved once mended.
#[test]
fn attributes_of_a_refused_request_belong_to_its_key() {
    let e = Env::new();
    let name = "web01.example.test";
    let a = e.attrs("held", Some(name));
    let parsed = vouch::vouching::attrs::parse_file(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let build = |attrs: &vouch::vouching::attrs::CsrAttributes, key: &rcgen::KeyPair| {
        let spec = attrs.csr_spec(name).unwrap();
        vouch::encoding::pem::encode("CERTIFICATE REQUEST", &vouch::encoding::csr::build(&spec, key).unwrap())
            .into_bytes()
    };
    let mut with_role = parsed.clone();
    with_role.extension_requests.insert("1.3.6.1.4.1.34380.1.1.13".into(), "webserver".into());
    let node = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let thief = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let (code, err) = e.hook(name, &build(&with_role, &node));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("puppet-extension-not-allowed"), "{err}");
    let (code, err) = e.hook(name, &build(&parsed, &thief));
    assert_eq!(code, 1, "the copy with another key was approved: {err}");
    assert!(err.contains("attributes-replayed"), "{err}");
    let (code, err) = e.hook(name, &build(&parsed, &node));
    assert_eq!(code, 0, "{err}");
    // Approved once: the hook's approval is final, even for the same key.
    let (code, err) = e.hook(name, &build(&parsed, &node));
    assert_eq!(code, 1, "{err}");
}

/// Every file under `dir` with its contents (to prove a command wrote nothing there).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.push((p.clone(), Vec::new()));
                todo.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Issue 13, point 15: `vouch check` reads the journal (and writes nothing to it), and
/// `vouch sign` refuses attributes a hook already approved: Puppet Server signed on that
/// approval, so a CA sharing the journal would make a second certificate for them.
#[test]
fn check_reads_the_journal_and_sign_refuses_what_a_hook_approved() {
    let e = Env::new();
    let a = e.attrs("a", Some(CERTNAME));
    let csr = e.csr(CERTNAME, &a, "node");
    let file = e.w.join("node.csr");
    let check = |e: &Env| {
        let out = e.vouch(&["check", "--csr", s(&file)], None);
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, text) = check(&e);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("granted"), "{text}");
    assert!(!e.dir.join("replay").exists(), "check creates no journal");
    let (code, err) = e.hook(CERTNAME, &csr);
    assert_eq!(code, 0, "{err}");
    let before = snapshot(&e.dir.join("replay"));
    assert!(!before.is_empty());
    let (code, text) = check(&e);
    assert_eq!(code, 1, "after the hook's approval: {text}");
    assert!(text.contains("[attributes-replayed]") && text.contains(&format!("for {CERTNAME} at ")), "{text}");
    let out = e.vouch(&["check", "--csr", s(&file), "--format", "json"], None);
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(line.contains("attributes-replayed"), "{line}");
    assert_eq!(snapshot(&e.dir.join("replay")), before, "check wrote nothing to the journal");
    // The CA: the same CSR, the same key, the same name: still a second certificate.
    let out = e.vouch(&["sign", "--csr", s(&file)], None);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[attributes-replayed]") && err.contains(CERTNAME), "{err}");
    let listed = ok(&e.vouch(&["list", "--all"], None));
    assert!(!listed.contains("serial"), "nothing was issued: {listed}");
}

/// Re-signs version 2 attributes with another conductor, keeping the nonce (and every
/// other value but the conductor certificate and the certname): what a second conductor
/// that read the first one's user-data can do.
fn resign(attrs: &Path, cert: &Path, key: &Path, certname: &str, out: &Path) {
    use base64::Engine;
    let text = std::fs::read_to_string(attrs).unwrap();
    let mut parsed = vouch::vouching::attrs::parse_file(&text).unwrap();
    let der = vouch::encoding::pem::find(&std::fs::read(cert).unwrap(), &["CERTIFICATE"]).unwrap().1;
    let key = vouch::issuance::keys::load_pem(&std::fs::read_to_string(key).unwrap()).unwrap();
    let m = &mut parsed.custom_attributes;
    m.insert("1.3.6.1.4.1.34380.2.4".into(), base64::engine::general_purpose::STANDARD.encode(&der));
    m.insert("1.3.6.1.4.1.34380.2.6".into(), certname.into());
    let get = |oid: &str| m[oid].clone();
    let canonical = vouch::vouching::attrs::canonical_v2(
        &get("1.3.6.1.4.1.34380.2.2"),
        &get("1.3.6.1.4.1.34380.2.3"),
        &get("1.3.6.1.4.1.34380.2.4"),
        &get("1.3.6.1.4.1.34380.2.5"),
        &get("1.3.6.1.4.1.34380.2.6"),
        &get("1.3.6.1.4.1.34380.2.7"),
    );
    let sig = vouch::vouching::attrs::conductor_signature(&key, &canonical).unwrap();
    m.insert("1.3.6.1.4.1.34380.2.1".into(), sig);
    std::fs::write(out, vouch::vouching::attrs::render(&parsed, vouch::vouching::attrs::Format::PuppetYaml).unwrap())
        .unwrap();
}

/// Issue 13, point 4: a nonce is one conductor's. A second conductor that learns it and
/// signs it first (for another node) does not burn the first conductor's attributes;
/// each conductor's attributes are still good once.
#[test]
fn another_conductor_cannot_burn_a_nonce() {
    let e = Env::new();
    let (c2, k2) = (e.w.join("c2.pem"), e.w.join("c2.key"));
    ok(&e.vouch(&["conductor", "new", "c2", "--cert-out", s(&c2), "--key-out", s(&k2)], None));
    let a = e.attrs("a", Some(CERTNAME));
    let stolen = e.w.join("stolen.yaml");
    resign(&a, &c2, &k2, "db01.example.test", &stolen);
    let (code, err) = e.hook("db01.example.test", &e.csr("db01.example.test", &stolen, "thief"));
    assert_eq!(code, 0, "the second conductor's own attributes are good: {err}");
    let (code, err) = e.hook(CERTNAME, &e.csr(CERTNAME, &a, "owner"));
    assert_eq!(code, 0, "the first conductor's attributes are not burnt: {err}");
    // Each still once.
    let (code, err) = e.hook(CERTNAME, &e.csr(CERTNAME, &a, "owner-again"));
    assert_eq!(code, 1);
    assert!(err.contains("[attributes-replayed]"), "{err}");
    let (code, err) = e.hook("db01.example.test", &e.csr("db01.example.test", &stolen, "thief-again"));
    assert_eq!(code, 1);
    assert!(err.contains("[attributes-replayed]"), "{err}");
}

/// Issue 13, point 4: a journal entry written before the replay key was bound to the
/// conductor (keyed by the nonce alone) still stops the same attributes after an upgrade.
#[test]
fn a_nonce_used_before_the_upgrade_stays_used() {
    let e = Env::new();
    let a = e.attrs("a", Some(CERTNAME));
    let parsed = vouch::vouching::attrs::parse_file(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let nonce = parsed.custom_attributes["1.3.6.1.4.1.34380.2.7"].clone();
    let expiry = time::OffsetDateTime::parse(
        &parsed.custom_attributes["1.3.6.1.4.1.34380.2.3"],
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    // What an older vouch's hook wrote when it approved these attributes for another key.
    let journal = vouch::store::journal::Journal::new(e.dir.join("replay"));
    let legacy = vouch::vouching::replay_key::ReplayKey::from(format!("v2-nonce:{nonce}").as_str());
    let now = time::OffsetDateTime::now_utc();
    assert_eq!(
        journal.claim(&legacy, expiry, CERTNAME, "old-key", true, now).unwrap(),
        vouch::store::journal::Claim::Fresh
    );
    let (code, err) = e.hook(CERTNAME, &e.csr(CERTNAME, &a, "replayed"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("[attributes-replayed]") && err.contains(CERTNAME), "{err}");
    let out = e.vouch(&["sign", "--csr", s(&e.w.join("replayed.csr"))], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[attributes-replayed]"));
}
