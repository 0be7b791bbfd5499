//! Connections open per client address, for the API's and the metrics' listeners: a slot
//! is taken at accept and given back when the connection ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most `max` connections open from one client address.
pub(super) struct PerAddress {
    open: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

/// One of a client address's connection slots, given back on drop.
pub(super) struct PeerSlot {
    table: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    pub(super) fn new(max: usize) -> Arc<PerAddress> {
        Arc::new(PerAddress { open: Mutex::new(HashMap::new()), max })
    }

    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// A slot for `ip`, or `None` when it already has `max` connections open.
    pub(super) fn take(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        let mut map = self.lock();
        let n = map.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(PeerSlot { table: self.clone(), ip })
    }

    /// The map, even after a thread panicked holding it (counts stay meaningful).
    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = self.table.lock();
        if let Some(n) = map.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}
