//! `vouch ca init`.

use super::args::KeyTypeArg;
use super::output::say;
use super::{dir, now, Cli, EXIT_OK};
use crate::error::Error;
use crate::issuance::bootstrap::{self};

pub(super) fn init(cli: &Cli, key_type: &KeyTypeArg) -> Result<i32, Error> {
    let d = dir(cli)?;
    let r = bootstrap::init(&d, (*key_type).into(), now(cli)?)?;
    sayln!("Created a {} root CA and master CA in {}", r.key_type.name(), r.ca_dir.display())?;
    sayln!("Root CA fingerprint (SHA-256 of the root certificate): {}", r.root_fingerprint)?;
    sayln!("Policy: {}", r.policy.display())?;
    sayln!("Next: vouch conductor new NAME --dir {} --cert-out NAME.pem --key-out NAME.key", d.dir.display())?;
    Ok(EXIT_OK)
}
