//! The cache of classifications a policy parsed.

use crate::vouching::classification::Classification;

/// Classifications parsed and validated under this policy, by SHA-256 of their base64 text
/// as the CSR carries it: a fleet's nodes share a few roles, so most requests carry a
/// classification already parsed. Parsing is a pure function of the text and the policy's
/// size limit (fixed for a loaded policy: SIGHUP loads a new one, with an empty cache), so
/// a hit is the same result as a parse. Only classifications a trusted conductor signed
/// reach the parser, and only those that parsed enter (a refused one is parsed again each
/// time); the cache is cleared when it reaches [`ClassificationCache::CAPACITY`].
#[derive(Debug, Clone)]
pub struct ClassificationCache(super::digest_map::DigestMap<Classification>);

impl Default for ClassificationCache {
    fn default() -> Self {
        ClassificationCache(super::digest_map::DigestMap::new(Self::CAPACITY))
    }
}

impl ClassificationCache {
    pub const CAPACITY: usize = 256;

    /// The classification parsed before from the base64 text whose digest is `digest`, if any.
    pub fn get(&self, digest: &[u8; 32]) -> Option<Classification> {
        self.0.get(digest)
    }

    /// Records a classification that parsed.
    pub fn insert(&self, digest: [u8; 32], c: &Classification) {
        self.0.insert(digest, c.clone());
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of a classification's base64 text.
    pub fn digest(base64: &str) -> [u8; 32] {
        super::digest_map::digest(base64.as_bytes())
    }
}
