//! Share groups (KIP-932) under the simulation. Every node also replicates a
//! `__share_group_state` partition, and the node leading it runs Strand's real
//! `ShareStateShard`, loaded by the broker's own `share::coordinator::load` and hosted as
//! the other coordinators are (hosting.rs). The data partition's leader holds the share
//! group's share-partition, Strand's real `SharePartition`, as the broker's ShareFetch
//! handler holds it: loaded for its leader epoch from the share coordinator (Read, and
//! Initialize at the log start for a new one, then Read again, which fences older
//! leaders), one request at a time (the share-partition's lock; the others queue),
//! acknowledgements applied and written to the share coordinator before they are
//! answered (undone if the write fails; a fenced write unloads the share-partition),
//! records acquired with the broker's own `before_read` and `acquire_read` on a read of
//! the real log, expired locks written before the answer. Its requests to the share
//! coordinator cross the simulated network, are resent after a second and given up after
//! ten (the broker's persister). Three share consumers fetch, acknowledge what they got
//! on their next fetch (mostly accept, sometimes release or reject), crash (their locks
//! then run out) and come back as new members.
//!
//! Invariants: a record acknowledged (accepted or rejected) and answered so is never
//! acquired again, by any leader after any failover; a share-partition never hands a
//! record to a member while another lock it gave on it runs; no record is acquired at or
//! past the high watermark, and what a consumer gets at an offset is the final log's
//! record there. Liveness: once the faults stop, the share-partition's start offset
//! reaches the high watermark and every record below it was delivered.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::Rng;
use strand_broker::error_code;
use strand_broker::partition::Partition;
use strand_broker::share::partition_state::{
    check_batches, Persisted, ShareLimits, SharePartition, ACK_ACCEPT, ACK_REJECT, ACK_RELEASE,
};
use strand_broker::share::persister::{from_stored, retriable, to_stored};
use strand_broker::share::{self as broker_share, ShareRead, Slot};
use strand_coordinator::runtime::Records;
use strand_coordinator::share::{ShareStateKey, ShareStateShard};
use strand_log::Clock;

use super::hosting::{CoordinatorWait, Hosted, Reply, Settled};
use super::{record_ids, Message, Node, World, CLIENT_BASE, DATA, FETCH_MAX_BYTES, SHARE};

const SHARE_GROUP: &str = "sim-share";
/// The share consumers' network ids start here.
const SHARE_BASE: i32 = CLIENT_BASE + 80;
const SHARE_CONSUMERS: usize = 3;
/// The group's share settings at the simulation's pace (share.record.lock.duration.ms
/// 2 s; Kafka's delivery count limit and a smaller in-flight bound).
const LIMITS: ShareLimits = ShareLimits {
    lock_duration_ms: 2_000,
    delivery_count_limit: 5,
    max_in_flight: 200,
};
/// A share fetch takes at most this many records (max.poll.records), and is given up
/// unanswered after three seconds.
const MAX_RECORDS: i64 = 10;
const FETCH_TIMEOUT_MS: i64 = 3_000;
/// The leader's requests to the share coordinator: resent after a second unanswered,
/// given up after ten (the persister's deadline).
const STATE_TIMEOUT_MS: i64 = 1_000;
const STATE_DEADLINE_MS: i64 = 10_000;
/// Share fetches waiting for a share-partition's lock, at most (more are dropped: the
/// consumer's request times out).
const QUEUE_MAX: usize = 8;

fn key() -> ShareStateKey {
    (
        SHARE_GROUP.to_string(),
        crate::controller::topic_id(DATA),
        0,
    )
}

/// A share-partition leader's request to the share coordinator.
#[derive(Debug, Clone)]
pub(super) enum ShareOp {
    Read {
        leader_epoch: i32,
    },
    Initialize {
        state_epoch: i32,
        start_offset: i64,
    },
    Write {
        state_epoch: i32,
        leader_epoch: i32,
        state: Persisted,
    },
}

/// What the share coordinator answers: the state epoch and state (Read), or nothing.
pub(super) type StateResult = Result<Option<(i32, Persisted)>, i16>;

/// What a share fetch answers: the batches holding the records acquired and the
/// acquired ranges, or an error code.
pub(super) type Acquisition = Result<(Vec<u8>, Vec<(i64, i64)>), i16>;

/// A share consumer's acknowledgements: (first, last, types), as ShareFetch carries them.
type Acks = Vec<(i64, i64, Vec<i8>)>;

#[derive(Debug)]
struct FetchRequest {
    from: i32,
    correlation: u64,
    member: String,
    acks: Acks,
    /// The connection it came on (a consumer process's own).
    connection: u64,
    /// Not a fetch: the connection closed, and what the member acquired on it goes
    /// back to the others (the broker's `connection_closed`), under the same lock.
    closing: bool,
    /// Its acknowledgements' error code, once settled (None: none sent, or not yet).
    ack: Option<i16>,
}

/// Where a share fetch holding the share-partition's lock is.
enum Phase {
    /// Its acknowledgements applied and being written: `before` restores a failed
    /// write; the offsets it settles (accept, reject) and releases.
    Acking {
        before: Box<SharePartition>,
        settles: Vec<i64>,
        releases: Vec<i64>,
        load: u64,
        leader_epoch: i32,
    },
    /// Loading for `epoch`: Read (then, for a new share-partition, Initialize and Read
    /// again: `initialized` holds what was initialized).
    Reading {
        epoch: i32,
        initialized: Option<(i32, i64)>,
    },
    Initializing {
        epoch: i32,
        state_epoch: i32,
        start: i64,
    },
    /// Records acquired; locks that ran out on the way being written first.
    Expired { read: ShareRead },
    /// A closed connection's records released, being written.
    Releasing,
}

struct Busy {
    request: FetchRequest,
    phase: Phase,
    op: ShareOp,
    /// The share coordinator's request in flight: when it went out and its number
    /// (None: to send); and when the call gives up.
    out: Option<(i64, u64)>,
    deadline: i64,
}

/// The data partition's share-partition on one node, as the broker's ShareManager
/// holds it.
#[derive(Default)]
pub(super) struct ShareLeader {
    slot: Option<Slot>,
    /// Which load of a share-partition (numbered across nodes and restarts) the slot
    /// holds: a lock binds within one (a new leader, or a reload after a fenced write,
    /// hands records out again, as in Kafka).
    load: u64,
    busy: Option<Busy>,
    queue: VecDeque<FetchRequest>,
}

#[derive(Debug, Default)]
pub(super) struct ShareConsumer {
    /// Each process a new member id.
    incarnation: u32,
    down: bool,
    outstanding: Option<(i64, u64)>,
    /// Offsets acquired and not yet acknowledged.
    held: BTreeSet<i64>,
    last_sent_ms: i64,
    /// The nodes this process has a connection to (it fetched there).
    connected: BTreeSet<i32>,
}

pub(super) fn share_consumers() -> Vec<ShareConsumer> {
    (0..SHARE_CONSUMERS)
        .map(|_| ShareConsumer::default())
        .collect()
}

/// What the checker knows of the share group.
#[derive(Debug, Default)]
pub(super) struct ShareCheck {
    /// Offsets whose acceptance or rejection was written and answered.
    settled: BTreeSet<i64>,
    /// (share-partition load, offset) -> (member, lock deadline on its node's clock) of
    /// the last acquisition there.
    locks: BTreeMap<(u64, i64), (String, i64)>,
    /// offset -> the highest leader epoch a share-partition that acquired it was loaded
    /// in: an acknowledgement answered from an older leader after that is one the newer
    /// leader's state did not have.
    acquired_in: BTreeMap<i64, i32>,
    /// offset -> record id, as consumers received them.
    delivered: BTreeMap<i64, i64>,
    /// The lowest start offset a share-partition was loaded at (where the share group
    /// starts reading).
    first_start: Option<i64>,
    /// share.auto.offset.reset=latest (else earliest).
    pub(super) reset_latest: bool,
    /// offset -> times acquired, by any share-partition.
    acquisitions: BTreeMap<i64, i16>,
    /// load -> the latest wall-clock time that share-partition was given: every
    /// operation expires the locks due by then, so a lock once expired stays expired
    /// however its node's clock jumps back.
    clocks: BTreeMap<u64, i64>,
}

impl ShareCheck {
    /// Share-partition `load` operated at wall-clock time `now`: the latest time it saw.
    fn saw(&mut self, load: u64, now: i64) -> i64 {
        let seen = self.clocks.entry(load).or_insert(now);
        *seen = (*seen).max(now);
        *seen
    }
}

fn member_id(index: usize, consumer: &ShareConsumer) -> String {
    format!("share-{index}-{}", consumer.incarnation)
}

/// A consumer process's connection (each process its own).
fn connection_of(index: usize, consumer: &ShareConsumer) -> u64 {
    ((index as u64) << 32) | u64::from(consumer.incarnation)
}

impl Hosted for ShareStateShard {
    const PARTITION: usize = SHARE;
    const WRITE_TIMEOUT_MS: i64 =
        strand_broker::share::coordinator::WRITE_TIMEOUT.as_millis() as i64;

    fn load(_: &World, replica: &Partition, _: i32, _: i64) -> (ShareStateShard, i64) {
        let shard = strand_broker::share::coordinator::load(replica, ShareStateShard::default());
        let start = shard.summary(&key()).map_or(-1, |s| s.start_offset);
        (shard, start)
    }

    fn slot(node: &mut Node) -> &mut Option<(i32, ShareStateShard)> {
        &mut node.share_coordinator
    }

    fn waits(world: &mut World) -> &mut Vec<CoordinatorWait<ShareStateShard>> {
        &mut world.share_waits
    }

    /// The share coordinator has no timers.
    fn tick(&mut self, _: i64) -> (Records, Reply<ShareStateShard>) {
        (Vec::new(), Box::new(|_, _| Settled::Nothing))
    }
}

/// The offsets an acknowledgement settles (accept, reject) and releases.
fn classify(acks: &Acks) -> (Vec<i64>, Vec<i64>) {
    let (mut settles, mut releases) = (Vec::new(), Vec::new());
    for (first, last, types) in acks {
        for offset in *first..=*last {
            let kind = match types.len() {
                1 => types[0],
                _ => types[(offset - first) as usize],
            };
            match kind {
                ACK_ACCEPT | ACK_REJECT => settles.push(offset),
                ACK_RELEASE => releases.push(offset),
                _ => {}
            }
        }
    }
    (settles, releases)
}

fn write_op(slot: &Slot) -> ShareOp {
    ShareOp::Write {
        state_epoch: slot.state_epoch,
        leader_epoch: slot.leader_epoch,
        state: slot.state.persisted(),
    }
}

impl World {
    /// The share coordinator (the `__share_group_state` leader) takes a leader's request.
    pub(super) fn handle_share_state(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        op: ShareOp,
    ) {
        let now = self.clocks[self.index(to)].now_ms();
        self.trace(&("share state asked", to, from, format!("{op:?}")));
        let Some((_, shard)) = self.hosted::<ShareStateShard>(to) else {
            let answer = Message::ShareStateAnswer {
                result: Err(error_code::NOT_COORDINATOR),
            };
            self.send(to, from, correlation, SHARE, answer);
            return;
        };
        let answered =
            move |result: StateResult| Settled::Answer(from, Message::ShareStateAnswer { result });
        let (records, reply): (Records, Reply<ShareStateShard>) = match op {
            ShareOp::Read { leader_epoch } => {
                let (records, answer) = shard.read(key(), leader_epoch, now);
                let reply: Reply<ShareStateShard> = Box::new(move |shard, written| {
                    let read = answer(shard, written).map(|snapshot| {
                        snapshot.map(|s| (s.state_epoch, from_stored(s.start_offset, &s.batches)))
                    });
                    answered(read)
                });
                (records, reply)
            }
            ShareOp::Initialize {
                state_epoch,
                start_offset,
            } => {
                let (records, answer) = shard.initialize(key(), state_epoch, start_offset, now);
                let reply: Reply<ShareStateShard> =
                    Box::new(move |shard, written| answered(answer(shard, written).map(|()| None)));
                (records, reply)
            }
            ShareOp::Write {
                state_epoch,
                leader_epoch,
                state,
            } => {
                let batches = to_stored(&state);
                let (records, answer) = shard.write(
                    key(),
                    state_epoch,
                    leader_epoch,
                    state.start_offset,
                    batches,
                    now,
                );
                let reply: Reply<ShareStateShard> =
                    Box::new(move |shard, written| answered(answer(shard, written).map(|()| None)));
                (records, reply)
            }
        };
        self.coordinator_write::<ShareStateShard>(partition, to, correlation, records, reply);
    }

    /// A share fetch reaches node `to`: taken if it leads the data partition and its
    /// share-partition is free, queued behind the request holding it otherwise.
    pub(super) fn handle_share_fetch(
        &mut self,
        to: i32,
        from: i32,
        correlation: u64,
        member: String,
        acks: Acks,
        connection: u64,
    ) {
        let request = FetchRequest {
            from,
            correlation,
            member,
            acks,
            connection,
            closing: false,
            ack: None,
        };
        let leads = self
            .partition(to)
            .is_some_and(|p| p.leader_epoch_if_leader().is_some());
        if !leads {
            let mut request = request;
            request.ack = (!request.acks.is_empty()).then_some(error_code::NOT_LEADER_OR_FOLLOWER);
            self.share_answer(to, request, Err(error_code::NOT_LEADER_OR_FOLLOWER));
            return;
        }
        if self.nodes[self.index(to)].share.queue.len() < QUEUE_MAX {
            self.share_enqueue(to, request);
        }
    }

    /// The share fetch handler's first half: its acknowledgements, all or nothing,
    /// written before anything else happens.
    fn share_begin(&mut self, id: i32, mut request: FetchRequest) {
        if request.closing {
            self.share_release(id, request);
            return;
        }
        let index = self.index(id);
        let now = self.clocks[index].now_ms();
        let epoch = self.partition(id).and_then(|p| p.leader_epoch_if_leader());
        if !request.acks.is_empty() {
            let load = self.nodes[index].share.load;
            let slot = self.nodes[index]
                .share
                .slot
                .as_mut()
                .filter(|s| Some(s.leader_epoch) == epoch);
            if slot.is_some() {
                self.share_check.saw(load, now);
            }
            request.ack = Some(match (slot, check_batches(&request.acks, false)) {
                (_, Err(code)) => code,
                // Acknowledging never loads a share-partition (Kafka's answer).
                (None, Ok(())) if epoch.is_none() => error_code::NOT_LEADER_OR_FOLLOWER,
                (None, Ok(())) => error_code::UNKNOWN_TOPIC_OR_PARTITION,
                (Some(slot), Ok(())) => {
                    let before = Box::new(slot.state.clone());
                    match slot.state.acknowledge(&request.member, &request.acks, now) {
                        Err(code) => code,
                        Ok(()) => {
                            let (settles, releases) = classify(&request.acks);
                            if self.bugs.share_acks_unwritten {
                                let leader_epoch = slot.leader_epoch;
                                self.share_acked(id, load, leader_epoch, &settles, &releases);
                                request.ack = Some(error_code::NONE);
                                self.share_fetch_phase(id, request);
                                return;
                            }
                            let op = write_op(slot);
                            let phase = Phase::Acking {
                                before,
                                settles,
                                releases,
                                load,
                                leader_epoch: slot.leader_epoch,
                            };
                            self.share_call(id, request, phase, op);
                            return;
                        }
                    }
                }
            });
        }
        self.share_fetch_phase(id, request);
    }

    /// The second half: the share-partition loaded for this leader epoch (from the share
    /// coordinator), then records acquired.
    fn share_fetch_phase(&mut self, id: i32, request: FetchRequest) {
        let index = self.index(id);
        let Some(epoch) = self.partition(id).and_then(|p| p.leader_epoch_if_leader()) else {
            self.share_answer(id, request, Err(error_code::NOT_LEADER_OR_FOLLOWER));
            return;
        };
        let leader = &mut self.nodes[index].share;
        if leader
            .slot
            .as_ref()
            .is_some_and(|s| s.leader_epoch == epoch)
        {
            self.share_acquire(id, request);
            return;
        }
        leader.slot = None;
        let phase = Phase::Reading {
            epoch,
            initialized: None,
        };
        let op = ShareOp::Read {
            leader_epoch: epoch,
        };
        self.share_call(id, request, phase, op);
    }

    /// Records acquired for the request's member from a read of the log, as the broker's
    /// `read_and_acquire` does (its two halves, around the simulator's read).
    fn share_acquire(&mut self, id: i32, request: FetchRequest) {
        let index = self.index(id);
        let now = self.clocks[index].now_ms();
        let Some(partition) = self.partition(id) else {
            return;
        };
        let log_start = partition.log().log_start_offset();
        let high_watermark = partition.log().high_watermark();
        let leader = &mut self.nodes[index].share;
        let load = leader.load;
        let Some(slot) = leader.slot.as_mut() else {
            return;
        };
        let (expired, offset) = broker_share::before_read(&mut slot.state, log_start, now);
        let mut read = ShareRead {
            expired,
            ..ShareRead::default()
        };
        let mut failed = None;
        if let Some(offset) = offset {
            match partition.read(offset, FETCH_MAX_BYTES, true, false) {
                Ok((result, _)) => {
                    let bytes = match result.slice.map(|s| s.read_to_vec()) {
                        Some(Ok(bytes)) => bytes,
                        Some(Err(_)) | None => Vec::new(),
                    };
                    if !bytes.is_empty() {
                        let log_read = broker_share::Read {
                            offset,
                            bytes: &bytes,
                            aborted: None,
                        };
                        read = broker_share::acquire_read(
                            &mut slot.state,
                            log_read,
                            &request.member,
                            request.connection,
                            MAX_RECORDS,
                            false,
                            now,
                            expired,
                        );
                    }
                }
                Err(error) => failed = Some((offset, error.kafka_error_code())),
            }
        }
        let op = read.expired.then(|| write_op(slot));
        let leader_epoch = slot.leader_epoch;
        if let Some((offset, code)) = failed {
            self.trace(&("share read failed", id, offset, code));
            // As the broker: out of range reads nothing; another error is the answer
            // (the expired locks are written with the next change).
            if code != error_code::OFFSET_OUT_OF_RANGE {
                self.share_answer(id, request, Err(code));
                return;
            }
        }
        let member = &request.member;
        self.check_acquired(id, load, leader_epoch, member, &read, high_watermark, now);
        if let Some(op) = op {
            self.share_call(id, request, Phase::Expired { read }, op);
            return;
        }
        self.share_answer(id, request, Ok(read));
    }

    /// What a share-partition hands out is checked as it does: never a record settled
    /// and answered so, never one another lock of the same share-partition still
    /// holds, never one at or past the high watermark.
    #[allow(clippy::too_many_arguments)]
    fn check_acquired(
        &mut self,
        id: i32,
        load: u64,
        leader_epoch: i32,
        member: &str,
        read: &ShareRead,
        high_watermark: i64,
        now: i64,
    ) {
        let until = now + LIMITS.lock_duration_ms;
        let seen = self.share_check.saw(load, now);
        for acquired in &read.acquired {
            self.trace(&("share acquired", id, member, acquired.first, acquired.last));
            self.outcome.share_acquired += (acquired.last - acquired.first + 1) as u64;
            if acquired.last >= high_watermark {
                self.violation(format!(
                    "node {id} acquired {}..={} for {member} at or past its high watermark {high_watermark}",
                    acquired.first, acquired.last
                ));
            }
            for offset in acquired.first..=acquired.last {
                *self.share_check.acquisitions.entry(offset).or_default() += 1;
                let epoch = self
                    .share_check
                    .acquired_in
                    .entry(offset)
                    .or_insert(leader_epoch);
                *epoch = (*epoch).max(leader_epoch);
                if self.share_check.settled.contains(&offset) {
                    self.violation(format!(
                        "offset {offset}, acknowledged and answered so, was acquired again by {member} on node {id}"
                    ));
                }
                let lock = (member.to_string(), until);
                if let Some((holder, deadline)) =
                    self.share_check.locks.insert((load, offset), lock)
                {
                    if deadline > seen {
                        self.violation(format!(
                            "node {id} handed offset {offset} to {member} while {holder}'s lock on it ran until {deadline} (now {now}, latest {seen})"
                        ));
                    }
                }
            }
        }
    }

    /// Holds the share-partition's lock for `request` while `op` goes to the share
    /// coordinator.
    fn share_call(&mut self, id: i32, request: FetchRequest, phase: Phase, op: ShareOp) {
        let index = self.index(id);
        self.nodes[index].share.busy = Some(Busy {
            request,
            phase,
            op,
            out: None,
            deadline: self.now_ms + STATE_DEADLINE_MS,
        });
        self.share_send(id);
    }

    /// Sends node `id`'s call to the node the controller names share coordinator.
    fn share_send(&mut self, id: i32) {
        let index = self.index(id);
        let coordinator = self.controller.assignment(SHARE).leader;
        let correlation = self.next_correlation();
        let now = self.now_ms;
        let Some(busy) = self.nodes[index].share.busy.as_mut() else {
            return;
        };
        busy.out = Some((now, correlation));
        let op = busy.op.clone();
        if coordinator > 0 {
            self.send(
                id,
                coordinator,
                correlation,
                SHARE,
                Message::ShareState { op },
            );
        }
    }

    /// The share-partitions' calls: resent when unanswered for a second (or refused
    /// with a retriable error), given up at their deadline.
    pub(super) fn share_poll(&mut self) {
        for index in 0..self.nodes.len() {
            let id = self.nodes[index].id;
            let now = self.now_ms;
            let Some(busy) = &self.nodes[index].share.busy else {
                continue;
            };
            let due = busy.out.is_none_or(|(at, _)| now - at >= STATE_TIMEOUT_MS);
            if !due {
                continue;
            }
            if now >= busy.deadline {
                self.share_called(id, Err(error_code::COORDINATOR_NOT_AVAILABLE));
            } else {
                self.share_send(id);
            }
        }
    }

    /// The share coordinator's answer reaches node `to`.
    pub(super) fn share_state_answer(&mut self, to: i32, correlation: u64, result: StateResult) {
        let index = self.index(to);
        let ours = self.nodes[index]
            .share
            .busy
            .as_ref()
            .is_some_and(|b| b.out.is_some_and(|(_, c)| c == correlation));
        if !ours || self.nodes[index].running.is_none() {
            return;
        }
        if let Err(code) = result {
            if retriable(code) {
                // Sent again at the next poll (the persister's backoff).
                if let Some(busy) = self.nodes[index].share.busy.as_mut() {
                    busy.out = None;
                }
                return;
            }
        }
        self.share_called(to, result);
    }

    /// Node `id`'s call to the share coordinator ended with `result`: the request holding
    /// the share-partition goes on.
    fn share_called(&mut self, id: i32, result: StateResult) {
        let index = self.index(id);
        let Some(busy) = self.nodes[index].share.busy.take() else {
            return;
        };
        let Busy { request, phase, .. } = busy;
        self.trace(&("share called", id, result.as_ref().err()));
        match phase {
            Phase::Acking {
                before,
                settles,
                releases,
                load,
                leader_epoch,
            } => {
                let mut request = request;
                request.ack = Some(match result {
                    Ok(_) => {
                        self.share_acked(id, load, leader_epoch, &settles, &releases);
                        error_code::NONE
                    }
                    Err(code) if broker_share::write_unloads(code) => {
                        self.nodes[index].share.slot = None;
                        error_code::NOT_LEADER_OR_FOLLOWER
                    }
                    Err(code) => {
                        if let Some(slot) = self.nodes[index].share.slot.as_mut() {
                            slot.state = *before;
                        }
                        code
                    }
                });
                // The handler lets the share-partition go between acknowledging and
                // fetching: a request waiting for it goes first, and the fetch waits
                // its turn behind them.
                request.acks.clear();
                self.share_enqueue(id, request);
            }
            Phase::Reading { epoch, initialized } => match (result, initialized) {
                (Ok(Some((state_epoch, state))), _) if state.start_offset >= 0 => {
                    self.share_loaded(id, epoch, state_epoch, state, request)
                }
                (Ok(found), Some((state_epoch, start))) => {
                    let (state_epoch, state) = found.unwrap_or((
                        state_epoch,
                        Persisted {
                            start_offset: start,
                            batches: Vec::new(),
                        },
                    ));
                    self.share_loaded(id, epoch, state_epoch, state, request)
                }
                (Ok(found), None) => {
                    // A new share-partition: where share.auto.offset.reset says (half
                    // the seeds earliest, half latest: the high watermark, which
                    // differs between two leaders loading at once), under the state
                    // epoch found.
                    let state_epoch = found.map_or(0, |(e, _)| e);
                    let latest = self.share_check.reset_latest;
                    let Some(start) = self.partition(id).map(|p| match latest {
                        true => p.log().high_watermark(),
                        false => p.log().log_start_offset(),
                    }) else {
                        return;
                    };
                    let phase = Phase::Initializing {
                        epoch,
                        state_epoch,
                        start,
                    };
                    let op = ShareOp::Initialize {
                        state_epoch,
                        start_offset: start,
                    };
                    self.share_call(id, request, phase, op);
                }
                (Err(code), _) => self.share_load_failed(id, request, code),
            },
            Phase::Initializing {
                epoch,
                state_epoch,
                start,
            } => match result {
                Ok(_) => {
                    // Read again as this leader, so an older one is fenced.
                    let phase = Phase::Reading {
                        epoch,
                        initialized: Some((state_epoch, start)),
                    };
                    let op = ShareOp::Read {
                        leader_epoch: epoch,
                    };
                    self.share_call(id, request, phase, op);
                }
                Err(code) => self.share_load_failed(id, request, code),
            },
            Phase::Expired { read } => match result {
                Err(code) if broker_share::write_unloads(code) => {
                    self.nodes[index].share.slot = None;
                    self.share_answer(id, request, Err(error_code::NOT_LEADER_OR_FOLLOWER));
                }
                // A failed write of expired locks is only logged by the broker.
                _ => self.share_answer(id, request, Ok(read)),
            },
            Phase::Releasing => {
                if matches!(result, Err(code) if broker_share::write_unloads(code)) {
                    self.nodes[index].share.slot = None;
                }
                self.share_unload_if_idle(id);
                self.share_answer(id, request, Ok(ShareRead::default()));
            }
        }
    }

    /// A share consumer's connection to node `id` closed (its process died): the
    /// broker releases what the member acquired on it and writes that down.
    fn share_connection_closed(&mut self, id: i32, member: String, connection: u64) {
        let index = self.index(id);
        if self.nodes[index].running.is_none() {
            return;
        }
        let request = FetchRequest {
            from: 0,
            correlation: 0,
            member,
            acks: Vec::new(),
            connection,
            closing: true,
            ack: None,
        };
        self.share_enqueue(id, request);
    }

    /// The member's records acquired on the closed connection go back (at the delivery
    /// limit, archived), written to the share coordinator if anything changed.
    fn share_release(&mut self, id: i32, request: FetchRequest) {
        let index = self.index(id);
        let now = self.clocks[index].now_ms();
        let epoch = self.partition(id).and_then(|p| p.leader_epoch_if_leader());
        let leader = &mut self.nodes[index].share;
        let load = leader.load;
        // No longer the leader of its epoch: dropped, nothing written (the broker's).
        if leader
            .slot
            .as_ref()
            .is_some_and(|s| Some(s.leader_epoch) != epoch)
        {
            leader.slot = None;
        }
        let released = leader.slot.as_mut().map(|slot| {
            let released = slot
                .state
                .release_member(&request.member, Some(request.connection));
            (released, write_op(slot))
        });
        let Some((true, op)) = released else {
            self.share_unload_if_idle(id);
            self.share_answer(id, request, Ok(ShareRead::default()));
            return;
        };
        self.share_check.saw(load, now);
        self.share_check
            .locks
            .retain(|(held_in, _), (holder, _)| !(*held_in == load && *holder == request.member));
        self.trace(&("share released", id, &request.member));
        self.share_call(id, request, Phase::Releasing, op);
    }

    /// The group's last share session on node `id` closed: its share-partition is
    /// dropped (the broker's onGroupEmpty), to be loaded afresh, in the same leader
    /// epoch too, by the next fetch.
    fn share_unload_if_idle(&mut self, id: i32) {
        let sessions = self
            .share_consumers
            .iter()
            .any(|c| !c.down && c.connected.contains(&id));
        let index = self.index(id);
        if !sessions && self.nodes[index].share.slot.take().is_some() {
            self.trace(&("share unloaded", id));
        }
    }

    /// Acknowledgements answered as durable: what the checker holds them to.
    fn share_acked(
        &mut self,
        id: i32,
        load: u64,
        leader_epoch: i32,
        settles: &[i64],
        releases: &[i64],
    ) {
        for offset in releases {
            self.share_check.locks.remove(&(load, *offset));
        }
        for &offset in settles {
            self.share_check.locks.remove(&(load, offset));
            self.share_check.settled.insert(offset);
            self.outcome.share_settled += 1;
            let newer = self.share_check.acquired_in.get(&offset).copied();
            if let Some(newer) = newer.filter(|&e| e > leader_epoch) {
                self.violation(format!(
                    "offset {offset}, acquired by a share-partition loaded in leader epoch {newer}, was then acknowledged and answered so by node {id}'s of epoch {leader_epoch}"
                ));
            }
        }
    }

    fn share_load_failed(&mut self, id: i32, request: FetchRequest, code: i16) {
        let code = broker_share::fenced_is_not_leader(code);
        // The share state not available yet: the broker leaves the partition out of
        // the answer (no records, no error).
        let result = match retriable(code) || code == error_code::COORDINATOR_LOAD_IN_PROGRESS {
            true => Ok(ShareRead::default()),
            false => Err(code),
        };
        self.share_answer(id, request, result);
    }

    fn share_loaded(
        &mut self,
        id: i32,
        epoch: i32,
        state_epoch: i32,
        state: Persisted,
        request: FetchRequest,
    ) {
        let index = self.index(id);
        let Some(replica) = self.partition(id) else {
            return;
        };
        // Leadership moved while the state loaded: the broker keeps nothing.
        if replica.leader_epoch_if_leader() != Some(epoch) {
            self.share_answer(id, request, Err(error_code::NOT_LEADER_OR_FOLLOWER));
            return;
        }
        let log_start = replica.log().log_start_offset();
        let mut partition = SharePartition::new(&state, LIMITS);
        partition.log_start_moved(log_start);
        let start = partition.start_offset();
        let first = self.share_check.first_start.get_or_insert(start);
        *first = (*first).min(start);
        self.trace(&(
            "share loaded",
            id,
            epoch,
            state_epoch,
            partition.start_offset(),
        ));
        self.outcome.share_loads += 1;
        let leader = &mut self.nodes[index].share;
        leader.load = self.outcome.share_loads;
        leader.slot = Some(Slot {
            leader_epoch: epoch,
            state_epoch,
            state: partition,
        });
        self.share_acquire(id, request);
    }

    /// Answers a share fetch and hands the share-partition to the next one waiting.
    fn share_answer(&mut self, id: i32, request: FetchRequest, result: Result<ShareRead, i16>) {
        let result = result.map(|read| {
            let bytes = read.records.map(|b| b.to_vec()).unwrap_or_default();
            let ranges = read.acquired.iter().map(|a| (a.first, a.last)).collect();
            (bytes, ranges)
        });
        if !request.closing {
            let answer = Message::ShareFetchAnswer {
                ack: request.ack,
                result,
            };
            self.send(id, request.from, request.correlation, DATA, answer);
        }
        self.share_next(id);
    }

    /// `request` waits its turn for the share-partition.
    fn share_enqueue(&mut self, id: i32, request: FetchRequest) {
        let index = self.index(id);
        self.nodes[index].share.queue.push_back(request);
        self.share_next(id);
    }

    /// The share-partition is free: the request that waited longest takes it.
    fn share_next(&mut self, id: i32) {
        let index = self.index(id);
        let leader = &mut self.nodes[index].share;
        if leader.busy.is_none() {
            if let Some(next) = leader.queue.pop_front() {
                self.share_begin(id, next);
            }
        }
    }

    /// A share consumer's turn: now and then (if `faults`) its process crashes or comes
    /// back as a new member; otherwise it fetches, acknowledging what it holds.
    pub(super) fn share_consumer_step(&mut self, index: usize, faults: bool) {
        let now = self.now_ms;
        let from = SHARE_BASE + index as i32;
        let consumer = &mut self.share_consumers[index];
        if consumer.down {
            if !faults || self.rng.gen_bool(0.2) {
                consumer.down = false;
                consumer.incarnation += 1;
                self.trace(&("share consumer starts", index));
            }
            return;
        }
        if faults && self.rng.gen_bool(0.005) {
            // Its requests die with the process, and its connections close: the nodes
            // release what it acquired on them.
            let member = member_id(index, consumer);
            let connection = connection_of(index, consumer);
            let connected = std::mem::take(&mut consumer.connected);
            consumer.down = true;
            consumer.held.clear();
            consumer.outstanding = None;
            self.network.retain(|f| f.from != from);
            self.trace(&("share consumer stops", index));
            for node in connected {
                self.share_connection_closed(node, member.clone(), connection);
            }
            return;
        }
        let overdue = consumer
            .outstanding
            .is_some_and(|(at, _)| now - at >= FETCH_TIMEOUT_MS);
        if (consumer.outstanding.is_some() && !overdue) || now - consumer.last_sent_ms < 10 {
            return;
        }
        let leader = self.controller.assignment(DATA).leader;
        if leader <= 0 {
            return;
        }
        // Each run of held offsets accepted, or now and then released, rejected or kept
        // for the next fetch.
        let held: Vec<i64> = self.share_consumers[index].held.iter().copied().collect();
        let mut acks: Acks = Vec::new();
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for offset in held {
            match runs.last_mut() {
                Some(run) if run.1 + 1 == offset => run.1 = offset,
                _ => runs.push((offset, offset)),
            }
        }
        for (first, last) in runs {
            let kind = match faults.then(|| self.rng.gen_range(0..100)) {
                None | Some(0..=89) => ACK_ACCEPT,
                Some(90..=95) => ACK_RELEASE,
                Some(96..=97) => ACK_REJECT,
                Some(_) => continue,
            };
            acks.push((first, last, vec![kind]));
            for offset in first..=last {
                self.share_consumers[index].held.remove(&offset);
            }
        }
        let correlation = self.next_correlation();
        let consumer = &mut self.share_consumers[index];
        consumer.outstanding = Some((now, correlation));
        consumer.last_sent_ms = now;
        consumer.connected.insert(leader);
        let member = member_id(index, consumer);
        let connection = connection_of(index, consumer);
        self.trace(&("share fetch", index, leader, correlation, &acks));
        let message = Message::ShareFetch {
            member,
            acks,
            connection,
        };
        self.send(from, leader, correlation, DATA, message);
    }

    /// A share consumer reads the answer to its fetch: the records it acquired.
    pub(super) fn share_fetch_answer(
        &mut self,
        to: i32,
        correlation: u64,
        ack: Option<i16>,
        result: Acquisition,
    ) {
        let index = (to - SHARE_BASE) as usize;
        let consumer = &mut self.share_consumers[index];
        if consumer.down || consumer.outstanding.map(|(_, c)| c) != Some(correlation) {
            return;
        }
        consumer.outstanding = None;
        let (bytes, ranges) = match result {
            Ok(read) => read,
            Err(code) => {
                self.trace(&("share fetch refused", index, ack, code));
                return;
            }
        };
        self.trace(&("share fetch answered", index, ack, &ranges));
        let ids: BTreeMap<i64, i64> = record_ids(&bytes)
            .0
            .into_iter()
            .map(|(offset, id, _)| (offset, id))
            .collect();
        for (first, last) in ranges {
            for offset in first..=last {
                let Some(&id) = ids.get(&offset) else {
                    self.violation(format!(
                        "share consumer {index} acquired offset {offset} without its record"
                    ));
                    continue;
                };
                if let Some(before) = self.share_check.delivered.insert(offset, id) {
                    if before != id {
                        self.violation(format!(
                            "offset {offset} was delivered to a share consumer as record {before}, later as {id}"
                        ));
                    }
                }
                self.share_consumers[index].held.insert(offset);
            }
        }
    }

    /// Liveness: every share consumer up and holding nothing, and the share-partition on
    /// the data leader, loaded for its epoch and free, started at `high_watermark`.
    pub(super) fn share_settled(&self, high_watermark: i64) -> bool {
        let leader = self.controller.assignment(DATA).leader;
        if leader <= 0
            || self
                .share_consumers
                .iter()
                .any(|c| c.down || !c.held.is_empty())
        {
            return false;
        }
        let Some(epoch) = self
            .partition(leader)
            .and_then(|p| p.leader_epoch_if_leader())
        else {
            return false;
        };
        let share = &self.nodes[self.index(leader)].share;
        share.busy.is_none()
            && share.slot.as_ref().is_some_and(|s| {
                s.leader_epoch == epoch && s.state.start_offset() >= high_watermark
            })
    }

    /// What the share-partition reports, for a liveness report.
    pub(super) fn share_state(&self) -> String {
        let leader = self.controller.assignment(DATA).leader;
        let share = (leader > 0).then(|| &self.nodes[self.index(leader)].share);
        let slot = share.and_then(|s| s.slot.as_ref());
        format!(
            "share-partition on node {leader}: {:?} busy {} queued {}; share consumers {:?}",
            slot.map(|s| (s.leader_epoch, s.state.start_offset(), s.state.end_offset())),
            share.is_some_and(|s| s.busy.is_some()),
            share.map_or(0, |s| s.queue.len()),
            self.share_consumers
                .iter()
                .map(|c| (c.down, c.held.len(), c.outstanding.is_some()))
                .collect::<Vec<_>>()
        )
    }

    /// At the end: every record below the high watermark of the final log (`records`:
    /// offset -> record id) was delivered to a share consumer, as that record, or
    /// archived after as many acquisitions as the delivery count limit allows (their
    /// answers lost or too late for the consumer: what the limit is for).
    pub(super) fn check_share_final(&mut self, records: &BTreeMap<i64, i64>) {
        let mut missing = Vec::new();
        let from = self.share_check.first_start.unwrap_or(0);
        for (offset, id) in records.range(from..) {
            let acquired = self
                .share_check
                .acquisitions
                .get(offset)
                .copied()
                .unwrap_or(0);
            match self.share_check.delivered.get(offset) {
                None if acquired >= LIMITS.delivery_count_limit => {}
                None => missing.push(*offset),
                Some(got) if got != id => self.violation(format!(
                    "offset {offset} was delivered to a share consumer as record {got}; the final log has {id}"
                )),
                Some(_) => {}
            }
        }
        if !missing.is_empty() {
            let first: Vec<i64> = missing.iter().take(10).copied().collect();
            self.violation(format!(
                "{} records were never delivered to the share group (first {first:?})",
                missing.len()
            ));
        }
        let beyond: Vec<i64> = self
            .share_check
            .delivered
            .keys()
            .filter(|o| !records.contains_key(o))
            .take(10)
            .copied()
            .collect();
        if !beyond.is_empty() {
            self.violation(format!(
                "share consumers got offsets the final log does not hold below its high watermark: {beyond:?}"
            ));
        }
    }
}
