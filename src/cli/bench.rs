//! `vouch bench`.

use super::args::{BenchCommand, KeyTypeArg, OutFormat};
use super::output::say;
use super::{dir, Cli, EXIT_OK};
use crate::error::Error;
use crate::issuance::keys::KeyType;
use std::io::Write;

pub(super) fn bench(cli: &Cli, b: &BenchCommand) -> Result<i32, Error> {
    match b {
        BenchCommand::Decide { ca_keys, client_keys, seconds, format } => {
            bench_decide(ca_keys, client_keys, *seconds, *format)?
        }
        BenchCommand::Hook { runs, no_journal } => bench_hook(*runs, *no_journal)?,
        BenchCommand::Serve {
            addr,
            host,
            ca_bundle,
            conductor_cert,
            conductor_key,
            agents,
            per_agent,
            client_key,
            server_pid,
            bootstrap,
            transport_only,
            no_gzip,
            format,
        } => {
            let d = dir(cli)?.dir;
            let load = crate::bench::ServeLoad {
                addr: *addr,
                host: host.clone(),
                ca_bundle: ca_bundle
                    .clone()
                    .unwrap_or_else(|| d.join("ca").join(crate::issuance::bootstrap::CA_BUNDLE)),
                conductor_cert: conductor_cert
                    .clone()
                    .unwrap_or_else(|| d.join(crate::issuance::bootstrap::CONDUCTOR_CERT)),
                conductor_key: conductor_key
                    .clone()
                    .unwrap_or_else(|| d.join(crate::issuance::bootstrap::CONDUCTOR_KEY)),
                client_key: (*client_key).into(),
                agents: crate::bench::parse_levels(agents)?,
                per_agent: usize::try_from(*per_agent).unwrap_or(100_000),
                server_pid: *server_pid,
                bootstrap: *bootstrap,
                transport_only: *transport_only,
                gzip: !*no_gzip,
            };
            bench_serve(&load, *format)?
        }
    }
    Ok(EXIT_OK)
}

/// Prints `v` as pretty JSON.
fn say_json(v: &dyn erased_json::Json) -> Result<(), Error> {
    sayln!("{}", v.to_json().map_err(|e| Error::Usage { detail: e.to_string() })?)
}

/// `vouch bench decide`: decisions and issuances per second on one core, against the floor.
fn bench_decide(
    ca_keys: &[KeyTypeArg],
    client_keys: &[KeyTypeArg],
    seconds: f64,
    format: OutFormat,
) -> Result<(), Error> {
    if !(0.01..=600.0).contains(&seconds) {
        return Err(Error::Usage { detail: "--seconds must be between 0.01 and 600".into() });
    }
    let rows = crate::bench::decide(
        &ca_keys.iter().map(|&k| k.into()).collect::<Vec<KeyType>>(),
        &client_keys.iter().map(|&k| k.into()).collect::<Vec<KeyType>>(),
        std::time::Duration::from_secs_f64(seconds),
    )?;
    match format {
        OutFormat::Json => say_json(&rows),
        OutFormat::Text => say_decide_rows(&rows),
    }
}

fn say_decide_rows(rows: &[crate::bench::DecideRow]) -> Result<(), Error> {
    sayln!("one core; floor = CSR verify + conductor certificate verify + attribute verify + CA sign")?;
    sayln!("{:<8} {:<8} {:>12} {:>12} {:>12} {:>7}", "CA key", "client", "decide/s", "issue/s", "floor/s", "ratio")?;
    for r in rows {
        sayln!(
            "{:<8} {:<8} {:>12.0} {:>12.0} {:>12.0} {:>6.0}%",
            r.ca_key,
            r.client_key,
            r.decide_per_s,
            r.issue_per_s,
            r.floor_per_s,
            r.ratio * 100.0
        )?;
    }
    Ok(())
}

/// `vouch bench hook`: the autosign hook's latency, process start to exit.
fn bench_hook(runs: u64, no_journal: bool) -> Result<(), Error> {
    let r = crate::bench::hook(usize::try_from(runs).unwrap_or(100_000), !no_journal)?;
    sayln!(
        "vouch autosign, process start to exit, {} runs ({}): median {:.2} ms, p99 {:.2} ms",
        r.runs,
        if r.journal_and_audit { "replay journal and audit log on" } else { "no journal, no audit log" },
        r.median_ms,
        r.p99_ms
    )
}

/// `vouch bench serve`: load on a running `vouch serve`, a row per level as it completes
/// (text) or all rows at the end (JSON).
fn bench_serve(load: &crate::bench::ServeLoad, format: OutFormat) -> Result<(), Error> {
    // The header once the setup has passed and the first level is measured.
    let mut header = format == OutFormat::Text;
    let rows = crate::bench::serve(load, |r| {
        if std::mem::take(&mut header) {
            let _ = sayln!(
                "{:>7} {:>7} {:>8} {:>9} {:>10} {:>9} {:>9} {:>10} {:>16} {:>16} {:>12}",
                "agents",
                "certs",
                "failed",
                "seconds",
                "certs/s",
                "p50 ms",
                "p99 ms",
                "peak RSS",
                "server CPU/cert",
                "client CPU/cert",
                "bytes/cert"
            );
        }
        if format == OutFormat::Text {
            let _ = sayln!(
                "{:>7} {:>7} {:>8} {:>9.2} {:>10.1} {:>9.1} {:>9.1} {:>10} {:>16} {:>16} {:>12.0}",
                r.agents,
                r.certificates,
                r.failures,
                r.seconds,
                r.certs_per_s,
                r.p50_ms,
                r.p99_ms,
                r.server_peak_rss_mb.map(|m| format!("{m:.0} MB")).unwrap_or_else(|| "-".into()),
                r.server_cpu_ms_per_cert.map(|m| format!("{m:.3} ms")).unwrap_or_else(|| "-".into()),
                r.client_cpu_ms_per_cert.map(|m| format!("{m:.3} ms")).unwrap_or_else(|| "-".into()),
                r.bytes_per_cert
            );
        }
    })?;
    if format == OutFormat::Json {
        say_json(&rows)?;
    }
    for r in &rows {
        if let Some(why) = r.first_failure.as_ref().filter(|_| r.certificates > 0) {
            // Never eprintln!: it panics when stderr cannot be written.
            let _ = writeln!(
                std::io::stderr(),
                "vouch: warning: {} of {} failed at {} agents; the first: {why}",
                r.failures,
                r.failures.saturating_add(r.certificates),
                r.agents
            );
        }
    }
    match rows.iter().find(|r| r.certificates == 0) {
        Some(r) => Err(Error::BenchNothingServed {
            agents: r.agents,
            cause: r.first_failure.clone().unwrap_or_else(|| "no request was made".into()),
        }),
        None => Ok(()),
    }
}

mod erased_json {
    pub trait Json {
        fn to_json(&self) -> serde_json::Result<String>;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> serde_json::Result<String> {
            serde_json::to_string_pretty(self)
        }
    }
}
