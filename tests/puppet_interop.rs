//! Real interop: Debian's puppet-agent makes CSRs through Puppet's own code path
//! from the csr_attributes.yaml that `vouch conductor sign` wrote; `vouch autosign`
//! grants them for every conductor key type, and refuses them when any signed
//! value in that file was tampered with.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// Puppet's agent code makes the CSR.
fn puppet_csr(certname: &str, attrs: &Path, out: &Path) {
    require("ruby", "ruby puppet-agent");
    let o = Command::new("ruby")
        .arg(root().join("tests/support/make-puppet-csr.rb"))
        .args([certname, s(attrs), s(out)])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "Puppet could not make a CSR (is puppet-agent installed?):\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs the hook as Puppet Server does; returns (exit code, stderr).
fn autosign(certname: &str, csr: &Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .args(["--now", &fixture_now(), "autosign", certname, "--policy", s(&fixture("policy.toml"))])
        .env_remove("VOUCH_DIR")
        .env_remove("VOUCH_POLICY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &std::fs::read(csr).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn sign(conductor: &str, out: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .args(["--now", &fixture_now(), "conductor", "sign"])
        .args(["--cert", s(&fixture(&format!("pki/conductor-{conductor}.pem")))])
        .args(["--key", s(&fixture(&format!("pki/conductor-{conductor}.key")))])
        .args(["--classification", s(&fixture("classification.yaml")), "--expires-in", "2h", "--out", s(out)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Replaces the quoted value of `key` in a csr_attributes.yaml written by vouch.
fn tamper(yaml: &str, section: &str, key: &str, f: impl Fn(&str) -> String) -> String {
    let mut in_section = false;
    let mut done = false;
    let out: Vec<String> = yaml
        .lines()
        .map(|line| {
            if !line.starts_with(' ') {
                in_section = line.starts_with(section);
                return line.to_string();
            }
            let prefix = format!("  '{key}': '");
            if in_section && line.starts_with(&prefix) && line.ends_with('\'') {
                done = true;
                let value = &line[prefix.len()..line.len() - 1];
                return format!("{prefix}{}'", f(value));
            }
            line.to_string()
        })
        .collect();
    assert!(done, "{section}.{key} not found in\n{yaml}");
    out.join("\n") + "\n"
}

#[test]
fn real_puppet_agent_csrs_are_granted_for_every_conductor_key_type() {
    let t = tempfile::tempdir().unwrap();
    for conductor in ["p256", "rsa2048", "ed25519", "p384"] {
        let attrs = t.path().join(format!("{conductor}.yaml"));
        sign(conductor, &attrs);
        let csr = t.path().join(format!("{conductor}.csr"));
        puppet_csr(CERTNAME, &attrs, &csr);
        let (code, stderr) = autosign(CERTNAME, &csr);
        assert_eq!(code, 0, "{conductor}: {stderr}");
    }
}

#[test]
fn tampering_with_any_signed_value_in_the_yaml_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let attrs = t.path().join("good.yaml");
    sign("p256", &attrs);
    let good = std::fs::read_to_string(&attrs).unwrap();
    let other_cert = {
        let other = t.path().join("other.yaml");
        sign("rsa2048", &other);
        let y = std::fs::read_to_string(&other).unwrap();
        let line = y.lines().find(|l| l.starts_with("  '1.3.6.1.4.1.34380.2.4'")).unwrap().to_string();
        line.split('\'').nth(3).unwrap().to_string()
    };
    let other_class = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode("classes:\n  - profile::db\n")
    };
    let flip = |v: &str| -> String {
        let mut c: Vec<char> = v.chars().collect();
        c[10] = if c[10] == 'A' { 'B' } else { 'A' };
        c.into_iter().collect()
    };
    let cases: Vec<(&str, String, &[&str])> = vec![
        ("signature", tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.1", flip), &["signature-invalid"]),
        (
            "version",
            tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.2", |_| "01".into()),
            &["version-malformed", "signature-invalid"],
        ),
        (
            "expiry",
            tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.3", |v| v.replace("T1", "T0")),
            &["signature-invalid"],
        ),
        (
            "conductor certificate",
            tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.4", |_| other_cert.clone()),
            &["signature-invalid"],
        ),
        (
            "classification",
            tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.5", |_| other_class.clone()),
            &["signature-invalid", "mirror-mismatch"],
        ),
        (
            "classification and its mirror",
            tamper(
                &tamper(&good, "custom_attributes", "1.3.6.1.4.1.34380.2.5", |_| other_class.clone()),
                "extension_requests",
                "1.3.6.1.4.1.34380.1.2.5",
                |_| other_class.clone(),
            ),
            &["signature-invalid"],
        ),
        (
            "mirror only",
            tamper(&good, "extension_requests", "1.3.6.1.4.1.34380.1.2.5", |_| other_class.clone()),
            &["mirror-mismatch"],
        ),
    ];
    for (what, yaml, want) in cases {
        assert_ne!(yaml, good, "{what}: nothing was changed");
        let file = t.path().join("tampered.yaml");
        std::fs::write(&file, &yaml).unwrap();
        let csr = t.path().join("tampered.csr");
        let _ = std::fs::remove_file(&csr);
        puppet_csr(CERTNAME, &file, &csr);
        let (code, stderr) = autosign(CERTNAME, &csr);
        assert_eq!(code, 1, "tampered {what} was not refused: {stderr}");
        for w in want {
            assert!(stderr.contains(&format!("[{w}]")), "tampered {what}: want [{w}] in {stderr}");
        }
    }
    // The untouched file still passes with the same agent code.
    let csr = t.path().join("good.csr");
    puppet_csr(CERTNAME, &attrs, &csr);
    assert_eq!(autosign(CERTNAME, &csr).0, 0);
    // And the same Puppet CSR asked about under another certname is refused (CN mismatch).
    assert_eq!(autosign("db01.example.test", &csr).0, 1);
}
