//! The real `vouch` binary, driven as users and Puppet Server drive it, with
//! `openssl` and Debian's `cloud-init` as independent checkers.

mod common;

use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn vouch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
    c.env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY");
    c
}

fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
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

fn openssl(args: &[&str]) -> String {
    require("openssl", "openssl");
    let out = Command::new("openssl").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn every_fixture_through_the_autosign_hook() {
    let now = fixture_now();
    let policy = fixture("policy.toml");
    let mut failures = vec![];
    for (file, certname, want) in CASES {
        let body = std::fs::read(fixture(&format!("csr/{file}"))).unwrap();
        let out = run(vouch().args(["--now", &now, "autosign", certname, "--policy", s(&policy)]), Some(&body));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        let expected_code = if want.is_empty() { Some(0) } else { Some(1) };
        if code != expected_code {
            failures.push(format!("{file}: exit {code:?}, want {expected_code:?}; stderr: {stderr}"));
            continue;
        }
        for w in *want {
            if !stderr.contains(&format!("[{w}]")) {
                failures.push(format!("{file}: stderr lacks [{w}]: {stderr}"));
            }
        }
        if !want.is_empty() && !stderr.contains("hint:") {
            failures.push(format!("{file}: no hint in {stderr}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn scoped_policy_through_the_autosign_hook() {
    let now = fixture_now();
    let policy = fixture("policy-scoped.toml");
    for (file, certname, want) in SCOPED_CASES {
        let body = std::fs::read(fixture(&format!("csr/{file}"))).unwrap();
        let out = run(vouch().args(["--now", &now, "autosign", certname, "--policy", s(&policy)]), Some(&body));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(if want.is_empty() { 0 } else { 1 }), "{file}: {stderr}");
        for w in *want {
            assert!(stderr.contains(&format!("[{w}]")), "{file}: want [{w}] in {stderr}");
        }
    }
}

#[test]
fn check_json_lists_the_reasons() {
    let out = run(
        vouch().args([
            "--now",
            &fixture_now(),
            "check",
            "--policy",
            s(&fixture("policy.toml")),
            "--csr",
            s(&fixture("csr/tampered-version-1-to-01.csr.pem")),
            "--format",
            "json",
        ]),
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "refused");
    assert_eq!(v["certname"], CERTNAME);
    let codes: Vec<&str> = v["reasons"].as_array().unwrap().iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["version-malformed", "signature-invalid"]);
}

/// The README walkthrough: init → conductor new → conductor sign → csr → autosign.
#[test]
fn walkthrough_for_every_ca_key_type() {
    for key_type in ["p256", "p384", "ed25519", "rsa2048"] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vouch");
        ok(&run(vouch().args(["ca", "init", "--key-type", key_type]).env("VOUCH_DIR", &dir), None));
        let ca = dir.join("ca");
        assert_eq!(mode(&ca.join("root_key.pem")), 0o600);
        assert_eq!(mode(&ca.join("ca_key.pem")), 0o600);
        // openssl: the master CA chains to the root; both are CAs.
        openssl(&["verify", "-CAfile", s(&ca.join("root_crt.pem")), s(&ca.join("ca_crt.pem"))]);
        let text = openssl(&["x509", "-in", s(&ca.join("ca_crt.pem")), "-noout", "-text"]);
        assert!(text.contains("CA:TRUE") && text.contains("Certificate Sign"), "{text}");

        let cert = t.path().join("conductor.pem");
        let key = t.path().join("conductor.key");
        ok(&run(
            vouch()
                .args(["--dir", s(&dir), "conductor", "new", "cloud1", "--key-type", key_type, "--cert-out"])
                .args([s(&cert), "--key-out", s(&key)]),
            None,
        ));
        assert_eq!(mode(&key), 0o600);
        openssl(&["verify", "-CAfile", s(&ca.join("root_crt.pem")), s(&cert)]);
        let text = openssl(&["x509", "-in", s(&cert), "-noout", "-text"]);
        assert!(text.contains("1.3.6.1.4.1.34380.2.0"), "EKU .2.0 visible to openssl: {text}");
        assert!(text.contains("Digital Signature"), "{text}");
        assert!(text.contains("CA:FALSE"), "{text}");

        let attrs = t.path().join("csr_attributes.yaml");
        ok(&run(
            vouch().args(["conductor", "sign", "--cert", s(&cert), "--key", s(&key), "--classification"]).args([
                s(&fixture("classification.yaml")),
                "--expires-in",
                "1h",
                "--out",
                s(&attrs),
            ]),
            None,
        ));
        let node_key = t.path().join("node.key");
        let node_csr = t.path().join("node.csr");
        ok(&run(
            vouch().args(["csr", "--certname", "web01.example.test", "--attributes", s(&attrs), "--key-out"]).args([
                s(&node_key),
                "--csr-out",
                s(&node_csr),
            ]),
            None,
        ));
        assert_eq!(mode(&node_key), 0o600);
        let text = openssl(&["req", "-in", s(&node_csr), "-noout", "-verify", "-text"]);
        assert!(text.contains("1.3.6.1.4.1.34380.2.5") && text.contains("CN = web01.example.test"), "{text}");

        // The hook finds its policy through VOUCH_DIR.
        let body = std::fs::read(&node_csr).unwrap();
        let out = run(vouch().arg("autosign").arg("web01.example.test").env("VOUCH_DIR", &dir), Some(&body));
        ok(&out);
        let out = run(vouch().arg("autosign").arg("web02.example.test").env("VOUCH_DIR", &dir), Some(&body));
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("[common-name-mismatch]"));
        let log = std::fs::read_to_string(dir.join("audit.log")).unwrap();
        let lines: Vec<serde_json::Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["verdict"], "granted");
        assert_eq!(lines[0]["conductor"]["subject"], "CN=cloud1");
        assert_eq!(lines[1]["verdict"], "refused");
        assert_eq!(lines[1]["reasons"][0]["code"], "common-name-mismatch");
        assert!(lines[1]["time"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn ca_init_refuses_to_overwrite() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("v");
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    let before = std::fs::read(dir.join("ca/root_key.pem")).unwrap();
    let out = run(vouch().args(["--dir", s(&dir), "ca", "init"]), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(std::fs::read(dir.join("ca/root_key.pem")).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "ca/ and policy.toml only: {leftovers:?}");
}

#[test]
fn policy_discovery_order() {
    let t = tempfile::tempdir().unwrap();
    let body = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let now = fixture_now();
    // VOUCH_POLICY wins over VOUCH_DIR.
    let out = run(
        vouch()
            .args(["--now", &now, "autosign", CERTNAME])
            .env("VOUCH_POLICY", fixture("policy.toml"))
            .env("VOUCH_DIR", t.path()),
        Some(&body),
    );
    ok(&out);
    // VOUCH_DIR without a policy, and no /etc/vouch: a clear error, exit 2.
    if !Path::new(vouch::cli::SYSTEM_POLICY).exists() {
        let out = run(vouch().args(["--now", &now, "autosign", CERTNAME]).env("VOUCH_DIR", t.path()), Some(&body));
        assert_eq!(out.status.code(), Some(2));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("no policy found") && e.contains("hint:"), "{e}");
    }
}

#[test]
fn bad_policy_names_file_line_and_key() {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("pki/root_crt.pem"), t.path().join("root.pem")).unwrap();
    let policy = t.path().join("policy.toml");
    for (text, line, key) in [
        (
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n[extensions]\nallow = [\"pp_auth_role\"]\n",
            4,
            "extensions.allow",
        ),
        // Only ppRegCertExt / ppPrivCertExt may be allowed: not basicConstraints, EKU, any
        // 2.5.29.*, vouch's own .2 arc, nor the classification mirror vouch writes itself.
        (
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n[extensions]\nallow = [\"2.5.29.19\"]\n",
            4,
            "extensions.allow",
        ),
        (
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n[extensions]\nallow = [\"pp_uuid\",\n  \"2.5.29.37\"]\n",
            5,
            "extensions.allow",
        ),
        (
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n[extensions]\nallow = [\"1.3.6.1.4.1.34380.2.5\"]\n",
            4,
            "extensions.allow",
        ),
        (
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n[extensions]\nallow = [\"1.3.6.1.4.1.34380.1.2.5\"]\n",
            4,
            "extensions.allow",
        ),
        ("[conductors]\ntrusted_roots = [\"root.pem\"]\n\n[attributes]\nmax_lifetme = \"1d\"\n", 5, "max_lifetme"),
        ("[conductors]\ntrusted_roots = [\"missing.pem\"]\n", 2, "conductors.trusted_roots"),
    ] {
        std::fs::write(&policy, text).unwrap();
        let out = run(vouch().args(["autosign", CERTNAME, "--policy", s(&policy)]), Some(b""));
        assert_eq!(out.status.code(), Some(2));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains(&format!("policy {} line {line} key '{key}'", policy.display())),
            "want line {line} key {key}: {e}"
        );
    }
}

fn conductor_sign(args: &[&str]) -> Output {
    let mut c = vouch();
    c.args(["conductor", "sign"]).args(args);
    run(&mut c, None)
}

#[test]
fn conductor_sign_rejects_bad_input_clearly() {
    let t = tempfile::tempdir().unwrap();
    let cert = fixture("pki/conductor-p256.pem");
    let key = fixture("pki/conductor-p256.key");
    let bad = t.path().join("bad.yaml");
    std::fs::write(&bad, "classes: [Not-A-Class]\n").unwrap();
    let out =
        conductor_sign(&["--cert", s(&cert), "--key", s(&key), "--classification", s(&bad), "--expires-in", "1h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid Puppet class name"));
    // A key that is not the certificate's.
    let out = conductor_sign(&[
        "--cert",
        s(&cert),
        "--key",
        s(&fixture("pki/conductor-rsa2048.key")),
        "--classification",
        s(&fixture("classification.yaml")),
        "--expires-in",
        "1h",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not belong"));
    // A past expiry, a bad duration.
    for exp in [["--expires", "2001-01-01T00:00:00Z"], ["--expires-in", "soon"]] {
        let out = conductor_sign(&[
            "--cert",
            s(&cert),
            "--key",
            s(&key),
            "--classification",
            s(&fixture("classification.yaml")),
            exp[0],
            exp[1],
        ]);
        assert_eq!(out.status.code(), Some(2), "{exp:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("expiry"), "{exp:?}");
    }
    // PEM in .2.4 cannot travel in the line-based txt format.
    let out = conductor_sign(&[
        "--cert",
        s(&cert),
        "--key",
        s(&key),
        "--classification",
        s(&fixture("classification.yaml")),
        "--expires-in",
        "1h",
        "--format",
        "txt",
        "--cert-encoding",
        "pem",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("txt format cannot carry"));
}

/// Every output format is accepted back by `vouch csr` and the hook; the
/// classification can come from stdin.
#[test]
fn every_format_round_trips_through_csr_and_autosign() {
    let t = tempfile::tempdir().unwrap();
    let cert = fixture("pki/conductor-ed25519.pem");
    let key = fixture("pki/conductor-ed25519.key");
    let class = std::fs::read(fixture("classification.yaml")).unwrap();
    let now = fixture_now();
    for (format, enc) in [
        ("puppet-yaml", "base64-der"),
        ("puppet-yaml", "pem"),
        ("txt", "base64-der"),
        ("cloud-config", "pem"),
        ("json", "base64-der"),
    ] {
        let attrs = t.path().join(format!("attrs-{format}-{enc}"));
        let mut c = vouch();
        c.args(["--now", &now, "conductor", "sign", "--cert", s(&cert), "--key", s(&key), "--classification", "-"])
            .args(["--expires-in", "2h", "--format", format, "--cert-encoding", enc, "--out", s(&attrs)]);
        ok(&run(&mut c, Some(&class)));
        assert_eq!(mode(&attrs), 0o600, "attributes are secrets until used");
        let csr = t.path().join(format!("{format}-{enc}.csr"));
        let nkey = t.path().join(format!("{format}-{enc}.key"));
        ok(&run(
            vouch().args(["csr", "--certname", CERTNAME, "--attributes", s(&attrs), "--key-type", "rsa2048"]).args([
                "--key-out",
                s(&nkey),
                "--csr-out",
                s(&csr),
            ]),
            None,
        ));
        let body = std::fs::read(&csr).unwrap();
        ok(&run(
            vouch().args(["--now", &now, "autosign", CERTNAME, "--policy", s(&fixture("policy.toml"))]),
            Some(&body),
        ));
    }
}

/// A conductor certificate made by openssl, issued by an intermediate made by
/// openssl and listed in the policy, works with vouch's signing and decision.
#[test]
fn openssl_made_conductor_via_listed_intermediate() {
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| -> PathBuf { t.path().join(n) };
    let dir = p("ca");
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    let root_crt = dir.join("ca/root_crt.pem");
    let root_key = dir.join("ca/root_key.pem");
    std::fs::write(p("inter.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
        .unwrap();
    std::fs::write(
        p("cond.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=1.3.6.1.4.1.34380.2.0\n",
    )
    .unwrap();
    openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", s(&p("inter.key"))]);
    openssl(&[
        "req",
        "-new",
        "-key",
        s(&p("inter.key")),
        "-subj",
        "/CN=openssl intermediate",
        "-out",
        s(&p("inter.csr")),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        s(&p("inter.csr")),
        "-CA",
        s(&root_crt),
        "-CAkey",
        s(&root_key),
        "-CAcreateserial",
        "-days",
        "30",
        "-extfile",
        s(&p("inter.ext")),
        "-out",
        s(&p("inter.pem")),
    ]);
    openssl(&["genrsa", "-out", s(&p("cond.key")), "2048"]);
    openssl(&["req", "-new", "-key", s(&p("cond.key")), "-subj", "/CN=openssl conductor", "-out", s(&p("cond.csr"))]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        s(&p("cond.csr")),
        "-CA",
        s(&p("inter.pem")),
        "-CAkey",
        s(&p("inter.key")),
        "-CAcreateserial",
        "-days",
        "30",
        "-extfile",
        s(&p("cond.ext")),
        "-out",
        s(&p("cond.pem")),
    ]);
    let sign = |out: &Path| {
        ok(&conductor_sign(&[
            "--cert",
            s(&p("cond.pem")),
            "--key",
            s(&p("cond.key")),
            "--classification",
            s(&fixture("classification.yaml")),
            "--expires-in",
            "30m",
            "--out",
            s(out),
        ]))
    };
    sign(&p("attrs.yaml"));
    ok(&run(
        vouch().args(["csr", "--certname", CERTNAME, "--attributes", s(&p("attrs.yaml")), "--key-out"]).args([
            s(&p("n.key")),
            "--csr-out",
            s(&p("n.csr")),
        ]),
        None,
    ));
    let body = std::fs::read(p("n.csr")).unwrap();
    let policy = dir.join("policy.toml");
    // Not yet listed: refused as untrusted.
    let out = run(vouch().args(["autosign", CERTNAME, "--policy", s(&policy)]), Some(&body));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[conductor-untrusted]"));
    // Listed in the trust bundle: granted.
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::copy(p("inter.pem"), dir.join("inter.pem")).unwrap();
    std::fs::write(&policy, text.replace("intermediates = []", "intermediates = [\"inter.pem\"]")).unwrap();
    ok(&run(vouch().args(["autosign", CERTNAME, "--policy", s(&policy)]), Some(&body)));
}

#[test]
fn cloud_config_output_passes_cloud_init_schema() {
    require("cloud-init", "cloud-init");
    let t = tempfile::tempdir().unwrap();
    let out_file = t.path().join("user-data");
    for enc in ["base64-der", "pem"] {
        ok(&conductor_sign(&[
            "--cert",
            s(&fixture("pki/conductor-p256.pem")),
            "--key",
            s(&fixture("pki/conductor-p256.key")),
            "--classification",
            s(&fixture("classification.yaml")),
            "--expires-in",
            "1h",
            "--format",
            "cloud-config",
            "--cert-encoding",
            enc,
            "--out",
            s(&out_file),
        ]));
        let out = Command::new("cloud-init").args(["schema", "--config-file", s(&out_file)]).output().unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && all.contains("Valid"), "cloud-init schema: {all}");
    }
    // And the check can fail: an unknown key under csr_attributes is rejected.
    let text = std::fs::read_to_string(&out_file).unwrap();
    std::fs::write(&out_file, text.replace("  csr_attributes:\n", "  csr_attributes:\n    bogus: 1\n")).unwrap();
    let out = Command::new("cloud-init").args(["schema", "--config-file", s(&out_file)]).output().unwrap();
    assert!(!out.status.success(), "cloud-init accepted a bogus key");
}

/// Puppet Server runs `autosign = PATH` with only the certname: a symlink named
/// vouch-autosign behaves as `vouch autosign`.
#[test]
fn vouch_autosign_symlink_is_the_hook() {
    let t = tempfile::tempdir().unwrap();
    let link = t.path().join("vouch-autosign");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vouch"), &link).unwrap();
    let body = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let mut c = Command::new(&link);
    c.arg(CERTNAME).env("VOUCH_POLICY", fixture("policy.toml")).env_remove("VOUCH_DIR");
    // The hook has no --now: the fixture conductor (valid from 2030) is refused today,
    // with the reason on stderr, which proves the hook ran the decision.
    let out = run(&mut c, Some(&body));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[conductor-not-yet-valid]"));
}

/// The shipped example policies parse (next to a root certificate).
#[test]
fn shipped_policies_parse() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("ca")).unwrap();
    std::fs::copy(fixture("pki/root_crt.pem"), t.path().join("ca/root_crt.pem")).unwrap();
    for name in ["default.toml", "strict.toml"] {
        let p = t.path().join(name);
        std::fs::copy(root().join("policy").join(name), &p).unwrap();
        let policy = vouch::Policy::load(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(policy.mirror_required, name == "strict.toml");
    }
}

/// The README's main command runs end to end with the built binary.
#[test]
fn readme_walkthrough_script_runs() {
    let t = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root().join("examples/walkthrough.sh"))
        .arg(t.path().join("w"))
        .env("VOUCH", env!("CARGO_BIN_EXE_vouch"))
        .env_remove("VOUCH_DIR")
        .env_remove("VOUCH_POLICY")
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{all}");
    assert!(all.contains("exit 0 (granted)") && all.contains("refused, as it must be"), "{all}");
    assert!(all.contains("profile::web") && all.contains("a revoked node gets no classification"), "{all}");
}

/// A body over 1 MiB is refused by the hook (Puppet Server itself has no limit).
#[test]
fn oversized_request_body_is_refused() {
    let mut body = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    body.extend(std::iter::repeat_n(b'#', 2 * 1024 * 1024));
    let out = run(
        vouch().args(["--now", &fixture_now(), "autosign", CERTNAME, "--policy", s(&fixture("policy.toml"))]),
        Some(&body),
    );
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("[csr-malformed]") && e.contains("larger than 1 MiB"), "{e}");
}
