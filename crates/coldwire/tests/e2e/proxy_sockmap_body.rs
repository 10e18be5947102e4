//! End-to-end tests of `coldwire proxy --data-path sockmap` for response bodies: the rest
//! of a long `Content-Length` body that is not stored goes through the kernel (a BPF
//! sockmap), then both connections carry on. On every backend: bodies byte-exact
//! (compared whole) one after another on one client connection and one origin connection; a
//! truncated origin body closes the client connection; HEAD, 304 and chunked answers do
//! not use the kernel path. Readiness backends must have used it (the `kernel_bodies`
//! counter); the io_uring completion backend does not offer it and splices through pipes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::{OriginRequest, Proxy, body_of, counter, read_request, spawn_server};

coldwire_testkit::backend_tests! {
    bodies_through_the_kernel_leave_both_connections_reusable,
    a_truncated_origin_body_closes_the_client_connection,
    head_304_and_chunked_answers_do_not_use_the_kernel,
}

/// What the origin counts: connections accepted, requests served.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: Mutex<Vec<String>>,
}

fn size_of(path: &str) -> usize {
    coldwire_testkit::origin::parameter(path, "n")
        .and_then(|value| value.parse().ok())
        .unwrap_or(1 << 20)
}

/// Routes: `/len?n=` a keep-alive `Content-Length` body, `/cut?n=` one announced at `n`
/// that ends at half, `/chunked?n=`, `/not-modified` (304); HEAD gets the head only.
fn serve(stream: TcpStream, counts: &Counts) {
    counts.connections.fetch_add(1, Ordering::SeqCst);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(OriginRequest { method, path, .. }) = read_request(&mut reader) {
        counts.requests.lock().unwrap().push(path.clone());
        let size = size_of(&path);
        let body = body_of(size);
        let route = path.split('?').next().unwrap_or("");
        let head_only = method == "HEAD";
        let result = match route {
            "/len" | "/cut" => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {size}\r\n\r\n"
                );
                let sent = if route == "/cut" { size / 2 } else { size };
                writer.write_all(head.as_bytes()).and_then(|()| {
                    if head_only {
                        Ok(())
                    } else {
                        writer.write_all(&body[..sent])
                    }
                })
            }
            "/chunked" => {
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                writer.write_all(head.as_bytes()).and_then(|()| {
                    write!(writer, "{size:x}\r\n")?;
                    writer.write_all(&body)?;
                    writer.write_all(b"\r\n0\r\n\r\n")
                })
            }
            "/not-modified" => {
                writer.write_all(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n")
            }
            _ => writer.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
        };
        if result.is_err() || route == "/cut" {
            return;
        }
    }
}

/// A keep-alive client connection to the proxy.
struct Client {
    reader: BufReader<TcpStream>,
    origin: SocketAddr,
}

/// A response: status, `Content-Length` (if any), body (None: the connection ended first).
struct Answer {
    status: u16,
    body: Option<Vec<u8>>,
}

impl Client {
    fn connect(proxy: &Proxy, origin: SocketAddr) -> Client {
        let address = proxy.url().trim_start_matches("http://").to_owned();
        let stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(180)))
            .unwrap();
        Client {
            reader: BufReader::new(stream),
            origin,
        }
    }

    fn ask(&mut self, method: &str, path: &str) -> Answer {
        let request = format!(
            "{method} http://{origin}{path} HTTP/1.1\r\nHost: {origin}\r\n\r\n",
            origin = self.origin
        );
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("{path}: no status line: {status_line:?}"));
        let mut length = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.contains("chunked"),
                _ => {}
            }
        }
        if method == "HEAD" || status == 304 {
            return Answer {
                status,
                body: Some(Vec::new()),
            };
        }
        let body = if chunked {
            self.read_chunked()
        } else {
            let mut body = vec![0u8; length.expect("a Content-Length")];
            self.reader.read_exact(&mut body).ok().map(|()| body)
        };
        Answer { status, body }
    }

    fn read_chunked(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                let mut end = String::new();
                self.reader.read_line(&mut end).ok()?;
                return Some(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..]).ok()?;
            let mut crlf = [0u8; 2];
            self.reader.read_exact(&mut crlf).ok()?;
        }
    }
}

/// Whether `body` is exactly the origin's body of `size` bytes (compared whole, without
/// printing megabytes on a mismatch).
fn is_origin_body(body: &[u8], size: usize) -> bool {
    body == body_of(size).as_slice()
}

fn start_proxy(backend: &str) -> Proxy {
    Proxy::start(
        backend,
        &[
            "--data-path",
            "sockmap",
            "--cache-bytes",
            "0",
            "--admin",
            "127.0.0.1:0",
        ],
    )
}

/// Whether the backend offers the kernel path (the readiness backends do).
fn offers_kernel_bodies(backend: &str) -> bool {
    backend != "uring"
}

/// The proxy's `kernel_bodies` counter once it has reached `at_least` (stats are
/// published now and then), or what it is after a while.
fn kernel_bodies(proxy: &Proxy, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let value = counter(&proxy.stats(), "loop", "kernel_bodies");
        if value >= at_least || Instant::now() >= deadline {
            return value;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// 1 MiB, 64 MiB, then short and long bodies again, all on one client connection and one
/// origin connection: byte-exact each time.
fn bodies_through_the_kernel_leave_both_connections_reusable(backend: &str) {
    let (origin, counts) = spawn_server(serve);
    let proxy = start_proxy(backend);
    let mut client = Client::connect(&proxy, origin);
    let sizes = [1usize << 20, 64 << 20, 10, 300_000, 70_000, 1 << 20];
    for (round, size) in sizes.iter().enumerate() {
        let path = format!("/len?n={size}&round={round}");
        let answer = client.ask("GET", &path);
        assert_eq!(answer.status, 200, "{path}");
        let body = answer.body.unwrap_or_else(|| panic!("{path}: cut short"));
        assert!(is_origin_body(&body, *size), "{path}: the body differs");
    }
    assert_eq!(
        counts.connections.load(Ordering::SeqCst),
        1,
        "the origin connection must be reused after each body"
    );
    let long = sizes.iter().filter(|size| **size >= 64 * 1024).count() as u64;
    let used = kernel_bodies(&proxy, long);
    if offers_kernel_bodies(backend) {
        assert_eq!(used, long, "every long body goes through the kernel");
    } else {
        assert_eq!(used, 0);
    }
}

/// The origin ends a 1 MiB body at half: the client gets at most what was sent and then
/// the end of its connection (never a reused connection with a short body); the next
/// client is served normally.
fn a_truncated_origin_body_closes_the_client_connection(backend: &str) {
    let (origin, _counts) = spawn_server(serve);
    let proxy = start_proxy(backend);
    let mut client = Client::connect(&proxy, origin);
    let answer = client.ask("GET", "/cut?n=1048576");
    assert_eq!(answer.status, 200);
    assert!(answer.body.is_none(), "the body must be cut short");
    let mut rest = Vec::new();
    let _ = client.reader.read_to_end(&mut rest);
    let mut next = Client::connect(&proxy, origin);
    let answer = next.ask("GET", "/len?n=200000");
    assert_eq!(answer.status, 200);
    assert!(is_origin_body(&answer.body.unwrap(), 200_000));
}

/// HEAD, 304 and a chunked body on one connection: none of them goes through the kernel
/// path (a long `Content-Length` body after them does, on readiness backends).
fn head_304_and_chunked_answers_do_not_use_the_kernel(backend: &str) {
    let (origin, _counts) = spawn_server(serve);
    let proxy = start_proxy(backend);
    let mut client = Client::connect(&proxy, origin);
    let head = client.ask("HEAD", "/len?n=1048576");
    assert_eq!(head.status, 200);
    let not_modified = client.ask("GET", "/not-modified");
    assert_eq!(not_modified.status, 304);
    let chunked = client.ask("GET", "/chunked?n=1048576");
    assert_eq!(chunked.status, 200);
    assert!(is_origin_body(
        &chunked.body.expect("the chunked body"),
        1 << 20
    ));
    assert_eq!(kernel_bodies(&proxy, 1), 0, "no kernel body yet");
    let long = client.ask("GET", "/len?n=1048576");
    assert!(is_origin_body(&long.body.unwrap(), 1 << 20));
    let expected = u64::from(offers_kernel_bodies(backend));
    assert_eq!(kernel_bodies(&proxy, expected), expected);
}
