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

fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it spawns later, and
/// ignores SIGPIPE (writes to closed sockets report `EPIPE` instead). Call first in `main`.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_signals();
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let result = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    // SAFETY: installing SIG_IGN for SIGPIPE has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    Ok(())
}

/// Waits (blocking) for SIGINT or SIGTERM, which must have been blocked with
/// [`block_termination_signals`]; returns the signal number.
pub fn wait_for_termination_signal() -> io::Result<i32> {
    let set = termination_signals();
    let mut signal = 0;
    // SAFETY: `set` is initialised and `signal` is a valid out-pointer.
    let result = unsafe { libc::sigwait(&set, &mut signal) };
    if result != 0 {
        return Err(io::Error::from_raw_os_error(result));
    }
    Ok(signal)
}

/// Starts the thread that waits for SIGINT/SIGTERM (blocked beforehand with
/// [`block_termination_signals`]), says so on stderr as `PROGRAM: signal N, MESSAGE`, and
/// calls `stop` once.
pub fn stop_on_termination_signal(
    program: &'static str,
    message: &'static str,
    stop: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("coldwire-signals".into())
        .spawn(move || {
            if let Ok(signal) = wait_for_termination_signal() {
                eprintln!("{program}: signal {signal}, {message}");
                stop();
            }
        })
        .map(drop)
}
