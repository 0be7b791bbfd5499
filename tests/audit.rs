//! The tamper-evident audit log: `vouch audit verify` on logs written by vouch's own writer
//! (`vouch::store::audit::AuditLog`, the one `vouch sign`/`serve`/`revoke` use), each kind of
//! tampering in a test of its own, and a 100,000-line log verified within seconds.

mod common;

use common::{ok, s, text, vouch};
use std::path::{Path, PathBuf};
use std::process::Output;
use vouch::store::audit::AuditLog;

/// A CA in `tmp/ca`.
fn ca(tmp: &Path) -> PathBuf {
    let dir = tmp.join("ca");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    dir
}

/// Appends `n` decision-like lines to `log` in batches of `batch`, signing checkpoints with
/// the CA's key: vouch's own writer.
fn write_lines(dir: &Path, log: &AuditLog, from: usize, n: usize, batch: usize) {
    let ca = dir.join("ca");
    let vouch::issuance::bootstrap::CertAndKey { key, .. } =
        vouch::issuance::bootstrap::load_cert_and_key(&ca.join("ca_crt.pem"), &ca.join("ca_key.pem")).unwrap();
    let sign = |m: &[u8]| {
        use rcgen::SigningKey;
        key.sign(m).map_err(|e| e.to_string())
    };
    let now = time::OffsetDateTime::now_utc();
    let mut i = from;
    while i < from + n {
        let lines: Vec<String> = (i..(i + batch).min(from + n))
            .map(|k| {
                serde_json::json!({
                    "time": vouch::encoding::time::format_rfc3339(now), "event": "decision", "source": "sign",
                    "certname": format!("node-{k}.example.test"), "verdict": "granted", "conductor": null, "reasons": [],
                })
                .to_string()
            })
            .collect();
        log.append(&lines, Some(&sign), now, false).unwrap();
        i += batch;
    }
}

fn verify(dir: &Path, files: &[&Path], extra: &[&str]) -> Output {
    let mut c = vouch();
    c.args(["--dir", s(dir), "audit", "verify"]);
    for f in files {
        c.arg(s(f));
    }
    c.args(extra).output().unwrap()
}

/// The log broken as `tamper` does, then verified: exit 1 and the kind and line reported.
fn broken(tamper: impl FnOnce(&mut Vec<String>)) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 2_500, 7);
    let good = verify(&dir, &[&path], &[]);
    assert!(good.status.success(), "{}", text(&good));
    let mut lines: Vec<String> = std::fs::read_to_string(&path).unwrap().lines().map(str::to_string).collect();
    tamper(&mut lines);
    std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let o = verify(&dir, &[&path], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn an_untouched_log_of_100000_lines_verifies_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 100_000, 64);
    let t = std::time::Instant::now();
    let o = verify(&dir, &[&path], &[]);
    let took = t.elapsed();
    let out = ok(&o);
    assert!(out.starts_with("ok: 100"), "{out}");
    assert!(out.contains("checkpoints"), "{out}");
    let total = std::fs::read_to_string(&path).unwrap().lines().count();
    assert!(total > 100_000, "checkpoints are lines too: {total}");
    assert!(took < std::time::Duration::from_secs(10), "verifying took {took:?}");
    eprintln!("verified {total} lines in {took:?}");
    // JSON for scripts.
    let o = verify(&dir, &[&path], &["-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["broken"].is_null() && v["checkpoints"].as_u64().unwrap() >= 90, "{v}");
}

#[test]
fn a_modified_line_is_reported() {
    let out = broken(|l| l[1000] = l[1000].replace("node-", "nodf-"));
    assert!(out.contains(":1001: modified"), "{out}");
}

#[test]
fn an_inserted_line_is_reported() {
    // A line copied from elsewhere, chain fields and all.
    let out = broken(|l| {
        let copy = l[10].clone();
        l.insert(1500, copy)
    });
    assert!(out.contains(": inserted"), "{out}");
    assert!(out.contains(":1501:") || out.contains(":1500:"), "{out}");
}

#[test]
fn a_forged_line_is_reported_as_inserted() {
    let out = broken(|l| {
        l.insert(
            700,
            r#"{"time":"2026-01-01T00:00:00Z","event":"decision","certname":"evil.example.test","verdict":"granted"}"#
                .into(),
        )
    });
    assert!(out.contains(":701: inserted"), "{out}");
}

#[test]
fn a_deleted_line_is_reported() {
    let out = broken(|l| {
        l.remove(1234);
    });
    assert!(out.contains(":1235: deleted") && out.contains("1 line"), "{out}");
}

#[test]
fn reordered_lines_are_reported() {
    let out = broken(|l| l.swap(400, 401));
    assert!(out.contains(":401: reordered"), "{out}");
}

#[test]
fn a_forged_checkpoint_is_reported() {
    // A checkpoint whose signature is another one's: it does not sign this place in the chain.
    let out = broken(|l| {
        let cps: Vec<usize> = (0..l.len()).filter(|i| l[*i].contains("\"event\":\"checkpoint\"")).collect();
        assert!(cps.len() >= 2, "checkpoints every 1000 lines");
        let sig = |s: &str| s.split("\"signature\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        let (a, b) = (sig(&l[cps[0]]), sig(&l[cps[1]]));
        l[cps[1]] = l[cps[1]].replace(&b, &a);
    });
    assert!(out.contains("bad-checkpoint") || out.contains("modified"), "{out}");
}

/// A tail cut off after a checkpoint was published: reported as truncated.
#[test]
fn a_tail_truncated_after_a_published_checkpoint_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = dir.join("audit.log");
    // Lines written by the binary (revocations of unknown names fail; a checkpoint is a command).
    write_lines(&dir, &AuditLog::new(&path), 0, 300, 10);
    let published = ok(&vouch().args(["--dir", s(&dir), "audit", "checkpoint"]).output().unwrap());
    assert!(published.contains("\"event\":\"checkpoint\""), "{published}");
    let cp = tmp.path().join("published.txt");
    std::fs::write(&cp, &published).unwrap();
    write_lines(&dir, &AuditLog::new(&path), 300, 50, 10);
    let o = verify(&dir, &[], &["--checkpoint", s(&cp)]);
    assert!(o.status.success(), "{}", text(&o));
    // Cut the log before the checkpoint: every line left is intact, but the tail is gone.
    let all = std::fs::read_to_string(&path).unwrap();
    let keep: String = all.lines().take(250).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, keep).unwrap();
    assert!(verify(&dir, &[], &[]).status.success(), "without the published checkpoint nothing shows");
    let o = verify(&dir, &[], &["--checkpoint", s(&cp)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("truncated") && out.contains("published checkpoint"), "{out}");
    // A published checkpoint that is not this CA's is refused too.
    let forged = published.replace("\"signature\":\"", "\"signature\":\"AAAA");
    std::fs::write(&cp, forged).unwrap();
    let o = verify(&dir, &[], &["--checkpoint", s(&cp)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// Rotation (logrotate moves audit.log to audit.log.1): the next line continues the chain, in
/// this process and in a new one; the two files verify in order, and out of order they do not.
#[test]
fn rotation_continues_the_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    let log = AuditLog::new(&path);
    write_lines(&dir, &log, 0, 120, 10);
    let old = tmp.path().join("audit.log.1");
    std::fs::rename(&path, &old).unwrap();
    write_lines(&dir, &log, 120, 30, 10);
    // A new process (a new writer) after a second rotation reads the chain from audit.log.1.
    let older = tmp.path().join("audit.log.2");
    std::fs::rename(&old, &older).unwrap();
    std::fs::rename(&path, &old).unwrap();
    write_lines(&dir, &AuditLog::new(&path), 150, 30, 10);
    let o = verify(&dir, &[&older, &old, &path], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("from seq 1 to"), "{}", text(&o));
    // The files in the wrong order, or one left out: a break.
    assert_eq!(verify(&dir, &[&old, &older, &path], &[]).status.code(), Some(1));
    assert_eq!(verify(&dir, &[&older, &path], &[]).status.code(), Some(1));
    // By default: the policy's log (DIR/audit.log) after its rotated files.
    for (from, to) in [(&older, "audit.log.2"), (&old, "audit.log.1"), (&path, "audit.log")] {
        std::fs::copy(from, dir.join(to)).unwrap();
    }
    let o = verify(&dir, &[], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("from seq 1 to"), "{}", text(&o));
    // A file alone does not verify: the files before it are missing (it could be made up).
    let o = verify(&dir, &[&path], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("earlier files missing"), "{}", text(&o));
}

/// Security review, issue 18 #1: a log that starts after the published checkpoint, or one
/// rewritten from seq 1 without the CA's key, does not verify.
#[test]
fn a_log_replaced_or_cut_before_the_published_checkpoint_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = dir.join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 3, 1);
    let published = ok(&vouch().args(["--dir", s(&dir), "audit", "checkpoint"]).output().unwrap());
    let cp = tmp.path().join("published.txt");
    std::fs::write(&cp, &published).unwrap();
    write_lines(&dir, &AuditLog::new(&path), 3, 3, 1);
    assert!(verify(&dir, &[], &["--checkpoint", s(&cp)]).status.success());
    let all: Vec<String> = std::fs::read_to_string(&path).unwrap().lines().map(str::to_string).collect();
    let pseq: u64 = serde_json::from_str::<serde_json::Value>(&published).unwrap()["seq"].as_u64().unwrap();
    // Every line up to and including the published checkpoint deleted.
    let rest: String = all.iter().skip(pseq as usize).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, &rest).unwrap();
    let o = verify(&dir, &[], &["--checkpoint", s(&cp)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // ... unless the operator says where the files start: then the published one is covered.
    let o = verify(&dir, &[], &["--checkpoint", s(&cp), "--from-checkpoint", s(&cp)]);
    assert!(o.status.success(), "{}", text(&o));
    // Made-up lines seq 20-22 (chained among themselves) in place of the whole log.
    let mut prev = "f".repeat(64);
    let mut fake = String::new();
    for seq in 20..23 {
        let l = format!(r#"{{"event":"decision","certname":"evil","verdict":"granted","seq":{seq},"prev":"{prev}"}}"#);
        prev = vouch::store::audit::line_hash(&l);
        fake.push_str(&l);
        fake.push('\n');
    }
    std::fs::write(&path, &fake).unwrap();
    for extra in [&["--checkpoint", s(&cp)][..], &[]] {
        let o = verify(&dir, &[], extra);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    }
    let o = verify(&dir, &[], &["--from-checkpoint", s(&cp)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // A log rewritten from seq 1 with no checkpoints (no CA key needed): over CHECKPOINT_LINES
    // lines without a signed checkpoint.
    let mut prev = vouch::store::audit::GENESIS.to_string();
    let mut fake = String::new();
    for seq in 1..=(vouch::store::audit::CHECKPOINT_LINES + 5) {
        let l =
            format!(r#"{{"event":"decision","certname":"n{seq}","verdict":"granted","seq":{seq},"prev":"{prev}"}}"#);
        prev = vouch::store::audit::line_hash(&l);
        fake.push_str(&l);
        fake.push('\n');
    }
    std::fs::write(&path, &fake).unwrap();
    let o = verify(&dir, &[], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no checkpoint signed"), "{}", text(&o));
    // The writer never leaves that many lines without a checkpoint, even in one batch.
    std::fs::remove_file(&path).unwrap();
    write_lines(&dir, &AuditLog::new(&path), 0, 2_600, 2_600);
    let o = verify(&dir, &[], &[]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The log vouch itself writes (the policy's audit.log): chained, and `audit show` filters it.
#[test]
fn vouch_writes_a_chained_log_and_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let o = vouch().args(["--dir", s(&dir), "audit", "show"]).output().unwrap();
    assert!(!o.status.success(), "no log yet: {}", text(&o));
    let cp = ok(&vouch().args(["--dir", s(&dir), "audit", "checkpoint"]).output().unwrap());
    assert!(cp.contains("\"seq\":1,") && cp.contains("\"prev\":\"0000"), "{cp}");
    write_lines(&dir, &AuditLog::new(dir.join("audit.log")), 0, 5, 2);
    let shown =
        ok(&vouch().args(["--dir", s(&dir), "audit", "show", "--certname", "node-3.example.test"]).output().unwrap());
    assert_eq!(shown.lines().count(), 1, "{shown}");
    assert!(shown.contains("decision") && shown.contains("verdict=granted"), "{shown}");
    let json = ok(&vouch().args(["--dir", s(&dir), "audit", "show", "--since", "1h", "-o", "json"]).output().unwrap());
    assert_eq!(json.lines().count(), 6, "{json}");
    let future =
        ok(&vouch().args(["--dir", s(&dir), "audit", "show", "--since", "2999-01-01T00:00:00Z"]).output().unwrap());
    assert!(future.is_empty(), "{future}");
    assert!(ok(&vouch().args(["--dir", s(&dir), "audit", "verify"]).output().unwrap()).starts_with("ok:"));
}

/// Checkpoints signed with every CA key type verify (and a checkpoint of another CA does not).
#[test]
fn checkpoints_verify_for_every_ca_key_type() {
    let tmp = tempfile::tempdir().unwrap();
    let other = ca(&tmp.path().join("other"));
    for kt in ["p256", "p384", "ed25519", "rsa2048"] {
        let dir = tmp.path().join(kt);
        ok(&vouch().args(["--dir", s(&dir), "ca", "init", "--key-type", kt]).output().unwrap());
        ok(&vouch().args(["--dir", s(&dir), "audit", "checkpoint"]).output().unwrap());
        ok(&vouch().args(["--dir", s(&dir), "audit", "checkpoint"]).output().unwrap());
        let out = ok(&verify(&dir, &[], &[]));
        assert!(out.contains("2 checkpoints"), "{kt}: {out}");
        let log = dir.join("audit.log");
        let o = verify(&dir, &[&log], &["--ca-cert", s(&other.join("ca/ca_crt.pem"))]);
        assert_eq!(o.status.code(), Some(1), "{kt}: {}", text(&o));
    }
}

/// A line torn by a crash mid-write: the next writer starts a new line after it and goes on
/// with the chain from the last complete line; verify points at the torn line.
#[test]
fn a_torn_line_is_reported_and_the_chain_goes_on_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 20, 5);
    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"time\":\"2026-").unwrap();
    write_lines(&dir, &AuditLog::new(&path), 20, 5, 5);
    let all = std::fs::read_to_string(&path).unwrap();
    assert!(
        all.lines().all(|l| l == "{\"time\":\"2026-" || serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{all}"
    );
    let o = verify(&dir, &[&path], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!(":{}: inserted", lines + 1)), "{out}");
}

/// Security review, issue 18 #2: a long-running writer (serve), another process (a CLI
/// checkpoint) and a rotation: the running writer must not continue the chain it remembers
/// (it is stale) but the one in `audit.log.1`.
#[test]
fn a_rotation_after_another_process_wrote_keeps_one_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    let serve = AuditLog::new(&path);
    write_lines(&dir, &serve, 0, 5, 1);
    write_lines(&dir, &AuditLog::new(&path), 5, 3, 1);
    let old = tmp.path().join("audit.log.1");
    std::fs::rename(&path, &old).unwrap();
    write_lines(&dir, &serve, 8, 3, 1);
    let o = verify(&dir, &[&old, &path], &[]);
    assert!(o.status.success(), "{}", text(&o));
    // A new file holding only a torn line continues the chain of audit.log.1 too.
    let older = tmp.path().join("audit.log.2");
    std::fs::rename(&old, &older).unwrap();
    std::fs::rename(&path, &old).unwrap();
    std::fs::write(&path, b"{\"time\":\"2026-").unwrap();
    write_lines(&dir, &serve, 11, 2, 1);
    let all = std::fs::read_to_string(&path).unwrap();
    let second: serde_json::Value = serde_json::from_str(all.lines().nth(1).unwrap()).unwrap();
    let last_old: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&old).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(second["seq"].as_u64().unwrap(), last_old["seq"].as_u64().unwrap() + 1, "{all}");
}

/// Security review, issue 18 #3: a huge line (written before lines were capped) at the log's
/// end does not make the next writer start a new chain; the writer caps lines.
#[test]
fn a_huge_last_line_does_not_restart_the_chain_and_lines_are_capped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 5, 1);
    let all = std::fs::read_to_string(&path).unwrap();
    let last = all.lines().last().unwrap();
    let seq = serde_json::from_str::<serde_json::Value>(last).unwrap()["seq"].as_u64().unwrap();
    let big = format!(
        r#"{{"event":"decision","certname":"x","verdict":"refused","pad":"{}","seq":{},"prev":"{}"}}"#,
        "a".repeat(720 * 1024),
        seq + 1,
        vouch::store::audit::line_hash(last)
    );
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(format!("{big}\n").as_bytes()).unwrap();
    write_lines(&dir, &AuditLog::new(&path), 5, 2, 1);
    let after = std::fs::read_to_string(&path).unwrap();
    let next: serde_json::Value = serde_json::from_str(after.lines().last().unwrap()).unwrap();
    assert!(next["seq"].as_u64().unwrap() > seq + 1, "{next}");
    // The writer caps a line: a 300 KB decision is cut, and the log still verifies.
    let huge = serde_json::json!({"event": "decision", "certname": "y", "reasons": [{"message": "b".repeat(300_000)}]});
    std::fs::remove_file(&path).unwrap();
    let log = AuditLog::new(&path);
    write_lines(&dir, &log, 0, 2, 1);
    log.append(&[huge.to_string()], None, time::OffsetDateTime::now_utc(), false).unwrap();
    let text_ = std::fs::read_to_string(&path).unwrap();
    assert!(text_.lines().all(|l| l.len() < vouch::store::audit::MAX_LINE_BYTES + 200), "a line was not capped");
    assert!(text_.contains("(300000 bytes)"), "the cut value says how long it was");
    let o = verify(&dir, &[&path], &[]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Security review, issue 18 #4: a huge line (2 MiB, no newline for long) is a break for
/// verify and skipped by show, never read whole.
#[test]
fn a_huge_line_is_a_break_not_an_allocation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = ca(tmp.path());
    let path = tmp.path().join("audit.log");
    write_lines(&dir, &AuditLog::new(&path), 0, 3, 1);
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&vec![b'a'; 2 * 1024 * 1024]).unwrap();
    f.write_all(b"\n").unwrap();
    drop(f);
    let o = verify(&dir, &[&path], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(":5: modified") && out.contains("longer than"), "{out}");
    let o = vouch().args(["--dir", s(&dir), "audit", "show", "--file", s(&path)]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 5 is longer"), "{}", text(&o));
}
