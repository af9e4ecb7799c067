//! One segment: a `.log` file of batches stored exactly as received (base offset and
//! partition leader epoch rewritten), with its sparse offset and time indexes. Owns the
//! segment's in-memory facts (size, offsets, timestamps, index counts); the open files
//! live in the shared [`FileCache`]. Not thread-safe: the owning `Log` serialises access.
//!
//! Positions are u32 in the index (as in Kafka), so a segment never exceeds 2 GiB.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strand_records::{BatchHeader, NO_TIMESTAMP};

use crate::batch_scan::{BatchScanner, ScanStep, ScannedBatch};
use crate::file_cache::{FileCache, SegmentFiles, SegmentId, SegmentPaths};
use crate::offset_index::{OffsetIndex, OffsetIndexEntry};
use crate::preallocation::Preallocation;
use crate::read_verification::{CorruptBatch, VerifiedRegions};
use crate::time_index::{TimeIndex, TimeIndexEntry};

/// The largest segment the u32 index positions can address.
pub const SEGMENT_MAX_BYTES: u64 = i32::MAX as u64;
/// The suffix of a retired segment's files, removed later (and at startup).
pub const DELETED_SUFFIX: &str = ".deleted";

/// How a failed append left the segment.
#[derive(Debug)]
pub enum AppendError {
    /// Nothing of the batch remains: file and indexes are as before the call.
    Undone(io::Error),
    /// The partial batch could not be cut back: the segment's state is unknown.
    Damaged(io::Error),
}

#[derive(Debug)]
pub struct Segment {
    id: SegmentId,
    base_offset: i64,
    size_bytes: u64,
    /// Offset after the last batch; equals `base_offset` while empty.
    next_offset: i64,
    max_timestamp: i64,
    /// The last offset of the batch that carried `max_timestamp`.
    offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch: what segment.ms measures age from (as Kafka).
    first_batch_timestamp: Option<i64>,
    created_ms: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    /// Blocks reserved ahead of the end while this is the active segment.
    preallocation: Preallocation,
    /// Byte ranges whose batches a read has checked again (see `read_verification`).
    verified: VerifiedRegions,
    /// Bytes of the file written before this process opened it. Reads check only these:
    /// what this process appended was checked on the way in.
    inherited_bytes: u64,
}

/// What recovery found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryOutcome {
    pub valid_batches: u64,
    pub truncated_bytes: u64,
    /// Why the tail was cut, if it was.
    pub invalid_reason: Option<String>,
    /// (partition leader epoch, base offset) of every batch kept, for the epoch cache.
    pub epochs: Vec<(i32, i64)>,
}

impl Segment {
    /// Creates the three empty files of a new segment.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        cache: &FileCache,
        now_ms: i64,
    ) -> io::Result<Segment> {
        Segment::create_files(dir, base_offset)?;
        Ok(Segment::unwritten(cache, base_offset, now_ms))
    }

    /// An empty segment whose files do not exist yet: [`Segment::create_files`] makes
    /// them before anything is written (a log created in memory first).
    pub(crate) fn unwritten(cache: &FileCache, base_offset: i64, now_ms: i64) -> Segment {
        Segment::empty(cache.new_segment_id(), base_offset, now_ms)
    }

    /// Creates (or empties) the three files of the segment at `base_offset`.
    pub(crate) fn create_files(dir: &Path, base_offset: i64) -> io::Result<()> {
        let paths = SegmentPaths::new(dir, base_offset);
        for path in [&paths.log, &paths.offset_index, &paths.time_index] {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)?;
        }
        Ok(())
    }

    fn empty(id: SegmentId, base_offset: i64, now_ms: i64) -> Segment {
        Segment {
            id,
            base_offset,
            size_bytes: 0,
            next_offset: base_offset,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            created_ms: now_ms,
            offset_index: OffsetIndex::empty(),
            time_index: TimeIndex::empty(),
            bytes_since_last_index_entry: 0,
            preallocation: Preallocation::default(),
            verified: VerifiedRegions::default(),
            inherited_bytes: 0,
        }
    }

    /// Checks the batches in `[start, end)` (`start` a batch boundary) before a read
    /// sends them, each region once (`read_verification`).
    pub fn verify_for_read(
        &self,
        files: &SegmentFiles,
        start: u64,
        end: u64,
    ) -> io::Result<Result<(), CorruptBatch>> {
        let end = end.min(self.inherited_bytes);
        if start >= end {
            return Ok(Ok(()));
        }
        let offsets = self.base_offset..self.next_offset;
        self.verified
            .verify(&files.log, start, end, self.size_bytes, offsets)
    }

    /// Opens an existing segment trusting its contents (below the recovery point, or after
    /// a clean shutdown). Index files that fail their sanity checks are rebuilt. Only the
    /// bytes after the last index entry are scanned, to find the end offset and max time.
    /// Returns `Ok(None)` if the tail does not scan cleanly: the caller must recover it.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        cache: &FileCache,
        now_ms: i64,
    ) -> io::Result<Option<Segment>> {
        let paths = SegmentPaths::new(dir, base_offset);
        ensure_index_files_exist(&paths)?;
        let mut segment = Segment::empty(cache.new_segment_id(), base_offset, now_ms);
        let files = segment.files(dir, cache)?;
        segment.size_bytes = files.log.metadata()?.len();
        if segment.size_bytes > SEGMENT_MAX_BYTES {
            return Ok(None);
        }
        segment.inherited_bytes = segment.size_bytes;
        let indexes = (
            OffsetIndex::open(&files.offset_index)?,
            TimeIndex::open(&files.time_index)?,
        );
        let (Some(offset_index), Some(time_index)) = indexes else {
            return Ok(None);
        };
        segment.offset_index = offset_index;
        segment.time_index = time_index;
        if !segment.indexes_look_sane() {
            return Ok(None);
        }
        let tail_start = segment
            .offset_index
            .last()
            .map_or(0, |entry| entry.position as u64);
        let mut scanner = BatchScanner::new(&files.log, tail_start, segment.size_bytes);
        if let Some(last) = segment.time_index.last() {
            segment.max_timestamp = last.timestamp;
            segment.offset_of_max_timestamp = base_offset + last.relative_offset as i64;
        }
        loop {
            match scanner.next_header()? {
                ScanStep::Batch(batch) => {
                    segment.next_offset = batch.header.next_offset();
                    segment.note_timestamp(&batch.header);
                    segment.bytes_since_last_index_entry += batch.size_bytes();
                }
                ScanStep::End => break,
                ScanStep::Invalid { .. } => return Ok(None),
            }
        }
        if segment.size_bytes > 0 {
            let mut first = BatchScanner::new(&files.log, 0, segment.size_bytes);
            match first.next_header()? {
                ScanStep::Batch(batch) => {
                    let first = batch.header.max_timestamp;
                    segment.first_batch_timestamp = Some(first);
                    if first >= 0 {
                        segment.created_ms = first.min(now_ms);
                    }
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(segment))
    }

    /// Re-reads every batch, checking framing and CRC and that offsets are contiguous from
    /// `expected_first_offset`, rebuilds both indexes, and cuts the file at the first
    /// batch that fails. Used after an unclean shutdown, from the recovery point on.
    pub fn recover(
        dir: &Path,
        base_offset: i64,
        cache: &FileCache,
        index_interval_bytes: u64,
        now_ms: i64,
    ) -> io::Result<(Segment, RecoveryOutcome)> {
        let paths = SegmentPaths::new(dir, base_offset);
        ensure_index_files_exist(&paths)?;
        let mut segment = Segment::empty(cache.new_segment_id(), base_offset, now_ms);
        let files = segment.files(dir, cache)?;
        files.offset_index.set_len(0)?;
        files.time_index.set_len(0)?;
        let file_bytes = files.log.metadata()?.len();
        let scan_end = file_bytes.min(SEGMENT_MAX_BYTES);
        let mut scanner = BatchScanner::new(&files.log, 0, scan_end);
        let mut outcome = RecoveryOutcome {
            valid_batches: 0,
            truncated_bytes: 0,
            invalid_reason: None,
            epochs: Vec::new(),
        };
        loop {
            match scanner.next_verified()? {
                ScanStep::Batch(batch) => {
                    if batch.header.base_offset != segment.next_offset {
                        outcome.invalid_reason = Some(format!(
                            "batch at position {} has base offset {} where {} was expected",
                            batch.position, batch.header.base_offset, segment.next_offset
                        ));
                        break;
                    }
                    if batch.header.last_offset_delta < 0 {
                        outcome.invalid_reason = Some("negative last offset delta".into());
                        break;
                    }
                    segment.index_batch(
                        dir,
                        &files,
                        &batch.header,
                        batch.position,
                        index_interval_bytes,
                    )?;
                    segment.size_bytes = batch.end_position();
                    outcome.valid_batches += 1;
                    outcome.epochs.push((
                        batch.header.partition_leader_epoch,
                        batch.header.base_offset,
                    ));
                }
                ScanStep::End => break,
                ScanStep::Invalid { reason, .. } => {
                    outcome.invalid_reason = Some(reason);
                    break;
                }
            }
        }
        if outcome.invalid_reason.is_none() && file_bytes > scan_end {
            outcome.invalid_reason = Some("segment larger than 2 GiB".into());
        }
        if segment.size_bytes < file_bytes {
            outcome.truncated_bytes = file_bytes - segment.size_bytes;
            files.log.set_len(segment.size_bytes)?;
            files.log.sync_all()?;
        }
        Ok((segment, outcome))
    }

    pub fn id(&self) -> SegmentId {
        self.id
    }
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    /// The first batch's max timestamp, if the segment has a batch.
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.first_batch_timestamp
    }

    /// The timestamp retention.ms measures a segment by: its largest record timestamp, or
    /// (no timestamps at all) when its file was last written, as Kafka does.
    pub fn retention_timestamp(&self, dir: &Path) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        std::fs::metadata(SegmentPaths::new(dir, self.base_offset).log)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(i64::MAX, |d| d.as_millis() as i64)
    }
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }
    pub fn offset_index_entries(&self) -> u64 {
        self.offset_index.len()
    }
    pub fn time_index_entries(&self) -> u64 {
        self.time_index.len()
    }

    /// Milliseconds the segment has been collecting data, for segment.ms. Kafka measures
    /// from the first batch's timestamp alone, so a producer sending old timestamps makes
    /// it roll a new segment for every batch; Strand measures from the later of that
    /// timestamp and the segment's creation, which is the same for well-behaved clocks and
    /// avoids the pathology. (A reopened segment counts as created at its first batch's
    /// timestamp, so age survives restarts.)
    pub fn age_ms(&self, now_ms: i64) -> i64 {
        now_ms
            - self
                .first_batch_timestamp
                .filter(|ts| *ts >= 0)
                .unwrap_or(i64::MIN)
                .max(self.created_ms)
    }

    pub fn files(&self, dir: &Path, cache: &FileCache) -> io::Result<Arc<SegmentFiles>> {
        cache.get_or_open(self.id, || SegmentPaths::new(dir, self.base_offset))
    }

    /// Writes one validated batch at the end. On failure the file is cut back to its size
    /// before the call, so no partial batch remains (`AppendError::Undone`: the segment is
    /// as it was, and a later append may succeed, e.g. once a full disk has room again);
    /// if even that fails (`AppendError::Damaged`) the caller must stop writing here.
    pub fn append(
        &mut self,
        dir: &Path,
        cache: &FileCache,
        batch: &[u8],
        header: &BatchHeader,
        index_interval_bytes: u64,
    ) -> Result<(), AppendError> {
        // Before writing: the bytes are the batch the header describes, continuing this
        // segment (a wrong offset here would be served and replicated as is).
        assert_eq!(header.total_bytes() as usize, batch.len(), "batch length");
        assert!(self.size_bytes + batch.len() as u64 <= SEGMENT_MAX_BYTES);
        assert!(
            header.base_offset >= self.next_offset,
            "batch at {} written below the segment's end {}",
            header.base_offset,
            self.next_offset
        );
        let files = self.files(dir, cache).map_err(AppendError::Undone)?;
        let position = self.size_bytes;
        let end = position + batch.len() as u64;
        self.preallocation.before_write(&files.log, position, end);
        let written = crate::fault_injection::write_all_at(dir, &files.log, batch, position)
            .and_then(|()| self.index_batch(dir, &files, header, position, index_interval_bytes));
        if let Err(error) = written {
            return Err(self.undo_partial_append(&files, position, error));
        }
        self.size_bytes = end;
        Ok(())
    }

    fn undo_partial_append(
        &mut self,
        files: &SegmentFiles,
        position: u64,
        error: io::Error,
    ) -> AppendError {
        self.preallocation.truncated_to(position);
        let restored = files.log.set_len(position).and_then(|()| {
            self.offset_index
                .truncate_while(&files.offset_index, |e| (e.position as u64) < position)?;
            let end = self.next_offset;
            let base = self.base_offset;
            self.time_index.truncate_while(&files.time_index, |e| {
                base + (e.relative_offset as i64) < end
            })?;
            Ok(())
        });
        match restored {
            Ok(()) => AppendError::Undone(error),
            Err(undo_error) => AppendError::Damaged(io::Error::new(
                error.kind(),
                format!("{error}; and cutting the partial batch back failed: {undo_error}"),
            )),
        }
    }

    /// Updates offsets, timestamps and the sparse indexes for a batch written at `position`.
    /// State changes only after the index writes succeed.
    fn index_batch(
        &mut self,
        dir: &Path,
        files: &SegmentFiles,
        header: &BatchHeader,
        position: u64,
        index_interval_bytes: u64,
    ) -> io::Result<()> {
        let relative = |offset: i64| (offset - self.base_offset) as u32;
        let (max_timestamp, offset_of_max) = if header.max_timestamp > self.max_timestamp {
            (header.max_timestamp, header.last_offset())
        } else {
            (self.max_timestamp, self.offset_of_max_timestamp)
        };
        let mut bytes_since = self.bytes_since_last_index_entry;
        if bytes_since > index_interval_bytes {
            self.offset_index.append(
                dir,
                &files.offset_index,
                OffsetIndexEntry {
                    relative_offset: relative(header.base_offset),
                    position: position as u32,
                },
            )?;
            if self
                .time_index
                .last()
                .is_none_or(|last| max_timestamp > last.timestamp)
            {
                self.time_index.append(
                    dir,
                    &files.time_index,
                    TimeIndexEntry {
                        timestamp: max_timestamp,
                        relative_offset: relative(offset_of_max),
                    },
                )?;
            }
            bytes_since = 0;
        }
        self.bytes_since_last_index_entry = bytes_since + header.total_bytes() as u64;
        if self.size_bytes == 0 && self.first_batch_timestamp.is_none() {
            self.first_batch_timestamp = Some(header.max_timestamp);
        }
        self.max_timestamp = max_timestamp;
        self.offset_of_max_timestamp = offset_of_max;
        self.next_offset = header.next_offset();
        Ok(())
    }

    fn note_timestamp(&mut self, header: &BatchHeader) {
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
    }

    /// Called when the segment stops being the active one: gives back the blocks reserved
    /// beyond its end, and records its final max timestamp in the time index so a reopen
    /// needs no scan to learn it (as Kafka does).
    pub fn seal(&mut self, dir: &Path, cache: &FileCache) -> io::Result<()> {
        self.release_preallocation(dir, cache)?;
        if self.max_timestamp == NO_TIMESTAMP
            || self
                .time_index
                .last()
                .is_some_and(|last| last.timestamp >= self.max_timestamp)
        {
            let files = self.files(dir, cache)?;
            return self.write_pending_index_entries(dir, &files);
        }
        let files = self.files(dir, cache)?;
        let entry = TimeIndexEntry {
            timestamp: self.max_timestamp,
            relative_offset: (self.offset_of_max_timestamp - self.base_offset) as u32,
        };
        self.time_index.append(dir, &files.time_index, entry)?;
        self.write_pending_index_entries(dir, &files)
    }

    /// Gives back the blocks reserved beyond the end (sealing, or a clean shutdown).
    pub fn release_preallocation(&mut self, dir: &Path, cache: &FileCache) -> io::Result<()> {
        if !self.preallocation.reaches_beyond(self.size_bytes) {
            return Ok(()); // no file opened for the many partitions that reserved nothing
        }
        let files = self.files(dir, cache)?;
        self.preallocation.release(&files.log, self.size_bytes)
    }

    fn write_pending_index_entries(&mut self, dir: &Path, files: &SegmentFiles) -> io::Result<()> {
        self.offset_index.write_pending(dir, &files.offset_index)?;
        self.time_index.write_pending(dir, &files.time_index)
    }

    /// Would appending `batch_bytes` more need a new segment for size or index reasons?
    pub fn is_full_for(
        &self,
        batch_bytes: u64,
        last_offset: i64,
        segment_bytes: u64,
        index_max_entries: u64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        self.size_bytes + batch_bytes > segment_bytes.min(SEGMENT_MAX_BYTES)
            || self.offset_index.len() >= index_max_entries
            || self.time_index.len() >= index_max_entries
            || last_offset - self.base_offset > i32::MAX as i64
    }

    /// The first batch whose last offset is at or after `target`, if the segment has one.
    pub fn find_batch(
        &self,
        dir: &Path,
        cache: &FileCache,
        target: i64,
    ) -> io::Result<Option<ScannedBatch>> {
        if target >= self.next_offset {
            return Ok(None);
        }
        let files = self.files(dir, cache)?;
        let start = if target <= self.base_offset {
            0
        } else {
            let relative = (target - self.base_offset) as u32;
            self.offset_index
                .last_matching(&files.offset_index, |entry| {
                    entry.relative_offset <= relative
                })?
                .map_or(0, |entry| entry.position as u64)
        };
        let mut scanner = BatchScanner::new(&files.log, start, self.size_bytes);
        loop {
            match scanner.next_header()? {
                ScanStep::Batch(batch) if batch.header.last_offset() >= target => {
                    return Ok(Some(batch))
                }
                ScanStep::Batch(_) => continue,
                ScanStep::End => return Ok(None),
                ScanStep::Invalid { position, reason } => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "segment {} is damaged at {position}: {reason}",
                            self.base_offset
                        ),
                    ))
                }
            }
        }
    }

    /// The first batch whose max timestamp is at or after `timestamp`.
    pub fn find_batch_by_timestamp(
        &self,
        dir: &Path,
        cache: &FileCache,
        timestamp: i64,
    ) -> io::Result<Option<ScannedBatch>> {
        if self.is_empty() || self.max_timestamp < timestamp {
            return Ok(None);
        }
        let files = self.files(dir, cache)?;
        let from_offset = self
            .time_index
            .last_matching(&files.time_index, |entry| entry.timestamp < timestamp)?
            .map_or(self.base_offset, |entry| {
                self.base_offset + entry.relative_offset as i64 + 1
            });
        let Some(first) = self.find_batch(dir, cache, from_offset)? else {
            return Ok(None);
        };
        let mut scanner = BatchScanner::new(&files.log, first.position, self.size_bytes);
        while let ScanStep::Batch(batch) = scanner.next_header()? {
            if batch.header.max_timestamp >= timestamp {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    /// Byte position where the batch containing `offset` starts (or the segment end).
    pub fn position_of(&self, dir: &Path, cache: &FileCache, offset: i64) -> io::Result<u64> {
        Ok(self
            .find_batch(dir, cache, offset)?
            .map_or(self.size_bytes, |batch| batch.position))
    }

    /// Removes every batch whose last offset is at or after `offset`. Returns bytes removed.
    pub fn truncate_to(&mut self, dir: &Path, cache: &FileCache, offset: i64) -> io::Result<u64> {
        let Some(first_removed) = self.find_batch(dir, cache, offset)? else {
            return Ok(0);
        };
        let files = self.files(dir, cache)?;
        let position = first_removed.position;
        let removed = self.size_bytes - position;
        let new_end = first_removed.header.base_offset;
        let base = self.base_offset;
        self.preallocation.truncated_to(position);
        // Bytes written here later are new: nothing past the cut counts as checked.
        self.verified.forget_from(position);
        self.inherited_bytes = self.inherited_bytes.min(position);
        files.log.set_len(position)?;
        self.offset_index
            .truncate_while(&files.offset_index, |entry| {
                (entry.position as u64) < position
            })?;
        self.time_index.truncate_while(&files.time_index, |entry| {
            base + (entry.relative_offset as i64) < new_end
        })?;
        // Make the cut durable: a truncation lost in a crash would resurrect batches that
        // recovery would then accept.
        files.log.sync_all()?;
        self.size_bytes = position;
        self.next_offset = if position == 0 {
            self.base_offset
        } else {
            new_end
        };
        if position == 0 {
            self.first_batch_timestamp = None;
        }
        // Recompute the tail facts from the last index entry on.
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        if let Some(last) = self.time_index.last() {
            self.max_timestamp = last.timestamp;
            self.offset_of_max_timestamp = base + last.relative_offset as i64;
        }
        let tail_start = self
            .offset_index
            .last()
            .map_or(0, |entry| entry.position as u64);
        let mut scanner = BatchScanner::new(&files.log, tail_start, self.size_bytes);
        self.bytes_since_last_index_entry = 0;
        while let ScanStep::Batch(batch) = scanner.next_header()? {
            self.note_timestamp(&batch.header);
            self.bytes_since_last_index_entry += batch.size_bytes();
        }
        Ok(removed)
    }

    /// Writes buffered index entries, then fsyncs the log and both indexes.
    pub fn sync(&mut self, dir: &Path, cache: &FileCache) -> io::Result<()> {
        let files = self.prepare_sync(dir, cache)?;
        crate::fault_injection::before_sync(dir)?;
        files.log.sync_data()?;
        files.offset_index.sync_data()?;
        files.time_index.sync_data()
    }

    /// Writes buffered index entries (to the page cache) and returns the files a flush
    /// then fsyncs.
    pub fn prepare_sync(&mut self, dir: &Path, cache: &FileCache) -> io::Result<Arc<SegmentFiles>> {
        let files = self.files(dir, cache)?;
        self.write_pending_index_entries(dir, &files)?;
        Ok(files)
    }

    /// Takes the segment out of the log: its files are renamed `<name>.deleted` (a quick
    /// directory change) and returned, to be removed later off the request path (as
    /// Kafka's file.delete.delay.ms; startup removes any a crash left). Readers holding
    /// its open files keep reading them.
    pub fn retire(self, dir: &Path, cache: &FileCache) -> io::Result<Vec<PathBuf>> {
        cache.invalidate(self.id);
        let paths = SegmentPaths::new(dir, self.base_offset);
        let mut doomed = Vec::with_capacity(3);
        for path in [&paths.log, &paths.offset_index, &paths.time_index] {
            let mut renamed = path.clone().into_os_string();
            renamed.push(DELETED_SUFFIX);
            let renamed = PathBuf::from(renamed);
            match fs::rename(path, &renamed) {
                Ok(()) => doomed.push(renamed),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        Ok(doomed)
    }

    /// Cheap checks that the index files belong to this log file (they carry no checksum).
    fn indexes_look_sane(&self) -> bool {
        let offset_ok = self
            .offset_index
            .last()
            .is_none_or(|entry| (entry.position as u64) < self.size_bytes.max(1));
        let time_ok = self
            .time_index
            .last()
            .is_none_or(|entry| entry.timestamp >= 0 || entry.timestamp == NO_TIMESTAMP);
        offset_ok && time_ok
    }
}

fn ensure_index_files_exist(paths: &SegmentPaths) -> io::Result<()> {
    for path in [&paths.offset_index, &paths.time_index] {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
    }
    Ok(())
}
