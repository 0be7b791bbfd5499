//! A request's instance identity, judged as the decision judges it: the binding the
//! conductor signed (attribute .2.10; empty is unbound), the document the node added
//! (attribute .2.11, base64) and the certname it asks for. Each provider's verifier sits
//! behind [`InstanceIdentity`]; AWS is the one there is.

use super::attribute;
use super::aws::AwsIdentity;
use super::instance::{Binding, InstanceIdentity, VerifiedInstance};
use super::refusal::{short, IdentityRefusal};
use crate::policy::AwsIdentityRule;
use time::OffsetDateTime;

/// What a bound request is judged against: the policy's entries for each provider.
#[derive(Debug, Clone, Copy)]
pub struct Providers<'a> {
    pub aws: &'a [AwsIdentityRule],
}

impl Providers<'_> {
    /// The verifier for `provider`, if this vouch has one.
    fn verifier(&self, provider: &str) -> Option<Box<dyn InstanceIdentity + '_>> {
        match provider {
            "aws" => Some(Box::new(AwsIdentity { rules: self.aws })),
            _ => None,
        }
    }

    /// Verifies attribute .2.11's text (`document`) against a bound template's `binding`
    /// with the provider's verifier: the instance and the certname the template derives.
    pub fn verify_text(
        &self,
        binding: &str,
        document: &str,
        now: OffsetDateTime,
    ) -> Result<VerifiedInstance, IdentityRefusal> {
        let parsed = Binding::parse(binding)?;
        let verifier = self
            .verifier(parsed.provider)
            .ok_or_else(|| IdentityRefusal::ProviderUnsupported { provider: short(parsed.provider) })?;
        verifier.verify(binding, &attribute::decode(document)?, now)
    }

    /// `None` for an unbound template, whatever the node sent (the decision refuses a
    /// document with an unbound template: `identity-document-unbound`);
    /// else the verified instance, whose certname is the one asked for, or why not.
    pub fn judge(
        &self,
        binding: &str,
        document: Option<&str>,
        certname: &str,
        now: OffsetDateTime,
    ) -> Result<Option<VerifiedInstance>, IdentityRefusal> {
        if binding.is_empty() {
            return Ok(None);
        }
        let instance = self.verify_text(binding, document.ok_or(IdentityRefusal::DocumentMissing)?, now)?;
        instance.require_certname(certname)?;
        Ok(Some(instance))
    }
}
