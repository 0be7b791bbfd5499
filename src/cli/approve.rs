//! `vouch approve CERTNAME`: an administrator, on the CA's machine, approves a node no
//! conductor launched ([`Authority::approve`]); audited with the local user's name.

use super::args::ApproveArgs;
use super::output::say;
use super::{dir, now, Cli, EXIT_OK};
use crate::authority::{Approval, Authority};
use crate::error::Error;

pub(super) fn approve(cli: &Cli, a: &ApproveArgs) -> Result<i32, Error> {
    let ttl = match &a.ttl {
        None => None,
        Some(t) => Some(crate::policy::parse_duration(t).ok_or_else(|| Error::Usage {
            detail: format!("--ttl: {}", crate::policy::duration_problem(t, "3600s, 12h, 30d, 1y")),
        })?),
    };
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let by = local_user();
    let approval = Approval { certname: &a.certname, by: &by, ttl, fingerprint: a.fingerprint.as_deref() };
    let issued = auth.approve(&approval, now(cli)?)?;
    say_done!(
        "approved {}: issued serial {} valid until {}, with the classification set for it (`vouch override show {}`)",
        issued.certname,
        issued.serial_hex,
        crate::encoding::time::format_rfc3339(issued.not_after),
        issued.certname
    )?;
    Ok(EXIT_OK)
}

/// Who approves on this machine, for the audit line: `local:NAME(uid N)`.
fn local_user() -> String {
    let uid = crate::files::trust::euid();
    let name = std::env::var("SUDO_USER").or_else(|_| std::env::var("USER")).unwrap_or_default();
    format!("local:{name}(uid {uid})")
}
