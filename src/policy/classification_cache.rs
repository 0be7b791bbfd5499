//! The cache of classifications a policy parsed.

use crate::vouching::classification::Classification;

/// Classifications parsed and validated under this policy, by SHA-256 of their base64 text
/// as the CSR carries it: a fleet's nodes share a few roles, so most requests carry a
/// classification already parsed. Parsing is a pure function of the text and the policy's
/// size limit (fixed for a loaded policy: SIGHUP loads a new one, with an empty cache), so
/// a hit is the same result as a parse. Only classifications a trusted conductor signed
/// reach the parser, and only those that parsed enter (a refused one is parsed again each
/// time); the cache is cleared when it reaches [`ClassificationCache::CAPACITY`].
#[derive(Debug, Clone, Default)]
pub struct ClassificationCache(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<[u8; 32], Classification>>>);

impl ClassificationCache {
    pub const CAPACITY: usize = 256;

    /// The classification parsed from `base64` before, if any.
    pub fn get(&self, digest: &[u8; 32]) -> Option<Classification> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(digest).cloned()
    }

    /// Records a classification that parsed.
    pub fn insert(&self, digest: [u8; 32], c: &Classification) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        map.insert(digest, c.clone());
    }

    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of a classification's base64 text.
    pub fn digest(base64: &str) -> [u8; 32] {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, base64.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        out
    }
}
