//! The PolyMix scenario: every parameter of the robots, their requests, the popularity
//! model and the phases, with Web Polygraph's PolyMix-4 values as defaults
//! (`polymix-4-guts.pg`, `benches.pg`, Polygraph's PolyMix-4 documentation), a
//! `--quick` scale, and a TOML form (`--scenario FILE`; unknown keys are errors, a key
//! left out keeps its default). Durations are written `20min`, `4h`, `2.5s`.
//!
//! ```toml
//! [robots]
//! count = 2500           # robots at 100% population
//! rate = 0.4             # requests per second per robot (Poisson)
//! open_connections = 4   # most connections a robot holds open
//! requests_per_connection = 64   # zipf(64): requests a persistent connection carries
//! per_address = 2        # robots sharing one source address
//! first_address = "127.1.0.1"
//! [requests]
//! recurrence = 0.6875    # 55%/80%: share of requests repeating an earlier object
//! ims200 = 0.05
//! ims304 = 0.10
//! reload = 0.05
//! post = 0.015
//! head = 0.001
//! [popularity]
//! hot_set_fraction = 0.01
//! hot_set_probability = 0.10
//! bhr_discrimination = 0.9
//! [origin]
//! servers = 1            # origin servers the robots' URLs name (started by the bench)
//! think = "2.5s"
//! think_sd = "1s"
//! seed = 1
//! rtt = "80ms"           # the WAN relay between the proxy and the origins
//! loss = 0.0005
//! [[phase]]
//! name = "top1"
//! duration = "4h"
//! robots = [1.0, 1.0]    # population at the phase's start and end (share of count)
//! recurrence = 1.0       # factor on [requests] recurrence
//! freeze_working_set = false
//! ```

use std::net::Ipv4Addr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;

/// The robots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Robots {
    /// Robots at 100% population.
    pub count: usize,
    /// Requests per second of each robot (a Poisson stream).
    pub rate: f64,
    /// Most connections a robot holds open at once (`open_conn_lmt`).
    pub open_connections: usize,
    /// `N` of the `zipf(N)` draw of requests per persistent connection (`pconn_use_lmt`);
    /// 0: unlimited.
    pub requests_per_connection: u64,
    /// Robots sharing one source address (`agents_per_addr`).
    pub per_address: usize,
    /// The first source address; the next ones follow it.
    pub first_address: Ipv4Addr,
}

/// The requests' mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Requests {
    /// Share of requests that repeat an earlier object (`55%/80%`: the offered hit ratio
    /// divided by the cachable share).
    pub recurrence: f64,
    /// `If-Modified-Since` older than the object: answered `200`.
    pub ims200: f64,
    /// `If-Modified-Since` the object's `Last-Modified`: answered `304`.
    pub ims304: f64,
    /// `Cache-Control: no-cache` (and `Pragma: no-cache`).
    pub reload: f64,
    /// `POST` with a body of `unif(0, 8KB)`.
    pub post: f64,
    /// `HEAD`.
    pub head: f64,
}

/// Which objects repeated requests choose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Popularity {
    /// The hot set's size, a share of the working set.
    pub hot_set_fraction: f64,
    /// Share of repeats that go to the hot set.
    pub hot_set_probability: f64,
    /// Share of repeats of a cachable object that take the smallest cachable of its ±4
    /// neighbours instead (byte hit ratio below document hit ratio).
    pub bhr_discrimination: f64,
    /// A cap on the working set (objects); 0: none (it grows until frozen).
    pub working_set_cap: u64,
}

/// The origin side (used when the bench starts the servers itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OriginSide {
    /// Origin servers.
    pub servers: usize,
    /// Mean server think time.
    #[serde(with = "humantime_serde")]
    pub think: Duration,
    /// Its standard deviation.
    #[serde(with = "humantime_serde")]
    pub think_sd: Duration,
    /// Seed of the objects (robots and origins must agree).
    pub seed: u64,
    /// Round-trip time the WAN relay adds between proxy and origin (0: no relay).
    #[serde(with = "humantime_serde")]
    pub rtt: Duration,
    /// The relay's loss rate (0.0005 = 0.05%).
    pub loss: f64,
}

/// One phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Its name in reports.
    pub name: String,
    /// How long it lasts.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Active robots at its start and its end, shares of `robots.count` (linear between).
    pub robots: [f64; 2],
    /// Factor on `requests.recurrence` at its start and end (fill phases: 5%/55%).
    #[serde(default = "one_pair")]
    pub recurrence: [f64; 2],
    /// Factor on the robots' rate at its start and end (PolyMix-3 varies load this way).
    #[serde(default = "one_pair")]
    pub rate: [f64; 2],
    /// The working set stops growing when this phase ends (the fill phase).
    #[serde(default)]
    pub freeze_working_set: bool,
}

fn one_pair() -> [f64; 2] {
    [1.0, 1.0]
}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// The robots.
    pub robots: Robots,
    /// The request mix.
    pub requests: Requests,
    /// The popularity model.
    pub popularity: Popularity,
    /// The origin side.
    pub origin: OriginSide,
    /// The phases, in order.
    #[serde(rename = "phase")]
    pub phases: Vec<Phase>,
}

impl Default for Robots {
    fn default() -> Self {
        Robots {
            count: 2500,
            rate: 0.4,
            open_connections: 4,
            requests_per_connection: 64,
            per_address: 2,
            first_address: Ipv4Addr::new(127, 1, 0, 1),
        }
    }
}

impl Default for Requests {
    fn default() -> Self {
        Requests {
            recurrence: 0.55 / 0.80,
            ims200: 0.05,
            ims304: 0.10,
            reload: 0.05,
            post: 0.015,
            head: 0.001,
        }
    }
}

impl Default for Popularity {
    fn default() -> Self {
        Popularity {
            hot_set_fraction: 0.01,
            hot_set_probability: 0.10,
            bhr_discrimination: 0.90,
            working_set_cap: 0,
        }
    }
}

impl Default for OriginSide {
    fn default() -> Self {
        OriginSide {
            servers: 1,
            think: Duration::from_millis(2500),
            think_sd: Duration::from_secs(1),
            seed: 1,
            rtt: Duration::from_millis(80),
            loss: 0.0005,
        }
    }
}

fn phase(name: &str, duration: Duration, robots: [f64; 2], recurrence: [f64; 2]) -> Phase {
    Phase {
        name: name.to_owned(),
        duration,
        robots,
        recurrence,
        rate: one_pair(),
        freeze_working_set: false,
    }
}

/// PolyMix-4's phases with a plateau of `plateau` (4 h in the real thing; ramps are a
/// twelfth of it) and a fill phase of `fill` (in Polygraph: until twice the cache size
/// has been fetched — here a duration), the fill rate being half the peak.
pub fn polymix4_phases(plateau: Duration, fill: Duration) -> Vec<Phase> {
    let ramp = plateau / 12;
    let fill_recurrence = 0.05 / 0.55;
    let small = 0.0004;
    let mut fill_phase = phase("fill", fill, [0.5, 0.5], [fill_recurrence; 2]);
    fill_phase.freeze_working_set = true;
    vec![
        phase("framp", ramp, [small, 0.5], [fill_recurrence; 2]),
        fill_phase,
        phase("fexit", ramp, [0.5, small], [fill_recurrence, 1.0]),
        phase("inc1", ramp, [small, 1.0], [1.0; 2]),
        phase("top1", plateau, [1.0; 2], [1.0; 2]),
        phase("dec1", ramp, [1.0, 0.1], [1.0; 2]),
        phase("idle", ramp, [0.1; 2], [1.0; 2]),
        phase("inc2", ramp, [0.1, 1.0], [1.0; 2]),
        phase("top2", plateau, [1.0; 2], [1.0; 2]),
        phase("dec2", ramp, [1.0, 0.0], [1.0; 2]),
    ]
}

impl Default for Scenario {
    /// PolyMix-4 at 1,000 requests/s (2,500 robots): about 10.5 hours plus a 1-hour fill.
    fn default() -> Self {
        Scenario {
            robots: Robots::default(),
            requests: Requests::default(),
            popularity: Popularity::default(),
            origin: OriginSide::default(),
            phases: polymix4_phases(Duration::from_secs(4 * 3600), Duration::from_secs(3600)),
        }
    }
}

impl Scenario {
    /// The `--quick` scale: 200 robots (80 requests/s), PolyMix-4's parameters otherwise,
    /// and four short phases — ramp 5 s, fill 10 s, top 25 s, decline 5 s — 45 s in all.
    pub fn quick() -> Scenario {
        let fill_recurrence = 0.05 / 0.55;
        let mut fill = phase(
            "fill",
            Duration::from_secs(10),
            [1.0; 2],
            [fill_recurrence; 2],
        );
        fill.freeze_working_set = true;
        Scenario {
            robots: Robots {
                count: 200,
                ..Robots::default()
            },
            phases: vec![
                phase(
                    "ramp",
                    Duration::from_secs(5),
                    [0.05, 1.0],
                    [fill_recurrence; 2],
                ),
                fill,
                phase("top", Duration::from_secs(25), [1.0; 2], [1.0; 2]),
                phase("decline", Duration::from_secs(5), [1.0, 0.0], [1.0; 2]),
            ],
            ..Scenario::default()
        }
    }

    /// Reads a scenario from TOML; what it leaves out keeps the defaults of `base`'s
    /// sections (PolyMix-4's), and its phases, when it has any, replace the base's.
    pub fn from_toml(text: &str) -> Result<Scenario, BenchError> {
        let scenario: Scenario = toml::from_str(text)
            .map_err(|error| BenchError::Config(format!("the scenario file: {error}")))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), BenchError> {
        let fail = |message: String| Err(BenchError::Config(format!("scenario: {message}")));
        let share = |value: f64| (0.0..=1.0).contains(&value);
        if self.robots.count == 0 {
            return fail("robots.count must be at least 1".into());
        }
        if !(self.robots.rate.is_finite() && self.robots.rate > 0.0) {
            return fail("robots.rate must be a positive number of requests per second".into());
        }
        if self.robots.open_connections == 0 || self.robots.per_address == 0 {
            return fail(
                "robots.open_connections and robots.per_address must be at least 1".into(),
            );
        }
        let requests = &self.requests;
        let mix =
            requests.ims200 + requests.ims304 + requests.reload + requests.post + requests.head;
        if ![
            requests.recurrence,
            requests.ims200,
            requests.ims304,
            requests.reload,
        ]
        .into_iter()
        .chain([requests.post, requests.head])
        .all(share)
            || mix > 1.0
        {
            return fail(
                "[requests] shares must lie in 0..1 and the kinds add up to 1 at most".into(),
            );
        }
        let popularity = &self.popularity;
        if ![
            popularity.hot_set_fraction,
            popularity.hot_set_probability,
            popularity.bhr_discrimination,
        ]
        .into_iter()
        .all(share)
        {
            return fail("[popularity] shares must lie in 0..1".into());
        }
        if self.origin.servers == 0 || !share(self.origin.loss) {
            return fail("origin.servers must be at least 1 and origin.loss lie in 0..1".into());
        }
        if self.phases.is_empty() {
            return fail("at least one [[phase]] is needed".into());
        }
        for phase in &self.phases {
            if phase.duration.is_zero() {
                return fail(format!("phase `{}` has no duration", phase.name));
            }
            let in_range = |pair: [f64; 2], most: f64| {
                pair.iter()
                    .all(|value| value.is_finite() && (0.0..=most).contains(value))
            };
            if !in_range(phase.robots, 1.0)
                || !in_range(phase.recurrence, 1.0 / requests.recurrence.max(1e-9))
                || !in_range(phase.rate, 1e6)
            {
                return fail(format!(
                    "phase `{}`: robots lie in 0..1, rate factors are positive, and recurrence × factor lies in 0..1",
                    phase.name
                ));
            }
        }
        Ok(())
    }

    /// The whole run's length.
    pub fn duration(&self) -> Duration {
        self.phases.iter().map(|phase| phase.duration).sum()
    }

    /// The peak offered rate (robots × rate × the largest rate factor), requests/s.
    pub fn peak_rate(&self) -> f64 {
        let factor = self
            .phases
            .iter()
            .flat_map(|phase| {
                [
                    phase.robots[0] * phase.rate[0],
                    phase.robots[1] * phase.rate[1],
                ]
            })
            .fold(0.0, f64::max);
        self.robots.count as f64 * self.robots.rate * factor
    }
}

/// Durations as humantime strings (`20min`, `2.5s`) in TOML.
mod humantime_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(*duration).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(text.trim()).map_err(|error| {
            serde::de::Error::custom(format!(
                "{text:?} is not a duration ({error}); write e.g. 20min, 4h, 2.5s"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_polymix4() {
        let scenario = Scenario::default();
        assert!((scenario.requests.recurrence * 0.80 - 0.55).abs() < 1e-12);
        assert_eq!(scenario.robots.open_connections, 4);
        assert_eq!(scenario.phases.len(), 10);
        assert_eq!(scenario.phases[0].duration, Duration::from_secs(20 * 60));
        assert!((scenario.peak_rate() - 1000.0).abs() < 1e-9);
        scenario.validate().unwrap();
        let quick = Scenario::quick();
        quick.validate().unwrap();
        assert!(quick.duration() <= Duration::from_secs(45));
    }

    #[test]
    fn a_file_overrides_what_it_names_and_refuses_unknown_keys() {
        let scenario = Scenario::from_toml(
            "[robots]\ncount = 10\n[origin]\nthink = \"500ms\"\n\
             [[phase]]\nname = \"only\"\nduration = \"3s\"\nrobots = [1.0, 1.0]\n",
        )
        .unwrap();
        assert_eq!(scenario.robots.count, 10);
        assert_eq!(scenario.robots.rate, 0.4);
        assert_eq!(scenario.origin.think, Duration::from_millis(500));
        assert_eq!(scenario.phases.len(), 1);
        assert_eq!(scenario.phases[0].recurrence, [1.0, 1.0]);
        let unknown = Scenario::from_toml("[robots]\ncuont = 10\n").unwrap_err();
        assert!(unknown.to_string().contains("cuont"), "{unknown}");
        let bad = Scenario::from_toml("[requests]\nrecurrence = 1.5\n").unwrap_err();
        assert!(bad.to_string().contains("requests"), "{bad}");
        let duration = Scenario::from_toml(
            "[[phase]]\nname = \"x\"\nduration = \"soon\"\nrobots = [1.0, 1.0]\n",
        )
        .unwrap_err();
        assert!(
            duration.to_string().contains("not a duration"),
            "{duration}"
        );
    }
}
