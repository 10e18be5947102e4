//! Process-level set-up: the open-files limit, CPU pinning, and signal handling without
//! async-signal-unsafe code (signals are blocked in every thread and taken synchronously
//! by one dedicated thread with `sigwait`).

use std::io;

/// Raises the soft open-files limit to the hard limit; returns the new soft limit.
pub use coldwire_io::sys::raise_open_files_limit;

/// Pins the calling thread to one CPU (best effort: errors are returned, not fatal).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within its fixed size
    // because we reduce `cpu` modulo CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

/// The signals the dedicated thread takes: SIGINT, SIGTERM and SIGQUIT (nginx's graceful
/// stop, `nginx -s quit`) stop the server, SIGHUP reloads, SIGUSR1 reopens the logs,
/// SIGUSR2 upgrades the binary; all are taken, so that their default action (terminate,
/// or a core dump for SIGQUIT) can never kill the process and lose buffered access-log
/// lines.
fn handled_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGQUIT,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1 and SIGUSR2 in the calling thread and every
/// thread it spawns later, and ignores SIGPIPE (writes to closed sockets and pipes report
/// `EPIPE` instead). Call first in `main`.
pub fn block_termination_signals() -> io::Result<()> {
    let set = handled_signals();
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let result = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    // SAFETY: installing SIG_IGN for SIGPIPE has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    Ok(())
}

/// Waits (blocking) for one of the signals blocked by [`block_termination_signals`];
/// returns the signal number.
pub fn wait_for_signal() -> io::Result<i32> {
    let set = handled_signals();
    let mut signal = 0;
    // SAFETY: `set` is initialised and `signal` is a valid out-pointer.
    let result = unsafe { libc::sigwait(&set, &mut signal) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    Ok(signal)
}

/// True for the signals that ask a process to stop (SIGINT, SIGTERM, SIGQUIT).
pub fn is_termination(signal: i32) -> bool {
    signal == libc::SIGINT || signal == libc::SIGTERM || signal == libc::SIGQUIT
}

/// The conventional name of the signals taken here.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

/// What the signal thread does for a server (see [`take_signals`]).
pub struct SignalActions {
    /// The subcommand, for messages (`coldwire proxy`).
    pub program: &'static str,
    /// What stopping does, for the message (`finishing in-flight responses`).
    pub message: &'static str,
    /// Called once on the first SIGINT, SIGTERM or SIGQUIT.
    pub stop: Box<dyn FnOnce() + Send>,
    /// Called on each SIGHUP (reload the configuration); `None`: the subcommand reloads
    /// nothing, which SIGHUP says.
    pub reload: Option<Box<dyn FnMut() + Send>>,
    /// Called on SIGUSR2 (binary upgrade); `None`: not supported, which SIGUSR2 says.
    pub upgrade: Option<Box<dyn FnMut() + Send>>,
}

/// Starts the thread that takes the signals blocked beforehand with
/// [`block_termination_signals`]: SIGINT, SIGTERM or SIGQUIT tell systemd `STOPPING=1`, say so on
/// stderr as `PROGRAM: SIGTERM (15), MESSAGE` and stop once; SIGUSR1 reopens every log
/// file ([`crate::log_files::reopen_all`]); SIGHUP and SIGUSR2 call `reload` and
/// `upgrade`. It never panics, so it keeps taking signals whatever happens to stderr, and
/// none of these signals can kill the process.
pub fn take_signals(actions: SignalActions) -> io::Result<()> {
    let SignalActions {
        program,
        message,
        stop,
        mut reload,
        mut upgrade,
    } = actions;
    std::thread::Builder::new()
        .name("coldwire-signals".into())
        .spawn(move || {
            let mut stop = Some(stop);
            while let Ok(signal) = wait_for_signal() {
                let name = signal_name(signal);
                match signal {
                    _ if is_termination(signal) => {
                        crate::notify::notify("STOPPING=1");
                        crate::console::err(format_args!("{program}: {name} ({signal}), {message}"));
                        if let Some(stop) = stop.take() {
                            stop();
                        }
                    }
                    libc::SIGUSR1 => reopen_logs(program),
                    libc::SIGHUP => match reload.as_mut() {
                        Some(reload) => reload(),
                        None => crate::console::err(format_args!(
                            "{program}: SIGHUP ({signal}) ignored: nothing reloads live in this \
                             subcommand; restart it to apply a changed configuration"
                        )),
                    },
                    _ => match upgrade.as_mut() {
                        Some(upgrade) => upgrade(),
                        None => crate::console::err(format_args!(
                            "{program}: {name} ({signal}) ignored: no binary upgrade in this subcommand"
                        )),
                    },
                }
            }
        })
        .map(drop)
}

/// SIGUSR1: reopens the log files, saying which (and which could not be: those keep
/// writing where they did).
fn reopen_logs(program: &str) {
    let (reopened, failed) = crate::log_files::reopen_all();
    let names: Vec<String> = reopened
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    crate::console::err(format_args!(
        "{program}: SIGUSR1, reopened {} log file(s){}{}",
        reopened.len(),
        if names.is_empty() { "" } else { ": " },
        names.join(", ")
    ));
    for (path, error) in failed {
        crate::console::err(format_args!(
            "{program}: cannot reopen {}: {error} — it keeps writing to the file it had; check the \
             directory exists and is writable, then send SIGUSR1 again",
            path.display()
        ));
    }
}

/// [`take_signals`] for a server that reloads nothing and has no binary upgrade: SIGINT,
/// SIGTERM and SIGQUIT stop it, SIGUSR1 reopens its logs, SIGHUP and SIGUSR2 are reported.
pub fn stop_on_termination_signal(
    program: &'static str,
    message: &'static str,
    stop: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    take_signals(SignalActions {
        program,
        message,
        stop: Box::new(stop),
        reload: None,
        upgrade: None,
    })
}
