//! The root CRL through the shared (LDAP) store, against the real binary and each directory
//! server: a private slapd, and a base DN of its own on the test binary's private 389
//! Directory Server (tests/common/ds389.rs). Each scenario is written once, taking the
//! server (`Box<dyn Directory>`), and run by a test on each (`_on_389ds` for 389 DS):
//! a conductor revoked where the root key is (master A, `vouch conductor revoke` with
//! --store) is refused by a further master (B: `ca init --root-cert --root-key`, no root key,
//! no copy of the root CRL) through the hook and through a running `vouch serve`; a root CRL
//! another key signed, or an older one, put in the store is not taken.

mod common;

use common::ds389::Ds389;
use common::ldap_lab::{enroll, slapd_opts, store_env, Directory, Master};
use common::processes::{waits_for_flock, Wait, Watchdog};
use common::slapd::Slapd;
use common::{cli_vouched_csr, ok, run, s, text, vouch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A directory server with the store's containers; master A (`ca init`: the root key) with
/// conductors c1, c2 and c3 (their files in `work`); master B under A's root, without its key.
struct Fleet {
    slapd: Box<dyn Directory>,
    a: PathBuf,
    b: PathBuf,
    work: PathBuf,
    _t: tempfile::TempDir,
}

impl Fleet {
    fn new(slapd: Box<dyn Directory>) -> Fleet {
        let t = tempfile::tempdir().unwrap();
        let work = t.path().to_path_buf();
        let (a, b) = (work.join("a"), work.join("b"));
        ok(&run(vouch().envs(store_env(&*slapd)).args(["--dir", s(&work), "ldap", "init", "--create-base"]), None));
        ok(&run(vouch().args(["--dir", s(&a), "ca", "init"]), None));
        for c in ["c1", "c2", "c3"] {
            let (cert, key) = (work.join(format!("{c}.pem")), work.join(format!("{c}.key")));
            ok(&run(
                vouch().args(["--dir", s(&a), "conductor", "new", c, "--cert-out", s(&cert), "--key-out", s(&key)]),
                None,
            ));
        }
        let (root, root_key) = (a.join("ca/root_crt.pem"), a.join("ca/root_key.pem"));
        ok(&run(
            vouch().args(["--dir", s(&b), "ca", "init", "--root-cert", s(&root), "--root-key", s(&root_key)]),
            None,
        ));
        Fleet { slapd, a, b, work, _t: t }
    }

    /// `vouch --dir DIR` on the shared store.
    fn shared(&self, dir: &Path) -> Command {
        let mut c = vouch();
        c.envs(store_env(&*self.slapd)).args(["--dir", s(dir)]);
        c
    }

    fn cert(&self, c: &str) -> PathBuf {
        self.work.join(format!("{c}.pem"))
    }

    /// Conductor `c` vouches for `certname`: the CSR (PEM).
    fn csr(&self, c: &str, certname: &str) -> Vec<u8> {
        let key = self.work.join(format!("{c}.key"));
        std::fs::read(cli_vouched_csr(&self.work, &self.cert(c), &key, certname)).unwrap()
    }

    /// `vouch autosign CERTNAME` at `dir` with the shared store, the CSR on stdin.
    fn autosign(&self, dir: &Path, c: &str, certname: &str) -> Output {
        let csr = self.csr(c, certname);
        run(self.shared(dir).args(["autosign", certname]), Some(&csr))
    }

    /// Puts `der` in the root CRL's entry, as someone with write access to the store could.
    fn put_in_store(&self, der: &[u8]) {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        self.slapd
            .ldapmodify(&format!(
                "dn: vouchCa=root-crl,{}\nchangetype: modify\nreplace: vouchCertificate\nvouchCertificate:: {b64}\n",
                self.slapd.base()
            ))
            .ok();
    }

    /// The root CRL the store holds (DER).
    fn in_store(&self) -> Vec<u8> {
        use base64::Engine;
        let out = self.slapd.ldapsearch(
            &format!("vouchCa=root-crl,{}", self.slapd.base()),
            "(objectClass=*)",
            &["vouchCertificate"],
        );
        let line = out.ok().lines().find_map(|l| l.strip_prefix("vouchCertificate:: ")).map(str::to_string);
        base64::engine::general_purpose::STANDARD
            .decode(line.unwrap_or_else(|| panic!("no CRL in the store: {out}")))
            .unwrap()
    }
}

/// A private slapd.
fn openldap() -> Box<dyn Directory> {
    Box::new(Slapd::start(&slapd_opts()))
}

/// A base DN of its own (`ou=NAME`) on the test binary's 389 Directory Server.
fn on_389ds(name: &str) -> Box<dyn Directory> {
    Box::new(Ds389::store(name))
}

/// The DER of a PEM CRL file.
fn crl_der(path: &Path) -> Vec<u8> {
    let pem = std::fs::read(path).unwrap();
    vouch::encoding::pem::find(&pem, &["X509 CRL"]).unwrap().1
}

fn crl_number(der: &[u8]) -> u128 {
    let (_, crl) = x509_parser::parse_x509_crl(der).unwrap();
    crl.crl_number().unwrap().to_u64_digits().iter().rev().fold(0u128, |n, d| (n << 64) | u128::from(*d))
}

/// A CRL under the name of `a`'s root, signed by another key, numbered far higher than any
/// vouch writes, listing nothing: taken, it would drop every revocation.
fn forged_crl(a: &Path) -> Vec<u8> {
    let root_pem = std::fs::read_to_string(a.join("ca/root_crt.pem")).unwrap();
    let rogue_key = rcgen::KeyPair::generate().unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&root_pem, &rogue_key).unwrap();
    let now = time::OffsetDateTime::now_utc();
    rcgen::CertificateRevocationListParams {
        this_update: now,
        next_update: now + time::Duration::days(7),
        crl_number: rcgen::SerialNumber::from_slice(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        issuing_distribution_point: None,
        revoked_certs: vec![],
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&issuer)
    .unwrap()
    .der()
    .to_vec()
}

/// Exit 1 with `[code]` among the reasons.
fn refused_with(o: &Output, code: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert!(text(o).contains(&format!("[{code}]")), "{}", text(o));
}

/// The security gap: a master without the root key kept granting what a revoked conductor
/// vouched for until someone copied the root CRL to it by hand. Now the revocation made at A
/// with --store publishes the root CRL, and B (no root key, nothing copied) refuses the
/// conductor: the hook at its next run, and a running `vouch serve` after its maintenance
/// (every 5 s with a shared store), with no restart. Before the revocation both granted it.
#[test]
fn a_conductor_revoked_at_the_root_is_refused_by_another_master_through_the_shared_store() {
    revoked_conductor_refused_elsewhere(openldap());
}

#[test]
fn a_conductor_revoked_at_the_root_is_refused_by_another_master_through_the_shared_store_on_389ds() {
    revoked_conductor_refused_elsewhere(on_389ds("revoked_conductor"));
}

fn revoked_conductor_refused_elsewhere(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    // A second further master, serving: started before the revocation.
    let b2 = f.work.join("b2");
    ok(&run(
        vouch()
            .args(["--dir", s(&b2), "ca", "init", "--root-cert", s(&f.a.join("ca/root_crt.pem"))])
            .args(["--root-key", s(&f.a.join("ca/root_key.pem"))]),
        None,
    ));
    let server = Master::start(&*f.slapd, &b2, "ca-b2.test");
    let watchdog = Watchdog::kill_after(server.pid(), "vouch serve", Duration::from_secs(180));

    // Before: B's hook and B2's server grant what c1 vouches for.
    ok(&f.autosign(&f.b, "c1", "n1.example.test"));
    let (status, said, cert) = enroll(&server, "n2.example.test", &f.csr("c1", "n2.example.test"));
    assert_eq!(status, 200, "{said}");
    assert!(cert.is_some(), "c1's node is granted before the revocation: {}", server.log());

    // A revokes c1 with the shared store: the root CRL is published.
    let out = ok(&run(f.shared(&f.a).args(["conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    assert!(out.contains("revoked conductor CN=c1"), "{out}");
    assert!(out.contains("published the root CRL"), "{out}");
    assert_eq!(f.in_store(), crl_der(&f.a.join("ca/root_crl.pem")), "the store holds A's root CRL");
    assert!(!f.b.join("ca/root_crl.pem").exists(), "nothing was copied to B");

    // B's hook takes it when it opens the store, and refuses c1; c2 is still granted.
    refused_with(&f.autosign(&f.b, "c1", "n3.example.test"), "conductor-revoked");
    assert_eq!(crl_der(&f.b.join("ca/root_crl.pem")), f.in_store(), "B holds the root's CRL now");
    ok(&f.autosign(&f.b, "c2", "n4.example.test"));

    // B2's server takes it in its maintenance (no restart): its file appears, then c1 is refused.
    Wait::up_to(Duration::from_secs(60))
        .showing(|| server.log())
        .until("a root CRL taken by the server", || b2.join("ca/root_crl.pem").exists());
    let (status, said, cert) = enroll(&server, "n5.example.test", &f.csr("c1", "n5.example.test"));
    assert_eq!(status, 200, "{said}");
    assert!(cert.is_none(), "no certificate for a node the revoked conductor vouched for");
    let listed = ok(&run(f.shared(&b2).args(["list", "--format", "json"]), None));
    let entries: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let entry = entries.iter().find(|e| e["name"] == "n5.example.test").unwrap_or_else(|| panic!("{listed}"));
    assert!(entry["reasons"].to_string().contains("conductor-revoked"), "{entry}");
    let (_, said, cert) = enroll(&server, "n6.example.test", &f.csr("c2", "n6.example.test"));
    assert!(cert.is_some(), "c2's node is still granted: {said}");
    assert!(server.log().contains("shared-root-crl-taken"), "{}", server.log());

    // A forged root CRL (another key, the root's name, numbered far higher, listing nothing)
    // put in the store: the server's maintenance refuses it, says so, counts it; c1 stays refused.
    let held = std::fs::read(b2.join("ca/root_crl.pem")).unwrap();
    f.put_in_store(&forged_crl(&f.a));
    Wait::up_to(Duration::from_secs(60))
        .showing(|| server.log())
        .until("a refusal logged", || server.log().contains("shared-root-crl-refused"));
    assert_eq!(std::fs::read(b2.join("ca/root_crl.pem")).unwrap(), held, "B2's root CRL unchanged");
    let (_, said, cert) = enroll(&server, "n7.example.test", &f.csr("c1", "n7.example.test"));
    assert!(cert.is_none(), "c1 stays refused: {said}");

    drop(watchdog);
    drop(server);
}

/// The attacks on the shared entry: whoever may write the store puts there (1) a root CRL
/// another key signed under the root's name, numbered far higher, listing nothing the
/// fleet revoked (it would drop every revocation), (2) an older genuine root CRL (a rollback).
/// B takes neither: its root_crl.pem stays byte for byte, the conductor revoked stays
/// refused, others stay granted. And `publish-crl` never puts an older CRL in place of a
/// newer one (published twice, the older second: the newer stays).
#[test]
fn a_forged_or_older_root_crl_in_the_store_is_not_taken() {
    forged_or_older_not_taken(openldap());
}

#[test]
fn a_forged_or_older_root_crl_in_the_store_is_not_taken_on_389ds() {
    forged_or_older_not_taken(on_389ds("forged_or_older"));
}

fn forged_or_older_not_taken(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    // Revoked without the store (a file-store command), c1 then c3: two root CRLs.
    ok(&run(vouch().args(["--dir", s(&f.a), "conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    let older = f.work.join("older_crl.pem");
    std::fs::copy(f.a.join("ca/root_crl.pem"), &older).unwrap();
    ok(&run(vouch().args(["--dir", s(&f.a), "conductor", "revoke", "--cert", s(&f.cert("c3"))]), None));
    let newer = crl_der(&f.a.join("ca/root_crl.pem"));
    assert!(crl_number(&newer) > crl_number(&crl_der(&older)));

    // Published, then the older published second: the store keeps the newer.
    let out = ok(&run(f.shared(&f.a).args(["conductor", "publish-crl"]), None));
    assert!(out.contains("published the root CRL"), "{out}");
    let again = ok(&run(f.shared(&f.a).args(["conductor", "publish-crl"]), None));
    assert!(again.contains("nothing changed"), "idempotent: {again}");
    std::fs::copy(&older, f.a.join("ca/root_crl.pem")).unwrap();
    let kept = ok(&run(f.shared(&f.a).args(["conductor", "publish-crl"]), None));
    assert!(kept.contains("numbered as high or higher") && kept.contains("nothing changed"), "{kept}");
    assert_eq!(f.in_store(), newer, "the older CRL did not replace the newer");

    // B takes the newer one: c3 (listed only there) is refused.
    refused_with(&f.autosign(&f.b, "c3", "n1.example.test"), "conductor-revoked");
    let b_crl = f.b.join("ca/root_crl.pem");
    let held = std::fs::read(&b_crl).unwrap();
    assert_eq!(crl_der(&b_crl), newer);

    // (2) The older one put in the entry directly: not taken.
    f.put_in_store(&crl_der(&older));
    let o = f.autosign(&f.b, "c2", "n2.example.test");
    ok(&o);
    assert!(text(&o).contains("shared-root-crl-refused") && text(&o).contains("lower"), "{}", text(&o));
    assert_eq!(std::fs::read(&b_crl).unwrap(), held, "B's root CRL unchanged");
    refused_with(&f.autosign(&f.b, "c3", "n3.example.test"), "conductor-revoked");

    // (1) A CRL under the root's name, signed by another key, numbered far higher, listing
    // nothing: not taken; c3 stays refused, c2 granted.
    f.put_in_store(&forged_crl(&f.a));
    let o = f.autosign(&f.b, "c2", "n4.example.test");
    ok(&o);
    assert!(text(&o).contains("shared-root-crl-refused") && text(&o).contains("not signed by"), "{}", text(&o));
    assert_eq!(std::fs::read(&b_crl).unwrap(), held, "B's root CRL unchanged");
    refused_with(&f.autosign(&f.b, "c3", "n5.example.test"), "conductor-revoked");
    refused_with(&f.autosign(&f.b, "c1", "n6.example.test"), "conductor-revoked");

    // Where the root key is, publish-crl puts the genuine one back in place of the forgery.
    std::fs::write(f.a.join("ca/root_crl.pem"), vouch::encoding::pem::encode("X509 CRL", &newer)).unwrap();
    let out = ok(&run(f.shared(&f.a).args(["conductor", "publish-crl"]), None));
    assert!(out.contains("published the root CRL"), "{out}");
    assert_eq!(f.in_store(), newer);
    // An entry left without its value (an operator's edit) is filled again.
    f.slapd
        .ldapmodify(&format!("dn: vouchCa=root-crl,{}\nchangetype: modify\ndelete: vouchCertificate\n", f.slapd.base()))
        .ok();
    let out = ok(&run(f.shared(&f.a).args(["conductor", "publish-crl"]), None));
    assert!(out.contains("published the root CRL"), "{out}");
    assert_eq!(f.in_store(), newer);
}

/// Without a shared store there is nothing to publish to: a clear error, with the hint.
#[test]
fn publish_crl_without_a_shared_store_says_what_to_give() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    ok(&run(vouch().args(["--dir", s(&a), "ca", "init"]), None));
    let o = run(vouch().env_remove("VOUCH_STORE").args(["--dir", s(&a), "conductor", "publish-crl"]), None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a shared one") && err.contains("--store ldap://"), "{err}");
}

/// Masters publishing at the same time (three copies of the root's data directory, each a
/// copy of the one before with one more conductor revoked, so each root CRL lists what the
/// ones before it list; all publishing at once, twice): the compare-and-swap leaves the
/// highest-numbered one in the store, whatever the order the writes landed in. (Copies
/// whose CRLs list different conductors are not published over each other:
/// `review_a_root_crl_that_drops_a_revocation_is_neither_published_nor_taken`.)
#[test]
fn concurrent_publications_leave_the_highest_numbered_root_crl() {
    concurrent_publications(openldap());
}

#[test]
fn concurrent_publications_leave_the_highest_numbered_root_crl_on_389ds() {
    concurrent_publications(on_389ds("concurrent_publications"));
}

fn concurrent_publications(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    let mut crls = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (i, c) in ["c1", "c2", "c3"].iter().enumerate() {
        let d = f.work.join(format!("root{i}"));
        let from = dirs.last().cloned().unwrap_or_else(|| f.a.clone());
        let cp = Command::new("cp").args(["-a", s(&from), s(&d)]).status().unwrap();
        assert!(cp.success());
        ok(&run(vouch().args(["--dir", s(&d), "conductor", "revoke", "--cert", s(&f.cert(c))]), None));
        crls.push(crl_der(&d.join("ca/root_crl.pem")));
        dirs.push(d);
    }
    let highest = crls.iter().max_by_key(|d| crl_number(d)).unwrap().clone();
    for _ in 0..2 {
        let children: Vec<_> = dirs
            .iter()
            .rev()
            .map(|d| {
                f.shared(d)
                    .args(["conductor", "publish-crl"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            ok(&c.wait_with_output().unwrap());
        }
        assert_eq!(f.in_store(), highest);
    }
}

/// Review: the root key's data directory restored from a backup taken before c1 was revoked
/// (or a second copy of it) revokes c3 with --store. Its root CRL is numbered higher (the
/// number is at least the time) but does not list c1. Taken by B it would drop c1's
/// revocation across the fleet: a higher number is not a CRL that revokes at least as much.
/// It is not published in place of the one listing c1 (the command says which serials it
/// misses), nor taken by B if put in the store: B keeps refusing c1.
#[test]
fn review_a_root_crl_that_drops_a_revocation_is_neither_published_nor_taken() {
    crl_dropping_a_revocation_refused(openldap());
}

#[test]
fn review_a_root_crl_that_drops_a_revocation_is_neither_published_nor_taken_on_389ds() {
    crl_dropping_a_revocation_refused(on_389ds("dropping_a_revocation"));
}

fn crl_dropping_a_revocation_refused(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    let backup = f.work.join("a-backup");
    assert!(Command::new("cp").args(["-a", s(&f.a), s(&backup)]).status().unwrap().success());
    ok(&run(f.shared(&f.a).args(["conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    refused_with(&f.autosign(&f.b, "c1", "n1.example.test"), "conductor-revoked");
    let listing_c1 = f.in_store();

    // The restored copy revokes c3 with the shared store: its CRL lists c3, not c1.
    let o = run(f.shared(&backup).args(["conductor", "revoke", "--cert", s(&f.cert("c3"))]), None);
    let dropping = crl_der(&backup.join("ca/root_crl.pem"));
    assert!(crl_number(&dropping) > crl_number(&listing_c1));
    assert_ne!(o.status.code(), Some(0), "published a root CRL without c1: {}", text(&o));
    assert!(text(&o).contains("does not list"), "{}", text(&o));
    assert_eq!(f.in_store(), listing_c1, "the store keeps the CRL listing c1");
    refused_with(&f.autosign(&f.b, "c1", "n2.example.test"), "conductor-revoked");

    // Put in the store directly (publish-crl of an older vouch, an operator's ldapmodify): B
    // does not take it, says why, and keeps refusing c1.
    f.put_in_store(&dropping);
    let o = f.autosign(&f.b, "c1", "n3.example.test");
    refused_with(&o, "conductor-revoked");
    assert!(text(&o).contains("shared-root-crl-refused") && text(&o).contains("does not list"), "{}", text(&o));
    assert_eq!(crl_der(&f.b.join("ca/root_crl.pem")), listing_c1);
}

/// Review: two processes of one master take the store's root CRL at once (the hook and
/// `vouch serve`'s maintenance, or two hooks). One read the store's CRL N before the root
/// published M (> N); the other took M. Comparing with the local file and writing it were
/// not one step: the first could write N over M (a rollback, until the next maintenance
/// run), dropping the revocations only M lists. The comparison and the write are made
/// under an exclusive `flock` on `DIR/ca`: here the test holds it, puts M there meanwhile
/// (what the other process would have written), and the hook, which read N from the store,
/// keeps M.
#[test]
fn review_the_shared_root_crl_is_compared_and_written_under_a_lock() {
    compared_and_written_under_a_lock(openldap());
}

#[test]
fn review_the_shared_root_crl_is_compared_and_written_under_a_lock_on_389ds() {
    compared_and_written_under_a_lock(on_389ds("under_a_lock"));
}

fn compared_and_written_under_a_lock(d: Box<dyn Directory>) {
    use std::os::unix::fs::MetadataExt;
    let f = Fleet::new(d);
    ok(&run(f.shared(&f.a).args(["conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    // M: c3 too, not published (a file-store command, for which A's directory leaves the
    // shared store a moment: its marker is set aside), written to B by "the other process".
    let marker = f.a.join("ca/MOVED-TO-SHARED-STORE");
    let kept = std::fs::read(&marker).unwrap();
    std::fs::remove_file(&marker).unwrap();
    ok(&run(vouch().args(["--dir", s(&f.a), "conductor", "revoke", "--cert", s(&f.cert("c3"))]), None));
    std::fs::write(&marker, kept).unwrap();
    let newer = std::fs::read(f.a.join("ca/root_crl.pem")).unwrap();
    assert!(crl_number(&crl_der(&f.a.join("ca/root_crl.pem"))) > crl_number(&f.in_store()));

    let held = std::fs::File::open(f.b.join("ca")).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let ino = held.metadata().unwrap().ino();
    let csr = f.csr("c3", "n1.example.test");
    let mut hook = f
        .shared(&f.b)
        .args(["autosign", "n1.example.test"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        hook.stdin.take().unwrap().write_all(&csr).unwrap();
    }
    let start = Instant::now();
    while !waits_for_flock(hook.id(), ino) {
        if start.elapsed() > Duration::from_secs(60) || hook.try_wait().unwrap().is_some() {
            let _ = hook.kill();
            panic!("the hook took the store's root CRL without waiting for the lock on DIR/ca");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(f.b.join("ca/root_crl.pem"), &newer).unwrap();
    drop(held);
    let o = hook.wait_with_output().unwrap();
    refused_with(&o, "conductor-revoked");
    assert_eq!(std::fs::read(f.b.join("ca/root_crl.pem")).unwrap(), newer, "B's newer root CRL was rolled back");
}

/// Review: a master CA's own CRL copied to `DIR/ca/root_crl.pem` by mistake (the hint of
/// `root-crl-unreadable` warns against it) refuses every conductor of the root
/// (`conductor-revocation-unknown`). Its CRL number is the master CA's, unrelated to the
/// root's: compared with it, the store's genuine root CRL was refused as "older" (the master
/// CA's CRL written after it), so the store could never repair the master. A local CRL
/// whose issuer is not the root is no root CRL: the store's genuine one replaces it.
#[test]
fn review_a_master_cas_crl_in_place_of_the_root_crl_is_replaced_by_the_stores() {
    master_crl_in_place_replaced(openldap());
}

#[test]
fn review_a_master_cas_crl_in_place_of_the_root_crl_is_replaced_by_the_stores_on_389ds() {
    master_crl_in_place_replaced(on_389ds("master_crl_in_place"));
}

fn master_crl_in_place_replaced(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    ok(&run(f.shared(&f.a).args(["conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    // B's CRL written again after the root's (its number higher), copied over root_crl.pem.
    std::thread::sleep(Duration::from_millis(5));
    let _ = std::fs::remove_file(f.b.join("ca/crl_next_update"));
    ok(&run(vouch().args(["--dir", s(&f.b), "crl"]), None));
    let own = crl_der(&f.b.join("ca/ca_crl.pem"));
    assert!(crl_number(&own) > crl_number(&f.in_store()), "B's CRL is numbered higher");
    std::fs::copy(f.b.join("ca/ca_crl.pem"), f.b.join("ca/root_crl.pem")).unwrap();

    let o = f.autosign(&f.b, "c2", "n1.example.test");
    ok(&o);
    assert_eq!(crl_der(&f.b.join("ca/root_crl.pem")), f.in_store(), "B holds the root's CRL: {}", text(&o));
    refused_with(&f.autosign(&f.b, "c1", "n2.example.test"), "conductor-revoked");
}

/// Review: `DIR/ca/root_crl.pem` a link (an operator's, or one planted) to another file
/// holding an older root CRL. The store's newer one replaces the link itself (a rename):
/// the file it pointed to is not written through it.
#[test]
fn review_a_link_at_root_crl_pem_is_replaced_not_written_through() {
    link_replaced_not_written_through(openldap());
}

#[test]
fn review_a_link_at_root_crl_pem_is_replaced_not_written_through_on_389ds() {
    link_replaced_not_written_through(on_389ds("link_at_root_crl"));
}

fn link_replaced_not_written_through(d: Box<dyn Directory>) {
    let f = Fleet::new(d);
    ok(&run(vouch().args(["--dir", s(&f.a), "conductor", "revoke", "--cert", s(&f.cert("c1"))]), None));
    let victim = f.work.join("victim.pem");
    std::fs::copy(f.a.join("ca/root_crl.pem"), &victim).unwrap();
    let before = std::fs::read(&victim).unwrap();
    ok(&run(f.shared(&f.a).args(["conductor", "revoke", "--cert", s(&f.cert("c3"))]), None));
    std::os::unix::fs::symlink(&victim, f.b.join("ca/root_crl.pem")).unwrap();

    refused_with(&f.autosign(&f.b, "c3", "n1.example.test"), "conductor-revoked");
    assert_eq!(std::fs::read(&victim).unwrap(), before, "the link's target was written through");
    let meta = std::fs::symlink_metadata(f.b.join("ca/root_crl.pem")).unwrap();
    assert!(meta.file_type().is_file(), "the link was replaced by the file");
    assert_eq!(crl_der(&f.b.join("ca/root_crl.pem")), f.in_store());
}
