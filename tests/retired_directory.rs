//! A data directory on its way to the shared store, against the real vouch binary: a
//! `--store` command beside a `vouch serve` still on the file store, the replay journal's
//! own marker, a `vouch migrate` cut off after it marked the directory, a `vouch serve`
//! started while a migrate holds the directory, `vouch conductor new` on a marked
//! directory, and the guard on a master's service certname when its certificate file is gone.

mod common;

use common::agents::{csr_for, p256, vouched};
use common::ldap_lab::{enroll, openldap_store, store_env, Directory, Master};
use common::processes::{Wait, Watchdog};
use common::{ca_id, ok, s, snapshot, text, vouch};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A CA in `d` (`vouch ca init`) with the conductor credential `vouch serve` would make
/// (`d/conductor/`), for [`vouched`].
fn ca_with_conductor(d: &Path) {
    ok(&vouch().args(["ca", "init", "--dir", s(d)]).output().unwrap());
    let c = d.join("conductor");
    std::fs::create_dir(&c).unwrap();
    ok(&vouch()
        .args(["--dir", s(d), "conductor", "new", "cloud1"])
        .args(["--cert-out", s(&c.join("conductor_crt.pem")), "--key-out", s(&c.join("conductor_key.pem"))])
        .output()
        .unwrap());
}

/// Found by review of the shared-store marker: `vouch --store URL list` (any command opened on
/// a shared store) beside a `vouch serve` running on the same directory's file store
/// registered the directory's CA in the fleet and marked its file store retired under that
/// serve, which then answered every vouched request with 500. Refused now, writing nothing;
/// beside a serve on the shared store (the directory marked), the same command works.
#[test]
fn a_store_command_beside_a_file_store_serve_is_refused_and_writes_nothing() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2) = (tmp.path().join("m1"), tmp.path().join("m2"));
    let m1 = Master::start_env(&d1, "ca1.test", &[], &[]);
    let out = vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "list", "--all"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        err.contains("another vouch serve is running on") && err.contains("vouch migrate") && err.contains("nothing"),
        "{}",
        text(&out)
    );
    assert!(!d1.join("ca/MOVED-TO-SHARED-STORE").exists(), "the served directory was marked");
    let id1 = ca_id(&d1);
    assert!(!slapd.has_dn(&format!("vouchCa={id1},ou=cas,{}", slapd.base())), "its CA was registered in the fleet");
    // The serve still issues what a conductor vouched for.
    let name = "web01.example.test";
    let (put, why, cert) = enroll(&m1, name, &csr_for(name, &vouched(&d1, name, "classes:\n  - role::web\n"), &p256()));
    assert_eq!(put, 200, "{why}\n{}", m1.log());
    assert!(cert.is_some(), "{name} was not issued: {}", m1.log());
    drop(m1);
    // A serve on the shared store marked its directory: a --store command beside it works.
    let m2 = Master::start(&slapd, &d2, "ca2.test");
    ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d2), "list", "--all"]).output().unwrap());
    drop(m2);
}

/// Found by review of the shared-store marker: the replay journal's own marker was read as
/// text, any error counting as no marker (a directory there: the hook granted from a retired
/// journal), and read whole (a FIFO there: the hook hung). It is read as the data directory's.
#[test]
fn a_journal_marker_that_is_no_regular_file_refuses_the_hook_and_never_hangs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ca_with_conductor(&d);
    let journal = d.join("replay");
    std::fs::create_dir_all(&journal).unwrap();
    let marker = journal.join("MOVED-TO-SHARED-STORE");
    for kind in ["directory", "fifo"] {
        match kind {
            "directory" => std::fs::create_dir(&marker).unwrap(),
            _ => {
                ok(&std::process::Command::new("mkfifo").arg(&marker).output().unwrap());
            }
        }
        let name = format!("web-{kind}.example.test");
        let csr = csr_for(&name, &vouched(&d, &name, "classes:\n  - role::web\n"), &p256());
        let mut child = vouch()
            .args(["--dir", s(&d), "autosign", &name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _dog = Watchdog::kill_after(child.id() as i32, "vouch autosign", Duration::from_secs(60));
        {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(&csr);
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.code().is_some(), "{kind}: the hook hung (killed): {}", text(&out));
        assert_ne!(out.status.code(), Some(0), "{kind}: the hook granted from a retired journal: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("retired"), "{kind}: {}", text(&out));
        match std::fs::symlink_metadata(&marker).unwrap().is_dir() {
            true => std::fs::remove_dir(&marker).unwrap(),
            false => std::fs::remove_file(&marker).unwrap(),
        }
    }
}

/// The replay journal entries (file names: 64 hex digits) under `journal`.
fn journal_entries(journal: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for bucket in std::fs::read_dir(journal).unwrap().flatten().filter(|b| b.path().is_dir()) {
        for e in std::fs::read_dir(bucket.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                out.push(name);
            }
        }
    }
    out
}

/// Found by review of the shared-store marker: a `vouch migrate` that failed after it marked
/// the directory (the LDAP connection lost while it copied the replay journal) said
/// "nothing was issued or changed": the directory is marked (every command without --store
/// refuses it), and the same migrate, run again, finishes the copy.
#[test]
fn a_migrate_cut_off_after_it_marked_the_directory_says_so_and_how_to_finish() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ca_with_conductor(&d);
    let name = "web02.example.test";
    let csr = tmp.path().join("web02.csr");
    std::fs::write(&csr, csr_for(name, &vouched(&d, name, "classes:\n  - role::web\n"), &p256())).unwrap();
    ok(&vouch().args(["--dir", s(&d), "sign", "--csr", s(&csr)]).output().unwrap());
    let entries = journal_entries(&d.join("replay"));
    assert_eq!(entries.len(), 1, "{entries:?}");
    let env: Vec<(String, String)> = store_env(&slapd).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect();
    let base = slapd.base();
    // Cut at the first add whose DN holds this entry's key, never sent.
    let dn_part = format!("vouchKey={}", entries[0]);
    let cut = common::ldap_proxy::cutting_proxy(slapd.port(), move |msg| {
        common::ldap_proxy::request_dn(msg, 0x68).is_some_and(|dn| dn.contains(&dn_part))
    });
    let via = format!("ldap://127.0.0.1:{cut}/{}", base.replace(',', "%2C").replace('=', "%3D"));
    let first = vouch().envs(env.clone()).args(["--dir", s(&d), "migrate", "--to", &via]).output().unwrap();
    let err = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(75), "the LDAP server went away: {}", text(&first));
    assert!(d.join("ca/MOVED-TO-SHARED-STORE").exists(), "{}", text(&first));
    assert!(
        err.contains("MOVED-TO-SHARED-STORE")
            && err.contains(&format!("run the same `vouch migrate --to {via}` again"))
            && !err.contains("nothing was issued or changed"),
        "{}",
        text(&first)
    );
    let url = slapd.url(&base);
    let again = ok(&vouch().envs(env).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap());
    assert!(again.contains("replay-journal entries: 1 copied"), "{again}");
}

/// Found by review of the shared-store marker: `vouch serve` refused while a `vouch migrate`
/// holds the directory said "another vouch serve is running". The holder records what it is
/// beside the lock; without that record (removed, from an older vouch) the refusal names no
/// command it cannot know.
#[test]
fn a_serve_refused_while_a_migrate_holds_the_directory_names_the_migrate() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    // The file store's lock, held here: the migrate takes the directory, then waits for it.
    let store_lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(d.join("ca/.lock"));
    let store_lock = store_lock.unwrap();
    // SAFETY: flock(2) on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&store_lock), libc::LOCK_EX) }, 0);
    let migrate = vouch()
        .args(["--dir", s(&d), "migrate", "--to", "ldap://127.0.0.1:1/dc%3Dexample%2Cdc%3Dtest"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _dog = Watchdog::kill_after(migrate.id() as i32, "vouch migrate", Duration::from_secs(120));
    // The migrate holds the data directory (its flock, as /proc/locks lists it: never taken
    // here, which would refuse the migrate).
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&d).unwrap()).to_string();
    let pid = migrate.id().to_string();
    let held = || {
        std::fs::read_to_string("/proc/locks").unwrap().lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"FLOCK")
                && f.get(4) == Some(&pid.as_str())
                && f.get(5).is_some_and(|i| i.ends_with(&format!(":{inode}")))
        })
    };
    Wait::up_to(Duration::from_secs(60)).until("vouch migrate holds the data directory", held);
    let refused = |what: &str| -> String {
        let out = common::serve_cmd(&d).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{what}: {}", text(&out));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = refused("recorded");
    assert!(err.contains("a vouch migrate is running on") && !err.contains("vouch serve is running"), "{err}");
    std::fs::remove_file(d.join("serve.lock")).unwrap();
    let err = refused("no record");
    assert!(err.contains("another vouch process (a vouch serve, or a vouch migrate)"), "{err}");
    drop(store_lock);
    let out = migrate.wait_with_output().unwrap();
    assert!(out.status.code().is_some(), "vouch migrate hung: {}", text(&out));
}

/// Found by review of the shared-store marker: `vouch conductor new` issued (and recorded in
/// the root's list) on a directory whose master moved to a shared store, without --store,
/// where every other command that opens the CA is refused.
#[test]
fn conductor_new_on_a_marked_directory_is_refused_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    std::fs::write(d.join("ca/MOVED-TO-SHARED-STORE"), "ldap://127.0.0.1/ou=vouch,dc=example,dc=test\n").unwrap();
    let before = snapshot(&d);
    let (cert, key) = (tmp.path().join("c2.pem"), tmp.path().join("c2.key"));
    let out = vouch()
        .args(["--dir", s(&d), "conductor", "new", "cloud2", "--cert-out", s(&cert), "--key-out", s(&key)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("file store is retired"), "{}", text(&out));
    assert!(!cert.exists() && !key.exists(), "a conductor credential was written");
    assert_eq!(snapshot(&d), before, "the data directory changed");
}

/// `openssl x509 -noout -serial` of the certificate in `pem` (`serial=…`, as an operator copies it).
fn serial_of(pem: &Path) -> String {
    let out = std::process::Command::new("openssl").args(["x509", "-noout", "-serial", "-in", s(pem)]).output();
    ok(&out.expect("openssl")).trim().to_string()
}

fn revoked_section(listed: &str) -> &str {
    listed.split("Revoked Certificates:").nth(1).unwrap_or_else(|| panic!("no revoked section: {listed}")).trim()
}

/// Found by review of the shared-store marker: the guard on a master's own service certname
/// read its name from `DIR/server/server_crt.pem` only: that file missing (or unreadable),
/// `vouch revoke`, `revoke --serial` and `clean` of the certificate the running serve presents
/// went through without --force.
#[test]
fn the_service_certname_needs_force_when_its_certificate_file_is_missing_or_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("m");
    let service = "svc.example.test";
    drop(Master::start_env(&d, service, &[], &[]));
    let file: PathBuf = d.join("server/server_crt.pem");
    let serial = serial_of(&file);
    std::fs::remove_file(&file).unwrap();
    for (state, args) in [
        ("missing", &["revoke", service][..]),
        ("missing", &["revoke", "--serial", serial.as_str()]),
        ("missing", &["clean", service]),
        ("a directory", &["revoke", service]),
    ] {
        if state == "a directory" {
            std::fs::create_dir(&file).unwrap();
        }
        let out = vouch().args(["--dir", s(&d)]).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{state}: {args:?}: {}", text(&out));
        assert!(err.contains("service certificate") && err.contains("--force"), "{state}: {args:?}: {}", text(&out));
    }
    let listed = ok(&vouch().args(["--dir", s(&d), "list", "--all"]).output().unwrap());
    assert_eq!(revoked_section(&listed), "(none)", "{listed}");
    ok(&vouch().args(["--dir", s(&d), "revoke", "--force", service]).output().unwrap());
}
