//! Several master CAs under one root: `vouch ca init --root-cert ROOT --root-key KEY` makes a
//! further master CA (its own key) in a new data directory, checked by `openssl verify`; every
//! refusal leaves that directory as it was.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn openssl(args: &[&str]) -> Output {
    require("openssl", "openssl");
    Command::new("openssl").args(args).output().unwrap()
}

/// openssl's stdout, asserting success.
fn openssl_ok(args: &[&str]) -> String {
    let out = openssl(args);
    assert!(
        out.status.success(),
        "openssl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `vouch --dir DIR [--now NOW] ca init ARGS`.
fn ca_init<A: AsRef<std::ffi::OsStr>>(dir: &Path, now: Option<&str>, args: &[A]) -> Output {
    let mut c = vouch();
    c.args(["--dir", s(dir)]);
    if let Some(n) = now {
        c.args(["--now", n]);
    }
    run(c.args(["ca", "init"]).args(args), None)
}

/// A first CA in `t/name`; returns its data directory and its root fingerprint as printed.
fn first_ca(t: &Path, name: &str, now: Option<&str>) -> (PathBuf, String) {
    let dir = t.join(name);
    let out = ok(&ca_init::<&str>(&dir, now, &[]));
    let fp = out
        .lines()
        .find_map(|l| l.strip_prefix("Root CA fingerprint (SHA-256 of the root certificate): "))
        .unwrap_or_else(|| panic!("no fingerprint in {out}"))
        .to_string();
    (dir, fp)
}

fn root_args(cert: &Path, key: &Path) -> Vec<String> {
    vec!["--root-cert".into(), s(cert).into(), "--root-key".into(), s(key).into()]
}

/// The names in a directory, sorted (empty when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// A conductor of `dir`'s root vouches for `certname`: its key and CSR in `w`.
fn vouched_csr(w: &Path, conductor_dir: &Path, certname: &str) -> PathBuf {
    let (cert, key) = (w.join("c1.pem"), w.join("c1.key"));
    if !cert.exists() {
        ok(&run(
            vouch()
                .args(["--dir", s(conductor_dir), "conductor", "new", "c1", "--cert-out", s(&cert)])
                .args(["--key-out", s(&key)]),
            None,
        ));
    }
    cli_vouched_csr(w, &cert, &key, certname)
}

#[test]
fn a_further_master_ca_under_an_existing_root_chains_to_it_and_never_holds_the_root_key() {
    let t = tempfile::tempdir().unwrap();
    let (d1, fp) = first_ca(t.path(), "d1", None);
    let (root, root_key) = (d1.join("ca/root_crt.pem"), d1.join("ca/root_key.pem"));
    let root_key_before = std::fs::read(&root_key).unwrap();
    let d2 = t.path().join("d2");
    // The root is P-256 (the default); the new master is P-384: the types may differ.
    let out = ca_init(&d2, None, &[vec!["--key-type".into(), "p384".into()], root_args(&root, &root_key)].concat());
    let text = ok(&out);
    assert!(
        text.contains(&format!("Created a p384 master CA in {} under the existing root {fp}", d2.display())),
        "{text}"
    );
    assert!(text.contains(&format!("--dir {}", d1.display())), "the next step names the root's directory: {text}");

    // D2 as `ca init` lays it out, without the root key; the root key untouched.
    let ca = d2.join("ca");
    assert_eq!(names(&ca), ["ca_bundle.pem", "ca_crt.pem", "ca_key.pem", "root_crt.pem", "root_issued.txt"]);
    // The root's issuance is recorded where the root key is (D1) and in D2: its master, a CA.
    let master = std::fs::read(ca.join("ca_crt.pem")).unwrap();
    let (_, der) = vouch::encoding::pem::find(&master, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    let serial = vouch::encoding::hex(c.raw_serial()).trim_start_matches("00").to_string();
    let line = format!("{serial} ");
    for issued in [d1.join("ca/root_issued.txt"), ca.join("root_issued.txt")] {
        let text = std::fs::read_to_string(&issued).unwrap();
        let l = text.lines().find(|l| l.starts_with(&line)).unwrap_or_else(|| panic!("{}: {text}", issued.display()));
        assert!(l.contains(" ca ") && l.contains(&vouch::encoding::sha256_hex(&der)), "{l}");
    }
    assert_eq!(names(&d2), ["ca", "policy.toml"]);
    assert_eq!((mode(&d2), mode(&ca), mode(&ca.join("ca_key.pem"))), (0o700, 0o700, 0o600));
    for f in ["ca_crt.pem", "root_crt.pem", "ca_bundle.pem"] {
        assert_eq!(mode(&ca.join(f)), 0o644, "{f}");
    }
    assert_eq!(std::fs::read(&root_key).unwrap(), root_key_before);
    let der = |p: &Path| openssl_ok(&["x509", "-in", s(p), "-outform", "DER"]);
    assert_eq!(der(&ca.join("root_crt.pem")), der(&root), "D2's trust anchor is the root itself");
    let pem = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(
        pem(&ca.join("ca_bundle.pem")),
        format!("{}{}", pem(&ca.join("ca_crt.pem")), pem(&ca.join("root_crt.pem"))),
        "the bundle: master, then root"
    );
    assert_eq!(pem(&d2.join("policy.toml")), pem(&d1.join("policy.toml")), "the same default policy");

    // The new master chains to the root, is a CA, and is another master: subject and key differ.
    openssl_ok(&["verify", "-CAfile", s(&root), s(&ca.join("ca_crt.pem"))]);
    let x = openssl_ok(&["x509", "-in", s(&ca.join("ca_crt.pem")), "-noout", "-text"]);
    assert!(x.contains("CA:TRUE, pathlen:0") && x.contains("Certificate Sign"), "{x}");
    assert!(x.contains("NIST CURVE: P-384") || x.contains("secp384r1"), "{x}");
    let subject = |p: &Path| openssl_ok(&["x509", "-in", s(p), "-noout", "-subject"]);
    let (s1, s2) = (subject(&d1.join("ca/ca_crt.pem")), subject(&ca.join("ca_crt.pem")));
    assert_ne!(s1, s2);
    assert!(s2.starts_with("subject=CN = vouch Master CA ") || s2.starts_with("subject=CN=vouch Master CA "), "{s2}");
    let pubkey = |p: &Path| openssl_ok(&["x509", "-in", s(p), "-noout", "-pubkey"]);
    assert_ne!(pubkey(&d1.join("ca/ca_crt.pem")), pubkey(&ca.join("ca_crt.pem")));
    // A third master gets yet another name.
    let d3 = t.path().join("d3");
    ok(&ca_init(&d3, None, &root_args(&root, &root_key)));
    assert_ne!(subject(&d3.join("ca/ca_crt.pem")), s2);

    // A node vouched by a conductor of the root (made in D1) gets its certificate from D2's
    // master; it verifies against the root through D2's bundle, and not through D1's master.
    let csr = vouched_csr(t.path(), &d1, CERTNAME);
    let node = t.path().join("node.pem");
    ok(&run(vouch().args(["--dir", s(&d2), "sign", "--csr", s(&csr), "--out", s(&node)]), None));
    openssl_ok(&["verify", "-CAfile", s(&root), "-untrusted", s(&ca.join("ca_bundle.pem")), s(&node)]);
    let issuer = openssl_ok(&["x509", "-in", s(&node), "-noout", "-issuer"]);
    assert_eq!(issuer.trim_start_matches("issuer="), s2.trim_start_matches("subject="));
    let other = openssl(&["verify", "-CAfile", s(&root), "-untrusted", s(&d1.join("ca/ca_crt.pem")), s(&node)]);
    assert!(!other.status.success(), "D1's master did not issue it");

    // The root key is not in D2: what needs it says where it went, and writes nothing.
    let (cc, ck) = (t.path().join("c2.pem"), t.path().join("c2.key"));
    let out =
        run(vouch().args(["--dir", s(&d2), "conductor", "new", "c2", "--cert-out", s(&cc), "--key-out", s(&ck)]), None);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let e = err(&out);
    assert!(e.contains("root CA's key is not in") && e.contains("--root-key") && e.contains("root_key.pem"), "{e}");
    assert!(!cc.exists() && !ck.exists());
    // vouch serve's maintenance and the CRL need no root key: `vouch crl` works in D2.
    ok(&run(vouch().args(["--dir", s(&d2), "crl", "--out", s(&t.path().join("crl.pem"))]), None));
}

#[test]
fn a_further_master_ends_with_its_root_and_an_expired_root_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let (d1, _) = first_ca(t.path(), "d1", Some("2030-01-01T00:00:00Z"));
    let args = root_args(&d1.join("ca/root_crt.pem"), &d1.join("ca/root_key.pem"));
    let root_end = openssl_ok(&["x509", "-in", s(&d1.join("ca/root_crt.pem")), "-noout", "-enddate"]);

    // Ten years on, 15 more would outlive the root (20 years): the master ends with it.
    let d2 = t.path().join("d2");
    let out = ca_init(&d2, Some("2040-01-01T00:00:00Z"), &args);
    ok(&out);
    assert!(err(&out).contains("it ends with the root"), "{}", err(&out));
    let end = openssl_ok(&["x509", "-in", s(&d2.join("ca/ca_crt.pem")), "-noout", "-enddate"]);
    assert_eq!(end, root_end);

    // Past the root's notAfter: refused, nothing made.
    let d3 = t.path().join("d3");
    let out = ca_init(&d3, Some("2051-01-01T00:00:00Z"), &args);
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("root CA certificate") && err(&out).contains("it expired at"), "{}", err(&out));
    assert!(!d3.exists(), "nothing written: {:?}", names(&d3));
}

#[test]
fn a_root_key_that_is_not_the_roots_or_a_certificate_that_is_no_root_is_refused_and_nothing_written() {
    let t = tempfile::tempdir().unwrap();
    let (d1, _) = first_ca(t.path(), "d1", None);
    let (other, _) = first_ca(t.path(), "other", None);
    let (root, root_key) = (d1.join("ca/root_crt.pem"), d1.join("ca/root_key.pem"));
    // An existing, empty D2 (0700, as vouch would make it) and a D2 that does not exist yet.
    let empty = t.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::set_permissions(&empty, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let missing = t.path().join("missing");

    let refused = |cert: &Path, key: &Path, expect: &[&str]| {
        for d2 in [&empty, &missing] {
            let out = ca_init(d2, None, &root_args(cert, key));
            let e = err(&out);
            assert_eq!(out.status.code(), Some(2), "{cert:?} {key:?}: {e}");
            for x in expect {
                assert!(e.contains(x), "{x:?} not in: {e}");
            }
            assert!(names(d2).is_empty(), "nothing written in {}: {:?}", d2.display(), names(d2));
        }
        assert!(!missing.exists());
    };
    // Another CA's root key: the named error and its hint.
    refused(&root, &other.join("ca/root_key.pem"), &["does not belong to the root CA certificate", "--root-key"]);
    // The master CA's key with the root's certificate.
    refused(&root, &d1.join("ca/ca_key.pem"), &["does not belong to the root CA certificate"]);
    // A master CA given as the root (path length 0).
    refused(&d1.join("ca/ca_crt.pem"), &d1.join("ca/ca_key.pem"), &["path length constraint is 0"]);
    // A conductor (no CA) given as the root.
    let (cc, ck) = (t.path().join("c.pem"), t.path().join("c.key"));
    ok(&run(vouch().args(["--dir", s(&d1), "conductor", "new", "c", "--cert-out", s(&cc), "--key-out", s(&ck)]), None));
    refused(&cc, &ck, &["is not a CA certificate"]);
    // A root key others may read: the CA's own key rule, with the fix.
    let loose = t.path().join("loose.key");
    std::fs::copy(&root_key, &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    refused(&root, &loose, &["refusing to trust", "chmod 600"]);
    // Not a key at all.
    refused(&root, &root, &["private key"]);

    // A D2 that already holds a CA is refused before the root is even read, and left as it was.
    let key_before = std::fs::read(other.join("ca/ca_key.pem")).unwrap();
    let out = ca_init(&other, None, &root_args(&root, &root_key));
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("already exists"), "{}", err(&out));
    assert_eq!(std::fs::read(other.join("ca/ca_key.pem")).unwrap(), key_before);
    assert_eq!(
        names(&other.join("ca")),
        ["ca_bundle.pem", "ca_crt.pem", "ca_key.pem", "root_crt.pem", "root_issued.txt", "root_key.pem"]
    );
}

#[test]
fn root_cert_and_root_key_come_together() {
    let t = tempfile::tempdir().unwrap();
    let (d1, _) = first_ca(t.path(), "d1", None);
    let d2 = t.path().join("d2");
    for (given, missing) in [("--root-cert", "--root-key"), ("--root-key", "--root-cert")] {
        let file = if given == "--root-cert" { "ca/root_crt.pem" } else { "ca/root_key.pem" };
        let out = ca_init(&d2, None, &[given, s(&d1.join(file))]);
        assert_eq!(out.status.code(), Some(2), "{}", err(&out));
        assert!(err(&out).contains(missing), "clap names the missing {missing}: {}", err(&out));
        assert!(!d2.exists());
    }
}

/// `--root-key root_key.pem` given from inside the root's `ca/` names the same key as
/// `--root-key ROOT_DIR/ca/root_key.pem`: the new master is recorded in the root's
/// `root_issued.txt` either way, and the next step names the root's directory.
#[test]
fn a_further_master_made_with_a_relative_root_key_path_is_recorded_in_the_roots_directory() {
    let t = tempfile::tempdir().unwrap();
    let (d1, _) = first_ca(t.path(), "d1", None);
    let d2 = t.path().join("d2");
    let out = run(
        vouch().current_dir(d1.join("ca")).args([
            "--dir",
            s(&d2),
            "ca",
            "init",
            "--root-cert",
            "root_crt.pem",
            "--root-key",
            "root_key.pem",
        ]),
        None,
    );
    let said = ok(&out);
    assert!(!said.contains("--dir ROOT_DIR"), "the next step names the root's directory: {said}");
    let master = std::fs::read(d2.join("ca/ca_crt.pem")).unwrap();
    let (_, der) = vouch::encoding::pem::find(&master, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    let serial = vouch::encoding::hex(c.raw_serial()).trim_start_matches("00").to_string();
    let issued = std::fs::read_to_string(d1.join("ca/root_issued.txt")).unwrap();
    assert!(
        issued.lines().any(|l| l.starts_with(&format!("{serial} ")) && l.contains(" ca ")),
        "D1 records D2's master: {issued}"
    );
    let o = run(vouch().args(["--dir", s(&d1), "conductor", "revoke", "--serial", &serial]), None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(err(&o).contains("records it"), "{}", text(&o));
}
