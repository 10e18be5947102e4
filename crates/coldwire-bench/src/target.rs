//! Request targets: `--url` parsing (with weights), address resolution, and a target's
//! request bytes — in origin form, or in absolute form (`GET http://host/path HTTP/1.1`)
//! for a proxy. The `urls` workload (`crate::workload::urls`) prebuilds them once per
//! target and picks one per request.
//!
//! A [`SEQ`] placeholder in a URL's path or query is replaced, request by request, by a
//! counter of the requests sent to that URL (0, 1, 2, …): every request asks for a
//! distinct URL (e.g. a cache miss for each).

use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;

use crate::error::BenchError;

/// The placeholder in `--url` replaced by a per-request counter.
pub const SEQ: &str = "{seq}";

/// One `--url`: where to send, what to ask, how often.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL as given (without the weight).
    pub url: String,
    /// Host as written in the URL (used in `Host`).
    pub host: String,
    /// Port (80 by default).
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
    /// Relative weight among targets (> 0).
    pub weight: f64,
}

impl Target {
    /// Parses `http://HOST[:PORT][/PATH]` optionally followed by `@WEIGHT`.
    pub fn parse(text: &str) -> Result<Target, BenchError> {
        let bad = |reason| BenchError::BadUrl {
            url: text.to_owned(),
            reason,
        };
        let (url, weight) = match text.rsplit_once('@') {
            Some((url, weight)) if url.contains("://") && weight.parse::<f64>().is_ok() => {
                let weight: f64 = weight.parse().unwrap_or(1.0);
                if !(weight.is_finite() && weight > 0.0) {
                    return Err(bad("the weight must be a positive number"));
                }
                (url, weight)
            }
            _ => (text, 1.0),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(index) => (&rest[..index], &rest[index..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad(
                "missing host (or user information, which is not supported)",
            ));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in an IPv6 host"))?;
            let port = match after.strip_prefix(':') {
                Some(port) => port.parse().map_err(|_| bad("the port is not a number"))?,
                None if after.is_empty() => 80,
                None => return Err(bad("junk after the IPv6 host")),
            };
            (host.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (
                    host.to_owned(),
                    port.parse().map_err(|_| bad("the port is not a number"))?,
                ),
                None => (authority.to_owned(), 80),
            }
        };
        let path = path.split('#').next().unwrap_or("/").to_owned();
        if path.bytes().any(|byte| byte <= b' ' || byte == 0x7f) {
            return Err(bad("spaces or control characters in the path"));
        }
        Ok(Target {
            url: url.to_owned(),
            host,
            port,
            path,
            weight,
        })
    }

    /// The `Host` field value.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// Resolves the URL's host to one socket address (the first the resolver gives).
    pub fn resolve(&self) -> Result<SocketAddr, BenchError> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|source| BenchError::Resolve {
                host: self.host.clone(),
                source,
            })?
            .next()
            .ok_or_else(|| BenchError::Resolve {
                host: self.host.clone(),
                source: std::io::Error::other("no address"),
            })
    }

    /// The request bytes: origin form, or absolute form when `through_proxy`.
    /// `close` adds `Connection: close` (the last request on a connection).
    pub fn request(&self, through_proxy: bool, close: bool) -> Bytes {
        let authority = self.authority();
        let target = if through_proxy {
            format!("http://{authority}{}", self.path)
        } else {
            self.path.clone()
        };
        let connection = if close { "Connection: close\r\n" } else { "" };
        Bytes::from(format!(
            "GET {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: coldwire-bench\r\n{connection}\r\n"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls_weights_and_ipv6() {
        let target = Target::parse("http://127.0.0.1:8080/a/b.bin?x=1@3").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 8080, "/a/b.bin?x=1")
        );
        assert_eq!(target.weight, 3.0);
        let target = Target::parse("http://example.com").unwrap();
        assert_eq!(
            (target.port, target.path.as_str(), target.weight),
            (80, "/", 1.0)
        );
        let target = Target::parse("http://[::1]:81/x").unwrap();
        assert_eq!(
            (target.host.as_str(), target.authority()),
            ("::1", "[::1]:81".into())
        );
        let target = Target::parse("http://h/mail@home").unwrap();
        assert_eq!(target.path, "/mail@home");
    }

    #[test]
    fn refuses_what_it_cannot_send() {
        for bad in [
            "https://x/",
            "ftp://x",
            "http:///x",
            "http://x:port/",
            "http://x/a b",
            "http://x/@0",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_in_origin_and_absolute_form() {
        let target = Target::parse("http://127.0.0.1:8080/f").unwrap();
        let origin = target.request(false, false);
        assert!(origin.starts_with(b"GET /f HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        let absolute = target.request(true, true);
        assert!(absolute.starts_with(b"GET http://127.0.0.1:8080/f HTTP/1.1\r\n"));
        assert!(absolute.ends_with(b"Connection: close\r\n\r\n"));
    }
}
