//! `coldwire serve` as an operator watches it: the stats endpoint, the access log (Common
//! Log Format), and graceful shutdown on SIGTERM.

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::{
    DocumentRoot, READ_TIMEOUT, ServerOptions, counter, curl, exchange, get_request,
    pseudo_random_bytes, read_response, read_until_closed, split_response,
};

// ---------------------------------------------------------------------------------------
// Stats endpoint

pub(super) fn stats_count_requests_and_name_the_backend(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).admin().start();
    const REQUESTS: u64 = 7;
    let mut stream = server.connect();
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    for _ in 0..REQUESTS {
        stream
            .write_all(&get_request("/small.txt"))
            .expect("sending");
        let response = read_response(&mut reader, false).expect("response");
        assert_eq!(response.status, 200);
    }
    let requests = server.wait_for_total("http", "requests", Duration::from_secs(2), |n| {
        n >= REQUESTS
    });
    assert!(requests >= REQUESTS, "total.http.requests = {requests}");
    let stats = server.stats();
    assert_eq!(stats["schema"], 2, "schema in {stats}");
    assert_eq!(stats["backend"], backend, "backend in {stats}");
    assert_eq!(stats["workers"], 1, "workers in {stats}");
    assert!(counter(&stats, "loop", "accepted") >= 1, "{stats}");
    assert!(
        stats["total"]["http"]["responses"]["2xx"]
            .as_u64()
            .is_some_and(|ok| ok >= REQUESTS),
        "2xx responses in {stats}"
    );
    assert!(
        counter(&stats, "http", "body_bytes") >= REQUESTS * root.small.len() as u64,
        "{stats}"
    );
}

// ---------------------------------------------------------------------------------------
// Access log

pub(super) fn access_log_has_a_common_log_format_line_per_request(backend: &str) {
    let root = DocumentRoot::new();
    let log = root.scratch("access.log");
    let mut server = ServerOptions::new(backend, &root)
        .flag("--access-log", &log)
        .start();
    let body = curl(&["--fail", &server.url("/index.html")]);
    assert_eq!(body, root.index);
    server.terminate();
    let status = server.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "exit status {status}");
    let text = std::fs::read_to_string(&log).expect("reading the access log");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one request, one line: {text:?}");
    assert!(
        is_clf_line(lines[0], "GET /index.html HTTP/1.1", 200, root.index.len()),
        "not the expected Common Log Format line: {:?}",
        lines[0]
    );
}

// ---------------------------------------------------------------------------------------
// Graceful shutdown

pub(super) fn sigterm_lets_a_slow_download_finish_then_exits_zero(backend: &str) {
    use socket2::{Domain, Socket, Type};
    let root = DocumentRoot::new();
    // On loopback the kernel takes up to 4 MiB (tcp_wmem) into one socket's send buffer,
    // so a 1 MiB response would already be "sent" when the signal arrives; 8 MiB is still
    // in the server's hands, which is what this test is about.
    let huge = pseudo_random_bytes(8 * 1024 * 1024, 0x5eed_8192);
    std::fs::write(root.root().join("huge.bin"), &huge).expect("writing huge.bin");
    let mut server = ServerOptions::new(backend, &root).admin().start();
    // A small receive window keeps most of the body on the server's side while we dawdle.
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket.connect(&server.addr.into()).expect("connect");
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("timeout");
    stream
        .write_all(&get_request("/huge.bin"))
        .expect("sending the request");
    let mut received = vec![0u8; 4096];
    stream
        .read_exact(&mut received)
        .expect("the first bytes of the download");
    thread::sleep(Duration::from_millis(100));
    let sent = server.total("loop", "bytes_sent");
    assert!(
        sent < huge.len() as u64,
        "the server already sent {sent} bytes: the response is not in flight"
    );
    server.terminate();
    // New connections are refused (or closed at once) while the download goes on. The
    // signal is handled asynchronously, so a connection made in the first instants may
    // still be accepted as usual: retry (bounded) until one is turned away.
    let asked = Instant::now();
    let mut attempts = 0;
    let turned_away = loop {
        attempts += 1;
        match TcpStream::connect_timeout(&server.addr, Duration::from_millis(500)) {
            // Reset: the handshake completed just before the listener closed.
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
                ) =>
            {
                break true;
            }
            Err(error) => panic!("connecting after SIGTERM: {error}"),
            Ok(mut late) => {
                late.set_read_timeout(Some(Duration::from_millis(100)))
                    .expect("timeout");
                let mut byte = [0u8; 1];
                match late.read(&mut byte) {
                    Ok(0) => break true,
                    Err(error) if error.kind() == ErrorKind::ConnectionReset => break true,
                    Ok(_) => panic!("the server sent data on a connection that sent nothing"),
                    Err(_) => {}
                }
            }
        }
        if asked.elapsed() >= Duration::from_secs(2) || attempts >= 50 {
            break false;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert!(
        turned_away,
        "{attempts} new connections in {:?} after SIGTERM were all accepted and left open",
        asked.elapsed()
    );
    let (rest, clean) = read_until_closed(&mut stream).expect("the rest of the download");
    received.extend_from_slice(&rest);
    assert!(clean, "the download was reset");
    let (response, body) = split_response(&received);
    assert_eq!(response.status, 200);
    assert_eq!(body.len(), huge.len(), "downloaded length");
    assert!(body == huge, "the download is not byte-identical");
    let status = server.wait_exit(Duration::from_secs(5));
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        server.stderr_text()
    );
}

pub(super) fn sigterm_stops_the_server_after_its_last_connection_closed(backend: &str) {
    let root = DocumentRoot::new();
    let mut server = ServerOptions::new(backend, &root).admin().start();
    let response = exchange(
        &server,
        b"GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(response.status, 200);
    let open = server.wait_for_total("loop", "open_connections", Duration::from_secs(2), |n| {
        n == 0
    });
    assert_eq!(open, 0, "the closed connection is still counted as open");
    server.terminate();
    let status = server.wait_exit(Duration::from_secs(5));
    assert!(status.success(), "exit status {status}");
}

/// Checks one Common Log Format line:
/// `127.0.0.1 - - [dd/Mon/yyyy:hh:mm:ss +0000] "REQUEST" STATUS BYTES`.
pub fn is_clf_line(line: &str, request: &str, status: u16, bytes: usize) -> bool {
    let Some(rest) = line.strip_prefix("127.0.0.1 - - [") else {
        return false;
    };
    let Some((date, rest)) = rest.split_once("] ") else {
        return false;
    };
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let date_ok = date.len() == 26
        && date.is_char_boundary(3)
        && date.is_char_boundary(6)
        && months.contains(&&date[3..6])
        && date
            .char_indices()
            .filter(|&(index, _)| !(3..6).contains(&index))
            .all(|(index, character)| match index {
                2 | 6 => character == '/',
                11 | 14 | 17 => character == ':',
                20 => character == ' ',
                21 => character == '+',
                _ => character.is_ascii_digit(),
            });
    date_ok && rest == format!("\"{request}\" {status} {bytes}")
}
