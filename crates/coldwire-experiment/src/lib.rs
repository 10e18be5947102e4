//! coldwire-experiment: the experiments that reproduce the seeds' figures. Each experiment
//! reads its scenario file (`experiments/<name>.toml`), runs servers and `coldwire bench`
//! as child processes pinned to cores (or, for the micro-experiments, measures in process),
//! and returns an [`ExperimentRecord`]; `coldwire-report` writes and shows it.
//!
//! Shared pieces: [`scenario`] (TOML files with `[quick]` overrides), [`machine`],
//! [`process`] (pinned servers and `coldwire bench` runs), [`bench_result`] (its JSON),
//! [`serve`] (`coldwire serve` as the server under test), [`figures`], [`output`] and
//! [`runner`] (`coldwire experiment`).

pub mod bench_result;
pub mod context;
pub mod figures;
pub mod machine;
pub mod output;
pub mod process;
pub mod runner;
pub mod scenario;
pub mod serve;

mod accept_herd;
mod cold_scaling;
mod connections_latency;
mod live_day;
mod network_cost;
mod peers;
mod polymix;
mod rate_response;
mod robots;
mod slot_alloc;
mod slow_clients;
mod splice;

pub use coldwire_report::ExperimentRecord;
pub use context::RunContext;

/// Where `coldwire experiment` looks for scenario files by default.
pub const DEFAULT_SCENARIOS: &str = "experiments";

/// One experiment: its name (scenario file stem and results directory) and how to run it.
pub struct Experiment {
    /// `cold-scaling`, `rate-response`, …
    pub name: &'static str,
    /// One line for `--help` and listings.
    pub summary: &'static str,
    /// Runs it and returns what it measured.
    pub run: fn(&RunContext) -> anyhow::Result<ExperimentRecord>,
}

/// Every experiment, in the order `coldwire experiment all` runs them; `coldwire experiment
/// --help` lists them from here ([`names_help`]), so a new experiment is one entry here
/// (and its scenario file). Issue 14's four macro-experiments are polymix, robots,
/// live-day and network-cost.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "cold-scaling",
        summary: "every backend, 0 to ~15,000 cold connections: throughput, CPU, syscalls",
        run: cold_scaling::run,
    },
    Experiment {
        name: "rate-response",
        summary: "response time vs offered rate, naive vs 750 cold, 1259 B and 8 KiB",
        run: rate_response::run,
    },
    Experiment {
        name: "connections-latency",
        summary: "throughput and CPU vs active connections and vs emulated round-trip time",
        run: connections_latency::run,
    },
    Experiment {
        name: "splice",
        summary: "proxy misses 4 KiB to 1 MiB: copy vs splice vs splice+tee",
        run: splice::run,
    },
    Experiment {
        name: "accept-herd",
        summary: "wake-ups per accepted connection: blocking accept, shared epoll, EPOLLEXCLUSIVE, SO_REUSEPORT",
        run: accept_herd::run,
    },
    Experiment {
        name: "slot-alloc",
        summary: "lowest-free slot allocation: two-level bitmap vs linear scan vs the kernel's",
        run: slot_alloc::run,
    },
    Experiment {
        name: "peers",
        summary: "cold-scaling and rate-response against nginx; the proxy against Squid, Varnish, nginx, HAProxy",
        run: peers::run,
    },
    Experiment {
        name: "slow-clients",
        summary: "proxy CPU per request vs concurrent slow connections (origin think time), every backend",
        run: slow_clients::run,
    },
    Experiment {
        name: "polymix",
        summary: "PolyMix-4 robots through coldwire proxy (every backend, memory and disk store) and Squid, origins behind an 80 ms WAN: CPU, hit/miss response time, hit ratios vs rate up to saturation",
        run: polymix::run,
    },
    Experiment {
        name: "robots",
        summary: "100% hits at a fixed rate, 250 to 10,000 idle robot connections through WAN relays: proxy CPU, response time",
        run: robots::run,
    },
    Experiment {
        name: "live-day",
        summary: "a compressed day through the proxy: CPU vs request rate regressions and a perf profile",
        run: live_day::run,
    },
    Experiment {
        name: "network-cost",
        summary: "NASA- and WorldCup-like traces in a closed loop vs coldwire serve and nginx: throughput, CPU per request and per TCP segment vs connections and round-trip time",
        run: network_cost::run,
    },
];

/// The experiments' names and summaries, one a line, as `coldwire experiment --help`
/// shows them.
pub fn names_help() -> String {
    let width = EXPERIMENTS
        .iter()
        .map(|experiment| experiment.name.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("Experiments (`all` runs every one, in this order):\n");
    for experiment in EXPERIMENTS {
        text.push_str(&format!(
            "  {:width$}  {}\n",
            experiment.name, experiment.summary
        ));
    }
    text
}

/// The experiment called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS
        .iter()
        .find(|experiment| experiment.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_experiment_and_issue_14s_are_there() {
        let help = names_help();
        for experiment in EXPERIMENTS {
            assert!(help.contains(experiment.name), "{help}");
        }
        for name in ["polymix", "robots", "live-day", "slow-clients"] {
            assert!(find(name).is_some(), "{name} is registered");
        }
    }
}
