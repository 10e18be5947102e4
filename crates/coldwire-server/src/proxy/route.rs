//! Phase 2, route: who may ask and where a request goes. A pure function of the
//! configuration, the client's standing with the ACL and the parsed head — no driver, no
//! store — so its rules are unit-tested here directly.
//!
//! Rules, in order: a client outside the ACL, or a request that already carries this
//! proxy's `Via` (a forwarding loop), is refused (403, then close); a `Connection` naming
//! a framing or routing field is a 400 (forwarding without it would leave the body
//! unframed upstream), and so is a target with characters a URI cannot hold (`\`, `"`,
//! `{`, `|`...) or a broken `%` escape; a forward proxy takes absolute-form `http://` targets and CONNECT
//! (to allowed ports; 403 with the reason otherwise), refuses `https://` in absolute form
//! (400: use CONNECT) and origin-form (400 saying how a forward proxy is used: it is not a
//! web server); a reverse proxy sends
//! everything to its origin, refuses CONNECT (405), and keeps the client's `Host` (or the
//! origin's authority for an HTTP/1.0 request without one).

use std::borrow::Cow;

use coldwire_http::{Method, RequestHead, Status, Target, is_valid_target, parse_target};

use super::config::{Mode, ProxyConfig};
use super::error::ExchangeError;
use super::head::{connection_names_framing, via_hops};

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Destination<'a> {
    /// Host to resolve.
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// `Host` header value.
    pub authority: Cow<'a, str>,
    /// Origin-form target.
    pub path_and_query: Cow<'a, str>,
}

/// What the route phase decided.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route<'a> {
    /// Refused by local policy (the ACL, a forwarding loop): 403, then close.
    Refused,
    /// A CONNECT to a port the policy does not allow: 403 with a text saying why.
    PortRefused(u16),
    /// An origin-form request (`GET /x`) to a forward proxy, as a browser or curl sends to
    /// a web server: 400 with a text saying how a forward proxy is used.
    NotAProxyRequest,
    /// A CONNECT tunnel to `host:port`.
    Tunnel {
        /// Host to resolve.
        host: &'a str,
        /// Port.
        port: u16,
    },
    /// A request for an origin (through the cache).
    Origin(Destination<'a>),
}

/// Routes a parsed request (see the module doc for the rules).
pub(super) fn route<'a>(
    config: &'a ProxyConfig,
    denied: bool,
    head: &RequestHead<'a>,
) -> Result<Route<'a>, ExchangeError> {
    if denied || via_hops(head, &config.name) > 0 {
        return Ok(Route::Refused);
    }
    if connection_names_framing(head) {
        return Err(ExchangeError::client(Status::BAD_REQUEST));
    }
    let bad_request = || ExchangeError::client(Status::BAD_REQUEST);
    // A target with non-URI characters or a broken %-escape is not passed on for an
    // origin to read its own way (RFC 9112 §3).
    if !is_valid_target(head.target().as_bytes()) {
        return Err(bad_request());
    }
    let target = parse_target(head.method(), head.target())?;
    let destination = match (target, &config.mode) {
        (Target::Authority(authority), Mode::Forward) => {
            let (host, port) = split_authority(authority, 443).ok_or_else(bad_request)?;
            if !config.connect_ports.allows(port) {
                return Ok(Route::PortRefused(port));
            }
            return Ok(Route::Tunnel { host, port });
        }
        (
            Target::Absolute {
                scheme, authority, ..
            },
            Mode::Forward,
        ) => {
            if !scheme.eq_ignore_ascii_case("http") {
                return Err(bad_request());
            }
            let (host, port) = split_authority(authority, 80).ok_or_else(bad_request)?;
            Destination {
                host,
                port,
                authority: Cow::Borrowed(authority),
                path_and_query: origin_target(head, authority),
            }
        }
        (Target::Origin { .. } | Target::Asterisk, Mode::Reverse { host, port }) => {
            let authority = match head
                .host()
                .and_then(|value| std::str::from_utf8(value).ok())
                .filter(|value| !value.is_empty())
            {
                Some(received) => Cow::Borrowed(received),
                // An HTTP/1.0 request without Host: the origin's own authority.
                None if *port == 80 => Cow::Borrowed(host.as_str()),
                None => Cow::Owned(format!("{host}:{port}")),
            };
            Destination {
                host,
                port: *port,
                authority,
                path_and_query: Cow::Borrowed(head.target()),
            }
        }
        (
            Target::Absolute {
                scheme, authority, ..
            },
            Mode::Reverse { host, port },
        ) => {
            // A gateway for an http origin: another scheme is not for it.
            if !scheme.eq_ignore_ascii_case("http") {
                return Err(bad_request());
            }
            Destination {
                host,
                port: *port,
                authority: Cow::Borrowed(authority),
                path_and_query: origin_target(head, authority),
            }
        }
        (Target::Authority(_), Mode::Reverse { .. }) => {
            return Err(ExchangeError::policy(Status::METHOD_NOT_ALLOWED));
        }
        // An origin-form request to a forward proxy: it is not a web server.
        (Target::Origin { .. } | Target::Asterisk, Mode::Forward) => {
            return Ok(Route::NotAProxyRequest);
        }
    };
    Ok(Route::Origin(destination))
}

/// Splits `host[:port]` (IPv6 literals in brackets), with `default` when no port.
pub fn split_authority(authority: &str, default: u16) -> Option<(&str, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None if after.is_empty() => default,
            None => return None,
        };
        return Some((host, port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((authority, default)),
    }
    .filter(|(host, _)| !host.is_empty())
}

/// The origin-form target of an absolute-form request: what follows the authority, without
/// a fragment; an empty path becomes `/` and keeps its query (`http://h?q` → `/?q`, RFC
/// 9112 §3.2.1), the only case that needs a new string.
pub fn path_and_query<'a>(target: &'a str, authority: &str) -> Cow<'a, str> {
    let after_scheme = target.find("//").map_or(0, |at| at + 2);
    let start = after_scheme + authority.len();
    let rest = target.get(start..).unwrap_or("/");
    let rest = rest.split('#').next().unwrap_or("");
    if rest.starts_with('/') {
        Cow::Borrowed(rest)
    } else if rest.starts_with('?') {
        Cow::Owned(format!("/{rest}"))
    } else {
        Cow::Borrowed("/")
    }
}

/// The target sent upstream for an absolute-form request: [`path_and_query`], except that
/// an `OPTIONS` for a URI with an empty path and no query goes on as `*` (RFC 9112 §3.2.4:
/// it asks about the server, not about `/`).
fn origin_target<'a>(head: &RequestHead<'a>, authority: &str) -> Cow<'a, str> {
    let target = head.target();
    if head.method() == Method::Options {
        let after_scheme = target.find("//").map_or(0, |at| at + 2);
        let rest = target.get(after_scheme + authority.len()..).unwrap_or("");
        if rest.split('#').next().unwrap_or("").is_empty() {
            return Cow::Borrowed("*");
        }
    }
    path_and_query(target, authority)
}

/// True for methods a retry may repeat (RFC 9110 §9.2.2).
pub(super) fn is_idempotent(method: Method) -> bool {
    matches!(
        method,
        Method::Get | Method::Head | Method::Options | Method::Trace | Method::Put | Method::Delete
    )
}

#[cfg(test)]
mod tests {
    use coldwire_http::{Limits, Parsed, parse_request};

    use super::super::error::Side;
    use super::*;

    /// Routes `raw` (a complete request head) with `config`.
    fn routed(config: &ProxyConfig, denied: bool, raw: &str) -> Result<String, ExchangeError> {
        let Ok(Parsed::Complete { head, .. }) = parse_request(raw.as_bytes(), &Limits::default())
        else {
            panic!("not a complete head: {raw}");
        };
        Ok(match route(config, denied, &head)? {
            Route::Refused => "refused".to_owned(),
            Route::PortRefused(port) => format!("port {port} refused"),
            Route::NotAProxyRequest => "not a proxy request".to_owned(),
            Route::Tunnel { host, port } => format!("tunnel {host}:{port}"),
            Route::Origin(to) => {
                format!(
                    "{}:{} {} {}",
                    to.host, to.port, to.authority, to.path_and_query
                )
            }
        })
    }

    #[test]
    fn a_forward_proxy_takes_absolute_form_and_connect() {
        let forward = ProxyConfig::new(Mode::Forward);
        assert_eq!(
            routed(
                &forward,
                false,
                "GET http://a.test:8080/x?y HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"
            ),
            Ok("a.test:8080 a.test:8080 /x?y".to_owned())
        );
        assert_eq!(
            routed(
                &forward,
                false,
                "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"
            ),
            Ok("tunnel a.test:443".to_owned())
        );
        assert_eq!(
            routed(
                &forward,
                false,
                "CONNECT a.test:25 HTTP/1.1\r\nHost: a.test:25\r\n\r\n"
            ),
            Ok("port 25 refused".to_owned())
        );
        let origin_form = routed(&forward, false, "GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n");
        assert_eq!(origin_form, Ok("not a proxy request".to_owned()));
        let https = routed(
            &forward,
            false,
            "GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
        );
        assert_eq!(https, Err(ExchangeError::client(Status::BAD_REQUEST)));
    }

    #[test]
    fn a_reverse_proxy_sends_everything_to_its_origin_but_connect() {
        let reverse = ProxyConfig::new(Mode::Reverse {
            host: "10.0.0.1".to_owned(),
            port: 8080,
        });
        assert_eq!(
            routed(
                &reverse,
                false,
                "GET /x HTTP/1.1\r\nHost: site.test\r\n\r\n"
            ),
            Ok("10.0.0.1:8080 site.test /x".to_owned())
        );
        assert_eq!(
            routed(&reverse, false, "GET /x HTTP/1.0\r\n\r\n"),
            Ok("10.0.0.1:8080 10.0.0.1:8080 /x".to_owned())
        );
        let connect = routed(
            &reverse,
            false,
            "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
        );
        let error = connect.expect_err("CONNECT in reverse mode");
        assert_eq!(
            (error.side, error.status),
            (Side::Policy, Status::METHOD_NOT_ALLOWED)
        );
        // Absolute-form to a reverse proxy: its authority is the Host; only http.
        assert_eq!(
            routed(
                &reverse,
                false,
                "GET http://site.test/y HTTP/1.1\r\nHost: other\r\n\r\n"
            ),
            Ok("10.0.0.1:8080 site.test /y".to_owned())
        );
        assert_eq!(
            routed(
                &reverse,
                false,
                "GET ftp://site.test/y HTTP/1.1\r\nHost: site.test\r\n\r\n"
            ),
            Err(ExchangeError::client(Status::BAD_REQUEST))
        );
    }

    #[test]
    fn rfc9112_section_3_targets_that_are_not_uris_are_not_forwarded() {
        let reverse = ProxyConfig::new(Mode::Reverse {
            host: "10.0.0.1".to_owned(),
            port: 8080,
        });
        for target in ["/a\\..\\b", "/a%zz", "/x|y", "/{x}"] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: site.test\r\n\r\n");
            assert_eq!(
                routed(&reverse, false, &raw),
                Err(ExchangeError::client(Status::BAD_REQUEST)),
                "{target}"
            );
        }
    }

    #[test]
    fn policy_refusals_come_before_anything_else() {
        let forward = ProxyConfig::new(Mode::Forward);
        let request = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n";
        assert_eq!(routed(&forward, true, request), Ok("refused".to_owned()));
        let looped = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 coldwire\r\n\r\n";
        assert_eq!(routed(&forward, false, looped), Ok("refused".to_owned()));
        let unframed = "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\
                        Connection: content-length\r\nContent-Length: 1\r\n\r\n";
        assert_eq!(
            routed(&forward, false, unframed),
            Err(ExchangeError::client(Status::BAD_REQUEST))
        );
    }

    #[test]
    fn rfc9112_section_3_2_1_absolute_form_to_origin_form() {
        assert_eq!(path_and_query("http://h:1/a/b?c#f", "h:1"), "/a/b?c");
        assert_eq!(path_and_query("http://h:1?q=1", "h:1"), "/?q=1");
        assert_eq!(path_and_query("http://h:1", "h:1"), "/");
        assert_eq!(path_and_query("http://h:1#frag", "h:1"), "/");
    }

    #[test]
    fn rfc9112_section_3_2_4_options_for_an_empty_path_goes_on_as_asterisk() {
        let forward = ProxyConfig::new(Mode::Forward);
        let route = |raw: &str| routed(&forward, false, raw);
        assert_eq!(
            route("OPTIONS http://a.test:8080 HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"),
            Ok("a.test:8080 a.test:8080 *".to_owned())
        );
        assert_eq!(
            route("OPTIONS http://a.test:8080?q HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"),
            Ok("a.test:8080 a.test:8080 /?q".to_owned())
        );
        assert_eq!(
            route("OPTIONS http://a.test:8080/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"),
            Ok("a.test:8080 a.test:8080 /".to_owned())
        );
        assert_eq!(
            route("GET http://a.test:8080 HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"),
            Ok("a.test:8080 a.test:8080 /".to_owned())
        );
    }

    #[test]
    fn authorities_split_with_defaults() {
        assert_eq!(
            split_authority("example.com", 80),
            Some(("example.com", 80))
        );
        assert_eq!(
            split_authority("example.com:8080", 80),
            Some(("example.com", 8080))
        );
        assert_eq!(split_authority("[::1]:99", 80), Some(("::1", 99)));
        assert_eq!(split_authority("[::1]", 80), Some(("::1", 80)));
        assert_eq!(split_authority(":80", 80), None);
        assert_eq!(split_authority("host:99999", 80), None);
    }
}
