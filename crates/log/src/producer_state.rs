//! Idempotent-producer state of one partition: for each producer id, its epoch and the
//! metadata of its last five batches (sequence range, offsets, timestamp). A retried batch
//! that matches one of them is answered with its original offsets instead of being
//! written again; a gap or a stale epoch gets Kafka's error. Like Kafka 4.x, a producer
//! the partition has no record of may start at any sequence. This is
//! Kafka's ProducerStateManager, kept with the log (not the broker) because it must follow
//! the log exactly through truncation and crash recovery.
//!
//! Bounds: `BATCHES_PER_PRODUCER` entries per producer, `PRODUCERS_PER_PARTITION_MAX`
//! producers per partition (the least recently active is evicted beyond it), and
//! producers idle longer than producer.id.expiration.ms are expired.
//!
//! Snapshots: `<20-digit offset>.snapshot` in the partition directory holds the state as
//! of that offset (taken at segment roll and clean shutdown), CRC-protected. Loading
//! replays the log from the newest snapshot at or below the log end.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use strand_records::{BatchHeader, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

use crate::checkpoint::{replace_file, Sync};

/// Kafka keeps the last five batches per producer (max.in.flight.requests.per.connection).
pub const BATCHES_PER_PRODUCER: usize = 5;
/// Producers remembered per partition before the least recently active is forgotten.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 100_000;
/// Kafka's producer.id.expiration.ms default: one day.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 24 * 60 * 60 * 1000;
const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_MAGIC: &[u8; 8] = b"STRPST01";
/// Snapshots kept after taking a new one.
const SNAPSHOTS_KEPT: usize = 2;

/// One batch a producer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first, at most `BATCHES_PER_PRODUCER`.
    pub batches: Vec<BatchMetadata>,
    /// Max timestamp of its latest batch: what expiration measures.
    pub last_timestamp: i64,
    /// Offset of its latest batch, for least-recently-active eviction.
    pub last_offset: i64,
}

impl ProducerEntry {
    fn last_sequence(&self) -> Option<i32> {
        self.batches.last().map(|batch| batch.last_sequence)
    }
}

/// What a producer batch is, checked against the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerCheck {
    /// Not an idempotent batch (no producer id).
    NotIdempotent,
    /// A new batch in sequence: write it.
    Append,
    /// Already written: answer with this metadata and do not write.
    Duplicate(BatchMetadata),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    #[error("out of order sequence number for producer {producer_id}: {found} after {last:?}")]
    OutOfOrderSequence {
        producer_id: i64,
        found: i32,
        last: Option<i32>,
    },
    /// INVALID_PRODUCER_EPOCH (47): an epoch older than the producer's current one.
    #[error("producer {producer_id} epoch {found} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        found: i16,
        current: i16,
    },
}

impl ProducerError {
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            ProducerError::OutOfOrderSequence { .. } => 45,
            ProducerError::InvalidProducerEpoch { .. } => 47,
        }
    }
}

/// The last sequence of a batch, wrapping past i32::MAX as Kafka's sequences do.
pub fn last_sequence(first_sequence: i32, last_offset_delta: i32) -> i32 {
    ((first_sequence as i64 + last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Kafka's checks for a batch from a client, before it is written.
    pub fn check(&self, header: &BatchHeader) -> Result<ProducerCheck, ProducerError> {
        if header.producer_id == NO_PRODUCER_ID {
            return Ok(ProducerCheck::NotIdempotent);
        }
        let producer_id = header.producer_id;
        let first = header.base_sequence;
        let last = last_sequence(first, header.last_offset_delta);
        // Kafka 4.x accepts any sequence from a producer the partition has no record of
        // (it may have expired, or its batches were deleted by retention): only a known
        // producer's sequence is checked.
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(ProducerCheck::Append);
        };
        if header.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                found: header.producer_epoch,
                current: entry.epoch,
            });
        }
        if header.producer_epoch == entry.epoch {
            if let Some(duplicate) = entry
                .batches
                .iter()
                .find(|b| b.first_sequence == first && b.last_sequence == last)
            {
                return Ok(ProducerCheck::Duplicate(*duplicate));
            }
            let current_last = entry.last_sequence();
            match current_last {
                Some(current) if !in_sequence(current, first) => {
                    return Err(ProducerError::OutOfOrderSequence {
                        producer_id,
                        found: first,
                        last: current_last,
                    })
                }
                _ => {}
            }
            return Ok(ProducerCheck::Append);
        }
        // A newer epoch starts its sequences again at zero.
        if first != 0 {
            return Err(ProducerError::OutOfOrderSequence {
                producer_id,
                found: first,
                last: None,
            });
        }
        Ok(ProducerCheck::Append)
    }

    /// Records a written batch (appended as leader or follower, or replayed at load).
    pub fn update(&mut self, header: &BatchHeader) {
        if header.producer_id == NO_PRODUCER_ID || header.producer_epoch == NO_PRODUCER_EPOCH {
            return;
        }
        let batch = BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header.base_sequence, header.last_offset_delta),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            timestamp: header.max_timestamp,
        };
        if !self.producers.contains_key(&header.producer_id)
            && self.producers.len() >= PRODUCERS_PER_PARTITION_MAX
        {
            self.evict_least_recently_active();
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: header.producer_epoch,
                batches: Vec::with_capacity(1),
                last_timestamp: batch.timestamp,
                last_offset: batch.last_offset,
            });
        if header.producer_epoch > entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == BATCHES_PER_PRODUCER {
            entry.batches.remove(0);
        }
        entry.batches.push(batch);
        entry.last_timestamp = batch.timestamp;
        entry.last_offset = batch.last_offset;
    }

    fn evict_least_recently_active(&mut self) {
        if let Some((&oldest, _)) = self
            .producers
            .iter()
            .min_by_key(|(_, entry)| entry.last_offset)
        {
            self.producers.remove(&oldest);
        }
    }

    /// Forgets producers idle for longer than `expiration_ms`. Returns how many.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, entry| now_ms - entry.last_timestamp < expiration_ms);
        before - self.producers.len()
    }

    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Writes a snapshot of the state as of `offset` (everything below it applied), then
    /// deletes all but the newest `SNAPSHOTS_KEPT` snapshots. Returns its path.
    pub fn take_snapshot(&self, dir: &Path, offset: i64) -> io::Result<PathBuf> {
        self.take_snapshot_with(dir, offset, Sync::Now)
    }

    /// `take_snapshot`, synced now or by the log's next flush (a damaged or missing
    /// snapshot after a crash is ignored: recovery replays from an older one or the log).
    pub fn take_snapshot_with(&self, dir: &Path, offset: i64, sync: Sync) -> io::Result<PathBuf> {
        let mut body = Vec::new();
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (producer_id, entry) in &self.producers {
            body.extend_from_slice(&producer_id.to_be_bytes());
            body.extend_from_slice(&entry.epoch.to_be_bytes());
            body.extend_from_slice(&entry.last_timestamp.to_be_bytes());
            body.extend_from_slice(&entry.last_offset.to_be_bytes());
            body.push(entry.batches.len() as u8);
            for batch in &entry.batches {
                body.extend_from_slice(&batch.first_sequence.to_be_bytes());
                body.extend_from_slice(&batch.last_sequence.to_be_bytes());
                body.extend_from_slice(&batch.first_offset.to_be_bytes());
                body.extend_from_slice(&batch.last_offset.to_be_bytes());
                body.extend_from_slice(&batch.timestamp.to_be_bytes());
            }
        }
        let mut file = Vec::with_capacity(body.len() + 12);
        file.extend_from_slice(SNAPSHOT_MAGIC);
        file.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        file.extend_from_slice(&body);
        let path = snapshot_path(dir, offset);
        replace_file(&path, &file, sync)?;
        let snapshots = list_snapshots(dir)?;
        if snapshots.len() > SNAPSHOTS_KEPT {
            for (_, path) in &snapshots[..snapshots.len() - SNAPSHOTS_KEPT] {
                let _ = fs::remove_file(path);
            }
        }
        Ok(path)
    }

    /// Loads the newest valid snapshot at or below `max_offset`, deleting snapshots above
    /// it (they describe a log that no longer exists) and damaged ones. Returns the state
    /// and the offset to replay the log from (None: no usable snapshot, replay everything).
    pub fn load(dir: &Path, max_offset: i64) -> io::Result<(ProducerStateManager, Option<i64>)> {
        let snapshots = list_snapshots(dir)?;
        for (offset, path) in snapshots.iter().rev() {
            if *offset > max_offset {
                fs::remove_file(path)?;
                continue;
            }
            match fs::read(path).ok().and_then(|bytes| parse_snapshot(&bytes)) {
                Some((snapshot_offset, state)) if snapshot_offset == *offset => {
                    return Ok((state, Some(*offset)))
                }
                _ => {
                    tracing::warn!(path = %path.display(), "damaged producer snapshot ignored");
                    fs::remove_file(path)?;
                }
            }
        }
        Ok((ProducerStateManager::default(), None))
    }

    /// Deletes snapshots above `offset` (after a truncation).
    pub fn delete_snapshots_above(dir: &Path, offset: i64) -> io::Result<()> {
        for (snapshot_offset, path) in list_snapshots(dir)? {
            if snapshot_offset > offset {
                fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// (offset, path) of every snapshot in `dir`, oldest first.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut snapshots = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) else {
            continue;
        };
        if let Ok(offset) = stem.parse::<i64>() {
            snapshots.push((offset, entry.path()));
        }
    }
    snapshots.sort();
    Ok(snapshots)
}

fn parse_snapshot(bytes: &[u8]) -> Option<(i64, ProducerStateManager)> {
    let rest = bytes.strip_prefix(SNAPSHOT_MAGIC.as_slice())?;
    let (crc, body) = rest.split_at_checked(4)?;
    if u32::from_be_bytes(crc.try_into().ok()?) != crc32c::crc32c(body) {
        return None;
    }
    let mut cursor = body;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = cursor.split_at_checked(n)?;
        cursor = tail;
        Some(head)
    };
    let offset = i64::from_be_bytes(take(8)?.try_into().ok()?);
    let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
    if count > PRODUCERS_PER_PARTITION_MAX {
        return None;
    }
    let mut state = ProducerStateManager::default();
    for _ in 0..count {
        let producer_id = i64::from_be_bytes(take(8)?.try_into().ok()?);
        let epoch = i16::from_be_bytes(take(2)?.try_into().ok()?);
        let last_timestamp = i64::from_be_bytes(take(8)?.try_into().ok()?);
        let last_offset = i64::from_be_bytes(take(8)?.try_into().ok()?);
        let batch_count = take(1)?[0] as usize;
        if batch_count > BATCHES_PER_PRODUCER {
            return None;
        }
        let mut batches = Vec::with_capacity(batch_count);
        for _ in 0..batch_count {
            batches.push(BatchMetadata {
                first_sequence: i32::from_be_bytes(take(4)?.try_into().ok()?),
                last_sequence: i32::from_be_bytes(take(4)?.try_into().ok()?),
                first_offset: i64::from_be_bytes(take(8)?.try_into().ok()?),
                last_offset: i64::from_be_bytes(take(8)?.try_into().ok()?),
                timestamp: i64::from_be_bytes(take(8)?.try_into().ok()?),
            });
        }
        state.producers.insert(
            producer_id,
            ProducerEntry {
                epoch,
                batches,
                last_timestamp,
                last_offset,
            },
        );
    }
    Some((offset, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(
        producer_id: i64,
        epoch: i16,
        first_sequence: i32,
        count: i32,
        base_offset: i64,
    ) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: strand_records::Attributes(0),
            last_offset_delta: count - 1,
            base_timestamp: 1_000,
            max_timestamp: 1_000,
            producer_id,
            producer_epoch: epoch,
            base_sequence: first_sequence,
            records_count: count,
        }
    }

    #[test]
    fn kafka_sequence_rules() {
        let mut state = ProducerStateManager::default();
        assert_eq!(
            state.check(&header(8, 0, 3, 1, 0)),
            Ok(ProducerCheck::Append),
            "unknown: accepted"
        );
        assert_eq!(
            state.check(&header(7, 0, 0, 2, 0)),
            Ok(ProducerCheck::Append)
        );
        state.update(&header(7, 0, 0, 2, 0));
        // The same batch again is a duplicate with its original offsets.
        match state.check(&header(7, 0, 0, 2, 99)) {
            Ok(ProducerCheck::Duplicate(batch)) => {
                assert_eq!((batch.first_offset, batch.last_offset), (0, 1))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            state.check(&header(7, 0, 2, 1, 2)),
            Ok(ProducerCheck::Append)
        );
        assert!(matches!(
            state.check(&header(7, 0, 5, 1, 2)),
            Err(ProducerError::OutOfOrderSequence { .. })
        ));
        // A new epoch restarts at zero; an old epoch is refused.
        assert!(matches!(
            state.check(&header(7, 1, 4, 1, 2)),
            Err(ProducerError::OutOfOrderSequence { .. })
        ));
        state.update(&header(7, 1, 0, 1, 2));
        assert!(matches!(
            state.check(&header(7, 0, 2, 1, 3)),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(
            state.check(&header(-1, -1, -1, 1, 3)),
            Ok(ProducerCheck::NotIdempotent)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
        let mut state = ProducerStateManager::default();
        for n in 0..7 {
            state.update(&header(1, 0, n, 1, n as i64));
        }
        assert_eq!(state.get(1).unwrap().batches.len(), 5);
        assert!(matches!(
            state.check(&header(1, 0, 0, 1, 9)),
            Err(ProducerError::OutOfOrderSequence { .. })
        ));
        assert!(matches!(
            state.check(&header(1, 0, 6, 1, 9)),
            Ok(ProducerCheck::Duplicate(_))
        ));
        assert_eq!(last_sequence(i32::MAX, 1), 0);
        let mut wrapping = ProducerStateManager::default();
        wrapping.update(&header(2, 0, i32::MAX, 1, 0));
        assert_eq!(
            wrapping.check(&header(2, 0, 0, 1, 1)),
            Ok(ProducerCheck::Append)
        );
    }

    #[test]
    fn snapshots_round_trip_and_damaged_ones_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::default();
        state.update(&header(1, 3, 0, 4, 0));
        state.update(&header(2, 0, 0, 1, 4));
        state.take_snapshot(dir.path(), 5).unwrap();
        state.update(&header(2, 0, 1, 1, 5));
        state.take_snapshot(dir.path(), 6).unwrap();
        let (loaded, from) = ProducerStateManager::load(dir.path(), 100).unwrap();
        assert_eq!(from, Some(6));
        assert_eq!(loaded.get(2).unwrap().batches.len(), 2);
        assert_eq!(loaded.get(1).unwrap().epoch, 3);
        // Above the log end: deleted; damaged: skipped for the older one.
        let (_, from) = ProducerStateManager::load(dir.path(), 5).unwrap();
        assert_eq!(from, Some(5));
        std::fs::write(snapshot_path(dir.path(), 5), b"STRPST01garbage").unwrap();
        let (loaded, from) = ProducerStateManager::load(dir.path(), 100).unwrap();
        assert_eq!((loaded.len(), from), (0, None));
    }

    #[test]
    fn idle_producers_expire() {
        let mut state = ProducerStateManager::default();
        state.update(&header(1, 0, 0, 1, 0));
        assert_eq!(
            state.remove_expired(
                1_000 + PRODUCER_ID_EXPIRATION_MS_DEFAULT - 1,
                PRODUCER_ID_EXPIRATION_MS_DEFAULT
            ),
            0
        );
        assert_eq!(
            state.remove_expired(
                1_000 + PRODUCER_ID_EXPIRATION_MS_DEFAULT,
                PRODUCER_ID_EXPIRATION_MS_DEFAULT
            ),
            1
        );
    }
}
