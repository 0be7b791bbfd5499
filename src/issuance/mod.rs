//! Issuance: the node certificate profile ([`certificate`]: prepare, then sign once),
//! the key types ([`keys`]), the CA's creation and data directory ([`bootstrap`]), and what
//! the root key issued ([`root_issued`]).
//! Knows no policy decision: it consumes an authorization only the decision can make.

pub mod bootstrap;
pub mod certificate;
pub mod keys;
pub mod root_issued;
