//! Phase 7, body (in the kernel): with `--data-path sockmap`, the rest of a
//! body whose `Content-Length` is at least [`SOCKMAP_BODY_THRESHOLD`] and that is not being
//! stored is handed to the kernel whole
//! (`Splice::splice_in_kernel`, a BPF sockmap with a stream parser): the origin's next
//! `remaining` bytes go out of the client socket without waking the proxy, then both
//! connections are the proxy's again for the next request and response (keep-alive on
//! both sides). Everything else on that data path — chunked bodies, close-delimited ones,
//! bodies being stored, short ones, drivers that do not offer it (io_uring), a kernel that
//! refuses — takes the splice path (`splice.rs`) as with `--data-path splice`.
//!
//! Completion and failure are a pipe splice's (`Sent` / `Failed` on the client), so
//! `splice.rs` finishes both kinds the same way; a truncated body fails the exchange and
//! the client connection is closed, never reused.

use std::io;

use coldwire_http::ResponseFraming;
use coldwire_io::{ConnectionId, Driver, Splice};

use super::config::DataPath;
use super::worker::Worker;

/// The shortest `Content-Length` whose rest is handed to the kernel: below it the sockmap's
/// fixed costs (three map updates and three deletions, the polling of the transfer)
/// outweigh what it saves over a pipe splice (results/2026-11-27-vm/sockmap-bodies/).
pub(super) const SOCKMAP_BODY_THRESHOLD: u64 = 64 * 1024;

impl<D: Driver> Worker<D> {
    /// Starts moving `length` bytes of a body from `origin` to `client`: in the kernel
    /// when the data path is sockmap and the part qualifies (see the module doc), else
    /// (or when that is refused) through a pipe splice.
    pub(super) fn splice_body_part(
        &mut self,
        origin: ConnectionId,
        client: ConnectionId,
        framing: ResponseFraming,
        length: u64,
        keep_copy: bool,
    ) -> io::Result<()> {
        let splicer = self.driver.splicer()?;
        let in_kernel = self.config.data_path == DataPath::Sockmap
            && matches!(framing, ResponseFraming::Length(total) if total >= SOCKMAP_BODY_THRESHOLD)
            && !keep_copy
            && length > 0;
        if in_kernel && splicer.splice_in_kernel(origin, client, length).is_ok() {
            return Ok(());
        }
        splicer.splice(origin, client, length, keep_copy)
    }
}
