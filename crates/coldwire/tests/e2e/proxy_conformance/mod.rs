//! End-to-end caching-conformance tests of `coldwire proxy` (issue 11), named after the RFC
//! sections they check: the real binary between curl (or raw sockets) and a scripted origin
//! (`coldwire_testkit::ScriptedOrigin`, answers in `scripts.rs`) on every I/O backend — interim responses, `Age`, date forms,
//! status codes stored with explicit freshness, `Vary` normalisation, invalidation after
//! unsafe methods, `HEAD` and `304` freshening, targeted cache-control fields, conditional
//! requests answered from the cache, serving stale content when the origin is gone, and
//! the message rules of `messages.rs` (`Max-Forwards`, 204 framing, status range, `OPTIONS *`,
//! unknown expectations), and the `Cache-Control` grammar, `public` heuristics and
//! qualified `no-cache` / `private`, `Vary` whitespace, `If-Range` dates and targeted
//! argument types of `cache_tests.rs`.

mod cache_tests;
mod messages;
mod scripts;

use cache_tests::*;
use coldwire_testkit::scripted::{
    Reply, ScriptedOrigin, ScriptedRequest as Request, date_from_now, raw_exchange,
};
use coldwire_testkit::{Proxy, curl_output, header, via_proxy};
use messages::*;
use scripts::{
    age_script, conditional_script, dates_script, etag_change_script, head_script, interim_script,
    invalidate_script, ranged_script, status_script, targeted_script, vary_script,
};

coldwire_testkit::backend_tests! {
    rfc9110_15_2_interim_responses_reach_http11_clients_and_are_never_cached,
    rfc9110_10_1_1_a_client_gets_one_100_continue,
    rfc9111_5_1_age_uses_the_first_member_and_ignores_malformed_values,
    rfc9110_5_6_7_expires_in_every_date_form_and_invalid_expires,
    rfc9111_3_final_statuses_are_stored_with_explicit_freshness_only,
    rfc9111_4_1_vary_compares_normalised_values,
    rfc9111_4_4_unsafe_methods_invalidate_on_success_only,
    rfc9111_4_3_5_head_responses_freshen_stored_responses,
    rfc9111_4_3_4_a_304_for_another_representation_refetches,
    rfc9213_targeted_fields_rule_a_reverse_proxy_and_are_not_forwarded,
    rfc9110_13_2_2_conditional_requests_answered_from_the_cache,
    serve_stale_on_error_is_opt_in_and_only_for_an_unreachable_origin,
    rfc9111_3_4_partial_responses_are_stored_combined_and_served,
    rfc9110_7_6_2_max_forwards_on_trace_and_options,
    rfc9110_8_6_a_204_has_no_content_length,
    rfc9110_15_status_codes_outside_100_to_599_are_502,
    rfc9112_3_2_4_options_with_an_empty_path_is_forwarded_as_asterisk,
    rfc9110_10_1_1_unknown_expectations_get_417,
    rfc9112_7_1_a_malformed_chunked_response_is_cut_at_once,
    rfc9112_3_targets_that_are_not_uris_are_not_forwarded,
    rfc9112_6_1_transfer_codings_other_than_chunked_from_an_origin_are_502,
    rfc9111_5_2_cache_control_grammar,
    rfc9111_5_2_2_9_public_responses_are_heuristically_cacheable,
    rfc9111_5_2_2_4_qualified_no_cache_and_private_drop_only_those_fields,
    rfc9111_4_1_vary_ignores_whitespace_next_to_commas,
    rfc9110_13_1_5_if_range_dates_need_a_strong_last_modified,
    rfc9213_2_1_targeted_arguments_of_the_wrong_type_are_not_consumed,
}

fn cache_status(head: &str) -> &str {
    header(head, "cache-status").unwrap_or("")
}

/// RFC 9110 §15.2: 1xx responses are forwarded to an HTTP/1.1 client, hop-by-hop fields
/// removed, before the final response; never to an HTTP/1.0 client; never cached (the hit
/// has none). A `101` from the origin is a 502 (the proxy never forwards `Upgrade`).
fn rfc9110_15_2_interim_responses_reach_http11_clients_and_are_never_cached(backend: &str) {
    let origin = ScriptedOrigin::start(interim_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/early");
    let request = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let text = raw_exchange(proxy.address, request.as_bytes());
    let early = text.find("HTTP/1.1 103 Early Hints\r\n").expect(&text);
    let processing = text.find("HTTP/1.1 102 Processing\r\n").expect(&text);
    let final_head = text.find("HTTP/1.1 200").expect(&text);
    assert!(early < processing && processing < final_head, "{text}");
    assert!(
        text[early..processing].contains("Link: </s.css>; rel=preload"),
        "{text}"
    );
    assert!(!text[early..final_head].contains("X-Hop"), "{text}");
    assert!(text.ends_with("final body"), "{text}");
    // The final response was stored; the hit carries no interim response.
    let text = raw_exchange(proxy.address, request.as_bytes());
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("; hit"), "{text}");
    assert_eq!(origin.requests("GET", "/early"), 1);
    // An HTTP/1.0 client never sees a 1xx.
    let url = origin.url("/early?v=10");
    let request = format!("GET {url} HTTP/1.0\r\nHost: x\r\n\r\n");
    let text = raw_exchange(proxy.address, request.as_bytes());
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        !text.contains("103") && !text.contains("102 Processing"),
        "{text}"
    );
    let (status, _, _) = via_proxy(&proxy, &[], &origin.url("/switch"));
    assert_eq!(status, 502);
}

/// RFC 9110 §10.1.1 / §15.2.1: the proxy answers `Expect: 100-continue` itself; the
/// origin's own `100` is not passed on as a second one.
fn rfc9110_10_1_1_a_client_gets_one_100_continue(backend: &str) {
    let origin = ScriptedOrigin::start(interim_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/continue");
    let request = format!(
        "POST {url} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\
         Connection: close\r\n\r\nhello"
    );
    let text = raw_exchange(proxy.address, request.as_bytes());
    assert_eq!(text.matches("100 Continue").count(), 1, "{text}");
    assert!(
        text.contains("HTTP/1.1 200") && text.ends_with("posted"),
        "{text}"
    );
}

/// RFC 9111 §5.1: `Age: 30, 40` counts as 30; a malformed `Age` is ignored, and the response
/// is still stored.
fn rfc9111_5_1_age_uses_the_first_member_and_ignores_malformed_values(backend: &str) {
    let origin = ScriptedOrigin::start(age_script);
    let proxy = Proxy::start(backend, &[]);
    for (path, low, high) in [("/age-list", 30, 35), ("/age-bad", 0, 5)] {
        via_proxy(&proxy, &[], &origin.url(path));
        let (status, head, _) = via_proxy(&proxy, &[], &origin.url(path));
        assert_eq!(status, 200);
        assert!(cache_status(&head).contains("hit"), "{path}: {head}");
        let age: u64 = header(&head, "age").unwrap().parse().unwrap();
        assert!((low..=high).contains(&age), "{path}: {head}");
        assert_eq!(origin.requests("GET", path), 1, "{path}");
    }
}

/// RFC 9110 §5.6.7: `Expires` in RFC 850 and asctime forms, and with a wrong weekday and
/// odd letter case, is a valid date (stored and hit); RFC 9111 §5.3: `Expires: 0` means
/// already expired (no heuristic lifetime either).
fn rfc9110_5_6_7_expires_in_every_date_form_and_invalid_expires(backend: &str) {
    let origin = ScriptedOrigin::start(dates_script);
    let proxy = Proxy::start(backend, &[]);
    for path in ["/rfc850", "/asctime", "/weekday"] {
        via_proxy(&proxy, &[], &origin.url(path));
        let (_, head, _) = via_proxy(&proxy, &[], &origin.url(path));
        assert!(cache_status(&head).contains("hit"), "{path}: {head}");
        assert_eq!(origin.requests("GET", path), 1, "{path}");
    }
    via_proxy(&proxy, &[], &origin.url("/invalid"));
    let (_, head, _) = via_proxy(&proxy, &[], &origin.url("/invalid"));
    assert!(cache_status(&head).contains("fwd=stale"), "{head}");
    assert_eq!(origin.requests("GET", "/invalid"), 2);
}

/// RFC 9111 §3 and §4.2.2: 299, 400, 500–504 and 599 are stored with `max-age`; without an
/// explicit lifetime only heuristically cacheable codes (here 404, 501) are.
fn rfc9111_3_final_statuses_are_stored_with_explicit_freshness_only(backend: &str) {
    let origin = ScriptedOrigin::start(status_script);
    let proxy = Proxy::start(backend, &[]);
    for code in [299, 400, 500, 502, 503, 504, 599, 404, 501] {
        let path = format!("/s?{code}explicit");
        for _ in 0..2 {
            let (status, _, body) = via_proxy(&proxy, &[], &origin.url(&path));
            assert_eq!((status, &body[..]), (code, &b"status body"[..]));
        }
        assert_eq!(origin.requests("GET", &path), 1, "{code} with max-age");
    }
    for (code, stored) in [
        (404, true),
        (501, true),
        (400, false),
        (500, false),
        (299, false),
    ] {
        let path = format!("/s?{code}");
        via_proxy(&proxy, &[], &origin.url(&path));
        let (_, head, _) = via_proxy(&proxy, &[], &origin.url(&path));
        let expected = if stored { 1 } else { 2 };
        assert_eq!(origin.requests("GET", &path), expected, "{code}: {head}");
    }
}

/// RFC 9111 §4.1: selecting values are compared normalised (case, whitespace, list order of
/// `Accept-*` fields); `Vary: *` never matches (and is not stored).
fn rfc9111_4_1_vary_compares_normalised_values(backend: &str) {
    let origin = ScriptedOrigin::start(vary_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/normal");
    via_proxy(
        &proxy,
        &[
            "-H",
            "Accept-Encoding: gzip, br",
            "-H",
            "Accept-Language: en-GB, fr;q=0.5",
        ],
        &url,
    );
    let (_, head, _) = via_proxy(
        &proxy,
        &[
            "-H",
            "Accept-Encoding: BR,gzip",
            "-H",
            "Accept-Language: fr; q=0.5, EN-gb",
        ],
        &url,
    );
    assert!(cache_status(&head).contains("hit"), "{head}");
    let (_, head, _) = via_proxy(
        &proxy,
        &[
            "-H",
            "Accept-Encoding: br",
            "-H",
            "Accept-Language: en-GB, fr;q=0.5",
        ],
        &url,
    );
    assert!(cache_status(&head).contains("fwd=vary-miss"), "{head}");
    for _ in 0..2 {
        via_proxy(&proxy, &[], &origin.url("/star"));
    }
    assert_eq!(origin.requests("GET", "/star"), 2);
}

/// RFC 9111 §4.4: POST/PUT/DELETE/PATCH and unknown methods invalidate the target URI (and
/// same-origin `Location` / `Content-Location` URIs) only when answered 2xx/3xx; another
/// origin's URI is never touched.
fn rfc9111_4_4_unsafe_methods_invalidate_on_success_only(backend: &str) {
    let origin = ScriptedOrigin::start(invalidate_script);
    let proxy = Proxy::start(backend, &[]);
    let hit = |path: &str| {
        let (_, head, _) = via_proxy(&proxy, &[], &origin.url(path));
        cache_status(&head).contains("hit")
    };
    for path in ["/target", "/moved", "/described"] {
        via_proxy(&proxy, &[], &origin.url(path));
        assert!(hit(path), "{path} stored");
    }
    for (method, answer) in [("POST", "500 Broken"), ("DELETE", "404 Not Found")] {
        via_proxy(
            &proxy,
            &["-X", method, "-H", &format!("X-Answer: {answer}")],
            &origin.url("/target"),
        );
        assert!(
            hit("/target"),
            "{method} answered {answer} invalidates nothing"
        );
    }
    let location = format!("X-Location: {}", origin.url("/moved"));
    let elsewhere = "X-Content-Location: http://other.test/described";
    via_proxy(
        &proxy,
        &["-X", "PATCH", "-H", &location, "-H", elsewhere],
        &origin.url("/target"),
    );
    assert!(!hit("/target"), "the target is invalidated");
    assert!(!hit("/moved"), "the same-origin Location too");
    assert!(hit("/described"), "another origin's URI is not");
    via_proxy(
        &proxy,
        &[
            "-X",
            "FROB",
            "-H",
            "X-Answer: 204 No Content",
            "-H",
            "X-Content-Location: /described",
        ],
        &origin.url("/target"),
    );
    assert!(
        !hit("/target") && !hit("/described"),
        "unknown methods invalidate too"
    );
}

/// RFC 9111 §4.3.5: a `200` answering `HEAD` (sent on with `no-cache`) with the stored
/// validators (and length) freshens the stored `GET` response with its fields; one with
/// another `ETag` makes it stale, so the next `GET` goes to the origin.
fn rfc9111_4_3_5_head_responses_freshen_stored_responses(backend: &str) {
    let origin = ScriptedOrigin::start(head_script);
    let proxy = Proxy::start(backend, &[]);
    for path in ["/same", "/changed"] {
        let url = origin.url(path);
        via_proxy(&proxy, &[], &url);
        let proxy_url = proxy.url();
        let output = curl_output(&[
            "-sI",
            "-H",
            "Cache-Control: no-cache",
            "-x",
            &proxy_url,
            &url,
        ]);
        assert_eq!(output.code, 0);
        assert_eq!(origin.requests("HEAD", path), 1);
    }
    let (_, head, body) = via_proxy(&proxy, &[], &origin.url("/same"));
    assert_eq!(body, b"head body");
    assert!(cache_status(&head).contains("hit"), "{head}");
    assert_eq!(header(&head, "x-head"), Some("seen"), "{head}");
    assert_eq!(origin.requests("GET", "/same"), 1);
    let (_, head, _) = via_proxy(&proxy, &[], &origin.url("/changed"));
    assert!(cache_status(&head).contains("fwd=stale"), "{head}");
    assert_eq!(origin.requests("GET", "/changed"), 2);
}

/// RFC 9111 §4.3.4: a `304` whose strong `ETag` is not the stored one's does not freshen
/// it; the proxy asks again without conditionals and serves (and stores) the new answer.
fn rfc9111_4_3_4_a_304_for_another_representation_refetches(backend: &str) {
    let origin = ScriptedOrigin::start(etag_change_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/versioned");
    let (_, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!(body, b"version 1");
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"version 3"[..]), "{head}");
    assert_eq!(header(&head, "etag"), Some("\"v3\""), "{head}");
    assert_eq!(origin.requests("GET", "/versioned"), 3, "200, 304, 200");
}

/// RFC 9213: a reverse proxy obeys `Coldwire-Cache-Control` (name set by
/// `--targeted-cache-control`), then `CDN-Cache-Control`, before `Cache-Control`, and does
/// not pass the targeted fields on; a forward proxy is not a CDN: it obeys `Cache-Control`
/// and passes them on.
fn rfc9213_targeted_fields_rule_a_reverse_proxy_and_are_not_forwarded(backend: &str) {
    let origin = ScriptedOrigin::start(targeted_script);
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    let get = |proxy: &Proxy, path: &str| {
        let output = curl_output(&["-i", &format!("{}{path}", proxy.url())]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    for _ in 0..2 {
        let text = get(&proxy, "/cdn");
        assert!(text.contains("Cache-Control: no-store"), "{text}");
        assert!(
            !text.to_ascii_lowercase().contains("cdn-cache-control"),
            "{text}"
        );
    }
    assert_eq!(origin.requests("GET", "/cdn"), 1, "CDN-Cache-Control ruled");
    for _ in 0..2 {
        let text = get(&proxy, "/ours");
        assert!(
            !text.to_ascii_lowercase().contains("coldwire-cache-control"),
            "{text}"
        );
    }
    assert_eq!(
        origin.requests("GET", "/ours"),
        2,
        "Coldwire-Cache-Control ruled"
    );
    let renamed = Proxy::start(
        backend,
        &[
            "--reverse",
            &reverse,
            "--targeted-cache-control",
            "Edge-Control",
        ],
    );
    for _ in 0..2 {
        assert!(!get(&renamed, "/renamed").contains("Edge-Control"));
    }
    assert_eq!(origin.requests("GET", "/renamed"), 1);
    let forward = Proxy::start(backend, &[]);
    for _ in 0..2 {
        let (_, head, _) = via_proxy(&forward, &[], &origin.url("/cdn"));
        assert_eq!(
            header(&head, "cdn-cache-control"),
            Some("max-age=60"),
            "{head}"
        );
    }
    assert_eq!(
        origin.requests("GET", "/cdn"),
        3,
        "the forward proxy obeyed no-store"
    );
}

/// RFC 9110 §13.2.2 / RFC 9111 §4.3.2 on hits: `If-None-Match` (weak comparison) before
/// `If-Modified-Since`; `If-Modified-Since` against `Last-Modified`, or the stored `Date`
/// when there is none (§4.3.2); `If-Match` goes to the origin.
fn rfc9110_13_2_2_conditional_requests_answered_from_the_cache(backend: &str) {
    let origin = ScriptedOrigin::start(conditional_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/with-lm");
    via_proxy(&proxy, &[], &url);
    let later = "If-Modified-Since: Tue, 03 Nov 2026 00:00:00 GMT";
    for (fields, expected) in [
        (&["-H", "If-None-Match: \"w\""][..], 304),
        (&["-H", "If-None-Match: \"x\"", "-H", later][..], 200),
        (&["-H", later][..], 304),
        (
            &["-H", "If-Modified-Since: Sat, 31 Oct 2026 00:00:00 GMT"][..],
            200,
        ),
    ] {
        let (status, head, _) = via_proxy(&proxy, fields, &url);
        assert_eq!(status, expected, "{fields:?}: {head}");
        assert!(cache_status(&head).contains("hit"), "{head}");
    }
    assert_eq!(origin.requests("GET", "/with-lm"), 1);
    let (status, _, _) = via_proxy(&proxy, &["-H", "If-Match: W/\"w\""], &url);
    assert_eq!(status, 200);
    assert_eq!(
        origin.requests("GET", "/with-lm"),
        2,
        "If-Match went to the origin"
    );
    // Stored with `Date` ten seconds ago and no `Last-Modified` (RFC 9111 §4.3.2: the
    // `Date` counts): an If-Modified-Since of now gets a 304, one of a minute ago a 200.
    let url = origin.url("/date-only");
    via_proxy(&proxy, &[], &url);
    for (offset, expected) in [(0, 304), (-60, 200)] {
        let since = format!("If-Modified-Since: {}", date_from_now(offset));
        let (status, head, _) = via_proxy(&proxy, &["-H", &since], &url);
        assert_eq!(status, expected, "{since}: {head}");
        assert!(cache_status(&head).contains("hit"), "{head}");
    }
}

/// `--serve-stale-on-error SECONDS` (off by default): a stale stored response answers when
/// the origin cannot be reached; not without the flag, and not for an origin's 5xx
/// (that takes `stale-if-error`).
fn serve_stale_on_error_is_opt_in_and_only_for_an_unreachable_origin(backend: &str) {
    fn flaky(request: &Request) -> Reply {
        if request.count == 1 {
            Reply::new("200 OK", &[("Cache-Control", "max-age=0")], b"stale but ok")
        } else {
            Reply::new("500 Broken", &[], b"origin broke")
        }
    }
    let origin = ScriptedOrigin::start(flaky);
    for (args, expected) in [(&[][..], 502), (&["--serve-stale-on-error", "60"][..], 200)] {
        let mut all = vec!["--upstream-timeout", "5"];
        all.extend_from_slice(args);
        let proxy = Proxy::start(backend, &all);
        // An origin that answers once, then is gone (connections refused).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let once = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut stream, _) = listener.accept().unwrap();
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nCache-Control: max-age=0\r\nConnection: close\r\n\
                  Content-Length: 9\r\n\r\nlast word",
            );
        });
        let url = format!("http://{address}/gone");
        let (_, _, body) = via_proxy(&proxy, &[], &url);
        assert_eq!(body, b"last word");
        once.join().unwrap();
        let (status, head, body) = via_proxy(&proxy, &[], &url);
        assert_eq!(status, expected, "{args:?}: {head}");
        if expected == 200 {
            assert_eq!(body, b"last word");
            assert!(
                cache_status(&head).contains("detail=stale-on-error"),
                "{head}"
            );
        }
        // An origin that answers 500 is not "unreachable": the 500 passes.
        let path = format!("/flaky{}", args.len());
        via_proxy(&proxy, &[], &origin.url(&path));
        let (status, _, body) = via_proxy(&proxy, &[], &origin.url(&path));
        assert_eq!((status, &body[..]), (500, &b"origin broke"[..]), "{args:?}");
    }
}

/// RFC 9111 §3.3 / §3.4: single-range `206`s with a strong `ETag` are stored; a later range
/// one stored piece covers is answered from the cache (`detail=partial`), one it does not
/// goes to the origin and its piece is combined with the others; once they cover the whole
/// representation it is stored as a complete `200` (hit without `Range`). Pieces with a weak
/// `ETag` are never stored.
fn rfc9111_3_4_partial_responses_are_stored_combined_and_served(backend: &str) {
    let origin = ScriptedOrigin::start(ranged_script);
    let proxy = Proxy::start(backend, &[]);
    let body: Vec<u8> = (0..100u8).map(|byte| b'a' + byte % 26).collect();
    let url = origin.url("/strong");
    let range = |first: usize, last: usize| {
        let (status, head, received) = via_proxy(&proxy, &["-r", &format!("{first}-{last}")], &url);
        assert_eq!(status, 206, "{head}");
        assert_eq!(received, &body[first..=last], "{head}");
        assert_eq!(
            header(&head, "content-range"),
            Some(&format!("bytes {first}-{last}/100")[..])
        );
        cache_status(&head).to_owned()
    };
    assert!(range(0, 49).contains("fwd=uri-miss; fwd-status=206; stored"));
    assert!(range(10, 20).contains("hit") && range(0, 49).contains("detail=partial"));
    assert_eq!(origin.requests("GET", "/strong"), 1);
    assert!(
        range(40, 70).contains("fwd=uri-miss"),
        "not covered: forwarded"
    );
    assert!(range(30, 60).contains("detail=partial"), "combined 0-70");
    assert_eq!(origin.requests("GET", "/strong"), 2);
    range(71, 99);
    let (status, head, whole) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, whole), (200, body.clone()), "{head}");
    assert!(cache_status(&head).contains("hit"), "{head}");
    assert!(header(&head, "content-range").is_none(), "{head}");
    assert!(range(90, 95).contains("hit"));
    assert_eq!(origin.requests("GET", "/strong"), 3);
    let url = origin.url("/weak");
    for _ in 0..2 {
        let (status, head, _) = via_proxy(&proxy, &["-r", "0-9"], &url);
        assert_eq!(status, 206);
        assert!(cache_status(&head).contains("detail=partial"), "{head}");
    }
    assert_eq!(origin.requests("GET", "/weak"), 2);
}
