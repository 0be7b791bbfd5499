//! A bounded map keyed by SHA-256, shared by the policy's caches (results that depend only on
//! some bytes and the loaded policy: SIGHUP loads a new policy, with empty caches).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Values by the SHA-256 of what they were computed from; cleared when it holds `capacity`.
/// Clones share one map.
#[derive(Debug)]
pub struct DigestMap<V> {
    map: Arc<Mutex<HashMap<[u8; 32], V>>>,
    capacity: usize,
}

impl<V> Clone for DigestMap<V> {
    fn clone(&self) -> Self {
        DigestMap { map: self.map.clone(), capacity: self.capacity }
    }
}

impl<V: Clone> DigestMap<V> {
    pub fn new(capacity: usize) -> Self {
        DigestMap { map: Arc::new(Mutex::new(HashMap::new())), capacity }
    }

    pub fn get(&self, digest: &[u8; 32]) -> Option<V> {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).get(digest).cloned()
    }

    pub fn insert(&self, digest: [u8; 32], value: V) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity {
            map.clear();
        }
        map.insert(digest, value);
    }

    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// The SHA-256 of `bytes`: a key of a [`DigestMap`].
pub fn digest(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref());
    out
}
