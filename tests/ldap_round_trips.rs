//! What a vouched certificate costs the shared LDAP store, in LDAP operations, from a master's
//! own metrics (`vouch_ldap_operations_total`): a node's PUT certificate_request and GET
//! certificate make at most four round trips, two of them the synced writes (the journal add
//! that decides one-time use, the registry add that makes the certificate the certname's).
//! Counts, not timing: the same on any machine under any load.
//! Also what that search and the legacy-key mark must not give away: an entry outside the
//! certname's own DN taken as its certificate, a store without the mark read as one without
//! legacy keys, a refused request left beside a certificate (and the window that remains).

mod common;

use common::agents::{csr_for, p256};
use common::ds389::Ds389;
use common::ldap_lab::{enroll, slapd_opts, store_env, Directory, Master, BASE};
use common::ldap_proxy::{element_len, request_dn};
use common::slapd::Slapd;
use common::{ok, run, s, text, vouch};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const CLASSIFICATION: &str = "classes:\n  - role::web\n";

/// Every `vouch_ldap_operations_total{op="…"}` as `/metrics` on `addr` says it.
fn ldap_ops(addr: SocketAddr) -> BTreeMap<String, u64> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    raw.lines()
        .filter_map(|l| l.strip_prefix("vouch_ldap_operations_total{op=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(op, n)| (op.to_string(), n.trim().parse().unwrap()))
        .collect()
}

/// A master on `d`'s store with its metrics on a port of its own, its policy's
/// `on_existing` set to `on_existing` (a first run writes the policy, then it is edited).
fn master(d: &dyn Directory, dir: &Path, on_existing: &str) -> (Master, SocketAddr) {
    let first = Master::start(d, dir, "ca1.test");
    drop(first);
    let policy = dir.join("policy.toml");
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("on_existing = \"refuse\""), "{text}");
    std::fs::write(&policy, text.replace("on_existing = \"refuse\"", &format!("on_existing = \"{on_existing}\"")))
        .unwrap();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let m = Master::start_env(dir, "ca1.test", &store_env(d), &["--metrics-listen", &metrics.to_string()]);
    (m, metrics)
}

/// The LDAP operations of one new certificate: the PUT and the GET of a node, each pair's
/// operations taken from the metrics around it. The master also reads now and then on its own
/// (once a second at most whether its CRL is due, once a minute whether a revocation was cut
/// short and whether the journal still holds no legacy-keyed entries), which lands in
/// whichever pair runs then: a few pairs, never most of them. So the median pair (by its
/// count of operations, of 11) is the certificate's own cost: if only some certificates cost
/// four, it is more.
fn per_certificate(d: &dyn Directory, on_existing: &str) -> BTreeMap<String, u64> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m1");
    let (m, metrics) = master(d, &dir, on_existing);
    let mut client = m.client();
    let mut pairs = Vec::new();
    for i in 0..12 {
        let name = format!("trip{i:02}.example.test");
        let attrs = common::agents::vouched(&dir, &name, CLASSIFICATION);
        let csr = csr_for(&name, &attrs, &p256());
        let before = ldap_ops(metrics);
        let put = client.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr);
        let put = put.unwrap();
        let get = client.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        let after = ldap_ops(metrics);
        assert_eq!((put.status, get.status), (200, 200), "{name}: {} / {}\n{}", put.text(), get.text(), m.log());
        let delta: BTreeMap<String, u64> =
            after.iter().map(|(op, n)| (op.clone(), n - before.get(op).copied().unwrap_or(0))).collect();
        // The first pair also opens the pool's connections (binds): not the certificate's.
        if i > 0 {
            pairs.push(delta);
        }
    }
    let total = |p: &BTreeMap<String, u64>| p.iter().filter(|(op, _)| *op != "bind").map(|(_, n)| n).sum::<u64>();
    let mut sorted = pairs.clone();
    sorted.sort_by_key(total);
    let median = sorted[sorted.len() / 2].clone();
    eprintln!("{} ({on_existing}): per certificate (median) {median:?}; every pair: {pairs:?}", d.server());
    median
}

/// The figure docs/benchmarks.md gives: 2 synced writes (two adds, no modify, no delete),
/// at most 4 round trips in all for a PUT and a GET.
fn assert_four_round_trips(d: &dyn Directory, on_existing: &str) {
    let ops = per_certificate(d, on_existing);
    let n = |op: &str| ops.get(op).copied().unwrap_or(0);
    let trips = n("add") + n("modify") + n("read") + n("search") + n("delete");
    assert_eq!((n("add"), n("modify"), n("delete")), (2, 0, 0), "{} ({on_existing}): {ops:?}", d.server());
    assert!(
        trips <= 4,
        "{} ({on_existing}): {trips} LDAP round trips per certificate, not at most 4: {ops:?}",
        d.server()
    );
}

/// A private slapd with the store's containers.
fn slapd() -> Slapd {
    let slapd = Slapd::start(&slapd_opts());
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    slapd
}

/// Was 8 (2 adds, 5 reads: the certname's registry entry three times, the attributes'
/// legacy journal entry, the pending request; 1 search: the serial's).
#[test]
fn a_vouched_certificate_costs_at_most_four_ldap_round_trips() {
    assert_four_round_trips(&slapd(), "refuse");
    assert_four_round_trips(&slapd(), "supersede");
}

#[test]
fn a_vouched_certificate_costs_at_most_four_ldap_round_trips_on_389ds() {
    assert_four_round_trips(&Ds389::store("four_round_trips_refuse"), "refuse");
    assert_four_round_trips(&Ds389::store("four_round_trips_supersede"), "supersede");
}

/// `certificate_statuses/any` (what `puppetserver ca list --all` asks) on `d`'s store with 40
/// certificates, one of them revoked, and a request pending (with the master's and the
/// administrator's certificates, 43 names): every certificate listed once,
/// in a handful of LDAP round trips (the requests, and a search per thousand certificates),
/// not one read (or three) per certificate as before: 2,500 certificates took 8 s on slapd.
fn assert_listing_searches(d: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m1");
    let (m, metrics) = master(d, &dir, "refuse");
    let mut client = m.client();
    for i in 0..40 {
        let name = format!("list{i:02}.example.test");
        let csr = csr_for(&name, &common::agents::vouched(&dir, &name, CLASSIFICATION), &p256());
        let put = client.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr);
        assert_eq!(put.unwrap().status, 200, "{name}\n{}", m.log());
    }
    let mut revoke = vouch();
    revoke.envs(store_env(d)).args(["--dir", s(&dir), "revoke", "list07.example.test"]);
    ok(&revoke.output().unwrap());
    // A request with no certificate (its attributes signed for another name): accepted (200,
    // as Puppet Server answers), not signed, kept pending.
    let attrs = common::agents::vouched(&dir, "other.example.test", CLASSIFICATION);
    let csr = csr_for("pending.example.test", &attrs, &p256());
    let put = client.request("PUT", "/puppet-ca/v1/certificate_request/pending.example.test", Some("text/plain"), &csr);
    assert_eq!(put.unwrap().status, 200);
    let mut admin = m.admin();
    let list = |admin: &mut vouch::serve::client::Client, query: &str| {
        let r = admin.request("GET", &format!("/puppet-ca/v1/certificate_statuses/any{query}"), None, b"").unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let v: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
        v.iter()
            .map(|e| (e["name"].as_str().unwrap().to_string(), e["state"].as_str().unwrap().to_string()))
            .collect::<Vec<_>>()
    };
    list(&mut admin, ""); // the admin's connection opened, its pool grown
    let before = ldap_ops(metrics);
    let all = list(&mut admin, "");
    let after = ldap_ops(metrics);
    let ops: BTreeMap<&String, u64> =
        after.iter().map(|(op, n)| (op, n - before.get(op).copied().unwrap_or(0))).filter(|(_, n)| *n > 0).collect();
    let signed = all.iter().filter(|(_, st)| st == "signed").count();
    let revoked: Vec<&String> = all.iter().filter(|(_, st)| st == "revoked").map(|(n, _)| n).collect();
    let pending = ("pending.example.test".to_string(), "requested".to_string());
    assert_eq!((all.len(), signed, revoked), (43, 41, vec![&"list07.example.test".to_string()]), "{all:?}");
    assert!(all.contains(&pending), "{all:?}");
    let names: std::collections::BTreeSet<&String> = all.iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 43, "a name listed twice: {all:?}");
    let trips: u64 = ops.iter().filter(|(op, _)| op.as_str() != "bind").map(|(_, n)| n).sum();
    eprintln!("{}: listing 43 names: {ops:?}", d.server());
    assert!(trips <= 6, "{}: {trips} LDAP round trips to list 40 certificates: {ops:?}", d.server());
    assert_eq!(list(&mut admin, "?state=revoked"), vec![("list07.example.test".to_string(), "revoked".to_string())]);
    assert_eq!(list(&mut admin, "?state=signed").len(), 41);
    assert_eq!(list(&mut admin, "?state=requested"), vec![pending]);
}

#[test]
fn a_listing_of_every_certificate_is_a_search_not_a_read_per_certificate() {
    assert_listing_searches(&slapd());
}

#[test]
fn a_listing_of_every_certificate_is_a_search_not_a_read_per_certificate_on_389ds() {
    assert_listing_searches(&Ds389::store("listing_searches"));
}

/// The administrator's listing of one master on `slapd`: (status, [(name, state)]).
fn statuses(admin: &mut vouch::serve::client::Client, query: &str) -> (u16, Vec<(String, String)>) {
    let r = admin.request("GET", &format!("/puppet-ca/v1/certificate_statuses/any{query}"), None, b"").unwrap();
    if r.status != 200 {
        return (r.status, vec![]);
    }
    let v: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
    let pairs = v.iter().map(|e| (e["name"].as_str().unwrap().to_string(), e["state"].as_str().unwrap().to_string()));
    (200, pairs.collect())
}

/// Review of the listing from one paged search (`Store::for_each_current`): it must answer
/// each name once, as `certificate_status/NAME` answers it, and each state filter as the
/// listing did before, whatever the registry holds. Three registries a read by name answers
/// well: an entry copied by hand under `ou=certnames` at another DN (the walk lists the
/// certname twice, the read of its own DN answers it), an entry whose record names another
/// certname (a read of its name answers that name), and a damaged entry of another state
/// than the filter's (the listing of `?state=revoked` never read it before). (Fails on the
/// one-search listing: the name copied is listed twice; the name whose record names another
/// is left out and the other listed twice; `?state=revoked` answers 500.)
#[test]
fn a_listing_answers_each_name_once_as_a_read_by_name_whatever_the_registry_holds() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m1");
    let m = Master::start(&slapd, &dir, "ca1.test");
    let (one, two, three) = ("one.example.test", "two.example.test", "three.example.test");
    for name in [one, two, three] {
        let (put, why, cert) =
            enroll(&m, name, &csr_for(name, &common::agents::vouched(&dir, name, CLASSIFICATION), &p256()));
        assert!(cert.is_some(), "{name}: PUT {put} {why}\n{}", m.log());
    }
    let mut admin = m.admin();
    let (status, before) = statuses(&mut admin, "");
    assert_eq!(status, 200);
    let count = |list: &[(String, String)], name: &str| list.iter().filter(|(n, _)| n == name).count();
    assert_eq!([one, two, three].map(|n| count(&before, n)), [1, 1, 1], "{before:?}");
    let entry = |name: &str| {
        let dn = format!("vouchCertname={name},ou=certnames,{BASE}");
        let attrs = [
            "objectClass",
            "vouchCertname",
            "vouchState",
            "vouchSerial",
            "vouchRevision",
            "vouchCa",
            "vouchRecord",
            "vouchCertificate",
            "vouchNotAfter",
        ];
        let out = slapd.ldapsearch(&dn, "(objectClass=*)", &attrs);
        let lines: Vec<String> =
            out.ok().lines().filter(|l| !l.starts_with("dn:") && !l.is_empty()).map(str::to_string).collect();
        (dn, lines)
    };
    let mut broken = Vec::new();

    // 1. A copy of one's entry at another DN under ou=certnames (nothing vouch writes).
    let (_, lines) = entry(one);
    let serial = lines.iter().find_map(|l| l.strip_prefix("vouchSerial: ")).unwrap().to_string();
    let stray = format!("vouchSerial={serial},ou=certnames,{BASE}");
    let added = slapd.ldapadd(&format!("dn: {stray}\n{}\n", lines.join("\n")));
    assert!(added.success(), "{}", added.stderr);
    let (status, listed) = statuses(&mut admin, "");
    if status != 200 || count(&listed, one) != 1 {
        broken.push(format!("an entry at another DN naming {one}: {status} {listed:?}"));
    }
    let gone = slapd.ldap_tool("ldapdelete", &[&stray], None);
    assert!(gone.success(), "{}", gone.stderr);

    // 2. two's record names three (a damaged entry): a read by name answers it as two.
    let (dn, lines) = entry(two);
    let record = lines.iter().find(|l| l.starts_with("vouchRecord:")).unwrap().clone();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let json = match record.strip_prefix("vouchRecord:: ") {
        Some(v) => String::from_utf8(b64.decode(v).unwrap()).unwrap(),
        None => record.strip_prefix("vouchRecord: ").unwrap().to_string(),
    };
    assert!(json.contains(two), "{json}");
    let set_record = |json: &str| {
        let o = slapd.ldapmodify(&format!(
            "dn: {dn}\nchangetype: modify\nreplace: vouchRecord\nvouchRecord:: {}\n-\n",
            b64.encode(json)
        ));
        assert!(o.success(), "{}", o.stderr);
    };
    set_record(&json.replace(two, three));
    let by_name = admin.request("GET", &format!("/puppet-ca/v1/certificate_status/{two}"), None, b"").unwrap();
    let by_name: serde_json::Value = serde_json::from_slice(&by_name.body).unwrap_or_default();
    assert_eq!(by_name["name"], two, "a read by name answers the name it was asked: {by_name}");
    let (status, listed) = statuses(&mut admin, "");
    if status != 200 || count(&listed, two) != 1 || count(&listed, three) != 1 {
        broken.push(format!("{two}'s record naming {three}: {status} {listed:?}"));
    }
    set_record(&json);

    // 3. one revoked; three's record damaged: ?state=revoked never read three before.
    let mut revoke = vouch();
    revoke.envs(store_env(&slapd)).args(["--dir", s(&dir), "revoke", one]);
    ok(&revoke.output().unwrap());
    let (status, listed) = statuses(&mut admin, "?state=revoked");
    assert_eq!((status, listed.clone()), (200, vec![(one.to_string(), "revoked".to_string())]));
    let (dn3, _) = entry(three);
    let o = slapd.ldapmodify(&format!("dn: {dn3}\nchangetype: modify\nreplace: vouchRecord\nvouchRecord: {{\n-\n"));
    assert!(o.success(), "{}", o.stderr);
    let (status, listed) = statuses(&mut admin, "?state=revoked");
    if (status, listed.clone()) != (200, vec![(one.to_string(), "revoked".to_string())]) {
        broken.push(format!("?state=revoked beside a damaged signed entry: {status} {listed:?}"));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// [`a_listing_answers_each_name_once_as_a_read_by_name_whatever_the_registry_holds`] on the
/// file store (the trait's own walk: the listing, then a read of each name): an inventory line
/// written twice (as an import or an older vouch's redo may leave it) lists the certname
/// twice, and a damaged certificate file of a signed name fails `?state=revoked`, which never
/// read it before. (Fails on the one-walk listing: the name is listed twice; 500.)
#[test]
fn a_file_store_listing_answers_each_name_once_and_each_state_filter_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("m1");
    let m = Master::start_env(&dir, "ca1.test", &[], &[]);
    let (one, two, three) = ("one.example.test", "two.example.test", "three.example.test");
    for name in [one, two, three] {
        let (put, why, cert) =
            enroll(&m, name, &csr_for(name, &common::agents::vouched(&dir, name, CLASSIFICATION), &p256()));
        assert!(cert.is_some(), "{name}: PUT {put} {why}\n{}", m.log());
    }
    drop(m);
    let mut broken = Vec::new();
    let count = |list: &[(String, String)], name: &str| list.iter().filter(|(n, _)| n == name).count();
    // 1. one's inventory line written twice.
    let inventory = dir.join("ca/inventory.txt");
    let text = std::fs::read_to_string(&inventory).unwrap();
    let line = text.lines().find(|l| l.ends_with(&format!("/CN={one}"))).unwrap().to_string();
    std::fs::write(&inventory, format!("{text}{line}\n")).unwrap();
    let m = Master::start_env(&dir, "ca1.test", &[], &[]);
    let (status, listed) = statuses(&mut m.admin(), "");
    if status != 200 || count(&listed, one) != 1 || count(&listed, two) != 1 {
        broken.push(format!("{one}'s inventory line twice: {status} {listed:?}"));
    }
    drop(m);
    // 2. two revoked, three's certificate file damaged: ?state=revoked never read it.
    ok(&vouch().args(["--dir", s(&dir), "revoke", two]).output().unwrap());
    std::fs::write(dir.join(format!("ca/signed/{three}.pem")), "not a certificate\n").unwrap();
    let m = Master::start_env(&dir, "ca1.test", &[], &[]);
    let (status, listed) = statuses(&mut m.admin(), "?state=revoked");
    if (status, listed.clone()) != (200, vec![(two.to_string(), "revoked".to_string())]) {
        broken.push(format!("?state=revoked beside a damaged signed certificate: {status} {listed:?}\n{}", m.log()));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The read the claim no longer makes in every store: the journal entry under the
/// attributes' legacy key (the nonce alone, as vouch keyed version 2 attributes before binding
/// the key to the conductor). Only `vouch migrate` brings such an entry into the LDAP store,
/// and it marks the journal so that masters read those keys there: attributes used under
/// their legacy key in a file store stay used after the move. (Fails if migrate does not
/// mark the journal: the master then never looks under the legacy key.)
#[test]
fn a_legacy_journal_entry_migrated_into_ldap_stays_used() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let (name, attrs) = ("legacy.example.test", migrated_with_a_legacy_entry(&slapd, &d1));
    let m = Master::start(&slapd, &d1, "ca1.test");
    let (put, why, cert) = common::ldap_lab::enroll(&m, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    assert!(cert.is_none(), "attributes spent under their legacy key were used again:\n{}", m.log());
    let listed =
        ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "list", "--format", "json"]).output().unwrap());
    assert!(listed.contains("attributes-replayed"), "{listed}");
}

/// A file-store master in `d1` (its first run: CA, conductor, policy, journal in DIR/replay)
/// whose journal holds, under the legacy key, the vouched attributes for
/// `legacy.example.test` as an older vouch wrote them when it approved them for another
/// key; then `vouch migrate` into `slapd`. The attributes.
fn migrated_with_a_legacy_entry(slapd: &Slapd, d1: &std::path::Path) -> vouch::vouching::attrs::CsrAttributes {
    drop(Master::start_env(d1, "ca1.test", &[], &[]));
    let name = "legacy.example.test";
    let attrs = common::agents::vouched(d1, name, CLASSIFICATION);
    let nonce = attrs.custom_attributes["1.3.6.1.4.1.34380.2.7"].clone();
    let expiry = time::OffsetDateTime::parse(
        &attrs.custom_attributes["1.3.6.1.4.1.34380.2.3"],
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let journal = vouch::store::journal::Journal::new(d1.join("replay"));
    let legacy = vouch::vouching::replay_key::ReplayKey::from(format!("v2-nonce:{nonce}").as_str());
    let now = time::OffsetDateTime::now_utc();
    assert_eq!(
        journal.claim(&legacy, expiry, name, &"ab".repeat(32), true, now).unwrap(),
        vouch::store::journal::Claim::Fresh
    );
    let env: Vec<(String, String)> = store_env(slapd).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect();
    let out =
        ok(&vouch().envs(env).args(["--dir", s(d1), "migrate", "--to", &slapd.url(&slapd.base())]).output().unwrap());
    assert!(out.contains("replay-journal entries: 1 copied"), "{out}");
    attrs
}

/// A store migrated by an older vouch holds its copied journal entries and no mark of any
/// kind (as here: every `description` of `ou=journal` removed after the migration). The
/// masters read the legacy key unless the journal is marked as holding none, and `vouch ldap
/// init` run again on it does not mark a journal that holds entries: attributes spent under
/// their legacy key in the file store stay spent. (Fails if a store without a mark is taken
/// for one without legacy entries, as when the mark said the opposite.)
#[test]
fn a_store_migrated_before_the_mark_keeps_legacy_entries_used() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let (name, attrs) = ("legacy.example.test", migrated_with_a_legacy_entry(&slapd, &d1));
    // As the previous version's migrate left the store: the same entries, no mark (16: no
    // such attribute, as a migrate without the mark leaves it).
    let unmark = slapd.ldapmodify(&format!("dn: ou=journal,{BASE}\nchangetype: modify\ndelete: description\n-\n"));
    assert!(unmark.success() || unmark.code == 16, "{}", unmark.stderr);
    // Run again on the existing store: its journal holds an entry, so no mark.
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(&d1), "ldap", "init"]);
    let said = ok(&init.output().unwrap());
    assert!(said.contains("the replay journal holds entries"), "{said}");
    let desc = slapd.ldapsearch(&format!("ou=journal,{BASE}"), "(objectClass=*)", &["description"]);
    assert!(!desc.ok().contains("no-legacy"), "ldap init marked a journal that holds entries: {}", desc.ok());
    let m = Master::start(&slapd, &d1, "ca1.test");
    let (put, why, cert) = common::ldap_lab::enroll(&m, name, &csr_for(name, &attrs, &p256()));
    assert_eq!(put, 200, "{why}");
    assert!(cert.is_none(), "attributes spent under their legacy key were used again:\n{}", m.log());
}

/// The hook's bind DN, as docs/ldap.md gives it, may write the journal subtree only. The one
/// search before the decision finds entries of class vouchRegistered with the certname
/// anywhere under the base; only the one at the certname's own DN under `ou=certnames` is its
/// certificate. (Fails if the search's only such entry is taken wherever it is: an entry the
/// hook's account adds under `ou=journal`, copied from a real one, then answers a
/// never-enrolled node "already has a signed certificate", and a compromised Puppet Server
/// keeps any new name out of the fleet.)
#[test]
fn an_entry_the_hooks_account_adds_under_the_journal_is_not_a_certnames_certificate() {
    const HOOK: &str = "cn=vouch-hook,dc=vouch,dc=test";
    let mut opts = slapd_opts();
    opts.database.extend([
        format!("access to dn.subtree=\"ou=journal,{BASE}\" by dn.exact=\"{HOOK}\" write by * break"),
        format!("access to dn.subtree=\"{BASE}\" by dn.exact=\"{HOOK}\" read by * break"),
        format!("access to dn.exact=\"{HOOK}\" attrs=userPassword by anonymous auth by * none"),
    ]);
    let slapd = Slapd::start(&opts);
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    let added = slapd.ldapadd(&format!(
        "dn: {HOOK}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: vouch-hook\n\
         userPassword: hook-secret\n"
    ));
    assert!(added.success(), "{}", added.stderr);
    let tmp = tempfile::tempdir().unwrap();
    let pw = tmp.path().join("hook.pw");
    std::fs::write(&pw, "hook-secret").unwrap();
    std::fs::set_permissions(&pw, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let d1 = tmp.path().join("m1");
    let m1 = Master::start(&slapd, &d1, "ca1.test");
    // A real certificate to copy: any node's.
    let (donor, victim) = ("donor.example.test", "victim.example.test");
    let (put, why, _) =
        enroll(&m1, donor, &csr_for(donor, &common::agents::vouched(&d1, donor, CLASSIFICATION), &p256()));
    assert_eq!(put, 200, "{why}");
    let found = slapd.ldapsearch(
        &format!("vouchCertname={donor},ou=certnames,{BASE}"),
        "(objectClass=*)",
        &[
            "vouchState",
            "vouchSerial",
            "vouchRevision",
            "vouchCa",
            "vouchRecord",
            "vouchCertificate",
            "vouchNotAfter",
            "vouchKey",
        ],
    );
    let mut ldif = format!(
        "dn: vouchCertname={victim},ou=journal,{BASE}\nobjectClass: vouchRegistered\nvouchCertname: {victim}\n"
    );
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    for line in found.ok().lines().filter(|l| !l.starts_with("dn:") && !l.is_empty()) {
        if let Some(v) = line.strip_prefix("vouchRecord:: ") {
            let json = String::from_utf8(b64.decode(v).unwrap()).unwrap().replace(donor, victim);
            ldif.push_str(&format!("vouchRecord:: {}\n", b64.encode(json)));
        } else if let Some(v) = line.strip_prefix("vouchRecord: ") {
            ldif.push_str(&format!("vouchRecord: {}\n", v.replace(donor, victim)));
        } else {
            ldif.push_str(line);
            ldif.push('\n');
        }
    }
    let mut add = Command::new("ldapadd");
    add.args(["-x", "-H", &slapd.url(""), "-D", HOOK, "-y", s(&pw)]);
    let o = run(&mut add, Some(ldif.as_bytes()));
    assert!(o.status.success(), "the hook's account may add under ou=journal (docs/ldap.md's ACL): {}", text(&o));
    // The victim's first enrollment, with its conductor's good attributes.
    let attrs = common::agents::vouched(&d1, victim, CLASSIFICATION);
    let (put, why, cert) = enroll(&m1, victim, &csr_for(victim, &attrs, &p256()));
    assert!(
        cert.is_some(),
        "a never-enrolled node was refused on an entry the hook's account wrote under ou=journal: \
         PUT {put} {why}\n{}",
        m1.log()
    );
}

/// pending.rs: a refused request is never kept beside the name's valid certificate. Another
/// master's issuance holds no lock with this one's keeping: a master that read no certificate
/// of the name, keeps a bare request (anyone's key, no attributes) after the other master's
/// issuance stored one (whose search, before, saw no request to remove). The keeper reads the
/// registry again after keeping it, and removes it. (Fails if the keeper does not: the request
/// stays pending beside the node's certificate.)
#[test]
fn a_request_kept_after_another_master_issued_for_the_name_is_removed() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    let proxy = HoldingProxy::start(slapd.port());
    let a = Master::start(&slapd, &da, "ca1.test");
    let b = Master::start_env(&db, "ca2.test", &via(&slapd, &proxy), &[]);
    let name = "late.example.test";
    // Master B: someone's bare request for the name, refused; its keeping (the add) is held.
    proxy.hold_add_of("ou=requests");
    let none = vouch::vouching::attrs::CsrAttributes {
        custom_attributes: Default::default(),
        extension_requests: Default::default(),
    };
    let (mut c, bare) = (b.client(), csr_for(name, &none, &p256()));
    let put = std::thread::spawn(move || {
        c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &bare)
            .map(|r| (r.status, r.text()))
    });
    assert!(proxy.wait_held(Duration::from_secs(60)), "master B never kept the request:\n{}", b.log());
    // Master A issues the node's certificate meanwhile (its search sees no request).
    let attrs = common::agents::vouched(&da, name, CLASSIFICATION);
    let (put_a, why, cert) = enroll(&a, name, &csr_for(name, &attrs, &p256()));
    assert!(put_a == 200 && cert.is_some(), "{why}\n{}", a.log());
    proxy.release();
    put.join().unwrap().unwrap();
    let left = slapd.ldapsearch(BASE, &format!("(&(objectClass=vouchRequest)(vouchCertname={name}))"), &["dn"]);
    assert!(
        !left.ok().contains("dn:"),
        "a refused request stays pending beside the certificate another master issued: {}\n{}",
        left.ok(),
        b.log()
    );
}

/// The store's URL through `proxy` (the other variables as `store_env` gives them).
fn via(slapd: &Slapd, proxy: &HoldingProxy) -> Vec<(String, String)> {
    store_env(slapd)
        .into_iter()
        .map(|(k, v)| {
            if k == "VOUCH_STORE" {
                (k, format!("ldap://127.0.0.1:{}/{}", proxy.port, BASE.replace(',', "%2C").replace('=', "%3D")))
            } else {
                (k, v)
            }
        })
        .collect()
}

/// The window that remains (docs/limitations.md): a bare request (anyone's key, no
/// attributes) that another master keeps, and reads the registry after, while this master's
/// issuance is between its search (which saw no request) and its registry add stays pending
/// beside the node's new certificate. What holds: it cannot be approved while the certificate
/// is valid, and the certificate stays the node's. (Fails if approving it issued a second
/// certificate for the name.)
#[test]
fn a_request_kept_during_an_issuance_cannot_be_approved_beside_its_certificate() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let (da, db) = (tmp.path().join("a"), tmp.path().join("b"));
    let proxy = HoldingProxy::start(slapd.port());
    let via_proxy: Vec<(String, String)> = store_env(&slapd)
        .into_iter()
        .map(|(k, v)| {
            if k == "VOUCH_STORE" {
                (k, format!("ldap://127.0.0.1:{}/{}", proxy.port, BASE.replace(',', "%2C").replace('=', "%3D")))
            } else {
                (k, v)
            }
        })
        .collect();
    let a = Master::start_env(&da, "ca1.test", &via_proxy, &[]);
    let b = Master::start(&slapd, &db, "ca2.test");
    let name = "raced.example.test";
    let attrs = common::agents::vouched(&da, name, CLASSIFICATION);
    let csr = csr_for(name, &attrs, &p256());
    // Master A: its search passes, its journal add (admission's claim) is held.
    proxy.hold_add_of("ou=journal");
    let (mut c, csr_a) = (a.client(), csr.clone());
    let put = std::thread::spawn(move || {
        c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr_a)
            .map(|r| (r.status, r.text()))
    });
    assert!(proxy.wait_held(std::time::Duration::from_secs(60)), "master A never claimed:\n{}", a.log());
    // Meanwhile at master B: someone's bare request for the name, refused and kept.
    let none = vouch::vouching::attrs::CsrAttributes {
        custom_attributes: Default::default(),
        extension_requests: Default::default(),
    };
    let (put_b, why_b, _) = enroll(&b, name, &csr_for(name, &none, &p256()));
    let kept = slapd.ldapsearch(BASE, &format!("(&(objectClass=vouchRequest)(vouchCertname={name}))"), &["dn"]);
    assert!(kept.ok().contains("dn:"), "B did not keep the bare request (PUT {put_b} {why_b}): {}", b.log());
    proxy.release();
    let (status, why) = put.join().unwrap().unwrap();
    assert_eq!(status, 200, "{why}\n{}", a.log());
    let mut c = a.client();
    let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
    assert_eq!(get.status, 200, "the node's certificate: {}\n{}", get.text(), a.log());
    let serial = |c: &mut vouch::serve::client::Client| {
        let pem = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap().text();
        let (_, der) = vouch::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).unwrap();
        vouch::encoding::hex(x509_parser::parse_x509_certificate(&der).unwrap().1.raw_serial())
    };
    let issued = serial(&mut c);
    // B's administrator may approve nodes no conductor launched.
    let policy = db.join("policy.toml");
    let p = std::fs::read_to_string(&policy).unwrap();
    assert!(p.contains("admin_approval = false"), "{p}");
    std::fs::write(&policy, p.replace("admin_approval = false", "admin_approval = true")).unwrap();
    let o = vouch().envs(store_env(&slapd)).args(["--dir", s(&db), "approve", name]).output().unwrap();
    assert!(!o.status.success(), "a request kept beside a valid certificate was approved: {}", text(&o));
    assert!(text(&o).contains("already has a valid certificate"), "{}", text(&o));
    assert_eq!(serial(&mut c), issued, "the node's certificate changed");
}

/// A TCP proxy in front of slapd that holds the next add request whose DN contains a given
/// fragment until released (the write not yet sent to the server), so that a test can act
/// between one master's search and its writes without a clock.
struct HoldingProxy {
    port: u16,
    state: std::sync::Arc<(std::sync::Mutex<Hold>, std::sync::Condvar)>,
}

#[derive(Default)]
struct Hold {
    armed: Option<String>,
    held: bool,
    released: bool,
}

impl HoldingProxy {
    fn start(to: u16) -> HoldingProxy {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state: std::sync::Arc<(std::sync::Mutex<Hold>, std::sync::Condvar)> = Default::default();
        let st = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", to)) else { continue };
                let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let st = st.clone();
                std::thread::spawn(move || {
                    let (mut buf, mut chunk) = (Vec::new(), [0u8; 16384]);
                    while let Ok(n) = c_in.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(len) = element_len(&buf) {
                            let msg: Vec<u8> = buf.drain(..len).collect();
                            let (lock, cv) = &*st;
                            let mut h = lock.lock().unwrap();
                            let hit = matches!((&h.armed, request_dn(&msg, 0x68)), (Some(w), Some(dn)) if dn.contains(w.as_str()));
                            if hit {
                                h.armed = None;
                                h.held = true;
                                cv.notify_all();
                                while !h.released {
                                    h = cv.wait(h).unwrap();
                                }
                            }
                            drop(h);
                            if s_out.write_all(&msg).is_err() {
                                return;
                            }
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                    let _ = c_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        HoldingProxy { port, state }
    }

    fn hold_add_of(&self, dn_part: &str) {
        let mut h = self.state.0.lock().unwrap();
        *h = Hold { armed: Some(dn_part.to_string()), held: false, released: false };
    }

    /// Waits (bounded) until the armed add is held; false if it never came.
    fn wait_held(&self, within: std::time::Duration) -> bool {
        let (lock, cv) = &*self.state;
        let h = lock.lock().unwrap();
        let (h, _) = cv.wait_timeout_while(h, within, |h| !h.held).unwrap();
        h.held
    }

    fn release(&self) {
        let (lock, cv) = &*self.state;
        lock.lock().unwrap().released = true;
        cv.notify_all();
    }
}

/// Review: `vouch revoke` run on the data directory (its file store) while `vouch migrate`
/// copies it. The revoke passes the retired-store check before migrate marks the directory,
/// then waits for the file store's lock migrate holds; once migrate has marked the store
/// retired and let go, the revoke writes its revocation into the retired file store and says
/// it revoked. No master reads that store: the certificate stays valid on the shared store.
/// What must hold: the revoke is refused (the store retired), or its revocation is on the
/// shared store. (Fails while the marker is read only before the store's lock is taken.)
#[test]
fn a_revoke_waiting_for_migrates_lock_is_not_left_in_the_retired_file_store() {
    let slapd = slapd();
    let tmp = tempfile::tempdir().unwrap();
    let d1 = tmp.path().join("m1");
    let name = "raced-revoke.example.test";
    {
        let m = Master::start_env(&d1, "ca1.test", &[], &[]);
        let attrs = common::agents::vouched(&d1, name, CLASSIFICATION);
        let (put, why, cert) = enroll(&m, name, &csr_for(name, &attrs, &p256()));
        assert_eq!(put, 200, "{why}");
        assert!(cert.is_some(), "no certificate on the file store:\n{}", m.log());
    }
    let proxy = HoldingProxy::start(slapd.port());
    let env: Vec<(String, String)> = via(&slapd, &proxy).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect();
    let url = format!("ldap://127.0.0.1:{}/{}", proxy.port, BASE.replace(',', "%2C").replace('=', "%3D"));
    // migrate holds the file store's lock from its start; its first certificate's add is held.
    proxy.hold_add_of("ou=certnames");
    let migrate = vouch()
        .envs(env)
        .args(["--dir", s(&d1), "migrate", "--to", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(proxy.wait_held(Duration::from_secs(60)), "migrate never copied a certificate");
    let (out, err) = (tmp.path().join("revoke.out"), tmp.path().join("revoke.err"));
    let revoke = vouch()
        .args(["--dir", s(&d1), "revoke", name])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // The revoke waits for the lock migrate holds (it says so after a second).
    common::processes::Wait::up_to(Duration::from_secs(30))
        .showing(|| std::fs::read_to_string(&err).unwrap_or_default())
        .until("the revoke waiting for migrate's lock", || {
            std::fs::read_to_string(&err).unwrap_or_default().contains("waiting for the store's lock")
        });
    proxy.release();
    let migrated = migrate.wait_with_output().unwrap();
    assert!(migrated.status.success(), "{}", text(&migrated));
    let revoked = revoke.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    if !revoked.status.success() {
        assert!(said.contains("retired"), "the revoke failed for another reason: {said}");
        return;
    }
    let listed: Vec<serde_json::Value> = serde_json::from_str(&ok(&vouch()
        .envs(store_env(&slapd))
        .args(["--dir", s(&d1), "list", "--all", "--format", "json"])
        .output()
        .unwrap()))
    .unwrap();
    let on_ldap: Vec<&serde_json::Value> = listed.iter().filter(|e| e["name"] == name).collect();
    assert!(
        on_ldap.iter().any(|e| e["state"] == "revoked"),
        "vouch revoke said it revoked ({said}), but the shared store holds no revocation: {on_ldap:?}\nmigrate: {}",
        text(&migrated)
    );
}
