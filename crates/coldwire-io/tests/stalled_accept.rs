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

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use coldwire_io::{Backend, Completion, Driver, DriverConfig, UringOptions, WithDriver};
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
            let counters = driver.counters();
            let held = counters.open_connections + counters.accept_backlog;
            outcome.most_held = outcome.most_held.max(held);
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
            let counters = driver.counters();
            outcome.most_held = outcome
                .most_held
                .max(counters.open_connections + counters.accept_backlog);
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
