//! Opening a disk store's directory: every segment file read and [scanned](super::format::scan),
//! the intact objects collected (oldest first), each with the newest intact head record
//! naming it applied ([`heads::apply`]), the rest never looked at again.
//!
//! Invariants: only records that pass every check of the scan are recovered, each with a
//! file range inside the segment it was read from; files that are not segments are left
//! alone; a segment is never appended to after a restart (new records go to a new segment
//! with a higher id), so a torn tail stays behind the scan's stopping point for good; when
//! the segments take more than the budget leaves beside a new segment (e.g. after
//! `--cache-dir-size` was lowered), the oldest are deleted before any is used.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::DiskConfig;
use super::format::{self, Head};
use super::heads::{self, FoundHead};
use crate::storage::FileRange;

/// A segment file kept by the store.
#[derive(Debug)]
pub(super) struct Segment {
    pub id: u64,
    pub file: Arc<File>,
    pub path: PathBuf,
    /// Bytes placed in it by this process (written or, on a ring, still in flight; 0 for
    /// a segment found at start-up): its size counts as at least this much.
    pub placed: u64,
}

/// An object found intact.
#[derive(Debug)]
pub(super) struct Found {
    pub seq: u64,
    pub key: String,
    pub head: Head,
    pub segment: u64,
    pub record_offset: u64,
    pub lengths: format::Lengths,
    pub range: FileRange,
    /// A head record made it stale (a `HEAD` response did not match it).
    pub stale: bool,
}

/// What opening found.
#[derive(Debug, Default)]
pub(super) struct Recovered {
    /// The segments, oldest first.
    pub segments: Vec<Segment>,
    /// The intact objects, oldest first.
    pub objects: Vec<Found>,
    /// The next sequence number to use.
    pub next_seq: u64,
    /// The next segment id to use.
    pub next_segment: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

/// The file name of segment `id`.
pub(super) fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}.cws"))
}

fn segment_id(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".cws")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

fn context(error: std::io::Error, what: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(
        error.kind(),
        format!(
            "{what} {}: {error} (check the path and its permissions)",
            path.display()
        ),
    )
}

/// Opens `config.dir` (creating it), reads every segment back and deletes the oldest ones
/// beyond the budget.
pub(super) fn recover(config: &DiskConfig) -> std::io::Result<Recovered> {
    let dir = &config.dir;
    std::fs::create_dir_all(dir).map_err(|error| context(error, "cannot create", dir))?;
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|error| context(error, "cannot read", dir))? {
        let entry = entry.map_err(|error| context(error, "cannot read", dir))?;
        if let Some(id) = entry.file_name().to_str().and_then(segment_id) {
            let length = entry.metadata().map_or(0, |metadata| metadata.len());
            ids.push((id, length));
        }
    }
    ids.sort_unstable();
    // The newest segments that fit, leaving room for the one new records will go to.
    let mut room = config.size.saturating_sub(config.segment_size());
    let mut keep = 0;
    for &(_, length) in ids.iter().rev() {
        if length > room {
            break;
        }
        room -= length;
        keep += 1;
    }
    let ids: Vec<u64> = ids.into_iter().map(|(id, _)| id).collect();
    let mut recovered = Recovered {
        next_seq: 1,
        next_segment: ids.last().map_or(1, |id| id + 1),
        ..Recovered::default()
    };
    let cut = ids.len() - keep;
    for &id in &ids[..cut] {
        let path = segment_path(dir, id);
        std::fs::remove_file(&path).map_err(|error| context(error, "cannot delete", &path))?;
    }
    // Segments are read and checked on a few threads at once (each its own buffer).
    let kept = &ids[cut..];
    let threads = std::thread::available_parallelism()
        .map_or(1, |count| count.get())
        .clamp(1, 4);
    let scanned: Vec<std::io::Result<Vec<ScannedSegment>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let mine: Vec<u64> = kept.iter().skip(worker).step_by(threads).copied().collect();
                scope.spawn(move || mine.into_iter().map(|id| scan_segment(dir, id)).collect())
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|_| Ok(Vec::new())))
            .collect()
    });
    let mut segments = Vec::new();
    for result in scanned {
        segments.extend(result?);
    }
    segments.sort_unstable_by_key(|segment| segment.segment.id);
    let mut found_heads = Vec::new();
    for segment in segments {
        recovered.bytes_read += segment.bytes_read;
        for object in &segment.objects {
            recovered.next_seq = recovered.next_seq.max(object.seq + 1);
        }
        for head in &segment.heads {
            recovered.next_seq = recovered.next_seq.max(head.seq + 1);
        }
        recovered.objects.extend(segment.objects);
        found_heads.extend(segment.heads);
        recovered.segments.push(segment.segment);
    }
    recovered.objects.sort_unstable_by_key(|object| object.seq);
    heads::apply(&mut recovered.objects, found_heads);
    Ok(recovered)
}

/// One segment read back.
struct ScannedSegment {
    segment: Segment,
    objects: Vec<Found>,
    heads: Vec<FoundHead>,
    bytes_read: u64,
}

/// Reads segment `id` whole and keeps its intact objects.
fn scan_segment(dir: &Path, id: u64) -> std::io::Result<ScannedSegment> {
    let path = segment_path(dir, id);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|error| context(error, "cannot open", &path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|error| context(error, "cannot read", &path))?;
    let file = Arc::new(file);
    let (mut objects, mut heads) = (Vec::new(), Vec::new());
    for record in format::scan(&bytes, id) {
        if let Some(refresh) = record.refresh {
            heads.push(FoundHead {
                seq: record.seq,
                key: record.key,
                head: record.head,
                refresh,
            });
            continue;
        }
        objects.push(Found {
            seq: record.seq,
            key: record.key,
            head: record.head,
            segment: id,
            record_offset: record.offset,
            lengths: record.lengths,
            range: FileRange {
                file: file.clone(),
                offset: record.body_offset,
                length: record.body_len,
                hit: Default::default(),
            },
            stale: false,
        });
    }
    Ok(ScannedSegment {
        segment: Segment {
            id,
            file,
            path,
            placed: 0,
        },
        objects,
        heads,
        bytes_read: bytes.len() as u64,
    })
}
