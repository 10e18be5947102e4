//! `--data-path sockmap` for CONNECT tunnels: after the `200`, the tunnel's two sockets
//! are handed to the kernel (a BPF sockmap, `coldwire_io::sockmap`), which forwards each
//! side's bytes out of the other without waking the worker. The worker keeps owning both
//! connections (the driver lends their sockets, [`coldwire_io::Splice::lend_socket`]) and
//! keeps one receive armed on each, which never returns bytes (the program takes them
//! all) but reports an end of stream or an error.
//!
//! Steps and invariants:
//! - start-up ([`sockmap_refusal`]): the kernel and privileges are probed once; a refusal,
//!   `--io uring` (its multishot receive could take bytes out of a socket before or after
//!   insertion), or `COLDWIRE_SOCKMAP_REFUSE=1` (a switch for tests) turns tunnels to the
//!   splice path with one warning; each such tunnel counts as a fallback;
//! - insertion happens once the `200` and any early client bytes are written and no
//!   receive is armed (a side that has already ended its stream by then cannot enter a
//!   sockmap — the kernel takes established sockets only — and the tunnel is spliced
//!   instead, counted as a fallback); the pair is inserted in place
//!   ([`coldwire_io::sockmap::Sockmap::insert_pair_in_place`]): bytes already queued, or
//!   arriving meanwhile, are forwarded by the kernel in order after a re-check of both
//!   queues — the worker writes no payload itself, so nothing can overtake; except when
//!   an end of stream arrives while the pair is half inserted: the program hands that
//!   side's bytes up (its peer is not in the map yet) and the worker writes them to the
//!   peer, provably in order (`kernel_tunnel_passed`);
//! - end of stream: the kernel does not forward a FIN. A side's receive returns 0; the
//!   worker waits until the peer socket has been given every byte redirected to it
//!   (`delivered`, polled once per loop turn, at most 1 ms apart while a tunnel waits),
//!   then shuts the peer's write side; both directions done → the pair leaves the map,
//!   then both connections close;
//! - an error or reset on either side, an idle timeout or shutdown: the pair leaves the
//!   map before either connection closes. A dying process closes its sockets, which
//!   unlinks them from the map: neither far end is left hanging.

use std::time::Duration;

use coldwire_io::sockmap::{self, Sockmap, SplicedPair};
use coldwire_io::{Backend, Buffer, Chunk, ConnectionId, Driver, Flush, Splice};

use super::config::{DataPath, ProxyConfig};
use super::state::{Client, ClientState, Peer};
use super::worker::{Step, Worker};

/// The environment variable that makes the start-up probe refuse the sockmap, so the
/// fallback can be tested on a machine where it works.
pub const REFUSE_VARIABLE: &str = "COLDWIRE_SOCKMAP_REFUSE";

/// The environment variable (milliseconds) that pauses each insertion between a pair's
/// two sockets, so tests can make an end of stream arrive while a pair is half inserted.
pub const INSERT_PAUSE_VARIABLE: &str = "COLDWIRE_SOCKMAP_INSERT_PAUSE_MS";

/// How often a tunnel waiting to pass an end of stream on looks at its peer again.
const END_POLL: Duration = Duration::from_millis(1);

/// Why `--data-path sockmap` cannot be used with this configuration here, if it cannot.
pub fn sockmap_refusal(config: &ProxyConfig) -> Option<String> {
    if config.data_path != DataPath::Sockmap {
        return None;
    }
    if config.runtime.backend == Backend::Uring {
        return Some(
            "--io uring: io_uring's multishot receive could take bytes out of a socket before \
             or after it is handed to the kernel, so the sockmap is refused on this backend by \
             design (use --io epoll, poll, select or uring-poll for it)"
                .to_owned(),
        );
    }
    if std::env::var(REFUSE_VARIABLE).is_ok_and(|value| value == "1") {
        return Some(format!(
            "{REFUSE_VARIABLE}=1 is set (the switch that forces this refusal for tests)"
        ));
    }
    sockmap::probe().err().map(|error| error.to_string())
}

/// The warning printed once when [`sockmap_refusal`] gives a reason.
pub fn refusal_warning(reason: &str) -> String {
    format!(
        "coldwire proxy: --data-path sockmap refused: {reason}; CONNECT tunnels take the \
         splice path instead (response bodies are spliced as with --data-path splice)"
    )
}

/// A worker's sockmap and the tunnels waiting to pass an end of stream on.
#[derive(Default)]
pub(super) struct KernelTunnels {
    /// Created at the first tunnel; `Some(None)` once creating it failed (not retried).
    sockmap: Option<Option<Sockmap>>,
    /// Clients whose tunnel has a side that ended and waits for its bytes to be delivered.
    waiting: Vec<ConnectionId>,
}

impl KernelTunnels {
    /// The loop's wait, shortened while a tunnel waits to pass an end of stream on.
    pub(super) fn wait_timeout(&self, timeout: Option<Duration>) -> Option<Duration> {
        if self.waiting.is_empty() {
            timeout
        } else {
            Some(timeout.map_or(END_POLL, |timeout| timeout.min(END_POLL)))
        }
    }

    fn remove(&self, pair: &SplicedPair) {
        if let Some(Some(sockmap)) = &self.sockmap {
            sockmap.remove_pair(pair);
        }
    }
}

impl<D: Driver> Worker<D> {
    /// Hands an established tunnel's two sockets to the kernel; `None` when the data path
    /// is not sockmap, or it falls back (counted), in which case nothing was changed.
    pub(super) fn kernel_splice_tunnel(
        &mut self,
        client: ConnectionId,
        origin: ConnectionId,
    ) -> Option<SplicedPair> {
        if self.config.data_path != DataPath::Sockmap {
            return None;
        }
        let pair = self.insert_kernel_pair(client, origin);
        match pair {
            Some(_) => {
                self.http.tunnels_sockmap += 1;
                // Receives that only ever report the end of stream or an error.
                self.driver.recv_eager(client);
                self.driver.recv_eager(origin);
            }
            None => self.http.sockmap_fallbacks += 1,
        }
        pair
    }

    fn insert_kernel_pair(
        &mut self,
        client: ConnectionId,
        origin: ConnectionId,
    ) -> Option<SplicedPair> {
        if self.config.sockmap_refused {
            return None;
        }
        let sockets = {
            let splicer = self.driver.splicer().ok()?;
            [
                splicer.lend_socket(client).ok()?,
                splicer.lend_socket(origin).ok()?,
            ]
        };
        if self.kernel.sockmap.is_none() {
            let capacity = u32::try_from(self.config.runtime.max_connections)
                .unwrap_or(u32::MAX)
                .max(2);
            let mut created = Sockmap::new(capacity);
            if let (Ok(sockmap), Some(milliseconds)) = (
                &mut created,
                std::env::var(INSERT_PAUSE_VARIABLE)
                    .ok()
                    .and_then(|value| value.parse::<u64>().ok()),
            ) {
                sockmap.pause_between_insertions(Duration::from_millis(milliseconds));
            }
            if let Err(error) = &created {
                self.error_log.log(
                    crate::error_log::Level::Warn,
                    "sockmap",
                    format_args!("{error}; this worker's tunnels take the splice path"),
                );
            }
            self.kernel.sockmap = Some(created.ok());
        }
        let sockmap = self.kernel.sockmap.as_ref()?.as_ref()?;
        match sockmap.insert_pair_in_place(sockets) {
            Ok(pair) => Some(pair),
            Err(error) => {
                // Typically a side that already ended its stream: a socket past
                // ESTABLISHED cannot enter a sockmap (EOPNOTSUPP).
                self.error_log.log(
                    crate::error_log::Level::Debug,
                    "sockmap",
                    format_args!(
                        "a tunnel's pair could not be inserted ({error}); it is spliced instead"
                    ),
                );
                None
            }
        }
    }

    /// One side of a kernel-spliced tunnel ended (side 0: the client's direction, 1: the
    /// origin's): pass the end of stream on once its bytes are delivered.
    pub(super) fn kernel_tunnel_side_ended(&mut self, client: &mut Client, side: usize) -> Step {
        if let Some(tunnel) = client.state.tunnel_mut() {
            tunnel.ending[side] = true;
        }
        self.pass_kernel_ends(client)
    }

    /// Bytes a kernel-spliced side handed to user space (side 0: the client's, 1: the
    /// origin's). The program passes bytes up when their peer is not in the map: with the
    /// low-water mark that holds bytes back during insertion, only an end of stream that
    /// arrives while the pair is half inserted does that, and it hands up everything that
    /// side will ever send — nothing was redirected before it and nothing follows. Closing
    /// the tunnel then would lose them (seen under load: a client's whole request and its
    /// end of stream, the tunnel closed with nothing delivered). They are written to the
    /// peer instead, in order as long as the kernel has redirected nothing from that side
    /// until they are all in the peer socket (checked before and after); otherwise, or if
    /// they do not fit in the peer socket at once, the tunnel closes as before.
    pub(super) fn kernel_tunnel_passed(
        &mut self,
        client: &mut Client,
        side: usize,
        buffer: Buffer,
    ) -> Step {
        let client_id = client.session.id;
        let length = buffer.filled().len() as u64;
        let Some(tunnel) = client.state.tunnel_mut() else {
            self.driver.recycle(buffer);
            return Step::Close;
        };
        let (Some(pair), Some(origin_id)) = (tunnel.kernel, tunnel.origin) else {
            self.driver.recycle(buffer);
            return Step::Close;
        };
        let (source, peer) = if side == 0 {
            (client_id, origin_id)
        } else {
            (origin_id, client_id)
        };
        let nothing_redirected = |kernel: &KernelTunnels| match &kernel.sockmap {
            Some(Some(sockmap)) => sockmap
                .redirected(&pair, side)
                .is_ok_and(|bytes| bytes == 0),
            _ => false,
        };
        if !nothing_redirected(&self.kernel) {
            // Bytes here could overtake (or be overtaken by) bytes the kernel moved.
            self.driver.recycle(buffer);
            return Step::Close;
        }
        let mut bytes = self.driver.take_vec();
        bytes.extend_from_slice(buffer.filled());
        self.driver.recycle(buffer);
        self.driver.send(peer, Chunk::Owned(bytes));
        if !matches!(self.driver.flush(peer), Flush::Done) || !nothing_redirected(&self.kernel) {
            return Step::Close;
        }
        tunnel.passed[side] += length;
        // Its end of stream (or more passed bytes) comes next.
        self.driver.recv_eager(source);
        Step::Keep
    }

    /// Passes on each ended side whose bytes have all been delivered; closes the tunnel
    /// once both directions are done; otherwise looks again at the next loop turn.
    fn pass_kernel_ends(&mut self, client: &mut Client) -> Step {
        let client_id = client.session.id;
        let Some(tunnel) = client.state.tunnel_mut() else {
            return Step::Close;
        };
        let (Some(pair), Some(origin_id)) = (tunnel.kernel, tunnel.origin) else {
            return Step::Close;
        };
        for side in 0..2 {
            if !tunnel.ending[side] {
                continue;
            }
            let peer = if side == 0 { origin_id } else { client_id };
            let delivered = match (self.driver.splicer(), &self.kernel.sockmap) {
                (Ok(splicer), Some(Some(sockmap))) => splicer
                    .lend_socket(peer)
                    .and_then(|socket| sockmap.delivered(&pair, side, socket, tunnel.passed[side])),
                _ => return Step::Close,
            };
            match delivered {
                Ok(true) => {
                    tunnel.ending[side] = false;
                    if side == 0 {
                        tunnel.client_done = true;
                    } else {
                        tunnel.origin_done = true;
                    }
                    self.driver.shutdown_write(peer);
                }
                Ok(false) => {}
                Err(_) => return Step::Close,
            }
        }
        if tunnel.client_done && tunnel.origin_done {
            return Step::Close;
        }
        if tunnel.ending.iter().any(|ending| *ending) && !self.kernel.waiting.contains(&client_id) {
            self.kernel.waiting.push(client_id);
        }
        Step::Keep
    }

    /// Once per loop turn: the tunnels waiting to pass an end of stream on look again.
    pub(super) fn poll_kernel_ends(&mut self) {
        if self.kernel.waiting.is_empty() {
            return;
        }
        for client_id in std::mem::take(&mut self.kernel.waiting) {
            let Some(mut client) = self.take_client(client_id) else {
                continue;
            };
            let step = self.pass_kernel_ends(&mut client);
            self.put_client(client, step);
        }
    }

    /// Takes the client's pair out of the map (before either connection closes).
    pub(super) fn release_kernel_tunnel(&mut self, client: &mut Client) {
        if let ClientState::Tunnel(tunnel) = &mut client.state
            && let Some(pair) = tunnel.kernel.take()
        {
            self.kernel.remove(&pair);
        }
    }

    /// The tunnel of `client_id`, if kernel-spliced, leaves the map (an origin that failed
    /// is about to be closed).
    pub(super) fn release_kernel_tunnel_of(&mut self, client_id: ConnectionId) {
        if let Some(mut client) = self.take_client(client_id) {
            self.release_kernel_tunnel(&mut client);
            self.put_client(client, Step::Keep);
        }
    }

    /// Shutdown: every pair leaves the map before any connection closes.
    pub(super) fn release_all_kernel_tunnels(&mut self) {
        let pairs: Vec<SplicedPair> = self
            .peers
            .iter_mut()
            .flatten()
            .filter_map(|peer| match peer {
                Peer::Client(client) => client.state.tunnel_mut()?.kernel.take(),
                Peer::Origin(_) => None,
            })
            .collect();
        for pair in &pairs {
            self.kernel.remove(pair);
        }
    }

    /// Bytes the kernel has moved through a kernel-spliced tunnel, both ways (wrapping),
    /// for its idle timeout; `None` when it is not kernel-spliced.
    pub(super) fn kernel_tunnel_bytes(&self, client: &Client) -> Option<u64> {
        let ClientState::Tunnel(tunnel) = &client.state else {
            return None;
        };
        let pair = tunnel.kernel?;
        let Some(Some(sockmap)) = &self.kernel.sockmap else {
            return Some(0);
        };
        let moved = (0..2)
            .map(|side| sockmap.redirected(&pair, side).unwrap_or(0))
            .fold(0u64, u64::wrapping_add);
        Some(moved)
    }
}
