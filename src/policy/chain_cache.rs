//! The cache of conductor chains a policy verified.

/// Conductor certificates whose chain to this policy's trust verified, by SHA-256 of
/// their DER, with the time window in which that holds (the intersection of the
/// validity periods of the leaf and the intermediates used). A hit inside the window
/// skips webpki's path building and signature checks; anything else (a miss, a time
/// outside the window) verifies in full. Only verified chains enter, so filling it
/// needs certificates from a trusted root; it is cleared when it reaches
/// [`ChainCache::CAPACITY`]. Trust, intermediates and CRLs are fixed for a loaded
/// policy (SIGHUP loads a new one, with an empty cache), so the result is the same
/// as a full verification. The data directory's own root CRL, which may change under a
/// loaded policy ([`super::OwnCrl`]), is never cached here: each decision looks it up.
#[derive(Debug, Clone)]
pub struct ChainCache(super::digest_map::DigestMap<Window>);

/// The Unix seconds a verified chain holds: every certificate in it valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub first: i64,
    pub last: i64,
}

impl Default for ChainCache {
    fn default() -> Self {
        ChainCache(super::digest_map::DigestMap::new(Self::CAPACITY))
    }
}

impl ChainCache {
    pub const CAPACITY: usize = 4096;

    /// Whether `digest`'s chain is known good at `unix_time`.
    pub fn holds(&self, digest: &[u8; 32], unix_time: i64) -> bool {
        self.0.get(digest).is_some_and(|w| w.first <= unix_time && unix_time <= w.last)
    }

    /// Records a verified chain and its window.
    pub fn insert(&self, digest: [u8; 32], window: Window) {
        self.0.insert(digest, window);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
