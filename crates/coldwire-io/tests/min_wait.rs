//! The uring driver with a minimum wait (`UringOptions::min_wait`, `--uring-min-wait`):
//! its waits batch completions once they come fast enough, and the driver contract holds —
//! every message of several clients echoed in order, every end of stream reported. (How
//! much CPU it saves and what latency it costs is measured by the `slow-clients`
//! experiment, not here.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use coldwire_io::{
    Backend, Chunk, Completion, ConnectionId, Driver, DriverConfig, Flush, UringDriver,
    UringOptions,
};

mod support;

use support::listener;

const CLIENTS: usize = 8;
const ROUND_TRIPS: usize = 1000;

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
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(address).unwrap();
                for round in 0..ROUND_TRIPS {
                    let message = format!("{client:02}-{round:04}");
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
