//! Caching rules found wrong by the 2026-11-28 audit modelled on the cache-tests.fyi suite
//! (`docs/conformance.md`): `Cache-Control` grammar (quoted strings, no whitespace around
//! `=`, the first of repeated directives) and heuristic freshness of `public` responses.
//! Each test failed before its fix; the origin's answers are in `cache_tests_script`.

use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest as Request};
use coldwire_testkit::{Proxy, via_proxy};

use super::cache_status;

/// Asks for `path` twice through `proxy`: whether the second answer came from the cache
/// (the origin saw one request), with the second head for messages.
fn second_is_hit(proxy: &Proxy, origin: &ScriptedOrigin, path: &str) -> (bool, String) {
    via_proxy(proxy, &[], &origin.url(path));
    let (_, head, _) = via_proxy(proxy, &[], &origin.url(path));
    let hit = origin.requests("GET", path) == 1;
    assert_eq!(hit, cache_status(&head).contains("; hit"), "{path}: {head}");
    (hit, head)
}

/// The origin: `Cache-Control` lines chosen by the query (`/cc?NAME`), and a
/// `public` 302 / 599 with `Last-Modified` a day old (`/public?CODE`, `/plain?CODE`).
pub fn cache_tests_script(request: &Request) -> Reply {
    let (route, query) = request.path.split_once('?').unwrap_or((&request.path, ""));
    let lines: &[&str] = match query {
        "space-before" => &["max-age =3600"],
        "space-after" => &["max-age= 3600"],
        "quoted-max-age" => &["max-age=0, ext=\"a, max-age=3600, b\""],
        "quoted-no-store" => &["ext=\"a, no-store, b\", max-age=3600"],
        "first-fresh" => &["max-age=3600, max-age=0"],
        "lines-first-stale" => &["max-age=0", "max-age=3600"],
        "lines-first-fresh" => &["max-age=3600", "max-age=0"],
        _ => &[],
    };
    let mut fields: Vec<(&str, &str)> = lines.iter().map(|line| ("Cache-Control", *line)).collect();
    let code = if route == "/cc" {
        "200 OK"
    } else {
        if route == "/public" {
            fields.push(("Cache-Control", "public"));
        }
        fields.push(("Last-Modified", "Fri, 27 Nov 2026 00:00:00 GMT"));
        if query == "302" {
            fields.push(("Location", "/elsewhere"));
            "302 Found"
        } else {
            "599 Unknown"
        }
    };
    Reply::new(code, &fields, b"cache-tests")
}

/// RFC 9111 §5.2 (`token [ "=" ( token / quoted-string ) ]`) and §4.2.1: no whitespace
/// around `=` (`max-age =3600` is another directive, `max-age= 3600` a malformed value:
/// neither gives a lifetime); commas and directives inside a quoted string are not
/// directives; a directive repeated, in one line or two, counts by its first occurrence.
pub fn rfc9111_5_2_cache_control_grammar(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let proxy = Proxy::start(backend, &[]);
    for (query, stored_and_fresh) in [
        ("space-before", false),
        ("space-after", false),
        ("quoted-max-age", false),
        ("quoted-no-store", true),
        ("first-fresh", true),
        ("lines-first-stale", false),
        ("lines-first-fresh", true),
    ] {
        let (hit, head) = second_is_hit(&proxy, &origin, &format!("/cc?{query}"));
        assert_eq!(hit, stored_and_fresh, "{query}: {head}");
    }
}

/// RFC 9111 §5.2.2.9: a `public` response without explicit freshness is heuristically
/// cacheable whatever its status (here 302 and 599 with a day-old `Last-Modified`); without
/// `public` those codes are not stored.
pub fn rfc9111_5_2_2_9_public_responses_are_heuristically_cacheable(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let proxy = Proxy::start(backend, &[]);
    for code in ["302", "599"] {
        let (hit, head) = second_is_hit(&proxy, &origin, &format!("/public?{code}"));
        assert!(hit, "public {code}: {head}");
        let (hit, head) = second_is_hit(&proxy, &origin, &format!("/plain?{code}"));
        assert!(!hit, "{code} without public: {head}");
    }
}
