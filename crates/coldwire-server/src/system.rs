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

/// The signals the dedicated thread takes: SIGINT and SIGTERM stop the server; SIGHUP,
/// SIGUSR1 and SIGUSR2 are taken too, so that their default action (terminate) can never
/// kill the process and lose buffered access-log lines.
fn handled_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 in the calling thread and every
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

/// True for the signals that ask a process to stop (SIGINT, SIGTERM).
pub fn is_termination(signal: i32) -> bool {
    signal == libc::SIGINT || signal == libc::SIGTERM
}

/// The conventional name of the signals taken here.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

/// Starts the thread that takes the signals blocked beforehand with
/// [`block_termination_signals`]: on SIGINT or SIGTERM it says so on stderr as
/// `PROGRAM: SIGTERM (15), MESSAGE` and calls `stop` once; SIGHUP, SIGUSR1 and SIGUSR2 are
/// reported and otherwise ignored (nothing to reload or reopen yet). It never panics, so it
/// keeps taking signals whatever happens to stderr.
pub fn stop_on_termination_signal(
    program: &'static str,
    message: &'static str,
    stop: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("coldwire-signals".into())
        .spawn(move || {
            let mut stop = Some(stop);
            while let Ok(signal) = wait_for_signal() {
                let name = signal_name(signal);
                if is_termination(signal) {
                    crate::console::err(format_args!("{program}: {name} ({signal}), {message}"));
                    if let Some(stop) = stop.take() {
                        stop();
                    }
                } else {
                    crate::console::err(format_args!(
                        "{program}: {name} ({signal}) ignored: nothing to reload or reopen"
                    ));
                }
            }
        })
        .map(drop)
}
