//! The simulator's answer to one request: the object its path names (`/<anything>/<id>`,
//! the id in decimal, an extension allowed: `/obj/1234.gif`), with the content mix's
//! headers, a `304` when the client's validator is current, or an error.
//!
//! Headers of a `200`: `Content-Type` by kind, `Content-Length`, `Last-Modified`, `ETag`
//! (`"<id>-<version>"`), and for a cachable object `Cache-Control: max-age=<seconds until its
//! next modification>` and `Expires` (PolyMix's truthful expiry), for the others
//! `Cache-Control: no-store`; [`coldwire_workload::BODY_HEADER`] names the object so the
//! client can check the body byte for byte.

use std::time::SystemTime;

use coldwire_http::{Method, Precondition, RequestHead, Status, Validators, evaluate_conditionals};
use coldwire_workload::{BODY_HEADER, ContentMix, fill_body};

use super::worker::{answers_with_body, common_head, connection_line, http_date};

/// An answer, built and waiting for its due time.
pub struct Answer {
    /// The whole response.
    pub bytes: Vec<u8>,
    /// Its status (statistics).
    pub status: u16,
    /// Body bytes (statistics).
    pub body_bytes: u64,
    /// Whether the connection stays open after it.
    pub keep_alive: bool,
}

impl Answer {
    /// An error answer that closes the connection.
    pub fn error(status: Status, date: &[u8]) -> Answer {
        let mut bytes = Vec::with_capacity(160);
        let line = format!("HTTP/1.1 {} {}\r\n", status.code(), status.reason());
        common_head(&mut bytes, line.as_bytes(), date);
        bytes.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
        Answer {
            bytes,
            status: status.code(),
            body_bytes: 0,
            keep_alive: false,
        }
    }
}

/// The object id a path names: its last segment's leading digits.
pub fn object_id(target: &str) -> Option<u64> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let last = path.rsplit('/').next().unwrap_or("");
    let digits: &str = last
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap_or("");
    digits.parse().ok()
}

/// The answer to `head` as of `now`.
pub fn answer(mix: &ContentMix, head: &RequestHead<'_>, now: SystemTime, date: &[u8]) -> Answer {
    let keep_alive = head.keep_alive();
    let version = head.version();
    if !matches!(head.method(), Method::Get | Method::Head | Method::Post) {
        let mut answer = Answer::error(Status::METHOD_NOT_ALLOWED, date);
        answer.keep_alive = false;
        return answer;
    }
    let Some(id) = object_id(head.target()) else {
        return Answer::error(Status::NOT_FOUND, date);
    };
    let object = mix.object(id, now);
    let etag = object.etag();
    let validators = Validators {
        last_modified: Some(object.last_modified),
        etag: coldwire_http::ETag::parse(etag.as_bytes()),
    };
    let not_modified = head.method() != Method::Post
        && evaluate_conditionals(head, &validators) == Precondition::NotModified;
    let status: &[u8] = if not_modified {
        b"HTTP/1.1 304 Not Modified\r\n"
    } else {
        b"HTTP/1.1 200 OK\r\n"
    };
    let with_body = !not_modified && answers_with_body(head.method());
    let body_len = if with_body { object.size } else { 0 };
    let mut bytes = Vec::with_capacity(320 + body_len as usize);
    common_head(&mut bytes, status, date);
    let mut field = |name: &str, value: &str| {
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    };
    field("Content-Type", object.kind.content_type());
    if !not_modified {
        field("Content-Length", &object.size.to_string());
    }
    field(
        "Last-Modified",
        std::str::from_utf8(&http_date(object.last_modified)).unwrap_or(""),
    );
    field("ETag", &etag);
    if object.cachable {
        let max_age = object
            .expires
            .duration_since(now)
            .map_or(0, |left| left.as_secs());
        field("Cache-Control", &format!("max-age={max_age}"));
        field(
            "Expires",
            std::str::from_utf8(&http_date(object.expires)).unwrap_or(""),
        );
    } else {
        field("Cache-Control", "no-store");
    }
    field(
        BODY_HEADER,
        &format!(
            "id={:x}; v={:x}; size={}",
            object.id, object.version, object.size
        ),
    );
    bytes.extend_from_slice(connection_line(version, keep_alive));
    bytes.extend_from_slice(b"\r\n");
    if with_body {
        fill_body(&mut bytes, object.id, object.version, 0, object.size);
    }
    Answer {
        bytes,
        status: if not_modified { 304 } else { 200 },
        body_bytes: body_len,
        keep_alive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_last_segment() {
        assert_eq!(object_id("/obj/1234"), Some(1234));
        assert_eq!(object_id("/w/7.gif?x=1"), Some(7));
        assert_eq!(object_id("http://origin/a/b/99"), Some(99));
        assert_eq!(object_id("/obj/"), None);
        assert_eq!(object_id("/index.html"), None);
    }
}
