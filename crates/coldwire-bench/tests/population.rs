//! The population engine against a small threaded server written here, which answers every
//! request with the verifiable body of the object its path names (as `coldwire origin`
//! does) and records who connected from where: each user connects from its own source
//! address, holds no more connections than its limit, closes a connection after its
//! request limit, every response is verified — and a server that corrupts a byte is caught.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use coldwire_bench::engine::NoObserver;
use coldwire_bench::population::engine::{AsEdges, PhaseRecordings};
use coldwire_bench::population::{Population, PopulationConfig, PopulationEngine, UserRequest};
use coldwire_bench::schedule::Random;
use coldwire_io::{DriverConfig, EpollPoller, ReadinessDriver};

mod support;

use support::StallLate;

#[derive(Default)]
struct Seen {
    /// Connections per peer address.
    connections: HashMap<IpAddr, usize>,
    /// Requests per connection, in order of connection.
    requests: Vec<usize>,
    /// Most connections open at once per peer address.
    most_open: HashMap<IpAddr, usize>,
    open: HashMap<IpAddr, usize>,
}

fn serve(mut stream: TcpStream, seen: Arc<Mutex<Seen>>, corrupt: bool, served: Arc<AtomicUsize>) {
    let peer = stream.peer_addr().map(|peer| peer.ip()).ok();
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.requests.push(0);
        if let Some(peer) = peer {
            *seen.connections.entry(peer).or_default() += 1;
            let open = seen.open.entry(peer).or_default();
            *open += 1;
            let open = *open;
            let most = seen.most_open.entry(peer).or_default();
            *most = (*most).max(open);
        }
        seen.requests.len() - 1
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    'requests: loop {
        let end = loop {
            if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break end;
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break 'requests,
                Ok(count) => buffer.extend_from_slice(&chunk[..count]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        buffer.drain(..end + 4);
        let id: u64 = head
            .split_whitespace()
            .nth(1)
            .and_then(|path| path.rsplit('/').next())
            .and_then(|id| id.parse().ok())
            .unwrap_or(0);
        let size = 1000 + id % 3000;
        let close = head.contains("Connection: close");
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nX-Coldwire-Object: id={id:x}; v=0; size={size}\r\n{}\r\n",
            if close { "Connection: close\r\n" } else { "" }
        )
        .into_bytes();
        let body_at = response.len();
        coldwire_workload::fill_body(&mut response, id, 0, 0, size);
        if corrupt && id.is_multiple_of(5) {
            response[body_at + 17] ^= 0x40;
        }
        seen.lock().unwrap().requests[index] += 1;
        served.fetch_add(1, Ordering::Relaxed);
        if stream.write_all(&response).is_err() || close {
            break;
        }
    }
    if let Some(peer) = peer
        && let Some(open) = seen.lock().unwrap().open.get_mut(&peer)
    {
        *open -= 1;
    }
}

fn start_server(corrupt: bool) -> (SocketAddr, Arc<Mutex<Seen>>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let served = Arc::new(AtomicUsize::new(0));
    let (shared, count) = (seen.clone(), served.clone());
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (shared, count) = (shared.clone(), count.clone());
            thread::spawn(move || serve(stream, shared, corrupt, count));
        }
    });
    (address, seen, served)
}

/// Users at a fixed rate each, from 127.0.9.(user + 1), 2 connections at most, 3 requests
/// per connection; half of them active in the second phase.
struct Fixed {
    endpoints: Vec<SocketAddr>,
    users: usize,
    gap: Duration,
    next_id: u64,
}

impl Population for Fixed {
    fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }
    fn users(&self) -> usize {
        self.users
    }
    fn active_users(&self, phase: usize, _elapsed: Duration) -> usize {
        if phase == 0 {
            self.users
        } else {
            self.users / 2
        }
    }
    fn next_arrival(
        &mut self,
        _user: usize,
        after: Instant,
        _first: bool,
        _random: &mut Random,
    ) -> Option<Instant> {
        Some(after + self.gap)
    }
    fn request(
        &mut self,
        _user: usize,
        _intended: Instant,
        close: bool,
        _random: &mut Random,
    ) -> UserRequest {
        self.next_id += 1;
        let id = self.next_id;
        let text = format!(
            "GET /obj/{id} HTTP/1.1\r\nHost: test\r\n{}\r\n",
            if close { "Connection: close\r\n" } else { "" }
        );
        UserRequest {
            endpoint: 0,
            bytes: Bytes::from(text),
            head_request: false,
            expected_object: Some(id),
            basic: true,
            offered_hit: id.is_multiple_of(2),
            kind: 0,
        }
    }
    fn source(&self, user: usize) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(127, 0, 9, user as u8 + 1)))
    }
    fn connection_limits(&mut self, _user: usize, _random: &mut Random) -> (usize, u64) {
        (2, 3)
    }
    fn request_kinds(&self) -> &[&'static str] {
        &["basic"]
    }
}

fn run(address: SocketAddr, users: usize, gap: Duration) -> Vec<PhaseRecordings> {
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let population = Fixed {
        endpoints: vec![address],
        users,
        gap,
        next_id: 0,
    };
    let config = PopulationConfig {
        timeout: Duration::from_secs(5),
        late_limit: Duration::from_millis(200),
        max_open: 1000,
        drain: Duration::from_secs(5),
        seed: 3,
    };
    let mut engine = PopulationEngine::new(
        driver,
        Box::new(population),
        config,
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    let phases = [
        ("all".to_owned(), Duration::from_millis(1500)),
        ("half".to_owned(), Duration::from_millis(1000)),
    ];
    engine.run(&phases, &mut AsEdges(&mut NoObserver)).unwrap()
}

#[test]
fn users_keep_their_own_addresses_limits_and_persistent_connections() {
    let (address, seen, served) = start_server(false);
    let phases = run(address, 10, Duration::from_millis(50));
    let seen = seen.lock().unwrap();
    // Every user connected from its own address, never more than two connections at once.
    assert_eq!(seen.connections.len(), 10, "{:?}", seen.connections);
    assert!(
        seen.most_open.values().all(|&most| most <= 2),
        "{:?}",
        seen.most_open
    );
    // A connection carries at most three requests, and usually exactly three.
    assert!(seen.requests.iter().all(|&count| count <= 3));
    let full = seen.requests.iter().filter(|&&count| count == 3).count();
    assert!(full * 2 > seen.requests.len(), "{:?}", seen.requests);
    let (all, half) = (&phases[0], &phases[1]);
    // 10 users at 20/s for 1.5 s, then 5 for 1 s (± the first gap and scheduling).
    assert!(
        (250..=310).contains(&all.recorder.offered),
        "{}",
        all.recorder.offered
    );
    assert!(
        (80..=110).contains(&half.recorder.offered),
        "{}",
        half.recorder.offered
    );
    assert_eq!(all.population.max_active_users, 10);
    assert_eq!(half.recorder.errors.total(), 0);
    let responses: u64 = phases.iter().map(|phase| phase.recorder.succeeded).sum();
    assert_eq!(responses as usize, served.load(Ordering::Relaxed));
    let verified: u64 = phases.iter().map(|phase| phase.population.verified).sum();
    assert_eq!(verified, responses);
    assert_eq!(all.population.integrity.total(), 0);
    // Offered hits are every second id: about half of the basic responses.
    let ratio = all.population.offered_hits as f64 / all.population.basic_responses as f64;
    assert!((0.4..0.6).contains(&ratio), "{ratio}");
    // Nothing answered with a Cache-Status hit: all misses.
    assert_eq!(all.population.hits, 0);
    assert_eq!(all.population.miss.len(), all.recorder.succeeded);
}

#[test]
fn a_server_serving_wrong_bytes_is_caught() {
    let (address, _seen, _served) = start_server(true);
    let phases = run(address, 4, Duration::from_millis(40));
    let failures: u64 = phases
        .iter()
        .map(|phase| phase.population.integrity.wrong_bytes)
        .sum();
    let responses: u64 = phases.iter().map(|phase| phase.recorder.succeeded).sum();
    // Every fifth object is corrupted, and only those.
    assert!(responses > 100);
    let expected = responses as f64 / 5.0;
    assert!(
        (failures as f64 - expected).abs() <= expected * 0.2 + 2.0,
        "{failures} of {responses}"
    );
    let verified: u64 = phases.iter().map(|phase| phase.population.verified).sum();
    assert_eq!(verified + failures, responses);
}

#[test]
fn arrivals_due_before_a_phase_ends_are_offered_even_when_the_loop_wakes_late() {
    let (address, _seen, _served) = start_server(false);
    let driver = ReadinessDriver::<EpollPoller>::new(DriverConfig::default()).unwrap();
    let population = Fixed {
        endpoints: vec![address],
        users: 1,
        gap: Duration::from_millis(100),
        next_id: 0,
    };
    let config = PopulationConfig {
        timeout: Duration::from_secs(5),
        late_limit: Duration::from_millis(200),
        max_open: 10,
        drain: Duration::from_secs(5),
        seed: 3,
    };
    let mut engine = PopulationEngine::new(
        driver,
        Box::new(population),
        config,
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    // One arrival every 100 ms from 100 ms on: 9 fall in the 1 s phase. The loop sleeps
    // 500 ms from about 750 ms in and wakes after the phase's end, with 800 and 900 due.
    let mut stall = StallLate {
        after: Duration::from_millis(700),
        pause: Duration::from_millis(500),
        done: false,
    };
    let phases = [("only".to_owned(), Duration::from_millis(1000))];
    let recordings = engine.run(&phases, &mut AsEdges(&mut stall)).unwrap();
    assert!(stall.done, "the stall never happened");
    let recorder = &recordings[0].recorder;
    assert_eq!(
        recorder.offered, 9,
        "every arrival due in the phase is offered"
    );
    assert!(recorder.missed >= 2, "missed {}", recorder.missed);
}
