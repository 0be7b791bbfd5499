//! Whose key signed a certificate or a CRL: checked against the CA certificates (DER) it
//! is meant to come from.

/// Whether `cert_der`'s signature verifies with the key of one of `cas` (DER), by the
/// algorithms vouch accepts on a CSR.
pub(super) fn signed_by_one_of(cert_der: &[u8], cas: &[Vec<u8>]) -> Result<(), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der).map_err(|e| e.to_string())?;
    let mut last = "no master CA certificate to check it with".to_string();
    for ca_der in cas {
        let Ok((_, ca)) = x509_parser::parse_x509_certificate(ca_der) else { continue };
        if ca.subject().as_raw() != cert.issuer().as_raw() {
            last = format!("its issuer is {}", cert.issuer());
            continue;
        }
        match crate::encoding::verify_x509_signature(
            &cert.signature_algorithm,
            &ca,
            cert.tbs_certificate.as_ref(),
            &cert.signature_value.data,
        ) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether the CRL `der` names `root` (DER) as its issuer and its signature verifies with
/// `root`'s key; else why not.
pub(super) fn signed_by_root(der: &[u8], root: &[u8]) -> Result<(), String> {
    let (_, root) = x509_parser::parse_x509_certificate(root).map_err(|e| format!("the root certificate: {e}"))?;
    let (_, crl) = x509_parser::parse_x509_crl(der).map_err(|e| format!("the CRL: {e}"))?;
    if crl.issuer().as_raw() != root.subject().as_raw() {
        return Err(format!("its issuer is {}, the root is {}", crl.issuer(), root.subject()));
    }
    crate::encoding::verify_x509_signature(
        &crl.signature_algorithm,
        &root,
        crl.tbs_cert_list.as_ref(),
        &crl.signature_value.data,
    )
    .map_err(|e| format!("it names the root {} as its issuer, but its signature does not verify: {e}", root.subject()))
}
