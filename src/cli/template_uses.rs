//! `vouch template uses TEMPLATE-FILE`: how many of a template's uses (signature version 3)
//! are spent and how many are left, read from the count the CA keeps for the whole fleet (the
//! data directory's replay journal, or the shared store with `--store`): the same cells the
//! CA counts in ([`crate::store::templates`]), read as `vouch check` reads them, never written.

use super::args::{OutFormat, TemplateCommand};
use super::output::say;
use super::{dir, now, read_file, Cli, EXIT_OK};
use crate::authority::Authority;
use crate::encoding::oids;
use crate::error::Error;
use crate::store::templates::{Counted, TemplateUse};
use crate::vouching::attrs::{self, CsrAttributes};
use crate::vouching::template as tpl;
use std::path::Path;
use time::OffsetDateTime;

/// The instance key the count is read for: never a real instance's (those are
/// `v3-instance:` and a digest), so the count reads as it stands, with no use of its own.
const NO_INSTANCE: &str = "vouch-template-uses";

/// A template's values as its file carries them: what its count is keyed by and bounded by.
struct TemplateFile {
    pattern: String,
    max_uses: u64,
    expiry: OffsetDateTime,
    template_key: String,
    bound: bool,
}

pub(super) fn run(cli: &Cli, c: &TemplateCommand) -> Result<i32, Error> {
    let TemplateCommand::Uses { file, format } = c;
    let t = read_template(file)?;
    let now = now(cli)?;
    // A look: with --store, the CA is not registered in the shared store and the directory is not
    // marked as moved (as every other command opening it there does).
    let auth = Authority::open_for_cli_as(&dir(cli)?, &cli.store_url(), crate::authority::Opening::Unregistered)?;
    let journal = auth.journal(true).ok_or(Error::Mistake(crate::error::Mistake::TemplateUsesWithoutJournal))?;
    let u = TemplateUse {
        template_key: t.template_key.clone(),
        instance_key: NO_INSTANCE.into(),
        max_uses: t.max_uses,
        expiry: t.expiry,
        instance_claim: None,
    };
    let used = match journal.peek_use(&u)? {
        // The use a new instance would take: one past those spent.
        Counted::Use { number, .. } => number.saturating_sub(1),
        Counted::Exhausted { uses } => uses,
        // Never: no instance claim is asked.
        Counted::InstanceReplayed => 0,
    };
    let left = t.max_uses.saturating_sub(used);
    let expiry = crate::encoding::time::format_rfc3339(t.expiry);
    let expired = t.expiry <= now;
    match format {
        OutFormat::Json => say(&format!(
            "{}\n",
            serde_json::json!({
                "pattern": t.pattern, "max_uses": t.max_uses, "used": used, "left": left, "expires": expiry,
                "expired": expired, "bound": t.bound, "store": journal.describe(),
            })
        ))?,
        OutFormat::Text => {
            let state = if expired {
                format!(
                    "expired {expiry}: no node enrolls with it any more; its count is pruned with the journal's \
                     expired entries, about a day later, and reads 0 then"
                )
            } else {
                format!("expires {expiry}")
            };
            say(&format!(
                "template {} ({}; {state}): {used} of {} uses spent, {left} left ({})\n",
                t.pattern,
                if t.bound { "bound to the instance" } else { "unbound" },
                t.max_uses,
                journal.describe()
            ))?
        }
    }
    Ok(EXIT_OK)
}

/// Reads a template's attributes file (any format `conductor sign` writes).
fn read_template(path: &Path) -> Result<TemplateFile, Error> {
    let bad = |detail: String| Error::Attributes { path: path.to_path_buf(), detail };
    let text = String::from_utf8(read_file(path, crate::files::input::Kind::Attributes)?)
        .map_err(|_| bad("not UTF-8".into()))?;
    let parsed = attrs::parse_file(&text).map_err(bad)?;
    template_values(&parsed).map_err(bad)
}

/// The values of a template (signature version 3) among the attributes `a`.
fn template_values(a: &CsrAttributes) -> Result<TemplateFile, String> {
    let get = |oid: &[u64]| {
        let name = oids::dotted(oid);
        a.custom_attributes.get(&name).ok_or_else(|| {
            format!("no attribute {name}: not a template's attributes (vouch conductor sign --template writes them)")
        })
    };
    let version = get(oids::ATTR_VERSION)?;
    if version != "3" {
        return Err(format!(
            "signature version {version:?}, not 3: not a template (attributes of version 1 and 2 are good once; \
             `vouch check` says whether they were used)"
        ));
    }
    let max_uses = tpl::parse_max_uses(get(oids::ATTR_MAX_USES)?, tpl::MAX_USES)
        .map_err(|e| format!("its max uses (attribute .2.9) {e}"))?;
    let expiry = crate::encoding::time::parse_rfc3339(get(oids::ATTR_EXPIRY)?)
        .map_err(|e| format!("its expiry (attribute .2.3) is not RFC 3339: {e}"))?;
    let conductor = attrs::decode_conductor_cert(get(oids::ATTR_CONDUCTOR)?)
        .map_err(|e| format!("its conductor certificate (attribute .2.4): {e}"))?;
    Ok(TemplateFile {
        pattern: get(oids::ATTR_TEMPLATE_PATTERN)?.clone(),
        max_uses,
        expiry,
        template_key: tpl::template_key(&conductor, get(oids::ATTR_NONCE)?),
        bound: a.custom_attributes.get(&oids::dotted(oids::ATTR_IDENTITY_BINDING)).is_some_and(|b| !b.is_empty()),
    })
}
