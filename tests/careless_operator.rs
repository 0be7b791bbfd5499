//! An operator's careless input on masters of a shared store, against the real vouch binary
//! and a private slapd: a command run on a master's data directory without `--store` (or
//! VOUCH_STORE), a `vouch serve` refused at start.

mod common;

use common::agents::{csr_for, p256};
use common::ldap_lab::{enroll, openldap_store, store_env, Directory, Master};
use common::{ok, s, text, vouch};
use std::path::Path;

/// The names under `dir` (recursively, relative), sorted, with each file's bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                todo.push(p);
                out.push((rel + "/", Vec::new()));
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn ca_id(dir: &Path) -> String {
    let pem = std::fs::read(dir.join("ca/ca_crt.pem")).unwrap();
    vouch::store::ca_id(&vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap().1)
}

#[test]
fn a_command_without_store_on_a_shared_store_masters_directory_is_refused_before_it_writes() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let m = Master::start(&slapd, &d1, "ca1.test");
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
    let listed = ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "list", "--all"]).output().unwrap());
    assert!(listed.contains(name), "{listed}");
    ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "revoke", name]).output().unwrap());
    drop(m);
}

#[test]
fn a_serve_refused_at_start_leaves_the_fleet_as_it_was() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d3) = (tmp.path().join("m1"), tmp.path().join("m3"));
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d3)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let before = slapd.ldapsearch(&format!("ou=cas,{}", slapd.base()), "(objectClass=vouchIssuer)", &["vouchCa"]);
    // Master 1's service name: refused, before its CA joins the fleet.
    let out = common::serve_cmd(&d3).args(["--server-name", "ca1.test"]).envs(store_env(&slapd)).output().unwrap();
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
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let m2 = Master::start(&slapd, &d2, "ca2.test");
    for (dir, whose) in [(&d1, "this master"), (&d2, "another master")] {
        for cmd in [&["revoke", "ca1.test"][..], &["clean", "ca1.test"]] {
            let out = vouch().envs(store_env(&slapd)).args(["--dir", s(dir)]).args(cmd).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd:?}: {}", text(&out));
            assert!(
                err.contains(&format!("{whose}'s service certificate")) && err.contains("--force"),
                "{}",
                text(&out)
            );
        }
    }
    let listed = ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "list", "--all"]).output().unwrap());
    assert!(!listed.contains("revoked"), "{listed}");
    // With --force it is revoked.
    let forced = vouch().envs(store_env(&slapd)).args(["--dir", s(&d2), "revoke", "--force", "ca1.test"]).output();
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
    let slapd = openldap_store();
    let mut env = store_env(&slapd);
    env[0].1 = slapd.url("ou=vouch,dc=nope,dc=com");
    let out = vouch().envs(env).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("its parent dc=nope,dc=com does not exist"),
        "{}",
        text(&out)
    );
}
