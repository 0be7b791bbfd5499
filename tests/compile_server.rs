//! vouch serve as the fleet's CA, a stock Puppet Server (Debian's puppetserver 7.9 jar,
//! private config) compiling catalogs with its own CA disabled, and real agents:
//!
//! the compile server enrols from vouch serve with an alt name (this machine's host name,
//! which agents use as `server`, never its certname) that its conductor's scope allows; a
//! vouched agent bootstraps against vouch, runs against the compile server and gets the
//! class and parameter `vouch enc --ca-url` reads from its certificate; an agent vouch
//! refuses gets no certificate; nodes asking for alt names are refused as the policy says;
//! `vouch revoke` then `vouch crl --fetch` on the compile server: the next run is refused
//! and the classifier refuses; with vouch serve stopped, the classifier answers from its
//! cache (a stale answer logged) and still refuses the revoked node.
//!
//! One Puppet Server start. Needs `puppetserver`, `puppet-agent`, `openssl` (.ci/run installs
//! them): missing, the test fails, never skips. Every process is stopped by its PID.

mod common;

use common::processes::{free_port, read, run_guarded, start_puppetserver, Guard, Wait};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const JAR: &str = "/usr/share/puppetserver/puppetserver.jar";
const MARKER: &str = "VOUCHCOMPILE-MARKER";

struct Lab {
    tmp: PathBuf,
    vouch_dir: PathBuf,
    server: PathBuf,
    vouch_port: u16,
    server_port: u16,
    alt_name: String,
    fingerprint: String,
}

impl Lab {
    fn ssl(&self) -> PathBuf {
        self.server.join("etc/ssl")
    }
    fn log(&self) -> String {
        read(&self.server.join("log/puppetserver.log"))
    }
    fn ca_url(&self) -> String {
        format!("https://localhost:{}", self.vouch_port)
    }

    /// The conductor signs attributes (`classification` file) for `certname` into `out`.
    fn attributes(&self, vouched_for: &str, classification: &Path, out: &Path) {
        let v = &self.vouch_dir;
        ok(&vouch()
            .args(["--dir", s(v), "conductor", "sign", "--cert", s(&v.join("cloud1.pem"))])
            .args(["--key", s(&v.join("cloud1.key")), "--classification", s(classification)])
            .args(["--certname", vouched_for, "--expires-in", "30m", "--format", "puppet-yaml", "--out", s(out)])
            .output()
            .unwrap());
    }

    /// A private agent confdir: vouch is its CA, the compile server (by its alt name) its server.
    fn agent_dir(&self, certname: &str, extra: &str) -> PathBuf {
        let a = self.tmp.join(format!("agent-{certname}"));
        std::fs::create_dir_all(&a).unwrap();
        let mut conf = format!(
            "[main]\ncertname = {certname}\nserver = {}\nserverport = {}\nca_server = localhost\nca_port = {}\n\
             ca_fingerprint = {}\n{extra}",
            self.alt_name, self.server_port, self.vouch_port, self.fingerprint
        );
        for d in ["ssldir:ssl", "vardir:var", "rundir:run", "logdir:log", "publicdir:public", "codedir:code"] {
            let (k, v) = d.split_once(':').unwrap();
            conf.push_str(&format!("{k} = {}\n", a.join(v).display()));
        }
        std::fs::write(a.join("puppet.conf"), conf).unwrap();
        a
    }

    fn puppet(&self, confdir: &Path, args: &[&str], tag: &str) -> (i32, String) {
        let mut c = Command::new("puppet");
        c.args(args).args(["--confdir", s(confdir), "--waitforcert", "0", "--color", "false"]);
        run_guarded(c, &self.tmp, tag, Duration::from_secs(180))
    }

    /// `vouch list --all --format json` of the CA.
    fn list(&self) -> String {
        ok(&vouch().args(["--dir", s(&self.vouch_dir), "list", "--all", "--format", "json"]).output().unwrap())
    }
}

fn san_of(cert: &Path) -> String {
    let text = ok(&Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in", s(cert)])
        .output()
        .unwrap());
    text.lines().nth(1).unwrap_or("").trim().to_string()
}

/// Whether a TLS handshake to the compile server with `cert`/`key` succeeds (any HTTP answer).
fn handshake(lab: &Lab, cert: &Path, key: &Path) -> bool {
    let script = format!(
        "require 'net/http'; require 'openssl'\n\
         h = Net::HTTP.new('{host}', {port}); h.use_ssl = true; h.open_timeout = 5; h.read_timeout = 5\n\
         h.ca_file = '{ca}'; h.cert = OpenSSL::X509::Certificate.new(File.read('{cert}'))\n\
         h.key = OpenSSL::PKey.read(File.read('{key}'))\n\
         begin; h.get('/puppet/v3/environments'); exit 0; rescue OpenSSL::SSL::SSLError, EOFError, Errno::ECONNRESET; exit 1; end\n",
        host = lab.alt_name,
        port = lab.server_port,
        ca = s(&lab.ssl().join("certs/ca.pem")),
        cert = s(cert),
        key = s(key),
    );
    let o = Command::new("ruby").arg("-e").arg(&script).output().unwrap();
    match o.status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => panic!("the handshake probe failed: {}", String::from_utf8_lossy(&o.stderr)),
    }
}

#[test]
fn a_stock_puppet_server_compiles_for_vouch_serve_agents() {
    let t0 = Instant::now();
    require("puppet", "puppet-agent");
    require("java", "puppetserver");
    require("openssl", "openssl");
    require("ruby", "ruby");
    assert!(Path::new(JAR).exists(), "this test needs {JAR}: apt-get install -y puppetserver (.ci/run installs it)");
    let (alt_name, alt_addr) = common::processes::host_name_and_address();

    let tmp = tempfile::Builder::new().prefix("vouch-compile").tempdir().unwrap();
    let t = tmp.path();
    let v = t.join("vouch");
    // vouch's side: the CA, a conductor, and a policy whose scope marks compile servers.
    ok(&vouch().args(["--dir", s(&v), "ca", "init"]).output().unwrap());
    ok(&vouch()
        .args(["--dir", s(&v), "conductor", "new", "cloud1", "--cert-out", s(&v.join("cloud1.pem"))])
        .args(["--key-out", s(&v.join("cloud1.key"))])
        .output()
        .unwrap());
    let policy = v.join("policy.toml");
    let mut text = read(&policy);
    text.push_str(&format!(
        "\n[[conductor]]\nname = \"cloud1\"\nsubject = \"CN=cloud1\"\nservers = [\"compile*.example.test\"]\n\
         dns_alt_names = [\"{alt_name}\", \"puppet.example.test\"]\n"
    ));
    std::fs::write(&policy, text).unwrap();
    // vouch serve on loopback, named localhost only (so the host name is free for the compile server).
    let serve_log = t.join("serve.log");
    let (child, banner, vouch_port) = start_serve(serve_cmd(&v).args(["--server-name", "localhost"]), &serve_log);
    let serve = Guard { child, what: "vouch serve", grace: Duration::from_secs(10) };
    let fingerprint = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("ca_fingerprint = "))
        .unwrap_or_else(|| panic!("no ca_fingerprint in the banner:\n{banner}"))
        .to_string();
    assert!(banner.contains("compile server"), "the banner says nothing of compile servers:\n{banner}");

    let lab = Lab {
        tmp: t.to_path_buf(),
        vouch_dir: v.clone(),
        server: t.join("server"),
        vouch_port,
        server_port: free_port(),
        alt_name: alt_name.clone(),
        fingerprint,
    };

    // The compile server: Debian's puppetserver with its CA service disabled (keeping the
    // filesystem watcher that reloads the CRL), listening on the host name's address.
    let support = root().join("tests/support/puppetserver");
    ok(&Command::new("bash")
        .arg(support.join("setup.sh"))
        .arg(&lab.server)
        .arg(lab.server_port.to_string())
        .output()
        .unwrap());
    let ca_cfg = lab.server.join("services.d/ca.cfg");
    let cfg = read(&ca_cfg)
        .replace(
            "\npuppetlabs.services.ca.certificate-authority-service/certificate-authority-service",
            "\n#puppetlabs.services.ca.certificate-authority-service/certificate-authority-service",
        )
        .replace(
            "#puppetlabs.services.ca.certificate-authority-disabled-service",
            "puppetlabs.services.ca.certificate-authority-disabled-service",
        );
    assert!(cfg.contains("\npuppetlabs.services.ca.certificate-authority-disabled-service"), "{cfg}");
    std::fs::write(&ca_cfg, cfg).unwrap();
    let web = lab.server.join("conf.d/webserver.conf");
    std::fs::write(&web, read(&web).replace("ssl-host: 127.0.0.1", &format!("ssl-host: {alt_addr}"))).unwrap();
    let compile01 = "compile01.example.test";
    let ssl = lab.ssl();
    let enc_conf = t.join("enc.toml");
    let enc_log = t.join("enc.log");
    let enc_cache = t.join("enc-cache");
    std::fs::write(
        &enc_conf,
        format!(
            "ca_url = \"{}\"\ncacert = \"{}\"\ncrl = [\"{}\"]\ncrl_refresh = \"2s\"\ncache_dir = \"{}\"\nlog = \"{}\"\n",
            lab.ca_url(),
            s(&ssl.join("certs/ca.pem")),
            s(&ssl.join("crl.pem")),
            s(&enc_cache),
            s(&enc_log)
        ),
    )
    .unwrap();
    let enc = t.join("enc.sh");
    std::fs::write(
        &enc,
        format!("#!/bin/sh\nexec {} enc --config {} -- \"$1\"\n", env!("CARGO_BIN_EXE_vouch"), s(&enc_conf)),
    )
    .unwrap();
    ok(&Command::new("chmod").arg("755").arg(&enc).output().unwrap());
    let sv = &lab.server;
    let conf = format!(
        "[main]\ncertname = {compile01}\nserver = {alt_name}\nserverport = {sp}\nca_server = localhost\n\
         ca_port = {vouch_port}\nca_fingerprint = {fp}\ndns_alt_names = {alt_name},puppet.example.test\n\
         ssldir = {ssl}\nhostcert = {ssl}/certs/{compile01}.pem\nhostprivkey = {ssl}/private_keys/{compile01}.pem\n\
         localcacert = {ssl}/certs/ca.pem\nhostcrl = {ssl}/crl.pem\n\
         vardir = {d}/var\nrundir = {d}/run\nlogdir = {d}/log\npublicdir = {d}/public\ncodedir = {d}/code\n\
         [server]\nnode_terminus = exec\nexternal_nodes = {enc}\n",
        sp = lab.server_port,
        fp = lab.fingerprint,
        ssl = s(&ssl),
        d = s(sv),
        enc = s(&enc),
    );
    std::fs::write(sv.join("etc/puppet.conf"), conf).unwrap();
    let module = sv.join("code/environments/production/modules/vouchdemo/manifests");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(
        module.join("init.pp"),
        format!(
            "class vouchdemo {{\n  notify {{ 'vouchdemo':\n    message => \"{MARKER} tier=${{::tier}} \
             role=${{trusted['extensions']['pp_role']}}\",\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let web_yaml = t.join("web.yaml");
    std::fs::write(
        &web_yaml,
        "classes: [vouchdemo]\nparameters: {tier: frontend}\nenvironment: production\nextensions: {pp_role: web}\n",
    )
    .unwrap();
    let server_yaml = t.join("server.yaml");
    std::fs::write(&server_yaml, "classes: []\nparameters: {role: compile}\nenvironment: production\n").unwrap();

    // 1. The compile server enrols from vouch serve, asking for its alt names.
    lab.attributes(compile01, &server_yaml, &sv.join("etc/csr_attributes.yaml"));
    let start = Instant::now();
    let (code, out) = lab.puppet(&sv.join("etc"), &["ssl", "bootstrap"], "compile01-bootstrap");
    assert_eq!(code, 0, "the compile server did not enrol:\n{out}\nvouch serve:\n{}", read(&serve_log));
    eprintln!("compile server enrolled in {:.1} s", start.elapsed().as_secs_f64());
    let hostcert = ssl.join(format!("certs/{compile01}.pem"));
    let mut san: Vec<String> = san_of(&hostcert).split(", ").map(String::from).collect();
    san.sort();
    let mut want = vec![format!("DNS:{compile01}"), format!("DNS:{alt_name}"), "DNS:puppet.example.test".to_string()];
    want.sort();
    assert_eq!(san, want, "the compile server's certificate does not carry exactly its certname and alt names");
    // Its CRL, as Puppet Server and the agents need it: the CA's two CRLs (master and root).
    ok(&vouch()
        .args(["crl", "--fetch", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
        .args(["--out", s(&ssl.join("crl.pem"))])
        .output()
        .unwrap());
    assert_eq!(read(&ssl.join("crl.pem")).matches("BEGIN X509 CRL").count(), 2, "hostcrl must hold both CRLs");
    let early_crl = t.join("early-crl.pem");
    std::fs::copy(ssl.join("crl.pem"), &early_crl).unwrap();

    // 2. Nodes asking for alt names are refused as the policy says: a node that is no server,
    // and a server asking for a name its scope does not list.
    for (certname, names, code_want) in [
        ("web09.example.test", alt_name.as_str(), "alt-names-not-a-server"),
        ("compile02.example.test", "evil.example.test", "alt-name-out-of-scope"),
    ] {
        let a = lab.agent_dir(certname, &format!("dns_alt_names = {names}\n"));
        lab.attributes(certname, &server_yaml, &a.join("csr_attributes.yaml"));
        let (code, out) = lab.puppet(&a, &["ssl", "bootstrap"], &format!("{certname}-bootstrap"));
        assert_ne!(code, 0, "{certname} got a certificate:\n{out}");
        assert!(!a.join(format!("ssl/certs/{certname}.pem")).exists(), "{certname} holds a certificate");
        let list = lab.list();
        assert!(list.contains(certname) && list.contains(code_want), "want {code_want} for {certname} in:\n{list}");
    }
    // An administrator sees the DNS names a pending request asks for (as `puppetserver ca list`
    // shows them), and cannot grant them: "signed" decides again by the policy, and alt names
    // come only from a server's scope (review of issue 17, finding 1).
    let web09 = "web09.example.test";
    let admin = {
        let read_pem = |f: &str| std::fs::read(v.join(f)).unwrap();
        let config = vouch::serve::client::tls_config(
            &read_pem("ca/ca_bundle.pem"),
            Some((&read_pem("admin/admin_crt.pem"), &read_pem("admin/admin_key.pem"))),
        )
        .unwrap();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], lab.vouch_port));
        vouch::serve::client::Client::new(config, addr, "localhost").unwrap()
    };
    let mut admin = admin;
    let r = admin.request("GET", &format!("/puppet-ca/v1/certificate_status/{web09}"), None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let pending: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(pending["state"], "requested", "{pending}");
    let mut listed: Vec<String> =
        pending["dns_alt_names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
    listed.sort();
    let mut want = vec![format!("DNS:{web09}"), format!("DNS:{alt_name}")];
    want.sort();
    assert_eq!(listed, want, "the pending request's alt names are not listed: {pending}");
    let r = admin
        .request(
            "PUT",
            &format!("/puppet-ca/v1/certificate_status/{web09}"),
            Some("application/json"),
            br#"{"desired_state":"signed"}"#,
        )
        .unwrap();
    assert_eq!(r.status, 409, "an administrator signed {web09}'s alt names: {}", r.text());
    assert!(r.text().contains("alt-names-not-a-server"), "{}", r.text());
    let a09 = t.join(format!("agent-{web09}"));
    let (code, out) = lab.puppet(&a09, &["ssl", "bootstrap"], "web09-after-admin");
    assert_ne!(code, 0, "{web09} got a certificate after the administrator's \"signed\":\n{out}");
    assert!(!a09.join(format!("ssl/certs/{web09}.pem")).exists());
    // The server's grant names its alt names in the audit log.
    let audit = read(&v.join("audit.log"));
    assert!(
        audit.lines().any(|l| l.contains("\"verdict\":\"granted\"")
            && l.contains(compile01)
            && l.contains("\"alt_names\"")
            && l.contains(&alt_name)),
        "the compile server's grant does not name its alt names:\n{audit}"
    );

    // 3. Puppet Server starts with vouch's certificates and the CA service disabled.
    let server = start_puppetserver(sv);
    assert!(lab.log().contains("CA disabled"), "the CA service still runs:\n{}", lab.log());

    // 4. A vouched agent bootstraps against vouch and runs against the compile server by its
    // alt name; its catalog has the class and parameter from its certificate.
    let web01 = "web01.example.test";
    let a01 = lab.agent_dir(web01, "");
    lab.attributes(web01, &web_yaml, &a01.join("csr_attributes.yaml"));
    let start = Instant::now();
    let (code, out) = lab.puppet(&a01, &["agent", "--test"], "web01-first");
    eprintln!("web01: bootstrap and first run {:.1} s", start.elapsed().as_secs_f64());
    assert!(code == 0 || code == 2, "web01's run failed ({code}):\n{out}\nserver log:\n{}", lab.log());
    assert!(out.contains(&format!("Notice: {MARKER} tier=frontend")), "no class or parameter in the run:\n{out}");
    // The signed pp_role, as Puppet Server puts it in $trusted from the certificate.
    assert!(out.contains(&format!("Notice: {MARKER} tier=frontend role=web")), "no signed pp_role:\n{out}");
    let enc_json: serde_json::Value =
        serde_json::from_str(&ok(&Command::new(&enc).arg(web01).output().unwrap())).unwrap();
    assert_eq!(enc_json["classes"], serde_json::json!(["vouchdemo"]));
    assert_eq!(enc_json["parameters"]["vouch_source"], "certificate");
    // A second vouched agent, classified while vouch serve is stopped below.
    let web04 = "web04.example.test";
    let a04 = lab.agent_dir(web04, "");
    lab.attributes(web04, &web_yaml, &a04.join("csr_attributes.yaml"));
    let (code, out) = lab.puppet(&a04, &["agent", "--test"], "web04-first");
    assert!(code == 0 || code == 2, "web04's run failed ({code}):\n{out}");

    // 5. An agent vouch refuses (attributes vouched for another certname) gets no certificate.
    let web02 = "web02.example.test";
    let a02 = lab.agent_dir(web02, "");
    lab.attributes("web99.example.test", &web_yaml, &a02.join("csr_attributes.yaml"));
    let (code, out) = lab.puppet(&a02, &["agent", "--test"], "web02");
    assert_eq!(code, 1, "web02 should have no certificate:\n{out}");
    assert!(!a02.join(format!("ssl/certs/{web02}.pem")).exists());
    let o = Command::new(&enc).arg(web02).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "the ENC classified {web02}");
    assert!(o.stdout.is_empty());
    assert!(read(&enc_log).contains(&format!("refused {web02}")), "the refusal is not in the ENC's log");

    // 6. Revocation: vouch revoke, then vouch crl --fetch on the compile server; Puppet Server
    // reloads the file and refuses new handshakes; the next run fails; the ENC refuses.
    let (cert01, key01) =
        (a01.join(format!("ssl/certs/{web01}.pem")), a01.join(format!("ssl/private_keys/{web01}.pem")));
    assert!(handshake(&lab, &cert01, &key01), "web01 cannot reach the compile server before revocation");
    let revoked_at = Instant::now();
    ok(&vouch().args(["--dir", s(&v), "revoke", web01]).output().unwrap());
    let fetched = ok(&vouch()
        .args(["crl", "--fetch", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
        .args(["--out", s(&ssl.join("crl.pem"))])
        .output()
        .unwrap());
    assert!(fetched.contains("wrote"), "{fetched}");
    let fetched_after = revoked_at.elapsed();
    Wait::up_to(Duration::from_secs(30).saturating_sub(revoked_at.elapsed()))
        .every(Duration::from_millis(20))
        .until("Puppet Server refuses web01", || !handshake(&lab, &cert01, &key01));
    eprintln!(
        "revocation to refusal on the compile server: {:.2} s (vouch revoke + vouch crl --fetch: {:.2} s)",
        revoked_at.elapsed().as_secs_f64(),
        fetched_after.as_secs_f64()
    );
    let (code, out) = lab.puppet(&a01, &["agent", "--test"], "web01-revoked");
    assert_ne!(code, 0, "web01 still runs after revocation:\n{out}");
    assert!(!out.contains(MARKER), "{out}");
    let o = Command::new(&enc).arg(web01).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "the ENC classified revoked web01: {}", String::from_utf8_lossy(&o.stdout));
    // vouch serve no longer hands out a revoked certificate (404): refused, and logged.
    assert!(read(&enc_log).contains(&format!("refused {web01}")), "{}", read(&enc_log));
    // If-Modified-Since comes from the last fetch, never from the file's mtime: once the CRL's
    // Last-Modified is settled (two seconds old; a CRL is dated up to a second ahead) a fetch
    // is kept, the next one is a 304; a file copied over it (fresh mtime, other bytes) is
    // fetched whole again.
    let fetch = || {
        ok(&vouch()
            .args(["crl", "--fetch", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
            .args(["--out", s(&ssl.join("crl.pem"))])
            .output()
            .unwrap())
    };
    std::thread::sleep(Duration::from_millis(3100));
    assert!(fetch().contains("wrote"));
    let current = read(&ssl.join("crl.pem"));
    let again = fetch();
    assert!(again.contains("current"), "{again}");
    // The CRLs from before the revocation, copied by hand: a fresh mtime, the old content.
    std::fs::copy(&early_crl, ssl.join("crl.pem")).unwrap();
    assert!(fetch().contains("wrote"), "a copied file was not fetched again");
    assert_eq!(read(&ssl.join("crl.pem")), current);

    // 7. The classifier's cost, cached (fresh entry) and cold (empty cache).
    let cached = {
        let n = 20;
        let start = Instant::now();
        for _ in 0..n {
            ok(&Command::new(&enc).arg(web04).output().unwrap());
        }
        start.elapsed() / n
    };
    let cold = {
        let start = Instant::now();
        ok(&vouch()
            .args(["enc", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
            .args(["--cache-dir", s(&t.join("cold-cache")), "--log", "stderr", web04])
            .output()
            .unwrap());
        start.elapsed()
    };
    // With an administrator's credentials the classifier prints an override instead.
    let r = admin
        .request(
            "PUT",
            &format!("/puppet-ca/v1/classification_override/{web04}"),
            Some("application/json"),
            br#"{"classification": "classes: [vouchdemo]\nparameters: {tier: overridden}\n"}"#,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let json = ok(&vouch()
        .args(["enc", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
        .args(["--cache-dir", s(&t.join("admin-cache")), "--log", "stderr"])
        .args(["--client-cert", s(&v.join("admin/admin_crt.pem")), "--client-key", s(&v.join("admin/admin_key.pem"))])
        .arg(web04)
        .output()
        .unwrap());
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["parameters"]["tier"], "overridden", "{json}");
    assert_eq!(json["parameters"]["vouch_source"], "override", "{json}");
    let r = admin.request("DELETE", &format!("/puppet-ca/v1/classification_override/{web04}"), None, b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    eprintln!(
        "vouch enc --ca-url: cold {:.1} ms, cached {:.1} ms per call",
        cold.as_secs_f64() * 1e3,
        cached.as_secs_f64() * 1e3
    );

    // 8. A node whose certificate the classifier has cached is revoked, and the compile server
    // fetches the CRL; then vouch serve stops. The classifier answers web04 from its cache
    // (logged: the entry is older than crl_refresh and the CA cannot be reached), a catalog
    // still compiles, and web05 is refused: the fetched CRL lists it.
    let web05 = "web05.example.test";
    let a05 = lab.agent_dir(web05, "");
    lab.attributes(web05, &web_yaml, &a05.join("csr_attributes.yaml"));
    let (code, out) = lab.puppet(&a05, &["ssl", "bootstrap"], "web05-bootstrap");
    assert_eq!(code, 0, "web05 did not enrol:\n{out}");
    assert!(ok(&Command::new(&enc).arg(web05).output().unwrap()).contains("vouchdemo"));
    ok(&Command::new(&enc).arg(web04).output().unwrap());
    ok(&vouch().args(["--dir", s(&v), "revoke", web05]).output().unwrap());
    ok(&vouch()
        .args(["crl", "--fetch", "--ca-url", &lab.ca_url(), "--cacert", s(&ssl.join("certs/ca.pem"))])
        .args(["--out", s(&ssl.join("crl.pem"))])
        .output()
        .unwrap());
    drop(serve);
    std::thread::sleep(Duration::from_millis(2500));
    let before = read(&enc_log);
    let json = ok(&Command::new(&enc).arg(web04).output().unwrap());
    assert!(json.contains("vouchdemo"), "{json}");
    let logged = read(&enc_log)[before.len()..].to_string();
    assert!(logged.contains(&format!("{web04}: answering from the cache")), "no stale answer logged:\n{logged}");
    let (code, out) = lab.puppet(&a04, &["agent", "--test"], "web04-ca-stopped");
    assert!(code == 0 || code == 2, "web04's run failed with vouch serve stopped ({code}):\n{out}");
    assert!(out.contains(&format!("Notice: {MARKER} tier=frontend")), "{out}");
    let o = Command::new(&enc).arg(web05).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "the cache served revoked web05: {}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains("revoked") && o.stdout.is_empty(), "{err}");
    assert!(read(&enc_log).contains(&format!("refused {web05}")), "{}", read(&enc_log));

    drop(server);
    eprintln!("whole scenario: {:.1} s", t0.elapsed().as_secs_f64());
}
