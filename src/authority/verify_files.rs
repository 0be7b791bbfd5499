//! The CA's files `vouch store verify` checks: the root certificate's file, the CA bundle
//! agents are given, and the CRL against the revocations.

use super::Authority;
use crate::error::Error;
use crate::store::verify::Finding;
use std::collections::HashSet;
use time::OffsetDateTime;

impl Authority {
    /// The CA bundle agents are given on their first run: this master CA, then the root.
    pub(super) fn check_bundle(&self, root: &Vec<u8>, say: &mut dyn FnMut(Finding)) {
        let path = self.dir.file(crate::issuance::bootstrap::CA_BUNDLE);
        let bundle = crate::files::durable::read_regular_followed(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| crate::encoding::pem::find_all(&b, "CERTIFICATE").map_err(|e| e.to_string()));
        let problem = match bundle {
            Err(e) => Some(e),
            Ok(certs) if certs.first() != Some(&self.ca.cert_der) => {
                Some("its first certificate is not this master CA's".to_string())
            }
            Ok(certs) if certs.get(1) != Some(root) => {
                Some("its second certificate is not the fleet's root".to_string())
            }
            Ok(certs) if certs.len() != 2 => Some(format!(
                "it holds {} certificates: agents trust each, and vouch writes two (this master CA, the root)",
                certs.len()
            )),
            Ok(_) => None,
        };
        if let Some(detail) = problem {
            say(Finding::BundleMismatch { path: path.display().to_string(), detail });
        }
    }

    /// The staging directories a stopped `ca init` or `vouch import` left beside `ca/`
    /// (hidden, holding copies of the CA's private keys).
    pub(super) fn check_staging(&self, say: &mut dyn FnMut(Finding)) {
        for s in crate::issuance::staging::find(&self.dir.dir) {
            say(Finding::StagingLeftOver { path: s.path.display().to_string(), state: s.state.to_string() });
        }
    }

    /// The root certificate (DER) of this data directory. Its file holds the root alone (a
    /// further certificate there would be one more trust anchor for conductors, as the
    /// default policy reads every certificate in it), self-issued: else a finding.
    pub(super) fn root_der(&self, say: &mut dyn FnMut(Finding)) -> Result<Vec<u8>, Error> {
        let path = self.dir.file(crate::issuance::bootstrap::ROOT_CERT);
        let pem = crate::files::durable::read_regular_followed(&path).map_err(|source| Error::Io {
            path: path.clone(),
            op: "read",
            source,
        })?;
        let all = crate::encoding::pem::find_all(&pem, "CERTIFICATE")
            .map_err(|e| Error::Store { detail: format!("the root certificate: {e}") })?;
        let Some(root) = all.first().cloned() else {
            return Err(Error::Store { detail: format!("{}: no certificate", path.display()) });
        };
        // Self-issued, as `vouch ca init --root-cert` requires (its signature may use an
        // algorithm vouch does not verify, such as ecdsa-with-SHA512: not checked here).
        let self_issued = x509_parser::parse_x509_certificate(&root)
            .map(|(_, c)| c.subject().as_raw() == c.issuer().as_raw())
            .unwrap_or(false);
        let problem = if all.len() != 1 {
            Some(format!("it holds {} certificates: the fleet's root alone is expected", all.len()))
        } else if !self_issued {
            Some("its certificate is not self-issued (a root's subject is its issuer)".to_string())
        } else {
            None
        };
        if let Some(detail) = problem {
            say(Finding::BundleMismatch { path: path.display().to_string(), detail });
        }
        Ok(root)
    }

    /// The CRL file against the revocations: signed by this master CA, and listing every
    /// revocation whose certificate has not been expired for a CRL period.
    pub(super) fn verify_crl(
        &self,
        now: OffsetDateTime,
        revocations: &[crate::store::Revocation],
        say: &mut dyn FnMut(Finding),
    ) -> Result<(), Error> {
        let due: Vec<&crate::store::Revocation> = revocations.iter().filter(|r| !self.off_the_crl(r, now)).collect();
        let path = self.dir.file("ca_crl.pem");
        let pem = match crate::files::durable::read_regular(&path) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && due.is_empty() => return Ok(()),
            Err(e) => {
                say(Finding::CrlUnreadable { detail: format!("{}: {e}", path.display()) });
                return Ok(());
            }
        };
        let listed = match crl_serials(&pem, &self.ca.cert_der) {
            Ok((s, next)) => {
                if let Some(next) = next.filter(|t| *t < now) {
                    say(Finding::CrlExpired { next_update: crate::encoding::time::format_rfc3339(next) });
                }
                s
            }
            Err(detail) => {
                say(Finding::CrlUnreadable { detail: format!("{}: {detail}", path.display()) });
                return Ok(());
            }
        };
        for r in due {
            if !listed.contains(&r.serial) {
                say(Finding::RevokedNotOnCrl { serial: r.serial.clone(), certname: r.certname.clone() });
            }
        }
        Ok(())
    }
}

/// The serials (lowercase hex) a PEM CRL lists and its nextUpdate, once its signature
/// verified with `ca_der`'s key.
fn crl_serials(pem: &[u8], ca_der: &[u8]) -> Result<(HashSet<String>, Option<OffsetDateTime>), String> {
    use x509_parser::prelude::FromDer;
    let (_, der) = crate::encoding::pem::find(pem, &["X509 CRL"]).map_err(|e| e.to_string())?;
    let (_, crl) = x509_parser::revocation_list::CertificateRevocationList::from_der(&der)
        .map_err(|e| format!("not a CRL: {e}"))?;
    let (_, ca) = x509_parser::parse_x509_certificate(ca_der).map_err(|e| e.to_string())?;
    crate::encoding::verify_x509_signature(
        &crl.signature_algorithm,
        &ca,
        crl.tbs_cert_list.as_ref(),
        &crl.signature_value.data,
    )?;
    let next = crl.next_update().map(|t| t.to_datetime());
    Ok((crl.iter_revoked_certificates().map(|r| crate::encoding::hex(r.raw_serial())).collect(), next))
}
