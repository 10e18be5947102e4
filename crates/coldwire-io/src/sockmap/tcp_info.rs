//! `struct tcp_info` (`getsockopt(TCP_INFO)`) read once for both uses of the sockmap: the
//! bytes a socket has written (acknowledged plus queued, `mod.rs`) and the bytes it has
//! received and its state (`body.rs`). Fields are read by offset from the kernel's layout,
//! which only ever grows at the end; a kernel whose copy stops short of the field wanted
//! is an error that names the field.

use std::io;
use std::os::fd::RawFd;

/// A field of `struct tcp_info`: where it starts and what it is called (for the error).
pub(super) struct Field {
    offset: usize,
    name: &'static str,
}

/// `tcpi_bytes_acked` (Linux 4.1 and later).
pub(super) const BYTES_ACKED: Field = Field {
    offset: 120,
    name: "tcpi_bytes_acked",
};

/// `tcpi_bytes_received` (Linux 4.1 and later).
pub(super) const BYTES_RECEIVED: Field = Field {
    offset: 128,
    name: "tcpi_bytes_received",
};

/// The socket's `struct tcp_info`, failing unless the kernel's copy holds the 8 bytes of
/// `needed` (the first byte is `tcpi_state`).
pub(super) fn read(socket: RawFd, needed: &Field) -> io::Result<[u8; 256]> {
    let mut info = [0u8; 256];
    let mut length = info.len() as libc::socklen_t;
    // SAFETY: `info` is a writable buffer of `length` bytes; the kernel writes at most
    // `length` bytes and updates it.
    let result = unsafe {
        libc::getsockopt(
            socket,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr() as *mut libc::c_void,
            &mut length,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    if (length as usize) < needed.offset + 8 {
        return Err(io::Error::other(format!(
            "tcp_info without {}: Linux 4.1 or later is needed",
            needed.name
        )));
    }
    Ok(info)
}

/// The 64-bit counter `field` of the socket's `struct tcp_info`.
pub(super) fn read_u64(socket: RawFd, field: &Field) -> io::Result<u64> {
    let info = read(socket, field)?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&info[field.offset..field.offset + 8]);
    Ok(u64::from_ne_bytes(bytes))
}
