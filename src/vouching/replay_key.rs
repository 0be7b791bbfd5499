//! What makes a set of vouched attributes one-time: its key in the replay journal
//! ([`crate::store::journal`]).

use crate::encoding::hex;

/// The key of one set of attributes in the journal ([`replay_key`]), and
/// the key an older vouch gave the same attributes, which is read but never written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayKey {
    pub key: String,
    pub legacy: Option<String>,
}

impl From<&str> for ReplayKey {
    fn from(key: &str) -> Self {
        ReplayKey { key: key.to_string(), legacy: None }
    }
}

/// What makes vouched attributes one-time, the key of their entry in the replay journal.
///
/// - Version 2: SHA-256 over the conductor certificate's SHA-256 (its DER fingerprint, 32
///   bytes) followed by the nonce. A nonce is one conductor's: another conductor that
///   learns it (user-data is often world-readable) and signs it again makes another key,
///   so it cannot burn the first conductor's attributes. The same conductor signing the
///   same nonce twice (with any other values) still gets one use.
/// - Version 1: the digest of the signed canonical string (the signature itself is
///   malleable: an ECDSA (r, s) is also valid as (r, n-s)), which names the conductor.
///
/// Journals written before this binding (vouch 0.1 up to issue 13) keyed version 2 by the
/// nonce alone (`v2-nonce:NONCE`): that key is the [`ReplayKey::legacy`] one, read (never
/// written) so that attributes used before an upgrade stay used after it. Such an entry
/// lives as long as the attributes (at most `attributes.max_lifetime`, up to 100 years
/// by policy), so it cannot be left to expire.
pub fn replay_key(nonce: Option<&str>, conductor_der: &[u8], signed_digest: &str) -> ReplayKey {
    match nonce {
        Some(n) => {
            let fingerprint = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, conductor_der);
            let mut bound = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
            bound.update(fingerprint.as_ref());
            bound.update(n.as_bytes());
            ReplayKey {
                key: format!("v2-conductor-nonce:{}", hex(bound.finish().as_ref())),
                legacy: Some(format!("v2-nonce:{n}")),
            }
        }
        None => ReplayKey { key: format!("v1-canonical:{signed_digest}"), legacy: None },
    }
}
