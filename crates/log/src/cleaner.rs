//! Log compaction for `cleanup.policy=compact`: keep the latest record per key.
//!
//! A pass: (1) find the dirty range, from the cleaner checkpoint to the first segment that
//! is active or younger than min.compaction.lag.ms, and skip the pass if the dirty bytes
//! are under min.cleanable.dirty.ratio of the closed segments; (2) map every key in the
//! dirty range to its latest offset (the map is bounded: when full, the pass stops at the
//! last batch that fit); (3) rewrite each closed segment below the end of the range,
//! keeping a record if no later record has its key, and dropping tombstones older than
//! delete.retention.ms from the part cleaned before. Every batch is kept, with its base
//! offset and offset range (possibly with no records left), so offsets stay contiguous and
//! recovery's checks hold; kept records are recompressed with the batch's codec.
//!
//! Transactions, as Kafka's cleaner treats them: nothing at or after the first unstable
//! offset is cleaned (an open transaction's records stay as written until it ends);
//! control batches (commit and abort markers) are kept whole and their records never
//! enter the key map (they all share a handful of keys); the records of aborted
//! transactions neither enter the key map (an aborted write must not displace the
//! committed one before it) nor survive the pass. Deliberate difference: Kafka also
//! removes a marker once its transaction has no records left and delete.retention.ms has
//! passed; Strand keeps markers (about 80 bytes each), which keeps recovery and the
//! producer state simple.
//!
//! Crash safety of a segment swap: the cleaned bytes go to `<base>.log.cleaned` (fsynced),
//! which is renamed `<base>.log.swap` (a complete replacement), which is renamed over
//! `<base>.log`; the indexes are deleted before that and rebuilt. Opening a log deletes
//! `.cleaned` leftovers and completes `.swap` ones, so a crash at any step leaves either
//! the old segment or the cleaned one, each whole.

use crate::throttle::Throttle;
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use strand_records::{
    rebuild_batch, walk_stored_records, BatchView, Header, KeptRecord, WalkLimits,
};

use crate::batch_scan::{BatchScanner, ScanStep};
use crate::checkpoint::{sync_dir, write_atomically};
use crate::error::{LogError, LogResult};
use crate::file_cache::SegmentPaths;
use crate::log::Log;
use crate::segment::Segment;

pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

/// The batches of aborted transactions: a producer's transactional data batch whose
/// offsets lie within one of its aborted transactions.
struct AbortedBatches(HashMap<i64, Vec<(i64, i64)>>);

impl AbortedBatches {
    fn new(aborted: Vec<crate::producer_state::AbortedTxn>) -> AbortedBatches {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for txn in aborted {
            by_producer
                .entry(txn.producer_id)
                .or_default()
                .push((txn.first_offset, txn.last_offset));
        }
        AbortedBatches(by_producer)
    }

    fn contains(&self, header: &strand_records::BatchHeader) -> bool {
        header.attributes.is_transactional()
            && !header.attributes.is_control()
            && self.0.get(&header.producer_id).is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|(first, last)| (*first..=*last).contains(&header.base_offset))
            })
    }
}

/// Bounds of one cleaning pass.
#[derive(Debug, Clone, Copy)]
pub struct CleanerLimits {
    /// Bytes of keys the offset map may hold (log.cleaner.dedupe.buffer.size's role).
    pub key_map_max_bytes: usize,
    /// log.cleaner.io.max.bytes.per.second (None: unthrottled).
    pub io_max_bytes_per_second: Option<u64>,
}

impl Default for CleanerLimits {
    fn default() -> Self {
        CleanerLimits {
            key_map_max_bytes: 64 * 1024 * 1024,
            io_max_bytes_per_second: None,
        }
    }
}

/// Points in a segment swap where a test can stop the pass, as a crash would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanerStep {
    /// The cleaned copy is written and synced, not yet renamed.
    WroteCleaned,
    /// The copy is renamed to `.swap`.
    RenamedToSwap,
    /// The old indexes are deleted, the swap not yet renamed over the segment.
    DeletedIndexes,
    /// The swap replaced the segment; the indexes are not yet rebuilt.
    Swapped,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CleanOutcome {
    pub segments_rewritten: usize,
    pub bytes_read: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    /// The dirty ratio that let the pass run.
    pub dirty_ratio: f64,
}

impl Log {
    /// The first offset not yet compacted.
    pub fn cleaner_checkpoint(&self) -> i64 {
        read_cleaner_checkpoint(&self.dir).max(self.log_start_offset)
    }

    /// One compaction pass (see the module comment). `crash_after` stops it at a step,
    /// leaving the files as a crash there would, for recovery tests.
    pub fn clean(
        &mut self,
        now_ms: i64,
        limits: CleanerLimits,
        crash_after: Option<CleanerStep>,
    ) -> LogResult<CleanOutcome> {
        let mut outcome = CleanOutcome::default();
        if !self.config.cleanup_compact || self.is_offline() {
            return Ok(outcome);
        }
        let first_dirty = self.cleaner_checkpoint();
        let lag_limit = now_ms.saturating_sub(self.config.min_compaction_lag_ms);
        let closed: Vec<&Segment> = self
            .segments
            .iter()
            .take(self.segments.len().saturating_sub(1))
            .collect();
        // The cleanable end: the first closed segment still within the compaction lag.
        let end_index = closed
            .iter()
            .position(|s| s.max_timestamp() > lag_limit)
            .unwrap_or(closed.len());
        let mut end_offset = closed
            .get(end_index)
            .map_or(self.active().base_offset(), |s| s.base_offset());
        // Nothing from an unfinished (or not yet stable) transaction on.
        if let Some(unstable) = self.producers.first_unstable_offset() {
            end_offset = end_offset.min(unstable);
        }
        if end_index == 0 || first_dirty >= end_offset {
            return Ok(outcome);
        }
        let aborted = AbortedBatches::new(
            self.producers
                .aborted_between(self.log_start_offset, end_offset),
        );
        let total: u64 = closed[..end_index].iter().map(|s| s.size_bytes()).sum();
        let dirty: u64 = closed[..end_index]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .map(|s| s.size_bytes())
            .sum();
        outcome.dirty_ratio = if total == 0 {
            0.0
        } else {
            dirty as f64 / total as f64
        };
        // max.compaction.lag.ms: the oldest dirty record waited long enough (Kafka's
        // maxCompactionDelay), so the log is cleaned whatever its dirty ratio.
        let overdue = closed[..end_index]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .filter_map(|s| s.first_batch_timestamp())
            .filter(|ts| *ts >= 0)
            .min()
            .is_some_and(|oldest| {
                now_ms.saturating_sub(oldest) > self.config.max_compaction_lag_ms
            });
        if (outcome.dirty_ratio < self.config.min_cleanable_dirty_ratio && !overdue) || dirty == 0 {
            return Ok(outcome);
        }
        let mut throttle = Throttle::new(limits.io_max_bytes_per_second);
        let (map, mapped_end) = self.build_key_map(
            first_dirty,
            end_offset,
            &aborted,
            limits,
            &mut throttle,
            &mut outcome,
        )?;
        if mapped_end <= first_dirty {
            return Ok(outcome);
        }
        let bases: Vec<i64> = self
            .segments
            .iter()
            .take(self.segments.len() - 1)
            .filter(|s| s.next_offset() <= mapped_end)
            .map(|s| s.base_offset())
            .collect();
        for base in bases {
            self.clean_segment(
                base,
                &map,
                &aborted,
                first_dirty,
                now_ms,
                &mut throttle,
                &mut outcome,
                crash_after,
            )?;
        }
        write_atomically(
            &self.dir.join(CLEANER_CHECKPOINT_FILE),
            format!("{mapped_end}\n").as_bytes(),
        )?;
        Ok(outcome)
    }

    /// key -> latest offset over [first_dirty, end), and the offset the map covers up to
    /// (less than `end` when the map filled up).
    fn build_key_map(
        &self,
        first_dirty: i64,
        end: i64,
        aborted: &AbortedBatches,
        limits: CleanerLimits,
        throttle: &mut Throttle,
        outcome: &mut CleanOutcome,
    ) -> LogResult<(HashMap<Vec<u8>, i64>, i64)> {
        let mut map: HashMap<Vec<u8>, i64> = HashMap::new();
        let mut key_bytes = 0usize;
        let mut covered = first_dirty;
        for segment in self
            .segments
            .iter_from(self.segments.floor_index(first_dirty))
        {
            if segment.base_offset() >= end {
                break;
            }
            let files = segment.files(&self.dir, &self.cache)?;
            let mut scanner = BatchScanner::new(&files.log, 0, segment.size_bytes());
            loop {
                let batch = match scanner.next_verified()? {
                    ScanStep::Batch(batch) => batch,
                    ScanStep::End => break,
                    ScanStep::Invalid { position, reason } => {
                        return Err(LogError::CorruptFile {
                            path: format!("segment {} at {position}", segment.base_offset()),
                            reason,
                        })
                    }
                };
                if batch.header.last_offset() < first_dirty {
                    continue;
                }
                if batch.header.base_offset >= end {
                    break;
                }
                let bytes = scanner.last_batch_bytes(&batch);
                throttle.consumed(bytes.len() as u64);
                outcome.bytes_read += bytes.len() as u64;
                let view = BatchView::parse(bytes)?;
                if view.header.attributes.is_control() || aborted.contains(&view.header) {
                    covered = batch.header.next_offset();
                    continue;
                }
                let mut new_keys = Vec::new();
                walk_stored_records(&view, WalkLimits::default(), |record| {
                    if let Some(key) = record.key {
                        new_keys.push((
                            key.to_vec(),
                            view.header.base_offset + record.offset_delta as i64,
                        ));
                    }
                })?;
                let added: usize = new_keys
                    .iter()
                    .filter(|(k, _)| !map.contains_key(k))
                    .map(|(k, _)| k.len() + 8)
                    .sum();
                if key_bytes + added > limits.key_map_max_bytes && covered > first_dirty {
                    // The map is full: this pass cleans up to the batches that fit.
                    return Ok((map, covered));
                }
                key_bytes += added;
                for (key, offset) in new_keys {
                    map.insert(key, offset);
                }
                covered = batch.header.next_offset();
            }
        }
        Ok((map, covered.max(first_dirty)))
    }

    #[allow(clippy::too_many_arguments)]
    fn clean_segment(
        &mut self,
        base: i64,
        map: &HashMap<Vec<u8>, i64>,
        aborted: &AbortedBatches,
        first_dirty: i64,
        now_ms: i64,
        throttle: &mut Throttle,
        outcome: &mut CleanOutcome,
        crash_after: Option<CleanerStep>,
    ) -> LogResult<()> {
        let index = self.segments.floor_index(base);
        let (id, size) = {
            let segment = self
                .segments
                .iter_from(index)
                .next()
                .expect("segment listed by the caller");
            (segment.id(), segment.size_bytes())
        };
        let files = self
            .segments
            .iter_from(index)
            .next()
            .expect("listed")
            .files(&self.dir, &self.cache)?;
        let delete_horizon = now_ms.saturating_sub(self.config.delete_retention_ms);
        let mut cleaned = Vec::with_capacity(size as usize);
        let mut removed = 0u64;
        let mut scanner = BatchScanner::new(&files.log, 0, size);
        loop {
            let batch = match scanner.next_verified()? {
                ScanStep::Batch(batch) => batch,
                ScanStep::End => break,
                ScanStep::Invalid { position, reason } => {
                    return Err(LogError::CorruptFile {
                        path: format!("segment {base} at {position}"),
                        reason,
                    })
                }
            };
            let bytes = scanner.last_batch_bytes(&batch);
            throttle.consumed(bytes.len() as u64);
            let view = BatchView::parse(bytes)?;
            let header = view.header;
            if header.attributes.is_control() {
                cleaned.extend_from_slice(bytes);
                continue;
            }
            let discard_all = aborted.contains(&header);
            let mut kept = Vec::new();
            let mut total = 0u64;
            walk_stored_records(&view, WalkLimits::default(), |record| {
                total += 1;
                if discard_all {
                    return;
                }
                let offset = header.base_offset + record.offset_delta as i64;
                let superseded = record
                    .key
                    .and_then(|k| map.get(k))
                    .is_some_and(|latest| *latest > offset);
                let timestamp = header.base_timestamp + record.timestamp_delta;
                let expired_tombstone = record.value.is_none()
                    && record.key.is_some()
                    && offset < first_dirty
                    && timestamp < delete_horizon;
                if !superseded && !expired_tombstone {
                    kept.push(KeptRecord {
                        attributes: record.attributes,
                        offset_delta: record.offset_delta,
                        timestamp_delta: record.timestamp_delta,
                        key: record.key.map(<[u8]>::to_vec),
                        value: record.value.map(<[u8]>::to_vec),
                        headers: record
                            .headers
                            .iter()
                            .map(|(k, v)| Header {
                                key: k.to_vec(),
                                value: v.map(<[u8]>::to_vec),
                            })
                            .collect(),
                    });
                }
            })?;
            if kept.len() as u64 == total {
                cleaned.extend_from_slice(bytes);
            } else {
                removed += total - kept.len() as u64;
                cleaned.extend_from_slice(&rebuild_batch(&header, &kept));
            }
        }
        if removed == 0 {
            return Ok(());
        }
        outcome.records_removed += removed;
        outcome.bytes_before += size;
        outcome.bytes_after += cleaned.len() as u64;
        outcome.segments_rewritten += 1;
        self.swap_segment(base, id, &cleaned, crash_after)
    }

    /// Replaces segment `base` with `cleaned` (same base offset, same offsets), crash-safe.
    fn swap_segment(
        &mut self,
        base: i64,
        id: u64,
        cleaned: &[u8],
        crash_after: Option<CleanerStep>,
    ) -> LogResult<()> {
        let paths = SegmentPaths::new(&self.dir, base);
        let cleaned_path = suffixed(&paths.log, CLEANED_SUFFIX);
        let swap_path = suffixed(&paths.log, SWAP_SUFFIX);
        let crash = |step: CleanerStep| -> LogResult<()> {
            if crash_after == Some(step) {
                return Err(LogError::Io(io::Error::other(format!(
                    "injected crash after {step:?}"
                ))));
            }
            Ok(())
        };
        {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&cleaned_path)?;
            file.write_all(cleaned)?;
            file.sync_all()?;
        }
        crash(CleanerStep::WroteCleaned)?;
        fs::rename(&cleaned_path, &swap_path)?;
        sync_dir(&self.dir)?;
        crash(CleanerStep::RenamedToSwap)?;
        self.cache.invalidate(id);
        remove_if_exists(&paths.offset_index)?;
        remove_if_exists(&paths.time_index)?;
        crash(CleanerStep::DeletedIndexes)?;
        fs::rename(&swap_path, &paths.log)?;
        sync_dir(&self.dir)?;
        crash(CleanerStep::Swapped)?;
        let now = self.clock.now_ms();
        let (segment, outcome) = Segment::recover(
            &self.dir,
            base,
            &self.cache,
            self.config.index_interval_bytes,
            now,
        )?;
        if outcome.invalid_reason.is_some() {
            return Err(LogError::CorruptFile {
                path: paths.log.display().to_string(),
                reason: "cleaned segment failed its check".into(),
            });
        }
        self.segments.replace(base, segment);
        Ok(())
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn read_cleaner_checkpoint(dir: &Path) -> i64 {
    fs::read_to_string(dir.join(CLEANER_CHECKPOINT_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Finishes or undoes interrupted segment swaps in `dir` (called when a log opens):
/// a `.cleaned` file was never complete and is deleted; a `.swap` file is a complete
/// replacement and takes its segment's place, with the indexes left to be rebuilt.
/// Returns the base offsets whose indexes must be rebuilt.
pub fn finish_interrupted_swaps(dir: &Path) -> io::Result<Vec<i64>> {
    let mut rebuild = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if name.ends_with(CLEANED_SUFFIX) {
            fs::remove_file(&path)?;
        } else if let Some(log_name) = name.strip_suffix(SWAP_SUFFIX) {
            let Some(base) = log_name
                .strip_suffix(".log")
                .and_then(|stem| stem.parse::<i64>().ok())
            else {
                continue;
            };
            let paths = SegmentPaths::new(dir, base);
            remove_if_exists(&paths.offset_index)?;
            remove_if_exists(&paths.time_index)?;
            fs::rename(&path, &paths.log)?;
            rebuild.push(base);
        }
    }
    if !rebuild.is_empty() {
        sync_dir(dir)?;
    }
    Ok(rebuild)
}
