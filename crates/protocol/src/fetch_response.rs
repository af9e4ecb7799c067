//! Fetch responses encoded by hand, so record bytes can go from the segment file to the
//! socket with sendfile instead of being copied through user space (kafka-protocol's
//! encoder copies every record set into the response buffer). The output is a list of
//! parts: encoded bytes, and file regions spliced in where each partition's records go.
//! Byte-for-byte equal to kafka-protocol's encoding at every version (see the tests).
//!
//! FetchResponse v4..=18 layout (flexible from v12: compact arrays, compact records,
//! tagged fields; topics by id from v13):
//! throttle_time_ms i32, error_code i16 (v7+), session_id i32 (v7+),
//! responses [topic name | topic id, partitions [index i32, error i16, high_watermark i64,
//! last_stable_offset i64, log_start_offset i64 (v5+), aborted_transactions nullable
//! [producer_id i64, first_offset i64], preferred_read_replica i32 (v11+), records]].

use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

/// An open file whose bytes can be sent with sendfile.
pub type SharedFile = Arc<dyn AsRawFd + Send + Sync>;

/// One piece of a response on the wire.
#[derive(Clone)]
pub enum ResponsePart {
    Bytes(Bytes),
    File {
        file: SharedFile,
        position: u64,
        length: u64,
    },
}

impl ResponsePart {
    pub fn len(&self) -> u64 {
        match self {
            ResponsePart::Bytes(bytes) => bytes.len() as u64,
            ResponsePart::File { length, .. } => *length,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for ResponsePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponsePart::Bytes(bytes) => write!(f, "Bytes({})", bytes.len()),
            ResponsePart::File {
                position, length, ..
            } => write!(f, "File({position}+{length})"),
        }
    }
}

/// A partition's record set: nothing, bytes in memory, or a file region.
#[derive(Clone)]
pub enum RecordsOut {
    Empty,
    Memory(Bytes),
    File {
        file: SharedFile,
        position: u64,
        length: u64,
    },
}

impl RecordsOut {
    pub fn len(&self) -> u64 {
        match self {
            RecordsOut::Empty => 0,
            RecordsOut::Memory(bytes) => bytes.len() as u64,
            RecordsOut::File { length, .. } => *length,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Clone)]
pub struct FetchPartitionOut {
    pub partition_index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer id, first offset); None encodes null.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    pub preferred_read_replica: i32,
    pub records: RecordsOut,
    /// KIP-320 (v12+, tagged field 0): (epoch, end offset) where the fetcher's log
    /// diverges from the leader's; it must truncate before fetching on.
    pub diverging_epoch: Option<(i32, i64)>,
}

#[derive(Clone)]
pub struct FetchTopicOut {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<FetchPartitionOut>,
}

/// Encodes a whole Fetch response frame (size prefix, header, body) as parts;
/// `throttle_time_ms` is the client's quota throttle (0: none).
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    throttle_time_ms: i32,
    error_code: i16,
    session_id: i32,
    topics: &[FetchTopicOut],
) -> anyhow::Result<Vec<ResponsePart>> {
    anyhow::ensure!(
        (4..=18).contains(&version),
        "fetch response version {version} is not encoded by hand"
    );
    let flexible = version >= 12;
    let mut parts = Vec::new();
    let mut buf = BytesMut::new();
    buf.put_i32(0); // size, patched below
    let header_version = ApiKey::Fetch.response_header_version(version);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, header_version)?;
    buf.put_i32(throttle_time_ms);
    if version >= 7 {
        buf.put_i16(error_code);
        buf.put_i32(session_id);
    }
    put_array_len(&mut buf, topics.len(), flexible);
    for topic in topics {
        if version >= 13 {
            buf.put_slice(topic.topic_id.as_bytes());
        } else {
            put_string(&mut buf, &topic.name, flexible);
        }
        put_array_len(&mut buf, topic.partitions.len(), flexible);
        for partition in &topic.partitions {
            buf.put_i32(partition.partition_index);
            buf.put_i16(partition.error_code);
            buf.put_i64(partition.high_watermark);
            buf.put_i64(partition.last_stable_offset);
            if version >= 5 {
                buf.put_i64(partition.log_start_offset);
            }
            match &partition.aborted_transactions {
                None => put_nullable_array_null(&mut buf, flexible),
                Some(aborted) => {
                    put_array_len(&mut buf, aborted.len(), flexible);
                    for (producer_id, first_offset) in aborted {
                        buf.put_i64(*producer_id);
                        buf.put_i64(*first_offset);
                        if flexible {
                            buf.put_u8(0); // tagged fields
                        }
                    }
                }
            }
            if version >= 11 {
                buf.put_i32(partition.preferred_read_replica);
            }
            let length = partition.records.len();
            anyhow::ensure!(
                length < i32::MAX as u64,
                "record set too large for a response"
            );
            if flexible {
                put_unsigned_varint(&mut buf, length as u32 + 1);
            } else {
                buf.put_i32(length as i32);
            }
            match &partition.records {
                RecordsOut::Empty => {}
                RecordsOut::Memory(bytes) => buf.put_slice(bytes),
                RecordsOut::File {
                    file,
                    position,
                    length,
                } => {
                    parts.push(ResponsePart::Bytes(buf.split().freeze()));
                    parts.push(ResponsePart::File {
                        file: file.clone(),
                        position: *position,
                        length: *length,
                    });
                }
            }
            if flexible {
                match partition.diverging_epoch {
                    None => buf.put_u8(0), // no partition tagged fields
                    Some((epoch, end_offset)) => {
                        buf.put_u8(1); // one tagged field
                        buf.put_u8(0); // tag 0: DivergingEpoch
                        buf.put_u8(13); // its size: epoch, end offset, no tagged fields
                        buf.put_i32(epoch);
                        buf.put_i64(end_offset);
                        buf.put_u8(0);
                    }
                }
            }
        }
        if flexible {
            buf.put_u8(0); // topic tagged fields
        }
    }
    if flexible {
        buf.put_u8(0); // response tagged fields
    }
    parts.push(ResponsePart::Bytes(buf.freeze()));
    let total: u64 = parts.iter().map(ResponsePart::len).sum();
    let size =
        i32::try_from(total - 4).map_err(|_| anyhow::anyhow!("fetch response over 2 GiB"))?;
    // The size prefix sits at the start of the first part.
    let first = match &parts[0] {
        ResponsePart::Bytes(bytes) => bytes,
        ResponsePart::File { .. } => unreachable!("the first part is always the header"),
    };
    let mut patched = BytesMut::from(&first[..]);
    patched[..4].copy_from_slice(&size.to_be_bytes());
    parts[0] = ResponsePart::Bytes(patched.freeze());
    parts.retain(|part| !part.is_empty());
    Ok(parts)
}

fn put_unsigned_varint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

fn put_array_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_unsigned_varint(buf, len as u32 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

fn put_nullable_array_null(buf: &mut BytesMut, flexible: bool) {
    if flexible {
        put_unsigned_varint(buf, 0);
    } else {
        buf.put_i32(-1);
    }
}

fn put_string(buf: &mut BytesMut, value: &str, flexible: bool) {
    if flexible {
        put_unsigned_varint(buf, value.len() as u32 + 1);
    } else {
        buf.put_i16(value.len() as i16);
    }
    buf.put_slice(value.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::encode_response;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    fn sample(records: &[&[u8]]) -> Vec<FetchTopicOut> {
        vec![
            FetchTopicOut {
                name: "orders".into(),
                topic_id: Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788),
                partitions: records
                    .iter()
                    .enumerate()
                    .map(|(i, r)| FetchPartitionOut {
                        partition_index: i as i32,
                        error_code: if i == 1 { 1 } else { 0 },
                        high_watermark: 100 + i as i64,
                        last_stable_offset: 90 + i as i64,
                        log_start_offset: i as i64,
                        aborted_transactions: if i == 0 {
                            None
                        } else {
                            Some(vec![(7, 8), (9, 10)])
                        },
                        preferred_read_replica: -1,
                        diverging_epoch: (i == 2).then_some((3, 77)),
                        records: if r.is_empty() {
                            RecordsOut::Empty
                        } else {
                            RecordsOut::Memory(Bytes::copy_from_slice(r))
                        },
                    })
                    .collect(),
            },
            FetchTopicOut {
                name: "empty".into(),
                topic_id: Uuid::nil(),
                partitions: vec![],
            },
        ]
    }

    fn reference(version: i16, topics: &[FetchTopicOut]) -> Bytes {
        let responses = topics
            .iter()
            .map(|topic| {
                FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_topic_id(topic.topic_id)
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(p.error_code)
                                    .with_high_watermark(p.high_watermark)
                                    .with_last_stable_offset(p.last_stable_offset)
                                    .with_log_start_offset(p.log_start_offset)
                                    .with_aborted_transactions(p.aborted_transactions.as_ref().map(
                                        |list| {
                                            list.iter()
                                                .map(|(pid, first)| {
                                                    AbortedTransaction::default()
                                                        .with_producer_id(ProducerId(*pid))
                                                        .with_first_offset(*first)
                                                })
                                                .collect()
                                        },
                                    ))
                                    .with_preferred_read_replica(BrokerId(p.preferred_read_replica))
                                    .with_diverging_epoch(p.diverging_epoch.map_or_else(
                                        Default::default,
                                        |(epoch, end_offset)| {
                                            EpochEndOffset::default()
                                                .with_epoch(epoch)
                                                .with_end_offset(end_offset)
                                        },
                                    ))
                                    .with_records(Some(match &p.records {
                                        RecordsOut::Memory(bytes) => bytes.clone(),
                                        _ => Bytes::new(),
                                    }))
                            })
                            .collect(),
                    )
            })
            .collect();
        let response = FetchResponse::default()
            .with_error_code(0)
            .with_session_id(0)
            .with_responses(responses);
        encode_response(ApiKey::Fetch, version, 42, &response).unwrap()
    }

    fn concat(parts: &[ResponsePart]) -> Vec<u8> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                ResponsePart::Bytes(bytes) => out.extend_from_slice(bytes),
                ResponsePart::File {
                    file,
                    position,
                    length,
                } => {
                    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
                    let opened = std::fs::File::open(path).unwrap();
                    let mut chunk = vec![0u8; *length as usize];
                    opened.read_exact_at(&mut chunk, *position).unwrap();
                    out.extend_from_slice(&chunk);
                }
            }
        }
        out
    }

    #[test]
    fn matches_kafka_protocol_byte_for_byte_at_every_version() {
        let topics = sample(&[b"first-records", b"", &[7u8; 300]]);
        for version in 4..=18 {
            let ours = encode_fetch_response(version, 42, 0, 0, 0, &topics).unwrap();
            assert_eq!(
                concat(&ours),
                reference(version, &topics).to_vec(),
                "version {version}"
            );
        }
    }

    #[test]
    fn file_regions_are_spliced_where_the_records_go() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"....first-records....").unwrap();
        let shared: SharedFile = Arc::new(file);
        let mut topics = sample(&[b"first-records", b"", &[7u8; 300]]);
        topics[0].partitions[0].records = RecordsOut::File {
            file: shared,
            position: 4,
            length: 13,
        };
        for version in [4, 11, 12, 13, 17, 18] {
            let parts = encode_fetch_response(version, 42, 0, 0, 0, &topics).unwrap();
            assert!(parts.iter().any(|p| matches!(p, ResponsePart::File { .. })));
            let expected = reference(version, &sample(&[b"first-records", b"", &[7u8; 300]]));
            assert_eq!(concat(&parts), expected.to_vec(), "version {version}");
        }
    }
}
