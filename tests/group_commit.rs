//! One-time use of attributes through the group commit, at its failure points and with
//! a replay journal shared by two CAs (several masters). The first two tests come from
//! an independent review of the write-ahead log, where they failed.

mod common;

use common::s;
use std::path::{Path, PathBuf};
use std::process::Command;
use time::OffsetDateTime;
use vouch::authority::{Authority, IssueOutcome};
use vouch::issuance::bootstrap::DataDir;

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vouch")).args(args).env("VOUCH_DIR", dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA with a conductor, and a vouched CSR (version 2 attributes, 1 h) for `name`.
fn setup(t: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let dir = t.join("vouch");
    ok(&dir, &["ca", "init"]);
    let (c, k) = (t.join("c.pem"), t.join("c.key"));
    ok(&dir, &["conductor", "new", "c", "--cert-out", s(&c), "--key-out", s(&k)]);
    let class = t.join("class.yaml");
    std::fs::write(&class, "classes: [ntp]\n").unwrap();
    let attrs = t.join("attrs.yaml");
    let sign = ["conductor", "sign", "--cert", s(&c), "--key", s(&k), "--certname", name];
    let rest = ["--classification", s(&class), "--expires-in", "1h", "--out", s(&attrs)];
    ok(&dir, &[&sign[..], &rest[..]].concat());
    let (csr, key) = (t.join("n.csr"), t.join("n.key"));
    ok(&dir, &["csr", "--certname", name, "--attributes", s(&attrs), "--key-out", s(&key), "--csr-out", s(&csr)]);
    (dir, std::fs::read(csr).unwrap())
}

fn codes(o: &IssueOutcome) -> String {
    match o {
        IssueOutcome::Issued(i) => format!("issued {}", i.serial_hex),
        IssueOutcome::Refused(r) => r.reasons.iter().map(|x| x.code().to_string()).collect::<Vec<_>>().join(","),
    }
}

/// The audit log cannot be written: nothing is stored (the decision is audited before the
/// log's write), the node's claim goes back to it, its retry is approved once, and after
/// the node is cleaned its attributes stay spent.
#[test]
fn an_audit_failure_stores_nothing_and_the_attributes_stay_one_time() {
    let t = tempfile::tempdir().unwrap();
    let name = "web01.example.test";
    let (dir, csr) = setup(t.path(), name);
    let now = OffsetDateTime::now_utc();
    let mut auth = Authority::open(&DataDir::new(&dir)).unwrap();
    let good_log = auth.policy.audit_log.clone();
    let bad = dir.join("audit-is-a-directory");
    std::fs::create_dir(&bad).unwrap();
    auth.policy.audit_log = Some(bad);
    let first = auth.issue(&csr, None, now);
    assert!(first.is_err(), "the audit write failed: {:?}", first.as_ref().map(codes));
    let pem = dir.join(format!("ca/signed/{name}.pem"));
    assert!(!pem.exists(), "told 'failed', yet a certificate was stored");
    // The operator fixes the audit log (SIGHUP: a new Authority in the same process).
    let mut auth = Authority::open(&DataDir::new(&dir)).unwrap();
    auth.policy.audit_log = good_log;
    let retry = auth.issue(&csr, None, now).unwrap();
    assert!(matches!(retry, IssueOutcome::Issued(_)), "the node's retry: {}", codes(&retry));
    auth.revoke(name, "keyCompromise", true, now).unwrap();
    let again = auth.issue(&csr, None, now).unwrap();
    assert_eq!(codes(&again), "attributes-replayed", "a cleaned key came back with spent attributes");
}

/// Two CAs (two masters, or a standby) sharing one replay journal, as docs/puppet-server.md
/// requires of several masters: once the first CA stored its certificate, the claim is
/// marked issued and the second CA refuses the attributes.
#[test]
fn a_shared_journal_stops_a_second_ca_issuing_for_spent_attributes() {
    let t = tempfile::tempdir().unwrap();
    let name = "web02.example.test";
    let (dir1, csr) = setup(t.path(), name);
    let dir2 = t.path().join("vouch2");
    assert!(Command::new("cp").args(["-a", s(&dir1), s(&dir2)]).status().unwrap().success());
    let now = OffsetDateTime::now_utc();
    let auth1 = Authority::open(&DataDir::new(&dir1)).unwrap();
    let mut auth2 = Authority::open(&DataDir::new(&dir2)).unwrap();
    auth2.policy.replay_journal = auth1.policy.replay_journal.clone();
    let one = auth1.issue(&csr, None, now).unwrap();
    assert!(matches!(one, IssueOutcome::Issued(_)), "{}", codes(&one));
    let two = auth2.issue(&csr, None, now).unwrap();
    assert_eq!(codes(&two), "attributes-replayed", "spent attributes issued again by a second CA");
}
