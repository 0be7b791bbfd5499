//! Bounds on what anyone may make the CA keep without a conductor vouching for it: refused
//! requests are kept for the operator (`vouch list`), at most `requests.max_pending` in the
//! store, at most `requests.kept_per_minute` from one client address of `vouch serve`.
//! Granted requests are never held to either. A leaf module: it names nothing else of vouch.
#![deny(clippy::arithmetic_side_effects)]

/// `requests.max_pending` unless the policy says otherwise.
pub const DEFAULT_MAX_PENDING: usize = 5_000;
/// `requests.kept_per_minute` unless the policy says otherwise.
pub const DEFAULT_KEPT_PER_MINUTE: u32 = 30;
/// The seconds a full store asks the client to wait (`Retry-After`).
pub const FULL_RETRY_AFTER_SECS: u64 = 60;

/// A refused request that was not kept, and why (the decision itself stands, audited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limited {
    /// The store keeps `max` pending requests already (a new name would be one more).
    PendingFull { max: usize },
    /// This client address had `per_minute` refused requests kept within the last minute.
    PendingRate { per_minute: u32, retry_after: u64 },
}

impl Limited {
    /// How long the client should wait before it tries again, in seconds.
    pub fn retry_after(&self) -> u64 {
        match self {
            Limited::PendingFull { .. } => FULL_RETRY_AFTER_SECS,
            Limited::PendingRate { retry_after, .. } => *retry_after,
        }
    }

    /// The HTTP status `vouch serve` answers with.
    pub fn status(&self) -> u16 {
        match self {
            Limited::PendingFull { .. } => 503,
            Limited::PendingRate { .. } => 429,
        }
    }

    pub fn hint(&self) -> &'static str {
        match self {
            Limited::PendingFull { .. } => {
                "granted requests are not affected; review the pending requests (`vouch list`) and remove the junk \
                 (`vouch clean NAME`), or raise requests.max_pending in the policy (docs: policy/README.md)"
            }
            Limited::PendingRate { .. } => {
                "retry after the Retry-After seconds; granted requests are not affected; agents whose refused \
                 requests share one address (a NAT) may need a higher requests.kept_per_minute"
            }
        }
    }
}

impl std::fmt::Display for Limited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limited::PendingFull { max } => write!(
                f,
                "the store keeps {max} pending (refused) requests already (requests.max_pending): this refused \
                 request was not kept"
            ),
            Limited::PendingRate { per_minute, .. } => write!(
                f,
                "{per_minute} refused requests from this client address were kept within a minute \
                 (requests.kept_per_minute): this one was not kept"
            ),
        }
    }
}
