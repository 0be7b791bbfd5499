//! An operator's careless input on masters of a shared store, against the real vouch binary:
//! a command run on a master's data directory without `--store` (or VOUCH_STORE), a `vouch
//! serve` refused at start, a master's service certname revoked, a base under a missing
//! parent, a migrate to a server that does not answer or bound anonymously, a state repeated
//! in the administrator's listing. Each scenario on the shared store runs on a private slapd
//! and (`_on_389ds`) on a base DN of its own on the test binary's private 389 Directory Server.

mod common;

use common::agents::{csr_for, p256};
use common::ds389::Ds389;
use common::ldap_lab::{enroll, openldap_store, store_env, Directory, Master};
use common::{ca_id, ok, s, snapshot, text, vouch};
use std::path::Path;

#[test]
fn a_command_without_store_on_a_shared_store_masters_directory_is_refused_before_it_writes() {
    command_without_store(&openldap_store());
}

#[test]
fn a_command_without_store_on_a_shared_store_masters_directory_is_refused_before_it_writes_on_389ds() {
    command_without_store(&Ds389::store("command_without_store"));
}

fn command_without_store(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m = Master::start(slapd, &d1, "ca1.test");
    let name = "web04.example.test";
    let attrs = common::agents::vouched(&d1, name, "classes:\n  - role::web\n");
    let (put, why, cert) = enroll(&m, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    assert!(cert.is_some(), "{name} was not issued");
    // `vouch serve --store` marked the directory's file store retired, naming the store.
    let marker = std::fs::read_to_string(d1.join("ca/MOVED-TO-SHARED-STORE")).unwrap();
    assert_eq!(marker.trim(), slapd.url(&slapd.base()));
    let before = snapshot(&d1.join("ca"));
    for args in [
        &["list", "--all"][..],
        &["revoke", name, "--reason", "key-compromise"],
        &["clean", name],
        &["store", "verify"],
        &["--store", "files", "store", "verify"],
        &["crl"],
        &["purge", "unnamed-x"],
        &["enc", name],
    ] {
        let out = vouch().args(["--dir", s(&d1)]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            err.contains("file store is retired") && err.contains("VOUCH_STORE") && err.contains("--store"),
            "{args:?}: {}",
            text(&out)
        );
        assert_eq!(snapshot(&d1.join("ca")), before, "{args:?} changed the data directory");
    }
    // web04 is still valid in the store, and a revocation with the store reaches it.
    let listed = ok(&vouch().envs(store_env(slapd)).args(["--dir", s(&d1), "list", "--all"]).output().unwrap());
    assert!(listed.contains(name), "{listed}");
    ok(&vouch().envs(store_env(slapd)).args(["--dir", s(&d1), "revoke", name]).output().unwrap());
    drop(m);
}

#[test]
fn a_serve_refused_at_start_leaves_the_fleet_as_it_was() {
    refused_serve(&openldap_store());
}

#[test]
fn a_serve_refused_at_start_leaves_the_fleet_as_it_was_on_389ds() {
    refused_serve(&Ds389::store("refused_serve"));
}

fn refused_serve(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d3) = (tmp.path().join("m1"), tmp.path().join("m3"));
    let m1 = Master::start(slapd, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d3)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let before = slapd.ldapsearch(&format!("ou=cas,{}", slapd.base()), "(objectClass=vouchIssuer)", &["vouchCa"]);
    // Master 1's service name: refused, before its CA joins the fleet.
    let out = common::serve_cmd(&d3).args(["--server-name", "ca1.test"]).envs(store_env(slapd)).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another master"), "{}", text(&out));
    let id3 = ca_id(&d3);
    assert!(!slapd.has_dn(&format!("vouchCa={id3},ou=cas,{}", slapd.base())), "the refused master's CA was registered");
    let after = slapd.ldapsearch(&format!("ou=cas,{}", slapd.base()), "(objectClass=vouchIssuer)", &["vouchCa"]);
    assert_eq!(before.stdout, after.stdout, "ou=cas changed");
    assert!(!d3.join("ca/MOVED-TO-SHARED-STORE").exists(), "the refused master's directory was marked");
    drop(m1);
}

/// `vouch revoke` / `clean` of a master's service certname (this master's, another's of
/// the shared store) is refused without --force: that master would present a revoked
/// certificate, refused by every agent, until it restarts.
#[test]
fn revoking_a_masters_service_certname_needs_force() {
    service_certname(&openldap_store());
}

#[test]
fn revoking_a_masters_service_certname_needs_force_on_389ds() {
    service_certname(&Ds389::store("service_certname"));
}

fn service_certname(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    let m1 = Master::start(slapd, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start(slapd, &d2, "ca2.test");
    for (dir, whose) in [(&d1, "this master"), (&d2, "another master")] {
        for cmd in [&["revoke", "ca1.test"][..], &["clean", "ca1.test"]] {
            let out = vouch().envs(store_env(slapd)).args(["--dir", s(dir)]).args(cmd).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd:?}: {}", text(&out));
            assert!(
                err.contains(&format!("{whose}'s service certificate")) && err.contains("--force"),
                "{}",
                text(&out)
            );
        }
    }
    // By its serial too (the certificate master 1 presents).
    let serial = serial_of(&d1.join("server/server_crt.pem"));
    let out = vouch().envs(store_env(slapd)).args(["--dir", s(&d2), "revoke", "--serial", &serial]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another master's service certificate"), "{}", text(&out));
    let listed = ok(&vouch().envs(store_env(slapd)).args(["--dir", s(&d1), "list", "--all"]).output().unwrap());
    assert_eq!(revoked_section(&listed), "(none)", "{listed}");
    // With --force it is revoked.
    let forced = vouch().envs(store_env(slapd)).args(["--dir", s(&d2), "revoke", "--force", "ca1.test"]).output();
    ok(&forced.unwrap());
    drop((m1, m2));
}

/// A store URL whose port is no port is a typo (exit 2, the URL forms), not an outage (75).
#[test]
fn a_store_url_with_an_impossible_port_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    for port in ["99999999", "0", "", "x"] {
        let url = format!("ldap://127.0.0.1:{port}/ou=vouch,dc=example,dc=com");
        let out = vouch().args(["--dir", s(tmp.path()), "--store", &url, "ldap", "init"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("is not a port number"), "{url}: {}", text(&out));
    }
}

/// `vouch ldap init --create-base` under a parent that does not exist names that parent.
#[test]
fn create_base_under_a_missing_parent_names_the_parent() {
    missing_parent(&openldap_store());
}

#[test]
fn create_base_under_a_missing_parent_names_the_parent_on_389ds() {
    missing_parent(&Ds389::store("missing_parent"));
}

fn missing_parent(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = store_env(slapd);
    env[0].1 = slapd.url("ou=vouch,dc=nope,dc=com");
    let out = vouch().envs(env).args(["--dir", s(tmp.path()), "ldap", "init", "--create-base"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("its parent dc=nope,dc=com does not exist"),
        "{}",
        text(&out)
    );
}

/// The "Revoked Certificates:" section of `vouch list --all`, trimmed.
fn revoked_section(listed: &str) -> &str {
    listed.split("Revoked Certificates:").nth(1).unwrap_or_else(|| panic!("no revoked section: {listed}")).trim()
}

/// `openssl x509 -noout -serial` of the certificate in `pem` (`serial=…`, as an operator copies it).
fn serial_of(pem: &Path) -> String {
    let out = std::process::Command::new("openssl").args(["x509", "-noout", "-serial", "-in", s(pem)]).output();
    ok(&out.expect("openssl")).trim().to_string()
}

/// `vouch admin new NAME` in `dir` (`env`: the store), its files beside the directory; the
/// certificate's serial.
fn admin_new(dir: &Path, env: &[(String, String)], name: &str) -> String {
    let cert = dir.with_extension(format!("{name}.pem"));
    let key = dir.with_extension(format!("{name}.key"));
    ok(&vouch()
        .envs(env.iter().cloned())
        .args(["--dir", s(dir), "admin", "new", name, "--cert-out", s(&cert), "--key-out", s(&key)])
        .output()
        .unwrap());
    serial_of(&cert)
}

/// `vouch` in `dir` on the store `env` names.
fn run_in(dir: &Path, env: &[(String, String)], args: &[&str]) -> std::process::Output {
    vouch().envs(env.iter().cloned()).args(["--dir", s(dir)]).args(args).output().unwrap()
}

/// A revocation of the store's last valid administrator certificate, refused: exit 2, the
/// reason and --force named, nothing revoked.
fn refused_as_last_administrator(dir: &Path, env: &[(String, String)], args: &[&str]) {
    let before = ok(&run_in(dir, env, &["list", "--all"]));
    let out = run_in(dir, env, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    assert!(
        err.contains("last valid administrator certificate") && err.contains("--force"),
        "{args:?}: {}",
        text(&out)
    );
    assert_eq!(ok(&run_in(dir, env, &["list", "--all"])), before, "{args:?} changed the store");
}

/// `vouch revoke` (by name and by serial) and `vouch clean` of the file store's last valid
/// administrator certificate are refused without --force: once another administrator
/// exists, it is revoked; the new last one is refused again, and --force revokes it.
#[test]
fn the_last_administrator_certificate_needs_force_on_the_file_store() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ca");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    let alice = admin_new(&d, &[], "alice");
    for args in [&["revoke", "alice"][..], &["revoke", "--serial", alice.as_str()], &["clean", "alice"]] {
        refused_as_last_administrator(&d, &[], args);
    }
    let bob = admin_new(&d, &[], "bob");
    ok(&run_in(&d, &[], &["revoke", "alice"]));
    for args in [&["clean", "bob"][..], &["revoke", "--serial", bob.as_str()]] {
        let out = run_in(&d, &[], args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    ok(&run_in(&d, &[], &["clean", "--force", "bob"]));
}

/// The same on a shared store, counted over the fleet: master 1's first-run `vouch-admin` is
/// the fleet's only administrator at master 2 too; once master 2 made its own, master 1's is
/// revoked, and master 2's is then the last one at master 1.
#[test]
fn the_fleets_last_administrator_certificate_needs_force() {
    last_administrator_of_the_fleet(&openldap_store());
}

#[test]
fn the_fleets_last_administrator_certificate_needs_force_on_389ds() {
    last_administrator_of_the_fleet(&Ds389::store("last_administrator"));
}

fn last_administrator_of_the_fleet(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    drop(Master::start(slapd, &d1, "ca1.test"));
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let env = store_env(slapd);
    for args in [&["revoke", "vouch-admin"][..], &["clean", "vouch-admin"]] {
        refused_as_last_administrator(&d2, &env, args);
    }
    let alice = admin_new(&d2, &env, "alice");
    ok(&run_in(&d2, &env, &["revoke", "vouch-admin"]));
    refused_as_last_administrator(&d1, &env, &["revoke", "--serial", alice.as_str()]);
    let listed = ok(&run_in(&d1, &env, &["list", "--all"]));
    assert!(revoked_section(&listed).contains("vouch-admin"), "{listed}");
    ok(&run_in(&d1, &env, &["revoke", "--force", "--serial", &alice]));
}

/// The administrator API (`puppetserver ca revoke`/`clean`) answers 409 where `vouch revoke`
/// needs `--force` (the master's service certname, the last administrator certificate): it
/// never forces; nothing is revoked, and the administrator still works.
#[test]
fn the_admin_api_never_forces_a_revocation() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    let m = Master::start_env(&d, "ca1.test", &[], &[]);
    let before = ok(&run_in(&d, &[], &["list", "--all"]));
    let mut admin = m.admin();
    let revoked = &br#"{"desired_state":"revoked"}"#[..];
    for name in ["ca1.test", "vouch-admin"] {
        let path = format!("/puppet-ca/v1/certificate_status/{name}");
        for (method, body) in [("PUT", revoked), ("DELETE", &b""[..])] {
            let r = admin.request(method, &path, Some("application/json"), body).unwrap();
            assert_eq!(r.status, 409, "{method} {name}: {}", r.text());
            assert!(r.text().contains("--force"), "{method} {name}: {}", r.text());
        }
    }
    assert_eq!(ok(&run_in(&d, &[], &["list", "--all"])), before, "the store changed");
    let r = admin.request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
}

/// `certificate_statuses/any?state=signed&state=revoked` answered the first state only; each
/// state named is answered (Puppet Server 7.9.5 answers every status, the filter dropped), and
/// a state that is none of the three is a 400 naming it, repeated or not.
#[test]
fn the_admin_listing_answers_each_state_a_repeated_state_names() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    let m = Master::start_env(&d, "ca1.test", &[], &[]);
    let classification = "classes:\n  - role::web\n";
    for name in ["kept.example.test", "gone.example.test"] {
        let csr = csr_for(name, &common::agents::vouched(&d, name, classification), &p256());
        let (_, why, cert) = enroll(&m, name, &csr);
        assert!(cert.is_some(), "{name}: {why}\n{}", m.log());
    }
    ok(&run_in(&d, &[], &["revoke", "gone.example.test"]));
    let mut admin = m.admin();
    let mut list = |query: &str| {
        let r = admin.request("GET", &format!("/puppet-ca/v1/certificate_statuses/any{query}"), None, b"").unwrap();
        let v: Vec<serde_json::Value> = if r.status == 200 { serde_json::from_slice(&r.body).unwrap() } else { vec![] };
        let mut names: Vec<(String, String)> = v
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_string(), e["state"].as_str().unwrap().to_string()))
            .collect();
        names.sort();
        (r.status, r.text(), names)
    };
    let (_, _, signed) = list("?state=signed");
    let (_, _, revoked) = list("?state=revoked");
    assert!(signed.contains(&("kept.example.test".into(), "signed".into())), "{signed:?}");
    assert_eq!(revoked, vec![("gone.example.test".to_string(), "revoked".to_string())]);
    let (status, body, both) = list("?state=signed&state=revoked");
    assert_eq!(status, 200, "{body}");
    let mut want = [signed.clone(), revoked.clone()].concat();
    want.sort();
    assert_eq!(both, want, "each state named, once");
    assert_eq!(list("?state=revoked&state=revoked").2, revoked);
    let (status, body, _) = list("?state=revoked&state=bogus");
    assert_eq!((status, body.contains("\"bogus\"")), (400, true), "{body}");
}

/// `vouch migrate --to URL` where nothing answers: its hint spoke of `vouch serve` ("a running
/// vouch serve answers 503 meanwhile"); it speaks of migrate, and of running it again (exit 75).
#[test]
fn migrate_to_a_server_that_does_not_answer_speaks_of_migrate() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    ok(&vouch().args(["--dir", s(&d), "ca", "init"]).output().unwrap());
    let url = format!("ldap://127.0.0.1:{}/ou=vouch,dc=vouch,dc=test", common::processes::free_port());
    let o = run_in(&d, &[], &["migrate", "--to", &url]);
    assert_eq!(o.status.code(), Some(75), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("vouch migrate cannot reach the LDAP store {url}")), "{err}");
    assert!(err.contains("run the same vouch migrate again"), "{err}");
    assert!(!err.contains("vouch serve"), "{err}");
}

/// `vouch migrate` with no bind DN, to a slapd whose ACLs show anonymous clients nothing but
/// the root DSE and the schema: slapd answers the base DN noSuchObject, as for one that does
/// not exist, and migrate said "the base DN does not exist". It says the bind was anonymous and
/// how to give one; a base DN that does not exist, bound, is named missing with the entry above.
#[test]
fn an_anonymous_migrate_is_told_its_bind_not_that_the_base_is_missing() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    ok(&vouch().args(["--dir", s(&d), "ca", "init"]).output().unwrap());
    let o = run_in(&d, &[], &["migrate", "--to", &slapd.url(&slapd.base())]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the bind is anonymous") && err.contains("--ldap-bind-dn"), "{err}");
    assert!(!err.contains("the base DN does not exist"), "{err}");
    let bind: Vec<(String, String)> = store_env(&slapd).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect();
    let o = run_in(&d, &bind, &["migrate", "--to", &slapd.url("ou=nope,dc=vouch,dc=test")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the base DN does not exist: the server holds dc=vouch,dc=test"), "{err}");
    // Bound, to the store's base DN: migrated.
    ok(&run_in(&d, &bind, &["migrate", "--to", &slapd.url(&slapd.base())]));
}

/// The name `vouch serve` gives its service certificate without `--server-name`: this
/// host's name (lowercase) where it is a certname, else `localhost`.
fn default_service_certname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_ascii_lowercase();
    let usable =
        !h.is_empty() && h.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if usable {
        h
    } else {
        "localhost".into()
    }
}

/// A new master CA under `d1`'s root, in `dir` (not yet serving).
fn second_ca(d1: &Path, dir: &Path) {
    ok(&vouch()
        .args(["ca", "init", "--dir", s(dir)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
}

/// Found by review of strfix: `vouch serve` checks only its `--server-name` values before
/// its CA joins the fleet. The certname its service certificate takes (the host name when no
/// `--server-name` is given) held by another master's service, or a `--server-name` that is
/// another master's administrator, is refused only when the service certificate is issued:
/// after the CA was registered in the shared store (every master then serves it in the
/// fleet's bundle) and the directory marked.
#[test]
fn a_serve_refused_when_it_issues_its_service_certificate_leaves_the_fleet_as_it_was() {
    refused_at_issuance(&openldap_store());
}

#[test]
fn a_serve_refused_when_it_issues_its_service_certificate_leaves_the_fleet_as_it_was_on_389ds() {
    refused_at_issuance(&Ds389::store("refused_at_issuance"));
}

fn refused_at_issuance(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(slapd, &d1, &default_service_certname());
    let cases: [&[&str]; 2] = [&[], &["--server-name", "vouch-admin"]];
    for (i, args) in cases.into_iter().enumerate() {
        let d = tmp.path().join(format!("m{}", i + 3));
        second_ca(&d1, &d);
        let before = slapd.ldapsearch(&format!("ou=cas,{}", slapd.base()), "(objectClass=vouchIssuer)", &["vouchCa"]);
        let mut cmd = common::serve_cmd(&d);
        cmd.args(args).envs(store_env(slapd));
        let child = common::spawn_serve(&mut cmd, &tmp.path().join(format!("m{}.log", i + 3)));
        let _dog = common::processes::Watchdog::kill_after(
            child.id() as i32,
            "vouch serve",
            std::time::Duration::from_secs(60),
        );
        let out = child.wait_with_output().unwrap();
        let log = std::fs::read_to_string(tmp.path().join(format!("m{}.log", i + 3))).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {log}");
        let id = ca_id(&d);
        assert!(
            !slapd.has_dn(&format!("vouchCa={id},ou=cas,{}", slapd.base())),
            "{args:?}: the refused master's CA was registered: {log}"
        );
        let after = slapd.ldapsearch(&format!("ou=cas,{}", slapd.base()), "(objectClass=vouchIssuer)", &["vouchCa"]);
        assert_eq!(before.stdout, after.stdout, "{args:?}: ou=cas changed");
        assert!(!d.join("ca/MOVED-TO-SHARED-STORE").exists(), "{args:?}: the refused master's directory was marked");
    }
    drop(m1);
}

/// Found by review of strfix: the refused serve's pre-open (nothing registered) still retires
/// the policy's file replay journal: the master, back on its file store (no `--store`), then
/// refuses every vouched request (the journal is retired) until someone removes the mark.
#[test]
fn a_serve_refused_at_start_leaves_its_file_journal_usable() {
    file_journal_usable(&openldap_store());
}

#[test]
fn a_serve_refused_at_start_leaves_its_file_journal_usable_on_389ds() {
    file_journal_usable(&Ds389::store("file_journal_usable"));
}

fn file_journal_usable(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d3) = (tmp.path().join("m1"), tmp.path().join("m3"));
    let m1 = Master::start(slapd, &d1, "ca1.test");
    second_ca(&d1, &d3);
    let out = common::serve_cmd(&d3).args(["--server-name", "ca1.test"]).envs(store_env(slapd)).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!d3.join("replay/MOVED-TO-SHARED-STORE").exists(), "the refused serve retired the file journal");
    // Its file store still signs a node its conductors vouched for.
    let name = "web07.example.test";
    let attrs = common::agents::vouched(&d1, name, "classes:\n  - role::web\n");
    let csr = tmp.path().join("web07.csr");
    std::fs::write(&csr, csr_for(name, &attrs, &p256())).unwrap();
    ok(&vouch().args(["--dir", s(&d3), "sign", "--csr", s(&csr)]).output().unwrap());
    drop(m1);
}

/// Found by review of strfix: the marker is read as UTF-8 text, and any error reading it
/// counts as no marker. A marker that is a directory, holds bytes that are not UTF-8, or is a
/// dangling link leaves the retired file store open to every command.
#[test]
fn a_marker_that_is_not_readable_text_still_retires_the_file_store() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    let marker = d.join("ca/MOVED-TO-SHARED-STORE");
    for kind in ["directory", "not UTF-8", "dangling link"] {
        match kind {
            "directory" => std::fs::create_dir(&marker).unwrap(),
            "not UTF-8" => std::fs::write(&marker, b"ldap://127.0.0.1/ou=v\xff\n").unwrap(),
            _ => std::os::unix::fs::symlink(tmp.path().join("gone"), &marker).unwrap(),
        }
        let out = vouch().args(["--dir", s(&d), "list", "--all"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{kind}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("MOVED-TO-SHARED-STORE"), "{kind}: {}", text(&out));
        match std::fs::symlink_metadata(&marker).unwrap().is_dir() {
            true => std::fs::remove_dir(&marker).unwrap(),
            false => std::fs::remove_file(&marker).unwrap(),
        }
    }
}

/// Found by review of strfix: the Puppet Server hook beside a shared store's master (`--dir`
/// naming it) with a policy of its own (`--policy`, VOUCH_POLICY) and no `--store` keeps a
/// one-time use of its own in that policy's file journal: attributes the fleet has spent
/// are granted again. The directory's marker says the fleet's one-time use is in the store.
#[test]
fn the_hook_beside_a_retired_directory_refuses_without_store_whatever_its_policy() {
    hook_beside_retired(&openldap_store());
}

#[test]
fn the_hook_beside_a_retired_directory_refuses_without_store_whatever_its_policy_on_389ds() {
    hook_beside_retired(&Ds389::store("hook_beside_retired"));
}

fn hook_beside_retired(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(slapd, &d1, "ca1.test");
    let name = "web08.example.test";
    let attrs = common::agents::vouched(&d1, name, "classes:\n  - role::web\n");
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    assert!(cert.is_some(), "{name} was not issued");
    // The hook's policy: the master's, with a journal of its own beside it.
    let policy = std::fs::read_to_string(d1.join("policy.toml")).unwrap();
    assert!(policy.contains("journal = \"replay\""), "{policy}");
    let hook_policy = d1.join("hook-policy.toml");
    std::fs::write(&hook_policy, policy.replace("journal = \"replay\"", "journal = \"hook-replay\"")).unwrap();
    let hook = common::run(
        vouch().args(["--dir", s(&d1), "autosign", name, "--policy", s(&hook_policy)]),
        Some(&csr_for(name, &attrs, &p256())),
    );
    assert_ne!(hook.status.code(), Some(0), "the hook granted attributes the fleet spent: {}", text(&hook));
    drop(m1);
}

/// Found by review of strfix: the refused serve's read of the other masters' names
/// (`read_fleet_names`, said to write nothing) publishes this master's service certificate
/// (`vouchCa=service-ID`) when the store has none for it: a master that served on its file
/// store before, refused at its first start on the shared store, writes to the fleet.
#[test]
fn a_serve_refused_for_its_name_publishes_no_service_certificate() {
    no_service_certificate_published(&openldap_store());
}

#[test]
fn a_serve_refused_for_its_name_publishes_no_service_certificate_on_389ds() {
    no_service_certificate_published(&Ds389::store("no_service_published"));
}

fn no_service_certificate_published(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d4) = (tmp.path().join("m1"), tmp.path().join("m4"));
    let m1 = Master::start(slapd, &d1, "ca1.test");
    second_ca(&d1, &d4);
    // Master 4 served on its own file store: it has a service certificate.
    drop(Master::start_env(&d4, "ca4.test", &[], &[]));
    assert!(d4.join("server/server_crt.pem").exists());
    let out = common::serve_cmd(&d4).args(["--server-name", "ca1.test"]).envs(store_env(slapd)).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another master"), "{}", text(&out));
    let id4 = ca_id(&d4);
    assert!(!slapd.has_dn(&format!("vouchCa={id4},ou=cas,{}", slapd.base())), "the refused master's CA was registered");
    assert!(
        !slapd.has_dn(&format!("vouchCa=service-{id4},{}", slapd.base())),
        "the refused master's service certificate was published in the fleet"
    );
    drop(m1);
}

/// Found by review of strfix: the marker is read whole, whatever it is: a FIFO there (or a
/// link to one, or to an endless file) hangs every command on the directory.
#[test]
fn a_marker_that_is_a_fifo_does_not_hang_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    let marker = d.join("ca/MOVED-TO-SHARED-STORE");
    ok(&std::process::Command::new("mkfifo").arg(&marker).output().unwrap());
    let child = vouch()
        .args(["--dir", s(&d), "list", "--all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _dog =
        common::processes::Watchdog::kill_after(child.id() as i32, "vouch list", std::time::Duration::from_secs(30));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "killed (None) means it hung: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MOVED-TO-SHARED-STORE"), "{}", text(&out));
}

/// Found by review of strfix: a URL whose authority the LDAP library cannot parse (a second
/// port, an empty host before the port, an unclosed IPv6 bracket) passes vouch's check and
/// is reported as an outage (exit 75, "start the LDAP server and retry": a supervisor
/// restarts it for ever), not as the typo it is.
#[test]
fn a_store_url_the_ldap_library_cannot_parse_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    for authority in ["127.0.0.1:389:1", ":389", "[::1"] {
        let url = format!("ldap://{authority}/ou=vouch,dc=example,dc=com");
        let out = vouch().args(["--dir", s(tmp.path()), "--store", &url, "ldap", "init"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}: {}", text(&out));
    }
}

/// Review: the last-administrator guard is judged before the store's lock is taken. Two
/// `vouch revoke`s, one of alice and one of bob (the store's only administrators), started
/// while the file store's lock is held elsewhere (a third command at work): each counts the
/// other as the valid administrator left, both wait for the lock, and both revoke. No valid
/// administrator certificate is left, with no --force given. What must hold: one of the two
/// is refused. (Fails while the guard is judged outside the lock the revocation takes.)
#[test]
fn two_revokes_at_once_of_the_last_two_administrators_leave_one() {
    use std::os::fd::AsRawFd;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ca");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    admin_new(&d, &[], "alice");
    admin_new(&d, &[], "bob");
    // Another process at work on the store: its lock held while both revokes start.
    let lock = std::fs::OpenOptions::new().read(true).write(true).open(d.join("ca/.lock")).unwrap();
    // SAFETY: flock(2) on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let revoke = |name: &str| {
        let err = tmp.path().join(format!("{name}.err"));
        let child = vouch()
            .args(["--dir", s(&d), "revoke", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        (child, err)
    };
    let (mut a, a_err) = revoke("alice");
    let (mut b, b_err) = revoke("bob");
    let said = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    for err in [&a_err, &b_err] {
        common::processes::Wait::up_to(std::time::Duration::from_secs(30)).showing(|| said(err)).until(
            "a revoke waiting for the store's lock, or refused",
            || {
                let t = said(err);
                t.contains("waiting for the store's lock") || t.contains("last valid administrator")
            },
        );
    }
    drop(lock);
    let (ra, rb) = (a.wait().unwrap(), b.wait().unwrap());
    let listed = ok(&run_in(&d, &[], &["list", "--all"]));
    assert!(
        !(ra.success() && rb.success()),
        "both administrators revoked without --force, none left:\n{listed}\nalice: {}\nbob: {}",
        said(&a_err),
        said(&b_err)
    );
}
