//! Debian's `puppetserver ca` CLI (ruby-puppetserver-ca-cli 2.4.0) against `vouch serve`, with
//! the administrator credential `vouch serve` made (`DIR/admin/`): `list --all`, `sign` (a
//! request a conductor vouched for is decided again; one no conductor vouched for is an
//! administrator's approval, only under `issuance.admin_approval` and with the classification
//! an administrator set), `sign --all`, several certnames, `--ttl`, `revoke`, `clean`; and a
//! real Puppet agent 7 with no attributes, approved, then bootstrapped. Requests with no
//! attributes are made by `openssl req`; every certificate is read back by `openssl`.

mod common;

use common::agents::{csr_for, p256, vouched};
use common::processes::{output_within, Wait};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;
use vouch::serve::client::{tls_config, Client};

const METAL: &str = "classes:\n  - role::metal\nparameters:\n  rack: r12\nenvironment: production\n";

/// A running `vouch serve` and a `puppet.conf` for `puppetserver ca` with its administrator
/// credential; SIGTERM then SIGKILL on drop.
struct Lab {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    conf: PathBuf,
    tmp: PathBuf,
}

impl Lab {
    fn start(tmp: &Path) -> Lab {
        require("puppetserver", "puppetserver");
        require("openssl", "openssl");
        let dir = tmp.join("vouch");
        let log = tmp.join("serve.log");
        let (child, _banner, port) = start_serve(&mut serve_cmd(&dir), &log);
        // The CA's CRLs, for the CLI's check of the server's certificate (`hostcrl`).
        let mut crls = std::fs::read(dir.join("ca/ca_crl.pem")).unwrap();
        crls.extend(std::fs::read(dir.join("ca/root_crl.pem")).unwrap());
        std::fs::write(tmp.join("crl.pem"), crls).unwrap();
        let conf = tmp.join("puppet.conf");
        std::fs::write(
            &conf,
            format!(
                "[main]\ncertname = vouch-admin\nserver = localhost\nca_server = localhost\nca_port = {port}\n\
                 localcacert = {}\nhostcert = {}\nhostprivkey = {}\nhostcrl = {}\n",
                dir.join("ca/ca_bundle.pem").display(),
                dir.join("admin/admin_crt.pem").display(),
                dir.join("admin/admin_key.pem").display(),
                tmp.join("crl.pem").display()
            ),
        )
        .unwrap();
        Lab { child: Some(child), port, dir, log, conf, tmp: tmp.to_path_buf() }
    }

    /// `puppetserver ca SUB ARGS --config puppet.conf`.
    fn ca(&self, sub: &str, args: &[&str]) -> Output {
        let mut c = Command::new("puppetserver");
        c.args(["ca", sub]).args(args).args(["--config", s(&self.conf)]);
        output_within(&mut c, Duration::from_secs(120))
            .unwrap_or_else(|o| panic!("puppetserver ca {sub}: {}", text(&o)))
    }

    /// Turns `issuance.admin_approval` on or off and reloads the policy (SIGHUP).
    fn approval(&self, on: bool) {
        let (from, to) = if on { ("false", "true") } else { ("true", "false") };
        self.edit_policy(&format!("admin_approval = {from}"), &format!("admin_approval = {to}"));
    }

    /// Replaces `from` by `to` in the policy and reloads it (SIGHUP).
    fn edit_policy(&self, from: &str, to: &str) {
        let path = self.dir.join("policy.toml");
        let policy = std::fs::read_to_string(&path).unwrap();
        let edited = policy.replace(from, to);
        assert_ne!(policy, edited, "the default policy has {from:?}");
        std::fs::write(&path, edited).unwrap();
        let reloads = || read_log(&self.log).matches("\"event\":\"reload\"").count();
        let before = reloads();
        let pid = self.child.as_ref().unwrap().id() as i32;
        // SAFETY: kill(2) on our own child's PID.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
        Wait::up_to(Duration::from_secs(10)).until("the policy reloaded", || reloads() > before);
    }

    fn client(&self, identity: Option<(&Path, &Path)>) -> Client {
        let bundle = std::fs::read(self.dir.join("ca/ca_bundle.pem")).unwrap();
        let id = identity.map(|(c, k)| (std::fs::read(c).unwrap(), std::fs::read(k).unwrap()));
        let config = tls_config(&bundle, id.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()))).unwrap();
        Client::new(config, ([127, 0, 0, 1], self.port).into(), "localhost").unwrap()
    }

    /// A request with no attributes, made by `openssl req` (a key of its own, in the lab),
    /// with `extra` as `-addext` values, sent as an agent sends it (no client certificate).
    fn bare_request(&self, name: &str, extra: &[&str]) -> PathBuf {
        let key = self.tmp.join(format!("{name}.key"));
        let csr = self.tmp.join(format!("{name}.csr"));
        let mut c = Command::new("openssl");
        c.args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout"]).args([
            s(&key),
            "-subj",
            &format!("/CN={name}"),
            "-out",
            s(&csr),
        ]);
        for e in extra {
            c.args(["-addext", e]);
        }
        ok(&c.output().unwrap());
        self.submit(name, &std::fs::read(&csr).unwrap());
        key
    }

    fn submit(&self, name: &str, csr: &[u8]) {
        let r = self
            .client(None)
            .request("PUT", &format!("/puppet-ca/v1/certificate_request/{name}"), Some("text/plain"), csr)
            .unwrap();
        assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
    }

    /// The name's certificate as an agent downloads it, written to the lab (`None`: 404).
    fn certificate(&self, name: &str) -> Option<PathBuf> {
        let r = self.client(None).request("GET", &format!("/puppet-ca/v1/certificate/{name}"), None, b"").unwrap();
        if r.status == 404 {
            return None;
        }
        assert_eq!(r.status, 200, "{name}: {}", String::from_utf8_lossy(&r.body));
        let p = self.tmp.join(format!("{name}.pem"));
        std::fs::write(&p, &r.body).unwrap();
        Some(p)
    }

    fn override_set(&self, name: &str, classification: &str) {
        let f = self.tmp.join(format!("{name}.classification.yaml"));
        std::fs::write(&f, classification).unwrap();
        ok(&vouch()
            .args(["--dir", s(&self.dir), "override", "set", name, "--classification", s(&f)])
            .output()
            .unwrap());
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        read_log(&self.dir.join("audit.log")).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// `puppetserver ca list --all --format json`: names by state.
    fn states(&self) -> serde_json::Value {
        let o = self.ca("list", &["--all", "--format", "json"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        let names = |state: &str| -> Vec<String> {
            let mut n: Vec<String> =
                v[state].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect();
            n.sort();
            n
        };
        serde_json::json!({ "requested": names("requested"), "signed": names("signed"), "revoked": names("revoked") })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own child's PID.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            if common::processes::ended_within(&mut c, Duration::from_secs(10)).is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn read_log(p: &Path) -> String {
    common::processes::read(p)
}

fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn openssl_text(cert: &Path) -> String {
    ok(&Command::new("openssl").args(["x509", "-noout", "-text", "-in", s(cert)]).output().unwrap())
}

/// `openssl x509 -checkend SECS`: whether the certificate is still valid `secs` from now.
fn valid_in(cert: &Path, secs: u64) -> bool {
    let secs = secs.to_string();
    let o = Command::new("openssl").args(["x509", "-noout", "-checkend", &secs, "-in", s(cert)]).output().unwrap();
    o.status.success()
}

/// `puppetserver ca sign` of a request no conductor vouched for: refused while the policy is
/// off, refused without an administrator's classification, then issued with exactly that
/// classification (nothing the request asked for), audited as the administrator's decision;
/// a node's own certificate administers nothing.
#[test]
fn sign_approves_a_bare_request_only_with_the_policy_and_an_override() {
    let tmp = tempfile::tempdir().unwrap();
    let lab = Lab::start(tmp.path());
    let name = "metal01.example.test";
    // It asks for pp_role and a classification of its own making in an extension request.
    let key = lab.bare_request(
        name,
        &["1.3.6.1.4.1.34380.1.1.13=ASN1:UTF8String:role::db", "1.3.6.1.4.1.34380.1.2.5=ASN1:UTF8String:e30K"],
    );
    let listed = lab.ca("list", &[]);
    assert!(out(&listed).contains("Requested Certificates:") && out(&listed).contains(name), "{}", out(&listed));

    // The policy is off by default: refused, saying so.
    let o = lab.ca("sign", &["--certname", name]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("code: 409") && out(&o).contains("approval-off"), "{}", out(&o));
    assert!(out(&o).contains("admin_approval = true"), "the hint says how: {}", out(&o));
    assert!(lab.certificate(name).is_none());

    // On, but no classification set: refused.
    lab.approval(true);
    let o = lab.ca("sign", &["--certname", name]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("approval-without-override") && out(&o).contains("vouch override set"), "{}", out(&o));
    assert!(lab.certificate(name).is_none());
    assert_eq!(lab.states()["requested"], serde_json::json!([name]));

    // With the administrators' classification: signed, as Puppet Server answers.
    lab.override_set(name, METAL);
    let o = lab.ca("sign", &["--certname", name]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains(&format!("Successfully signed certificate request for {name}")), "{}", out(&o));
    let states = lab.states();
    assert!(states["signed"].as_array().unwrap().contains(&name.into()), "{states}");
    assert_eq!(states["requested"], serde_json::json!([]));

    // The certificate: the override's classification, the certname alone, no pp_role.
    let cert = lab.certificate(name).expect("issued");
    let t = openssl_text(&cert);
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(METAL);
    assert!(t.contains(&b64), "the override's classification is in the certificate:\n{t}");
    assert!(!t.contains("e30K") && !t.contains("role::db"), "nothing the request asked for:\n{t}");
    assert!(t.contains("DNS:metal01.example.test") && !t.contains("pp_cli_auth"), "{t}");
    let bundle = lab.dir.join("ca/ca_bundle.pem");
    let root = lab.dir.join("ca/root_crt.pem");
    ok(&Command::new("openssl")
        .args(["verify", "-CAfile", s(&root), "-untrusted", s(&bundle), s(&cert)])
        .output()
        .unwrap());
    let enc = ok(&vouch().args(["--dir", s(&lab.dir), "enc", name]).output().unwrap());
    assert!(enc.contains("role::metal") && enc.contains("r12"), "{enc}");

    // Audited as the administrator's decision.
    let approved: Vec<_> = lab.audit().into_iter().filter(|v| v["event"] == "approved").collect();
    assert_eq!(approved.len(), 1, "{approved:?}");
    assert_eq!(approved[0]["certname"], name);
    assert_eq!(approved[0]["by"], "vouch-admin");
    assert_eq!(approved[0]["override_revision"], 1);

    // A node approving another (or itself): its certificate administers nothing.
    let other = "metal02.example.test";
    lab.bare_request(other, &[]);
    lab.override_set(other, METAL);
    let mut node = lab.client(Some((&cert, &key)));
    let r = node
        .request(
            "PUT",
            &format!("/puppet-ca/v1/certificate_status/{other}"),
            Some("application/json"),
            br#"{"desired_state":"signed"}"#,
        )
        .unwrap();
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    assert!(lab.certificate(other).is_none());

    // vouch's own command, with the data directory: the fingerprint checked, audited with the user.
    let wrong = "AB:".repeat(31) + "AB";
    let o = vouch().args(["--dir", s(&lab.dir), "approve", other, "--fingerprint", &wrong]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("the pending request's fingerprint is"), "{}", out(&o));
    // A typo is no fingerprint: said, the request untouched.
    let o = vouch().args(["--dir", s(&lab.dir), "approve", other, "--fingerprint", "AB:CD"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("is not a SHA-256 fingerprint"), "{}", out(&o));
    let o = vouch().args(["--dir", s(&lab.dir), "approve", other, "--ttl", "30d"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let cert2 = lab.certificate(other).expect("approved by vouch approve");
    assert!(valid_in(&cert2, 29 * 86_400) && !valid_in(&cert2, 31 * 86_400), "--ttl 30d");
    let by = lab.audit().into_iter().find(|v| v["event"] == "approved" && v["certname"] == other).unwrap();
    assert!(by["by"].as_str().unwrap().starts_with("local:"), "{by}");
    // An approval does not renew (no conductor to check again): approved anew.
    let o = vouch().args(["--dir", s(&lab.dir), "renew", other]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("approved by an administrator") && out(&o).contains("vouch approve"), "{}", out(&o));
    // Approved already: refused, saying so (not "nothing pending").
    let o = vouch().args(["--dir", s(&lab.dir), "approve", other]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("already has a valid certificate"), "{}", out(&o));
    // Nothing pending and no classification: the first thing to fix is said first.
    let o = vouch().args(["--dir", s(&lab.dir), "approve", "never.example.test"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("no certificate request is pending"), "{}", out(&o));
}

/// `sign --all` signs what may be approved and names the others with their reasons; several
/// certnames; `--ttl` within the policy's lifetime (read back by openssl) and beyond it
/// (refused); `revoke`; `clean` of a certificate and of a request, with Puppet's exit codes.
#[test]
fn sign_all_several_ttl_revoke_and_clean_behave_as_puppet_server() {
    let tmp = tempfile::tempdir().unwrap();
    let lab = Lab::start(tmp.path());
    lab.approval(true);
    let [a, b, c, d] = ["a.example.test", "b.example.test", "c.example.test", "d.example.test"];
    for n in [a, b, c] {
        lab.bare_request(n, &[]);
    }
    // d carries a conductor's attributes vouched for another name: refused, kept pending.
    let attrs = vouched(&lab.dir, "elsewhere.example.test", METAL);
    lab.submit(d, &csr_for(d, &attrs, &p256()));
    lab.override_set(a, METAL);
    lab.override_set(b, METAL);
    lab.override_set(d, METAL);

    let o = lab.ca("sign", &["--all"]);
    assert_eq!(o.status.code(), Some(1), "not all signed: {}", out(&o));
    let said = out(&o);
    for n in [a, b] {
        assert!(said.contains(&format!("Successfully signed certificate request for {n}")), "{said}");
    }
    assert!(said.contains(&format!("'{c}'")) && said.contains("approval-without-override"), "{said}");
    // d is decided again by the policy, never approved past its conductor's refused word.
    assert!(said.contains(&format!("'{d}'")) && said.contains("certname-not-vouched"), "{said}");
    let o = vouch().args(["--dir", s(&lab.dir), "approve", d]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(out(&o).contains("carries a conductor's attributes"), "{}", out(&o));
    let states = lab.states();
    assert_eq!(states["requested"], serde_json::json!([c, d]), "{states}");

    // Several certnames, with --ttl: c (now classified) for two hours; a (signed) is a 409.
    lab.override_set(c, METAL);
    let o = lab.ca("sign", &["--certname", &format!("{c},{a}"), "--ttl", "2h"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains(&format!("Successfully signed certificate request for {c}")), "{}", out(&o));
    assert!(out(&o).contains(&format!("{a} is already signed")), "{}", out(&o));
    let cert_c = lab.certificate(c).unwrap();
    assert!(valid_in(&cert_c, 3_600) && !valid_in(&cert_c, 3 * 3_600), "--ttl 2h:\n{}", openssl_text(&cert_c));
    // Beyond the policy's lifetime (issuance.validity, 5y): refused, nothing issued.
    let e = "e.example.test";
    lab.bare_request(e, &[]);
    lab.override_set(e, METAL);
    let o = lab.ca("sign", &["--certname", e, "--ttl", "10y"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("code: 400") && out(&o).contains("approval-ttl-too-long"), "{}", out(&o));
    assert!(lab.certificate(e).is_none());
    // A request asking for other names: refused, whatever the override says.
    let f = "f.example.test";
    lab.bare_request(f, &["subjectAltName=DNS:f.example.test,DNS:puppet.example.test"]);
    lab.override_set(f, METAL);
    let o = lab.ca("sign", &["--certname", f]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("approval-alt-names") && out(&o).contains("puppet.example.test"), "{}", out(&o));
    // A second request under a name with a valid certificate (kept under on_existing =
    // "supersede"): an approval never replaces the certificate.
    lab.edit_policy("on_existing = \"refuse\"", "on_existing = \"supersede\"");
    lab.bare_request(c, &[]);
    let o = lab.ca("sign", &["--certname", c]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("approval-certificate-exists"), "{}", out(&o));
    ok(&vouch().args(["--dir", s(&lab.dir), "clean", f]).output().unwrap());
    // An unknown name: Puppet's words for a 404.
    let o = lab.ca("sign", &["--certname", "nobody.example.test"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("Could not find certificate request for nobody.example.test"), "{}", out(&o));

    // revoke: the certificate is on the CRL vouch serves.
    let o = lab.ca("revoke", &["--certname", a]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains(&format!("Certificate for {a} has been revoked")), "{}", out(&o));
    assert!(lab.states()["revoked"].as_array().unwrap().contains(&a.into()));
    // revoke of a request only: 409, exit 24, as Puppet Server and its CLI.
    let o = lab.ca("revoke", &["--certname", e]);
    assert_eq!(o.status.code(), Some(24), "{}", out(&o));
    // clean: a signed certificate (exit 0) and a request (revoke 409, then deleted: exit 24).
    let o = lab.ca("clean", &["--certname", b]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(out(&o).contains(&format!("Cleaned files related to {b}")), "{}", out(&o));
    let o = lab.ca("clean", &["--certname", d]);
    assert_eq!(o.status.code(), Some(24), "{}", out(&o));
    assert!(out(&o).contains(&format!("Cleaned files related to {d}")), "{}", out(&o));
    let states = lab.states();
    assert_eq!(states["requested"], serde_json::json!([e]), "{states}");
    assert_eq!(states["revoked"], serde_json::json!([a]), "{states}");
    assert!(!states["signed"].as_array().unwrap().contains(&b.into()), "{states}");
    // c, with a request kept beside its certificate, is listed once.
    assert_eq!(states["signed"].as_array().unwrap().iter().filter(|n| **n == c).count(), 1, "{states}");
    // The node of a name cleaned gets its own classification: the override went with it.
    let o = vouch().args(["--dir", s(&lab.dir), "override", "show", b]).output().unwrap();
    assert!(!out(&o).contains("role::metal"), "{}", out(&o));
}

/// A real Puppet agent 7 with no csr_attributes (a host someone built by hand): its request
/// waits, an administrator sets its classification and signs it with `puppetserver ca sign`,
/// and its next `puppet ssl bootstrap` succeeds; `vouch enc` prints the administrators'
/// classification.
#[test]
fn a_real_agent_without_attributes_is_approved_and_bootstraps() {
    require("puppet", "puppet-agent");
    let tmp = tempfile::tempdir().unwrap();
    let lab = Lab::start(tmp.path());
    lab.approval(true);
    let name = "hand01.example.test";
    let a = tmp.path().join("agent");
    std::fs::create_dir_all(&a).unwrap();
    let mut conf =
        format!("[main]\ncertname = {name}\nserver = localhost\nca_server = localhost\nca_port = {}\n", lab.port);
    for (k, v) in [("ssldir", "ssl"), ("vardir", "var"), ("rundir", "run"), ("logdir", "log"), ("codedir", "code")] {
        conf.push_str(&format!("{k} = {}\n", a.join(v).display()));
    }
    std::fs::write(a.join("puppet.conf"), conf).unwrap();
    let bootstrap = |tag: &str| {
        let mut c = Command::new("puppet");
        c.args(["ssl", "bootstrap", "--confdir", s(&a), "--waitforcert", "0", "--color", "false"]);
        common::processes::run_guarded(c, tmp.path(), tag, Duration::from_secs(180))
    };
    let (code, said) = bootstrap("first");
    assert_ne!(code, 0, "not signed yet: {said}");
    assert_eq!(lab.states()["requested"], serde_json::json!([name]));

    lab.override_set(name, METAL);
    let o = lab.ca("sign", &["--certname", name]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let (code, said) = bootstrap("second");
    assert_eq!(code, 0, "{said}\n{}", read_log(&lab.log));
    let cert = a.join(format!("ssl/certs/{name}.pem"));
    assert!(openssl_text(&cert).contains(&format!("DNS:{name}")));
    let enc = ok(&vouch().args(["--dir", s(&lab.dir), "enc", name]).output().unwrap());
    assert!(enc.contains("role::metal") && enc.contains("\"vouch_source\": \"override\""), "{enc}");
}

/// The public key of a PEM key or certificate, as openssl prints it.
fn public_key(path: &Path, cert: bool) -> String {
    let mut c = Command::new("openssl");
    if cert {
        c.args(["x509", "-pubkey", "-noout", "-in", s(path)]);
    } else {
        c.args(["pkey", "-pubout", "-in", s(path)]);
    }
    ok(&c.output().unwrap())
}

/// Anyone could send a request of their own under a name whose bare request an administrator
/// had listed: it replaced the listed one, and `puppetserver ca sign` (which names no
/// fingerprint) issued the newcomer's key with the administrator's classification. As Puppet
/// Server does, the first bare request of a name stays; the same key may send it again.
#[test]
fn a_bare_request_pending_is_not_replaced_by_another_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let lab = Lab::start(tmp.path());
    lab.approval(true);
    let name = "listed.example.test";
    let first = lab.bare_request(name, &[]);
    let listed = tmp.path().join("listed.key");
    std::fs::rename(&first, &listed).unwrap();
    // The newcomer's request, under the same name: answered as any refused request, not kept.
    let _theirs = lab.bare_request(name, &[]);
    lab.override_set(name, "classes:\n  - role::metal\nextensions:\n  pp_role: metal\n");
    let o = lab.ca("sign", &["--certname", name]);
    assert!(o.status.success(), "{}", out(&o));
    let cert = lab.certificate(name).expect("the approved certificate");
    assert_eq!(public_key(&cert, true), public_key(&listed, false), "the newcomer's key was approved");
    // The override's trusted fact is in the certificate, as a conductor's would be.
    let t = openssl_text(&cert);
    let at = t.find("1.3.6.1.4.1.34380.1.1.13").unwrap_or_else(|| panic!("no pp_role extension:\n{t}"));
    assert!(t[at..].lines().nth(1).is_some_and(|l| l.contains("metal")), "{t}");
    assert!(read_log(&lab.log).contains("request-not-replaced"), "{}", read_log(&lab.log));
}
