//! Puppet Server mode: vouch as Puppet Server's `autosign` and `external_nodes`
//! executables. [`puppet_cadir`] reads Puppet Server's own CA directory (`enc --puppet-cadir`).

pub mod puppet_cadir;
