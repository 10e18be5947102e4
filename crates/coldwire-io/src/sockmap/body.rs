//! A response body handed to the kernel for exactly its remaining bytes: [`BodySockmap`]
//! sends the next `length` bytes arriving on an upstream socket out of a client socket,
//! and leaves every byte after them in the upstream socket's receive queue, so both
//! connections go back to user space for the next request and response.
//!
//! Maps and programs (see `body_program.rs` for the instructions):
//!
//! - `sources`, a SOCKHASH holding the upstream sockets, with a stream parser and a
//!   stream verdict attached: the parser cuts messages at `min(segment, remaining)` and
//!   stops the socket's parser (`-ESTRPIPE`) once the body is complete, which leaves the
//!   bytes after it queued in TCP, in order; the verdict redirects each message out of
//!   the client socket;
//! - `destinations`, a SOCKHASH holding the client sockets, with no programs: a client's
//!   own receive path (its next, pipelined request) is untouched;
//! - `bodies`, a hash from the upstream socket's cookie to the client's cookie, the bytes
//!   remaining, the last message's length and the bytes redirected.
//!
//! A transfer: [`BodySockmap::start`] (entries, then a kick for bytes already queued),
//! [`BodySockmap::poll`] until it says [`BodyState::Delivered`] (or that it cannot end
//! well), then [`BodySockmap::finish`], after which both sockets are plain sockets again.
//! The caller writes whatever body bytes it already holds before `start`.
//!
//! Nothing wakes the caller when a body is complete (the last segment may be followed by
//! silence: the upstream waits for the next request); poll on a short timer.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::body_program::{BPF_SK_SKB_STREAM_PARSER, load_parser, load_verdict};
use super::program::{
    BPF_MAP_DELETE_ELEM, BPF_MAP_LOOKUP_ELEM, BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_SOCKHASH,
    BPF_MAP_UPDATE_ELEM, BPF_PROG_ATTACH, BPF_SK_SKB_STREAM_VERDICT, bpf, create_map,
};
use super::{
    Attach, MapElement, SockmapError, cookie, refused, set_receive_low_water, tcp_info, written,
};

/// A value of the `bodies` map (the programs read it at these offsets).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct BodyValue {
    peer_cookie: u64,
    remaining: u64,
    pending: u64,
    redirected: u64,
}

/// One body in the kernel's hands ([`BodySockmap::start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTransfer {
    source: RawFd,
    destination: RawFd,
    source_cookie: u64,
    destination_cookie: u64,
    length: u64,
    /// Bytes the client socket had been given before the transfer (the base of delivery).
    written_before: u64,
    /// Bytes the upstream socket had received and user space had read before the transfer.
    consumed_before: u64,
    inserted: bool,
}

impl BodyTransfer {
    /// The body bytes this transfer moves.
    pub fn length(&self) -> u64 {
        self.length
    }
}

/// Where a transfer stands ([`BodySockmap::poll`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyState {
    /// Bytes are still to come or still in the kernel's backlog for the client;
    /// `delivered` bytes are in the client socket so far.
    Running {
        /// Body bytes written into the client socket so far.
        delivered: u64,
    },
    /// Every body byte is in the client socket: [`BodySockmap::finish`] and carry on.
    Delivered,
    /// The upstream ended (end of stream or reset) before the body's end; every byte it
    /// sent is in the client socket. The client's response is truncated: close it.
    Truncated,
    /// The client socket is closed or reset: the rest cannot be delivered.
    DestinationClosed,
}

/// The maps and programs for bodies. Call [`BodySockmap::finish`] for every transfer
/// before dropping it (see the `sockmap` module doc: the attached programs keep the maps
/// alive while sockets are in them).
#[derive(Debug)]
pub struct BodySockmap {
    sources: OwnedFd,
    destinations: OwnedFd,
    bodies: OwnedFd,
}

const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE: u8 = 7;
/// TIME_WAIT, CLOSE_WAIT, LAST_ACK, CLOSING: states after the peer's FIN.
const TCP_FIN_RECEIVED: [u8; 4] = [6, 8, 9, 11];

impl BodySockmap {
    /// Creates the maps for up to `capacity` concurrent bodies and attaches the programs.
    pub fn new(capacity: u32) -> Result<Self, SockmapError> {
        let capacity = capacity.max(1);
        let sources = create_map(BPF_MAP_TYPE_SOCKHASH, 8, 4, capacity)
            .map_err(refused("creating the sources SOCKHASH"))?;
        let destinations = create_map(BPF_MAP_TYPE_SOCKHASH, 8, 4, capacity)
            .map_err(refused("creating the destinations SOCKHASH"))?;
        let bodies = create_map(
            BPF_MAP_TYPE_HASH,
            8,
            std::mem::size_of::<BodyValue>() as u32,
            capacity,
        )
        .map_err(refused("creating the bodies map"))?;
        let parser =
            load_parser(bodies.as_raw_fd()).map_err(refused("loading the stream parser"))?;
        let verdict = load_verdict(bodies.as_raw_fd(), destinations.as_raw_fd())
            .map_err(refused("loading the body verdict program"))?;
        for (program, attach_type, step) in [
            (
                &parser,
                BPF_SK_SKB_STREAM_PARSER,
                "attaching the stream parser",
            ),
            (
                &verdict,
                BPF_SK_SKB_STREAM_VERDICT,
                "attaching the body verdict",
            ),
        ] {
            let mut attach = Attach {
                target: sources.as_raw_fd() as u32,
                program: program.as_raw_fd() as u32,
                attach_type,
                attach_flags: 0,
            };
            // The map keeps its own reference to the program.
            bpf(BPF_PROG_ATTACH, &mut attach).map_err(refused(step))?;
        }
        Ok(BodySockmap {
            sources,
            destinations,
            bodies,
        })
    }

    fn element(&self, command: libc::c_long, map: RawFd, key: &u64, value: u64) -> io::Result<()> {
        let mut attributes = MapElement {
            map: map as u32,
            padding: 0,
            key: key as *const u64 as u64,
            value,
            flags: 0,
        };
        bpf(command, &mut attributes).map(drop)
    }

    /// Hands the next `length` bytes arriving on `source` (non-blocking TCP sockets) to
    /// the kernel, to be sent out of `destination`. Everything the caller already holds
    /// for `destination` must be written into it first. Bytes already queued on `source`
    /// are taken too (the parser is kicked with `SO_RCVLOWAT`). A zero `length` inserts
    /// nothing and is [`BodyState::Delivered`] at once.
    pub fn start(
        &self,
        source: RawFd,
        destination: RawFd,
        length: u64,
    ) -> io::Result<BodyTransfer> {
        let consumed_before = bytes_received(source)?.saturating_sub(queued(source)?);
        let mut transfer = BodyTransfer {
            source,
            destination,
            source_cookie: cookie(source)?,
            destination_cookie: cookie(destination)?,
            length,
            written_before: written(destination)?,
            consumed_before,
            inserted: false,
        };
        if length == 0 {
            return Ok(transfer);
        }
        transfer.inserted = true;
        let value = BodyValue {
            peer_cookie: transfer.destination_cookie,
            remaining: length,
            pending: 0,
            redirected: 0,
        };
        let steps = [
            (
                self.bodies.as_raw_fd(),
                transfer.source_cookie,
                &value as *const BodyValue as u64,
            ),
            (
                self.destinations.as_raw_fd(),
                transfer.destination_cookie,
                &destination as *const RawFd as u64,
            ),
            (
                self.sources.as_raw_fd(),
                transfer.source_cookie,
                &source as *const RawFd as u64,
            ),
        ];
        for (map, key, value) in steps {
            if let Err(error) = self.element(BPF_MAP_UPDATE_ELEM, map, &key, value) {
                self.finish(&transfer);
                return Err(error);
            }
        }
        // Bytes queued before the insertion are seen by the parser only when the socket
        // signals data: setting SO_RCVLOWAT re-checks the queue and signals it now.
        if let Err(error) = set_receive_low_water(source, 1) {
            self.finish(&transfer);
            return Err(error);
        }
        Ok(transfer)
    }

    fn value(&self, transfer: &BodyTransfer) -> io::Result<BodyValue> {
        let mut value = BodyValue::default();
        self.element(
            BPF_MAP_LOOKUP_ELEM,
            self.bodies.as_raw_fd(),
            &transfer.source_cookie,
            &mut value as *mut BodyValue as u64,
        )?;
        Ok(value)
    }

    /// Body bytes written into the client socket so far.
    pub fn delivered(&self, transfer: &BodyTransfer) -> io::Result<u64> {
        let written_now = written(transfer.destination)?;
        Ok(written_now
            .saturating_sub(transfer.written_before)
            .min(transfer.length))
    }

    /// Where the transfer stands (see [`BodyState`]).
    pub fn poll(&self, transfer: &BodyTransfer) -> io::Result<BodyState> {
        if !transfer.inserted {
            return Ok(BodyState::Delivered);
        }
        let value = self.value(transfer)?;
        let delivered = self.delivered(transfer)?;
        if value.remaining == 0 && delivered >= transfer.length {
            return Ok(BodyState::Delivered);
        }
        if tcp_state(transfer.destination)? == TCP_CLOSE {
            return Ok(BodyState::DestinationClosed);
        }
        let source_state = tcp_state(transfer.source)?;
        if value.remaining > 0 && source_state != TCP_ESTABLISHED {
            // The upstream sent its end (a FIN counts one in `tcpi_bytes_received`): the
            // body is short if fewer bytes came than it needs, and reported so once every
            // whole message redirected is written out. (Bytes a parser cut too long holds
            // back — see the doc of the parser — never come out: the body is short anyway.)
            let fin = u64::from(TCP_FIN_RECEIVED.contains(&source_state));
            let received = bytes_received(transfer.source)?
                .saturating_sub(transfer.consumed_before)
                .saturating_sub(fin);
            if received < transfer.length && delivered >= value.redirected {
                return Ok(BodyState::Truncated);
            }
        }
        Ok(BodyState::Running { delivered })
    }

    /// Takes both sockets out of the kernel's hands (sources first: no more parsing),
    /// clears the upstream socket's `ESTRPIPE` mark, and returns any other pending error
    /// of the upstream socket (a reset). Safe to call more than once.
    pub fn finish(&self, transfer: &BodyTransfer) -> Option<io::Error> {
        if !transfer.inserted {
            return None;
        }
        let _ = self.element(
            BPF_MAP_DELETE_ELEM,
            self.sources.as_raw_fd(),
            &transfer.source_cookie,
            0,
        );
        let _ = self.element(
            BPF_MAP_DELETE_ELEM,
            self.destinations.as_raw_fd(),
            &transfer.destination_cookie,
            0,
        );
        let _ = self.element(
            BPF_MAP_DELETE_ELEM,
            self.bodies.as_raw_fd(),
            &transfer.source_cookie,
            0,
        );
        match take_socket_error(transfer.source) {
            Ok(0) | Ok(libc::ESTRPIPE) => None,
            Ok(code) => Some(io::Error::from_raw_os_error(code)),
            Err(error) => Some(error),
        }
    }
}

/// Checks that this process may hand bodies to the kernel: creates the maps, loads and
/// attaches both programs, and frees them again.
pub fn probe_bodies() -> Result<(), SockmapError> {
    BodySockmap::new(1).map(drop)
}

/// The socket's TCP state (`tcpi_state`).
fn tcp_state(socket: RawFd) -> io::Result<u8> {
    Ok(tcp_info::read(socket, &tcp_info::BYTES_RECEIVED)?[0])
}

/// Payload bytes the socket has ever received (`tcpi_bytes_received`).
fn bytes_received(socket: RawFd) -> io::Result<u64> {
    tcp_info::read_u64(socket, &tcp_info::BYTES_RECEIVED)
}

/// Bytes in the socket's receive queue (`SIOCINQ`).
fn queued(socket: RawFd) -> io::Result<u64> {
    let mut count: libc::c_int = 0;
    // SAFETY: FIONREAD (SIOCINQ) writes one int into `count`.
    let result = unsafe { libc::ioctl(socket, libc::FIONREAD, &mut count) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(count.max(0) as u64)
}

/// Reads and clears the socket's pending error (`SO_ERROR`).
fn take_socket_error(socket: RawFd) -> io::Result<i32> {
    let mut code: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_ERROR writes one int into `code`, whose size is given.
    let result = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut code as *mut libc::c_int as *mut libc::c_void,
            &mut length,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(code)
}
