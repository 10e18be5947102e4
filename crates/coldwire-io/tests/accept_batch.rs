//! A loop turn adopts new connections in batches of `DriverConfig::accept_batch`, never a
//! whole listen queue at once: on the readiness drivers a batch of `accept4` calls per
//! ready listener (a turn may run two or three: the listener's event and the listener left
//! ready by the last turn), on io_uring at most one batch per turn (its multishot accept is
//! cancelled once a turn adopted its batch; what the kernel accepted meanwhile waits for
//! the next turn). Without the bound, io_uring's multishot accept handed the
//! whole listen queue to the server in one turn: near `--max-connections` those clients
//! took every slot before their requests could open upstream connections, which then
//! failed with `connection_limit_reached` (issue 19). Every client is still accepted, and
//! accepting goes on after a throttled turn. At the limit, a slot freed by a close goes to
//! a connect of the same turn before a client waiting to be accepted (io_uring adopted its
//! backlog inside the close).

use std::net::TcpStream;
use std::time::Duration;

use coldwire_io::{
    Backend, Completion, Driver, DriverConfig, EpollPoller, ReadinessDriver, UringDriver,
    UringOptions,
};

mod support;

use support::{accept_one, listener};

const BATCH: usize = 4;
const CLIENTS: usize = 40;

fn config() -> DriverConfig {
    DriverConfig {
        accept_batch: BATCH,
        ..DriverConfig::default()
    }
}

#[test]
fn epoll_adopts_in_batches() {
    let driver = ReadinessDriver::<EpollPoller>::new(config()).unwrap();
    adopts_in_batches(driver, CLIENTS / 2);
}

#[test]
fn uring_adopts_at_most_a_batch_per_turn() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
        return;
    }
    let driver = UringDriver::new(config(), UringOptions::default()).unwrap();
    adopts_in_batches(driver, BATCH);
}

/// Accepts `CLIENTS` queued connections, at most `most` in one turn.
fn adopts_in_batches<D: Driver>(mut driver: D, most: usize) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    // All of them queued in the kernel before the loop's first turn.
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let mut accepted = 0;
    let mut turns = 0;
    while accepted < CLIENTS {
        turns += 1;
        assert!(turns < 1000, "only {accepted} of {CLIENTS} accepted");
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        let mut this_turn = 0;
        while let Some(completion) = driver.next_completion() {
            if matches!(completion, Completion::Accepted { .. }) {
                this_turn += 1;
            }
        }
        assert!(
            this_turn <= most,
            "{this_turn} connections adopted in one turn (batch {BATCH}, at most {most})"
        );
        accepted += this_turn;
    }
    let counters = driver.counters();
    assert_eq!(counters.accepted, CLIENTS as u64);
    assert_eq!(counters.accept_backlog, 0);
    // Accepting goes on after the throttled turns.
    let _late = TcpStream::connect(address).unwrap();
    accept_one(&mut driver);
    drop(clients);
}

fn limited() -> DriverConfig {
    DriverConfig {
        max_connections: 2,
        ..DriverConfig::default()
    }
}

#[test]
fn epoll_gives_a_freed_slot_to_a_connect_before_a_waiting_client() {
    let driver = ReadinessDriver::<EpollPoller>::new(limited()).unwrap();
    freed_slot_goes_to_a_connect_first(driver);
}

#[test]
fn uring_gives_a_freed_slot_to_a_connect_before_a_waiting_client() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
        return;
    }
    let driver = UringDriver::new(limited(), UringOptions::default()).unwrap();
    freed_slot_goes_to_a_connect_first(driver);
}

/// At the connection limit a client waits (in the listen queue, or accepted by the kernel
/// in io_uring's backlog); a slot freed by a close is taken by a connect in the same turn
/// — as a proxy's request opening its upstream connection — and the waiting client is
/// adopted at a later turn, not in the close.
fn freed_slot_goes_to_a_connect_first<D: Driver>(mut driver: D) {
    let (server, address) = listener();
    driver.listen(server).unwrap();
    let _first_client = TcpStream::connect(address).unwrap();
    let first = accept_one(&mut driver);
    let _second_client = TcpStream::connect(address).unwrap();
    let second = accept_one(&mut driver);
    let _waiting = TcpStream::connect(address).unwrap();
    for _ in 0..5 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while let Some(completion) = driver.next_completion() {
            assert!(
                !matches!(completion, Completion::Accepted { .. }),
                "accepted beyond the limit"
            );
        }
    }
    let (origin, origin_address) = listener();
    driver.close(first);
    let upstream = driver.connect(origin_address);
    assert!(
        upstream.is_ok(),
        "the freed slot went to the waiting client: {upstream:?}"
    );
    driver.close(second);
    accept_one(&mut driver);
    drop(origin);
}
