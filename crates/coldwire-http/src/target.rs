//! Request-target forms ([`Target`], RFC 9112 §3.2) and splitting path from query.
//!
//! Invariants: everything borrows from the raw target and never allocates. A fragment
//! (`#...`) is never part of a request-target; if a client sends one anyway it is dropped
//! here, before the path or query is looked at. Nothing here percent-decodes; see
//! [`crate::path`] for that.

use crate::error::HttpError;
use crate::method::Method;

/// A classified request-target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `origin-form`: `/path?query`, what browsers send to origin servers.
    Origin {
        /// The absolute path, starting with `/`, still percent-encoded.
        path: &'a str,
        /// The query without its `?`, if a `?` was present.
        query: Option<&'a str>,
    },
    /// `absolute-form`: `scheme://authority/path?query`, what clients send to proxies.
    Absolute {
        /// The scheme, e.g. `http` (not lower-cased).
        scheme: &'a str,
        /// The authority, `host[:port]` (never empty, never with userinfo).
        authority: &'a str,
        /// The path, starting with `/`; `"/"` when the URI has an empty path.
        path: &'a str,
        /// The query without its `?`, if present.
        query: Option<&'a str>,
    },
    /// `authority-form`: `host:port`, only for `CONNECT`.
    Authority(&'a str),
    /// `asterisk-form`: `*`, only for server-wide `OPTIONS`.
    Asterisk,
}

/// Splits a target (or a path-and-query) at the first `?`: `("/a/b", Some("x=1"))`.
/// Any `#fragment` is dropped first.
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    let without_fragment = match target.split_once('#') {
        Some((before, _)) => before,
        None => target,
    };
    match without_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (without_fragment, None),
    }
}

/// Classifies `target` for `method`.
///
/// `CONNECT` requires authority-form (`host:port`, port mandatory); `*` is accepted only for
/// `OPTIONS`; a target starting with `/` is origin-form; anything else must be absolute-form
/// with a syntactically valid scheme, `//`, and a non-empty authority without userinfo.
/// Everything else is [`HttpError::BadRequest`].
pub fn parse_target(method: Method, target: &str) -> Result<Target<'_>, HttpError> {
    if method == Method::Connect {
        return parse_authority_form(target).map(Target::Authority);
    }
    if target == "*" {
        return if method == Method::Options {
            Ok(Target::Asterisk)
        } else {
            Err(HttpError::BadRequest(
                "asterisk-form target outside OPTIONS",
            ))
        };
    }
    if target.starts_with('/') {
        let (path, query) = split_target(target);
        return Ok(Target::Origin { path, query });
    }
    parse_absolute_form(target)
}

fn parse_authority_form(target: &str) -> Result<&str, HttpError> {
    const INVALID: HttpError = HttpError::BadRequest("invalid authority-form target");
    if target
        .bytes()
        .any(|byte| matches!(byte, b'/' | b'?' | b'#' | b'@'))
    {
        return Err(INVALID);
    }
    let (host, port) = target.rsplit_once(':').ok_or(INVALID)?;
    let port_is_valid =
        !port.is_empty() && port.len() <= 5 && port.bytes().all(|byte| byte.is_ascii_digit());
    if host.is_empty() || !port_is_valid || !crate::request::is_valid_host(target.as_bytes()) {
        return Err(INVALID);
    }
    Ok(target)
}

fn parse_absolute_form(target: &str) -> Result<Target<'_>, HttpError> {
    const INVALID: HttpError = HttpError::BadRequest("invalid request target");
    let (scheme, rest) = target.split_once(':').ok_or(INVALID)?;
    let mut scheme_bytes = scheme.bytes();
    let scheme_is_valid = scheme_bytes
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && scheme_bytes
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.'));
    if !scheme_is_valid {
        return Err(INVALID);
    }
    let hier_part = rest.strip_prefix("//").ok_or(INVALID)?;
    let authority_end = hier_part.find(['/', '?', '#']).unwrap_or(hier_part.len());
    let (authority, path_and_query) = hier_part.split_at(authority_end);
    if authority.is_empty() || authority.contains('@') {
        return Err(INVALID);
    }
    // The authority becomes the upstream `Host` (RFC 9112 §3.2.2): it must pass the same
    // check as a received `Host` field.
    if !crate::request::is_valid_host(authority.as_bytes()) {
        return Err(HttpError::BadRequest(
            "invalid authority in the request target",
        ));
    }
    let (path, query) = split_target(path_and_query);
    let path = if path.is_empty() { "/" } else { path };
    Ok(Target::Absolute {
        scheme,
        authority,
        path,
        query,
    })
}

/// RFC 9112 §3.2 / RFC 3986: a request-target holds only URI characters — unreserved,
/// sub-delims, `:` `@` `/` `?`, brackets (IP-literals), `#` (a fragment, dropped later) —
/// and `%` only as `%HH`. httparse lets `"`, `\`, `<`, `{`, `|`, `^` and backquotes
/// through. A proxy checks this before forwarding: passed on as they are, a server behind
/// it may read them differently (`\` as `/`, say), so they are a 400 there (RFC 9112 §3:
/// no autocorrection). A server answering for itself may be lenient (`coldwire serve`
/// answers 404 for such paths).
pub fn is_valid_target(target: &[u8]) -> bool {
    is_uri_text(target, |byte| {
        matches!(byte, b':' | b'@' | b'/' | b'?' | b'#' | b'[' | b']')
    })
}

/// RFC 3986 text: unreserved characters, sub-delims, `%HH`, and the bytes `extra` allows
/// (a target's `:` `@` `/` `?`; none for a reg-name). `%` not followed by two hex digits
/// is refused.
pub(crate) fn is_uri_text(text: &[u8], extra: impl Fn(u8) -> bool) -> bool {
    let mut index = 0;
    while let Some(&byte) = text.get(index) {
        if byte == b'%' {
            let hex = text.get(index + 1..index + 3);
            if !hex.is_some_and(|pair| pair.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            index += 3;
            continue;
        }
        let allowed = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            )
            || extra(byte);
        if !allowed {
            return false;
        }
        index += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9112_section_3_2_request_targets_hold_uri_characters_only() {
        for bad in [
            "/a\"b",
            "/a{b}",
            "/a\\b",
            "/a<b>",
            "/a|b",
            "/a^b",
            "/a`b",
            "/a%",
            "/a%zz",
            "/a%4",
            "/caf\u{e9}",
        ] {
            assert!(!is_valid_target(bad.as_bytes()), "{bad}");
        }
        for good in [
            "/",
            "*",
            "/a/b.c?x=1&y=%2F;z=(q)~!$'*+,@:",
            "http://[::1]:8080/p?q#frag",
            "/%00",
            "example.com:443",
        ] {
            assert!(is_valid_target(good.as_bytes()), "{good}");
        }
    }

    #[test]
    fn rfc9112_section_3_2_2_an_authority_must_be_a_valid_host() {
        for target in [
            "p://}/x",
            "http://a b/x",
            "http://host\\evil/x",
            "http://a\"b/",
            "http://<x>/",
        ] {
            assert!(
                parse_target(Method::Get, target).is_err(),
                "{target:?} must be refused"
            );
        }
        assert!(parse_target(Method::Connect, "a}b:443").is_err());
        assert!(parse_target(Method::Get, "http://[::1]:8080/x").is_ok());
        assert!(parse_target(Method::Get, "http://xn--bcher-kva.example:80/").is_ok());
    }

    #[test]
    fn split_target_cases() {
        assert_eq!(split_target("/a/b?x=1&y"), ("/a/b", Some("x=1&y")));
        assert_eq!(split_target("/a/b"), ("/a/b", None));
        assert_eq!(split_target("/a?"), ("/a", Some("")));
        assert_eq!(split_target("/a#frag?x"), ("/a", None));
        assert_eq!(split_target("/a?q=1#frag"), ("/a", Some("q=1")));
    }

    #[test]
    fn origin_form() {
        assert_eq!(
            parse_target(Method::Get, "/index.html?v=2"),
            Ok(Target::Origin {
                path: "/index.html",
                query: Some("v=2")
            })
        );
    }

    #[test]
    fn absolute_form() {
        assert_eq!(
            parse_target(Method::Get, "http://example.com:8080/a/b?c"),
            Ok(Target::Absolute {
                scheme: "http",
                authority: "example.com:8080",
                path: "/a/b",
                query: Some("c")
            })
        );
        assert_eq!(
            parse_target(Method::Get, "http://example.com"),
            Ok(Target::Absolute {
                scheme: "http",
                authority: "example.com",
                path: "/",
                query: None
            })
        );
        assert_eq!(
            parse_target(Method::Get, "http://example.com?q"),
            Ok(Target::Absolute {
                scheme: "http",
                authority: "example.com",
                path: "/",
                query: Some("q")
            })
        );
        assert!(parse_target(Method::Get, "http://user@example.com/").is_err());
        assert!(parse_target(Method::Get, "http:///path").is_err());
        assert!(parse_target(Method::Get, "http:example.com").is_err());
        assert!(parse_target(Method::Get, "1http://example.com/").is_err());
        assert!(parse_target(Method::Get, "index.html").is_err());
    }

    #[test]
    fn authority_form_only_for_connect() {
        assert_eq!(
            parse_target(Method::Connect, "example.com:443"),
            Ok(Target::Authority("example.com:443"))
        );
        assert_eq!(
            parse_target(Method::Connect, "[::1]:443"),
            Ok(Target::Authority("[::1]:443"))
        );
        assert!(parse_target(Method::Connect, "example.com").is_err());
        assert!(parse_target(Method::Connect, "example.com:").is_err());
        assert!(parse_target(Method::Connect, ":443").is_err());
        assert!(parse_target(Method::Connect, "/path").is_err());
        assert!(parse_target(Method::Connect, "user@example.com:443").is_err());
    }

    #[test]
    fn asterisk_form_only_for_options() {
        assert_eq!(parse_target(Method::Options, "*"), Ok(Target::Asterisk));
        assert!(parse_target(Method::Get, "*").is_err());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(target in "\\PC{0,40}") {
            for method in [Method::Get, Method::Connect, Method::Options] {
                let _ = parse_target(method, &target);
            }
            let (path, query) = split_target(&target);
            proptest::prop_assert!(path.len() + query.map_or(0, str::len) <= target.len());
        }
    }
}
