//! The records the group coordinator writes to `__consumer_offsets`, in Kafka's own
//! formats (so Kafka's tools can read the topic): offset commits (key version 1, value
//! version 3) and group metadata (key version 2, value version 3); KIP-848 consumer
//! groups' records (types 3 and 5-8) are in consumer_records.rs. A null value is a
//! tombstone. The partition of a group is Kafka's: `abs(groupId.hashCode) % partitions`.

use bytes::{BufMut, Bytes, BytesMut};

use super::consumer_records::{self, ConsumerRecord};
use super::share_records::{self, ShareRecord};
use super::streams_records::{self, StreamsRecord};
use crate::codec::{put_string, Reader};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// offsets.topic.num.partitions
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 50;

pub use crate::codec::{java_string_hash, partition_for};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub generation_id: i32,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<StoredMember>,
}

/// A decoded `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsRecord {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    Group {
        group: String,
        value: Option<StoredGroup>,
    },
    /// A KIP-848 consumer group's record (consumer_records.rs).
    Consumer(ConsumerRecord),
    /// A share group's record (share_records.rs).
    Share(ShareRecord),
    /// A streams group's record (streams_records.rs).
    Streams(StreamsRecord),
}

fn put_nullable_string(out: &mut BytesMut, text: Option<&str>) {
    match text {
        Some(text) => put_string(out, text),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8]) {
    out.put_i32(bytes.len() as i32);
    out.put_slice(bytes);
}

pub fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(1);
    put_string(&mut out, group);
    put_string(&mut out, topic);
    out.put_i32(partition);
    out.to_vec()
}

pub fn offset_value(offset: &CommittedOffset) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(3);
    out.put_i64(offset.offset);
    out.put_i32(offset.leader_epoch);
    put_string(&mut out, &offset.metadata);
    out.put_i64(offset.commit_timestamp);
    out.to_vec()
}

pub fn group_key(group: &str) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(2);
    put_string(&mut out, group);
    out.to_vec()
}

pub fn group_value(group: &StoredGroup) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(3);
    put_string(&mut out, &group.protocol_type);
    out.put_i32(group.generation_id);
    put_nullable_string(&mut out, group.protocol_name.as_deref());
    put_nullable_string(&mut out, group.leader.as_deref());
    out.put_i64(group.state_timestamp);
    out.put_i32(group.members.len() as i32);
    for member in &group.members {
        put_string(&mut out, &member.member_id);
        put_nullable_string(&mut out, member.group_instance_id.as_deref());
        put_string(&mut out, &member.client_id);
        put_string(&mut out, &member.client_host);
        out.put_i32(member.rebalance_timeout_ms);
        out.put_i32(member.session_timeout_ms);
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out.to_vec()
}

/// A bounds-checked reader: every read returns None past the end.
/// Decodes a record of `__consumer_offsets`; None for versions or shapes this does not
/// know (skipped at load, as Kafka skips unknown record types).
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Option<OffsetsRecord> {
    let mut key_reader = Reader { rest: key };
    match key_reader.i16()? {
        0 | 1 => {
            let group = key_reader.string()?;
            let topic = key_reader.string()?;
            let partition = key_reader.i32()?;
            let value = match value {
                None => None,
                Some(value) => Some(decode_offset_value(value)?),
            };
            Some(OffsetsRecord::Offset {
                group,
                topic,
                partition,
                value,
            })
        }
        2 => {
            let group = key_reader.string()?;
            let value = match value {
                None => None,
                Some(value) => Some(decode_group_value(value)?),
            };
            Some(OffsetsRecord::Group { group, value })
        }
        record_type if consumer_records::is_consumer_record(record_type) => {
            Some(OffsetsRecord::Consumer(consumer_records::decode(
                record_type,
                &mut key_reader,
                value,
            )?))
        }
        record_type if share_records::is_share_record(record_type) => Some(OffsetsRecord::Share(
            share_records::decode(record_type, &mut key_reader, value)?,
        )),
        record_type if streams_records::is_streams_record(record_type) => {
            Some(OffsetsRecord::Streams(streams_records::decode(
                record_type,
                &mut key_reader,
                value,
            )?))
        }
        _ => None,
    }
}

fn decode_offset_value(value: &[u8]) -> Option<CommittedOffset> {
    let mut reader = Reader { rest: value };
    let version = reader.i16()?;
    let offset = reader.i64()?;
    let leader_epoch = if version >= 3 { reader.i32()? } else { -1 };
    let metadata = reader.string()?;
    let commit_timestamp = reader.i64()?;
    Some(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

fn decode_group_value(value: &[u8]) -> Option<StoredGroup> {
    let mut reader = Reader { rest: value };
    let version = reader.i16()?;
    let protocol_type = reader.string()?;
    let generation_id = reader.i32()?;
    let protocol_name = reader.nullable_string()?;
    let leader = reader.nullable_string()?;
    let state_timestamp = if version >= 2 { reader.i64()? } else { -1 };
    let count = reader.i32()?;
    if count < 0 || count as usize > value.len() {
        return None;
    }
    let mut members = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let member_id = reader.string()?;
        let group_instance_id = if version >= 3 {
            reader.nullable_string()?
        } else {
            None
        };
        let client_id = reader.string()?;
        let client_host = reader.string()?;
        let rebalance_timeout_ms = if version >= 1 { reader.i32()? } else { 0 };
        let session_timeout_ms = reader.i32()?;
        let subscription = reader.bytes()?;
        let assignment = reader.bytes()?;
        members.push(StoredMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if version >= 1 {
                rebalance_timeout_ms
            } else {
                session_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Some(StoredGroup {
        protocol_type,
        generation_id,
        protocol_name,
        leader,
        state_timestamp,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_match_kafkas_hash() {
        // Java: "my-group".hashCode() == -1906497762 (Utils.abs -> % 50 == 12).
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        assert_eq!(partition_for("my-group", OFFSETS_TOPIC_PARTITIONS), 12);
        assert_eq!(
            java_string_hash("my-group"),
            "my-group"
                .encode_utf16()
                .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
        );
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 97 * 31 + 98);
        for group in ["console-consumer-1", "g", "orders-service", "ünïcode"] {
            let partition = partition_for(group, OFFSETS_TOPIC_PARTITIONS);
            assert!((0..OFFSETS_TOPIC_PARTITIONS).contains(&partition));
        }
    }

    #[test]
    fn records_round_trip() {
        let offset = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1_000,
        };
        let decoded = decode(&offset_key("g", "t", 7), Some(&offset_value(&offset))).unwrap();
        assert_eq!(
            decoded,
            OffsetsRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7,
                value: Some(offset)
            }
        );
        let group = StoredGroup {
            protocol_type: "consumer".into(),
            generation_id: 5,
            protocol_name: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp: 9,
            members: vec![StoredMember {
                member_id: "m-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        let decoded = decode(&group_key("g"), Some(&group_value(&group))).unwrap();
        assert_eq!(
            decoded,
            OffsetsRecord::Group {
                group: "g".into(),
                value: Some(group)
            }
        );
        assert_eq!(
            decode(&group_key("g"), None),
            Some(OffsetsRecord::Group {
                group: "g".into(),
                value: None
            })
        );
        assert_eq!(decode(&[0, 9], None), None);
        assert_eq!(
            decode(&offset_key("g", "t", 1), Some(&[0, 3, 1])),
            None,
            "truncated value"
        );
    }
}
