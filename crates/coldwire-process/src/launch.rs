//! [`Launch`]: what to start and how — program and arguments (or a shell command line),
//! environment, CPU pinning, where stdout and stderr go, and the stop grace period.
//! `spawn` turns it into a running [`Process`].

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::ProcessError;
use crate::output::{Tail, lines};
use crate::process::Process;

/// Lines of a child's stderr kept for error messages by default.
pub const STDERR_LINES: usize = 40;

/// How long a stopped child gets between SIGTERM and SIGKILL by default.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);

/// Where a child's stdout goes.
#[derive(Debug)]
pub enum Stdout {
    /// Captured line by line, for [`Process::wait_for_line`] (the default).
    Lines,
    /// Into this process's stderr (a server's chatter next to the generator's own
    /// messages, keeping this process's stdout for results).
    ToStderr,
    /// Into a file.
    File(File),
    /// Inherited from this process.
    Inherit,
    /// Discarded.
    Null,
}

/// Where a child's stderr goes.
#[derive(Debug)]
pub enum Stderr {
    /// Captured; the last this many lines are kept for [`Process::stderr_tail`] and error
    /// messages (the default: [`STDERR_LINES`]).
    Keep(usize),
    /// Inherited from this process (the user sees it as it comes).
    Inherit,
    /// Discarded.
    Null,
    /// A pipe left to the caller ([`Process::take_stderr`]).
    Pipe,
}

/// A caller's last adjustment of the `Command` ([`Launch::configure`]).
type Configure = Box<dyn FnOnce(&mut Command)>;

/// A child process to start: built with [`Launch::new`] or [`Launch::shell`], then
/// [`Launch::spawn`]. Stdin is always `/dev/null`.
pub struct Launch {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cpu: Option<usize>,
    stdout: Stdout,
    stderr: Stderr,
    grace: Duration,
    description: Option<String>,
    configure: Option<Configure>,
}

impl Launch {
    /// `program` with no arguments; stdout captured as lines, the last
    /// [`STDERR_LINES`] of stderr kept, not pinned, [`DEFAULT_STOP_GRACE`] to stop.
    pub fn new(program: impl AsRef<Path>) -> Launch {
        Launch {
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            cpu: None,
            stdout: Stdout::Lines,
            stderr: Stderr::Keep(STDERR_LINES),
            grace: DEFAULT_STOP_GRACE,
            description: None,
            configure: None,
        }
    }

    /// `sh -c 'exec COMMAND_LINE'`: the process id is the command's own (a server that
    /// daemonizes would escape: run it in the foreground, e.g. nginx with
    /// `-g 'daemon off;'`). Described by `command_line` alone.
    pub fn shell(command_line: &str) -> Launch {
        let mut launch = Launch::new("sh")
            .arg("-c")
            .arg(format!("exec {command_line}"));
        launch.description = Some(command_line.to_owned());
        launch
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Launch {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Launch {
        self.args
            .extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable in the child (the rest is inherited).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Pins the child (all its threads) to `cpu` with `sched_setaffinity` before `exec`;
    /// `None` leaves it unpinned (the default).
    pub fn cpu(mut self, cpu: Option<usize>) -> Launch {
        self.cpu = cpu;
        self
    }

    /// Where stdout goes (default: [`Stdout::Lines`]).
    pub fn stdout(mut self, stdout: Stdout) -> Launch {
        self.stdout = stdout;
        self
    }

    /// Where stderr goes (default: [`Stderr::Keep`] of [`STDERR_LINES`]).
    pub fn stderr(mut self, stderr: Stderr) -> Launch {
        self.stderr = stderr;
        self
    }

    /// Time between SIGTERM and SIGKILL when the process is stopped or dropped (default
    /// [`DEFAULT_STOP_GRACE`]); zero sends SIGKILL at once (tests that need no graceful
    /// exit and must not wait for one).
    pub fn stop_grace(mut self, grace: Duration) -> Launch {
        self.grace = grace;
        self
    }

    /// Lets the caller adjust the `Command` last, before it is spawned (e.g. a test's
    /// seccomp filter installed with another `pre_exec`).
    pub fn configure(mut self, configure: impl FnOnce(&mut Command) + 'static) -> Launch {
        self.configure = Some(Box::new(configure));
        self
    }

    /// The command line as it is printed in messages.
    pub fn command_line(&self) -> String {
        if let Some(description) = &self.description {
            return description.clone();
        }
        std::iter::once(self.program.display().to_string())
            .chain(
                self.args
                    .iter()
                    .map(|arg| arg.to_string_lossy().into_owned()),
            )
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Starts the child.
    pub fn spawn(self) -> Result<Process, ProcessError> {
        let command_line = self.command_line();
        let start_error = |source| ProcessError::Start {
            command: command_line.clone(),
            source,
        };
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command.stdin(Stdio::null());
        let capture_lines = matches!(self.stdout, Stdout::Lines);
        command.stdout(match self.stdout {
            Stdout::Lines => Stdio::piped(),
            Stdout::ToStderr => Stdio::from(
                std::io::stderr()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(start_error)?,
            ),
            Stdout::File(file) => Stdio::from(file),
            Stdout::Inherit => Stdio::inherit(),
            Stdout::Null => Stdio::null(),
        });
        let keep = match self.stderr {
            Stderr::Keep(lines) => Some(lines),
            _ => None,
        };
        command.stderr(match self.stderr {
            Stderr::Keep(_) | Stderr::Pipe => Stdio::piped(),
            Stderr::Inherit => Stdio::inherit(),
            Stderr::Null => Stdio::null(),
        });
        prepare_child(&mut command, self.cpu);
        if let Some(configure) = self.configure {
            configure(&mut command);
        }
        let mut child = command.spawn().map_err(start_error)?;
        let stdout = if capture_lines {
            child.stdout.take().map(lines)
        } else {
            None
        };
        let stderr = match keep {
            Some(limit) => child
                .stderr
                .take()
                .map(|reader| Tail::collect(reader, limit)),
            None => None,
        };
        Ok(Process::new(
            child,
            command_line,
            stdout,
            stderr,
            self.grace,
        ))
    }
}

/// Between `fork` and `exec`: the termination signals unblocked, SIGPIPE at its default,
/// and the CPU affinity set.
fn prepare_child(command: &mut Command, cpu: Option<usize>) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (sigemptyset, sigaddset, sigprocmask, signal,
    // sched_setaffinity) on local values; it touches no memory shared with the parent.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGQUIT);
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
}
