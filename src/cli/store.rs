//! `vouch ldap`, `vouch override`, `vouch migrate`: the store's own commands.

use super::args::{LdapCommand, OutFormat, OverrideCommand};
use super::output::say;
use super::{dir, now, read_file, Cli, EXIT_OK};
use crate::authority::Authority;
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
        LdapCommand::Schema { ldif } => {
            let text =
                if *ldif { crate::store::ldap::schema::ldif() } else { crate::store::ldap::schema::slapd_conf() };
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
        }
    }
    Ok(EXIT_OK)
}

pub(super) fn override_cmd(cli: &Cli, c: &OverrideCommand) -> Result<i32, Error> {
    let auth = Authority::open_with(&dir(cli)?, &cli.store_url())?;
    let now = now(cli)?;
    match c {
        OverrideCommand::Set { certname, classification, expect_revision } => {
            let bytes = read_file(classification, crate::files::input::Kind::Classification)?;
            let text = String::from_utf8(bytes).map_err(|_| Error::Classification {
                source: classification.display().to_string(),
                error: crate::vouching::classification::ClassificationError::NotUtf8,
            })?;
            let o = auth.set_override(certname, Some(&text), *expect_revision, now)?;
            sayln!("override of {certname} set: revision {}", o.revision)?;
        }
        OverrideCommand::Clear { certname, expect_revision } => {
            let current = auth.get_override(certname)?;
            if expect_revision.is_none() && current.as_ref().is_none_or(|o| o.classification.is_none()) {
                sayln!("{certname}: no override to clear; nothing was written")?;
                return Ok(EXIT_OK);
            }
            let o = auth.set_override(certname, None, *expect_revision, now)?;
            sayln!("override of {certname} cleared: revision {}", o.revision)?;
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
    let auth = Authority::open(&dir(cli)?)?;
    let mut target = cli.store_url();
    target.url = to.to_string();
    let report = auth.migrate_to(&target, now(cli)?)?;
    say(&report)?;
    Ok(EXIT_OK)
}
