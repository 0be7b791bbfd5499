//! Connections open per client address and per client network, for the API's and the
//! metrics' listeners: a slot is taken at accept and given back when the connection ends.
//!
//! An address holds at most `max` connections (`--max-connections-per-address`). Once half
//! of all slots are in use, an address holds at most its share (a sixteenth of the slots)
//! and a network its share (a quarter): a few addresses, or one network, can no longer take
//! every slot, while agents behind one NAT address still open many connections on a server
//! that is not busy. An address is an IPv4 address, or an IPv6 /64 (one host's usual
//! share); a network is an IPv4 /24 or an IPv6 /48. An IPv4-mapped IPv6 address (a
//! dual-stack listener) counts as its IPv4 address.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

/// Of all slots, what one address may hold once half are in use.
pub const ADDRESS_SHARE: usize = 16;
/// Of all slots, what one network may hold once half are in use.
pub const NETWORK_SHARE: usize = 4;

/// Open connections per address and network, and their bounds.
pub(super) struct PerAddress {
    open: Mutex<Open>,
    max: usize,
    /// Open connections from which the shares apply (half the slots).
    busy: usize,
    address_share: usize,
    network_share: usize,
}

#[derive(Default)]
struct Open {
    address: HashMap<IpAddr, usize>,
    network: HashMap<IpAddr, usize>,
    total: usize,
}

/// Why a connection got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Crowded {
    /// Its address holds `max` connections already.
    Address(usize),
    /// Half the slots are in use and its address holds its share already.
    AddressShare(usize),
    /// Half the slots are in use and its network holds its share already.
    NetworkShare(usize),
}

impl std::fmt::Display for Crowded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Crowded::Address(n) => write!(f, "more than {n} connections from this address; closed"),
            Crowded::AddressShare(n) => {
                write!(f, "half the connection slots are in use and {n} are from this address; closed")
            }
            Crowded::NetworkShare(n) => {
                write!(f, "half the connection slots are in use and {n} are from this network (/24, IPv6 /48); closed")
            }
        }
    }
}

/// One of a client address's connection slots, given back on drop.
pub(super) struct PeerSlot {
    table: Arc<PerAddress>,
    address: IpAddr,
    network: IpAddr,
}

/// The address a limit counts `ip` under: IPv4 itself, IPv6 its /64.
pub(super) fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !((1u128 << 64) - 1))),
    }
}

/// The network a limit counts `ip` under: an IPv4 /24, an IPv6 /48.
pub(super) fn network_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(v4.to_bits() & 0xffff_ff00)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !((1u128 << 80) - 1))),
    }
}

impl PerAddress {
    /// `max` from one address; of `slots` in all, the shares once half are in use.
    pub(super) fn new(max: usize, slots: usize) -> Arc<PerAddress> {
        Arc::new(PerAddress {
            open: Mutex::new(Open::default()),
            max,
            busy: (slots / 2).max(1),
            address_share: (slots / ADDRESS_SHARE).max(1),
            network_share: (slots / NETWORK_SHARE).max(1),
        })
    }

    /// A slot for `ip`, or why not.
    pub(super) fn take(self: &Arc<Self>, ip: IpAddr) -> Result<PeerSlot, Crowded> {
        let (address, network) = (address_key(ip), network_key(ip));
        let mut open = self.lock();
        let from_address = open.address.get(&address).copied().unwrap_or(0);
        let from_network = open.network.get(&network).copied().unwrap_or(0);
        if from_address >= self.max {
            return Err(Crowded::Address(self.max));
        }
        if open.total >= self.busy {
            if from_address >= self.address_share {
                return Err(Crowded::AddressShare(self.address_share));
            }
            if from_network >= self.network_share {
                return Err(Crowded::NetworkShare(self.network_share));
            }
        }
        *open.address.entry(address).or_insert(0) += 1;
        // A network counts each of its addresses up to the address's share only: one address
        // holding many (before the server was busy) does not use up its neighbours' share.
        if from_address < self.address_share {
            *open.network.entry(network).or_insert(0) += 1;
        }
        open.total = open.total.saturating_add(1);
        Ok(PeerSlot { table: self.clone(), address, network })
    }

    /// The counts, even after a thread panicked holding them (they stay meaningful).
    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One fewer for `key`, forgotten at zero.
fn give_back(map: &mut HashMap<IpAddr, usize>, key: IpAddr) {
    if let Some(n) = map.get_mut(&key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(&key);
        }
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        let from_address = open.address.get(&self.address).copied().unwrap_or(0);
        give_back(&mut open.address, self.address);
        if from_address <= self.table.address_share {
            give_back(&mut open.network, self.network);
        }
        open.total = open.total.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_half_the_slots_are_in_use_an_address_and_a_network_hold_their_share_only() {
        // 32 slots: busy from 16, an address's share 2, a network's 8; 12 from one address.
        let t = PerAddress::new(12, 32);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut held: Vec<PeerSlot> = (0..12).map(|_| t.take(ip("::ffff:192.0.2.1")).unwrap()).collect();
        assert_eq!(t.take(ip("192.0.2.1")).err(), Some(Crowded::Address(12)), "a mapped address is the same");
        held.extend((0..4).map(|_| t.take(ip("192.0.3.1")).unwrap()));
        assert_eq!(t.take(ip("192.0.3.1")).err(), Some(Crowded::AddressShare(2)), "busy: the share counts");
        // 192.0.2.1's 12 count 2 (its share) in its /24: its neighbours still get in.
        for n in 2..5 {
            held.extend((0..2).map(|_| t.take(ip(&format!("192.0.2.{n}"))).unwrap()));
        }
        assert_eq!(t.take(ip("192.0.2.9")).err(), Some(Crowded::NetworkShare(8)), "busy: the /24 is over its share");
        held.push(t.take(ip("192.0.4.1")).unwrap());
        held.push(t.take(ip("192.0.4.1")).unwrap());
        assert!(t.take(ip("192.0.4.1")).is_err());
        assert_eq!(address_key(ip("2001:db8:0:1::1")), address_key(ip("2001:db8:0:1:ffff::2")));
        assert_eq!(network_key(ip("2001:db8:0:1::1")), network_key(ip("2001:db8:0:2::1")));
        held.truncate(8);
        assert!(t.take(ip("192.0.3.1")).is_ok(), "slots are given back: not busy any more");
        drop(held);
        let open = t.lock();
        assert!(open.network.is_empty() && open.address.is_empty(), "every count back to none");
    }
}
