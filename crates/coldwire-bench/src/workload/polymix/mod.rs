//! `--workload polymix`: Web Polygraph's PolyMix-4 robots as a [`Population`] for the
//! population engine. Each robot is a user with a Poisson request stream (0.4/s), at most
//! 4 open connections carrying `zipf(64)` requests each, its own source address (two
//! robots per address, in 127.0.0.0/8), asking for objects of `coldwire origin`'s URL form
//! (`http://ORIGIN/obj/<id>`, the origin chosen by id) — new ones, or repeats chosen by the
//! popularity model ([`model`]) — with PolyMix-4's kinds of request, through the phases of
//! its [`scenario`] (ramp, fill, top, decline: robots, recurrence and rate over time).
//!
//! A request for object `id` expects the response to carry that object: the engine checks
//! the `X-Coldwire-Object` field and every body byte (`crate::population::inspect`).

pub mod model;
pub mod scenario;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use coldwire_workload::ContentMix;

use crate::config::LoadConfig;
use crate::population::run::PopulationPlan;
use crate::population::{Population, UserRequest};
use crate::run::ServerWatch;
use crate::schedule::Random;

use model::{KIND_NAMES, RequestKind, WorkingSet, polygraph_zipf};
use scenario::Scenario;

/// The workload's name.
pub const NAME: &str = "polymix";

/// PolyMix robots (see the module documentation).
pub struct PolyMix {
    scenario: Scenario,
    endpoints: Vec<SocketAddr>,
    origins: Vec<String>,
    via_proxy: bool,
    mix: ContentMix,
    working_set: WorkingSet,
    phase: usize,
    phase_start: Instant,
    /// Requests offered as hits / all, over the run (for tests and the summary).
    pub offered: (u64, u64),
}

fn lerp(pair: [f64; 2], progress: f64) -> f64 {
    pair[0] + (pair[1] - pair[0]) * progress.clamp(0.0, 1.0)
}

impl PolyMix {
    /// Robots of `scenario` asking for objects of the origin servers `origins` (their
    /// `HOST:PORT` as the URLs name them), sent to `proxy` (absolute-form requests) or, with
    /// no proxy, straight to the origins.
    pub fn new(scenario: Scenario, origins: &[SocketAddr], proxy: Option<SocketAddr>) -> PolyMix {
        let endpoints = match proxy {
            Some(proxy) => vec![proxy],
            None => origins.to_vec(),
        };
        PolyMix {
            mix: ContentMix::polymix4(scenario.origin.seed),
            working_set: WorkingSet::new(scenario.popularity.clone()),
            origins: origins.iter().map(ToString::to_string).collect(),
            via_proxy: proxy.is_some(),
            endpoints,
            scenario,
            phase: 0,
            phase_start: Instant::now(),
            offered: (0, 0),
        }
    }

    /// The run's plan: the scenario's phases, the kinds' names, and what the report
    /// records of the parameters.
    pub fn plan(&self, watch: ServerWatch, seed: u64, timeout: Duration) -> PopulationPlan {
        let mut parameters = LoadConfig::new(Vec::new());
        parameters.workload = NAME;
        parameters.proxy = self.via_proxy.then(|| self.endpoints[0]);
        parameters.seed = seed;
        parameters.timeout = timeout;
        parameters.connections = self.scenario.robots.count * self.scenario.robots.open_connections;
        parameters.requests_per_connection = self.scenario.robots.requests_per_connection;
        PopulationPlan {
            name: NAME.into(),
            phases: self
                .scenario
                .phases
                .iter()
                .map(|phase| (phase.name.clone(), phase.duration))
                .collect(),
            kind_names: KIND_NAMES.to_vec(),
            watch,
            parameters,
            scenario: serde_json::to_value(&self.scenario).ok(),
        }
    }

    fn progress_at(&self, at: Instant) -> f64 {
        let phase = &self.scenario.phases[self.phase.min(self.scenario.phases.len() - 1)];
        at.saturating_duration_since(self.phase_start).as_secs_f64()
            / phase.duration.as_secs_f64().max(1e-9)
    }

    fn current_phase(&self) -> &scenario::Phase {
        &self.scenario.phases[self.phase.min(self.scenario.phases.len() - 1)]
    }

    /// The request bytes for object `id` of kind `kind`.
    fn request_bytes(
        &self,
        id: u64,
        kind: RequestKind,
        close: bool,
        now: SystemTime,
        random: &mut Random,
    ) -> Vec<u8> {
        let origin = &self.origins[(id % self.origins.len() as u64) as usize];
        let method = match kind {
            RequestKind::Post => "POST",
            RequestKind::Head => "HEAD",
            _ => "GET",
        };
        let mut out = Vec::with_capacity(160);
        let _ = if self.via_proxy {
            write!(out, "{method} http://{origin}/obj/{id} HTTP/1.1\r\n")
        } else {
            write!(out, "{method} /obj/{id} HTTP/1.1\r\n")
        };
        let _ = write!(out, "Host: {origin}\r\nUser-Agent: coldwire-robot\r\n");
        match kind {
            RequestKind::Ims200 | RequestKind::Ims304 => {
                let object = self.mix.object(id, now);
                let since = if kind == RequestKind::Ims304 {
                    object.last_modified
                } else {
                    object.last_modified - Duration::from_secs(86_400)
                };
                out.extend_from_slice(b"If-Modified-Since: ");
                out.extend_from_slice(&coldwire_http::format_http_date(since));
                out.extend_from_slice(b"\r\n");
            }
            RequestKind::Reload => {
                out.extend_from_slice(b"Cache-Control: no-cache\r\nPragma: no-cache\r\n");
            }
            _ => {}
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        if kind == RequestKind::Post {
            // cntSimpleRequest: unif(0KB, 8KB).
            let length = (random.next_unit() * 8192.0) as usize;
            let _ = write!(out, "Content-Length: {length}\r\n\r\n");
            out.resize(out.len() + length, b'p');
        } else {
            out.extend_from_slice(b"\r\n");
        }
        out
    }
}

impl Population for PolyMix {
    fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    fn users(&self) -> usize {
        self.scenario.robots.count
    }

    fn phase_started(&mut self, phase: usize, at: Instant) {
        if phase > 0
            && self
                .scenario
                .phases
                .get(phase - 1)
                .is_some_and(|previous| previous.freeze_working_set)
        {
            self.working_set.freeze();
        }
        self.working_set.move_hot_set();
        self.phase = phase;
        self.phase_start = at;
    }

    fn active_users(&self, phase: usize, elapsed: Duration) -> usize {
        let Some(current) = self.scenario.phases.get(phase) else {
            return 0;
        };
        let progress = elapsed.as_secs_f64() / current.duration.as_secs_f64().max(1e-9);
        (self.scenario.robots.count as f64 * lerp(current.robots, progress)).round() as usize
    }

    fn next_arrival(
        &mut self,
        _user: usize,
        after: Instant,
        _first: bool,
        random: &mut Random,
    ) -> Option<Instant> {
        let factor = lerp(self.current_phase().rate, self.progress_at(after));
        let rate = self.scenario.robots.rate * factor;
        if rate <= 0.0 {
            return Some(after + Duration::from_secs(1));
        }
        let gap = -(1.0 - random.next_unit()).ln() / rate;
        Some(after + Duration::from_secs_f64(gap.min(3600.0)))
    }

    fn request(
        &mut self,
        _user: usize,
        intended: Instant,
        close: bool,
        random: &mut Random,
    ) -> UserRequest {
        let now = SystemTime::now();
        let factor = lerp(self.current_phase().recurrence, self.progress_at(intended));
        let recurrence = self.scenario.requests.recurrence * factor;
        let kind = RequestKind::draw(&self.scenario.requests, random);
        let repeat = if random.next_unit() < recurrence {
            self.working_set.choose(&self.mix, now, random)
        } else {
            None
        };
        let id = repeat.unwrap_or_else(|| self.working_set.new_id());
        let object = self.mix.object(id, now);
        let basic = kind == RequestKind::Basic;
        let offered_hit = basic && repeat.is_some() && object.cachable;
        if basic {
            self.offered.1 += 1;
            self.offered.0 += u64::from(offered_hit);
        }
        let bytes = self.request_bytes(id, kind, close, now, random);
        UserRequest {
            endpoint: if self.via_proxy {
                0
            } else {
                (id % self.endpoints.len() as u64) as usize
            },
            bytes: Bytes::from(bytes),
            head_request: kind == RequestKind::Head,
            expected_object: Some(id),
            basic,
            offered_hit,
            kind: kind.index(),
        }
    }

    fn source(&self, user: usize) -> Option<IpAddr> {
        let first = u32::from(self.scenario.robots.first_address);
        let index = (user / self.scenario.robots.per_address) as u32;
        Some(IpAddr::V4(Ipv4Addr::from(first.wrapping_add(index))))
    }

    fn connection_limits(&mut self, _user: usize, random: &mut Random) -> (usize, u64) {
        let limit = match self.scenario.robots.requests_per_connection {
            0 => 0,
            n => polygraph_zipf(n, random),
        };
        (self.scenario.robots.open_connections, limit)
    }

    fn request_kinds(&self) -> &[&'static str] {
        &KIND_NAMES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn robots(scenario: Scenario) -> PolyMix {
        let origins: Vec<SocketAddr> = vec!["127.0.0.1:8090".parse().unwrap()];
        PolyMix::new(scenario, &origins, Some("127.0.0.1:3128".parse().unwrap()))
    }

    #[test]
    fn recurrence_offers_the_polymix4_hit_ratio() {
        let mut scenario = Scenario::quick();
        scenario.phases.truncate(3);
        let mut polymix = robots(scenario);
        let mut random = Random::new(21);
        let start = Instant::now();
        polymix.phase_started(0, start);
        for _ in 0..2_000 {
            polymix.request(0, start, false, &mut random);
        }
        polymix.phase_started(1, start);
        for _ in 0..20_000 {
            polymix.request(0, start, false, &mut random);
        }
        // The fill phase offers few hits (recurrence 5%/55% of 68.75%: 6.25% repeats).
        let (hits, basic) = polymix.offered;
        assert!((hits as f64 / basic as f64) < 0.08, "{hits}/{basic}");
        polymix.phase_started(2, start);
        polymix.offered = (0, 0);
        for _ in 0..100_000 {
            polymix.request(0, start, false, &mut random);
        }
        let (hits, basic) = polymix.offered;
        let ratio = hits as f64 / basic as f64;
        // 55% within ±2 points over 78,000 basic requests (fixed seed).
        assert!((ratio - 0.55).abs() < 0.02, "{ratio}");
    }

    #[test]
    fn phases_scale_the_population_and_robots_get_their_own_addresses() {
        let polymix = robots(Scenario::quick());
        assert_eq!(polymix.active_users(0, Duration::ZERO), 10);
        assert_eq!(polymix.active_users(0, Duration::from_secs(5)), 200);
        assert_eq!(polymix.active_users(2, Duration::from_secs(3)), 200);
        assert_eq!(polymix.active_users(3, Duration::from_millis(2500)), 100);
        assert_eq!(polymix.active_users(4, Duration::ZERO), 0);
        let addresses: std::collections::HashSet<IpAddr> =
            (0..200).filter_map(|user| polymix.source(user)).collect();
        assert_eq!(addresses.len(), 100);
        assert_eq!(polymix.source(0), Some("127.1.0.1".parse().unwrap()));
        assert_eq!(polymix.source(3), Some("127.1.0.2".parse().unwrap()));
    }

    #[test]
    fn robots_arrive_at_their_rate_and_requests_are_well_formed() {
        let mut polymix = robots(Scenario::quick());
        let mut random = Random::new(2);
        let start = Instant::now();
        polymix.phase_started(2, start);
        let mut at = start;
        let n = 20_000;
        for _ in 0..n {
            at = polymix.next_arrival(0, at, false, &mut random).unwrap();
        }
        let rate = n as f64 / at.duration_since(start).as_secs_f64();
        assert!((rate - 0.4).abs() < 0.01, "{rate}");
        let mut kinds = [0; 6];
        for _ in 0..5_000 {
            let request = polymix.request(0, start, true, &mut random);
            kinds[request.kind] += 1;
            let text = String::from_utf8_lossy(&request.bytes).into_owned();
            let line = text.lines().next().unwrap();
            let id = request.expected_object.unwrap();
            assert!(line.ends_with(&format!("http://127.0.0.1:8090/obj/{id} HTTP/1.1")));
            assert!(text.contains("Connection: close\r\n"));
            assert_eq!(request.head_request, line.starts_with("HEAD "));
            if line.starts_with("POST ") {
                let length: usize = text
                    .lines()
                    .find_map(|line| line.strip_prefix("Content-Length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                let head_end = text.find("\r\n\r\n").unwrap() + 4;
                assert_eq!(request.bytes.len() - head_end, length);
            }
        }
        assert!(kinds.iter().all(|&count| count > 0), "{kinds:?}");
    }
}
