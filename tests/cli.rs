//! The real `vouch` binary, driven as users and Puppet Server drive it, with
//! `openssl` and Debian's `cloud-init` as independent checkers.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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

/// `ca init` writes the default policy, then makes `ca/` appear: one stopped between the two
/// left the default policy alone, which the next `ca init` takes up. Another policy is refused.
#[test]
fn ca_init_takes_up_the_default_policy_a_stopped_init_left() {
    let t = tempfile::tempdir().unwrap();
    let done = t.path().join("done");
    ok(&run(vouch().args(["--dir", s(&done), "ca", "init"]), None));
    let default_policy = std::fs::read(done.join("policy.toml")).unwrap();
    let dir = t.path().join("v");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(dir.join("policy.toml"), &default_policy).unwrap();
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    assert!(dir.join("ca/ca_key.pem").exists());
    let own = t.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(own.join("policy.toml"), b"[conductors]\n").unwrap();
    let out = run(vouch().args(["--dir", s(&own), "ca", "init"]), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert!(!own.join("ca").exists());
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

/// A certname given with capitals is signed lower case, as Puppet's certnames are: said on
/// stderr, since the instance's agent must use the lower-case name.
#[test]
fn conductor_sign_says_when_it_signs_a_certname_lower_case() {
    let (cert, key) = (fixture("pki/conductor-p256.pem"), fixture("pki/conductor-p256.key"));
    let out = conductor_sign(&[
        "--cert",
        s(&cert),
        "--key",
        s(&key),
        "--classification",
        s(&fixture("classification.yaml")),
        "--expires-in",
        "1h",
        "--certname",
        "Web01.Example.test",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stderr.contains("signed as \"web01.example.test\""), "{stderr}");
    assert!(stdout.contains("web01.example.test") && !stdout.contains("Web01"), "{stdout}");
    let out = conductor_sign(&[
        "--cert",
        s(&cert),
        "--key",
        s(&key),
        "--classification",
        s(&fixture("classification.yaml")),
        "--expires-in",
        "1h",
        "--certname",
        "web01.example.test",
    ]);
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
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

/// `vouch conductor sign` signs no classification that carries a YAML tag, whatever its
/// form: the core-schema `!!python/object/apply` one (signed, granted and issued before:
/// serde_yaml_ng dropped tags libyaml resolved to URIs), `!!binary`, `!!int`, `!!str`,
/// a verbatim tag, a `%TAG` handle, a `%YAML` directive; from stdin or from a file.
/// Nothing is written: no attributes exist for the node to put in its CSR.
#[test]
fn conductor_sign_refuses_every_yaml_tag() {
    let t = tempfile::tempdir().unwrap();
    let cert = fixture("pki/conductor-p256.pem");
    let key = fixture("pki/conductor-p256.key");
    let now = fixture_now();
    let sign = |class: &str, from_file: bool| {
        let attrs = t.path().join("attrs.yaml");
        let file = t.path().join("class.yaml");
        std::fs::write(&file, class).unwrap();
        let mut c = vouch();
        c.args(["--now", &now, "conductor", "sign", "--cert", s(&cert), "--key", s(&key), "--classification"])
            .arg(if from_file { s(&file) } else { "-" })
            .args(["--expires-in", "1h", "--out", s(&attrs)]);
        let out = run(&mut c, if from_file { None } else { Some(class.as_bytes()) });
        let written = attrs.exists();
        let _ = std::fs::remove_file(&attrs);
        (out, written)
    };
    // The control: the same classification without a tag is signed.
    let (out, written) = sign("parameters: {a: [\"echo PWNED\"]}\n", false);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(written);
    for (class, shown) in [
        ("parameters: {a: !!python/object/apply:os.system [\"echo PWNED\"]}\n", "!!python/object/apply:os.system"),
        ("parameters:\n  a: !!binary aGVsbG8=\n", "!!binary"),
        ("parameters:\n  a: !!int \"3\"\n", "!!int"),
        ("parameters:\n  a: !!str 3\n", "!!str"),
        ("parameters:\n  !!str a: b\n", "!!str"),
        ("parameters:\n  a: !<tag:yaml.org,2002:str> 3\n", "!<tag:yaml.org,2002:str>"),
        ("%TAG !e! tag:example.com,2000:\n---\nparameters:\n  a: !e!x b\n", "%TAG !e!"),
        ("%YAML 1.1\n---\nclasses: [ntp]\n", "%YAML 1.1"),
        ("classes: !ruby/object:Gem::Installer {}\n", "!ruby/object:Gem::Installer"),
    ] {
        for from_file in [false, true] {
            let (out, written) = sign(class, from_file);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{class:?} (file: {from_file}): {err}");
            assert!(err.contains(shown) && err.contains("not allowed"), "{class:?}: {err}");
            assert!(err.contains("hint: YAML tags"), "{class:?}: {err}");
            assert!(!written && out.stdout.is_empty(), "{class:?}: nothing signed");
        }
    }
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

/// The hook's log settings never change its answer nor reach its stdout: unparsable
/// VOUCH_LOG_FORMAT and RUST_LOG are reported on stderr (JSON lines, stderr being a pipe)
/// and the decision is the same, with nothing on stdout.
#[test]
fn log_settings_never_change_the_hooks_answer_nor_reach_its_stdout() {
    let body = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let hook = |env: &[(&str, &str)]| {
        let mut c = vouch();
        c.args(["autosign", CERTNAME]).env("VOUCH_POLICY", fixture("policy.toml"));
        for var in ["RUST_LOG", "VOUCH_LOG", "VOUCH_LOG_FORMAT"] {
            c.env_remove(var);
        }
        c.envs(env.iter().copied());
        run(&mut c, Some(&body))
    };
    let plain = hook(&[]);
    assert_eq!(plain.status.code(), Some(1), "the fixture conductor is not valid yet");
    assert!(plain.stdout.is_empty());
    let bad = hook(&[("VOUCH_LOG_FORMAT", "yaml"), ("RUST_LOG", "[[")]);
    assert_eq!(bad.status.code(), plain.status.code());
    assert!(bad.stdout.is_empty(), "{}", String::from_utf8_lossy(&bad.stdout));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("[conductor-not-yet-valid]"), "{err}");
    let warnings: Vec<serde_json::Value> =
        err.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    let vars: Vec<&str> = warnings.iter().filter_map(|w| w["variable"].as_str()).collect();
    assert_eq!(vars, ["VOUCH_LOG_FORMAT", "RUST_LOG"], "{err}");
    assert!(warnings.iter().all(|w| w["level"] == "WARN" && w["event"] == "warning"), "{err}");
    // Text on request, on stderr still.
    let text = hook(&[("VOUCH_LOG_FORMAT", "text"), ("RUST_LOG", "[[")]);
    assert!(text.stdout.is_empty());
    assert!(String::from_utf8_lossy(&text.stderr).contains(" WARN RUST_LOG is ignored"), "{text:?}");
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
/// The README's walkthrough block, run as written (in a scratch directory, with VOUCH_DIR
/// pointed there): every command succeeds but `check` after the hook (attributes-replayed,
/// as its comment says), so the front door never drifts from what vouch does.
#[test]
fn the_readme_walkthrough_block_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("## Walkthrough").expect("a Walkthrough section")..];
    let start = section.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let block = &section[start..start + section[start..].find("```").expect("the block ends")];
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vouch"), bin.join("vouch")).unwrap();
    // The block's data directory is under $HOME: the scratch directory's here.
    assert!(block.contains("export VOUCH_DIR=$HOME/"), "the walkthrough's VOUCH_DIR moved: {block}");
    let script = format!("trap 'echo \"FAILED($?): $BASH_COMMAND\" >&2' ERR\n{block}");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(t.path())
        .env("HOME", t.path())
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env_remove("VOUCH_DIR")
        .env_remove("VOUCH_POLICY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let failed: Vec<&str> = err.lines().filter(|l| l.starts_with("FAILED(")).collect();
    assert_eq!(failed.len(), 1, "only check after the hook may fail:\n{err}");
    assert!(failed[0].starts_with("FAILED(1): vouch check"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("attributes-replayed"), "{stdout}");
    assert!(stdout.contains("granted"), "{stdout}");
    for f in ["web02.pem", "web02-new.pem", "ca_crl.pem"] {
        assert!(t.path().join(f).exists(), "{f} missing:\n{err}");
    }
}

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

// ---- issue 13: ownership, outputs, panics, help, exit codes ----

/// A fresh CA in `t/name` (P-256: fast).
fn new_ca(t: &Path, name: &str) -> PathBuf {
    let dir = t.join(name);
    ok(&run(vouch().args(["--dir", s(&dir), "ca", "init"]), None));
    dir
}

fn code_and_err(out: &Output) -> (Option<i32>, String) {
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), None).unwrap();
}

fn chmod(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

fn file_type(p: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(p).unwrap().file_type()
}

const NOBODY: u32 = 65534;

/// vouch run as another user (`nobody`), from a copy of the binary in `dir` (made 0755):
/// that user may not be able to enter the checkout (a clone under /root, or in a 0700
/// mktemp directory as `.ci/run` makes), and the test must not depend on where it lives.
fn vouch_as_nobody(dir: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    chmod(dir, 0o755);
    let bin = dir.join("vouch-for-nobody");
    if !bin.exists() {
        std::fs::copy(env!("CARGO_BIN_EXE_vouch"), &bin).unwrap();
        chmod(&bin, 0o755);
        // Another test's child, forked while the copy was open for writing, holds that
        // descriptor until it execs: until then running the copy fails with ETXTBSY.
        for _ in 0..200 {
            match Command::new(&bin).arg("--version").stdout(std::process::Stdio::null()).status() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                _ => break,
            }
        }
    }
    let mut c = Command::new(bin);
    c.env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY").uid(NOBODY);
    c
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Point 5: a data directory, `ca/`, policy, CA key or trust anchor that another user could
/// change is refused wherever vouch loads one, with the chown/chmod line that fixes it;
/// root-owned files (the Puppet Server hook's /etc/vouch) are fine for any user.
/// A umask of 002 (common for ordinary users) must not make vouch's own directories
/// group-writable, which the trust rule would then refuse: the store's, the journal's and
/// the service's directories are created with explicit modes.
#[test]
fn a_permissive_umask_makes_no_directory_vouch_then_refuses() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("v");
    let under_umask = |args: &[&str]| {
        let mut c = Command::new("sh");
        c.arg("-c").arg("umask 002 && exec \"$0\" \"$@\"").arg(env!("CARGO_BIN_EXE_vouch"));
        c.env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY").args(["--dir", s(&dir)]).args(args);
        run(&mut c, None)
    };
    ok(&under_umask(&["ca", "init"]));
    let (cert, key) = (t.path().join("c.pem"), t.path().join("c.key"));
    ok(&under_umask(&["conductor", "new", "c", "--cert-out", s(&cert), "--key-out", s(&key)]));
    let class = t.path().join("class.yaml");
    std::fs::write(&class, "classes: [web]\n").unwrap();
    let attrs = t.path().join("attrs.yaml");
    let name = "umask.example.test";
    ok(&under_umask(&[
        "conductor",
        "sign",
        "--cert",
        s(&cert),
        "--key",
        s(&key),
        "--classification",
        s(&class),
        "--certname",
        name,
        "--expires-in",
        "30m",
        "--format",
        "puppet-yaml",
        "--out",
        s(&attrs),
    ]));
    let (nkey, csr) = (t.path().join("n.key"), t.path().join("n.csr"));
    ok(&under_umask(&[
        "csr",
        "--certname",
        name,
        "--attributes",
        s(&attrs),
        "--key-out",
        s(&nkey),
        "--csr-out",
        s(&csr),
    ]));
    let body = std::fs::read(&csr).unwrap();
    let mut hook = Command::new("sh");
    hook.arg("-c").arg("umask 002 && exec \"$0\" \"$@\"").arg(env!("CARGO_BIN_EXE_vouch"));
    hook.env_remove("VOUCH_DIR").env_remove("VOUCH_POLICY");
    hook.args(["autosign", "--policy", s(&dir.join("policy.toml")), "--", name]);
    ok(&run(&mut hook, Some(&body)));
    // The hook spent the attributes: a CA sharing the journal refuses them, but it opens.
    let (code, err) = code_and_err(&under_umask(&["sign", "--csr", s(&csr)]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[attributes-replayed]"), "{err}");
    ok(&under_umask(&["crl"]));
    ok(&under_umask(&["list", "--all"]));
    for sub in ["ca/signed", "ca/serials", "ca/tmp", "ca/pending", "ca/requests", "replay"] {
        let p = dir.join(sub);
        if p.exists() {
            assert_eq!(mode(&p) & 0o022, 0, "{sub} is writable by group or others: {:o}", mode(&p));
        }
    }
    for e in std::fs::read_dir(dir.join("replay")).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p) & 0o022, 0, "{} is writable by group or others", p.display());
    }
}

/// Shared places (a sticky /tmp, a device) are refused as a data directory or policy, and
/// the fix never tells the operator to chmod what every user relies on.
#[test]
fn shared_places_are_refused_without_a_harmful_fix() {
    for args in [vec!["--dir", "/tmp", "ca", "init"], vec!["check", "--policy", "/dev/zero", "--csr", "/dev/null"]] {
        let (code, err) = code_and_err(&run(vouch().args(&args), None));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(!err.contains("chmod"), "{args:?}: a harmful fix: {err}");
        assert!(err.contains("of its own"), "{args:?}: {err}");
    }
    assert!(!Path::new("/tmp/ca").exists() && !Path::new("/tmp/policy.toml").exists());
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/zero").unwrap().file_type().is_char_device());
}

/// The replay journal and the audit log, once they exist: another user able to change
/// them could erase one-time use or the record of decisions.
#[test]
fn a_journal_or_audit_log_another_user_could_change_is_refused() {
    assert!(is_root(), "this test chowns files to another user: run the suite as root (scripts/test, .ci/run)");
    let t = tempfile::tempdir().unwrap();
    let dir = new_ca(t.path(), "v");
    // The default policy keeps both in DIR: journal = "replay", log = "audit.log".
    let policy = dir.join("policy.toml");
    let audit = dir.join("audit.log");
    let journal = dir.join("replay");
    std::fs::create_dir_all(&journal).unwrap();
    std::fs::write(&audit, "").unwrap();
    let check = || {
        let mut c = vouch();
        c.args(["--now", &fixture_now(), "check", "--policy", s(&policy), "--certname", common::CERTNAME, "--csr"])
            .arg(fixture("csr/valid-p256-conductor.csr.pem"));
        code_and_err(&run(&mut c, None))
    };
    let (code, err) = check();
    assert_ne!(code, Some(2), "a journal and log of our own are trusted: {err}");
    for (key, path) in [("replay.journal", &journal), ("audit.log", &audit)] {
        let m = mode(path);
        chmod(path, m | 0o002);
        let (code, err) = check();
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(key) && err.contains(&format!("chmod go-w {}", path.display())), "{key}: {err}");
        chmod(path, m);
        chown(path, NOBODY);
        let (code, err) = check();
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(key) && err.contains("chown root"), "{key}: {err}");
        chown(path, 0);
    }
}

#[test]
fn data_directory_and_policy_another_user_could_change_are_refused() {
    assert!(is_root(), "this test chowns files to another user: run the suite as root (scripts/test, .ci/run)");
    let t = tempfile::tempdir().unwrap();
    let dir = new_ca(t.path(), "v");
    assert_eq!(mode(&dir), 0o700, "ca init makes a new DIR 0700, as serve does");
    assert_eq!(mode(&dir.join("ca")), 0o700);
    ok(&run(vouch().args(["--dir", s(&dir), "list"]), None));
    let body = std::fs::read(fixture("csr/valid-p256-conductor.csr.pem")).unwrap();
    let now = fixture_now();
    let policy = dir.join("policy.toml");
    let refused = |cmd: &mut Command, stdin: Option<&[u8]>, fix: &str| {
        let (code, err) = code_and_err(&run(cmd, stdin));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(fix) && err.contains("hint:"), "want {fix:?} in: {err}");
    };
    for (what, path) in [("DIR", dir.clone()), ("ca/", dir.join("ca")), ("policy", policy.clone())] {
        // Owned by another user (mode unchanged): refused, fix named.
        chown(&path, NOBODY);
        let fix = format!("chown root {}", path.display());
        refused(vouch().args(["--dir", s(&dir), "list"]), None, &fix);
        refused(vouch().args(["--dir", s(&dir), "crl"]), None, &fix);
        if what != "ca/" {
            // The hook and check load only the policy (and its directory).
            refused(vouch().args(["--now", &now, "autosign", CERTNAME, "--policy", s(&policy)]), Some(&body), &fix);
            refused(
                vouch()
                    .args(["--now", &now, "check", "--policy", s(&policy), "--csr"])
                    .arg(fixture("csr/valid-p256-conductor.csr.pem")),
                None,
                &fix,
            );
        }
        chown(&path, 0);
        // Writable by the group: refused.
        let m = mode(&path);
        chmod(&path, m | 0o020);
        refused(vouch().args(["--dir", s(&dir), "list"]), None, &format!("chmod go-w {}", path.display()));
        chmod(&path, m);
        ok(&run(vouch().args(["--dir", s(&dir), "list"]), None));
    }
    // The store's own directories, once they exist: writable by others, refused.
    ok(&run(vouch().args(["--dir", s(&dir), "crl"]), None));
    for sub in ["signed", "serials", "tmp"] {
        let p = dir.join("ca").join(sub);
        assert!(p.is_dir(), "{sub} exists after a crl run");
        let m = mode(&p);
        chmod(&p, m | 0o002);
        refused(vouch().args(["--dir", s(&dir), "list"]), None, &format!("chmod go-w {}", p.display()));
        chmod(&p, m);
    }
    // The master CA key readable by others; the root key (conductor new).
    let key = dir.join("ca/ca_key.pem");
    chmod(&key, 0o644);
    refused(vouch().args(["--dir", s(&dir), "list"]), None, &format!("chmod 600 {}", key.display()));
    chmod(&key, 0o600);
    let root_key = dir.join("ca/root_key.pem");
    chown(&root_key, NOBODY);
    let (c, k) = (t.path().join("c.pem"), t.path().join("c.key"));
    refused(
        vouch().args(["--dir", s(&dir), "conductor", "new", "c", "--cert-out", s(&c), "--key-out", s(&k)]),
        None,
        "chown root",
    );
    assert!(!c.exists() && !k.exists());
    chown(&root_key, 0);
    // A trust anchor the policy names, owned by another user.
    let root_crt = dir.join("ca/root_crt.pem");
    chown(&root_crt, NOBODY);
    refused(vouch().args(["--now", &now, "autosign", CERTNAME, "--policy", s(&policy)]), Some(&body), "chown root");
    chown(&root_crt, 0);
    // A symbolic link planted in the data directory (by whoever could, once) to a file
    // another user controls: followed for the check, refused.
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::copy(&policy, elsewhere.join("policy.toml")).unwrap();
    chown(&elsewhere, NOBODY);
    std::fs::rename(&policy, dir.join("policy.toml.real")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("policy.toml"), &policy).unwrap();
    refused(vouch().args(["--dir", s(&dir), "list"]), None, "chown root");
    std::fs::remove_file(&policy).unwrap();
    std::fs::rename(dir.join("policy.toml.real"), &policy).unwrap();
    ok(&run(vouch().args(["--dir", s(&dir), "list"]), None));
    // ca init into an existing directory someone else owns.
    let theirs = t.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown(&theirs, NOBODY);
    refused(vouch().args(["--dir", s(&theirs), "ca", "init"]), None, "chown root");
    assert!(!theirs.join("ca").exists());

    // The Puppet Server hook as the README sets it up: policy and root owned by root
    // (0644, in a 0755 directory), the hook running as user `puppet` (here: nobody).
    let etc = t.path().join("etc-vouch");
    std::fs::create_dir_all(etc.join("ca")).unwrap();
    chmod(t.path(), 0o755);
    chmod(&etc, 0o755);
    // Everything the hook reads lives here (the checkout may not be enterable by nobody).
    std::fs::copy(fixture("policy.toml"), etc.join("policy.toml")).unwrap();
    chmod(&etc.join("policy.toml"), 0o644);
    std::fs::create_dir_all(etc.join("pki")).unwrap();
    for e in std::fs::read_dir(fixture("pki")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), etc.join("pki").join(e.file_name())).unwrap();
        chmod(&etc.join("pki").join(e.file_name()), 0o644);
    }
    chmod(&etc.join("pki"), 0o755);
    let csr = etc.join("node.csr");
    std::fs::copy(fixture("csr/valid-p256-conductor.csr.pem"), &csr).unwrap();
    chmod(&csr, 0o644);
    let mut hook = vouch_as_nobody(t.path());
    let out =
        run(hook.args(["--now", &now, "check", "--policy", s(&etc.join("policy.toml")), "--csr"]).arg(&csr), None);
    assert_eq!(out.status.code(), Some(0), "root-owned policy, other user: {}", String::from_utf8_lossy(&out.stderr));
}

fn mknod(p: &Path, major_minor: (&str, &str)) -> bool {
    Command::new("mknod").arg(p).args(["c", major_minor.0, major_minor.1]).status().is_ok_and(|s| s.success())
}

fn is_char_device(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    file_type(p).is_char_device()
}

/// Point 7: one rule for every output path. Devices and FIFOs are written through (and a
/// failed write is an error), symbolic links and directories are refused, regular files
/// are written atomically; keys (and what pairs with them) never replace a file, other
/// outputs do. Private device nodes come first, so the real /dev/null and /dev/full are
/// only ever written by a vouch that passed them.
#[test]
fn outputs_write_through_devices_refuse_links_and_follow_one_rule() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let now = fixture_now();
    let sign_to = |out: &Path| {
        run(
            vouch()
                .args(["--now", &now, "conductor", "sign", "--cert", s(&fixture("pki/conductor-p256.pem"))])
                .args(["--key", s(&fixture("pki/conductor-p256.key"))])
                .args(["--classification", s(&fixture("classification.yaml")), "--expires-in", "1h", "--out"])
                .arg(out),
            None,
        )
    };
    let dir = new_ca(w, "v");
    let crl_to = |out: &Path| run(vouch().args(["--dir", s(&dir), "--now", &now, "crl", "--out"]).arg(out), None);

    // A null device of our own: written through, still a device.
    let null = w.join("null");
    assert!(is_root() && mknod(&null, ("1", "3")), "this test makes device nodes: run the suite as root");
    {
        ok(&sign_to(&null));
        assert!(is_char_device(&null), "the null device was replaced by a file");
        ok(&crl_to(&null));
        assert!(is_char_device(&null));
        // A full device: the write fails (ENOSPC), the command says so and exits 2.
        let full = w.join("full");
        assert!(mknod(&full, ("1", "7")));
        for out in [sign_to(&full), crl_to(&full)] {
            let (code, err) = code_and_err(&out);
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("No space left"), "{err}");
        }
        assert!(is_char_device(&full));
    }

    // A FIFO: written through to its reader.
    let fifo = w.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    ok(&sign_to(&fifo));
    let got = reader.join().unwrap();
    assert!(got.contains("extension_requests"), "{got}");
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&file_type(&fifo)));

    // A symbolic link, to an existing file or to nowhere: refused, never followed or replaced.
    let precious = w.join("precious");
    std::fs::write(&precious, "keep me\n").unwrap();
    let link = w.join("link");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let dangling = w.join("dangling");
    let nowhere = w.join("nowhere");
    std::os::unix::fs::symlink(&nowhere, &dangling).unwrap();
    for l in [&link, &dangling] {
        for out in [sign_to(l), crl_to(l)] {
            let (code, err) = code_and_err(&out);
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("symbolic link"), "{err}");
        }
        assert!(file_type(l).is_symlink(), "{} was replaced", l.display());
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    assert!(!nowhere.exists());
    // A directory: refused.
    let (code, err) = code_and_err(&crl_to(w));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a directory"), "{err}");
    // `-`: standard output.
    let out = sign_to(Path::new("-"));
    assert!(String::from_utf8_lossy(&ok_out(&out)).contains("extension_requests"));
    assert!(!Path::new("-").exists() && !w.join("-").exists());

    // The overwrite rule. Attributes, certificates, CRLs: an existing file is replaced (atomically).
    let attrs = w.join("attrs.yaml");
    ok(&sign_to(&attrs));
    ok(&sign_to(&attrs));
    let crl = w.join("crl.pem");
    ok(&crl_to(&crl));
    ok(&crl_to(&crl));
    assert!(std::fs::read_to_string(&crl).unwrap().contains("BEGIN X509 CRL"));
    // Keys and what pairs with them: never, and nothing is written when one output is taken.
    let (c, k) = (w.join("c.pem"), w.join("c.key"));
    std::fs::write(&c, "mine\n").unwrap();
    let (code, err) = code_and_err(&run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "c", "--cert-out", s(&c), "--key-out", s(&k)]),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert!(!k.exists(), "no key without its certificate");
    assert_eq!(std::fs::read_to_string(&c).unwrap(), "mine\n");
    let (code, err) = code_and_err(&run(
        vouch()
            .args(["csr", "--certname", CERTNAME, "--attributes", s(&attrs), "--key-out", s(&link), "--csr-out"])
            .arg(w.join("n.csr")),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(!w.join("n.csr").exists());

    // The system's own devices, last: still devices afterwards.
    ok(&sign_to(Path::new("/dev/null")));
    assert!(is_char_device(Path::new("/dev/null")), "/dev/null must stay a character device");
    if Path::new("/dev/full").exists() {
        let (code, err) = code_and_err(&crl_to(Path::new("/dev/full")));
        assert_eq!(code, Some(2), "{err}");
        assert!(is_char_device(Path::new("/dev/full")));
        // Standard output on a full device: an error (exit 2), not a panic (101).
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let (c2, k2) = (w.join("c2.pem"), w.join("c2.key"));
        let out = vouch()
            .args(["--dir", s(&dir), "conductor", "new", "c2", "--cert-out", s(&c2), "--key-out", s(&k2)])
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let (code, err) = code_and_err(&out);
        assert_eq!(code, Some(2), "a full stdout is an error, not a panic: {err}");
    }
}

fn ok_out(out: &Output) -> Vec<u8> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout.clone()
}

/// Runs `cmd`, killing it if it has not exited after a minute (a flag the original code
/// accepted would start a server): the test then fails instead of hanging.
fn run_bounded(cmd: &mut Command) -> Output {
    run_with_deadline(cmd, Stdio::null(), 600, "still running after a minute (accepted?)")
}

/// Point 9: no panic (exit 101) from any duration or date a user gives: flags, --now, and
/// what follows from them (a validity past the year 9999 is capped or refused).
#[test]
fn durations_and_dates_from_users_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = new_ca(w, "v");
    let sign = |expires: &[&str]| {
        run(
            vouch()
                .args(["conductor", "sign", "--cert", s(&fixture("pki/conductor-p256.pem"))])
                .args(["--key", s(&fixture("pki/conductor-p256.key"))])
                .args(["--classification", s(&fixture("classification.yaml"))])
                .args(expires),
            None,
        )
    };
    for d in ["99999999999999d", "18446744073709551615s", "9999999999y", "3000000d"] {
        let (code, err) = code_and_err(&sign(&["--expires-in", d]));
        assert_eq!(code, Some(2), "--expires-in {d}: {err}");
        assert!(err.contains("expiry") && err.contains("hint:"), "{err}");
    }
    // Days past the root's notAfter (and past the year 9999): capped at the root, said so.
    let (c, k) = (w.join("c.pem"), w.join("c.key"));
    let out = run(
        vouch().args([
            "--dir",
            s(&dir),
            "conductor",
            "new",
            "c",
            "--days",
            "3000000",
            "--cert-out",
            s(&c),
            "--key-out",
            s(&k),
        ]),
        None,
    );
    let (code, err) = code_and_err(&out);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("capped") || err.contains("root CA's notAfter"), "{err}");
    let root_end = openssl(&["x509", "-noout", "-enddate", "-in", s(&dir.join("ca/root_crt.pem"))]);
    let cond_end = openssl(&["x509", "-noout", "-enddate", "-in", s(&c)]);
    assert_eq!(root_end, cond_end);
    let (code, err) = code_and_err(&run(
        vouch()
            .args(["--dir", s(&dir), "conductor", "new", "d", "--days", "4294967296", "--cert-out"])
            .arg(w.join("d.pem"))
            .args(["--key-out", s(&w.join("d.key"))]),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    // An OID whose first two arcs do not fit in one number (40 * 2 + 2^64 - 1), in an attributes file.
    let attrs = w.join("huge-oid.yaml");
    std::fs::write(&attrs, "extension_requests:\n  \"2.18446744073709551615\": x\n").unwrap();
    let (code, err) = code_and_err(&run(
        vouch()
            .args(["csr", "--certname", CERTNAME, "--attributes", s(&attrs), "--key-out"])
            .arg(w.join("h.key"))
            .args(["--csr-out", s(&w.join("h.csr"))]),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("neither an OID"), "{err}");
    // --now near the end of time: an error, never a panic.
    for at in ["9999-12-31T00:00:00Z", "0000-01-01T00:00:00Z"] {
        let fresh = w.join(format!("ca-{}", &at[..4]));
        let (code, err) = code_and_err(&run(vouch().args(["--now", at, "--dir", s(&fresh), "ca", "init"]), None));
        assert_eq!(code, Some(2), "--now {at} ca init: {err}");
        let (code, err) = code_and_err(&run(vouch().args(["--now", at, "--dir", s(&dir), "crl"]), None));
        assert_eq!(code, Some(2), "--now {at} crl: {err}");
    }
}

/// Every (sub)command's path, from `vouch help` itself.
fn subcommands(prefix: &[String]) -> Vec<Vec<String>> {
    // `vouch autosign --help` exits 2 (the hook never exits 0 on a usage error): read stdout anyway.
    let out = String::from_utf8_lossy(&run(vouch().args(prefix).arg("--help"), None).stdout).into_owned();
    let mut found = vec![];
    let mut in_commands = false;
    for line in out.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            let name = line.split_whitespace().next().unwrap_or_default().to_string();
            if name != "help" {
                let mut p = prefix.to_vec();
                p.push(name);
                found.extend(subcommands(&p));
                found.push(p);
            }
        }
    }
    found
}

/// Point 13: every option of every command has help text; --dir is shown only where it is
/// used; one default per option; the separators and spellings the help shows are the ones
/// accepted.
#[test]
fn every_option_of_every_command_has_help_text() {
    let commands = subcommands(&[]);
    assert!(commands.len() >= 18, "{commands:?}");
    let mut missing = vec![];
    for c in &commands {
        let help = String::from_utf8_lossy(&run(vouch().args(c).arg("--help"), None).stdout).into_owned();
        assert!(help.contains("Usage:"), "vouch {} --help: {help}", c.join(" "));
        // Long help: each option on its own line, its help text on the next, indented further
        // ("[default: …]", "[env: …]" or "[possible values: …]" alone are not help).
        let lines: Vec<&str> = help.lines().collect();
        let mut in_options = false;
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with("Options:") || line.starts_with("Arguments:") {
                in_options = true;
                continue;
            }
            let indent = line.len() - line.trim_start().len();
            let is_item =
                in_options && indent < 10 && (line.trim_start().starts_with('-') || line.trim_start().starts_with('['));
            if is_item {
                // Compact layout: "--cert <FILE>  The conductor's …" on one line; long layout:
                // the help on the next line.
                let same_line = line.trim().split("  ").map(str::trim).filter(|w| !w.is_empty()).nth(1).unwrap_or("");
                let next = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
                let has = |t: &str| !t.is_empty() && !t.starts_with('[') && !t.starts_with('-');
                if !has(same_line) && !has(next) {
                    missing.push(format!("vouch {}: {}", c.join(" "), line.trim()));
                }
            }
        }
        let shows_dir = help.contains("--dir <DIR>");
        let uses_dir = !matches!(c.join(" ").as_str(), "csr" | "bench decide" | "bench hook" | "bench");
        if c.len() == 1 && c[0] == "bench"
            || c.len() == 1 && c[0] == "ca"
            || c[0] == "conductor" && c.len() == 1
            || c[0] == "admin" && c.len() == 1
        {
            continue;
        }
        assert_eq!(shows_dir, uses_dir, "vouch {} --help and --dir:\n{help}", c.join(" "));
        for line in help.lines() {
            assert!(line.matches("[default:").count() <= 1, "two defaults: {line}");
        }
    }
    assert!(missing.is_empty(), "options without help text:\n{}", missing.join("\n"));

    // An option's whole entry in `-h`: its line and the deeper-indented lines under it.
    let entry = |help: &str, flag: &str| -> String {
        let lines: Vec<&str> = help.lines().collect();
        let at = lines.iter().position(|l| l.trim_start().starts_with(flag)).unwrap();
        let mut out = lines[at].to_string();
        for l in &lines[at + 1..] {
            if l.trim().is_empty() || l.trim_start().starts_with('-') {
                break;
            }
            out.push_str(l);
        }
        out
    };
    let serve = ok(&run(vouch().args(["serve", "-h"]), None));
    let threads = entry(&serve, "--threads");
    assert!(threads.contains("[default: one per core]") && !threads.contains("[default: 0]"), "{threads}");
    assert_eq!(threads.matches("[default:").count(), 1, "{threads}");
    let bench = ok(&run(vouch().args(["bench", "decide", "-h"]), None));
    let ca_keys = entry(&bench, "--ca-keys");
    assert!(ca_keys.contains("[default: rsa4096,rsa2048,p256,ed25519]"), "{ca_keys}");
    // The defaults shown parse (with the separator shown).
    let out = run(vouch().args(["bench", "decide", "--ca-keys", "p256,ed25519", "--seconds", "0"]), None);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"), "parsed up to --seconds");
    let revoke = ok(&run(vouch().args(["revoke", "-h"]), None));
    for spelling in ["key-compromise", "keyCompromise", "cessation-of-operation", "cessationOfOperation"] {
        assert!(revoke.contains(spelling), "{spelling} in {revoke}");
    }
}

/// Point 13: the default data directory the help documents is the one vouch uses, for root
/// and for other users.
#[test]
fn documented_default_dir_is_the_real_one() {
    let help = ok(&run(vouch().args(["list", "--help"]), None));
    assert!(
        help.contains("[default: /var/lib/vouch for root, else $XDG_DATA_HOME/vouch or ~/.local/share/vouch]"),
        "{help}"
    );
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let walkthrough = &readme[readme.find("## Walkthrough").expect("a Walkthrough section")..];
    let walkthrough = &walkthrough[..walkthrough[3..].find("\n## ").map_or(walkthrough.len(), |end| end + 3)];
    assert!(
        walkthrough.contains("`/var/lib/vouch` for root") && walkthrough.contains("`~/.local/share/vouch`"),
        "README walkthrough"
    );
    assert!(is_root(), "this test runs vouch as root and as nobody: run the suite as root (scripts/test, .ci/run)");
    if !Path::new("/var/lib/vouch/ca/ca_crt.pem").exists() {
        let (code, err) = code_and_err(&run(vouch().arg("list"), None));
        assert_eq!(code, Some(2));
        assert!(err.contains("no CA in /var/lib/vouch"), "root's default: {err}");
    }
    let t = tempfile::tempdir().unwrap();
    chmod(t.path(), 0o755);
    let as_nobody = |xdg: Option<&Path>| {
        let mut c = vouch_as_nobody(t.path());
        c.env("HOME", t.path()).env_remove("XDG_DATA_HOME").arg("list");
        if let Some(x) = xdg {
            c.env("XDG_DATA_HOME", x);
        }
        code_and_err(&run(&mut c, None))
    };
    let (code, err) = as_nobody(None);
    assert_eq!(code, Some(2));
    assert!(err.contains(&format!("no CA in {}/.local/share/vouch", t.path().display())), "{err}");
    let (_, err) = as_nobody(Some(&t.path().join("xdg")));
    assert!(err.contains(&format!("no CA in {}/xdg/vouch", t.path().display())), "{err}");
}

/// Point 14: input errors exit 2 with a message about the input; a name the CA does not
/// know is exit 2 for clean as for revoke and renew; no certificate that is expired at
/// birth; a lifetime the policy will refuse is warned about; listen addresses and limits
/// say what they accept.
#[test]
fn exit_codes_and_messages_say_what_is_wrong() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = new_ca(w, "v");
    let garbage = w.join("garbage.csr");
    std::fs::write(&garbage, "this is not a certificate request\n").unwrap();
    for cmd in [
        vec!["--dir", s(&dir), "sign", "--csr", s(&garbage)],
        vec!["check", "--policy", s(&dir.join("policy.toml")), "--csr", s(&garbage)],
    ] {
        let (code, err) = code_and_err(&run(vouch().args(&cmd), None));
        assert_eq!(code, Some(2), "{cmd:?}: {err}");
        assert!(err.contains("certificate request") && !err.contains("certname-invalid"), "{err}");
    }
    // With --certname too: a file with no request in it is an input error, whatever name is given.
    for args in [
        vec!["--dir", s(&dir), "sign", "--csr", s(&garbage), "--certname", CERTNAME],
        vec!["check", "--policy", s(&dir.join("policy.toml")), "--csr", s(&garbage), "--certname", CERTNAME],
    ] {
        let (code, err) = code_and_err(&run(vouch().args(&args), None));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("no certificate request found"), "{err}");
    }
    // A request that is there but defective is refused (1) with the decision's reason.
    let (code, err) = code_and_err(&run(
        vouch()
            .args(["--dir", s(&dir), "sign", "--certname", CERTNAME, "--csr"])
            .arg(fixture("csr/csr-bad-self-signature.csr.pem")),
        None,
    ));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[csr-signature-invalid]"), "{err}");
    // The hook still refuses garbage (exit 1, never 0).
    let out = run(vouch().args(["autosign", CERTNAME, "--policy", s(&dir.join("policy.toml"))]), Some(b"garbage"));
    assert_eq!(out.status.code(), Some(1));

    for verb in ["clean", "revoke", "renew"] {
        let (code, err) = code_and_err(&run(vouch().args(["--dir", s(&dir), verb, "unknown.example.test"]), None));
        assert_eq!(code, Some(2), "{verb}: {err}");
        assert!(err.contains("no certificate for unknown.example.test"), "{err}");
    }
    let (code, err) = code_and_err(&run(
        vouch()
            .args(["--dir", s(&dir), "conductor", "new", "c", "--days", "0", "--cert-out"])
            .arg(w.join("c.pem"))
            .args(["--key-out", s(&w.join("c.key"))]),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(!w.join("c.pem").exists());

    // --expires-in 30d: signed, with a warning naming the CA's limit (7d by default).
    let attrs = w.join("a.yaml");
    let out = run(
        vouch()
            .args(["--dir", s(&dir), "conductor", "sign", "--cert", s(&fixture("pki/conductor-p256.pem"))])
            .args(["--key", s(&fixture("pki/conductor-p256.key"))])
            .args(["--classification", s(&fixture("classification.yaml")), "--expires-in", "30d", "--out", s(&attrs)]),
        None,
    );
    let (code, err) = code_and_err(&out);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning")
            && (err.contains("7d") || err.contains("1w"))
            && err.contains(s(&dir.join("policy.toml"))),
        "{err}"
    );

    let bad = [
        (vec!["--listen", "8141"], vec!["127.0.0.1:8141", "0.0.0.0:8141"]),
        (vec!["--listen", "localhost:8141"], vec!["127.0.0.1:8140"]),
        (vec!["--max-body", "0"], vec!["must be a whole number from 1 to "]),
        (vec!["--connection-lifetime", "0"], vec!["must be a whole number from 1 to "]),
        (vec!["--header-timeout", "0"], vec!["must be a whole number from 1 to "]),
        (vec!["--body-timeout", "99999999999"], vec!["99999999999 is too large: at most "]),
        (vec!["--max-connections", "0"], vec!["must be a whole number from 1 to "]),
        (vec!["--max-connections-per-address", "0"], vec!["must be a whole number from 1 to "]),
        (vec!["--threads", "0"], vec!["must be a whole number from 1 to "]),
    ];
    for (args, want) in bad {
        let fresh = w.join("serve-dir");
        let mut cmd = vouch();
        cmd.args(["--dir", s(&fresh), "serve"]);
        if args[0] != "--listen" {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let out = run_bounded(cmd.args(&args));
        let (code, err) = code_and_err(&out);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        for x in want {
            assert!(err.contains(x), "{args:?}: want {x:?} in {err}");
        }
        assert!(!fresh.exists(), "nothing created for a bad flag");
    }

    // Revocation reasons: both spellings accepted, both listed when wrong.
    let (code, err) =
        code_and_err(&run(vouch().args(["--dir", s(&dir), "revoke", "x.example.test", "--reason", "bogus"]), None));
    assert_eq!(code, Some(2));
    assert!(err.contains("key-compromise (keyCompromise)"), "{err}");
    for r in ["key-compromise", "keyCompromise"] {
        let (_, err) =
            code_and_err(&run(vouch().args(["--dir", s(&dir), "revoke", "x.example.test", "--reason", r]), None));
        assert!(err.contains("no certificate for"), "{r}: {err}");
    }
}

/// Point 13: the generated policy says what the replay journal records for version 1: the
/// digest of the signed string (ECDSA signatures can be re-encoded), not the signature.
#[test]
fn generated_policy_says_what_the_journal_records() {
    let t = tempfile::tempdir().unwrap();
    let dir = new_ca(t.path(), "v");
    let text = std::fs::read_to_string(dir.join("policy.toml")).unwrap();
    let replay = &text[text.find("[replay]").unwrap()..];
    assert!(!replay.contains("the signature (version 1)"), "{replay}");
    assert!(replay.contains("version 1 by the SHA-256 of its signed string"), "{replay}");
}

// ---- hard-g: bounded inputs, outputs checked before the CA changes, clearer messages ----

/// Runs `cmd` with `stdin`, killing it if it has not exited after two minutes: a command
/// that reads an endless input forever then fails the test instead of hanging it.
fn run_killed_after(cmd: &mut Command, stdin: Stdio) -> Output {
    run_with_deadline(cmd, stdin, 1200, "still reading after two minutes")
}

/// Runs `cmd` with `stdin`; after `ticks` tenths of a second it is killed and the test fails
/// with `what`, the command and its stderr.
fn run_with_deadline(cmd: &mut Command, stdin: Stdio, ticks: u32, what: &str) -> Output {
    let limit = std::time::Duration::from_millis(100 * u64::from(ticks));
    common::processes::output_within(cmd.stdin(stdin), limit)
        .unwrap_or_else(|out| panic!("{what}: {:?}: {}", cmd, String::from_utf8_lossy(&out.stderr)))
}

fn dev_zero() -> Stdio {
    Stdio::from(std::fs::File::open("/dev/zero").unwrap())
}

/// A P-256 CA in `w/ca` with a conductor (`w/c1.pem`, `w/c1.key`), attributes it signed for
/// each name (`w/NAME.yaml`) and a CSR for each (`w/NAME.csr`); returns the CA's directory.
fn ca_with_csrs(w: &Path, names: &[&str]) -> PathBuf {
    let dir = new_ca(w, "ca");
    let (cert, key) = (w.join("c1.pem"), w.join("c1.key"));
    ok(&run(
        vouch().args(["--dir", s(&dir), "conductor", "new", "c1", "--cert-out", s(&cert), "--key-out", s(&key)]),
        None,
    ));
    for n in names {
        cli_vouched_csr(w, &cert, &key, n);
    }
    dir
}

/// Item 1: every file or stdin input is read up to a limit of its kind: /dev/zero (or a
/// file past the limit) is refused at once, exit 2, naming the file and the limit, where
/// the original code read until killed (or accepted a 5 MiB policy, a 17 MiB trust anchor).
/// The hook on an endless stdin stops after 1 MiB and refuses.
#[test]
fn every_input_is_read_up_to_a_limit() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_csrs(w, &["web01.example.test"]);
    let csr = w.join("web01.example.test.csr");
    let attrs = w.join("web01.example.test.yaml");
    let (cert, key, cls) = (w.join("c1.pem"), w.join("c1.key"), fixture("classification.yaml"));
    let policy = dir.join("policy.toml");
    // A 5 MiB policy (comments) and a policy whose trusted root file is 17 MiB.
    let big_policy = dir.join("big-policy.toml");
    let mut text = std::fs::read_to_string(&policy).unwrap();
    for _ in 0..(5 * 1024 * 16) {
        text.push_str(&format!("# {}\n", "x".repeat(61)));
    }
    std::fs::write(&big_policy, text).unwrap();
    let big_root = w.join("big-root.pem");
    let mut root = std::fs::read(fixture("pki/root_crt.pem")).unwrap();
    root.extend(std::iter::repeat_n(b'\n', 17 * 1024 * 1024));
    std::fs::write(&big_root, root).unwrap();
    let anchor_policy = dir.join("anchor-policy.toml");
    std::fs::write(
        &anchor_policy,
        std::fs::read_to_string(&policy).unwrap().replace("\"ca/root_crt.pem\"", &format!("{:?}", s(&big_root))),
    )
    .unwrap();
    assert!(std::fs::read_to_string(&anchor_policy).unwrap().contains("big-root.pem"));

    let z = "/dev/zero";
    let sign = |cert: &str, key: &str, cls: &str| -> Vec<String> {
        ["conductor", "sign", "--cert", cert, "--key", key, "--classification", cls, "--expires-in", "1h"]
            .map(String::from)
            .to_vec()
    };
    let cases: Vec<(Vec<String>, bool, &str, &str)> = vec![
        (sign(z, s(&key), s(&cls)), false, z, "1 MiB"),
        (sign(s(&cert), z, s(&cls)), false, z, "1 MiB"),
        (sign(s(&cert), s(&key), z), false, z, "64 KiB"),
        (sign(s(&cert), s(&key), "-"), true, "stdin", "64 KiB"),
        (
            ["csr", "--certname", "a.example.test", "--attributes", z, "--key-out"]
                .map(String::from)
                .into_iter()
                .chain([s(&w.join("z.key")).to_string(), "--csr-out".into(), s(&w.join("z.csr")).to_string()])
                .collect(),
            false,
            z,
            "1 MiB",
        ),
        (["check", "--csr", z, "--policy", s(&policy)].map(String::from).to_vec(), false, z, "1 MiB"),
        (["--dir", s(&dir), "sign", "--csr", z].map(String::from).to_vec(), false, z, "1 MiB"),
        (["enc", "--cert", z].map(String::from).to_vec(), false, z, "1 MiB"),
        (
            ["check", "--csr", s(&csr), "--policy", s(&big_policy)].map(String::from).to_vec(),
            false,
            "big-policy.toml",
            "4 MiB",
        ),
        (
            ["check", "--csr", s(&csr), "--policy", s(&anchor_policy)].map(String::from).to_vec(),
            false,
            "big-root.pem",
            "16 MiB",
        ),
    ];
    for (args, stdin, named, limit) in cases {
        let out = run_killed_after(vouch().args(&args), if stdin { dev_zero() } else { Stdio::null() });
        let (code, err) = code_and_err(&out);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(named) && err.contains(limit), "{args:?} names the input and its limit: {err}");
    }
    assert!(!w.join("z.key").exists(), "nothing written for unreadable attributes");
    // The same inputs at their real sizes still work (the limits are generous).
    ok(&run(vouch().args(["check", "--csr", s(&csr), "--policy", s(&policy)]), None));
    assert!(attrs.exists());

    // The hook: an endless stdin is refused (exit 1, as any refusal) after 1 MiB.
    let out = run_killed_after(vouch().args(["autosign", "web01.example.test", "--policy", s(&policy)]), dev_zero());
    let (code, err) = code_and_err(&out);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("larger than 1 MiB"), "{err}");
}

fn list_all(dir: &Path) -> String {
    String::from_utf8(ok_out(&run(vouch().args(["--dir", s(dir), "list", "--all"]), None))).unwrap()
}

/// Item 2: every output is checked before the command changes the CA (issues, revokes,
/// spends attributes) or makes a key; a write that fails afterwards (a full disk) says what
/// was done and where it is. The original code issued, revoked or wrote the key first.
#[test]
fn outputs_are_checked_before_the_ca_changes() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_csrs(w, &["web01.example.test", "web02.example.test"]);
    let csr1 = w.join("web01.example.test.csr");
    let before = list_all(&dir);
    let missing_dir = w.join("no-such-dir").join("out.pem");
    let a_file = w.join("web01.example.test.yaml");
    let under_a_file = a_file.join("x.pem");

    // sign: a directory, a missing directory, a path under a file: nothing issued, nothing spent.
    for out in [w.to_path_buf(), missing_dir.clone(), under_a_file.clone()] {
        let (code, err) =
            code_and_err(&run(vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr1), "--out", s(&out)]), None));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(s(&out)), "{err}");
        assert_eq!(list_all(&dir), before, "sign --out {} changed the CA", out.display());
    }
    // The attributes were not spent: the same request is issued now.
    let cert1 = w.join("web01.pem");
    ok(&run(vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr1), "--out", s(&cert1)]), None));
    let issued = list_all(&dir);

    // renew: an unwritable --out revokes and re-issues nothing.
    for out in [w.to_path_buf(), missing_dir.clone()] {
        let (code, err) =
            code_and_err(&run(vouch().args(["--dir", s(&dir), "renew", "web01.example.test", "--out", s(&out)]), None));
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(list_all(&dir), issued, "renew --out {} changed the CA", out.display());
    }

    // admin new / conductor new / csr: two outputs at one place, or one that cannot be
    // written: no key, nothing issued.
    let same = w.join("same.pem");
    let same_too = w.join(".").join("same.pem");
    for (cert_out, key_out) in [(&same, &same), (&same_too, &same), (&missing_dir, &same)] {
        let (code, err) = code_and_err(&run(
            vouch().args(["--dir", s(&dir), "admin", "new", "adm", "--cert-out", s(cert_out), "--key-out", s(key_out)]),
            None,
        ));
        assert_eq!(code, Some(2), "{err}");
        assert!(!same.exists(), "admin new wrote a key: {err}");
        assert_eq!(list_all(&dir), issued, "admin new issued: {err}");
        let (code, err) = code_and_err(&run(
            vouch().args([
                "--dir",
                s(&dir),
                "conductor",
                "new",
                "c2",
                "--cert-out",
                s(cert_out),
                "--key-out",
                s(key_out),
            ]),
            None,
        ));
        assert_eq!(code, Some(2), "{err}");
        assert!(!same.exists(), "conductor new wrote a key: {err}");
        let (code, err) = code_and_err(&run(
            vouch()
                .args(["csr", "--certname", "web03.example.test", "--attributes", s(&a_file), "--key-out", s(key_out)])
                .args(["--csr-out", s(cert_out)]),
            None,
        ));
        assert_eq!(code, Some(2), "{err}");
        assert!(!same.exists(), "csr wrote a key without its CSR: {err}");
    }

    // A write that fails after the change (a full disk) says what was done and where.
    let csr2 = w.join("web02.example.test.csr");
    let (code, err) =
        code_and_err(&run(vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr2), "--out", "/dev/full"]), None));
    assert_eq!(code, Some(2), "{err}");
    for want in ["was issued (serial", "vouch list --all", "ca/signed/web02.example.test.pem", "/dev/full", "disk"] {
        assert!(err.contains(want), "sign to a full disk: {want:?} missing: {err}");
    }
    assert!(list_all(&dir).contains("web02.example.test"));
    let (code, err) =
        code_and_err(&run(vouch().args(["--dir", s(&dir), "renew", "web01.example.test", "--out", "/dev/full"]), None));
    assert_eq!(code, Some(2), "{err}");
    for want in ["renewed", "revoked", "ca/signed/web01.example.test.pem", "/dev/full"] {
        assert!(err.contains(want), "renew to a full disk: {want:?} missing: {err}");
    }
    let (code, err) = code_and_err(&run(
        vouch().args([
            "--dir",
            s(&dir),
            "admin",
            "new",
            "adm2",
            "--cert-out",
            "/dev/full",
            "--key-out",
            s(&w.join("adm2.key")),
        ]),
        None,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("was issued") && err.contains("ca/signed/adm2.pem") && err.contains("adm2.key"), "{err}");
}

/// Item 3: messages that say what is wrong.
#[test]
fn data_directory_duration_name_and_environment_messages() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = new_ca(w, "ca");
    // (b) --dir naming a regular file: "not a directory", for every command, and ca init.
    let file = w.join("a-file");
    std::fs::write(&file, "x").unwrap();
    for args in [&["list"][..], &["ca", "init"], &["revoke", "x.example.test"]] {
        let (code, err) = code_and_err(&run(vouch().args(["--dir", s(&file)]).args(args), None));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("not a directory") && !err.contains("ca init"), "{args:?}: {err}");
    }
    let out = run_bounded(vouch().args(["--dir", s(&file), "serve", "--listen", "127.0.0.1:0"]));
    let (code, err) = code_and_err(&out);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not a directory"), "{err}");

    // (a) A CA directory this user may not read: permission denied and its owner, not "no CA".
    if is_root() {
        chmod(w, 0o755);
        let (code, err) = code_and_err(&run(vouch_as_nobody(w).args(["--dir", s(&dir), "list"]), None));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("permission denied") && err.contains("owned by root"), "{err}");
        assert!(!err.contains("no CA"), "{err}");
    }

    // (c) A full disk is named as such in the hint.
    let (code, err) = code_and_err(&run(vouch().args(["--dir", s(&dir), "crl", "--out", "/dev/full"]), None));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("disk") && err.contains("full"), "{err}");

    // (d) zero and negative durations: "must be positive".
    for d in ["--expires-in=0s", "--expires-in=-5m"] {
        let (code, err) = code_and_err(&conductor_sign(&[
            "--cert",
            s(&fixture("pki/conductor-p256.pem")),
            "--key",
            s(&fixture("pki/conductor-p256.key")),
            "--classification",
            s(&fixture("classification.yaml")),
            d,
        ]));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("must be positive"), "{d}: {err}");
    }
    let policy = dir.join("p.toml");
    let text = std::fs::read_to_string(dir.join("policy.toml")).unwrap();
    assert!(text.contains("max_lifetime = \"7d\""), "the generated policy's attributes.max_lifetime changed");
    std::fs::write(&policy, text.replacen("max_lifetime = \"7d\"", "max_lifetime = \"0s\"", 1)).unwrap();
    let (code, err) = code_and_err(&run(vouch().args(["check", "--csr", "/dev/null", "--policy", s(&policy)]), None));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("must be positive"), "{err}");

    // (e) An empty VOUCH_DIR is unset, not "a value is required for --dir".
    let out = run(
        vouch()
            .env("VOUCH_DIR", "")
            .args(["check", "--csr", s(&fixture("csr/valid-p256-conductor.csr.pem")), "--certname", CERTNAME])
            .args(["--now", &fixture_now(), "--policy", s(&fixture("policy.toml"))]),
        None,
    );
    let (code, err) = code_and_err(&out);
    assert_eq!(code, Some(0), "{err}");

    // (f) A --server-name that is neither a DNS name nor an IP address: refused, nothing created.
    for name in ["", "1.2.3.4.5", "a..b", "a b", "-a.example"] {
        let d = w.join("serve");
        let out = run_bounded(
            vouch().args(["--dir", s(&d), "serve", "--listen", "127.0.0.1:0"]).arg(format!("--server-name={name}")),
        );
        let (code, err) = code_and_err(&out);
        assert_eq!(code, Some(2), "{name:?}: {err}");
        assert!(err.contains("neither an IP address nor a DNS name"), "{name:?}: {err}");
        assert!(!d.exists(), "{name:?}: serve created its directory");
    }

    // (g) A conductor name that cannot be a CN: empty, or over 64 characters.
    let long = "c".repeat(65);
    for name in ["", " ", long.as_str()] {
        let (cert, key) = (w.join("c.pem"), w.join("c.key"));
        let (code, err) = code_and_err(&run(
            vouch().args(["--dir", s(&dir), "conductor", "new", name, "--cert-out", s(&cert), "--key-out", s(&key)]),
            None,
        ));
        assert_eq!(code, Some(2), "{name:?}: {err}");
        assert!(err.contains("conductor name"), "{err}");
        assert!(!cert.exists() && !key.exists());
    }
    let (cert, key) = (w.join("c64.pem"), w.join("c64.key"));
    ok(&run(
        vouch().args([
            "--dir",
            s(&dir),
            "conductor",
            "new",
            &"c".repeat(64),
            "--cert-out",
            s(&cert),
            "--key-out",
            s(&key),
        ]),
        None,
    ));
}

/// `vouch serve` run by a user who may not read an existing data directory (root's 0700
/// DIR, as nobody) says whose it is, as `list` does, instead of taking it for a first run
/// ("cannot write DIR/.first-run-unfinished: Permission denied").
#[test]
fn serve_on_a_data_directory_this_user_may_not_read_names_its_owner() {
    assert!(is_root(), "this test runs vouch as root and as nobody: run the suite as root (scripts/test, .ci/run)");
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("ca");
    let o = run(vouch().args(["--dir", s(&dir), "ca", "init"]), None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    chmod(&dir, 0o700);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let o = run(
        vouch_as_nobody(t.path()).args(["--dir", s(&dir), "serve", "--listen", &format!("127.0.0.1:{port}")]),
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("run vouch as its owner"), "{err}");
    assert!(!err.contains(".first-run-unfinished"), "{err}");
}

/// `--metrics-listen` on the service's own `--listen` port is named as such, not blamed on
/// "another process"; nothing is created.
#[test]
fn metrics_on_the_listen_port_is_refused_as_such() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("fresh");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for metrics in [format!("127.0.0.1:{port}"), format!("0.0.0.0:{port}")] {
        let o = run(
            vouch().args([
                "--dir",
                s(&dir),
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--metrics-listen",
                &metrics,
            ]),
            None,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("is the service's own --listen"), "{err}");
        assert!(!dir.exists());
    }
}

/// A mistyped log filter (`VOUCH_LOG=inf`: EnvFilter would read it as "only target inf",
/// silencing every event) is reported and skipped; the next variable or the default applies.
#[test]
fn a_mistyped_log_filter_warns_and_keeps_the_log() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("ca");
    // `list` on a missing directory fails, but the log is set up first: its warning shows.
    for (env, expect_warning_from) in
        [(vec![("VOUCH_LOG", "inf")], "VOUCH_LOG"), (vec![("VOUCH_LOG", "garbage"), ("RUST_LOG", "warn")], "VOUCH_LOG")]
    {
        let mut c = vouch();
        c.args(["--dir", s(&dir), "list"]);
        for (k, v) in &env {
            c.env(k, v);
        }
        let o = run(&mut c, None);
        let err = String::from_utf8_lossy(&o.stderr);
        let warning = err
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "warning" && v["variable"] == expect_warning_from);
        assert!(warning.is_some(), "no warning about {expect_warning_from} for {env:?}: {err}");
    }
}

/// `localhost` and the loopback addresses are the CA service's default names: `vouch sign`
/// refuses them (`name-reserved`) whether or not `vouch serve` ever ran in the directory, as
/// the service and the autosign hook (with or without a data directory) do.
#[test]
fn localhost_is_reserved_for_every_way_of_signing() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_csrs(w, &["localhost"]);
    assert!(!dir.join("server").exists(), "vouch serve never ran here");
    let csr = w.join("localhost.csr");
    let (code, err) = code_and_err(&run(vouch().args(["--dir", s(&dir), "sign", "--csr", s(&csr)]), None));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[name-reserved]") && err.contains("localhost"), "{err}");
    assert!(!ok(&run(vouch().args(["--dir", s(&dir), "list", "--all"]), None)).contains("localhost\t"));
    let bytes = std::fs::read(&csr).unwrap();
    for with_dir in [true, false] {
        let mut cmd = vouch();
        if with_dir {
            cmd.args(["--dir", s(&dir)]);
        }
        cmd.args(["autosign", "--policy", s(&dir.join("policy.toml")), "--", "localhost"]);
        let (code, err) = code_and_err(&run(&mut cmd, Some(&bytes)));
        assert_eq!(code, Some(1), "hook (dir: {with_dir}): {err}");
        assert!(err.contains("[name-reserved]"), "hook (dir: {with_dir}): {err}");
    }
}

/// `vouch enc --cert FILE [CERTNAME]` verifies the certificate: its chain (the --dir CA's, or
/// --cacert), the CRLs (the CA's, or --crl), its validity and that its CN is CERTNAME; a
/// revoked certificate, one of another CA or another name prints nothing and exits 2.
#[test]
fn enc_cert_verifies_chain_crl_and_name() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let dir = ca_with_csrs(w, &["web01.example.test", "web02.example.test"]);
    let issue = |name: &str| {
        let out = w.join(format!("{name}.pem"));
        ok(&run(
            vouch()
                .args(["--dir", s(&dir), "sign", "--csr", s(&w.join(format!("{name}.csr")))])
                .args(["--out", s(&out)]),
            None,
        ));
        out
    };
    let (c1, c2) = (issue("web01.example.test"), issue("web02.example.test"));
    let enc = |args: &[&str]| run(vouch().args(["--dir", s(&dir), "enc"]).args(args), None);
    // Valid: with the CA's directory, and with its bundle and CRL file.
    assert!(ok(&enc(&["--cert", s(&c1)])).contains("vouch_source"));
    assert!(ok(&enc(&["--cert", s(&c1), "web01.example.test"])).contains("vouch_source"));
    // A CRL file as Puppet's hostcrl holds them: the master CA's (vouch crl) and the root's.
    let crl = w.join("crl.pem");
    let bundle = dir.join("ca/ca_bundle.pem");
    let hostcrl = |ca: &Path, out: &Path| {
        let master = w.join("master-crl.pem");
        ok(&run(vouch().args(["--dir", s(ca), "crl", "--out", s(&master)]), None));
        let root = std::fs::read_to_string(ca.join("ca/root_crl.pem")).unwrap();
        std::fs::write(out, std::fs::read_to_string(&master).unwrap() + &root).unwrap();
    };
    hostcrl(&dir, &crl);
    assert!(ok(&enc(&["--cert", s(&c1), "--cacert", s(&bundle), "--crl", s(&crl)])).contains("vouch_source"));
    // Another name than its CN.
    let o = enc(&["--cert", s(&c1), "web02.example.test"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty() && String::from_utf8_lossy(&o.stderr).contains("CN"), "{o:?}");
    // --cacert without any CRL is a usage error, never an unchecked answer.
    let o = enc(&["--cert", s(&c1), "--cacert", s(&bundle)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    // Another CA's bundle.
    let other = new_ca(w, "other");
    let o = run(vouch().args(["--dir", s(&other), "enc", "--cert", s(&c1)]), None);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty());
    hostcrl(&other, &w.join("other-crl.pem"));
    let o =
        enc(&["--cert", s(&c1), "--cacert", s(&other.join("ca/ca_bundle.pem")), "--crl", s(&w.join("other-crl.pem"))]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty());
    // Revoked: refused with the CA's CRLs and with the CRL file written after.
    ok(&run(vouch().args(["--dir", s(&dir), "revoke", "web01.example.test"]), None));
    let o = enc(&["--cert", s(&c1)]);
    assert_eq!(o.status.code(), Some(2), "a revoked certificate was classified");
    assert!(o.stdout.is_empty() && String::from_utf8_lossy(&o.stderr).contains("revoked"), "{o:?}");
    hostcrl(&dir, &crl);
    let o = enc(&["--cert", s(&c1), "--cacert", s(&bundle), "--crl", s(&crl)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("revoked"));
    // The other node is unaffected.
    assert!(ok(&enc(&["--cert", s(&c2), "--cacert", s(&bundle), "--crl", s(&crl)])).contains("vouch_source"));
}

/// `vouch crl --fetch --out` replaces a regular file by rename: a symbolic link, a directory,
/// a FIFO or a device is refused before anything is fetched (renamed over, `/dev/null` would
/// become a file), whatever the CA answers.
#[test]
fn crl_fetch_writes_only_regular_files() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let fifo = w.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let target = w.join("target.pem");
    std::fs::write(&target, "keep\n").unwrap();
    let link = w.join("link.pem");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let bundle = w.join("bundle.pem");
    std::fs::write(&bundle, "not read before the output is checked\n").unwrap();
    for (out, says) in [(&fifo, "device, FIFO or socket"), (&link, "symbolic link"), (&w.to_path_buf(), "directory")] {
        let (code, err) = code_and_err(&run(
            vouch().args([
                "crl",
                "--fetch",
                "--ca-url",
                "https://127.0.0.1:1",
                "--cacert",
                s(&bundle),
                "--out",
                s(out),
            ]),
            None,
        ));
        assert_eq!(code, Some(2), "{}: {err}", out.display());
        assert!(err.contains(says) && err.contains("hint:"), "{}: {err}", out.display());
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still one");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is still one");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
}
