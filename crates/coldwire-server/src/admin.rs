//! The admin listener (`--admin ADDR`): a tiny blocking HTTP server on its own thread,
//! away from the event loops, answering
//! - `GET /stats`: the JSON of [`crate::stats::StatsReport`] (docs/stats-json.md);
//! - `GET /metrics`: the same numbers in the Prometheus text format ([`crate::metrics`]);
//! - `GET /`: a small self-contained HTML page charting them live (it polls `/stats`).
//!
//! One request per connection, each on a short-lived thread of its own (at most
//! [`MAX_CONCURRENT`] at once; more are closed unanswered), with a whole-request deadline
//! ([`REQUEST_DEADLINE`] from the connection's accept, not per read): a client that
//! connects and sends nothing, or trickles its request, can no longer hold the endpoint
//! for everyone (before, connections were answered one after another with a 2 s timeout
//! per read, so one trickling client blocked `/stats` for as long as it liked). It blocks
//! in `accept`, so it adds no wake-ups to the server's CPU profile.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::stats::Stats;

/// Connections answered at the same time; beyond, a new one is closed at once.
pub const MAX_CONCURRENT: usize = 16;

/// Time a connection has to send its whole request, and then to take the answer.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// Serves stats until `stop` is set. The accept blocks (no polling, so the endpoint costs
/// nothing while nobody asks); whoever sets `stop` then connects once to unblock it.
pub fn serve_admin(listener: TcpListener, stats: Arc<Stats>, stop: Arc<AtomicBool>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => {
                if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONCURRENT {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
                let (stats, done) = (stats.clone(), busy.clone());
                let spawned = std::thread::Builder::new()
                    .name("coldwire-admin-request".into())
                    .spawn(move || {
                        answer(stream, &stats);
                        done.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    busy.fetch_sub(1, Ordering::SeqCst);
                }
            }
            // Out of descriptors: back off instead of spinning on the error.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn answer(mut stream: TcpStream, stats: &Stats) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
    let mut request = [0u8; 2048];
    let mut filled = 0;
    while filled < request.len() {
        // Past the deadline, one last short read still takes a request already waiting in
        // the kernel (a process stopped and continued finds its deadline gone).
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        if stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut request[filled..]) {
            // A signal (a stop and continue) interrupts a read with a timeout set: the
            // request is still coming (seen as a 405 for a real GET under SIGSTOP).
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => break,
            Ok(count) => {
                filled += count;
                if request[..filled]
                    .windows(4)
                    .any(|window| window == b"\r\n\r\n")
                {
                    break;
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
        }
    }
    let line = request[..filled]
        .split(|&byte| byte == b'\r')
        .next()
        .unwrap_or_default();
    let (status, content_type, body) = route(line, stats);
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    if !line.starts_with(b"HEAD ") {
        let _ = stream.write_all(&body);
    }
}

/// The live page: inline script and SVG, no external resource.
const PAGE: &str = include_str!("admin_page.html");

/// Status, content type and body for a request line (`GET /path HTTP/1.1`).
fn route(line: &[u8], stats: &Stats) -> (&'static str, &'static str, Vec<u8>) {
    let mut words = line.split(|&byte| byte == b' ');
    let method = words.next().unwrap_or_default();
    let target = words.next().unwrap_or_default();
    // The query (a cache-buster, say) does not change the answer.
    let path = target
        .split(|&byte| byte == b'?')
        .next()
        .unwrap_or_default();
    if method != b"GET" && method != b"HEAD" {
        return (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            b"only GET: try GET /stats, GET /metrics or GET / in a browser\n".to_vec(),
        );
    }
    match path {
        b"/stats" => (
            "200 OK",
            "application/json",
            serde_json::to_vec_pretty(&stats.report()).unwrap_or_default(),
        ),
        b"/metrics" => (
            "200 OK",
            crate::metrics::CONTENT_TYPE,
            crate::metrics::render(&stats.report()).into_bytes(),
        ),
        b"/" | b"/index.html" => (
            "200 OK",
            "text/html; charset=utf-8",
            PAGE.as_bytes().to_vec(),
        ),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found: try GET /stats (JSON), GET /metrics (Prometheus) or GET / (live page)\n"
                .to_vec(),
        ),
    }
}
