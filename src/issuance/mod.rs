//! Issuance: the node certificate profile ([`certificate`]: prepare, then sign once),
//! the key types ([`keys`]), the CA's creation and data directory ([`bootstrap`], which
//! re-exports its data directory's, conductors' and certificate parts' modules), and what
//! the root key issued ([`root_issued`]), the staging directories a stopped `ca init` or
//! import leaves ([`staging`]), the lock one `vouch serve` (or `vouch migrate`) holds on the
//! data directory ([`serving_lock`]).
//! Knows no policy decision: it consumes an authorization only the decision can make.

pub mod bootstrap;
mod cert_parts;
pub mod certificate;
mod conductor;
mod data_dir;
pub mod keys;
pub mod root_issued;
pub mod serving_lock;
pub mod staging;
