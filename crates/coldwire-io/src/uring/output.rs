//! Building the io_uring driver's sends: gathered memory chunks go out in one `SENDMSG`
//! (up to `GATHER` slices, `MSG_MORE` when more output follows); a file range goes
//! out in pieces, each a `SPLICE` file → the connection's pooled pipe linked
//! (`IOSQE_IO_LINK`) to a `SPLICE` pipe → socket — the sendfile equivalent: page-cache
//! pages are passed by reference, no byte is copied. Without a pipe (descriptors
//! exhausted) a piece is a `READ` into the send buffer linked to a `SENDMSG` of it.
//!
//! A small send (at most [`WAIT_ALL_LIMIT`] bytes of memory, what a flush may report done
//! at once) carries `MSG_WAITALL`: io_uring then retries a partial send itself and completes
//! once everything is in the socket, so it costs exactly one completion. Larger sends do
//! not: each completes with what the socket took, so the queue shows progress as the peer
//! reads — what the stalled-write timeout measures. A splice to a socket completes only
//! when all of its piece is in the socket (io-wq runs it as a blocking call), so
//! `unsent_bytes` counts the peer's acknowledgements instead ([`bytes_acknowledged`]).
//!
//! io_uring runs `SPLICE` in io-wq worker threads (never inline): a thread hand-off per
//! operation, bought back by the copies saved (`docs/backends.md` has the measurement).

use std::os::fd::AsRawFd;

use io_uring::{opcode, squeue, types};

use super::connection::{Connection, Kind, READ_IN_FLIGHT, SEND_IN_FLIGHT, SendState, user_data};
use crate::driver::Chunk;
use crate::pools::output_pools::GATHER;

/// Sends up to this size wait for all their bytes (`MSG_WAITALL`).
pub const WAIT_ALL_LIMIT: u64 = 64 * 1024;

/// Largest file piece read and sent per loop turn (and the send buffer a connection holds
/// while it sends a file).
pub const FILE_PIECE: usize = 64 * 1024;

/// The submissions that start the next send of `connection` (slot `slot`): one `SENDMSG`,
/// or for a file piece a linked `SPLICE` file → pipe + `SPLICE` pipe → socket (a linked
/// `READ` + `SENDMSG` when the state has no pipe). A piece the socket took only in part is
/// sent on from the pipe (or buffer), not read again. `state` is the connection's send memory;
/// the entries point into it and into the front output chunks, which therefore must stay
/// where they are until the send's completion (the connection keeps them).
pub fn prepare(
    connection: &mut Connection,
    state: &mut SendState,
    slot: usize,
) -> (Option<squeue::Entry>, squeue::Entry) {
    let generation = connection.generation;
    let progress = connection.front_progress;
    state.file_read = None;
    if !matches!(connection.output.front(), Some(Chunk::File { .. })) {
        state.buffered = None;
    }
    let mut read = None;
    let mut gathered = 0;
    let mut requested = 0u64;
    if let Some(Chunk::File {
        file,
        offset,
        length,
    }) = connection.output.front()
    {
        let reusable = state
            .buffered
            .filter(|&(start, length)| start <= progress && progress < start + length);
        let file_fd = types::Fd(file.as_raw_fd());
        if let Some(pipe) = state.pipe.as_ref() {
            let piece = match reusable {
                Some((start, buffered)) => {
                    state.file_read = Some(buffered);
                    start + buffered - progress
                }
                None => {
                    let piece = (length - progress).min(pipe.capacity as u64);
                    state.buffered = None;
                    state.read_start = progress;
                    read = Some(
                        opcode::Splice::new(
                            file_fd,
                            (offset + progress) as i64,
                            types::Fd(pipe.write),
                            -1,
                            piece as u32,
                        )
                        .build()
                        .flags(squeue::Flags::IO_LINK)
                        .user_data(user_data(Kind::Read, slot, generation)),
                    );
                    piece
                }
            };
            requested = piece;
            let more = piece < connection.queued_bytes();
            state.is_file_piece = true;
            state.chunks_in_flight = 1;
            state.requested = requested;
            let send = opcode::Splice::new(
                types::Fd(pipe.read),
                -1,
                types::Fd(connection.fd),
                -1,
                piece as u32,
            )
            .flags(if more { libc::SPLICE_F_MORE } else { 0 })
            .build()
            .user_data(user_data(Kind::Send, slot, generation));
            connection.flags |= SEND_IN_FLIGHT | if read.is_some() { READ_IN_FLIGHT } else { 0 };
            return (read, send);
        }
        if let Some((start, buffered)) = reusable {
            let skip = (progress - start) as usize;
            let piece = (start + buffered - progress) as usize;
            state.iovecs[0] = libc::iovec {
                iov_base: state.file_buffer[skip..].as_mut_ptr().cast(),
                iov_len: piece,
            };
            requested = piece as u64;
            state.file_read = Some(buffered);
        } else {
            let piece = (length - progress).min(FILE_PIECE as u64) as usize;
            if state.file_buffer.len() < FILE_PIECE {
                state.file_buffer.resize(FILE_PIECE, 0);
            }
            state.buffered = None;
            state.read_start = progress;
            read = Some(
                opcode::Read::new(file_fd, state.file_buffer.as_mut_ptr(), piece as u32)
                    .offset(offset + progress)
                    .build()
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(user_data(Kind::Read, slot, generation)),
            );
            state.iovecs[0] = libc::iovec {
                iov_base: state.file_buffer.as_mut_ptr().cast(),
                iov_len: piece,
            };
            requested = piece as u64;
        }
        gathered = 1;
        state.is_file_piece = true;
        state.chunks_in_flight = 1;
    } else {
        let mut skip = progress as usize;
        for chunk in connection.output.iter().take(GATHER) {
            let bytes: &[u8] = match chunk {
                Chunk::Owned(bytes) => bytes,
                Chunk::Shared(bytes) => bytes,
                Chunk::File { .. } => break,
            };
            let rest = &bytes[skip.min(bytes.len())..];
            state.iovecs[gathered] = libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            };
            requested += rest.len() as u64;
            skip = 0;
            gathered += 1;
        }
        state.is_file_piece = false;
        state.chunks_in_flight = gathered;
    }
    let more = if state.is_file_piece {
        requested < connection.queued_bytes()
    } else {
        connection.output.len() > gathered
    };
    state.requested = requested;
    state.message.msg_iov = state.iovecs.as_mut_ptr();
    state.message.msg_iovlen = gathered;
    let wait_all = !state.is_file_piece && requested <= WAIT_ALL_LIMIT;
    let flags = libc::MSG_NOSIGNAL
        | if wait_all { libc::MSG_WAITALL } else { 0 }
        | if more { libc::MSG_MORE } else { 0 };
    let send = opcode::SendMsg::new(types::Fd(connection.fd), &state.message)
        .flags(flags as u32)
        .build()
        .user_data(user_data(Kind::Send, slot, generation));
    connection.flags |= SEND_IN_FLIGHT | if read.is_some() { READ_IN_FLIGHT } else { 0 };
    (read, send)
}

/// Bytes of this connection the peer has acknowledged (`TCP_INFO`'s `tcpi_bytes_acked`,
/// Linux 4.2+), or `None` when the socket does not say.
pub fn bytes_acknowledged(fd: std::os::fd::RawFd) -> Option<u64> {
    let (info, length) = crate::sys::tcp_info(fd).ok()?;
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + size_of::<u64>();
    (length >= needed).then_some(info.tcpi_bytes_acked)
}
