//! Where `vouch enc --ca-url` reports: Puppet Server discards an external node
//! classifier's stderr (its log says only "returned 2"), so every refusal and every
//! answer given from the cache also goes to syslog (`/dev/log`, which journald reads)
//! or to a log file.

use std::io::Write;
use std::path::PathBuf;

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

/// Writes `message` to `to`. A log that cannot be written is said on stderr: the answer
/// to Puppet does not change.
pub fn report(to: &LogTo, severity: Severity, message: &str) {
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
    if let Err(e) = written {
        let _ = writeln!(err, "vouch enc: cannot log ({e})");
    }
}

/// The classic syslog format (RFC 3164 as journald and rsyslog read it from `/dev/log`):
/// facility daemon (3).
fn syslog(severity: Severity, line: &str) -> Result<(), String> {
    let sock = std::os::unix::net::UnixDatagram::unbound().map_err(|e| format!("/dev/log: {e}"))?;
    let pri = 3 * 8 + severity as u32;
    let msg = format!("<{pri}>vouch-enc[{}]: {line}", std::process::id());
    sock.send_to(msg.as_bytes(), "/dev/log").map(|_| ()).map_err(|e| format!("/dev/log: {e}"))
}
