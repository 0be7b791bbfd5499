//! The seam for instance identity (signature version 3, a template bound to the instance's
//! identity): the decision hands the template's binding (.2.10) and the document the node
//! put in its CSR (.2.11, unsigned) to an [`InstanceIdentity`] verifier, which checks the
//! document and derives the certname. Without a verifier a bound template is refused
//! (`identity-verifier-missing`): deny by default.

use time::OffsetDateTime;

/// What a verifier established about the instance from its identity document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedInstance {
    /// The provider's instance id (the one-time key of the template's use).
    pub instance_id: String,
    /// The certname the binding derives from it (the CSR's must be this).
    pub certname: String,
    pub account: String,
    pub region: String,
}

/// Why a verifier refused a document: each reason with its own code, message and hint.
pub use crate::identity::IdentityRefusal;

/// Verifies an instance identity document against a template's binding.
pub trait InstanceIdentity: Send + Sync {
    /// `binding`: the signed .2.10 value (e.g. `aws:{instance-id}.web.asg.example.com`);
    /// `document`: the unsigned .2.11 value as the CSR carries it; `now`: the decision's time.
    fn verify(&self, binding: &str, document: &[u8], now: OffsetDateTime) -> Result<VerifiedInstance, IdentityRefusal>;
}

/// The policy's identity providers (`[[identity.aws]]`) as the decision's verifier: the
/// document as attribute .2.11 carries it (base64); each refusal keeps its own code.
impl InstanceIdentity for crate::identity::Providers<'_> {
    fn verify(&self, binding: &str, document: &[u8], now: OffsetDateTime) -> Result<VerifiedInstance, IdentityRefusal> {
        std::str::from_utf8(document)
            .map_err(|_| crate::identity::IdentityRefusal::NotBase64)
            .and_then(|text| self.verify_text(binding, text, now))
            .map(|v| VerifiedInstance {
                instance_id: v.instance_id,
                certname: v.certname,
                account: v.account,
                region: v.region,
            })
    }
}
