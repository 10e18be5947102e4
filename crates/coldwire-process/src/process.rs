//! [`Process`]: a running child. Waiting for it to be ready (a stdout line, or its port
//! accepting), signals, a run to completion with a time bound, and stopping it: SIGTERM,
//! the grace period, SIGKILL — also when the handle is dropped.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStderr, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Failure, ProcessError};
use crate::output::Tail;

/// How often a child's state is polled while waiting for it.
const POLL: Duration = Duration::from_millis(20);
/// A moment for the stderr thread to take the last lines of a child that just exited.
const SETTLE: Duration = Duration::from_millis(50);

/// A running child process; stopped (SIGTERM, grace, SIGKILL) and reaped on drop.
pub struct Process {
    child: Child,
    command: String,
    stdout: Option<mpsc::Receiver<String>>,
    stderr: Option<Tail>,
    grace: Duration,
}

impl Process {
    pub(crate) fn new(
        child: Child,
        command: String,
        stdout: Option<mpsc::Receiver<String>>,
        stderr: Option<Tail>,
        grace: Duration,
    ) -> Process {
        Process {
            child,
            command,
            stdout,
            stderr,
            grace,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The command line it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The last lines it wrote to stderr (empty unless [`crate::Stderr::Keep`]).
    pub fn stderr_tail(&self) -> String {
        self.stderr.as_ref().map(Tail::text).unwrap_or_default()
    }

    /// Its stderr pipe, once, when started with [`crate::Stderr::Pipe`].
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    fn failed(&self, failure: Failure) -> ProcessError {
        ProcessError::Failed {
            command: self.command.clone(),
            failure,
            stderr: self.stderr_tail(),
        }
    }

    /// Waits up to `timeout` for a stdout line starting with `prefix` (earlier lines are
    /// passed over); returns the rest of the line, trimmed. coldwire prints
    /// `listening on http://ADDR`, `proxy listening on http://ADDR` and `stats on URL`.
    pub fn wait_for_line(
        &mut self,
        prefix: &str,
        timeout: Duration,
    ) -> Result<String, ProcessError> {
        let deadline = Instant::now() + timeout;
        let Some(lines) = &self.stdout else {
            return Err(self.failed(Failure::NotCaptured));
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim().to_owned());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    std::thread::sleep(SETTLE);
                    return Err(self.failed(Failure::NoReadyLine {
                        prefix: prefix.to_owned(),
                        timeout,
                    }));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    std::thread::sleep(SETTLE);
                    return Err(self.failed(Failure::ExitedEarly));
                }
            }
        }
    }

    /// Waits up to `timeout` until something accepts TCP connections on `address` (for
    /// servers that print nothing, such as nginx).
    pub fn wait_for_port(
        &mut self,
        address: SocketAddr,
        timeout: Duration,
    ) -> Result<(), ProcessError> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                std::thread::sleep(SETTLE);
                return Err(self.failed(Failure::ExitedBeforeAccepting { address }));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.failed(Failure::NotAccepting { address, timeout }));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True while it runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its exit status if it has exited (reaping it), `None` while it runs.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` (e.g. `libc::SIGHUP`) unless it has already been reaped.
    pub fn signal(&mut self, signal: libc::c_int) -> std::io::Result<()> {
        if self.try_wait().is_some() {
            return Ok(());
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own unreaped child (its pid cannot be recycled before we
        // reap it) with a signal number; no memory is involved.
        if unsafe { libc::kill(pid, signal) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Waits up to `limit` for it to exit; `None` if it still runs then.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Runs it to its end, at most `timeout` (then it is stopped and this fails); a
    /// failure status is an error too. Either error carries the tail of its stderr.
    pub fn finish(&mut self, timeout: Duration) -> Result<ExitStatus, ProcessError> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    self.stop();
                    return Err(self.failed(Failure::TimedOut { timeout }));
                }
                Err(error) => {
                    return Err(self.failed(Failure::Wait {
                        reason: error.to_string(),
                    }));
                }
            }
        };
        // Let the stderr thread take the last lines.
        std::thread::sleep(POLL);
        if status.success() {
            Ok(status)
        } else {
            Err(self.failed(Failure::Status { status }))
        }
    }

    /// Stops it with the grace period it was launched with: SIGTERM, up to the grace
    /// period to exit, then SIGKILL (at once when the grace is zero). Returns its exit
    /// status.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        self.stop_within(self.grace)
    }

    /// [`Process::stop`] with another grace period.
    pub fn stop_within(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.try_wait() {
            return Some(status);
        }
        if !grace.is_zero() {
            let _ = self.signal(libc::SIGTERM);
            if let Some(status) = self.wait_exit(grace) {
                return Some(status);
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use crate::{Launch, Stderr};

    use super::*;

    #[test]
    fn pinned_child_runs_on_its_cpu_and_is_stopped() {
        let mut server = Launch::new("/bin/sh")
            .args([
                "-c",
                "grep Cpus_allowed_list /proc/self/status; echo oops >&2; exec sleep 30",
            ])
            .cpu(Some(0))
            .spawn()
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
        let mut server = Launch::new("/bin/sh")
            .args(["-c", "echo 'cannot bind: address in use' >&2; exit 3"])
            .spawn()
            .unwrap();
        let error = server
            .wait_for_line("listening on ", Duration::from_secs(10))
            .unwrap_err()
            .to_string();
        assert!(error.contains("exited before it was ready"), "{error}");
        assert!(error.contains("address in use"), "{error}");
    }

    #[test]
    fn a_failing_run_names_its_command_and_status() {
        let mut run = Launch::new("/bin/sh")
            .args(["-c", "echo nope >&2; exit 2", "--no-such-flag"])
            .spawn()
            .unwrap();
        let error = run.finish(Duration::from_secs(10)).unwrap_err().to_string();
        assert!(error.contains("failed"), "{error}");
        assert!(error.contains("--no-such-flag"), "{error}");
        assert!(error.contains("nope"), "{error}");
    }

    #[test]
    fn a_run_over_its_bound_is_stopped() {
        let mut run = Launch::new("sleep")
            .arg("30")
            .stop_grace(Duration::ZERO)
            .spawn()
            .unwrap();
        let error = run.finish(Duration::from_millis(100)).unwrap_err();
        assert!(matches!(error.failure(), Some(Failure::TimedOut { .. })));
        assert!(!run.is_running());
    }

    #[test]
    fn a_shell_launch_is_described_by_its_command_line_and_keeps_no_stderr_when_told() {
        let mut child = Launch::shell("sh -c 'echo ready; exec sleep 30'")
            .stderr(Stderr::Null)
            .spawn()
            .unwrap();
        assert_eq!(child.command(), "sh -c 'echo ready; exec sleep 30'");
        assert_eq!(
            child
                .wait_for_line("ready", Duration::from_secs(10))
                .unwrap(),
            ""
        );
        let pid = child.pid();
        drop(child);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
