//! The group coordinator: every consumer group on this broker, their committed offsets,
//! and the edge between the classic state machines and the world: parked JoinGroup and
//! SyncGroup requests (answered through oneshot channels when the state machine completes
//! them), timers (a tick drives session and rebalance timeouts), and persistence to
//! `__consumer_offsets` in Kafka's record formats, replayed at startup.
//!
//! Thread-safety: one async mutex over all groups, held across the append of a group's
//! records so that the log's order is the order of the changes. Parked requests wait
//! outside it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use strand_log::TopicPartition;
use strand_records::{walk_stored_records, BatchBuilder, BatchView, Record, WalkLimits};
use tokio::sync::{oneshot, Mutex};

use super::classic::{
    ClassicGroup, Completion, GroupLimits, GroupState, JoinRequest, JoinResult, Reply, SyncResult,
};
use super::consumer::{
    ConsumerGroup, ConsumerGroupLimits, Heartbeat, HeartbeatError, HeartbeatResult, TopicView,
};
use super::records::{
    self, CommittedOffset, OffsetsRecord, StoredGroup, StoredMember, OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
};
use crate::broker::{ApiError, Broker};
use crate::error_code;

/// offset.metadata.max.bytes
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;
/// Groups one coordinator holds (a hostile client cannot create them without bound).
pub const GROUPS_MAX: usize = 100_000;
/// offsets.topic.replication.factor
const OFFSETS_TOPIC_REPLICATION_FACTOR: usize = 3;
/// offsets.commit.timeout.ms: how long a commit waits for the in-sync replicas.
const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a parked request waits beyond its rebalance timeout before giving up.
const PARKED_REQUEST_SLACK: Duration = Duration::from_secs(5);

enum Waiter {
    Join(oneshot::Sender<JoinResult>),
    Sync(oneshot::Sender<SyncResult>),
}

#[derive(Debug, Default)]
struct GroupEntry {
    classic: Option<ClassicGroup>,
    /// A KIP-848 consumer group; a group id is one kind or the other while it has members.
    consumer: Option<ConsumerGroup>,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// When the group last became empty (offsets expire counting from it).
    empty_since_ms: i64,
}

#[derive(Default)]
struct CoordinatorState {
    groups: HashMap<String, GroupEntry>,
    waiters: HashMap<(String, String), Waiter>,
}

/// A SyncGroup from a member.
#[derive(Debug, Clone)]
pub struct SyncRequest<'a> {
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
    pub generation_id: i32,
    /// v5+: must match the group's, when given.
    pub protocol_type: Option<&'a str>,
    pub protocol_name: Option<&'a str>,
    /// The leader's assignment: (member id, assignment).
    pub assignments: Vec<(String, Bytes)>,
}

/// A group as DescribeGroups and ListGroups report it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    /// (member id, instance id, client id, client host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
    /// "classic" or "consumer" (ListGroups v5).
    pub group_type: &'static str,
    /// The state's name in the group's own protocol.
    pub state_name: &'static str,
}

/// The broker's topics as the consumer-group assignors see them.
struct BrokerTopics<'a>(&'a Broker);

impl TopicView for BrokerTopics<'_> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.0.topic(topic).map(|t| t.partitions)
    }
    fn names(&self) -> Vec<String> {
        self.0.topics().into_iter().map(|t| t.name).collect()
    }
}

pub struct GroupCoordinator {
    state: Mutex<CoordinatorState>,
    limits: GroupLimits,
    consumer_limits: ConsumerGroupLimits,
    /// offsets.retention.minutes, in ms.
    offsets_retention_ms: i64,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("limits", &self.limits)
            .finish()
    }
}

/// What a group request answers when its `__consumer_offsets` write failed with `code`:
/// Kafka's mapping, so clients retry where they should (a storage failure on this broker
/// means "find the coordinator again", never a member or generation error).
fn coordinator_error_for_append(code: i16) -> i16 {
    match code {
        error_code::NOT_LEADER_OR_FOLLOWER | error_code::KAFKA_STORAGE_ERROR => {
            error_code::NOT_COORDINATOR
        }
        error_code::MESSAGE_TOO_LARGE | error_code::RECORD_LIST_TOO_LARGE => {
            error_code::INVALID_COMMIT_OFFSET_SIZE
        }
        _ => error_code::COORDINATOR_NOT_AVAILABLE,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl GroupCoordinator {
    pub fn new(
        limits: GroupLimits,
        consumer_limits: ConsumerGroupLimits,
        offsets_retention_ms: i64,
    ) -> GroupCoordinator {
        GroupCoordinator {
            state: Mutex::new(CoordinatorState::default()),
            limits,
            consumer_limits,
            offsets_retention_ms,
        }
    }

    /// ConsumerGroupHeartbeat (KIP-848). A group id with classic members is not a
    /// consumer group (Kafka's online migration is not supported).
    pub async fn consumer_heartbeat(
        &self,
        broker: &Broker,
        group_id: &str,
        request: Heartbeat,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        if !self.coordinates(broker, group_id) {
            return Err(HeartbeatError {
                code: error_code::NOT_COORDINATOR,
                message: "This is not the correct coordinator.".into(),
            });
        }
        let refuse = |code, message: &str| {
            Err(HeartbeatError {
                code,
                message: message.to_string(),
            })
        };
        if group_id.is_empty() {
            return refuse(error_code::INVALID_GROUP_ID, "The group id can't be empty.");
        }
        if let Err(e) = self.ensure_offsets_topic(broker).await {
            return refuse(e.code, e.message.as_deref().unwrap_or_default());
        }
        let mut state = self.state.lock().await;
        if !state.groups.contains_key(group_id) && state.groups.len() >= GROUPS_MAX {
            return refuse(error_code::COORDINATOR_NOT_AVAILABLE, "too many groups");
        }
        let entry = state.groups.entry(group_id.to_string()).or_default();
        if entry.classic.as_ref().is_some_and(|g| !g.is_empty()) {
            return refuse(
                error_code::GROUP_ID_NOT_FOUND,
                &format!("Group {group_id} is not a consumer group."),
            );
        }
        entry.classic = None;
        let limits = self.consumer_limits;
        let group = entry
            .consumer
            .get_or_insert_with(|| ConsumerGroup::new(group_id, limits));
        let was_empty = group.is_empty();
        let mut new_id = || uuid::Uuid::new_v4().to_string();
        let result = group.heartbeat(request, now_ms(), &BrokerTopics(broker), &mut new_id);
        if group.is_empty() && !was_empty {
            entry.empty_since_ms = now_ms();
        }
        result
    }

    /// ConsumerGroupDescribe: the consumer group, or None if the id is not one.
    pub async fn describe_consumer_group(&self, group_id: &str) -> Option<ConsumerGroup> {
        let state = self.state.lock().await;
        state.groups.get(group_id).and_then(|e| e.consumer.clone())
    }

    /// Creates `__consumer_offsets` if it does not exist yet (compacted, as Kafka's). In a
    /// cluster its replication factor is offsets.topic.replication.factor (3) or the
    /// number of live brokers if fewer (Kafka refuses until 3 exist; a 1- or 2-broker
    /// Strand cluster works, replicated as far as it can).
    pub async fn ensure_offsets_topic(&self, broker: &Broker) -> Result<(), ApiError> {
        if broker.topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("segment.bytes".to_string(), (100 * 1024 * 1024).to_string());
        let replication_factor = match broker.cluster() {
            None => 1,
            Some(cluster) => {
                let live = cluster
                    .image()
                    .brokers
                    .values()
                    .filter(|b| b.is_eligible())
                    .count();
                live.clamp(1, OFFSETS_TOPIC_REPLICATION_FACTOR) as i16
            }
        };
        let created = broker
            .create_topic(
                OFFSETS_TOPIC,
                OFFSETS_TOPIC_PARTITIONS,
                replication_factor,
                Vec::new(),
                configs,
                false,
            )
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(error) if error.code == error_code::TOPIC_ALREADY_EXISTS => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Replays `__consumer_offsets` into memory (at startup, on a single node).
    pub fn load(&self, broker: &Broker) -> anyhow::Result<usize> {
        let Some(topic) = broker.topic(OFFSETS_TOPIC) else {
            return Ok(0);
        };
        let mut state = self
            .state
            .try_lock()
            .map_err(|_| anyhow::anyhow!("coordinator busy during load"))?;
        let mut applied = 0;
        for index in 0..topic.partitions {
            applied += self.load_partition(&mut state, broker, index)?;
        }
        Ok(applied)
    }

    /// In a cluster a group lives where its `__consumer_offsets` partition is led: on
    /// gaining a partition's leadership its groups are replayed from the log; on losing
    /// it they are dropped (parked requests fail and clients find the new coordinator).
    pub async fn leadership_changed(&self, broker: &Broker, changes: &[(i32, bool)]) {
        if changes.is_empty() {
            return;
        }
        let mut state = self.state.lock().await;
        for &(index, leads) in changes {
            let in_partition = |group_id: &str| {
                records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS) == index
            };
            state.groups.retain(|group_id, _| !in_partition(group_id));
            state
                .waiters
                .retain(|(group_id, _), _| !in_partition(group_id));
            if leads {
                match self.load_partition(&mut state, broker, index) {
                    Ok(records) => {
                        tracing::info!(partition = index, records, "loaded consumer groups")
                    }
                    Err(error) => {
                        tracing::error!(partition = index, %error, "loading consumer groups failed")
                    }
                }
            }
        }
    }

    /// Whether this broker coordinates `group_id` (leads its `__consumer_offsets`
    /// partition). Always on a single node.
    pub fn coordinates(&self, broker: &Broker, group_id: &str) -> bool {
        if broker.cluster().is_none() {
            return true;
        }
        let index = records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
        broker
            .partition(&TopicPartition::new(OFFSETS_TOPIC, index))
            .is_some_and(|p| p.is_leader())
    }

    fn load_partition(
        &self,
        state: &mut CoordinatorState,
        broker: &Broker,
        index: i32,
    ) -> anyhow::Result<usize> {
        let Some(partition) = broker.partition(&TopicPartition::new(OFFSETS_TOPIC, index)) else {
            return Ok(0);
        };
        let now = now_ms();
        let mut applied = 0;
        let log = partition.log();
        let end = log.log_end_offset();
        let mut next = log.log_start_offset();
        while next < end {
            let Some(slice) = log.read(next, 1 << 20, end, true)?.slice else {
                break;
            };
            let bytes = slice.read_to_vec()?;
            let mut rest = &bytes[..];
            let before = next;
            while let Ok(view) = BatchView::parse(rest) {
                let header = view.header;
                walk_stored_records(&view, WalkLimits::default(), |record| {
                    let offset = header.base_offset + record.offset_delta as i64;
                    if offset < next {
                        return;
                    }
                    if let Some(parsed) = record
                        .key
                        .and_then(|key| records::decode(key, record.value))
                    {
                        apply_loaded(state, parsed, self.limits, now);
                        applied += 1;
                    }
                })?;
                next = next.max(header.next_offset());
                rest = &rest[view.bytes.len()..];
            }
            if next == before {
                break;
            }
        }
        Ok(applied)
    }

    /// Appends records to the group's `__consumer_offsets` partition; `None` values are
    /// tombstones.
    async fn persist(
        &self,
        broker: &Broker,
        group_id: &str,
        entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<(), i16> {
        if entries.is_empty() {
            return Ok(());
        }
        self.ensure_offsets_topic(broker)
            .await
            .map_err(|e| e.code)?;
        let index = records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
        let partition = broker
            .partition(&TopicPartition::new(OFFSETS_TOPIC, index))
            .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
        let now = now_ms();
        let mut builder = BatchBuilder::new(0, now);
        for (key, value) in entries {
            builder.push(Record::new(Some(key), value, now));
        }
        partition
            .append(builder.build(), true, OFFSETS_COMMIT_TIMEOUT)
            .await
            .map(|_| ())
            .map_err(|(code, message)| {
                tracing::error!(
                    code,
                    ?message,
                    group = group_id,
                    "writing to __consumer_offsets failed"
                );
                coordinator_error_for_append(code)
            })
    }

    fn deliver(state: &mut CoordinatorState, group_id: &str, completions: Vec<Completion>) {
        for completion in completions {
            match completion {
                Completion::Join { member_id, result } => {
                    if let Some(Waiter::Join(sender)) =
                        state.waiters.remove(&(group_id.to_string(), member_id))
                    {
                        let _ = sender.send(result);
                    }
                }
                Completion::Sync { member_id, result } => {
                    if let Some(Waiter::Sync(sender)) =
                        state.waiters.remove(&(group_id.to_string(), member_id))
                    {
                        let _ = sender.send(result);
                    }
                }
            }
        }
    }

    /// The group metadata record to write if a change left the group Stable or Empty.
    fn group_record_if_settled(
        entry: &GroupEntry,
        group_id: &str,
        before: (GroupState, i32),
    ) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
        let group = entry.classic.as_ref()?;
        let after = (group.state, group.generation_id);
        let settled = matches!(group.state, GroupState::Stable | GroupState::Empty);
        (settled && after != before).then(|| {
            (
                records::group_key(group_id),
                Some(records::group_value(&stored(group))),
            )
        })
    }

    pub async fn join(&self, broker: &Broker, group_id: &str, request: JoinRequest) -> JoinResult {
        if !self.coordinates(broker, group_id) {
            return JoinResult::error(error_code::NOT_COORDINATOR, &request.member_id);
        }
        let error = |code| JoinResult {
            error_code: code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: request.member_id.clone(),
            members: Vec::new(),
            skip_assignment: false,
        };
        if group_id.is_empty() {
            return error(error_code::INVALID_GROUP_ID);
        }
        if let Err(e) = self.ensure_offsets_topic(broker).await {
            return error(e.code);
        }
        let wait_limit = Duration::from_millis(request.rebalance_timeout_ms.max(0) as u64)
            + PARKED_REQUEST_SLACK;
        let receiver = {
            let mut state = self.state.lock().await;
            if !state.groups.contains_key(group_id) && state.groups.len() >= GROUPS_MAX {
                return error(error_code::COORDINATOR_NOT_AVAILABLE);
            }
            let now = now_ms();
            let limits = self.limits;
            let entry = state.groups.entry(group_id.to_string()).or_default();
            if entry.consumer.as_ref().is_some_and(|g| !g.is_empty()) {
                return error(error_code::INCONSISTENT_GROUP_PROTOCOL);
            }
            entry.consumer = None;
            let group = entry
                .classic
                .get_or_insert_with(|| ClassicGroup::new(group_id, limits));
            let before = (group.state, group.generation_id);
            let mut new_id = |client_id: &str| format!("{client_id}-{}", uuid::Uuid::new_v4());
            let (reply, completions) = group.join(request.clone(), now, &mut new_id);
            let record = Self::group_record_if_settled(entry, group_id, before);
            Self::deliver(&mut state, group_id, completions);
            if let Some(record) = record {
                let _ = self.persist(broker, group_id, vec![record]).await;
            }
            match reply {
                Reply::Now(result) => return result,
                Reply::Wait { member_id } => {
                    let (sender, receiver) = oneshot::channel();
                    state
                        .waiters
                        .insert((group_id.to_string(), member_id), Waiter::Join(sender));
                    receiver
                }
            }
        };
        match tokio::time::timeout(wait_limit, receiver).await {
            Ok(Ok(result)) => result,
            // Replaced by a newer request from the same member, or timed out: rejoin.
            _ => error(error_code::REBALANCE_IN_PROGRESS),
        }
    }

    pub async fn sync(
        &self,
        broker: &Broker,
        group_id: &str,
        request: SyncRequest<'_>,
    ) -> SyncResult {
        if !self.coordinates(broker, group_id) {
            return SyncResult::error(error_code::NOT_COORDINATOR);
        }
        let SyncRequest {
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
        } = request;
        let error = |code| SyncResult {
            error_code: code,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        };
        let (receiver, wait_limit) = {
            let mut state = self.state.lock().await;
            let Some(entry) = state.groups.get_mut(group_id) else {
                return error(error_code::UNKNOWN_MEMBER_ID);
            };
            let Some(group) = entry.classic.as_mut() else {
                return error(error_code::UNKNOWN_MEMBER_ID);
            };
            if protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
                || protocol_name.is_some_and(|n| Some(n) != group.protocol_name.as_deref())
            {
                return error(error_code::INCONSISTENT_GROUP_PROTOCOL);
            }
            let wait_limit = group
                .members
                .get(member_id)
                .map(|m| Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64))
                .unwrap_or_default()
                + PARKED_REQUEST_SLACK;
            let before = (group.state, group.generation_id);
            let (reply, completions) = group.sync(
                member_id,
                group_instance_id,
                generation_id,
                assignments,
                now_ms(),
            );
            let record = Self::group_record_if_settled(entry, group_id, before);
            Self::deliver(&mut state, group_id, completions);
            if let Some(record) = record {
                let _ = self.persist(broker, group_id, vec![record]).await;
            }
            match reply {
                Reply::Now(result) => return result,
                Reply::Wait { member_id } => {
                    let (sender, receiver) = oneshot::channel();
                    state
                        .waiters
                        .insert((group_id.to_string(), member_id), Waiter::Sync(sender));
                    (receiver, wait_limit)
                }
            }
        };
        match tokio::time::timeout(wait_limit, receiver).await {
            Ok(Ok(result)) => result,
            _ => error(error_code::REBALANCE_IN_PROGRESS),
        }
    }

    pub async fn heartbeat(
        &self,
        broker: &Broker,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> i16 {
        if !self.coordinates(broker, group_id) {
            return error_code::NOT_COORDINATOR;
        }
        let mut state = self.state.lock().await;
        match state
            .groups
            .get_mut(group_id)
            .and_then(|e| e.classic.as_mut())
        {
            Some(group) => group.heartbeat(member_id, group_instance_id, generation_id, now_ms()),
            None => error_code::UNKNOWN_MEMBER_ID,
        }
    }

    /// LeaveGroup: (member id, instance id) each answered with an error code.
    pub async fn leave(
        &self,
        broker: &Broker,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<i16>, i16> {
        if !self.coordinates(broker, group_id) {
            return Err(error_code::NOT_COORDINATOR);
        }
        let mut state = self.state.lock().await;
        let Some(entry) = state.groups.get_mut(group_id) else {
            return Err(error_code::UNKNOWN_MEMBER_ID);
        };
        let Some(group) = entry.classic.as_mut() else {
            return Err(error_code::UNKNOWN_MEMBER_ID);
        };
        let before = (group.state, group.generation_id);
        let now = now_ms();
        let mut codes = Vec::with_capacity(members.len());
        let mut completions = Vec::new();
        for (member_id, instance) in members {
            let (code, done) = group.leave(member_id, instance.as_deref(), now);
            codes.push(code);
            completions.extend(done);
        }
        if group.state == GroupState::Empty && before.0 != GroupState::Empty {
            entry.empty_since_ms = now;
        }
        let record = Self::group_record_if_settled(entry, group_id, before);
        Self::deliver(&mut state, group_id, completions);
        if let Some(record) = record {
            let _ = self.persist(broker, group_id, vec![record]).await;
        }
        Ok(codes)
    }

    /// OffsetCommit. `offsets`: (topic, partition, offset, leader epoch, metadata).
    /// Returns an error code per offset (or one for all, as the first element's cause).
    pub async fn commit(
        &self,
        broker: &Broker,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        offsets: &[(String, i32, i64, i32, Option<String>)],
    ) -> Vec<i16> {
        if !self.coordinates(broker, group_id) {
            return vec![error_code::NOT_COORDINATOR; offsets.len()];
        }
        let all = |code: i16| vec![code; offsets.len()];
        if group_id.is_empty() {
            return all(error_code::INVALID_GROUP_ID);
        }
        let mut state = self.state.lock().await;
        if !state.groups.contains_key(group_id) && state.groups.len() >= GROUPS_MAX {
            return all(error_code::COORDINATOR_NOT_AVAILABLE);
        }
        let entry = state.groups.entry(group_id.to_string()).or_default();
        // Who may commit: a simple consumer (no generation) while no one is a member, or a
        // member of the current generation outside the sync phase (Kafka's rules).
        let verdict = match entry.classic.as_ref() {
            _ if generation_id < 0 && member_id.is_empty() => {
                let active = entry.classic.as_ref().is_some_and(|g| !g.is_empty())
                    || entry.consumer.as_ref().is_some_and(|g| !g.is_empty());
                if active {
                    Err(error_code::ILLEGAL_GENERATION)
                } else {
                    Ok(())
                }
            }
            None if entry.consumer.is_some() => entry
                .consumer
                .as_ref()
                .expect("checked")
                .check_commit(member_id, generation_id),
            None => Err(error_code::ILLEGAL_GENERATION),
            Some(group) => group
                .check_member(member_id, group_instance_id, generation_id)
                .and_then(|()| {
                    if group.state == GroupState::CompletingRebalance {
                        Err(error_code::REBALANCE_IN_PROGRESS)
                    } else {
                        Ok(())
                    }
                }),
        };
        if let Err(code) = verdict {
            if entry.classic.is_none() && entry.consumer.is_none() && entry.offsets.is_empty() {
                state.groups.remove(group_id);
            }
            return all(code);
        }
        let now = now_ms();
        let mut codes = Vec::with_capacity(offsets.len());
        let mut accepted = Vec::new();
        for (topic, partition, offset, leader_epoch, metadata) in offsets {
            let metadata = metadata.clone().unwrap_or_default();
            let code = if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                error_code::OFFSET_METADATA_TOO_LARGE
            } else if broker
                .partition(&TopicPartition::new(topic.clone(), *partition))
                .is_none()
            {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                accepted.push((
                    topic.clone(),
                    *partition,
                    CommittedOffset {
                        offset: *offset,
                        leader_epoch: *leader_epoch,
                        metadata,
                        commit_timestamp: now,
                    },
                ));
                error_code::NONE
            };
            codes.push(code);
        }
        let records = accepted
            .iter()
            .map(|(topic, partition, value)| {
                (
                    records::offset_key(group_id, topic, *partition),
                    Some(records::offset_value(value)),
                )
            })
            .collect();
        if let Err(code) = self.persist(broker, group_id, records).await {
            return codes
                .into_iter()
                .map(|c| if c == error_code::NONE { code } else { c })
                .collect();
        }
        let entry = state.groups.get_mut(group_id).expect("inserted above");
        for (topic, partition, value) in accepted {
            entry.offsets.insert((topic, partition), value);
        }
        codes
    }

    /// OffsetFetch for one group: (topic, partition, committed offset) for the asked
    /// partitions (or every committed one when `partitions` is None).
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let state = self.state.lock().await;
        let entry = state.groups.get(group_id);
        match partitions {
            Some(list) => list
                .into_iter()
                .map(|(topic, partition)| {
                    let committed =
                        entry.and_then(|e| e.offsets.get(&(topic.clone(), partition)).cloned());
                    (topic, partition, committed)
                })
                .collect(),
            None => entry
                .map(|e| {
                    e.offsets
                        .iter()
                        .map(|((t, p), o)| (t.clone(), *p, Some(o.clone())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    pub async fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let state = self.state.lock().await;
        let entry = state.groups.get(group_id)?;
        Some(describe_entry(group_id, entry))
    }

    pub async fn list(&self) -> Vec<GroupDescription> {
        let state = self.state.lock().await;
        let mut groups: Vec<GroupDescription> = state
            .groups
            .iter()
            .map(|(id, entry)| describe_entry(id, entry))
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups
    }

    /// DeleteGroups for one group: only an empty group can go.
    pub async fn delete_group(&self, broker: &Broker, group_id: &str) -> i16 {
        if !self.coordinates(broker, group_id) {
            return error_code::NOT_COORDINATOR;
        }
        let mut state = self.state.lock().await;
        let Some(entry) = state.groups.get(group_id) else {
            return error_code::GROUP_ID_NOT_FOUND;
        };
        if entry.classic.as_ref().is_some_and(|g| !g.is_empty())
            || entry.consumer.as_ref().is_some_and(|g| !g.is_empty())
        {
            return error_code::NON_EMPTY_GROUP;
        }
        let mut tombstones: Vec<(Vec<u8>, Option<Vec<u8>>)> = entry
            .offsets
            .keys()
            .map(|(topic, partition)| (records::offset_key(group_id, topic, *partition), None))
            .collect();
        tombstones.push((records::group_key(group_id), None));
        if let Err(code) = self.persist(broker, group_id, tombstones).await {
            return code;
        }
        state.groups.remove(group_id);
        error_code::NONE
    }

    /// OffsetDelete: removes committed offsets, except of topics the group's members
    /// are subscribed to. Returns a code per partition, or a group-level error.
    pub async fn delete_offsets(
        &self,
        broker: &Broker,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        if !self.coordinates(broker, group_id) {
            return Err(error_code::NOT_COORDINATOR);
        }
        let mut state = self.state.lock().await;
        let Some(entry) = state.groups.get_mut(group_id) else {
            return Err(error_code::GROUP_ID_NOT_FOUND);
        };
        let mut subscribed = entry
            .classic
            .as_ref()
            .map(ClassicGroup::subscribed_topics)
            .unwrap_or_default();
        if let Some(group) = &entry.consumer {
            subscribed.extend(group.subscribed_topics(&BrokerTopics(broker)));
        }
        let mut codes = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.contains(topic) {
                codes.push(error_code::GROUP_SUBSCRIBED_TO_TOPIC);
            } else {
                if entry.offsets.remove(&(topic.clone(), *partition)).is_some() {
                    tombstones.push((records::offset_key(group_id, topic, *partition), None));
                }
                codes.push(error_code::NONE);
            }
        }
        self.persist(broker, group_id, tombstones).await?;
        Ok(codes)
    }

    /// Timers: session and rebalance timeouts, every group whose deadline has come.
    pub async fn tick(&self, broker: &Broker) {
        let mut state = self.state.lock().await;
        let now = now_ms();
        let topics = BrokerTopics(broker);
        for entry in state.groups.values_mut() {
            if let Some(group) = entry.consumer.as_mut() {
                let was_empty = group.is_empty();
                if group.next_deadline().is_some_and(|d| d <= now) {
                    group.tick(now, &topics);
                }
                if group.is_empty() && !was_empty {
                    entry.empty_since_ms = now;
                }
            }
        }
        let due: Vec<String> = state
            .groups
            .iter()
            .filter(|(_, e)| {
                e.classic
                    .as_ref()
                    .and_then(ClassicGroup::next_deadline)
                    .is_some_and(|d| d <= now)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for group_id in due {
            let Some(entry) = state.groups.get_mut(&group_id) else {
                continue;
            };
            let Some(group) = entry.classic.as_mut() else {
                continue;
            };
            let before = (group.state, group.generation_id);
            let completions = group.tick(now);
            if group.state == GroupState::Empty && before.0 != GroupState::Empty {
                entry.empty_since_ms = now;
            }
            let record = Self::group_record_if_settled(entry, &group_id, before);
            Self::deliver(&mut state, &group_id, completions);
            if let Some(record) = record {
                let _ = self.persist(broker, &group_id, vec![record]).await;
            }
        }
    }

    /// offsets.retention.minutes: offsets of empty groups expire after the retention
    /// period, counted from the later of the commit and the group becoming empty; a
    /// group with nothing left is removed.
    pub async fn expire_offsets(&self, broker: &Broker) {
        let mut state = self.state.lock().await;
        let now = now_ms();
        let retention = self.offsets_retention_ms;
        let mut writes = Vec::new();
        state.groups.retain(|group_id, entry| {
            if entry.classic.as_ref().is_some_and(|g| !g.is_empty())
                || entry.consumer.as_ref().is_some_and(|g| !g.is_empty())
            {
                return true;
            }
            let empty_since = entry.empty_since_ms;
            let expired: Vec<(String, i32)> = entry
                .offsets
                .iter()
                .filter(|(_, o)| o.commit_timestamp.max(empty_since) + retention <= now)
                .map(|(k, _)| k.clone())
                .collect();
            let mut tombstones: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            for (topic, partition) in expired {
                entry.offsets.remove(&(topic.clone(), partition));
                tombstones.push((records::offset_key(group_id, &topic, partition), None));
            }
            let keep = !entry.offsets.is_empty();
            if !keep {
                tombstones.push((records::group_key(group_id), None));
            }
            if !tombstones.is_empty() {
                writes.push((group_id.clone(), tombstones));
            }
            keep
        });
        for (group_id, tombstones) in writes {
            let _ = self.persist(broker, &group_id, tombstones).await;
        }
    }
}

fn describe_entry(group_id: &str, entry: &GroupEntry) -> GroupDescription {
    if let Some(group) = &entry.consumer {
        let state = match group.state() {
            super::consumer::ConsumerGroupState::Empty => GroupState::Empty,
            super::consumer::ConsumerGroupState::Assigning
            | super::consumer::ConsumerGroupState::Reconciling => GroupState::PreparingRebalance,
            super::consumer::ConsumerGroupState::Stable => GroupState::Stable,
        };
        return GroupDescription {
            group_id: group_id.to_string(),
            state,
            protocol_type: "consumer".into(),
            protocol_name: String::new(),
            members: Vec::new(),
            group_type: "consumer",
            state_name: group.state().name(),
        };
    }
    match &entry.classic {
        Some(group) => {
            let protocol = group.protocol_name.clone().unwrap_or_default();
            GroupDescription {
                group_id: group_id.to_string(),
                state: group.state,
                protocol_type: group.protocol_type.clone().unwrap_or_default(),
                protocol_name: protocol.clone(),
                members: group
                    .members
                    .values()
                    .map(|m| {
                        let metadata = m
                            .protocols
                            .iter()
                            .find(|(n, _)| *n == protocol)
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default();
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            metadata,
                            m.assignment.clone(),
                        )
                    })
                    .collect(),
                group_type: "classic",
                state_name: group.state.name(),
            }
        }
        None => GroupDescription {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            protocol_type: String::new(),
            protocol_name: String::new(),
            members: Vec::new(),
            group_type: "classic",
            state_name: GroupState::Empty.name(),
        },
    }
}

fn stored(group: &ClassicGroup) -> StoredGroup {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    StoredGroup {
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        generation_id: group.generation_id,
        protocol_name: group.protocol_name.clone(),
        leader: group.leader.clone(),
        state_timestamp: now_ms(),
        members: group
            .members
            .values()
            .map(|m| StoredMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: m
                    .protocols
                    .iter()
                    .find(|(n, _)| *n == protocol)
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default(),
                assignment: m.assignment.clone(),
            })
            .collect(),
    }
}

/// Applies one loaded record; the latest record for a key wins, as compaction would keep.
fn apply_loaded(
    state: &mut CoordinatorState,
    record: OffsetsRecord,
    limits: GroupLimits,
    now: i64,
) {
    match record {
        OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value,
        } => {
            let entry = state.groups.entry(group.clone()).or_default();
            match value {
                Some(value) => {
                    entry.offsets.insert((topic, partition), value);
                }
                None => {
                    entry.offsets.remove(&(topic, partition));
                    if entry.offsets.is_empty() && entry.classic.is_none() {
                        state.groups.remove(&group);
                    }
                }
            }
        }
        OffsetsRecord::Group { group, value: None } => {
            state.groups.remove(&group);
        }
        OffsetsRecord::Group {
            group,
            value: Some(stored),
        } => {
            let entry = state.groups.entry(group.clone()).or_default();
            let mut classic = ClassicGroup::new(&group, limits);
            classic.generation_id = stored.generation_id;
            classic.protocol_type = Some(stored.protocol_type.clone());
            classic.protocol_name = stored.protocol_name.clone();
            classic.leader = stored.leader.clone();
            for member in stored.members {
                if let Some(instance) = &member.group_instance_id {
                    classic
                        .static_members
                        .insert(instance.clone(), member.member_id.clone());
                }
                let protocol = stored.protocol_name.clone().unwrap_or_default();
                classic.members.insert(
                    member.member_id.clone(),
                    super::classic::Member {
                        member_id: member.member_id,
                        group_instance_id: member.group_instance_id,
                        client_id: member.client_id,
                        client_host: member.client_host,
                        session_timeout_ms: member.session_timeout_ms,
                        rebalance_timeout_ms: member.rebalance_timeout_ms,
                        protocols: vec![(protocol, member.subscription)],
                        assignment: member.assignment,
                        // Restored members must heartbeat within a session to stay.
                        session_deadline_ms: now + member.session_timeout_ms as i64,
                        awaiting_join: false,
                        awaiting_sync: false,
                    },
                );
            }
            classic.state = if classic.members.is_empty() {
                GroupState::Empty
            } else {
                GroupState::Stable
            };
            if classic.state == GroupState::Empty {
                entry.empty_since_ms = stored.state_timestamp.max(0);
                if classic.protocol_name.is_none() {
                    classic.protocol_type = if stored.protocol_type.is_empty() {
                        None
                    } else {
                        Some(stored.protocol_type)
                    };
                }
            }
            entry.classic = Some(classic);
        }
    }
}
