//! The local half of tiered storage (KIP-405): which sealed segments may be copied to the
//! remote store, and the rule that local retention deletes only what the store holds.
//!
//! A segment may be copied once it is sealed (no longer the active segment) and wholly
//! below both the high watermark and the last stable offset, so what goes to the store is
//! committed and decided (no open transaction in it): the same on every replica. The
//! broker copies it from open descriptors (`SealedSegment::files`), so retention or
//! a move renaming the files meanwhile does not disturb the copy.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::LogResult;
use crate::file_cache::SegmentFiles;
use crate::log::Log;
use crate::offset_index::OffsetIndexEntry;
use crate::producer_state::AbortedTxn;
use crate::sparse_index::IndexEntry;
use crate::time_index::TimeIndexEntry;

/// A sealed segment to copy, with what a reader of the remote copy needs beside it.
#[derive(Debug, Clone)]
pub struct SealedSegment {
    pub base_offset: i64,
    /// One past its last offset.
    pub next_offset: i64,
    pub size_bytes: u64,
    pub max_timestamp: i64,
    /// Bytes of the offset and time indexes that hold entries (the files may be longer).
    pub offset_index_bytes: u64,
    pub time_index_bytes: u64,
    pub files: Arc<SegmentFiles>,
    /// The producer snapshot taken when it rolled (state as of `next_offset`), if kept.
    pub producer_snapshot: Option<PathBuf>,
    /// The leader epochs (epoch, start offset) of its batches: the one it starts in, then
    /// every epoch that began inside it.
    pub leader_epochs: Vec<(i32, i64)>,
    /// The aborted transactions read_committed readers of it must be told about.
    pub aborted: Vec<AbortedTxn>,
}

impl Log {
    /// The end (exclusive) of what the remote store holds, as last set; None: unknown.
    pub fn remote_end(&self) -> Option<i64> {
        self.remote_end
    }

    /// The broker learnt how far the remote store reaches: local retention may now delete
    /// segments that end at or below `end`.
    pub fn set_remote_end(&mut self, end: Option<i64>) {
        self.remote_end = end;
    }

    /// Sealed segments that hold offsets at or above `from`, end at or below the high
    /// watermark and the last stable offset, and are past remote.copy.lag.ms or
    /// remote.copy.lag.bytes, oldest first, at most `max` of them.
    pub fn copy_candidates(&self, from: i64, max: usize) -> LogResult<Vec<SealedSegment>> {
        let upper = self.high_watermark().min(self.last_stable_offset());
        let sealed = self.segments.len().saturating_sub(1);
        let next_offset_of = |index: usize| {
            self.segments
                .iter_from(index + 1)
                .next()
                .map_or(self.log_end_offset(), |next| next.base_offset())
        };
        // Bytes from the segment holding `from` to the end, the active segment included:
        // what is newer than a candidate is this less the candidates up to it (Kafka's
        // totalLogSize and cumulativeSize).
        let mut newer_bytes: u64 = self
            .segments
            .iter()
            .enumerate()
            .filter(|(index, _)| next_offset_of(*index) > from)
            .map(|(_, segment)| segment.size_bytes())
            .sum();
        let now = self.clock.now_ms();
        let mut out = Vec::new();
        for (index, segment) in self.segments.iter().take(sealed).enumerate() {
            if out.len() >= max {
                break;
            }
            let next_offset = next_offset_of(index);
            if next_offset <= from {
                continue;
            }
            newer_bytes = newer_bytes.saturating_sub(segment.size_bytes());
            if segment.is_empty() {
                continue;
            }
            if next_offset > upper
                || !copy_lag_passed(&self.config, now, segment.max_timestamp(), newer_bytes)
            {
                break;
            }
            let base = segment.base_offset();
            let epochs = self.epochs.entries();
            let first = epochs
                .iter()
                .rposition(|e| e.start_offset <= base)
                .unwrap_or(0);
            let leader_epochs = epochs
                .iter()
                .skip(first)
                .take_while(|e| e.start_offset < next_offset)
                .map(|e| (e.epoch, e.start_offset.max(base)))
                .collect();
            let snapshot = crate::producer_state::snapshot_path(&self.dir, next_offset);
            out.push(SealedSegment {
                base_offset: base,
                next_offset,
                size_bytes: segment.size_bytes(),
                max_timestamp: segment.max_timestamp(),
                offset_index_bytes: segment.offset_index_entries() * OffsetIndexEntry::BYTES as u64,
                time_index_bytes: segment.time_index_entries() * TimeIndexEntry::BYTES as u64,
                files: segment.files(&self.dir, &self.cache)?,
                producer_snapshot: snapshot.exists().then_some(snapshot),
                leader_epochs,
                aborted: self.producers.aborted_txns(base, next_offset),
            });
        }
        Ok(out)
    }
}

/// Kafka's upload eligibility (RLMCopyTask's isEligibleForUpload): at once when either lag
/// is 0, else once the segment's newest record is remote.copy.lag.ms old (or in the
/// future: a clock stepped back) or remote.copy.lag.bytes of the log are newer than it.
fn copy_lag_passed(
    config: &crate::LogConfig,
    now_ms: i64,
    max_timestamp: i64,
    newer_bytes: u64,
) -> bool {
    let (lag_ms, lag_bytes) = (config.remote_copy_lag_ms, config.remote_copy_lag_bytes);
    if lag_ms == Some(0) || lag_bytes == Some(0) {
        return true;
    }
    let age = now_ms.saturating_sub(max_timestamp);
    let by_time = lag_ms.is_some_and(|lag| lag > 0 && (age < 0 || age >= lag));
    let by_size = lag_bytes.is_some_and(|lag| lag > 0 && newer_bytes >= lag);
    by_time || by_size
}

impl Log {
    /// A follower behind its leader's local log start starts its log at `offset`, where
    /// the remote store's copy ends, instead of fetching what the store holds (Kafka's
    /// remote log auxiliary state): the log is emptied and starts there, with the leader
    /// epochs of the copies below it (`epochs`, (epoch, start offset) in offset order) and
    /// the producer state of the copy that ends there (`producer_snapshot`, a snapshot as
    /// of `offset`), so a later leadership here knows both.
    pub fn start_after_remote(
        &mut self,
        offset: i64,
        epochs: &[(i32, i64)],
        producer_snapshot: Option<&[u8]>,
    ) -> LogResult<()> {
        self.truncate_fully_and_start_at(offset)?;
        for (epoch, start) in epochs.iter().filter(|(_, start)| *start <= offset) {
            self.epochs.assign(*epoch, *start);
        }
        self.epochs.truncate_from_start(offset);
        self.epochs.checkpoint()?;
        if let Some(snapshot) = producer_snapshot {
            let path = crate::producer_state::snapshot_path(&self.dir, offset);
            crate::checkpoint::replace_file(&path, snapshot, crate::checkpoint::Sync::Now)?;
            self.rebuild_producer_state()?;
        }
        Ok(())
    }
}
