//! `coldwire serve` as the server under test: a temporary document root with files of given
//! sizes, the server started on port 0 with one worker, its stats endpoint on, timeouts
//! long enough to hold cold connections, pinned to one CPU; and which backends this kernel
//! allows (io_uring may be switched off).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use coldwire_io::Backend;
use coldwire_process::Process;

use crate::process::start_with_stats;

/// How long a starting server gets to print its addresses.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A temporary directory of files named by their size (`1259.bin`, `8192.bin`), removed on
/// drop.
pub struct DocumentRoot {
    path: PathBuf,
}

impl DocumentRoot {
    /// Writes one file per size into a new directory under the system's temporary directory.
    pub fn create(sizes: &[u64]) -> anyhow::Result<DocumentRoot> {
        let path = crate::output::scratch_dir("coldwire-experiment")?;
        let root = DocumentRoot { path };
        for &size in sizes {
            let contents: Vec<u8> = (0..size)
                .map(|index| b"coldwire "[(index % 9) as usize])
                .collect();
            std::fs::write(root.path.join(Self::file_name(size)), contents)
                .with_context(|| format!("cannot write into {}", root.path.display()))?;
        }
        Ok(root)
    }

    /// The name of the file of `size` bytes.
    pub fn file_name(size: u64) -> String {
        format!("{size}.bin")
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

/// A running `coldwire serve`.
pub struct ColdwireServe {
    /// The process (stopped on drop).
    pub process: Process,
    /// Where it serves.
    pub address: SocketAddr,
    /// Its stats endpoint (`http://ADDR/stats`).
    pub stats_url: String,
}

impl ColdwireServe {
    /// Starts `coldwire serve --root ROOT --io BACKEND --workers 1` on 127.0.0.1 port 0 with
    /// `--admin`, a 600 s idle timeout and 19,000 connections allowed, pinned to `cpu`;
    /// `extra` flags are appended. Waits until it prints its addresses.
    pub fn start(
        coldwire: &Path,
        root: &Path,
        backend: &str,
        cpu: Option<usize>,
        extra: &[String],
    ) -> anyhow::Result<ColdwireServe> {
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--idle-timeout",
            "600",
            "--header-timeout",
            "600",
            "--max-connections",
            "19000",
            "--io",
            backend,
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
        args.push("--root".into());
        args.push(root.display().to_string());
        args.extend(extra.iter().cloned());
        let (process, address, stats_url) =
            start_with_stats(coldwire, &args, cpu, "listening on http://", START_TIMEOUT)?;
        Ok(ColdwireServe {
            process,
            address,
            stats_url,
        })
    }

    /// The URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.address, path.trim_start_matches('/'))
    }
}

/// Where the server and the generator run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Pinning {
    /// The server's CPU (`None`: not pinned).
    pub server_cpu: Option<usize>,
    /// The generator's CPU.
    pub generator_cpu: Option<usize>,
}

impl Default for Pinning {
    fn default() -> Pinning {
        let (server_cpu, generator_cpu) = default_cpus();
        Pinning {
            server_cpu,
            generator_cpu,
        }
    }
}

/// The server side of a measurement.
#[derive(Clone, Copy, Debug)]
pub struct ServerSetup<'a> {
    /// Document root.
    pub root: &'a Path,
    /// `--io` backend.
    pub backend: &'a str,
    /// More `coldwire serve` flags.
    pub extra: &'a [String],
    /// CPUs.
    pub pinning: Pinning,
}

/// One measurement against a fresh `coldwire serve`: starts it (`backend`, `extra` flags)
/// pinned to the server's CPU, runs `coldwire bench` with `bench_args(server address)` plus
/// `--server-pid`/`--server-stats` pinned to the generator's CPU, its JSON written to
/// `raw/<stem>.json`, stops the server and returns the parsed result with the JSON's path
/// relative to the experiment directory. `timeout` bounds the generator's run.
pub fn measure(
    context: &crate::RunContext,
    server: &ServerSetup<'_>,
    bench_args: &dyn Fn(SocketAddr) -> Vec<String>,
    stem: &str,
    timeout: Duration,
) -> anyhow::Result<(crate::bench_result::BenchDocument, String)> {
    let ServerSetup {
        root,
        backend,
        extra,
        pinning,
    } = *server;
    let mut server =
        ColdwireServe::start(&context.coldwire, root, backend, pinning.server_cpu, extra)?;
    let mut args = bench_args(server.address);
    args.push(format!("--server-pid={}", server.process.pid()));
    args.push(format!("--server-stats={}", server.stats_url));
    crate::process::bench_then_stop(
        context,
        &mut server.process,
        &format!("coldwire serve --io {backend}"),
        &args,
        pinning.generator_cpu,
        stem,
        timeout,
    )
}

/// The server's and the generator's CPUs: 0 and 1 on a machine with two or more, none
/// (no pinning) on one.
pub fn default_cpus() -> (Option<usize>, Option<usize>) {
    let cpus = std::thread::available_parallelism().map_or(1, |cpus| cpus.get());
    if cpus >= 2 {
        (Some(0), Some(1))
    } else {
        (None, None)
    }
}

/// Splits `names` into the backends this kernel runs and warnings for the others (an
/// unknown name is an error). io_uring is probed on a helper thread: tearing a ring down
/// can interrupt the probing thread's next blocking call.
pub fn available_backends(names: &[String]) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let mut available = Vec::new();
    let mut warnings = Vec::new();
    for name in names {
        let backend = Backend::from_str(name)
            .with_context(|| format!("in the scenario's backends: {name:?}"))?;
        let probe = std::thread::spawn(move || backend.probe())
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the probe panicked")));
        match probe {
            Ok(()) => available.push(name.clone()),
            Err(error) => warnings.push(format!(
                "backend {name} skipped: this kernel or sandbox does not allow it ({error})"
            )),
        }
    }
    Ok((available, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_root_has_the_sizes_and_goes_away() {
        let root = DocumentRoot::create(&[1259, 8192]).unwrap();
        let path = root.path().to_owned();
        assert_eq!(
            std::fs::metadata(path.join("1259.bin")).unwrap().len(),
            1259
        );
        assert_eq!(
            std::fs::metadata(path.join("8192.bin")).unwrap().len(),
            8192
        );
        drop(root);
        assert!(!path.exists());
    }

    #[test]
    fn backends_are_checked() {
        let (available, _) = available_backends(&["select".into(), "epoll".into()]).unwrap();
        assert_eq!(available, ["select", "epoll"]);
        assert!(available_backends(&["kqueue".into()]).is_err());
    }
}
