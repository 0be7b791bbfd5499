//! Templates bound to the instance, through the real binary: identity documents from a test
//! cloud that plays AWS (tests/common/cloud.rs: its own signing certificate, a loopback
//! IMDSv2 metadata server per instance), checked by `vouch identity check`, and the node's
//! cloud-init part (`vouch identity cloud-config`) run by the real cloud-init, with the real
//! `puppet config set` it calls.

mod common;

use common::cloud::{document, document_launched, Metadata, Signer};
use common::ds389::Ds389;
use common::ldap_lab::{enroll, slapd_opts, store_env, Directory, Master};
use common::slapd::Slapd;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const BINDING: &str = "aws:{instance-id}.web.asg.example.com";
const ACCOUNT: &str = "111122223333";
const REGION: &str = "eu-west-1";

struct Cloud {
    dir: tempfile::TempDir,
    signer: Signer,
    other: Signer,
    policy: PathBuf,
}

/// A test cloud and a policy that trusts its certificate for `*.web.asg.example.com` in one
/// account and region.
fn cloud() -> Cloud {
    require("openssl", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let signer = Signer::new(dir.path(), "cloud");
    let other = Signer::new(dir.path(), "other");
    std::fs::copy(fixture("pki/root_crt.pem"), dir.path().join("root.pem")).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[conductors]\ntrusted_roots = [\"root.pem\"]\n\n[[identity.aws]]\nname = \"web\"\n\
             certificates = [\"cloud.pem\"]\naccounts = [\"{ACCOUNT}\"]\nregions = [\"{REGION}\"]\n\
             certname_patterns = [\"*.web.asg.example.com\"]\n"
        ),
    )
    .unwrap();
    Cloud { dir, signer, other, policy }
}

impl Cloud {
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// `vouch identity check --format json` on `doc`: its JSON answer and exit status.
    fn check(&self, doc: &Path, certname: Option<&str>) -> (serde_json::Value, Option<i32>) {
        let mut cmd = vouch();
        cmd.args(["identity", "check", "--binding", BINDING, "--format", "json", "--policy", s(&self.policy)]);
        cmd.args(["--document", s(doc)]);
        if let Some(c) = certname {
            cmd.args(["--certname", c]);
        }
        let out = run(&mut cmd, None);
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out), String::from_utf8_lossy(&out.stderr)));
        (v, out.status.code())
    }

    fn refused(&self, doc: &Path, certname: Option<&str>) -> String {
        let (v, status) = self.check(doc, certname);
        assert_eq!(status, Some(1), "{v}");
        assert_eq!(v["verified"], false, "{v}");
        assert!(!v["hint"].as_str().unwrap().is_empty(), "{v}");
        v["code"].as_str().unwrap().to_string()
    }
}

#[test]
fn documents_of_the_test_cloud_verify_and_each_bad_one_has_its_own_code() {
    let c = cloud();
    let id = "i-0a1b2c3d4e5f60718";
    let good = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    // As the metadata service serves it (base64 lines) and as raw DER.
    let served = c.write("served.txt", common::cloud::served_base64(&good).as_bytes());
    let certname = format!("{id}.web.asg.example.com");
    let (v, status) = c.check(&served, Some(&certname));
    assert_eq!(status, Some(0), "{v}");
    assert_eq!(v["instance_id"], id);
    assert_eq!(v["certname"], certname.as_str());
    assert_eq!((v["account"].as_str(), v["region"].as_str()), (Some(ACCOUNT), Some(REGION)));
    assert_eq!(c.check(&c.write("good.p7", &good), None).1, Some(0));

    let other_key = c.other.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    assert_eq!(c.refused(&c.write("other-key.p7", &other_key), None), "identity-unknown-signer");
    let account = c.signer.sign(c.dir.path(), &document(id, "999988887777", REGION));
    assert_eq!(c.refused(&c.write("account.p7", &account), None), "identity-account-not-allowed");
    let region = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, "us-east-1"));
    assert_eq!(c.refused(&c.write("region.p7", &region), None), "identity-region-not-allowed");
    let good_path = c.write("good2.p7", &good);
    assert_eq!(c.refused(&good_path, Some("web01.web.asg.example.com")), "identity-certname-not-derived");
    // A genuine document of an instance launched two hours ago (the policy's default age is 1h).
    let old = time::OffsetDateTime::now_utc() - time::Duration::hours(2);
    let stale = c.signer.sign(c.dir.path(), &document_launched(id, ACCOUNT, REGION, old));
    assert_eq!(c.refused(&c.write("stale.p7", &stale), None), "identity-document-stale");
}

/// The script takes the instance id from the unsigned metadata document: one that is not
/// `i-` and 8 or 17 hex digits stops it before it writes anything or sets the certname.
#[test]
fn the_cloud_init_script_refuses_an_instance_id_that_is_not_one() {
    let c = cloud();
    let out = run(vouch().args(["identity", "cloud-config", "--binding", BINDING]), None);
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&ok(&out)).unwrap();
    let script = v["runcmd"][0][2].as_str().unwrap().to_string();
    let confdir = c.dir.path().join("confdir");
    std::fs::create_dir(&confdir).unwrap();
    for bad in ["i-0123 --confdir /tmp", "i-0123456789ABCDEF0", "../i-01234567"] {
        let imds = Metadata::start(document(bad, ACCOUNT, REGION), b"not signed");
        let out = Command::new("/usr/bin/python3")
            .args(["-c", &script, "{instance-id}.web.asg.example.com"])
            .env("VOUCH_IMDS_ENDPOINT", &imds.endpoint)
            .env("VOUCH_PUPPET_CONFDIR", s(&confdir))
            .env("VOUCH_PUPPET", "/bin/true")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("is not i- and 8 or 17 hex digits"), "{bad}: {err}");
        assert!(!confdir.join("csr_attributes.yaml").exists(), "{bad}");
    }
}

#[test]
fn bad_input_is_refused_with_a_clear_reason() {
    let c = cloud();
    let id = "i-0a1b2c3d4e5f60718";
    let good = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    // Not PKCS#7: the plain JSON document, and a cut one.
    let json = c.write("doc.json", document(id, ACCOUNT, REGION).as_bytes());
    assert_eq!(c.refused(&json, None), "identity-document-not-base64");
    let json_b64 = common::cloud::served_base64(document(id, ACCOUNT, REGION).as_bytes());
    assert_eq!(c.refused(&c.write("doc.b64", json_b64.as_bytes()), None), "identity-not-pkcs7");
    let cut = c.write("cut.p7", &good[..good.len() / 2]);
    assert_eq!(c.refused(&cut, None), "identity-not-pkcs7");
    let (v, _) = c.check(&cut, None);
    assert!(v["message"].as_str().unwrap().contains("not a PKCS#7"), "{v}");
    // A signature over other bytes: one character of the document changed, same length.
    let mut other_bytes = good.clone();
    let at = other_bytes.windows(id.len()).position(|w| w == id.as_bytes()).unwrap();
    other_bytes[at + id.len() - 1] = b'9';
    assert_eq!(c.refused(&c.write("other-bytes.p7", &other_bytes), None), "identity-digest-mismatch");
    // A huge document, as DER and as base64 text: refused on its size.
    let mut huge = good.clone();
    huge.resize(200_000, 0);
    assert_eq!(c.refused(&c.write("huge.p7", &huge), None), "identity-document-too-large");
    let huge_text = "A".repeat(200_000);
    assert_eq!(c.refused(&c.write("huge.txt", huge_text.as_bytes()), None), "identity-document-too-large");
}

#[test]
fn a_policy_entry_lists_accounts_and_regions_or_is_refused() {
    let c = cloud();
    let text = std::fs::read_to_string(&c.policy).unwrap().replace(&format!("[\"{REGION}\"]"), "[]");
    std::fs::write(&c.policy, text).unwrap();
    let good = c.signer.sign(c.dir.path(), &document("i-0a1b2c3d4e5f60718", ACCOUNT, REGION));
    let mut cmd = vouch();
    cmd.args(["identity", "check", "--binding", BINDING, "--policy", s(&c.policy), "--document"]);
    let out = run(cmd.arg(c.write("good.p7", &good)), None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("identity.aws.regions"), "{err}");
}

/// cloud-init keeps its scripts under /var/lib/cloud whatever the user-data says: one run at
/// a time, across the test binaries too.
fn cloud_init_lock() -> std::fs::File {
    let f = std::fs::OpenOptions::new().create(true).append(true).open("/tmp/vouch-tests-cloud-init.lock").unwrap();
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
    f
}

/// Runs `user_data` as cloud-init runs user-data at boot: its `runcmd` module writes the
/// script into the instance's scripts directory, and the `scripts_user` module's runner
/// (`cloudinit.subp.runparts`, called as that module calls it) runs it, with `env`. (The
/// module itself, run alone with `cloud-init single`, finds no current instance without the
/// boot's `init` stage, which would change the machine's users, keys and host name.)
fn cloud_init(user_data: &Path, env: &[(&str, &str)]) {
    let _lock = cloud_init_lock();
    let mut cmd = Command::new("cloud-init");
    cmd.arg("--file").arg(user_data).args(["single", "--name", "runcmd", "--frequency", "always"]);
    let out = cmd.output().unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !all.contains("Traceback"), "cloud-init runcmd: {all}");
    let instances = Path::new("/var/lib/cloud/instances");
    let scripts = std::fs::read_dir(instances).unwrap().flatten().map(|e| e.path().join("scripts"));
    let scripts = scripts.into_iter().find(|p| p.join("runcmd").exists()).expect("cloud-init wrote no runcmd script");
    let runparts = format!("from cloudinit import subp; subp.runparts({:?})", s(&scripts));
    let out = Command::new("/usr/bin/python3").args(["-c", &runparts]).envs(env.iter().copied()).output().unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the runcmd script: {all}");
    assert!(all.contains("identity document for"), "{all}");
}

#[test]
fn cloud_init_adds_each_instances_document_and_derived_certname() {
    require("cloud-init", "cloud-init");
    require("puppet", "puppet-agent");
    let c = cloud();
    let out = run(vouch().args(["identity", "cloud-config", "--binding", BINDING]), None);
    let user_data = c.write("user-data", ok(&out).as_bytes());
    let schema = Command::new("cloud-init").args(["schema", "--config-file", s(&user_data)]).output().unwrap();
    assert!(schema.status.success(), "cloud-init schema: {}", String::from_utf8_lossy(&schema.stderr));
    let ids = ["i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c"];
    for id in ids {
        let signed = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
        let imds = Metadata::start(document(id, ACCOUNT, REGION), &signed);
        let confdir = c.dir.path().join(id);
        std::fs::create_dir(&confdir).unwrap();
        // What cloud-init's puppet module wrote first: the template's signed attributes stay.
        std::fs::write(confdir.join("csr_attributes.yaml"), "custom_attributes:\n  1.3.6.1.4.1.34380.2.1: '3'\n")
            .unwrap();
        cloud_init(&user_data, &[("VOUCH_IMDS_ENDPOINT", &imds.endpoint), ("VOUCH_PUPPET_CONFDIR", s(&confdir))]);
        let yaml = std::fs::read_to_string(confdir.join("csr_attributes.yaml")).unwrap();
        let attrs: serde_yaml_ng::Value = serde_yaml_ng::from_str(&yaml).unwrap();
        let custom = &attrs["custom_attributes"];
        assert_eq!(custom["1.3.6.1.4.1.34380.2.1"].as_str(), Some("3"), "{yaml}");
        let doc = custom["1.3.6.1.4.1.34380.2.11"].as_str().unwrap_or_else(|| panic!("{yaml}"));
        let printed = Command::new("puppet")
            .args(["config", "print", "certname", "--section", "main", "--confdir", s(&confdir)])
            .output()
            .unwrap();
        let certname = String::from_utf8_lossy(&printed.stdout).trim().to_string();
        assert_eq!(certname, format!("{id}.web.asg.example.com"));
        let (v, status) = c.check(&c.write(&format!("{id}.attr"), doc.as_bytes()), Some(&certname));
        assert_eq!(status, Some(0), "{v}");
        assert_eq!(v["instance_id"], id);
    }
}

/// A CA whose policy accepts version 3 and trusts the test cloud for `*.web.asg.example.test`,
/// a conductor, and a template bound to the instance signed by it (at most `max_uses`).
fn bound_ca(c: &Cloud, max_uses: &str) -> PathBuf {
    let d = c.dir.path().join("ca");
    ok(&vouch().args(["ca", "init", "--dir", s(&d)]).output().unwrap());
    let p = d.join("policy.toml");
    let text = std::fs::read_to_string(&p).unwrap().replace("versions = [1, 2]\n", "versions = [1, 2, 3]\n");
    std::fs::copy(&c.signer.cert, d.join("cloud.pem")).unwrap();
    let identity = format!(
        "\n[[identity.aws]]\ncertificates = [\"cloud.pem\"]\naccounts = [\"{ACCOUNT}\"]\nregions = [\"{REGION}\"]\n\
         certname_patterns = [\"*.web.asg.example.test\", \"*.db.asg.example.test\"]\n"
    );
    std::fs::write(&p, text + &identity).unwrap();
    let (cert, key) = (d.join("asg.pem"), d.join("asg.key"));
    ok(&vouch()
        .args(["conductor", "new", "asg", "--dir", s(&d), "--cert-out", s(&cert), "--key-out", s(&key)])
        .output()
        .unwrap());
    std::fs::write(d.join("web.yaml"), "classes:\n  - profile::web\nenvironment: production\n").unwrap();
    bound_template(&d, "web", max_uses, "template.yaml");
    d
}

/// Another template of the CA `d`'s conductor, bound to `{instance-id}.GROUP.asg.example.test`,
/// written to `d/out`.
fn bound_template(d: &Path, group: &str, max_uses: &str, out: &str) {
    let (cert, key) = (d.join("asg.pem"), d.join("asg.key"));
    ok(&vouch()
        .args(["--dir", s(d), "conductor", "sign", "--cert", s(&cert), "--key", s(&key)])
        .args(["--classification", s(&d.join("web.yaml")), "--template", "--certname-pattern"])
        .arg(format!("*.{group}.asg.example.test"))
        .args(["--max-uses", max_uses, "--expires-in", "2d", "--out", s(&d.join(out))])
        .arg("--identity-binding")
        .arg(format!("aws:{{instance-id}}.{group}.asg.example.test"))
        .output()
        .unwrap());
}

/// A node's CSR (`vouch csr`, as an agent makes it) from the template's attributes with
/// `document` added as .2.11, as the cloud-init part adds it, under a new key.
fn bound_csr(d: &Path, certname: &str, document: Option<&[u8]>) -> PathBuf {
    bound_csr_of(d, "template.yaml", certname, document)
}

/// [`bound_csr`] from the template in `d/template`.
fn bound_csr_of(d: &Path, template: &str, certname: &str, document: Option<&[u8]>) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut attrs = std::fs::read_to_string(d.join(template)).unwrap();
    if let Some(doc) = document {
        let line =
            format!("custom_attributes:\n  '1.3.6.1.4.1.34380.2.11': '{}'\n", vouch::identity::attribute::encode(doc));
        attrs = attrs.replacen("custom_attributes:\n", &line, 1);
    }
    let file = d.join(format!("attrs-{n}.yaml"));
    std::fs::write(&file, attrs).unwrap();
    let csr = d.join(format!("node-{n}.csr"));
    ok(&vouch()
        .args(["csr", "--certname", certname, "--attributes", s(&file)])
        .args(["--key-out", s(&d.join(format!("node-{n}.key"))), "--csr-out", s(&csr)])
        .output()
        .unwrap());
    csr
}

fn sign(d: &Path, csr: &Path, extra: &[&str]) -> std::process::Output {
    vouch().args(["--dir", s(d)]).args(extra).args(["sign", "--csr", s(csr)]).output().unwrap()
}

/// Refused with `code` as THE code of the refusal (not in another's detail).
fn refused_for(o: &std::process::Output, code: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    let all = format!("{}{}", text(o), String::from_utf8_lossy(&o.stderr));
    assert!(all.contains(&format!("refused [{code}]")), "not {code}: {all}");
    assert!(!all.contains("identity-refused"), "{all}");
}

/// The codes of the audit log's decisions of `certname`, in order.
fn audited_codes(d: &Path, certname: &str) -> Vec<String> {
    let log = std::fs::read_to_string(d.join("audit.log")).unwrap();
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["certname"] == certname && v["event"] == "decision")
        .flat_map(|v| v["reasons"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["code"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_bound_template_gives_each_instance_one_certificate_and_refuses_every_other_use() {
    let c = cloud();
    let d = bound_ca(&c, "3");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let name = |id: &str| format!("{id}.web.asg.example.test");
    let ids = ["i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c"];
    // Before any use: every bad document is refused, for its own reason, and spends nothing.
    let first = doc(ids[0]);
    let other_key = c.other.sign(c.dir.path(), &document(ids[0], ACCOUNT, REGION));
    let other_account = c.signer.sign(c.dir.path(), &document(ids[0], "999988887777", REGION));
    let other_region = c.signer.sign(c.dir.path(), &document(ids[0], ACCOUNT, "us-east-1"));
    for (bytes, code) in [
        (&other_key, "identity-unknown-signer"),
        (&other_account, "identity-account-not-allowed"),
        (&other_region, "identity-region-not-allowed"),
        (&b"not pkcs7".to_vec(), "identity-not-pkcs7"),
        (&vec![0x30; 100_000], "identity-document-too-large"),
    ] {
        refused_for(&sign(&d, &bound_csr(&d, &name(ids[0]), Some(bytes)), &[]), code);
    }
    let mut other_bytes = first.clone();
    let at = other_bytes.windows(ids[0].len()).position(|w| w == ids[0].as_bytes()).unwrap();
    other_bytes[at + 3] = b'1';
    refused_for(&sign(&d, &bound_csr(&d, &name(ids[0]), Some(&other_bytes)), &[]), "identity-digest-mismatch");
    refused_for(&sign(&d, &bound_csr(&d, &name(ids[0]), None), &[]), "identity-document-missing");
    refused_for(
        &sign(&d, &bound_csr(&d, "web-1.web.asg.example.test", Some(&first)), &[]),
        "identity-certname-mismatch",
    );
    let later = vouch::encoding::time::format_rfc3339(time::OffsetDateTime::now_utc() + time::Duration::days(3));
    refused_for(&sign(&d, &bound_csr(&d, &name(ids[0]), Some(&first)), &["--now", &later]), "template-expired");
    // N instances, one certificate each, with the template's classification.
    for id in ids {
        let docu = if id == ids[0] { first.clone() } else { doc(id) };
        let o = sign(&d, &bound_csr(&d, &name(id), Some(&docu)), &[]);
        ok(&o);
        let enc = ok(&vouch().args(["--dir", s(&d), "enc", &name(id)]).output().unwrap());
        assert!(enc.contains("profile::web"), "{enc}");
    }
    // The same document on a second key: the instance already has its certificate (a
    // version 3 refusal at admission holds nothing for that key, so it is not taken as a replay).
    refused_for(&sign(&d, &bound_csr(&d, &name(ids[0]), Some(&first)), &[]), "certificate-exists");
    // Use N+1: a fourth instance of a template for three.
    refused_for(
        &sign(&d, &bound_csr(&d, &name("i-0000000000000000d"), Some(&doc("i-0000000000000000d"))), &[]),
        "template-exhausted",
    );
    // The audit log names each identity reason by its own code too.
    let audited = audited_codes(&d, &name(ids[0]));
    for code in ["identity-unknown-signer", "identity-account-not-allowed", "identity-digest-mismatch"] {
        assert!(audited.iter().any(|c| c == code), "{code} not in {audited:?}");
    }
}

#[test]
fn two_masters_on_one_slapd_enroll_an_instance_id_once_whichever_template() {
    let c = cloud();
    let slapd = initialized_slapd();
    let d1 = bound_ca(&c, "3");
    bound_template(&d1, "db", "1", "db.yaml");
    let d2 = c.dir.path().join("ca2");
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&d2)])
        .args(["--root-cert", s(&d1.join("ca/root_crt.pem")), "--root-key", s(&d1.join("ca/root_key.pem"))])
        .output()
        .unwrap());
    std::fs::copy(d1.join("policy.toml"), d2.join("policy.toml")).unwrap();
    std::fs::copy(d1.join("cloud.pem"), d2.join("cloud.pem")).unwrap();
    let (m1, m2) = (Master::start(&slapd, &d1, "ca1.test"), Master::start(&slapd, &d2, "ca2.test"));
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let (x, y) = ("i-0000000000000000a", "i-0000000000000000b");
    let csr =
        |template: &str, name: &str, docu: &[u8]| std::fs::read(bound_csr_of(&d1, template, name, Some(docu))).unwrap();
    let x_doc = doc(x);
    let x_web = format!("{x}.web.asg.example.test");
    let (_, why, cert) = enroll(&m1, &x_web, &csr("template.yaml", &x_web, &x_doc));
    assert!(cert.is_some(), "{why}\n{}", m1.log());
    // The same instance at the other master, under the other template: refused by its own
    // code, and that template's one use is left for another instance.
    let x_db = format!("{x}.db.asg.example.test");
    let (_, why, cert) = enroll(&m2, &x_db, &csr("db.yaml", &x_db, &x_doc));
    let refused = m2.log().contains(r#""codes":"identity-instance-replayed""#);
    assert!(cert.is_none() && refused, "{why}\n{}", m2.log());
    let y_db = format!("{y}.db.asg.example.test");
    let (_, why, cert) = enroll(&m2, &y_db, &csr("db.yaml", &y_db, &doc(y)));
    assert!(cert.is_some(), "{why}\n{}", m2.log());
    let listed =
        ok(&vouch().envs(store_env(&slapd)).args(["--dir", s(&d1), "list", "--format", "json"]).output().unwrap());
    assert!(listed.contains("identity-instance-replayed"), "{listed}");
}

/// `vouch migrate` carries what bound templates keep in the file journal into the shared
/// store: a template of two uses spent on the file store stays spent (its count copied, then
/// raised by a second migrate), and its instances stay claimed (no other template enrolls
/// them), at a master on the LDAP store. (Fails if migrate copies no template count or
/// instance claim: on the previous version the third use and the other template were granted.)
#[test]
fn migrate_carries_template_counts_and_instance_claims_into_ldap() {
    let slapd = initialized_slapd();
    migrated_templates_stay_spent(&slapd);
}

#[test]
fn migrate_carries_template_counts_and_instance_claims_into_ldap_on_389ds() {
    migrated_templates_stay_spent(&Ds389::store("migrate_templates"));
}

fn migrated_templates_stay_spent(to: &dyn Directory) {
    let c = cloud();
    let d = bound_ca(&c, "2");
    bound_template(&d, "db", "2", "db.yaml");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let db = |id: &str| format!("{id}.db.asg.example.test");
    let (x, y, z) = ("i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c");
    let x_doc = doc(x);
    let env = migrate_env(to);
    let url = to.url(&to.base());
    let migrate = || ok(&vouch().envs(env.clone()).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap());
    // One use, migrated; a second use on the file store, migrated again: the LDAP store's
    // count of one is raised to two (never lowered), the new use record and claim added.
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&x_doc)), &[]));
    let first = migrate();
    for line in [
        "template counts: 1 copied, 0 already there",
        "template use records: 1 copied, 0 already there",
        "instance claims: 1 copied, 0 already there",
    ] {
        assert!(first.contains(line), "{line:?} not in {first}");
    }
    // The file journal is retired by the copy: a use counted there now is refused. Back on
    // the file store (its journal's marker removed, as going back means), a second use is
    // counted there, and the next migrate raises the shared store's count.
    let y_csr = bound_csr(&d, &web(y), Some(&doc(y)));
    let retired = sign(&d, &y_csr, &[]);
    assert!(String::from_utf8_lossy(&retired.stderr).contains("retired"), "{}", text(&retired));
    std::fs::remove_file(d.join("replay/MOVED-TO-SHARED-STORE")).unwrap();
    std::fs::remove_file(d.join("ca/MOVED-TO-SHARED-STORE")).unwrap();
    ok(&sign(&d, &y_csr, &[]));
    let raised = migrate();
    for line in [
        "template counts: 1 copied, 0 already there",
        "template use records: 1 copied, 1 already there",
        "instance claims: 1 copied, 1 already there",
        "from 1 to 2 uses",
    ] {
        assert!(raised.contains(line), "{line:?} not in {raised}");
    }
    let second = migrate();
    for line in [
        "template counts: 0 copied, 1 already there",
        "template use records: 0 copied, 2 already there",
        "instance claims: 0 copied, 2 already there",
    ] {
        assert!(second.contains(line), "{line:?} not in {second}");
    }
    let m = Master::start(to, &d, "ca1.test");
    let csr =
        |template: &str, name: &str, docu: &[u8]| std::fs::read(bound_csr_of(&d, template, name, Some(docu))).unwrap();
    // A third instance: both uses of the template were spent before the move.
    let z_doc = doc(z);
    let (_, why, cert) = enroll(&m, &web(z), &csr("template.yaml", &web(z), &z_doc));
    let exhausted = m.log().contains(r#""codes":"template-exhausted""#);
    assert!(cert.is_none() && exhausted, "a third use of a template of two: {why}\n{}", m.log());
    // An instance enrolled before the move, under the other bound template: refused.
    let (_, why, cert) = enroll(&m, &db(x), &csr("db.yaml", &db(x), &x_doc));
    let replayed = m.log().contains(r#""codes":"identity-instance-replayed""#);
    assert!(cert.is_none() && replayed, "the same instance id under another template: {why}\n{}", m.log());
    // The other template's uses are whole: a new instance enrolls with it.
    let (_, why, cert) = enroll(&m, &db(z), &csr("db.yaml", &db(z), &z_doc));
    assert!(cert.is_some(), "{why}\n{}", m.log());
}

/// Review: `vouch migrate` chooses the template cells the journal still keeps by `--now`, not
/// by the clock, so a run with a later `--now` (as `hardening3.rs` shows a command may be run,
/// the journal's prune refuses it) leaves a spent template's count and its instance's claim
/// behind: the template of one use, spent on the file store, is spent again at a master on
/// LDAP. (Fails while migrate reads the journal by `--now`: the second instance is granted.)
#[test]
fn migrate_with_a_later_now_leaves_no_spent_template_use_behind() {
    let slapd = initialized_slapd();
    let c = cloud();
    let d = bound_ca(&c, "1");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let (x, z) = ("i-0000000000000000a", "i-0000000000000000c");
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&doc(x))), &[]));
    // Three days and two hours on: the template (two days) and its cells' buckets past the prune.
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(74);
    let later = vouch::encoding::time::format_rfc3339(later);
    let env = migrate_env(&slapd);
    let url = slapd.url(&slapd.base());
    let report =
        ok(&vouch().envs(env).args(["--dir", s(&d), "--now", &later, "migrate", "--to", &url]).output().unwrap());
    let m = Master::start(&slapd, &d, "ca1.test");
    let csr = std::fs::read(bound_csr(&d, &web(z), Some(&doc(z)))).unwrap();
    let (_, why, cert) = enroll(&m, &web(z), &csr);
    assert!(
        cert.is_none(),
        "the one use of a template spent on the file store, given again after `migrate --now {later}`: \
         {why}\n{report}"
    );
}

/// `vouch migrate` beside a `vouch serve` running on the same directory's file store is
/// refused (what that serve grants during or after the copy would stay in the file store
/// and be granted again on LDAP: a template of one use gave two certificates). Once run, the
/// file journal is retired: a use counted there afterwards (the hook, `vouch sign`) is
/// refused, not left behind. (Fails while migrate ignores the running serve.)
#[test]
fn migrate_is_refused_beside_a_running_serve_and_retires_the_file_journal() {
    let slapd = initialized_slapd();
    let c = cloud();
    let d = bound_ca(&c, "2");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let (x, y) = ("i-0000000000000000a", "i-0000000000000000b");
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&doc(x))), &[]));
    let env = migrate_env(&slapd);
    let url = slapd.url(&slapd.base());
    let migrate = || vouch().envs(env.clone()).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap();
    let log = c.dir.path().join("serve.log");
    let mut serve = vouch();
    serve.args(["--dir", s(&d), "serve", "--listen", "127.0.0.1:0", "--server-name", "ca1.test"]);
    let (mut child, _, _) = start_serve(&mut serve, &log);
    let refused = migrate();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("vouch serve is running") && err.contains("nothing was copied"), "{err}");
    let done = ok(&migrate());
    assert!(done.contains("template counts: 1 copied"), "{done}");
    // The file store and its journal retired: a certificate or a use granted there now is
    // refused, nothing counted; and so is the hook with a policy of its own naming the journal.
    let after = sign(&d, &bound_csr(&d, &web(y), Some(&doc(y))), &[]);
    assert_ne!(after.status.code(), Some(0), "a use counted in the file store after migrate: {}", text(&after));
    assert!(String::from_utf8_lossy(&after.stderr).contains("retired"), "{}", text(&after));
    assert!(d.join("ca/MOVED-TO-SHARED-STORE").exists(), "the data directory not marked");
}

/// Review: a master CA joining a fleet already on LDAP (`vouch migrate`, as docs/ldap.md
/// describes it) with a template both stores counted: one use in the shared store, another
/// in the file store, migrated. The template of two uses then grants a third instance: the
/// count is kept at the higher of the two (docs/ldap.md says so), not raised by the file
/// store's uses the shared store does not hold. (Fails while migrate keeps the higher count:
/// the third instance is granted.)
#[test]
fn migrate_into_a_store_that_counted_the_template_too_grants_no_use_past_max_uses() {
    let slapd = initialized_slapd();
    let c = cloud();
    let d = bound_ca(&c, "2");
    // Another master CA under the same root, with the same policy, already on LDAP.
    let db = c.dir.path().join("cb");
    let (root_cert, root_key) = (d.join("ca/root_crt.pem"), d.join("ca/root_key.pem"));
    ok(&vouch()
        .args(["ca", "init", "--dir", s(&db), "--root-cert", s(&root_cert), "--root-key", s(&root_key)])
        .output()
        .unwrap());
    std::fs::copy(d.join("policy.toml"), db.join("policy.toml")).unwrap();
    std::fs::copy(d.join("cloud.pem"), db.join("cloud.pem")).unwrap();
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let (x, z, w) = ("i-0000000000000000a", "i-0000000000000000c", "i-0000000000000000d");
    let csr = |id: &str| std::fs::read(bound_csr(&d, &web(id), Some(&doc(id)))).unwrap();
    // One use in the shared store (the other master), one in the file store.
    let other = Master::start(&slapd, &db, "ca2.test");
    let (_, why, cert) = enroll(&other, &web(z), &csr(z));
    assert!(cert.is_some(), "{why}\n{}", other.log());
    drop(other);
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&doc(x))), &[]));
    let env = migrate_env(&slapd);
    let url = slapd.url(&slapd.base());
    let report = ok(&vouch().envs(env).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap());
    let m = Master::start(&slapd, &d, "ca1.test");
    let (_, why, cert) = enroll(&m, &web(w), &csr(w));
    assert!(cert.is_none(), "a third instance of a template of two uses (one spent in each store): {why}\n{report}");
}

#[test]
fn an_instance_id_enrolls_once_across_every_template_and_a_crash_after_its_claim_loses_nothing() {
    let c = cloud();
    let d = bound_ca(&c, "3");
    bound_template(&d, "db", "2", "db.yaml");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let db = |id: &str| format!("{id}.db.asg.example.test");
    let (x, y, z, w) = ("i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c", "i-0000000000000000d");
    let x_doc = doc(x);
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&x_doc)), &[]));
    // The same instance's document under the second template (whose pattern its certname
    // fits): refused for its own reason, by `vouch check` too, and spending none of its use.
    let again = bound_csr_of(&d, "db.yaml", &db(x), Some(&x_doc));
    let checked = vouch().args(["--dir", s(&d), "check", "--csr", s(&again)]).output().unwrap();
    refused_for(&checked, "identity-instance-replayed");
    refused_for(&sign(&d, &again, &[]), "identity-instance-replayed");
    ok(&sign(&d, &bound_csr_of(&d, "db.yaml", &db(y), Some(&doc(y))), &[]));
    // Killed right after the instance claim, before its count: the claim stays this
    // template's, and the retry is counted once.
    let z_doc = doc(z);
    let mut killed = vouch();
    killed.env("VOUCH_TEST_ABORT_AT", "template:instance-claimed");
    let killed = killed.args(["--dir", s(&d), "sign", "--csr", s(&bound_csr(&d, &web(z), Some(&z_doc)))]);
    let killed = killed.output().unwrap();
    assert_eq!(killed.status.code(), None, "not killed at template:instance-claimed: {}", text(&killed));
    let z_db = bound_csr_of(&d, "db.yaml", &db(z), Some(&z_doc));
    refused_for(&sign(&d, &z_db, &[]), "identity-instance-replayed");
    ok(&sign(&d, &bound_csr(&d, &web(z), Some(&z_doc)), &[]));
    // Three uses: x, z and one more; never a fourth.
    ok(&sign(&d, &bound_csr(&d, &web(w), Some(&doc(w))), &[]));
    let v = "i-0000000000000000e";
    refused_for(&sign(&d, &bound_csr(&d, &web(v), Some(&doc(v))), &[]), "template-exhausted");
    // The second template's two uses: the refused x and z spent none of them.
    ok(&sign(&d, &bound_csr_of(&d, "db.yaml", &db(v), Some(&doc(v))), &[]));
    let u = "i-0000000000000000f";
    refused_for(&sign(&d, &bound_csr_of(&d, "db.yaml", &db(u), Some(&doc(u))), &[]), "template-exhausted");
    let claims = std::fs::read_dir(d.join("replay/instances")).unwrap();
    // (`.prune-cursor`: where the prune of the claims resumes.)
    let claims = claims.filter(|e| !e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.')).count();
    assert_eq!(claims, 5, "one instance claim for each of x, y, z, w, v");
}

#[test]
fn a_bound_templates_cloud_config_adds_the_document_before_the_agent_starts() {
    require("cloud-init", "cloud-init");
    let c = cloud();
    let d = bound_ca(&c, "3");
    let out = d.join("user-data");
    ok(&vouch()
        .args(["--dir", s(&d), "conductor", "sign", "--cert", s(&d.join("asg.pem")), "--key", s(&d.join("asg.key"))])
        .args([
            "--classification",
            s(&d.join("web.yaml")),
            "--template",
            "--certname-pattern",
            "*.web.asg.example.test",
        ])
        .args(["--max-uses", "3", "--expires-in", "2d", "--format", "cloud-config", "--out", s(&out)])
        .args(["--identity-binding", "aws:{instance-id}.web.asg.example.test"])
        .output()
        .unwrap());
    let schema = Command::new("cloud-init").args(["schema", "--config-file", s(&out)]).output().unwrap();
    assert!(schema.status.success(), "cloud-init schema: {}", String::from_utf8_lossy(&schema.stderr));
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["puppet"]["start_service"].as_bool(), Some(false));
    assert!(v["puppet"]["csr_attributes"]["custom_attributes"]["1.3.6.1.4.1.34380.2.10"].is_string(), "{v:?}");
    let script = v["runcmd"][0][2].as_str().unwrap();
    assert!(script.contains("/latest/dynamic/instance-identity/rsa2048"), "{script}");
    assert_eq!(v["runcmd"][0][3].as_str(), Some("{instance-id}.web.asg.example.test"));
    assert_eq!(v["runcmd"][1][0].as_str(), Some("puppet"));
}

/// Stops the `vouch serve` this test started.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Puppet agent's confdir for one instance: CA and server at 127.0.0.1:`port` (as
/// `localhost`), its certname still the image's until the cloud-init part sets it.
fn instance_confdir(base: &Path, n: usize, port: u16) -> PathBuf {
    let d = base.join(format!("instance-{n}"));
    std::fs::create_dir_all(d.join("etc")).unwrap();
    let mut conf = format!(
        "[main]\nserver = localhost\nca_server = localhost\nserverport = {port}\ncertname = image.example.test\n"
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
fn real_agents_from_one_user_data_each_get_one_certificate_by_their_identity_document() {
    require("cloud-init", "cloud-init");
    require("puppet", "puppet-agent");
    let c = cloud();
    let d = bound_ca(&c, "2");
    let log = c.dir.path().join("serve.log");
    let (child, _banner, port) = start_serve(&mut serve_cmd(&d), &log);
    let _serve = Serve(child);
    let out =
        run(vouch().args(["identity", "cloud-config", "--binding", "aws:{instance-id}.web.asg.example.test"]), None);
    let user_data = c.write("user-data", ok(&out).as_bytes());
    // Each instance boots from the same user-data: cloud-init's puppet module writes the
    // template's attributes, the runcmd part adds the instance's document and certname, the
    // agent bootstraps.
    let boot = |n: usize, id: &str, signed: &[u8]| -> (PathBuf, std::process::Output) {
        let imds = Metadata::start(document(id, ACCOUNT, REGION), signed);
        let confdir = instance_confdir(c.dir.path(), n, port);
        std::fs::copy(d.join("template.yaml"), confdir.join("csr_attributes.yaml")).unwrap();
        cloud_init(&user_data, &[("VOUCH_IMDS_ENDPOINT", &imds.endpoint), ("VOUCH_PUPPET_CONFDIR", s(&confdir))]);
        let o = Command::new("puppet")
            .args(["ssl", "bootstrap", "--waitforcert", "0", "--confdir", s(&confdir)])
            .output()
            .unwrap();
        (confdir, o)
    };
    let ids = ["i-00000000000000a01", "i-00000000000000a02"];
    let first = c.signer.sign(c.dir.path(), &document(ids[0], ACCOUNT, REGION));
    for (n, id) in ids.iter().enumerate() {
        let signed = if n == 0 { first.clone() } else { c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION)) };
        let (confdir, o) = boot(n, id, &signed);
        let certname = format!("{id}.web.asg.example.test");
        let cert = confdir.parent().unwrap().join(format!("ssl/certs/{certname}.pem"));
        assert!(o.status.success() && cert.exists(), "instance {id}: {}", text(&o));
        let enc = ok(&vouch().args(["--dir", s(&d), "enc", &certname]).output().unwrap());
        assert!(enc.contains("profile::web"), "{enc}");
    }
    // The first instance's document again, from another agent (another key): refused
    // (through `vouch sign`, the same is `attributes-replayed`: the test above).
    let (confdir, o) = boot(10, ids[0], &first);
    assert!(!o.status.success(), "a copied document was granted: {}", text(&o));
    assert!(!confdir.parent().unwrap().join(format!("ssl/certs/{}.web.asg.example.test.pem", ids[0])).exists());
    // A third instance of a template for two: refused.
    let third = "i-00000000000000a03";
    let (confdir, o) = boot(3, third, &c.signer.sign(c.dir.path(), &document(third, ACCOUNT, REGION)));
    assert!(!o.status.success(), "use N+1 was granted: {}", text(&o));
    assert!(!confdir.parent().unwrap().join(format!("ssl/certs/{third}.web.asg.example.test.pem")).exists());
    let serve_log = std::fs::read_to_string(&log).unwrap();
    assert!(serve_log.contains("\"codes\":\"template-exhausted\""), "{serve_log}");
    // Two grants, no more: the copy was refused before any decision (its certname has a
    // certificate), the fourth by the template's count.
    assert_eq!(serve_log.matches("\"verdict\":\"granted\"").count(), 2, "{serve_log}");
}

/// A burst of instances of one group racing for the last uses of its bound template
/// (an autoscaling group's scale-out, through the hook), then each instance left without a
/// certificate sent again, one at a time, under the group's next template (what an
/// operator signs when one fills up): each enrolls, since a loser gives back the instance
/// claim it took before its count found the template full.
#[test]
fn instances_that_lost_the_race_for_a_full_template_enroll_with_the_next_one() {
    let c = cloud();
    let d = bound_ca(&c, "2");
    lost_race_then_next_template(&c, &d, &[]);
}

/// The same on a shared LDAP store: a loser gives its claim back by swapping its holder
/// value to `released`, and the next template's use takes it over by the same kind of swap.
#[test]
fn on_ldap_instances_that_lost_the_race_for_a_full_template_enroll_with_the_next_one() {
    let c = cloud();
    let slapd = initialized_slapd();
    let d = bound_ca(&c, "2");
    lost_race_then_next_template(&c, &d, &store_env(&slapd));
}

/// Twelve instances through the hook at once (one process per CSR, as Puppet Server runs
/// it, no store lock held) against `d`'s bound template of 2 uses; then each loser, through
/// the hook, under a second template: each enrolls.
fn lost_race_then_next_template(c: &Cloud, d: &Path, env: &[(String, String)]) {
    bound_template(d, "db", "50", "db.yaml");
    let ids: Vec<String> = (0..12).map(|i| format!("i-00000000000000f{i:02x}")).collect();
    let docs: Vec<Vec<u8>> = ids.iter().map(|id| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION))).collect();
    let hook = |name: &str, csr: &[u8]| {
        let mut cmd = vouch();
        cmd.envs(env.iter().map(|(k, v)| (k, v))).args(["--dir", s(d), "autosign", name]);
        run(&mut cmd, Some(csr))
    };
    let csrs: Vec<(String, Vec<u8>)> = ids
        .iter()
        .zip(&docs)
        .map(|(id, docu)| {
            let name = format!("{id}.web.asg.example.test");
            let csr = std::fs::read(bound_csr(d, &name, Some(docu))).unwrap();
            (name, csr)
        })
        .collect();
    let barrier = std::sync::Barrier::new(csrs.len());
    let won: Vec<bool> = std::thread::scope(|sc| {
        let hs: Vec<_> = csrs
            .iter()
            .map(|(name, csr)| {
                let (barrier, hook) = (&barrier, &hook);
                sc.spawn(move || {
                    barrier.wait();
                    hook(name, csr).status.success()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(won.iter().filter(|w| **w).count(), 2, "{won:?}");
    let mut locked_out = Vec::new();
    for ((id, docu), won) in ids.iter().zip(&docs).zip(&won) {
        if *won {
            continue;
        }
        let name = format!("{id}.db.asg.example.test");
        let o = hook(&name, &std::fs::read(bound_csr_of(d, "db.yaml", &name, Some(docu))).unwrap());
        if !o.status.success() {
            locked_out.push(format!("{id}: {}", text(&o).lines().next().unwrap_or("")));
        }
    }
    assert!(locked_out.is_empty(), "{} of 10 instances locked out: {locked_out:#?}", locked_out.len());
}

/// A FIFO planted in the journal's `instances/` directory (anyone who can write the
/// journal), under any name: the prune of the claims reads only regular files, never
/// blocking, so the hook (and `vouch sign`, holding the store's lock) answers.
#[test]
fn a_fifo_in_the_instance_claims_never_hangs_the_hook() {
    let c = cloud();
    let d = bound_ca(&c, "50");
    let id = "i-0000000000000c001";
    let docu = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    ok(&sign(&d, &bound_csr(&d, &format!("{id}.web.asg.example.test"), Some(&docu)), &[]));
    let instances = d.join("replay/instances");
    assert!(instances.is_dir(), "{}", instances.display());
    let o = Command::new("mkfifo").arg(instances.join("planted")).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // The next bound request prunes (its stamp removed: the first one's is recent).
    let _ = std::fs::remove_file(instances.join(".prune-cursor"));
    let other = "i-0000000000000c002";
    let name = format!("{other}.web.asg.example.test");
    let csr =
        std::fs::read(bound_csr(&d, &name, Some(&c.signer.sign(c.dir.path(), &document(other, ACCOUNT, REGION)))))
            .unwrap();
    let mut cmd = vouch();
    cmd.args(["--dir", s(&d), "autosign", &name]).stdin(std::process::Stdio::piped());
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&csr).unwrap();
    }
    let status = common::processes::wait_within(
        &mut child,
        std::time::Duration::from_secs(60),
        "the hook, with a FIFO in replay/instances/",
    );
    assert!(status.success(), "{:?}", child.wait_with_output());
    assert!(instances.join("planted").exists());
}

/// A SignedData naming the test cloud's certificate as its signer (issuer and serial),
/// SHA-256, and a signature algorithm OID of `arcs` arcs (each 127): refused before any
/// signature is checked, by a node that only has the user-data.
fn document_with_a_long_algorithm(c: &Cloud, arcs: usize) -> Vec<u8> {
    use vouch::encoding::der;
    let pem = std::fs::read(&c.signer.cert).unwrap();
    let (_, cert_der) = vouch::encoding::pem::find(&pem, &["CERTIFICATE"]).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
    let issuer = cert.tbs_certificate.issuer.as_raw().to_vec();
    let serial = der::tlv(0x02, cert.tbs_certificate.raw_serial());
    let sha256 = der::sequence(&[&der::oid(&[2, 16, 840, 1, 101, 3, 4, 2, 1])]);
    let mut long = vec![1u64, 2];
    long.extend(std::iter::repeat_n(127u64, arcs));
    let long = der::sequence(&[&der::oid(&long)]);
    let json = document("i-0000000000000aaaa", ACCOUNT, REGION);
    let encap = der::sequence(&[
        &der::oid(&[1, 2, 840, 113549, 1, 7, 1]),
        &der::constructed(0xa0, &[&der::octet_string(json.as_bytes())]),
    ]);
    let signer = der::sequence(&[
        &der::small_integer(1),
        &der::sequence(&[&issuer, &serial]),
        &sha256,
        &long,
        &der::octet_string(&[0u8; 256]),
    ]);
    let signed = der::sequence(&[
        &der::small_integer(1),
        &der::set_of(vec![sha256.clone()]),
        &encap,
        &der::set_of(vec![signer]),
    ]);
    der::sequence(&[&der::oid(&[1, 2, 840, 113549, 1, 7, 2]), &der::constructed(0xa0, &[&signed])])
}

/// The identity refusal's text is bounded as it was in `identity-refused`'s detail
/// (capped): a node with the user-data only, sending a document whose signature algorithm
/// is a long OID, gets a refusal (answer, log, audit line, pending request) of a bounded size.
#[test]
fn an_identity_refusal_from_an_unsigned_document_is_bounded() {
    let c = cloud();
    let d = bound_ca(&c, "5");
    let docu = document_with_a_long_algorithm(&c, 7000);
    assert!(docu.len() < 8192, "{}", docu.len());
    let name = "i-0000000000000aaaa.web.asg.example.test";
    let o = sign(&d, &bound_csr(&d, name, Some(&docu)), &[]);
    refused_for(&o, "identity-algorithm-unsupported");
    let log = std::fs::read_to_string(d.join("audit.log")).unwrap();
    let line = log.lines().rfind(|l| l.contains(name) && l.contains("decision")).unwrap();
    assert!(
        line.len() < 2048,
        "an audit line of {} bytes for one refusal (stderr {} bytes)",
        line.len(),
        o.stderr.len()
    );
}

/// The journal's `instances/` reached through a symbolic link (moved to another disk, as
/// the journal directory itself may be): claims are written and pruned through it, and
/// every hook answers as before.
#[test]
fn instance_claims_reached_through_a_link_do_not_fail_every_hook() {
    let c = cloud();
    let d = bound_ca(&c, "50");
    let id = "i-0000000000000c101";
    let docu = c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    ok(&sign(&d, &bound_csr(&d, &format!("{id}.web.asg.example.test"), Some(&docu)), &[]));
    let moved = c.dir.path().join("instances-on-another-disk");
    std::fs::rename(d.join("replay/instances"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, d.join("replay/instances")).unwrap();
    let _ = std::fs::remove_file(moved.join(".prune-cursor"));
    let other = "i-0000000000000c102";
    let name = format!("{other}.web.asg.example.test");
    let docu = c.signer.sign(c.dir.path(), &document(other, ACCOUNT, REGION));
    let csr = std::fs::read(bound_csr(&d, &name, Some(&docu))).unwrap();
    let o = run(vouch().args(["--dir", s(&d), "autosign", &name]), Some(&csr));
    assert!(o.status.success(), "{}", text(&o));
    // And the instance already claimed is still refused under the other template.
    bound_template(&d, "db", "5", "db.yaml");
    let db = format!("{id}.db.asg.example.test");
    let o = run(
        vouch().args(["--dir", s(&d), "autosign", &db]),
        Some(
            &std::fs::read(bound_csr_of(
                &d,
                "db.yaml",
                &db,
                Some(&c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION))),
            ))
            .unwrap(),
        ),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// Review: a `vouch migrate` cut off between its template use records and its template counts
/// (the LDAP connection lost; the directory already marked), a use of the same template made
/// by a master on the LDAP store meanwhile (its count absent there: counted from zero), and
/// migrate run again to finish, as its error says. The re-run takes the LDAP count for this
/// store's own copied before (its use record was there before this run: the interrupted run
/// put it there) and keeps the lower count: the template of two uses, spent on the file store
/// once and on LDAP once, grants a third instance. (Fails while a use record copied without
/// its count is taken for the count copied.)
#[test]
fn migrate_rerun_after_a_cut_between_use_records_and_counts_grants_no_use_past_max_uses() {
    let slapd = initialized_slapd();
    let c = cloud();
    let d = bound_ca(&c, "2");
    let doc = |id: &str| c.signer.sign(c.dir.path(), &document(id, ACCOUNT, REGION));
    let web = |id: &str| format!("{id}.web.asg.example.test");
    let (x, y, z) = ("i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c");
    ok(&sign(&d, &bound_csr(&d, &web(x), Some(&doc(x))), &[]));
    let env = migrate_env(&slapd);
    let base = slapd.base();
    // Cut at the first add of a template count (`count:`), never sent.
    let cut = common::ldap_proxy::cutting_proxy(slapd.port(), |msg| {
        common::ldap_proxy::request_dn(msg, 0x68).is_some() && msg.windows(6).any(|w| w == b"count:")
    });
    let via = format!("ldap://127.0.0.1:{cut}/{}", base.replace(',', "%2C").replace('=', "%3D"));
    let first = vouch().envs(env.clone()).args(["--dir", s(&d), "migrate", "--to", &via]).output().unwrap();
    assert!(!first.status.success(), "the cut migrate succeeded: {}", text(&first));
    // A master on LDAP: a use of the template (its count not there yet).
    {
        let m = Master::start(&slapd, &d, "ca1.test");
        let (_, why, cert) = enroll(&m, &web(y), &std::fs::read(bound_csr(&d, &web(y), Some(&doc(y)))).unwrap());
        assert!(cert.is_some(), "the second use (of two) refused: {why}\n{}", m.log());
    }
    let url = slapd.url(&base);
    let again = ok(&vouch().envs(env).args(["--dir", s(&d), "migrate", "--to", &url]).output().unwrap());
    let m = Master::start(&slapd, &d, "ca1.test");
    let (_, why, cert) = enroll(&m, &web(z), &std::fs::read(bound_csr(&d, &web(z), Some(&doc(z)))).unwrap());
    assert!(
        cert.is_none(),
        "a third use of a template of two (one on the file store, one on LDAP): {why}\nfirst run: {}\nre-run: {again}",
        text(&first)
    );
}

/// A private slapd with the store's containers (`vouch ldap init --create-base`).
fn initialized_slapd() -> Slapd {
    let slapd = Slapd::start(&slapd_opts());
    let mut init = vouch();
    init.envs(store_env(&slapd)).args(["--dir", s(slapd.dir()), "ldap", "init", "--create-base"]);
    ok(&init.output().unwrap());
    slapd
}

/// `d`'s bind settings without `VOUCH_STORE`: `vouch migrate` reads the file store and names
/// the shared one with `--to`.
fn migrate_env(d: &dyn Directory) -> Vec<(String, String)> {
    store_env(d).into_iter().filter(|(k, _)| k != "VOUCH_STORE").collect()
}
