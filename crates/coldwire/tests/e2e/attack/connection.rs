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
