//! The machine an experiment runs on (from `/proc` and `uname`), and the open-files limit
//! raised to the hard limit, so servers and generators started from here inherit it.

use coldwire_report::MachineRecord;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_owned())
        .unwrap_or_default()
}

/// The host name up to its first dot (the default `--machine` label).
pub fn short_hostname() -> String {
    let hostname = read_trimmed("/proc/sys/kernel/hostname");
    let short = hostname.split('.').next().unwrap_or_default();
    if short.is_empty() {
        "unknown".to_owned()
    } else {
        short.to_owned()
    }
}

/// `model name` of the first CPU in `/proc/cpuinfo` text.
fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_owned())
        })
        .unwrap_or_default()
}

/// `MemTotal` in bytes from `/proc/meminfo` text.
fn memory_bytes(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("MemTotal:")?;
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or_default()
}

/// Raises the soft open-files limit to the hard one (children inherit it); returns the
/// soft limit now in force.
pub use coldwire_io::sys::raise_open_files_limit;

/// Describes this machine, labelled `label`, with the given open-files limit.
pub fn current(label: &str, open_files_limit: u64) -> MachineRecord {
    MachineRecord {
        label: label.to_owned(),
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(1, |cpus| cpus.get()),
        cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        memory_bytes: memory_bytes(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        open_files_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU @ 2.0GHz\n";
        assert_eq!(cpu_model(cpuinfo), "Example CPU @ 2.0GHz");
        assert_eq!(cpu_model("processor : 0\n"), "");
        assert_eq!(
            memory_bytes("MemTotal:       24576 kB\nMemFree: 1 kB\n"),
            24576 * 1024
        );
    }

    #[test]
    fn describes_this_machine() {
        let limit = raise_open_files_limit().unwrap();
        let machine = current("test", limit);
        assert_eq!(machine.label, "test");
        assert!(machine.cpus >= 1);
        assert!(!machine.kernel.is_empty());
        assert!(machine.memory_bytes > 0);
        assert!(!short_hostname().contains('.'));
    }
}
