//! `vouch serve` with real Puppet agents (Debian puppet-agent 7.23) and with vouch's
//! own HTTPS client: bootstrap, refusal, revocation, renewal, access control, limits,
//! signals, and 200 agents at once. Every server is started on a free loopback port
//! in a scratch directory and stopped by PID (Drop), whatever happens.

mod common;

use common::agents::{csr_for, p256};
use common::processes::{ended_within, wait_within, waits_for_flock, Wait};
use common::*;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vouch::serve::client::{tls_config, Client, Response};

const CLASSIFICATION: &str = "classes:\n  - role::web\nparameters:\n  tier: gold\nenvironment: production\n";

/// A running `vouch serve`; SIGTERM then SIGKILL on drop.
struct Server {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    banner: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_env(dir, extra, &[])
    }

    /// [`Server::start`] with these environment variables set.
    fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let log = dir.with_extension("log");
        let (child, banner, port) = start_serve(serve_cmd(dir).args(extra).envs(env.iter().copied()), &log);
        Server { child: Some(child), port, dir: dir.to_path_buf(), log, banner }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's PID.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {l}")))
            .collect()
    }

    /// Waits until the log has a line for which `f` holds (10 s at most).
    fn wait_log(&self, what: &str, f: impl Fn(&serde_json::Value) -> bool) {
        Wait::up_to(Duration::from_secs(10))
            .every(Duration::from_millis(50))
            .showing(|| std::fs::read_to_string(&self.log).unwrap())
            .until(&format!("a log line for {what}"), || self.log().iter().any(&f));
    }

    /// Edits the policy and reloads it (SIGHUP), waiting until the server says it did.
    fn set_policy(&self, edit: impl Fn(&str) -> String) {
        let path = self.dir.join("policy.toml");
        let before = self.log().iter().filter(|v| v["event"] == "reload" && v["ok"] == true).count();
        std::fs::write(&path, edit(&std::fs::read_to_string(&path).unwrap())).unwrap();
        self.signal(libc::SIGHUP);
        Wait::up_to(Duration::from_secs(10)).every(Duration::from_millis(50)).until("the policy reloaded", || {
            self.log().iter().filter(|v| v["event"] == "reload" && v["ok"] == true).count() != before
        });
    }

    /// SIGTERM; returns whether it exited 0 within 15 s.
    fn stop(mut self) -> bool {
        self.signal(libc::SIGTERM);
        let mut child = self.child.take().unwrap();
        if let Some(st) = ended_within(&mut child, Duration::from_secs(15)) {
            return st.success();
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    fn ca_bundle(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca/ca_bundle.pem")).unwrap()
    }

    fn client(&self, identity: Option<(&Path, &Path)>) -> Client {
        let id = identity.map(|(c, k)| (std::fs::read(c).unwrap(), std::fs::read(k).unwrap()));
        let config = tls_config(&self.ca_bundle(), id.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()))).unwrap();
        Client::new(config, self.addr(), "localhost").unwrap()
    }

    fn admin(&self) -> Client {
        self.client(Some((&self.dir.join("admin/admin_crt.pem"), &self.dir.join("admin/admin_key.pem"))))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's PID.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(200));
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `vouch conductor sign` with the conductor credentials the first run created.
fn conductor_sign(dir: &Path, certname: Option<&str>, classification: &str, out: &Path) {
    let class = out.with_extension("classification.yaml");
    std::fs::write(&class, classification).unwrap();
    let mut c = vouch();
    c.args(["conductor", "sign", "--cert", s(&dir.join("conductor/conductor_crt.pem"))])
        .args(["--key", s(&dir.join("conductor/conductor_key.pem"))])
        .args(["--classification", s(&class), "--expires-in", "1h", "--format", "puppet-yaml", "--out", s(out)]);
    if let Some(n) = certname {
        c.args(["--certname", n]);
    }
    ok(&c.output().unwrap());
}

/// A Puppet agent with its own confdir/ssldir under `base/certname`, pointed at the server.
fn agent(base: &Path, server: &Server, certname: &str, attributes: Option<&Path>, extra: &str) -> PathBuf {
    let d = base.join(certname);
    std::fs::create_dir_all(d.join("etc")).unwrap();
    let mut conf = format!(
        "[main]\nserver = localhost\nca_server = localhost\nserverport = {}\ncertname = {certname}\n",
        server.port
    );
    for (k, v) in ["ssldir", "vardir", "rundir", "logdir", "publicdir", "codedir"]
        .iter()
        .zip(["ssl", "var", "run", "log", "public", "code"])
    {
        conf.push_str(&format!("{k} = {}\n", d.join(v).display()));
    }
    if let Some(a) = attributes {
        conf.push_str(&format!("csr_attributes = {}\n", a.display()));
    }
    conf.push_str(extra);
    std::fs::write(d.join("etc/puppet.conf"), conf).unwrap();
    d.join("etc")
}

fn puppet(confdir: &Path, args: &[&str]) -> Output {
    require("puppet", "puppet-agent");
    Command::new("puppet").args(args).args(["--confdir", s(confdir)]).output().unwrap()
}

fn bootstrap(confdir: &Path) -> (Output, Duration) {
    let t = Instant::now();
    let o = puppet(confdir, &["ssl", "bootstrap", "--waitforcert", "0"]);
    (o, t.elapsed())
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn openssl(args: &[&str]) -> Output {
    require("openssl", "openssl");
    Command::new("openssl").args(args).output().unwrap()
}

fn inventory(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ca/inventory.txt")).unwrap().lines().map(str::to_string).collect()
}

fn list_json(dir: &Path) -> Vec<serde_json::Value> {
    let out = ok(&vouch().args(["--dir", s(dir), "list", "--all", "--format", "json"]).output().unwrap());
    serde_json::from_str::<Vec<serde_json::Value>>(&out).unwrap()
}

fn serial_of(cert: &Path) -> String {
    let out = ok(&openssl(&["x509", "-in", s(cert), "-noout", "-serial"]));
    out.trim().trim_start_matches("serial=").trim_start_matches('0').to_ascii_lowercase()
}

#[test]
fn first_run_then_a_real_agent_bootstraps_with_its_classification_and_revocation_reaches_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    // The banner says where everything is and what an agent needs.
    for want in [
        "created a new CA",
        "root CA fingerprint (SHA-256)",
        "conductor credentials:",
        "policy:",
        "ca_server = localhost",
        "ca_fingerprint = ",
    ] {
        assert!(server.banner.contains(want), "banner lacks {want:?}:\n{}", server.banner);
    }
    for key in [
        "ca/root_key.pem",
        "ca/ca_key.pem",
        "conductor/conductor_key.pem",
        "admin/admin_key.pem",
        "server/server_key.pem",
    ] {
        assert_eq!(mode(&dir.join(key)), 0o600, "{key}");
    }
    // The conductor vouches for web01; a real agent bootstraps with ca_fingerprint checked.
    let attrs = tmp.path().join("web01.yaml");
    conductor_sign(&dir, Some(CERTNAME), CLASSIFICATION, &attrs);
    let fp = server.banner.lines().find_map(|l| l.trim().strip_prefix("ca_fingerprint = ")).unwrap().to_string();
    let conf = agent(tmp.path(), &server, CERTNAME, Some(&attrs), &format!("ca_fingerprint = {fp}\n"));
    let (o, took) = bootstrap(&conf);
    let out = text(&o);
    assert!(o.status.success(), "{out}\n{}", std::fs::read_to_string(&server.log).unwrap());
    assert!(out.contains("Verified CA bundle with digest"), "{out}");
    eprintln!("puppet ssl bootstrap against vouch serve took {:.2} s", took.as_secs_f64());
    // The TLS 1.3 stall measured against Puppet Server 7.9.5 costs 30 s; this catches it, not noise.
    assert!(took < Duration::from_secs(20), "bootstrap took {took:?}: the keep-alive stall is back?");

    // The certificate carries the classification, chains to the root, and vouch classifies from it.
    let cert = conf.parent().unwrap().join(format!("ssl/certs/{CERTNAME}.pem"));
    let b64 = vouch::vouching::classification::Classification::from_yaml(CLASSIFICATION, 65536).unwrap().to_base64();
    let x = ok(&openssl(&["x509", "-in", s(&cert), "-noout", "-text"]));
    assert!(x.contains("1.3.6.1.4.1.34380.2.5") && x.contains("1.3.6.1.4.1.34380.1.2.5"), "{x}");
    assert_eq!(x.matches(&b64).count(), 2, "{x}");
    let ca_pem = conf.parent().unwrap().join("ssl/certs/ca.pem");
    ok(&openssl(&["verify", "-CAfile", s(&dir.join("ca/root_crt.pem")), "-untrusted", s(&ca_pem), s(&cert)]));
    let enc = ok(&vouch().args(["--dir", s(&dir), "enc", CERTNAME]).output().unwrap());
    assert!(enc.contains("role::web") && enc.contains("gold"), "{enc}");
    server
        .wait_log("the grant", |v| v["event"] == "decision" && v["certname"] == CERTNAME && v["verdict"] == "granted");
    ok(&puppet(&conf, &["ssl", "verify"]));

    // Revocation: the agent's next CRL download lists it and Puppet refuses the certificate.
    let serial = serial_of(&cert);
    ok(&vouch().args(["--dir", s(&dir), "revoke", CERTNAME]).output().unwrap());
    let mut c = std::fs::read_to_string(conf.join("puppet.conf")).unwrap();
    c.push_str("crl_refresh_interval = 1s\n");
    std::fs::write(conf.join("puppet.conf"), c).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let (o, _) = bootstrap(&conf);
    assert!(!o.status.success() && text(&o).contains("is revoked"), "{}", text(&o));
    let crl = ok(&openssl(&["crl", "-in", s(&conf.parent().unwrap().join("ssl/crl.pem")), "-noout", "-text"]));
    assert!(
        crl.to_ascii_lowercase().replace(':', "").contains(&serial),
        "serial {serial} not on the agent's CRL:\n{crl}"
    );
    let v = puppet(&conf, &["ssl", "verify"]);
    assert!(!v.status.success() && text(&v).contains("revoked"), "{}", text(&v));

    assert!(server.stop(), "vouch serve did not exit 0 on SIGTERM");
}

/// Replaces a quoted value in vouch's csr_attributes.yaml.
/// A first-run server in `base/vouch` and a real agent bootstrapped against it with
/// vouched attributes for CERTNAME: (data directory, server, agent's puppet.conf, its ssldir).
fn bootstrapped(base: &Path) -> (PathBuf, Server, PathBuf, PathBuf) {
    let dir = base.join("vouch");
    let server = Server::start(&dir, &[]);
    let attrs = base.join("a.yaml");
    conductor_sign(&dir, Some(CERTNAME), CLASSIFICATION, &attrs);
    let conf = agent(base, &server, CERTNAME, Some(&attrs), "");
    assert!(bootstrap(&conf).0.status.success());
    let ssl = conf.parent().unwrap().join("ssl");
    (dir, server, conf, ssl)
}

fn tamper_yaml(path: &Path, key: &str, f: impl Fn(&str) -> String) {
    let yaml = std::fs::read_to_string(path).unwrap();
    let mut hit = false;
    let out: Vec<String> = yaml
        .lines()
        .map(|l| {
            let prefix = format!("  '{key}': '");
            match l.strip_prefix(&prefix).and_then(|r| r.strip_suffix('\'')) {
                Some(v) => {
                    hit = true;
                    format!("{prefix}{}'", f(v))
                }
                None => l.to_string(),
            }
        })
        .collect();
    assert!(hit, "{key} not in {yaml}");
    std::fs::write(path, out.join("\n") + "\n").unwrap();
}

#[test]
fn refused_agents_get_no_certificate_and_their_requests_stay_pending_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let before = inventory(&dir).len();
    let other = vouch::vouching::classification::Classification::from_yaml("classes:\n  - role::db\n", 65536)
        .unwrap()
        .to_base64();
    // (certname, how the attributes were spoiled, the reason vouch must give)
    let cases: &[(&str, &str, &str)] = &[
        ("web01.example.test", "classification", "signature-invalid"),
        ("web02.example.test", "other-certname", "certname-not-vouched"),
        ("web03.example.test", "expiry", "signature-invalid"),
    ];
    for (name, how, reason) in cases {
        let attrs = tmp.path().join(format!("{name}.yaml"));
        let vouched_for = if *how == "other-certname" { "db01.example.test" } else { name };
        conductor_sign(&dir, Some(vouched_for), CLASSIFICATION, &attrs);
        match *how {
            "classification" => {
                tamper_yaml(&attrs, "1.3.6.1.4.1.34380.2.5", |_| other.clone());
                tamper_yaml(&attrs, "1.3.6.1.4.1.34380.1.2.5", |_| other.clone());
            }
            "expiry" => tamper_yaml(&attrs, "1.3.6.1.4.1.34380.2.3", |_| "2099-01-01T00:00:00Z".into()),
            _ => {}
        }
        let conf = agent(tmp.path(), &server, name, Some(&attrs), "");
        let (o, _) = bootstrap(&conf);
        let out = text(&o);
        assert!(!o.status.success() && out.contains("Couldn't fetch certificate from CA server"), "{name}: {out}");
        assert!(!conf.parent().unwrap().join(format!("ssl/certs/{name}.pem")).exists());
        let entry =
            list_json(&dir).into_iter().find(|e| e["name"] == *name).unwrap_or_else(|| panic!("{name} not listed"));
        assert_eq!(entry["state"], "requested", "{entry}");
        assert!(entry["reasons"].to_string().contains(reason), "{name}: {entry}");
        server.wait_log("the refusal", |v| {
            v["event"] == "decision"
                && v["certname"] == *name
                && v["verdict"] == "refused"
                && v["reasons"].to_string().contains(reason)
        });
        // An administrator sees the request and its reasons; the agent sees nothing of them.
        let st = server.admin().request("GET", &format!("/puppet-ca/v1/certificate_status/{name}"), None, b"").unwrap();
        assert_eq!(st.status, 200, "{}", st.text());
        let v: serde_json::Value = serde_json::from_slice(&st.body).unwrap();
        assert_eq!(v["state"], "requested");
        assert!(v["reasons"].to_string().contains(reason), "{v}");
    }
    // A replay: web04's attributes, used once, then presented by another agent (another key).
    let attrs = tmp.path().join("web04.yaml");
    conductor_sign(&dir, Some("web04.example.test"), CLASSIFICATION, &attrs);
    let first = agent(tmp.path(), &server, "web04.example.test", Some(&attrs), "");
    assert!(bootstrap(&first).0.status.success());
    let thief = agent(&tmp.path().join("thief"), &server, "web04.example.test", Some(&attrs), "");
    let (o, _) = bootstrap(&thief);
    assert!(!o.status.success(), "{}", text(&o));
    // Nothing was issued for any refused agent: the inventory grew by web04 only.
    let inv = inventory(&dir);
    assert_eq!(inv.len(), before + 1, "{inv:?}");
    assert!(inv.iter().all(|l| !l.contains("web01") && !l.contains("web02") && !l.contains("web03")), "{inv:?}");
    assert!(server.stop());
}

#[test]
fn renewal_keeps_the_classification_and_only_the_current_certificate_renews_itself() {
    require("ruby", "ruby puppet-agent");
    let tmp = tempfile::tempdir().unwrap();
    let (dir, server, conf, ssl) = bootstrapped(tmp.path());
    let cert = ssl.join(format!("certs/{CERTNAME}.pem"));
    let old = std::fs::read(&cert).unwrap();
    let old_serial = serial_of(&cert);

    // Renew with Puppet's own HTTP client and the agent's SSL context (mutual TLS).
    let renew = |conf: &Path| {
        Command::new("ruby").arg(root().join("tests/support/puppet-renew.rb")).arg(conf).output().unwrap()
    };
    // Not right after issuance under the default policy (every renewal adds a CRL entry).
    let o = renew(&conf);
    assert!(!o.status.success() && text(&o).contains("status 429"), "{}", text(&o));
    server.set_policy(|p| p.replace("renewal_min_age = \"1h\"", "renewal_min_age = \"0s\""));
    let o = renew(&conf);
    assert!(o.status.success(), "{}\n{}", text(&o), std::fs::read_to_string(&server.log).unwrap());
    let new_serial = serial_of(&cert);
    assert_ne!(new_serial, old_serial);
    // Same key, same classification, and Puppet accepts the new certificate.
    let pubkey = |pem: &Path| ok(&openssl(&["x509", "-in", s(pem), "-noout", "-pubkey"]));
    let old_path = tmp.path().join("old.pem");
    std::fs::write(&old_path, &old).unwrap();
    assert_eq!(pubkey(&cert), pubkey(&old_path));
    let b64 = vouch::vouching::classification::Classification::from_yaml(CLASSIFICATION, 65536).unwrap().to_base64();
    assert_eq!(ok(&openssl(&["x509", "-in", s(&cert), "-noout", "-text"])).matches(&b64).count(), 2);
    ok(&puppet(&conf, &["ssl", "verify"]));
    server.wait_log("the renewal", |v| v["event"] == "renewed" && v["old_serial"] == old_serial.as_str());

    // The superseded certificate can no longer renew (nor be used at all).
    let mut stale = server.client(Some((&old_path, &ssl.join(format!("private_keys/{CERTNAME}.pem")))));
    let r = stale.request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    // Without a client certificate there is nothing to renew.
    let r = server.client(None).request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    // The old serial is on the CRL (superseded): a certname never has two valid certificates.
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    assert!(crl.to_ascii_lowercase().replace(':', "").contains(&old_serial), "{crl}");
    assert!(server.stop());
}

#[test]
fn admin_endpoints_need_an_admin_certificate_and_a_node_renews_only_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, server, _, ssl) = bootstrapped(tmp.path());
    let node_id = (ssl.join(format!("certs/{CERTNAME}.pem")), ssl.join(format!("private_keys/{CERTNAME}.pem")));
    let mut node = server.client(Some((&node_id.0, &node_id.1)));
    let mut anon = server.client(None);
    let mut admin = server.admin();
    let status = format!("/puppet-ca/v1/certificate_status/{CERTNAME}");
    let revoke_body = br#"{"desired_state":"revoked"}"#;
    for (who, c) in [("anonymous", &mut anon), ("node", &mut node)] {
        for (m, path, body) in [
            ("GET", status.as_str(), &b""[..]),
            ("PUT", status.as_str(), &revoke_body[..]),
            ("DELETE", status.as_str(), &b""[..]),
            ("GET", "/puppet-ca/v1/certificate_statuses/any?state=signed", &b""[..]),
        ] {
            let r = c.request(m, path, Some("application/json"), body).unwrap();
            assert_eq!(r.status, 403, "{who} {m} {path}: {}", r.text());
            assert!(r.header("x-puppet-version").is_some());
        }
    }
    // The bootstrap endpoints are open.
    let r = anon.request("GET", "/puppet-ca/v1/certificate/ca", None, b"").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, server.ca_bundle().as_slice()));
    let r = anon.request("GET", &format!("/puppet-ca/v1/certificate/{CERTNAME}"), None, b"").unwrap();
    assert_eq!(r.status, 200);
    let r = anon.request("GET", "/puppet-ca/v1/certificate/nobody.example.test", None, b"").unwrap();
    assert_eq!((r.status, r.text()), (404, "Could not find certificate nobody.example.test".to_string()));
    // The CRL: 304 when the agent's copy is current.
    let r = anon.request("GET", "/puppet-ca/v1/certificate_revocation_list/ca", None, b"").unwrap();
    assert_eq!(r.status, 200);
    let lm = r.header("last-modified").unwrap().to_string();
    let mut conn = server.client(None);
    let r = conn_get_if_modified(&mut conn, "/puppet-ca/v1/certificate_revocation_list/ca", &lm);
    assert_eq!(r.status, 304);
    // Compressed for a client that asks, as Puppet's agents do: the same bytes once inflated.
    let crl_before = crl_both_ways(&mut conn);
    // expirations: any known client, not anonymous.
    assert_eq!(anon.request("GET", "/puppet-ca/v1/expirations", None, b"").unwrap().status, 403);
    let r = node.request("GET", "/puppet-ca/v1/expirations", None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("ca-certs"), "{}", r.text());

    // The administrator sees, revokes and cleans.
    let r = admin.request("GET", &status, None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["state"], "signed");
    assert_eq!(v["dns_alt_names"], serde_json::json!([format!("DNS:{CERTNAME}")]));
    let r = admin.request("GET", "/puppet-ca/v1/certificate_statuses/any?state=signed", None, b"").unwrap();
    let all: Vec<serde_json::Value> = serde_json::from_slice(&r.body).unwrap();
    assert!(all.iter().any(|v| v["name"] == CERTNAME), "{all:?}");
    let r = admin.request("PUT", &status, Some("application/json"), revoke_body).unwrap();
    assert_eq!(r.status, 204, "{}", r.text());
    // The CRL handed out from memory is the new one at once, compressed or not.
    let crl_after = crl_both_ways(&mut conn);
    assert_ne!(crl_before, crl_after, "the revocation's CRL is served, not the cached one");
    // The revoked node is refused at once, even for renewal (no CRL needed).
    let r = node.request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    let r = admin.request("GET", &status, None, b"").unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["state"], "revoked");
    assert_eq!(admin.request("DELETE", &status, None, b"").unwrap().status, 204);
    assert_eq!(admin.request("GET", &status, None, b"").unwrap().status, 404);
    let r = admin.request("PUT", &status, Some("application/json"), br#"{"desired_state":"bogus"}"#).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    // Every admin action is logged with who did it.
    server.wait_log("the admin revoke", |v| {
        v["event"] == "admin" && v["client"] == "vouch-admin" && v["action"] == "revoked"
    });
    server.wait_log("a denial", |v| v["event"] == "denied" && v["client"] == CERTNAME);
    assert!(server.stop());
}

/// The CRLs as served plain and gzip-compressed (`Accept-Encoding` as Puppet's agents send
/// it): checked to be the same document, returned plain.
fn crl_both_ways(c: &mut Client) -> Vec<u8> {
    let path = "/puppet-ca/v1/certificate_revocation_list/ca";
    let plain = c.request("GET", path, None, b"").unwrap();
    assert_eq!((plain.status, plain.header("content-encoding")), (200, None));
    let gz = c
        .request_with_headers("GET", path, &[("Accept-Encoding", "gzip;q=1.0,deflate;q=0.6,identity;q=0.3")], b"")
        .unwrap();
    assert_eq!(
        (gz.status, gz.header("content-encoding"), gz.header("vary")),
        (200, Some("gzip"), Some("Accept-Encoding"))
    );
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.body.as_slice()), &mut inflated).unwrap();
    assert_eq!(inflated, plain.body);
    // q=0 refuses gzip.
    let no = c.request_with_headers("GET", path, &[("Accept-Encoding", "gzip;q=0, identity")], b"").unwrap();
    assert_eq!((no.status, no.header("content-encoding"), &no.body), (200, None, &plain.body));
    plain.body
}

fn conn_get_if_modified(c: &mut Client, path: &str, since: &str) -> Response {
    c.request_with_headers("GET", path, &[("If-Modified-Since", since)], b"").unwrap()
}

#[test]
fn limits_bad_requests_slow_clients_and_signals() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &["--max-body", "8192", "--header-timeout", "2", "--body-timeout", "2"]);
    let mut c = server.client(None);
    let put = |c: &mut Client, name: &str, body: &[u8]| {
        c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), body).unwrap()
    };
    let r = put(&mut c, "big.example.test", &vec![b'A'; 9000]);
    assert_eq!(r.status, 413, "{}", r.text());
    let mut c = server.client(None);
    assert_eq!(put(&mut c, "Upper.example.test", b"x").status, 400);
    assert_eq!(put(&mut c, "empty.example.test", b"").status, 400);
    let r = put(
        &mut c,
        "junk.example.test",
        b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(c.request("GET", "/puppet-ca/v1/certificate/%zz", None, b"").unwrap().status, 400);
    assert_eq!(c.request("GET", "/puppet-ca/v1/nothing", None, b"").unwrap().status, 404);
    assert_eq!(c.request("DELETE", "/puppet-ca/v1/certificate/ca", None, b"").unwrap().status, 405);
    let r = c.request("GET", "/puppet-ca/v1/certificate/..%2F..%2Fetc%2Fpasswd", None, b"").unwrap();
    assert_eq!(r.status, 404, "{}", r.text());

    // Slow clients: a TCP connection that never starts TLS, and 50 TLS connections that
    // never send a request, are closed by the server while others are served.
    let mut silent = std::net::TcpStream::connect(server.addr()).unwrap();
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let mut idle = Vec::new();
    for _ in 0..50 {
        let tcp = std::net::TcpStream::connect(server.addr()).unwrap();
        let conn =
            rustls::ClientConnection::new(config.clone(), rustls_pki_types::ServerName::try_from("localhost").unwrap())
                .unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).unwrap();
        }
        idle.push(tls);
    }
    let r = server.client(None).request("GET", "/puppet-ca/v1/certificate/ca", None, b"").unwrap();
    assert_eq!(r.status, 200);
    silent.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let t = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(silent.read(&mut buf).unwrap_or(0), 0, "the silent connection got data");
    assert!(t.elapsed() < Duration::from_secs(14), "the silent connection was never closed");
    for tls in &mut idle {
        tls.sock.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut b = [0u8; 16];
        // EOF (or a TLS close) within the timeout, never a hang: a read timeout is a failure.
        match tls.read(&mut b) {
            Ok(0) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("an idle connection was never closed")
            }
            Err(_) => {}
            Ok(n) => panic!("an idle connection got {n} bytes"),
        }
    }

    // SIGHUP: a broken policy is refused and the old one stays; a good one takes effect.
    let policy = dir.join("policy.toml");
    let good = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, "this is not toml [").unwrap();
    server.signal(libc::SIGHUP);
    server.wait_log("the failed reload", |v| v["event"] == "reload" && v["ok"] == false);
    let attrs = tmp.path().join("v1.yaml");
    conductor_sign(&dir, None, CLASSIFICATION, &attrs);
    let csr1 = make_csr(tmp.path(), "v1a.example.test", &attrs);
    assert_eq!(put(&mut server.client(None), "v1a.example.test", &csr1).status, 200);
    let r = server.client(None).request("GET", "/puppet-ca/v1/certificate/v1a.example.test", None, b"").unwrap();
    assert_eq!(r.status, 200, "version 1 is accepted by the default policy");
    std::fs::write(&policy, good.replace("versions = [1, 2]", "versions = [2]")).unwrap();
    server.signal(libc::SIGHUP);
    server.wait_log("the reload", |v| v["event"] == "reload" && v["ok"] == true);
    let attrs = tmp.path().join("v1b.yaml");
    conductor_sign(&dir, None, CLASSIFICATION, &attrs);
    let csr2 = make_csr(tmp.path(), "v1b.example.test", &attrs);
    assert_eq!(put(&mut server.client(None), "v1b.example.test", &csr2).status, 200);
    let r = server.client(None).request("GET", "/puppet-ca/v1/certificate/v1b.example.test", None, b"").unwrap();
    assert_eq!(r.status, 404, "version 1 must be refused after the reload");
    server.wait_log("the version refusal", |v| {
        v["certname"] == "v1b.example.test" && v["reasons"].to_string().contains("version-unsupported")
    });
    // SIGTERM: graceful, exit 0, logged.
    let log = server.log.clone();
    assert!(server.stop());
    assert!(std::fs::read_to_string(log).unwrap().contains("\"event\":\"stopped\""));
}

/// `vouch csr` for a certname from an attributes file; returns the PEM.
fn make_csr(base: &Path, certname: &str, attrs: &Path) -> Vec<u8> {
    let (key, csr) = (base.join(format!("{certname}.key")), base.join(format!("{certname}.csr")));
    ok(&vouch()
        .args(["csr", "--certname", certname, "--attributes", s(attrs), "--key-out", s(&key), "--csr-out", s(&csr)])
        .output()
        .unwrap());
    std::fs::read(csr).unwrap()
}

/// Version 2 attributes for `certname`, made with the library (fast).
fn vouched_attributes(dir: &Path, certname: &str) -> vouch::vouching::attrs::CsrAttributes {
    common::agents::vouched(dir, certname, CLASSIFICATION)
}

fn vm_hwm_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn two_hundred_agents_at_once_each_get_exactly_one_certificate() {
    const AGENTS: usize = 200;
    const THIEVES: usize = 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let before = inventory(&dir).len();
    // Each agent: its own key, its own vouched CSR. Thieves present agents' attributes
    // with their own keys, racing them (version 2 binds the certname, so the same name).
    let mut work: Vec<(String, rcgen::KeyPair, Vec<u8>)> = Vec::new();
    for i in 0..AGENTS {
        let name = format!("node{i:03}.example.test");
        let attrs = vouched_attributes(&dir, &name);
        let key = p256();
        let csr = csr_for(&name, &attrs, &key);
        work.push((name.clone(), key, csr));
        if i < THIEVES {
            let thief = p256();
            let csr = csr_for(&name, &attrs, &thief);
            work.push((name.clone(), thief, csr));
        }
    }
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(work.len()));
    let started = Instant::now();
    let handles: Vec<_> = work
        .into_iter()
        .map(|(name, key, csr)| {
            let (config, barrier, addr) = (config.clone(), barrier.clone(), server.addr());
            std::thread::spawn(move || {
                let mut c = Client::new(config, addr, "localhost").unwrap();
                barrier.wait();
                let t = Instant::now();
                let put = c
                    .request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr)
                    .unwrap();
                let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
                (name, key, put, get, t.elapsed(), c.connects)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let wall = started.elapsed();
    let peak_kb = vm_hwm_kb(server.pid());
    let mut latencies: Vec<Duration> = results.iter().map(|r| r.4).collect();
    latencies.sort();
    eprintln!(
        "{} agents at once (PUT + GET each on one kept-alive TLS connection): {:.2} s, {:.0} certificates/s, \
         p50 {:?}, p99 {:?}, server peak RSS {} MB",
        results.len(),
        wall.as_secs_f64(),
        AGENTS as f64 / wall.as_secs_f64(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100],
        peak_kb / 1024
    );
    // Every name ends with exactly one certificate, for the key of whoever asked first;
    // the other one of a racing pair is refused (already signed, or attributes replayed).
    let mut winners: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (name, key, put, get, _, connects) in &results {
        assert_eq!(*connects, 1, "{name}: the connection was not kept alive");
        assert!(put.status == 200 || put.status == 400, "{name}: PUT {} {}", put.status, put.text());
        assert_eq!(get.status, 200, "{name}: GET {}", get.text());
        let (_, der) = vouch::encoding::pem::find(&get.body, &["CERTIFICATE"]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let mine = cert.public_key().raw == rcgen::PublicKeyData::subject_public_key_info(key).as_slice();
        *winners.entry(name.as_str()).or_default() += usize::from(mine);
    }
    assert_eq!(winners.len(), AGENTS);
    for (name, n) in &winners {
        assert_eq!(*n, 1, "{name}: {n} certificates for its requesters' keys");
    }
    let granted = AGENTS;
    let inv = inventory(&dir);
    assert_eq!(inv.len() - before, granted, "inventory: one line per issued certificate");
    let serials: std::collections::BTreeSet<&str> = inv.iter().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(serials.len(), inv.len(), "a serial was reused");
    let list = list_json(&dir);
    let signed = list
        .iter()
        .filter(|e| e["state"] == "signed" && e["name"].as_str().is_some_and(|n| n.starts_with("node")))
        .count();
    assert_eq!(signed, granted);
    assert!(std::fs::read_dir(dir.join("ca/pending")).unwrap().next().is_none(), "pending/ not empty");
    // openssl checks a few of them.
    for name in ["node000.example.test", "node100.example.test", "node199.example.test"] {
        let p = dir.join(format!("ca/signed/{name}.pem"));
        ok(&openssl(&[
            "verify",
            "-CAfile",
            s(&dir.join("ca/root_crt.pem")),
            "-untrusted",
            s(&dir.join("ca/ca_crt.pem")),
            s(&p),
        ]));
    }
    assert!(server.stop());
}

#[test]
fn an_admin_revocation_racing_a_renewal_is_never_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    server.set_policy(|p| p.replace("renewal_min_age = \"1h\"", "renewal_min_age = \"0s\""));
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    for round in 0..10 {
        let name = format!("race{round}.example.test");
        let key = p256();
        let csr = csr_for(&name, &vouched_attributes(&dir, &name), &key);
        let mut c = Client::new(config.clone(), server.addr(), "localhost").unwrap();
        assert_eq!(
            c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap().status,
            200
        );
        let cert = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        assert_eq!(cert.status, 200);
        let (cert_path, key_path) = (tmp.path().join(format!("{name}.pem")), tmp.path().join(format!("{name}.key")));
        std::fs::write(&cert_path, &cert.body).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let mut node = server.client(Some((&cert_path, &key_path)));
        let mut admin = server.admin();
        let status = format!("/puppet-ca/v1/certificate_status/{name}");
        let renewer = std::thread::spawn(move || {
            node.request("POST", "/puppet-ca/v1/certificate_renewal", Some("text/plain"), b"").unwrap().status
        });
        let revoked =
            admin.request("PUT", &status, Some("application/json"), br#"{"desired_state":"revoked"}"#).unwrap();
        let renewed = renewer.join().unwrap();
        assert_eq!(revoked.status, 204, "{}", revoked.text());
        assert!(renewed == 200 || renewed == 403 || renewed == 409, "renewal answered {renewed}");
        // Whatever the order, the name ends with no valid certificate: the revocation
        // applied to the certificate that was current when it ran, and a renewal that
        // came first was revoked with it.
        let v: serde_json::Value =
            serde_json::from_slice(&admin.request("GET", &status, None, b"").unwrap().body).unwrap();
        assert_eq!(v["state"], "revoked", "round {round} (renewal {renewed}): {v}");
        let r = server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        assert_eq!(r.status, 404, "round {round}: a certificate is still served");
    }
    assert!(server.stop());
}

#[test]
fn pending_requests_do_not_leak_good_attributes_nor_hide_signed_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let put = |name: &str, csr: &[u8]| {
        server.client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, csr).unwrap()
    };
    let get_cert = |name: &str| {
        server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap()
    };
    // The victim's CSR carries good attributes but also asks for pp_role: refused, kept pending.
    let name = "web07.example.test";
    let attrs = vouched_attributes(&dir, name);
    let mut with_role = attrs.clone();
    with_role.extension_requests.insert("1.3.6.1.4.1.34380.1.1.13".into(), "webserver".into());
    let victim = p256();
    assert_eq!(put(name, &csr_for(name, &with_role, &victim)).status, 200);
    assert_eq!(get_cert(name).status, 404);
    // Nobody but an administrator reads a pending request back.
    let r =
        server.client(None).request("GET", &format!("/puppet-ca/v1/certificate_request/{name}"), None, b"").unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    let r = server.admin().request("GET", &format!("/puppet-ca/v1/certificate_request/{name}"), None, b"").unwrap();
    assert_eq!(r.status, 200);
    // Whoever copied the attributes anyway cannot use them with another key...
    let thief = p256();
    assert_eq!(put(name, &csr_for(name, &attrs, &thief)).status, 200);
    assert_eq!(get_cert(name).status, 404, "the thief got a certificate");
    server.wait_log("the replay refusal", |v| {
        v["certname"] == name && v["verdict"] == "refused" && v["reasons"].to_string().contains("attributes-replayed")
    });
    // ...while the victim, with the same key and its CSR mended, is granted.
    assert_eq!(put(name, &csr_for(name, &attrs, &victim)).status, 200);
    let r = get_cert(name);
    assert_eq!(r.status, 200);
    let (_, der) = vouch::encoding::pem::find(&r.body, &["CERTIFICATE"]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert_eq!(cert.public_key().raw, rcgen::PublicKeyData::subject_public_key_info(&victim).as_slice());

    // A junk request for a signed name is answered as Puppet does and kept nowhere: the
    // node stays "signed" for administrators.
    let r = put(name, &make_csr(tmp.path(), name, &tmp.path().join("empty.yaml").tap_write("custom_attributes: {}\n")));
    assert_eq!(r.status, 400, "{}", r.text());
    let st = server.admin().request("GET", &format!("/puppet-ca/v1/certificate_status/{name}"), None, b"").unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&st.body).unwrap()["state"], "signed");
    // The service's and the administrator's names are not for nodes, vouched or not.
    let before = inventory(&dir).len();
    for reserved in ["vouch-admin", "localhost"] {
        let r = put(reserved, &csr_for(reserved, &vouched_attributes(&dir, reserved), &p256()));
        assert_eq!(r.status, 400, "{reserved}: {}", r.text());
    }
    assert_eq!(inventory(&dir).len(), before, "a reserved name was issued to a node");
    // Large unvouched bodies are not kept (anyone could fill the disk with them); small
    // ones are, for the operator to see.
    let junk_attrs = tmp
        .path()
        .join("junk.yaml")
        .tap_write(&format!("custom_attributes:\n  '1.3.6.1.4.1.34380.2.5': '{}'\n", "A".repeat(20_000)));
    assert_eq!(put("big.example.test", &make_csr(tmp.path(), "big.example.test", &junk_attrs)).status, 200);
    let small_attrs =
        tmp.path().join("small.yaml").tap_write("custom_attributes:\n  '1.3.6.1.4.1.34380.2.5': 'AAAA'\n");
    assert_eq!(put("small.example.test", &make_csr(tmp.path(), "small.example.test", &small_attrs)).status, 200);
    let names: Vec<String> = list_json(&dir).iter().filter_map(|e| e["name"].as_str().map(str::to_string)).collect();
    assert!(!names.contains(&"big.example.test".to_string()), "{names:?}");
    assert!(names.contains(&"small.example.test".to_string()), "{names:?}");
    assert!(server.stop());
}

trait TapWrite {
    fn tap_write(self, text: &str) -> PathBuf;
}

impl TapWrite for PathBuf {
    fn tap_write(self, text: &str) -> PathBuf {
        std::fs::write(&self, text).unwrap();
        self
    }
}

#[test]
fn a_client_that_stops_reading_or_opens_too_many_connections_is_cut_off() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(
        &dir,
        &["--connection-lifetime", "3", "--max-connections-per-address", "4", "--header-timeout", "30"],
    );
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let connect = || {
        let tcp = std::net::TcpStream::connect(server.addr()).unwrap();
        let conn =
            rustls::ClientConnection::new(config.clone(), rustls_pki_types::ServerName::try_from("localhost").unwrap())
                .unwrap();
        rustls::StreamOwned::new(conn, tcp)
    };
    // Pipelined requests, never reading an answer: the server's writes stall; the
    // connection lifetime ends it (the writer then fails instead of blocking for ever).
    let mut stalled = connect();
    let writer = std::thread::spawn(move || {
        let req = b"GET /puppet-ca/v1/certificate_revocation_list/ca HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(64);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if std::io::Write::write_all(&mut stalled, &req).is_err() {
                return Some(t.elapsed());
            }
        }
        None
    });
    let cut = writer.join().unwrap();
    assert!(cut.is_some(), "the stalled connection was never closed");
    // Four connections from this address at once are served; a fifth is closed at once.
    let mut held: Vec<_> = (0..4).map(|_| connect()).collect();
    for tls in &mut held {
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock).unwrap();
        }
    }
    let mut fifth = connect();
    let mut failed = false;
    while fifth.conn.is_handshaking() {
        if fifth.conn.complete_io(&mut fifth.sock).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "a fifth connection from one address was served");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    let r = server.client(None).request("GET", "/puppet-ca/v1/certificate/ca", None, b"").unwrap();
    assert_eq!(r.status, 200, "slots are given back");
    server.wait_log("the per-address refusal", |v| {
        v["event"] == "connection" && v["error"].to_string().contains("from this address")
    });
    assert!(server.stop());
}

#[test]
fn a_certname_too_long_for_the_store_is_refused_by_name_and_failures_name_no_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    // 232 characters: a valid DNS name, too long for the store's file names.
    let name = format!("{}.{}.{}.{}.example.test", "a".repeat(60), "b".repeat(60), "c".repeat(60), "d".repeat(30));
    let csr = csr_for(&name, &vouched_attributes(&dir, "web01.example.test"), &p256());
    let r =
        server.client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("longer than 200"), "{}", r.text());
    assert!(!r.text().contains(s(&dir)), "the answer names the data directory: {}", r.text());
    assert!(server.stop());
}

#[test]
fn a_world_writable_data_directory_is_refused_and_a_new_one_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let open = tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = vouch().args(["--dir", s(&open), "serve", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("writable by every user"), "{}", text(&o));
    assert!(!open.join("ca").exists(), "a CA was created in a world-writable directory");
    let fresh = tmp.path().join("fresh");
    let server = Server::start(&fresh, &[]);
    assert_eq!(mode(&fresh), 0o700);
    assert!(server.stop());
    // A link to a private directory is that directory (the link's own mode, 0777, is not
    // what protects it); a group-writable ca/ or a service key others may read is refused.
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&fresh, &link).unwrap();
    let server = Server::start(&link, &[]);
    assert!(server.stop());
    let refused = |what: &Path, m: u32, want: &str| {
        let before = mode(what);
        std::fs::set_permissions(what, std::fs::Permissions::from_mode(m)).unwrap();
        let o = vouch().args(["--dir", s(&fresh), "serve", "--listen", "127.0.0.1:0"]).output().unwrap();
        std::fs::set_permissions(what, std::fs::Permissions::from_mode(before)).unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(want), "{want}: {}", text(&o));
    };
    refused(&fresh.join("ca"), 0o770, "writable by its group");
    refused(&fresh.join("server/server_key.pem"), 0o644, "chmod 600");
    refused(&fresh.join("ca/signed"), 0o777, "writable by every user");
    let server = Server::start(&fresh, &[]);
    assert!(server.stop());
}

/// The group commit's promise, tested by SIGKILL under load: a certificate a node
/// received (PUT answered, GET served) is in the store after the crash — record,
/// inventory line, current certificate —, no serial twice, and every node whose
/// request was cut off gets exactly one certificate for its own key after the restart.
#[test]
fn a_server_killed_under_load_loses_no_certificate_it_handed_out() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const AGENTS: usize = 100;
    const EACH: usize = 10;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let before = inventory(&dir).len();
    let work: Vec<Vec<(String, rcgen::KeyPair, Vec<u8>)>> = (0..AGENTS)
        .map(|a| {
            (0..EACH)
                .map(|i| {
                    let name = format!("k{a:03}-{i}.example.test");
                    let attrs = vouched_attributes(&dir, &name);
                    let key = p256();
                    let csr = csr_for(&name, &attrs, &key);
                    (name, key, csr)
                })
                .collect()
        })
        .collect();
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let dead = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(std::sync::Barrier::new(AGENTS + 1));
    let handles: Vec<_> = work
        .into_iter()
        .map(|mine| {
            let (config, barrier, addr) = (config.clone(), barrier.clone(), server.addr());
            let (received, dead) = (received.clone(), dead.clone());
            std::thread::spawn(move || {
                let mut c = Client::new(config, addr, "localhost").unwrap();
                barrier.wait();
                // (name, key, CSR, the certificate received if any)
                let mut out = Vec::new();
                for (name, key, csr) in mine {
                    let mut got = None;
                    if !dead.load(Ordering::SeqCst) {
                        let path = format!("/puppet-ca/v1/certificate_request/{name}");
                        let put = c.request("PUT", &path, Some("text/plain"), &csr);
                        let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"");
                        if let (Ok(p), Ok(g)) = (put, get) {
                            assert_eq!(p.status, 200, "{name}: {}", p.text());
                            assert_eq!(g.status, 200, "{name}: {}", g.text());
                            got = Some(g.body);
                            received.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    out.push((name, key, csr, got));
                }
                out
            })
        })
        .collect();
    barrier.wait();
    while received.load(Ordering::SeqCst) < 50 {
        std::thread::yield_now();
    }
    server.signal(libc::SIGKILL);
    dead.store(true, Ordering::SeqCst);
    let results: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    drop(server);
    let handed_out: Vec<_> = results.iter().filter(|r| r.3.is_some()).collect();
    eprintln!("{} of {} certificates handed out before SIGKILL", handed_out.len(), results.len());
    assert!(handed_out.len() < results.len(), "the kill came after all the work: the test proved nothing");
    // The next process to take the lock finds the log the killed server left.
    ok(&vouch().args(["--dir", s(&dir), "crl"]).output().unwrap());
    let inv = inventory(&dir);
    let serials: std::collections::BTreeSet<&str> = inv.iter().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(serials.len(), inv.len(), "a serial twice in the inventory");
    let wal = std::fs::read_to_string(dir.join("ca/wal.log")).unwrap();
    assert_eq!(wal.lines().count(), 1, "the log was checkpointed: {wal:.200}");
    for (name, _, _, got) in &handed_out {
        let (_, der) = vouch::encoding::pem::find(got.as_ref().unwrap(), &["CERTIFICATE"]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let serial: String = cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            serials.contains(format!("0x{serial}").as_str()),
            "{name}: serial {serial} handed out, not in inventory"
        );
        let record: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("ca/serials/{}/{serial}.json", &serial[..2]))).unwrap(),
        )
        .unwrap();
        assert_eq!(record["state"], "issued", "{name}: {record}");
        assert_eq!(serial_of(&dir.join(format!("ca/signed/{name}.pem"))), serial.trim_start_matches('0'));
    }
    // After a restart, every node whose request was cut off asks again and gets its certificate.
    let server = Server::start(&dir, &[]);
    let mut c = server.client(None);
    for (name, key, csr, got) in &results {
        if got.is_some() {
            continue;
        }
        let put =
            c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), csr).unwrap();
        // 200: issued now; 400: it was issued before the kill, its answer lost.
        assert!(put.status == 200 || put.status == 400, "{name}: {} {}", put.status, put.text());
        let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        assert_eq!(get.status, 200, "{name}");
        let (_, der) = vouch::encoding::pem::find(&get.body, &["CERTIFICATE"]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(cert.public_key().raw, rcgen::PublicKeyData::subject_public_key_info(key).as_slice(), "{name}");
    }
    assert_eq!(inventory(&dir).len() - before, AGENTS * EACH, "one certificate per node, no more");
    assert!(server.stop());
}

/// Issue 13, point 10: the address is taken before anything is created; the error names it.
#[test]
fn a_busy_port_is_named_and_leaves_no_ca_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let fresh = tmp.path().join("fresh");
    let o = vouch().args(["--dir", s(&fresh), "serve", "--listen", &addr]).output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains(&format!("cannot listen on {addr}: the address is already in use")), "{out}");
    assert!(out.contains("hint:") && out.contains("--listen"), "{out}");
    assert!(!fresh.exists(), "a data directory was created for a server that could not listen");
    // An existing, empty data directory stays without a CA.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = vouch().args(["--dir", s(&empty), "serve", "--listen", &addr]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "something was created in {}", empty.display());
    drop(busy);
}

/// Issue 13, point 12: the banner makes vouch the agent's CA only (ca_server, ca_port) and
/// leaves `server` to the Puppet Server; its settings, as printed, bootstrap a real agent.
#[test]
fn the_banner_points_only_the_ca_at_vouch_and_its_settings_bootstrap_a_real_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let lines: Vec<&str> = server.banner.lines().map(str::trim_end).collect();
    let start = lines.iter().position(|l| *l == "  [main]").unwrap_or_else(|| panic!("{}", server.banner));
    let block: Vec<&str> = lines[start..].iter().take_while(|l| l.starts_with("  ")).copied().collect();
    let port = format!("  ca_port = {}", server.port);
    for want in [
        "  certname = <the name the conductor signed>",
        "  ca_server = localhost",
        &port,
        "  server = <your Puppet Server>",
    ] {
        assert!(block.contains(&want), "banner lacks {want:?}:\n{}", server.banner);
    }
    assert!(block.iter().all(|l| !l.contains("serverport")), "serverport points catalogs at vouch:\n{}", server.banner);
    assert!(server.banner.contains("then: puppet ssl bootstrap"), "{}", server.banner);
    // The block, with the placeholders filled in, is a working puppet.conf.
    let attrs = tmp.path().join("a.yaml");
    conductor_sign(&dir, Some(CERTNAME), CLASSIFICATION, &attrs);
    let d = tmp.path().join("agent");
    std::fs::create_dir_all(d.join("etc")).unwrap();
    let mut conf: String = block
        .iter()
        .map(|l| {
            l.trim()
                .replace("<the name the conductor signed>", CERTNAME)
                .replace("<your Puppet Server>", "puppet.invalid")
                + "\n"
        })
        .collect();
    for (k, v) in ["ssldir", "vardir", "rundir", "logdir", "publicdir", "codedir"]
        .iter()
        .zip(["ssl", "var", "run", "log", "public", "code"])
    {
        conf.push_str(&format!("{k} = {}\n", d.join(v).display()));
    }
    conf.push_str(&format!("csr_attributes = {}\n", attrs.display()));
    std::fs::write(d.join("etc/puppet.conf"), &conf).unwrap();
    let (o, _) = bootstrap(&d.join("etc"));
    assert!(o.status.success(), "{conf}\n{}\n{}", text(&o), std::fs::read_to_string(&server.log).unwrap());
    assert!(d.join(format!("ssl/certs/{CERTNAME}.pem")).exists());
    assert!(server.stop());
}

/// Issue 13, point 11: an agent whose certname is the service's own name (the host name, on
/// the service's host) is refused with a 400 that says what to set, and no longer downloads
/// the service's certificate to fail on it at every retry.
#[test]
fn an_agent_named_like_the_service_is_told_to_set_its_certname_and_never_gets_the_services_certificate() {
    const SVC: &str = "svc.example.test";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &["--server-name", SVC, "--server-name", "localhost"]);
    assert!(server.banner.contains("certname"), "{}", server.banner);
    // Even with attributes the conductor signed for that very name.
    let attrs = tmp.path().join("svc.yaml");
    conductor_sign(&dir, Some(SVC), CLASSIFICATION, &attrs);
    let conf = agent(tmp.path(), &server, SVC, Some(&attrs), "");
    let (o, _) = bootstrap(&conf);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(!out.contains("does not match its private key"), "the agent got the service's certificate:\n{out}");
    assert!(!conf.parent().unwrap().join(format!("ssl/certs/{SVC}.pem")).exists());
    server.wait_log("the reserved-name refusal", |v| {
        v["event"] == "decision" && v["certname"] == SVC && v["reasons"].to_string().contains("name-reserved")
    });
    // What the agent was answered: 400 with the advice; its certificate: not the service's.
    let csr = csr_for(SVC, &vouched_attributes(&dir, SVC), &p256());
    let r =
        server.client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{SVC}"), None, &csr).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("set certname in the agent's puppet.conf to the name the conductor signed"),
        "{}",
        r.text()
    );
    for name in [SVC, "localhost", "vouch-admin"] {
        let r = server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        assert_eq!(r.status, 404, "{name}: {}", r.text());
    }
    assert!(list_json(&dir).iter().all(|e| e["state"] != "requested"), "a request under a reserved name was kept");
    assert!(server.stop());
}

/// Issue 13, point 1: the names on the certificate the service presents (and on
/// administrators' certificates) stay reserved whatever --server-name says after a restart,
/// and no path — the API, an administrator's re-decision, `vouch sign`, `vouch autosign` —
/// supersedes (revokes) those certificates, even with on_existing = "supersede".
#[test]
fn the_served_and_admin_certificates_names_stay_reserved_whatever_the_flags_and_are_never_superseded() {
    const SVC: &str = "svc.example.test";
    const OPS: &str = "ops.example.test";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(
        &dir,
        &[
            "--server-name",
            SVC,
            "--server-name",
            "ca.example.test",
            "--server-name",
            "localhost",
            "--server-name",
            "192.0.2.7",
        ],
    );
    let served_pem = std::fs::read(dir.join("server/server_crt.pem")).unwrap();
    let served = serial_of(&dir.join("server/server_crt.pem"));
    // A request for OPS, vouched but asking for pp_role: refused and kept pending.
    let mut with_role = vouched_attributes(&dir, OPS);
    with_role.extension_requests.insert("1.3.6.1.4.1.34380.1.1.13".into(), "webserver".into());
    let r = first
        .client(None)
        .request("PUT", &format!("/puppet-ca/v1/certificate_request/{OPS}"), None, &csr_for(OPS, &with_role, &p256()))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(first.stop());
    // Then OPS becomes an administrator's name, and the policy supersedes and allows pp_role.
    let ops_cert = tmp.path().join("ops_crt.pem");
    ok(&vouch()
        .args(["--dir", s(&dir), "admin", "new", OPS, "--cert-out", s(&ops_cert)])
        .args(["--key-out", s(&tmp.path().join("ops_key.pem"))])
        .output()
        .unwrap());
    let ops_serial = serial_of(&ops_cert);
    let policy = dir.join("policy.toml");
    let p = std::fs::read_to_string(&policy).unwrap();
    let p = p
        .replace("on_existing = \"refuse\"", "on_existing = \"supersede\"")
        .replace("allow = []", "allow = [\"pp_role\"]");
    std::fs::write(&policy, p).unwrap();

    // Restarted with other names: the certificate served is kept (its names cover them)...
    let server = Server::start(&dir, &["--server-name", "ca.example.test", "--server-name", "localhost"]);
    assert_eq!(std::fs::read(dir.join("server/server_crt.pem")).unwrap(), served_pem);
    assert!(server.banner.contains(SVC), "the banner hides a name the service presents:\n{}", server.banner);
    let put = |name: &str, csr: &[u8]| {
        server.client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, csr).unwrap()
    };
    // ...and its CN stays reserved: a vouched node for it is refused, through every path.
    let csr = csr_for(SVC, &vouched_attributes(&dir, SVC), &p256());
    let r = put(SVC, &csr);
    assert_eq!(r.status, 400, "{}", r.text());
    // So does its IP address (a DNS name "192.0.2.7" passes Ruby's host check for that address).
    let r = put("192.0.2.7", &csr_for("192.0.2.7", &vouched_attributes(&dir, "192.0.2.7"), &p256()));
    assert_eq!(r.status, 400, "{}", r.text());
    let csr_file = tmp.path().join("svc.csr");
    std::fs::write(&csr_file, csr_for(SVC, &vouched_attributes(&dir, SVC), &p256())).unwrap();
    let o = vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr_file)]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("[name-reserved]"), "{}", text(&o));
    let mut hook = vouch()
        .args(["--dir", s(&dir), "autosign", SVC])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let fresh = csr_for(SVC, &vouched_attributes(&dir, SVC), &p256());
    std::io::Write::write_all(&mut hook.stdin.take().unwrap(), &fresh).unwrap();
    let o = hook.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("[name-reserved]"), "{}", text(&o));
    // The administrator's name: an administrator's re-decision of the request kept for it
    // (which the policy now grants) is refused, and so is a new request through the API.
    let r = server
        .admin()
        .request(
            "PUT",
            &format!("/puppet-ca/v1/certificate_status/{OPS}"),
            Some("application/json"),
            br#"{"desired_state":"signed"}"#,
        )
        .unwrap();
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("name-reserved"), "{}", r.text());
    let r = put(OPS, &csr_for(OPS, &vouched_attributes(&dir, OPS), &p256()));
    assert_eq!(r.status, 400, "{}", r.text());
    // Nothing was superseded: neither certificate is on the CRL, both are still current.
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]))
        .to_ascii_lowercase()
        .replace(':', "");
    assert!(!crl.contains(&served), "the served certificate was revoked:\n{crl}");
    assert!(!crl.contains(&ops_serial), "the administrator's certificate was revoked:\n{crl}");
    let signed: Vec<(String, String)> = list_json(&dir)
        .iter()
        .filter(|e| e["state"] == "signed")
        .map(|e| {
            (e["name"].as_str().unwrap().to_string(), e["serial"].as_str().unwrap().trim_start_matches('0').to_string())
        })
        .collect();
    assert!(signed.contains(&(SVC.to_string(), served.clone())), "{signed:?}");
    assert!(signed.contains(&(OPS.to_string(), ops_serial.clone())), "{signed:?}");
    // The service still answers with it.
    assert_eq!(server.client(None).request("GET", "/puppet-ca/v1/certificate/ca", None, b"").unwrap().status, 200);
    assert!(server.stop());
}

/// A new service certificate under another certname retires the old one (its key is gone):
/// revoked as superseded, its names free again, the new one's reserved.
#[test]
fn a_service_certificate_replaced_under_another_name_is_revoked_and_its_names_freed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(&dir, &["--server-name", "old.example.test", "--server-name", "localhost"]);
    let old = serial_of(&dir.join("server/server_crt.pem"));
    assert!(first.stop());
    let server = Server::start(&dir, &["--server-name", "new.example.test", "--server-name", "localhost"]);
    assert_ne!(serial_of(&dir.join("server/server_crt.pem")), old);
    // The banner says so (a restart that revokes the certificate presented until now).
    assert!(
        server.banner.contains("completed: the service certificate was issued again")
            && server.banner.to_ascii_lowercase().contains(&format!("old.example.test, serial {old}) is revoked")),
        "{}",
        server.banner
    );
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    assert!(crl.to_ascii_lowercase().replace(':', "").contains(&old), "the old service certificate is valid:\n{crl}");
    let put = |name: &str| {
        let csr = csr_for(name, &vouched_attributes(&dir, name), &p256());
        server.client(None).request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap()
    };
    assert_eq!(put("new.example.test").status, 400);
    let r = put("old.example.test");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = server.client(None).request("GET", "/puppet-ca/v1/certificate/old.example.test", None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(server.stop());
    // A --server-name that is now a node's certname (a typo, a reused name) never revokes the
    // node to take its name: the start is refused and the node's certificate stays current.
    let node = serial_of_current(&dir, "old.example.test");
    let o = vouch()
        .args(["--dir", s(&dir), "serve", "--listen", "127.0.0.1:0", "--server-name", "old.example.test"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is a node's certname"), "{}", text(&o));
    assert_eq!(serial_of_current(&dir, "old.example.test"), node);
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    assert!(!crl.to_ascii_lowercase().replace(':', "").contains(&node), "the node was revoked:\n{crl}");
}

/// A second `vouch serve` on a data directory another one serves (another port, another
/// --server-name) used to issue its own service certificate and revoke the running one's: the
/// running server went on presenting a certificate its own CRL listed. It is refused before it
/// changes anything, and once the first one has stopped it starts.
#[test]
fn a_second_serve_on_a_running_servers_data_directory_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(&dir, &["--server-name", "ca-a.example.test", "--server-name", "localhost"]);
    let served = std::fs::read(dir.join("server/server_crt.pem")).unwrap();
    let revocations = std::fs::read(dir.join("ca/revocations.txt")).unwrap_or_default();
    let mut second = serve_cmd(&dir)
        .args(["--server-name", "ca-b.example.test"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_within(&mut second, Duration::from_secs(60), "the second vouch serve (kept running?)");
    let o = second.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("another vouch serve is running on") && err.contains("nothing was changed"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "the holder is named: {err}");
    assert!(err.contains("one vouch serve per data directory"), "{err}");
    assert_eq!(std::fs::read(dir.join("server/server_crt.pem")).unwrap(), served);
    assert_eq!(std::fs::read(dir.join("ca/revocations.txt")).unwrap_or_default(), revocations);
    assert!(first.stop());
    let again = Server::start(&dir, &["--server-name", "ca-a.example.test", "--server-name", "localhost"]);
    assert_eq!(std::fs::read(dir.join("server/server_crt.pem")).unwrap(), served);
    assert!(!again.banner.contains("issued again"), "{}", again.banner);
    assert!(again.stop());
}

/// The lock that keeps a second `vouch serve` off a data directory cannot be removed from
/// under the running one: an operator deleting what looks like a stale lock file
/// (`rm DIR/serve.lock`) must not let a second one start, issue its own service certificate
/// and revoke the running one's.
#[test]
fn a_second_serve_is_refused_even_after_the_lock_file_was_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(&dir, &["--server-name", "ca-a.example.test", "--server-name", "localhost"]);
    let served = std::fs::read(dir.join("server/server_crt.pem")).unwrap();
    let _ = std::fs::remove_file(dir.join("serve.lock"));
    let mut second = serve_cmd(&dir)
        .args(["--server-name", "ca-b.example.test"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = ended_within(&mut second, Duration::from_secs(60));
    if status.is_none() {
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(second.id() as i32, libc::SIGTERM) };
    }
    let o = second.wait_with_output().unwrap();
    assert!(status.is_some(), "the second vouch serve kept running: {}", text(&o));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Its record of what holds the lock went with the file: the refusal names no command.
    let refused = String::from_utf8_lossy(&o.stderr);
    assert!(
        refused.contains("another vouch process (a vouch serve, or a vouch migrate) is running on"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(dir.join("server/server_crt.pem")).unwrap(), served);
    assert!(first.stop());
}

/// A --server-name that is an administrator's name never revokes the administrator's
/// certificate to take it: the start is refused, the administrator's certificate stays
/// current and off the CRL (before, the service superseded it, and the administrator's
/// `vouch revoke NAME` then revoked the service's certificate).
#[test]
fn a_server_name_that_is_an_administrators_is_refused_and_the_administrator_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(&dir, &[]);
    assert!(first.stop());
    ok(&vouch()
        .args(["--dir", s(&dir), "admin", "new", "alice"])
        .args(["--cert-out", s(&tmp.path().join("a.pem")), "--key-out", s(&tmp.path().join("a.key"))])
        .output()
        .unwrap());
    let admin = serial_of_current(&dir, "alice");
    let mut child =
        serve_cmd(&dir).args(["--server-name", "alice"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_within(&mut child, Duration::from_secs(30), "vouch serve under the administrator's name (it started?)");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is an administrator's name"), "{}", text(&o));
    assert_eq!(serial_of_current(&dir, "alice"), admin);
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    assert!(!crl.to_ascii_lowercase().replace(':', "").contains(&admin), "the administrator was revoked:\n{crl}");
}

/// The serial (lowercase hex) of NAME's current certificate in the store.
fn serial_of_current(dir: &Path, name: &str) -> String {
    serial_of(&dir.join(format!("ca/signed/{name}.pem")))
}

/// The hook beside a `vouch serve` (Puppet Server copies requested subjectAltNames when its
/// own setting allows): a CSR asking for a name of the service under another certname is refused.
#[test]
fn a_requested_alt_name_of_the_service_is_refused_by_the_hook_beside_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &["--server-name", "svc.example.test", "--server-name", "localhost"]);
    assert!(server.stop());
    let key = p256();
    let mut params =
        rcgen::CertificateParams::new(vec!["node.example.test".to_string(), "svc.example.test".to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "node.example.test");
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    let mut hook = vouch()
        .args(["--dir", s(&dir), "autosign", "node.example.test"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut hook.stdin.take().unwrap(), csr.as_bytes()).unwrap();
    let o = hook.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("[name-reserved]") && text(&o).contains("svc.example.test"), "{}", text(&o));
}

/// The CRL's lastUpdate and nextUpdate lines, as openssl reads them.
fn crl_dates(crl: &Path) -> String {
    ok(&openssl(&["crl", "-in", s(crl), "-noout", "-lastupdate", "-nextupdate"]))
}

/// Review D-1b: maintenance (CRL refresh, the store's checkpoint) ran only when a client
/// connected, so an idle server let its CRL lapse on disk. With a CRL that is due for
/// renewal 30 s after it is made, a server nobody talks to must renew it by itself
/// (maintenance runs every 60 s; the deadline is generous, not a timing claim).
#[test]
fn an_idle_server_refreshes_its_crl_on_its_own_schedule() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let policy = dir.join("policy.toml");
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("validity = \"30d\"") && text.contains("refresh_before = \"10d\""), "{text}");
    std::fs::write(
        &policy,
        text.replace("validity = \"30d\"", "validity = \"2m\"")
            .replace("refresh_before = \"10d\"", "refresh_before = \"90s\""),
    )
    .unwrap();
    let server = Server::start(&dir, &[]);
    let crl = dir.join("ca/ca_crl.pem");
    let first = crl_dates(&crl);
    // No client connects: only the server's own schedule can renew the CRL.
    let mut renewed = first.clone();
    std::thread::sleep(Duration::from_secs(1));
    Wait::up_to(Duration::from_secs(180))
        .every(Duration::from_secs(1))
        .showing(|| std::fs::read_to_string(&server.log).unwrap())
        .until(&format!("the idle server renews its CRL ({first})"), || {
            renewed = crl_dates(&crl);
            renewed != first
        });
    assert!(
        !server.log().iter().any(|v| v["event"] == "request" || v["event"] == "tls"),
        "a client connected: the test no longer shows an idle server"
    );
    let last = |d: &str| d.lines().find_map(|l| l.strip_prefix("lastUpdate=")).map(str::to_string).unwrap();
    assert_ne!(last(&first), last(&renewed), "{first} -> {renewed}");
    assert!(server.stop());
}

/// The running service judges its root CRL again whenever the file changes: a root CRL
/// damaged (cut short) while it runs is written again by the next request's maintenance,
/// whole and signed by the root, and the conductor it vouches for is still granted. The
/// service remembers the identity of the root CRL it last found readable (so that it does
/// not check the root's signature on it once a second); the damage changes that identity.
#[test]
fn a_root_crl_damaged_while_the_service_runs_is_written_again_at_the_next_request() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let issued = |name: &str| {
        let csr = csr_for(name, &vouched_attributes(&dir, name), &p256());
        let mut c = Client::new(config.clone(), server.addr(), "localhost").unwrap();
        let put = c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap();
        assert_eq!(put.status, 200);
        c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap().status
    };
    assert_eq!(issued("before.example.test"), 200);
    let crl = dir.join("ca/root_crl.pem");
    let whole = std::fs::read(&crl).unwrap();
    std::fs::write(&crl, &whole[..whole.len() / 2]).unwrap();
    // Maintenance runs at most once a second from the requests: the next one is in a later second.
    std::thread::sleep(Duration::from_millis(1100));
    let log = || std::fs::read_to_string(&server.log).unwrap();
    assert_eq!(issued("after.example.test"), 200, "the conductor is refused: {}", log());
    let root = dir.join("ca/root_crt.pem");
    let verified = openssl(&["crl", "-in", s(&crl), "-CAfile", s(&root), "-noout"]);
    assert!(verified.status.success() && text(&verified).contains("verify OK"), "{}", text(&verified));
    assert!(server.stop());
}

/// Each `(name, csr)` PUT at once (one thread and connection each, released together);
/// returns the answers' statuses in the same order.
fn put_all_at_once(server: &Server, work: &[(String, Vec<u8>)]) -> Vec<u16> {
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let barrier = Arc::new(std::sync::Barrier::new(work.len()));
    let handles: Vec<_> = work
        .iter()
        .cloned()
        .map(|(name, csr)| {
            let (config, barrier, addr) = (config.clone(), barrier.clone(), server.addr());
            std::thread::spawn(move || {
                let mut c = Client::new(config, addr, "localhost").unwrap();
                barrier.wait();
                c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr)
                    .unwrap()
                    .status
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Review D-3: the "already has a certificate" check ran without the store's lock and a
/// refusal found under the lock was kept, so identical PUTs racing for one name (an agent
/// retrying, a junk request racing the node) left a pending `[certificate-exists]` request
/// beside the valid certificate; and a pending request's CSR and reasons were two files
/// written without the lock, so two refused PUTs could leave one's CSR with the other's reasons.
#[test]
fn racing_requests_keep_nothing_beside_a_certificate_and_a_pending_csr_keeps_its_own_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let requests = dir.join("ca/requests");
    // Identical vouched requests, several at once per name, for several names at once.
    const NAMES: usize = 12;
    const COPIES: usize = 4;
    let mut work = Vec::new();
    for i in 0..NAMES {
        let name = format!("twin{i:02}.example.test");
        let csr = csr_for(&name, &vouched_attributes(&dir, &name), &p256());
        work.extend(std::iter::repeat_n((name, csr), COPIES));
    }
    let statuses = put_all_at_once(&server, &work);
    for ((name, _), status) in work.iter().zip(&statuses) {
        assert!(*status == 200 || *status == 400, "{name}: PUT answered {status}");
    }
    for i in 0..NAMES {
        let name = format!("twin{i:02}.example.test");
        let r = server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        for ext in ["json", "pem"] {
            let kept = requests.join(format!("{name}.{ext}"));
            assert!(
                !kept.exists(),
                "{name}: a pending request kept beside its valid certificate: {}",
                std::fs::read_to_string(requests.join(format!("{name}.json"))).unwrap_or_default()
            );
        }
    }
    assert!(list_json(&dir).iter().all(|e| e["state"] != "requested"), "{:?}", list_json(&dir));

    // Two different refused requests racing for one name: whichever is kept, its CSR and its
    // reasons are the same request's. One names the certname but carries attributes vouched
    // for another name; the other is a CSR for another name altogether (common-name-mismatch).
    const MIXED: usize = 4;
    let mut work = Vec::new();
    for i in 0..MIXED {
        let name = format!("mix{i}.example.test");
        let own_cn = csr_for(&name, &vouched_attributes(&dir, "nobody.example.test"), &p256());
        let other_cn = csr_for("other.example.test", &vouched_attributes(&dir, "other.example.test"), &p256());
        for _ in 0..2 {
            work.push((name.clone(), own_cn.clone()));
            work.push((name.clone(), other_cn.clone()));
        }
    }
    for round in 0..25 {
        let statuses = put_all_at_once(&server, &work);
        assert!(statuses.iter().all(|s| *s == 200), "round {round}: {statuses:?}");
        for i in 0..MIXED {
            let name = format!("mix{i}.example.test");
            let meta: serde_json::Value =
                serde_json::from_slice(&std::fs::read(requests.join(format!("{name}.json"))).unwrap()).unwrap();
            let reasons = meta["reasons"].to_string();
            let csr =
                vouch::encoding::csr::parse(&std::fs::read(requests.join(format!("{name}.pem"))).unwrap()).unwrap();
            let cn = csr.common_names.first().cloned().unwrap_or_default();
            assert_eq!(
                cn != name,
                reasons.contains("common-name-mismatch"),
                "round {round}, {name}: the kept CSR (CN {cn}) sits beside another request's reasons: {reasons}"
            );
        }
    }
    assert!(server.stop());
}

/// Review D-1a: the conductor credential was made only by the start that created the CA, so
/// a first run interrupted after the CA (a full disk) served for ever without one, silently.
/// Every credential step is now completed by the next start: what is missing is made, a key
/// left without its certificate gets one, nothing that exists is replaced, and the banner
/// says what was completed. The interruptions are simulated by removing what an
/// interrupted first run would not have written.
#[test]
fn a_start_completes_the_credentials_an_interrupted_run_left_missing_and_replaces_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let (ccert, ckey) = (dir.join("conductor/conductor_crt.pem"), dir.join("conductor/conductor_key.pem"));
    let (acert, akey) = (dir.join("admin/admin_crt.pem"), dir.join("admin/admin_key.pem"));
    let first = Server::start(&dir, &[]);
    assert!(!first.banner.contains("completed:") && !first.banner.contains("missing:"), "{}", first.banner);
    assert!(first.stop());
    let admin_serial = serial_of(&acert);

    // A first run finished leaves no marker; an interrupted one leaves it (written before the CA).
    let marker = dir.join(".first-run-unfinished");
    assert!(!marker.exists(), "a finished first run left its marker");
    // The run stopped before the conductor credential: the next start makes it and says so.
    std::fs::remove_file(&ccert).unwrap();
    std::fs::remove_file(&ckey).unwrap();
    std::fs::write(&marker, "").unwrap();
    let server = Server::start(&dir, &[]);
    assert!(!marker.exists(), "the completed first run kept its marker");
    assert!(server.banner.starts_with("vouch: serving the CA in"), "{}", server.banner);
    assert!(
        server.banner.contains("completed: the conductor credential was missing; a new one was made"),
        "{}",
        server.banner
    );
    assert!(
        server.banner.contains(&format!("conductor credentials:         {}", ccert.display())),
        "{}",
        server.banner
    );
    assert_eq!(mode(&ckey), 0o600);
    let text = ok(&openssl(&["x509", "-in", s(&ccert), "-noout", "-text"]));
    assert!(text.contains("1.3.6.1.4.1.34380.2.0"), "{text}");
    ok(&openssl(&["verify", "-CAfile", s(&dir.join("ca/root_crt.pem")), "-purpose", "any", s(&ccert)]));
    // It vouches: a node with attributes it signed is granted.
    let name = "completed.example.test";
    let r = server
        .client(None)
        .request(
            "PUT",
            &format!("/puppet-ca/v1/certificate_request/{name}"),
            None,
            &csr_for(name, &vouched_attributes(&dir, name), &p256()),
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(server.stop());

    // Stopped between a key and its certificate (keys are written first): the key is kept
    // and its certificate made; the administrator's comes back from the store, same serial.
    let conductor_key = std::fs::read(&ckey).unwrap();
    let admin_key = std::fs::read(&akey).unwrap();
    std::fs::remove_file(&ccert).unwrap();
    std::fs::remove_file(&acert).unwrap();
    std::fs::write(&marker, "").unwrap();
    let server = Server::start(&dir, &[]);
    for what in ["the conductor credential", "the administrator credential"] {
        let line = format!("completed: {what} had its key but no certificate; its certificate was written");
        assert!(server.banner.contains(&line), "{}", server.banner);
    }
    assert_eq!(std::fs::read(&ckey).unwrap(), conductor_key, "the conductor key was replaced");
    assert_eq!(std::fs::read(&akey).unwrap(), admin_key, "the administrator key was replaced");
    let pubkey = |args: &[&str]| ok(&openssl(args));
    assert_eq!(
        pubkey(&["x509", "-in", s(&ccert), "-noout", "-pubkey"]),
        pubkey(&["pkey", "-in", s(&ckey), "-pubout"]),
        "the conductor certificate is not for the key that was kept"
    );
    assert_eq!(serial_of(&acert), admin_serial, "a second administrator certificate was issued");
    let r = server.admin().request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(server.stop());

    // A credential that is complete elsewhere is never replaced behind the operator's back:
    // vouch-admin's certificate is current, its files are gone, and the banner says so.
    std::fs::remove_file(&acert).unwrap();
    std::fs::remove_file(&akey).unwrap();
    let server = Server::start(&dir, &[]);
    assert!(server.banner.contains("missing: no administrator credential in"), "{}", server.banner);
    assert!(server.banner.contains(&admin_serial), "{}", server.banner);
    assert!(!acert.exists() && !akey.exists());
    assert!(!server.banner.contains("completed:"), "{}", server.banner);
    assert!(server.stop());
    // The banner's advice works: vouch-admin revoked (the last administrator: --force), the
    // next start makes a new credential.
    ok(&vouch().args(["--dir", s(&dir), "revoke", "--force", "vouch-admin"]).output().unwrap());
    let server = Server::start(&dir, &[]);
    assert!(acert.exists() && akey.exists(), "{}", server.banner);
    assert_ne!(serial_of(&acert), admin_serial);
    let r = server.admin().request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(server.stop());

    // After the first run, the conductor credential and the root key kept off the host (as
    // docs/limitations.md advises for production): the service starts and makes no conductor.
    let away = tmp.path().join("away");
    std::fs::create_dir(&away).unwrap();
    std::fs::rename(dir.join("conductor"), away.join("conductor")).unwrap();
    std::fs::rename(dir.join("ca/root_key.pem"), away.join("root_key.pem")).unwrap();
    let server = Server::start(&dir, &[]);
    assert!(!dir.join("conductor").exists(), "a conductor credential was made again: {}", server.banner);
    assert!(
        !server.banner.contains("conductor credentials:") && !server.banner.contains("completed:"),
        "{}",
        server.banner
    );
    assert!(server.stop());
    std::fs::rename(away.join("root_key.pem"), dir.join("ca/root_key.pem")).unwrap();

    // The administrator credential's certificate revoked while its files stay: the banner
    // no longer presents it as working.
    ok(&vouch().args(["--dir", s(&dir), "revoke", "--force", "vouch-admin"]).output().unwrap());
    let server = Server::start(&dir, &[]);
    assert!(
        server.banner.contains("missing: the administrator credential") && server.banner.contains("no longer"),
        "{}",
        server.banner
    );
    assert!(server.stop());
}

/// The same for the policy (review D-1a's class): `ca init` writes it just after the CA, so a
/// first run stopped between the two left a CA every later start refused to serve. A CA never
/// used gets its default policy on the next start, said in the banner; a used CA whose policy
/// is gone is still refused (its lost policy may have been stricter than the default).
#[test]
fn a_first_run_stopped_before_its_policy_is_completed_but_a_used_ca_never_gets_a_default_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let policy = dir.join("policy.toml");
    let default = std::fs::read_to_string(&policy).unwrap();
    std::fs::remove_file(&policy).unwrap();
    let server = Server::start(&dir, &[]);
    assert!(server.banner.contains("completed: the policy was missing beside a CA never used"), "{}", server.banner);
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), default);
    assert!(server.stop());
    // Used now (the service's and the administrator's certificates): a lost policy is an error.
    std::fs::remove_file(&policy).unwrap();
    let o = vouch().args(["--dir", s(&dir), "serve", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("policy.toml"), "{}", text(&o));
    assert!(!policy.exists(), "a default policy replaced a used CA's lost one");
}

/// One answer of the metrics listener (plain HTTP/1.1, read to the end).
fn metrics_http(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    use std::io::Write;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(conn, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    conn.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no end of headers: {raw:?}"));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status: {head}"));
    let content_type = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v))
        .unwrap_or_default()
        .trim()
        .to_string();
    (status, content_type, body.to_string())
}

/// A histogram as scraped: its buckets in order (le, cumulative count), its `_count`, and
/// whether it has a `_sum`.
type Histogram = (Vec<(f64, f64)>, Option<f64>, bool);

/// A scrape of `/metrics`, checked against Prometheus' text exposition format: each comment a
/// `# HELP` or `# TYPE` line, each other line `name{label="value",…} value`, each sample of a
/// family whose `# TYPE` came first, and each histogram's buckets cumulative, ending with
/// `le="+Inf"` equal to its `_count`, with a `_sum`.
struct Scrape {
    samples: std::collections::BTreeMap<String, f64>,
    types: std::collections::BTreeMap<String, String>,
}

impl Scrape {
    fn take(addr: SocketAddr) -> Scrape {
        let (status, content_type, body) = metrics_http(addr, "GET", "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
        Scrape::parse(&body).unwrap_or_else(|e| panic!("not Prometheus' text format: {e}\n{body}"))
    }

    fn parse(text: &str) -> Result<Scrape, String> {
        let name_ok = |n: &str| {
            let mut c = n.chars();
            c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
        };
        let mut samples = std::collections::BTreeMap::new();
        let mut types: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        let mut hist: std::collections::BTreeMap<String, Histogram> = Default::default();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(c) = line.strip_prefix("# ") {
                let mut w = c.splitn(3, ' ');
                match (w.next(), w.next(), w.next()) {
                    (Some("HELP"), Some(n), Some(_)) if name_ok(n) => {}
                    (Some("TYPE"), Some(n), Some(t))
                        if name_ok(n) && ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t) =>
                    {
                        if types.insert(n.to_string(), t.to_string()).is_some() {
                            return Err(format!("two TYPE lines for {n}"));
                        }
                    }
                    _ => return Err(format!("bad comment line: {line}")),
                }
                continue;
            }
            let name_end = line.find(['{', ' ']).ok_or(format!("no value: {line}"))?;
            let name = &line[..name_end];
            if !name_ok(name) {
                return Err(format!("bad metric name: {line}"));
            }
            let mut rest = &line[name_end..];
            let mut labels = Vec::new();
            if let Some(r) = rest.strip_prefix('{') {
                rest = r;
                loop {
                    if let Some(r) = rest.strip_prefix('}') {
                        rest = r;
                        break;
                    }
                    let eq = rest.find("=\"").ok_or(format!("bad label: {line}"))?;
                    let lname = &rest[..eq];
                    if !name_ok(lname) || lname.contains(':') {
                        return Err(format!("bad label name {lname:?}: {line}"));
                    }
                    rest = &rest[eq + 2..];
                    let mut value = String::new();
                    let mut chars = rest.char_indices();
                    let end = loop {
                        match chars.next() {
                            Some((i, '"')) => break i,
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, c @ ('\\' | '"'))) => value.push(c),
                                _ => return Err(format!("bad escape: {line}")),
                            },
                            Some((_, c)) => value.push(c),
                            None => return Err(format!("unterminated label value: {line}")),
                        }
                    };
                    labels.push((lname.to_string(), value));
                    rest = &rest[end + 1..];
                    rest = rest.strip_prefix(',').unwrap_or(rest);
                }
            }
            let mut fields = rest.strip_prefix(' ').ok_or(format!("no space before the value: {line}"))?.split(' ');
            let value = match fields.next() {
                Some("+Inf") => f64::INFINITY,
                Some("-Inf") => f64::NEG_INFINITY,
                Some(v) => v.parse::<f64>().map_err(|e| format!("bad value {v:?} ({e}): {line}"))?,
                None => return Err(format!("no value: {line}")),
            };
            if let Some(ts) = fields.next() {
                ts.parse::<i64>().map_err(|_| format!("bad timestamp: {line}"))?;
            }
            if fields.next().is_some() {
                return Err(format!("trailing text: {line}"));
            }
            // The family: the name itself, or a histogram's series.
            let family = if types.contains_key(name) {
                name.to_string()
            } else {
                let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s));
                match base {
                    Some(b) if types.get(b).is_some_and(|t| t == "histogram") => b.to_string(),
                    _ => return Err(format!("sample before (or without) its # TYPE line: {line}")),
                }
            };
            if types[&family] == "histogram" {
                let h = hist.entry(family.clone()).or_default();
                if name.ends_with("_bucket") {
                    let le = labels.iter().find(|(k, _)| k == "le").ok_or(format!("bucket without le: {line}"))?;
                    let le = if le.1 == "+Inf" { f64::INFINITY } else { le.1.parse().map_err(|_| line.to_string())? };
                    h.0.push((le, value));
                } else if name.ends_with("_count") {
                    h.1 = Some(value);
                } else {
                    h.2 = true;
                }
            }
            let key = format!(
                "{name}{}",
                if labels.is_empty() {
                    String::new()
                } else {
                    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                    format!("{{{}}}", l.join(","))
                }
            );
            if samples.insert(key, value).is_some() {
                return Err(format!("a series twice: {line}"));
            }
        }
        for (name, (buckets, count, sum)) in &hist {
            let ordered = buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1);
            let inf = buckets.last().filter(|b| b.0.is_infinite()).map(|b| b.1);
            if !ordered || inf.is_none() || inf != *count || !sum {
                return Err(format!("histogram {name}: buckets {buckets:?}, count {count:?}, sum {sum}"));
            }
        }
        Ok(Scrape { samples, types })
    }

    /// A series' value; 0 for a counter series not there yet.
    fn get(&self, series: &str) -> f64 {
        self.samples.get(series).copied().unwrap_or(0.0)
    }

    /// How much `series` grew since `before`.
    fn delta(&self, before: &Scrape, series: &str) -> f64 {
        self.get(series) - before.get(series)
    }

    /// Counters and histograms never go back between two scrapes.
    fn assert_monotonic_since(&self, before: &Scrape) {
        for (series, v) in &before.samples {
            let name = series.split('{').next().unwrap();
            let family = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
            let kind = before.types.get(name).or(before.types.get(family)).map(String::as_str);
            if matches!(kind, Some("counter" | "histogram")) {
                assert!(self.get(series) >= *v, "{series} went back from {v} to {}", self.get(series));
            }
        }
    }
}

fn requests(route: &str, status: u16) -> String {
    format!("vouch_http_requests_total{{route=\"{route}\",status=\"{status}\"}}")
}

const GRANTED: &str = "vouch_decisions_total{outcome=\"granted\"}";
const REFUSED: &str = "vouch_decisions_total{outcome=\"refused\"}";
const OPEN: &str = "vouch_open_connections";
const BATCHES: &str = "vouch_group_commit_batch_size_count";
const BATCHED: &str = "vouch_group_commit_batch_size_sum";
const ISSUANCES: &str = "vouch_issuance_duration_seconds_count";

/// Waits until `/metrics` says `n` HTTPS connections are open (10 s at most): the server
/// counts a connection closed once it has read the client's end of it.
fn wait_connections(metrics: SocketAddr, n: f64) -> Scrape {
    let t = Instant::now();
    loop {
        let s = Scrape::take(metrics);
        if s.get(OPEN) == n {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{} connections counted open, not {n}", s.get(OPEN));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--metrics-listen`: Prometheus' text format on a plain-HTTP listener of its own, scraped
/// before, during and after issuances through the real HTTPS API; every counter moves by
/// exactly what was done (requests by route and status, decisions by outcome and refusal
/// code, issuances and group-commit batches), and the open connections come back to 0.
#[test]
fn metrics_count_exactly_what_the_api_did_during_and_after_a_load() {
    const AGENTS: usize = 8;
    const EACH: usize = 3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = Server::start(&dir, &["--metrics-listen", &free.to_string()]);
    assert!(server.banner.contains(&format!("metrics on http://{free}/metrics")), "{}", server.banner);
    let metrics = free;
    // Only /metrics: 404 elsewhere, 405 for another method.
    assert_eq!(metrics_http(metrics, "GET", "/").0, 404);
    assert_eq!(metrics_http(metrics, "GET", "/metrics/x").0, 404);
    assert_eq!(metrics_http(metrics, "POST", "/metrics").0, 405);
    let before = Scrape::take(metrics);
    for (name, kind) in [
        ("vouch_http_requests_total", "counter"),
        ("vouch_decisions_total", "counter"),
        ("vouch_refusals_total", "counter"),
        ("vouch_issuance_duration_seconds", "histogram"),
        ("vouch_group_commit_batch_size", "histogram"),
        ("vouch_group_commit_busy_seconds_total", "counter"),
        ("vouch_store_errors_total", "counter"),
        ("vouch_open_connections", "gauge"),
        ("vouch_crl_age_seconds", "gauge"),
    ] {
        assert_eq!(before.types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    for crl in ["ca", "root"] {
        let age = before.get(&format!("vouch_crl_age_seconds{{crl=\"{crl}\"}}"));
        assert!(before.samples.contains_key(&format!("vouch_crl_age_seconds{{crl=\"{crl}\"}}")), "no {crl} CRL age");
        assert!((0.0..3600.0).contains(&age), "{crl} CRL age {age}");
    }
    assert_eq!(before.get(OPEN), 0.0);

    // One after the other: three grants and one refusal (attributes vouched for another name).
    let mut c = server.client(None);
    let names = ["seq1.example.test", "seq2.example.test", "seq3.example.test"];
    for name in names {
        let csr = csr_for(name, &vouched_attributes(&dir, name), &p256());
        let put = c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap();
        assert_eq!(put.status, 200, "{}", put.text());
        assert_eq!(c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap().status, 200);
    }
    let refused = "refused.example.test";
    let csr = csr_for(refused, &vouched_attributes(&dir, "other.example.test"), &p256());
    assert_eq!(
        c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{refused}"), None, &csr).unwrap().status,
        200
    );
    assert_eq!(c.request("GET", &format!("/puppet-ca/v1/certificate/{refused}"), None, b"").unwrap().status, 404);
    drop(c);
    let after_seq = wait_connections(metrics, 0.0);
    after_seq.assert_monotonic_since(&before);
    let d = |s: &str| after_seq.delta(&before, s);
    assert_eq!(d(&requests("certificate_request", 200)), 4.0);
    assert_eq!(d(&requests("certificate", 200)), 3.0);
    assert_eq!(d(&requests("certificate", 404)), 1.0);
    assert_eq!((d(GRANTED), d(REFUSED)), (3.0, 1.0));
    // The refusal's codes are the ones its log line gives, each counted once.
    server.wait_log("the refusal", |v| v["event"] == "decision" && v["certname"] == refused);
    let line = server.log().into_iter().find(|v| v["event"] == "decision" && v["certname"] == refused).unwrap();
    assert_eq!(line["verdict"], "refused");
    let codes: std::collections::BTreeSet<String> =
        line["codes"].as_str().unwrap().split(',').map(str::to_string).collect();
    assert!(codes.contains("certname-not-vouched"), "{line}");
    for code in &codes {
        assert_eq!(d(&format!("vouch_refusals_total{{code=\"{code}\"}}")), 1.0, "{code}");
    }
    let all_codes: f64 = after_seq
        .samples
        .keys()
        .filter(|k| k.starts_with("vouch_refusals_total{"))
        .map(|k| after_seq.delta(&before, k))
        .sum();
    assert_eq!(all_codes, codes.len() as f64, "refusal codes counted beyond this refusal's");
    // One batch per sequential grant, each of one issuance; one latency observation per grant.
    assert_eq!((d(BATCHES), d(BATCHED)), (3.0, 3.0));
    assert_eq!(d("vouch_group_commit_batch_size_bucket{le=\"1\"}"), 3.0);
    // Each batch took time (a synchronous write at least), and less than the issuances did.
    let busy = d("vouch_group_commit_busy_seconds_total");
    assert!(busy > 0.0 && busy <= d("vouch_issuance_duration_seconds_sum"), "busy {busy} s");
    assert_eq!(d(ISSUANCES), 3.0);
    assert!(d("vouch_issuance_duration_seconds_sum") > 0.0);
    for stage in ["request", "after-commit", "audit", "maintenance", "checkpoint"] {
        assert_eq!(d(&format!("vouch_store_errors_total{{stage=\"{stage}\"}}")), 0.0, "{stage}");
    }

    // At once: AGENTS agents, EACH certificates each, one kept-alive connection per agent,
    // and an idle connection held open meanwhile. Halfway, every agent waits: the scrape
    // then sees exactly the first round.
    let mut idle = server.client(None);
    assert_eq!(idle.request("GET", "/puppet-ca/v1/certificate/ca", None, b"").unwrap().status, 200);
    let config = tls_config(&server.ca_bundle(), None).unwrap();
    let start = Arc::new(std::sync::Barrier::new(AGENTS + 1));
    let halfway = Arc::new(std::sync::Barrier::new(AGENTS + 1));
    let resume = Arc::new(std::sync::Barrier::new(AGENTS + 1));
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let work: Vec<Vec<(String, Vec<u8>)>> = (0..AGENTS)
        .map(|a| {
            (0..EACH)
                .map(|i| {
                    let name = format!("load{a}-{i}.example.test");
                    let csr = csr_for(&name, &vouched_attributes(&dir, &name), &p256());
                    (name, csr)
                })
                .collect()
        })
        .collect();
    let handles: Vec<_> = work
        .into_iter()
        .map(|jobs| {
            let (config, addr) = (config.clone(), server.addr());
            let (start, halfway, resume, done) = (start.clone(), halfway.clone(), resume.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = Client::new(config, addr, "localhost").unwrap();
                start.wait();
                for (i, (name, csr)) in jobs.iter().enumerate() {
                    let put =
                        c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, csr).unwrap();
                    assert_eq!(put.status, 200, "{name}: {}", put.text());
                    let get = c.request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
                    assert_eq!(get.status, 200, "{name}");
                    if i == 0 {
                        halfway.wait();
                        resume.wait();
                    }
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                c.connects
            })
        })
        .collect();
    start.wait();
    halfway.wait();
    // Every agent stopped after its first certificate, its connection open.
    let mid = Scrape::take(metrics);
    mid.assert_monotonic_since(&after_seq);
    assert_eq!(mid.delta(&after_seq, GRANTED), AGENTS as f64);
    assert_eq!(mid.delta(&after_seq, &requests("certificate_request", 200)), AGENTS as f64);
    assert_eq!(mid.delta(&after_seq, &requests("certificate", 200)), AGENTS as f64 + 1.0);
    assert_eq!(mid.delta(&after_seq, BATCHED), AGENTS as f64);
    assert_eq!(mid.delta(&after_seq, ISSUANCES), AGENTS as f64);
    assert_eq!(mid.get(OPEN), AGENTS as f64 + 1.0, "the agents' connections and the idle one");
    resume.wait();
    // The rest, scraped while it runs: always valid, never going back, the idle connection counted.
    let (mut last, mut scrapes) = (mid, 0);
    while done.load(std::sync::atomic::Ordering::SeqCst) < AGENTS {
        let now = Scrape::take(metrics);
        now.assert_monotonic_since(&last);
        assert!(now.get(OPEN) >= 1.0, "the idle connection is open");
        last = now;
        scrapes += 1;
    }
    for h in handles {
        assert_eq!(h.join().unwrap(), 1, "an agent's connection was not kept alive");
    }
    eprintln!("{scrapes} scrapes during the second half of the load");
    // The agents closed their connections; the idle one stays.
    let loaded = wait_connections(metrics, 1.0);
    loaded.assert_monotonic_since(&last);
    let d = |s: &str| loaded.delta(&after_seq, s);
    let total = (AGENTS * EACH) as f64;
    assert_eq!(d(GRANTED), total);
    assert_eq!(d(REFUSED), 0.0);
    assert_eq!(d(&requests("certificate_request", 200)), total);
    assert_eq!(d(&requests("certificate", 200)), total + 1.0);
    assert_eq!(d(ISSUANCES), total);
    // Concurrent issuances share batches: every one stored in exactly one batch.
    assert_eq!(d(BATCHED), total);
    assert!((1.0..=total).contains(&d(BATCHES)), "{} batches", d(BATCHES));
    drop(idle);
    let end = wait_connections(metrics, 0.0);
    end.assert_monotonic_since(&loaded);
    // The metrics listener's own requests are not the API's.
    assert_eq!(end.delta(&loaded, &requests("other", 404)), 0.0);
    assert!(server.stop());
}

/// One client address holds at most 4 metrics connections: 4 idle connections from
/// 127.0.0.1 leave a fifth from it closed unanswered, and scrapes work again once they go
/// (before, 16 idle connections from one client kept every scrape out for their lifetime).
#[test]
fn one_address_cannot_hold_every_metrics_connection() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let _server = Server::start(&tmp.path().join("vouch"), &["--metrics-listen", &free.to_string()]);
    // No scrape first: its connection's slot may still be held for a moment after the
    // client saw the answer, which would refuse one of the idle connections instead.
    let idle: Vec<std::net::TcpStream> = (0..4).map(|_| std::net::TcpStream::connect(free).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut fifth = std::net::TcpStream::connect(free).unwrap();
    fifth.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = write!(fifth, "GET /metrics HTTP/1.1\r\nHost: {free}\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    let _ = fifth.read_to_end(&mut raw);
    assert!(
        !String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 200"),
        "a fifth connection from one address was served"
    );
    drop(idle);
    Wait::up_to(Duration::from_secs(10)).every(Duration::from_millis(100)).until(
        "scrapes come back after the idle connections closed",
        || {
            let ok = std::net::TcpStream::connect(free).ok().and_then(|mut c| {
                c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
                write!(c, "GET /metrics HTTP/1.1\r\nHost: {free}\r\nConnection: close\r\n\r\n").ok()?;
                let mut raw = String::new();
                c.read_to_string(&mut raw).ok()?;
                Some(raw.starts_with("HTTP/1.1 200"))
            });
            ok == Some(true)
        },
    );
}

/// A busy --metrics-listen address is refused before anything is created, like --listen's.
#[test]
fn a_busy_metrics_port_is_named_and_leaves_no_ca_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let fresh = tmp.path().join("fresh");
    let o = vouch()
        .args(["--dir", s(&fresh), "serve", "--listen", "127.0.0.1:0", "--metrics-listen", &addr])
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!("cannot listen on {addr} (--metrics-listen): the address is already in use")),
        "{out}"
    );
    assert!(out.contains("hint:") && out.contains("--metrics-listen ADDRESS:PORT"), "{out}");
    assert!(!fresh.exists(), "a data directory was created for a server that could not listen");
    // The same from the environment.
    let o = vouch()
        .args(["--dir", s(&fresh), "serve", "--listen", "127.0.0.1:0"])
        .env("VOUCH_METRICS_LISTEN", &addr)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("(--metrics-listen)"), "{}", text(&o));
    assert!(!fresh.exists());
}

/// The log: JSON lines on a stderr that is not a terminal (timestamp, level, event and its
/// fields), at info by default; RUST_LOG=warn (or VOUCH_LOG, which wins) keeps only warnings
/// and errors; --log-format text writes text.
#[test]
fn logs_are_json_lines_at_info_and_rust_log_or_vouch_log_keeps_only_warnings() {
    let tmp = tempfile::tempdir().unwrap();
    // Each line JSON (Server::log parses every line), with the request's fields.
    let server = Server::start(&tmp.path().join("default"), &[]);
    assert_eq!(server.client(None).request("GET", "/status/v1/simple", None, b"").unwrap().status, 200);
    server.wait_log("the request", |v| v["event"] == "request" && v["path"] == "/status/v1/simple");
    let log = server.log();
    let request = log.iter().find(|v| v["event"] == "request").unwrap();
    assert_eq!((request["status"].as_u64(), request["method"].as_str()), (Some(200), Some("GET")), "{request}");
    assert!(request["ms"].is_number() && request["bytes"].is_number() && request["peer"].is_string(), "{request}");
    for v in &log {
        assert!(v["timestamp"].is_string() && v["level"].is_string() && v["event"].is_string(), "{v}");
    }
    assert!(log.iter().any(|v| v["event"] == "listening" && v["level"] == "INFO"), "{log:?}");
    assert!(server.stop());

    for (what, env) in [
        ("RUST_LOG=warn", &[("RUST_LOG", "warn")][..]),
        ("VOUCH_LOG=warn over RUST_LOG=info", &[("VOUCH_LOG", "warn"), ("RUST_LOG", "info")][..]),
    ] {
        let dir = tmp.path().join(what.replace([' ', '='], "-"));
        let server = Server::start_env(&dir, &[], env);
        let c = &mut server.client(None);
        assert_eq!(c.request("GET", "/status/v1/simple", None, b"").unwrap().status, 200);
        // A request without the administrator's certificate: denied, a warning.
        assert_eq!(c.request("GET", "/puppet-ca/v1/certificate_statuses/any", None, b"").unwrap().status, 403);
        server.wait_log("the denial", |v| v["event"] == "denied" && v["level"] == "WARN");
        let log = server.log();
        assert!(log.iter().all(|v| v["level"] == "WARN" || v["level"] == "ERROR"), "{what}: {log:?}");
        assert!(!log.iter().any(|v| v["event"] == "request" || v["event"] == "listening"), "{what}: {log:?}");
        assert!(server.stop());
    }

    let server = Server::start(&tmp.path().join("text"), &["--log-format", "text"]);
    assert_eq!(server.client(None).request("GET", "/status/v1/simple", None, b"").unwrap().status, 200);
    let read = || std::fs::read_to_string(&server.log).unwrap();
    Wait::up_to(Duration::from_secs(10))
        .every(Duration::from_millis(50))
        .showing(read)
        .until("a request line", || read().contains("event=\"request\""));
    let text_log = read();
    assert!(text_log.lines().any(|l| l.contains(" INFO ") && l.contains("event=\"listening\"")), "{text_log}");
    assert!(text_log.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()), "{text_log}");
    assert!(server.stop());
}

/// Issue 15: administrators' classification overrides over the API — administrators only,
/// compare-and-swap on the revision (a stale writer gets 409 and the current revision),
/// refused classifications are 400, and `vouch enc` says where its classification came from.
#[test]
fn classification_overrides_over_the_api_are_for_administrators_and_never_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let name = "web01.example.test";
    let attrs = vouched_attributes(&dir, name);
    let mut anon = server.client(None);
    let put = anon
        .request(
            "PUT",
            &format!("/puppet-ca/v1/certificate_request/{name}"),
            Some("text/plain"),
            &csr_for(name, &attrs, &p256()),
        )
        .unwrap();
    assert_eq!(put.status, 200, "{}", put.text());
    let path = format!("/puppet-ca/v1/classification_override/{name}");
    let body = |class: &str, rev: Option<u64>| {
        let mut v = serde_json::json!({ "classification": class });
        if let Some(r) = rev {
            v["expect_revision"] = r.into();
        }
        v.to_string().into_bytes()
    };
    // Anyone without an administrator certificate: 403, nothing changed.
    let r = anon.request("PUT", &path, Some("application/json"), &body("classes: [role::db]\n", None)).unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    let r = anon.request("GET", &path, None, b"").unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    let mut admin = server.admin();
    let r = admin.request("GET", &path, None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["revision"], 0);
    let r = admin.request("PUT", &path, Some("application/json"), &body("classes: [role::db]\n", Some(0))).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["revision"], 1);
    // A stale writer (expects 0, it is 1): 409 with the current state, nothing written.
    let r = admin.request("PUT", &path, Some("application/json"), &body("classes: [role::web]\n", Some(0))).unwrap();
    assert_eq!(r.status, 409, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["revision"], 1, "{v}");
    assert_eq!(v["classification"], "classes: [role::db]\n", "{v}");
    // A classification a conductor could not sign: 400.
    let r = admin.request("PUT", &path, Some("application/json"), &body("classes: !!python/object x\n", None)).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    let enc = ok(&vouch().args(["--dir", s(&dir), "enc", name]).output().unwrap());
    let enc: serde_json::Value = serde_json::from_str(&enc).unwrap();
    assert_eq!(enc["classes"][0], "role::db", "{enc}");
    assert_eq!(enc["parameters"]["vouch_source"], "override", "{enc}");
    let r = admin.request("DELETE", &format!("{path}?expect_revision=1"), None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let enc = ok(&vouch().args(["--dir", s(&dir), "enc", name]).output().unwrap());
    assert!(enc.contains("\"vouch_source\": \"certificate\""), "{enc}");
    // The audit log has a line per change.
    let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap_or_default();
    assert_eq!(audit.matches("\"event\":\"override-set\"").count(), 1, "{audit}");
    assert_eq!(audit.matches("\"event\":\"override-cleared\"").count(), 1, "{audit}");
    assert!(server.stop());
}

/// Review of issue 17, finding 8: a name that became reserved after a certificate carrying it
/// was issued (here: a server's alt name that `vouch serve` now presents) is not renewed; the
/// refusal is audited.
#[test]
fn renewal_refuses_an_alt_name_reserved_since_it_was_issued() {
    use vouch::encoding::der;
    const SERVER: &str = "compile01.example.test";
    const ALT: &str = "puppet.example.test";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let first = Server::start(&dir, &["--server-name", "localhost"]);
    assert!(first.stop());
    let subject = ok(&openssl(&[
        "x509",
        "-in",
        s(&dir.join("conductor/conductor_crt.pem")),
        "-noout",
        "-subject",
        "-nameopt",
        "RFC2253",
    ]));
    let subject = subject.trim().strip_prefix("subject=").unwrap().trim().to_string();
    let policy = dir.join("policy.toml");
    let mut p = std::fs::read_to_string(&policy).unwrap();
    p.push_str(&format!(
        "\n[[conductor]]\nname = \"fleet\"\nsubject = \"{subject}\"\nservers = [\"{SERVER}\"]\n\
         dns_alt_names = [\"{ALT}\"]\n"
    ));
    std::fs::write(&policy, p).unwrap();
    // The server's CSR, asking for its certname and ALT, as Puppet's dns_alt_names makes it.
    let attrs = vouched_attributes(&dir, SERVER);
    let key = p256();
    let mut parts = vouch::encoding::csr::parts(&attrs.csr_spec(SERVER).unwrap(), &key);
    let dns = |n: &str| [vec![0x82, u8::try_from(n.len()).unwrap()], n.as_bytes().to_vec()].concat();
    let (a, b) = (dns(SERVER), dns(ALT));
    let san = der::sequence(&[
        &der::oid(vouch::encoding::oids::SUBJECT_ALT_NAME),
        &der::octet_string(&der::sequence(&[&a, &b])),
    ]);
    let exts = parts.extension_request.pop().unwrap();
    let body = der::Reader::new(&exts).any().unwrap().content;
    parts.extension_request.push(der::sequence(&[body, &san]));
    let csr_file = tmp.path().join("server.csr");
    std::fs::write(&csr_file, vouch::encoding::csr::assemble(&parts, &key).unwrap()).unwrap();
    ok(&vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr_file)]).output().unwrap());
    // Renewable while the name is the server's alone.
    let r1 = tmp.path().join("r1.pem");
    ok(&vouch().args(["--dir", s(&dir), "renew", SERVER, "--out", s(&r1)]).output().unwrap());
    let names = ok(&openssl(&["x509", "-in", s(&r1), "-noout", "-ext", "subjectAltName"]));
    assert!(names.contains(ALT), "{names}");
    // The service is restarted under that name: it is now the service's.
    let second = Server::start(&dir, &["--server-name", ALT, "--server-name", "localhost"]);
    assert!(second.stop());
    let names =
        ok(&openssl(&["x509", "-in", s(&dir.join("server/server_crt.pem")), "-noout", "-ext", "subjectAltName"]));
    assert!(names.contains(ALT), "the service does not present {ALT}:\n{names}");
    let r2 = tmp.path().join("r2.pem");
    let o = vouch().args(["--dir", s(&dir), "renew", SERVER, "--out", s(&r2)]).output().unwrap();
    assert!(!o.status.success(), "a reserved name was renewed to the server: {}", text(&o));
    assert!(text(&o).contains("name-reserved") && text(&o).contains(ALT), "{}", text(&o));
    assert!(!r2.exists());
    let audit = std::fs::read_to_string(dir.join("audit.log")).unwrap();
    assert!(
        audit.lines().any(|l| l.contains("\"renewal-refused\"") && l.contains(SERVER) && l.contains("name-reserved")),
        "{audit}"
    );
}

/// A CA with one vouched node (NODE), `vouch serve` running, and the arguments of
/// `vouch enc --ca-url` for it (the cache in `tmp/cache`, the log in `tmp/enc.log`).
struct EncLab {
    tmp: tempfile::TempDir,
    server: Option<Server>,
    args: Vec<String>,
}

const ENC_NODE: &str = "node.example.test";

impl EncLab {
    fn new() -> EncLab {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("vouch");
        let first = Server::start(&dir, &[]);
        assert!(first.stop());
        let csr_file = tmp.path().join("node.csr");
        std::fs::write(&csr_file, csr_for(ENC_NODE, &vouched_attributes(&dir, ENC_NODE), &p256())).unwrap();
        ok(&vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr_file)]).output().unwrap());
        let server = Server::start(&dir, &[]);
        let args = vec![
            "enc".to_string(),
            "--ca-url".into(),
            format!("https://localhost:{}", server.port),
            "--cacert".into(),
            s(&dir.join("ca/ca_bundle.pem")).into(),
            "--cache-dir".into(),
            s(&tmp.path().join("cache")).into(),
            "--log".into(),
            s(&tmp.path().join("enc.log")).into(),
        ];
        EncLab { tmp, server: Some(server), args }
    }

    /// `vouch [--now NOW] enc ... [extra] NODE`.
    fn enc(&self, now: Option<&str>, extra: &[&str]) -> Output {
        let mut c = vouch();
        if let Some(n) = now {
            c.args(["--now", n]);
        }
        c.args(&self.args).args(extra).arg(ENC_NODE).output().unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("enc.log")).unwrap_or_default()
    }
}

/// The nextUpdate of each CRL in a PEM file.
fn next_updates(path: &Path) -> Vec<time::OffsetDateTime> {
    use x509_parser::prelude::FromDer;
    vouch::encoding::pem::find_all(&std::fs::read(path).unwrap(), "X509 CRL")
        .unwrap()
        .iter()
        .map(|d| {
            let (_, c) = x509_parser::revocation_list::CertificateRevocationList::from_der(d).unwrap();
            c.next_update().unwrap().to_datetime()
        })
        .collect()
}

/// Review of issue 17, finding 3: with the CA unreachable, `vouch enc --ca-url` answers from
/// its cache only while the cached CRLs are within their validity (catalogs keep compiling
/// while vouch serve restarts); past a CRL's nextUpdate it refuses (exit 2, logged).
#[test]
fn enc_refuses_once_the_cached_crl_is_past_its_next_update_and_the_ca_is_unreachable() {
    let mut lab = EncLab::new();
    let o = lab.enc(None, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let updates = next_updates(&lab.tmp.path().join("cache/crl.pem"));
    assert_eq!(updates.len(), 2, "the CA's two CRLs");
    assert!(lab.server.take().unwrap().stop());
    let fmt = vouch::encoding::time::format_rfc3339;
    let first = *updates.iter().min().unwrap();
    // Within the CRLs' validity: answered from the cache, logged.
    let within = fmt(first - time::Duration::hours(1));
    let o = lab.enc(Some(&within), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("classes"), "{}", text(&o));
    assert!(lab.log().contains("answering from the cache"), "{}", lab.log());
    // Past the first nextUpdate: refused, nothing printed, the reason logged.
    let past = fmt(first + time::Duration::hours(1));
    let o = lab.enc(Some(&past), &[]);
    assert_eq!(o.status.code(), Some(2), "a lapsed CRL was trusted: {}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let log = lab.log();
    assert!(log.contains(&format!("refused {ENC_NODE}")) && log.contains("nextUpdate"), "{log}");
}

/// Review of issue 17, finding 4: the classifier's cache is this user's alone — created 0700,
/// entries 0600, refused (exit 2, logged, with the fix) when another user owns it or its group
/// or others may write it — and an override found in it counts only with an administrator's
/// credentials configured.
#[test]
fn enc_trusts_its_cache_only_when_private_and_cached_overrides_only_with_admin_credentials() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let lab = EncLab::new();
    let o = lab.enc(None, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let cache = lab.tmp.path().join("cache");
    assert_eq!(mode(&cache), 0o700);
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.join("serial")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(mode(&entries[0]), 0o600);
    assert_eq!(mode(&cache.join(format!("name/{ENC_NODE}"))), 0o600);
    // An override planted in the (fresh) entry is not printed without --client-cert/--client-key.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&entries[0]).unwrap()).unwrap();
    v["override_text"] = serde_json::json!("classes: [planted]\n");
    std::fs::write(&entries[0], serde_json::to_vec(&v).unwrap()).unwrap();
    let o = lab.enc(None, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("planted") && out.contains("\"vouch_source\": \"certificate\""), "{out}");
    // Writable by its group: refused, logged with the fix.
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o770)).unwrap();
    let o = lab.enc(None, &[]);
    assert_eq!(o.status.code(), Some(2), "a group-writable cache was trusted: {}", text(&o));
    assert!(o.stdout.is_empty());
    assert!(lab.log().contains(&format!("refused {ENC_NODE}")) && lab.log().contains("chmod 0700"), "{}", lab.log());
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(lab.enc(None, &[]).status.code(), Some(0));
    // Owned by another user (this test runs as root, or cannot make one).
    if std::fs::metadata(&cache).unwrap().uid() == 0 {
        std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
        let o = lab.enc(None, &[]);
        assert_eq!(o.status.code(), Some(2), "another user's cache was trusted: {}", text(&o));
        assert!(lab.log().contains("chown -R"), "{}", lab.log());
    }
}

/// Review of issue 17, finding 7: `vouch crl --fetch` refuses a CRL older (lower CRL number)
/// than the one of the same issuer in the file it would replace — here a CA restored from a
/// backup taken before a revocation — with its own error; the file is left as it was.
#[test]
fn crl_fetch_refuses_to_roll_the_crl_back() {
    let mut lab = EncLab::new();
    let tmp = lab.tmp.path().to_path_buf();
    let dir = tmp.join("vouch");
    let backup = tmp.join("backup");
    let server = lab.server.take().unwrap();
    assert!(server.stop());
    ok(&Command::new("cp").args(["-a", s(&dir), s(&backup)]).output().unwrap());
    let server = Server::start(&dir, &[]);
    let out = tmp.join("crl.pem");
    let fetch = |port: u16| {
        vouch()
            .args(["crl", "--fetch", "--ca-url", &format!("https://localhost:{port}")])
            .args(["--cacert", s(&dir.join("ca/ca_bundle.pem")), "--out", s(&out)])
            .output()
            .unwrap()
    };
    ok(&fetch(server.port));
    // A revocation: the master CA's CRL number goes up; the file gets it.
    ok(&vouch().args(["--dir", s(&dir), "revoke", ENC_NODE]).output().unwrap());
    std::thread::sleep(Duration::from_millis(1100));
    let o = fetch(server.port);
    assert!(text(&o).contains("wrote"), "{}", text(&o));
    let newer = std::fs::read(&out).unwrap();
    assert!(server.stop());
    // The backup, served: its CRL does not list the revocation. Fetched in full (no
    // If-Modified-Since), refused; the file keeps the newer CRLs.
    let _ = std::fs::remove_file(tmp.join(".crl.pem.vouch-fetch"));
    let restored = Server::start(&backup, &[]);
    let o = fetch(restored.port);
    assert_eq!(o.status.code(), Some(2), "a rolled-back CRL was written: {}", text(&o));
    assert!(text(&o).contains("refusing to roll the CRL back") && text(&o).contains("older"), "{}", text(&o));
    assert_eq!(std::fs::read(&out).unwrap(), newer, "the file was changed");
    assert!(restored.stop());
}

/// The server answers `GET certificate` for what it just stored from memory: another process
/// that revokes or cleans that certificate meanwhile (the CLI, under the store's lock) makes
/// it forget, so it never hands out a certificate the store no longer holds as current.
#[test]
fn a_certificate_another_process_revoked_or_cleaned_is_never_answered_from_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let mut c = server.client(None);
    for cmd in ["revoke", "clean"] {
        let name = format!("{cmd}d.example.test");
        let csr = csr_for(&name, &vouched_attributes(&dir, &name), &p256());
        let put =
            c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr).unwrap();
        assert_eq!(put.status, 200, "{}", put.text());
        let path = format!("/puppet-ca/v1/certificate/{name}");
        for _ in 0..2 {
            assert_eq!(c.request("GET", &path, None, b"").unwrap().status, 200);
        }
        ok(&vouch().args(["--dir", s(&dir), cmd, &name]).output().unwrap());
        let after = c.request("GET", &path, None, b"").unwrap();
        assert_eq!(after.status, 404, "{cmd}: {}", after.text());
    }
}

/// `.lock` removed while the server runs (an operator cleaning up a "stale" lock file, a
/// restore): the CLI's clean marks a new `.lock`; the server, whose descriptor still reads
/// its own mark in the old one, must not answer the cleaned certificate from memory.
#[test]
fn a_certificate_cleaned_after_lock_file_was_removed_is_not_answered_from_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let mut c = server.client(None);
    let name = "relocked.example.test";
    let csr = csr_for(name, &vouched_attributes(&dir, name), &p256());
    let put = c.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), &csr).unwrap();
    assert_eq!(put.status, 200, "{}", put.text());
    let path = format!("/puppet-ca/v1/certificate/{name}");
    assert_eq!(c.request("GET", &path, None, b"").unwrap().status, 200);
    std::fs::remove_file(dir.join("ca/.lock")).unwrap();
    ok(&vouch().args(["--dir", s(&dir), "clean", name]).output().unwrap());
    assert!(!dir.join(format!("ca/signed/{name}.pem")).exists(), "cleaned on disk");
    let after = c.request("GET", &path, None, b"").unwrap();
    assert_eq!(after.status, 404, "cleaned by the CLI, still served: {}", after.text());
}

/// An anonymous client (answered from memory on the connection's task) and an authenticated
/// one (answered on the blocking pool) get the same answers for the CA bundle
/// and the CRLs: status, headers (but the date), body; plain, gzip, 304.
#[test]
fn the_bundle_and_the_crls_from_memory_answer_as_the_blocking_pool_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let mut anon = server.client(None);
    let mut admin = server.admin();
    let gzip = ("Accept-Encoding", "gzip;q=1.0,deflate;q=0.6,identity;q=0.3");
    let crl = "/puppet-ca/v1/certificate_revocation_list/ca";
    let lm = anon.request("GET", crl, None, b"").unwrap().header("last-modified").unwrap().to_string();
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("/puppet-ca/v1/certificate/ca", vec![]),
        ("/puppet-ca/v1/certificate/ca", vec![gzip]),
        (crl, vec![]),
        (crl, vec![gzip]),
        (crl, vec![("If-Modified-Since", lm.as_str())]),
        (crl, vec![("If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"), gzip]),
    ];
    for (path, headers) in cases {
        // Twice each: the first anonymous request may fill the memory.
        for _ in 0..2 {
            let a = anon.request_with_headers("GET", path, &headers, b"").unwrap();
            let p = admin.request_with_headers("GET", path, &headers, b"").unwrap();
            let strip = |r: &Response| {
                let mut h: Vec<_> = r.headers.iter().filter(|(k, _)| k != "date").cloned().collect();
                h.sort();
                (r.status, h, r.body.clone())
            };
            assert_eq!(strip(&a), strip(&p), "{path} {headers:?}");
        }
    }
    assert!(server.stop());
}

/// The replay journal's expired buckets are removed by the server's maintenance (at start,
/// then every minute, a bounded part at a time, without the store's lock), not by the claim
/// of a request: the claim runs under the store's lock, and a busy hour's bucket holds
/// hundreds of thousands of entries.
#[test]
fn the_server_prunes_expired_replay_buckets_in_its_maintenance() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    ok(&vouch().args(["--dir", s(&dir), "ca", "init"]).output().unwrap());
    let replay = dir.join("replay");
    // Three days old (pruned: more than a day past its hour), and one of the current hour (kept).
    let old = replay.join("2020010100");
    let hour = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let current =
        replay.join(format!("{:04}{:02}{:02}{:02}", hour.year(), u8::from(hour.month()), hour.day(), hour.hour()));
    for bucket in [&old, &current] {
        std::fs::create_dir_all(bucket).unwrap();
        for i in 0..300 {
            std::fs::write(bucket.join(format!("{i:064x}")), "{}").unwrap();
        }
    }
    let server = Server::start(&dir, &[]);
    Wait::up_to(Duration::from_secs(30))
        .every(Duration::from_millis(100))
        .showing(|| std::fs::read_to_string(&server.log).unwrap())
        .until("the old bucket pruned", || !old.exists());
    assert_eq!(std::fs::read_dir(&current).unwrap().count(), 300, "the current hour's bucket is kept");
    let mut said = None;
    Wait::up_to(Duration::from_secs(10)).every(Duration::from_millis(100)).until("a journal-pruned line", || {
        said = server.log().into_iter().find(|v| v["event"] == "journal-pruned");
        said.is_some()
    });
    let said = said.unwrap();
    assert_eq!(said["removed"], 300, "{said}");
    assert_eq!(said["more_left"], false, "{said}");
    assert!(server.stop());
}

/// The command line's commands say when they wait for the store's lock for more than a
/// second (`cli_friction.rs::a_command_waiting_for_the_stores_lock_says_so_and_who_holds_it`);
/// `vouch serve` goes through the same lock for every batch of requests and must not: its
/// requests wait their turn without a line each in its log.
#[test]
fn a_request_waiting_for_the_stores_lock_is_not_announced_by_serve() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let held = std::fs::OpenOptions::new().read(true).write(true).open(dir.join("ca/.lock")).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let ino = held.metadata().unwrap().ino();
    let name = "a.example.test";
    let csr = csr_for(name, &vouched_attributes(&dir, name), &p256());
    let mut client = server.client(None);
    let put = std::thread::spawn(move || {
        let r = client.request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), None, &csr).unwrap();
        (r.status, r.text())
    });
    // Until the server waits in flock (a deadline, not a timing assertion), then long past
    // the second after which a command says so.
    Wait::up_to(Duration::from_secs(60))
        .every(Duration::from_millis(20))
        .until("the server waits for the lock", || waits_for_flock(server.pid() as u32, ino));
    std::thread::sleep(Duration::from_millis(2500));
    drop(held);
    let (status, body) = put.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(!log.contains("waiting for the store's lock"), "{log}");
    assert!(server.stop());
}

/// `vouch bench serve` against a running server issues every certificate it counts; with
/// `--transport-only` (the transport's floor of `examples/floors.sh`) its agents ask for the CA
/// certificate twice instead, and nothing is issued.
#[test]
fn bench_serve_issues_what_it_counts_and_its_transport_floor_issues_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &[]);
    let (addr, pid) = (server.addr().to_string(), server.pid().to_string());
    let run = |extra: &[&str]| -> serde_json::Value {
        let o = vouch()
            .arg("--dir")
            .arg(&dir)
            .args(["bench", "serve", "--addr", &addr, "--agents", "2", "--per-agent", "3", "--server-pid", &pid])
            .args(["--format", "json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
    };
    let before = inventory(&dir).len();
    let rows = run(&[]);
    assert_eq!((rows[0]["certificates"].as_u64(), rows[0]["failures"].as_u64()), (Some(6), Some(0)), "{rows}");
    assert!(rows[0]["server_cpu_ms_per_cert"].as_f64().is_some(), "{rows}");
    assert_eq!(inventory(&dir).len(), before + 6);
    let rows = run(&["--transport-only"]);
    assert_eq!((rows[0]["certificates"].as_u64(), rows[0]["failures"].as_u64()), (Some(6), Some(0)), "{rows}");
    assert_eq!(inventory(&dir).len(), before + 6, "the transport's floor issued a certificate");
    assert!(server.stop());
    // Nothing listening any more: no figures, a failure that names its cause.
    let o = vouch()
        .arg("--dir")
        .arg(&dir)
        .args(["bench", "serve", "--addr", &addr, "--agents", "2", "--per-agent", "1", "--transport-only"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(err.contains("no certificate was served at 2 agents") && err.contains("refused"), "{err}");
}

/// `--service-key-type p256` under an RSA-4096 CA: the service presents a P-256 key the RSA
/// CA signed (each agent's handshake signed with it: half a whole bootstrap's CPU), a real
/// agent bootstraps through it and gets an RSA-signed certificate, a restart without the flag
/// keeps the certificate in place, and another type asked for issues it again, the one before
/// revoked.
#[test]
fn a_service_key_of_its_own_type_under_an_rsa_ca_serves_a_real_agent_and_changes_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let text_of = |p: &Path| ok(&openssl(&["x509", "-in", s(p), "-noout", "-text"]));
    let server = Server::start(&dir, &["--key-type", "rsa4096", "--service-key-type", "p256"]);
    let served = text_of(&dir.join("server/server_crt.pem"));
    assert!(served.contains("Public-Key: (256 bit)") && served.contains("sha256WithRSAEncryption"), "{served}");
    assert!(text_of(&dir.join("ca/ca_crt.pem")).contains("Public-Key: (4096 bit)"));
    let attrs = tmp.path().join("web01.yaml");
    conductor_sign(&dir, Some(CERTNAME), CLASSIFICATION, &attrs);
    let conf = agent(tmp.path(), &server, CERTNAME, Some(&attrs), "");
    let (o, _) = bootstrap(&conf);
    assert!(o.status.success(), "{}\n{}", text(&o), std::fs::read_to_string(&server.log).unwrap());
    let node = text_of(&conf.parent().unwrap().join(format!("ssl/certs/{CERTNAME}.pem")));
    assert!(node.contains("sha256WithRSAEncryption"), "{node}");
    ok(&puppet(&conf, &["ssl", "verify"]));
    let first = serial_of(&dir.join("server/server_crt.pem"));
    assert!(server.stop());

    let again = Server::start(&dir, &["--key-type", "rsa4096"]);
    assert_eq!(serial_of(&dir.join("server/server_crt.pem")), first, "{}", again.banner);
    assert!(!again.banner.contains("issued again"), "{}", again.banner);
    assert!(again.stop());

    let third = Server::start(&dir, &["--key-type", "rsa4096", "--service-key-type", "rsa2048"]);
    assert!(third.banner.contains("not a key of --service-key-type"), "{}", third.banner);
    assert!(text_of(&dir.join("server/server_crt.pem")).contains("Public-Key: (2048 bit)"));
    let crl = ok(&openssl(&["crl", "-in", s(&dir.join("ca/ca_crl.pem")), "-noout", "-text"]));
    assert!(crl.to_ascii_lowercase().replace(':', "").contains(&first), "the P-256 one is valid:\n{crl}");
    // The agent reaches the service through its new key.
    let (o, _) = bootstrap(&conf);
    assert!(o.status.success(), "{}", text(&o));
    assert!(third.stop());
}

/// A name in a request that no certificate has is quoted back in the 404 with every
/// character that is not printable escaped: a right-to-left override (U+202E) or a
/// terminal escape in the path never reaches the reader's screen raw.
#[test]
fn a_not_found_answer_quotes_an_unprintable_name_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("vouch"), &[]);
    for (path, shown) in [("%E2%80%AEgro.elpmaxe", "\\u{202e}gro.elpmaxe"), ("a%1B%5B31mred", "a\\u{1b}[31mred")] {
        let r = server.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{path}"), None, b"").unwrap();
        let body = r.text();
        assert_eq!(r.status, 404, "{body}");
        assert!(body.contains(shown) && !body.contains('\u{202e}') && !body.contains('\u{1b}'), "{body:?}");
    }
    assert!(server.stop());
}

/// the paths no route matches, a method not allowed on a route and an
/// administrator's route asked without a certificate are quoted back decoded and raw: `Not
/// Found: no route for …`, `Method Not Allowed: … is not allowed on …` and `Forbidden
/// request: …` echo a percent-encoded right-to-left override (U+202E) or terminal
/// escape (ESC) from the request line unescaped, as the 404 of a certificate's name no
/// longer does. What must hold: no answer of the CA API carries a control or bidi
/// character the request put there.
#[test]
fn no_route_and_method_answers_quote_an_unprintable_path_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("vouch"), &[]);
    let mut raw = Vec::new();
    for (method, path) in [
        ("GET", "/puppet-ca/v1/%E2%80%AEgro.elpmaxe"),
        ("GET", "/%1B%5B31mred"),
        ("POST", "/puppet-ca/v1/certificate/%E2%80%AEgro.elpmaxe"),
        ("DELETE", "/puppet-ca/v1/certificate_revocation_list/%1B%5B31mred"),
        // No client certificate: 403 Forbidden quoting the path.
        ("GET", "/puppet-ca/v1/certificate_status/%E2%80%AEgro.elpmaxe"),
    ] {
        let r = server.client(None).request(method, path, None, b"").unwrap();
        let body = r.text();
        if body.contains('\u{202e}') || body.contains('\u{1b}') {
            raw.push(format!("{method} {path} -> {}: {body:?}", r.status));
        }
    }
    assert!(server.stop());
    assert!(raw.is_empty(), "answers echoing a raw control/bidi character:\n{}", raw.join("\n"));
}

/// a node's CSR carries a self-made conductor certificate whose subject holds
/// a right-to-left override (U+202E); its refusal ("conductor certificate … does not chain
/// to a trusted root") names that subject as it is, and an administrator's
/// `certificate_status` answer (JSON, which escapes controls but not U+202E) quotes the
/// pending request's reasons with the character raw. What must hold: no answer of the CA
/// API carries a control or bidi character a request put there.
#[test]
fn a_pending_requests_reasons_quote_a_bidi_conductor_subject_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("vouch"), &[]);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::CommonName, "evil\u{202e}rehcnual");
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![rcgen::ExtendedKeyUsagePurpose::Other(vouch::encoding::oids::EKU_CONDUCTOR.to_vec())];
    let cert = params.self_signed(&key).unwrap();
    let name = "bidi-node.example.test";
    let class = vouch::vouching::classification::Classification::from_yaml("classes: [ntp]\n", 65536).unwrap();
    let expiry = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let enc = vouch::vouching::attrs::CertEncoding::Base64Der;
    let a = vouch::vouching::attrs::vouch(cert.der(), &key, &class, expiry, enc, Some(name)).unwrap();
    let attrs = vouch::vouching::attrs::CsrAttributes::from_vouched(&a, Some(vouch::policy::DEFAULT_MIRROR_OID));
    let csr = common::agents::csr_for(name, &attrs, &p256());
    let path = format!("/puppet-ca/v1/certificate_request/{name}");
    let r = server.client(None).request("PUT", &path, Some("text/plain"), &csr).unwrap();
    assert!(!r.text().contains('\u{202e}'), "{:?}", r.text());
    let st = server.admin().request("GET", &format!("/puppet-ca/v1/certificate_status/{name}"), None, b"").unwrap();
    let body = st.text();
    assert!(server.stop());
    assert_eq!(st.status, 200, "{body}");
    assert!(body.contains("conductor"), "the refusal is not the conductor's: {body}");
    assert!(!body.contains('\u{202e}'), "certificate_status quotes the bidi character raw: {body:?}");
}

/// `vouch bench serve` whose level is served in part (the server closes every
/// connection past one per address: two of three agents fail) warns of the partial failure
/// with `eprintln!`, which panics (exit 101) when stderr cannot be written (here /dev/full).
/// What must hold: the figures are printed and the run ends without a panic.
#[test]
fn bench_serve_partial_failure_warning_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vouch");
    let server = Server::start(&dir, &["--max-connections-per-address", "1"]);
    let addr = server.addr().to_string();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = vouch()
        .arg("--dir")
        .arg(&dir)
        .args(["bench", "serve", "--addr", &addr, "--agents", "3", "--per-agent", "2", "--transport-only"])
        .args(["--format", "json"])
        .stderr(full)
        .output()
        .unwrap();
    assert!(server.stop());
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    let (certs, failed) = (rows[0]["certificates"].as_u64().unwrap(), rows[0]["failures"].as_u64().unwrap());
    assert!(certs > 0 && failed > 0, "no partial failure to warn of: {rows}");
    assert_ne!(o.status.code(), Some(101), "vouch bench serve panicked on an unwritable stderr: {rows}");
}
