//! `BodySockmap` on loopback: a "proxy" between a client and an upstream hands exactly a
//! body's remaining bytes to the kernel, then takes both sockets back. Every case checks
//! that the client gets the body byte-exact (SHA-256) followed by what the proxy writes
//! next, and that the bytes the upstream sent after the body are still in the upstream
//! socket, in order, for the proxy to read.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_io::sockmap::{BodySockmap, BodyState, BodyTransfer, probe_bodies};

mod sockmap_support;

use sockmap_support::{Topology, pattern, sha256, topology};

/// What the proxy writes to the client after the body: the next response, in short.
const NEXT_RESPONSE: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";
/// What the upstream sends right after the body (the next response's first bytes).
const AFTER_BODY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

fn wait_for(socket: &TcpStream, events: i16) {
    let mut descriptor = libc::pollfd {
        fd: socket.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd entry.
    unsafe { libc::poll(&mut descriptor, 1, 100) };
}

/// Reads exactly `count` bytes from a non-blocking socket (None: end of stream first).
fn read_exactly(socket: &mut TcpStream, count: usize) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; count];
    let mut filled = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while filled < count {
        assert!(Instant::now() < deadline, "the bytes did not come");
        match socket.read(&mut bytes[filled..]) {
            Ok(0) => return None,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                wait_for(socket, libc::POLLIN)
            }
            Err(error) => panic!("read: {error}"),
        }
    }
    Some(bytes)
}

fn write_all(socket: &mut TcpStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                wait_for(socket, libc::POLLOUT)
            }
            Err(error) => panic!("write: {error}"),
        }
    }
}

/// Polls the transfer until it is no longer running.
fn settle(sockmap: &BodySockmap, transfer: &BodyTransfer) -> BodyState {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let state = sockmap.poll(transfer).unwrap();
        if !matches!(state, BodyState::Running { .. }) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "the body did not finish: {state:?}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// How the upstream sends the body and what follows it.
#[derive(Clone, Copy)]
struct Upstream {
    /// Bytes per write (with `TCP_NODELAY`: about one segment each).
    write_size: usize,
    /// The body and the next response's bytes in one write, or the latter only once the
    /// proxy has taken the sockets back.
    after_in_same_write: bool,
    /// Everything is in the proxy's receive queue before the transfer starts.
    queued_first: bool,
}

const PLAIN: Upstream = Upstream {
    write_size: usize::MAX,
    after_in_same_write: true,
    queued_first: false,
};

/// One body through the proxy. `pre_read`: body bytes the proxy reads and writes itself
/// first (the head read takes some). `slow_client`: the client reads in 64 KiB steps
/// with a pause after each. `pipelined`: what the client sends meanwhile.
fn relay_body(
    sockmap: &BodySockmap,
    size: usize,
    pre_read: usize,
    upstream: Upstream,
    slow_client: bool,
) {
    let Topology {
        mut client,
        mut server,
        proxy: [mut proxy_front, mut proxy_back],
    } = topology();
    let body = pattern(size, size as u8);
    let expected = sha256(&body);
    let (finished, proxy_done) = mpsc::channel::<()>();
    let server_thread = thread::spawn(move || {
        server.set_nodelay(true).unwrap();
        let mut bytes = body;
        if upstream.after_in_same_write {
            bytes.extend_from_slice(AFTER_BODY);
        }
        for chunk in bytes.chunks(upstream.write_size.min(bytes.len().max(1))) {
            server.write_all(chunk).unwrap();
        }
        if !upstream.after_in_same_write {
            proxy_done.recv().unwrap();
            server.write_all(AFTER_BODY).unwrap();
        }
        // Holds the connection open until the proxy has read everything.
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).unwrap();
    });
    let pipelined = b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    let sent_pipelined = pipelined.clone();
    let client_thread = thread::spawn(move || {
        client.write_all(&sent_pipelined).unwrap();
        let mut received = Vec::with_capacity(size + NEXT_RESPONSE.len());
        let mut step = vec![0u8; 64 * 1024];
        while received.len() < size + NEXT_RESPONSE.len() {
            let count = client.read(&mut step).unwrap();
            assert!(count > 0, "the client's connection ended early");
            received.extend_from_slice(&step[..count]);
            if slow_client {
                thread::sleep(Duration::from_millis(2));
            }
        }
        client.shutdown(Shutdown::Write).unwrap();
        received
    });
    if upstream.queued_first {
        let wanted = (size + AFTER_BODY.len()).min(32 * 1024) as i32;
        loop {
            let mut count: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            unsafe { libc::ioctl(proxy_back.as_raw_fd(), libc::FIONREAD, &mut count) };
            if count >= wanted {
                break;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
    let head_part = read_exactly(&mut proxy_back, pre_read).unwrap();
    write_all(&mut proxy_front, &head_part);
    let transfer = sockmap
        .start(
            proxy_back.as_raw_fd(),
            proxy_front.as_raw_fd(),
            (size - pre_read) as u64,
        )
        .unwrap();
    assert_eq!(settle(sockmap, &transfer), BodyState::Delivered);
    assert!(sockmap.finish(&transfer).is_none());
    let _ = finished.send(());
    // Both sockets are the proxy's again: the upstream's next bytes, then the client's
    // pipelined request, in order and complete.
    assert_eq!(
        read_exactly(&mut proxy_back, AFTER_BODY.len()).unwrap(),
        AFTER_BODY
    );
    assert_eq!(
        read_exactly(&mut proxy_front, pipelined.len()).unwrap(),
        pipelined
    );
    write_all(&mut proxy_front, NEXT_RESPONSE);
    let received = client_thread.join().unwrap();
    assert_eq!(received.len(), size + NEXT_RESPONSE.len());
    assert_eq!(sha256(&received[..size]), expected, "the body differs");
    assert_eq!(&received[size..], NEXT_RESPONSE);
    proxy_back.shutdown(Shutdown::Write).unwrap();
    server_thread.join().unwrap();
}

fn sockmap() -> BodySockmap {
    probe_bodies().expect("these tests need CAP_BPF and CAP_NET_ADMIN (run as root)");
    BodySockmap::new(64).unwrap()
}

#[test]
fn body_followed_by_the_next_response_in_the_same_segment() {
    let sockmap = sockmap();
    // Small enough that body end and next bytes share a segment.
    relay_body(&sockmap, 3000, 0, PLAIN, false);
    relay_body(&sockmap, 100 * 1024 + 7, 0, PLAIN, false);
}

#[test]
fn bytes_queued_before_the_transfer_and_a_partly_read_segment() {
    let sockmap = sockmap();
    let queued = Upstream {
        queued_first: true,
        ..PLAIN
    };
    relay_body(&sockmap, 200 * 1024, 0, queued, false);
    // The proxy read the first 4 KiB itself (as its head read does): the transfer starts
    // in the middle of a queued segment.
    relay_body(&sockmap, 200 * 1024, 4096, queued, false);
    relay_body(&sockmap, 5000, 1000, queued, false);
}

#[test]
fn body_split_across_many_segments() {
    let sockmap = sockmap();
    let segments = Upstream {
        write_size: 1000,
        ..PLAIN
    };
    relay_body(&sockmap, 300 * 1024 + 11, 100, segments, false);
}

#[test]
fn body_ending_exactly_at_a_segment_boundary_with_the_next_bytes_later() {
    let sockmap = sockmap();
    let boundary = Upstream {
        write_size: 4096,
        after_in_same_write: false,
        queued_first: false,
    };
    relay_body(&sockmap, 64 * 4096, 0, boundary, false);
    relay_body(&sockmap, 64 * 4096 + 1, 1, boundary, false);
}

#[test]
fn zero_remaining_bytes_insert_nothing() {
    let sockmap = sockmap();
    relay_body(&sockmap, 4096, 4096, PLAIN, false);
}

#[test]
fn one_mebibyte_is_byte_exact() {
    relay_body(&sockmap(), 1 << 20, 1500, PLAIN, false);
}

#[test]
fn sixty_four_mebibytes_are_byte_exact() {
    relay_body(&sockmap(), 64 << 20, 3000, PLAIN, false);
}

#[test]
fn a_slow_client_gets_every_byte() {
    relay_body(&sockmap(), 8 << 20, 0, PLAIN, true);
}

#[test]
fn many_concurrent_pairs_share_one_map() {
    let sockmap = std::sync::Arc::new(sockmap());
    let workers: Vec<_> = (0..16)
        .map(|index| {
            let sockmap = sockmap.clone();
            thread::spawn(move || {
                relay_body(&sockmap, (1 << 20) + index * 997, index * 13, PLAIN, false)
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// The upstream sends `sent` bytes of a 400 KiB body and closes; the proxy reads
/// `pre_read` of them itself first. Returns what the client got.
fn truncated_body(sockmap: &BodySockmap, pre_read: usize) -> Vec<u8> {
    let Topology {
        mut client,
        mut server,
        proxy: [mut proxy_front, mut proxy_back],
    } = topology();
    let sent = pattern(300 * 1024, 9);
    let server_thread = thread::spawn(move || {
        server.write_all(&sent).unwrap();
        // Ends 100 KiB short of the announced 400 KiB.
    });
    let head_part = read_exactly(&mut proxy_back, pre_read).unwrap();
    write_all(&mut proxy_front, &head_part);
    let transfer = sockmap
        .start(
            proxy_back.as_raw_fd(),
            proxy_front.as_raw_fd(),
            (400 * 1024 - pre_read) as u64,
        )
        .unwrap();
    let client_thread = thread::spawn(move || {
        let mut received = Vec::new();
        client.read_to_end(&mut received).unwrap();
        received
    });
    assert_eq!(settle(sockmap, &transfer), BodyState::Truncated);
    server_thread.join().unwrap();
    sockmap.finish(&transfer);
    // The proxy closes the client (a truncated response must not be reused): the client
    // sees the bytes, then the end of stream.
    drop(proxy_front);
    client_thread.join().unwrap()
}

#[test]
fn a_truncated_body_is_reported_and_every_byte_sent_is_delivered() {
    let sockmap = sockmap();
    let received = truncated_body(&sockmap, 0);
    assert_eq!(received.len(), 300 * 1024);
    assert_eq!(sha256(&received), sha256(&pattern(300 * 1024, 9)));
}

#[test]
fn a_truncated_body_after_a_partly_read_segment_is_reported() {
    // The parser may cut the first message too long here (its `skb->len` counts the
    // bytes read before the transfer) and wait for bytes that never come: the transfer
    // must still end as truncated, with no byte out of order.
    let sockmap = sockmap();
    for pre_read in [1000, 4096] {
        let received = truncated_body(&sockmap, pre_read);
        assert!(received.len() <= 300 * 1024);
        assert_eq!(received[..], pattern(300 * 1024, 9)[..received.len()]);
    }
}

#[test]
fn a_client_that_resets_mid_body_is_reported() {
    let sockmap = sockmap();
    let Topology {
        client,
        mut server,
        proxy: [proxy_front, proxy_back],
    } = topology();
    let server_thread = thread::spawn(move || {
        // More than the client's and the proxy's buffers hold: the rest waits.
        let _ = server.write_all(&pattern(16 << 20, 3));
        server
    });
    let transfer = sockmap
        .start(proxy_back.as_raw_fd(), proxy_front.as_raw_fd(), 16 << 20)
        .unwrap();
    // Closing with unread bytes resets the connection.
    thread::sleep(Duration::from_millis(20));
    drop(client);
    assert_eq!(settle(&sockmap, &transfer), BodyState::DestinationClosed);
    sockmap.finish(&transfer);
    drop(proxy_back);
    drop(proxy_front);
    server_thread.join().unwrap();
}

#[test]
fn an_upstream_reset_mid_body_is_reported_as_truncated() {
    let sockmap = sockmap();
    let Topology {
        mut client,
        server,
        proxy: [proxy_front, proxy_back],
    } = topology();
    let transfer = sockmap
        .start(proxy_back.as_raw_fd(), proxy_front.as_raw_fd(), 1 << 20)
        .unwrap();
    let mut writer = server;
    writer.write_all(&pattern(100 * 1024, 4)).unwrap();
    // SO_LINGER 0: close sends a reset.
    socket2::SockRef::from(&writer)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    let client_thread = thread::spawn(move || {
        let mut received = Vec::new();
        let _ = client.read_to_end(&mut received);
        received.len()
    });
    thread::sleep(Duration::from_millis(20));
    drop(writer);
    assert_eq!(settle(&sockmap, &transfer), BodyState::Truncated);
    // The reset is the upstream's own error, handed back once.
    let error = sockmap.finish(&transfer);
    assert!(error.is_none_or(|error| error.raw_os_error() == Some(libc::ECONNRESET)));
    drop(proxy_front);
    assert!(client_thread.join().unwrap() <= 100 * 1024);
}
