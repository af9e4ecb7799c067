//! The groups of one `__consumer_offsets` partition: the state a coordinator shard owns
//! (`runtime::Shard<GroupShard>`), and every group operation as an event on it.
//!
//! Each operation runs in two halves: the event (decide, change the group, say which
//! records to write) and its answer once the write settled (deliver parked replies, apply
//! committed offsets, or undo). So:
//! - committed offsets enter the state only once their write commits; OffsetFetch reads
//!   only committed offsets;
//! - a change to a classic group (its membership and assignment) takes effect at once,
//!   so the next event sees it, but the replies it completes (parked JoinGroup and
//!   SyncGroup requests) leave only after the group's record commits; if that write
//!   fails they are answered with the error and the group rebalances (Kafka's
//!   resetAndPropagateAssignmentError), so the next assignment is written again;
//! - a parked request's waiter is registered in the event itself, so a later event can
//!   complete it even before the earlier write settled.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use strand_types::error_code;
use tokio::sync::oneshot;

use super::classic::{
    ClassicGroup, Completion, GroupLimits, GroupState, JoinRequest, JoinResult, Member,
    MemberIdGenerator, Reply, SyncResult,
};
use super::consumer::{
    ConsumerGroup, ConsumerGroupLimits, ConsumerGroupState, Heartbeat, HeartbeatError,
    HeartbeatResult, TopicView,
};
use super::consumer_records::{self, Loading};
use super::records::{self, CommittedOffset, OffsetsRecord, StoredGroup, StoredMember};
use super::share::{
    SavedShareGroup, ShareGroup, ShareGroupLimits, ShareGroupState, ShareHeartbeat,
    ShareHeartbeatResult,
};
use super::share_records::{self, InitializedTopics, ShareRecord};
use super::streams::{
    StreamsGroup, StreamsGroupLimits, StreamsGroupState, StreamsHeartbeat, StreamsHeartbeatResult,
};
use super::streams_persist::{self, StreamsLoading};
use crate::runtime::Records;

/// offset.metadata.max.bytes
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;
/// Groups one shard holds (a hostile client cannot create them without bound).
pub const GROUPS_MAX: usize = 100_000;

/// The settings every shard of a broker shares.
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings {
    pub classic: GroupLimits,
    pub consumer: ConsumerGroupLimits,
    pub share: ShareGroupLimits,
    pub streams: StreamsGroupLimits,
    /// offsets.retention.minutes, in ms.
    pub offsets_retention_ms: i64,
}

/// A SyncGroup from a member.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    /// v5+: must match the group's, when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment: (member id, assignment).
    pub assignments: Vec<(String, Bytes)>,
}

/// (has members, group epoch, initialized partitions by topic name) of a share group.
pub type SharePartitionsView = (bool, i32, BTreeMap<String, BTreeSet<i32>>);
/// (topic, the partitions it had state for) of a DeleteShareGroupOffsets.
pub type ForgottenTopics = Vec<(String, Option<BTreeSet<i32>>)>;

/// One offset of an OffsetCommit, already checked against the broker's topics by the
/// caller: the offset to store, or the error code to answer for it.
pub type OffsetToCommit = (String, i32, Result<CommittedOffset, i16>);

/// A JoinGroup or SyncGroup's answer: now, or when the rebalance gets there.
#[derive(Debug)]
pub enum Answer<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
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

enum Waiter {
    Join(oneshot::Sender<JoinResult>),
    Sync(oneshot::Sender<SyncResult>),
}

/// Which request commits: OffsetCommit (its version decides an error) or TxnOffsetCommit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitKind {
    Offsets {
        api_version: i16,
    },
    /// TxnOffsetCommit at this version.
    Transactional {
        api_version: i16,
    },
}

impl CommitKind {
    /// Whether the request's version knows KIP-848's errors (OffsetCommit v9+,
    /// TxnOffsetCommit v6+): GROUP_ID_NOT_FOUND for a generation of an unknown group, and
    /// STALE_MEMBER_EPOCH (older TxnOffsetCommits get ILLEGAL_GENERATION instead).
    fn knows_kip848_errors(self) -> bool {
        match self {
            CommitKind::Offsets { api_version } => api_version >= 9,
            CommitKind::Transactional { api_version } => api_version >= 6,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct GroupEntry {
    classic: Option<ClassicGroup>,
    /// A KIP-848 consumer group; a group id is one kind or the other while it has members.
    consumer: Option<ConsumerGroup>,
    /// A KIP-932 share group: while it exists the id is no other kind of group.
    share: Option<ShareGroup>,
    /// A KIP-1071 streams group: while it exists the id is no other kind of group.
    streams: Option<StreamsGroup>,
    /// A write of the streams group's changes failed: the next write is all of it.
    streams_unsaved: bool,
    /// A write of the consumer group's changes failed: the log lags the state, so the
    /// next write is the whole group (consumer_records::changes from nothing).
    consumer_unsaved: bool,
    /// Members of the consumer or streams group whose records the log may hold (loaded,
    /// or written since, and not known tombstoned), with the number of the latest write
    /// issued while they were members (0: loaded): a whole write tombstones those the
    /// group no longer has, or a load would bring them back with what they owned (two
    /// members owning a partition; the simulator found it across a coordinator
    /// failover). A tombstone that settles forgets a member only if no later write
    /// logged it again.
    logged_members: BTreeMap<String, u64>,
    /// Writes of this group's changes issued so far (numbers them).
    writes_issued: u64,
    /// Writes of this group's changes that failed so far: a whole write clears the
    /// unsaved mark only if none failed after it was issued (a later change refused
    /// while it waited for the replicas is not in it; the simulator found one lost so).
    write_failures: u64,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Offsets whose commit is written but not yet settled, with how many commits of
    /// each are: deletes tombstone them too, expiry waits for them (Kafka's pending
    /// offsets), so the log and the state agree however the writes interleave.
    pending: BTreeMap<(String, i32), u32>,
    /// When the group last became empty (offsets expire counting from it).
    empty_since_ms: i64,
    /// Offsets committed inside transactions not yet ended, by producer id: invisible
    /// until the producer's COMMIT marker, dropped by its ABORT (txn_offsets.rs).
    txn_offsets: HashMap<i64, BTreeMap<(String, i32), CommittedOffset>>,
}

impl GroupEntry {
    /// Every offset key the group has, committed or pending.
    fn offset_keys(&self) -> Vec<(String, i32)> {
        let mut keys: Vec<(String, i32)> = self.offsets.keys().cloned().collect();
        keys.extend(
            self.pending
                .keys()
                .filter(|k| !self.offsets.contains_key(*k))
                .cloned(),
        );
        keys
    }

    fn has_members(&self) -> bool {
        self.classic.as_ref().is_some_and(|g| !g.is_empty())
            || self.consumer.as_ref().is_some_and(|g| !g.is_empty())
            || self.share.as_ref().is_some_and(|g| !g.is_empty())
            || self.streams.as_ref().is_some_and(|g| !g.is_empty())
    }
}

/// What a group request answers when its `__consumer_offsets` write failed with `code`:
/// Kafka's mapping, so clients retry where they should (a storage failure on this broker
/// means "find the coordinator again", never a member or generation error).
pub fn coordinator_error_for_append(code: i16) -> i16 {
    match code {
        error_code::NOT_LEADER_OR_FOLLOWER
        | error_code::KAFKA_STORAGE_ERROR
        | error_code::NOT_COORDINATOR => error_code::NOT_COORDINATOR,
        error_code::MESSAGE_TOO_LARGE | error_code::RECORD_LIST_TOO_LARGE => {
            error_code::INVALID_COMMIT_OFFSET_SIZE
        }
        _ => error_code::COORDINATOR_NOT_AVAILABLE,
    }
}

/// Splits offsets to commit into a code per offset and the ones accepted (those whose
/// metadata is too long get OFFSET_METADATA_TOO_LARGE, alone).
fn accept_offsets(offsets: Vec<OffsetToCommit>) -> (Vec<i16>, Vec<(String, i32, CommittedOffset)>) {
    let mut codes = Vec::with_capacity(offsets.len());
    let mut accepted = Vec::new();
    for (topic, partition, offset) in offsets {
        let code = match offset {
            Err(code) => code,
            Ok(offset) if offset.metadata.len() > OFFSET_METADATA_MAX_BYTES => {
                error_code::OFFSET_METADATA_TOO_LARGE
            }
            Ok(offset) => {
                accepted.push((topic, partition, offset));
                error_code::NONE
            }
        };
        codes.push(code);
    }
    (codes, accepted)
}

/// A classic group's change by one request: the group, its (state, generation) before,
/// and the parked requests the change completed.
struct Change<'a> {
    group_id: &'a str,
    before: (GroupState, i32),
    completions: Vec<Completion>,
    now_ms: i64,
}

/// The replies a group change completed, delivered once its record settled.
struct Deliveries {
    group_id: String,
    /// The generation the change produced (a failed write rebalances only that one).
    generation_id: i32,
    completions: Vec<Completion>,
    /// Whether this group's change wrote a record (a tick writes several groups' records
    /// at once; one that wrote nothing is not failed by another's write).
    wrote: bool,
}

pub struct GroupShard {
    /// Ordered, so the records a timer or an expiry writes for several groups come out
    /// in the same order every run (the simulator replays a seed exactly).
    groups: BTreeMap<String, GroupEntry>,
    /// Producer id -> the groups it has transactional offsets pending in.
    open_txns: HashMap<i64, BTreeSet<String>>,
    waiters: HashMap<(String, String), Waiter>,
    settings: GroupSettings,
    topics: Arc<dyn TopicView + Send + Sync>,
    /// Consumer groups' records read so far, during a load (`finish_load` builds them).
    loading: HashMap<String, Loading>,
    /// Share groups' records read so far, during a load: (epoch, initialized topics).
    share_loading: HashMap<String, (Option<i32>, InitializedTopics)>,
    /// Streams groups' records read so far, during a load.
    streams_loading: HashMap<String, StreamsLoading>,
}

impl std::fmt::Debug for GroupShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupShard")
            .field("groups", &self.groups.len())
            .field("waiters", &self.waiters.len())
            .finish()
    }
}

/// What runs once a write settled, with the shard and the write's outcome.
pub type Answerer<R> = Box<dyn FnOnce(&mut GroupShard, Result<(), i16>) -> R + Send>;

/// What a group's write leaves in the shard once it settled.
type Settle = Box<dyn FnOnce(&mut GroupShard, &Result<(), i16>) + Send>;

/// One write of a group's changes, as its settling needs it.
struct GroupWrite {
    /// It is the whole group (the log lagged: a write before it failed).
    whole: bool,
    /// Writes of the group that had failed when it was issued.
    failures_at_issue: u64,
    /// The members it tombstones, and its number.
    gone: Vec<String>,
    number: u64,
}

impl GroupWrite {
    /// A write with nothing of the group's in it (no group of that kind).
    fn none() -> GroupWrite {
        GroupWrite {
            whole: false,
            failures_at_issue: 0,
            gone: Vec::new(),
            number: 0,
        }
    }

    /// Accounts for a write of `entry`'s group taking its members from `before` (None:
    /// the log lags, the write is the whole group) to `after`: the members it tombstones
    /// (gone since `before`, or, whole, every one the log may hold), which it adds to
    /// `records` when whole (a diff already has them), its number, and its members
    /// logged with it.
    fn account<M>(
        entry: &mut GroupEntry,
        before: Option<&BTreeMap<String, M>>,
        after: &BTreeMap<String, M>,
        records: &mut Records,
        removed: impl FnOnce(&[String]) -> Records,
    ) -> GroupWrite {
        let candidates: Vec<&String> = match before {
            Some(before) => before.keys().collect(),
            None => entry.logged_members.keys().collect(),
        };
        let gone: Vec<String> = candidates
            .into_iter()
            .filter(|id| !after.contains_key(*id))
            .cloned()
            .collect();
        if before.is_none() {
            records.extend(removed(&gone));
        }
        entry.writes_issued += 1;
        for id in after.keys() {
            entry.logged_members.insert(id.clone(), entry.writes_issued);
        }
        GroupWrite {
            whole: before.is_none(),
            failures_at_issue: entry.write_failures,
            gone,
            number: entry.writes_issued,
        }
    }

    /// What the write leaves once settled: a failure marks the group unsaved (`flag`;
    /// its next write is all of it); a success forgets the members it tombstoned unless
    /// a later write logged one again, and, whole, clears the mark unless another
    /// write failed after it was issued.
    fn settle(
        self,
        group_id: String,
        flag: fn(&mut GroupEntry) -> &mut bool,
    ) -> impl FnOnce(&mut GroupShard, &Result<(), i16>) + Send + 'static {
        move |shard, written| {
            let Some(entry) = shard.groups.get_mut(&group_id) else {
                return;
            };
            match written {
                Err(_) => {
                    entry.write_failures += 1;
                    *flag(entry) = true;
                }
                Ok(()) => {
                    if self.whole && entry.write_failures == self.failures_at_issue {
                        *flag(entry) = false;
                    }
                    entry.logged_members.retain(|id, logged_by| {
                        !self.gone.contains(id) || *logged_by > self.number
                    });
                }
            }
        }
    }
}

/// An answer that does not depend on a write.
fn answer_now<R: Send + 'static>(reply: R) -> (Records, Answerer<R>) {
    (Vec::new(), Box::new(move |_, _| reply))
}

impl GroupShard {
    pub fn new(settings: GroupSettings, topics: Arc<dyn TopicView + Send + Sync>) -> GroupShard {
        GroupShard {
            groups: BTreeMap::new(),
            open_txns: HashMap::new(),
            waiters: HashMap::new(),
            settings,
            topics,
            loading: HashMap::new(),
            share_loading: HashMap::new(),
            streams_loading: HashMap::new(),
        }
    }

    /// Replays one record of the partition (at load); the latest record for a key wins,
    /// as compaction would keep.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>, now_ms: i64) -> bool {
        let Some(record) = records::decode(key, value) else {
            return false;
        };
        if let OffsetsRecord::Share(record) = record {
            let group = record.group().to_string();
            match record {
                ShareRecord::Metadata { epoch: None, .. } => {
                    self.share_loading.remove(&group);
                }
                ShareRecord::Metadata { epoch, .. } => {
                    self.share_loading.entry(group).or_default().0 = epoch;
                }
                ShareRecord::StatePartitions { initialized, .. } => {
                    self.share_loading.entry(group).or_default().1 =
                        initialized.unwrap_or_default();
                }
            }
            return true;
        }
        if let OffsetsRecord::Streams(record) = record {
            let group = record.group().to_string();
            self.streams_loading.entry(group).or_default().apply(record);
            return true;
        }
        if let OffsetsRecord::Consumer(record) = record {
            let group = record.group().to_string();
            if !self.loading.entry(group.clone()).or_default().apply(record) {
                self.loading.remove(&group);
            }
            return true;
        }
        apply_loaded(&mut self.groups, record, self.settings.classic, now_ms);
        true
    }

    /// The end of a load: the consumer groups rebuilt from their records (members get a
    /// session from now). A group id with a consumer group that has members is that.
    pub fn finish_load(&mut self, now_ms: i64) {
        for (group_id, (epoch, initialized)) in std::mem::take(&mut self.share_loading) {
            let Some(epoch) = epoch else {
                continue;
            };
            let mut by_name: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (id, (name, partitions)) in initialized {
                // A topic deleted since has no share state left to speak of.
                if let Some(name) = self.topics.name_of(id).or(Some(name)) {
                    if self.topics.id(&name) == Some(id) {
                        by_name.entry(name).or_default().extend(partitions);
                    }
                }
            }
            let group = ShareGroup::restored(&group_id, self.settings.share, epoch, by_name);
            let entry = self.groups.entry(group_id).or_default();
            entry.share = Some(group);
            entry.empty_since_ms = now_ms;
        }
        for (group_id, loading) in std::mem::take(&mut self.streams_loading) {
            let Some(group) = loading.finish(&group_id, self.settings.streams, now_ms) else {
                continue;
            };
            let entry = self.groups.entry(group_id).or_default();
            if group.is_empty() {
                entry.empty_since_ms = now_ms;
            }
            entry.classic = None;
            entry.logged_members = group.members.keys().map(|id| (id.clone(), 0)).collect();
            entry.streams = Some(group);
        }
        let limits = self.settings.consumer;
        for (group_id, loading) in std::mem::take(&mut self.loading) {
            let mut group = ConsumerGroup::new(&group_id, limits);
            if !loading.finish(&mut group, now_ms, self.topics.as_ref()) {
                continue;
            }
            let entry = self.groups.entry(group_id).or_default();
            if entry.classic.as_ref().is_some_and(|g| !g.is_empty()) && group.is_empty() {
                continue;
            }
            entry.classic = None;
            if group.is_empty() {
                entry.empty_since_ms = now_ms;
            }
            entry.logged_members = group.members.keys().map(|id| (id.clone(), 0)).collect();
            entry.consumer = Some(group);
        }
    }

    /// The records of a consumer group's change (all of it after a failed write), and
    /// what a failed write leaves: the group marked unsaved.
    fn consumer_write(
        &mut self,
        group_id: &str,
        before: Option<ConsumerGroup>,
    ) -> (
        Records,
        impl FnOnce(&mut GroupShard, &Result<(), i16>) + Send + 'static,
    ) {
        // After a failed write the log lags: write the whole group, tombstone every
        // member the log may still hold that the group no longer has, and say so.
        let flag: fn(&mut GroupEntry) -> &mut bool = |e| &mut e.consumer_unsaved;
        let nothing = || {
            (
                Vec::new(),
                GroupWrite::none().settle(group_id.to_string(), flag),
            )
        };
        let Some(entry) = self.groups.get_mut(group_id) else {
            return nothing();
        };
        let Some(after) = entry.consumer.take() else {
            return nothing();
        };
        let before = before.filter(|_| !entry.consumer_unsaved);
        let mut records = consumer_records::changes(before.as_ref(), &after, self.topics.as_ref());
        let write = GroupWrite::account(
            entry,
            before.as_ref().map(|b| &b.members),
            &after.members,
            &mut records,
            |gone| consumer_records::removed_members(gone, &after),
        );
        entry.consumer = Some(after);
        (records, write.settle(group_id.to_string(), flag))
    }

    fn room_for(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id) || self.groups.len() < GROUPS_MAX
    }

    /// Sends completed replies to their parked requests.
    fn deliver(&mut self, group_id: &str, completions: Vec<Completion>) {
        for completion in completions {
            match completion {
                Completion::Join { member_id, result } => {
                    if let Some(Waiter::Join(sender)) =
                        self.waiters.remove(&(group_id.to_string(), member_id))
                    {
                        let _ = sender.send(result);
                    }
                }
                Completion::Sync { member_id, result } => {
                    if let Some(Waiter::Sync(sender)) =
                        self.waiters.remove(&(group_id.to_string(), member_id))
                    {
                        let _ = sender.send(result);
                    }
                }
            }
        }
    }

    /// Once a group change's record settled: on success its replies go out; on failure
    /// they get the error and the group rebalances, if it is still at that generation.
    fn settle(&mut self, deliveries: Deliveries, written: Result<(), i16>, now_ms: i64) {
        let Deliveries {
            group_id,
            generation_id,
            completions,
            wrote,
        } = deliveries;
        let written = if wrote { written } else { Ok(()) };
        match written {
            Ok(()) => self.deliver(&group_id, completions),
            Err(code) => {
                let code = coordinator_error_for_append(code);
                let failed = completions
                    .into_iter()
                    .map(|completion| match completion {
                        Completion::Join { member_id, .. } => Completion::Join {
                            result: JoinResult::error(code, &member_id),
                            member_id,
                        },
                        Completion::Sync { member_id, .. } => Completion::Sync {
                            member_id,
                            result: SyncResult::error(code),
                        },
                    })
                    .collect();
                self.deliver(&group_id, failed);
                let rebalance = self
                    .groups
                    .get_mut(&group_id)
                    .and_then(|e| e.classic.as_mut())
                    .map(|g| g.write_failed(generation_id, now_ms))
                    .unwrap_or_default();
                self.deliver(&group_id, rebalance);
            }
        }
    }

    /// The group record to write if a change left the classic group Stable or Empty at
    /// a new state or generation.
    fn group_record_if_settled(
        &self,
        group_id: &str,
        before: (GroupState, i32),
        now_ms: i64,
    ) -> Records {
        let Some(group) = self.groups.get(group_id).and_then(|e| e.classic.as_ref()) else {
            return Vec::new();
        };
        let after = (group.state, group.generation_id);
        let settled = matches!(group.state, GroupState::Stable | GroupState::Empty);
        if !settled || after == before {
            return Vec::new();
        }
        vec![(
            records::group_key(group_id),
            Some(records::group_value(&stored(group, now_ms))),
        )]
    }

    /// The replies a change of `group_id` completed, to deliver once `records` (its
    /// group record, if any) settled.
    fn deliveries(
        &self,
        group_id: &str,
        completions: Vec<Completion>,
        records: &Records,
    ) -> Deliveries {
        Deliveries {
            group_id: group_id.to_string(),
            generation_id: self.generation(group_id),
            completions,
            wrote: !records.is_empty(),
        }
    }

    fn generation(&self, group_id: &str) -> i32 {
        self.groups
            .get(group_id)
            .and_then(|e| e.classic.as_ref())
            .map_or(-1, |g| g.generation_id)
    }

    /// Registers a parked request's waiter (replacing an older one of the same member,
    /// whose request then gets REBALANCE_IN_PROGRESS).
    fn park<T>(
        &mut self,
        group_id: &str,
        member_id: String,
        wrap: fn(oneshot::Sender<T>) -> Waiter,
    ) -> oneshot::Receiver<T> {
        let (sender, receiver) = oneshot::channel();
        let replaced = self
            .waiters
            .insert((group_id.to_string(), member_id.clone()), wrap(sender));
        // The member sent a newer request: the older one is told to rejoin, so a dropped
        // reply only ever means the shard stopped (NOT_COORDINATOR).
        match replaced {
            Some(Waiter::Join(older)) => {
                let _ = older.send(JoinResult::error(
                    error_code::REBALANCE_IN_PROGRESS,
                    &member_id,
                ));
            }
            Some(Waiter::Sync(older)) => {
                let _ = older.send(SyncResult::error(error_code::REBALANCE_IN_PROGRESS));
            }
            None => {}
        }
        receiver
    }

    /// Whether the classic group is still at `generation_id` and not rebalancing (a
    /// reply computed from it before an earlier write failed must not go out).
    fn settled_at(&self, group_id: &str, generation_id: i32) -> bool {
        self.groups
            .get(group_id)
            .and_then(|e| e.classic.as_ref())
            .is_some_and(|g| {
                g.generation_id == generation_id && g.state != GroupState::PreparingRebalance
            })
    }

    /// After a JoinGroup or SyncGroup changed its group: the group's record if the change
    /// settled it, the request's own reply (parked or now) and the completed ones, all
    /// sent once that record settled; a reply due now becomes `error(code)` if it failed.
    fn answer_change<T: Send + 'static>(
        &mut self,
        change: Change<'_>,
        reply: Reply<T>,
        waiter: fn(oneshot::Sender<T>) -> Waiter,
        error: impl FnOnce(i16) -> T + Send + 'static,
    ) -> (Records, Answerer<Answer<T>>) {
        let Change {
            group_id,
            before,
            completions,
            now_ms,
        } = change;
        let records = self.group_record_if_settled(group_id, before, now_ms);
        let reply = match reply {
            Reply::Now(result) => Answer::Now(result),
            Reply::Wait { member_id } => Answer::Wait(self.park(group_id, member_id, waiter)),
        };
        let deliveries = self.deliveries(group_id, completions, &records);
        (
            records,
            Box::new(move |shard, written| {
                let failed = written.err().map(coordinator_error_for_append);
                shard.settle(deliveries, written, now_ms);
                match (failed, reply) {
                    (Some(code), Answer::Now(_)) => Answer::Now(error(code)),
                    (_, reply) => reply,
                }
            }),
        )
    }

    /// JoinGroup; a new member's id is its client id and a random UUID (Kafka's).
    pub fn join(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        now_ms: i64,
    ) -> (Records, Answerer<Answer<JoinResult>>) {
        let mut new_id = |client_id: &str| format!("{client_id}-{}", uuid::Uuid::new_v4());
        self.join_with(group_id, request, now_ms, &mut new_id)
    }

    /// JoinGroup, a new member's id made by `new_member_id` (the simulator's come from
    /// its seed: the ids order the members, so they pick the group's leader).
    pub fn join_with(
        &mut self,
        group_id: &str,
        request: JoinRequest,
        now_ms: i64,
        new_member_id: MemberIdGenerator<'_>,
    ) -> (Records, Answerer<Answer<JoinResult>>) {
        let error = |code| Answer::Now(JoinResult::error(code, &request.member_id));
        if !self.room_for(group_id) {
            return answer_now(error(error_code::COORDINATOR_NOT_AVAILABLE));
        }
        let limits = self.settings.classic;
        let entry = self.groups.entry(group_id.to_string()).or_default();
        if entry.consumer.as_ref().is_some_and(|g| !g.is_empty())
            || entry.share.is_some()
            || entry.streams.as_ref().is_some_and(|g| !g.is_empty())
        {
            return answer_now(error(error_code::INCONSISTENT_GROUP_PROTOCOL));
        }
        entry.consumer = None;
        // An empty streams group gives way to the classic one (Kafka deletes it).
        let replaced_streams = entry
            .streams
            .take()
            .map(|g| streams_persist::tombstones(&g));
        let group = entry
            .classic
            .get_or_insert_with(|| ClassicGroup::new(group_id, limits));
        let before = (group.state, group.generation_id);
        let requester = request.member_id.clone();
        // A static member coming back without its member id replaces its old one.
        let replacing = match (&request.group_instance_id, requester.is_empty()) {
            (Some(instance), true) => group
                .static_members
                .get(instance)
                .and_then(|old| group.members.get(old))
                .map(|old| (instance.clone(), old.clone())),
            _ => None,
        };
        let (reply, completions) = group.join(request, now_ms, new_member_id);
        let replaced_in_place = replacing.filter(|(instance, old)| {
            group.static_members.get(instance) != Some(&old.member_id)
                && group.state == GroupState::Stable
        });
        // (A Stable group parks no request, so the replacement completes none; were it
        // to, the general path below delivers them, rather than a panic here.)
        let in_place = replaced_in_place.filter(|_| completions.is_empty());
        if let (Some((instance, old)), Reply::Now(result)) = (in_place, &reply) {
            // Replaced without a rebalance: the group's record (with the new id) is
            // written before the answer leaves, or a new coordinator would fence the
            // restarted member with its old id; if the write fails the replacement is
            // undone (Kafka's updateStaticMemberThenRebalanceOrCompleteJoin).
            let result = result.clone();
            let new_id = result.member_id.clone();
            let mut records = vec![(
                records::group_key(group_id),
                Some(records::group_value(&stored(group, now_ms))),
            )];
            if let Some(tombstones) = replaced_streams {
                records.splice(0..0, tombstones);
            }
            let group_id = group_id.to_string();
            return (
                records,
                Box::new(move |shard, written| match written {
                    Ok(()) => Answer::Now(result),
                    Err(code) => {
                        if let Some(group) = shard
                            .groups
                            .get_mut(&group_id)
                            .and_then(|e| e.classic.as_mut())
                        {
                            group.revert_static_replacement(&instance, &new_id, &old, now_ms);
                        }
                        Answer::Now(JoinResult::error(coordinator_error_for_append(code), ""))
                    }
                }),
            );
        }
        let change = Change {
            group_id,
            before,
            completions,
            now_ms,
        };
        let (mut records, answer) = self.answer_change(change, reply, Waiter::Join, move |code| {
            JoinResult::error(code, &requester)
        });
        if let Some(tombstones) = replaced_streams {
            records.splice(0..0, tombstones);
        }
        (records, answer)
    }

    pub fn sync(
        &mut self,
        group_id: &str,
        request: SyncRequest,
        now_ms: i64,
    ) -> (Records, Answerer<Answer<SyncResult>>) {
        let error = |code| Answer::Now(SyncResult::error(code));
        let Some(group) = self
            .groups
            .get_mut(group_id)
            .and_then(|e| e.classic.as_mut())
        else {
            return answer_now(error(error_code::UNKNOWN_MEMBER_ID));
        };
        // Kafka's order: the member and its generation first, then the protocol, which
        // is inconsistent only if both sides name one (a group that went Empty has none:
        // a member it dropped hears UNKNOWN_MEMBER_ID and rejoins, where
        // INCONSISTENT_GROUP_PROTOCOL would be fatal to a Java consumer).
        if group.state == GroupState::Dead {
            return answer_now(error(error_code::COORDINATOR_NOT_AVAILABLE));
        }
        if let Err(code) = group.check_member(
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
        ) {
            return answer_now(error(code));
        }
        let inconsistent = |asked: &Option<String>, known: &Option<String>| matches!((asked, known), (Some(asked), Some(known)) if asked != known);
        if inconsistent(&request.protocol_type, &group.protocol_type)
            || inconsistent(&request.protocol_name, &group.protocol_name)
        {
            return answer_now(error(error_code::INCONSISTENT_GROUP_PROTOCOL));
        }
        let before = (group.state, group.generation_id);
        let (reply, completions) = group.sync(
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
            request.assignments,
            now_ms,
        );
        let change = Change {
            group_id,
            before,
            completions,
            now_ms,
        };
        let (records, answer) = self.answer_change(change, reply, Waiter::Sync, SyncResult::error);
        let (group, generation_id) = (group_id.to_string(), request.generation_id);
        (
            records,
            Box::new(move |shard, written| match answer(shard, written) {
                // An assignment the group lost meanwhile (an earlier write failed).
                Answer::Now(result)
                    if result.error_code == error_code::NONE
                        && !shard.settled_at(&group, generation_id) =>
                {
                    Answer::Now(SyncResult::error(error_code::REBALANCE_IN_PROGRESS))
                }
                other => other,
            }),
        )
    }

    /// How long a member's parked SyncGroup may wait: its rebalance timeout.
    pub fn rebalance_timeout_of(&self, group_id: &str, member_id: &str) -> std::time::Duration {
        let ms = self
            .groups
            .get(group_id)
            .and_then(|e| e.classic.as_ref())
            .and_then(|g| g.members.get(member_id))
            .map_or(0, |m| m.rebalance_timeout_ms.max(0) as u64);
        std::time::Duration::from_millis(ms)
    }

    /// Heartbeat: answered after the writes before it; a member told all is well whose
    /// group an earlier failed write sent rebalancing hears REBALANCE_IN_PROGRESS.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> (Records, Answerer<i16>) {
        let code = match self
            .groups
            .get_mut(group_id)
            .and_then(|e| e.classic.as_mut())
        {
            Some(group) => group.heartbeat(member_id, group_instance_id, generation_id, now_ms),
            None => error_code::UNKNOWN_MEMBER_ID,
        };
        let group = group_id.to_string();
        (
            Vec::new(),
            Box::new(move |shard, _| {
                if code == error_code::NONE && !shard.settled_at(&group, generation_id) {
                    error_code::REBALANCE_IN_PROGRESS
                } else {
                    code
                }
            }),
        )
    }

    /// LeaveGroup: (member id, instance id) each answered with an error code, or one
    /// error for all.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
        now_ms: i64,
    ) -> (Records, Answerer<Result<Vec<i16>, i16>>) {
        let Some(entry) = self.groups.get_mut(group_id) else {
            return answer_now(Err(error_code::UNKNOWN_MEMBER_ID));
        };
        let Some(group) = entry.classic.as_mut() else {
            return answer_now(Err(error_code::UNKNOWN_MEMBER_ID));
        };
        let before = (group.state, group.generation_id);
        let mut codes = Vec::with_capacity(members.len());
        let mut completions = Vec::new();
        for (member_id, instance) in &members {
            let (code, done) = group.leave(member_id, instance.as_deref(), now_ms);
            codes.push(code);
            completions.extend(done);
        }
        if group.state == GroupState::Empty && before.0 != GroupState::Empty {
            entry.empty_since_ms = now_ms;
        }
        let records = self.group_record_if_settled(group_id, before, now_ms);
        let deliveries = self.deliveries(group_id, completions, &records);
        (
            records,
            Box::new(move |shard, written| {
                let failed = written.err().map(coordinator_error_for_append);
                shard.settle(deliveries, written, now_ms);
                match failed {
                    Some(code) => Err(code),
                    None => Ok(codes),
                }
            }),
        )
    }

    /// OffsetCommit (at `api_version`): an error code per offset.
    #[allow(clippy::too_many_arguments)]
    pub fn commit(
        &mut self,
        api_version: i16,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        offsets: Vec<OffsetToCommit>,
    ) -> (Records, Answerer<Vec<i16>>) {
        let all = |code: i16| vec![code; offsets.len()];
        if group_id.is_empty() {
            return answer_now(all(error_code::INVALID_GROUP_ID));
        }
        if !self.room_for(group_id) {
            return answer_now(all(error_code::COORDINATOR_NOT_AVAILABLE));
        }
        let partitions: Vec<(&str, i32)> =
            offsets.iter().map(|(t, p, _)| (t.as_str(), *p)).collect();
        if let Err(code) = self.may_commit(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            CommitKind::Offsets { api_version },
            &partitions,
        ) {
            return answer_now(all(code));
        }
        let (codes, accepted) = accept_offsets(offsets);
        let records = accepted
            .iter()
            .map(|(topic, partition, value)| {
                (
                    records::offset_key(group_id, topic, *partition),
                    Some(records::offset_value(value)),
                )
            })
            .collect();
        let group_id = group_id.to_string();
        if !accepted.is_empty() {
            let entry = self.groups.entry(group_id.clone()).or_default();
            for (topic, partition, _) in &accepted {
                *entry
                    .pending
                    .entry((topic.clone(), *partition))
                    .or_default() += 1;
            }
        }
        (
            records,
            Box::new(move |shard, written| {
                let entry = shard.groups.entry(group_id).or_default();
                for (topic, partition, value) in accepted {
                    let key = (topic, partition);
                    if let Some(count) = entry.pending.get_mut(&key) {
                        *count -= 1;
                        if *count == 0 {
                            entry.pending.remove(&key);
                        }
                    }
                    if written.is_ok() {
                        entry.offsets.insert(key, value);
                    }
                }
                match written {
                    Ok(()) => codes,
                    Err(code) => {
                        let code = coordinator_error_for_append(code);
                        codes
                            .into_iter()
                            .map(|c| if c == error_code::NONE { code } else { c })
                            .collect()
                    }
                }
            }),
        )
    }

    /// Who may commit, by Kafka's rules (its group coordinator's validateOffsetCommit):
    /// a commit with no generation (-1) is let through while the group has no members,
    /// whatever member id it carries (the admin client, a consumer outside group
    /// management, librdkafka's KIP-848 consumer after leaving); otherwise the member
    /// must be known (UNKNOWN_MEMBER_ID) and speak for the current generation or epoch.
    /// A commit naming neither member nor generation to a group with members is
    /// UNKNOWN_MEMBER_ID, except a transactional one: producers that predate KIP-447
    /// commit without group information. A generation for a group that does not exist
    /// is GROUP_ID_NOT_FOUND from OffsetCommit v9, ILLEGAL_GENERATION before.
    fn may_commit(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        commit: CommitKind,
        partitions: &[(&str, i32)],
    ) -> Result<(), i16> {
        let transactional = matches!(commit, CommitKind::Transactional { .. });
        let anonymous = generation_id < 0 && member_id.is_empty() && group_instance_id.is_none();
        let entry = self.groups.get(group_id);
        // Kafka: "Group {id} is not a consumer group." (a share group keeps its offsets in
        // the share coordinator).
        if entry.is_some_and(|e| e.share.is_some()) {
            return Err(error_code::GROUP_ID_NOT_FOUND);
        }
        if let Some(group) = entry.and_then(|e| e.streams.as_ref()) {
            return may_commit_streams(
                group,
                generation_id,
                member_id,
                anonymous,
                commit,
                partitions,
            );
        }
        match entry.map(|e| (&e.classic, &e.consumer)) {
            None | Some((None, None)) => match commit {
                _ if generation_id < 0 => Ok(()),
                _ if commit.knows_kip848_errors() => Err(error_code::GROUP_ID_NOT_FOUND),
                _ => Err(error_code::ILLEGAL_GENERATION),
            },
            Some((Some(group), _)) => {
                if generation_id < 0 && group.state == GroupState::Empty {
                    return Ok(());
                }
                if anonymous {
                    return if transactional || group.state == GroupState::Empty {
                        Ok(())
                    } else {
                        Err(error_code::UNKNOWN_MEMBER_ID)
                    };
                }
                group.check_member(member_id, group_instance_id, generation_id)?;
                if group.state == GroupState::CompletingRebalance {
                    Err(error_code::REBALANCE_IN_PROGRESS)
                } else {
                    Ok(())
                }
            }
            Some((None, Some(group))) => {
                if generation_id < 0 && group.is_empty() {
                    return Ok(());
                }
                if anonymous && transactional {
                    return Ok(());
                }
                // KIP-848 members commit with OffsetCommit v9+ (Kafka refuses older).
                if let CommitKind::Offsets { api_version } = commit {
                    if api_version < 9 && group.has_member(member_id) {
                        return Err(error_code::UNSUPPORTED_VERSION);
                    }
                }
                // Below TxnOffsetCommit v6 Kafka answers a transactional commit's stale
                // member epoch with ILLEGAL_GENERATION: those producers know that one (an
                // abortable CommitFailedException), not STALE_MEMBER_EPOCH.
                group
                    .check_commit(member_id, generation_id, partitions)
                    .map_err(|code| match code {
                        error_code::STALE_MEMBER_EPOCH
                            if transactional && !commit.knows_kip848_errors() =>
                        {
                            error_code::ILLEGAL_GENERATION
                        }
                        code => code,
                    })
            }
        }
    }

    /// OffsetFetch for one group: (topic, partition, committed offset) for the asked
    /// partitions (or every committed one when `partitions` is None).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let entry = self.groups.get(group_id);
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

    /// Kafka's check of an OffsetFetch (v9+) naming a member of a KIP-848 or streams
    /// group: no member id and a negative epoch is an admin's (or an older client's) and
    /// free; otherwise the member must exist (UNKNOWN_MEMBER_ID) at that very epoch
    /// (STALE_MEMBER_EPOCH). Classic groups and unknown ids are not checked.
    pub fn check_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), i16> {
        if member_id.is_none() && member_epoch < 0 {
            return Ok(());
        }
        let member_id = member_id.unwrap_or_default();
        let Some(entry) = self.groups.get(group_id) else {
            return Ok(());
        };
        let epoch = if let Some(group) = &entry.consumer {
            group.members.get(member_id).map(|m| m.member_epoch)
        } else if let Some(group) = &entry.streams {
            group.members.get(member_id).map(|m| m.member_epoch)
        } else {
            return Ok(());
        };
        match epoch {
            None => Err(error_code::UNKNOWN_MEMBER_ID),
            Some(epoch) if epoch != member_epoch => Err(error_code::STALE_MEMBER_EPOCH),
            Some(_) => Ok(()),
        }
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        self.groups
            .get(group_id)
            .map(|entry| describe_entry(group_id, entry))
    }

    /// The classic group `group_id`, if it is one (its generation and members).
    pub fn classic_group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.groups.get(group_id).and_then(|e| e.classic.as_ref())
    }

    pub fn list(&self) -> Vec<GroupDescription> {
        self.groups
            .iter()
            .map(|(id, entry)| describe_entry(id, entry))
            .collect()
    }

    /// DeleteGroups for one group: only an empty group can go; it goes once its
    /// tombstones commit.
    pub fn delete_group(&mut self, group_id: &str) -> (Records, Answerer<i16>) {
        let Some(entry) = self.groups.get(group_id) else {
            return answer_now(error_code::GROUP_ID_NOT_FOUND);
        };
        if entry.has_members() {
            return answer_now(error_code::NON_EMPTY_GROUP);
        }
        let keys = entry.offset_keys();
        let mut tombstones: Records = keys
            .iter()
            .map(|(topic, partition)| (records::offset_key(group_id, topic, *partition), None))
            .collect();
        tombstones.push((records::group_key(group_id), None));
        // With the members the log may still hold (a failed write's), not only today's.
        if let Some(group) = &entry.consumer {
            tombstones.extend(consumer_records::tombstones(group));
            tombstones.extend(consumer_records::removed_members(
                entry.logged_members.keys(),
                group,
            ));
        }
        if entry.share.is_some() {
            tombstones.push((share_records::metadata_key(group_id), None));
            tombstones.push((share_records::state_partitions_key(group_id), None));
        }
        if let Some(group) = &entry.streams {
            tombstones.extend(streams_persist::tombstones(group));
            tombstones.extend(streams_persist::removed_members(
                entry.logged_members.keys(),
                group,
            ));
        }
        let group_id = group_id.to_string();
        (
            tombstones,
            Box::new(move |shard, written| match written {
                Ok(()) => {
                    // What the tombstones removed goes; a member that joined or an offset
                    // committed meanwhile (written after them) stays.
                    if let Some(entry) = shard.groups.get_mut(&group_id) {
                        for key in &keys {
                            entry.offsets.remove(key);
                        }
                        if let Some(group) = entry.share.as_mut() {
                            // A member joined meanwhile: the group is written afresh.
                            group.mark_unsaved();
                        }
                        if entry.streams.is_some() {
                            entry.streams_unsaved = true;
                        }
                        if !entry.has_members()
                            && entry.offsets.is_empty()
                            && entry.pending.is_empty()
                        {
                            shard.groups.remove(&group_id);
                        }
                    }
                    error_code::NONE
                }
                Err(code) => coordinator_error_for_append(code),
            }),
        )
    }

    /// OffsetDelete: removes committed offsets, except of topics the group's members are
    /// subscribed to. A code per partition, or a group-level error.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> (Records, Answerer<Result<Vec<i16>, i16>>) {
        let Some(entry) = self.groups.get(group_id) else {
            return answer_now(Err(error_code::GROUP_ID_NOT_FOUND));
        };
        let mut subscribed = entry
            .classic
            .as_ref()
            .map(ClassicGroup::subscribed_topics)
            .unwrap_or_default();
        if let Some(group) = &entry.consumer {
            subscribed.extend(group.subscribed_topics(self.topics.as_ref()));
        }
        // A streams group's input topics, while it has members (Kafka's rule).
        if let Some(group) = entry.streams.as_ref().filter(|g| !g.is_empty()) {
            subscribed.extend(group.subscribed_topics());
        }
        let mut codes = Vec::with_capacity(partitions.len());
        let mut removed = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.contains(&topic) {
                codes.push(error_code::GROUP_SUBSCRIBED_TO_TOPIC);
            } else {
                let key = (topic, partition);
                if entry.offsets.contains_key(&key) || entry.pending.contains_key(&key) {
                    removed.push(key);
                }
                codes.push(error_code::NONE);
            }
        }
        let tombstones = removed
            .iter()
            .map(|(topic, partition)| (records::offset_key(group_id, topic, *partition), None))
            .collect();
        let group_id = group_id.to_string();
        (
            tombstones,
            Box::new(move |shard, written| match written {
                Ok(()) => {
                    if let Some(entry) = shard.groups.get_mut(&group_id) {
                        for key in removed {
                            entry.offsets.remove(&key);
                        }
                    }
                    Ok(codes)
                }
                Err(code) => Err(coordinator_error_for_append(code)),
            }),
        )
    }

    /// ConsumerGroupHeartbeat (KIP-848). A group id with classic members is not a
    /// consumer group (Kafka's online migration is not supported).
    pub fn consumer_heartbeat(
        &mut self,
        group_id: &str,
        request: Heartbeat,
        now_ms: i64,
    ) -> (Records, Answerer<Result<HeartbeatResult, HeartbeatError>>) {
        self.consumer_heartbeat_with(group_id, request, None, now_ms)
    }

    /// ConsumerGroupHeartbeat under `limits`, the group's own settings where its group
    /// configs set any (None: the broker's); they apply from this heartbeat on.
    pub fn consumer_heartbeat_with(
        &mut self,
        group_id: &str,
        request: Heartbeat,
        limits: Option<ConsumerGroupLimits>,
        now_ms: i64,
    ) -> (Records, Answerer<Result<HeartbeatResult, HeartbeatError>>) {
        let refuse = |code, message: &str| {
            answer_now(Err(HeartbeatError {
                code,
                message: message.to_string(),
            }))
        };
        if group_id.is_empty() {
            return refuse(error_code::INVALID_GROUP_ID, "The group id can't be empty.");
        }
        if !self.room_for(group_id) {
            return refuse(error_code::COORDINATOR_NOT_AVAILABLE, "too many groups");
        }
        let limits = limits.unwrap_or(self.settings.consumer);
        let topics = self.topics.clone();
        let entry = self.groups.entry(group_id.to_string()).or_default();
        if entry.classic.as_ref().is_some_and(|g| !g.is_empty())
            || entry.share.is_some()
            || entry.streams.is_some()
        {
            return refuse(
                error_code::GROUP_ID_NOT_FOUND,
                &format!("Group {group_id} is not a consumer group."),
            );
        }
        entry.classic = None;
        let before = entry.consumer.clone();
        let group = entry
            .consumer
            .get_or_insert_with(|| ConsumerGroup::new(group_id, limits));
        group.set_limits(limits);
        let was_empty = group.is_empty();
        let mut new_id = || uuid::Uuid::new_v4().to_string();
        let result = group.heartbeat(request, now_ms, topics.as_ref(), &mut new_id);
        if group.is_empty() && !was_empty {
            entry.empty_since_ms = now_ms;
        }
        // Answered once the change is in the log, as Kafka does: a member never acts on
        // an assignment a new coordinator would not know.
        let (records, settle) = self.consumer_write(group_id, before);
        (
            records,
            Box::new(move |shard, written| {
                settle(shard, &written);
                match written {
                    Ok(()) => result,
                    Err(code) => Err(HeartbeatError {
                        code: coordinator_error_for_append(code),
                        message: "The coordinator could not write the group's state.".into(),
                    }),
                }
            }),
        )
    }

    /// ConsumerGroupDescribe: the consumer group, or None if the id is not one.
    pub fn describe_consumer_group(&self, group_id: &str) -> Option<ConsumerGroup> {
        self.groups.get(group_id).and_then(|e| e.consumer.clone())
    }

    /// ShareGroupHeartbeat (KIP-932) under `limits` (the group's own settings where its
    /// group configs set any). A group id that is a classic or consumer group with
    /// members, or holds their committed offsets, is not a share group. The group's
    /// epoch and initialized partitions are written when they change; the answer waits
    /// for that write.
    pub fn share_heartbeat(
        &mut self,
        group_id: &str,
        request: ShareHeartbeat,
        limits: Option<ShareGroupLimits>,
        now_ms: i64,
    ) -> (
        Records,
        Answerer<Result<ShareHeartbeatResult, HeartbeatError>>,
    ) {
        let refuse = |code, message: String| answer_now(Err(HeartbeatError { code, message }));
        if group_id.is_empty() {
            return refuse(
                error_code::INVALID_REQUEST,
                "GroupId can't be empty.".into(),
            );
        }
        if !self.room_for(group_id) {
            return refuse(
                error_code::COORDINATOR_NOT_AVAILABLE,
                "too many groups".into(),
            );
        }
        let limits = limits.unwrap_or(self.settings.share);
        let topics = self.topics.clone();
        let entry = self.groups.entry(group_id.to_string()).or_default();
        if entry.share.is_none()
            && (entry.classic.is_some()
                || entry.consumer.is_some()
                || entry.streams.is_some()
                || !entry.offsets.is_empty()
                || !entry.pending.is_empty())
        {
            let message = format!("Group {group_id} is not a share group.");
            if !entry.has_members()
                && entry.offsets.is_empty()
                && entry.pending.is_empty()
                && entry.streams.is_none()
            {
                // An empty leftover of another kind (no members, no offsets) gives way.
                entry.classic = None;
                entry.consumer = None;
            } else {
                return refuse(error_code::GROUP_ID_NOT_FOUND, message);
            }
        }
        if entry.share.is_none() && request.member_epoch != 0 {
            let message = if request.member_epoch == super::share::LEAVE_EPOCH {
                format!("Group {group_id} not found.")
            } else {
                format!("Share group {group_id} not found.")
            };
            if !entry.has_members() && entry.offsets.is_empty() && entry.pending.is_empty() {
                self.groups.remove(group_id);
            }
            return refuse(error_code::GROUP_ID_NOT_FOUND, message);
        }
        let group = entry
            .share
            .get_or_insert_with(|| ShareGroup::new(group_id, limits));
        group.set_limits(limits);
        let was_empty = group.is_empty();
        let result = group.heartbeat(request, now_ms, topics.as_ref());
        if group.is_empty() && !was_empty {
            entry.empty_since_ms = now_ms;
        }
        let (records, answer) =
            self.write_share_group(group_id, topics.as_ref(), move |_| Ok(result));
        (
            records,
            Box::new(move |shard, written| {
                answer(shard, written).unwrap_or_else(|code| {
                    Err(HeartbeatError {
                        code,
                        message: "The coordinator could not write the group's state.".into(),
                    })
                })
            }),
        )
    }

    /// A share group as its offsets admin sees it: (has members, group epoch,
    /// initialized partitions); None if the id is no share group.
    pub fn share_group_view(&self, group_id: &str) -> Option<SharePartitionsView> {
        self.groups
            .get(group_id)
            .and_then(|e| e.share.as_ref())
            .map(|g| (!g.is_empty(), g.group_epoch, g.initialized.clone()))
    }

    /// AlterShareGroupOffsets, the group's side: the partitions join the group's
    /// initialized ones (the group is created if it does not exist; a group with
    /// members is NON_EMPTY_GROUP, another kind of group GROUP_ID_NOT_FOUND). Answers the
    /// group epoch once written.
    pub fn share_alter(
        &mut self,
        group_id: &str,
        partitions: BTreeMap<String, BTreeSet<i32>>,
    ) -> (Records, Answerer<Result<i32, i16>>) {
        if !self.room_for(group_id) {
            return answer_now(Err(error_code::COORDINATOR_NOT_AVAILABLE));
        }
        let limits = self.settings.share;
        let topics = self.topics.clone();
        let entry = self.groups.entry(group_id.to_string()).or_default();
        if entry.share.is_none()
            && (entry.classic.is_some()
                || entry.consumer.is_some()
                || entry.streams.is_some()
                || !entry.offsets.is_empty())
        {
            return answer_now(Err(error_code::GROUP_ID_NOT_FOUND));
        }
        let group = entry
            .share
            .get_or_insert_with(|| ShareGroup::new(group_id, limits));
        if !group.is_empty() {
            return answer_now(Err(error_code::NON_EMPTY_GROUP));
        }
        for (topic, ids) in partitions {
            group.initialized.entry(topic).or_default().extend(ids);
        }
        let epoch = group.group_epoch;
        self.write_share_group(group_id, topics.as_ref(), move |_| Ok(epoch))
    }

    /// DeleteShareGroupOffsets, the group's side: `topics` leave the group's initialized
    /// partitions; for each, the partitions that had state (None: it had none).
    pub fn share_forget(
        &mut self,
        group_id: &str,
        topics_to_forget: Vec<String>,
    ) -> (Records, Answerer<Result<ForgottenTopics, i16>>) {
        let topics = self.topics.clone();
        let Some(group) = self.groups.get_mut(group_id).and_then(|e| e.share.as_mut()) else {
            return answer_now(Err(error_code::GROUP_ID_NOT_FOUND));
        };
        if !group.is_empty() {
            return answer_now(Err(error_code::NON_EMPTY_GROUP));
        }
        let forgotten: ForgottenTopics = topics_to_forget
            .into_iter()
            .map(|topic| {
                let had = group.initialized.remove(&topic);
                (topic, had)
            })
            .collect();
        self.write_share_group(group_id, topics.as_ref(), move |_| Ok(forgotten))
    }

    /// Writes a share group's epoch and initialized partitions if they changed, and
    /// answers `reply` once written.
    fn write_share_group<R: Send + 'static>(
        &mut self,
        group_id: &str,
        topics: &dyn TopicView,
        reply: impl FnOnce(&mut GroupShard) -> Result<R, i16> + Send + 'static,
    ) -> (Records, Answerer<Result<R, i16>>) {
        let Some(group) = self.groups.get_mut(group_id).and_then(|e| e.share.as_mut()) else {
            return answer_now(Err(error_code::GROUP_ID_NOT_FOUND));
        };
        let (records, saved) = share_write(group_id, group, topics);
        let group_id = group_id.to_string();
        (
            records,
            Box::new(move |shard, written| match written {
                Ok(()) => {
                    if let (Some(saved), Some(group)) = (
                        saved,
                        shard
                            .groups
                            .get_mut(&group_id)
                            .and_then(|e| e.share.as_mut()),
                    ) {
                        group.mark_saved(saved);
                    }
                    reply(shard)
                }
                Err(code) => Err(coordinator_error_for_append(code)),
            }),
        )
    }

    /// Whether `group_id` is a share group (offsets and classic requests refuse it).
    pub fn is_share_group(&self, group_id: &str) -> bool {
        self.groups.get(group_id).is_some_and(|e| e.share.is_some())
    }

    /// ShareGroupDescribe: the share group, or None if the id is not one.
    pub fn describe_share_group(&self, group_id: &str) -> Option<ShareGroup> {
        self.groups.get(group_id).and_then(|e| e.share.clone())
    }

    /// StreamsGroupHeartbeat (KIP-1071) under `limits` (the broker's, with the group's
    /// streams.* configs). A group id that is another kind of group (a classic group
    /// with members, a consumer or share group) is not a streams group; an empty classic
    /// group gives way. Answered once the group's change is written.
    pub fn streams_heartbeat(
        &mut self,
        group_id: &str,
        request: StreamsHeartbeat,
        limits: StreamsGroupLimits,
        now_ms: i64,
    ) -> (
        Records,
        Answerer<Result<StreamsHeartbeatResult, HeartbeatError>>,
    ) {
        let refuse = |code, message: String| answer_now(Err(HeartbeatError { code, message }));
        if !self.room_for(group_id) {
            return refuse(
                error_code::COORDINATOR_NOT_AVAILABLE,
                "too many groups".into(),
            );
        }
        let topics = self.topics.clone();
        let entry = self.groups.entry(group_id.to_string()).or_default();
        if entry.streams.is_none() {
            let other_kind = entry.classic.as_ref().is_some_and(|g| !g.is_empty())
                || entry.consumer.is_some()
                || entry.share.is_some();
            if other_kind {
                return refuse(
                    error_code::GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a streams group."),
                );
            }
            if request.member_epoch != 0 {
                let drop_entry = entry.classic.is_none() && entry.offsets.is_empty();
                if drop_entry && entry.pending.is_empty() {
                    self.groups.remove(group_id);
                }
                return refuse(
                    error_code::GROUP_ID_NOT_FOUND,
                    format!("Streams group {group_id} not found."),
                );
            }
            entry.classic = None;
        }
        let group = entry
            .streams
            .get_or_insert_with(|| StreamsGroup::new(group_id, limits));
        group.set_limits(limits);
        let before = group.clone();
        let was_empty = group.is_empty();
        let result = group.heartbeat(request, now_ms, topics.as_ref());
        if group.is_empty() && !was_empty {
            entry.empty_since_ms = now_ms;
        }
        if result.is_err() && before.group_epoch == 0 && group.group_epoch == 0 {
            // A refused first join leaves no group behind.
            entry.streams = None;
            return answer_now(result);
        }
        let (records, settle) = self.streams_write(group_id, before);
        (
            records,
            Box::new(move |shard, written| {
                settle(shard, &written);
                match written {
                    Ok(()) => result,
                    Err(code) => Err(HeartbeatError {
                        code: coordinator_error_for_append(code),
                        message: "The coordinator could not write the group's state.".into(),
                    }),
                }
            }),
        )
    }

    /// The records of a streams group's change since `before` (all of it after a
    /// failed write), and what a failed write leaves: the group marked unsaved.
    fn streams_write(
        &mut self,
        group_id: &str,
        before: StreamsGroup,
    ) -> (
        Records,
        impl FnOnce(&mut GroupShard, &Result<(), i16>) + Send + 'static,
    ) {
        let flag: fn(&mut GroupEntry) -> &mut bool = |e| &mut e.streams_unsaved;
        let nothing = || {
            (
                Vec::new(),
                GroupWrite::none().settle(group_id.to_string(), flag),
            )
        };
        let Some(entry) = self.groups.get_mut(group_id) else {
            return nothing();
        };
        let Some(after) = entry.streams.take() else {
            return nothing();
        };
        let before = Some(before).filter(|_| !entry.streams_unsaved);
        let mut records = streams_persist::changes(before.as_ref(), &after);
        let write = GroupWrite::account(
            entry,
            before.as_ref().map(|b| &b.members),
            &after.members,
            &mut records,
            |gone| streams_persist::removed_members(gone, &after),
        );
        entry.streams = Some(after);
        (records, write.settle(group_id.to_string(), flag))
    }

    /// StreamsGroupDescribe: the streams group, or Kafka's error and message.
    pub fn describe_streams_group(
        &self,
        group_id: &str,
    ) -> Result<StreamsGroup, (i16, Option<String>)> {
        match self.groups.get(group_id) {
            Some(GroupEntry {
                streams: Some(group),
                ..
            }) => Ok(group.clone()),
            Some(entry)
                if entry.classic.is_some() || entry.consumer.is_some() || entry.share.is_some() =>
            {
                Err((
                    error_code::GROUP_ID_NOT_FOUND,
                    Some(format!("Group {group_id} is not a streams group.")),
                ))
            }
            _ => Err((
                error_code::GROUP_ID_NOT_FOUND,
                Some(format!("Group {group_id} not found.")),
            )),
        }
    }

    /// Share groups' session timeouts (nothing is written: share group membership is
    /// kept in memory, see docs/ARCHITECTURE.md).
    fn tick_share_groups(&mut self, now_ms: i64) {
        let topics = self.topics.clone();
        for entry in self.groups.values_mut() {
            let Some(group) = entry.share.as_mut() else {
                continue;
            };
            if group.next_deadline().is_some_and(|d| d <= now_ms) {
                let was_empty = group.is_empty();
                group.tick(now_ms, topics.as_ref());
                if group.is_empty() && !was_empty {
                    entry.empty_since_ms = now_ms;
                }
            }
        }
    }

    /// Timers: session and rebalance timeouts of every group whose deadline has come.
    pub fn tick(&mut self, now_ms: i64) -> (Records, Answerer<()>) {
        self.tick_share_groups(now_ms);
        let topics = self.topics.clone();
        let mut streams_changes = Vec::new();
        for (group_id, entry) in self.groups.iter_mut() {
            let Some(group) = entry.streams.as_mut() else {
                continue;
            };
            if group.next_deadline().is_some_and(|d| d <= now_ms) {
                let was_empty = group.is_empty();
                let before = group.clone();
                group.tick(now_ms);
                if group.is_empty() && !was_empty {
                    entry.empty_since_ms = now_ms;
                }
                streams_changes.push((group_id.clone(), before));
            }
        }
        let mut consumer_changes = Vec::new();
        for (group_id, entry) in self.groups.iter_mut() {
            let Some(group) = entry.consumer.as_mut() else {
                continue;
            };
            if group.next_deadline().is_some_and(|d| d <= now_ms) {
                let was_empty = group.is_empty();
                let before = group.clone();
                group.tick(now_ms, topics.as_ref());
                if group.is_empty() && !was_empty {
                    entry.empty_since_ms = now_ms;
                }
                consumer_changes.push((group_id.clone(), before));
            }
        }
        let mut records = Vec::new();
        let mut settles: Vec<Settle> = Vec::new();
        for (group_id, before) in consumer_changes {
            let (written, settle) = self.consumer_write(&group_id, Some(before));
            if !written.is_empty() {
                records.extend(written);
                settles.push(Box::new(settle));
            }
        }
        for (group_id, before) in streams_changes {
            let (written, settle) = self.streams_write(&group_id, before);
            if !written.is_empty() {
                records.extend(written);
                settles.push(Box::new(settle));
            }
        }
        let due: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, e)| {
                e.classic
                    .as_ref()
                    .and_then(ClassicGroup::next_deadline)
                    .is_some_and(|d| d <= now_ms)
            })
            .map(|(id, _)| id.clone())
            .collect();
        let mut all = Vec::new();
        for group_id in due {
            let Some(entry) = self.groups.get_mut(&group_id) else {
                continue;
            };
            let Some(group) = entry.classic.as_mut() else {
                continue;
            };
            let before = (group.state, group.generation_id);
            let completions = group.tick(now_ms);
            if group.state == GroupState::Empty && before.0 != GroupState::Empty {
                entry.empty_since_ms = now_ms;
            }
            let record = self.group_record_if_settled(&group_id, before, now_ms);
            all.push(self.deliveries(&group_id, completions, &record));
            records.extend(record);
        }
        (
            records,
            Box::new(move |shard, written| {
                for settle in settles {
                    settle(shard, &written);
                }
                for deliveries in all {
                    shard.settle(deliveries, written, now_ms);
                }
            }),
        )
    }

    /// offsets.retention.minutes: offsets of empty groups expire after the retention
    /// period, counted from the later of the commit and the group becoming empty; a
    /// group with nothing left is removed. Removed once the tombstones commit (an offset
    /// committed again meanwhile stays).
    pub fn expire_offsets(&mut self, now_ms: i64) -> (Records, Answerer<()>) {
        let retention = self.settings.offsets_retention_ms;
        let mut tombstones = Vec::new();
        let mut expired = Vec::new();
        for (group_id, entry) in &self.groups {
            // A commit on its way is the group's latest word: wait for it. A share group
            // has no offsets here and stays until deleted, as on Kafka.
            if entry.has_members() || !entry.pending.is_empty() || entry.share.is_some() {
                continue;
            }
            let empty_since = entry.empty_since_ms;
            let mut left = entry.offsets.len();
            for ((topic, partition), offset) in &entry.offsets {
                if offset.commit_timestamp.max(empty_since) + retention <= now_ms {
                    tombstones.push((records::offset_key(group_id, topic, *partition), None));
                    let key = (topic.clone(), *partition);
                    expired.push((group_id.clone(), Some((key, offset.clone()))));
                    left -= 1;
                }
            }
            if left == 0 {
                tombstones.push((records::group_key(group_id), None));
                if let Some(group) = &entry.consumer {
                    tombstones.extend(consumer_records::tombstones(group));
                    tombstones.extend(consumer_records::removed_members(
                        entry.logged_members.keys(),
                        group,
                    ));
                }
                // An empty streams group goes with its last offset, as on Kafka.
                if let Some(group) = &entry.streams {
                    tombstones.extend(streams_persist::tombstones(group));
                    tombstones.extend(streams_persist::removed_members(
                        entry.logged_members.keys(),
                        group,
                    ));
                }
                expired.push((group_id.clone(), None));
            }
        }
        (
            tombstones,
            Box::new(move |shard, written| {
                if written.is_err() {
                    return;
                }
                // (group, Some(offset)): that offset expired; (group, None): the group.
                for (group_id, offset) in expired {
                    let Some(entry) = shard.groups.get_mut(&group_id) else {
                        continue;
                    };
                    match offset {
                        Some((key, offset)) => {
                            if entry.offsets.get(&key) == Some(&offset) {
                                entry.offsets.remove(&key);
                            }
                        }
                        None => {
                            if entry.offsets.is_empty()
                                && entry.pending.is_empty()
                                && !entry.has_members()
                            {
                                shard.groups.remove(&group_id);
                            }
                        }
                    }
                }
            }),
        )
    }
}

/// Kafka's rules for a commit to a streams group (StreamsGroup.validateOffsetCommit): a
/// reset by the admin (no member, a negative epoch) only while the group is empty; an
/// anonymous transactional commit always; members commit with OffsetCommit v9+, at
/// their epoch, or an older one for the active tasks they had by then.
fn may_commit_streams(
    group: &StreamsGroup,
    generation_id: i32,
    member_id: &str,
    anonymous: bool,
    commit: CommitKind,
    partitions: &[(&str, i32)],
) -> Result<(), i16> {
    if generation_id < 0 && group.is_empty() {
        return Ok(());
    }
    if anonymous && matches!(commit, CommitKind::Transactional { .. }) {
        return Ok(());
    }
    if let CommitKind::Offsets { api_version } = commit {
        if api_version < 9 && group.has_member(member_id) {
            return Err(error_code::UNSUPPORTED_VERSION);
        }
    }
    group.check_commit(member_id, generation_id, partitions)
}

/// The records of a share group's change, if its epoch or initialized partitions moved,
/// and what to mark saved once they commit.
fn share_write(
    group_id: &str,
    group: &mut ShareGroup,
    topics: &dyn TopicView,
) -> (Records, Option<SavedShareGroup>) {
    let Some((epoch, initialized)) = group.unsaved() else {
        return (Vec::new(), None);
    };
    let by_id: InitializedTopics = initialized
        .iter()
        .filter_map(|(name, partitions)| {
            topics
                .id(name)
                .map(|id| (id, (name.clone(), partitions.clone())))
        })
        .collect();
    let records = vec![
        (
            share_records::metadata_key(group_id),
            Some(share_records::metadata_value(epoch)),
        ),
        (
            share_records::state_partitions_key(group_id),
            Some(share_records::state_partitions_value(&by_id)),
        ),
    ];
    (records, Some((epoch, initialized)))
}

fn describe_entry(group_id: &str, entry: &GroupEntry) -> GroupDescription {
    if let Some(group) = &entry.streams {
        let state = match group.state() {
            StreamsGroupState::Empty => GroupState::Empty,
            StreamsGroupState::Stable => GroupState::Stable,
            _ => GroupState::PreparingRebalance,
        };
        return GroupDescription {
            group_id: group_id.to_string(),
            state,
            protocol_type: "streams".into(),
            protocol_name: String::new(),
            members: Vec::new(),
            group_type: "streams",
            state_name: group.state().name(),
        };
    }
    if let Some(group) = &entry.share {
        let state = match group.state() {
            ShareGroupState::Empty => GroupState::Empty,
            ShareGroupState::Stable => GroupState::Stable,
        };
        return GroupDescription {
            group_id: group_id.to_string(),
            state,
            protocol_type: "share".into(),
            protocol_name: String::new(),
            members: Vec::new(),
            group_type: "share",
            state_name: group.state().name(),
        };
    }
    if let Some(group) = &entry.consumer {
        let state = match group.state() {
            ConsumerGroupState::Empty => GroupState::Empty,
            ConsumerGroupState::Assigning | ConsumerGroupState::Reconciling => {
                GroupState::PreparingRebalance
            }
            ConsumerGroupState::Stable => GroupState::Stable,
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
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.client_id.clone(),
                            m.client_host.clone(),
                            subscription(m, &protocol),
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

fn subscription(member: &Member, protocol: &str) -> Bytes {
    member
        .protocols
        .iter()
        .find(|(n, _)| n == protocol)
        .map(|(_, b)| b.clone())
        .unwrap_or_default()
}

fn stored(group: &ClassicGroup, now_ms: i64) -> StoredGroup {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    StoredGroup {
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        generation_id: group.generation_id,
        protocol_name: group.protocol_name.clone(),
        leader: group.leader.clone(),
        state_timestamp: now_ms,
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
                subscription: subscription(m, &protocol),
                assignment: m.assignment.clone(),
            })
            .collect(),
    }
}

/// Applies one loaded record; the latest record for a key wins, as compaction would keep.
fn apply_loaded(
    groups: &mut BTreeMap<String, GroupEntry>,
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
            let entry = groups.entry(group.clone()).or_default();
            match value {
                Some(value) => {
                    entry.offsets.insert((topic, partition), value);
                }
                None => {
                    entry.offsets.remove(&(topic, partition));
                    if entry.offsets.is_empty() && entry.classic.is_none() {
                        groups.remove(&group);
                    }
                }
            }
        }
        OffsetsRecord::Group { group, value: None } => {
            groups.remove(&group);
        }
        // Gathered by GroupShard::replay and built at the end of the load.
        OffsetsRecord::Consumer(_) | OffsetsRecord::Share(_) | OffsetsRecord::Streams(_) => {}
        OffsetsRecord::Group {
            group,
            value: Some(stored),
        } => {
            let entry = groups.entry(group.clone()).or_default();
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
                    Member {
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

mod txn_offsets;

pub use txn_offsets::TxnCommitter;

#[cfg(test)]
mod tests {
    use super::*;

    struct NoTopics;

    impl TopicView for NoTopics {
        fn partitions(&self, _: &str) -> Option<i32> {
            Some(1)
        }
        fn names(&self) -> Vec<String> {
            vec!["t".into()]
        }
        fn id(&self, topic: &str) -> Option<uuid::Uuid> {
            (topic == "t").then_some(uuid::Uuid::from_u128(7))
        }
        fn name_of(&self, id: uuid::Uuid) -> Option<String> {
            (id == uuid::Uuid::from_u128(7)).then(|| "t".to_string())
        }
    }

    pub(super) fn shard() -> GroupShard {
        let settings = GroupSettings {
            classic: GroupLimits {
                initial_rebalance_delay_ms: 0,
                ..GroupLimits::default()
            },
            consumer: ConsumerGroupLimits::default(),
            share: Default::default(),
            streams: Default::default(),
            offsets_retention_ms: 60_000,
        };
        GroupShard::new(settings, Arc::new(NoTopics))
    }

    fn join_request(member_id: &str) -> JoinRequest {
        JoinRequest {
            member_id: member_id.to_string(),
            group_instance_id: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"r"))],
            require_known_member_id: true,
        }
    }

    /// Runs an operation whose write (if any) succeeds.
    fn committed<R>(
        shard: &mut GroupShard,
        op: impl FnOnce(&mut GroupShard) -> (Records, Answerer<R>),
    ) -> R {
        let (_, answer) = op(shard);
        answer(shard, Ok(()))
    }

    fn now<T>(answer: Answer<T>) -> T {
        match answer {
            Answer::Now(result) => result,
            Answer::Wait(_) => panic!("parked"),
        }
    }

    /// A member that joined a new group alone: its id and generation 1.
    fn lone_member(shard: &mut GroupShard) -> String {
        let first = now(committed(shard, |s| shard_join(s, "")));
        let member = first.member_id;
        let joined = now(committed(shard, |s| shard_join(s, &member)));
        assert_eq!((joined.error_code, joined.generation_id), (0, 1));
        member
    }

    fn shard_join(shard: &mut GroupShard, member: &str) -> (Records, Answerer<Answer<JoinResult>>) {
        shard.join("g", join_request(member), 0)
    }

    fn sync(member: &str, generation_id: i32, assignments: Vec<(String, Bytes)>) -> SyncRequest {
        SyncRequest {
            member_id: member.to_string(),
            group_instance_id: None,
            generation_id,
            protocol_type: None,
            protocol_name: None,
            assignments,
        }
    }

    #[test]
    fn a_sync_whose_record_fails_is_answered_with_the_error_and_the_group_rebalances() {
        let mut shard = shard();
        let a = lone_member(&mut shard);
        let assignment = vec![(a.clone(), Bytes::from_static(b"all"))];
        let synced = now(committed(&mut shard, |s| {
            s.sync("g", sync(&a, 1, assignment), 0)
        }));
        assert_eq!(synced.error_code, 0);

        // A second member joins: a rebalance to generation 2, the follower's sync parks.
        let (_, answer) = shard_join(&mut shard, "");
        let b = now(answer(&mut shard, Ok(()))).member_id;
        let (_, answer) = shard_join(&mut shard, &b);
        let Answer::Wait(b_joined) = answer(&mut shard, Ok(())) else {
            panic!("b waits for a to rejoin")
        };
        let a_joined = now(committed(&mut shard, |s| shard_join(s, &a)));
        let b_joined = b_joined.blocking_recv().unwrap();
        assert_eq!((a_joined.generation_id, b_joined.generation_id), (2, 2));
        let (leader, follower) = if a_joined.leader == a { (a, b) } else { (b, a) };
        let (records, answer) = shard.sync("g", sync(&follower, 2, Vec::new()), 0);
        assert!(records.is_empty());
        let Answer::Wait(follower_sync) = answer(&mut shard, Ok(())) else {
            panic!("the follower waits for the leader's assignment")
        };

        // The leader's assignment settles the group: its record fails to commit.
        let assignments = vec![
            (leader.clone(), Bytes::from_static(b"x")),
            (follower.clone(), Bytes::from_static(b"y")),
        ];
        let (records, answer) = shard.sync("g", sync(&leader, 2, assignments), 0);
        assert_eq!(records.len(), 1, "the group's record");
        let leader_sync = now(answer(&mut shard, Err(error_code::KAFKA_STORAGE_ERROR)));
        assert_eq!(leader_sync.error_code, error_code::NOT_COORDINATOR);
        let follower_sync = follower_sync.blocking_recv().unwrap();
        assert_eq!(follower_sync.error_code, error_code::NOT_COORDINATOR);
        assert!(
            follower_sync.assignment.is_empty(),
            "no uncommitted assignment leaks"
        );
        assert_eq!(
            shard.describe("g").unwrap().state,
            GroupState::PreparingRebalance
        );
        assert_eq!(
            committed(&mut shard, |s| s.heartbeat("g", &leader, None, 2, 0)),
            error_code::REBALANCE_IN_PROGRESS,
            "members rejoin, and the next assignment is written again"
        );
    }

    /// Found by the simulator (seed 3820170422): a SyncGroup from a member its group
    /// had dropped (the group Empty, so without a protocol) was answered
    /// INCONSISTENT_GROUP_PROTOCOL, fatal to a Java consumer; Kafka checks the member and
    /// its generation first, and a protocol only against one the group has.
    #[test]
    fn a_sync_checks_the_member_and_generation_before_the_protocol() {
        let mut shard = shard();
        let a = lone_member(&mut shard);
        let with_protocol = |member: &str, generation, name: &str| {
            let mut request = sync(member, generation, Vec::new());
            request.protocol_type = Some("consumer".into());
            request.protocol_name = Some(name.into());
            request
        };
        let answer = |shard: &mut GroupShard, request| {
            now(committed(shard, |s| s.sync("g", request, 0))).error_code
        };
        assert_eq!(
            answer(&mut shard, with_protocol(&a, 0, "range")),
            error_code::ILLEGAL_GENERATION
        );
        assert_eq!(
            answer(&mut shard, with_protocol(&a, 1, "roundrobin")),
            error_code::INCONSISTENT_GROUP_PROTOCOL
        );
        // a leaves: the group is Empty and has no protocol any more.
        let left = committed(&mut shard, |s| s.leave("g", vec![(a.clone(), None)], 0));
        assert_eq!(left, Ok(vec![error_code::NONE]));
        assert_eq!(shard.describe("g").unwrap().state, GroupState::Empty);
        assert_eq!(
            answer(&mut shard, with_protocol(&a, 1, "range")),
            error_code::UNKNOWN_MEMBER_ID
        );
    }

    /// A static member ("i") alone in a Stable group at generation 1, assigned "A": its
    /// member id and the records written on the way.
    fn stable_static_member(shard: &mut GroupShard) -> (String, Records) {
        let mut request = join_request("");
        request.group_instance_id = Some("i".into());
        let (mut written, answer) = shard.join("g", request, 0);
        let joined = now(answer(shard, Ok(())));
        assert_eq!((joined.error_code, joined.generation_id), (0, 1));
        let member = joined.member_id;
        let mut request = sync(&member, 1, vec![(member.clone(), Bytes::from_static(b"A"))]);
        request.group_instance_id = Some("i".into());
        let (records, answer) = shard.sync("g", request, 0);
        assert_eq!(now(answer(shard, Ok(()))).error_code, 0);
        written.extend(records);
        (member, written)
    }

    fn static_rejoin(shard: &mut GroupShard) -> (Records, Answerer<Answer<JoinResult>>) {
        let mut request = join_request("");
        request.group_instance_id = Some("i".into());
        shard.join("g", request, 100)
    }

    /// Found by the simulator (seed 195302035): a static member's restart replaced its
    /// member id without writing the group, so the next coordinator still knew the old id
    /// and fenced the running member (FENCED_INSTANCE_ID, fatal to a Java consumer).
    #[test]
    fn a_static_member_replaced_without_a_rebalance_is_written_before_its_answer() {
        let mut shard = shard();
        let (old, mut written) = stable_static_member(&mut shard);
        let (records, answer) = static_rejoin(&mut shard);
        assert_eq!(records.len(), 1, "the group's record, with the new id");
        written.extend(records);
        let rejoined = now(answer(&mut shard, Ok(())));
        assert_eq!((rejoined.error_code, rejoined.generation_id), (0, 1));
        assert_ne!(rejoined.member_id, old);

        // A new coordinator loads what was written: it knows the new id.
        let mut loaded = super::tests::shard();
        for (key, value) in &written {
            loaded.replay(key, value.as_deref(), 200);
        }
        loaded.finish_load(200);
        let group = loaded.classic_group("g").unwrap();
        assert_eq!(group.static_members["i"], rejoined.member_id);
        assert_eq!(
            committed(&mut loaded, |s| s.heartbeat(
                "g",
                &rejoined.member_id,
                Some("i"),
                1,
                200
            )),
            error_code::NONE
        );
    }

    #[test]
    fn a_static_replacement_whose_record_fails_is_undone() {
        let mut shard = shard();
        let (old, _) = stable_static_member(&mut shard);
        let (_, answer) = static_rejoin(&mut shard);
        let failed = now(answer(&mut shard, Err(error_code::NOT_LEADER_OR_FOLLOWER)));
        assert_eq!(failed.error_code, error_code::NOT_COORDINATOR);
        assert_eq!(shard.classic_group("g").unwrap().static_members["i"], old);
        assert_eq!(
            committed(&mut shard, |s| s.heartbeat("g", &old, Some("i"), 1, 200)),
            error_code::NONE,
            "the old id is the member again, as the record on disk says"
        );
        let group = shard.describe("g").unwrap();
        assert_eq!((group.state, group.members.len()), (GroupState::Stable, 1));
        assert_eq!(&group.members[0].5[..], b"A", "its assignment kept");
    }

    #[test]
    fn parked_replies_leave_only_once_the_record_commits() {
        let mut shard = shard();
        let a = lone_member(&mut shard);
        let (_, answer) = shard_join(&mut shard, "");
        let b = now(answer(&mut shard, Ok(()))).member_id;
        let (_, answer) = shard_join(&mut shard, &b);
        let Answer::Wait(_) = answer(&mut shard, Ok(())) else {
            panic!("b waits")
        };
        let a_joined = now(committed(&mut shard, |s| shard_join(s, &a)));
        let (leader, follower) = if a_joined.leader == a { (a, b) } else { (b, a) };
        let (_, answer) = shard.sync("g", sync(&follower, 2, Vec::new()), 0);
        let Answer::Wait(mut follower_sync) = answer(&mut shard, Ok(())) else {
            panic!("parked")
        };
        let assignments = vec![(follower.clone(), Bytes::from_static(b"y"))];
        let (records, answer) = shard.sync("g", sync(&leader, 2, assignments), 0);
        assert_eq!(records.len(), 1);
        assert!(
            follower_sync.try_recv().is_err(),
            "nothing is delivered before the record settles"
        );
        now(answer(&mut shard, Ok(())));
        let delivered = follower_sync.try_recv().unwrap();
        assert_eq!(
            (delivered.error_code, &delivered.assignment[..]),
            (0, &b"y"[..])
        );
    }

    #[test]
    fn offsets_enter_the_state_only_once_their_write_commits() {
        let mut shard = shard();
        let offset = |value| {
            vec![(
                "t".to_string(),
                0,
                Ok(CommittedOffset {
                    offset: value,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp: 0,
                }),
            )]
        };
        let (records, answer) = shard.commit(9, "simple", -1, "", None, offset(5));
        assert_eq!(records.len(), 1);
        assert_eq!(
            shard.fetch_offsets("simple", None),
            Vec::new(),
            "not yet committed"
        );
        assert_eq!(answer(&mut shard, Ok(())), vec![0]);
        assert_eq!(
            shard.fetch_offsets("simple", None)[0]
                .2
                .as_ref()
                .unwrap()
                .offset,
            5
        );

        let (_, answer) = shard.commit(9, "simple", -1, "", None, offset(9));
        assert_eq!(
            answer(&mut shard, Err(error_code::REQUEST_TIMED_OUT)),
            vec![error_code::COORDINATOR_NOT_AVAILABLE]
        );
        assert_eq!(
            shard.fetch_offsets("simple", None)[0]
                .2
                .as_ref()
                .unwrap()
                .offset,
            5,
            "the failed commit left the committed offset"
        );
    }

    #[test]
    fn a_group_whose_tombstones_fail_is_kept() {
        let mut shard = shard();
        let offset = vec![(
            "t".to_string(),
            0,
            Ok(CommittedOffset {
                offset: 1,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 0,
            }),
        )];
        committed(&mut shard, |s| s.commit(9, "simple", -1, "", None, offset));
        let (tombstones, answer) = shard.delete_group("simple");
        assert_eq!(tombstones.len(), 2, "the offset and the group");
        assert_eq!(
            answer(&mut shard, Err(error_code::NOT_LEADER_OR_FOLLOWER)),
            error_code::NOT_COORDINATOR
        );
        assert!(shard.describe("simple").is_some());
        assert_eq!(committed(&mut shard, |s| s.delete_group("simple")), 0);
        assert!(shard.describe("simple").is_none());
    }

    fn simple_offset(value: i64) -> Vec<OffsetToCommit> {
        vec![(
            "t".to_string(),
            0,
            Ok(CommittedOffset {
                offset: value,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 0,
            }),
        )]
    }

    /// Kafka's OffsetCommit rules for commits from outside the group's generation.
    #[test]
    fn commits_without_a_generation_follow_kafkas_rules() {
        let mut shard = shard();
        let commit = |shard: &mut GroupShard, version, generation, member: &str| {
            committed(shard, |s| {
                s.commit(version, "g", generation, member, None, simple_offset(1))
            })[0]
        };
        // No such group: a generation is GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION
        // before; none is a simple commit.
        assert_eq!(
            commit(&mut shard, 9, 3, "m"),
            error_code::GROUP_ID_NOT_FOUND
        );
        assert_eq!(
            commit(&mut shard, 8, 3, "m"),
            error_code::ILLEGAL_GENERATION
        );
        let mut fresh = self::shard();
        assert_eq!(commit(&mut fresh, 9, -1, "ghost"), error_code::NONE);

        // A group with a member: an admin commit (no member, no generation) is
        // UNKNOWN_MEMBER_ID, as is a stranger's; the member's own commit goes through.
        let member = lone_member(&mut shard);
        assert_eq!(commit(&mut shard, 9, -1, ""), error_code::UNKNOWN_MEMBER_ID);
        assert_eq!(
            commit(&mut shard, 9, -1, "stranger"),
            error_code::UNKNOWN_MEMBER_ID
        );
        assert_eq!(
            commit(&mut shard, 9, 1, &member),
            error_code::REBALANCE_IN_PROGRESS
        );

        // Once the member left, a commit with no generation is accepted whatever member
        // id it names (librdkafka's KIP-848 consumer keeps its id after leaving).
        let left = committed(&mut shard, |s| {
            s.leave("g", vec![(member.clone(), None)], 0)
        });
        assert_eq!(left, Ok(vec![error_code::NONE]));
        assert_eq!(commit(&mut shard, 9, -1, &member), error_code::NONE);
        assert_eq!(commit(&mut shard, 9, -1, "anyone"), error_code::NONE);
        assert_eq!(
            commit(&mut shard, 9, 1, &member),
            error_code::UNKNOWN_MEMBER_ID,
            "a generation still names a member"
        );
    }

    #[test]
    fn expiry_waits_for_a_commit_in_flight() {
        let mut shard = shard();
        committed(&mut shard, |s| {
            s.commit(9, "simple", -1, "", None, simple_offset(1))
        });
        // A new commit is written; before it settles, the old offset expires.
        let (_, commit) = shard.commit(9, "simple", -1, "", None, simple_offset(2));
        let (tombstones, expire) = shard.expire_offsets(i64::MAX / 2);
        assert!(
            tombstones.is_empty(),
            "no tombstone (least of all the group's) while a commit is on its way"
        );
        assert_eq!(commit(&mut shard, Ok(())), vec![0]);
        expire(&mut shard, Ok(()));
        assert_eq!(
            shard.fetch_offsets("simple", None)[0]
                .2
                .as_ref()
                .unwrap()
                .offset,
            2
        );
    }

    #[test]
    fn deleting_a_group_tombstones_its_commits_in_flight_too() {
        let mut shard = shard();
        committed(&mut shard, |s| {
            s.commit(9, "simple", -1, "", None, simple_offset(1))
        });
        let (_, commit) = shard.commit(9, "simple", -1, "", None, {
            let mut offsets = simple_offset(5);
            offsets[0].1 = 1; // a partition not committed before
            offsets
        });
        let (tombstones, delete) = shard.delete_group("simple");
        assert_eq!(tombstones.len(), 3, "both offsets and the group");
        // In log order: the commit, then the tombstones.
        commit(&mut shard, Ok(()));
        assert_eq!(delete(&mut shard, Ok(())), 0);
        assert!(shard.describe("simple").is_none());
        assert!(shard.fetch_offsets("simple", None).is_empty());
    }

    #[test]
    fn a_follower_syncing_after_a_failed_assignment_is_not_given_it() {
        let mut shard = shard();
        let a = lone_member(&mut shard);
        let assignment = vec![(a.clone(), Bytes::from_static(b"all"))];
        committed(&mut shard, |s| s.sync("g", sync(&a, 1, assignment), 0));
        let (_, answer) = shard_join(&mut shard, "");
        let b = now(answer(&mut shard, Ok(()))).member_id;
        let (_, answer) = shard_join(&mut shard, &b);
        let Answer::Wait(_) = answer(&mut shard, Ok(())) else {
            panic!("b waits")
        };
        let a_joined = now(committed(&mut shard, |s| shard_join(s, &a)));
        let (leader, follower) = if a_joined.leader == a { (a, b) } else { (b, a) };
        let assignments = vec![(follower.clone(), Bytes::from_static(b"y"))];
        let (records, leader_answer) = shard.sync("g", sync(&leader, 2, assignments), 0);
        assert_eq!(records.len(), 1);
        // The follower syncs before the leader's record settled: the group looks Stable.
        let (none, follower_answer) = shard.sync("g", sync(&follower, 2, Vec::new()), 0);
        assert!(none.is_empty());
        // The record fails; the follower's answer, after it, must not carry the assignment.
        now(leader_answer(
            &mut shard,
            Err(error_code::REQUEST_TIMED_OUT),
        ));
        let late = now(follower_answer(&mut shard, Ok(())));
        assert_eq!(late.error_code, error_code::REBALANCE_IN_PROGRESS);
        assert!(late.assignment.is_empty());
    }

    #[test]
    fn an_offset_fetch_naming_a_member_is_checked_as_kafka_does() {
        let mut shard = shard();
        let (_, answer) = shard.consumer_heartbeat("g", consumer_join("m"), 0);
        let epoch = answer(&mut shard, Ok(())).unwrap().member_epoch;
        assert_eq!(shard.check_offset_fetch("g", Some("m"), epoch), Ok(()));
        assert_eq!(
            shard.check_offset_fetch("g", Some("m"), epoch + 1),
            Err(error_code::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            shard.check_offset_fetch("g", Some("x"), epoch),
            Err(error_code::UNKNOWN_MEMBER_ID)
        );
        // An admin's fetch (no member, -1), and groups without members to check.
        assert_eq!(shard.check_offset_fetch("g", None, -1), Ok(()));
        assert_eq!(shard.check_offset_fetch("nope", Some("m"), 3), Ok(()));
    }

    fn consumer_join(member_id: &str) -> Heartbeat {
        Heartbeat {
            member_id: member_id.into(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(vec!["t".into()]),
            subscribed_regex: None,
            server_assignor: None,
            owned: Some(Default::default()),
        }
    }

    fn load(log: &Records) -> GroupShard {
        let mut loaded = super::tests::shard();
        for (key, value) in log {
            assert!(loaded.replay(key, value.as_deref(), 1_000));
        }
        loaded.finish_load(1_000);
        loaded
    }

    /// A shard where m and n joined (their records written), and its log.
    fn m_and_n_joined() -> (GroupShard, Records) {
        let mut shard = shard();
        let mut log: Records = Vec::new();
        for (member, at) in [("m", 0), ("n", 10)] {
            let (written, answer) = shard.consumer_heartbeat("g", consumer_join(member), at);
            log.extend(written);
            answer(&mut shard, Ok(())).unwrap();
        }
        (shard, log)
    }

    /// `member`'s heartbeat at its epoch, nothing changed.
    fn steady_beat(shard: &GroupShard, member: &str) -> Heartbeat {
        Heartbeat {
            member_epoch: shard.describe_consumer_group("g").unwrap().members[member].member_epoch,
            subscribed_topics: None,
            owned: None,
            ..consumer_join(member)
        }
    }

    fn leave(member_id: &str) -> Heartbeat {
        Heartbeat {
            member_epoch: super::super::consumer::LEAVE_EPOCH,
            subscribed_topics: None,
            owned: None,
            ..consumer_join(member_id)
        }
    }

    /// Found by the simulator across a coordinator failover: a member removed by a
    /// change whose write failed was never tombstoned (the whole write that made the
    /// log good again wrote only the members left), so a reload brought it back with
    /// what it owned: two members owning one partition.
    #[test]
    fn a_member_removed_while_the_log_lagged_stays_removed_after_a_reload() {
        let (mut shard, mut log) = m_and_n_joined();
        // n leaves; that write fails.
        let (_lost, answer) = shard.consumer_heartbeat("g", leave("n"), 20);
        let _ = answer(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS));
        assert!(!shard
            .describe_consumer_group("g")
            .unwrap()
            .members
            .contains_key("n"));
        // m's next heartbeat writes the whole group, n's tombstones with it.
        let (written, answer) = shard.consumer_heartbeat("g", steady_beat(&shard, "m"), 30);
        log.extend(written);
        answer(&mut shard, Ok(())).unwrap();
        let loaded = load(&log);
        let members = loaded.describe_consumer_group("g").unwrap().members;
        assert!(members.contains_key("m"));
        assert!(!members.contains_key("n"), "n came back from the log");
    }

    /// Review of the fix above, with writes in flight: n leaves (W1), rejoins under its
    /// id (W2) and leaves again (W3); W1 and W2 commit, W3 fails. W1's settling must not
    /// forget n (W2 logged it again), or the whole write after W3 would not tombstone it.
    #[test]
    fn a_member_logged_again_by_a_later_write_is_not_forgotten_by_an_earlier_tombstone() {
        let (mut shard, mut log) = m_and_n_joined();
        let (w1, a1) = shard.consumer_heartbeat("g", leave("n"), 20);
        let (w2, a2) = shard.consumer_heartbeat("g", consumer_join("n"), 30);
        let (_w3, a3) = shard.consumer_heartbeat("g", leave("n"), 40);
        log.extend(w1);
        log.extend(w2);
        a1(&mut shard, Ok(())).unwrap();
        a2(&mut shard, Ok(())).unwrap();
        let _ = a3(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS));
        let (written, answer) = shard.consumer_heartbeat("g", steady_beat(&shard, "m"), 50);
        log.extend(written);
        answer(&mut shard, Ok(())).unwrap();
        let members = load(&log).describe_consumer_group("g").unwrap().members;
        assert!(!members.contains_key("n"), "n came back from the log");
    }

    /// Found by the simulator: a whole write still waiting for the replicas when a
    /// later change's write failed cleared the unsaved mark as it settled, so the
    /// failed change never reached the log (a member answered an assignment no reload
    /// knew of).
    #[test]
    fn a_failure_after_a_whole_write_was_issued_keeps_the_group_unsaved() {
        let mut shard = shard();
        let (_, answer) = shard.consumer_heartbeat("g", consumer_join("m"), 0);
        answer(&mut shard, Ok(())).unwrap();
        let (_, answer) = shard.consumer_heartbeat("g", consumer_join("n"), 10);
        let _ = answer(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS));
        // A whole write goes out (n's retry) and waits for the replicas...
        let (whole, whole_settled) = shard.consumer_heartbeat("g", consumer_join("n"), 20);
        assert!(whole.len() >= 5);
        // ...while o's join is refused at once...
        let (_, refused) = shard.consumer_heartbeat("g", consumer_join("o"), 30);
        let _ = refused(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS));
        // ...and then the whole write settles: o's join is still not in the log.
        whole_settled(&mut shard, Ok(())).unwrap();
        let (again, _) = shard.consumer_heartbeat("g", consumer_join("o"), 40);
        assert!(
            again.len() >= 5,
            "the next write is the whole group again: {} records",
            again.len()
        );
    }

    #[test]
    fn a_consumer_group_survives_a_reload_and_a_failed_write_is_made_good() {
        let mut shard = shard();
        let mut log: Records = Vec::new();
        let (written, answer) = shard.consumer_heartbeat("g", consumer_join("m"), 0);
        log.extend(written);
        let m = answer(&mut shard, Ok(())).unwrap();
        assert_eq!(m.member_epoch, 1);

        // n's join is not written: n is told to retry, the group is marked unsaved.
        let (_lost, answer) = shard.consumer_heartbeat("g", consumer_join("n"), 10);
        let refused = answer(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS)).unwrap_err();
        assert_eq!(
            refused.code,
            coordinator_error_for_append(error_code::NOT_ENOUGH_REPLICAS)
        );
        // n's retry changes nothing in memory, yet writes the whole group.
        let (written, answer) = shard.consumer_heartbeat("g", consumer_join("n"), 20);
        assert!(
            written.len() >= 5,
            "the whole group: {} records",
            written.len()
        );
        log.extend(written);
        let n = answer(&mut shard, Ok(())).unwrap();

        // A new coordinator loads the log: same members, epochs and assignments.
        let mut loaded = super::tests::shard();
        for (key, value) in &log {
            assert!(loaded.replay(key, value.as_deref(), 1_000));
        }
        loaded.finish_load(1_000);
        let before = shard.describe_consumer_group("g").unwrap();
        let after = loaded.describe_consumer_group("g").unwrap();
        assert_eq!(after.group_epoch, before.group_epoch);
        assert_eq!(after.assignment_epoch, before.assignment_epoch);
        for (id, member) in &before.members {
            let other = &after.members[id];
            assert_eq!(
                (other.member_epoch, &other.assigned),
                (member.member_epoch, &member.assigned)
            );
        }
        // m heartbeats the new coordinator with its epoch and is not fenced.
        let mut again = consumer_join("m");
        again.member_epoch = m.member_epoch;
        again.subscribed_topics = None;
        again.owned = before.members["m"].assigned.clone().into();
        let (_, answer) = loaded.consumer_heartbeat("g", again, 1_100);
        let answered = answer(&mut loaded, Ok(())).expect("m keeps its membership");
        assert!(answered.member_epoch >= m.member_epoch);
        assert!(n.member_epoch > 0);
    }
}
