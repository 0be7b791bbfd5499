//! `[requests]`: how many refused requests are kept for the operator (policy/README.md).

use super::PolicyError;
use crate::limits::{DEFAULT_KEPT_PER_MINUTE, DEFAULT_MAX_PENDING};
use serde::Deserialize;
use toml::Spanned;

/// `[requests]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequests {
    max_pending: Option<Spanned<i64>>,
    kept_per_minute: Option<Spanned<i64>>,
}

/// `[requests]`, validated: the bounds on refused requests kept (granted ones have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Pending (refused) requests the store keeps at most; a refused request under a new
    /// name beyond that is not kept (`vouch serve`: 503 with Retry-After).
    pub max_pending: usize,
    /// Refused requests `vouch serve` keeps from one client address a minute at most
    /// (429 with Retry-After beyond).
    pub kept_per_minute: u32,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits { max_pending: DEFAULT_MAX_PENDING, kept_per_minute: DEFAULT_KEPT_PER_MINUTE }
    }
}

/// The largest `requests.max_pending`.
const MAX_PENDING_LIMIT: i64 = 1_000_000;
/// The largest `requests.kept_per_minute`.
const KEPT_PER_MINUTE_LIMIT: i64 = 60_000;

/// Makes a policy error pointing at a span of the file and naming a key.
pub(super) type ErrorAt<'a> = &'a dyn Fn(Option<std::ops::Range<usize>>, &str, String) -> PolicyError;

/// Validates `[requests]`.
pub(super) fn limits(raw: &RawRequests, err: ErrorAt<'_>) -> Result<RequestLimits, PolicyError> {
    let ranged = |v: &Option<Spanned<i64>>, key: &str, max: i64| -> Result<Option<i64>, PolicyError> {
        let Some(n) = v else { return Ok(None) };
        let value = *n.get_ref();
        if !(1..=max).contains(&value) {
            return Err(err(Some(n.span()), key, format!("{value} is out of range 1..={max}")));
        }
        Ok(Some(value))
    };
    let defaults = RequestLimits::default();
    let max_pending = ranged(&raw.max_pending, "requests.max_pending", MAX_PENDING_LIMIT)?;
    let kept_per_minute = ranged(&raw.kept_per_minute, "requests.kept_per_minute", KEPT_PER_MINUTE_LIMIT)?;
    Ok(RequestLimits {
        max_pending: max_pending.and_then(|v| usize::try_from(v).ok()).unwrap_or(defaults.max_pending),
        kept_per_minute: kept_per_minute.and_then(|v| u32::try_from(v).ok()).unwrap_or(defaults.kept_per_minute),
    })
}
