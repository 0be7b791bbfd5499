//! Puppet Server mode: vouch as Puppet Server's `autosign` and `external_nodes`
//! executables. [`cadir`] reads Puppet Server's own CA directory (`enc --puppet-cadir`).

pub mod cadir;
