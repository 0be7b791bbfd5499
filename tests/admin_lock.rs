//! The fleet's lock on revocations of administrator certificates (docs/ldap.md, "Revoking an
//! administrator"), against the real vouch binary on a private slapd and (`_on_389ds`) on a
//! base DN of its own on the test binary's private 389 Directory Server: two masters revoking
//! the fleet's last two administrators at once leave one, and a master killed while it held
//! the lock blocks a later revocation no longer than the lock's time.

mod common;

use common::ds389::Ds389;
use common::ldap_lab::{openldap_store, store_env, Directory, Master};
use common::processes::{ended_within, wait_within, Wait};
use common::{ok, s, text, vouch};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The lock's time (`VOUCH_TEST_ADMIN_LOCK_SECS`, a build with fault injection) of a master
/// killed while it holds it: its lock passes after that.
const SHORT: &str = "3";

/// The lock's time of a master paused while it holds it: far longer than the test (the
/// other master's wait, its own default, ends before it: it never takes the lock over).
const LONG: &str = "600";

/// `vouch` in `dir` on the store `env` names.
fn run_in(dir: &Path, env: &[(String, String)], args: &[&str]) -> std::process::Output {
    vouch().envs(env.iter().cloned()).args(["--dir", s(dir)]).args(args).output().unwrap()
}

/// Two masters of `slapd`'s store (`m1`, `m2` under `tmp`), and the fleet's only two
/// administrators: master 1's first-run `vouch-admin` and master 2's `alice`.
fn two_masters_two_administrators(slapd: &dyn Directory, tmp: &Path) -> (PathBuf, PathBuf, Vec<(String, String)>) {
    let (d1, d2) = (tmp.join("m1"), tmp.join("m2"));
    drop(Master::start(slapd, &d1, "ca1.test"));
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    let env = store_env(slapd);
    let (cert, key) = (tmp.join("alice.pem"), tmp.join("alice.key"));
    ok(&run_in(&d2, &env, &["admin", "new", "alice", "--cert-out", s(&cert), "--key-out", s(&key)]));
    (d1, d2, env)
}

/// `vouch revoke NAME` in `dir`, started: stdout dropped, stderr into `err`.
fn start_revoke(dir: &Path, env: &[(String, String)], extra: &[(&str, &str)], name: &str, err: &Path) -> Child {
    vouch()
        .envs(env.iter().cloned())
        .envs(extra.iter().copied())
        .args(["--dir", s(dir), "revoke", name])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

/// The lock entry's value, as the server's administrator reads it.
fn lock_value(slapd: &dyn Directory) -> String {
    let out = slapd.ldapsearch(&slapd.base(), "(vouchCa=admin-revocation-lock)", &["vouchCertificate"]);
    let found = out.ok().lines().find_map(|l| l.strip_prefix("vouchCertificate: ")).map(str::to_string);
    found.unwrap_or_else(|| panic!("no lock entry with a plain value: {out}"))
}

fn said(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The "Revoked Certificates:" section of `vouch list --all`.
fn revoked_section(listed: &str) -> &str {
    listed.split("Revoked Certificates:").nth(1).unwrap_or_else(|| panic!("no revoked section: {listed}"))
}

/// Master 1 revokes `vouch-admin` and master 2 `alice`, the fleet's only administrators, at
/// once: master 1 is paused after its guard counted alice as the administrator left, and
/// master 2 runs while it is. What must hold: exactly one of the two is revoked, and the
/// other revocation is refused, naming the last administrator. (Each master counted the
/// other's administrator and both revoked while nothing locked one master out.)
#[test]
fn two_masters_revoking_the_last_two_administrators_at_once_leave_one() {
    racing_revokes(&openldap_store());
}

#[test]
fn two_masters_revoking_the_last_two_administrators_at_once_leave_one_on_389ds() {
    racing_revokes(&Ds389::store("admin_lock_race"));
}

fn racing_revokes(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, env) = two_masters_two_administrators(slapd, tmp.path());
    let paused = tmp.path().join("paused");
    let (a_err, b_err) = (tmp.path().join("a.err"), tmp.path().join("b.err"));
    let pause = [
        ("VOUCH_TEST_PAUSE_AT", "revoke:admin-counted"),
        ("VOUCH_TEST_PAUSE_FILE", s(&paused)),
        ("VOUCH_TEST_ADMIN_LOCK_SECS", LONG),
    ];
    let mut a = start_revoke(&d1, &env, &pause, "vouch-admin", &a_err);
    Wait::up_to(Duration::from_secs(60)).showing(|| said(&a_err)).until("master 1 paused after its count", || {
        assert!(a.try_wait().unwrap().is_none(), "master 1 ended before its pause: {}", said(&a_err));
        paused.exists()
    });
    let mut b = start_revoke(&d2, &env, &[], "alice", &b_err);
    // Master 2 runs until it waits for master 1 (the fix), or to its end (no lock).
    Wait::up_to(Duration::from_secs(60)).showing(|| said(&b_err)).until("master 2 waiting, or ended", || {
        said(&b_err).contains("waiting for") || b.try_wait().unwrap().is_some()
    });
    std::fs::remove_file(&paused).unwrap();
    let ra = wait_within(&mut a, Duration::from_secs(60), "master 1's revoke");
    let rb = wait_within(&mut b, Duration::from_secs(60), "master 2's revoke");
    let listed = ok(&run_in(&d1, &env, &["list", "--all"]));
    let outcome =
        format!("{listed}\nmaster 1 (vouch-admin): {ra}: {}\nmaster 2 (alice): {rb}: {}", said(&a_err), said(&b_err));
    assert!(!(ra.success() && rb.success()), "both administrators revoked without --force, none left: {outcome}");
    assert!(ra.success(), "master 1, which counted first, revokes vouch-admin: {outcome}");
    assert_eq!(rb.code(), Some(2), "{outcome}");
    let err = said(&b_err);
    assert!(err.contains("alice") && err.contains("last valid administrator certificate"), "{outcome}");
    let revoked = revoked_section(&listed);
    assert!(revoked.contains("vouch-admin") && !revoked.contains("alice"), "{outcome}");
}

/// A master killed while it holds the lock (aborted right after taking it, its time 3 s): a
/// later revocation of an administrator at the other master waits for that time to pass
/// (13 s at most: its own time and 10 s), takes the lock over, and revokes. What must hold:
/// the later revocation succeeds, and the lock is free after it. (Before the lock, the
/// killed master's process was never stopped there: it revoked.)
#[test]
fn a_master_killed_holding_the_lock_blocks_no_later_revocation_for_good() {
    stale_holder(&openldap_store());
}

#[test]
fn a_master_killed_holding_the_lock_blocks_no_later_revocation_for_good_on_389ds() {
    stale_holder(&Ds389::store("admin_lock_stale"));
}

fn stale_holder(slapd: &dyn Directory) {
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, env) = two_masters_two_administrators(slapd, tmp.path());
    let (a_err, b_err) = (tmp.path().join("a.err"), tmp.path().join("b.err"));
    let abort = [("VOUCH_TEST_ABORT_AT", "admin-lock:taken"), ("VOUCH_TEST_ADMIN_LOCK_SECS", SHORT)];
    let mut a = start_revoke(&d1, &env, &abort, "vouch-admin", &a_err);
    let ra = wait_within(&mut a, Duration::from_secs(60), "master 1's revoke");
    assert!(!ra.success() && ra.code().is_none(), "master 1 was not killed holding the lock: {ra}: {}", said(&a_err));
    let lock = lock_value(slapd);
    assert!(lock.contains(" until "), "the lock is not held: {lock}");
    let listed = ok(&run_in(&d1, &env, &["list", "--all"]));
    assert!(!revoked_section(&listed).contains("vouch-admin"), "master 1 revoked before it was killed: {listed}");
    let mut b = start_revoke(&d2, &env, &[("VOUCH_TEST_ADMIN_LOCK_SECS", SHORT)], "vouch-admin", &b_err);
    let rb = ended_within(&mut b, Duration::from_secs(120));
    let rb = rb.unwrap_or_else(|| {
        let _ = b.kill();
        panic!("master 2 still waits: {}", said(&b_err))
    });
    assert!(rb.success(), "master 2 did not revoke after the killed holder's time: {rb}: {}", said(&b_err));
    let listed = ok(&run_in(&d2, &env, &["list", "--all"]));
    assert!(revoked_section(&listed).contains("vouch-admin"), "{listed}");
    let lock = lock_value(slapd);
    assert_eq!(lock, "free", "the lock was not given back");
    // Nothing else in the way: alice, now the last administrator, is refused at once.
    let out = run_in(&d1, &env, &["revoke", "alice"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A TCP proxy in front of slapd that, once `slow` is set, hands each answer of the server
/// to the client `delay` after it came (in order; the requests go through at once): the
/// server applies a write at once, its client hears of it `delay` later.
struct SlowAnswers {
    port: u16,
    slow: Arc<AtomicBool>,
}

impl SlowAnswers {
    fn start(to: u16, delay: Duration) -> SlowAnswers {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let slow = Arc::new(AtomicBool::new(false));
        let sl = slow.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(Shutdown::Write);
                });
                let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
                let (mut s_in, mut c_out, sl) = (server, client, sl.clone());
                std::thread::spawn(move || {
                    let mut chunk = [0u8; 16384];
                    while let Ok(n) = s_in.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        let due = if sl.load(Ordering::SeqCst) { Instant::now() + delay } else { Instant::now() };
                        if tx.send((due, chunk[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                });
                std::thread::spawn(move || {
                    for (due, bytes) in rx {
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                        if c_out.write_all(&bytes).is_err() {
                            return;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Write);
                });
            }
        });
        SlowAnswers { port, slow }
    }
}

/// A lease without a fence (found by review): `confirm` moved its time on just before the
/// revocation, and nothing bounded the time from that confirm to the write. Master 1's answers
/// from the server come 4 s late (a slow network; each still inside the client's 5 s
/// timeout), its lock's time is 1 s (`VOUCH_TEST_ADMIN_LOCK_SECS`, standing for the 30 s
/// lease against a longer stall): its confirm is applied at once, its lease passes while
/// the answer travels, master 2 takes the lock over, counts vouch-admin as the administrator
/// left and revokes alice; master 1 then hears its confirm succeeded and revokes
/// vouch-admin. What must hold: never both revoked without --force (now: a confirm heard
/// after half the lease writes nothing; master 2 takes over only after seeing the value
/// unchanged for a whole lease on its own clock).
#[test]
fn a_confirm_heard_after_half_its_lease_writes_nothing_and_one_administrator_is_left() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, env) = two_masters_two_administrators(&slapd, tmp.path());
    let proxy = SlowAnswers::start(slapd.port(), Duration::from_secs(4));
    let direct = format!(":{}/", slapd.port());
    let slow_env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| {
            (k.clone(), if k == "VOUCH_STORE" { v.replace(&direct, &format!(":{}/", proxy.port)) } else { v.clone() })
        })
        .collect();
    let paused = tmp.path().join("paused");
    let (a_err, b_err) = (tmp.path().join("a.err"), tmp.path().join("b.err"));
    let pause = [
        ("VOUCH_TEST_PAUSE_AT", "revoke:admin-counted"),
        ("VOUCH_TEST_PAUSE_FILE", s(&paused)),
        ("VOUCH_TEST_ADMIN_LOCK_SECS", "1"),
    ];
    let mut a = start_revoke(&d1, &slow_env, &pause, "vouch-admin", &a_err);
    Wait::up_to(Duration::from_secs(60)).showing(|| said(&a_err)).until("master 1 paused after its count", || {
        assert!(a.try_wait().unwrap().is_none(), "master 1 ended before its pause: {}", said(&a_err));
        paused.exists()
    });
    let taken = lock_value(&slapd);
    let holder = taken.split(" until ").next().unwrap().to_string();
    assert!(taken.contains(" until "), "master 1 holds no lock: {taken:?}");
    proxy.slow.store(true, Ordering::SeqCst);
    std::fs::remove_file(&paused).unwrap();
    // Master 1's confirm: applied at the server (its time moved on), its answer not heard yet.
    Wait::up_to(Duration::from_secs(60)).showing(|| lock_value(&slapd)).until("master 1's confirm applied", || {
        let v = lock_value(&slapd);
        v != taken && v.starts_with(&holder)
    });
    let mut b = start_revoke(&d2, &env, &[], "alice", &b_err);
    let rb = wait_within(&mut b, Duration::from_secs(120), "master 2's revoke");
    let ra = wait_within(&mut a, Duration::from_secs(240), "master 1's revoke");
    let listed = ok(&run_in(&d2, &env, &["list", "--all"]));
    let outcome =
        format!("{listed}\nmaster 1 (vouch-admin): {ra}: {}\nmaster 2 (alice): {rb}: {}", said(&a_err), said(&b_err));
    assert!(!(ra.success() && rb.success()), "both administrators revoked without --force, none left: {outcome}");
}

/// A TCP proxy in front of slapd that, once armed with a holder's name, forwards the first
/// request naming it (the holder's confirm) at once and every later request of any of its
/// connections `delay` after it came: the holder's confirm is answered at once, and its
/// revocation write then reaches the server late (a master stalled between its confirm and
/// its write, or a slow network on the way there).
struct SlowAfterConfirm {
    port: u16,
    holder: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    stalling: Arc<AtomicBool>,
}

impl SlowAfterConfirm {
    fn start(to: u16, delay: Duration) -> SlowAfterConfirm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let holder: Arc<std::sync::Mutex<Option<Vec<u8>>>> = Arc::default();
        let stalling = Arc::new(AtomicBool::new(false));
        let (h, st) = (holder.clone(), stalling.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                let (mut s_in, mut c_out) = (server.try_clone().unwrap(), client.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                    let _ = c_out.shutdown(Shutdown::Write);
                });
                let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
                let (mut c_in, mut s_out, h, st) = (client, server, h.clone(), st.clone());
                std::thread::spawn(move || {
                    let mut chunk = [0u8; 16384];
                    while let Ok(n) = c_in.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        let bytes = chunk[..n].to_vec();
                        let mut due = Instant::now();
                        if st.load(Ordering::SeqCst) {
                            due += delay;
                        } else if let Some(name) = h.lock().unwrap().as_ref() {
                            if bytes.windows(name.len()).any(|w| w == name.as_slice()) {
                                st.store(true, Ordering::SeqCst);
                            }
                        }
                        if tx.send((due, bytes)).is_err() {
                            break;
                        }
                    }
                });
                std::thread::spawn(move || {
                    for (due, bytes) in rx {
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                        if s_out.write_all(&bytes).is_err() {
                            return;
                        }
                    }
                    let _ = s_out.shutdown(Shutdown::Write);
                });
            }
        });
        SlowAfterConfirm { port, holder, stalling }
    }
}

/// a holder whose confirm is answered at once (well within half its lease)
/// and whose revocation write then reaches the server late. Master 1's lock time is 1 s
/// (`VOUCH_TEST_ADMIN_LOCK_SECS`, standing for the 30 s lease), its requests after the
/// confirm reach slapd 4 s late (each inside the client's timeout); master 2, started once
/// the confirm is applied, sees the confirmed value unchanged for its 1 s lease, takes the
/// lock over, counts vouch-admin as the administrator left and revokes alice; master 1's
/// write of vouch-admin's revocation lands after. What must hold: never both revoked
/// without --force. (docs/ldap.md names this as what is left: nothing fences the write.)
#[test]
#[ignore = "the residual docs/ldap.md names: a revocation write held up more than half a lease after its confirm meets a second count (LDAP cannot fence it); kept to show it"]
fn a_write_landing_late_after_a_timely_confirm_leaves_no_administrator() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, env) = two_masters_two_administrators(&slapd, tmp.path());
    let proxy = SlowAfterConfirm::start(slapd.port(), Duration::from_secs(4));
    let direct = format!(":{}/", slapd.port());
    let slow_env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| {
            (k.clone(), if k == "VOUCH_STORE" { v.replace(&direct, &format!(":{}/", proxy.port)) } else { v.clone() })
        })
        .collect();
    assert_ne!(slow_env, env, "master 1 does not go through the proxy");
    let paused = tmp.path().join("paused");
    let (a_err, b_err) = (tmp.path().join("a.err"), tmp.path().join("b.err"));
    let lease = [("VOUCH_TEST_ADMIN_LOCK_SECS", "1")];
    let pause = [("VOUCH_TEST_PAUSE_AT", "revoke:admin-counted"), ("VOUCH_TEST_PAUSE_FILE", s(&paused)), lease[0]];
    let mut a = start_revoke(&d1, &slow_env, &pause, "vouch-admin", &a_err);
    Wait::up_to(Duration::from_secs(60)).showing(|| said(&a_err)).until("master 1 paused after its count", || {
        assert!(a.try_wait().unwrap().is_none(), "master 1 ended before its pause: {}", said(&a_err));
        paused.exists()
    });
    let taken = lock_value(&slapd);
    assert!(taken.contains(" until "), "master 1 holds no lock: {taken:?}");
    let holder = taken.split(" until ").next().unwrap().to_string();
    *proxy.holder.lock().unwrap() = Some(holder.clone().into_bytes());
    std::fs::remove_file(&paused).unwrap();
    Wait::up_to(Duration::from_secs(60)).showing(|| lock_value(&slapd)).until("master 1's confirm applied", || {
        proxy.stalling.load(Ordering::SeqCst) && lock_value(&slapd).starts_with(&holder)
    });
    let mut b = start_revoke(&d2, &env, &lease, "alice", &b_err);
    let rb = wait_within(&mut b, Duration::from_secs(120), "master 2's revoke");
    let ra = wait_within(&mut a, Duration::from_secs(240), "master 1's revoke");
    let listed = ok(&run_in(&d2, &env, &["list", "--all"]));
    let outcome =
        format!("{listed}\nmaster 1 (vouch-admin): {ra}: {}\nmaster 2 (alice): {rb}: {}", said(&a_err), said(&b_err));
    assert!(!(ra.success() && rb.success()), "both administrators revoked without --force, none left: {outcome}");
}

/// docs/ldap.md says "a holder's confirm changes the value, so a taker counts
/// again from its next read". The value's time has whole seconds, and a confirm made within
/// the second its take was made (a quick count: the usual case) writes the very value the
/// take wrote: a taker that read it before the confirm keeps counting from that earlier read,
/// so its lease may end up to a second before "30 s after the confirm was sent". Three
/// revocations at master 1, each confirm held up 2 s on its way on (its value read then).
/// What must hold: each confirm's value differs from its take's.
#[test]
fn a_confirm_changes_the_value_its_take_wrote() {
    let slapd = openldap_store();
    let tmp = tempfile::tempdir().unwrap();
    let (d1, d2, env) = two_masters_two_administrators(&slapd, tmp.path());
    let names = ["bob", "carol", "dave"];
    for name in names {
        let (cert, key) = (tmp.path().join(format!("{name}.pem")), tmp.path().join(format!("{name}.key")));
        ok(&run_in(&d2, &env, &["admin", "new", name, "--cert-out", s(&cert), "--key-out", s(&key)]));
    }
    let direct = format!(":{}/", slapd.port());
    let mut unchanged = Vec::new();
    for name in names {
        let proxy = SlowAfterConfirm::start(slapd.port(), Duration::from_secs(2));
        let slow_env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| {
                let v = if k == "VOUCH_STORE" { v.replace(&direct, &format!(":{}/", proxy.port)) } else { v.clone() };
                (k.clone(), v)
            })
            .collect();
        let paused = tmp.path().join(format!("paused-{name}"));
        let a_err = tmp.path().join(format!("{name}.err"));
        let pause = [("VOUCH_TEST_PAUSE_AT", "revoke:admin-counted"), ("VOUCH_TEST_PAUSE_FILE", s(&paused))];
        let mut a = start_revoke(&d1, &slow_env, &pause, name, &a_err);
        Wait::up_to(Duration::from_secs(60)).showing(|| said(&a_err)).until("master 1 paused after its count", || {
            assert!(a.try_wait().unwrap().is_none(), "master 1 ended before its pause: {}", said(&a_err));
            paused.exists()
        });
        let taken = lock_value(&slapd);
        let holder = taken.split(" until ").next().unwrap().to_string();
        *proxy.holder.lock().unwrap() = Some(holder.into_bytes());
        std::fs::remove_file(&paused).unwrap();
        Wait::up_to(Duration::from_secs(60)).until("master 1's confirm sent", || proxy.stalling.load(Ordering::SeqCst));
        // The confirm applied; master 1's next request still held up.
        std::thread::sleep(Duration::from_millis(300));
        let confirmed = lock_value(&slapd);
        if confirmed == taken {
            unchanged.push(format!("{name}: take and confirm both wrote {taken:?}"));
        }
        let ra = wait_within(&mut a, Duration::from_secs(120), "master 1's revoke");
        assert!(ra.success(), "{ra}: {}", said(&a_err));
    }
    assert!(unchanged.is_empty(), "a confirm left the lock's value as its take wrote it:\n{}", unchanged.join("\n"));
}
