//! One fleet, any master (issue 32): two `vouch serve` masters on one directory server (a
//! private slapd; and, `_on_389ds`, a base DN of its own on the test binary's private 389
//! Directory Server: each scenario is written once, taking the server), each
//! with its own master CA under one root, behind a real HAProxy round-robin; real Puppet
//! agents bootstrap through it by the masters' shared name, nodes and administrators of one
//! master act at the other, a revocation at one is refused at both, and one master is
//! killed while agents keep bootstrapping and renewing.

mod common;

use common::ds389::Ds389;
use common::fleet_lab::{
    agent_conf, bootstrap, conductor_sign, hosts_file, issuer_of, with_hosts, Haproxy, SHARED_NAME,
};
use common::ldap_lab::{openldap_store, store_env, Directory, Master};
use common::{ok, processes::wait_until, root, s, text, vouch};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use vouch::serve::client::{tls_config, Client};

const CLASSIFICATION: &str = "classes:\n  - role::web\n";

fn v(slapd: &dyn Directory, dir: &Path) -> Command {
    let mut c = vouch();
    c.envs(store_env(slapd)).args(["--dir", s(dir)]);
    c
}

/// Master 1 (first run: root, master CA, conductor, administrator) and master 2 (a further
/// master CA under master 1's root), both also named [`SHARED_NAME`].
fn two_masters(slapd: &dyn Directory, base: &Path) -> (Master, Master) {
    let (d1, d2) = (base.join("m1"), base.join("m2"));
    let env = store_env(slapd);
    let m1 = Master::start_env(&d1, "ca1.fleet.test", &env, &["--server-name", SHARED_NAME]);
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start_env(&d2, "ca2.fleet.test", &env, &["--server-name", SHARED_NAME]);
    (m1, m2)
}

fn get(c: &mut Client, path: &str) -> (u16, Vec<u8>) {
    let r = c.request("GET", path, None, b"").unwrap();
    (r.status, r.body)
}

fn pems(body: &[u8], label: &str) -> usize {
    vouch::encoding::pem::find_all(body, label).map(|v| v.len()).unwrap_or(0)
}

/// Both masters serve the same CA bundle (both master CAs and the root) and a CRL body with
/// every master's CRL and the root's.
fn wait_for_one_fleet(m1: &Master, m2: &Master) {
    wait_until(Duration::from_secs(30), "both masters serve the fleet's bundle and every CRL", || {
        let (b1, b2) = (
            get(&mut m1.client(), "/puppet-ca/v1/certificate/ca"),
            get(&mut m2.client(), "/puppet-ca/v1/certificate/ca"),
        );
        let (c1, c2) = (
            get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca"),
            get(&mut m2.client(), "/puppet-ca/v1/certificate_revocation_list/ca"),
        );
        b1 == b2 && pems(&b1.1, "CERTIFICATE") == 3 && pems(&c1.1, "X509 CRL") == 3 && pems(&c2.1, "X509 CRL") == 3
    });
}

/// A client of `m` with the certificate and key files given (PEM).
fn client_as(m: &Master, bundle: &[u8], cert: &Path, key: &Path) -> Client {
    let (c, k) = (std::fs::read(cert).unwrap(), std::fs::read(key).unwrap());
    Client::new(tls_config(bundle, Some((&c, &k))).unwrap(), m.addr(), "localhost").unwrap()
}

fn renew(hosts: &Path, confdir: &Path, dir: &Path, tag: &str) -> (i32, String) {
    let script = root().join("tests/support/puppet-renew.rb");
    with_hosts(hosts, &["ruby", s(&script), s(confdir)], dir, tag)
}

/// Both masters' policies allow a renewal at once (`renewal_min_age = "0s"`), reloaded (SIGHUP).
fn renewals_at_once(masters: &[&Master]) {
    for m in masters {
        let p = m.dir.join("policy.toml");
        let text = std::fs::read_to_string(&p).unwrap().replace("renewal_min_age = \"1h\"", "renewal_min_age = \"0s\"");
        std::fs::write(&p, text).unwrap();
        // SAFETY: kill(2) on the test's own child.
        unsafe { libc::kill(m.pid(), libc::SIGHUP) };
    }
    for m in masters {
        wait_until(Duration::from_secs(10), "the policy reloaded", || m.log().contains("\"event\":\"reload\""));
    }
}

/// One TCP connection to the load balancer, opened and closed: it takes one turn of the
/// round robin, so that the next agent's requests meet the masters in the other order.
fn take_a_turn(lb: &Haproxy) {
    drop(std::net::TcpStream::connect(("127.0.0.1", lb.port)).unwrap());
    std::thread::sleep(Duration::from_millis(100));
}

/// Bootstraps `name` through `port` (the load balancer's, by the shared name, or a master's
/// own): its certificate's path and how long it took.
fn agent(
    m1: &Master,
    tmp: &Path,
    hosts: &Path,
    name: &str,
    port: u16,
) -> (std::path::PathBuf, std::path::PathBuf, Duration) {
    let attrs = tmp.join(format!("{name}.yaml"));
    conductor_sign(&m1.dir, name, CLASSIFICATION, &attrs);
    let conf = agent_conf(tmp, name, SHARED_NAME, port, Some(&attrs));
    let t = Instant::now();
    let (code, out) = bootstrap(hosts, &conf, tmp, &format!("{name}-bootstrap"));
    let took = t.elapsed();
    assert_eq!(code, 0, "{name}:\n{out}\nm1's log:\n{}", m1.log());
    (conf.parent().unwrap().join(format!("ssl/certs/{name}.pem")), conf, took)
}

/// A certificate file's serial, lowercase hex of its value.
fn serial_of(cert: &Path) -> String {
    let (_, der) = vouch::encoding::pem::find(&std::fs::read(cert).unwrap(), &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    c.serial.to_str_radix(16)
}

/// Every serial every CRL of a CRL body lists, lowercase hex of its value.
fn crl_serials(body: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for der in vouch::encoding::pem::find_all(body, "X509 CRL").unwrap() {
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        out.extend(crl.iter_revoked_certificates().map(|r| r.user_certificate.to_str_radix(16)));
    }
    out
}

fn subject_of(p: &Path) -> String {
    let o = Command::new("openssl").args(["x509", "-in", s(p), "-noout", "-subject"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().replace("subject=", "")
}

#[test]
fn agents_bootstrap_through_a_load_balancer_from_both_masters_and_keep_working_when_one_is_killed() {
    agents_through_a_load_balancer(&openldap_store());
}

#[test]
fn agents_bootstrap_through_a_load_balancer_from_both_masters_and_keep_working_when_one_is_killed_on_389ds() {
    agents_through_a_load_balancer(&Ds389::store("agents_through_a_load_balancer"));
}

fn agents_through_a_load_balancer(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (m1, m2) = two_masters(&slapd, t);
    wait_for_one_fleet(&m1, &m2);
    renewals_at_once(&[&m1, &m2]);
    let lb = Haproxy::start(t, &[m1.addr(), m2.addr()]);
    let hosts = hosts_file(t);
    let (ca1, ca2) = (subject_of(&m1.dir.join("ca/ca_crt.pem")), subject_of(&m2.dir.join("ca/ca_crt.pem")));
    assert_ne!(ca1, ca2);

    // One agent straight at master 1, for the time a bootstrap takes without the balancer.
    let (_, _, direct) = agent(&m1, t, &hosts, "direct.fleet.test", m1.port);
    // Agents through the load balancer, by the shared name: every other one after a turn
    // taken, so that the certificate requests reach both masters.
    let n = 6;
    let mut nodes = Vec::new();
    for i in 0..n {
        if i % 2 == 1 {
            take_a_turn(&lb);
        }
        let name = format!("web{i:02}.fleet.test");
        let (cert, conf, took) = agent(&m1, t, &hosts, &name, lb.port);
        nodes.push((name, cert.clone(), conf, issuer_of(&cert).replace("issuer=", ""), took));
    }
    let issuers: Vec<&str> = nodes.iter().map(|n| n.3.as_str()).collect();
    let times: Vec<f64> = nodes.iter().map(|n| n.4.as_secs_f64()).collect();
    eprintln!(
        "through the load balancer: {n} of {n} bootstrapped, in {times:.2?} s; directly at master 1: {:.2} s; issuers: {issuers:?}",
        direct.as_secs_f64()
    );
    let from = |ca: &str| nodes.iter().filter(|n| n.3 == ca).count();
    assert_eq!(from(&ca1) + from(&ca2), n, "{issuers:?} vs {ca1} / {ca2}");
    assert!(from(&ca1) > 0 && from(&ca2) > 0, "both master CAs issue through the load balancer: {issuers:?}");
    // openssl, trusting only the root, verifies each node through the bundle every master serves.
    let bundle = t.join("fleet-bundle.pem");
    std::fs::write(&bundle, get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1).unwrap();
    for (name, cert, ..) in &nodes {
        let o = Command::new("openssl")
            .args(["verify", "-CAfile", s(&m1.dir.join("ca/root_crt.pem")), "-untrusted", s(&bundle), s(cert)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", text(&o));
    }

    // A node of each master renews at the other (straight at it): the new certificate is the
    // other master's, and supersedes the old one.
    let of1 = nodes.iter().find(|n| n.3 == ca1).unwrap();
    let of2 = nodes.iter().find(|n| n.3 == ca2).unwrap();
    for (node, there, there_ca) in [(of1, &m2, &ca2), (of2, &m1, &ca1)] {
        let direct_conf = agent_conf(t, &format!("{}-at-{}", node.0, there.port), SHARED_NAME, there.port, None);
        let conf = std::fs::read_to_string(node.2.join("puppet.conf")).unwrap();
        let conf = conf.replace(&format!("serverport = {}", lb.port), &format!("serverport = {}", there.port));
        std::fs::write(direct_conf.join("puppet.conf"), conf).unwrap();
        let (code, out) = renew(&hosts, &direct_conf, t, &format!("{}-renew-across", node.0));
        assert_eq!(code, 0, "{} renewing at the other master:\n{out}\n{}", node.0, there.log());
        assert_eq!(issuer_of(&node.1).replace("issuer=", ""), **there_ca, "{}", node.0);
    }
    assert_eq!(
        issuer_of(&of1.1).replace("issuer=", ""),
        ca2,
        "master 1's node renewed at master 2 holds master 2's certificate now"
    );

    // `vouch enc` at either master classifies a node of either.
    for (name, ..) in &nodes {
        for d in [&m1.dir, &m2.dir] {
            let out = ok(&v(&slapd, d).args(["enc", name]).output().unwrap());
            assert!(out.contains("role::web"), "{name} at {}: {out}", d.display());
        }
    }

    // An administrator of master 1 is one at master 2; a node of master 2 is known at master 1.
    let bundle_bytes = std::fs::read(&bundle).unwrap();
    let mut admin_at_2 =
        client_as(&m2, &bundle_bytes, &m1.dir.join("admin/admin_crt.pem"), &m1.dir.join("admin/admin_key.pem"));
    let (st, body) = get(&mut admin_at_2, "/puppet-ca/v1/certificate_statuses/any");
    assert_eq!(st, 200, "{}\n{}", String::from_utf8_lossy(&body), m2.log());
    let listed = String::from_utf8_lossy(&body).to_string();
    for (name, ..) in &nodes {
        assert!(listed.contains(name.as_str()), "{name} listed at master 2: {listed}");
    }
    let third = &nodes[2];
    let key = third.2.parent().unwrap().join(format!("ssl/private_keys/{}.pem", third.0));
    for m in [&m1, &m2] {
        let mut c = client_as(m, &bundle_bytes, &third.1, &key);
        assert_eq!(get(&mut c, "/puppet-ca/v1/expirations").0, 200, "{} at {}", third.0, m.port);
    }

    // Revoked at master 2 (whichever master issued it): refused at both from the next request.
    ok(&v(&slapd, &m2.dir).args(["revoke", &third.0]).output().unwrap());
    for m in [&m1, &m2] {
        let mut c = client_as(m, &bundle_bytes, &third.1, &key);
        assert_eq!(get(&mut c, "/puppet-ca/v1/expirations").0, 403, "revoked {} at {}", third.0, m.port);
    }
    // ... and on the CRL that both masters serve, within their maintenance runs.
    let serial = serial_of(&third.1);
    for m in [&m1, &m2] {
        let took = wait_until(Duration::from_secs(20), "the revocation on the CRL body every master serves", || {
            crl_serials(&get(&mut m.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1).contains(&serial)
        });
        eprintln!("the revocation reached the CRLs master {} serves after {:.1} s", m.port, took.as_secs_f64());
    }

    // Master 2 killed: agents keep bootstrapping and renewing through the load balancer.
    m2.kill();
    std::thread::sleep(Duration::from_secs(1));
    for i in 0..2 {
        let (cert, ..) = agent(&m1, t, &hosts, &format!("late{i}.fleet.test"), lb.port);
        assert_eq!(issuer_of(&cert).replace("issuer=", ""), ca1);
    }
    let (code, out) = renew(&hosts, &of2.2, t, "renew-after-kill");
    assert_eq!(code, 0, "{out}\n{}", m1.log());
    assert_eq!(issuer_of(&of2.1).replace("issuer=", ""), ca1);
}

/// The store's CRL entry of master CA `id`, replaced by `der` with the entry's revision set
/// to `revision` (as anyone who may write the store could: a new revision makes every master
/// read the entry again).
fn put_master_crl(slapd: &dyn Directory, id: &str, der: &[u8], revision: u64) {
    let base = slapd.base();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    slapd
        .ldapmodify(&format!(
            "dn: vouchCa=crl-{id},{base}\nchangetype: modify\nreplace: vouchCertificate\nvouchCertificate:: \
             {b64}\n-\nreplace: vouchRevision\nvouchRevision: {revision}\n"
        ))
        .ok();
}

/// The CRLs a master holds of the other masters (`DIR/ca/fleet_crls.pem`): their serials.
fn held_serials(dir: &Path) -> Vec<String> {
    crl_serials(&std::fs::read(dir.join("ca/fleet_crls.pem")).unwrap_or_default())
}

#[test]
fn what_the_store_says_of_the_fleet_counts_only_when_it_checks_out() {
    the_store_counts_when_it_checks_out(&openldap_store());
}

#[test]
fn what_the_store_says_of_the_fleet_counts_only_when_it_checks_out_on_389ds() {
    the_store_counts_when_it_checks_out(&Ds389::store("the_store_counts_when_it_checks_out"));
}

fn the_store_counts_when_it_checks_out(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (d1, d2) = (t.join("m1"), t.join("m2"));
    let env = store_env(&slapd);
    let m1 = Master::start_env(&d1, "ca1.fleet.test", &env, &[]);
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    // Master 2's CRL runs for 8 days (refreshed 1 day before its end): master 1, which
    // refreshes its own 10 days before, says at once that master 2's is due.
    let p2 = d2.join("policy.toml");
    let policy = std::fs::read_to_string(&p2).unwrap();
    std::fs::write(
        &p2,
        policy
            .replace("validity = \"30d\"", "validity = \"8d\"")
            .replace("refresh_before = \"10d\"", "refresh_before = \"1d\""),
    )
    .unwrap();
    let m2 = Master::start_env(&d2, "ca2.fleet.test", &env, &["--server-name", "only-m2.fleet.test"]);
    wait_for_one_fleet(&m1, &m2);
    let id2 = vouch::store::ca_id(
        &vouch::encoding::pem::find(&std::fs::read(d2.join("ca/ca_crt.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1,
    );
    wait_until(Duration::from_secs(15), "master 1 warns that master 2's CRL is due", || {
        m1.log().contains("\"event\":\"master-crl-due\"") && m1.log().contains(&id2)
    });

    // Master 2's name is reserved at master 1: a vouched node may not take it there.
    let key = common::agents::p256();
    let attrs = common::agents::vouched(&d1, "only-m2.fleet.test", CLASSIFICATION);
    let (_, said, cert) = common::ldap_lab::enroll(
        &m1,
        "only-m2.fleet.test",
        &common::agents::csr_for("only-m2.fleet.test", &attrs, &key),
    );
    assert!(cert.is_none(), "master 1 issued master 2's service name to a node: {said}\n{}", m1.log());
    // Nodes at each master, for what follows.
    let mut nodes = Vec::new();
    for (m, name) in [(&m1, "web00.fleet.test"), (&m2, "web01.fleet.test")] {
        let key = common::agents::p256();
        let attrs = common::agents::vouched(&d1, name, CLASSIFICATION);
        let (st, said, cert) = common::ldap_lab::enroll(m, name, &common::agents::csr_for(name, &attrs, &key));
        let cert = cert.unwrap_or_else(|| panic!("{name}: {st} {said}"));
        nodes.push((name, cert));
    }

    // Reconcile at master 1 against an inventory of its node only: no master's service
    // certificate (nor administrator's) is an orphan.
    let inventory = t.join("inventory.txt");
    std::fs::write(&inventory, "web00.fleet.test\nweb01.fleet.test\n").unwrap();
    let plan = ok(&v(&slapd, &d1)
        .args(["reconcile", "--inventory", &format!("file:{}", s(&inventory)), "-o", "json"])
        .output()
        .unwrap());
    for own in ["ca1.fleet.test", "ca2.fleet.test", "localhost", "vouch-admin"] {
        assert!(!plan.contains(&format!("\"{own}\"")), "reconcile would revoke {own}: {plan}");
    }

    // A "master CA" of another root in the store: left out, and said.
    let other = t.join("other");
    ok(&vouch().args(["ca", "init", "--dir", s(&other)]).output().unwrap());
    let foreign_pem = std::fs::read(other.join("ca/ca_crt.pem")).unwrap();
    let foreign_id = vouch::store::ca_id(&vouch::encoding::pem::find(&foreign_pem, &["CERTIFICATE"]).unwrap().1);
    {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&foreign_pem);
        slapd
            .ldapadd(&format!(
                "dn: vouchCa={foreign_id},ou=cas,{base}\nobjectClass: vouchIssuer\nvouchCa: {foreign_id}\nvouchRevision: 1\nvouchCertificate:: {b64}\n"
            ))
            .ok();
    }
    wait_until(Duration::from_secs(15), "master 1 says the foreign CA is left out", || {
        m1.log().contains("\"event\":\"foreign-master-ca\"")
    });
    for m in [&m1, &m2] {
        assert_eq!(pems(&get(&mut m.client(), "/puppet-ca/v1/certificate/ca").1, "CERTIFICATE"), 3, "{}", m.port);
    }
    // A client certificate of that other root is refused at the TLS layer by both.
    let (oc, ok_) = (t.join("other_admin.pem"), t.join("other_admin.key"));
    ok(&vouch()
        .args(["--dir", s(&other), "admin", "new", "intruder", "--cert-out", s(&oc), "--key-out", s(&ok_)])
        .output()
        .unwrap());
    let bundle = get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1;
    for m in [&m1, &m2] {
        let mut c = client_as(m, &bundle, &oc, &ok_);
        let r = c.request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"");
        assert!(
            r.is_err() || r.as_ref().is_ok_and(|r| r.status == 403),
            "another root's administrator at {}: {:?}",
            m.port,
            r.map(|r| r.status)
        );
    }

    // Master 2 stopped; its node revoked there by the command line: master 1 takes the newer CRL.
    let before = std::fs::read(d1.join("ca/fleet_crls.pem")).unwrap();
    let (_, old_crl) = vouch::encoding::pem::find(&before, &["X509 CRL"]).unwrap();
    m2.kill();
    ok(&v(&slapd, &d2).args(["revoke", "web01.fleet.test"]).output().unwrap());
    let serial = serial_of_pem(&nodes[1].1);
    wait_until(Duration::from_secs(15), "master 1 holds master 2's newer CRL", || held_serials(&d1).contains(&serial));
    // An older genuine CRL put back: not taken.
    put_master_crl(&slapd, &id2, &old_crl, 1000);
    // A forged one, under master 2's name, signed with master 1's key, numbered far higher.
    let forged = {
        let ca2 =
            vouch::encoding::pem::find(&std::fs::read(d2.join("ca/ca_crt.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1;
        let key1 = rcgen::KeyPair::from_pem(&std::fs::read_to_string(d1.join("ca/ca_key.pem")).unwrap()).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca2.into(), key1).unwrap();
        let now = time::OffsetDateTime::now_utc();
        rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now + time::Duration::days(30),
            crl_number: rcgen::SerialNumber::from(u64::MAX),
            issuing_distribution_point: None,
            revoked_certs: vec![],
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&issuer)
        .unwrap()
        .der()
        .to_vec()
    };
    std::thread::sleep(Duration::from_secs(7));
    assert!(held_serials(&d1).contains(&serial), "an older CRL of master 2 was taken");
    put_master_crl(&slapd, &id2, &forged, 1001);
    wait_until(Duration::from_secs(15), "master 1 refuses the forged CRL", || {
        m1.log().contains("\"event\":\"master-crl-refused\"")
    });
    assert!(held_serials(&d1).contains(&serial), "the forged CRL was taken");
    let served = get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1;
    assert!(crl_serials(&served).contains(&serial), "master 1 serves master 2's revocation");

    // A name of the service that is a node's certname: refused before anything is issued.
    let o = v(&slapd, &d2)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--server-name",
            "ca2.fleet.test",
            "--server-name",
            "web00.fleet.test",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("web00.fleet.test is a node's certname"), "{}", text(&o));
    // Nor another master's first name (as an alias: the service would answer as master 1).
    let o = v(&slapd, &d2)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--server-name",
            "ca2.fleet.test",
            "--server-name",
            "ca1.fleet.test",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("another master's service"), "{}", text(&o));

    // A running master's CA entry removed (a retirement begun before it was stopped): it
    // registers its CA again, and says so.
    let id1 = vouch::store::ca_id(
        &vouch::encoding::pem::find(&std::fs::read(d1.join("ca/ca_crt.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1,
    );
    let dn = format!("vouchCa={id1},ou=cas,{base}");
    let o = slapd.ldap_tool("ldapdelete", &["-r", &dn], None);
    assert!(o.success(), "{o}");
    wait_until(Duration::from_secs(15), "master 1 registers its CA again", || {
        m1.log().contains("\"event\":\"master-ca-registered-again\"") && slapd.has_dn(&dn)
    });
}

fn serial_of_pem(pem: &[u8]) -> String {
    let (_, der) = vouch::encoding::pem::find(pem, &["CERTIFICATE"]).unwrap();
    let (_, c) = x509_parser::parse_x509_certificate(&der).unwrap();
    c.serial.to_str_radix(16)
}

/// The `ca_fingerprint = ` value of a banner.
fn fingerprint(banner: &str) -> String {
    banner.lines().find_map(|l| l.trim().strip_prefix("ca_fingerprint = ")).unwrap().to_string()
}

/// The agent in `conf` pointed at `port` (a master's own, or the load balancer's).
fn point_at(conf: &Path, port: u16) {
    let p = conf.join("puppet.conf");
    let text: String = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .map(|l| if l.starts_with("serverport = ") { format!("serverport = {port}\n") } else { format!("{l}\n") })
        .collect();
    std::fs::write(&p, text).unwrap();
}

#[test]
fn a_master_joining_changes_the_fingerprint_and_agents_from_before_need_its_crl() {
    a_master_joining(&openldap_store());
}

#[test]
fn a_master_joining_changes_the_fingerprint_and_agents_from_before_need_its_crl_on_389ds() {
    a_master_joining(&Ds389::store("a_master_joining"));
}

fn a_master_joining(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let hosts = hosts_file(t);
    let (d1, d2) = (t.join("m1"), t.join("m2"));
    let env = store_env(&slapd);
    let m1 = Master::start_env(&d1, "ca1.fleet.test", &env, &["--server-name", SHARED_NAME]);
    renewals_at_once(&[&m1]);
    let before = fingerprint(&m1.banner);
    assert!(m1.banner.contains("1 master CA(s)"), "{}", m1.banner);
    // Agent A bootstraps while master 1 is the fleet, with the fingerprint it printed.
    let attrs = t.join("early.yaml");
    conductor_sign(&d1, "early.fleet.test", CLASSIFICATION, &attrs);
    let early = agent_conf(t, "early.fleet.test", SHARED_NAME, m1.port, Some(&attrs));
    std::fs::write(
        early.join("puppet.conf"),
        format!("{}ca_fingerprint = {before}\n", std::fs::read_to_string(early.join("puppet.conf")).unwrap()),
    )
    .unwrap();
    let (code, out) = bootstrap(&hosts, &early, t, "early-bootstrap");
    assert_eq!(code, 0, "{out}");

    // Master 2 joins: both serve the new bundle, whose digest is the one its banner prints.
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start_env(&d2, "ca2.fleet.test", &env, &["--server-name", SHARED_NAME]);
    renewals_at_once(&[&m2]);
    wait_for_one_fleet(&m1, &m2);
    let after = fingerprint(&m2.banner);
    assert_ne!(before, after, "the bundle changed when master 2 joined");
    assert!(m2.banner.contains("2 master CA(s)"), "{}", m2.banner);
    let served = get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1;
    assert_eq!(vouch::encoding::sha256_hex(&served).to_ascii_uppercase(), after);

    // A new agent given the old fingerprint is refused by Puppet itself; the new one works.
    for (name, fp, want) in [("stale.fleet.test", &before, false), ("fresh.fleet.test", &after, true)] {
        let attrs = t.join(format!("{name}.yaml"));
        conductor_sign(&d1, name, CLASSIFICATION, &attrs);
        let conf = agent_conf(t, name, SHARED_NAME, m1.port, Some(&attrs));
        std::fs::write(
            conf.join("puppet.conf"),
            format!("{}ca_fingerprint = {fp}\n", std::fs::read_to_string(conf.join("puppet.conf")).unwrap()),
        )
        .unwrap();
        let (code, out) = bootstrap(&hosts, &conf, t, &format!("{name}-bootstrap"));
        assert_eq!(code == 0, want, "{name}:\n{out}");
        if !want {
            assert!(out.contains("did not match expected digest"), "{name}:\n{out}");
        }
    }

    // Agent A at master 2: Puppet 7 downloads CRLs once, so it holds none of master 2's CA
    // and refuses master 2's service certificate; a refresh (crl_refresh_interval) made at
    // master 2 fails the same way (Puppet refreshes with the CRLs it holds). Its CRL file
    // removed, the next bootstrap downloads the fleet's CRLs from any master (Puppet does
    // that download without a revocation check), and then it renews there.
    point_at(&early, m2.port);
    let (code, out) = renew(&hosts, &early, t, "early-renew-at-m2");
    eprintln!("an agent bootstrapped before master 2 joined, at master 2 (exit {code}):\n{out}");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("unable to get certificate CRL"), "{out}");
    let conf = std::fs::read_to_string(early.join("puppet.conf")).unwrap();
    std::fs::write(early.join("puppet.conf"), format!("{conf}crl_refresh_interval = 1s\n")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (code, out) = bootstrap(&hosts, &early, t, "early-refresh-at-m2");
    assert_ne!(code, 0, "a CRL refresh at the new master worked after all:\n{out}");
    assert!(out.contains("unable to get certificate CRL"), "{out}");
    std::fs::remove_file(early.parent().unwrap().join("ssl/crl.pem")).unwrap();
    let (code, out) = bootstrap(&hosts, &early, t, "early-crl-again-at-m2");
    assert_eq!(code, 0, "{out}");
    let held = std::fs::read(early.parent().unwrap().join("ssl/crl.pem")).unwrap();
    assert_eq!(pems(&held, "X509 CRL"), 3, "the agent holds every master's CRL and the root's");
    let (code, out) = renew(&hosts, &early, t, "early-renew-at-m2-again");
    assert_eq!(code, 0, "{out}\n{}", m2.log());
}

/// A node's own client of `m`: its certificate and key (PEM bytes).
fn node_client(m: &Master, bundle: &[u8], cert: &[u8], key: &rcgen::KeyPair) -> Client {
    let config = tls_config(bundle, Some((cert, key.serialize_pem().as_bytes()))).unwrap();
    Client::new(config, m.addr(), "localhost").unwrap()
}

#[test]
fn a_master_lost_for_good_is_restored_from_its_backup_or_its_nodes_renew_elsewhere_and_it_is_retired() {
    a_master_lost_for_good(&openldap_store());
}

#[test]
fn a_master_lost_for_good_is_restored_from_its_backup_or_its_nodes_renew_elsewhere_and_it_is_retired_on_389ds() {
    a_master_lost_for_good(&Ds389::store("a_master_lost_for_good"));
}

fn a_master_lost_for_good(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (m1, m2) = two_masters(&slapd, t);
    renewals_at_once(&[&m1, &m2]);
    wait_for_one_fleet(&m1, &m2);
    let (d1, d2) = (m1.dir.clone(), m2.dir.clone());
    let id2 = vouch::store::ca_id(
        &vouch::encoding::pem::find(&std::fs::read(d2.join("ca/ca_crt.pem")).unwrap(), &["CERTIFICATE"]).unwrap().1,
    );
    // Two nodes of master 2.
    let mut nodes = Vec::new();
    for name in ["n1.fleet.test", "n2.fleet.test"] {
        let key = common::agents::p256();
        let attrs = common::agents::vouched(&d1, name, CLASSIFICATION);
        let (st, said, cert) = common::ldap_lab::enroll(&m2, name, &common::agents::csr_for(name, &attrs, &key));
        nodes.push((name, cert.unwrap_or_else(|| panic!("{name}: {st} {said}")), key));
    }
    // A backup of master 2's data directory, then master 2 is lost.
    let backup = t.join("m2-backup");
    ok(&Command::new("cp").args(["-a", s(&d2), s(&backup)]).output().unwrap());
    let _ = std::fs::remove_file(backup.join("serve.lock"));
    m2.kill();
    std::fs::remove_dir_all(&d2).unwrap();

    // Meanwhile n1 is revoked at master 1: refused at once, on no CRL (no key signs master 2's).
    ok(&v(&slapd, &d1).args(["revoke", nodes[0].0]).output().unwrap());
    let serial1 = serial_of_pem(&nodes[0].1);
    std::thread::sleep(Duration::from_secs(6));
    let body = get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1;
    assert!(!crl_serials(&body).contains(&serial1), "a CRL of master 2's CA lists it, signed by whom?");

    // Restored from the backup on a "new host" (a new first name): its CRL lists the
    // revocation recorded meanwhile, and master 1 serves it within its maintenance.
    let restored = Master::start_env(&backup, "ca2b.fleet.test", &store_env(&slapd), &[]);
    let took = wait_until(Duration::from_secs(20), "master 1 serves the restored master's CRL", || {
        crl_serials(&get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1).contains(&serial1)
    });
    eprintln!("the restored master's CRL, with the revocation made while it was gone, at master 1 after {took:?}");
    restored.kill();

    // Lost again, no backup this time: n2 renews at master 1, then master 2 is retired.
    let bundle = get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1;
    let mut c = node_client(&m1, &bundle, &nodes[1].1, &nodes[1].2);
    let r = c.request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), m1.log());
    let listed = ok(&v(&slapd, &d1).args(["list", "--all", "--format", "json"]).output().unwrap());
    let listed: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let of2: Vec<&serde_json::Value> =
        listed.iter().filter(|e| e["issuer"] == id2.as_str() && e["state"] == "signed").collect();
    assert!(of2.iter().all(|e| e["name"] == "ca2.fleet.test" || e["name"] == "ca2b.fleet.test"), "{of2:?}");
    // Its certificates left in the registry (its services', the revoked node's) are cleaned
    // first, then its entries removed.
    for e in listed.iter().filter(|e| e["issuer"] == id2.as_str()) {
        let name = e["name"].as_str().unwrap();
        ok(&v(&slapd, &d1).args(["clean", "--force", name]).output().unwrap());
    }
    for dn in [
        format!("vouchCa={id2},ou=cas,{base}"),
        format!("vouchCa=crl-{id2},{base}"),
        format!("vouchCa=service-{id2},{base}"),
    ] {
        let o = slapd.ldap_tool("ldapdelete", &["-r", &dn], None);
        assert!(o.success(), "{dn}: {o}");
    }
    wait_until(Duration::from_secs(15), "master 1 serves a bundle and CRLs without the retired master", || {
        pems(&get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1, "CERTIFICATE") == 2
            && pems(&get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1, "X509 CRL") == 2
    });
    // The renewed node still works; the store reads as consistent.
    let renewed = r.body;
    let mut c = node_client(&m1, &get(&mut m1.client(), "/puppet-ca/v1/certificate/ca").1, &renewed, &nodes[1].2);
    assert_eq!(get(&mut c, "/puppet-ca/v1/expirations").0, 200);
    ok(&v(&slapd, &d1).args(["store", "verify"]).output().unwrap());
}

/// Replaces the `ou=cas` entry of master CA `id` with `pem` (as a store writer could).
fn put_ca_entry(slapd: &dyn Directory, id: &str, pem: &[u8]) {
    let base = slapd.base();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
    slapd
        .ldapmodify(&format!(
            "dn: vouchCa={id},ou=cas,{base}\nchangetype: modify\nreplace: vouchCertificate\nvouchCertificate:: {b64}\n"
        ))
        .ok();
}

/// The CRL master 2 holds of itself, as served (DER), and its serials as master 1 serves them.
fn revoke_at(slapd: &dyn Directory, m: &Master, name: &str) {
    ok(&v(slapd, &m.dir).args(["revoke", name]).output().unwrap());
}

/// Review of the fleet's trust paths: someone who may write the store cannot roll another
/// master's CRL back (its CA dropped from `ou=cas` for a run, then an older CRL put back),
/// freeze it (its revision set back), block its publication (a revision the server cannot
/// increment), or free its names (its service entry removed).
#[test]
fn review_a_store_writer_cannot_roll_back_freeze_or_block_a_masters_crl_or_free_its_names() {
    a_store_writer_cannot_roll_back(&openldap_store());
}

#[test]
fn review_a_store_writer_cannot_roll_back_freeze_or_block_a_masters_crl_or_free_its_names_on_389ds() {
    a_store_writer_cannot_roll_back(&Ds389::store("a_store_writer_cannot_roll_back"));
}

fn a_store_writer_cannot_roll_back(slapd: &dyn Directory) {
    let base = slapd.base();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let (d1, d2) = (t.join("m1"), t.join("m2"));
    let env = store_env(&slapd);
    let m1 = Master::start_env(&d1, "ca1.fleet.test", &env, &[]);
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start_env(&d2, "ca2.fleet.test", &env, &["--server-name", "only-m2.fleet.test"]);
    wait_for_one_fleet(&m1, &m2);
    let ca2_pem = std::fs::read(d2.join("ca/ca_crt.pem")).unwrap();
    let id2 = vouch::store::ca_id(&vouch::encoding::pem::find(&ca2_pem, &["CERTIFICATE"]).unwrap().1);
    let mut serials = Vec::new();
    for i in 0..4 {
        let name = format!("n{i}.fleet.test");
        let key = common::agents::p256();
        let attrs = common::agents::vouched(&d1, &name, CLASSIFICATION);
        let (st, said, cert) = common::ldap_lab::enroll(&m2, &name, &common::agents::csr_for(&name, &attrs, &key));
        serials.push((name, serial_of_pem(&cert.unwrap_or_else(|| panic!("{st} {said}")))));
    }
    let served_by_1 = || crl_serials(&get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1);
    let old_crl =
        vouch::encoding::pem::find(&std::fs::read(d2.join("ca/ca_crl.pem")).unwrap(), &["X509 CRL"]).unwrap().1;

    // 1. Rolled back: n0 revoked; master 2 dropped from ou=cas for a while; back, with its
    // older CRL in the store. Master 1 never serves that older CRL in place of the newer.
    revoke_at(&slapd, &m2, &serials[0].0);
    wait_until(Duration::from_secs(20), "master 1 serves n0's revocation", || served_by_1().contains(&serials[0].1));
    put_ca_entry(&slapd, &id2, b"not a certificate");
    std::thread::sleep(Duration::from_secs(7));
    put_master_crl(&slapd, &id2, &old_crl, 2);
    put_ca_entry(&slapd, &id2, &ca2_pem);
    std::thread::sleep(Duration::from_secs(7));
    let body = get(&mut m1.client(), "/puppet-ca/v1/certificate_revocation_list/ca").1;
    assert!(
        !vouch::encoding::pem::find_all(&body, "X509 CRL").unwrap().contains(&old_crl),
        "master 1 serves master 2's older CRL again"
    );
    // Master 2's next CRL (a revocation there) is taken at once: the older one held no place.
    revoke_at(&slapd, &m2, &serials[3].0);
    wait_until(Duration::from_secs(60), "master 1 serves n0's and n3's revocations", || {
        let served = served_by_1();
        served.contains(&serials[0].1) && served.contains(&serials[3].1)
    });

    // 2. Frozen: n1 revoked, and the entry's revision set back at once: master 1 still
    // takes the new CRL within a minute.
    let rev = |slapd: &dyn Directory| {
        let o = slapd.ldapsearch(&format!("vouchCa=crl-{id2},{base}"), "(objectClass=*)", &["vouchRevision"]);
        o.ok().lines().find_map(|l| l.strip_prefix("vouchRevision: ")).unwrap_or("0").trim().parse::<u64>().unwrap_or(0)
    };
    let before = rev(&slapd);
    revoke_at(&slapd, &m2, &serials[1].0);
    let newest =
        vouch::encoding::pem::find(&std::fs::read(d2.join("ca/ca_crl.pem")).unwrap(), &["X509 CRL"]).unwrap().1;
    put_master_crl(&slapd, &id2, &newest, before);
    // (A minute's maintenance runs at each master: a loaded machine stretches them.)
    wait_until(Duration::from_secs(300), "master 1 serves n1's revocation despite the revision set back", || {
        served_by_1().contains(&serials[1].1)
    });

    // 3. Blocked: a revision the server cannot increment; n2's revocation still published.
    slapd
        .ldapmodify(&format!(
            "dn: vouchCa=crl-{id2},{base}\nchangetype: modify\nreplace: vouchRevision\nvouchRevision: 99999999999999999999999999\n"
        ))
        .ok();
    revoke_at(&slapd, &m2, &serials[2].0);
    wait_until(Duration::from_secs(20), "master 1 serves n2's revocation", || served_by_1().contains(&serials[2].1));

    // 4. Names: master 2's service entry removed: its names stay reserved at master 1, and
    // master 2 publishes it again.
    let o = slapd.ldap_tool("ldapdelete", &[&format!("vouchCa=service-{id2},{base}")], None);
    assert!(o.success(), "{o}");
    std::thread::sleep(Duration::from_secs(1));
    let key = common::agents::p256();
    let attrs = common::agents::vouched(&d1, "only-m2.fleet.test", CLASSIFICATION);
    let (_, said, cert) = common::ldap_lab::enroll(
        &m1,
        "only-m2.fleet.test",
        &common::agents::csr_for("only-m2.fleet.test", &attrs, &key),
    );
    assert!(cert.is_none(), "master 1 issued master 2's name once its entry was removed: {said}");
    wait_until(Duration::from_secs(15), "master 2 publishes its service certificate again", || {
        slapd.has_dn(&format!("vouchCa=service-{id2},{base}"))
    });
}
