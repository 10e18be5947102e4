//! In-kernel socket splicing with a BPF sockmap: once two TCP sockets are paired, bytes
//! arriving on one are sent out of the other by the kernel, without waking the process.
//!
//! [`Sockmap`] owns two maps and a stream verdict program, loaded with plain `bpf(2)`
//! calls (no compiler, no object file; see `program.rs` for the instructions):
//!
//! - `sockets`, a `BPF_MAP_TYPE_SOCKHASH` keyed by socket cookie, holding the sockets;
//! - `pairs`, a hash map from a socket's cookie to its peer's cookie and a count of the
//!   bytes the program has redirected from it to the peer;
//! - the `BPF_PROG_TYPE_SK_SKB` program, attached to `sockets` as its
//!   `BPF_SK_SKB_STREAM_VERDICT`: it looks the receiving socket up in `pairs`, adds the
//!   segment's length to the count and redirects it out of the peer with
//!   `bpf_sk_redirect_hash`; a socket without a pair gets `SK_PASS` (user space reads it).
//!
//! The traps, and what this module gives the caller to handle them:
//!
//! - bytes already in a receive queue when a socket is inserted are not seen by the
//!   program until more bytes arrive: [`Sockmap::insert_pair_in_place`] re-checks the
//!   queues after insertion ([`recheck_queue`]) so the kernel forwards them in order, and
//!   [`Sockmap::insert_pair`] takes them out first (non-blocking reads) for the caller to
//!   send ahead;
//! - an end of stream runs the program whatever the low-water mark: one that arrives
//!   while a pair is half inserted makes it hand that socket's bytes to user space (the
//!   peer is not in the map yet) — all of them, as nothing follows an end of stream; the
//!   owner must write them to the peer itself, not drop them;
//! - the kernel does not forward end of stream: the caller sees the FIN (a readable
//!   socket whose read returns 0), waits until the peer has written everything redirected
//!   to it ([`Sockmap::delivered`]), then shuts the peer's write side;
//! - entries must go before the sockets close, and a removed pair is back in user space
//!   at once: [`Sockmap::remove_pair`]. Dropping the [`Sockmap`] alone does NOT release
//!   the sockets at once (measured on Linux 6.18: the program keeps the map alive and
//!   bytes are still redirected); remove pairs first. When the process dies its sockets
//!   close, which unlinks them from the map, so neither far end is left hanging (tested).
//!
//! [`BodySockmap`] (`body.rs`) is the other use: a response body of known length handed
//! to the kernel for exactly its remaining bytes, both connections back in user space
//! after it.

mod body;
mod body_program;
mod program;
mod tcp_info;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub use self::body::{BodySockmap, BodyState, BodyTransfer, probe_bodies};
use self::program::{
    BPF_MAP_DELETE_ELEM, BPF_MAP_LOOKUP_ELEM, BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_SOCKHASH,
    BPF_MAP_UPDATE_ELEM, BPF_PROG_ATTACH, BPF_SK_SKB_STREAM_VERDICT, bpf, create_map, load_verdict,
};

/// Why the kernel refused the sockmap data path.
#[derive(Debug, thiserror::Error)]
pub enum SockmapError {
    /// A `bpf(2)` step failed (no privileges, a kernel without sockmap, a verifier refusal).
    #[error(
        "the kernel refused the BPF sockmap ({step}: {source}); run as root or with \
         CAP_BPF and CAP_NET_ADMIN on Linux 5.10 or later, or use --data-path splice"
    )]
    Refused {
        /// The step that failed.
        step: &'static str,
        /// The kernel's error.
        source: io::Error,
    },
}

fn refused(step: &'static str) -> impl FnOnce(io::Error) -> SockmapError {
    move |source| SockmapError::Refused { step, source }
}

/// Checks that this process may splice sockets in the kernel: creates the maps, loads and
/// attaches the program, and frees them again.
pub fn probe() -> Result<(), SockmapError> {
    Sockmap::new(2).map(drop)
}

/// A value of the `pairs` map.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PairValue {
    peer_cookie: u64,
    redirected_bytes: u64,
}

#[repr(C)]
struct MapElement {
    map: u32,
    padding: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct Attach {
    target: u32,
    program: u32,
    attach_type: u32,
    attach_flags: u32,
}

/// Two sockets spliced by the kernel, as [`Sockmap::insert_pair`] left them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplicedPair {
    /// The cookies of the two sockets, in the order given.
    pub cookies: [u64; 2],
    /// Bytes each socket had already written when it was inserted (acknowledged plus
    /// queued), the base of [`Sockmap::delivered`].
    written_before: [u64; 2],
}

/// The maps and the verdict program. Remove pairs before dropping it: see the module doc.
#[derive(Debug)]
pub struct Sockmap {
    sockets: OwnedFd,
    pairs: OwnedFd,
    /// For tests: a pause between a pair's two socket insertions
    /// ([`Sockmap::pause_between_insertions`]).
    insertion_pause: Option<std::time::Duration>,
}

impl Sockmap {
    /// Creates the maps for up to `capacity` sockets (two per pair) and attaches the
    /// program.
    pub fn new(capacity: u32) -> Result<Self, SockmapError> {
        let capacity = capacity.max(2);
        let sockets = create_map(BPF_MAP_TYPE_SOCKHASH, 8, 4, capacity)
            .map_err(refused("creating the SOCKHASH"))?;
        let pairs = create_map(
            BPF_MAP_TYPE_HASH,
            8,
            std::mem::size_of::<PairValue>() as u32,
            capacity,
        )
        .map_err(refused("creating the pairs map"))?;
        let program = load_verdict(pairs.as_raw_fd(), sockets.as_raw_fd())
            .map_err(refused("loading the stream verdict program"))?;
        let mut attach = Attach {
            target: sockets.as_raw_fd() as u32,
            program: program.as_raw_fd() as u32,
            attach_type: BPF_SK_SKB_STREAM_VERDICT,
            attach_flags: 0,
        };
        // The map keeps its own reference to the program: ours goes with `program`.
        bpf(BPF_PROG_ATTACH, &mut attach).map_err(refused("attaching the program"))?;
        Ok(Sockmap {
            sockets,
            pairs,
            insertion_pause: None,
        })
    }

    /// For tests: pauses `pause` between inserting a pair's first socket and its second,
    /// widening the moment a pair is half inserted (an end of stream arriving then makes
    /// the program hand the first socket's bytes to user space; see the module doc).
    pub fn pause_between_insertions(&mut self, pause: std::time::Duration) {
        self.insertion_pause = Some(pause);
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

    /// Splices two established TCP sockets: from now on the kernel sends what arrives on
    /// one out of the other. Returns the pair and what each socket had already received
    /// (read out of its queue before insertion: send `queued[0]` out of `sockets[1]` and
    /// `queued[1]` out of `sockets[0]` yourself). The sockets must be non-blocking.
    pub fn insert_pair(&self, sockets: [RawFd; 2]) -> io::Result<(SplicedPair, [Vec<u8>; 2])> {
        let cookies = [cookie(sockets[0])?, cookie(sockets[1])?];
        let queued = [drain(sockets[0])?, drain(sockets[1])?];
        let written_before = [written(sockets[0])?, written(sockets[1])?];
        let pair = SplicedPair {
            cookies,
            written_before,
        };
        self.insert(&pair, sockets)?;
        Ok((pair, queued))
    }

    /// Splices two established TCP sockets and leaves what they had already received to
    /// the kernel as well: after inserting them, each socket's queue is re-checked
    /// ([`recheck_queue`]), so bytes queued before insertion — or arriving between any
    /// earlier read and the insertion — are forwarded by the program in stream order, ahead
    /// of later ones, with nothing for the caller to write. The usual choice of an owner
    /// that has not read past the point where the splice starts (a proxy's CONNECT tunnel
    /// after its `200`): [`Sockmap::insert_pair`]'s hand-back would have to be written by
    /// the caller while the kernel may already be redirecting newer bytes to the same peer.
    /// The sockets must be non-blocking.
    pub fn insert_pair_in_place(&self, sockets: [RawFd; 2]) -> io::Result<SplicedPair> {
        let cookies = [cookie(sockets[0])?, cookie(sockets[1])?];
        let written_before = [written(sockets[0])?, written(sockets[1])?];
        let pair = SplicedPair {
            cookies,
            written_before,
        };
        // Until both sockets are in the map, arriving bytes must not wake the program: it
        // would redirect them to a peer not in the map yet (the kernel would drop them;
        // the program passes them to user space instead, for the owner to write). A
        // receive low-water mark above anything that can arrive meanwhile holds them in
        // the queue; the re-check below lowers it and hands the queue to the program.
        for socket in sockets {
            set_receive_low_water(socket, libc::c_int::MAX)?;
        }
        let inserted = self.insert(&pair, sockets);
        for socket in sockets {
            if let Err(error) = recheck_queue(socket) {
                self.remove_pair(&pair);
                return Err(error);
            }
        }
        inserted.map(|()| pair)
    }

    /// The map entries of a pair: pairs first (so the program knows the peer as soon as a
    /// socket is in `sockets`), then the sockets. On failure nothing is left inserted.
    fn insert(&self, pair: &SplicedPair, sockets: [RawFd; 2]) -> io::Result<()> {
        let cookies = pair.cookies;
        for side in 0..2 {
            let value = PairValue {
                peer_cookie: cookies[1 - side],
                redirected_bytes: 0,
            };
            let value_pointer = &value as *const PairValue as u64;
            if let Err(error) = self.element(
                BPF_MAP_UPDATE_ELEM,
                self.pairs.as_raw_fd(),
                &cookies[side],
                value_pointer,
            ) {
                self.remove_pair(pair);
                return Err(error);
            }
        }
        for side in 0..2 {
            let descriptor: u32 = sockets[side] as u32;
            let value_pointer = &descriptor as *const u32 as u64;
            if let Err(error) = self.element(
                BPF_MAP_UPDATE_ELEM,
                self.sockets.as_raw_fd(),
                &cookies[side],
                value_pointer,
            ) {
                self.remove_pair(pair);
                return Err(error);
            }
            if side == 0
                && let Some(pause) = self.insertion_pause
            {
                std::thread::sleep(pause);
            }
        }
        Ok(())
    }

    /// Bytes the program has redirected from `pair.cookies[side]` to its peer so far.
    pub fn redirected(&self, pair: &SplicedPair, side: usize) -> io::Result<u64> {
        let mut value = PairValue::default();
        let value_pointer = &mut value as *mut PairValue as u64;
        self.element(
            BPF_MAP_LOOKUP_ELEM,
            self.pairs.as_raw_fd(),
            &pair.cookies[side],
            value_pointer,
        )?;
        Ok(value.redirected_bytes)
    }

    /// Whether everything redirected from side `side` has been written into its peer
    /// `peer_socket` (`extra` counts bytes the caller itself wrote there after insertion,
    /// such as the queued bytes of [`Sockmap::insert_pair`]). Wait for this before shutting
    /// the peer's write side on end of stream: the kernel does not forward the FIN, and
    /// bytes still in the program's backlog would be lost.
    pub fn delivered(
        &self,
        pair: &SplicedPair,
        side: usize,
        peer_socket: RawFd,
        extra: u64,
    ) -> io::Result<bool> {
        let expected = pair.written_before[1 - side] + extra + self.redirected(pair, side)?;
        Ok(written(peer_socket)? >= expected)
    }

    /// Takes the pair out of the kernel's hands: the sockets first (no more redirects),
    /// then the pair entries. Missing entries are not an error.
    pub fn remove_pair(&self, pair: &SplicedPair) {
        for cookie in &pair.cookies {
            let _ = self.element(BPF_MAP_DELETE_ELEM, self.sockets.as_raw_fd(), cookie, 0);
        }
        for cookie in &pair.cookies {
            let _ = self.element(BPF_MAP_DELETE_ELEM, self.pairs.as_raw_fd(), cookie, 0);
        }
    }
}

/// The socket's cookie (`SO_COOKIE`), the key both maps use.
pub fn cookie(socket: RawFd) -> io::Result<u64> {
    let mut value: u64 = 0;
    let mut length = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: `value` is a writable u64 and `length` says so; the kernel writes at most
    // `length` bytes.
    let result = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            &mut value as *mut u64 as *mut libc::c_void,
            &mut length,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Bytes ever written into a TCP socket: acknowledged by the peer plus still queued. Read
/// in that order, so a concurrent acknowledgement can only make it smaller, never larger.
pub fn written(socket: RawFd) -> io::Result<u64> {
    let acked = tcp_info::read_u64(socket, &tcp_info::BYTES_ACKED)?;
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int into `queued`.
    let result = unsafe { libc::ioctl(socket, libc::TIOCOUTQ, &mut queued) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(acked + queued.max(0) as u64)
}

/// Makes the kernel look at a socket's receive queue again: setting `SO_RCVLOWAT` runs
/// the socket's data-ready hook when bytes are queued, which for a socket in the map is
/// the verdict program. Bytes that arrived before the socket was inserted (the program
/// only runs when new data arrives) are forwarded at once instead of waiting for the next
/// segment — a request that was all sent before insertion would otherwise stall.
pub fn recheck_queue(socket: RawFd) -> io::Result<()> {
    set_receive_low_water(socket, 1)
}

/// `SO_RCVLOWAT`: below this many queued bytes TCP does not run the data-ready hook (the
/// kernel caps it at half the largest receive buffer; an end of stream runs it anyway).
fn set_receive_low_water(socket: RawFd, bytes: libc::c_int) -> io::Result<()> {
    // SAFETY: `bytes` is a readable int and the length says so.
    let result = unsafe {
        libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            &bytes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads whatever is in a non-blocking socket's receive queue now.
fn drain(socket: RawFd) -> io::Result<Vec<u8>> {
    let mut queued = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        // SAFETY: `buffer` is writable for its length.
        let result = unsafe {
            libc::recv(
                socket,
                buffer.as_mut_ptr() as *mut libc::c_void,
                buffer.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if result > 0 {
            queued.extend_from_slice(&buffer[..result as usize]);
            continue;
        }
        if result == 0 {
            return Ok(queued);
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::WouldBlock => return Ok(queued),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(error),
        }
    }
}
