//! A coordinator shard hosted on a partition's leader, as the broker's coordinator
//! runtime hosts it: loaded afresh (a replay of the node's replica) at every new leader
//! epoch, its writes appended by the broker's own `shard_log::append_write` in the epoch
//! it was loaded for and answered once on every in-sync replica; a reply without records
//! leaves after the writes not yet settled, with the outcome of the last (a refused
//! append settles at once). A shard
//! takes no request (answering NOT_COORDINATOR; the runtime queues them) and runs no
//! timer until what its load replayed is committed and confirmed by every in-sync
//! follower in its epoch (`Partition::confirmed_in_epoch`). The group coordinator
//! (group.rs) and the transaction coordinator (txn.rs) are both hosted so.

use strand_broker::partition::Partition;
use strand_coordinator::runtime::{Records, Write};
use strand_log::Clock;

use super::{Message, Node, World};

/// What a settled write leads to: an answer to send, or more for the world to do (the
/// transaction coordinator completing a transaction again).
pub(super) enum Settled {
    Nothing,
    Answer(i32, Message),
    Then(Box<dyn FnOnce(&mut World)>),
}

/// What runs once a write settled, with the shard and the write's outcome.
pub(super) type Reply<S> = Box<dyn FnOnce(&mut S, Result<(), i16>) -> Settled>;

/// A coordinator write held until it is on every in-sync replica, or a reply that wrote
/// nothing held until the write before it settles (the runtime answers it then, with
/// its own outcome, whatever the write's).
pub(super) struct CoordinatorWait<S> {
    node: i32,
    leader_epoch: i32,
    /// The write's end offset; None for a reply riding on the write before it.
    end: Option<i64>,
    /// When it was written (virtual ms): the runtime gives a write up after its
    /// timeout (REQUEST_TIMED_OUT), though the log may still commit it.
    written_ms: i64,
    reply: Reply<S>,
    correlation: u64,
    /// Flush before ack: until the write is on the leader's disk.
    durable: Option<strand_broker::partition::Durable>,
}

/// A coordinator the simulation hosts.
pub(super) trait Hosted: Sized + 'static {
    /// The partition it is hosted on (an index into `TOPICS`).
    const PARTITION: usize;
    /// How long the runtime waits for a write to commit (the broker's
    /// offsets.commit.timeout.ms, or the transaction coordinator's write timeout).
    const WRITE_TIMEOUT_MS: i64;
    /// A shard loaded from `replica`, led at `leader_epoch`, at wall-clock time `now`,
    /// and what the trace says of it.
    fn load(world: &World, replica: &Partition, leader_epoch: i32, now: i64) -> (Self, i64);
    fn slot(node: &mut Node) -> &mut Option<(i32, Self)>;
    fn waits(world: &mut World) -> &mut Vec<CoordinatorWait<Self>>;
    /// Its timer's work at wall-clock time `now` (sessions expiring, transactions past
    /// their timeout), answering nobody.
    fn tick(&mut self, now: i64) -> (Records, Reply<Self>);
    /// After node `id`'s shard changed (loaded, or a write settled).
    fn changed(_world: &mut World, _id: i32) {}
}

impl World {
    /// Every node leading `S`'s partition has a shard loaded for its leader epoch (a
    /// fresh replay of its replica when the epoch is new); the others have none.
    pub(super) fn load_hosted<S: Hosted>(&mut self) {
        for index in 0..self.nodes.len() {
            let id = self.nodes[index].id;
            let replica = self.replica(id, S::PARTITION);
            let epoch = replica.as_ref().and_then(|p| p.leader_epoch_if_leader());
            let loaded = S::slot(&mut self.nodes[index]).as_ref().map(|(e, _)| *e);
            if epoch == loaded {
                continue;
            }
            let (shard, tail) = match (epoch, replica) {
                (Some(epoch), Some(replica)) => {
                    let now = self.clocks[index].now_ms();
                    let (shard, summary) = S::load(self, &replica, epoch, now);
                    let end = replica.log().log_end_offset();
                    self.trace(&("coordinator loaded", S::PARTITION, id, epoch, summary, end));
                    let settled = replica.confirmed_through(end);
                    (Some((epoch, shard)), (!settled).then_some((epoch, end)))
                }
                _ => (None, None),
            };
            let loaded = shard.is_some();
            *S::slot(&mut self.nodes[index]) = shard;
            self.loading.retain(|l| (l.0, l.1) != (S::PARTITION, id));
            match tail {
                // Nothing runs (markers included) until the tail is committed.
                Some((leader_epoch, end)) => {
                    self.loading.push((S::PARTITION, id, leader_epoch, end))
                }
                None if loaded => S::changed(self, id),
                None => {}
            }
        }
    }

    /// `S`'s timer on every node hosting a shard, at that node's wall-clock time.
    pub(super) fn tick_hosted<S: Hosted>(&mut self) {
        for index in 0..self.nodes.len() {
            let id = self.nodes[index].id;
            let now = self.clocks[index].now_ms();
            let Some(replica) = self.replica(id, S::PARTITION) else {
                continue;
            };
            let Some((_, shard)) = self.hosted::<S>(id) else {
                continue;
            };
            let (records, reply) = shard.tick(now);
            self.coordinator_write::<S>(&replica, id, 0, records, reply);
        }
    }

    /// Node `id`'s shard of `S`, with the leader epoch it was loaded for (None while
    /// what its load replayed is not committed).
    pub(super) fn hosted<S: Hosted>(&mut self, id: i32) -> Option<&mut (i32, S)> {
        if self
            .loading
            .iter()
            .any(|l| (l.0, l.1) == (S::PARTITION, id))
        {
            return None;
        }
        let index = self.index(id);
        S::slot(&mut self.nodes[index]).as_mut()
    }

    /// Writes a shard's records on node `to` and holds `reply` until they are on every
    /// in-sync replica (at once if there are none); a refused or failed write is
    /// answered with its error.
    pub(super) fn coordinator_write<S: Hosted>(
        &mut self,
        partition: &Partition,
        to: i32,
        correlation: u64,
        records: Records,
        reply: Reply<S>,
    ) {
        let index = self.index(to);
        let now = self.clocks[index].now_ms();
        let Some(&mut (leader_epoch, _)) = self.hosted::<S>(to) else {
            return;
        };
        if records.is_empty() {
            // Nothing to write, but the answer may show what earlier writes not yet
            // settled did: it leaves after them, as the coordinator runtime's replies do.
            let written_ms = self.now_ms;
            let behind = S::waits(self)
                .iter()
                .any(|w| w.node == to && w.leader_epoch == leader_epoch);
            match behind {
                true => S::waits(self).push(CoordinatorWait {
                    node: to,
                    leader_epoch,
                    end: None,
                    written_ms,
                    reply,
                    correlation,
                    durable: None,
                }),
                false => self.settle(to, correlation, reply, Ok(())),
            }
            return;
        }
        let appended = strand_broker::shard_log::append_write(
            partition,
            leader_epoch,
            Write::Records(records),
            now,
        );
        let (info, durable) = match appended {
            Ok(appended) => appended,
            Err(refusal) => {
                if partition.log().offline_reason().is_some() {
                    self.replica_failed(to);
                }
                self.settle(to, correlation, reply, Err(refusal.code));
                return;
            }
        };
        if self.bugs.commits_answered_when_written {
            self.settle(to, correlation, reply, Ok(()));
            return;
        }
        self.trace(&("coordinator write", S::PARTITION, to, info.first_offset));
        let written_ms = self.now_ms;
        S::waits(self).push(CoordinatorWait {
            node: to,
            leader_epoch,
            end: Some(info.last_offset + 1),
            written_ms,
            reply,
            correlation,
            durable,
        });
    }

    /// Runs `reply` on node `id`'s shard with the write's outcome, and what it leads to.
    fn settle<S: Hosted>(
        &mut self,
        id: i32,
        correlation: u64,
        reply: Reply<S>,
        written: Result<(), i16>,
    ) {
        let Some((_, shard)) = self.hosted::<S>(id) else {
            return;
        };
        let settled = reply(shard, written);
        S::changed(self, id);
        match settled {
            Settled::Nothing => {}
            Settled::Answer(to, message) => {
                if let Message::HeartbeatAnswer { result } = &message {
                    self.trace(&("heartbeat answered", id, to, correlation, result));
                }
                self.send(id, to, correlation, S::PARTITION, message);
            }
            Settled::Then(then) => then(self),
        }
    }

    /// Coordinator writes on every in-sync replica are settled (the shard applies
    /// them); a coordinator that lost its epoch answers nothing (its shard is gone, and
    /// its replies with it: the client times out and finds the coordinator again).
    pub(super) fn answer_coordinator_waits<S: Hosted>(&mut self) {
        // Loads whose tail committed (or whose epoch is over) are done.
        for (partition, id, epoch, end) in std::mem::take(&mut self.loading) {
            if partition != S::PARTITION {
                self.loading.push((partition, id, epoch, end));
                continue;
            }
            let confirmed = self
                .replica(id, partition)
                .filter(|p| p.leader_epoch_if_leader() == Some(epoch))
                .map(|p| p.confirmed_through(end));
            match confirmed {
                Some(true) => S::changed(self, id),
                Some(false) => self.loading.push((partition, id, epoch, end)),
                None => {}
            }
        }
        // Writes settle in the order they were made, each after the one before (the
        // runtime awaits the oldest write in flight): a node's later waits stay behind
        // one still waiting.
        let mut behind = std::collections::BTreeSet::new();
        let mut kept = Vec::new();
        // Each node's last write settled in this pass: the replies riding on it get its
        // outcome (they may show what it changed), as the runtime's do.
        let mut outcomes: std::collections::BTreeMap<i32, Result<(), i16>> = Default::default();
        for mut wait in std::mem::take(S::waits(self)) {
            let loaded = self
                .hosted::<S>(wait.node)
                .is_some_and(|(epoch, _)| *epoch == wait.leader_epoch);
            if !loaded {
                // The shard is gone (its epoch over): the reply with it, but the write's
                // sync runs on, as the runtime's spawned commit does.
                if let Some(durable) = wait.durable.take() {
                    self.sync_in_background(wait.node, S::PARTITION, durable);
                }
                continue;
            }
            if behind.contains(&wait.node) {
                kept.push(wait);
                continue;
            }
            let Some(end) = wait.end else {
                // Rides on the write before it, which has settled.
                let written = outcomes.get(&wait.node).copied().unwrap_or(Ok(()));
                self.settle(wait.node, wait.correlation, wait.reply, written);
                continue;
            };
            if self.now_ms - wait.written_ms >= S::WRITE_TIMEOUT_MS {
                // Given up; the log may still commit it (the shard undoes what the
                // write would have done, as Kafka's coordinators do on a timeout).
                self.trace(&("coordinator write timed out", S::PARTITION, wait.node, end));
                let timed_out = Err(strand_broker::error_code::REQUEST_TIMED_OUT);
                outcomes.insert(wait.node, timed_out);
                self.settle(wait.node, wait.correlation, wait.reply, timed_out);
                continue;
            }
            // The runtime waits for the sync first, then for the replicas.
            if let Some(durable) = &wait.durable {
                match self.poll_leader_sync(wait.node, S::PARTITION, durable) {
                    None => {
                        behind.insert(wait.node);
                        kept.push(wait);
                        continue;
                    }
                    Some(Err(error)) => {
                        let code = strand_log::LogError::Io(error).kafka_error_code();
                        outcomes.insert(wait.node, Err(code));
                        self.settle(wait.node, wait.correlation, wait.reply, Err(code));
                        continue;
                    }
                    Some(Ok(())) => wait.durable = None,
                }
            }
            let high_watermark = self
                .replica(wait.node, S::PARTITION)
                .filter(|p| p.leader_epoch_if_leader() == Some(wait.leader_epoch))
                .map(|p| p.high_watermark());
            let loaded = self
                .hosted::<S>(wait.node)
                .is_some_and(|(epoch, _)| *epoch == wait.leader_epoch);
            match high_watermark {
                Some(hw) if loaded && hw >= end => {
                    outcomes.insert(wait.node, Ok(()));
                    self.settle(wait.node, wait.correlation, wait.reply, Ok(()))
                }
                Some(_) if loaded => {
                    behind.insert(wait.node);
                    kept.push(wait);
                }
                _ => {}
            }
        }
        // Writes the replies settled here made come after the ones still waiting.
        kept.append(S::waits(self));
        *S::waits(self) = kept;
    }
}
