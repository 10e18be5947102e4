//! The `slot-alloc` experiment (seed 000 §4.2, seed 004 "two-level bitmap"): how the cost
//! of allocating the lowest free slot grows with the number K of slots in use, for a
//! linear scan, a single bitmap, coldwire-io's two-level bitmap and the kernel's own
//! descriptor allocation. With K slots in use it repeatedly frees a random one and
//! allocates the lowest (which is the one just freed), so every allocation searches past
//! about K/2 used slots; [`allocators`] holds the user-space allocators, [`kernel`] the
//! descriptor timing, [`summary`] the record.

mod allocators;
mod kernel;
mod summary;

use std::hint::black_box;

use anyhow::{Context, ensure};
use coldwire_io::LowestFreeBitmap;
use serde::{Deserialize, Serialize};

use crate::{ExperimentRecord, RunContext, scenario};
use allocators::{LinearScan, LowestFree, SingleBitmap, XorShift};

/// The experiment's name (scenario file stem, results directory).
const NAME: &str = "slot-alloc";
/// Largest K for the user-space allocators (the kernel is bounded by the open-files limit).
const MAX_OPEN: usize = 1_000_000;
/// Most release+allocate pairs per measurement.
const MAX_OPERATIONS: u64 = 100_000_000;
/// Most repetitions.
const MAX_REPETITIONS: usize = 100;

/// The scenario's keys (`experiments/slot-alloc.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    /// Slots (descriptors) in use, K: one point per allocator for each.
    open: Vec<usize>,
    /// Free-random-then-allocate-lowest pairs timed per allocator, K and repetition.
    operations: u64,
    /// Repetitions of every measurement (the median is plotted).
    repetitions: usize,
    /// Seed of the generator that picks which slot to free.
    seed: u64,
}

impl Parameters {
    fn from_scenario(scenario: &serde_json::Value) -> anyhow::Result<Self> {
        let mut parameters: Parameters = scenario::parameters(NAME, scenario)?;
        let open = &mut parameters.open;
        scenario::check_list(NAME, "open", open, MAX_OPEN, "[100, 1000, 10000]")?;
        let operations = parameters.operations;
        scenario::check_count(NAME, "operations", operations, MAX_OPERATIONS)?;
        let repetitions = parameters.repetitions;
        scenario::check_count(NAME, "repetitions", repetitions, MAX_REPETITIONS)?;
        Ok(parameters)
    }
}

/// The allocators compared, in legend order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Allocator {
    LinearScan,
    SingleBitmap,
    TwoLevelBitmap,
    Kernel,
}

impl Allocator {
    const ALL: [Allocator; 4] = [
        Allocator::LinearScan,
        Allocator::SingleBitmap,
        Allocator::TwoLevelBitmap,
        Allocator::Kernel,
    ];

    fn label(self) -> &'static str {
        match self {
            Allocator::LinearScan => "linear scan, one flag per slot (ufalloc)",
            Allocator::SingleBitmap => "single bitmap, word scan",
            Allocator::TwoLevelBitmap => "two-level bitmap (coldwire-io)",
            Allocator::Kernel => "kernel: close() + dup()",
        }
    }
}

/// One measurement: an allocator at K, every repetition's mean ns per pair.
#[derive(Clone, Debug, Serialize)]
struct Measurement {
    allocator: Allocator,
    open: usize,
    nanoseconds_per_operation: Vec<f64>,
}

impl Measurement {
    fn median(&self) -> f64 {
        let mut sorted = self.nanoseconds_per_operation.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    }
}

/// Mean CPU ns of one release-random + allocate-lowest pair with `open` slots in use.
fn time_user<A: LowestFree>(open: usize, operations: u64, seed: u64) -> anyhow::Result<f64> {
    let mut allocator = A::with_used(open);
    let mut random = XorShift::new(seed);
    let mut wrong = 0u64;
    let started = kernel::thread_cpu_nanoseconds();
    for _ in 0..operations {
        let victim = random.below(open);
        allocator.release(victim);
        let got = black_box(allocator.allocate());
        wrong += u64::from(got != victim);
    }
    let nanoseconds =
        kernel::thread_cpu_nanoseconds().saturating_sub(started) as f64 / operations as f64;
    ensure!(
        wrong == 0,
        "{NAME}: an allocator returned a slot other than the lowest free one {wrong} times"
    );
    Ok(nanoseconds)
}

fn measure(
    allocator: Allocator,
    open: usize,
    operations: u64,
    seed: u64,
) -> anyhow::Result<(f64, u64)> {
    let user = |ns: anyhow::Result<f64>| ns.map(|ns| (ns, 0));
    match allocator {
        Allocator::LinearScan => user(time_user::<LinearScan>(open, operations, seed)),
        Allocator::SingleBitmap => user(time_user::<SingleBitmap>(open, operations, seed)),
        Allocator::TwoLevelBitmap => user(time_user::<LowestFreeBitmap>(open, operations, seed)),
        Allocator::Kernel => kernel::time_close_dup(open, operations, seed),
    }
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters = Parameters::from_scenario(&context.scenario)?;
    let largest = *parameters.open.last().unwrap_or(&0) as u64;
    let open_files_limit = kernel::raise_open_files_limit(largest + kernel::HEADROOM)?;
    let mut measurements: Vec<Measurement> = Vec::new();
    let mut taken_elsewhere = 0u64;
    for &open in &parameters.open {
        let mut per_allocator: Vec<Measurement> = Allocator::ALL
            .iter()
            .map(|&allocator| Measurement {
                allocator,
                open,
                nanoseconds_per_operation: Vec::new(),
            })
            .collect();
        // Repetitions outermost, allocators interleaved, so slow phases of a noisy
        // machine hit every allocator alike.
        for repetition in 0..parameters.repetitions {
            let seed = parameters.seed.wrapping_add(repetition as u64);
            for measurement in &mut per_allocator {
                let (ns, elsewhere) =
                    measure(measurement.allocator, open, parameters.operations, seed)
                        .with_context(|| {
                            format!("{NAME}: {} at K={open}", measurement.allocator.label())
                        })?;
                measurement.nanoseconds_per_operation.push(ns);
                taken_elsewhere += elsewhere;
            }
        }
        measurements.extend(per_allocator);
    }
    let raw_dir = context.dir.join("raw");
    std::fs::create_dir_all(&raw_dir)
        .with_context(|| format!("cannot create {}", raw_dir.display()))?;
    let raw_file = "raw/measurements.json";
    let raw = serde_json::json!({
        "parameters": &parameters,
        "open_files_limit": open_files_limit,
        "measurements": &measurements,
    });
    let raw_path = context.dir.join(raw_file);
    std::fs::write(&raw_path, serde_json::to_vec_pretty(&raw)?)
        .with_context(|| format!("cannot write {}", raw_path.display()))?;
    let mut warnings = Vec::new();
    if taken_elsewhere > 0 {
        warnings.push(format!(
            "{taken_elsewhere} dup() calls returned a descriptor other than the one just \
             closed: another thread of the process opened or closed descriptors meanwhile"
        ));
    }
    Ok(summary::record(
        context,
        serde_json::to_value(&parameters)?,
        &measurements,
        vec![raw_file.to_owned()],
        warnings,
    ))
}
