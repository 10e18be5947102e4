//! What `coldwire serve` writes back that an attacker chooses: the `Location` of its
//! directory redirects.

use coldwire_testkit::{DocumentRoot, ServerOptions, exchange};

/// A directory named like a host (`evil.test`) asked for as `//evil.test` was redirected
/// to `Location: //evil.test/` — a network-path reference, which browsers follow to
/// another host (an open redirect). The location now always starts with exactly one `/`.
pub fn a_directory_redirect_never_points_at_another_host(backend: &str) {
    let root = DocumentRoot::new();
    std::fs::create_dir_all(root.root().join("evil.test")).expect("a directory");
    let server = ServerOptions::new(backend, &root).start();
    for (target, location) in [
        ("/sub", "/sub/"),
        ("//evil.test", "/evil.test/"),
        ("///evil.test?x=1", "/evil.test/?x=1"),
        ("//sub", "/sub/"),
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        let response = exchange(&server, request.as_bytes());
        assert_eq!(response.status, 301, "{target}: {}", response.status_line);
        assert_eq!(response.header("location"), Some(location), "{target}");
    }
}

/// A client that sends its request and shuts down its sending side at once (`nc -N`)
/// got its answer, but when the request and the end of stream reached a kept connection
/// together (one edge on epoll: the server was busy) the server never saw the end: the
/// connection stayed open until `--idle-timeout`, and `nc -N` hung that long. Twenty kept
/// connections send a request and their end of stream while another client keeps the
/// loop busy: every one is answered and closed.
pub fn a_request_and_its_end_of_stream_together_are_answered_and_closed(backend: &str) {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    use std::time::Duration;

    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .flag("--idle-timeout", "60s")
        .start();
    let address = server.addr;
    let kept: Vec<TcpStream> = (0..20)
        .map(|_| {
            let stream = TcpStream::connect(address).expect("connecting");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("a timeout");
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // A busy loop: thousands of pipelined requests on another connection.
    let mut busy = TcpStream::connect(address).expect("connecting");
    let batch = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
    let reader = busy.try_clone().expect("a clone");
    let drain = std::thread::spawn(move || {
        let mut reader = reader;
        let _ = reader.set_read_timeout(Some(Duration::from_secs(10)));
        let mut sink = [0u8; 65536];
        while matches!(reader.read(&mut sink), Ok(read) if read > 0) {}
    });
    busy.write_all(&batch).expect("sending the batch");
    for mut stream in &kept {
        stream
            .write_all(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("sending");
        stream.shutdown(Shutdown::Write).expect("half-closing");
    }
    for mut stream in kept {
        let mut answer = Vec::new();
        let ended = stream.read_to_end(&mut answer).is_ok();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(ended, "not closed within 10 s after the answer: {answer}");
    }
    busy.shutdown(Shutdown::Both).expect("closing");
    drain.join().expect("the drain");
}
