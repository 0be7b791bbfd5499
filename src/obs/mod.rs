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
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).log_internal_errors(false);
    let registry = tracing_subscriber::registry().with(filter);
    let installed = match format {
        LogFormat::Json => registry
            .with(layer.json().flatten_event(true).with_current_span(false).with_span_list(false).with_target(false))
            .try_init(),
        LogFormat::Text => {
            let colour = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            registry.with(layer.with_target(false).with_ansi(colour)).try_init()
        }
    };
    if installed.is_ok() {
        for (var, detail) in rejected {
            tracing::warn!(event = "warning", what = "log settings", variable = var, detail = %detail,
                           "{var} is ignored: it does not parse");
        }
    }
}

/// The filter the environment asks for, and why it was rejected if it was.
fn filter_from_env() -> (tracing_subscriber::EnvFilter, Option<(&'static str, String)>) {
    use tracing_subscriber::EnvFilter;
    let default = || EnvFilter::builder().parse_lossy(DEFAULT_FILTER);
    let found = FILTER_VARS.iter().find_map(|var| {
        let value = std::env::var(var).ok()?;
        (!value.trim().is_empty()).then_some((*var, value))
    });
    match found {
        None => (default(), None),
        Some((var, value)) => match EnvFilter::builder().parse(&value) {
            Ok(f) => (f, None),
            Err(e) => (default(), Some((var, format!("{value:?}: {e}")))),
        },
    }
}
