//! coldwire's I/O layer: operations in, completions out. Nothing here knows HTTP.
//!
//! The layers, one folder each, from the bottom:
//!
//! - [`sys`]: thin, safe wrappers over the socket and file system calls;
//! - [`poller`]: the readiness interface [`Poller`] and one file per mechanism (select,
//!   poll, epoll, io_uring's multishot poll);
//! - [`core`]: the mechanism both drivers share — the lowest-free [`core::slot_table`], the
//!   hashed [`core::timer_wheel`], generations, the completion queue, per-loop
//!   [`LoopCounters`], the [`Waker`];
//! - [`pools`]: memory kept for reuse — receive buffers, pipes, output vectors;
//! - [`driver`]: the completion interface the server is written against, [`Driver`], and
//!   its splicing extension [`Splice`];
//! - the two driver families: [`readiness`] ([`ReadinessDriver`] over any poller: try the
//!   system call, wait on `EAGAIN`) and [`uring`] ([`UringDriver`]: operations submitted to
//!   io_uring);
//! - [`sockmap`]: in-kernel splicing of two TCP sockets with a BPF sockmap;
//! - [`backend`]: the list of backends ([`Backend::ALL`]) and the one place that turns a
//!   backend into a driver type ([`Backend::dispatch`]), so the hot loop is monomorphised.

pub mod backend;
pub mod core;
pub mod driver;
pub mod poller;
pub mod pools;
pub mod readiness;
pub mod sockmap;
pub mod sys;
pub mod uring;

pub use crate::backend::{Backend, WithDriver};
pub use crate::core::counters::LoopCounters;
pub use crate::core::slot_table::LowestFreeBitmap;
pub use crate::core::waker::Waker;
pub use crate::driver::{
    Chunk, Completion, ConnectionId, ConnectionLimitReached, Driver, DriverConfig, FileRequest,
    FileWork, Flush, ListenerId, NoSplice, Splice, is_out_of_connections,
};
pub use crate::poller::{
    EpollPoller, Event, Interest, PollPoller, Poller, PollerCounters, SelectPoller, UringPoller,
};
pub use crate::pools::buffer_pool::{Buffer, BufferPool};
pub use crate::readiness::ReadinessDriver;
pub use crate::uring::{UringDriver, UringOptions};
