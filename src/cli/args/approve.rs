// `vouch approve`: an administrator's approval of a node no conductor launched (clap only).

use clap::Args;

/// `vouch approve CERTNAME [--ttl DURATION] [--fingerprint SHA256]`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The node whose pending request is approved (`vouch list` shows the pending ones).
    pub certname: String,
    /// A lifetime shorter than the policy's (issuance.validity): 3600s, 12h, 30d, 1y; longer
    /// is refused.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub ttl: Option<String>,
    /// Approve only the request with this SHA-256 fingerprint (as `puppetserver ca list`
    /// prints it; colons allowed): another request sent under the name meanwhile is refused.
    #[arg(long, value_name = "SHA256")]
    pub fingerprint: Option<String>,
}
