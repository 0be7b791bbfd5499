//! `vouch sign`, `check`, `list`, `revoke`, `clean`, `crl`, `renew`: the CA's certificates.

use super::args::{CheckArgs, OutFormat, SignArgs};
use super::output::{after, note, preflight, print_refusals, say, stored_cert, write_out, Replace};
use super::{dir, find_policy, now, read_file, Cli, EXIT_OK, EXIT_REFUSED};
use crate::authority::{Authority, IssueOutcome, ListEntry};
use crate::decision::{self, Request};
use crate::encoding::csr;
use crate::error::Error;
use crate::policy::Policy;
use std::path::{Path, PathBuf};

pub(super) fn sign(cli: &Cli, a: &SignArgs) -> Result<i32, Error> {
    preflight(&[(a.out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    let csr = read_file(&a.csr, crate::files::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &csr, a.certname.as_deref())?;
    match auth.issue(&csr, Some(&certname), now(cli)?)? {
        IssueOutcome::Issued(i) => {
            write_out(a.out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(format!(
                "the certificate for {} was issued (serial {}) and is in the store: `vouch list --all`, {}",
                i.certname,
                i.serial_hex,
                stored_cert(&auth, &i.certname)
            )))?;
            note(&format!(
                "vouch: issued {} serial {} valid until {}",
                i.certname,
                i.serial_hex,
                crate::encoding::time::format_rfc3339(i.not_after)
            ));
            Ok(EXIT_OK)
        }
        IssueOutcome::Refused(r) => {
            print_refusals(&r, &mut std::io::stderr());
            Ok(EXIT_REFUSED)
        }
    }
}

/// The revocation reasons `vouch revoke --reason` accepts, kebab-case and as RFC 5280 names them.
pub const REVOCATION_REASONS: [(&str, &str); 7] = [
    ("unspecified", "unspecified"),
    ("key-compromise", "keyCompromise"),
    ("ca-compromise", "caCompromise"),
    ("affiliation-changed", "affiliationChanged"),
    ("superseded", "superseded"),
    ("cessation-of-operation", "cessationOfOperation"),
    ("privilege-withdrawn", "privilegeWithdrawn"),
];

/// The certname `sign` and `check` judge: `--certname`, else the request's CN. A file holding no
/// certificate request at all (garbage, empty, another kind of file) is an input error (exit 2)
/// either way; a request that is there but defective is the decision's to refuse (exit 1).
pub(super) fn certname_for(path: &Path, body: &[u8], explicit: Option<&str>) -> Result<String, Error> {
    if let Some(c) = explicit {
        return match csr::parse(body) {
            Err(e @ csr::CsrError::NotFound { .. }) => {
                Err(Error::Csr { path: path.to_path_buf(), detail: e.to_string() })
            }
            _ => Ok(c.to_string()),
        };
    }
    let hint = "vouch takes the certname from the request's CN; give --certname NAME to see every reason it is refused";
    let parsed =
        csr::parse(body).map_err(|e| Error::Csr { path: path.to_path_buf(), detail: format!("{e}; {hint}") })?;
    parsed
        .common_names
        .first()
        .cloned()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::Csr { path: path.to_path_buf(), detail: format!("its subject has no CN; {hint}") })
}

pub(super) fn check(cli: &Cli, a: &CheckArgs) -> Result<i32, Error> {
    let policy_path = find_policy(a.policy.as_deref(), cli.dir.as_deref())?;
    let policy = Policy::load(&policy_path)?;
    let body = read_file(&a.csr, crate::files::input::Kind::Csr)?;
    let certname = certname_for(&a.csr, &body, a.certname.as_deref())?;
    let now = now(cli)?;
    // The names every way of signing keeps from nodes (the service's and administrators' in
    // DIR, localhost and the loopback addresses always), as `vouch sign` and the hook judge them.
    let reserved = cli
        .dir
        .as_deref()
        .map(|d| crate::authority::ReservedNames::load(&crate::issuance::bootstrap::DataDir::new(d)))
        .unwrap_or_else(crate::authority::ReservedNames::service_defaults);
    let outcome = match reserved.refusal(&certname, crate::encoding::csr::parse(&body).ok().as_ref()) {
        Some(reason) => Err(decision::Refused { reasons: vec![reason], conductor: None, held: None }),
        None => decision::decide(&Request { csr: &body, certname: &certname }, &policy, now),
    };
    // One-time use as the journal stands (read, never written): used attributes are refused.
    let journal = crate::store::open_journal(&cli.store_url(), policy.replay_journal.as_ref(), true)?;
    let outcome = crate::authority::peek_replay(journal.as_deref(), outcome, &certname)?;
    match a.format {
        OutFormat::Json => sayln!("{}", crate::store::audit::decision_line(now, &certname, outcome.as_ref(), "check"))?,
        OutFormat::Text => match &outcome {
            Ok(g) => sayln!(
                "granted {} (vouched by {}, attributes expire {})\n{}",
                g.certname(),
                g.conductor().subject,
                crate::encoding::time::format_rfc3339(g.attributes_expiry()),
                g.classification()
                    .to_enc_json()
                    .map_err(|error| Error::Classification { source: a.csr.display().to_string(), error })?
            )?,
            Err(r) => {
                let mut text = Vec::new();
                print_refusals(r, &mut text);
                say(&String::from_utf8_lossy(&text))?
            }
        },
    }
    Ok(if outcome.is_ok() { EXIT_OK } else { EXIT_REFUSED })
}

/// The RFC 5280 name of a revocation reason given kebab-case (key-compromise) or as
/// RFC 5280 spells it (keyCompromise); any other is a usage error listing both spellings.
pub(super) fn canonical_reason(r: &str) -> Result<&'static str, Error> {
    REVOCATION_REASONS
        .iter()
        .find(|(kebab, rfc)| r == *kebab || r == *rfc || r.eq_ignore_ascii_case(rfc) || r.replace('_', "-") == *kebab)
        .map(|(_, rfc)| *rfc)
        .ok_or_else(|| Error::Usage {
            detail: format!(
                "unknown revocation reason {r:?}; one of {}",
                REVOCATION_REASONS.iter().map(|(k, rfc)| format!("{k} ({rfc})")).collect::<Vec<_>>().join(", ")
            ),
        })
}

pub(super) fn render_list(entries: &[ListEntry], all: bool) -> String {
    let mut out = String::new();
    for (title, state) in [
        ("Requested Certificates:", "requested"),
        ("Signed Certificates:", "signed"),
        ("Revoked Certificates:", "revoked"),
    ] {
        if !all && state != "requested" {
            continue;
        }
        let group: Vec<&ListEntry> = entries.iter().filter(|e| e.state == state).collect();
        out.push_str(title);
        out.push('\n');
        if group.is_empty() {
            out.push_str("    (none)\n");
        }
        for e in group {
            match state {
                "requested" => out.push_str(&format!("    {}  ({})\n", e.name, e.reasons.join("; "))),
                _ => out.push_str(&format!(
                    "    {}  serial {}  expires {}\n",
                    e.name,
                    e.serial.as_deref().unwrap_or("?"),
                    e.not_after.as_deref().unwrap_or("?")
                )),
            }
        }
    }
    out
}

pub(super) fn list(cli: &Cli, all: &bool, format: &OutFormat) -> Result<i32, Error> {
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    auth.maintain(now(cli)?)?;
    let entries = auth.list(*all)?;
    let text = match format {
        OutFormat::Json => {
            serde_json::to_string_pretty(&entries).map_err(|e| Error::Usage { detail: e.to_string() })? + "\n"
        }
        OutFormat::Text => render_list(&entries, *all),
    };
    write_out(None, &text, 0o644)?;
    Ok(EXIT_OK)
}

pub(super) fn revoke(cli: &Cli, certname: &str, reason: &str) -> Result<i32, Error> {
    let reason = canonical_reason(reason)?;
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    sayln!("{}", auth.revoke(certname, reason, false, now(cli)?)?)?;
    Ok(EXIT_OK)
}

pub(super) fn clean(cli: &Cli, certname: &String) -> Result<i32, Error> {
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    // Like revoke and renew, a name the CA knows nothing about is an error (exit 2).
    let pending = auth.list(false)?.iter().any(|e| e.name == *certname);
    if !pending && auth.certificate(certname)?.is_none() {
        return Err(Error::NotFound { certname: certname.clone() });
    }
    sayln!("{}", auth.revoke(certname, "cessationOfOperation", true, now(cli)?)?)?;
    Ok(EXIT_OK)
}

pub(super) fn crl(cli: &Cli, out: &Option<PathBuf>) -> Result<i32, Error> {
    preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    let pem = auth.crl(now(cli)?)?;
    write_out(out.as_deref(), &pem, 0o644)?;
    Ok(EXIT_OK)
}

pub(super) fn renew(cli: &Cli, certname: &str, out: &Option<PathBuf>) -> Result<i32, Error> {
    preflight(&[(out.as_deref().unwrap_or(Path::new("-")), Replace::Yes)])?;
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    auth.maintain(now)?;
    let i = auth.renew(certname, now)?;
    write_out(out.as_deref(), &format!("{}{}", i.pem, auth.chain_pem()), 0o644).map_err(after(format!(
        "{} was renewed: the new certificate (serial {}) is in the store and the old one is revoked \
             (superseded): `vouch list --all`, {}",
        i.certname,
        i.serial_hex,
        stored_cert(&auth, &i.certname)
    )))?;
    note(&format!(
        "vouch: renewed {} serial {} valid until {}",
        i.certname,
        i.serial_hex,
        crate::encoding::time::format_rfc3339(i.not_after)
    ));
    Ok(EXIT_OK)
}
