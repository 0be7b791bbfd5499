use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn new_never_replaces_and_keeps_mode() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("key.pem");
    write_new(&p, b"secret", 0o600).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(write_new(&p, b"other", 0o600).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&p).unwrap(), b"secret");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1, "no temp file left behind");
    write_replace(&p, b"new", 0o600).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"new");
}

#[test]
fn unsynced_new_files_appear_whole_with_no_temporary_name_and_never_replace() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("entry");
    write_new_unsynced(&p, b"first", 0o640).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o640 & !current_umask());
    assert_eq!(write_new_unsynced(&p, b"second", 0o640).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&p).unwrap(), b"first");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left behind");
    // write_unsynced_in: new, else replaced whole.
    let q = d.path().join("cert");
    write_unsynced_in(d.path(), &q, b"one", 0o644).unwrap();
    write_unsynced_in(d.path(), &q, b"two", 0o644).unwrap();
    assert_eq!(fs::read(&q).unwrap(), b"two");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 2, "no temporary file left behind");
}

fn current_umask() -> u32 {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("probe");
    OpenOptions::new().write(true).create_new(true).mode(0o777).open(&p).unwrap();
    0o777 & !(fs::metadata(&p).unwrap().permissions().mode() & 0o777)
}

#[test]
fn an_overwrite_keeps_the_file_and_never_writes_through_a_link_or_into_a_fifo() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("entry");
    overwrite_unsynced(&p, b"claimed", 0o644).unwrap();
    let ino = fs::metadata(&p).unwrap().ino();
    overwrite_unsynced(&p, b"claimed, spent", 0o644).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"claimed, spent");
    assert_eq!(fs::metadata(&p).unwrap().ino(), ino, "grown in place: the same file");
    // Shorter: replaced whole (a kill between a write and a cut would leave the old tail).
    overwrite_unsynced(&p, b"short", 0o644).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"short");
    assert_ne!(fs::metadata(&p).unwrap().ino(), ino, "replaced, not cut");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left behind");
    // A link planted there is replaced, its target untouched.
    let target = d.path().join("target");
    fs::write(&target, b"victim").unwrap();
    let link = d.path().join("linked");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    overwrite_unsynced(&link, b"entry", 0o644).unwrap();
    assert_eq!(fs::read(&target).unwrap(), b"victim");
    assert!(fs::symlink_metadata(&link).unwrap().is_file());
    // A FIFO (no reader) neither hangs the writer nor is written into.
    let fifo = d.path().join("fifo");
    rustix::fs::mknodat(CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0).unwrap();
    overwrite_unsynced(&fifo, b"entry", 0o644).unwrap();
    assert_eq!(fs::read(&fifo).unwrap(), b"entry");
}

#[test]
fn a_dated_replacement_appears_with_its_date() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("ca_crl.pem");
    fs::write(&p, b"old").unwrap();
    let date = std::time::UNIX_EPOCH + std::time::Duration::from_secs(4_000_000_000);
    write_replace_dated(&p, b"new", 0o644, Some(date)).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"new");
    assert_eq!(fs::metadata(&p).unwrap().modified().unwrap(), date);
    write_replace_dated(&p, b"newer", 0o644, None).unwrap();
    assert!(fs::metadata(&p).unwrap().modified().unwrap() < date, "its own time when none is given");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left behind");
}
