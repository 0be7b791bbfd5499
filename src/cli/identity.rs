//! `vouch identity check` and `vouch identity cloud-config`: an instance identity document
//! verified as the decision verifies it, and the node's cloud-init part that fetches one.

use super::args::{IdentityCommand, OutFormat};
use super::output::say;
use super::{find_policy, now, read_file, Cli, EXIT_OK, EXIT_REFUSED};
use crate::error::Error;
use crate::identity::{attribute, cloud_init, Binding, IdentityRefusal, Providers};
use crate::policy::Policy;

pub(super) fn run(cli: &Cli, c: &IdentityCommand) -> Result<i32, Error> {
    match c {
        IdentityCommand::Check { binding, document, certname, policy, format } => {
            let policy = Policy::load(&find_policy(policy.as_deref(), cli.dir.as_deref())?)?;
            let bytes = read_file(document, crate::files::input::Kind::Attributes)?;
            let now = now(cli)?;
            let outcome = text(&bytes).and_then(|doc| {
                let v = Providers { aws: &policy.identity }.verify_text(binding, &doc, now)?;
                certname.as_deref().map_or(Ok(()), |c| v.require_certname(c))?;
                Ok(v)
            });
            report(&outcome, *format)?;
            Ok(if outcome.is_ok() { EXIT_OK } else { EXIT_REFUSED })
        }
        IdentityCommand::CloudConfig { binding } => {
            let b = Binding::parse(binding).map_err(|r| Error::Usage { detail: r.to_string() })?;
            say(&format!("#cloud-config\n{}", cloud_init::runcmd(b.template)))?;
            Ok(EXIT_OK)
        }
    }
}

/// The document as attribute .2.11 carries it: DER is encoded, base64 text (as the
/// metadata service serves it, lines and all) taken as it is.
fn text(bytes: &[u8]) -> Result<String, IdentityRefusal> {
    if bytes.first() == Some(&0x30) {
        if bytes.len() > crate::identity::MAX_DOCUMENT_BYTES {
            let max = crate::identity::MAX_DOCUMENT_BYTES;
            return Err(IdentityRefusal::DocumentTooLarge { size: bytes.len(), max });
        }
        return Ok(attribute::encode(bytes));
    }
    std::str::from_utf8(bytes).map(str::to_string).map_err(|_| IdentityRefusal::NotBase64)
}

fn report(
    outcome: &Result<crate::identity::VerifiedInstance, IdentityRefusal>,
    format: OutFormat,
) -> Result<(), Error> {
    let line = match (outcome, format) {
        (Ok(v), OutFormat::Json) => serde_json::json!({
            "verified": true, "instance_id": v.instance_id, "certname": v.certname,
            "account": v.account, "region": v.region,
        })
        .to_string(),
        (Err(r), OutFormat::Json) => {
            serde_json::json!({"verified": false, "code": r.code(), "message": r.to_string(), "hint": r.hint()})
                .to_string()
        }
        (Ok(v), OutFormat::Text) => format!(
            "verified instance {} (account {}, region {}): certname {}",
            v.instance_id, v.account, v.region, v.certname
        ),
        (Err(r), OutFormat::Text) => format!("refused [{}]: {}\n  hint: {}", r.code(), r, r.hint()),
    };
    say(&format!("{line}\n"))
}
