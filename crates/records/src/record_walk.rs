//! Walks the records inside a batch, checking the record count and every record's length
//! against the bytes that hold them, as Kafka's broker does before accepting a produce.
//! Compressed batches are decoded as a stream: memory is bounded by the largest record,
//! and the total decoded bytes by [`WalkLimits::decompressed_max_bytes`].

use std::io::{BufReader, Read};

use crate::batch::BatchView;
use crate::compression::Compression;
use crate::error::RecordsError;
use crate::varint::{read_varint, read_varlong};

#[derive(Debug, Clone, Copy)]
pub struct WalkLimits {
    /// Bound on the decoded size of one batch's records (guards against zip bombs).
    pub decompressed_max_bytes: usize,
}

impl Default for WalkLimits {
    fn default() -> Self {
        WalkLimits {
            decompressed_max_bytes: 256 * 1024 * 1024,
        }
    }
}

/// One record as seen by the walker; borrowed from the walker's scratch buffer.
#[derive(Debug)]
pub struct WalkedRecord<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// (key, value) pairs; a header key is never null in Kafka's format.
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSummary {
    pub count: usize,
    pub decompressed_bytes: usize,
}

/// Validates every record of `batch` as a producer's batch must be (Kafka's produce
/// rules: at least one record, a record count matching the offset range), handing each to
/// `visit`.
pub fn walk_records(
    batch: &BatchView<'_>,
    limits: WalkLimits,
    visit: impl FnMut(&WalkedRecord<'_>),
) -> Result<RecordSummary, RecordsError> {
    walk(batch, limits, true, visit)
}

/// Walks the records of a batch already in a log. Compaction leaves batches with fewer
/// records than their offset range (even none), so only the record framing is checked.
pub fn walk_stored_records(
    batch: &BatchView<'_>,
    limits: WalkLimits,
    visit: impl FnMut(&WalkedRecord<'_>),
) -> Result<RecordSummary, RecordsError> {
    walk(batch, limits, false, visit)
}

fn walk(
    batch: &BatchView<'_>,
    limits: WalkLimits,
    produced: bool,
    mut visit: impl FnMut(&WalkedRecord<'_>),
) -> Result<RecordSummary, RecordsError> {
    let header = &batch.header;
    if !produced && header.records_count == 0 {
        return Ok(RecordSummary {
            count: 0,
            decompressed_bytes: 0,
        });
    }
    if header.records_count < 0 || (produced && header.records_count == 0) {
        return Err(RecordsError::InvalidRecord(format!(
            "invalid reported record count {}",
            header.records_count
        )));
    }
    let offsets_disagree = if produced {
        header.last_offset_delta as i64 + 1 != header.records_count as i64
    } else {
        header.records_count as i64 > header.last_offset_delta as i64 + 1
    };
    if header.last_offset_delta < 0 || offsets_disagree {
        return Err(RecordsError::InvalidRecord(format!(
            "last offset delta {} disagrees with record count {}",
            header.last_offset_delta, header.records_count
        )));
    }
    let codec = header.attributes.compression()?;
    if codec == Compression::None {
        // Uncompressed records are no larger than the batch that holds them.
        return walk_plain(
            batch.records_payload(),
            header.records_count as usize,
            visit,
        );
    }
    let decoder = codec
        .decoder(batch.records_payload())
        .map_err(|error| RecordsError::Corrupt(format!("{codec:?} stream: {error}")))?;
    let mut reader = BufReader::with_capacity(8 * 1024, decoder);
    let mut scratch = Vec::new();
    let mut decompressed_bytes = 0usize;
    for index in 0..header.records_count as usize {
        let Some(length) = read_stream_varint(&mut reader)? else {
            return Err(RecordsError::InvalidRecord(format!(
                "batch declares {} records but holds {index}",
                header.records_count
            )));
        };
        if length < 0 {
            return Err(RecordsError::InvalidRecord(format!(
                "negative record length {length}"
            )));
        }
        let length = length as usize;
        if decompressed_bytes + length > limits.decompressed_max_bytes {
            return Err(RecordsError::DecompressedTooLarge {
                limit_bytes: limits.decompressed_max_bytes,
            });
        }
        decompressed_bytes += length;
        scratch.resize(length, 0);
        reader.read_exact(&mut scratch).map_err(|_| {
            RecordsError::InvalidRecord(format!(
                "record {index} claims {length} bytes past the end"
            ))
        })?;
        let record = parse_record_body(&scratch)
            .ok_or_else(|| RecordsError::InvalidRecord(format!("record {index} is malformed")))?;
        visit(&record);
    }
    let mut probe = [0u8; 1];
    match reader.read(&mut probe) {
        Ok(0) => {}
        Ok(_) => {
            return Err(RecordsError::InvalidRecord(
                "incorrect declared batch size, records still remaining".into(),
            ))
        }
        Err(error) => return Err(RecordsError::Corrupt(format!("{codec:?} stream: {error}"))),
    }
    Ok(RecordSummary {
        count: header.records_count as usize,
        decompressed_bytes,
    })
}

/// The uncompressed case: records are parsed in place, with no copy (the produce path).
fn walk_plain(
    payload: &[u8],
    records_count: usize,
    mut visit: impl FnMut(&WalkedRecord<'_>),
) -> Result<RecordSummary, RecordsError> {
    let mut rest = payload;
    for index in 0..records_count {
        let Some((length, used)) = read_varint(rest) else {
            return Err(RecordsError::InvalidRecord(if rest.is_empty() {
                format!("batch declares {records_count} records but holds {index}")
            } else {
                format!("record {index} has a malformed length")
            }));
        };
        if length < 0 || length as usize > rest.len() - used {
            return Err(RecordsError::InvalidRecord(format!(
                "record {index} claims {length} bytes past the end"
            )));
        }
        let (body, after) = rest[used..].split_at(length as usize);
        let record = parse_record_body(body)
            .ok_or_else(|| RecordsError::InvalidRecord(format!("record {index} is malformed")))?;
        visit(&record);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(RecordsError::InvalidRecord(
            "incorrect declared batch size, records still remaining".into(),
        ));
    }
    Ok(RecordSummary {
        count: records_count,
        decompressed_bytes: payload.len(),
    })
}

/// Reads a varint from a stream; `Ok(None)` at a clean end of stream.
fn read_stream_varint(reader: &mut impl Read) -> Result<Option<i32>, RecordsError> {
    let mut raw = [0u8; 5];
    for index in 0..raw.len() {
        let mut byte = [0u8; 1];
        match reader.read(&mut byte) {
            Ok(0) if index == 0 => return Ok(None),
            Ok(0) => {
                return Err(RecordsError::InvalidRecord(
                    "truncated record length".into(),
                ))
            }
            Ok(_) => {}
            Err(error) => return Err(RecordsError::Corrupt(format!("decoding records: {error}"))),
        }
        raw[index] = byte[0];
        if byte[0] & 0x80 == 0 {
            return read_varint(&raw[..=index])
                .map(|(value, _)| Some(value))
                .ok_or_else(|| RecordsError::InvalidRecord("bad record length varint".into()));
        }
    }
    Err(RecordsError::InvalidRecord(
        "overlong record length varint".into(),
    ))
}

/// Parses one record body (everything after its length). `None` if any field runs past
/// the body or the body has bytes left over.
fn parse_record_body(body: &[u8]) -> Option<WalkedRecord<'_>> {
    let mut cursor = Cursor { rest: body };
    let attributes = *cursor.rest.first()? as i8;
    cursor.rest = &cursor.rest[1..];
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    let key = cursor.nullable_bytes()?;
    let value = cursor.nullable_bytes()?;
    let header_count = cursor.varint()?;
    if header_count < 0 || header_count as usize > cursor.rest.len() {
        return None;
    }
    let mut headers = Vec::with_capacity(header_count as usize);
    for _ in 0..header_count {
        let key = cursor.nullable_bytes()??;
        let value = cursor.nullable_bytes()?;
        headers.push((key, value));
    }
    if !cursor.rest.is_empty() {
        return None;
    }
    Some(WalkedRecord {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
    })
}

struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn varint(&mut self) -> Option<i32> {
        let (value, used) = read_varint(self.rest)?;
        self.rest = &self.rest[used..];
        Some(value)
    }
    fn varlong(&mut self) -> Option<i64> {
        let (value, used) = read_varlong(self.rest)?;
        self.rest = &self.rest[used..];
        Some(value)
    }
    /// `Some(None)` for a null (-1 length), `None` when malformed.
    fn nullable_bytes(&mut self) -> Option<Option<&'a [u8]>> {
        let length = self.varint()?;
        if length == -1 {
            return Some(None);
        }
        if length < 0 || length as usize > self.rest.len() {
            return None;
        }
        let (taken, rest) = self.rest.split_at(length as usize);
        self.rest = rest;
        Some(Some(taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{refresh_crc, BATCH_HEADER_BYTES};
    use crate::builder::{BatchBuilder, Header, Record};

    fn build(codec: Compression, count: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, 1_000).compression(codec);
        for index in 0..count {
            builder.push(
                Record::new(
                    Some(format!("key-{index}").into_bytes()),
                    Some(vec![7u8; 100]),
                    1_000 + index as i64,
                )
                .with_header(Header {
                    key: b"h".to_vec(),
                    value: Some(b"v".to_vec()),
                }),
            );
        }
        builder.build()
    }

    #[test]
    fn walks_every_codec_and_sees_every_record() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = build(codec, 50);
            let view = BatchView::parse(&bytes).unwrap();
            let mut keys = Vec::new();
            let summary = walk_records(&view, WalkLimits::default(), |record| {
                keys.push(record.key.unwrap().to_vec());
                assert_eq!(record.value.unwrap().len(), 100);
                assert_eq!(record.headers.len(), 1);
            })
            .unwrap();
            assert_eq!(summary.count, 50, "{codec:?}");
            assert_eq!(keys[49], b"key-49");
        }
    }

    #[test]
    fn count_larger_than_records_is_invalid() {
        let mut bytes = build(Compression::None, 3);
        bytes[57..61].copy_from_slice(&4i32.to_be_bytes());
        bytes[23..27].copy_from_slice(&3i32.to_be_bytes());
        refresh_crc(&mut bytes);
        let view = BatchView::parse(&bytes).unwrap();
        assert!(matches!(
            walk_records(&view, WalkLimits::default(), |_| {}),
            Err(RecordsError::InvalidRecord(_))
        ));
    }

    #[test]
    fn count_smaller_than_records_is_invalid() {
        let mut bytes = build(Compression::Lz4, 3);
        bytes[57..61].copy_from_slice(&2i32.to_be_bytes());
        bytes[23..27].copy_from_slice(&1i32.to_be_bytes());
        refresh_crc(&mut bytes);
        let view = BatchView::parse(&bytes).unwrap();
        assert!(matches!(
            walk_records(&view, WalkLimits::default(), |_| {}),
            Err(RecordsError::InvalidRecord(_))
        ));
    }

    #[test]
    fn count_disagreeing_with_last_offset_delta_is_invalid() {
        let mut bytes = build(Compression::None, 3);
        bytes[23..27].copy_from_slice(&5i32.to_be_bytes());
        refresh_crc(&mut bytes);
        let view = BatchView::parse(&bytes).unwrap();
        assert!(matches!(
            walk_records(&view, WalkLimits::default(), |_| {}),
            Err(RecordsError::InvalidRecord(_))
        ));
    }

    #[test]
    fn record_length_past_the_batch_is_invalid() {
        let mut bytes = build(Compression::None, 1);
        // First record length varint sits right after the header; make it claim 1023 bytes.
        bytes[BATCH_HEADER_BYTES] = 0xfe;
        bytes.insert(BATCH_HEADER_BYTES + 1, 0x0f);
        let length = (bytes.len() - 12) as i32;
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        refresh_crc(&mut bytes);
        let view = BatchView::parse(&bytes).unwrap();
        assert!(matches!(
            walk_records(&view, WalkLimits::default(), |_| {}),
            Err(RecordsError::InvalidRecord(_))
        ));
    }

    #[test]
    fn zip_bomb_is_bounded() {
        let mut builder = BatchBuilder::new(0, 0).compression(Compression::Zstd);
        builder.push(Record::new(None, Some(vec![0u8; 4 * 1024 * 1024]), 0));
        let bytes = builder.build();
        assert!(bytes.len() < 64 * 1024);
        let view = BatchView::parse(&bytes).unwrap();
        let limits = WalkLimits {
            decompressed_max_bytes: 1024 * 1024,
        };
        assert_eq!(
            walk_records(&view, limits, |_| {}).unwrap_err(),
            RecordsError::DecompressedTooLarge {
                limit_bytes: 1024 * 1024
            }
        );
    }

    #[test]
    fn corrupt_compressed_stream_is_an_error() {
        let mut bytes = build(Compression::Gzip, 10);
        let middle = BATCH_HEADER_BYTES + 30;
        bytes[middle] ^= 0xff;
        bytes[middle + 1] ^= 0xff;
        refresh_crc(&mut bytes);
        let view = BatchView::parse(&bytes).unwrap();
        assert!(walk_records(&view, WalkLimits::default(), |_| {}).is_err());
    }
}
