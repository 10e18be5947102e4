//! The recording origin: a test server on 127.0.0.1, port 0, that keeps the raw bytes of
//! every connection it accepts and answers each request it can strictly parse
//! ([`super::strict`]) with `200` and the body `ok SEQ` (SEQ numbers the requests it
//! received, over all connections), keep-alive, `Cache-Control: no-store`. A request with
//! `Expect: 100-continue` whose body has not arrived gets `100 Continue` first. Bytes it
//! cannot parse are recorded as an error and answered with 400 (marked
//! `X-Origin-Parse-Error: 1`, so the suite can tell it from the proxy's own 400) and a
//! close.
//!
//! The suite asserts on what the origin *received*: [`Origin::mark`] before a vector,
//! [`Origin::since`] after it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use coldwire_testkit::spawn_server;

use super::strict::{self, Parse, Request};

/// One accepted connection.
#[derive(Default)]
struct Connection {
    /// Every byte received.
    raw: Vec<u8>,
    /// Bytes taken by complete requests.
    consumed: usize,
    /// Complete requests with their sequence numbers.
    requests: Vec<(usize, Request)>,
    /// The peer (the proxy) closed it.
    closed: bool,
    /// The test gave up on it (closed from this side).
    aborted: bool,
    /// To close it from the test.
    stream: Option<TcpStream>,
}

#[derive(Default)]
struct State {
    connections: Vec<Connection>,
    next_sequence: usize,
    errors: Vec<String>,
}

/// The shared record.
#[derive(Default)]
pub struct Recording(Mutex<State>);

impl Recording {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where the record stood.
pub struct Mark {
    /// Per connection: bytes and requests received.
    connections: Vec<(usize, usize)>,
    errors: usize,
}

/// A connection holding bytes that form no complete request.
pub struct Unfinished {
    /// Whether the proxy closed it.
    pub closed: bool,
    /// The leftover bytes.
    pub bytes: Vec<u8>,
}

/// What the origin received since a mark.
pub struct Seen {
    /// Complete requests, in arrival order, with their sequence numbers.
    pub requests: Vec<(usize, Request)>,
    /// Every new byte, connection after connection.
    pub raw: Vec<u8>,
    /// Connections left with part of a request.
    pub unfinished: Vec<Unfinished>,
    /// What it could not parse.
    pub errors: Vec<String>,
}

/// The running origin.
pub struct Origin {
    /// Its address.
    pub address: SocketAddr,
    recording: Arc<Recording>,
}

impl Origin {
    /// Starts it.
    pub fn start() -> Origin {
        let (address, recording) = spawn_server(serve);
        Origin { address, recording }
    }

    /// Where the record stands now.
    pub fn mark(&self) -> Mark {
        let state = self.recording.lock();
        Mark {
            connections: state
                .connections
                .iter()
                .map(|connection| (connection.raw.len(), connection.requests.len()))
                .collect(),
            errors: state.errors.len(),
        }
    }

    /// What arrived since `mark`.
    pub fn since(&self, mark: &Mark) -> Seen {
        let state = self.recording.lock();
        let mut seen = Seen {
            requests: Vec::new(),
            raw: Vec::new(),
            unfinished: Vec::new(),
            errors: state.errors[mark.errors..].to_vec(),
        };
        for (index, connection) in state.connections.iter().enumerate() {
            let (bytes, requests) = mark.connections.get(index).copied().unwrap_or((0, 0));
            seen.raw.extend_from_slice(&connection.raw[bytes..]);
            seen.requests
                .extend(connection.requests[requests..].iter().cloned());
            if connection.consumed < connection.raw.len() && !connection.aborted {
                seen.unfinished.push(Unfinished {
                    closed: connection.closed,
                    bytes: connection.raw[connection.consumed..].to_vec(),
                });
            }
        }
        seen.requests.sort_by_key(|(sequence, _)| *sequence);
        seen
    }

    /// Closes every connection left with part of a request, so that the next vector
    /// starts clean whatever this one left behind.
    pub fn abort_unfinished(&self) {
        let mut state = self.recording.lock();
        for connection in &mut state.connections {
            if connection.consumed < connection.raw.len() && !connection.aborted {
                connection.aborted = true;
                if let Some(stream) = &connection.stream {
                    let _ = stream.shutdown(Shutdown::Both);
                }
            }
        }
    }
}

/// Serves one connection: records, parses strictly, answers.
fn serve(mut stream: TcpStream, recording: &Recording) {
    let index = {
        let mut state = recording.lock();
        state.connections.push(Connection {
            stream: stream.try_clone().ok(),
            ..Connection::default()
        });
        state.connections.len() - 1
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let mut buffer = Vec::new();
    let mut start = 0;
    let mut continued = false;
    let mut chunk = [0u8; 16384];
    loop {
        loop {
            match strict::parse(&buffer[start..]) {
                Ok(Parse::Complete(request, used)) => {
                    start += used;
                    continued = false;
                    let sequence = {
                        let mut state = recording.lock();
                        let sequence = state.next_sequence;
                        state.next_sequence += 1;
                        let connection = &mut state.connections[index];
                        connection.requests.push((sequence, request));
                        connection.consumed = start;
                        sequence
                    };
                    let body = format!("ok {sequence}");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\n\
                         Content-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
                Ok(Parse::Partial { wants_continue }) => {
                    if wants_continue && !continued {
                        continued = true;
                        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                    }
                    break;
                }
                Err(error) => {
                    let mut state = recording.lock();
                    state.errors.push(format!(
                        "{error} in {:?}",
                        String::from_utf8_lossy(&buffer[start..])
                    ));
                    state.connections[index].aborted = true;
                    drop(state);
                    let _ = stream.write_all(
                        b"HTTP/1.1 400 Bad Request\r\nX-Origin-Parse-Error: 1\r\nConnection: close\r\n\
                          Content-Length: 0\r\n\r\n",
                    );
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
        let read = loop {
            match stream.read(&mut chunk) {
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let mut state = recording.lock();
        match read {
            Ok(0) | Err(_) => {
                state.connections[index].closed = true;
                return;
            }
            Ok(read) => {
                state.connections[index]
                    .raw
                    .extend_from_slice(&chunk[..read]);
                buffer.extend_from_slice(&chunk[..read]);
            }
        }
    }
}
