//! `vouch import --puppet-cadir`: an existing Puppet CA taken over. The fixtures were made
//! by Debian's puppetserver 7.9.5 (`puppetserver ca setup`, then four agents bootstrapped
//! with `puppet ssl bootstrap`, agent3 revoked, agent4 cleaned); the defective copies are
//! named by their defect. The end-to-end test runs a real Puppet Server CA, enrolls a real
//! agent, stops the server, imports its CA directory, and starts `vouch serve` on the same
//! name and port: the same agent verifies unchanged, its certificate is listed and revoked
//! through vouch, and a new node enrolls vouched for by a conductor.

mod common;

use common::processes::{free_port, read, start_puppetserver};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn import(dir: &Path, cadir: &Path) -> Output {
    vouch().args(["--dir", s(dir), "import", "--puppet-cadir", s(cadir)]).output().unwrap()
}

fn openssl(args: &[&str]) -> Output {
    require("openssl", "openssl");
    Command::new("openssl").args(args).output().unwrap()
}

/// `openssl verify` of `cert` against the data directory's bundle and both its CRLs (the
/// whole chain checked for revocation, as a Puppet agent does).
fn verify_with_crls(dir: &Path, cert: &Path) -> Output {
    let ca = dir.join("ca");
    let crls = dir.join("crls.pem");
    let mut both = std::fs::read_to_string(ca.join("ca_crl.pem")).unwrap();
    both.push_str(&std::fs::read_to_string(ca.join("root_crl.pem")).unwrap());
    std::fs::write(&crls, both).unwrap();
    openssl(&["verify", "-crl_check_all", "-CRLfile", s(&crls), "-CAfile", s(&ca.join("ca_bundle.pem")), s(cert)])
}

/// Every file under `dir` with its content, to show nothing changed.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Each defective Puppet CA directory is refused with its own code, and nothing is written:
/// the data directory is not even created.
#[test]
fn each_defective_puppet_ca_directory_is_refused_by_name_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, code) in [
        ("puppet-cadir-missing-ca-key", "puppet-ca-incomplete"),
        ("puppet-cadir-ca-key-not-matching", "puppet-ca-key-mismatch"),
        ("puppet-cadir-inventory-missing-a-signed-certificate", "puppet-ca-inventory-disagrees"),
        ("puppet-cadir-crl-truncated", "puppet-ca-unreadable"),
        ("puppet-cadir-serial-behind-inventory", "puppet-ca-serial-behind"),
        ("puppet-cadir-signed-under-another-name", "puppet-ca-signed-invalid"),
    ] {
        let dir = tmp.path().join(name);
        let o = import(&dir, &fixture(name));
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains(&format!("[{code}]")), "{name}: not {code}: {}", text(&o));
        assert!(text(&o).contains("nothing was written"), "{name}: {}", text(&o));
        assert!(!dir.exists(), "{name}: {} was created", dir.display());
    }
}

/// A Puppet CA key others could read where it was: imported (vouch's copy 0600), with a
/// warning that names the file and its mode.
#[test]
fn a_puppet_ca_key_readable_by_others_is_imported_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let cadir = tmp.path().join("cadir");
    let copied = Command::new("cp").args(["-a", s(&fixture("puppet-cadir")), s(&cadir)]).status().unwrap();
    assert!(copied.success());
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    mode(&cadir.join("ca_key.pem"), 0o644);
    mode(&cadir.join("root_key.pem"), 0o600);
    let dir = tmp.path().join("vouch");
    let o = import(&dir, &cadir);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ca_key.pem was readable or writable beyond its owner (mode 0644)"), "{err}");
    assert!(!err.contains("root_key.pem was"), "{err}");
    let kept = std::fs::metadata(dir.join("ca/ca_key.pem")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&kept.permissions()) & 0o777, 0o600);
    // Kept to its owner: no warning.
    mode(&cadir.join("ca_key.pem"), 0o600);
    let o = import(&tmp.path().join("vouch2"), &cadir);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("beyond its owner"), "{}", text(&o));
}

/// `--puppet-cadir` given a file, a device, a loop of links or nothing at all: refused by its
/// own code with the hint to name the CA directory itself, nothing written.
#[test]
fn a_puppet_cadir_that_is_no_directory_is_refused_by_its_own_code() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let (l1, l2) = (tmp.path().join("loop1"), tmp.path().join("loop2"));
    std::os::unix::fs::symlink(&l2, &l1).unwrap();
    std::os::unix::fs::symlink(&l1, &l2).unwrap();
    for cadir in [file, PathBuf::from("/dev/null"), l1, tmp.path().join("absent")] {
        let dir = tmp.path().join("vouch");
        let o = import(&dir, &cadir);
        assert_eq!(o.status.code(), Some(2), "{}: {}", cadir.display(), text(&o));
        assert!(text(&o).contains("[puppet-ca-directory-unusable]"), "{}: {}", cadir.display(), text(&o));
        assert!(text(&o).contains("puppet config print cadir"), "{}", text(&o));
        assert!(!dir.exists(), "{} was created", dir.display());
    }
}

/// A FIFO, a directory or a device in place of one of the Puppet CA directory's files: the
/// import waited on a FIFO for ever (no output); now each is refused at once by name.
#[test]
fn a_fifo_or_a_directory_in_place_of_a_puppet_ca_file_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    for (file, how) in [("inventory.txt", "fifo"), ("serial", "dir"), ("ca_crl.pem", "dev")] {
        let cadir = tmp.path().join(format!("cadir-{how}"));
        assert!(Command::new("cp").arg("-a").arg(fixture("puppet-cadir")).arg(&cadir).status().unwrap().success());
        let p = cadir.join(file);
        std::fs::remove_file(&p).unwrap();
        match how {
            "fifo" => assert!(Command::new("mkfifo").arg(&p).status().unwrap().success()),
            "dir" => std::fs::create_dir(&p).unwrap(),
            _ => std::os::unix::fs::symlink("/dev/zero", &p).unwrap(),
        }
        let dir = tmp.path().join(format!("vouch-{how}"));
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.args(["--dir", dir.to_str().unwrap(), "import", "--puppet-cadir", cadir.to_str().unwrap()]);
        let o = common::processes::output_within(&mut c, std::time::Duration::from_secs(60))
            .unwrap_or_else(|o| panic!("{file} as a {how}: the import did not end: {}", text(&o)));
        assert_eq!(o.status.code(), Some(2), "{file} as a {how}: {}", text(&o));
        assert!(text(&o).contains("[puppet-ca-unreadable]") && text(&o).contains(file), "{how}: {}", text(&o));
        assert!(!dir.exists(), "{how}: {} was created", dir.display());
    }
}

/// The inventory is unsigned text: a cleaned certificate's revocation (serial 05, no longer
/// in `signed/`) took its expiry from it, so an inventory dated 2000 took the serial off
/// vouch's first CRL, and a name carrying `not_after=` went into the revocation log as a
/// field. Now only a certificate in `signed/` tells an expiry, and only a certname names one.
#[test]
fn an_inventory_line_never_takes_a_revocation_off_the_crl() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, edit) in [
        (
            "0x0005 2026-11-28T07:01:32UTC 2031-11-28T07:01:32UTC",
            "0x0005 2000-01-01T00:00:00UTC 2001-01-01T00:00:00UTC",
        ),
        ("/CN=agent4.example.test", "/CN=agent4.example.test not_after=2001-01-01T00:00:00Z"),
    ]
    .iter()
    .enumerate()
    {
        let cadir = tmp.path().join(format!("cadir{i}"));
        assert!(Command::new("cp").arg("-a").arg(fixture("puppet-cadir")).arg(&cadir).status().unwrap().success());
        let inv = cadir.join("inventory.txt");
        let lines = std::fs::read_to_string(&inv).unwrap();
        assert!(lines.contains(edit.0), "the fixture changed: {lines}");
        std::fs::write(&inv, lines.replace(edit.0, edit.1)).unwrap();
        let dir = tmp.path().join(format!("vouch{i}"));
        let o = import(&dir, &cadir);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let crl = openssl(&["crl", "-noout", "-text", "-in", s(&dir.join("ca/ca_crl.pem"))]);
        let listed = String::from_utf8_lossy(&crl.stdout).lines().any(|l| l.trim() == "Serial Number: 05");
        assert!(listed, "{}: serial 05 left vouch's CRL: {}", edit.1, String::from_utf8_lossy(&crl.stdout));
    }
}

/// The fixture imported: every signed certificate listed, Puppet's revocations on vouch's
/// CRL (numbered above Puppet's), the chain and CRLs verified by openssl, the store
/// consistent, a Puppet certificate revocable, and a second import refused with nothing changed.
#[test]
fn a_puppet_ca_directory_is_imported_whole_listed_revocable_and_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let cadir = fixture("puppet-cadir");
    let out = ok(&import(&dir, &cadir));
    assert!(out.contains("3 certificates") || out.contains("4 certificates"), "{out}");
    assert!(out.contains("2 revocations"), "{out}");
    let list = ok(&vouch().args(["--dir", s(&dir), "list", "--all", "--format", "json"]).output().unwrap());
    let list: Vec<serde_json::Value> = serde_json::from_str(&list).unwrap();
    let state = |name: &str| {
        list.iter().find(|v| v["name"] == name).map(|v| v["state"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(state("agent1.example.test").as_deref(), Some("signed"), "{list:?}");
    assert_eq!(state("agent2.example.test").as_deref(), Some("signed"), "{list:?}");
    assert_eq!(state("agent3.example.test").as_deref(), Some("revoked"), "{list:?}");
    // The CRL is vouch's now, numbered above Puppet's, listing Puppet's revocations (agent3,
    // and agent4 whose certificate Puppet cleaned).
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    let puppet_crl = ok(&openssl(&["crl", "-in", s(&cadir.join("ca_crl.pem")), "-noout", "-crlnumber"]));
    let number = |t: &str| {
        let n = t.lines().find_map(|l| l.trim().strip_prefix("crlNumber=")).unwrap().trim().to_string();
        u128::from_str_radix(n.trim_start_matches("0x"), 16).unwrap()
    };
    let ours = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-crlnumber"]));
    assert!(number(&ours) > number(&puppet_crl), "{ours} vs Puppet's {puppet_crl}");
    for serial in ["Serial Number: 02", "Serial Number: 05"] {
        assert!(crl.contains(serial), "{serial} not on vouch's CRL:\n{crl}");
    }
    ok(&verify_with_crls(&dir, &dir.join("ca/signed/agent1.example.test.pem")));
    let revoked = verify_with_crls(&dir, &cadir.join("signed/agent3.example.test.pem"));
    assert!(!revoked.status.success() && text(&revoked).contains("certificate revoked"), "{}", text(&revoked));
    let verify = ok(&vouch().args(["--dir", s(&dir), "store", "verify"]).output().unwrap());
    assert!(verify.contains("no findings"), "{verify}");

    // Imported twice: refused, nothing changed.
    let before = snapshot(&dir);
    let again = import(&dir, &cadir);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
    assert!(before == snapshot(&dir), "the second import changed the data directory");

    // A Puppet certificate revoked through vouch: on the next CRL, openssl refuses it.
    ok(&vouch().args(["--dir", s(&dir), "revoke", "agent1.example.test"]).output().unwrap());
    let after = verify_with_crls(&dir, &dir.join("ca/signed/agent1.example.test.pem"));
    assert!(!after.status.success() && text(&after).contains("certificate revoked"), "{}", text(&after));
}

/// An import stopped after it wrote the policy and before `ca/` appeared leaves the default
/// policy alone: the next import takes it up and completes. Any other policy is still refused.
#[test]
fn an_import_stopped_before_its_ca_appeared_is_taken_up_again() {
    let tmp = tempfile::tempdir().unwrap();
    let cadir = fixture("puppet-cadir");
    let done = tmp.path().join("done");
    ok(&import(&done, &cadir));
    let default_policy = std::fs::read(done.join("policy.toml")).unwrap();
    // What the stopped import left: the data directory (0700) and the default policy.
    let dir = tmp.path().join("stopped");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(dir.join("policy.toml"), &default_policy).unwrap();
    let out = ok(&import(&dir, &cadir));
    assert!(out.contains("2 revocations"), "{out}");
    assert_eq!(std::fs::read(dir.join("policy.toml")).unwrap(), default_policy);
    let verify = ok(&vouch().args(["--dir", s(&dir), "store", "verify"]).output().unwrap());
    assert!(verify.contains("no findings"), "{verify}");
    // A policy of the operator's own is never taken for one: refused, kept, no CA made.
    let own = tmp.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut edited = default_policy.clone();
    edited.extend_from_slice(b"# mine\n");
    std::fs::write(own.join("policy.toml"), &edited).unwrap();
    let out = import(&own, &cadir);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("already exists"), "{}", text(&out));
    assert_eq!(std::fs::read(own.join("policy.toml")).unwrap(), edited);
    assert!(!own.join("ca").exists());
}

/// The hidden staging directories (`.ca.tmp-…`) in `dir`.
fn staging_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".ca.tmp-"))
        .collect()
}

/// An import killed after it staged `ca/` (copies of the CA's keys, in a hidden directory
/// beside it) and before the rename: the staging directory stayed, and neither the next import
/// nor `vouch store verify` said a word of it. The next import now removes it (its process is
/// gone, it is this user's) and says so; `vouch store verify` names one it finds.
#[test]
fn a_killed_imports_staging_directory_is_removed_by_the_next_import_and_named_by_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let cadir = fixture("puppet-cadir");
    let dir = tmp.path().join("vouch");
    let mut killed = vouch();
    killed.env("VOUCH_TEST_ABORT_AT", "ca:staged").args(["--dir", s(&dir), "import", "--puppet-cadir", s(&cadir)]);
    let o = killed.output().unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    let left = staging_dirs(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].join("ca_key.pem").exists() && !dir.join("ca").exists());
    // Before the re-run: a command on the directory says a stopped run left it, and that
    // the same import again finishes it (not "run 'vouch ca init'", an unrelated CA).
    for args in [&["list"][..], &["store", "verify"]] {
        let o = vouch().args(["--dir", s(&dir)]).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&left[0].display().to_string()) && err.contains("again"), "{args:?}: {err}");
        assert!(!err.contains("run 'vouch ca init"), "{args:?}: {err}");
    }
    let o = import(&dir, &cadir);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("removed {}", left[0].display())), "{err}");
    assert!(staging_dirs(&dir).is_empty(), "{:?}", staging_dirs(&dir));
    // One left by a stopped run (here: a ca init killed the same way, moved in): named.
    let other = tmp.path().join("other");
    let mut init = vouch();
    init.env("VOUCH_TEST_ABORT_AT", "ca:staged").args(["--dir", s(&other), "ca", "init"]);
    assert!(!init.output().unwrap().status.success());
    let stray = staging_dirs(&other).pop().unwrap();
    let moved = dir.join(stray.file_name().unwrap());
    std::fs::rename(&stray, &moved).unwrap();
    let o = vouch().args(["--dir", s(&dir), "store", "verify"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains(&format!("{}: the staging directory", moved.display())), "{}", text(&o));
    assert!(text(&o).contains("copies of the CA's private keys"), "{}", text(&o));
    let json = vouch().args(["--dir", s(&dir), "store", "verify", "--format", "jsonl"]).output().unwrap();
    assert!(String::from_utf8_lossy(&json.stdout).contains("staging-left-over"), "{}", text(&json));
}

/// `--store ldap://…` (or VOUCH_STORE) with an import: it was silently ignored (the import
/// went into the file store, nothing into LDAP, rc 0). Refused now, naming the two steps.
#[test]
fn an_import_into_a_shared_store_is_refused_naming_the_two_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let url = "ldap://127.0.0.1:1/ou=vouch,dc=example,dc=com";
    let dir = tmp.path().join("vouch");
    let by_flag = vouch()
        .args(["--dir", s(&dir), "--store", url, "import", "--puppet-cadir", s(&fixture("puppet-cadir"))])
        .output()
        .unwrap();
    let mut env = vouch();
    env.env("VOUCH_STORE", url).args(["--dir", s(&dir), "import", "--puppet-cadir", s(&fixture("puppet-cadir"))]);
    for o in [by_flag, env.output().unwrap()] {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(url) && text(&o).contains("migrate --to URL"), "{}", text(&o));
        assert!(!dir.exists(), "{} was created", dir.display());
    }
}

/// A `ca_key.pem` owned by another user (here `nobody`, mode 000): that user can read it
/// whatever its mode, and it was imported without a word. Now the warning a 0644 key gets.
#[test]
fn a_puppet_ca_key_another_user_owns_is_imported_with_a_warning() {
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test chowns a file to nobody: run the suite as root");
    let tmp = tempfile::tempdir().unwrap();
    let cadir = tmp.path().join("cadir");
    assert!(Command::new("cp").arg("-a").arg(fixture("puppet-cadir")).arg(&cadir).status().unwrap().success());
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap();
    mode(&cadir.join("root_key.pem"), 0o600);
    mode(&cadir.join("ca_key.pem"), 0o000);
    std::os::unix::fs::chown(cadir.join("ca_key.pem"), Some(65534), None).unwrap();
    let o = import(&tmp.path().join("vouch"), &cadir);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ca_key.pem belonged to another user (nobody, uid 65534"), "{err}");
    assert!(err.contains("make a new CA"), "{err}");
    assert!(!err.contains("root_key.pem"), "{err}");
}

/// A copy of the fixture CA directory in `tmp/name`.
fn cadir_copy(tmp: &Path, name: &str) -> PathBuf {
    let cadir = tmp.join(name);
    assert!(Command::new("cp").arg("-a").arg(fixture("puppet-cadir")).arg(&cadir).status().unwrap().success());
    cadir
}

/// A `ca_key.pem` the importing user may not read (EACCES): it was reported as
/// `puppet-ca-unreadable` with the hint "the file is damaged or cut short"; it is named by its
/// path with the system's error, as a permission to fix. Run as `nobody` (root reads any file).
#[test]
fn a_key_this_user_may_not_read_is_named_by_its_path_not_as_damaged() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test runs vouch as nobody: run the suite as root");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cadir = cadir_copy(tmp.path(), "cadir");
    std::fs::set_permissions(cadir.join("ca_key.pem"), std::fs::Permissions::from_mode(0o600)).unwrap();
    // A copy of the binary nobody may run, wherever the checkout lives.
    let bin = tmp.path().join("vouch-for-nobody");
    std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = (0..200)
        .find_map(|_| {
            let mut c = Command::new(&bin);
            c.uid(65534).gid(65534).env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY").env_remove("VOUCH_STORE");
            c.args(["--dir", s(&tmp.path().join("vouch")), "import", "--puppet-cadir", s(&cadir)]);
            match c.output() {
                // Another test's child may hold the copy open for writing until it execs.
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    None
                }
                other => Some(other.unwrap()),
            }
        })
        .expect("the copy of vouch stayed busy");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[puppet-ca-permission-denied]"), "{err}");
    assert!(
        err.contains(&format!("{} cannot be read: Permission denied (os error 13)", s(&cadir.join("ca_key.pem")))),
        "{err}"
    );
    assert!(err.contains("hint: this user may not read that file"), "{err}");
    assert!(!err.contains("damaged"), "{err}");
    assert!(!tmp.path().join("vouch").exists());
}

/// A `ca_crt.pem` holding only the root (Puppet's CA certificate, the intermediate, cut away):
/// it was a generic `puppet-ca-key-mismatch` ("ca_key.pem is not the private key of
/// ca_crt.pem"); it is named as the root alone, with root_key.pem beside it or without.
#[test]
fn a_ca_crt_holding_only_the_root_is_named_so() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, keep_root_key) in [true, false].into_iter().enumerate() {
        let cadir = cadir_copy(tmp.path(), &format!("cadir{i}"));
        let crt = std::fs::read_to_string(cadir.join("ca_crt.pem")).unwrap();
        let root = crt.match_indices("-----BEGIN CERTIFICATE-----").nth(1).map(|(at, _)| &crt[at..]).unwrap();
        std::fs::write(cadir.join("ca_crt.pem"), root).unwrap();
        if !keep_root_key {
            std::fs::remove_file(cadir.join("root_key.pem")).unwrap();
        }
        let dir = tmp.path().join(format!("vouch{i}"));
        let o = import(&dir, &cadir);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("[puppet-ca-intermediate-missing]"), "root key {keep_root_key}: {}", text(&o));
        assert!(text(&o).contains("ca_crt.pem holds only the root (CN=Puppet Root CA"), "{}", text(&o));
        assert!(text(&o).contains("hint: copy ca_crt.pem whole"), "{}", text(&o));
        assert!(!dir.exists());
    }
}

/// The `serial` file's messages: `0x01` was shown as `0x0x01`, a 70-digit serial was "not a
/// hexadecimal number", and no number at all (`-5`, empty) was puppet-ca-serial-behind; it is
/// puppet-ca-unreadable, with what is wrong in it.
#[test]
fn the_serial_files_defects_are_named_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let long = "f".repeat(70);
    for (i, (serial, code, says)) in [
        ("0x01\n", "puppet-ca-serial-behind", "it says the next serial is 0x01, but"),
        ("-5\n", "puppet-ca-unreadable", "\"-5\" is not a hexadecimal number"),
        ("\n", "puppet-ca-unreadable", "it is empty"),
        (long.as_str(), "puppet-ca-unreadable", "it holds 70 hexadecimal digits"),
    ]
    .into_iter()
    .enumerate()
    {
        let cadir = tmp.path().join(format!("cadir{i}"));
        assert!(Command::new("cp").arg("-a").arg(fixture("puppet-cadir")).arg(&cadir).status().unwrap().success());
        std::fs::write(cadir.join("serial"), serial).unwrap();
        let o = import(&tmp.path().join(format!("vouch{i}")), &cadir);
        assert_eq!(o.status.code(), Some(2), "{serial:?}: {}", text(&o));
        assert!(text(&o).contains(&format!("[{code}]")) && text(&o).contains(says), "{serial:?}: {}", text(&o));
        assert!(!text(&o).contains("0x0x"), "{}", text(&o));
    }
}

/// The layout Debian's puppetserver 7.9.5 makes on its first start without `puppetserver ca
/// setup`: one self-signed CA, no root key. It is imported as its own root; the store agrees
/// with itself, openssl verifies its chain and CRL, and conductors cannot be made here.
#[test]
fn a_self_signed_puppet_ca_is_imported_as_its_own_root_without_a_conductor_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let o = import(&dir, &fixture("puppet-cadir-self-signed-ca"));
    assert!(o.status.success() && text(&o).contains("cannot make conductors"), "{}", text(&o));
    let verify = ok(&vouch().args(["--dir", s(&dir), "store", "verify"]).output().unwrap());
    assert!(verify.contains("no findings"), "{verify}");
    let ca = dir.join("ca");
    let check = |name: &str| {
        openssl(&[
            "verify",
            "-crl_check_all",
            "-CRLfile",
            s(&ca.join("ca_crl.pem")),
            "-CAfile",
            s(&ca.join("ca_bundle.pem")),
            s(&ca.join(format!("signed/{name}.pem"))),
        ])
    };
    ok(&check("agent1.example.test"));
    let revoked = check("agent2.example.test");
    assert!(!revoked.status.success() && text(&revoked).contains("certificate revoked"), "{}", text(&revoked));
    let c = vouch()
        .args(["--dir", s(&dir), "conductor", "new", "cloud1", "--cert-out", s(&tmp.path().join("c.pem"))])
        .args(["--key-out", s(&tmp.path().join("c.key"))])
        .output()
        .unwrap();
    assert!(!c.status.success() && text(&c).contains("root CA's key is not in"), "{}", text(&c));
}

/// A private agent confdir for `certname` against localhost:`port`.
fn agent_dir(base: &Path, certname: &str, port: u16) -> PathBuf {
    let a = base.join(format!("agent-{certname}"));
    std::fs::create_dir_all(&a).unwrap();
    let mut conf = format!("[main]\nserver = localhost\nserverport = {port}\ncertname = {certname}\n");
    for d in ["ssldir:ssl", "vardir:var", "rundir:run", "logdir:log", "publicdir:public", "codedir:code"] {
        let (k, v) = d.split_once(':').unwrap();
        conf.push_str(&format!("{k} = {}\n", a.join(v).display()));
    }
    std::fs::write(a.join("puppet.conf"), conf).unwrap();
    a
}

fn puppet(confdir: &Path, args: &[&str]) -> Output {
    Command::new("puppet").args(args).args(["--confdir", s(confdir), "--color", "false"]).output().unwrap()
}

/// `puppet ssl bootstrap`, retried while the server is still warming up (at most 10 times).
fn bootstrap(confdir: &Path) -> Output {
    let mut o = puppet(confdir, &["ssl", "bootstrap", "--waitforcert", "0"]);
    for _ in 0..10 {
        if o.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
        o = puppet(confdir, &["ssl", "bootstrap", "--waitforcert", "0"]);
    }
    o
}

#[test]
fn agents_of_a_real_puppet_server_keep_working_against_vouch_serve_after_the_import() {
    require("puppet", "puppet-agent");
    require("java", "puppetserver");
    require("puppetserver", "puppetserver");
    let tmp = tempfile::Builder::new().prefix("vouch-puppet-import").tempdir().unwrap();
    let (server, port) = (tmp.path().join("server"), free_port());
    ok(&Command::new("bash")
        .arg(root().join("tests/support/puppetserver/setup.sh"))
        .arg(&server)
        .arg(port.to_string())
        .output()
        .unwrap());
    let conf = server.join("etc/puppet.conf");
    let mut c = std::fs::read_to_string(&conf).unwrap();
    c.push_str("[server]\nautosign = true\n");
    std::fs::write(&conf, c).unwrap();
    // Puppet 7's layout: a root and an intermediate ("Puppet CA: localhost"), root_key.pem kept.
    ok(&Command::new("puppetserver").args(["ca", "setup", "--config", s(&conf)]).output().unwrap());
    let agent = agent_dir(tmp.path(), "old1.example.test", port);
    {
        let _puppetserver = start_puppetserver(&server);
        let o = bootstrap(&agent);
        assert!(o.status.success(), "bootstrap against Puppet Server: {}", text(&o));
        ok(&puppet(&agent, &["ssl", "verify"]));
    } // Puppet Server stops here.
    let agent_before = snapshot(&agent.join("ssl"));

    let dir = tmp.path().join("vouch");
    let out = ok(&import(&dir, &server.join("etc/puppetserver/ca")));
    assert!(out.contains("Imported the Puppet CA CN=Puppet CA: localhost"), "{out}");
    // Puppet Server's own certificate (pp_cli_auth) holds the name vouch serve takes over:
    // the import says so, and the retired server's certificate is revoked to free it.
    let said = import(&tmp.path().join("again"), &server.join("etc/puppetserver/ca"));
    assert!(text(&said).contains("localhost's certificate carries pp_cli_auth"), "{}", text(&said));
    // The CA's only administrator certificate: revoking it needs --force (serve makes vouch-admin).
    let unforced = vouch().args(["--dir", s(&dir), "revoke", "localhost"]).output().unwrap();
    assert_eq!(unforced.status.code(), Some(2), "{}", text(&unforced));
    ok(&vouch().args(["--dir", s(&dir), "revoke", "--force", "localhost"]).output().unwrap());
    let cert = agent.join("ssl/certs/old1.example.test.pem");
    ok(&verify_with_crls(&dir, &cert));

    // vouch serve on the same name and port.
    let log = tmp.path().join("serve.log");
    let mut cmd = vouch();
    cmd.args(["--dir", s(&dir), "serve", "--listen", &format!("127.0.0.1:{port}"), "--server-name", "localhost"]);
    let (serve, banner, _) = start_serve(&mut cmd, &log);
    let _serve = KillOnDrop(serve);
    // The same agent, nothing changed on its side: its certificate, CA bundle and CRL verify.
    let v = puppet(&agent, &["ssl", "verify"]);
    assert!(v.status.success(), "ssl verify against vouch serve: {}\n{banner}\n{}", text(&v), read(&log));
    assert!(snapshot(&agent.join("ssl")) == agent_before, "the agent's ssldir changed");
    // The agent takes vouch's CRL when it refreshes it (its key identifier is the CA's).
    let mut c = std::fs::read_to_string(agent.join("puppet.conf")).unwrap();
    c.push_str("crl_refresh_interval = 1s\n");
    std::fs::write(agent.join("puppet.conf"), c).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let v = puppet(&agent, &["ssl", "bootstrap", "--waitforcert", "0"]);
    assert!(v.status.success(), "with vouch's CRL: {}\n{}", text(&v), read(&log));

    // Listed, and revocable: the agent then fails as revoked.
    let list = ok(&vouch().args(["--dir", s(&dir), "list", "--all"]).output().unwrap());
    assert!(list.contains("old1.example.test"), "{list}");
    // Revoked at once: the agent saved its copy in this same second, and the new CRL is
    // still newer than that copy's If-Modified-Since (whole seconds).
    ok(&vouch().args(["--dir", s(&dir), "revoke", "old1.example.test"]).output().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let v = puppet(&agent, &["ssl", "bootstrap", "--waitforcert", "0"]);
    assert!(!v.status.success() && text(&v).contains("revoked"), "{}", text(&v));

    // A new node, vouched for by a conductor of the imported root, enrolls as usual.
    let (cc, ck) = (tmp.path().join("cloud1.pem"), tmp.path().join("cloud1.key"));
    ok(&vouch()
        .args(["--dir", s(&dir), "conductor", "new", "cloud1", "--cert-out", s(&cc), "--key-out", s(&ck)])
        .output()
        .unwrap());
    let fresh = agent_dir(tmp.path(), "new1.example.test", port);
    ok(&vouch()
        .args(["conductor", "sign", "--cert", s(&cc), "--key", s(&ck), "--classification"])
        .args([s(&fixture("classification.yaml")), "--certname", "new1.example.test", "--expires-in", "30m"])
        .args(["--format", "puppet-yaml", "--out", s(&fresh.join("csr_attributes.yaml"))])
        .output()
        .unwrap());
    let o = puppet(&fresh, &["ssl", "bootstrap", "--waitforcert", "0"]);
    assert!(o.status.success(), "a new node: {}\n{}", text(&o), read(&log));
    let new_cert = fresh.join("ssl/certs/new1.example.test.pem");
    let x = ok(&openssl(&["x509", "-in", s(&new_cert), "-noout", "-text"]));
    assert!(x.contains("1.3.6.1.4.1.34380.2.5") && x.contains("Puppet CA: localhost"), "{x}");
    ok(&verify_with_crls(&dir, &new_cert));
}

/// Stops `vouch serve` however the test ends (a failed assertion too).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
