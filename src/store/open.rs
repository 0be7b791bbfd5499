//! `--store URL`: which store a command opens (the data directory's files, or an LDAP server).

use super::ldap::{Bind, LdapStore, Server};
use super::{FileStore, ReplayJournal, Store};
use crate::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the store is, and how to reach it (the CLI's `--store` and `--ldap-*` options).
#[derive(Debug, Clone, Default)]
pub struct StoreUrl {
    /// `files` (or empty: the default) or an LDAP URL whose path is the base DN.
    pub url: String,
    pub bind_dn: Option<String>,
    pub password_file: Option<PathBuf>,
    pub ldap_ca: Option<PathBuf>,
    /// Replicas (LDAP URLs of the same base DN): claims are confirmed readable on each.
    pub replicas: Vec<String>,
    pub confirm_replicas: bool,
}

/// Percent-decoding of a URL component; an invalid escape is an error.
fn percent_decode(s: &str) -> Result<String, String> {
    crate::encoding::percent_decode(s).ok_or_else(|| format!("{s:?} has an invalid percent escape or is not UTF-8"))
}

/// A parsed LDAP URL: the server's address and the base DN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapUrl {
    /// `scheme://authority` as ldap3 wants it.
    pub address: String,
    pub base: String,
    pub scheme: &'static str,
}

/// Parses `ldap://host:port/BASE`, `ldaps://host:port/BASE` or `ldapi://%2Fsocket/BASE`.
pub fn parse_ldap_url(url: &str) -> Result<LdapUrl, String> {
    let (scheme, rest) = match url.split_once("://") {
        Some(("ldap", r)) => ("ldap", r),
        Some(("ldaps", r)) => ("ldaps", r),
        Some(("ldapi", r)) => ("ldapi", r),
        _ => return Err(format!("{url:?} is neither 'files' nor an ldap://, ldaps:// or ldapi:// URL")),
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    // An RFC 4516 URL may go on with ?attributes?scope?filter: not for a store.
    if path.contains('?') || authority.contains('?') {
        return Err(format!("{url:?}: a store URL has no ?attributes?scope?filter part"));
    }
    if authority.contains('@') {
        return Err(format!("{url:?}: no user or password in the URL; use --ldap-bind-dn and --ldap-password-file"));
    }
    if scheme != "ldapi" && authority.is_empty() {
        return Err(format!("{url:?}: no host; such as ldap://127.0.0.1:389/ou=vouch,dc=example,dc=com"));
    }
    if scheme != "ldapi" {
        check_host_port(url, authority)?;
    }
    if scheme == "ldapi" && !authority.is_empty() && !percent_decode(authority)?.starts_with('/') {
        return Err(format!(
            "{url:?}: an ldapi:// URL names its socket path percent-encoded, such as %2Frun%2Fslapd%2Fldapi"
        ));
    }
    if scheme == "ldapi" && authority.is_empty() && path.contains('/') {
        return Err(format!(
            "{url:?}: percent-encode the socket path, such as ldapi://%2Frun%2Fslapd%2Fldapi/ou=vouch,dc=example,dc=com"
        ));
    }
    let base = percent_decode(path)?;
    if base.is_empty() {
        return Err(format!(
            "{url:?} names no base DN: its path is the base, such as ldap://127.0.0.1:389/ou=vouch,dc=example,dc=com"
        ));
    }
    check_base_dn(&base).map_err(|e| format!("{url:?}: base DN {base:?}: {e}"))?;
    Ok(LdapUrl { address: format!("{scheme}://{authority}"), base, scheme })
}

/// The host and port of an ldap:// or ldaps:// URL: a host (a name, an IPv4 address, or an
/// IPv6 one in brackets), then at most one `:port` from 1 to 65535. What the LDAP library
/// cannot parse is a typo (exit 2), never reported as an outage (75).
fn check_host_port(url: &str, authority: &str) -> Result<(), String> {
    const SUCH_AS: &str = "such as ldap://127.0.0.1:389/ou=vouch,dc=example,dc=com";
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let Some((v6, after)) = rest.split_once(']') else {
                return Err(format!(
                    "{url:?}: the IPv6 host's bracket is not closed, such as ldap://[::1]:389/ou=vouch"
                ));
            };
            if v6.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("{url:?}: {v6:?} in brackets is not an IPv6 address"));
            }
            match after {
                "" => (v6, None),
                a => match a.strip_prefix(':') {
                    Some(p) => (v6, Some(p)),
                    None => return Err(format!("{url:?}: {a:?} after the IPv6 host is no :port, {SUCH_AS}")),
                },
            }
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if host.is_empty() || host.contains(['[', ']']) {
        return Err(format!("{url:?}: no host name before the port, {SUCH_AS}"));
    }
    // A port that is no port (a second one, a typo) is a typo, not an outage.
    if let Some(port) = port {
        let valid =
            !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0);
        if !valid {
            return Err(format!("{url:?}: {port:?} is not a port number (1 to 65535), {SUCH_AS}"));
        }
    }
    Ok(())
}

/// A base DN vouch will build names under: `attr=value` RDNs of plain characters (no
/// escapes, quotes, `+` or NUL: nothing a DN parser could read two ways).
fn check_base_dn(base: &str) -> Result<(), String> {
    if base.len() > 512 {
        return Err("longer than 512 bytes".into());
    }
    for rdn in base.split(',') {
        if rdn != rdn.trim() || rdn.contains(" =") || rdn.contains("= ") {
            return Err(format!("{rdn:?}: no spaces around ',' or '=' (write ou=vouch,dc=example,dc=com)"));
        }
        let Some((attr, value)) = rdn.split_once('=') else { return Err(format!("{rdn:?} is not attr=value")) };
        let attr_ok = !attr.is_empty() && attr.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        let value_ok = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_' || b == b' ');
        if !attr_ok || !value_ok {
            return Err(format!("{rdn:?}: only letters, digits, '-', '.', '_' and spaces in a base DN vouch uses"));
        }
    }
    Ok(())
}

impl StoreUrl {
    pub fn is_files(&self) -> bool {
        self.url.is_empty() || self.url == "files"
    }

    /// The server `u` names, bound with these options (`vouch reconcile`'s `ldap:` inventory).
    pub fn ldap_server(&self, u: &LdapUrl) -> Result<Server, Error> {
        self.server(u)
    }

    fn server(&self, u: &LdapUrl) -> Result<Server, Error> {
        let bind = match (&self.bind_dn, &self.password_file, u.scheme) {
            (Some(dn), Some(file), _) => {
                // A secret: private to its owner, as the CA's keys are.
                crate::files::trust::check_secret(file, "a password file").map_err(Error::Untrusted)?;
                let pw = crate::files::input::read_path_text(file, crate::files::input::Kind::Key)
                    .map_err(|e| Error::StoreUrl { detail: format!("--ldap-password-file {}: {e}", file.display()) })?;
                let pw = pw.strip_suffix('\n').unwrap_or(&pw);
                let pw = pw.strip_suffix('\r').unwrap_or(pw);
                if pw.is_empty() {
                    return Err(Error::StoreUrl {
                        detail: format!("--ldap-password-file {} is empty", file.display()),
                    });
                }
                Bind::Simple { dn: dn.clone(), password: pw.to_string() }
            }
            (Some(_), None, _) => {
                return Err(Error::StoreUrl {
                    detail: "--ldap-bind-dn needs --ldap-password-file (a password is never given on the command line)"
                        .into(),
                })
            }
            (None, Some(_), _) => {
                return Err(Error::StoreUrl { detail: "--ldap-password-file needs --ldap-bind-dn".into() })
            }
            (None, None, "ldapi") => Bind::External,
            (None, None, _) => Bind::Anonymous,
        };
        if u.scheme == "ldap" && self.ldap_ca.is_some() {
            return Err(Error::StoreUrl {
                detail: "--ldap-ca applies to ldaps:// only (vouch does not use StartTLS): give an ldaps:// URL".into(),
            });
        }
        if u.scheme == "ldaps" && self.ldap_ca.is_none() {
            return Err(Error::StoreUrl {
                detail:
                    "an ldaps:// store needs --ldap-ca FILE: the CA certificates its server's certificate chains to"
                        .into(),
            });
        }
        Ok(Server {
            address: u.address.clone(),
            bind,
            tls_ca: if u.scheme == "ldaps" { self.ldap_ca.clone() } else { None },
            timeout: Duration::from_secs(5),
        })
    }

    /// The LDAP store (with `ca`: this master's CA id), or `None` for the file store.
    pub fn ldap(&self, ca: Option<String>) -> Result<Option<LdapStore>, Error> {
        if self.is_files() {
            if !self.replicas.is_empty() || self.confirm_replicas {
                return Err(Error::StoreUrl { detail: "--store-replica needs an LDAP --store".into() });
            }
            return Ok(None);
        }
        let primary = parse_ldap_url(&self.url).map_err(|detail| Error::StoreUrl { detail })?;
        let mut replicas = Vec::new();
        for r in &self.replicas {
            let u =
                parse_ldap_url(r).map_err(|detail| Error::StoreUrl { detail: format!("--store-replica: {detail}") })?;
            if u.base != primary.base {
                return Err(Error::StoreUrl {
                    detail: format!("--store-replica {r:?} has base DN {:?}, the store {:?}", u.base, primary.base),
                });
            }
            replicas.push(self.server(&u)?);
        }
        if self.confirm_replicas && replicas.is_empty() {
            return Err(Error::StoreUrl {
                detail: "--store-confirm-replicas needs at least one --store-replica".into(),
            });
        }
        let store = LdapStore::new(self.server(&primary)?, replicas, self.confirm_replicas, primary.base, ca)?;
        Ok(Some(store))
    }
}

/// The store of the CA in `ca_dir` (files, whose log replays claims into `journal`, the
/// policy's replay journal, where it names another data directory's) or at `url` (LDAP, as
/// the master whose CA certificate is `ca_cert_der`/`ca_cert_pem`, registered in it when
/// `register`; a retired file store locked only as `vouch migrate`'s source).
pub fn open_store(
    url: &StoreUrl,
    ca_dir: PathBuf,
    journal: Option<&Path>,
    ca_cert_der: &[u8],
    ca_cert_pem: &str,
    register: bool,
    migrate_source: bool,
) -> Result<Arc<dyn Store>, Error> {
    match url.ldap(Some(super::ca_id(ca_cert_der)))? {
        None => {
            let files = FileStore::new(ca_dir).with_journal(journal.map(Path::to_path_buf));
            Ok(Arc::new(if migrate_source { files.reading_retired() } else { files }))
        }
        Some(l) if !register => {
            l.check_opened()?;
            Ok(Arc::new(l))
        }
        Some(l) => {
            if l.open_ca(ca_cert_pem)? {
                // The first time this master CA uses the shared store: certificates its file
                // store holds are not in it until `vouch migrate` copies them.
                let signed = std::fs::read_dir(ca_dir.join("signed")).map(|d| d.count()).unwrap_or(0);
                if signed > 0 {
                    tracing::warn!(
                        event = "warning",
                        what = "store",
                        detail = %format!(
                            "this master's first use of {}: its file store has {signed} certificates the shared \
                             store does not know; copy them with 'vouch migrate --to URL' (docs/ldap.md)",
                            Store::describe(&l)
                        )
                    );
                }
            }
            Ok(Arc::new(l))
        }
    }
}

/// The replay journal a decision uses: the policy's journal directory (files), or the LDAP
/// store's journal. `None` with the file store and no journal in the policy (tests only).
pub fn open_journal(
    url: &StoreUrl,
    policy_journal: Option<&PathBuf>,
    synced: bool,
) -> Result<Option<Arc<dyn ReplayJournal>>, Error> {
    match url.ldap(None)? {
        Some(l) => Ok(Some(Arc::new(l))),
        None => Ok(policy_journal.map(|dir| {
            let j = if synced { super::journal::Journal::new(dir) } else { super::journal::Journal::unsynced(dir) };
            Arc::new(j) as Arc<dyn ReplayJournal>
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_parse_and_bad_ones_are_refused() {
        let u = parse_ldap_url("ldap://127.0.0.1:3890/ou=vouch,dc=example,dc=test").unwrap();
        assert_eq!(u.address, "ldap://127.0.0.1:3890");
        assert_eq!(u.base, "ou=vouch,dc=example,dc=test");
        let u = parse_ldap_url("ldapi://%2Frun%2Fslapd%2Fldapi/ou=vouch,dc=example,dc=test").unwrap();
        assert_eq!(u.address, "ldapi://%2Frun%2Fslapd%2Fldapi");
        assert_eq!(u.scheme, "ldapi");
        for bad in [
            "http://x/ou=a",
            "ldap://127.0.0.1:389",
            "ldap://127.0.0.1:389/",
            "ldap:///ou=a",
            "ldap://u:p@host/ou=a",
            "ldap://h/ou=a?cn?sub",
            "ldap://h/ou=a%zz",
            "ldap://h/ou=a\\2c,dc=b",
            "ldap://h/ou=a+cn=b",
            "ldap://h/ou=a,%20dc=b",
            "ldapi:///tmp/sock/ou=a",
            "ldapi://run/ou=a",
        ] {
            assert!(parse_ldap_url(bad).is_err(), "{bad}");
        }
    }
}
