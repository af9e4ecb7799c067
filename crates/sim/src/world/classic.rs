//! Classic consumer group members under the simulation (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup), as Java's consumer runs them with the eager range assignor: a member
//! gives up every partition before it joins, joins without an id first (the coordinator
//! answers MEMBER_ID_REQUIRED with one), and the member the coordinator names leader
//! assigns the partitions in its SyncGroup. The last member is static (KIP-345: a
//! group.instance.id, so a restart takes its place back without a rebalance, and it never
//! sends LeaveGroup). The coordinator is the real `GroupShard` on
//! the `__consumer_offsets` leader, its member ids drawn from the seed
//! (`GroupShard::join_with`). A JoinGroup or SyncGroup the shard parks is held as the
//! broker holds it: until the shard completes it (another member's request, its timer,
//! the group's record settling), its wait runs out (REBALANCE_IN_PROGRESS), or the shard
//! goes away with its leadership (NOT_COORDINATOR). Members crash (their session then
//! expires), close cleanly (LeaveGroup), and come back as new consumers, while
//! coordinators fail over and load the group from their replica.
//!
//! Invariants: a member never receives a partition another member of the group still
//! owns (both members the current coordinator counts, the other's client holding it); a
//! member's assignment is of a generation its coordinator remembers (answered only once
//! the group's record is on every in-sync replica, so no failover forgets it); the
//! static member is never fenced (FENCED_INSTANCE_ID is fatal to a Java consumer, and
//! no other process ever has its instance id here).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rand::Rng;
use strand_broker::error_code;
use strand_broker::group::coordinator::PARKED_REQUEST_SLACK;
use strand_broker::partition::Partition;
use strand_coordinator::group::classic::{JoinRequest, JoinResult, SyncResult};
use strand_coordinator::group::shard::{Answer, GroupShard, SyncRequest};
use strand_log::Clock;
use tokio::sync::oneshot;

use super::hosting::Settled;

type Reply = super::hosting::Reply<GroupShard>;
use super::members::ASSIGNED_PARTITIONS;
use super::{Message, World, CLIENT_BASE, OFFSETS};
use crate::controller::TOPIC;

pub(super) const CLASSIC_GROUP: &str = "sim-classic";
/// The members' network ids start here.
const CLASSIC_BASE: i32 = CLIENT_BASE + 70;
const CLASSIC_MEMBERS: usize = 3;
/// The static member's instance id (the last member's).
const INSTANCE_ID: &str = "classic-static";
/// session.timeout.ms, max.poll.interval.ms (the rebalance timeout) and
/// heartbeat.interval.ms at the simulation's pace.
const SESSION_TIMEOUT_MS: i32 = 3_000;
const REBALANCE_TIMEOUT_MS: i32 = 6_000;
const HEARTBEAT_MS: i64 = 300;
/// A heartbeat unanswered this long is sent again; a JoinGroup or SyncGroup, which the
/// coordinator may hold up to the rebalance timeout, after that and five seconds more
/// (Java's join timeout).
const HEARTBEAT_TIMEOUT_MS: i64 = 1_000;
const JOIN_TIMEOUT_MS: i64 = REBALANCE_TIMEOUT_MS as i64 + 5_000;
const PROTOCOL_TYPE: &str = "consumer";
const PROTOCOL: &str = "range";

#[derive(Debug)]
enum Phase {
    /// To join (again): the next request is a JoinGroup.
    Join,
    /// Joined generation `generation`: the next request is its SyncGroup (the leader's
    /// with everyone's assignment).
    Sync {
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    },
    /// In generation `generation`: heartbeats.
    Stable { generation: i32 },
}

#[derive(Debug)]
pub(super) struct ClassicMember {
    /// Each process a new consumer (a new client id: the coordinator names it anew).
    incarnation: u32,
    /// Empty until the coordinator gave one.
    member_id: String,
    phase: Phase,
    /// The partitions this consumer owns, as its client knows.
    owned: BTreeSet<i32>,
    /// The request in flight: when it went out, and its number.
    outstanding: Option<(i64, u64)>,
    last_sent_ms: i64,
    down: bool,
}

pub(super) fn classic_members() -> Vec<ClassicMember> {
    (0..CLASSIC_MEMBERS)
        .map(|_| ClassicMember {
            incarnation: 0,
            member_id: String::new(),
            phase: Phase::Join,
            owned: BTreeSet::new(),
            outstanding: None,
            last_sent_ms: i64::MIN / 2,
            down: false,
        })
        .collect()
}

/// A parked JoinGroup or SyncGroup: the shard's receiver for its reply, and the id to
/// name in an error.
pub(super) enum ParkedReply {
    Join(oneshot::Receiver<JoinResult>, String),
    Sync(oneshot::Receiver<SyncResult>),
}

/// A request the coordinator on `node` holds for a member, until `deadline_ms`.
pub(super) struct Parked {
    pub(super) node: i32,
    client: i32,
    correlation: u64,
    deadline_ms: i64,
    reply: ParkedReply,
}

/// A ConsumerProtocolSubscription (version 0) to the simulation's topic.
fn subscription() -> Bytes {
    let mut bytes = BytesMut::new();
    bytes.put_i16(0);
    bytes.put_i32(1);
    bytes.put_i16(TOPIC.len() as i16);
    bytes.put_slice(TOPIC.as_bytes());
    bytes.put_i32(-1); // no user data
    bytes.freeze()
}

/// A ConsumerProtocolAssignment (version 0) of `partitions` of the topic.
fn encode_assignment(partitions: &[i32]) -> Bytes {
    let mut bytes = BytesMut::new();
    bytes.put_i16(0);
    bytes.put_i32(1);
    bytes.put_i16(TOPIC.len() as i16);
    bytes.put_slice(TOPIC.as_bytes());
    bytes.put_i32(partitions.len() as i32);
    for &partition in partitions {
        bytes.put_i32(partition);
    }
    bytes.put_i32(-1);
    bytes.freeze()
}

/// The partitions of the topic an assignment gives (none for an empty one, as Java reads
/// an empty assignment).
fn decode_assignment(mut bytes: &[u8]) -> Option<BTreeSet<i32>> {
    let mut owned = BTreeSet::new();
    if bytes.is_empty() {
        return Some(owned);
    }
    let need = |bytes: &[u8], n: usize| (bytes.remaining() >= n).then_some(());
    need(bytes, 6)?;
    let _version = bytes.get_i16();
    for _ in 0..bytes.get_i32() {
        need(bytes, 2)?;
        let length = usize::try_from(bytes.get_i16()).ok()?;
        need(bytes, length + 4)?;
        let topic = bytes[..length].to_vec();
        bytes.advance(length);
        for _ in 0..bytes.get_i32() {
            need(bytes, 4)?;
            let partition = bytes.get_i32();
            if topic == TOPIC.as_bytes() {
                owned.insert(partition);
            }
        }
    }
    Some(owned)
}

/// The range assignor for one topic: the members in order, each a run of partitions,
/// the first ones one more when they do not divide evenly.
fn range_assignment(members: &[String]) -> Vec<(String, Bytes)> {
    let count = members.len() as i32;
    let (each, extra) = (ASSIGNED_PARTITIONS / count, ASSIGNED_PARTITIONS % count);
    let mut next = 0;
    members
        .iter()
        .enumerate()
        .map(|(index, member)| {
            let take = each + i32::from((index as i32) < extra);
            let partitions: Vec<i32> = (next..next + take).collect();
            next += take;
            (member.clone(), encode_assignment(&partitions))
        })
        .collect()
}

/// Member `index`'s group.instance.id, if it is the static one.
fn instance_of(index: usize) -> Option<String> {
    (index == CLASSIC_MEMBERS - 1).then(|| INSTANCE_ID.to_string())
}

impl World {
    /// A member's turn: now and then (if `faults`) its process crashes, closes cleanly or
    /// comes back as a new consumer; otherwise it sends its next request when due.
    pub(super) fn classic_step(&mut self, index: usize, faults: bool) {
        let now = self.now_ms;
        if self.classic[index].down {
            if !faults || self.rng.gen_bool(0.2) {
                let member = &mut self.classic[index];
                member.down = false;
                member.incarnation += 1;
                member.member_id.clear();
                member.phase = Phase::Join;
                self.trace(&("classic member starts", index));
                self.classic_send(index);
            }
            return;
        }
        if faults && self.rng.gen_bool(0.01) {
            // Half the time a crash (its session expires later), half a clean close: a
            // dynamic member leaves the group first (LeaveGroup, not waited for). Its
            // connection closes: requests still on their way are lost.
            let from = CLASSIC_BASE + index as i32;
            self.network.retain(|f| f.from != from);
            let leaves = self.rng.gen_bool(0.5)
                && !self.classic[index].member_id.is_empty()
                && instance_of(index).is_none();
            if leaves {
                let member_id = self.classic[index].member_id.clone();
                self.classic_request(index, Message::LeaveGroup { member_id });
            }
            let member = &mut self.classic[index];
            member.down = true;
            member.owned.clear();
            member.outstanding = None;
            self.trace(&("classic member stops", index, leaves));
            return;
        }
        let member = &self.classic[index];
        let timeout = match member.phase {
            Phase::Stable { .. } => HEARTBEAT_TIMEOUT_MS,
            _ => JOIN_TIMEOUT_MS,
        };
        if let Some((at, _)) = member.outstanding {
            if now - at < timeout {
                return;
            }
            // No answer: a heartbeat is sent again, a join retried, a sync given up for
            // a new join (Java's).
            self.trace(&("classic request timed out", index));
            let member = &mut self.classic[index];
            member.outstanding = None;
            if matches!(member.phase, Phase::Sync { .. }) {
                self.classic_rejoin(index);
            }
        }
        let member = &self.classic[index];
        if matches!(member.phase, Phase::Stable { .. }) {
            if now - member.last_sent_ms < HEARTBEAT_MS {
                return;
            }
            self.check_generation_kept(index);
        }
        self.classic_send(index);
    }

    /// Sends the member's next request: JoinGroup, SyncGroup or a heartbeat.
    fn classic_send(&mut self, index: usize) {
        let member = &self.classic[index];
        if member.down || member.outstanding.is_some() {
            return;
        }
        let member_id = member.member_id.clone();
        let message = match &member.phase {
            Phase::Join => Message::JoinGroup {
                member_id,
                instance_id: instance_of(index),
                client_id: format!("classic-{index}-{}", member.incarnation),
            },
            Phase::Sync {
                generation,
                assignments,
            } => Message::SyncGroup {
                member_id,
                instance_id: instance_of(index),
                generation: *generation,
                assignments: assignments.clone(),
            },
            Phase::Stable { generation } => Message::ClassicHeartbeat {
                member_id,
                instance_id: instance_of(index),
                generation: *generation,
            },
        };
        self.classic_request(index, message);
    }

    /// Sends `message` from member `index` to the coordinator the controller names.
    fn classic_request(&mut self, index: usize, message: Message) {
        let coordinator = self.controller.assignment(OFFSETS).leader;
        if coordinator <= 0 {
            return;
        }
        let correlation = self.next_correlation();
        let leave = matches!(message, Message::LeaveGroup { .. });
        let member = &mut self.classic[index];
        if !leave {
            member.outstanding = Some((self.now_ms, correlation));
            member.last_sent_ms = self.now_ms;
        }
        let from = CLASSIC_BASE + index as i32;
        self.send(from, coordinator, correlation, OFFSETS, message);
    }

    /// Joins again: the eager protocol gives every partition up first.
    fn classic_rejoin(&mut self, index: usize) {
        let member = &mut self.classic[index];
        member.phase = Phase::Join;
        if !member.owned.is_empty() && !self.bugs.classic_keeps_partitions {
            member.owned.clear();
            self.trace(&("classic member revokes", index));
        }
    }

    /// Forgets the member id too (the coordinator does not know it).
    fn classic_reset(&mut self, index: usize) {
        self.classic[index].member_id.clear();
        self.classic_rejoin(index);
    }

    /// Whether an answer is to member `index`'s outstanding request (any other is stale).
    fn classic_answer_expected(&mut self, to: i32, correlation: u64) -> Option<usize> {
        let index = usize::try_from(to - CLASSIC_BASE).ok()?;
        let member = self.classic.get_mut(index)?;
        if member.down || member.outstanding.map(|(_, c)| c) != Some(correlation) {
            return None;
        }
        member.outstanding = None;
        Some(index)
    }

    /// The answer to a JoinGroup.
    pub(super) fn classic_join_answer(&mut self, to: i32, correlation: u64, result: JoinResult) {
        let Some(index) = self.classic_answer_expected(to, correlation) else {
            return;
        };
        self.trace(&(
            "classic joined",
            index,
            result.error_code,
            result.generation_id,
        ));
        match result.error_code {
            error_code::NONE => {
                let member = &mut self.classic[index];
                member.member_id = result.member_id.clone();
                // A returning static leader is told to skip the assignment (JoinGroup v9).
                let assignments = if result.leader == result.member_id && !result.skip_assignment {
                    let ids: Vec<String> = result.members.iter().map(|m| m.0.clone()).collect();
                    range_assignment(&ids)
                } else {
                    Vec::new()
                };
                member.phase = Phase::Sync {
                    generation: result.generation_id,
                    assignments,
                };
            }
            error_code::MEMBER_ID_REQUIRED => {
                self.classic[index].member_id = result.member_id.clone();
            }
            error_code::UNKNOWN_MEMBER_ID => self.classic_reset(index),
            error_code::FENCED_INSTANCE_ID => return self.classic_fenced_instance(index),
            // Rebalancing, or the coordinator moved: join again.
            _ => {}
        }
        self.classic_send(index);
    }

    /// The static member was told another process has its instance id: fatal to a Java
    /// consumer (FencedInstanceIdException), so the process stops (and is started again
    /// later, as an orchestrator would). No other process ever has its instance id here,
    /// so the coordinator did not know the member's id: allowed only if the member got
    /// it in a rebalance that never completed (a failover then loads the group with the
    /// old id, and Kafka 4.4 fences it the same way), never once the member is in a
    /// generation the coordinator has reached.
    fn classic_fenced_instance(&mut self, index: usize) {
        let id = self.classic[index].member_id.clone();
        if let Phase::Stable { generation } = self.classic[index].phase {
            let coordinator = self.controller.assignment(OFFSETS).leader;
            let known = (coordinator > 0)
                .then(|| self.hosted::<GroupShard>(coordinator))
                .flatten()
                .map(|(_, shard)| {
                    shard
                        .classic_group(CLASSIC_GROUP)
                        .map_or(0, |g| g.generation_id)
                });
            if known.is_some_and(|known| known >= generation) {
                self.violation(format!(
                    "static member {id}, in generation {generation}, was fenced (FENCED_INSTANCE_ID) though no other process has its instance id"
                ));
            }
        }
        self.trace(&("static member fenced", index));
        self.outcome.static_fenced += 1;
        let member = &mut self.classic[index];
        member.down = true;
        member.owned.clear();
    }

    /// The SyncGroup answer coordinator `from` sent member `to`.
    pub(super) fn classic_sync_answer(
        &mut self,
        from: i32,
        to: i32,
        correlation: u64,
        result: SyncResult,
    ) {
        let Some(index) = self.classic_answer_expected(to, correlation) else {
            return;
        };
        let Phase::Sync { generation, .. } = self.classic[index].phase else {
            return;
        };
        self.trace(&("classic synced", index, result.error_code, generation));
        match result.error_code {
            error_code::NONE => {
                let Some(target) = decode_assignment(&result.assignment) else {
                    self.violation(format!("an assignment that does not parse: {result:?}"));
                    return;
                };
                let gained: Vec<i32> = target
                    .difference(&self.classic[index].owned)
                    .copied()
                    .collect();
                let member = &mut self.classic[index];
                member.owned = target;
                member.phase = Phase::Stable { generation };
                let owned = member.owned.clone();
                self.trace(&("classic member owns", index, generation, owned));
                self.outcome.classic_assignments += gained.len() as u64;
                for partition in gained {
                    self.check_classic_exclusive(from, index, partition);
                }
                self.check_generation_kept(index);
            }
            error_code::UNKNOWN_MEMBER_ID => self.classic_reset(index),
            error_code::FENCED_INSTANCE_ID => return self.classic_fenced_instance(index),
            // A new generation, or the coordinator moved: join again.
            _ => self.classic_rejoin(index),
        }
        self.classic_send(index);
    }

    /// The answer to a heartbeat.
    pub(super) fn classic_heartbeat_answer(&mut self, to: i32, correlation: u64, code: i16) {
        let Some(index) = self.classic_answer_expected(to, correlation) else {
            return;
        };
        match code {
            error_code::NONE => {}
            error_code::REBALANCE_IN_PROGRESS | error_code::ILLEGAL_GENERATION => {
                self.trace(&("classic member rejoins", index, code));
                self.classic_rejoin(index);
                self.classic_send(index);
            }
            error_code::FENCED_INSTANCE_ID => self.classic_fenced_instance(index),
            error_code::UNKNOWN_MEMBER_ID => {
                self.trace(&("classic member fenced", index));
                self.outcome.classic_fenced += 1;
                self.classic_reset(index);
                self.classic_send(index);
            }
            // The coordinator moved or is loading: heartbeat it again later.
            _ => {}
        }
    }

    /// The coordinator on node `to` handles a classic member's request from `from`.
    pub(super) fn handle_classic(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        message: Message,
    ) {
        let now = self.clocks[self.index(to)].now_ms();
        // A new member's id, drawn from the seed whether or not one is made.
        let suffix: u64 = self.rng.gen();
        let Some((_, shard)) = self.hosted::<GroupShard>(to) else {
            let code = error_code::NOT_COORDINATOR;
            let answer = match message {
                Message::JoinGroup { member_id, .. } => Message::JoinAnswer {
                    result: JoinResult::error(code, &member_id),
                },
                Message::SyncGroup { .. } => Message::SyncAnswer {
                    result: SyncResult::error(code),
                },
                _ => Message::ClassicAnswer { code },
            };
            self.send(to, from, correlation, OFFSETS, answer);
            return;
        };
        let (records, reply): (_, Reply) = match message {
            Message::JoinGroup {
                member_id,
                instance_id,
                client_id,
            } => {
                let request = JoinRequest {
                    member_id: member_id.clone(),
                    group_instance_id: instance_id,
                    client_id,
                    client_host: "/127.0.0.1".to_string(),
                    session_timeout_ms: SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
                    protocol_type: PROTOCOL_TYPE.to_string(),
                    protocols: vec![(PROTOCOL.to_string(), subscription())],
                    require_known_member_id: true,
                };
                // The broker's wait for a parked join: the request's rebalance timeout.
                let limit =
                    Duration::from_millis(REBALANCE_TIMEOUT_MS as u64) + PARKED_REQUEST_SLACK;
                let mut new_id = |client_id: &str| format!("{client_id}-{suffix:016x}");
                let (records, answerer) = shard.join_with(CLASSIC_GROUP, request, now, &mut new_id);
                let reply: Reply = Box::new(move |shard, written| match answerer(shard, written) {
                    Answer::Now(result) => Settled::Answer(from, Message::JoinAnswer { result }),
                    Answer::Wait(receiver) => {
                        let reply = ParkedReply::Join(receiver, member_id);
                        parked(to, from, correlation, limit, reply)
                    }
                });
                (records, reply)
            }
            Message::SyncGroup {
                member_id,
                instance_id,
                generation,
                assignments,
            } => {
                // The broker's wait for a parked sync: the member's rebalance timeout,
                // read before the sync.
                let limit =
                    shard.rebalance_timeout_of(CLASSIC_GROUP, &member_id) + PARKED_REQUEST_SLACK;
                let request = SyncRequest {
                    member_id,
                    group_instance_id: instance_id,
                    generation_id: generation,
                    protocol_type: Some(PROTOCOL_TYPE.to_string()),
                    protocol_name: Some(PROTOCOL.to_string()),
                    assignments,
                };
                let (records, answerer) = shard.sync(CLASSIC_GROUP, request, now);
                let reply: Reply = Box::new(move |shard, written| match answerer(shard, written) {
                    Answer::Now(result) => Settled::Answer(from, Message::SyncAnswer { result }),
                    Answer::Wait(receiver) => {
                        parked(to, from, correlation, limit, ParkedReply::Sync(receiver))
                    }
                });
                (records, reply)
            }
            Message::ClassicHeartbeat {
                member_id,
                instance_id,
                generation,
            } => {
                let (records, answerer) = shard.heartbeat(
                    CLASSIC_GROUP,
                    &member_id,
                    instance_id.as_deref(),
                    generation,
                    now,
                );
                let reply: Reply = Box::new(move |shard, written| {
                    let code = answerer(shard, written);
                    Settled::Answer(from, Message::ClassicAnswer { code })
                });
                (records, reply)
            }
            Message::LeaveGroup { member_id } => {
                let (records, answerer) = shard.leave(CLASSIC_GROUP, vec![(member_id, None)], now);
                let reply: Reply = Box::new(move |shard, written| {
                    let code = match answerer(shard, written) {
                        Ok(codes) => codes.first().copied().unwrap_or(error_code::NONE),
                        Err(code) => code,
                    };
                    Settled::Answer(from, Message::ClassicAnswer { code })
                });
                (records, reply)
            }
            _ => return,
        };
        self.coordinator_write::<GroupShard>(partition, to, correlation, records, reply);
    }

    /// Parked requests the shard completed are answered, those whose wait ran out get
    /// REBALANCE_IN_PROGRESS, and those whose shard is gone NOT_COORDINATOR (as the
    /// broker's `parked` answers them).
    pub(super) fn answer_parked(&mut self) {
        for mut parked in std::mem::take(&mut self.parked) {
            let expired = self.now_ms >= parked.deadline_ms;
            let ended = match &mut parked.reply {
                ParkedReply::Join(receiver, member_id) => {
                    poll_parked(receiver, expired, |code| JoinResult::error(code, member_id))
                        .map(|(result, ending)| (Message::JoinAnswer { result }, ending))
                }
                ParkedReply::Sync(receiver) => poll_parked(receiver, expired, SyncResult::error)
                    .map(|(result, ending)| (Message::SyncAnswer { result }, ending)),
            };
            let Some((answer, ending)) = ended else {
                self.parked.push(parked);
                continue;
            };
            let counter = match ending {
                Ending::Completed => &mut self.outcome.parked_completed,
                Ending::Gone => &mut self.outcome.parked_gone,
                Ending::Expired => &mut self.outcome.parked_expired,
            };
            *counter += 1;
            self.trace(&(
                "parked answered",
                parked.node,
                parked.client,
                parked.correlation,
            ));
            self.send(
                parked.node,
                parked.client,
                parked.correlation,
                OFFSETS,
                answer,
            );
        }
    }

    /// `partition` just went to member `index`: no other member the coordinator that
    /// said so still counts may own it (a deposed one answers until it hears).
    fn check_classic_exclusive(&mut self, coordinator: i32, index: usize, partition: i32) {
        let Some(group) = (coordinator > 0)
            .then(|| self.nodes[self.index(coordinator)].coordinator.as_ref())
            .flatten()
            .and_then(|(_, shard)| shard.classic_group(CLASSIC_GROUP))
        else {
            return;
        };
        let id = &self.classic[index].member_id;
        // An answer outliving its member (removed meanwhile) makes a zombie, as in
        // Kafka: its next heartbeat fences it, and its offset commits are refused.
        if !group.members.contains_key(id) {
            return;
        }
        let holder = self.classic.iter().enumerate().find(|(other, member)| {
            *other != index
                && !member.down
                && member.owned.contains(&partition)
                && group.members.contains_key(&member.member_id)
        });
        if let Some((_, other)) = holder {
            let what = format!(
                "partition {partition} went to {id} while {}, still a member, owns it",
                other.member_id
            );
            self.violation(what);
        }
    }

    /// Member `index` is in a generation: its coordinator, once loaded, must be at that
    /// generation or later (the SyncGroup answer left only once the group's record was on
    /// every in-sync replica, where any new coordinator loads it from).
    fn check_generation_kept(&mut self, index: usize) {
        let Phase::Stable { generation } = self.classic[index].phase else {
            return;
        };
        let coordinator = self.controller.assignment(OFFSETS).leader;
        if coordinator <= 0 {
            return;
        }
        let Some((_, shard)) = self.hosted::<GroupShard>(coordinator) else {
            return;
        };
        let known = shard
            .classic_group(CLASSIC_GROUP)
            .map_or(0, |g| g.generation_id);
        if known < generation {
            let id = self.classic[index].member_id.clone();
            self.violation(format!(
                "{id} is in generation {generation}, a generation the coordinator lost (it is at {known})"
            ));
        }
    }

    /// Liveness, once the faults stopped: every classic member up and in a generation,
    /// every partition of the topic owned by exactly one of them.
    pub(super) fn classic_settled(&self) -> bool {
        let mut owned = BTreeSet::new();
        self.classic.iter().all(|m| {
            !m.down
                && matches!(m.phase, Phase::Stable { .. })
                && m.owned.iter().all(|p| owned.insert(*p))
        }) && owned.len() == ASSIGNED_PARTITIONS as usize
    }

    /// What the classic members own, for a liveness report.
    pub(super) fn classic_state(&self) -> Vec<String> {
        self.classic
            .iter()
            .map(|m| {
                format!(
                    "classic {} {:?} owns {:?}{}",
                    m.member_id,
                    m.phase,
                    m.owned,
                    if m.down { " (down)" } else { "" }
                )
            })
            .collect()
    }
}

/// How a parked reply ended.
enum Ending {
    Completed,
    Gone,
    Expired,
}

/// A parked reply's answer, if it has one (the broker's `parked`): the shard's,
/// NOT_COORDINATOR once the shard is gone, REBALANCE_IN_PROGRESS once its wait ran out.
fn poll_parked<T>(
    receiver: &mut oneshot::Receiver<T>,
    expired: bool,
    error: impl FnOnce(i16) -> T,
) -> Option<(T, Ending)> {
    match receiver.try_recv() {
        Ok(result) => Some((result, Ending::Completed)),
        Err(oneshot::error::TryRecvError::Closed) => {
            Some((error(error_code::NOT_COORDINATOR), Ending::Gone))
        }
        Err(_) if expired => Some((error(error_code::REBALANCE_IN_PROGRESS), Ending::Expired)),
        Err(_) => None,
    }
}

/// A reply the shard parked: held until it completes or its wait (`limit`) runs out.
fn parked(
    node: i32,
    client: i32,
    correlation: u64,
    limit: Duration,
    reply: ParkedReply,
) -> Settled {
    Settled::Then(Box::new(move |world: &mut World| {
        let deadline_ms = world.now_ms + limit.as_millis() as i64;
        world.parked.push(Parked {
            node,
            client,
            correlation,
            deadline_ms,
            reply,
        });
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignments_cover_every_partition_once_and_read_back() {
        let members: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let mut seen = BTreeSet::new();
        for (_, bytes) in range_assignment(&members) {
            for partition in decode_assignment(&bytes).unwrap() {
                assert!(seen.insert(partition), "partition {partition} twice");
            }
        }
        assert_eq!(seen, (0..ASSIGNED_PARTITIONS).collect());
        assert_eq!(decode_assignment(&[]), Some(BTreeSet::new()));
        assert_eq!(decode_assignment(&[0, 0, 0]), None);
    }
}
