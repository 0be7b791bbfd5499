//! The service's metrics: one static registry of counters, gauges and histograms on
//! atomics, rendered in Prometheus' text exposition format (version 0.0.4).
//!
//! Every label set is bounded and known when the program is built (routes, HTTP statuses,
//! decision outcomes, refusal codes, store stages), so each series is an atomic in a fixed
//! table: recording is one or two relaxed atomic additions, with no lock and no allocation,
//! and never touches the store. Rendering ([`Metrics::render`]) reads the atomics, so a
//! scrape that runs during an update may see one series a step ahead of another (a
//! histogram's `_sum` ahead of its buckets, say), never a count that goes back.
//!
//! Anything may record (the group commit, the authority's warnings); only `vouch serve`
//! exposes the registry (`--metrics-listen`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// The API's routes: the label `route` of `vouch_http_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Certificate,
    CertificateRequest,
    CertificateStatus,
    CertificateStatuses,
    CertificateRevocationList,
    CertificateRenewal,
    Expirations,
    /// `/status/v1/simple`.
    Status,
    /// Anything else (answered 404, 400 or 405).
    Other,
}

impl Route {
    pub const ALL: [Route; 9] = [
        Route::Certificate,
        Route::CertificateRequest,
        Route::CertificateStatus,
        Route::CertificateStatuses,
        Route::CertificateRevocationList,
        Route::CertificateRenewal,
        Route::Expirations,
        Route::Status,
        Route::Other,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Route::Certificate => "certificate",
            Route::CertificateRequest => "certificate_request",
            Route::CertificateStatus => "certificate_status",
            Route::CertificateStatuses => "certificate_statuses",
            Route::CertificateRevocationList => "certificate_revocation_list",
            Route::CertificateRenewal => "certificate_renewal",
            Route::Expirations => "expirations",
            Route::Status => "status",
            Route::Other => "other",
        }
    }

    /// The route of an endpoint's name (the path segment after `/puppet-ca/v1/`).
    pub fn of_endpoint(endpoint: &str) -> Route {
        match endpoint {
            "certificate" => Route::Certificate,
            "certificate_request" => Route::CertificateRequest,
            "certificate_status" => Route::CertificateStatus,
            "certificate_statuses" => Route::CertificateStatuses,
            "certificate_revocation_list" => Route::CertificateRevocationList,
            "certificate_renewal" => Route::CertificateRenewal,
            "expirations" => Route::Expirations,
            _ => Route::Other,
        }
    }
}

/// Where the store failed: the label `stage` of `vouch_store_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreStage {
    /// A request answered 500 because the store failed.
    Request,
    /// Issued certificates are durable in the store's log, but a step after that failed.
    AfterCommit,
    /// The audit log's "issued" lines could not be written.
    Audit,
    /// The periodic maintenance (CRL refresh) failed.
    Maintenance,
    /// The store's log could not be checkpointed into its files.
    Checkpoint,
    /// A root CRL found in the shared store was not taken (it does not verify with this
    /// master's root, is no CRL, or is not numbered higher than the one here): counted once
    /// per distinct value.
    SharedRootCrl,
    /// A master CA or a master's CRL found in the shared store was not counted (not this
    /// fleet's root's, not signed by that master, not numbered higher): once per value.
    Fleet,
}

impl StoreStage {
    pub const ALL: [StoreStage; 7] = [
        StoreStage::Request,
        StoreStage::AfterCommit,
        StoreStage::Audit,
        StoreStage::Maintenance,
        StoreStage::Checkpoint,
        StoreStage::SharedRootCrl,
        StoreStage::Fleet,
    ];

    pub fn label(self) -> &'static str {
        match self {
            StoreStage::Request => "request",
            StoreStage::AfterCommit => "after-commit",
            StoreStage::Audit => "audit",
            StoreStage::Maintenance => "maintenance",
            StoreStage::Checkpoint => "checkpoint",
            StoreStage::SharedRootCrl => "shared-root-crl",
            StoreStage::Fleet => "fleet",
        }
    }
}

/// HTTP statuses counted per route: 100 to 599 (anything else counts as 599, which hyper
/// never sends).
const STATUS_MIN: u16 = 100;
const STATUSES: usize = 500;
/// Distinct refusal codes kept (there are about 95); more would count under `other`.
const CODES: usize = 128;

/// Issuance latency buckets, in nanoseconds (rendered in seconds).
const LATENCY_BOUNDS_NS: [u64; 13] = [
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];
/// Group-commit batch size buckets (a batch holds at most 128 issuances).
const BATCH_BOUNDS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// A histogram over `u64` observations with fixed upper bounds; `scale` divides
/// observations and bounds when rendered (1e9 for nanoseconds shown as seconds).
pub struct Histogram<const N: usize> {
    bounds: [u64; N],
    scale: f64,
    /// Per bucket (not cumulative); the last one is `+Inf`'s own.
    buckets: [AtomicU64; N],
    over: AtomicU64,
    sum: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    const fn new(bounds: [u64; N], scale: f64) -> Self {
        Histogram {
            bounds,
            scale,
            buckets: [const { AtomicU64::new(0) }; N],
            over: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, v: u64) {
        match self.bounds.iter().position(|&b| v <= b) {
            Some(i) => self.buckets[i].fetch_add(1, Relaxed),
            None => self.over.fetch_add(1, Relaxed),
        };
        self.sum.fetch_add(v, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        header(out, name, help, "histogram");
        let mut cumulative: u64 = 0;
        for (bound, bucket) in self.bounds.iter().zip(&self.buckets) {
            cumulative = cumulative.saturating_add(bucket.load(Relaxed));
            let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cumulative}", *bound as f64 / self.scale);
        }
        // `_count` is the `+Inf` bucket, from the same loads: they always agree.
        cumulative = cumulative.saturating_add(self.over.load(Relaxed));
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum {}", self.sum.load(Relaxed) as f64 / self.scale);
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// Counters keyed by a `&'static str` first seen at run time (refusal codes), without a
/// lock: slots fill in order, each name once.
struct Keyed {
    names: [OnceLock<&'static str>; CODES],
    counts: [AtomicU64; CODES],
    other: AtomicU64,
}

impl Keyed {
    const fn new() -> Self {
        Keyed {
            names: [const { OnceLock::new() }; CODES],
            counts: [const { AtomicU64::new(0) }; CODES],
            other: AtomicU64::new(0),
        }
    }

    fn add(&self, name: &'static str) {
        for (slot, count) in self.names.iter().zip(&self.counts) {
            // An empty slot is taken; one another thread just took is read like any other.
            let _ = slot.set(name);
            if slot.get() == Some(&name) {
                count.fetch_add(1, Relaxed);
                return;
            }
        }
        self.other.fetch_add(1, Relaxed);
    }

    fn each(&self, mut f: impl FnMut(&str, u64)) {
        for (slot, count) in self.names.iter().zip(&self.counts) {
            match slot.get() {
                Some(name) => f(name, count.load(Relaxed)),
                None => break,
            }
        }
        let other = self.other.load(Relaxed);
        if other > 0 {
            f("other", other);
        }
    }
}

/// Every metric of the process. One instance: [`METRICS`].
pub struct Metrics {
    requests: [[AtomicU64; STATUSES]; Route::ALL.len()],
    granted: AtomicU64,
    refused: AtomicU64,
    refusals: Keyed,
    issuance: Histogram<13>,
    batches: Histogram<8>,
    /// Nanoseconds spent running group-commit batches, one at a time (taking the store's lock,
    /// then storing with it held).
    batch_busy_ns: AtomicU64,
    store_errors: [AtomicU64; StoreStage::ALL.len()],
    connections: AtomicI64,
    /// Other masters' CRLs missing or within `refresh_before` of their nextUpdate.
    fleet_crls_due: AtomicI64,
    ldap: [AtomicU64; LDAP_OPS.len()],
}

/// The LDAP operations a shared store counts (`vouch_ldap_operations_total{op}`): reads and
/// searches cost a round trip, writes a synchronous commit on the server.
pub const LDAP_OPS: [&str; 6] = ["read", "search", "add", "modify", "delete", "bind"];

/// The process's metrics.
pub static METRICS: Metrics = Metrics::new();

impl Metrics {
    const fn new() -> Self {
        Metrics {
            requests: [const { [const { AtomicU64::new(0) }; STATUSES] }; Route::ALL.len()],
            granted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            refusals: Keyed::new(),
            issuance: Histogram::new(LATENCY_BOUNDS_NS, 1e9),
            batches: Histogram::new(BATCH_BOUNDS, 1.0),
            batch_busy_ns: AtomicU64::new(0),
            store_errors: [const { AtomicU64::new(0) }; StoreStage::ALL.len()],
            connections: AtomicI64::new(0),
            fleet_crls_due: AtomicI64::new(0),
            ldap: [const { AtomicU64::new(0) }; LDAP_OPS.len()],
        }
    }

    /// How many other masters' CRLs are due now (see [`crate::authority::masters`]).
    pub fn fleet_crls_due(&self, n: usize) {
        self.fleet_crls_due.store(i64::try_from(n).unwrap_or(i64::MAX), Relaxed);
    }

    /// One LDAP operation of a kind in [`LDAP_OPS`] (another name is not counted).
    pub fn ldap(&self, op: &str) {
        if let Some(i) = LDAP_OPS.iter().position(|o| *o == op) {
            self.ldap[i].fetch_add(1, Relaxed);
        }
    }

    /// A request answered with `status`.
    pub fn request(&self, route: Route, status: u16) {
        let i = usize::from(status.clamp(STATUS_MIN, 599) - STATUS_MIN);
        self.requests[route as usize][i].fetch_add(1, Relaxed);
    }

    /// A decision: granted, or refused with these codes (each distinct code counted once).
    pub fn decision(&self, granted: bool, codes: &[&'static str]) {
        if granted {
            self.granted.fetch_add(1, Relaxed);
            return;
        }
        self.refused.fetch_add(1, Relaxed);
        for (i, code) in codes.iter().enumerate() {
            if !codes[..i].contains(code) {
                self.refusals.add(code);
            }
        }
    }

    /// The time one issuance took (decision, signature, group commit).
    pub fn issuance(&self, took: std::time::Duration) {
        self.issuance.observe(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }

    /// A group commit ran a batch of `size` issuances, which took `took` (wall clock).
    pub fn batch(&self, size: usize, took: std::time::Duration) {
        self.batches.observe(u64::try_from(size).unwrap_or(u64::MAX));
        self.batch_busy_ns.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    pub fn store_error(&self, stage: StoreStage) {
        self.store_errors[stage as usize].fetch_add(1, Relaxed);
    }

    /// Counts a connection open until the guard is dropped.
    pub fn connection(&'static self) -> ConnectionGuard {
        self.connections.fetch_add(1, Relaxed);
        ConnectionGuard { metrics: self }
    }

    /// The metrics in Prometheus' text format; `gauges` are added as they are (name, help,
    /// and `(labels, value)` per series: the CRLs' ages, computed by the caller).
    pub fn render(&self, gauges: &[Gauge]) -> String {
        let mut out = String::with_capacity(4096);
        self.render_requests(&mut out);
        self.render_decisions(&mut out);
        self.render_storing(&mut out);
        self.render_open(&mut out);
        render_gauges(&mut out, gauges);
        out
    }

    /// The requests answered, and the operations sent to the LDAP store.
    fn render_requests(&self, out: &mut String) {
        header(out, "vouch_http_requests_total", "Requests answered, by route and HTTP status.", "counter");
        for route in Route::ALL {
            for (i, n) in self.requests[route as usize].iter().enumerate() {
                let n = n.load(Relaxed);
                if n > 0 {
                    let status = i + usize::from(STATUS_MIN);
                    let _ = writeln!(
                        out,
                        "vouch_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                        route.label()
                    );
                }
            }
        }
        header(
            out,
            "vouch_ldap_operations_total",
            "Operations sent to the LDAP store, by kind (a shared store only; each is one round trip).",
            "counter",
        );
        for (op, n) in LDAP_OPS.iter().zip(&self.ldap) {
            let _ = writeln!(out, "vouch_ldap_operations_total{{op=\"{op}\"}} {}", n.load(Relaxed));
        }
    }

    /// The decisions by outcome, and the refusals by code.
    fn render_decisions(&self, out: &mut String) {
        header(out, "vouch_decisions_total", "Decisions on certificate requests, by outcome.", "counter");
        let _ = writeln!(out, "vouch_decisions_total{{outcome=\"granted\"}} {}", self.granted.load(Relaxed));
        let _ = writeln!(out, "vouch_decisions_total{{outcome=\"refused\"}} {}", self.refused.load(Relaxed));
        header(
            out,
            "vouch_refusals_total",
            "Refused decisions by refusal code; a decision refused for several reasons counts under each code.",
            "counter",
        );
        self.refusals.each(|code, n| {
            let _ = writeln!(out, "vouch_refusals_total{{code=\"{}\"}} {n}", escape(code));
        });
    }

    /// Issuance times, group commits and store failures.
    fn render_storing(&self, out: &mut String) {
        self.issuance.render(
            out,
            "vouch_issuance_duration_seconds",
            "Time to decide, sign and durably store one issued certificate (requests that issued one).",
        );
        self.batches.render(
            out,
            "vouch_group_commit_batch_size",
            "Issuances stored per group commit (two synchronous writes each: the audit log's and the store's).",
        );
        header(
            out,
            "vouch_group_commit_busy_seconds_total",
            "Time spent running group-commit batches (one at a time: taking the store's lock, then storing with it held); a rate near 1 means issuance waits on this serial part. Always 0 on a shared (LDAP) store, which stores each request on its own.",
            "counter",
        );
        let _ =
            writeln!(out, "vouch_group_commit_busy_seconds_total {}", self.batch_busy_ns.load(Relaxed) as f64 / 1e9);
        header(out, "vouch_store_errors_total", "Store failures, by stage.", "counter");
        for stage in StoreStage::ALL {
            let n = self.store_errors[stage as usize].load(Relaxed);
            let _ = writeln!(out, "vouch_store_errors_total{{stage=\"{}\"}} {n}", stage.label());
        }
    }

    /// What is open or due now: connections, other masters' CRLs.
    fn render_open(&self, out: &mut String) {
        header(out, "vouch_open_connections", "HTTPS connections open now.", "gauge");
        let _ = writeln!(out, "vouch_open_connections {}", self.connections.load(Relaxed).max(0));
        header(
            out,
            "vouch_master_crls_due",
            "Other masters' CRLs (shared store) missing here or within crl.refresh_before of their nextUpdate.",
            "gauge",
        );
        let _ = writeln!(out, "vouch_master_crls_due {}", self.fleet_crls_due.load(Relaxed).max(0));
    }
}

/// The gauges computed by the caller, as they are (see [`Metrics::render`]).
fn render_gauges(out: &mut String, gauges: &[Gauge]) {
    for g in gauges {
        header(out, g.name, g.help, "gauge");
        for (labels, value) in &g.series {
            let _ = write!(out, "{}", g.name);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    let _ = write!(out, "{}{k}=\"{}\"", if i > 0 { "," } else { "" }, escape(v));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {value}");
        }
    }
}

/// A gauge computed at scrape time (see [`Metrics::render`]).
pub struct Gauge {
    pub name: &'static str,
    pub help: &'static str,
    pub series: Vec<(Vec<(&'static str, String)>, f64)>,
}

/// One open connection (see [`Metrics::connection`]).
pub struct ConnectionGuard {
    metrics: &'static Metrics,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.metrics.connections.fetch_sub(1, Relaxed);
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format writes it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return v.into();
    }
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_count_is_the_inf_bucket() {
        let h = Histogram::new([1, 2, 4], 1.0);
        for v in [0, 1, 2, 3, 9, 9] {
            h.observe(v);
        }
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "x_bucket{le=\"1\"} 2",
                "x_bucket{le=\"2\"} 3",
                "x_bucket{le=\"4\"} 4",
                "x_bucket{le=\"+Inf\"} 6",
                "x_sum 24",
                "x_count 6"
            ]
        );
        let s = Histogram::new([1_000_000, 2_500_000], 1e9);
        s.observe(2_000_000);
        let mut out = String::new();
        s.render(&mut out, "t", "help");
        assert!(out.contains("t_bucket{le=\"0.001\"} 0\n") && out.contains("t_bucket{le=\"0.0025\"} 1\n"), "{out}");
        assert!(out.contains("t_sum 0.002\n"), "{out}");
    }

    #[test]
    fn keyed_counters_keep_each_name_once_across_threads() {
        let k: &'static Keyed = Box::leak(Box::new(Keyed::new()));
        let names: [&'static str; 4] = ["a", "b", "c", "d"];
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        k.add(names[(t + i) % 4]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut seen = Vec::new();
        k.each(|n, c| seen.push((n.to_string(), c)));
        seen.sort();
        assert_eq!(seen, [("a".into(), 2000), ("b".into(), 2000), ("c".into(), 2000), ("d".into(), 2000)]);
    }

    #[test]
    fn a_refusal_counts_each_of_its_codes_once() {
        let m: &'static Metrics = Box::leak(Box::new(Metrics::new()));
        m.decision(false, &["x-code", "x-code", "y-code"]);
        m.decision(true, &[]);
        m.request(Route::CertificateRequest, 200);
        let text = m.render(&[Gauge { name: "g", help: "h", series: vec![(vec![("k", "a\"b".into())], 1.5)] }]);
        for want in [
            "vouch_refusals_total{code=\"x-code\"} 1\n",
            "vouch_refusals_total{code=\"y-code\"} 1\n",
            "vouch_decisions_total{outcome=\"refused\"} 1\n",
            "vouch_decisions_total{outcome=\"granted\"} 1\n",
            "vouch_http_requests_total{route=\"certificate_request\",status=\"200\"} 1\n",
            "g{k=\"a\\\"b\"} 1.5\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        let g = m.connection();
        assert!(m.render(&[]).contains("vouch_open_connections 1\n"));
        drop(g);
        assert!(m.render(&[]).contains("vouch_open_connections 0\n"));
    }
}
