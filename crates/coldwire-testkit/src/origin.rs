//! Test origins on 127.0.0.1 port 0, one thread per connection: [`spawn_server`] runs a
//! test's own connection handler; [`Origin`] is the proxy tests' origin, whose answers
//! the tests control by path (Cache-Control, ETag, Vary, a reset mid-body, echoed bodies,
//! slow and failing answers) and which counts what it receives; [`start_echo_server`] is a
//! tunnel's far end.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::body::body_of;
use crate::request::{OriginRequest, read_request};

/// Listens on 127.0.0.1, port 0, and runs `serve` for every connection on a thread of its
/// own, all sharing one `S` (what the test server counts); its address and that state.
pub fn spawn_server<S: Default + Send + Sync + 'static>(
    serve: fn(TcpStream, &S),
) -> (SocketAddr, Arc<S>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a test server");
    let address = listener.local_addr().expect("its address");
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

/// What the test origin saw.
#[derive(Default)]
pub struct Seen {
    /// Requests per path.
    pub requests: HashMap<String, usize>,
    /// Requests per path that carried If-None-Match or If-Modified-Since.
    pub conditional: HashMap<String, usize>,
}

/// The proxy tests' origin (its routes are listed in `answer`).
pub struct Origin {
    /// Its address.
    pub address: SocketAddr,
    /// What it saw.
    pub seen: Arc<Mutex<Seen>>,
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
    while let Some(request) = read_request(&mut reader) {
        let count = {
            let mut seen = seen.lock().unwrap();
            if request.headers.contains_key("if-none-match")
                || request.headers.contains_key("if-modified-since")
            {
                *seen.conditional.entry(request.path.clone()).or_default() += 1;
            }
            let count = seen.requests.entry(request.path.clone()).or_default();
            *count += 1;
            *count
        };
        if !answer(&mut writer, &request, count) {
            return;
        }
    }
}

/// Writes a response with `fields`, `Content-Length` and `body`; false if the write failed.
pub fn respond(
    writer: &mut TcpStream,
    status: &str,
    fields: &[(&str, String)],
    body: &[u8],
) -> bool {
    let mut head = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    writer.write_all(head.as_bytes()).is_ok() && writer.write_all(body).is_ok()
}

/// A query parameter's value.
pub fn parameter<'a>(path: &'a str, name: &str) -> Option<&'a str> {
    path.split(['?', '&'])
        .skip(1)
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// The origin's routes; returns false to close the connection.
fn answer(writer: &mut TcpStream, request: &OriginRequest, count: usize) -> bool {
    let OriginRequest {
        method,
        path,
        headers,
        body,
    } = request;
    let path = path.as_str();
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
