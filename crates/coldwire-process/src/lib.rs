//! coldwire's process runner: the one place where the bench, the experiments and the
//! end-to-end tests start, watch and stop child processes (servers under test, peers such
//! as nginx, `coldwire bench` itself).
//!
//! * [`Launch`] describes a child: program and arguments (or a shell command line run as
//!   `sh -c 'exec …'`), environment, an optional CPU to pin it to (`sched_setaffinity`
//!   before `exec`, so every thread it starts stays there), where its stdout and stderr go,
//!   and how long it gets between SIGTERM and SIGKILL when stopped.
//! * [`Process`] is the running child: wait for a ready line (`listening on http://ADDR`)
//!   or for its port to accept, read the tail of its stderr for error messages, send it
//!   signals, run it to completion with a time bound, stop it.
//!
//! Invariants: every child gets SIGINT, SIGTERM and SIGQUIT unblocked and SIGPIPE at its
//! default (coldwire blocks the first three and ignores the last in its own threads, and a child
//! would inherit that); a child never outlives its [`Process`]: dropping the handle stops
//! it (SIGTERM, the grace period, SIGKILL) and reaps it.
//!
//! ```no_run
//! # use std::time::Duration;
//! # use coldwire_process::Launch;
//! # fn demo() -> Result<(), coldwire_process::ProcessError> {
//! let mut server = Launch::new("target/release/coldwire")
//!     .args(["serve", "--root", "www", "--listen", "127.0.0.1:0"])
//!     .cpu(Some(0))
//!     .spawn()?;
//! let address = server.wait_for_line("listening on http://", Duration::from_secs(10))?;
//! println!("{} serves on {address}", server.pid());
//! server.stop();
//! # Ok(()) }
//! ```

mod error;
mod launch;
mod output;
mod process;

pub use error::{Failure, ProcessError};
pub use launch::{DEFAULT_STOP_GRACE, Launch, STDERR_LINES, Stderr, Stdout};
pub use process::Process;
