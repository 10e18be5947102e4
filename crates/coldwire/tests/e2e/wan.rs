//! `coldwire wan` end to end, on every backend: the relay adds the round trip it is told
//! (an echo through `--rtt 80ms` takes at least 80 ms), shapes bandwidth (a transfer at
//! `--bandwidth` takes its size over the rate), delivers every byte in order under loss,
//! delays the upstream connect by the one-way delay, and an idle relayed connection costs
//! the loop no work (no timer, no wake-up).
//!
//! Timing assertions are lower bounds (the model's delay is a floor) with generous upper
//! bounds, so a busy machine cannot fail them; the precise numbers are measured by the
//! benchmarks, not here.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A sink that counts what it receives and answers with the count once the sender ends.
fn counting_sink() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buffer = [0u8; 65536];
                let mut total = 0u64;
                while let Ok(read) = stream.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    total += read as u64;
                }
                let _ = stream.write_all(total.to_string().as_bytes());
            });
        }
    });
    address
}

struct Relay {
    child: Child,
    address: SocketAddr,
    stats: Option<String>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn relay(backend: &str, to: SocketAddr, args: &[&str]) -> Relay {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args(["wan", "--to", &to.to_string(), "--listen", "127.0.0.1:0"])
        .args(["--io", backend, "--workers", "1", "--admin", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting coldwire wan");
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    let address = line
        .trim()
        .strip_prefix("wan listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    let stats = line.trim().strip_prefix("stats on ").map(str::to_owned);
    Relay {
        child,
        address,
        stats,
    }
}

fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

fn wait_calls(relay: &Relay) -> u64 {
    let url = relay.stats.as_ref().expect("stats endpoint");
    let output = Command::new("curl")
        .args(["-s", "--max-time", "10", url])
        .output()
        .expect("curl");
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stats JSON");
    stats["total"]["loop"]["wait_calls"]
        .as_u64()
        .expect("wait_calls")
}

coldwire_testkit::backend_tests! {
    an_echo_takes_the_round_trip,
    bandwidth_spreads_a_transfer_over_its_rate,
    every_byte_arrives_in_order_under_loss,
    idle_relayed_connections_cost_no_loop_work,
    chained_relays_add_their_delays_and_carry_many_connections,
}

fn an_echo_takes_the_round_trip(backend: &str) {
    let echo = coldwire_testkit::start_echo_server();
    let relay = relay(backend, echo, &["--rtt", "80ms"]);
    // Never early, on every connection; not much late is judged on the best of up to
    // three connections (a round trip can only grow by waiting for a CPU).
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let mut stream = connect(relay.address);
        let mut rounds = Vec::new();
        let mut buffer = [0u8; 4];
        for _ in 0..5 {
            let sent = Instant::now();
            stream.write_all(b"ping").unwrap();
            stream.read_exact(&mut buffer).unwrap();
            rounds.push(sent.elapsed());
        }
        // The first round also paid the emulated handshake (one more round trip).
        assert!(
            started.elapsed() >= Duration::from_millis(6 * 80),
            "{backend}: {rounds:?}"
        );
        assert!(
            rounds[0] >= Duration::from_millis(160),
            "{backend}: {rounds:?}"
        );
        rounds.sort();
        let median = rounds[2];
        assert!(
            median >= Duration::from_millis(80),
            "{backend}: median round trip {median:?} ({rounds:?})"
        );
        best = best.min(median);
        if best < Duration::from_millis(200) {
            break;
        }
    }
    assert!(
        best < Duration::from_millis(200),
        "{backend}: best median round trip of three connections {best:?}"
    );
}

fn bandwidth_spreads_a_transfer_over_its_rate(backend: &str) {
    let sink = counting_sink();
    let relay = relay(backend, sink, &["--rtt", "2ms", "--bandwidth", "8Mbit"]);
    // Never faster than the rate, on every transfer; not much slower is judged on the best
    // of up to three transfers (waiting for a CPU only slows one down).
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let mut stream = connect(relay.address);
        let payload = vec![7u8; 1_000_000];
        let started = Instant::now();
        stream.write_all(&payload).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let took = started.elapsed();
        assert_eq!(answer, "1000000", "{backend}");
        assert!(
            took >= Duration::from_millis(950),
            "{backend}: 1 MB at 8 Mbit/s took {took:?}"
        );
        best = best.min(took);
        if best < Duration::from_secs(5) {
            break;
        }
    }
    assert!(
        best < Duration::from_secs(5),
        "{backend}: 1 MB at 8 Mbit/s took {best:?} at best of three"
    );
}

fn every_byte_arrives_in_order_under_loss(backend: &str) {
    let echo = coldwire_testkit::start_echo_server();
    let relay = relay(
        backend,
        echo,
        &["--rtt", "4ms", "--loss", "2%", "--seed", "9"],
    );
    let mut stream = connect(relay.address);
    let mut state = 0x2545_f491_u64;
    let payload: Vec<u8> = (0..600_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        let payload = payload.clone();
        std::thread::spawn(move || {
            stream.write_all(&payload).unwrap();
            stream.shutdown(std::net::Shutdown::Write).unwrap();
        })
    };
    let mut echoed = Vec::new();
    stream.read_to_end(&mut echoed).unwrap();
    writer.join().unwrap();
    assert_eq!(echoed.len(), payload.len(), "{backend}");
    assert!(echoed == payload, "{backend}: bytes changed or reordered");
}

fn idle_relayed_connections_cost_no_loop_work(backend: &str) {
    let echo = coldwire_testkit::start_echo_server();
    let relay = relay(backend, echo, &["--rtt", "10ms"]);
    let mut streams: Vec<TcpStream> = (0..200).map(|_| connect(relay.address)).collect();
    let mut byte = [0u8; 1];
    for stream in &mut streams {
        stream.write_all(b"x").unwrap();
    }
    for stream in &mut streams {
        stream.read_exact(&mut byte).unwrap();
    }
    // Every connection is established both ways and idle now.
    std::thread::sleep(Duration::from_millis(200));
    let before = wait_calls(&relay);
    std::thread::sleep(Duration::from_secs(1));
    let after = wait_calls(&relay);
    assert!(
        after - before <= 3,
        "{backend}: 200 idle connections woke the loop {} times in a second",
        after - before
    );
}

/// Two relays in a chain, as the seeds place them (one on the client side, one on the
/// server side): a round trip pays both delays, and 300 connections opened at once through
/// the chain each echo their own bytes.
fn chained_relays_add_their_delays_and_carry_many_connections(backend: &str) {
    let echo = coldwire_testkit::start_echo_server();
    let server_side = relay(backend, echo, &["--rtt", "40ms"]);
    let client_side = relay(backend, server_side.address, &["--rtt", "40ms"]);
    let mut stream = connect(client_side.address);
    let mut buffer = [0u8; 4];
    stream.write_all(b"ping").unwrap();
    stream.read_exact(&mut buffer).unwrap();
    // Never early (the median round trip of every set); not much late judged on the best
    // median of up to three sets of three.
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let mut rounds = Vec::new();
        for _ in 0..3 {
            let sent = Instant::now();
            stream.write_all(b"ping").unwrap();
            stream.read_exact(&mut buffer).unwrap();
            rounds.push(sent.elapsed());
        }
        rounds.sort();
        assert!(
            rounds[1] >= Duration::from_millis(80),
            "{backend}: two 40 ms relays, median round trip {:?} ({rounds:?})",
            rounds[1]
        );
        best = best.min(rounds[1]);
        if best < Duration::from_millis(400) {
            break;
        }
    }
    assert!(
        best < Duration::from_millis(400),
        "{backend}: two 40 ms relays, best median round trip {best:?}"
    );
    let mut streams: Vec<TcpStream> = (0..300).map(|_| connect(client_side.address)).collect();
    for (index, stream) in streams.iter_mut().enumerate() {
        stream.write_all(format!("{index:08}").as_bytes()).unwrap();
    }
    for (index, stream) in streams.iter_mut().enumerate() {
        let mut answer = [0u8; 8];
        stream.read_exact(&mut answer).unwrap();
        assert_eq!(
            answer,
            format!("{index:08}").as_bytes(),
            "{backend}: connection {index} got another connection's bytes"
        );
    }
}
