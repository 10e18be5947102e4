//! Thin, safe wrappers over the few Linux system calls the drivers make on sockets and
//! files. Each returns `io::Result`, with `EAGAIN` surfacing as `ErrorKind::WouldBlock`
//! (control flow for the caller, not an error) and `EINTR` retried where a retry is always
//! right.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

fn check(result: isize) -> io::Result<usize> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result as usize)
    }
}

fn retry_interrupted(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        match check(call()) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Converts a kernel socket address to a std one; unknown families yield the unspecified
/// IPv4 address (accepted TCP sockets are always IPv4 or IPv6).
fn socket_address(storage: &libc::sockaddr_storage) -> SocketAddr {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large
            // and aligned enough to contain.
            let address = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(address.sin_addr.s_addr));
            SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(address.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let address = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(address.sin6_addr.s6_addr);
            SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(address.sin6_port),
                address.sin6_flowinfo,
                address.sin6_scope_id,
            ))
        }
        _ => SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
    }
}

/// Accepts one connection, non-blocking and close-on-exec, with the peer's address.
pub fn accept(listener: RawFd) -> io::Result<(RawFd, SocketAddr)> {
    let mut storage = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let fd = retry_interrupted(|| {
        // SAFETY: storage and length describe a writable sockaddr_storage; the kernel
        // writes at most `length` bytes.
        unsafe {
            libc::accept4(
                listener,
                storage.as_mut_ptr().cast(),
                &mut length,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ) as isize
        }
    })?;
    // SAFETY: zero-initialised, then possibly filled by the kernel: always initialised.
    let storage = unsafe { storage.assume_init() };
    Ok((fd as RawFd, socket_address(&storage)))
}

/// Starts a non-blocking TCP connection (close-on-exec, `TCP_NODELAY`). Returns the
/// descriptor and whether the connection is already established (loopback often is).
pub fn connect(address: std::net::SocketAddr) -> io::Result<(RawFd, bool)> {
    connect_from(address, None)
}

/// [`connect`] from the local address `source` when given (bound before connecting, its
/// port chosen at connect time with `IP_BIND_ADDRESS_NO_PORT`, so many connections from one
/// address do not run out of ports early): how a load generator gives each of its users an
/// address of its own (any of 127.0.0.0/8 works on loopback without setup).
pub fn connect_from(
    address: std::net::SocketAddr,
    source: Option<std::net::IpAddr>,
) -> io::Result<(RawFd, bool)> {
    use std::os::fd::IntoRawFd;
    let socket = stream_socket(address, source, true)?;
    let established = match socket.connect(&address.into()) {
        Ok(()) => true,
        Err(error) if error.raw_os_error() == Some(libc::EINPROGRESS) => false,
        Err(error) => return Err(error),
    };
    Ok((socket.into_raw_fd(), established))
}

/// A TCP socket for a connection to `address`, not connected yet: close-on-exec,
/// `TCP_NODELAY`, non-blocking if asked, and bound to `source` when given (as
/// [`connect_from`] does). The io_uring driver connects it with an `IORING_OP_CONNECT`.
pub fn stream_socket(
    address: std::net::SocketAddr,
    source: Option<std::net::IpAddr>,
    nonblocking: bool,
) -> io::Result<socket2::Socket> {
    use std::os::fd::AsRawFd;
    let kind = if nonblocking {
        socket2::Type::STREAM.nonblocking()
    } else {
        socket2::Type::STREAM
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        kind.cloexec(),
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_tcp_nodelay(true)?;
    if let Some(source) = source {
        let enable: libc::c_int = 1;
        // SAFETY: the descriptor is ours and open; the option value is a valid int for the
        // call's duration. A kernel without the option refuses it: binding then still works.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&enable as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        socket.bind(&std::net::SocketAddr::new(source, 0).into())?;
    }
    Ok(socket)
}

/// The pending error of a socket (`SO_ERROR`), which also clears it: how a non-blocking
/// connect reports its outcome.
pub fn take_socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut error: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `error` and `length` are valid out-pointers for an int-sized option.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut error as *mut libc::c_int).cast(),
            &mut length,
        )
    } as isize)?;
    Ok((error != 0).then(|| io::Error::from_raw_os_error(error)))
}

/// Receives into `buffer`; `Ok(0)` is end of stream.
pub fn recv(fd: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
    retry_interrupted(|| {
        // SAFETY: the pointer and length describe a writable slice we borrow mutably.
        unsafe { libc::recv(fd, buffer.as_mut_ptr().cast(), buffer.len(), 0) }
    })
}

/// Sends gathered slices in one `sendmsg`, without SIGPIPE; `more` sets `MSG_MORE` (more
/// data follows at once, e.g. a file body after its head).
pub fn send_vectored(fd: RawFd, slices: &[IoSlice<'_>], more: bool) -> io::Result<usize> {
    let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
    retry_interrupted(|| {
        // SAFETY: zeroed msghdr is valid (no name, no control data).
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        // IoSlice is ABI-compatible with iovec on Unix (documented by std).
        message.msg_iov = slices.as_ptr() as *mut libc::iovec;
        message.msg_iovlen = slices.len();
        // SAFETY: msg_iov points to `slices.len()` valid iovecs borrowed for the call; the
        // kernel only reads them.
        unsafe { libc::sendmsg(fd, &message, flags) }
    })
}

/// [`send_vectored`] that never blocks, whatever the socket's mode (`MSG_DONTWAIT`):
/// the io_uring driver's sockets are blocking (io_uring parks its operations on them), and
/// a send tried at once must not park the loop.
pub fn send_vectored_now(fd: RawFd, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    retry_interrupted(|| {
        // SAFETY: zeroed msghdr is valid (no name, no control data).
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        // IoSlice is ABI-compatible with iovec on Unix (documented by std).
        message.msg_iov = slices.as_ptr() as *mut libc::iovec;
        message.msg_iovlen = slices.len();
        // SAFETY: msg_iov points to `slices.len()` valid iovecs borrowed for the call; the
        // kernel only reads them.
        unsafe { libc::sendmsg(fd, &message, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) }
    })
}

/// [`recv`] that never blocks, whatever the socket's mode (`MSG_DONTWAIT`; see
/// [`send_vectored_now`]).
pub fn recv_now(fd: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
    retry_interrupted(|| {
        // SAFETY: the pointer and length describe a writable slice we borrow mutably.
        unsafe {
            libc::recv(
                fd,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                libc::MSG_DONTWAIT,
            )
        }
    })
}

/// Sends `count` bytes of `file` from `offset` to the socket `fd` (advancing `offset`).
pub fn sendfile(fd: RawFd, file: RawFd, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut kernel_offset = *offset as libc::off_t;
    let sent = retry_interrupted(|| {
        // SAFETY: `kernel_offset` is a valid off_t the kernel updates; both descriptors are
        // owned by the caller for the duration of the call.
        unsafe { libc::sendfile(fd, file, &mut kernel_offset, count) }
    })?;
    *offset = kernel_offset as u64;
    Ok(sent)
}

/// The socket's `struct tcp_info` and how many bytes of it the kernel filled (older
/// kernels fill less than the struct holds: check the field's end against the length).
pub fn tcp_info(fd: RawFd) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut length = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `length` bytes into `info`, which is that large,
    // and stores the length it wrote.
    let result = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut length,
        )
    };
    check(result as isize)?;
    Ok((info, length as usize))
}

/// `TCP_LISTEN` in the kernel's `include/net/tcp_states.h` (libc has no constant for it).
const TCP_LISTEN: u8 = 10;

/// The most connections a listening socket's accept queue holds (its `listen(2)` backlog
/// as the kernel clamped it to `net.core.somaxconn`: `TCP_INFO`'s `tcpi_sacked` on a
/// listener), or `None` when the kernel does not say.
pub fn listen_queue_limit(listener: RawFd) -> Option<usize> {
    let (info, length) = tcp_info(listener).ok()?;
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_sacked) + size_of::<u32>();
    // The queue holds one more than the backlog (the kernel's full test is `>`).
    (length >= needed && info.tcpi_state == TCP_LISTEN).then_some(info.tcpi_sacked as usize + 1)
}

/// Bytes written to a TCP socket that the peer has not acknowledged yet (`SIOCOUTQ`): what
/// still sits in the kernel's send queue.
pub fn unacknowledged_bytes(fd: RawFd) -> io::Result<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (= SIOCOUTQ) writes one int through the valid pointer we pass.
    check(unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } as isize)?;
    Ok(queued.max(0) as u64)
}

/// Closes a descriptor we own. Errors from close are not actionable (the descriptor is gone
/// either way), so they are ignored.
pub fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and never uses it after this call.
    unsafe { libc::close(fd) };
}

/// Half-closes the sending side (FIN after queued data), for a lingering close.
pub fn shutdown_write(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns.
    check(unsafe { libc::shutdown(fd, libc::SHUT_WR) } as isize).map(drop)
}

/// Shuts both directions down (FIN after queued data; pending and later receives see the
/// end of stream): how the io_uring driver ends a closing connection's armed receive.
pub fn shutdown_both(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor the caller owns.
    check(unsafe { libc::shutdown(fd, libc::SHUT_RDWR) } as isize).map(drop)
}

/// Creates a non-blocking, close-on-exec eventfd.
pub fn eventfd() -> io::Result<RawFd> {
    // SAFETY: no memory arguments.
    check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) } as isize)
        .map(|fd| fd as RawFd)
}

/// Adds one to an eventfd counter (wakes its poller).
pub fn eventfd_signal(fd: RawFd) -> io::Result<()> {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live local array.
    check(unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) }).map(drop)
}

/// Resets an eventfd counter (ignores `EAGAIN`: nothing to drain).
pub fn eventfd_drain(fd: RawFd) {
    let mut value = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live local array.
    unsafe { libc::read(fd, value.as_mut_ptr().cast(), value.len()) };
}

/// Raises the soft open-files limit (`RLIMIT_NOFILE`) to the hard one and returns the soft
/// limit now in force (children inherit it). Servers, load generators and experiments all
/// size themselves to it.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for the kernel to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is the valid rlimit read above, soft raised to hard.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

/// The hard open-files limit (`RLIMIT_NOFILE`): the most the soft limit can be raised to.
pub fn hard_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for the kernel to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit.rlim_max)
}

/// `cachestat(2)`'s number: Linux 6.5 added it to the table every architecture shares
/// (the libc crate does not name it on every target yet).
const SYS_CACHESTAT: libc::c_long = 451;

/// `struct cachestat_range` (`linux/mman.h`).
#[repr(C)]
struct CachestatRange {
    offset: u64,
    length: u64,
}

/// `struct cachestat` (`linux/mman.h`); only `nr_cache` is read.
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Pages of `file` overlapping `[offset, offset + length)` that are in the page cache
/// (`cachestat(2)`, Linux 6.5+; `ENOSYS` before, `EPERM` under a filter that does not know
/// it). `length` must not be zero (zero means "to the end of the file" to the kernel).
pub fn cached_pages(file: RawFd, offset: u64, length: u64) -> io::Result<u64> {
    let range = CachestatRange { offset, length };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers point to live, correctly laid out structs for the duration of
    // the call; the kernel reads `range` and writes `stat`; flags must be zero.
    check(unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file as libc::c_uint,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0 as libc::c_uint,
        )
    } as isize)?;
    Ok(stat.nr_cache)
}

/// The page size (`sysconf(_SC_PAGESIZE)`, 4096 where it cannot be read).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory arguments.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as u64,
        _ => 4096,
    }
}

/// Pages of `file` overlapping `[offset, offset + length)` that are in the page cache,
/// asked with `mincore(2)` on a temporary read-only mapping: the fallback where
/// `cachestat(2)` is missing (three system calls instead of one). The kernel answers for
/// the page cache only when the caller may write the file (its owner, or write
/// permission); otherwise it reports pages as absent, which is the safe answer here.
pub fn cached_pages_by_mincore(file: RawFd, offset: u64, length: u64) -> io::Result<u64> {
    let page = page_size();
    let start = offset - offset % page;
    let span = (offset + length - start) as usize;
    // SAFETY: a fresh shared read-only mapping chosen by the kernel; it is unmapped below
    // and never dereferenced.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file,
            start as libc::off_t,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vector = vec![0u8; span.div_ceil(page as usize)];
    // SAFETY: `address` is the start of a `span`-byte mapping made above; `vector` has one
    // byte per page of it for the kernel to write.
    let result = check(unsafe { libc::mincore(address, span, vector.as_mut_ptr()) } as isize);
    // SAFETY: unmaps exactly the mapping made above, which nothing else refers to.
    unsafe { libc::munmap(address, span) };
    result?;
    Ok(vector.iter().filter(|&&flags| flags & 1 != 0).count() as u64)
}

/// Pages a byte range `[offset, offset + length)` touches.
pub fn pages_spanned(offset: u64, length: u64) -> u64 {
    if length == 0 {
        return 0;
    }
    let page = page_size();
    (offset + length - 1) / page - offset / page + 1
}

/// Tells the kernel `file` is read at random (`POSIX_FADV_RANDOM`): no readahead on its open
/// file description — every read, `sendfile` included, reads just what it asks for.
pub fn advise_random_access(file: RawFd) -> io::Result<()> {
    // SAFETY: advice on a descriptor the caller owns; no memory arguments.
    match unsafe { libc::posix_fadvise(file, 0, 0, libc::POSIX_FADV_RANDOM) } {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(error)),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::os::fd::AsRawFd;

    use socket2::{Domain, Socket, Type};

    use super::listen_queue_limit;

    #[test]
    fn a_listeners_queue_limit_is_its_backlog_plus_one() {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        socket
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        assert_eq!(
            listen_queue_limit(socket.as_raw_fd()),
            None,
            "not listening yet"
        );
        socket.listen(37).unwrap();
        assert_eq!(listen_queue_limit(socket.as_raw_fd()), Some(38));
    }
}
