//! Request targets: `--url` parsing (with weights), address resolution, and the request
//! bytes built once per target so that sending a request copies nothing (a shared `Bytes`).
//!
//! With a proxy, request lines are in absolute form (`GET http://host/path HTTP/1.1`) and
//! every connection goes to the proxy; otherwise in origin form to the URL's own address.
//!
//! A [`SEQ`] placeholder in a URL's path or query is replaced, request by request, by a
//! counter of the requests sent to that URL (0, 1, 2, …): every request asks for a
//! distinct URL (e.g. a cache miss for each). Such a request is assembled per send from
//! the prebuilt bytes around the placeholder; URLs without it still copy nothing.

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

/// A target ready for the event loop: its prebuilt requests and its endpoint index.
#[derive(Clone, Debug)]
pub struct PreparedTarget {
    /// The request keeping the connection open.
    pub keep_alive: Bytes,
    /// The same request with `Connection: close`.
    pub close: Bytes,
    /// Index into the engine's endpoint list (the address connections go to).
    pub endpoint: usize,
    /// Cumulative weight (for weighted choice).
    pub cumulative_weight: f64,
    /// Where the first [`SEQ`] starts in both requests, if the URL has one.
    seq_at: Option<usize>,
    /// The next value of the [`SEQ`] counter.
    next_seq: u64,
}

impl PreparedTarget {
    /// The bytes of the next request (`close`: the one with `Connection: close`), with
    /// [`SEQ`] replaced by this target's request counter, which then advances.
    pub fn next_request(&mut self, close: bool) -> Bytes {
        let prebuilt = if close { &self.close } else { &self.keep_alive };
        let Some(at) = self.seq_at else {
            return prebuilt.clone();
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        substitute_seq(prebuilt, at, seq)
    }
}

/// `request` with the [`SEQ`] that starts at `at` replaced by `seq`, and every later one
/// too (the absolute-form target and `Host` never contain one: it is only in the path).
fn substitute_seq(request: &[u8], at: usize, seq: u64) -> Bytes {
    let digits = seq.to_string();
    let digits = digits.as_bytes();
    let mut out = Vec::with_capacity(request.len() + digits.len());
    out.extend_from_slice(&request[..at]);
    let mut rest = &request[at..];
    while let Some(index) = find(rest, SEQ.as_bytes()) {
        out.extend_from_slice(&rest[..index]);
        out.extend_from_slice(digits);
        rest = &rest[index + SEQ.len()..];
    }
    out.extend_from_slice(rest);
    Bytes::from(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Prepares targets: resolves addresses (each distinct address becomes one endpoint, or the
/// proxy is the only one) and builds their requests. Returns the targets and endpoints.
pub fn prepare(
    targets: &[Target],
    proxy: Option<SocketAddr>,
) -> Result<(Vec<PreparedTarget>, Vec<SocketAddr>), BenchError> {
    if targets.is_empty() {
        return Err(BenchError::Config(
            "no target: give at least one --url".into(),
        ));
    }
    let mut endpoints: Vec<SocketAddr> = proxy.into_iter().collect();
    let mut prepared = Vec::with_capacity(targets.len());
    let mut cumulative = 0.0;
    for target in targets {
        let endpoint = match proxy {
            Some(_) => 0,
            None => {
                let address = target.resolve()?;
                match endpoints.iter().position(|known| *known == address) {
                    Some(index) => index,
                    None => {
                        endpoints.push(address);
                        endpoints.len() - 1
                    }
                }
            }
        };
        cumulative += target.weight;
        let keep_alive = target.request(proxy.is_some(), false);
        let seq_at = find(&keep_alive, SEQ.as_bytes());
        prepared.push(PreparedTarget {
            close: target.request(proxy.is_some(), true),
            keep_alive,
            endpoint,
            cumulative_weight: cumulative,
            seq_at,
            next_seq: 0,
        });
    }
    Ok((prepared, endpoints))
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
    fn seq_is_replaced_by_a_counter_per_request() {
        let targets = [
            Target::parse("http://127.0.0.1:8080/64k?v={seq}&again={seq}").unwrap(),
            Target::parse("http://127.0.0.1:8080/plain").unwrap(),
        ];
        let proxy = Some("127.0.0.1:3128".parse().unwrap());
        let (mut prepared, _) = prepare(&targets, proxy).unwrap();
        let lines: Vec<String> = (0..3)
            .map(|n| {
                let bytes = prepared[0].next_request(n == 2);
                let text = String::from_utf8(bytes.to_vec()).unwrap();
                text.lines().next().unwrap().to_owned()
            })
            .collect();
        assert_eq!(
            lines,
            [
                "GET http://127.0.0.1:8080/64k?v=0&again=0 HTTP/1.1",
                "GET http://127.0.0.1:8080/64k?v=1&again=1 HTTP/1.1",
                "GET http://127.0.0.1:8080/64k?v=2&again=2 HTTP/1.1",
            ]
        );
        let last = prepared[0].next_request(true);
        assert!(last.ends_with(b"Connection: close\r\n\r\n"));
        assert!(
            !last
                .windows(SEQ.len())
                .any(|window| window == SEQ.as_bytes())
        );
        // Without the placeholder: the prebuilt bytes themselves, never copied.
        let plain = prepared[1].next_request(false);
        assert_eq!(plain.as_ptr(), prepared[1].keep_alive.as_ptr());
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
