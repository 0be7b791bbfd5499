//! The private OpenLDAP servers of tests/common/slapd.rs do what the LDAP store's tests rely
//! on: a search and an add answer on ldap:// and ldapi://, one of many concurrent adds of a DN
//! wins, data survives a restart and a SIGKILL, a pair of providers replicates both ways, and
//! no slapd outlives its handle. Needs `slapd` and `ldap-utils`: missing, these tests fail.

mod common;

use common::slapd::{percent_encode, run_tool, Slapd, SlapdOpts, ROOT_DN, SUFFIX};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

/// A tiny schema in a private OID arc (2.25.<a UUID as an integer>): one attribute, one class.
const SCHEMA: &str = "\
attributetype ( 2.25.128221637919989285452795824589767693616.1.1 NAME 'harnessName'
    DESC 'a test entry name' EQUALITY caseIgnoreIA5Match SYNTAX 1.3.6.1.4.1.1466.115.121.1.26 SINGLE-VALUE )
objectclass ( 2.25.128221637919989285452795824589767693616.2.1 NAME 'harnessEntry'
    DESC 'a test entry' SUP top STRUCTURAL MUST harnessName )
";

const OU: &str = "ou=vouch,dc=vouch,dc=test";
/// Replication on loopback takes milliseconds; this is what a loaded CI machine gets.
const REPLICATION_BOUND: Duration = Duration::from_secs(10);

fn opts() -> SlapdOpts {
    SlapdOpts { schema: Some(SCHEMA.into()), indexes: vec!["harnessName eq".into()], ..SlapdOpts::default() }
}

fn entry(name: &str) -> String {
    format!("dn: harnessName={name},{OU}\nobjectClass: harnessEntry\nharnessName: {name}\n")
}

fn dn(name: &str) -> String {
    format!("harnessName={name},{OU}")
}

fn add_ou(s: &Slapd) {
    s.ldapadd(&format!("dn: {OU}\nobjectClass: organizationalUnit\nou: vouch\n")).ok();
}

/// Whether a process with this PID exists (a zombie counts).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The PIDs of processes whose command line mentions `dir`.
fn processes_mentioning(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(&needle) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_private_slapd_answers_searches_and_adds_on_both_urls() {
    let s = Slapd::start(&opts());
    assert_eq!(s.url(OU), format!("ldap://127.0.0.1:{}/ou=vouch,dc=vouch,dc=test", s.port()));
    let socket = percent_encode(&s.socket().to_string_lossy(), b"");
    assert!(socket.starts_with("%2F") && !socket.contains('/'), "{socket}");
    assert_eq!(s.ldapi_url(""), format!("ldapi://{socket}/"));
    assert_eq!(s.url("o=a b?,dc=x"), format!("ldap://127.0.0.1:{}/o=a%20b%3F,dc=x", s.port()));
    assert_eq!(s.bind_dn(), ROOT_DN);
    assert_eq!(common::mode(&s.password_file()), 0o600);
    let password = std::fs::read_to_string(s.password_file()).unwrap();
    assert!(password.len() >= 32 && !password.contains('\n'), "{password:?}");

    // The suffix entry is there; the caller's schema and index are in use.
    let base = s.ldapsearch(SUFFIX, "(objectClass=dcObject)", &["dc", "o"]);
    assert!(base.ok().contains("dn: dc=vouch,dc=test\ndc: vouch\no: vouch"), "{base}");
    add_ou(&s);
    s.ldapadd(&entry("web01")).ok();
    let found = s.ldapsearch(OU, "(harnessName=WEB01)", &["harnessName"]);
    assert_eq!(found.ok(), format!("dn: {}\nharnessName: web01\n\n", dn("web01")));
    let refused = s.ldapadd(&format!("dn: harnessName=x,{OU}\nobjectClass: harnessEntry\nharnessName: x\nbogus: 1\n"));
    assert_eq!(refused.code, 17, "an attribute the schema lacks: {refused}");
    assert!(s.log().contains("slapd starting"), "{}", s.log());

    // ldapmodify, then the change read back over ldapi:// as the root DN (SASL EXTERNAL).
    s.ldapmodify(&format!("dn: {OU}\nchangetype: modify\nadd: description\ndescription: here\n")).ok();
    let ldapi = s.ldapi_url("");
    let whoami = run_tool("ldapwhoami", &["-Q", "-Y", "EXTERNAL", "-H", &ldapi], None, Duration::from_secs(10));
    assert_eq!(whoami.ok().trim(), format!("dn:{ROOT_DN}"));
    let over_ldapi = run_tool(
        "ldapsearch",
        &["-Q", "-Y", "EXTERNAL", "-H", &ldapi, "-LLL", "-b", OU, "-s", "base", "description"],
        None,
        Duration::from_secs(10),
    );
    assert_eq!(over_ldapi.ok(), format!("dn: {OU}\ndescription: here\n\n"));

    // Anonymous clients see the root DSE, not the data.
    let url = s.url("");
    let anonymous = |base: &str, scope: &str| {
        run_tool("ldapsearch", &["-x", "-H", &url, "-LLL", "-b", base, "-s", scope], None, Duration::from_secs(10))
    };
    assert!(anonymous("", "base").ok().contains("dn:"));
    let hidden = anonymous(SUFFIX, "sub");
    assert!(!hidden.stdout.contains("web01"), "{hidden}");
    assert_eq!(hidden.code, 32, "{hidden}");
    // A wrong password is refused.
    let wrong = s.dir().join("wrong");
    std::fs::write(&wrong, "not-it").unwrap();
    let args = ["-x", "-H", &url, "-D", ROOT_DN, "-y", common::s(&wrong), "-b", SUFFIX, "-s", "base"];
    assert_eq!(run_tool("ldapsearch", &args, None, Duration::from_secs(10)).code, 49);
}

#[test]
fn sixteen_concurrent_adds_of_one_dn_exactly_one_succeeds() {
    let s = Slapd::start(&opts());
    add_ou(&s);
    for trial in 0..5 {
        let name = format!("race{trial}");
        let ldif = entry(&name);
        let barrier = Barrier::new(16);
        let codes = Mutex::new(Vec::new());
        std::thread::scope(|t| {
            for _ in 0..16 {
                t.spawn(|| {
                    barrier.wait();
                    let out = s.ldapadd(&ldif);
                    assert!(out.code == 0 || out.code == 68, "neither added nor \"Already exists\": {out}");
                    codes.lock().unwrap().push(out.code);
                });
            }
        });
        let codes = codes.into_inner().unwrap();
        assert_eq!(codes.iter().filter(|&&c| c == 0).count(), 1, "trial {trial}: {codes:?}");
        assert_eq!(codes.iter().filter(|&&c| c == 68).count(), 15, "trial {trial}: {codes:?}");
        let found = s.ldapsearch(OU, &format!("(harnessName={name})"), &["1.1"]);
        assert_eq!(found.ok().matches("dn: ").count(), 1, "{found}");
    }
}

/// Adds entries `prefix-N` one after another until `stop`; returns the names acknowledged.
fn add_until(s: &Slapd, prefix: &str, stop: &AtomicBool) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let name = format!("{prefix}-{n}");
        // Refused while slapd is down (connection refused, 255): that is expected under a restart.
        if s.ldapadd(&entry(&name)).success() {
            acknowledged.push(name);
        }
    }
    acknowledged
}

fn assert_all_present(s: &Slapd, names: &[String]) {
    let found = s.ldapsearch(OU, "(objectClass=harnessEntry)", &["harnessName"]);
    let found = found.ok();
    let missing: Vec<&String> = names.iter().filter(|n| !found.contains(&format!("harnessName: {n}\n"))).collect();
    assert!(missing.is_empty(), "acknowledged but gone: {missing:?}");
}

#[test]
fn a_restart_keeps_the_data_port_and_urls_while_a_writer_goes_on() {
    let s = Slapd::start(&opts());
    add_ou(&s);
    s.ldapadd(&entry("before")).ok();
    let (port, url, first) = (s.port(), s.url(OU), s.pid().unwrap());
    let stop = AtomicBool::new(false);
    let acknowledged = std::thread::scope(|t| {
        let writer = t.spawn(|| add_until(&s, "load", &stop));
        std::thread::sleep(Duration::from_millis(200));
        s.restart();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap()
    });
    let second = s.pid().unwrap();
    assert_ne!(first, second);
    assert!(!alive(first), "the first slapd (pid {first}) is still there");
    assert_eq!((s.port(), s.url(OU)), (port, url));
    assert!(s.has_dn(&dn("before")));
    assert!(!acknowledged.is_empty());
    assert_all_present(&s, &acknowledged);

    // Stopped, it answers nothing; restarted, it has everything.
    assert!(s.stop().unwrap().success(), "slapd's exit after SIGTERM; log:\n{}", s.log());
    assert_eq!(s.pid(), None);
    assert!(!alive(second));
    let down = s.ldapsearch(SUFFIX, "(objectClass=*)", &["1.1"]);
    assert_eq!(down.code, 255, "{down}");
    s.restart();
    assert!(s.has_dn(&dn("before")));
    assert_all_present(&s, &acknowledged);
}

#[test]
fn a_killed_slapd_restarts_with_every_acknowledged_add() {
    let s = Slapd::start(&opts());
    add_ou(&s);
    let stop = AtomicBool::new(false);
    let acknowledged = std::thread::scope(|t| {
        let writer = t.spawn(|| add_until(&s, "k", &stop));
        std::thread::sleep(Duration::from_millis(300));
        let pid = s.pid().unwrap();
        let status = s.kill().unwrap();
        assert!(!status.success() && !alive(pid), "{status:?}");
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap()
    });
    assert!(!acknowledged.is_empty());
    assert!(!s.is_running());
    s.restart();
    assert!(s.is_running());
    assert_all_present(&s, &acknowledged);
    s.ldapadd(&entry("after")).ok();
    // A second SIGKILL with nothing in flight, then the same again.
    s.kill();
    s.restart();
    assert!(s.has_dn(&dn("after")));
}

#[test]
fn the_pair_replicates_adds_both_ways_and_catches_up_after_a_kill() {
    let (one, two) = Slapd::start_pair(&opts());
    assert_ne!(one.port(), two.port());
    assert_eq!(std::fs::read(one.password_file()).unwrap(), std::fs::read(two.password_file()).unwrap());
    add_ou(&one);
    let took = two.wait_for_dn(OU, REPLICATION_BOUND).unwrap();
    one.ldapadd(&entry("from-one")).ok();
    let one_to_two = two.wait_for_dn(&dn("from-one"), REPLICATION_BOUND).unwrap();
    two.ldapadd(&entry("from-two")).ok();
    let two_to_one = one.wait_for_dn(&dn("from-two"), REPLICATION_BOUND).unwrap();
    eprintln!("replicated: the ou in {took:?}, 1→2 in {one_to_two:?}, 2→1 in {two_to_one:?}");
    // Not readable before it is added: the wait is a real check.
    assert!(!two.has_dn(&dn("never")));
    assert!(two.wait_for_dn(&dn("never"), Duration::from_millis(200)).is_err());

    // One provider killed: the other takes writes; the killed one catches up once restarted.
    two.kill();
    one.ldapadd(&entry("while-two-was-down")).ok();
    two.restart();
    two.wait_for_dn(&dn("while-two-was-down"), REPLICATION_BOUND).unwrap();
    one.stop();
    two.ldapadd(&entry("while-one-was-down")).ok();
    one.restart();
    one.wait_for_dn(&dn("while-one-was-down"), REPLICATION_BOUND).unwrap();
}

#[test]
fn dropping_a_slapd_leaves_no_process_and_no_directory() {
    let single = Slapd::start(&SlapdOpts { dbnosync: true, ..opts() });
    add_ou(&single);
    single.ldapadd(&entry("nosync")).ok();
    let (one, two) = Slapd::start_pair(&SlapdOpts::default());
    let mut seen = Vec::new();
    for s in [&single, &one, &two] {
        let pid = s.pid().unwrap();
        assert!(alive(pid));
        assert_eq!(processes_mentioning(s.dir()), vec![pid], "{}", s.dir().display());
        seen.push((pid, s.dir().to_path_buf()));
    }
    two.kill(); // a handle whose slapd is already gone drops as well
    drop((single, one, two));
    for (pid, dir) in seen {
        assert!(!alive(pid), "slapd pid {pid} outlived its handle");
        assert!(processes_mentioning(&dir).is_empty(), "{}", dir.display());
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

#[test]
fn a_slapd_that_cannot_start_fails_loudly_with_its_log() {
    let bad = SlapdOpts { indexes: vec!["noSuchAttribute eq".into()], ..SlapdOpts::default() };
    let panic = std::panic::catch_unwind(|| Slapd::start(&bad)).err().expect("slapd started with a bad index");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("exited") && message.contains("noSuchAttribute"), "{message}");
    let bad = SlapdOpts { schema: Some("attributetype ( 2.25.1 NAME 'broken' SYNTAX )\n".into()), ..opts() };
    let panic = std::panic::catch_unwind(|| Slapd::start(&bad)).err().expect("slapd started with a bad schema");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("extra.schema"), "{message}");
}
