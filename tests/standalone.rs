//! The repository stands alone: the README's test command says what it needs, and the suite reads
//! nothing outside the checkout (`.ci/run` runs it in a clone with nothing beside it).

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A directory holding only the few programs `scripts/test` itself uses, so that every tool the
/// tests drive (openssl, puppet, ruby, java, cloud-init, g++, ldapsearch) and cargo look missing.
fn bare_path() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for tool in ["bash", "id", "sort", "sed", "dirname", "tr"] {
        let found = ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(tool)).find(|p| p.exists());
        let found = found.unwrap_or_else(|| panic!("{tool} not found in /usr/bin or /bin"));
        std::os::unix::fs::symlink(found, dir.path().join(tool)).expect("symlink");
    }
    let _ = Command::new("chmod").arg("0755").arg(dir.path()).status();
    dir
}

#[test]
fn the_test_command_prints_the_install_line_for_a_user_who_cannot_install() {
    let path = bare_path();
    // A copy of the script where that user can reach it (the checkout may be under /root or
    // in a 0700 directory); it stops before it needs anything else of the repository.
    let copy = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(copy.path().join("scripts")).expect("mkdir");
    std::fs::copy(Path::new(ROOT).join("scripts/test"), copy.path().join("scripts/test")).expect("copy");
    for p in [copy.path(), &copy.path().join("scripts")] {
        let _ = Command::new("chmod").arg("0755").arg(p).status();
    }
    // Run as an unprivileged user (tests run as root here; as root the script would install).
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(copy.path().join("scripts/test"))
        .env_clear()
        .env("PATH", path.path())
        .env("HOME", "/nonexistent")
        .output()
        .expect("setpriv (util-linux) runs scripts/test");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("apt-get update && apt-get install -y --no-install-recommends"))
        .unwrap_or_else(|| panic!("no install line in: {stderr}"));
    for package in ["openssl", "cloud-init", "puppet-agent", "puppetserver", "ruby", "g++", "ldap-utils"] {
        assert!(line.split_whitespace().any(|w| w == package), "{package} missing from {line:?}");
    }
    assert!(!stderr.contains("running"), "cargo test must not start: {stderr}");
}

#[test]
fn nothing_in_the_suite_reads_outside_the_repository() {
    // The suite, its helpers, the product and the docs a reader follows (README.md, docs/, policy/):
    // no path leaves the checkout.
    // The patterns are built, so that this file does not match itself.
    let shared = "shared";
    let (up, fixtures, research) =
        (format!("\\.\\./{shared}"), format!("{shared}/fixtures"), format!("{shared}/research"));
    let out = Command::new("git")
        .args(["grep", "-n", "-e", &up, "-e", &fixtures, "-e", &research, "--"])
        .args(["src", "tests", "examples", "fuzz", ".ci", "scripts", "README.md", "docs", "policy"])
        .current_dir(ROOT)
        .output()
        .expect("git grep");
    let hits = String::from_utf8_lossy(&out.stdout);
    let hits: Vec<&str> = hits.lines().collect();
    assert!(hits.is_empty(), "paths outside the repository:\n{}", hits.join("\n"));
}
