//! The proxy's own sockets as destinations: a request (or CONNECT) whose target resolves to
//! the proxy's listening address or its admin listener is refused with `403`
//! (`destination_ip_prohibited`) before any connection is opened. Through a forward proxy
//! a client the ACL admits — possibly a remote one, `--allow` — would otherwise read the
//! admin endpoint as if it were local (`GET http://127.0.0.1:ADMIN/stats`, or `0.0.0.0`,
//! `[::ffff:127.0.0.1]`, `2130706433`: the check is on the resolved address), and a
//! request to the proxy itself costs a second connection before `Via` catches the loop.
//!
//! A socket bound to a wildcard address (`0.0.0.0:P`, `[::]:P`) is matched on its port for
//! every loopback and unspecified destination; the host's other interface addresses are
//! not enumerated (a client that may reach the proxy there may reach it directly too).

use std::net::{IpAddr, SocketAddr};

/// Whether connecting to `destination` would reach one of `own` (the proxy's listening
/// and admin addresses, as bound).
pub(super) fn is_own_address(own: &[SocketAddr], destination: SocketAddr) -> bool {
    let target = canonical(destination.ip());
    own.iter().any(|mine| {
        if mine.port() != destination.port() {
            return false;
        }
        let bound = canonical(mine.ip());
        // Connecting to 0.0.0.0 or :: reaches this host (Linux routes it to loopback).
        let local = target.is_loopback() || target.is_unspecified();
        bound == target
            || (bound.is_unspecified() && local)
            || (bound.is_loopback() && target.is_unspecified())
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 address it names.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn own_sockets_are_recognised_in_every_spelling() {
        let own = [at("127.0.0.1:3128"), at("127.0.0.1:9090")];
        for hit in [
            "127.0.0.1:9090",
            "0.0.0.0:9090",
            "[::ffff:127.0.0.1]:9090",
            "127.0.0.1:3128",
        ] {
            assert!(is_own_address(&own, at(hit)), "{hit}");
        }
        for miss in [
            "127.0.0.1:80",
            "127.0.0.2:9090",
            "10.0.0.1:9090",
            "[::1]:8080",
        ] {
            assert!(!is_own_address(&own, at(miss)), "{miss}");
        }
        let wildcard = [at("0.0.0.0:9090")];
        for hit in ["127.0.0.5:9090", "[::1]:9090", "0.0.0.0:9090"] {
            assert!(is_own_address(&wildcard, at(hit)), "{hit}");
        }
        assert!(!is_own_address(&wildcard, at("127.0.0.1:9091")));
    }
}
