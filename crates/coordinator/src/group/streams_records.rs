//! KIP-1071 streams groups in `__consumer_offsets`, in Kafka's own record formats (so a
//! new coordinator, Strand's or Kafka's, or a tool reading the topic, finds the group as it
//! was):
//!
//!   17  StreamsGroupMetadata                  group -> epoch, metadata hash, tagged state
//!   19  StreamsGroupMemberMetadata            group, member -> client, process, endpoint
//!   20  StreamsGroupTargetAssignmentMetadata  group -> assignment epoch (+ timestamp)
//!   21  StreamsGroupTargetAssignmentMember    group, member -> target tasks
//!   22  StreamsGroupCurrentMemberAssignment   group, member -> epochs, state, tasks
//!   23  StreamsGroupTopology                  group -> the topology the members run
//!
//! (18 is a retired partition-metadata record: not a streams record here, so a load skips
//! it like any unknown type.)
//!
//! Keys are the record type (as the key version) and non-flexible strings; values are
//! version 0, flexible (compact strings and arrays, tagged fields). The bytes are those of
//! Kafka 4.4.0's generated message classes, checked against them in the tests (the hex
//! there comes from golden/Golden.java, which runs Kafka's serializer).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};

use crate::codec::{
    put_compact_len, put_compact_nullable_string, put_compact_string, put_no_tags, put_string,
    put_uvarint, Reader,
};

const GROUP_METADATA: i16 = 17;
const MEMBER_METADATA: i16 = 19;
const TARGET_METADATA: i16 = 20;
const TARGET_MEMBER: i16 = 21;
const CURRENT_ASSIGNMENT: i16 = 22;
const TOPOLOGY: i16 = 23;

/// Kafka's streams MemberState, as record 22 stores it. Unlike the consumer groups' states
/// (0, 1, 2) these start at 1.
pub const MEMBER_STATE_STABLE: i8 = 1;
pub const MEMBER_STATE_UNREVOKED_TASKS: i8 = 2;
pub const MEMBER_STATE_UNRELEASED_TASKS: i8 = 3;
pub const MEMBER_STATE_UNKNOWN: i8 = 127;

/// Record 17's tags.
const VALIDATED_TOPOLOGY_EPOCH_TAG: u32 = 0;
const LAST_ASSIGNMENT_CONFIGS_TAG: u32 = 1;
const STORED_DESCRIPTION_EPOCH_TAG: u32 = 2;
const FAILED_DESCRIPTION_EPOCH_TAG: u32 = 3;
/// Record 20's tag.
const ASSIGNMENT_TIMESTAMP_TAG: u32 = 0;
/// Tag of a record-22 TaskIds entry's AssignmentEpochs.
const ASSIGNMENT_EPOCHS_TAG: u32 = 0;

/// The default of the tagged epochs of record 17 ("none").
const NO_EPOCH: i32 = -1;

/// Subtopology id -> partitions (a BTreeMap, so written sorted as Kafka writes them).
pub type TaskIds = BTreeMap<String, BTreeSet<i32>>;

/// (subtopology id, partition) -> the epoch the active task was assigned at.
type ActiveEpochs = BTreeMap<(String, i32), i32>;

/// A changelog or repartition topic of a subtopology.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTopicInfo {
    pub name: String,
    /// 0: no partition count enforced (always 0 for changelogs).
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Topics that must be co-partitioned, as indexes into the subtopology's lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredCopartitionGroup {
    pub source_topics: Vec<i16>,
    pub source_topic_regex: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredSubtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub source_topic_regex: Vec<String>,
    pub state_changelog_topics: Vec<StoredTopicInfo>,
    pub repartition_sink_topics: Vec<String>,
    pub repartition_source_topics: Vec<StoredTopicInfo>,
    pub copartition_groups: Vec<StoredCopartitionGroup>,
}

/// Record 23.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTopology {
    pub epoch: i32,
    pub subtopologies: Vec<StoredSubtopology>,
}

/// Record 17.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroupMetadata {
    pub epoch: i32,
    pub metadata_hash: i64,
    /// Tag 0; -1 (none) is not written.
    pub validated_topology_epoch: i32,
    /// Tag 1. The schema says "default null", but Kafka's generated class defaults it to
    /// an empty list: an empty list is what is not written (and what a record without the
    /// tag reads as), while None is written as the tag holding a null array. Kafka's
    /// coordinator always writes a list (empty when it has no configs).
    pub last_assignment_configs: Option<Vec<(String, String)>>,
    /// Tag 2; -1 (none) is not written. -2 marks an interrupted plugin operation.
    pub stored_description_topology_epoch: i32,
    /// Tag 3; -1 (none) is not written.
    pub failed_description_topology_epoch: i32,
}

impl Default for StoredGroupMetadata {
    /// Kafka's field defaults, so that a default value writes no tagged field.
    fn default() -> Self {
        StoredGroupMetadata {
            epoch: 0,
            metadata_hash: 0,
            validated_topology_epoch: NO_EPOCH,
            last_assignment_configs: Some(Vec::new()),
            stored_description_topology_epoch: NO_EPOCH,
            failed_description_topology_epoch: NO_EPOCH,
        }
    }
}

/// Record 19.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    /// Host and port for interactive queries (a nullable struct in the schema).
    pub user_endpoint: Option<(String, u16)>,
    /// Written in this order; Kafka's coordinator sorts them by key.
    pub client_tags: Vec<(String, String)>,
}

/// Record 20.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTargetMetadata {
    pub assignment_epoch: i32,
    /// Tag 0 (Kafka 4.3+, KIP-1263); 0 is not written.
    pub assignment_timestamp: i64,
}

/// Active, standby and warm-up tasks (record 21's value; record 22's assigned and pending
/// revocation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTasks {
    pub active: TaskIds,
    pub standby: TaskIds,
    pub warmup: TaskIds,
}

/// Record 22.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCurrent {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// One of the MEMBER_STATE_* values.
    pub state: i8,
    pub assigned: StoredTasks,
    /// AssignmentEpochs of active tasks (tag 0 of each active TaskIds entry); on read,
    /// missing or length-mismatched -> every active task of that entry gets member_epoch.
    /// Kafka writes them for the active tasks pending revocation too, so those are here
    /// as well (a task is never both assigned and pending revocation). On write, an active
    /// task missing from this map is written at member_epoch, which is what a reader
    /// assumes for a record without epochs.
    pub active_epochs: BTreeMap<(String, i32), i32>,
    pub pending_revocation: StoredTasks,
}

/// A decoded streams-group record (`None` values are tombstones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamsRecord {
    Metadata {
        group: String,
        value: Option<StoredGroupMetadata>,
    },
    Member {
        group: String,
        member: String,
        value: Option<StoredMemberMetadata>,
    },
    TargetMetadata {
        group: String,
        value: Option<StoredTargetMetadata>,
    },
    TargetMember {
        group: String,
        member: String,
        value: Option<StoredTasks>,
    },
    Current {
        group: String,
        member: String,
        value: Option<StoredCurrent>,
    },
    Topology {
        group: String,
        value: Option<StoredTopology>,
    },
}

impl StreamsRecord {
    pub fn group(&self) -> &str {
        match self {
            StreamsRecord::Metadata { group, .. }
            | StreamsRecord::Member { group, .. }
            | StreamsRecord::TargetMetadata { group, .. }
            | StreamsRecord::TargetMember { group, .. }
            | StreamsRecord::Current { group, .. }
            | StreamsRecord::Topology { group, .. } => group,
        }
    }

    /// (key bytes, value bytes or None)
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        match self {
            StreamsRecord::Metadata { group, value } => (
                key(GROUP_METADATA, group, None),
                value.as_ref().map(group_metadata_value),
            ),
            StreamsRecord::Member {
                group,
                member,
                value,
            } => (
                key(MEMBER_METADATA, group, Some(member)),
                value.as_ref().map(member_value),
            ),
            StreamsRecord::TargetMetadata { group, value } => (
                key(TARGET_METADATA, group, None),
                value.as_ref().map(target_metadata_value),
            ),
            StreamsRecord::TargetMember {
                group,
                member,
                value,
            } => (
                key(TARGET_MEMBER, group, Some(member)),
                value.as_ref().map(target_member_value),
            ),
            StreamsRecord::Current {
                group,
                member,
                value,
            } => (
                key(CURRENT_ASSIGNMENT, group, Some(member)),
                value.as_ref().map(current_value),
            ),
            StreamsRecord::Topology { group, value } => (
                key(TOPOLOGY, group, None),
                value.as_ref().map(topology_value),
            ),
        }
    }
}

/// Whether a key's type is one of the streams-group records.
pub fn is_streams_record(record_type: i16) -> bool {
    matches!(
        record_type,
        GROUP_METADATA
            | MEMBER_METADATA
            | TARGET_METADATA
            | TARGET_MEMBER
            | CURRENT_ASSIGNMENT
            | TOPOLOGY
    )
}

fn key(record_type: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(record_type);
    put_string(&mut out, group);
    if let Some(member) = member {
        put_string(&mut out, member);
    }
    out.to_vec()
}

/// A flexible struct's tagged fields, ascending by tag as Kafka writes them; `fields`
/// holds only those that differ from their default.
fn put_tags(out: &mut BytesMut, fields: &[(u32, BytesMut)]) {
    put_uvarint(out, fields.len() as u32);
    for (tag, field) in fields {
        put_uvarint(out, *tag);
        put_uvarint(out, field.len() as u32);
        out.put_slice(field);
    }
}

fn put_compact_strings(out: &mut BytesMut, items: &[String]) {
    put_compact_len(out, items.len());
    for item in items {
        put_compact_string(out, item);
    }
}

/// A compact array of {key, value} structs (each ending with its empty tagged fields).
fn put_pairs(out: &mut BytesMut, pairs: &[(String, String)]) {
    put_compact_len(out, pairs.len());
    for (key, value) in pairs {
        put_compact_string(out, key);
        put_compact_string(out, value);
        put_no_tags(out);
    }
}

fn put_i16s(out: &mut BytesMut, items: &[i16]) {
    put_compact_len(out, items.len());
    for item in items {
        out.put_i16(*item);
    }
}

/// A TaskIds array. With `epochs` (active tasks of record 22: the member epoch and the
/// known epochs), each entry carries its partitions' assignment epochs in tag 0, unless it
/// has no partitions: Kafka's empty list is its default and not written.
fn put_task_ids(out: &mut BytesMut, tasks: &TaskIds, epochs: Option<(i32, &ActiveEpochs)>) {
    put_compact_len(out, tasks.len());
    for (subtopology, partitions) in tasks {
        put_compact_string(out, subtopology);
        put_compact_len(out, partitions.len());
        for partition in partitions {
            out.put_i32(*partition);
        }
        let mut tags = Vec::new();
        if let Some((member_epoch, known)) = epochs.filter(|_| !partitions.is_empty()) {
            let mut field = BytesMut::new();
            put_compact_len(&mut field, partitions.len());
            for partition in partitions {
                let epoch = known
                    .get(&(subtopology.clone(), *partition))
                    .copied()
                    .unwrap_or(member_epoch);
                field.put_i32(epoch);
            }
            tags.push((ASSIGNMENT_EPOCHS_TAG, field));
        }
        put_tags(out, &tags);
    }
}

fn group_metadata_value(value: &StoredGroupMetadata) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(value.epoch);
    out.put_i64(value.metadata_hash);
    let mut tags = Vec::new();
    if value.validated_topology_epoch != NO_EPOCH {
        let mut field = BytesMut::new();
        field.put_i32(value.validated_topology_epoch);
        tags.push((VALIDATED_TOPOLOGY_EPOCH_TAG, field));
    }
    match &value.last_assignment_configs {
        Some(configs) if configs.is_empty() => {}
        Some(configs) => {
            let mut field = BytesMut::new();
            put_pairs(&mut field, configs);
            tags.push((LAST_ASSIGNMENT_CONFIGS_TAG, field));
        }
        None => {
            // A null compact array: length 0.
            let mut field = BytesMut::new();
            put_uvarint(&mut field, 0);
            tags.push((LAST_ASSIGNMENT_CONFIGS_TAG, field));
        }
    }
    if value.stored_description_topology_epoch != NO_EPOCH {
        let mut field = BytesMut::new();
        field.put_i32(value.stored_description_topology_epoch);
        tags.push((STORED_DESCRIPTION_EPOCH_TAG, field));
    }
    if value.failed_description_topology_epoch != NO_EPOCH {
        let mut field = BytesMut::new();
        field.put_i32(value.failed_description_topology_epoch);
        tags.push((FAILED_DESCRIPTION_EPOCH_TAG, field));
    }
    put_tags(&mut out, &tags);
    out.to_vec()
}

fn member_value(member: &StoredMemberMetadata) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_compact_nullable_string(&mut out, member.instance_id.as_deref());
    put_compact_nullable_string(&mut out, member.rack_id.as_deref());
    put_compact_string(&mut out, &member.client_id);
    put_compact_string(&mut out, &member.client_host);
    out.put_i32(member.rebalance_timeout_ms);
    out.put_i32(member.topology_epoch);
    put_compact_string(&mut out, &member.process_id);
    // A nullable struct: a marker byte (-1 null, 1 present), then the struct.
    match &member.user_endpoint {
        Some((host, port)) => {
            out.put_i8(1);
            put_compact_string(&mut out, host);
            out.put_u16(*port);
            put_no_tags(&mut out);
        }
        None => out.put_i8(-1),
    }
    put_pairs(&mut out, &member.client_tags);
    put_no_tags(&mut out);
    out.to_vec()
}

fn target_metadata_value(value: &StoredTargetMetadata) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(value.assignment_epoch);
    let mut tags = Vec::new();
    if value.assignment_timestamp != 0 {
        let mut field = BytesMut::new();
        field.put_i64(value.assignment_timestamp);
        tags.push((ASSIGNMENT_TIMESTAMP_TAG, field));
    }
    put_tags(&mut out, &tags);
    out.to_vec()
}

fn target_member_value(tasks: &StoredTasks) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_task_ids(&mut out, &tasks.active, None);
    put_task_ids(&mut out, &tasks.standby, None);
    put_task_ids(&mut out, &tasks.warmup, None);
    put_no_tags(&mut out);
    out.to_vec()
}

fn current_value(current: &StoredCurrent) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(current.member_epoch);
    out.put_i32(current.previous_member_epoch);
    out.put_i8(current.state);
    let epochs = Some((current.member_epoch, &current.active_epochs));
    put_task_ids(&mut out, &current.assigned.active, epochs);
    put_task_ids(&mut out, &current.assigned.standby, None);
    put_task_ids(&mut out, &current.assigned.warmup, None);
    put_task_ids(&mut out, &current.pending_revocation.active, epochs);
    put_task_ids(&mut out, &current.pending_revocation.standby, None);
    put_task_ids(&mut out, &current.pending_revocation.warmup, None);
    put_no_tags(&mut out);
    out.to_vec()
}

fn put_topic_infos(out: &mut BytesMut, topics: &[StoredTopicInfo]) {
    put_compact_len(out, topics.len());
    for topic in topics {
        put_compact_string(out, &topic.name);
        out.put_i32(topic.partitions);
        out.put_i16(topic.replication_factor);
        put_pairs(out, &topic.configs);
        put_no_tags(out);
    }
}

fn topology_value(topology: &StoredTopology) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(topology.epoch);
    put_compact_len(&mut out, topology.subtopologies.len());
    for subtopology in &topology.subtopologies {
        put_compact_string(&mut out, &subtopology.id);
        put_compact_strings(&mut out, &subtopology.source_topics);
        put_compact_strings(&mut out, &subtopology.source_topic_regex);
        put_topic_infos(&mut out, &subtopology.state_changelog_topics);
        put_compact_strings(&mut out, &subtopology.repartition_sink_topics);
        put_topic_infos(&mut out, &subtopology.repartition_source_topics);
        put_compact_len(&mut out, subtopology.copartition_groups.len());
        for group in &subtopology.copartition_groups {
            put_i16s(&mut out, &group.source_topics);
            put_i16s(&mut out, &group.source_topic_regex);
            put_i16s(&mut out, &group.repartition_source_topics);
            put_no_tags(&mut out);
        }
        put_no_tags(&mut out);
    }
    put_no_tags(&mut out);
    out.to_vec()
}

/// Reads a flexible struct's tagged fields, handing each (tag, its bytes) to `field`;
/// tags it does not know it leaves unread, so they are skipped.
fn read_tags(
    reader: &mut Reader,
    mut field: impl FnMut(u32, &mut Reader) -> Option<()>,
) -> Option<()> {
    for _ in 0..reader.uvarint()? {
        let tag = reader.uvarint()?;
        let size = reader.uvarint()? as usize;
        field(tag, &mut Reader::new(reader.take(size)?))?;
    }
    Some(())
}

fn read_compact_strings(reader: &mut Reader) -> Option<Vec<String>> {
    let n = reader.compact_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(reader.compact_string()?);
    }
    Some(out)
}

/// A compact array of {key, value} structs; None (the array null) when nullable allows.
fn read_nullable_pairs(reader: &mut Reader) -> Option<Option<Vec<(String, String)>>> {
    let Some(n) = (reader.uvarint()? as usize).checked_sub(1) else {
        return Some(None);
    };
    if n > reader.rest.len() {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let key = reader.compact_string()?;
        let value = reader.compact_string()?;
        reader.skip_tags()?;
        out.push((key, value));
    }
    Some(Some(out))
}

fn read_pairs(reader: &mut Reader) -> Option<Vec<(String, String)>> {
    read_nullable_pairs(reader)?
}

fn read_i16s(reader: &mut Reader) -> Option<Vec<i16>> {
    let n = reader.compact_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(reader.i16()?);
    }
    Some(out)
}

/// A nullable compact array of i32 (AssignmentEpochs).
fn read_nullable_i32s(reader: &mut Reader) -> Option<Option<Vec<i32>>> {
    let Some(n) = (reader.uvarint()? as usize).checked_sub(1) else {
        return Some(None);
    };
    if n > reader.rest.len() {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(reader.i32()?);
    }
    Some(Some(out))
}

/// Reads a TaskIds array. With `epochs` (active tasks of record 22: the member epoch and
/// where to put them), each entry's AssignmentEpochs go there; an entry without them, or
/// with a count other than its partitions', has every partition at the member epoch (as
/// Kafka's replay does: records written before the epochs existed have none).
fn read_task_ids(
    reader: &mut Reader,
    mut epochs: Option<(i32, &mut ActiveEpochs)>,
) -> Option<TaskIds> {
    // Per subtopology, so a repeated id replaces the earlier entry whole (Kafka's map put).
    let mut entries: BTreeMap<String, (Vec<i32>, Option<Vec<i32>>)> = BTreeMap::new();
    for _ in 0..reader.compact_len()? {
        let subtopology = reader.compact_string()?;
        let n = reader.compact_len()?;
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push(reader.i32()?);
        }
        let mut assignment_epochs = None;
        read_tags(reader, |tag, field| {
            if tag == ASSIGNMENT_EPOCHS_TAG && epochs.is_some() {
                assignment_epochs = read_nullable_i32s(field)?;
            }
            Some(())
        })?;
        entries.insert(subtopology, (partitions, assignment_epochs));
    }
    let mut tasks = TaskIds::new();
    for (subtopology, (partitions, assignment_epochs)) in entries {
        if let Some((member_epoch, known)) = epochs.as_mut() {
            let assignment_epochs = assignment_epochs.filter(|list| list.len() == partitions.len());
            for (i, partition) in partitions.iter().enumerate() {
                let epoch = assignment_epochs
                    .as_ref()
                    .map_or(*member_epoch, |list| list[i]);
                known.insert((subtopology.clone(), *partition), epoch);
            }
        }
        tasks.insert(subtopology, partitions.into_iter().collect());
    }
    Some(tasks)
}

fn read_topic_infos(reader: &mut Reader) -> Option<Vec<StoredTopicInfo>> {
    let n = reader.compact_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = reader.compact_string()?;
        let partitions = reader.i32()?;
        let replication_factor = reader.i16()?;
        let configs = read_pairs(reader)?;
        reader.skip_tags()?;
        out.push(StoredTopicInfo {
            name,
            partitions,
            replication_factor,
            configs,
        });
    }
    Some(out)
}

fn read_group_metadata(reader: &mut Reader) -> Option<StoredGroupMetadata> {
    let mut value = StoredGroupMetadata {
        epoch: reader.i32()?,
        metadata_hash: reader.i64()?,
        ..StoredGroupMetadata::default()
    };
    read_tags(reader, |tag, field| {
        match tag {
            VALIDATED_TOPOLOGY_EPOCH_TAG => value.validated_topology_epoch = field.i32()?,
            LAST_ASSIGNMENT_CONFIGS_TAG => {
                value.last_assignment_configs = read_nullable_pairs(field)?
            }
            STORED_DESCRIPTION_EPOCH_TAG => {
                value.stored_description_topology_epoch = field.i32()?
            }
            FAILED_DESCRIPTION_EPOCH_TAG => {
                value.failed_description_topology_epoch = field.i32()?
            }
            _ => {}
        }
        Some(())
    })?;
    Some(value)
}

fn read_member(reader: &mut Reader) -> Option<StoredMemberMetadata> {
    let instance_id = reader.compact_nullable_string()?;
    let rack_id = reader.compact_nullable_string()?;
    let client_id = reader.compact_string()?;
    let client_host = reader.compact_string()?;
    let rebalance_timeout_ms = reader.i32()?;
    let topology_epoch = reader.i32()?;
    let process_id = reader.compact_string()?;
    // Kafka reads any negative marker as null.
    let user_endpoint = if reader.i8()? < 0 {
        None
    } else {
        let host = reader.compact_string()?;
        let port = u16::from_be_bytes(reader.take(2)?.try_into().ok()?);
        reader.skip_tags()?;
        Some((host, port))
    };
    let client_tags = read_pairs(reader)?;
    reader.skip_tags()?;
    Some(StoredMemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        topology_epoch,
        process_id,
        user_endpoint,
        client_tags,
    })
}

fn read_target_metadata(reader: &mut Reader) -> Option<StoredTargetMetadata> {
    let mut value = StoredTargetMetadata {
        assignment_epoch: reader.i32()?,
        assignment_timestamp: 0,
    };
    read_tags(reader, |tag, field| {
        if tag == ASSIGNMENT_TIMESTAMP_TAG {
            value.assignment_timestamp = field.i64()?;
        }
        Some(())
    })?;
    Some(value)
}

fn read_target_member(reader: &mut Reader) -> Option<StoredTasks> {
    let tasks = StoredTasks {
        active: read_task_ids(reader, None)?,
        standby: read_task_ids(reader, None)?,
        warmup: read_task_ids(reader, None)?,
    };
    reader.skip_tags()?;
    Some(tasks)
}

fn read_current(reader: &mut Reader) -> Option<StoredCurrent> {
    let member_epoch = reader.i32()?;
    let previous_member_epoch = reader.i32()?;
    let state = reader.i8()?;
    let mut active_epochs = ActiveEpochs::new();
    let assigned = StoredTasks {
        active: read_task_ids(reader, Some((member_epoch, &mut active_epochs)))?,
        standby: read_task_ids(reader, None)?,
        warmup: read_task_ids(reader, None)?,
    };
    let pending_revocation = StoredTasks {
        active: read_task_ids(reader, Some((member_epoch, &mut active_epochs)))?,
        standby: read_task_ids(reader, None)?,
        warmup: read_task_ids(reader, None)?,
    };
    reader.skip_tags()?;
    Some(StoredCurrent {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        active_epochs,
        pending_revocation,
    })
}

fn read_topology(reader: &mut Reader) -> Option<StoredTopology> {
    let epoch = reader.i32()?;
    let n = reader.compact_len()?;
    let mut subtopologies = Vec::with_capacity(n);
    for _ in 0..n {
        let id = reader.compact_string()?;
        let source_topics = read_compact_strings(reader)?;
        let source_topic_regex = read_compact_strings(reader)?;
        let state_changelog_topics = read_topic_infos(reader)?;
        let repartition_sink_topics = read_compact_strings(reader)?;
        let repartition_source_topics = read_topic_infos(reader)?;
        let groups = reader.compact_len()?;
        let mut copartition_groups = Vec::with_capacity(groups);
        for _ in 0..groups {
            copartition_groups.push(StoredCopartitionGroup {
                source_topics: read_i16s(reader)?,
                source_topic_regex: read_i16s(reader)?,
                repartition_source_topics: read_i16s(reader)?,
            });
            reader.skip_tags()?;
        }
        reader.skip_tags()?;
        subtopologies.push(StoredSubtopology {
            id,
            source_topics,
            source_topic_regex,
            state_changelog_topics,
            repartition_sink_topics,
            repartition_source_topics,
            copartition_groups,
        });
    }
    reader.skip_tags()?;
    Some(StoredTopology {
        epoch,
        subtopologies,
    })
}

/// Decodes a streams-group record: `key` positioned just after the i16 record type (as
/// records.rs calls consumer_records::decode), and the value. None on malformed bytes, an
/// unknown value version, or a type that is not a streams record.
pub(crate) fn decode(
    record_type: i16,
    key: &mut Reader,
    value: Option<&[u8]>,
) -> Option<StreamsRecord> {
    if !is_streams_record(record_type) {
        return None;
    }
    let group = key.string()?;
    let member = match record_type {
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT => Some(key.string()?),
        _ => None,
    };
    let mut reader = Reader::new(value.unwrap_or_default());
    if value.is_some() && reader.i16()? != 0 {
        return None;
    }
    let present = value.is_some();
    let reader = &mut reader;
    Some(match record_type {
        GROUP_METADATA => StreamsRecord::Metadata {
            group,
            value: read_value(present, reader, read_group_metadata)?,
        },
        MEMBER_METADATA => StreamsRecord::Member {
            group,
            member: member?,
            value: read_value(present, reader, read_member)?,
        },
        TARGET_METADATA => StreamsRecord::TargetMetadata {
            group,
            value: read_value(present, reader, read_target_metadata)?,
        },
        TARGET_MEMBER => StreamsRecord::TargetMember {
            group,
            member: member?,
            value: read_value(present, reader, read_target_member)?,
        },
        CURRENT_ASSIGNMENT => StreamsRecord::Current {
            group,
            member: member?,
            value: read_value(present, reader, read_current)?,
        },
        _ => StreamsRecord::Topology {
            group,
            value: read_value(present, reader, read_topology)?,
        },
    })
}

/// A value read with `read`; None (a tombstone) when there is no value.
fn read_value<T>(
    present: bool,
    reader: &mut Reader,
    read: fn(&mut Reader) -> Option<T>,
) -> Option<Option<T>> {
    if present {
        read(reader).map(Some)
    } else {
        Some(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka 4.4.0's bytes for these records: (name, key hex, value hex or "null"), as
    /// printed by golden/Golden.java (Kafka's generated classes through its
    /// GroupCoordinatorRecordSerde, cross-checked there against StreamsCoordinatorRecordHelpers).
    const GOLDEN: &[(&str, &str, &str)] = &[
        (
            "metadata_all_tags",
            "0011000b73747265616d732d617070",
            "00000000002a0123456789abcdef04000400000007013803156e756d2e7374616e6462792e7265706c696361730231001861636365707461626c652e7265636f766572792e6c6167063130303030000204fffffffe030400000005",
        ),
        (
            "metadata_defaults",
            "0011000b73747265616d732d617070",
            "000000000001ffffffffffffffff00",
        ),
        (
            "metadata_empty_configs",
            "0011000b73747265616d732d617070",
            "000000000003000000000000000000",
        ),
        (
            "metadata_null_configs",
            "0011000b73747265616d732d617070",
            "000000000003000000000000000001010100",
        ),
        (
            "metadata_tombstone",
            "0011000b73747265616d732d617070",
            "null",
        ),
        (
            "member_full",
            "0013000b73747265616d732d61707000096dc3a96d6265722d31",
            "00000b696e7374616e63652d31077261636b2d61156170702d312d53747265616d5468726561642d310a2f31302e302e302e3100007530000000032535613262666136652d303030302d343030302d383030302d303030303030303030303031010a6c6f63616c686f7374c350000303617a0b75732d656173742d316100057a6f6e65037a310000",
        ),
        (
            "member_minimal",
            "0013000b73747265616d732d61707000026d32",
            "000000000263032f68ffffffff000000000270ff0100",
        ),
        (
            "member_tombstone",
            "0013000b73747265616d732d61707000026d32",
            "null",
        ),
        (
            "target_metadata_timestamp",
            "0014000b73747265616d732d617070",
            "0000000000050100080000018bcfe5687b",
        ),
        (
            "target_metadata_default",
            "0014000b73747265616d732d617070",
            "00000000000600",
        ),
        (
            "target_metadata_tombstone",
            "0014000b73747265616d732d617070",
            "null",
        ),
        (
            "target_member",
            "0015000b73747265616d732d61707000026d31",
            "0000030230040000000000000001000000020002310200000003000202310200000000000100",
        ),
        (
            "target_member_tombstone",
            "0015000b73747265616d732d61707000026d31",
            "null",
        ),
        (
            "current_epochs",
            "0016000b73747265616d732d61707000026d31",
            "00000000000a000000090203023003000000000000000201000903000000080000000a02310200000001010005020000000a02023102000000000002023002000000010002023102000000020100050200000007010100",
        ),
        (
            "current_no_epochs",
            "0016000b73747265616d732d61707000026d31",
            "000000000004000000030102023003000000000000000100010101010100",
        ),
        (
            "current_null_epochs",
            "0016000b73747265616d732d61707000026d31",
            "000000000004000000030102023003000000000000000101000100010101010100",
        ),
        (
            "current_mismatched_epochs",
            "0016000b73747265616d732d61707000026d31",
            "00000000000400000003030202300300000000000000010100050200000002010101010100",
        ),
        (
            "current_tombstone",
            "0016000b73747265616d732d61707000026d31",
            "null",
        ),
        (
            "topology",
            "0017000b73747265616d732d617070",
            "0000000000020302300206696e70757401021c73747265616d732d6170702d73746f72652d6368616e67656c6f67000000000000020f636c65616e75702e706f6c69637908636f6d706163740000021873747265616d732d6170702d7265706172746974696f6e010100023103066f746865720674686972640206696e2d2e2a0101021873747265616d732d6170702d7265706172746974696f6e000000040003030d726574656e74696f6e2e6d73032d31000e7365676d656e742e62797465730935323432383830300000020300000001020000020000000000",
        ),
        (
            "topology_tombstone",
            "0017000b73747265616d732d617070",
            "null",
        ),
    ];

    /// Records Kafka may have written that Strand's encoder writes differently (it always
    /// writes the active tasks' epochs): they are only read.
    const READ_ONLY: &[&str] = &[
        "current_no_epochs",
        "current_null_epochs",
        "current_mismatched_epochs",
    ];

    const GROUP: &str = "streams-app";

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn s(text: &str) -> String {
        text.to_string()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (s(k), s(v))).collect()
    }

    fn tasks(items: &[(&str, &[i32])]) -> TaskIds {
        items
            .iter()
            .map(|(id, partitions)| (s(id), partitions.iter().copied().collect()))
            .collect()
    }

    fn epochs(items: &[(&str, i32, i32)]) -> BTreeMap<(String, i32), i32> {
        items
            .iter()
            .map(|(id, partition, epoch)| ((s(id), *partition), *epoch))
            .collect()
    }

    fn topic(
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
    ) -> StoredTopicInfo {
        StoredTopicInfo {
            name: s(name),
            partitions,
            replication_factor,
            configs: pairs(configs),
        }
    }

    fn metadata(value: Option<StoredGroupMetadata>) -> StreamsRecord {
        StreamsRecord::Metadata {
            group: s(GROUP),
            value,
        }
    }

    fn current(
        member_epoch: i32,
        state: i8,
        active: &[(&str, &[i32])],
        active_epochs: &[(&str, i32, i32)],
    ) -> StoredCurrent {
        StoredCurrent {
            member_epoch,
            previous_member_epoch: member_epoch - 1,
            state,
            assigned: StoredTasks {
                active: tasks(active),
                ..StoredTasks::default()
            },
            active_epochs: epochs(active_epochs),
            pending_revocation: StoredTasks::default(),
        }
    }

    fn current_record(value: Option<StoredCurrent>) -> StreamsRecord {
        StreamsRecord::Current {
            group: s(GROUP),
            member: s("m1"),
            value,
        }
    }

    fn full_topology() -> StoredTopology {
        StoredTopology {
            epoch: 2,
            subtopologies: vec![
                StoredSubtopology {
                    id: s("0"),
                    source_topics: vec![s("input")],
                    source_topic_regex: vec![],
                    state_changelog_topics: vec![topic(
                        "streams-app-store-changelog",
                        0,
                        0,
                        &[("cleanup.policy", "compact")],
                    )],
                    repartition_sink_topics: vec![s("streams-app-repartition")],
                    repartition_source_topics: vec![],
                    copartition_groups: vec![],
                },
                StoredSubtopology {
                    id: s("1"),
                    source_topics: vec![s("other"), s("third")],
                    source_topic_regex: vec![s("in-.*")],
                    state_changelog_topics: vec![],
                    repartition_sink_topics: vec![],
                    repartition_source_topics: vec![topic(
                        "streams-app-repartition",
                        4,
                        3,
                        &[("retention.ms", "-1"), ("segment.bytes", "52428800")],
                    )],
                    copartition_groups: vec![StoredCopartitionGroup {
                        source_topics: vec![0, 1],
                        source_topic_regex: vec![0],
                        repartition_source_topics: vec![0],
                    }],
                },
            ],
        }
    }

    /// What each golden record holds (the values Golden.java sets).
    fn expected(name: &str) -> StreamsRecord {
        match name {
            "metadata_all_tags" => metadata(Some(StoredGroupMetadata {
                epoch: 42,
                metadata_hash: 0x0123_4567_89ab_cdef,
                validated_topology_epoch: 7,
                last_assignment_configs: Some(pairs(&[
                    ("num.standby.replicas", "1"),
                    ("acceptable.recovery.lag", "10000"),
                ])),
                stored_description_topology_epoch: -2,
                failed_description_topology_epoch: 5,
            })),
            "metadata_defaults" => metadata(Some(StoredGroupMetadata {
                epoch: 1,
                metadata_hash: -1,
                ..StoredGroupMetadata::default()
            })),
            "metadata_empty_configs" => metadata(Some(StoredGroupMetadata {
                epoch: 3,
                ..StoredGroupMetadata::default()
            })),
            "metadata_null_configs" => metadata(Some(StoredGroupMetadata {
                epoch: 3,
                last_assignment_configs: None,
                ..StoredGroupMetadata::default()
            })),
            "metadata_tombstone" => metadata(None),
            "member_full" => StreamsRecord::Member {
                group: s(GROUP),
                member: s("m\u{e9}mber-1"),
                value: Some(StoredMemberMetadata {
                    instance_id: Some(s("instance-1")),
                    rack_id: Some(s("rack-a")),
                    client_id: s("app-1-StreamThread-1"),
                    client_host: s("/10.0.0.1"),
                    rebalance_timeout_ms: 30_000,
                    topology_epoch: 3,
                    process_id: s("5a2bfa6e-0000-4000-8000-000000000001"),
                    user_endpoint: Some((s("localhost"), 50_000)),
                    client_tags: pairs(&[("az", "us-east-1a"), ("zone", "z1")]),
                }),
            },
            "member_minimal" | "member_tombstone" => StreamsRecord::Member {
                group: s(GROUP),
                member: s("m2"),
                value: (name == "member_minimal").then(|| StoredMemberMetadata {
                    instance_id: None,
                    rack_id: None,
                    client_id: s("c"),
                    client_host: s("/h"),
                    rebalance_timeout_ms: -1,
                    topology_epoch: 0,
                    process_id: s("p"),
                    user_endpoint: None,
                    client_tags: vec![],
                }),
            },
            "target_metadata_timestamp"
            | "target_metadata_default"
            | "target_metadata_tombstone" => StreamsRecord::TargetMetadata {
                group: s(GROUP),
                value: match name {
                    "target_metadata_timestamp" => Some(StoredTargetMetadata {
                        assignment_epoch: 5,
                        assignment_timestamp: 1_700_000_000_123,
                    }),
                    "target_metadata_default" => Some(StoredTargetMetadata {
                        assignment_epoch: 6,
                        assignment_timestamp: 0,
                    }),
                    _ => None,
                },
            },
            "target_member" | "target_member_tombstone" => StreamsRecord::TargetMember {
                group: s(GROUP),
                member: s("m1"),
                value: (name == "target_member").then(|| StoredTasks {
                    active: tasks(&[("0", &[0, 1, 2]), ("1", &[3])]),
                    standby: tasks(&[("1", &[0])]),
                    warmup: TaskIds::new(),
                }),
            },
            "current_epochs" => current_record(Some(StoredCurrent {
                member_epoch: 10,
                previous_member_epoch: 9,
                state: MEMBER_STATE_UNREVOKED_TASKS,
                assigned: StoredTasks {
                    active: tasks(&[("0", &[0, 2]), ("1", &[1])]),
                    standby: tasks(&[("1", &[0])]),
                    warmup: tasks(&[("0", &[1])]),
                },
                active_epochs: epochs(&[("0", 0, 8), ("0", 2, 10), ("1", 1, 10), ("1", 2, 7)]),
                pending_revocation: StoredTasks {
                    active: tasks(&[("1", &[2])]),
                    ..StoredTasks::default()
                },
            })),
            // Without (usable) epochs every active task is at the member epoch.
            "current_no_epochs" | "current_null_epochs" => current_record(Some(current(
                4,
                MEMBER_STATE_STABLE,
                &[("0", &[0, 1])],
                &[("0", 0, 4), ("0", 1, 4)],
            ))),
            "current_mismatched_epochs" => current_record(Some(current(
                4,
                MEMBER_STATE_UNRELEASED_TASKS,
                &[("0", &[0, 1])],
                &[("0", 0, 4), ("0", 1, 4)],
            ))),
            "current_tombstone" => current_record(None),
            "topology" => StreamsRecord::Topology {
                group: s(GROUP),
                value: Some(full_topology()),
            },
            "topology_tombstone" => StreamsRecord::Topology {
                group: s(GROUP),
                value: None,
            },
            other => panic!("no expectation for {other}"),
        }
    }

    fn decode_bytes(key: &[u8], value: Option<&[u8]>) -> Option<StreamsRecord> {
        let mut reader = Reader::new(key);
        let record_type = reader.i16()?;
        decode(record_type, &mut reader, value)
    }

    fn round_trip(record: &StreamsRecord) -> Option<StreamsRecord> {
        let (key, value) = record.encode();
        decode_bytes(&key, value.as_deref())
    }

    fn golden() -> impl Iterator<Item = (&'static str, Vec<u8>, Option<Vec<u8>>)> {
        GOLDEN
            .iter()
            .map(|(name, key, value)| (*name, unhex(key), (*value != "null").then(|| unhex(value))))
    }

    #[test]
    fn encodes_kafkas_bytes() {
        for (name, key, value) in golden() {
            if READ_ONLY.contains(&name) {
                continue;
            }
            let (our_key, our_value) = expected(name).encode();
            assert_eq!(our_key, key, "{name}: key");
            assert_eq!(our_value, value, "{name}: value");
        }
    }

    #[test]
    fn decodes_kafkas_bytes() {
        for (name, key, value) in golden() {
            assert_eq!(
                decode_bytes(&key, value.as_deref()),
                Some(expected(name)),
                "{name}"
            );
        }
    }

    #[test]
    fn every_record_round_trips() {
        let configs = pairs(&[("a", "1"), ("b", "2")]);
        let mut records: Vec<StreamsRecord> =
            GOLDEN.iter().map(|(name, ..)| expected(name)).collect();
        // Each tag of record 17 set alone, the others at their default.
        for value in [
            StoredGroupMetadata::default(),
            StoredGroupMetadata {
                validated_topology_epoch: 0,
                ..StoredGroupMetadata::default()
            },
            StoredGroupMetadata {
                last_assignment_configs: Some(configs.clone()),
                ..StoredGroupMetadata::default()
            },
            StoredGroupMetadata {
                last_assignment_configs: None,
                ..StoredGroupMetadata::default()
            },
            StoredGroupMetadata {
                stored_description_topology_epoch: 9,
                ..StoredGroupMetadata::default()
            },
            StoredGroupMetadata {
                failed_description_topology_epoch: i32::MAX,
                ..StoredGroupMetadata::default()
            },
            StoredGroupMetadata {
                epoch: i32::MIN,
                metadata_hash: i64::MIN,
                validated_topology_epoch: -5,
                last_assignment_configs: Some(configs.clone()),
                stored_description_topology_epoch: -2,
                failed_description_topology_epoch: 0,
            },
        ] {
            records.push(metadata(Some(value)));
        }
        records.push(StreamsRecord::TargetMetadata {
            group: s(""),
            value: Some(StoredTargetMetadata {
                assignment_epoch: -1,
                assignment_timestamp: -1,
            }),
        });
        records.push(StreamsRecord::Member {
            group: s("g"),
            member: s(""),
            value: Some(StoredMemberMetadata {
                instance_id: Some(s("")),
                rack_id: Some(s("")),
                client_id: s(""),
                client_host: s(""),
                rebalance_timeout_ms: 0,
                topology_epoch: -1,
                process_id: s(""),
                user_endpoint: Some((s(""), 0)),
                client_tags: pairs(&[("z", "1"), ("a", "2")]),
            }),
        });
        // Empty subtopology lists, an empty subtopology, an empty copartition group.
        records.push(StreamsRecord::Topology {
            group: s("g"),
            value: Some(StoredTopology::default()),
        });
        records.push(StreamsRecord::Topology {
            group: s("g"),
            value: Some(StoredTopology {
                epoch: 1,
                subtopologies: vec![StoredSubtopology {
                    copartition_groups: vec![StoredCopartitionGroup::default()],
                    ..StoredSubtopology::default()
                }],
            }),
        });
        records.push(StreamsRecord::TargetMember {
            group: s("g"),
            member: s("m"),
            value: Some(StoredTasks::default()),
        });
        // Every list of record 22 filled; pending-revocation active epochs included.
        records.push(current_record(Some(StoredCurrent {
            member_epoch: 7,
            previous_member_epoch: 6,
            state: MEMBER_STATE_UNKNOWN,
            assigned: StoredTasks {
                active: tasks(&[("a", &[0, 5]), ("b", &[1])]),
                standby: tasks(&[("a", &[1])]),
                warmup: tasks(&[("c", &[2, 3])]),
            },
            active_epochs: epochs(&[("a", 0, 3), ("a", 5, 7), ("b", 1, 1), ("z", 4, 2)]),
            pending_revocation: StoredTasks {
                active: tasks(&[("z", &[4])]),
                standby: tasks(&[("b", &[0])]),
                warmup: tasks(&[("b", &[9])]),
            },
        })));
        for record in &records {
            assert_eq!(round_trip(record).as_ref(), Some(record), "{record:?}");
        }
    }

    #[test]
    fn missing_active_epochs_are_written_at_the_member_epoch() {
        let mut value = current(
            5,
            MEMBER_STATE_STABLE,
            &[("0", &[0, 1]), ("1", &[])],
            &[("0", 1, 2)],
        );
        let read = round_trip(&current_record(Some(value.clone())));
        // Partition 0 was unknown: the member epoch. The empty entry has nothing to carry.
        value.active_epochs = epochs(&[("0", 0, 5), ("0", 1, 2)]);
        assert_eq!(read, Some(current_record(Some(value))));
    }

    #[test]
    fn unknown_tags_are_skipped() {
        // A tagged field Strand does not know (tag 9, 3 bytes) at the end of a struct.
        let unknown = [1u8, 9, 3, 0xaa, 0xbb, 0xcc];
        // Record 20 (tag count at the end of the value): with its known tag and an unknown.
        let key = unhex(
            GOLDEN
                .iter()
                .find(|g| g.0 == "target_metadata_timestamp")
                .unwrap()
                .1,
        );
        let mut value = vec![0, 0, 0, 0, 0, 5, 2, 0, 8];
        value.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        value.extend_from_slice(&unknown[1..]);
        assert_eq!(
            decode_bytes(&key, Some(&value)),
            Some(expected("target_metadata_timestamp"))
        );
        // Record 22: tag 0 inside a standby entry (not active: ignored) and an unknown tag
        // inside an active entry next to its epochs.
        let mut value = vec![0, 0, 0, 0, 0, 4, 0, 0, 0, 3, 1];
        value.extend_from_slice(&[2, 2, b'0', 2, 0, 0, 0, 0]); // active "0": [0]
        value.extend_from_slice(&[2, 0, 5, 2, 0, 0, 0, 1, 9, 3, 0xaa, 0xbb, 0xcc]); // epochs [1]
        value.extend_from_slice(&[2, 2, b'1', 2, 0, 0, 0, 0]); // standby "1": [0]
        value.extend_from_slice(&[1, 0, 5, 2, 0, 0, 0, 1]); // a stray tag 0
        value.extend_from_slice(&[1, 1, 1, 1]); // warmup, pending
        value.extend_from_slice(&unknown); // the value's own tags
        let mut want = current(4, MEMBER_STATE_STABLE, &[("0", &[0])], &[("0", 0, 1)]);
        want.previous_member_epoch = 3;
        want.assigned.standby = tasks(&[("1", &[0])]);
        assert_eq!(
            decode_bytes(&key_of("current_epochs"), Some(&value)),
            Some(current_record(Some(want)))
        );
    }

    fn key_of(name: &str) -> Vec<u8> {
        unhex(GOLDEN.iter().find(|g| g.0 == name).unwrap().1)
    }

    #[test]
    fn malformed_values_are_refused() {
        for (name, key, value) in golden() {
            let Some(value) = value else { continue };
            // Every field is required: any cut is refused.
            for cut in 0..value.len() {
                assert_eq!(
                    decode_bytes(&key, Some(&value[..cut])),
                    None,
                    "{name} cut at {cut} of {}",
                    value.len()
                );
            }
            // Only version 0 exists.
            let mut wrong = value.clone();
            wrong[1] = 1;
            assert_eq!(decode_bytes(&key, Some(&wrong)), None, "{name} version 1");
            // A truncated key.
            assert_eq!(
                decode_bytes(&key[..key.len() - 1], Some(&value)),
                None,
                "{name} key"
            );
        }
        // A huge array count is refused before any allocation.
        let huge = [0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(decode_bytes(&key_of("topology"), Some(&huge)), None);
        assert_eq!(
            decode_bytes(&key_of("target_member"), Some(&huge[4..])),
            None
        );
        // A null where the schema has none (ClientId).
        let mut value = vec![0, 0, 0, 0, 0];
        value.extend_from_slice(&[2, b'h', 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, b'p', 0xff, 1, 0]);
        assert_eq!(decode_bytes(&key_of("member_minimal"), Some(&value)), None);
        // A tagged field shorter than its contents (tag 0 of record 17 holding 2 bytes).
        let value = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 7];
        assert_eq!(
            decode_bytes(&key_of("metadata_defaults"), Some(&value)),
            None
        );
    }

    #[test]
    fn only_streams_types_are_streams_records() {
        let types: Vec<i16> = (0..40).filter(|t| is_streams_record(*t)).collect();
        assert_eq!(types, vec![17, 19, 20, 21, 22, 23]);
        // Type 18 (retired) and the consumer groups' types are not decoded here.
        for record_type in [3i16, 18] {
            let mut key = record_type.to_be_bytes().to_vec();
            key.extend_from_slice(&[0, 1, b'g']);
            assert_eq!(decode_bytes(&key, None), None);
        }
    }

    #[test]
    fn group_names_the_record() {
        for (name, ..) in GOLDEN {
            assert_eq!(expected(name).group(), GROUP);
        }
    }
}
