//! Finding the peers' programs and installing the Debian packages that provide the missing
//! ones: `apt-get update` once, then `apt-get install -y` of every missing package in one
//! go (non-interactive, time-bounded). A package's install scripts may start a system
//! daemon (no systemd here, but sysv scripts run); the experiment never uses the packages'
//! fixed ports, so such a daemon cannot hold its ports, and any that runs is named in a
//! warning (it competes for CPU).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A peer program and the Debian package that provides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Program {
    /// Executable name (`nginx`, `varnishd`, …).
    pub binary: &'static str,
    /// Debian package (`nginx-light`, `varnish`, …).
    pub package: &'static str,
}

/// How long `apt-get update` plus `apt-get install` may take.
const APT_TIMEOUT: Duration = Duration::from_secs(900);

/// Where `binary` is: the first match in `PATH`, then `/usr/sbin` and `/sbin` (daemons live
/// there and a non-root `PATH` may lack them).
pub(crate) fn find(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(binary))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Makes sure every program in `wanted` is installed (when `install`, with apt-get), and
/// returns the warnings: what could not be installed, and daemons already running.
pub(crate) fn ensure(wanted: &[Program], install: bool, progress: &dyn Fn(&str)) -> Vec<String> {
    let mut warnings = Vec::new();
    let missing: BTreeSet<&str> = wanted
        .iter()
        .filter(|program| find(program.binary).is_none())
        .map(|program| program.package)
        .collect();
    if !missing.is_empty() {
        let packages: Vec<&str> = missing.into_iter().collect();
        if !install {
            warnings.push(format!(
                "not installed, skipped: {} (run with --install-peers, or apt-get install -y {})",
                packages.join(", "),
                packages.join(" ")
            ));
        } else {
            progress(&format!("installing {} with apt-get", packages.join(", ")));
            if let Err(error) = apt_install(&packages) {
                warnings.push(format!(
                    "apt-get could not install {}: {error:#}",
                    packages.join(", ")
                ));
            }
        }
    }
    let mut daemons = Vec::new();
    for program in wanted {
        if find(program.binary).is_some() {
            daemons.extend(running(program.binary));
        }
    }
    daemons.sort();
    daemons.dedup();
    if !daemons.is_empty() {
        warnings.push(format!(
            "processes not started by this experiment were running ({}): they hold none of its ports \
             (all picked free at run time) but may take CPU",
            daemons.join(", ")
        ));
    }
    warnings
}

/// `apt-get update` then `apt-get install -y PACKAGES`, non-interactive, bounded in time.
fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    let apt = find("apt-get").ok_or_else(|| anyhow::anyhow!("apt-get not found (not Debian?)"))?;
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "installing packages needs root: run `apt-get install -y {}` first",
            packages.join(" ")
        );
    }
    let deadline = Instant::now() + APT_TIMEOUT;
    run_bounded(Command::new(&apt).args(["update", "-qq"]), deadline)?;
    run_bounded(
        Command::new(&apt)
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages),
        deadline,
    )
}

fn run_bounded(command: &mut Command, deadline: Instant) -> anyhow::Result<()> {
    let mut child = command
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "{command:?} failed ({status})");
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("{command:?} did not finish within {APT_TIMEOUT:?} (stopped)");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The program's version line (`nginx version: nginx/1.22.1`), if it says.
pub(crate) fn version(program: Program) -> Option<String> {
    let path = find(program.binary)?;
    let flag = if program.binary == "varnishd" {
        "-V"
    } else {
        "-v"
    };
    let output = Command::new(path)
        .arg(flag)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let line = text.lines().map(str::trim).find(|line| !line.is_empty())?;
    Some(line.chars().take(80).collect())
}

/// `name (pid)` of every process whose command name is `binary` (from /proc).
pub(crate) fn running(binary: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // /proc/PID/comm holds at most 15 bytes of the name.
    let short: String = binary.chars().take(15).collect();
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim() == short).then(|| format!("{binary} pid {pid}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_and_reports_missing_ones_without_installing() {
        assert!(find("sh").is_some());
        let missing = Program {
            binary: "no-such-peer-program",
            package: "no-such-package",
        };
        let warnings = ensure(&[missing], false, &|_| {});
        assert!(
            warnings
                .iter()
                .any(|warning| warning.contains("no-such-package")),
            "{warnings:?}"
        );
    }
}
