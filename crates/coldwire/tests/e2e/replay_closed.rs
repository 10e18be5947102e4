//! Closed-loop trace replay end to end (`coldwire bench --replay FILE --replay-connections
//! N`): an origin that counts its open connections sees exactly N at once, never more;
//! every connection carries (a prefix of) one logged connection, in logged order, from its
//! client's own address; every request is answered; the JSON says the same.

use std::collections::HashSet;
use std::io::{BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use coldwire_workload::trace::{ConnectionRule, ReplayPlan, parse_trace};

/// What the counting origin saw.
#[derive(Default)]
struct Seen {
    open: AtomicUsize,
    most_open: AtomicUsize,
    /// Per connection: its peer and its paths in order.
    connections: Mutex<Vec<(IpAddr, Vec<String>)>>,
}

/// A threaded origin answering every request with 5 bytes, counting the connections open
/// at once (a connection stops counting when its last response — `Connection: close` —
/// is written, before the client can open the next one).
fn start_counting_origin() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let open = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
            shared.most_open.fetch_max(open, Ordering::SeqCst);
            let seen = shared.clone();
            thread::spawn(move || serve_connection(stream, &seen));
        }
    });
    (address, seen)
}

fn serve_connection(mut stream: TcpStream, seen: &Seen) {
    let peer = stream.peer_addr().unwrap().ip();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut paths = Vec::new();
    let mut counted = true;
    while let Some(request) = coldwire_testkit::read_request(&mut reader) {
        paths.push(request.path.clone());
        let close = request
            .header("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"));
        if close {
            seen.open.fetch_sub(1, Ordering::SeqCst);
            counted = false;
        }
        let head = if close { "Connection: close\r\n" } else { "" };
        let response = format!("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n{head}\r\nhello");
        if stream.write_all(response.as_bytes()).is_err() || close {
            break;
        }
    }
    if counted {
        seen.open.fetch_sub(1, Ordering::SeqCst);
    }
    seen.connections.lock().unwrap().push((peer, paths));
}

#[test]
fn a_closed_loop_replay_holds_exactly_the_connections_asked_for() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("nasa.log");
    let generated = std::process::Command::new(coldwire_testkit::coldwire_binary())
        .args([
            "trace",
            "generate",
            "--shape",
            "nasa",
            "--requests",
            "300",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&file)
        .status()
        .unwrap();
    assert!(generated.success());
    // One run of the closed loop for `duration`: everything that holds however fast the
    // machine is checked in it; it gives the most connections the origin saw open at once
    // and the requests answered, which depend on the run getting enough CPU time.
    let run = |duration: &str| {
        let (address, seen) = start_counting_origin();
        let json = directory.path().join("closed.json");
        let output = std::process::Command::new(coldwire_testkit::coldwire_binary())
            .arg("bench")
            .arg("--replay")
            .arg(&file)
            .arg("--url")
            .arg(format!("http://{address}/"))
            .args([
                "--replay-connections",
                "6",
                "--warmup",
                "200ms",
                "--duration",
                duration,
                "--json",
            ])
            .arg(&json)
            .arg("-q")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "coldwire bench --replay-connections failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains("closed loop on 6 connections (at most 6 open at once)"),
            "{stdout}"
        );
        // The origin never saw more than 6 at once (6 at once is judged below).
        let most_open = seen.most_open.load(Ordering::SeqCst);
        assert!(most_open <= 6, "{most_open} open at once");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let run = &report["runs"][0];
        assert_eq!(run["scenario"]["replay"]["closed_loop_connections"], 6);
        let phases = run["phases"].as_array().unwrap();
        assert_eq!(phases.len(), 2, "warm-up and measured: {phases:?}");
        let measured = &phases[1];
        assert_eq!(
            measured["population"]["max_open_connections"], 6,
            "{measured}"
        );
        assert_eq!(measured["errors_total"], 0, "{measured}");
        assert!(
            measured["succeeded_requests"].as_u64().unwrap() > 0,
            "{measured}"
        );
        // Every connection carried a prefix of one logged connection (the last ones were cut
        // at the end of the run), from its client's own address; the trace was gone round.
        let text = std::fs::read_to_string(&file).unwrap();
        let plan = ReplayPlan::new(
            &parse_trace(&text, None).records,
            1.0,
            ConnectionRule::KEEP_ALIVE,
        );
        let mut logged: Vec<Vec<String>> = Vec::new();
        for client in &plan.clients {
            let mut previous = None;
            for request in &client.requests {
                if previous != Some(request.connection) {
                    logged.push(Vec::new());
                    previous = Some(request.connection);
                }
                if let Some(connection) = logged.last_mut() {
                    connection.push(request.path.clone());
                }
            }
        }
        assert_eq!(logged.len() as u64, plan.connections());
        let connections = seen.connections.lock().unwrap();
        let mut answered = 0;
        let mut peers = HashSet::new();
        for (peer, paths) in connections.iter() {
            answered += paths.len();
            peers.insert(*peer);
            assert!(
                logged.iter().any(|logged| logged.starts_with(paths)),
                "a connection carried {paths:?}, which no logged connection starts with"
            );
        }
        assert!(
            peers
                .iter()
                .all(|peer| peer.to_string().starts_with("127.1.")),
            "{peers:?}"
        );
        (most_open, answered)
    };
    // The origin sees all 6 at once and the trace's 300 requests go round at least once
    // once the run is long enough: up to three runs, each longer, until both hold.
    let mut last = (0, 0);
    for duration in ["1s", "3s", "8s"] {
        last = run(duration);
        if last.0 == 6 && last.1 > 300 {
            break;
        }
        println!(
            "{duration} was not enough here (most open {}, {} answered): longer",
            last.0, last.1
        );
    }
    let (most_open, answered) = last;
    assert_eq!(most_open, 6, "the origin saw 6 at once");
    assert!(
        answered > 300,
        "the trace's 300 requests went round at least once: {answered}"
    );
}
