//! The shared mechanism: what both driver families (`crate::readiness` over a poller, and
//! `crate::uring`) keep the same way, each piece in its own file —
//!
//! - [`slot_table`]: connection state by dense slot id, lowest free slot first;
//! - `generations`: the per-slot generation behind a [`ConnectionId`](crate::ConnectionId),
//!   so nothing meant for a closed connection reaches the next one in its slot;
//! - [`timer_wheel`]: the hashed timing wheel, and `timers`: each connection's single
//!   timer on it, armed, cancelled and expired the same way by both drivers;
//! - `accept_gate`: when accepting pauses (descriptors exhausted, connection limit) and
//!   when it resumes;
//! - `completions`: the completion queue's rules (stale completions dropped, the wait's
//!   deadline);
//! - `splice_table`: the bookkeeping of socket-to-socket transfers (the moving of bytes is
//!   each driver's own);
//! - [`counters`]: what a loop did, by system call; [`waker`]: waking a loop from another
//!   thread.
//!
//! Nothing here makes a system call of its own except the waker's eventfd.

pub(crate) mod accept_gate;
pub(crate) mod completions;
pub mod counters;
pub(crate) mod generations;
pub mod slot_table;
pub(crate) mod splice_table;
pub mod timer_wheel;
pub(crate) mod timers;
pub mod waker;
