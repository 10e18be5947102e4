//! The io_uring driver's provided-buffer ring puts its buffers into circulation as they are
//! needed: a loop that receives one message per turn keeps cycling through the first 64
//! (the ring is first in, first out: with every buffer provided, a slow server touched
//! all of them, 32 MiB and a page fault per page, about three per request at 200
//! requests/s — issue 19), and a burst that needs more (here 300 receives that complete
//! as they are submitted, in one turn) gets them, every byte still received in order.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use coldwire_io::{Completion, ConnectionId, Driver, DriverConfig, UringDriver, UringOptions};

mod support;

use support::{accept_one, listener, receive_text};

/// Receives through the ring only (a light turn would read a first receive itself).
fn driver() -> UringDriver {
    let config = DriverConfig {
        max_connections: 512,
        ..DriverConfig::default()
    };
    let options = UringOptions {
        ring_only: true,
        ..UringOptions::default()
    };
    UringDriver::new(config, options).unwrap()
}

fn circulating(driver: &UringDriver) -> u64 {
    driver.counters().uring_ring_buffers
}

#[test]
fn one_message_per_turn_keeps_to_the_first_buffers() {
    if !coldwire_io::backend::test_can_run(coldwire_io::Backend::Uring) {
        return;
    }
    let mut driver = driver();
    let (server, address) = listener();
    driver.listen(server).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    let first = circulating(&driver);
    assert_eq!(first, 64, "buffers in circulation at first");
    for round in 0..300u32 {
        let message = format!("message {round:05}\n");
        client.write_all(message.as_bytes()).unwrap();
        let received = receive_text(&mut driver, id, message.len());
        assert_eq!(received, message.as_bytes());
    }
    assert_eq!(
        circulating(&driver),
        first,
        "300 messages one at a time needed no more buffers"
    );
}

#[test]
fn a_burst_brings_more_buffers_and_loses_nothing() {
    if !coldwire_io::backend::test_can_run(coldwire_io::Backend::Uring) {
        return;
    }
    const CLIENTS: usize = 300;
    const BYTES: usize = 1000;
    let mut driver = driver();
    let (server, address) = listener();
    driver.listen(server).unwrap();
    let mut clients = Vec::new();
    let mut ids: Vec<ConnectionId> = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(TcpStream::connect(address).unwrap());
        ids.push(accept_one(&mut driver));
    }
    // Everything has arrived before the receives are armed, all in one turn: each
    // completes as it is submitted, before the driver can give a buffer back. (Receives
    // armed first would complete in the kernel's task-work batches of about 20 per wait.)
    for (index, client) in clients.iter_mut().enumerate() {
        client.write_all(&vec![index as u8; BYTES]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    for id in &ids {
        driver.recv(*id);
    }
    let mut received = vec![Vec::new(); CLIENTS];
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.iter().any(|data| data.len() < BYTES) {
        assert!(Instant::now() < deadline, "not every byte arrived");
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while let Some(completion) = driver.next_completion() {
            if let Completion::Received { connection, buffer } = completion {
                let index = ids.iter().position(|id| *id == connection).unwrap();
                received[index].extend_from_slice(buffer.filled());
                driver.recycle(buffer);
                driver.recv(connection);
            }
        }
    }
    for (index, data) in received.iter().enumerate() {
        assert_eq!(data, &vec![index as u8; BYTES], "client {index}");
    }
    assert!(
        circulating(&driver) > 64,
        "a burst of {CLIENTS} receives in one turn brought no more buffers: {:?}",
        driver.counters()
    );
}
