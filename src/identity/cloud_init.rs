//! The node's side of a template bound to the instance: a cloud-config `runcmd` part that,
//! at boot, after cloud-init's `puppet` module wrote `csr_attributes.yaml` and before the
//! agent asks for its certificate, reads the metadata service (IMDSv2: a PUT for a token,
//! then GETs with it), adds the identity document as attribute .2.11 beside the
//! template's signed attributes, and sets the agent's certname to the one the template
//! derives from the instance id.
//!
//! Two environment variables, for tests and unusual images (docs/operator-guide.md):
//! `VOUCH_IMDS_ENDPOINT` (default `http://169.254.169.254`) and `VOUCH_PUPPET_CONFDIR`
//! (default `/etc/puppetlabs/puppet`: `csr_attributes.yaml` there, and `puppet config set
//! --confdir` on it). It needs /usr/bin/python3 with its yaml module (cloud-init's own) and `puppet`.

use super::attribute::OID;
use super::instance::INSTANCE_ID;

/// The script (python3, run by cloud-init): argument 1 is the certname template.
const SCRIPT: &str = r#"import base64, os, re, subprocess, sys, json, urllib.request, yaml
base = os.environ.get("VOUCH_IMDS_ENDPOINT", "http://169.254.169.254").rstrip("/")
confdir = os.environ.get("VOUCH_PUPPET_CONFDIR", "/etc/puppetlabs/puppet")
def get(path, headers, method="GET"):
    req = urllib.request.Request(base + path, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read(65536).decode("ascii")
token = get("/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, "PUT").strip()
auth = {"X-aws-ec2-metadata-token": token}
signed = "".join(get("/latest/dynamic/instance-identity/rsa2048", auth).split())
base64.b64decode(signed, validate=True)
instance = json.loads(get("/latest/dynamic/instance-identity/document", auth))["instanceId"]
if not isinstance(instance, str) or not re.fullmatch(r"i-([0-9a-f]{8}|[0-9a-f]{17})", instance):
    sys.exit("vouch: the metadata service's instanceId %r is not i- and 8 or 17 hex digits: certname not set" % (str(instance)[:64],))
certname = sys.argv[1].replace("__INSTANCE_ID__", instance, 1)
path = os.path.join(confdir, "csr_attributes.yaml")
try:
    with open(path) as f:
        attrs = yaml.safe_load(f) or {}
except FileNotFoundError:
    attrs = {}
attrs.setdefault("custom_attributes", {})["__OID__"] = signed
tmp = path + ".vouch-tmp"
with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640), "w") as f:
    yaml.safe_dump(attrs, f, default_flow_style=False, width=1 << 20)
os.replace(tmp, path)
puppet = os.environ.get("VOUCH_PUPPET", "puppet")
subprocess.run([puppet, "config", "set", "certname", certname, "--section", "main", "--confdir", confdir], check=True)
print("vouch: identity document for " + instance + " added; certname " + certname)
"#;

/// The script with the attribute's OID and the placeholder filled in.
pub fn script() -> String {
    SCRIPT.replace("__OID__", OID).replace("__INSTANCE_ID__", INSTANCE_ID)
}

/// The `runcmd:` key of a cloud-config document, for a template whose certname template
/// is `template` (the binding after `aws:`). Appended to a `#cloud-config` document that
/// has no `runcmd` of its own; its `puppet` module must not start the agent (`exec: false`):
/// the agent runs after this part, from the template's own later `runcmd` entries
/// ([`runcmd_entry`] for those who merge).
pub fn runcmd(template: &str) -> String {
    format!("runcmd:\n{}", runcmd_entry(template))
}

/// One `runcmd` list entry (YAML, indented two spaces) running the script.
pub fn runcmd_entry(template: &str) -> String {
    let mut out = String::from("  - - /usr/bin/python3\n    - -c\n    - |\n");
    for line in script().lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str("      ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("    - ");
    out.push_str(&yaml_quoted(template));
    out.push('\n');
    out
}

/// A YAML double-quoted scalar.
fn yaml_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The agent started once the document is in place (the `puppet` module must not start it).
const START_AGENT: &str = "  - [puppet, resource, service, puppet, ensure=running, enable=true]\n";

/// A bound template's `#cloud-config` (as `vouch conductor sign --format cloud-config`
/// renders it, with its `puppet:` section) made ready for the instance: cloud-init's `puppet`
/// module writes `csr_attributes.yaml` and neither runs nor starts the agent; then `runcmd`
/// adds the identity document and the derived certname, and starts the agent.
pub fn bound_cloud_config(rendered: &str, template: &str) -> String {
    let puppet = rendered.replacen("\npuppet:\n", "\npuppet:\n  exec: false\n  start_service: false\n", 1);
    format!("{puppet}{}{START_AGENT}", runcmd(template))
}
