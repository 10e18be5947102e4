//! File output on every driver (`Chunk::File`: `sendfile` on the readiness driver, linked
//! `SPLICE` pieces on io_uring): ranges arrive exact, consecutive files never mix, and a
//! file send blocked on a peer that stopped reading ends with its connection; `cold.rs`:
//! files whose pages are not in the page cache (read ahead off the loop).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use coldwire_io::{Chunk, Completion, Driver, Flush};

use crate::support::{accept_one, is_uring_driver, listener, run_until};

pub mod cold;

pub fn sends_files_with_sendfile<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    let mut file = tempfile();
    let content: Vec<u8> = (0..300_000u32)
        .map(|index| (index * 7 % 256) as u8)
        .collect();
    file.write_all(&content).unwrap();
    let file = Arc::new(file);
    let mut head = driver.take_vec();
    head.extend_from_slice(b"HEAD");
    driver.send(id, Chunk::Owned(head));
    driver.send(
        id,
        Chunk::File {
            file: file.clone(),
            offset: 1000,
            length: 200_000,
        },
    );
    let reader = std::thread::spawn(move || {
        let mut received = vec![0u8; 200_004];
        client.read_exact(&mut received).unwrap();
        received
    });
    if let Flush::Pending = driver.flush(id) {
        run_until(&mut driver, |_, completion| {
            matches!(completion, Completion::Sent { .. })
        });
    }
    let received = reader.join().unwrap();
    assert_eq!(&received[..4], b"HEAD");
    assert!(received[4..] == content[1000..201_000]);
    assert!(is_uring_driver(&driver) || driver.counters().sendfile_calls >= 1);
}

/// Different files, one after another on different connections, each arrive intact: no
/// file bytes buffered for one connection (a send buffer, a pipe) leak into the next
/// file's response. For the uring driver, the submissions and completions of the file
/// path are counted.
pub fn consecutive_files_on_different_connections_arrive_intact<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    for (round, seed) in [3u32, 11, 29].into_iter().enumerate() {
        let mut client = TcpStream::connect(address).unwrap();
        let id = accept_one(&mut driver);
        let mut file = tempfile();
        let content: Vec<u8> = (0..700_000u32)
            .map(|index| (index.wrapping_mul(seed) % 253) as u8)
            .collect();
        file.write_all(&content).unwrap();
        let before = driver.counters();
        driver.send(
            id,
            Chunk::File {
                file: Arc::new(file),
                offset: 0,
                length: content.len() as u64,
            },
        );
        let reader = std::thread::spawn(move || {
            let mut received = vec![0u8; 700_000];
            client.read_exact(&mut received).unwrap();
            received
        });
        if let Flush::Pending = driver.flush(id) {
            run_until(
                &mut driver,
                |_, completion| matches!(completion, Completion::Sent { connection } if connection == id),
            );
        }
        let received = reader.join().unwrap();
        assert!(
            received == content,
            "round {round}: the file arrived altered"
        );
        let after = driver.counters();
        if is_uring_driver(&driver) {
            assert!(
                after.uring_submissions >= before.uring_submissions + 2
                    && after.uring_completions >= before.uring_completions + 2,
                "round {round}: file operations are counted"
            );
        }
        driver.close(id);
    }
}

/// A large file sent to a peer that stops reading: closing the connection frees its slot
/// and ends the connection for the peer (no send left blocked on the peer forever).
pub fn closing_a_blocked_file_send_frees_the_slot<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&address.into()).unwrap();
    let mut client: TcpStream = socket.into();
    let id = accept_one(&mut driver);
    let mut file = tempfile();
    file.write_all(&vec![7u8; 8 << 20]).unwrap();
    driver.send(
        id,
        Chunk::File {
            file: Arc::new(file),
            offset: 0,
            length: 8 << 20,
        },
    );
    assert!(
        matches!(driver.flush(id), Flush::Pending),
        "8 MiB cannot go at once"
    );
    for _ in 0..10 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while driver.next_completion().is_some() {}
    }
    driver.close(id);
    for _ in 0..20 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while driver.next_completion().is_some() {}
    }
    let _next = TcpStream::connect(address).unwrap();
    let next = accept_one(&mut driver);
    assert_eq!(
        next.index(),
        id.index(),
        "the closed connection's slot is free again"
    );
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 16];
    let mut total = 0usize;
    loop {
        match client.read(&mut sink) {
            Ok(0) => break,
            Ok(count) => total += count,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the closed connection must end, not time out: {error}"),
        }
    }
    assert!(total < 8 << 20, "the file was cut, not sent whole");
}

fn tempfile() -> std::fs::File {
    let path = std::env::temp_dir().join(format!(
        "coldwire-io-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file
}
