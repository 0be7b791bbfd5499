//! `vouch store verify` on the file store: silent (exit 0) on a store that only vouch
//! changed, through issuance, renewal, revocation and cleaning; and for each way a store
//! can be damaged or tampered with outside vouch, exit 1 with the finding that names it.

mod common;

use common::processes::{ended_within, output_within, wait_within};
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
        // A command that takes the lock checkpoints the log these issuances left (until
        // then, taking the lock replays the log over the files, undoing any change; verify
        // takes it only when its first reading finds something).
        ca.settled();
        ca
    }

    /// Checkpoints the log the last commands left (any command that takes the store's lock
    /// does; until then the next lock holder replays the log over the files, undoing a
    /// change a test makes), then verify finds nothing.
    fn settled(&self) {
        ok(&self.run(&["crl"], &[]));
        let (code, kinds, o) = self.verify();
        assert_eq!((code, kinds.len()), (0, 0), "{}", text(&o));
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
                // Which store was checked, as the text summary names it.
                assert!(v["summary"]["store"].as_str().is_some_and(|s| s.starts_with("files in ")), "{line}");
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
    // The listing (b's inventory line) names b's serial; the file holds a's.
    ca.finds(&["listed-not-current", "name-mismatch"]);
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

/// An older CRL put back after a revocation, and then a CRL that is no CRL: the revoked
/// serial is not on it, then the CRL cannot be read. (A deleted CRL is due: verify writes
/// it first, as every command does.)
#[test]
fn a_crl_that_lacks_a_revocation_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    let before = std::fs::read(ca.ca("ca_crl.pem")).unwrap();
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    std::fs::write(ca.ca("ca_crl.pem"), &before).unwrap();
    ca.finds(&["revoked-not-on-crl"]);
    std::fs::write(ca.ca("ca_crl.pem"), "not a CRL\n").unwrap();
    ca.finds(&["crl-unreadable"]);
    std::fs::remove_file(ca.ca("ca_crl.pem")).unwrap();
    assert_eq!(ca.verify().0, 0, "a missing CRL is due: verify writes it");
    assert!(ca.ca("ca_crl.pem").exists());
    std::fs::write(ca.ca("ca_crl.pem"), "not a CRL\n").unwrap();
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
    // The twin is b's newest issued certificate, and b's file holds the other.
    ca.finds(&["two-valid-certificates", "issued-not-current"]);
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
    let mut child = spawn_verify(&ca);
    wait_within(&mut child, std::time::Duration::from_secs(60), "vouch store verify on a FIFO (it hangs?)");
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

// ---------------------------------------------------------------------------------------
// An independent review's tests of `vouch store verify`: each damages or tampers with a
// store in a way verify missed, reported as an error, or advised wrongly on when the review
// wrote it; each failed then and passes since the fix.
// ---------------------------------------------------------------------------------------

impl Ca {
    /// Whether the CRL on disk lists `serial`.
    fn crl_lists(&self, serial: &str) -> bool {
        let pem = std::fs::read(self.ca("ca_crl.pem")).unwrap();
        let (_, der) = vouch::encoding::pem::find(&pem, &["X509 CRL"]).unwrap();
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        let listed = crl.iter_revoked_certificates().any(|r| vouch::encoding::hex(r.raw_serial()) == serial);
        listed
    }

    /// Asserts that verify reports something (exit 1) that names `serial`.
    fn finds_serial(&self, serial: &str) {
        let (code, kinds, o) = self.verify();
        assert_eq!(code, 1, "verify is silent (kinds {kinds:?}):\n{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains(serial), "no finding names {serial}:\n{}", text(&o));
    }

    /// Drops every revocations.txt line of `serial`.
    fn drop_revocation(&self, serial: &str) {
        self.edit("revocations.txt", |t| {
            t.lines().filter(|l| !l.starts_with(serial)).map(|l| format!("{l}\n")).collect()
        });
    }
}

/// A cleaned node's revocation removed from revocations.txt (the node enrolled anew since):
/// the next CRL used to leave the old, unexpired certificate out (valid again for every
/// relying party) while its record still said revoked; it now keeps what the previous CRL
/// listed. Verify checked records against the revocation list only for a certname's
/// *current* certificate, and stayed silent.
/// (Without the re-enrollment it happens to report `current-missing`, whose hint, `vouch
/// clean CERTNAME`, finds no certificate to clean and leaves the revocation missing.)
#[test]
fn review_a_cleaned_certificates_revocation_removed_from_the_list_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let b = ca.serial_of("b.example.test");
    ok(&ca.run(&["clean", "b.example.test"], &[]));
    let again = ca.w.join("again");
    std::fs::create_dir(&again).unwrap();
    ca.issue_in(&again, "b.example.test");
    ca.settled();
    assert!(ca.crl_lists(&b));
    ca.drop_revocation(&b);
    ok(&ca.run(&["crl"], &[]));
    // The CRL keeps what the previous one listed while the record says revoked and unexpired.
    assert!(ca.crl_lists(&b), "b's old, unexpired certificate left the CRL with its revocation line");
    let rec = std::fs::read_to_string(ca.record_path(&b)).unwrap();
    assert!(rec.contains("\"revoked\""), "its record still says revoked: {rec}");
    ca.finds_serial(&b);
}

/// The same for a certificate superseded by a renewal (revoked `superseded` while still
/// valid): its revocation line removed, the old certificate stays on the CRL and is found.
#[test]
fn review_a_superseded_certificates_revocation_removed_from_the_list_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let old = ca.serial_of("a.example.test");
    ok(&ca.run(&["renew", "a.example.test", "--out", s(&ca.w.join("a.renewed"))], &[]));
    ca.settled();
    assert!(ca.crl_lists(&old));
    ca.drop_revocation(&old);
    ok(&ca.run(&["crl"], &[]));
    assert!(ca.crl_lists(&old), "the superseded, unexpired certificate left the CRL with its revocation line");
    ca.finds_serial(&old);
}

/// What `openssl crl -text` (an independent reader of the CRL) lists of `serial`.
fn openssl_lists(crl: &Path, serial: &str) -> bool {
    let o = run(std::process::Command::new("openssl").args(["crl", "-noout", "-text", "-in", s(crl)]), None);
    let t = ok(&o);
    let value = serial.trim_start_matches("00").to_ascii_uppercase();
    t.lines().any(|l| l.trim() == format!("Serial Number: {value}"))
}

/// Issue 33, finding 4: a revocation line's `not_after=` moved into the past (a writer of
/// the store, no CA key needed) took the serial off the next CRL as long expired (the CRL
/// dropped an entry by the line's date alone), and verify, which used the same date to decide
/// what is due, said nothing. The CRL now keeps a serial its previous CRL listed until the
/// certificate itself (signed by this CA) expired, saying so on stderr; verify names the
/// revocation whose expiry is not its certificate's.
#[test]
fn review_a_revocations_not_after_moved_back_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let b = ca.serial_of("b.example.test");
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    assert!(openssl_lists(&ca.ca("ca_crl.pem"), &b), "revoked, not on the CRL");
    let revs = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap();
    let line = revs.lines().find(|l| l.starts_with(&b)).unwrap().to_string();
    let (head, _) = line.split_once(" not_after=").unwrap();
    ca.edit("revocations.txt", |t| t.replace(&line, &format!("{head} not_after=2001-01-01T00:00:00Z")));
    let o = ca.run(&["crl"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(openssl_lists(&ca.ca("ca_crl.pem"), &b), "b's unexpired, revoked certificate is off the CRL");
    assert!(String::from_utf8_lossy(&o.stderr).contains("crl-entry-kept"), "{}", text(&o));
    // Written again (the CRL just written is the previous one now): still listed.
    ok(&ca.run(&["crl"], &[]));
    assert!(openssl_lists(&ca.ca("ca_crl.pem"), &b), "b left the CRL at the second write");
    ca.finds(&["revocation-not-after-mismatch", "revocation-disagrees"]);
    ca.finds_serial(&b);
}

/// The other side of the above: a revoked certificate that did expire leaves the CRL a CRL
/// period after (its certificate says so), and so does one whose certificate the file store
/// no longer holds (cleaned), by its revocation's date: whoever may write the file store may
/// read the CA key beside it (the shared LDAP store keeps the certificate instead:
/// hardening3.rs).
#[test]
fn an_expired_certificates_revocation_still_leaves_the_crl() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    let b = ca.serial_of("b.example.test");
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    ok(&ca.run(&["clean", "b.example.test"], &[]));
    assert!(openssl_lists(&ca.ca("ca_crl.pem"), &a) && openssl_lists(&ca.ca("ca_crl.pem"), &b));
    let pem = std::fs::read(ca.ca("signed/a.example.test.pem")).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let gone =
        vouch::encoding::time::format_rfc3339(cert.validity().not_after.to_datetime() + time::Duration::days(400));
    let out = ca.w.join("crl.pem");
    let o = ca.run(&["--now", &gone, "crl", "--out"], &[&out]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!openssl_lists(&out, &a), "a certificate expired 400 days ago stays on the CRL");
    assert!(!openssl_lists(&out, &b), "a cleaned certificate expired 400 days ago stays on the CRL");
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(!said.contains("crl-entry-kept"), "{}", text(&o));
}

/// A renewed certname's certificate file deleted. The listing lists a certname with more
/// than one inventory line only if it has a current certificate, so the deletion reads as
/// a clean; but nothing revoked the latest certificate: it is unexpired, issued, and
/// `vouch revoke` can no longer reach it. (current-missing covers only never-renewed names.)
#[test]
fn review_a_renewed_certnames_deleted_certificate_file_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["renew", "a.example.test", "--out", s(&ca.w.join("a.renewed"))], &[]));
    ca.settled();
    let latest = ca.serial_of("a.example.test");
    std::fs::remove_file(ca.ca("signed/a.example.test.pem")).unwrap();
    // The impact: the valid certificate can no longer be revoked by name.
    let o = ca.run(&["revoke", "a.example.test"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    ca.finds_serial(&latest);
}

/// A renewed certname's certificate file rolled back to the certificate it superseded
/// (revoked): every check passes, since the old certificate agrees with its own record;
/// the latest certificate (unexpired, issued, in the inventory as the name's last line) is
/// no longer the name's, and `vouch revoke` answers "already revoked" without touching it.
#[test]
fn review_a_certificate_file_rolled_back_to_its_superseded_certificate_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let old_pem = std::fs::read(ca.ca("signed/a.example.test.pem")).unwrap();
    ok(&ca.run(&["renew", "a.example.test", "--out", s(&ca.w.join("a.renewed"))], &[]));
    ca.settled();
    let latest = ca.serial_of("a.example.test");
    std::fs::write(ca.ca("signed/a.example.test.pem"), &old_pem).unwrap();
    let o = ok(&ca.run(&["revoke", "a.example.test"], &[]));
    assert!(o.contains("already revoked"), "{o}");
    assert!(!std::fs::read_to_string(ca.ca("revocations.txt")).unwrap().contains(&latest));
    ca.finds_serial(&latest);
}

/// The CRL on disk put back from an old backup that lists every revocation but expired
/// long ago (nextUpdate in the past): agents reject it, and `maintain` (which reads
/// crl_next_update, not the CRL) does not replace it. Verify checks the CRL's signature and
/// serials, not its dates.
#[test]
fn review_an_expired_crl_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["revoke", "b.example.test"], &[]));
    let b = ca.serial_of("b.example.test");
    // A CRL made "in 2020" (thisUpdate 2020, nextUpdate a CRL period later), set aside...
    ok(&ca.run(&["--now", "2020-01-01T00:00:00Z", "crl"], &[]));
    let stale = std::fs::read(ca.ca("ca_crl.pem")).unwrap();
    // ...a fresh one made, then the stale one restored over it.
    ok(&ca.run(&["crl"], &[]));
    std::fs::write(ca.ca("ca_crl.pem"), &stale).unwrap();
    assert!(ca.crl_lists(&b));
    let (_, der) = vouch::encoding::pem::find(&stale, &["X509 CRL"]).unwrap();
    let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
    let next = crl.next_update().unwrap().timestamp();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(next < now, "the CRL on disk expired (nextUpdate {next}, now {now})");
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "an expired CRL passes verify (kinds {kinds:?}):\n{}", text(&o));
}

/// A certificate file whose first PEM block, labelled `X509 CERTIFICATE` (which OpenSSL,
/// and so Puppet's agent, reads as a certificate), holds a certificate the CA never
/// signed, followed by the node's real one. vouch's PEM reader looks only for
/// `CERTIFICATE` blocks and checks the real one; `vouch serve` answers GET certificate
/// with the whole file, and OpenSSL reads the forged one.
#[test]
fn review_a_forged_certificate_before_the_real_one_is_found() {
    common::require("openssl", "openssl");
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let real = std::fs::read_to_string(ca.ca("signed/b.example.test.pem")).unwrap();
    let serial = ca.serial_of("b.example.test");
    let forged = ca.w.join("forged.pem");
    let o = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
        .args(["-subj", "/CN=b.example.test", "-set_serial", &format!("0x{serial}")])
        .args(["-keyout", s(&ca.w.join("forged.key")), "-out", s(&forged)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let forged = std::fs::read_to_string(&forged).unwrap().replace(" CERTIFICATE-----", " X509 CERTIFICATE-----");
    std::fs::write(ca.ca("signed/b.example.test.pem"), format!("{forged}{real}")).unwrap();
    // What OpenSSL reads from the file: the forged certificate (self-issued: issuer = CN=b...).
    let o = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-issuer", "-in", s(&ca.ca("signed/b.example.test.pem"))])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("b.example.test"), "{}", text(&o));
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "a forged certificate first in the file passes verify (kinds {kinds:?}):\n{}", text(&o));
}

/// A large (sparse) file under signed/ that no inventory line names: the new signed/ walk
/// reads it whole into memory (read_regular, for its serial), where the junk scan reads at
/// most 1 MiB and calls it junk by its size. Verify's memory then grows with the file: a
/// 1 GiB file costs about 1 GiB (a planted 100 GiB sparse file, no disk used, runs the
/// machine out of memory). Measured with /usr/bin/time: the peak must stay well under the
/// file's size.
#[test]
fn review_a_large_file_in_signed_is_not_read_whole() {
    common::require("/usr/bin/time", "time");
    let ca = Ca::with(&["a.example.test"]);
    let big = std::fs::File::create(ca.ca("signed/big.example.test.pem")).unwrap();
    big.set_len(1 << 30).unwrap(); // 1 GiB, sparse: no disk used
    drop(big);
    let o = run(
        std::process::Command::new("/usr/bin/time").args(["-f", "maxrss-kb=%M"]).args([
            env!("CARGO_BIN_EXE_vouch"),
            "--dir",
            s(&ca.dir),
            "store",
            "verify",
            "--format",
            "jsonl",
        ]),
        None,
    );
    std::fs::remove_file(ca.ca("signed/big.example.test.pem")).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"finding\":\"junk\""), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let kb: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("maxrss-kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(kb < 256 * 1024, "verify peaked at {} MiB for a 1 GiB file", kb / 1024);
}

/// One inventory line that is not UTF-8 (a disk error, a stray byte): the layout check
/// names it (inventory-line-damaged), and then Store::inventory, which reads the whole file
/// as UTF-8, fails: exit 2, "the store could not be read", no summary. The rest of vouch
/// reads the inventory line by line and works on; verify should report the line (exit 1).
#[test]
fn review_a_non_utf8_inventory_line_is_a_finding_not_an_error() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let mut inv = std::fs::read(ca.ca("inventory.txt")).unwrap();
    inv.extend_from_slice(b"0x\xff 2026-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=x.example.test\n");
    std::fs::write(ca.ca("inventory.txt"), inv).unwrap();
    // Other commands still work.
    ok(&ca.run(&["list", "--all"], &[]));
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "kinds {kinds:?}\n{}", text(&o));
    assert!(kinds.contains(&"inventory-line-damaged".to_string()), "{kinds:?}");
}

/// Right after a crash in a revocation, `vouch store verify` as the first command: taking
/// the lock completes the revocation (recovery), and verify then reports that the CRL
/// lacks it, a CRL every other command (`maintain`) would have written on the way. The docs
/// say to run verify "after a crash you want to be sure of" and that tests/crash.rs requires
/// exit 0 after every crash; tests/crash.rs runs `vouch crl` before verify, which hides this.
#[test]
fn review_verify_right_after_a_crash_in_a_revocation_has_no_findings() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    let o = run(
        vouch()
            .arg("--dir")
            .arg(&ca.dir)
            .env("VOUCH_TEST_ABORT_AT", "revoke:marker")
            .args(["revoke", "b.example.test"]),
        None,
    );
    assert!(o.status.code().is_none(), "the revocation should have aborted: {}", text(&o));
    let (code, kinds, o) = ca.verify();
    assert_eq!((code, kinds.len()), (0, 0), "{}", text(&o));
}

/// The text form promises one line per finding, then the summary and one hint line per kind.
/// Strings from the store (here a record's certname, which may hold anything JSON can) are
/// printed raw: a planted record writes lines of its own into the report, such as a
/// summary saying "no findings".
#[test]
fn review_text_output_is_one_line_per_finding() {
    let ca = Ca::with(&["a.example.test"]);
    let serial = "7".repeat(32);
    let fake = "x)\nFiles in /var/lib/vouch/ca: 1 current certificates, 1 inventory lines, 0 revocations checked: no findings\n";
    let rec = serde_json::json!({
        "serial": serial, "certname": fake, "state": "intent", "digest": "d",
        "not_before": "2026-01-01T00:00:00Z", "not_after": "2031-01-01T00:00:00Z",
    });
    std::fs::create_dir_all(ca.record_path(&serial).parent().unwrap()).unwrap();
    std::fs::write(ca.record_path(&serial), rec.to_string()).unwrap();
    let (code, kinds, _) = ca.verify();
    assert_eq!((code, kinds.clone()), (1, vec!["intent-left".to_string()]));
    let t = ok_or_1(&ca.run(&["store", "verify"], &[]));
    // One finding, the summary, one hint line.
    assert_eq!(t.lines().count(), 3, "{t}");
}

/// name-mismatch's hint once sent the operator to `vouch clean` the name. For one node's
/// certificate file copied over another's (b's file holds a's certificate), `vouch clean b`
/// reads b's current certificate (a's), revokes it and forgets *a*: the hint revoked the
/// innocent node. The hint now warns against it and names the repair (a backup), and
/// `vouch clean` (and `revoke`) refuse a certname whose file holds another node's certificate.
#[test]
fn review_following_the_name_mismatch_hint_does_not_revoke_another_node() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    // The listing (b's inventory line) names b's serial; the file holds a's.
    ca.finds(&["listed-not-current", "name-mismatch"]);
    let t = ok_or_1(&ca.run(&["store", "verify"], &[]));
    let hint = t.lines().find(|l| l.starts_with("  name-mismatch: ")).unwrap_or_else(|| panic!("{t}"));
    assert!(hint.contains("do not `vouch clean` this name"), "{hint}");
    assert!(hint.contains("backup"), "{hint}");
    // And clean, run anyway, refuses (exit 2) instead of revoking and forgetting a.
    let o = ca.run(&["clean", "b.example.test"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing was changed"), "{}", text(&o));
    let revs = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap_or_default();
    assert!(!revs.contains(&a), "clean b revoked a's certificate {a}: {revs}");
    assert!(ca.ca("signed/a.example.test.pem").exists(), "clean b forgot a");
}

/// current-unreadable's and current-missing's hints once offered `vouch clean CERTNAME`,
/// which fails on a certificate it cannot read (exit 2) or finds none to revoke. The hints
/// now say so and name the repair; `vouch clean` is checked to still fail as the hint says,
/// so that the hint is revised when clean learns to revoke by the record.
#[test]
fn review_the_current_unreadable_hint_works() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let b = ca.serial_of("b.example.test");
    std::fs::remove_file(ca.record_path(&b)).unwrap();
    let t = ok_or_1(&ca.run(&["store", "verify"], &[]));
    let hint = t.lines().find(|l| l.starts_with("  current-unreadable: ")).unwrap_or_else(|| panic!("{t}"));
    assert!(hint.contains("`vouch clean` cannot revoke a certificate it cannot read"), "{hint}");
    assert_eq!(ca.run(&["clean", "b.example.test"], &[]).status.code(), Some(2));
}

#[test]
fn review_the_current_missing_hint_works() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    std::fs::remove_file(ca.ca("signed/a.example.test.pem")).unwrap();
    ca.finds(&["current-missing"]);
    let t = ok_or_1(&ca.run(&["store", "verify"], &[]));
    let hint = t.lines().find(|l| l.starts_with("  current-missing: ")).unwrap_or_else(|| panic!("{t}"));
    assert!(hint.contains("restore signed/CERTNAME.pem"), "{hint}");
    assert!(hint.contains("`vouch clean` cannot revoke a certificate it cannot read"), "{hint}");
    // As the hint says: clean does not revoke it.
    let _ = ca.run(&["clean", "a.example.test"], &[]);
    let revs = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap_or_default();
    assert!(!revs.contains(&a), "clean revoked {a}: revise the hint");
}

/// The CA bundle `vouch serve` hands agents (GET certificate/ca, their trust anchor on
/// first run: DIR/ca/ca_bundle.pem) replaced by another CA's certificate. It sits in the
/// store's directory next to the CRL verify does check; verify does not compare it with
/// the master CA and root it runs with.
#[test]
fn review_a_replaced_ca_bundle_is_found() {
    common::require("openssl", "openssl");
    let ca = Ca::with(&["a.example.test"]);
    let o = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
        .args(["-subj", "/CN=Some other CA", "-keyout", s(&ca.w.join("other.key")), "-out"])
        .arg(ca.ca("ca_bundle.pem"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "a CA bundle of another CA passes verify (kinds {kinds:?}):\n{}", text(&o));
}

// ---------------------------------------------------------------------------------------
// A second independent review (branch rev-verify2): each test below failed when written.
// ---------------------------------------------------------------------------------------

/// A self-signed CA certificate made with rcgen, PEM (a CA of someone else's).
fn foreign_ca_pem(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.self_signed(&key).unwrap().pem()
}

/// A CA certificate appended to `ca/ca_bundle.pem` (what `vouch serve` answers GET
/// certificate/ca with, and what a Puppet agent stores as its localcacert on its first run:
/// every certificate in it becomes a trust anchor of the agent, for the server's TLS too).
/// vouch writes exactly the master CA and the root there (the root is always self-issued:
/// `ca init --root-cert` refuses anything else), so a third certificate was put there by
/// someone else. bundle-mismatch checks only that the first certificate is the master CA's
/// and that the root is somewhere in it: the extra CA passes.
#[test]
fn review2_a_ca_appended_to_the_bundle_is_found() {
    let ca = Ca::with(&["a.example.test"]);
    ca.edit("ca_bundle.pem", |t| t + &foreign_ca_pem("Someone else's CA"));
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "an extra CA in the bundle agents trust passes verify (kinds {kinds:?}):\n{}", text(&o));
    assert!(kinds.contains(&"bundle-mismatch".to_string()), "{kinds:?}");
}

/// A CA certificate appended to `ca/root_crt.pem`. The default policy trusts that file for
/// conductors (`ca/root_crt.pem`), and the policy reads every certificate in it: the
/// appended CA now vouches for any certname (here a conductor of another vouch CA gets a
/// node signed). vouch writes one certificate there; verify reads only the first (the root
/// it checks other master CAs and the bundle against) and is silent about the rest.
#[test]
fn review2_a_ca_appended_to_the_root_certificate_is_found() {
    let ca = Ca::with(&["a.example.test"]);
    // Another CA, with a conductor of its own.
    let other = ca.w.join("other");
    ok(&run(vouch().args(["--dir", s(&other), "ca", "init"]), None));
    ok(&run(
        vouch().args(["--dir", s(&other), "conductor", "new", "rogue", "--cert-out"]).args([
            s(&ca.w.join("rogue.pem")),
            "--key-out",
            s(&ca.w.join("rogue.key")),
        ]),
        None,
    ));
    let w = ca.w.join("rogue-work");
    std::fs::create_dir(&w).unwrap();
    let csr = cli_vouched_csr(&w, &ca.w.join("rogue.pem"), &ca.w.join("rogue.key"), "x.example.test");
    // Refused while root_crt.pem holds the root alone...
    let o = ca.run(&["sign", "--csr"], &[&csr]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    // ...signed once the other CA's root is appended to it.
    let foreign = std::fs::read_to_string(other.join("ca/root_crt.pem")).unwrap();
    ca.edit("root_crt.pem", |t| t + &foreign);
    let w2 = ca.w.join("rogue-work2");
    std::fs::create_dir(&w2).unwrap();
    let csr = cli_vouched_csr(&w2, &ca.w.join("rogue.pem"), &ca.w.join("rogue.key"), "y.example.test");
    ok(&ca.run(&["sign", "--csr"], &[&csr]));
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "a second trust anchor in root_crt.pem passes verify (kinds {kinds:?}):\n{}", text(&o));
}

/// `ca/root_crt.pem` and `ca/ca_bundle.pem` as symbolic links to copies in a private
/// directory of the same owner. Every other command reads both through the link (the CA
/// opens the bundle with std::fs::read, `vouch enc` the root; the policy's trust files
/// follow links by design, checking the target's directory), and the data directory's
/// rules forbid links only for the store's directories and the files written in place.
/// verify reads both with `read_regular` (O_NOFOLLOW): the root's link is an error that
/// stops the whole check (exit 2), the bundle's a bundle-mismatch.
#[test]
fn review2_linked_root_and_bundle_are_read_as_every_command_reads_them() {
    let ca = Ca::with(&["a.example.test"]);
    let keep = ca.w.join("keep");
    std::fs::create_dir(&keep).unwrap();
    for f in ["root_crt.pem", "ca_bundle.pem"] {
        std::fs::copy(ca.ca(f), keep.join(f)).unwrap();
        std::fs::remove_file(ca.ca(f)).unwrap();
        std::os::unix::fs::symlink(keep.join(f), ca.ca(f)).unwrap();
    }
    // Everything else works through the links.
    ca.issue("b.example.test");
    ok(&ca.run(&["enc", "b.example.test"], &[]));
    ok(&ca.run(&["list", "--all"], &[]));
    let (code, kinds, o) = ca.verify();
    assert_eq!((code, kinds.clone()), (0, vec![]), "{}", text(&o));
}

/// `vouch store verify --format jsonl` started in the background, its output piped.
fn spawn_verify(ca: &Ca) -> std::process::Child {
    vouch()
        .arg("--dir")
        .arg(&ca.dir)
        .args(["store", "verify", "--format", "jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `vouch store verify` with a deadline: Some(output), or None if it was still running
/// after `secs` seconds (then killed).
fn verify_within(ca: &Ca, secs: u64) -> Option<std::process::Output> {
    within(vouch().arg("--dir").arg(&ca.dir).args(["store", "verify", "--format", "jsonl"]), secs)
}

/// A FIFO planted at `ca/crl_next_update` (read by every command's CRL check, verify's
/// first step under the lock, with std::fs::read_to_string). The docs say of verify: "A
/// FIFO or device planted where vouch reads a file is reported (`not a regular file`),
/// never waited on". verify waits on it forever, holding the store's lock (so every other
/// command, and `vouch serve`'s issuance, wait too). The same holds for
/// `crl_revocations_size` and `crl_number` (read under the lock by write_crl_locked).
#[test]
fn review2_a_fifo_at_crl_next_update_never_hangs_verify() {
    let ca = Ca::with(&["a.example.test"]);
    let p = ca.ca("crl_next_update");
    std::fs::remove_file(&p).unwrap();
    let o = std::process::Command::new("mkfifo").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = verify_within(&ca, 30);
    let o = out.unwrap_or_else(|| panic!("vouch store verify hangs on a FIFO at ca/crl_next_update"));
    // Since the fix the FIFO is never opened for a blocking read: an unreadable stamp makes
    // the CRL due, and writing it replaces the FIFO (rename), as every command would; the
    // store is then whole (exit 0). An error naming the FIFO would do as well.
    assert!(matches!(o.status.code(), Some(0..=2)), "{}", text(&o));
    assert!(!p.exists() || std::fs::symlink_metadata(&p).unwrap().is_file());
}

/// One byte of a node's only inventory line turned into a non-UTF-8 byte (a disk error) in
/// a date field, not in the serial. The listing (which parses each line as UTF-8) no longer
/// shows the node: `vouch list` loses it, and so does every check verify runs from the
/// listing. Store::inventory now leaves the line out silently, and the layout check calls
/// the line whole (it checks the serial's bytes and the field count, not the times): verify
/// is silent (before, the same line stopped verify with an error).
#[test]
fn review2_a_non_utf8_byte_in_an_inventory_lines_date_is_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let mut inv = std::fs::read(ca.ca("inventory.txt")).unwrap();
    let b_line = inv.split(|c| *c == b'\n').position(|l| l.ends_with(b"/CN=b.example.test")).unwrap();
    let start: usize = inv.split(|c| *c == b'\n').take(b_line).map(|l| l.len() + 1).sum();
    // "0x<serial> 2026-…": the first digit of the notBefore's year.
    let at = start + inv[start..].iter().position(|c| *c == b' ').unwrap() + 1;
    inv[at] = 0xff;
    std::fs::write(ca.ca("inventory.txt"), inv).unwrap();
    let listed = ok(&ca.run(&["list", "--all"], &[]));
    assert!(!listed.contains("b.example.test"), "the damage took effect: b left the listing\n{listed}");
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "a node gone from the listing passes verify (kinds {kinds:?}):\n{}", text(&o));
}

/// verify writes each finding to stdout as it is found, while it holds the store's lock.
/// A reader that does not keep up (`vouch store verify | less` left open, a stalled ssh
/// session) blocks the write once the pipe is full, and with it the lock: every command
/// that takes it (a revocation here; `vouch serve`'s issuance alike) waits for as long as
/// the reader does. Nothing is read from verify's stdout below; a revocation must still
/// complete.
#[test]
fn review2_a_stalled_reader_of_verify_does_not_hold_the_store() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    // Findings worth more than a pipe's buffer: 3,000 damaged revocation-list lines.
    std::fs::write(ca.ca("revocations.txt"), "garbage line\n".repeat(3000)).unwrap();
    let mut verify = vouch()
        .arg("--dir")
        .arg(&ca.dir)
        .args(["store", "verify", "--format", "jsonl"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Give it time to fill the pipe (it is never read).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let mut revoke = vouch()
        .arg("--dir")
        .arg(&ca.dir)
        .args(["revoke", "a.example.test"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let done = ended_within(&mut revoke, std::time::Duration::from_secs(20));
    let _ = revoke.kill();
    let _ = revoke.wait();
    let _ = verify.kill();
    let _ = verify.wait();
    let done = done.unwrap_or_else(|| panic!("vouch revoke waited 20 s for a verify whose reader stalled"));
    assert!(done.success(), "{done:?}");
}

/// The name-mismatch damage (b's file holds a's certificate), for which `vouch revoke` and
/// `vouch clean` now refuse, followed by `vouch renew b`: renewal reads b's "current"
/// certificate (a's), checks it is this CA's, and renews it under the name b, superseding
/// it. Node a's certificate is revoked (the wrong node, as clean did), and a new certificate
/// for b carries a's public key: whoever holds a's key now holds a valid identity of b
/// (GET certificate/b hands it to anyone). Renewal should refuse as revoke and clean do.
/// (Nodes here are servers: with the default policy, renew b happens to be refused because
/// a's certificate names a.example.test, an alt name for b that no scope allows; a scope
/// whose `dns_alt_names` cover the other node's certname lets it through.)
#[test]
fn review2_renewing_a_certname_whose_file_is_another_nodes_is_refused() {
    let ca = Ca::with(&[]);
    let scope = "\n[[conductor]]\nname = \"fleet\"\nsubject = \"CN=cond\"\n\
                 servers = [\"*.example.test\"]\ndns_alt_names = [\"*.example.test\"]\n";
    let policy = ca.dir.join("policy.toml");
    let before = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, before + scope).unwrap();
    ca.issue("a.example.test");
    ca.issue("b.example.test");
    ca.settled();
    let a = ca.serial_of("a.example.test");
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    ca.finds(&["listed-not-current", "name-mismatch"]);
    let out = ca.w.join("b.renewed");
    let o = ca.run(&["renew", "b.example.test", "--out", s(&out)], &[]);
    let revs = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap_or_default();
    assert!(!revs.contains(&a), "renew b revoked a's certificate {a}: {revs}\n{}", text(&o));
    assert_eq!(o.status.code(), Some(2), "renew b succeeded on a's certificate:\n{}", text(&o));
    assert!(!out.exists(), "a certificate for b was issued");
}

/// The same damage under `on_existing = "supersede"` (reinstalled hosts): node b enrolls
/// anew (a new key, later attributes: what the policy allows), and the issuance supersedes
/// b's "current" certificate, which is a's. a's certificate is revoked (the wrong node, with
/// no operator involved: `vouch serve` does the same for a PUT certificate_request), and
/// b's own earlier certificate stays valid beside the new one. Issuance should refuse to
/// supersede a certificate whose record names another certname, as revoke and clean do.
#[test]
fn review2_superseding_a_certname_whose_file_is_another_nodes_is_refused() {
    let ca = Ca::with(&[]);
    ca.edit("../policy.toml", |t| t.replace("on_existing = \"refuse\"", "on_existing = \"supersede\""));
    ca.issue("a.example.test");
    ca.issue("b.example.test");
    ca.settled();
    let a = ca.serial_of("a.example.test");
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    // b re-enrolls: a new key, attributes that expire later (the supersede rule).
    std::thread::sleep(std::time::Duration::from_secs(1));
    let again = ca.w.join("again");
    std::fs::create_dir(&again).unwrap();
    let csr = cli_vouched_csr(&again, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), "b.example.test");
    let _ = ca.run(&["sign", "--csr"], &[&csr]);
    let revs = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap_or_default();
    assert!(!revs.contains(&a), "b's enrollment revoked a's certificate {a}: {revs}");
}

/// `cmd` with a deadline: Some(output), or None if it was still running after `secs`
/// seconds (then killed).
fn within(cmd: &mut std::process::Command, secs: u64) -> Option<std::process::Output> {
    output_within(cmd.stdin(std::process::Stdio::null()), std::time::Duration::from_secs(secs)).ok()
}

/// The FIFO commits say a FIFO planted where the file store reads (the inventory, the
/// revocation list among them) "is refused at once instead of hanging verify and every
/// other command". The reads are; the appends are not: with a FIFO at `revocations.txt`,
/// `vouch revoke` blocks in the redo protocol's tail read (read_tail: File::open, which
/// waits for a writer), and with one at `inventory.txt`, `vouch sign` blocks opening it to
/// append; each holds the store's lock meanwhile (`vouch serve`'s issuance waits too).
#[test]
fn review2_a_fifo_at_the_inventory_or_revocation_list_never_hangs_a_command() {
    let ca = Ca::with(&["a.example.test"]);
    let mkfifo = |p: &Path| {
        let _ = std::fs::remove_file(p);
        let o = std::process::Command::new("mkfifo").arg(p).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    mkfifo(&ca.ca("revocations.txt"));
    let revoke = within(vouch().arg("--dir").arg(&ca.dir).args(["revoke", "a.example.test"]), 20);
    std::fs::remove_file(ca.ca("revocations.txt")).unwrap();

    let inventory = std::fs::read(ca.ca("inventory.txt")).unwrap();
    mkfifo(&ca.ca("inventory.txt"));
    let csr = cli_vouched_csr(&ca.w, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), "b.example.test");
    let sign = within(vouch().arg("--dir").arg(&ca.dir).args(["sign", "--csr"]).arg(&csr), 20);
    std::fs::remove_file(ca.ca("inventory.txt")).unwrap();
    std::fs::write(ca.ca("inventory.txt"), inventory).unwrap();
    assert!(
        revoke.is_some() && sign.is_some(),
        "hangs: vouch revoke on a FIFO at ca/revocations.txt: {}; vouch sign on one at ca/inventory.txt: {}",
        revoke.is_none(),
        sign.is_none()
    );
}

// ---------------------------------------------------------------------------------------
// A third independent review (branch rev-verify3) of 7da90ad: each test below failed when
// written.
// ---------------------------------------------------------------------------------------

/// The name-mismatch damage (b's file holds a's certificate), for which revoke, clean, renew
/// and a superseding enrollment now refuse (`Authority::current_checked`). `vouch enc b`,
/// what Puppet Server runs to classify node b, still reads b's "current" certificate with
/// `Store::current` and prints the classification a's certificate carries, exit 0: node b
/// is compiled with a's classification (with the default policy's autosign-and-classify,
/// a's roles and secrets). `vouch enc --cert`/`--ca-url` refuse a misnamed certificate
/// (docs/operator-guide.md: "a revoked, foreign or misnamed certificate prints nothing and
/// exits 2"); the local form should too.
#[test]
fn review3_enc_of_a_certname_whose_file_is_another_nodes_is_refused() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["enc", "b.example.test"], &[]));
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    ca.finds(&["listed-not-current", "name-mismatch"]);
    let o = ca.run(&["enc", "b.example.test"], &[]);
    assert_eq!(o.status.code(), Some(2), "vouch enc b classified b from a's certificate:\n{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
}

/// A further master CA made as the docs describe (`ca init --root-cert --root-key`) under a
/// root that `ca init` accepts (a self-issued CA certificate with keyCertSign, valid now,
/// whose key is the key given): here an organisation's P-256 root that openssl self-signed
/// with ecdsa-with-SHA512. Nothing in the data directory was written by anyone but vouch,
/// yet verify's new root check ("self-signed", judged with the signature algorithms vouch
/// accepts on a CSR) reports bundle-mismatch, whose hint says to restore the file from a
/// backup and find who wrote it; exit 1 for good. (A root signed with sha1WithRSA or
/// RSASSA-PSS, as many older organisational roots are, is reported the same way.)
#[test]
fn review3_a_master_ca_under_a_root_ca_init_accepts_has_no_findings() {
    common::require("openssl", "openssl");
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let (key, cert) = (w.join("root.key"), w.join("root.pem"));
    let o = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-sha512", "-nodes"])
        .args(["-days", "3650", "-subj", "/CN=Example Org Root", "-keyout", s(&key), "-out", s(&cert)])
        .args(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let dir = w.join("d2");
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init", "--root-cert", s(&cert), "--root-key", s(&key)]), None));
    let o = run(vouch().args(["--dir", s(&dir), "store", "verify"]), None);
    assert_eq!(o.status.code(), Some(0), "a data directory only vouch wrote has findings:\n{}", text(&o));
}

/// verify now spools its findings to `tempfile::tempfile()` before it even takes the lock:
/// with TMPDIR naming a directory that does not exist (or one this user may not write: an
/// operator's `su vouch` keeps their TMPDIR=/run/user/UID), verify of a whole store fails
/// with exit 2, which its documentation reserves for "the store could not be read"
/// (monitoring alerts on a store that is fine). Before, it needed no temporary directory.
#[test]
fn review3_verify_of_a_whole_store_does_not_depend_on_tmpdir() {
    let ca = Ca::with(&["a.example.test"]);
    let o =
        run(vouch().env("TMPDIR", ca.w.join("no-such-dir")).arg("--dir").arg(&ca.dir).args(["store", "verify"]), None);
    assert_eq!(o.status.code(), Some(0), "verify of a whole store failed on TMPDIR:\n{}", text(&o));
}

/// Every in-place open (`files::durable::open_nofollow`: the audit log, the store's log and
/// inventory, the lock file) is now O_NONBLOCK. For a regular file that flag is not a no-op
/// at open time: a file under a lease (fcntl F_SETLEASE: what nfsd's delegations and
/// Samba's kernel oplocks are) makes open(O_NONBLOCK) fail at once with EWOULDBLOCK where a
/// plain open waits for the holder to give the lease back. So on a data directory exported
/// over NFSv4 (or shared by Samba), a remote reader of the audit log turns issuance into
/// an error. Here the test itself holds a read lease on the audit log for 2 s (it ignores
/// SIGIO and gives the lease back, as nfsd returns a recalled delegation); `vouch sign`
/// must wait and succeed, as it did before 7da90ad.
#[test]
fn review3_a_leased_audit_log_delays_issuance_instead_of_failing_it() {
    use std::os::fd::AsRawFd;
    let ca = Ca::with(&["a.example.test"]);
    let log = ca.dir.join("audit.log");
    assert!(log.exists(), "the default policy's audit log");
    let csr = cli_vouched_csr(&ca.w, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), "b.example.test");
    let held = std::fs::File::open(&log).unwrap();
    // SAFETY: fcntl and signal on a descriptor this test owns; SIGIO ignored in this process
    // (the lease-break notice would otherwise end the test binary).
    let leased = unsafe {
        libc::signal(libc::SIGIO, libc::SIG_IGN);
        libc::fcntl(held.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK)
    };
    assert_eq!(leased, 0, "F_SETLEASE: {}", std::io::Error::last_os_error());
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(2));
        // SAFETY: as above.
        unsafe { libc::fcntl(held.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        drop(held);
    });
    let o = ca.run(&["sign", "--csr"], &[&csr]);
    release.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "issuance failed on a leased audit log:\n{}", text(&o));
}

/// The crlNumber of the master CA's CRL on disk.
fn crl_number(ca: &Ca) -> u64 {
    u64::try_from(&review4_crl_number_of(&ca.ca("ca_crl.pem"))).unwrap()
}

/// A CRL's number never goes back (RFC 5280 5.2.3; a compile server refuses a CRL whose
/// number is lower than the one it holds): `crl_number` damaged, deleted, or put back from
/// an older backup, the next CRL still gets a higher number than the last one.
#[test]
fn a_damaged_or_stale_crl_number_never_takes_the_crl_number_back() {
    let ca = Ca::with(&["a.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    ok(&ca.run(&["crl"], &[]));
    let mut last = crl_number(&ca);
    assert!(last >= 2, "{last}");
    let stale = format!("{}\n", last - 1);
    for (what, content) in [("garbage", Some("garbage\n")), ("deleted", None), ("stale", Some(stale.as_str()))] {
        match content {
            Some(c) => std::fs::write(ca.ca("crl_number"), c).unwrap(),
            None => std::fs::remove_file(ca.ca("crl_number")).unwrap(),
        }
        ok(&ca.run(&["crl"], &[]));
        let n = crl_number(&ca);
        assert!(n > last, "crl_number {what}: the new CRL is number {n}, the one before {last}");
        last = n;
    }
    // The root's CRL the same way.
    let root_number = |ca: &Ca| review4_crl_number_of(&ca.ca("root_crl.pem"));
    let before = root_number(&ca);
    std::fs::write(ca.ca("root_crl_number"), "x\n").unwrap();
    std::fs::write(ca.ca("root_crl_next_update"), "2000-01-01T00:00:00Z\n").unwrap();
    // Due now: every command that touches the store writes it (verify among them).
    assert_eq!(ca.verify().0, 0);
    assert!(root_number(&ca) > before, "the root CRL's number went back");
    assert_eq!(ca.verify().0, 0);
}

/// Lines of the revocation list that name no serial a CRL could hold (not hex, an odd
/// digit, four words of garbage) stay off the CRL, which OpenSSL still reads whole, and are
/// found as damaged lines only: not read as revocations missing from the CRL.
#[test]
fn revocation_lines_that_name_no_serial_stay_off_the_crl_and_are_found() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    ca.edit("revocations.txt", |t| {
        t + "zz 2026-01-01T00:00:00Z unspecified x.example.test\n\
             abc 2026-01-01T00:00:00Z unspecified x.example.test\n\
             some garbage of words\n\
             777d27ef1e609248296e"
    });
    ok(&ca.run(&["crl"], &[]));
    let o = run(
        std::process::Command::new("openssl").args(["crl", "-noout", "-text", "-in", s(&ca.ca("ca_crl.pem"))]),
        None,
    );
    let listed = ok(&o).to_lowercase();
    assert_eq!(listed.matches("serial number:").count(), 1, "{listed}");
    assert!(listed.replace(':', "").contains(&a), "{a} is not on the CRL:\n{listed}");
    let (code, kinds, o) = ca.verify();
    assert_eq!(code, 1, "{}", text(&o));
    assert_eq!(kinds, ["revocation-line-damaged"; 4], "{}", text(&o));
}

/// A stray byte in the certname of a revocation (not on the CRL) neither stops `vouch list`
/// nor takes the revocation off the CRL.
#[test]
fn a_stray_byte_in_a_revocations_certname_keeps_it_on_the_crl() {
    let ca = Ca::with(&["a.example.test"]);
    let a = ca.serial_of("a.example.test");
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    let p = ca.ca("revocations.txt");
    let t = std::fs::read(&p).unwrap();
    let pos = t.windows(14).position(|w| w == b"a.example.test").unwrap();
    let mut damaged = t.clone();
    damaged.insert(pos + 1, 0xff);
    std::fs::write(&p, damaged).unwrap();
    ok(&ca.run(&["list", "--all"], &[]));
    ok(&ca.run(&["crl"], &[]));
    let o = run(
        std::process::Command::new("openssl").args(["crl", "-noout", "-text", "-in", s(&ca.ca("ca_crl.pem"))]),
        None,
    );
    assert!(ok(&o).to_lowercase().replace(':', "").contains(&a), "{a} left the CRL");
}

/// `vouch admin new` under a name whose stored certificate is another node's: refused as
/// a damaged entry (the store's own check of the name, as every other command makes).
#[test]
fn admin_new_on_a_name_whose_file_is_another_nodes_is_refused_as_damaged() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    std::fs::copy(ca.ca("signed/a.example.test.pem"), ca.ca("signed/b.example.test.pem")).unwrap();
    let o = ca.run(
        &["admin", "new", "b.example.test", "--cert-out", s(&ca.w.join("adm.pem")), "--key-out"],
        &[&ca.w.join("adm.key")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not its own"), "{}", text(&o));
}

/// A store with no finding is read without its lock: verify answers while another process
/// holds the lock (`vouch serve` keeps issuing through the minutes a large store takes to
/// read). A store with a finding is read again with the lock held: verify then waits for
/// the holder, and reports what that settled reading finds.
#[test]
fn verify_of_a_sound_store_does_not_wait_for_the_lock() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let lock = ca.ca(".lock");
    let mut holder = std::process::Command::new("flock").arg("-o").arg(&lock).args(["sleep", "120"]).spawn().unwrap();
    let held = || !std::process::Command::new("flock").arg("-n").arg(&lock).arg("true").status().unwrap().success();
    let t = std::time::Instant::now();
    while !held() {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = verify_within(&ca, 30);
    let o = o.unwrap_or_else(|| {
        let _ = holder.kill();
        panic!("verify of a sound store waited for the store's lock")
    });
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"certificates\":2"), "{}", text(&o));

    std::fs::write(ca.ca("revocations.txt"), "garbage\n").unwrap();
    let mut child = spawn_verify(&ca);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let waited = child.try_wait().unwrap().is_none();
    let _ = holder.kill();
    let _ = holder.wait();
    let o = child.wait_with_output().unwrap();
    assert!(waited, "a store with a finding was not read again under the lock: {}", text(&o));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("revocation-line-damaged"), "{}", text(&o));
}

/// An empty CRL signed with the master CA's key, numbered `number` (big-endian), as PEM: what
/// another tool could leave in `ca_crl.pem`.
fn crl_numbered(ca: &Ca, number: &[u8]) -> String {
    let key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(ca.ca("ca_key.pem")).unwrap()).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&std::fs::read_to_string(ca.ca("ca_crt.pem")).unwrap(), key).unwrap();
    let now = time::OffsetDateTime::now_utc();
    let params = rcgen::CertificateRevocationListParams {
        this_update: now,
        next_update: now + time::Duration::days(30),
        crl_number: rcgen::SerialNumber::from_slice(number),
        issuing_distribution_point: None,
        revoked_certs: Vec::new(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    };
    params.signed_by(&issuer).unwrap().pem().unwrap()
}

/// The crlNumber of a PEM CRL file, whatever its size.
fn review4_crl_number_of(path: &Path) -> x509_parser::num_bigint::BigUint {
    let pem = std::fs::read(path).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["X509 CRL"]).unwrap();
    let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
    crl.crl_number().expect("a CRL number").clone()
}

/// A revocation whose serial is whole but whose time was damaged (here its `Z` lost, as a
/// hand edit or a flipped byte leaves it) still names a certificate the CRL can list: the
/// revoked certificate must stay on the CRL (before this commit it did, revoked at the
/// CRL's time). Leaving it off makes a revoked certificate trusted again.
#[test]
fn review4_a_revocation_whose_time_is_damaged_stays_on_the_crl() {
    let ca = Ca::with(&["a.example.test"]);
    let a = ca.serial_of("a.example.test");
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    ca.edit("revocations.txt", |t| {
        let mut f: Vec<String> = t.trim_end().split(' ').map(str::to_string).collect();
        assert!(f[1].ends_with('Z'), "{t}");
        f[1].pop();
        f.join(" ") + "\n"
    });
    ok(&ca.run(&["crl"], &[]));
    let o = run(
        std::process::Command::new("openssl").args(["crl", "-noout", "-text", "-in", s(&ca.ca("ca_crl.pem"))]),
        None,
    );
    let listed = ok(&o).to_lowercase().replace(':', "");
    assert!(listed.contains(&a), "revoked {a} left the CRL because its revocation time is damaged:\n{listed}");
}

/// A revocation list saved with CRLF line endings (a Windows editor) reads as it did
/// before this commit (lines were split with `str::lines`, which drops the `\r`): no
/// finding, the revocation's notAfter still its record's.
#[test]
fn review4_a_revocation_list_with_crlf_line_endings_has_no_findings() {
    let ca = Ca::with(&["a.example.test"]);
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    ca.edit("revocations.txt", |t| t.replace('\n', "\r\n"));
    let (code, kinds, o) = ca.verify();
    assert_eq!((code, kinds), (0, Vec::<String>::new()), "{}", text(&o));
}

/// A data directory restored from a backup (the restore `vouch store verify`'s hints ask
/// for: "a backup of DIR/ca") holds an older `crl_number` and an older CRL together; the
/// next CRL's number must still be above every CRL published since, or `vouch crl --fetch`
/// on the compile servers refuses it ("refusing to roll the CRL back") and revocations
/// made after the restore never reach them.
#[test]
fn review4_a_data_directory_restored_from_a_backup_never_takes_the_crl_number_back() {
    let ca = Ca::with(&["a.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    let backup = ca.w.join("backup");
    std::fs::create_dir(&backup).unwrap();
    for f in ["crl_number", "ca_crl.pem"] {
        std::fs::copy(ca.ca(f), backup.join(f)).unwrap();
    }
    for _ in 0..3 {
        ok(&ca.run(&["crl"], &[]));
    }
    let published = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    for f in ["crl_number", "ca_crl.pem"] {
        std::fs::copy(backup.join(f), ca.ca(f)).unwrap();
    }
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    let after = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    assert!(after > published, "after the restore the CRL is number {after}, the last one published {published}");
}

/// A CRL on disk whose number does not fit in 64 bits (signed by the CA's key, as another
/// tool may have made it) is read as "no number": the next number is taken from the
/// current time, below the one published. vouch cannot go above it, so it must refuse
/// (and leave the CRL as it is) rather than publish a lower number.
#[test]
fn review4_a_crl_number_beyond_64_bits_is_never_taken_back() {
    let ca = Ca::with(&["a.example.test"]);
    ok(&ca.run(&["crl"], &[]));
    std::fs::write(ca.ca("ca_crl.pem"), crl_numbered(&ca, &[1, 0, 0, 0, 0, 0, 0, 0, 7])).unwrap(); // 2^64 + 7
    let published = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    assert!(published.bits() > 64, "{published}");
    let _ = ca.run(&["crl"], &[]);
    let after = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    assert!(after >= published, "the CRL went from number {published} back to {after}");
}

/// A `crl_number` at the end of 64 bits does not stop the CA: numbers go on past it (counted
/// in 128 bits; RFC 5280 allows 20 octets), every command still works and the number never
/// goes back. A CRL on disk numbered beyond 128 bits (another tool's) is refused, the CRL
/// left as it is.
#[test]
fn a_crl_number_at_the_end_of_64_bits_keeps_counting() {
    let ca = Ca::with(&["a.example.test"]);
    std::fs::write(ca.ca("crl_number"), "18446744073709551614\n").unwrap();
    ok(&ca.run(&["crl"], &[]));
    let first = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    assert_eq!(first.to_string(), "18446744073709551615");
    ok(&ca.run(&["crl"], &[]));
    let second = review4_crl_number_of(&ca.ca("ca_crl.pem"));
    assert_eq!(second.to_string(), "18446744073709551616");
    ok(&ca.run(&["list", "--all"], &[]));
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    assert!(review4_crl_number_of(&ca.ca("ca_crl.pem")) > second);

    let mut big = vec![1u8];
    big.extend([0u8; 16]); // 2^128
    let pem = crl_numbered(&ca, &big);
    std::fs::write(ca.ca("ca_crl.pem"), &pem).unwrap();
    let o = ca.run(&["crl"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("beyond the 128-bit numbers"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(ca.ca("ca_crl.pem")).unwrap(), pem, "the CRL was changed");
}

/// A log (`ca/wal.log`) of two batches, b's then c's, as one `vouch serve` leaves it between
/// checkpoints (made here by joining what two `vouch sign` runs logged: the first log's header
/// and b's batch, then c's batch), with one byte of batch `damaged` (0: b's, 1: c's) changed:
/// still JSON, no longer its commit line's digest (a torn or rotted write).
fn review5_two_batch_log_damaged(ca: &Ca, damaged: usize) {
    let wal = ca.ca("wal.log");
    ca.issue("b.example.test");
    let first = std::fs::read_to_string(&wal).unwrap();
    ca.issue("c.example.test");
    let second = std::fs::read_to_string(&wal).unwrap();
    let b: Vec<&str> = first.lines().collect();
    let c: Vec<&str> = second.lines().collect();
    assert!(b.len() == 3 && c.len() == 3 && b[1].contains("b.example.test") && c[1].contains("c.example.test"));
    let mut lines = [b[0].to_string(), b[1].to_string(), b[2].to_string(), c[1].to_string(), c[2].to_string()];
    let entry = &mut lines[1 + 2 * damaged];
    let at = entry.find("MII").expect("a certificate in the entry") + 10;
    let swap = if &entry[at..at + 1] == "A" { "B" } else { "A" };
    entry.replace_range(at..at + 1, swap);
    std::fs::write(&wal, lines.join("\n") + "\n").unwrap();
}

/// The log's last batch (c's) damaged, an earlier one (b's) whole. The next command that
/// takes the lock keeps b's batch, cuts the inventory back to the log's header, writes back
/// the whole lines after it whose serial has a record (c's: its record and certificate file
/// were written when its batch was applied) and applies b's again: c stays listed, nothing
/// is left unlisted. (Before the replay kept such lines, c's record and file were left
/// unlisted, and only a verify after a locking command said so.) Verify's first reading
/// takes no lock and never reads the log: what it says must not depend on which command
/// ran last, and both say the store is sound.
#[test]
fn review5_a_damaged_last_log_batch_is_reported_by_the_first_verify() {
    let ca = Ca::with(&["a.example.test"]);
    review5_two_batch_log_damaged(&ca, 1);
    let (first, first_kinds, o1) = ca.verify();
    // What the locked reading finds: after a command that takes the lock.
    ok(&ca.run(&["crl"], &[]));
    let (second, second_kinds, o2) = ca.verify();
    assert_eq!(second, 0, "{}", text(&o2));
    let list = ok(&ca.run(&["list", "--all"], &[]));
    assert!(list.contains("c.example.test") && list.contains("b.example.test"), "{list}");
    assert_eq!(
        (first, &first_kinds),
        (second, &second_kinds),
        "verify said {first} {first_kinds:?}; after `vouch crl` took the lock, {second} {second_kinds:?}:\n{}\n{}",
        text(&o1),
        text(&o2)
    );
}

/// The log's first batch (b's) damaged and a later one (c's) whole: not a torn write but a
/// damaged log, which every command that takes the lock refuses (vouch serve cannot start,
/// `vouch crl` fails). Verify's first reading never reads the log and says the store is
/// sound (exit 0); before this change it took the lock and failed with the log's error (2).
#[test]
fn review5_a_damaged_log_that_fails_every_locking_command_is_not_called_sound() {
    let ca = Ca::with(&["a.example.test"]);
    review5_two_batch_log_damaged(&ca, 0);
    let crl = ca.run(&["crl"], &[]);
    assert_eq!(crl.status.code(), Some(2), "the damaged log is refused: {}", text(&crl));
    let (code, kinds, o) = ca.verify();
    assert_ne!(
        (code, kinds.len()),
        (0, 0),
        "verify calls the store sound while `vouch crl` fails on it: {}\n{}",
        text(&o),
        text(&crl)
    );
}

/// fleet-operations.md: verify reads "**without the lock**, beside `vouch serve` and every
/// other command: issuance goes on", and "verify holds up issuance only on a store that has
/// something to report". A sound store of thousands of certificates (every `serials/<ab>`
/// shard there, as in any store past a thousand or so), and certificates issued one after
/// another while verify's first reading runs (what a CA in service does all day): that
/// reading, which read the inventory first, meets a new certificate's record in a shard it
/// reads later but not its inventory line (record-not-in-inventory), takes that for a
/// finding, and reads the whole store again holding the lock: issuance waits for a second
/// full reading of a store that has nothing to report (minutes for a million certificates:
/// the case the lock-free reading was made for).
///
/// Whether verify needed the lock is seen in `/proc/locks` (it held the store's lock, or
/// waited for it), never by how long it took: once the issuances are done the test holds the
/// lock itself, so that a verify that asks for it waits there until seen. A reading that
/// catches a `vouch sign` in the middle of its batch (its record written, its inventory line
/// not yet) reads again with the lock by design; a loaded machine widens that window, so a
/// reading held up is tried again, up to three times (without the fix every one was held up).
#[test]
fn review5_issuance_during_verify_of_a_sound_store_is_not_held_up() {
    use std::os::unix::fs::MetadataExt;
    let ca = Ca::with(&["a.example.test"]);
    let names: Vec<String> = (0..12000).map(|i| format!("node-{i:05}.example.test")).collect();
    common::gen_store::fill(&ca.dir, &names, time::OffsetDateTime::now_utc(), &|_| false);
    for b in 0..=255u8 {
        std::fs::create_dir_all(ca.ca(&format!("serials/{b:02x}"))).unwrap();
    }
    // A new log, whose header counts the lines just written (the next lock replays a log over
    // the inventory as long as its header says).
    std::fs::remove_file(ca.ca("wal.log")).unwrap();
    ok(&ca.run(&["crl"], &[]));
    let lock_ino = std::fs::metadata(ca.ca(".lock")).unwrap().ino();
    let t = std::time::Instant::now();
    let (code, kinds, o) = ca.verify();
    let alone = t.elapsed();
    assert_eq!((code, kinds.len()), (0, 0), "a sound store: {}", text(&o));
    let mut attempts = Vec::new();
    for attempt in 0..3 {
        // The CSRs are made before verify starts, so that issuing each is one `vouch sign`.
        let csrs: Vec<PathBuf> = (0..8)
            .map(|i| {
                let name = format!("new-{attempt}-{i}.example.test");
                cli_vouched_csr(&ca.w, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), &name)
            })
            .collect();
        let (held_up, issued, burst, o) = review5_issue_during_verify(&ca, &csrs, alone / 3, lock_ino);
        assert_eq!(o.status.code(), Some(0), "a sound store: {}", text(&o));
        eprintln!("attempt {attempt}: verify alone {alone:?}; {issued} issued in {burst:?}; held up: {held_up}");
        if issued > 0 && !held_up {
            return;
        }
        attempts.push(format!(
            "{issued} certificates issued while verify ran, in its first {burst:?}: it held or waited for the \
             lock: {held_up}: {}",
            text(&o)
        ));
    }
    panic!(
        "verify (alone {alone:?}) of a sound store, with certificates issued while it read, needed the lock \
         every time (or no certificate was issued while it ran):\n{}",
        attempts.join("\n")
    );
}

/// Starts `vouch store verify` and signs `csrs` one after another while it runs, spread over
/// `burst`; then holds the store's lock until verify ends or is seen on it. Returns
/// whether verify held or waited for the store's lock at any time (`/proc/locks`, polled
/// every few milliseconds from its start: a reading with the lock lasts as long as a whole
/// reading of the store), how many certificates were issued while it ran, how long the
/// issuing took, and verify's output.
fn review5_issue_during_verify(
    ca: &Ca,
    csrs: &[PathBuf],
    burst: std::time::Duration,
    lock_ino: u64,
) -> (bool, usize, std::time::Duration, std::process::Output) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};
    let mut child = spawn_verify(ca);
    let pid = child.id();
    let (seen, done) = (AtomicBool::new(false), AtomicBool::new(false));
    /// Stops the watcher however the attempt ends (a panic too: the scope waits for it).
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    std::thread::scope(|scope| {
        let _done = Done(&done);
        scope.spawn(|| {
            while !done.load(SeqCst) {
                if flock_of(pid, lock_ino) {
                    seen.store(true, SeqCst);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let started = Instant::now();
        let mut issued = 0;
        for (i, csr) in csrs.iter().enumerate() {
            // Spread over `burst`: some after verify read the inventory and listed `signed/`
            // (which reads what was appended to the inventory meanwhile), others before.
            let at = started + burst * i as u32 / csrs.len() as u32;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if started.elapsed() > burst || child.try_wait().unwrap().is_some() {
                break;
            }
            ok(&ca.run(&["sign", "--csr"], &[csr]));
            if child.try_wait().unwrap().is_none() {
                issued += 1;
            }
        }
        let burst = started.elapsed();
        // The lock, taken by the test as soon as it is free (as a long batch would hold it): a
        // verify that asks for it from then on waits, and is seen waiting. A generous
        // deadline: the answer is verify ending, or verify on the lock.
        let lock = std::fs::File::open(ca.ca(".lock")).unwrap();
        let mut held = false;
        let deadline = Instant::now() + Duration::from_secs(600);
        while child.try_wait().unwrap().is_none() && !seen.load(SeqCst) {
            assert!(Instant::now() < deadline, "verify neither ended nor asked for the store's lock in 10 minutes");
            held = held || rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok();
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(lock);
        let o = child.wait_with_output().unwrap();
        (seen.load(SeqCst), issued, burst, o)
    })
}

/// Whether `/proc/locks` shows process `pid` holding, or waiting for (a `->` line), a `flock`
/// on the inode `ino`.
fn flock_of(pid: u32, ino: u64) -> bool {
    std::fs::read_to_string("/proc/locks").unwrap_or_default().lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().filter(|w| *w != "->").collect();
        f.get(1) == Some(&"FLOCK")
            && f.get(4) == Some(&pid.to_string().as_str())
            && f.get(5).and_then(|id| id.rsplit(':').next()) == Some(ino.to_string().as_str())
    })
}

// ---------------------------------------------------------------------------------------
// A sixth independent review (branch review6) of c39d4f0: each test below failed when the
// review wrote it.
// ---------------------------------------------------------------------------------------

/// c39d4f0 says "CRL numbers counted in 128 bits (a crl_number at the end of 64 bits stopped
/// every command)"; src/authority/crl.rs still counts in u64 (`next_crl_number` -> u64,
/// `checked_add(1)`): a `crl_number` of 2^64 - 1 stops `vouch crl` and every command that
/// writes a due CRL ("is at its largest value", exit 2).
#[test]
fn review6_a_crl_number_at_the_end_of_64_bits_does_not_stop_the_ca() {
    let ca = Ca::with(&["a.example.test"]);
    std::fs::write(ca.ca("crl_number"), "18446744073709551615\n").unwrap();
    let o = ca.run(&["crl"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(review4_crl_number_of(&ca.ca("ca_crl.pem")).to_string() == "18446744073709551616");
}

/// c39d4f0 says "a revocation line cut off inside its serial stays off the CRL";
/// `parse_revocation_line` still takes the text before the first space, or the whole line
/// when there is none: a last line cut off (a crash or a full disk mid-append) after 8 of a
/// serial's hex digits puts a 4-octet serial on the CRL, one the CA never issued.
#[test]
fn review6_a_revocation_line_cut_inside_its_serial_stays_off_the_crl() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["revoke", "a.example.test"], &[]));
    let b = ca.serial_of("b.example.test");
    let cut = &b[..8];
    let revs = ca.ca("revocations.txt");
    let mut t = std::fs::read_to_string(&revs).unwrap();
    t.push_str(cut); // no space, no newline: cut off inside the serial
    std::fs::write(&revs, t).unwrap();
    ok(&ca.run(&["crl"], &[]));
    assert!(ca.crl_lists(&ca.serial_of("a.example.test")), "a's revocation left the CRL");
    assert!(!ca.crl_lists(cut), "the cut-off serial {cut} is on the CRL");
}

/// c39d4f0 says "store verify --help no longer says it holds the lock"; it still says "it
/// takes the store's lock (which first finishes any recovery) and holds it while it reads",
/// while its first reading (since 664c458) takes no lock.
#[test]
fn review6_store_verify_help_does_not_say_it_holds_the_lock() {
    let o = run(vouch().args(["store", "verify", "--help"]), None);
    let help = ok(&o);
    assert!(!help.contains("holds it while it reads"), "{help}");
}

/// A batch committed to the log (synced) but not applied to the files: the writer was killed
/// between (crash point wal:appended; the certificate counts as issued: tests/crash.rs). The
/// log verifies to its end, so `settled_unlocked` says true and verify's first reading takes
/// no lock; it never reads the log's entries, sees a store without the certificate and says
/// "no findings". The next command that takes the lock applies the batch: the store verify
/// called sound is not the store the lock settles (with the lock, as before 664c458, verify
/// would have applied it and checked the certificate).
#[test]
fn review6_a_committed_batch_not_yet_applied_is_seen_by_the_first_verify() {
    let ca = Ca::with(&["a.example.test"]);
    let csr = cli_vouched_csr(&ca.w, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), "c.example.test");
    let o = run(
        vouch().arg("--dir").arg(&ca.dir).env("VOUCH_TEST_ABORT_AT", "wal:appended").args(["sign", "--csr"]).arg(&csr),
        None,
    );
    assert!(o.status.code().is_none(), "the issuance should have aborted: {}", text(&o));
    let (code, kinds, o) = ca.verify();
    let summary = String::from_utf8_lossy(&o.stdout).into_owned();
    let applied = ca.ca("signed/c.example.test.pem").exists();
    // What the lock makes of the same store: the batch applied, c's certificate current.
    ok(&ca.run(&["crl"], &[]));
    assert!(ca.ca("signed/c.example.test.pem").exists(), "the lock did not apply the logged batch");
    assert!(
        code == 1 || applied,
        "verify said {code} {kinds:?} without the batch the log holds for c.example.test applied (the next \
         command that took the lock applied it):\n{summary}"
    );
}

/// A certificate file vouch may not read (its mode, as an operator's `chmod` leaves it): a
/// finding that names the permission, with a hint to fix the access, not a restore; verify
/// still checks the rest and exits 1 (it used to stop with exit 2 in the junk scan). As root
/// a mode does not stop a read, so the test runs verify as `nobody` (the store handed to it).
#[test]
fn a_certificate_file_vouch_may_not_read_is_a_finding() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let cert = ca.ca("signed/a.example.test.pem");
    std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o000)).unwrap();
    let root = rustix::process::geteuid().is_root();
    let mut cmd = if root {
        // nobody gets the store and a copy of the binary (the build's directory may be closed to it).
        let bin = ca.w.join("vouch-bin");
        std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
        let o = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(&ca.w).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        std::fs::set_permissions(&ca.w, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin);
        c
    } else {
        vouch()
    };
    let o = cmd.arg("--dir").arg(&ca.dir).args(["store", "verify"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(out.contains("current-unreadable: a.example.test") && out.contains("Permission denied"), "{out}");
    assert!(out.contains("give the user vouch runs as read access"), "{out}");
    assert!(out.contains("2 current certificates") && out.contains("1 finding"), "{out}");
}

/// What the hints say `vouch revoke --serial` repairs, it repairs: a revocation lost from the
/// list is recorded again (the CRL lists the serial again, at its first time), a record that
/// says issued under a listed revocation says revoked, and the older of two valid
/// certificates of one certname is revoked; verify then finds nothing of them.
#[test]
fn revoke_by_serial_repairs_what_the_hints_say_it_does() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test"]);
    // A lost revocation line.
    ok(&ca.run(&["revoke", "b.example.test", "--reason", "key-compromise"], &[]));
    let b = ca.serial_of("b.example.test");
    let line = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap();
    ca.drop_revocation(&b);
    ca.finds(&["revoked-not-recorded", "state-mismatch"]);
    let o = ca.run(&["store", "verify"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("vouch revoke --serial"), "{}", text(&o));
    let out = ok(&ca.run(&["revoke", "--serial", &b], &[]));
    assert!(out.contains("recorded again"), "{out}");
    assert_eq!(std::fs::read_to_string(ca.ca("revocations.txt")).unwrap(), line, "its first time and reason");
    assert!(ca.crl_lists(&b));
    assert_eq!(ca.verify().0, 0);
    // A record that says issued under a listed revocation.
    ca.edit(&format!("serials/{}/{b}.json", &b[..2]), |t| t.replace("\"revoked\"", "\"issued\""));
    ca.finds(&["revocation-not-in-record"]);
    ok(&ca.run(&["revoke", "--serial", &b], &[]));
    assert_eq!(ca.verify().0, 0);
    // Two valid certificates of one certname: the older one revoked by its serial.
    let c = ca.serial_of("c.example.test");
    let other = "4d".repeat(16);
    let twin = std::fs::read_to_string(ca.record_path(&c)).unwrap().replace(&c, &other);
    std::fs::create_dir_all(ca.record_path(&other).parent().unwrap()).unwrap();
    std::fs::write(ca.record_path(&other), &twin).unwrap();
    ca.edit("inventory.txt", |t| {
        let l = t.lines().find(|l| l.contains(&c)).unwrap().replace(&c, &other);
        format!("{l}\n{t}")
    });
    ca.finds(&["two-valid-certificates", "issued-not-current"]);
    ok(&ca.run(&["revoke", "--serial", &other], &[]));
    assert!(ca.crl_lists(&other));
    assert_eq!(ca.verify().0, 0);
}

/// A certname with a revocation line (a renewal's superseded certificate, a `revoke
/// --serial`) whose certificate file is then damaged, unreadable as a certificate, or not a
/// regular file: verify still reports it (current-unreadable, exit 1) and goes on with the
/// others, and `vouch list --all` still lists it; both used to stop at the file with exit 2
/// ("the store was left consistent ... retry"), which no retry could mend.
#[test]
fn a_damaged_file_of_a_renewed_certname_is_a_finding_not_the_end_of_verify() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test"]);
    ok(&ca.run(&["renew", "b.example.test", "--out", "/dev/null"], &[]));
    ok(&ca.run(&["revoke", "--serial", &ca.serial_of("c.example.test")], &[]));
    ca.settled();
    std::fs::write(ca.ca("signed/b.example.test.pem"), "garbage\n").unwrap();
    std::fs::remove_file(ca.ca("signed/c.example.test.pem")).unwrap();
    std::fs::create_dir(ca.ca("signed/c.example.test.pem")).unwrap();
    // b's file also no longer holds b's newest certificate.
    ca.finds(&["current-unreadable", "current-unreadable", "issued-not-current"]);
    let list = ok(&ca.run(&["list", "--all"], &[]));
    for n in ["a.example.test", "b.example.test", "c.example.test"] {
        assert!(list.contains(n), "{n}: {list}");
    }
    // The hint of a command that meets it names the way that needs no restore.
    let o = ca.run(&["revoke", "b.example.test"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("vouch revoke --serial"), "{}", text(&o));
}

// ---------------------------------------------------------------------------------------
// A second review of the six commits after 9e0ac4e (revoke --serial, lines kept across a
// replay, the CRL number walker, unreadable files in the junk scan).
// ---------------------------------------------------------------------------------------

/// The revocation-line-damaged hint says to write the line back by hand. An editor or a
/// `printf '%s'` that leaves it without its final newline: the next revocation vouch appends
/// is glued onto it (its serial ends up inside the certname field), so the certificate
/// `vouch revoke` just said it revoked is not on the CRL.
#[test]
fn review7_a_revocation_line_written_back_without_its_newline_does_not_swallow_the_next_revocation() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test"]);
    ok(&ca.run(&["revoke", "a.example.test", "--reason", "key-compromise"], &[]));
    let a = ca.serial_of("a.example.test");
    // The operator writes a's line back, as the hint says, without a final newline.
    ca.edit("revocations.txt", |t| t.trim_end_matches('\n').to_string());
    ok(&ca.run(&["revoke", "b.example.test", "--reason", "key-compromise"], &[]));
    let b = ca.serial_of("b.example.test");
    assert!(ca.crl_lists(&a), "a left the CRL");
    assert!(
        ca.crl_lists(&b),
        "b was revoked and is not on the CRL:\n{}",
        std::fs::read_to_string(ca.ca("revocations.txt")).unwrap()
    );
}

/// `vouch` run as a user that a mode of 000 stops (as root a mode stops nothing): `nobody`,
/// the store handed to it and a copy of the binary, as in
/// `a_certificate_file_vouch_may_not_read_is_a_finding`.
fn as_unprivileged(ca: &Ca) -> std::process::Command {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        let mut c = vouch();
        c.arg("--dir").arg(&ca.dir);
        return c;
    }
    let bin = ca.w.join("vouch-bin");
    if !bin.exists() {
        std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
    }
    let o = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(&ca.w).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    std::fs::set_permissions(&ca.w, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin).arg("--dir").arg(&ca.dir);
    c
}

/// An unreadable file is "not called junk (`vouch purge` would remove it)", says junk.rs. A
/// pending request's .json vouch may not read is read as empty: "its .json does not parse",
/// junk, and `vouch purge NAME --confirm` removes a request that may be whole.
#[test]
fn review7_a_pending_request_vouch_may_not_read_is_not_junk_purge_removes() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::with(&["a.example.test"]);
    let json = ca.ca("requests/p.example.test.json");
    std::fs::write(&json, r#"{"certname":"p.example.test","time":"2026-01-01T00:00:00Z","reasons":["held"]}"#).unwrap();
    std::fs::write(ca.ca("requests/p.example.test.pem"), "-----BEGIN CERTIFICATE REQUEST-----\n").unwrap();
    std::fs::set_permissions(&json, std::fs::Permissions::from_mode(0o000)).unwrap();
    let o = run(as_unprivileged(&ca).args(["store", "verify", "--format", "jsonl"]), None);
    let junk: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["finding"] == "junk")
        .collect();
    for j in &junk {
        let name = j["name"].as_str().unwrap();
        ok(&run(as_unprivileged(&ca).args(["purge", name, "--confirm"]), None));
    }
    assert!(json.exists(), "purged as junk: {junk:?}");
    assert!(junk.is_empty(), "an unreadable request called junk: {junk:?}");
}

/// A file under signed/ whose name is no certname is junk by its name alone. Made unreadable,
/// it is not read, so not called junk; no check of a certname's certificate names it either
/// (its name is none): verify says the store is sound (it used to stop with exit 2).
#[test]
fn review7_an_unreadable_file_under_signed_whose_name_is_no_certname_is_found() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::with(&["a.example.test"]);
    let stray = ca.ca("signed/Not_A_Certname.pem");
    std::fs::write(&stray, "anything\n").unwrap();
    std::fs::set_permissions(&stray, std::fs::Permissions::from_mode(0o000)).unwrap();
    let o = run(as_unprivileged(&ca).args(["store", "verify"]), None);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(out.contains("Not_A_Certname.pem"), "{out}");
}

/// The case revoke --serial was made for (attacks.md: a compromised node whose certificate
/// file was deleted, "or lost with its record"), with the record damaged instead of deleted
/// (overwritten, or cut by a power loss): its inventory line still names the serial, but
/// the damaged record stops revoke --serial with an error, and `vouch revoke NAME` finds no
/// certificate either. The certificate stays valid everywhere.
#[test]
fn review7_revoke_by_serial_reaches_a_certificate_whose_record_is_damaged() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    std::fs::write(ca.record_path(&a), "{\"serial\":").unwrap();
    std::fs::remove_file(ca.ca("signed/a.example.test.pem")).unwrap();
    let o = ca.run(&["revoke", "--serial", &a, "--reason", "key-compromise"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    ok(&ca.run(&["crl"], &[]));
    assert!(ca.crl_lists(&a), "a's certificate is not on the CRL");
}

/// A record that says issued under a revocation the list holds (revocation-not-in-record,
/// whose hint is now `vouch revoke --serial SERIAL`): the record should say the revocation
/// the CRL carries. revoke --serial makes it say another one (now, the reason given or
/// `unspecified`) and appends a second line for the serial, so the record and `vouch list`
/// disagree with the CRL about when and why (keyCompromise) the certificate was revoked.
#[test]
fn review7_revoke_by_serial_under_a_listed_revocation_keeps_its_time_and_reason() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["revoke", "a.example.test", "--reason", "key-compromise"], &[]));
    let a = ca.serial_of("a.example.test");
    let listed = std::fs::read_to_string(ca.ca("revocations.txt")).unwrap();
    let record = std::fs::read_to_string(ca.record_path(&a)).unwrap();
    ca.edit(&format!("serials/{}/{a}.json", &a[..2]), |t| t.replace("\"revoked\"", "\"issued\""));
    ca.finds(&["revocation-not-in-record"]);
    ok(&ca.run(&["revoke", "--serial", &a], &[]));
    assert_eq!(std::fs::read_to_string(ca.ca("revocations.txt")).unwrap(), listed, "the list changed");
    let now: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(ca.record_path(&a)).unwrap()).unwrap();
    let was: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!((&now["reason"], &now["revoked_at"]), (&was["reason"], &was["revoked_at"]), "{now}");
}

/// A record left in state intent (an older vouch's issuance cut short; verify: intent-left)
/// whose certificate is its certname's current one: `vouch revoke NAME` revokes it, but
/// revoke --serial refuses, saying "no certificate carries it".
#[test]
fn review7_revoke_by_serial_of_an_intent_record_whose_certificate_is_current() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let a = ca.serial_of("a.example.test");
    ca.edit(&format!("serials/{}/{a}.json", &a[..2]), |t| t.replace("\"issued\"", "\"intent\""));
    let o = ca.run(&["revoke", "--serial", &a], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(ca.crl_lists(&a), "a's certificate is not on the CRL");
}

/// An inventory (`DIR/ca/inventory.txt`) vouch may not read (its mode, as an operator's
/// `chmod` leaves it): `vouch store verify` stopped with exit 2 before reporting anything,
/// and its `inventory-unreadable` finding never appeared. It is that finding (exit 1), with
/// the hint to fix the access, not a restore; the checks that do not read it still run (a
/// damaged revocation line is still found), and no certificate is called unlisted. As root
/// a mode stops nothing: verify runs as `nobody` (the store handed to it).
#[test]
fn an_inventory_vouch_may_not_read_is_the_inventory_unreadable_finding() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let inventory = ca.ca("inventory.txt");
    let revocations = ca.ca("revocations.txt");
    let kept = std::fs::read_to_string(&revocations).unwrap_or_default();
    std::fs::write(&revocations, format!("{kept}00 not-a-time garbage line\n")).unwrap();
    std::fs::set_permissions(&inventory, std::fs::Permissions::from_mode(0o000)).unwrap();
    for format in ["jsonl", "text"] {
        let o = run(as_unprivileged(&ca).args(["store", "verify", "--format", format]), None);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("inventory-unreadable"), "{format}: {out}");
        assert!(out.contains("Permission denied"), "{format}: {out}");
        assert!(out.contains(&inventory.display().to_string()), "{format}: {out}");
        if format == "text" {
            assert!(out.contains("give the user vouch runs as read access"), "{out}");
            assert!(!out.contains("restore the inventory"), "{out}");
            assert!(out.contains("2 findings"), "{out}");
        } else {
            let mut kinds: Vec<String> = out
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| v["finding"].as_str().map(str::to_string))
                .collect();
            kinds.sort();
            assert_eq!(kinds, ["inventory-unreadable", "revocation-line-damaged"], "{out}");
        }
    }
    // Readable again, the damaged line removed: nothing to find, both certificates checked.
    std::fs::set_permissions(&inventory, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&revocations, &kept).unwrap();
    let out = ok(&run(as_unprivileged(&ca).args(["store", "verify"]), None));
    assert!(out.contains("2 current certificates"), "{out}");
}

/// A stranger's report: with the write-ahead log not yet checkpointed (right after a `vouch
/// sign`), an inventory vouch may not read made verify exit 2 with a bare "CA store: cannot
/// read …/inventory.txt: Permission denied" (the lock's recovery replays the log, and reads
/// the inventory to do so), not the `inventory-unreadable` finding it reports once the log is
/// checkpointed. Verify reports the finding either way (exit 1, the access hint); another
/// command still stops (exit 2), saying the inventory cannot be read and how to fix it.
#[test]
fn an_inventory_vouch_may_not_read_before_the_log_is_checkpointed_is_the_finding() {
    use std::os::unix::fs::PermissionsExt;
    let ca = Ca::with(&["a.example.test"]);
    // Not settled: the log holds this issuance until the next command takes the lock.
    ca.issue("b.example.test");
    let inventory = ca.ca("inventory.txt");
    std::fs::set_permissions(&inventory, std::fs::Permissions::from_mode(0o000)).unwrap();
    for format in ["jsonl", "text"] {
        let o = run(as_unprivileged(&ca).args(["store", "verify", "--format", format]), None);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("inventory-unreadable"), "{format}: {out}");
        assert!(out.contains("Permission denied"), "{format}: {out}");
        if format == "text" {
            assert!(out.contains("give the user vouch runs as read access"), "{out}");
        }
    }
    let o = run(as_unprivileged(&ca).arg("crl"), None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the inventory cannot be read") && err.contains("read access"), "{err}");
    // Readable again: the log is replayed, both certificates are there and nothing is found.
    std::fs::set_permissions(&inventory, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = ok(&run(as_unprivileged(&ca).args(["store", "verify"]), None));
    assert!(out.contains("2 current certificates"), "{out}");
}
