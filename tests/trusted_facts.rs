//! Signed trusted facts and Puppet 8 auto-renewal, through the real binary.
//!
//! A classification's `extensions` (`pp_role`, `pp_environment`, … Puppet's registered
//! extensions) reach the certificate as Puppet's own extensions: `openssl asn1parse` reads
//! each as a DER UTF8String under its OID, and Puppet 7's own Ruby code (Debian's puppet 7.23,
//! `Puppet::Context::TrustedInformation.remote`, what a Puppet Server builds `$trusted` with)
//! reads `$trusted['extensions']['pp_role']` as signed; renewal keeps them. A node asking for
//! another value is refused (`trusted-fact-mismatch`); the authorization arc is never signed.
//!
//! The Puppet 8-form CSRs in fixtures/puppet8/ (made by its make.sh with `openssl req`) carry
//! the `pp_auth_auto_renew` attribute as Puppet 8 sends it; such an agent gets the policy's
//! `issuance.auto_renewal_validity`, and so does every renewal a node asks `vouch serve` for
//! (`POST certificate_renewal`, sent with `curl`). Needs `openssl`, `curl` and `ruby` with
//! Puppet (`puppet-agent`): missing, the tests fail, never skip.

mod common;

use common::{fixture, fixture_now, ok, require, run, s, vouch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PP_ROLE: &str = "1.3.6.1.4.1.34380.1.1.13";
const WEB: &str = "web01.example.test";
const ROLE_WEB: &str = "classes:\n  - profile::web\nenvironment: production\n\
                        extensions:\n  pp_role: web\n  pp_environment: production\n";

struct Ca {
    _t: tempfile::TempDir,
    dir: PathBuf,
    work: PathBuf,
}

impl Ca {
    fn new() -> Ca {
        let t = tempfile::tempdir().unwrap();
        let ca = Ca { dir: t.path().join("vouch"), work: t.path().to_path_buf(), _t: t };
        ok(&ca.vouch(&["ca", "init"]));
        let (cert, key) = (ca.work.join("cloud1.pem"), ca.work.join("cloud1.key"));
        ok(&ca.vouch(&["conductor", "new", "cloud1", "--cert-out", s(&cert), "--key-out", s(&key)]));
        ca
    }

    fn vouch(&self, args: &[&str]) -> Output {
        run(vouch().args(["--dir", s(&self.dir)]).args(args), None)
    }

    /// The conductor signs `classification` for `certname`: the csr_attributes.yaml written.
    fn sign_attributes(&self, certname: &str, classification: &str) -> Result<PathBuf, String> {
        let class = self.work.join(format!("{certname}.class.yaml"));
        std::fs::write(&class, classification).unwrap();
        let attrs = self.work.join(format!("{certname}.attrs.yaml"));
        let out = self.vouch(&[
            "conductor",
            "sign",
            "--cert",
            s(&self.work.join("cloud1.pem")),
            "--key",
            s(&self.work.join("cloud1.key")),
            "--classification",
            s(&class),
            "--certname",
            certname,
            "--expires-in",
            "1h",
            "--out",
            s(&attrs),
        ]);
        if out.status.success() {
            Ok(attrs)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// A CSR made as a Puppet agent makes it from `attrs` with the extension requests `extra`
    /// (`OID: value`, replacing the same OID's line, under `extension_requests`).
    fn csr(&self, certname: &str, attrs: &Path, extra: &[(&str, &str)], tag: &str) -> PathBuf {
        let mut text = std::fs::read_to_string(attrs).unwrap();
        for (k, v) in extra {
            let key = format!("  '{k}': ");
            let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with(&key)).collect();
            text = format!("{}\n{key}'{v}'\n", kept.join("\n"));
        }
        let edited = self.work.join(format!("{certname}-{tag}.attrs.yaml"));
        std::fs::write(&edited, text).unwrap();
        let csr = self.work.join(format!("{certname}-{tag}.csr"));
        let key = self.work.join(format!("{certname}-{tag}.key"));
        ok(&self.vouch(&[
            "csr",
            "--certname",
            certname,
            "--attributes",
            s(&edited),
            "--key-out",
            s(&key),
            "--csr-out",
            s(&csr),
        ]));
        csr
    }
}

/// `(OID, hex of the extension's value)` for every extension of the certificate at `pem`, as
/// `openssl asn1parse` reads them.
fn extensions(pem: &Path) -> Vec<(String, String)> {
    let out = Command::new("openssl").args(["asn1parse", "-in", s(pem)]).output().expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some((_, oid)) = l.split_once("prim: OBJECT            :") else { continue };
        // extnID, then the extnValue OCTET STRING (no critical flag: vouch writes none).
        if let Some((_, hex)) = lines.get(i + 1).and_then(|n| n.split_once("[HEX DUMP]:")) {
            found.push((oid.trim().to_string(), hex.trim().to_string()));
        }
    }
    found
}

/// What a command wrote, stdout then stderr (`vouch check` prints its refusals on stdout).
fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// DER UTF8String of `v`, hex as openssl prints it.
fn utf8_hex(v: &str) -> String {
    let mut h = format!("0C{:02X}", v.len());
    for b in v.bytes() {
        h.push_str(&format!("{b:02X}"));
    }
    h
}

/// `$trusted['extensions']` as Puppet builds it for a client presenting `pem` (Puppet's own
/// Ruby: Puppet::SSL::Certificate, Puppet::Context::TrustedInformation.remote), as JSON.
fn puppet_trusted_extensions(pem: &Path, certname: &str) -> serde_json::Value {
    require("ruby", "puppet-agent");
    let script = "require 'puppet'; require 'json'; Puppet::SSL::Oids.register_puppet_oids; \
                  c = Puppet::SSL::Certificate.from_s(File.read(ARGV[0])); \
                  t = Puppet::Context::TrustedInformation.remote(true, ARGV[1], c); \
                  puts JSON.generate(t.to_h['extensions'])";
    let out = Command::new("ruby").args(["-e", script, s(pem), certname]).output().expect("ruby");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The first certificate of `vouch sign`'s output, written to `path`.
fn first_cert(out: &str, path: &Path) -> PathBuf {
    let end = out.find("-----END CERTIFICATE-----\n").unwrap() + "-----END CERTIFICATE-----\n".len();
    std::fs::write(path, &out[..end]).unwrap();
    path.to_path_buf()
}

fn assert_role_web(pem: &Path) {
    let ext = extensions(pem);
    let role: Vec<_> = ext.iter().filter(|(o, _)| o == "1.3.6.1.4.1.34380.1.1.13").collect();
    assert_eq!(role.len(), 1, "one pp_role extension: {ext:?}");
    assert_eq!(role[0].1, utf8_hex("web"), "pp_role is a DER UTF8String 'web'");
    let env = ext.iter().find(|(o, _)| o == "1.3.6.1.4.1.34380.1.1.12").expect("pp_environment");
    assert_eq!(env.1, utf8_hex("production"));
    let trusted = puppet_trusted_extensions(pem, WEB);
    assert_eq!(trusted["pp_role"], "web", "{trusted}");
    assert_eq!(trusted["pp_environment"], "production", "{trusted}");
}

#[test]
fn signed_pp_role_reaches_trusted_extensions_and_renewal_keeps_it() {
    let ca = Ca::new();
    let attrs = ca.sign_attributes(WEB, ROLE_WEB).unwrap();
    // The conductor's csr_attributes.yaml requests them too, for Puppet Server as the CA.
    let written = std::fs::read_to_string(&attrs).unwrap();
    assert!(written.contains("  '1.3.6.1.4.1.34380.1.1.13': 'web'\n"), "{written}");
    let csr = ca.csr(WEB, &attrs, &[], "plain");
    let out = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let cert = first_cert(&out, &ca.work.join("web01.pem"));
    assert_role_web(&cert);
    // Renewal: a new certificate, the same trusted facts.
    let out = ok(&ca.vouch(&["renew", WEB]));
    let renewed = first_cert(&out, &ca.work.join("renewed.pem"));
    assert_ne!(std::fs::read(&renewed).unwrap(), std::fs::read(&cert).unwrap(), "renewed");
    assert_role_web(&renewed);
}

#[test]
fn a_node_asking_for_another_pp_role_than_signed_is_refused() {
    let ca = Ca::new();
    let attrs = ca.sign_attributes(WEB, ROLE_WEB).unwrap();
    // Another value: refused with its own code.
    let other = ca.csr(WEB, &attrs, &[(PP_ROLE, "db")], "db");
    let out = ca.vouch(&["check", "--csr", s(&other)]);
    let err = said(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[trusted-fact-mismatch]") && err.contains("\"db\""), "{err}");
    let out = ca.vouch(&["sign", "--csr", s(&other)]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // A registered extension the classification does not name: as before, the policy's
    // extensions.allow decides (empty: refused).
    let zone = ca.csr(WEB, &attrs, &[("1.3.6.1.4.1.34380.1.1.20", "a")], "zone");
    let out = ca.vouch(&["check", "--csr", s(&zone)]);
    let err = said(&out);
    assert!(err.contains("[puppet-extension-not-allowed]") && !err.contains("trusted-fact"), "{err}");
    // The same value (what Puppet Server in hook mode would copy): granted, written once
    // (with new attributes: the refused request holds the first ones).
    let attrs = ca.sign_attributes(WEB, ROLE_WEB).unwrap();
    let same = ca.csr(WEB, &attrs, &[(PP_ROLE, "web")], "same");
    let out = ok(&ca.vouch(&["sign", "--csr", s(&same)]));
    assert_role_web(&first_cert(&out, &ca.work.join("same.pem")));
}

#[test]
fn only_registered_names_with_string_values_are_signed() {
    let ca = Ca::new();
    for (bad, why) in [
        ("extensions:\n  pp_auth_role: admin\n", "pp_auth_role"),
        ("extensions:\n  pp_authorization: x\n", "pp_authorization"),
        ("extensions:\n  pp_cli_auth: 'true'\n", "pp_cli_auth"),
        ("extensions:\n  1.3.6.1.4.1.34380.1.1.13: web\n", "1.3.6.1.4.1.34380.1.1.13"),
        ("extensions:\n  pp_role: 7\n", "pp_role must be a string"),
    ] {
        let err = ca.sign_attributes(WEB, bad).expect_err(bad);
        assert!(err.contains(why), "{bad}: {err}");
    }
}

/// The data directory's policy: the fixture PKI's conductors, `extra` appended.
fn fixture_policy(ca: &Ca, extra: &str) {
    let text = std::fs::read_to_string(fixture("policy.toml")).unwrap();
    let base = fixture("");
    let text = text.replace("\"pki/", &format!("\"{}pki/", s(&base)));
    std::fs::write(ca.dir.join("policy.toml"), format!("{text}{extra}")).unwrap();
}

fn not_after(pem: &Path) -> String {
    let out = Command::new("openssl").args(["x509", "-noout", "-enddate", "-in", s(pem)]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_puppet8_auto_renewing_agent_gets_the_auto_renewal_lifetime() {
    let ca = Ca::new();
    fixture_policy(&ca, "\n[issuance]\nauto_renewal_validity = \"90d\"\n");
    let now = fixture_now();
    let agent8 = "agent8.example.test";
    // The Puppet 8 form: pp_auth_auto_renew "true" as a PrintableString attribute, and the
    // signed pp_role requested again.
    let csr = fixture("puppet8/csr-puppet8-auto-renew-pp-role-web.csr.pem");
    let out = ok(&ca.vouch(&["--now", &now, "sign", "--csr", s(&csr), "--certname", agent8]));
    let cert = first_cert(&out, &ca.work.join("agent8.pem"));
    assert_eq!(not_after(&cert), "notAfter=Aug 30 12:00:00 2030 GMT", "90 days after {now}");
    assert_eq!(puppet_trusted_extensions(&cert, agent8)["pp_role"], "web");
    // Another pp_role than signed, in the same form: refused.
    let db = fixture("puppet8/csr-puppet8-auto-renew-pp-role-db-against-signed-web.csr.pem");
    let out = ca.vouch(&["--now", &now, "check", "--csr", s(&db), "--certname", agent8]);
    assert!(said(&out).contains("[trusted-fact-mismatch]"), "{out:?}");
    // A Puppet 7 agent (no such attribute) gets issuance.validity (5 years).
    let p7 = fixture("csr/valid-p256-conductor.csr.pem");
    let out = ok(&ca.vouch(&["--now", &now, "sign", "--csr", s(&p7), "--certname", WEB]));
    let cert = first_cert(&out, &ca.work.join("p7.pem"));
    assert!(not_after(&cert).ends_with("2035 GMT"), "{}", not_after(&cert));
}

/// Stops the `vouch serve` this test started, by its own handle, however the test ends.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_node_renewing_itself_gets_the_auto_renewal_lifetime_and_keeps_its_pp_role() {
    require("curl", "curl");
    let ca = Ca::new();
    let policy = ca.dir.join("policy.toml");
    let text = std::fs::read_to_string(&policy).unwrap();
    assert!(text.contains("renewal_min_age = \"1h\""), "{text}");
    let text = text.replace("renewal_min_age = \"1h\"", "renewal_min_age = \"0s\"\nauto_renewal_validity = \"90d\"");
    std::fs::write(&policy, text).unwrap();
    // A Puppet 7 agent's request (no pp_auth_auto_renew): issuance.validity, 5 years.
    let attrs = ca.sign_attributes(WEB, ROLE_WEB).unwrap();
    let csr = ca.csr(WEB, &attrs, &[], "api");
    let out = ok(&ca.vouch(&["sign", "--csr", s(&csr)]));
    let cert = first_cert(&out, &ca.work.join("api.pem"));
    let log = ca.work.join("serve.log");
    let (child, _, port) = common::start_serve(&mut common::serve_cmd(&ca.dir), &log);
    let serve = Serve(child);
    // The node renews itself (POST certificate_renewal, mutual TLS with its certificate), as
    // a Puppet 8 agent does: the new certificate lives 90 days, and keeps the signed pp_role.
    let chain = ca.work.join("chain.pem");
    let bundle = ["ca_crt.pem", "root_crt.pem"].map(|f| std::fs::read_to_string(ca.dir.join("ca").join(f)).unwrap());
    std::fs::write(&chain, bundle.concat()).unwrap();
    let renewed = ca.work.join("renewed-api.pem");
    let key = ca.work.join(format!("{WEB}-api.key"));
    let out = Command::new("curl")
        .args(["-sS", "--fail-with-body", "--cacert", s(&chain), "--cert", s(&cert), "--key", s(&key)])
        .args(["-X", "POST", "-H", "Content-Type: text/plain", "-H", "Accept: text/plain", "-o", s(&renewed)])
        .arg(format!("https://localhost:{port}/puppet-ca/v1/certificate_renewal"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{}", said(&out), std::fs::read_to_string(&log).unwrap_or_default());
    drop(serve);
    // openssl -checkend N: whether the certificate is still valid N seconds from now.
    let valid_in = |pem: &Path, days: u64| {
        let secs = (days * 86_400).to_string();
        Command::new("openssl").args(["x509", "-noout", "-checkend", &secs, "-in", s(pem)]).status().unwrap().success()
    };
    assert!(valid_in(&cert, 4 * 365), "issued for 5 years: {}", not_after(&cert));
    assert!(valid_in(&renewed, 89) && !valid_in(&renewed, 91), "renewed for 90 days: {}", not_after(&renewed));
    assert_role_web(&renewed);
}
