//! The origin server's answer to one parsed request: method checks (501 for a method it
//! does not know, 405 for a known one other than GET and HEAD), target checks, path
//! resolution inside the root, the file cache, conditionals (304/412), single ranges
//! (206/416), and small error responses. Writes into an [`Output`]; touches no socket.
//!
//! The `200 OK` path for a cached file is one copy of a prebuilt head, a 29-byte date patch,
//! and a shared body chunk (or a `sendfile` chunk for large files): no allocation, no
//! formatting, no system call.

use std::io::Write;
use std::time::Instant;

use coldwire_http::{
    HTTP_DATE_LEN, Method, Precondition, RangeOutcome, RequestHead, Status, Target, Version,
    connection_header, evaluate_conditionals, evaluate_request_range, finish, parse_target,
    resolve_path, write_content_length, write_content_range, write_date, write_header,
    write_status_line, write_unsatisfied_content_range,
};
use coldwire_io::{Chunk, Driver};

use crate::file_cache::{FileCache, LookupError};
use crate::output::Output;

/// Bodies up to this size are copied next to their head rather than queued as their own
/// chunk: the copy costs less than the extra slice and reference count.
const INLINE_BODY_LIMIT: u64 = 2048;

/// What answering a request produced, for the log, the stats and the connection.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    /// Status code sent.
    pub status: u16,
    /// Body bytes queued.
    pub body_bytes: u64,
    /// The connection stays open for another request.
    pub keep_alive: bool,
}

/// Everything the responder reads besides the request.
pub struct Responder<'a> {
    /// The worker's file cache.
    pub files: &'a mut FileCache,
    /// The current `Date` value.
    pub date: &'a [u8; HTTP_DATE_LEN],
    /// The loop's clock.
    pub now: Instant,
    /// Scratch space for the decoded path (kept by the worker to avoid allocating).
    pub path: &'a mut Vec<u8>,
}

impl Responder<'_> {
    /// Answers `request`. `keep_alive` is false when the connection must close after this
    /// response (the client asked, the request has a body we do not read, or the server is
    /// shutting down).
    pub fn answer<D: Driver>(
        &mut self,
        request: &RequestHead<'_>,
        keep_alive: bool,
        driver: &mut D,
        output: &mut Output,
    ) -> Answer {
        let version = request.version();
        let method = request.method();
        let head_only = method == Method::Head;
        let date = self.date;
        let fail = |status: Status, driver: &mut D, output: &mut Output| {
            error_response(status, version, keep_alive, head_only, date, driver, output)
        };
        if method == Method::Other {
            // RFC 9110 §9.1: a method this server does not know at all (methods are
            // case-sensitive, so `get` too) is 501; a known one it does not allow is 405.
            return fail(Status::NOT_IMPLEMENTED, driver, output);
        }
        if !method.is_get_or_head() {
            return fail(Status::METHOD_NOT_ALLOWED, driver, output);
        }
        let (path, query) = match parse_target(method, request.target()) {
            Ok(Target::Origin { path, query } | Target::Absolute { path, query, .. }) => {
                (path, query)
            }
            Ok(_) => return fail(Status::BAD_REQUEST, driver, output),
            Err(error) => return fail(error.status(), driver, output),
        };
        if let Err(error) = resolve_path(path, self.path) {
            return fail(error.status(), driver, output);
        }
        let file = match self.files.lookup(self.path, self.now) {
            Ok(file) => file,
            Err(LookupError::Directory) => {
                return redirect_to_directory(
                    path, query, version, keep_alive, date, driver, output,
                );
            }
            Err(LookupError::NotFound) => return fail(Status::NOT_FOUND, driver, output),
            Err(LookupError::Forbidden) => return fail(Status::FORBIDDEN, driver, output),
            Err(LookupError::Internal) => {
                return fail(Status::INTERNAL_SERVER_ERROR, driver, output);
            }
        };
        let connection_line = connection_header(version, keep_alive);
        match evaluate_conditionals(request, &file.validators) {
            Precondition::Proceed => {}
            Precondition::NotModified => {
                let out = output.bytes(driver);
                file.head_not_modified
                    .write_complete(out, self.date, connection_line);
                return Answer {
                    status: 304,
                    body_bytes: 0,
                    keep_alive,
                };
            }
            Precondition::Failed => {
                return fail(Status::PRECONDITION_FAILED, driver, output);
            }
        }
        let (status, start, length) =
            match evaluate_request_range(request, &file.validators, file.length) {
                RangeOutcome::Full => {
                    file.head_ok
                        .write_complete(output.bytes(driver), self.date, connection_line);
                    (200, 0, file.length)
                }
                RangeOutcome::Partial {
                    start,
                    end_inclusive,
                } => {
                    let out = output.bytes(driver);
                    write_status_line(out, Version::Http11, Status::PARTIAL_CONTENT);
                    file.head_fields.write_to(out, self.date);
                    write_content_range(out, start, end_inclusive, file.length);
                    let length = end_inclusive - start + 1;
                    write_content_length(out, length);
                    out.extend_from_slice(connection_line);
                    finish(out);
                    (206, start, length)
                }
                RangeOutcome::Unsatisfiable => {
                    let out = output.bytes(driver);
                    write_status_line(out, Version::Http11, Status::RANGE_NOT_SATISFIABLE);
                    file.head_fields.write_to(out, self.date);
                    write_unsatisfied_content_range(out, file.length);
                    write_content_length(out, 0);
                    out.extend_from_slice(connection_line);
                    finish(out);
                    return Answer {
                        status: 416,
                        body_bytes: 0,
                        keep_alive,
                    };
                }
            };
        if head_only || length == 0 {
            return Answer {
                status,
                body_bytes: 0,
                keep_alive,
            };
        }
        let range = start as usize..(start + length) as usize;
        match &file.body {
            // Small bodies join the head: one contiguous slice, no chunk bookkeeping.
            Some(body) if length <= INLINE_BODY_LIMIT => {
                output.bytes(driver).extend_from_slice(&body[range])
            }
            Some(body) => output.chunk(driver, Chunk::Shared(body.slice(range))),
            None => output.chunk(
                driver,
                Chunk::File {
                    file: file.file.clone(),
                    offset: start,
                    length,
                },
            ),
        }
        Answer {
            status,
            body_bytes: length,
            keep_alive,
        }
    }
}

fn common_head(out: &mut Vec<u8>, status: Status, date: &[u8; HTTP_DATE_LEN]) {
    write_status_line(out, Version::Http11, status);
    write_header(out, b"Server", crate::SERVER_NAME.as_bytes());
    write_date(out, date);
}

/// A small HTML error response (`405` also says which methods are allowed).
pub fn error_response<D: Driver>(
    status: Status,
    version: Version,
    keep_alive: bool,
    head_only: bool,
    date: &[u8; HTTP_DATE_LEN],
    driver: &mut D,
    output: &mut Output,
) -> Answer {
    let out = output.bytes(driver);
    common_head(out, status, date);
    if status == Status::METHOD_NOT_ALLOWED {
        write_header(out, b"Allow", b"GET, HEAD");
    }
    write_header(out, b"Content-Type", b"text/html; charset=utf-8");
    let code = status.code();
    let reason = status.reason();
    let mut body = [0u8; 256];
    let body_length = {
        let mut cursor = &mut body[..];
        let _ = writeln!(
            cursor,
            "<html><head><title>{code} {reason}</title></head><body><h1>{code} {reason}</h1></body></html>"
        );
        256 - cursor.len()
    };
    write_content_length(out, body_length as u64);
    out.extend_from_slice(connection_header(version, keep_alive));
    finish(out);
    if head_only {
        return Answer {
            status: code,
            body_bytes: 0,
            keep_alive,
        };
    }
    out.extend_from_slice(&body[..body_length]);
    Answer {
        status: code,
        body_bytes: body_length as u64,
        keep_alive,
    }
}

fn redirect_to_directory<D: Driver>(
    path: &str,
    query: Option<&str>,
    version: Version,
    keep_alive: bool,
    date: &[u8; HTTP_DATE_LEN],
    driver: &mut D,
    output: &mut Output,
) -> Answer {
    let out = output.bytes(driver);
    common_head(out, Status::MOVED_PERMANENTLY, date);
    out.extend_from_slice(b"Location: /");
    // One leading slash, whatever came: `//evil.test` (a directory of that name) would
    // otherwise redirect to `//evil.test/`, which a browser reads as another host (an open
    // redirect); browsers read a leading `/\` as `//` too.
    out.extend_from_slice(path.trim_start_matches(['/', '\\']).as_bytes());
    out.push(b'/');
    if let Some(query) = query {
        out.push(b'?');
        out.extend_from_slice(query.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    write_content_length(out, 0);
    out.extend_from_slice(connection_header(version, keep_alive));
    finish(out);
    Answer {
        status: 301,
        body_bytes: 0,
        keep_alive,
    }
}
