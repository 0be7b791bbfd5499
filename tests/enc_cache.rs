//! Issue 36: the classifier's cache (`vouch enc --ca-url`) and `vouch crl --fetch`'s file
//! hold CA material per CA, checked against the `--cacert` of each call. Two CAs served one
//! after the other on one address; a bundle that gains a master CA (a second master under
//! the same root, as docs/ldap.md makes it); a CRL the bundle's CAs did not sign, left out
//! with a warning; a host without syslog told once. Every `vouch serve` runs on a loopback
//! port in a scratch directory and is stopped by its PID.

mod common;

use common::processes::{free_port, read, Guard};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// `vouch --dir DIR serve --listen 127.0.0.1:PORT`, ready; stopped (SIGTERM) on drop.
fn serve(dir: &Path, port: u16) -> Guard {
    let log = dir.with_extension(format!("{port}.log"));
    let (child, _, _) =
        start_serve(vouch().args(["--dir", s(dir), "serve", "--listen", &format!("127.0.0.1:{port}")]), &log);
    Guard { child, what: "vouch serve", grace: Duration::from_secs(15) }
}

/// Stops a `vouch serve` and waits for it to exit, so that the next one can take its address.
fn stop(mut g: Guard) {
    // SAFETY: kill(2) on the PID of a child this test started and has not reaped.
    unsafe { libc::kill(g.pid(), libc::SIGTERM) };
    let status = g.child.wait().unwrap();
    assert!(status.success(), "vouch serve exited {status:?}");
}

/// A CA in `dir` (made by a first `vouch serve`, unless `dir` holds one already) that has
/// issued `certname`'s certificate with the CLI, as an operator does, vouched for by the
/// conductor of `conductor` (a data directory whose first `vouch serve` made one).
fn ca_with_node(dir: &Path, conductor: &Path, certname: &str) {
    stop(serve(dir, free_port()));
    let w = dir.with_extension("work");
    std::fs::create_dir_all(&w).unwrap();
    let csr = cli_vouched_csr(
        &w,
        &conductor.join("conductor/conductor_crt.pem"),
        &conductor.join("conductor/conductor_key.pem"),
        certname,
    );
    ok(&run(vouch().args(["--dir", s(dir), "sign", "--csr", s(&csr), "--out", s(&w.join("cert.pem"))]), None));
}

/// A compile server's classifier: its cache and log under `tmp`.
struct Enc {
    tmp: PathBuf,
    url: String,
}

impl Enc {
    /// `vouch enc --ca-url URL --cacert BUNDLE [extra] CERTNAME`, logging to a file.
    fn run(&self, bundle: &Path, certname: &str, extra: &[&str]) -> Output {
        run(
            vouch()
                .args(["enc", "--ca-url", &self.url, "--cacert", s(bundle), "--cache-dir", s(&self.tmp.join("cache"))])
                .args(["--log", s(&self.tmp.join("enc.log"))])
                .args(extra)
                .arg(certname),
            None,
        )
    }

    /// Classified from its certificate, at once (exit 0, the classification printed).
    fn classifies(&self, bundle: &Path, certname: &str, extra: &[&str]) {
        let o = self.run(bundle, certname, extra);
        assert_eq!(o.status.code(), Some(0), "{certname} was refused: {}\nlog: {}", text(&o), self.log());
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("\"vouch_source\": \"certificate\"") && out.contains("classes"), "{out}");
    }

    /// `vouch crl --fetch --ca-url URL --cacert BUNDLE --out OUT`.
    fn crl_fetch(&self, bundle: &Path, out: &Path) -> Output {
        run(vouch().args(["crl", "--fetch", "--ca-url", &self.url, "--cacert", s(bundle), "--out", s(out)]), None)
    }

    fn log(&self) -> String {
        read(&self.tmp.join("enc.log"))
    }
}

/// The CRLs of a PEM file, each verified by `openssl crl -CAfile BUNDLE` (which checks the
/// signature with the issuer it finds there): how many there are and whether all verify.
fn crls_verify(file: &Path, bundle: &Path) -> (usize, bool) {
    let pems = vouch::encoding::pem::find_all(&std::fs::read(file).unwrap(), "X509 CRL").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let all = pems.iter().enumerate().all(|(i, der)| {
        let one = dir.path().join(format!("{i}.pem"));
        std::fs::write(&one, vouch::encoding::pem::encode("X509 CRL", der)).unwrap();
        let o = run(
            std::process::Command::new("openssl").args(["crl", "-noout", "-in", s(&one), "-CAfile", s(bundle)]),
            None,
        );
        o.status.success() && String::from_utf8_lossy(&o.stderr).contains("verify OK")
    });
    (pems.len(), all)
}

/// The reproduction: CA A served, its node classified; A stopped and CA B (another
/// data directory, its own `--cacert`) served on the same address: B's node is classified
/// at once (the cached CRL is A's: not counted, fetched again, once), and `vouch crl
/// --fetch` replaces A's CRLs in its file with B's (not a rollback: A's are no measure).
#[test]
fn a_ca_served_after_another_on_one_address_is_trusted_at_once() {
    require("openssl", "openssl");
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("A"), tmp.path().join("B"));
    ca_with_node(&a, &a, "n-a.test");
    ca_with_node(&b, &b, "n-b.test");
    let port = free_port();
    let enc = Enc { tmp: tmp.path().to_path_buf(), url: format!("https://localhost:{port}") };
    let (bundle_a, bundle_b) = (a.join("ca/ca_bundle.pem"), b.join("ca/ca_bundle.pem"));
    let hostcrl = tmp.path().join("hostcrl.pem");

    let served = serve(&a, port);
    enc.classifies(&bundle_a, "n-a.test", &[]);
    ok(&enc.crl_fetch(&bundle_a, &hostcrl));
    enc.classifies(&bundle_a, "n-a.test", &["--crl", s(&hostcrl)]);
    stop(served);

    let served = serve(&b, port);
    // The cache's CRL (A's) is fresh, and A's signature does not verify with B's key.
    enc.classifies(&bundle_b, "n-b.test", &[]);
    assert_eq!(crls_verify(&tmp.path().join("cache/crl.pem"), &bundle_b), (2, true), "the cache holds B's CRLs");
    // The file written for A is fetched whole for B's bundle, never measured against A's CRLs.
    let o = enc.crl_fetch(&bundle_b, &hostcrl);
    assert!(o.status.success() && text(&o).contains("wrote"), "{}", text(&o));
    assert_eq!(crls_verify(&hostcrl, &bundle_b), (2, true), "hostcrl holds B's CRLs");
    enc.classifies(&bundle_b, "n-b.test", &["--crl", s(&hostcrl)]);
    assert!(!enc.log().contains("refused"), "{}", enc.log());
    // A's node, cached and fresh, is A's: not answered under B's bundle; dropped and asked
    // for again, and B has no certificate for it.
    let o = enc.run(&bundle_b, "n-a.test", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no certificate for n-a.test"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(tmp.path().join("cache/serial")).unwrap().count(), 1, "only n-b.test is cached");
    stop(served);
}

/// A compile server whose bundle gains a master CA (a second master under the same root,
/// named as the first) keeps classifying without a refusal: the first master's node at once
/// under the new bundle, and the second master's node when the second master answers on
/// the same address (the cached CRLs hold none of its CA: fetched again, once). A bundle
/// without the master whose CRL the CA sends: that CRL is left out with a warning. A node
/// whose master's CRL is in neither a `crl` file nor the CA's answer is refused with that
/// cause (`CrlNotFromBundle`), not as an invalid certificate.
#[test]
fn a_bundle_that_gains_a_master_ca_keeps_classifying() {
    require("openssl", "openssl");
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    ca_with_node(&m1, &m1, "n-1.test");
    ok(&run(
        vouch()
            .args(["--dir", s(&m2), "ca", "init", "--root-cert", s(&m1.join("ca/root_crt.pem"))])
            .args(["--root-key", s(&m1.join("ca/root_key.pem"))]),
        None,
    ));
    // Master 2 has no root key: the root's CRL is copied to it (docs/operator-guide.md,
    // "Revoking a conductor"), and master 1's conductor vouches (the same root).
    std::fs::copy(m1.join("ca/root_crl.pem"), m2.join("ca/root_crl.pem")).unwrap();
    ca_with_node(&m2, &m1, "n-2.test");
    let bundle1 = m1.join("ca/ca_bundle.pem");
    // The bundle with both masters: the second master's CA, then the first's bundle.
    let bundle2 = tmp.path().join("bundle2.pem");
    let gained = [std::fs::read(m2.join("ca/ca_crt.pem")).unwrap(), std::fs::read(&bundle1).unwrap()].concat();
    std::fs::write(&bundle2, gained).unwrap();
    let port = free_port();
    let enc = Enc { tmp: tmp.path().to_path_buf(), url: format!("https://localhost:{port}") };
    let hostcrl = tmp.path().join("hostcrl.pem");

    let served = serve(&m1, port);
    enc.classifies(&bundle1, "n-1.test", &[]);
    enc.classifies(&bundle2, "n-1.test", &[]);
    ok(&enc.crl_fetch(&bundle2, &hostcrl));
    enc.classifies(&bundle2, "n-1.test", &["--crl", s(&hostcrl)]);
    // A bundle of the second master only: the first master's CRL in the answer is left out.
    let only2 = m2.join("ca/ca_bundle.pem");
    let stray = tmp.path().join("stray.pem");
    let o = enc.crl_fetch(&only2, &stray);
    assert!(o.status.success(), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("warning") && said.contains("left out"), "{}", text(&o));
    assert_eq!(crls_verify(&stray, &only2), (1, true), "only the root's CRL is written");
    stop(served);

    // The second master answers on the same address; its node, then the first's, cached.
    let served = serve(&m2, port);
    enc.classifies(&bundle2, "n-2.test", &[]);
    enc.classifies(&bundle2, "n-2.test", &[]);
    assert!(!enc.log().contains("refused"), "{}", enc.log());
    // A `crl` file fetched from the first master lacks the second master's CRL: the node is
    // refused with that cause (not its certificate's), until `vouch crl --fetch` runs.
    let o = enc.run(&bundle2, "n-2.test", &["--crl", s(&hostcrl)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{} holds no CRL signed by", hostcrl.display())), "{err}");
    assert!(err.contains("vouch crl --fetch"), "the hint names the fix: {err}");
    ok(&enc.crl_fetch(&bundle2, &hostcrl));
    enc.classifies(&bundle2, "n-2.test", &["--crl", s(&hostcrl)]);
    // The first master's node, while only the second master answers (no shared store: it
    // sends no CRL of the first master's CA): the first master's CRL held before is kept in
    // the cache (dropped, an older one could take its place later), so its node is still
    // classified, against that CRL.
    enc.classifies(&bundle2, "n-1.test", &[]);
    stop(served);
}

/// Without `/dev/log` (a container), the classifier says once that syslog cannot be
/// written, not on every call; it remembers that in its cache directory.
#[test]
fn a_host_without_syslog_is_told_once() {
    if Path::new("/dev/log").exists() {
        eprintln!("this host has /dev/log: syslog is written, there is no notice to check");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ca");
    ca_with_node(&dir, &dir, "n.test");
    let port = free_port();
    let served = serve(&dir, port);
    let cache = tmp.path().join("cache");
    let enc = |certname: &str| {
        run(
            vouch().args(["enc", "--ca-url", &format!("https://localhost:{port}")]).args([
                "--cacert",
                s(&dir.join("ca/ca_bundle.pem")),
                "--cache-dir",
                s(&cache),
                certname,
            ]),
            None,
        )
    };
    // Refusals are logged: an unknown node, three times.
    let mut notices = 0;
    for _ in 0..3 {
        let o = enc("unknown.test");
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("cannot log"), "{err}");
        notices += err.matches("syslog cannot be written").count();
    }
    assert_eq!(notices, 1, "the notice is given once");
    assert!(cache.join("syslog-unavailable").exists());
    let o = enc("n.test");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stderr.is_empty(), "{}", text(&o));
    stop(served);
}
