//! The two programs of [`BodySockmap`](super::BodySockmap), as raw BPF instructions: a
//! stream parser that cuts the upstream socket's bytes into messages ending exactly where
//! the body ends, and a stream verdict that redirects each message out of the client socket.
//!
//! `bodies` is a hash map from the upstream socket's cookie to
//! `{ peer_cookie, remaining, pending, redirected }` (four u64), `destinations` the
//! SOCKHASH holding the client sockets (no programs attached to it, so a client's own
//! receive path is untouched: its next request waits in its queue as usual).
//!
//! The parser (`BPF_SK_SKB_STREAM_PARSER`), run once per message on the upstream socket:
//!
//! ```text
//!  0: r6 = r1                       ; the __sk_buff
//!  1: call bpf_get_socket_cookie
//!  2: *(u64 *)(r10 - 8) = r0
//!  3: r2 = r10
//!  4: r2 += -8
//!  5: r1 = map[bodies] (two slots)
//!  7: call bpf_map_lookup_elem
//!  8: if r0 == 0 goto 19            ; no body: stop
//!  9: r7 = *(u64 *)(r0 + 8)         ; remaining
//! 10: if r7 == 0 goto 19            ; the body is complete: stop
//! 11: r1 = *(u32 *)(r6 + 0)         ; skb->len
//! 12: if r1 <= r7 goto 14
//! 13: r1 = r7                       ; the message ends where the body ends
//! 14: r7 -= r1
//! 15: *(u64 *)(r0 + 8) = r7         ; remaining (the socket lock serialises parsers)
//! 16: *(u64 *)(r0 + 16) = r1        ; pending: this message's length, for the verdict
//! 17: r0 = r1
//! 18: exit                          ; the message's length
//! 19: r0 = -ESTRPIPE
//! 20: exit
//! ```
//!
//! `-ESTRPIPE` at the start of a message stops the socket's stream parser without taking
//! the bytes: they stay in the TCP receive queue, in order, for user space once the socket
//! leaves the map (the kernel also sets the socket's error to `ESTRPIPE`, which
//! [`BodySockmap::finish`](super::BodySockmap::finish) clears). `SK_PASS` would instead
//! move them to the socket's BPF ingress queue, which is lost when the socket leaves the map.
//!
//! The verdict (`BPF_SK_SKB_STREAM_VERDICT`), run once per whole message:
//!
//! ```text
//!  0: r6 = r1
//!  1: call bpf_get_socket_cookie
//!  2: *(u64 *)(r10 - 8) = r0
//!  3: r2 = r10
//!  4: r2 += -8
//!  5: r1 = map[bodies] (two slots)
//!  7: call bpf_map_lookup_elem
//!  8: if r0 == 0 goto 18
//!  9: r1 = *(u64 *)(r0 + 16)        ; pending (skb->len here may count bytes outside
//!                                   ; the message: the parser's figure is the true one)
//! 10: lock *(u64 *)(r0 + 24) += r1  ; redirected
//! 11: r3 = r0                       ; key: peer_cookie, the value's first field
//! 12: r2 = map[destinations] (two slots)
//! 14: r1 = r6
//! 15: r4 = 0                        ; egress: send out of the client socket
//! 16: call bpf_sk_redirect_hash
//! 17: exit
//! 18: r0 = SK_PASS                  ; not reached: entries leave after the socket
//! 19: exit
//! ```

use std::io;
use std::os::fd::{OwnedFd, RawFd};

use super::program::{
    HELPER_GET_SOCKET_COOKIE, HELPER_MAP_LOOKUP_ELEM, HELPER_SK_REDIRECT_HASH, Instruction,
    SK_PASS, call, exit, instruction, load_map, load_sk_skb, move_immediate, move_register,
};

/// `BPF_SK_SKB_STREAM_PARSER`.
pub(super) const BPF_SK_SKB_STREAM_PARSER: u32 = 4;
/// `ESTRPIPE` (Linux): "streams pipe error", the strparser's stop-without-error code.
const ESTRPIPE: i32 = 86;

/// The common start: `r6 = skb`, `r0 = &bodies[cookie(skb)]` or NULL.
fn look_up_body(bodies: RawFd) -> Vec<Instruction> {
    let mut program = vec![
        move_register(6, 1),
        call(HELPER_GET_SOCKET_COOKIE),
        instruction(0x7b, 10, 0, -8, 0), // *(u64 *)(r10 - 8) = r0
        move_register(2, 10),
        instruction(0x07, 2, 0, 0, -8), // r2 += -8
    ];
    program.extend(load_map(1, bodies));
    program.push(call(HELPER_MAP_LOOKUP_ELEM));
    program
}

fn parser_instructions(bodies: RawFd) -> Vec<Instruction> {
    let mut program = look_up_body(bodies);
    program.extend([
        instruction(0x15, 0, 0, 10, 0), //  8: if r0 == 0 goto +10
        instruction(0x79, 7, 0, 8, 0),  //  9: r7 = *(u64 *)(r0 + 8)
        instruction(0x15, 7, 0, 8, 0),  // 10: if r7 == 0 goto +8
        instruction(0x61, 1, 6, 0, 0),  // 11: r1 = *(u32 *)(r6 + 0)
        instruction(0xbd, 1, 7, 1, 0),  // 12: if r1 <= r7 goto +1
        move_register(1, 7),            // 13
        instruction(0x1f, 7, 1, 0, 0),  // 14: r7 -= r1
        instruction(0x7b, 0, 7, 8, 0),  // 15: *(u64 *)(r0 + 8) = r7
        instruction(0x7b, 0, 1, 16, 0), // 16: *(u64 *)(r0 + 16) = r1
        move_register(0, 1),            // 17
        exit(),                         // 18
        move_immediate(0, -ESTRPIPE),   // 19
        exit(),                         // 20
    ]);
    program
}

fn verdict_instructions(bodies: RawFd, destinations: RawFd) -> Vec<Instruction> {
    let mut program = look_up_body(bodies);
    program.extend([
        instruction(0x15, 0, 0, 9, 0),  //  8: if r0 == 0 goto +9
        instruction(0x79, 1, 0, 16, 0), //  9: r1 = *(u64 *)(r0 + 16)
        instruction(0xdb, 0, 1, 24, 0), // 10: lock *(u64 *)(r0 + 24) += r1
        move_register(3, 0),            // 11
    ]);
    program.extend(load_map(2, destinations));
    program.extend([
        move_register(1, 6),
        move_immediate(4, 0),
        call(HELPER_SK_REDIRECT_HASH),
        exit(),
        move_immediate(0, SK_PASS),
        exit(),
    ]);
    program
}

/// Loads the parser; on refusal the error carries the verifier's log.
pub(super) fn load_parser(bodies: RawFd) -> io::Result<OwnedFd> {
    load_sk_skb(
        &parser_instructions(bodies),
        BPF_SK_SKB_STREAM_PARSER,
        b"coldwire_bparse",
    )
}

/// Loads the verdict; on refusal the error carries the verifier's log.
pub(super) fn load_verdict(bodies: RawFd, destinations: RawFd) -> io::Result<OwnedFd> {
    load_sk_skb(
        &verdict_instructions(bodies, destinations),
        super::program::BPF_SK_SKB_STREAM_VERDICT,
        b"coldwire_bverd",
    )
}
