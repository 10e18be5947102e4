//! The simulator's answer when it serves a trace (`coldwire origin --trace FILE`): the
//! object at the request's path (its path and query; an absolute-form target loses its
//! scheme and authority) with the size the trace logged for it, or `404` for a path the
//! trace does not name as an object.
//!
//! Trace objects never change: `Last-Modified` is the trace's first timestamp, the `ETag`
//! `"<id hex>-0"`, `Cache-Control: max-age=86400` (a day: longer than a replay), the
//! `Content-Type` from the extension; the body is the verifiable body of (id, version 0)
//! named in [`coldwire_workload::BODY_HEADER`], as for generated objects.

use std::time::{Duration, UNIX_EPOCH};

use coldwire_http::{Method, Precondition, RequestHead, Status, Validators, evaluate_conditionals};
use coldwire_workload::trace::{Catalogue, request_path};
use coldwire_workload::{BODY_HEADER, fill_body};

use super::answer::Answer;
use super::worker::{answers_with_body, common_head, connection_line, http_date};

/// How long a trace object may be cached, seconds.
pub const TRACE_MAX_AGE: u64 = 86_400;

/// The answer to `head` from the trace's objects.
pub fn trace_answer(catalogue: &Catalogue, head: &RequestHead<'_>, date: &[u8]) -> Answer {
    let keep_alive = head.keep_alive();
    if !matches!(head.method(), Method::Get | Method::Head | Method::Post) {
        return Answer::error(Status::METHOD_NOT_ALLOWED, date);
    }
    let path = request_path(head.target());
    let Some(object) = catalogue.get(path) else {
        let mut answer = Answer::error(Status::NOT_FOUND, date);
        // A path the trace does not name is an ordinary miss, not a broken connection.
        answer.keep_alive = keep_alive;
        answer.bytes = not_found(head, date);
        return answer;
    };
    let modified = UNIX_EPOCH + Duration::from_millis(catalogue.first_time_ms().max(0) as u64);
    let etag = format!("\"{:x}-0\"", object.id);
    let validators = Validators {
        last_modified: Some(modified),
        etag: coldwire_http::ETag::parse(etag.as_bytes()),
    };
    let not_modified = head.method() != Method::Post
        && evaluate_conditionals(head, &validators) == Precondition::NotModified;
    let with_body = !not_modified && answers_with_body(head.method());
    let body_len = if with_body { object.size } else { 0 };
    let mut bytes = Vec::with_capacity(320 + body_len as usize);
    let status: &[u8] = if not_modified {
        b"HTTP/1.1 304 Not Modified\r\n"
    } else {
        b"HTTP/1.1 200 OK\r\n"
    };
    common_head(&mut bytes, status, date);
    let mut field = |name: &str, value: &str| {
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    };
    let without_query = path.split(['?', '#']).next().unwrap_or(path);
    field(
        "Content-Type",
        coldwire_http::content_type_for(without_query.as_bytes()),
    );
    if !not_modified {
        field("Content-Length", &object.size.to_string());
    }
    field(
        "Last-Modified",
        std::str::from_utf8(&http_date(modified)).unwrap_or(""),
    );
    field("ETag", &etag);
    field("Cache-Control", &format!("max-age={TRACE_MAX_AGE}"));
    field(
        BODY_HEADER,
        &format!("id={:x}; v=0; size={}", object.id, object.size),
    );
    bytes.extend_from_slice(connection_line(head.version(), keep_alive));
    bytes.extend_from_slice(b"\r\n");
    if with_body {
        fill_body(&mut bytes, object.id, 0, 0, object.size);
    }
    Answer {
        bytes,
        status: if not_modified { 304 } else { 200 },
        body_bytes: body_len,
        keep_alive,
    }
}

fn not_found(head: &RequestHead<'_>, date: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(160);
    common_head(&mut bytes, b"HTTP/1.1 404 Not Found\r\n", date);
    bytes.extend_from_slice(b"Content-Length: 0\r\n");
    bytes.extend_from_slice(connection_line(head.version(), head.keep_alive()));
    bytes.extend_from_slice(b"\r\n");
    bytes
}
