//! `vouch bench`: vouch's cost measured next to the cost of the signatures it
//! cannot avoid, in the same run (issue 7). Nothing here asserts a time: it reports.
//!
//! - `decide`: the decision alone, and decision + issuance (prepare and sign, no
//!   store), per core, for each CA key type and client key type, next to the
//!   *signature floor*: CSR self-signature verify + conductor certificate verify +
//!   attribute signature verify + one CA signature, timed with aws-lc directly.
//! - `hook`: `vouch autosign` as Puppet Server runs it, process start to exit.
//! - `serve` (`serve_load.rs`): N simulated agents, each PUT certificate_request + GET certificate on
//!   one kept-alive TLS connection, against `vouch serve` or Puppet Server.

use crate::error::Error;
use crate::issuance::bootstrap::{self, ConductorSpec, DataDir};
use crate::issuance::keys::KeyType;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use time::OffsetDateTime;

fn crypto(e: impl std::fmt::Display) -> Error {
    Error::Crypto { detail: e.to_string() }
}

const CLASSIFICATION: &str = "classes:\n  - role::web\nparameters:\n  tier: gold\nenvironment: production\n";

/// Runs `f` repeatedly for about `budget`; returns operations per second.
fn rate(budget: Duration, mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    // Warm up (first use of the CPU features, caches, lazy statics).
    for _ in 0..3 {
        f()?;
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget || n < 5 {
        f()?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Operations per second of one signature and one verification with a key of this type,
/// over a message the size of a certificate's signed part.
fn sign_verify_rates(kt: KeyType, budget: Duration) -> Result<(f64, f64), Error> {
    use aws_lc_rs::signature::{self as sig, UnparsedPublicKey};
    let key = kt.generate().map_err(crypto)?;
    let msg = vec![0x5au8; 900];
    let signature = rcgen::SigningKey::sign(&key, &msg).map_err(crypto)?;
    let raw = rcgen::PublicKeyData::der_bytes(&key).to_vec();
    let alg: &'static dyn sig::VerificationAlgorithm = match kt {
        KeyType::P256 => &sig::ECDSA_P256_SHA256_ASN1,
        KeyType::P384 => &sig::ECDSA_P384_SHA384_ASN1,
        KeyType::Ed25519 => &sig::ED25519,
        KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => &sig::RSA_PKCS1_2048_8192_SHA256,
    };
    let signs = rate(budget, || rcgen::SigningKey::sign(&key, &msg).map(|_| ()).map_err(crypto))?;
    let verifies = rate(budget, || {
        UnparsedPublicKey::new(alg, &raw).verify(&msg, &signature).map_err(|_| crypto("verification failed"))
    })?;
    Ok((signs, verifies))
}

/// A scratch CA of `ca_type` with a P-256 conductor, for the in-process benchmarks.
struct Lab {
    _tmp: TempDir,
    dir: DataDir,
    conductor_der: Vec<u8>,
    conductor_key: rcgen::KeyPair,
}

/// A directory removed on drop (no dev-dependency in the binary).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Result<Self, Error> {
        let mut b = [0u8; 8];
        aws_lc_rs::rand::fill(&mut b).map_err(|_| crypto("no randomness"))?;
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let p = std::env::temp_dir().join(format!("vouch-bench-{tag}-{hex}"));
        std::fs::create_dir_all(&p).map_err(|source| Error::Io { path: p.clone(), op: "create directory", source })?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Lab {
    fn new(ca_type: KeyType, now: OffsetDateTime) -> Result<Lab, Error> {
        let tmp = TempDir::new(ca_type.name())?;
        let dir = DataDir::new(tmp.0.join("ca"));
        bootstrap::init(&dir, ca_type, now)?;
        let spec = ConductorSpec { name: "bench-conductor", key_type: KeyType::P256, days: 30 };
        let (cert_pem, key_pem, _) = bootstrap::new_conductor(&dir, &spec, now)?;
        let (_, conductor_der) =
            crate::encoding::pem::find(cert_pem.as_bytes(), &["CERTIFICATE"]).map_err(|e| crypto(e.to_string()))?;
        let conductor_key = crate::issuance::keys::load_pem(&key_pem).map_err(crypto)?;
        Ok(Lab { _tmp: tmp, dir, conductor_der, conductor_key })
    }

    /// A vouched (version 2) CSR for `certname`, signed by a fresh `client` key.
    fn csr(&self, certname: &str, client: &rcgen::KeyPair, now: OffsetDateTime) -> Result<Vec<u8>, Error> {
        vouched_csr(&self.conductor_der, &self.conductor_key, certname, client, now)
    }
}

/// Version 2 attributes for `certname` from a conductor, in a CSR signed by `client`, as
/// a Puppet agent makes it from `csr_attributes.yaml` (DER).
pub fn vouched_csr(
    conductor_der: &[u8],
    conductor_key: &rcgen::KeyPair,
    certname: &str,
    client: &rcgen::KeyPair,
    now: OffsetDateTime,
) -> Result<Vec<u8>, Error> {
    let class = crate::vouching::classification::Classification::from_yaml(CLASSIFICATION, 65536)
        .map_err(|error| Error::Classification { source: "bench".into(), error })?;
    let a = crate::vouching::attrs::vouch(
        conductor_der,
        conductor_key,
        &class,
        now + time::Duration::hours(1),
        crate::vouching::attrs::CertEncoding::Base64Der,
        Some(certname),
    )
    .map_err(crypto)?;
    let attrs = crate::vouching::attrs::CsrAttributes::from_vouched(&a, Some(crate::policy::DEFAULT_MIRROR_OID));
    let spec = attrs.csr_spec(certname).map_err(crypto)?;
    crate::encoding::csr::build(&spec, client).map_err(crypto)
}

/// One row of `vouch bench decide`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DecideRow {
    pub ca_key: &'static str,
    pub client_key: &'static str,
    /// Decisions per second on one core.
    pub decide_per_s: f64,
    /// Decision + certificate prepared and signed (no store), per second on one core.
    pub issue_per_s: f64,
    /// 1 / (CSR verify + conductor certificate verify + attribute verify + CA sign).
    pub floor_per_s: f64,
    /// issue_per_s / floor_per_s.
    pub ratio: f64,
}

/// `vouch bench decide`: the matrix of CA key types × client key types.
pub fn decide(ca_types: &[KeyType], client_types: &[KeyType], budget: Duration) -> Result<Vec<DecideRow>, Error> {
    let now = OffsetDateTime::now_utc();
    let mut rates = std::collections::HashMap::new();
    let mut rate_of = |kt: KeyType| -> Result<(f64, f64), Error> {
        if let Some(r) = rates.get(&kt) {
            return Ok(*r);
        }
        let r = sign_verify_rates(kt, budget)?;
        rates.insert(kt, r);
        Ok(r)
    };
    let mut rows = Vec::new();
    for &ca_type in ca_types {
        let lab = Lab::new(ca_type, now)?;
        let auth = crate::authority::Authority::open(&lab.dir)?;
        let bootstrap::CertAndKey { cert_der: ca_der, key: ca_key } =
            bootstrap::load_cert_and_key(&lab.dir.file(bootstrap::CA_CERT), &lab.dir.file(bootstrap::CA_KEY))?;
        let master = crate::issuance::certificate::MasterCa::new(ca_der, ca_key, String::new())?;
        for &client_type in client_types {
            let client = client_type.generate().map_err(crypto)?;
            let certname = "web01.example.test";
            let csr = lab.csr(certname, &client, now)?;
            let req = crate::decision::Request { csr: &csr, certname };
            let decide_once = || {
                crate::decision::decide(&req, &auth.policy, now)
                    .map_err(|r| Error::Usage { detail: format!("the benchmark CSR was refused: {:?}", r.reasons) })
            };
            decide_once()?;
            let decide_per_s = rate(budget, || decide_once().map(|_| ()))?;
            let mut serial = [0u8; 16];
            let issue_per_s = rate(budget, || {
                let grant = decide_once()?;
                aws_lc_rs::rand::fill(&mut serial).map_err(|_| crypto("no randomness"))?;
                serial[0] = (serial[0] & 0x7f) | 0x40;
                let prepared = crate::issuance::certificate::prepare(
                    crate::issuance::certificate::Authorization::Vouched(Box::new(grant)),
                    &auth.policy.profile,
                    &auth.policy.mirror_oid,
                    &auth.policy.allowed_extensions,
                    &serial,
                    &master,
                    now,
                )?;
                prepared.issue(&master).map(|_| ()).map_err(Error::from)
            })?;
            // The floor: verify the client's CSR, the conductor certificate (signed by the
            // root, of the CA's key type), the attributes (P-256 conductor), sign once.
            let (_, client_verify) = rate_of(client_type)?;
            let (ca_sign, ca_verify) = rate_of(ca_type)?;
            let (_, conductor_verify) = rate_of(KeyType::P256)?;
            let floor_s = 1.0 / client_verify + 1.0 / ca_verify + 1.0 / conductor_verify + 1.0 / ca_sign;
            let floor_per_s = 1.0 / floor_s;
            rows.push(DecideRow {
                ca_key: ca_type.name(),
                client_key: client_type.name(),
                decide_per_s,
                issue_per_s,
                floor_per_s,
                ratio: issue_per_s / floor_per_s,
            });
        }
    }
    Ok(rows)
}

/// Median and 99th percentile of durations (sorted in place).
fn percentiles(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    let at = |q: usize| v.get((v.len().saturating_sub(1)) * q / 100).copied().unwrap_or_default();
    (at(50), at(99))
}

/// Result of `vouch bench hook`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HookResult {
    pub runs: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
    pub journal_and_audit: bool,
}

/// `vouch bench hook`: runs `vouch autosign` (this executable) `runs` times on fresh
/// vouched CSRs, as Puppet Server does (argv certname, CSR on stdin), timing each
/// process from spawn to exit.
pub fn hook(runs: usize, journal_and_audit: bool) -> Result<HookResult, Error> {
    let now = OffsetDateTime::now_utc();
    let lab = Lab::new(KeyType::P256, now)?;
    let policy = lab.dir.policy();
    if !journal_and_audit {
        let text = std::fs::read_to_string(&policy)
            .map_err(|source| Error::Io { path: policy.clone(), op: "read", source })?
            .replace("enabled = true", "enabled = false")
            .replace("log = \"audit.log\"", "# no audit log");
        crate::files::durable::write_replace(&policy, text.as_bytes(), 0o644).map_err(|source| Error::Io {
            path: policy.clone(),
            op: "write",
            source,
        })?;
        crate::policy::Policy::load(&policy)?;
    }
    let exe = std::env::current_exe().map_err(|source| Error::Io { path: "vouch".into(), op: "find", source })?;
    let client = KeyType::P256.generate().map_err(crypto)?;
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs {
        let certname = format!("hook{i}.example.test");
        let csr = crate::encoding::pem::encode("CERTIFICATE REQUEST", &lab.csr(&certname, &client, now)?);
        let start = Instant::now();
        let mut child = std::process::Command::new(&exe)
            .args(["autosign", "--policy"])
            .arg(&policy)
            .arg("--")
            .arg(&certname)
            .env_remove("VOUCH_DIR")
            .env_remove("VOUCH_POLICY")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| Error::Io { path: exe.clone(), op: "run", source })?;
        if let Some(mut stdin) = child.stdin.take() {
            std::io::Write::write_all(&mut stdin, csr.as_bytes()).map_err(|source| Error::Io {
                path: exe.clone(),
                op: "write to",
                source,
            })?;
        }
        let out = child.wait_with_output().map_err(|source| Error::Io { path: exe.clone(), op: "wait for", source })?;
        times.push(start.elapsed());
        if !out.status.success() {
            return Err(Error::Usage {
                detail: format!("the hook refused the benchmark CSR: {}", String::from_utf8_lossy(&out.stderr)),
            });
        }
    }
    let (p50, p99) = percentiles(&mut times);
    Ok(HookResult {
        runs,
        median_ms: p50.as_secs_f64() * 1000.0,
        p99_ms: p99.as_secs_f64() * 1000.0,
        journal_and_audit,
    })
}

mod serve_load;
pub use serve_load::{parse_levels, serve, ServeLoad, ServeRow};
