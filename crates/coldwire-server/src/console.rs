//! Lines for a person or a calling script on stdout and stderr that can never take the
//! process down: [`out`] and [`err`] ignore write errors (a closed pipe — `coldwire serve
//! 2>&1 | head -2` — gives `EPIPE`, which `println!`/`eprintln!` turn into a panic, and a
//! panicking signal thread leaves the server deaf to SIGTERM).
//!
//! Invariants: nothing here panics or blocks on a reader that went away (SIGPIPE is
//! ignored process-wide by [`crate::system::block_termination_signals`], so a write to a
//! closed pipe returns `EPIPE` instead of killing the process); stdout is flushed after
//! every line, so a script reading the address line sees it at once.

use std::fmt::Arguments;
use std::io::Write;

/// Writes one line to stdout and flushes it; errors are ignored.
pub fn out(line: Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(format!("{line}\n").as_bytes());
    let _ = stdout.flush();
}

/// Writes one line to stderr (in one write, so lines of processes sharing the terminal or
/// file do not interleave); errors are ignored.
pub fn err(line: Arguments<'_>) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// `println!` that never panics: one line to stdout through [`out`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::console::out(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: one line to stderr through [`err`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::console::err(format_args!($($arg)*))
    };
}
