//! The server's cost read from outside, through `/proc`: on-CPU time of every thread of a
//! process and its descendants (`/proc/PID/task/TID/schedstat`, nanoseconds, precise), the
//! user/system split (`/proc/PID/stat`, in ticks of 1/100 s: meaningful only over long
//! windows), resident memory and open descriptors; and the whole machine's CPU time by
//! kind from `/proc/stat` (softirq and kernel threads work for the server outside its own
//! threads, e.g. loopback receive processing).
//!
//! Threads that exit during the window take their schedstat time with them; servers with
//! a fixed set of threads (coldwire, nginx workers) are measured exactly.
//!
//! TCP segments in and out come from `/proc/PID/net/snmp`: the counters of the network
//! namespace the process is in — the server's own segments exactly when it runs alone
//! in a namespace (`ip netns`), every socket's of the namespace otherwise.
//!
//! The files are parsed by the `procfs` crate (sampling happens twice per measured
//! window, never on the generator's hot path).

use std::io;
use std::time::Instant;

use procfs::process::Process;
use procfs::{CurrentSI, KernelStats};
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

/// A `procfs` error as the `io::Error` the callers report (`NotFound` for a process that
/// is gone).
fn io_error(error: procfs::ProcError) -> io::Error {
    match error {
        procfs::ProcError::NotFound(_) => io::Error::from(io::ErrorKind::NotFound),
        procfs::ProcError::PermissionDenied(_) => io::Error::from(io::ErrorKind::PermissionDenied),
        procfs::ProcError::Io(error, _) => error,
        other => io::Error::other(other.to_string()),
    }
}

/// Process ids of `pid` and all its descendants (from every thread's `children`).
fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut index = 0;
    while index < tree.len() && tree.len() < 4096 {
        let parent = tree[index];
        index += 1;
        let Ok(tasks) = Process::new(parent as i32).and_then(|process| process.tasks()) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = task.children() {
                tree.extend(children);
            }
        }
    }
    tree
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
    for (position, id) in pids.into_iter().enumerate() {
        let opened = Process::new(id as i32).and_then(|process| {
            let tasks = process.tasks()?;
            Ok((process, tasks))
        });
        let (process, tasks) = match opened {
            Ok(opened) => opened,
            // The root must exist; a descendant may have exited meanwhile.
            Err(error) if position == 0 => return Err(io_error(error)),
            Err(_) => continue,
        };
        for task in tasks.flatten() {
            if let Ok(schedstat) = task.schedstat() {
                sample.cpu_ns += schedstat.sum_exec_runtime;
                sample.runqueue_wait_ns += schedstat.run_delay;
                sample.threads += 1;
            }
        }
        if let Ok(stat) = process.stat() {
            sample.user_ticks += stat.utime;
            sample.system_ticks += stat.stime;
        }
        if let Ok(status) = process.status() {
            sample.rss_bytes += status.vmrss.unwrap_or(0) * 1024;
        }
        sample.open_descriptors += process.fd_count().unwrap_or(0) as u64;
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
    let total = KernelStats::current().map_err(io_error)?.total;
    Ok(MachineSample {
        user: total.user,
        nice: total.nice,
        system: total.system,
        idle: total.idle,
        iowait: total.iowait.unwrap_or(0),
        irq: total.irq.unwrap_or(0),
        softirq: total.softirq.unwrap_or(0),
        steal: total.steal.unwrap_or(0),
    })
}

/// TCP segments received and sent (`InSegs`, `OutSegs`) in the network namespace of
/// process `pid`, from `/proc/PID/net/snmp`.
pub fn tcp_segments(pid: u32) -> io::Result<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/snmp"))?;
    parse_tcp_segments(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/proc/{pid}/net/snmp has no Tcp InSegs/OutSegs"),
        )
    })
}

/// `InSegs` and `OutSegs` of the `Tcp:` header and value lines of an snmp file.
fn parse_tcp_segments(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().filter(|line| line.starts_with("Tcp:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let value = |name: &str| -> Option<u64> {
        let index = names.iter().position(|known| *known == name)?;
        values.get(index)?.parse().ok()
    };
    Some((value("InSegs")?, value("OutSegs")?))
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

    #[test]
    fn tcp_segments_are_read_from_the_snmp_table() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails \
                    EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
                    Tcp: 1 200 120000 -1 5 6 0 0 2 1234 5678 0 0 3 0\n";
        assert_eq!(parse_tcp_segments(text), Some((1234, 5678)));
        assert_eq!(parse_tcp_segments("Ip: a\nIp: 1\n"), None);
        let (received, sent) = tcp_segments(std::process::id()).unwrap();
        assert!(received + sent < u64::MAX);
    }
}
