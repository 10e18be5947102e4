//! Connection-level attacks and behaviour on the proxy: slow request bodies (slow POST,
//! R-U-Dead-Yet) against honest slow uploads, and a client that half-closes after its
//! request.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest as Request};

use super::cache::Mode;

/// Answers every request (after reading its whole body) with the body's length.
fn length_script(request: &Request) -> Reply {
    let length = request.header("content-length").unwrap_or("none");
    Reply::new(
        "200 OK",
        &[("Cache-Control", "no-store")],
        format!("length={length}").as_bytes(),
    )
}

/// The request head of a POST with `length` bytes of body for `path`.
fn post_head(mode: Mode, origin: &ScriptedOrigin, path: &str, length: usize) -> String {
    mode.get(origin, path).replacen("GET ", "POST ", 1).replace(
        "Connection: close\r\n\r\n",
        &format!("Content-Length: {length}\r\nConnection: close\r\n\r\n"),
    )
}

fn read_all(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

/// An upload that keeps a steady pace (16 KiB in 2 KiB pieces, 250 ms apart, ≈ 8 KiB/s)
/// but takes longer than `--upstream-timeout` (1 s) was answered `504` mid-upload: the
/// origin's timer ran from the request head, not from the last byte the origin received.
/// It now restarts with every body byte sent, and the upload is answered by the origin.
pub fn an_upload_longer_than_the_upstream_timeout_is_not_cut(backend: &str) {
    let origin = ScriptedOrigin::start(length_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let args = ["--upstream-timeout", "1s", "--header-timeout", "5s"];
        let proxy = mode.start_with(backend, &origin, &args);
        let mut stream = TcpStream::connect(proxy.address).expect("connecting");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let head = post_head(mode, &origin, "/upload", 8 * 2048);
        stream.write_all(head.as_bytes()).expect("sending the head");
        for _ in 0..8 {
            thread::sleep(Duration::from_millis(250));
            stream.write_all(&[b'u'; 2048]).expect("sending a piece");
        }
        let answer = read_all(&mut stream);
        assert!(answer.starts_with("HTTP/1.1 200 "), "{mode:?}: {answer}");
        assert!(answer.ends_with("length=16384"), "{mode:?}: {answer}");
    }
}

/// A slow-POST client (a byte of its announced body every 200 ms, far below the minimum
/// pace of 1 KiB/s) held the client and an origin connection until `--upstream-timeout`
/// (30 s) ran out — and that was answered as the origin's fault (`504`). The body's pace
/// deadline (`--header-timeout`, 1 s here) now cuts it, as a slow head is cut.
pub fn a_trickled_request_body_is_cut_at_its_pace_deadline(backend: &str) {
    let origin = ScriptedOrigin::start(length_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let proxy = mode.start_with(backend, &origin, &["--header-timeout", "1s"]);
        let mut stream = TcpStream::connect(proxy.address).expect("connecting");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("a timeout");
        let head = post_head(mode, &origin, "/trickle", 1000);
        stream.write_all(head.as_bytes()).expect("sending the head");
        let started = Instant::now();
        let mut closed = false;
        let mut answer = Vec::new();
        // Bounded: 10 s of trickling; the deadline is 1 s.
        while started.elapsed() < Duration::from_secs(10) {
            if stream.write_all(b"t").is_err() {
                closed = true;
                break;
            }
            let mut buffer = [0u8; 4096];
            match stream.read(&mut buffer) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(read) => answer.extend_from_slice(&buffer[..read]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            closed,
            "{mode:?}: still open after 10 s of trickling: {answer}"
        );
        assert!(!answer.contains("504"), "{mode:?}: {answer}");
    }
}

/// A client that sends its whole request and then shuts down its sending side (`nc -N`,
/// scripts) got no answer for a request with a body: the proxy read the end of stream as
/// the client leaving and cut the exchange (a `GET` happened to be answered). A half-close
/// after a complete request is now answered, then the connection closes.
pub fn a_request_followed_by_a_half_close_is_answered(backend: &str) {
    let origin = ScriptedOrigin::start(length_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let proxy = mode.start(backend, &origin);
        for (path, body) in [("/half-post", "hello"), ("/half-get", "")] {
            let mut stream = TcpStream::connect(proxy.address).expect("connecting");
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("a timeout");
            let mut request = post_head(mode, &origin, path, body.len());
            if body.is_empty() {
                request = mode.get(&origin, path);
            }
            request.push_str(body);
            stream.write_all(request.as_bytes()).expect("sending");
            stream.shutdown(Shutdown::Write).expect("half-closing");
            let answer = read_all(&mut stream);
            assert!(
                answer.starts_with("HTTP/1.1 200 "),
                "{mode:?} {path}: {answer}"
            );
            let length = if body.is_empty() { "none" } else { "5" };
            assert!(
                answer.ends_with(&format!("length={length}")),
                "{mode:?} {path}: {answer}"
            );
        }
    }
}

/// An origin that reads a request body slowly (at most 4 KiB every 50 ms, from a small
/// receive buffer) and answers once it has all of it, with the body's length.
fn start_slow_reading_origin() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding");
    let address = listener.local_addr().expect("an address");
    // A small receive window: what the origin has not read stays in the proxy's kernel.
    socket2::SockRef::from(&listener)
        .set_recv_buffer_size(16 * 1024)
        .expect("a receive buffer size");
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut stream = stream;
                let mut received = Vec::new();
                let mut buffer = [0u8; 16 * 1024];
                let (head_end, length) = loop {
                    let Ok(read) = stream.read(&mut buffer) else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    received.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&received).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                let mut got = received.len() - head_end;
                while got < length {
                    thread::sleep(Duration::from_millis(50));
                    match stream.read(&mut buffer[..4096]) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => got += read,
                    }
                }
                let body = format!("got={got}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    address
}

/// A fast client's upload to an origin that reads it slowly: the proxy hands the body to
/// the kernel at once (several hundred KiB wait in its send buffer) and the origin takes
/// seconds to read it. `--upstream-timeout` (3 s) ran from the last byte the proxy
/// queued, so the origin — still reading — was answered `504`. The origin's timer now sees
/// the kernel's queue for it shrinking (as the client write timeout does) and waits on.
pub fn an_origin_still_reading_the_request_body_is_not_timed_out(backend: &str) {
    let origin = start_slow_reading_origin();
    let reverse = format!("http://{origin}");
    let proxy = coldwire_testkit::Proxy::start(
        backend,
        &["--reverse", &reverse, "--upstream-timeout", "3s"],
    );
    let length = 384 * 1024;
    let mut stream = TcpStream::connect(proxy.address).expect("connecting");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    let head = format!(
        "POST /slow-reader HTTP/1.1\r\nHost: {origin}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("sending the head");
    stream
        .write_all(&vec![b'b'; length])
        .expect("sending the body");
    let answer = read_all(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.ends_with(&format!("got={length}")), "{answer}");
}
