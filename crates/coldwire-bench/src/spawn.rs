//! Starting and stopping the server under test (`--spawn "CMD"`, and the built-in
//! scenario's `coldwire serve`): the child gets SIGINT/SIGTERM unblocked (coldwire blocks
//! them in its own threads, and a child would inherit the mask), is stopped with SIGTERM,
//! then SIGKILL after a grace period, and never outlives the generator's handle.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::BenchError;

/// A running server started by the generator.
pub struct SpawnedServer {
    child: Child,
    command: String,
    lines: Option<mpsc::Receiver<String>>,
}

fn unblock_termination_signals(command: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // sigemptyset/sigaddset/sigprocmask on a local set, which are async-signal-safe; it
    // touches no memory shared with the parent.
    unsafe {
        command.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
}

impl SpawnedServer {
    /// Runs `command_line` with `sh -c 'exec …'`, so the process id is the server's own
    /// (a server that daemonizes would escape: run it in the foreground, e.g. nginx with
    /// `-g 'daemon off;'`). Its output goes to the generator's stderr.
    pub fn shell(command_line: &str) -> Result<SpawnedServer, BenchError> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("exec {command_line}"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::io::stderr().as_fd_owned()?));
        unblock_termination_signals(&mut command);
        Self::start(command, command_line.to_owned(), false)
    }

    /// Runs `program` with `arguments`, its stdout captured line by line (see
    /// [`SpawnedServer::wait_for_line`]).
    pub fn program(
        program: &std::path::Path,
        arguments: &[String],
    ) -> Result<SpawnedServer, BenchError> {
        let mut command = Command::new(program);
        command
            .args(arguments)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        unblock_termination_signals(&mut command);
        let line = format!("{} {}", program.display(), arguments.join(" "));
        Self::start(command, line, true)
    }

    fn start(
        mut command: Command,
        line: String,
        capture: bool,
    ) -> Result<SpawnedServer, BenchError> {
        let mut child = command.spawn().map_err(|error| BenchError::Spawn {
            command: line.clone(),
            reason: error.to_string(),
        })?;
        let lines = if capture {
            child.stdout.take().map(|stdout| {
                let (sender, receiver) = mpsc::channel();
                std::thread::spawn(move || {
                    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                        if sender.send(line).is_err() {
                            break;
                        }
                    }
                });
                receiver
            })
        } else {
            None
        };
        Ok(SpawnedServer {
            child,
            command: line,
            lines,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Waits (up to `timeout`) for a stdout line starting with `prefix`; returns the rest.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> Result<String, BenchError> {
        let deadline = Instant::now() + timeout;
        let fail = |reason: String| BenchError::Spawn {
            command: self.command.clone(),
            reason,
        };
        let Some(lines) = &self.lines else {
            return Err(fail("its output is not captured".into()));
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
                    return Err(fail(format!("no `{prefix}` line within {timeout:?}")));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(fail(
                        "it exited before it was ready (see its messages above)".into(),
                    ));
                }
            }
        }
    }

    /// Waits until the server accepts connections on `address` (it exited, or did not
    /// listen within `timeout`: an error saying so).
    pub fn wait_until_accepting(
        &mut self,
        address: std::net::SocketAddr,
        timeout: Duration,
    ) -> Result<(), BenchError> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                return Err(BenchError::Spawn {
                    command: self.command.clone(),
                    reason: "it exited before accepting connections: check it runs in the \
                             foreground (e.g. nginx -g 'daemon off;') and see its messages above"
                        .into(),
                });
            }
            if std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Spawn {
                    command: self.command.clone(),
                    reason: format!(
                        "nothing accepts connections on {address} after {timeout:?}: check the \
                         command listens where --url (or --proxy) points, or raise --spawn-wait"
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM, waits up to `grace`, then SIGKILL. Returns the exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a pid we own (our unreaped child, so not recycled) and a
        // constant signal; no memory is involved.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for SpawnedServer {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

trait StderrAsFd {
    fn as_fd_owned(&self) -> Result<std::os::fd::OwnedFd, BenchError>;
}

impl StderrAsFd for std::io::Stderr {
    fn as_fd_owned(&self) -> Result<std::os::fd::OwnedFd, BenchError> {
        use std::os::fd::AsFd;
        self.as_fd().try_clone_to_owned().map_err(BenchError::Io)
    }
}
