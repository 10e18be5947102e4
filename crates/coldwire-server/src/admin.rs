//! The stats endpoint (`--admin ADDR`): a tiny blocking HTTP server on its own thread,
//! away from the event loops, answering `GET /stats` (and `/`) with the JSON of
//! [`crate::stats::StatsReport`]. One request per connection; bounded reads and timeouts.
//! It blocks in `accept`, so it adds no wake-ups to the server's CPU profile.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::stats::Stats;

/// Serves stats until `stop` is set. The accept blocks (no polling, so the endpoint costs
/// nothing while nobody asks); whoever sets `stop` then connects once to unblock it.
pub fn serve_admin(listener: TcpListener, stats: Arc<Stats>, stop: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => answer(stream, &stats),
            // Out of descriptors: back off instead of spinning on the error.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn answer(mut stream: TcpStream, stats: &Stats) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut request = [0u8; 2048];
    let mut filled = 0;
    while filled < request.len() {
        match stream.read(&mut request[filled..]) {
            Ok(0) | Err(_) => break,
            Ok(count) => {
                filled += count;
                if request[..filled]
                    .windows(4)
                    .any(|window| window == b"\r\n\r\n")
                {
                    break;
                }
            }
        }
    }
    let line = request[..filled]
        .split(|&byte| byte == b'\r')
        .next()
        .unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /stats ") || line.starts_with(b"GET / ") {
        let body = serde_json::to_vec_pretty(&stats.report()).unwrap_or_default();
        ("200 OK", body)
    } else {
        (
            "404 Not Found",
            b"{\"error\":\"try GET /stats\"}\n".to_vec(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}
