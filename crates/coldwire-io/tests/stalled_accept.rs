//! A loop that stalls (a starved core, a stopped process) while clients queue up must not
//! take more of them from the listen queue than `max_connections` has room for: every
//! accepted socket holds a descriptor, and the process's open files are sized for the
//! limit. io_uring's multishot accept took the whole listen queue at the next
//! `io_uring_enter` (4,096 sockets with the default backlog); near the limit those waited
//! in the driver's backlog holding descriptors without slots, the process ran out of open
//! files, and the proxy's upstream `socket()` failed (503 `connection_limit_descriptors`,
//! issue 19, `results/2026-11-27-vm/slow-clients-limit-3/`). Now near the limit single-shot
//! accepts, as many as fit, replace the multishot one.
//!
//! Checked on every backend: the loop accepts a crowd of clients (the multishot accept,
//! where used, is still armed: the room holds a whole queue), then opens upstream
//! connections, as a proxy's requests do, which bring the room below a full queue, then
//! stalls while a second crowd, more than the room left, waits in the listen queue. After
//! every later turn the sockets the driver holds (open connections plus accepted ones
//! waiting for a slot) stay within the limit, and the clients that fit are all accepted.
//!
//! And as the proxy runs it (`reserve_upstream`, the default accept batch): every client's
//! request opens an upstream connection, so each client taken costs two slots. After the
//! stall the driver takes only the clients whose upstream connections fit too: every
//! request that came in is forwarded (none refused for want of a slot), and the sockets
//! held stay within the limit (with one slot counted per client, a stall at 60 open
//! connections let 60 clients in and their 45 requests' upstream connections brought the
//! sockets held to 165 of 150).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use std::io::Write;

use coldwire_io::{
    Backend, Completion, Driver, DriverConfig, UringOptions, WithDriver, is_out_of_connections,
};
use socket2::{Domain, Socket, Type};

/// The connection limit.
const LIMIT: usize = 150;
/// The listen backlog: the queue holds one more.
const BACKLOG: usize = 64;
/// Accepts per turn (small, so the room for a full queue is crossed within the test).
const BATCH: usize = 8;
/// The first crowd of clients: leaves room for a whole queue.
const FIRST: usize = 40;
/// Upstream connections opened next: the room left no longer holds a whole queue.
const UPSTREAM: usize = 60;
/// The crowd queued during the stall: more than the room left.
const SECOND: usize = 60;

fn listener() -> (TcpListener, SocketAddr) {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    socket.listen(BACKLOG as i32).unwrap();
    let listener: TcpListener = socket.into();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// The sockets `driver` holds: open connections and accepted ones waiting for a slot.
fn held<D: Driver>(driver: &D) -> u64 {
    let counters = driver.counters();
    counters.open_connections + counters.accept_backlog
}

/// What the loop saw.
#[derive(Debug, Default)]
struct Outcome {
    accepted: usize,
    /// The most sockets the driver held after a turn (open + waiting for a slot).
    most_held: u64,
    /// `accept_multishot_stops` at the end.
    multishot_stops: u64,
}

struct StallWithAQueue;

impl StallWithAQueue {
    /// Runs turns until `accepted` reaches `until` (or 10 s pass), noting what is held.
    fn turns<D: Driver>(driver: &mut D, outcome: &mut Outcome, until: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while outcome.accepted < until && Instant::now() < deadline {
            driver.wait(Some(Duration::from_millis(10))).unwrap();
            while let Some(completion) = driver.next_completion() {
                if matches!(completion, Completion::Accepted { .. }) {
                    outcome.accepted += 1;
                }
            }
            outcome.most_held = outcome.most_held.max(held(driver));
        }
    }
}

impl WithDriver for StallWithAQueue {
    type Output = Outcome;

    fn run<D: Driver + Send + 'static>(self, mut driver: D) -> Outcome {
        let (server, address) = listener();
        driver.listen(server).unwrap();
        // The origin: its kernel completes the connects; nothing is read.
        let (origin, origin_address) = listener();
        let mut outcome = Outcome::default();
        let mut clients: Vec<TcpStream> = (0..FIRST)
            .map(|_| TcpStream::connect(address).unwrap())
            .collect();
        Self::turns(&mut driver, &mut outcome, FIRST);
        assert_eq!(outcome.accepted, FIRST, "the first crowd was not accepted");
        for _ in 0..UPSTREAM {
            driver.connect(origin_address).unwrap();
        }
        // One more turn: the loop notices the room no longer holds a whole queue.
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while driver.next_completion().is_some() {}
        // The stall: the second crowd queues while the loop does not turn.
        clients.extend((0..SECOND).map(|_| TcpStream::connect(address).unwrap()));
        std::thread::sleep(Duration::from_millis(50));
        Self::turns(&mut driver, &mut outcome, LIMIT - UPSTREAM);
        // A few more turns: nothing more may come in.
        for _ in 0..5 {
            driver.wait(Some(Duration::from_millis(10))).unwrap();
            while let Some(completion) = driver.next_completion() {
                if matches!(completion, Completion::Accepted { .. }) {
                    outcome.accepted += 1;
                }
            }
            outcome.most_held = outcome.most_held.max(held(&driver));
        }
        outcome.multishot_stops = driver.counters().accept_multishot_stops;
        drop(clients);
        drop(origin);
        outcome
    }
}

fn check(backend: Backend) -> Option<Outcome> {
    if !coldwire_io::backend::test_can_run(backend) {
        return None;
    }
    let config = DriverConfig {
        max_connections: LIMIT,
        accept_batch: BATCH,
        ..DriverConfig::default()
    };
    let outcome = backend
        .dispatch(&config, UringOptions::default(), StallWithAQueue)
        .unwrap();
    assert!(
        outcome.most_held <= LIMIT as u64,
        "{backend}: after the stall the driver held more sockets than the limit has room \
         for: {outcome:?}"
    );
    assert_eq!(
        outcome.accepted,
        LIMIT - UPSTREAM,
        "{backend}: the clients that fit were not all accepted: {outcome:?}"
    );
    Some(outcome)
}

#[test]
fn uring_takes_no_more_from_a_full_queue_than_fits() {
    if let Some(outcome) = check(Backend::Uring) {
        assert!(
            outcome.multishot_stops > 0,
            "the multishot accept was never stopped near the limit: {outcome:?}"
        );
    }
}

#[test]
fn uring_poll_takes_no_more_from_a_full_queue_than_fits() {
    check(Backend::UringPoll);
}

#[test]
fn epoll_takes_no_more_from_a_full_queue_than_fits() {
    check(Backend::Epoll);
}

#[test]
fn poll_takes_no_more_from_a_full_queue_than_fits() {
    check(Backend::Poll);
}

#[test]
fn select_takes_no_more_from_a_full_queue_than_fits() {
    check(Backend::Select);
}

/// What the proxy-like loop saw.
#[derive(Debug, Default)]
struct ProxyOutcome {
    /// Requests whose upstream connection was opened.
    forwarded: usize,
    /// Requests refused for want of a slot (the proxy's 503s).
    refused: usize,
    most_held: u64,
}

/// Clients (each with its upstream connection) before the stall.
const PROXIED_FIRST: usize = 30;
/// Clients queued during the stall: more than the room left holds with their upstreams.
const PROXIED_SECOND: usize = 60;

struct ProxyStall;

impl ProxyStall {
    /// Runs turns as the proxy would until `forwarded` reaches `until` (or 10 s pass),
    /// then five more.
    fn turns<D: Driver>(
        driver: &mut D,
        origin: SocketAddr,
        outcome: &mut ProxyOutcome,
        until: usize,
    ) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut extra = 5;
        while extra > 0 && Instant::now() < deadline {
            if outcome.forwarded >= until {
                extra -= 1;
            }
            driver.wait(Some(Duration::from_millis(10))).unwrap();
            while let Some(completion) = driver.next_completion() {
                match completion {
                    Completion::Accepted { connection, .. } => driver.recv(connection),
                    Completion::Received { connection, buffer } => {
                        driver.recycle(buffer);
                        match driver.connect(origin) {
                            Ok(_) => outcome.forwarded += 1,
                            Err(error) => {
                                assert!(is_out_of_connections(&error), "{error}");
                                outcome.refused += 1;
                                driver.close(connection);
                            }
                        }
                    }
                    _ => {}
                }
            }
            outcome.most_held = outcome.most_held.max(held(driver));
        }
    }

    fn crowd(address: SocketAddr, clients: usize) -> Vec<TcpStream> {
        (0..clients)
            .map(|_| {
                let mut client = TcpStream::connect(address).unwrap();
                client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
                client
            })
            .collect()
    }
}

impl WithDriver for ProxyStall {
    type Output = ProxyOutcome;

    fn run<D: Driver + Send + 'static>(self, mut driver: D) -> ProxyOutcome {
        let (server, address) = listener();
        driver.listen(server).unwrap();
        let (origin, origin_address) = listener();
        let mut outcome = ProxyOutcome::default();
        let mut clients = Self::crowd(address, PROXIED_FIRST);
        Self::turns(&mut driver, origin_address, &mut outcome, PROXIED_FIRST);
        assert_eq!(outcome.forwarded, PROXIED_FIRST, "{outcome:?}");
        // The stall: the second crowd queues, with its requests, while the loop waits.
        clients.extend(Self::crowd(address, PROXIED_SECOND));
        std::thread::sleep(Duration::from_millis(50));
        let fit = (LIMIT - 2 * PROXIED_FIRST) / 2;
        Self::turns(
            &mut driver,
            origin_address,
            &mut outcome,
            PROXIED_FIRST + fit,
        );
        drop(clients);
        drop(origin);
        outcome
    }
}

fn check_proxy(backend: Backend) {
    if !coldwire_io::backend::test_can_run(backend) {
        return;
    }
    let config = DriverConfig {
        max_connections: LIMIT,
        reserve_upstream: true,
        ..DriverConfig::default()
    };
    let outcome = backend
        .dispatch(&config, UringOptions::default(), ProxyStall)
        .unwrap();
    assert!(
        outcome.most_held <= LIMIT as u64,
        "{backend}: clients and upstream connections held more sockets than the limit: \
         {outcome:?}"
    );
    assert_eq!(outcome.refused, 0, "{backend}: {outcome:?}");
    assert_eq!(
        outcome.forwarded,
        PROXIED_FIRST + (LIMIT - 2 * PROXIED_FIRST) / 2,
        "{backend}: the clients that fit with their upstream connections were not all \
         served: {outcome:?}"
    );
}

#[test]
fn uring_takes_only_the_clients_whose_upstreams_fit() {
    check_proxy(Backend::Uring);
}

#[test]
fn uring_poll_takes_only_the_clients_whose_upstreams_fit() {
    check_proxy(Backend::UringPoll);
}

#[test]
fn epoll_takes_only_the_clients_whose_upstreams_fit() {
    check_proxy(Backend::Epoll);
}

#[test]
fn poll_takes_only_the_clients_whose_upstreams_fit() {
    check_proxy(Backend::Poll);
}

#[test]
fn select_takes_only_the_clients_whose_upstreams_fit() {
    check_proxy(Backend::Select);
}
