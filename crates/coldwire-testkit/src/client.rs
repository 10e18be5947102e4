//! Raw clients: a TCP connection with timeouts, one request and its response, reads until
//! the peer closes, and a CONNECT through a proxy.

use std::io::{self, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::proxy::Proxy;
use crate::response::{Response, read_response};
use crate::server::Server;

/// How long a connect, a read or a write of these clients may block (a bound for a
/// failing test; a test that expects a timeout sets a shorter one itself).
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);

/// A TCP connection to `address` with [`READ_TIMEOUT`] on connecting, reads and writes.
pub fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&address, READ_TIMEOUT)
        .unwrap_or_else(|error| panic!("connect {address}: {error}"));
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("setting a read timeout");
    stream
        .set_write_timeout(Some(READ_TIMEOUT))
        .expect("setting a write timeout");
    stream
}

/// Sends `request` to `server` on a new connection and reads one response.
pub fn exchange(server: &Server, request: &[u8]) -> Response {
    let mut stream = server.connect();
    stream.write_all(request).expect("sending the request");
    let mut reader = BufReader::new(stream);
    read_response(&mut reader, request.starts_with(b"HEAD ")).unwrap_or_else(|error| {
        panic!(
            "no response to {:?}: {error}",
            String::from_utf8_lossy(request)
        )
    })
}

/// `GET path HTTP/1.1` with a Host field, keeping the connection open.
pub fn get_request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}

/// One `read`, retried when a signal interrupts it (an io_uring probe in the test process
/// can make blocking reads return `EINTR`).
pub fn read_once(stream: &mut TcpStream, buffer: &mut [u8]) -> io::Result<usize> {
    for _ in 0..100 {
        match stream.read(buffer) {
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
    stream.read(buffer)
}

/// Reads until the peer closes; returns what arrived and whether it ended in a clean EOF
/// (false for a reset). A read timeout is an error: the peer did not close.
pub fn read_until_closed(stream: &mut TcpStream) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok((out, true)),
            Ok(count) => out.extend_from_slice(&chunk[..count]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return Ok((out, false)),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// Reads until the connection closes (bounded by the stream's read timeout), whatever
/// ends it.
pub fn read_rest(stream: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    rest
}

/// Sends `CONNECT target` on a new connection to the proxy; returns the connection and
/// the answer's head (and any body bytes that came with it).
pub fn connect_through(proxy: &Proxy, target: &str) -> (TcpStream, String) {
    let mut stream = connect(proxy.address);
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .expect("sending CONNECT");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
        match read_once(&mut stream, &mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) => {
                head.extend_from_slice(b"<end of stream>");
                break;
            }
            Err(error) => {
                head.extend_from_slice(format!("<{error}>").as_bytes());
                break;
            }
        }
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

/// GET `target` (a path, or an absolute URL for a proxy) on a new connection with
/// `Connection: close`, and everything the server sent until it closed, as text.
pub fn get_until_closed(address: SocketAddr, target: &str) -> String {
    let mut stream = connect(address);
    stream
        .write_all(
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap_or_else(|error| panic!("sending to {address}: {error}"));
    String::from_utf8_lossy(&read_rest(&mut stream)).into_owned()
}
