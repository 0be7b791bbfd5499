//! Shared by the test files: the fixture table (file → certname → expected refusal codes), and
//! private OpenLDAP servers ([`slapd`]).
#![allow(dead_code)]

pub mod agents;
pub mod cloud;
pub mod ds389;
pub mod fleet_lab;
pub mod gen_store;
pub mod ldap_lab;
pub mod ldap_proxy;
pub mod processes;
pub mod slapd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const CERTNAME: &str = "web01.example.test";

/// The vouch binary under test, with none of the environment that would point it at a CA
/// or a policy of the machine running the tests.
pub fn vouch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
    c.env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY");
    // The log's defaults (JSON lines at info on a non-terminal stderr), whatever the caller's shell says.
    for var in [
        "RUST_LOG",
        "VOUCH_LOG",
        "VOUCH_LOG_FORMAT",
        "VOUCH_METRICS_LISTEN",
        "VOUCH_STORE",
        "VOUCH_LDAP_BIND_DN",
        "VOUCH_LDAP_PASSWORD_FILE",
        "VOUCH_LDAP_CA",
    ] {
        c.env_remove(var);
    }
    c
}

/// Runs `cmd` (stdin: `stdin`, else nothing) and returns what it wrote and its status.
pub fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(input) = stdin {
        // The child may exit without reading (an error before stdin): that is its answer.
        if let Err(e) = child.stdin.take().unwrap().write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
        }
    }
    child.wait_with_output().unwrap()
}

/// A file's permission bits.
pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures").join(rel)
}

/// The time the fixtures are dated around.
pub fn fixture_now() -> String {
    std::fs::read_to_string(fixture("NOW")).expect("fixtures/NOW").trim().to_string()
}

/// [`fixture_now`] parsed.
pub fn fixture_time() -> time::OffsetDateTime {
    time::OffsetDateTime::parse(&fixture_now(), &time::format_description::well_known::Rfc3339).unwrap()
}

/// (file under fixtures/csr, certname asked about, expected codes; empty = granted).
pub const CASES: &[(&str, &str, &[&str])] = &[
    // Granted.
    ("valid-p256-conductor.csr.pem", CERTNAME, &[]),
    ("valid-p384-conductor.csr.pem", CERTNAME, &[]),
    ("valid-rsa2048-conductor.csr.pem", CERTNAME, &[]),
    ("valid-ed25519-conductor.csr.pem", CERTNAME, &[]),
    ("valid-via-listed-intermediate.csr.pem", CERTNAME, &[]),
    ("valid-pem-conductor-cert.csr.pem", CERTNAME, &[]),
    ("valid-der-encoded.csr.der", CERTNAME, &[]),
    ("valid-crlf-and-junk.csr.txt", CERTNAME, &[]),
    ("mirror-missing.csr.pem", CERTNAME, &[]),
    // The CSR.
    ("csr-bad-self-signature.csr.pem", CERTNAME, &["csr-signature-invalid"]),
    ("csr-not-a-request.csr.pem", CERTNAME, &["csr-malformed"]),
    // Names.
    ("cn-differs-from-certname.csr.pem", CERTNAME, &["common-name-mismatch"]),
    ("valid-p256-conductor.csr.pem", "db01.example.test", &["common-name-mismatch"]),
    ("certname-uppercase.csr.pem", "WEB01.example.test", &["certname-invalid"]),
    ("certname-wildcard.csr.pem", "*.example.test", &["certname-invalid"]),
    ("certname-trailing-dot.csr.pem", "web01.example.test.", &["certname-invalid"]),
    ("certname-path-like.csr.pem", "../../etc/passwd", &["certname-invalid"]),
    ("certname-reserved.csr.pem", "ca", &["certname-reserved"]),
    // Attributes.
    ("missing-signature.csr.pem", CERTNAME, &["attribute-missing"]),
    ("missing-version.csr.pem", CERTNAME, &["attribute-missing"]),
    ("missing-expiry.csr.pem", CERTNAME, &["attribute-missing"]),
    ("missing-conductor-cert.csr.pem", CERTNAME, &["attribute-missing"]),
    ("missing-classification.csr.pem", CERTNAME, &["attribute-missing", "mirror-mismatch"]),
    ("duplicated-expiry-attribute.csr.pem", CERTNAME, &["attribute-duplicated"]),
    ("classification-with-two-values.csr.pem", CERTNAME, &["attribute-value-count", "mirror-mismatch"]),
    ("version-as-octet-string.csr.pem", CERTNAME, &["attribute-not-text"]),
    ("unexpected-vouch-attribute.csr.pem", CERTNAME, &["attribute-unexpected"]),
    // Version and expiry.
    ("version-3-unsupported.csr.pem", CERTNAME, &["version-unsupported"]),
    // Version 2.
    ("valid-v2.csr.pem", CERTNAME, &[]),
    ("v2-signed-for-another-certname.csr.pem", CERTNAME, &["certname-not-vouched"]),
    ("v2-nonce-malformed.csr.pem", CERTNAME, &["nonce-malformed"]),
    ("v2-missing-nonce.csr.pem", CERTNAME, &["attribute-missing"]),
    ("v2-tampered-nonce.csr.pem", CERTNAME, &["signature-invalid"]),
    // Version field changed 2 -> 1: .2.6/.2.7 become undefined, and the signature fails.
    ("v2-downgraded-to-v1.csr.pem", CERTNAME, &["attribute-unexpected", "attribute-unexpected", "signature-invalid"]),
    ("version-leading-zero.csr.pem", CERTNAME, &["version-malformed"]),
    ("expiry-not-rfc3339.csr.pem", CERTNAME, &["expiry-malformed"]),
    ("attributes-expired.csr.pem", CERTNAME, &["attributes-expired"]),
    ("expiry-too-far-ahead.csr.pem", CERTNAME, &["expiry-too-far"]),
    // The conductor.
    ("conductor-untrusted-root.csr.pem", CERTNAME, &["conductor-untrusted"]),
    ("conductor-via-unlisted-intermediate.csr.pem", CERTNAME, &["conductor-untrusted"]),
    ("conductor-without-eku.csr.pem", CERTNAME, &["conductor-untrusted", "conductor-eku-missing"]),
    ("conductor-eku-only-on-intermediate.csr.pem", CERTNAME, &["conductor-untrusted", "conductor-eku-missing"]),
    ("conductor-without-digital-signature.csr.pem", CERTNAME, &["conductor-key-usage-missing"]),
    ("conductor-expired.csr.pem", CERTNAME, &["conductor-expired"]),
    ("conductor-not-yet-valid.csr.pem", CERTNAME, &["conductor-not-yet-valid"]),
    (
        "conductor-is-the-root-ca.csr.pem",
        CERTNAME,
        &["conductor-untrusted", "conductor-eku-missing", "conductor-key-usage-missing"],
    ),
    ("conductor-cert-garbage.csr.pem", CERTNAME, &["conductor-malformed"]),
    ("conductor-revoked.csr.pem", CERTNAME, &["conductor-revoked"]),
    // Scopes do not apply under policy.toml (no [[conductor]] scopes): these pass.
    ("scope-class-not-allowed.csr.pem", CERTNAME, &[]),
    ("scope-environment-not-allowed.csr.pem", CERTNAME, &[]),
    ("scope-environment-missing.csr.pem", CERTNAME, &[]),
    ("scope-parameter-not-allowed.csr.pem", CERTNAME, &[]),
    ("scope-certname-not-allowed.csr.pem", "db01.example.test", &[]),
    ("scope-lifetime-too-long.csr.pem", CERTNAME, &[]),
    ("scope-unscoped-conductor.csr.pem", CERTNAME, &[]),
    ("scope-subject-two-rdns.csr.pem", "db01.example.test", &[]),
    ("scope-subject-lookalike-single-cn.csr.pem", "db01.example.test", &[]),
    // The signature.
    ("signature-forged.csr.pem", CERTNAME, &["signature-invalid"]),
    ("signature-by-another-conductor.csr.pem", CERTNAME, &["signature-invalid"]),
    ("signature-not-base64.csr.pem", CERTNAME, &["signature-malformed"]),
    ("tampered-conductor-cert-swapped.csr.pem", CERTNAME, &["signature-invalid"]),
    ("tampered-classification.csr.pem", CERTNAME, &["signature-invalid"]),
    ("tampered-expiry.csr.pem", CERTNAME, &["signature-invalid"]),
    ("tampered-version-1-to-01.csr.pem", CERTNAME, &["version-malformed", "signature-invalid"]),
    // The classification.
    ("classification-not-base64.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-not-yaml.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-not-a-mapping.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-unknown-key.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-yaml-tag.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-core-yaml-tag.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-tag-directive.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-too-large.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-deeply-nested.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-alias-bomb.csr.pem", CERTNAME, &["classification-invalid"]),
    ("classification-key-not-json.csr.pem", CERTNAME, &["classification-unrepresentable"]),
    ("conductor-pem-with-trailing-junk.csr.pem", CERTNAME, &["conductor-malformed"]),
    ("v2-tampered-certname.csr.pem", CERTNAME, &["signature-invalid"]),
    ("input-garbage.csr.txt", CERTNAME, &["csr-missing"]),
    ("input-empty.csr.txt", CERTNAME, &["csr-missing"]),
    ("input-truncated.csr.pem", CERTNAME, &["csr-malformed"]),
    // Extension requests.
    ("san-requested.csr.pem", CERTNAME, &["subject-alt-name-requested"]),
    ("pp-cli-auth-requested.csr.pem", CERTNAME, &["authorization-extension-requested"]),
    ("pp-auth-role-requested.csr.pem", CERTNAME, &["authorization-extension-requested"]),
    ("pp-role-requested.csr.pem", CERTNAME, &["puppet-extension-not-allowed"]),
    ("unknown-extension-requested.csr.pem", CERTNAME, &["extension-not-allowed"]),
    ("mirror-differs-from-signed-classification.csr.pem", CERTNAME, &["mirror-mismatch"]),
    ("mirror-requested-twice.csr.pem", CERTNAME, &["extension-duplicated"]),
    ("extension-requested-critical.csr.pem", CERTNAME, &["extension-critical"]),
    // Strict DER.
    ("extension-request-with-two-values.csr.pem", CERTNAME, &["extension-request-ambiguous"]),
    ("cn-with-trailing-bytes.csr.pem", CERTNAME, &["csr-malformed"]),
    ("key-params-with-trailing-data.csr.pem", CERTNAME, &["csr-malformed"]),
    ("critical-flag-not-der-boolean.csr.pem", CERTNAME, &["csr-malformed"]),
];

/// The same fixtures under fixtures/policy-scoped.toml.
pub const SCOPED_CASES: &[(&str, &str, &[&str])] = &[
    ("valid-p256-conductor.csr.pem", CERTNAME, &[]),
    ("valid-v2.csr.pem", CERTNAME, &[]),
    ("scope-class-not-allowed.csr.pem", CERTNAME, &["class-out-of-scope"]),
    ("scope-environment-not-allowed.csr.pem", CERTNAME, &["environment-out-of-scope"]),
    ("scope-environment-missing.csr.pem", CERTNAME, &["environment-out-of-scope"]),
    ("scope-parameter-not-allowed.csr.pem", CERTNAME, &["parameter-out-of-scope"]),
    ("scope-certname-not-allowed.csr.pem", "db01.example.test", &["certname-out-of-scope"]),
    ("scope-lifetime-too-long.csr.pem", CERTNAME, &["lifetime-out-of-scope"]),
    ("scope-unscoped-conductor.csr.pem", CERTNAME, &["conductor-unscoped"]),
    ("valid-rsa2048-conductor.csr.pem", CERTNAME, &["conductor-unscoped"]),
    // Scopes match names structurally: a one-CN lookalike of a two-RDN subject is no match.
    ("scope-subject-two-rdns.csr.pem", "db01.example.test", &[]),
    ("scope-subject-lookalike-single-cn.csr.pem", "db01.example.test", &["conductor-unscoped"]),
];

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Asserts success; returns stdout.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A tool the test needs: missing means failure, never a silent skip.
pub fn require(tool: &str, package: &str) {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().unwrap().status.success();
    assert!(found, "this test needs `{tool}`: apt-get install -y {package} (.ci/run installs it)");
}

/// `vouch --dir DIR serve --listen 127.0.0.1:0`: a `vouch serve` on a free loopback port;
/// more arguments follow.
pub fn serve_cmd(dir: &Path) -> Command {
    let mut c = vouch();
    c.args(["--dir", s(dir), "serve", "--listen", "127.0.0.1:0"]);
    c
}

/// Starts `cmd` (a `vouch serve`), its stdout piped and its stderr written to `log`, and waits
/// until it is ready ([`serve_ready`]): the child, its banner and its `ca_port`.
pub fn start_serve(cmd: &mut Command, log: &Path) -> (std::process::Child, String, u16) {
    let mut child = spawn_serve(cmd, log);
    let (banner, port) = serve_ready(&mut child, log);
    (child, banner, port)
}

/// Spawns `cmd` (a `vouch serve`), its stdout piped (for [`serve_ready`]) and its stderr
/// written to `log`; not yet ready.
pub fn spawn_serve(cmd: &mut Command, log: &Path) -> std::process::Child {
    cmd.stdout(Stdio::piped()).stderr(std::fs::File::create(log).unwrap()).spawn().unwrap()
}

/// Reads a starting `vouch serve`'s banner up to its last line: (the banner, its `ca_port`).
/// Panics with the server's log if it ends first.
pub fn serve_ready(child: &mut std::process::Child, log: &Path) -> (String, u16) {
    use std::io::BufRead;
    let mut banner = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("vouch serve's stdout piped"));
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("vouch serve ended before it was ready:\n{banner}\n{}", std::fs::read_to_string(log).unwrap());
        }
        banner.push_str(&line);
        if line.starts_with("then: puppet ssl bootstrap") {
            break;
        }
    }
    let port = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("ca_port = "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ca_port in the banner:\n{banner}"));
    (banner, port)
}

/// With the CLI, as an operator does: the conductor (`cert`, `key`) signs version 2 attributes
/// for `certname` (fixtures/classification.yaml, an hour), and `vouch csr` makes the key and
/// CSR a Puppet agent would, all in `w` (`certname.yaml`, `.key`, `.csr`). Returns the CSR's path.
pub fn cli_vouched_csr(w: &Path, cert: &Path, key: &Path, certname: &str) -> PathBuf {
    let attrs = w.join(format!("{certname}.yaml"));
    ok(&run(
        vouch().args(["conductor", "sign", "--cert", s(cert), "--key", s(key), "--classification"]).args([
            s(&fixture("classification.yaml")),
            "--expires-in",
            "1h",
            "--out",
            s(&attrs),
            "--certname",
            certname,
        ]),
        None,
    ));
    let csr = w.join(format!("{certname}.csr"));
    ok(&run(
        vouch().args(["csr", "--certname", certname, "--attributes", s(&attrs), "--key-out"]).args([
            s(&w.join(format!("{certname}.key"))),
            "--csr-out",
            s(&csr),
        ]),
        None,
    ));
    csr
}

/// A command's status, stdout and stderr, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The names under `dir` (recursively, relative), sorted, with each file's bytes.
pub fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                todo.push(p);
                out.push((rel + "/", Vec::new()));
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The master CA id of the CA in `dir` (as the shared store names it).
pub fn ca_id(dir: &Path) -> String {
    let pem = std::fs::read(dir.join("ca/ca_crt.pem")).unwrap();
    vouch::store::ca_id(&vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap().1)
}
