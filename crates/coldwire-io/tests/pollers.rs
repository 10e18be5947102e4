//! The poller layer alone, on each readiness mechanism: descriptors above select's
//! historical 1,024 limit work, and only the ready one is reported among many idle ones.
//! (The drivers over these pollers are held to the driver contract in `conformance.rs`.)

use std::io::Write;
use std::time::Duration;

use coldwire_io::{EpollPoller, PollPoller, Poller, SelectPoller, UringPoller};

fn raise_open_files_limit() -> u64 {
    coldwire_io::sys::raise_open_files_limit().expect("raising RLIMIT_NOFILE")
}

/// Descriptors above select's historical 1,024 limit work, and only the ready one is
/// reported among many idle ones.
fn high_descriptors_among_many_idle_ones<P: Poller>() {
    assert!(
        raise_open_files_limit() >= 3000,
        "this test needs an open-files limit of at least 3,000"
    );
    let mut poller = P::new().unwrap();
    let mut pipes = Vec::new();
    for token in 0..1200 {
        let (reader, writer) = std::io::pipe().unwrap();
        use std::os::fd::AsRawFd;
        poller
            .register(reader.as_raw_fd(), token, coldwire_io::Interest::READABLE)
            .unwrap();
        pipes.push((reader, writer));
    }
    use std::os::fd::AsRawFd;
    // Other tests open and close descriptors concurrently, so find the highest one we got.
    let highest_token = (0..pipes.len())
        .max_by_key(|&token| pipes[token].0.as_raw_fd())
        .unwrap();
    let highest = pipes[highest_token].0.as_raw_fd();
    assert!(
        highest > 2048,
        "descriptor numbers must pass 1,024 twice over, got {highest}"
    );
    let mut events = Vec::new();
    poller.wait(&mut events, Some(Duration::ZERO)).unwrap();
    assert!(
        events.is_empty(),
        "idle descriptors are not reported: {events:?}"
    );
    pipes[highest_token].1.write_all(b"x").unwrap();
    poller
        .wait(&mut events, Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].token, highest_token);
    assert!(events[0].readable);
    // Deregistering descriptors (the ready one among them) leaves the rest quiet.
    for (reader, _) in pipes.drain(..) {
        poller.deregister(reader.as_raw_fd()).unwrap();
    }
    events.clear();
    poller.wait(&mut events, Some(Duration::ZERO)).unwrap();
    assert!(events.is_empty());
}

#[test]
fn select() {
    high_descriptors_among_many_idle_ones::<SelectPoller>();
}

#[test]
fn poll() {
    high_descriptors_among_many_idle_ones::<PollPoller>();
}

#[test]
fn epoll() {
    high_descriptors_among_many_idle_ones::<EpollPoller>();
}

#[test]
fn uring_poll() {
    if coldwire_io::backend::test_can_run(coldwire_io::Backend::UringPoll) {
        high_descriptors_among_many_idle_ones::<UringPoller>();
    }
}
