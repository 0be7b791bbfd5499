//! The seed's whole story on a stock Puppet Server (Debian's puppetserver 7.9 jar,
//! private config on loopback): vouch is its autosign hook and its external node
//! classifier; Puppet Server is the CA; the conductor's root is vouch's.
//!
//! One test function, because the server takes 20-90 s to start: a real agent
//! vouched for by a conductor is autosigned, carries the classification in its
//! certificate and receives the classified catalog; five bad attribute sets stay
//! pending with vouch's reason in the server log; a node cannot change its own
//! role; a revoked node gets no classification. Needs `puppetserver` and
//! `puppet-agent` (.ci/run installs them): missing, the test fails, never skips.

mod common;

use common::processes::{free_port, read, run_guarded, start_puppetserver};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const JAR: &str = "/usr/share/puppetserver/puppetserver.jar";
const MARKER: &str = "VOUCHDEMO-MARKER";

struct Lab {
    tmp: PathBuf,
    server: PathBuf,
    vouch_dir: PathBuf,
    port: u16,
}

impl Lab {
    fn cadir(&self) -> PathBuf {
        self.server.join("etc/puppetserver/ca")
    }
    fn log(&self) -> String {
        read(&self.server.join("log/puppetserver.log"))
    }
    fn policy(&self) -> PathBuf {
        self.vouch_dir.join("policy.toml")
    }

    /// `vouch conductor sign` for `certname`; `extra` are more global or sign options.
    fn attributes(&self, certname: &str, global: &[&str], out: &Path) {
        let v = &self.vouch_dir;
        ok(&vouch()
            .args(global)
            .args(["--dir", s(v), "conductor", "sign", "--cert", s(&v.join("cloud1.pem"))])
            .args(["--key", s(&v.join("cloud1.key")), "--classification", s(&self.tmp.join("web.yaml"))])
            .args(["--certname", certname, "--expires-in", "30m", "--format", "puppet-yaml", "--out", s(out)])
            .output()
            .unwrap());
    }

    /// `vouch csr` for `certname` from a csr_attributes.yaml, with a new key (files named by
    /// `tag`): the CSR PEM.
    fn csr_from(&self, certname: &str, tag: &str, attributes: &Path) -> Vec<u8> {
        let (key, csr) = (self.tmp.join(format!("{tag}.key")), self.tmp.join(format!("{tag}.csr")));
        ok(&vouch()
            .args(["csr", "--certname", certname, "--attributes", s(attributes)])
            .args(["--key-out", s(&key), "--csr-out", s(&csr)])
            .output()
            .unwrap());
        std::fs::read(csr).unwrap()
    }

    /// A private agent confdir for `certname` (its csr_attributes.yaml is written by the caller).
    fn agent_dir(&self, certname: &str) -> PathBuf {
        let a = self.tmp.join(format!("agent-{certname}"));
        std::fs::create_dir_all(&a).unwrap();
        let mut conf = format!("[main]\nserver = localhost\nserverport = {}\ncertname = {certname}\n", self.port);
        for d in ["ssldir:ssl", "vardir:var", "rundir:run", "logdir:log", "publicdir:public", "codedir:code"] {
            let (k, v) = d.split_once(':').unwrap();
            conf.push_str(&format!("{k} = {}\n", a.join(v).display()));
        }
        std::fs::write(a.join("puppet.conf"), conf).unwrap();
        a
    }

    /// `puppet agent --test` (no waiting for a certificate); returns (exit code, output).
    fn agent_run(&self, agent: &Path, tag: &str, facts: &[(&str, &str)]) -> (i32, String) {
        let mut c = Command::new("puppet");
        c.args(["agent", "--test", "--confdir", s(agent), "--waitforcert", "0", "--color", "false"]);
        for (k, v) in facts {
            c.env(format!("FACTER_{k}"), v);
        }
        let (code, out) = run_guarded(c, &self.tmp, tag, Duration::from_secs(180));
        // Facter in a container complains about /proc/1/environ; drop that noise.
        let out: String = out.lines().filter(|l| !l.contains("/proc/1/environ")).map(|l| format!("{l}\n")).collect();
        (code, out)
    }

    /// A CA API call with the server's own certificate (it carries pp_cli_auth); asserts 204.
    fn admin(&self, method: &str, certname: &str, body: &str) {
        let ssl = self.server.join("etc/ssl");
        let script = format!(
            "require 'net/http'; require 'openssl'\n\
             h = Net::HTTP.new('localhost', {port}); h.use_ssl = true\n\
             h.ca_file = '{ca}'; h.cert = OpenSSL::X509::Certificate.new(File.read('{cert}'))\n\
             h.key = OpenSSL::PKey.read(File.read('{key}'))\n\
             r = h.send_request('{method}', '/puppet-ca/v1/certificate_status/{certname}', ARGV[0], \
             'Content-Type' => 'application/json')\n\
             puts r.code, r.body; exit(r.code.to_i == 204 ? 0 : 1)\n",
            port = self.port,
            ca = s(&ssl.join("certs/ca.pem")),
            cert = s(&ssl.join("certs/localhost.pem")),
            key = s(&ssl.join("private_keys/localhost.pem")),
        );
        ok(&Command::new("ruby").arg("-e").arg(&script).arg(body).output().unwrap());
    }

    /// The lines Puppet Server logged for the autosign hook's stderr about `certname`.
    fn hook_log(&self, certname: &str) -> String {
        let needle = format!("autosign.sh {certname}' generated output to stderr");
        let log = self.log();
        let mut out = String::new();
        let mut lines = log.lines().peekable();
        while let Some(l) = lines.next() {
            if l.contains(&needle) {
                out.push_str(l);
                out.push('\n');
                // The stderr continues on lines without a timestamp.
                while let Some(n) = lines.peek() {
                    if n.starts_with("20") {
                        break;
                    }
                    out.push_str(n);
                    out.push('\n');
                    lines.next();
                }
            }
        }
        out
    }
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Replaces the quoted value of `key` in a csr_attributes.yaml written by vouch.
fn set_value(yaml: &str, key: &str, value: &str) -> String {
    let prefix = format!("  '{key}': '");
    let mut found = false;
    let out: String = yaml
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                found = true;
                format!("{prefix}{value}'\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(found, "{key} not in\n{yaml}");
    out
}

#[test]
fn the_seeds_story_on_a_stock_puppet_server() {
    let t0 = Instant::now();
    require("puppet", "puppet-agent");
    require("java", "puppetserver");
    require("openssl", "openssl");
    require("ruby", "ruby");
    assert!(Path::new(JAR).exists(), "this test needs {JAR}: apt-get install -y puppetserver (.ci/run installs it)");

    let tmp = tempfile::Builder::new().prefix("vouch-puppetserver").tempdir().unwrap();
    let port = free_port();
    let lab = Lab {
        tmp: tmp.path().to_path_buf(),
        server: tmp.path().join("server"),
        vouch_dir: tmp.path().join("vouch"),
        port,
    };
    let support = root().join("tests/support/puppetserver");

    // vouch's side: a root for conductors, the strict (hook-mode) policy, a conductor.
    let v = &lab.vouch_dir;
    ok(&vouch().args(["--dir", s(v), "ca", "init"]).output().unwrap());
    std::fs::copy(root().join("policy/strict.toml"), lab.policy()).unwrap();
    ok(&vouch()
        .args(["--dir", s(v), "conductor", "new", "cloud1", "--cert-out", s(&v.join("cloud1.pem"))])
        .args(["--key-out", s(&v.join("cloud1.key"))])
        .output()
        .unwrap());

    // Puppet Server: private config, vouch as autosign hook and as ENC (wrappers: Puppet
    // Server passes only the certname), a tiny module in the code directory.
    let o = Command::new("bash").arg(support.join("setup.sh")).arg(&lab.server).arg(port.to_string()).output();
    ok(&o.unwrap());
    // The replay journal is a shared LDAP store (issue 15): the hook and a `vouch serve`
    // master (started below) spend attributes in one place. OpenLDAP only: a second Puppet
    // Server start for what tests/ldap.rs's `_on_389ds` tests cover (the hook and a master
    // sharing one-time use).
    let slapd = common::slapd::Slapd::start(&common::ldap_lab::slapd_opts());
    let store = common::ldap_lab::store_env(&slapd);
    ok(&vouch().envs(store.clone()).args(["ldap", "init", "--create-base"]).output().unwrap());
    let bin = env!("CARGO_BIN_EXE_vouch");
    let autosign = lab.tmp.join("autosign.sh");
    let enc = lab.tmp.join("enc.sh");
    let env: String = store.iter().map(|(k, v)| format!("{k}='{v}' ")).collect();
    std::fs::write(
        &autosign,
        format!("#!/bin/sh\nexec env {env}{bin} autosign --policy {} -- \"$1\"\n", s(&lab.policy())),
    )
    .unwrap();
    std::fs::write(
        &enc,
        format!(
            "#!/bin/sh\nexec {bin} enc --policy {} --puppet-cadir {} -- \"$1\"\n",
            s(&lab.policy()),
            s(&lab.cadir())
        ),
    )
    .unwrap();
    for f in [&autosign, &enc] {
        ok(&Command::new("chmod").arg("755").arg(f).output().unwrap());
    }
    let conf = lab.server.join("etc/puppet.conf");
    let mut text = read(&conf);
    text.push_str(&format!(
        "[server]\nautosign = {}\nnode_terminus = exec\nexternal_nodes = {}\n",
        s(&autosign),
        s(&enc)
    ));
    std::fs::write(&conf, text).unwrap();
    let module = lab.server.join("code/environments/production/modules/vouchdemo/manifests");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(
        module.join("init.pp"),
        "class vouchdemo {\n  notify { 'vouchdemo':\n    message => \"VOUCHDEMO-MARKER tier=${::tier} \
         mirror=${trusted['extensions']['1.3.6.1.4.1.34380.1.2.5']}\",\n  }\n}\n",
    )
    .unwrap();
    let classification = "classes: [vouchdemo]\nparameters: {tier: frontend}\nenvironment: production\n";
    std::fs::write(lab.tmp.join("web.yaml"), classification).unwrap();

    // Start it; the guard stops it whatever happens below.
    let server = start_puppetserver(&lab.server);
    eprintln!("Puppet Server listens on 127.0.0.1:{port}");
    let cadir = lab.cadir();

    // 1. The conductor vouches for web01; a real agent with that csr_attributes.yaml runs.
    let web01 = "web01.example.test";
    let a01 = lab.agent_dir(web01);
    lab.attributes(web01, &[], &a01.join("csr_attributes.yaml"));
    let t = Instant::now();
    let (code, out) = lab.agent_run(&a01, "web01-first", &[]);
    eprintln!("web01: first agent run (autosign, catalog) took {:.1} s", t.elapsed().as_secs_f64());
    assert!(code == 0 || code == 2, "web01's agent run failed ({code}):\n{out}\nserver log:\n{}", lab.log());
    // Autosigned by the hook.
    assert!(out.contains(&format!("Downloaded certificate for {web01}")), "{out}");
    assert!(lab.log().contains(&format!("autosign.sh {web01}' exit status: 0")), "{}", lab.log());
    // The certificate carries the classification mirror, the signed value byte for byte.
    let signed = cadir.join(format!("signed/{web01}.pem"));
    let text = ok(&Command::new("openssl").args(["x509", "-noout", "-text", "-in", s(&signed)]).output().unwrap());
    assert!(text.contains("1.3.6.1.4.1.34380.1.2.5:"), "no mirror extension:\n{text}");
    assert!(text.contains(&b64(classification)), "the mirror is not the signed classification:\n{text}");
    assert_eq!(read(&signed), read(&a01.join(format!("ssl/certs/{web01}.pem"))), "the agent holds another cert");
    // The catalog it received contains the class; the run shows the marker and the parameter.
    let catalog = read(&a01.join(format!("var/client_data/catalog/{web01}.json")));
    let catalog: serde_json::Value = serde_json::from_str(&catalog).unwrap();
    let has_class =
        catalog["resources"].as_array().unwrap().iter().any(|r| r["type"] == "Class" && r["title"] == "Vouchdemo");
    assert!(has_class, "the catalog lacks Class[Vouchdemo]:\n{catalog:#}");
    let want = format!("{MARKER} tier=frontend mirror={}", b64(classification));
    assert!(out.contains(&format!("Notice: {want}")), "want {want:?} in the run:\n{out}");
    // vouch enc reads Puppet Server's signed certificate, verified against its CA and CRL.
    let enc_out = ok(&Command::new(&enc).arg(web01).output().unwrap());
    let enc_json: serde_json::Value = serde_json::from_str(&enc_out).unwrap();
    assert_eq!(enc_json["classes"], serde_json::json!(["vouchdemo"]), "{enc_out}");

    // 2. Bad attribute sets: each request stays pending, vouch's reason in the server log.
    let sign_for = |certname: &str, file_for: &str| {
        let a = lab.agent_dir(file_for);
        lab.attributes(certname, &[], &a.join("csr_attributes.yaml"));
        a
    };
    let mut cases: Vec<(&str, PathBuf, &str)> = Vec::new();
    // Tampered classification (and its mirror, so only the signature can tell).
    let web02 = "web02.example.test";
    let a = sign_for(web02, web02);
    let f = a.join("csr_attributes.yaml");
    let evil = b64("classes: [vouchdemo]\nparameters: {tier: admin}\nenvironment: production\n");
    let y = set_value(&read(&f), "1.3.6.1.4.1.34380.2.5", &evil);
    std::fs::write(&f, set_value(&y, "1.3.6.1.4.1.34380.1.2.5", &evil)).unwrap();
    cases.push((web02, a, "signature-invalid"));
    // Attributes vouched for another certname (version 2).
    let web03 = "web03.example.test";
    cases.push((web03, sign_for("web99.example.test", web03), "certname-not-vouched"));
    // Replayed: another master sharing the journal approved these attributes first
    // (a CSR made by Puppet's own code, run through the hook by hand).
    let web04 = "web04.example.test";
    let a = sign_for(web04, web04);
    let stolen = lab.tmp.join("stolen.csr");
    ok(&Command::new("ruby")
        .arg(root().join("tests/support/make-puppet-csr.rb"))
        .args([web04, s(&a.join("csr_attributes.yaml")), s(&stolen)])
        .output()
        .unwrap());
    let first = vouch()
        .envs(store.clone())
        .args(["autosign", "--policy", s(&lab.policy()), "--", web04])
        .stdin(std::fs::File::open(&stolen).unwrap())
        .output()
        .unwrap();
    ok(&first);
    cases.push((web04, a, "attributes-replayed"));
    // An authorization extension (pp_auth_role) requested beside valid attributes.
    let web05 = "web05.example.test";
    let a = sign_for(web05, web05);
    let f = a.join("csr_attributes.yaml");
    std::fs::write(&f, read(&f) + "  pp_auth_role: 'admin'\n").unwrap();
    cases.push((web05, a, "authorization-extension-requested"));
    // Expired: signed two hours ago for 30 minutes.
    let web06 = "web06.example.test";
    let a = lab.agent_dir(web06);
    let past = (time::OffsetDateTime::now_utc() - time::Duration::hours(2))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    lab.attributes(web06, &["--now", &past], &a.join("csr_attributes.yaml"));
    cases.push((web06, a, "attributes-expired"));
    // Spent at a `vouch serve` master sharing the LDAP store: Puppet Server's hook refuses them.
    let master = common::ldap_lab::Master::start_env(&lab.vouch_dir, "vouch-ca.test", &store, &[]);
    let web07 = "web07.example.test";
    let a = sign_for(web07, web07);
    let csr07 = lab.csr_from(web07, web07, &a.join("csr_attributes.yaml"));
    let (put, why, cert) = common::ldap_lab::enroll(&master, web07, &csr07);
    assert!(put == 200 && cert.is_some(), "the vouch master did not issue web07: {put} {why}");
    cases.push((web07, a, "attributes-replayed"));

    for (certname, agent, code_want) in &cases {
        let (code, out) = lab.agent_run(agent, certname, &[]);
        assert_eq!(code, 1, "{certname}: the agent should find no certificate:\n{out}");
        assert!(out.contains("has not been signed yet"), "{certname}:\n{out}");
        assert!(!cadir.join(format!("signed/{certname}.pem")).exists(), "{certname} was signed");
        assert!(cadir.join(format!("requests/{certname}.pem")).exists(), "{certname} is not pending");
        let logged = lab.hook_log(certname);
        assert!(
            logged.contains(&format!("vouch: refused [{code_want}]")),
            "{certname}: want [{code_want}] in the server log, got:\n{logged}"
        );
        eprintln!("{certname}: pending; server log: {}", logged.lines().next().unwrap_or("").trim());
    }

    // Approved by Puppet Server's hook: the vouch master refuses the same attributes (another
    // key), keeping the request pending with the reason.
    let stolen01 = lab.csr_from(web01, "web01-again", &a01.join("csr_attributes.yaml"));
    let (put, why, cert) = common::ldap_lab::enroll(&master, web01, &stolen01);
    assert!(put == 200 && cert.is_none(), "the vouch master issued attributes the hook approved: {put} {why}");
    let pending = ok(&vouch()
        .envs(store.clone())
        .args(["--dir", s(&lab.vouch_dir), "list", "--format", "json"])
        .output()
        .unwrap());
    assert!(
        pending.contains(web01) && pending.contains("attributes-replayed"),
        "the vouch master's pending request lacks the reason: {pending}"
    );
    drop(master);

    // A refused request blocks its certname: Puppet Server ignores a new CSR (even a
    // validly vouched one) until an administrator deletes the pending request.
    let a03 = &cases[1].1;
    lab.attributes(web03, &[], &a03.join("csr_attributes.yaml"));
    std::fs::remove_dir_all(a03.join("ssl")).unwrap();
    let (code, out) = lab.agent_run(a03, "web03-again", &[]);
    assert_ne!(code, 0, "{out}");
    let blocked = format!("{web03} already has a requested certificate; ignoring certificate request");
    assert!(lab.log().contains(&blocked), "want {blocked:?} in the server log; agent said:\n{out}");
    lab.admin("DELETE", web03, "");
    std::fs::remove_dir_all(a03.join("ssl")).unwrap();
    let (code, out) = lab.agent_run(a03, "web03-cleaned", &[]);
    assert!(code == 0 || code == 2, "web03 after cleaning ({code}):\n{out}");
    assert!(out.contains(&format!("Notice: {MARKER} tier=frontend")), "{out}");
    assert!(cadir.join(format!("signed/{web03}.pem")).exists());

    // The ENC has nothing for a pending request, and no path tricks.
    for name in [web02, "../ca/ca_key", "WEB01.example.test"] {
        let o = Command::new(&enc).arg(name).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "ENC for {name:?}: {}", String::from_utf8_lossy(&o.stdout));
        assert!(o.stdout.is_empty(), "ENC for {name:?} printed {}", String::from_utf8_lossy(&o.stdout));
    }

    // 3. A node cannot change its own role: facts and extension_requests changed after
    // signing change nothing; the classification comes from the certificate.
    let f = a01.join("csr_attributes.yaml");
    std::fs::write(&f, set_value(&read(&f), "1.3.6.1.4.1.34380.1.2.5", &evil)).unwrap();
    let (code, out) = lab.agent_run(&a01, "web01-role-change", &[("tier", "admin"), ("role", "db")]);
    assert!(code == 0 || code == 2, "web01's second run failed ({code}):\n{out}");
    assert!(out.contains(&format!("Notice: {want}")), "the node changed its role: want {want:?} in:\n{out}");
    assert!(!out.contains("tier=admin"), "{out}");
    assert_eq!(read(&signed), read(&a01.join(format!("ssl/certs/{web01}.pem"))));

    // 4. A revoked node gets no classification: revoke through Puppet Server's CA API
    // (the server's own certificate carries pp_cli_auth), then the ENC refuses.
    lab.admin("PUT", web01, r#"{"desired_state":"revoked"}"#);
    let o = Command::new(&enc).arg(web01).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "the ENC classified a revoked node: {}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stderr).contains("revoked"), "{}", String::from_utf8_lossy(&o.stderr));

    drop(server);
    eprintln!("whole scenario: {:.1} s", t0.elapsed().as_secs_f64());
}
