//! Conformance suite: every driver test runs against every backend through one macro, so
//! select, poll, epoll, uring-poll and uring are held to the same contract (the server
//! logic above them is identical, and the experiments compare only the mechanism). Where
//! the kernel does not allow io_uring, its tests print `skipped: <reason>` and return.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coldwire_io::{
    Backend, Chunk, Completion, ConnectionId, Driver, DriverConfig, EpollPoller, Flush, PollPoller,
    Poller, ReadinessDriver, SelectPoller, Splice, UringDriver, UringOptions, UringPoller,
};

/// A driver the suite can create with the default configuration.
trait Create: Driver + Sized {
    fn create() -> Self;
}

impl<P: Poller> Create for ReadinessDriver<P> {
    fn create() -> Self {
        ReadinessDriver::<P>::new(DriverConfig::default()).unwrap()
    }
}

impl Create for UringDriver {
    fn create() -> Self {
        UringDriver::new(DriverConfig::default(), UringOptions::default()).unwrap()
    }
}

/// Whether the backend's tests must be skipped here (io_uring switched off or missing);
/// prints the reason. The other backends always run: their probe failing is a failure.
fn skip(backend: Backend) -> bool {
    match (backend, backend.probe()) {
        (Backend::Uring | Backend::UringPoll, Err(reason)) => {
            println!("skipped: {backend} is unavailable here: {reason}");
            true
        }
        _ => false,
    }
}

/// The completion-native driver counts operations as submissions, not system calls.
fn is_uring_driver<D: Driver>(driver: &D) -> bool {
    driver.backend_name() == "uring"
}

mod splice_cases;

fn listener() -> (TcpListener, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

fn driver<D: Create>() -> D {
    D::create()
}

/// Runs the loop until `until` returns true for a completion, or panics after 10 s.
fn run_until<D: Create>(driver: &mut D, mut until: impl FnMut(&mut D, Completion) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
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

fn accept_one<D: Create>(driver: &mut D) -> ConnectionId {
    let mut accepted = None;
    run_until(driver, |_, completion| match completion {
        Completion::Accepted { connection, .. } => {
            accepted = Some(connection);
            true
        }
        _ => false,
    });
    accepted.unwrap()
}

fn receive_text<D: Create>(driver: &mut D, id: ConnectionId, wanted: usize) -> Vec<u8> {
    let mut data = Vec::new();
    driver.recv(id);
    run_until(driver, |driver, completion| match completion {
        Completion::Received { connection, buffer } if connection == id => {
            data.extend_from_slice(buffer.filled());
            driver.recycle(buffer);
            if data.len() >= wanted {
                return true;
            }
            driver.recv(id);
            false
        }
        other => panic!("unexpected {other:?}"),
    });
    data
}

fn accepts_receives_and_sends<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    client.write_all(b"hello driver").unwrap();
    assert_eq!(receive_text(&mut driver, id, 12), b"hello driver");
    let mut head = driver.take_vec();
    head.extend_from_slice(b"head+");
    driver.send(id, Chunk::Owned(head));
    driver.send(id, Chunk::Shared(bytes::Bytes::from_static(b"body")));
    assert!(matches!(driver.flush(id), Flush::Done));
    // A completion driver hands its submissions to the kernel with the next wait.
    driver.wait(Some(Duration::ZERO)).unwrap();
    let mut reply = [0u8; 9];
    client.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"head+body");
    let counters = driver.counters();
    assert_eq!(counters.accepted, 1);
    assert_eq!(counters.open_connections, 1);
    if is_uring_driver(&driver) {
        assert!(counters.uring_submissions >= 3 && counters.uring_completions >= 2);
    } else {
        assert!(counters.recv_calls >= 1 && counters.send_calls == 1);
    }
    driver.close(id);
    assert_eq!(driver.counters().open_connections, 0);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed connection reads EOF");
}

fn reports_end_of_stream_and_reset<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    client.shutdown(Shutdown::Write).unwrap();
    driver.recv(id);
    run_until(
        &mut driver,
        |_, completion| matches!(completion, Completion::PeerClosed { connection } if connection == id),
    );
    driver.close(id);

    let client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client);
    driver.recv(id);
    run_until(&mut driver, |_, completion| match completion {
        Completion::Failed { connection, error } if connection == id => {
            assert_eq!(error.raw_os_error(), Some(libc::ECONNRESET));
            true
        }
        Completion::PeerClosed { .. } => panic!("a reset must be reported as a failure"),
        _ => false,
    });
}

fn blocked_output_completes_when_the_reader_drains<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    let payload: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|index| (index % 251) as u8)
        .collect();
    driver.send(id, Chunk::Shared(bytes::Bytes::from(payload.clone())));
    assert!(
        matches!(driver.flush(id), Flush::Pending),
        "8 MiB cannot fit a socket buffer"
    );
    assert!(driver.queued_bytes(id) > 0);
    let reader = std::thread::spawn(move || {
        let mut received = Vec::new();
        client.read_to_end(&mut received).unwrap();
        received
    });
    run_until(
        &mut driver,
        |_, completion| matches!(completion, Completion::Sent { connection } if connection == id),
    );
    assert_eq!(driver.queued_bytes(id), 0);
    driver.close(id);
    assert!(
        reader.join().unwrap() == payload,
        "bytes arrive intact and in order"
    );
}

fn sends_files_with_sendfile<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
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
fn consecutive_files_on_different_connections_arrive_intact<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
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
fn closing_a_blocked_file_send_frees_the_slot<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
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

fn timers_fire_and_can_be_cancelled<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let _first = TcpStream::connect(address).unwrap();
    let first = accept_one(&mut driver);
    let _second = TcpStream::connect(address).unwrap();
    let second = accept_one(&mut driver);
    let start = Instant::now();
    driver.set_timer(first, start + Duration::from_millis(50));
    driver.set_timer(second, start + Duration::from_millis(30));
    driver.cancel_timer(second);
    run_until(&mut driver, |_, completion| match completion {
        Completion::TimerExpired { connection } => {
            assert_eq!(connection, first, "a cancelled timer never fires");
            true
        }
        _ => false,
    });
    assert!(
        start.elapsed() >= Duration::from_millis(50),
        "timers never fire early"
    );
}

fn waker_interrupts_a_wait<D: Create>() {
    let mut driver = driver::<D>();
    let waker = driver.waker();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        waker.wake().unwrap();
    });
    let start = Instant::now();
    run_until(&mut driver, |_, completion| {
        matches!(completion, Completion::Woken)
    });
    assert!(start.elapsed() < Duration::from_secs(5));
    thread.join().unwrap();
}

fn idle_connections_hold_no_buffer_and_slots_are_reused<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let clients: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    let mut ids = Vec::new();
    run_until(&mut driver, |driver, completion| {
        if let Completion::Accepted { connection, .. } = completion {
            driver.recv(connection);
            ids.push(connection);
        }
        ids.len() == 50
    });
    let mut slots: Vec<usize> = ids.iter().map(|id| id.index()).collect();
    slots.sort_unstable();
    assert_eq!(
        slots,
        (0..50).collect::<Vec<_>>(),
        "slots are dense from zero"
    );
    driver.wait(Some(Duration::from_millis(10))).unwrap();
    assert!(
        driver.next_completion().is_none(),
        "idle connections produce nothing"
    );
    assert_eq!(
        driver.counters().buffers_in_use,
        0,
        "an idle connection owns no buffer"
    );
    // Lowest free slot first: free slot 7, the next connection takes it.
    let seven = *ids.iter().find(|id| id.index() == 7).unwrap();
    driver.close(seven);
    let _late = TcpStream::connect(address).unwrap();
    let reused = accept_one(&mut driver);
    assert_eq!(reused.index(), 7);
    assert_ne!(reused, seven, "a reused slot gets a new generation");
    drop(clients);
}

fn stale_completions_never_reach_a_reused_slot<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    client.write_all(b"x").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    driver.recv(id); // completes at once into the queue
    driver.close(id); // ... and the server closes before reading it
    assert!(
        driver.next_completion().is_none(),
        "completion of a closed connection is dropped"
    );
}

/// A lingering close (`shutdown_write`, then `close` in the same loop turn) must act on the
/// closed connection only, never on the next connection — which the kernel gives the same
/// descriptor number and the driver the same slot. (Regression: io_uring runs `SHUTDOWN` in
/// an io-wq worker that looks the descriptor number up only when it runs; queued together
/// with the `CLOSE`, it could shut down the next connection's socket, whose client then saw
/// the connection end without a response.)
fn lingering_close_never_touches_the_next_connection<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    driver.listen(listener).unwrap();
    let mut previous = TcpStream::connect(address).unwrap();
    let mut previous_id = accept_one(&mut driver);
    for round in 0..100 {
        // The next client is already waiting in the backlog while the previous one closes.
        let mut next = TcpStream::connect(address).unwrap();
        driver.shutdown_write(previous_id);
        driver.close(previous_id);
        let next_id = accept_one(&mut driver);
        next.write_all(b"ping").unwrap();
        assert_eq!(
            receive_text(&mut driver, next_id, 4),
            b"ping",
            "round {round}: the new connection receives"
        );
        let mut reply = driver.take_vec();
        reply.extend_from_slice(b"pong");
        driver.send(next_id, Chunk::Owned(reply));
        let mut sent = matches!(driver.flush(next_id), Flush::Done);
        let mut received = [0u8; 4];
        while !sent {
            run_until(&mut driver, |_, completion| match completion {
                Completion::Sent { connection } if connection == next_id => true,
                Completion::Failed { connection, error } if connection == next_id => {
                    panic!("round {round}: the new connection failed: {error}")
                }
                _ => false,
            });
            sent = true;
        }
        driver.wait(Some(Duration::ZERO)).unwrap();
        next.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        next.read_exact(&mut received).unwrap_or_else(|error| {
            panic!("round {round}: the new connection got no reply: {error}")
        });
        assert_eq!(&received, b"pong");
        let mut rest = Vec::new();
        previous.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "round {round}: the closed connection ends");
        previous = next;
        previous_id = next_id;
    }
}

/// A splice that starts after the server has received from its source: bytes that reached
/// the driver before the transfer began (a completion driver may already have taken them
/// from the socket) are part of it, in order, and in the copy; closing both connections
/// in the middle of an unbounded transfer closes their sockets.
fn splice_after_a_receive_and_closed_mid_transfer<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    if driver.splicer().is_err() {
        println!(
            "skipped: the {} driver has no splice",
            driver.backend_name()
        );
        return;
    }
    driver.listen(listener).unwrap();
    let mut source_client = TcpStream::connect(address).unwrap();
    let source = accept_one(&mut driver);
    let destination_client = TcpStream::connect(address).unwrap();
    let destination = accept_one(&mut driver);
    source_client.write_all(b"HEAD").unwrap();
    assert_eq!(receive_text(&mut driver, source, 4), b"HEAD");
    let body: Vec<u8> = (0..400_000u32).map(|index| (index % 251) as u8).collect();
    source_client.write_all(&body[..100_000]).unwrap();
    // Let the first part arrive while no receive is asked for.
    std::thread::sleep(Duration::from_millis(50));
    driver.wait(Some(Duration::from_millis(10))).unwrap();
    driver
        .splicer()
        .unwrap()
        .splice(source, destination, body.len() as u64, true)
        .unwrap();
    let rest = body[100_000..].to_vec();
    let writer = std::thread::spawn(move || {
        source_client.write_all(&rest).unwrap();
        source_client
    });
    let reader = std::thread::spawn(move || {
        let mut stream = destination_client;
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut all = vec![0u8; 400_000];
        stream.read_exact(&mut all).map(|()| (all, stream))
    });
    run_until(&mut driver, |driver, completion| match completion {
        Completion::Sent { connection } => connection == destination,
        Completion::Received { buffer, .. } => {
            driver.recycle(buffer);
            false
        }
        other => panic!("unexpected {other:?}"),
    });
    let copy = driver
        .splicer()
        .unwrap()
        .take_splice_copy(destination)
        .expect("a copy was kept");
    assert!(copy == body, "the copy differs ({} bytes)", copy.len());
    let (arrived, mut destination_client) = reader.join().unwrap().expect("the body arrives");
    assert!(arrived == body, "the spliced bytes differ");
    let mut source_client = writer.join().unwrap();

    // An unbounded transfer waiting for its source: closing both sides ends it, and the
    // clients see their connections closed.
    driver
        .splicer()
        .unwrap()
        .splice(source, destination, u64::MAX, false)
        .unwrap();
    driver.wait(Some(Duration::from_millis(20))).unwrap();
    driver.close(source);
    driver.close(destination);
    for _ in 0..20 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        if let Some(completion) = driver.next_completion() {
            panic!("a closed transfer completes nothing: {completion:?}");
        }
    }
    assert_eq!(driver.counters().open_connections, 0);
    for client in [&mut source_client, &mut destination_client] {
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        client
            .read_to_end(&mut rest)
            .expect("the closed connection ends (not a timeout)");
    }
}

/// Outgoing connections: output queued before the connection is up is written once it
/// is; a refused connection is reported as a failure, not a hang.
fn connects_sends_before_established_and_reports_refusal<D: Create>() {
    let (listener, address) = listener();
    let mut driver = driver::<D>();
    let id = driver.connect(address).unwrap();
    let mut request = driver.take_vec();
    request.extend_from_slice(b"ping");
    driver.send(id, Chunk::Owned(request));
    let flushed = driver.flush(id);
    let (mut server_side, _) = listener.accept().unwrap();
    let mut connected = false;
    if matches!(flushed, Flush::Pending) {
        run_until(&mut driver, |_, completion| match completion {
            Completion::Connected { connection } => {
                assert_eq!(connection, id);
                connected = true;
                false
            }
            Completion::Sent { connection } => connection == id,
            other => panic!("unexpected {other:?}"),
        });
    }
    let mut ping = [0u8; 4];
    server_side.read_exact(&mut ping).unwrap();
    assert_eq!(&ping, b"ping");
    server_side.write_all(b"pong").unwrap();
    let mut reply = Vec::new();
    driver.recv(id);
    run_until(&mut driver, |driver, completion| match completion {
        Completion::Connected { .. } => {
            connected = true;
            false
        }
        Completion::Received { connection, buffer } if connection == id => {
            reply.extend_from_slice(buffer.filled());
            driver.recycle(buffer);
            true
        }
        other => panic!("unexpected {other:?}"),
    });
    assert!(connected, "Connected is reported once");
    assert_eq!(reply, b"pong");
    assert_eq!(driver.counters().connect_calls, 1);
    driver.close(id);

    drop(listener);
    let refused = driver.connect(address).unwrap();
    driver.recv(refused);
    run_until(&mut driver, |_, completion| match completion {
        Completion::Failed { connection, error } if connection == refused => {
            assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED));
            true
        }
        Completion::Connected { .. } => panic!("nothing listens there"),
        _ => false,
    });
}

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

macro_rules! conformance {
    ($($backend:ident: $kind:expr => $driver:ty $(, poller $poller:ty)?;)*) => {$(
        mod $backend {
            use super::*;
            fn skip() -> bool { super::skip($kind) }
            #[test] fn accepts_receives_and_sends() { if !skip() { super::accepts_receives_and_sends::<$driver>() } }
            #[test] fn reports_end_of_stream_and_reset() { if !skip() { super::reports_end_of_stream_and_reset::<$driver>() } }
            #[test] fn blocked_output_completes_when_the_reader_drains() { if !skip() { super::blocked_output_completes_when_the_reader_drains::<$driver>() } }
            #[test] fn sends_files_with_sendfile() { if !skip() { super::sends_files_with_sendfile::<$driver>() } }
            #[test] fn timers_fire_and_can_be_cancelled() { if !skip() { super::timers_fire_and_can_be_cancelled::<$driver>() } }
            #[test] fn waker_interrupts_a_wait() { if !skip() { super::waker_interrupts_a_wait::<$driver>() } }
            #[test] fn idle_connections_hold_no_buffer_and_slots_are_reused() { if !skip() { super::idle_connections_hold_no_buffer_and_slots_are_reused::<$driver>() } }
            #[test] fn stale_completions_never_reach_a_reused_slot() { if !skip() { super::stale_completions_never_reach_a_reused_slot::<$driver>() } }
            #[test] fn lingering_close_never_touches_the_next_connection() { if !skip() { super::lingering_close_never_touches_the_next_connection::<$driver>() } }
            #[test] fn splice_after_a_receive_and_closed_mid_transfer() { if !skip() { super::splice_after_a_receive_and_closed_mid_transfer::<$driver>() } }
            #[test] fn consecutive_files_on_different_connections_arrive_intact() { if !skip() { super::consecutive_files_on_different_connections_arrive_intact::<$driver>() } }
            #[test] fn closing_a_blocked_file_send_frees_the_slot() { if !skip() { super::closing_a_blocked_file_send_frees_the_slot::<$driver>() } }
            #[test] fn connects_sends_before_established_and_reports_refusal() { if !skip() { super::connects_sends_before_established_and_reports_refusal::<$driver>() } }
            #[test] fn splice_moves_a_length_and_keeps_an_exact_copy() { if !skip() { super::splice_cases::splice_moves_a_length_and_keeps_an_exact_copy(super::driver::<$driver>) } }
            #[test] fn splice_until_end_of_stream_and_reports_an_early_end() { if !skip() { super::splice_cases::splice_until_end_of_stream_and_reports_an_early_end(super::driver::<$driver>) } }
            $(#[test] fn high_descriptors_among_many_idle_ones() { if !skip() { super::high_descriptors_among_many_idle_ones::<$poller>() } })?
        }
    )*};
}

conformance! {
    select: Backend::Select => ReadinessDriver<SelectPoller>, poller SelectPoller;
    poll: Backend::Poll => ReadinessDriver<PollPoller>, poller PollPoller;
    epoll: Backend::Epoll => ReadinessDriver<EpollPoller>, poller EpollPoller;
    uring_poll: Backend::UringPoll => ReadinessDriver<UringPoller>, poller UringPoller;
    uring: Backend::Uring => UringDriver;
}

/// The uring driver's fallback where the probe's trial finds no multishot accept or
/// receive: single-shot operations, re-armed as needed, keep the same contract —
/// connections accepted one after another, data received in order (including data that
/// arrived while no receive was asked for), replies sent, end of stream reported.
#[test]
fn uring_single_shot_fallback_keeps_the_contract() {
    if skip(Backend::Uring) {
        return;
    }
    let options = UringOptions {
        single_shot: true,
        ..UringOptions::default()
    };
    let mut driver = UringDriver::new(DriverConfig::default(), options).unwrap();
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    for round in 0..3 {
        let mut client = TcpStream::connect(address).unwrap();
        let id = accept_one(&mut driver);
        client.write_all(b"first").unwrap();
        assert_eq!(receive_text(&mut driver, id, 5), b"first", "round {round}");
        client.write_all(b"second").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        assert_eq!(receive_text(&mut driver, id, 6), b"second", "round {round}");
        let mut reply = driver.take_vec();
        reply.extend_from_slice(b"reply");
        driver.send(id, Chunk::Owned(reply));
        assert!(matches!(driver.flush(id), Flush::Done));
        driver.wait(Some(Duration::ZERO)).unwrap();
        let mut received = [0u8; 5];
        client.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"reply");
        client.shutdown(Shutdown::Write).unwrap();
        driver.recv(id);
        run_until(
            &mut driver,
            |_, completion| matches!(completion, Completion::PeerClosed { connection } if connection == id),
        );
        driver.close(id);
    }
    assert_eq!(driver.counters().accepted, 3);
}

#[path = "seccomp/mod.rs"]
mod seccomp;

/// Where a seccomp filter refuses `io_uring_setup` (a container's default profile), the
/// io_uring tests of this suite say `skipped: <reason>` instead of passing silently: this
/// binary is run again under the filter for one test of each io_uring backend.
#[test]
fn io_uring_tests_print_skipped_where_seccomp_refuses_io_uring() {
    let binary = std::env::current_exe().unwrap();
    for test in [
        "uring::accepts_receives_and_sends",
        "uring_poll::accepts_receives_and_sends",
    ] {
        let mut command = std::process::Command::new(&binary);
        command.args([test, "--exact", "--nocapture", "--test-threads=1"]);
        let output = seccomp::refuse_io_uring(&mut command, libc::EPERM)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{test} under the filter: {stdout}");
        assert!(
            stdout.contains("skipped: ") && stdout.contains("io_uring_setup was refused (EPERM)"),
            "{test} must print why it skipped: {stdout}"
        );
        assert!(stdout.contains("1 passed"), "{test} ran: {stdout}");
    }
}
