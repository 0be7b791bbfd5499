//! Puppet Server mode: `vouch autosign` and `vouch enc`.

use super::args::AutosignArgs;
use super::output::{print_refusals, say, write_out};
use super::{dir, find_policy, now, Cli, EXIT_OK, EXIT_REFUSED};
use crate::authority::Authority;
use crate::error::Error;
use crate::issuance::bootstrap::DataDir;
use crate::policy::{self, Policy};
use std::io::Read;
use std::path::Path;

pub(super) fn autosign(cli: &Cli, a: &AutosignArgs) -> Result<i32, Error> {
    // Puppet Server writes the whole PUT body and closes stdin: read it first, so the
    // server never meets a closed pipe for a request vouch judges. At most 1 MiB + 1 byte
    // is read and nothing more (an endless stdin must not keep the hook alive): a larger
    // body is refused at once.
    let mut body = Vec::new();
    let limit = crate::files::input::CSR_MAX;
    std::io::stdin().lock().take(limit.saturating_add(1)).read_to_end(&mut body).map_err(|source| Error::Io {
        path: "stdin".into(),
        op: "read",
        source,
    })?;
    let too_large = u64::try_from(body.len()).unwrap_or(u64::MAX) > limit;
    super::refuse_retired_beside(cli)?;
    let policy_path = find_policy(a.policy.as_deref(), cli.dir.as_deref())?;
    let policy = Policy::load(&policy_path)?;
    let now = now(cli)?;
    // Beside a `vouch serve` in the same DIR: its service's and administrators' names are never a
    // node's; `localhost` and the loopback addresses never are, with or without DIR.
    let reserved = cli
        .dir
        .as_deref()
        .map(|d| crate::authority::ReservedNames::load(&DataDir::new(d)))
        .unwrap_or_else(crate::authority::ReservedNames::service_defaults);
    // The shared store (one connection: the fleet's root CRL, then the replay journal).
    let url = cli.store_url();
    let shared = url.ldap(None)?.map(std::sync::Arc::new);
    // Beside a CA (--dir): its own root CRL counts, as in the CA's decisions; with a shared
    // store, the fleet's root CRL first, where it is newer than the one here.
    if let Some(d) = cli.dir.as_deref() {
        let d = DataDir::new(d);
        if let Some(s) = &shared {
            crate::authority::take_shared_root_crl(&d, s.as_ref());
        }
        crate::authority::count_own_crl(&d, &policy);
    }
    let request = if too_large { None } else { Some(body.as_slice()) };
    let journal = match shared {
        Some(s) => Some(s as std::sync::Arc<dyn crate::store::ReplayJournal>),
        None => crate::store::open_journal(&url, policy.replay_journal.as_ref(), true)?,
    };
    let outcome = crate::hook::autosign::judge(&policy, journal.as_deref(), &reserved, &a.certname, request, now)?;
    match outcome {
        Ok(g) => {
            // A grant that cannot be reported is not a grant: exit 2 (Puppet Server does not sign).
            sayln!(
                "vouch: granted {} (vouched by {}, attributes expire {})",
                g.certname(),
                g.conductor().subject,
                crate::encoding::time::format_rfc3339(g.attributes_expiry())
            )?;
            Ok(EXIT_OK)
        }
        Err(r) => {
            print_refusals(&r, &mut std::io::stderr());
            Ok(EXIT_REFUSED)
        }
    }
}

/// How a certificate's classification extension is read: which OID, how large at most.
struct ClassificationSettings {
    mirror_oid: Vec<u64>,
    max_bytes: usize,
}

/// The classification settings for reading a certificate outside vouch's store:
/// an explicit --policy (which must load), else the --dir CA's policy if it loads,
/// else vouch's defaults.
fn classification_settings(cli: &Cli, explicit: Option<&Path>) -> Result<ClassificationSettings, Error> {
    if let Some(p) = explicit {
        let p = Policy::load(p)?;
        return Ok(ClassificationSettings { mirror_oid: p.mirror_oid, max_bytes: p.classification_max_bytes });
    }
    Ok(match cli.dir.as_ref().map(|d| Policy::load(&DataDir::new(d).policy())) {
        Some(Ok(p)) => ClassificationSettings { mirror_oid: p.mirror_oid, max_bytes: p.classification_max_bytes },
        _ => ClassificationSettings {
            mirror_oid: policy::DEFAULT_MIRROR_OID.to_vec(),
            max_bytes: crate::vouching::classification::DEFAULT_MAX_BYTES,
        },
    })
}

pub(super) fn enc(
    cli: &Cli,
    certname: Option<&str>,
    cert: Option<&Path>,
    remote: &super::args::EncRemoteArgs,
    puppet_cadir: Option<&Path>,
    policy_path: Option<&Path>,
) -> Result<i32, Error> {
    let now = now(cli)?;
    let classification =
        match (certname, cert, puppet_cadir) {
            (Some(name), None, Some(cadir)) => {
                let der = crate::hook::puppet_cadir::verified_signed_cert(cadir, name, now)?;
                let settings = classification_settings(cli, policy_path)?;
                crate::authority::classification_from_cert(&der, &settings.mirror_oid, settings.max_bytes, name)?
            }
            (Some(name), None, None) => {
                // A compile server: the CA is vouch serve at --ca-url (or the environment's, or
                // the config file's).
                let settings = classification_settings(cli, policy_path)?;
                if let Some(s) = super::compile::enc_settings(remote, settings.mirror_oid, settings.max_bytes)? {
                    return super::compile::enc_remote(cli, &s, name);
                }
                let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
                auth.maintain(now)?;
                // A listed name whose certificate file is missing is said so (stderr only: the
                // exit code, 2, and the empty stdout Puppet Server reads stay those of any name
                // without a classification). Only that: an error of the listing's walk (a
                // shared store gone meanwhile: 75) leaves the not-found error, and its exit, as
                // they were.
                let (c, source) = auth.enc_with_source(name, now).map_err(|e| match e {
                    Error::NotFound { certname } => {
                        let not_found = Error::NotFound { certname: certname.clone() };
                        match super::certs::no_current(cli, &auth, name, not_found) {
                            missing @ Error::CurrentMissing { .. } => missing,
                            _ => Error::NotFound { certname },
                        }
                    }
                    e => e,
                })?;
                return finish_enc(&crate::authority::enc_json_with_source(&c, source)?);
            }
            (name, Some(path), None) => {
                let (der, name) = super::compile::verified_cert_file(cli, path, name, remote)?;
                let settings = classification_settings(cli, policy_path)?;
                crate::authority::classification_from_cert(&der, &settings.mirror_oid, settings.max_bytes, &name)?
            }
            _ => return Err(Error::Usage {
                detail:
                    "give a CERTNAME (with --ca-url on a compile server), --cert FILE or --puppet-cadir DIR CERTNAME"
                        .into(),
            }),
        };
    let json = crate::authority::enc_json_with_source(&classification, crate::authority::Source::Certificate).map_err(
        |e| Error::NotValid {
            certname: certname.unwrap_or("").to_string(),
            detail: format!("its classification is unusable: {e}"),
        },
    )?;
    finish_enc(&json)
}

fn finish_enc(json: &str) -> Result<i32, Error> {
    write_out(None, json, 0o644)?;
    Ok(EXIT_OK)
}
