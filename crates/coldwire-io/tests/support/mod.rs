//! What the driver tests share: a listener on a free port, running a driver's loop until a
//! completion is seen, accepting and receiving.

#![allow(dead_code, reason = "each test binary uses part of the support")]

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use coldwire_io::{Completion, ConnectionId, Driver};

/// A listener on 127.0.0.1, port 0, and its address.
pub fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// Runs the loop until `until` returns true for a completion, or panics after 20 s.
pub fn run_until<D: Driver>(driver: &mut D, mut until: impl FnMut(&mut D, Completion) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for a completion"
        );
        driver.wait(Some(Duration::from_millis(100))).unwrap();
        while let Some(completion) = driver.next_completion() {
            if until(driver, completion) {
                return;
            }
        }
    }
}

/// Accepts on the test's own `listener` while running `driver`'s loop (its completions
/// stay queued for the test): io_uring submits a connect with the loop turn's other
/// submissions, so the connection may not exist before the driver waits. Panics after 20 s.
pub fn accept_while_running<D: Driver>(
    driver: &mut D,
    listener: &std::net::TcpListener,
) -> (std::net::TcpStream, SocketAddr) {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                stream.set_nonblocking(false).unwrap();
                return (stream, peer);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(error) => panic!("accept: {error}"),
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for a connection"
        );
        driver.wait(Some(Duration::from_millis(10))).unwrap();
    }
}

/// The next connection `driver` accepts.
pub fn accept_one<D: Driver>(driver: &mut D) -> ConnectionId {
    let mut accepted = None;
    run_until(driver, |_, completion| match completion {
        Completion::Accepted { connection, .. } => {
            accepted = Some(connection);
            true
        }
        _ => false,
    });
    accepted.unwrap()
}

/// Receives on `id` until at least `wanted` bytes came; any other completion is a failure.
pub fn receive_text<D: Driver>(driver: &mut D, id: ConnectionId, wanted: usize) -> Vec<u8> {
    let mut data = Vec::new();
    driver.recv(id);
    run_until(driver, |driver, completion| match completion {
        Completion::Received { connection, buffer } if connection == id => {
            data.extend_from_slice(buffer.filled());
            driver.recycle(buffer);
            if data.len() >= wanted {
                return true;
            }
            driver.recv(id);
            false
        }
        other => panic!("unexpected {other:?}"),
    });
    data
}

/// The completion-native driver counts operations as submissions, not system calls.
pub fn is_uring_driver<D: Driver>(driver: &D) -> bool {
    driver.backend_name() == coldwire_io::UringDriver::NAME
}
