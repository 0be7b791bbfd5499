//! Fills a CA store with N real certificates (signed by the store's master CA)
//! and R revocations, in the layout `vouch` uses, to measure lookups, `list`
//! and CRL generation at scale. Setup only: it writes without fsync.
//!
//!     vouch --dir /var/tmp/big ca init
//!     cargo run --release --example bench_store -- /var/tmp/big 1000000 100000
//!     # then time: vouch --dir /var/tmp/big enc node-500000.example.test, list --all, crl
//!
//! See docs/benchmarks.md for the figures.

use rcgen::{CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType, SerialNumber};
use std::io::Write;
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

type R<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(args.get(1).ok_or("usage: bench_store DIR N REVOKED")?);
    let n: usize = args.get(2).ok_or("N")?.parse()?;
    let revoked: usize = args.get(3).ok_or("REVOKED")?.parse()?;
    let ca = dir.join("ca");
    for d in ["signed", "serials", "pending", "tmp", "requests"] {
        std::fs::create_dir_all(ca.join(d))?;
    }
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let start = std::time::Instant::now();
    let chunks: Vec<(usize, usize)> = (0..threads).map(|t| (t * n / threads, (t + 1) * n / threads)).collect();
    let handles: Vec<_> = chunks
        .into_iter()
        .map(|(lo, hi)| {
            let ca = ca.clone();
            std::thread::spawn(move || fill(&ca, lo, hi, revoked))
        })
        .collect();
    let mut inventory = String::new();
    let mut revocations = String::new();
    for h in handles {
        let (inv, rev) = h.join().map_err(|_| "thread panicked")??;
        inventory.push_str(&inv);
        revocations.push_str(&rev);
    }
    std::fs::File::create(ca.join("inventory.txt"))?.write_all(inventory.as_bytes())?;
    std::fs::File::create(ca.join("revocations.txt"))?.write_all(revocations.as_bytes())?;
    eprintln!("wrote {n} certificates ({revoked} revoked) in {:.1}s", start.elapsed().as_secs_f64());
    Ok(())
}

fn fill(ca: &Path, lo: usize, hi: usize, revoked: usize) -> R<(String, String)> {
    let vouch::issuance::bootstrap::CertAndKey { cert_der, key } =
        vouch::issuance::bootstrap::load_cert_and_key(&ca.join("ca_crt.pem"), &ca.join("ca_key.pem"))?;
    let issuer = Issuer::from_ca_cert_der(&rustls_pki_types::CertificateDer::from(cert_der.as_slice()), key)?;
    let node_key = KeyPair::generate()?;
    let now = OffsetDateTime::now_utc();
    let (nb, na) = (now - time::Duration::days(1), now + time::Duration::days(5 * 365));
    let (nbs, nas) = (vouch::encoding::time::format_rfc3339(nb), vouch::encoding::time::format_rfc3339(na));
    let mut inv = String::new();
    let mut rev = String::new();
    for i in lo..hi {
        let name = format!("node-{i}.example.test");
        let mut serial = [0u8; 16];
        aws_lc_rs::rand::fill(&mut serial).map_err(|_| "rand")?;
        serial[0] = (serial[0] & 0x7f) | 0x40;
        let hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name.as_str());
        p.distinguished_name = dn;
        p.subject_alt_names = vec![SanType::DnsName(name.clone().try_into()?)];
        p.serial_number = Some(SerialNumber::from_slice(&serial));
        p.not_before = nb;
        p.not_after = na;
        p.is_ca = IsCa::ExplicitNoCa;
        p.custom_extensions = vec![rcgen::CustomExtension::from_oid_content(
            vouch::encoding::oids::ATTR_CLASSIFICATION,
            vouch::encoding::der::utf8_string("Y2xhc3NlczogW250cF0K"),
        )];
        let cert = p.signed_by(&node_key, &issuer)?;
        std::fs::write(ca.join("signed").join(format!("{name}.pem")), cert.pem())?;
        let is_revoked = i < revoked;
        let rec = serde_json::json!({
            "serial": hex, "certname": name, "state": if is_revoked { "revoked" } else { "issued" },
            "digest": "", "not_before": nbs, "not_after": nas,
            "revoked_at": if is_revoked { Some(&nbs) } else { None },
            "reason": if is_revoked { Some("keyCompromise") } else { None },
        });
        let shard = ca.join("serials").join(&hex[..2]);
        std::fs::create_dir_all(&shard)?;
        std::fs::write(shard.join(format!("{hex}.json")), serde_json::to_vec(&rec)?)?;
        inv.push_str(&format!("0x{hex} {nbs} {nas} /CN={name}\n"));
        if is_revoked {
            rev.push_str(&format!("{hex} {nbs} keyCompromise {name}\n"));
        }
    }
    Ok((inv, rev))
}
