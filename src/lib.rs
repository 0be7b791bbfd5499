//! vouch: a certificate authority that autosigns Puppet agents whose CSRs
//! carry attributes vouched for (signed) by a trusted cloud conductor.
//!
//! The decision ([`decide::decide`]) is pure: CSR bytes, certname, policy and
//! time in; a [`decide::Grant`] or every [`decide::Refusal`] out.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod attrs;
pub mod audit;
pub mod authority;
pub mod bench;
pub mod ca;
pub mod classification;
pub mod cli;
pub mod csr;
pub mod decide;
pub mod der;
pub mod dn;
pub mod error;
pub mod fsutil;
pub mod group;
pub mod input;
pub mod issue;
pub mod keys;
pub mod oids;
pub mod pem;
pub mod policy;
pub mod puppetca;
pub mod replay;
pub mod serve;
pub mod store;

pub use decide::{decide, Grant, Refusal, Refused, Request};
pub use error::Error;
pub use policy::Policy;
