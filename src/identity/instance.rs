//! What every cloud's verifier gives and takes: the binding a template signs
//! (`provider:certname-template`), the [`InstanceIdentity`] trait, and the instance it
//! vouches for. AWS implements it first ([`super::AwsIdentity`]); GCP's identity token and
//! Azure's attested data follow behind the same trait.

use super::refusal::{short, IdentityRefusal};
use time::OffsetDateTime;

/// The placeholder a certname template carries exactly once.
pub const INSTANCE_ID: &str = "{instance-id}";

/// A cloud's verifier of instance identity documents. Pure: no I/O, the time passed in.
pub trait InstanceIdentity {
    /// Verifies `document` (as the node sent it, decoded from attribute .2.11) against
    /// `binding` (the signed attribute .2.10, e.g. `aws:{instance-id}.web.example.com`).
    fn verify(&self, binding: &str, document: &[u8], now: OffsetDateTime) -> Result<VerifiedInstance, IdentityRefusal>;
}

/// An instance whose identity document verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedInstance {
    pub instance_id: String,
    /// The certname the template derives from the instance id.
    pub certname: String,
    pub account: String,
    pub region: String,
}

impl VerifiedInstance {
    /// The request's certname must be the one the template derives.
    pub fn require_certname(&self, certname: &str) -> Result<(), IdentityRefusal> {
        if certname == self.certname {
            return Ok(());
        }
        Err(IdentityRefusal::CertnameNotDerived {
            certname: short(certname),
            derived: self.certname.clone(),
            instance_id: self.instance_id.clone(),
        })
    }
}

/// A binding read: its provider and its certname template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<'a> {
    pub provider: &'a str,
    pub template: &'a str,
}

impl<'a> Binding<'a> {
    /// Reads `provider:template`; the template holds `{instance-id}` exactly once and no
    /// other brace.
    pub fn parse(binding: &'a str) -> Result<Binding<'a>, IdentityRefusal> {
        let invalid = || IdentityRefusal::BindingInvalid { binding: short(binding) };
        let (provider, template) = binding.split_once(':').ok_or_else(invalid)?;
        let braces = template.matches(['{', '}']).count();
        if template.matches(INSTANCE_ID).count() != 1 || braces != 2 || template.len() > 253 {
            return Err(invalid());
        }
        Ok(Binding { provider, template })
    }

    /// The certname for one instance id.
    pub fn certname(&self, instance_id: &str) -> String {
        self.template.replacen(INSTANCE_ID, instance_id, 1)
    }
}
