//! A file store filled quickly with real certificates of its master CA (as
//! examples/bench_store.rs does): `signed/`, `serials/` and `inventory.txt`, written without
//! fsync. Issuing thousands through the CLI one by one would take minutes.

use rcgen::{CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType, SerialNumber};
use std::io::Write;
use std::path::Path;
use time::OffsetDateTime;

/// The certificate (PEM) of `name` (CN and file name) from the CA of `dir`, valid from
/// `nb` to `na`, with `serial` (16 bytes).
pub fn cert_pem(
    issuer: &Issuer<'_, KeyPair>,
    key: &KeyPair,
    cn: Option<&str>,
    serial: &[u8],
    nb: OffsetDateTime,
    na: OffsetDateTime,
) -> String {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    if let Some(cn) = cn {
        dn.push(DnType::CommonName, cn);
        p.subject_alt_names = vec![SanType::DnsName(cn.to_string().try_into().unwrap())];
    } else {
        dn.push(DnType::OrganizationName, "no common name");
    }
    p.distinguished_name = dn;
    p.serial_number = Some(SerialNumber::from_slice(serial));
    p.not_before = nb;
    p.not_after = na;
    p.is_ca = IsCa::ExplicitNoCa;
    p.signed_by(key, issuer).unwrap().pem()
}

/// The issuer of the CA in `dir` (its `ca/ca_crt.pem` and `ca/ca_key.pem`).
pub fn issuer(dir: &Path) -> Issuer<'static, KeyPair> {
    let ca = dir.join("ca");
    let vouch::issuance::bootstrap::CertAndKey { cert_der, key } =
        vouch::issuance::bootstrap::load_cert_and_key(&ca.join("ca_crt.pem"), &ca.join("ca_key.pem")).unwrap();
    Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(cert_der.as_slice()), key).unwrap()
}

/// The serial (hex) of the `i`th generated certificate: distinct, positive, 16 bytes.
pub fn serial_of(i: usize) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[0] = 0x5a;
    s[8..].copy_from_slice(&(i as u64).to_be_bytes());
    s
}

/// Writes a certificate for each of `names` into the store of the CA in `dir` (valid from a
/// day before `now` for a year, or already expired for the names `expired` says), on two threads.
pub fn fill(dir: &Path, names: &[String], now: OffsetDateTime, expired: &(dyn Fn(usize) -> bool + Sync)) {
    fill_with(dir, names, now, expired, true)
}

/// [`fill`]; without `records`, no `serials/` (what a dry run of `vouch reconcile` never reads:
/// a million-certificate store in half the disk space).
pub fn fill_with(
    dir: &Path,
    names: &[String],
    now: OffsetDateTime,
    expired: &(dyn Fn(usize) -> bool + Sync),
    records: bool,
) {
    let ca = dir.join("ca");
    for d in ["signed", "serials", "requests"] {
        std::fs::create_dir_all(ca.join(d)).unwrap();
    }
    let threads = 2;
    let inventory: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let ca = ca.clone();
                let dir = dir.to_path_buf();
                sc.spawn(move || {
                    let issuer = issuer(&dir);
                    let key = KeyPair::generate().unwrap();
                    let mut inv = String::new();
                    for i in (t..names.len()).step_by(threads) {
                        let name = &names[i];
                        let (nb, na) = if expired(i) {
                            (now - time::Duration::days(400), now - time::Duration::days(35))
                        } else {
                            (now - time::Duration::days(1), now + time::Duration::days(365))
                        };
                        let serial = serial_of(i);
                        let hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
                        let pem = cert_pem(&issuer, &key, Some(name), &serial, nb, na);
                        std::fs::write(ca.join("signed").join(format!("{name}.pem")), pem).unwrap();
                        let (nbs, nas) =
                            (vouch::encoding::time::format_rfc3339(nb), vouch::encoding::time::format_rfc3339(na));
                        let rec = serde_json::json!({
                            "serial": hex, "certname": name, "state": "issued",
                            "digest": "", "not_before": nbs, "not_after": nas,
                        });
                        if records {
                            let shard = ca.join("serials").join(&hex[..2]);
                            std::fs::create_dir_all(&shard).unwrap();
                            std::fs::write(shard.join(format!("{hex}.json")), serde_json::to_vec(&rec).unwrap())
                                .unwrap();
                        }
                        inv.push_str(&format!("0x{hex} {nbs} {nas} /CN={name}\n"));
                    }
                    inv
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(ca.join("inventory.txt")).unwrap();
    for inv in inventory {
        f.write_all(inv.as_bytes()).unwrap();
    }
}
