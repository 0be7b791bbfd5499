//! Hardening, round 3 (issue 33): what `vouch clean` and `vouch reconcile` leave behind.

mod common;

use common::{cli_vouched_csr, ok, run, s, vouch};
use std::path::{Path, PathBuf};

/// A file-store CA in `w/vouch` with a conductor `cond` (`w/cond.pem`, `w/cond.key`).
fn ca(w: &Path) -> PathBuf {
    let dir = w.join("vouch");
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    ok(&run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "cond"]).args([
            "--cert-out",
            s(&w.join("cond.pem")),
            "--key-out",
            s(&w.join("cond.key")),
        ]),
        None,
    ));
    dir
}

fn sign(w: &Path, dir: &Path, name: &str) {
    let csr = cli_vouched_csr(w, &w.join("cond.pem"), &w.join("cond.key"), name);
    ok(&run(vouch().args(["--dir", s(dir), "sign", "--csr", s(&csr)]), None));
}

/// Finding 7: an override outlived `vouch clean`: a new node reusing the name got the old
/// override's classification, which its own conductor never signed.
#[test]
fn a_clean_clears_the_names_override_so_a_new_node_gets_its_own_classification() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let dir = ca(w);
    sign(w, &dir, "a.example.test");
    let class = w.join("override.yaml");
    std::fs::write(&class, "classes:\n  - evil::backdoor\n").unwrap();
    let v = |args: &[&str]| run(vouch().arg("--dir").arg(&dir).args(args), None);
    ok(&v(&["override", "set", "a.example.test", "--classification", s(&class)]));
    assert!(ok(&v(&["enc", "a.example.test"])).contains("evil::backdoor"));
    let cleaned = ok(&v(&["clean", "a.example.test"]));
    assert!(cleaned.contains("override (revision 1) cleared"), "{cleaned}");
    // A new node of that name: its own conductor's classification, not the old override.
    for ext in ["key", "csr", "yaml"] {
        std::fs::remove_file(w.join(format!("a.example.test.{ext}"))).unwrap();
    }
    sign(w, &dir, "a.example.test");
    let enc: serde_json::Value = serde_json::from_str(&ok(&v(&["enc", "a.example.test"]))).unwrap();
    assert_eq!(enc["parameters"]["vouch_source"], "certificate", "{enc}");
    assert_eq!(enc["classes"], serde_json::json!(["profile::web"]), "{enc}");
    let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
    assert!(audit.contains("\"event\":\"override-cleared\"") && audit.contains("\"by\":\"clean\""), "{audit}");
}

/// Finding 6: reconcile revoked nodes that enrolled after its inventory snapshot (a slow
/// `cmd:` inventory: the node booted while the command ran, and was not in its output).
#[test]
fn reconcile_never_takes_a_node_enrolled_while_the_inventory_was_read_for_an_orphan() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let dir = ca(w);
    sign(w, &dir, "old.example.test");
    sign(w, &dir, "gone.example.test");
    let script = w.join("inventory.sh");
    std::fs::write(&script, "#!/bin/sh\nsleep 3\necho old.example.test\n").unwrap();
    ok(&std::process::Command::new("chmod").arg("755").arg(&script).output().unwrap());
    let source = format!("cmd:{}", s(&script));
    let (dir2, w2) = (dir.clone(), w.to_path_buf());
    let booting = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        sign(&w2, &dir2, "new.example.test");
    });
    let out = ok(&run(
        vouch().args(["--dir", s(&dir), "reconcile", "--inventory", &source, "--confirm", "--force", "-o", "json"]),
        None,
    ));
    booting.join().unwrap();
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    let orphans: Vec<&str> =
        plan["orphans"].as_array().unwrap().iter().map(|o| o["certname"].as_str().unwrap()).collect();
    assert_eq!(orphans, ["gone.example.test"], "{out}");
    let list = ok(&run(vouch().args(["--dir", s(&dir), "list", "--all", "--format", "json"]), None));
    let list: Vec<serde_json::Value> = serde_json::from_str(&list).unwrap();
    let state = |n: &str| list.iter().find(|e| e["name"] == n).map(|e| e["state"].as_str().unwrap().to_string());
    assert_eq!(state("new.example.test").as_deref(), Some("signed"), "{list:?}");
    assert_eq!(state("gone.example.test").as_deref(), Some("revoked"), "{list:?}");
}
