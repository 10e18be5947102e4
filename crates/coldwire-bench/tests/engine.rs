//! End-to-end tests of the generator against small servers written here: a deliberately
//! slow one (corrected latency grows with the backlog, raw does not), one that never
//! answers (timeouts), one that resets (resets), one that answers 503 (bad status), and a
//! closed port (connect errors). Every server is on port 0 and ends with the test; every
//! run is bounded by its phase's duration plus `--timeout`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::Duration;

use coldwire_bench::report::RunReport;
use coldwire_bench::{
    BenchPlan, Engine, LoadConfig, NoObserver, PhasePlan, Rate, ServerWatch, Target, run_benchmark,
};
use coldwire_io::{DriverConfig, EpollPoller, ReadinessDriver};

mod support;

use support::StallLate;

/// What the test server does with each request.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers 200 after this delay (one request at a time per connection).
    Slow(Duration),
    /// Reads requests and never answers.
    Silent,
    /// Reads a request, then resets the connection (SO_LINGER 0).
    Reset,
    /// Answers 503 at once.
    Unavailable,
    /// Answers 200 (without `Connection: close`), then closes the connection.
    CloseAfterOne,
}

/// Reads one request head; false at end of stream or error.
fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            buffer.drain(..end + 4);
            return true;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(count) => buffer.extend_from_slice(&chunk[..count]),
        }
    }
}

fn serve_connection(mut stream: TcpStream, behaviour: Behaviour) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut buffer = Vec::new();
    while read_head(&mut stream, &mut buffer) {
        match behaviour {
            Behaviour::Slow(delay) => {
                thread::sleep(delay);
                if stream
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .is_err()
                {
                    return;
                }
            }
            Behaviour::Silent => {}
            Behaviour::Reset => {
                let socket = socket2::Socket::from(stream);
                let _ = socket.set_linger(Some(Duration::ZERO));
                return;
            }
            Behaviour::CloseAfterOne => {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                return;
            }
            Behaviour::Unavailable => {
                let _ = stream.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
                );
            }
        }
    }
}

/// Starts a server; it accepts until the process ends (threads are detached, each
/// connection ends when the generator closes it or after 20 s of silence).
fn start_server(behaviour: Behaviour) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || serve_connection(stream, behaviour));
        }
    });
    address
}

fn load(address: SocketAddr) -> LoadConfig {
    let mut config = LoadConfig::new(vec![Target::parse(&format!("http://{address}/x")).unwrap()]);
    // Counts below are exact: a test machine busy with other tests may deschedule the
    // generator for a few milliseconds, which must not turn slots into missed ones.
    config.late_limit = Duration::from_secs(1);
    config
}

fn run(load: LoadConfig, rate: f64, seconds: f64) -> RunReport {
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let mut engine = Engine::new(driver, load, Arc::new(AtomicBool::new(false))).unwrap();
    let plan = BenchPlan {
        name: "test".into(),
        phases: vec![PhasePlan {
            label: "phase".into(),
            rate: Rate::PerSecond(rate),
            warmup: Duration::ZERO,
            duration: Duration::from_secs_f64(seconds),
        }],
        saturate: None,
        watch: ServerWatch::default(),
    };
    run_benchmark(&mut engine, &plan, &mut NoObserver).unwrap()
}

#[test]
fn corrected_latency_grows_with_the_backlog_and_raw_latency_does_not() {
    // One connection, 20 ms per response: capacity 50/s, offered 100/s for 1 s. The
    // backlog grows by 50 requests per second, so the last requests wait about a second
    // for the connection, while each one, once sent, still takes about 20 ms.
    let address = start_server(Behaviour::Slow(Duration::from_millis(20)));
    // A slot is missed only when the generator reaches it over a second late, which on a
    // machine loaded far beyond its cores can happen by waiting for a CPU: up to three
    // runs, judged on the best; missed slots there fail the test unless the generator
    // (this thread) waited in the run queue for at least the late limit during that run.
    let mut best: Option<(RunReport, Duration)> = None;
    for _ in 0..3 {
        let mut config = load(address);
        config.connections = 1;
        let waited_before = coldwire_testkit::starvation::thread_run_delay();
        let report = run(config, 100.0, 1.0);
        let waited = coldwire_testkit::starvation::thread_run_delay()
            .zip(waited_before)
            .map_or(Duration::ZERO, |(after, before)| after - before);
        let missed = report.phases[0].missed_slots;
        if best
            .as_ref()
            .is_none_or(|(kept, _)| missed < kept.phases[0].missed_slots)
        {
            best = Some((report, waited));
        }
        if missed == 0 {
            break;
        }
    }
    let (report, waited) = best.unwrap();
    let phase = &report.phases[0];
    assert_eq!(phase.offered_requests, 100);
    if phase.missed_slots > 0 {
        assert!(
            waited >= Duration::from_secs(1),
            "the generator is not the one that is late: {} slots missed in the best of 3 runs, \
             while it waited only {waited:?} for a CPU",
            phase.missed_slots
        );
        println!(
            "not checking for zero missed slots: the generator waited {waited:?} for a CPU \
             (starved); {} slots missed",
            phase.missed_slots
        );
    }
    assert_eq!(phase.errors_total, 0, "{:?}", phase.errors);
    assert_eq!(
        phase.succeeded_requests + phase.missed_slots,
        100,
        "queued requests are sent, not dropped"
    );
    let corrected = &phase.latency.corrected;
    let raw = &phase.latency.raw;
    assert!(
        raw.p50_us >= 20_000.0,
        "raw latency includes the server's 20 ms: {raw:?}"
    );
    assert!(
        corrected.max_us > 500_000.0,
        "the last requests waited for the backlog: {corrected:?}"
    );
    assert!(
        corrected.max_us > 5.0 * raw.max_us,
        "corrected {corrected:?} vs raw {raw:?}"
    );
    assert!(
        corrected.p90_us > 5.0 * raw.p90_us,
        "the backlog shows in the corrected percentiles, not in the raw ones"
    );
    // The achieved rate is the server's capacity, not the offered one.
    assert!(phase.achieved_rate < 75.0, "{}", phase.achieved_rate);
}

#[test]
fn unanswered_requests_are_timeouts() {
    let address = start_server(Behaviour::Silent);
    let mut config = load(address);
    config.connections = 4;
    config.timeout = Duration::from_millis(300);
    let report = run(config, 20.0, 0.5);
    let phase = &report.phases[0];
    assert_eq!(phase.offered_requests, 10);
    assert_eq!(phase.succeeded_requests, 0);
    // Four requests are sent and time out; the others wait for a connection: sent on a
    // fresh one after a timeout, or dropped after waiting 300 ms (queue timeouts).
    assert!(phase.errors.timeout >= 4, "{:?}", phase.errors);
    assert_eq!(
        phase.errors.timeout + phase.errors.queue_timeout,
        10,
        "{:?}",
        phase.errors
    );
    assert_eq!(
        phase.errors.reset + phase.errors.connect + phase.errors.closed,
        0
    );
}

#[test]
fn resets_refusals_and_bad_statuses_are_told_apart() {
    let reset = start_server(Behaviour::Reset);
    let report = run(load(reset), 50.0, 0.4);
    let phase = &report.phases[0];
    assert_eq!(phase.offered_requests, 20);
    assert_eq!(phase.errors.reset, 20, "{:?}", phase.errors);

    let closed_port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let report = run(load(closed_port), 50.0, 0.4);
    let phase = &report.phases[0];
    assert_eq!(phase.errors.connect, 20, "{:?}", phase.errors);

    let unavailable = start_server(Behaviour::Unavailable);
    let report = run(load(unavailable), 50.0, 0.4);
    let phase = &report.phases[0];
    assert_eq!(phase.errors.bad_status, 20, "{:?}", phase.errors);
    assert_eq!(phase.status_classes[4], 20);
    assert_eq!(phase.errors_total, 20);
    assert_eq!(phase.latency.corrected.count, 0, "failures have no latency");
}

#[test]
fn one_connection_per_request_opens_a_connection_per_request() {
    let address = start_server(Behaviour::Slow(Duration::ZERO));
    let mut config = load(address);
    config.requests_per_connection = 1;
    let report = run(config, 100.0, 0.5);
    let phase = &report.phases[0];
    assert_eq!(phase.succeeded_requests, 50, "{:?}", phase.errors);
    assert_eq!(phase.connections_opened, 50);
}

#[test]
fn a_server_closing_kept_alive_connections_costs_reconnections_not_errors() {
    let address = start_server(Behaviour::CloseAfterOne);
    let mut config = load(address);
    config.connections = 2;
    let report = run(config, 50.0, 0.6);
    let phase = &report.phases[0];
    assert_eq!(phase.offered_requests, 30);
    assert_eq!(phase.errors_total, 0, "{:?}", phase.errors);
    assert_eq!(phase.succeeded_requests, 30);
    assert!(
        phase.connections_opened >= 29,
        "{}",
        phase.connections_opened
    );
}

/// Stalls the generator's loop at the start of the measured window.
struct Stall(Duration);

impl coldwire_bench::PhaseObserver for Stall {
    fn window_started(&mut self) {
        thread::sleep(self.0);
    }
}

#[test]
fn slots_missed_while_the_generator_stalls_are_counted_not_burst() {
    let address = start_server(Behaviour::Slow(Duration::ZERO));
    let mut config = load(address);
    config.late_limit = Duration::from_millis(5);
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let mut engine = Engine::new(driver, config, Arc::new(AtomicBool::new(false))).unwrap();
    let phase = PhasePlan {
        label: "stalled".into(),
        rate: Rate::PerSecond(100.0),
        warmup: Duration::from_millis(100),
        duration: Duration::from_secs(1),
    };
    // The loop sleeps 300 ms when the window opens: about 30 slots pass meanwhile.
    let measurement = engine
        .run_phase(&phase, &mut Stall(Duration::from_millis(300)))
        .unwrap();
    let recorder = &measurement.recorder;
    assert_eq!(recorder.offered, 100);
    assert!(recorder.missed >= 25, "missed {}", recorder.missed);
    assert_eq!(
        recorder.sent + recorder.missed,
        recorder.offered,
        "every slot is either sent on time or counted as missed"
    );
    assert_eq!(recorder.succeeded, recorder.sent);
    assert!(
        recorder.lateness.max() <= 5_000_000 + 5_000,
        "no slot was sent later than the limit (no catch-up burst): {} ns",
        recorder.lateness.max()
    );
}

#[test]
fn slots_due_just_before_the_window_ends_are_offered_not_dropped() {
    let address = start_server(Behaviour::Slow(Duration::ZERO));
    let mut config = load(address);
    config.late_limit = Duration::from_millis(5);
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let mut engine = Engine::new(driver, config, Arc::new(AtomicBool::new(false))).unwrap();
    let phase = PhasePlan {
        label: "stalled at the end".into(),
        rate: Rate::PerSecond(100.0),
        warmup: Duration::ZERO,
        duration: Duration::from_secs(1),
    };
    // The loop sleeps 500 ms from about 750 ms in: it wakes after the window has ended,
    // with the last ~25 slots of the window due and unsent.
    let mut stall = StallLate {
        after: Duration::from_millis(700),
        pause: Duration::from_millis(500),
        done: false,
    };
    let measurement = engine.run_phase(&phase, &mut stall).unwrap();
    let recorder = &measurement.recorder;
    assert!(stall.done, "the stall never happened");
    assert_eq!(recorder.offered, 100, "every slot of the window is offered");
    assert!(recorder.missed >= 15, "missed {}", recorder.missed);
    assert_eq!(recorder.sent + recorder.missed, recorder.offered);
}

#[test]
fn per_second_intervals_add_up_to_the_window() {
    let address = start_server(Behaviour::Slow(Duration::ZERO));
    let report = run(load(address), 200.0, 2.0);
    let phase = &report.phases[0];
    assert_eq!(phase.intervals.len(), 2, "{:?}", phase.intervals);
    let completed: u64 = phase
        .intervals
        .iter()
        .map(|interval| interval.completed)
        .sum();
    assert_eq!(completed, phase.completed_in_window);
    assert!(
        phase
            .intervals
            .iter()
            .all(|interval| interval.succeeded == interval.completed)
    );
}

fn run_closed_loop(load: LoadConfig, seconds: f64) -> RunReport {
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let mut engine = Engine::new(driver, load, Arc::new(AtomicBool::new(false))).unwrap();
    let plan = BenchPlan {
        name: "test".into(),
        phases: vec![PhasePlan {
            label: "max".into(),
            rate: Rate::Max,
            warmup: Duration::ZERO,
            duration: Duration::from_secs_f64(seconds),
        }],
        saturate: None,
        watch: ServerWatch::default(),
    };
    run_benchmark(&mut engine, &plan, &mut NoObserver).unwrap()
}

#[test]
fn an_emulated_round_trip_bounds_each_connection_to_one_request_per_rtt() {
    // Closed loop on 2 connections to an instant server for 1 s: with a 100 ms rest after
    // each response, each connection carries at most 1 + 1 s / 100 ms requests.
    let address = start_server(Behaviour::Slow(Duration::ZERO));
    let mut config = load(address);
    config.connections = 2;
    config.rtt = Duration::from_millis(100);
    let rested = run_closed_loop(config, 1.0);
    let phase = &rested.phases[0];
    assert_eq!(phase.errors_total, 0, "{:?}", phase.errors);
    assert!(phase.completed_in_window >= 1, "requests still flow");
    assert!(
        phase.completed_in_window <= 2 * 11,
        "{} responses: more than one per connection per round trip",
        phase.completed_in_window
    );
    let mut config = load(address);
    config.connections = 2;
    let unrested = run_closed_loop(config, 1.0);
    assert!(
        unrested.phases[0].completed_in_window > 2 * 11,
        "without the rest the same connections carry many more ({})",
        unrested.phases[0].completed_in_window
    );
}
