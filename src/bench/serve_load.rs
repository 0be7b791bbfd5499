//! `vouch bench serve`: N simulated agents at once against a CA service (vouch serve or
//! Puppet Server), each PUT certificate_request + GET certificate on one kept-alive TLS
//! connection (or a whole bootstrap, or the transport's floor), with the server's CPU per
//! certificate read from /proc.

use super::{crypto, percentiles, vouched_csr};
use crate::error::Error;
use crate::issuance::bootstrap;
use crate::issuance::keys::KeyType;
use crate::serve::client::{tls_config, Client};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

/// What `vouch bench serve` loads.
#[derive(Debug, Clone)]
pub struct ServeLoad {
    pub addr: std::net::SocketAddr,
    /// The name the server's certificate must carry.
    pub host: String,
    pub ca_bundle: PathBuf,
    pub conductor_cert: PathBuf,
    pub conductor_key: PathBuf,
    pub client_key: KeyType,
    /// Concurrency levels to run, one after the other.
    pub agents: Vec<usize>,
    /// Certificates each agent asks for (one connection each).
    pub per_agent: usize,
    /// The server's PID, to report its peak RSS (VmHWM) after each level.
    pub server_pid: Option<u32>,
    /// Each certificate is a whole bootstrap on a new connection (CA bundle, CRLs, PUT, GET).
    pub bootstrap: bool,
    /// Each certificate replaced by two GETs of the CA certificate: the transport's floor.
    pub transport_only: bool,
    /// Ask for gzip-compressed answers, as Puppet's agents do.
    pub gzip: bool,
}

/// One concurrency level of `vouch bench serve`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServeRow {
    pub agents: usize,
    pub certificates: usize,
    pub failures: usize,
    pub seconds: f64,
    pub certs_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub server_peak_rss_mb: Option<f64>,
    /// The server's CPU time (user + system) per certificate, over the level.
    pub server_cpu_ms_per_cert: Option<f64>,
    /// This load generator's CPU time per certificate (TLS, HTTP; CSRs are made before the clock).
    pub client_cpu_ms_per_cert: Option<f64>,
    /// Response body bytes received per certificate (as sent: compressed if gzip was taken).
    pub bytes_per_cert: f64,
    /// Why the first failed certificate failed, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
}

/// A process's CPU time (user + system) so far, from /proc.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

fn peak_rss_mb(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 =
        s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb / 1024.0)
}

/// `vouch bench serve`: CSRs are made before the clock starts; then every agent, on its
/// own kept-alive TLS connection, PUTs its CSR and GETs its certificate, `per_agent` times.
pub fn serve(load: &ServeLoad, mut progress: impl FnMut(&ServeRow)) -> Result<Vec<ServeRow>, Error> {
    let bundle = crate::error::read_input(&load.ca_bundle, crate::files::input::Kind::Cert)?;
    let config = tls_config(&bundle, None).map_err(crypto)?;
    // The transport's floor makes no CSR: it needs no conductor.
    let csrs = if load.transport_only { None } else { Some(CsrSource::new(load)?) };
    let mut rows = Vec::new();
    for &agents in &load.agents {
        let work = match &csrs {
            Some(c) => c.level(agents, load.per_agent)?,
            None => vec![vec![(String::new(), Vec::new()); load.per_agent]; agents],
        };
        let row = run_level(load, &config, work);
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// One agent's work: certnames and their CSRs (PEM), in order.
type AgentWork = Vec<(String, Vec<u8>)>;

/// What `vouch bench serve`'s CSRs are made of.
struct CsrSource {
    conductor_der: Vec<u8>,
    conductor_key: rcgen::KeyPair,
    /// Client keys, shared round-robin.
    keys: Vec<rcgen::KeyPair>,
    /// This run's tag in every certname (runs against one CA never collide).
    run: String,
    now: OffsetDateTime,
}

impl CsrSource {
    /// The conductor's credentials, a few client keys and this run's tag.
    fn new(load: &ServeLoad) -> Result<CsrSource, Error> {
        let now = OffsetDateTime::now_utc();
        let bootstrap::CertAndKey { cert_der: conductor_der, key: conductor_key } =
            bootstrap::load_cert_and_key(&load.conductor_cert, &load.conductor_key)?;
        let mut run_id = [0u8; 4];
        aws_lc_rs::rand::fill(&mut run_id).map_err(|_| crypto("no randomness"))?;
        let run: String = run_id.iter().map(|b| format!("{b:02x}")).collect();
        // Key generation is slow for RSA: a few keys shared round-robin (a CA sees different
        // certnames; whether two nodes share a key does not change its work).
        let keys: Vec<rcgen::KeyPair> =
            (0..8).map(|_| load.client_key.generate().map_err(crypto)).collect::<Result<_, _>>()?;
        Ok(CsrSource { conductor_der, conductor_key, keys, run, now })
    }

    /// Every agent's CSRs for a level of `agents` agents.
    fn level(&self, agents: usize, per_agent: usize) -> Result<Vec<AgentWork>, Error> {
        let mut work: Vec<AgentWork> = Vec::with_capacity(agents);
        for a in 0..agents {
            let mut mine = Vec::with_capacity(per_agent);
            for i in 0..per_agent {
                let name = format!("b{}-{agents}-{a}-{i}.bench.test", self.run);
                let key = self.keys.get((a + i) % self.keys.len()).ok_or_else(|| crypto("no key"))?;
                let der = vouched_csr(&self.conductor_der, &self.conductor_key, &name, key, self.now)?;
                mine.push((name, crate::encoding::pem::encode("CERTIFICATE REQUEST", &der).into_bytes()));
            }
            work.push(mine);
        }
        Ok(work)
    }
}

/// One level: an agent thread each, started together, timed from the barrier to the last join.
fn run_level(load: &ServeLoad, config: &Arc<rustls::ClientConfig>, work: Vec<AgentWork>) -> ServeRow {
    let agents = work.len();
    // A bootstrapping agent is a new process: no TLS session to resume.
    let config = if load.bootstrap {
        let mut c = (**config).clone();
        c.resumption = rustls::client::Resumption::disabled();
        Arc::new(c)
    } else {
        config.clone()
    };
    let config = &config;
    let barrier = Arc::new(std::sync::Barrier::new(agents + 1));
    let mut handles = Vec::with_capacity(agents);
    for mine in work {
        let agent = Agent {
            config: config.clone(),
            barrier: barrier.clone(),
            addr: load.addr,
            host: load.host.clone(),
            bootstrap: load.bootstrap,
            transport_only: load.transport_only,
            gzip: load.gzip,
        };
        handles.push(std::thread::spawn(move || agent.run(mine)));
    }
    barrier.wait();
    let start = Instant::now();
    let server_cpu = load.server_pid.and_then(|p| cpu_seconds(&p.to_string()));
    let client_cpu = cpu_seconds("self");
    let mut lat = Vec::new();
    let mut failures = 0;
    let mut bytes = 0u64;
    let mut first_failure = None;
    for h in handles {
        match h.join() {
            Ok((l, f, b, why)) => {
                lat.extend(l);
                failures += f;
                bytes += b;
                first_failure = first_failure.or(why);
            }
            Err(_) => {
                failures += load.per_agent;
                first_failure.get_or_insert_with(|| "an agent thread panicked".to_string());
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let per_cert = |before: Option<f64>, after: Option<f64>| match (before, after) {
        (Some(b), Some(a)) if !lat.is_empty() => Some((a - b) * 1000.0 / lat.len() as f64),
        _ => None,
    };
    let server_cpu_ms_per_cert = per_cert(server_cpu, load.server_pid.and_then(|p| cpu_seconds(&p.to_string())));
    let client_cpu_ms_per_cert = per_cert(client_cpu, cpu_seconds("self"));
    let (p50, p99) = percentiles(&mut lat);
    ServeRow {
        agents,
        certificates: lat.len(),
        failures,
        seconds,
        certs_per_s: lat.len() as f64 / seconds,
        p50_ms: p50.as_secs_f64() * 1000.0,
        p99_ms: p99.as_secs_f64() * 1000.0,
        server_peak_rss_mb: load.server_pid.and_then(peak_rss_mb),
        server_cpu_ms_per_cert,
        client_cpu_ms_per_cert,
        bytes_per_cert: if lat.is_empty() { 0.0 } else { bytes as f64 / lat.len() as f64 },
        first_failure,
    }
}

/// One simulated agent: its TLS client configuration, the server, the start barrier.
struct Agent {
    config: Arc<rustls::ClientConfig>,
    barrier: Arc<std::sync::Barrier>,
    addr: std::net::SocketAddr,
    host: String,
    bootstrap: bool,
    transport_only: bool,
    gzip: bool,
}

/// What one agent brought back: the latency of each success, the number of failures, the
/// body bytes received, and the first failure's cause.
type AgentResult = (Vec<Duration>, usize, u64, Option<String>);

impl Agent {
    /// Connects, waits for the others, then PUTs and GETs each of `mine` on its one
    /// connection (with `bootstrap`, a new connection for each, which first fetches the CA
    /// bundle and the CRLs).
    fn run(self, mine: AgentWork) -> AgentResult {
        let mut lat = Vec::with_capacity(mine.len());
        let mut failures = 0;
        let mut bytes = 0u64;
        let mut first = None;
        let mut client = match Client::new(self.config.clone(), self.addr, &self.host) {
            Ok(c) => c,
            Err(e) => {
                self.barrier.wait();
                return (lat, mine.len(), 0, Some(e.to_string()));
            }
        };
        self.barrier.wait();
        for (name, csr) in mine {
            let t = Instant::now();
            if self.bootstrap {
                // A new agent: a new connection (a full TLS handshake).
                match Client::new(self.config.clone(), self.addr, &self.host) {
                    Ok(c) => client = c,
                    Err(e) => {
                        failures += 1;
                        first.get_or_insert(e.to_string());
                        continue;
                    }
                }
            }
            match self.one(&mut client, &name, &csr) {
                Ok(b) => {
                    bytes += b;
                    lat.push(t.elapsed());
                }
                Err(why) => {
                    failures += 1;
                    first.get_or_insert(why);
                }
            }
        }
        (lat, failures, bytes, first)
    }

    /// One certificate's requests (with `bootstrap`, the CA bundle and the CRLs first; with
    /// `transport_only`, the CA certificate twice instead of PUT + GET): the body bytes
    /// received, or why a request failed.
    fn one(&self, client: &mut Client, name: &str, csr: &[u8]) -> Result<u64, String> {
        let gzip: &[(&str, &str)] = &[("Accept-Encoding", "gzip;q=1.0,deflate;q=0.6,identity;q=0.3")];
        let headers: &[(&str, &str)] = if self.gzip { gzip } else { &[] };
        let mut get = |path: &str| answered("GET", path, client.request_with_headers("GET", path, headers, b""));
        let mut bytes = 0;
        if self.bootstrap {
            bytes += get("/puppet-ca/v1/certificate/ca")? + get("/puppet-ca/v1/certificate_revocation_list/ca")?;
        }
        if self.transport_only {
            return Ok(bytes + get("/puppet-ca/v1/certificate/ca")? + get("/puppet-ca/v1/certificate/ca")?);
        }
        let mut put_headers = headers.to_vec();
        put_headers.push(("Content-Type", "text/plain"));
        let path = format!("/puppet-ca/v1/certificate_request/{name}");
        bytes += answered("PUT", &path, client.request_with_headers("PUT", &path, &put_headers, csr))?;
        let path = format!("/puppet-ca/v1/certificate/{name}");
        Ok(bytes + answered("GET", &path, client.request_with_headers("GET", &path, headers, b""))?)
    }
}

/// A request's body length if it was answered 200, else why not (the status and the start of
/// the answer, or the client's error).
fn answered(
    method: &str,
    path: &str,
    r: Result<crate::serve::client::Response, crate::serve::client::ClientError>,
) -> Result<u64, String> {
    match r {
        Ok(r) if r.status == 200 => Ok(r.body.len() as u64),
        Ok(r) => {
            let text: String = String::from_utf8_lossy(&r.body).chars().take(200).collect();
            Err(format!("{method} {path}: {} {}", r.status, text.trim()))
        }
        Err(e) => Err(format!("{method} {path}: {e}")),
    }
}

/// Parses "1,8,64" into levels.
pub fn parse_levels(s: &str) -> Result<Vec<usize>, Error> {
    s.split(',')
        .map(|p| {
            p.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0 && *n <= 4096)
                .ok_or_else(|| Error::Usage { detail: format!("{p:?} is not a number of agents between 1 and 4096") })
        })
        .collect()
}
