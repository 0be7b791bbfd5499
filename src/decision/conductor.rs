//! Who vouched: the conductor certificate's chain to the policy's trust, its EKU, its
//! CRLs, and the attributes' signature.

use super::scope::{check_scope, check_server_names, scope_applies};
use super::{Refusal, Refused};
use crate::encoding::csr::{self, KeyKind};
use crate::encoding::oids;
use crate::policy::{Policy, Window};
use crate::vouching::attrs;
use crate::vouching::classification::Classification;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rustls_pki_types::{CertificateDer, UnixTime};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;

/// Who vouched.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conductor {
    /// The conductor certificate's subject.
    pub subject: String,
    /// SHA-256 of its DER, lowercase hex.
    pub fingerprint: String,
    /// Its serial, hex.
    pub serial: String,
    /// The subject of the certificate that issued it.
    pub issuer: String,
    /// Its notAfter, RFC 3339.
    pub not_after: String,
    /// Its subject and issuer names as read from the DER (scopes match these, not the strings).
    #[serde(skip)]
    pub subject_dn: Option<crate::encoding::dn::Dn>,
    #[serde(skip)]
    pub issuer_dn: Option<crate::encoding::dn::Dn>,
}

/// Renewal: whether the conductor that vouched for `certname` (its certificate, as the
/// store recorded it at issuance) would still be accepted by the current policy: not on a
/// conductor CRL, still chaining to a trusted root through listed intermediates, still
/// carrying EKU .2.0 and digitalSignature, and still matching a scope that covers this
/// certname and classification. Its own expiry does not count (a node's identity does not
/// lapse with its launcher's: the chain is checked at a time within the conductor's
/// validity), nor does the attributes' lifetime. Pure, like [`super::decide`].
pub fn recheck_conductor(
    conductor_der: &[u8],
    certname: &str,
    classification: Option<&Classification>,
    alt_names: &[String],
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<Conductor, Refused> {
    let (info, _, mut reasons) = match check_conductor_der(conductor_der.to_vec(), policy, now, true) {
        Ok(checked) => checked,
        Err(r) => return Err(Refused { reasons: vec![r], conductor: None, held: None }),
    };
    if !policy.scopes.is_empty() {
        match policy.scopes.iter().find(|sc| scope_applies(sc, &info)) {
            None => reasons.push(Refusal::ConductorUnscoped { subject: info.subject.clone() }),
            Some(scope) => check_scope(scope, certname, None, now, classification, &mut reasons),
        }
    }
    // A server's alt names must still be allowed.
    check_server_names(&info, certname, alt_names, policy, &mut reasons);
    if reasons.is_empty() {
        Ok(info)
    } else {
        Err(Refused { reasons, conductor: Some(info), held: None })
    }
}

/// The data directory's own root CRL and recorded root revocations, as they are now, for a
/// conductor already judged ([`check_own_crl`] alone): the CA asks again under the store's
/// lock, so that a revocation completed while a granted request waited for the lock is not
/// missed. `None`: not refused by them.
pub fn own_crl_refusal(conductor_der: &[u8], policy: &Policy, now: OffsetDateTime) -> Option<Refusal> {
    // Nothing to count (no root CRL, nothing recorded): no parse under the lock.
    let own = policy.trust.own_crl.get()?;
    // Nor when both read and neither names the conductor's serial (the common case: one
    // look-up each, no certificate parse under the lock). Anything else takes the full path.
    if own.unreadable.is_none() {
        if let Some(serial) = raw_serial(conductor_der) {
            let listed = own.crl.as_ref().is_some_and(|crl| !matches!(crl.find_serial(serial), Ok(None)));
            if !listed && !own.recorded.contains(crate::policy::RootCrl::serial_value(serial)) {
                return None;
            }
        }
    }
    let (_, cert) = x509_parser::parse_x509_certificate(conductor_der).ok()?;
    let mut problems = Vec::new();
    check_own_crl(conductor_der, &cert, &cert.subject().to_string(), policy, now, &mut problems);
    problems.into_iter().next()
}

/// A certificate's serial number as its DER content octets (what `raw_serial` of
/// x509-parser gives), read without parsing the rest; `None` if it is not where a
/// certificate keeps it.
fn raw_serial(der: &[u8]) -> Option<&[u8]> {
    use crate::encoding::der::Reader;
    let cert = Reader::new(der).next_tag(0x30, "certificate").ok()?;
    let mut tbs = Reader::new(Reader::new(cert.content).next_tag(0x30, "tbsCertificate").ok()?.content);
    let mut first = tbs.any().ok()?;
    if first.tag == 0xa0 {
        first = tbs.any().ok()?;
    }
    (first.tag == 0x02 && !first.content.is_empty()).then_some(first.content)
}

/// Reads the conductor certificate, verifies its chain, EKU and key usage.
/// Returns who it is, its DER, and chain problems (the certificate was readable).
pub(super) fn check_conductor(
    value: &str,
    policy: &Policy,
    now: OffsetDateTime,
) -> Result<(Conductor, Vec<u8>, Vec<Refusal>), Refusal> {
    let der = attrs::decode_conductor_cert(value).map_err(|detail| Refusal::ConductorMalformed { detail })?;
    check_conductor_der(der, policy, now, false)
}

/// [`check_conductor`] on DER. With `at_validity`, the chain is checked at `now` moved
/// into the conductor's own validity period (renewal: a conductor that has since expired
/// still vouched while it was valid; revocation, trust, EKU and key usage still count).
fn check_conductor_der(
    der: Vec<u8>,
    policy: &Policy,
    now: OffsetDateTime,
    at_validity: bool,
) -> Result<(Conductor, Vec<u8>, Vec<Refusal>), Refusal> {
    let (rest, cert) =
        x509_parser::parse_x509_certificate(&der).map_err(|e| Refusal::ConductorMalformed { detail: e.to_string() })?;
    if !rest.is_empty() {
        return Err(Refusal::ConductorMalformed { detail: "trailing bytes after the certificate".into() });
    }
    // One SHA-256 of the certificate: its fingerprint and the chain cache's key.
    let digest = crate::policy::digest(&der);
    let info = conductor_info(&cert, &digest);
    let at = if at_validity { within_validity(&cert, now) } else { now };
    let mut problems = Vec::new();
    if let Some(detail) = serial_problem(cert.raw_serial()) {
        problems.push(Refusal::ConductorMalformed { detail });
    }
    check_chain(&der, digest, &cert, &info.subject, policy, at, &mut problems);
    check_own_crl(&der, &cert, &info.subject, policy, at, &mut problems);
    check_leaf_eku(&cert, &info.subject, &mut problems);
    check_leaf_key_usage(&cert, &info.subject, &mut problems);
    Ok((info, der, problems))
}

/// Why a conductor's serial could not be revoked, if it could not: a CRL lists a serial as
/// the DER INTEGER of a non-negative number (RFC 5280 4.1.2.2, 5.1.2.6), and CRLs are matched
/// by those bytes (webpki, and vouch's own root CRL, which writes the number). A negative
/// serial (`openssl x509 -set_serial -1234`) or one with a needless leading zero octet would be
/// listed as another number, and a revoked conductor would stay accepted wherever the CRL is
/// all there is.
fn serial_problem(raw: &[u8]) -> Option<String> {
    match raw {
        [] => Some("its serial number is empty".into()),
        [first, ..] if first & 0x80 != 0 => {
            Some("its serial number is negative: no CRL could list it (RFC 5280 4.1.2.2: positive)".into())
        }
        [0, second, ..] if second & 0x80 == 0 => Some(
            "its serial number has a needless leading zero octet (not DER): no CRL could list it as it is written"
                .into(),
        ),
        _ => None,
    }
}

/// Who the certificate names, as [`Conductor`] reports it (`digest`: its DER's SHA-256).
fn conductor_info(cert: &X509Certificate<'_>, digest: &[u8; 32]) -> Conductor {
    Conductor {
        subject: cert.subject().to_string(),
        fingerprint: crate::encoding::hex(digest),
        serial: cert.raw_serial_as_string(),
        issuer: cert.issuer().to_string(),
        not_after: crate::encoding::time::format_rfc3339(cert.validity().not_after.to_datetime()),
        subject_dn: crate::encoding::dn::Dn::from_der(cert.subject().as_raw()).ok(),
        issuer_dn: crate::encoding::dn::Dn::from_der(cert.issuer().as_raw()).ok(),
    }
}

/// The conductor EKU, 1.3.6.1.4.1.34380.2.0, as DER content (webpki's form).
static EKU: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x8c, 0x4c, 0x02, 0x00];

/// `now` moved into the certificate's validity period.
fn within_validity(cert: &X509Certificate<'_>, now: OffsetDateTime) -> OffsetDateTime {
    let validity = cert.validity();
    // Not Ord::clamp: it panics on a certificate whose notBefore is after its notAfter.
    now.min(validity.not_after.to_datetime()).max(validity.not_before.to_datetime())
}

/// Chain: webpki, with EKU .2.0 required wherever an EKU extension is present. A chain
/// already verified (the policy's chain cache holds it for `at`) is not verified again; one
/// verified now is cached for the window in which every certificate in it is valid.
fn check_chain(
    der: &[u8],
    digest: [u8; 32],
    cert: &X509Certificate<'_>,
    subject: &str,
    policy: &Policy,
    at: OffsetDateTime,
    problems: &mut Vec<Refusal>,
) {
    let ee_der = CertificateDer::from(der);
    let ee = match webpki::EndEntityCert::try_from(&ee_der) {
        Ok(ee) => ee,
        Err(e) => return problems.push(Refusal::ConductorMalformed { detail: format!("{e:?}") }),
    };
    if policy.chain_cache.holds(&digest, at.unix_timestamp()) {
        return;
    }
    match verify_chain(&ee, cert, policy, at) {
        Ok(window) => policy.chain_cache.insert(digest, window),
        Err(e) => problems.push(chain_refusal(e, subject)),
    }
}

/// webpki's verification of the conductor's chain to the policy's roots through its
/// intermediates, against its CRLs, at `at`. Returns the window in which the chain holds.
fn verify_chain(
    ee: &webpki::EndEntityCert<'_>,
    cert: &X509Certificate<'_>,
    policy: &Policy,
    at: OffsetDateTime,
) -> Result<Window, webpki::Error> {
    let anchors: Vec<_> = policy
        .trust
        .roots
        .iter()
        .filter_map(|r| {
            let d = CertificateDer::from(r.as_slice());
            webpki::anchor_from_trusted_cert(&d).ok().map(|a| a.to_owned())
        })
        .collect();
    let intermediates: Vec<CertificateDer<'_>> =
        policy.trust.intermediates.iter().map(|d| CertificateDer::from(d.as_slice())).collect();
    let crls: Vec<webpki::CertRevocationList<'_>> = policy
        .trust
        .crls
        .iter()
        .filter_map(|d| webpki::BorrowedCertRevocationList::from_der(d).ok().map(Into::into))
        .collect();
    let crl_refs: Vec<&webpki::CertRevocationList<'_>> = crls.iter().collect();
    let revocation = webpki::RevocationOptionsBuilder::new(&crl_refs).ok().map(|b| {
        b.with_depth(webpki::RevocationCheckDepth::Chain)
            .with_status_policy(webpki::UnknownStatusPolicy::Allow)
            .with_expiration_policy(webpki::ExpirationPolicy::Ignore)
            .build()
    });
    ee.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        &intermediates,
        unix_time(at),
        webpki::KeyUsage::required_if_present(EKU),
        revocation,
        None,
    )
    .map(|path| chain_window(cert, path.intermediate_certificates()))
}

/// The data directory's own root CRL and recorded root revocations
/// ([`crate::policy::OwnCrl`]), whatever `conductors.crls` lists, and never cached. A conductor
/// this root issued (webpki: a path from the conductor to the root alone) is refused when
/// `root_revocations.txt` records its serial, or when the root CRL lists it and webpki confirms
/// that the CRL revokes it (the root signed the CRL; an expired CRL still counts); and, deny by
/// default, whenever either file is there but cannot be read. The look-ups are map searches;
/// webpki runs only for a listed or recorded serial, or while a file does not read.
fn check_own_crl(
    der: &[u8],
    cert: &X509Certificate<'_>,
    subject: &str,
    policy: &Policy,
    at: OffsetDateTime,
    problems: &mut Vec<Refusal>,
) {
    let Some(own) = policy.trust.own_crl.get() else { return };
    let listed = own.crl.as_ref().is_some_and(|crl| matches!(crl.find_serial(cert.raw_serial()), Ok(Some(_))));
    let recorded = own.recorded.contains(crate::policy::RootCrl::serial_value(cert.raw_serial()));
    if !listed && !recorded && own.unreadable.is_none() {
        return;
    }
    if problems.iter().any(|p| matches!(p, Refusal::ConductorRevoked { .. })) {
        return;
    }
    let subject_owned = || subject.to_string();
    let Some(root) = own.root.as_deref() else {
        // The root certificate itself did not read: which conductors it issued is unknown.
        let detail = own.unreadable.clone().unwrap_or_default();
        return problems.push(Refusal::ConductorRevocationUnknown { subject: subject_owned(), detail });
    };
    let root = CertificateDer::from(root);
    let Ok(anchor) = webpki::anchor_from_trusted_cert(&root) else { return };
    let anchors = [anchor];
    let ee_der = CertificateDer::from(der);
    let Ok(ee) = webpki::EndEntityCert::try_from(&ee_der) else { return };
    let verify = |revocation: Option<webpki::RevocationOptions<'_>>| {
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &[],
            unix_time(at),
            webpki::KeyUsage::required_if_present(EKU),
            revocation,
            None,
        )
        .map(drop)
    };
    if recorded || own.unreadable.is_some() {
        // Only for a conductor this root issued: another root's is none of its CRL's.
        if verify(None).is_err() {
            return;
        }
        if recorded {
            return problems.push(Refusal::ConductorRevoked { subject: subject_owned() });
        }
        if let Some(detail) = &own.unreadable {
            return problems
                .push(Refusal::ConductorRevocationUnknown { subject: subject_owned(), detail: detail.clone() });
        }
    }
    let Some(crl) = own.crl.as_ref() else { return };
    let crls = [crl];
    let Ok(builder) = webpki::RevocationOptionsBuilder::new(&crls) else { return };
    let revocation = builder
        .with_depth(webpki::RevocationCheckDepth::EndEntity)
        .with_status_policy(webpki::UnknownStatusPolicy::Allow)
        .with_expiration_policy(webpki::ExpirationPolicy::Ignore)
        .build();
    if let Err(webpki::Error::CertRevoked) = verify(Some(revocation)) {
        problems.push(Refusal::ConductorRevoked { subject: subject_owned() });
    }
}

/// `at` as webpki's time (0 before the epoch).
fn unix_time(at: OffsetDateTime) -> UnixTime {
    let secs = u64::try_from(at.unix_timestamp()).unwrap_or(0);
    UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs))
}

/// The window in which a verified chain holds: every certificate in it valid.
fn chain_window<'a>(cert: &X509Certificate<'_>, intermediates: impl Iterator<Item = &'a webpki::Cert<'a>>) -> Window {
    let v = cert.validity();
    let mut window = Window { first: v.not_before.timestamp(), last: v.not_after.timestamp() };
    for c in intermediates {
        if let Ok((_, ic)) = x509_parser::parse_x509_certificate(c.der().as_ref()) {
            let iv = ic.validity();
            window = Window {
                first: window.first.max(iv.not_before.timestamp()),
                last: window.last.min(iv.not_after.timestamp()),
            };
        }
    }
    window
}

/// The refusal for a chain webpki did not verify.
fn chain_refusal(e: webpki::Error, subject: &str) -> Refusal {
    let subject = subject.to_string();
    match e {
        webpki::Error::CertExpired { .. } => Refusal::ConductorExpired { subject },
        webpki::Error::CertNotValidYet { .. } => Refusal::ConductorNotYetValid { subject },
        webpki::Error::RequiredEkuNotFoundContext(_) => Refusal::ConductorUntrusted {
            subject,
            detail: "a certificate in the chain has an extended key usage that omits 1.3.6.1.4.1.34380.2.0".into(),
        },
        webpki::Error::CertRevoked => Refusal::ConductorRevoked { subject },
        webpki::Error::CaUsedAsEndEntity => Refusal::ConductorUntrusted {
            subject,
            detail: "it is a CA certificate (basicConstraints CA:TRUE), not a conductor certificate".into(),
        },
        webpki::Error::UnknownIssuer => Refusal::ConductorUntrusted {
            subject,
            detail: "its issuer is not a trusted root nor a listed intermediate".into(),
        },
        other => Refusal::ConductorUntrusted { subject, detail: format!("{other:?}") },
    }
}

/// The leaf itself must name EKU .2.0 (webpki's check passes a leaf without any EKU).
fn check_leaf_eku(cert: &X509Certificate<'_>, subject: &str, problems: &mut Vec<Refusal>) {
    let has_eku = matches!(cert.extended_key_usage(), Ok(Some(eku))
        if eku.value.other.iter().any(|o| o.iter().is_some_and(|arcs| arcs.eq(oids::EKU_CONDUCTOR.iter().copied()))));
    if !has_eku {
        problems.push(Refusal::ConductorEkuMissing { subject: subject.to_string() });
    }
}

/// The leaf must allow digitalSignature (it signs the attributes).
fn check_leaf_key_usage(cert: &X509Certificate<'_>, subject: &str, problems: &mut Vec<Refusal>) {
    let has_ds = matches!(cert.key_usage(), Ok(Some(ku)) if ku.value.digital_signature());
    if !has_ds {
        problems.push(Refusal::ConductorKeyUsageMissing { subject: subject.to_string() });
    }
}

pub(super) fn verify_signature(leaf_der: &[u8], subject: &str, sig_b64: &str, msg: &[u8]) -> Result<(), Refusal> {
    let sig = STANDARD.decode(sig_b64.as_bytes()).map_err(|e| Refusal::SignatureMalformed { detail: e.to_string() })?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf_der)
        .map_err(|e| Refusal::ConductorMalformed { detail: e.to_string() })?;
    let kind = csr::spki_kind(cert.public_key().raw)
        .and_then(|k| csr::check_key_size(k).map(|()| k))
        .map_err(|e| Refusal::SignatureKeyUnsupported { detail: e.to_string() })?;
    let alg: &dyn rustls_pki_types::SignatureVerificationAlgorithm = match kind {
        KeyKind::Rsa { .. } => webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
        KeyKind::P256 => webpki::aws_lc_rs::ECDSA_P256_SHA256,
        KeyKind::P384 => webpki::aws_lc_rs::ECDSA_P384_SHA384,
        KeyKind::Ed25519 => webpki::aws_lc_rs::ED25519,
    };
    let ee_der = CertificateDer::from(leaf_der);
    let ee = webpki::EndEntityCert::try_from(&ee_der)
        .map_err(|e| Refusal::ConductorMalformed { detail: format!("{e:?}") })?;
    ee.verify_signature(alg, msg, &sig).map_err(|_| Refusal::SignatureInvalid { subject: subject.to_string() })
}

#[cfg(test)]
mod tests {
    use super::raw_serial;

    /// The serial read without a parse is the one x509-parser reads, for every certificate
    /// the fixtures hold (conductors of each key type, the root, Puppet's own), and a
    /// version 1 certificate (no `[0]` version field) made here.
    #[test]
    fn the_serial_read_without_a_parse_is_x509_parsers() {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut ders = Vec::new();
        for f in [
            "fixtures/pki/conductor-p256.pem",
            "fixtures/pki/conductor-rsa2048.pem",
            "fixtures/pki/conductor-ed25519.pem",
            "fixtures/pki/root_crt.pem",
            "fixtures/pki/intermediates.pem",
            "fixtures/puppet7/agent1.example.cert.pem",
            "fixtures/puppet7/server-ca_crt.pem",
        ] {
            let pem = std::fs::read(format!("{root}/{f}")).unwrap();
            ders.extend(crate::encoding::pem::find_all(&pem, "CERTIFICATE").unwrap());
        }
        assert!(ders.len() >= 7);
        for der in &ders {
            let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
            assert_eq!(raw_serial(der), Some(cert.raw_serial()));
        }
        // Version 1: the serial is the first field of the tbsCertificate.
        let v1 = crate::encoding::der::sequence(&[
            &crate::encoding::der::sequence(&[&crate::encoding::der::tlv(0x02, &[0x00, 0x9f, 0x01])]),
            &crate::encoding::der::sequence(&[]),
        ]);
        assert_eq!(raw_serial(&v1), Some(&[0x00, 0x9f, 0x01][..]));
        // Not a certificate: none, never a wrong serial.
        assert_eq!(raw_serial(&[]), None);
        assert_eq!(raw_serial(&crate::encoding::der::sequence(&[&crate::encoding::der::sequence(&[])])), None);
        let no_serial = crate::encoding::der::sequence(&[&crate::encoding::der::sequence(&[
            &crate::encoding::der::tlv(0xa0, &crate::encoding::der::small_integer(2)),
            &crate::encoding::der::tlv(0x04, b"x"),
        ])]);
        assert_eq!(raw_serial(&no_serial), None);
    }

    /// Review: `raw_serial` on encodings a strict reader and x509-parser may see differently
    /// (a negative, zero, non-minimal or 21-octet serial; bytes after the certificate; the
    /// outer length non-minimal or indefinite). Wherever it gives a serial, it is the one
    /// x509-parser reads (and so the one the full check looks up); else it gives none, and the
    /// full check runs. Never another serial: a revoked conductor could pass the lock's
    /// check with it.
    #[test]
    fn review_raw_serial_is_x509_parsers_or_none_on_odd_encodings() {
        use crate::encoding::der::{sequence, tlv, Reader};
        let root = env!("CARGO_MANIFEST_DIR");
        let pem = std::fs::read(format!("{root}/fixtures/pki/conductor-p256.pem")).unwrap();
        let der = crate::encoding::pem::find_all(&pem, "CERTIFICATE").unwrap().remove(0);
        let cert = Reader::new(&der).next_tag(0x30, "c").unwrap();
        let mut parts = Reader::new(cert.content);
        let tbs = parts.next_tag(0x30, "tbs").unwrap();
        let (alg, sig) = (parts.any().unwrap().raw.to_vec(), parts.any().unwrap().raw.to_vec());
        let mut fields = Reader::new(tbs.content);
        let version = fields.any().unwrap().raw.to_vec();
        fields.any().unwrap();
        let mut rest = Vec::new();
        while !fields.is_empty() {
            rest.extend_from_slice(fields.any().unwrap().raw);
        }
        let with_serial = |serial: &[u8]| {
            let tbs = sequence(&[&version, &tlv(0x02, serial), &rest]);
            sequence(&[&tbs, &alg, &sig])
        };
        let agrees = |der: &[u8]| {
            let got = raw_serial(der);
            if let Some(got) = got {
                let (_, cert) =
                    x509_parser::parse_x509_certificate(der).expect("raw_serial read what x509-parser does not");
                assert_eq!(got, cert.raw_serial(), "{der:02x?}");
            }
            got.map(<[u8]>::to_vec)
        };
        for serial in [&[0xfb][..], &[0x00], &[0x00, 0x12], &[0xff, 0x80], &[0x01; 21], &[0x00; 3]] {
            assert_eq!(agrees(&with_serial(serial)).as_deref(), Some(serial));
        }
        assert_eq!(agrees(&with_serial(&[])), None, "an empty INTEGER is no serial");
        // Bytes after the certificate: the same serial as without them.
        let mut trailing = der.clone();
        trailing.extend_from_slice(&[0x02, 0x01, 0x05]);
        assert_eq!(agrees(&trailing), agrees(&der));
        // The outer length non-minimal (0x82 for a length under 256), or indefinite: none.
        let content = cert.content;
        let mut long = vec![0x30, 0x84];
        long.extend_from_slice(&u32::try_from(content.len()).unwrap().to_be_bytes());
        long.extend_from_slice(content);
        assert_eq!(agrees(&long), None);
        let mut indefinite = vec![0x30, 0x80];
        indefinite.extend_from_slice(content);
        indefinite.extend_from_slice(&[0, 0]);
        assert_eq!(agrees(&indefinite), None);
    }
}
