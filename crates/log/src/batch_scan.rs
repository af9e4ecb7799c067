//! Walks the batches of a segment file from a byte position, reading in chunks so that a
//! scan of many small batches costs few system calls. Two speeds: `next_header` trusts the
//! bytes (data already validated on append or by recovery) and reads only headers;
//! `next_verified` reads each whole batch and checks its framing and CRC (recovery).

use std::fs::File;
use std::io;

use strand_records::{BatchHeader, BatchView, BATCH_HEADER_BYTES};

/// Read-ahead when only headers are wanted: about one index interval, which is as far as
/// a lookup scans past its index entry. Larger reads would cost a fetch more than the
/// batch header it needs.
const HEADER_SCAN_CHUNK_BYTES: usize = 4 * 1024;
/// Read-ahead when whole batches are checked (recovery reads everything anyway).
const VERIFY_SCAN_CHUNK_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedBatch {
    pub position: u64,
    pub header: BatchHeader,
}

impl ScannedBatch {
    pub fn size_bytes(&self) -> u64 {
        self.header.total_bytes() as u64
    }
    pub fn end_position(&self) -> u64 {
        self.position + self.size_bytes()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStep {
    Batch(ScannedBatch),
    /// Clean end: the position reached the end bound exactly.
    End,
    /// Bytes at `position` are not a whole valid batch (torn or corrupt tail).
    Invalid {
        position: u64,
        reason: String,
    },
}

pub struct BatchScanner<'a> {
    file: &'a File,
    position: u64,
    end: u64,
    buffer: Vec<u8>,
    /// File position of buffer[0].
    buffer_start: u64,
}

impl<'a> BatchScanner<'a> {
    /// Scans `[start, end)` of `file`.
    pub fn new(file: &'a File, start: u64, end: u64) -> BatchScanner<'a> {
        BatchScanner {
            file,
            position: start,
            end,
            buffer: Vec::new(),
            buffer_start: start,
        }
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    /// The next batch's header, without reading or checking its body.
    pub fn next_header(&mut self) -> io::Result<ScanStep> {
        self.next(false)
    }

    /// The next batch, read whole and checked (framing, magic, CRC). Its bytes are
    /// available from [`BatchScanner::last_batch_bytes`] until the next call.
    pub fn next_verified(&mut self) -> io::Result<ScanStep> {
        self.next(true)
    }

    /// Bytes of the batch last returned by `next_verified`.
    pub fn last_batch_bytes(&self, batch: &ScannedBatch) -> &[u8] {
        let from = (batch.position - self.buffer_start) as usize;
        &self.buffer[from..from + batch.size_bytes() as usize]
    }

    fn next(&mut self, verify: bool) -> io::Result<ScanStep> {
        if self.position >= self.end {
            return Ok(ScanStep::End);
        }
        let remaining = self.end - self.position;
        if remaining < BATCH_HEADER_BYTES as u64 {
            return Ok(self.invalid("incomplete batch header at the end"));
        }
        let chunk = if verify {
            VERIFY_SCAN_CHUNK_BYTES
        } else {
            HEADER_SCAN_CHUNK_BYTES
        };
        self.fill(BATCH_HEADER_BYTES, chunk)?;
        let header = match BatchHeader::parse(self.window()) {
            Ok(header) => header,
            Err(error) => return Ok(self.invalid(&error.to_string())),
        };
        let total = header.total_bytes();
        if total < BATCH_HEADER_BYTES as i64 {
            return Ok(self.invalid("batch length below the header size"));
        }
        if total as u64 > remaining {
            return Ok(self.invalid("batch extends past the end of the segment"));
        }
        let batch = ScannedBatch {
            position: self.position,
            header,
        };
        if verify {
            self.fill(total as usize, chunk)?;
            if let Err(error) = BatchView::parse(&self.window()[..total as usize]) {
                return Ok(self.invalid(&error.to_string()));
            }
        }
        self.position += total as u64;
        Ok(ScanStep::Batch(batch))
    }

    fn invalid(&self, reason: &str) -> ScanStep {
        ScanStep::Invalid {
            position: self.position,
            reason: reason.to_string(),
        }
    }

    /// Bytes buffered from the current position.
    fn window(&self) -> &[u8] {
        &self.buffer[(self.position - self.buffer_start) as usize..]
    }

    /// Ensures at least `wanted` bytes from the current position are buffered (the caller
    /// has checked they exist before `end`).
    fn fill(&mut self, wanted: usize, chunk: usize) -> io::Result<()> {
        let buffered_from_position =
            (self.buffer_start + self.buffer.len() as u64).saturating_sub(self.position) as usize;
        if self.position >= self.buffer_start && buffered_from_position >= wanted {
            return Ok(());
        }
        let remaining = (self.end - self.position) as usize;
        let read_len = wanted.max(chunk).min(remaining);
        self.buffer.resize(read_len, 0);
        crate::read_mode::read_exact_at(
            self.file,
            &mut self.buffer,
            self.position,
            crate::read_mode::Extent::Ahead,
        )?;
        self.buffer_start = self.position;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use strand_records::{BatchBuilder, Record};

    fn batch(base: i64, value_len: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base, 0);
        builder.push(Record::new(None, Some(vec![1; value_len]), 0));
        builder.build()
    }

    #[test]
    fn scans_headers_and_verified_batches_across_chunks() {
        let file = tempfile::tempfile().unwrap();
        let mut bytes = Vec::new();
        for n in 0..40 {
            bytes.extend(batch(n, 5_000));
        }
        file.write_all_at(&bytes, 0).unwrap();
        let end = bytes.len() as u64;
        let mut scanner = BatchScanner::new(&file, 0, end);
        let mut count = 0;
        while let ScanStep::Batch(found) = scanner.next_verified().unwrap() {
            assert_eq!(found.header.base_offset, count);
            assert_eq!(
                scanner.last_batch_bytes(&found).len() as u64,
                found.size_bytes()
            );
            count += 1;
        }
        assert_eq!(count, 40);
        let mut headers = BatchScanner::new(&file, 0, end);
        let mut seen = 0;
        while let ScanStep::Batch(_) = headers.next_header().unwrap() {
            seen += 1;
        }
        assert_eq!(seen, 40);
    }

    #[test]
    fn torn_tail_is_reported_at_its_position() {
        let file = tempfile::tempfile().unwrap();
        let mut bytes = batch(0, 100);
        let first_len = bytes.len() as u64;
        bytes.extend(batch(1, 100));
        bytes.truncate(bytes.len() - 3);
        file.write_all_at(&bytes, 0).unwrap();
        let mut scanner = BatchScanner::new(&file, 0, bytes.len() as u64);
        assert!(matches!(
            scanner.next_verified().unwrap(),
            ScanStep::Batch(_)
        ));
        match scanner.next_verified().unwrap() {
            ScanStep::Invalid { position, .. } => assert_eq!(position, first_len),
            other => panic!("expected invalid, got {other:?}"),
        }
    }
}
