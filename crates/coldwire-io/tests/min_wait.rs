//! The uring driver with a minimum wait (`UringOptions::min_wait`, `--uring-min-wait`):
//! its waits batch completions once they come fast enough, and the driver contract holds —
//! every message of several clients echoed in order, every end of stream reported. (How
//! much CPU it saves and what latency it costs is measured by the `slow-clients`
//! experiment, not here.) The clients keep up their ping-pong for at least `RUN_FOR`:
//! the driver batches only once it has seen completions come fast over its 100 ms rate
//! window, which a fast machine's 1,000 round trips could finish before.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coldwire_io::{
    Backend, Chunk, Completion, ConnectionId, Driver, DriverConfig, Flush, UringDriver,
    UringOptions,
};

mod support;

use support::listener;

const CLIENTS: usize = 8;
/// Round trips each client makes at least.
const ROUND_TRIPS: usize = 1000;
/// How long the clients keep going at least (past the driver's 100 ms rate window).
const RUN_FOR: Duration = Duration::from_millis(500);

#[test]
fn a_batching_uring_driver_keeps_the_contract() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
        return;
    }
    let options = UringOptions {
        min_wait: Some(Duration::from_millis(1)),
        ..UringOptions::default()
    };
    let mut driver = UringDriver::new(DriverConfig::default(), options).unwrap();
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(address).unwrap();
                let mut round = 0;
                while round < ROUND_TRIPS || !stop.load(Ordering::Relaxed) {
                    let message = format!("{client:02}-{:04}", round % 10_000);
                    round += 1;
                    stream.write_all(message.as_bytes()).unwrap();
                    let mut echoed = [0u8; 7];
                    stream.read_exact(&mut echoed).unwrap();
                    assert_eq!(&echoed, message.as_bytes());
                }
            })
        })
        .collect();
    let mut open: Vec<ConnectionId> = Vec::new();
    let mut ended = 0;
    while ended < CLIENTS {
        if started.elapsed() >= RUN_FOR {
            stop.store(true, Ordering::Relaxed);
        }
        driver.wait(Some(Duration::from_millis(100))).unwrap();
        while let Some(completion) = driver.next_completion() {
            match completion {
                Completion::Accepted { connection, .. } => {
                    open.push(connection);
                    driver.recv(connection);
                }
                Completion::Received { connection, buffer } => {
                    let mut echo = driver.take_vec();
                    echo.extend_from_slice(buffer.filled());
                    driver.recycle(buffer);
                    driver.send(connection, Chunk::Owned(echo));
                    assert!(matches!(driver.flush(connection), Flush::Done));
                    driver.recv(connection);
                }
                Completion::PeerClosed { connection } => {
                    driver.close(connection);
                    ended += 1;
                }
                Completion::Sent { .. } | Completion::Woken => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    for client in clients {
        client.join().unwrap();
    }
    assert_eq!(open.len(), CLIENTS);
    let counters = driver.counters();
    assert!(
        counters.uring_batched_waits > 0,
        "{CLIENTS} clients in ping-pong come fast enough for a batch per millisecond"
    );
    assert!(counters.uring_batched_waits <= counters.wait_calls);
}
