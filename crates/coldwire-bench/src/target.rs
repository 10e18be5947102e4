//! Request targets: `--url` parsing (with weights, `http://` or `https://`), address
//! resolution, and a target's request bytes — in origin form, or in absolute form
//! (`GET http://host/path HTTP/1.1`) for a proxy — with the method, extra header fields
//! and body of [`RequestOptions`]. The `urls` workload (`crate::workload::urls`) prebuilds them once per
//! target and picks one per request.
//!
//! A [`SEQ`] placeholder in a URL's path or query is replaced, request by request, by a
//! counter of the requests sent to that URL (0, 1, 2, …): every request asks for a
//! distinct URL (e.g. a cache miss for each).

use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use serde::Serialize;

use crate::error::BenchError;

/// What every request carries besides its URL: `--method`, `--header`, `--body`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestOptions {
    /// The request method (`GET` unless `-m/--method` says otherwise).
    pub method: String,
    /// Extra header fields, in order (`-H/--header "Name: value"`). A `Host` or
    /// `User-Agent` given here replaces the generator's own.
    pub headers: Vec<(String, String)>,
    /// The request body (sent with `Content-Length`); empty: none.
    #[serde(rename = "body_bytes", serialize_with = "serialize_length")]
    pub body: Bytes,
}

fn serialize_length<S: serde::Serializer>(body: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(body.len() as u64)
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            method: "GET".to_owned(),
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }
}

impl RequestOptions {
    /// Checks the method is a token and the header fields are well formed (a name that is a
    /// token, a value without CR, LF or NUL) and leave the framing to the generator.
    pub fn validate(&self) -> Result<(), BenchError> {
        let fail = |message: String| Err(BenchError::Config(message));
        if self.method.is_empty() || !self.method.bytes().all(is_token_byte) {
            return fail(format!(
                "--method `{}` is not an HTTP method (letters such as GET, POST, PUT, HEAD)",
                self.method
            ));
        }
        for (name, value) in &self.headers {
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return fail(format!(
                    "--header `{name}: {value}`: the name must be a token (letters, digits, - …); write --header 'Name: value'"
                ));
            }
            if value.bytes().any(|byte| matches!(byte, b'\r' | b'\n' | 0)) {
                return fail(format!(
                    "--header `{name}`: the value must not contain CR, LF or NUL"
                ));
            }
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("transfer-encoding")
                || name.eq_ignore_ascii_case("connection")
            {
                return fail(format!(
                    "--header `{name}`: the generator sets {name} itself (from --body, and \
                     --requests-per-connection: 1 is a connection per request); leave it out"
                ));
            }
        }
        Ok(())
    }

    fn has_header(&self, wanted: &str) -> bool {
        self.headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(wanted))
    }
}

/// Parses `Name: value` (as curl's and wrk's `-H`).
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not a header field: write 'Name: value'"))?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(format!(
            "`{text}`: `{name}` is not a field name (letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

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
    /// `https://`: the connection speaks TLS (rustls), the host name is sent as SNI and
    /// checked against the certificate unless `--insecure`.
    pub tls: bool,
    /// Relative weight among targets (> 0).
    pub weight: f64,
}

impl Target {
    /// Parses `http[s]://HOST[:PORT][/PATH]` optionally followed by `@WEIGHT`.
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
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ if !url.contains("://") => {
                return Err(bad(
                    "no scheme: start it with http:// (or https://), as wrk, ab and h2load need",
                ));
            }
            _ => return Err(bad("only http:// and https:// URLs are supported")),
        };
        let default_port = if tls { 443 } else { 80 };
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
                None if after.is_empty() => default_port,
                None => return Err(bad("junk after the IPv6 host")),
            };
            (host.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (
                    host.to_owned(),
                    port.parse().map_err(|_| bad("the port is not a number"))?,
                ),
                None => (authority.to_owned(), default_port),
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
            tls,
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
        if self.port == if self.tls { 443 } else { 80 } {
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

    /// The request bytes of a plain GET: origin form, or absolute form when
    /// `through_proxy`. `close` adds `Connection: close` (the last request on a connection).
    pub fn request(&self, through_proxy: bool, close: bool) -> Bytes {
        self.request_with(&RequestOptions::default(), through_proxy, close)
    }

    /// The request bytes with `options`' method, header fields and body (with its
    /// `Content-Length`).
    pub fn request_with(
        &self,
        options: &RequestOptions,
        through_proxy: bool,
        close: bool,
    ) -> Bytes {
        let authority = self.authority();
        let target = if through_proxy {
            format!("http://{authority}{}", self.path)
        } else {
            self.path.clone()
        };
        let mut head = format!("{} {target} HTTP/1.1\r\n", options.method);
        if !options.has_header("host") {
            head += &format!("Host: {authority}\r\n");
        }
        if !options.has_header("user-agent") {
            head += "User-Agent: coldwire-bench\r\n";
        }
        for (name, value) in &options.headers {
            head += &format!("{name}: {value}\r\n");
        }
        if !options.body.is_empty() || matches!(options.method.as_str(), "POST" | "PUT" | "PATCH") {
            head += &format!("Content-Length: {}\r\n", options.body.len());
        }
        if close {
            head += "Connection: close\r\n";
        }
        head += "\r\n";
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&options.body);
        Bytes::from(bytes)
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
    fn a_url_without_a_scheme_is_told_to_add_one() {
        let error = Target::parse("127.0.0.1:8080/index.html").unwrap_err();
        assert!(
            error.to_string().contains("start it with http://"),
            "{error}"
        );
        let error = Target::parse("ftp://x").unwrap_err();
        assert!(error.to_string().contains("only http://"), "{error}");
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

    #[test]
    fn https_urls_default_to_port_443() {
        let target = Target::parse("https://localhost/x").unwrap();
        assert!(target.tls);
        assert_eq!((target.port, target.authority()), (443, "localhost".into()));
        let target = Target::parse("https://localhost:8443/x").unwrap();
        assert_eq!(target.authority(), "localhost:8443");
        assert!(!Target::parse("http://localhost/x").unwrap().tls);
    }

    #[test]
    fn method_headers_and_body_go_into_the_request() {
        let target = Target::parse("http://127.0.0.1:8080/f").unwrap();
        let options = RequestOptions {
            method: "POST".into(),
            headers: vec![
                parse_header("X-Test: one").unwrap(),
                parse_header("Host:example.org").unwrap(),
            ],
            body: Bytes::from_static(b"hello"),
        };
        options.validate().unwrap();
        let bytes = target.request_with(&options, false, false);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "POST /f HTTP/1.1\r\nUser-Agent: coldwire-bench\r\nX-Test: one\r\nHost: example.org\r\n\
             Content-Length: 5\r\n\r\nhello"
        );
    }

    #[test]
    fn bad_methods_and_headers_are_refused_with_the_form() {
        assert!(
            parse_header("no colon")
                .unwrap_err()
                .contains("Name: value")
        );
        assert!(parse_header("bad name: x").is_err());
        let mut options = RequestOptions {
            method: "GE T".into(),
            ..RequestOptions::default()
        };
        assert!(options.validate().is_err());
        options.method = "GET".into();
        options.headers = vec![("Content-Length".into(), "3".into())];
        assert!(options.validate().is_err());
        options.headers = vec![("X".into(), "a\r\nInjected: 1".into())];
        assert!(options.validate().is_err());
    }
}
