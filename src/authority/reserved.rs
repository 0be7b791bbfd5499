//! Names that are never a node's: the CA's own, the service's and the administrators'.

use super::Authority;
use crate::decision::Refusal;
use crate::issuance::bootstrap::{self, DataDir};
use crate::store::CertRecord;

/// Names reserved for the service whatever its certificate says: `localhost` (its default
/// name) and the loopback addresses it always carries (see `serve::setup::server_names`).
/// A node certificate for `localhost` would let any node impersonate every local service.
pub const SERVICE_DEFAULT_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// The name Puppet agents give their server when none is configured (Puppet's `server`
/// setting defaults to `puppet`, and `ca_server` to `server`): a compile server or Puppet
/// Server answers to it, so it is never an administrator's.
pub const PUPPET_DEFAULT_SERVER: &str = "puppet";

/// This machine's host name, lowercased, if it is a valid certname: the name `vouch serve`
/// gives its certificate by default (and Puppet Server's certname on its host).
pub fn host_name() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?.trim().to_ascii_lowercase();
    crate::decision::check_certname(&h).is_ok().then_some(h)
}

/// Whose name a reserved name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// A name on the certificate `vouch serve` presents (`DIR/server/server_crt.pem`).
    Service,
    /// An administrator's certificate (`DIR/admin/`, `vouch admin new`, `[serve] admins`).
    Admin,
    /// The certificate another master of the fleet presents (published in the shared store).
    OtherMaster,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Holder::Service => "the certificate this CA's service presents",
            Holder::Admin => "an administrator's certificate",
            Holder::OtherMaster => "the certificate another master of the fleet presents",
        })
    }
}

/// Names no node may have, whatever the flags `vouch serve` was started with:
/// [`SERVICE_DEFAULT_NAMES`], and every name
/// (CN, DNS and IP subjectAltNames) on the certificate the service actually presents and
/// on the administrator certificate in the data directory. Read from those files when the
/// authority opens (the service certificate only changes when `vouch serve` starts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservedNames {
    names: Vec<(String, Holder)>,
}

impl ReservedNames {
    /// The names on the certificates in `dir` (missing or unreadable files reserve nothing:
    /// `vouch serve` cannot present a certificate it cannot read).
    pub fn load(dir: &DataDir) -> Self {
        let mut r = Self::service_defaults();
        for (rel, holder) in [
            (crate::issuance::bootstrap::SERVER_CERT, Holder::Service),
            (crate::issuance::bootstrap::ADMIN_CERT, Holder::Admin),
        ] {
            if let Ok(pem) = std::fs::read(dir.dir.join(rel)) {
                if let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) {
                    for n in names_on_certificate(&der) {
                        r.add(n, holder);
                    }
                }
            }
        }
        r
    }

    /// Only [`SERVICE_DEFAULT_NAMES`]: the names `vouch serve` gives its certificate by
    /// default, reserved whether or not it has run (one rule for `vouch sign`, the hook
    /// and the service).
    pub fn service_defaults() -> Self {
        let mut r = ReservedNames::default();
        for n in SERVICE_DEFAULT_NAMES {
            r.add(n.to_string(), Holder::Service);
        }
        r
    }

    pub(super) fn add(&mut self, name: String, holder: Holder) {
        let name = Self::normal(&name);
        if !self.names.iter().any(|(n, _)| *n == name) {
            self.names.push((name, holder));
        }
    }

    /// A DNS name as resolvers and TLS clients compare it: case-insensitive, and a
    /// trailing dot (the fully qualified form, `vm.`) names the same host as `vm`.
    fn normal(name: &str) -> String {
        name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
    }

    /// How many names are reserved.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is reserved.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whose name `name` is, if reserved (compared as host names are: see `ReservedNames::normal`).
    pub fn holder(&self, name: &str) -> Option<Holder> {
        let name = Self::normal(name);
        self.names.iter().find(|(n, _)| *n == name).map(|(_, h)| *h)
    }

    /// The refusal for a request under `certname` (or asking for a subjectAltName) that a
    /// reserved name covers, if any.
    pub fn refusal(&self, certname: &str, csr: Option<&crate::encoding::csr::Csr>) -> Option<Refusal> {
        let requested = csr.map(requested_alt_names).unwrap_or_default();
        self.refusal_for(certname, &requested)
    }

    /// The refusal for `certname` carrying `alt_names` (a renewal's, from its certificate)
    /// that a reserved name covers, if any: the rule issuance applies.
    pub fn refusal_for(&self, certname: &str, alt_names: &[String]) -> Option<Refusal> {
        std::iter::once(certname.to_string()).chain(alt_names.iter().cloned()).find_map(|name| {
            self.holder(&name).map(|holder| Refusal::NameReserved {
                certname: certname.to_string(),
                name,
                holder: holder.to_string(),
            })
        })
    }
}

/// The CNs, DNS names and IP addresses (as text: a DNS name "127.0.0.1" matches the
/// address for some clients) a certificate names.
pub fn names_on_certificate(der: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let Ok((_, c)) = x509_parser::parse_x509_certificate(der) else { return out };
    out.extend(c.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_string));
    if let Ok(Some(san)) = c.subject_alternative_name() {
        out.extend(general_names(&san.value.general_names));
    }
    out
}

fn general_names(names: &[x509_parser::extensions::GeneralName<'_>]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(b) => match b.len() {
                4 => <[u8; 4]>::try_from(*b).ok().map(|a| std::net::IpAddr::from(a).to_string()),
                16 => <[u8; 16]>::try_from(*b).ok().map(|a| std::net::IpAddr::from(a).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The DNS names and IP addresses a CSR asks for in subjectAltName (Puppet Server copies
/// them into the certificate when its own setting allows; vouch's CA never does).
fn requested_alt_names(csr: &crate::encoding::csr::Csr) -> Vec<String> {
    use x509_parser::prelude::FromDer;
    csr.extensions
        .iter()
        .filter(|e| e.oid == crate::encoding::oids::SUBJECT_ALT_NAME)
        .filter_map(|e| x509_parser::extensions::SubjectAlternativeName::from_der(&e.value).ok())
        .flat_map(|(_, san)| general_names(&san.general_names))
        .collect()
}

impl Authority {
    /// Whether a stored certificate is the service's or an administrator's: issued here for
    /// vouch itself (no conductor, no attributes, no classification: `vouch serve`'s
    /// certificates and `vouch admin new`), the certificate the service presents, or listed in `[serve] admins`.
    pub fn protected(&self, rec: &CertRecord, pem: &str) -> Option<Holder> {
        // The certificate is decoded only where it is looked at (a node's certificate, fetched
        // by every agent, usually is not).
        let der = || crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]).map(|(_, d)| d).unwrap_or_default();
        if !self.policy.admin_fingerprints.is_empty()
            && self.policy.admin_fingerprints.contains(&bootstrap::fingerprint(&der()))
        {
            return Some(Holder::Admin);
        }
        if let Some(h) = self.reserved.holder(&rec.certname) {
            return Some(h);
        }
        // No conductor, no attributes and no classification (an administrator's approval
        // gives a node one): vouch's own.
        if rec.conductor.is_none() && rec.attributes_expiry.is_none() {
            let der = der();
            let classified = crate::issuance::certificate::classification_of(&der, &self.policy.mirror_oid);
            if classified.ok().flatten().is_none() {
                return Some(if carries_cli_auth(&der) { Holder::Admin } else { Holder::Service });
            }
        }
        None
    }
}

impl Authority {
    /// Whether a stored certificate (PEM) is an administrator's: Puppet's CLI-authorization
    /// extension (`vouch admin new`), or a fingerprint `[serve] admins` lists. Unlike
    /// [`Authority::protected`], a record's missing conductor does not make it one.
    pub fn is_admin_certificate(&self, pem: &str) -> bool {
        let Ok((_, der)) = crate::encoding::pem::find(pem.as_bytes(), &["CERTIFICATE"]) else { return false };
        carries_cli_auth(&der)
            || (!self.policy.admin_fingerprints.is_empty()
                && self.policy.admin_fingerprints.contains(&bootstrap::fingerprint(&der)))
    }
}

/// Whether a certificate (DER) carries Puppet's CLI-authorization extension: an
/// administrator's certificate, as `vouch admin new` issues it.
pub(super) fn carries_cli_auth(der: &[u8]) -> bool {
    x509_parser::parse_x509_certificate(der).is_ok_and(|(_, c)| {
        c.extensions()
            .iter()
            .any(|e| e.oid.iter().is_some_and(|i| i.eq(crate::encoding::oids::PP_CLI_AUTH.iter().copied())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_match_as_host_names_do() {
        let mut r = ReservedNames::default();
        r.add("VM".into(), Holder::Service);
        r.add("puppet.example.test.".into(), Holder::Service);
        for name in ["vm", "VM", "vm.", "Vm.", "puppet.example.test", "PUPPET.example.test."] {
            assert!(r.holder(name).is_some(), "{name}");
        }
        for name in ["vm..", "vm1", "example.test", ""] {
            assert!(r.holder(name).is_none(), "{name}");
        }
    }
}
