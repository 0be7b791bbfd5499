//! `vouch store verify` on the file store: silent (exit 0) on a store that only vouch
//! changed, through issuance, renewal, revocation and cleaning; and for each way a store
//! can be damaged or tampered with outside vouch, exit 1 with the finding that names it.

mod common;

use common::{cli_vouched_csr, ok, run, s, text, vouch};
use std::path::{Path, PathBuf};

struct Ca {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    dir: PathBuf,
}

impl Ca {
    /// A CA with a conductor, and `names` each issued a certificate.
    fn with(names: &[&str]) -> Ca {
        let tmp = tempfile::tempdir().unwrap();
        let w = tmp.path().to_path_buf();
        let dir = w.join("vouch");
        ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
        let ca = Ca { _tmp: tmp, w, dir };
        ok(&ca.run(
            &["conductor", "new", "cond", "--cert-out", s(&ca.w.join("cond.pem")), "--key-out"],
            &[&ca.w.join("cond.key")],
        ));
        for n in names {
            ca.issue(n);
        }
        // The first verify takes the lock, which checkpoints the log these issuances left
        // (until then, taking the lock replays the log over the files, undoing any change).
        let (code, kinds, o) = ca.verify();
        assert_eq!((code, kinds.len()), (0, 0), "{}", text(&o));
        ca
    }

    fn run(&self, args: &[&str], paths: &[&Path]) -> std::process::Output {
        run(vouch().arg("--dir").arg(&self.dir).args(args).args(paths), None)
    }

    fn issue(&self, name: &str) -> String {
        self.issue_in(&self.w, name)
    }

    /// Issues `name` a certificate, its key and CSR made in `w`.
    fn issue_in(&self, w: &Path, name: &str) -> String {
        let csr = cli_vouched_csr(w, &self.w.join("cond.pem"), &self.w.join("cond.key"), name);
        ok(&self.run(&["sign", "--csr"], &[&csr]))
    }

    fn ca(&self, rel: &str) -> PathBuf {
        self.dir.join("ca").join(rel)
    }

    /// `vouch store verify --format jsonl`: its exit code and the kinds of its findings.
    fn verify(&self) -> (i32, Vec<String>, std::process::Output) {
        let o = self.run(&["store", "verify", "--format", "jsonl"], &[]);
        let mut kinds = Vec::new();
        let mut summary = false;
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if let Some(k) = v["finding"].as_str() {
                assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{line}");
                assert!(v["hint"].as_str().is_some_and(|m| !m.is_empty()), "{line}");
                kinds.push(k.to_string());
            } else {
                assert!(v["summary"]["findings"].as_u64() == Some(kinds.len() as u64), "{line}");
                summary = true;
            }
        }
        assert!(summary || o.status.code() == Some(2), "no summary line: {}", text(&o));
        (o.status.code().unwrap_or(-1), kinds, o)
    }

    /// Asserts that verify finds exactly `want` (in any order), exit 1.
    fn finds(&self, want: &[&str]) {
        let (code, mut kinds, o) = self.verify();
        kinds.sort();
        let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(kinds, want, "{}", text(&o));
        assert_eq!(code, 1, "{}", text(&o));
        // The text form names each kind found once with what to do.
        let t = ok_or_1(&self.run(&["store", "verify"], &[]));
        for k in &want {
            assert!(t.contains(&format!("\n  {k}: ")), "no hint for {k}:\n{t}");
        }
    }

    fn serial_of(&self, name: &str) -> String {
        let pem = std::fs::read(self.ca(&format!("signed/{name}.pem"))).unwrap();
        let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        vouch::encoding::hex(cert.raw_serial())
    }

    fn record_path(&self, serial: &str) -> PathBuf {
        self.ca(&format!("serials/{}/{serial}.json", &serial[..2]))
    }

    fn edit(&self, rel: &str, f: impl FnOnce(String) -> String) {
        let p = self.ca(rel);
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, f(t)).unwrap();
    }
}

fn ok_or_1(o: &std::process::Output) -> String {
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A store that only vouch changed: issued, renewed (the old certificate superseded),
/// revoked, cleaned, re-enrolled after cleaning: no finding, exit 0, counts that add up.
#[test]
fn a_store_only_vouch_changed_has_no_findings() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test", "d.example.test"]);
    ok(&ca.run(&["renew", "a.example.test", "--out", s(&ca.w.join("a.renewed"))], &[]));
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    ok(&ca.run(&["clean", "c.example.test"], &[]));
    let again = ca.w.join("again");
    std::fs::create_dir(&again).unwrap();
    ca.issue_in(&again, "c.example.test");
    let (code, kinds, o) = ca.verify();
    assert_eq!((code, kinds.len()), (0, 0), "{}", text(&o));
    let t = ok(&ca.run(&["store", "verify"], &[]));
    // a (renewed), b (revoked), c (re-enrolled), d: four current; six issued in all; three
    // revocations (a's superseded one, b, c's first).
    assert!(t.contains(": 4 current certificates, 6 inventory lines, 3 revocations checked: no findings"), "{t}");
}

/// A certificate the CA did not sign, stored as a node's under a serial the store knows
/// (openssl makes it, self-signed, with that serial and CN): not-signed-by-ca, and its
/// notAfter disagrees with the record.
#[test]
fn a_certificate_the_ca_did_not_sign_is_found() {
    common::require("openssl", "openssl");
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let serial = ca.serial_of("b.example.test");
    let key = ca.w.join("forged.key");
    let forged = ca.ca("signed/b.example.test.pem");
    let o = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
        .args(["-subj", "/CN=b.example.test", "-set_serial", &format!("0x{serial}"), "-keyout", s(&key)])
        .args(["-out", s(&forged)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    ca.finds(&["not-signed-by-ca", "not-after-mismatch"]);
}

/// One node's certificate file copied over another's: the name disagrees (and the file is
/// not offered as junk to purge: it is a listed certname's certificate).
#[test]
fn a_certificate_under_another_name_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    ca.finds(&["name-mismatch"]);
}

/// A revocation removed from the revocation list (what the CRL is made from): the revoked
/// certificate would drop off the next CRL.
#[test]
fn a_revocation_missing_from_the_list_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    std::fs::write(ca.ca("revocations.txt"), "").unwrap();
    // The listing (which takes revocations.txt for what may be revoked) now says signed.
    ca.finds(&["revoked-not-recorded", "state-mismatch"]);
}

/// An older CRL put back after a revocation, and then no CRL at all: the revoked serial is
/// not on it, then the CRL cannot be read.
#[test]
fn a_crl_that_lacks_a_revocation_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    let before = std::fs::read(ca.ca("ca_crl.pem")).unwrap();
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    std::fs::write(ca.ca("ca_crl.pem"), &before).unwrap();
    ca.finds(&["revoked-not-on-crl"]);
    std::fs::remove_file(ca.ca("ca_crl.pem")).unwrap();
    ca.finds(&["crl-unreadable"]);
    // `vouch crl` mends it, as the hint says.
    ok(&ca.run(&["crl"], &[]));
    assert_eq!(ca.verify().0, 0);
}

/// The inventory and the records out of step: a line removed, a line cut off, a line for a
/// serial with no record, a serial listed twice.
#[test]
fn an_inventory_out_of_step_with_the_records_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let whole = std::fs::read_to_string(ca.ca("inventory.txt")).unwrap();
    let (first, second) = whole.split_once('\n').unwrap();
    std::fs::write(ca.ca("inventory.txt"), second).unwrap();
    ca.finds(&["not-in-inventory", "record-not-in-inventory"]);
    std::fs::write(ca.ca("inventory.txt"), format!("{whole}{}", &first[..20])).unwrap();
    ca.finds(&["inventory-line-damaged"]);
    let ghost = format!("0x{} 2026-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=ghost.example.test\n", "ab".repeat(16));
    std::fs::write(ca.ca("inventory.txt"), format!("{whole}{ghost}{first}\n")).unwrap();
    // The ghost's line also lists it as a certname with no certificate.
    ca.finds(&["inventory-without-record", "inventory-serial-twice", "current-missing"]);
}

/// Records damaged or changed: a record that is not JSON, an intent never settled, a
/// revoked certificate whose record says issued, a second unexpired issued certificate
/// for one certname.
#[test]
fn damaged_and_contradictory_records_are_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test"]);
    let a = ca.serial_of("a.example.test");
    let b = ca.serial_of("b.example.test");
    ok(&ca.run(&["revoke", "c.example.test"], &[]));
    let c = ca.serial_of("c.example.test");

    let rec_a = std::fs::read_to_string(ca.record_path(&a)).unwrap();
    std::fs::write(ca.record_path(&a), &rec_a[..rec_a.len() / 2]).unwrap();
    // The damaged record is named; a's current certificate cannot be read; a's inventory line
    // has no readable record.
    ca.finds(&["record-damaged", "current-unreadable", "inventory-disagrees"]);
    std::fs::write(ca.record_path(&a), &rec_a).unwrap();

    ca.edit(&format!("serials/{}/{c}.json", &c[..2]), |t| t.replace("\"revoked\"", "\"issued\""));
    ca.finds(&["revocation-not-in-record"]);
    ca.edit(&format!("serials/{}/{c}.json", &c[..2]), |t| t.replace("\"issued\"", "\"revoked\""));

    // A second issued, unexpired record for b (a serial never on any certificate), with its
    // inventory line, then the same as an intent.
    let other = "cd".repeat(16);
    let rec_b = std::fs::read_to_string(ca.record_path(&b)).unwrap();
    let twin = rec_b.replace(&b, &other);
    std::fs::create_dir_all(ca.record_path(&other).parent().unwrap()).unwrap();
    std::fs::write(ca.record_path(&other), &twin).unwrap();
    let line = format!("0x{other} 2026-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=b.example.test\n");
    ca.edit("inventory.txt", |t| t + &line);
    ca.finds(&["two-valid-certificates"]);
    std::fs::write(ca.record_path(&other), twin.replace("\"issued\"", "\"intent\"")).unwrap();
    ca.finds(&["intent-left", "inventory-disagrees"]);
}

/// Junk (a certificate file that is not a certificate) is named with the generated name
/// `vouch purge` takes; a damaged certificate file is junk, not a crash.
#[test]
fn junk_in_the_store_is_found() {
    let ca = Ca::with(&["a.example.test"]);
    std::fs::write(ca.ca("signed/b.example.test.pem"), "not a certificate\n").unwrap();
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "{}", text(&o));
    assert!(kinds.contains(&"junk".to_string()), "{kinds:?}\n{}", text(&o));
}

/// A listed certname whose certificate file is gone: current-missing (the listing, which
/// starts from the inventory, still shows it).
#[test]
fn a_missing_certificate_file_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    std::fs::remove_file(ca.ca("signed/a.example.test.pem")).unwrap();
    ca.finds(&["current-missing"]);
    // A damaged one: named once, as the certname's (not as junk to purge).
    std::fs::write(ca.ca("signed/b.example.test.pem"), "not a certificate\n").unwrap();
    ca.finds(&["current-missing", "current-unreadable"]);
}

/// A FIFO planted where vouch reads a file (a certificate, the inventory, a record, the
/// CRL) is refused at once, never waited on.
#[test]
fn a_fifo_in_the_store_never_hangs_verify() {
    let ca = Ca::with(&["a.example.test"]);
    let mkfifo = |p: &Path| {
        let o = std::process::Command::new("mkfifo").arg(p).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    mkfifo(&ca.ca("signed/fifo.example.test.pem"));
    let serial = ca.serial_of("a.example.test");
    let record = ca.record_path(&serial);
    std::fs::remove_file(&record).unwrap();
    mkfifo(&record);
    // verify with a deadline: a hang fails the test instead of blocking it.
    let mut child = vouch()
        .arg("--dir")
        .arg(&ca.dir)
        .args(["store", "verify", "--format", "jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("vouch store verify hangs on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not a regular file"), "{out}");
}

/// A line of the revocation list that is not a revocation (the CRL would leave it out).
#[test]
fn a_damaged_revocation_line_is_found() {
    let ca = Ca::with(&["a.example.test"]);
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    ca.edit("revocations.txt", |t| t + "garbage\n");
    ca.finds(&["revocation-line-damaged"]);
}

/// A store that cannot be read at all is an error (exit 2, reason named), not a finding.
#[test]
fn a_missing_ca_is_an_error_not_a_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(vouch().args(["--dir", s(&tmp.path().join("none")), "store", "verify"]), None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error"), "{}", text(&o));
}
