//! The log of one partition: an ordered set of segments, the last one active. Owns offset
//! assignment, rolling, reads as file slices, truncation (follower), advancing the log
//! start offset (DeleteRecords, retention), the leader epoch cache, flushing and the
//! recovery point. Opening and recovery live in `log_loader`.
//!
//! Not thread-safe by itself: the caller holds it behind a lock. In flush-before-ack mode
//! the caller waits on [`Log::sync_gate`] after releasing that lock (see `append_durably`),
//! which is what lets concurrent appends share one fdatasync.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use strand_records::{
    read_end_txn_marker, set_base_offset, set_log_append_time, set_partition_leader_epoch,
    walk_records, walk_stored_records, BatchHeader, BatchView, EndTxnMarker, RecordsError,
    TimestampType, BATCH_HEADER_BYTES, NO_PARTITION_LEADER_EPOCH, NO_TIMESTAMP,
};

use crate::batch_scan::{BatchScanner, ScanStep};
use crate::checkpoint::Sync;
use crate::clock::Clock;
use crate::config::{Durability, LogConfig};
use crate::error::{LogError, LogResult, RecordError, INVALID_RECORD, INVALID_TIMESTAMP};
use crate::file_cache::{FileCache, SegmentFiles};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{CompletedTxn, Origin, ProducerCheck, ProducerStateManager};
use crate::read_verification::CorruptBatch;
use crate::segment::{AppendError, Segment};
use crate::segment_list::SegmentList;
use crate::sync_gate::SyncGate;

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// The broker's timestamp for LogAppendTime topics, -1 for CreateTime (as Kafka's
    /// produce response reports it).
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub batches: u32,
    pub bytes: u64,
    /// An idempotent producer's retry of a batch already in the log: nothing was written
    /// and the offsets are the original ones.
    pub duplicate: bool,
}

/// What one flush syncs: taken under the log's lock (`Log::begin_flush`), run without it
/// (`run`, blocking), completed under it again (`Log::finish_flush`).
#[derive(Debug)]
pub struct FlushPlan {
    dir: PathBuf,
    gate: Arc<SyncGate>,
    segments: Vec<Arc<SegmentFiles>>,
    /// The deferred files as of the plan, with the write each was last changed by.
    unsynced_files: Vec<(PathBuf, u64)>,
    end: i64,
    truncations: u64,
}

impl FlushPlan {
    /// The fsyncs: files written with deferred syncs, then the data and directory
    /// entries (the sync gate), then every segment's log and indexes from the recovery
    /// point on.
    pub fn run(&self) -> io::Result<()> {
        crate::fault_injection::before_sync(&self.dir)?;
        for (path, _) in &self.unsynced_files {
            crate::checkpoint::sync_file(path)?;
        }
        if !self.unsynced_files.is_empty() {
            // Their renames: the directory entries must be durable too.
            crate::checkpoint::sync_dir(&self.dir)?;
        }
        self.gate.sync_all()?;
        for files in &self.segments {
            files.log.sync_data()?;
            files.offset_index.sync_data()?;
            files.time_index.sync_data()?;
        }
        Ok(())
    }
}

/// A byte range of a segment file, ready for sendfile. Holds the file open.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub files: Arc<SegmentFiles>,
    pub position: u64,
    pub length: u64,
}

impl FileSlice {
    pub fn file(&self) -> &File {
        &self.files.log
    }

    /// Copies the slice into memory (tests, TLS connections).
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; self.length as usize];
        crate::read_mode::read_exact_at(
            &self.files.log,
            &mut bytes,
            self.position,
            crate::read_mode::Extent::Ahead,
        )?;
        Ok(bytes)
    }
}

#[derive(Debug, Clone)]
pub struct ReadResult {
    /// None when there is nothing to return below the upper bound.
    pub slice: Option<FileSlice>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

#[derive(Debug)]
pub struct Log {
    pub(crate) dir: PathBuf,
    pub(crate) config: Arc<LogConfig>,
    pub(crate) cache: Arc<FileCache>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Ordered by base offset; never empty.
    pub(crate) segments: SegmentList,
    pub(crate) log_start_offset: i64,
    pub(crate) high_watermark: i64,
    /// Every batch below this is on disk with its indexes; recovery starts here.
    pub(crate) recovery_point: i64,
    pub(crate) epochs: LeaderEpochCache,
    pub(crate) gate: Arc<SyncGate>,
    /// Set after a storage failure (or the partition's deletion): writes are refused,
    /// reads go on.
    pub(crate) offline: Option<String>,
    /// The health of the log directory this log lives in, shared with its other logs:
    /// a storage failure in any of them takes this one offline too.
    pub(crate) dir_health: std::sync::Arc<crate::dir_health::DirHealth>,
    /// Whether the directory and the active segment's files exist (see
    /// [`Log::create_deferred`]); until they do the log is empty.
    pub(crate) on_disk: bool,
    /// The write path's bookkeeping: flushes owed, deferred fsyncs, files to remove.
    pub(crate) upkeep: Upkeep,
    /// Idempotent producers' sequences, following the log through truncation and recovery.
    pub(crate) producers: ProducerStateManager,
    /// Tiered storage: the end (exclusive) of what the remote store holds, as the broker
    /// last learnt it; None until it knows. Local retention deletes nothing at or above it.
    pub(crate) remote_end: Option<i64>,
}

/// What a log's writes leave to do off the request path, and what they found: counts
/// toward flush.messages / flush.ms, files written with deferred fsyncs, retired segment
/// files to remove, damage a read found. Starts empty at every open.
#[derive(Debug, Default)]
pub(crate) struct Upkeep {
    pub(crate) unflushed_messages: u64,
    pub(crate) first_unflushed_ms: Option<i64>,
    /// flush.messages was reached: the owner should flush (off the request path).
    pub(crate) flush_requested: bool,
    /// Files written with `Sync::Deferred` (producer snapshots, the epoch checkpoint),
    /// synced by the next flush before the recovery point moves: (path, write number).
    /// A flush removes only what it synced at the number it saw, so a concurrent flush or
    /// a newer write of the same file is never lost.
    pub(crate) unsynced_files: Vec<(PathBuf, u64)>,
    pub(crate) deferred_writes: u64,
    /// A flush is between `begin_flush` and `finish_flush` (on another thread).
    pub(crate) flush_running: bool,
    /// Bumped by every truncation: a flush that ran without the lock does not advance the
    /// recovery point over data cut and rewritten meanwhile.
    pub(crate) truncations: u64,
    /// Files of retired segments (renamed `.deleted`), removed off the request path by
    /// the periodic maintenance (`take_doomed`).
    pub(crate) doomed: Vec<PathBuf>,
    /// A read found a damaged batch (reads take `&self`): the replica should step down.
    pub(crate) damage_found: std::sync::atomic::AtomicBool,
}

impl Log {
    /// The partition's name as Kafka prints it (`topic-partition`, the directory's name).
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        self.dir
            .file_name()
            .map(|name| name.to_string_lossy())
            .unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    /// The last stable offset: read_committed consumers read below it. The high
    /// watermark, or the first offset of the oldest transaction not yet stable (open, or
    /// closed by a marker the high watermark has not passed).
    pub fn last_stable_offset(&self) -> i64 {
        self.producers
            .first_unstable_offset()
            .map_or(self.high_watermark, |first| first.min(self.high_watermark))
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    /// Aborted transactions with records in `[from, upper)`, for a read_committed fetch,
    /// sorted by first offset as clients expect them.
    pub fn aborted_txns(&self, from: i64, upper: i64) -> Vec<crate::producer_state::AbortedTxn> {
        let mut found = self.producers.aborted_txns(from, upper);
        found.sort_by_key(|txn| (txn.first_offset, txn.last_offset));
        found
    }
    pub fn leader_epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }
    pub fn sync_gate(&self) -> Arc<SyncGate> {
        self.gate.clone()
    }
    /// The end of what is on stable storage by the durability the topic asks: the log
    /// end with the page cache, what the sync gate has synced with flush before ack.
    pub fn durable_end_offset(&self) -> i64 {
        match self.config.durability {
            Durability::PageCache => self.log_end_offset(),
            Durability::FlushBeforeAck => self.gate.durable_end_offset().min(self.log_end_offset()),
        }
    }
    pub fn is_offline(&self) -> bool {
        self.offline_reason().is_some()
    }
    /// Why writes are refused: this log's own storage failure or deletion, or a failure
    /// elsewhere in its log directory.
    pub fn offline_reason(&self) -> Option<String> {
        if let Some(reason) = &self.offline {
            return Some(reason.clone());
        }
        self.dir_health
            .failure()
            .map(|reason| format!("its log directory is offline: {reason}"))
    }
    /// Shares the health of the log directory this log lives in (a log opened alone has
    /// a directory of its own).
    pub fn set_dir_health(&mut self, health: std::sync::Arc<crate::dir_health::DirHealth>) {
        self.gate.set_dir_health(health.clone());
        self.dir_health = health;
    }
    /// Why this replica should no longer lead or stay in sync: its log went offline
    /// (a storage failure) or a read found a damaged batch. Cleared by a restart.
    pub fn failure(&self) -> Option<String> {
        if let Some(reason) = self.offline_reason() {
            return Some(format!("log offline: {reason}"));
        }
        self.upkeep
            .damage_found
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| "a read found a damaged batch".to_string())
    }
    pub fn is_on_disk(&self) -> bool {
        self.on_disk
    }

    /// Creates the directory and the active segment's files of a log made by
    /// [`Log::create_deferred`]; nothing if they exist. Every write calls it first.
    pub fn materialize(&mut self) -> LogResult<()> {
        if self.on_disk {
            return Ok(());
        }
        self.check_online()?;
        let base_offset = self.active().base_offset();
        let created = std::fs::create_dir_all(&self.dir)
            .and_then(|()| Segment::create_files(&self.dir, base_offset));
        match created {
            Ok(()) => {
                self.on_disk = true;
                // An epoch begun before the files existed (a new leader's, see
                // `begin_leader_epoch`) is checkpointed with them: the first append in
                // that epoch finds it assigned and would not write it.
                if !self.epochs.entries().is_empty() {
                    self.checkpoint_epochs_deferred()?;
                }
                Ok(())
            }
            // Nothing was written: the next write (or the directory thread) tries again.
            Err(error) => Err(LogError::Io(error)),
        }
    }

    /// The partition was deleted: nothing may be written (or created) here any more.
    /// Returns whether its directory exists.
    pub fn mark_deleted(&mut self) -> bool {
        self.offline = Some("the partition was deleted".to_string());
        self.on_disk
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// (base offset, size in bytes) of every segment, oldest first.
    pub fn segment_summaries(&self) -> Vec<(i64, u64)> {
        self.segments
            .iter()
            .map(|s| (s.base_offset(), s.size_bytes()))
            .collect()
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size_bytes).sum()
    }

    pub(crate) fn active(&self) -> &Segment {
        // The segment map is never empty: every constructor and truncation keeps one.
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    /// Applies new topic settings (AlterConfigs); they govern appends and rolls from now on.
    pub fn set_config(&mut self, config: Arc<LogConfig>) {
        self.config = config;
    }

    /// Sets the high watermark, clamped to [log start offset, log end offset].
    pub fn set_high_watermark(&mut self, offset: i64) {
        self.high_watermark = offset.clamp(self.log_start_offset, self.log_end_offset());
        self.producers.on_high_watermark(self.high_watermark);
    }

    /// Validates one batch from a producer, assigns its offsets, stamps the leader epoch
    /// (and LogAppendTime if the topic uses it) and writes it. `batch` must hold exactly
    /// one v2 batch; it is rewritten in place and stored byte for byte.
    pub fn append_as_leader(
        &mut self,
        batch: &mut [u8],
        leader_epoch: i32,
    ) -> LogResult<AppendInfo> {
        self.append_as_leader_from(batch, leader_epoch, Origin::Client)
    }

    /// `append_as_leader` for a batch from `origin`: a coordinator's transactional batch
    /// (TxnOffsetCommit) carries its producer's id and epoch but no sequence, so only its
    /// epoch is checked (Kafka's AppendOrigin.COORDINATOR).
    pub fn append_as_leader_from(
        &mut self,
        batch: &mut [u8],
        leader_epoch: i32,
        origin: Origin,
    ) -> LogResult<AppendInfo> {
        self.check_online()?;
        if batch.len() > self.config.max_message_bytes {
            return Err(RecordsError::TooLarge {
                size_bytes: batch.len(),
                limit_bytes: self.config.max_message_bytes,
            }
            .into());
        }
        let view = BatchView::parse(batch)?;
        if view.bytes.len() != batch.len() {
            return Err(LogError::InvalidRecordSet(
                "a produce request holds exactly one record batch per partition".into(),
            ));
        }
        self.validate_records(&view)?;
        match self.producers.check_from(&view.header, origin)? {
            ProducerCheck::Duplicate(original) => {
                let log_append_time_ms = match self.config.message_timestamp_type {
                    TimestampType::LogAppendTime => original.timestamp,
                    TimestampType::CreateTime => NO_TIMESTAMP,
                };
                return Ok(AppendInfo {
                    first_offset: original.first_offset,
                    last_offset: original.last_offset,
                    max_timestamp: original.timestamp,
                    log_append_time_ms,
                    log_start_offset: self.log_start_offset,
                    batches: 1,
                    bytes: 0,
                    duplicate: true,
                });
            }
            ProducerCheck::Append | ProducerCheck::NotIdempotent => {}
        }

        let first_offset = self.log_end_offset();
        set_base_offset(batch, first_offset);
        set_partition_leader_epoch(batch, leader_epoch);
        let log_append_time_ms = match self.config.message_timestamp_type {
            TimestampType::LogAppendTime => {
                let now = self.clock.now_ms();
                set_log_append_time(batch, now);
                now
            }
            TimestampType::CreateTime => NO_TIMESTAMP,
        };
        let header = BatchHeader::parse(batch)?;
        self.write_batch(batch, &header)?;
        self.producers.update(&header);
        if self.epochs.assign(leader_epoch, first_offset) {
            self.checkpoint_epochs_deferred()?;
        }
        self.after_append(header.records_count as u64)?;
        Ok(AppendInfo {
            first_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
            log_append_time_ms,
            log_start_offset: self.log_start_offset,
            batches: 1,
            bytes: batch.len() as u64,
            duplicate: false,
        })
    }

    /// Kafka's per-record rules for a producer's batch (LogValidator): every record is
    /// walked (framing, count), and records with no key on a compacted topic or with a
    /// CreateTime timestamp outside [now - message.timestamp.before.max.ms, now +
    /// message.timestamp.after.max.ms] are collected, so the refusal names each one.
    fn validate_records(&self, view: &BatchView<'_>) -> LogResult<()> {
        let header = &view.header;
        let compacted = self.config.cleanup_compact;
        let create_time = self.config.message_timestamp_type == TimestampType::CreateTime;
        let producer_log_append_time =
            header.attributes.timestamp_type() == TimestampType::LogAppendTime;
        let now = self.clock.now_ms();
        let earliest = now.saturating_sub(self.config.message_timestamp_before_max_ms);
        let latest = now.saturating_add(self.config.message_timestamp_after_max_ms);
        let partition = self.name();
        let mut errors = Vec::new();
        let mut bad_timestamp = false;
        let mut index = 0i32;
        walk_records(view, self.config.walk_limits, |record| {
            if compacted && record.key.is_none() {
                errors.push(RecordError {
                    batch_index: index,
                    message: format!(
                        "Compacted topic cannot accept message without key in topic partition {partition}."
                    ),
                });
            }
            let timestamp = header.base_timestamp.saturating_add(record.timestamp_delta);
            if create_time && timestamp != NO_TIMESTAMP {
                if timestamp < earliest || timestamp > latest {
                    bad_timestamp = true;
                    errors.push(RecordError {
                        batch_index: index,
                        message: format!(
                            "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{earliest}, {latest}]",
                            header.base_offset + i64::from(record.offset_delta)
                        ),
                    });
                }
            } else if producer_log_append_time {
                bad_timestamp = true;
                errors.push(RecordError {
                    batch_index: index,
                    message: "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.".into(),
                });
            }
            index += 1;
        })?;
        if errors.is_empty() {
            return Ok(());
        }
        let (code, message) = if bad_timestamp {
            (
                INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp".to_string(),
            )
        } else {
            let shown: Vec<String> = errors
                .iter()
                .take(3)
                .map(|e| {
                    format!(
                        "RecordError(batchIndex={}, message='{}')",
                        e.batch_index, e.message
                    )
                })
                .collect();
            (
                INVALID_RECORD,
                format!(
                    "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                    errors.len(),
                    shown.join(", ")
                ),
            )
        };
        Err(LogError::RecordErrors {
            code,
            message,
            records: errors,
        })
    }

    /// Writes a transaction marker as leader at `leader_epoch` (WriteTxnMarkers): closes
    /// the producer's open transaction on this partition. Returns where it went and the
    /// transaction it closed, if one was open.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        leader_epoch: i32,
    ) -> LogResult<(AppendInfo, Option<CompletedTxn>)> {
        self.check_online()?;
        self.producers
            .check_marker(producer_id, producer_epoch, marker.coordinator_epoch)?;
        let now = self.clock.now_ms();
        let mut batch = marker.batch(producer_id, producer_epoch, now);
        let first_offset = self.log_end_offset();
        set_base_offset(&mut batch, first_offset);
        set_partition_leader_epoch(&mut batch, leader_epoch);
        let view = BatchView::parse(&batch)?;
        let header = view.header;
        self.write_batch(view.bytes, &header)?;
        let completed = record_in_producer_state(&mut self.producers, &view)?;
        if self.epochs.assign(leader_epoch, first_offset) {
            self.checkpoint_epochs_deferred()?;
        }
        self.after_append(1)?;
        let info = AppendInfo {
            first_offset,
            last_offset: first_offset,
            max_timestamp: now,
            log_append_time_ms: NO_TIMESTAMP,
            log_start_offset: self.log_start_offset,
            batches: 1,
            bytes: batch.len() as u64,
            duplicate: false,
        };
        Ok((info, completed))
    }

    /// Appends batches fetched from the leader of `leader_epoch`, keeping their offsets
    /// and epochs. Each batch must start exactly at the log end offset. A trailing
    /// incomplete batch (fetch responses may end mid-batch) is ignored; a complete batch
    /// that fails its CRC is not. A batch stamped with a leader epoch above
    /// `leader_epoch` cannot have come from this leader (its bytes were damaged: the
    /// CRC does not cover that field): it and the rest are skipped, as Kafka 4.4 skips
    /// them (UnifiedLog's hasHigherPartitionLeaderEpoch), and the next fetch asks again.
    ///
    /// A damaged batch (a bad CRC, an epoch out of order, a base offset not at our end)
    /// after others that went in ends the append there: those are kept and answered,
    /// with their sync (the next fetch's offset tells the leader we have them, so they
    /// may not be dropped unsynced); the damaged one is fetched again. Only a damaged
    /// first batch is an error.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        leader_epoch: i32,
    ) -> LogResult<Option<AppendInfo>> {
        self.check_online()?;
        let mut rest = records;
        let mut info: Option<AppendInfo> = None;
        while rest.len() >= BATCH_HEADER_BYTES {
            let header = match BatchHeader::parse(rest) {
                Ok(header) => header,
                Err(_) if info.is_some() => break,
                Err(error) => return Err(error.into()),
            };
            let total = header.total_bytes();
            if total >= BATCH_HEADER_BYTES as i64 && total > rest.len() as i64 {
                break; // partial trailing batch
            }
            if header.partition_leader_epoch != NO_PARTITION_LEADER_EPOCH
                && header.partition_leader_epoch > leader_epoch
            {
                tracing::info!(dir = %self.dir.display(), batch_epoch = header.partition_leader_epoch, leader_epoch, base_offset = header.base_offset, "skipping fetched batches stamped with a leader epoch above the leader's");
                break;
            }
            // Nor can a batch after our log end carry an epoch below our latest one
            // (epochs only grow along a log, and truncation by leader epoch left ours a
            // prefix of the leader's): damaged the same way. Kafka accepts it and its
            // epoch cache ignores the epoch, leaving a replica whose batch says another
            // epoch than the leader's (the simulator's corrupt reads found it); refused
            // here as a CRC mismatch is, so the next fetch reads it again.
            // A negative epoch other than "none" (-1) exists in no format: damaged too,
            // and the only sign of it a follower with an empty log has (the simulator's
            // corrupt reads found one: epoch 0 read as i32::MIN at offset 0).
            let latest_epoch = self.epochs.latest().map(|e| e.epoch);
            let view = if header.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH {
                Err(RecordsError::Corrupt(format!(
                    "batch at offset {} carries leader epoch {}",
                    header.base_offset, header.partition_leader_epoch
                )))
            } else if header.partition_leader_epoch != NO_PARTITION_LEADER_EPOCH
                && latest_epoch.is_some_and(|latest| header.partition_leader_epoch < latest)
            {
                Err(RecordsError::Corrupt(format!(
                    "batch at offset {} carries leader epoch {}, below the log's latest {}",
                    header.base_offset,
                    header.partition_leader_epoch,
                    latest_epoch.unwrap_or_default()
                )))
            } else {
                BatchView::parse(rest)
            };
            let view = match view {
                Ok(view) => view,
                Err(error) if info.is_some() => {
                    tracing::warn!(dir = %self.dir.display(), %error, "a fetched batch is damaged; the batches before it are kept");
                    break;
                }
                Err(error) => return Err(error.into()),
            };
            let end = self.log_end_offset();
            if info.is_some() && header.base_offset != end {
                break; // a damaged base offset (the CRC does not cover it)
            }
            if header.base_offset != end || header.last_offset_delta < 0 {
                return Err(LogError::NonMonotonicOffset {
                    batch_base_offset: header.base_offset,
                    log_end_offset: end,
                });
            }
            self.write_batch(view.bytes, &header)?;
            record_in_producer_state(&mut self.producers, &view)?;
            if self
                .epochs
                .assign(header.partition_leader_epoch, header.base_offset)
            {
                self.checkpoint_epochs_deferred()?;
            }
            self.after_append(header.records_count.max(0) as u64)?;
            let info = info.get_or_insert(AppendInfo {
                first_offset: header.base_offset,
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                log_append_time_ms: NO_TIMESTAMP,
                log_start_offset: self.log_start_offset,
                batches: 0,
                bytes: 0,
                duplicate: false,
            });
            info.last_offset = header.last_offset();
            info.max_timestamp = info.max_timestamp.max(header.max_timestamp);
            info.batches += 1;
            info.bytes += view.bytes.len() as u64;
            rest = &rest[view.bytes.len()..];
        }
        Ok(info)
    }

    /// Rolls if needed, writes to the active segment, tells the sync gate.
    fn write_batch(&mut self, batch: &[u8], header: &BatchHeader) -> LogResult<()> {
        self.materialize()?;
        self.maybe_roll(batch.len() as u64, header)?;
        let (dir, cache, interval) = (
            self.dir.clone(),
            self.cache.clone(),
            self.config.index_interval_bytes,
        );
        let result = self
            .active_mut()
            .append(&dir, &cache, batch, header, interval);
        match result {
            Ok(()) => {}
            // Cut back cleanly (a full disk, say): the log is as it was; the next write
            // tries again, so freeing space needs no restart.
            Err(AppendError::Undone(error)) => {
                tracing::warn!(dir = %self.dir.display(), %error, "append failed and was undone");
                return Err(LogError::Io(error));
            }
            Err(AppendError::Damaged(error)) => return Err(self.go_offline(error)),
        }
        let active = self.active();
        self.gate
            .note_written(active.id(), active.base_offset(), active.next_offset());
        Ok(())
    }

    fn after_append(&mut self, records: u64) -> LogResult<()> {
        self.upkeep.unflushed_messages += records;
        let now = self.clock.now_ms();
        self.upkeep.first_unflushed_ms.get_or_insert(now);
        let by_count = self
            .config
            .flush_messages
            .is_some_and(|limit| self.upkeep.unflushed_messages >= limit);
        if by_count || self.flush_due_by_time(now) {
            // Not here, under the lock and on the request path: the owner flushes.
            self.upkeep.flush_requested = true;
        }
        Ok(())
    }

    /// Whether flush.messages or flush.ms asked for a flush since the last one began
    /// (the owner runs `begin_flush`, `FlushPlan::run` off the lock, `finish_flush`).
    pub fn flush_requested(&self) -> bool {
        self.upkeep.flush_requested
    }

    fn flush_due_by_time(&self, now_ms: i64) -> bool {
        match (self.config.flush_ms, self.upkeep.first_unflushed_ms) {
            (Some(flush_ms), Some(first)) => now_ms - first >= flush_ms,
            _ => false,
        }
    }

    fn maybe_roll(&mut self, batch_bytes: u64, header: &BatchHeader) -> LogResult<()> {
        let index_max_entries = (self.config.segment_index_bytes / 12).max(1);
        let now = self.clock.now_ms();
        let active = self.active();
        let full = active.is_full_for(
            batch_bytes,
            header.last_offset(),
            self.config.segment_bytes,
            index_max_entries,
        );
        let old = !active.is_empty()
            && active.age_ms(now) > self.config.roll_age_ms(active.base_offset());
        if full || old {
            self.roll(header.base_offset)?;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one at `base_offset` (the log end offset).
    pub fn roll(&mut self, base_offset: i64) -> LogResult<()> {
        self.materialize()?;
        self.check_online()?;
        if self.active().is_empty() && self.active().base_offset() == base_offset {
            return Ok(());
        }
        let (dir, cache) = (self.dir.clone(), self.cache.clone());
        let now = self.clock.now_ms();
        // A roll that fails (a full disk) changes nothing: the next append tries again.
        // The new segment's files first.
        let segment = match Segment::create(&dir, base_offset, &cache, now) {
            Ok(segment) => segment,
            Err(error) => {
                let _ = crate::log_loader::delete_segment_files(&dir, base_offset);
                tracing::warn!(dir = %dir.display(), %error, "rolling a new segment failed");
                return Err(LogError::Io(error));
            }
        };
        // Sealing writes the old segment's buffered index entries; entries that fail to
        // reach the file stay buffered and are written again at the next try, so a
        // failed seal leaves the old segment active and whole.
        if let Err(error) = self.active_mut().seal(&dir, &cache) {
            let _ = crate::log_loader::delete_segment_files(&dir, base_offset);
            tracing::warn!(dir = %dir.display(), %error, "sealing the active segment failed");
            return Err(LogError::Io(error));
        }
        self.segments.push(segment);
        self.gate.note_dir_changed();
        // Producer state as of the new segment's base, so recovery replays at most one
        // segment to rebuild it.
        // Synced by the next flush, not here on the request path (as Kafka's roll).
        match self
            .producers
            .take_snapshot_with(&dir, base_offset, Sync::Deferred)
        {
            Ok(path) => self.note_deferred_write(path),
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "producer snapshot failed")
            }
        }
        Ok(())
    }

    /// Reads from the batch containing `start_offset`: at most `max_bytes` (but at least
    /// the whole first batch when `min_one_batch`, so consumers always progress), never
    /// past `upper_bound_offset` (the high watermark for consumers). Like Kafka, the slice
    /// may end inside a batch; clients drop a partial trailing batch.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u64,
        upper_bound_offset: i64,
        min_one_batch: bool,
    ) -> LogResult<ReadResult> {
        let log_end_offset = self.log_end_offset();
        let mut result = ReadResult {
            slice: None,
            log_start_offset: self.log_start_offset,
            log_end_offset,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
        };
        if start_offset < self.log_start_offset || start_offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        let upper = upper_bound_offset.min(log_end_offset);
        if start_offset >= upper {
            return Ok(result);
        }
        for segment in self
            .segments
            .iter_from(self.segments.floor_index(start_offset))
        {
            let Some(first) = segment.find_batch(&self.dir, &self.cache, start_offset)? else {
                continue;
            };
            if first.header.base_offset >= upper {
                return Ok(result);
            }
            let end_position = if upper >= segment.next_offset() {
                segment.size_bytes()
            } else {
                segment.position_of(&self.dir, &self.cache, upper)?
            };
            if end_position <= first.position {
                return Ok(result);
            }
            let budget = if min_one_batch {
                max_bytes.max(first.size_bytes())
            } else {
                max_bytes
            };
            let length = (end_position - first.position).min(budget);
            if length > 0 {
                let files = segment.files(&self.dir, &self.cache)?;
                // Data an earlier process wrote and recovery did not check may have been
                // damaged at rest: the batches before a damaged one are served, the
                // damaged one never.
                let end = first.position + length;
                let length = match segment.verify_for_read(&files, first.position, end)? {
                    Ok(()) => length,
                    Err(corrupt) if corrupt.position > first.position => {
                        corrupt.position - first.position
                    }
                    Err(corrupt) => return Err(self.corrupt_batch(segment, corrupt)),
                };
                // sendfile on a runtime worker must find the region in the page cache.
                crate::read_mode::ensure_cached(&files.log, first.position, length)?;
                result.slice = Some(FileSlice {
                    files,
                    position: first.position,
                    length,
                });
            }
            return Ok(result);
        }
        Ok(result)
    }

    /// ListOffsets by timestamp: the first record (at or after the log start offset) whose
    /// timestamp is at or after `timestamp`, as Kafka finds it.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> LogResult<Option<TimestampOffset>> {
        for segment in self.segments.iter() {
            if segment.is_empty() || segment.max_timestamp() < timestamp {
                continue;
            }
            let Some(batch) = segment.find_batch_by_timestamp(&self.dir, &self.cache, timestamp)?
            else {
                continue;
            };
            // Scan on from that batch: a record-level match may sit in a later batch when
            // the first candidates lie below the log start offset.
            let mut offset = batch.header.base_offset;
            while offset < segment.next_offset() {
                let Some(batch) = segment.find_batch(&self.dir, &self.cache, offset)? else {
                    break;
                };
                if batch.header.max_timestamp >= timestamp {
                    let found = self.first_record_matching(
                        segment,
                        &batch,
                        |record_timestamp, record_offset| {
                            record_timestamp >= timestamp && record_offset >= self.log_start_offset
                        },
                    )?;
                    if found.is_some() {
                        return Ok(found);
                    }
                }
                offset = batch.header.next_offset();
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the first record carrying the largest timestamp.
    pub fn max_timestamp_offset(&self) -> LogResult<Option<TimestampOffset>> {
        let best = self
            .segments
            .iter()
            .filter(|segment| !segment.is_empty())
            .fold(None::<&Segment>, |best, segment| match best {
                Some(best) if best.max_timestamp() >= segment.max_timestamp() => Some(best),
                _ => Some(segment),
            });
        let Some(segment) = best else { return Ok(None) };
        let max = segment.max_timestamp();
        let Some(batch) =
            segment.find_batch(&self.dir, &self.cache, segment.offset_of_max_timestamp())?
        else {
            return Ok(None);
        };
        self.first_record_matching(segment, &batch, |record_timestamp, _| {
            record_timestamp == max
        })
    }

    fn first_record_matching(
        &self,
        segment: &Segment,
        batch: &crate::batch_scan::ScannedBatch,
        matches: impl Fn(i64, i64) -> bool,
    ) -> LogResult<Option<TimestampOffset>> {
        let files = segment.files(&self.dir, &self.cache)?;
        let bytes = read_batch(&files, batch)?;
        first_record_in_batch(&bytes, self.config.walk_limits, matches)
    }

    /// Removes every record at or after `offset` (a follower after a leader change).
    /// Batches are removed whole, so the new end may be below `offset` if it fell inside
    /// a batch. Returns whether anything was removed.
    pub fn truncate_to(&mut self, offset: i64) -> LogResult<bool> {
        self.materialize()?;
        self.check_online()?;
        if offset < 0 {
            // Kafka refuses it too: a log cut to -1 would serve and take nothing sane.
            return Err(LogError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot truncate {} to negative offset {offset}",
                    self.dir.display()
                ),
            )));
        }
        if offset >= self.log_end_offset() {
            // Nothing to cut, but the epoch cache may end in an epoch this broker began
            // as leader and never appended in (`begin_leader_epoch`): it conflicts with
            // the new leader's, which would answer every fetch with a diverging epoch
            // that cuts nothing, for ever. Kafka's truncateTo drops it too.
            let end = self.log_end_offset();
            if self.epochs.truncate_from_end(end) {
                self.epochs.checkpoint()?;
            }
            return Ok(false);
        }
        let first_base = self
            .segments
            .first()
            .expect("a log always has a segment")
            .base_offset();
        if offset <= first_base || offset < self.log_start_offset {
            self.truncate_fully_and_start_at(offset)?;
            return Ok(true);
        }
        let (dir, cache) = (self.dir.clone(), self.cache.clone());
        // Segments starting at or after `offset` go whole; the one before is cut.
        let keep = self.segments.floor_index(offset - 1) + 1;
        for segment in self.segments.split_off(keep) {
            match segment.retire(&dir, &cache) {
                Ok(doomed) => self.upkeep.doomed.extend(doomed),
                Err(error) => return Err(self.go_offline(error)),
            }
        }
        if let Err(error) = self.active_mut().truncate_to(&dir, &cache, offset) {
            return Err(self.go_offline(error));
        }
        self.after_truncation()?;
        Ok(true)
    }

    /// Deletes everything and restarts the log empty at `offset`.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> LogResult<()> {
        self.materialize()?;
        self.check_online()?;
        let (dir, cache) = (self.dir.clone(), self.cache.clone());
        for segment in self.segments.take_all() {
            match segment.retire(&dir, &cache) {
                Ok(doomed) => self.upkeep.doomed.extend(doomed),
                Err(error) => return Err(self.go_offline(error)),
            }
        }
        match Segment::create(&dir, offset, &cache, self.clock.now_ms()) {
            Ok(segment) => self.segments.push(segment),
            Err(error) => return Err(self.go_offline(error)),
        }
        self.gate.note_dir_changed();
        self.gate.note_restarted_at(offset);
        self.log_start_offset = offset;
        self.epochs.clear();
        // Every snapshot describes the discarded log.
        ProducerStateManager::delete_snapshots_above(&self.dir, i64::MIN)?;
        self.after_truncation()
    }

    fn after_truncation(&mut self) -> LogResult<()> {
        let end = self.log_end_offset();
        self.upkeep.truncations += 1;
        self.gate.note_truncated(end);
        self.recovery_point = self.recovery_point.min(end);
        self.log_start_offset = self.log_start_offset.min(end);
        self.high_watermark = self.high_watermark.clamp(self.log_start_offset, end);
        self.epochs.truncate_from_end(end);
        self.epochs.checkpoint()?;
        ProducerStateManager::delete_snapshots_above(&self.dir, end)?;
        self.rebuild_producer_state()?;
        crate::checkpoint::sync_dir(&self.dir)?;
        Ok(())
    }

    /// Loads the newest producer snapshot at or below the log end and replays the
    /// batches after it, so the state describes exactly the log as it now is.
    pub(crate) fn rebuild_producer_state(&mut self) -> LogResult<()> {
        let end = self.log_end_offset();
        let (mut producers, from) = ProducerStateManager::load(&self.dir, end)?;
        let from = from.unwrap_or(i64::MIN);
        for segment in self.segments.iter_from(self.segments.floor_index(from)) {
            if segment.next_offset() <= from {
                continue;
            }
            let files = segment.files(&self.dir, &self.cache)?;
            let mut scanner = BatchScanner::new(&files.log, 0, segment.size_bytes());
            while let ScanStep::Batch(batch) = scanner.next_header()? {
                if batch.header.base_offset < from {
                    continue;
                }
                if batch.header.attributes.is_control() {
                    // A marker's type is in its record: read the (small) batch whole.
                    let bytes = read_batch(&files, &batch)?;
                    record_in_producer_state(&mut producers, &BatchView::parse(&bytes)?)?;
                } else {
                    producers.update(&batch.header);
                }
            }
        }
        producers.on_high_watermark(self.high_watermark);
        self.producers = producers;
        Ok(())
    }

    /// The idempotent-producer state (for tests and diagnostics).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// DeleteRecords and retention: moves the log start offset up to `offset` and deletes
    /// the segments wholly below it (never the active one). Offsets below the new start
    /// read as out of range. Returns whether the start moved.
    pub fn delete_before(&mut self, offset: i64) -> LogResult<bool> {
        let end = self.log_end_offset();
        if offset > end || offset < 0 {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: end,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.materialize()?;
        self.log_start_offset = offset;
        self.high_watermark = self.high_watermark.max(offset);
        self.producers.forget_aborted_below(offset);
        if self.epochs.truncate_from_start(offset) {
            self.checkpoint_epochs_deferred()?;
        }
        // A segment is wholly below the new start when the next one starts at or before it.
        let below = self
            .segments
            .iter()
            .skip(1)
            .take_while(|next| next.base_offset() <= offset)
            .count();
        let (dir, cache) = (self.dir.clone(), self.cache.clone());
        for segment in self.segments.drain_front(below) {
            self.upkeep.doomed.extend(segment.retire(&dir, &cache)?);
        }
        Ok(true)
    }

    /// The retired segments' files to remove now (maintenance; shutdown).
    pub fn take_doomed(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.upkeep.doomed)
    }

    /// OffsetForLeaderEpoch: (largest epoch <= `epoch`, the offset where the next starts).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }

    /// Writes everything to disk (log and indexes) and advances the recovery point, all
    /// under the caller's lock (shutdown, tests). The broker flushes in three steps
    /// instead, so the fsyncs run with no lock held and off the request path.
    pub fn flush(&mut self) -> LogResult<()> {
        match self.begin_flush()? {
            None => Ok(()),
            Some(plan) => {
                let synced = plan.run();
                self.finish_flush(plan, synced)
            }
        }
    }

    /// Takes what a flush must sync (writing buffered index entries to the page cache);
    /// None if nothing was written since the last one.
    pub fn begin_flush(&mut self) -> LogResult<Option<FlushPlan>> {
        self.upkeep.flush_requested = false;
        if self.is_offline() {
            return Ok(None);
        }
        self.upkeep.flush_running = true;
        let end = self.log_end_offset();
        if self.recovery_point >= end && self.upkeep.unsynced_files.is_empty() {
            return Ok(None); // nothing written since the last full flush
        }
        let floor = self.segments.floor_index(self.recovery_point);
        let (dir, cache) = (&self.dir, &self.cache);
        let mut segments = Vec::new();
        let mut prepared = Ok(());
        for segment in self.segments.iter_mut_from(floor) {
            match segment.prepare_sync(dir, cache) {
                Ok(files) => segments.push(files),
                Err(error) => {
                    prepared = Err(error);
                    break;
                }
            }
        }
        if let Err(error) = prepared {
            return Err(self.go_offline(error));
        }
        self.upkeep.unflushed_messages = 0;
        self.upkeep.first_unflushed_ms = None;
        Ok(Some(FlushPlan {
            dir: self.dir.clone(),
            gate: self.gate.clone(),
            segments,
            unsynced_files: self.upkeep.unsynced_files.clone(),
            end,
            truncations: self.upkeep.truncations,
        }))
    }

    /// Completes a flush: advances the recovery point to what it synced (unless a
    /// truncation came in between), or takes the log offline after a failed fsync.
    pub fn finish_flush(&mut self, plan: FlushPlan, synced: io::Result<()>) -> LogResult<()> {
        self.upkeep.flush_running = false;
        if let Err(error) = synced {
            return Err(self.go_offline(error));
        }
        self.upkeep
            .unsynced_files
            .retain(|entry| !plan.unsynced_files.contains(entry));
        if self.upkeep.truncations == plan.truncations {
            self.recovery_point = self.recovery_point.max(plan.end);
        }
        Ok(())
    }

    /// Whether a flush is running on another thread (maintenance skips the log then:
    /// a stalled disk under it must not hold up the others' flushes).
    pub fn flush_running(&self) -> bool {
        self.upkeep.flush_running
    }

    /// A new leader's epoch begins at the log end, before its first append (Kafka's
    /// makeLeader assigns it at once): without it, a follower asking where its own newer
    /// epoch ends is answered undefined until this leader appends, and truncates to its
    /// high watermark, which may be below committed records (KIP-101's loss).
    /// A log not yet on disk (a new partition, materialized in the background) keeps
    /// the epoch in memory until `materialize`; one offline (failed or deleted) only in
    /// memory, where the answers come from.
    pub fn begin_leader_epoch(&mut self, epoch: i32) -> LogResult<()> {
        let assigned = self.epochs.assign(epoch, self.log_end_offset());
        if assigned && self.on_disk && self.offline.is_none() {
            self.checkpoint_epochs_deferred()?;
        }
        Ok(())
    }

    /// The epoch checkpoint after a new epoch on the write path: written now, synced by
    /// the next flush.
    fn checkpoint_epochs_deferred(&mut self) -> LogResult<()> {
        self.epochs.checkpoint_with(Sync::Deferred)?;
        let path = self.epochs.path().to_path_buf();
        self.note_deferred_write(path);
        Ok(())
    }

    /// A file written with `Sync::Deferred`: the next flush syncs it. Snapshots beyond
    /// the few kept are deleted, so paths of files gone are dropped (bounded list).
    fn note_deferred_write(&mut self, path: PathBuf) {
        self.upkeep.deferred_writes += 1;
        self.upkeep.unsynced_files.retain(|(p, _)| *p != path);
        self.upkeep
            .unsynced_files
            .push((path, self.upkeep.deferred_writes));
        if self.upkeep.unsynced_files.len() > 16 {
            self.upkeep.unsynced_files.retain(|(p, _)| p.exists());
        }
    }

    /// Periodic work: producer expiry; then whether flush.ms (or flush.messages) asks for
    /// a flush, which the caller runs (`begin_flush`).
    pub fn flush_due(&mut self) -> bool {
        let now = self.clock.now_ms();
        self.producers
            .remove_expired(now, self.config.producer_id_expiration_ms);
        self.upkeep.flush_requested || self.flush_due_by_time(now)
    }

    /// Flushes and checkpoints the epoch cache, for a clean shutdown.
    pub fn close(&mut self) -> LogResult<()> {
        if !self.on_disk {
            return Ok(()); // empty, and recreated from the topic metadata if need be
        }
        self.flush()?;
        let (dir, cache) = (self.dir.clone(), self.cache.clone());
        self.active_mut().release_preallocation(&dir, &cache)?;
        self.producers
            .take_snapshot(&self.dir, self.log_end_offset())?;
        for path in self.take_doomed() {
            let _ = std::fs::remove_file(path);
        }
        self.epochs.checkpoint()
    }

    /// The error for a damaged batch a read found, logged where it lies.
    fn corrupt_batch(&self, segment: &Segment, corrupt: CorruptBatch) -> LogError {
        let path = crate::file_cache::SegmentPaths::new(&self.dir, segment.base_offset())
            .log
            .display()
            .to_string();
        tracing::error!(%path, position = corrupt.position, reason = %corrupt.reason, "corrupt batch found by a read; not serving it");
        self.upkeep
            .damage_found
            .store(true, std::sync::atomic::Ordering::Relaxed);
        LogError::CorruptBatch {
            path,
            position: corrupt.position,
            reason: corrupt.reason,
        }
    }

    fn check_online(&self) -> LogResult<()> {
        match self.offline_reason() {
            Some(reason) => Err(LogError::Offline(reason)),
            None => Ok(()),
        }
    }

    /// Marks the log offline after a storage failure and returns the error to report.
    fn go_offline(&mut self, error: io::Error) -> LogError {
        tracing::error!(dir = %self.dir.display(), %error, "log storage failure; refusing further writes");
        let reason = format!("{}: {error}", self.name());
        if self.dir_health.fail(reason) {
            let parent = self.dir.parent().unwrap_or(&self.dir);
            tracing::error!(log_dir = %parent.display(), %error, "log directory offline: its partitions refuse writes until a restart");
        }
        self.offline = Some(error.to_string());
        LogError::Io(error)
    }
}

/// Appends as leader under `log`'s lock, then, in flush-before-ack mode, waits for the
/// batch to be durable with the lock released, so concurrent appenders share syncs.
pub fn append_durably(
    log: &Mutex<Log>,
    batch: &mut [u8],
    leader_epoch: i32,
) -> LogResult<AppendInfo> {
    let (info, gate, durability) = {
        let mut guard = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let info = guard.append_as_leader(batch, leader_epoch)?;
        (info, guard.sync_gate(), guard.config.durability)
    };
    if durability == Durability::FlushBeforeAck {
        gate.wait_durable(info.last_offset + 1)?;
    }
    Ok(info)
}

/// Records a written batch in the producer state: a transaction marker closes its
/// producer's transaction, any other batch is a producer's write.
fn record_in_producer_state(
    producers: &mut ProducerStateManager,
    batch: &BatchView<'_>,
) -> LogResult<Option<CompletedTxn>> {
    if !batch.header.attributes.is_control() {
        producers.update(&batch.header);
        return Ok(None);
    }
    Ok(match read_end_txn_marker(batch)? {
        Some(marker) => producers.complete_txn(&batch.header, marker),
        None => None,
    })
}

/// A scanned batch's bytes, whole.
/// The first record of the stored batch `bytes` that `matches` (timestamp, offset):
/// ListOffsets by timestamp, on a local segment or a remote copy's bytes.
pub fn first_record_in_batch(
    bytes: &[u8],
    limits: strand_records::WalkLimits,
    matches: impl Fn(i64, i64) -> bool,
) -> LogResult<Option<TimestampOffset>> {
    let view = BatchView::parse(bytes)?;
    let header = view.header;
    let log_append_time = header.attributes.timestamp_type() == TimestampType::LogAppendTime;
    let mut found = None;
    walk_stored_records(&view, limits, |record| {
        if found.is_some() {
            return;
        }
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp + record.timestamp_delta
        };
        let offset = header.base_offset + record.offset_delta as i64;
        if matches(timestamp, offset) {
            found = Some(TimestampOffset { timestamp, offset });
        }
    })?;
    Ok(found)
}

fn read_batch(
    files: &crate::file_cache::SegmentFiles,
    batch: &crate::batch_scan::ScannedBatch,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; batch.size_bytes() as usize];
    crate::read_mode::read_exact_at(
        &files.log,
        &mut bytes,
        batch.position,
        crate::read_mode::Extent::Ahead,
    )?;
    Ok(bytes)
}
