//! What the I/O thread does after an I/O error, or when a worker reports that a hit could
//! not read its body (`Storage::read_failed`: the send failed with `EIO`): every segment is
//! read back (its first byte) and one that cannot be read any more (`EIO`: a failing device, a file system shut
//! down) is dropped like a deleted one — the index forgets the objects only it held, those
//! still in memory lose their disk copy — so their next request is a miss fetched from the
//! origin instead of a hit that would fail mid-response. The index is told at once (through
//! the sink), not at the next insert.
//!
//! Invariants: runs on the I/O thread only; never deletes a
//! file (the device may come back; a later start-up scans it again, checksums first); each
//! segment found unreadable is counted once as an I/O error of its kind.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;

use super::super::{Copy, count_kind, lock};
use super::Log;

impl Log {
    /// Drops the segments that cannot be read any more (see the module docs).
    pub(super) fn check_reads(&mut self) {
        let mut unreadable = Vec::new();
        let mut probe = |id: u64, file: &std::fs::File| {
            let mut byte = [0u8; 1];
            match file.read_at(&mut byte, 0) {
                Ok(_) => true,
                Err(error) => {
                    unreadable.push((id, error));
                    false
                }
            }
        };
        self.sealed
            .retain(|segment| probe(segment.id, &segment.file));
        if let Some(active) = &self.active
            && !probe(active.segment.id, &active.segment.file)
        {
            // Nothing more is appended to it; the buffer's records are dropped at the next
            // flush (no active segment) or go to a new one.
            self.active = None;
            self.dirty = false;
        }
        if unreadable.is_empty() {
            return;
        }
        {
            // Writes of theirs still in flight (on a ring) publish nothing when they complete.
            let mut state = lock(&self.shared.state);
            for (id, _) in &unreadable {
                state.unreadable.insert(*id);
                state.sync_when_written.remove(id);
            }
        }
        let counters = &self.shared.counters;
        for (id, error) in &unreadable {
            counters.io_errors.fetch_add(1, Ordering::Relaxed);
            count_kind(counters, error);
            self.forget_segment(*id);
        }
        self.count_segments();
        let (first, error) = &unreadable[0];
        eprintln!(
            "coldwire: warning: disk store: cannot read {} segment(s) in {} any more \
             (segment {first:016x}: {error}); their objects are dropped from the cache and \
             fetched again from the origin",
            unreadable.len(),
            self.shared.config.dir.display(),
        );
        // The index forgets them now rather than at its next insert.
        let sink = lock(&self.shared.sink).clone();
        if let Some(sink) = sink {
            sink(Vec::new());
        }
    }

    /// The index forgets what only segment `id` held; entries still in memory keep being
    /// served from there, without a disk copy.
    pub(super) fn forget_segment(&self, id: u64) {
        let mut state = lock(&self.shared.state);
        let state = &mut *state;
        for (key, entries) in state.entries.iter_mut() {
            let mut evict = false;
            entries.retain_mut(|entry| {
                let here = matches!(&entry.copy, Copy::At { segment, .. } if *segment == id);
                if !here {
                    return true;
                }
                if entry.body.is_in_memory() {
                    // Still served from memory; just no disk copy any more.
                    entry.copy = Copy::Gone;
                    return true;
                }
                evict = true;
                false
            });
            if evict {
                state.evictions.push(key.clone());
            }
        }
        state.entries.retain(|_, entries| !entries.is_empty());
    }
}
