//! End-to-end tests of the splice data path of `coldwire proxy` for bodies without a
//! `Content-Length`: chunked bodies (chunk data spliced, size lines, extensions and
//! trailers read in user space) and close-delimited bodies (spliced until the origin
//! closes), with and without a tee'd copy for the cache, on every I/O backend. What curl
//! receives must hash (SHA-256) like what the origin sent; a chunked body that ends early
//! must reach curl as an error and never be cached.
//!
//! The origin here is a small raw-socket server of its own (the shared test origin only
//! sends `Content-Length` bodies).

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use coldwire_testkit::{
    OriginRequest, Proxy, body_of, curl_output, curl_sha256, expected_sha256s, origin,
    read_request, spawn_server,
};

coldwire_testkit::backend_tests! {
    chunked_and_close_delimited_bodies_are_identical_through_splice,
    truncated_chunked_body_is_an_error_and_never_cached,
}

/// Chunk sizes the origin cycles through: short ones (copied) between long ones (spliced
/// at the threshold the tests set), a 1-byte chunk, a chunk of exactly the threshold.
const CHUNK_SIZES: [usize; 7] = [1, 70_000, 13, 300_000, 4096, 1_000_000, 16_384];

/// The splice threshold the tests run with.
const THRESHOLD: &str = "16384";

/// A test origin answering `/chunked?n=SIZE`, `/close?n=SIZE` and
/// `/chunked-cut?n=SIZE&reset=0|1` (a chunk announced longer than what is sent, then a
/// close or a reset). Counts requests per path.
struct RawOrigin {
    address: SocketAddr,
    requests: Arc<Mutex<HashMap<String, usize>>>,
}

impl RawOrigin {
    fn start() -> RawOrigin {
        let (address, requests) = spawn_server(serve);
        RawOrigin { address, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    fn requests(&self, path: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

fn parameter(path: &str, name: &str) -> Option<usize> {
    origin::parameter(path, name).and_then(|value| value.parse().ok())
}

/// Serves one connection: keep-alive for chunked answers, closed after the others.
fn serve(stream: TcpStream, requests: &Mutex<HashMap<String, usize>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(OriginRequest { path, .. }) = read_request(&mut reader) {
        *requests.lock().unwrap().entry(path.clone()).or_default() += 1;
        let size = parameter(&path, "n").unwrap_or(1 << 20);
        let body = body_of(size);
        let keep_going = match path.split('?').next().unwrap_or("") {
            "/chunked" => send_chunked(&mut writer, &body).is_ok(),
            "/close" => {
                let head =
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nConnection: close\r\n\r\n";
                let _ = writer.write_all(head.as_bytes());
                let _ = writer.write_all(&body);
                false
            }
            "/chunked-cut" => {
                let head = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n";
                let _ = writer.write_all(head.as_bytes());
                // A chunk announced twice as long as what follows.
                let _ = write!(writer, "{:x}\r\n", body.len() * 2);
                let _ = writer.write_all(&body);
                let _ = writer.flush();
                thread::sleep(Duration::from_millis(50));
                if parameter(&path, "reset") == Some(1) {
                    let socket = socket2::SockRef::from(&writer);
                    let _ = socket.set_linger(Some(Duration::ZERO));
                }
                false
            }
            _ => {
                let _ = writer.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                true
            }
        };
        if !keep_going {
            return;
        }
    }
}

/// `body` as chunks of [`CHUNK_SIZES`], an extension on some size lines, and a trailer.
fn send_chunked(writer: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    writer.write_all(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n",
    )?;
    let mut offset = 0;
    for (index, size) in CHUNK_SIZES.iter().cycle().enumerate() {
        if offset == body.len() {
            break;
        }
        let take = (*size).min(body.len() - offset);
        let extension = if index % 3 == 0 { ";piece=yes" } else { "" };
        write!(writer, "{take:x}{extension}\r\n")?;
        writer.write_all(&body[offset..offset + take])?;
        writer.write_all(b"\r\n")?;
        offset += take;
    }
    writer.write_all(b"0\r\nX-Body-End: yes\r\n\r\n")?;
    writer.flush()
}

/// 1 MiB and 64 MiB chunked and close-delimited bodies through `--data-path splice`
/// without and with the cache (tee): SHA-256 equal to the origin's, and a cached one
/// served again without asking the origin.
fn chunked_and_close_delimited_bodies_are_identical_through_splice(backend: &str) {
    let origin = RawOrigin::start();
    let directory = tempfile::tempdir().unwrap();
    let sizes = [1usize << 20, 64 << 20];
    let expected = expected_sha256s(directory.path(), &sizes);
    let variants: [(&str, &[&str]); 2] = [
        ("splice", &["--cache-bytes", "0"]),
        ("splice+tee", &["--max-object-bytes", "100000000"]),
    ];
    // (route, extra curl arguments, whether a second request may be a hit, largest size)
    let shapes: [(&str, &[&str], bool, usize); 3] = [
        ("/chunked", &[], true, usize::MAX),
        // A close-delimited answer to a client that closes too: spliced until the end.
        ("/close", &["-H", "Connection: close"], false, usize::MAX),
        // To a keep-alive client it is re-chunked (copied) instead; the `proxy` module covers
        // that path, here it only has to coexist.
        ("/close", &[], false, 1 << 20),
    ];
    for (variant, args) in variants {
        let mut proxy_args = vec!["--data-path", "splice", "--splice-threshold", THRESHOLD];
        proxy_args.extend_from_slice(args);
        let proxy = Proxy::start(backend, &proxy_args);
        let proxy_url = proxy.url();
        for (shape, (route, curl_args, may_hit, largest)) in shapes.iter().enumerate() {
            for (size, expected) in sizes.iter().zip(&expected) {
                if size > largest {
                    continue;
                }
                let path = format!("{route}?n={size}&variant={variant}&shape={shape}");
                let rounds = if variant == "splice+tee" && *may_hit {
                    2
                } else {
                    1
                };
                for round in 0..rounds {
                    // A generous time limit: 64 MiB through a debug build on a busy machine.
                    let mut all = vec!["--max-time", "180", "-x", &proxy_url];
                    all.extend_from_slice(curl_args);
                    let url = origin.url(&path);
                    all.push(&url);
                    let (code, received) = curl_sha256(directory.path(), &all);
                    let what = format!("{variant} {path} round {round}");
                    assert_eq!(code, 0, "curl failed: {what}");
                    assert_eq!(&received, expected, "{what}");
                }
                assert_eq!(
                    origin.requests(&path),
                    1,
                    "{variant} {path}: {rounds} requests should reach the origin once"
                );
            }
        }
    }
}

/// A chunked body whose origin closes (or resets) inside a long, spliced chunk: curl sees
/// an error, and the next request goes to the origin again (nothing was cached).
fn truncated_chunked_body_is_an_error_and_never_cached(backend: &str) {
    let origin = RawOrigin::start();
    let proxy = Proxy::start(
        backend,
        &[
            "--data-path",
            "splice",
            "--splice-threshold",
            THRESHOLD,
            "--max-object-bytes",
            "100000000",
        ],
    );
    let proxy_url = proxy.url();
    for reset in [0, 1] {
        let path = format!("/chunked-cut?n=300000&reset={reset}");
        for _ in 0..2 {
            let output = curl_output(&["-x", &proxy_url, &origin.url(&path)]);
            assert_ne!(
                output.code, 0,
                "{path}: curl must report the truncated body"
            );
            assert!(output.stdout.len() <= 300_000, "{path}: too many bytes");
        }
        assert_eq!(
            origin.requests(&path),
            2,
            "{path}: the truncated body must not be cached"
        );
    }
}
