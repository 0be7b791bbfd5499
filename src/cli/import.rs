//! `vouch import --puppet-cadir DIR`.

use super::args::ImportArgs;
use super::output::{note, say, say_staging};
use super::{dir, now, Cli, EXIT_OK};
use crate::error::Error;

pub(super) fn import(cli: &Cli, a: &ImportArgs) -> Result<i32, Error> {
    let url = cli.store_url();
    if !url.is_files() {
        // An import writes the file store; the shared store is filled from it by `vouch migrate`.
        return Err(Error::Mistake(crate::error::Mistake::ImportIntoSharedStore { url: url.url }));
    }
    let d = dir(cli)?;
    let r = crate::import::import_puppet_cadir(&d, &a.puppet_cadir, now(cli)?)?;
    say_staging(&r.staging);
    sayln!("Imported the Puppet CA {} from {} into {}", r.ca_subject, a.puppet_cadir.display(), r.ca_dir.display())?;
    sayln!(
        "{} certificates from signed/, {} revocations from its CRL, {} inventory lines; Puppet's next serial was 0x{}, \
         its CRL number {} (vouch's serials are random 128-bit numbers, its CRL numbers above Puppet's)",
        r.certificates,
        r.revocations,
        r.inventory_lines,
        r.puppet_next_serial,
        r.puppet_crl_number
    )?;
    sayln!("Root CA fingerprint (SHA-256 of the root certificate): {}", r.root_fingerprint)?;
    sayln!("Policy: {} (trusts conductors of that root)", r.policy.display())?;
    if r.requests_left > 0 {
        note(&format!(
            "vouch: note: {} pending requests in {}/requests were not imported: their agents ask again \
             (`puppet ssl bootstrap`), with attributes a conductor signed, or an administrator signs them",
            r.requests_left,
            a.puppet_cadir.display()
        ));
    }
    for name in &r.cli_auth {
        note(&format!(
            "vouch: note: {name}'s certificate carries pp_cli_auth (Puppet Server's own): vouch keeps it as an \
             administrator's certificate, and `vouch serve --server-name {name}` refuses to take its name while it is \
             valid; once that Puppet Server runs no more, `vouch revoke {name}` frees the name"
        ));
    }
    for k in &r.exposed_keys {
        let how = match k.other_owner {
            None => format!("was readable or writable beyond its owner (mode {:04o})", k.mode),
            Some(uid) => format!(
                "belonged to another user ({}, uid {uid}: neither root nor the user importing it; mode {:04o}), \
                 who could read it whatever its mode",
                crate::files::trust::user_name(uid),
                k.mode
            ),
        };
        note(&format!(
            "vouch: warning: {}/{} {how}: vouch's copy is 0600, but anyone who could read that file may hold the \
             CA's key; find who could, and if it may have left your hands, make a new CA (`vouch ca init`) and move \
             the fleet to it rather than keep this one",
            a.puppet_cadir.display(),
            k.file
        ));
    }
    if let Some(e) = &r.crl_error {
        note(&format!("vouch: warning: the CA is imported but its first CRL was not written ({e}): run `vouch crl`"));
    }
    let dir = d.dir.display();
    if r.root_key {
        sayln!(
            "Next: vouch serve --dir {dir} --listen ADDRESS:8140 --server-name NAME (the name and port Puppet Server \
             had); conductors: vouch conductor new NAME --dir {dir} --cert-out NAME.pem --key-out NAME.key"
        )?;
    } else {
        sayln!(
            "The root key is not in the Puppet CA directory{}: this data directory cannot make conductors. Make a \
             conductor root elsewhere (vouch --dir CONDUCTOR_DIR ca init), add its ca/root_crt.pem to \
             trusted_roots in {}, and make conductors there (vouch conductor new NAME --dir CONDUCTOR_DIR)",
            if r.self_signed { " (a self-signed CA: its key is the CA's own, kept for issuing)" } else { "" },
            r.policy.display()
        )?;
        sayln!("Next: vouch serve --dir {dir} --listen ADDRESS:8140 --server-name NAME (the name and port Puppet Server had)")?;
    }
    Ok(EXIT_OK)
}
