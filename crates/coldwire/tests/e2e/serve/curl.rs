//! `coldwire serve` seen by the real curl: whole files, HEAD, keep-alive, ranges,
//! conditional requests, redirects of directories, errors.

use std::io::{BufReader, Write};

use coldwire_testkit::{
    DocumentRoot, ServerOptions, curl, curl_response, get_request, read_response, split_response,
};

// ---------------------------------------------------------------------------------------
// curl: the real client

pub(super) fn curl_downloads_every_file_byte_for_byte(backend: &str) {
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

pub(super) fn curl_head_gives_the_headers_and_no_body(backend: &str) {
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

pub(super) fn curl_reuses_one_connection_for_two_urls(backend: &str) {
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

pub(super) fn curl_range_gets_206_with_exactly_those_bytes(backend: &str) {
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

pub(super) fn curl_unsatisfiable_range_gets_416_with_the_full_length(backend: &str) {
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

pub(super) fn curl_if_none_match_with_the_etag_gets_304_without_body(backend: &str) {
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

pub(super) fn curl_if_modified_since_last_modified_gets_304(backend: &str) {
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

pub(super) fn curl_directory_without_slash_is_redirected_to_slash(backend: &str) {
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

pub(super) fn curl_directory_with_slash_serves_its_index(backend: &str) {
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

pub(super) fn curl_missing_file_gets_404(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for path in ["/missing.html", "/sub/missing.txt", "/small.txt/more"] {
        let response = curl_response(&[], &server.url(path));
        assert_eq!(response.status, 404, "{path}: {}", response.status_line);
        assert_eq!(response.content_length(), response.body.len() as u64);
    }
}

pub(super) fn curl_post_gets_405_allowing_get_and_head(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for extra in [&["-X", "POST"][..], &["-d", "field=value"][..]] {
        let response = curl_response(extra, &server.url("/index.html"));
        assert_eq!(response.status, 405, "{extra:?}: {}", response.status_line);
        assert_eq!(response.header("allow"), Some("GET, HEAD"), "{extra:?}");
    }
}
