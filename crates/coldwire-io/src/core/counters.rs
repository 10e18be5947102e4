//! Per-loop counters: what one event loop did, by system call, plus its connection gauges.
//! They are the profile the seed papers read from DCPI, taken from inside instead.
//!
//! Each loop owns its `LoopCounters` and bumps plain integers (no atomics on the hot path);
//! it publishes a copy now and then (see the server's stats) for readers on other threads.

use crate::poller::PollerCounters;

/// Counters of one event loop. All `*_calls` fields count system calls made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopCounters {
    /// `accept4` calls, including the final one that returned `EAGAIN`.
    pub accept_calls: u64,
    /// `connect` calls (outgoing connections).
    pub connect_calls: u64,
    /// `recv`/`read` calls on connections.
    pub recv_calls: u64,
    /// `sendmsg` calls (memory bodies and heads, gathered).
    pub send_calls: u64,
    /// `sendfile` calls.
    pub sendfile_calls: u64,
    /// `close` calls on connections.
    pub close_calls: u64,
    /// `shutdown` calls (lingering close).
    pub shutdown_calls: u64,
    /// Calls that returned `EAGAIN` (would block), any kind.
    pub would_block: u64,
    /// Calls to the wait system call.
    pub wait_calls: u64,
    /// Interest-set changes that cost a system call (`epoll_ctl`).
    pub control_calls: u64,
    /// Descriptors the wait calls handed to the kernel to scan (select/poll).
    pub descriptors_scanned: u64,
    /// Readiness events returned by waits, summed.
    pub events: u64,
    /// Waits that returned no event at all before their timeout (timer wake-ups included).
    pub empty_wakeups: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Bytes received on connections.
    pub bytes_received: u64,
    /// Bytes sent on connections (all paths).
    pub bytes_sent: u64,
    /// Times accepting was paused for lack of descriptors (EMFILE/ENFILE) or the connection
    /// limit.
    pub accept_pauses: u64,
    /// Currently open connections (a gauge).
    pub open_connections: u64,
    /// Connections currently doing work — a request being read or answered (a gauge kept by
    /// the server; open minus active are the idle, "cold" ones).
    pub active_connections: u64,
    /// Receive buffers currently taken from the pool (a gauge): held by connections with a
    /// partial request or being processed; an idle connection holds none.
    pub buffers_in_use: u64,
    /// io_uring backends: submission queue entries queued for the kernel (operations,
    /// not system calls). Zero for the other backends.
    #[serde(default)]
    pub uring_submissions: u64,
    /// io_uring backends: completion queue entries reaped.
    #[serde(default)]
    pub uring_completions: u64,
    /// io_uring backends: `io_uring_enter` system calls, all of them; `wait_calls` counts
    /// the ones that waited, so they are included here too.
    #[serde(default)]
    pub uring_enter_calls: u64,
    /// io_uring completion backend: cancellations submitted for a connection's own
    /// operations (by `user_data`) when it closes — at most one per operation it had armed.
    #[serde(default)]
    pub uring_cancellations: u64,
    /// io_uring completion backend: outgoing connections opened with an
    /// `IORING_OP_CONNECT` (a submission, not a `connect(2)`: not in `connect_calls`).
    #[serde(default)]
    pub uring_connects: u64,
    /// io_uring completion backend: receives ended by `ENOBUFS` — the shared receive
    /// buffer ring was empty when data arrived, and the receive had to be armed again.
    #[serde(default)]
    pub uring_recv_no_buffers: u64,
    /// io_uring backends: completions the kernel could not post because the completion
    /// queue was full (kept on its overflow list, flushed by a later enter).
    #[serde(default)]
    pub uring_cq_overflows: u64,
    /// io_uring backends: `io_uring_enter` calls made because the submission queue was
    /// full in the middle of a turn (included in `uring_enter_calls`).
    #[serde(default)]
    pub uring_sq_full_enters: u64,
    /// io_uring backends: waits that batched completions (`--uring-min-wait`: asked for a
    /// batch, bounded by the minimum wait; included in `wait_calls`).
    #[serde(default)]
    pub uring_batched_waits: u64,
    /// Readiness backends: page-cache residency probes (`cachestat`, or the `mincore`
    /// fallback) made before sending a window of a file.
    #[serde(default)]
    pub file_probe_calls: u64,
    /// Readiness backends: file windows found cold and handed to the read-ahead threads
    /// instead of being read by `sendfile` on the loop.
    #[serde(default)]
    pub file_reads_offloaded: u64,
    /// Response bodies handed to the kernel whole (`Splice::splice_in_kernel`, a BPF
    /// sockmap): their bytes show in neither `bytes_received` nor `bytes_sent`.
    #[serde(default)]
    pub kernel_bodies: u64,
    /// Connections the server closed whose slot the driver still holds (a gauge): on
    /// io_uring, until every operation pointing into the slot completed (a send in flight,
    /// a lingering shutdown, a connect); such a slot still counts toward
    /// `--max-connections`. Zero on the readiness backends, which free the slot at close.
    #[serde(default)]
    pub closing_connections: u64,
    /// Accepted sockets waiting for a free slot (a gauge): io_uring's accept raced its
    /// pause at the connection limit. Each holds a descriptor but no slot.
    #[serde(default)]
    pub accept_backlog: u64,
    /// io_uring completion backend: turns that adopted a whole accept batch
    /// (`DriverConfig::accept_batch`) and so cancelled the armed accepts until the next
    /// turn, as the readiness driver stops accepting after a batch.
    #[serde(default)]
    pub accept_throttles: u64,
    /// Times accepting stopped short of the connection limit to keep a slot for the
    /// upstream connection of a client just accepted (`DriverConfig::reserve_upstream`,
    /// the proxy): clients wait in the listen queue (or io_uring's backlog) instead of
    /// taking the slots their own requests need.
    #[serde(default)]
    pub accept_holds: u64,
    /// io_uring completion backend: times the multishot accept was stopped because a full
    /// listen queue, taken at once after a stalled turn, would no longer fit the
    /// connection limit (single-shot accepts, as many as fit, take over until it would).
    #[serde(default)]
    pub accept_multishot_stops: u64,
    /// io_uring completion backend, a gauge: receive buffers in circulation in the
    /// provided-buffer ring (64 at first, doubling when a turn used half of them or a
    /// receive found none, up to the ring's size): what the loop's receives have touched.
    #[serde(default)]
    pub uring_ring_buffers: u64,
}

impl LoopCounters {
    /// Every system call this loop made, all kinds together.
    pub fn syscalls(&self) -> u64 {
        self.accept_calls
            + self.connect_calls
            + self.recv_calls
            + self.send_calls
            + self.sendfile_calls
            + self.close_calls
            + self.shutdown_calls
            + self.control_calls
            + self.file_probe_calls
            // io_uring backends wait inside io_uring_enter: count each enter once.
            + self.wait_calls.max(self.uring_enter_calls)
    }

    /// Copies the poller's own counters in.
    pub fn absorb_poller(&mut self, poller: PollerCounters) {
        self.wait_calls = poller.wait_calls;
        self.control_calls = poller.control_calls;
        self.descriptors_scanned = poller.descriptors_scanned;
        self.uring_submissions = poller.uring_submissions;
        self.uring_completions = poller.uring_completions;
        self.uring_enter_calls = poller.uring_enter_calls;
    }

    /// Adds another loop's counters (gauges too) — for totals across workers.
    pub fn add(&mut self, other: &LoopCounters) {
        let LoopCounters {
            accept_calls,
            connect_calls,
            recv_calls,
            send_calls,
            sendfile_calls,
            close_calls,
            shutdown_calls,
            would_block,
            wait_calls,
            control_calls,
            descriptors_scanned,
            events,
            empty_wakeups,
            accepted,
            bytes_received,
            bytes_sent,
            accept_pauses,
            open_connections,
            active_connections,
            buffers_in_use,
            uring_submissions,
            uring_completions,
            uring_enter_calls,
            uring_cancellations,
            uring_connects,
            uring_recv_no_buffers,
            uring_cq_overflows,
            uring_sq_full_enters,
            uring_batched_waits,
            file_probe_calls,
            file_reads_offloaded,
            kernel_bodies,
            closing_connections,
            accept_backlog,
            accept_throttles,
            accept_holds,
            accept_multishot_stops,
            uring_ring_buffers,
        } = *other;
        self.accept_calls += accept_calls;
        self.connect_calls += connect_calls;
        self.recv_calls += recv_calls;
        self.send_calls += send_calls;
        self.sendfile_calls += sendfile_calls;
        self.close_calls += close_calls;
        self.shutdown_calls += shutdown_calls;
        self.would_block += would_block;
        self.wait_calls += wait_calls;
        self.control_calls += control_calls;
        self.descriptors_scanned += descriptors_scanned;
        self.events += events;
        self.empty_wakeups += empty_wakeups;
        self.accepted += accepted;
        self.bytes_received += bytes_received;
        self.bytes_sent += bytes_sent;
        self.accept_pauses += accept_pauses;
        self.open_connections += open_connections;
        self.active_connections += active_connections;
        self.buffers_in_use += buffers_in_use;
        self.uring_submissions += uring_submissions;
        self.uring_completions += uring_completions;
        self.uring_enter_calls += uring_enter_calls;
        self.uring_cancellations += uring_cancellations;
        self.uring_connects += uring_connects;
        self.uring_recv_no_buffers += uring_recv_no_buffers;
        self.uring_cq_overflows += uring_cq_overflows;
        self.uring_sq_full_enters += uring_sq_full_enters;
        self.uring_batched_waits += uring_batched_waits;
        self.file_probe_calls += file_probe_calls;
        self.file_reads_offloaded += file_reads_offloaded;
        self.kernel_bodies += kernel_bodies;
        self.closing_connections += closing_connections;
        self.accept_backlog += accept_backlog;
        self.accept_throttles += accept_throttles;
        self.accept_holds += accept_holds;
        self.accept_multishot_stops += accept_multishot_stops;
        self.uring_ring_buffers += uring_ring_buffers;
    }
}
