//! Builds v2 record batches: used by tests, benchmarks and the broker's internal topics.

use crate::batch::{refresh_crc, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2};
use crate::compression::{compress, Compression};
use crate::varint::{write_varint, write_varlong};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: i64,
    pub headers: Vec<Header>,
}

impl Record {
    pub fn new(key: Option<Vec<u8>>, value: Option<Vec<u8>>, timestamp: i64) -> Record {
        Record {
            key,
            value,
            timestamp,
            headers: Vec::new(),
        }
    }

    pub fn with_header(mut self, header: Header) -> Record {
        self.headers.push(header);
        self
    }
}

#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_offset: i64,
    base_timestamp: i64,
    compression: Compression,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    partition_leader_epoch: i32,
    /// Attribute bits besides compression: transactional, control.
    flags: i16,
    records: Vec<Record>,
}

impl BatchBuilder {
    pub fn new(base_offset: i64, base_timestamp: i64) -> BatchBuilder {
        BatchBuilder {
            base_offset,
            base_timestamp,
            compression: Compression::None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            partition_leader_epoch: -1,
            flags: 0,
            records: Vec::new(),
        }
    }

    /// Marks the batch as part of its producer's transaction.
    pub fn transactional(mut self) -> BatchBuilder {
        self.flags |= crate::batch::TRANSACTIONAL_BIT;
        self
    }

    /// Marks the batch as a control batch (a transaction marker; also transactional).
    pub fn control(mut self) -> BatchBuilder {
        self.flags |= crate::batch::CONTROL_BIT | crate::batch::TRANSACTIONAL_BIT;
        self
    }

    pub fn compression(mut self, compression: Compression) -> BatchBuilder {
        self.compression = compression;
        self
    }

    pub fn producer(
        mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> BatchBuilder {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    pub fn push(&mut self, record: Record) {
        self.records.push(record);
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The finished batch. Panics on an empty builder: Kafka has no empty data batches.
    pub fn build(&self) -> Vec<u8> {
        assert!(
            !self.records.is_empty(),
            "a record batch holds at least one record"
        );
        let plain =
            encode_records(
                self.records
                    .iter()
                    .enumerate()
                    .map(|(index, record)| RecordParts {
                        attributes: 0,
                        timestamp_delta: record.timestamp - self.base_timestamp,
                        offset_delta: index as i32,
                        key: record.key.as_deref(),
                        value: record.value.as_deref(),
                        headers: &record.headers,
                    }),
            );
        let max_timestamp = self.records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
        assemble(
            &HeaderFields {
                base_offset: self.base_offset,
                partition_leader_epoch: self.partition_leader_epoch,
                attributes: self.compression.id() as i16 | self.flags,
                last_offset_delta: (self.records.len() - 1) as i32,
                base_timestamp: self.base_timestamp,
                max_timestamp,
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                base_sequence: self.base_sequence,
                records_count: self.records.len() as i32,
            },
            &compress(self.compression, &plain),
        )
    }
}

/// One record's fields, borrowed, for encoding.
struct RecordParts<'a> {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [Header],
}

/// Records in the v2 record format, uncompressed.
fn encode_records<'a>(records: impl Iterator<Item = RecordParts<'a>>) -> Vec<u8> {
    let mut plain = Vec::new();
    let mut body = Vec::new();
    for record in records {
        body.clear();
        body.push(record.attributes as u8);
        write_varlong(&mut body, record.timestamp_delta);
        write_varint(&mut body, record.offset_delta);
        write_nullable(&mut body, record.key);
        write_nullable(&mut body, record.value);
        write_varint(&mut body, record.headers.len() as i32);
        for header in record.headers {
            write_nullable(&mut body, Some(&header.key));
            write_nullable(&mut body, header.value.as_deref());
        }
        write_varint(&mut plain, body.len() as i32);
        plain.extend_from_slice(&body);
    }
    plain
}

/// The header fields of a batch (length, magic and CRC are derived).
struct HeaderFields {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records_count: i32,
}

/// A whole batch: header, then `payload` (records, compressed as `attributes` says).
fn assemble(fields: &HeaderFields, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + payload.len());
    out.extend_from_slice(&fields.base_offset.to_be_bytes());
    let batch_length = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + payload.len()) as i32;
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&fields.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&[0; 4]); // CRC, filled below
    out.extend_from_slice(&fields.attributes.to_be_bytes());
    out.extend_from_slice(&fields.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&fields.base_timestamp.to_be_bytes());
    out.extend_from_slice(&fields.max_timestamp.to_be_bytes());
    out.extend_from_slice(&fields.producer_id.to_be_bytes());
    out.extend_from_slice(&fields.producer_epoch.to_be_bytes());
    out.extend_from_slice(&fields.base_sequence.to_be_bytes());
    out.extend_from_slice(&fields.records_count.to_be_bytes());
    out.extend_from_slice(payload);
    refresh_crc(&mut out);
    out
}

fn write_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(bytes) => {
            write_varint(out, bytes.len() as i32);
            out.extend_from_slice(bytes);
        }
    }
}

/// A record kept by compaction: its original position and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRecord {
    pub attributes: i8,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// Rebuilds a batch with a subset of its records, keeping everything that places it in
/// the log: base offset, last offset delta (so offsets stay contiguous batch to batch),
/// partition leader epoch, timestamps, attributes and producer fields. The records keep
/// their offset and timestamp deltas; the payload is recompressed with the original codec
/// (an empty batch is written uncompressed).
pub fn rebuild_batch(original: &crate::BatchHeader, records: &[KeptRecord]) -> Vec<u8> {
    let plain = encode_records(records.iter().map(|record| RecordParts {
        attributes: record.attributes,
        timestamp_delta: record.timestamp_delta,
        offset_delta: record.offset_delta,
        key: record.key.as_deref(),
        value: record.value.as_deref(),
        headers: &record.headers,
    }));
    let codec = if records.is_empty() {
        Compression::None
    } else {
        original
            .attributes
            .compression()
            .unwrap_or(Compression::None)
    };
    assemble(
        &HeaderFields {
            base_offset: original.base_offset,
            partition_leader_epoch: original.partition_leader_epoch,
            attributes: (original.attributes.0 & !0x7) | codec.id() as i16,
            last_offset_delta: original.last_offset_delta,
            base_timestamp: original.base_timestamp,
            max_timestamp: original.max_timestamp,
            producer_id: original.producer_id,
            producer_epoch: original.producer_epoch,
            base_sequence: original.base_sequence,
            records_count: records.len() as i32,
        },
        &compress(codec, &plain),
    )
}
