//! Helpers for the proxy's end-to-end tests: a test origin whose answers the tests control
//! (Cache-Control, ETag, Vary, a reset mid-body, echoed bodies) and which counts what it
//! receives; starting the real `coldwire proxy` binary on port 0; curl through it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the test origin saw.
#[derive(Default)]
pub struct Seen {
    /// Requests per path.
    pub requests: HashMap<String, usize>,
    /// Requests per path that carried If-None-Match or If-Modified-Since.
    pub conditional: HashMap<String, usize>,
}

/// A test origin on 127.0.0.1:port-0, one thread per connection, keep-alive.
pub struct Origin {
    /// Its address.
    pub address: SocketAddr,
    /// What it saw.
    pub seen: Arc<Mutex<Seen>>,
}

/// A deterministic body of `length` bytes.
pub fn body_of(length: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Listens on 127.0.0.1, port 0, and runs `serve` for every connection on a thread of its
/// own, all sharing one `S` (what the test server counts); its address and that state.
pub fn spawn_server<S: Default + Send + Sync + 'static>(
    serve: fn(TcpStream, &S),
) -> (SocketAddr, Arc<S>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let state: Arc<S> = Arc::default();
    let shared = state.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let state = shared.clone();
            thread::spawn(move || serve(stream, &state));
        }
    });
    (address, state)
}

impl Origin {
    /// Starts the origin.
    pub fn start() -> Origin {
        let (address, seen) = spawn_server(serve_connection);
        Origin { address, seen }
    }

    /// Requests seen for `path`.
    pub fn requests(&self, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .requests
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// Conditional requests seen for `path`.
    pub fn conditional(&self, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .conditional
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

fn serve_connection(stream: TcpStream, seen: &Mutex<Seen>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let path = parts.next().unwrap_or("").to_owned();
        let mut headers: HashMap<String, String> = HashMap::new();
        loop {
            let mut field = String::new();
            if reader.read_line(&mut field).unwrap_or(0) == 0 {
                return;
            }
            let field = field.trim_end();
            if field.is_empty() {
                break;
            }
            if let Some((name, value)) = field.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let body = read_body(&mut reader, &headers);
        let count = {
            let mut seen = seen.lock().unwrap();
            if headers.contains_key("if-none-match") || headers.contains_key("if-modified-since") {
                *seen.conditional.entry(path.clone()).or_default() += 1;
            }
            let count = seen.requests.entry(path.clone()).or_default();
            *count += 1;
            *count
        };
        let request = Request {
            method: &method,
            path: &path,
            headers: &headers,
            body: &body,
            count,
        };
        if !answer(&mut writer, &request) {
            return;
        }
    }
}

fn read_body(reader: &mut BufReader<TcpStream>, headers: &HashMap<String, String>) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(length) = headers
        .get("content-length")
        .and_then(|value| value.parse::<usize>().ok())
    {
        body.resize(length, 0);
        let _ = reader.read_exact(&mut body);
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|value| value.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if size == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; size + 2];
            let _ = reader.read_exact(&mut chunk);
            body.extend_from_slice(&chunk[..size]);
        }
    }
    body
}

fn respond(writer: &mut TcpStream, status: &str, fields: &[(&str, String)], body: &[u8]) -> bool {
    let mut head = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    writer.write_all(head.as_bytes()).is_ok() && writer.write_all(body).is_ok()
}

/// A request as the test origin saw it.
struct Request<'a> {
    method: &'a str,
    path: &'a str,
    headers: &'a HashMap<String, String>,
    body: &'a [u8],
    /// How many requests for this path (query included) arrived, this one included.
    count: usize,
}

/// A query parameter's value.
fn parameter<'a>(path: &'a str, name: &str) -> Option<&'a str> {
    path.split(['?', '&'])
        .skip(1)
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// The origin's routes; returns false to close the connection.
fn answer(writer: &mut TcpStream, request: &Request<'_>) -> bool {
    let Request {
        method,
        path,
        headers,
        body,
        count,
    } = *request;
    let route = path.split('?').next().unwrap_or("");
    match route {
        // Always stale, may be served stale for 60 s while revalidated; the 304 takes 2 s
        // and adds a field, so a test sees when the background revalidation landed.
        "/swr" => {
            let fields = [
                (
                    "Cache-Control",
                    "max-age=0, stale-while-revalidate=60".to_owned(),
                ),
                ("ETag", "\"s1\"".to_owned()),
            ];
            if headers
                .get("if-none-match")
                .is_some_and(|tag| tag == "\"s1\"")
            {
                thread::sleep(Duration::from_secs(2));
                let head = "HTTP/1.1 304 Not Modified\r\nETag: \"s1\"\r\n\
                            Cache-Control: max-age=0, stale-while-revalidate=60\r\n\
                            X-Refreshed: yes\r\n\r\n";
                writer.write_all(head.as_bytes()).is_ok()
            } else {
                respond(writer, "200 OK", &fields, b"swr body")
            }
        }
        // Answers after 1.5 s, cacheable unless `?nostore`.
        "/slow" => {
            thread::sleep(Duration::from_millis(1500));
            let control = if path.contains("nostore") {
                "no-store"
            } else {
                "max-age=60"
            };
            respond(
                writer,
                "200 OK",
                &[("Cache-Control", control.into())],
                b"slow body",
            )
        }
        // 200 with Cache-Control from `cc` the first time, 500 afterwards.
        "/flaky" => {
            if count == 1 {
                let control = parameter(path, "cc")
                    .unwrap_or("max-age=0")
                    .replace('_', " ");
                respond(
                    writer,
                    "200 OK",
                    &[("Cache-Control", control), ("ETag", "\"f1\"".into())],
                    b"flaky body",
                )
            } else {
                respond(writer, "500 Internal Server Error", &[], b"origin broke")
            }
        }
        "/cacheable" => respond(
            writer,
            "200 OK",
            &[
                ("Cache-Control", "max-age=60".into()),
                ("ETag", "\"v1\"".into()),
            ],
            b"cacheable body",
        ),
        "/revalidate" => {
            let fields = [
                ("Cache-Control", "max-age=0".to_owned()),
                ("ETag", "\"r1\"".to_owned()),
                ("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT".to_owned()),
            ];
            if headers
                .get("if-none-match")
                .is_some_and(|value| value == "\"r1\"")
            {
                let mut head = String::from("HTTP/1.1 304 Not Modified\r\n");
                for (name, value) in &fields {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                writer.write_all(head.as_bytes()).is_ok()
            } else {
                respond(writer, "200 OK", &fields, b"revalidated body")
            }
        }
        "/nostore" => respond(
            writer,
            "200 OK",
            &[("Cache-Control", "no-store".into())],
            format!("fresh {}", Instant::now().elapsed().as_nanos()).as_bytes(),
        ),
        "/vary" => {
            let language = headers.get("accept-language").cloned().unwrap_or_default();
            respond(
                writer,
                "200 OK",
                &[
                    ("Cache-Control", "max-age=60".into()),
                    ("Vary", "Accept-Language".into()),
                ],
                format!("language={language}").as_bytes(),
            )
        }
        "/echo" => respond(writer, "200 OK", &[("X-Method", method.to_owned())], body),
        "/headers" => {
            let mut names: Vec<String> = headers
                .iter()
                .map(|(name, value)| format!("{name}: {value}"))
                .collect();
            names.sort();
            respond(
                writer,
                "200 OK",
                &[("Cache-Control", "no-store".into())],
                names.join("\n").as_bytes(),
            )
        }
        "/big" => {
            let length: usize = path
                .split(['?', '&'])
                .find_map(|parameter| parameter.strip_prefix("n="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(1 << 20);
            respond(
                writer,
                "200 OK",
                &[("Cache-Control", "max-age=60".into())],
                &body_of(length),
            )
        }
        "/reset" => {
            let head =
                "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 100000\r\n\r\n";
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(&body_of(1000));
            let _ = writer.flush();
            thread::sleep(Duration::from_millis(50));
            // SO_LINGER 0: close with a reset.
            let socket = socket2::SockRef::from(&*writer);
            let _ = socket.set_linger(Some(Duration::ZERO));
            false
        }
        "/close-delimited" => {
            let _ = writer.write_all(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nConnection: close\r\n\r\nuntil the end");
            false
        }
        _ => respond(writer, "404 Not Found", &[], b"no such route"),
    }
}

/// A running `coldwire proxy`.
pub struct Proxy {
    child: Child,
    /// Its address.
    pub address: SocketAddr,
    /// The stats URL, when started with `--admin`.
    pub stats_url: Option<String>,
}

impl Proxy {
    /// Starts the binary with `args` on 127.0.0.1:0 and the backend.
    pub fn start(backend: &str, args: &[&str]) -> Proxy {
        Proxy::start_on("127.0.0.1:0", backend, args)
    }

    /// Starts the binary listening on `listen`.
    pub fn start_on(listen: &str, backend: &str, args: &[&str]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_coldwire"))
            .args([
                "proxy",
                "--listen",
                listen,
                "--io",
                backend,
                "--workers",
                "1",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting coldwire proxy");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        let address = line
            .trim()
            .strip_prefix("proxy listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        let mut stats_url = None;
        if args.contains(&"--admin") {
            let mut line = String::new();
            lines.read_line(&mut line).unwrap();
            stats_url = line.trim().strip_prefix("stats on ").map(str::to_owned);
        }
        Proxy {
            child,
            address,
            stats_url,
        }
    }

    /// `http://ADDRESS` for `curl -x`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// curl output, status and stderr.
pub struct CurlOutput {
    /// Exit code.
    pub code: i32,
    /// Head and body (with -i) or body.
    pub stdout: Vec<u8>,
}

/// Runs curl (`-sS --max-time 20`) with `args`.
pub fn curl(args: &[&str]) -> CurlOutput {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("these tests need curl on PATH");
    CurlOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
    }
}

/// The SHA-256 (hex) of the file at `path`, from `sha256sum`: large bodies are compared by
/// hash rather than held in memory twice.
pub fn sha256_of_file(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils)");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Writes [`body_of`] each of `sizes` into `directory`; their SHA-256s, in order: what such
/// a body must hash to after the proxy.
pub fn expected_sha256s(directory: &Path, sizes: &[usize]) -> Vec<String> {
    sizes
        .iter()
        .map(|size| {
            let path = directory.join(format!("expected-{size}"));
            std::fs::write(&path, body_of(*size)).unwrap();
            sha256_of_file(&path)
        })
        .collect()
}

/// Runs curl with `args`, the body written to `directory/received`: its exit code and the
/// SHA-256 of what it received.
pub fn curl_sha256(directory: &Path, args: &[&str]) -> (i32, String) {
    let received = directory.join("received");
    let mut all = vec!["-o", received.to_str().unwrap()];
    all.extend_from_slice(args);
    let output = curl(&all);
    (output.code, sha256_of_file(&received))
}

/// `curl -i -x PROXY ARGS URL` → (status, head text, body).
pub fn via_proxy(proxy: &Proxy, args: &[&str], url: &str) -> (u16, String, Vec<u8>) {
    let proxy_url = proxy.url();
    let mut all = vec!["-i", "-x", &proxy_url[..]];
    all.extend_from_slice(args);
    all.push(url);
    let output = curl(&all);
    assert_eq!(output.code, 0, "curl {all:?} failed");
    let raw = output.stdout;
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, head, raw[end + 4..].to_vec())
}

/// A header's value in a head text.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Connects to the proxy with a timeout.
pub fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Whether `--io NAME` works here; io_uring may be switched off or filtered (then this
/// prints `skipped: <reason>`), every other backend must work.
pub fn backend_available(name: &str) -> bool {
    let backend: coldwire_io::Backend = name.parse().expect("a backend name");
    let Err(reason) = backend.probe() else {
        return true;
    };
    assert!(
        name.starts_with("uring"),
        "{name} does not work here: {reason}"
    );
    println!("skipped: {name} is unavailable here: {reason}");
    false
}

/// A TCP echo server on 127.0.0.1:port-0 (a tunnel's far end): every byte comes back.
pub fn start_echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
                let mut buffer = [0u8; 4096];
                loop {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => {
                            if stream.write_all(&buffer[..read]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    address
}

/// Sends `CONNECT target` on a new connection to the proxy; returns the connection and
/// the answer's head (and any body bytes that came with it).
pub fn connect_through(proxy: &Proxy, target: &str) -> (TcpStream, String) {
    let mut stream = connect(proxy.address);
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
        match read_once(&mut stream, &mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) => {
                head.extend_from_slice(b"<end of stream>");
                break;
            }
            Err(error) => {
                head.extend_from_slice(format!("<{error}>").as_bytes());
                break;
            }
        }
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

/// One `read`, retried when a signal interrupts it (the io_uring probe in this test
/// process can make blocking reads return `EINTR`).
pub fn read_once(stream: &mut TcpStream, buffer: &mut [u8]) -> std::io::Result<usize> {
    for _ in 0..100 {
        match stream.read(buffer) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
    stream.read(buffer)
}

/// Reads until the connection closes (bounded by the stream's read timeout).
pub fn read_rest(stream: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    rest
}
