//! Child processes for experiments: a server pinned to one CPU (started, waited for until it
//! listens, stopped with SIGTERM then SIGKILL, its stderr kept for error messages), and
//! `coldwire bench` pinned to another CPU, run to completion with a time bound, its JSON
//! result parsed ([`crate::bench_result`]).
//!
//! Every child is pinned with `sched_setaffinity` before `exec` (so all its threads stay on
//! that CPU), gets SIGINT/SIGTERM unblocked and SIGPIPE back to its default (coldwire blocks
//! the first two and ignores the last in its own process, and children would inherit
//! that), and never outlives its handle: dropping a [`ServerProcess`] stops it.
//!
//! ```no_run
//! # use std::time::Duration;
//! # use coldwire_experiment::process::{ServerProcess, run_bench};
//! # fn demo() -> anyhow::Result<()> {
//! let coldwire = std::path::Path::new("target/release/coldwire");
//! let args = ["serve", "--root", "www", "--listen", "127.0.0.1:0", "--workers", "1"];
//! let mut server = ServerProcess::start(coldwire, &args, Some(0))?;
//! let address = server.wait_for_line("listening on http://", Duration::from_secs(10))?;
//! let bench = [format!("--url=http://{address}/index.html"), "--rate=max".into()];
//! let result = run_bench(coldwire, &bench, Some(1), "raw/run.json".as_ref(), Duration::from_secs(60))?;
//! println!("{} requests/s", result.runs[0].phases[0].achieved_rate);
//! server.stop();
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::bench_result::BenchDocument;

/// Lines of a child's stderr kept for error messages.
const STDERR_LINES: usize = 40;
/// How long a stopped child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A `Command` for `program args`, pinned to `cpu` (when given), with the termination
/// signals unblocked and SIGPIPE at its default in the child.
pub fn pinned_command<S: AsRef<OsStr>>(program: &Path, args: &[S], cpu: Option<usize>) -> Command {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (sigemptyset, sigaddset, sigprocmask, signal,
    // sched_setaffinity) on local values; it touches no memory shared with the parent.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if let Some(cpu) = cpu {
                let mut cpus: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut cpus);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpus) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    command
}

/// The last lines a reader produces, collected by a thread.
#[derive(Clone, Default)]
struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn collect(reader: impl Read + Send + 'static) -> Tail {
        let tail = Tail::default();
        let lines = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                if let Ok(mut kept) = lines.0.lock() {
                    if kept.len() == STDERR_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
        });
        tail
    }

    fn text(&self) -> String {
        self.0
            .lock()
            .map(|lines| lines.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

fn describe(program: &Path, args: &[String]) -> String {
    std::iter::once(program.display().to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A server under test: a pinned child whose stdout lines can be waited for and whose
/// stderr is kept.
pub struct ServerProcess {
    child: Child,
    command: String,
    stdout: mpsc::Receiver<String>,
    stderr: Tail,
}

impl ServerProcess {
    /// Starts `program args` pinned to `cpu`.
    pub fn start<S: AsRef<OsStr>>(
        program: &Path,
        args: &[S],
        cpu: Option<usize>,
    ) -> anyhow::Result<ServerProcess> {
        let printable: Vec<String> = args
            .iter()
            .map(|arg| arg.as_ref().to_string_lossy().into_owned())
            .collect();
        let command_line = describe(program, &printable);
        let mut child = pinned_command(program, args, cpu)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start `{command_line}`"))?;
        let (sender, stdout) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = child.stderr.take().map(Tail::collect).unwrap_or_default();
        Ok(ServerProcess {
            child,
            command: command_line,
            stdout,
            stderr,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The command line it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    fn failure(&self, what: &str) -> anyhow::Error {
        let stderr = self.stderr_tail();
        anyhow::anyhow!(
            "the server `{}` {what}{}",
            self.command,
            if stderr.is_empty() {
                String::new()
            } else {
                format!("; its stderr:\n{stderr}")
            }
        )
    }

    /// Waits up to `timeout` for a stdout line starting with `prefix`; returns the rest,
    /// trimmed (coldwire prints `listening on http://ADDR` and `stats on URL`).
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim().to_owned());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // Give a process that just exited a moment for its stderr to arrive.
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(
                        self.failure(&format!("printed no `{prefix}` line within {timeout:?}"))
                    );
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(self.failure("exited before it was ready"));
                }
            }
        }
    }

    /// Waits up to `timeout` until something accepts TCP connections on `address` (for
    /// servers that print nothing, such as nginx).
    pub fn wait_for_port(&mut self, address: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                std::thread::sleep(Duration::from_millis(50));
                return Err(self.failure(&format!(
                    "exited before accepting connections on {address} (is it running in the foreground?)"
                )));
            }
            if std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.failure(&format!(
                    "accepted no connection on {address} within {timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True while it runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops it: SIGTERM, up to 5 s to exit, then SIGKILL. Returns its exit status.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        terminate(&mut self.child, STOP_GRACE)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SIGTERM, wait up to `grace`, SIGKILL; reaps the child.
fn terminate(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own unreaped child (its pid cannot be recycled yet) with a
    // constant signal; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// Runs `coldwire bench ARGS --json JSON -q [--cpu CPU]` pinned to `cpu`, waits for it (at
/// most `timeout`, then it is stopped and this fails), and parses its JSON. Its table
/// (stdout) is kept next to the JSON as `<stem>.txt`.
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
    if let Some(cpu) = cpu {
        full.push("--cpu".into());
        full.push(cpu.to_string());
    }
    let command_line = describe(coldwire, &full);
    let table = std::fs::File::create(json.with_extension("txt"))
        .with_context(|| format!("cannot write next to {}", json.display()))?;
    let mut child = pinned_command(coldwire, &full, cpu)
        .stdout(table)
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `{command_line}`"))?;
    let stderr = child.stderr.take().map(Tail::collect).unwrap_or_default();
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                terminate(&mut child, STOP_GRACE);
                bail!(
                    "`{command_line}` did not finish within {timeout:?} (stopped); its stderr:\n{}",
                    stderr.text()
                );
            }
            Err(error) => bail!("cannot wait for `{command_line}`: {error}"),
        }
    };
    // Let the stderr thread take the last lines.
    std::thread::sleep(Duration::from_millis(20));
    if !status.success() {
        bail!(
            "`{command_line}` failed ({status}); its stderr:\n{}",
            stderr.text()
        );
    }
    BenchDocument::read(json).with_context(|| format!("after `{command_line}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_child_runs_on_its_cpu_and_is_stopped() {
        let mut server = ServerProcess::start(
            Path::new("/bin/sh"),
            &[
                "-c",
                "grep Cpus_allowed_list /proc/self/status; echo oops >&2; exec sleep 30",
            ],
            Some(0),
        )
        .unwrap();
        let cpus = server
            .wait_for_line("Cpus_allowed_list:", Duration::from_secs(10))
            .unwrap();
        assert_eq!(cpus, "0");
        assert!(server.is_running());
        let status = server.stop().unwrap();
        assert!(!status.success(), "stopped by SIGTERM: {status}");
        assert!(!server.is_running());
    }

    #[test]
    fn a_server_that_exits_early_reports_its_stderr() {
        let mut server = ServerProcess::start(
            Path::new("/bin/sh"),
            &["-c", "echo 'cannot bind: address in use' >&2; exit 3"],
            None,
        )
        .unwrap();
        let error = server
            .wait_for_line("listening on ", Duration::from_secs(10))
            .unwrap_err()
            .to_string();
        assert!(error.contains("exited before it was ready"), "{error}");
        assert!(error.contains("address in use"), "{error}");
    }

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
}
