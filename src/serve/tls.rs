//! The TLS configuration of `vouch serve`.

use crate::error::Error;
use crate::issuance::bootstrap::DataDir;
use std::sync::Arc;

fn crypto(detail: impl std::fmt::Display) -> Error {
    Error::Crypto { detail: detail.to_string() }
}

/// The TLS configuration: the service's certificate and the master CA; client
/// certificates optional (bootstrap is anonymous) and, when sent, verified to the fleet's
/// root through this master CA or one of `siblings` ([`super::client_auth`]). Revocation is
/// checked per request against the store itself.
pub(super) fn tls_config(
    dir: &DataDir,
    siblings: Arc<crate::authority::masters::Siblings>,
) -> Result<rustls::ServerConfig, Error> {
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let read = |p: std::path::PathBuf| crate::error::read_input(&p, crate::files::input::Kind::Cert);
    let cert_path = dir.dir.join(crate::issuance::bootstrap::SERVER_CERT);
    let cert_pem = read(cert_path.clone())?;
    let server_der = crate::encoding::pem::find(&cert_pem, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: cert_path, detail: e.to_string() })?
        .1;
    let ca_path = dir.file(crate::issuance::bootstrap::CA_CERT);
    let ca_der = crate::encoding::pem::find(&read(ca_path.clone())?, &["CERTIFICATE"])
        .map_err(|e| Error::Cert { path: ca_path, detail: e.to_string() })?
        .1;
    let key_path = dir.dir.join(crate::issuance::bootstrap::SERVER_KEY);
    let key_der = crate::encoding::pem::find(&read(key_path.clone())?, &["PRIVATE KEY"])
        .map_err(|e| Error::Key { path: key_path, detail: e.to_string() })?
        .1;
    let root_der = crate::authority::read_root_der(dir)
        .map_err(|detail| Error::Cert { path: dir.file(crate::issuance::bootstrap::ROOT_CERT), detail })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = super::client_auth::FleetClientVerifier::new(
        &root_der,
        ca_der.clone(),
        siblings,
        provider.signature_verification_algorithms,
    )
    .map_err(|e| crypto(format!("the root certificate as a trust anchor: {e}")))?;
    let verifier = Arc::new(verifier);
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(crypto)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(server_der), CertificateDer::from(ca_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_der)),
        )
        .map_err(crypto)?;
    // No TLS 1.3 session tickets: a ticket arriving after the response makes Ruby's
    // Net::HTTP (Puppet's agent) block on its kept-alive connection until the server
    // closes it (the 30-second stall Ruby's Net::HTTP showed against Puppet Server 7.9.5). Without them,
    // TLS 1.3 works with Puppet agents at full speed.
    config.send_tls13_tickets = 0;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
