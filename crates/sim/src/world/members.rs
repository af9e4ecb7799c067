//! Group membership by heartbeat under the simulation: three consumers heartbeat
//! (ConsumerGroupHeartbeat, KIP-848) to the group coordinator, the real `GroupShard` on
//! the `__consumer_offsets` leader, which assigns the data topic's partitions with its own
//! assignor and moves members incrementally (a partition goes to a member only once no
//! other member holds it); three Kafka Streams instances do the same in a streams group
//! (StreamsGroupHeartbeat, KIP-1071: a one-subtopology topology reading the topic, so one
//! active task per partition, assigned by the sticky assignor and moved revoke-first).
//! Members crash (their session then expires: the coordinator's own `tick`), come back as
//! new processes, are fenced and rejoin, while coordinators fail over and load the groups
//! from their replica.
//!
//! Invariant: a member never receives a partition (a task) another member of its group
//! still owns (both members the current coordinator counts, the other's client holding
//! it): what both incremental protocols promise, across coordinator failovers included.
//! (A member whose answer outlived it, expired while the answer's write waited for the
//! replicas, is a zombie until its next heartbeat fences it, in Kafka too.)

use std::collections::BTreeSet;

use rand::Rng;
use strand_broker::error_code;
use strand_coordinator::group::consumer::{Assignment, Heartbeat, LEAVE_EPOCH, STATIC_LEAVE_EPOCH};
use strand_coordinator::group::streams::{StreamsGroupLimits, StreamsHeartbeat, Tasks};
use strand_coordinator::group::streams_records::{StoredSubtopology, StoredTopology};

use super::{Message, World, CLIENT_BASE, OFFSETS};
use crate::controller::TOPIC;

pub(super) const MEMBER_GROUP: &str = "sim-members";
pub(super) const STREAMS_GROUP: &str = "sim-streams";
/// The streams topology's one subtopology: its tasks are the topic's partitions.
pub(super) const SUBTOPOLOGY: &str = "0";
/// The members' network ids start here.
const MEMBER_BASE: i32 = CLIENT_BASE + 60;
/// Members of each protocol.
const MEMBERS: usize = 3;
/// How many partitions the group's topic has as the coordinator sees it (the data
/// partition and five more that are only ever assigned, never read).
pub(super) const ASSIGNED_PARTITIONS: i32 = 6;
/// A member heartbeats this often, and gives up on an answer after a second.
const HEARTBEAT_MS: i64 = 300;
const MEMBER_TIMEOUT_MS: i64 = 1_000;

/// Which heartbeat a member sends, so which group it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Protocol {
    /// ConsumerGroupHeartbeat (KIP-848).
    Consumer,
    /// StreamsGroupHeartbeat (KIP-1071).
    Streams,
}

#[derive(Debug)]
pub(super) struct Member {
    protocol: Protocol,
    /// The last member of each group is static (group.instance.id): a clean close is a
    /// temporary leave (epoch -2) and a restart takes its place and partitions back.
    instance_id: Option<String>,
    /// Each process a new consumer (a new member id).
    incarnation: u32,
    epoch: i32,
    /// The partitions this consumer owns, as its client knows.
    owned: BTreeSet<i32>,
    /// The heartbeat in flight (when sent, its number).
    outstanding: Option<(i64, u64)>,
    last_sent_ms: i64,
    down: bool,
}

pub(super) fn members() -> Vec<Member> {
    [Protocol::Consumer, Protocol::Streams]
        .into_iter()
        .flat_map(|protocol| (0..MEMBERS).map(move |n| (protocol, n)))
        .map(|(protocol, n)| Member {
            protocol,
            instance_id: (n == MEMBERS - 1).then(|| format!("{protocol:?}-static")),
            incarnation: 0,
            epoch: 0,
            owned: BTreeSet::new(),
            outstanding: None,
            last_sent_ms: i64::MIN / 2,
            down: false,
        })
        .collect()
}

fn member_id(index: usize, member: &Member) -> String {
    let prefix = match member.protocol {
        Protocol::Consumer => "member",
        Protocol::Streams => "streams",
    };
    format!("{prefix}-{index}-{}", member.incarnation)
}

/// The streams group's settings at the simulation's pace.
pub(super) const STREAMS_LIMITS: StreamsGroupLimits = StreamsGroupLimits {
    session_timeout_ms: 3_000,
    heartbeat_interval_ms: 300,
    max_size: i32::MAX as usize,
    num_standby_replicas: 0,
    initial_rebalance_delay_ms: 500,
    assignment_interval_ms: 300,
    task_offset_interval_ms: 60_000,
    acceptable_recovery_lag: 10_000,
};

/// A Kafka Streams instance's StreamsGroupHeartbeat: joining (epoch 0) it sends its
/// topology (one subtopology reading the topic) and process id; it always reports the
/// tasks it runs.
pub(super) fn streams_request(
    member_id: String,
    epoch: i32,
    owned: &BTreeSet<i32>,
    instance_id: Option<String>,
) -> StreamsHeartbeat {
    let joining = epoch == 0;
    let topology = StoredTopology {
        epoch: 0,
        subtopologies: vec![StoredSubtopology {
            id: SUBTOPOLOGY.to_string(),
            source_topics: vec![TOPIC.to_string()],
            ..StoredSubtopology::default()
        }],
    };
    let mut active = std::collections::BTreeMap::new();
    if !owned.is_empty() {
        active.insert(SUBTOPOLOGY.to_string(), owned.clone());
    }
    StreamsHeartbeat {
        process_id: joining.then(|| format!("process-{member_id}")),
        member_id,
        instance_id,
        member_epoch: epoch,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: if joining { 5_000 } else { -1 },
        topology: joining.then_some(topology),
        owned: Some(Tasks {
            active,
            ..Tasks::default()
        }),
        client_id: "sim".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..StreamsHeartbeat::default()
    }
}

/// A member's ConsumerGroupHeartbeat as its client sends it.
pub(super) fn heartbeat_request(
    member_id: String,
    epoch: i32,
    owned: &BTreeSet<i32>,
    instance_id: Option<String>,
) -> Heartbeat {
    Heartbeat {
        member_id,
        member_epoch: epoch,
        instance_id,
        rack_id: None,
        client_id: "sim".to_string(),
        client_host: "/127.0.0.1".to_string(),
        rebalance_timeout_ms: 5_000,
        subscribed_topics: Some(vec![TOPIC.to_string()]),
        subscribed_regex: None,
        server_assignor: None,
        // Owning nothing is an empty assignment (what a joining member must send).
        owned: Some(match owned.is_empty() {
            true => Assignment::new(),
            false => Assignment::from([(TOPIC.to_string(), owned.clone())]),
        }),
    }
}

impl World {
    /// A member's turn: now and then (if `faults`) its process crashes or comes back as
    /// a new consumer; otherwise it heartbeats when due.
    pub(super) fn member_step(&mut self, index: usize, faults: bool) {
        let now = self.now_ms;
        if self.members[index].down {
            if !faults || self.rng.gen_bool(0.2) {
                let member = &mut self.members[index];
                member.down = false;
                member.incarnation += 1;
                member.epoch = 0;
                self.trace(&("member starts", index));
            }
            return;
        }
        if faults && self.rng.gen_bool(0.01) {
            // The process stops: half the time it dies (its session expires later), half
            // it closes cleanly, leaving the group first (a static member for a while:
            // epoch -2), not waiting for the answer. Its connection closes: requests
            // still on their way are lost with it.
            let from = MEMBER_BASE + index as i32;
            self.network.retain(|f| f.from != from);
            let closes = self.rng.gen_bool(0.5);
            if closes {
                let member = &self.members[index];
                let epoch = match member.instance_id {
                    Some(_) => STATIC_LEAVE_EPOCH,
                    None => LEAVE_EPOCH,
                };
                self.member_send(index, epoch);
            }
            let member = &mut self.members[index];
            member.down = true;
            member.owned.clear();
            member.outstanding = None;
            self.trace(&("member stops", index, closes));
            return;
        }
        let member = &self.members[index];
        let overdue = member
            .outstanding
            .is_some_and(|(at, _)| now - at >= MEMBER_TIMEOUT_MS);
        if (member.outstanding.is_some() && !overdue) || now - member.last_sent_ms < HEARTBEAT_MS {
            return;
        }
        let epoch = self.members[index].epoch;
        if let Some(correlation) = self.member_send(index, epoch) {
            let member = &mut self.members[index];
            member.outstanding = Some((now, correlation));
            member.last_sent_ms = now;
        }
    }

    /// Sends member `index`'s heartbeat at `epoch` to the coordinator the controller
    /// names; its number, if sent.
    fn member_send(&mut self, index: usize, epoch: i32) -> Option<u64> {
        let coordinator = self.controller.assignment(OFFSETS).leader;
        if coordinator <= 0 {
            return None;
        }
        let correlation = self.next_correlation();
        let member = &self.members[index];
        let message = Message::Heartbeat {
            member_id: member_id(index, member),
            epoch,
            owned: member.owned.clone(),
            streams: member.protocol == Protocol::Streams,
            instance_id: member.instance_id.clone(),
        };
        let from = MEMBER_BASE + index as i32;
        self.send(from, coordinator, correlation, OFFSETS, message);
        Some(correlation)
    }

    /// A member reads the answer to its outstanding heartbeat.
    /// The answer coordinator `from` sent member `to`.
    pub(super) fn member_answer(
        &mut self,
        from: i32,
        to: i32,
        correlation: u64,
        result: Result<(i32, Option<BTreeSet<i32>>), i16>,
    ) {
        let index = (to - MEMBER_BASE) as usize;
        let member = &mut self.members[index];
        if member.down || member.outstanding.map(|(_, c)| c) != Some(correlation) {
            return;
        }
        member.outstanding = None;
        match result {
            Ok((epoch, target)) => {
                member.epoch = epoch;
                let Some(target) = target else { return };
                // Revoked partitions are given up at once; new ones taken.
                let gained: Vec<i32> = target.difference(&member.owned).copied().collect();
                member.owned = target;
                let id = member_id(index, member);
                let owned = self.members[index].owned.clone();
                self.trace(&("member owns", index, epoch, owned));
                self.outcome.assignments += gained.len() as u64;
                for partition in gained {
                    self.check_exclusive(from, index, &id, partition);
                }
            }
            Err(code @ (error_code::UNRELEASED_INSTANCE_ID | error_code::FENCED_INSTANCE_ID)) => {
                // Fatal to the client: the process stops (started again later). Another
                // process still holds the instance id (UNRELEASED: this one restarted
                // before its previous one left or timed out, Kafka's rule).
                member.down = true;
                member.owned.clear();
                self.outcome.instances_refused += 1;
                self.trace(&("static member refused", index, code));
            }
            Err(error_code::FENCED_MEMBER_EPOCH | error_code::UNKNOWN_MEMBER_ID) => {
                // Fenced: its partitions are lost; it rejoins with the same id.
                member.owned.clear();
                member.epoch = 0;
                self.outcome.members_fenced += 1;
                self.trace(&("member fenced", index));
            }
            Err(code) => self.trace(&("member retries", index, code)),
        }
    }

    /// Liveness, once the faults stopped: every member up and, in each group, every
    /// partition of the topic owned by exactly one of its members.
    pub(super) fn members_settled(&self) -> bool {
        [Protocol::Consumer, Protocol::Streams]
            .iter()
            .all(|protocol| {
                let mut owned = BTreeSet::new();
                self.members
                    .iter()
                    .filter(|m| m.protocol == *protocol)
                    .all(|m| !m.down && m.epoch > 0 && m.owned.iter().all(|p| owned.insert(*p)))
                    && owned.len() == ASSIGNED_PARTITIONS as usize
            })
    }

    /// What the members own, for a liveness report.
    pub(super) fn members_state(&self) -> Vec<String> {
        self.members
            .iter()
            .enumerate()
            .map(|(index, m)| {
                format!(
                    "{} epoch {} owns {:?}{}",
                    member_id(index, m),
                    m.epoch,
                    m.owned,
                    if m.down { " (down)" } else { "" }
                )
            })
            .collect()
    }

    /// `partition` just went to member `index`: no other member the coordinator that
    /// said so still counts may own it (with metadata lag, a deposed coordinator still
    /// answers for a while: its own shard, not the controller's choice's).
    fn check_exclusive(&mut self, coordinator: i32, index: usize, id: &str, partition: i32) {
        let Some((_, shard)) = (coordinator > 0)
            .then(|| self.nodes[self.index(coordinator)].coordinator.as_ref())
            .flatten()
        else {
            return;
        };
        let protocol = self.members[index].protocol;
        let counted: BTreeSet<String> = match protocol {
            Protocol::Consumer => shard
                .describe_consumer_group(MEMBER_GROUP)
                .map(|g| g.members.into_keys().collect()),
            Protocol::Streams => shard
                .describe_streams_group(STREAMS_GROUP)
                .ok()
                .map(|g| g.members.into_keys().collect()),
        }
        .unwrap_or_default();
        // An answer outliving its member (it expired while the answer's write waited
        // for the replicas) makes a zombie, as in Kafka: its next heartbeat fences it,
        // and its offset commits are refused meanwhile.
        if !counted.contains(id) {
            return;
        }
        let holder = self.members.iter().enumerate().find(|(other, member)| {
            *other != index
                && member.protocol == protocol
                && !member.down
                && member.owned.contains(&partition)
                && counted.contains(&member_id(*other, member))
        });
        if let Some((other, _)) = holder {
            let other_id = member_id(other, &self.members[other]);
            self.violation(format!(
                "partition {partition} went to {id} while {other_id}, still a member, owns it"
            ));
        }
    }
}
