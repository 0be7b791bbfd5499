//! What a Puppet CA directory means, checked whole before anything is written: its chain and
//! keys, its CRLs, `signed/` against `inventory.txt`, and `serial`. Pure: the files' bytes in
//! ([`CadirFiles`]), a [`Plan`] or the first [`PuppetCaDefect`] out; no I/O, no clock.

use super::read::CadirFiles;
use crate::encoding::time::format_rfc3339;
use crate::error::PuppetCaDefect;
use std::collections::{BTreeMap, HashMap};
use x509_parser::certificate::X509Certificate;

/// A certificate of `signed/`, as the store records it.
#[derive(Debug, Clone)]
pub struct Signed {
    pub certname: String,
    /// Lowercase hex of the DER serial's bytes (the store's form).
    pub serial: String,
    pub pem: String,
    pub digest: String,
    pub not_before: String,
    pub not_after: String,
    /// It carries `pp_cli_auth` (Puppet Server's own certificate): vouch keeps it as an
    /// administrator's, whose name `vouch serve` does not take over while it is valid.
    pub cli_auth: bool,
}

/// A revocation on the CA's CRL.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub serial: String,
    /// The certname, from `signed/` or else `inventory.txt` (`None`: neither knows the serial).
    pub certname: Option<String>,
    pub time: String,
    /// RFC 5280's name (`unspecified` when the CRL gives none).
    pub reason: String,
    pub not_after: Option<String>,
}

/// One line of `inventory.txt`, in the store's spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryLine {
    pub serial: String,
    pub not_before: String,
    pub not_after: String,
    pub certname: String,
}

/// Everything the import writes, checked.
#[derive(Debug)]
pub struct Plan {
    /// The root (the CA itself when it is self-signed), DER.
    pub root_der: Vec<u8>,
    /// The CA that issued the agents' certificates: vouch's master CA, DER.
    pub ca_der: Vec<u8>,
    pub ca_key: String,
    /// The root's key, when the CA directory holds it and the root is not the CA itself.
    pub root_key: Option<String>,
    /// The CA is its own root (one self-signed certificate in `ca_crt.pem`).
    pub self_signed: bool,
    pub signed: Vec<Signed>,
    pub revoked: Vec<Revoked>,
    pub inventory: Vec<InventoryLine>,
    /// The CA's CRL's number (Puppet's last): vouch numbers its CRLs above it.
    pub crl_number: u128,
    /// The CA's CRL, DER.
    pub ca_crl: Vec<u8>,
    /// The root's CRL (DER) and its number; none for a self-signed CA.
    pub root_crl: Option<(Vec<u8>, u128)>,
    /// The root CRL's entries (serial, time, reason): vouch's root CRL keeps them.
    pub root_revoked: Vec<(String, String, String)>,
    /// Puppet's next serial, as its `serial` file says (hex).
    pub next_serial: String,
}

fn chain(detail: impl Into<String>) -> PuppetCaDefect {
    PuppetCaDefect::Chain { detail: detail.into() }
}

fn unreadable(file: &str, detail: impl std::fmt::Display) -> PuppetCaDefect {
    PuppetCaDefect::Unreadable { file: file.into(), detail: detail.to_string() }
}

/// Checks every file and returns what to write.
pub fn plan(f: &CadirFiles) -> Result<Plan, PuppetCaDefect> {
    let chain_der =
        crate::encoding::pem::find_all(&f.ca_crt, "CERTIFICATE").map_err(|e| unreadable("ca_crt.pem", e))?;
    let parsed = chain_der
        .iter()
        .map(|d| x509_parser::parse_x509_certificate(d).map(|(_, c)| c))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable("ca_crt.pem", e))?;
    let (ca, root) = match parsed.as_slice() {
        [ca] => (ca, ca),
        [ca, root] => (ca, root),
        [] => return Err(unreadable("ca_crt.pem", "it holds no certificate")),
        more => return Err(chain(format!("it holds {} certificates; vouch takes a CA and its root", more.len()))),
    };
    let self_signed = parsed.len() == 1;
    check_chain(ca, root, self_signed)?;
    if self_signed {
        root_alone(f, ca)?;
    }
    key_matches(&f.ca_key, ca, "ca_key.pem", "ca_crt.pem (its first certificate)")?;
    let root_key = match (&f.root_key, self_signed) {
        (Some(k), false) => {
            key_matches(k, root, "root_key.pem", "ca_crt.pem's root (its second certificate)")?;
            Some(k.clone())
        }
        // A self-signed CA has no other root: its key is ca_key.pem.
        _ => None,
    };
    let inventory = parse_inventory(&f.inventory)?;
    let signed = check_signed(&f.signed, ca)?;
    check_inventory(&signed, &inventory)?;
    let next_serial = check_serial(&f.serial, &inventory)?;
    let crls = check_crls(&f.ca_crl, ca, root, self_signed)?;
    let revoked = revocations(&crls.ca_crl, &signed, &inventory)?;
    let root_revoked = match &crls.root_crl {
        Some((der, _)) => revocations(der, &[], &[])?.into_iter().map(|r| (r.serial, r.time, r.reason)).collect(),
        None => Vec::new(),
    };
    let (Some(ca_der), Some(root_der)) = (chain_der.first(), chain_der.last()) else {
        return Err(unreadable("ca_crt.pem", "it holds no certificate"));
    };
    Ok(Plan {
        root_der: root_der.clone(),
        ca_der: ca_der.clone(),
        ca_key: f.ca_key.clone(),
        root_key,
        self_signed,
        signed,
        revoked,
        inventory,
        crl_number: crls.ca_number,
        ca_crl: crls.ca_crl,
        root_crl: crls.root_crl,
        root_revoked,
        next_serial,
    })
}

/// The CA may sign certificates and CRLs; its root issued it (or it is its own root).
fn check_chain(ca: &X509Certificate<'_>, root: &X509Certificate<'_>, self_signed: bool) -> Result<(), PuppetCaDefect> {
    for (c, which) in [(ca, "the CA certificate"), (root, "the root")] {
        match c.basic_constraints() {
            Ok(Some(bc)) if bc.value.ca => {}
            _ => return Err(chain(format!("{which} ({}) is not a CA certificate", c.subject()))),
        }
        if let Ok(Some(ku)) = c.key_usage() {
            if !ku.value.key_cert_sign() {
                return Err(chain(format!("{which} ({}) may not sign certificates (keyUsage)", c.subject())));
            }
        }
    }
    if root.subject().as_raw() != root.issuer().as_raw() {
        return Err(chain(format!("its last certificate ({}) is not self-issued: no root", root.subject())));
    }
    if !self_signed && ca.issuer().as_raw() != root.subject().as_raw() {
        return Err(chain(format!("{} was not issued by {}", ca.subject(), root.subject())));
    }
    crate::encoding::verify_x509_signature(
        &ca.signature_algorithm,
        root,
        ca.tbs_certificate.as_ref(),
        &ca.signature_value.data,
    )
    .map_err(|e| chain(format!("{}: {e}", ca.subject())))
}

/// `ca_crt.pem`'s one self-signed certificate `root` is the root alone, Puppet's CA certificate
/// (the intermediate) missing before it: `ca_key.pem` is not its key, and `root_key.pem` is, or
/// the agents' certificates in `signed/` name another issuer. (A self-signed Puppet CA, as
/// Puppet 5 made them, has its key in `ca_key.pem`; other mismatches are the key's.)
fn root_alone(f: &CadirFiles, root: &X509Certificate<'_>) -> Result<(), PuppetCaDefect> {
    let key_of_root = |pem: &str| {
        crate::issuance::keys::load_pem(pem)
            .is_ok_and(|kp| kp.public_key_raw() == root.public_key().subject_public_key.data.as_ref())
    };
    if key_of_root(&f.ca_key) {
        return Ok(());
    }
    let issued_by_another = f.signed.iter().any(|(_, bytes)| {
        let der = crate::encoding::pem::find_all(bytes, "CERTIFICATE").ok().and_then(|d| d.into_iter().next());
        der.is_some_and(|der| {
            x509_parser::parse_x509_certificate(&der).is_ok_and(|(_, c)| c.issuer().as_raw() != root.subject().as_raw())
        })
    });
    if f.root_key.as_deref().is_some_and(key_of_root) || issued_by_another {
        return Err(PuppetCaDefect::IntermediateMissing { root: root.subject().to_string() });
    }
    Ok(())
}

/// The PEM key `key` is `cert`'s.
fn key_matches(key: &str, cert: &X509Certificate<'_>, key_file: &str, cert_file: &str) -> Result<(), PuppetCaDefect> {
    let kp = crate::issuance::keys::load_pem(key).map_err(|e| unreadable(key_file, e))?;
    if kp.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
        return Err(PuppetCaDefect::KeyMismatch { key: key_file.into(), cert: cert_file.into() });
    }
    Ok(())
}

/// A Puppet serial (`0x0003`, `003`) in the store's form: the DER integer's bytes in hex.
pub fn store_serial(puppet: &str) -> Option<String> {
    let digits = puppet.trim().trim_start_matches("0x").trim_start_matches("0X");
    if digits.is_empty() || digits.len() > 40 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut hex = digits.trim_start_matches('0').to_ascii_lowercase();
    if hex.len() % 2 == 1 {
        hex.insert(0, '0');
    }
    // A DER INTEGER is signed: a positive one whose first byte has its top bit set gets 00.
    if hex.is_empty() || hex.as_bytes().first().is_some_and(|b| *b >= b'8') {
        hex.insert_str(0, "00");
    }
    Some(hex)
}

/// A time of Puppet's inventory (`2026-11-28T06:55:41UTC`) in RFC 3339.
fn inventory_time(t: &str) -> Option<String> {
    let t = t.strip_suffix("UTC").map(|s| format!("{s}Z")).unwrap_or_else(|| t.to_string());
    crate::encoding::time::parse_rfc3339(&t).ok().map(format_rfc3339)
}

/// `inventory.txt`: `0xSERIAL NOTBEFORE NOTAFTER /CN=NAME` a line (blank lines skipped).
fn parse_inventory(text: &str) -> Result<Vec<InventoryLine>, PuppetCaDefect> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = || PuppetCaDefect::Inventory {
            detail: format!("line {} is not Puppet's `0xSERIAL NOTBEFORE NOTAFTER /CN=NAME`: {line:?}", i + 1),
        };
        let mut parts = line.splitn(4, ' ');
        let (Some(s), Some(nb), Some(na), Some(subject)) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let (Some(serial), Some(not_before), Some(not_after), Some(cn)) = (
            store_serial(s).filter(|_| s.starts_with("0x")),
            inventory_time(nb),
            inventory_time(na),
            subject.strip_prefix("/CN="),
        ) else {
            return Err(bad());
        };
        out.push(InventoryLine { serial, not_before, not_after, certname: cn.to_string() });
    }
    Ok(out)
}

/// Each `signed/NAME.pem`: one certificate, issued by `ca` (its signature checked), whose CN is NAME.
fn check_signed(files: &[(String, Vec<u8>)], ca: &X509Certificate<'_>) -> Result<Vec<Signed>, PuppetCaDefect> {
    let mut out = Vec::with_capacity(files.len());
    for (file, bytes) in files {
        let bad = |detail: String| PuppetCaDefect::Signed { file: file.clone(), detail };
        let certname = file.strip_suffix(".pem").unwrap_or(file).to_string();
        crate::decision::check_certname(&certname).map_err(|p| bad(format!("{certname} is no certname: {p}")))?;
        let (_, der) = crate::encoding::pem::find(bytes, &["CERTIFICATE"]).map_err(|e| bad(e.to_string()))?;
        let (_, c) = x509_parser::parse_x509_certificate(&der).map_err(|e| bad(e.to_string()))?;
        if c.issuer().as_raw() != ca.subject().as_raw() {
            return Err(bad(format!("issued by {}, not by {}", c.issuer(), ca.subject())));
        }
        crate::encoding::verify_x509_signature(
            &c.signature_algorithm,
            ca,
            c.tbs_certificate.as_ref(),
            &c.signature_value.data,
        )
        .map_err(|e| bad(format!("not this CA's certificate: {e}")))?;
        let cn = c.subject().iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or_default();
        if cn != certname {
            return Err(bad(format!("its common name is {cn:?}, not {certname:?}")));
        }
        out.push(Signed {
            certname,
            serial: crate::encoding::hex(c.raw_serial()),
            pem: crate::encoding::pem::encode("CERTIFICATE", &der),
            digest: crate::encoding::sha256_hex(&der),
            not_before: format_rfc3339(c.validity().not_before.to_datetime()),
            not_after: format_rfc3339(c.validity().not_after.to_datetime()),
            cli_auth: c
                .iter_extensions()
                .any(|e| e.oid.iter().is_some_and(|arcs| arcs.eq(crate::encoding::oids::PP_CLI_AUTH.iter().copied()))),
        });
    }
    Ok(out)
}

/// Every certificate of `signed/` has its inventory line, under its name.
fn check_inventory(signed: &[Signed], inventory: &[InventoryLine]) -> Result<(), PuppetCaDefect> {
    let by_serial: HashMap<&str, &InventoryLine> = inventory.iter().map(|l| (l.serial.as_str(), l)).collect();
    for s in signed {
        match by_serial.get(s.serial.as_str()) {
            None => {
                return Err(PuppetCaDefect::Inventory {
                    detail: format!("signed/{}.pem (serial 0x{}) has no line", s.certname, s.serial),
                })
            }
            Some(l) if l.certname != s.certname => {
                return Err(PuppetCaDefect::Inventory {
                    detail: format!(
                        "serial 0x{} is {} in signed/ but {} in the inventory",
                        s.serial, s.certname, l.certname
                    ),
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `serial`: the next serial, in hex, above every serial the inventory lists.
fn check_serial(text: &str, inventory: &[InventoryLine]) -> Result<String, PuppetCaDefect> {
    let bad = |detail: String| PuppetCaDefect::Serial { detail };
    let digits = text.trim().trim_start_matches("0x").trim_start_matches("0X");
    let next = store_serial(text).ok_or_else(|| unreadable_serial(text))?;
    let value = |hex: &str| (hex.trim_start_matches('0').len(), hex.trim_start_matches('0').to_string());
    if let Some(top) = inventory.iter().max_by_key(|l| value(&l.serial)) {
        if value(&top.serial) >= value(&next) {
            return Err(bad(format!(
                "it says the next serial is 0x{}, but the inventory lists 0x{} ({})",
                digits, top.serial, top.certname
            )));
        }
    }
    Ok(next)
}

/// A `serial` file that holds no serial: not a number Puppet writes (empty, signed, not hex),
/// or longer than any certificate serial.
fn unreadable_serial(text: &str) -> PuppetCaDefect {
    let t = text.trim();
    let digits = t.trim_start_matches("0x").trim_start_matches("0X");
    let detail = if t.is_empty() {
        "it is empty (Puppet keeps the next serial there, in hexadecimal)".to_string()
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("it holds {} hexadecimal digits; a certificate serial has at most 40 (20 octets)", digits.len())
    } else {
        let shown: String = t.chars().take(40).collect();
        let more = if shown.len() < t.len() { "…" } else { "" };
        format!("{shown:?}{more} is not a hexadecimal number (Puppet writes the next serial in hex, such as 0x002A)")
    };
    PuppetCaDefect::Unreadable { file: "serial".into(), detail }
}

/// The CRLs of `ca_crl.pem`, checked.
struct Crls {
    ca_crl: Vec<u8>,
    ca_number: u128,
    root_crl: Option<(Vec<u8>, u128)>,
}

/// A CRL's number (0 when it has none; the largest value when it is beyond 128 bits).
fn crl_number(crl: &x509_parser::revocation_list::CertificateRevocationList<'_>) -> u128 {
    crl.crl_number().map_or(0, |n| {
        let bytes = n.to_bytes_be();
        let mut b = [0u8; 16];
        match bytes.len().checked_sub(16) {
            Some(0) => b.copy_from_slice(&bytes),
            Some(_) => return u128::MAX,
            None => b[16usize.saturating_sub(bytes.len())..].copy_from_slice(&bytes),
        }
        u128::from_be_bytes(b)
    })
}

/// `ca_crl.pem`: the CA's CRL (signed by the CA), and the root's when there is one, each
/// signature checked.
fn check_crls(
    pem: &[u8],
    ca: &X509Certificate<'_>,
    root: &X509Certificate<'_>,
    self_signed: bool,
) -> Result<Crls, PuppetCaDefect> {
    let crl_err = |detail: String| PuppetCaDefect::Crl { detail };
    let ders = crate::encoding::pem::find_all(pem, "X509 CRL").map_err(|e| unreadable("ca_crl.pem", e))?;
    let (mut ca_crl, mut root_crl) = (None, None);
    for der in ders {
        let (_, crl) = x509_parser::parse_x509_crl(&der).map_err(|e| unreadable("ca_crl.pem", e))?;
        let of_ca = crl.issuer().as_raw() == ca.subject().as_raw();
        let issuer = if of_ca {
            ca
        } else if crl.issuer().as_raw() == root.subject().as_raw() {
            root
        } else {
            return Err(crl_err(format!("a CRL of {}, neither the CA nor its root", crl.issuer())));
        };
        crate::encoding::verify_x509_signature(
            &crl.signature_algorithm,
            issuer,
            crl.tbs_cert_list.as_ref(),
            &crl.signature_value.data,
        )
        .map_err(|e| crl_err(format!("the CRL of {}: {e}", crl.issuer())))?;
        let number = crl_number(&crl);
        if of_ca && ca_crl.is_none() {
            ca_crl = Some((der, number));
        } else if !of_ca && root_crl.is_none() {
            root_crl = Some((der, number));
        }
    }
    let Some((ca_crl, ca_number)) = ca_crl else {
        return Err(crl_err(format!("it holds no CRL of the CA {}", ca.subject())));
    };
    if !self_signed && root_crl.is_none() {
        return Err(crl_err(format!("it holds no CRL of the root {}", root.subject())));
    }
    Ok(Crls { ca_crl, ca_number, root_crl })
}

/// The revocations of the CA's CRL, each named from `signed/` or else the inventory. Only a
/// certificate in `signed/` (its signature checked) tells when it expires: the inventory is
/// unsigned text, and an expiry taken from it could take a revocation off vouch's CRL. A
/// serial known from the inventory alone keeps no expiry, so it stays on the CRL; its name
/// is taken only if it is a certname.
fn revocations(ca_crl: &[u8], signed: &[Signed], inventory: &[InventoryLine]) -> Result<Vec<Revoked>, PuppetCaDefect> {
    let (_, crl) = x509_parser::parse_x509_crl(ca_crl).map_err(|e| unreadable("ca_crl.pem", e))?;
    let names: BTreeMap<&str, (&str, Option<&str>)> = inventory
        .iter()
        .filter(|l| crate::decision::check_certname(&l.certname).is_ok())
        .map(|l| (l.serial.as_str(), (l.certname.as_str(), None)))
        .chain(signed.iter().map(|s| (s.serial.as_str(), (s.certname.as_str(), Some(s.not_after.as_str())))))
        .collect();
    Ok(crl
        .iter_revoked_certificates()
        .map(|e| {
            let serial = crate::encoding::hex(e.raw_serial());
            let known = names.get(serial.as_str());
            Revoked {
                certname: known.map(|(n, _)| n.to_string()),
                not_after: known.and_then(|(_, t)| t.map(str::to_string)),
                time: format_rfc3339(e.revocation_date.to_datetime()),
                reason: reason_name(e.reason_code().map(|(_, c)| c.0)).to_string(),
                serial,
            }
        })
        .collect())
}

/// RFC 5280's name of a CRL entry's reason code, as vouch records it.
fn reason_name(code: Option<u8>) -> &'static str {
    match code {
        Some(1) => "keyCompromise",
        Some(2) => "caCompromise",
        Some(3) => "affiliationChanged",
        Some(4) => "superseded",
        Some(5) => "cessationOfOperation",
        Some(9) => "privilegeWithdrawn",
        _ => "unspecified",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puppet_serials_become_the_stores_der_hex() {
        assert_eq!(store_serial("0x0003").as_deref(), Some("03"));
        assert_eq!(store_serial("0006\n").as_deref(), Some("06"));
        assert_eq!(store_serial("0x0080").as_deref(), Some("0080"), "a positive DER integer keeps its 00");
        assert_eq!(store_serial("0x123").as_deref(), Some("0123"));
        assert_eq!(store_serial("0x0").as_deref(), Some("00"));
        for bad in ["", "0x", "zz", "0x12 34", &"f".repeat(41)] {
            assert_eq!(store_serial(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn inventory_lines_are_read_in_puppets_format_only() {
        let ok = parse_inventory("0x0002 2026-11-28T06:59:55UTC 2031-11-28T06:59:55UTC /CN=agent3.example.test\n\n")
            .unwrap();
        assert_eq!(
            ok,
            vec![InventoryLine {
                serial: "02".into(),
                not_before: "2026-11-28T06:59:55Z".into(),
                not_after: "2031-11-28T06:59:55Z".into(),
                certname: "agent3.example.test".into(),
            }]
        );
        for bad in [
            "0002 2026-11-28T06:59:55UTC 2031-11-28T06:59:55UTC /CN=a",
            "0x0002 yesterday 2031-11-28T06:59:55UTC /CN=a",
            "0x0002 2026-11-28T06:59:55UTC 2031-11-28T06:59:55UTC CN=a",
            "0x0002 2026-11-28T06:59:55UTC",
        ] {
            assert!(matches!(parse_inventory(bad), Err(PuppetCaDefect::Inventory { .. })), "{bad}");
        }
    }

    #[test]
    fn the_serial_file_must_be_above_every_inventory_serial() {
        let line = |serial: &str| InventoryLine {
            serial: serial.into(),
            not_before: String::new(),
            not_after: String::new(),
            certname: "a".into(),
        };
        assert_eq!(check_serial("0006\n", &[line("05"), line("03")]).unwrap(), "06");
        assert_eq!(check_serial("0100", &[line("00ff")]).unwrap(), "0100");
        assert!(matches!(check_serial("0005", &[line("05")]), Err(PuppetCaDefect::Serial { .. })));
        assert!(matches!(check_serial("00ff", &[line("0100")]), Err(PuppetCaDefect::Serial { .. })));
        assert!(matches!(check_serial("x", &[]), Err(PuppetCaDefect::Unreadable { .. })));
        assert!(matches!(check_serial("", &[]), Err(PuppetCaDefect::Unreadable { .. })));
        assert!(matches!(check_serial("-5", &[]), Err(PuppetCaDefect::Unreadable { .. })));
        let long = check_serial(&"f".repeat(70), &[]).unwrap_err().to_string();
        assert!(long.contains("70 hexadecimal digits"), "{long}");
        let behind = check_serial("0x01", &[line("05")]).unwrap_err().to_string();
        assert!(behind.contains("next serial is 0x01,"), "{behind}");
    }
}
