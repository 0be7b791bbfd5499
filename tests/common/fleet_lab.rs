//! One fleet behind a load balancer: a real HAProxy (Debian's `haproxy`) round-robin in TCP
//! mode on a loopback port in front of `vouch serve` masters, and real Puppet agents that
//! reach it by the masters' shared name through a private `/etc/hosts` (a mount namespace of
//! their own: nothing of the machine's is changed).

use super::processes::{free_port, read, run_guarded, Guard, Wait};
use super::{ok, require, s, vouch};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The name both masters carry besides their own (`--server-name`): the load balancer's.
pub const SHARED_NAME: &str = "puppet-ca.fleet.test";

/// HAProxy in front of `backends`, stopped by PID when dropped.
pub struct Haproxy {
    pub port: u16,
    _guard: Guard,
}

impl Haproxy {
    /// Round-robin over `backends` in TCP mode (TLS goes through to the masters), with a
    /// health check every 300 ms: a master that stops answering is left out after one failed
    /// check, as an operator's HAProxy would do it.
    pub fn start(dir: &Path, backends: &[SocketAddr]) -> Haproxy {
        require("haproxy", "haproxy");
        let port = free_port();
        let mut cfg = format!(
            "global\n  maxconn 512\n\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 60s\n  \
             timeout server 60s\n  retries 3\n  option redispatch\n\nfrontend ca\n  bind 127.0.0.1:{port}\n  default_backend masters\n\n\
             backend masters\n  balance roundrobin\n"
        );
        for (i, b) in backends.iter().enumerate() {
            cfg.push_str(&format!("  server m{} {b} check inter 300ms fall 1 rise 2\n", i + 1));
        }
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let check = Command::new("haproxy").args(["-c", "-f", s(&path)]).output().unwrap();
        assert!(check.status.success(), "haproxy -c: {}", String::from_utf8_lossy(&check.stderr));
        let log = std::fs::File::create(dir.join("haproxy.log")).unwrap();
        let child = Command::new("haproxy")
            .args(["-db", "-f", s(&path)])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let guard = Guard { child, what: "haproxy", grace: Duration::from_secs(5) };
        Wait::up_to(Duration::from_secs(10))
            .every(Duration::from_millis(50))
            .showing(|| read(&dir.join("haproxy.log")))
            .until("haproxy listens", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
        Haproxy { port, _guard: guard }
    }
}

/// A hosts file that names [`SHARED_NAME`] (and localhost) as 127.0.0.1.
pub fn hosts_file(dir: &Path) -> PathBuf {
    let p = dir.join("hosts");
    std::fs::write(&p, format!("127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {SHARED_NAME}\n")).unwrap();
    p
}

/// A Puppet agent's confdir under `base/certname`: CA and server at `host:port`, with the
/// attributes file if any.
pub fn agent_conf(base: &Path, certname: &str, host: &str, port: u16, attributes: Option<&Path>) -> PathBuf {
    let d = base.join(certname);
    std::fs::create_dir_all(d.join("etc")).unwrap();
    let mut conf = format!("[main]\nserver = {host}\nca_server = {host}\nserverport = {port}\ncertname = {certname}\n");
    for (k, v) in ["ssldir", "vardir", "rundir", "logdir", "publicdir", "codedir"]
        .iter()
        .zip(["ssl", "var", "run", "log", "public", "code"])
    {
        conf.push_str(&format!("{k} = {}\n", d.join(v).display()));
    }
    if let Some(a) = attributes {
        conf.push_str(&format!("csr_attributes = {}\n", a.display()));
    }
    std::fs::write(d.join("etc/puppet.conf"), conf).unwrap();
    d.join("etc")
}

/// Runs `program args` in a mount namespace of its own where `hosts` is `/etc/hosts`
/// (unshare(1), as root): (exit code, output).
pub fn with_hosts(hosts: &Path, program: &[&str], dir: &Path, tag: &str) -> (i32, String) {
    require("unshare", "util-linux");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(hosts)
        .args(program);
    run_guarded(cmd, dir, tag, Duration::from_secs(120))
}

/// `puppet ssl bootstrap` of the agent in `confdir`, by the shared name.
pub fn bootstrap(hosts: &Path, confdir: &Path, dir: &Path, tag: &str) -> (i32, String) {
    require("puppet", "puppet-agent");
    with_hosts(hosts, &["puppet", "ssl", "bootstrap", "--waitforcert", "0", "--confdir", s(confdir)], dir, tag)
}

/// Version 2 attributes for `certname` from the conductor in `dir` (its first run's), as
/// `csr_attributes.yaml` at `out`.
pub fn conductor_sign(dir: &Path, certname: &str, classification: &str, out: &Path) {
    let class = out.with_extension("classification.yaml");
    std::fs::write(&class, classification).unwrap();
    ok(&vouch()
        .args(["conductor", "sign", "--cert", s(&dir.join("conductor/conductor_crt.pem"))])
        .args(["--key", s(&dir.join("conductor/conductor_key.pem"))])
        .args(["--classification", s(&class), "--expires-in", "1h", "--format", "puppet-yaml"])
        .args(["--out", s(out), "--certname", certname])
        .output()
        .unwrap());
}

/// The issuer's subject of a PEM certificate file (openssl's one-line form).
pub fn issuer_of(cert: &Path) -> String {
    require("openssl", "openssl");
    let o = Command::new("openssl").args(["x509", "-in", s(cert), "-noout", "-issuer"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}
