//! The built-in scenario of `coldwire bench` with no arguments: a small document root
//! (a 1,259-byte page — the size of the 1998 benchmarks' file — and an 8 KiB file), and two
//! runs against the same server at the same rates: **naive** (constant arrivals, hot
//! keep-alive connections only — how servers are usually benchmarked) and **realistic**
//! (Poisson arrivals plus 2,000 cold connections held open, as wide-area clients leave
//! them). The CLI starts the server, runs both, prints them side by side and ends with
//! [`conclusion`]: one paragraph in plain words.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{ColdMode, LoadConfig, PhasePlan, Rate};
use crate::report::{BenchReport, PhaseReport};
use crate::schedule::Arrivals;
use crate::target::Target;

/// Offered rates of both runs, requests per second.
pub const RATES: [f64; 3] = [5_000.0, 20_000.0, 50_000.0];
/// Cold connections of the realistic run.
pub const COLD_CONNECTIONS: usize = 2_000;
/// Warm-up per rate.
pub const WARMUP: Duration = Duration::from_secs(1);
/// Measured window per rate.
pub const DURATION: Duration = Duration::from_secs(3);
/// The files: name and size.
pub const FILES: [(&str, usize); 2] = [("small.html", 1259), ("8k.bin", 8192)];

/// A temporary document root, removed on drop.
pub struct DocumentRoot {
    path: PathBuf,
}

impl DocumentRoot {
    /// Writes the scenario's files into a new directory under the system's temporary
    /// directory.
    pub fn create() -> std::io::Result<DocumentRoot> {
        let path = std::env::temp_dir().join(format!("coldwire-bench-root-{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        let root = DocumentRoot { path };
        for (name, size) in FILES {
            let contents: Vec<u8> = (0..size).map(|index| b"coldwire "[index % 9]).collect();
            std::fs::write(root.path.join(name), contents)?;
        }
        Ok(root)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DocumentRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Arguments for `coldwire serve` in this scenario: one worker (pinned to CPU 0 when
/// `pin`), port 0, a stats endpoint, timeouts long enough to hold the cold connections.
pub fn serve_arguments(root: &Path, pin: bool) -> Vec<String> {
    let mut arguments: Vec<String> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--idle-timeout",
        "600",
    ]
    .iter()
    .map(|argument| (*argument).to_owned())
    .collect();
    arguments.push("--root".into());
    arguments.push(root.display().to_string());
    if pin {
        arguments.push("--pin".into());
    }
    arguments
}

fn targets(server: SocketAddr) -> Vec<Target> {
    FILES
        .iter()
        .filter_map(|(name, _)| Target::parse(&format!("http://{server}/{name}")).ok())
        .collect()
}

/// The naive run's load: constant arrivals, 50 hot keep-alive connections, nothing else.
pub fn naive_load(server: SocketAddr) -> LoadConfig {
    LoadConfig::new(targets(server))
}

/// The realistic run's load: Poisson arrivals and 2,000 idle cold connections.
pub fn realistic_load(server: SocketAddr) -> LoadConfig {
    let mut load = LoadConfig::new(targets(server));
    load.arrivals = Arrivals::Poisson;
    load.cold = COLD_CONNECTIONS;
    load.cold_mode = ColdMode::Idle;
    load.cold_connect_rate = 5_000.0;
    load
}

/// One phase per rate.
pub fn phases() -> Vec<PhasePlan> {
    RATES
        .iter()
        .map(|&rate| PhasePlan {
            label: format!("{}k/s", rate / 1000.0),
            rate: Rate::PerSecond(rate),
            warmup: WARMUP,
            duration: DURATION,
        })
        .collect()
}

/// A run kept up with a phase when it achieved this fraction of the offered rate.
const KEPT_UP: f64 = 0.95;

fn kept_up(phase: &PhaseReport) -> bool {
    phase
        .offered_rate
        .is_some_and(|offered| phase.achieved_rate >= KEPT_UP * offered)
}

fn p99_ms(phase: &PhaseReport) -> Option<f64> {
    (phase.latency.corrected.count > 0).then_some(phase.latency.corrected.p99_us / 1000.0)
}

fn ratio_words(ratio: f64) -> String {
    if (0.95..=1.05).contains(&ratio) {
        format!("about the same, {ratio:.2}×")
    } else if ratio >= 1.0 {
        format!("{ratio:.1}× higher")
    } else {
        format!("{:.1}× lower", 1.0 / ratio)
    }
}

/// `12345.6` as `12,346`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The generator waited for a CPU more than 5 % of the window (other work on its core).
fn starved(phase: &PhaseReport) -> bool {
    phase
        .generator
        .as_ref()
        .is_some_and(|cost| cost.runqueue_wait_seconds > 0.05 * phase.window_seconds)
}

/// One paragraph in plain words comparing the naive and the realistic run: at the highest
/// rate both kept up with (else the lowest), the corrected p99 and the server's CPU per
/// request side by side, their ratios, and what that means. `None` without the two runs
/// or without a successful response to compare.
pub fn conclusion(report: &BenchReport) -> Option<String> {
    let naive = report.runs.iter().find(|run| run.name == "naive")?;
    let realistic = report.runs.iter().find(|run| run.name == "realistic")?;
    let pairs: Vec<(&PhaseReport, &PhaseReport)> =
        naive.phases.iter().zip(&realistic.phases).collect();
    let (naive_phase, realistic_phase) = pairs
        .iter()
        .rev()
        .find(|(naive, realistic)| kept_up(naive) && kept_up(realistic))
        .or_else(|| pairs.first())
        .copied()?;
    let offered = naive_phase.offered_rate?;
    let naive_p99 = p99_ms(naive_phase)?;
    let realistic_p99 = p99_ms(realistic_phase)?;
    let latency_ratio = realistic_p99 / naive_p99.max(1e-6);
    let mut text = format!(
        "Conclusion: at {} requests/s, the same coldwire serve answered the realistic \
         load (Poisson arrivals and {} idle connections held open) with a p99 \
         latency of {realistic_p99:.2} ms, against {naive_p99:.2} ms for the naive load \
         (constant arrivals, keep-alive connections only): {}.",
        thousands(offered),
        thousands(COLD_CONNECTIONS as f64),
        ratio_words(latency_ratio)
    );
    let cpu = naive_phase
        .server
        .as_ref()
        .zip(realistic_phase.server.as_ref())
        .map(|(naive, realistic)| (naive.cpu_us_per_request, realistic.cpu_us_per_request));
    if let Some((naive_cpu, realistic_cpu)) = cpu
        && naive_cpu > 0.0
    {
        text += &format!(
            " Its CPU per request was {realistic_cpu:.1} µs against {naive_cpu:.1} µs ({}).",
            ratio_words(realistic_cpu / naive_cpu)
        );
    }
    if let Some((naive_last, realistic_last)) = pairs.last()
        && !kept_up(realistic_last)
        && kept_up(naive_last)
    {
        text += &format!(
            " At {}/s offered the realistic run achieved only {}/s while the naive run kept up.",
            thousands(realistic_last.offered_rate.unwrap_or_default()),
            thousands(realistic_last.achieved_rate)
        );
    }
    if starved(naive_phase) || starved(realistic_phase) {
        text += " The generator was short of CPU during these runs (see the notes): the \
                 figures measure this machine's other work as much as the server; repeat \
                 the run on a quieter machine before drawing a lesson.";
        return Some(text);
    }
    text += if latency_ratio >= 1.2 {
        " A benchmark with hot connections only would have promised a faster tail than \
         clients far away, with bursty arrivals and idle connections, will see: measure \
         with --arrivals poisson and --cold N."
    } else if latency_ratio <= 1.0 / 1.2 {
        " The realistic run was faster in the tail here, which points at noise on this \
         machine (other work, CPU frequency): repeat it, or pin with --cpu, before \
         drawing a lesson."
    } else {
        " Held connections and bursty arrivals cost this server little: its event loop \
         does not pay for idle connections, which is what an event-driven server is for."
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    /// The intro line of the CLI names the rates and cold connections in words.
    #[test]
    fn the_constants_are_the_ones_the_intro_names() {
        assert_eq!(super::RATES, [5_000.0, 20_000.0, 50_000.0]);
        assert_eq!(super::COLD_CONNECTIONS, 2_000);
    }

    use super::*;

    use crate::engine::{ColdTotals, PhaseMeasurement};
    use crate::recorder::Recorder;
    use crate::report::{MachineInfo, RunReport, ServerCost, ServerInfo};

    /// A phase at `offered`/s that achieved `achieved`/s with every latency at `p99_ms`
    /// and `cpu_us` of server CPU per request.
    fn phase(offered: f64, achieved: u64, p99_ms: f64, cpu_us: f64) -> PhaseReport {
        let mut recorder = Recorder::new();
        for _ in 0..achieved {
            let nanoseconds = (p99_ms * 1e6) as u64;
            recorder.response(200, nanoseconds, nanoseconds);
        }
        recorder.succeeded_in_window = achieved;
        let mut report = PhaseReport::from_measurement(&PhaseMeasurement {
            plan: PhasePlan {
                label: format!("{offered}"),
                rate: Rate::PerSecond(offered),
                warmup: Duration::ZERO,
                duration: Duration::from_secs(1),
            },
            recorder,
            window: Duration::from_secs(1),
            cold_held: (0, 0),
            hot_open_at_end: 0,
            interrupted: false,
            abandoned: 0,
            requests_planned: None,
            ended_by: crate::config::PhaseEnd::Duration,
        });
        report.server = Some(ServerCost {
            cpu_us_per_request: cpu_us,
            ..ServerCost::default()
        });
        report
    }

    fn report(naive: Vec<PhaseReport>, realistic: Vec<PhaseReport>) -> BenchReport {
        let run = |name: &str, phases| RunReport {
            name: name.into(),
            parameters: naive_load("127.0.0.1:1".parse().unwrap()),
            generator_backend: "epoll".into(),
            cold: ColdTotals::default(),
            phases,
            saturation: None,
            warnings: Vec::new(),
            scenario: None,
        };
        BenchReport {
            schema_version: 1,
            tool: "coldwire-bench",
            tool_version: "0",
            started_unix_seconds: 0.0,
            command_line: Vec::new(),
            machine: MachineInfo::default(),
            server: ServerInfo::default(),
            runs: vec![run("naive", naive), run("realistic", realistic)],
            interrupted: false,
        }
    }

    #[test]
    fn the_conclusion_compares_the_highest_rate_both_kept_up_with() {
        let text = conclusion(&report(
            vec![
                phase(100.0, 100, 1.0, 10.0),
                phase(200.0, 200, 2.0, 10.0),
                phase(400.0, 400, 2.0, 10.0),
            ],
            vec![
                phase(100.0, 100, 1.0, 10.0),
                phase(200.0, 200, 6.0, 15.0),
                phase(400.0, 250, 90.0, 20.0),
            ],
        ))
        .unwrap();
        assert!(text.starts_with("Conclusion: at 200 requests/s"), "{text}");
        assert!(text.contains("2,000 idle connections"), "{text}");
        assert!(text.contains("6.00 ms, against 2.00 ms"), "{text}");
        assert!(text.contains("3.0× higher"), "{text}");
        assert!(
            text.contains("15.0 µs against 10.0 µs (1.5× higher)"),
            "{text}"
        );
        assert!(
            text.contains("At 400/s offered the realistic run achieved only 250/s"),
            "{text}"
        );
        assert!(text.contains("would have promised a faster tail"), "{text}");
    }

    #[test]
    fn no_conclusion_without_a_successful_response() {
        let text = conclusion(&report(
            vec![phase(100.0, 0, 1.0, 0.0)],
            vec![phase(100.0, 0, 1.0, 0.0)],
        ));
        assert_eq!(text, None);
        let similar = conclusion(&report(
            vec![phase(100.0, 100, 1.0, 10.0)],
            vec![phase(100.0, 100, 1.03, 10.0)],
        ))
        .unwrap();
        assert!(similar.contains("cost this server little"), "{similar}");
        assert!(similar.contains("about the same, 1.03×"), "{similar}");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }

    #[test]
    fn the_quick_start_tables_fit_in_eighty_columns_and_leave_out_what_was_not_measured() {
        let phases = || {
            vec![
                phase(5_000.0, 5_000, 0.25, 9.5),
                phase(20_000.0, 20_000, 1.5, 10.25),
                phase(50_000.0, 41_234, 123.0, 12.0),
            ]
        };
        let mut report = report(phases(), phases());
        report.runs[1].cold.requested = COLD_CONNECTIONS as u64;
        report.runs[1].warnings = vec!["cannot read /proc/1: gone".into(); 3];
        let text = crate::table::format_report(&report);
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line}\n{text}");
        }
        assert!(text.contains("Side by side"), "{text}");
        assert!(text.contains("--server-stats"), "{text}");
        assert!(
            !text.contains("--server-pid"),
            "server CPU was measured: {text}"
        );
        assert!(
            text.contains("warning: cannot read /proc/1: gone (× 3)"),
            "{text}"
        );
        assert_eq!(text.matches("cannot read /proc/1").count(), 1, "{text}");
    }

    #[test]
    fn document_root_has_the_files_and_goes_away() {
        let root = DocumentRoot::create().unwrap();
        let path = root.path().to_owned();
        assert_eq!(
            std::fs::metadata(path.join("small.html")).unwrap().len(),
            1259
        );
        assert_eq!(std::fs::metadata(path.join("8k.bin")).unwrap().len(), 8192);
        drop(root);
        assert!(!path.exists());
    }

    #[test]
    fn both_runs_target_both_files_and_fit_in_a_minute() {
        let server: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(naive_load(server).targets.len(), 2);
        assert_eq!(realistic_load(server).cold, 2_000);
        let per_run: Duration = phases()
            .iter()
            .map(|phase| phase.warmup + phase.duration)
            .sum();
        assert!(per_run * 2 < Duration::from_secs(40));
    }
}
