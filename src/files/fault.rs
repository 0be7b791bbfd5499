//! Fault injection for the tests (crash points and failure points), in the lowest module so
//! that every layer may mark its steps. Compiled to no-ops without the `fault-injection`
//! feature: a plain build never reads the variables.

/// Fault injection for the crash tests: when `VOUCH_TEST_ABORT_AT` names this
/// step, the process aborts here, as if killed. Steps: wal:before,
/// wal:appended, wal:record, wal:applied, checkpoint:synced, revoke:marker,
/// revoke:record, revoke:log, revoke:forget (and issue:* for markers older
/// versions left); the LDAP store's: ldap:claimed (a CA's journal add done, nothing
/// registered), ldap:registered (a certificate registered that supersedes another, whose
/// revocation is not written yet), ldap:revocation-added (a revocation's entry added, the
/// certname's entry not yet marked revoked); root-issued:recorded (a root-issued certificate's line
/// appended, the certificate not yet written), conductor-revoke:recorded; template:counted
/// (a template's use count swapped to name an instance, its use record not yet written);
/// admin-lock:taken (the shared store's lock on revocations of administrator certificates
/// taken, nothing counted or revoked: a holder killed while it holds it);
/// ca:staged (`ca init`'s or an import's `ca/` staged whole, not yet renamed into place).
///
/// Only in a vouch built with the `fault-injection` feature (the tests' build: see
/// Cargo.toml); elsewhere a no-op, and the variable is never read.
#[cfg(feature = "fault-injection")]
pub(crate) fn crash_point(step: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("VOUCH_TEST_ABORT_AT").ok()).as_deref() == Some(step) {
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn crash_point(_step: &str) {}

/// Fault injection for the tests: true when `VOUCH_TEST_FAIL_AT` names this step, where
/// the caller then fails as if the disk had (the process goes on). Steps:
/// audit:revocation (a revocation's audit line). Only with the `fault-injection` feature, and
/// only called from code compiled with it (a plain build holds no step's name).
#[cfg(feature = "fault-injection")]
pub(crate) fn fail_point(step: &str) -> bool {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    AT.get_or_init(|| std::env::var("VOUCH_TEST_FAIL_AT").ok()).as_deref() == Some(step)
}

/// Fault injection for the tests that force an interleaving of two processes: when
/// `VOUCH_TEST_PAUSE_AT` names this step, the process creates the file
/// `VOUCH_TEST_PAUSE_FILE` (its pid inside) and waits, polling, until the test removes it
/// (five minutes at most: a test that died never leaves a process paused for good). Steps:
/// revoke:admin-counted (the last-administrator guard judged: another valid administrator
/// counted, the revocation not yet written). Only with the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub(crate) fn pause_point(step: &str) {
    static AT: std::sync::OnceLock<Option<(String, std::path::PathBuf)>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| {
        let step = std::env::var("VOUCH_TEST_PAUSE_AT").ok()?;
        Some((step, std::env::var_os("VOUCH_TEST_PAUSE_FILE")?.into()))
    });
    let Some((_, file)) = at.as_ref().filter(|(s, _)| s == step) else { return };
    if std::fs::write(file, std::process::id().to_string()).is_err() {
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while file.exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn pause_point(_step: &str) {}
