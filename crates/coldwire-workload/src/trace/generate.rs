//! Synthetic traces with the shape of well-known ones, byte-identical from a seed, written
//! in Common Log Format (`coldwire trace generate`; the committed `traces/` came from it).
//!
//! The model, one [`Shape`] per trace family:
//! - **Objects**: `objects` URLs ranked by popularity; a request picks rank *k* with
//!   probability ∝ k^−`zipf`. Sizes are per object: a log-normal body (`size_median`,
//!   `size_sigma`) and, with probability `tail_share`, a Pareto tail (`tail_min`,
//!   `tail_alpha`, capped at `size_cap`); the `body_only_ranks` most popular objects are
//!   body-only (the top of real lists is icons and pages), which keeps a small trace's
//!   mean size steadier. [`Shape::expected_mean_size`] is the model's mean per request.
//! - **Sessions**: start times drawn from the rate profile (`profile`: relative rates of
//!   equal parts of `span_seconds`); each session belongs to one of `clients` clients
//!   (client *j* with probability ∝ j^−0.8: some clients are proxies, most are light),
//!   has a geometric number of requests (mean `session_mean`), and its requests are
//!   spaced by an embedded-object gap (uniform 0–2 s) with probability `burst_share`,
//!   otherwise by a user think time (exponential, mean `think_mean_seconds`).
//! - **Output**: sessions are generated until `requests` records exist, the records sorted
//!   by time (stable), truncated to `requests`, timestamps at whole seconds, every status
//!   `200` with its object's size, method `GET`.

use std::fmt::Write as _;

use super::time::format_clf_time;
use crate::draws::{Sequence, log_normal};

/// The parameters of a trace family.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Its name (`nasa`, `worldcup`).
    pub name: &'static str,
    /// Records in the default trace.
    pub requests: usize,
    /// First timestamp, seconds since the epoch.
    pub start: i64,
    /// The time zone the log shows, minutes east of UTC.
    pub zone_minutes: i64,
    /// How long sessions keep starting, seconds.
    pub span_seconds: f64,
    /// Relative session-start rate in equal parts of the span.
    pub profile: &'static [f64],
    /// The client population.
    pub clients: usize,
    /// How client names look.
    pub client_style: ClientStyle,
    /// Distinct objects.
    pub objects: usize,
    /// Popularity exponent.
    pub zipf: f64,
    /// How URLs look.
    pub url_style: UrlStyle,
    /// Median of the body size distribution, bytes.
    pub size_median: f64,
    /// Sigma of the body size distribution's logarithm.
    pub size_sigma: f64,
    /// Share of objects with a tail size.
    pub tail_share: f64,
    /// Smallest tail size, bytes.
    pub tail_min: f64,
    /// Pareto exponent of the tail.
    pub tail_alpha: f64,
    /// Largest size, bytes.
    pub size_cap: f64,
    /// The most popular objects, which never get a tail size.
    pub body_only_ranks: usize,
    /// Mean requests per session.
    pub session_mean: f64,
    /// Share of in-session gaps that are embedded-object gaps.
    pub burst_share: f64,
    /// Mean user think time, seconds.
    pub think_mean_seconds: f64,
}

/// How client names look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientStyle {
    /// Host names under reserved example domains, as the NASA logs show hosts.
    HostNames,
    /// Addresses in 10.0.0.0/8 from the client number, as WorldCup98's client ids.
    Addresses,
}

/// How URLs look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlStyle {
    /// `/images/…gif`, `/shuttle/missions/…html`, `/shuttle/movies/…mpg`.
    Nasa,
    /// `/english/images/…gif`, `/english/news/…html`, `/french/…`.
    WorldCup,
}

impl Shape {
    /// NASA-HTTP-like (KSC, July 1995): host names, a day's rise to its 14:00 peak, about
    /// 25 requests per host (3,461,612 requests / 137,978 hosts), a mean response near
    /// 19 KB with a heavy tail up to 6.8 MB.
    pub const NASA: Shape = Shape {
        name: "nasa",
        requests: 12_000,
        // 01/Jul/1995:08:00:00 -0400
        start: 804_600_000,
        zone_minutes: -240,
        span_seconds: 6.0 * 3600.0,
        profile: &[0.6, 0.8, 1.0, 1.2, 1.4, 1.0],
        clients: 800,
        client_style: ClientStyle::HostNames,
        objects: 3_000,
        zipf: 1.05,
        url_style: UrlStyle::Nasa,
        size_median: 5_000.0,
        size_sigma: 1.2,
        tail_share: 0.075,
        tail_min: 60_000.0,
        tail_alpha: 1.3,
        size_cap: 6_823_936.0,
        body_only_ranks: 10,
        session_mean: 10.0,
        burst_share: 0.6,
        think_mean_seconds: 30.0,
    };

    /// WorldCup98-like (a match day): numeric client addresses, a flash crowd during the
    /// match (the rate quadruples, then peaks at six times the base at the final whistle),
    /// small objects, steeper popularity and many light clients.
    pub const WORLDCUP: Shape = Shape {
        name: "worldcup",
        requests: 15_000,
        // 26/Jun/1998:19:30:00 +0000
        start: 898_889_400,
        zone_minutes: 0,
        span_seconds: 3600.0,
        profile: &[1.0, 1.0, 1.0, 1.0, 3.0, 4.0, 4.0, 3.0, 6.0, 3.0, 1.5, 1.0],
        clients: 2_500,
        client_style: ClientStyle::Addresses,
        objects: 1_500,
        zipf: 1.2,
        url_style: UrlStyle::WorldCup,
        size_median: 2_500.0,
        size_sigma: 1.0,
        tail_share: 0.01,
        tail_min: 40_000.0,
        tail_alpha: 1.5,
        size_cap: 2_000_000.0,
        body_only_ranks: 50,
        session_mean: 12.0,
        burst_share: 0.7,
        think_mean_seconds: 20.0,
    };

    /// Every shape, by name.
    pub const ALL: [&'static Shape; 2] = [&Shape::NASA, &Shape::WORLDCUP];

    /// The shape called `name`.
    pub fn named(name: &str) -> Option<&'static Shape> {
        Shape::ALL.into_iter().find(|shape| shape.name == name)
    }

    /// The model's mean size per request, bytes: the body's mean for the body-only ranks'
    /// share of requests, the body/tail mixture's for the rest (the tail's mean with its
    /// cap). A generated trace's mean scatters around it (the popular objects' draws
    /// weigh heavily in a small trace).
    pub fn expected_mean_size(&self) -> f64 {
        let weights: Vec<f64> = (1..=self.objects)
            .map(|rank| (rank as f64).powf(-self.zipf))
            .collect();
        let total: f64 = weights.iter().sum();
        let top = weights.iter().take(self.body_only_ranks).sum::<f64>() / total;
        let body = self.size_median * (self.size_sigma * self.size_sigma / 2.0).exp();
        let tail = self.tail_alpha / (self.tail_alpha - 1.0)
            * self.tail_min
            * (1.0 - (self.tail_min / self.size_cap).powf(self.tail_alpha - 1.0));
        body * top + (body * (1.0 - self.tail_share) + tail * self.tail_share) * (1.0 - top)
    }

    fn object_size(&self, rank: usize, random: &mut Sequence) -> u64 {
        let body = log_normal_median(self.size_median, self.size_sigma, random);
        let size = if rank > self.body_only_ranks && random.unit() < self.tail_share {
            self.tail_min * random.unit().powf(-1.0 / self.tail_alpha)
        } else {
            body
        };
        size.clamp(1.0, self.size_cap).round() as u64
    }

    fn url(&self, rank: usize, size: u64) -> String {
        match self.url_style {
            UrlStyle::Nasa => match size {
                0..5_000 => format!("/images/icon-{rank}.gif"),
                5_000..60_000 => format!("/shuttle/missions/sts-{rank}/mission.html"),
                _ => format!("/shuttle/movies/clip-{rank}.mpg"),
            },
            UrlStyle::WorldCup => {
                let language = if rank % 5 == 4 { "french" } else { "english" };
                match size {
                    0..4_000 => format!("/{language}/images/img_{rank}.gif"),
                    4_000..40_000 => format!("/{language}/news/n{rank}.html"),
                    _ => format!("/{language}/videos/v{rank}.mov"),
                }
            }
        }
    }

    fn client(&self, number: usize) -> String {
        match self.client_style {
            ClientStyle::HostNames => {
                let domain =
                    ["example.com", "example.net", "example.org", "example.edu"][number % 4];
                format!("host{number}.{domain}")
            }
            ClientStyle::Addresses => {
                let id = number as u32 + 1;
                format!(
                    "10.{}.{}.{}",
                    (id >> 16) & 0xff,
                    (id >> 8) & 0xff,
                    id & 0xff
                )
            }
        }
    }
}

fn log_normal_median(median: f64, sigma: f64, random: &mut Sequence) -> f64 {
    // logn with this median: mean = median·e^(σ²/2), sd from the same σ.
    let mean = median * (sigma * sigma / 2.0).exp();
    let sd = mean * ((sigma * sigma).exp() - 1.0).sqrt();
    log_normal(mean, sd, random.unit(), random.unit())
}

/// A discrete power law over ranks 1..=n: P(k) ∝ k^−exponent.
struct PowerLaw {
    cumulative: Vec<f64>,
}

impl PowerLaw {
    fn new(n: usize, exponent: f64) -> PowerLaw {
        let mut total = 0.0;
        let cumulative = (1..=n.max(1))
            .map(|rank| {
                total += (rank as f64).powf(-exponent);
                total
            })
            .collect();
        PowerLaw { cumulative }
    }

    /// A rank from 1.
    fn draw(&self, random: &mut Sequence) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let target = random.unit() * total;
        (self.cumulative.partition_point(|value| *value < target) + 1).min(self.cumulative.len())
    }
}

/// A session start, in seconds from the trace's start, drawn from the rate profile.
fn session_start(shape: &Shape, random: &mut Sequence) -> f64 {
    let total: f64 = shape.profile.iter().sum();
    let mut target = random.unit() * total;
    let part_length = shape.span_seconds / shape.profile.len() as f64;
    for (index, weight) in shape.profile.iter().enumerate() {
        if target < *weight {
            return (index as f64 + target / weight) * part_length;
        }
        target -= weight;
    }
    shape.span_seconds
}

/// A trace of `requests` records with `shape`, from `seed`, in Common Log Format.
pub fn generate(shape: &Shape, requests: usize, seed: u64) -> String {
    let mut random = Sequence::new(seed ^ 0x7ace);
    let popularity = PowerLaw::new(shape.objects, shape.zipf);
    let activity = PowerLaw::new(shape.clients, 0.8);
    let objects: Vec<(String, u64)> = (1..=shape.objects)
        .map(|rank| {
            let size = shape.object_size(rank, &mut random);
            (shape.url(rank, size), size)
        })
        .collect();
    // (time in seconds, sequence for stable order, client, object rank)
    let mut records: Vec<(i64, usize, usize, usize)> = Vec::with_capacity(requests + 64);
    while records.len() < requests {
        let client = activity.draw(&mut random) - 1;
        let mut time = session_start(shape, &mut random);
        loop {
            let rank = popularity.draw(&mut random);
            records.push((time.floor() as i64, records.len(), client, rank));
            // Geometric length: another request with probability 1 − 1/mean.
            if records.len() >= requests || random.unit() < 1.0 / shape.session_mean {
                break;
            }
            time += if random.unit() < shape.burst_share {
                2.0 * random.unit()
            } else {
                -shape.think_mean_seconds * random.unit().ln()
            };
        }
    }
    records.sort_unstable_by_key(|(time, order, _, _)| (*time, *order));
    records.truncate(requests);
    let mut out = String::with_capacity(requests * 96);
    let mut client_names: Vec<Option<String>> = vec![None; shape.clients];
    for (time, _, client, rank) in records {
        let name = client_names[client].get_or_insert_with(|| shape.client(client));
        let (url, size) = &objects[rank - 1];
        let _ = writeln!(
            out,
            "{name} - - [{}] \"GET {url} HTTP/1.0\" 200 {size}",
            format_clf_time(shape.start + time, shape.zone_minutes)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceStats, parse_trace};

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let one = generate(&Shape::NASA, 2_000, 7);
        assert_eq!(one, generate(&Shape::NASA, 2_000, 7));
        assert_ne!(one, generate(&Shape::NASA, 2_000, 8));
        assert_eq!(one.lines().count(), 2_000);
    }

    #[test]
    fn generated_traces_parse_completely() {
        for shape in Shape::ALL {
            let trace = parse_trace(&generate(shape, 3_000, 1), None);
            assert_eq!(trace.malformed, 0, "{}", shape.name);
            assert_eq!(trace.records.len(), 3_000);
            assert!(
                trace
                    .records
                    .iter()
                    .all(|r| r.status == 200 && r.replayable())
            );
        }
        assert_eq!(Shape::named("worldcup"), Some(&Shape::WORLDCUP));
        assert_eq!(Shape::named("nope"), None);
    }

    /// The documented targets (`traces/README.md`), checked on several seeds.
    #[test]
    fn statistics_match_the_documented_targets() {
        for shape in Shape::ALL {
            let mut mean_sizes = Vec::new();
            for seed in 1..=6 {
                let trace = parse_trace(&generate(shape, shape.requests, seed), None);
                let stats = TraceStats::of(&trace.records);
                let context = format!("{} seed {seed}:\n{stats}", shape.name);
                assert_eq!(stats.requests as usize, shape.requests, "{context}");
                assert!((stats.zipf_slope - shape.zipf).abs() < 0.1, "{context}");
                let span = stats.span_seconds / shape.span_seconds;
                assert!((0.98..1.15).contains(&span), "{context}");
                mean_sizes.push(stats.mean_size);
                let expected = shape.expected_mean_size();
                assert!(
                    stats.mean_size > expected / 1.6 && stats.mean_size < expected * 1.6,
                    "{context}"
                );
                let busiest_tenth = stats.rate_profile.iter().copied().fold(0.0, f64::max);
                match shape.name {
                    "nasa" => {
                        assert!((1_700..2_000).contains(&stats.urls), "{context}");
                        assert!((400..470).contains(&stats.clients), "{context}");
                        assert!((0.68..0.78).contains(&stats.top_tenth_share), "{context}");
                        // The day rises: the second half is busier than the first.
                        let first: f64 = stats.rate_profile[..5].iter().sum();
                        let second: f64 = stats.rate_profile[5..].iter().sum();
                        assert!(second > first * 1.2, "{context}");
                    }
                    _ => {
                        assert!((1_000..1_150).contains(&stats.urls), "{context}");
                        assert!((600..730).contains(&stats.clients), "{context}");
                        assert!((0.78..0.87).contains(&stats.top_tenth_share), "{context}");
                        // The flash crowd: the busiest tenth well above the mean.
                        assert!(busiest_tenth > 1.7 * stats.mean_rate, "{context}");
                        assert!(stats.peak_minute_rate > 2.0 * stats.mean_rate, "{context}");
                    }
                }
            }
            let average = mean_sizes.iter().sum::<f64>() / mean_sizes.len() as f64;
            let expected = shape.expected_mean_size();
            assert!(
                (average - expected).abs() / expected < 0.2,
                "{}: mean size over seeds {average:.0} vs the model's {expected:.0}",
                shape.name
            );
        }
    }
}
