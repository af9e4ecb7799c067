//! The group coordinator under the simulation: the leader of the `__consumer_offsets`
//! partition runs Strand's real `GroupShard`, loaded by the broker's own `load` (a replay
//! of its replica) whenever it becomes leader, its writes appended by the broker's own
//! `shard_log::append_write` and answered once on every in-sync replica, as the
//! coordinator runtime answers them. The read_committed consumer belongs to a group: it
//! commits its position (OffsetCommit outside group management, generation -1) and now
//! and then restarts from its committed offset (OffsetFetch), each over the simulated
//! network to the node the controller names leader of the offsets partition.
//!
//! Invariants: an offset fetched is never below the last commit acknowledged (no
//! acknowledged commit lost across coordinator failovers), never one that was not sent
//! (no phantom), and never below one fetched before (a commit once visible stays).

use std::sync::Arc;

use rand::Rng;
use strand_broker::error_code;
use strand_broker::partition::Partition;
use strand_coordinator::group::classic::GroupLimits;
use strand_coordinator::group::consumer::{ConsumerGroupLimits, TopicView};
use strand_coordinator::group::records::CommittedOffset;
use strand_coordinator::group::shard::{Answerer, GroupSettings, GroupShard};
use strand_coordinator::runtime::Records;
use strand_log::Clock;

use super::hosting::{CoordinatorWait, Hosted, Settled};
use super::members::{
    heartbeat_request, streams_request, ASSIGNED_PARTITIONS, MEMBER_GROUP, STREAMS_GROUP,
    STREAMS_LIMITS, SUBTOPOLOGY,
};
use super::{Message, Node, World, CLIENT_BASE, DATA, OFFSETS};
use crate::controller::TOPIC;

/// The consumer's network id, and its group.
pub(super) const GROUP_CLIENT: i32 = CLIENT_BASE + 50;
const GROUP: &str = "sim-group";
/// OffsetCommit's version (generation -1 outside group management is let through).
const COMMIT_VERSION: i16 = 9;
/// A request unanswered this long is sent again (to the coordinator known then).
const GROUP_TIMEOUT_MS: i64 = 1_000;

#[derive(Debug, Clone, Copy)]
pub(super) enum GroupRequest {
    Commit(i64),
    Fetch,
}

#[derive(Debug, Default)]
pub(super) struct GroupClient {
    /// The request in flight: when it last went out and its number (None: to send).
    outstanding: Option<(GroupRequest, Option<(i64, u64)>)>,
    /// The highest commit acknowledged, the highest sent, the highest fetched.
    acked: i64,
    sent_max: i64,
    fetched_max: i64,
}

impl GroupClient {
    pub(super) fn new() -> GroupClient {
        GroupClient {
            outstanding: None,
            acked: -1,
            sent_max: -1,
            fetched_max: -1,
        }
    }

    pub(super) fn idle(&self) -> bool {
        self.outstanding.is_none()
    }
}

type Reply = super::hosting::Reply<GroupShard>;

/// The answer to an offset commit from its error codes.
fn commit_reply(offset: i64, answerer: Answerer<Vec<i16>>) -> Reply {
    Box::new(move |shard, written| {
        let codes = answerer(shard, written);
        let result = match codes.iter().find(|&&c| c != error_code::NONE) {
            Some(&code) => Err(code),
            None => Ok(offset),
        };
        Settled::Answer(GROUP_CLIENT, Message::Answer { result })
    })
}

/// The one topic the simulated group consumes.
struct SimTopics;

impl TopicView for SimTopics {
    fn partitions(&self, topic: &str) -> Option<i32> {
        (topic == TOPIC).then_some(ASSIGNED_PARTITIONS)
    }
    fn names(&self) -> Vec<String> {
        vec![TOPIC.to_string()]
    }
    fn id(&self, topic: &str) -> Option<uuid::Uuid> {
        (topic == TOPIC).then(|| crate::controller::topic_id(DATA))
    }
    fn name_of(&self, id: uuid::Uuid) -> Option<String> {
        (id == crate::controller::topic_id(DATA)).then(|| TOPIC.to_string())
    }
}

/// The group's committed offset in `shard` (OffsetFetch's answer).
fn committed_of(shard: &GroupShard) -> Option<i64> {
    shard
        .fetch_offsets(GROUP, Some(vec![(TOPIC.to_string(), 0)]))
        .first()
        .and_then(|(_, _, o)| o.as_ref().map(|o| o.offset))
}

fn fresh_shard() -> GroupShard {
    let settings = GroupSettings {
        // Sessions and the initial rebalance delay at the simulation's pace.
        classic: GroupLimits {
            min_session_timeout_ms: 1_000,
            initial_rebalance_delay_ms: 500,
            ..GroupLimits::default()
        },
        // Sessions at the simulation's pace.
        consumer: ConsumerGroupLimits {
            session_timeout_ms: 3_000,
            heartbeat_interval_ms: 300,
            ..ConsumerGroupLimits::default()
        },
        share: Default::default(),
        // The broker's streams settings are the ones each heartbeat passes (a group
        // loaded by a new coordinator has them before its first heartbeat).
        streams: STREAMS_LIMITS,
        offsets_retention_ms: 7 * 24 * 3_600_000,
    };
    GroupShard::new(settings, Arc::new(SimTopics))
}

impl Hosted for GroupShard {
    const PARTITION: usize = OFFSETS;
    const WRITE_TIMEOUT_MS: i64 =
        strand_broker::group::coordinator::OFFSETS_COMMIT_TIMEOUT.as_millis() as i64;

    fn load(_: &World, replica: &Partition, _: i32, now: i64) -> (GroupShard, i64) {
        let shard = strand_broker::group::coordinator::load(replica, fresh_shard(), now);
        let committed = committed_of(&shard).unwrap_or(-1);
        (shard, committed)
    }

    fn slot(node: &mut Node) -> &mut Option<(i32, GroupShard)> {
        &mut node.coordinator
    }

    fn waits(world: &mut World) -> &mut Vec<CoordinatorWait<GroupShard>> {
        &mut world.coordinator_waits
    }

    /// Sessions and revocations that expired.
    fn tick(&mut self, now: i64) -> (Records, Reply) {
        let (records, answerer) = GroupShard::tick(self, now);
        let reply: Reply = Box::new(move |shard, written| {
            answerer(shard, written);
            Settled::Nothing
        });
        (records, reply)
    }
}

impl World {
    /// The consumer's turn with its group: a request overdue is sent again; otherwise,
    /// if `new_work`, it commits its position (if it moved past the last commit
    /// acknowledged) or restarts from its committed offset.
    pub(super) fn group_step(&mut self, new_work: bool) {
        let now = self.now_ms;
        if let Some((_, sent)) = &self.group.outstanding {
            if sent.is_none_or(|(at, _)| now - at >= GROUP_TIMEOUT_MS) {
                self.group_send();
            }
            return;
        }
        if !new_work {
            return;
        }
        let position = self.committed_offset;
        let request = if self.rng.gen_bool(0.8) {
            if position <= self.group.acked {
                return;
            }
            GroupRequest::Commit(position)
        } else {
            GroupRequest::Fetch
        };
        self.group.outstanding = Some((request, None));
        self.group_send();
    }

    fn group_send(&mut self) {
        let coordinator = self.controller.assignment(OFFSETS).leader;
        if coordinator <= 0 || self.group.outstanding.is_none() {
            return;
        }
        let correlation = self.next_correlation();
        let Some((request, sent)) = self.group.outstanding.as_mut() else {
            return;
        };
        *sent = Some((self.now_ms, correlation));
        let message = match *request {
            GroupRequest::Commit(offset) => {
                self.group.sent_max = self.group.sent_max.max(offset);
                Message::OffsetCommit { offset }
            }
            GroupRequest::Fetch => Message::OffsetFetch,
        };
        self.send(GROUP_CLIENT, coordinator, correlation, OFFSETS, message);
    }

    /// The coordinator on node `to` handles a request from `from`.
    pub(super) fn handle_group(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        message: Message,
    ) {
        let index = self.index(to);
        let now = self.clocks[index].now_ms();
        if let Message::Heartbeat {
            member_id,
            epoch,
            owned,
            ..
        } = &message
        {
            self.trace(&("heartbeat", to, member_id, epoch, owned, correlation));
        }
        let Some((_, shard)) = self.hosted::<GroupShard>(to) else {
            let answer = match message {
                Message::Heartbeat { .. } => Message::HeartbeatAnswer {
                    result: Err(error_code::NOT_COORDINATOR),
                },
                _ => Message::Answer {
                    result: Err(error_code::NOT_COORDINATOR),
                },
            };
            self.send(to, from, correlation, OFFSETS, answer);
            return;
        };
        let (records, reply) = match message {
            Message::OffsetFetch => {
                let committed = committed_of(shard).unwrap_or(-1);
                self.answer_group(to, correlation, Ok(committed));
                return;
            }
            Message::OffsetCommit { offset } => {
                let committed = CommittedOffset {
                    offset,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp: now,
                };
                let (records, answerer) = shard.commit(
                    COMMIT_VERSION,
                    GROUP,
                    -1,
                    "",
                    None,
                    vec![(TOPIC.to_string(), 0, Ok(committed))],
                );
                (records, commit_reply(offset, answerer))
            }
            Message::Heartbeat {
                member_id,
                epoch,
                owned,
                streams: true,
                instance_id,
            } => {
                let request = streams_request(member_id, epoch, &owned, instance_id);
                let (records, answerer) =
                    shard.streams_heartbeat(STREAMS_GROUP, request, STREAMS_LIMITS, now);
                let reply: Reply = Box::new(move |shard, written| {
                    let result = answerer(shard, written)
                        .map(|r| {
                            let target = r
                                .tasks
                                .map(|t| t.active.get(SUBTOPOLOGY).cloned().unwrap_or_default());
                            (r.member_epoch, target)
                        })
                        .map_err(|e| e.code);
                    Settled::Answer(from, Message::HeartbeatAnswer { result })
                });
                (records, reply)
            }
            Message::Heartbeat {
                member_id,
                epoch,
                owned,
                streams: false,
                instance_id,
            } => {
                let request = heartbeat_request(member_id, epoch, &owned, instance_id);
                let (records, answerer) = shard.consumer_heartbeat(MEMBER_GROUP, request, now);
                let reply: Reply = Box::new(move |shard, written| {
                    let result = answerer(shard, written)
                        .map(|r| {
                            let target = r
                                .assignment
                                .map(|a| a.get(TOPIC).cloned().unwrap_or_default());
                            (r.member_epoch, target)
                        })
                        .map_err(|e| e.code);
                    Settled::Answer(from, Message::HeartbeatAnswer { result })
                });
                (records, reply)
            }
            _ => return,
        };
        self.coordinator_write::<GroupShard>(partition, to, correlation, records, reply);
    }

    fn answer_group(&mut self, from: i32, correlation: u64, result: Result<i64, i16>) {
        self.send(
            from,
            GROUP_CLIENT,
            correlation,
            OFFSETS,
            Message::Answer { result },
        );
    }

    /// The consumer reads the answer to its outstanding request (any other is stale).
    pub(super) fn group_answer(&mut self, correlation: u64, result: Result<i64, i16>) {
        let Some((request, sent)) = self.group.outstanding.as_mut() else {
            return;
        };
        if sent.map(|(_, c)| c) != Some(correlation) {
            return;
        }
        let request = *request;
        match result {
            Err(code) => {
                // NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a timeout, a storage
                // error: the consumer finds the coordinator again and retries.
                *sent = None;
                self.trace(&("group retries", code));
            }
            Ok(offset) => {
                self.group.outstanding = None;
                match request {
                    GroupRequest::Commit(_) => {
                        self.trace(&("commit acked", offset));
                        self.group.acked = self.group.acked.max(offset);
                        self.outcome.commits_acked += 1;
                    }
                    GroupRequest::Fetch => self.fetched(offset),
                }
            }
        }
    }

    /// An OffsetFetch's answer: checked, then the consumer resumes from it.
    fn fetched(&mut self, offset: i64) {
        let group = &self.group;
        if offset < group.acked || offset > group.sent_max || offset < group.fetched_max {
            let (acked, sent, fetched) = (group.acked, group.sent_max, group.fetched_max);
            self.violation(format!(
                "the group's committed offset was fetched as {offset}: acknowledged {acked}, highest sent {sent}, highest fetched before {fetched}"
            ));
        }
        self.group.fetched_max = self.group.fetched_max.max(offset);
        self.outcome.offset_fetches += 1;
        self.trace(&("restart from committed", offset));
        if offset >= 0 {
            self.committed_offset = offset;
        }
    }

    /// At the end: the coordinator, loaded afresh from the settled replica, holds at
    /// least the last commit acknowledged.
    pub(super) fn check_group_final(&mut self) {
        let leader = self.controller.assignment(OFFSETS).leader;
        let Some(replica) = (leader > 0)
            .then(|| self.replica(leader, OFFSETS))
            .flatten()
        else {
            return;
        };
        let shard = strand_broker::group::coordinator::load(&replica, fresh_shard(), self.now_ms);
        let committed = committed_of(&shard).unwrap_or(-1);
        if committed < self.group.acked {
            let acked = self.group.acked;
            self.violation(format!(
                "the final coordinator's committed offset is {committed}, below the commit acknowledged at {acked}"
            ));
        }
    }
}
