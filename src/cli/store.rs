//! `vouch ldap`, `vouch override`, `vouch migrate`: the store's own commands.

use super::args::{LdapCommand, OutFormat, OverrideCommand, SchemaFormat, StoreCommand, VerifyFormat};
use super::output::say;
use super::{dir, now, read_file, Cli, EXIT_OK};
use crate::authority::{Authority, Opening};
use crate::error::Error;
use crate::store::StoreUrl;

impl Cli {
    /// The store the global options name (`--store`, `--ldap-*`, `--store-replica`).
    pub fn store_url(&self) -> StoreUrl {
        StoreUrl {
            url: self.store.clone().unwrap_or_default(),
            bind_dn: self.ldap_bind_dn.clone(),
            password_file: self.ldap_password_file.clone(),
            ldap_ca: self.ldap_ca.clone(),
            replicas: self.store_replica.clone(),
            confirm_replicas: self.store_confirm_replicas,
        }
    }

    /// The LDAP store --store names (an error for the file store).
    fn ldap_store(&self, what: &str) -> Result<crate::store::ldap::LdapStore, Error> {
        self.store_url()
            .ldap(None)?
            .ok_or_else(|| Error::StoreUrl { detail: format!("'{what}' needs an LDAP --store URL (or VOUCH_STORE)") })
    }
}

pub(super) fn ldap(cli: &Cli, c: &LdapCommand) -> Result<i32, Error> {
    match c {
        LdapCommand::Schema { ldif, format, backend } => {
            let text = match (format, ldif) {
                (Some(SchemaFormat::CnConfig), _) | (None, true) => crate::store::ldap::schema::ldif(),
                (Some(SchemaFormat::Ds389), _) => {
                    // A task name of its own per run (a task entry stays a while after it ends).
                    let task =
                        crate::store::ldap::schema::ds389_task_name(now(cli)?.unix_timestamp(), std::process::id());
                    crate::store::ldap::schema::ds389(backend, &task)
                }
                (Some(SchemaFormat::SlapdConf), _) | (None, false) => crate::store::ldap::schema::slapd_conf(),
            };
            say(&text)?;
        }
        LdapCommand::Init { create_base } => {
            let store = cli.ldap_store("vouch ldap init")?;
            let created = store.init(*create_base)?;
            if created.is_empty() {
                sayln!("{}: every container exists already; nothing to do", crate::store::Store::describe(&store))?;
            }
            for dn in created {
                sayln!("created {dn}")?;
            }
            if !store.mark_no_legacy()? {
                sayln!(
                    "the replay journal holds entries (vouch migrate may have copied some under a legacy key, which \
                     cannot be told apart): masters keep reading the legacy key (one more LDAP round trip per claim)"
                )?;
            }
        }
    }
    Ok(EXIT_OK)
}

pub(super) fn store_cmd(cli: &Cli, c: &StoreCommand) -> Result<i32, Error> {
    match c {
        StoreCommand::Verify { format } => verify(cli, *format),
    }
}

/// Where `vouch store verify` keeps its findings until the lock is released.
trait Spool: std::io::Read + std::io::Write + std::io::Seek {}
impl<T: std::io::Read + std::io::Write + std::io::Seek> Spool for T {}

/// `vouch store verify`: each finding as it is found (stdout), then the summary.
fn verify(cli: &Cli, format: VerifyFormat) -> Result<i32, Error> {
    use std::io::Write;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    let mut out = std::io::BufWriter::new(new_spool());
    let mut failed: Option<std::io::Error> = None;
    let mut kinds: Vec<(&'static str, &'static str)> = Vec::new();
    let verified = auth.verify_store(now, &mut |finding| {
        if !kinds.iter().any(|(k, _)| *k == finding.kind()) {
            kinds.push((finding.kind(), finding.hint()));
        }
        let line = finding_line(&finding, format);
        if failed.is_none() {
            failed = writeln!(out, "{line}").err();
        }
    })?;
    let spool_err = |source| Error::Io { path: std::env::temp_dir(), op: "write a temporary file in", source };
    if let Some(e) = failed {
        return Err(spool_err(e));
    }
    let mut spool = out.into_inner().map_err(|e| spool_err(e.into_error()))?;
    {
        use std::io::Seek;
        spool.seek(std::io::SeekFrom::Start(0)).map_err(spool_err)?;
    }
    let write_err = super::output::stdout_error;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    std::io::copy(&mut spool, &mut out).map_err(write_err)?;
    write_summary(&mut out, format, &auth, &verified, &kinds).map_err(write_err)?;
    out.flush().map_err(write_err)?;
    Ok(if verified.findings == 0 { EXIT_OK } else { super::EXIT_REFUSED })
}

/// Where the findings wait while the store's lock is held.
fn new_spool() -> Box<dyn Spool> {
    // The findings go to an unnamed temporary file while the store's lock is held, and to
    // stdout after it is released: a reader that stalls (`| less` left open) never holds up
    // issuance.
    // Without a usable temporary directory ($TMPDIR), in memory instead: a whole store is
    // checked whatever the environment.
    match tempfile::tempfile() {
        Ok(f) => Box::new(f),
        Err(_) => Box::new(std::io::Cursor::new(Vec::new())),
    }
}

/// One finding as `vouch store verify` writes it, in `format`.
fn finding_line(finding: &crate::store::verify::Finding, format: VerifyFormat) -> String {
    match format {
        // One line per finding: a control character from the store (a planted record's
        // certname) is shown escaped, never written.
        VerifyFormat::Text => format!("{}: {finding}", finding.kind())
            .chars()
            .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
            .collect(),
        VerifyFormat::Jsonl => {
            let mut v = serde_json::to_value(finding).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("message".into(), finding.to_string().into());
                o.insert("hint".into(), finding.hint().into());
            }
            v.to_string()
        }
    }
}

/// `vouch store verify`'s summary after the findings: what was checked, and each kind of
/// finding's hint (text); one `summary` object (JSON lines).
fn write_summary(
    out: &mut impl std::io::Write,
    format: VerifyFormat,
    auth: &Authority,
    verified: &crate::authority::Verified,
    kinds: &[(&'static str, &'static str)],
) -> std::io::Result<()> {
    match format {
        VerifyFormat::Text => {
            let found = match verified.findings {
                0 => "no findings".to_string(),
                1 => "1 finding".to_string(),
                n => format!("{n} findings"),
            };
            writeln!(
                out,
                "{}: {} current certificates, {} inventory lines, {} revocations checked: {found}",
                super::output::sentence_start(&auth.store.describe()),
                verified.certificates,
                verified.inventory,
                verified.revocations
            )?;
            for (kind, hint) in kinds {
                writeln!(out, "  {kind}: {hint}")?;
            }
        }
        VerifyFormat::Jsonl => {
            let mut summary = serde_json::json!(verified);
            if let Some(m) = summary.as_object_mut() {
                m.insert("store".into(), serde_json::Value::String(auth.store.describe()));
            }
            writeln!(out, "{}", serde_json::json!({ "summary": summary }))?;
        }
    }
    Ok(())
}

pub(super) fn override_cmd(cli: &Cli, c: &OverrideCommand) -> Result<i32, Error> {
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    match c {
        OverrideCommand::Set { certname, classification, expect_revision } => {
            let bytes = read_file(classification, crate::files::input::Kind::Classification)?;
            let text = String::from_utf8(bytes).map_err(|_| Error::Classification {
                source: classification.display().to_string(),
                error: crate::vouching::classification::ClassificationError::NotUtf8,
            })?;
            let o = auth.set_override(certname, Some(&text), *expect_revision, now)?;
            say_done!("override of {certname} set: revision {}", o.revision)?;
        }
        OverrideCommand::Clear { certname, expect_revision } => {
            let current = auth.get_override(certname)?;
            if expect_revision.is_none() && current.as_ref().is_none_or(|o| o.classification.is_none()) {
                sayln!("{certname}: no override to clear; nothing was written")?;
                return Ok(EXIT_OK);
            }
            let o = auth.set_override(certname, None, *expect_revision, now)?;
            say_done!("override of {certname} cleared: revision {}", o.revision)?;
        }
        OverrideCommand::Show { certname, format } => {
            let o = auth.get_override(certname)?;
            match format {
                OutFormat::Json => {
                    let v = match &o {
                        Some(o) => serde_json::to_value(o).map_err(|e| Error::Usage { detail: e.to_string() })?,
                        None => serde_json::json!({ "certname": certname, "classification": null, "revision": 0 }),
                    };
                    sayln!("{v}")?;
                }
                OutFormat::Text => match o {
                    Some(crate::store::Override { classification: Some(c), revision, time, .. }) => {
                        sayln!("{certname}: override at revision {revision} (set {time}):")?;
                        say(&c)?;
                        if !c.ends_with('\n') {
                            say("\n")?;
                        }
                    }
                    Some(o) => sayln!(
                        "{certname}: no override (cleared at revision {}, {}); its certificate's classification applies",
                        o.revision,
                        o.time
                    )?,
                    None => sayln!("{certname}: no override (revision 0); its certificate's classification applies")?,
                },
            }
        }
    }
    Ok(EXIT_OK)
}

pub(super) fn migrate(cli: &Cli, to: &str) -> Result<i32, Error> {
    if !cli.store_url().is_files() {
        return Err(Error::StoreUrl {
            detail: "vouch migrate copies the data directory's file store: leave --store unset (or 'files') and \
                     name the LDAP store with --to"
                .into(),
        });
    }
    let data = dir(cli)?;
    // No vouch serve beside the copy, nor started during it (its lock held to the end).
    let migrate = crate::error::ServingHolder::Migrate;
    crate::issuance::serving_lock::hold_serving_lock(&data.dir, migrate).map_err(|e| match e {
        Error::ServeRunning { dir, holder, who } => {
            Error::Mistake(crate::error::Mistake::MigrateWhileServing { dir, holder, who })
        }
        other => other,
    })?;
    let auth = Authority::open_for_cli_as(&data, &StoreUrl::default(), Opening::MigrateSource)?;
    let mut target = cli.store_url();
    target.url = to.to_string();
    let report = auth.migrate_to(&target, now(cli)?).map_err(|e| match e {
        Error::StoreUnavailable { detail } => {
            Error::Mistake(crate::error::Mistake::MigrateTargetUnavailable { url: to.to_string(), detail })
        }
        other => other,
    })?;
    say(&report)?;
    Ok(EXIT_OK)
}
