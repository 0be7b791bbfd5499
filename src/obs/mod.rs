//! Observability: the log (structured [`tracing`] events, written to stderr as JSON lines or
//! text) and [`metrics`], the counters `vouch serve` exposes to Prometheus.
//!
//! Every event carries an `event` field naming what happened (`request`, `decision`,
//! `warning`, …) and the fields that describe it; [`init_logging`] chooses how they are
//! written. Logs never go to stdout: it carries command output (the classifier's JSON, the
//! certificates `vouch sign` prints, the banner of `vouch serve`).

pub mod metrics;

use std::io::IsTerminal;

/// How log events are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line: `timestamp`, `level`, then the event's fields.
    Json,
    /// Human-readable lines (for a terminal).
    Text,
}

/// The variables that choose which events are written, first found first: an
/// [`EnvFilter`](tracing_subscriber::EnvFilter) directive such as `warn` or `vouch=debug`.
pub const FILTER_VARS: [&str; 2] = ["VOUCH_LOG", "RUST_LOG"];

/// What is written when neither variable is set.
pub const DEFAULT_FILTER: &str = "info";

/// The variable that chooses the format when `--log-format` is not given: `json` or `text`.
pub const FORMAT_VAR: &str = "VOUCH_LOG_FORMAT";

/// Installs the process's log on stderr: `format` (`--log-format`), else `VOUCH_LOG_FORMAT`,
/// else text when stderr is a terminal and JSON lines when it is not. The filter comes from
/// `VOUCH_LOG`, else `RUST_LOG`, else `info`. A variable that does not parse is reported (a
/// warning) and the default applies: the log's settings never stop a command, least of all
/// the autosign hook. A second call does nothing.
///
/// A stderr that cannot be written loses the line, silently: logging never fails a command
/// (nor panics, as `eprintln!` would).
pub fn init_logging(format: Option<LogFormat>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let terminal = std::io::stderr().is_terminal();
    let mut rejected = Vec::new();
    let from_env = match std::env::var(FORMAT_VAR).ok().as_deref().map(str::trim) {
        None | Some("") => None,
        Some(v) if v.eq_ignore_ascii_case("json") => Some(LogFormat::Json),
        Some(v) if v.eq_ignore_ascii_case("text") => Some(LogFormat::Text),
        Some(v) => {
            rejected.push((FORMAT_VAR, format!("{v:?} is neither json nor text")));
            None
        }
    };
    let format = format.or(from_env).unwrap_or(if terminal { LogFormat::Text } else { LogFormat::Json });
    let (filter, bad_filter) = filter_from_env();
    rejected.extend(bad_filter);
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .log_internal_errors(false)
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_target(false),
            )
            .try_init(),
        // No colour, and every control character a field brought in is escaped: a value
        // an agent or a self-made conductor chose (a certificate subject inside a reason)
        // must not forge a second line or drive the terminal.
        LogFormat::Text => registry
            .with(tracing_subscriber::fmt::layer().with_writer(|| EscapedStderr).with_target(false).with_ansi(false))
            .try_init(),
    };
    if installed.is_ok() {
        for (var, detail) in rejected {
            tracing::warn!(event = "warning", what = "log settings", variable = var, detail = %detail,
                           "{var} is ignored: it does not parse");
        }
    }
}

/// stderr for the text log: each formatted line has its control characters escaped (see
/// [`escape_controls`]) before it is written.
struct EscapedStderr;

impl std::io::Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stderr().lock().write_all(&escape_controls(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// One formatted log line with every C0 control (a newline but the last byte, CR, ESC, ...),
/// DEL and C1 control (U+0080 to U+009F) written as `\xNN` / `\u{NN}`: a line stays one line
/// and cannot carry terminal escape sequences, whatever its fields hold.
pub fn escape_controls(line: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.len());
    let last = line.len().saturating_sub(1);
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        match b {
            b'\n' if i == last => out.push(b),
            b'\t' => out.push(b),
            0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            // U+0080..U+009F in UTF-8: 0xC2 then 0x80..=0x9F.
            0xc2 if line.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)) => {
                let c = line.get(i + 1).copied().unwrap_or_default();
                out.extend_from_slice(format!("\\u{{{c:02x}}}").as_bytes());
                i += 1;
            }
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// The filter the environment asks for, and why a variable was rejected if one was: the
/// first of [`FILTER_VARS`] that is set and valid wins; one that does not parse, or holds a
/// bare word that is not a level (`inf`, `garbage`: `EnvFilter` reads those as "only the
/// target named so", which silences every vouch event), or is not UTF-8, is reported and
/// skipped.
fn filter_from_env() -> (tracing_subscriber::EnvFilter, Option<(&'static str, String)>) {
    use tracing_subscriber::EnvFilter;
    let mut rejected = None;
    for var in FILTER_VARS {
        let value = match std::env::var(var) {
            Ok(v) if v.trim().is_empty() => continue,
            Ok(v) => v,
            Err(std::env::VarError::NotPresent) => continue,
            Err(std::env::VarError::NotUnicode(_)) => {
                rejected.get_or_insert((var, "it is not UTF-8".to_string()));
                continue;
            }
        };
        let parsed = match bare_word(&value) {
            Some(word) => Err(format!(
                "{value:?}: {word:?} is neither a level (trace, debug, info, warn, error, off) nor target=level"
            )),
            None => EnvFilter::builder().parse(&value).map_err(|e| format!("{value:?}: {e}")),
        };
        match parsed {
            Ok(f) => return (f, rejected),
            Err(why) => {
                rejected.get_or_insert((var, why));
            }
        }
    }
    (EnvFilter::builder().parse_lossy(DEFAULT_FILTER), rejected)
}

/// The first directive of `value` that is a bare word but not a level, if any.
fn bare_word(value: &str) -> Option<&str> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    value
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .find(|d| !d.contains('=') && !d.contains('[') && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d)))
}

#[cfg(test)]
mod tests {
    use super::{bare_word, escape_controls};

    #[test]
    fn a_bare_word_that_is_no_level_is_a_mistake_not_a_target() {
        for ok in ["info", "WARN", "off", "vouch=debug", "info,hyper=warn", "[request]=info", " debug "] {
            assert_eq!(bare_word(ok), None, "{ok}");
        }
        for bad in ["inf", "garbage", "info,verbose"] {
            assert!(bare_word(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_log_line_stays_one_line_without_terminal_escapes() {
        let forged = "2026 WARN event=decision reasons=conductor e\n2026 INFO verdict=granted\x1b[31mRED\r\u{9b}2J\n";
        let out = String::from_utf8(escape_controls(forged.as_bytes())).unwrap();
        assert_eq!(out.matches('\n').count(), 1, "{out}");
        assert!(out.ends_with('\n'));
        assert!(!out.contains('\x1b') && !out.contains('\r') && !out.contains('\u{9b}'), "{out}");
        assert!(out.contains("e\\x0a2026 INFO verdict=granted\\x1b[31mRED\\x0d\\u{9b}2J"), "{out}");
        // Tabs and ordinary UTF-8 (é is 0xC3 0xA9; U+00A0 is 0xC2 0xA0) pass unchanged.
        assert_eq!(escape_controls("a\tb é \u{a0}\n".as_bytes()), "a\tb é \u{a0}\n".as_bytes());
    }
}
