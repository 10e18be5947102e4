//! What the sockmap tests (`sockmap.rs`, `sockmap_body.rs`) share: a client and a server
//! on loopback with a "proxy" holding one connection to each, and byte patterns with their
//! SHA-256 to check that what crossed the kernel arrived exactly.

use std::net::{TcpListener, TcpStream};

/// The far ends and the proxy's two sockets: `client ↔ proxy[0]` (the proxy's front),
/// `proxy[1] ↔ server` (its back); the proxy's are non-blocking.
pub struct Topology {
    pub client: TcpStream,
    pub server: TcpStream,
    pub proxy: [TcpStream; 2],
}

/// Connects a new [`Topology`] through two listeners on 127.0.0.1, port 0.
pub fn topology() -> Topology {
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(front.local_addr().unwrap()).unwrap();
    let (proxy_front, _) = front.accept().unwrap();
    let proxy_back = TcpStream::connect(origin.local_addr().unwrap()).unwrap();
    let (server, _) = origin.accept().unwrap();
    proxy_front.set_nonblocking(true).unwrap();
    proxy_back.set_nonblocking(true).unwrap();
    Topology {
        client,
        server,
        proxy: [proxy_front, proxy_back],
    }
}

/// `length` bytes that differ with `seed` and do not repeat within a few KiB.
pub fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|index| {
            (index as u64)
                .wrapping_mul(2654435761)
                .wrapping_add(u64::from(seed)) as u8
                ^ (index >> 13) as u8
        })
        .collect()
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}
