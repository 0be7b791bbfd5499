//! Hardening of what vouch reads and writes, through the real binary: the CSR's
//! signatureAlgorithm read exactly, the key reported before the signature, no symbolic
//! link followed where vouch writes, truncates or cleans, and no certname that fails
//! the certname rules ever used as a file name.

mod common;

use common::{fixture, fixture_now, ok, run, s, vouch, CERTNAME};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vouch::encoding::der::{self, tag, Reader};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The fixture policy's decision on `csr` for CERTNAME through the autosign hook.
fn autosign(csr: &[u8]) -> Output {
    let policy = fixture("policy.toml");
    run(vouch().args(["--now", &fixture_now(), "autosign", CERTNAME, "--policy", s(&policy)]), Some(csr))
}

/// The DER of a fixture CSR (PEM).
fn fixture_der(file: &str) -> Vec<u8> {
    let pem = std::fs::read(fixture(&format!("csr/{file}"))).unwrap();
    vouch::encoding::pem::find(&pem, &["CERTIFICATE REQUEST"]).unwrap().1
}

/// `csr` with its outer signatureAlgorithm's content replaced by `alg_content` (the
/// self-signature covers only the certificationRequestInfo, so it still verifies).
fn with_signature_algorithm(csr: &[u8], alg_content: &[u8]) -> Vec<u8> {
    let outer = Reader::new(csr).next_tag(tag::SEQUENCE, "csr").unwrap();
    let mut r = Reader::new(outer.content);
    let cri = r.any().unwrap();
    let alg = r.next_tag(tag::SEQUENCE, "alg").unwrap();
    let sig = r.any().unwrap();
    assert!(!alg.content.is_empty());
    der::sequence(&[cri.raw, &der::tlv(tag::SEQUENCE, alg_content), sig.raw])
}

/// The OID TLV at the start of `csr`'s signatureAlgorithm.
fn signature_oid(csr: &[u8]) -> Vec<u8> {
    let outer = Reader::new(csr).next_tag(tag::SEQUENCE, "csr").unwrap();
    let mut r = Reader::new(outer.content);
    r.any().unwrap();
    let alg = r.next_tag(tag::SEQUENCE, "alg").unwrap();
    Reader::new(alg.content).next_tag(tag::OID, "oid").unwrap().raw.to_vec()
}

/// D-4a: the CSR's signatureAlgorithm is exactly RFC 5754 (RSA: NULL parameters),
/// RFC 5758 (ECDSA: none) and RFC 8410 (Ed25519: none); any other encoding of the same
/// algorithm is csr-malformed. Each original fixture is granted, as a control.
#[test]
fn csr_signature_algorithm_parameters_must_be_exact() {
    let null = der::tlv(tag::NULL, &[]);
    let junk = der::octet_string(b"junkjunkjunk");
    let mut failures = vec![];
    for (file, exact_params, bad_params) in [
        (
            "valid-p256-conductor.csr.pem",
            vec![],
            vec![("NULL parameters", null.clone()), ("junk parameters", junk.clone())],
        ),
        ("valid-ed25519-conductor.csr.pem", vec![], vec![("NULL parameters", null.clone())]),
        (
            "valid-rsa2048-conductor.csr.pem",
            null.clone(),
            vec![
                ("no NULL", vec![]),
                ("junk instead of NULL", junk.clone()),
                ("NULL then junk", [null.clone(), junk.clone()].concat()),
                ("NULL with content", der::tlv(tag::NULL, &[0])),
            ],
        ),
    ] {
        let csr = fixture_der(file);
        let oid = signature_oid(&csr);
        // The control: the fixture as it is, and re-assembled with the exact parameters.
        for (what, body) in [
            ("as is", csr.clone()),
            ("re-assembled", with_signature_algorithm(&csr, &[oid.clone(), exact_params].concat())),
        ] {
            let out = autosign(&body);
            if out.status.code() != Some(0) {
                failures.push(format!("{file} {what}: want granted, got {:?}: {}", out.status.code(), stderr(&out)));
            }
        }
        for (what, params) in bad_params {
            let out = autosign(&with_signature_algorithm(&csr, &[oid.clone(), params].concat()));
            let err = stderr(&out);
            if out.status.code() != Some(1) || !err.contains("[csr-malformed]") || !err.contains("signature algorithm")
            {
                failures.push(format!("{file} {what}: want csr-malformed, got {:?}: {err}", out.status.code()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// D-4b: an RSA-1024 request is refused for its key (csr-key-unsupported), not as a
/// signature that does not verify.
#[test]
fn rsa_1024_request_is_refused_for_its_key() {
    let t = tempfile::tempdir().unwrap();
    let key = t.path().join("k.pem");
    let csr = t.path().join("r.csr");
    let out = Command::new("openssl")
        .args(["req", "-new", "-newkey", "rsa:1024", "-nodes", "-sha256", "-subj"])
        .arg(format!("/CN={CERTNAME}"))
        .args(["-keyout", s(&key), "-out", s(&csr)])
        .output()
        .expect("openssl is installed");
    assert!(out.status.success(), "{out:?}");
    let out = autosign(&std::fs::read(&csr).unwrap());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[csr-key-unsupported]") && err.contains("RSA key of 1024 bits"), "{err}");
    assert!(!err.contains("[csr-signature-invalid]"), "{err}");
}

/// A CA in a temporary directory, with a conductor to vouch for nodes.
struct Ca {
    _t: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
}

impl Ca {
    fn new() -> Ca {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vouch");
        let work = t.path().to_path_buf();
        let ca = Ca { _t: t, dir, work };
        ok(&ca.vouch(&["ca", "init", "--key-type", "p256"]));
        let cert = ca.work.join("cloud1.pem");
        let key = ca.work.join("cloud1.key");
        ok(&ca.vouch(&["conductor", "new", "cloud1", "--cert-out", s(&cert), "--key-out", s(&key)]));
        ca
    }

    fn vouch(&self, args: &[&str]) -> Output {
        run(vouch().args(args).env("VOUCH_DIR", &self.dir), None)
    }

    fn ca_file(&self, f: &str) -> PathBuf {
        self.dir.join("ca").join(f)
    }

    /// A vouched CSR for `name` with a fresh key.
    fn vouched_csr(&self, name: &str) -> PathBuf {
        let class = self.work.join(format!("{name}.class.yaml"));
        std::fs::write(&class, "classes:\n  - profile::web\n").unwrap();
        let attrs = self.work.join(format!("{name}.attrs.yaml"));
        let (cert, key) = (self.work.join("cloud1.pem"), self.work.join("cloud1.key"));
        ok(&self.vouch(&[
            "conductor",
            "sign",
            "--cert",
            s(&cert),
            "--key",
            s(&key),
            "--classification",
            s(&class),
            "--certname",
            name,
            "--expires-in",
            "1h",
            "--out",
            s(&attrs),
        ]));
        let csr = self.work.join(format!("{name}.csr"));
        let key = self.work.join(format!("{name}.key"));
        ok(&self.vouch(&[
            "csr",
            "--certname",
            name,
            "--attributes",
            s(&attrs),
            "--key-out",
            s(&key),
            "--csr-out",
            s(&csr),
        ]));
        csr
    }

    fn issue(&self, name: &str) {
        let csr = self.vouched_csr(name);
        ok(&self.vouch(&["sign", "--csr", s(&csr), "--out", s(&self.work.join(format!("{name}.pem")))]));
    }

    /// A directory outside the store with files a confused vouch could destroy.
    fn victim_dir(&self, name: &str) -> PathBuf {
        let v = self.work.join(name);
        std::fs::create_dir(&v).unwrap();
        for f in ["precious1", "precious2.json", "precious3.pem"] {
            std::fs::write(v.join(f), "keep me\n").unwrap();
        }
        v
    }
}

fn assert_victim_intact(v: &Path) {
    for f in ["precious1", "precious2.json", "precious3.pem"] {
        assert_eq!(std::fs::read_to_string(v.join(f)).ok().as_deref(), Some("keep me\n"), "{}", v.join(f).display());
    }
}

/// An error exit that names the link and says to remove it.
fn assert_link_refused(out: &Output, link: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&link.display().to_string()) && err.contains("symbolic link"), "{err}");
    assert!(err.contains("remove the link"), "{err}");
}

/// Replaces the store directory `name` with a symbolic link to `target`.
fn link_store_dir(ca: &Ca, name: &str, target: &Path) -> PathBuf {
    let d = ca.ca_file(name);
    let _ = std::fs::remove_dir_all(&d);
    std::os::unix::fs::symlink(target, &d).unwrap();
    d
}

/// D-2a: a store directory that is a symbolic link is refused, never cleaned or written
/// through (tmp/ and pending/ are cleaned at lock time: the link's target lost every file).
#[test]
fn symlinked_store_directories_are_refused_not_cleaned() {
    let ca = Ca::new();
    ca.issue("a.example.test");
    for dir in ["tmp", "pending", "requests", "signed", "serials"] {
        let victim = ca.victim_dir(&format!("victim-{dir}"));
        let link = link_store_dir(&ca, dir, &victim);
        // Every locking command: a CRL, a clean (removes requests/NAME.*), an issuance.
        assert_link_refused(&ca.vouch(&["crl"]), &link);
        assert_link_refused(&ca.vouch(&["clean", "precious2"]), &link);
        assert_link_refused(&ca.vouch(&["clean", "precious3"]), &link);
        let csr = ca.vouched_csr(&format!("b-{dir}.example.test"));
        assert_link_refused(&ca.vouch(&["sign", "--csr", s(&csr)]), &link);
        assert_victim_intact(&victim);
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 3, "nothing written into {}", victim.display());
        // With the link removed (the directory is re-created), the store works again.
        std::fs::remove_file(&link).unwrap();
        if dir == "signed" || dir == "serials" {
            // Their contents were moved away with the test's remove_dir_all: start afresh.
            continue;
        }
        ok(&ca.vouch(&["crl"]));
    }
}

/// D-2b: files vouch appends to or truncates are opened with O_NOFOLLOW: a symbolic
/// link there is an error naming it, and the link's target is untouched.
#[test]
fn store_files_that_are_symlinks_are_never_written_through() {
    let ca = Ca::new();
    ca.issue("a.example.test");
    let victim = ca.work.join("victim.txt");
    for (file, args) in [
        ("inventory.txt", vec!["sign", "--csr", "CSR"]),
        ("revocations.txt", vec!["revoke", "a.example.test"]),
        ("wal.log", vec!["sign", "--csr", "CSR"]),
        (".lock", vec!["crl"]),
    ] {
        std::fs::write(&victim, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        let path = ca.ca_file(file);
        let saved = std::fs::read(&path).ok();
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let csr = ca.vouched_csr(&format!("n{}.example.test", file.len()));
        let args: Vec<&str> = args.iter().map(|a| if *a == "CSR" { s(&csr) } else { a }).collect();
        let out = ca.vouch(&args);
        assert_link_refused(&out, &path);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root:x:0:0:root:/root:/bin/bash\n", "{file}");
        // A dangling link: nothing is created at its target either.
        std::fs::remove_file(&victim).unwrap();
        assert_link_refused(&ca.vouch(&args), &path);
        assert!(!victim.exists(), "{file}: vouch created the link's target");
        std::fs::remove_file(&path).unwrap();
        if let Some(bytes) = saved {
            std::fs::write(&path, bytes).unwrap();
        }
        ok(&ca.vouch(&["list"]));
    }
    // Nothing was issued or revoked meanwhile.
    let list: serde_json::Value = serde_json::from_str(&ok(&ca.vouch(&["list", "--all", "--format", "json"]))).unwrap();
    let entries = list.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{list}");
    assert_eq!(entries[0]["state"], "signed", "{list}");
}

/// D-2b: the audit log (docs/puppet-server.md's hook layout puts it in a directory the puppet user
/// writes) is never appended to through a symbolic link.
#[test]
fn audit_log_symlink_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let pki = fixture("pki");
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap().replace("pki/", &format!("{}/", s(&pki)));
    let log = t.path().join("audit.log");
    let policy = t.path().join("policy.toml");
    std::fs::write(&policy, format!("{text}\n[audit]\nlog = \"{}\"\n", s(&log))).unwrap();
    let victim = t.path().join("fake_passwd");
    std::fs::write(&victim, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    std::os::unix::fs::symlink(&victim, &log).unwrap();
    let csr = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let out = run(vouch().args(["--now", &fixture_now(), "autosign", CERTNAME, "--policy", s(&policy)]), Some(&csr));
    assert_link_refused(&out, &log);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root:x:0:0:root:/root:/bin/bash\n");
    // A real file works.
    std::fs::remove_file(&log).unwrap();
    let out = run(vouch().args(["--now", &fixture_now(), "autosign", CERTNAME, "--policy", s(&policy)]), Some(&csr));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&log).unwrap().contains(CERTNAME));
}

/// D-2d: a certname from the command line that fails the certname rules is refused
/// (exit 2, naming the rule) before the store is touched: no `..` path to a file
/// outside the store, no other certname's files reached through `../signed/`.
#[test]
fn certnames_that_fail_the_rules_never_reach_the_store() {
    let ca = Ca::new();
    ca.issue("a.example.test");
    let victim = ca.work.join("victimdir");
    std::fs::create_dir(&victim).unwrap();
    // (No config.pem: `signed/../../../victimdir/config.pem` is then absent, and the
    // original `clean` went on to remove requests/<NAME>.json: the victim.)
    for f in ["config.json", "x.pem"] {
        std::fs::write(victim.join(f), "{\"k\":1}\n").unwrap();
    }
    // DIR/ca/requests/../../../victimdir/config.json is the victim.
    let outside = "../../../victimdir/config";
    let sibling = "../signed/a.example.test";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["clean", outside], "'/'"),
        (vec!["revoke", outside], "'/'"),
        (vec!["renew", outside], "'/'"),
        (vec!["enc", outside], "'/'"),
        (vec!["clean", sibling], "'/'"),
        (vec!["revoke", sibling], "'/'"),
        (vec!["renew", sibling], "'/'"),
        (vec!["enc", sibling], "'/'"),
        (vec!["clean", ".."], "ends with a dot"),
        (vec!["revoke", "A.example.test"], "uppercase"),
        (vec!["clean", "*.example.test"], "wildcard"),
    ];
    for (args, rule) in cases {
        let out = ca.vouch(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not a valid certname") && err.contains(rule), "{args:?}: {err}");
        assert!(err.contains("hint: a certname is a lowercase host name"), "{args:?}: {err}");
    }
    for f in ["config.json", "x.pem"] {
        assert!(victim.join(f).exists(), "{f} was deleted");
    }
    // a.example.test was neither revoked nor renewed through "../signed/".
    let list = ok(&ca.vouch(&["list", "--all", "--format", "json"]));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let entries = list.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{list}");
    assert_eq!(entries[0]["state"], "signed", "{list}");
    assert!(std::fs::read_to_string(ca.ca_file("revocations.txt")).unwrap_or_default().is_empty());
}

/// D-4b, the conductor's side: attributes signed with an RSA-1024 conductor key (its
/// certificate issued by a trusted root) are refused for the key (signature-key-unsupported),
/// not as a signature that does not verify. The same construction with RSA-2048 is granted.
#[test]
fn rsa_1024_conductor_key_is_refused_for_its_key() {
    use base64::{engine::general_purpose::STANDARD, Engine};
    let ca = Ca::new();
    let w = &ca.work;
    let ext = w.join("conductor.ext");
    std::fs::write(
        &ext,
        "extendedKeyUsage=1.3.6.1.4.1.34380.2.0\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().expect("openssl is installed");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for bits in [1024, 2048] {
        let (key, req, cert) =
            (w.join(format!("c{bits}.key")), w.join(format!("c{bits}.csr")), w.join(format!("c{bits}.pem")));
        let name = format!("n{bits}.example.test");
        openssl(&[
            "req",
            "-new",
            "-newkey",
            &format!("rsa:{bits}"),
            "-nodes",
            "-subj",
            &format!("/CN=c{bits}"),
            "-keyout",
            s(&key),
            "-out",
            s(&req),
        ]);
        let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            s(&req),
            "-CA",
            s(&root),
            "-CAkey",
            s(&root_key),
            "-set_serial",
            &format!("{bits}"),
            "-days",
            "30",
            "-extfile",
            s(&ext),
            "-out",
            s(&cert),
        ]);
        let der = vouch::encoding::pem::find(&std::fs::read(&cert).unwrap(), &["CERTIFICATE"]).unwrap().1;
        let expiry = vouch::encoding::time::format_rfc3339(time::OffsetDateTime::now_utc() + time::Duration::hours(1));
        let mut a = vouch::vouching::attrs::VouchedAttributes {
            signature: String::new(),
            version: "2".into(),
            expiry,
            conductor: STANDARD.encode(&der),
            classification: STANDARD.encode("classes:\n  - profile::web\n"),
            binding: Some(vouch::vouching::attrs::Binding { certname: name.clone(), nonce: format!("{:032x}", bits) }),
            template: None,
        };
        let b = a.binding.clone().unwrap();
        let msg = vouch::vouching::attrs::canonical_v2(
            &a.version,
            &a.expiry,
            &a.conductor,
            &a.classification,
            &b.certname,
            &b.nonce,
        );
        let (msg_file, sig_file) = (w.join(format!("msg{bits}")), w.join(format!("sig{bits}")));
        std::fs::write(&msg_file, msg).unwrap();
        openssl(&["dgst", "-sha256", "-sign", s(&key), "-out", s(&sig_file), s(&msg_file)]);
        a.signature = STANDARD.encode(std::fs::read(&sig_file).unwrap());
        let attrs = vouch::vouching::attrs::CsrAttributes::from_vouched(&a, None);
        let attrs_file = w.join(format!("attrs{bits}.json"));
        std::fs::write(
            &attrs_file,
            vouch::vouching::attrs::render(&attrs, vouch::vouching::attrs::Format::Json).unwrap(),
        )
        .unwrap();
        let csr = w.join(format!("{name}.csr"));
        ok(&ca.vouch(&[
            "csr",
            "--certname",
            &name,
            "--attributes",
            s(&attrs_file),
            "--key-out",
            s(&w.join(format!("{name}.key"))),
            "--csr-out",
            s(&csr),
        ]));
        let out = ca.vouch(&["check", "--csr", s(&csr)]);
        let err = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        if bits == 1024 {
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(err.contains("signature-key-unsupported") && err.contains("RSA key of 1024 bits"), "{err}");
            assert!(!err.contains("[signature-invalid]"), "{err}");
        } else {
            assert_eq!(out.status.code(), Some(0), "the construction itself is sound: {err}");
        }
    }
}

/// The race-free backstop under the lstat checks: a directory opened with O_NOFOLLOW
/// refuses a link (naming it), lists names, and removes a link inside it, never its target;
/// files written in place refuse a link, dangling or not.
#[test]
fn nofollow_directory_and_file_opens() {
    use std::ffi::OsStr;
    use vouch::files::durable::{open_nofollow, remove_in, NoFollowDir};
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real");
    let outside = t.path().join("outside");
    std::fs::create_dir(&real).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep me\n").unwrap();
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let e = NoFollowDir::open(&link).err().expect("a link is refused").to_string();
    assert!(e.contains(s(&link)) && e.contains("symbolic link") && e.contains("remove the link"), "{e}");
    assert!(remove_in(&link, "precious").is_err());
    assert!(outside.join("precious").exists());
    // A link inside a real directory is removed itself; its target stays.
    std::os::unix::fs::symlink(outside.join("precious"), real.join("l")).unwrap();
    std::fs::write(real.join("f"), "x").unwrap();
    let dir = NoFollowDir::open(&real).unwrap();
    let mut names = dir.names().unwrap();
    names.sort();
    assert_eq!(names, [OsStr::new("f"), OsStr::new("l")]);
    for n in &names {
        dir.unlink(n).unwrap();
    }
    assert!(dir.names().unwrap().is_empty());
    assert_eq!(std::fs::read_to_string(outside.join("precious")).unwrap(), "keep me\n");
    // In-place writes.
    let mut append = std::fs::OpenOptions::new();
    append.append(true).create(true);
    let f = t.path().join("log");
    std::os::unix::fs::symlink(outside.join("precious"), &f).unwrap();
    let e = open_nofollow(&append, &f).expect_err("a link is refused").to_string();
    assert!(e.contains(s(&f)) && e.contains("symbolic link"), "{e}");
    let dangling = t.path().join("dangling");
    std::os::unix::fs::symlink(outside.join("new"), &dangling).unwrap();
    assert!(open_nofollow(&append, &dangling).is_err());
    assert!(!outside.join("new").exists());
    assert!(open_nofollow(&append, &t.path().join("plain")).is_ok());
}

/// D-2d, inside the store: a redo marker (as a killed `vouch clean` leaves) naming a
/// certname that fails the rules is reported as a damaged store file; its "../" path is
/// never used (the original removed requests/<certname>.json and .pem for it).
#[test]
fn a_redo_marker_with_a_path_for_a_certname_is_damage_not_a_path() {
    let ca = Ca::new();
    ca.issue("a.example.test");
    let victim = ca.work.join("victimdir");
    std::fs::create_dir(&victim).unwrap();
    for f in ["config.json", "config.pem"] {
        std::fs::write(victim.join(f), "{\"k\":1}\n").unwrap();
    }
    let marker = ca.ca_file("pending/revoke-00ff.json");
    std::fs::write(
        &marker,
        r#"{"op":"revoke","serial":"00ff","time":"2030-01-01T00:00:00Z","reason":"keyCompromise","certname":"../../../victimdir/config","cleaned":true}"#,
    )
    .unwrap();
    let out = ca.vouch(&["crl"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is damaged") && err.contains(s(&marker)) && err.contains("not a valid certname"), "{err}");
    for f in ["config.json", "config.pem"] {
        assert!(victim.join(f).exists(), "{f} was deleted");
    }
}

/// D-4a, the conductor's side (webpki): the conductor certificate's signatureAlgorithm
/// rewritten (NULL parameters added to ecdsa-with-SHA256, outside what the root signed)
/// and the attributes signed again with the conductor's own key: refused, while the
/// untouched certificate through the same steps is granted.
#[test]
fn conductor_certificate_signature_algorithm_is_read_exactly() {
    let t = tempfile::tempdir().unwrap();
    let der = vouch::encoding::pem::find(&std::fs::read(fixture("pki/conductor-p256.pem")).unwrap(), &["CERTIFICATE"])
        .unwrap()
        .1;
    let outer = Reader::new(&der).next_tag(tag::SEQUENCE, "cert").unwrap();
    let mut r = Reader::new(outer.content);
    let (tbs, alg, sig) = (r.any().unwrap(), r.next_tag(tag::SEQUENCE, "alg").unwrap(), r.any().unwrap());
    let with_null = der::sequence(&[
        tbs.raw,
        &der::tlv(tag::SEQUENCE, &[alg.content, &der::tlv(tag::NULL, &[])].concat()),
        sig.raw,
    ]);
    let class = t.path().join("class.yaml");
    std::fs::write(&class, "classes:\n  - profile::web\n").unwrap();
    for (what, cert_der, granted) in [("untouched", der.clone(), true), ("NULL parameters", with_null, false)] {
        let cert = t.path().join(format!("{granted}.pem"));
        std::fs::write(&cert, vouch::encoding::pem::encode("CERTIFICATE", &cert_der)).unwrap();
        let attrs = t.path().join(format!("{granted}.attrs.yaml"));
        let out = run(
            vouch()
                .args(["--now", &fixture_now(), "conductor", "sign", "--cert", s(&cert), "--key"])
                .arg(fixture("pki/conductor-p256.key"))
                .args([
                    "--classification",
                    s(&class),
                    "--certname",
                    CERTNAME,
                    "--expires",
                    "2030-06-01T18:00:00Z",
                    "--out",
                    s(&attrs),
                ]),
            None,
        );
        assert!(out.status.success(), "{what}: {}", stderr(&out));
        let csr = t.path().join(format!("{granted}.csr"));
        let key = t.path().join(format!("{granted}.key"));
        ok(&run(
            vouch().args([
                "csr",
                "--certname",
                CERTNAME,
                "--attributes",
                s(&attrs),
                "--key-out",
                s(&key),
                "--csr-out",
                s(&csr),
            ]),
            None,
        ));
        let out = autosign(&std::fs::read(&csr).unwrap());
        let err = stderr(&out);
        eprintln!("{what}: {err}");
        if granted {
            assert_eq!(out.status.code(), Some(0), "{what}: {err}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{what}: {err}");
            assert!(err.contains("[conductor-untrusted]") || err.contains("[conductor-malformed]"), "{what}: {err}");
        }
    }
}
