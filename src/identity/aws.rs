//! AWS's instance identity document, verified: the PKCS#7 SignedData from
//! `/latest/dynamic/instance-identity/rsa2048` (the document attached, SHA-256 with
//! RSA-2048), signed by one of the regional certificates the policy names, from an account
//! and a region the template's policy entry allows.

use super::document::AwsDocument;
use super::instance::{Binding, InstanceIdentity, VerifiedInstance};
use super::pkcs7::{self, Pkcs7Problem, SignedData};
use super::refusal::{short, IdentityRefusal};
use crate::policy::AwsIdentityRule;
use aws_lc_rs::{digest, signature};
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The largest identity document (PKCS#7 DER) read; AWS's are under 2 KiB.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024;

/// Verifies AWS instance identity documents against the policy's `[[identity.aws]]`.
#[derive(Debug, Clone, Copy)]
pub struct AwsIdentity<'a> {
    pub rules: &'a [AwsIdentityRule],
}

impl InstanceIdentity for AwsIdentity<'_> {
    fn verify(&self, binding: &str, document: &[u8], now: OffsetDateTime) -> Result<VerifiedInstance, IdentityRefusal> {
        if document.len() > MAX_DOCUMENT_BYTES {
            return Err(IdentityRefusal::DocumentTooLarge { size: document.len(), max: MAX_DOCUMENT_BYTES });
        }
        let binding = Binding::parse(binding)?;
        if binding.provider != "aws" {
            return Err(IdentityRefusal::ProviderUnsupported { provider: short(binding.provider) });
        }
        let signed = pkcs7::parse(document).map_err(|p| match p {
            Pkcs7Problem::Malformed(detail) => IdentityRefusal::NotPkcs7 { detail: short_text(&detail) },
            Pkcs7Problem::Detached => IdentityRefusal::Detached,
            Pkcs7Problem::SignerCount(count) => IdentityRefusal::SignerCount { count },
        })?;
        let signer = self.signer(&signed)?;
        check_signature(&signed, signer, now)?;
        let doc = AwsDocument::parse(&signed.content)?;
        let certname = binding.certname(&doc.instance_id);
        let rule = self
            .rules
            .iter()
            .find(|r| r.certnames.iter().any(|p| p.is_match(&certname)))
            .ok_or_else(|| IdentityRefusal::NotConfigured { certname: short(&certname) })?;
        if !rule.certificates.iter().any(|c| c.as_slice() == signer) {
            return Err(IdentityRefusal::UnknownSigner);
        }
        if !rule.accounts.contains(&doc.account_id) {
            return Err(IdentityRefusal::AccountNotAllowed { account: doc.account_id, entry: rule.name.clone() });
        }
        if !rule.regions.contains(&doc.region) {
            return Err(IdentityRefusal::RegionNotAllowed { region: doc.region, entry: rule.name.clone() });
        }
        check_age(&doc, rule, now)?;
        Ok(VerifiedInstance { instance_id: doc.instance_id, certname, account: doc.account_id, region: doc.region })
    }
}

impl<'a> AwsIdentity<'a> {
    /// The policy certificate (DER) the SignerInfo names by issuer and serial number.
    fn signer(&self, signed: &SignedData) -> Result<&'a [u8], IdentityRefusal> {
        for der in self.rules.iter().flat_map(|r| r.certificates.iter()) {
            let Ok((_, cert)) = X509Certificate::from_der(der) else { continue };
            if cert.tbs_certificate.issuer.as_raw() == signed.issuer.as_slice()
                && cert.tbs_certificate.raw_serial() == signed.serial.as_slice()
            {
                return Ok(der);
            }
        }
        Err(IdentityRefusal::UnknownSigner)
    }
}

/// The clock skew allowed between the cloud and this CA: a launch time this far ahead of
/// `now` is still honoured.
pub const CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

/// The document is at most the entry's `max_document_age` old (from `pendingTime`, the
/// instance's launch), and not from the future beyond [`CLOCK_SKEW`].
pub(super) fn check_age(doc: &AwsDocument, rule: &AwsIdentityRule, now: OffsetDateTime) -> Result<(), IdentityRefusal> {
    let launched = doc.launched()?;
    let pending = short(doc.pending_time.as_deref().unwrap_or_default());
    if launched > now + CLOCK_SKEW {
        return Err(IdentityRefusal::DocumentFromTheFuture { instance_id: doc.instance_id.clone(), pending });
    }
    let max = time::Duration::try_from(rule.max_document_age).unwrap_or(time::Duration::MAX);
    if now - launched > max {
        return Err(IdentityRefusal::DocumentStale {
            instance_id: doc.instance_id.clone(),
            pending,
            max_age: crate::policy::format_duration(rule.max_document_age),
            entry: rule.name.clone(),
        });
    }
    Ok(())
}

fn short_text(s: &str) -> String {
    if s.len() <= 200 {
        s.to_string()
    } else {
        short(s)
    }
}

/// An OID as the refusal shows it, cut short ([`super::refusal::short`]): the node chose it.
fn arcs_text(arcs: &[u64]) -> String {
    super::refusal::short(&crate::encoding::der::oid_to_string(arcs))
}

/// SHA-256 with RSA, over the signed attributes (whose messageDigest is the document's
/// digest) or, without them, over the document; the signer's certificate valid at `now`.
fn check_signature(signed: &SignedData, signer: &[u8], now: OffsetDateTime) -> Result<(), IdentityRefusal> {
    if signed.digest_algorithm != pkcs7::SHA256 {
        return Err(IdentityRefusal::AlgorithmUnsupported { algorithm: arcs_text(&signed.digest_algorithm) });
    }
    if signed.signature_algorithm != pkcs7::RSA_ENCRYPTION && signed.signature_algorithm != pkcs7::SHA256_WITH_RSA {
        return Err(IdentityRefusal::AlgorithmUnsupported { algorithm: arcs_text(&signed.signature_algorithm) });
    }
    let (_, cert) = X509Certificate::from_der(signer).map_err(|_| IdentityRefusal::UnknownSigner)?;
    let validity = cert.validity();
    let t = now.unix_timestamp();
    if t < validity.not_before.timestamp() || t > validity.not_after.timestamp() {
        return Err(IdentityRefusal::ProviderCertificateExpired);
    }
    let spki = cert.public_key();
    let key_alg: Option<Vec<u64>> = spki.algorithm.algorithm.iter().map(|i| i.collect());
    if key_alg.as_deref() != Some(pkcs7::RSA_ENCRYPTION) {
        return Err(IdentityRefusal::AlgorithmUnsupported { algorithm: "a provider key other than RSA".into() });
    }
    let message: &[u8] = match &signed.signed_attributes {
        None => &signed.content,
        Some(attrs) => {
            if attrs.content_type.as_deref().is_some_and(|c| !pkcs7::is_data(c)) {
                return Err(IdentityRefusal::NotPkcs7 { detail: "the signed contentType is not id-data".into() });
            }
            let Some(md) = &attrs.message_digest else {
                return Err(IdentityRefusal::NotPkcs7 { detail: "the signed attributes have no messageDigest".into() });
            };
            if digest::digest(&digest::SHA256, &signed.content).as_ref() != md.as_slice() {
                return Err(IdentityRefusal::DigestMismatch);
            }
            &attrs.der
        }
    };
    signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, &spki.subject_public_key.data)
        .verify(message, &signed.signature)
        .map_err(|_| IdentityRefusal::BadSignature)
}
