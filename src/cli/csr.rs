//! `vouch csr`: a key and a CSR carrying attributes, as a Puppet agent makes them.

use super::args::CsrArgs;
use super::output::{preflight, write_pair, Replace};
use super::{read_file, EXIT_OK};
use crate::encoding::csr;
use crate::error::Error;
use crate::issuance::keys::KeyType;
use crate::vouching::attrs::{self};

pub(super) fn make(a: &CsrArgs) -> Result<i32, Error> {
    let certname = a.certname.to_lowercase();
    let text = String::from_utf8(read_file(&a.attributes, crate::files::input::Kind::Attributes)?)
        .map_err(|_| Error::Attributes { path: a.attributes.clone(), detail: "not UTF-8".into() })?;
    let parsed = attrs::parse_file(&text).map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    let spec = parsed.csr_spec(&certname).map_err(|detail| Error::Attributes { path: a.attributes.clone(), detail })?;
    preflight(&[(&a.key_out, Replace::Never), (&a.csr_out, Replace::Never)])?;
    let key = KeyType::from(a.key_type).generate().map_err(|e| Error::Crypto { detail: e.to_string() })?;
    let der = csr::build(&spec, &key).map_err(|e| Error::Crypto { detail: e.to_string() })?;
    write_pair(
        &a.key_out,
        &key.serialize_pem(),
        &a.csr_out,
        &crate::encoding::pem::encode("CERTIFICATE REQUEST", &der),
    )?;
    Ok(EXIT_OK)
}
