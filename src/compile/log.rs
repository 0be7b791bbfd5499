//! Where `vouch enc --ca-url` reports: Puppet Server discards an external node
//! classifier's stderr (its log says only "returned 2"), so every refusal and every
//! answer given from the cache also goes to syslog (`/dev/log`, which journald reads)
//! or to a log file. A host without `/dev/log` is told once, not on every call (see
//! [`SYSLOG_NOTICE`]).

use std::io::Write;
use std::path::{Path, PathBuf};

/// `--log`: `syslog` (the default), `stderr` (only), or a file path (appended to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTo {
    Syslog,
    Stderr,
    File(PathBuf),
}

impl LogTo {
    pub fn parse(s: &str) -> LogTo {
        match s {
            "syslog" | "" => LogTo::Syslog,
            "stderr" => LogTo::Stderr,
            path => LogTo::File(PathBuf::from(path)),
        }
    }
}

/// Syslog severities used.
#[derive(Debug, Clone, Copy)]
pub enum Severity {
    Warning = 4,
}

/// The file, in the classifier's cache directory, that says the notice "syslog cannot be
/// written" was given: a host without `/dev/log` hears it once, not on every call. It goes
/// when syslog is written again, so a later loss is said again.
pub const SYSLOG_NOTICE: &str = "syslog-unavailable";

/// Writes `message` to `to`; returns whether it was written there. A log file that cannot be
/// written is said on stderr each time (it was configured); syslog that cannot be written
/// (no `/dev/log`) is said once, remembered in `notice_dir` (the cache directory) — see
/// [`SYSLOG_NOTICE`]. The answer to Puppet does not change.
pub fn report(to: &LogTo, notice_dir: Option<&Path>, severity: Severity, message: &str) -> bool {
    let mut err = std::io::stderr();
    let line = message.replace('\n', " ");
    let written = match to {
        LogTo::Stderr => writeln!(err, "{line}").map_err(|e| e.to_string()),
        LogTo::File(path) => {
            let stamped = format!(
                "{} vouch-enc[{}]: {line}",
                crate::encoding::time::format_rfc3339(time::OffsetDateTime::now_utc()),
                std::process::id()
            );
            crate::files::durable::append_line(path, &stamped).map_err(|e| format!("{}: {e}", path.display()))
        }
        LogTo::Syslog => syslog(severity, &line),
    };
    match (to, written) {
        (LogTo::Syslog, Ok(())) => {
            if let Some(dir) = notice_dir {
                let _ = std::fs::remove_file(dir.join(SYSLOG_NOTICE));
            }
            true
        }
        (_, Ok(())) => true,
        (LogTo::Syslog, Err(e)) => {
            syslog_unavailable(notice_dir, &e);
            false
        }
        (_, Err(e)) => {
            let _ = writeln!(err, "vouch enc: cannot log ({e})");
            false
        }
    }
}

/// Says once (while [`SYSLOG_NOTICE`] stays in `notice_dir`) that syslog cannot be written.
fn syslog_unavailable(notice_dir: Option<&Path>, problem: &str) {
    let marker = notice_dir.map(|d| d.join(SYSLOG_NOTICE));
    if marker.as_ref().is_some_and(|m| m.exists()) {
        return;
    }
    let remembered = marker
        .as_ref()
        .is_some_and(|m| crate::files::durable::write_replace(m, format!("{problem}\n").as_bytes(), 0o600).is_ok());
    let once = match marker.filter(|_| remembered) {
        Some(m) => format!(" (said once: {} records it; remove it to hear this again)", m.display()),
        None => String::new(),
    };
    let _ = writeln!(
        std::io::stderr(),
        "vouch enc: syslog cannot be written ({problem}): refusals and answers from a stale cache go to stderr \
         only, which Puppet Server discards; set log = \"/var/log/vouch-enc.log\" in the config file (or \
         VOUCH_ENC_LOG) to keep them{once}"
    );
}

/// The classic syslog format (RFC 3164 as journald and rsyslog read it from `/dev/log`):
/// facility daemon (3).
fn syslog(severity: Severity, line: &str) -> Result<(), String> {
    let sock = std::os::unix::net::UnixDatagram::unbound().map_err(|e| format!("/dev/log: {e}"))?;
    let pri = 3 * 8 + severity as u32;
    let msg = format!("<{pri}>vouch-enc[{}]: {line}", std::process::id());
    sock.send_to(msg.as_bytes(), "/dev/log").map(|_| ()).map_err(|e| format!("/dev/log: {e}"))
}
