//! A whole population run: the phases on the [`PopulationEngine`], the server's cost
//! sampled at every phase edge as the other modes do (`crate::run`), and the result as a
//! [`RunReport`] whose phases carry their `population` section.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, WithDriver};

use crate::config::{LoadConfig, PhaseEnd, PhasePlan, Rate};
use crate::engine::{ColdTotals, PhaseMeasurement, PhaseObserver, Progress};
use crate::error::BenchError;
use crate::report::{PhaseReport, RunReport};
use crate::run::{Edge, ServerWatch, fill_costs, sample_edge};

use super::Population;
use super::engine::{AsEdges, PhaseEdges, PhaseRecordings, PopulationConfig, PopulationEngine};

struct CostEdges<'a> {
    inner: &'a mut dyn PhaseEdges,
    watch: &'a ServerWatch,
    edges: Vec<(Edge, Edge)>,
    warnings: Vec<String>,
}

impl PhaseEdges for CostEdges<'_> {
    fn phase_started(&mut self, index: usize) {
        let edge = sample_edge(self.watch, &mut self.warnings);
        if self.edges.len() <= index {
            self.edges.resize_with(index + 1, Default::default);
        }
        self.edges[index].0 = edge;
        self.inner.phase_started(index);
    }

    fn phase_ended(&mut self, index: usize) {
        let edge = sample_edge(self.watch, &mut self.warnings);
        if self.edges.len() <= index {
            self.edges.resize_with(index + 1, Default::default);
        }
        self.edges[index].1 = edge;
        self.inner.phase_ended(index);
    }

    fn progress(&mut self, progress: &Progress) {
        self.inner.progress(progress);
    }
}

/// A phase's report from its recordings (cost sections left to the caller).
pub fn phase_report(recordings: PhaseRecordings, kind_names: &[&'static str]) -> PhaseReport {
    let seconds = recordings.window.as_secs_f64();
    let offered = recordings.recorder.offered;
    let rate = if seconds > 0.0 && offered > 0 {
        offered as f64 / seconds
    } else {
        0.0
    };
    let population = recordings.population.report(kind_names, seconds);
    let measurement = PhaseMeasurement {
        plan: PhasePlan {
            label: recordings.label,
            rate: Rate::PerSecond(rate.max(f64::MIN_POSITIVE)),
            warmup: Duration::ZERO,
            duration: recordings.window,
        },
        recorder: recordings.recorder,
        window: recordings.window,
        cold_held: (0, 0),
        hot_open_at_end: 0,
        interrupted: recordings.interrupted,
        abandoned: recordings.abandoned,
        requests_planned: None,
        ended_by: if recordings.interrupted {
            PhaseEnd::Interrupted
        } else {
            PhaseEnd::Duration
        },
    };
    let mut report = PhaseReport::from_measurement(&measurement);
    report.offered_rate = Some(rate);
    report.population = Some(population);
    report
}

/// What a population run is: its name, phases and what the report records.
#[derive(Clone, Debug)]
pub struct PopulationPlan {
    /// Name in reports.
    pub name: String,
    /// The phases, `(label, duration)`, in order.
    pub phases: Vec<(String, Duration)>,
    /// Names of the workload's kinds of request.
    pub kind_names: Vec<&'static str>,
    /// The server to watch.
    pub watch: ServerWatch,
    /// The load's parameters, as recorded.
    pub parameters: LoadConfig,
    /// The workload's scenario, as recorded.
    pub scenario: Option<serde_json::Value>,
}

/// Runs `plan` on `engine`, sampling the server at every phase edge.
pub fn run_population<D: Driver>(
    engine: &mut PopulationEngine<D>,
    plan: &PopulationPlan,
    observer: &mut dyn PhaseEdges,
) -> Result<RunReport, BenchError> {
    let watch = &plan.watch;
    let kind_names = &plan.kind_names;
    let mut edges = CostEdges {
        inner: observer,
        watch,
        edges: Vec::new(),
        warnings: Vec::new(),
    };
    let recordings = engine.run(&plan.phases, &mut edges)?;
    let mut reports = Vec::new();
    for (index, recording) in recordings.into_iter().enumerate() {
        let mut report = phase_report(recording, kind_names);
        if let Some((start, end)) = edges.edges.get(index) {
            fill_costs(&mut report, start, end);
        }
        reports.push(report);
    }
    Ok(RunReport {
        name: plan.name.clone(),
        parameters: plan.parameters.clone(),
        generator_backend: engine.driver().backend_name().to_owned(),
        cold: ColdTotals::default(),
        phases: reports,
        saturation: None,
        warnings: edges.warnings,
        scenario: plan.scenario.clone(),
    })
}

/// Runs `population` through `plan` on a new driver of `backend` built with
/// `driver_config`: what `coldwire bench --workload polymix` and `--replay` share.
/// `observer` sees every phase edge and the progress (a progress bar).
pub fn run_population_on(
    backend: Backend,
    driver_config: &DriverConfig,
    population: Box<dyn Population>,
    config: PopulationConfig,
    plan: &PopulationPlan,
    stop: &Arc<AtomicBool>,
    observer: &mut dyn PhaseObserver,
) -> Result<RunReport, BenchError> {
    let job = PopulationOn {
        population,
        config,
        plan,
        stop,
        observer,
    };
    backend.dispatch(driver_config, UringOptions::default(), job)?
}

/// A population run waiting for the driver its backend builds.
struct PopulationOn<'a> {
    population: Box<dyn Population>,
    config: PopulationConfig,
    plan: &'a PopulationPlan,
    stop: &'a Arc<AtomicBool>,
    observer: &'a mut dyn PhaseObserver,
}

impl WithDriver for PopulationOn<'_> {
    type Output = Result<RunReport, BenchError>;

    fn run<D: Driver + Send + 'static>(self, driver: D) -> Self::Output {
        let mut engine =
            PopulationEngine::new(driver, self.population, self.config, self.stop.clone())?;
        run_population(&mut engine, self.plan, &mut AsEdges(self.observer))
    }
}
