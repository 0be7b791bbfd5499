use super::*;
use crate::store::file::wal::flush::{failed_flushes, flush_handles};
use crate::store::Issuance;
use crate::store::Store;
use std::path::Path;

use crate::store::file::test_issuance as issuance;

/// The checkpoint outside the lock: the files of the entries before the due point are
/// flushed unlocked while more batches are logged; the cut log keeps exactly those
/// later batches, after a header with the inventory's length at the due point, so that a
/// recovery from it re-applies them and nothing else.
#[test]
fn a_log_cut_outside_the_lock_keeps_the_batches_logged_during_the_flush() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    let big =
        |serial: &str, name: &str| Issuance { pem: format!("{serial}:{}", "x".repeat(4000)), ..issuance(serial, name) };
    let mut n = 0;
    while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
        n += 1;
        assert!(n < 100, "no checkpoint came due");
        store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
    }
    // The flush begins (claimed as checkpoint_due claims it); two batches come in meanwhile.
    let due = {
        let mut map = checkpoints_due().lock().unwrap();
        let d = map.get_mut(&store.root).unwrap();
        d.running = true;
        d.clone()
    };
    assert!(due.log_len > CHECKPOINT_BYTES);
    let inventory_at_due = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
    assert_eq!(due.inventory_len, inventory_at_due.len() as u64);
    for (serial, name) in [("bb01", "b1.example"), ("bb02", "b2.example")] {
        store.issue(&store.lock().unwrap(), &[big(serial, name)]).unwrap();
    }
    // Still due and claimed: the later batches did not move the due point.
    assert_eq!(checkpoints_due().lock().unwrap().get(&store.root).map(|d| d.log_len), Some(due.log_len));
    store.sync_files(&due.journals).unwrap();
    {
        let _lock = store.lock().unwrap();
        store.cut_log(&due).unwrap();
    }
    let (header, entries, _) = store.read_wal().unwrap();
    assert_eq!(header.inventory_len, due.inventory_len);
    assert_eq!(entries.iter().map(|e| e.record.serial.as_str()).collect::<Vec<_>>(), ["bb01", "bb02"]);
    // A recovery from the cut log (another process's, or after a crash): the later
    // batches are re-applied once, the earlier ones are left as they are.
    std::fs::remove_file(store.signed_path("b2.example").unwrap()).unwrap();
    store.set_known(None);
    store.checkpoint(&store.lock().unwrap()).unwrap();
    let inventory = std::fs::read_to_string(store.p("inventory.txt")).unwrap();
    assert!(inventory.starts_with(&inventory_at_due));
    assert_eq!(inventory.lines().count(), n + 2, "{inventory}");
    assert_eq!(inventory.matches("0xbb02 ").count(), 1);
    assert!(std::fs::read_to_string(store.signed_path("b2.example").unwrap()).unwrap().starts_with("bb02:"));
    assert_eq!(store.read_wal().unwrap().1.len(), 0, "checkpointed");
}

/// A log changed since its checkpoint came due (here: checkpointed under the lock, as a
/// revocation does) is not cut: the due point belongs to a log that is gone.
#[test]
fn a_due_point_of_a_log_that_was_replaced_cuts_nothing() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    let big =
        |serial: &str, name: &str| Issuance { pem: format!("{serial}:{}", "x".repeat(4000)), ..issuance(serial, name) };
    let mut n = 0;
    while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
        n += 1;
        store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
    }
    let due = checkpoints_due().lock().unwrap().get(&store.root).cloned().unwrap();
    store.checkpoint(&store.lock().unwrap()).unwrap();
    assert!(checkpoints_due().lock().unwrap().get(&store.root).is_none(), "a checkpoint settles what was due");
    // The new log grows past the old due point (and comes due itself: not claimed here).
    let mut m = 0;
    while std::fs::metadata(store.wal_path()).unwrap().len() <= due.log_len {
        m += 1;
        store.issue(&store.lock().unwrap(), &[big(&format!("bb{m:02}"), &format!("b{m}.example"))]).unwrap();
    }
    let before = std::fs::read(store.wal_path()).unwrap();
    {
        let _lock = store.lock().unwrap();
        store.cut_log(&due).unwrap();
    }
    assert_eq!(std::fs::read(store.wal_path()).unwrap(), before, "the old due point cut the new log");
    // Its own due point does cut it.
    store.checkpoint_due().unwrap();
    assert!(std::fs::read(store.wal_path()).unwrap().len() < before.len());
    assert_eq!(store.read_wal().unwrap().1.len(), 0);
}

/// Found by review: a size-triggered flush that fails no longer makes the process stop
/// trusting its log. Before 63124fb the failed `syncfs` ran in `after_commit` under the
/// lock and `set_known(None)` followed, so the next lock re-applied every entry from the
/// log (rewriting their files) before any checkpoint. Now `checkpoint_due` only drops the
/// due point; the next batch past the size notes it again and its `syncfs` (on a fresh
/// descriptor: errseq reports a write-back error to the descriptors open when it happened,
/// so this one hears nothing) succeeds, and the cut drops entries whose files a failed
/// write-back never put on the disk. The failed flush is made here with a journal
/// directory that is gone (ENOENT stands for EIO); the lost write-back by removing the
/// file it was writing.
#[test]
fn a_failed_unlocked_flush_does_not_let_a_later_cut_drop_what_it_failed_to_write() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ca");
    let store = FileStore::new(root.clone());
    let big =
        |serial: &str, name: &str| Issuance { pem: format!("{serial}:{}", "x".repeat(4000)), ..issuance(serial, name) };
    let mut n = 0;
    while checkpoints_due().lock().unwrap().get(&store.root).is_none() {
        n += 1;
        assert!(n < 100, "no checkpoint came due");
        store.issue(&store.lock().unwrap(), &[big(&format!("aa{n:02}"), &format!("a{n}.example"))]).unwrap();
    }
    // The unlocked flush fails. (Made here by a replay journal that is gone: the store's
    // own flush goes through a descriptor kept since the first lock, which a directory
    // moved away would not fail.)
    let gone = d.path().join("journal-gone");
    checkpoints_due().lock().unwrap().get_mut(&store.root).unwrap().journals.push(gone);
    assert!(store.checkpoint_due().is_err(), "the flush should have failed");
    // What that failed write-back did not put on the disk: a1's certificate.
    let lost = store.signed_path("a1.example").unwrap();
    std::fs::remove_file(&lost).unwrap();
    // The next batch comes due again; its flush succeeds and the log is cut.
    store.issue(&store.lock().unwrap(), &[big("cc01", "c1.example")]).unwrap();
    store.checkpoint_due().unwrap();
    let in_log = store.read_wal().unwrap().1.iter().any(|e| e.record.certname == "a1.example");
    assert!(
        in_log || lost.exists(),
        "a1's certificate is neither in the log nor in the files: a flush that failed was followed by a cut \
         that trusted the files it had not written"
    );
}

/// Found by review: the unlocked flush (before a revocation's lock, and before the
/// minutely checkpoint's) opens `wal.log` following a symbolic link, before `lock()`'s
/// `ensure_dirs` refuses one. A `wal.log` linked to a FIFO makes it wait forever (before
/// 63124fb, `vouch revoke` and the checkpoint were refused with "symbolic link").
#[test]
fn the_unlocked_flush_refuses_a_log_that_is_a_symbolic_link() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    let fifo = d.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::remove_file(store.wal_path()).unwrap();
    std::os::unix::fs::symlink(&fifo, store.wal_path()).unwrap();
    assert!(store.lock().is_err(), "the lock refuses the link");
    let answered = answered_unless_waiting_on(&fifo, || store.flush_unlocked().is_err());
    assert_eq!(answered, Some(true), "the flush followed the link and waited on the FIFO");
}

/// Runs `f` on a thread of its own and returns its answer if it came within 5 s. If not,
/// `f` waits on `fifo` (an open for reading waits for a writer): writers are opened there,
/// each leaving at once, until it returns, so that the test ends either way.
fn answered_unless_waiting_on(fifo: &Path, f: impl FnOnce() -> bool + Send) -> Option<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = tx.send(f());
        });
        let answered = rx.recv_timeout(std::time::Duration::from_secs(5));
        if answered.is_err() {
            let released = std::time::Instant::now();
            while rx.recv_timeout(std::time::Duration::from_millis(20)).is_err() {
                assert!(released.elapsed() < std::time::Duration::from_secs(30), "it never returned");
                let _w = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo);
            }
        }
        answered.ok()
    })
}

/// Found by review of 5cae2f9: the store's `syncfs` goes through a descriptor of
/// `DIR/ca` opened at the process's first lock and kept for good. `DIR/ca` may be a link
/// (the operator's choice: see `ensure_dirs`); switched to a store on another filesystem
/// (the store moved to another disk), the process notices at its next lock (`.lock` is
/// another file: everything is distrusted and the log re-applied there), but every flush
/// after, the recovery's checkpoint included, still syncs the filesystem it left: the new
/// store's files are never flushed before its log is started over, and a write-back error
/// there is never heard of. (`sync_files` also skips a replay journal on the new
/// filesystem, taking it as flushed with the store.) Needs /dev/shm on a filesystem
/// other than the temporary directory's.
#[test]
fn the_stores_flush_follows_a_store_link_switched_to_another_filesystem() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir_in("/dev/shm").unwrap();
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(dev(d.path()), dev(other.path()), "needs /dev/shm on a filesystem of its own");
    let (first, second) = (d.path().join("first"), other.path().join("second"));
    std::fs::create_dir(&first).unwrap();
    let link = d.path().join("ca");
    std::os::unix::fs::symlink(&first, &link).unwrap();
    let store = FileStore::new(&link);
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    // The store copied to another disk, and the link switched to the copy.
    let copied = std::process::Command::new("cp").arg("-a").arg(&first).arg(&second).status().unwrap();
    assert!(copied.success());
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&second, &link).unwrap();
    store.issue(&store.lock().unwrap(), &[issuance("bb02", "b.example")]).unwrap();
    store.checkpoint(&store.lock().unwrap()).unwrap();
    let flushed = match flush_handles().lock().unwrap().get(&store.root) {
        Some(f) => f.metadata().unwrap().dev(),
        None => dev(&link),
    };
    assert_eq!(
        flushed,
        dev(&link),
        "the store's syncfs goes to the filesystem of the directory it was at first, not the one it is on"
    );
}

/// Found by review of 5cae2f9 (older than it): the unlocked flush now refuses a `wal.log`
/// that is not a regular file without waiting on it, but the lock does not: `ensure_dirs`
/// refuses a link only, and `recover_wal`'s `wal_id` opens the log for reading with a plain
/// open, which waits for a writer on a FIFO, holding the store's lock: every request and
/// command after waits with it.
#[test]
fn the_lock_refuses_a_log_that_is_a_fifo_instead_of_waiting_on_it() {
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    std::fs::remove_file(store.wal_path()).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(store.wal_path()).status().unwrap().success());
    let answered = answered_unless_waiting_on(&store.wal_path(), || store.lock().is_err());
    assert_eq!(answered, Some(true), "the lock waited on the FIFO at wal.log, holding the store's lock");
}

/// Review of 0296b27: `sync_files` holds FLUSHING only through the `syncfs` calls; the
/// caller notes a failure (`map_err(|e| self.flush_failed(e))`) after the guard is dropped.
/// So a flush that failed without the lock is not noted "before another flush can begin":
/// a checkpoint under the lock that runs in that gap flushes (through the same kept
/// descriptor: a write-back error is reported once, the failed flush took it), asks
/// `flush_failed_since` (nothing noted yet), and starts the log over: the entries whose
/// files the failed write-back may have lost leave the log; the failure, noted a moment
/// later, makes the next lock re-apply a log that no longer holds them. The failing
/// thread is held in that gap here (as a preemption would hold it): parked on the
/// `failed_flushes` mutex the test holds, then moved into a signal handler that waits,
/// so the mutex is free for the checkpoint. The failed flush is made with a replay
/// journal that is gone (ENOENT stands for EIO).
#[test]
#[allow(unsafe_code)]
fn a_failed_flush_is_noted_before_a_checkpoint_under_the_lock_can_flush() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static PARK: AtomicBool = AtomicBool::new(false);
    static PARKED: AtomicBool = AtomicBool::new(false);
    extern "C" fn park(_: libc::c_int) {
        PARKED.store(true, SeqCst);
        while PARK.load(SeqCst) {
            // SAFETY: async-signal-safe.
            unsafe { libc::sched_yield() };
        }
    }
    let d = tempfile::tempdir().unwrap();
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    journals_written().lock().unwrap().entry(store.root.clone()).or_default().push(d.path().join("journal-gone"));
    // SAFETY: installs a handler that only touches atomics and calls sched_yield.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = park as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    let failed = failed_flushes();
    let (lo, hi) = (failed as *const _ as usize, failed as *const _ as usize + std::mem::size_of_val(failed));
    let store = &store;
    std::thread::scope(|scope| {
        let held = failed.lock().unwrap();
        PARK.store(true, SeqCst);
        let (tx, rx) = std::sync::mpsc::channel();
        let flusher = scope.spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            store.flush_unlocked().is_err()
        });
        let tid = rx.recv().unwrap();
        // Waits until the flusher's flush has failed and it waits for the failed_flushes
        // mutex (a futex wait on its address).
        let started = std::time::Instant::now();
        loop {
            assert!(started.elapsed() < std::time::Duration::from_secs(20), "the flush never came to note its failure");
            let sc = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
            let mut f = sc.split_whitespace();
            let nr = f.next().and_then(|n| n.parse::<i64>().ok());
            let addr = f.next().and_then(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16).ok());
            if nr == Some(libc::SYS_futex) && addr.is_some_and(|a| (lo..hi).contains(&a)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The flusher is moved off the mutex (as if preempted before it took it).
        // SAFETY: signals a thread of this process that is alive (it waits above).
        assert_eq!(unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) }, 0);
        while !PARKED.load(SeqCst) {
            std::thread::yield_now();
        }
        drop(held);
        // Meanwhile, a checkpoint under the lock (serve's minutely one, a revocation's).
        // (Were the failure noted under FLUSHING, this one would wait for the parked
        // flusher: it is let go after a while.)
        let checkpointer = scope.spawn(|| store.checkpoint(&store.lock().unwrap()));
        let waited = std::time::Instant::now();
        while !checkpointer.is_finished() && waited.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        PARK.store(false, SeqCst);
        let checkpointed = checkpointer.join().unwrap();
        assert!(flusher.join().unwrap(), "the flush should have failed");
        let in_log = store.read_wal().unwrap().1.iter().any(|e| e.record.certname == "a.example");
        assert!(
            in_log,
            "a flush failed before the checkpoint's flush began, yet the checkpoint ({checkpointed:?}) started \
             the log over: the failure is noted only after FLUSHING is released"
        );
    });
}

/// Review of 0296b27 (older: `sync_filesystem`'s plain open): a replay journal on another
/// filesystem is flushed through `File::open` of its path, which waits on a FIFO there (a
/// journal directory replaced by one). Now that flush holds FLUSHING, the process-wide
/// mutex every flush takes: the unlocked flush waits forever, and every checkpoint under
/// the store's lock after it (a batch past the size, a revocation's, serve's minutely
/// one) waits for FLUSHING holding the lock. Needs /dev/shm on a filesystem other than
/// the temporary directory's.
#[test]
fn a_flush_refuses_a_journal_that_is_a_fifo_instead_of_waiting_on_it() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir_in("/dev/shm").unwrap();
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(dev(d.path()), dev(other.path()), "needs /dev/shm on a filesystem of its own");
    let store = FileStore::new(d.path().join("ca"));
    store.issue(&store.lock().unwrap(), &[issuance("aa01", "a.example")]).unwrap();
    let journal = other.path().join("replay");
    assert!(std::process::Command::new("mkfifo").arg(&journal).status().unwrap().success());
    journals_written().lock().unwrap().entry(store.root.clone()).or_default().push(journal.clone());
    let answered = answered_unless_waiting_on(&journal, || store.flush_unlocked().is_err());
    assert_eq!(answered, Some(true), "the flush waited on the FIFO at the journal, holding FLUSHING");
}
