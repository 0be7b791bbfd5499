//! Instance identity: a template bound to the instance (signed attribute .2.10,
//! `aws:{instance-id}.web.example.com`) is honoured only with the cloud's signed identity
//! document (CSR attribute .2.11, [`attribute`]), which names the instance the certname is
//! derived from. Pure: bytes, policy and time in, a [`VerifiedInstance`] or one
//! [`IdentityRefusal`] out. [`cloud_init`] is the node's side: the cloud-config part that
//! fetches the document at boot.

mod aws;
mod ber;
pub mod cloud_init;
mod document;
mod instance;
mod pkcs7;
mod refusal;
mod request;

pub mod attribute;

pub use aws::{AwsIdentity, MAX_DOCUMENT_BYTES};
pub use document::AwsDocument;
pub use instance::{Binding, InstanceIdentity, VerifiedInstance, INSTANCE_ID};
pub use refusal::IdentityRefusal;
pub use request::Providers;

#[cfg(test)]
mod tests;
