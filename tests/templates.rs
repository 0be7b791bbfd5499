//! Signature version 3: templates for autoscaling groups. One set of attributes, signed
//! once, for every instance of a group: each instance gets one certificate with the
//! template's classification, up to its max uses, until it expires; first use wins per
//! instance; the count is shared by every master. Driven through the real binary (CSRs
//! made by `vouch csr` as a Puppet agent makes them; `vouch sign`, `vouch autosign`,
//! and two `vouch serve` masters on one directory server: a private slapd, and a base DN of
//! its own on the test binary's private 389 Directory Server, `_on_389ds`).

mod common;

use common::ds389::Ds389;
use common::ldap_lab::{enroll, slapd_opts, store_env, Directory, Master};
use common::slapd::Slapd;
use common::{fixture, ok, s, text, vouch};
use std::path::{Path, PathBuf};
use std::process::Output;

const CLASSIFICATION: &str = "classes:\n  - profile::web\nparameters:\n  tier: frontend\nenvironment: production\n";
const PATTERN: &str = "web-*.asg.example.test";

/// The policy of `dir` edited: version 3 accepted, and `extra` appended.
fn edit_policy(dir: &Path, extra: &str) {
    let p = dir.join("policy.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("versions = [1, 2]\n"), "{text}");
    std::fs::write(&p, text.replace("versions = [1, 2]\n", "versions = [1, 2, 3]\n") + extra).unwrap();
}

/// A file-store CA in `dir` (with `extra` in its policy) and a conductor `asg`: (cert, key).
fn lab(dir: &Path, extra: &str) -> (PathBuf, PathBuf) {
    ok(&vouch().args(["ca", "init", "--dir", s(dir)]).output().unwrap());
    edit_policy(dir, extra);
    let (cert, key) = (dir.join("asg.pem"), dir.join("asg.key"));
    ok(&vouch()
        .args(["conductor", "new", "asg", "--dir", s(dir), "--cert-out", s(&cert), "--key-out", s(&key)])
        .output()
        .unwrap());
    std::fs::write(dir.join("web.yaml"), CLASSIFICATION).unwrap();
    (cert, key)
}

/// `vouch conductor sign --template` with the policy of `policy_dir` at hand.
fn sign_template(policy_dir: &Path, lab: &Path, pattern: &str, max_uses: &str, extra: &[&str]) -> Output {
    let (cert, key) = (lab.join("asg.pem"), lab.join("asg.key"));
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = lab.join(format!("template-{}-{n}.yaml", std::process::id()));
    let o = vouch()
        .args(["--dir", s(policy_dir), "conductor", "sign", "--cert", s(&cert), "--key", s(&key)])
        .args(["--classification", s(&lab.join("web.yaml")), "--template", "--certname-pattern", pattern])
        .args(["--max-uses", max_uses, "--expires-in", "2d", "--out", s(&out)])
        .args(extra)
        .output()
        .unwrap();
    if o.status.success() {
        std::fs::rename(&out, lab.join("template.yaml")).unwrap();
    }
    o
}

/// A node's CSR from the template's attributes, with a new key (`vouch csr`).
fn node_csr(dir: &Path, certname: &str, n: usize) -> PathBuf {
    let csr = dir.join(format!("{certname}-{n}.csr"));
    ok(&vouch()
        .args(["csr", "--certname", certname, "--attributes", s(&dir.join("template.yaml"))])
        .args(["--key-out", s(&dir.join(format!("{certname}-{n}.key"))), "--csr-out", s(&csr)])
        .output()
        .unwrap());
    csr
}

fn vouch_sign(dir: &Path, csr: &Path, extra: &[&str]) -> Output {
    vouch().args(["--dir", s(dir)]).args(extra).args(["sign", "--csr", s(csr)]).output().unwrap()
}

fn refused_for(o: &Output, code: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    // `vouch check` prints its reasons on stdout, the others on stderr.
    assert!(text(o).contains(&format!("[{code}]")), "not {code}: {}", text(o));
}

/// A conductor host in `t/conductor-host` whose policy at hand lets every template through
/// (versions 1 to 3, unbound templates, an `[[identity.aws]]` entry, no scopes): a template
/// signed there reaches the CA, which judges it by its own policy.
fn lax_host(t: &Path) -> PathBuf {
    let host = t.join("conductor-host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::copy(fixture("iid-cloud.pem"), host.join("cloud.pem")).unwrap();
    std::fs::write(
        host.join("policy.toml"),
        "[conductors]\ntrusted_roots = [\"cloud.pem\"]\n\n[attributes]\nversions = [1, 2, 3]\n\n[templates]\n\
         allow_unbound = true\n\n[[identity.aws]]\ncertificates = [\"cloud.pem\"]\naccounts = [\"111122223333\"]\n\
         regions = [\"eu-west-1\"]\ncertname_patterns = [\"*.asg.example.test\"]\n",
    )
    .unwrap();
    host
}

/// The files the template's use count left in the replay journal (`.count`, `.use`).
fn count_files(dir: &Path) -> Vec<String> {
    let mut out = vec![];
    for bucket in std::fs::read_dir(dir.join("replay")).into_iter().flatten().flatten() {
        for e in std::fs::read_dir(bucket.path()).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".count") || n.ends_with(".use") {
                out.push(n);
            }
        }
    }
    out
}

#[test]
fn each_node_of_a_template_gets_one_certificate_with_its_classification_until_max_uses() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    let signed = sign_template(&d, &d, PATTERN, "3", &[]);
    ok(&signed);
    assert!(String::from_utf8_lossy(&signed.stderr).contains("not bound to an instance identity"), "{}", text(&signed));
    for i in 1..=3 {
        let name = format!("web-{i}.asg.example.test");
        let o = vouch_sign(&d, &node_csr(&d, &name, 0), &[]);
        ok(&o);
        let enc: serde_json::Value =
            serde_json::from_str(&ok(&vouch().args(["--dir", s(&d), "enc", &name]).output().unwrap())).unwrap();
        assert_eq!(enc["classes"], serde_json::json!(["profile::web"]), "{enc}");
        assert_eq!(enc["parameters"]["tier"], "frontend", "{enc}");
        assert_eq!(enc["environment"], "production", "{enc}");
    }
    // Use 4: refused with its own code, and `vouch check` (which writes nothing) says so too.
    let fourth = node_csr(&d, "web-4.asg.example.test", 0);
    refused_for(&vouch_sign(&d, &fourth, &[]), "template-exhausted");
    let check = vouch().args(["--dir", s(&d), "check", "--csr", s(&fourth)]).output().unwrap();
    refused_for(&check, "template-exhausted");
    // A name outside the pattern: refused for it, before anything is counted.
    refused_for(&vouch_sign(&d, &node_csr(&d, "db-1.asg.example.test", 0), &[]), "certname-not-in-template");
    assert_eq!(count_files(&d).iter().filter(|n| n.ends_with(".use")).count(), 3, "{:?}", count_files(&d));
}

#[test]
fn the_same_certname_twice_is_a_replay_and_spends_no_second_use() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "2", &[]));
    // Puppet Server's autosign hook: the first request for web-1 is approved; the same
    // name from another key is a replay (first use wins per certname).
    let hook = |csr: &Path, name: &str| {
        common::run(vouch().args(["--dir", s(&d), "autosign", name]), Some(&std::fs::read(csr).unwrap()))
    };
    let name = "web-1.asg.example.test";
    ok(&hook(&node_csr(&d, name, 1), name));
    let again = hook(&node_csr(&d, name, 2), name);
    assert_ne!(again.status.code(), Some(0), "{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("[attributes-replayed]"), "{}", text(&again));
    // The replay spent nothing: the template's second use is still there, and then none.
    ok(&hook(&node_csr(&d, "web-2.asg.example.test", 1), "web-2.asg.example.test"));
    let third = hook(&node_csr(&d, "web-3.asg.example.test", 1), "web-3.asg.example.test");
    assert!(String::from_utf8_lossy(&third.stderr).contains("[template-exhausted]"), "{}", text(&third));
}

#[test]
fn an_expired_template_is_refused_for_its_expiry() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "5", &[]));
    let csr = node_csr(&d, "web-1.asg.example.test", 0);
    let later = vouch::encoding::time::format_rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(3));
    refused_for(&vouch_sign(&d, &csr, &["--now", &later]), "template-expired");
    assert!(count_files(&d).is_empty(), "a refused request counted: {:?}", count_files(&d));
}

#[test]
fn a_pattern_escaping_the_conductors_scope_is_refused_at_sign_and_at_decision() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    let scope = "\n[templates]\nallow_unbound = true\n\n[[conductor]]\nname = \"asg\"\nsubject = \"CN=asg\"\n\
                 certnames = [\"web-*.asg.example.test\"]\n";
    lab(&d, scope);
    // At sign, with this CA's policy at hand: refused, nothing written.
    let wide = sign_template(&d, &d, "*.asg.example.test", "5", &[]);
    assert_eq!(wide.status.code(), Some(2), "{}", text(&wide));
    assert!(String::from_utf8_lossy(&wide.stderr).contains("[template-pattern-out-of-scope]"), "{}", text(&wide));
    assert!(!d.join("template.yaml").exists());
    // Within the scope: signed.
    ok(&sign_template(&d, &d, "web-eu-*.asg.example.test", "5", &[]));
    // Signed where another policy is at hand, the wide pattern reaches the CA: refused there,
    // even for a name the scope allows, before any count is spent.
    let elsewhere = lax_host(t.path());
    ok(&sign_template(&elsewhere, &d, "*.asg.example.test", "5", &[]));
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]), "template-pattern-out-of-scope");
    assert!(count_files(&d).is_empty(), "a refused request counted: {:?}", count_files(&d));
}

#[test]
fn unbound_templates_are_refused_unless_the_policy_allows_them_and_bound_ones_need_a_verifier() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "");
    let refused = sign_template(&d, &d, PATTERN, "5", &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("[template-unbound-forbidden]"), "{}", text(&refused));
    let elsewhere = lax_host(t.path());
    ok(&sign_template(&elsewhere, &d, PATTERN, "5", &[]));
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]), "template-unbound-forbidden");
    // Bound to the instance identity: this CA has no verifier, and the CSR no document.
    // A binding whose names the pattern never matches: no node could use it, refused at sign.
    let misfit = sign_template(&d, &d, PATTERN, "5", &["--identity-binding", "aws:{instance-id}.web.asg.example.test"]);
    assert_eq!(misfit.status.code(), Some(2), "{}", text(&misfit));
    assert!(String::from_utf8_lossy(&misfit.stderr).contains("never matches"), "{}", text(&misfit));
    // Bound, and this CA's policy has no [[identity.aws]]: every node would be refused, so the
    // policy at hand refuses it at sign (it used to exit 0 with a warning); signed where a
    // policy with a verifier is at hand, the CA refuses it for that.
    let bound = ["--identity-binding", "aws:web-{instance-id}.asg.example.test"];
    let unverifiable = sign_template(&d, &d, PATTERN, "5", &bound);
    assert_eq!(unverifiable.status.code(), Some(2), "{}", text(&unverifiable));
    assert!(text(&unverifiable).contains("[identity-verifier-missing]"), "{}", text(&unverifiable));
    assert!(text(&unverifiable).contains("add an [[identity.aws]] entry"), "{}", text(&unverifiable));
    ok(&sign_template(&elsewhere, &d, PATTERN, "5", &bound));
    let o = vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 1), &[]);
    refused_for(&o, "identity-verifier-missing");
    assert!(count_files(&d).is_empty(), "a refused request counted: {:?}", count_files(&d));
}

/// A template the CA's policy at hand refuses every use of is refused at sign, nothing
/// written: version 3 not accepted (the default policy), more uses than `templates.max_uses`;
/// and the CA's refusal of a version it does not accept is that reason alone.
#[test]
fn a_template_the_policy_refuses_is_refused_at_sign() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\nmax_uses = 10\n");
    let many = sign_template(&d, &d, PATTERN, "11", &[]);
    assert_eq!(many.status.code(), Some(2), "{}", text(&many));
    assert!(String::from_utf8_lossy(&many.stderr).contains("templates.max_uses"), "{}", text(&many));
    let p = d.join("policy.toml");
    let policy = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, policy.replace("versions = [1, 2, 3]\n", "versions = [1, 2]\n")).unwrap();
    let off = sign_template(&d, &d, PATTERN, "5", &[]);
    assert_eq!(off.status.code(), Some(2), "{}", text(&off));
    assert!(String::from_utf8_lossy(&off.stderr).contains("[version-unsupported]"), "{}", text(&off));
    assert!(!d.join("template.yaml").exists());
    // Signed where another policy is at hand, the CA says why, and only that.
    let elsewhere = lax_host(t.path());
    ok(&sign_template(&elsewhere, &d, PATTERN, "5", &[]));
    let o = vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]);
    refused_for(&o, "version-unsupported");
    for noise in ["attribute-unexpected", "signature-invalid"] {
        assert!(!text(&o).contains(noise), "{noise}: {}", text(&o));
    }
}

/// A `[[conductor]]` scope for the lab's conductor `asg`, certnames `web-*.asg.example.test`,
/// with `extra` keys; unbound templates allowed.
fn scoped(extra: &str) -> String {
    format!(
        "\n[templates]\nallow_unbound = true\n\n[[conductor]]\nname = \"asg\"\nsubject = \"CN=asg\"\n\
         certnames = [\"web-*.asg.example.test\"]\n{extra}"
    )
}

/// `o` exited 2 for `code`, naming what to change (not "see vouch --help"), nothing written.
fn refused_at_sign(o: &Output, lab: &Path, code: &str, hint: &str) {
    assert_eq!(o.status.code(), Some(2), "{code}: {}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("[{code}]")), "not {code}: {err}");
    assert!(err.contains(&format!("hint: {hint}")), "{code}: want the hint {hint:?}: {err}");
    assert!(!err.contains("see vouch --help"), "{err}");
    assert!(!lab.join("template.yaml").exists(), "{code}: a template was written");
}

/// The classes and environment the conductor's scope allows are judged at sign, as the
/// pattern is: a template whose classification the CA would refuse for every node (it used
/// to be signed, exit 0, and every node then refused) is refused with the CA's code and a hint
/// naming what to change; one within the scope is signed.
#[test]
fn a_classification_outside_the_conductors_scope_is_refused_at_sign() {
    let t = tempfile::tempdir().unwrap();
    let (classes, envs, fits) = (t.path().join("classes"), t.path().join("envs"), t.path().join("fits"));
    lab(&classes, &scoped("classes = [\"profile::db\"]\n"));
    let o = sign_template(&classes, &classes, PATTERN, "5", &[]);
    refused_at_sign(&o, &classes, "class-out-of-scope", "sign a --classification");
    assert!(text(&o).contains("profile::web"), "{}", text(&o));
    lab(&envs, &scoped("environments = [\"staging\"]\n"));
    let o = sign_template(&envs, &envs, PATTERN, "5", &[]);
    refused_at_sign(&o, &envs, "environment-out-of-scope", "sign a --classification");
    lab(&fits, &scoped("classes = [\"profile::*\"]\nenvironments = [\"production\"]\n"));
    ok(&sign_template(&fits, &fits, PATTERN, "5", &[]));
    // The pattern's refusal at sign names what to change too.
    let o = sign_template(&fits, &fits, "*.asg.example.test", "5", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("[template-pattern-out-of-scope]"), "{}", text(&o));
    assert!(text(&o).contains("hint: give a --certname-pattern within"), "{}", text(&o));
}

/// What the policy at hand would refuse of every node is refused at sign, with the policy's
/// own numbers (these used to exit 0 with a warning, or be refused with vouch's own maximum):
/// an expiry past templates.max_lifetime, --max-uses 0 or above templates.max_uses. A
/// mistyped --dir is an error, not a silent "no policy"; an empty --identity-binding is a
/// mistake, not an unbound template.
#[test]
fn the_policy_at_hand_is_checked_whole_at_sign_with_its_own_numbers() {
    let t = tempfile::tempdir().unwrap();
    let short = t.path().join("short");
    lab(&short, "\n[templates]\nallow_unbound = true\nmax_lifetime = \"1d\"\n");
    // sign_template signs for 2 days.
    let o = sign_template(&short, &short, PATTERN, "5", &[]);
    refused_at_sign(&o, &short, "expiry-too-far", "sign with a shorter --expires-in");
    assert!(text(&o).contains("templates.max_lifetime (1d)"), "{}", text(&o));
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\nmax_uses = 10\n");
    for uses in ["0", "11"] {
        let o = sign_template(&d, &d, PATTERN, uses, &[]);
        refused_at_sign(&o, &d, "template-max-uses-invalid", "give --max-uses");
        assert!(text(&o).contains("from 1 to 10 certificates (the policy's templates.max_uses)"), "{}", text(&o));
    }
    let o = sign_template(&d, &d, PATTERN, "5", &["--identity-binding", ""]);
    refused_at_sign(&o, &d, "identity-binding-empty", "give --identity-binding");
    ok(&sign_template(&d, &d, PATTERN, "10", &[]));
    std::fs::remove_file(d.join("template.yaml")).unwrap();
    // A --dir that does not exist: an error naming it, nothing signed.
    let typo = t.path().join("nonexist");
    let o = sign_template(&typo, &d, "db-*.asg.example.test", "5", &[]);
    refused_at_sign(&o, &d, "template-policy-dir-missing", "give --dir the CA's data directory");
    assert!(text(&o).contains(s(&typo)), "{}", text(&o));
    // A --dir without a policy: checked against the default policy, which refuses it.
    let bare = t.path().join("conductor-host");
    std::fs::create_dir(&bare).unwrap();
    let o = sign_template(&bare, &d, PATTERN, "5", &[]);
    refused_at_sign(&o, &d, "template-refused-by-default-policy", "give this command the CA's policy");
}

/// `vouch conductor sign --template` of the lab in `lab`, for `expires_in`, with `--dir`
/// `dir` if any and `VOUCH_POLICY` `policy` if any (else neither), written to `lab/template.yaml`.
fn sign_beside(lab: &Path, dir: Option<&Path>, policy: Option<&Path>, expires_in: &str, extra: &[&str]) -> Output {
    let mut c = vouch();
    if let Some(d) = dir {
        c.args(["--dir", s(d)]);
    }
    if let Some(p) = policy {
        c.env("VOUCH_POLICY", p);
    }
    c.args(["conductor", "sign", "--cert", s(&lab.join("asg.pem")), "--key", s(&lab.join("asg.key"))])
        .args(["--classification", s(&lab.join("web.yaml")), "--template", "--certname-pattern", PATTERN])
        .args(["--max-uses", "5", "--expires-in", expires_in, "--out", s(&lab.join("template.yaml"))])
        .args(extra)
        .output()
        .unwrap()
}

/// With no CA's policy at hand (no --dir, a --dir without policy.toml, a VOUCH_POLICY that
/// cannot be read), a template is checked against the default policy, deny by default: a
/// 365-day unbound template is refused for each of the three reasons that policy has, named
/// in one error, and nothing is written. (It was signed, exit 0, with a note on stderr.)
/// With the CA's policy given (VOUCH_POLICY), the same command signs.
#[test]
fn with_no_policy_at_hand_a_template_is_checked_against_the_default_policy() {
    let system = Path::new(vouch::cli::SYSTEM_POLICY);
    assert!(!system.exists(), "this test needs a machine without {}: it would be the policy at hand", system.display());
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    let bare = t.path().join("conductor-host");
    std::fs::create_dir(&bare).unwrap();
    let hint = "give this command the CA's policy";
    for o in [sign_beside(&d, None, None, "365d", &[]), sign_beside(&d, Some(&bare), None, "365d", &[])] {
        refused_at_sign(&o, &d, "template-refused-by-default-policy", hint);
        for reason in
            ["no CA's policy is at hand", "[version-unsupported]", "[expiry-too-far]", "[template-unbound-forbidden]"]
        {
            assert!(text(&o).contains(reason), "{reason}: {}", text(&o));
        }
    }
    // A policy that cannot be read counts for none: the default policy's reasons, for a
    // 2-day template two of them; a bound one has no verifier there.
    let gone = t.path().join("gone.toml");
    let o = sign_beside(&d, None, Some(&gone), "2d", &[]);
    refused_at_sign(&o, &d, "template-refused-by-default-policy", hint);
    assert!(text(&o).contains("cannot be read") && text(&o).contains("[template-unbound-forbidden]"), "{}", text(&o));
    assert!(!text(&o).contains("[expiry-too-far]"), "{}", text(&o));
    let o = sign_beside(&d, None, None, "2d", &["--identity-binding", "aws:web-{instance-id}.asg.example.test"]);
    refused_at_sign(&o, &d, "template-refused-by-default-policy", hint);
    assert!(text(&o).contains("[identity-verifier-missing]"), "{}", text(&o));
    assert!(!text(&o).contains("[template-unbound-forbidden]"), "{}", text(&o));
    // The CA's own policy at hand: signed.
    ok(&sign_beside(&d, None, Some(&d.join("policy.toml")), "2d", &[]));
}

/// `--max-uses` past any count (more than 64 bits) was echoed back as 18446744073709551615;
/// it is refused as given, with the range.
#[test]
fn a_max_uses_past_any_count_is_refused_as_given() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    let huge = "99999999999999999999";
    let o = sign_template(&d, &d, PATTERN, huge, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{huge} is too large")) && err.contains("from 1 to 1000000"), "{err}");
    assert!(!err.contains("18446744073709551615"), "{err}");
    assert!(!d.join("template.yaml").exists());
}

/// A policy whose templates.max_uses is lowered below a template already signed: every node
/// is refused with a code of its own naming both numbers and what to do (it was
/// template-max-uses-invalid, "\"50\" must be a decimal from 1 to 10 with no sign or leading
/// zero", and a hint naming 1 to 1000000).
#[test]
fn a_policy_lowered_below_a_signed_templates_max_uses_says_so_at_enrollment() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "50", &[]));
    let policy = d.join("policy.toml");
    let text_before = std::fs::read_to_string(&policy).unwrap();
    assert!(text_before.ends_with("allow_unbound = true\n"), "{text_before}");
    std::fs::write(&policy, text_before + "max_uses = 10\n").unwrap();
    let o = vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]);
    refused_for(&o, "template-max-uses-above-policy");
    let err = text(&o);
    assert!(err.contains("signed for 50 uses") && err.contains("allows at most 10"), "{err}");
    assert!(err.contains("hint: have the conductor sign a new template"), "{err}");
    assert!(!err.contains("must be a decimal") && !err.contains("1000000"), "{err}");
}

/// `vouch template uses FILE [--store URL]`: a template's uses spent and left, as the file
/// store counts them, then as the shared store does after `vouch migrate` and a use there.
/// (No command showed them.)
#[test]
fn template_uses_shows_the_uses_spent_and_left_on_the_file_store_and_on_ldap() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "3", &[]));
    let template = d.join("template.yaml");
    let uses = |env: &[(String, String)], format: &str| {
        ok(&vouch()
            .envs(env.iter().cloned())
            .args(["--dir", s(&d), "template", "uses", s(&template), "--format", format])
            .output()
            .unwrap())
    };
    let line = uses(&[], "text");
    assert!(line.contains(&format!("template {PATTERN} (unbound; expires ")), "{line}");
    assert!(line.contains("0 of 3 uses spent, 3 left"), "{line}");
    for i in 1..=2 {
        ok(&vouch_sign(&d, &node_csr(&d, &format!("web-{i}.asg.example.test"), 0), &[]));
    }
    assert!(uses(&[], "text").contains("2 of 3 uses spent, 1 left"), "{}", uses(&[], "text"));
    let v: serde_json::Value = serde_json::from_str(&uses(&[], "json")).unwrap();
    assert_eq!((v["used"].as_u64(), v["left"].as_u64(), v["max_uses"].as_u64()), (Some(2), Some(1), Some(3)), "{v}");
    assert_eq!(v["pattern"], PATTERN, "{v}");
    // Not a template: said so, exit 2.
    let attrs = t.path().join("v2.yaml");
    std::fs::write(&attrs, "custom_attributes:\n  '1.3.6.1.4.1.34380.2.2': '2'\n").unwrap();
    let o = vouch().args(["--dir", s(&d), "template", "uses", s(&attrs)]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a template"), "{}", text(&o));
    // The shared store: the count migrated, then a use counted there.
    let slapd = Slapd::start(&slapd_opts());
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    let env = store_env(&slapd);
    let bind: Vec<(String, String)> = env.iter().filter(|(k, _)| k != "VOUCH_STORE").cloned().collect();
    let url = slapd.url(&slapd.base());
    ok(&vouch().envs(bind).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap());
    let line = uses(&env, "text");
    assert!(line.contains("2 of 3 uses spent, 1 left") && !line.contains("replay journal"), "{line}");
    let csr = node_csr(&d, "web-3.asg.example.test", 0);
    ok(&vouch().envs(env.iter().cloned()).args(["--dir", s(&d), "sign", "--csr", s(&csr)]).output().unwrap());
    assert!(uses(&env, "text").contains("3 of 3 uses spent, 0 left"), "{}", uses(&env, "text"));
}

#[test]
fn two_masters_on_one_slapd_share_a_templates_count() {
    let slapd = Slapd::start(&slapd_opts());
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    two_masters_share_a_templates_count(&slapd);
}

#[test]
fn two_masters_on_one_slapd_share_a_templates_count_on_389ds() {
    two_masters_share_a_templates_count(&Ds389::store("templates_count"));
}

fn two_masters_share_a_templates_count(slapd: &dyn Directory) {
    let t = tempfile::tempdir().unwrap();
    let (d1, d2) = (t.path().join("m1"), t.path().join("m2"));
    lab(&d1, "\n[templates]\nallow_unbound = true\n");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    edit_policy(&d2, "\n[templates]\nallow_unbound = true\n");
    let (m1, m2) = (Master::start(slapd, &d1, "ca1.test"), Master::start(slapd, &d2, "ca2.test"));
    ok(&sign_template(&d1, &d1, PATTERN, "4", &[]));
    // Six instances, three at each master, all at once: exactly four certificates.
    let csrs: Vec<(String, Vec<u8>)> = (1..=6)
        .map(|i| {
            let name = format!("web-{i}.asg.example.test");
            let csr = std::fs::read(node_csr(&d1, &name, 0)).unwrap();
            (name, csr)
        })
        .collect();
    let results: Vec<(String, u16, String, bool)> = std::thread::scope(|sc| {
        let handles: Vec<_> = csrs
            .iter()
            .enumerate()
            .map(|(i, (name, csr))| {
                let m = if i % 2 == 0 { &m1 } else { &m2 };
                sc.spawn(move || {
                    let (status, why, cert) = enroll(m, name, csr);
                    (name.clone(), status, why, cert.is_some())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let issued = results.iter().filter(|r| r.3).count();
    assert_eq!(issued, 4, "{results:?}\n{}\n{}", m1.log(), m2.log());
    // The refused ones are pending for the template's exhaustion, as either master lists them.
    let listed =
        ok(&vouch().envs(store_env(slapd)).args(["--dir", s(&d2), "list", "--format", "json"]).output().unwrap());
    assert_eq!(listed.matches("template-exhausted").count(), 2, "{listed}");
    // A seventh, later, at the other master: still refused.
    let late = std::fs::read(node_csr(&d1, "web-7.asg.example.test", 0)).unwrap();
    let (_, _, cert) = enroll(&m2, "web-7.asg.example.test", &late);
    assert!(cert.is_none(), "a fifth certificate from a template of four");
}

#[test]
fn version_3_vectors_verify_reproduce_and_match_the_attribute_format_doc() {
    use base64::Engine;
    let doc = std::fs::read_to_string(common::root().join("docs/attributes.md")).unwrap();
    for name in ["p256", "p384", "rsa2048", "ed25519"] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture(&format!("vectors/v3-{name}.json"))).unwrap())
                .unwrap();
        let a = &v["attributes"];
        let get = |oid: &str| a[format!("1.3.6.1.4.1.34380.2.{oid}")].as_str().unwrap().to_string();
        let template = vouch::vouching::template::Template {
            pattern: get("8"),
            max_uses: get("9"),
            id: get("7"),
            binding: get("10"),
        };
        let canonical = vouch::vouching::template::canonical_v3(&get("2"), &get("3"), &get("4"), &get("5"), &template);
        assert_eq!(canonical, v["canonical_string"].as_str().unwrap().as_bytes(), "{name}");
        let key = vouch::issuance::keys::load_pem(v["conductor_private_key_pem"].as_str().unwrap()).unwrap();
        let sig = base64::engine::general_purpose::STANDARD.decode(get("1")).unwrap();
        let cert = base64::engine::general_purpose::STANDARD.decode(get("4")).unwrap();
        let der = rustls_pki_types::CertificateDer::from(cert.as_slice());
        let ee = webpki::EndEntityCert::try_from(&der).unwrap();
        let alg: &dyn rustls_pki_types::SignatureVerificationAlgorithm = match name {
            "p256" => webpki::aws_lc_rs::ECDSA_P256_SHA256,
            "p384" => webpki::aws_lc_rs::ECDSA_P384_SHA384,
            "rsa2048" => webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
            _ => webpki::aws_lc_rs::ED25519,
        };
        ee.verify_signature(alg, &canonical, &sig).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        if name == "rsa2048" || name == "ed25519" {
            assert_eq!(rcgen::SigningKey::sign(&key, &canonical).unwrap(), sig, "{name} reproduces");
        }
        // The Ed25519 vector is printed in docs/attributes.md, byte for byte.
        if name == "ed25519" {
            let shown = doc.split("<!-- v3-vector-ed25519 -->\n```\n").nth(1).and_then(|r| r.split("```").next());
            assert_eq!(shown.map(str::as_bytes), Some(canonical.as_slice()), "docs/attributes.md's v3 vector");
        }
    }
}

/// A stock Puppet agent's confdir under `base/certname`, pointed at `vouch serve` on `port`,
/// with the template's attributes as its `csr_attributes.yaml`.
fn agent_conf(base: &Path, certname: &str, port: u16, attributes: &Path) -> PathBuf {
    let d = base.join(certname);
    std::fs::create_dir_all(d.join("etc")).unwrap();
    let mut conf = format!(
        "[main]\nserver = localhost\nca_server = localhost\nserverport = {port}\ncertname = {certname}\n\
         csr_attributes = {}\n",
        attributes.display()
    );
    for (k, v) in ["ssldir", "vardir", "rundir", "logdir", "publicdir", "codedir"]
        .iter()
        .zip(["ssl", "var", "run", "log", "public", "code"])
    {
        conf.push_str(&format!("{k} = {}\n", d.join(v).display()));
    }
    std::fs::write(d.join("etc/puppet.conf"), conf).unwrap();
    d.join("etc")
}

#[test]
fn real_puppet_agents_of_one_group_each_bootstrap_from_the_same_template() {
    common::require("puppet", "puppet-agent");
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "2", &[]));
    let log = t.path().join("serve.log");
    let (mut child, _banner, port) =
        common::start_serve(common::serve_cmd(&d).args(["--server-name", "localhost"]), &log);
    let bootstrap = |name: &str| {
        let confdir = agent_conf(t.path(), name, port, &d.join("template.yaml"));
        let o = std::process::Command::new("puppet")
            .args(["ssl", "bootstrap", "--waitforcert", "0", "--confdir", s(&confdir)])
            .output()
            .unwrap();
        (o, confdir.parent().unwrap().join(format!("ssl/certs/{name}.pem")))
    };
    for name in ["web-1.asg.example.test", "web-2.asg.example.test"] {
        let (o, cert) = bootstrap(name);
        assert!(o.status.success(), "{name}: {}\n{}", text(&o), std::fs::read_to_string(&log).unwrap_or_default());
        // The certificate carries the template's classification (its .2.5 extension).
        let shown = ok(&std::process::Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in", s(&cert)])
            .output()
            .unwrap());
        assert!(shown.contains("1.3.6.1.4.1.34380.2.5"), "{name}: {shown}");
    }
    // The third instance of a template of two gets no certificate.
    let (o, cert) = bootstrap("web-3.asg.example.test");
    assert!(!o.status.success() && !cert.exists(), "{}", text(&o));
    let pending = ok(&vouch().args(["--dir", s(&d), "list", "--format", "json"]).output().unwrap());
    assert!(pending.contains("template-exhausted"), "{pending}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_crash_between_the_count_and_the_use_record_neither_loses_nor_doubles_a_use() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "2", &[]));
    let first = node_csr(&d, "web-1.asg.example.test", 0);
    // Killed right after the count named web-1, before its use record.
    let mut killed = vouch();
    killed.env("VOUCH_TEST_ABORT_AT", "template:counted").args(["--dir", s(&d), "sign", "--csr", s(&first)]);
    let killed = killed.output().unwrap();
    assert_eq!(killed.status.code(), None, "not killed at template:counted: {}", text(&killed));
    let files = count_files(&d);
    assert_eq!((files.len(), files.iter().filter(|n| n.ends_with(".count")).count()), (1, 1), "{files:?}");
    // The same node again: its use is the one already counted (no second), then one is left.
    ok(&vouch_sign(&d, &first, &[]));
    ok(&vouch_sign(&d, &node_csr(&d, "web-2.asg.example.test", 0), &[]));
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-3.asg.example.test", 0), &[]), "template-exhausted");
}

#[test]
fn a_request_the_store_refuses_spends_no_use_of_its_template() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    // web-1 holds a valid certificate (from a template of its own).
    ok(&sign_template(&d, &d, PATTERN, "1", &[]));
    ok(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]));
    // A template of two: web-1 again (on_existing = "refuse") is refused by the store, and
    // two other instances still enroll.
    ok(&sign_template(&d, &d, PATTERN, "2", &[]));
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 1), &[]), "certificate-exists");
    ok(&vouch_sign(&d, &node_csr(&d, "web-2.asg.example.test", 0), &[]));
    ok(&vouch_sign(&d, &node_csr(&d, "web-3.asg.example.test", 0), &[]));
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-4.asg.example.test", 0), &[]), "template-exhausted");
}

#[test]
fn racing_hooks_on_one_journal_yield_exactly_max_uses() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "4", &[]));
    let csrs: Vec<(String, Vec<u8>)> = (1..=10)
        .map(|i| {
            let name = format!("web-{i}.asg.example.test");
            let csr = std::fs::read(node_csr(&d, &name, 0)).unwrap();
            (name, csr)
        })
        .collect();
    let barrier = std::sync::Barrier::new(csrs.len());
    let approved = std::thread::scope(|sc| {
        let handles: Vec<_> = csrs
            .iter()
            .map(|(name, csr)| {
                let (barrier, d) = (&barrier, &d);
                sc.spawn(move || {
                    barrier.wait();
                    common::run(vouch().args(["--dir", s(d), "autosign", name]), Some(csr))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).filter(|o| o.status.success()).count()
    });
    assert_eq!(approved, 4);
}

/// A version 3 request refused at the CA's admission (the name holds a
/// valid certificate, `on_existing = "refuse"`) makes nothing of its template that
/// key's ("a refused version 3 request holds none of the template's uses"). Once the name
/// is cleaned, the node enrolls with that template under a new key, and its one use is
/// spent on that certificate, not on a refusal.
#[test]
fn a_request_refused_at_admission_holds_none_of_its_templates_uses() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    lab(&d, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d, &d, PATTERN, "1", &[]));
    ok(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 0), &[]));
    ok(&sign_template(&d, &d, PATTERN, "2", &[]));
    // Someone else's key, under the second template: refused by the store.
    refused_for(&vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 1), &[]), "certificate-exists");
    ok(&vouch().args(["--dir", s(&d), "clean", "web-1.asg.example.test"]).output().unwrap());
    // The node, reprovisioned with a new key, under the second template.
    let o = vouch_sign(&d, &node_csr(&d, "web-1.asg.example.test", 2), &[]);
    // Whereas the refused request, sent again, now gets the name's certificate.
    let again = vouch_sign(&d, &d.join("web-1.asg.example.test-1.csr"), &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the refused request's key holds the template's use: {}\nthat key sent again: {}",
        text(&o),
        text(&again)
    );
}

/// A file-store CA in `dir` accepting unbound templates, and a template of 3 uses signed by
/// its conductor `asg` (`dir/template.yaml`), as tests/templates.rs makes them.
fn file_store_template(dir: &Path) -> PathBuf {
    ok(&vouch().args(["ca", "init", "--dir", s(dir)]).output().unwrap());
    let p = dir.join("policy.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("versions = [1, 2]\n"), "{text}");
    let text = text.replace("versions = [1, 2]\n", "versions = [1, 2, 3]\n") + "\n[templates]\nallow_unbound = true\n";
    std::fs::write(&p, text).unwrap();
    let (cert, key) = (dir.join("asg.pem"), dir.join("asg.key"));
    ok(&vouch()
        .args(["conductor", "new", "asg", "--dir", s(dir), "--cert-out", s(&cert), "--key-out", s(&key)])
        .output()
        .unwrap());
    std::fs::write(dir.join("web.yaml"), CLASSIFICATION).unwrap();
    let template = dir.join("template.yaml");
    ok(&vouch()
        .args(["--dir", s(dir), "conductor", "sign", "--cert", s(&cert), "--key", s(&key)])
        .args(["--classification", s(&dir.join("web.yaml")), "--template", "--certname-pattern", PATTERN])
        .args(["--max-uses", "3", "--expires-in", "2d", "--out", s(&template)])
        .output()
        .unwrap());
    template
}

/// `vouch template uses` is a read ("never written", src/cli/template_uses.rs). Asked with
/// `--store` of a shared store by the data directory of a master still on its file store
/// (to look at the fleet's count before a move), it opens the CA as every command does: it
/// registers the CA in the shared store, marks the directory's file store retired and the
/// policy's replay journal moved. What must hold: nothing written; the directory's own
/// `vouch sign` (file store, no --store) still works after the look.
#[test]
fn template_uses_with_store_is_a_look_that_retires_no_file_store_and_no_journal() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("ca");
    let template = file_store_template(&d);
    let slapd = common::ldap_lab::openldap_store();
    let env = store_env(&slapd);
    let look = vouch().envs(env.iter().cloned()).args(["--dir", s(&d), "template", "uses", s(&template)]).output();
    let look = look.unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&look.stdout), String::from_utf8_lossy(&look.stderr));
    assert!(look.status.success() && said.contains("0 of 3 uses spent"), "the look itself: {}: {said}", look.status);
    let marker = d.join("ca/MOVED-TO-SHARED-STORE");
    let journal_marker = d.join("replay/MOVED-TO-SHARED-STORE");
    let csr = d.join("web-1.csr");
    ok(&vouch()
        .args(["csr", "--certname", "web-1.asg.example.test", "--attributes", s(&template)])
        .args(["--key-out", s(&d.join("web-1.key")), "--csr-out", s(&csr)])
        .output()
        .unwrap());
    let sign = vouch().args(["--dir", s(&d), "sign", "--csr", s(&csr)]).output().unwrap();
    let signed = format!("{}{}", String::from_utf8_lossy(&sign.stdout), String::from_utf8_lossy(&sign.stderr));
    assert!(
        !marker.exists() && !journal_marker.exists() && sign.status.success(),
        "`template uses --store` ({}: {said}) left the file store retired ({}) / the journal moved ({}); the \
         directory's own sign then: {}: {signed}",
        look.status,
        marker.exists(),
        journal_marker.exists(),
        sign.status
    );
}

/// Every file under `dir` with its length and modification time.
fn tree_of(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.push(format!("{} {} {:?}", e.path().display(), m.len(), m.modified().ok()));
        }
    }
    out.sort();
    out
}

/// `vouch template uses --store` asked by the data directory of a master that
/// never joined the fleet (master 2), while master 1 spent two of a template's three uses on
/// the shared store. What must hold: it reads the fleet's count (2 of 3), and it writes
/// nothing: the directory server's entries (operational attributes too) and master 2's
/// directory are as they were.
#[test]
fn template_uses_with_store_from_an_unjoined_directory_reads_the_fleets_count_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (d1, d2) = (t.path().join("m1"), t.path().join("m2"));
    lab(&d1, "\n[templates]\nallow_unbound = true\n");
    ok(&sign_template(&d1, &d1, PATTERN, "3", &[]));
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    edit_policy(&d2, "\n[templates]\nallow_unbound = true\n");
    let slapd = Slapd::start(&slapd_opts());
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    let env = store_env(&slapd);
    for i in 1..=2 {
        let csr = node_csr(&d1, &format!("web-{i}.asg.example.test"), 0);
        ok(&vouch().envs(env.iter().cloned()).args(["--dir", s(&d1), "sign", "--csr", s(&csr)]).output().unwrap());
    }
    let dump = || slapd.ldapsearch(&slapd.base(), "(objectClass=*)", &["*", "+"]).ok().to_string();
    let (entries, files) = (dump(), tree_of(&d2));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let template = d1.join("template.yaml");
    let look = vouch().envs(env.iter().cloned()).args(["--dir", s(&d2), "template", "uses", s(&template)]).output();
    let line = ok(&look.unwrap());
    assert!(line.contains("2 of 3 uses spent, 1 left"), "the fleet's count misread: {line}");
    let after = dump();
    assert!(after == entries, "the look wrote to the directory server:\nbefore:\n{entries}\nafter:\n{after}");
    assert_eq!(tree_of(&d2), files, "the look wrote in master 2's directory");
}
