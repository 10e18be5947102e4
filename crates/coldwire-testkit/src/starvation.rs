//! Telling a slow system from a starved test: how long a thread, a process or the whole
//! machine waited for a CPU (Linux schedstat and pressure stall information).
//!
//! Tests here never assert on speed alone. Where a test checks something that only holds
//! when its processes got the CPU when they asked for it (a rate, a deadline, a latency
//! ordering), it measures that condition first (retrying a bounded number of times and
//! judging the best attempt), and only when it still fails asks these helpers whether the
//! failure is explained by waiting in the run queue. It then prints why it skips that one
//! check and still checks everything that does not depend on speed.
//!
//! * [`thread_run_delay`] — the calling thread's run-queue wait so far.
//! * [`process_run_delay`] — a process's (all its threads') run-queue wait so far.
//! * [`CpuPressure`] — the machine's CPU pressure (`/proc/pressure/cpu`, "some" total): the
//!   share of a window in which at least one runnable task waited for a CPU.
//! * [`output_watched`] — runs a command to completion like `Command::output`, sampling its
//!   run-queue wait while it runs ([`Watched`]).
//!
//! Where the kernel does not expose these files the helpers return `None`/zero, so a test
//! falls back to failing on the check itself (never to a silent skip).

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The second field of a `schedstat` file: nanoseconds spent runnable but waiting for a CPU.
fn run_delay_of(text: &str) -> Option<Duration> {
    text.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(Duration::from_nanos)
}

/// The calling thread's run-queue wait so far (`/proc/thread-self/schedstat`).
pub fn thread_run_delay() -> Option<Duration> {
    run_delay_of(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// A live process's run-queue wait so far, summed over its threads
/// (`/proc/PID/task/*/schedstat`); `None` once it has exited or without schedstat.
pub fn process_run_delay(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = Duration::ZERO;
    let mut any = false;
    for task in tasks.flatten() {
        if let Some(delay) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|text| run_delay_of(&text))
        {
            total += delay;
            any = true;
        }
    }
    any.then_some(total)
}

/// The machine's CPU pressure since [`CpuPressure::start`].
#[derive(Clone, Copy, Debug)]
pub struct CpuPressure {
    started: Instant,
    stalled: Option<Duration>,
}

/// `/proc/pressure/cpu`'s "some" total (microseconds some task waited for a CPU).
fn some_cpu_stall() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = text.lines().find(|line| line.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?;
    total.parse::<u64>().ok().map(Duration::from_micros)
}

impl CpuPressure {
    /// Starts a window.
    pub fn start() -> Self {
        Self {
            started: Instant::now(),
            stalled: some_cpu_stall(),
        }
    }

    /// The share (0–1) of the window so far in which some runnable task waited for a CPU;
    /// `None` without pressure stall information.
    pub fn share(&self) -> Option<f64> {
        let stalled = some_cpu_stall()?.saturating_sub(self.stalled?);
        let elapsed = self.started.elapsed().as_secs_f64();
        (elapsed > 0.0).then(|| stalled.as_secs_f64() / elapsed)
    }
}

/// A finished command: its output, its wall time, and the run-queue wait of its process
/// (all threads, last sample before it exited; children of it are not counted).
#[derive(Debug)]
pub struct Watched {
    /// Status, stdout and stderr, as `Command::output` gives them.
    pub output: Output,
    /// Just before it was started.
    pub started: Instant,
    /// From start to exit.
    pub wall: Duration,
    /// Its threads' run-queue wait (the largest sample taken while it ran).
    pub run_delay: Duration,
}

/// Runs `command` to completion (stdout and stderr captured, as `Command::output`),
/// sampling its run-queue wait every 10 ms.
pub fn output_watched(command: &mut Command) -> Watched {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("could not start {command:?}: {error}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id();
    let mut run_delay = Duration::ZERO;
    let status = loop {
        if let Some(delay) = process_run_delay(pid) {
            run_delay = run_delay.max(delay);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(error) => panic!("waiting for {command:?}: {error}"),
        }
    };
    Watched {
        output: Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        },
        started,
        wall: started.elapsed(),
        run_delay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_second_field_is_the_run_delay() {
        assert_eq!(
            run_delay_of("367511 7139325 6\n"),
            Some(Duration::from_nanos(7_139_325))
        );
        assert_eq!(run_delay_of("garbage"), None);
    }

    #[test]
    fn this_process_and_thread_have_a_run_delay_where_schedstat_exists() {
        if std::fs::metadata("/proc/thread-self/schedstat").is_err() {
            println!("skipped: no schedstat on this kernel");
            return;
        }
        assert!(thread_run_delay().is_some());
        assert!(process_run_delay(std::process::id()).is_some());
    }

    #[test]
    fn a_watched_command_keeps_its_output_and_status() {
        let watched =
            output_watched(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]));
        assert_eq!(watched.output.stdout, b"out\n");
        assert_eq!(watched.output.stderr, b"err\n");
        assert_eq!(watched.output.status.code(), Some(3));
    }
}
