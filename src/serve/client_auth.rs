//! Client certificates at the TLS layer: trust goes to the fleet's root. A client
//! certificate is accepted when it chains to the root through one master CA of the fleet:
//! this master's or a sibling the store names and the root signed
//! ([`crate::authority::masters`]), never through a CA the client sends (those are ignored)
//! and never directly under the root (a conductor's certificate is no client of the CA
//! API). Client certificates stay optional (bootstrap is anonymous); revocation, and
//! whether the certificate is still its certname's current one, are checked per request
//! against the store ([`crate::authority::Authority::presented`]).

use crate::authority::masters::Siblings;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use std::sync::Arc;

/// The verifier: the root as the one trust anchor, the fleet's master CAs as intermediates.
#[derive(Debug)]
pub(super) struct FleetClientVerifier {
    anchor: TrustAnchor<'static>,
    own: Vec<u8>,
    siblings: Arc<Siblings>,
    hints: Vec<DistinguishedName>,
    algs: WebPkiSupportedAlgorithms,
}

impl FleetClientVerifier {
    /// `root` and `own` (this master CA): DER. `siblings`: the other master CAs as the
    /// authority keeps them up to date.
    pub(super) fn new(
        root: &[u8],
        own: Vec<u8>,
        siblings: Arc<Siblings>,
        algs: WebPkiSupportedAlgorithms,
    ) -> Result<Self, webpki::Error> {
        let anchor = webpki::anchor_from_trusted_cert(&CertificateDer::from(root))?.to_owned();
        let hints = vec![DistinguishedName::in_sequence(anchor.subject.as_ref())];
        Ok(FleetClientVerifier { anchor, own, siblings, hints, algs })
    }
}

fn refused(e: webpki::Error) -> rustls::Error {
    let reason = match e {
        webpki::Error::CertExpired { .. } => CertificateError::Expired,
        webpki::Error::CertNotValidYet { .. } => CertificateError::NotValidYet,
        webpki::Error::UnknownIssuer => CertificateError::UnknownIssuer,
        webpki::Error::InvalidSignatureForPublicKey => CertificateError::BadSignature,
        webpki::Error::RequiredEkuNotFoundContext(_) => CertificateError::InvalidPurpose,
        e => CertificateError::Other(rustls::OtherError(Arc::new(e))),
    };
    rustls::Error::InvalidCertificate(reason)
}

impl ClientCertVerifier for FleetClientVerifier {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _sent: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let siblings = self.siblings.get();
        let masters: Vec<CertificateDer<'_>> = std::iter::once(self.own.as_slice())
            .chain(siblings.iter().map(Vec::as_slice))
            .map(CertificateDer::from)
            .collect();
        let ee = webpki::EndEntityCert::try_from(end_entity).map_err(refused)?;
        let anchors = [self.anchor.clone()];
        let path = ee
            .verify_for_usage(self.algs.all, &anchors, &masters, now, webpki::KeyUsage::client_auth(), None, None)
            .map_err(refused)?;
        // Issued by a master CA, not by the root itself.
        if path.intermediate_certificates().count() != 1 {
            return Err(rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}
