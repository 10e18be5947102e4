//! coldwire's I/O layer: the event mechanisms (select, poll, epoll, io_uring) behind one [`Poller`]
//! trait, the completion [`Driver`] the server is written against, and the pieces that
//! keep an idle connection cheap — the lowest-free [`slot_table`], the hashed
//! [`timer_wheel`], the receive [`buffer_pool`] — plus per-loop [`LoopCounters`].
//!
//! Nothing here knows HTTP. The server picks a [`Backend`] at start-up and instantiates
//! `ReadinessDriver<EpollPoller>` (or another) with one `match`, so the hot loop is
//! monomorphised.

pub mod backend;
pub mod buffer_pool;
mod completions;
pub mod counters;
pub mod driver;
pub mod epoll;
mod generations;
mod output_pools;
pub mod pipe_pool;
pub mod poll;
pub mod poller;
pub mod readiness;
pub mod select;
pub mod slot_table;
mod splice_table;
pub mod sys;
pub mod timer_wheel;
pub mod uring;
pub mod uring_poll;
pub mod waker;

pub use backend::Backend;
pub use buffer_pool::{Buffer, BufferPool};
pub use counters::LoopCounters;
pub use driver::{Chunk, Completion, ConnectionId, Driver, DriverConfig, Flush, ListenerId};
pub use epoll::EpollPoller;
pub use poll::PollPoller;
pub use poller::{Event, Interest, Poller, PollerCounters};
pub use readiness::ReadinessDriver;
pub use select::SelectPoller;
pub use uring::{UringDriver, UringOptions};
pub use uring_poll::UringPoller;
pub use waker::Waker;
