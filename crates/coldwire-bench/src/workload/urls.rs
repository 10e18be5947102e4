//! The `urls` workload: the `--url URL[@WEIGHT]` list. Each request picks one URL by
//! weight (no draw when there is one URL); its bytes are built once per URL so that sending
//! copies nothing (a shared `Bytes`), except for a URL with [`SEQ`], whose request is
//! assembled per send from the prebuilt bytes around the placeholder with the URL's own
//! counter (0, 1, 2, …).
//!
//! With a proxy, request lines are in absolute form and every connection goes to the
//! proxy (the one endpoint); otherwise each distinct resolved address is an endpoint.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::{RequestSpec, Workload};
use crate::config::LoadConfig;
use crate::error::BenchError;
use crate::schedule::Random;
use crate::target::{RequestOptions, SEQ, Target};

/// The name it is registered under.
pub const NAME: &str = "urls";

/// Builds it from `config.targets` and `config.proxy` (see [`prepare`]).
pub fn build(config: &LoadConfig) -> Result<Box<dyn Workload>, BenchError> {
    let (targets, endpoints) = prepare_with(&config.targets, config.proxy, &config.request)?;
    Ok(Box::new(UrlWorkload { targets, endpoints }))
}

/// Weighted URLs with prebuilt requests.
#[derive(Clone, Debug)]
pub struct UrlWorkload {
    targets: Vec<PreparedTarget>,
    endpoints: Vec<SocketAddr>,
}

impl UrlWorkload {
    /// Resolves and prebuilds `targets` (all sent to `proxy` when given).
    pub fn new(targets: &[Target], proxy: Option<SocketAddr>) -> Result<UrlWorkload, BenchError> {
        let (targets, endpoints) = prepare(targets, proxy)?;
        Ok(UrlWorkload { targets, endpoints })
    }
}

impl Workload for UrlWorkload {
    fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    fn next_request(&mut self, _intended: Instant, random: &mut Random) -> RequestSpec {
        let target = if self.targets.len() == 1 {
            0
        } else {
            let total = self
                .targets
                .last()
                .map_or(1.0, |target| target.cumulative_weight);
            let point = random.next_unit() * total;
            self.targets
                .iter()
                .position(|target| point < target.cumulative_weight)
                .unwrap_or(self.targets.len() - 1)
        };
        RequestSpec {
            endpoint: self.targets[target].endpoint,
            request: target,
        }
    }

    fn request_bytes(&mut self, request: RequestSpec, close: bool) -> Bytes {
        self.targets[request.request].next_request(close)
    }

    fn trickle_head(&self) -> Bytes {
        self.targets
            .first()
            .map(|target| target.keep_alive.clone())
            .unwrap_or_default()
    }
}

/// A target ready for the event loop: its prebuilt requests and its endpoint index.
#[derive(Clone, Debug)]
pub struct PreparedTarget {
    /// The request keeping the connection open.
    pub keep_alive: Bytes,
    /// The same request with `Connection: close`.
    pub close: Bytes,
    /// Index into the endpoint list (the address connections go to).
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
/// of the request line too (the absolute-form target and `Host` never contain one: it is
/// only in the path; header fields and the body are left as given, so `Content-Length`
/// stays true).
fn substitute_seq(request: &[u8], at: usize, seq: u64) -> Bytes {
    let digits = seq.to_string();
    let digits = digits.as_bytes();
    let line_end = request_line_end(request);
    let mut out = Vec::with_capacity(request.len() + digits.len());
    out.extend_from_slice(&request[..at]);
    let mut rest = &request[at..line_end];
    while let Some(index) = find(rest, SEQ.as_bytes()) {
        out.extend_from_slice(&rest[..index]);
        out.extend_from_slice(digits);
        rest = &rest[index + SEQ.len()..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&request[line_end..]);
    Bytes::from(out)
}

/// Where the request line ends (its CRLF), or the whole length.
fn request_line_end(request: &[u8]) -> usize {
    find(request, b"\r\n").unwrap_or(request.len())
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
    prepare_with(targets, proxy, &RequestOptions::default())
}

/// [`prepare`] with the method, header fields and body of `options`.
pub fn prepare_with(
    targets: &[Target],
    proxy: Option<SocketAddr>,
    options: &RequestOptions,
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
        let keep_alive = target.request_with(options, proxy.is_some(), false);
        let seq_at = find(&keep_alive[..request_line_end(&keep_alive)], SEQ.as_bytes());
        prepared.push(PreparedTarget {
            close: target.request_with(options, proxy.is_some(), true),
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
}
