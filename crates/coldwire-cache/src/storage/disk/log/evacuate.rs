//! The second chance (Traffic Server's *evacuation*, a CLOCK-like policy over the FIFO
//! segments): before the I/O thread deletes the oldest segment to make room, the disk-only
//! objects of it that a hit found since they were written ([`HitMark`](crate::storage::HitMark))
//! are re-appended as new records (new sequence numbers) through the normal write path;
//! the others are forgotten as before. Most recently hit first, at most a quarter of a
//! segment's bytes per deletion; never when the deletion is forced by a full disk or after
//! an I/O error (the store is then paused).
//!
//! Invariants: a chosen entry's copy is `Pending` (the deletion does not forget it, the
//! index keeps serving the old range, whose file stays open) until the new record is
//! written: then its entry and the index switch to the new range (`op.rs`, `publish`); if
//! it cannot be re-appended it is forgotten like the rest of its segment. The old record
//! is read back and checked (checksums, sequence number, key) before it is copied, so
//! nothing wrong is ever re-appended; the new record is checked at recovery like any
//! other, and of two copies of an object the one with the higher sequence number wins.
//! Runs on the I/O thread only.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::super::format::{self, Head, Lengths};
use super::super::{Copy, lock};
use super::{Log, Placing};
use crate::storage::Body;

/// The share of a segment's bytes re-appended at most per deletion (1/`BOUND`).
pub(in crate::storage::disk) const BOUND: u64 = 4;

/// A disk-only object to re-append from a segment being deleted.
#[derive(Debug)]
pub(in crate::storage::disk) struct Evacuee {
    /// The entry's sequence number (its old record's).
    from: u64,
    key: String,
    /// The old segment (open until the record is read back, even once deleted).
    file: Arc<File>,
    record_offset: u64,
    lengths: Lengths,
    /// The head last freshened, carried into the new record instead of the old one's.
    refreshed: Option<Head>,
}

impl Log {
    /// Chooses what of segment `id` (about to be deleted) gets a second chance, and marks
    /// those entries pending so the deletion does not forget them.
    pub(super) fn choose_evacuees(&mut self, id: u64, file: &Arc<File>) {
        let budget = self.shared.config.segment_size() / BOUND;
        let mut state = lock(&self.shared.state);
        let mut candidates = Vec::new();
        for (key, entries) in &state.entries {
            for entry in entries {
                let Copy::At {
                    segment,
                    record_offset,
                    lengths,
                    ..
                } = &entry.copy
                else {
                    continue;
                };
                let Body::File(range) = &entry.body else {
                    continue;
                };
                let last_hit = range.hit.last();
                let stale = entry.refreshed.as_ref().is_some_and(|head| head.stale);
                if *segment != id || entry.removed || last_hit == 0 || stale {
                    continue;
                }
                candidates.push((last_hit, key.clone(), entry.seq, *record_offset, *lengths));
            }
        }
        // Most recently hit first; what does not fit the bound is dropped.
        candidates.sort_unstable_by(|one, other| other.0.cmp(&one.0).then(one.2.cmp(&other.2)));
        let mut left = budget;
        for (_, key, seq, record_offset, lengths) in candidates {
            let bytes = lengths.record();
            if bytes > left {
                continue;
            }
            let Some(entry) = state
                .entries
                .get_mut(&key)
                .and_then(|entries| entries.iter_mut().find(|entry| entry.seq == seq))
            else {
                continue;
            };
            left -= bytes;
            entry.copy = Copy::Pending;
            let refreshed = entry.refreshed.as_ref().map(|head| head.head.clone());
            self.evacuees.push_back(Evacuee {
                from: seq,
                key,
                file: file.clone(),
                record_offset,
                lengths,
                refreshed,
            });
        }
    }

    /// Re-appends the chosen objects (reading each back from its old segment first).
    pub(super) fn evacuate(&mut self) {
        while let Some(evacuee) = self.evacuees.pop_front() {
            let Some((head, body)) = self.read_back(&evacuee) else {
                self.shared.drop_evacuee(evacuee.from, evacuee.key);
                continue;
            };
            let seq = self.shared.next_seq.fetch_add(1, Ordering::Relaxed);
            let length = body.len() as u64;
            self.append(
                seq,
                evacuee.key,
                head,
                &[body],
                length,
                Placing::Evacuated(evacuee.from),
            );
        }
    }

    /// The head and body of the evacuee's record, when it reads back whole and checks out.
    fn read_back(&self, evacuee: &Evacuee) -> Option<(Head, Bytes)> {
        let mut bytes = vec![0u8; usize::try_from(evacuee.lengths.record()).ok()?];
        evacuee
            .file
            .read_exact_at(&mut bytes, evacuee.record_offset)
            .ok()?;
        self.shared
            .counters
            .bytes_read
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let record = format::read_object(&bytes)?;
        if record.seq != evacuee.from || record.key != evacuee.key {
            return None;
        }
        let start = usize::try_from(record.body_offset).ok()?;
        let end = start + usize::try_from(record.body_len).ok()?;
        let head = evacuee.refreshed.clone().unwrap_or(record.head);
        Some((head, Bytes::from(bytes).slice(start..end)))
    }
}
