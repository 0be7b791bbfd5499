//! `vouch serve`'s set-up: the serving lock, and the name rule before anything is created.

/// A library caller preparing one data directory twice, under two paths (a link to it):
/// the second is not refused as if another `vouch serve` ran on it, nor is a process
/// given a second path for another `vouch serve`'s directory let through.
#[test]
fn the_serving_lock_is_taken_once_per_directory_whatever_path_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    std::fs::create_dir(&dir).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    super::hold_serving_lock(&dir, crate::error::ServingHolder::Serve).unwrap();
    super::hold_serving_lock(&link, crate::error::ServingHolder::Serve)
        .unwrap_or_else(|e| panic!("the same directory by a link: {e}"));
    super::hold_serving_lock(&tmp.path().join("link/."), crate::error::ServingHolder::Serve).unwrap();
    // Another open file on it (as another process would take it): refused.
    let other = std::fs::File::open(&dir).unwrap();
    assert!(rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockShared).is_err());
}

/// A library caller's ServeOptions get the command line's name rule, before anything
/// is created (the command line checks the flag in clap).
#[test]
fn prepare_refuses_a_server_name_that_is_no_name_before_creating_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    for bad in ["*.example.test", "a..b", "1.2.3.4.5", ""] {
        let mut opts = crate::serve::ServeOptions::new(dir.clone());
        opts.server_names = vec!["ca.example.test".into(), bad.into()];
        let e = super::prepare(&opts).err().unwrap_or_else(|| panic!("{bad:?} was accepted"));
        assert!(e.to_string().contains("--server-name"), "{bad:?}: {e}");
        assert!(!dir.exists(), "{bad:?}: a data directory was created");
    }
}
