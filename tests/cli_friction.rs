//! Frictions of the command line, each driving the real binary: a closed pipe on stdout
//! (quiet, status 141), a damaged store entry and a listed certname whose certificate file
//! is missing (messages and hints that name the repair, not a retry or a loop), and
//! `vouch store verify`'s summary line (a capital at its start).

mod common;

use common::gen_store;
use common::processes::{wait_within, Guard, StderrLines};
use common::{cli_vouched_csr, ok, run, s, serve_cmd, spawn_serve, start_serve, text, vouch};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// A CA in `tmp/ca` whose store holds `n` generated certificates (`node-00000…`).
fn ca_with(tmp: &Path, n: usize) -> PathBuf {
    let dir = tmp.join("ca");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let names: Vec<String> = (0..n).map(|i| format!("node-{i:05}.example.test")).collect();
    gen_store::fill(&dir, &names, OffsetDateTime::now_utc(), &|_| false);
    dir
}

/// How long a command waiting for the store's lock is given to say so, and to end once it is
/// released: a deadline for a test that would otherwise hang, not a timing assertion.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Starts `cmd` with no stdin and its stdout and stderr piped.
fn piped(cmd: &mut std::process::Command) -> std::process::Child {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs vouch with `args`, stdout piped: reads one line, closes the pipe (as `| head -1`
/// does), and waits. Returns the status code, that line and stderr.
fn read_one_line_and_close(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = piped(vouch().args(args));
    let mut first = String::new();
    {
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut first).unwrap();
        // The reader goes away here: the rest of the output meets a closed pipe.
    }
    let o = child.wait_with_output().unwrap();
    (o.status.code(), first, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `vouch list --all | head -1` and every other command streaming more than a pipe's buffer
/// (64 KiB) to a reader that exits early: no message on stderr (it used to say "cannot
/// write stdout: Broken pipe" with a hint about a path, exit 2) and status 141, what a
/// shell reports for a process killed by SIGPIPE.
#[test]
fn a_closed_pipe_on_stdout_ends_quietly_with_141() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca_with(tmp.path(), 2000);
    let d = s(&dir);
    // Findings worth more than a pipe's buffer: 3,000 damaged revocation-list lines.
    let revocations = dir.join("ca/revocations.txt");
    let kept = std::fs::read_to_string(&revocations).unwrap_or_default();
    // An audit log of 5,000 lines.
    let log = tmp.path().join("audit.jsonl");
    let lines: String = (0..5000)
        .map(|i| {
            format!("{{\"time\":\"2026-01-01T00:00:00Z\",\"event\":\"issued\",\"certname\":\"node-{i:05}.example.test\"}}\n")
        })
        .collect();
    std::fs::write(&log, lines).unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--dir", d, "list", "--all"],
        vec!["--dir", d, "list", "--all", "--format", "json"],
        vec!["--dir", d, "store", "verify"],
        vec!["--dir", d, "store", "verify", "--format", "jsonl"],
        vec!["audit", "show", "--file", s(&log)],
        vec!["audit", "show", "--file", s(&log), "-o", "json"],
    ];
    for args in &commands {
        let verify = args.contains(&"verify");
        if verify {
            std::fs::write(&revocations, format!("{kept}{}", "00 not-a-time garbage line\n".repeat(3000))).unwrap();
        }
        let (code, first, stderr) = read_one_line_and_close(args);
        if verify {
            std::fs::write(&revocations, &kept).unwrap();
        }
        assert!(!first.is_empty(), "vouch {args:?} wrote nothing; stderr: {stderr}");
        assert_eq!(code, Some(141), "vouch {args:?}: stderr: {stderr}");
        assert_eq!(stderr, "", "vouch {args:?} said something on stderr");
    }
    // A full read is unchanged: exit 0, every certificate listed.
    let o = vouch().args(["--dir", d, "list", "--all"]).output().unwrap();
    assert_eq!(ok(&o).matches(".example.test").count(), 2000, "{}", text(&o));
}

/// A CA with a conductor, and `names` each issued a certificate through the CLI.
struct Ca {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    dir: PathBuf,
}

impl Ca {
    fn with(names: &[&str]) -> Ca {
        let tmp = tempfile::tempdir().unwrap();
        let w = tmp.path().to_path_buf();
        let dir = w.join("vouch");
        ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
        let ca = Ca { _tmp: tmp, w, dir };
        ok(&ca.run(&[
            "conductor",
            "new",
            "cond",
            "--cert-out",
            s(&ca.w.join("cond.pem")),
            "--key-out",
            s(&ca.w.join("cond.key")),
        ]));
        for n in names {
            let csr = cli_vouched_csr(&ca.w, &ca.w.join("cond.pem"), &ca.w.join("cond.key"), n);
            ok(&ca.run(&["sign", "--csr", s(&csr)]));
        }
        // A command that takes the lock checkpoints the log these issuances left (verify takes
        // it only when its first reading finds something).
        ok(&ca.run(&["crl"]));
        ok(&ca.run(&["store", "verify"]));
        ca
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        run(vouch().arg("--dir").arg(&self.dir).args(args), None)
    }

    fn signed(&self, name: &str) -> PathBuf {
        self.dir.join("ca/signed").join(format!("{name}.pem"))
    }

    /// `DIR/ca/<rel>`.
    fn ca_file(&self, rel: &str) -> PathBuf {
        self.dir.join("ca").join(rel)
    }

    /// The serial `vouch list --all` shows for `name` (signed or revoked).
    fn serial(&self, name: &str) -> String {
        let list = ok(&self.run(&["list", "--all"]));
        list.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}  serial ")))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("{name} is not listed:\n{list}"))
            .to_string()
    }

    /// The serials the CRL on disk (`DIR/ca/ca_crl.pem`) lists, lowercase hex.
    fn crl_serials(&self) -> Vec<String> {
        let pem = std::fs::read(self.ca_file("ca_crl.pem")).unwrap();
        let (_, der) = vouch::encoding::pem::find(&pem, &["X509 CRL"]).unwrap();
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        crl.iter_revoked_certificates().map(|r| vouch::encoding::hex(r.raw_serial())).collect()
    }

    /// (exit code, the error line, the hint line) of a failed command.
    fn fails(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let o = self.run(args);
        let (error, hint) = error_and_hint(&o);
        (o.status.code(), error, hint)
    }
}

/// The error line and the hint line a failed command wrote on stderr ("" for one missing).
fn error_and_hint(o: &std::process::Output) -> (String, String) {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = |p: &str| err.lines().find(|l| l.starts_with(p)).unwrap_or_default().to_string();
    (line("vouch: error: "), line("  hint: "))
}

/// A certname's file holding another node's certificate: revoke, clean and renew refuse (exit
/// 2, as every store error), and the hint no longer says "retry" (the store stays damaged
/// until restored) but names `vouch store verify` and the restore.
#[test]
fn a_damaged_entry_names_the_restore_not_a_retry() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    std::fs::copy(ca.signed("a.example.test"), ca.signed("b.example.test")).unwrap();
    for args in [
        vec!["revoke", "b.example.test"],
        vec!["clean", "b.example.test"],
        vec!["renew", "b.example.test", "--out", "-"],
    ] {
        let (code, error, hint) = ca.fails(&args);
        assert_eq!(code, Some(2), "{args:?}: {error}");
        assert!(error.contains("the certificate stored for b.example.test is not its own"), "{args:?}: {error}");
        assert!(error.contains("nothing was changed"), "{args:?}: {error}");
        assert!(!hint.contains("retry"), "{args:?}: {hint}");
        assert!(hint.contains("`vouch store verify`"), "{args:?}: {hint}");
        assert!(hint.contains("restore"), "{args:?}: {hint}");
        assert!(hint.contains("signed/CERTNAME.pem"), "{args:?}: {hint}");
    }
}

/// A certname the inventory lists (`vouch list --all` shows it) whose certificate file was
/// deleted: clean, renew and revoke used to say "no certificate" and send the operator to
/// `vouch list --all`, which lists it again. They now say what is wrong and what to do; a
/// certname never issued keeps the old answer.
#[test]
fn a_listed_certname_with_its_certificate_missing_is_named_as_such() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let file = ca.signed("a.example.test");
    std::fs::remove_file(&file).unwrap();
    assert!(ok(&ca.run(&["list", "--all"])).contains("a.example.test"));
    for args in [
        vec!["clean", "a.example.test"],
        vec!["renew", "a.example.test", "--out", "-"],
        vec!["revoke", "a.example.test"],
    ] {
        let (code, error, hint) = ca.fails(&args);
        assert_eq!(code, Some(2), "{args:?}: {error}");
        assert!(
            error.contains("the inventory lists a.example.test")
                && error.contains("its current certificate is missing from the store")
                && error.contains(s(&file)),
            "{args:?}: {error}"
        );
        assert!(!hint.contains("vouch list"), "{args:?}: {hint}");
        assert!(hint.contains("`vouch store verify` names it"), "{args:?}: {hint}");
        assert!(hint.contains("node's own copy") && hint.contains("backup"), "{args:?}: {hint}");
    }
    // Never issued: "no certificate", as before.
    for args in [vec!["clean", "c.example.test"], vec!["renew", "c.example.test"], vec!["revoke", "c.example.test"]] {
        let (code, error, hint) = ca.fails(&args);
        assert_eq!(code, Some(2), "{args:?}: {error}");
        assert_eq!(error, "vouch: error: no certificate for c.example.test", "{args:?}");
        assert!(hint.contains("'vouch list --all'"), "{args:?}: {hint}");
    }
    // Cleaned: "no certificate" too (the store no longer lists it).
    ok(&ca.run(&["clean", "b.example.test"]));
    let (code, error, _) = ca.fails(&["renew", "b.example.test"]);
    assert_eq!((code, error.as_str()), (Some(2), "vouch: error: no certificate for b.example.test"));
}

/// `vouch store verify`'s summary line begins with the store's description, which the
/// stores write for mid-sentence use ("files in DIR"; "migrating files in DIR into …"): the
/// line began in lower case for the file store. It begins with a capital now, with findings
/// and without.
#[test]
fn the_verify_summary_begins_with_a_capital() {
    let ca = Ca::with(&["a.example.test"]);
    let ca_dir = ca.dir.join("ca");
    let clean = ok(&ca.run(&["store", "verify"]));
    let summary = format!("Files in {}: 1 current certificates, 1 inventory lines", ca_dir.display());
    assert!(clean.starts_with(&summary), "{clean}");
    std::fs::remove_file(ca.signed("a.example.test")).unwrap();
    let o = ca.run(&["store", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let found = String::from_utf8_lossy(&o.stdout);
    let line = found.lines().find(|l| l.contains("current certificates,")).unwrap_or_default();
    assert!(line.starts_with(&summary) && line.ends_with(": 1 finding"), "{found}");
}

/// Runs vouch in `ca` with `args`, its stdout a pipe whose reader is gone before vouch writes
/// (a script's `| head -0`, a reader that died): (status code, stderr).
fn review5_with_stdout_closed(ca: &Ca, args: &[&str]) -> (Option<i32>, String) {
    let mut child = piped(vouch().arg("--dir").arg(&ca.dir).args(args));
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// docs/operator-guide.md: "A command that had already changed the CA when stdout closed says
/// what it did (exit 2)". `vouch revoke`, `vouch clean` and `vouch override set` print their
/// one line only after the change is stored (the revocation and its CRL, the override); with
/// stdout closed they end with 141 and nothing on stderr, as a command killed before it did
/// anything would: a script (`set -o pipefail`) sees a command that died and may take the
/// node for not revoked. (`sign` and `renew` say what they did: exit 2.)
#[test]
fn review5_a_change_done_before_stdout_closed_is_not_silent() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let class = common::fixture("classification.yaml");
    let mut silent = Vec::new();
    for args in [
        vec!["revoke", "a.example.test"],
        vec!["clean", "b.example.test"],
        vec!["override", "set", "a.example.test", "--classification", s(&class)],
    ] {
        let (code, stderr) = review5_with_stdout_closed(&ca, &args);
        // It was done: the certname is revoked (revoke), gone (clean), overridden.
        let list = ok(&ca.run(&["list", "--all"]));
        let revoked = list.split("Revoked Certificates:").nth(1).unwrap_or_default();
        let done = match args[0] {
            "revoke" => revoked.contains(args[1]),
            "clean" => !list.contains(args[1]),
            _ => ok(&ca.run(&["override", "show", "a.example.test"])).contains("revision 1"),
        };
        assert!(done, "{args:?} did not happen: {list}");
        if !(code == Some(2) && stderr.contains("a.example.test") | stderr.contains("b.example.test")) {
            silent.push(format!("{args:?}: exit {code:?}, stderr {stderr:?}"));
        }
    }
    assert!(silent.is_empty(), "changed the CA, and nothing says so:\n{}", silent.join("\n"));
}

/// A sixth review of c39d4f0 (`Command::only_reads`): a command outside the read-only list
/// ends with "the command itself ran to its end (what it changes is changed)" and a hint to
/// `vouch list --all` and `vouch audit show` when stdout is closed, whether or not it changes
/// anything. `vouch conductor sign` (its only output, the signed attributes, on stdout)
/// changes nothing and reads no CA: the attributes are lost, the message says a change was
/// made. It should end as every command that changes nothing does (141, stderr empty).
#[test]
fn review6_a_command_that_changes_nothing_does_not_say_its_change_was_made() {
    let ca = Ca::with(&[]);
    let class = common::fixture("classification.yaml");
    let (code, stderr) = review5_with_stdout_closed(
        &ca,
        &[
            "conductor",
            "sign",
            "--cert",
            s(&ca.w.join("cond.pem")),
            "--key",
            s(&ca.w.join("cond.key")),
            "--classification",
            s(&class),
            "--expires-in",
            "1h",
            "--certname",
            "x.example.test",
        ],
    );
    assert!(code == Some(141) && !stderr.contains("what it changes is changed"), "exit {code:?}, stderr {stderr:?}");
}

/// A revocation stored whose CRL then cannot be written (here `DIR/ca/crl_number` is a
/// directory: the CRL's number cannot be recorded, so no CRL is written): `vouch revoke` and
/// `vouch clean` exited 2 as if nothing had happened. They now say that NAME (serial S) IS
/// revoked, that the CRL could not be written and why, and to run `vouch crl`, with exit 3
/// (neither success nor a plain failure). `vouch list --all` and `vouch store verify` show
/// the revocation meanwhile (a warning for the CRL they cannot write either), and `vouch
/// crl` writes the CRL once the cause is gone.
#[test]
fn a_revocation_whose_crl_cannot_be_written_says_it_is_revoked_and_exits_3() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let (a, b) = (ca.serial("a.example.test"), ca.serial("b.example.test"));
    let number = ca.ca_file("crl_number");
    assert!(number.is_file());
    std::fs::remove_file(&number).unwrap();
    std::fs::create_dir(&number).unwrap();

    for (args, serial, done) in [
        (["revoke", "a.example.test"], &a, "a.example.test (serial {S}) IS revoked:"),
        (["clean", "b.example.test"], &b, "b.example.test (serial {S}) IS revoked and cleaned:"),
    ] {
        let o = ca.run(&args);
        assert_eq!(o.status.code(), Some(vouch::cli::EXIT_REVOKED_CRL_NOT_WRITTEN), "{args:?}: {}", text(&o));
        assert_eq!(vouch::cli::EXIT_REVOKED_CRL_NOT_WRITTEN, 3);
        let (error, hint) = error_and_hint(&o);
        assert!(error.contains(&done.replace("{S}", serial)), "{args:?}: {error}");
        assert!(error.contains("the revocation is stored"), "{args:?}: {error}");
        assert!(error.contains("the CRL could not be written"), "{args:?}: {error}");
        assert!(error.contains(&format!("cannot write {}", number.display())), "{args:?}: {error}");
        assert!(hint.contains("do not repeat it") && hint.contains("run `vouch crl`"), "{args:?}: {hint}");
        // The CRL on disk is the one from before: it does not list the serial.
        assert!(!ca.crl_serials().contains(serial), "{args:?}");
    }

    // The store holds both revocations, and shows them while the CRL still cannot be written.
    let o = ca.run(&["list", "--all"]);
    let list = ok(&o);
    let revoked = list.split("Revoked Certificates:").nth(1).unwrap_or_default();
    assert!(revoked.contains(&format!("a.example.test  serial {a}")), "{list}");
    assert!(!list.contains("b.example.test"), "cleaned, and still listed: {list}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("crl-not-written"), "{}", text(&o));
    let o = ca.run(&["store", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let found = String::from_utf8_lossy(&o.stdout);
    for (serial, name) in [(&a, "a.example.test"), (&b, "b.example.test")] {
        let finding = format!("revoked-not-on-crl: serial {serial} ({name}) is revoked, but the CRL does not list it");
        assert!(found.contains(&finding), "{found}");
    }

    // The cause gone, `vouch crl` writes the CRL: both listed, nothing left to find.
    std::fs::remove_dir(&number).unwrap();
    ok(&ca.run(&["crl"]));
    let listed = ca.crl_serials();
    assert!(listed.contains(&a) && listed.contains(&b), "{listed:?}");
    ok(&ca.run(&["store", "verify"]));
}

/// A command that needs the store's lock while another process holds it waited without a
/// word (a hang, to whoever ran it). After a second of waiting it now says so, once, naming
/// the holder (here this test process, by its pid: not a vouch process), and goes on
/// waiting; released, it completes.
#[test]
fn a_command_waiting_for_the_stores_lock_says_so_and_who_holds_it() {
    let ca = Ca::with(&["a.example.test"]);
    let lock_path = ca.ca_file(".lock");
    let held = std::fs::OpenOptions::new().read(true).write(true).open(&lock_path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();

    let mut child = piped(vouch().arg("--dir").arg(&ca.dir).args(["revoke", "a.example.test"]));
    let stderr = StderrLines::follow(&mut child);
    // A deadline for a test that would otherwise hang, not a timing assertion.
    let notice = stderr.wait_for(&mut child, "waiting for the store's lock", LOCK_WAIT, "no notice of the wait");
    let holder = format!("vouch: waiting for the store's lock (held by another process: pid {}, `", std::process::id());
    assert!(notice.starts_with(&holder), "{notice}");
    assert!(notice.ends_with(&format!("`) on {}", lock_path.display())), "{notice}");
    // Still waiting, nothing done: the lock is held.
    assert!(child.try_wait().unwrap().is_none(), "it did not wait for the lock");
    let revocations = std::fs::read_to_string(ca.ca_file("revocations.txt")).unwrap_or_default();
    assert!(!revocations.contains("a.example.test"), "revoked without the lock: {revocations}");

    drop(held);
    let status = wait_within(&mut child, LOCK_WAIT, "vouch revoke");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    let all = stderr.all();
    assert!(status.success(), "{status:?}: {all:?}");
    assert!(out.starts_with("revoked a.example.test (serial "), "{out}");
    assert_eq!(all.iter().filter(|l| l.contains("waiting for the store's lock")).count(), 1, "{all:?}");
}

/// `vouch enc NAME` (Puppet Server's ENC) for a name the store lists whose certificate file
/// was deleted said "no certificate" and sent the operator to `vouch list --all`, which lists
/// it. Its message and hint are now the precise ones revoke, clean and renew give; its exit
/// code and stdout, which Puppet Server reads, stay those of a name never issued (2, nothing).
#[test]
fn enc_of_a_listed_certname_with_its_certificate_missing_names_it_on_stderr_only() {
    let ca = Ca::with(&["a.example.test"]);
    assert!(ok(&ca.run(&["enc", "a.example.test"])).contains("profile::web"));
    let file = ca.signed("a.example.test");
    std::fs::remove_file(&file).unwrap();
    let missing = ca.run(&["enc", "a.example.test"]);
    let never = ca.run(&["enc", "c.example.test"]);
    for o in [&missing, &never] {
        assert_eq!(o.status.code(), Some(2), "{}", text(o));
        assert!(o.stdout.is_empty(), "{}", text(o));
    }
    let (error, hint) = error_and_hint(&missing);
    assert_eq!(
        error,
        format!(
            "vouch: error: the inventory lists a.example.test (serial {}) but its current certificate is missing \
             from the store ({} does not exist); nothing was changed",
            ca.serial("a.example.test"),
            file.display()
        )
    );
    assert!(!hint.contains("vouch list"), "{hint}");
    assert!(hint.contains("`vouch store verify` names it (current-missing)"), "{hint}");
    // Never issued: as before.
    let (error, hint) = error_and_hint(&never);
    assert_eq!(error, "vouch: error: no certificate for c.example.test");
    assert!(hint.contains("'vouch list --all'"), "{hint}");
}

/// `vouch renew` of a revoked certificate, of an administrator's, or of an expired one
/// answered with `vouch enc`'s "has no valid certificate" and its hint ("a revoked,
/// expired or foreign certificate has no classification here"; an expired one was even
/// called "issued"). Each now says what the certificate is and what to do instead; nothing
/// is issued.
#[test]
fn renew_of_a_revoked_an_administrators_or_an_expired_certificate_says_which_and_what_to_do() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&[
        "admin",
        "new",
        "alice",
        "--cert-out",
        s(&ca.w.join("alice.pem")),
        "--key-out",
        s(&ca.w.join("alice.key")),
    ]));
    ok(&ca.run(&["revoke", "a.example.test"]));
    let (a, alice, b) = (ca.serial("a.example.test"), ca.serial("alice"), ca.serial("b.example.test"));
    let inventory = || std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap();
    let before = inventory();
    let cases: [(&[&str], String, &[&str]); 3] = [
        (
            &["renew", "a.example.test", "--out", "-"],
            format!("cannot renew a.example.test: its certificate (serial {a}) is revoked"),
            &["a revoked certificate is never renewed", "a new request", "vouch clean NAME"],
        ),
        (
            &["renew", "alice", "--out", "-"],
            format!("cannot renew alice: its certificate (serial {alice}) is an administrator's (`vouch admin new`), not a node's"),
            &["administrator certificates are not renewed", "`vouch admin new NAME"],
        ),
        (
            &["--now", "2100-01-01T00:00:00Z", "renew", "b.example.test", "--out", "-"],
            format!("cannot renew b.example.test: its certificate (serial {b}) expired at "),
            &["an expired certificate is not renewed", "a new request"],
        ),
    ];
    for (args, error_start, hint_has) in cases {
        let o = ca.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o));
        let (error, hint) = error_and_hint(&o);
        assert!(error.starts_with(&format!("vouch: error: {error_start}")), "{args:?}: {error}");
        assert!(!hint.contains("classification"), "{args:?}: {hint}");
        for h in hint_has {
            assert!(hint.contains(h), "{args:?}: {hint}");
        }
    }
    assert_eq!(inventory(), before, "something was issued");
    // The administrator's, revoked: said so too.
    ok(&ca.run(&["revoke", "--force", "alice"])); // the CA's only administrator
    let (code, error, _) = ca.fails(&["renew", "alice", "--out", "-"]);
    assert_eq!(code, Some(2));
    assert!(error.ends_with("is an administrator's (`vouch admin new`), not a node's, and revoked"), "{error}");
}

/// `vouch admin new NAME` took `localhost`, and the name of a node with a current certificate
/// (a revoked one: the node then showed as signed, under the administrator's certificate); it
/// answered the service's own name with "revoke or clean it first" (revoking the service),
/// and a bad name with "see vouch --help". It now refuses each with its own reason and hint
/// (a node's name until `vouch clean` forgets it), the certname rules as `revoke` states them,
/// and writes nothing: no key, no certificate, the store unchanged.
#[test]
fn admin_new_refuses_a_name_that_is_not_free_and_writes_nothing() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    ok(&ca.run(&["revoke", "b.example.test"]));
    // `vouch serve` started once, under its own name: its certificate, and DIR/admin's.
    let log = ca.w.join("serve.log");
    let (mut serve, _, _) = start_serve(serve_cmd(&ca.dir).args(["--server-name", "svc.example.test"]), &log);
    serve.kill().unwrap();
    serve.wait().unwrap();
    let (a, b, adm) = (ca.serial("a.example.test"), ca.serial("b.example.test"), ca.serial("vouch-admin"));

    let store = || {
        let signed: Vec<_> = std::fs::read_dir(ca.ca_file("signed")).unwrap().map(|e| e.unwrap().file_name()).collect();
        (std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap(), signed, ok(&ca.run(&["list", "--all"])))
    };
    let before = store();
    let service = "it is a name of this CA's service";
    let cases: Vec<(&str, String, &[&str])> = vec![
        ("localhost", service.into(), &["a name of its own"]),
        ("127.0.0.1", service.into(), &["a name of its own"]),
        ("svc.example.test", service.into(), &["a name of its own"]),
        ("ca", "Puppet reserves the name for its CA".into(), &["choose another name"]),
        (
            "a.example.test",
            format!("it is a node's certname: the node has a certificate (serial {a})"),
            &["choose another name", "`vouch clean NAME`"],
        ),
        (
            "b.example.test",
            format!("it is a node's certname: the node's revoked certificate (serial {b}) still holds it"),
            &["`vouch clean NAME` forgets the node's revoked certificate"],
        ),
        (
            "vouch-admin",
            format!("an administrator already has a valid certificate under it (serial {adm})"),
            &["revoke it first"],
        ),
        ("Admin.example.test", "\"Admin.example.test\" is not a valid certname".into(), &["lowercase host name"]),
    ];
    let out = ca.w.join("administrators");
    std::fs::create_dir(&out).unwrap();
    for (name, why, hint_has) in cases {
        let (cert, key) = (out.join(format!("{name}.crt")), out.join(format!("{name}.key")));
        let (code, error, hint) = ca.fails(&["admin", "new", name, "--cert-out", s(&cert), "--key-out", s(&key)]);
        assert_eq!(code, Some(2), "{name}: {error}");
        assert!(error.starts_with("vouch: error: "), "{name}: {error}");
        assert!(error.contains(&why), "{name}: {error}");
        if !name.starts_with("Admin") {
            let start = format!("vouch: error: refusing to make an administrator certificate for {name}: ");
            assert!(error.starts_with(&start) && error.ends_with("; nothing was written"), "{name}: {error}");
        }
        for h in hint_has {
            assert!(hint.contains(h), "{name}: {hint}");
        }
        assert!(hint != "  hint: see vouch --help", "{name}");
        if name == "svc.example.test" || name == "localhost" {
            assert!(!hint.contains("revoke") && !error.contains("revoke"), "{name}: {error}\n{hint}");
        }
        assert!(!cert.exists() && !key.exists(), "{name}: a file was written");
        assert_eq!(store(), before, "{name}: the store changed");
    }
    // Cleaned, the revoked node's name is free.
    ok(&ca.run(&["clean", "b.example.test"]));
    let (cert, key) = (out.join("b.crt"), out.join("b.key"));
    ok(&ca.run(&["admin", "new", "b.example.test", "--cert-out", s(&cert), "--key-out", s(&key)]));
}

/// Makes `DIR/ca/crl_number` a directory: no CRL can be written (as in
/// `a_revocation_whose_crl_cannot_be_written_says_it_is_revoked_and_exits_3`).
fn break_crl_number(ca: &Ca) -> PathBuf {
    let number = ca.ca_file("crl_number");
    std::fs::remove_file(&number).unwrap();
    std::fs::create_dir(&number).unwrap();
    number
}

/// Review (cli-frictions): `vouch store verify` on a CA whose CRL is due for its refresh (25
/// days into its 30, `crl.refresh_before` 10) and cannot be written, with no revocation it
/// misses and not yet expired. Before `maintain_or_warn`, verify failed (exit 2, the reason);
/// it then said "no findings" and exited 0 (a `crl-not-written` line on stderr only): a
/// nightly verify stays green while the CA cannot refresh its CRL, until the CRL expires and
/// every relying party refuses every certificate. It is a finding (exit 1).
#[test]
fn review_store_verify_reports_a_due_crl_that_cannot_be_written() {
    let ca = Ca::with(&["a.example.test"]);
    break_crl_number(&ca);
    let later = (OffsetDateTime::now_utc() + time::Duration::days(25))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    for format in ["text", "jsonl"] {
        let o = ca.run(&["--now", &later, "store", "verify", "--format", format]);
        assert_eq!(o.status.code(), Some(1), "{format}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("crl-not-written"), "{format}: {out}");
        assert!(out.contains(&ca.ca_file("crl_number").display().to_string()), "{format}: {out}");
    }
    // Still not expired: the CRL on disk is read and found valid; once the cause is gone, the
    // CRL is written and nothing is left to find.
    std::fs::remove_dir(ca.ca_file("crl_number")).unwrap();
    ok(&ca.run(&["--now", &later, "store", "verify"]));
}

/// Review (cli-frictions): after `vouch revoke` exited 3 (revocation stored, CRL not written),
/// repeating it, `vouch revoke --serial`, or `vouch clean` of the revoked certificate
/// answered "was already revoked" / "cleaned" with exit 0 and never wrote the CRL, whether
/// it could be written (the cause fixed: the CRL still did not list the revocation) or not
/// (a success while the CRL still misses it). They write the CRL the revocation is due on,
/// and exit 3 while it cannot be written.
#[test]
fn review_revoke_or_clean_of_an_already_revoked_certificate_writes_the_crl_it_misses() {
    let ca = Ca::with(&["a.example.test", "b.example.test"]);
    let (a, b) = (ca.serial("a.example.test"), ca.serial("b.example.test"));
    let number = break_crl_number(&ca);
    for name in ["a.example.test", "b.example.test"] {
        let o = ca.run(&["revoke", name]);
        assert_eq!(o.status.code(), Some(3), "{name}: {}", text(&o));
    }
    // The cause still there: repeated, not a success.
    for args in [vec!["revoke", "a.example.test"], vec!["revoke", "--serial", &b], vec!["clean", "a.example.test"]] {
        let o = ca.run(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
        let (error, _) = error_and_hint(&o);
        assert!(error.contains("IS revoked") && error.contains("the CRL could not be written"), "{args:?}: {error}");
    }
    assert!(!ca.crl_serials().contains(&a) && !ca.crl_serials().contains(&b));
    // The cause gone: cleaning the other revoked certificate writes the CRL that lists both.
    std::fs::remove_dir(&number).unwrap();
    ok(&ca.run(&["clean", "b.example.test"]));
    let listed = ca.crl_serials();
    assert!(listed.contains(&a) && listed.contains(&b), "{listed:?}");
    ok(&ca.run(&["store", "verify"]));
}

/// `vouch renew` supersedes (revokes) the old certificate; when the CRL cannot be written
/// after that revocation it used to exit 0 with a warning, where `vouch revoke` exits 3. It
/// writes the new certificate out, says the old one IS revoked and the CRL does not list it
/// yet, and exits 3; once the cause is gone, `vouch crl` lists the old serial.
#[test]
fn renew_whose_superseded_certificate_misses_the_crl_exits_3_with_the_new_certificate_written() {
    let ca = Ca::with(&["a.example.test"]);
    let old = ca.serial("a.example.test");
    let number = break_crl_number(&ca);
    let out = ca.w.join("renewed.pem");
    let o = ca.run(&["renew", "a.example.test", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let (error, hint) = error_and_hint(&o);
    assert!(
        error.contains("a.example.test was renewed") && error.contains(&format!("(serial {old}) IS revoked")),
        "{error}"
    );
    assert!(error.contains("the CRL could not be written"), "{error}");
    assert!(hint.contains("`vouch crl`") && hint.contains("do not repeat it"), "{hint}");
    let new = ca.serial("a.example.test");
    assert_ne!(new, old);
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("BEGIN CERTIFICATE"), "{written}");
    let stored = std::fs::read_to_string(ca.signed("a.example.test")).unwrap();
    assert!(written.starts_with(&stored), "the new certificate first: {written}");
    assert!(!ca.crl_serials().contains(&old));
    std::fs::remove_dir(&number).unwrap();
    ok(&ca.run(&["crl"]));
    assert!(ca.crl_serials().contains(&old));
    ok(&ca.run(&["store", "verify"]));
}

/// `revocations.txt` cut short (a disk, a restore, a hand): `vouch crl` exited 0 and wrote a
/// CRL without the revocations the lost lines held (a key-compromise among them), so the
/// certificates were valid again for every relying party although each record still said
/// revoked. The entries of the previous CRL whose lines are gone are kept (with their time
/// and reason), said on stderr; one whose record says it expired more than a CRL period ago
/// leaves the CRL as a logged one does.
#[test]
fn a_revocation_log_cut_short_does_not_take_revocations_off_the_crl() {
    let names = ["a.example.test", "b.example.test", "c.example.test"];
    let ca = Ca::with(&names);
    let serials: Vec<String> = names.iter().map(|n| ca.serial(n)).collect();
    ok(&ca.run(&["revoke", "a.example.test", "--reason", "key-compromise"]));
    ok(&ca.run(&["revoke", "b.example.test"]));
    ok(&ca.run(&["revoke", "c.example.test"]));
    let listed = ca.crl_serials();
    assert!(serials.iter().all(|s| listed.contains(s)), "{listed:?}");
    let log = ca.ca_file("revocations.txt");
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..20]).unwrap();
    let o = ca.run(&["crl"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("kept on the new CRL"), "{}", text(&o));
    let listed = ca.crl_serials();
    assert!(serials.iter().all(|s| listed.contains(s)), "a revocation left the CRL: {listed:?}");
    let crl = ok(&run(
        std::process::Command::new("openssl").args(["crl", "-noout", "-text", "-in", s(&ca.ca_file("ca_crl.pem"))]),
        None,
    ));
    assert!(crl.contains("Key Compromise"), "the reason is kept: {crl}");
    // Written again, they stay (the CRL just written is the previous one now).
    ok(&ca.run(&["crl"]));
    assert!(serials.iter().all(|s| ca.crl_serials().contains(s)));
    // Once their records say they expired more than a CRL period ago, they leave.
    let der =
        vouch::encoding::pem::find(&std::fs::read(ca.signed("a.example.test")).unwrap(), &["CERTIFICATE"]).unwrap().1;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let gone = (cert.validity().not_after.to_datetime() + time::Duration::days(400))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let o = ca.run(&["--now", &gone, "crl"]);
    assert!(o.status.success(), "{}", text(&o));
    let listed = ca.crl_serials();
    assert!(serials.iter().all(|s| !listed.contains(s)), "expired revocations stayed: {listed:?}");
}

/// Review of bdf3a57: every `vouch ca init` names its master CA `vouch Master CA`, so a
/// CRL another vouch CA signed (a restore, a copy from staging, a hand) has this CA's issuer
/// name. Its entries are on no revocation line here and have no record here: kept from the
/// previous CRL by name alone, this CA listed them on every CRL it signed, for ever. Only a
/// CRL whose signature verifies with this CA's key is this CA's previous CRL.
#[test]
fn review_a_crl_signed_by_another_ca_of_the_same_name_adds_nothing_to_this_cas_crl() {
    let other = Ca::with(&["x.example.test"]);
    let foreign = other.serial("x.example.test");
    ok(&other.run(&["revoke", "x.example.test", "--reason", "key-compromise"]));
    assert!(other.crl_serials().contains(&foreign));
    let ca = Ca::with(&["a.example.test"]);
    std::fs::copy(other.ca_file("ca_crl.pem"), ca.ca_file("ca_crl.pem")).unwrap();
    let o = ca.run(&["crl"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("kept on the new CRL"), "{}", text(&o));
    assert!(!ca.crl_serials().contains(&foreign), "another CA's revocation is on this CA's CRL");
}

/// Review of bdf3a57: a store restored from a backup older than a revocation (its record
/// says issued again, its revocation line is gone) while the CRL on disk is newer. The CRL
/// keeps the entry, as it must; but only a record that says revoked let it leave, so once
/// the certificate expired it stayed on every CRL for ever. The record's notAfter is the
/// certificate's whatever its state: expired more than a CRL period ago, it leaves.
#[test]
fn review_a_kept_entry_whose_record_says_issued_leaves_once_expired() {
    let ca = Ca::with(&["a.example.test"]);
    let serial = ca.serial("a.example.test");
    let record = ca.ca_file(&format!("serials/{}/{serial}.json", &serial[..2]));
    ok(&ca.run(&["revoke", "a.example.test"]));
    assert!(ca.crl_serials().contains(&serial));
    let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(rec["state"], "revoked", "{rec}");
    rec["state"] = "issued".into();
    std::fs::write(&record, serde_json::to_vec(&rec).unwrap()).unwrap();
    std::fs::write(ca.ca_file("revocations.txt"), b"").unwrap();
    let o = ca.run(&["crl"]);
    assert!(text(&o).contains("kept on the new CRL"), "{}", text(&o));
    assert!(ca.crl_serials().contains(&serial), "the revocation left the CRL with its line");
    let der =
        vouch::encoding::pem::find(&std::fs::read(ca.signed("a.example.test")).unwrap(), &["CERTIFICATE"]).unwrap().1;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let gone = (cert.validity().not_after.to_datetime() + time::Duration::days(400))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let o = ca.run(&["--now", &gone, "crl"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!ca.crl_serials().contains(&serial), "a certificate expired 400 days ago stays on the CRL");
}

/// Review (cli-frictions): an `flock` belongs to the open file, not to the process that took
/// it, and `/proc/locks` gives the pid that called `flock(2)`. With the shell idiom `exec
/// 9<>FILE; flock 9; …` (cron scripts, backups) that is the `flock` command, exited at once,
/// while the shell holds the lock: the notice named the dead pid (which any unrelated process
/// may get next, and its command line would be shown as the holder's). A pid the notice
/// names holds the lock; one it cannot confirm is not named.
#[test]
fn review_a_lock_wait_never_names_a_pid_that_does_not_hold_the_lock() {
    let ca = Ca::with(&["a.example.test"]);
    let lock_path = ca.ca_file(".lock");
    let holder = piped(
        std::process::Command::new("sh")
            .args(["-c", "exec 9<>\"$1\"; flock 9; echo locked; exec sleep 120", "sh"])
            .arg(&lock_path),
    );
    // Killed by its PID if the test fails before it does.
    let mut holder = Guard { child: holder, what: "the lock's holder (sh)", grace: std::time::Duration::from_secs(1) };
    let mut locked = String::new();
    std::io::BufReader::new(holder.child.stdout.take().unwrap()).read_line(&mut locked).unwrap();
    assert_eq!(locked, "locked\n");

    let mut child = piped(vouch().arg("--dir").arg(&ca.dir).args(["crl", "--out", s(&ca.w.join("crl.pem"))]));
    let stderr = StderrLines::follow(&mut child);
    // A deadline for a test that would otherwise hang, not a timing assertion.
    let notice = stderr.wait_for(&mut child, "waiting for the store's lock", LOCK_WAIT, "no notice of the wait");
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let status = wait_within(&mut child, LOCK_WAIT, "vouch crl");
    stderr.all();
    assert!(status.success(), "{status:?}");
    let named = notice.split("pid ").nth(1).map(|p| p.chars().take_while(char::is_ascii_digit).collect::<String>());
    let holder = holder.child.id();
    assert!(named.is_none_or(|p| p == holder.to_string()), "holder pid {holder}: {notice}");
}

/// Review (cli-frictions): `vouch admin new NAME` refuses a node's certname while the node has
/// a certificate; but a node whose certificate file is missing from the store (the state
/// revoke, clean, renew and enc name as current-missing) was free: an administrator
/// certificate was issued under the node's name while the node's own stayed valid and
/// unrevoked (two valid certificates of one certname, one of them an administrator's). It is
/// refused as revoke refuses it, and nothing is written.
#[test]
fn review_admin_new_refuses_a_listed_node_whose_certificate_file_is_missing() {
    let ca = Ca::with(&["a.example.test"]);
    let serial = ca.serial("a.example.test");
    std::fs::remove_file(ca.signed("a.example.test")).unwrap();
    let inventory = std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap();
    let (cert, key) = (ca.w.join("adm.pem"), ca.w.join("adm.key"));
    let (code, error, hint) =
        ca.fails(&["admin", "new", "a.example.test", "--cert-out", s(&cert), "--key-out", s(&key)]);
    assert_eq!(code, Some(2), "{error}");
    assert!(
        error.contains(&format!("the inventory lists a.example.test (serial {serial})"))
            && error.contains("current certificate is missing"),
        "{error}"
    );
    assert!(hint.contains("current-missing"), "{hint}");
    assert!(!cert.exists() && !key.exists(), "a file was written");
    assert_eq!(std::fs::read_to_string(ca.ca_file("inventory.txt")).unwrap(), inventory, "the store changed");
}

/// `vouch enc` of a certificate that no longer verifies says why in words: an expired one
/// names its notAfter as a date (it printed webpki's Debug form, the times in seconds).
#[test]
fn enc_of_an_expired_certificate_names_its_expiry_as_a_date() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ca");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let names = vec!["old.example.test".to_string()];
    gen_store::fill(&dir, &names, OffsetDateTime::now_utc(), &|_| true);
    let o = vouch().args(["--dir", s(&dir), "enc", "old.example.test"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("it does not verify against this CA: it expired at 20"), "{err}");
    assert!(!err.contains("UnixTime"), "{err}");
}

/// `vouch reconcile --confirm` revoking orphans whose CRL then cannot be written (here
/// `DIR/ca/crl_number` is a directory, as for `vouch revoke` above) exited 2 with the
/// generic hint of the write that failed, as if nothing had been done. Like `vouch revoke`,
/// it says the orphans ARE revoked (each named with its serial), that the CRL could not be
/// written after them and why, and to run `vouch crl`, with exit 3; `vouch crl` writes the
/// CRL once the cause is gone.
#[test]
fn reconcile_revocations_whose_crl_cannot_be_written_say_they_are_revoked_and_exit_3() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "keep.example.test"]);
    let (a, b) = (ca.serial("a.example.test"), ca.serial("b.example.test"));
    let inventory = ca.w.join("inventory.txt");
    std::fs::write(&inventory, "keep.example.test\n").unwrap();
    let source = format!("file:{}", inventory.display());
    let number = break_crl_number(&ca);

    let o = ca.run(&["reconcile", "--inventory", &source, "--confirm", "--force"]);
    assert_eq!(o.status.code(), Some(vouch::cli::EXIT_REVOKED_CRL_NOT_WRITTEN), "{}", text(&o));
    let (error, hint) = error_and_hint(&o);
    assert!(error.contains("reconcile revoked 2 certificates"), "{error}");
    assert!(error.contains(&format!("a.example.test (serial {a})")), "{error}");
    assert!(error.contains(&format!("b.example.test (serial {b})")), "{error}");
    assert!(error.contains("ARE revoked"), "{error}");
    assert!(error.contains("the revocations are stored"), "{error}");
    assert!(error.contains("the CRL could not be written"), "{error}");
    assert!(error.contains(&format!("cannot write {}", number.display())), "{error}");
    assert!(hint.contains("do not repeat it") && hint.contains("run `vouch crl`"), "{hint}");
    assert!(!ca.crl_serials().contains(&a) && !ca.crl_serials().contains(&b));

    // The revocations stand: `vouch list --all` shows them; the kept node is untouched.
    let list = ok(&ca.run(&["list", "--all"]));
    let revoked = list.split("Revoked Certificates:").nth(1).unwrap_or_default();
    for (name, serial) in [("a.example.test", &a), ("b.example.test", &b)] {
        assert!(revoked.contains(&format!("{name}  serial {serial}")), "{list}");
    }
    assert!(!revoked.contains("keep.example.test"), "{list}");

    // The cause gone, `vouch crl` writes the CRL that lists both.
    std::fs::remove_dir(&number).unwrap();
    ok(&ca.run(&["crl"]));
    let listed = ca.crl_serials();
    assert!(listed.contains(&a) && listed.contains(&b), "{listed:?}");
    ok(&ca.run(&["store", "verify"]));
}

/// Every option of `cmd` and its subcommands (their command path, and the option), all of
/// whose values are of type `T` among `types`.
fn options_typed(
    cmd: &clap::Command,
    path: &[String],
    types: &[std::any::TypeId],
    found: &mut Vec<(Vec<String>, String)>,
) {
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if arg.is_positional() || !arg.get_action().takes_values() || arg.is_global_set() && !path.is_empty() {
            continue;
        }
        let id = arg.get_value_parser().type_id();
        if types.iter().any(|t| id == *t) {
            found.push((path.to_vec(), format!("--{long}")));
        }
    }
    for sub in cmd.get_subcommands() {
        let mut p = path.to_vec();
        p.push(sub.get_name().to_string());
        options_typed(sub, &p, types, found);
    }
}

/// `--days -1`, `--max-changes -1` and every other numeric flag answered clap's "unexpected
/// argument '-1' found ... tip: to pass '-1' as a value, use '-- -1'", which is wrong advice
/// (after `--` it is a positional argument). Each takes the negative number as its value and
/// refuses it with its range; the numeric flags are found by walking the command line, so a
/// new one is held to this too. Flags whose values are strings read as numbers or durations
/// (`--max-changes`, `--pending-older-than`, `--expires-in`...) take a leading hyphen and
/// refuse it as negative.
#[test]
fn a_negative_number_is_refused_by_its_flag_not_taken_for_an_unknown_flag() {
    let types = [
        std::any::TypeId::of::<u8>(),
        std::any::TypeId::of::<u16>(),
        std::any::TypeId::of::<u32>(),
        std::any::TypeId::of::<u64>(),
        std::any::TypeId::of::<usize>(),
        std::any::TypeId::of::<i32>(),
        std::any::TypeId::of::<i64>(),
    ];
    let mut numeric = Vec::new();
    options_typed(&vouch::cli::command(), &[], &types, &mut numeric);
    let names: Vec<&str> = numeric.iter().map(|(_, f)| f.as_str()).collect();
    for want in ["--days", "--max-body", "--threads", "--expect-revision", "--cache-max", "--version"] {
        assert!(names.contains(&want), "{want} not found among {names:?}");
    }
    for (path, flag) in &numeric {
        let o = vouch().args(path).args([flag.as_str(), "-1"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{path:?} {flag} -1: {err}");
        assert!(!err.contains("unexpected argument") && !err.contains("'-- -1'"), "{path:?} {flag} -1: {err}");
        assert!(
            err.contains(&format!("invalid value '-1' for '{flag} ")) && err.contains("must be a whole number"),
            "{path:?} {flag} -1: {err}"
        );
    }

    // Numbers and durations given as strings, each where its check runs first.
    let ca = Ca::with(&[]);
    let classification = common::fixture("classification.yaml");
    let (cert, key) = (ca.w.join("cond.pem"), ca.w.join("cond.key"));
    let inventory = format!("file:{}", ca.w.join("missing.txt").display());
    let sign = ["conductor", "sign", "--cert", s(&cert), "--key", s(&key), "--classification", s(&classification)];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["reconcile", "--inventory", &inventory, "--max-changes", "-1"], "\"-1\" is negative"),
        (vec!["reconcile", "--inventory", &inventory, "--max-changes", "-5%"], "a percentage is from 0% to 100%"),
        (vec!["reconcile", "--inventory", &inventory, "--pending-older-than", "-1d"], "'-1d' is negative"),
        (vec!["reconcile", "--inventory", &inventory, "--inventory-timeout", "-30s"], "'-30s' is negative"),
        ([&sign[..], &["--expires-in", "-1h"]].concat(), "'-1h' is negative"),
        (
            vec![
                "enc",
                "a.example.test",
                "--ca-url",
                "https://127.0.0.1:1",
                "--cacert",
                s(&cert),
                "--crl-refresh",
                "-5s",
            ],
            "'-5s' is negative",
        ),
        (vec!["audit", "show", "--since", "-24h"], "\"-24h\" is neither RFC 3339 nor a duration"),
    ];
    for (args, says) in cases {
        let o = ca.run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument") && !err.contains("'-- -"), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `vouch admin new NAME --key-out /dev/null` issued the administrator's certificate (valid,
/// in the store) and sent its key to the device: lost. A key-out that is not a path a new
/// regular file can be created at (a device, a FIFO, stdout, a directory, an existing file)
/// is refused before anything is issued, with a hint naming what to give. `vouch admin new
/// puppet` was accepted too: `puppet` is the server name Puppet agents use by default, and
/// this host's name is `vouch serve`'s default name; so are the names the policy gives
/// servers (`servers`, `dns_alt_names`). Each is refused as a server's name, with a hint.
#[test]
fn admin_new_refuses_a_key_out_that_is_no_new_file_and_a_servers_name() {
    let ca = Ca::with(&["a.example.test"]);
    let before = ok(&ca.run(&["list", "--all"]));
    let (w, cert) = (&ca.w, ca.w.join("ops.pem"));
    let fifo = w.join("key.fifo");
    let o = std::process::Command::new("mkfifo").arg(&fifo).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let existing = w.join("existing.key");
    std::fs::write(&existing, "kept").unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        ("/dev/null".into(), "it is a device"),
        ("-".into(), "it is standard output"),
        (fifo.clone(), "it is a FIFO"),
        (w.to_path_buf(), "it is a directory"),
        (existing.clone(), "already exists"),
    ];
    for (key_out, says) in &cases {
        let (code, error, hint) = ca.fails(&["admin", "new", "ops", "--cert-out", s(&cert), "--key-out", s(key_out)]);
        assert_eq!(code, Some(2), "{key_out:?}: {error}");
        assert!(error.contains(says), "{key_out:?}: {error}");
        if !says.contains("exists") {
            assert!(error.contains("nothing was issued"), "{key_out:?}: {error}");
            assert!(hint.contains("a file that does not exist yet") && hint.contains("0600"), "{key_out:?}: {hint}");
        }
        assert!(!cert.exists(), "{key_out:?}: the certificate was written");
        assert_eq!(ok(&ca.run(&["list", "--all"])), before, "{key_out:?}: issued");
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept");

    // Names servers use. The policy gives compile servers theirs.
    let policy = ca.dir.join("policy.toml");
    let mut text_ = std::fs::read_to_string(&policy).unwrap();
    text_.push_str(
        "\n[[conductor]]\nname = \"cond\"\nsubject = \"CN=cond\"\nservers = [\"compile1.example.test\", \"compile*.example.test\"]\n\
         dns_alt_names = [\"puppet.example.test\", \"*.lb.example.test\"]\n",
    );
    std::fs::write(&policy, text_).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_ascii_lowercase();
    let mut names: Vec<(String, &str)> = vec![
        ("puppet".into(), "Puppet agents reach their server as `puppet`"),
        ("compile1.example.test".into(), "lists it among its servers"),
        ("puppet.example.test".into(), "among its servers' dns_alt_names"),
    ];
    if vouch::decision::check_certname(&host).is_ok() {
        names.push((host.clone(), "this host's name"));
    }
    for (name, says) in &names {
        let key = w.join(format!("{name}.key"));
        let (code, error, hint) = ca.fails(&["admin", "new", name, "--cert-out", s(&cert), "--key-out", s(&key)]);
        assert_eq!(code, Some(2), "{name}: {error}");
        assert!(
            error.contains(&format!("administrator certificate for {name}: it is a Puppet server's name")),
            "{error}"
        );
        assert!(error.contains(says), "{name}: {error}");
        assert!(hint.contains("a name no node or server uses") && hint.contains("alice"), "{name}: {hint}");
        assert!(!cert.exists() && !key.exists(), "{name}: a file was written");
    }
    assert_eq!(ok(&ca.run(&["list", "--all"])), before);
    // An administrator's own name, its key to a new file: issued.
    let key = w.join("ops.key");
    ok(&ca.run(&["admin", "new", "ops", "--cert-out", s(&cert), "--key-out", s(&key)]));
    assert!(key.is_file() && cert.is_file());
}

/// A relative `XDG_DATA_HOME` named a data directory under whatever the current directory
/// was (`rel/data/vouch` here, somewhere else from the next shell). The XDG Base Directory
/// specification says a relative path is invalid and must be ignored: vouch falls back to
/// `~/.local/share/vouch` and says so on stderr; an absolute one is used as before. The same
/// for `XDG_CACHE_HOME` (the ENC's cache). Root's default is /var/lib/vouch whatever the
/// environment says, so the commands run as `nobody` (as root) in a home handed to it.
#[test]
fn a_relative_xdg_data_home_is_ignored_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let (home, cwd, abs) = (w.join("home"), w.join("cwd"), w.join("xdg"));
    for d in [&home, &cwd, &abs] {
        std::fs::create_dir(d).unwrap();
    }
    let root = rustix::process::geteuid().is_root();
    let bin = w.join("vouch-bin");
    std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
    if root {
        let o = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(w).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        std::fs::set_permissions(w, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_user = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = if root {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin);
            c
        } else {
            std::process::Command::new(&bin)
        };
        c.current_dir(&cwd).env_remove("VOUCH_DIR").env_remove("XDG_DATA_HOME").env_remove("XDG_CACHE_HOME");
        c.env("HOME", &home).envs(env.iter().copied()).args(args);
        run(&mut c, None)
    };

    let o = as_user(&[("XDG_DATA_HOME", "rel/data")], &["ca", "init"]);
    let made = home.join(".local/share/vouch");
    assert!(made.join("ca").is_dir(), "{}", text(&o));
    assert!(!cwd.join("rel").exists(), "the relative XDG_DATA_HOME was used: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("vouch: warning: XDG_DATA_HOME is a relative path (rel/data)")
            && err.contains(&format!("using {} instead", made.display())),
        "{err}"
    );
    ok(&o);
    // Every command finds the CA there, with the same warning.
    let o = as_user(&[("XDG_DATA_HOME", "rel/data")], &["list"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("XDG_DATA_HOME is a relative path"), "{}", text(&o));
    ok(&o);
    // An absolute one is used, and nothing is said.
    let o = as_user(&[("XDG_DATA_HOME", s(&abs))], &["ca", "init"]);
    assert!(abs.join("vouch/ca").is_dir(), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", text(&o));
    ok(&o);

    // The ENC's cache: a relative XDG_CACHE_HOME is ignored the same way (the CA it asks is
    // not there: exit 2, after the cache directory is made).
    let bundle = made.join("ca/ca_bundle.pem");
    let o = as_user(
        &[("XDG_CACHE_HOME", "rel/cache")],
        &["enc", "a.example.test", "--ca-url", "https://127.0.0.1:1", "--cacert", s(&bundle), "--log", "stderr"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let cache = home.join(".cache/vouch/enc");
    assert!(
        err.contains("vouch: warning: XDG_CACHE_HOME is a relative path (rel/cache)")
            && err.contains(&format!("using {} instead", cache.display())),
        "{err}"
    );
    assert!(cache.is_dir() && !cwd.join("rel").exists(), "{err}");
}

/// "it is larger than 1 MiB, the most vouch reads of a attributes file": the article follows
/// the name ("an attributes file", "a certificate request"); so does a key type's in `ca
/// init`'s report ("an ed25519 root CA", "a p256 root CA").
#[test]
fn an_inputs_name_and_a_key_type_take_the_article_they_are_read_with() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let big = w.join("big.yaml");
    std::fs::write(&big, vec![b'#'; 1024 * 1024 + 1]).unwrap();
    let o = vouch()
        .args(["csr", "--certname", "a.example.test", "--attributes", s(&big), "--key-out"])
        .args([s(&w.join("a.key")), "--csr-out", s(&w.join("a.csr"))])
        .output()
        .unwrap();
    let (error, _) = error_and_hint(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(error.contains("the most vouch reads of an attributes file"), "{error}");
    let big_csr = w.join("big.csr");
    std::fs::write(&big_csr, vec![b'#'; 1024 * 1024 + 1]).unwrap();
    let o =
        vouch().args(["check", "--csr", s(&big_csr), "--policy", s(&common::fixture("policy.toml"))]).output().unwrap();
    let (error, _) = error_and_hint(&o);
    assert!(error.contains("the most vouch reads of a certificate request"), "{}", text(&o));
    for (key_type, says) in [("ed25519", "Created an ed25519 root CA"), ("p256", "Created a p256 root CA")] {
        let dir = w.join(key_type);
        let out = ok(&vouch().args(["--dir", s(&dir), "ca", "init", "--key-type", key_type]).output().unwrap());
        assert!(out.contains(says), "{out}");
    }
}

/// The serials the CRLs in the PEM file `path` list (a hostcrl holds the master CA's and the
/// root's), lowercase hex.
fn crl_file_serials(path: &Path) -> Vec<String> {
    let pem = std::fs::read(path).unwrap();
    let mut serials = Vec::new();
    for der in vouch::encoding::pem::find_all(&pem, "X509 CRL").unwrap() {
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        serials.extend(crl.iter_revoked_certificates().map(|r| vouch::encoding::hex(r.raw_serial())));
    }
    serials
}

/// `vouch revoke NAME` said only "revoked NAME (serial S)": nothing of what happens next. On
/// stderr (stdout keeps its one line) it now says in one line what is true, as measured: the
/// CRL lists it and `vouch serve` serves that CRL at once (checked here: a `vouch crl --fetch`
/// right after the revocation gets it), and a Puppet Server compile server refuses the
/// certificate from its next handshake once its hostcrl is replaced (`vouch crl --fetch`),
/// no restart or reload, connections already open staying up. `revoke --serial` and `clean`
/// say the same; `clean` of a name with only a request (nothing revoked) does not.
#[test]
fn revoke_says_what_makes_the_revocation_count_everywhere() {
    let ca = Ca::with(&["a.example.test", "b.example.test", "c.example.test"]);
    let log = ca.w.join("serve.log");
    // A deadline for vouch serve: timeout(1) kills it whatever happens to the test.
    let child = spawn_serve(
        std::process::Command::new("timeout")
            .args(["-s", "KILL", "300"])
            .arg(env!("CARGO_BIN_EXE_vouch"))
            .arg("--dir")
            .arg(&ca.dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--server-name", "svc.example.test"])
            .stdin(std::process::Stdio::null()),
        &log,
    );
    let mut serve = Guard { child, what: "vouch serve", grace: std::time::Duration::from_secs(10) };
    let (_, port) = common::serve_ready(&mut serve.child, &log);
    let hostcrl = ca.w.join("hostcrl.pem");
    let url = format!("https://127.0.0.1:{port}");
    let bundle = ca.ca_file("ca_bundle.pem");
    let fetch = || {
        ok(&ca.run(&["crl", "--fetch", "--ca-url", &url, "--cacert", s(&bundle), "--out", s(&hostcrl)]));
        crl_file_serials(&hostcrl)
    };
    let (a, b, c) = (ca.serial("a.example.test"), ca.serial("b.example.test"), ca.serial("c.example.test"));
    assert!(!fetch().contains(&a));

    let says = |o: &std::process::Output, what: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        let notes: Vec<&str> = err.lines().filter(|l| l.starts_with("vouch: note: the CRL lists it now")).collect();
        assert_eq!(notes.len(), 1, "{what}: {err}");
        for part in [
            "vouch serve on this data directory serves that CRL at once",
            "compile server refuses the certificate from its next TLS handshake once its hostcrl is replaced",
            "`vouch crl --fetch`",
            "no restart or reload",
            "connections already open stay up",
        ] {
            assert!(notes[0].contains(part), "{what}: {part:?} missing: {err}");
        }
    };
    let o = ca.run(&["revoke", "a.example.test"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("revoked a.example.test (serial {a})\n"), "{}", text(&o));
    says(&o, "revoke");
    // Served at once: the next fetch lists it.
    assert!(fetch().contains(&a), "vouch serve did not serve the new CRL");

    let o = ca.run(&["revoke", "--serial", &b]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("revoked serial {b} (b.example.test)\n"), "{}", text(&o));
    says(&o, "revoke --serial");
    let o = ca.run(&["clean", "c.example.test"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    says(&o, "clean");
    let listed = fetch();
    assert!(listed.contains(&b) && listed.contains(&c), "{listed:?}");

    // Nothing revoked, nothing said: a clean of a name with no certificate.
    std::fs::write(
        ca.ca_file("requests/p.example.test.json"),
        r#"{"certname":"p.example.test","time":"2026-01-01T00:00:00Z","reasons":["held"]}"#,
    )
    .unwrap();
    let o = ca.run(&["clean", "p.example.test"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no certificate for p.example.test"), "{}", text(&o));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("vouch: note:"), "{}", text(&o));
}

/// A stranger's report: `--days 99999999999999999999` said "must be a whole number, at least
/// 1"; a number too large now says so, with the largest the flag takes. And `vouch conductor
/// revoke` with neither flag said "required arguments were not provided: --cert <FILE>": it
/// says one of --cert and --serial is required.
#[test]
fn a_number_too_large_says_so_and_conductor_revoke_names_both_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let new = |days: &str| {
        let (cert, key) = (tmp.path().join("c.pem"), tmp.path().join("c.key"));
        run(
            vouch().arg("--dir").arg(&dir).args(["conductor", "new", "c", "--cert-out", s(&cert), "--key-out"]).args([
                s(&key),
                "--days",
                days,
            ]),
            None,
        )
    };
    let o = new("99999999999999999999");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("99999999999999999999 is too large: at most 4294967295"), "{err}");
    assert!(!err.contains("at least 1"), "{err}");
    let o = new("4294967296");
    assert!(String::from_utf8_lossy(&o.stderr).contains("4294967296 is too large: at most 4294967295"), "{}", text(&o));
    let o = new("0");
    assert!(String::from_utf8_lossy(&o.stderr).contains("must be a whole number, at least 1"), "{}", text(&o));
    assert!(!dir.exists());

    let o = run(vouch().arg("--dir").arg(&dir).args(["conductor", "revoke"]), None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("one of --cert FILE") && err.contains("and --serial HEX") && err.contains("is required"),
        "{err}"
    );
    assert!(!err.contains("required arguments were not provided"), "{err}");
    assert!(!dir.exists());
}

/// A stranger's report: a relative HOME (`HOME=relhome`, not root) made the data directory
/// `relhome/.local/share/vouch` under the current directory, silently. It is ignored, as a
/// relative XDG_DATA_HOME is, with a warning; with no usable base left, the command refuses
/// and asks for --dir or VOUCH_DIR (never root's /var/lib/vouch). An absolute XDG_DATA_HOME
/// is still used. As root the default is /var/lib/vouch whatever HOME says, so the commands
/// run as `nobody` in a directory handed to it.
#[test]
fn a_relative_home_is_ignored_and_with_no_base_left_the_command_asks_for_dir() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path();
    let (cwd, abs) = (w.join("cwd"), w.join("xdg"));
    for d in [&cwd, &abs] {
        std::fs::create_dir(d).unwrap();
    }
    let root = rustix::process::geteuid().is_root();
    let bin = w.join("vouch-bin");
    std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
    if root {
        let o = std::process::Command::new("chown").args(["-R", "65534:65534"]).arg(w).output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        std::fs::set_permissions(w, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_user = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = if root {
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin);
            c
        } else {
            std::process::Command::new(&bin)
        };
        c.current_dir(&cwd).env_remove("VOUCH_DIR").env_remove("XDG_DATA_HOME").env_remove("XDG_CACHE_HOME");
        c.env("HOME", "relhome").envs(env.iter().copied()).args(args);
        run(&mut c, None)
    };
    for env in [&[][..], &[("XDG_DATA_HOME", "rel/data")][..]] {
        let o = as_user(env, &["ca", "init"]);
        assert_eq!(o.status.code(), Some(2), "{env:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("vouch: warning: HOME is a relative path (relhome)"), "{env:?}: {err}");
        assert!(err.contains("no data directory to use: HOME is a relative path (relhome)"), "{env:?}: {err}");
        assert!(err.contains("--dir DIR or VOUCH_DIR=DIR"), "{env:?}: {err}");
        assert!(!err.contains("/var/lib/vouch"), "{env:?}: {err}");
        assert!(
            std::fs::read_dir(&cwd).unwrap().next().is_none(),
            "{env:?}: something made under the current directory"
        );
    }
    // An absolute XDG_DATA_HOME is still a base: used, HOME warned about.
    let o = as_user(&[("XDG_DATA_HOME", s(&abs))], &["ca", "init"]);
    assert!(abs.join("vouch/ca").is_dir(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("HOME is a relative path"), "{}", text(&o));
    ok(&o);
    // VOUCH_DIR: nothing said about HOME.
    let d = w.join("given");
    let o = as_user(&[("VOUCH_DIR", s(&d))], &["ca", "init"]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", text(&o));
    ok(&o);
    assert!(std::fs::read_dir(&cwd).unwrap().next().is_none());
}

/// `vouch csr` and `vouch conductor new` whose second output cannot be written (a full disk):
/// the key written first is removed again, nothing is kept, and running the command again
/// once the cause is fixed is exactly what to do. The hint must not say "do not run the
/// command again (it would issue, renew or revoke again)", the hint of a command whose
/// change stands in the CA.
#[test]
fn a_key_removed_again_after_its_pair_failed_hints_to_run_the_command_again() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (dir, w) = (tmp.path().join("ca"), tmp.path().join("w"));
    std::fs::create_dir(&w).unwrap();
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let (cert, key) = (w.join("c.pem"), w.join("c.key"));
    ok(&run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "c", "--cert-out", s(&cert), "--key-out", s(&key)]),
        None,
    ));
    cli_vouched_csr(&w, &cert, &key, "web01.example.test");
    let attrs = w.join("web01.example.test.yaml");
    let csr_key = w.join("n.key");
    let o = run(
        vouch().args(["csr", "--certname", "web01.example.test", "--attributes", s(&attrs), "--key-out"]).args([
            s(&csr_key),
            "--csr-out",
            "/dev/full",
        ]),
        None,
    );
    let c_key = w.join("c2.key");
    let o2 = run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "c2", "--cert-out", "/dev/full", "--key-out", s(&c_key)]),
        None,
    );
    for (o, k) in [(&o, &csr_key), (&o2, &c_key)] {
        assert_eq!(o.status.code(), Some(2), "{}", text(o));
        let (err, hint) = error_and_hint(o);
        assert!(err.contains("was removed again"), "{err}");
        assert!(!k.exists(), "{err}");
        assert!(!hint.contains("do not run the command again"), "{err}\n{hint}");
        assert!(hint.contains("run the command again"), "{err}\n{hint}");
    }
}

/// `ca init --root-cert KEY --root-key CERT` (the two swapped) told the operator to chmod 600
/// the certificate (the key checks ran first, on a 0644 certificate). Now the swap is said
/// first, and so is either file given the other's kind alone; nothing is written.
#[test]
fn ca_init_with_the_roots_files_swapped_says_so_before_any_chmod() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    ok(&vouch().args(["--dir", s(&root), "ca", "init"]).output().unwrap());
    let (crt, key) = (root.join("ca/root_crt.pem"), root.join("ca/root_key.pem"));
    for (cert_arg, key_arg, says) in [
        (&key, &crt, "are swapped"),
        (&key, &key, "holds a private key, not the root's certificate"),
        (&crt, &crt, "holds a certificate, not the root's private key"),
    ] {
        let dir = t.path().join("second");
        let o = vouch()
            .args(["--dir", s(&dir), "ca", "init", "--root-cert", s(cert_arg), "--root-key", s(key_arg)])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "want {says:?}: {err}");
        assert!(!err.contains("chmod"), "{err}");
        assert!(!dir.exists(), "{} was created", dir.display());
    }
}

/// `purge --tombstones` on a file store said "no tombstone whose certificate expired a CRL
/// period ago", as if some might come due; the file store keeps none.
#[test]
fn purge_tombstones_on_a_file_store_says_it_keeps_none() {
    let t = tempfile::tempdir().unwrap();
    let dir = ca_with(t.path(), 0);
    for confirm in [false, true] {
        let mut c = vouch();
        c.args(["--dir", s(&dir), "purge", "--tombstones"]);
        if confirm {
            c.arg("--confirm");
        }
        let out = ok(&c.output().unwrap());
        assert!(out.contains("the files store keeps no tombstones"), "{out}");
    }
}
