//! Conformance suite: every driver test runs against every backend through
//! `coldwire_io::for_each_backend!` (one test per backend, generated from the one list of
//! backends), so select, poll, epoll, uring-poll and uring are held to the same contract
//! (the server logic above them is identical, and the experiments compare only the
//! mechanism). Where the kernel does not allow io_uring, its tests print
//! `skipped: <reason>` and return.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use coldwire_io::{
    Backend, Chunk, Completion, Driver, DriverConfig, Flush, Splice, UringDriver, UringOptions,
};

mod file_cases;
mod splice_cases;
mod support;

use file_cases::cold::a_cold_file_range_is_read_ahead_and_arrives_exact;
use file_cases::{
    closing_a_blocked_file_send_frees_the_slot,
    consecutive_files_on_different_connections_arrive_intact,
    file_work_runs_on_the_ring_or_comes_back, sends_files_with_sendfile,
};
use splice_cases::{
    splice_moves_a_length_and_keeps_an_exact_copy,
    splice_until_end_of_stream_and_reports_an_early_end,
};
use support::{
    accept_one, accept_while_running, is_uring_driver, listener, receive_text, run_until,
};

coldwire_io::for_each_backend!(
    accepts_receives_and_sends,
    reports_end_of_stream_and_reset,
    blocked_output_completes_when_the_reader_drains,
    sends_files_with_sendfile,
    timers_fire_and_can_be_cancelled,
    waker_interrupts_a_wait,
    idle_connections_hold_no_buffer_and_slots_are_reused,
    stale_completions_never_reach_a_reused_slot,
    lingering_close_never_touches_the_next_connection,
    splice_after_a_receive_and_closed_mid_transfer,
    consecutive_files_on_different_connections_arrive_intact,
    closing_a_blocked_file_send_frees_the_slot,
    connects_sends_before_established_and_reports_refusal,
    connects_from_a_source_address,
    a_connection_closed_while_connecting_is_released,
    a_second_flush_of_written_output_is_done,
    splice_moves_a_length_and_keeps_an_exact_copy,
    splice_until_end_of_stream_and_reports_an_early_end,
    a_cold_file_range_is_read_ahead_and_arrives_exact,
    file_work_runs_on_the_ring_or_comes_back,
);

/// `COLDWIRE_READ_AHEAD=off` (here: the config field it sets) leaves cold files to
/// `sendfile` on the loop.
#[test]
fn with_read_ahead_off_a_cold_range_is_sent_unprobed() {
    let config = DriverConfig {
        read_ahead: false,
        ..DriverConfig::default()
    };
    let driver = coldwire_io::ReadinessDriver::<coldwire_io::EpollPoller>::new(config).unwrap();
    file_cases::cold::with_read_ahead_off_a_cold_range_is_sent_unprobed(driver);
}

fn accepts_receives_and_sends<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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
        // The receive and the send are submissions, or on a light turn calls of their own.
        let operations = counters.uring_submissions + counters.recv_calls + counters.send_calls;
        assert!(operations >= 3 && counters.uring_completions >= 1);
    } else {
        assert!(counters.recv_calls >= 1 && counters.send_calls == 1);
    }
    driver.close(id);
    assert_eq!(driver.counters().open_connections, 0);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed connection reads EOF");
}

fn reports_end_of_stream_and_reset<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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

fn blocked_output_completes_when_the_reader_drains<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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

fn timers_fire_and_can_be_cancelled<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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

fn waker_interrupts_a_wait<D: Driver>(mut driver: D) {
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

fn idle_connections_hold_no_buffer_and_slots_are_reused<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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

fn stale_completions_never_reach_a_reused_slot<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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
/// the connection end without a response. The uring driver now shuts down with a
/// `shutdown(2)` of its own.)
fn lingering_close_never_touches_the_next_connection<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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
fn splice_after_a_receive_and_closed_mid_transfer<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
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
fn connects_sends_before_established_and_reports_refusal<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    let id = driver.connect(address).unwrap();
    let mut request = driver.take_vec();
    request.extend_from_slice(b"ping");
    driver.send(id, Chunk::Owned(request));
    let flushed = driver.flush(id);
    let (mut server_side, _) = accept_while_running(&mut driver, &listener);
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
    // io_uring connects with a submission (`uring_connects`), the others with connect(2).
    let counters = driver.counters();
    assert_eq!(counters.connect_calls + counters.uring_connects, 1);
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

/// The uring driver with every operation through the ring (`UringOptions::ring_only`: no
/// send, first receive or shutdown tried at once on a light turn, the path a heavy turn
/// takes) keeps the contract.
#[test]
fn uring_ring_only_keeps_the_contract() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
        return;
    }
    let driver = || {
        let options = UringOptions {
            ring_only: true,
            ..UringOptions::default()
        };
        UringDriver::new(DriverConfig::default(), options).unwrap()
    };
    accepts_receives_and_sends(driver());
    reports_end_of_stream_and_reset(driver());
    blocked_output_completes_when_the_reader_drains(driver());
    stale_completions_never_reach_a_reused_slot(driver());
    lingering_close_never_touches_the_next_connection(driver());
    a_second_flush_of_written_output_is_done(driver());
}

/// The uring driver's fallback where the probe's trial finds no multishot accept or
/// receive: single-shot operations, re-armed as needed, keep the same contract —
/// connections accepted one after another, data received in order (including data that
/// arrived while no receive was asked for), replies sent, end of stream reported.
#[test]
fn uring_single_shot_fallback_keeps_the_contract() {
    if !coldwire_io::backend::test_can_run(Backend::Uring) {
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

/// `connect_from` binds the source address before connecting (a load generator's users
/// each with their own); an address that is not this host's fails at once.
fn connects_from_a_source_address<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    let source: std::net::IpAddr = "127.0.0.9".parse().unwrap();
    let id = driver.connect_from(address, source).unwrap();
    let (_server_side, peer) = accept_while_running(&mut driver, &listener);
    assert_eq!(peer.ip(), source);
    driver.close(id);
    let foreign: std::net::IpAddr = "192.0.2.1".parse().unwrap();
    let error = driver.connect_from(address, foreign).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{error}");
}

/// A connection closed before its connect completed is released: its socket is closed
/// (the peer reads the end, if the connection got that far) and its slot is free for the
/// next connection. On io_uring the connect's completion must come first (the close
/// cancels it), since the kernel holds the socket and the address until then.
fn a_connection_closed_while_connecting_is_released<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    listener.set_nonblocking(true).unwrap();
    let first = driver.connect(address).unwrap();
    driver.close(first);
    assert_eq!(driver.counters().open_connections, 0);
    let mut ended = false;
    for _ in 0..100 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while driver.next_completion().is_some() {}
        if let Ok((mut server_side, _)) = listener.accept() {
            server_side.set_nonblocking(false).unwrap();
            server_side
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut rest = Vec::new();
            // EOF or a reset: either way the socket was closed.
            let _ = server_side.read_to_end(&mut rest);
            assert!(rest.is_empty());
            ended = true;
        }
        if ended {
            break;
        }
    }
    // A few more turns so a completion racing the cancellation is handled.
    for _ in 0..5 {
        driver.wait(Some(Duration::from_millis(10))).unwrap();
        while driver.next_completion().is_some() {}
    }
    let second = driver.connect(address).unwrap();
    assert_eq!(
        second.slot, first.slot,
        "the first connection's slot was freed"
    );
    assert_ne!(second, first);
    driver.close(second);
}

/// A flush that said `Done` leaves nothing to flush: flushing again (a server path that
/// answers and then flushes once more) is `Done` too, not `Pending` — `Pending` would make
/// the server wait for a `Sent` (on io_uring the promised send is still in flight).
fn a_second_flush_of_written_output_is_done<D: Driver>(mut driver: D) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(&mut driver);
    let mut reply = driver.take_vec();
    reply.extend_from_slice(b"reply");
    driver.send(id, Chunk::Owned(reply));
    if matches!(driver.flush(id), Flush::Done) {
        assert!(matches!(driver.flush(id), Flush::Done), "flushed twice");
    }
    driver.wait(Some(Duration::ZERO)).unwrap();
    let mut received = [0u8; 5];
    client.read_exact(&mut received).unwrap();
    assert_eq!(&received, b"reply");
    driver.close(id);
}
