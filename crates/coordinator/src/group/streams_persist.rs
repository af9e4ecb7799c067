//! A streams group in `__consumer_offsets` (Kafka 4.4's record types 17 and 19-23, codec
//! in streams_records.rs): a change is written as the records of what differs, in
//! Kafka's order (so Kafka's own replay would accept the log), and a load rebuilds the
//! group from the latest record of each key. What Kafka keeps in memory only is not
//! written either: the configured topology, task offsets, endpoint epoch, the shutdown
//! request and the timers.

use std::collections::BTreeMap;

use super::streams::{MemberState, StreamsGroup, StreamsGroupLimits, StreamsMember, Tasks};
use super::streams_records::{
    StoredCurrent, StoredGroupMetadata, StoredMemberMetadata, StoredTargetMetadata, StoredTasks,
    StoredTopology, StreamsRecord,
};
use crate::runtime::Records;

fn stored_tasks(tasks: &Tasks) -> StoredTasks {
    StoredTasks {
        active: tasks.active.clone(),
        standby: tasks.standby.clone(),
        warmup: tasks.warmup.clone(),
    }
}

fn tasks_of(stored: StoredTasks) -> Tasks {
    Tasks {
        active: stored.active,
        standby: stored.standby,
        warmup: stored.warmup,
    }
}

fn metadata_of(group: &StreamsGroup) -> StoredGroupMetadata {
    StoredGroupMetadata {
        epoch: group.group_epoch,
        metadata_hash: group.metadata_hash,
        validated_topology_epoch: group.validated_topology_epoch,
        last_assignment_configs: Some(
            group
                .last_assignment_configs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        stored_description_topology_epoch: group.description_epochs.0,
        failed_description_topology_epoch: group.description_epochs.1,
    }
}

fn member_metadata_of(member: &StreamsMember) -> StoredMemberMetadata {
    StoredMemberMetadata {
        instance_id: member.instance_id.clone(),
        rack_id: member.rack_id.clone(),
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        rebalance_timeout_ms: member.rebalance_timeout_ms,
        topology_epoch: member.topology_epoch,
        process_id: member.process_id.clone(),
        user_endpoint: member.user_endpoint.clone(),
        client_tags: member.client_tags.clone(),
    }
}

fn current_of(member: &StreamsMember) -> StoredCurrent {
    StoredCurrent {
        member_epoch: member.member_epoch,
        previous_member_epoch: member.previous_member_epoch,
        state: member.state.code(),
        assigned: stored_tasks(&member.assigned),
        active_epochs: member.active_epochs.clone(),
        pending_revocation: stored_tasks(&member.pending_revocation),
    }
}

fn target_metadata_of(group: &StreamsGroup) -> StoredTargetMetadata {
    StoredTargetMetadata {
        assignment_epoch: group.assignment_epoch,
        assignment_timestamp: group.assignment_timestamp_ms,
    }
}

/// The tombstones of the members in `ids` that `after` no longer has.
fn removed<'a>(
    ids: impl IntoIterator<Item = &'a String>,
    after: &StreamsGroup,
) -> Vec<StreamsRecord> {
    let group = &after.group_id;
    let mut out = Vec::new();
    for id in ids
        .into_iter()
        .filter(|id| !after.members.contains_key(*id))
    {
        out.push(StreamsRecord::Current {
            group: group.clone(),
            member: id.clone(),
            value: None,
        });
        out.push(StreamsRecord::TargetMember {
            group: group.clone(),
            member: id.clone(),
            value: None,
        });
        out.push(StreamsRecord::Member {
            group: group.clone(),
            member: id.clone(),
            value: None,
        });
    }
    out
}

/// `removed` as records: what a whole write adds for members the log may still hold.
pub fn removed_members<'a>(
    ids: impl IntoIterator<Item = &'a String>,
    after: &StreamsGroup,
) -> Records {
    removed(ids, after)
        .iter()
        .map(StreamsRecord::encode)
        .collect()
}

/// The records that take the log from `before` (None: nothing written yet) to `after`,
/// in the order Kafka writes them: departed members' tombstones (current assignment,
/// target, metadata), then member metadata, topology, group metadata, targets, target
/// metadata, current assignments.
pub fn changes(before: Option<&StreamsGroup>, after: &StreamsGroup) -> Records {
    let group = after.group_id.clone();
    let mut out: Vec<StreamsRecord> = Vec::new();
    let old_member = |id: &str| before.and_then(|b| b.members.get(id));
    if let Some(before) = before {
        out.extend(removed(before.members.keys(), after));
    }
    for (id, member) in &after.members {
        let metadata = member_metadata_of(member);
        if old_member(id).map(member_metadata_of).as_ref() != Some(&metadata) {
            out.push(StreamsRecord::Member {
                group: group.clone(),
                member: id.clone(),
                value: Some(metadata),
            });
        }
    }
    if before.and_then(|b| b.topology.as_ref()) != after.topology.as_ref() {
        out.push(StreamsRecord::Topology {
            group: group.clone(),
            value: after.topology.clone(),
        });
    }
    let metadata = metadata_of(after);
    if before.map(metadata_of).as_ref() != Some(&metadata) {
        out.push(StreamsRecord::Metadata {
            group: group.clone(),
            value: Some(metadata),
        });
    }
    for (id, target) in &after.target {
        if before.and_then(|b| b.target.get(id)) != Some(target) {
            out.push(StreamsRecord::TargetMember {
                group: group.clone(),
                member: id.clone(),
                value: Some(stored_tasks(target)),
            });
        }
    }
    if let Some(before) = before {
        for id in before.target.keys() {
            if !after.target.contains_key(id) && after.members.contains_key(id) {
                out.push(StreamsRecord::TargetMember {
                    group: group.clone(),
                    member: id.clone(),
                    value: None,
                });
            }
        }
    }
    let target_metadata = target_metadata_of(after);
    if before.map(target_metadata_of).as_ref() != Some(&target_metadata) {
        out.push(StreamsRecord::TargetMetadata {
            group: group.clone(),
            value: Some(target_metadata),
        });
    }
    for (id, member) in &after.members {
        let current = current_of(member);
        if old_member(id).map(current_of).as_ref() != Some(&current) {
            out.push(StreamsRecord::Current {
                group: group.clone(),
                member: id.clone(),
                value: Some(current),
            });
        }
    }
    out.iter().map(StreamsRecord::encode).collect()
}

/// Every record of a deleted group, as tombstones in Kafka's order.
pub fn tombstones(group: &StreamsGroup) -> Records {
    let id = group.group_id.clone();
    let mut out = Vec::new();
    for member in group.members.keys() {
        out.push(StreamsRecord::Current {
            group: id.clone(),
            member: member.clone(),
            value: None,
        });
    }
    for member in group.target.keys() {
        out.push(StreamsRecord::TargetMember {
            group: id.clone(),
            member: member.clone(),
            value: None,
        });
    }
    out.push(StreamsRecord::TargetMetadata {
        group: id.clone(),
        value: None,
    });
    for member in group.members.keys() {
        out.push(StreamsRecord::Member {
            group: id.clone(),
            member: member.clone(),
            value: None,
        });
    }
    out.push(StreamsRecord::Metadata {
        group: id.clone(),
        value: None,
    });
    out.push(StreamsRecord::Topology {
        group: id,
        value: None,
    });
    out.iter().map(StreamsRecord::encode).collect()
}

/// One streams group's records read so far during a load: the latest of each key.
#[derive(Debug, Default)]
pub struct StreamsLoading {
    metadata: Option<StoredGroupMetadata>,
    topology: Option<StoredTopology>,
    target_metadata: Option<StoredTargetMetadata>,
    members: BTreeMap<String, StoredMemberMetadata>,
    targets: BTreeMap<String, StoredTasks>,
    current: BTreeMap<String, StoredCurrent>,
}

impl StreamsLoading {
    /// Applies one record of this group.
    pub fn apply(&mut self, record: StreamsRecord) {
        fn put<V>(map: &mut BTreeMap<String, V>, key: String, value: Option<V>) {
            match value {
                Some(value) => {
                    map.insert(key, value);
                }
                None => {
                    map.remove(&key);
                }
            }
        }
        match record {
            StreamsRecord::Metadata { value, .. } => self.metadata = value,
            StreamsRecord::Topology { value, .. } => self.topology = value,
            StreamsRecord::TargetMetadata { value, .. } => self.target_metadata = value,
            StreamsRecord::Member { member, value, .. } => put(&mut self.members, member, value),
            StreamsRecord::TargetMember { member, value, .. } => {
                put(&mut self.targets, member, value)
            }
            StreamsRecord::Current { member, value, .. } => put(&mut self.current, member, value),
        }
    }

    /// The group as its records left it (None: it was deleted or never had metadata).
    pub fn finish(
        self,
        group_id: &str,
        limits: StreamsGroupLimits,
        now_ms: i64,
    ) -> Option<StreamsGroup> {
        let metadata = self.metadata?;
        let mut group = StreamsGroup::new(group_id, limits);
        group.group_epoch = metadata.epoch;
        group.metadata_hash = metadata.metadata_hash;
        group.validated_topology_epoch = metadata.validated_topology_epoch;
        group.last_assignment_configs = metadata
            .last_assignment_configs
            .unwrap_or_default()
            .into_iter()
            .collect();
        group.description_epochs = (
            metadata.stored_description_topology_epoch,
            metadata.failed_description_topology_epoch,
        );
        group.topology = self.topology;
        if let Some(target) = self.target_metadata {
            group.assignment_epoch = target.assignment_epoch;
            group.assignment_timestamp_ms = target.assignment_timestamp;
        }
        group.target = self
            .targets
            .into_iter()
            .map(|(member, tasks)| (member, tasks_of(tasks)))
            .collect();
        for (member_id, stored) in self.members {
            let mut member = StreamsMember {
                instance_id: stored.instance_id,
                rack_id: stored.rack_id,
                client_id: stored.client_id,
                client_host: stored.client_host,
                rebalance_timeout_ms: stored.rebalance_timeout_ms,
                topology_epoch: stored.topology_epoch,
                process_id: stored.process_id,
                user_endpoint: stored.user_endpoint,
                client_tags: stored.client_tags,
                ..StreamsMember::blank(&member_id)
            };
            // A member without a current assignment record has not been assigned yet.
            if let Some(current) = self.current.get(&member_id) {
                member.member_epoch = current.member_epoch;
                member.previous_member_epoch = current.previous_member_epoch;
                member.state = MemberState::from_code(current.state);
                member.assigned = tasks_of(current.assigned.clone());
                member.active_epochs = current.active_epochs.clone();
                member.pending_revocation = tasks_of(current.pending_revocation.clone());
            }
            group.members.insert(member_id, member);
        }
        group.restored(now_ms);
        Some(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::{self, OffsetsRecord};

    fn replay(records: &Records) -> Option<StreamsGroup> {
        let mut loading = StreamsLoading::default();
        for (key, value) in records {
            match records::decode(key, value.as_deref()) {
                Some(OffsetsRecord::Streams(record)) => loading.apply(record),
                other => panic!("not a streams record: {other:?}"),
            }
        }
        loading.finish("g", StreamsGroupLimits::default(), 0)
    }

    fn member(id: &str, epoch: i32) -> StreamsMember {
        let mut member = StreamsMember::blank(id);
        member.process_id = format!("p-{id}");
        member.member_epoch = epoch;
        member.previous_member_epoch = epoch - 1;
        member.assigned.active = BTreeMap::from([("0".into(), [0, 1].into())]);
        member.active_epochs.insert(("0".into(), 0), epoch);
        member.active_epochs.insert(("0".into(), 1), epoch);
        member.user_endpoint = Some(("h".into(), 7));
        member
    }

    #[test]
    fn a_group_survives_its_records() {
        let mut group = StreamsGroup::new("g", StreamsGroupLimits::default());
        group.group_epoch = 4;
        group.assignment_epoch = 4;
        group.assignment_timestamp_ms = 99;
        group.validated_topology_epoch = 0;
        group.metadata_hash = -5;
        group.topology = Some(StoredTopology::default());
        group.members.insert("a".into(), member("a", 4));
        group
            .target
            .insert("a".into(), group.members["a"].assigned.clone());
        let written = changes(None, &group);
        let loaded = replay(&written).expect("a group");
        assert_eq!(loaded.group_epoch, 4);
        assert_eq!(loaded.assignment_epoch, 4);
        assert_eq!(loaded.assignment_timestamp_ms, 99);
        assert_eq!(loaded.metadata_hash, -5);
        assert_eq!(loaded.topology, group.topology);
        assert_eq!(loaded.target, group.target);
        let (mut a, b) = (loaded.members["a"].clone(), &group.members["a"]);
        a.session_deadline_ms = b.session_deadline_ms;
        assert_eq!(&a, b);

        // A member leaves: only what changed is written, and the replay agrees.
        let mut after = group.clone();
        after.fence("a");
        let mut all = written.clone();
        let delta = changes(Some(&group), &after);
        assert!(delta.len() < written.len() + 3);
        all.extend(delta);
        let loaded = replay(&all).expect("still a group");
        assert!(loaded.members.is_empty() && loaded.target.is_empty());
        assert_eq!(loaded.group_epoch, 5);

        // Deleted: nothing is left to load.
        all.extend(tombstones(&after));
        assert!(replay(&all).is_none());
        assert!(changes(Some(&group), &group).is_empty());
    }

    /// A whole write (the log lagging after a failure) does not tombstone a member the
    /// group no longer has; `removed_members` does, or a replay brings it back.
    #[test]
    fn a_whole_write_needs_the_tombstones_of_members_gone() {
        let mut group = StreamsGroup::new("g", StreamsGroupLimits::default());
        group.members.insert("a".into(), member("a", 4));
        group.members.insert("b".into(), member("b", 4));
        let mut log = changes(None, &group);
        let mut after = group.clone();
        after.fence("b"); // its write failed; the next write is whole
        log.extend(changes(None, &after));
        assert!(replay(&log).unwrap().members.contains_key("b"), "b is back");
        log.extend(removed_members(&["a".to_string(), "b".to_string()], &after));
        let loaded = replay(&log).unwrap();
        assert!(loaded.members.contains_key("a") && !loaded.members.contains_key("b"));
    }
}
