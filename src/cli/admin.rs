//! `vouch admin new`.

use super::args::KeyTypeArg;
use super::output::{after, preflight, say, stored_cert, write_file, Replace};
use super::{dir, now, Cli, EXIT_OK};
use crate::authority::Authority;
use crate::error::Error;
use std::path::Path;

pub(super) fn new(
    cli: &Cli,
    name: &String,
    cert_out: &Path,
    key_out: &Path,
    key_type: &KeyTypeArg,
) -> Result<i32, Error> {
    preflight(&[(cert_out, Replace::Never), (key_out, Replace::NewFile)])?;
    let auth = Authority::open_for_cli(&dir(cli)?, &cli.store_url())?;
    let (issued, key) = auth.issue_local(
        &crate::authority::LocalSpec {
            certname: name,
            role: crate::issuance::certificate::LocalRole::Admin,
            dns_names: &[],
            ip_addresses: &[],
            key_type: (*key_type).into(),
            replace: false,
        },
        now(cli)?,
    )?;
    let stored = stored_cert(&auth, name);
    write_file(key_out, &key, 0o600, Replace::NewFile).map_err(after(format!(
        "the administrator certificate {name} was issued (serial {}) and is in the store ({stored}), \
             but its private key is lost: revoke it with `vouch revoke {name}` and issue a new one",
        issued.serial_hex
    )))?;
    write_file(cert_out, &issued.pem, 0o644, Replace::Never).map_err(after(format!(
        "the administrator certificate {name} was issued (serial {}) and is in the store: \
             copy {stored}; its private key is in {}",
        issued.serial_hex,
        key_out.display()
    )))?;
    sayln!(
        "Administrator {name}: certificate {} key {} (serial {}; revoke with 'vouch revoke {name}')",
        cert_out.display(),
        key_out.display(),
        issued.serial_hex
    )?;
    Ok(EXIT_OK)
}
