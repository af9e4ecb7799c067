//! Idempotent-producer state of one partition: for each producer id, its epoch and the
//! metadata of its last five batches (sequence range, offsets, timestamp). A retried batch
//! that matches one of them is answered with its original offsets instead of being
//! written again; a gap or a stale epoch gets Kafka's error. Like Kafka 4.x, a producer
//! the partition has no record of may start at any sequence. This is
//! Kafka's ProducerStateManager, kept with the log (not the broker) because it must follow
//! the log exactly through truncation and crash recovery.
//!
//! Transactions: a producer's first transactional batch opens its transaction at that
//! offset; the commit or abort marker (a control batch) closes it. The first offset of
//! the oldest transaction still open, or closed by a marker the high watermark has not
//! passed, is the partition's first unstable offset: read_committed consumers read no
//! further (the last stable offset). A producer with an open transaction is never expired
//! or evicted. Aborted transactions (producer, first offset, marker offset) are kept here
//! too, for read_committed fetches to skip their records: part of the state, so its
//! snapshots carry them and recovery and truncation re-derive them from the log like the
//! rest (Kafka keeps them in a `.txnindex` file per segment). Retention drops those wholly
//! below the log start.
//!
//! Bounds: `BATCHES_PER_PRODUCER` entries per producer, `PRODUCERS_PER_PARTITION_MAX`
//! producers per partition (the least recently active is evicted beyond it), and
//! producers idle longer than producer.id.expiration.ms are expired.
//!
//! Snapshots: `<20-digit offset>.snapshot` in the partition directory holds the state as
//! of that offset (taken at segment roll and clean shutdown), CRC-protected. Loading
//! replays the log from the newest snapshot at or below the log end.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use strand_records::{BatchHeader, EndTxnMarker, TxnResult, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

use crate::checkpoint::{replace_file, Sync};

/// Kafka keeps the last five batches per producer (max.in.flight.requests.per.connection).
pub const BATCHES_PER_PRODUCER: usize = 5;
/// Producers remembered per partition before the least recently active is forgotten.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 100_000;
/// Kafka's producer.id.expiration.ms default: one day.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 24 * 60 * 60 * 1000;
const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Snapshots written before transactions were tracked.
const SNAPSHOT_MAGIC_V1: &[u8; 8] = b"STRPST01";
/// Each producer also carries its open transaction's first offset and coordinator epoch.
const SNAPSHOT_MAGIC: &[u8; 8] = b"STRPST02";
/// No open transaction, or no coordinator epoch yet (in snapshots and Kafka's fields).
const NONE: i64 = -1;
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
    /// Where its open transaction began on this partition.
    pub current_txn_first_offset: Option<i64>,
    /// The epoch of the transaction coordinator that wrote its last marker (-1: none).
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    pub fn last_sequence(&self) -> Option<i32> {
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
    /// TRANSACTION_COORDINATOR_FENCED (52): a marker from a coordinator older than the
    /// one that wrote this producer's last marker.
    #[error("producer {producer_id}: coordinator epoch {found} is older than {current}")]
    CoordinatorFenced {
        producer_id: i64,
        found: i32,
        current: i32,
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
            ProducerError::CoordinatorFenced { .. } => 52,
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

/// An aborted transaction, as read_committed fetches report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The abort marker's offset.
    pub last_offset: i64,
    /// The first offset still unstable once it was aborted (every transaction aborted
    /// later began at or after it): lets a lookup stop early.
    pub last_stable_offset: i64,
}

/// Who wrote a batch, which decides what of it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Client,
    /// A coordinator's own transactional batch (its sequence is not the producer's).
    Coordinator,
}

/// A transaction a marker closed on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub result: TxnResult,
}

#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset -> producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Transactions closed by a marker at or above the high watermark: first offset ->
    /// the marker's offset. Still unstable until the high watermark passes the marker.
    unreplicated: BTreeMap<i64, i64>,
    /// Aborted transactions by marker offset.
    aborted: BTreeMap<i64, AbortedTxn>,
}

impl ProducerStateManager {
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Every producer the partition knows, by id (DescribeProducers).
    pub fn producers(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> + '_ {
        self.producers.iter().map(|(id, entry)| (*id, entry))
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Kafka's checks for a batch from a client, before it is written.
    pub fn check(&self, header: &BatchHeader) -> Result<ProducerCheck, ProducerError> {
        self.check_from(header, Origin::Client)
    }

    /// The checks for a batch from `origin`: a coordinator's batch has no sequence, so
    /// only its epoch is checked.
    pub fn check_from(
        &self,
        header: &BatchHeader,
        origin: Origin,
    ) -> Result<ProducerCheck, ProducerError> {
        if header.producer_id == NO_PRODUCER_ID {
            return Ok(ProducerCheck::NotIdempotent);
        }
        if origin == Origin::Coordinator {
            return match self.producers.get(&header.producer_id) {
                Some(entry) if header.producer_epoch < entry.epoch => {
                    Err(ProducerError::InvalidProducerEpoch {
                        producer_id: header.producer_id,
                        found: header.producer_epoch,
                        current: entry.epoch,
                    })
                }
                _ => Ok(ProducerCheck::Append),
            };
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
            // A known epoch with no batch yet (a transaction version 2 marker bumped it)
            // starts at sequence 0, as Kafka's "last sequence -1": accepting any first
            // sequence there would take a later batch in flight past a refused first one.
            let current_last = entry.last_sequence();
            if !in_sequence(current_last.unwrap_or(-1), first) {
                return Err(ProducerError::OutOfOrderSequence {
                    producer_id,
                    found: first,
                    last: current_last,
                });
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

    /// Kafka's checks for a transaction marker before it is written: not from an older
    /// producer epoch, nor from an older coordinator than the last marker's.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                found: producer_epoch,
                current: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerError::CoordinatorFenced {
                producer_id,
                found: coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
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
                current_txn_first_offset: None,
                coordinator_epoch: NONE as i32,
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
        if header.attributes.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(batch.first_offset);
            self.ongoing.insert(batch.first_offset, header.producer_id);
        }
    }

    /// Records a written transaction marker (`header` is its control batch): the
    /// producer's open transaction, if any, is closed. Returns it, for the aborted-
    /// transaction index when it was aborted.
    pub fn complete_txn(
        &mut self,
        header: &BatchHeader,
        marker: EndTxnMarker,
    ) -> Option<CompletedTxn> {
        if header.producer_id == NO_PRODUCER_ID {
            return None;
        }
        if !self.producers.contains_key(&header.producer_id)
            && self.producers.len() >= PRODUCERS_PER_PARTITION_MAX
        {
            self.evict_least_recently_active();
        }
        let marker_offset = header.base_offset;
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: header.producer_epoch,
                batches: Vec::new(),
                last_timestamp: header.max_timestamp,
                last_offset: marker_offset,
                current_txn_first_offset: None,
                coordinator_epoch: NONE as i32,
            });
        if header.producer_epoch > entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = header.max_timestamp;
        entry.last_offset = marker_offset;
        let first_offset = entry.current_txn_first_offset.take()?;
        self.ongoing.remove(&first_offset);
        self.unreplicated.insert(first_offset, marker_offset);
        if marker.result == TxnResult::Abort {
            let last_stable_offset = self
                .ongoing
                .keys()
                .next()
                .map_or(marker_offset + 1, |&first| first.min(marker_offset + 1));
            self.aborted.insert(
                marker_offset,
                AbortedTxn {
                    producer_id: header.producer_id,
                    first_offset,
                    last_offset: marker_offset,
                    last_stable_offset,
                },
            );
        }
        Some(CompletedTxn {
            producer_id: header.producer_id,
            first_offset,
            last_offset: marker_offset,
            result: marker.result,
        })
    }

    /// The first offset of the oldest transaction that is open, or closed by a marker
    /// the high watermark has not passed yet (None: every transaction is stable).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self.unreplicated.keys().next().copied();
        ongoing.into_iter().chain(unreplicated).min()
    }

    /// The high watermark moved to `high_watermark`: transactions whose marker lies below
    /// it are stable.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unreplicated
            .retain(|_, marker_offset| *marker_offset >= high_watermark);
    }

    /// Aborted transactions a read of `[from, upper)` must report: those with records in
    /// it (aborted at or after `from`, begun before `upper`), in order of their markers.
    pub fn aborted_txns(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let mut found = Vec::new();
        for txn in self.aborted.range(from..).map(|(_, txn)| txn) {
            if txn.first_offset < upper {
                found.push(*txn);
            }
            if txn.last_stable_offset >= upper {
                break;
            }
        }
        found
    }

    /// Retention moved the log start: aborted transactions wholly below it go.
    /// Every aborted transaction whose marker is at or above `from` and whose first
    /// offset is below `upper` (the cleaner drops their records).
    pub fn aborted_between(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        self.aborted
            .range(from..)
            .map(|(_, txn)| *txn)
            .filter(|txn| txn.first_offset < upper)
            .collect()
    }

    pub fn forget_aborted_below(&mut self, log_start_offset: i64) {
        self.aborted = self.aborted.split_off(&log_start_offset);
    }

    /// Open transactions: (producer id, first offset), oldest first.
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing
            .iter()
            .map(|(&first, &producer)| (producer, first))
    }

    fn evict_least_recently_active(&mut self) {
        if let Some((&oldest, _)) = self
            .producers
            .iter()
            .filter(|(_, entry)| entry.current_txn_first_offset.is_none())
            .min_by_key(|(_, entry)| entry.last_offset)
        {
            self.producers.remove(&oldest);
        }
    }

    /// Forgets producers idle for longer than `expiration_ms`. Returns how many.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms - entry.last_timestamp < expiration_ms
        });
        before - self.producers.len()
    }

    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
        self.aborted.clear();
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
            let txn_first_offset = entry.current_txn_first_offset.unwrap_or(NONE);
            body.extend_from_slice(&txn_first_offset.to_be_bytes());
            body.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            body.push(entry.batches.len() as u8);
            for batch in &entry.batches {
                body.extend_from_slice(&batch.first_sequence.to_be_bytes());
                body.extend_from_slice(&batch.last_sequence.to_be_bytes());
                body.extend_from_slice(&batch.first_offset.to_be_bytes());
                body.extend_from_slice(&batch.last_offset.to_be_bytes());
                body.extend_from_slice(&batch.timestamp.to_be_bytes());
            }
        }
        body.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for txn in self.aborted.values() {
            body.extend_from_slice(&txn.producer_id.to_be_bytes());
            body.extend_from_slice(&txn.first_offset.to_be_bytes());
            body.extend_from_slice(&txn.last_offset.to_be_bytes());
            body.extend_from_slice(&txn.last_stable_offset.to_be_bytes());
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

pub(crate) fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
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
    let (rest, with_txns) = match bytes.strip_prefix(SNAPSHOT_MAGIC.as_slice()) {
        Some(rest) => (rest, true),
        None => (bytes.strip_prefix(SNAPSHOT_MAGIC_V1.as_slice())?, false),
    };
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
        let (current_txn_first_offset, coordinator_epoch) = if with_txns {
            let first = i64::from_be_bytes(take(8)?.try_into().ok()?);
            let epoch = i32::from_be_bytes(take(4)?.try_into().ok()?);
            ((first >= 0).then_some(first), epoch)
        } else {
            (None, NONE as i32)
        };
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
                current_txn_first_offset,
                coordinator_epoch,
            },
        );
        if let Some(first) = current_txn_first_offset {
            state.ongoing.insert(first, producer_id);
        }
    }
    if with_txns {
        let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        // Each entry takes 32 bytes: a count beyond the file's size is damage.
        if count > bytes.len() / 32 {
            return None;
        }
        for _ in 0..count {
            let mut field = || Some(i64::from_be_bytes(take(8)?.try_into().ok()?));
            let txn = AbortedTxn {
                producer_id: field()?,
                first_offset: field()?,
                last_offset: field()?,
                last_stable_offset: field()?,
            };
            state.aborted.insert(txn.last_offset, txn);
        }
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

    fn transactional(mut header: BatchHeader) -> BatchHeader {
        header.attributes = strand_records::Attributes(1 << 4);
        header
    }

    fn marker(producer_id: i64, epoch: i16, offset: i64) -> BatchHeader {
        let mut header = header(producer_id, epoch, -1, 1, offset);
        header.attributes = strand_records::Attributes(0b11 << 4);
        header
    }

    fn end(result: TxnResult) -> EndTxnMarker {
        EndTxnMarker {
            result,
            coordinator_epoch: 4,
        }
    }

    #[test]
    fn open_transactions_hold_the_first_unstable_offset_until_their_marker_is_replicated() {
        let mut state = ProducerStateManager::default();
        state.update(&header(9, 0, 0, 1, 0)); // idempotent, not transactional
        assert_eq!(state.first_unstable_offset(), None);
        state.update(&transactional(header(1, 0, 0, 2, 1)));
        state.update(&transactional(header(2, 0, 0, 1, 3)));
        state.update(&transactional(header(1, 0, 2, 1, 4)));
        assert_eq!(state.first_unstable_offset(), Some(1));
        assert_eq!(
            state.ongoing_txns().collect::<Vec<_>>(),
            vec![(1, 1), (2, 3)]
        );

        let aborted = state.complete_txn(&marker(1, 0, 5), end(TxnResult::Abort));
        assert_eq!(
            aborted,
            Some(CompletedTxn {
                producer_id: 1,
                first_offset: 1,
                last_offset: 5,
                result: TxnResult::Abort
            })
        );
        // Closed, but its marker is not below the high watermark yet.
        assert_eq!(state.first_unstable_offset(), Some(1));
        state.on_high_watermark(6);
        assert_eq!(state.first_unstable_offset(), Some(3));
        let committed = state.complete_txn(&marker(2, 0, 6), end(TxnResult::Commit));
        assert_eq!(
            committed.map(|t| (t.first_offset, t.result)),
            Some((3, TxnResult::Commit))
        );
        state.on_high_watermark(7);
        assert_eq!(state.first_unstable_offset(), None);
        assert_eq!(state.get(2).unwrap().coordinator_epoch, 4);
        // A marker with nothing open closes nothing (a retried WriteTxnMarkers).
        assert_eq!(
            state.complete_txn(&marker(2, 0, 7), end(TxnResult::Commit)),
            None
        );
        // The producer's next transaction opens at its next transactional batch.
        state.update(&transactional(header(1, 0, 3, 1, 8)));
        assert_eq!(state.first_unstable_offset(), Some(8));
    }

    #[test]
    fn open_transactions_survive_a_snapshot_and_are_never_expired() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::default();
        state.update(&transactional(header(1, 2, 0, 1, 10)));
        state.update(&header(2, 0, 0, 1, 11));
        state.take_snapshot(dir.path(), 12).unwrap();
        let (mut loaded, from) = ProducerStateManager::load(dir.path(), 12).unwrap();
        assert_eq!(from, Some(12));
        assert_eq!(loaded.first_unstable_offset(), Some(10));
        assert_eq!(loaded.get(1).unwrap().current_txn_first_offset, Some(10));
        let far_future = 1_000 + 10 * PRODUCER_ID_EXPIRATION_MS_DEFAULT;
        assert_eq!(
            loaded.remove_expired(far_future, PRODUCER_ID_EXPIRATION_MS_DEFAULT),
            1
        );
        assert!(
            loaded.get(1).is_some(),
            "an open transaction keeps its producer"
        );
        let closed = loaded.complete_txn(&marker(1, 2, 12), end(TxnResult::Commit));
        assert_eq!(closed.map(|t| t.first_offset), Some(10));
    }

    #[test]
    fn an_epoch_a_marker_bumped_starts_at_sequence_zero() {
        let mut state = ProducerStateManager::default();
        state.update(&transactional(header(4, 0, 0, 3, 0)));
        // Transaction version 2: the commit marker carries the next epoch.
        state.complete_txn(&marker(4, 1, 3), end(TxnResult::Commit));
        assert!(
            matches!(
                state.check(&transactional(header(4, 1, 7, 2, 4))),
                Err(ProducerError::OutOfOrderSequence {
                    found: 7,
                    last: None,
                    ..
                })
            ),
            "a batch after a refused first one is refused too"
        );
        assert_eq!(
            state.check(&transactional(header(4, 1, 0, 2, 4))),
            Ok(ProducerCheck::Append)
        );
    }

    #[test]
    fn snapshots_written_before_transactions_still_load() {
        let dir = tempfile::tempdir().unwrap();
        // A version-1 snapshot of producer 5 (epoch 1) with one batch.
        let mut body = Vec::new();
        body.extend_from_slice(&20i64.to_be_bytes());
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&5i64.to_be_bytes());
        body.extend_from_slice(&1i16.to_be_bytes());
        body.extend_from_slice(&1_000i64.to_be_bytes());
        body.extend_from_slice(&19i64.to_be_bytes());
        body.push(1);
        for value in [0i32, 0] {
            body.extend_from_slice(&value.to_be_bytes());
        }
        for value in [19i64, 19, 1_000] {
            body.extend_from_slice(&value.to_be_bytes());
        }
        let mut file = SNAPSHOT_MAGIC_V1.to_vec();
        file.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        file.extend_from_slice(&body);
        std::fs::write(snapshot_path(dir.path(), 20), file).unwrap();
        let (loaded, from) = ProducerStateManager::load(dir.path(), 20).unwrap();
        assert_eq!(from, Some(20));
        let entry = loaded.get(5).unwrap();
        assert_eq!((entry.epoch, entry.current_txn_first_offset), (1, None));
        assert_eq!(entry.batches[0].last_offset, 19);
    }

    #[test]
    fn aborted_transactions_are_found_by_range_and_kept_in_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::default();
        // Producer 1: 0..=1 then aborted at 4; producer 2: 2..=3 committed at 5;
        // producer 3: 6 aborted at 7; producer 1 again: 8 aborted at 9.
        state.update(&transactional(header(1, 0, 0, 2, 0)));
        state.update(&transactional(header(2, 0, 0, 2, 2)));
        state.complete_txn(&marker(1, 0, 4), end(TxnResult::Abort));
        state.complete_txn(&marker(2, 0, 5), end(TxnResult::Commit));
        state.update(&transactional(header(3, 0, 0, 1, 6)));
        state.complete_txn(&marker(3, 0, 7), end(TxnResult::Abort));
        state.update(&transactional(header(1, 0, 2, 1, 8)));
        state.complete_txn(&marker(1, 0, 9), end(TxnResult::Abort));
        let firsts =
            |txns: Vec<AbortedTxn>| -> Vec<i64> { txns.iter().map(|t| t.first_offset).collect() };
        assert_eq!(firsts(state.aborted_txns(0, 10)), vec![0, 6, 8]);
        assert_eq!(firsts(state.aborted_txns(5, 7)), vec![6]);
        assert_eq!(firsts(state.aborted_txns(0, 3)), vec![0]);
        assert_eq!(firsts(state.aborted_txns(10, 20)), Vec::<i64>::new());
        // Producer 1's first abort left producer 2's transaction (from 2) unstable.
        assert_eq!(state.aborted_txns(0, 1)[0].last_stable_offset, 2);

        state.take_snapshot(dir.path(), 10).unwrap();
        let (mut loaded, _) = ProducerStateManager::load(dir.path(), 10).unwrap();
        assert_eq!(loaded.aborted_txns(0, 10), state.aborted_txns(0, 10));
        loaded.forget_aborted_below(5);
        assert_eq!(firsts(loaded.aborted_txns(0, 10)), vec![6, 8]);
    }
}
