//! A share group's records in `__consumer_offsets`, in the layout of Kafka's: the group's
//! epoch (ShareGroupMetadata, type 11) and the partitions whose share state the group has
//! (ShareGroupStatePartitionMetadata, type 15, its InitializedTopics). Members are not
//! written: a member a new coordinator does not know is told UNKNOWN_MEMBER_ID and
//! rejoins at once with its own id (docs/ARCHITECTURE.md, share groups).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

use crate::codec::{put_compact_len, put_compact_string, put_no_tags, put_string, Reader};

pub const SHARE_GROUP_METADATA: i16 = 11;
pub const SHARE_GROUP_STATE_PARTITIONS: i16 = 15;

/// topic id -> (topic name, partitions)
pub type InitializedTopics = BTreeMap<Uuid, (String, BTreeSet<i32>)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    /// The group's epoch; None: a tombstone (the group is deleted).
    Metadata { group: String, epoch: Option<i32> },
    /// The partitions whose share state the group has; None: a tombstone.
    StatePartitions {
        group: String,
        initialized: Option<InitializedTopics>,
    },
}

impl ShareRecord {
    pub fn group(&self) -> &str {
        match self {
            ShareRecord::Metadata { group, .. } | ShareRecord::StatePartitions { group, .. } => {
                group
            }
        }
    }
}

pub fn is_share_record(record_type: i16) -> bool {
    matches!(
        record_type,
        SHARE_GROUP_METADATA | SHARE_GROUP_STATE_PARTITIONS
    )
}

fn key(record_type: i16, group: &str) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(record_type);
    put_string(&mut out, group);
    out.to_vec()
}

pub fn metadata_key(group: &str) -> Vec<u8> {
    key(SHARE_GROUP_METADATA, group)
}

pub fn state_partitions_key(group: &str) -> Vec<u8> {
    key(SHARE_GROUP_STATE_PARTITIONS, group)
}

/// ShareGroupMetadataValue v0: Epoch, MetadataHash (Strand writes 0: it recomputes the
/// subscription's metadata from the topics it knows).
pub fn metadata_value(epoch: i32) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(epoch);
    out.put_i64(0);
    put_no_tags(&mut out);
    out.to_vec()
}

fn put_topics(out: &mut BytesMut, topics: &InitializedTopics) {
    put_compact_len(out, topics.len());
    for (id, (name, partitions)) in topics {
        out.put_slice(id.as_bytes());
        put_compact_string(out, name);
        put_compact_len(out, partitions.len());
        for partition in partitions {
            out.put_i32(*partition);
        }
        put_no_tags(out);
    }
}

/// ShareGroupStatePartitionMetadataValue v0: InitializingTopics (none: Strand's
/// share-partitions are initialized by their leader on first use), InitializedTopics,
/// DeletingTopics (none).
pub fn state_partitions_value(initialized: &InitializedTopics) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_topics(&mut out, &InitializedTopics::new());
    put_topics(&mut out, initialized);
    put_compact_len(&mut out, 0);
    put_no_tags(&mut out);
    out.to_vec()
}

fn read_topics(reader: &mut Reader) -> Option<InitializedTopics> {
    let mut topics = InitializedTopics::new();
    for _ in 0..reader.compact_len()? {
        let id = reader.uuid()?;
        let name = reader.compact_string()?;
        let mut partitions = BTreeSet::new();
        for _ in 0..reader.compact_len()? {
            partitions.insert(reader.i32()?);
        }
        reader.skip_tags()?;
        topics.insert(id, (name, partitions));
    }
    Some(topics)
}

pub(crate) fn decode(
    record_type: i16,
    key: &mut Reader,
    value: Option<&[u8]>,
) -> Option<ShareRecord> {
    let group = key.string()?;
    let Some(value) = value else {
        return Some(match record_type {
            SHARE_GROUP_METADATA => ShareRecord::Metadata { group, epoch: None },
            _ => ShareRecord::StatePartitions {
                group,
                initialized: None,
            },
        });
    };
    let mut reader = Reader::new(value);
    if reader.i16()? != 0 {
        return None;
    }
    Some(match record_type {
        SHARE_GROUP_METADATA => ShareRecord::Metadata {
            group,
            epoch: Some(reader.i32()?),
        },
        _ => {
            let initializing = read_topics(&mut reader)?;
            let mut initialized = read_topics(&mut reader)?;
            // Partitions still initializing when Kafka wrote this may have state too.
            for (id, (name, partitions)) in initializing {
                initialized
                    .entry(id)
                    .or_insert_with(|| (name, BTreeSet::new()))
                    .1
                    .extend(partitions);
            }
            ShareRecord::StatePartitions {
                group,
                initialized: Some(initialized),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_record(key: &[u8], value: Option<&[u8]>) -> Option<ShareRecord> {
        let mut reader = Reader::new(key);
        let record_type = reader.i16()?;
        decode(record_type, &mut reader, value)
    }

    #[test]
    fn records_round_trip() {
        assert_eq!(
            decode_record(&metadata_key("g"), Some(&metadata_value(7))),
            Some(ShareRecord::Metadata {
                group: "g".into(),
                epoch: Some(7)
            })
        );
        let mut topics = InitializedTopics::new();
        topics.insert(Uuid::from_u128(3), ("t".into(), BTreeSet::from([0, 2])));
        assert_eq!(
            decode_record(
                &state_partitions_key("g"),
                Some(&state_partitions_value(&topics))
            ),
            Some(ShareRecord::StatePartitions {
                group: "g".into(),
                initialized: Some(topics)
            })
        );
        assert_eq!(
            decode_record(&state_partitions_key("g"), None),
            Some(ShareRecord::StatePartitions {
                group: "g".into(),
                initialized: None
            })
        );
        assert_eq!(decode_record(&metadata_key("g"), Some(&[0, 1, 2])), None);
    }
}
