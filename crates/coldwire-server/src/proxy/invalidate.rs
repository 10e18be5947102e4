//! Invalidation after unsafe methods (RFC 9111 §4.4): when `POST`, `PUT`, `DELETE`, `PATCH`
//! or an unknown method gets a non-error answer (2xx or 3xx), everything stored for its
//! target URI is removed, and so is what is stored for the URIs in `Location` and
//! `Content-Location` when they have the same origin (scheme, host and port) as the target.
//!
//! Invariants: an error answer (4xx, 5xx, or no answer at all) invalidates nothing; a
//! reference to another origin is never followed (§4.4 forbids it, so a response cannot
//! wipe other sites' entries); keys are built exactly as `cache_fill::cache_key` builds
//! them (`http://` + lower-cased authority + path and query).

use coldwire_cache::Store;
use coldwire_http::owned_fields::Fields;

/// Removes what is stored for `key` (the unsafe request's target) and for the same-origin
/// URIs its response's `Location` / `Content-Location` name.
pub(super) fn after_unsafe_method(store: &Store, key: &str, response: &Fields) {
    store.invalidate(key);
    for name in ["location", "content-location"] {
        if let Some(other) = response
            .get(name)
            .and_then(|value| same_origin_key(key, value))
        {
            store.invalidate(&other);
        }
    }
}

/// The cache key of URI reference `reference` resolved against the key `base`, if it has
/// the same origin; `None` for another scheme, host or port, or a value that is not text.
pub(super) fn same_origin_key(base: &str, reference: &[u8]) -> Option<String> {
    let reference = std::str::from_utf8(coldwire_http::fields::trim_ows(reference)).ok()?;
    let reference = reference.split('#').next().unwrap_or_default();
    let rest = base.strip_prefix("http://")?;
    let (authority, base_path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if let Some(after) = strip_scheme(reference, "http://") {
        let (other, path) = split_authority(after);
        if !same_authority(authority, other) {
            return None;
        }
        path
    } else if let Some(after) = reference.strip_prefix("//") {
        let (other, path) = split_authority(after);
        if !same_authority(authority, other) {
            return None;
        }
        path
    } else if has_scheme(reference) {
        // https:, or any other scheme: another origin.
        return None;
    } else if reference.starts_with('/') {
        reference.to_owned()
    } else if reference.is_empty() {
        base_path.to_owned()
    } else if reference.starts_with('?') {
        let path = base_path.split('?').next().unwrap_or("/");
        format!("{path}{reference}")
    } else {
        let path = base_path.split('?').next().unwrap_or("/");
        let directory = &path[..=path.rfind('/').unwrap_or(0)];
        format!("{directory}{reference}")
    };
    let path = if path.is_empty() || path.starts_with('?') {
        format!("/{path}")
    } else {
        path
    };
    Some(format!("http://{authority}{path}"))
}

fn strip_scheme<'a>(reference: &'a str, scheme: &str) -> Option<&'a str> {
    let head = reference.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &reference[scheme.len()..])
}

/// RFC 3986 §3.1: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"` before any `/`, `?`.
fn has_scheme(reference: &str) -> bool {
    let Some(colon) = reference.find(':') else {
        return false;
    };
    let scheme = &reference[..colon];
    scheme.starts_with(|first: char| first.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|char| char.is_ascii_alphanumeric() || matches!(char, '+' | '-' | '.'))
}

/// `authority` and what follows it (path and query, possibly empty).
fn split_authority(after_slashes: &str) -> (&str, String) {
    match after_slashes.find(['/', '?']) {
        Some(at) => (&after_slashes[..at], after_slashes[at..].to_owned()),
        None => (after_slashes, String::new()),
    }
}

/// Same host (without case) and port (80 when none is given).
fn same_authority(base: &str, other: &str) -> bool {
    let other = other.rsplit_once('@').map_or(other, |(_, host)| host);
    let normal = |authority: &str| {
        let authority = authority.to_ascii_lowercase();
        match authority.strip_suffix(":80") {
            Some(host) => host.to_owned(),
            None => authority.trim_end_matches(':').to_owned(),
        }
    };
    normal(base) == normal(other)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://example.test:8080/a/b?q=1";

    fn key(reference: &str) -> Option<String> {
        same_origin_key(BASE, reference.as_bytes())
    }

    #[test]
    fn rfc9111_4_4_same_origin_references_resolve_to_keys() {
        assert_eq!(
            key("http://EXAMPLE.test:8080/x?y"),
            Some("http://example.test:8080/x?y".into())
        );
        assert_eq!(
            key("//example.test:8080/x"),
            Some("http://example.test:8080/x".into())
        );
        assert_eq!(key("/x#frag"), Some("http://example.test:8080/x".into()));
        assert_eq!(key("c"), Some("http://example.test:8080/a/c".into()));
        assert_eq!(key("?r=2"), Some("http://example.test:8080/a/b?r=2".into()));
        assert_eq!(
            key("http://example.test:8080"),
            Some("http://example.test:8080/".into())
        );
        assert_eq!(
            same_origin_key("http://example.test/a", b"http://example.test:80/z"),
            Some("http://example.test/z".into())
        );
    }

    #[test]
    fn rfc9111_4_4_other_origins_are_never_invalidated() {
        for reference in [
            "http://other.test:8080/x",
            "http://example.test:8081/x",
            "http://example.test/x",
            "https://example.test:8080/x",
            "//other.test/x",
            "mailto:someone@example.test",
        ] {
            assert_eq!(key(reference), None, "{reference}");
        }
        assert_eq!(same_origin_key(BASE, b"\xff"), None);
    }
}
