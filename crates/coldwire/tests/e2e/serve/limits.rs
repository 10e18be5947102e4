//! `coldwire serve` at its limits: oversized and trickled heads, idle connections and
//! 5,000 cold ones, malformed requests, descriptor exhaustion, the connection limit, and
//! stalled readers.

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::{
    DocumentRoot, READ_TIMEOUT, ServerOptions, counter, exchange, get_request, pseudo_random_bytes,
    raise_open_files_limit, read_response, read_until_closed, split_response,
};

// ---------------------------------------------------------------------------------------
// Limits and deadlines

pub(super) fn twenty_kib_request_header_gets_431(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let big = "a".repeat(20 * 1024);
    let request = format!("GET /index.html HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let response = exchange(&server, request.as_bytes());
    assert_eq!(response.status, 431, "{}", response.status_line);
    let after = exchange(&server, &get_request("/index.html"));
    assert_eq!(after.status, 200, "the next client after a 431");
}

pub(super) fn trickled_request_head_is_cut_off_at_the_header_deadline(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--header-timeout", "1")
        .start();
    let mut stream = server.connect();
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("read timeout");
    let rest = format!("Host: x\r\nX-Slow: {}\r\n\r\n", "s".repeat(40));
    let started = Instant::now();
    stream
        .write_all(b"GET /index.html HTTP/1.1\r\n")
        .expect("sending the first bytes");
    let mut sent = 0;
    let mut closed_after = None;
    let mut scratch = [0u8; 1024];
    // At most one byte per 300 ms: the head (60 more bytes) cannot complete within 18 s.
    while started.elapsed() < Duration::from_secs(4) && sent < rest.len() - 1 {
        match stream.read(&mut scratch) {
            Ok(0) => {
                closed_after = Some(started.elapsed());
                break;
            }
            Ok(count) => panic!(
                "unexpected answer to an incomplete head: {:?}",
                String::from_utf8_lossy(&scratch[..count])
            ),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => {
                closed_after = Some(started.elapsed());
                break;
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stream.write_all(&rest.as_bytes()[sent..=sent]).is_err() {
                    closed_after = Some(started.elapsed());
                    break;
                }
                sent += 1;
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => panic!("reading: {error}"),
        }
    }
    let closed_after = closed_after.expect("the server kept a trickling head open past 4 s");
    assert!(
        closed_after < Duration::from_millis(2500),
        "closed only after {closed_after:?} (header timeout 1 s)"
    );
    assert!(
        closed_after >= Duration::from_millis(900),
        "closed after {closed_after:?}, before the 1 s header timeout"
    );
    assert!(sent < rest.len() - 1, "the head was completed");
    let timeouts = server.wait_for_total("http", "header_timeouts", Duration::from_secs(2), |n| {
        n >= 1
    });
    assert_eq!(timeouts, 1, "total.http.header_timeouts");
}

pub(super) fn idle_connection_is_not_cut_off_by_the_header_deadline(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--header-timeout", "1")
        .flag("--idle-timeout", "30")
        .start();
    let mut stream = server.connect();
    // A connection that was used once and one that never sent anything.
    let mut used = server.connect();
    used.write_all(&get_request("/small.txt")).expect("sending");
    let mut used_reader = BufReader::new(used.try_clone().expect("clone"));
    assert_eq!(
        read_response(&mut used_reader, false)
            .expect("first response")
            .status,
        200
    );
    thread::sleep(Duration::from_secs(2));
    for (name, connection) in [("never used", &mut stream), ("used once", &mut used)] {
        connection
            .write_all(&get_request("/medium.bin"))
            .expect("sending after 2 s idle");
        let mut reader = BufReader::new(connection.try_clone().expect("clone"));
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("{name} connection after 2 s idle: {error}"));
        assert_eq!(response.status, 200, "{name}");
        assert!(response.body == root.medium, "{name}");
    }
    assert_eq!(server.total("http", "header_timeouts"), 0);
    assert_eq!(server.total("http", "idle_timeouts"), 0);
}

// ---------------------------------------------------------------------------------------
// Cold connections

/// Idle connections held in the cold-connections test.
const COLD: usize = 5_000;

/// Only one cold-connections test at a time: three at once would hold 15,000 sockets in
/// this process and crowd the ephemeral ports.
static COLD_CONNECTIONS: Mutex<()> = Mutex::new(());

pub(super) fn five_thousand_idle_connections_do_not_keep_a_new_client_waiting(backend: &str) {
    let _one_at_a_time = COLD_CONNECTIONS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let limit = raise_open_files_limit();
    assert!(
        limit >= COLD as u64 + 500,
        "this test needs {} open files in the test process; the hard limit allows {limit} \
         (raise it with ulimit -Hn)",
        COLD + 500
    );
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--idle-timeout", "120")
        .start();
    let started = Instant::now();
    let mut idle: Vec<TcpStream> = Vec::with_capacity(COLD);
    // Batches below the listen backlog, each waited for, so no SYN is dropped and retried.
    while idle.len() < COLD {
        let batch = 1_000.min(COLD - idle.len());
        for _ in 0..batch {
            idle.push(
                TcpStream::connect(server.addr)
                    .unwrap_or_else(|error| panic!("idle connection {}: {error}", idle.len() + 1)),
            );
        }
        let want = idle.len() as u64;
        let accepted =
            server.wait_for_total("loop", "accepted", Duration::from_secs(5), |n| n >= want);
        assert!(
            accepted >= want,
            "the server accepted {accepted} of {want} connections within 5 s"
        );
    }
    let mut active = server.connect();
    active
        .write_all(&get_request("/medium.bin"))
        .expect("sending the active request");
    let mut reader = BufReader::new(active.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("the active client's response");
    assert_eq!(response.status, 200);
    assert!(response.body == root.medium, "active client's body");
    let open = server.wait_for_total("loop", "open_connections", Duration::from_secs(2), |n| {
        n > COLD as u64
    });
    assert!(
        open > COLD as u64,
        "the server holds {open} connections, want {COLD} idle + 1 active"
    );
    // The oldest and the newest cold connection still work.
    for index in [0, COLD - 1] {
        let connection = &mut idle[index];
        connection
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("timeout");
        connection
            .write_all(&get_request("/small.txt"))
            .expect("sending on a cold connection");
        let mut reader = BufReader::new(connection.try_clone().expect("clone"));
        let response = read_response(&mut reader, false)
            .unwrap_or_else(|error| panic!("cold connection {index}: {error}"));
        assert_eq!(response.status, 200, "cold connection {index}");
        assert_eq!(response.body, root.small, "cold connection {index}");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "holding {COLD} connections took {elapsed:?}"
    );
    drop(server);
    drop(idle);
}

// ---------------------------------------------------------------------------------------
// Malformed requests

pub(super) fn garbage_request_line_gets_400_and_others_are_still_served(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let mut garbage = server.connect();
    garbage.write_all(b"GARBAGE\r\n\r\n").expect("sending");
    let (raw, _) = read_until_closed(&mut garbage).expect("the server should close");
    let (response, _) = split_response(&raw);
    assert_eq!(response.status, 400, "{}", response.status_line);
    let good = exchange(&server, &get_request("/small.txt"));
    assert_eq!(good.status, 200);
    assert_eq!(good.body, root.small);
}

pub(super) fn content_length_with_transfer_encoding_gets_400(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let response = exchange(
        &server,
        b"GET /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\
          Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(response.status, 400, "{}", response.status_line);
    let after = exchange(&server, &get_request("/index.html"));
    assert_eq!(after.status, 200);
}

// ---------------------------------------------------------------------------------------
// Descriptor exhaustion and the connection limit

/// With only 48 descriptors (about 37 left for connections) the server runs out
/// (`EMFILE`) long before the 60 clients are in: it must pause accepting instead of spinning on the listener, keep serving the
/// connections it has, and take the waiting ones once descriptors free up.
pub(super) fn running_out_of_descriptors_pauses_accepting_without_spinning(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .open_files_limit(48)
        .start();
    // Warm the file cache first: once descriptors run out, files cannot be opened.
    let warm = exchange(&server, &get_request("/small.txt"));
    assert_eq!(warm.status, 200);
    let before = server.stats();
    let mut clients: Vec<TcpStream> = (0..60).map(|_| server.connect()).collect();
    // Well past the point of exhaustion: several 100 ms pauses go by.
    std::thread::sleep(Duration::from_millis(600));
    let first = &mut clients[0];
    first
        .write_all(&get_request("/small.txt"))
        .expect("request on an accepted connection");
    let mut reader = BufReader::new(first.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("served while out of descriptors");
    assert_eq!(response.status, 200);
    // Free descriptors: the last client, still in the listen queue, gets accepted and served.
    clients.drain(1..40);
    let last = clients.last_mut().expect("the last client");
    last.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    last.write_all(&get_request("/small.txt"))
        .expect("request from a queued client");
    let mut reader = BufReader::new(last.try_clone().expect("clone"));
    let response =
        read_response(&mut reader, false).expect("queued client served after descriptors freed");
    assert_eq!(response.status, 200);
    drop(clients);
    let after = server.wait_for_total("loop", "accept_pauses", Duration::from_secs(5), |n| n >= 1);
    assert!(after >= 1, "accepting paused at least once");
    let stats = server.stats();
    let waits = counter(&stats, "loop", "wait_calls") - counter(&before, "loop", "wait_calls");
    assert!(
        waits < 2_000,
        "{waits} waits while descriptors were exhausted: the loop is spinning"
    );
}

/// At `--max-connections 2` a third client waits in the listen queue until one of the
/// first two closes, then is served.
pub(super) fn connection_limit_defers_new_connections_until_one_closes(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root)
        .admin()
        .flag("--max-connections", "2")
        .start();
    let first = server.connect();
    let second = server.connect();
    server.wait_for_total("loop", "accepted", Duration::from_secs(5), |n| n >= 2);
    let mut third = server.connect();
    third
        .write_all(&get_request("/small.txt"))
        .expect("request from the third client");
    third
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = third.read(&mut byte);
    assert!(
        matches!(&early, Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the third client must wait while two are open, got {early:?}"
    );
    assert_eq!(server.total("loop", "open_connections"), 2);
    drop(first);
    third.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    let mut reader = BufReader::new(third.try_clone().expect("clone"));
    let response = read_response(&mut reader, false).expect("third client served after a close");
    assert_eq!(response.status, 200);
    drop(second);
}

/// `--write-timeout 1`: a client that stops reading an 8 MiB response is dropped after
/// about a second without progress, while one that reads slowly but steadily (a little
/// every 400 ms, each read freeing room for more) keeps its connection past the timeout.
pub(super) fn stalled_reader_is_dropped_after_the_write_timeout_but_a_slow_one_is_not(
    backend: &str,
) {
    use socket2::{Domain, Socket, Type};
    let root = DocumentRoot::new();
    let huge = pseudo_random_bytes(8 * 1024 * 1024, 0x5ee0_0001);
    std::fs::write(root.root().join("huge.bin"), &huge).expect("writing huge.bin");
    let server = ServerOptions::new(backend, &root)
        .admin()
        // Two seconds, read every 250 ms: the slow reader keeps an 8x margin even when
        // this test thread is descheduled on a busy machine.
        .flag("--write-timeout", "2")
        .start();
    let small_window = || {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        socket.connect(&server.addr.into()).expect("connect");
        let mut stream: TcpStream = socket.into();
        stream
            .write_all(&get_request("/huge.bin"))
            .expect("request");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("timeout");
        stream
    };
    let mut stalled = small_window();
    let mut slow = small_window();
    let mut chunk = vec![0u8; 64 * 1024];
    let started = Instant::now();
    let mut slow_received = 0usize;
    while started.elapsed() < Duration::from_millis(4_500) {
        thread::sleep(Duration::from_millis(250));
        let count = slow
            .read(&mut chunk)
            .expect("the slow reader keeps receiving");
        assert!(count > 0, "the slow reader's connection was closed");
        slow_received += count;
    }
    assert!(
        slow_received < huge.len(),
        "the slow reader must not have finished"
    );
    assert_eq!(
        server.total("http", "write_timeouts"),
        1,
        "exactly the stalled reader timed out"
    );
    // The stalled client finds its connection closed (end of stream or reset) after the
    // bytes already in flight, well before the whole body: a read timeout would fail here.
    let (rest, _) = read_until_closed(&mut stalled).expect("the stalled connection is closed");
    assert!(
        rest.len() < huge.len(),
        "the stalled reader did not get the whole body"
    );
}
