//! A seccomp filter that makes `io_uring_setup` fail, as a container runtime's default
//! profile does (Docker and containerd answer `EPERM`; a kernel without io_uring answers
//! `ENOSYS`), applied to a child process only — so tests can check what coldwire does where
//! io_uring is refused without needing such a machine.
//!
//! The filter is a four-instruction classic BPF program: on this architecture, the
//! `io_uring_setup` system call returns the chosen error; everything else is allowed. It is
//! installed between `fork` and `exec` (`PR_SET_NO_NEW_PRIVS`, then `PR_SET_SECCOMP`), so
//! it binds the child and every thread it starts, and never the test process.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// `AUDIT_ARCH_*` of the architecture the test runs on (`linux/audit.h`).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Offsets into `struct seccomp_data`.
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;

fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// The program: `io_uring_setup` → `errno`, anything else → allow.
fn program(errno: i32) -> Vec<libc::sock_filter> {
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    vec![
        statement(load, SECCOMP_DATA_ARCH),
        // Another architecture's system call numbers mean something else: allow.
        jump_if_equal(AUDIT_ARCH, 0, 3),
        statement(load, SECCOMP_DATA_NR),
        jump_if_equal(libc::SYS_io_uring_setup as u32, 0, 1),
        statement(ret, libc::SECCOMP_RET_ERRNO | (errno as u32 & 0xffff)),
        statement(ret, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Makes `command`'s process (and its threads) see `io_uring_setup` fail with `errno`.
pub fn refuse_io_uring(command: &mut Command, errno: i32) -> &mut Command {
    let filter = program(errno);
    let install = move || {
        let fprog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only; it is required for an
        // unprivileged process to install a filter.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fprog` points to `filter.len()` valid instructions that stay alive for
        // the call; the kernel copies the program.
        let installed = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &fprog as *const libc::sock_fprog,
            )
        };
        if installed != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: `install` runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two `prctl` calls and allocates nothing
    // (the program was built before the fork and is only read).
    unsafe { command.pre_exec(install) }
}
