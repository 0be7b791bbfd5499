//! Issuance: the node certificate profile ([`certificate`]: prepare, then sign once),
//! the key types ([`keys`]), and the CA's creation and data directory ([`bootstrap`]).
//! Knows no policy decision: it consumes an authorization only the decision can make.

pub mod bootstrap;
pub mod certificate;
pub mod keys;
