//! [`ProcessCpu`]: the whole process's CPU time, user and system, as the kernel counts it
//! (`getrusage(RUSAGE_SELF)`: every thread, live or ended). The stats report and the stats
//! log carry it, so CPU per request can be computed from inside the server.

use serde::Serialize;

/// CPU time used by this process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcessCpu {
    /// Seconds spent in user mode.
    pub cpu_user_seconds: f64,
    /// Seconds spent in the kernel on the process's behalf.
    pub cpu_system_seconds: f64,
}

impl ProcessCpu {
    /// Reads the process's CPU times now (zeros if the kernel refuses, which it does not
    /// for `RUSAGE_SELF`).
    pub fn now() -> ProcessCpu {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` points to writable memory of the right type; getrusage only
        // writes into it and reports failure through its return value.
        let result = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        if result != 0 {
            return ProcessCpu::default();
        }
        // SAFETY: getrusage succeeded, so it filled the structure (and it was zeroed
        // before, so every field is initialised either way).
        let usage = unsafe { usage.assume_init() };
        let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1_000_000.0;
        ProcessCpu {
            cpu_user_seconds: seconds(usage.ru_utime),
            cpu_system_seconds: seconds(usage.ru_stime),
        }
    }

    /// User plus system seconds.
    pub fn total_seconds(&self) -> f64 {
        self.cpu_user_seconds + self.cpu_system_seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_while_the_process_works() {
        let before = ProcessCpu::now();
        let mut spin = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let after = ProcessCpu::now();
        assert!(after.total_seconds() > before.total_seconds());
    }
}
