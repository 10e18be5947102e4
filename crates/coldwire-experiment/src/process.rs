//! Child processes for experiments, on the shared runner (`coldwire_process`): a server
//! pinned to one CPU ([`start_server`]: started, its stderr kept for error messages, stopped
//! with SIGTERM then SIGKILL when its handle goes), and `coldwire bench` pinned to another
//! CPU, run to completion with a time bound, its JSON result parsed ([`run_bench`],
//! [`crate::bench_result`]); a server that prints `READY ADDRESS` when it listens
//! ([`start_listening`]: origins, relays), and `coldwire proxy` as the proxy under test
//! ([`ProxyUnderTest`], the one way every experiment starts it).
//!
//! ```no_run
//! # use std::time::Duration;
//! # use coldwire_experiment::process::{run_bench, server_error, start_server};
//! # fn demo() -> anyhow::Result<()> {
//! let coldwire = std::path::Path::new("target/release/coldwire");
//! let args = ["serve", "--root", "www", "--listen", "127.0.0.1:0", "--workers", "1"];
//! let mut server = start_server(coldwire, &args, Some(0))?;
//! let address = server
//!     .wait_for_line("listening on http://", Duration::from_secs(10))
//!     .map_err(server_error)?;
//! let bench = [format!("--url=http://{address}/index.html"), "--rate=max".into()];
//! let result = run_bench(coldwire, &bench, Some(1), "raw/run.json".as_ref(), Duration::from_secs(60))?;
//! println!("{} requests/s", result.runs[0].phases[0].achieved_rate);
//! server.stop();
//! # Ok(()) }
//! ```

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use coldwire_process::{Launch, Process, ProcessError, Stdout};

use crate::bench_result::BenchDocument;

/// Starts `program args` pinned to `cpu` (when given): stdout captured as lines, the last
/// lines of stderr kept, stopped (SIGTERM, 5 s, SIGKILL) when the handle is dropped.
pub fn start_server<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    cpu: Option<usize>,
) -> anyhow::Result<Process> {
    Ok(Launch::new(program).args(args).cpu(cpu).spawn()?)
}

/// A server's failure to get ready, as an experiment reports it: `the server `CMD` …`
/// with the tail of its stderr.
pub fn server_error(error: ProcessError) -> anyhow::Error {
    anyhow::anyhow!("the server {error}")
}

/// How long a starting server gets to print where it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts `program args` pinned to `cpu` and waits for the stdout line `READY ADDRESS`
/// (`origin listening on http://`, `wan listening on http://`): the process and the address.
pub fn start_listening<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    cpu: Option<usize>,
    ready: &str,
) -> anyhow::Result<(Process, SocketAddr)> {
    let mut process = start_server(program, args, cpu)?;
    let line = process
        .wait_for_line(ready, READY_TIMEOUT)
        .map_err(server_error)?;
    let address = line
        .parse()
        .with_context(|| format!("`{ready}` was followed by an unexpected address `{line}`"))?;
    Ok((process, address))
}

/// Starts `coldwire ARGS` (a subcommand run with `--admin`) pinned to `cpu` and waits, up to
/// `timeout` each, for the stdout lines `READY ADDRESS` and `stats on URL`: the process,
/// the address and the stats URL.
pub fn start_with_stats(
    coldwire: &Path,
    args: &[String],
    cpu: Option<usize>,
    ready: &str,
    timeout: Duration,
) -> anyhow::Result<(Process, SocketAddr, String)> {
    let mut process = start_server(coldwire, args, cpu)?;
    let listen = process
        .wait_for_line(ready, timeout)
        .map_err(server_error)?;
    let stats_url = process
        .wait_for_line("stats on ", timeout)
        .map_err(server_error)?;
    let subcommand = args.first().map_or("", String::as_str);
    let address = listen.parse().with_context(|| {
        format!("coldwire {subcommand} printed an unexpected address `{listen}`")
    })?;
    Ok((process, address, stats_url))
}

/// Where the proxy under test sends requests.
#[derive(Clone, Copy, Debug)]
pub enum ProxyMode {
    /// A forward proxy: clients send absolute-form requests (PolyMix robots).
    Forward,
    /// `--reverse http://ORIGIN`.
    Reverse(SocketAddr),
}

/// `coldwire proxy` as the server under test: one worker, loopback, a port picked at
/// start, idle connections kept 600 s (robots and cold connections stay open), the admin
/// listener on (its stats URL for `--server-stats`); the experiment adds the rest
/// (`--io`, the cache, logs). Stopped when dropped.
pub struct ProxyUnderTest {
    /// The proxy's process.
    pub process: Process,
    /// Where it listens.
    pub address: SocketAddr,
    /// Its statistics endpoint (`http://ADDR/stats`).
    pub stats_url: String,
}

impl ProxyUnderTest {
    /// Starts it pinned to `cpu` with `flags` after the common ones (which they must not
    /// repeat) and waits until it listens.
    pub fn start(
        coldwire: &Path,
        mode: ProxyMode,
        flags: &[String],
        cpu: Option<usize>,
    ) -> anyhow::Result<ProxyUnderTest> {
        let mut args: Vec<String> = [
            "proxy",
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
        .map(|arg| (*arg).to_owned())
        .collect();
        if let ProxyMode::Reverse(origin) = mode {
            args.extend(["--reverse".to_owned(), format!("http://{origin}")]);
        }
        args.extend(flags.iter().cloned());
        let (process, address, stats_url) = start_with_stats(
            coldwire,
            &args,
            cpu,
            "proxy listening on http://",
            READY_TIMEOUT,
        )?;
        Ok(ProxyUnderTest {
            process,
            address,
            stats_url,
        })
    }
}

/// Runs `coldwire bench ARGS` ([`run_bench`]) pinned to `cpu` against `server`, its JSON
/// written to `raw/<stem>.json` in the experiment's directory, then stops the server: the
/// parsed result and the JSON's path relative to that directory. A failed run whose server
/// had died says so, naming it `the server (NAME)`, with the server's stderr.
pub fn bench_then_stop(
    context: &crate::RunContext,
    server: &mut Process,
    name: &str,
    args: &[String],
    cpu: Option<usize>,
    stem: &str,
    timeout: Duration,
) -> anyhow::Result<(BenchDocument, String)> {
    let relative = format!("raw/{stem}.json");
    let result = run_bench(
        &context.coldwire,
        args,
        cpu,
        &context.dir.join(&relative),
        timeout,
    );
    let running = server.is_running();
    let stderr = server.stderr_tail();
    server.stop();
    match result {
        Ok(document) => Ok((document, relative)),
        Err(error) if !running => Err(error.context(format!(
            "the server ({name}) died during the run; its stderr:\n{stderr}"
        ))),
        Err(error) => Err(error),
    }
}

/// Runs `coldwire bench ARGS --json JSON -q --max-error-rate 100% [--cpu CPU]` pinned to `cpu`, waits for it (at
/// most `timeout`, then it is stopped and this fails), and parses its JSON. Its table
/// (stdout) is kept next to the JSON as `<stem>.txt`. A run in which a phase ended no
/// request at all (exit status 99) is repeated, up to [`BENCH_ATTEMPTS`] runs in all.
pub fn run_bench(
    coldwire: &Path,
    args: &[String],
    cpu: Option<usize>,
    json: &Path,
    timeout: Duration,
) -> anyhow::Result<BenchDocument> {
    let mut full: Vec<String> = vec!["bench".into()];
    full.extend(args.iter().cloned());
    full.push("--json".into());
    full.push(json.display().to_string());
    full.push("-q".into());
    // An experiment records errors (overload is often the point) rather than failing on
    // them: no error-rate threshold, so the exit status only says whether the run ran.
    full.push("--max-error-rate".into());
    full.push("100%".into());
    if let Some(cpu) = cpu {
        full.push("--cpu".into());
        full.push(cpu.to_string());
    }
    // With no error-rate threshold, exit status 99 (a failed threshold) means a phase
    // ended without a single request answered or failed: on a machine starved of CPU a
    // short quick-mode phase can pass before the first answer. That is a measurement that
    // did not happen, not a result: the run is repeated, at most BENCH_ATTEMPTS times in
    // all, and only the last failure is an error (a server that answers nothing fails
    // every time).
    let mut attempt = 1;
    loop {
        let table = std::fs::File::create(json.with_extension("txt"))
            .with_context(|| format!("cannot write next to {}", json.display()))?;
        let launch = Launch::new(coldwire)
            .args(&full)
            .cpu(cpu)
            .stdout(Stdout::File(table));
        let command_line = launch.command_line();
        match launch.spawn()?.finish(timeout) {
            Ok(_) => {
                return BenchDocument::read(json)
                    .with_context(|| format!("after `{command_line}`"));
            }
            Err(error) if attempt < BENCH_ATTEMPTS && no_request_ended(&error) => {
                eprintln!(
                    "warning: a phase of `{command_line}` ended with no request answered \
                     (exit status 99; is the machine starved of CPU?): running it again \
                     ({} of {BENCH_ATTEMPTS})",
                    attempt + 1
                );
                attempt += 1;
            }
            Err(error) if attempt == 1 => return Err(error.into()),
            Err(error) => {
                return Err(anyhow::anyhow!(
                    "{:#} (the same in each of {attempt} runs)",
                    anyhow::Error::new(error)
                ));
            }
        }
    }
}

/// How many times [`run_bench`] runs `coldwire bench` when a phase ends with no request.
pub const BENCH_ATTEMPTS: u32 = 3;

/// Whether `error` is `coldwire bench`'s exit status 99 (a failed threshold: with
/// `--max-error-rate 100%`, a phase in which no request ended).
fn no_request_ended(error: &coldwire_process::ProcessError) -> bool {
    matches!(
        error.failure(),
        Some(coldwire_process::Failure::Status { status }) if status.code() == Some(99)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_bench_reports_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let error = run_bench(
            Path::new("/bin/sh"),
            &["--no-such-flag".into()],
            None,
            &dir.path().join("x.json"),
            Duration::from_secs(10),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("failed"), "{error}");
        assert!(
            error.contains("--no-such-flag"),
            "the command line is named: {error}"
        );
    }

    /// A stand-in for `coldwire` that counts its runs in `count` and exits with `status`.
    fn fake_bench(dir: &Path, status: i32) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("fake-coldwire");
        let count = dir.join("count");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho run >> '{}'\nexit {status}\n",
                count.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    fn runs_counted(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("count"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    #[test]
    fn a_phase_with_no_request_is_run_again_then_fails() {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_bench(dir.path(), 99);
        let error = run_bench(
            &fake,
            &[],
            None,
            &dir.path().join("x.json"),
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert_eq!(runs_counted(dir.path()), BENCH_ATTEMPTS as usize);
        assert!(
            format!("{error:#}").contains("in each of 3 runs"),
            "{error:#}"
        );
    }

    #[test]
    fn other_failures_are_not_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_bench(dir.path(), 2);
        let error = run_bench(
            &fake,
            &[],
            None,
            &dir.path().join("x.json"),
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert_eq!(runs_counted(dir.path()), 1);
        assert!(error.to_string().contains("failed"), "{error:#}");
    }

    #[test]
    fn a_server_that_exits_early_is_named_the_server() {
        let mut server = start_server(
            Path::new("/bin/sh"),
            &["-c", "echo 'cannot bind: address in use' >&2; exit 3"],
            None,
        )
        .unwrap();
        let error = server
            .wait_for_line("listening on ", Duration::from_secs(10))
            .map_err(server_error)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("the server `/bin/sh"), "{error}");
        assert!(error.contains("exited before it was ready"), "{error}");
        assert!(error.contains("address in use"), "{error}");
    }
}
