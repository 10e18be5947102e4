//! Unit tests of the proxy worker's state machine, without sockets: a mock driver
//! (`mock_driver.rs`) records what the worker asks for and hands back the completions a
//! test injects; `harness.rs` builds a worker over it; `state_machine.rs` holds the
//! conversations.

mod harness;
mod mock_driver;
mod state_machine;
