//! The service's certificate: its names, whether the one on disk is usable, issued again
//! (superseding the one presented before) when it is not, and what it presents.

use super::super::ServeOptions;
use super::files::write_pair;
use crate::authority::{Authority, LocalSpec};
use crate::error::Error;
use crate::issuance::bootstrap::{DataDir, SERVER_CERT, SERVER_KEY};
use crate::issuance::certificate::LocalRole;
use crate::issuance::keys::KeyType;
use crate::store::State;
use std::net::IpAddr;
use std::path::Path;
use time::OffsetDateTime;

/// The service certificate is renewed at start when it has less than this left.
const SERVER_RENEW_BEFORE: time::Duration = time::Duration::days(30);

/// The names for the service certificate: the operator's, else the host name and localhost,
/// always with the loopback addresses.
pub fn server_names(opts: &ServeOptions) -> (Vec<String>, Vec<IpAddr>) {
    let mut dns = Vec::new();
    let mut ips: Vec<IpAddr> = Vec::new();
    let wanted: Vec<String> = if opts.server_names.is_empty() {
        crate::authority::host_name().into_iter().chain(["localhost".to_string()]).collect()
    } else {
        opts.server_names.clone()
    };
    for n in wanted {
        match n.parse::<IpAddr>() {
            Ok(ip) => ips.push(ip),
            Err(_) => {
                if !dns.contains(&n) {
                    dns.push(n)
                }
            }
        }
    }
    if dns.is_empty() {
        dns.push("localhost".into());
    }
    for ip in [IpAddr::from([127, 0, 0, 1]), IpAddr::from(std::net::Ipv6Addr::LOCALHOST)] {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if !opts.listen.ip().is_unspecified() && !ips.contains(&opts.listen.ip()) {
        ips.push(opts.listen.ip());
    }
    (dns, ips)
}

/// The key type a service certificate issued now gets.
pub(super) fn service_key_type(opts: &ServeOptions) -> KeyType {
    opts.service_key_type.unwrap_or(opts.key_type)
}

/// The key type of a certificate's public key, if it is one vouch makes.
fn key_type_of(c: &x509_parser::certificate::X509Certificate<'_>) -> Option<KeyType> {
    use x509_parser::public_key::PublicKey;
    let spki = c.public_key();
    if spki.algorithm.algorithm.to_id_string() == "1.3.101.112" {
        return Some(KeyType::Ed25519);
    }
    match spki.parsed().ok()? {
        PublicKey::RSA(k) => match k.key_size() {
            2048 => Some(KeyType::Rsa2048),
            3072 => Some(KeyType::Rsa3072),
            4096 => Some(KeyType::Rsa4096),
            _ => None,
        },
        PublicKey::EC(p) => match p.key_size() {
            256 => Some(KeyType::P256),
            384 => Some(KeyType::P384),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the service certificate on disk is usable: present with its key, valid for
/// a while yet, current in the store, naming everything asked for, and with a key of
/// `want_key` when the operator chose one.
pub(super) fn server_cert_ok(
    auth: &Authority,
    dir: &Path,
    (dns, ips): (&[String], &[IpAddr]),
    want_key: Option<KeyType>,
    now: OffsetDateTime,
) -> bool {
    let (cert, key) = (dir.join(SERVER_CERT), dir.join(SERVER_KEY));
    let Ok(pem) = std::fs::read(&cert) else { return false };
    if !key.exists() {
        return false;
    }
    let Ok((_, der)) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]) else { return false };
    let Ok((_, c)) = x509_parser::parse_x509_certificate(&der) else { return false };
    if c.validity().not_after.to_datetime() - now < SERVER_RENEW_BEFORE {
        return false;
    }
    if want_key.is_some_and(|k| key_type_of(&c) != Some(k)) {
        return false;
    }
    let serial = crate::encoding::hex(c.raw_serial());
    if !matches!(auth.store_record(&serial), Ok(Some(State::Issued))) {
        return false;
    }
    let mut have_dns = Vec::new();
    let mut have_ips = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => have_dns.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => {
                    if let Ok(a) = <[u8; 4]>::try_from(*b) {
                        have_ips.push(IpAddr::from(a));
                    } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                        have_ips.push(IpAddr::from(a));
                    }
                }
                _ => {}
            }
        }
    }
    dns.iter().all(|d| have_dns.contains(d)) && ips.iter().all(|i| have_ips.contains(i))
}

/// The service's certificate as presented: its certname and every name on it.
pub(super) struct Served {
    pub(super) certname: String,
    pub(super) names: Vec<String>,
}

/// The service certificate: issued again unless the one on disk is usable, then read back.
pub(super) fn server_credential(
    auth: &Authority,
    dir: &DataDir,
    opts: &ServeOptions,
    now: OffsetDateTime,
    notes: &mut Vec<String>,
) -> Result<Served, Error> {
    let (dns, ips) = server_names(opts);
    let wanted_certname = dns.first().cloned().unwrap_or_else(|| "localhost".into());
    if !server_cert_ok(auth, &dir.dir, (&dns, &ips), opts.service_key_type, now) {
        let spec = LocalSpec {
            certname: &wanted_certname,
            role: LocalRole::Server,
            dns_names: &dns,
            ip_addresses: &ips,
            key_type: service_key_type(opts),
            replace: true,
        };
        if let Some((name, serial)) = renew_server_cert(auth, &dir.dir, &spec, now)? {
            notes.push(format!(
                "completed: the service certificate was issued again (the one in {} did not cover these names, was not \
                 valid or within 30 days of its end, had no key or not a key of --service-key-type); the one presented before ({name}, serial {serial}) is revoked \
                 (superseded)",
                dir.dir.join(SERVER_CERT).display()
            ));
        }
    }
    Ok(presented(&dir.dir, &wanted_certname, &dns, &ips))
}

/// Issues the service certificate as `spec` says and writes it with its new key. Returns the
/// certname and serial of the certificate presented until now if it was valid and is now
/// revoked (superseded).
fn renew_server_cert(
    auth: &Authority,
    dir: &Path,
    spec: &LocalSpec<'_>,
    now: OffsetDateTime,
) -> Result<Option<(String, String)>, Error> {
    let previous = served(dir);
    // Whether the store held it as valid (issued, not revoked), before this issuance.
    let was_valid = previous.as_ref().is_some_and(|(name, serial)| {
        matches!(auth.certificate(name), Ok(Some((rec, _))) if rec.serial == *serial && rec.state == State::Issued
            && crate::encoding::time::parse_rfc3339(&rec.not_after).is_ok_and(|t| t > now))
    });
    let (issued, key) = auth.issue_local(spec, now)?;
    write_pair(&dir.join(SERVER_CERT), &issued.pem, &dir.join(SERVER_KEY), &key)?;
    // The certificate presented until now, under another certname: its key is gone, so
    // nobody holds it any more; revoked, its names are free again (issue_local superseded
    // it already if the certname is the same).
    if let Some((old_name, old_serial)) = previous.as_ref().filter(|(n, _)| n != spec.certname) {
        if let Ok(Some((rec, _))) = auth.certificate(old_name) {
            if rec.serial == *old_serial && rec.state == State::Issued {
                auth.revoke(old_name, "superseded", false, now)?;
            }
        }
    }
    Ok(previous.filter(|_| was_valid))
}

/// What the service presents, as it is (its names are the reserved ones, whatever the flags).
fn presented(dir: &Path, wanted_certname: &str, dns: &[String], ips: &[IpAddr]) -> Served {
    match std::fs::read(dir.join(SERVER_CERT))
        .ok()
        .and_then(|pem| crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok())
    {
        Some((_, der)) => {
            let mut names: Vec<String> = Vec::new();
            for n in crate::authority::names_on_certificate(&der) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            Served { certname: names.first().cloned().unwrap_or_else(|| wanted_certname.to_string()), names }
        }
        None => Served {
            certname: wanted_certname.to_string(),
            names: dns.iter().cloned().chain(ips.iter().map(IpAddr::to_string)).collect(),
        },
    }
}

/// The certname and serial of the certificate the service presents now, if readable.
fn served(dir: &Path) -> Option<(String, String)> {
    let pem = std::fs::read(dir.join(SERVER_CERT)).ok()?;
    let (_, der) = crate::encoding::pem::find(&pem, &["CERTIFICATE"]).ok()?;
    let (_, c) = x509_parser::parse_x509_certificate(&der).ok()?;
    let cn = c.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    Some((cn, crate::encoding::hex(c.raw_serial())))
}
