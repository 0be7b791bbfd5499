//! The certname rules: what a node may be called (a certname becomes a file name in the
//! store, so these rules also keep every name inside its directory).

/// What is wrong with a certname.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CertnameProblem {
    Empty,
    TooLong,
    Uppercase,
    Wildcard,
    TrailingDot,
    EmptyLabel,
    LabelTooLong,
    LabelHyphen,
    InvalidCharacter(char),
}

impl std::fmt::Display for CertnameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertnameProblem::Empty => f.write_str("it is empty"),
            CertnameProblem::TooLong => write!(f, "it is longer than {MAX_CERTNAME} characters"),
            CertnameProblem::Uppercase => f.write_str("it has uppercase letters (Puppet certnames are lowercase)"),
            CertnameProblem::Wildcard => f.write_str("it is a wildcard"),
            CertnameProblem::TrailingDot => f.write_str("it ends with a dot"),
            CertnameProblem::EmptyLabel => f.write_str("it has an empty label (two dots in a row, or a leading dot)"),
            CertnameProblem::LabelTooLong => f.write_str("a label is longer than 63 characters"),
            CertnameProblem::LabelHyphen => f.write_str("a label starts or ends with a hyphen"),
            CertnameProblem::InvalidCharacter(c) => write!(f, "it contains the character {c:?}"),
        }
    }
}

impl std::error::Error for CertnameProblem {}

/// Checks a certname against host-name rules as Puppet uses them: lowercase
/// labels of letters, digits, `-` and `_`, separated by dots.
/// The longest certname: a DNS name may have 253 characters, but the store names files
/// (and their temporary copies, `.NAME.pem.tmp-PID-TIME-N`) after it, and a file name
/// has at most 255 bytes; 200 leaves room, and no real host name comes near it.
pub const MAX_CERTNAME: usize = 200;

pub fn check_certname(name: &str) -> Result<(), CertnameProblem> {
    if name.is_empty() {
        return Err(CertnameProblem::Empty);
    }
    if name.len() > MAX_CERTNAME {
        return Err(CertnameProblem::TooLong);
    }
    if name.contains('*') {
        return Err(CertnameProblem::Wildcard);
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))) {
        return Err(CertnameProblem::InvalidCharacter(c));
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(CertnameProblem::Uppercase);
    }
    if name.ends_with('.') {
        return Err(CertnameProblem::TrailingDot);
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(CertnameProblem::EmptyLabel);
        }
        if label.len() > 63 {
            return Err(CertnameProblem::LabelTooLong);
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(CertnameProblem::LabelHyphen);
        }
    }
    Ok(())
}

/// Certnames Puppet reserves, which no node may be issued. Puppet 7 reserves exactly one:
/// - puppet-agent 7.23 `lib/puppet/defaults.rb`, setting `certname`: "The special value `ca`
///   is reserved, and can't be used as the certname for a normal node" (`Puppet::SSL::CA_NAME`,
///   `lib/puppet/ssl.rb`; `ssl/certificate_request.rb` swaps it for `ca_name` in a CSR);
/// - puppetserver 7.9 `puppetlabs/puppetserver/certificate_authority.clj`, `get-certificate`:
///   for the subject "ca" it answers the CA certificate (`cacert`), never `signed/ca.pem`;
///   `certificate_revocation_list/ca` is the CA's CRL. (`validate-subject!` checks only
///   syntax, so Puppet Server's own CA would sign a "ca" CSR that nobody can ever fetch.)
///
/// vouch serves the same routes (`GET certificate/ca` is the CA bundle): a certificate
/// for "ca" could never be downloaded, and issuing it would spend the attributes.
pub const RESERVED_CERTNAMES: &[&str] = &["ca"];

/// Whether Puppet reserves `name` (see [`RESERVED_CERTNAMES`]).
pub fn is_reserved_certname(name: &str) -> bool {
    RESERVED_CERTNAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certnames() {
        assert_eq!(check_certname("web01.example.com"), Ok(()));
        assert_eq!(check_certname("web_01"), Ok(()));
        assert_eq!(check_certname("Web01"), Err(CertnameProblem::Uppercase));
        assert_eq!(check_certname("*.example.com"), Err(CertnameProblem::Wildcard));
        assert_eq!(check_certname("web01.example.com."), Err(CertnameProblem::TrailingDot));
        assert_eq!(check_certname("../etc/passwd"), Err(CertnameProblem::InvalidCharacter('/')));
        assert_eq!(check_certname("a..b"), Err(CertnameProblem::EmptyLabel));
        assert_eq!(check_certname("-a.b"), Err(CertnameProblem::LabelHyphen));
        assert_eq!(check_certname(""), Err(CertnameProblem::Empty));
        assert_eq!(check_certname("a b"), Err(CertnameProblem::InvalidCharacter(' ')));
    }
}
