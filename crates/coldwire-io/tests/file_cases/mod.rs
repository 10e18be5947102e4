//! File output on every driver (`Chunk::File`: `sendfile` on the readiness driver, linked
//! `SPLICE` pieces on io_uring): ranges arrive exact, consecutive files never mix, and a
//! file send blocked on a peer that stopped reading ends with its connection; `cold.rs`:
//! files whose pages are not in the page cache (read ahead off the loop). Also file work
//! (`Driver::submit_file`): ring operations on io_uring, handed back elsewhere.

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

/// File work (the disk store's segment writes): a write in two pieces, then a data sync,
/// each the follow-up of the one before.
struct Steps {
    file: Arc<std::fs::File>,
    bytes: Vec<u8>,
    step: usize,
    results: Arc<std::sync::Mutex<Vec<usize>>>,
}

// SAFETY: the work owns its file (kept open) and its bytes (a Vec it never changes) until
// its last `complete`.
unsafe impl coldwire_io::FileWork for Steps {
    fn request(&self) -> coldwire_io::FileRequest {
        use std::os::fd::AsRawFd;
        let fd = self.file.as_raw_fd();
        match self.step {
            0 => coldwire_io::FileRequest::Write {
                fd,
                offset: 0,
                bytes: self.bytes.as_ptr(),
                length: 5,
            },
            1 => coldwire_io::FileRequest::Write {
                fd,
                offset: 5,
                bytes: self.bytes[5..].as_ptr(),
                length: (self.bytes.len() - 5) as u32,
            },
            _ => coldwire_io::FileRequest::DataSync { fd },
        }
    }

    fn complete(
        mut self: Box<Self>,
        result: std::io::Result<usize>,
    ) -> Option<Box<dyn coldwire_io::FileWork>> {
        self.results.lock().unwrap().push(result.unwrap());
        self.step += 1;
        (self.step < 3).then_some(self as Box<dyn coldwire_io::FileWork>)
    }
}

pub fn file_work_runs_on_the_ring_or_comes_back<D: Driver>(mut driver: D) {
    let file = Arc::new(tempfile());
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    let work = Box::new(Steps {
        file: file.clone(),
        bytes: b"hello ring".to_vec(),
        step: 0,
        results: results.clone(),
    });
    assert_eq!(driver.has_file_ring(), is_uring_driver(&driver));
    if !driver.has_file_ring() {
        assert!(driver.submit_file(work).is_err(), "handed back");
        return;
    }
    assert!(driver.submit_file(work).is_ok());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while results.lock().unwrap().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "file work never completed"
        );
        driver.wait(Some(Duration::from_millis(50))).unwrap();
    }
    assert_eq!(*results.lock().unwrap(), [5, 5, 0]);
    let mut written = String::new();
    (&*file).read_to_string(&mut written).unwrap();
    assert_eq!(written, "hello ring");
}
