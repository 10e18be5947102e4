//! The BPF sockmap splice on loopback: two TCP connections meet at a "proxy" that hands
//! its two sockets to the kernel; bytes written by one end arrive byte-exact at the other
//! (SHA-256 compared) in both directions while the proxy reads none of them, and an end
//! of stream is forwarded once everything redirected has been written.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_io::sockmap::{Sockmap, SplicedPair, probe};

mod sockmap_support;

use sockmap_support::{pattern, sha256, topology};

/// Writes `bytes` then closes the write side; returns everything read until end of stream.
fn exchange(stream: TcpStream, bytes: Vec<u8>) -> thread::JoinHandle<Vec<u8>> {
    exchange_at(stream, bytes, false)
}

/// [`exchange`], reading in 64 KiB steps with a pause after each when `slow`.
fn exchange_at(mut stream: TcpStream, bytes: Vec<u8>, slow: bool) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut writer = stream.try_clone().unwrap();
        let sender = thread::spawn(move || {
            writer.write_all(&bytes).unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
        });
        let mut received = Vec::new();
        if slow {
            let mut step = vec![0u8; 64 * 1024];
            loop {
                let count = stream.read(&mut step).unwrap();
                if count == 0 {
                    break;
                }
                received.extend_from_slice(&step[..count]);
                thread::sleep(Duration::from_millis(2));
            }
        } else {
            stream.read_to_end(&mut received).unwrap();
        }
        sender.join().unwrap();
        received
    })
}

/// The proxy's whole job once the pair is spliced: wait for each side's end of stream,
/// then, once everything redirected from it is written into the peer, shut the peer's
/// write side. It never reads payload: a read returning bytes fails the test.
fn forward_ends(sockmap: &Sockmap, pair: &SplicedPair, proxy: &[TcpStream; 2], extra: [u64; 2]) {
    let mut ended = [false; 2];
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(ended[0] && ended[1]) {
        assert!(Instant::now() < deadline, "the tunnel did not finish");
        let mut descriptors: Vec<libc::pollfd> = (0..2)
            .map(|side| libc::pollfd {
                fd: proxy[side].as_raw_fd(),
                events: if ended[side] {
                    0
                } else {
                    libc::POLLIN | libc::POLLRDHUP
                },
                revents: 0,
            })
            .collect();
        // SAFETY: two valid pollfd entries.
        unsafe { libc::poll(descriptors.as_mut_ptr(), 2, 50) };
        for side in 0..2 {
            if ended[side] || descriptors[side].revents == 0 {
                continue;
            }
            let mut probe_byte = [0u8; 1];
            // SAFETY: one writable byte.
            let peeked = unsafe {
                libc::recv(
                    proxy[side].as_raw_fd(),
                    probe_byte.as_mut_ptr().cast(),
                    1,
                    libc::MSG_DONTWAIT | libc::MSG_PEEK,
                )
            };
            if peeked != 0 {
                continue; // not the end yet (bytes about to be taken by the program)
            }
            while !sockmap
                .delivered(pair, side, proxy[1 - side].as_raw_fd(), extra[1 - side])
                .unwrap()
            {
                thread::sleep(Duration::from_millis(1));
            }
            proxy[1 - side].shutdown(Shutdown::Write).unwrap();
            ended[side] = true;
        }
    }
}

fn splice_both_ways(size: usize, before_insertion: usize) {
    splice_with(size, before_insertion, false);
}

fn splice_with(size: usize, before_insertion: usize, slow_server: bool) {
    if let Err(error) = probe() {
        panic!("{error}");
    }
    let topology = topology();
    let upstream = pattern(size, 1);
    let downstream = pattern(size, 2);
    let mut client = topology.client;
    let mut server = topology.server;
    // Bytes that reach the proxy's queues before the pair is inserted.
    client.write_all(&upstream[..before_insertion]).unwrap();
    server.write_all(&downstream[..before_insertion]).unwrap();
    thread::sleep(Duration::from_millis(50));

    let sockmap = Sockmap::new(16).unwrap();
    let fds = [topology.proxy[0].as_raw_fd(), topology.proxy[1].as_raw_fd()];
    let (pair, queued) = sockmap.insert_pair(fds).unwrap();
    assert_eq!(
        queued[0],
        upstream[..before_insertion],
        "the client's early bytes are handed back"
    );
    assert_eq!(
        queued[1],
        downstream[..before_insertion],
        "the server's early bytes are handed back"
    );
    (&topology.proxy[1]).write_all(&queued[0]).unwrap();
    (&topology.proxy[0]).write_all(&queued[1]).unwrap();
    let extra = [queued[1].len() as u64, queued[0].len() as u64];

    let at_server = exchange_at(server, downstream[before_insertion..].to_vec(), slow_server);
    let at_client = exchange(client, upstream[before_insertion..].to_vec());
    forward_ends(&sockmap, &pair, &topology.proxy, extra);
    // The early bytes went out through the proxy's own writes, ahead of the kernel's.
    let received_by_server = at_server.join().unwrap();
    let received_by_client = at_client.join().unwrap();

    assert_eq!(received_by_server.len(), size);
    assert_eq!(
        sha256(&received_by_server),
        sha256(&upstream),
        "client → server"
    );
    assert_eq!(received_by_client.len(), size);
    assert_eq!(
        sha256(&received_by_client),
        sha256(&downstream),
        "server → client"
    );
    let redirected = [
        sockmap.redirected(&pair, 0).unwrap(),
        sockmap.redirected(&pair, 1).unwrap(),
    ];
    assert_eq!(
        redirected,
        [(size - before_insertion) as u64; 2],
        "the kernel moved every later byte"
    );
    sockmap.remove_pair(&pair);
    assert!(
        sockmap.redirected(&pair, 0).is_err(),
        "the pair's entries are gone"
    );
}

#[test]
fn one_mebibyte_is_spliced_byte_exact_both_ways() {
    splice_both_ways(1 << 20, 0);
}

#[test]
fn sixty_four_mebibytes_are_spliced_byte_exact_both_ways() {
    splice_both_ways(64 << 20, 0);
}

#[test]
fn bytes_queued_before_insertion_are_handed_back_and_arrive_first() {
    splice_both_ways(1 << 20, 1000);
}

#[test]
fn a_slow_reader_gets_every_byte() {
    splice_with(8 << 20, 0, true);
}

#[test]
fn many_concurrent_pairs_share_one_map() {
    probe().unwrap();
    let sockmap = Sockmap::new(64).unwrap();
    thread::scope(|scope| {
        for index in 0..16u8 {
            let sockmap = &sockmap;
            scope.spawn(move || {
                let topology = topology();
                let size = 256 * 1024 + usize::from(index) * 4099;
                let upstream = pattern(size, index);
                let downstream = pattern(size, index.wrapping_add(100));
                let fds = [topology.proxy[0].as_raw_fd(), topology.proxy[1].as_raw_fd()];
                let (pair, queued) = sockmap.insert_pair(fds).unwrap();
                assert!(queued[0].is_empty() && queued[1].is_empty());
                let at_server = exchange(topology.server, downstream.clone());
                let at_client = exchange(topology.client, upstream.clone());
                forward_ends(sockmap, &pair, &topology.proxy, [0, 0]);
                assert_eq!(
                    sha256(&at_server.join().unwrap()),
                    sha256(&upstream),
                    "pair {index}: client → server"
                );
                assert_eq!(
                    sha256(&at_client.join().unwrap()),
                    sha256(&downstream),
                    "pair {index}: server → client"
                );
                sockmap.remove_pair(&pair);
            });
        }
    });
}

#[test]
fn a_removed_pair_is_back_in_user_space() {
    probe().unwrap();
    let topology = topology();
    let sockmap = Sockmap::new(4).unwrap();
    let fds = [topology.proxy[0].as_raw_fd(), topology.proxy[1].as_raw_fd()];
    let (pair, _) = sockmap.insert_pair(fds).unwrap();
    sockmap.remove_pair(&pair);
    let mut client = topology.client;
    client.write_all(b"after").unwrap();
    let mut proxy_front = &topology.proxy[0];
    proxy_front.set_nonblocking(false).unwrap();
    proxy_front
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = [0u8; 5];
    proxy_front.read_exact(&mut received).unwrap();
    assert_eq!(
        &received, b"after",
        "the proxy reads again once the pair is removed"
    );
}

#[test]
fn a_proxy_that_dies_mid_splice_leaves_both_ends_an_end_of_stream() {
    probe().unwrap();
    let topology = topology();
    let sockmap = Sockmap::new(4).unwrap();
    let fds = [topology.proxy[0].as_raw_fd(), topology.proxy[1].as_raw_fd()];
    let (_pair, _) = sockmap.insert_pair(fds).unwrap();
    let mut client = topology.client;
    let mut server = topology.server;
    client.write_all(&pattern(100_000, 3)).unwrap();
    // What a dying process does: every descriptor closes, map and sockets alike.
    drop(topology.proxy);
    drop(sockmap);
    for end in [&mut client, &mut server] {
        end.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut rest = Vec::new();
        let outcome = end.read_to_end(&mut rest);
        assert!(
            outcome.is_ok()
                || matches!(&outcome, Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset),
            "an end must see end of stream or a reset, not hang: {outcome:?}"
        );
    }
}

/// `insert_pair_in_place`: bytes already queued on both sockets when they are inserted
/// (a whole request sent before the splice, nothing more to come until it is answered)
/// are forwarded by the kernel at once, in order, ahead of what follows; the caller writes
/// nothing itself.
#[test]
fn bytes_queued_before_in_place_insertion_are_forwarded_by_the_kernel_in_order() {
    probe().unwrap();
    let topology = topology();
    let size = 1 << 20;
    let early = 5000;
    let upstream = pattern(size, 7);
    let downstream = pattern(size, 8);
    let mut client = topology.client;
    let mut server = topology.server;
    client.write_all(&upstream[..early]).unwrap();
    server.write_all(&downstream[..early]).unwrap();
    thread::sleep(Duration::from_millis(50));
    let sockmap = Sockmap::new(4).unwrap();
    let fds = [topology.proxy[0].as_raw_fd(), topology.proxy[1].as_raw_fd()];
    let pair = sockmap.insert_pair_in_place(fds).unwrap();
    // Nothing else is sent yet: the queued bytes must arrive on their own.
    for (end, expected) in [(&mut server, &upstream), (&mut client, &downstream)] {
        end.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut first = vec![0u8; early];
        end.read_exact(&mut first)
            .expect("bytes queued before insertion must be forwarded without more traffic");
        assert_eq!(first, expected[..early]);
    }
    let at_server = exchange(server, downstream[early..].to_vec());
    let at_client = exchange(client, upstream[early..].to_vec());
    forward_ends(&sockmap, &pair, &topology.proxy, [0, 0]);
    let mut received_by_server = upstream[..early].to_vec();
    received_by_server.extend(at_server.join().unwrap());
    let mut received_by_client = downstream[..early].to_vec();
    received_by_client.extend(at_client.join().unwrap());
    assert_eq!(sha256(&received_by_server), sha256(&upstream));
    assert_eq!(sha256(&received_by_client), sha256(&downstream));
    assert_eq!(
        [
            sockmap.redirected(&pair, 0).unwrap(),
            sockmap.redirected(&pair, 1).unwrap()
        ],
        [size as u64; 2],
        "the kernel moved every byte, the queued ones included"
    );
    sockmap.remove_pair(&pair);
}
