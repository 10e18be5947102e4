//! `coldwire proxy` as a cache: miss then hit, revalidation, no-store, Vary, PURGE,
//! ranges from cached objects, stale-while-revalidate, stale-if-error, collapsed misses.

use std::io::Write;
use std::time::Duration;

use super::non_loopback_address;
use coldwire_testkit::{Origin, Proxy, curl_output, header, read_once, via_proxy};

pub(super) fn miss_then_hit_is_served_from_the_cache(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
    assert_eq!(status, 200);
    assert_eq!(body, b"cacheable body");
    assert!(
        header(&head, "cache-status")
            .unwrap()
            .contains("fwd=uri-miss"),
        "{head}"
    );
    assert!(header(&head, "via").unwrap().contains("coldwire"), "{head}");
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
    assert_eq!(status, 200);
    assert_eq!(body, b"cacheable body");
    assert!(
        header(&head, "cache-status").unwrap().contains("hit"),
        "{head}"
    );
    assert!(header(&head, "age").is_some(), "{head}");
    assert_eq!(
        origin.requests("/cacheable"),
        1,
        "the second request was a hit"
    );
    // A client conditional is answered from the cache.
    let (status, _, body) = via_proxy(
        &proxy,
        &["-H", "If-None-Match: \"v1\""],
        &origin.url("/cacheable"),
    );
    assert_eq!((status, body.len()), (304, 0));
    assert_eq!(origin.requests("/cacheable"), 1);
}

pub(super) fn stale_entry_is_revalidated_and_a_304_refreshes_it(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (_, _, body) = via_proxy(&proxy, &[], &origin.url("/revalidate"));
    assert_eq!(body, b"revalidated body");
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/revalidate"));
    assert_eq!(status, 200);
    assert_eq!(body, b"revalidated body", "the body comes from the cache");
    let cache_status = header(&head, "cache-status").unwrap();
    assert!(
        cache_status.contains("fwd=stale") && cache_status.contains("fwd-status=304"),
        "{head}"
    );
    assert_eq!(origin.requests("/revalidate"), 2);
    assert_eq!(
        origin.conditional("/revalidate"),
        1,
        "the origin saw one If-None-Match"
    );
}

pub(super) fn revalidate_always_asks_the_origin_every_time(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--revalidate-always"]);
    for _ in 0..3 {
        let (_, _, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
        assert_eq!(body, b"cacheable body");
    }
    assert_eq!(origin.requests("/cacheable"), 3);
    assert_eq!(origin.conditional("/cacheable"), 2);
}

pub(super) fn no_store_is_never_stored(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    // The first answer says why it was not stored; it marks the key hit-for-miss, so the
    // next miss goes forward at once (proxy_collapse.rs tests that further).
    for detail in ["detail=no-store", "detail=hit-for-miss"] {
        let (status, head, _) = via_proxy(&proxy, &[], &origin.url("/nostore"));
        assert_eq!(status, 200);
        assert!(
            header(&head, "cache-status").unwrap().contains(detail),
            "{head}"
        );
    }
    assert_eq!(origin.requests("/nostore"), 2);
}

pub(super) fn vary_keeps_variants_apart(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/vary");
    let (_, _, french) = via_proxy(&proxy, &["-H", "Accept-Language: fr"], &url);
    let (_, _, german) = via_proxy(&proxy, &["-H", "Accept-Language: de"], &url);
    let (_, head, french_again) = via_proxy(&proxy, &["-H", "Accept-Language: fr"], &url);
    assert_eq!(french, b"language=fr");
    assert_eq!(german, b"language=de");
    assert_eq!(french_again, b"language=fr");
    assert!(
        header(&head, "cache-status").unwrap().contains("hit"),
        "{head}"
    );
    assert_eq!(origin.requests("/vary"), 2);
}

/// `PURGE URL`: 200 when something was removed (every Vary variant: both languages go to
/// the origin again afterwards), 404 when nothing is cached, 403 outside the ACL.
pub(super) fn purge_removes_every_variant_for_allowed_clients_only(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start_on("0.0.0.0:0", backend, &[]);
    let local = format!("http://127.0.0.1:{}", proxy.address.port());
    let url = origin.url("/vary");
    let get = |language: &str| {
        let output = curl_output(&[
            "-x",
            &local,
            "-H",
            &format!("Accept-Language: {language}"),
            &url,
        ]);
        assert_eq!(output.code, 0);
        output.stdout
    };
    let purge = |proxy_url: &str| {
        let output = curl_output(&["-i", "-x", proxy_url, "-X", "PURGE", &url]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    get("fr");
    get("de");
    get("fr");
    assert_eq!(origin.requests("/vary"), 2, "two variants stored");
    if let Some(address) = non_loopback_address() {
        let outside = format!("http://{address}:{}", proxy.address.port());
        let answer = purge(&outside);
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    } else {
        println!("skipped the 403 part: this machine has no non-loopback IPv4 address");
    }
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("purged 2"), "{answer}");
    assert_eq!(get("fr"), b"language=fr");
    assert_eq!(get("de"), b"language=de");
    assert_eq!(origin.requests("/vary"), 4, "both variants were gone");
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("nothing cached"), "{answer}");
    assert_eq!(
        origin.requests("/vary"),
        4,
        "PURGE never reaches the origin"
    );
    // A reverse proxy takes the origin-form target.
    let reverse = Proxy::start(
        backend,
        &["--reverse", &format!("http://{}", origin.address)],
    );
    let url = format!("{}/cacheable", reverse.url());
    assert_eq!(curl_output(&[&url]).stdout, b"cacheable body");
    let answer =
        String::from_utf8_lossy(&curl_output(&["-i", "-X", "PURGE", &url]).stdout).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(curl_output(&[&url]).stdout, b"cacheable body");
    assert_eq!(origin.requests("/cacheable"), 2, "purged, so fetched again");
}

/// A `Range` on a hit is cut from the cached object: 206 with `Content-Range`, 416 when
/// unsatisfiable, the whole 200 when `If-Range` does not match; the origin is not asked.
/// On a miss the request goes as it came (this origin ignores `Range`: a full 200).
pub(super) fn ranges_are_served_from_cached_objects(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/cacheable");
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8"], &url);
    assert_eq!((status, &body[..]), (200, &b"cacheable body"[..]), "miss");
    let (status, head, body) = via_proxy(&proxy, &["-r", "0-8"], &url);
    assert_eq!((status, &body[..]), (206, &b"cacheable"[..]), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes 0-8/14"));
    assert!(header(&head, "cache-status").unwrap().contains("hit"));
    let (status, head, body) = via_proxy(&proxy, &["-r", "-4"], &url);
    assert_eq!((status, &body[..]), (206, &b"body"[..]), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes 10-13/14"));
    let (status, head, body) = via_proxy(&proxy, &["-r", "100-"], &url);
    assert_eq!((status, body.len()), (416, 0), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes */14"));
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8", "-H", "If-Range: \"v1\""], &url);
    assert_eq!((status, &body[..]), (206, &b"cacheable"[..]));
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8", "-H", "If-Range: \"v0\""], &url);
    assert_eq!((status, &body[..]), (200, &b"cacheable body"[..]));
    assert_eq!(
        origin.requests("/cacheable"),
        1,
        "every range came from the cache"
    );
}

/// `stale-while-revalidate`: stale hits are answered at once, marked stale, and one
/// background revalidation (the origin takes 2 s to answer it) refreshes the entry.
pub(super) fn stale_while_revalidate_answers_at_once_and_refreshes_once(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/swr");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"swr body"[..]));
    for _ in 0..3 {
        let (status, head, body) = via_proxy(&proxy, &[], &url);
        assert_eq!((status, &body[..]), (200, &b"swr body"[..]), "{head}");
        let cache_status = header(&head, "cache-status").unwrap();
        assert!(
            cache_status.contains("hit") && cache_status.contains("stale-while-revalidate"),
            "{head}"
        );
        assert!(header(&head, "x-refreshed").is_none(), "{head}");
    }
    // max-stale accepts the stale entry without starting another revalidation: poll
    // (bounded) until the refreshed fields show.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (_, head, _) = via_proxy(&proxy, &["-H", "Cache-Control: max-stale"], &url);
        if header(&head, "x-refreshed") == Some("yes") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never refreshed: {head}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        origin.requests("/swr"),
        2,
        "one miss, one background revalidation"
    );
    assert_eq!(origin.conditional("/swr"), 1);
}

/// `stale-if-error`: a 5xx or an unreachable origin is answered with the stored response
/// within the window (response or request directive); without a window the error passes.
pub(super) fn stale_if_error_answers_when_the_origin_fails(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--upstream-timeout", "5"]);
    let url = origin.url("/flaky?cc=max-age=0,_stale-if-error=60");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]));
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]), "{head}");
    let cache_status = header(&head, "cache-status").unwrap();
    assert!(
        cache_status.contains("fwd-status=500") && cache_status.contains("stale-if-error"),
        "{head}"
    );
    assert_eq!(origin.requests("/flaky?cc=max-age=0,_stale-if-error=60"), 2);
    // No window in the response: the 500 passes, unless the request grants one.
    let url = origin.url("/flaky?cc=max-age=0");
    via_proxy(&proxy, &[], &url);
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (500, &b"origin broke"[..]));
    let (status, _, body) = via_proxy(&proxy, &["-H", "Cache-Control: stale-if-error=60"], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]));
    // An origin that is gone: connection refused instead of 502.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let once = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && read_once(&mut stream, &mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=0, stale-if-error=60\r\n\
              Connection: close\r\nContent-Length: 9\r\n\r\nlast word",
        );
        // The listener closes here: later connections are refused.
    });
    let url = format!("http://{address}/gone");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"last word"[..]));
    once.join().unwrap();
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"last word"[..]), "{head}");
    assert!(
        header(&head, "cache-status")
            .unwrap()
            .contains("stale-if-error"),
        "{head}"
    );
}

/// Collapsed forwarding: five concurrent misses for a URI the origin takes 1.5 s to answer
/// cost the origin one request, and all five get the body; when the answer turns out
/// uncacheable, the waiting requests go to the origin themselves.
pub(super) fn concurrent_misses_send_one_request_to_the_origin(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    for (path, expected_requests) in [("/slow", 1), ("/slow?nostore", 5)] {
        let url = origin.url(path);
        let clients: Vec<_> = (0..5)
            .map(|_| {
                let proxy_url = proxy.url();
                let url = url.clone();
                std::thread::spawn(move || curl_output(&["-i", "-x", &proxy_url, &url]))
            })
            .collect();
        let mut collapsed = 0;
        for client in clients {
            let output = client.join().unwrap();
            assert_eq!(output.code, 0, "{path}");
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(
                text.starts_with("HTTP/1.1 200") && text.ends_with("slow body"),
                "{path}: {text}"
            );
            collapsed += usize::from(text.contains("detail=collapsed"));
        }
        assert_eq!(origin.requests(path), expected_requests, "{path}");
        if expected_requests == 1 {
            assert_eq!(collapsed, 4, "four waited for the first");
        }
    }
}
