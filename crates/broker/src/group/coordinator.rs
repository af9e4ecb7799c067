//! The group coordinator service: routes each group request to the shard of its
//! `__consumer_offsets` partition (`strand_coordinator`'s runtime, one event loop per
//! partition this broker leads), and is that runtime's edge to the broker: the shard's
//! log (an append as leader, committed once durable and on every in-sync replica), its
//! load (a replay of the partition on a blocking thread), the topics the assignors see,
//! and the timers.
//!
//! A shard belongs to one leader epoch of its partition: a request finding the epoch
//! moved starts a fresh shard (reloaded from the log); losing leadership drops it, and
//! its parked and unanswered requests get NOT_COORDINATOR (clients find the new one).
//! No lock is shared between shards, and none is held across a write.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use strand_coordinator::group::classic::{JoinRequest, JoinResult, SyncResult};
use strand_coordinator::group::consumer::{
    ConsumerGroup, Heartbeat, HeartbeatError, HeartbeatResult, TopicView,
};
use strand_coordinator::group::records::{
    self, CommittedOffset, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS,
};
pub use strand_coordinator::group::shard::TxnCommitter;
use strand_coordinator::group::shard::{
    self, Answer, ForgottenTopics, GroupSettings, GroupShard, SharePartitionsView,
};
use strand_coordinator::group::share::{
    ShareGroup, ShareGroupLimits, ShareHeartbeat, ShareHeartbeatResult,
};
use strand_coordinator::group::streams::{StreamsGroup, StreamsHeartbeat, StreamsHeartbeatResult};
use strand_coordinator::runtime::{Shard, Step};
use strand_log::TopicPartition;

pub use strand_coordinator::group::shard::{GroupDescription, OFFSET_METADATA_MAX_BYTES};

use super::streams_topics::StreamsTopics;
use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::partition::Partition;
use crate::shard_log::{self, now_ms, PartitionShardLog, Replayed};
use crate::topics::TopicRegistry;

/// (topic, partition, committed offset) rows of OffsetFetch.
pub type FetchedOffsets = Vec<(String, i32, Option<CommittedOffset>)>;

/// offsets.topic.replication.factor
const OFFSETS_TOPIC_REPLICATION_FACTOR: usize = 3;
/// offsets.commit.timeout.ms: how long a write waits for the in-sync replicas.
pub const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a parked request waits beyond its rebalance timeout before giving up.
pub const PARKED_REQUEST_SLACK: Duration = Duration::from_secs(5);

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

/// The broker's topics as the consumer-group assignors see them.
#[derive(Debug, Clone)]
pub struct RegistryTopics(pub Arc<Mutex<TopicRegistry>>);

impl TopicView for RegistryTopics {
    fn partitions(&self, topic: &str) -> Option<i32> {
        let registry = self.0.lock().unwrap_or_else(|p| p.into_inner());
        registry.get(topic).map(|t| t.partitions)
    }
    fn names(&self) -> Vec<String> {
        let registry = self.0.lock().unwrap_or_else(|p| p.into_inner());
        registry.all().map(|t| t.name.clone()).collect()
    }
    fn id(&self, topic: &str) -> Option<uuid::Uuid> {
        let registry = self.0.lock().unwrap_or_else(|p| p.into_inner());
        registry.get(topic).map(|t| t.id)
    }
    fn name_of(&self, id: uuid::Uuid) -> Option<String> {
        let registry = self.0.lock().unwrap_or_else(|p| p.into_inner());
        registry.get_by_id(&id).map(|t| t.name.clone())
    }
}

/// A running shard and the leader epoch it was loaded for.
struct ShardSlot {
    leader_epoch: i32,
    shard: Arc<Shard<GroupShard>>,
    /// A timer event is queued and not yet run (the next tick does not queue another).
    tick_queued: Arc<AtomicBool>,
}

impl Drop for ShardSlot {
    /// A shard out of its slot stops at once, even while requests still hold it: their
    /// parked and unanswered replies get NOT_COORDINATOR.
    fn drop(&mut self) {
        self.shard.stop();
    }
}

pub struct GroupCoordinator {
    settings: GroupSettings,
    topics: RegistryTopics,
    shards: Mutex<HashMap<i32, ShardSlot>>,
    /// Streams groups' internal topics being created, and recent failures.
    pub streams_topics: StreamsTopics,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("settings", &self.settings)
            .finish()
    }
}

/// Replays a `__consumer_offsets` partition into a fresh shard state: plain records,
/// transactional offsets (pending until their producer's marker) and markers; `now` (ms)
/// starts the members' sessions. (Public for the simulator, which loads shards as the
/// broker does.)
pub fn load(partition: &Partition, mut state: GroupShard, now: i64) -> GroupShard {
    let result = shard_log::replay(partition, |replayed| match replayed {
        Replayed::Record { header, key, value } => {
            if header.attributes.is_transactional() {
                state.replay_transactional(header.producer_id, key, value);
            } else {
                state.replay(key, value, now);
            }
        }
        Replayed::Marker {
            producer_id,
            commit,
        } => state.replay_marker(producer_id, commit),
    });
    state.finish_load(now);
    match result {
        Ok(0) => {}
        Ok(applied) => {
            tracing::info!(partition = %partition.tp, records = applied, "loaded consumer groups")
        }
        Err(error) => {
            tracing::error!(partition = %partition.tp, %error, "loading consumer groups failed")
        }
    }
    state
}

/// A heartbeat whose shard stopped or was not there.
fn not_coordinator(code: i16) -> HeartbeatError {
    HeartbeatError {
        code,
        message: "This is not the correct coordinator.".into(),
    }
}

/// Waits for a parked JoinGroup or SyncGroup's reply: at the limit the member must
/// rejoin (REBALANCE_IN_PROGRESS); a reply dropped unsent means the shard stopped (its
/// partition moved away: NOT_COORDINATOR, the client finds the new coordinator).
async fn parked<T>(receiver: tokio::sync::oneshot::Receiver<T>, limit: Duration) -> Result<T, i16> {
    match tokio::time::timeout(limit, receiver).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(_)) => Err(error_code::NOT_COORDINATOR),
        Err(_) => Err(error_code::REBALANCE_IN_PROGRESS),
    }
}

impl GroupCoordinator {
    pub fn new(settings: GroupSettings, topics: RegistryTopics) -> GroupCoordinator {
        GroupCoordinator {
            settings,
            topics,
            shards: Mutex::new(HashMap::new()),
            streams_topics: StreamsTopics::default(),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<i32, ShardSlot>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard of a `__consumer_offsets` partition this broker leads, started (and
    /// loaded) for the current leader epoch if it is not running yet.
    fn shard_of(&self, broker: &Broker, index: i32) -> Result<Arc<Shard<GroupShard>>, i16> {
        let partition = broker
            .partition(&TopicPartition::new(OFFSETS_TOPIC, index))
            .ok_or(error_code::NOT_COORDINATOR)?;
        let epoch = partition
            .leader_epoch_if_leader()
            .ok_or(error_code::NOT_COORDINATOR)?;
        let mut slots = self.slots();
        if let Some(slot) = slots
            .get(&index)
            .filter(|s| s.leader_epoch == epoch && s.shard.is_running())
        {
            return Ok(slot.shard.clone());
        }
        let state = GroupShard::new(self.settings, Arc::new(self.topics.clone()));
        let log = Arc::new(PartitionShardLog {
            partition: partition.clone(),
            leader_epoch: epoch,
            timeout: OFFSETS_COMMIT_TIMEOUT,
        });
        let loaded = partition.clone();
        let shard = Arc::new(Shard::start(move || load(&loaded, state, now_ms()), log));
        slots.insert(
            index,
            ShardSlot {
                leader_epoch: epoch,
                shard: shard.clone(),
                tick_queued: Arc::new(AtomicBool::new(false)),
            },
        );
        drop(slots);
        // Leadership may have moved while this shard was made (`leadership_changed` may
        // have run in between): a shard for an epoch already gone is dropped.
        if partition.leader_epoch_if_leader() != Some(epoch) {
            let mut slots = self.slots();
            if slots.get(&index).is_some_and(|s| s.leader_epoch == epoch) {
                slots.remove(&index);
            }
            return Err(error_code::NOT_COORDINATOR);
        }
        Ok(shard)
    }

    /// The shard coordinating `group_id`, creating `__consumer_offsets` first if this is
    /// the first group the cluster sees.
    async fn shard_for(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Arc<Shard<GroupShard>>, ApiError> {
        if broker.cluster().is_some() && !self.coordinates(broker, group_id) {
            return Err(ApiError::new(
                error_code::NOT_COORDINATOR,
                "This is not the correct coordinator.",
            ));
        }
        self.ensure_offsets_topic(broker).await?;
        let index = records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
        self.shard_of(broker, index).map_err(|code| ApiError {
            code,
            message: None,
        })
    }

    /// The shard of `group_id` if its partition exists: requests about an existing
    /// group (reads, heartbeats, leaves, deletes) never create the topic.
    fn existing_shard_for(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Option<Arc<Shard<GroupShard>>>, i16> {
        if broker.cluster().is_some() && !self.coordinates(broker, group_id) {
            return Err(error_code::NOT_COORDINATOR);
        }
        if broker.topic(OFFSETS_TOPIC).is_none() {
            return Ok(None);
        }
        let index = records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
        self.shard_of(broker, index).map(Some)
    }

    /// Creates `__consumer_offsets` if it does not exist yet (compacted, as Kafka's).
    pub async fn ensure_offsets_topic(&self, broker: &Broker) -> Result<(), ApiError> {
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("segment.bytes".to_string(), (100 * 1024 * 1024).to_string());
        shard_log::ensure_coordinator_topic(
            broker,
            OFFSETS_TOPIC,
            OFFSETS_TOPIC_PARTITIONS,
            OFFSETS_TOPIC_REPLICATION_FACTOR,
            None,
            configs,
        )
        .await
    }

    /// A `__consumer_offsets` partition's leadership changed: a partition led now starts
    /// loading at once (requests wait for the load); one no longer led stops, and its
    /// requests are answered NOT_COORDINATOR.
    pub async fn leadership_changed(&self, broker: &Broker, changes: &[(i32, bool)]) {
        for &(index, leads) in changes {
            if leads {
                if let Err(code) = self.shard_of(broker, index) {
                    tracing::warn!(partition = index, code, "not loading consumer groups");
                }
            } else {
                self.slots().remove(&index);
            }
        }
    }

    /// Whether this broker coordinates `group_id` (leads its `__consumer_offsets`
    /// partition, and holds the leadership lease: a broker that may have been deposed
    /// without knowing it yet must not answer committed offsets from before).
    /// Always on a single node.
    pub fn coordinates(&self, broker: &Broker, group_id: &str) -> bool {
        if broker.cluster().is_none() {
            return true;
        }
        let index = records::partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
        broker
            .partition(&TopicPartition::new(OFFSETS_TOPIC, index))
            .is_some_and(|p| p.is_leader())
            && broker.holds_leadership_lease()
    }

    pub async fn join(&self, broker: &Broker, group_id: &str, request: JoinRequest) -> JoinResult {
        let error = |code| JoinResult::error(code, &request.member_id);
        if group_id.is_empty() {
            return error(error_code::INVALID_GROUP_ID);
        }
        let shard = match self.shard_for(broker, group_id).await {
            Ok(shard) => shard,
            Err(e) => return error(e.code),
        };
        let wait_limit = Duration::from_millis(request.rebalance_timeout_ms.max(0) as u64)
            + PARKED_REQUEST_SLACK;
        let group = group_id.to_string();
        let owned = request.clone();
        let answer = shard
            .call(move |state: &mut GroupShard| state.join(&group, owned, now_ms()))
            .await;
        drop(shard);
        match answer {
            Err(code) => error(code),
            Ok(Answer::Now(result)) => result,
            Ok(Answer::Wait(receiver)) => parked(receiver, wait_limit).await.unwrap_or_else(error),
        }
    }

    pub async fn sync(
        &self,
        broker: &Broker,
        group_id: &str,
        request: SyncRequest<'_>,
    ) -> SyncResult {
        let shard = match self.existing_shard_for(broker, group_id) {
            Ok(Some(shard)) => shard,
            Ok(None) => return SyncResult::error(error_code::UNKNOWN_MEMBER_ID),
            Err(code) => return SyncResult::error(code),
        };
        let group = group_id.to_string();
        let member_id = request.member_id.to_string();
        let owned = shard::SyncRequest {
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.map(str::to_string),
            generation_id: request.generation_id,
            protocol_type: request.protocol_type.map(str::to_string),
            protocol_name: request.protocol_name.map(str::to_string),
            assignments: request.assignments,
        };
        let answer = shard
            .call(move |state: &mut GroupShard| {
                let wait_limit = state.rebalance_timeout_of(&group, &member_id);
                let (records, answer) = state.sync(&group, owned, now_ms());
                (records, move |state: &mut GroupShard, written| {
                    (answer(state, written), wait_limit)
                })
            })
            .await;
        drop(shard);
        match answer {
            Err(code) => SyncResult::error(code),
            Ok((Answer::Now(result), _)) => result,
            Ok((Answer::Wait(receiver), rebalance_timeout)) => {
                parked(receiver, rebalance_timeout + PARKED_REQUEST_SLACK)
                    .await
                    .unwrap_or_else(SyncResult::error)
            }
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
        let shard = match self.existing_shard_for(broker, group_id) {
            Ok(Some(shard)) => shard,
            Ok(None) => return error_code::UNKNOWN_MEMBER_ID,
            Err(code) => return code,
        };
        let group = group_id.to_string();
        let member = member_id.to_string();
        let instance = group_instance_id.map(str::to_string);
        shard
            .call(move |state: &mut GroupShard| {
                state.heartbeat(
                    &group,
                    &member,
                    instance.as_deref(),
                    generation_id,
                    now_ms(),
                )
            })
            .await
            .unwrap_or_else(|code| code)
    }

    /// LeaveGroup: (member id, instance id) each answered with an error code.
    pub async fn leave(
        &self,
        broker: &Broker,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<i16>, i16> {
        let shard = self
            .existing_shard_for(broker, group_id)?
            .ok_or(error_code::UNKNOWN_MEMBER_ID)?;
        let group = group_id.to_string();
        let members = members.to_vec();
        shard
            .call(move |state: &mut GroupShard| state.leave(&group, members, now_ms()))
            .await?
    }

    /// OffsetCommit at `api_version`. `offsets`: (topic, partition, offset, leader epoch,
    /// metadata). Returns an error code per offset.
    #[allow(clippy::too_many_arguments)]
    pub async fn commit(
        &self,
        broker: &Broker,
        api_version: i16,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        offsets: &[(String, i32, i64, i32, Option<String>)],
    ) -> Vec<i16> {
        let all = |code: i16| vec![code; offsets.len()];
        if group_id.is_empty() {
            return all(error_code::INVALID_GROUP_ID);
        }
        let shard = match self.shard_for(broker, group_id).await {
            Ok(shard) => shard,
            Err(e) => return all(e.code),
        };
        let checked = self.checked_offsets(broker, offsets);
        let group = group_id.to_string();
        let member = member_id.to_string();
        let instance = group_instance_id.map(str::to_string);
        shard
            .call(move |state: &mut GroupShard| {
                state.commit(
                    api_version,
                    &group,
                    generation_id,
                    &member,
                    instance.as_deref(),
                    checked,
                )
            })
            .await
            .unwrap_or_else(all)
    }

    /// Offsets to commit, each checked against the topics: Kafka checks the partition
    /// against its metadata, not what this broker hosts.
    fn checked_offsets(
        &self,
        broker: &Broker,
        offsets: &[(String, i32, i64, i32, Option<String>)],
    ) -> Vec<shard::OffsetToCommit> {
        let now = now_ms();
        offsets
            .iter()
            .map(|(topic, partition, offset, leader_epoch, metadata)| {
                let known = broker
                    .topic(topic)
                    .is_some_and(|t| (0..t.partitions).contains(partition));
                let value = if known {
                    Ok(CommittedOffset {
                        offset: *offset,
                        leader_epoch: *leader_epoch,
                        metadata: metadata.clone().unwrap_or_default(),
                        commit_timestamp: now,
                    })
                } else {
                    Err(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                };
                (topic.clone(), *partition, value)
            })
            .collect()
    }

    /// The committed offsets of one group: (topic, partition, committed offset) for the
    /// asked partitions (or every committed one when `partitions` is None).
    pub async fn fetch_offsets(
        &self,
        broker: &Broker,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<FetchedOffsets, i16> {
        self.fetch_stable_offsets(broker, group_id, partitions, false, (None, -1))
            .await
            .map(|(fetched, _)| fetched)
    }

    /// OffsetFetch for one group: the committed offsets, and with `require_stable` the
    /// partitions whose offset waits in an open transaction, read together: a marker
    /// landing between two reads would make an offset it just replaced look stable.
    /// `member` (member id, member epoch; OffsetFetch v9+) is checked as Kafka does.
    pub async fn fetch_stable_offsets(
        &self,
        broker: &Broker,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
        require_stable: bool,
        member: (Option<String>, i32),
    ) -> Result<(FetchedOffsets, BTreeSet<(String, i32)>), i16> {
        let Some(shard) = self.existing_shard_for(broker, group_id)? else {
            let fetched = partitions
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, partition)| (topic, partition, None))
                .collect();
            return Ok((fetched, BTreeSet::new()));
        };
        let group = group_id.to_string();
        shard
            .read(move |state: &mut GroupShard| {
                // Kafka: "Group {id} is not a consumer group."
                if state.is_share_group(&group) {
                    return Err(error_code::GROUP_ID_NOT_FOUND);
                }
                state.check_offset_fetch(&group, member.0.as_deref(), member.1)?;
                let unstable = if require_stable {
                    state.unstable_offsets(&group)
                } else {
                    BTreeSet::new()
                };
                Ok((state.fetch_offsets(&group, partitions), unstable))
            })
            .await?
    }

    /// TxnOffsetCommit: offsets the producer's transaction commits. `offsets`: (topic,
    /// partition, offset, leader epoch, metadata); an error code per offset.
    pub async fn txn_commit(
        &self,
        broker: &Broker,
        group_id: &str,
        committer: TxnCommitter,
        offsets: &[(String, i32, i64, i32, Option<String>)],
    ) -> Vec<i16> {
        let all = |code: i16| vec![code; offsets.len()];
        if group_id.is_empty() {
            return all(error_code::INVALID_GROUP_ID);
        }
        let shard = match self.shard_for(broker, group_id).await {
            Ok(shard) => shard,
            Err(e) => return all(e.code),
        };
        let checked = self.checked_offsets(broker, offsets);
        let group = group_id.to_string();
        shard
            .call(move |state: &mut GroupShard| state.txn_commit(&group, committer, checked))
            .await
            .unwrap_or_else(all)
    }

    /// A transaction marker for the `__consumer_offsets` partition `index` this broker
    /// leads, written by its shard (WriteTxnMarkers): the error code for it.
    pub async fn write_marker(
        &self,
        broker: &Broker,
        index: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> i16 {
        let shard = match self.shard_of(broker, index) {
            Ok(shard) => shard,
            Err(_) => return error_code::NOT_LEADER_OR_FOLLOWER,
        };
        shard
            .call(move |state: &mut GroupShard| {
                state.write_marker(producer_id, producer_epoch, commit, coordinator_epoch)
            })
            .await
            .unwrap_or(error_code::NOT_LEADER_OR_FOLLOWER)
    }

    pub async fn describe(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Option<GroupDescription>, i16> {
        let Some(shard) = self.existing_shard_for(broker, group_id)? else {
            return Ok(None);
        };
        let group = group_id.to_string();
        shard
            .read(move |state: &mut GroupShard| state.describe(&group))
            .await
    }

    /// Every group of every partition this broker coordinates, sorted by id.
    pub async fn list(&self, broker: &Broker) -> Vec<GroupDescription> {
        let mut groups = Vec::new();
        if broker.topic(OFFSETS_TOPIC).is_some() {
            for index in 0..OFFSETS_TOPIC_PARTITIONS {
                let Ok(shard) = self.shard_of(broker, index) else {
                    continue;
                };
                if let Ok(listed) = shard.read(|state: &mut GroupShard| state.list()).await {
                    groups.extend(listed);
                }
            }
        }
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups
    }

    /// DeleteGroups for one group: only an empty group can go.
    pub async fn delete_group(&self, broker: &Broker, group_id: &str) -> i16 {
        let shard = match self.existing_shard_for(broker, group_id) {
            Ok(Some(shard)) => shard,
            Ok(None) => return error_code::GROUP_ID_NOT_FOUND,
            Err(code) => return code,
        };
        let group = group_id.to_string();
        shard
            .call(move |state: &mut GroupShard| state.delete_group(&group))
            .await
            .unwrap_or_else(|code| code)
    }

    /// OffsetDelete: removes committed offsets, except of topics the group's members
    /// are subscribed to. Returns a code per partition, or a group-level error.
    pub async fn delete_offsets(
        &self,
        broker: &Broker,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let shard = self
            .existing_shard_for(broker, group_id)?
            .ok_or(error_code::GROUP_ID_NOT_FOUND)?;
        let group = group_id.to_string();
        let partitions = partitions.to_vec();
        shard
            .call(move |state: &mut GroupShard| state.delete_offsets(&group, partitions))
            .await?
    }

    /// The shard of a heartbeat's group: `empty` (Kafka's code and words, which differ by
    /// protocol) for an empty group id.
    async fn heartbeat_shard(
        &self,
        broker: &Broker,
        group_id: &str,
        empty: (i16, &str),
    ) -> Result<Arc<Shard<GroupShard>>, HeartbeatError> {
        if group_id.is_empty() {
            return Err(HeartbeatError {
                code: empty.0,
                message: empty.1.into(),
            });
        }
        self.shard_for(broker, group_id)
            .await
            .map_err(|e| HeartbeatError {
                code: e.code,
                message: e
                    .message
                    .unwrap_or_else(|| "This is not the correct coordinator.".into()),
            })
    }

    /// ConsumerGroupHeartbeat (KIP-848).
    pub async fn consumer_heartbeat(
        &self,
        broker: &Broker,
        group_id: &str,
        request: Heartbeat,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        let shard = self
            .heartbeat_shard(
                broker,
                group_id,
                (error_code::INVALID_GROUP_ID, "The group id can't be empty."),
            )
            .await?;
        let group = group_id.to_string();
        // The group's own session timeout and heartbeat interval (group configs), if set.
        let overrides = broker.group_configs_of(group_id);
        let limits = (!overrides.is_empty()).then(|| {
            let base = strand_coordinator::group::consumer::ConsumerGroupLimits {
                session_timeout_ms: broker.config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms: broker.config.group_consumer_heartbeat_interval_ms,
                max_size: broker.config.group_max_size,
            };
            crate::group_configs::consumer_limits(base, &overrides)
        });
        shard
            .call(move |state: &mut GroupShard| {
                state.consumer_heartbeat_with(&group, request, limits, now_ms())
            })
            .await
            .map_err(not_coordinator)?
    }

    /// ShareGroupHeartbeat (KIP-932).
    pub async fn share_heartbeat(
        &self,
        broker: &Broker,
        group_id: &str,
        request: ShareHeartbeat,
    ) -> Result<ShareHeartbeatResult, HeartbeatError> {
        let shard = self
            .heartbeat_shard(
                broker,
                group_id,
                (error_code::INVALID_REQUEST, "GroupId can't be empty."),
            )
            .await?;
        let group = group_id.to_string();
        let overrides = broker.group_configs_of(group_id);
        let limits = (!overrides.is_empty()).then(|| {
            let base = ShareGroupLimits {
                session_timeout_ms: broker.config.group_share_session_timeout_ms,
                heartbeat_interval_ms: broker.config.group_share_heartbeat_interval_ms,
                max_size: broker.config.group_share_max_size.max(1) as usize,
            };
            crate::group_configs::share_limits(base, &overrides)
        });
        shard
            .call(move |state: &mut GroupShard| {
                state.share_heartbeat(&group, request, limits, now_ms())
            })
            .await
            .map_err(not_coordinator)?
    }

    /// StreamsGroupHeartbeat (KIP-1071).
    pub async fn streams_heartbeat(
        &self,
        broker: &Broker,
        group_id: &str,
        request: StreamsHeartbeat,
    ) -> Result<StreamsHeartbeatResult, HeartbeatError> {
        let shard = self
            .heartbeat_shard(
                broker,
                group_id,
                (error_code::INVALID_REQUEST, "GroupId can't be empty."),
            )
            .await?;
        let group = group_id.to_string();
        let limits = crate::group_configs::streams_limits(
            crate::group_configs::streams_limits_of(&broker.config),
            &broker.group_configs_of(group_id),
        );
        shard
            .call(move |state: &mut GroupShard| {
                state.streams_heartbeat(&group, request, limits, now_ms())
            })
            .await
            .map_err(not_coordinator)?
    }

    /// StreamsGroupDescribe: the streams group, or the error and message Kafka gives.
    pub async fn describe_streams_group(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<StreamsGroup, (i16, Option<String>)> {
        let not_found = || {
            (
                error_code::GROUP_ID_NOT_FOUND,
                Some(format!("Group {group_id} not found.")),
            )
        };
        self.read_group(broker, group_id, GroupShard::describe_streams_group)
            .await
            .map_err(|code| (code, None))?
            .unwrap_or_else(|| Err(not_found()))
    }

    /// Reads one group's state on its shard; None when `__consumer_offsets` does not
    /// exist yet (reads never create it).
    async fn read_group<R: Send + 'static>(
        &self,
        broker: &Broker,
        group_id: &str,
        read: fn(&GroupShard, &str) -> R,
    ) -> Result<Option<R>, i16> {
        let Some(shard) = self.existing_shard_for(broker, group_id)? else {
            return Ok(None);
        };
        let group = group_id.to_string();
        shard
            .read(move |state: &mut GroupShard| read(state, &group))
            .await
            .map(Some)
    }

    /// A share group's members, epoch and initialized partitions (None: no share group).
    pub async fn share_group_view(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Option<SharePartitionsView>, i16> {
        self.read_group(broker, group_id, GroupShard::share_group_view)
            .await
            .map(Option::flatten)
    }

    /// AlterShareGroupOffsets, the group's side (`GroupShard::share_alter`).
    pub async fn share_alter(
        &self,
        broker: &Broker,
        group_id: &str,
        partitions: BTreeMap<String, BTreeSet<i32>>,
    ) -> Result<i32, i16> {
        let shard = self.shard_for(broker, group_id).await.map_err(|e| e.code)?;
        let group = group_id.to_string();
        shard
            .call(move |state: &mut GroupShard| state.share_alter(&group, partitions))
            .await?
    }

    /// DeleteShareGroupOffsets, the group's side (`GroupShard::share_forget`).
    pub async fn share_forget(
        &self,
        broker: &Broker,
        group_id: &str,
        topics: Vec<String>,
    ) -> Result<ForgottenTopics, i16> {
        let shard = self
            .existing_shard_for(broker, group_id)?
            .ok_or(error_code::GROUP_ID_NOT_FOUND)?;
        let group = group_id.to_string();
        shard
            .call(move |state: &mut GroupShard| state.share_forget(&group, topics))
            .await?
    }

    /// ShareGroupDescribe: the share group, or None if the id is not one.
    pub async fn describe_share_group(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Option<ShareGroup>, i16> {
        self.read_group(broker, group_id, GroupShard::describe_share_group)
            .await
            .map(Option::flatten)
    }

    /// ConsumerGroupDescribe: the consumer group, or None if the id is not one.
    pub async fn describe_consumer_group(
        &self,
        broker: &Broker,
        group_id: &str,
    ) -> Result<Option<ConsumerGroup>, i16> {
        self.read_group(broker, group_id, GroupShard::describe_consumer_group)
            .await
            .map(Option::flatten)
    }

    /// Timers: session and rebalance timeouts, on every running shard. A shard that has
    /// not run its last tick yet (loading, or at its write limit) gets no other, and one
    /// whose queue is full skips this tick: the next one catches up.
    pub fn tick(&self) {
        let slots: Vec<_> = self
            .slots()
            .values()
            .map(|s| (s.shard.clone(), s.tick_queued.clone()))
            .collect();
        for (shard, queued) in slots {
            if queued.swap(true, Ordering::SeqCst) {
                continue;
            }
            let ran = queued.clone();
            let submitted = shard.try_submit(Box::new(move |state: &mut GroupShard| {
                ran.store(false, Ordering::SeqCst);
                let (records, then) = state.tick(now_ms());
                Step::write(records, move |state, written| then(state, written))
            }));
            if !submitted {
                queued.store(false, Ordering::SeqCst);
            }
        }
    }

    /// offsets.retention.minutes, on every running shard at once; returns once each
    /// settled (each write is bounded by offsets.commit.timeout.ms).
    pub async fn expire_offsets(&self) {
        let shards: Vec<_> = self.slots().values().map(|s| s.shard.clone()).collect();
        let mut expiries = tokio::task::JoinSet::new();
        for shard in shards {
            expiries.spawn(async move {
                let _ = shard
                    .call(|state: &mut GroupShard| state.expire_offsets(now_ms()))
                    .await;
            });
        }
        while expiries.join_next().await.is_some() {}
    }
}
