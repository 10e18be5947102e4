//! Caching rules found wrong by the 2026-11-28 audit modelled on the cache-tests.fyi suite
//! (`docs/conformance.md`): `Cache-Control` grammar (quoted strings, no whitespace around
//! `=`, the first of repeated directives), heuristic freshness of `public` responses, and
//! `no-cache` / `private` qualified with field names, `Vary` values compared without the
//! whitespace next to commas, `If-Range` dates on hits, the types of a targeted field's
//! arguments.
//! Each test failed before its fix; the origin's answers are in `cache_tests_script`.

use coldwire_testkit::scripted::{
    Reply, ScriptedOrigin, ScriptedRequest as Request, date_from_now,
};
use coldwire_testkit::{Proxy, curl_output, header, via_proxy};

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
    if route == "/vary" {
        let fields = [("Cache-Control", "max-age=60"), ("Vary", "Foo")];
        return Reply::new("200 OK", &fields, b"varied");
    }
    if route == "/ranged" {
        // `?same-second`: Last-Modified is the Date (a weak validator); else a day older.
        let date = date_from_now(0);
        let modified = if query == "same-second" {
            date.clone()
        } else {
            date_from_now(-86_400)
        };
        let fields = [
            ("Cache-Control", "max-age=60"),
            ("Date", &date),
            ("Last-Modified", &modified),
        ];
        return Reply::new("200 OK", &fields, b"0123456789");
    }
    if route == "/cdn" {
        let (control, targeted) = match query {
            "string" => ("max-age=3600", "max-age=\"3600\""),
            "decimal" => ("max-age=3600", "max-age=3600.0"),
            "false" => ("no-store", "max-age=3600, no-store=?0"),
            _ => ("no-store", "max-age=3600, no-cache=\"x-secret, x-other\""),
        };
        let fields = [
            ("Cache-Control", control),
            ("CDN-Cache-Control", targeted),
            ("X-Secret", "s"),
            ("X-Kept", "k"),
        ];
        return Reply::new("200 OK", &fields, b"targeted");
    }
    if route == "/q" {
        return qualified_reply(query, request.header("if-none-match").is_some());
    }
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

/// `/q?NAME`: a response whose `Cache-Control` qualifies `no-cache` or `private` with
/// field names; `/q?304` is stale at once and its revalidation's 304 brings the qualifier.
fn qualified_reply(query: &str, conditional: bool) -> Reply {
    let control = match query {
        "no-cache" => "no-cache=\"X-Secret, X-Other\", max-age=60",
        "private" => "private=\"Set-Cookie\", max-age=60",
        "essential" => "no-cache=\"ETag\", max-age=60",
        _ if conditional => "no-cache=\"X-Secret\", max-age=60",
        _ => "max-age=0",
    };
    let mut fields = vec![
        ("Cache-Control", control),
        ("ETag", "\"q\""),
        ("X-Secret", "s"),
        ("X-Other", "o"),
        ("X-Kept", "k"),
    ];
    // A response with a cookie is stored only when the cookie is left out of it.
    if query == "private" {
        fields.push(("Set-Cookie", "id=1"));
    }
    if conditional {
        return Reply::head("304 Not Modified", &fields);
    }
    Reply::new("200 OK", &fields, b"qualified")
}

/// RFC 9111 §5.2 (`token [ "=" ( token / quoted-string ) ]`) and §4.2.1: no whitespace
/// around `=` (`max-age =3600` is another directive, `max-age= 3600` a malformed value:
/// neither gives a lifetime); commas and directives inside a quoted string are not
/// directives; a directive repeated, in one line or two, counts by its first occurrence.
/// A request's `no-cache="x"` is a plain `no-cache`.
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
    // A request's `no-cache` with an argument is still `no-cache` (§5.2.1.4 defines none).
    let no_cache = ["-H", "Cache-Control: no-cache=\"x\""];
    let (_, head, _) = via_proxy(&proxy, &no_cache, &origin.url("/cc?first-fresh"));
    assert!(cache_status(&head).contains("fwd=request"), "{head}");
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

/// RFC 9111 §5.2.2.4 and §5.2.2.7: `no-cache="X-Secret, X-Other"` and
/// `private="Set-Cookie"` restrict only the fields named: the response is stored and
/// served fresh without them (the first client, answered by the origin, gets them all).
/// Naming a field the cache reads (`no-cache="ETag"`) counts as plain `no-cache`. A 304
/// whose `Cache-Control` qualifies a field drops it from the refreshed entry.
pub fn rfc9111_5_2_2_4_qualified_no_cache_and_private_drop_only_those_fields(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let proxy = Proxy::start(backend, &[]);
    for (query, dropped) in [
        ("no-cache", &["x-secret", "x-other"][..]),
        ("private", &["set-cookie"][..]),
    ] {
        let path = format!("/q?{query}");
        let (_, first, _) = via_proxy(&proxy, &[], &origin.url(&path));
        assert!(
            dropped.iter().all(|name| header(&first, name).is_some()),
            "{first}"
        );
        let (_, head, body) = via_proxy(&proxy, &[], &origin.url(&path));
        assert_eq!(origin.requests("GET", &path), 1, "{query}: {head}");
        assert_eq!(body, b"qualified");
        assert!(cache_status(&head).contains("; hit"), "{head}");
        for name in dropped {
            assert_eq!(header(&head, name), None, "{query}: {head}");
        }
        assert_eq!(header(&head, "x-kept"), Some("k"), "{head}");
    }
    let (hit, head) = second_is_hit(&proxy, &origin, "/q?essential");
    assert!(!hit, "{head}");
    // Stale at once; the revalidation's 304 carries `no-cache="X-Secret"`.
    via_proxy(&proxy, &[], &origin.url("/q?304"));
    let (status, head, _) = via_proxy(&proxy, &[], &origin.url("/q?304"));
    assert_eq!((status, header(&head, "x-secret")), (200, None), "{head}");
    let (_, head, _) = via_proxy(&proxy, &[], &origin.url("/q?304"));
    assert!(cache_status(&head).contains("; hit"), "{head}");
    assert_eq!(header(&head, "x-secret"), None, "{head}");
    assert_eq!(origin.requests("GET", "/q?304"), 2);
}

/// RFC 9111 §4.1: selecting values match after adding or removing whitespace where the
/// syntax allows it (next to a list's commas) and after combining field lines: `1,2`,
/// `1 , 2` and two lines `1` and `2` select one stored response; `2,1` does not.
pub fn rfc9111_4_1_vary_ignores_whitespace_next_to_commas(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/vary");
    via_proxy(&proxy, &["-H", "Foo: 1,2"], &url);
    for same in [&["-H", "Foo: 1 , 2"][..], &["-H", "Foo: 1", "-H", "Foo: 2"]] {
        let (_, head, _) = via_proxy(&proxy, same, &url);
        assert!(cache_status(&head).contains("; hit"), "{same:?}: {head}");
    }
    let (_, head, _) = via_proxy(&proxy, &["-H", "Foo: 2,1"], &url);
    assert!(cache_status(&head).contains("fwd=vary-miss"), "{head}");
    assert_eq!(origin.requests("GET", "/vary"), 2);
}

/// RFC 9110 §13.1.5 and §8.8.2.2: on a hit, an `If-Range` date selects the range only if
/// it equals a *strong* stored `Last-Modified` — one at least a second before the entry's
/// `Date`. A `Last-Modified` in the same second as `Date` is weak: the whole 200.
pub fn rfc9110_13_1_5_if_range_dates_need_a_strong_last_modified(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let proxy = Proxy::start(backend, &[]);
    for (query, expected) in [("strong", 206), ("same-second", 200)] {
        let path = format!("/ranged?{query}");
        let (_, first, _) = via_proxy(&proxy, &[], &origin.url(&path));
        let modified = header(&first, "last-modified").expect("a Last-Modified");
        let if_range = format!("If-Range: {modified}");
        let (status, head, body) =
            via_proxy(&proxy, &["-r", "0-1", "-H", &if_range], &origin.url(&path));
        assert_eq!(status, expected, "{query}: {head}");
        let whole: &[u8] = if expected == 206 {
            b"01"
        } else {
            b"0123456789"
        };
        assert_eq!(body, whole, "{query}");
        assert!(cache_status(&head).contains("; hit"), "{head}");
    }
}

/// RFC 9213 §2.1 (reverse proxy, `CDN-Cache-Control`): a targeted field is a Structured
/// Field Dictionary whose arguments have the types their directives imply; a value of
/// another type is not consumed — `max-age="3600"` (a String) and `max-age=3600.0` (a
/// Decimal) give no lifetime although the field rules (so `Cache-Control: max-age=3600`
/// does not count either); `no-store=?0` is false; a String with a comma is one member
/// (`no-cache="x-secret, x-other"` rules and drops both fields, overriding
/// `Cache-Control: no-store`).
pub fn rfc9213_2_1_targeted_arguments_of_the_wrong_type_are_not_consumed(backend: &str) {
    let origin = ScriptedOrigin::start(cache_tests_script);
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    let get = |path: &str| {
        let output = curl_output(&["-i", &format!("{}{path}", proxy.url())]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    for (query, hit) in [
        ("string", false),
        ("decimal", false),
        ("false", true),
        ("list", true),
    ] {
        let path = format!("/cdn?{query}");
        get(&path);
        let text = get(&path);
        assert_eq!(
            origin.requests("GET", &path),
            if hit { 1 } else { 2 },
            "{query}: {text}"
        );
        assert_eq!(
            cache_status(&text).contains("; hit"),
            hit,
            "{query}: {text}"
        );
        if query == "list" {
            assert_eq!(header(&text, "x-secret"), None, "{text}");
            assert_eq!(header(&text, "x-kept"), Some("k"), "{text}");
        }
    }
}
