//! KIP-848 consumer groups in `__consumer_offsets`, in Kafka's own record formats (so a
//! new coordinator, Strand's or a tool reading the topic, finds the group as it was):
//!
//!   3  ConsumerGroupMetadata            group -> group epoch
//!   5  ConsumerGroupMemberMetadata      group, member -> subscription and client
//!   6  ConsumerGroupTargetAssignmentMetadata  group -> assignment epoch
//!   7  ConsumerGroupTargetAssignmentMember    group, member -> target partitions
//!   8  ConsumerGroupCurrentMemberAssignment   group, member -> epochs, owned, revoking
//!
//! Keys are the record type (as the key version) and non-flexible strings; values are
//! version 0, flexible (compact strings and arrays, tagged fields), partitions by topic
//! id. A group's change is written as the records of what differs (`changes`); the state
//! it is rebuilt from at load is the latest record of each key (`Loading`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

use super::consumer::{Assignment, ConsumerGroup, ConsumerMember, TopicView};
use crate::codec::{
    put_compact_len, put_compact_nullable_string, put_compact_string, put_no_tags, put_string,
    put_uvarint, Reader,
};
use crate::runtime::Records;

const GROUP_EPOCH: i16 = 3;
const MEMBER_METADATA: i16 = 5;
const TARGET_EPOCH: i16 = 6;
const TARGET_MEMBER: i16 = 7;
const CURRENT_ASSIGNMENT: i16 = 8;

/// Kafka's MemberState, as the current-assignment record stores it.
const STATE_STABLE: i8 = 0;
const STATE_UNREVOKED_PARTITIONS: i8 = 1;
const STATE_UNRELEASED_PARTITIONS: i8 = 2;

/// A member's subscription and client, as record type 5 holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topics: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

/// Partitions by topic id.
pub type StoredPartitions = Vec<(Uuid, Vec<i32>)>;

/// A member's current assignment, as record type 8 holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCurrent {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned: StoredPartitions,
    pub revoking: StoredPartitions,
    /// The member epoch each of those partitions was assigned at (Kafka 4.4's tagged
    /// AssignmentEpochs, tag 0 of each topic; empty in records written without them).
    pub assigned_at: BTreeMap<(Uuid, i32), i32>,
}

/// A decoded consumer-group record (`None` values are tombstones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    Epoch {
        group: String,
        epoch: Option<i32>,
    },
    Member {
        group: String,
        member: String,
        value: Option<StoredMemberMetadata>,
    },
    TargetEpoch {
        group: String,
        epoch: Option<i32>,
    },
    Target {
        group: String,
        member: String,
        value: Option<StoredPartitions>,
    },
    Current {
        group: String,
        member: String,
        value: Option<StoredCurrent>,
    },
}

impl ConsumerRecord {
    pub fn group(&self) -> &str {
        match self {
            ConsumerRecord::Epoch { group, .. }
            | ConsumerRecord::Member { group, .. }
            | ConsumerRecord::TargetEpoch { group, .. }
            | ConsumerRecord::Target { group, .. }
            | ConsumerRecord::Current { group, .. } => group,
        }
    }
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

fn epoch_value(epoch: i32) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(epoch);
    put_no_tags(&mut out);
    out.to_vec()
}

/// Tag of a current assignment topic's AssignmentEpochs (Kafka 4.4).
const ASSIGNMENT_EPOCHS_TAG: u32 = 0;

/// Partitions by topic id; with `epochs` (a current assignment), each topic also carries
/// its partitions' assignment epochs in tagged field 0, as Kafka 4.4 writes them.
fn put_partitions(
    out: &mut BytesMut,
    partitions: &StoredPartitions,
    epochs: Option<&BTreeMap<(Uuid, i32), i32>>,
) {
    put_compact_len(out, partitions.len());
    for (topic_id, ids) in partitions {
        out.put_slice(topic_id.as_bytes());
        put_compact_len(out, ids.len());
        for id in ids {
            out.put_i32(*id);
        }
        let known: Option<Vec<i32>> = epochs.and_then(|epochs| {
            ids.iter()
                .map(|id| epochs.get(&(*topic_id, *id)).copied())
                .collect()
        });
        match known {
            Some(known) => {
                let mut field = BytesMut::new();
                put_compact_len(&mut field, known.len());
                for epoch in known {
                    field.put_i32(epoch);
                }
                put_uvarint(out, 1);
                put_uvarint(out, ASSIGNMENT_EPOCHS_TAG);
                put_uvarint(out, field.len() as u32);
                out.put_slice(&field);
            }
            None => put_no_tags(out),
        }
    }
}

fn member_value(member: &StoredMemberMetadata) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_compact_nullable_string(&mut out, member.instance_id.as_deref());
    put_compact_nullable_string(&mut out, member.rack_id.as_deref());
    put_compact_string(&mut out, &member.client_id);
    put_compact_string(&mut out, &member.client_host);
    put_compact_len(&mut out, member.subscribed_topics.len());
    for topic in &member.subscribed_topics {
        put_compact_string(&mut out, topic);
    }
    put_compact_nullable_string(&mut out, member.subscribed_regex.as_deref());
    out.put_i32(member.rebalance_timeout_ms);
    put_compact_nullable_string(&mut out, member.server_assignor.as_deref());
    put_no_tags(&mut out);
    out.to_vec()
}

fn target_value(partitions: &StoredPartitions) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_partitions(&mut out, partitions, None);
    put_no_tags(&mut out);
    out.to_vec()
}

fn current_value(current: &StoredCurrent) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    out.put_i32(current.member_epoch);
    out.put_i32(current.previous_member_epoch);
    out.put_i8(current.state);
    put_partitions(&mut out, &current.assigned, Some(&current.assigned_at));
    put_partitions(&mut out, &current.revoking, Some(&current.assigned_at));
    put_no_tags(&mut out);
    out.to_vec()
}

/// Reads partitions by topic id; a topic's assignment epochs (tag 0), where present and
/// `epochs` asks for them, go there.
fn read_partitions(
    reader: &mut Reader,
    mut epochs: Option<&mut BTreeMap<(Uuid, i32), i32>>,
) -> Option<StoredPartitions> {
    let count = reader.compact_len()?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let topic_id = reader.uuid()?;
        let n = reader.compact_len()?;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(reader.i32()?);
        }
        for _ in 0..reader.uvarint()? {
            let tag = reader.uvarint()?;
            let size = reader.uvarint()? as usize;
            let mut field = Reader::new(reader.take(size)?);
            let Some(epochs) = epochs
                .as_deref_mut()
                .filter(|_| tag == ASSIGNMENT_EPOCHS_TAG)
            else {
                continue;
            };
            // Null (length 0) or of the same length as the partitions.
            let Some(len) = field.uvarint()?.checked_sub(1) else {
                continue;
            };
            if len as usize != ids.len() {
                return None;
            }
            for id in &ids {
                epochs.insert((topic_id, *id), field.i32()?);
            }
        }
        out.push((topic_id, ids));
    }
    Some(out)
}

/// Decodes a consumer-group record: the key's type (already read) and the rest. None
/// for shapes this does not know.
pub(crate) fn decode(
    record_type: i16,
    key: &mut Reader,
    value: Option<&[u8]>,
) -> Option<ConsumerRecord> {
    let group = key.string()?;
    let mut reader = Reader::new(value.unwrap_or_default());
    if value.is_some() && reader.i16()? != 0 {
        return None;
    }
    let present = value.is_some();
    Some(match record_type {
        GROUP_EPOCH | TARGET_EPOCH => {
            let epoch = if present {
                let epoch = reader.i32()?;
                reader.skip_tags()?;
                Some(epoch)
            } else {
                None
            };
            if record_type == GROUP_EPOCH {
                ConsumerRecord::Epoch { group, epoch }
            } else {
                ConsumerRecord::TargetEpoch { group, epoch }
            }
        }
        MEMBER_METADATA => {
            let member = key.string()?;
            let value = if present {
                let instance_id = reader.compact_nullable_string()?;
                let rack_id = reader.compact_nullable_string()?;
                let client_id = reader.compact_string()?;
                let client_host = reader.compact_string()?;
                let n = reader.compact_len()?;
                let mut subscribed_topics = Vec::with_capacity(n);
                for _ in 0..n {
                    subscribed_topics.push(reader.compact_string()?);
                }
                let subscribed_regex = reader.compact_nullable_string()?;
                let rebalance_timeout_ms = reader.i32()?;
                let server_assignor = reader.compact_nullable_string()?;
                // Tag 0 (the classic member metadata of a migrated member) is skipped.
                reader.skip_tags()?;
                Some(StoredMemberMetadata {
                    instance_id,
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topics,
                    subscribed_regex,
                    rebalance_timeout_ms,
                    server_assignor,
                })
            } else {
                None
            };
            ConsumerRecord::Member {
                group,
                member,
                value,
            }
        }
        TARGET_MEMBER => {
            let member = key.string()?;
            let value = if present {
                let partitions = read_partitions(&mut reader, None)?;
                reader.skip_tags()?;
                Some(partitions)
            } else {
                None
            };
            ConsumerRecord::Target {
                group,
                member,
                value,
            }
        }
        CURRENT_ASSIGNMENT => {
            let member = key.string()?;
            let value = if present {
                let member_epoch = reader.i32()?;
                let previous_member_epoch = reader.i32()?;
                let state = reader.i8()?;
                let mut assigned_at = BTreeMap::new();
                let assigned = read_partitions(&mut reader, Some(&mut assigned_at))?;
                let revoking = read_partitions(&mut reader, Some(&mut assigned_at))?;
                reader.skip_tags()?;
                Some(StoredCurrent {
                    member_epoch,
                    previous_member_epoch,
                    state,
                    assigned,
                    revoking,
                    assigned_at,
                })
            } else {
                None
            };
            ConsumerRecord::Current {
                group,
                member,
                value,
            }
        }
        _ => return None,
    })
}

/// Whether a key's type is one of the consumer-group records.
pub fn is_consumer_record(record_type: i16) -> bool {
    matches!(
        record_type,
        GROUP_EPOCH | MEMBER_METADATA | TARGET_EPOCH | TARGET_MEMBER | CURRENT_ASSIGNMENT
    )
}

fn by_id(assignment: &Assignment, topics: &dyn TopicView) -> StoredPartitions {
    assignment
        .iter()
        .filter_map(|(topic, partitions)| {
            let id = topics.id(topic)?;
            Some((id, partitions.iter().copied().collect()))
        })
        .collect()
}

fn by_name(partitions: &StoredPartitions, topics: &dyn TopicView) -> Assignment {
    let mut out = Assignment::new();
    for (id, ids) in partitions {
        // A topic deleted since is gone from the assignment (Kafka drops it as well).
        if let Some(name) = topics.name_of(*id) {
            out.entry(name)
                .or_default()
                .extend(ids.iter().copied().collect::<BTreeSet<i32>>());
        }
    }
    out.retain(|_, partitions| !partitions.is_empty());
    out
}

fn metadata_of(member: &ConsumerMember) -> StoredMemberMetadata {
    StoredMemberMetadata {
        instance_id: member.instance_id.clone(),
        rack_id: member.rack_id.clone(),
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        subscribed_topics: member.subscribed_topics.clone(),
        subscribed_regex: member.subscribed_regex.clone(),
        rebalance_timeout_ms: member.rebalance_timeout_ms,
        server_assignor: member.server_assignor.clone(),
    }
}

fn current_of(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    topics: &dyn TopicView,
) -> StoredCurrent {
    let state = if !member.revoking.is_empty() {
        STATE_UNREVOKED_PARTITIONS
    } else if member.member_epoch == group.assignment_epoch
        && group.target.get(&member.member_id) == Some(&member.assigned)
    {
        STATE_STABLE
    } else {
        STATE_UNRELEASED_PARTITIONS
    };
    StoredCurrent {
        member_epoch: member.member_epoch,
        previous_member_epoch: member.previous_member_epoch,
        state,
        assigned: by_id(&member.assigned, topics),
        revoking: by_id(&member.revoking, topics),
        assigned_at: member
            .assigned_at
            .iter()
            .filter_map(|((topic, partition), epoch)| {
                Some(((topics.id(topic)?, *partition), *epoch))
            })
            .collect(),
    }
}

/// The records that take the log from `before` (None: nothing of the group written, or
/// not trusted: everything is written) to `after`, in Kafka's order: subscriptions and
/// the group epoch, then the target assignment and its epoch, then current assignments;
/// a departed member's current assignment, target and subscription are tombstoned.
pub fn changes(
    before: Option<&ConsumerGroup>,
    after: &ConsumerGroup,
    topics: &dyn TopicView,
) -> Records {
    let group = after.group_id.as_str();
    let mut records: Records = Vec::new();
    let old_member = |id: &str| before.and_then(|b| b.members.get(id));
    for (id, member) in &after.members {
        let metadata = metadata_of(member);
        if old_member(id).map(metadata_of).as_ref() != Some(&metadata) {
            records.push((
                key(MEMBER_METADATA, group, Some(id)),
                Some(member_value(&metadata)),
            ));
        }
    }
    if before.map(|b| b.group_epoch) != Some(after.group_epoch) {
        records.push((
            key(GROUP_EPOCH, group, None),
            Some(epoch_value(after.group_epoch)),
        ));
    }
    for (id, target) in &after.target {
        if before.and_then(|b| b.target.get(id)) != Some(target) {
            records.push((
                key(TARGET_MEMBER, group, Some(id)),
                Some(target_value(&by_id(target, topics))),
            ));
        }
    }
    if before.map(|b| b.assignment_epoch) != Some(after.assignment_epoch) {
        records.push((
            key(TARGET_EPOCH, group, None),
            Some(epoch_value(after.assignment_epoch)),
        ));
    }
    for (id, member) in &after.members {
        let current = current_of(after, member, topics);
        let old = old_member(id).map(|m| current_of(before.expect("has the member"), m, topics));
        if old.as_ref() != Some(&current) {
            records.push((
                key(CURRENT_ASSIGNMENT, group, Some(id)),
                Some(current_value(&current)),
            ));
        }
    }
    if let Some(before) = before {
        records.extend(removed_members(before.members.keys(), after));
        for id in before.target.keys() {
            if !after.target.contains_key(id) && after.members.contains_key(id) {
                records.push((key(TARGET_MEMBER, group, Some(id)), None));
            }
        }
    }
    records
}

/// The tombstones of the members in `ids` that `after` no longer has (their target too,
/// unless `after` still targets them).
pub fn removed_members<'a>(
    ids: impl IntoIterator<Item = &'a String>,
    after: &ConsumerGroup,
) -> Records {
    let group = after.group_id.as_str();
    let mut records: Records = Vec::new();
    for id in ids
        .into_iter()
        .filter(|id| !after.members.contains_key(*id))
    {
        records.push((key(CURRENT_ASSIGNMENT, group, Some(id)), None));
        if !after.target.contains_key(id) {
            records.push((key(TARGET_MEMBER, group, Some(id)), None));
        }
        records.push((key(MEMBER_METADATA, group, Some(id)), None));
    }
    records
}

/// The tombstones of a whole group (DeleteGroups, or its offsets expired).
pub fn tombstones(group: &ConsumerGroup) -> Records {
    let id = group.group_id.as_str();
    let mut records: Records = Vec::new();
    for member in group.members.keys() {
        records.push((key(CURRENT_ASSIGNMENT, id, Some(member)), None));
        records.push((key(MEMBER_METADATA, id, Some(member)), None));
    }
    for member in group.target.keys() {
        records.push((key(TARGET_MEMBER, id, Some(member)), None));
    }
    records.push((key(TARGET_EPOCH, id, None), None));
    records.push((key(GROUP_EPOCH, id, None), None));
    records
}

/// A group's records as they are read at load: the latest of each key.
#[derive(Debug, Clone, Default)]
pub struct Loading {
    epoch: Option<i32>,
    assignment_epoch: i32,
    members: BTreeMap<String, StoredMemberMetadata>,
    targets: BTreeMap<String, StoredPartitions>,
    current: BTreeMap<String, StoredCurrent>,
}

impl Loading {
    /// Applies one record of this group. Returns false once the group is deleted (its
    /// epoch tombstoned).
    pub fn apply(&mut self, record: ConsumerRecord) -> bool {
        match record {
            ConsumerRecord::Epoch { epoch: None, .. } => {
                *self = Loading::default();
                return false;
            }
            ConsumerRecord::Epoch { epoch, .. } => self.epoch = epoch,
            ConsumerRecord::TargetEpoch { epoch, .. } => {
                self.assignment_epoch = epoch.unwrap_or_default()
            }
            ConsumerRecord::Member { member, value, .. } => match value {
                Some(value) => {
                    self.members.insert(member, value);
                }
                None => {
                    self.members.remove(&member);
                }
            },
            ConsumerRecord::Target { member, value, .. } => match value {
                Some(value) => {
                    self.targets.insert(member, value);
                }
                None => {
                    self.targets.remove(&member);
                }
            },
            ConsumerRecord::Current { member, value, .. } => match value {
                Some(value) => {
                    self.current.insert(member, value);
                }
                None => {
                    self.current.remove(&member);
                }
            },
        }
        true
    }

    /// The group, once every record is read; None if it has no epoch (never created,
    /// or deleted). Members start a fresh session from `now_ms`, and one giving up
    /// partitions a fresh rebalance timeout, as Kafka's coordinator does at load.
    pub fn finish(self, group: &mut ConsumerGroup, now_ms: i64, topics: &dyn TopicView) -> bool {
        let Some(epoch) = self.epoch else {
            return false;
        };
        let mut members = BTreeMap::new();
        let mut static_members = BTreeMap::new();
        for (id, metadata) in self.members {
            let current = self.current.get(&id);
            let revoking = current
                .map(|c| by_name(&c.revoking, topics))
                .unwrap_or_default();
            let mut member = ConsumerMember {
                member_id: id.clone(),
                instance_id: metadata.instance_id,
                rack_id: metadata.rack_id,
                client_id: metadata.client_id,
                client_host: metadata.client_host,
                member_epoch: current.map_or(0, |c| c.member_epoch),
                previous_member_epoch: current.map_or(-1, |c| c.previous_member_epoch),
                rebalance_timeout_ms: metadata.rebalance_timeout_ms,
                subscribed_topics: metadata.subscribed_topics,
                subscribed_regex: metadata.subscribed_regex,
                server_assignor: metadata.server_assignor,
                assigned: current
                    .map(|c| by_name(&c.assigned, topics))
                    .unwrap_or_default(),
                revocation_deadline_ms: (!revoking.is_empty())
                    .then(|| now_ms + metadata.rebalance_timeout_ms.max(0) as i64),
                revoking,
                // Written before Kafka 4.4 (or by Strand before): the member's epoch.
                assigned_at: current
                    .map(|c| {
                        c.assigned_at
                            .iter()
                            .filter_map(|((id, partition), epoch)| {
                                Some(((topics.name_of(*id)?, *partition), *epoch))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                session_deadline_ms: 0,
            };
            member.settle_assignment_epochs();
            if let Some(instance) = &member.instance_id {
                static_members.insert(instance.clone(), id.clone());
            }
            members.insert(id, member);
        }
        let target = self
            .targets
            .iter()
            .filter(|(id, _)| members.contains_key(*id))
            .map(|(id, partitions)| (id.clone(), by_name(partitions, topics)))
            .collect();
        group.group_epoch = epoch;
        group.assignment_epoch = self.assignment_epoch;
        group.members = members;
        group.target = target;
        group.static_members = static_members;
        group.restored(now_ms);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::consumer::{ConsumerGroupLimits, Heartbeat};
    use crate::group::records::{self, OffsetsRecord};

    struct Topics;

    const ORDERS: Uuid = Uuid::from_u128(0x1111);
    const CLICKS: Uuid = Uuid::from_u128(0x2222);

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            match topic {
                "orders" => Some(4),
                "clicks" => Some(2),
                _ => None,
            }
        }
        fn names(&self) -> Vec<String> {
            vec!["orders".into(), "clicks".into()]
        }
        fn id(&self, topic: &str) -> Option<Uuid> {
            match topic {
                "orders" => Some(ORDERS),
                "clicks" => Some(CLICKS),
                _ => None,
            }
        }
        fn name_of(&self, id: Uuid) -> Option<String> {
            [(ORDERS, "orders"), (CLICKS, "clicks")]
                .iter()
                .find(|(i, _)| *i == id)
                .map(|(_, n)| n.to_string())
        }
    }

    fn join(group: &mut ConsumerGroup, id: &str, topics: &[&str], now: i64) -> i32 {
        let request = Heartbeat {
            member_id: id.into(),
            member_epoch: 0,
            instance_id: Some(format!("instance-{id}")),
            rack_id: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(topics.iter().map(|t| t.to_string()).collect()),
            subscribed_regex: None,
            server_assignor: None,
            owned: Some(Assignment::new()),
        };
        let mut ids = || unreachable!("the member brings its id");
        group
            .heartbeat(request, now, &Topics, &mut ids)
            .expect("joins")
            .member_epoch
    }

    /// Replays records (decoded through `records::decode`, as the shard's load does).
    fn replay(all: &Records, now: i64) -> Option<ConsumerGroup> {
        let mut loading = Loading::default();
        for (key, value) in all {
            let Some(OffsetsRecord::Consumer(record)) = records::decode(key, value.as_deref())
            else {
                panic!("a consumer record: {key:?}");
            };
            loading.apply(record);
        }
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        loading.finish(&mut group, now, &Topics).then_some(group)
    }

    fn same_state(a: &ConsumerGroup, b: &ConsumerGroup) {
        assert_eq!(a.group_epoch, b.group_epoch);
        assert_eq!(a.assignment_epoch, b.assignment_epoch);
        assert_eq!(a.target, b.target);
        assert_eq!(a.static_members, b.static_members);
        assert_eq!(a.members.len(), b.members.len());
        for (id, m) in &a.members {
            let n = &b.members[id];
            assert_eq!(
                (
                    &m.member_epoch,
                    &m.previous_member_epoch,
                    &m.assigned,
                    &m.revoking
                ),
                (
                    &n.member_epoch,
                    &n.previous_member_epoch,
                    &n.assigned,
                    &n.revoking
                ),
                "member {id}"
            );
            assert_eq!(
                m.assigned_at, n.assigned_at,
                "member {id}'s assignment epochs"
            );
            assert_eq!(
                (
                    &m.subscribed_topics,
                    &m.instance_id,
                    &m.client_id,
                    m.rebalance_timeout_ms
                ),
                (
                    &n.subscribed_topics,
                    &n.instance_id,
                    &n.client_id,
                    n.rebalance_timeout_ms
                )
            );
        }
    }

    #[test]
    fn the_written_changes_rebuild_the_group_at_every_step() {
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let mut log: Records = Vec::new();
        let step =
            |log: &mut Records, group: &mut ConsumerGroup, change: &dyn Fn(&mut ConsumerGroup)| {
                let before = group.clone();
                change(group);
                log.extend(changes(Some(&before), group, &Topics));
                let rebuilt = replay(log, 0).expect("the group exists");
                same_state(group, &rebuilt);
            };
        // The first write of a group has nothing before it.
        join(&mut group, "a", &["orders"], 0);
        log.extend(changes(None, &group, &Topics));
        same_state(&group, &replay(&log, 0).unwrap());
        // b joins: a must give partitions up (revoking) while b waits for them.
        step(&mut log, &mut group, &|g| {
            join(g, "b", &["orders", "clicks"], 10);
        });
        // a learns of it at its next heartbeat, still owning everything.
        step(&mut log, &mut group, &|g| {
            let a = &g.members["a"];
            let request = Heartbeat {
                member_id: "a".into(),
                member_epoch: a.member_epoch,
                instance_id: a.instance_id.clone(),
                rack_id: None,
                client_id: "client".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: -1,
                subscribed_topics: None,
                subscribed_regex: None,
                server_assignor: None,
                owned: Some(a.assigned.clone()),
            };
            g.heartbeat(request, 15, &Topics, &mut || unreachable!())
                .unwrap();
        });
        assert!(!group.members["a"].revoking.is_empty(), "a revokes");
        assert!(
            replay(&log, 0).unwrap().members["a"]
                .revocation_deadline_ms
                .is_some(),
            "a loaded revocation gets a deadline"
        );
        // a leaves; b takes everything.
        step(&mut log, &mut group, &|g| {
            g.heartbeat(
                Heartbeat {
                    member_id: "a".into(),
                    member_epoch: -1,
                    instance_id: None,
                    rack_id: None,
                    client_id: "client".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: -1,
                    subscribed_topics: None,
                    subscribed_regex: None,
                    server_assignor: None,
                    owned: None,
                },
                20,
                &Topics,
                &mut || unreachable!(),
            )
            .unwrap();
        });
        assert_eq!(group.members.len(), 1);
        let rebuilt = replay(&log, 1_000).unwrap();
        assert!(
            !rebuilt.members.contains_key("a"),
            "a's records are tombstoned"
        );
        assert_eq!(
            rebuilt.members["b"].session_deadline_ms,
            1_000 + ConsumerGroupLimits::default().session_timeout_ms as i64,
            "a loaded member gets a fresh session"
        );
        // Unchanged state writes nothing.
        assert!(changes(Some(&group.clone()), &group, &Topics).is_empty());
        // Deleting the group leaves nothing to load.
        log.extend(tombstones(&group));
        assert!(replay(&log, 0).is_none());
    }

    #[test]
    fn values_are_kafkas_flexible_version_0() {
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        join(&mut group, "m", &["clicks"], 0);
        let written = changes(None, &group, &Topics);
        let epoch = written
            .iter()
            .find(|(k, _)| k[..2] == GROUP_EPOCH.to_be_bytes())
            .unwrap();
        // key: type 3, "g"; value: version 0, epoch 1, no tagged fields.
        assert_eq!(epoch.0, vec![0, 3, 0, 1, b'g']);
        assert_eq!(epoch.1.as_deref(), Some(&[0, 0, 0, 0, 0, 1, 0][..]));
        let current = written
            .iter()
            .find(|(k, _)| k[..2] == CURRENT_ASSIGNMENT.to_be_bytes())
            .unwrap();
        let mut expected = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, STATE_STABLE as u8, 2];
        expected.extend_from_slice(CLICKS.as_bytes());
        // Partitions 0 and 1, then tag 0 (9 bytes): their assignment epochs, 1 and 1.
        expected.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1]);
        expected.extend_from_slice(&[1, 0, 9, 3, 0, 0, 0, 1, 0, 0, 0, 1]);
        // No partitions being revoked; no tagged fields.
        expected.extend_from_slice(&[1, 0]);
        assert_eq!(current.1.as_deref(), Some(&expected[..]));
    }

    #[test]
    fn corrupt_values_are_refused_not_trusted() {
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        join(&mut group, "m", &["orders"], 0);
        for (key, value) in changes(None, &group, &Topics) {
            let value = value.unwrap();
            for cut in 0..value.len() {
                assert!(
                    records::decode(&key, Some(&value[..cut])).is_none(),
                    "a value cut at {cut} of {}",
                    value.len()
                );
            }
        }
        // A huge array count is refused before any allocation.
        let mut value = vec![0, 0];
        value.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(records::decode(&key(TARGET_MEMBER, "g", Some("m")), Some(&value)).is_none());
    }
}
