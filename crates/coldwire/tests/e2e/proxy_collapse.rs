//! End-to-end tests of collapsed forwarding in `coldwire proxy` beyond the basic case in
//! the `proxy` module: hit-for-miss (after a response that was not stored, concurrent misses of
//! the key all reach the origin at once; a later storable response is stored and hit) and
//! followers on other workers than their leader, and a leader whose streamed body outgrows
//! what the store takes letting its followers go at once. Every test runs on every I/O
//! backend.
//!
//! The origin here is a small server of its own that can hold requests until a number of
//! them are in flight together, so "did they reach the origin in parallel?" is answered by
//! the origin's concurrency, not by timing.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::{Proxy, curl_output, header, via_proxy};

coldwire_testkit::backend_tests! {
    after_an_unstored_response_misses_go_to_the_origin_in_parallel,
    followers_on_other_workers_get_their_leaders_answer,
    a_leader_outgrowing_the_store_mid_body_lets_its_followers_go,
}

/// Longest the gate holds a request waiting for others (a bound for a failing test, never
/// reached by a passing one).
const GATE_LIMIT: Duration = Duration::from_secs(10);

/// What the gated origin does and saw.
#[derive(Default)]
struct GateState {
    /// Answer `Cache-Control: max-age=60` (else `no-store`).
    storable: bool,
    /// Hold each request until this many are in flight together (or [`GATE_LIMIT`]).
    together: usize,
    /// Hold every request until this is cleared (or [`GATE_LIMIT`]).
    held: bool,
    /// `together` requests were in flight at once: the gate stays open.
    opened: bool,
    /// Requests received.
    requests: usize,
    /// Requests being answered now.
    in_flight: usize,
    /// Most requests in flight at once.
    most_in_flight: usize,
}

/// A test origin on 127.0.0.1:port-0 whose answers can be held until several requests
/// are in flight at once.
struct GateOrigin {
    address: SocketAddr,
    state: Arc<(Mutex<GateState>, Condvar)>,
}

impl GateOrigin {
    fn start() -> GateOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let state: Arc<(Mutex<GateState>, Condvar)> = Arc::default();
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                thread::spawn(move || serve(stream, &state));
            }
        });
        GateOrigin { address, state }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Sets how it answers from now on, and resets what it saw.
    fn set(&self, storable: bool, together: usize) {
        let mut state = self.state.0.lock().unwrap();
        *state = GateState {
            storable,
            together,
            ..GateState::default()
        };
    }

    /// Holds (or lets go of) every request.
    fn hold(&self, held: bool) {
        self.state.0.lock().unwrap().held = held;
        self.state.1.notify_all();
    }

    /// (requests received, most in flight at once) since the last `set`.
    fn seen(&self) -> (usize, usize) {
        let state = self.state.0.lock().unwrap();
        (state.requests, state.most_in_flight)
    }
}

fn serve(stream: TcpStream, state: &(Mutex<GateState>, Condvar)) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        // Request line and fields; the proxy's GETs have no body.
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
        }
        let (lock, wakeup) = state;
        let storable = {
            let mut seen = lock.lock().unwrap();
            seen.requests += 1;
            seen.in_flight += 1;
            seen.most_in_flight = seen.most_in_flight.max(seen.in_flight);
            seen.opened |= seen.in_flight >= seen.together;
            wakeup.notify_all();
            let started = Instant::now();
            while (seen.held || !seen.opened) && started.elapsed() < GATE_LIMIT {
                seen = wakeup
                    .wait_timeout(seen, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            seen.storable
        };
        let control = if storable { "max-age=60" } else { "no-store" };
        let body = "gated body";
        let response = format!(
            "HTTP/1.1 200 OK\r\nCache-Control: {control}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let written = writer.write_all(response.as_bytes()).is_ok();
        let mut seen = lock.lock().unwrap();
        // `set` may have reset the count meanwhile.
        seen.in_flight = seen.in_flight.saturating_sub(1);
        drop(seen);
        if !written {
            return;
        }
    }
}

/// A proxy's `http://ADDRESS`, to send requests from another thread.
struct ProxyAt(String);

impl ProxyAt {
    /// `count` concurrent `curl -i` through the proxy; their outputs (head and body).
    fn concurrent_gets(&self, url: &str, count: usize) -> Vec<String> {
        let clients: Vec<_> = (0..count)
            .map(|_| {
                let proxy_url = self.0.clone();
                let url = url.to_owned();
                thread::spawn(move || curl_output(&["-i", "-x", &proxy_url, &url]))
            })
            .collect();
        clients
            .into_iter()
            .map(|client| {
                let output = client.join().unwrap();
                assert_eq!(output.code, 0, "curl through the proxy failed");
                String::from_utf8_lossy(&output.stdout).into_owned()
            })
            .collect()
    }
}

/// A `no-store` answer marks the key hit-for-miss: four concurrent misses then all reach
/// the origin together (the origin holds each until four are in flight — collapsed, it
/// would see one), each says `detail=hit-for-miss`. Once the origin's answer is storable,
/// it is stored, the marker is gone, and the next request is a hit.
fn after_an_unstored_response_misses_go_to_the_origin_in_parallel(backend: &str) {
    let origin = GateOrigin::start();
    // Followers would wait up to 60 s: long past the gate's limit.
    let proxy = Proxy::start(
        backend,
        &["--collapse-wait", "60", "--admin", "127.0.0.1:0"],
    );
    let url = origin.url("/gated");
    origin.set(false, 1);
    let (status, head, _) = via_proxy(&proxy, &[], &url);
    assert_eq!(status, 200);
    assert!(
        header(&head, "cache-status").is_some_and(|value| value.contains("detail=no-store")),
        "{head}"
    );
    assert_eq!(proxy.stats()["cache"]["hit_for_miss_keys"], 1);

    let together = 4;
    origin.set(false, together);
    for text in ProxyAt(proxy.url()).concurrent_gets(&url, together) {
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("gated body"),
            "{text}"
        );
        assert!(text.contains("detail=hit-for-miss"), "{text}");
    }
    assert_eq!(
        origin.seen(),
        (together, together),
        "every miss reached the origin, all at once"
    );
    assert_eq!(proxy.stats()["cache"]["hit_for_miss"], together);

    origin.set(true, 1);
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"gated body"[..]));
    let cache_status = header(&head, "cache-status").unwrap_or_default();
    assert!(cache_status.contains("stored"), "{head}");
    let (_, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!(body, b"gated body");
    assert!(
        header(&head, "cache-status").is_some_and(|value| value.contains("; hit")),
        "{head}"
    );
    assert_eq!(origin.seen().0, 1, "the hit did not reach the origin");
    assert_eq!(proxy.stats()["cache"]["hit_for_miss_keys"], 0);
}

/// With several workers, concurrent misses of a storable response cost the origin one
/// request, whichever worker each landed on, and every client gets the body as a hit
/// (`detail=collapsed`). The origin holds the leader's answer until the store has seen
/// every request's lookup, so all the others find the key claimed.
fn followers_on_other_workers_get_their_leaders_answer(backend: &str) {
    let origin = GateOrigin::start();
    // Two workers: the shared `Proxy::start` starts one.
    let proxy = Proxy::start_with(
        "127.0.0.1:0",
        backend,
        2,
        &["--admin", "127.0.0.1:0", "--collapse-wait", "60"],
    );
    let url = origin.url("/shared");
    origin.set(true, 1);
    origin.hold(true);
    let count = 6;
    let clients = {
        let proxy = ProxyAt(proxy.url());
        let url = url.clone();
        thread::spawn(move || proxy.concurrent_gets(&url, count))
    };
    let started = Instant::now();
    // Every request has reached the proxy (counted once each; the store's `missed` also
    // counts the polls of parked requests, so it can reach `count` before they all arrive).
    while proxy.stats()["total"]["http"]["requests"]
        .as_u64()
        .unwrap_or(0)
        < count as u64
        && started.elapsed() < GATE_LIMIT
    {
        thread::sleep(Duration::from_millis(20));
    }
    origin.hold(false);
    let mut collapsed = 0;
    for text in clients.join().unwrap() {
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("gated body"),
            "{text}"
        );
        collapsed += usize::from(text.contains("detail=collapsed"));
    }
    assert_eq!(origin.seen(), (1, 1), "one request reached the origin");
    assert_eq!(collapsed, count - 1, "the others waited for it");
}

/// What the stalling origin saw.
#[derive(Default)]
struct Stalled {
    /// Requests received.
    requests: usize,
    /// The first answer is still open.
    first_open: bool,
    /// A later request arrived while it was.
    overlapped: bool,
}

/// An origin whose first answer is a chunked body that stops after its first 2,000-byte
/// chunk until a second request arrives (or [`GATE_LIMIT`]); later requests get a short
/// answer at once. Returns its address and what it saw.
fn start_stalling_origin() -> (SocketAddr, Arc<Mutex<Stalled>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Stalled>> = Arc::default();
    let shared = seen.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = shared.clone();
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let first = {
                    let mut seen = seen.lock().unwrap();
                    seen.requests += 1;
                    if seen.requests == 1 {
                        seen.first_open = true;
                    } else {
                        seen.overlapped |= seen.first_open;
                    }
                    seen.requests == 1
                };
                if !first {
                    let _ = writer.write_all(
                        b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 5\r\nConnection: close\r\n\r\nshort",
                    );
                    return;
                }
                let chunk = "x".repeat(2000);
                let _ = writer.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{chunk}\r\n",
                        chunk.len()
                    )
                    .as_bytes(),
                );
                let started = Instant::now();
                while seen.lock().unwrap().requests < 2 && started.elapsed() < GATE_LIMIT {
                    thread::sleep(Duration::from_millis(10));
                }
                let _ = writer.write_all(b"0\r\n\r\n");
                seen.lock().unwrap().first_open = false;
            });
        }
    });
    (address, seen)
}

/// A leader whose chunked body passes `--max-object-bytes` mid-stream drops its fill and
/// lets the requests collapsed behind it go to the origin at once (the key is marked
/// hit-for-miss), instead of holding them until its body ends: the origin, which holds the
/// leader's body until a second request arrives, sees that request while the first answer
/// is still open.
fn a_leader_outgrowing_the_store_mid_body_lets_its_followers_go(backend: &str) {
    let (address, seen) = start_stalling_origin();
    let proxy = Proxy::start(
        backend,
        &["--collapse-wait", "60", "--max-object-bytes", "1000"],
    );
    let url = format!("http://{address}/growing");
    let leader = {
        let proxy_url = proxy.url();
        let url = url.clone();
        thread::spawn(move || curl_output(&["-i", "-x", &proxy_url, &url]))
    };
    let started = Instant::now();
    while seen.lock().unwrap().requests < 1 && started.elapsed() < GATE_LIMIT {
        thread::sleep(Duration::from_millis(10));
    }
    let follower = curl_output(&["-i", "-x", &proxy.url(), &url]);
    let follower = String::from_utf8_lossy(&follower.stdout).into_owned();
    let leader = leader.join().unwrap();
    let leader = String::from_utf8_lossy(&leader.stdout).into_owned();
    assert!(
        leader.starts_with("HTTP/1.1 200") && leader.ends_with(&"x".repeat(2000)),
        "{leader}"
    );
    assert!(
        follower.starts_with("HTTP/1.1 200") && follower.ends_with("short"),
        "{follower}"
    );
    assert!(follower.contains("detail=hit-for-miss"), "{follower}");
    assert_eq!(
        seen.lock().unwrap().requests,
        2,
        "the follower reached the origin itself"
    );
    // Held until the leader's body ended, the follower would have arrived after it.
    assert!(
        seen.lock().unwrap().overlapped,
        "the follower reached the origin while the leader's body was still open"
    );
}
