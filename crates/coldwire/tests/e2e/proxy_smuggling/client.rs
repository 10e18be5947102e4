//! The client side of a vector: one fresh connection to the proxy, the vector's bytes in
//! one write (or two, the second after a pause), then the answers read back, bounded in
//! time: until the proxy closes, or until the expected answers came and the connection
//! stayed quiet for a moment, or until a deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use coldwire_testkit::header;

/// Pause between two writes of a vector.
const BETWEEN_PARTS: Duration = Duration::from_millis(200);
/// Silence after the expected answers that ends the wait for more.
const QUIET: Duration = Duration::from_millis(250);
/// Longest wait after the last write.
const DEADLINE: Duration = Duration::from_millis(2500);

/// A response the client received.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The head as text.
    pub head: String,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the head has `Connection: close`.
    pub fn closes(&self) -> bool {
        self.head.lines().any(|line| {
            line.split_once(':').is_some_and(|(name, value)| {
                name.eq_ignore_ascii_case("connection")
                    && value
                        .split(',')
                        .any(|token| token.trim().eq_ignore_ascii_case("close"))
            })
        })
    }

    /// Whether this is the recording origin's 400 for bytes it could not parse, passed on
    /// by the proxy.
    pub fn is_origin_parse_error(&self) -> bool {
        self.head.lines().any(|line| {
            line.to_ascii_lowercase()
                .starts_with("x-origin-parse-error:")
        })
    }
}

/// Everything the client got.
#[derive(Debug, Default)]
pub struct Received {
    /// Final responses, in order.
    pub finals: Vec<Response>,
    /// Interim (1xx) responses.
    pub interim: usize,
    /// The proxy closed the connection (or reset it).
    pub closed: bool,
    /// No answer came in time.
    pub timed_out: bool,
    /// Bytes that are not a response.
    pub garbage: Option<String>,
    /// A write failed (the proxy closed early).
    pub write_error: Option<String>,
}

/// Sends `parts` to the proxy at `address` and reads the answers: stops at the close, or
/// once `expected` final answers came and the line stayed quiet (unless `wait_for_close`).
pub fn exchange(
    address: SocketAddr,
    parts: &[Vec<u8>],
    expected: usize,
    wait_for_close: bool,
) -> Received {
    let mut received = Received::default();
    let mut stream = match TcpStream::connect_timeout(&address, Duration::from_secs(3)) {
        Ok(stream) => stream,
        Err(error) => {
            received.write_error = Some(format!("connect: {error}"));
            return received;
        }
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = stream.set_nodelay(true);
    let mut input = Vec::new();
    let mut last_write = Instant::now();
    let mut last_byte = Instant::now();
    let mut sent = 0;
    let mut buffer = [0u8; 16384];
    loop {
        let now = Instant::now();
        if sent < parts.len() && (sent == 0 || now >= last_write + BETWEEN_PARTS) {
            if let Err(error) = stream.write_all(&parts[sent]) {
                received.write_error = Some(format!("write of part {}: {error}", sent + 1));
                sent = parts.len();
            } else {
                sent += 1;
            }
            last_write = now;
        }
        match stream.read(&mut buffer) {
            Ok(0) => received.closed = true,
            Ok(read) => {
                input.extend_from_slice(&buffer[..read]);
                last_byte = Instant::now();
            }
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => received.closed = true,
        }
        take_responses(&mut input, &mut received);
        if received.closed || received.garbage.is_some() {
            break;
        }
        let now = Instant::now();
        if sent == parts.len() {
            let enough = received.finals.len() >= expected;
            if enough && !wait_for_close && now >= last_byte.max(last_write) + QUIET {
                break;
            }
            if now >= last_write + DEADLINE {
                received.timed_out = !enough || wait_for_close;
                break;
            }
        }
    }
    if received.closed && !input.is_empty() && received.garbage.is_none() {
        // A response delimited by the close.
        let delimited = split_head(&input).filter(|(_, head, _)| {
            header(head, "content-length").is_none() && header(head, "transfer-encoding").is_none()
        });
        if let Some((status, head, body_at)) = delimited {
            received.finals.push(Response {
                status,
                head,
                body: input[body_at..].to_vec(),
            });
        } else {
            received.garbage = Some(format!(
                "incomplete or truncated response at the close: {:?}",
                String::from_utf8_lossy(&input)
            ));
        }
    }
    received
}

/// The status, head text and body offset of a complete head at the start of `input`.
fn split_head(input: &[u8]) -> Option<(u16, String, usize)> {
    let end = input.windows(4).position(|window| window == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&input[..end]).into_owned();
    let status = head
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())?;
    Some((status, head, end + 4))
}

/// Moves every complete response out of `input`.
fn take_responses(input: &mut Vec<u8>, received: &mut Received) {
    loop {
        if input.is_empty() {
            return;
        }
        let Some((status, head, body_at)) = split_head(input) else {
            if input.len() >= 5 && !input.starts_with(b"HTTP/") {
                received.garbage = Some(format!(
                    "not a response: {:?}",
                    String::from_utf8_lossy(input)
                ));
            }
            return;
        };
        let body;
        let used;
        if (100..200).contains(&status) || status == 204 || status == 304 {
            body = Vec::new();
            used = body_at;
        } else if let Some(length) = header(&head, "content-length") {
            let Ok(length) = length.parse::<usize>() else {
                received.garbage = Some(format!("bad Content-Length in {head:?}"));
                return;
            };
            let Some(bytes) = input.get(body_at..body_at + length) else {
                return;
            };
            body = bytes.to_vec();
            used = body_at + length;
        } else if header(&head, "transfer-encoding").is_some() {
            let Some((decoded, end)) = dechunk(&input[body_at..]) else {
                return;
            };
            body = decoded;
            used = body_at + end;
        } else {
            // Until the close: finished by the caller.
            return;
        }
        input.drain(..used);
        if (100..200).contains(&status) {
            received.interim += 1;
        } else {
            received.finals.push(Response { status, head, body });
        }
    }
}

/// A chunked body (leniently: the proxy's answers are not what is tested here) and the
/// bytes it took, once complete.
fn dechunk(input: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + input.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&input[at..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            loop {
                let end = at + input.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
                let empty = end == at;
                at = end + 2;
                if empty {
                    return Some((body, at));
                }
            }
        }
        body.extend_from_slice(input.get(at..at + size)?);
        at += size + 2;
        if at > input.len() {
            return None;
        }
    }
}
