//! The admin listener (`--admin`) under slow clients: monitoring must keep answering.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::{DocumentRoot, ServerOptions};

/// One `GET /stats` with a 5 s read timeout: the status line, or the error.
fn stats_status(admin: SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect(admin).map_err(|error| error.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|error| error.to_string())?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&answer);
    Ok(text.lines().next().unwrap_or("").to_owned())
}

/// The admin endpoint answered one connection after another with a 2 s timeout per read,
/// so a client trickling its request (a byte every 300 ms) held it for as long as it
/// liked: `/stats` went unanswered meanwhile. Now each connection has its own thread (16
/// at most) and a 2 s deadline for its whole request: `/stats` answers while the trickler
/// trickles, and the trickler is cut.
pub fn a_slow_client_does_not_block_the_admin_endpoint(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).admin().start();
    let admin = server.admin.expect("the admin address");
    let trickler = thread::spawn(move || {
        let mut stream = TcpStream::connect(admin).expect("connecting");
        let started = Instant::now();
        // Bounded: 10 s of trickling; the deadline is 2 s.
        for byte in b"GET /stats HTTP/1.1\r\nX-Slow: ".iter().cycle() {
            if started.elapsed() > Duration::from_secs(10) {
                return false;
            }
            if stream.write_all(&[*byte]).is_err() {
                return true;
            }
            thread::sleep(Duration::from_millis(300));
        }
        false
    });
    thread::sleep(Duration::from_millis(200));
    let status = stats_status(admin);
    assert_eq!(
        status.as_deref(),
        Ok("HTTP/1.1 200 OK"),
        "while a client trickles"
    );
    assert!(
        trickler.join().expect("the trickler"),
        "the trickler was never cut"
    );
}
