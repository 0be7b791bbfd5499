//! Refused requests kept per client address: a token bucket each, `per_minute` deep and
//! refilled at `per_minute` a minute. Only a refused request kept under a new name takes a token; a
//! granted request takes none.

use crate::limits::Limited;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Client addresses tracked at most; beyond, buckets that have filled up again are
/// forgotten, and if none has, a new address waits (its refused request is not kept).
const MAX_TRACKED: usize = 65_536;

/// The buckets of every client address that had a refused request kept recently.
#[derive(Default)]
pub struct KeptRate {
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl std::fmt::Debug for KeptRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptRate").finish_non_exhaustive()
    }
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// The bucket at `now`, refilled at `per_minute` a minute up to `per_minute`.
    fn at(self, now: Instant, per_minute: u32) -> Bucket {
        let cap = f64::from(per_minute);
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * cap / 60.0;
        Bucket { tokens: (self.tokens + refill).min(cap), at: now }
    }
}

impl KeptRate {
    /// Takes one of `ip`'s tokens, or says how long until it has one.
    pub fn take(&self, ip: IpAddr, per_minute: u32, now: Instant) -> Result<(), Limited> {
        let per_minute = per_minute.max(1);
        let cap = f64::from(per_minute);
        let key = super::peers::address_key(ip);
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_TRACKED && !map.contains_key(&key) {
            map.retain(|_, b| b.at(now, per_minute).tokens < cap);
            if map.len() >= MAX_TRACKED {
                return Err(Limited::PendingRate { per_minute, retry_after: 60 });
            }
        }
        let b = map.entry(key).or_insert(Bucket { tokens: cap, at: now }).at(now, per_minute);
        if b.tokens >= 1.0 {
            map.insert(key, Bucket { tokens: b.tokens - 1.0, at: now });
            return Ok(());
        }
        map.insert(key, b);
        let wait = ((1.0 - b.tokens) * 60.0 / cap).ceil();
        // At most a minute (one token's refill at the slowest rate).
        let retry_after = if wait.is_finite() && wait >= 1.0 { (wait as u64).min(60) } else { 1 };
        Err(Limited::PendingRate { per_minute, retry_after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_one_token_per_period_per_address() {
        let r = KeptRate::default();
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(r.take(a, 3, t), Ok(()));
        }
        assert_eq!(r.take(a, 3, t), Err(Limited::PendingRate { per_minute: 3, retry_after: 20 }));
        assert_eq!(r.take(b, 3, t), Ok(()), "another address has its own bucket");
        assert_eq!(r.take(a, 3, t + Duration::from_secs(20)), Ok(()));
        assert!(r.take(a, 3, t + Duration::from_secs(20)).is_err());
    }
}
