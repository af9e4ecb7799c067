//! The transaction coordinator under the simulation: the leader of the
//! `__transaction_state` partition runs Strand's real `TxnShard` (transaction version 2),
//! loaded by the broker's own `txn::coordinator::load` (a replay of its replica, then the
//! markers of every transaction the log left prepared) whenever it becomes leader, and
//! hosted as the coordinator runtime hosts it (hosting.rs). The transactional producers
//! (clients.rs) ask it for their producer id and epoch (InitProducerId, with KIP-360's
//! expected id and epoch when they recover from a fenced transaction) and end their
//! transactions (EndTxn v5); the data partition's leader asks it to add the partition
//! before it appends a transaction's batch (AddPartitionsToTxn v5, KIP-890). It writes
//! each prepared transaction's marker to the data partition's leader, as the broker's
//! marker writer does (resent until answered; a fenced answer gives up), completes the
//! transaction once the marker is on every in-sync replica (again when the write must be
//! retried), and aborts the transactions past their timeout, on its node's wall clock.
//!
//! Invariants: a transaction's outcome, once a coordinator prepared it, never changes
//! (every coordinator preparing it again decides alike); an EndTxn answered is the
//! outcome asked for; at the end a coordinator loaded afresh has every transaction ended.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use strand_broker::error_code;
use strand_broker::partition::Partition;
use strand_coordinator::runtime::Records;
use strand_coordinator::txn::shard::{
    Completion, MarkerJob, MarkersOutcome, ProducerIdSource, ProducerReply, TxnSettings, TxnShard,
};
use strand_coordinator::txn::state::TxnState;
use strand_log::Clock;

use super::hosting::{CoordinatorWait, Hosted, Reply, Settled};
use super::{Message, Node, World, DATA, TXN};
use crate::controller::TOPIC;

/// The producers' transaction.timeout.ms, at the simulation's pace: a transaction left
/// open this long (or seen so through a node's wall clock jumping) is aborted.
pub(super) const TXN_TIMEOUT_MS: i32 = 10_000;
/// A marker unanswered this long is sent again.
const MARKER_TIMEOUT_MS: i64 = 1_000;
/// The cluster's transaction version (every end bumps the producer's epoch).
const TRANSACTION_VERSION: i16 = 2;

/// Producer ids that never repeat, as the controller's blocks hand them out.
#[derive(Debug)]
pub(super) struct SimProducerIds(AtomicI64);

impl SimProducerIds {
    pub(super) fn new() -> Arc<SimProducerIds> {
        Arc::new(SimProducerIds(AtomicI64::new(10_000)))
    }
}

impl ProducerIdSource for SimProducerIds {
    fn allocate(&self) -> Result<i64, i16> {
        Ok(self.0.fetch_add(1, Ordering::SeqCst))
    }
}

/// One prepared transaction's marker on its way, or its completion to write again.
#[derive(Debug)]
pub(super) struct MarkerSend {
    pub(super) node: i32,
    job: MarkerJob,
    /// When the marker last went out and its number (None: to send).
    sent: Option<(i64, u64)>,
    /// The marker is answered: the completion to write (again).
    answered: Option<MarkersOutcome>,
}

fn fresh_shard(world: &World, leader_epoch: i32) -> TxnShard {
    let settings = TxnSettings {
        transaction_version: TRANSACTION_VERSION,
        ..TxnSettings::default()
    };
    TxnShard::new(settings, leader_epoch, world.producer_ids.clone())
}

/// The transactional ids of the simulation's producers.
pub(super) fn transactional_id(client: i32) -> String {
    format!("sim-txn-{client}")
}

impl Hosted for TxnShard {
    const PARTITION: usize = TXN;
    const WRITE_TIMEOUT_MS: i64 = strand_broker::txn::coordinator::WRITE_TIMEOUT.as_millis() as i64;

    fn load(world: &World, replica: &Partition, leader_epoch: i32, _: i64) -> (TxnShard, i64) {
        let shard =
            strand_broker::txn::coordinator::load(replica, fresh_shard(world, leader_epoch));
        let known = world
            .producers
            .iter()
            .filter(|p| shard.get(&transactional_id(p.client)).is_some())
            .count();
        (shard, known as i64)
    }

    fn slot(node: &mut Node) -> &mut Option<(i32, TxnShard)> {
        &mut node.txn_coordinator
    }

    fn waits(world: &mut World) -> &mut Vec<CoordinatorWait<TxnShard>> {
        &mut world.txn_waits
    }

    /// Transactions past their timeout aborted.
    fn tick(&mut self, now: i64) -> (Records, Reply<TxnShard>) {
        let (records, answerer) = self.abort_timed_out(now);
        let reply: Reply<TxnShard> = Box::new(move |shard, written| {
            answerer(shard, written);
            Settled::Nothing
        });
        (records, reply)
    }

    /// The markers the shard queued (a PrepareX settled, or the load found one) go out.
    fn changed(world: &mut World, id: i32) {
        let Some((_, shard)) = world.hosted::<TxnShard>(id) else {
            return;
        };
        for job in shard.take_markers() {
            world.decided(&job);
            world.marker_sends.push(MarkerSend {
                node: id,
                job,
                sent: None,
                answered: None,
            });
            world.send_marker(world.marker_sends.len() - 1);
        }
    }
}

/// An InitProducerId or EndTxn answer.
fn producer_reply(
    to: i32,
    answerer: strand_coordinator::txn::shard::Answerer<ProducerReply>,
) -> Reply<TxnShard> {
    Box::new(move |shard, written| {
        let reply = answerer(shard, written);
        let result = match reply.code {
            error_code::NONE => Ok((reply.producer_id, reply.producer_epoch)),
            code => Err(code),
        };
        Settled::Answer(to, Message::ProducerAnswer { result })
    })
}

impl World {
    /// The coordinator on node `to` handles a request from `from` (a producer, or the
    /// data partition's leader adding it to a transaction).
    pub(super) fn handle_txn(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        message: Message,
    ) {
        let now = self.clocks[self.index(to)].now_ms();
        let Some((_, shard)) = self.hosted::<TxnShard>(to) else {
            let answer = match message {
                Message::AddPartition { .. } => Message::AddAnswer {
                    code: error_code::NOT_COORDINATOR,
                },
                _ => Message::ProducerAnswer {
                    result: Err(error_code::NOT_COORDINATOR),
                },
            };
            self.send(to, from, correlation, TXN, answer);
            return;
        };
        let (records, reply) = match message {
            Message::InitProducerId {
                transactional_id,
                expected,
            } => {
                let (records, answerer) =
                    shard.init_producer_id(&transactional_id, TXN_TIMEOUT_MS, expected, now);
                (records, producer_reply(from, answerer))
            }
            Message::EndTxn {
                transactional_id,
                producer_id,
                epoch,
                commit,
            } => {
                let (records, answerer) = shard.end_txn(
                    &transactional_id,
                    producer_id,
                    epoch,
                    commit,
                    TRANSACTION_VERSION,
                    now,
                );
                (records, producer_reply(from, answerer))
            }
            Message::AddPartition {
                transactional_id,
                producer_id,
                epoch,
            } => {
                let (records, answerer) = shard.add_partitions(
                    &transactional_id,
                    producer_id,
                    epoch,
                    vec![(TOPIC.to_string(), 0)],
                    TRANSACTION_VERSION,
                    now,
                );
                let reply: Reply<TxnShard> = Box::new(move |shard, written| {
                    let code = answerer(shard, written);
                    Settled::Answer(from, Message::AddAnswer { code })
                });
                (records, reply)
            }
            _ => return,
        };
        self.coordinator_write::<TxnShard>(partition, to, correlation, records, reply);
    }

    /// A coordinator prepared `job`'s transaction: its outcome is decided (and must be
    /// what any coordinator decided before). Under transaction version 2 the prepare
    /// carries the epoch after the one the producer's batches had.
    fn decided(&mut self, job: &MarkerJob) {
        let txn = self
            .txns
            .iter()
            .position(|t| t.producer_id == job.producer_id && t.epoch + 1 == job.producer_epoch);
        self.trace(&(
            "txn prepared",
            job.producer_id,
            job.producer_epoch,
            job.commit,
            txn,
        ));
        let Some(txn) = txn else {
            if !job.partitions.is_empty() {
                self.violation(format!(
                    "a coordinator prepared a transaction of producer {} at epoch {} with partitions {:?}, which no producer began",
                    job.producer_id, job.producer_epoch, job.partitions
                ));
            }
            return;
        };
        match self.txns[txn].decided {
            None => {
                self.txns[txn].decided = Some(job.commit);
                if job.commit {
                    self.outcome.txns_committed += 1;
                } else {
                    self.outcome.txns_aborted += 1;
                }
            }
            Some(before) if before != job.commit => self.violation(format!(
                "producer {}'s transaction at epoch {} was prepared to {} after it was prepared to {}",
                job.producer_id,
                job.producer_epoch - 1,
                if job.commit { "commit" } else { "abort" },
                if before { "commit" } else { "abort" },
            )),
            Some(_) => {}
        }
    }

    /// Sends marker `index` to the data partition's leader (none known: the next tick
    /// tries again); a job without partitions completes at once.
    fn send_marker(&mut self, index: usize) {
        if self.marker_sends[index].job.partitions.is_empty() {
            let send = self.marker_sends.swap_remove(index);
            self.complete(send.node, send.job, MarkersOutcome::Written);
            return;
        }
        let leader = self.controller.assignment(DATA).leader;
        if leader <= 0 {
            return;
        }
        let correlation = self.next_correlation();
        let send = &mut self.marker_sends[index];
        send.sent = Some((self.now_ms, correlation));
        let (from, job) = (send.node, &send.job);
        let message = Message::Marker {
            producer_id: job.producer_id,
            epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch: job.coordinator_epoch,
        };
        self.outcome.client_requests += 1;
        self.send(from, leader, correlation, DATA, message);
    }

    /// The data partition's leader answered a marker (the broker's marker writer's
    /// rules: written; fenced by a newer producer or coordinator, never completed here;
    /// anything else sent again).
    pub(super) fn marker_answer(&mut self, node: i32, correlation: u64, result: Result<i64, i16>) {
        let Some(index) = self
            .marker_sends
            .iter()
            .position(|s| s.node == node && s.sent.map(|(_, c)| c) == Some(correlation))
        else {
            return;
        };
        self.trace(&("marker answered", node, correlation, result));
        let outcome = match result {
            Ok(_) => MarkersOutcome::Written,
            Err(
                error_code::INVALID_PRODUCER_EPOCH | error_code::TRANSACTION_COORDINATOR_FENCED,
            ) => MarkersOutcome::Fenced,
            Err(_) => {
                self.marker_sends[index].sent = None;
                return;
            }
        };
        let send = self.marker_sends.swap_remove(index);
        self.complete(send.node, send.job, outcome);
    }

    /// Writes the CompleteCommit / CompleteAbort of `job` on node `id`'s coordinator; a
    /// write to retry comes back to the next tick.
    fn complete(&mut self, id: i32, job: MarkerJob, outcome: MarkersOutcome) {
        let now = self.clocks[self.index(id)].now_ms();
        let Some((epoch, shard)) = self.hosted::<TxnShard>(id) else {
            return;
        };
        if *epoch != job.coordinator_epoch {
            return;
        }
        let (records, answerer) = shard.markers_written(&job, outcome, now);
        let reply: Reply<TxnShard> = Box::new(move |shard, written| {
            let completion = answerer(shard, written);
            let what = (job.producer_id, job.producer_epoch, written, completion);
            match completion {
                Completion::Retry => Settled::Then(Box::new(move |world: &mut World| {
                    world.marker_sends.push(MarkerSend {
                        node: id,
                        job,
                        sent: None,
                        answered: Some(outcome),
                    })
                })),
                Completion::Done | Completion::GiveUp => {
                    Settled::Then(Box::new(move |world: &mut World| {
                        world.trace(&("completed", format!("{what:?}")))
                    }))
                }
            }
        });
        let Some(replica) = self.replica(id, TXN) else {
            return;
        };
        self.coordinator_write::<TxnShard>(&replica, id, 0, records, reply);
    }

    /// The transaction coordinators' periodic work: transactions past their timeout
    /// aborted; markers overdue sent again, completions to retry written again (a
    /// coordinator that lost its epoch drops its own: its successor resumes them).
    pub(super) fn txn_tick(&mut self) {
        self.tick_hosted::<TxnShard>();
        let now = self.now_ms;
        for send in std::mem::take(&mut self.marker_sends) {
            let epoch = send.job.coordinator_epoch;
            let current = self
                .hosted::<TxnShard>(send.node)
                .is_some_and(|(e, _)| *e == epoch);
            if !current {
                continue;
            }
            if let Some(outcome) = send.answered {
                self.complete(send.node, send.job, outcome);
                continue;
            }
            let due = send
                .sent
                .is_none_or(|(at, _)| now - at >= MARKER_TIMEOUT_MS);
            self.marker_sends.push(send);
            if due {
                self.send_marker(self.marker_sends.len() - 1);
            }
        }
    }

    /// Nothing left for the coordinators to send or complete.
    pub(super) fn markers_settled(&self) -> bool {
        self.marker_sends.is_empty()
    }

    /// At the end: a coordinator loaded afresh from the settled replica has every
    /// producer's transaction ended (no transaction left open or prepared).
    pub(super) fn check_txn_final(&mut self) {
        let leader = self.controller.assignment(TXN).leader;
        let Some(replica) = (leader > 0).then(|| self.replica(leader, TXN)).flatten() else {
            return;
        };
        let shard = strand_broker::txn::coordinator::load(&replica, fresh_shard(self, 0));
        for client in self.producers.iter().map(|p| p.client).collect::<Vec<_>>() {
            let id = transactional_id(client);
            if let Some(metadata) = shard.get(&id) {
                if !matches!(
                    metadata.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) {
                    self.violation(format!(
                        "at the end {id}'s transaction (producer {}, epoch {}) is {:?} in the coordinator's log",
                        metadata.producer_id, metadata.producer_epoch, metadata.state
                    ));
                }
            }
        }
    }
}
