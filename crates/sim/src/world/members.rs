//! Consumer group membership under the simulation (KIP-848): three consumers heartbeat
//! (ConsumerGroupHeartbeat) to the group coordinator, the real `GroupShard` on the
//! `__consumer_offsets` leader, which assigns the data topic's partitions with its own
//! assignor and moves members incrementally (a partition goes to a member only once no
//! other member holds it). Members crash (their session then expires: the coordinator's
//! own `tick`), come back as new consumers, are fenced and rejoin, while coordinators fail
//! over and load the group from their replica.
//!
//! Invariant: a member never receives a partition another member of the group still owns
//! (both members the current coordinator counts, the other's client holding it): what
//! KIP-848's incremental protocol promises, across coordinator failovers included. (A
//! member whose answer outlived it, expired while the answer's write waited for the
//! replicas, is a zombie until its next heartbeat fences it, in Kafka too.)

use std::collections::BTreeSet;

use rand::Rng;
use strand_broker::error_code;
use strand_coordinator::group::consumer::{Assignment, Heartbeat};

use super::{Message, World, CLIENT_BASE, OFFSETS};
use crate::controller::TOPIC;

pub(super) const MEMBER_GROUP: &str = "sim-members";
/// The members' network ids start here.
const MEMBER_BASE: i32 = CLIENT_BASE + 60;
const MEMBERS: usize = 3;
/// How many partitions the group's topic has as the coordinator sees it (the data
/// partition and five more that are only ever assigned, never read).
pub(super) const ASSIGNED_PARTITIONS: i32 = 6;
/// A member heartbeats this often, and gives up on an answer after a second.
const HEARTBEAT_MS: i64 = 300;
const MEMBER_TIMEOUT_MS: i64 = 1_000;

#[derive(Debug)]
pub(super) struct Member {
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
    (0..MEMBERS)
        .map(|_| Member {
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
    format!("member-{index}-{}", member.incarnation)
}

/// A member's ConsumerGroupHeartbeat as its client sends it.
pub(super) fn heartbeat_request(member_id: String, epoch: i32, owned: &BTreeSet<i32>) -> Heartbeat {
    Heartbeat {
        member_id,
        member_epoch: epoch,
        instance_id: None,
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
            // The process dies: it owns nothing any more; its session expires later.
            let member = &mut self.members[index];
            member.down = true;
            member.owned.clear();
            member.outstanding = None;
            self.trace(&("member dies", index));
            return;
        }
        let member = &self.members[index];
        let overdue = member
            .outstanding
            .is_some_and(|(at, _)| now - at >= MEMBER_TIMEOUT_MS);
        if (member.outstanding.is_some() && !overdue) || now - member.last_sent_ms < HEARTBEAT_MS {
            return;
        }
        let coordinator = self.controller.assignment(OFFSETS).leader;
        if coordinator <= 0 {
            return;
        }
        let correlation = self.next_correlation();
        let member = &mut self.members[index];
        member.outstanding = Some((now, correlation));
        member.last_sent_ms = now;
        let message = Message::Heartbeat {
            member_id: member_id(index, member),
            epoch: member.epoch,
            owned: member.owned.clone(),
        };
        self.send(
            MEMBER_BASE + index as i32,
            coordinator,
            correlation,
            OFFSETS,
            message,
        );
    }

    /// A member reads the answer to its outstanding heartbeat.
    pub(super) fn member_answer(
        &mut self,
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
                    self.check_exclusive(index, &id, partition);
                }
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

    /// Liveness, once the faults stopped: every member up and every partition of the
    /// group's topic owned by exactly one of them.
    pub(super) fn members_settled(&self) -> bool {
        let mut owned = BTreeSet::new();
        self.members
            .iter()
            .all(|m| !m.down && m.epoch > 0 && m.owned.iter().all(|p| owned.insert(*p)))
            && owned.len() == ASSIGNED_PARTITIONS as usize
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

    /// `partition` just went to member `index`: no other member the current coordinator
    /// still counts may own it.
    fn check_exclusive(&mut self, index: usize, id: &str, partition: i32) {
        let coordinator = self.controller.assignment(OFFSETS).leader;
        let Some((_, shard)) = (coordinator > 0)
            .then(|| self.nodes[self.index(coordinator)].coordinator.as_ref())
            .flatten()
        else {
            return;
        };
        let Some(group) = shard.describe_consumer_group(MEMBER_GROUP) else {
            return;
        };
        // An answer outliving its member (it expired while the answer's write waited
        // for the replicas) makes a zombie, as in Kafka: its next heartbeat fences it,
        // and its offset commits are refused meanwhile.
        if !group.members.contains_key(id) {
            return;
        }
        let holder = self.members.iter().enumerate().find(|(other, member)| {
            *other != index
                && !member.down
                && member.owned.contains(&partition)
                && group.members.contains_key(&member_id(*other, member))
        });
        if let Some((other, _)) = holder {
            let other_id = member_id(other, &self.members[other]);
            self.violation(format!(
                "partition {partition} went to {id} while {other_id}, still a member, owns it"
            ));
        }
    }
}
