//! Memory kept for reuse, so that a keep-alive connection's steady state allocates nothing
//! and an idle connection owns nothing: receive buffers ([`buffer_pool`]), the pipes
//! `splice(2)` moves data through ([`pipe_pool`]), and output vectors and queues
//! (`output_pools`). Each pool is bounded; what it would not keep is freed.

pub mod buffer_pool;
pub(crate) mod output_pools;
pub mod pipe_pool;
