//! Puppet Server mode: vouch as Puppet Server's `autosign` and `external_nodes`
//! executables. [`autosign`] judges a request and records it; [`puppet_cadir`] reads
//! Puppet Server's own CA directory (`enc --puppet-cadir`).

pub mod autosign;
pub mod ca_chain;
pub mod puppet_cadir;
