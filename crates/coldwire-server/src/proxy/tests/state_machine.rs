//! The proxy worker's state machine driven through the mock driver: each test is one
//! conversation — completions in, the worker's sends, closes and states checked — with no
//! socket, thread pool or curl.

use std::time::Duration;

use coldwire_io::Completion;

use super::harness::{Harness, ORIGIN, get};

/// Stale at once, with a validator: the next request revalidates it.
const REVALIDATED: &[u8] =
    b"HTTP/1.1 200 OK\r\nCache-Control: max-age=0\r\nETag: \"v1\"\r\nContent-Length: 5\r\n\r\nhello";

const STORABLE: &[u8] =
    b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello";

#[test]
fn a_miss_goes_to_the_origin_is_stored_and_then_hit() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    assert_eq!(proxy.state(client), Some("requests"));
    proxy.receive(client, &get("/a", ""));
    assert_eq!(proxy.state(client), Some("exchange"));
    let origin = proxy.upstream(0);
    let upstream = proxy.output(origin);
    assert!(upstream.starts_with("GET /a HTTP/1.1\r\n"), "{upstream}");
    assert!(upstream.contains("Via: 1.1 coldwire\r\n"), "{upstream}");
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(origin, STORABLE);
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("fwd=uri-miss; fwd-status=200; stored"),
        "{answer}"
    );
    assert!(answer.ends_with("\r\n\r\nhello"), "{answer}");
    assert_eq!(proxy.state(client), Some("requests"));
    assert!(proxy.driver().connection(client).receiving);
    // The origin connection went back to the pool, listening for its close.
    assert!(!proxy.driver().is_closed(origin));
    assert!(proxy.driver().connection(origin).receiving);

    proxy.receive(client, &get("/a", ""));
    let answer = proxy.output(client);
    assert!(
        answer.contains("Cache-Status: coldwire; hit; ttl="),
        "{answer}"
    );
    assert!(answer.ends_with("hello"), "{answer}");
    assert_eq!(proxy.connects(), 1);
    assert_eq!(proxy.output(origin), "");
    assert_eq!(proxy.state(client), Some("requests"));
}

#[test]
fn pipelined_requests_are_answered_in_order_on_one_origin_connection() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    let mut both = get("/1", "");
    both.extend_from_slice(&get("/2", ""));
    proxy.receive(client, &both);
    let origin = proxy.upstream(0);
    let upstream = proxy.output(origin);
    assert!(upstream.starts_with("GET /1 "), "{upstream}");
    assert!(
        !upstream.contains("GET /2 "),
        "one exchange at a time: {upstream}"
    );
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(origin, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none");
    // The second request went out at once, on the same (now pooled) connection.
    assert_eq!(proxy.connects(), 1);
    assert!(proxy.output(origin).starts_with("GET /2 "));
    assert_eq!(proxy.state(client), Some("exchange"));
    proxy.receive(origin, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo");
    let answers = proxy.output(client);
    let first = answers.find("one").expect("first answer");
    let second = answers.find("two").expect("second answer");
    assert!(first < second, "{answers}");
    assert_eq!(proxy.state(client), Some("requests"));
}

#[test]
fn a_malformed_chunked_body_gets_400_and_aborts_the_origin_request() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    let head = format!(
        "POST http://{ORIGIN}/p HTTP/1.1\r\nHost: {ORIGIN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    proxy.receive(client, head.as_bytes());
    let origin = proxy.upstream(0);
    assert!(proxy.output(origin).starts_with("POST /p "));
    proxy.receive(client, b"5\r\nhello\r\nzz\r\n");
    // What was well-formed went on; nothing after the error did, and the request is cut.
    assert!(proxy.driver().is_closed(origin));
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(proxy.driver().connection(client).write_shut);
    assert_eq!(proxy.state(client), Some("lingering"));
    // A lingering connection drains what the client still sends, then closes at its
    // deadline.
    proxy.receive(client, b"more");
    assert_eq!(proxy.output(client), "");
    assert!(proxy.driver().connection(client).receiving);
    proxy.driver().advance(Duration::from_secs(3));
    proxy.complete(Completion::TimerExpired { connection: client });
    assert!(proxy.driver().is_closed(client));
    assert_eq!(proxy.state(client), None);
}

#[test]
fn an_origin_answering_before_the_body_ends_closes_both_connections() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    let head =
        format!("POST http://{ORIGIN}/p HTTP/1.1\r\nHost: {ORIGIN}\r\nContent-Length: 100\r\n\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(b"0123456789");
    proxy.receive(client, &request);
    let origin = proxy.upstream(0);
    assert!(proxy.output(origin).ends_with("\r\n\r\n0123456789"));
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(
        origin,
        b"HTTP/1.1 413 Too Large\r\nContent-Length: 2\r\n\r\nno",
    );
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("Connection: close\r\n"), "{answer}");
    assert!(answer.ends_with("no"), "{answer}");
    // The rest of the body must never be read as a request: neither connection is reused.
    assert!(proxy.driver().is_closed(origin));
    assert!(proxy.driver().connection(client).write_shut);
    assert_eq!(proxy.state(client), Some("lingering"));
}

#[test]
fn a_connect_tunnel_relays_both_ways_and_closes_when_both_sides_finish() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(
        client,
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\nhello",
    );
    assert_eq!(proxy.state(client), Some("tunnel"));
    let (origin, address) = proxy.driver().connects[0];
    assert_eq!(address.to_string(), "127.0.0.1:443");
    assert_eq!(proxy.output(client), "");
    proxy.complete(Completion::Connected { connection: origin });
    assert_eq!(
        proxy.output(client),
        "HTTP/1.1 200 Connection established\r\n\r\n"
    );
    // Bytes that came with the CONNECT head go first.
    assert_eq!(proxy.output(origin), "hello");
    proxy.receive(client, b"ping");
    assert_eq!(proxy.output(origin), "ping");
    proxy.receive(origin, b"pong");
    assert_eq!(proxy.output(client), "pong");
    // Half-close: the client's FIN is passed on, the tunnel stays for the other way.
    proxy.complete(Completion::PeerClosed { connection: client });
    assert!(proxy.driver().connection(origin).write_shut);
    assert_eq!(proxy.state(client), Some("tunnel"));
    proxy.complete(Completion::PeerClosed { connection: origin });
    assert!(proxy.driver().is_closed(client));
    assert!(proxy.driver().is_closed(origin));
    assert_eq!(proxy.state(client), None);
}

#[test]
fn a_connect_to_a_port_not_allowed_is_refused_with_the_reason() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(
        client,
        b"CONNECT 127.0.0.1:25 HTTP/1.1\r\nHost: 127.0.0.1:25\r\n\r\n",
    );
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(answer.contains("--connect-port 25"), "{answer}");
    assert_eq!(proxy.connects(), 0);
    assert_eq!(proxy.state(client), Some("lingering"));
}

#[test]
fn a_collapsed_follower_is_woken_by_its_leader_and_answered_from_the_store() {
    let mut proxy = Harness::new(|_| {});
    let leader = proxy.accept();
    let follower = proxy.accept();
    proxy.receive(leader, &get("/c", ""));
    proxy.receive(follower, &get("/c", ""));
    assert_eq!(proxy.state(leader), Some("exchange"));
    assert_eq!(proxy.state(follower), Some("parked"));
    assert_eq!(proxy.connects(), 1);
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(origin, STORABLE);
    assert!(proxy.output(leader).ends_with("hello"));
    // Storing released the claim; the store wakes this worker's loop.
    proxy.complete(Completion::Woken);
    let answer = proxy.output(follower);
    assert!(answer.contains("; hit; ttl="), "{answer}");
    assert!(answer.contains("detail=collapsed"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    assert_eq!(proxy.state(follower), Some("requests"));
    assert_eq!(proxy.connects(), 1);
}

#[test]
fn a_pooled_connection_found_closed_is_retried_once_on_a_fresh_one() {
    let mut proxy = Harness::new(|_| {});
    let (client, first) = proxy.fetched("/a", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    proxy.receive(client, &get("/b", ""));
    assert!(
        proxy.output(first).starts_with("GET /b "),
        "reused from the pool"
    );
    // The origin had closed the idle connection: nothing came back.
    proxy.complete(Completion::PeerClosed { connection: first });
    assert!(proxy.driver().is_closed(first));
    assert_eq!(proxy.connects(), 2);
    let second = proxy.upstream(1);
    assert!(proxy.output(second).starts_with("GET /b "));
    assert_eq!(proxy.output(client), "");
    proxy.complete(Completion::Connected { connection: second });
    proxy.receive(second, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nbb");
    assert!(proxy.output(client).ends_with("bb"));
}

#[test]
fn a_silent_origin_gets_504_and_the_client_stays() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(client, &get("/slow", ""));
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    proxy.driver().advance(Duration::from_secs(31));
    proxy.complete(Completion::TimerExpired { connection: origin });
    assert!(proxy.driver().is_closed(origin));
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 504 "), "{answer}");
    assert_eq!(proxy.state(client), Some("requests"));
    assert!(!proxy.driver().is_closed(client));
}

#[test]
fn an_origin_reset_mid_body_cuts_the_client_and_stores_nothing() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(client, &get("/cut", ""));
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(
        origin,
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10\r\n\r\nhalf",
    );
    assert!(proxy.output(client).ends_with("half"));
    proxy.complete(Completion::Failed {
        connection: origin,
        error: std::io::Error::from(std::io::ErrorKind::ConnectionReset),
    });
    assert!(proxy.driver().is_closed(client));
    assert!(proxy.driver().is_closed(origin));
    assert_eq!(proxy.state(client), None);
    // Nothing was stored: the next request is a miss again.
    let again = proxy.accept();
    proxy.receive(again, &get("/cut", ""));
    assert_eq!(proxy.state(again), Some("exchange"));
    assert_eq!(proxy.connects(), 2);
}

#[test]
fn a_slow_client_holds_the_origin_until_it_has_taken_the_response() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(client, &get("/big", ""));
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    proxy.driver().hold(client);
    proxy.receive(
        origin,
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234",
    );
    // Back-pressure: no receive on the origin while the client has not taken the bytes.
    assert!(!proxy.driver().connection(origin).receiving);
    assert_eq!(proxy.state(client), Some("exchange"));
    proxy.driver().release(client);
    proxy.run();
    assert!(proxy.driver().connection(origin).receiving);
    proxy.receive(origin, b"56789");
    assert!(proxy.output(client).ends_with("0123456789"));
    assert_eq!(proxy.state(client), Some("requests"));
}

#[test]
fn a_malformed_request_head_gets_400_and_a_lingering_close() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    proxy.receive(
        client,
        b"GET http://127.0.0.1:8080/ HTTP/1.1\r\nBad Header\r\n\r\n",
    );
    assert!(proxy.output(client).starts_with("HTTP/1.1 400 "));
    assert_eq!(proxy.state(client), Some("lingering"));
    assert_eq!(proxy.connects(), 0);
}

#[test]
fn a_stale_entry_is_revalidated_and_a_304_answers_from_the_store() {
    let mut proxy = Harness::new(|_| {});
    let (client, origin) = proxy.fetched("/r", REVALIDATED);
    assert_eq!(proxy.store_counters().stored, 1);
    proxy.receive(client, &get("/r", ""));
    let upstream = proxy.output(origin);
    assert!(upstream.contains("If-None-Match: \"v1\"\r\n"), "{upstream}");
    proxy.receive(origin, b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n");
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("fwd=stale; fwd-status=304; stored"),
        "{answer}"
    );
    assert!(answer.ends_with("hello"), "{answer}");
    assert_eq!(proxy.state(client), Some("requests"));
}

#[test]
fn a_304_that_selects_nothing_refetches_without_validators() {
    let mut proxy = Harness::new(|_| {});
    let (client, origin) = proxy.fetched("/r", REVALIDATED);
    proxy.receive(client, &get("/r", ""));
    proxy.output(origin);
    // Another strong validator: the stored body is not the origin's.
    proxy.receive(origin, b"HTTP/1.1 304 Not Modified\r\nETag: \"v2\"\r\n\r\n");
    assert!(proxy.driver().is_closed(origin));
    assert_eq!(proxy.output(client), "");
    let again = proxy.upstream(1);
    let upstream = proxy.output(again);
    assert!(upstream.starts_with("GET /r "), "{upstream}");
    assert!(!upstream.contains("If-None-Match"), "{upstream}");
    proxy.complete(Completion::Connected { connection: again });
    proxy.receive(
        again,
        b"HTTP/1.1 200 OK\r\nETag: \"v2\"\r\nContent-Length: 5\r\n\r\nworld",
    );
    assert!(proxy.output(client).ends_with("world"));
}

#[test]
fn stale_if_error_answers_from_the_store_when_the_origin_fails() {
    let mut proxy = Harness::new(|_| {});
    let (client, origin) = proxy.fetched(
        "/e",
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=0, stale-if-error=60\r\nContent-Length: 5\r\n\r\nhello",
    );
    proxy.receive(client, &get("/e", ""));
    proxy.receive(
        origin,
        b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nfail",
    );
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("fwd=stale; fwd-status=500;"), "{answer}");
    assert!(answer.contains("detail=stale-if-error"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    assert!(proxy.driver().is_closed(origin));
}

#[test]
fn a_long_body_is_spliced_after_the_head_and_its_bytes() {
    let mut proxy = Harness::new(|config| {
        config.data_path = super::super::config::DataPath::Splice;
        config.splice_threshold = 16;
    });
    proxy.driver().splicing = true;
    let client = proxy.accept();
    proxy.receive(client, &get("/long", ""));
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    proxy.receive(
        origin,
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
    );
    assert!(proxy.output(client).ends_with("\r\n\r\n0123456789"));
    assert_eq!(proxy.driver().splices, vec![(origin, client, 90, true)]);
    assert_eq!(proxy.state(client), Some("exchange"));
    // The driver finished the transfer (no copy kept: nothing is stored).
    proxy.complete(Completion::Sent { connection: client });
    assert_eq!(proxy.state(client), Some("requests"));
    assert!(!proxy.driver().is_closed(origin), "back in the pool");
    assert_eq!(proxy.store_counters().stored, 0);
}

#[test]
fn a_tunnel_is_spliced_both_ways_when_the_driver_can() {
    let mut proxy = Harness::new(|config| {
        config.data_path = super::super::config::DataPath::Splice;
    });
    proxy.driver().splicing = true;
    let client = proxy.accept();
    proxy.receive(
        client,
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
    );
    let (origin, _) = proxy.driver().connects[0];
    proxy.complete(Completion::Connected { connection: origin });
    assert_eq!(
        proxy.driver().splices,
        vec![
            (client, origin, u64::MAX, false),
            (origin, client, u64::MAX, false)
        ]
    );
    // Each direction's end comes as the splice's `Sent`: the FIN is passed on.
    proxy.complete(Completion::Sent { connection: origin });
    assert!(proxy.driver().connection(origin).write_shut);
    assert_eq!(proxy.state(client), Some("tunnel"));
    proxy.complete(Completion::Sent { connection: client });
    assert!(proxy.driver().is_closed(client));
    assert!(proxy.driver().is_closed(origin));
}

#[test]
fn bytes_after_an_early_answer_are_never_read_as_a_request() {
    let mut proxy = Harness::new(|_| {});
    let client = proxy.accept();
    let head =
        format!("POST http://{ORIGIN}/p HTTP/1.1\r\nHost: {ORIGIN}\r\nContent-Length: 100\r\n\r\n");
    proxy.receive(client, head.as_bytes());
    let origin = proxy.upstream(0);
    proxy.complete(Completion::Connected { connection: origin });
    // A slow client: the early answer is still being written when more bytes arrive.
    proxy.driver().hold(client);
    proxy.receive(
        origin,
        b"HTTP/1.1 413 Too Large\r\nContent-Length: 2\r\n\r\nno",
    );
    assert_eq!(proxy.state(client), Some("closing"));
    // What the client sends now is the rest of its body, whatever it looks like.
    proxy.receive(client, &get("/smuggled", ""));
    assert_eq!(proxy.connects(), 1);
    assert_eq!(proxy.state(client), Some("closing"));
    proxy.driver().release(client);
    proxy.run();
    assert!(proxy.driver().connection(client).write_shut);
    assert_eq!(proxy.state(client), Some("lingering"));
    let answer = proxy.output(client);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(!answer.contains("smuggled"), "{answer}");
}

#[test]
fn a_parked_request_goes_to_the_origin_itself_after_collapse_wait() {
    let mut proxy = Harness::new(|config| config.collapse_wait = Duration::from_secs(1));
    let leader = proxy.accept();
    let follower = proxy.accept();
    proxy.receive(leader, &get("/slow", ""));
    proxy.receive(follower, &get("/slow", ""));
    assert_eq!(proxy.state(follower), Some("parked"));
    // Polls before the wait is over leave it parked.
    proxy.driver().advance(Duration::from_millis(500));
    proxy.complete(Completion::TimerExpired {
        connection: follower,
    });
    assert_eq!(proxy.state(follower), Some("parked"));
    proxy.driver().advance(Duration::from_millis(600));
    proxy.complete(Completion::TimerExpired {
        connection: follower,
    });
    assert_eq!(proxy.state(follower), Some("exchange"));
    assert_eq!(proxy.connects(), 2);
}
