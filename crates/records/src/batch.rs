//! The RecordBatch v2 header: 61 bytes, big-endian, in this order:
//!
//! ```text
//! 0  base_offset i64          8  batch_length i32 (bytes after this field)
//! 12 partition_leader_epoch   16 magic i8        17 crc u32 (CRC32C of bytes 21..end)
//! 21 attributes i16           23 last_offset_delta i32
//! 27 base_timestamp i64       35 max_timestamp i64
//! 43 producer_id i64          51 producer_epoch i16
//! 53 base_sequence i32        57 records_count i32        61 records...
//! ```
//!
//! The CRC does not cover base_offset, batch_length or partition_leader_epoch, so a broker
//! can assign offsets and stamp its leader epoch without recomputing it. Stamping
//! LogAppendTime changes max_timestamp, which the CRC covers, so that rewrite recomputes it.

use crate::compression::Compression;
use crate::error::RecordsError;

pub const BATCH_HEADER_BYTES: usize = 61;
/// base_offset + batch_length: the bytes not counted by batch_length.
pub const LOG_OVERHEAD_BYTES: usize = 12;
pub const BATCH_LENGTH_OFFSET: usize = 8;
pub const MAGIC_V2: i8 = 2;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const LAST_OFFSET_DELTA_OFFSET: usize = 23;
const BASE_TIMESTAMP_OFFSET: usize = 27;
const MAX_TIMESTAMP_OFFSET: usize = 35;
const PRODUCER_ID_OFFSET: usize = 43;
const PRODUCER_EPOCH_OFFSET: usize = 51;
const BASE_SEQUENCE_OFFSET: usize = 53;
const RECORDS_COUNT_OFFSET: usize = 57;

const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
pub(crate) const TRANSACTIONAL_BIT: i16 = 1 << 4;
pub(crate) const CONTROL_BIT: i16 = 1 << 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The attributes field, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributes(pub i16);

impl Attributes {
    pub fn compression(self) -> Result<Compression, RecordsError> {
        Compression::from_id((self.0 & 0x7) as u8)
    }
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(self) -> bool {
        self.0 & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(self) -> bool {
        self.0 & CONTROL_BIT != 0
    }
}

/// Every header field, copied out of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: Attributes,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the fixed header from the front of `bytes`. Checks only that 61 bytes are
    /// present; use [`BatchView::parse`] to validate a whole batch.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, RecordsError> {
        if bytes.len() < BATCH_HEADER_BYTES {
            return Err(RecordsError::Corrupt(format!(
                "{} bytes is shorter than the {BATCH_HEADER_BYTES}-byte batch header",
                bytes.len()
            )));
        }
        Ok(BatchHeader {
            base_offset: be_i64(bytes, 0),
            batch_length: be_i32(bytes, BATCH_LENGTH_OFFSET),
            partition_leader_epoch: be_i32(bytes, PARTITION_LEADER_EPOCH_OFFSET),
            magic: bytes[MAGIC_OFFSET] as i8,
            crc: be_i32(bytes, CRC_OFFSET) as u32,
            attributes: Attributes(be_i16(bytes, ATTRIBUTES_OFFSET)),
            last_offset_delta: be_i32(bytes, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: be_i64(bytes, BASE_TIMESTAMP_OFFSET),
            max_timestamp: be_i64(bytes, MAX_TIMESTAMP_OFFSET),
            producer_id: be_i64(bytes, PRODUCER_ID_OFFSET),
            producer_epoch: be_i16(bytes, PRODUCER_EPOCH_OFFSET),
            base_sequence: be_i32(bytes, BASE_SEQUENCE_OFFSET),
            records_count: be_i32(bytes, RECORDS_COUNT_OFFSET),
        })
    }

    /// Total bytes of the batch on the wire and on disk, as its length field claims.
    /// Negative lengths give a value below the header size, which callers reject.
    pub fn total_bytes(&self) -> i64 {
        LOG_OVERHEAD_BYTES as i64 + self.batch_length as i64
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
}

/// A batch whose framing, magic and CRC have been checked. Borrowed bytes, no copies.
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    pub header: BatchHeader,
    pub bytes: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Validates the batch at the front of `bytes` (which may hold more batches after it):
    /// length within the bytes present, magic 2, CRC32C over attributes..end. Returns the
    /// view of exactly that batch.
    pub fn parse(bytes: &'a [u8]) -> Result<BatchView<'a>, RecordsError> {
        let header = BatchHeader::parse(bytes)?;
        let total = header.total_bytes();
        if total < BATCH_HEADER_BYTES as i64 {
            // Kafka checks magic before size only when the size is plausible; a length
            // below the v2 header is corrupt whatever the magic.
            return Err(RecordsError::Corrupt(format!(
                "batch length {} is below the minimum {}",
                header.batch_length,
                BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES
            )));
        }
        if header.magic != MAGIC_V2 {
            return Err(RecordsError::UnsupportedMagic(header.magic));
        }
        if total > bytes.len() as i64 {
            return Err(RecordsError::Corrupt(format!(
                "batch claims {total} bytes but only {} are present",
                bytes.len()
            )));
        }
        let bytes = &bytes[..total as usize];
        let computed = crc32c::crc32c(&bytes[ATTRIBUTES_OFFSET..]);
        if computed != header.crc {
            return Err(RecordsError::Corrupt(format!(
                "CRC mismatch: stored {:#010x}, computed {computed:#010x}",
                header.crc
            )));
        }
        Ok(BatchView { header, bytes })
    }

    /// The record bytes after the header (compressed if the batch is).
    pub fn records_payload(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_BYTES..]
    }
}

/// Overwrites the base offset. Not covered by the CRC.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites the partition leader epoch. Not covered by the CRC.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch as LogAppendTime with `timestamp` as its max timestamp and recomputes
/// the CRC, as Kafka's broker does for topics with message.timestamp.type=LogAppendTime.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    let attributes = be_i16(batch, ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_BIT;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&timestamp.to_be_bytes());
    refresh_crc(batch);
}

/// Recomputes and stores the CRC over attributes..end.
pub fn refresh_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

fn be_i16(bytes: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([bytes[at], bytes[at + 1]])
}

fn be_i32(bytes: &[u8], at: usize) -> i32 {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&bytes[at..at + 4]);
    i32::from_be_bytes(raw)
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Record};

    fn sample() -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, 1_000);
        builder.push(Record::new(
            Some(b"k".to_vec()),
            Some(b"value".to_vec()),
            1_000,
        ));
        builder.push(Record::new(None, Some(b"v2".to_vec()), 1_005));
        builder.build()
    }

    #[test]
    fn parses_a_built_batch() {
        let bytes = sample();
        let view = BatchView::parse(&bytes).unwrap();
        assert_eq!(view.header.magic, 2);
        assert_eq!(view.header.records_count, 2);
        assert_eq!(view.header.last_offset_delta, 1);
        assert_eq!(view.header.max_timestamp, 1_005);
        assert_eq!(view.header.total_bytes() as usize, bytes.len());
    }

    #[test]
    fn base_offset_and_epoch_rewrites_keep_the_crc_valid() {
        let mut bytes = sample();
        set_base_offset(&mut bytes, 42);
        set_partition_leader_epoch(&mut bytes, 7);
        let view = BatchView::parse(&bytes).unwrap();
        assert_eq!(view.header.base_offset, 42);
        assert_eq!(view.header.last_offset(), 43);
        assert_eq!(view.header.partition_leader_epoch, 7);
    }

    #[test]
    fn log_append_time_recomputes_the_crc() {
        let mut bytes = sample();
        set_log_append_time(&mut bytes, 9_999);
        let view = BatchView::parse(&bytes).unwrap();
        assert_eq!(view.header.max_timestamp, 9_999);
        assert_eq!(
            view.header.attributes.timestamp_type(),
            TimestampType::LogAppendTime
        );
    }

    #[test]
    fn every_flipped_crc_covered_byte_is_detected() {
        let bytes = sample();
        for index in ATTRIBUTES_OFFSET..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x40;
            assert!(
                matches!(BatchView::parse(&damaged), Err(RecordsError::Corrupt(_))),
                "flip at {index} not detected"
            );
        }
    }

    #[test]
    fn truncation_at_every_length_is_corrupt() {
        let bytes = sample();
        for len in 0..bytes.len() {
            assert!(matches!(
                BatchView::parse(&bytes[..len]),
                Err(RecordsError::Corrupt(_))
            ));
        }
    }

    #[test]
    fn other_magic_is_unsupported() {
        let mut bytes = sample();
        bytes[MAGIC_OFFSET] = 1;
        assert_eq!(
            BatchView::parse(&bytes).unwrap_err(),
            RecordsError::UnsupportedMagic(1)
        );
    }

    #[test]
    fn negative_length_is_corrupt_not_a_panic() {
        let mut bytes = sample();
        bytes[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            BatchView::parse(&bytes),
            Err(RecordsError::Corrupt(_))
        ));
    }
}
