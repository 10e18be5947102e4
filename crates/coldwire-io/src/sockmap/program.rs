//! The stream verdict program, written as raw BPF instructions so that no compiler is
//! needed on the user's machine, and the two `bpf(2)` calls that create maps and load it.
//!
//! The program, in BPF assembly (`pairs` is a hash map from a socket's cookie to
//! `{ peer_cookie: u64, redirected_bytes: u64 }`, `sockets` the SOCKHASH keyed by cookie):
//!
//! ```text
//!  0: r6 = r1                       ; the __sk_buff
//!  1: call bpf_get_socket_cookie    ; r0 = this socket's cookie
//!  2: *(u64 *)(r10 - 8) = r0
//!  3: r2 = r10
//!  4: r2 += -8
//!  5: r1 = map[pairs] (two slots)
//!  7: call bpf_map_lookup_elem      ; r0 = &pairs[cookie] or NULL
//!  8: if r0 == 0 goto 22            ; not paired (yet, or any more): leave it to user space
//!  9: r1 = *(u32 *)(r6 + 0)         ; skb->len
//! 10: if r1 == 0 goto 24            ; an empty segment (a bare FIN): nothing to forward
//! 11: r7 = r0                       ; the pair's value, kept across the call
//! 12: r8 = r1                       ; the length, too
//! 13: r3 = r0                       ; key: the peer's cookie, the value's first field
//! 14: r2 = map[sockets] (two slots)
//! 16: r1 = r6
//! 17: r4 = 0                        ; egress: send out of the peer socket
//! 18: call bpf_sk_redirect_hash
//! 19: if r0 == 0 goto 22            ; the peer is not in `sockets`: never drop the bytes
//! 20: lock *(u64 *)(r7 + 8) += r8   ; count what is handed to the peer
//! 21: exit                         ; SK_PASS with the redirect set
//! 22: r0 = SK_PASS                  ; user space reads it
//! 23: exit
//! 24: r0 = SK_DROP
//! 25: exit
//! ```
//!
//! A redirect to a peer that is not in `sockets` (a pair half inserted, or half removed)
//! would make the kernel drop the bytes; the program passes them to the receiving socket
//! instead, where its owner can read them (and knows the tunnel is broken) — bytes are
//! never lost silently.
//!
//! Empty segments are dropped rather than redirected: the kernel does not forward an end
//! of stream anyway (the owner of the pair sees it and shuts the peer's write side once
//! everything redirected has been written), and an empty redirect would only queue work.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub(crate) const BPF_MAP_CREATE: libc::c_long = 0;
pub(crate) const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
pub(crate) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(crate) const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
pub(crate) const BPF_PROG_ATTACH: libc::c_long = 8;

pub(crate) const BPF_MAP_TYPE_HASH: u32 = 1;
pub(crate) const BPF_MAP_TYPE_SOCKHASH: u32 = 18;
const BPF_PROG_TYPE_SK_SKB: u32 = 14;
pub(crate) const BPF_SK_SKB_STREAM_VERDICT: u32 = 5;

pub(super) const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
pub(super) const HELPER_GET_SOCKET_COOKIE: i32 = 46;
pub(super) const HELPER_SK_REDIRECT_HASH: i32 = 72;
pub(super) const SK_PASS: i32 = 1;
pub(super) const SK_DROP: i32 = 0;
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One BPF instruction, as the kernel lays it out (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Instruction {
    code: u8,
    registers: u8,
    offset: i16,
    immediate: i32,
}

pub(super) fn instruction(
    code: u8,
    destination: u8,
    source: u8,
    offset: i16,
    immediate: i32,
) -> Instruction {
    Instruction {
        code,
        registers: (source << 4) | (destination & 0x0f),
        offset,
        immediate,
    }
}

/// `r_destination = r_source` (64-bit).
pub(super) fn move_register(destination: u8, source: u8) -> Instruction {
    instruction(0xbf, destination, source, 0, 0)
}

/// `r_destination = immediate` (64-bit).
pub(super) fn move_immediate(destination: u8, immediate: i32) -> Instruction {
    instruction(0xb7, destination, 0, 0, immediate)
}

pub(super) fn call(helper: i32) -> Instruction {
    instruction(0x85, 0, 0, 0, helper)
}

pub(super) fn exit() -> Instruction {
    instruction(0x95, 0, 0, 0, 0)
}

/// `r_destination = map[fd]`: the two-slot load the verifier turns into a map pointer.
pub(super) fn load_map(destination: u8, map: RawFd) -> [Instruction; 2] {
    [
        instruction(0x18, destination, BPF_PSEUDO_MAP_FD, 0, map),
        instruction(0, 0, 0, 0, 0),
    ]
}

/// The verdict program's instructions for the two maps' descriptors.
fn verdict_instructions(pairs: RawFd, sockets: RawFd) -> Vec<Instruction> {
    let mut program = vec![
        move_register(6, 1),
        call(HELPER_GET_SOCKET_COOKIE),
        instruction(0x7b, 10, 0, -8, 0), // *(u64 *)(r10 - 8) = r0
        move_register(2, 10),
        instruction(0x07, 2, 0, 0, -8), // r2 += -8
    ];
    program.extend(load_map(1, pairs));
    program.extend([
        call(HELPER_MAP_LOOKUP_ELEM),
        instruction(0x15, 0, 0, 13, 0), // if r0 == 0 goto +13 (SK_PASS)
        instruction(0x61, 1, 6, 0, 0),  // r1 = *(u32 *)(r6 + 0)
        instruction(0x15, 1, 0, 13, 0), // if r1 == 0 goto +13 (SK_DROP)
        move_register(7, 0),
        move_register(8, 1),
        move_register(3, 0),
    ]);
    program.extend(load_map(2, sockets));
    program.extend([
        move_register(1, 6),
        move_immediate(4, 0),
        call(HELPER_SK_REDIRECT_HASH),
        instruction(0x15, 0, 0, 2, 0), // if r0 == 0 goto +2 (SK_PASS)
        instruction(0xdb, 7, 8, 8, 0), // lock *(u64 *)(r7 + 8) += r8
        exit(),
        move_immediate(0, SK_PASS),
        exit(),
        move_immediate(0, SK_DROP),
        exit(),
    ]);
    program
}

/// `bpf(command, attributes)`; the attributes are a `union bpf_attr` prefix.
pub(crate) fn bpf<T>(command: libc::c_long, attributes: &mut T) -> io::Result<libc::c_long> {
    // A signal (a stop and continue, say) interrupts a program load in the verifier
    // (EAGAIN) or a map step (EINTR); every command here may simply be repeated.
    let mut attempts = 0;
    loop {
        // SAFETY: `attributes` is a live, writable, `repr(C)` prefix of `union bpf_attr` of
        // exactly `size_of::<T>()` bytes; the kernel reads (and for a few commands writes)
        // no more than the size it is given, and zero-fills nothing beyond it.
        let result = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                command,
                attributes as *mut T as *mut libc::c_void,
                std::mem::size_of::<T>() as libc::c_uint,
            )
        };
        if result >= 0 {
            return Ok(result);
        }
        let error = io::Error::last_os_error();
        attempts += 1;
        let interrupted = matches!(error.raw_os_error(), Some(libc::EINTR | libc::EAGAIN));
        if !interrupted || attempts >= 8 {
            return Err(error);
        }
    }
}

fn owned(descriptor: libc::c_long) -> OwnedFd {
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(descriptor as RawFd) }
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

/// Creates a map; its memory is freed with its last descriptor.
pub(crate) fn create_map(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
) -> io::Result<OwnedFd> {
    let mut attributes = MapCreate {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags: 0,
    };
    bpf(BPF_MAP_CREATE, &mut attributes).map(owned)
}

#[repr(C)]
#[derive(Default)]
struct ProgramLoad {
    program_type: u32,
    instruction_count: u32,
    instructions: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buffer: u64,
    kernel_version: u32,
    program_flags: u32,
    program_name: [u8; 16],
    program_interface_index: u32,
    expected_attach_type: u32,
}

/// Loads the verdict program; on refusal the error carries the verifier's log.
pub(crate) fn load_verdict(pairs: RawFd, sockets: RawFd) -> io::Result<OwnedFd> {
    load_sk_skb(
        &verdict_instructions(pairs, sockets),
        BPF_SK_SKB_STREAM_VERDICT,
        b"coldwire_splice",
    )
}

/// Loads a `BPF_PROG_TYPE_SK_SKB` program for `attach_type`; on refusal the error carries
/// the verifier's log. `name` is at most 15 bytes.
pub(super) fn load_sk_skb(
    instructions: &[Instruction],
    attach_type: u32,
    name: &[u8],
) -> io::Result<OwnedFd> {
    let license = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    let mut program_name = [0u8; 16];
    let length = name.len().min(15);
    program_name[..length].copy_from_slice(&name[..length]);
    let mut attributes = ProgramLoad {
        program_type: BPF_PROG_TYPE_SK_SKB,
        instruction_count: instructions.len() as u32,
        instructions: instructions.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buffer: log.as_mut_ptr() as u64,
        program_name,
        expected_attach_type: attach_type,
        ..ProgramLoad::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attributes) {
        Ok(descriptor) => Ok(owned(descriptor)),
        Err(error) => {
            let end = log.iter().position(|&byte| byte == 0).unwrap_or(log.len());
            let verifier = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                error.kind(),
                format!("{error}; verifier log: {}", verifier.trim()),
            ))
        }
    }
}
