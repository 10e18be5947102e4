//! The built-in scenario of `coldwire bench` with no arguments: a small document root
//! (a 1,259-byte page — the size of the 1998 benchmarks' file — and an 8 KiB file), and two
//! runs against the same server at the same rates: **naive** (constant arrivals, hot
//! keep-alive connections only — how servers are usually benchmarked) and **realistic**
//! (Poisson arrivals plus 2,000 cold connections held open, as wide-area clients leave
//! them). The CLI starts the server, runs both, and prints them side by side.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{ColdMode, LoadConfig, PhasePlan, Rate};
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

#[cfg(test)]
mod tests {
    use super::*;

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
