//! The uring driver on a light loop turn (`coldwire_io::uring::INLINE_OPERATIONS`): a small
//! flush is written, a lingering close's `shutdown` made, and an accepted client's first
//! receive read at once, with system calls of their own — nothing waits for the next
//! `io_uring_enter` (which those operations' completions would end at once: a loop turn for
//! nothing where the loop was about to sleep). The client here sees the reply and the end
//! of stream with no wait of the driver in between. (What it saves per request is measured
//! by the `slow-clients` experiment, `results/2026-11-28-vm/uring-turns/`, not here.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use coldwire_io::{Backend, Chunk, Completion, Driver, DriverConfig, Flush, UringDriver};

mod support;

use support::{accept_one, listener};

/// Bytes of `stream`'s output its peer acknowledged (`TCP_INFO`, perhaps counting the SYN):
/// on loopback, acknowledged bytes are in the peer's receive queue. The request below goes
/// in one segment, so at least its length acknowledged means all of it.
fn acknowledged(stream: &TcpStream) -> u64 {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut length = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `length` bytes into `info`, which is that large.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut length,
        )
    };
    assert_eq!(result, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_bytes_acked
}

#[test]
fn a_light_turn_receives_replies_and_shuts_down_at_once() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
        return;
    }
    let mut driver = UringDriver::new(DriverConfig::default(), Default::default()).unwrap();
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    // The request is in the server socket's receive queue before it is accepted.
    let deadline = Instant::now() + Duration::from_secs(20);
    while acknowledged(&client) < 18 {
        assert!(
            Instant::now() < deadline,
            "the request was never acknowledged"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let id = accept_one(&mut driver);
    let before = driver.counters();

    // The first receive reads the waiting request at once: no wait needed.
    driver.recv(id);
    let Some(Completion::Received { connection, buffer }) = driver.next_completion() else {
        panic!("the first receive of an accepted client with a request waiting is read at once");
    };
    assert_eq!(connection, id);
    assert_eq!(buffer.filled(), b"GET / HTTP/1.1\r\n\r\n");
    driver.recycle(buffer);

    // A small reply is written at once, and the lingering close's FIN after it.
    let mut reply = driver.take_vec();
    reply.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    driver.send(id, Chunk::Owned(reply));
    driver.send(id, Chunk::Shared(bytes::Bytes::from_static(b"\r\n")));
    assert!(matches!(driver.flush(id), Flush::Done));
    assert_eq!(driver.queued_bytes(id), 0, "nothing left for the ring");
    driver.shutdown_write(id);
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, b"HTTP/1.1 200 OK\r\n\r\n");

    let after = driver.counters();
    assert_eq!(
        after.wait_calls, before.wait_calls,
        "no loop turn was needed"
    );
    assert_eq!(after.recv_calls - before.recv_calls, 1);
    assert_eq!(after.send_calls - before.send_calls, 1);
    assert_eq!(after.shutdown_calls - before.shutdown_calls, 1);

    // The next receive is armed on the ring as usual and sees the end of stream.
    driver.recv(id);
    drop(client);
    support::run_until(
        &mut driver,
        |_, completion| matches!(completion, Completion::PeerClosed { connection } if connection == id),
    );
    driver.close(id);
}
