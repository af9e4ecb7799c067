//! Opening a partition's log from its directory, with recovery after an unclean shutdown.
//!
//! Clean shutdown: every segment is trusted; only the tail after the active segment's last
//! index entry is scanned. Unclean: segments from the one holding the recovery point on
//! are re-read batch by batch (framing, CRC, contiguous offsets), their indexes rebuilt,
//! and the log is cut at the first bad batch; every later segment is deleted. The epoch
//! cache is cut back to the recovered end. A reopened log therefore never holds a batch
//! whose CRC fails and never has an offset gap, and it keeps every batch that was synced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::sync_dir;
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::error::{LogError, LogResult};
use crate::file_cache::FileCache;
use crate::leader_epoch::LeaderEpochCache;
use crate::log::Log;
use crate::producer_state::ProducerStateManager;
use crate::segment::Segment;
use crate::segment_list::SegmentList;
use crate::sync_gate::SyncGate;

/// What the manager's checkpoints know about a log, and how the last run ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogOpenState {
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub clean_shutdown: bool,
}

/// What opening found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments_recovered: usize,
    pub batches_checked: u64,
    pub bytes_truncated: u64,
    pub segments_deleted: usize,
    pub invalid_reason: Option<String>,
    /// The log ends below its checkpointed recovery point: data once flushed is gone (a
    /// segment emptied or cut outside Strand; also after a follower's truncation that
    /// crashed before the next recovery-point checkpoint, which is harmless).
    pub flushed_data_missing: Option<String>,
}

impl Log {
    /// Creates a new, empty log in `dir` (which may not hold one already).
    pub fn create(
        dir: &Path,
        config: Arc<LogConfig>,
        cache: Arc<FileCache>,
        clock: Arc<dyn Clock>,
        start_offset: i64,
    ) -> LogResult<Log> {
        let mut log = Log::create_deferred(dir, config, cache, clock, start_offset);
        log.materialize()?;
        // A directory left without segments (a crash mid-truncation) may keep its epochs;
        // a damaged checkpoint there describes no data.
        log.epochs = LeaderEpochCache::load(dir).unwrap_or_else(|_| LeaderEpochCache::empty(dir));
        Ok(log)
    }

    /// A new, empty log that exists only in memory: its directory and first segment's
    /// files are created by [`Log::materialize`], which every write calls first. Creating
    /// a topic of 10,000 partitions then touches the disk for its metadata only, as in
    /// Kafka (whose brokers create logs after the controller has answered); the broker
    /// materializes new logs in the background soon after. An empty log lost to a crash
    /// before that is recreated from the topic metadata.
    pub fn create_deferred(
        dir: &Path,
        config: Arc<LogConfig>,
        cache: Arc<FileCache>,
        clock: Arc<dyn Clock>,
        start_offset: i64,
    ) -> Log {
        let segment = Segment::unwritten(&cache, start_offset, clock.now_ms());
        // No fsync when materializing either: the sync gate makes the directory durable
        // with the first data (see `SyncGate::for_new_dir`).
        Log {
            dir: dir.to_path_buf(),
            config,
            cache: cache.clone(),
            clock,
            segments: SegmentList::with_first(segment),
            log_start_offset: start_offset,
            high_watermark: start_offset,
            recovery_point: start_offset,
            epochs: LeaderEpochCache::empty(dir),
            gate: SyncGate::for_new_dir(dir.to_path_buf(), cache, start_offset),
            offline: None,
            dir_health: Default::default(),
            on_disk: false,
            upkeep: Default::default(),
            producers: ProducerStateManager::default(),
            remote_end: None,
        }
    }

    /// Opens the log in `dir`, recovering it if the last shutdown was not clean.
    pub fn open(
        dir: &Path,
        config: Arc<LogConfig>,
        cache: Arc<FileCache>,
        clock: Arc<dyn Clock>,
        state: LogOpenState,
    ) -> LogResult<(Log, RecoveryReport)> {
        // Compaction swaps interrupted by a crash are finished (or undone) first.
        let mut rebuild: std::collections::HashSet<i64> =
            crate::cleaner::finish_interrupted_swaps(dir)?
                .into_iter()
                .collect();
        let bases = list_segment_bases(dir)?;
        // A segment whose offset index is missing lost it mid-swap (or by hand): rebuild.
        rebuild.extend(bases.iter().copied().filter(|base| {
            !crate::file_cache::SegmentPaths::new(dir, *base)
                .offset_index
                .exists()
        }));
        if bases.is_empty() {
            let start = state.log_start_offset.max(0);
            return Ok((
                Log::create(dir, config, cache, clock, start)?,
                RecoveryReport::default(),
            ));
        }
        let now = clock.now_ms();
        let interval = config.index_interval_bytes;
        let mut report = RecoveryReport::default();
        // The epoch checkpoint is fsynced by flushes, after the write that changed it: a
        // crash in between can leave it damaged. Its entries then come from the batches
        // themselves, by recovering every segment.
        // Missing after an unclean stop (its first write's fsync deferred): the same.
        let missing = !dir
            .join(crate::leader_epoch::LEADER_EPOCH_CHECKPOINT_FILE)
            .exists();
        let (mut epochs, epochs_lost) = match LeaderEpochCache::load(dir) {
            Ok(epochs) => (epochs, missing && !state.clean_shutdown),
            Err(LogError::CorruptFile { path, reason }) => {
                tracing::warn!(%path, %reason, "damaged leader epoch checkpoint: rebuilding it from the log");
                (LeaderEpochCache::empty(dir), true)
            }
            Err(error) => return Err(error),
        };
        let mut segments = SegmentList::default();
        let recover_from = if epochs_lost {
            bases[0]
        } else if state.clean_shutdown {
            i64::MAX
        } else {
            // The segment holding the recovery point, and all after it.
            bases
                .iter()
                .copied()
                .filter(|base| *base <= state.recovery_point)
                .max()
                .unwrap_or(bases[0])
        };
        let mut must_recover = false;
        let mut cut_at: Option<usize> = None;
        for (index, base) in bases.iter().copied().enumerate() {
            let expected_base = segments.last().map(Segment::next_offset);
            if let Some(expected) = expected_base {
                if base != expected {
                    report.invalid_reason = Some(format!(
                        "segment {base} does not follow the previous segment's end {expected}"
                    ));
                    cut_at = Some(index);
                    break;
                }
            }
            let trusted = if base < recover_from && !must_recover && !rebuild.contains(&base) {
                Segment::open(dir, base, &cache, now)?
            } else {
                None
            };
            let segment = match trusted {
                Some(segment) => segment,
                None => {
                    must_recover = true;
                    let (segment, outcome) = Segment::recover(dir, base, &cache, interval, now)?;
                    report.segments_recovered += 1;
                    report.batches_checked += outcome.valid_batches;
                    report.bytes_truncated += outcome.truncated_bytes;
                    for (epoch, offset) in &outcome.epochs {
                        epochs.assign(*epoch, *offset);
                    }
                    if let Some(reason) = outcome.invalid_reason {
                        tracing::warn!(dir = %dir.display(), segment = base, %reason, "recovery cut the log");
                        report.invalid_reason = Some(reason);
                        segments.push(segment);
                        cut_at = Some(index + 1);
                        break;
                    }
                    segment
                }
            };
            segments.push(segment);
        }
        if let Some(first_doomed) = cut_at {
            for base in &bases[first_doomed..] {
                delete_segment_files(dir, *base)?;
                report.segments_deleted += 1;
            }
        }
        let log_end_offset = segments.last().expect("at least one segment").next_offset();
        if log_end_offset < state.recovery_point {
            let reason = format!(
                "the log ends at offset {log_end_offset} but offsets up to {} were flushed: \
                 a segment was emptied or cut outside Strand (or a follower's truncation \
                 was not yet checkpointed)",
                state.recovery_point
            );
            tracing::warn!(dir = %dir.display(), %reason, "data lost below the recovery point");
            report.flushed_data_missing = Some(reason);
        }
        let first_base = segments
            .first()
            .expect("at least one segment")
            .base_offset();
        let log_start_offset = state.log_start_offset.max(first_base).min(log_end_offset);
        epochs.truncate_from_end(log_end_offset);
        epochs.truncate_from_start(log_start_offset);
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            cache: cache.clone(),
            clock,
            segments,
            log_start_offset,
            high_watermark: state.high_watermark.clamp(log_start_offset, log_end_offset),
            recovery_point: state.recovery_point.min(log_end_offset),
            epochs,
            gate: SyncGate::new(dir.to_path_buf(), cache.clone(), log_end_offset),
            offline: None,
            dir_health: Default::default(),
            on_disk: true,
            upkeep: Default::default(),
            producers: ProducerStateManager::default(),
            remote_end: None,
        };
        log.rebuild_producer_state()?;
        if report.segments_recovered > 0 || report.segments_deleted > 0 {
            // What recovery kept may still sit only in the page cache (kill -9): make it
            // durable before the recovery point moves past it.
            for segment in log.segments.iter_mut_from(0) {
                segment.sync(&log.dir, &log.cache)?;
            }
            sync_dir(dir)?;
            log.recovery_point = log_end_offset;
            log.epochs.checkpoint()?;
        } else if state.clean_shutdown {
            log.recovery_point = log_end_offset;
        }
        Ok((log, report))
    }
}

/// Base offsets of the `.log` files in `dir`, sorted; removes leftovers of interrupted
/// operations (temp files, deleted segments, indexes without a log).
fn list_segment_bases(dir: &Path) -> LogResult<Vec<i64>> {
    let mut bases = Vec::new();
    let mut index_files: Vec<(i64, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".tmp") || name.ends_with(".deleted") {
            fs::remove_file(entry.path())?;
            continue;
        }
        let Some((stem, extension)) = name.split_once('.') else {
            continue;
        };
        if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let base: i64 = stem.parse().map_err(|_| LogError::CorruptFile {
            path: entry.path().display().to_string(),
            reason: "segment name is not an offset".into(),
        })?;
        match extension {
            "log" => bases.push(base),
            "index" | "timeindex" => index_files.push((base, entry.path())),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            fs::remove_file(path)?;
        }
    }
    Ok(bases)
}

pub(crate) fn delete_segment_files(dir: &Path, base: i64) -> io::Result<()> {
    let paths = crate::file_cache::SegmentPaths::new(dir, base);
    for path in [paths.log, paths.offset_index, paths.time_index] {
        match fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
    }
    Ok(())
}
