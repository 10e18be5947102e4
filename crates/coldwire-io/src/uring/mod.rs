//! io_uring support: the ring as one loop drives it ([`ring`]), the probe that says
//! whether io_uring is usable here ([`mod@probe`]), and the completion driver
//! [`UringDriver`] ([`driver`], [`api`]) with its provided-buffer ring ([`buffers`]),
//! per-connection state ([`connection`]), sends ([`output`]) and socket-to-socket
//! transfers ([`mod@splice`]). The readiness-only
//! backend, `uring-poll`, is [`crate::poller::uring_poll`].

mod accept;
pub mod api;
pub mod buffers;
mod close;
pub mod connection;
pub mod driver;
mod file;
pub mod output;
pub mod probe;
mod receive;
pub mod ring;
mod send;
pub mod splice;

pub use driver::{INLINE_OPERATIONS, RingSizes, UringDriver, UringOptions};
pub use probe::{Needs, probe};
pub use ring::{Ring, RingCounters, RingOptions};
