//! `vouch ca init`.

use super::args::KeyTypeArg;
use super::output::{note, say, say_staging};
use super::{dir, now, Cli, EXIT_OK};
use crate::error::Error;
use crate::issuance::bootstrap::{self, ExistingRoot};
use std::path::Path;

/// `root`: `--root-cert` and `--root-key` (clap has them both or neither).
pub(super) fn init(cli: &Cli, key_type: &KeyTypeArg, root: Option<(&Path, &Path)>) -> Result<i32, Error> {
    let d = dir(cli)?;
    let Some((cert, key)) = root else {
        let r = bootstrap::init(&d, (*key_type).into(), now(cli)?)?;
        say_staging(&r.staging);
        sayln!(
            "Created {} {} root CA and master CA in {}",
            r.key_type.article(),
            r.key_type.name(),
            r.ca_dir.display()
        )?;
        sayln!("Root CA fingerprint (SHA-256 of the root certificate): {}", r.root_fingerprint)?;
        sayln!("Policy: {}", r.policy.display())?;
        sayln!("Next: vouch conductor new NAME --dir {} --cert-out NAME.pem --key-out NAME.key", d.dir.display())?;
        return Ok(EXIT_OK);
    };
    let r = bootstrap::init_under_root(&d, (*key_type).into(), ExistingRoot { cert, key }, now(cli)?)?;
    say_staging(&r.staging);
    if r.master_capped {
        note(&format!(
            "vouch: note: the master CA's 15 years reach past the root CA's notAfter; it ends with the root, {}",
            crate::encoding::time::format_rfc3339(r.master_not_after)
        ));
    }
    sayln!(
        "Created {} {} master CA in {} under the existing root {}",
        r.key_type.article(),
        r.key_type.name(),
        d.dir.display(),
        r.root_fingerprint
    )?;
    sayln!("The root key stays in {}: it was read, not copied into {}", key.display(), d.dir.display())?;
    sayln!("Policy: {} (trusts the conductors of that root)", r.policy.display())?;
    // The root's own data directory, when the key is its ca/root_key.pem.
    let root_dir = bootstrap::root_key_ca_dir(key)
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| "ROOT_DIR".to_string(), |p| p.display().to_string());
    sayln!(
        "Next: conductors come from the root: vouch conductor new NAME --dir {root_dir} --cert-out NAME.pem \
         --key-out NAME.key (or use the root's existing ones); then vouch sign --dir {dir} --csr FILE, \
         vouch serve --dir {dir}, or the autosign hook with VOUCH_DIR={dir}",
        dir = d.dir.display()
    )?;
    Ok(EXIT_OK)
}
