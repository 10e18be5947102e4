//! Not a check: runs `accept-herd` and `slot-alloc` at full size (or quick, with
//! `COLDWIRE_QUICK=1`) and writes `<COLDWIRE_RESULTS_DIR>/<name>/experiment.json`,
//! `summary.md` and `raw/`, until the `coldwire experiment` runner does this. Run with
//! `COLDWIRE_RESULTS_DIR=results/2026-11-22-vm cargo test --release -p coldwire-experiment
//! --test micro_full_run -- --ignored --test-threads 1`.

#[expect(
    dead_code,
    reason = "shared with the check tests; this run needs only the scenario and context helpers"
)]
mod micro_support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use coldwire_experiment::ExperimentRecord;
use coldwire_report::MachineRecord;
use micro_support::{context, scenario};

fn results_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("COLDWIRE_RESULTS_DIR")?;
    let dir = PathBuf::from(dir);
    // Relative to the repository root, where the command is run from.
    Some(if dir.is_absolute() {
        dir
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir)
    })
}

fn first_line_with(path: &str, prefix: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(prefix).map(str::to_owned))
        .unwrap_or_default()
}

fn machine() -> MachineRecord {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live rlimit the kernel fills.
    let result = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(result, 0, "getrlimit failed");
    let memory_kib: u64 = first_line_with("/proc/meminfo", "MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or(0);
    MachineRecord {
        label: "vm".to_owned(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        cpus: std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model: first_line_with("/proc/cpuinfo", "model name")
            .trim_start_matches([' ', '\t', ':'])
            .to_owned(),
        memory_bytes: memory_kib * 1024,
        open_files_limit: limit.rlim_max,
    }
}

/// The 1-minute load average, as /proc/loadavg prints it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("unknown")
        .to_owned()
}

fn summary(record: &ExperimentRecord) -> String {
    let mut text = format!("# {}\n\n{}\n\n", record.title, record.description);
    let _ = writeln!(text, "Command: `{}`\n", record.command.join(" "));
    let _ = writeln!(
        text,
        "Machine: {} ({} CPUs, kernel {}), shared with other engineers' builds while this ran, \
         so absolute times are noisy; the shapes (growth with N or K) and the ratios measured \
         side by side are what to read.\n",
        record.machine.cpu_model, record.machine.cpus, record.machine.kernel
    );
    for (heading, lines) in [
        ("Findings", &record.findings),
        ("Against the seed", &record.seed_comparison),
        ("Warnings", &record.warnings),
    ] {
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(text, "## {heading}\n");
        for line in lines {
            let _ = writeln!(text, "- {line}");
        }
        text.push('\n');
    }
    for table in &record.tables {
        let _ = writeln!(text, "## {}\n", table.title);
        let _ = writeln!(text, "| {} |", table.columns.join(" | "));
        let _ = writeln!(text, "|{}", "---|".repeat(table.columns.len()));
        for row in &table.rows {
            let _ = writeln!(text, "| {} |", row.join(" | "));
        }
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "Raw data: {}; the full record (figures as data): experiment.json.",
        record.raw_files.join(", ")
    );
    text
}

fn run_and_write(name: &str) {
    let Some(results) = results_dir() else {
        eprintln!("skipped: set COLDWIRE_RESULTS_DIR to the results directory to write");
        return;
    };
    let quick = std::env::var_os("COLDWIRE_QUICK").is_some();
    let dir = results.join(name);
    std::fs::create_dir_all(dir.join("raw")).expect("the results directory can be created");
    let mut run_context = context(&dir, scenario(name, quick), quick);
    run_context.machine = machine();
    run_context.command = format!(
        "COLDWIRE_RESULTS_DIR=results/2026-11-22-vm cargo test --release -p \
         coldwire-experiment --test micro_full_run -- --ignored --test-threads 1 {}",
        name.replace('-', "_")
    )
    .split(' ')
    .map(str::to_owned)
    .collect();
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64());
    let load_before = load_average();
    let clock = Instant::now();
    let experiment = coldwire_experiment::find(name).expect("registered");
    let mut record = (experiment.run)(&run_context).expect("the experiment runs");
    record.warnings.push(format!(
        "the machine was shared: 1-minute load average {load_before} before the run and {} \
         after, on {} CPUs",
        load_average(),
        record.machine.cpus
    ));
    record.started_unix_seconds = started;
    record.duration_seconds = clock.elapsed().as_secs_f64();
    let json = serde_json::to_string_pretty(&record).expect("the record serializes");
    std::fs::write(dir.join("experiment.json"), json).expect("experiment.json is written");
    std::fs::write(dir.join("summary.md"), summary(&record)).expect("summary.md is written");
    eprintln!(
        "{name}: wrote {} in {:.1} s",
        dir.display(),
        record.duration_seconds
    );
}

#[test]
#[ignore = "a full-size measurement run that writes results; see the module doc"]
fn accept_herd() {
    run_and_write("accept-herd");
}

#[test]
#[ignore = "a full-size measurement run that writes results; see the module doc"]
fn slot_alloc() {
    run_and_write("slot-alloc");
}
