//! How vouch touches the file system: bounded reads ([`input`]), the ownership checks for
//! what it trusts ([`trust`]), durable atomic writes that never follow a symbolic link
//! ([`durable`]), and the rule for command outputs ([`output`]).
//!
//! Below the policy, the store and the CA's creation, which all read and write files.

pub mod durable;
pub(crate) mod fault;
pub mod input;
pub mod output;
pub mod trust;
