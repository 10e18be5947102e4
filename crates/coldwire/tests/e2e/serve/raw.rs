//! `coldwire serve` over raw sockets: pipelining (in one write and over many buffers),
//! HTTP/1.0 with and without keep-alive, and path traversal (encoded, dotted, symlinked).

use std::io::{BufReader, Write};
use std::thread;

use coldwire_testkit::{
    DocumentRoot, SECRET, ServerOptions, exchange, get_request, read_response, read_until_closed,
    split_response,
};

// ---------------------------------------------------------------------------------------
// Raw sockets: pipelining and HTTP/1.0

pub(super) fn hundred_pipelined_requests_in_one_write_are_answered_in_order(backend: &str) {
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

pub(super) fn thousand_pipelined_requests_over_many_buffers_are_all_answered(backend: &str) {
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

pub(super) fn http10_request_is_answered_then_the_server_closes(backend: &str) {
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

pub(super) fn http10_keep_alive_request_keeps_the_connection_open(backend: &str) {
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

pub(super) fn traversal_attempts_never_reveal_files_outside_the_root(backend: &str) {
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

pub(super) fn symlink_out_of_the_root_is_refused_and_symlink_inside_is_served(backend: &str) {
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
