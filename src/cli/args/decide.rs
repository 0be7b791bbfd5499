//! Requests and decisions: `vouch csr`, `vouch autosign`, `vouch check`, `vouch sign`.

use super::formats::{KeyTypeArg, OutFormat};
use super::values::OUTPUT_RULE;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct CsrArgs {
    /// The node's certname (the CSR's CN).
    #[arg(long)]
    pub certname: String,
    /// The attributes file written by 'vouch conductor sign' (yaml, txt, json or cloud-config).
    #[arg(long, value_name = "FILE")]
    pub attributes: PathBuf,
    /// The node's key type.
    #[arg(long, value_enum, default_value_t = KeyTypeArg::P256)]
    pub key_type: KeyTypeArg,
    /// Write the node's new private key here, mode 0600 (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub key_out: PathBuf,
    /// Write the CSR (PEM) here (never replaces an existing file).
    #[arg(long, value_name = "FILE")]
    pub csr_out: PathBuf,
}

#[derive(Args, Debug)]
pub struct AutosignArgs {
    /// The certname Puppet Server asks about; the CSR is read from stdin.
    pub certname: String,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The certificate request (PEM or DER) to explain.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Text)]
    pub format: OutFormat,
}

#[derive(Args, Debug)]
#[command(after_help = OUTPUT_RULE)]
pub struct SignArgs {
    /// The certificate request (PEM or DER) to decide on.
    #[arg(long, value_name = "FILE")]
    pub csr: PathBuf,
    /// The certname (default: the CSR's CN).
    #[arg(long)]
    pub certname: Option<String>,
    /// Write the certificate and chain here (an existing file is replaced; - or no --out: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// `vouch identity`: instance identity documents (templates bound to the instance).
#[derive(clap::Subcommand, Debug)]
pub enum IdentityCommand {
    /// Verify an instance identity document against the policy's [[identity.aws]] entries, as
    /// the decision does for a template bound to the instance (exit 0 verified, 1 refused).
    Check {
        /// The binding the template signs (attribute .2.10), e.g. 'aws:{instance-id}.web.example.com'.
        #[arg(long)]
        binding: String,
        /// The document: the PKCS#7 (DER), or its base64 as the metadata service serves it
        /// or attribute .2.11 carries it.
        #[arg(long, value_name = "FILE")]
        document: PathBuf,
        /// Also require this certname to be the one the template derives.
        #[arg(long)]
        certname: Option<String>,
        /// The policy [default: VOUCH_POLICY, then DIR/policy.toml, then /etc/vouch/policy.toml].
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Text)]
        format: OutFormat,
    },
    /// Print the cloud-config 'runcmd' part that adds the instance's identity document to
    /// csr_attributes.yaml at boot and sets the certname the template derives.
    CloudConfig {
        /// The binding the template signs, e.g. 'aws:{instance-id}.web.example.com'.
        #[arg(long)]
        binding: String,
    },
}
