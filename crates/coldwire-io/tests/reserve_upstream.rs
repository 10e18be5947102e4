//! `DriverConfig::reserve_upstream` (the proxy's setting): near `max_connections` a driver
//! keeps a second slot free for each client it accepted until that client's first request
//! has had its loop turn, since the request then opens an upstream connection. Without it
//! a burst of waiting clients was accepted into every free slot and their requests found
//! none left for their upstream connections (`ConnectionLimitReached`, a 503
//! `connection_limit_reached` in the proxy; issue 19): on io_uring always, since a
//! client's request arrives one turn after its accept and the next turn's accepts took the
//! slots, and on the readiness drivers when one batch of accepts filled the slots. Checked
//! on every backend with a loop that acts as the proxy: each request opens an upstream
//! connection, and each answered exchange closes both connections.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use coldwire_io::{
    Backend, Completion, ConnectionId, Driver, DriverConfig, UringOptions, WithDriver,
    is_out_of_connections,
};

mod support;

use support::listener;

/// The connection limit: room for this many clients with their upstream connections at
/// once is half of it.
const LIMIT: usize = 8;
/// Clients queued at once, before the loop's first turn (twice what fits).
const CLIENTS: usize = LIMIT;

fn config() -> DriverConfig {
    DriverConfig {
        max_connections: LIMIT,
        reserve_upstream: true,
        ..DriverConfig::default()
    }
}

/// What the proxy-like loop saw.
#[derive(Debug, Default)]
struct Outcome {
    /// Requests whose upstream connection was opened.
    forwarded: usize,
    /// Requests refused for want of a slot (the proxy's 503s).
    refused: usize,
    /// Clients accepted.
    accepted: usize,
    /// The driver's `accept_holds` at the end.
    holds: u64,
}

struct ProxyLike;

impl WithDriver for ProxyLike {
    type Output = Outcome;

    fn run<D: Driver + Send + 'static>(self, mut driver: D) -> Outcome {
        let (server, address) = listener();
        // The origin: its kernel completes the connects; nothing is read.
        let (origin, origin_address) = listener();
        driver.listen(server).unwrap();
        let clients: Vec<TcpStream> = (0..CLIENTS)
            .map(|_| {
                let mut client = TcpStream::connect(address).unwrap();
                client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
                client
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let mut outcome = Outcome::default();
        // Upstream connection → its client.
        let mut exchanges: Vec<(ConnectionId, ConnectionId)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while outcome.forwarded + outcome.refused < CLIENTS {
            assert!(
                Instant::now() < deadline,
                "not every request was handled: {outcome:?}"
            );
            driver.wait(Some(Duration::from_millis(10))).unwrap();
            while let Some(completion) = driver.next_completion() {
                match completion {
                    Completion::Accepted { connection, .. } => {
                        outcome.accepted += 1;
                        driver.recv(connection);
                    }
                    Completion::Received { connection, buffer } => {
                        driver.recycle(buffer);
                        match driver.connect(origin_address) {
                            Ok(upstream) => {
                                outcome.forwarded += 1;
                                exchanges.push((upstream, connection));
                            }
                            Err(error) => {
                                assert!(is_out_of_connections(&error), "{error}");
                                outcome.refused += 1;
                                driver.close(connection);
                            }
                        }
                    }
                    Completion::Connected { connection } => {
                        // The exchange is answered: both connections close, as the
                        // proxy's client and a surplus upstream connection would.
                        if let Some(at) = exchanges.iter().position(|(up, _)| *up == connection) {
                            let (upstream, client) = exchanges.swap_remove(at);
                            driver.close(upstream);
                            driver.close(client);
                        }
                    }
                    _ => {}
                }
            }
        }
        outcome.holds = driver.counters().accept_holds;
        drop(clients);
        drop(origin);
        outcome
    }
}

fn check(backend: Backend) {
    if !coldwire_io::backend::test_can_run(backend) {
        return;
    }
    let outcome = backend
        .dispatch(&config(), UringOptions::default(), ProxyLike)
        .unwrap();
    assert_eq!(
        outcome.refused, 0,
        "{backend}: accepted clients took the slots their requests' upstream connections \
         needed: {outcome:?}"
    );
    assert_eq!(outcome.forwarded, CLIENTS, "{backend}: {outcome:?}");
    assert_eq!(outcome.accepted, CLIENTS, "{backend}: {outcome:?}");
    assert!(
        outcome.holds > 0,
        "{backend}: accepting never stopped short of the limit: {outcome:?}"
    );
}

#[test]
fn epoll_keeps_a_slot_for_each_new_clients_upstream() {
    check(Backend::Epoll);
}

#[test]
fn uring_keeps_a_slot_for_each_new_clients_upstream() {
    check(Backend::Uring);
}

#[test]
fn uring_poll_keeps_a_slot_for_each_new_clients_upstream() {
    check(Backend::UringPoll);
}

#[test]
fn poll_keeps_a_slot_for_each_new_clients_upstream() {
    check(Backend::Poll);
}

#[test]
fn select_keeps_a_slot_for_each_new_clients_upstream() {
    check(Backend::Select);
}

/// Without the setting (a server that opens nothing per request) every slot takes a
/// client.
#[test]
fn without_the_reserve_every_slot_takes_a_client() {
    struct FillUp;
    impl WithDriver for FillUp {
        type Output = usize;
        fn run<D: Driver + Send + 'static>(self, mut driver: D) -> usize {
            let (server, address) = listener();
            driver.listen(server).unwrap();
            let clients: Vec<TcpStream> = (0..LIMIT)
                .map(|_| TcpStream::connect(address).unwrap())
                .collect();
            let mut accepted = 0;
            let deadline = Instant::now() + Duration::from_secs(20);
            while accepted < LIMIT && Instant::now() < deadline {
                driver.wait(Some(Duration::from_millis(10))).unwrap();
                while let Some(completion) = driver.next_completion() {
                    if matches!(completion, Completion::Accepted { .. }) {
                        accepted += 1;
                    }
                }
            }
            drop(clients);
            accepted
        }
    }
    for backend in [Backend::Epoll, Backend::Uring] {
        if !coldwire_io::backend::test_can_run(backend) {
            continue;
        }
        let config = DriverConfig {
            max_connections: LIMIT,
            ..DriverConfig::default()
        };
        let accepted = backend
            .dispatch(&config, UringOptions::default(), FillUp)
            .unwrap();
        assert_eq!(accepted, LIMIT, "{backend}");
    }
}
