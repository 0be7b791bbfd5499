//! `vouch reconcile` and `vouch purge` (docs/fleet-operations.md), driving the binary on
//! generated stores of real certificates. What reads a directory runs on a private slapd
//! and (`_on_389ds`) on a base DN of its own on the test binary's private 389 Directory
//! Server, each scenario written once.

mod common;

use common::ds389::Ds389;
use common::gen_store;
use common::ldap_lab::{openldap_store, store_env, Directory};
use common::{ok, s, text, vouch};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;
use time::OffsetDateTime;

fn name(i: usize) -> String {
    format!("node-{i:05}.example.test")
}

/// A CA in `tmp/ca` whose store holds `n` generated certificates (`node-00000…`).
fn ca_with(tmp: &Path, n: usize) -> PathBuf {
    let dir = tmp.join("ca");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let names: Vec<String> = (0..n).map(name).collect();
    gen_store::fill(&dir, &names, OffsetDateTime::now_utc(), &|_| false);
    dir
}

fn reconcile(dir: &Path, args: &[&str]) -> Output {
    vouch().args(["--dir", s(dir), "reconcile"]).args(args).output().unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn names_in(v: &serde_json::Value, section: &str, field: Option<&str>) -> BTreeSet<String> {
    v[section]
        .as_array()
        .unwrap_or_else(|| panic!("no {section} in {v}"))
        .iter()
        .map(|x| match field {
            Some(f) => x[f].as_str().unwrap().to_string(),
            None => x.as_str().unwrap().to_string(),
        })
        .collect()
}

/// Every file of the store with its content's digest: what "nothing changed" compares.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let ca = dir.join("ca");
    for sub in ["signed", "requests", "serials"] {
        let mut stack = vec![ca.join(sub)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((
                        p.strip_prefix(&ca).unwrap().display().to_string(),
                        vouch::encoding::sha256_hex(&std::fs::read(&p).unwrap()),
                    ));
                }
            }
        }
    }
    for f in ["inventory.txt", "revocations.txt"] {
        let content = std::fs::read(ca.join(f)).unwrap_or_default();
        out.push((f.to_string(), vouch::encoding::sha256_hex(&content)));
    }
    out.sort();
    out
}

/// The serials (hex) the CA's current CRL lists.
fn crl_serials(dir: &Path) -> BTreeSet<String> {
    let pem = ok(&vouch().args(["--dir", s(dir), "crl"]).output().unwrap());
    let (_, der) = vouch::encoding::pem::find(pem.as_bytes(), &["X509 CRL"]).unwrap();
    let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
    crl.iter_revoked_certificates().map(|r| vouch::encoding::hex(r.raw_serial())).collect()
}

/// 10,000 certificates; the inventory lacks 300 of them and names 5 the store has not:
/// the dry run changes nothing and lists exactly those; --confirm revokes them, the CRL lists
/// them, the audit log verifies, and a second dry run is empty.
#[test]
fn reconcile_revokes_exactly_the_certificates_the_inventory_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 10_000;
    let dir = ca_with(tmp.path(), n);
    let gone: BTreeSet<usize> = (0..300).map(|i| (i * 31 + 7) % n).collect();
    assert_eq!(gone.len(), 300);
    let mut inv = String::from("# the fleet, as the cloud sees it\n\n");
    for i in (0..n).filter(|i| !gone.contains(i)) {
        inv.push_str(&format!("{}\n", name(i)));
    }
    let fresh: BTreeSet<String> = (0..5).map(|i| format!("fresh-{i}.example.test")).collect();
    for f in &fresh {
        inv.push_str(&format!("  {}   # booting\n", f.to_uppercase()));
    }
    let inv_path = tmp.path().join("inventory.txt");
    std::fs::write(&inv_path, inv).unwrap();
    let source = format!("file:{}", s(&inv_path));
    // The first command writes the CRL; from then on the store is what is compared.
    ok(&vouch().args(["--dir", s(&dir), "crl"]).output().unwrap());
    let before = snapshot(&dir);

    let t = std::time::Instant::now();
    let plan = json(&reconcile(&dir, &["--inventory", &source, "-o", "json"]));
    eprintln!("dry run over {n} certificates: {:?}", t.elapsed());
    let expected: BTreeSet<String> = gone.iter().map(|i| name(*i)).collect();
    assert_eq!(names_in(&plan, "orphans", Some("certname")), expected);
    assert_eq!(names_in(&plan, "missing", None), fresh);
    assert_eq!(plan["mode"], "dry-run");
    assert_eq!(plan["changes"], 300);
    assert_eq!(plan["limit"], 1000, "10% of the fleet by default");
    assert!(plan["refused"].is_null(), "{plan}");
    assert_eq!(plan["store"]["certificates"], n);
    assert_eq!(plan["inventory"]["names"], n - 300 + 5);
    assert_eq!(snapshot(&dir), before, "a dry run changed the store");
    // Text says how to apply; YAML parses to the same lists.
    let o = reconcile(&dir, &["--inventory", &source]);
    let out = ok(&o);
    assert!(out.contains("dry run: nothing changed") && out.contains("--confirm"), "{out}");
    assert!(!String::from_utf8_lossy(&o.stderr).contains('\r'), "a progress bar off a terminal");
    let y = ok(&reconcile(&dir, &["--inventory", &source, "-o", "yaml"]));
    let y: serde_json::Value = serde_yaml_ng::from_str(&y).unwrap();
    assert_eq!(names_in(&y, "orphans", Some("certname")), expected);
    assert_eq!(snapshot(&dir), before, "a dry run changed the store");

    let applied = json(&reconcile(&dir, &["--inventory", &source, "--confirm", "-o", "json"]));
    assert_eq!(applied["mode"], "confirm");
    assert_eq!(applied["applied"]["revoked"], 300, "{}", applied["applied"]);
    let on_crl = crl_serials(&dir);
    let serials: BTreeSet<String> = gone.iter().map(|i| vouch::encoding::hex(&gen_store::serial_of(*i))).collect();
    assert_eq!(on_crl, serials, "the CRL lists exactly the revoked orphans");
    // The others are untouched: still signed.
    let list: serde_json::Value = serde_json::from_str(&ok(&vouch()
        .args(["--dir", s(&dir), "list", "--all", "--format", "json"])
        .output()
        .unwrap()))
    .unwrap();
    let revoked: BTreeSet<String> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "revoked")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(revoked, expected);

    let again = json(&reconcile(&dir, &["--inventory", &source, "-o", "json"]));
    assert_eq!(again["orphans"].as_array().unwrap().len(), 0, "{}", again["orphans"]);
    assert_eq!(again["changes"], 0);
    // The revocations are in the audit log, whose chain verifies.
    let log = std::fs::read_to_string(dir.join("audit.log")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("\"by\":\"reconcile\"")).count(), 300);
    let v = ok(&vouch().args(["--dir", s(&dir), "audit", "verify"]).output().unwrap());
    assert!(v.starts_with("ok:"), "{v}");
    let shown = ok(&vouch().args(["--dir", s(&dir), "audit", "show", "--certname", &name(7)]).output().unwrap());
    assert!(shown.contains("revoked") && shown.contains(&name(7)) && shown.lines().count() == 1, "{shown}");
}

/// An empty inventory, and one that would revoke half the fleet, are refused without --force
/// (exit 2, nothing changed); a failing cmd: aborts before anything changes; a working one
/// reads as file: does.
#[test]
fn reconcile_refuses_empty_inventories_large_cuts_and_failing_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 1_000;
    let dir = ca_with(tmp.path(), n);
    ok(&vouch().args(["--dir", s(&dir), "crl"]).output().unwrap());
    let before = snapshot(&dir);
    let empty = tmp.path().join("empty.txt");
    std::fs::write(&empty, "# nothing: the cloud API failed\n").unwrap();
    let src = format!("file:{}", s(&empty));
    for args in [vec!["--inventory", &src], vec!["--inventory", &src, "--confirm"]] {
        let o = reconcile(&dir, &args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("empty inventory") && err.contains("--force"), "{err}");
    }
    // --force lets the dry run show it all.
    let forced = json(&reconcile(&dir, &["--inventory", &src, "--force", "-o", "json"]));
    assert_eq!(forced["orphans"].as_array().unwrap().len(), n);

    let half = tmp.path().join("half.txt");
    std::fs::write(&half, (0..n / 2).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&half));
    let o = reconcile(&dir, &["--inventory", &src, "--confirm"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("refusing to make 500 changes") && err.contains("allows 100"), "{err}");
    // The dry run says --confirm would be refused (and exits 0).
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert!(plan["refused"].as_str().unwrap().contains("500 changes"), "{plan}");
    // An explicit limit counts too.
    let o = reconcile(&dir, &["--inventory", &src, "--confirm", "--max-changes", "499"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // cmd: a program that prints names and then fails.
    let script = tmp.path().join("inventory.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat {}\necho 'API rate limit exceeded' >&2\nexit 3\n", s(&half)))
        .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let src = format!("cmd:{}", s(&script));
    let o = reconcile(&dir, &["--inventory", &src, "--confirm", "--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("status 3") && err.contains("rate limit") && err.contains("nothing was changed"), "{err}");
    assert_eq!(snapshot(&dir), before, "a refused reconcile changed the store");

    // cmd: that works: the same plan as file:.
    let src = format!("cmd:cat {}", s(&half));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert_eq!(plan["orphans"].as_array().unwrap().len(), n / 2);
    assert_eq!(snapshot(&dir), before);
}

/// Stale pending requests are listed and, with --confirm, dropped; --prune forgets orphans.
#[test]
fn reconcile_drops_stale_requests_and_prune_forgets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 20);
    let req = |certname: &str, time: &str| {
        let j = serde_json::json!({"certname": certname, "time": time, "reasons": ["attributes-missing"]});
        std::fs::write(dir.join("ca/requests").join(format!("{certname}.json")), j.to_string()).unwrap();
        std::fs::write(
            dir.join("ca/requests").join(format!("{certname}.pem")),
            "-----BEGIN CERTIFICATE REQUEST-----\n",
        )
        .unwrap();
    };
    let now = OffsetDateTime::now_utc();
    req("old.example.test", &vouch::encoding::time::format_rfc3339(now - time::Duration::days(30)));
    req("new.example.test", &vouch::encoding::time::format_rfc3339(now - time::Duration::hours(1)));
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..19).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert_eq!(names_in(&plan, "stale_requests", Some("certname")), BTreeSet::from(["old.example.test".to_string()]));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "--pending-older-than", "30m", "-o", "json"]));
    assert_eq!(plan["stale_requests"].as_array().unwrap().len(), 2);
    let done = json(&reconcile(&dir, &["--inventory", &src, "--confirm", "--prune", "-o", "json"]));
    assert_eq!(done["applied"]["revoked"], 1);
    assert_eq!(done["applied"]["cleaned"], 1);
    assert_eq!(done["applied"]["requests_dropped"], 1);
    assert!(!dir.join("ca/signed").join(format!("{}.pem", name(19))).exists(), "pruned: forgotten");
    assert!(!dir.join("ca/requests/old.example.test.json").exists());
    assert!(dir.join("ca/requests/new.example.test.json").exists());
    let again = json(&reconcile(&dir, &["--inventory", &src, "--prune", "-o", "json"]));
    assert_eq!(again["changes"], 0, "{again}");
}

/// Junk planted in the store gets the same generated names in two runs and on a copy of the
/// store; purge is a dry run without --confirm, then removes exactly the named entries.
#[test]
fn junk_gets_stable_generated_names_and_purge_removes_only_those() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 10);
    let ca = dir.join("ca");
    let issuer = gen_store::issuer(&dir);
    let key = rcgen::KeyPair::generate().unwrap();
    let now = OffsetDateTime::now_utc();
    let (nb, na) = (now - time::Duration::days(1), now + time::Duration::days(30));
    // Junk: a file that does not parse, a certificate without a CN, one whose CN is not its
    // file name, a file name that is no certname, and requests for names Puppet refuses.
    std::fs::write(ca.join("signed/garbage.example.test.pem"), "not a certificate\n").unwrap();
    std::fs::write(
        ca.join("signed/nocn.example.test.pem"),
        gen_store::cert_pem(&issuer, &key, None, &[0x11; 16], nb, na),
    )
    .unwrap();
    std::fs::write(
        ca.join("signed/alias.example.test.pem"),
        gen_store::cert_pem(&issuer, &key, Some("other.example.test"), &[0x12; 16], nb, na),
    )
    .unwrap();
    std::fs::copy(ca.join("signed").join(format!("{}.pem", name(1))), ca.join("signed/UPPER.example.test.pem"))
        .unwrap();
    std::fs::write(
        ca.join("requests/bad name!.json"),
        r#"{"certname":"bad name!","time":"2026-01-01T00:00:00Z","reasons":[]}"#,
    )
    .unwrap();
    std::fs::write(ca.join("requests/bad name!.pem"), "-----BEGIN CERTIFICATE REQUEST-----\n").unwrap();
    std::fs::write(ca.join("requests/torn.example.test.json"), "{\"certname\": ").unwrap();
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..10).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let junk = |d: &Path| -> Vec<(String, String)> {
        let v = json(&reconcile(d, &["--inventory", &src, "-o", "json"]));
        let mut j: Vec<(String, String)> = v["junk"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x["name"].as_str().unwrap().to_string(), x["files"].to_string()))
            .collect();
        j.sort();
        j
    };
    let first = junk(&dir);
    assert_eq!(first.len(), 6, "{first:?}");
    assert!(first.iter().all(|(n, _)| n.starts_with("unnamed-") && n.len() == "unnamed-".len() + 12), "{first:?}");
    assert_eq!(junk(&dir), first, "a second run names them differently");
    // A copy elsewhere (new inodes, times, paths): the same names.
    let copy = tmp.path().join("copy");
    let cp = std::process::Command::new("cp").args(["-r", s(&dir), s(&copy)]).output().unwrap();
    assert!(cp.status.success());
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(junk(&copy), first, "a copy of the store names them differently");

    let pick = |file: &str| first.iter().find(|(_, f)| f.contains(file)).unwrap().0.clone();
    let (garbage, badreq) = (pick("garbage"), pick("bad name!.json"));
    let before = snapshot(&dir);
    let out = ok(&vouch().args(["--dir", s(&dir), "purge", &garbage, &badreq]).output().unwrap());
    assert!(out.contains("would remove") && out.contains("--confirm"), "{out}");
    assert_eq!(snapshot(&dir), before, "purge without --confirm removed something");
    let o = vouch().args(["--dir", s(&dir), "purge", "unnamed-000000000000", "--confirm"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(snapshot(&dir), before);
    let out = ok(&vouch().args(["--dir", s(&dir), "purge", &garbage, &badreq, "--confirm"]).output().unwrap());
    assert_eq!(out.lines().filter(|l| l.starts_with("removed")).count(), 2, "{out}");
    assert!(!ca.join("signed/garbage.example.test.pem").exists());
    assert!(!ca.join("requests/bad name!.json").exists() && !ca.join("requests/bad name!.pem").exists());
    let after = junk(&dir);
    let expected: Vec<(String, String)> =
        first.iter().filter(|(n, _)| *n != garbage && *n != badreq).cloned().collect();
    assert_eq!(after, expected, "purge removed other entries");
    // The valid certificates are all still there.
    for i in 0..10 {
        assert!(ca.join("signed").join(format!("{}.pem", name(i))).exists());
    }
    // The purge is audited.
    let log = std::fs::read_to_string(dir.join("audit.log")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("\"event\":\"purged\"")).count(), 2);
}

/// `ldap:` inventories: an RFC 4516 URL against a directory server, more than one page of entries.
#[test]
fn reconcile_reads_an_ldap_inventory_page_by_page() {
    ldap_inventory(&openldap_store());
}

#[test]
fn reconcile_reads_an_ldap_inventory_page_by_page_on_389ds() {
    ldap_inventory(&Ds389::store("ldap_inventory"));
}

fn ldap_inventory(slapd: &dyn Directory) {
    let hosts = format!("ou=hosts,{}", slapd.base());
    let tmp = tempfile::tempdir().unwrap();
    let n = 1_500;
    let dir = ca_with(tmp.path(), n);
    let mut ldif = format!("dn: {hosts}\nobjectClass: organizationalUnit\nou: hosts\n\n");
    // Every node but the last 40, and a device of another kind the filter leaves out.
    for i in 0..n - 40 {
        ldif.push_str(&format!("dn: cn={0},{hosts}\nobjectClass: device\ncn: {0}\nou: puppet\n\n", name(i)));
    }
    ldif.push_str(&format!("dn: cn={0},{hosts}\nobjectClass: device\ncn: {0}\nou: printers\n\n", name(n - 1)));
    let added = slapd.ldapadd(&ldif);
    assert!(added.success(), "{added}");
    let url = format!("ldap:{}?cn?one?(%26(objectClass=device)(ou=puppet))", slapd.url(&hosts));
    let o = vouch()
        .args(["--dir", s(&dir), "--ldap-bind-dn", &slapd.bind_dn(), "--ldap-password-file", s(&slapd.password_file())])
        .args(["reconcile", "--inventory", &url, "-o", "json"])
        .output()
        .unwrap();
    let plan = json(&o);
    assert_eq!(plan["inventory"]["names"], n - 40, "{}", plan["inventory"]);
    let expected: BTreeSet<String> = (n - 40..n).map(name).collect();
    assert_eq!(names_in(&plan, "orphans", Some("certname")), expected);
    // A wrong password: the directory refuses, nothing is decided.
    let bad = tmp.path().join("bad.pw");
    std::fs::write(&bad, "wrong\n").unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let o = vouch()
        .args(["--dir", s(&dir), "--ldap-bind-dn", &slapd.bind_dn(), "--ldap-password-file", s(&bad)])
        .args(["reconcile", "--inventory", &url, "--confirm"])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    // A URL without an attribute is refused before anything is read.
    let o = reconcile(&dir, &["--inventory", &format!("ldap:{}", slapd.url(&hosts))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// On the shared LDAP store (`--store ldap://…`): a generated file store migrated into it,
/// then reconciled: the dry run lists the orphans page by page, --confirm revokes them there,
/// and the CRL lists them.
#[test]
fn reconcile_works_on_the_ldap_store() {
    reconcile_on_ldap(&openldap_store());
}

#[test]
fn reconcile_works_on_the_ldap_store_on_389ds() {
    reconcile_on_ldap(&Ds389::store("reconcile_on_ldap"));
}

fn reconcile_on_ldap(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let n = 1_200;
    let dir = ca_with(tmp.path(), n);
    let env = store_env(slapd);
    let on_ldap = || {
        let mut c = vouch();
        c.envs(env.clone()).args(["--dir", s(&dir)]);
        c
    };
    ok(&on_ldap().args(["ldap", "init", "--create-base"]).output().unwrap());
    let no_store: Vec<(String, String)> = env.iter().filter(|(k, _)| k != "VOUCH_STORE").cloned().collect();
    let migrated = ok(&vouch()
        .envs(no_store)
        .args(["--dir", s(&dir), "migrate", "--to", &slapd.url(&slapd.base())])
        .output()
        .unwrap());
    assert!(migrated.contains(&format!("certificates: {n} copied")), "{migrated}");
    let gone: BTreeSet<usize> = (0..n).filter(|i| i % 100 == 3).collect();
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..n).filter(|i| !gone.contains(i)).map(|i| format!("{}\n", name(i))).collect::<String>())
        .unwrap();
    let src = format!("file:{}", s(&inv));
    let expected: BTreeSet<String> = gone.iter().map(|i| name(*i)).collect();
    let plan = json(&on_ldap().args(["reconcile", "--inventory", &src, "-o", "json"]).output().unwrap());
    assert_eq!(plan["store"]["certificates"], n);
    assert_eq!(names_in(&plan, "orphans", Some("certname")), expected);
    let done = json(&on_ldap().args(["reconcile", "--inventory", &src, "--confirm", "-o", "json"]).output().unwrap());
    assert_eq!(done["applied"]["revoked"], gone.len(), "{}", done["applied"]);
    let list: serde_json::Value =
        serde_json::from_str(&ok(&on_ldap().args(["list", "--all", "--format", "json"]).output().unwrap())).unwrap();
    let revoked: BTreeSet<String> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "revoked")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(revoked, expected);
    let pem = ok(&on_ldap().args(["crl"]).output().unwrap());
    let (_, der) = vouch::encoding::pem::find(pem.as_bytes(), &["X509 CRL"]).unwrap();
    let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
    let on_crl: BTreeSet<String> =
        crl.iter_revoked_certificates().map(|r| vouch::encoding::hex(r.raw_serial())).collect();
    let serials: BTreeSet<String> = gone.iter().map(|i| vouch::encoding::hex(&gen_store::serial_of(*i))).collect();
    assert_eq!(on_crl, serials);
    let again = json(&on_ldap().args(["reconcile", "--inventory", &src, "-o", "json"]).output().unwrap());
    assert_eq!(again["changes"], 0, "{again}");
}

/// On a terminal, `-o json` and `-o yaml` carry no progress bar: what the terminal shows is
/// the document alone. (`script` gives the command a pseudo-terminal for stdout and stderr.)
#[test]
fn json_and_yaml_on_a_terminal_carry_no_progress_bars() {
    common::require("script", "util-linux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 3_000);
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..2_990).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let cmd = format!("{} --dir {} reconcile --inventory file:{}", env!("CARGO_BIN_EXE_vouch"), s(&dir), s(&inv));
    // Text on a terminal draws them (and clears them): what the check below would catch.
    let o = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
    let shown = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n");
    assert!(shown.contains('\r') || shown.contains('\u{1b}'), "no progress drawn on a terminal: {shown:?}");
    for (fmt, parse) in [("json", true), ("yaml", false)] {
        let o = std::process::Command::new("script")
            .args(["-qec", &format!("{cmd} -o {fmt}"), "/dev/null"])
            .env_remove("VOUCH_DIR")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let shown = String::from_utf8_lossy(&o.stdout).replace("\r\n", "\n");
        assert!(!shown.contains('\r') && !shown.contains('\u{1b}'), "{fmt}: {shown:?}");
        if parse {
            let v: serde_json::Value = serde_json::from_str(&shown).unwrap_or_else(|e| panic!("{e}: {shown}"));
            assert_eq!(v["orphans"].as_array().unwrap().len(), 10);
        } else {
            let v: serde_json::Value = serde_yaml_ng::from_str(&shown).unwrap_or_else(|e| panic!("{e}: {shown}"));
            assert_eq!(v["orphans"].as_array().unwrap().len(), 10);
        }
    }
}

/// The CA's own certificates (here the administrator's, as `vouch serve` keeps it in
/// DIR/admin) are never orphans: no fleet inventory names them, and revoking them would lock
/// the operator out.
#[test]
fn the_cas_own_certificates_are_never_orphans() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 5);
    std::fs::create_dir_all(dir.join("admin")).unwrap();
    ok(&vouch()
        .args(["--dir", s(&dir), "admin", "new", "vouch-admin"])
        .args(["--cert-out", s(&dir.join("admin/admin_crt.pem")), "--key-out", s(&dir.join("admin/admin_key.pem"))])
        .output()
        .unwrap());
    assert!(dir.join("ca/signed/vouch-admin.pem").exists(), "the administrator's certificate is in the store");
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..5).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert_eq!(plan["changes"], 0, "{plan}");
    let done = json(&reconcile(&dir, &["--inventory", &src, "--confirm", "--force", "-o", "json"]));
    assert_eq!(done["applied"]["revoked"], 0, "{done}");
    let list = String::from_utf8(vouch().args(["--dir", s(&dir), "list", "--all"]).output().unwrap().stdout).unwrap();
    assert!(list.lines().any(|l| l.contains("vouch-admin") && !l.contains("revoked")), "{list}");
}

/// An inventory that writes names as fully qualified DNS names (`web01.example.com.`, in
/// upper case) names the same nodes: none is an orphan, `--confirm` revokes nothing.
#[test]
fn dns_names_with_the_roots_trailing_dot_are_the_nodes_names() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 5);
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..5).map(|i| format!("{}.\n", name(i).to_uppercase())).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert_eq!(plan["changes"], 0, "{plan}");
    assert!(names_in(&plan, "orphans", Some("certname")).is_empty(), "{plan}");
    let done = json(&reconcile(&dir, &["--inventory", &src, "--confirm", "--force", "-o", "json"]));
    assert_eq!(done["applied"]["revoked"], 0, "{done}");
}

/// Administrators made with `vouch admin new NAME` under any name (not only the one in
/// DIR/admin) are no orphans either: the dry run does not offer them, `--confirm` does not
/// revoke them (it revoked every one but `vouch-admin` before).
#[test]
fn administrators_under_any_name_are_never_orphans() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 3);
    for admin in ["alice", "ops"] {
        ok(&vouch()
            .args(["--dir", s(&dir), "admin", "new", admin])
            .args(["--cert-out", s(&tmp.path().join(format!("{admin}.pem")))])
            .args(["--key-out", s(&tmp.path().join(format!("{admin}.key")))])
            .output()
            .unwrap());
    }
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..2).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let plan = json(&reconcile(&dir, &["--inventory", &src, "-o", "json"]));
    assert_eq!(plan["changes"], 1, "only the node left out of the inventory: {plan}");
    let done = json(&reconcile(&dir, &["--inventory", &src, "--confirm", "--force", "-o", "json"]));
    assert_eq!(done["applied"]["revoked"], 1, "{done}");
    let list = String::from_utf8(vouch().args(["--dir", s(&dir), "list", "--all"]).output().unwrap().stdout).unwrap();
    for admin in ["alice", "ops"] {
        assert!(list.lines().any(|l| l.contains(admin) && !l.contains("revoked")), "{admin}: {list}");
    }
}

/// Security review, issue 18 #5: a dry run writes nothing, not even a CRL that is due.
#[test]
fn a_dry_run_does_not_write_a_due_crl() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 3);
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..3).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let crl = dir.join("ca/ca_crl.pem");
    let before = std::fs::read(&crl).ok();
    let later = vouch::encoding::time::format_rfc3339(OffsetDateTime::now_utc() + time::Duration::days(200));
    let inventory = format!("file:{}", inv.display());
    let o = vouch().args(["--dir", s(&dir), "--now", &later, "reconcile", "--inventory", &inventory]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(&crl).ok(), before, "a dry run wrote the CRL");
    // The same with --confirm maintains it (the CRL was due).
    let o = vouch()
        .args(["--dir", s(&dir), "--now", &later, "reconcile", "--inventory", &inventory, "--confirm", "--force"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_ne!(std::fs::read(&crl).ok(), before, "the CRL was not due: the test shows nothing");
}

/// Runs `cmd`, killed after `secs` (a hang is a failure, not a stuck test run).
fn run_within(cmd: &mut std::process::Command, secs: u64) -> Output {
    common::processes::output_within(cmd, std::time::Duration::from_secs(secs))
        .unwrap_or_else(|o| panic!("hung for {secs} s: {}", text(&o)))
}

/// Security review, issue 18 #9: a directory, a link and a FIFO in requests/ are junk: they
/// neither stop nor hang reconcile, and purge removes them without following the link.
#[test]
fn non_regular_files_in_requests_are_junk() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 3);
    let req = dir.join("ca/requests");
    std::fs::create_dir_all(&req).unwrap();
    std::fs::create_dir(req.join("dir.example.test.json")).unwrap();
    let fifo = tmp.path().join("outside.fifo");
    for p in [req.join("fifo.example.test.json"), fifo.clone()] {
        assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success());
    }
    std::os::unix::fs::symlink(&fifo, req.join("link.example.test.json")).unwrap();
    std::os::unix::fs::symlink(&fifo, req.join("link.example.test.pem")).unwrap();
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, (0..3).map(|i| format!("{}\n", name(i))).collect::<String>()).unwrap();
    let src = format!("file:{}", s(&inv));
    let o = run_within(vouch().args(["--dir", s(&dir), "reconcile", "--inventory", &src, "-o", "json"]), 60);
    let v = json(&o);
    let junk: Vec<String> = v["junk"].as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap().into()).collect();
    assert_eq!(junk.len(), 4, "{v}");
    let mut args = vec!["--dir", s(&dir), "purge"];
    args.extend(junk.iter().map(String::as_str));
    args.push("--confirm");
    let o = run_within(vouch().args(&args), 60);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&req).unwrap().count(), 0, "{}", text(&o));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the link's target stays");
}

/// Security review, issue 18 #4: an inventory without newlines (`/dev/zero`) is an error
/// naming the line, never a 2 GB allocation; a command's such output is stopped.
#[test]
fn an_inventory_line_too_long_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 2);
    for src in ["file:/dev/zero", "cmd:cat /dev/zero"] {
        let o = run_within(vouch().args(["--dir", s(&dir), "reconcile", "--inventory", src]), 60);
        assert_eq!(o.status.code(), Some(2), "{src}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("line 1 is longer than 4096 bytes"), "{src}: {err}");
    }
    // A file whose third line is too long: named.
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, format!("{}\n{}\n{}\n", name(0), name(1), "x".repeat(5000))).unwrap();
    let o = reconcile(&dir, &["--inventory", &format!("file:{}", s(&inv))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 3 is longer"), "{}", text(&o));
}

/// Security review, issue 18 #10: inventory names are printed with control characters escaped.
#[test]
fn control_characters_in_inventory_names_are_escaped_in_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 1);
    let inv = tmp.path().join("inv.txt");
    std::fs::write(&inv, format!("{}\nevil\x1b[2J\x07name\n", name(0))).unwrap();
    let o = reconcile(&dir, &["--inventory", &format!("file:{}", s(&inv))]);
    let out = ok(&o);
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
    assert!(out.contains("evil\\u{1b}[2j\\u{7}name"), "{out}");
}

/// Security review, issue 18 #6: a `cmd:` program that never ends (or leaves a background
/// child holding its output) is killed after --inventory-timeout; one that writes much to
/// stderr is read to its end (not killed by a closed pipe).
#[test]
fn an_inventory_command_is_timed_out_and_its_stderr_drained() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 2);
    let script = |n: &str, body: &str| {
        let p = tmp.path().join(n);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        format!("cmd:/bin/sh {}", s(&p))
    };
    let names = format!("echo {}; echo {}", name(0), name(1));
    let hangs = script("hangs.sh", &format!("{names}; sleep 300"));
    let background = script("bg.sh", &format!("{names}; sleep 300 & exit 0"));
    for src in [&hangs, &background] {
        let t = std::time::Instant::now();
        let o = run_within(
            vouch().args(["--dir", s(&dir), "reconcile", "--inventory", src, "--inventory-timeout", "2s"]),
            60,
        );
        assert_eq!(o.status.code(), Some(2), "{src}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("did not finish within 2s"), "{src}: {}", text(&o));
        assert!(t.elapsed() < std::time::Duration::from_secs(30), "{src}: {:?}", t.elapsed());
    }
    let noisy = script("noisy.sh", &format!("head -c 300000 /dev/zero | tr '\\0' x >&2; {names}"));
    let o = run_within(vouch().args(["--dir", s(&dir), "reconcile", "--inventory", &noisy, "-o", "json"]), 60);
    let v = json(&o);
    assert_eq!(v["inventory"]["names"], 2, "{v}");
    // A failing one still says (the end of) what it wrote.
    let fails = script("fails.sh", "head -c 300000 /dev/zero | tr '\\0' x >&2; echo the-last-words >&2; exit 3");
    let o = run_within(vouch().args(["--dir", s(&dir), "reconcile", "--inventory", &fails]), 60);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("status 3") && err.contains("the-last-words") && err.len() < 20_000, "{}", err.len());
}
