//! A whole run: open the cold connections, run the phases (or the `--saturate` steps),
//! and sample the server's cost at the edges of every measured window — from `/proc`
//! (process tree and machine) and from coldwire's stats endpoint — into [`RunReport`]s.

use std::time::Duration;

use coldwire_io::Driver;

use crate::config::{PhasePlan, Rate};
use crate::engine::{Engine, PhaseObserver, Progress};
use crate::error::BenchError;
use crate::proc_stats::{
    MachineSample, ProcessSample, TICKS_PER_SECOND, sample_machine, sample_process, tcp_segments,
};
use crate::report::{GeneratorCost, MachineCost, PhaseReport, RunReport, ServerCost};
use crate::saturate::{SaturateConfig, SaturationReport};
use crate::server_stats::{ServerCounters, delta, read_counters};

/// What to watch of the server under test.
#[derive(Clone, Debug, Default)]
pub struct ServerWatch {
    /// Process whose threads (and descendants' threads) are the server.
    pub pid: Option<u32>,
    /// coldwire's stats endpoint.
    pub stats_url: Option<String>,
}

/// A run: phases, or saturation steps.
#[derive(Clone, Debug)]
pub struct BenchPlan {
    /// Name in reports.
    pub name: String,
    /// Phases in order (ignored with `saturate`).
    pub phases: Vec<PhasePlan>,
    /// Step the rate instead: the configuration, and each step's warm-up and duration.
    pub saturate: Option<(SaturateConfig, Duration, Duration)>,
    /// The server to watch.
    pub watch: ServerWatch,
}

/// Samples taken at one edge of a window.
#[derive(Clone, Debug, Default)]
pub(crate) struct Edge {
    server: Option<ProcessSample>,
    machine: Option<MachineSample>,
    generator: Option<ProcessSample>,
    counters: Option<ServerCounters>,
    /// TCP segments (in, out) of the server's network namespace.
    segments: Option<(u64, u64)>,
}

struct CostObserver<'a> {
    inner: &'a mut dyn PhaseObserver,
    watch: &'a ServerWatch,
    start: Edge,
    end: Edge,
    warnings: Vec<String>,
}

impl CostObserver<'_> {
    fn sample(&mut self) -> Edge {
        sample_edge(self.watch, &mut self.warnings)
    }
}

/// Samples the server (`/proc`, its stats endpoint), the machine and the generator now;
/// what cannot be read becomes a warning.
pub(crate) fn sample_edge(watch: &ServerWatch, warnings: &mut Vec<String>) -> Edge {
    let server = watch.pid.and_then(|pid| match sample_process(pid, true) {
        Ok(sample) => Some(sample),
        Err(error) => {
            warnings.push(format!(
                "cannot read /proc/{pid}: {error} (did the server exit?)"
            ));
            None
        }
    });
    let counters = watch
        .stats_url
        .as_deref()
        .and_then(|url| match read_counters(url) {
            Ok(counters) => Some(counters),
            Err(error) => {
                warnings.push(error.to_string());
                None
            }
        });
    let segments = watch.pid.and_then(|pid| tcp_segments(pid).ok());
    Edge {
        server,
        segments,
        machine: sample_machine().ok(),
        generator: sample_process(std::process::id(), false).ok(),
        counters,
    }
}

impl PhaseObserver for CostObserver<'_> {
    fn window_started(&mut self) {
        self.start = self.sample();
        self.inner.window_started();
    }

    fn window_ended(&mut self) {
        self.end = self.sample();
        self.inner.window_ended();
    }

    fn progress(&mut self, progress: &Progress) {
        self.inner.progress(progress);
    }
}

fn per_request(seconds: f64, requests: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        seconds * 1e6 / requests as f64
    }
}

/// Fills the cost sections of `report` from the two edges.
pub(crate) fn fill_costs(report: &mut PhaseReport, start: &Edge, end: &Edge) {
    if let (Some(before), Some(after)) = (&start.counters, &end.counters) {
        report.server_counters = Some(delta(before, after));
    }
    let requests = report
        .server_counters
        .as_ref()
        .map(|counters| counters.requests)
        .filter(|&requests| requests > 0)
        .unwrap_or(report.completed_in_window);
    let window = match (&start.generator, &end.generator) {
        (Some(before), Some(after)) => after.at.duration_since(before.at).as_secs_f64(),
        _ => report.window_seconds,
    };
    let mut server_seconds = 0.0;
    if let (Some(before), Some(after)) = (&start.server, &end.server) {
        let seconds = after.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e9;
        server_seconds = seconds;
        let segments = match (start.segments, end.segments) {
            (Some((in_before, out_before)), Some((in_after, out_after))) => Some((
                in_after.saturating_sub(in_before),
                out_after.saturating_sub(out_before),
            )),
            _ => None,
        };
        report.server = Some(ServerCost {
            tcp_segments_in: segments.map(|(received, _)| received),
            tcp_segments_out: segments.map(|(_, sent)| sent),
            cpu_us_per_segment: segments
                .filter(|(received, sent)| received + sent > 0)
                .map(|(received, sent)| seconds * 1e6 / (received + sent) as f64),
            requests,
            cpu_seconds: seconds,
            cpu_us_per_request: per_request(seconds, requests),
            cpu_cores: if window > 0.0 { seconds / window } else { 0.0 },
            user_seconds: after.user_ticks.saturating_sub(before.user_ticks) as f64
                / TICKS_PER_SECOND,
            system_seconds: after.system_ticks.saturating_sub(before.system_ticks) as f64
                / TICKS_PER_SECOND,
            runqueue_wait_seconds: after
                .runqueue_wait_ns
                .saturating_sub(before.runqueue_wait_ns) as f64
                / 1e9,
            threads: after.threads,
            rss_bytes: (before.rss_bytes, after.rss_bytes),
            open_descriptors: (before.open_descriptors, after.open_descriptors),
        });
    }
    let mut generator_seconds = 0.0;
    if let (Some(before), Some(after)) = (&start.generator, &end.generator) {
        generator_seconds = after.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e9;
        report.generator = Some(GeneratorCost {
            cpu_seconds: generator_seconds,
            cpu_us_per_response: per_request(generator_seconds, report.completed_in_window),
            runqueue_wait_seconds: after
                .runqueue_wait_ns
                .saturating_sub(before.runqueue_wait_ns) as f64
                / 1e9,
        });
    }
    if let (Some(before), Some(after)) = (&start.machine, &end.machine) {
        let busy = after.busy().saturating_sub(before.busy()) as f64 / TICKS_PER_SECOND;
        let softirq = after.softirq.saturating_sub(before.softirq) as f64 / TICKS_PER_SECOND;
        let other = (busy - server_seconds - generator_seconds).max(0.0);
        report.machine = Some(MachineCost {
            busy_seconds: busy,
            busy_us_per_request: per_request(busy, requests),
            softirq_seconds: softirq,
            other_us_per_request: per_request(other, requests),
            busy_cores: if window > 0.0 { busy / window } else { 0.0 },
        });
    }
}

fn run_phase<D: Driver>(
    engine: &mut Engine<D>,
    phase: &PhasePlan,
    watch: &ServerWatch,
    observer: &mut dyn PhaseObserver,
    warnings: &mut Vec<String>,
) -> Result<PhaseReport, BenchError> {
    let mut cost = CostObserver {
        inner: observer,
        watch,
        start: Edge::default(),
        end: Edge::default(),
        warnings: Vec::new(),
    };
    let measurement = engine.run_phase(phase, &mut cost)?;
    let mut report = PhaseReport::from_measurement(&measurement);
    fill_costs(&mut report, &cost.start, &cost.end);
    warnings.append(&mut cost.warnings);
    Ok(report)
}

/// Runs `plan` on `engine`: cold connections first, then every phase. Connections are
/// closed at the end.
pub fn run_benchmark<D: Driver>(
    engine: &mut Engine<D>,
    plan: &BenchPlan,
    observer: &mut dyn PhaseObserver,
) -> Result<RunReport, BenchError> {
    let mut warnings = Vec::new();
    engine.open_cold(observer)?;
    let cold = engine.cold_totals();
    if cold.failed > 0 {
        warnings.push(format!(
            "{} of {} cold connections could not be established (descriptor limit? server's --max-connections?)",
            cold.failed, cold.requested
        ));
    }
    let mut phases = Vec::new();
    let mut saturation = None;
    if let Some((config, warmup, duration)) = &plan.saturate {
        for step in 0..config.max_steps {
            let rate = config.rate(step);
            let phase = PhasePlan {
                label: format!("step {} ({rate:.0}/s)", step + 1),
                rate: Rate::PerSecond(rate),
                warmup: *warmup,
                duration: *duration,
            };
            let report = run_phase(engine, &phase, &plan.watch, observer, &mut warnings)?;
            let saturated = config.saturated(&report).is_some();
            let interrupted = report.interrupted;
            phases.push(report);
            if saturated || interrupted {
                break;
            }
        }
        saturation = Some(SaturationReport::from_steps(config, &phases));
    } else {
        for phase in &plan.phases {
            let report = run_phase(engine, phase, &plan.watch, observer, &mut warnings)?;
            let interrupted = report.interrupted;
            phases.push(report);
            if interrupted {
                break;
            }
        }
    }
    let cold = engine.cold_totals();
    engine.close_all();
    Ok(RunReport {
        name: plan.name.clone(),
        parameters: engine.config().clone(),
        generator_backend: engine.driver().backend_name().to_owned(),
        cold,
        phases,
        saturation,
        warnings,
        scenario: None,
    })
}
