//! `vouch conductor revoke`: a conductor on the root's CRL, through the real binary, with
//! `openssl` as the independent reader of that CRL. The CA refuses what a revoked conductor
//! vouches for (new requests and renewals) with no policy change, in the CLI, the hook and a
//! running `vouch serve`; the nodes it vouched for stay valid and are counted.

mod common;

use common::processes::{wait_within, Guard, StderrLines, Watchdog};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A CA (`ca init`) in `t/vouch` with two conductors, `c1` and `c2`, their files in `t`.
struct Ca {
    _t: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
}

impl Ca {
    fn new() -> Ca {
        let t = tempfile::tempdir().unwrap();
        let ca = Ca { dir: t.path().join("vouch"), work: t.path().to_path_buf(), _t: t };
        ok(&ca.vouch(&["ca", "init"]));
        for c in ["c1", "c2"] {
            ok(&ca.vouch(&["conductor", "new", c, "--cert-out", s(&ca.cert(c)), "--key-out", s(&ca.key(c))]));
        }
        ca
    }

    fn vouch(&self, args: &[&str]) -> Output {
        run(vouch().arg("--dir").arg(&self.dir).args(args), None)
    }

    fn cert(&self, conductor: &str) -> PathBuf {
        self.work.join(format!("{conductor}.pem"))
    }

    fn key(&self, conductor: &str) -> PathBuf {
        self.work.join(format!("{conductor}.key"))
    }

    fn ca_file(&self, f: &str) -> PathBuf {
        self.dir.join("ca").join(f)
    }

    /// `conductor` vouches for `certname` (version 2, an hour): the CSR a Puppet agent makes.
    fn csr(&self, conductor: &str, certname: &str) -> PathBuf {
        cli_vouched_csr(&self.work, &self.cert(conductor), &self.key(conductor), certname)
    }

    /// `vouch sign` of `certname`'s CSR, the certificate written to `certname.pem`.
    fn sign(&self, csr: &Path) -> Output {
        let out = csr.with_extension("pem");
        self.vouch(&["sign", "--csr", s(csr), "--out", s(&out)])
    }
}

fn openssl(args: &[&str]) -> Output {
    require("openssl", "openssl");
    Command::new("openssl").args(args).output().unwrap()
}

/// A certificate file's serial as vouch prints it (lowercase hex, no leading zero octet) and
/// its SHA-256 (lowercase hex).
fn serial_and_fingerprint(cert: &Path) -> (String, String) {
    let pem = std::fs::read(cert).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    let hex = vouch::encoding::hex(c.raw_serial());
    (hex.trim_start_matches("00").to_string(), vouch::encoding::sha256_hex(&der))
}

/// The root CRL's crlNumber, as openssl reads it.
fn crl_number(crl: &Path) -> u128 {
    let out = String::from_utf8_lossy(&openssl(&["crl", "-in", s(crl), "-noout", "-crlnumber"]).stdout).into_owned();
    let hex = out.trim().strip_prefix("crlNumber=0x").unwrap_or_else(|| panic!("no crlNumber: {out}"));
    u128::from_str_radix(hex, 16).unwrap()
}

/// A conductor the root signed with openssl (not `vouch conductor new`: `root_issued.txt` does
/// not name it), serial `serial`, as `NAME.pem` and `NAME.key` in the CA's work directory.
fn openssl_conductor(ca: &Ca, name: &str, serial: &str) -> (PathBuf, PathBuf) {
    let w = &ca.work;
    let (key, csr, ext, cert) =
        (ca.key(name), w.join(format!("{name}.req")), w.join(format!("{name}.cnf")), ca.cert(name));
    ok(&openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", s(&key)]));
    ok(&openssl(&["req", "-new", "-key", s(&key), "-subj", &format!("/CN={name}"), "-out", s(&csr)]));
    std::fs::write(
        &ext,
        "extendedKeyUsage=1.3.6.1.4.1.34380.2.0\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    ok(&openssl(&[
        "x509",
        "-req",
        "-in",
        s(&csr),
        "-CA",
        s(&ca.ca_file("root_crt.pem")),
        "-CAkey",
        s(&ca.ca_file("root_key.pem")),
        "-set_serial",
        serial,
        "-days",
        "30",
        "-extfile",
        s(&ext),
        "-out",
        s(&cert),
    ]));
    (cert, key)
}

/// The serial openssl prints for `cert` (`serial=HEX`).
fn openssl_serial(cert: &Path) -> String {
    String::from_utf8_lossy(&openssl(&["x509", "-in", s(cert), "-noout", "-serial"]).stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 1 with `[code]` among the reasons (stderr; `vouch check` prints them on stdout).
fn refused_with(o: &Output, code: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert!(text(o).contains(&format!("[{code}]")), "{}", text(o));
}

/// The attack the command answers: a conductor's key is stolen. After `vouch conductor revoke`,
/// with `conductors.crls` empty as the default policy has it, what that conductor vouches for
/// is refused by `vouch sign`, `vouch check --dir`, the hook with `--dir` and renewal; another
/// conductor still vouches; openssl reads the root CRL as listing the conductor (keyCompromise,
/// a higher CRL number) and refuses its certificate with `-crl_check`; the node it vouched for
/// before stays valid, is counted, and is what `vouch list --all --conductor` lists.
#[test]
fn a_revoked_conductor_is_refused_by_its_own_ca_without_a_policy_change() {
    let ca = Ca::new();
    let policy = std::fs::read_to_string(ca.dir.join("policy.toml")).unwrap();
    assert!(policy.contains("crls = []"), "the default policy lists no conductor CRL: {policy}");
    let n1 = ca.csr("c1", "n1.example.test");
    ok(&ca.sign(&n1));
    let n2 = ca.csr("c1", "n2.example.test");
    let n3 = ca.csr("c2", "n3.example.test");
    let root_crl = ca.ca_file("root_crl.pem");
    let before = crl_number(&root_crl);
    let (serial, fp) = serial_and_fingerprint(&ca.cert("c1"));

    let out = ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    assert!(out.contains(&format!("revoked conductor CN=c1 (serial {serial}, keyCompromise)")), "{out}");
    assert!(out.contains("1 current node certificate vouched for by it stays valid"), "{out}");
    assert!(out.contains(&format!("list --all --conductor {fp}")), "{out}");
    assert!(out.contains("root_crl.pem"), "the multi-master step: {out}");

    // Refused everywhere this CA decides, with the policy unchanged.
    refused_with(&ca.sign(&n2), "conductor-revoked");
    refused_with(&ca.vouch(&["check", "--csr", s(&n2)]), "conductor-revoked");
    let csr = std::fs::read(&n2).unwrap();
    refused_with(
        &run(vouch().arg("--dir").arg(&ca.dir).args(["autosign", "n2.example.test"]), Some(&csr)),
        "conductor-revoked",
    );
    refused_with(&ca.vouch(&["renew", "n1.example.test"]), "conductor-revoked");
    assert_eq!(std::fs::read_to_string(ca.dir.join("policy.toml")).unwrap(), policy);
    // Another conductor of the same root still vouches.
    ok(&ca.sign(&n3));

    // openssl: the serial with its reason on a CRL numbered higher, the conductor revoked.
    let crl = String::from_utf8_lossy(&openssl(&["crl", "-in", s(&root_crl), "-noout", "-text"]).stdout).into_owned();
    let listed = crl.to_ascii_lowercase();
    assert!(listed.contains(&format!("serial number: {serial}")), "{crl}");
    assert!(crl.contains("Key Compromise"), "{crl}");
    assert!(crl_number(&root_crl) > before, "the root CRL's number grows");
    let root = ca.ca_file("root_crt.pem");
    let plain = openssl(&["verify", "-CAfile", s(&root), s(&ca.cert("c1"))]);
    assert!(plain.status.success(), "without the CRL it verifies: {}", text(&plain));
    let checked = openssl(&["verify", "-crl_check", "-CAfile", s(&root), "-CRLfile", s(&root_crl), s(&ca.cert("c1"))]);
    assert!(!checked.status.success() && text(&checked).contains("certificate revoked"), "{}", text(&checked));

    // The node vouched for before stays valid (not revoked by the command), and is listed.
    let chain = ca.work.join("chain.pem");
    std::fs::write(&chain, std::fs::read_to_string(ca.ca_file("ca_bundle.pem")).unwrap()).unwrap();
    let v = openssl(&[
        "verify",
        "-crl_check_all",
        "-CAfile",
        s(&chain),
        "-CRLfile",
        s(&ca.ca_file("ca_crl.pem")),
        "-CRLfile",
        s(&root_crl),
        s(&n1.with_extension("pem")),
    ]);
    assert!(v.status.success(), "{}", text(&v));
    ok(&ca.vouch(&["enc", "n1.example.test"]));
    let colons = fp.as_bytes().chunks(2).map(|c| std::str::from_utf8(c).unwrap().to_uppercase()).collect::<Vec<_>>();
    let list = ok(&ca.vouch(&["list", "--all", "--conductor", &colons.join(":"), "--format", "jsonl"]));
    let names: Vec<String> = list
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["n1.example.test"], "c1's node only, not c2's: {list}");
    let audit = std::fs::read_to_string(ca.dir.join("audit.log")).unwrap();
    let line = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["event"] == "root-revoked")
        .unwrap_or_else(|| panic!("no root-revoked line: {audit}"));
    assert_eq!((line["serial"].as_str(), line["reason"].as_str()), (Some(serial.as_str()), Some("keyCompromise")));
    assert_eq!(line["fingerprint"].as_str(), Some(fp.as_str()), "{line}");
}

/// Revoking a revoked conductor again, by its certificate or by its serial in any form
/// openssl prints, changes nothing and exits 0 with a note; a serial alone is known by the
/// line `vouch conductor new` recorded in `root_issued.txt`.
#[test]
fn revoking_a_conductor_twice_changes_nothing() {
    let ca = Ca::new();
    ok(&ca.sign(&ca.csr("c1", "n1.example.test")));
    let (serial, fp) = serial_and_fingerprint(&ca.cert("c1"));
    let openssl_serial =
        String::from_utf8_lossy(&openssl(&["x509", "-in", s(&ca.cert("c1")), "-noout", "-serial"]).stdout)
            .trim()
            .to_string();
    assert!(openssl_serial.starts_with("serial="), "{openssl_serial}");
    let out =
        ok(&ca.vouch(&["conductor", "revoke", "--serial", &openssl_serial, "--reason", "cessation-of-operation"]));
    assert!(out.contains(&format!("revoked conductor CN=c1 (serial {serial}, cessationOfOperation)")), "{out}");
    assert!(out.contains(&format!("list --all --conductor {fp}")), "{out}");
    let (list, crl) = (ca.ca_file("root_revocations.txt"), ca.ca_file("root_crl.pem"));
    let (list_before, crl_before) = (std::fs::read(&list).unwrap(), std::fs::read(&crl).unwrap());
    assert_eq!(String::from_utf8_lossy(&list_before).lines().count(), 1);
    assert!(String::from_utf8_lossy(&list_before).contains(&format!("fingerprint={fp}")), "its SHA-256 is recorded");

    let colons = serial.as_bytes().chunks(2).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(":");
    for again in [vec!["--cert", s(&ca.cert("c1"))], vec!["--serial", &colons, "--reason", "superseded"]] {
        let o = ca.vouch(&[&["conductor", "revoke"][..], &again].concat());
        let out = ok(&o);
        assert!(out.contains("was already revoked on the root CRL") && out.contains("cessationOfOperation"), "{out}");
        assert!(out.contains("nothing changed"), "{out}");
        assert_eq!(std::fs::read(&list).unwrap(), list_before, "recorded once");
        assert_eq!(std::fs::read(&crl).unwrap(), crl_before, "the root CRL is not written again");
    }
    let text = String::from_utf8_lossy(&openssl(&["crl", "-in", s(&crl), "-noout", "-text"]).stdout).into_owned();
    assert!(text.contains("Cessation Of Operation"), "{text}");
}

/// What is not this root's conductor is refused (exit 2, the reason and a hint), and nothing is
/// recorded: a conductor of another root of the same name (every `ca init` root is `CN=vouch
/// Root CA`: the signature tells them apart), a node's certificate, the master CA (by
/// certificate and by serial), and a certificate the root signed that is no conductor.
#[test]
fn what_is_not_this_roots_conductor_is_refused_and_nothing_recorded() {
    let ca = Ca::new();
    let other = Ca::new();
    let refused = |args: &[&str], says: &str| {
        let o = ca.vouch(&[&["conductor", "revoke"][..], args].concat());
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(stderr(&o).contains(says) && stderr(&o).contains("hint:"), "{says}: {}", text(&o));
        assert!(!ca.ca_file("root_revocations.txt").exists(), "{says}: nothing recorded");
    };
    refused(
        &["--cert", s(&other.cert("c1"))],
        "did not issue it: its signature does not verify with the key of CN=vouch Root CA",
    );
    let node = ca.csr("c1", "n1.example.test");
    ok(&ca.sign(&node));
    refused(&["--cert", s(&node.with_extension("pem"))], "this CA's master CA issued it, not the root");
    refused(&["--cert", s(&ca.ca_file("ca_crt.pem"))], "is this master CA");
    let (master_serial, _) = serial_and_fingerprint(&ca.ca_file("ca_crt.pem"));
    refused(&["--serial", &master_serial], "is this master CA");
    refused(&["--cert", s(&ca.ca_file("root_crt.pem"))], "is the root CA itself");
    refused(&["--cert", s(&ca.cert("c1")), "--serial", "01"], "is not the serial of");

    // Signed by the root, but no conductor (no EKU .2.0).
    let root_pem = std::fs::read_to_string(ca.ca_file("root_crt.pem")).unwrap();
    let root_key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(ca.ca_file("root_key.pem")).unwrap()).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&root_pem, &root_key).unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["plain.example.test".to_string()]).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, "plain");
    let plain = p.signed_by(&rcgen::KeyPair::generate().unwrap(), &issuer).unwrap();
    let plain_path = ca.work.join("plain.pem");
    std::fs::write(&plain_path, plain.pem()).unwrap();
    refused(&["--cert", s(&plain_path)], "is not a conductor's");
}

/// A further master CA (`ca init --root-cert --root-key`) has no root key: the command there
/// says where to run it and what to copy. Revoked where the key is, the conductor is refused
/// by the further master once the new root CRL is copied to its `DIR/ca/`, as the
/// documentation says, with no policy change there either.
#[test]
fn a_master_without_the_root_key_refuses_the_conductor_once_the_root_crl_is_copied() {
    let ca = Ca::new();
    let d2 = ca.work.join("d2");
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let at_d2 = |args: &[&str]| run(vouch().arg("--dir").arg(&d2).args(args), None);
    let o = at_d2(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("the root CA's key is not in") && stderr(&o).contains("root_crl.pem"), "{}", text(&o));
    assert!(!d2.join("ca/root_revocations.txt").exists());

    ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    let csr = ca.csr("c1", "n9.example.test");
    std::fs::copy(ca.ca_file("root_crl.pem"), d2.join("ca/root_crl.pem")).unwrap();
    refused_with(&at_d2(&["sign", "--csr", s(&csr)]), "conductor-revoked");
    // A conductor it does not list is still granted there.
    ok(&at_d2(&["sign", "--csr", s(&ca.csr("c2", "n8.example.test"))]));
}

/// The root CRL counts only as its root's: a file in its place listing the conductor's
/// serial but signed by another key (another root of the same name) revokes nothing.
#[test]
fn a_root_crl_the_root_did_not_sign_revokes_nothing() {
    let ca = Ca::new();
    let (serial, _) = serial_and_fingerprint(&ca.cert("c1"));
    let ours = std::fs::read_to_string(ca.ca_file("root_crt.pem")).unwrap();
    let rogue_key = rcgen::KeyPair::generate().unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ours, &rogue_key).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let octets: Vec<u8> =
        (0..serial.len()).step_by(2).map(|i| u8::from_str_radix(&serial[i..i + 2], 16).unwrap()).collect();
    let forged = rcgen::CertificateRevocationListParams {
        this_update: now,
        next_update: now + time::Duration::days(7),
        crl_number: rcgen::SerialNumber::from_slice(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        issuing_distribution_point: None,
        revoked_certs: vec![rcgen::RevokedCertParams {
            serial_number: rcgen::SerialNumber::from_slice(&octets),
            revocation_time: now,
            reason_code: Some(rcgen::RevocationReason::KeyCompromise),
            invalidity_date: None,
        }],
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&issuer)
    .unwrap();
    std::fs::write(ca.ca_file("root_crl.pem"), forged.pem().unwrap()).unwrap();
    let listed = openssl(&["crl", "-in", s(&ca.ca_file("root_crl.pem")), "-noout", "-text"]);
    assert!(String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase().contains(&serial), "{}", text(&listed));
    ok(&ca.sign(&ca.csr("c1", "n1.example.test")));
}

/// A stranger's report: on a further master (`ca init --root-cert --root-key`, no root key),
/// the master CA's `ca_crl.pem` copied over `ca/root_crl.pem` by mistake read as a root CRL
/// that lists nothing, and the revoked conductor was granted with no warning. A root CRL the
/// root did not sign now counts as one that does not read: every conductor of this root is
/// refused, saying why and what to copy, and `vouch store verify` names it
/// (`root-crl-unreadable`). Where the root key is, the next command writes the root's own.
#[test]
fn a_master_cas_crl_copied_as_the_root_crl_refuses_this_roots_conductors() {
    let ca = Ca::new();
    let d2 = ca.work.join("d2");
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let at_d2 = |args: &[&str]| run(vouch().arg("--dir").arg(&d2).args(args), None);
    ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    // The master CA's CRL (any command that touches the store writes it).
    ok(&ca.vouch(&["list"]));
    std::fs::copy(ca.ca_file("ca_crl.pem"), d2.join("ca/root_crl.pem")).unwrap();
    let n1 = ca.csr("c1", "n1.example.test");
    let o = at_d2(&["check", "--csr", s(&n1)]);
    refused_with(&o, "conductor-revocation-unknown");
    assert!(text(&o).contains("is not signed by this data directory's root"), "{}", text(&o));
    assert!(text(&o).contains("copy the root's own ROOT_DIR/ca/root_crl.pem"), "{}", text(&o));
    assert!(stderr(&o).contains("root-crl-unreadable"), "{}", text(&o));
    refused_with(&at_d2(&["sign", "--csr", s(&n1)]), "conductor-revocation-unknown");
    // Another conductor of the root: nobody can tell either.
    let n2 = ca.csr("c2", "n2.example.test");
    refused_with(&at_d2(&["check", "--csr", s(&n2)]), "conductor-revocation-unknown");
    let o = at_d2(&["store", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("root-crl-unreadable") && text(&o).contains("not signed by"), "{}", text(&o));
    let o = at_d2(&["store", "verify", "--format", "jsonl"]);
    assert!(text(&o).contains("\"finding\":\"root-crl-unreadable\""), "{}", text(&o));
    // The root's own copied there: the revoked one refused as such, the other granted.
    std::fs::copy(ca.ca_file("root_crl.pem"), d2.join("ca/root_crl.pem")).unwrap();
    refused_with(&at_d2(&["check", "--csr", s(&n1)]), "conductor-revoked");
    ok(&at_d2(&["check", "--csr", s(&n2)]));
    ok(&at_d2(&["store", "verify"]));

    // Where the root key is: refused until a command that touches the store writes it again.
    std::fs::copy(ca.ca_file("ca_crl.pem"), ca.ca_file("root_crl.pem")).unwrap();
    refused_with(&ca.vouch(&["check", "--csr", s(&n2)]), "conductor-revocation-unknown");
    ok(&ca.vouch(&["list"]));
    let o = openssl(&["crl", "-in", s(&ca.ca_file("root_crl.pem")), "-CAfile", s(&root), "-noout"]);
    assert!(o.status.success() && text(&o).contains("verify OK"), "{}", text(&o));
    refused_with(&ca.vouch(&["check", "--csr", s(&n1)]), "conductor-revoked");
    ok(&ca.vouch(&["check", "--csr", s(&n2)]));
}

/// Killed after the revocation is recorded and before the root CRL is written: the next
/// command that writes CRLs writes it (the list is longer than the CRL covers), and the
/// command run again says it was revoked. A root CRL damaged later is written again too.
#[test]
fn a_root_revocation_recorded_before_a_crash_reaches_the_crl_at_the_next_command() {
    let ca = Ca::new();
    let (serial, _) = serial_and_fingerprint(&ca.cert("c1"));
    ok(&ca.vouch(&["list"]));
    let crl = ca.ca_file("root_crl.pem");
    let before = std::fs::read(&crl).unwrap();
    let o = run(
        vouch()
            .arg("--dir")
            .arg(&ca.dir)
            .args(["conductor", "revoke", "--cert", s(&ca.cert("c1"))])
            .env("VOUCH_TEST_ABORT_AT", "conductor-revoke:recorded"),
        None,
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(std::fs::read_to_string(ca.ca_file("root_revocations.txt")).unwrap().starts_with(&serial));
    assert_eq!(std::fs::read(&crl).unwrap(), before, "killed before the CRL");
    ok(&ca.vouch(&["list"]));
    let listed = openssl(&["crl", "-in", s(&crl), "-noout", "-text"]);
    assert!(String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase().contains(&serial), "{}", text(&listed));
    refused_with(&ca.sign(&ca.csr("c1", "n1.example.test")), "conductor-revoked");
    let again = ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    assert!(again.contains("was already revoked"), "{again}");
    // A root CRL damaged since (cut short) is written again by the next command, whole.
    let whole = std::fs::read(&crl).unwrap();
    std::fs::write(&crl, &whole[..whole.len() / 2]).unwrap();
    let o = ca.vouch(&["list"]);
    ok(&o);
    let listed = openssl(&["crl", "-in", s(&crl), "-noout", "-text"]);
    assert!(String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase().contains(&serial), "{}", text(&listed));
}

/// A root CRL that cannot be written after the revocation is recorded: exit 3, the message
/// says the conductor IS revoked; once the cause is gone, the same command again writes the
/// CRL and records nothing twice.
#[test]
fn a_root_crl_that_cannot_be_written_exits_3_and_the_same_command_finishes_it() {
    let ca = Ca::new();
    let (serial, _) = serial_and_fingerprint(&ca.cert("c1"));
    // The root CRL's counter is a directory: the CRL's files cannot be replaced.
    let number = ca.ca_file("root_crl_number");
    std::fs::create_dir(&number).unwrap();
    let o = ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(stderr(&o).contains(&format!("serial {serial} IS revoked")), "{}", text(&o));
    assert!(!ca.ca_file("root_crl.pem").exists(), "no root CRL was written");
    assert_eq!(std::fs::read_to_string(ca.ca_file("root_revocations.txt")).unwrap().lines().count(), 1, "recorded");
    std::fs::remove_dir(&number).unwrap();
    let again = ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    assert!(again.contains("was already revoked"), "{again}");
    let listed = openssl(&["crl", "-in", s(&ca.ca_file("root_crl.pem")), "-noout", "-text"]);
    assert!(String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase().contains(&serial), "{}", text(&listed));
    assert_eq!(std::fs::read_to_string(ca.ca_file("root_revocations.txt")).unwrap().lines().count(), 1);
}

/// A running `vouch serve`, whose store the revocation is made beside: the next request
/// vouched for by the revoked conductor is refused (kept pending with `conductor-revoked`) and
/// the node it vouched for before cannot renew itself over the API, without a restart or a
/// SIGHUP after the revocation. Every wait has a deadline; the server is stopped by PID.
#[test]
fn a_running_server_refuses_a_conductor_revoked_beside_it_without_a_restart() {
    use vouch::serve::client::{tls_config, Client};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("vouch");
    // The CA first, its policy letting a node renew at once; `vouch serve` makes the rest.
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    let policy = dir.join("policy.toml");
    let text0 = std::fs::read_to_string(&policy).unwrap();
    assert!(text0.contains("renewal_min_age = \"1h\""), "{text0}");
    std::fs::write(&policy, text0.replace("renewal_min_age = \"1h\"", "renewal_min_age = \"0s\"")).unwrap();
    std::fs::create_dir_all(dir.join("conductor")).unwrap();
    let (cert, key) = (dir.join("conductor/conductor_crt.pem"), dir.join("conductor/conductor_key.pem"));
    ok(&run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "fleet", "--cert-out", s(&cert), "--key-out", s(&key)]),
        None,
    ));

    let log = t.path().join("serve.log");
    let child = spawn_serve(&mut serve_cmd(&dir), &log);
    let mut server = Guard { child, what: "vouch serve", grace: Duration::from_secs(10) };
    // A deadline for the whole test: a server that hangs is killed, and the test fails.
    let watchdog = Watchdog::kill_after(server.pid(), "vouch serve", Duration::from_secs(120));
    let (_, port) = serve_ready(&mut server.child, &log);
    let bundle = std::fs::read(dir.join("ca/ca_bundle.pem")).unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let client = |id: Option<(&[u8], &[u8])>| Client::new(tls_config(&bundle, id).unwrap(), addr, "localhost").unwrap();
    let put = |name: &str, csr: &[u8]| {
        client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, csr).unwrap()
    };
    let get =
        |name: &str| client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
    let classification = "classes:\n  - role::web\n";

    // Before: a node vouched for by the conductor gets its certificate.
    let n1_key = agents::p256();
    let r = put(
        "n1.example.test",
        &agents::csr_for("n1.example.test", &agents::vouched(&dir, "n1.example.test", classification), &n1_key),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n1_cert = get("n1.example.test");
    assert_eq!(n1_cert.status, 200, "{}", n1_cert.text());

    let out = ok(&run(vouch().args(["--dir", s(&dir), "conductor", "revoke", "--cert", s(&cert)]), None));
    assert!(out.contains("revoked conductor CN=fleet"), "{out}");

    // After, with no restart (the renewal first: it must look at the root CRL itself): the
    // node vouched for before cannot renew itself (403), its certificate unchanged.
    let key_pem = n1_key.serialize_pem();
    let mut node = client(Some((&n1_cert.body, key_pem.as_bytes())));
    let r = node.request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("the conductor that vouched for it is no longer accepted"), "{}", r.text());
    assert_eq!(get("n1.example.test").body, n1_cert.body, "not renewed");
    // And a new node is refused, kept pending with the reason.
    let n2 = "n2.example.test";
    let r = put(n2, &agents::csr_for(n2, &agents::vouched(&dir, n2, classification), &agents::p256()));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(n2).status, 404, "no certificate for a node the revoked conductor vouched for");
    let listed = ok(&run(vouch().args(["--dir", s(&dir), "list", "--format", "json"]), None));
    let entries: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let entry = entries.iter().find(|e| e["name"] == n2).unwrap_or_else(|| panic!("{n2} not pending: {listed}"));
    assert!(entry["reasons"].to_string().contains("conductor-revoked"), "{entry}");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("conductor-revoked"), "the refusals are logged: {log_text}");
    assert!(!log_text.contains("\"reload\""), "no reload happened: {log_text}");

    drop(watchdog);
    drop(server);
}

/// Review: deny by default. A root CRL that is there but does not read (cut short by a copy
/// that did not finish, a link to the copy, a FIFO, a directory) used to be a warning and
/// nothing more: a process that had read no CRL before (the hook, `vouch check`, every
/// command, a `vouch serve` started then) counted no revocation at all, and granted what the
/// revoked conductor vouched for. Now every conductor of this root is refused while it does
/// not read (`conductor-revocation-unknown`), a link is followed (as the served CRL is), and
/// once a good copy is in place the revoked one is refused and the others granted.
#[test]
fn a_root_crl_that_does_not_read_refuses_this_roots_conductors() {
    let ca = Ca::new();
    ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c1"))]));
    let crl = ca.ca_file("root_crl.pem");
    let good = std::fs::read(&crl).unwrap();
    let hook = |dir: &Path, csr: &Path, certname: &str| {
        run(vouch().arg("--dir").arg(dir).args(["autosign", certname]), Some(&std::fs::read(csr).unwrap()))
    };

    // Where the root key is: the hook and `vouch check` (no maintenance writes it again there).
    // The revoked one is refused as such (its revocation is recorded beside the CRL), the
    // other one because nobody can tell.
    let n1 = ca.csr("c1", "n1.example.test");
    std::fs::write(&crl, &good[..good.len() / 2]).unwrap();
    refused_with(&hook(&ca.dir, &n1, "n1.example.test"), "conductor-revoked");
    let n3 = ca.csr("c2", "n3.example.test");
    refused_with(&hook(&ca.dir, &n3, "n3.example.test"), "conductor-revocation-unknown");
    refused_with(&ca.vouch(&["check", "--csr", s(&n3)]), "conductor-revocation-unknown");
    // A command that maintains the store writes it again: the revoked one refused as such.
    ok(&ca.vouch(&["list"]));
    refused_with(&hook(&ca.dir, &n1, "n1.example.test"), "conductor-revoked");
    let o = hook(&ca.dir, &n3, "n3.example.test");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // A master without the root key, whose copy is cut short, then a link, then not a file.
    let d2 = ca.work.join("d2");
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let at_d2 = |args: &[&str]| run(vouch().arg("--dir").arg(&d2).args(args), None);
    let d2_crl = d2.join("ca/root_crl.pem");
    std::fs::write(&d2_crl, &good[..good.len() - 40]).unwrap();
    let n4 = ca.csr("c1", "n4.example.test");
    let o = at_d2(&["sign", "--csr", s(&n4)]);
    refused_with(&o, "conductor-revocation-unknown");
    assert!(stderr(&o).contains("root-crl-unreadable"), "{}", text(&o));
    std::fs::remove_file(&d2_crl).unwrap();
    let copy = ca.work.join("shared-root-crl.pem");
    std::fs::write(&copy, &good).unwrap();
    std::os::unix::fs::symlink(&copy, &d2_crl).unwrap();
    refused_with(&at_d2(&["sign", "--csr", s(&n4)]), "conductor-revoked");
    std::fs::remove_file(&d2_crl).unwrap();
    std::fs::create_dir(&d2_crl).unwrap();
    refused_with(&at_d2(&["sign", "--csr", s(&n4)]), "conductor-revocation-unknown");
    std::fs::remove_dir(&d2_crl).unwrap();
    // Huge (sparse): refused after 16 MiB are read, not read whole (6 GB: 6 GB of memory).
    std::fs::File::create(&d2_crl).unwrap().set_len(1 << 30).unwrap();
    let o = at_d2(&["sign", "--csr", s(&n4)]);
    refused_with(&o, "conductor-revocation-unknown");
    assert!(stderr(&o).contains("larger than 16777216 bytes"), "{}", text(&o));
    std::fs::remove_file(&d2_crl).unwrap();
    std::fs::write(&d2_crl, &good).unwrap();
    refused_with(&at_d2(&["sign", "--csr", s(&n4)]), "conductor-revoked");
    ok(&at_d2(&["sign", "--csr", s(&ca.csr("c2", "n5.example.test"))]));
}

/// Review: a root revocation recorded (`root_revocations.txt`) whose root CRL was not written
/// (killed between the two; exit 3, which says the conductor IS revoked; the CRL removed since)
/// used to count nowhere until a command wrote the CRL: the hook, `vouch check` and a running
/// `vouch serve` whose maintenance could not write it granted the conductor. The decision now
/// counts the recorded revocations themselves where they are.
#[test]
fn a_recorded_root_revocation_counts_before_its_root_crl_lists_it() {
    let ca = Ca::new();
    let hook = |csr: &Path, certname: &str| {
        run(vouch().arg("--dir").arg(&ca.dir).args(["autosign", certname]), Some(&std::fs::read(csr).unwrap()))
    };
    // Killed after the record, before the CRL.
    let o = run(
        vouch()
            .arg("--dir")
            .arg(&ca.dir)
            .args(["conductor", "revoke", "--cert", s(&ca.cert("c1"))])
            .env("VOUCH_TEST_ABORT_AT", "conductor-revoke:recorded"),
        None,
    );
    assert!(!o.status.success(), "{}", text(&o));
    let n1 = ca.csr("c1", "n1.example.test");
    refused_with(&hook(&n1, "n1.example.test"), "conductor-revoked");
    refused_with(&ca.vouch(&["check", "--csr", s(&n1)]), "conductor-revoked");

    // Exit 3: the root CRL cannot be written after the record.
    let number = ca.ca_file("root_crl_number");
    if number.exists() {
        std::fs::remove_file(&number).unwrap();
    }
    std::fs::create_dir(&number).unwrap();
    let o = ca.vouch(&["conductor", "revoke", "--cert", s(&ca.cert("c2"))]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let n2 = ca.csr("c2", "n2.example.test");
    refused_with(&hook(&n2, "n2.example.test"), "conductor-revoked");
    // Nor does a root CRL removed since (where the revocations are recorded) grant it.
    let _ = std::fs::remove_file(ca.ca_file("root_crl.pem"));
    refused_with(&hook(&n2, "n2.example.test"), "conductor-revoked");
    refused_with(&ca.vouch(&["check", "--csr", s(&n2)]), "conductor-revoked");
}

/// Review: `--serial` alone with a node's serial (copied from the wrong certificate, or to
/// revoke a compromised node) used to be recorded on the root CRL, exit 0, "revoked … this CA
/// refuses what it vouches for from now on" and "This data directory holds no certificate with
/// serial …", while the node's certificate stayed valid. A serial this CA's store holds is
/// refused (exit 2, naming the certname and `vouch revoke --serial`), and nothing is recorded.
#[test]
fn a_serial_of_this_cas_store_is_refused_by_conductor_revoke() {
    let ca = Ca::new();
    let node = ca.csr("c1", "n1.example.test");
    ok(&ca.sign(&node));
    let openssl_serial =
        String::from_utf8_lossy(&openssl(&["x509", "-in", s(&node.with_extension("pem")), "-noout", "-serial"]).stdout)
            .trim()
            .to_string();
    let o = ca.vouch(&["conductor", "revoke", "--serial", &openssl_serial]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("is the certificate of n1.example.test"), "{}", text(&o));
    assert!(stderr(&o).contains("vouch revoke --serial"), "{}", text(&o));
    assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded");
    // The node is untouched, and a conductor's serial is still revoked as given.
    let list = ok(&ca.vouch(&["list", "--all"]));
    assert!(list.contains("n1.example.test") && !list.contains("Revoked Certificates:\n    n1"), "{list}");
    // Its record lost too (checkpointed first): the inventory still names it.
    ok(&ca.vouch(&["crl"]));
    let hex = openssl_serial.trim_start_matches("serial=").to_ascii_lowercase();
    for shard in std::fs::read_dir(ca.ca_file("serials")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.file_stem().unwrap().to_str().unwrap().trim_start_matches("00") == hex {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
    let o = ca.vouch(&["conductor", "revoke", "--serial", &openssl_serial]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("is the certificate of n1.example.test"), "{}", text(&o));
    assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded");
    let (serial, _) = serial_and_fingerprint(&ca.cert("c2"));
    ok(&ca.vouch(&["conductor", "revoke", "--serial", &serial]));
}

/// Review: a request decided before the revocation and stored after it. `vouch sign` (and
/// `vouch serve`'s PUT) decide without the store's lock and store under it; a revocation
/// completed while the request waited for the lock used to be missed, and the certificate was
/// issued after `vouch conductor revoke` had said "this CA refuses what it vouches for from
/// now on". The test holds the lock, lets `vouch sign` decide and wait for it, then puts in
/// place exactly what `vouch conductor revoke` writes (made in a copy of the data directory:
/// same root, same key), and releases the lock: the request is refused under the lock.
#[test]
fn a_request_decided_before_a_revocation_is_not_issued_after_it() {
    let ca = Ca::new();
    ok(&ca.vouch(&["list"]));
    let copy = ca.work.join("copy");
    let cp = Command::new("cp").arg("-a").arg(&ca.dir).arg(&copy).status().unwrap();
    assert!(cp.success());
    ok(&run(vouch().arg("--dir").arg(&copy).args(["conductor", "revoke", "--cert", s(&ca.cert("c1"))]), None));
    let n1 = ca.csr("c1", "n1.example.test");

    let lock_path = ca.ca_file(".lock");
    let held = std::fs::OpenOptions::new().read(true).write(true).open(&lock_path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let mut child = vouch()
        .arg("--dir")
        .arg(&ca.dir)
        .args(["sign", "--csr", s(&n1), "--out", s(&n1.with_extension("pem"))])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = StderrLines::follow(&mut child);
    // A deadline for a test that would otherwise hang, not a timing assertion.
    let lock = "waiting for the store's lock";
    stderr.wait_for(&mut child, lock, Duration::from_secs(120), "vouch sign never waited for the lock");
    // What `vouch conductor revoke` writes, each file replaced by rename as vouch does.
    for f in ["root_revocations.txt", "root_crl.pem", "root_crl_number", "root_crl_revocations_size"] {
        let tmp = ca.ca_file(&format!("{f}.new"));
        std::fs::copy(copy.join("ca").join(f), &tmp).unwrap();
        std::fs::rename(&tmp, ca.ca_file(f)).unwrap();
    }
    drop(held);
    let status = wait_within(&mut child, Duration::from_secs(120), "vouch sign");
    let all = stderr.all().join("\n");
    assert_eq!(status.code(), Some(1), "issued after the revocation: {all}");
    assert!(all.contains("[conductor-revoked]"), "{all}");
    assert!(!n1.with_extension("pem").exists());
    let list = ok(&ca.vouch(&["list", "--all"]));
    assert!(list.contains("Signed Certificates:\n    (none)"), "{list}");
}

/// Review: a conductor the root signed with a negative serial (`openssl x509 -set_serial
/// -1234`, the operator's own tooling) was accepted; `vouch conductor revoke --cert` said it
/// revoked it, but the root CRL can only list the positive number with the same octets
/// (0xFB2E, not -1234): a master without the root key holding that CRL, and openssl, still
/// took the conductor as unrevoked. A conductor whose serial no CRL can list is refused
/// (`conductor-malformed`).
#[test]
fn a_conductor_whose_serial_no_crl_can_list_is_refused() {
    let ca = Ca::new();
    let w = &ca.work;
    let key = w.join("neg.key");
    let csr = w.join("neg.csr");
    let ext = w.join("ext.cnf");
    let cert = w.join("neg.pem");
    ok(&openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", s(&key)]));
    ok(&openssl(&["req", "-new", "-key", s(&key), "-subj", "/CN=neg", "-out", s(&csr)]));
    std::fs::write(
        &ext,
        "extendedKeyUsage=1.3.6.1.4.1.34380.2.0\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    ok(&openssl(&[
        "x509",
        "-req",
        "-in",
        s(&csr),
        "-CA",
        s(&ca.ca_file("root_crt.pem")),
        "-CAkey",
        s(&ca.ca_file("root_key.pem")),
        "-set_serial",
        "-1234",
        "-days",
        "30",
        "-extfile",
        s(&ext),
        "-out",
        s(&cert),
    ]));
    let node = cli_vouched_csr(w, &cert, &key, "q.example.test");
    ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&cert)]));
    // A master without the root key, holding the new root CRL.
    let d2 = w.join("d2");
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    std::fs::copy(ca.ca_file("root_crl.pem"), d2.join("ca/root_crl.pem")).unwrap();
    let o = run(vouch().arg("--dir").arg(&d2).args(["sign", "--csr", s(&node)]), None);
    refused_with(&o, "conductor-malformed");
    assert!(stderr(&o).contains("serial number is negative"), "{}", text(&o));
}

/// Review: `vouch --dir D1 conductor revoke --serial S`, S the serial of another master CA under
/// the same root (D2, made with `ca init --root-cert --root-key`, its own store), used to exit 0
/// and put S on the root CRL: once that CRL was copied to D2, as the documentation says, every
/// node certificate of D2 failed `openssl verify -crl_check_all`. D1 cannot tell from a serial
/// alone; now the root's issuance is recorded (`ca/root_issued.txt`): D2's master, made with D1's
/// own root key file, is recorded there as a CA and refused; a master made with a copy of the
/// key kept elsewhere is unknown to D1 and refused too. Nothing is recorded, the root CRL is
/// unchanged, and D2's node still verifies against it.
#[test]
fn a_master_ca_of_the_same_root_is_not_revoked_by_its_serial() {
    let ca = Ca::new();
    ok(&ca.vouch(&["list"]));
    let root_crl = ca.ca_file("root_crl.pem");
    let crl_before = std::fs::read(&root_crl).unwrap();
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    let d2 = ca.work.join("d2");
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let at_d2 = |args: &[&str]| run(vouch().arg("--dir").arg(&d2).args(args), None);
    let node = ca.csr("c2", "n1.example.test");
    ok(&at_d2(&["sign", "--csr", s(&node), "--out", s(&node.with_extension("pem"))]));
    let issued = std::fs::read_to_string(ca.ca_file("root_issued.txt")).unwrap();
    let (own_master, _) = serial_and_fingerprint(&ca.ca_file("ca_crt.pem"));
    let (d2_master, d2_fp) = serial_and_fingerprint(&d2.join("ca/ca_crt.pem"));
    assert!(issued.lines().any(|l| l.starts_with(&format!("{own_master} ")) && l.contains(" ca ")), "{issued}");
    let line = issued.lines().find(|l| l.starts_with(&format!("{d2_master} "))).unwrap_or_else(|| panic!("{issued}"));
    assert!(line.contains(" ca ") && line.contains(&d2_fp) && line.contains("CN=vouch Master CA "), "{line}");

    let refused = |serial: &str, says: &str| {
        let o = ca.vouch(&["conductor", "revoke", "--serial", serial]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(stderr(&o).contains(says) && stderr(&o).contains("hint:"), "{says}: {}", text(&o));
        assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded: {}", text(&o));
        assert_eq!(std::fs::read(&root_crl).unwrap(), crl_before, "the root CRL is unchanged");
    };
    // By serial in openssl's form, and the value alone.
    refused(&openssl_serial(&d2.join("ca/ca_crt.pem")), "root_issued.txt records it");
    refused(&d2_master, "is the master CA CN=vouch Master CA ");
    // By certificate: a CA, refused as before.
    let o = ca.vouch(&["conductor", "revoke", "--cert", s(&d2.join("ca/ca_crt.pem"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("a CA certificate under the root"), "{}", text(&o));

    // A master made with a copy of the root key kept elsewhere: nothing in D1 names it.
    let keys = ca.work.join("keys");
    std::fs::create_dir(&keys).unwrap();
    let copied_key = keys.join("root_key.pem");
    std::fs::copy(&root_key, &copied_key).unwrap();
    let d3 = ca.work.join("d3");
    ok(&run(
        vouch().args(["--dir", s(&d3), "ca", "init", "--root-cert", s(&root), "--root-key", s(&copied_key)]),
        None,
    ));
    let (d3_master, _) = serial_and_fingerprint(&d3.join("ca/ca_crt.pem"));
    assert!(!std::fs::read_to_string(ca.ca_file("root_issued.txt")).unwrap().contains(&d3_master));
    refused(&d3_master, "is not a conductor this data directory knows");
    let o = ca.vouch(&["conductor", "revoke", "--serial", &d3_master]);
    assert!(stderr(&o).contains("give the conductor's certificate with --cert FILE"), "{}", text(&o));

    // D2 holding D1's root CRL: its node verifies with the whole chain checked, and it still
    // grants what the root's conductors vouch for.
    std::fs::copy(&root_crl, d2.join("ca/root_crl.pem")).unwrap();
    let v = openssl(&[
        "verify",
        "-crl_check_all",
        "-CAfile",
        s(&d2.join("ca/ca_bundle.pem")),
        "-CRLfile",
        s(&d2.join("ca/ca_crl.pem")),
        "-CRLfile",
        s(&d2.join("ca/root_crl.pem")),
        s(&node.with_extension("pem")),
    ]);
    assert!(v.status.success(), "{}", text(&v));
    ok(&at_d2(&["sign", "--csr", s(&ca.csr("c1", "n2.example.test"))]));
}

/// A serial nothing in the data directory names (not in `root_issued.txt`, no node's record,
/// not the service's conductor) is refused with its own error and a hint to give the
/// certificate; nothing is recorded and no root CRL is written.
#[test]
fn an_unknown_serial_is_refused_by_conductor_revoke() {
    let ca = Ca::new();
    for serial in ["0102", "serial=5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A", "00:ff:01"] {
        let o = ca.vouch(&["conductor", "revoke", "--serial", serial]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(stderr(&o).contains("is not a conductor this data directory knows"), "{}", text(&o));
        assert!(stderr(&o).contains("root_issued.txt records no conductor with it"), "{}", text(&o));
        assert!(stderr(&o).contains("hint: give the conductor's certificate with --cert FILE"), "{}", text(&o));
        assert!(stderr(&o).contains("not a CA"), "{}", text(&o));
        assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded");
        assert!(!ca.ca_file("root_crl.pem").exists(), "no root CRL written");
    }
}

/// A conductor made by `vouch conductor new` is recorded in `root_issued.txt` before its
/// certificate is written (killed between the two: the line is there, no certificate): its
/// certificate file lost, its serial alone revokes it, and what it vouches for is refused.
#[test]
fn a_conductor_whose_certificate_is_lost_is_revoked_by_its_serial() {
    let ca = Ca::new();
    let (serial, fp) = serial_and_fingerprint(&ca.cert("c1"));
    let issued = std::fs::read_to_string(ca.ca_file("root_issued.txt")).unwrap();
    let line = issued.lines().find(|l| l.starts_with(&format!("{serial} "))).unwrap_or_else(|| panic!("{issued}"));
    assert!(line.contains(" conductor ") && line.contains(&fp) && line.ends_with(" CN=c1"), "{line}");
    let csr = ca.csr("c1", "n1.example.test");
    std::fs::remove_file(ca.cert("c1")).unwrap();

    let out = ok(&ca.vouch(&["conductor", "revoke", "--serial", &serial]));
    assert!(out.contains(&format!("revoked conductor CN=c1 (serial {serial}, keyCompromise)")), "{out}");
    let recorded = std::fs::read_to_string(ca.ca_file("root_revocations.txt")).unwrap();
    assert!(recorded.starts_with(&serial) && recorded.contains(&format!("fingerprint={fp}")), "{recorded}");
    let listed = openssl(&["crl", "-in", s(&ca.ca_file("root_crl.pem")), "-noout", "-text"]);
    assert!(String::from_utf8_lossy(&listed.stdout).to_ascii_lowercase().contains(&serial), "{}", text(&listed));
    refused_with(&ca.sign(&csr), "conductor-revoked");
    ok(&ca.sign(&ca.csr("c2", "n2.example.test")));

    // Killed after the line, before the certificate is written: the line is there.
    let before = std::fs::read_to_string(ca.ca_file("root_issued.txt")).unwrap().lines().count();
    let (cert, key) = (ca.cert("c3"), ca.key("c3"));
    let o = run(
        vouch()
            .arg("--dir")
            .arg(&ca.dir)
            .args(["conductor", "new", "c3", "--cert-out", s(&cert), "--key-out", s(&key)])
            .env("VOUCH_TEST_ABORT_AT", "root-issued:recorded"),
        None,
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!cert.exists(), "no certificate written");
    let after = std::fs::read_to_string(ca.ca_file("root_issued.txt")).unwrap();
    assert_eq!(after.lines().count(), before + 1, "{after}");
    assert!(after.trim_end().ends_with(" CN=c3") && after.contains(" conductor "), "{after}");
}

/// A conductor the root signed elsewhere (openssl, with the root key): `--cert` revokes it as
/// before (issued by this root, EKU .2.0, no CA). Its serial alone is refused until the
/// store's records name it: once it vouched for a node this CA issued, the serial alone
/// revokes it, named by those records.
#[test]
fn a_conductor_the_root_signed_elsewhere_is_revoked_with_its_certificate() {
    let ca = Ca::new();
    let (cert, _) = openssl_conductor(&ca, "ext1", "0x5a01020304050607");
    let (serial, fp) = serial_and_fingerprint(&cert);
    let o = ca.vouch(&["conductor", "revoke", "--serial", &serial]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("is not a conductor this data directory knows"), "{}", text(&o));
    assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded");
    let out = ok(&ca.vouch(&["conductor", "revoke", "--cert", s(&cert)]));
    assert!(out.contains(&format!("revoked conductor CN=ext1 (serial {serial}, keyCompromise)")), "{out}");
    let recorded = std::fs::read_to_string(ca.ca_file("root_revocations.txt")).unwrap();
    assert!(recorded.contains(&format!("fingerprint={fp}")), "{recorded}");
    refused_with(&ca.sign(&ca.csr("ext1", "n1.example.test")), "conductor-revoked");

    // Another one, which vouched for a node this CA issued: the node's record holds it.
    let (cert2, _) = openssl_conductor(&ca, "ext2", "0x5a0102030405060708");
    let (serial2, fp2) = serial_and_fingerprint(&cert2);
    ok(&ca.sign(&ca.csr("ext2", "n2.example.test")));
    let out = ok(&ca.vouch(&["conductor", "revoke", "--serial", &openssl_serial(&cert2)]));
    assert!(
        out.contains(&format!("revoked conductor CN=ext2, named by the store's records (serial {serial2}")),
        "{out}"
    );
    assert!(out.contains("1 current node certificate vouched for by it stays valid"), "{out}");
    assert!(out.contains(&format!("list --all --conductor {fp2}")), "{out}");
    refused_with(&ca.sign(&ca.csr("ext2", "n3.example.test")), "conductor-revoked");
}

/// `root_issued.txt` decides whether a serial alone is a conductor's or a master CA's: a list
/// another user may write (group or others) is not trusted, whatever it says. Here its line for
/// a further master, rewritten to claim a conductor, would have put that master CA (and every
/// node certificate under it) on the root CRL.
#[test]
fn a_root_issued_list_others_may_write_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::new();
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    let d2 = ca.work.join("d2");
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let (d2_master, _) = serial_and_fingerprint(&d2.join("ca/ca_crt.pem"));
    let list = ca.ca_file("root_issued.txt");
    let forged = std::fs::read_to_string(&list).unwrap().replace(
        &format!("{d2_master} "),
        &format!("{d2_master} 2030-01-01T00:00:00Z conductor {} CN=forged\nignored ", "ab".repeat(32)),
    );
    std::fs::write(&list, forged).unwrap();
    std::fs::set_permissions(&list, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = ca.vouch(&["conductor", "revoke", "--serial", &d2_master]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("root_issued.txt") && stderr(&o).contains("chmod go-w"), "{}", text(&o));
    assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded: {}", text(&o));
    // Nor does `conductor new` record in it.
    let o = ca.vouch(&["conductor", "new", "c3", "--cert-out", s(&ca.cert("c3")), "--key-out", s(&ca.key("c3"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!ca.cert("c3").exists(), "{}", text(&o));
    // Made private again, the list is read: what it says (here, the forged line) counts.
    std::fs::set_permissions(&list, std::fs::Permissions::from_mode(0o640)).unwrap();
    ok(&ca.vouch(&["conductor", "new", "c3", "--cert-out", s(&ca.cert("c3")), "--key-out", s(&ca.key("c3"))]));
}

/// A line of `root_issued.txt` changed by hand or cut short still names its serial: a tab where
/// a space was still reads (a master CA's line stays a CA's), and a line that does not read at
/// all but begins with the serial leaves it unidentified, whatever another line claims of it.
#[test]
fn a_damaged_line_of_root_issued_never_lets_a_master_ca_pass_for_a_conductor() {
    let ca = Ca::new();
    let (root, root_key) = (ca.ca_file("root_crt.pem"), ca.ca_file("root_key.pem"));
    let d2 = ca.work.join("d2");
    ok(&run(vouch().args(["--dir", s(&d2), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]), None));
    let (d2_master, _) = serial_and_fingerprint(&d2.join("ca/ca_crt.pem"));
    let list = ca.ca_file("root_issued.txt");
    let original = std::fs::read_to_string(&list).unwrap();
    let forged = format!("{} 2030-01-01T00:00:00Z conductor {} CN=forged\n", d2_master.to_uppercase(), "ab".repeat(32));
    let crl_before = std::fs::read(ca.ca_file("root_crl.pem")).ok();
    for (how, damaged) in [
        ("tabs and CRLF", original.replace(&format!("{d2_master} "), &format!("{d2_master}\t")).replace('\n', "\r\n")),
        ("cut short", original.replace(&format!("{d2_master} "), &format!("{d2_master} 2041-01-01T00:00:00Z\n#"))),
    ] {
        std::fs::write(&list, format!("{damaged}{forged}")).unwrap();
        let o = ca.vouch(&["conductor", "revoke", "--serial", &d2_master]);
        assert_eq!(o.status.code(), Some(2), "{how}: {}", text(&o));
        assert!(!ca.ca_file("root_revocations.txt").exists(), "{how}: nothing recorded: {}", text(&o));
        assert_eq!(std::fs::read(ca.ca_file("root_crl.pem")).ok(), crl_before, "{how}");
    }
    // The conductors the list names whole are still known by their serial.
    std::fs::write(&list, format!("{}{forged}", original.replace('\n', "\r\n").replace(' ', "\t"))).unwrap();
    let (c1, _) = serial_and_fingerprint(&ca.cert("c1"));
    let o = ca.vouch(&["conductor", "revoke", "--serial", &c1]);
    assert!(ok(&o).contains("revoked conductor CN=c1"), "{}", text(&o));
}

/// A stranger's report: `vouch revoke --serial S` for a conductor's serial said "this CA has no
/// record … one another CA issued is revoked by that CA", not naming the command that revokes
/// it. It now names `vouch conductor revoke --serial S`, for a conductor `root_issued.txt`
/// records and for the service's own conductor. And `vouch conductor revoke` given the
/// service's own TLS certificate or an administrator's (by serial or --cert) no longer invites
/// `vouch revoke --serial` without saying what that does to it (it revokes them: the service's
/// agents refuse it, the administrator is refused); nothing is revoked by either refusal.
#[test]
fn revoke_serial_of_a_conductor_names_conductor_revoke_and_service_or_admin_serials_say_what_revoking_does() {
    let ca = Ca::new();
    let (c1, _) = serial_and_fingerprint(&ca.cert("c1"));
    let o = ca.vouch(&["revoke", "--serial", &c1]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains(&format!("`vouch conductor revoke --serial {c1}` revokes it")), "{}", text(&o));
    assert!(stderr(&o).contains("root_issued.txt records it"), "{}", text(&o));
    assert!(!stderr(&o).contains("this CA has no record"), "{}", text(&o));
    // A serial nobody knows: as before.
    let o = ca.vouch(&["revoke", "--serial", "7a7a7a7a"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("this CA has no record"), "{}", text(&o));

    // An administrator's certificate, by serial and by --cert.
    let (adm, adm_key) = (ca.work.join("adm.pem"), ca.work.join("adm.key"));
    ok(&ca.vouch(&["admin", "new", "ops", "--cert-out", s(&adm), "--key-out", s(&adm_key)]));
    let (adm_serial, _) = serial_and_fingerprint(&adm);
    for args in [["--serial", adm_serial.as_str()], ["--cert", s(&adm)]] {
        let o = ca.vouch(&["conductor", "revoke", args[0], args[1]]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(stderr(&o).contains("It is an administrator's certificate"), "{}", text(&o));
        assert!(stderr(&o).contains("refuses it (403)"), "{}", text(&o));
    }

    // The service's own TLS certificate, made by `vouch serve`'s first run.
    let log = ca.work.join("serve.log");
    let child = spawn_serve(&mut serve_cmd(&ca.dir), &log);
    let mut server = Guard { child, what: "vouch serve", grace: Duration::from_secs(10) };
    let watchdog = Watchdog::kill_after(server.pid(), "vouch serve", Duration::from_secs(60));
    serve_ready(&mut server.child, &log);
    drop(watchdog);
    drop(server);
    let (service, _) = serial_and_fingerprint(&ca.dir.join("server/server_crt.pem"));
    for args in [["--serial", service.as_str()], ["--cert", s(&ca.dir.join("server/server_crt.pem"))]] {
        let o = ca.vouch(&["conductor", "revoke", args[0], args[1]]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(stderr(&o).contains("It is the service's own TLS certificate"), "{}", text(&o));
        assert!(stderr(&o).contains("refuse to connect to `vouch serve`"), "{}", text(&o));
    }
    assert!(!ca.ca_file("root_revocations.txt").exists(), "nothing recorded");
    let revoked = std::fs::read_to_string(ca.ca_file("revocations.txt")).unwrap_or_default();
    assert!(revoked.trim().is_empty(), "{revoked}");
}

/// A stranger's frictions: a private key given as the conductor's certificate says so; a
/// node revoked a second time does not repeat the note on what makes a revocation count (it
/// was said the first time, and nothing changed); the reasons' list names each once.
#[test]
fn a_key_given_as_the_certificate_says_so_and_a_repeated_revoke_adds_no_note() {
    let ca = Ca::new();
    let o = ca.vouch(&["conductor", "revoke", "--cert", s(&ca.key("c1"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("PRIVATE KEY block"), "{}", text(&o));
    assert!(!ca.ca_file("root_revocations.txt").exists(), "{}", text(&o));

    ok(&ca.sign(&ca.csr("c1", "n1.example.test")));
    let first = ca.vouch(&["revoke", "n1.example.test"]);
    ok(&first);
    assert!(stderr(&first).contains("note: the CRL lists it now"), "{}", text(&first));
    let again = ca.vouch(&["revoke", "n1.example.test"]);
    assert!(ok(&again).contains("was already revoked"), "{}", text(&again));
    assert!(!stderr(&again).contains("note:"), "{}", text(&again));

    let o = ca.vouch(&["revoke", "n1.example.test", "--reason", "no-such-reason"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("one of unspecified, key-compromise (keyCompromise)"), "{}", text(&o));
    assert!(!stderr(&o).contains("unspecified (unspecified)"), "{}", text(&o));
}
