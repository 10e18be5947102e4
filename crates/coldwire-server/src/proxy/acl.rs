//! `Acl`: which clients may use the proxy. Loopback only by default, so a proxy started
//! without thought is never an open proxy; `--allow CIDR` widens it.
//!
//! Invariant: a client is allowed only if one listed network contains its address
//! (IPv4-mapped IPv6 addresses are compared as IPv4). Networks are `ipnet`'s.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net};

/// One network, `address/prefix` (an [`ipnet::IpNet`]; a bare address is a host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr(IpNet);

/// Why a CIDR did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid network {0:?}: expected ADDRESS/PREFIX such as 10.0.0.0/8 or ::1/128")]
pub struct CidrError(String);

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Cidr, CidrError> {
        let error = || CidrError(text.to_owned());
        let network = match text.parse::<IpNet>() {
            Ok(network) => network,
            // A bare address: that host alone.
            Err(_) => IpNet::from(text.parse::<IpAddr>().map_err(|_| error())?),
        };
        Ok(Cidr(network))
    }
}

fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl Cidr {
    /// Whether `address` is inside this network (IPv4-mapped IPv6 addresses compared as
    /// IPv4).
    pub fn contains(&self, address: IpAddr) -> bool {
        self.0.contains(&canonical(address))
    }
}

/// The allowed client networks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    allowed: Vec<Cidr>,
}

impl Acl {
    /// 127.0.0.0/8 and ::1 only.
    pub fn loopback() -> Acl {
        Acl {
            allowed: vec![
                Cidr(IpNet::from(Ipv4Net::new_assert(Ipv4Addr::LOCALHOST, 8))),
                Cidr(IpNet::from(IpAddr::V6(Ipv6Addr::LOCALHOST))),
            ],
        }
    }

    /// Exactly these networks (an empty list allows nobody).
    pub fn new(allowed: Vec<Cidr>) -> Acl {
        Acl { allowed }
    }

    /// Adds a network.
    pub fn allow(&mut self, network: Cidr) {
        self.allowed.push(network);
    }

    /// Whether a client at `address` may use the proxy.
    pub fn allows(&self, address: IpAddr) -> bool {
        self.allowed.iter().any(|network| network.contains(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        let acl = Acl::loopback();
        assert!(acl.allows("127.0.0.1".parse().unwrap()));
        assert!(acl.allows("127.9.9.9".parse().unwrap()));
        assert!(acl.allows("::1".parse().unwrap()));
        assert!(acl.allows("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!acl.allows("10.0.0.1".parse().unwrap()));
        assert!(!acl.allows("::2".parse().unwrap()));
    }

    #[test]
    fn cidrs_parse_and_match() {
        let network: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(network.contains("10.1.200.3".parse().unwrap()));
        assert!(!network.contains("10.2.0.1".parse().unwrap()));
        let everything: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains("8.8.8.8".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Cidr>().is_err());
        assert!("banana/8".parse::<Cidr>().is_err());
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
        let host: Cidr = "192.168.1.5".parse().unwrap();
        assert!(host.contains("192.168.1.5".parse().unwrap()));
        assert!(!host.contains("192.168.1.6".parse().unwrap()));
    }
}
