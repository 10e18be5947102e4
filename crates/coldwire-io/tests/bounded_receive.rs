//! `Driver::recv_at_most` on every driver: a bounded receive takes no more than asked on
//! the readiness drivers (the io_uring driver may ignore the bound: it only copies more),
//! and what it leaves in the socket comes with the next plain receive — without new bytes
//! arriving, so an edge-triggered poller must not wait for an edge that already passed.
//! The bound also applies when a receive was already armed before it (an idle pooled origin
//! connection keeps one armed to notice a close; its next data is a response head).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use coldwire_io::{
    Backend, Completion, ConnectionId, Driver, DriverConfig, EpollPoller, PollPoller,
    ReadinessDriver, SelectPoller, Splice, UringDriver, UringOptions, UringPoller,
};

fn wait_for<D: Driver>(driver: &mut D, mut until: impl FnMut(&mut D, Completion) -> bool) {
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

/// The bytes of the next receive on `connection`.
fn receive<D: Driver>(driver: &mut D, connection: ConnectionId) -> Vec<u8> {
    let mut bytes = None;
    wait_for(driver, |driver, completion| match completion {
        Completion::Received {
            connection: from,
            buffer,
        } if from == connection => {
            bytes = Some(buffer.filled().to_vec());
            driver.recycle(buffer);
            true
        }
        Completion::Received { buffer, .. } => {
            driver.recycle(buffer);
            false
        }
        other => panic!("unexpected {other:?}"),
    });
    bytes.unwrap_or_default()
}

/// A connection accepted by `driver` and the peer's end of it.
fn accepted<D: Driver>(driver: &mut D) -> (ConnectionId, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    driver.listen(listener).unwrap();
    let peer = TcpStream::connect(address).unwrap();
    let mut connection = None;
    wait_for(driver, |_, completion| {
        if let Completion::Accepted { connection: id, .. } = completion {
            connection = Some(id);
            true
        } else {
            false
        }
    });
    (connection.unwrap(), peer)
}

fn bounded_receive_leaves_the_rest_for_the_next<D: Driver>(
    mut driver: D,
    honours_bound: bool,
    armed_before: bool,
) {
    let (connection, mut peer) = accepted(&mut driver);
    if armed_before {
        // Armed with nothing to read yet: the driver waits for readiness.
        driver.recv(connection);
        driver.wait(Some(Duration::from_millis(20))).unwrap();
        assert!(driver.next_completion().is_none(), "nothing was sent yet");
    }
    driver.splicer().unwrap().recv_at_most(connection, 1000);
    let message: Vec<u8> = (0..10_000u32).map(|index| (index % 251) as u8).collect();
    peer.write_all(&message).unwrap();
    // Let all of it arrive before the first receive, as one edge.
    std::thread::sleep(Duration::from_millis(50));
    let mut received = receive(&mut driver, connection);
    if honours_bound {
        assert_eq!(
            received.len(),
            1000,
            "a bounded receive takes what was asked"
        );
    }
    while received.len() < message.len() {
        driver.recv(connection);
        received.extend(receive(&mut driver, connection));
    }
    assert!(received == message, "bytes lost or reordered");
}

fn check<D: Driver>(backend: Backend, make: impl Fn() -> D, honours_bound: bool) {
    if let Err(reason) = backend.probe() {
        assert!(
            matches!(backend, Backend::Uring | Backend::UringPoll),
            "{backend} must work here: {reason}"
        );
        println!("skipped: {backend} is unavailable here: {reason}");
        return;
    }
    bounded_receive_leaves_the_rest_for_the_next(make(), honours_bound, false);
    bounded_receive_leaves_the_rest_for_the_next(make(), honours_bound, true);
}

#[test]
fn select() {
    check(
        Backend::Select,
        || ReadinessDriver::<SelectPoller>::new(DriverConfig::default()).unwrap(),
        true,
    );
}

#[test]
fn poll() {
    check(
        Backend::Poll,
        || ReadinessDriver::<PollPoller>::new(DriverConfig::default()).unwrap(),
        true,
    );
}

#[test]
fn epoll() {
    check(
        Backend::Epoll,
        || ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap(),
        true,
    );
}

#[test]
fn uring_poll() {
    check(
        Backend::UringPoll,
        || ReadinessDriver::<UringPoller>::new(DriverConfig::default()).unwrap(),
        true,
    );
}

#[test]
fn uring() {
    check(
        Backend::Uring,
        || UringDriver::new(DriverConfig::default(), UringOptions::default()).unwrap(),
        false,
    );
}
