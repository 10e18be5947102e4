//! The server's cost read from outside, through `/proc`: on-CPU time of every thread of a
//! process and its descendants (`/proc/PID/task/TID/schedstat`, nanoseconds, precise), the
//! user/system split (`/proc/PID/stat`, in ticks of 1/100 s: meaningful only over long
//! windows), resident memory and open descriptors; and the whole machine's CPU time by
//! kind from `/proc/stat` (softirq and kernel threads work for the server outside its own
//! threads, e.g. loopback receive processing).
//!
//! Threads that exit during the window take their schedstat time with them; servers with
//! a fixed set of threads (coldwire, nginx workers) are measured exactly.

use std::fs;
use std::io;
use std::time::Instant;

use serde::Serialize;

/// `/proc` reports process times in USER_HZ ticks, fixed at 100 per second by the ABI.
pub const TICKS_PER_SECOND: f64 = 100.0;

/// A snapshot of a process tree.
#[derive(Clone, Copy, Debug)]
pub struct ProcessSample {
    /// When it was taken.
    pub at: Instant,
    /// On-CPU nanoseconds summed over all threads.
    pub cpu_ns: u64,
    /// Nanoseconds threads spent runnable but waiting for a CPU (schedstat's second
    /// field): time other work took from them.
    pub runqueue_wait_ns: u64,
    /// User-mode ticks (1/100 s) summed over processes (includes exited threads).
    pub user_ticks: u64,
    /// Kernel-mode ticks.
    pub system_ticks: u64,
    /// Threads counted.
    pub threads: u64,
    /// Processes counted (the root and its descendants).
    pub processes: u64,
    /// Resident memory in bytes, summed.
    pub rss_bytes: u64,
    /// Open descriptors, summed.
    pub open_descriptors: u64,
}

/// Process ids of `pid` and all its descendants.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut index = 0;
    while index < tree.len() && tree.len() < 4096 {
        let parent = tree[index];
        index += 1;
        let Ok(tasks) = fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("children");
            if let Ok(children) = fs::read_to_string(path) {
                tree.extend(
                    children
                        .split_whitespace()
                        .filter_map(|child| child.parse::<u32>().ok()),
                );
            }
        }
    }
    tree
}

fn first_number(text: &str) -> u64 {
    text.split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .unwrap_or(0)
}

/// User and system ticks from `/proc/PID/stat` (fields 14 and 15; the command name may
/// hold spaces and parentheses, so fields are counted after the last `)`).
fn process_ticks(pid: u32) -> io::Result<(u64, u64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let number = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse().ok())
            .unwrap_or(0)
    };
    Ok((number(11), number(12)))
}

fn rss_bytes(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .map(|line| first_number(line.trim_start_matches("VmRSS:")) * 1024)
        })
        .unwrap_or(0)
}

/// Samples `pid` (and, if `with_descendants`, every process below it).
pub fn sample_process(pid: u32, with_descendants: bool) -> io::Result<ProcessSample> {
    let pids = if with_descendants {
        process_tree(pid)
    } else {
        vec![pid]
    };
    let mut sample = ProcessSample {
        at: Instant::now(),
        cpu_ns: 0,
        runqueue_wait_ns: 0,
        user_ticks: 0,
        system_ticks: 0,
        threads: 0,
        processes: 0,
        rss_bytes: 0,
        open_descriptors: 0,
    };
    for (position, process) in pids.into_iter().enumerate() {
        let tasks = match fs::read_dir(format!("/proc/{process}/task")) {
            Ok(tasks) => tasks,
            // The root must exist; a descendant may have exited meanwhile.
            Err(error) if position == 0 => return Err(error),
            Err(_) => continue,
        };
        for task in tasks.flatten() {
            if let Ok(schedstat) = fs::read_to_string(task.path().join("schedstat")) {
                sample.cpu_ns += first_number(&schedstat);
                sample.runqueue_wait_ns += schedstat
                    .split_whitespace()
                    .nth(1)
                    .and_then(|field| field.parse::<u64>().ok())
                    .unwrap_or(0);
                sample.threads += 1;
            }
        }
        if let Ok((user, system)) = process_ticks(process) {
            sample.user_ticks += user;
            sample.system_ticks += system;
        }
        sample.rss_bytes += rss_bytes(process);
        sample.open_descriptors += fs::read_dir(format!("/proc/{process}/fd"))
            .map(|entries| entries.count() as u64)
            .unwrap_or(0);
        sample.processes += 1;
    }
    Ok(sample)
}

/// The whole machine's CPU time by kind, in ticks, from the `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MachineSample {
    /// User mode.
    pub user: u64,
    /// User mode, niced.
    pub nice: u64,
    /// Kernel mode (system calls, kernel threads).
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle waiting for I/O.
    pub iowait: u64,
    /// Hardware interrupts.
    pub irq: u64,
    /// Soft interrupts (network receive processing on loopback).
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
}

impl MachineSample {
    /// Ticks spent doing anything (all but idle and iowait).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }
}

/// Reads `/proc/stat`.
pub fn sample_machine() -> io::Result<MachineSample> {
    let stat = fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .find(|line| line.starts_with("cpu "))
        .ok_or_else(|| io::Error::other("no cpu line in /proc/stat"))?;
    let numbers: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    let number = |index: usize| numbers.get(index).copied().unwrap_or(0);
    Ok(MachineSample {
        user: number(0),
        nice: number(1),
        system: number(2),
        idle: number(3),
        iowait: number(4),
        irq: number(5),
        softirq: number(6),
        steal: number(7),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_this_process_and_the_machine() {
        let before = sample_process(std::process::id(), true).unwrap();
        let mut spin = 0u64;
        let until = Instant::now() + std::time::Duration::from_millis(30);
        while Instant::now() < until {
            spin = spin.wrapping_add(1);
        }
        let after = sample_process(std::process::id(), false).unwrap();
        assert!(spin > 0);
        assert!(after.cpu_ns > before.cpu_ns);
        assert!(after.threads >= 1 && after.rss_bytes > 0 && after.open_descriptors >= 3);
        let machine = sample_machine().unwrap();
        assert!(machine.busy() + machine.idle > 0);
        assert!(sample_process(u32::MAX - 1, true).is_err());
    }
}
