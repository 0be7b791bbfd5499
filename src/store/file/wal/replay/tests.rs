use super::*;
use crate::store::file::wal::format::encode_batch;
use crate::store::SpentClaim;
use crate::store::Store;
use std::path::{Path, PathBuf};

use crate::store::file::test_issuance as issuance;

/// Inventory lines someone else appended (an import, an older vouch's redo) survive a
/// replay of the log: with an empty log, the next lock holder's new header records them;
/// with batches in the log, the replay writes them back after cutting the inventory to
/// the header's length. A torn line, or one for a serial the store has no record of, is
/// not kept.
#[test]
fn inventory_lines_appended_from_outside_survive_a_replay_of_the_log() {
    let append = |store: &FileStore, text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    let record = |store: &FileStore, serial: &str, name: &str| {
        store.write_record(&issuance(serial, name).record).unwrap();
    };
    let foreign = "0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=imported.example\n";
    for logged in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
        store.checkpoint(&store.lock().unwrap()).unwrap();
        if logged {
            // A batch in the log, then the foreign lines (this process knows its log).
            store.issue(&store.lock().unwrap(), &[issuance("aa02", "b.example")]).unwrap();
        }
        record(&store, "cc01", "imported.example");
        append(&store, foreign);
        // Not kept: no record for its serial; a torn last line.
        append(&store, "0xdd01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=ghost.example\n0xcc0");
        // Another process takes the lock (or this one after a crash), then issues; the
        // one after it replays the log from its header.
        store.set_known(None);
        store.issue(&store.lock().unwrap(), &[issuance("aa03", "c.example")]).unwrap();
        store.set_known(None);
        drop(store.lock().unwrap());
        let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert_eq!(inv.matches("0xcc01 ").count(), 1, "logged {logged}: {inv}");
        for serial in ["0xaa01 ", "0xaa03 "] {
            assert_eq!(inv.matches(serial).count(), 1, "logged {logged}: {inv}");
        }
        assert_eq!(inv.matches("0xaa02 ").count(), usize::from(logged), "logged {logged}: {inv}");
        if logged {
            // Cut with the replay (the empty log's new header would have kept them).
            assert!(!inv.contains("ghost.example"), "{inv}");
        }
        // The torn line: cut with the replay; with an empty log, recorded by its new
        // header as a line of its own (verify reports it: inventory-line-damaged), the
        // next line appended after it, not glued onto it.
        assert!(inv.ends_with('\n') && inv.contains("0xcc0\n") != logged, "logged {logged}: {inv}");
        assert!(inv.lines().any(|l| l.starts_with("0xaa03 ")), "logged {logged}: {inv}");
    }
}

/// Review: the lines a replay writes back are those that stand for a certificate the
/// store knows. A line whose serial has a record but that says something else (another
/// certname, other dates: a power loss's stale blocks, a hand edit) and a line that
/// repeats one before the header's length (an older copy of it) are not written back:
/// before eb219c7 the replay dropped them, now it keeps them (verify then reports
/// inventory-disagrees, inventory-serial-twice).
#[test]
fn review_a_replay_writes_back_only_lines_its_records_say() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    store.checkpoint(&store.lock().unwrap()).unwrap();
    store.issue(&store.lock().unwrap(), &[issuance("aa02", "b.example")]).unwrap();
    store.write_record(&issuance("cc01", "imported.example").record).unwrap();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
        f.write_all(
            b"0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=someone-else.example\n\
              0xaa01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=a.example\n\
              0xcc01 2030-01-01T00:00:00Z 2031-01-01T00:00:00Z /CN=imported.example\n",
        )
        .unwrap();
    }
    store.set_known(None);
    drop(store.lock().unwrap());
    let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
    assert!(!inv.contains("someone-else"), "a line its record does not say:\n{inv}");
    assert_eq!(inv.matches("0xaa01 ").count(), 1, "a line before the header's length, twice:\n{inv}");
    assert_eq!(inv.matches("0xaa02 ").count(), 1, "{inv}");
    // The line its record says, after a garbled one of the same serial: kept, once.
    assert_eq!(inv.matches("0xcc01 ").count(), 1, "{inv}");
    assert!(inv.contains("/CN=imported.example\n"), "{inv}");
}

/// Review: a torn last inventory line (an append cut short, from outside or by a power
/// loss) and an empty log: the lock that renews the log's header must not make the torn
/// bytes part of the inventory that vouch appends after, or the next certificate's line is
/// glued onto them (`0xcc00xaa03 …`: its serial unreadable, the certificate unlisted).
#[test]
fn review_a_torn_inventory_line_before_an_empty_log_does_not_swallow_the_next_line() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    store.checkpoint(&store.lock().unwrap()).unwrap();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
        f.write_all(b"0xcc0").unwrap();
    }
    // Another process takes the lock (or this one after a crash), issues; then another.
    store.set_known(None);
    store.issue(&store.lock().unwrap(), &[issuance("aa03", "c.example")]).unwrap();
    store.set_known(None);
    drop(store.lock().unwrap());
    let listed: Vec<String> = crate::store::Store::inventory(&store).unwrap().into_iter().map(|e| e.serial).collect();
    assert!(listed.contains(&"aa03".to_string()), "{listed:?}");
    let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
    assert!(inv.lines().any(|l| l.starts_with("0xaa03 ")), "{inv}");
    // The same without any recovery: the process that knows its log issues after the
    // torn bytes were appended.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(store.p("inventory.txt")).unwrap();
        f.write_all(b"0xdd0").unwrap();
    }
    store.issue(&store.lock().unwrap(), &[issuance("aa04", "d.example")]).unwrap();
    let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
    assert!(inv.lines().any(|l| l.starts_with("0xaa04 ")), "{inv}");
}

/// A batch whose apply failed after its log entry was synced is applied before the next
/// batch or checkpoint under the same lock (found by review: it used to be discarded).
#[test]
fn an_entry_whose_apply_failed_is_applied_before_the_next_write_under_the_same_lock() {
    for next in ["issue", "checkpoint"] {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::new(d.path().join("ca"));
        {
            let lock = store.lock().unwrap();
            // A transient failure for y's certificate file (stands for ENOSPC, EIO).
            std::fs::create_dir_all(store.signed_path("y.example").unwrap()).unwrap();
            let e = store.issue(&lock, &[issuance("aa01", "y.example")]).unwrap_err();
            assert!(matches!(e, StoreError::AfterCommit { .. }), "{e}");
            std::fs::remove_dir(store.signed_path("y.example").unwrap()).unwrap();
            match next {
                "issue" => store.issue(&lock, &[issuance("bb02", "z.example")]).unwrap(),
                _ => store.checkpoint(&lock).unwrap(),
            }
        }
        store.checkpoint(&store.lock().unwrap()).unwrap();
        let inv = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
        assert_eq!(std::fs::read_to_string(store.signed_path("y.example").unwrap()).unwrap(), "pem of aa01", "{next}");
        assert_eq!(inv.matches("0xaa01 ").count(), 1, "{next}: {inv}");
    }
}

/// An issuance whose attributes were claimed in the replay journal `journal`.
fn claimed(serial: &str, certname: &str, journal: &Path) -> Issuance {
    Issuance {
        claim: Some(SpentClaim {
            journal: journal.to_path_buf(),
            journal_in_dir: None,
            key: format!("key of {serial}"),
            expiry: "2031-01-01T00:00:00Z".into(),
            certname: certname.into(),
            holder: "h".into(),
            time: "2030-01-01T00:00:00Z".into(),
        }),
        ..issuance(serial, certname)
    }
}

/// The entry of `certname` in the replay journal `dir` (its contents), if any.
fn journal_entry(dir: &Path, certname: &str) -> Option<String> {
    let mut found = None;
    for bucket in std::fs::read_dir(dir).ok()?.flatten() {
        for e in std::fs::read_dir(bucket.path()).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap();
            if text.contains(&format!("\"certname\":\"{certname}\"")) {
                assert!(found.replace(text).is_none(), "two entries for {certname} in {}", dir.display());
            }
        }
    }
    found
}

/// Writes `entries` as the log of `store`, the way a vouch older than `journal_in_dir`
/// wrote it (each claim's journal as an absolute path only), unknown to this process.
fn write_old_log(store: &FileStore, entries: &[Issuance]) {
    drop(store.lock().unwrap());
    let inventory_len = std::fs::metadata(store.p("inventory.txt")).map(|m| m.len()).unwrap_or(0);
    let mut log = FileStore::wal_header(&store.wal_path(), inventory_len).unwrap();
    log.extend(encode_batch(entries, &store.wal_path(), None).unwrap());
    assert!(!String::from_utf8_lossy(&log).contains("journal_in_dir"));
    std::fs::write(store.wal_path(), log).unwrap();
    store.set_known(None);
}

/// A data directory copied elsewhere (a backup restored, `cp -a`, a volume mounted at
/// another path) with its log not checkpointed: the log names the store's own journal
/// relative to the data directory, and the replay marks the claims in the copy's
/// journal, never in the directory it was copied from (before, the log held the absolute
/// path: the copy's replay protection missed them, and the old directory was written to,
/// or recreated after its removal).
#[test]
fn a_copied_data_directory_replays_its_claims_into_its_own_journal() {
    let d = tempfile::tempdir().unwrap();
    let (old, new) = (d.path().join("old"), d.path().join("new"));
    let store = FileStore::new(old.join("ca"));
    store.issue(&store.lock().unwrap(), &[claimed("aa01", "a.example", &old.join("replay"))]).unwrap();
    let log = std::fs::read_to_string(store.wal_path()).unwrap();
    assert!(log.contains("\"journal_in_dir\":\"replay\""), "{log}");
    let copied = std::process::Command::new("cp").arg("-a").arg(&old).arg(&new).status().unwrap();
    assert!(copied.success());
    std::fs::remove_dir_all(&old).unwrap();
    // The copy's journal entry lost as a power loss could (it is written unsynced).
    std::fs::remove_dir_all(new.join("replay")).unwrap();
    let copy = FileStore::new(new.join("ca"));
    drop(copy.lock().unwrap());
    let entry = journal_entry(&new.join("replay"), "a.example").expect("the claim in the copy's journal");
    assert!(entry.contains("\"issued\":true"), "{entry}");
    assert!(!old.exists(), "the replay wrote into the directory the store was copied from");
}

/// A data directory moved (or removed) while a process that opened its store runs on
/// (`vouch serve`): the next lock is refused, and nothing is made at the old path. Before,
/// the lock made `ca/` there again, empty, and the process went on issuing into it, its
/// claims into a new, empty replay journal at the old path: attributes spent before the
/// move were good again there.
#[test]
fn a_store_moved_while_its_process_runs_is_not_made_again_at_the_old_path() {
    let d = tempfile::tempdir().unwrap();
    let (old, new) = (d.path().join("old"), d.path().join("new"));
    let store = FileStore::new(old.join("ca"));
    store.issue(&store.lock().unwrap(), &[claimed("aa01", "a.example", &old.join("replay"))]).unwrap();
    std::fs::rename(&old, &new).unwrap();
    match store.lock() {
        Err(StoreError::Io { path, source, .. }) => {
            assert_eq!(path, old.join("ca"));
            assert!(source.to_string().contains("moved or removed"), "{source}");
        }
        other => panic!("the lock of a moved store: {:?}", other.map(drop)),
    }
    assert!(!old.exists(), "the lock made the moved store again at its old path");
    // At its new place, a process opens it as usual.
    let moved = FileStore::new(new.join("ca"));
    drop(moved.lock().unwrap());
    assert!(moved.serial_path("aa01").exists());
}

/// A log an older vouch wrote names each claim's journal by its absolute path: one in
/// another data directory (this one moved or copied from there) is replayed into this
/// store's own journal, and said to the caller; this store's journal, a journal
/// configured outside any data directory, or this data directory reached through another
/// path, are written where the log says.
#[test]
fn an_older_vouchs_log_replays_claims_of_another_data_directorys_journal_into_this_ones() {
    let d = tempfile::tempdir().unwrap();
    let (old, new, shared) = (d.path().join("old"), d.path().join("new"), d.path().join("shared"));
    let store = FileStore::new(new.join("ca"));
    // The directory it was copied from still there (`cp -a`), or gone (moved).
    for old_there in [true, false] {
        if old_there {
            // A copy of this CA's data directory: its certificate the same.
            std::fs::create_dir_all(old.join("ca")).unwrap();
            std::fs::write(old.join("ca/ca_crt.pem"), "this CA").unwrap();
        }
        std::fs::create_dir_all(new.join("ca")).unwrap();
        std::fs::write(new.join("ca/ca_crt.pem"), "this CA").unwrap();
        write_old_log(
            &store,
            &[claimed("aa01", "moved.example", &old.join("replay")), claimed("aa02", "shared.example", &shared)],
        );
        drop(store.lock().unwrap());
        let entry = journal_entry(&new.join("replay"), "moved.example").expect("the claim in this store's journal");
        assert!(entry.contains("\"issued\":true"), "{entry}");
        assert!(!old.join("replay").exists(), "the replay wrote into the other data directory");
        assert_eq!(old.exists(), old_there, "the replay recreated the other data directory");
        // A journal configured outside any data directory: where it is.
        assert!(journal_entry(&shared, "shared.example").is_some_and(|e| e.contains("\"issued\":true")));
        assert!(journal_entry(&new.join("replay"), "shared.example").is_none());
        std::fs::remove_dir_all(new.join("replay")).unwrap();
        std::fs::remove_dir_all(&shared).unwrap();
        let _ = std::fs::remove_dir_all(&old);
        std::fs::remove_dir_all(new.join("ca")).unwrap();
    }
    // Which journal each path the log names stands for, and which are said to be another's.
    let place = |store: &FileStore, named: &Path| {
        let mut entries = vec![claimed("aa03", "c.example", named)];
        let moved = store.place_journals(&mut entries).unwrap();
        let used = entries[0].claim.as_ref().unwrap().journal.clone();
        let said = moved == [(named.to_path_buf(), used.clone())];
        assert!(said || moved.is_empty(), "{moved:?}");
        (used, said)
    };
    std::fs::create_dir_all(new.join("ca")).unwrap();
    assert_eq!(place(&store, &old.join("replay")), (new.join("replay"), true));
    assert_eq!(place(&store, &new.join("replay")), (new.join("replay"), false));
    assert_eq!(place(&store, &new.join("elsewhere")), (new.join("elsewhere"), false));
    assert_eq!(place(&store, &shared.join("journal")), (shared.join("journal"), false));
    // A directory that is no data directory of this CA, though its journal is named
    // `replay` (a shared journal's, another master's data directory with a CA of its
    // own): there, as written. A copy of this CA's: this store's.
    std::fs::write(new.join("ca/ca_crt.pem"), "this CA").unwrap();
    let (plain_dir, master1) = (d.path().join("plain"), d.path().join("master1"));
    std::fs::create_dir_all(&plain_dir).unwrap();
    assert_eq!(place(&store, &plain_dir.join("replay")), (plain_dir.join("replay"), false));
    std::fs::create_dir_all(master1.join("ca")).unwrap();
    std::fs::write(master1.join("ca/ca_crt.pem"), "another CA").unwrap();
    assert_eq!(place(&store, &master1.join("replay")), (master1.join("replay"), false));
    std::fs::write(master1.join("ca/ca_crt.pem"), "this CA").unwrap();
    assert_eq!(place(&store, &master1.join("replay")), (new.join("replay"), true));
    // This data directory through a link: the same directory, no other's.
    let alias = d.path().join("alias");
    std::os::unix::fs::symlink(&new, &alias).unwrap();
    assert_eq!(place(&store, &alias.join("replay")), (new.join("replay"), false));
    // The policy's journal, wherever it is, is where its claims go; a custom one inside
    // the data directory gives the shape another data directory's has.
    let told = |j: &Path| FileStore::new(new.join("ca")).with_journal(Some(j.to_path_buf()));
    assert_eq!(place(&told(&shared.join("replay")), &shared.join("replay")), (shared.join("replay"), false));
    let custom = told(&new.join("state/journal"));
    assert_eq!(place(&custom, &old.join("state/journal")), (new.join("state/journal"), true));
    assert_eq!(place(&custom, &old.join("replay")), (old.join("replay"), false));
    // A path relative to the data directory that leaves it: vouch never wrote it.
    let mut planted = vec![claimed("aa04", "d.example", &old.join("replay"))];
    planted[0].claim.as_mut().unwrap().journal_in_dir = Some(PathBuf::from("../old/replay"));
    assert!(matches!(store.place_journals(&mut planted), Err(StoreError::Corrupt { .. })));
}

/// A torn last batch (never acknowledged) is dropped, whatever part of it reached the
/// disk; damage before a later committed batch stops the store instead.
#[test]
fn a_torn_last_batch_is_dropped_and_damage_before_a_good_batch_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    {
        let lock = store.lock().unwrap();
        store.issue(&lock, &[issuance("aa01", "a.example"), issuance("aa02", "b.example")]).unwrap();
        store.issue(&lock, &[issuance("aa03", "c.example")]).unwrap();
    }
    let wal = store.wal_path();
    let good = std::fs::read(&wal).unwrap();
    let lines: Vec<&[u8]> = good.split_inclusive(|b| *b == b'\n').collect();
    assert_eq!(lines.len(), 1 + 3 + 2, "header, 3 entries, 2 commit lines");
    // The second batch torn: its commit line missing, or a hole of zeros in its entry.
    let first_batch: Vec<u8> = lines[..4].concat();
    for torn in [
        [first_batch.clone(), lines[4].to_vec()].concat(),
        [first_batch.clone(), vec![0u8; lines[4].len()], lines[5].to_vec()].concat(),
    ] {
        std::fs::write(&wal, &torn).unwrap();
        let (_, entries, end) = store.read_wal().unwrap();
        assert_eq!(entries.iter().map(|e| e.record.serial.as_str()).collect::<Vec<_>>(), ["aa01", "aa02"]);
        assert_eq!(end, first_batch.len() as u64);
    }
    // A torn tail holding a stale commit line that does not verify: still just torn.
    let stale = [first_batch.clone(), b"garbage\n".to_vec(), lines[5].to_vec()].concat();
    std::fs::write(&wal, &stale).unwrap();
    assert_eq!(store.read_wal().unwrap().1.len(), 2);
    // A damaged entry in the first batch, the second one whole: the log is damaged.
    let mut damaged = good.clone();
    let at = lines[0].len() + 10;
    damaged[at] ^= 0x20;
    std::fs::write(&wal, &damaged).unwrap();
    assert!(matches!(store.read_wal(), Err(StoreError::Corrupt { .. })));
    std::fs::write(&wal, &good).unwrap();
    assert_eq!(store.read_wal().unwrap().1.len(), 3);
}
