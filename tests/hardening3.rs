//! Issue 33, round 3: the shared store and `vouch serve` under abuse. A flood of refused
//! requests (bounded: per client address, per store), a revocation retried after its
//! replicas did not confirm it, a future `--now` and the fleet's replay journal, and
//! connection slots held by a few addresses. Each test drives the real binary.

mod common;

use common::agents::{csr_for, p256};
use common::ldap_lab::{slapd_opts, store_env, Master};
use common::slapd::Slapd;
use common::{ok, run, s, text, vouch};
use std::path::Path;
use std::process::Command;
use time::OffsetDateTime;

const CLASSIFICATION: &str = "classes:\n  - role::web\n";

/// `vouch` on the LDAP store of `slapd`, in data directory `dir`.
fn v(slapd: &Slapd, dir: &Path) -> Command {
    let mut c = vouch();
    c.envs(store_env(slapd)).args(["--dir", s(dir)]);
    c
}

/// A started slapd with the store's containers.
fn store() -> Slapd {
    let slapd = Slapd::start(&slapd_opts());
    let tmp = slapd.dir().to_path_buf();
    ok(&v(&slapd, &tmp).args(["ldap", "init", "--create-base"]).output().unwrap());
    slapd
}

/// Attributes from the conductor of `dir` (made by `vouch serve`'s first run), expiring at
/// `expiry`: version 2 bound to `certname`, or version 1 without one.
fn attributes(dir: &Path, certname: Option<&str>, expiry: OffsetDateTime) -> vouch::vouching::attrs::CsrAttributes {
    let cert_pem = std::fs::read(dir.join("conductor/conductor_crt.pem")).unwrap();
    let (_, cert_der) = vouch::encoding::pem::find(&cert_pem, &["CERTIFICATE"]).unwrap();
    let key =
        vouch::issuance::keys::load_pem(&std::fs::read_to_string(dir.join("conductor/conductor_key.pem")).unwrap())
            .unwrap();
    let class = vouch::vouching::classification::Classification::from_yaml(CLASSIFICATION, 65536).unwrap();
    let a = vouch::vouching::attrs::vouch(
        &cert_der,
        &key,
        &class,
        expiry,
        vouch::vouching::attrs::CertEncoding::Base64Der,
        certname,
    )
    .unwrap();
    vouch::vouching::attrs::CsrAttributes::from_vouched(&a, Some(vouch::policy::DEFAULT_MIRROR_OID))
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap()
}

/// Finding 9: `vouch --now <4 days ahead>` claimed in the shared journal and pruned it by
/// that clock: every claim whose attributes expired before then (plus a day) was deleted,
/// and spent version 1 attributes were granted again to another key under another name.
#[test]
fn a_future_now_never_prunes_the_shared_replay_journal() {
    let slapd = store();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    drop(Master::start(&slapd, &d1, "ca1.test"));
    let real = OffsetDateTime::now_utc();
    // Spent now, by the hook (as Puppet Server calls it): version 1, no certname.
    let spent = attributes(&d1, None, real + time::Duration::hours(1));
    let first = run(
        v(&slapd, &d1).args(["autosign", "v1-first.example.test"]),
        Some(&csr_for("v1-first.example.test", &spent, &p256())),
    );
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    // A command run with a clock four days ahead claims other attributes (valid then).
    let later = real + time::Duration::days(4);
    let future = attributes(&d1, None, later + time::Duration::hours(1));
    let ahead = run(
        v(&slapd, &d1).args(["--now", &rfc3339(later), "autosign", "v1-ahead.example.test"]),
        Some(&csr_for("v1-ahead.example.test", &future, &p256())),
    );
    assert_eq!(ahead.status.code(), Some(0), "{}", text(&ahead));
    // The first attributes are still spent: another key, under another name, is refused.
    let again = run(
        v(&slapd, &d1).args(["autosign", "v1-again.example.test"]),
        Some(&csr_for("v1-again.example.test", &spent, &p256())),
    );
    assert_eq!(again.status.code(), Some(1), "spent attributes granted again after a future --now: {}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("attributes-replayed"), "{}", text(&again));
}
