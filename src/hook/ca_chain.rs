//! Which CA of a bundle signed what, found by signature, never by name alone: every
//! `vouch ca init` names its master CA alike, so a fleet's bundle may hold several master
//! CAs of one name (each master of a shared store has its own), the CA's CRL body one CRL
//! per CA of the bundle, and a cache or a file may still hold the CRL of a CA rebuilt since.
//! A certificate's chain is the bundle CAs whose keys signed it, up to a self-signed one;
//! a CRL counts for the CA whose key signed it, and a CRL no CA of the bundle signed counts
//! for none (it is reported, then ignored).

use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// A CA certificate of the bundle.
pub struct Ca<'a> {
    pub der: &'a [u8],
    pub cert: X509Certificate<'a>,
}

impl Ca<'_> {
    /// Its subject, as printed in messages.
    pub fn name(&self) -> String {
        self.cert.subject().to_string()
    }

    fn self_signed(&self) -> bool {
        self.cert.subject().as_raw() == self.cert.issuer().as_raw()
    }
}

/// The bundle's certificates (DER, in bundle order), parsed.
pub fn parse_bundle(ders: &[Vec<u8>]) -> Result<Vec<Ca<'_>>, String> {
    ders.iter()
        .map(|d| {
            let (_, cert) = x509_parser::parse_x509_certificate(d).map_err(|e| e.to_string())?;
            Ok(Ca { der: d.as_slice(), cert })
        })
        .collect()
}

/// Whether `ca` is named `issuer` and its key made `signature` over `signed`.
fn signed_by(
    ca: &Ca<'_>,
    issuer: &[u8],
    algorithm: &x509_parser::x509::AlgorithmIdentifier<'_>,
    signed: &[u8],
    signature: &[u8],
) -> bool {
    ca.cert.subject().as_raw() == issuer
        && crate::encoding::verify_x509_signature(algorithm, &ca.cert, signed, signature).is_ok()
}

/// The index in `cas` of the CA whose key signed `crl`, if one did.
pub fn crl_signer(crl: &Crl<'_>, cas: &[Ca<'_>]) -> Option<usize> {
    cas.iter().position(|ca| signed_by(ca, crl.issuer_raw, &crl.algorithm, crl.tbs, crl.signature))
}

/// The CAs (indexes in `cas`) of `cert`'s chain: its issuer first, up to a self-signed CA,
/// each the bundle certificate whose key signed the one before. `None` when it does not
/// chain to the bundle.
pub fn chain_of(cert: &X509Certificate<'_>, cas: &[Ca<'_>]) -> Option<Vec<usize>> {
    let mut chain: Vec<usize> = Vec::new();
    let mut current = cert;
    // Each CA once: a bundle whose certificates sign each other in a circle ends here.
    while chain.len() < cas.len() {
        let issuer = current.issuer().as_raw();
        let next = cas.iter().enumerate().position(|(i, ca)| {
            !chain.contains(&i)
                && signed_by(
                    ca,
                    issuer,
                    &current.signature_algorithm,
                    current.tbs_certificate.as_ref(),
                    &current.signature_value.data,
                )
        })?;
        chain.push(next);
        let ca = cas.get(next)?;
        if ca.self_signed() {
            return Some(chain);
        }
        current = &ca.cert;
    }
    None
}

/// A CRL, read by walking its DER (RFC 5280 5.1): the fields that say who signed it and how
/// recent it is. Its revoked certificates (megabytes on a large CRL, read on every call of
/// the classifier) are stepped over, not parsed: webpki reads them where they count.
pub struct Crl<'a> {
    /// The whole CertificateList.
    pub der: &'a [u8],
    /// tbsCertList, whole: what the signature covers.
    tbs: &'a [u8],
    algorithm: x509_parser::x509::AlgorithmIdentifier<'a>,
    signature: &'a [u8],
    issuer_raw: &'a [u8],
    /// thisUpdate as `YYYYMMDDHHMMSSZ` (UTCTime widened), which orders as text.
    this_update: String,
    /// The crlNumber extension's value, without leading zero bytes.
    number: Option<&'a [u8]>,
}

impl<'a> Crl<'a> {
    /// Reads `der` as a CertificateList.
    pub fn from_der(der: &'a [u8]) -> Result<Crl<'a>, String> {
        use crate::encoding::der::Reader;
        let e = |e: crate::encoding::der::DerError| e.to_string();
        let mut outer = Reader::new(der);
        let list = outer.next_tag(0x30, "CertificateList").map_err(e)?;
        // Nothing after it: webpki refuses a CRL with trailing data, so must this reading.
        outer.finish("CRL").map_err(e)?;
        let mut r = Reader::new(list.content);
        let tbs = r.next_tag(0x30, "tbsCertList").map_err(e)?;
        let algorithm = r.next_tag(0x30, "signatureAlgorithm").map_err(e)?;
        let signature = r.next_tag(0x03, "signatureValue").map_err(e)?;
        r.finish("CertificateList").map_err(e)?;
        let (_, algorithm) = x509_parser::x509::AlgorithmIdentifier::from_der(algorithm.raw)
            .map_err(|err| format!("signatureAlgorithm: {err}"))?;
        // A BIT STRING's first content byte counts the unused bits: none in a signature.
        let signature = match signature.content.split_first() {
            Some((0, bits)) => bits,
            _ => return Err("signatureValue: not a whole number of bytes".into()),
        };
        let mut f = Reader::new(tbs.content);
        let mut next = f.any().map_err(e)?;
        if next.tag == 0x02 {
            next = f.any().map_err(e)?;
        }
        if next.tag != 0x30 {
            return Err("tbsCertList: no signature algorithm".into());
        }
        let issuer = f.next_tag(0x30, "issuer").map_err(e)?;
        let this_update = f.any().map_err(e)?;
        let this_update = sortable_time(this_update.tag, this_update.content)?;
        let mut number = None;
        while !f.is_empty() {
            let field = f.any().map_err(e)?;
            match field.tag {
                0x17 | 0x18 | 0x30 => {}
                0xa0 => number = crl_number(field.content)?,
                other => return Err(format!("tbsCertList: an unexpected field (tag 0x{other:02x})")),
            }
        }
        Ok(Crl { der, tbs: tbs.raw, algorithm, signature, issuer_raw: issuer.raw, this_update, number })
    }

    /// The issuer's name, as printed in messages.
    pub fn issuer(&self) -> String {
        use x509_parser::prelude::FromDer;
        x509_parser::x509::X509Name::from_der(self.issuer_raw)
            .map(|(_, n)| n.to_string())
            .unwrap_or_else(|_| "an unreadable name".into())
    }

    /// The CRL number (crlNumber), in decimal.
    pub fn number(&self) -> Option<String> {
        self.number.map(|n| x509_parser::num_bigint::BigUint::from_bytes_be(n).to_string())
    }

    /// Whether this CRL's number is lower than `other`'s, or missing while `other` has one.
    pub fn numbered_below(&self, other: &Crl<'_>) -> bool {
        match (self.number, other.number) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(b)) => (a.len(), a) < (b.len(), b),
        }
    }
}

/// A UTCTime (0x17) or GeneralizedTime (0x18) as `YYYYMMDDHHMMSSZ` (RFC 5280 4.1.2.5: a
/// two-digit year below 50 is 20YY).
fn sortable_time(tag: u8, content: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(content).map_err(|_| "thisUpdate: not text".to_string())?;
    match (tag, text.get(..2).and_then(|y| y.parse::<u8>().ok())) {
        (0x17, Some(yy)) => Ok(format!("{}{text}", if yy < 50 { "20" } else { "19" })),
        (0x18, _) => Ok(text.to_string()),
        _ => Err("thisUpdate: not a time".into()),
    }
}

/// The crlNumber (2.5.29.20) in a CRL's `[0]` extensions field, without leading zero bytes.
fn crl_number(explicit: &[u8]) -> Result<Option<&[u8]>, String> {
    use crate::encoding::der::Reader;
    const CRL_NUMBER: [u8; 3] = [0x55, 0x1d, 0x14];
    let e = |e: crate::encoding::der::DerError| e.to_string();
    let extensions = Reader::new(explicit).next_tag(0x30, "crlExtensions").map_err(e)?;
    let mut each = Reader::new(extensions.content);
    while !each.is_empty() {
        let extension = each.next_tag(0x30, "Extension").map_err(e)?;
        let mut x = Reader::new(extension.content);
        if x.next_tag(0x06, "extnID").map_err(e)?.content != CRL_NUMBER {
            continue;
        }
        let mut value = x.any().map_err(e)?;
        if value.tag == 0x01 {
            value = x.any().map_err(e)?;
        }
        let int = Reader::new(value.content).next_tag(0x02, "CRLNumber").map_err(e)?;
        let start = int.content.iter().position(|b| *b != 0).unwrap_or(int.content.len());
        return Ok(int.content.get(start..));
    }
    Ok(None)
}

/// The CRLs of one file or answer, sorted by the CA of the bundle that signed each.
pub struct SortedCrls<'a> {
    /// Per CA of the bundle (same index), its newest CRL here (highest CRL number, then
    /// latest thisUpdate), if any.
    pub newest: Vec<Option<Crl<'a>>>,
    /// Whether each CRL (in order) was signed by a CA of the bundle.
    pub verified: Vec<bool>,
    /// The issuers of the CRLs no CA of the bundle signed.
    pub foreign: Vec<String>,
}

impl<'a> SortedCrls<'a> {
    /// The newest CRL that `ca` (an index in the bundle) signed.
    pub fn of(&self, ca: usize) -> Option<&Crl<'a>> {
        self.newest.get(ca).and_then(Option::as_ref)
    }
}

/// Sorts `crl_ders` by signer among `cas`. An unreadable CRL is an error.
pub fn sort_crls<'a>(crl_ders: &'a [Vec<u8>], cas: &[Ca<'_>]) -> Result<SortedCrls<'a>, String> {
    let mut sorted =
        SortedCrls { newest: (0..cas.len()).map(|_| None).collect(), verified: Vec::new(), foreign: Vec::new() };
    for d in crl_ders {
        let crl = Crl::from_der(d).map_err(|e| format!("an unreadable CRL: {e}"))?;
        let Some(i) = crl_signer(&crl, cas) else {
            sorted.verified.push(false);
            sorted.foreign.push(crl.issuer());
            continue;
        };
        sorted.verified.push(true);
        if let Some(slot) = sorted.newest.get_mut(i) {
            if slot.as_ref().is_none_or(|kept| newer(&crl, kept)) {
                *slot = Some(crl);
            }
        }
    }
    Ok(sorted)
}

/// Whether `a` supersedes `b` (two CRLs of one CA).
fn newer(a: &Crl<'_>, b: &Crl<'_>) -> bool {
    if a.number.is_some() && b.number.is_some() && a.number != b.number {
        return b.numbered_below(a);
    }
    a.this_update > b.this_update
}

#[cfg(test)]
pub(crate) mod tests {
    //! A root and two master CAs of the same name (as two `vouch ca init` under one root
    //! make them), a third one outside the bundle, and a node of each master.
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CertificateRevocationListParams, DnType, IsCa, Issuer, KeyIdMethod,
        KeyPair, SerialNumber,
    };

    pub(crate) struct Pki {
        pub bundle: String,
        pub root: (String, KeyPair),
        pub masters: Vec<(String, KeyPair)>,
    }

    fn ca_params(cn: &str) -> CertificateParams {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        p
    }

    /// A root, `n` masters named alike under it; the bundle holds the first `in_bundle` masters.
    pub(crate) fn pki(n: usize, in_bundle: usize) -> Pki {
        let root_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let root = ca_params("Test Root CA").self_signed(&root_key).unwrap();
        let issuer = Issuer::new(ca_params("Test Root CA"), &root_key);
        let masters: Vec<(String, KeyPair)> = (0..n)
            .map(|_| {
                let k = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
                (ca_params("Test Master CA").signed_by(&k, &issuer).unwrap().pem(), k)
            })
            .collect();
        let mut bundle = String::new();
        for (pem, _) in masters.iter().take(in_bundle) {
            bundle.push_str(pem);
        }
        bundle.push_str(&root.pem());
        Pki { bundle, root: (root.pem(), root_key), masters }
    }

    /// A node certificate from master `m`.
    pub(crate) fn node(pki: &Pki, m: usize, cn: &str) -> Vec<u8> {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        p.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let (_, mkey) = &pki.masters[m];
        p.signed_by(&key, &Issuer::new(ca_params("Test Master CA"), mkey)).unwrap().der().to_vec()
    }

    /// A CRL (PEM) by master `m` (`None`: the root), numbered `number`, revoking `serials`.
    pub(crate) fn crl(pki: &Pki, m: Option<usize>, number: u64, revoked: &[&[u8]]) -> String {
        let (cn, key) = match m {
            Some(i) => ("Test Master CA", &pki.masters[i].1),
            None => ("Test Root CA", &pki.root.1),
        };
        let now = time::OffsetDateTime::now_utc();
        let params = CertificateRevocationListParams {
            this_update: now - time::Duration::hours(1),
            next_update: now + time::Duration::days(30),
            crl_number: SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|s| rcgen::RevokedCertParams {
                    serial_number: SerialNumber::from_slice(s),
                    revocation_time: now - time::Duration::minutes(30),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        params.signed_by(&Issuer::new(ca_params(cn), key)).unwrap().pem().unwrap()
    }

    fn ders(pem: &str, label: &str) -> Vec<Vec<u8>> {
        crate::encoding::pem::find_all(pem.as_bytes(), label).unwrap()
    }

    #[test]
    fn chains_and_crls_are_found_by_signature_among_cas_of_one_name() {
        let pki = pki(3, 2);
        let bundle = ders(&pki.bundle, "CERTIFICATE");
        let cas = parse_bundle(&bundle).unwrap();
        for m in 0..2 {
            let der = node(&pki, m, "n.test");
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            assert_eq!(chain_of(&cert, &cas), Some(vec![m, 2]), "master {m}");
        }
        let der = node(&pki, 2, "n.test");
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert_eq!(chain_of(&cert, &cas), None, "a master outside the bundle");
        let body =
            [crl(&pki, Some(2), 9, &[]), crl(&pki, Some(1), 4, &[]), crl(&pki, Some(1), 5, &[])].concat().to_string()
                + &crl(&pki, None, 1, &[])
                + &crl(&pki, Some(0), 7, &[]);
        let crls = ders(&body, "X509 CRL");
        let sorted = sort_crls(&crls, &cas).unwrap();
        assert_eq!(sorted.verified, [false, true, true, true, true]);
        assert_eq!(sorted.foreign.len(), 1);
        let number = |i| sorted.of(i).and_then(Crl::number);
        assert_eq!([number(0), number(1), number(2)], [Some("7".into()), Some("5".into()), Some("1".into())]);
    }

    /// Issue 36: nodes of two masters named alike, verified against one CRL file holding a
    /// CRL per CA (the other master's first), and one of a master outside the bundle: each
    /// node is checked against its own master's CRL, the stray CRL is ignored (a warning);
    /// a file without the CRL of a master a chain uses is its own error.
    #[test]
    fn verify_leaf_uses_the_crl_each_ca_of_the_chain_signed() {
        use crate::hook::puppet_cadir::{verify_leaf, CrlExpiry};
        use std::path::Path;
        let p = pki(3, 2);
        let (a, b) = (node(&p, 0, "a.test"), node(&p, 1, "b.test"));
        let serial = |der: &[u8]| x509_parser::parse_x509_certificate(der).unwrap().1.raw_serial().to_vec();
        let revoked_b = serial(&b);
        let file = [
            crl(&p, Some(2), 1, &[]),
            crl(&p, Some(1), 2, &[&revoked_b]),
            crl(&p, Some(0), 2, &[]),
            crl(&p, None, 1, &[]),
        ]
        .concat();
        let now = time::OffsetDateTime::now_utc();
        let bundle = (p.bundle.as_bytes(), Path::new("bundle.pem"));
        let check = |der: &[u8], cn: &str, crls: &str| {
            verify_leaf(der, cn, bundle, &[(crls.as_bytes(), Path::new("crl.pem"))], CrlExpiry::Enforce, now)
        };
        let warnings = check(&a, "a.test", &file).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let e = check(&b, "b.test", &file).unwrap_err().to_string();
        assert!(e.contains("revoked"), "{e}");
        let without_b = [crl(&p, Some(0), 2, &[]), crl(&p, None, 1, &[]), crl(&p, Some(2), 1, &[])].concat();
        check(&a, "a.test", &without_b).unwrap();
        let e = check(&b, "b.test", &without_b).unwrap_err();
        assert!(matches!(&e, crate::error::Error::CrlNotFromBundle { ca: Some(_), foreign, .. } if foreign.len() == 1));
        // A node of the master outside the bundle: its certificate is the cause, not the CRLs.
        let c = node(&p, 2, "c.test");
        let e = check(&c, "c.test", &crl(&p, Some(2), 1, &[])).unwrap_err();
        assert!(
            matches!(&e, crate::error::Error::NotValid { detail, .. } if detail.contains("does not verify")),
            "{e}"
        );
    }

    /// A CRL read by walking its DER says what x509-parser's whole parse says: its issuer and
    /// number (rcgen's CRLs, large and small, and a fixture).
    #[test]
    fn a_crl_read_by_walking_is_the_one_a_whole_parse_reads() {
        use x509_parser::revocation_list::CertificateRevocationList;
        let p = pki(1, 1);
        let serials: Vec<[u8; 4]> = (0u32..2000).map(|i| (i + 1).to_be_bytes()).collect();
        let refs: Vec<&[u8]> = serials.iter().map(|s| s.as_slice()).collect();
        let mut pems = vec![crl(&p, Some(0), 300, &refs), crl(&p, None, 0, &[]), crl(&p, None, 255, &[])];
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/pki/conductors_crl.pem");
        pems.push(std::fs::read_to_string(fixture).unwrap());
        for pem in &pems {
            for der in ders(pem, "X509 CRL") {
                let walked = Crl::from_der(&der).unwrap();
                let (_, whole) = CertificateRevocationList::from_der(&der).unwrap();
                assert_eq!(walked.issuer(), whole.issuer().to_string());
                assert_eq!(walked.number(), whole.crl_number().map(|n| n.to_string()));
                assert_eq!(walked.der, whole.as_raw());
            }
        }
        let (low, high) = (ders(&pems[1], "X509 CRL"), ders(&pems[2], "X509 CRL"));
        let (low, high) = (Crl::from_der(&low[0]).unwrap(), Crl::from_der(&high[0]).unwrap());
        assert!(low.numbered_below(&high) && !high.numbered_below(&low) && newer(&high, &low));
        assert!(Crl::from_der(b"\x30\x03\x02\x01\x00").is_err());
    }
}
