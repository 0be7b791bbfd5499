//! `[[identity.aws]]`: which cloud certificates sign the identity documents of instances a
//! bound template names, and the accounts, regions and certnames each entry allows
//! (docs/operator-guide.md, "Templates bound to the instance").

use super::requests::ErrorAt;
use super::{Pattern, PolicyError};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// `[identity]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdentity {
    #[serde(default)]
    aws: Vec<RawAws>,
}

/// One `[[identity.aws]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAws {
    name: Option<String>,
    certificates: Vec<Spanned<String>>,
    accounts: Spanned<Vec<String>>,
    regions: Spanned<Vec<String>>,
    certname_patterns: Spanned<Vec<String>>,
    max_document_age: Option<Spanned<String>>,
}

/// One `[[identity.aws]]`, validated: the first entry whose `certname_patterns` match the
/// certname a bound template derives is the one that decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsIdentityRule {
    /// `name`, else `aws#N` (N from 1, in file order).
    pub name: String,
    /// The provider certificates (DER) that may sign these instances' documents.
    pub certificates: Vec<Vec<u8>>,
    /// Account ids allowed (exact, 12 digits).
    pub accounts: Vec<String>,
    /// Regions allowed (exact, e.g. eu-west-1).
    pub regions: Vec<String>,
    /// The certnames this entry covers (`*` never crosses a `.`).
    pub certnames: Vec<Pattern>,
    /// How long after its launch (`pendingTime`) an instance's document is honoured
    /// (`max_document_age`, default [`DEFAULT_MAX_DOCUMENT_AGE`]).
    pub max_document_age: Duration,
}

/// Instances enroll at boot: an hour covers a slow boot, not a document kept for later.
pub const DEFAULT_MAX_DOCUMENT_AGE: Duration = Duration::from_secs(3600);

/// Reads the PEM certificates of the files a key names.
pub(super) type ReadCertificates<'a> = &'a dyn Fn(&[Spanned<String>], &str) -> Result<Vec<Vec<u8>>, PolicyError>;

/// Validates `[identity]`; `certificates` reads the PEM files an entry names.
pub(super) fn rules(
    raw: RawIdentity,
    err: ErrorAt<'_>,
    certificates: ReadCertificates<'_>,
) -> Result<Vec<AwsIdentityRule>, PolicyError> {
    let mut out = Vec::new();
    for (i, entry) in raw.aws.into_iter().enumerate() {
        let nonempty = |v: &Spanned<Vec<String>>, key: &str| {
            if v.get_ref().is_empty() {
                Err(err(Some(v.span()), key, "list at least one (deny by default)".into()))
            } else {
                Ok(())
            }
        };
        nonempty(&entry.accounts, "identity.aws.accounts")?;
        nonempty(&entry.regions, "identity.aws.regions")?;
        nonempty(&entry.certname_patterns, "identity.aws.certname_patterns")?;
        if entry.certificates.is_empty() {
            return Err(err(None, "identity.aws.certificates", "name at least one certificate file".into()));
        }
        for a in entry.accounts.get_ref() {
            if a.len() != 12 || !a.bytes().all(|b| b.is_ascii_digit()) {
                let m = format!("{a:?} is not an account id (12 digits)");
                return Err(err(Some(entry.accounts.span()), "identity.aws.accounts", m));
            }
        }
        let certnames = entry
            .certname_patterns
            .get_ref()
            .iter()
            .map(|p| Pattern::new(p, Some('.')))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| err(Some(entry.certname_patterns.span()), "identity.aws.certname_patterns", m))?;
        let max_document_age = match &entry.max_document_age {
            None => DEFAULT_MAX_DOCUMENT_AGE,
            Some(v) => match super::parse_duration(v.get_ref().trim()) {
                Some(d) if !d.is_zero() => d,
                _ => {
                    let m = super::duration_problem(v.get_ref(), "1h, 6h or 1d");
                    return Err(err(Some(v.span()), "identity.aws.max_document_age", m));
                }
            },
        };
        out.push(AwsIdentityRule {
            name: entry.name.unwrap_or_else(|| format!("aws#{}", i + 1)),
            certificates: certificates(&entry.certificates, "identity.aws.certificates")?,
            accounts: entry.accounts.into_inner(),
            regions: entry.regions.into_inner(),
            certnames,
            max_document_age,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::policy::Policy;
    use std::path::Path;

    const CLOUD: &str = include_str!("../../fixtures/iid-cloud.pem");

    fn parse(identity: &str) -> Result<Policy, String> {
        let text = format!("[conductors]\ntrusted_roots = [\"cloud.pem\"]\n\n{identity}");
        Policy::parse(Path::new("/p/policy.toml"), &text, |p| {
            if p == Path::new("/p/cloud.pem") {
                Ok(CLOUD.as_bytes().to_vec())
            } else {
                Err(std::io::Error::other("no such file"))
            }
        })
        .map_err(|e| e.to_string())
    }

    const GOOD: &str = "[[identity.aws]]\ncertificates = [\"cloud.pem\"]\naccounts = [\"111122223333\"]\n\
                        regions = [\"eu-west-1\"]\ncertname_patterns = [\"*.web.example.com\"]\n";

    #[test]
    fn entries_are_read_and_each_list_is_required() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.identity.len(), 1);
        assert_eq!(p.identity[0].name, "aws#1");
        assert_eq!(p.identity[0].certificates.len(), 1);
        assert!(p.identity[0].certnames[0].is_match("i-01234567.web.example.com"));
        assert_eq!(p.identity[0].max_document_age.as_secs(), 3600);
        let six = parse(&format!("{GOOD}max_document_age = \"6h\"\n")).unwrap();
        assert_eq!(six.identity[0].max_document_age.as_secs(), 6 * 3600);
        assert!(parse("").unwrap().identity.is_empty());
        for (from, to, key) in [
            ("[\"111122223333\"]", "[]", "identity.aws.accounts"),
            ("[\"111122223333\"]", "[\"1111\"]", "identity.aws.accounts"),
            ("[\"eu-west-1\"]", "[]", "identity.aws.regions"),
            ("[\"*.web.example.com\"]", "[]", "identity.aws.certname_patterns"),
            ("[\"cloud.pem\"]", "[]", "identity.aws.certificates"),
            ("[\"cloud.pem\"]", "[\"missing.pem\"]", "identity.aws.certificates"),
            ("regions", "region", "region"),
            ("regions =", "max_document_age = \"0s\"\nregions =", "identity.aws.max_document_age"),
        ] {
            let e = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert!(e.contains(key), "{from} -> {to}: {e}");
        }
    }
}
