//! `vouch import`: an existing CA taken over.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The Puppet 7/8 (or OpenVox) CA directory to take over: its CA certificate chain and key
    /// (ca_crt.pem, ca_key.pem, root_key.pem when there), its CRLs (ca_crl.pem), signed/,
    /// inventory.txt and serial. Stop Puppet Server first; the directory is only read.
    #[arg(long, value_name = "CADIR")]
    pub puppet_cadir: PathBuf,
}
