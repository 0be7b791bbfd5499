//! Kills `vouch sign` and `vouch revoke` at random instants, many times, then
//! checks that the store is consistent: no half-written certificate, no serial
//! twice, no issued certificate the store does not know, no operation left
//! half-done once the next command has taken the lock.

mod common;

use common::s;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn vouch(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vouch")).args(args).env("VOUCH_DIR", dir).output().unwrap()
}

/// A CA in `w/vouch`, and a conductor whose certificate and key are `w/c.pem`, `w/c.key`.
fn ca_with_conductor(w: &Path) -> PathBuf {
    let dir = w.join("vouch");
    ok(vouch(&dir, &["ca", "init"]));
    ok(vouch(&dir, &["conductor", "new", "c", "--cert-out", s(&w.join("c.pem")), "--key-out", s(&w.join("c.key"))]));
    dir
}

/// Fresh version 2 attributes for `name` (attributes are good once), then its CSR.
fn vouched_csr(dir: &Path, w: &Path, name: &str) -> PathBuf {
    let attrs = w.join(format!("{name}.attrs.yaml"));
    let class = w.join("class.yaml");
    if !class.exists() {
        std::fs::write(&class, "classes: [ntp]\n").unwrap();
    }
    ok(vouch(
        dir,
        &["conductor", "sign", "--cert", s(&w.join("c.pem")), "--key", s(&w.join("c.key")), "--certname", name]
            .iter()
            .copied()
            .chain(["--classification", s(&class), "--expires-in", "1h", "--out", s(&attrs)])
            .collect::<Vec<_>>(),
    ));
    let csr = w.join(format!("{name}.csr"));
    let key = w.join(format!("{name}.key"));
    ok(vouch(dir, &["csr", "--certname", name, "--attributes", s(&attrs), "--key-out", s(&key), "--csr-out", s(&csr)]));
    csr
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A small xorshift generator, seeded from the clock; the seed is printed so a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn serial_of(pem: &str) -> String {
    let (_, der) = vouch::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).expect("a whole PEM certificate");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("a whole certificate");
    cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect()
}

/// Entries in the store's write-ahead log (after its header line).
fn wal_entries(ca: &Path) -> usize {
    let wal = std::fs::read_to_string(ca.join("wal.log")).unwrap();
    assert!(wal.starts_with("{\"wal\":2,"), "a log header first: {wal:.80}");
    wal.lines().skip(1).filter(|l| l.starts_with("{\"record\":")).count()
}

/// Checks the store after a command took the lock (so recovery and the checkpoint ran).
fn check_store(ca: &Path) -> (usize, usize) {
    let pending: Vec<_> = std::fs::read_dir(ca.join("pending")).unwrap().collect();
    assert!(pending.is_empty(), "operations left half-done: {pending:?}");
    assert_eq!(wal_entries(ca), 0, "the log was checkpointed by the lock holder");
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap_or_default();
    let mut inv_serials = HashMap::new();
    for line in inventory.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 4, "whole inventory lines only: {line:?}");
        let serial = f[0].trim_start_matches("0x").to_string();
        assert!(
            inv_serials.insert(serial.clone(), f[3].trim_start_matches("/CN=").to_string()).is_none(),
            "serial {serial} twice"
        );
    }
    let mut records = HashMap::new();
    for shard in std::fs::read_dir(ca.join("serials")).unwrap() {
        for f in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let path = f.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue; // a temporary file a killed writer left; never read as a record
            }
            let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|e| panic!("record {} is not whole JSON: {e}", path.display()));
            assert_ne!(rec["state"], "intent", "an intent survived recovery: {rec}");
            records.insert(rec["serial"].as_str().unwrap().to_string(), rec);
        }
    }
    let mut signed = 0;
    for f in std::fs::read_dir(ca.join("signed")).unwrap() {
        let path = f.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert!(!name.starts_with('.'), "temporary file left in signed/: {name}");
        let serial = serial_of(&std::fs::read_to_string(&path).unwrap());
        let rec = records.get(&serial).unwrap_or_else(|| panic!("{name}: serial {serial} unknown to the store"));
        assert!(rec["state"] == "issued" || rec["state"] == "revoked", "{name}: {rec}");
        assert_eq!(format!("{}.pem", rec["certname"].as_str().unwrap()), name);
        assert!(inv_serials.contains_key(&serial), "{name}: serial {serial} not in inventory.txt");
        signed += 1;
    }
    for (serial, cn) in &inv_serials {
        let rec = records.get(serial).unwrap_or_else(|| panic!("inventory serial {serial} has no record"));
        assert!(rec["state"] == "issued" || rec["state"] == "revoked", "{rec}");
        assert_eq!(rec["certname"].as_str().unwrap(), cn);
    }
    // Never two valid certificates for one certname.
    let mut valid = HashSet::new();
    for rec in records.values().filter(|r| r["state"] == "issued") {
        assert!(valid.insert(rec["certname"].as_str().unwrap().to_string()), "two valid certificates: {rec}");
    }
    // And vouch's own check agrees: no finding.
    let dir = ca.parent().unwrap();
    let o = vouch(dir, &["store", "verify"]);
    assert!(
        o.status.success(),
        "vouch store verify: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (signed, inv_serials.len())
}

#[test]
fn killed_at_random_points_the_store_stays_consistent() {
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_conductor(w);
    const N: usize = 60;
    let csrs: Vec<PathBuf> = (0..N).map(|i| vouched_csr(&dir, w, &format!("n{i}.example.test"))).collect();
    // Time one uninterrupted sign to spread the kills over its whole run.
    let start = std::time::Instant::now();
    ok(vouch(&dir, &["sign", "--csr", s(&csrs[0])]));
    let span = start.elapsed().as_micros().max(1000) as u64 * 3 / 2;
    let mut killed = 0;
    // Kills that left an operation half-done for the next command to finish.
    let mut mid_operation = 0;
    for (i, csr) in csrs.iter().enumerate().skip(1) {
        let revoke_too = i % 3 == 0;
        let mut child = if revoke_too {
            let name = format!("n{}.example.test", i - 1);
            Command::new(env!("CARGO_BIN_EXE_vouch"))
                .args(["revoke", &name])
                .env("VOUCH_DIR", &dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        } else {
            Command::new(env!("CARGO_BIN_EXE_vouch"))
                .args(["sign", "--csr", s(csr)])
                .env("VOUCH_DIR", &dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        std::thread::sleep(Duration::from_micros(rng.next() % span));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        if std::fs::read_dir(dir.join("ca/pending")).map(|d| d.count()).unwrap_or(0) > 0 {
            mid_operation += 1;
        }
    }
    // The next command that takes the lock finishes or abandons what was left.
    ok(vouch(&dir, &["crl"]));
    let (signed, issued) = check_store(&dir.join("ca"));
    eprintln!(
        "{killed} of {} runs killed before they finished, {mid_operation} in the middle of an operation; \
         {signed} certificates on disk, {issued} issued",
        N - 1
    );
    // A retry either issues (the killed run had not issued), meets its certificate, or —
    // for a certificate that was issued and then revoked — finds its attributes spent.
    for csr in &csrs {
        let out = vouch(&dir, &["sign", "--csr", s(csr)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("[certificate-exists]") || err.contains("[attributes-replayed]"),
            "{err}"
        );
    }
    ok(vouch(&dir, &["crl"]));
    check_store(&dir.join("ca"));
    let list: serde_json::Value =
        serde_json::from_str(&ok(vouch(&dir, &["list", "--all", "--format", "json"]))).unwrap();
    let signed_names: HashSet<_> =
        list.as_array().unwrap().iter().filter(|e| e["state"] == "signed").map(|e| e["name"].clone()).collect();
    assert!(signed_names.len() >= N - N / 3 - 1, "{list}");
    assert!(killed > 0, "no run was interrupted; the test proved nothing (seed {seed})");
}

/// Aborts at every step of issuance and revocation in turn (fault injection),
/// then checks that recovery finishes or abandons the operation as it must.
#[test]
fn aborted_at_every_step_recovery_finishes_or_abandons() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_conductor(w);
    let csr_for = |name: &str| -> PathBuf { vouched_csr(&dir, w, name) };
    let abort_at = |step: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
            .args(args)
            .env("VOUCH_DIR", &dir)
            .env("VOUCH_TEST_ABORT_AT", step)
            .output()
            .unwrap();
        assert!(out.status.code().is_none(), "{step}: the process should have aborted: {out:?}");
        assert!(out.stdout.is_empty(), "{step}: nothing may be handed out before the store knows it");
    };
    // Before the log is synced nothing is issued (the attributes' claim, written unsynced,
    // stays this key's: the retry issues); once it is, the certificate exists whatever
    // else was written, and the next lock holder re-applies the log and checkpoints.
    for (step, issued_after) in
        [("wal:before", false), ("wal:appended", true), ("wal:record", true), ("wal:applied", true)]
    {
        let name = format!("{}.example.test", step.replace(':', "-"));
        let csr = csr_for(&name);
        abort_at(step, &["sign", "--csr", s(&csr)]);
        ok(vouch(&dir, &["crl"])); // takes the lock: recovery runs
        check_store(&dir.join("ca"));
        let exists = dir.join(format!("ca/signed/{name}.pem")).exists();
        assert_eq!(exists, issued_after, "{step}");
        let retry = vouch(&dir, &["sign", "--csr", s(&csr)]);
        assert_eq!(retry.status.success(), !issued_after, "{step}: {}", String::from_utf8_lossy(&retry.stderr));
        ok(vouch(&dir, &["crl"]));
        check_store(&dir.join("ca"));
    }
    // Killed while checkpointing someone else's log: the next lock holder does it again.
    let name = "checkpoint.example.test";
    ok(vouch(&dir, &["sign", "--csr", s(&csr_for(name))]));
    assert_eq!(wal_entries(&dir.join("ca")), 1, "the sign left its entry in the log");
    abort_at("checkpoint:synced", &["crl"]);
    ok(vouch(&dir, &["crl"]));
    check_store(&dir.join("ca"));
    assert!(dir.join(format!("ca/signed/{name}.pem")).exists());
    for step in ["revoke:marker", "revoke:record", "revoke:log", "revoke:forget"] {
        let name = format!("{}.example.test", step.replace(':', "-"));
        let csr = csr_for(&name);
        let pem = ok(vouch(&dir, &["sign", "--csr", s(&csr)]));
        let serial = serial_of(&pem);
        let cmd = if step == "revoke:forget" { vec!["clean", name.as_str()] } else { vec!["revoke", name.as_str()] };
        abort_at(step, &cmd);
        ok(vouch(&dir, &["crl"]));
        check_store(&dir.join("ca"));
        // The marker was written first, so recovery completes the revocation.
        let revs = std::fs::read_to_string(dir.join("ca/revocations.txt")).unwrap();
        assert_eq!(revs.lines().filter(|l| l.starts_with(&serial)).count(), 1, "{step}: {revs}");
        let crl = std::fs::read(dir.join("ca/ca_crl.pem")).unwrap();
        let (_, der) = vouch::encoding::pem::find(&crl, &["X509 CRL"]).unwrap();
        let (_, crl) = x509_parser::parse_x509_crl(&der).unwrap();
        let on_crl = crl
            .iter_revoked_certificates()
            .any(|r| r.raw_serial().iter().map(|b| format!("{b:02x}")).collect::<String>() == serial);
        assert!(on_crl, "{step}: serial {serial} not on the CRL");
        assert_eq!(vouch(&dir, &["enc", &name]).status.code(), Some(2), "{step}: a revoked node has no classification");
    }
}

/// What a power loss can do to the files the log covers (they are written without
/// fsync): lose them. Simulated by deleting them after an issuance; the next lock
/// holder rebuilds every one from the synced log, the replay journal's entry included.
#[test]
fn files_lost_after_the_log_was_synced_are_rebuilt_from_it() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_conductor(w);
    let ca = dir.join("ca");
    let first = vouched_csr(&dir, w, "before.example.test");
    ok(vouch(&dir, &["sign", "--csr", s(&first)]));
    ok(vouch(&dir, &["crl"])); // checkpoint: "before" is durable in the files
    let inventory_before = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    let csr = vouched_csr(&dir, w, "lost.example.test");
    let pem = ok(vouch(&dir, &["sign", "--csr", s(&csr)]));
    let serial = serial_of(&pem);
    assert_eq!(wal_entries(&ca), 1);
    // The power loss: the certificate, its record, its inventory line and its journal entry are gone.
    std::fs::remove_file(ca.join("signed/lost.example.test.pem")).unwrap();
    std::fs::remove_file(ca.join(format!("serials/{}/{serial}.json", &serial[..2]))).unwrap();
    std::fs::write(ca.join("inventory.txt"), &inventory_before).unwrap();
    let journal = dir.join("replay");
    let mut removed = 0;
    for bucket in std::fs::read_dir(&journal).unwrap() {
        for e in std::fs::read_dir(bucket.unwrap().path()).unwrap() {
            let p = e.unwrap().path();
            if std::fs::read_to_string(&p).unwrap().contains("lost.example.test") {
                std::fs::remove_file(p).unwrap();
                removed += 1;
            }
        }
    }
    assert_eq!(removed, 1, "the journal entry of the lost issuance (journal at {})", journal.display());
    ok(vouch(&dir, &["crl"]));
    check_store(&ca);
    assert_eq!(serial_of(&std::fs::read_to_string(ca.join("signed/lost.example.test.pem")).unwrap()), serial);
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    assert_eq!(inventory.lines().filter(|l| l.starts_with(&format!("0x{serial} "))).count(), 1, "{inventory}");
    assert!(inventory.starts_with(&inventory_before));
    assert!(ok(vouch(&dir, &["enc", "lost.example.test"])).contains("ntp"));
    // The journal entry is back: the same attributes are spent, even after a revocation.
    ok(vouch(&dir, &["clean", "lost.example.test"]));
    let again = vouch(&dir, &["sign", "--csr", s(&csr)]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("[attributes-replayed]"), "{again:?}");
}

/// The checkpoint made outside the lock once the log passes its size (here made tiny, so
/// that one certificate passes it, and not four times it): it runs after the issuance, in the process that issued;
/// killed after its flush or after its cut, the next lock holder finds every certificate
/// and every file whole.
#[test]
fn killed_in_the_checkpoint_outside_the_lock_nothing_is_lost() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_conductor(w);
    let ca = dir.join("ca");
    let sign = |csr: &Path, abort_at: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vouch"));
        cmd.args(["sign", "--csr", s(csr)]).env("VOUCH_DIR", &dir).env("VOUCH_TEST_CHECKPOINT_BYTES", "1000");
        if let Some(step) = abort_at {
            cmd.env("VOUCH_TEST_ABORT_AT", step);
        }
        cmd.output().unwrap()
    };
    // Not killed: the log is cut right after the issuance, by the process that issued.
    let csr = vouched_csr(&dir, w, "whole.example.test");
    let pem = ok(sign(&csr, None));
    assert_eq!(wal_entries(&ca), 0, "the log was cut after the issuance");
    let header = std::fs::read_to_string(ca.join("wal.log")).unwrap();
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    assert!(header.contains(&format!("\"inventory_len\":{}", inventory.len())), "{header}");
    assert!(inventory.contains(&format!("0x{} ", serial_of(&pem))));
    for step in ["checkpoint:unlocked-synced", "checkpoint:cut"] {
        let name = format!("{}.example.test", step.replace(':', "-"));
        let csr = vouched_csr(&dir, w, &name);
        let out = sign(&csr, Some(step));
        assert!(out.status.code().is_none(), "{step}: the process should have aborted: {out:?}");
        ok(vouch(&dir, &["crl"])); // takes the lock: recovery runs
        check_store(&ca);
        assert!(ca.join(format!("signed/{name}.pem")).exists(), "{step}: issued before the checkpoint");
        assert_eq!(wal_entries(&ca), 0, "{step}");
        let retry = vouch(&dir, &["sign", "--csr", s(&csr)]);
        assert!(String::from_utf8_lossy(&retry.stderr).contains("[certificate-exists]"), "{step}: {retry:?}");
    }
    let (signed, issued) = check_store(&ca);
    assert_eq!((signed, issued), (3, 3));
}

/// Found by review of 63124fb: a long-running process (here this test process, as `vouch
/// serve` is) trusts its own log at the lock as long as the log file is unchanged, whoever
/// held the lock meanwhile. Another process that died in the middle of recovering that log
/// (`vouch crl` killed at `wal:record`: the inventory already truncated to the log header's
/// length, nothing re-applied yet) leaves the log unchanged, so the long-running process's
/// cut outside the lock goes ahead: it drops the entries whose inventory lines were just
/// truncated away, and writes a header with the inventory's length it remembers from the
/// due point, longer than the file now is. The next recovery then does not truncate, and
/// re-appends a line already there. (Trusting the log after another holder is older than
/// 63124fb: its checkpoint under the lock loses the same lines; the duplicate is the cut's.)
#[test]
fn a_cut_after_another_process_died_recovering_the_log_keeps_the_inventory_whole() {
    use vouch::store::{FileStore, Store};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("vouch");
    ok(vouch(&dir, &["ca", "init"]));
    let ca = dir.join("ca");
    let entry = |i: usize, pem_len: usize| stored(&format!("ab{i:030x}"), &format!("n{i}.example.test"), pem_len);
    // The long-running process: three batches take its log past 8 MiB (a checkpoint comes due).
    let store = FileStore::new(&ca);
    for i in 1..=3 {
        store.issue(&store.lock().unwrap(), &[entry(i, 3 << 20)]).unwrap();
    }
    assert!(std::fs::metadata(ca.join("wal.log")).unwrap().len() > 8 << 20);
    // Another process takes the lock, finds a log it did not write, and dies recovering it.
    die_recovering(&dir);
    // The long-running process's checkpoint outside the lock, then one more batch.
    store.checkpoint_unlocked().unwrap();
    store.issue(&store.lock().unwrap(), &[entry(4, 100)]).unwrap();
    // Any later lock holder (a command, or this process after a crash) recovers the log.
    ok(vouch(&dir, &["crl"]));
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    for i in 1..=4 {
        let line = format!("0xab{i:030x} ");
        assert_eq!(inventory.matches(&line).count(), 1, "certificate {i} in the inventory once:\n{inventory}");
    }
}

/// Review of 5cae2f9: the test above passes without the change it was written for (another
/// holder's mark dropping the remembered log): the cut's refusal of an inventory shorter than
/// its due point covers it. This one goes through the checkpoint under the lock instead (the
/// one `vouch serve` makes every minute, and a revocation makes): a process that still
/// trusted its unchanged log after another died recovering it would flush and start a fresh
/// log whose header records the truncated inventory, and the lines truncated away would be
/// lost for good.
#[test]
fn a_checkpoint_after_another_process_died_recovering_the_log_keeps_the_inventory_whole() {
    use vouch::store::{FileStore, Store};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("vouch");
    ok(vouch(&dir, &["ca", "init"]));
    let ca = dir.join("ca");
    let entry = |i: usize| stored(&format!("ac{i:030x}"), &format!("m{i}.example.test"), 100);
    // The long-running process logs three batches (no checkpoint comes due).
    let store = FileStore::new(&ca);
    for i in 1..=3 {
        store.issue(&store.lock().unwrap(), &[entry(i)]).unwrap();
    }
    // Another process takes the lock, finds a log it did not write, and dies recovering it
    // (the inventory already truncated to the log header's length, nothing re-applied).
    die_recovering(&dir);
    // The long-running process's checkpoint under the lock, then any later holder.
    store.checkpoint(&store.lock().unwrap()).unwrap();
    ok(vouch(&dir, &["crl"]));
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    for i in 1..=3 {
        let line = format!("0xac{i:030x} ");
        assert_eq!(inventory.matches(&line).count(), 1, "certificate {i} in the inventory once:\n{inventory}");
    }
}

/// A certificate as the store keeps it, for tests that drive the store directly.
fn stored(serial: &str, certname: &str, pem_len: usize) -> vouch::store::Issuance {
    use vouch::store::{CertRecord, Issuance, State};
    Issuance {
        record: CertRecord {
            digest: "d".into(),
            not_before: "2030-01-01T00:00:00Z".into(),
            not_after: "2031-01-01T00:00:00Z".into(),
            ..CertRecord::bare(serial, certname, State::Issued)
        },
        pem: "x".repeat(pem_len),
        claim: None,
        expected: None,
        supersedes: None,
    }
}

/// Another process takes the lock (`vouch crl`), finds a log it did not write, and dies
/// recovering it: the inventory already truncated to the log header's length, nothing
/// re-applied yet.
fn die_recovering(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .args(["crl"])
        .env("VOUCH_DIR", dir)
        .env("VOUCH_TEST_ABORT_AT", "wal:record")
        .output()
        .unwrap();
    assert!(out.status.code().is_none(), "the recovery should have aborted: {out:?}");
}

/// Review of the inventory lines a replay writes back (eb219c7): a line appended beside
/// vouch (an import, an older vouch's redo) after the log's header, whose serial has a
/// record, survives a replay of the log. The replay holds those lines in memory between
/// cutting the inventory back to the header's length and writing them again: a process
/// that dies in between (here at the first entry's record) loses them, and the next
/// recovery, finding the inventory at the header's length, has nothing left to keep.
#[test]
fn a_line_kept_across_a_replay_survives_a_process_that_dies_replaying() {
    use vouch::store::{FileStore, Store};
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("vouch");
    ok(vouch(&dir, &["ca", "init"]));
    let ca = dir.join("ca");
    let entry = |i: usize| stored(&format!("ad{i:030x}"), &format!("k{i}.example.test"), 100);
    let store = FileStore::new(&ca);
    store.issue(&store.lock().unwrap(), &[entry(1)]).unwrap();
    store.checkpoint(&store.lock().unwrap()).unwrap();
    // A batch in the log; then a line appended from outside, for a serial with a record.
    store.issue(&store.lock().unwrap(), &[entry(2)]).unwrap();
    let foreign = stored(&format!("cc{:030x}", 1), "imported.example.test", 100).record;
    let shard = ca.join("serials").join(&foreign.serial[..2]);
    std::fs::create_dir_all(&shard).unwrap();
    std::fs::write(shard.join(format!("{}.json", foreign.serial)), serde_json::to_vec(&foreign).unwrap()).unwrap();
    let line = format!("0x{} {} {} /CN={}\n", foreign.serial, foreign.not_before, foreign.not_after, foreign.certname);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(ca.join("inventory.txt")).unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }
    // Another process replays the log and dies doing it; any later lock holder recovers.
    die_recovering(&dir);
    ok(vouch(&dir, &["crl"]));
    let inventory = std::fs::read_to_string(ca.join("inventory.txt")).unwrap();
    assert_eq!(inventory.matches(&line).count(), 1, "the kept line, once:\n{inventory}");
    for i in 1..=2 {
        assert_eq!(inventory.matches(&format!("0xad{i:030x} ")).count(), 1, "{i}:\n{inventory}");
    }
}

/// Every file under `dir` with its contents (symbolic links as their targets).
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p.clone());
            }
            let contents = if m.is_file() {
                std::fs::read(&p).unwrap()
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes()
            } else {
                Vec::new()
            };
            files.push((p.strip_prefix(dir).unwrap().to_path_buf(), contents));
        }
    }
    files.sort();
    files
}

/// The replay journal's entry for `certname` in `journal` (its contents), if any.
fn journal_entry(journal: &Path, certname: &str) -> Option<String> {
    let mut found = None;
    for bucket in std::fs::read_dir(journal).ok()? {
        for e in std::fs::read_dir(bucket.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            if text.contains(&format!("\"certname\":\"{certname}\"")) {
                assert!(found.replace(text).is_none(), "two entries for {certname} in {}", journal.display());
            }
        }
    }
    found
}

/// The log of `ca` as an older vouch wrote it: each claim's journal named by its path only.
fn as_older_log(ca: &Path) {
    let log = std::fs::read_to_string(ca.join("wal.log")).unwrap();
    let mut lines = log.lines();
    let mut old = format!("{}\n", lines.next().unwrap());
    let mut batch = String::new();
    for line in lines {
        if line.starts_with("{\"batch\":") {
            let n = batch.lines().count();
            let sha = vouch::encoding::sha256_hex(batch.as_bytes());
            old.push_str(&batch);
            old.push_str(&format!("{{\"batch\":{n},\"sha256\":\"{sha}\"}}\n"));
            batch.clear();
        } else {
            assert!(line.contains(",\"journal_in_dir\":\"replay\""), "{line}");
            batch.push_str(&format!("{}\n", line.replace(",\"journal_in_dir\":\"replay\"", "")));
        }
    }
    assert!(batch.is_empty());
    std::fs::write(ca.join("wal.log"), old).unwrap();
}

/// A data directory copied or moved elsewhere (a backup restored, `cp -a`, a volume mounted
/// at another path) while its log held an issuance that was never applied: the next lock
/// holder in the copy replays it into the copy's own replay journal (the log names the
/// journal relative to the data directory), never into the directory it was copied from.
/// Before, the log held the journal's absolute path: the copy's journal never learned that
/// the attributes were spent (the same CSR, its certificate cleaned, was signed again), and
/// the old directory was written to, or recreated after its removal. A log an older vouch
/// wrote (the absolute path only) is replayed into the copy's journal too, and that is said.
#[test]
fn a_data_directory_copied_before_its_log_was_applied_replays_into_its_own_journal() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_conductor(w);
    let name = "copied.example.test";
    let csr = vouched_csr(&dir, w, name);
    // The log synced, then killed before any file of the issuance was written.
    let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .args(["sign", "--csr", s(&csr)])
        .env("VOUCH_DIR", &dir)
        .env("VOUCH_TEST_ABORT_AT", "wal:appended")
        .output()
        .unwrap();
    assert!(out.status.code().is_none(), "the process should have aborted: {out:?}");
    assert_eq!(wal_entries(&dir.join("ca")), 1, "the issuance is in the log only");
    assert!(!dir.join(format!("ca/signed/{name}.pem")).exists());
    let claimed = journal_entry(&dir.join("replay"), name).expect("the attributes claimed before the log");
    assert!(!claimed.contains("\"issued\":true"), "not yet spent: {claimed}");
    let before = tree(&dir);
    // Copied, the original left in place (its log as this vouch wrote it, then as an older
    // one did); then moved, the original gone.
    for (copy, older, remove_original) in
        [(w.join("copy"), false, false), (w.join("older"), true, false), (w.join("moved"), false, true)]
    {
        let copied = Command::new("cp").arg("-a").arg(&dir).arg(&copy).status().unwrap();
        assert!(copied.success());
        if older {
            as_older_log(&copy.join("ca"));
        }
        if remove_original {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        // Any command that takes the lock replays the log.
        let crl = vouch(&copy, &["crl"]);
        ok(crl.clone());
        let err = String::from_utf8_lossy(&crl.stderr);
        let warned = err.lines().any(|l| {
            l.contains("\"warning\"")
                && l.contains(&format!(
                    "names the replay journal {}, another data directory's",
                    dir.join("replay").display()
                ))
                && l.contains(&format!("this store's journal {} instead", copy.join("replay").display()))
        });
        assert_eq!(warned, older, "{}: the replay says so for an older vouch's log only: {err}", copy.display());
        check_store(&copy.join("ca"));
        assert!(copy.join(format!("ca/signed/{name}.pem")).exists(), "{}: the issuance replayed", copy.display());
        let entry = journal_entry(&copy.join("replay"), name).expect("the claim in the copy's journal");
        assert!(entry.contains("\"issued\":true"), "{}: the copy's journal knows it spent: {entry}", copy.display());
        if remove_original {
            assert!(!dir.exists(), "the replay in {} recreated the directory it was moved from", copy.display());
        } else {
            assert!(
                tree(&dir) == before,
                "the replay in {} wrote into the directory it was copied from",
                copy.display()
            );
        }
        // The attributes are spent for the copy: the same CSR, once its certificate is
        // cleaned, is refused as replayed.
        ok(vouch(&copy, &["clean", name]));
        let again = vouch(&copy, &["sign", "--csr", s(&csr)]);
        assert!(String::from_utf8_lossy(&again.stderr).contains("[attributes-replayed]"), "{again:?}");
    }
}

/// A replay journal configured outside the data directory, shared with other masters (a
/// directory of its own, or the journal in another master's data directory): a log that
/// names it by its path (this vouch's log does so for any journal outside DIR) replays its
/// claims there, even when the policy no longer names it (replay protection turned off, or
/// the policy moved to another shared journal while the log was not checkpointed). Before,
/// such a path was taken for another data directory's journal because it ends in `replay`:
/// the claims went into `DIR/replay` (made for the purpose) or the policy's new journal,
/// and the shared journal the other masters ask never learnt the attributes were spent.
#[test]
fn a_shared_journal_outside_the_data_directory_keeps_its_claims_whatever_the_policy_says_now() {
    let t = tempfile::tempdir().unwrap();
    let name = "shared.example.test";
    // Where the shared journal lives, and what the policy says when the log is replayed.
    for (i, (in_other_master, now)) in
        [(false, "enabled = false"), (false, "moved"), (true, "enabled = false"), (true, "moved")]
            .into_iter()
            .enumerate()
    {
        let w = t.path().join(format!("case{i}"));
        std::fs::create_dir(&w).unwrap();
        let dir = ca_with_conductor(&w);
        let base = if in_other_master {
            // Another master's data directory (its own CA), whose journal this one shares.
            let other = w.join("master1");
            ok(vouch(&other, &["ca", "init"]));
            other
        } else {
            w.join("shared")
        };
        let shared = base.join("replay");
        std::fs::create_dir_all(&shared).unwrap();
        let policy_path = dir.join("policy.toml");
        let policy = std::fs::read_to_string(&policy_path).unwrap();
        assert!(policy.contains("journal = \"replay\"\n"), "{policy}");
        std::fs::write(
            &policy_path,
            policy.replace("journal = \"replay\"\n", &format!("journal = {:?}\n", s(&shared))),
        )
        .unwrap();
        let csr = vouched_csr(&dir, &w, name);
        let out = Command::new(env!("CARGO_BIN_EXE_vouch"))
            .args(["sign", "--csr", s(&csr)])
            .env("VOUCH_DIR", &dir)
            .env("VOUCH_TEST_ABORT_AT", "wal:appended")
            .output()
            .unwrap();
        assert!(out.status.code().is_none(), "the process should have aborted: {out:?}");
        assert_eq!(wal_entries(&dir.join("ca")), 1, "the issuance is in the log only");
        assert!(journal_entry(&shared, name).is_some(), "claimed in the shared journal");
        // A power loss takes the claim (written unsynced); the policy changes meanwhile.
        for bucket in std::fs::read_dir(&shared).unwrap() {
            std::fs::remove_dir_all(bucket.unwrap().path()).unwrap();
        }
        let policy = std::fs::read_to_string(&policy_path).unwrap();
        let changed = if now == "moved" {
            let elsewhere = w.join("elsewhere/replay");
            std::fs::create_dir_all(&elsewhere).unwrap();
            policy.replace(&format!("journal = {:?}\n", s(&shared)), &format!("journal = {:?}\n", s(&elsewhere)))
        } else {
            policy.replace("enabled = true\n", "enabled = false\n")
        };
        assert_ne!(changed, policy);
        std::fs::write(&policy_path, changed).unwrap();
        let crl = vouch(&dir, &["crl"]);
        ok(crl.clone());
        let err = String::from_utf8_lossy(&crl.stderr);
        assert!(!err.contains("another data directory's"), "case {i}: {err}");
        check_store(&dir.join("ca"));
        assert!(dir.join(format!("ca/signed/{name}.pem")).exists(), "case {i}: the issuance replayed");
        let entry =
            journal_entry(&shared, name).unwrap_or_else(|| panic!("case {i}: the claim back in the shared journal"));
        assert!(entry.contains("\"issued\":true"), "case {i}: {entry}");
        assert!(journal_entry(&dir.join("replay"), name).is_none(), "case {i}: the claim went into DIR/replay");
        assert!(journal_entry(&w.join("elsewhere/replay"), name).is_none(), "case {i}: the claim went elsewhere");
    }
}
