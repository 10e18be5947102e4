//! End-to-end tests of `coldwire serve`: the real binary serves a temporary document root
//! and is checked from outside, with the real `curl` and with raw sockets — file bodies byte
//! for byte, HEAD, keep-alive, pipelining, ranges, conditional requests, redirects and
//! errors, path traversal, request-head limits and deadlines, thousands of idle
//! connections, the stats endpoint, the access log and graceful shutdown. Every test runs
//! against every I/O backend (select, poll, epoll, uring-poll, uring) through `backend_tests!`;
//! an io_uring backend the kernel does not allow prints `skipped: <reason>`.

mod support;

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use support::{
    DocumentRoot, SECRET, ServerOptions, counter, curl, curl_response, exchange, get_request,
    raise_open_files_limit, read_response, read_until_closed, split_response,
};

/// Generates one module per backend, each with one `#[test]` per generic test function
/// below, called with the backend's name (`--io` value).
macro_rules! backend_tests {
    ($($backend:ident),+ $(,)?) => {
        $(backend_tests!(@module $backend [
            curl_downloads_every_file_byte_for_byte,
            curl_head_gives_the_headers_and_no_body,
            curl_reuses_one_connection_for_two_urls,
            curl_range_gets_206_with_exactly_those_bytes,
            curl_unsatisfiable_range_gets_416_with_the_full_length,
            curl_if_none_match_with_the_etag_gets_304_without_body,
            curl_if_modified_since_last_modified_gets_304,
            curl_directory_without_slash_is_redirected_to_slash,
            curl_directory_with_slash_serves_its_index,
            curl_missing_file_gets_404,
            curl_post_gets_405_allowing_get_and_head,
            hundred_pipelined_requests_in_one_write_are_answered_in_order,
            thousand_pipelined_requests_over_many_buffers_are_all_answered,
            http10_request_is_answered_then_the_server_closes,
            http10_keep_alive_request_keeps_the_connection_open,
            traversal_attempts_never_reveal_files_outside_the_root,
            symlink_out_of_the_root_is_refused_and_symlink_inside_is_served,
            twenty_kib_request_header_gets_431,
            trickled_request_head_is_cut_off_at_the_header_deadline,
            idle_connection_is_not_cut_off_by_the_header_deadline,
            five_thousand_idle_connections_do_not_keep_a_new_client_waiting,
            stats_count_requests_and_name_the_backend,
            access_log_has_a_common_log_format_line_per_request,
            sigterm_lets_a_slow_download_finish_then_exits_zero,
            sigterm_stops_the_server_after_its_last_connection_closed,
            garbage_request_line_gets_400_and_others_are_still_served,
            content_length_with_transfer_encoding_gets_400,
            running_out_of_descriptors_pauses_accepting_without_spinning,
            connection_limit_defers_new_connections_until_one_closes,
            stalled_reader_is_dropped_after_the_write_timeout_but_a_slow_one_is_not,
        ]);)+
    };
    (@module $backend:ident [$($test:ident),+ $(,)?]) => {
        mod $backend {
            $(
                #[test]
                fn $test() {
                    // Module names use '_', `--io` names '-' (uring_poll → uring-poll).
                    let name = stringify!($backend).replace('_', "-");
                    if !super::support::backend_available(&name) {
                        return;
                    }
                    super::$test(&name);
                }
            )+
        }
    };
}

backend_tests! { select, poll, epoll, uring_poll, uring }

// ---------------------------------------------------------------------------------------
// curl: the real client

fn curl_downloads_every_file_byte_for_byte(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for file in root.served_files() {
        let body = curl(&["--fail", &server.url(file.url_path)]);
        assert_eq!(
            body.len(),
            file.contents.len(),
            "length of {} via curl",
            file.url_path
        );
        assert!(
            body == file.contents,
            "body of {} via curl differs from the file",
            file.url_path
        );
    }
}

fn curl_head_gives_the_headers_and_no_body(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for (path, length) in [
        ("/small.txt", root.small.len()),
        ("/large.bin", root.large.len()),
    ] {
        let raw = curl(&["-I", &server.url(path)]);
        let (response, rest) = split_response(&raw);
        assert_eq!(
            response.status, 200,
            "HEAD {path}: {}",
            response.status_line
        );
        assert_eq!(response.content_length(), length as u64, "HEAD {path}");
        assert!(response.header("last-modified").is_some(), "HEAD {path}");
        assert!(response.header("etag").is_some(), "HEAD {path}");
        assert!(rest.is_empty(), "curl -I printed more than headers");
    }
    // curl -I never reads a body, so check on the wire that none is sent: a GET pipelined
    // behind the HEAD must be answered right after the HEAD's blank line.
    let mut stream = server.connect();
    let mut requests = b"HEAD /large.bin HTTP/1.1\r\nHost: test\r\n\r\n".to_vec();
    requests.extend_from_slice(&get_request("/index.html"));
    stream.write_all(&requests).expect("sending HEAD then GET");
    let mut reader = BufReader::new(stream);
    let head = read_response(&mut reader, true).expect("the HEAD response");
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), root.large.len() as u64);
    let get = read_response(&mut reader, false).expect("the GET response right after HEAD");
    assert_eq!(get.status, 200, "{}", get.status_line);
    assert_eq!(get.body, root.index, "the response after HEAD");
}

fn curl_reuses_one_connection_for_two_urls(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let out = curl(&[
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{num_connects}\\n",
        &server.url("/small.txt"),
        &server.url("/medium.bin"),
    ]);
    let text = String::from_utf8(out).expect("curl -w output is text");
    let transfers: Vec<(&str, u32)> = text
        .lines()
        .map(|line| {
            let (code, connects) = line.split_once(' ').expect("code and connects");
            (code, connects.parse().expect("a number of connects"))
        })
        .collect();
    assert_eq!(transfers.len(), 2, "curl output: {text:?}");
    assert!(
        transfers.iter().all(|&(code, _)| code == "200"),
        "curl output: {text:?}"
    );
    let connects: u32 = transfers.iter().map(|&(_, connects)| connects).sum();
    assert_eq!(
        connects, 1,
        "two URLs on one server should take one connection; curl output: {text:?}"
    );
}

fn curl_range_gets_206_with_exactly_those_bytes(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    // small.txt is served from memory, large.bin with sendfile: both paths.
    for (path, contents) in [("/small.txt", &root.small), ("/large.bin", &root.large)] {
        let response = curl_response(&["-r", "100-199"], &server.url(path));
        assert_eq!(response.status, 206, "{path}: {}", response.status_line);
        assert_eq!(
            response.header("content-range"),
            Some(format!("bytes 100-199/{}", contents.len()).as_str()),
            "{path}"
        );
        assert_eq!(response.content_length(), 100, "{path}");
        assert!(
            response.body == contents[100..200],
            "{path}: wrong 100 bytes"
        );
    }
    let tail = curl_response(&["-r", "-50"], &server.url("/large.bin"));
    assert_eq!(tail.status, 206, "suffix range: {}", tail.status_line);
    assert!(
        tail.body == root.large[root.large.len() - 50..],
        "suffix range body"
    );
}

fn curl_unsatisfiable_range_gets_416_with_the_full_length(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for (path, length) in [
        ("/small.txt", root.small.len()),
        ("/large.bin", root.large.len()),
    ] {
        let response = curl_response(&["-r", "2000000-2000099"], &server.url(path));
        assert_eq!(response.status, 416, "{path}: {}", response.status_line);
        assert_eq!(
            response.header("content-range"),
            Some(format!("bytes */{length}").as_str()),
            "{path}"
        );
        assert!(response.body.is_empty(), "{path}: 416 with a body");
    }
}

fn curl_if_none_match_with_the_etag_gets_304_without_body(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for path in ["/small.txt", "/large.bin"] {
        let first = curl_response(&[], &server.url(path));
        assert_eq!(first.status, 200, "{path}");
        let etag = first.header("etag").expect("an ETag on 200").to_owned();
        let second = curl_response(
            &["-H", &format!("If-None-Match: {etag}")],
            &server.url(path),
        );
        assert_eq!(second.status, 304, "{path}: {}", second.status_line);
        assert!(second.body.is_empty(), "{path}: 304 with a body");
        assert_eq!(second.header("etag"), Some(etag.as_str()), "{path}");
        let other = curl_response(
            &["-H", "If-None-Match: \"not-the-etag\""],
            &server.url(path),
        );
        assert_eq!(other.status, 200, "{path} with a different ETag");
    }
}

fn curl_if_modified_since_last_modified_gets_304(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let first = curl_response(&[], &server.url("/medium.bin"));
    assert_eq!(first.status, 200);
    let last_modified = first
        .header("last-modified")
        .expect("a Last-Modified on 200")
        .to_owned();
    let second = curl_response(
        &["-H", &format!("If-Modified-Since: {last_modified}")],
        &server.url("/medium.bin"),
    );
    assert_eq!(second.status, 304, "{}", second.status_line);
    assert!(second.body.is_empty(), "304 with a body");
    let old = curl_response(
        &["-H", "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT"],
        &server.url("/medium.bin"),
    );
    assert_eq!(old.status, 200, "modified since 2000");
    assert!(old.body == root.medium);
}

fn curl_directory_without_slash_is_redirected_to_slash(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let response = curl_response(&[], &server.url("/sub"));
    assert_eq!(response.status, 301, "{}", response.status_line);
    let location = response.header("location").expect("a Location header");
    assert!(
        location.ends_with("/sub/"),
        "Location {location:?} should name the directory with its slash"
    );
    let followed = curl(&["-L", "--fail", &server.url("/sub")]);
    assert_eq!(followed, root.sub_index, "following the redirect");
}

fn curl_directory_with_slash_serves_its_index(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let response = curl_response(&[], &server.url("/sub/"));
    assert_eq!(response.status, 200, "{}", response.status_line);
    assert_eq!(response.body, root.sub_index);
    assert!(
        response
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/html")),
        "Content-Type {:?}",
        response.header("content-type")
    );
    let top = curl_response(&[], &server.url("/"));
    assert_eq!(top.status, 200);
    assert_eq!(top.body, root.index);
}

fn curl_missing_file_gets_404(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for path in ["/missing.html", "/sub/missing.txt", "/small.txt/more"] {
        let response = curl_response(&[], &server.url(path));
        assert_eq!(response.status, 404, "{path}: {}", response.status_line);
        assert_eq!(response.content_length(), response.body.len() as u64);
    }
}

fn curl_post_gets_405_allowing_get_and_head(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for extra in [&["-X", "POST"][..], &["-d", "field=value"][..]] {
        let response = curl_response(extra, &server.url("/index.html"));
        assert_eq!(response.status, 405, "{extra:?}: {}", response.status_line);
        assert_eq!(response.header("allow"), Some("GET, HEAD"), "{extra:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Raw sockets: pipelining and HTTP/1.0

fn hundred_pipelined_requests_in_one_write_are_answered_in_order(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let files = [
        ("/index.html", &root.index),
        ("/small.txt", &root.small),
        ("/medium.bin", &root.medium),
    ];
    let mut batch = Vec::new();
    for number in 0..100 {
        let (path, _) = files[number % files.len()];
        batch.extend_from_slice(&get_request(&format!("{path}?n={number}")));
    }
    let mut stream = server.connect();
    let written = stream.write(&batch).expect("writing 100 requests");
    assert_eq!(
        written,
        batch.len(),
        "the batch did not go out in one write"
    );
    let mut reader = BufReader::new(stream);
    for number in 0..100 {
        let (path, contents) = files[number % files.len()];
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("response {number} ({path}): {error}"));
        assert_eq!(response.status, 200, "response {number}");
        assert_eq!(
            response.content_length(),
            contents.len() as u64,
            "response {number} should be {path}"
        );
        assert!(
            response.body == **contents,
            "response {number}: body is not {path}"
        );
    }
}

fn thousand_pipelined_requests_over_many_buffers_are_all_answered(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    const COUNT: usize = 1_000;
    let batch: Vec<u8> = (0..COUNT)
        .flat_map(|number| get_request(&format!("/index.html?n={number}")))
        .collect();
    assert!(
        batch.len() > 32 * 1024,
        "the batch should span several buffers"
    );
    let mut stream = server.connect();
    let mut writer = stream.try_clone().expect("clone");
    let sending = thread::spawn(move || writer.write_all(&batch));
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    for number in 0..COUNT {
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("response {number} of {COUNT}: {error}"));
        assert_eq!(
            response.status, 200,
            "response {number} of {COUNT}: {}",
            response.status_line
        );
        assert_eq!(response.body, root.index, "response {number}");
    }
    sending
        .join()
        .expect("the writer thread")
        .expect("writing the requests");
    stream
        .write_all(&get_request("/small.txt"))
        .expect("one more");
    let last = read_response(&mut reader, false).expect("the response after the batch");
    assert_eq!(last.body, root.small);
}

fn http10_request_is_answered_then_the_server_closes(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let mut stream = server.connect();
    stream
        .write_all(b"GET /small.txt HTTP/1.0\r\n\r\n")
        .expect("sending");
    let (raw, clean) = read_until_closed(&mut stream).expect("the server should close");
    let (response, body) = split_response(&raw);
    assert_eq!(response.status, 200, "{}", response.status_line);
    assert_eq!(body, root.small, "HTTP/1.0 body");
    assert!(clean, "the connection was reset instead of closed");
    assert!(
        response
            .header("connection")
            .is_none_or(|value| value.eq_ignore_ascii_case("close")),
        "Connection: {:?}",
        response.header("connection")
    );
}

fn http10_keep_alive_request_keeps_the_connection_open(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let mut stream = server.connect();
    let mut reader = BufReader::new(stream.try_clone().expect("cloning the stream"));
    for (path, contents) in [("/small.txt", &root.small), ("/medium.bin", &root.medium)] {
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes())
            .expect("sending");
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("{path} on the kept-alive connection: {error}"));
        assert_eq!(response.status, 200, "{path}");
        assert!(
            response
                .header("connection")
                .is_some_and(|value| value.eq_ignore_ascii_case("keep-alive")),
            "{path}: Connection: {:?}",
            response.header("connection")
        );
        assert!(response.body == **contents, "{path} body");
    }
}

// ---------------------------------------------------------------------------------------
// Path traversal

fn traversal_attempts_never_reveal_files_outside_the_root(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    // secret.txt sits right next to the root directory, so each `..` escape below would
    // reach it if the server let it through. 400 is accepted only where the target itself
    // is malformed (a NUL byte, a target not starting with '/').
    let refused: &[u16] = &[403, 404];
    let malformed: &[u16] = &[400, 403, 404];
    let cases: &[(&str, &[u16])] = &[
        ("/../secret.txt", refused),
        ("/%2e%2e/secret.txt", refused),
        ("/%2E%2E/%2e%2e/etc/passwd", refused),
        ("/%2e%2e%2fsecret.txt", refused),
        ("/sub/../../secret.txt", refused),
        ("/sub/%2e%2e/%2e%2e/secret.txt", refused),
        ("/index.html%00.txt", malformed),
        ("/escape.txt", refused),
        ("//etc/passwd", refused),
        ("/../../../../../../etc/passwd", refused),
        ("http://x/../../etc/passwd", refused),
        ("http://x/../secret.txt", refused),
        ("/..\\secret.txt", refused),
        ("/..%5csecret.txt", refused),
        ("/sub\\..\\..\\secret.txt", refused),
        ("/sub/..%5c..%5csecret.txt", refused),
        ("\\..\\secret.txt", malformed),
    ];
    for &(target, allowed) in cases {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let response = exchange(&server, request.as_bytes());
        let body = response.body_text();
        assert!(
            !body.contains(SECRET) && !body.contains("root:"),
            "GET {target} revealed a file outside the root: {body:?}"
        );
        assert!(
            allowed.contains(&response.status),
            "GET {target}: got {:?}, want one of {allowed:?}",
            response.status_line
        );
    }
}

fn symlink_out_of_the_root_is_refused_and_symlink_inside_is_served(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let outward = exchange(&server, &get_request("/escape.txt"));
    assert!(
        [403, 404].contains(&outward.status),
        "outward symlink: {}",
        outward.status_line
    );
    assert!(!outward.body_text().contains(SECRET), "secret revealed");
    let inward = exchange(&server, &get_request("/link.txt"));
    assert_eq!(inward.status, 200, "inner symlink: {}", inward.status_line);
    assert_eq!(inward.body, root.small, "inner symlink body");
}

// ---------------------------------------------------------------------------------------
// Limits and deadlines

fn twenty_kib_request_header_gets_431(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let big = "a".repeat(20 * 1024);
    let request = format!("GET /index.html HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let response = exchange(&server, request.as_bytes());
    assert_eq!(response.status, 431, "{}", response.status_line);
    let after = exchange(&server, &get_request("/index.html"));
    assert_eq!(after.status, 200, "the next client after a 431");
}

fn trickled_request_head_is_cut_off_at_the_header_deadline(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--header-timeout", "1")
        .start();
    let mut stream = server.connect();
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("read timeout");
    let rest = format!("Host: x\r\nX-Slow: {}\r\n\r\n", "s".repeat(40));
    let started = Instant::now();
    stream
        .write_all(b"GET /index.html HTTP/1.1\r\n")
        .expect("sending the first bytes");
    let mut sent = 0;
    let mut closed_after = None;
    let mut scratch = [0u8; 1024];
    // At most one byte per 300 ms: the head (60 more bytes) cannot complete within 18 s.
    while started.elapsed() < Duration::from_secs(4) && sent < rest.len() - 1 {
        match stream.read(&mut scratch) {
            Ok(0) => {
                closed_after = Some(started.elapsed());
                break;
            }
            Ok(count) => panic!(
                "unexpected answer to an incomplete head: {:?}",
                String::from_utf8_lossy(&scratch[..count])
            ),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => {
                closed_after = Some(started.elapsed());
                break;
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stream.write_all(&rest.as_bytes()[sent..=sent]).is_err() {
                    closed_after = Some(started.elapsed());
                    break;
                }
                sent += 1;
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => panic!("reading: {error}"),
        }
    }
    let closed_after = closed_after.expect("the server kept a trickling head open past 4 s");
    assert!(
        closed_after < Duration::from_millis(2500),
        "closed only after {closed_after:?} (header timeout 1 s)"
    );
    assert!(
        closed_after >= Duration::from_millis(900),
        "closed after {closed_after:?}, before the 1 s header timeout"
    );
    assert!(sent < rest.len() - 1, "the head was completed");
    let timeouts = server.wait_for_total("http", "header_timeouts", Duration::from_secs(2), |n| {
        n >= 1
    });
    assert_eq!(timeouts, 1, "total.http.header_timeouts");
}

fn idle_connection_is_not_cut_off_by_the_header_deadline(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--header-timeout", "1")
        .flag("--idle-timeout", "30")
        .start();
    let mut stream = server.connect();
    // A connection that was used once and one that never sent anything.
    let mut used = server.connect();
    used.write_all(&get_request("/small.txt")).expect("sending");
    let mut used_reader = BufReader::new(used.try_clone().expect("clone"));
    assert_eq!(
        read_response(&mut used_reader, false)
            .expect("first response")
            .status,
        200
    );
    thread::sleep(Duration::from_secs(2));
    for (name, connection) in [("never used", &mut stream), ("used once", &mut used)] {
        connection
            .write_all(&get_request("/medium.bin"))
            .expect("sending after 2 s idle");
        let mut reader = BufReader::new(connection.try_clone().expect("clone"));
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("{name} connection after 2 s idle: {error}"));
        assert_eq!(response.status, 200, "{name}");
        assert!(response.body == root.medium, "{name}");
    }
    assert_eq!(server.total("http", "header_timeouts"), 0);
    assert_eq!(server.total("http", "idle_timeouts"), 0);
}

// ---------------------------------------------------------------------------------------
// Cold connections

/// Idle connections held in the cold-connections test.
const COLD: usize = 5_000;

/// Only one cold-connections test at a time: three at once would hold 15,000 sockets in
/// this process and crowd the ephemeral ports.
static COLD_CONNECTIONS: Mutex<()> = Mutex::new(());

fn five_thousand_idle_connections_do_not_keep_a_new_client_waiting(backend: &str) {
    let _one_at_a_time = COLD_CONNECTIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let limit = raise_open_files_limit();
    assert!(
        limit >= COLD as u64 + 500,
        "this test needs {} open files in the test process; the hard limit allows {limit} \
         (raise it with ulimit -Hn)",
        COLD + 500
    );
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--idle-timeout", "120")
        .start();
    let started = Instant::now();
    let mut idle: Vec<TcpStream> = Vec::with_capacity(COLD);
    // Batches below the listen backlog, each waited for, so no SYN is dropped and retried.
    while idle.len() < COLD {
        let batch = 1_000.min(COLD - idle.len());
        for _ in 0..batch {
            idle.push(
                TcpStream::connect(server.addr)
                    .unwrap_or_else(|error| panic!("idle connection {}: {error}", idle.len() + 1)),
            );
        }
        let want = idle.len() as u64;
        let accepted =
            server.wait_for_total("loop", "accepted", Duration::from_secs(5), |n| n >= want);
        assert!(
            accepted >= want,
            "the server accepted {accepted} of {want} connections within 5 s"
        );
    }
    let mut active = server.connect();
    active
        .write_all(&get_request("/medium.bin"))
        .expect("sending the active request");
    let mut reader = BufReader::new(active.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("the active client's response");
    assert_eq!(response.status, 200);
    assert!(response.body == root.medium, "active client's body");
    let open = server.wait_for_total("loop", "open_connections", Duration::from_secs(2), |n| {
        n > COLD as u64
    });
    assert!(
        open > COLD as u64,
        "the server holds {open} connections, want {COLD} idle + 1 active"
    );
    // The oldest and the newest cold connection still work.
    for index in [0, COLD - 1] {
        let connection = &mut idle[index];
        connection
            .set_read_timeout(Some(support::READ_TIMEOUT))
            .expect("timeout");
        connection
            .write_all(&get_request("/small.txt"))
            .expect("sending on a cold connection");
        let mut reader = BufReader::new(connection.try_clone().expect("clone"));
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("cold connection {index}: {error}"));
        assert_eq!(response.status, 200, "cold connection {index}");
        assert_eq!(response.body, root.small, "cold connection {index}");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "holding {COLD} connections took {elapsed:?}"
    );
    drop(server);
    drop(idle);
}

// ---------------------------------------------------------------------------------------
// Stats endpoint

fn stats_count_requests_and_name_the_backend(backend: &str) {
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
    assert_eq!(stats["schema"], 1, "schema in {stats}");
    assert_eq!(stats["backend"], backend, "backend in {stats}");
    assert_eq!(stats["workers"], 1, "workers in {stats}");
    assert!(counter(&stats, "loop", "accepted") >= 1, "{stats}");
    assert!(
        stats["total"]["http"]["responses_by_class"][1]
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

fn access_log_has_a_common_log_format_line_per_request(backend: &str) {
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
        support::is_clf_line(lines[0], "GET /index.html HTTP/1.1", 200, root.index.len()),
        "not the expected Common Log Format line: {:?}",
        lines[0]
    );
}

// ---------------------------------------------------------------------------------------
// Graceful shutdown

fn sigterm_lets_a_slow_download_finish_then_exits_zero(backend: &str) {
    use socket2::{Domain, Socket, Type};
    let root = DocumentRoot::new();
    // On loopback the kernel takes up to 4 MiB (tcp_wmem) into one socket's send buffer,
    // so a 1 MiB response would already be "sent" when the signal arrives; 8 MiB is still
    // in the server's hands, which is what this test is about.
    let huge = support::pseudo_random_bytes(8 * 1024 * 1024, 0x5eed_8192);
    std::fs::write(root.root().join("huge.bin"), &huge).expect("writing huge.bin");
    let mut server = ServerOptions::new(backend, &root).admin().start();
    // A small receive window keeps most of the body on the server's side while we dawdle.
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket.connect(&server.addr.into()).expect("connect");
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(support::READ_TIMEOUT))
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

fn sigterm_stops_the_server_after_its_last_connection_closed(backend: &str) {
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

// ---------------------------------------------------------------------------------------
// Malformed requests

fn garbage_request_line_gets_400_and_others_are_still_served(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let mut garbage = server.connect();
    garbage.write_all(b"GARBAGE\r\n\r\n").expect("sending");
    let (raw, _) = read_until_closed(&mut garbage).expect("the server should close");
    let (response, _) = split_response(&raw);
    assert_eq!(response.status, 400, "{}", response.status_line);
    let good = exchange(&server, &get_request("/small.txt"));
    assert_eq!(good.status, 200);
    assert_eq!(good.body, root.small);
}

fn content_length_with_transfer_encoding_gets_400(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let response = exchange(
        &server,
        b"GET /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\
          Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(response.status, 400, "{}", response.status_line);
    let after = exchange(&server, &get_request("/index.html"));
    assert_eq!(after.status, 200);
}

// ---------------------------------------------------------------------------------------
// Descriptor exhaustion and the connection limit

/// With only 48 descriptors (about 37 left for connections) the server runs out
/// (`EMFILE`) long before the 60 clients are in: it must pause accepting instead of spinning on the listener, keep serving the
/// connections it has, and take the waiting ones once descriptors free up.
fn running_out_of_descriptors_pauses_accepting_without_spinning(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .open_files_limit(48)
        .start();
    // Warm the file cache first: once descriptors run out, files cannot be opened.
    let warm = exchange(&server, &get_request("/small.txt"));
    assert_eq!(warm.status, 200);
    let before = server.stats();
    let mut clients: Vec<TcpStream> = (0..60).map(|_| server.connect()).collect();
    // Well past the point of exhaustion: several 100 ms pauses go by.
    std::thread::sleep(Duration::from_millis(600));
    let first = &mut clients[0];
    first
        .write_all(&get_request("/small.txt"))
        .expect("request on an accepted connection");
    let mut reader = BufReader::new(first.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("served while out of descriptors");
    assert_eq!(response.status, 200);
    // Free descriptors: the last client, still in the listen queue, gets accepted and served.
    clients.drain(1..40);
    let last = clients.last_mut().expect("the last client");
    last.set_read_timeout(Some(support::READ_TIMEOUT))
        .expect("timeout");
    last.write_all(&get_request("/small.txt"))
        .expect("request from a queued client");
    let mut reader = BufReader::new(last.try_clone().expect("clone"));
    let response =
        read_response(&mut reader, false).expect("queued client served after descriptors freed");
    assert_eq!(response.status, 200);
    drop(clients);
    let after = server.wait_for_total("loop", "accept_pauses", Duration::from_secs(5), |n| n >= 1);
    assert!(after >= 1, "accepting paused at least once");
    let stats = server.stats();
    let waits = counter(&stats, "loop", "wait_calls") - counter(&before, "loop", "wait_calls");
    assert!(
        waits < 2_000,
        "{waits} waits while descriptors were exhausted: the loop is spinning"
    );
}

/// At `--max-connections 2` a third client waits in the listen queue until one of the
/// first two closes, then is served.
fn connection_limit_defers_new_connections_until_one_closes(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--max-connections", "2")
        .start();
    let first = server.connect();
    let second = server.connect();
    server.wait_for_total("loop", "accepted", Duration::from_secs(5), |n| n >= 2);
    let mut third = server.connect();
    third
        .write_all(&get_request("/small.txt"))
        .expect("request from the third client");
    third
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = third.read(&mut byte);
    assert!(
        matches!(&early, Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the third client must wait while two are open, got {early:?}"
    );
    assert_eq!(server.total("loop", "open_connections"), 2);
    drop(first);
    third
        .set_read_timeout(Some(support::READ_TIMEOUT))
        .expect("timeout");
    let mut reader = BufReader::new(third.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("third client served after a close");
    assert_eq!(response.status, 200);
    drop(second);
}

/// `--write-timeout 1`: a client that stops reading an 8 MiB response is dropped after
/// about a second without progress, while one that reads slowly but steadily (a little
/// every 400 ms, each read freeing room for more) keeps its connection past the timeout.
fn stalled_reader_is_dropped_after_the_write_timeout_but_a_slow_one_is_not(backend: &str) {
    use socket2::{Domain, Socket, Type};
    let root = DocumentRoot::new();
    let huge = support::pseudo_random_bytes(8 * 1024 * 1024, 0x5ee0_0001);
    std::fs::write(root.root().join("huge.bin"), &huge).expect("writing huge.bin");
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--write-timeout", "1")
        .start();
    let small_window = || {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        socket.connect(&server.addr.into()).expect("connect");
        let mut stream: TcpStream = socket.into();
        stream
            .write_all(&get_request("/huge.bin"))
            .expect("request");
        stream
            .set_read_timeout(Some(support::READ_TIMEOUT))
            .expect("timeout");
        stream
    };
    let mut stalled = small_window();
    let mut slow = small_window();
    let mut chunk = vec![0u8; 64 * 1024];
    let started = Instant::now();
    let mut slow_received = 0usize;
    while started.elapsed() < Duration::from_millis(2_800) {
        thread::sleep(Duration::from_millis(400));
        let count = slow
            .read(&mut chunk)
            .expect("the slow reader keeps receiving");
        assert!(count > 0, "the slow reader's connection was closed");
        slow_received += count;
    }
    assert!(
        slow_received < huge.len(),
        "the slow reader must not have finished"
    );
    assert_eq!(
        server.total("http", "write_timeouts"),
        1,
        "exactly the stalled reader timed out"
    );
    // The stalled client finds its connection closed (end of stream or reset) after the
    // bytes already in flight, well before the whole body: a read timeout would fail here.
    let (rest, _) = read_until_closed(&mut stalled).expect("the stalled connection is closed");
    assert!(
        rest.len() < huge.len(),
        "the stalled reader did not get the whole body"
    );
}
