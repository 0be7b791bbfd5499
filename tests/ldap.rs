//! The shared store (issue 15): several masters, one fleet, against the real vouch binary
//! and each directory server: private slapd instances (tests/common/slapd.rs) and the test
//! binary's private 389 Directory Server (tests/common/ds389.rs). A scenario is written once,
//! taking the server (`&dyn Directory`), and run by a test on each (`_on_389ds` for 389 DS);
//! the few that stay on OpenLDAP say why.

mod common;

use common::agents::{csr_for, p256};
use common::ds389::{Ds389, Ds389Store, SUFFIX};
use common::ldap_lab::{enroll, slapd_opts, store_env, Directory, Master, BASE};
use common::processes::{wait_until, Wait};
use common::slapd::Slapd;
use common::{ok, run, s, text, vouch};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vouch::serve::client::{tls_config, Client};
const CLASSIFICATION: &str = "classes:\n  - role::web\nparameters:\n  tier: front\n";

/// `vouch` on the LDAP store of `slapd`, in data directory `dir`.
fn v(slapd: &dyn Directory, dir: &Path) -> Command {
    let mut c = vouch();
    c.envs(store_env(slapd)).args(["--dir", s(dir)]);
    c
}

/// A started slapd with the store's containers (`vouch ldap init`, twice: idempotent).
fn store() -> Slapd {
    let slapd = Slapd::start(&slapd_opts());
    let tmp = slapd.dir().to_path_buf();
    // Without --create-base a base DN that does not exist is refused (a typo never makes a
    // second, empty store).
    let typo = v(&slapd, &tmp).args(["ldap", "init"]).output().unwrap();
    assert_eq!(typo.status.code(), Some(2), "{}", text(&typo));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("--create-base"), "{}", text(&typo));
    let first = ok(&v(&slapd, &tmp).args(["ldap", "init", "--create-base"]).output().unwrap());
    assert!(first.contains(&format!("created ou=journal,{BASE}")), "{first}");
    let again = ok(&v(&slapd, &tmp).args(["ldap", "init"]).output().unwrap());
    assert!(again.contains("nothing to do"), "{again}");
    slapd
}

/// Two masters' data directories: D1 made by `vouch serve`'s first run (root, master,
/// conductor), D2 a further master under D1's root (`vouch ca init --root-cert --root-key`).
fn two_masters(slapd: &dyn Directory, base: &Path) -> (Master, Master) {
    let (d1, d2) = (base.join("m1"), base.join("m2"));
    let m1 = Master::start(slapd, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start(slapd, &d2, "ca2.test");
    (m1, m2)
}

/// Version 2 attributes for `certname` from D1's conductor, classified as [`CLASSIFICATION`].
fn vouched(d1: &Path, certname: &str) -> vouch::vouching::attrs::CsrAttributes {
    common::agents::vouched(d1, certname, CLASSIFICATION)
}

fn spki_of(pem: &[u8]) -> Vec<u8> {
    let (_, der) = vouch::encoding::pem::find(pem, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    c.public_key().raw.to_vec()
}

fn serial_of(pem: &[u8]) -> String {
    let (_, der) = vouch::encoding::pem::find(pem, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    vouch::encoding::hex(c.raw_serial())
}

/// The reasons a pending request under `name` was refused for (as `vouch list` shows them).
fn pending_reasons(slapd: &dyn Directory, dir: &Path, name: &str) -> String {
    let l = serde_json::from_str::<Vec<serde_json::Value>>(&ok(&v(slapd, dir)
        .args(["list", "--format", "json"])
        .output()
        .unwrap()))
    .unwrap();
    l.iter().find(|e| e["name"] == name).map(|e| e["reasons"].to_string()).unwrap_or_default()
}

/// Refused as Puppet Server answers a refusing hook: 200, no certificate, the request
/// pending with `code` among its reasons.
fn assert_refused(slapd: &dyn Directory, dir: &Path, name: &str, r: &(u16, String, Option<Vec<u8>>), code: &str) {
    assert_eq!(r.0, 200, "{name}: {}", r.1);
    assert!(r.2.is_none(), "{name}: a certificate was issued");
    let reasons = pending_reasons(slapd, dir, name);
    assert!(reasons.contains(code), "{name}: pending for {reasons}, not {code}");
}

fn list(slapd: &dyn Directory, dir: &Path) -> Vec<serde_json::Value> {
    serde_json::from_str(&ok(&v(slapd, dir).args(["list", "--all", "--format", "json"]).output().unwrap())).unwrap()
}

/// The serials on a CRL (PEM) as openssl reads it.
fn crl_serials(pem: &[u8]) -> Vec<String> {
    let mut c = Command::new("openssl")
        .args(["crl", "-noout", "-text"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut c.stdin.take().unwrap(), pem).unwrap();
    let out = ok(&c.wait_with_output().unwrap());
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Serial Number: "))
        .map(|x| x.trim().to_ascii_lowercase())
        .collect()
}

#[test]
fn two_masters_on_one_slapd_share_names_claims_revocations_and_crls() {
    share_names_claims_revocations_and_crls(&store());
}

#[test]
fn two_masters_on_one_slapd_share_names_claims_revocations_and_crls_on_389ds() {
    share_names_claims_revocations_and_crls(&Ds389::store("share_names_claims_revocations_and_crls"));
}

fn share_names_claims_revocations_and_crls(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = two_masters(&slapd, tmp.path());
    let d1 = m1.dir.clone();
    // Master 2 makes no administrator under master 1's administrator's name, and says why.
    assert!(m2.banner.contains("administrator of another master"), "{}", m2.banner);

    // Racing PUTs for one certname on both masters (two keys, each with its own good
    // attributes), 10 rounds: exactly one certificate per name, for one of the two keys.
    for round in 0..10 {
        let name = format!("race{round}.example.test");
        let (k1, k2) = (p256(), p256());
        let (c1, c2) = (csr_for(&name, &vouched(&d1, &name), &k1), csr_for(&name, &vouched(&d1, &name), &k2));
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let (r1, r2) = std::thread::scope(|sc| {
            let b = barrier.clone();
            let (m1, m2, n) = (&m1, &m2, name.as_str());
            let h1 = sc.spawn(move || {
                b.wait();
                enroll(m1, n, &c1)
            });
            let h2 = sc.spawn(move || {
                barrier.wait();
                enroll(m2, n, &c2)
            });
            (h1.join().unwrap(), h2.join().unwrap())
        });
        for r in [&r1, &r2] {
            assert!([200, 400, 503].contains(&r.0), "{name}: {} {}\n{}\n{}", r.0, r.1, m1.log(), m2.log());
        }
        // Both masters serve the same single certificate, for one of the two keys.
        let (a, b) = (r1.2.clone().unwrap(), r2.2.clone().unwrap());
        assert_eq!(a, b, "{name}: the masters serve different certificates");
        let spki = spki_of(&a);
        let keys =
            [rcgen::PublicKeyData::subject_public_key_info(&k1), rcgen::PublicKeyData::subject_public_key_info(&k2)];
        assert!(keys.contains(&spki), "{name}: the certificate is for neither key");
    }
    let listed = list(&slapd, &d1);
    let races: Vec<&serde_json::Value> =
        listed.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("race"))).collect();
    assert_eq!(races.len(), 10, "{listed:?}");

    // Attributes spent at master 1 are refused at master 2 (another key, after a clean).
    let name = "web01.example.test";
    let attrs = vouched(&d1, name);
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    let cert = cert.unwrap();
    let serial = serial_of(&cert);
    ok(&v(&slapd, &m2.dir).args(["clean", name]).output().unwrap());
    let r = enroll(&m2, name, &csr_for(name, &attrs, &p256()));
    assert_refused(&slapd, &m2.dir, name, &r, "attributes-replayed");

    // Master 2 sees and revokes master 1's certificate; master 1's CRL lists it.
    let name = "web02.example.test";
    let key2 = p256();
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &key2));
    assert_eq!(put, 200, "{why}");
    let cert2 = cert.unwrap();
    let serial2 = serial_of(&cert2);
    // The node, as a TLS client of its master (an endpoint only known nodes may use).
    let node = || {
        let bundle = std::fs::read(d1.join("ca/ca_bundle.pem")).unwrap();
        let id = (cert2.as_slice(), key2.serialize_pem().into_bytes());
        let config = tls_config(&bundle, Some((id.0, id.1.as_slice()))).unwrap();
        Client::new(config, m1.addr(), "localhost")
            .unwrap()
            .request("GET", "/puppet-ca/v1/expirations", None, b"")
            .unwrap()
    };
    assert_eq!(node().status, 200, "the node is not known to its master");
    let on_m2 = list(&slapd, &m2.dir);
    assert!(on_m2.iter().any(|e| e["name"] == name && e["serial"] == serial2.as_str()), "{on_m2:?}");
    ok(&v(&slapd, &m2.dir).args(["revoke", name]).output().unwrap());
    // Master 1 refuses the node at once (no CRL involved: the store says revoked).
    assert_eq!(node().status, 403, "master 1 still serves a node master 2 revoked");
    let crl1 = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    let on_crl = crl_serials(crl1.as_bytes());
    assert!(on_crl.contains(&serial2), "master 1's CRL lacks {serial2}: {on_crl:?}");
    assert!(on_crl.contains(&serial), "master 1's CRL lacks the cleaned {serial}: {on_crl:?}");
    // Master 2's CRL lists none of master 1's serials (each CA signs for its own).
    let crl2 = ok(&v(&slapd, &m2.dir).args(["crl"]).output().unwrap());
    assert!(!crl_serials(crl2.as_bytes()).contains(&serial2));
    // Master 1's service learns of it without a command on its side (its maintenance).
    let took = wait_until(Duration::from_secs(30), &format!("master 1's served CRL lists {serial2}"), || {
        let mut c = m1.client();
        let r = c.request("GET", "/puppet-ca/v1/certificate_revocation_list/ca", None, b"").unwrap();
        crl_serials(&r.body).contains(&serial2)
    });
    eprintln!("a revocation at master 2 reached master 1's served CRL in {took:?}");

    // `vouch store verify` on the shared store: nothing to find at either master (their
    // certificates signed by two master CAs, a revocation and a clean across masters).
    for d in [&d1, &m2.dir] {
        let o = v(&slapd, d).args(["store", "verify"]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("no findings"), "{}", text(&o));
    }
    // One entry's certificate replaced by another node's: found, exit 1.
    let pem = slapd.ldapsearch(
        &format!("vouchCertname=race1.example.test,ou=certnames,{base}"),
        "(objectClass=*)",
        &["vouchCertificate"],
    );
    let b64 = pem
        .ok()
        .lines()
        .find_map(|l| l.strip_prefix("vouchCertificate:: "))
        .unwrap_or_else(|| panic!("no certificate in {}", pem.ok()))
        .to_string();
    slapd
        .ldapmodify(&format!(
            "dn: vouchCertname=race0.example.test,ou=certnames,{base}\nchangetype: modify\nreplace: vouchCertificate\nvouchCertificate:: {b64}\n"
        ))
        .ok();
    let o = v(&slapd, &d1).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let found = String::from_utf8_lossy(&o.stdout);
    assert!(found.contains("\"finding\":\"name-mismatch\"") && found.contains("race0.example.test"), "{found}");
    eprintln!("vouch store verify on the tampered LDAP store:\n{found}");
    drop(m1);
    drop(m2);
}

#[test]
fn slapd_stopped_under_load_gets_503_and_the_master_resumes_by_itself() {
    stopped_under_load(&store());
}

/// On a 389 DS instance of its own (the test stops it).
#[test]
fn slapd_stopped_under_load_gets_503_and_the_master_resumes_by_itself_on_389ds() {
    let ds = Ds389::private("stopped");
    stopped_under_load(&ds.store_here("stopped"));
}

fn stopped_under_load(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    let (put, why, _) = enroll(
        &m1,
        "before.example.test",
        &csr_for("before.example.test", &vouched(&d1, "before.example.test"), &p256()),
    );
    assert_eq!(put, 200, "{why}");
    slapd.stop();
    let name = "during.example.test";
    let key = p256();
    let csr = csr_for(name, &vouched(&d1, name), &key);
    let mut c = m1.client();
    let r = c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.header("Retry-After").is_some(), "503 without Retry-After");
    // The hook exits non-zero (nothing approved) while slapd is down; a command says the
    // store is unavailable (EX_TEMPFAIL, 75), and so does a master that cannot start.
    let hook = run(v(&slapd, &d1).args(["autosign", name]), Some(&csr));
    assert_eq!(hook.status.code(), Some(75), "{}", text(&hook));
    let list = v(&slapd, &d1).args(["list"]).output().unwrap();
    assert_eq!(list.status.code(), Some(75), "{}", text(&list));
    // A master that cannot start: a copy of m1's data directory (m1 itself holds its own,
    // where a second vouch serve is refused before it reaches the store).
    let copy = tmp.path().join("m1-copy");
    assert!(Command::new("cp").arg("-a").arg(&d1).arg(&copy).status().unwrap().success());
    let start =
        v(&slapd, &copy).args(["serve", "--listen", "127.0.0.1:0", "--server-name", "ca1.test"]).output().unwrap();
    assert_eq!(start.status.code(), Some(75), "{}", text(&start));
    let second =
        v(&slapd, &d1).args(["serve", "--listen", "127.0.0.1:0", "--server-name", "ca1.test"]).output().unwrap();
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(text(&second).contains("another vouch serve is running"), "{}", text(&second));
    slapd.restart();
    // The same request, the same key: issued now, by the same process.
    let (put, why, cert) = enroll(&m1, name, &csr);
    assert_eq!(put, 200, "{why}");
    assert_eq!(spki_of(&cert.unwrap()), rcgen::PublicKeyData::subject_public_key_info(&key));
    assert!(m1.log().contains("unavailable"), "the log says why: {}", m1.log());
}

/// `vouch conductor revoke` where the root key is (master 1, the shared store): master 1
/// refuses what the conductor vouches for from its next request on, and the store's records
/// count the node it vouched for before. The root CRL travels through the store: master 2
/// (no root key, nothing copied) takes it in its maintenance and refuses the conductor from
/// then on, with no restart (as docs/ldap.md says).
#[test]
fn a_conductor_revoked_at_the_root_keys_master_is_refused_by_the_other_through_the_store() {
    conductor_revoked_at_the_root_keys_master(&store());
}

#[test]
fn a_conductor_revoked_at_the_root_keys_master_is_refused_by_the_other_through_the_store_on_389ds() {
    conductor_revoked_at_the_root_keys_master(&Ds389::store("conductor_revoked_at_the_root_keys_master"));
}

fn conductor_revoked_at_the_root_keys_master(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = two_masters(&slapd, tmp.path());
    let (d1, d2) = (m1.dir.clone(), m2.dir.clone());
    let enroll_at = |m: &Master, name: &str| enroll(m, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert!(enroll_at(&m2, "before.example.test").2.is_some());

    let cert = d1.join("conductor/conductor_crt.pem");
    let at_m2 = v(&slapd, &d2).args(["conductor", "revoke", "--cert", s(&cert)]).output().unwrap();
    assert_eq!(at_m2.status.code(), Some(2), "{}", text(&at_m2));
    assert!(String::from_utf8_lossy(&at_m2.stderr).contains("root CA's key is not in"), "{}", text(&at_m2));
    let out = ok(&v(&slapd, &d1).args(["conductor", "revoke", "--cert", s(&cert)]).output().unwrap());
    assert!(out.contains("1 current node certificate vouched for by it stays valid"), "{out}");
    assert!(out.contains("published the root CRL"), "{out}");

    assert_refused(&slapd, &d1, "m1-after.example.test", &enroll_at(&m1, "m1-after.example.test"), "conductor-revoked");
    // Master 2 takes the root CRL from the store in its maintenance (every 5 s): nothing copied.
    let want = std::fs::read(d1.join("ca/root_crl.pem")).unwrap();
    Wait::up_to(Duration::from_secs(60)).showing(|| m2.log()).until("master 2 takes the root CRL", || {
        std::fs::read(d2.join("ca/root_crl.pem")).ok().as_deref() == Some(want.as_slice())
    });
    let r = enroll_at(&m2, "m2-after.example.test");
    assert_refused(&slapd, &d2, "m2-after.example.test", &r, "conductor-revoked");
}

#[test]
fn a_master_killed_under_load_leaves_every_delivered_certificate_registered_once() {
    master_killed_under_load(&store());
}

#[test]
fn a_master_killed_under_load_leaves_every_delivered_certificate_registered_once_on_389ds() {
    master_killed_under_load(&Ds389::store("master_killed_under_load"));
}

fn master_killed_under_load(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    let work: Vec<(String, rcgen::KeyPair, Vec<u8>)> = (0..120)
        .map(|i| {
            let name = format!("kill{i:03}.example.test");
            let key = p256();
            let csr = csr_for(&name, &vouched(&d1, &name), &key);
            (name, key, csr)
        })
        .collect();
    let addr = m1.addr();
    let bundle = std::fs::read(d1.join("ca/ca_bundle.pem")).unwrap();
    let config = tls_config(&bundle, None).unwrap();
    let pid = m1.pid();
    let count = std::sync::atomic::AtomicUsize::new(0);
    let delivered: Vec<(String, Vec<u8>)> = std::thread::scope(|sc| {
        let handles: Vec<_> = work
            .chunks(15)
            .map(|chunk| {
                let (config, count) = (config.clone(), &count);
                sc.spawn(move || {
                    let mut got = Vec::new();
                    for (name, _, csr) in chunk {
                        let Ok(mut c) = Client::new(config.clone(), addr, "localhost") else { break };
                        let Ok(put) = c.request(
                            "PUT",
                            &format!("/puppet-ca/v1/certificate_request/{name}"),
                            Some("text/plain"),
                            csr,
                        ) else {
                            break;
                        };
                        if put.status == 200 {
                            if let Ok(g) = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"") {
                                if g.status == 200 {
                                    got.push((name.clone(), g.body));
                                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                }
                            }
                        }
                    }
                    got
                })
            })
            .collect();
        // Killed under load: once some certificates were delivered (however fast the server
        // writes), with more in flight.
        wait_until(Duration::from_secs(60), "a first certificate delivered", || {
            count.load(std::sync::atomic::Ordering::SeqCst) > 0
        });
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    m1.kill();
    assert!(!delivered.is_empty(), "nothing was delivered before the kill");
    // A restart on the same store: every certificate a client received is its name's, once.
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    let listed = list(&slapd, &d1);
    for (name, pem) in &delivered {
        let serial = serial_of(pem);
        let n = listed.iter().filter(|e| e["name"] == name.as_str()).count();
        assert_eq!(n, 1, "{name}: {n} entries");
        assert!(
            listed
                .iter()
                .any(|e| e["name"] == name.as_str() && e["serial"] == serial.as_str() && e["state"] == "signed"),
            "{name}: the delivered certificate {serial} is not its current one"
        );
    }
    // Every node that got nothing retries with its own key and attributes, and is issued:
    // no claim is left unusable for its own key.
    let done: std::collections::HashSet<&str> = delivered.iter().map(|(n, _)| n.as_str()).collect();
    let mut retried = 0;
    for (name, key, csr) in &work {
        if done.contains(name.as_str()) {
            continue;
        }
        // Registered just before the kill but never delivered: the agent's retry is told it
        // has one (400, as Puppet Server says it) and downloads it; else it is issued now.
        let (put, why, cert) = enroll(&m1, name, csr);
        assert!(put == 200 || why.contains("already has a signed certificate"), "{name}: {put} {why}");
        let cert = cert.unwrap_or_else(|| panic!("{name}: no certificate after the retry"));
        assert_eq!(spki_of(&cert), rcgen::PublicKeyData::subject_public_key_info(key), "{name}");
        retried += 1;
    }
    eprintln!("{} delivered before the kill, {retried} issued on retry after the restart", delivered.len());
}

#[test]
fn the_hook_and_a_serve_master_share_one_time_use() {
    hook_and_master_share_one_time_use(&store());
}

#[test]
fn the_hook_and_a_serve_master_share_one_time_use_on_389ds() {
    hook_and_master_share_one_time_use(&Ds389::store("hook_and_master_share_one_time_use"));
}

fn hook_and_master_share_one_time_use(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    // Spent at the master: the hook (as Puppet Server calls it) refuses them.
    let name = "hooked1.example.test";
    let attrs = vouched(&d1, name);
    let (put, why, _) = enroll(&m1, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    let hook = run(v(&slapd, &d1).args(["autosign", name]), Some(&csr_for(name, &attrs, &p256())));
    assert_eq!(hook.status.code(), Some(1), "{}", text(&hook));
    assert!(String::from_utf8_lossy(&hook.stderr).contains("attributes-replayed"), "{}", text(&hook));
    // Spent at the hook: the master refuses them.
    let name = "hooked2.example.test";
    let attrs = vouched(&d1, name);
    let csr = csr_for(name, &attrs, &p256());
    ok(&run(v(&slapd, &d1).args(["autosign", name]), Some(&csr)));
    let r = enroll(&m1, name, &csr);
    assert_refused(&slapd, &d1, name, &r, "attributes-replayed");
    // vouch check reads the same journal.
    let file = tmp.path().join("hooked2.csr");
    std::fs::write(&file, &csr).unwrap();
    let check = run(v(&slapd, &d1).args(["check", "--csr", s(&file)]), None);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
}

#[test]
fn overrides_compare_and_swap_with_sixteen_racing_writers_on_both_stores() {
    overrides_compare_and_swap(&store());
}

#[test]
fn overrides_compare_and_swap_with_sixteen_racing_writers_on_both_stores_on_389ds() {
    overrides_compare_and_swap(&Ds389::store("overrides_compare_and_swap"));
}

fn overrides_compare_and_swap(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(&slapd, &d1, "ca1.test"));
    // The file store: another data directory (a shared store's master's own is retired).
    let df = tmp.path().join("f1");
    ok(&vouch().args(["ca", "init", "--dir", s(&df)]).output().unwrap());
    let name = "web01.example.test";
    let class = tmp.path().join("class.yaml");
    std::fs::write(&class, "classes:\n  - role::db\n").unwrap();
    for ldap in [true, false] {
        let cmd = |args: &[&str]| {
            let mut c = if ldap { v(&slapd, &d1) } else { vouch() };
            if !ldap {
                c.args(["--dir", s(&df)]);
            }
            c.args(args);
            c
        };
        ok(&cmd(&["override", "set", name, "--classification", s(&class), "--expect-revision", "0"]).output().unwrap());
        for rev in 1..=3u64 {
            let outs: Vec<Output> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..16)
                    .map(|_| {
                        let mut c = cmd(&[
                            "override",
                            "set",
                            name,
                            "--classification",
                            s(&class),
                            "--expect-revision",
                            &rev.to_string(),
                        ]);
                        sc.spawn(move || c.output().unwrap())
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let won = outs.iter().filter(|o| o.status.success()).count();
            assert_eq!(won, 1, "ldap={ldap} revision {rev}: {won} writers won");
            for o in outs.iter().filter(|o| !o.status.success()) {
                assert_eq!(o.status.code(), Some(2), "{}", text(o));
                assert!(String::from_utf8_lossy(&o.stderr).contains("changed by someone else"), "{}", text(o));
            }
        }
        let shown = ok(&cmd(&["override", "show", name, "--format", "json"]).output().unwrap());
        let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(shown["revision"], 4, "ldap={ldap}: {shown}");
        let cleared = ok(&cmd(&["override", "clear", name]).output().unwrap());
        assert!(cleared.contains("revision 5"), "{cleared}");
        // A classification a conductor could not sign is refused.
        std::fs::write(tmp.path().join("bad.yaml"), "classes: !!python/object x\n").unwrap();
        let bad =
            cmd(&["override", "set", name, "--classification", s(&tmp.path().join("bad.yaml"))]).output().unwrap();
        assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    }
}

#[test]
fn the_enc_prints_the_override_and_says_where_it_came_from() {
    enc_prints_the_override(&store());
}

#[test]
fn the_enc_prints_the_override_and_says_where_it_came_from_on_389ds() {
    enc_prints_the_override(&Ds389::store("enc_prints_the_override"));
}

fn enc_prints_the_override(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = two_masters(&slapd, tmp.path());
    let name = "web01.example.test";
    let (put, why, _) = enroll(&m1, name, &csr_for(name, &vouched(&m1.dir, name), &p256()));
    assert_eq!(put, 200, "{why}");
    let enc = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&ok(&v(&slapd, dir).args(["enc", name]).output().unwrap())).unwrap()
    };
    let before = enc(&m1.dir);
    assert_eq!(before["parameters"]["vouch_source"], "certificate", "{before}");
    assert_eq!(before["classes"][0], "role::web");
    let class = tmp.path().join("class.yaml");
    std::fs::write(&class, "classes:\n  - role::db\n").unwrap();
    // Set at master 2, printed by master 1's ENC.
    ok(&v(&slapd, &m2.dir).args(["override", "set", name, "--classification", s(&class)]).output().unwrap());
    let after = enc(&m1.dir);
    assert_eq!(after["parameters"]["vouch_source"], "override", "{after}");
    assert_eq!(after["classes"][0], "role::db");
    ok(&v(&slapd, &m1.dir).args(["override", "clear", name]).output().unwrap());
    assert_eq!(enc(&m2.dir)["parameters"]["vouch_source"], "certificate");
}

/// OpenLDAP only: a slapd multi-provider (syncrepl) pair. 389 DS's supplier and consumer
/// are `a_389ds_consumer_is_a_confirmed_standby_and_keeps_every_acknowledged_certificate`.
#[test]
fn failover_to_a_standby_keeps_every_acknowledged_claim_and_certificate() {
    let (primary, standby) = Slapd::start_pair(&slapd_opts());
    let tmp = tempfile::tempdir().unwrap();
    let init = ok(&v(&primary, tmp.path()).args(["ldap", "init", "--create-base"]).output().unwrap());
    assert!(init.contains("created"), "{init}");
    let d1 = tmp.path().join("m1");
    // Writes to the primary, each claim confirmed on the standby before signing.
    let confirm = ["--store-replica", &standby.url(BASE), "--store-confirm-replicas"];
    let m1 = Master::start_env(&d1, "ca1.test", &store_env(&primary), &confirm);
    let mut issued = Vec::new();
    for i in 0..20 {
        let name = format!("fo{i:02}.example.test");
        let attrs = vouched(&d1, &name);
        let (put, why, cert) = enroll(&m1, &name, &csr_for(&name, &attrs, &p256()));
        assert_eq!(put, 200, "{why}");
        issued.push((name, attrs, serial_of(&cert.unwrap())));
    }
    // The primary dies (fenced: nothing writes to it again); the master moves to the standby.
    drop(m1);
    primary.kill();
    let m1 = Master::start_env(&d1, "ca1.test", &store_env(&standby), &[]);
    let listed = list(&standby, &d1);
    for (name, attrs, serial) in &issued {
        assert!(
            listed.iter().any(|e| e["name"] == name.as_str() && e["serial"] == serial.as_str()),
            "{name}: certificate {serial} lost in the failover"
        );
        // Its attributes are still spent: another key is refused.
        let (put, why, _) = enroll(&m1, name, &csr_for(name, attrs, &p256()));
        assert_eq!(put, 400, "{name}: {why}");
        assert!(why.contains("already has a signed certificate"), "{name}: {why}");
    }
    // A replica that does not answer: a claim cannot be confirmed, 503, nothing signed
    // (this master starts: its credentials exist; a new master could not register its own).
    drop(m1);
    let dead = format!("ldap://127.0.0.1:{}/{BASE}", primary.port());
    let m1 = Master::start_env(
        &d1,
        "ca1.test",
        &store_env(&standby),
        &["--store-replica", &dead, "--store-confirm-replicas"],
    );
    let name = "unconfirmed.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert_eq!(put, 503, "{why}\n{}", m1.log());
    assert!(cert.is_none(), "a certificate was signed for an unconfirmed claim");
    let d3 = tmp.path().join("m3");
    let m3 = v(&standby, &d3)
        .args(["serve", "--listen", "127.0.0.1:0", "--server-name", "ca3.test"])
        .args(["--store-replica", &dead, "--store-confirm-replicas"])
        .output()
        .unwrap();
    assert_eq!(m3.status.code(), Some(75), "{}", text(&m3));
    assert!(String::from_utf8_lossy(&m3.stderr).contains("did not show on replica"), "{}", text(&m3));
}

/// 389 DS only: two masters, each writing to its own supplier of a multi-supplier pair
/// (`Ds389::suppliers`), the fencing rule broken on purpose. The same vouched attributes
/// (one-time use) presented to both at once, round after round: measured, how many rounds
/// granted them twice, the `nsds5ReplConflict` entries replication left behind, and how
/// many delivered certificates neither supplier lists once replication has settled. The
/// control: attributes spent at one master and replicated are refused at the other.
#[test]
fn two_masters_on_two_389ds_suppliers_grant_the_same_one_time_attributes_twice() {
    const ROUNDS: usize = 12;
    let (one, two) = Ds389::suppliers();
    let a = one.store_here("multisupplier");
    let b = Ds389Store { ds: &two, base: a.base.clone() };
    let journal = format!("ou=journal,{}", a.base);
    wait_until(Duration::from_secs(60), "the store's containers on the second supplier", || b.has_dn(&journal));
    // vouch's bind DN does not see the replica configuration: nothing vouch could warn from.
    for d in [&a as &dyn Directory, &b] {
        let seen = as_vouch(d, &["-b", "cn=mapping tree,cn=config", "(objectClass=nsds5replica)", "nsds5replicaid"]);
        assert!(!seen.stdout.contains("nsds5replicaid"), "the bind DN reads the replica configuration: {seen}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    let m1 = Master::start(&a, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start(&b, &d2, "ca2.test");
    // The control: spent at master 1, replicated, refused at master 2.
    let name = "spent.example.test";
    let attrs = vouched(&d1, name);
    let (put, why, first) = enroll(&m1, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    let first = serial_of(&first.expect("no certificate at master 1"));
    let registered = format!("vouchCertname={name},ou=certnames,{}", a.base);
    wait_until(Duration::from_secs(30), "the certname on the second supplier", || b.has_dn(&registered));
    let (put, why, cert) = enroll(&m2, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 400, "replicated spent attributes granted again: {why}");
    assert!(why.contains("already has a signed certificate"), "{why}");
    assert_eq!(cert.map(|c| serial_of(&c)), Some(first), "master 2 serves another certificate");
    // The race: both masters at once, round after round.
    let rounds: Vec<[Option<String>; 2]> =
        (0..ROUNDS).map(|i| race(&m1, &m2, &format!("mm{i:02}.example.test"))).collect();
    let twice = rounds.iter().filter(|r| r.iter().all(Option::is_some)).count();
    let (conflicts, listed) = settled(&[&a, &b], &d1);
    let delivered: Vec<&String> = rounds.iter().flatten().flatten().collect();
    let unlisted = delivered.iter().filter(|s| !listed.iter().any(|l| l.contains(s.as_str()))).count();
    let ruv = "(&(nsuniqueid=ffffffff-ffffffff-ffffffff-ffffffff)(objectClass=nsTombstone))";
    let probe_ruv = as_vouch(&a, &["-b", SUFFIX, ruv, "nsds50ruv"]);
    let probe_conflicts =
        as_vouch(&a, &["-b", &a.base, "(&(nsds5ReplConflict=*)(|(objectClass=ldapsubentry)(objectClass=*)))", "1.1"]);
    // vouch's bind DN reads no replica update vector, but does read the conflict entries
    // under its base: what `store verify` could look for after the fact.
    assert!(probe_ruv.success() && !probe_ruv.stdout.contains("nsds50ruv"), "{probe_ruv}");
    let readable = probe_conflicts.stdout.lines().filter(|l| l.starts_with("dn:")).count();
    assert_eq!(readable, conflicts[0].len(), "{probe_conflicts}");
    let claims = conflicts[0].iter().filter(|dn| dn.contains(",ou=journal,")).count();
    let verify = v(&a, &d1).args(["store", "verify"]).output().unwrap();
    eprintln!(
        "389 DS multi-supplier: {twice} of {ROUNDS} rounds granted twice; {} certificates delivered, {unlisted} \
         listed by neither supplier; conflict entries on each supplier: {:?} ({claims} claims)\n{}\n{:?} {}",
        delivered.len(),
        conflicts.iter().map(Vec::len).collect::<Vec<_>>(),
        conflicts[0].join("\n"),
        rounds,
        text(&verify)
    );
    assert!(twice >= 1, "first-use-wins held on 389 DS multi-supplier: {rounds:?}");
    // Each double grant: the claim and the certname added on both suppliers, one of each
    // kept, the other renamed to a conflict entry; the certificate it held listed nowhere.
    // (Exact counts vary with timing: a master's GET may already answer the other's
    // replicated certificate, and a claim may replicate before the other's add.)
    assert!(claims >= 1 && claims <= twice, "{conflicts:?}");
    assert!(conflicts.iter().all(|c| *c == conflicts[0] && c.len() <= 2 * twice), "{conflicts:?}");
    assert!(unlisted >= 1 && unlisted <= twice, "{listed:?}");
    // `store verify` names each conflict entry, the lost certificate's serial among them.
    assert_eq!(verify.status.code(), Some(1), "{}", text(&verify));
    let named = String::from_utf8_lossy(&verify.stdout)
        .lines()
        .filter(|l| l.starts_with("replication-conflict: replication conflict entry "))
        .count();
    assert_eq!(named, conflicts[0].len(), "{}", text(&verify));
    let found = text(&verify).to_ascii_lowercase();
    let lost: Vec<&&String> =
        delivered.iter().filter(|s| s.as_str() != UNKNOWN && !listed.iter().any(|l| l.contains(s.as_str()))).collect();
    let named_lost = lost.iter().filter(|s| found.contains(s.to_ascii_lowercase().trim_start_matches("00"))).count();
    assert_eq!(named_lost, lost.len(), "the lost certificates are not named: {lost:?}\n{}", text(&verify));
}

/// A granted certificate whose serial the race could not see (see [`race`]).
const UNKNOWN: &str = "unknown";

/// `ldapsearch -LLL ARGS` bound as vouch's bind DN.
fn as_vouch(d: &dyn Directory, args: &[&str]) -> common::slapd::LdapOutput {
    let (url, dn, pw) = (d.url(""), d.bind_dn(), d.password_file());
    let mut all = vec!["-x", "-H", &url, "-D", &dn, "-y", s(&pw), "-LLL"];
    all.extend_from_slice(args);
    common::slapd::run_tool("ldapsearch", &all, None, Duration::from_secs(10))
}

/// The same vouched attributes for `name`, each master given another key at once: the
/// serial each delivered (None: refused).
fn race(m1: &Master, m2: &Master, name: &str) -> [Option<String>; 2] {
    let attrs = vouched(&m1.dir, name);
    let csrs = [csr_for(name, &attrs, &p256()), csr_for(name, &attrs, &p256())];
    let got = std::thread::scope(|sc| {
        let x = sc.spawn(|| enroll(m1, name, &csrs[0]));
        let y = sc.spawn(|| enroll(m2, name, &csrs[1]));
        [x.join().unwrap(), y.join().unwrap()]
    });
    assert!(got.iter().any(|g| g.0 == 200 && g.2.is_some()), "{name}: granted by neither master: {got:?}");
    // Granted: 200 and a certificate; a refused PUT may still GET the other master's
    // certificate once it has replicated.
    let mut serials = got.map(|(put, _, cert)| cert.filter(|_| put == 200).map(|c| serial_of(&c)));
    // Both granted, and one master's GET already answered the other's certificate (replicated
    // over its own): that master's serial is unknown here, and its certificate is the one
    // listed nowhere.
    if serials[0].is_some() && serials[0] == serials[1] {
        serials[1] = Some(UNKNOWN.to_string());
    }
    serials
}

/// Once replication has settled (the same conflict entries on every supplier, 30 s at
/// most): each supplier's conflict entries (their DNs), and every `list --all` line of each.
fn settled(sups: &[&dyn Directory], dir: &Path) -> (Vec<Vec<String>>, Vec<String>) {
    let conflicts = |d: &dyn Directory| {
        // Conflict entries are ldapsubentry: a filter that names the class finds them.
        let filter = "(&(nsds5ReplConflict=*)(|(objectClass=ldapsubentry)(objectClass=*)))";
        let out = d.ldapsearch(&d.base(), filter, &["nsds5ReplConflict"]);
        assert!(out.success(), "{out}");
        let mut dns: Vec<String> = out.stdout.lines().filter(|l| l.starts_with("dn:")).map(str::to_string).collect();
        dns.sort();
        dns
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut before = Vec::new();
    let mut seen: Vec<Vec<String>> = sups.iter().map(|d| conflicts(*d)).collect();
    while (seen.iter().any(|c| *c != seen[0]) || seen != before) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        before = std::mem::replace(&mut seen, sups.iter().map(|d| conflicts(*d)).collect());
    }
    let lists: Vec<Vec<String>> = sups
        .iter()
        .map(|d| {
            let mut l: Vec<String> = list(*d, dir).iter().map(|e| e.to_string()).collect();
            l.sort();
            l
        })
        .collect();
    assert_eq!(lists[0], lists[1], "the suppliers list different certificates once settled");
    (seen, lists.concat())
}

#[test]
fn migrate_copies_a_file_store_into_ldap_idempotently() {
    migrate_copies(&store());
}

#[test]
fn migrate_copies_a_file_store_into_ldap_idempotently_on_389ds() {
    migrate_copies(&Ds389::store("migrate_copies"));
}

fn migrate_copies(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    // A file-store master with certificates, a revocation, an override and spent attributes.
    let m = Master::start_env(&d1, "ca1.test", &[], &[]);
    let mut spent = Vec::new();
    for i in 0..5 {
        let name = format!("mig{i}.example.test");
        let attrs = vouched(&d1, &name);
        let (put, why, _) = enroll(&m, &name, &csr_for(&name, &attrs, &p256()));
        assert_eq!(put, 200, "{why}");
        spent.push((name, attrs));
    }
    drop(m);
    ok(&vouch().args(["--dir", s(&d1), "revoke", "mig0.example.test"]).output().unwrap());
    let class = tmp.path().join("class.yaml");
    std::fs::write(&class, "classes:\n  - role::db\n").unwrap();
    ok(&vouch()
        .args(["--dir", s(&d1), "override", "set", "mig1.example.test", "--classification", s(&class)])
        .output()
        .unwrap());
    let files = serde_json::to_value(
        serde_json::from_str::<serde_json::Value>(&ok(&vouch()
            .args(["--dir", s(&d1), "list", "--all", "--format", "json"])
            .output()
            .unwrap()))
        .unwrap(),
    )
    .unwrap();
    let to = ["migrate", "--to", &slapd.url(&base)];
    let env: Vec<(String, String)> = store_env(&slapd).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect();
    let first = ok(&vouch().envs(env.clone()).args(["--dir", s(&d1)]).args(to).output().unwrap());
    // The five nodes, the service's and the administrator's certificates.
    let n = files.as_array().unwrap().iter().filter(|e| e["state"] != "requested").count();
    assert_eq!(n, 7, "{files}");
    assert!(first.contains("certificates: 7 copied, 0 already there"), "{first}");
    assert!(first.contains("revocations: 1 copied"), "{first}");
    assert!(first.contains("overrides: 1 copied"), "{first}");
    let second = ok(&vouch().envs(env).args(["--dir", s(&d1)]).args(to).output().unwrap());
    assert!(second.contains("certificates: 0 copied, 7 already there"), "{second}");
    assert!(second.contains("replay-journal entries: 0 copied"), "{second}");
    // The LDAP store lists what the file store listed.
    // (The shared store also names each certificate's issuing master CA: this one's.)
    let mut ldap = list(&slapd, &d1);
    let id = vouch::store::ca_id(
        &vouch::encoding::pem::find(&std::fs::read(d1.join("ca/ca_crt.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1,
    );
    for e in &mut ldap {
        let issuer = e.as_object_mut().unwrap().remove("issuer");
        assert!(e["state"] == "requested" || issuer == Some(serde_json::Value::from(id.as_str())), "{e}");
    }
    let ldap = serde_json::Value::from(ldap);
    assert_eq!(ldap, files, "the LDAP store lists differently");
    // Its CRL has the revocation; spent attributes stay spent; the override is there.
    let crl = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    assert_eq!(crl_serials(crl.as_bytes()).len(), 1);
    let m = Master::start(&slapd, &d1, "ca1.test");
    ok(&v(&slapd, &d1).args(["clean", "mig2.example.test"]).output().unwrap());
    let (name, attrs) = &spent[2];
    let r = enroll(&m, name, &csr_for(name, attrs, &p256()));
    assert_refused(&slapd, &d1, name, &r, "attributes-replayed");
    let enc: serde_json::Value =
        serde_json::from_str(&ok(&v(&slapd, &d1).args(["enc", "mig1.example.test"]).output().unwrap())).unwrap();
    assert_eq!(enc["parameters"]["vouch_source"], "override", "{enc}");
}

#[test]
fn bad_store_urls_and_bind_options_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let cases: &[(&[&str], &str)] = &[
        (&["--store", "http://x/ou=a", "list"], "neither 'files' nor an ldap"),
        (&["--store", "ldap://127.0.0.1:1", "list"], "names no base DN"),
        (&["--store", "ldap://u:p@127.0.0.1:1/ou=a", "list"], "no user or password"),
        (&["--store", "ldap://127.0.0.1:1/ou=a", "--ldap-bind-dn", "cn=x", "list"], "needs --ldap-password-file"),
        (&["--store", "ldaps://127.0.0.1:1/ou=a", "list"], "needs --ldap-ca"),
        (&["--store", "ldap://127.0.0.1:1/ou=a", "--ldap-ca", "/etc/hostname", "list"], "applies to ldaps:// only"),
        (&["--store-replica", "ldap://127.0.0.1:1/ou=a", "list"], "needs an LDAP --store"),
        (&["ldap", "init"], "needs an LDAP --store"),
    ];
    ok(&vouch().args(["ca", "init", "--dir", s(&dir)]).output().unwrap());
    for (args, want) in cases {
        let o = vouch().args(["--dir", s(&dir)]).args(*args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(want), "{args:?}: {}", text(&o));
    }
    // Nothing listens there: unavailable, named, exit 2.
    let pw = tmp.path().join("pw");
    std::fs::write(&pw, "x").unwrap();
    // A password readable by others: refused before anything is sent.
    let o = vouch()
        .args(["--dir", s(&dir), "--store", "ldap://127.0.0.1:1/ou=vouch,dc=x", "--ldap-bind-dn", "cn=x"])
        .args(["--ldap-password-file", s(&pw), "list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("refusing to trust"), "{}", text(&o));
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let o = vouch()
        .args(["--dir", s(&dir), "--store", "ldap://127.0.0.1:1/ou=vouch,dc=x", "--ldap-bind-dn", "cn=x"])
        .args(["--ldap-password-file", s(&pw), "list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(75), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unavailable"), "{}", text(&o));
}

/// Max resident set of a finished child (ru_maxrss of RUSAGE_CHILDREN is the largest child
/// so far, so each measured command runs in its own `sh -c` via /usr/bin/time's format).
fn timed(cmd: &mut Command) -> (Output, Duration, u64) {
    let t = Instant::now();
    let mut c = Command::new("/usr/bin/time");
    c.arg("-f").arg("VOUCH-MAXRSS-KB %M").arg(cmd.get_program());
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let o = c.output().unwrap();
    let took = t.elapsed();
    let rss = String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("VOUCH-MAXRSS-KB ").and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0);
    (o, took, rss)
}

/// A generated store of VOUCH_LDAP_SCALE certificates (default 1,000,000; one in ten
/// revoked), loaded with slapadd: the time of a lookup (GET certificate at a master), of
/// `vouch list --all`, and of the CRL. Figures, not assertions on time (shared machines).
/// (OpenLDAP only: loaded offline by slapadd; a benchmark of one server, not a scenario.)
#[test]
fn a_generated_store_of_a_million_certificates_answers_lookups_lists_and_crls() {
    common::require("/usr/bin/time", "time");
    let n: usize = std::env::var("VOUCH_LDAP_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    // Room for the generated entries (about 3 KB each with their indexes).
    let mut opts = slapd_opts();
    opts.database = vec![format!("maxsize {}", (n as u64 * 8192).max(1 << 30))];
    let slapd = Slapd::start(&opts);
    ok(&v(&slapd, slapd.dir()).args(["ldap", "init", "--create-base"]).output().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    // The master registers its CA entry; one real certificate's PEM stands for all.
    let m = Master::start(&slapd, &d1, "ca1.test");
    let (put, why, cert) =
        enroll(&m, "real.example.test", &csr_for("real.example.test", &vouched(&d1, "real.example.test"), &p256()));
    assert_eq!(put, 200, "{why}");
    let pem = String::from_utf8(cert.unwrap()).unwrap();
    drop(m);
    let loaded = load_generated(&slapd, &d1, &pem, n);
    slapd.restart();
    let db = du(&slapd.dir().join("db"));
    // The counter the CRL follows: as if each revocation had been recorded.
    let m = Master::start(&slapd, &d1, "ca1.test");
    let mut c = m.client();
    let mut lookups = Vec::new();
    for i in (1..n).step_by((n / 50).max(1)) {
        let t = Instant::now();
        let r = c.request("GET", &format!("/puppet-ca/v1/certificate/gen{i:07}.example.test"), None, b"").unwrap();
        lookups.push(t.elapsed());
        assert_eq!(r.status, 200);
    }
    lookups.sort();
    drop(m);
    let (o, list_took, list_rss) = timed(v(&slapd, &d1).args(["list", "--all", "--format", "json"]));
    assert!(o.status.success(), "{}", text(&o));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed.iter().filter(|e| e["name"].as_str().is_some_and(|x| x.starts_with("gen"))).count(), n);
    let (o, crl_took, crl_rss) = timed(v(&slapd, &d1).args(["crl"]));
    assert!(o.status.success(), "{}", text(&o));
    let on_crl = crl_serials(&o.stdout).len();
    assert_eq!(on_crl, n.div_ceil(10));
    eprintln!(
        "LDAP store of {n} certificates ({} revoked): generated and loaded by slapadd in {loaded:.1?}, database {} MB \
         ({} bytes per certificate); GET certificate p50 {:?} p99 {:?}; vouch list --all {list_took:.1?} (max RSS {} MB); \
         vouch crl {crl_took:.1?} (max RSS {} MB)",
        n.div_ceil(10),
        db / 1_000_000,
        db / n as u64,
        lookups[lookups.len() / 2],
        lookups[lookups.len() * 99 / 100],
        list_rss / 1024,
        crl_rss / 1024
    );
}

/// Bytes of disk used under `dir` (du -sk: blocks, not the database file's sparse size).
fn du(dir: &Path) -> u64 {
    let o = Command::new("du").args(["-sk", s(dir)]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).split_whitespace().next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// The recovery of the LDAP store's two crash windows (fault injection: the process aborts
/// at the named step): after the journal add of a claim, the same key may claim again and
/// is issued, another key is refused; after a registry write that supersedes a certificate
/// (a renewal) but before that certificate's revocation, the next command completes the
/// revocation and the CRL lists it. Renewal itself works on the shared store.
#[test]
fn both_crash_windows_of_the_ldap_store_are_recovered() {
    both_crash_windows_recovered(&store());
}

#[test]
fn both_crash_windows_of_the_ldap_store_are_recovered_on_389ds() {
    both_crash_windows_recovered(&Ds389::store("both_crash_windows_recovered"));
}

fn both_crash_windows_recovered(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(&slapd, &d1, "ca1.test"));
    let name = "crash1.example.test";
    let attrs = vouched(&d1, name);
    let csr = tmp.path().join("crash1.csr");
    std::fs::write(&csr, csr_for(name, &attrs, &p256())).unwrap();
    let sign = |csr: &Path, abort: Option<&str>| {
        let mut c = v(&slapd, &d1);
        c.args(["sign", "--csr", s(csr), "--out", s(&csr.with_extension("pem"))]);
        if let Some(step) = abort {
            c.env("VOUCH_TEST_ABORT_AT", step);
        }
        c.output().unwrap()
    };
    let died = sign(&csr, Some("ldap:claimed"));
    assert!(died.status.code().is_none(), "the process did not abort: {}", text(&died));
    assert!(list(&slapd, &d1).iter().all(|e| e["name"] != name), "a certificate was registered");
    // Another key with the same attributes: refused; the claim's own key: issued.
    let thief = tmp.path().join("thief.csr");
    std::fs::write(&thief, csr_for(name, &attrs, &p256())).unwrap();
    let o = sign(&thief, None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("attributes-replayed"), "{}", text(&o));
    ok(&sign(&csr, None));
    let first = serial_of(&std::fs::read(csr.with_extension("pem")).unwrap());

    // A renewal that dies between the registry write and the old certificate's revocation.
    let out = tmp.path().join("renewed.pem");
    let died = v(&slapd, &d1)
        .args(["renew", name, "--out", s(&out)])
        .env("VOUCH_TEST_ABORT_AT", "ldap:registered")
        .output()
        .unwrap();
    assert!(died.status.code().is_none(), "the process did not abort: {}", text(&died));
    let listed = list(&slapd, &d1);
    let now = listed.iter().find(|e| e["name"] == name).unwrap();
    assert_ne!(now["serial"], first.as_str(), "the renewal was not registered");
    let marked = slapd.ldapsearch(&format!("ou=certnames,{base}"), "(vouchSupersedes=*)", &["vouchSupersedes"]);
    assert!(marked.stdout.contains(&first), "no mark of the superseded certificate: {}", marked.stdout);
    // The next command completes it: the old certificate is revoked and on the CRL.
    let crl = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    assert!(crl_serials(crl.as_bytes()).contains(&first), "the superseded {first} is not on the CRL");
    let marked = slapd.ldapsearch(&format!("ou=certnames,{base}"), "(vouchSupersedes=*)", &["vouchSupersedes"]);
    assert!(!marked.stdout.contains("vouchSupersedes:"), "the mark stayed: {}", marked.stdout);
    // An ordinary renewal: the previous certificate revoked at once, the new one current.
    let second = now["serial"].as_str().unwrap().to_string();
    ok(&v(&slapd, &d1).args(["renew", name, "--out", s(&out)]).output().unwrap());
    let third = serial_of(&std::fs::read(&out).unwrap());
    assert_ne!(third, second);
    let crl = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    assert!(crl_serials(crl.as_bytes()).contains(&second), "the renewed-away {second} is not on the CRL");
    assert!(list(&slapd, &d1).iter().any(|e| e["name"] == name && e["serial"] == third.as_str()));
}

/// slapd stopped and restarted while agents enroll: every answer is 200 or 503 (never a
/// 500, never a certificate without a claim), and every agent, retrying after 503 as Puppet
/// agents do, ends with exactly one certificate for its own key once slapd is back.
#[test]
fn slapd_restarted_under_load_loses_nothing_and_fails_nobody_for_good() {
    restarted_under_load(&store());
}

/// On a 389 DS instance of its own (the test stops it).
#[test]
fn slapd_restarted_under_load_loses_nothing_and_fails_nobody_for_good_on_389ds() {
    let ds = Ds389::private("restarted");
    restarted_under_load(&ds.store_here("restarted"));
}

fn restarted_under_load(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    let work: Vec<(String, rcgen::KeyPair, Vec<u8>)> = (0..240)
        .map(|i| {
            let name = format!("load{i:03}.example.test");
            let key = p256();
            let csr = csr_for(&name, &vouched(&d1, &name), &key);
            (name, key, csr)
        })
        .collect();
    let bundle = std::fs::read(d1.join("ca/ca_bundle.pem")).unwrap();
    let config = tls_config(&bundle, None).unwrap();
    let addr = m1.addr();
    let unavailable = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        let unavailable = &unavailable;
        for chunk in work.chunks(60) {
            let config = config.clone();
            sc.spawn(move || {
                for (name, key, csr) in chunk {
                    let deadline = Instant::now() + Duration::from_secs(60);
                    loop {
                        assert!(Instant::now() < deadline, "{name}: no certificate within 60 s");
                        let mut c = Client::new(config.clone(), addr, "localhost").unwrap();
                        let put = c
                            .request(
                                "PUT",
                                &format!("/puppet-ca/v1/certificate_request/{name}"),
                                Some("text/plain"),
                                csr,
                            )
                            .unwrap();
                        assert!([200, 400, 503].contains(&put.status), "{name}: PUT {} {}", put.status, put.text());
                        let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
                        assert!([200, 404, 503].contains(&get.status), "{name}: GET {} {}", get.status, get.text());
                        if put.status == 503 || get.status == 503 {
                            unavailable.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(200));
                            continue;
                        }
                        if get.status == 200 {
                            assert_eq!(
                                spki_of(&get.body),
                                rcgen::PublicKeyData::subject_public_key_info(key),
                                "{name}"
                            );
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_millis(300));
        slapd.stop();
        std::thread::sleep(Duration::from_millis(1500));
        slapd.restart();
    });
    let listed = list(&slapd, &d1);
    for (name, _, _) in &work {
        assert_eq!(listed.iter().filter(|e| e["name"] == name.as_str()).count(), 1, "{name}");
    }
    eprintln!("{} answers were 503 while slapd was down", unavailable.into_inner());
    assert!(m1.log().contains("unavailable"));
}

/// Review findings on the shared store, each a test:
/// - one key racing itself with one set of attributes gets one certificate, and after its
///   revocation the attributes stay spent (the claim is judged by the claim, not by the
///   serial its racing requests last wrote);
/// - a renewal racing a revocation for key compromise never leaves a valid certificate;
/// - a clean never erases an unfinished supersede mark: the superseded certificate is revoked;
/// - a second master with the first one's service name refuses to start instead of revoking
///   the first one's service certificate;
/// - a damaged revocation entry is left out of the CRL with a warning, never stops issuance;
/// - a hook still pointed at the retired file journal refuses, naming the shared store.
#[test]
fn review_findings_on_the_shared_store_stay_fixed() {
    review_findings(&store());
}

#[test]
fn review_findings_on_the_shared_store_stay_fixed_on_389ds() {
    review_findings(&Ds389::store("review_findings"));
}

fn review_findings(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");

    // One key, one set of attributes, four requests at once; revoked; asked again.
    for trial in 0..5 {
        let name = format!("self{trial}.example.test");
        let csr = csr_for(&name, &vouched(&d1, &name), &p256());
        std::thread::scope(|sc| {
            for _ in 0..4 {
                let (m1, name, csr) = (&m1, name.as_str(), csr.as_slice());
                sc.spawn(move || enroll(m1, name, csr));
            }
        });
        assert!(enroll(&m1, &name, &csr).2.is_some(), "{name}: no certificate");
        ok(&v(&slapd, &d1).args(["revoke", &name, "--reason", "key-compromise"]).output().unwrap());
        let r = enroll(&m1, &name, &csr);
        assert_refused(&slapd, &d1, &name, &r, "attributes-replayed");
    }

    // A renewal racing a revocation for key compromise: the name ends revoked.
    for trial in 0..8 {
        let name = format!("rr{trial}.example.test");
        let (put, why, _) = enroll(&m1, &name, &csr_for(&name, &vouched(&d1, &name), &p256()));
        assert_eq!(put, 200, "{why}");
        std::thread::scope(|sc| {
            let out = tmp.path().join(format!("{name}.pem"));
            let (slapd, d1, name) = (&slapd, &d1, name.as_str());
            sc.spawn(move || v(slapd, d1).args(["renew", name, "--out", s(&out)]).output().unwrap());
            sc.spawn(move || v(slapd, d1).args(["revoke", name, "--reason", "key-compromise"]).output().unwrap());
        });
        let now = list(&slapd, &d1).into_iter().find(|e| e["name"] == name.as_str()).unwrap();
        assert_eq!(now["state"], "revoked", "{name}: a renewal outlived the revocation: {now}");
    }

    // A renewal that dies after registering leaves a mark; a clean through the running master
    // (whose own completion ran at its start) completes it instead of erasing it.
    let name = "mark.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert_eq!(put, 200, "{why}");
    let first = serial_of(&cert.unwrap());
    let died = v(&slapd, &d1)
        .args(["renew", name, "--out", s(&tmp.path().join("mark.pem"))])
        .env("VOUCH_TEST_ABORT_AT", "ldap:registered")
        .output()
        .unwrap();
    assert!(died.status.code().is_none(), "{}", text(&died));
    let r = m1.admin().request("DELETE", &format!("/puppet-ca/v1/certificate_status/{name}"), None, b"").unwrap();
    assert_eq!(r.status, 204, "{}", r.text());
    let crl = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    assert!(crl_serials(crl.as_bytes()).contains(&first), "the superseded {first} was never revoked");

    // A second master under the first one's service name: refused, the first one's untouched.
    let d2 = tmp.path().join("m2");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let clash =
        v(&slapd, &d2).args(["serve", "--listen", "127.0.0.1:0", "--server-name", "ca1.test"]).output().unwrap();
    assert_eq!(clash.status.code(), Some(2), "{}", text(&clash));
    assert!(String::from_utf8_lossy(&clash.stderr).contains("another master"), "{}", text(&clash));
    let served = list(&slapd, &d1).into_iter().find(|e| e["name"] == "ca1.test").unwrap();
    assert_eq!(served["state"], "signed", "{served}");

    // A damaged revocation entry under this CA: issuance and the CRL go on.
    let ca_pem = std::fs::read(d1.join("ca/ca_crt.pem")).unwrap();
    let (_, ca_der) = vouch::encoding::pem::find(&ca_pem, &["CERTIFICATE"]).unwrap();
    let ca = vouch::store::ca_id(&ca_der);
    slapd
        .ldapadd(&format!(
            "dn: vouchSerial=abcdef,vouchCa={ca},ou=cas,{base}\nobjectClass: vouchRevocation\nvouchSerial: abcdef\n\
             vouchCertname: junk.example.test\nvouchTime: 20260101000000Z\nvouchRecord: not json\n"
        ))
        .ok();
    let name = "after-damage.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert!(put == 200 && cert.is_some(), "issuance stopped on a damaged entry: {put} {why}");
    let crl = v(&slapd, &d1).args(["crl"]).output().unwrap();
    assert!(crl.status.success(), "{}", text(&crl));
    assert!(String::from_utf8_lossy(&crl.stderr).contains("damaged revocation entry"), "{}", text(&crl));

    // The hook without --store, on the policy the masters retired: refused, by name.
    let name = "hookfiles.example.test";
    let hook =
        run(vouch().args(["--dir", s(&d1), "autosign", name]), Some(&csr_for(name, &vouched(&d1, name), &p256())));
    assert_eq!(hook.status.code(), Some(2), "{}", text(&hook));
    assert!(String::from_utf8_lossy(&hook.stderr).contains("retired"), "{}", text(&hook));
}

/// `ldapi://` with SASL EXTERNAL (no password anywhere): the store works the same.
/// OpenLDAP only: the private 389 DS instance listens on no ldapi socket (its autobind of
/// a Unix user to a DN is a set-up docs/ldap.md does not give).
#[test]
fn an_ldapi_store_binds_by_sasl_external() {
    let slapd = store();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(&slapd, &d1, "ca1.test"));
    let url = slapd.ldapi_url(BASE);
    assert!(url.starts_with("ldapi://%2F"), "{url}");
    let ldapi = || {
        let mut c = vouch();
        c.args(["--dir", s(&d1), "--store", &url]);
        c
    };
    let out = ok(&ldapi().args(["ldap", "init"]).output().unwrap());
    assert!(out.contains("nothing to do"), "{out}");
    let name = "ldapi.example.test";
    let csr = tmp.path().join("ldapi.csr");
    std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
    ok(&ldapi().args(["sign", "--csr", s(&csr), "--out", s(&tmp.path().join("ldapi.pem"))]).output().unwrap());
    // The same store through ldap:// with the password sees it.
    assert!(list(&slapd, &d1).iter().any(|e| e["name"] == name));
}

/// Writes `n` generated certificates of the CA in `d1` (one in ten revoked; each with the
/// PEM `pem`) as LDIF piped into `slapadd -q` (slapd is stopped, and left stopped): the
/// time that took.
fn load_generated(slapd: &Slapd, d1: &Path, pem: &str, n: usize) -> Duration {
    let ca_pem = std::fs::read(d1.join("ca/ca_crt.pem")).unwrap();
    let (_, ca_der) = vouch::encoding::pem::find(&ca_pem, &["CERTIFICATE"]).unwrap();
    let ca = vouch::store::ca_id(&ca_der);
    let b64 = |b: &[u8]| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    };
    // The LDIF (about 2.5 KB per certificate) goes to slapadd through a pipe, not a file: at a
    // million certificates a file would take 2.5 GB of disk beside the database.
    let pem = pem.to_owned();
    slapd.stop();
    let t = Instant::now();
    let mut add = Command::new("/usr/sbin/slapadd")
        .args(["-q", "-f", s(&slapd.dir().join("slapd.conf"))])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = add.stdin.take().unwrap();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        use std::io::Write;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stdin);
        for i in 0..n {
            let name = format!("gen{i:07}.example.test");
            let serial = format!("7{i:031x}");
            let revoked = i % 10 == 0;
            let rec = serde_json::json!({
                "serial": serial, "certname": name, "state": if revoked { "revoked" } else { "issued" },
                "digest": "", "not_before": "2026-01-01T00:00:00Z", "not_after": "2031-01-01T00:00:00Z",
                "revoked_at": if revoked { Some("2026-06-01T00:00:00Z") } else { None }, "reason": "unspecified",
                "issuer": ca, "attributes_expiry": "2026-01-01T01:00:00Z", "conductor": "generated",
            });
            let rec = rec.to_string();
            writeln!(w, "dn: vouchCertname={name},ou=certnames,{BASE}\nobjectClass: vouchRegistered\nvouchCertname: {name}\nvouchRevision: 1\nvouchState: {}\nvouchSerial: {serial}\nvouchCa: {ca}\nvouchRecord:: {}\nvouchCertificate:: {}\nvouchNotAfter: 20310101000000Z\n",
                if revoked { "revoked" } else { "issued" }, b64(rec.as_bytes()), b64(pem.as_bytes()))?;
            if revoked {
                let r = serde_json::json!({ "record": serde_json::from_str::<serde_json::Value>(&rec).unwrap(), "cleaned": false });
                writeln!(w, "dn: vouchSerial={serial},vouchCa={ca},ou=cas,{BASE}\nobjectClass: vouchRevocation\nvouchSerial: {serial}\nvouchCertname: {name}\nvouchTime: 20260601000000Z\nvouchRecord:: {}\n",
                    b64(r.to_string().as_bytes()))?;
            }
        }
        w.flush()
    });
    let out = add.wait_with_output().unwrap();
    let wrote = writer.join().unwrap();
    let db = slapd.dir().join("db");
    assert!(
        out.status.success() && wrote.is_ok(),
        "slapadd of {n} generated entries failed: {} (a signal such as SIGBUS means its memory map could not be \
         written: is the disk full?), writing its input: {wrote:?}; stderr: {}\nfree space where the database is: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        free_space(&db)
    );
    t.elapsed()
}

/// `df -h` of the file system holding `dir`, for a failure's message.
fn free_space(dir: &Path) -> String {
    Command::new("df")
        .args(["-h", s(dir)])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("df failed: {e}"))
}

/// Listings of more than one page (1,000 entries) running at once in one master: every page
/// of a search goes over its own connection, so none fails on another's paging cookie.
#[test]
fn concurrent_listings_of_many_pages_all_succeed() {
    let slapd = store();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m = Master::start(&slapd, &d1, "ca1.test");
    let (_, _, cert) =
        enroll(&m, "real.example.test", &csr_for("real.example.test", &vouched(&d1, "real.example.test"), &p256()));
    let pem = String::from_utf8(cert.unwrap()).unwrap();
    drop(m);
    load_generated(&slapd, &d1, &pem, 2_500);
    slapd.restart();
    concurrent_listings(&slapd, &d1, 12);
}

/// The same on 389 DS, the certificates added by `ldapadd` (every one revoked); four listings
/// at once, not twelve: one takes about 13 s there in a debug build (8 s on slapd), and twelve
/// on two busy cores pass the client's 60 s read timeout. Four still share the master's pool.
#[test]
fn concurrent_listings_of_many_pages_all_succeed_on_389ds() {
    let store = Ds389::store("concurrent_listings");
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m = Master::start(&store, &d1, "ca1.test");
    let (_, _, cert) =
        enroll(&m, "real.example.test", &csr_for("real.example.test", &vouched(&d1, "real.example.test"), &p256()));
    let pem = String::from_utf8(cert.unwrap()).unwrap();
    drop(m);
    for ldif in generated_revoked_ldif(&d1, &store.base(), &pem, 2_500, 250) {
        let added = store.ldapadd(&ldif);
        assert!(added.success(), "{added}");
    }
    concurrent_listings(&store, &d1, 4);
}

/// `listings` listings of every certificate at once (more than 2,500) from one master on `d1`.
fn concurrent_listings(slapd: &dyn Directory, d1: &Path, listings: usize) {
    let m = Master::start(slapd, d1, "ca1.test");
    let statuses: Vec<u16> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..listings)
            .map(|_| {
                let m = &m;
                sc.spawn(move || {
                    let r = m.admin().request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"").unwrap();
                    let n = serde_json::from_slice::<Vec<serde_json::Value>>(&r.body).map(|v| v.len()).unwrap_or(0);
                    assert!(r.status != 200 || n > 2_500, "a listing of {n} entries");
                    r.status
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}\n{}", m.log());
}

/// `ldaps://` verifies the server against `--ldap-ca` (and its name: here an IP address SAN):
/// with the right CA the store works; with another CA, or a certificate for another name,
/// nothing is sent (a configuration error, exit 2, the TLS reason named).
/// (OpenLDAP only: the private 389 DS instance is created without a TLS certificate.)
#[test]
fn an_ldaps_store_verifies_the_server_against_ldap_ca() {
    common::require("openssl", "openssl");
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let sh = |script: &str| {
        let o = Command::new("sh").arg("-c").arg(script).current_dir(t).output().unwrap();
        assert!(o.status.success(), "{script}: {}", String::from_utf8_lossy(&o.stderr));
    };
    // A CA, a server certificate for 127.0.0.1 and one for another name, and a stranger CA.
    for ca in ["ca", "other"] {
        sh(&format!(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN={ca} \
             -keyout {ca}.key -out {ca}.pem 2>/dev/null"
        ));
    }
    for (name, san) in [("server", "IP:127.0.0.1"), ("wrongname", "DNS:elsewhere.test")] {
        sh(&format!(
            "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN={name} -keyout {name}.key \
             -out {name}.csr 2>/dev/null && printf 'subjectAltName={san}\\n' > {name}.ext && openssl x509 -req \
             -in {name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile {name}.ext -out {name}.pem 2>/dev/null"
        ));
    }
    let mut opts = slapd_opts();
    opts.tls = Some((t.join("server.pem"), t.join("server.key")));
    let slapd = Slapd::start(&opts);
    let d1 = t.join("m1");
    ok(&vouch().args(["ca", "init", "--dir", s(&d1)]).output().unwrap());
    let ldaps = |ca: &str| {
        let mut c = vouch();
        c.args(["--dir", s(&d1), "--store", &slapd.ldaps_url(BASE), "--ldap-ca", s(&t.join(ca))]).args([
            "--ldap-bind-dn",
            slapd.bind_dn(),
            "--ldap-password-file",
            s(&slapd.password_file()),
        ]);
        c
    };
    let out = ok(&ldaps("ca.pem").args(["ldap", "init", "--create-base"]).output().unwrap());
    assert!(out.contains("created"), "{out}");
    ok(&ldaps("ca.pem").args(["list", "--all"]).output().unwrap());
    let o = ldaps("other.pem").args(["list"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).to_lowercase().contains("certificate"), "{}", text(&o));
    drop(slapd);
    let mut opts = slapd_opts();
    opts.tls = Some((t.join("wrongname.pem"), t.join("wrongname.key")));
    let slapd = Slapd::start(&opts);
    let o = vouch()
        .args(["--dir", s(&d1), "--store", &slapd.ldaps_url(BASE), "--ldap-ca", s(&t.join("ca.pem"))])
        .args(["--ldap-bind-dn", slapd.bind_dn(), "--ldap-password-file", s(&slapd.password_file())])
        .args(["list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "a server certificate for another name was accepted: {}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name the URL's host"), "{}", text(&o));
}

/// `vouch_ldap_operations_total{op="bind"}` as `/metrics` on `addr` says it.
fn ldap_binds(addr: std::net::SocketAddr) -> u64 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    raw.lines()
        .find_map(|l| l.strip_prefix("vouch_ldap_operations_total{op=\"bind\"} "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no bind count in:\n{raw}"))
}

/// A master's LDAP connections are kept, not opened per operation: each pool (a master has
/// two, the store's and the replay journal's, src/store/open.rs) keeps up to MAX_IDLE
/// connections idle, as many as `vouch serve` has blocking threads, and each thread uses one
/// connection of a pool at a time; so a load of any length binds at most POOLS × MAX_IDLE
/// times. Found by review: with 32 threads and pools that kept 16, every operation beyond the
/// 16th at once connected and bound anew (42–61 binds for 256 certificates).
#[test]
fn a_load_binds_no_more_ldap_connections_than_the_pool_keeps() {
    load_binds_no_more_than_the_pool(&store());
}

#[test]
fn a_load_binds_no_more_ldap_connections_than_the_pool_keeps_on_389ds() {
    load_binds_no_more_than_the_pool(&Ds389::store("load_binds_no_more_than_the_pool"));
}

fn load_binds_no_more_than_the_pool(slapd: &dyn Directory) {
    const MAX_IDLE: u64 = vouch::store::ldap::MAX_IDLE as u64;
    const POOLS: u64 = 2;
    const CERTS: usize = 512;
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let m1 = Master::start_env(&d1, "ca1.test", &store_env(&slapd), &["--metrics-listen", &free.to_string()]);
    let work: Vec<(String, Vec<u8>)> = (0..CERTS)
        .map(|i| {
            let name = format!("pool{i:03}.example.test");
            let csr = csr_for(&name, &vouched(&d1, &name), &p256());
            (name, csr)
        })
        .collect();
    let addr = m1.addr();
    let bundle = std::fs::read(d1.join("ca/ca_bundle.pem")).unwrap();
    let config = tls_config(&bundle, None).unwrap();
    let before = ldap_binds(free);
    let granted: usize = std::thread::scope(|sc| {
        let handles: Vec<_> = work
            .chunks(CERTS / 64)
            .map(|chunk| {
                let config = config.clone();
                sc.spawn(move || {
                    let mut c = Client::new(config, addr, "localhost").unwrap();
                    let mut ok = 0;
                    for (name, csr) in chunk {
                        let put = c
                            .request(
                                "PUT",
                                &format!("/puppet-ca/v1/certificate_request/{name}"),
                                Some("text/plain"),
                                csr,
                            )
                            .unwrap();
                        let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
                        ok += usize::from(put.status == 200 && get.status == 200);
                    }
                    ok
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(granted, CERTS, "{}", m1.log());
    let binds = ldap_binds(free) - before;
    assert!(
        binds <= POOLS * MAX_IDLE,
        "{binds} new LDAP binds for {CERTS} certificates at 64 agents ({POOLS} pools keep {MAX_IDLE} each)"
    );
}

/// An independent review of `vouch store verify` (this test failed before the fix). On the LDAP store, verify checks a
/// certificate's signature against every `vouchIssuer` entry of the store, taken on trust;
/// the real path (`vouch enc`, renewal: `Authority::verify_ours`) accepts another master CA
/// only if it chains to this CA's root. Whoever can write the LDAP store adds an issuer
/// entry for a CA of their own, and a node's certificate signed by it (same serial, CN and
/// notAfter as its record) passes verify with no finding, while `vouch enc` refuses it.
#[test]
fn review_verify_on_ldap_trusts_any_issuer_entry_in_the_store() {
    verify_trusts_no_issuer_entry(&store());
}

#[test]
fn review_verify_on_ldap_trusts_any_issuer_entry_in_the_store_on_389ds() {
    verify_trusts_no_issuer_entry(&Ds389::store("verify_trusts_no_issuer_entry"));
}

fn verify_trusts_no_issuer_entry(slapd: &dyn Directory) {
    let base = slapd.base();
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let d = w.join("m1");
    ok(&vouch().args(["--dir", s(&d), "ca", "init"]).output().unwrap());
    ok(&vouch()
        .args(["--dir", s(&d), "conductor", "new", "cond", "--cert-out", s(&w.join("cond.pem")), "--key-out"])
        .arg(w.join("cond.key"))
        .output()
        .unwrap());
    let name = "node.example.test";
    let csr = common::cli_vouched_csr(w, &w.join("cond.pem"), &w.join("cond.key"), name);
    let pem = ok(&v(&slapd, &d).args(["sign", "--csr", s(&csr)]).output().unwrap());
    ok(&v(&slapd, &d).args(["enc", name]).output().unwrap());
    let o = v(&slapd, &d).args(["store", "verify"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));

    // A CA of the tamperer's own, registered as a master CA of the store.
    let (_, der) = vouch::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).unwrap();
    let (_, real) = x509_parser::parse_x509_certificate(&der).unwrap();
    let rogue_key = rcgen::KeyPair::generate().unwrap();
    let mut rogue = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    rogue.distinguished_name.push(rcgen::DnType::CommonName, "Not the vouch CA");
    rogue.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let rogue_cert = rogue.self_signed(&rogue_key).unwrap();
    let id = vouch::store::ca_id(rogue_cert.der());
    let ldif = format!(
        "dn: vouchCa={id},ou=cas,{base}\nobjectClass: vouchIssuer\nvouchCa: {id}\nvouchRevision: 0\nvouchCertificate: {}\n",
        rogue_cert.pem().replace('\n', "\n ")
    );
    slapd.ldapadd(ldif.trim_end()).ok();
    // The node's certificate replaced by one the rogue CA signed: its serial, CN, notAfter.
    let node_key = rcgen::KeyPair::generate().unwrap();
    let mut forged = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    forged.distinguished_name.push(rcgen::DnType::CommonName, name);
    forged.serial_number = Some(rcgen::SerialNumber::from_slice(real.raw_serial()));
    forged.not_before = real.validity().not_before.to_datetime();
    forged.not_after = real.validity().not_after.to_datetime();
    let forged = forged.signed_by(&node_key, &rcgen::Issuer::new(rogue, &rogue_key)).unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(forged.pem());
    slapd
        .ldapmodify(&format!(
            "dn: vouchCertname={name},ou=certnames,{base}\nchangetype: modify\nreplace: vouchCertificate\nvouchCertificate:: {b64}\n"
        ))
        .ok();
    // vouch's own path refuses it: it does not chain to this CA's root.
    let enc = v(&slapd, &d).args(["enc", name]).output().unwrap();
    assert_eq!(enc.status.code(), Some(2), "{}", text(&enc));
    assert!(String::from_utf8_lossy(&enc.stderr).contains("does not verify against this CA"), "{}", text(&enc));
    // verify should name it.
    let o = v(&slapd, &d).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "a certificate signed by a CA anyone added passes verify:\n{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"finding\":\"not-signed-by-ca\""), "{}", text(&o));
}

/// An independent review of `vouch store verify` (this test failed before the fix): one registry entry whose vouchRecord does not parse (a
/// hand edit, a bad import). Verify reports it as the certname's (current-unreadable), and
/// then `Store::inventory`, which parses every entry's record and stops at the first it
/// cannot, fails: exit 2 ("the store could not be read"), no summary, the inventory and
/// revocation and CRL checks never run. One damaged entry should be a finding (exit 1).
#[test]
fn review_verify_on_ldap_reports_a_damaged_entry_and_goes_on() {
    verify_reports_a_damaged_entry(&store());
}

#[test]
fn review_verify_on_ldap_reports_a_damaged_entry_and_goes_on_on_389ds() {
    verify_reports_a_damaged_entry(&Ds389::store("verify_reports_a_damaged_entry"));
}

fn verify_reports_a_damaged_entry(slapd: &dyn Directory) {
    let base = slapd.base();
    let w = tempfile::tempdir().unwrap();
    let w = w.path();
    let d = w.join("m1");
    ok(&vouch().args(["--dir", s(&d), "ca", "init"]).output().unwrap());
    ok(&vouch()
        .args(["--dir", s(&d), "conductor", "new", "cond", "--cert-out", s(&w.join("cond.pem")), "--key-out"])
        .arg(w.join("cond.key"))
        .output()
        .unwrap());
    for name in ["a.example.test", "b.example.test"] {
        let csr = common::cli_vouched_csr(w, &w.join("cond.pem"), &w.join("cond.key"), name);
        ok(&v(&slapd, &d).args(["sign", "--csr", s(&csr)]).output().unwrap());
    }
    let o = v(&slapd, &d).args(["store", "verify"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    slapd
        .ldapmodify(&format!(
            "dn: vouchCertname=a.example.test,ou=certnames,{base}\nchangetype: modify\nreplace: vouchRecord\nvouchRecord: not json\n"
        ))
        .ok();
    let o = v(&slapd, &d).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"finding\":\"current-unreadable\""), "{}", text(&o));
    assert_eq!(o.status.code(), Some(1), "one damaged entry ends the check with an error:\n{}", text(&o));
}

/// Review of `vouch revoke --serial` on the shared store: master 2 revokes by serial a
/// certificate master 1 issued (master 1's CRL lists it, as `vouch revoke NAME` at master 2
/// does); asked again, at either master, it says the certificate was already revoked. On
/// master 2 the record (found anywhere in the store) says revoked, and master 2's own
/// revocations do not list it (they are its CA's only): it said "no revocation listed it:
/// recorded again", and wrote a second "revoked" audit event and a CRL.
#[test]
fn review7_revoke_by_serial_of_another_masters_certificate_on_the_shared_store() {
    revoke_by_serial_of_another_master(&store());
}

#[test]
fn review7_revoke_by_serial_of_another_masters_certificate_on_the_shared_store_on_389ds() {
    revoke_by_serial_of_another_master(&Ds389::store("revoke_by_serial_of_another_master"));
}

fn revoke_by_serial_of_another_master(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (m1, m2) = two_masters(&slapd, tmp.path());
    let d1 = m1.dir.clone();
    let name = "web03.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert_eq!(put, 200, "{why}");
    let serial = serial_of(&cert.unwrap());
    let first =
        ok(&v(&slapd, &m2.dir).args(["revoke", "--serial", &serial, "--reason", "key-compromise"]).output().unwrap());
    assert!(first.contains("revoked serial"), "{first}");
    let crl1 = ok(&v(&slapd, &d1).args(["crl"]).output().unwrap());
    assert!(crl_serials(crl1.as_bytes()).contains(&serial), "master 1's CRL lacks {serial}");
    for d in [&d1, &m2.dir] {
        let again = ok(&v(&slapd, d).args(["revoke", "--serial", &serial]).output().unwrap());
        assert!(again.contains("already revoked"), "{}: {again}", d.display());
    }
    drop(m1);
    drop(m2);
}

/// A revocation cut short between its two writes (the revocation entry added under the CA,
/// the process killed before the certname's entry says revoked): the CRL lists the serial
/// while the listing still shows the certificate as valid. `vouch store verify` names it
/// (revocation-unfinished, exit 1), and `vouch revoke NAME` run again finishes it.
#[test]
fn a_revocation_cut_short_is_named_by_verify_and_finished_by_revoking_again() {
    revocation_cut_short(&store(), false);
}

#[test]
fn a_revocation_cut_short_is_named_by_verify_and_finished_by_revoking_again_on_389ds() {
    revocation_cut_short(&Ds389::store("revocation_cut_short"), false);
}

/// The same, finished by `vouch revoke --serial` given as Puppet's inventory spells serials
/// (`0x`, a leading zero octet, uppercase): it said "already revoked" and left the certname's
/// entry saying issued (and did not find the serial so spelled).
#[test]
fn a_revocation_cut_short_is_finished_by_revoke_serial_in_puppets_spelling() {
    revocation_cut_short(&store(), true);
}

#[test]
fn a_revocation_cut_short_is_finished_by_revoke_serial_in_puppets_spelling_on_389ds() {
    revocation_cut_short(&Ds389::store("revocation_cut_short_serial"), true);
}

fn revocation_cut_short(slapd: &dyn Directory, by_serial: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(slapd, &d1, "ca1.test"));
    let name = "cut1.example.test";
    let csr = tmp.path().join("cut1.csr");
    std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
    ok(&v(slapd, &d1).args(["sign", "--csr", s(&csr), "--out", s(&csr.with_extension("pem"))]).output().unwrap());
    let serial = serial_of(&std::fs::read(csr.with_extension("pem")).unwrap());
    let died =
        v(slapd, &d1).args(["revoke", name]).env("VOUCH_TEST_ABORT_AT", "ldap:revocation-added").output().unwrap();
    assert!(died.status.code().is_none(), "the process did not abort: {}", text(&died));
    let crl = ok(&v(slapd, &d1).args(["crl"]).output().unwrap());
    assert!(crl_serials(crl.as_bytes()).contains(&serial), "the CRL lacks {serial}");
    let listed = list(slapd, &d1);
    let entry = listed.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(entry["serial"], serial.as_str(), "{entry}");
    assert_eq!(entry["state"], "signed", "the listing already says revoked: {entry}");
    let o = v(slapd, &d1).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let found = String::from_utf8_lossy(&o.stdout);
    assert!(found.contains("\"finding\":\"revocation-unfinished\"") && found.contains(&serial), "{found}");
    // Revoking again finishes it: the name's entry says revoked, verify finds nothing.
    if by_serial {
        let puppets = format!("0x00{}", serial.to_uppercase());
        let done = ok(&v(slapd, &d1).args(["revoke", "--serial", &puppets]).output().unwrap());
        assert!(done.contains("says revoked now"), "{done}");
    } else {
        ok(&v(slapd, &d1).args(["revoke", name]).output().unwrap());
    }
    let o = v(slapd, &d1).args(["store", "verify"]).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("no findings"), "{}", text(&o));
    let shown = ok(&v(slapd, &d1).args(["list", "--all", "--format", "json"]).output().unwrap());
    let listed: Vec<serde_json::Value> = serde_json::from_str(&shown).unwrap();
    assert!(listed.iter().any(|e| e["name"] == name && e["state"] == "revoked"), "{shown}");
}

/// A cleaned certname's tombstone kept its certificate and stayed for ever: `vouch purge
/// --tombstones` removes those whose certificate expired a CRL period ago (a dry run first;
/// none before), the revocation entry keeps the certificate, `vouch store verify` finds
/// nothing, and the name takes a new certificate. A purge killed between its two writes leaves
/// the tombstone `purging` (read as no entry; a new certificate of the name is refused as a
/// conflict) until a later purge takes it over.
#[test]
fn tombstones_of_expired_certificates_are_purged_and_the_name_issues_again() {
    tombstones_purged(&store());
}

#[test]
fn tombstones_of_expired_certificates_are_purged_and_the_name_issues_again_on_389ds() {
    tombstones_purged(&Ds389::store("tombstones_purged"));
}

fn tombstones_purged(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(slapd, &d1, "ca1.test"));
    let sign = |name: &str| {
        let csr = tmp.path().join(format!("{name}.csr"));
        std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
        v(slapd, &d1).args(["sign", "--csr", s(&csr), "--out", s(&csr.with_extension("pem"))]).output().unwrap()
    };
    let entry = |name: &str| {
        let filter = format!("(&(objectClass=vouchRegistered)(vouchCertname={name}))");
        slapd.ldapsearch(&slapd.base(), &filter, &["vouchState", "vouchCertificate"]).stdout
    };
    let (gone, stuck) = ("gone1.example.test", "gone2.example.test");
    let mut later = String::new();
    for name in [gone, stuck] {
        ok(&sign(name));
        let pem = std::fs::read(tmp.path().join(format!("{name}.pem"))).unwrap();
        let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
        // Expired, and a CRL period (30 days) more.
        let t = c.validity().not_after.to_datetime() + time::Duration::days(31);
        later = t.format(&time::format_description::well_known::Rfc3339).unwrap();
        ok(&v(slapd, &d1).args(["clean", name]).output().unwrap());
        let e = entry(name);
        assert!(e.contains("vouchState: cleaned") && e.contains("vouchCertificate"), "{e}");
    }
    let purge = |extra: &[&str]| v(slapd, &d1).args(["purge", "--tombstones"]).args(extra).output().unwrap();
    // Unexpired: none, not even listed.
    let none = ok(&purge(&["--confirm"]));
    assert!(none.contains("no tombstone"), "{none}");
    assert!(entry(gone).contains("vouchState: cleaned"), "purged before its certificate expired");
    let dry = ok(&purge(&["--now", &later]));
    assert!(dry.contains(&format!("would remove the tombstone of {gone}")) && dry.contains("dry run"), "{dry}");
    assert!(entry(gone).contains("vouchState: cleaned"), "a dry run removed it");
    // Killed between its two writes: the tombstone says purging, the name refuses a certificate.
    let died = v(slapd, &d1)
        .args(["purge", "--tombstones", "--confirm", "--now", &later])
        .env("VOUCH_TEST_ABORT_AT", "ldap:tombstone-purging")
        .output()
        .unwrap();
    assert!(died.status.code().is_none(), "the process did not abort: {}", text(&died));
    let purging = [gone, stuck].iter().filter(|n| entry(n).contains("vouchState: purging")).count();
    assert_eq!(purging, 1, "{}{}", entry(gone), entry(stuck));
    let blocked = if entry(gone).contains("purging") { gone } else { stuck };
    let refused = sign(blocked);
    assert!(!refused.status.success(), "a certificate over a tombstone being purged: {}", text(&refused));
    // Seconds old by the server's clock, it is left (whatever --now says); the next purge takes
    // it over once the server's clock says the takeover age passed (shortened to 2 s here:
    // VOUCH_TEST_TAKEOVER_SECS), and does the other.
    let young = ok(&purge(&["--confirm", "--now", &later]));
    assert!(entry(blocked).contains("vouchState: purging"), "taken over at once ({young}): {}", entry(blocked));
    std::thread::sleep(Duration::from_secs(3));
    let done = ok(&v(slapd, &d1)
        .args(["purge", "--tombstones", "--confirm", "--now", &later])
        .env("VOUCH_TEST_TAKEOVER_SECS", "2")
        .output()
        .unwrap());
    for name in [gone, stuck] {
        assert!(!entry(name).contains("vouchState"), "{name} still has its tombstone ({done}): {}", entry(name));
    }
    // The revocation entries keep both certificates; verify finds nothing amiss.
    let kept = slapd.ldapsearch(&slapd.base(), "(objectClass=vouchRevocation)", &["vouchCertname", "vouchCertificate"]);
    assert_eq!(kept.stdout.matches("vouchCertificate").count(), 2, "{kept}");
    let o = v(slapd, &d1).args(["store", "verify"]).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("no findings"), "{}", text(&o));
    // Both names take a new certificate.
    for name in [gone, stuck] {
        ok(&sign(name));
    }
    let listed = list(slapd, &d1);
    for name in [gone, stuck] {
        assert!(listed.iter().any(|e| e["name"] == name && e["state"] == "signed"), "{name}: {listed:?}");
    }
}

/// `vouch ldap schema --format 389ds --backend NAME` indexes that backend and reindexes it
/// under a task of its own (it named the backend `userRoot` and the task `vouch-reindex`
/// whatever the store's backend was, and a second run's task collided with the first's): on
/// a second backend of the test instance, its index entries are there and its task ends
/// with exit code 0; two runs name two tasks; a name that is no backend's is refused.
#[test]
fn the_389ds_schema_indexes_the_backend_named_under_a_task_of_its_own_on_389ds() {
    let ds = Ds389::shared();
    let other = "dc=vouchroot,dc=test";
    ds.dsconf(&ds.url(""), &["backend", "create", "--suffix", other, "--be-name", "vouchRoot", "--create-suffix"]);
    let schema = |backend: &str| {
        ok(&vouch().args(["ldap", "schema", "--format", "389ds", "--backend", backend]).output().unwrap())
    };
    let first = schema("vouchRoot");
    let task_of = |ldif: &str| ldif.lines().find(|l| l.starts_with("dn: cn=vouch-reindex")).map(str::to_string);
    let again = schema("vouchRoot");
    assert_ne!(task_of(&first), task_of(&again), "two runs name one task");
    assert!(!first.contains("userRoot"), "{first}");
    // The schema is the instance's already (`-c` goes on past it): the indexes are new.
    let _ = ds.manager("ldapmodify", &["-c"], Some(&first));
    let task = ds.wait_for_task(&first);
    assert!(task.starts_with("cn=vouch-reindex-"), "{task}");
    let indexes = ds.manager(
        "ldapsearch",
        &["-LLL", "-b", "cn=index,cn=vouchRoot,cn=ldbm database,cn=plugins,cn=config", "(cn=vouch*)", "cn"],
        None,
    );
    for attr in ["vouchSerial", "vouchCertname", "vouchKey", "vouchExpiry", "vouchSupersedes"] {
        assert!(indexes.stdout.contains(&format!("cn: {attr}")), "no index of {attr} in vouchRoot: {indexes}");
    }
    let bad = vouch().args(["ldap", "schema", "--format", "389ds", "--backend", "userRoot,cn=x"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a backend name"), "{}", text(&bad));
}

/// Bad set-ups of 389 Directory Server are refused by name, with nothing written: a base DN
/// that does not exist, and a bind DN without the ACI (it may neither read nor create the
/// store). A slapd without vouch's schema is refused naming each server's way to load it.
#[test]
fn bad_directory_set_ups_are_refused_naming_the_fix() {
    let ds = Ds389::shared();
    let tmp = tempfile::tempdir().unwrap();
    let none = tmp.path().join("none");
    let store = common::ds389::Ds389Store { ds, base: "ou=missing,dc=vouch,dc=test".into() };
    let typo = v(&store, &none).args(["ldap", "init"]).output().unwrap();
    assert_eq!(typo.status.code(), Some(2), "{}", text(&typo));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("--create-base"), "{}", text(&typo));
    // A bind DN of its own without the ACI docs/ldap.md gives.
    let pw = tmp.path().join("pw");
    std::fs::write(&pw, "no-rights-secret").unwrap();
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let add = ds.manager(
        "ldapmodify",
        &[],
        Some(
            "dn: cn=norights,dc=vouch,dc=test\nchangetype: add\nobjectClass: top\nobjectClass: applicationProcess\n\
             objectClass: simpleSecurityObject\ncn: norights\nuserPassword: no-rights-secret\n",
        ),
    );
    assert!(add.success(), "{add}");
    let mut c = vouch();
    c.args(["--dir", s(&none), "ldap", "init", "--create-base"])
        .env("VOUCH_STORE", ds.url("ou=norights,dc=vouch,dc=test"))
        .env("VOUCH_LDAP_BIND_DN", "cn=norights,dc=vouch,dc=test")
        .env("VOUCH_LDAP_PASSWORD_FILE", s(&pw));
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("ACI") || said.contains("may not read"), "{}", text(&o));
    let there = ds.manager("ldapsearch", &["-LLL", "-b", "ou=norights,dc=vouch,dc=test", "-s", "base", "1.1"], None);
    assert!(!there.stdout.contains("dn:"), "something was written: {there}");

    // A slapd without vouch's schema.
    let bare = Slapd::start(&common::slapd::SlapdOpts::default());
    let o = v(&bare, &none).args(["ldap", "init", "--create-base"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("vouch ldap schema --ldif") && said.contains("--format 389ds"), "{}", text(&o));
}

/// The one-writer rule with a confirmed standby on 389 Directory Server: a supplier and a
/// consumer replicating it. Every certificate acknowledged by a master writing to the
/// supplier with `--store-confirm-replicas` is on the consumer; after the supplier dies and
/// the consumer is promoted (`dsconf replication promote`), every one of them is there and
/// its attributes stay spent. A consumer that does not answer: nothing is signed (503).
#[test]
fn a_389ds_consumer_is_a_confirmed_standby_and_keeps_every_acknowledged_certificate() {
    let (supplier, consumer) = Ds389::pair();
    let tmp = tempfile::tempdir().unwrap();
    let primary = supplier.store_here("repl");
    let standby = common::ds389::Ds389Store { ds: &consumer, base: primary.base.clone() };
    let d1 = tmp.path().join("m1");
    let confirm = ["--store-replica", &standby.url(&standby.base), "--store-confirm-replicas"];
    let m1 = Master::start_env(&d1, "ca1.test", &store_env(&primary), &confirm);
    let mut issued = Vec::new();
    for i in 0..10 {
        let name = format!("fo{i:02}.example.test");
        let attrs = vouched(&d1, &name);
        let (put, why, cert) = enroll(&m1, &name, &csr_for(&name, &attrs, &p256()));
        assert_eq!(put, 200, "{why}");
        let serial = serial_of(&cert.unwrap());
        // Confirmed before the answer: the consumer shows it now.
        let there = standby.ldapsearch(
            &format!("vouchCertname={name},ou=certnames,{}", standby.base),
            "(objectClass=*)",
            &["vouchSerial"],
        );
        assert!(there.stdout.contains(&serial), "{name}: {serial} not on the consumer when acknowledged: {there}");
        issued.push((name, attrs, serial));
    }
    // The supplier dies (fenced); the consumer is promoted; the master moves to it.
    drop(m1);
    supplier.stop();
    consumer.dsconf(
        &consumer.url(""),
        &["replication", "promote", "--suffix", common::ds389::SUFFIX, "--newrole", "supplier", "--replica-id", "2"],
    );
    let m1 = Master::start_env(&d1, "ca1.test", &store_env(&standby), &[]);
    let listed = list(&standby, &d1);
    for (name, attrs, serial) in &issued {
        assert!(
            listed.iter().any(|e| e["name"] == name.as_str() && e["serial"] == serial.as_str()),
            "{name}: certificate {serial} lost in the failover"
        );
        let (put, why, _) = enroll(&m1, name, &csr_for(name, attrs, &p256()));
        assert_eq!(put, 400, "{name}: {why}");
    }
    // A standby that does not answer (the dead supplier as the replica): 503, nothing signed.
    drop(m1);
    let dead = supplier.url(&primary.base);
    let m1 = Master::start_env(
        &d1,
        "ca1.test",
        &store_env(&standby),
        &["--store-replica", &dead, "--store-confirm-replicas"],
    );
    let name = "unconfirmed.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name), &p256()));
    assert_eq!(put, 503, "{why}\n{}", m1.log());
    assert!(cert.is_none(), "a certificate was signed for an unconfirmed claim");
}

/// BER: one TLV.
fn ber(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 128 => out.push(n as u8),
        n => {
            let bytes: Vec<u8> = n.to_be_bytes().iter().copied().skip_while(|b| *b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
    }
    out.extend_from_slice(content);
    out
}

/// A server that speaks just enough LDAP to answer every search with a root DSE listing
/// `controls` (no paged results) and nothing else, and every bind with success.
fn fake_ldap_server(controls: &'static [&'static str]) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || loop {
                let mut head = [0u8; 2];
                if conn.read_exact(&mut head).is_err() {
                    return;
                }
                let len = if head[1] & 0x80 == 0 {
                    head[1] as usize
                } else {
                    let mut l = vec![0u8; (head[1] & 0x7f) as usize];
                    if conn.read_exact(&mut l).is_err() {
                        return;
                    }
                    l.iter().fold(0usize, |a, b| a << 8 | *b as usize)
                };
                let mut body = vec![0u8; len];
                if conn.read_exact(&mut body).is_err() {
                    return;
                }
                // messageID (INTEGER), then the operation's tag.
                let id = &body[..2 + body[1] as usize];
                let op = body[id.len()];
                let result = [ber(0x0a, &[0]), ber(0x04, b""), ber(0x04, b"")].concat();
                let reply = match op {
                    0x60 => ber(0x30, &[id, &ber(0x61, &result)].concat()),
                    0x63 => {
                        let vals: Vec<u8> = controls.iter().flat_map(|c| ber(0x04, c.as_bytes())).collect();
                        let attr = ber(0x30, &[ber(0x04, b"supportedControl"), ber(0x31, &vals)].concat());
                        let entry = ber(0x64, &[ber(0x04, b""), ber(0x30, &attr)].concat());
                        [ber(0x30, &[id, &entry].concat()), ber(0x30, &[id, &ber(0x65, &result)].concat())].concat()
                    }
                    _ => continue,
                };
                if conn.write_all(&reply).is_err() {
                    return;
                }
            });
        }
    });
    port
}

/// A server whose root DSE lacks what vouch needs (the paged results control) is refused by
/// `vouch ldap init` and by a master's start, naming the control, before anything is written.
#[test]
fn a_server_without_paged_results_is_refused_naming_the_control() {
    let port = fake_ldap_server(&["1.3.6.1.1.12", "1.3.6.1.1.13.1"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("ldap://127.0.0.1:{port}/{BASE}");
    ok(&vouch().args(["ca", "init", "--dir", s(tmp.path())]).output().unwrap());
    let serve = ["serve", "--listen", "127.0.0.1:0", "--server-name", "ca1.test"];
    for args in [vec!["ldap", "init", "--create-base"], vec!["list", "--all"], serve.to_vec()] {
        let o = vouch().args(["--dir", s(tmp.path()), "--store", &url]).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.contains("paged results") && said.contains("1.2.840.113556.1.4.319"), "{args:?}: {}", text(&o));
    }
}

/// LDIF of `n` generated certificates of the CA in `d1` on the store at `base`, every one
/// revoked (its registry entry and its revocation entry; each with the PEM `pem`), in
/// chunks of `chunk` certificates (one `ldapadd` each).
fn generated_revoked_ldif(d1: &Path, base: &str, pem: &str, n: usize, chunk: usize) -> Vec<String> {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let ca_pem = std::fs::read(d1.join("ca/ca_crt.pem")).unwrap();
    let ca = vouch::store::ca_id(&vouch::encoding::pem::find(&ca_pem, &["CERTIFICATE"]).unwrap().1);
    let mut out = vec![String::new()];
    for i in 0..n {
        if i > 0 && i % chunk == 0 {
            out.push(String::new());
        }
        let (name, serial) = (format!("gen{i:05}.example.test"), format!("7{i:031x}"));
        let rec = serde_json::json!({
            "serial": serial, "certname": name, "state": "revoked", "digest": "",
            "not_before": "2026-01-01T00:00:00Z", "not_after": "2031-01-01T00:00:00Z",
            "revoked_at": "2026-06-01T00:00:00Z", "reason": "unspecified", "issuer": ca,
            "attributes_expiry": "2026-01-01T01:00:00Z", "conductor": "generated",
        });
        let revocation = serde_json::json!({ "record": rec, "cleaned": false });
        let ldif = out.last_mut().unwrap();
        ldif.push_str(&format!(
            "dn: vouchCertname={name},ou=certnames,{base}\nobjectClass: vouchRegistered\nvouchCertname: {name}\n\
             vouchRevision: 1\nvouchState: revoked\nvouchSerial: {serial}\nvouchCa: {ca}\nvouchRecord:: {}\n\
             vouchCertificate:: {}\nvouchNotAfter: 20310101000000Z\n\n\
             dn: vouchSerial={serial},vouchCa={ca},ou=cas,{base}\nobjectClass: vouchRevocation\nvouchSerial: {serial}\n\
             vouchCertname: {name}\nvouchTime: 20260601000000Z\nvouchRecord:: {}\n\n",
            b64(rec.to_string().as_bytes()),
            b64(pem.as_bytes()),
            b64(revocation.to_string().as_bytes())
        ));
    }
    out
}

/// The search limits of docs/ldap.md's 389 Directory Server set-up, exercised. 389 DS answers
/// at most 2,000 entries (5,000 examined) to one search by default, paged or not; vouch's
/// listings and CRLs read every entry. To keep the test cheap, the server's defaults are
/// played by a second bind DN whose own limits are 1,100 (nsSizeLimit, nsLookThroughLimit,
/// nsPagedSizeLimit, nsPagedLookThroughLimit), with 1,200 revoked certificates (ldapadd of
/// valid-shaped entries) in place of 2,000+: more than one page (1,000) and more than the
/// limit. With the limits lifted as docs/ldap.md says (the masters' bind DN), `vouch list
/// --all` lists every certificate over two pages and `vouch crl` lists every serial. Under
/// the limits, both fail with the error naming them and the fix, never with the entries up
/// to the limit: no short listing, no CRL that drops serials.
#[test]
fn listings_and_crls_past_389ds_search_limits_work_once_lifted_and_fail_loudly_under_them() {
    const N: usize = 1_200;
    const LIMIT: i64 = 1_100;
    let store = Ds389::store("search_limits");
    let base = store.base();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m = Master::start(&store, &d1, "ca1.test");
    let name = "real.example.test";
    let (_, why, cert) = enroll(&m, name, &csr_for(name, &vouched(&d1, name), &p256()));
    let pem = String::from_utf8(cert.unwrap_or_else(|| panic!("{why}"))).unwrap();
    drop(m);
    let t = Instant::now();
    for ldif in generated_revoked_ldif(&d1, &base, &pem, N, 200) {
        let added = store.ldapadd(&ldif);
        assert!(added.success(), "{added}");
    }
    eprintln!("{N} revoked certificates ({} entries) added to 389 DS in {:?}", 2 * N, t.elapsed());
    // Bind DNs held to limits below what the store holds (one to the number of entries
    // returned, one to the number examined), allowed all the rest.
    let limited = |cn: &str, size: i64, look: i64| {
        let dn = format!("cn={cn},dc=vouch,dc=test");
        let added = store.ldapmodify(&format!(
            "dn: {dn}\nchangetype: add\nobjectClass: top\nobjectClass: applicationProcess\n\
             objectClass: simpleSecurityObject\ncn: {cn}\nuserPassword: limited-secret\nnsSizeLimit: {size}\n\
             nsLookThroughLimit: {look}\nnsPagedSizeLimit: {size}\nnsPagedLookThroughLimit: {look}\n\n\
             dn: {base}\nchangetype: modify\nadd: aci\naci: {}\n",
            common::ds389::aci(&dn)
        ));
        assert!(added.success(), "{added}");
        dn
    };
    let (paged_dn, size_dn, look_dn) =
        (limited("vouch-paged", LIMIT, -1), limited("vouch-size", 500, -1), limited("vouch-look", -1, LIMIT));
    let pw = tmp.path().join("limited.pw");
    std::fs::write(&pw, "limited-secret").unwrap();
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    // Lifted (the masters' bind DN, as docs/ldap.md sets it): everything, over two pages.
    let listed = list(&store, &d1);
    let generated = listed.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("gen"))).count();
    assert_eq!(generated, N, "{} entries listed", listed.len());
    assert!(listed.iter().any(|e| e["name"] == name), "the real certificate is listed");
    ok(&v(&store, &d1).arg("crl").output().unwrap());
    let crl = std::fs::read(d1.join("ca/ca_crl.pem")).unwrap();
    assert_eq!(crl_serials(&crl).len(), N, "the CRL lists every revoked serial");

    let under = |dn: &str, args: &[&str]| {
        let mut c = v(&store, &d1);
        c.env("VOUCH_LDAP_BIND_DN", dn).env("VOUCH_LDAP_PASSWORD_FILE", s(&pw)).args(args);
        c.output().unwrap()
    };
    // 389 DS holds a paged search's size limit to each page, not to the whole search: a size
    // limit above vouch's page (1,000) never cuts a listing, whatever the store holds.
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&under(&paged_dn, &["list", "--all", "--format", "json"]))).unwrap();
    assert_eq!(listed.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("gen"))).count(), N);

    // Under the limits that do cut (a size limit below a page, a look-through limit below
    // what the store holds): a small listing works (the DN may read the store), every full
    // listing fails, naming the limits and where to lift them.
    let _ = std::fs::remove_file(d1.join("ca/crl_next_update"));
    for (dn, code) in [(&size_dn, "result 4"), (&look_dn, "result 11")] {
        ok(&under(dn, &["list", "--format", "json"]));
        for args in [&["list", "--all", "--format", "json"][..], &["list", "--all"], &["crl"]] {
            let o = under(dn, args);
            assert_eq!(o.status.code(), Some(2), "{dn} {args:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains(code) && err.contains("search limits") && err.contains("nsPagedSizeLimit"),
                "{dn} {args:?}: {err}"
            );
        }
    }
    assert_eq!(std::fs::read(d1.join("ca/ca_crl.pem")).unwrap(), crl, "a CRL was written under the limits");
}

// ---- `vouch purge --tombstones`: its takeover, its dry run, and what verify names ----

/// The setup the purge tests share: master m1 on `dir`, `name` signed and cleaned (a
/// tombstone), and an RFC 3339 time a CRL period (30 days) and a day after its certificate
/// expired.
fn cleaned_tombstone(dir: &dyn Directory, tmp: &Path, name: &str) -> (std::path::PathBuf, String, String) {
    let d1 = tmp.join("m1");
    if !d1.exists() {
        drop(Master::start(dir, &d1, "ca1.test"));
    }
    let csr = tmp.join(format!("{name}.csr"));
    std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
    let pem_path = csr.with_extension("pem");
    ok(&v(dir, &d1).args(["sign", "--csr", s(&csr), "--out", s(&pem_path)]).output().unwrap());
    let pem = std::fs::read(&pem_path).unwrap();
    let (_, der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    let later = (c.validity().not_after.to_datetime() + time::Duration::days(31))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    ok(&v(dir, &d1).args(["clean", name]).output().unwrap());
    (d1, serial_of(&pem), later)
}

fn registry_state(dir: &dyn Directory, name: &str) -> String {
    let filter = format!("(&(objectClass=vouchRegistered)(vouchCertname={name}))");
    dir.ldapsearch(&dir.base(), &filter, &["vouchState", "vouchSerial"]).stdout
}

/// A purge killed between its swap and its delete, at `later`: the name's entry left `purging`.
fn purge_killed_after_its_swap(dir: &dyn Directory, d1: &Path, name: &str, later: &str) {
    let died = v(dir, d1)
        .args(["purge", "--tombstones", "--confirm", "--now", later])
        .env("VOUCH_TEST_ABORT_AT", "ldap:tombstone-purging")
        .output()
        .unwrap();
    assert!(died.status.code().is_none(), "did not abort: {}", text(&died));
    assert!(registry_state(dir, name).contains("vouchState: purging"), "{}", registry_state(dir, name));
}

/// A purge left unfinished blocks its certname: `vouch store verify` names it
/// (purge-unfinished, exit 1; it said "no findings"), and the refusal the enrolling side gets
/// says the name is being purged (it said only "the certificate of NAME", with a hint to
/// commands that show nothing).
#[test]
fn a_purge_left_unfinished_is_named_by_store_verify_and_by_the_refusal() {
    purge_left_unfinished_named(&store());
}

#[test]
fn a_purge_left_unfinished_is_named_by_store_verify_and_by_the_refusal_on_389ds() {
    purge_left_unfinished_named(&Ds389::store("purge_unfinished"));
}

fn purge_left_unfinished_named(dir: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let name = "stuck.example.test";
    let (d1, serial, later) = cleaned_tombstone(dir, tmp.path(), name);
    purge_killed_after_its_swap(dir, &d1, name, &later);
    let csr = tmp.path().join("again.csr");
    std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
    let refused =
        v(dir, &d1).args(["sign", "--csr", s(&csr), "--out", s(&csr.with_extension("pem"))]).output().unwrap();
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("being purged (vouch purge --tombstones"), "{}", text(&refused));
    let o = v(dir, &d1).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        !o.status.success() && out.contains("purge-unfinished") && out.contains(name) && out.contains(&serial),
        "store verify does not name the entry left purging: exit {:?} {out}",
        o.status.code()
    );
}

/// A live, unexpired certificate's registry entry marked `purging` (outside vouch): `vouch
/// store verify` names it (purging-live-certificate; it found nothing), and `vouch purge
/// --tombstones --confirm` says so and leaves it (it said "no tombstone").
#[test]
fn a_live_certificates_entry_marked_purging_is_named_and_left_by_the_purge() {
    live_entry_marked_purging(&store());
}

#[test]
fn a_live_certificates_entry_marked_purging_is_named_and_left_by_the_purge_on_389ds() {
    live_entry_marked_purging(&Ds389::store("purging_live"));
}

fn live_entry_marked_purging(dir: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(dir, &d1, "ca1.test"));
    let name = "live.example.test";
    let csr = tmp.path().join("live.csr");
    std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
    ok(&v(dir, &d1).args(["sign", "--csr", s(&csr), "--out", s(&csr.with_extension("pem"))]).output().unwrap());
    let serial = serial_of(&std::fs::read(csr.with_extension("pem")).unwrap());
    let dn = format!("vouchCertname={name},ou=certnames,{}", dir.base());
    let planted = dir.ldapmodify(&format!("dn: {dn}\nchangetype: modify\nreplace: vouchState\nvouchState: purging\n"));
    assert!(planted.success(), "{planted}");
    let purge = v(dir, &d1).args(["purge", "--tombstones", "--confirm"]).output().unwrap();
    assert!(text(&purge).contains("marked purging") && text(&purge).contains(name), "{}", text(&purge));
    assert!(registry_state(dir, name).contains("vouchState: purging"), "{}", registry_state(dir, name));
    let o = v(dir, &d1).args(["store", "verify", "--format", "jsonl"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        !o.status.success() && out.contains("purging-live-certificate") && out.contains(&serial),
        "store verify does not name a live certificate's entry marked purging: exit {:?} {out}",
        o.status.code()
    );
}

/// `--now` does not move the takeover's clock: a purge run with a later `--now` leaves a
/// `purging` entry seconds old (by the server's clock) alone (it took it over and deleted).
#[test]
fn a_later_now_does_not_take_over_a_purge_seconds_old() {
    let slapd = store();
    let tmp = tempfile::tempdir().unwrap();
    let name = "fresh.example.test";
    let (d1, _serial, later) = cleaned_tombstone(&slapd, tmp.path(), name);
    purge_killed_after_its_swap(&slapd, &d1, name, &later);
    let again = ok(&v(&slapd, &d1).args(["purge", "--tombstones", "--confirm", "--now", &later]).output().unwrap());
    assert!(
        registry_state(&slapd, name).contains("vouchState: purging"),
        "a purge seconds old was taken over by a later --now ({again}): {}",
        registry_state(&slapd, name)
    );
}

/// A dry run (`vouch purge --tombstones` without --confirm) writes nothing: the revocation
/// entry lacking the certificate is not given the tombstone's (it was, with no lock taken).
#[test]
fn a_dry_run_purge_writes_nothing() {
    let slapd = store();
    let tmp = tempfile::tempdir().unwrap();
    let name = "dry.example.test";
    let (d1, serial, later) = cleaned_tombstone(&slapd, tmp.path(), name);
    let filter = format!("(&(objectClass=vouchRevocation)(vouchSerial={serial}))");
    let found = slapd.ldapsearch(&slapd.base(), &filter, &["1.1"]);
    let rdn = found.stdout.lines().find_map(|l| l.strip_prefix("dn: ")).unwrap().to_string();
    let dropped = slapd.ldapmodify(&format!("dn: {rdn}\nchangetype: modify\ndelete: vouchCertificate\n"));
    assert!(dropped.success(), "{dropped}");
    let dry = ok(&v(&slapd, &d1).args(["purge", "--tombstones", "--now", &later]).output().unwrap());
    assert!(dry.contains("dry run") && dry.contains(&format!("would remove the tombstone of {name}")), "{dry}");
    let after = slapd.ldapsearch(&slapd.base(), &filter, &["vouchCertificate"]);
    assert!(!after.stdout.contains("vouchCertificate"), "the dry run wrote the revocation entry: {after}");
    // Confirmed, the certificate goes to the revocation entry before the tombstone goes.
    let done = ok(&v(&slapd, &d1).args(["purge", "--tombstones", "--confirm", "--now", &later]).output().unwrap());
    assert!(done.contains("removed the tombstone"), "{done}");
    let after = slapd.ldapsearch(&slapd.base(), &filter, &["vouchCertificate"]);
    assert!(after.stdout.contains("vouchCertificate"), "the certificate was lost: {after}");
}

/// Purge A swaps the tombstone into `purging` and sends its delete, which a proxy holds in
/// transit 6 s (fixtures/ldap-proxy/holds-deletes-in-transit.py); purge B, with a later
/// `--now`, runs meanwhile, and the name's next certificate is asked for. Whatever B and the
/// issuance do, A's late delete never removes a new certificate's registry entry (B took A's
/// purge over at once and deleted, the next certificate was issued, and A's delete removed it).
#[test]
fn a_delete_slow_in_transit_and_a_takeover_never_remove_a_new_certificate() {
    slow_delete_and_takeover(&store());
}

#[test]
fn a_delete_slow_in_transit_and_a_takeover_never_remove_a_new_certificate_on_389ds() {
    slow_delete_and_takeover(&Ds389::store("slow_delete"));
}

fn slow_delete_and_takeover(dir: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let name = "twice.example.test";
    let (d1, _serial, later) = cleaned_tombstone(dir, tmp.path(), name);
    let port_file = tmp.path().join("proxy.port");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ldap-proxy/holds-deletes-in-transit.py");
    let mut proxy =
        Command::new("python3").args([s(&script), s(&port_file), &dir.port().to_string(), "6"]).spawn().unwrap();
    wait_until(Duration::from_secs(20), "the proxy's port", || port_file.exists());
    let pport: u16 = std::fs::read_to_string(&port_file).unwrap().trim().parse().unwrap();
    let via_proxy = format!("ldap://127.0.0.1:{pport}/{}", dir.base());
    // A: through the proxy (its delete held).
    let a = v(dir, &d1)
        .env("VOUCH_STORE", &via_proxy)
        .args(["purge", "--tombstones", "--confirm", "--now", &later])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), "A's swap", || registry_state(dir, name).contains("vouchState: purging"));
    // B: direct, a later --now.
    let b = ok(&v(dir, &d1).args(["purge", "--tombstones", "--confirm", "--now", &later]).output().unwrap());
    let sign = |n: &str| {
        let csr = tmp.path().join(format!("{n}.csr"));
        std::fs::write(&csr, csr_for(name, &vouched(&d1, name), &p256())).unwrap();
        let o = v(dir, &d1).args(["sign", "--csr", s(&csr), "--out", s(&csr.with_extension("pem"))]).output().unwrap();
        o.status.success().then(|| serial_of(&std::fs::read(csr.with_extension("pem")).unwrap()))
    };
    let during = sign("during");
    let a = a.wait_with_output().unwrap();
    let _ = proxy.kill();
    let _ = proxy.wait();
    let issued = during.clone().or_else(|| sign("after")).expect("no certificate once the purge was done");
    let left = registry_state(dir, name);
    assert!(
        left.contains("vouchState: issued") && left.to_lowercase().contains(&issued.to_lowercase()),
        "the new certificate {issued}'s registry entry was deleted by A's late delete (issued during A's delete: \
         {}; A: {}; B: {b}): {left:?}",
        during.is_some(),
        text(&a)
    );
}
