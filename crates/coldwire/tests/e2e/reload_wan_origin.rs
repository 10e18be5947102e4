//! SIGHUP for `coldwire origin` and `coldwire wan` (docs/operations.md, Reload), on every
//! backend: the origin's think time and the relay's round trip change in the file and take
//! effect without dropping a connection; what cannot change live is named and kept; a bad
//! file changes nothing and says why.
//!
//! Timing assertions are lower bounds only (a delay the model adds is a floor), so a busy
//! machine cannot fail them.

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use coldwire_process::Process;
use coldwire_testkit::response::read_response;

use super::operations::{start, stop};

coldwire_testkit::backend_tests! {
    sighup_changes_the_origin_think_time_on_a_kept_connection,
    sighup_changes_the_wan_round_trip_without_dropping_connections,
}

/// Sends SIGHUP and waits for the report that holds `text` (each report once: the stderr
/// tail is searched from the end of what it held before).
fn reload(process: &mut Process, text: &str) -> String {
    let before = process.stderr_tail().matches(text).count();
    process.signal(libc::SIGHUP).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tail = process.stderr_tail();
        if tail.matches(text).count() > before {
            return tail;
        }
        assert!(
            Instant::now() < deadline,
            "no new {text:?} on stderr: {tail}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One GET on a keep-alive connection to the origin; its status and how long it took.
fn timed_get(stream: &mut BufReader<TcpStream>, id: u32) -> (u16, Duration) {
    let started = Instant::now();
    stream
        .get_mut()
        .write_all(format!("GET /obj/{id} HTTP/1.1\r\nHost: o\r\n\r\n").as_bytes())
        .unwrap();
    let response = read_response(stream, false).expect("a response");
    (response.status, started.elapsed())
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Think 0 → 300 ms by SIGHUP: the next answer on a connection opened before the reload
/// waits at least 250 ms; a changed seed and listen address are named and kept; a bad
/// file changes nothing.
fn sighup_changes_the_origin_think_time_on_a_kept_connection(backend: &str) {
    let directory = tempfile::tempdir().unwrap();
    let config = directory.path().join("origin.toml");
    let file = |think: &str, extra: &str| {
        format!(
            "[origin]\nlisten = \"127.0.0.1:0\"\nworkers = 1\nio = \"{backend}\"\n\
             mix = \"1KiB\"\nthink = \"{think}\"\nthink-sd = \"0s\"\n{extra}"
        )
    };
    write(&config, &file("0s", ""));
    let config_text = config.to_string_lossy().into_owned();
    let (mut origin, address) = start(&["origin", "--config", &config_text], &[]);
    let mut kept = BufReader::new(TcpStream::connect(address).unwrap());
    kept.get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (status, before) = timed_get(&mut kept, 1);
    assert_eq!(status, 200);

    write(&config, &file("300ms", ""));
    let tail = reload(&mut origin, "SIGHUP, configuration reloaded");
    assert!(!tail.contains("not changed while running"), "{tail}");
    let (status, after) = timed_get(&mut kept, 2);
    assert_eq!(status, 200, "the keep-alive connection carries on");
    assert!(
        after >= Duration::from_millis(250),
        "{backend}: think 300ms after the reload, the answer took {after:?} (before: {before:?})"
    );

    // What cannot change live is named and left as it was: the objects stay those the
    // robots expect, the listener stays where it is.
    write(
        &config,
        &file("300ms", "seed = 7\n").replace("127.0.0.1:0", "127.0.0.1:1"),
    );
    let tail = reload(&mut origin, "not changed while running");
    assert!(
        tail.contains("--listen") && tail.contains("--seed"),
        "{tail}"
    );
    assert_eq!(timed_get(&mut kept, 3).0, 200);
    // A bad file changes nothing and says why; the think time stays.
    write(&config, "[origin]\nthink = \"soon\"\n");
    let tail = reload(&mut origin, "NOT reloaded");
    assert!(tail.contains("think"), "{tail}");
    let (status, still) = timed_get(&mut kept, 4);
    assert_eq!(status, 200);
    assert!(still >= Duration::from_millis(250), "{backend}: {still:?}");
    drop(kept);
    stop(origin);
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// One echo of `message` through `stream`; how long it took.
fn echo(stream: &mut TcpStream, message: &[u8; 4]) -> Duration {
    let started = Instant::now();
    stream.write_all(message).unwrap();
    let mut buffer = [0u8; 4];
    stream.read_exact(&mut buffer).unwrap();
    assert_eq!(&buffer, message, "the bytes come back as sent");
    started.elapsed()
}

/// rtt 0 → 200 ms by SIGHUP: a new connection's echo takes at least 150 ms, and a
/// connection opened before the reload keeps working (its bytes from now on take the new
/// path too); a changed `--to` is named and kept; a bad file changes nothing.
fn sighup_changes_the_wan_round_trip_without_dropping_connections(backend: &str) {
    let echo_address = coldwire_testkit::start_echo_server();
    let directory = tempfile::tempdir().unwrap();
    let config = directory.path().join("wan.toml");
    let file = |rtt: &str, to: SocketAddr| {
        format!(
            "[wan]\nlisten = \"127.0.0.1:0\"\nworkers = 1\nio = \"{backend}\"\n\
             to = \"{to}\"\nrtt = \"{rtt}\"\n"
        )
    };
    write(&config, &file("0s", echo_address));
    let config_text = config.to_string_lossy().into_owned();
    let (mut relay, address) = start(&["wan", "--config", &config_text], &[]);
    let mut existing = connect(address);
    let before = echo(&mut existing, b"ping");

    write(&config, &file("200ms", echo_address));
    let tail = reload(&mut relay, "SIGHUP, configuration reloaded");
    assert!(!tail.contains("not changed while running"), "{tail}");
    let mut fresh = connect(address);
    let first = echo(&mut fresh, b"new1");
    assert!(
        first >= Duration::from_millis(150),
        "{backend}: rtt 200ms after the reload, a new connection's echo took {first:?} \
         (before: {before:?})"
    );
    let later = echo(&mut fresh, b"new2");
    assert!(later >= Duration::from_millis(150), "{backend}: {later:?}");
    let on_existing = echo(&mut existing, b"old1");
    assert!(
        on_existing >= Duration::from_millis(150),
        "{backend}: the existing connection carries on, on the new path: {on_existing:?}"
    );

    // The destination cannot change live: named, kept, still relayed to the echo.
    let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
    write(&config, &file("200ms", elsewhere));
    let tail = reload(&mut relay, "not changed while running");
    assert!(tail.contains("--to"), "{tail}");
    echo(&mut connect(address), b"kept");
    // A bad file changes nothing and says why.
    write(&config, "[wan]\nrtt = \"slow\"\n");
    let tail = reload(&mut relay, "NOT reloaded");
    assert!(tail.contains("rtt"), "{tail}");
    echo(&mut existing, b"old2");
    drop(existing);
    drop(fresh);
    stop(relay);
}
