//! Hook mode: Puppet Server is the CA. `vouch enc --puppet-cadir DIR CERTNAME`
//! reads the node's certificate from Puppet Server's own CA directory
//! (`DIR/signed/CERTNAME.pem`) and trusts it only after verifying it against
//! that CA (`DIR/ca_crt.pem`) and its CRL (`DIR/ca_crl.pem`): the classification
//! comes from a certificate the CA signed, never from anything the node sends.

use crate::error::Error;
use rustls_pki_types::{CertificateDer, UnixTime};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// The CA bundle inside Puppet Server's cadir.
pub const CA_CERT: &str = "ca_crt.pem";
/// The CRL (bundle) inside Puppet Server's cadir.
pub const CA_CRL: &str = "ca_crl.pem";
/// Signed node certificates inside Puppet Server's cadir.
pub const SIGNED: &str = "signed";

/// Whether a CRL past its nextUpdate still counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrlExpiry {
    /// A lapsed CRL still lists what was revoked (Puppet Server's own cadir:
    /// puppetserver#2789 lets CRLs lapse, and nothing else keeps that file).
    Ignore,
    /// A CRL is used only until its nextUpdate (`vouch enc --ca-url`: a CRL fetched from
    /// vouch serve, which renews it long before; past it, the copy may miss revocations).
    Enforce,
}

fn ca_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::PuppetCa { path: path.to_path_buf(), detail: detail.into() }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    crate::error::read_input(path, crate::files::input::Kind::TrustFile)
}

/// The path of a node's signed certificate in a Puppet Server cadir. The
/// certname is checked first: it becomes a file name.
pub fn signed_path(cadir: &Path, certname: &str) -> Result<PathBuf, Error> {
    crate::decision::check_certname(certname)
        .map_err(|p| Error::Usage { detail: format!("{certname:?} is not a valid certname: {p}") })?;
    Ok(cadir.join(SIGNED).join(format!("{certname}.pem")))
}

/// Reads `CERTNAME`'s certificate from Puppet Server's cadir and verifies it:
/// it chains to a self-signed certificate of `ca_crt.pem` (through the others
/// there), is valid at `now` for client authentication, is not on a CRL of
/// `ca_crl.pem` (an expired CRL still counts), and names `CERTNAME` as its CN.
/// Returns its DER.
pub fn verified_signed_cert(cadir: &Path, certname: &str, now: OffsetDateTime) -> Result<Vec<u8>, Error> {
    let leaf_path = signed_path(cadir, certname)?;
    let bundle_path = cadir.join(CA_CERT);
    let crl_path = cadir.join(CA_CRL);
    let bundle = read(&bundle_path)?;
    let crl = read(&crl_path)?;
    let der = read_leaf(&leaf_path, certname)?;
    for warning in verify_leaf(&der, certname, (&bundle, &bundle_path), &[(&crl, &crl_path)], CrlExpiry::Ignore, now)? {
        eprintln!("vouch: warning: {warning}");
    }
    Ok(der)
}

/// Verifies a node certificate (DER) for `certname`: it chains to a self-signed certificate
/// of the bundle (PEM, through the others there), is valid at `now` for client
/// authentication, is on no CRL of any of `crls` (each a PEM file's bytes and its path;
/// every CA of the chain must have signed a CRL in each; a CRL past its nextUpdate counts or
/// is refused as `expiry` says), and names `certname` as its only CN.
///
/// The chain and the CRLs are matched by signature (see [`super::ca_chain`]): a bundle may
/// hold several CAs of one name, and a CRL file CRLs of several CAs. A CRL that no CA of the
/// bundle signed is ignored; the returned warnings say so, one per such CRL. A CA of the
/// chain without a CRL it signed is [`Error::CrlNotFromBundle`].
pub fn verify_leaf(
    der: &[u8],
    certname: &str,
    bundle: (&[u8], &Path),
    crls: &[(&[u8], &Path)],
    expiry: CrlExpiry,
    now: OffsetDateTime,
) -> Result<Vec<String>, Error> {
    let (bundle_pem, bundle_path) = bundle;
    let bundle_ders =
        crate::encoding::pem::find_all(bundle_pem, "CERTIFICATE").map_err(|e| ca_error(bundle_path, e.to_string()))?;
    let cas = super::ca_chain::parse_bundle(&bundle_ders).map_err(|e| ca_error(bundle_path, e))?;
    let leaf = Leaf { der, certname, now };
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|e| leaf.not_valid(format!("unreadable certificate: {e}")))?;
    // The chain by signature; without one, webpki says why (against the whole bundle).
    let chain = super::ca_chain::chain_of(&cert, &cas);
    let trust = match &chain {
        Some(path) => trust_of_chain(&cas, path, bundle_path)?,
        None => trust_of(&bundle_ders, bundle_path)?,
    };
    if chain.is_none() {
        // Not chained by the signatures vouch reads: webpki's verdict on the chain alone
        // comes first (the cause is the certificate, not the CRLs).
        verify_chain(&leaf, &trust, None, bundle_path, bundle_path)?;
    }
    let mut warnings = Vec::new();
    for (crl_pem, crl_path) in crls {
        let crl_ders =
            crate::encoding::pem::find_all(crl_pem, "X509 CRL").map_err(|e| ca_error(crl_path, e.to_string()))?;
        if crl_ders.is_empty() {
            return Err(ca_error(crl_path, "it holds no CRL"));
        }
        let sorted = super::ca_chain::sort_crls(&crl_ders, &cas).map_err(|e| ca_error(crl_path, e))?;
        warnings.extend(sorted.foreign.iter().map(|issuer| {
            format!(
                "{}: a CRL of {issuer} that no CA of {} signed is ignored",
                crl_path.display(),
                bundle_path.display()
            )
        }));
        let missing = |ca: Option<String>| Error::CrlNotFromBundle {
            source: crl_path.display().to_string(),
            ca,
            bundle: bundle_path.to_path_buf(),
            foreign: sorted.foreign.clone(),
        };
        // The CRLs the chain needs (each CA's newest), or without a chain every verified one.
        let wanted: Vec<usize> = chain.clone().unwrap_or_else(|| (0..cas.len()).collect());
        let mut selected: Vec<&[u8]> = Vec::new();
        for i in wanted {
            match (sorted.of(i), chain.is_some()) {
                (Some(crl), _) => selected.push(crl.der),
                (None, true) => return Err(missing(cas.get(i).map(super::ca_chain::Ca::name))),
                (None, false) => {}
            }
        }
        if selected.is_empty() {
            return Err(missing(None));
        }
        let parsed = crls_of(&selected, crl_path)?;
        let crl_refs: Vec<&webpki::CertRevocationList<'_>> = parsed.iter().collect();
        let revocation = revocation_options(&crl_refs, crl_path, expiry)?;
        verify_chain(&leaf, &trust, Some(revocation), bundle_path, crl_path)?;
    }
    check_common_name(&leaf)?;
    Ok(warnings)
}

/// Only the CAs of the node's chain: webpki picks a CRL by its issuer's name, and other CAs
/// of that name (other masters) would meet the wrong one.
fn trust_of_chain<'a>(cas: &[super::ca_chain::Ca<'a>], path: &[usize], bundle_path: &Path) -> Result<Trust<'a>, Error> {
    let ders: Vec<&'a [u8]> = path.iter().filter_map(|i| cas.get(*i)).map(|ca| ca.der).collect();
    let (anchor, intermediates) = ders.split_last().ok_or_else(|| ca_error(bundle_path, "an empty chain"))?;
    let cd = CertificateDer::from(*anchor);
    let anchor = webpki::anchor_from_trusted_cert(&cd).map_err(|e| ca_error(bundle_path, format!("{e:?}")))?;
    Ok(Trust {
        anchors: vec![anchor.to_owned()],
        intermediates: intermediates.iter().map(|d| CertificateDer::from(*d)).collect(),
    })
}

/// The CA bundle split into trust anchors (its self-signed certificates) and intermediates.
struct Trust<'a> {
    anchors: Vec<rustls_pki_types::TrustAnchor<'static>>,
    intermediates: Vec<CertificateDer<'a>>,
}

fn trust_of<'a>(bundle: &'a [Vec<u8>], bundle_path: &Path) -> Result<Trust<'a>, Error> {
    let mut anchors = Vec::new();
    let mut intermediates = Vec::new();
    for der in bundle {
        let (_, c) = x509_parser::parse_x509_certificate(der).map_err(|e| ca_error(bundle_path, e.to_string()))?;
        if c.subject().as_raw() == c.issuer().as_raw() {
            let cd = CertificateDer::from(der.as_slice());
            let anchor = webpki::anchor_from_trusted_cert(&cd).map_err(|e| ca_error(bundle_path, format!("{e:?}")))?;
            anchors.push(anchor.to_owned());
        } else {
            intermediates.push(CertificateDer::from(der.as_slice()));
        }
    }
    if anchors.is_empty() {
        return Err(ca_error(bundle_path, "it holds no self-signed CA certificate"));
    }
    Ok(Trust { anchors, intermediates })
}

fn crls_of<'a>(crl_ders: &[&'a [u8]], crl_path: &Path) -> Result<Vec<webpki::CertRevocationList<'a>>, Error> {
    let mut crls = Vec::new();
    for d in crl_ders.iter().copied() {
        let crl = webpki::BorrowedCertRevocationList::from_der(d).map_err(|e| ca_error(crl_path, format!("{e:?}")))?;
        crls.push(webpki::CertRevocationList::from(crl));
    }
    Ok(crls)
}

fn revocation_options<'a>(
    crl_refs: &'a [&'a webpki::CertRevocationList<'a>],
    crl_path: &Path,
    expiry: CrlExpiry,
) -> Result<webpki::RevocationOptions<'a>, Error> {
    Ok(webpki::RevocationOptionsBuilder::new(crl_refs)
        .map_err(|e| ca_error(crl_path, format!("{e:?}")))?
        .with_depth(webpki::RevocationCheckDepth::Chain)
        // Every certificate in the chain must be covered by a CRL of this CA: fail closed.
        .with_status_policy(webpki::UnknownStatusPolicy::Deny)
        .with_expiration_policy(match expiry {
            CrlExpiry::Ignore => webpki::ExpirationPolicy::Ignore,
            CrlExpiry::Enforce => webpki::ExpirationPolicy::Enforce,
        })
        .build())
}

/// The node's certificate (first PEM block of `signed/CERTNAME.pem`), DER.
fn read_leaf(leaf_path: &Path, certname: &str) -> Result<Vec<u8>, Error> {
    let leaf_text = match crate::files::input::read_path(leaf_path, crate::files::input::Kind::Cert) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::PuppetCaNotSigned { certname: certname.to_string(), path: leaf_path.to_path_buf() })
        }
        Err(source) => return Err(Error::Io { path: leaf_path.to_path_buf(), op: "read", source }),
    };
    let (_, der) = crate::encoding::pem::find(&leaf_text, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: leaf_path.to_path_buf(), detail: e.to_string() })?;
    Ok(der)
}

/// The node's certificate, for whom, and when it must be valid.
struct Leaf<'a> {
    der: &'a [u8],
    certname: &'a str,
    now: OffsetDateTime,
}

impl Leaf<'_> {
    fn not_valid(&self, detail: String) -> Error {
        Error::NotValid { certname: self.certname.to_string(), detail }
    }
}

/// The chain to the bundle's anchors, for client authentication, at `now`, against the CRLs.
fn verify_chain(
    leaf: &Leaf<'_>,
    trust: &Trust<'_>,
    revocation: Option<webpki::RevocationOptions<'_>>,
    bundle_path: &Path,
    crl_path: &Path,
) -> Result<(), Error> {
    let ee_cd = CertificateDer::from(leaf.der);
    let ee = webpki::EndEntityCert::try_from(&ee_cd)
        .map_err(|e| leaf.not_valid(format!("unreadable certificate: {e:?}")))?;
    let secs = u64::try_from(leaf.now.unix_timestamp()).unwrap_or(0);
    ee.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &trust.anchors,
        &trust.intermediates,
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs)),
        webpki::KeyUsage::client_auth(),
        revocation,
        None,
    )
    .map_err(|e| match e {
        webpki::Error::CertRevoked => {
            leaf.not_valid(format!("its certificate is revoked (the CRL in {})", crl_path.display()))
        }
        webpki::Error::CertExpired { .. } => leaf.not_valid("its certificate has expired".into()),
        webpki::Error::CrlExpired { next_update, .. } => leaf.not_valid(format!(
            "the CRL in {} is past its nextUpdate ({}): it may miss revocations since; fetch a current one",
            crl_path.display(),
            OffsetDateTime::from_unix_timestamp(i64::try_from(next_update.as_secs()).unwrap_or(i64::MAX))
                .map(crate::encoding::time::format_rfc3339)
                .unwrap_or_default()
        )),
        webpki::Error::CertNotValidYet { .. } => leaf.not_valid("its certificate is not yet valid".into()),
        other => {
            leaf.not_valid(format!("its certificate does not verify against {}: {other:?}", bundle_path.display()))
        }
    })?;
    Ok(())
}

/// The certificate names exactly one CN, the certname.
fn check_common_name(leaf: &Leaf<'_>) -> Result<(), Error> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.der).map_err(|e| leaf.not_valid(e.to_string()))?;
    let cns: Vec<&str> = cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).collect();
    if cns != [leaf.certname] {
        return Err(leaf.not_valid(format!("its certificate names CN {cns:?}, not {:?}", leaf.certname)));
    }
    Ok(())
}
