//! vouch: a certificate authority that autosigns Puppet agents whose CSRs
//! carry attributes vouched for (signed) by a trusted cloud conductor.
//!
//! The decision ([`decision::decide`]) is pure: CSR bytes, certname, policy and
//! time in; a [`decision::Grant`] or every [`decision::Refusal`] out.
//!
//! The modules, lowest first (each uses only those before it; `scripts/module-deps`
//! checks it):
//!
//! - [`encoding`]: DER, OIDs, PEM, distinguished names, PKCS#10 requests, time formats.
//! - [`obs`]: the log (tracing events on stderr, JSON lines or text) and the metrics registry.
//! - [`vouching`]: what a conductor signs: the attributes, their canonical string,
//!   conductor-side signing, the attribute file formats, the classification.
//! - [`files`]: bounded reads, ownership checks, durable writes, the output rule.
//! - [`policy`]: the policy file, validated once into a [`Policy`].
//! - [`identity`]: instance identity documents (AWS's, first), verified against the policy.
//! - [`decision`]: the pure decision and its refusal codes.
//! - [`error`]: the commands' [`Error`].
//! - [`store`]: the certificate store (trait, file store and its log), the replay journal,
//!   the audit line, group commit.
//! - [`issuance`]: the certificate profile, keys, the CA's creation (root, master CA,
//!   conductors) and its data directory.
//! - [`authority`]: decide → claim → sign → commit, renewal, revocation, CRLs.
//! - [`hook`]: Puppet Server mode (its CA directory, for `enc --puppet-cadir`).
//! - [`import`]: `vouch import --puppet-cadir`: an existing Puppet CA taken over.
//! - [`serve`]: `vouch serve`, the Puppet CA API over HTTPS, and (feature `bench`) its client.
//! - `bench`: `vouch bench` (feature `bench`: not in a plain build).
//! - [`cli`]: the command line.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
// Two exceptions, each marked `allow(unsafe_code)` where it stands: getpwuid_r
// (files::trust::user_name) and mallopt (serve::run), which rustix does not offer.
#![deny(unsafe_code)]

pub mod authority;
#[cfg(feature = "bench")]
pub mod bench;
pub mod cli;
pub mod compile;
pub mod decision;
pub mod encoding;
pub mod error;
pub mod files;
pub mod hook;
pub mod identity;
pub mod import;
pub mod issuance;
pub mod limits;
pub mod obs;
pub mod policy;
pub mod serve;
pub mod store;
pub mod vouching;

pub use decision::{decide, Grant, Refusal, Refused, Request};
pub use error::Error;
pub use policy::Policy;
