//! `Pool`: idle upstream connections per origin address, reused most-recent-first.
//!
//! Invariants: at most `per_origin` idle connections per address (a surplus one is closed
//! by the caller); an id is in the pool only while its connection is idle, has an armed
//! receive (so a close by the origin is noticed) and a timer for the pool's idle timeout.

use std::collections::HashMap;
use std::net::SocketAddr;

use coldwire_io::ConnectionId;

/// Idle upstream connections.
#[derive(Default)]
pub struct Pool {
    idle: HashMap<SocketAddr, Vec<ConnectionId>>,
    per_origin: usize,
}

impl Pool {
    /// An empty pool keeping up to `per_origin` connections per address.
    pub fn new(per_origin: usize) -> Pool {
        Pool {
            idle: HashMap::new(),
            per_origin,
        }
    }

    /// Takes the most recently used idle connection to `address`.
    pub fn take(&mut self, address: SocketAddr) -> Option<ConnectionId> {
        let idle = self.idle.get_mut(&address)?;
        let connection = idle.pop();
        if idle.is_empty() {
            self.idle.remove(&address);
        }
        connection
    }

    /// Keeps an idle connection; false when the origin already has enough (close it).
    pub fn put(&mut self, address: SocketAddr, connection: ConnectionId) -> bool {
        let idle = self.idle.entry(address).or_default();
        if idle.len() >= self.per_origin {
            return false;
        }
        idle.push(connection);
        true
    }

    /// Forgets a connection (it closed or timed out).
    pub fn remove(&mut self, address: SocketAddr, connection: ConnectionId) {
        if let Some(idle) = self.idle.get_mut(&address) {
            idle.retain(|&kept| kept != connection);
            if idle.is_empty() {
                self.idle.remove(&address);
            }
        }
    }

    /// Every idle connection (for shutdown).
    pub fn drain(&mut self) -> Vec<ConnectionId> {
        self.idle.drain().flat_map(|(_, idle)| idle).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(slot: u32) -> ConnectionId {
        ConnectionId {
            slot,
            generation: 0,
        }
    }

    #[test]
    fn most_recent_first_and_bounded() {
        let address: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let mut pool = Pool::new(2);
        assert!(pool.put(address, id(1)));
        assert!(pool.put(address, id(2)));
        assert!(!pool.put(address, id(3)));
        pool.remove(address, id(2));
        assert_eq!(pool.take(address), Some(id(1)));
        assert_eq!(pool.take(address), None);
    }
}
