//! One partition hosted on this broker: its log, its place in replication, and the
//! requests waiting on it.
//!
//! Replication (Kafka's `Partition`): the metadata image says who leads, at which leader
//! epoch, and which replicas are in sync (`Assignment`). As leader, the partition tracks
//! each follower's log end offset from its fetches; the high watermark is the lowest log
//! end offset across the ISR (never moving back); acks=all producers wait until it passes
//! their batch. ISR changes are proposed to the controller and take effect only when it
//! commits them; meanwhile the high watermark counts the union of the old and proposed
//! ISR, so a shrink cannot expose records that only the removed follower lacked (Kafka's
//! "maximal ISR"). As follower, it appends what the leader sends, keeping the leader's
//! offsets and epochs, and takes the leader's high watermark (capped by its own end).
//!
//! On a single node the assignment is this node alone: leader, whole ISR, high watermark
//! = log end offset.
//!
//! Thread-safe: the log behind a std mutex held only for in-memory work and one
//! page-cache write (durability waits happen outside it on a blocking thread); the
//! replication state behind its own mutex. One lock order: replication, then log. Every
//! write checks the role and epoch it writes for and writes under the replication lock
//! (`write_as_leader`, `write_as_follower`), so no role change or truncation can come
//! between the check and the write (as Kafka holds leaderIsrUpdateLock across both). The
//! log lock is never held while taking the replication lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use strand_log::{
    AppendInfo, Durability, DurableState, Log, LogConfig, LogError, LogResult, Origin, ReadResult,
    TopicPartition,
};
use tokio::sync::{watch, Notify};

use crate::error_code;
use crate::metrics::topic::PartitionCounters;
use crate::metrics::Summary;

/// A pending durability wait: everything below `end` must reach the disk.
#[derive(Debug)]
pub struct Durable {
    gate: Arc<strand_log::SyncGate>,
    end: i64,
    /// LogFlushRateAndTimeMs: the syncs this wait runs.
    flush_ms: Arc<Summary>,
}

impl Durable {
    /// What an append must wait for before its answer, by the topic's durability.
    fn after(
        durability: Durability,
        gate: Arc<strand_log::SyncGate>,
        info: &AppendInfo,
        counters: &PartitionCounters,
    ) -> Option<Durable> {
        (durability == Durability::FlushBeforeAck).then(|| Durable {
            gate,
            end: info.last_offset + 1,
            flush_ms: counters.flush_ms.clone(),
        })
    }

    /// Starts waiting now, as a task of its own, so a request touching several
    /// partitions has all their syncs under way at once.
    pub fn start(self) -> DurableWait {
        DurableWait(tokio::spawn(self.wait()))
    }

    /// `start` for a leader's append: once synced, `partition`'s high watermark counts
    /// it (a leader's own log counts only as far as synced), even if nobody awaits the
    /// wait any more (an answer dropped with its connection, a write timed out).
    pub fn start_for(self, partition: Arc<Partition>) -> DurableWait {
        DurableWait(tokio::spawn(async move {
            let synced = self.wait().await;
            if synced.is_ok() {
                partition.advance_high_watermark();
            }
            synced
        }))
    }

    /// Without blocking: durable, parked with `waker`, or the sync the caller must run
    /// (`wait` runs it on a blocking thread; the simulator when its disk says so).
    pub fn poll(&self, waker: &std::task::Waker) -> DurableState {
        self.gate.poll_durable(self.end, waker)
    }

    /// Waits until the data is synced, holding no thread while it waits: the gate
    /// parks this task, or hands it the sync to run on a blocking thread. One sync runs
    /// per partition at a time, so however many requests wait on a partition's disk, it
    /// costs the blocking pool one thread at most (its queue is bounded by the
    /// partitions).
    pub async fn wait(self) -> LogResult<()> {
        loop {
            let state = std::future::poll_fn(|cx| match self.poll(cx.waker()) {
                DurableState::Pending => std::task::Poll::Pending,
                other => std::task::Poll::Ready(other),
            })
            .await;
            match state {
                DurableState::Ready(result) => return result.map_err(LogError::Io),
                DurableState::SyncNow(ticket) => {
                    let flush_ms = self.flush_ms.clone();
                    tokio::task::spawn_blocking(move || timed_flush(&flush_ms, || ticket.run()))
                        .await
                        .map_err(|error| LogError::Io(std::io::Error::other(error)))?;
                }
                DurableState::Pending => unreachable!("polled until not pending"),
            }
        }
    }
}

/// Runs a flush (fsyncs), its time recorded in `flush_ms` (LogFlushRateAndTimeMs).
pub fn timed_flush<T>(flush_ms: &Summary, flush: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let result = flush();
    flush_ms.record_duration(started.elapsed());
    result
}

/// A flush.messages / flush.ms flush if one is due, its time recorded if it ran.
pub fn flush_if_due_timed(log: &Mutex<Log>, flush_ms: &Summary) -> LogResult<bool> {
    let started = std::time::Instant::now();
    let ran = strand_log::flush_if_due(log);
    if matches!(ran, Ok(true)) {
        flush_ms.record_duration(started.elapsed());
    }
    ran
}

/// What a follower append wrote, and the sync to wait for before the next fetch says so.
#[derive(Debug)]
pub struct FollowerAppend {
    pub info: Option<AppendInfo>,
    pub durable: Option<Durable>,
}

/// A started durability wait.
#[derive(Debug)]
pub struct DurableWait(tokio::task::JoinHandle<LogResult<()>>);

impl DurableWait {
    pub async fn finish(self) -> LogResult<()> {
        self.0
            .await
            .map_err(|error| LogError::Io(std::io::Error::other(error)))?
    }
}

/// Fetches that may wait on one partition at once: one per connection at most, so this
/// is reached only with that many connections fetching the same partition.
pub const PARKED_FETCHES_MAX: usize = 10_000;

/// Pause before proposing again after the controller refused an ISR change.
const ISR_PROPOSAL_BACKOFF: Duration = Duration::from_millis(500);

/// The partition's replication as the metadata image states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966): a replica here whose log fails reports it too.
    pub elr: Vec<i32>,
}

impl From<&strand_metadata::PartitionState> for Assignment {
    /// The image's view of a partition.
    fn from(state: &strand_metadata::PartitionState) -> Assignment {
        Assignment {
            leader: state.leader,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            replicas: state.replicas.clone(),
            isr: state.isr.clone(),
            elr: state.elr.clone(),
        }
    }
}

impl Assignment {
    /// Not yet assigned (a partition just opened, before the image's view is applied).
    pub fn none() -> Assignment {
        Assignment {
            leader: -1,
            leader_epoch: -1,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            elr: Vec::new(),
        }
    }

    /// A single node's partition: it alone leads and is in sync.
    pub fn local(node_id: i32) -> Assignment {
        Assignment {
            leader: node_id,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![node_id],
            isr: vec![node_id],
            elr: Vec::new(),
        }
    }
}

/// What a leader knows of one follower.
#[derive(Debug, Clone, Copy)]
struct FollowerProgress {
    /// The follower's log end offset (its last fetch offset); -1 before its first fetch.
    log_end_offset: i64,
    /// Last time the follower had everything the leader had at its previous fetch.
    last_caught_up: Instant,
    /// The leader's log end offset at the follower's previous fetch, and when.
    leader_end_at_last_fetch: i64,
    last_fetch: Instant,
}

impl FollowerProgress {
    fn new(now: Instant) -> FollowerProgress {
        FollowerProgress {
            log_end_offset: -1,
            last_caught_up: now,
            leader_end_at_last_fetch: -1,
            last_fetch: now,
        }
    }
}

#[derive(Debug)]
struct Replication {
    assignment: Assignment,
    followers: HashMap<i32, FollowerProgress>,
    /// An ISR change sent to the controller and not yet seen in the image.
    pending_isr: Option<Vec<i32>>,
    /// After a refused proposal, none is made before this (the controller may refuse for
    /// a while, e.g. while a restarted follower is still fenced).
    isr_retry_at: Option<Instant>,
    /// The log end offset when this broker became leader: a follower joins the ISR only
    /// once it reaches it (it then has every record of earlier epochs).
    leader_start_offset: i64,
}

impl Replication {
    fn is_leader(&self, node_id: i32) -> bool {
        self.assignment.leader == node_id
    }

    /// No proposal is in flight and none was refused too recently.
    fn may_propose(&self, now: Instant) -> bool {
        self.pending_isr.is_none() && self.isr_retry_at.is_none_or(|at| now >= at)
    }

    /// The ISR the high watermark must respect: committed plus any pending change.
    fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.assignment.isr.clone();
        for id in self.pending_isr.iter().flatten() {
            if !isr.contains(id) {
                isr.push(*id);
            }
        }
        isr
    }

    /// The lowest log end the in-sync followers (of `maximal_isr`, `node_id` being the
    /// leader) reported in this epoch; i64::MAX with none, None while one has not
    /// fetched yet. What the high watermark and `confirmed_in_epoch` are bounded by.
    fn isr_followers_end(&self, node_id: i32) -> Option<i64> {
        let mut end = i64::MAX;
        for id in self.maximal_isr() {
            if id != node_id {
                end = end.min(self.followers.get(&id)?.log_end_offset);
            }
        }
        Some(end)
    }
}

/// A refusal with a Kafka error code, its message and, for a produced batch some of
/// whose records broke the topic's rules, those records (KIP-467 record_errors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusal {
    pub code: i16,
    pub message: Option<String>,
    pub record_errors: Vec<strand_log::RecordError>,
}

impl Refusal {
    pub fn new(code: i16, message: Option<String>) -> Refusal {
        Refusal {
            code,
            message,
            record_errors: Vec::new(),
        }
    }
}

impl From<LogError> for Refusal {
    fn from(error: LogError) -> Refusal {
        let code = error.kafka_error_code();
        match error {
            LogError::RecordErrors {
                message, records, ..
            } => Refusal {
                code,
                message: Some(message),
                record_errors: records,
            },
            error => Refusal::new(code, Some(error.to_string())),
        }
    }
}

/// A precondition an append checks on the log, under the log's lock.
type LogCheck<'a> = dyn Fn(&Log) -> Result<(), Refusal> + 'a;

/// How a partition's role changed when an assignment was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleChange {
    /// Leader or follower as before, same epoch (an ISR change, say).
    Unchanged,
    BecameLeader,
    /// Now follows `leader` at `leader_epoch`; must truncate by epoch before fetching.
    BecameFollower {
        leader: i32,
        leader_epoch: i32,
    },
}

#[derive(Debug)]
pub struct Partition {
    pub tp: TopicPartition,
    node_id: i32,
    log: Arc<Mutex<Log>>,
    parked_fetches: Mutex<Vec<Arc<Notify>>>,
    /// A fetch's read that missed the page cache, being warmed (`cold_reads`).
    warming: crate::cold_reads::Warming,
    /// min.insync.replicas of the topic (changed by AlterConfigs).
    min_insync_replicas: AtomicI32,
    replication: Mutex<Replication>,
    /// The high watermark, for acks=all producers waiting on it.
    high_watermark: watch::Sender<i64>,
    /// A flush (flush.messages, flush.ms) is running on a blocking thread.
    flushing: Arc<AtomicBool>,
    /// The newest acks=0 produce's sync nobody answers after, and whether a task
    /// follows them (`follow_unanswered_sync`).
    unanswered_sync: Mutex<Option<Durable>>,
    following_syncs: AtomicBool,
    /// The (leader epoch, partition epoch) this replica's failure was last reported in.
    failure_reported: Mutex<Option<(i32, i32)>>,
    /// What its producers and consumers moved, its ISR changes and flush times.
    counters: PartitionCounters,
    /// As a follower: the leader's high watermark in its last fetch answer (a scrape
    /// derives FetcherLagMetrics ConsumerLag from it and the log end).
    leader_high_watermark: std::sync::atomic::AtomicI64,
    /// The time for ISR lag and proposal back-off: the real clock, or a simulation's.
    clock: Arc<dyn MonotonicClock>,
    /// Tests run this between a leader write's role check and the write itself.
    #[cfg(test)]
    before_leader_write: TestHook,
}

/// Where a partition reads the time; `std::time::Instant::now` outside simulations.
pub trait MonotonicClock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Instant;
}

#[derive(Debug)]
struct SystemMonotonic;

impl MonotonicClock for SystemMonotonic {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[cfg(test)]
#[derive(Default)]
struct TestHook(Mutex<Option<Box<dyn FnOnce() + Send>>>);

#[cfg(test)]
impl std::fmt::Debug for TestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestHook")
    }
}

impl Partition {
    pub fn new(
        tp: TopicPartition,
        log: Arc<Mutex<Log>>,
        min_insync_replicas: i32,
        node_id: i32,
        assignment: Assignment,
    ) -> Partition {
        let (high_watermark, log_end) = {
            let log = log.lock().unwrap_or_else(|p| p.into_inner());
            (log.high_watermark(), log.log_end_offset())
        };
        let partition = Partition {
            tp,
            node_id,
            log,
            parked_fetches: Mutex::new(Vec::new()),
            warming: crate::cold_reads::Warming::default(),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
            replication: Mutex::new(Replication {
                assignment: Assignment::none(),
                followers: HashMap::new(),
                pending_isr: None,
                isr_retry_at: None,
                leader_start_offset: log_end,
            }),
            high_watermark: watch::Sender::new(high_watermark),
            flushing: Arc::new(AtomicBool::new(false)),
            unanswered_sync: Mutex::new(None),
            following_syncs: AtomicBool::new(false),
            failure_reported: Mutex::new(None),
            counters: PartitionCounters::detached(),
            leader_high_watermark: std::sync::atomic::AtomicI64::new(0),
            clock: Arc::new(SystemMonotonic),
            #[cfg(test)]
            before_leader_write: TestHook::default(),
        };
        partition.apply_assignment(assignment);
        partition
    }

    /// Counts this partition's traffic in `counters` (the broker's metrics).
    pub fn with_counters(mut self, counters: PartitionCounters) -> Partition {
        self.counters = counters;
        self
    }

    pub fn counters(&self) -> &PartitionCounters {
        &self.counters
    }

    /// A follower's fetch answer said the leader's high watermark is `offset`.
    pub fn saw_leader_high_watermark(&self, offset: i64) {
        self.leader_high_watermark.store(offset, Ordering::Relaxed);
    }

    /// The leader's high watermark as this follower last heard it.
    pub fn leader_high_watermark(&self) -> i64 {
        self.leader_high_watermark.load(Ordering::Relaxed)
    }

    pub fn min_insync_replicas(&self) -> i32 {
        self.min_insync_replicas.load(Ordering::Relaxed)
    }

    /// Applies changed topic configs (AlterConfigs) without a restart.
    pub fn apply_configs(&self, log_config: Arc<LogConfig>, min_insync_replicas: i32) {
        self.log().set_config(log_config);
        self.min_insync_replicas
            .store(min_insync_replicas, Ordering::Relaxed);
    }

    pub fn log(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn replication(&self) -> MutexGuard<'_, Replication> {
        self.replication
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn assignment(&self) -> Assignment {
        self.replication().assignment.clone()
    }

    /// The leader epoch if this broker leads the partition.
    pub fn leader_epoch_if_leader(&self) -> Option<i32> {
        let replication = self.replication();
        replication
            .is_leader(self.node_id)
            .then_some(replication.assignment.leader_epoch)
    }

    fn not_leader(&self) -> Refusal {
        Refusal::new(
            error_code::NOT_LEADER_OR_FOLLOWER,
            Some(format!("This broker is not the leader of {}", self.tp)),
        )
    }

    /// Checks a client's `current_leader_epoch` (-1: not given) against ours.
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), i16> {
        let current = self.replication().assignment.leader_epoch;
        if requested < 0 || requested == current {
            Ok(())
        } else if requested > current {
            Err(error_code::UNKNOWN_LEADER_EPOCH)
        } else {
            Err(error_code::FENCED_LEADER_EPOCH)
        }
    }

    /// Reads the time from `clock` instead of the system's (the simulator's virtual time).
    pub fn with_clock(mut self, clock: Arc<dyn MonotonicClock>) -> Partition {
        self.clock = clock;
        self
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Takes the image's view of this partition. Returns how the role changed.
    pub fn apply_assignment(&self, assignment: Assignment) -> RoleChange {
        let now = self.now();
        let log_end = self.log().log_end_offset();
        let change = {
            let mut replication = self.replication();
            let was_leader = replication.is_leader(self.node_id);
            let same_epoch = replication.assignment.leader_epoch == assignment.leader_epoch;
            let leads = assignment.leader == self.node_id;
            let same_leadership = same_epoch && replication.assignment.leader == assignment.leader;
            let change = if leads && !(was_leader && same_epoch) {
                replication.followers = assignment
                    .replicas
                    .iter()
                    .filter(|&&id| id != self.node_id)
                    .map(|&id| (id, FollowerProgress::new(now)))
                    .collect();
                replication.leader_start_offset = log_end;
                // Its epoch is in the cache from now, not from its first append: the
                // simulator found a follower, asking before that, told "undefined" and
                // cutting committed records (its high watermark lagged), which the next
                // election then lost.
                if let Err(error) = self.log().begin_leader_epoch(assignment.leader_epoch) {
                    tracing::error!(partition = %self.tp, %error, "recording the new leader epoch failed");
                }
                RoleChange::BecameLeader
            } else if !leads && !same_leadership {
                replication.followers.clear();
                RoleChange::BecameFollower {
                    leader: assignment.leader,
                    leader_epoch: assignment.leader_epoch,
                }
            } else {
                RoleChange::Unchanged
            };
            if leads {
                // Replicas added or removed since: follow the assignment.
                replication
                    .followers
                    .retain(|id, _| assignment.replicas.contains(id));
                for &id in &assignment.replicas {
                    if id != self.node_id {
                        replication
                            .followers
                            .entry(id)
                            .or_insert_with(|| FollowerProgress::new(now));
                    }
                }
            }
            if leads && was_leader && same_epoch {
                // IsrShrinksPerSec / IsrExpandsPerSec: the ISR of a partition led here
                // changed (Kafka counts it on the leader too).
                let (before, after) = (replication.assignment.isr.len(), assignment.isr.len());
                if after < before {
                    self.counters.isr_shrunk();
                } else if after > before {
                    self.counters.isr_expanded();
                }
            }
            if replication.pending_isr.is_some()
                && (change != RoleChange::Unchanged
                    || assignment.partition_epoch != replication.assignment.partition_epoch)
            {
                // The controller decided (or someone else's change won): either way the
                // image is now the truth and the proposal is over.
                replication.pending_isr = None;
            }
            replication.assignment = assignment;
            change
        };
        if self.leader_epoch_if_leader().is_some() {
            self.advance_high_watermark();
        }
        if change != RoleChange::Unchanged {
            // Parked fetches and acks=all waiters re-check leadership. The published high
            // watermark catches up with the log's: as a follower it moved with the
            // leader's without being published, and a new leader whose followers are
            // already level never advances it, so an idempotent retry of a batch below
            // it (answered as a duplicate, nothing appended) waited on the value from
            // when this replica last led, timed out, and was retried forever (found by
            // the simulator's idempotent producers).
            self.wake_parked_fetches();
            let high_watermark = self.log().high_watermark();
            self.high_watermark.send_replace(high_watermark);
        }
        change
    }

    /// Appends the broker's own batch as leader (the group coordinator's records): in
    /// flush-before-ack mode waits (off the async runtime, outside the log lock) until
    /// it is on disk, and then, as acks=all, until every in-sync replica has it.
    pub async fn append(
        &self,
        batch: Vec<u8>,
        wait_for_durability: bool,
        replication_timeout: Duration,
    ) -> Result<AppendInfo, Refusal> {
        let epoch = self
            .leader_epoch_if_leader()
            .ok_or_else(|| self.not_leader())?;
        let (info, durable) = self.append_unsynced(batch, -1)?;
        if let (true, Some(durable)) = (wait_for_durability, durable) {
            durable.wait().await.map_err(Refusal::from)?;
        }
        self.wait_for_replication(info.last_offset + 1, epoch, replication_timeout)
            .await?;
        Ok(info)
    }

    /// Appends as leader without waiting for the disk; for flush-before-ack topics also
    /// returns what to wait on, so a request touching several partitions waits for all
    /// their syncs at once. acks=-1 is refused while the ISR is below min.insync.replicas.
    pub fn append_unsynced(
        &self,
        batch: Vec<u8>,
        acks: i16,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        self.append_as_leader_in(batch, acks, None, Origin::Client)
    }

    /// `append_unsynced`, only while this broker leads at `leader_epoch` (a coordinator
    /// loaded for that epoch must not write into a later one).
    pub fn append_unsynced_in_epoch(
        &self,
        batch: Vec<u8>,
        acks: i16,
        leader_epoch: i32,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        self.append_as_leader_in(batch, acks, Some(leader_epoch), Origin::Client)
    }

    /// `append_unsynced` for a producer's transactional batch, checked under the log's
    /// lock: it joins the producer's transaction open here at its epoch, or opens one
    /// only if the producer's last offset here is still `expected` (what it was when the
    /// coordinator verified the partition; `Some(i64::MIN)`: nothing was verified, so it
    /// may only join). Otherwise INVALID_TXN_STATE, nothing written.
    pub fn append_transactional(
        &self,
        batch: Vec<u8>,
        acks: i16,
        (producer_id, producer_epoch, expected): (i64, i16, Option<i64>),
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        let check = move |log: &Log| {
            let entry = log.producer_state().get(producer_id);
            // The epoch first (KAFKA-19690, in Kafka 4.1.1): a batch of a transaction the
            // coordinator already ended (its marker bumped the epoch) is a fenced producer,
            // which clients recover from, not the fatal INVALID_TXN_STATE.
            if let Some(current) = entry.map(|e| e.epoch).filter(|e| *e > producer_epoch) {
                return Err(Refusal::new(
                    error_code::INVALID_PRODUCER_EPOCH,
                    Some(format!(
                        "Epoch of producer {producer_id} is {producer_epoch}, which is smaller than the last seen epoch {current}"
                    )),
                ));
            }
            let open = entry
                .is_some_and(|e| e.epoch == producer_epoch && e.current_txn_first_offset.is_some());
            if open || entry.map(|e| e.last_offset) == expected {
                Ok(())
            } else {
                Err(Refusal::new(
                    error_code::INVALID_TXN_STATE,
                    Some("Record was not part of an ongoing transaction".into()),
                ))
            }
        };
        self.append_checked(batch, acks, None, Origin::Client, Some(&check))
    }

    /// `append_unsynced_in_epoch` for a coordinator's transactional batch (its producer's
    /// epoch is checked, not its sequence).
    pub fn append_for_coordinator_in_epoch(
        &self,
        batch: Vec<u8>,
        leader_epoch: i32,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        self.append_as_leader_in(batch, -1, Some(leader_epoch), Origin::Coordinator)
    }

    fn append_as_leader_in(
        &self,
        batch: Vec<u8>,
        acks: i16,
        expected_epoch: Option<i32>,
        origin: Origin,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        self.append_checked(batch, acks, expected_epoch, origin, None)
    }

    /// An append as leader; `check` (if any) runs on the log under its lock first.
    fn append_checked(
        &self,
        mut batch: Vec<u8>,
        acks: i16,
        expected_epoch: Option<i32>,
        origin: Origin,
        check: Option<&LogCheck<'_>>,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        let min_isr = self.min_insync_replicas();
        let (info, gate, durability) = self.write_as_leader(|replication, log| {
            if expected_epoch.is_some_and(|e| e != replication.assignment.leader_epoch) {
                return Err(self.not_leader());
            }
            if let Some(check) = check {
                check(log)?;
            }
            let isr = replication.assignment.isr.len() as i32;
            if acks == -1 && isr < min_isr {
                return Err(Refusal::new(
                    error_code::NOT_ENOUGH_REPLICAS,
                    Some(format!(
                        "The size of the current ISR {isr} is insufficient to satisfy the min.isr requirement of {min_isr} for partition {}",
                        self.tp
                    )),
                ));
            }
            let info = log
                .append_as_leader_from(&mut batch, replication.assignment.leader_epoch, origin)
                .map_err(Refusal::from)?;
            if log.flush_requested() {
                self.flush_off_request_path();
            }
            Ok((info, log.sync_gate(), log.config().durability))
        })?;
        self.advance_high_watermark();
        self.wake_parked_fetches();
        Ok((
            info,
            Durable::after(durability, gate, &info, &self.counters),
        ))
    }

    /// DeleteRecords as leader: moves the log start to `offset` (-1: the high watermark),
    /// which may not pass the high watermark. Returns the new log start.
    pub fn delete_records(&self, offset: i64) -> Result<i64, i16> {
        self.write_as_leader(|_, log| {
            let high_watermark = log.high_watermark();
            let target = if offset == -1 { high_watermark } else { offset };
            if target < 0 || target > high_watermark {
                return Err(Refusal::new(error_code::OFFSET_OUT_OF_RANGE, None));
            }
            log.delete_before(target)
                .map_err(|error| Refusal::new(error.kafka_error_code(), None))?;
            Ok(log.log_start_offset())
        })
        .map_err(|refusal| refusal.code)
    }

    /// flush.messages / flush.ms asked for a flush: it runs on a blocking thread, one per
    /// partition at a time, holding the log's lock only to plan and complete it, so its
    /// fsyncs stall neither this request nor a runtime worker. Without a runtime (tools,
    /// tests) the next `maintenance` runs it.
    fn flush_off_request_path(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.flushing.swap(true, Ordering::SeqCst) {
            return; // the running flush's loop sees the new request
        }
        let (log, flushing, tp) = (self.log.clone(), self.flushing.clone(), self.tp.clone());
        let flush_ms = self.counters.flush_ms.clone();
        runtime.spawn_blocking(move || loop {
            let ran = flush_if_due_timed(&log, &flush_ms).unwrap_or_else(|error| {
                tracing::error!(partition = %tp, %error, "flush failed");
                false
            });
            flushing.store(false, Ordering::SeqCst);
            if !ran {
                return; // another flush runs; the next append or maintenance follows up
            }
            let again = log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .flush_requested();
            if !again || flushing.swap(true, Ordering::SeqCst) {
                return;
            }
        });
    }

    /// Runs `write` on the log only while this broker leads the partition, holding the
    /// replication state across the check and the write: a demotion (and the truncation
    /// that follows it as a follower) cannot slip in between and let an old epoch's
    /// batch into a follower's log.
    /// Writes a transaction marker as leader (what WriteTxnMarkers does on each partition
    /// of a transaction). Its durability is awaited like a produce's (`Durable`, and
    /// `wait_for_replication` for the ISR).
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: strand_records::EndTxnMarker,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        self.append_marker_in(producer_id, producer_epoch, marker, None)
    }

    /// `append_marker`, only while this broker leads at `leader_epoch` (the group
    /// coordinator's shard writes the markers of its partition).
    pub fn append_marker_in(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: strand_records::EndTxnMarker,
        leader_epoch: Option<i32>,
    ) -> Result<(AppendInfo, Option<Durable>), Refusal> {
        let (info, gate, durability) = self.write_as_leader(|replication, log| {
            if leader_epoch.is_some_and(|e| e != replication.assignment.leader_epoch) {
                return Err(self.not_leader());
            }
            let (info, _) = log
                .append_marker(
                    producer_id,
                    producer_epoch,
                    marker,
                    replication.assignment.leader_epoch,
                )
                .map_err(Refusal::from)?;
            Ok((info, log.sync_gate(), log.config().durability))
        })?;
        self.advance_high_watermark();
        self.wake_parked_fetches();
        Ok((
            info,
            Durable::after(durability, gate, &info, &self.counters),
        ))
    }

    fn write_as_leader<T>(
        &self,
        write: impl FnOnce(&Replication, &mut Log) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        let replication = self.replication();
        if !replication.is_leader(self.node_id) {
            return Err(self.not_leader());
        }
        #[cfg(test)]
        if let Some(hook) = self
            .before_leader_write
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            hook();
        }
        let mut log = self.log();
        let result = write(&replication, &mut log);
        drop(log);
        drop(replication);
        result
    }

    /// acks=all: waits until the high watermark passes `end_offset` (exclusive), then
    /// checks the ISR still meets min.insync.replicas (Kafka answers
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND otherwise). Gives up at `timeout`
    /// (REQUEST_TIMED_OUT) or when leadership moves (NOT_LEADER_OR_FOLLOWER).
    pub async fn wait_for_replication(
        &self,
        end_offset: i64,
        leader_epoch: i32,
        timeout: Duration,
    ) -> Result<(), Refusal> {
        // The caller's sync (flush before ack) may have ended since the followers last
        // fetched: what they confirmed may now be committed.
        self.advance_high_watermark();
        let mut watcher = self.high_watermark.subscribe();
        let wait = watcher.wait_for(|&hw| {
            hw >= end_offset || self.leader_epoch_if_leader() != Some(leader_epoch)
        });
        match tokio::time::timeout(timeout, wait).await {
            Err(_) => {
                return Err(Refusal::new(
                    error_code::REQUEST_TIMED_OUT,
                    Some(format!(
                    "Timed out waiting for the in-sync replicas of {} to reach offset {end_offset}",
                    self.tp
                )),
                ))
            }
            Ok(Err(_)) => return Err(self.not_leader()),
            Ok(Ok(_)) => {}
        }
        if self.leader_epoch_if_leader() != Some(leader_epoch) {
            return Err(self.not_leader());
        }
        let isr = self.replication().assignment.isr.len() as i32;
        let min_isr = self.min_insync_replicas();
        if isr < min_isr {
            return Err(Refusal::new(
                error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                Some(format!(
                    "The size of the current ISR {isr} is insufficient to satisfy the min.isr requirement of {min_isr} for partition {}",
                    self.tp
                )),
            ));
        }
        Ok(())
    }

    /// Flush before ack: the sync a follower must finish before its next fetch tells the
    /// leader its log end, if part of its log is not on disk yet: what it wrote as
    /// leader, whose syncs may still run when it becomes a follower (the simulator found
    /// a new leader counting such a tail as committed; the follower then lost it with its
    /// power). None with the page cache, or when everything is synced.
    pub fn unsynced_tail(&self) -> Option<Durable> {
        self.unsynced_tail_of(&self.log())
    }

    /// `unsynced_tail` under the caller's lock of this partition's log.
    pub fn unsynced_tail_of(&self, log: &Log) -> Option<Durable> {
        let end = log.log_end_offset();
        (log.durable_end_offset() < end).then(|| Durable {
            gate: log.sync_gate(),
            end,
            flush_ms: self.counters.flush_ms.clone(),
        })
    }

    /// An acks=0 produce's sync on a flush-before-ack topic: no answer waits for it, yet
    /// the high watermark counts the leader's log only as far as it is synced. One task
    /// per partition follows the newest such sync (each covers every offset before it)
    /// and moves the high watermark when it ends: one task, however many requests.
    pub fn follow_unanswered_sync(self: &Arc<Self>, durable: Durable) {
        if tokio::runtime::Handle::try_current().is_err() {
            return; // no runtime (tools, tests): nothing to follow it with
        }
        *self
            .unanswered_sync
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(durable);
        if self.following_syncs.swap(true, Ordering::SeqCst) {
            return; // the running task takes it
        }
        let partition = self.clone();
        tokio::spawn(async move {
            loop {
                let next = partition
                    .unanswered_sync
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                let Some(durable) = next else {
                    partition.following_syncs.store(false, Ordering::SeqCst);
                    // One stored between the take and the store above: follow it, unless
                    // a new task already does.
                    if partition
                        .unanswered_sync
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_none()
                        || partition.following_syncs.swap(true, Ordering::SeqCst)
                    {
                        return;
                    }
                    continue;
                };
                if durable.wait().await.is_ok() {
                    partition.advance_high_watermark();
                }
            }
        });
    }

    /// A new leader's log, or one whose topic turned flush-before-ack, may hold a tail
    /// not yet synced (a follower's sync still running): its high watermark counts it
    /// once synced, so that sync is followed as an unanswered one.
    pub fn follow_unsynced_tail(self: &Arc<Self>) {
        if let Some(tail) = self.unsynced_tail() {
            self.follow_unanswered_sync(tail);
        }
    }

    /// Moves the high watermark (leader) to the lowest log end offset across the maximal
    /// ISR, its own counted only as far as it is durable (flush before ack: a record is
    /// committed once on the disk of every in-sync replica, the leader's included, as
    /// Raft's and Redpanda's are; without it a record consumers read could be lost with
    /// the leader's power while the followers that synced it were out of the ISR, as the
    /// simulator found), so the end of a leader's sync calls it too. Never moves it back,
    /// and holds it while the ISR is below min.insync.replicas (at most the number of
    /// replicas), as Kafka 4.x does: a replica that left the ISR then has every committed
    /// record, so electing it (KIP-966) loses none, and an acks=1 write made meanwhile is
    /// not exposed to consumers until enough replicas have it.
    pub fn advance_high_watermark(&self) {
        let min_isr = self.min_insync_replicas().max(1) as usize;
        let followers_end = {
            let replication = self.replication();
            if !replication.is_leader(self.node_id) {
                return;
            }
            let assignment = &replication.assignment;
            if assignment.isr.len() < min_isr.min(assignment.replicas.len().max(1)) {
                return;
            }
            // An unknown ISR member: hold.
            let Some(end) = replication.isr_followers_end(self.node_id) else {
                return;
            };
            end
        };
        let advanced = {
            let mut log = self.log();
            let candidate = log.durable_end_offset().min(followers_end);
            let current = log.high_watermark();
            if candidate > current {
                log.set_high_watermark(candidate);
                Some(log.high_watermark())
            } else {
                None
            }
        };
        if let Some(hw) = advanced {
            self.high_watermark.send_replace(hw);
            self.wake_parked_fetches();
        }
    }

    /// The offset every in-sync replica has confirmed holding in this leader epoch (the
    /// leader's log end, bounded by each in-sync follower's last fetch since the epoch
    /// began); None if this broker does not lead. Beyond the high watermark a new leader
    /// learned from the old one, this says the followers have cut any tail of an older
    /// epoch that diverges from this leader's log, so no such tail can come back with an
    /// election (a coordinator waits for it after its load, as Raft's leader commits an
    /// entry of its own term before it serves reads).
    pub fn confirmed_in_epoch(&self) -> Option<i64> {
        let replication = self.replication();
        if !replication.is_leader(self.node_id) {
            return None;
        }
        let followers_end = replication.isr_followers_end(self.node_id).unwrap_or(-1);
        Some(self.log().log_end_offset().min(followers_end))
    }

    /// Whether everything up to `end` is committed and confirmed by every in-sync
    /// follower in this leader epoch (what a coordinator shard loaded on this leader
    /// waits for before it takes any event).
    pub fn confirmed_through(&self, end: i64) -> bool {
        self.high_watermark() >= end && self.confirmed_in_epoch().is_some_and(|c| c >= end)
    }

    /// The high watermark as last published (what acks=all waits on).
    /// Whether `producer_id` has a transaction open on this partition at `producer_epoch`
    /// (its next batches join it without asking the coordinator).
    pub fn has_ongoing_txn(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.log()
            .producer_state()
            .get(producer_id)
            .is_some_and(|entry| {
                entry.epoch == producer_epoch && entry.current_txn_first_offset.is_some()
            })
    }

    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// A consumer's read: leader only, up to the high watermark, or for read_committed
    /// up to the last stable offset, with the aborted transactions in what it may return
    /// ((producer id, first offset), by first offset).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
        read_committed: bool,
    ) -> LogResult<(ReadResult, Vec<(i64, i64)>)> {
        let log = self.log();
        let upper = if read_committed {
            log.last_stable_offset()
        } else {
            log.high_watermark()
        };
        let read = log.read(offset, max_bytes, upper, min_one_batch)?;
        let aborted = if read_committed && read.slice.is_some() {
            log.aborted_txns(offset, upper)
                .into_iter()
                .map(|txn| (txn.producer_id, txn.first_offset))
                .collect()
        } else {
            Vec::new()
        };
        Ok((read, aborted))
    }

    pub fn is_leader(&self) -> bool {
        self.leader_epoch_if_leader().is_some()
    }

    /// Why this replica must leave the ISR or the ELR (and leadership, if another in-sync
    /// replica can take it): its log went offline or a read found a damaged batch.
    /// Returned once per assignment while this broker is in the ISR or the ELR, for the
    /// controller to hear.
    pub fn failure_to_report(&self) -> Option<String> {
        let reason = self.log().failure()?;
        let key = {
            let replication = self.replication();
            let assignment = &replication.assignment;
            if !assignment.isr.contains(&self.node_id) && !assignment.elr.contains(&self.node_id) {
                return None;
            }
            (assignment.leader_epoch, assignment.partition_epoch)
        };
        let mut reported = self
            .failure_reported
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if *reported == Some(key) {
            return None;
        }
        *reported = Some(key);
        Some(reason)
    }

    /// The last report did not reach the controller: the next check sends it again.
    pub fn forget_failure_report(&self) {
        *self
            .failure_reported
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A follower's fetch at `fetch_offset`: records its progress (which may advance the
    /// high watermark and earn it a place back in the ISR) and reads up to the log end.
    /// Returns the read (which may fail, e.g. out of range, or only because it would wait
    /// for the disk) and, when the follower should join the ISR, the proposed ISR; an
    /// error code if this replica does not lead or does not know the follower.
    pub fn read_for_follower(
        &self,
        follower: i32,
        fetch_offset: i64,
        max_bytes: u64,
    ) -> Result<(LogResult<ReadResult>, Option<IsrProposal>), i16> {
        let now = self.now();
        let log_end = self.log().log_end_offset();
        let high_watermark = self.log().high_watermark();
        let proposal = {
            let mut replication = self.replication();
            if !replication.is_leader(self.node_id) {
                return Err(error_code::NOT_LEADER_OR_FOLLOWER);
            }
            let leader_start = replication.leader_start_offset;
            let Some(progress) = replication.followers.get_mut(&follower) else {
                return Err(error_code::NOT_LEADER_OR_FOLLOWER);
            };
            progress.log_end_offset = fetch_offset.min(log_end);
            // Kafka's rule: caught up if it has everything we had, now or at its last fetch.
            if fetch_offset >= log_end {
                progress.last_caught_up = now;
            } else if fetch_offset >= progress.leader_end_at_last_fetch {
                progress.last_caught_up = progress.last_caught_up.max(progress.last_fetch);
            }
            progress.leader_end_at_last_fetch = log_end;
            progress.last_fetch = now;
            let joins = !replication.maximal_isr().contains(&follower)
                && replication.may_propose(now)
                && fetch_offset >= high_watermark
                && fetch_offset >= leader_start;
            joins.then(|| {
                let mut isr = replication.assignment.isr.clone();
                isr.push(follower);
                replication.pending_isr = Some(isr.clone());
                IsrProposal::new(&replication.assignment, isr)
            })
        };
        self.advance_high_watermark();
        let log = self.log();
        let read = log.read(fetch_offset, max_bytes, log.log_end_offset(), true);
        Ok((read, proposal))
    }

    /// Leader: the ISR without followers that have not caught up for `lag_max`, if that
    /// removes anyone (and no other change is pending).
    pub fn propose_isr_shrink(&self, lag_max: Duration) -> Option<IsrProposal> {
        let now = self.now();
        let mut replication = self.replication();
        if !replication.is_leader(self.node_id) || !replication.may_propose(now) {
            return None;
        }
        let lagging: Vec<i32> = replication
            .assignment
            .isr
            .iter()
            .copied()
            .filter(|&id| id != self.node_id)
            .filter(|id| {
                replication
                    .followers
                    .get(id)
                    .is_none_or(|p| now.duration_since(p.last_caught_up) > lag_max)
            })
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let isr: Vec<i32> = replication
            .assignment
            .isr
            .iter()
            .copied()
            .filter(|id| !lagging.contains(id))
            .collect();
        replication.pending_isr = Some(isr.clone());
        Some(IsrProposal::new(&replication.assignment, isr))
    }

    /// The controller refused or failed an ISR proposal: drop it (the next fetch or
    /// check proposes again against the image).
    pub fn abandon_isr_proposal(&self) {
        let mut replication = self.replication();
        replication.pending_isr = None;
        replication.isr_retry_at = Some(self.now() + ISR_PROPOSAL_BACKOFF);
    }

    /// Runs `write` on the log only while this broker follows the partition at
    /// `leader_epoch`, holding the replication state so no role change can interleave.
    /// A fetcher's answer can arrive after the partition became leader (or moved to a
    /// newer epoch); writing it then would truncate or extend a leader's log. None if
    /// the role moved on.
    fn write_as_follower<T>(
        &self,
        leader_epoch: i32,
        write: impl FnOnce(&mut Log) -> LogResult<T>,
    ) -> LogResult<Option<T>> {
        let replication = self.replication();
        if replication.is_leader(self.node_id)
            || replication.assignment.leader_epoch != leader_epoch
        {
            return Ok(None);
        }
        let mut log = self.log();
        let result = write(&mut log);
        drop(log);
        drop(replication);
        result.map(Some)
    }

    /// Follower at `leader_epoch`: appends what the leader sent and takes its high
    /// watermark. Ok(None) if the role moved on meanwhile (nothing written).
    ///
    /// With flush.messages=1 (flush before ack) the answer carries the sync to finish
    /// before the next fetch: that fetch's offset tells the leader we have the records,
    /// and the leader's acks=all answer counts on it, so it may only be sent once they are
    /// on our disk too (Kafka's follower fsyncs inside the append). Without it a power
    /// cut on every replica loses acknowledged writes: the controller may elect a
    /// follower whose copy never reached its disk.
    pub fn append_as_follower(
        &self,
        leader_epoch: i32,
        records: &[u8],
        leader_high_watermark: i64,
    ) -> LogResult<Option<FollowerAppend>> {
        self.write_as_follower(leader_epoch, |log| {
            let info = log.append_as_follower(records, leader_epoch)?;
            let durability = log.config().durability;
            let durable = match &info {
                Some(info) => Durable::after(durability, log.sync_gate(), info, &self.counters),
                None => None,
            };
            if log.flush_requested() {
                self.flush_off_request_path();
            }
            let hw = leader_high_watermark.min(log.log_end_offset());
            if hw > log.high_watermark() {
                log.set_high_watermark(hw);
            }
            Ok(FollowerAppend { info, durable })
        })
    }

    /// Follower at `leader_epoch`: truncates to the offset `target` computes from the log
    /// (truncation by leader epoch). Ok(None) if the role moved on meanwhile.
    pub fn truncate_as_follower(
        &self,
        leader_epoch: i32,
        target: impl FnOnce(&Log) -> i64,
    ) -> LogResult<Option<(i64, i64)>> {
        self.write_as_follower(leader_epoch, |log| {
            let from = log.log_end_offset();
            let to = target(log).min(from);
            log.truncate_to(to)?;
            Ok((from, log.log_end_offset()))
        })
    }

    /// Follower at `leader_epoch`: the log start follows the leader's (DeleteRecords,
    /// retention), within what this replica has committed.
    pub fn follow_log_start(&self, leader_epoch: i32, leader_log_start: i64) -> LogResult<()> {
        self.write_as_follower(leader_epoch, |log| {
            let target = leader_log_start.min(log.high_watermark());
            if target > log.log_start_offset() {
                log.delete_before(target)?;
            }
            Ok(())
        })
        .map(|_| ())
    }

    /// Follower at `leader_epoch`: restarts the log empty at the leader's log start
    /// (this replica fell behind the leader's retention).
    pub fn reset_as_follower(&self, leader_epoch: i32, start: i64) -> LogResult<()> {
        self.write_as_follower(leader_epoch, |log| log.truncate_fully_and_start_at(start))
            .map(|_| ())
    }

    /// As follower at `leader_epoch`: start the log at `start`, where the remote store's
    /// copy ends, with the copies' leader epochs and producer state (tiered storage).
    pub fn reset_after_remote(
        &self,
        leader_epoch: i32,
        start: i64,
        epochs: &[(i32, i64)],
        producer_snapshot: Option<&[u8]>,
    ) -> LogResult<()> {
        self.write_as_follower(leader_epoch, |log| {
            log.start_after_remote(start, epochs, producer_snapshot)
        })
        .map(|_| ())
    }

    /// Registers `waiter` to be notified at the next append. Returns false when the
    /// partition already has its maximum of parked fetches (the fetch then returns at once).
    pub fn park_fetch(&self, waiter: &Arc<Notify>) -> bool {
        let mut parked = self
            .parked_fetches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if parked.len() >= PARKED_FETCHES_MAX {
            return false;
        }
        parked.push(waiter.clone());
        true
    }

    pub fn unpark_fetch(&self, waiter: &Arc<Notify>) {
        let mut parked = self
            .parked_fetches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        parked.retain(|parked| !Arc::ptr_eq(parked, waiter));
    }

    /// Fetches waiting for an append here (Kafka's fetch purgatory watchers).
    pub fn parked_fetch_count(&self) -> usize {
        self.parked_fetches
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    pub fn warming(&self) -> &crate::cold_reads::Warming {
        &self.warming
    }

    pub(crate) fn wake_parked_fetches(&self) {
        let parked = std::mem::take(
            &mut *self
                .parked_fetches
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for waiter in parked {
            waiter.notify_one();
        }
    }
}

/// An ISR change for the controller (AlterPartition), against the version it edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

impl IsrProposal {
    fn new(assignment: &Assignment, isr: Vec<i32>) -> IsrProposal {
        IsrProposal {
            leader_epoch: assignment.leader_epoch,
            partition_epoch: assignment.partition_epoch,
            isr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_log::{LogManager, LogManagerOptions};
    use strand_records::{BatchBuilder, Record};

    const ME: i32 = 1;

    fn assignment(leader: i32, epoch: i32, partition_epoch: i32, isr: &[i32]) -> Assignment {
        Assignment {
            leader,
            leader_epoch: epoch,
            partition_epoch,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            elr: Vec::new(),
        }
    }

    fn partition(dir: &std::path::Path, min_insync: i32, isr: &[i32]) -> (LogManager, Partition) {
        let (mut logs, _) = LogManager::open(&[dir], LogManagerOptions::default()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = logs.get_or_create(&tp, None).unwrap();
        let partition = Partition::new(tp, log, min_insync, ME, assignment(ME, 0, 0, isr));
        (logs, partition)
    }

    /// Waits (at most 10 s) until the high watermark is `offset`.
    async fn high_watermark_reaches(partition: &Partition, offset: i64) {
        let mut watcher = partition.high_watermark.subscribe();
        let reached = watcher.wait_for(|&hw| hw == offset);
        tokio::time::timeout(std::time::Duration::from_secs(10), reached)
            .await
            .expect("the high watermark moves once the sync is done")
            .unwrap();
    }

    /// A partition led by this broker (epoch 0) whose log syncs before acks.
    fn flush_before_ack_partition(
        dir: &std::path::Path,
        min_insync: i32,
        isr: &[i32],
    ) -> (LogManager, Partition) {
        let (mut logs, _) = LogManager::open(&[dir], LogManagerOptions::default()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let config = LogConfig {
            durability: Durability::FlushBeforeAck,
            ..LogConfig::default()
        };
        let log = logs.get_or_create(&tp, Some(Arc::new(config))).unwrap();
        let partition = Partition::new(tp, log, min_insync, ME, assignment(ME, 0, 0, isr));
        (logs, partition)
    }

    /// `partition` follows node 2 at `epoch` (ISR `isr`) and takes 3 records from it,
    /// told the high watermark is `high_watermark`; what the append left to sync.
    fn followed(
        partition: &Partition,
        epoch: i32,
        isr: &[i32],
        high_watermark: i64,
    ) -> Option<Durable> {
        partition.apply_assignment(assignment(2, epoch, 1, isr));
        let mut leader_batch = batch(3);
        strand_records::set_partition_leader_epoch(&mut leader_batch, epoch);
        strand_records::refresh_crc(&mut leader_batch);
        partition
            .append_as_follower(epoch, &leader_batch, high_watermark)
            .unwrap()
            .and_then(|appended| appended.durable)
    }

    fn batch(records: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, 1_000);
        for i in 0..records {
            builder.push(Record::new(None, Some(vec![i as u8; 10]), 1_000));
        }
        builder.build()
    }

    fn fetch(partition: &Partition, follower: i32, offset: i64) -> Option<IsrProposal> {
        partition
            .read_for_follower(follower, offset, 1 << 20)
            .unwrap()
            .1
    }

    #[test]
    fn a_batch_of_a_transaction_a_marker_ended_is_a_fenced_epoch_not_invalid_txn_state() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1]);
        let txn = |epoch: i16, sequence: i32| {
            let mut builder = BatchBuilder::new(0, 1_000)
                .producer(9, epoch, sequence)
                .transactional();
            builder.push(Record::new(None, Some(vec![1; 10]), 1_000));
            builder.build()
        };
        let guard = None;
        partition
            .append_transactional(txn(0, 0), 1, (9, 0, guard))
            .unwrap();
        // Transaction version 2: the coordinator's abort marker carries epoch 1.
        let abort = strand_records::EndTxnMarker {
            result: strand_records::TxnResult::Abort,
            coordinator_epoch: 0,
        };
        partition.append_marker(9, 1, abort).unwrap();
        let late = partition.append_transactional(txn(0, 1), 1, (9, 0, Some(0)));
        assert_eq!(
            late.err().map(|refusal| refusal.code),
            Some(error_code::INVALID_PRODUCER_EPOCH),
            "KAFKA-19690: the epoch is checked before the guard"
        );
        // The new transaction at the bumped epoch, verified after the marker, goes in.
        let last = partition.log().producer_state().get(9).unwrap().last_offset;
        assert!(partition
            .append_transactional(txn(1, 0), 1, (9, 1, Some(last)))
            .is_ok());
    }

    /// The simulator found a new leader's acks=all waiting on the high watermark it had
    /// when it last led: what it learned as a follower was never published.
    #[test]
    fn a_new_leader_publishes_the_high_watermark_it_learned_as_a_follower() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2]);
        followed(&partition, 1, &[1, 2], 3);
        assert_eq!(partition.log().high_watermark(), 3);
        // Leader again, its follower as far as it is: nothing new to advance by.
        partition.apply_assignment(assignment(ME, 2, 2, &[1, 2]));
        assert_eq!(
            partition.high_watermark(),
            3,
            "acks=all for the batches below 3 (a duplicate's) is met"
        );
    }

    /// Found by the simulator: a new leader that had not appended yet answered a
    /// follower's OffsetForLeaderEpoch for the epoch between theirs as undefined, and the
    /// follower cut its log to its high watermark, below records the old leader had
    /// committed (lost when the new leader failed next).
    #[test]
    fn a_new_leader_knows_where_the_epochs_before_its_own_end_before_it_appends() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2]);
        followed(&partition, 13, &[1, 2], 0);
        partition.apply_assignment(assignment(ME, 15, 2, &[1, 2]));
        // A follower whose latest epoch is 14 (it followed a leader we never heard of).
        assert_eq!(partition.log().end_offset_for_epoch(14), (13, 3));
        assert_eq!(partition.log().end_offset_for_epoch(15), (15, 3));
    }

    /// Found by the simulator: a new leader learned a high watermark from the old one,
    /// but an in-sync follower (the old leader) still held a tail of its own epoch beyond
    /// it; a coordinator answering from the new leader's log before that follower cut
    /// the tail saw it come back when the follower was elected next.
    #[test]
    fn a_new_leader_confirms_an_offset_only_once_every_in_sync_follower_fetched_it() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        followed(&partition, 1, &[1, 2, 3], 3);
        partition.apply_assignment(assignment(ME, 2, 2, &[1, 2, 3]));
        assert_eq!(partition.high_watermark(), 3, "learned from the old leader");
        assert_eq!(
            partition.confirmed_in_epoch(),
            Some(-1),
            "no follower fetched yet"
        );
        fetch(&partition, 2, 3);
        assert_eq!(
            partition.confirmed_in_epoch(),
            Some(-1),
            "follower 3 has not"
        );
        fetch(&partition, 3, 3);
        assert_eq!(partition.confirmed_in_epoch(), Some(3));
    }

    /// The coordinator's side of the same: a shard loaded on this leader waits (its
    /// `ShardLog::loaded`) until every in-sync follower fetched its log end in the epoch.
    #[tokio::test]
    async fn a_shard_loaded_on_a_new_leader_waits_for_its_followers_to_confirm_the_log() {
        use strand_coordinator::runtime::ShardLog;
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        followed(&partition, 1, &[1, 2, 3], 3);
        partition.apply_assignment(assignment(ME, 2, 2, &[1, 2, 3]));
        let partition = Arc::new(partition);
        let log = crate::shard_log::PartitionShardLog {
            partition: partition.clone(),
            leader_epoch: 2,
            timeout: std::time::Duration::from_secs(5),
        };
        let loaded = tokio::spawn(log.loaded().expect("the followers have not fetched"));
        fetch(&partition, 2, 3);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !loaded.is_finished(),
            "follower 3 has not confirmed the log"
        );
        fetch(&partition, 3, 3);
        let confirmed = tokio::time::timeout(std::time::Duration::from_secs(10), loaded);
        assert_eq!(confirmed.await.expect("confirmed").unwrap(), Ok(()));
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        partition.append_unsynced(batch(5), -1).unwrap();
        assert_eq!(partition.high_watermark(), 0, "followers have not fetched");
        fetch(&partition, 2, 5);
        assert_eq!(partition.high_watermark(), 0, "follower 3 is unknown");
        fetch(&partition, 3, 3);
        assert_eq!(partition.high_watermark(), 3);
        fetch(&partition, 3, 5);
        assert_eq!(partition.high_watermark(), 5);
        // A follower going back (after truncation) never moves it back.
        fetch(&partition, 3, 2);
        assert_eq!(partition.high_watermark(), 5);
    }

    #[test]
    fn the_high_watermark_holds_while_the_isr_is_below_min_insync() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 2, &[1, 2]);
        partition.append_unsynced(batch(2), -1).unwrap();
        fetch(&partition, 2, 2);
        assert_eq!(partition.high_watermark(), 2);
        // The ISR shrinks to the leader alone: acks=1 writes go in, the high watermark
        // stays (before: it followed the leader's log end at once).
        partition.apply_assignment(assignment(ME, 0, 1, &[1]));
        partition.append_unsynced(batch(3), 1).unwrap();
        assert_eq!(partition.high_watermark(), 2);
        // Back at min.insync.replicas: it moves on as the follower catches up.
        partition.apply_assignment(assignment(ME, 0, 2, &[1, 2]));
        fetch(&partition, 2, 5);
        assert_eq!(partition.high_watermark(), 5);
    }

    #[test]
    fn min_insync_above_the_replica_count_counts_every_replica() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 3, &[1, 2]);
        let two_replicas = Assignment {
            replicas: vec![1, 2],
            ..assignment(ME, 0, 1, &[1, 2])
        };
        partition.apply_assignment(two_replicas);
        partition.append_unsynced(batch(2), 1).unwrap();
        fetch(&partition, 2, 2);
        assert_eq!(
            partition.high_watermark(),
            2,
            "min(3, 2 replicas) = 2 in sync"
        );
    }

    #[test]
    fn a_single_node_commits_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut logs, _) = LogManager::open(&[dir.path()], LogManagerOptions::default()).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = logs.get_or_create(&tp, None).unwrap();
        let partition = Partition::new(tp, log, 1, ME, Assignment::local(ME));
        partition.append_unsynced(batch(3), -1).unwrap();
        assert_eq!(partition.high_watermark(), 3);
    }

    #[tokio::test]
    async fn acks_all_waits_times_out_and_checks_min_insync() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 2, &[1, 2]);
        partition.append_unsynced(batch(2), -1).unwrap();
        let timed_out = partition
            .wait_for_replication(2, 0, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(timed_out.code, error_code::REQUEST_TIMED_OUT);
        fetch(&partition, 2, 2);
        partition
            .wait_for_replication(2, 0, Duration::from_millis(50))
            .await
            .unwrap();

        // A batch replicated, then the ISR shrinks below min.insync.replicas before its
        // producer hears: NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's.
        partition.append_unsynced(batch(1), -1).unwrap();
        fetch(&partition, 2, 3);
        partition.apply_assignment(assignment(ME, 0, 1, &[1]));
        let after = partition
            .wait_for_replication(3, 0, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(after.code, error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND);
        // New acks=all appends are refused before writing.
        let refused = partition.append_unsynced(batch(1), -1).unwrap_err();
        assert_eq!(refused.code, error_code::NOT_ENOUGH_REPLICAS);
        assert_eq!(partition.log().log_end_offset(), 3);
        // An acks=1 append goes in, and a wait for it (a batch that was appended with the
        // ISR full and then lost it) ends at its deadline: the high watermark holds below
        // min.insync.replicas, as Kafka 4.x's does.
        partition.append_unsynced(batch(1), 1).unwrap();
        let held = partition
            .wait_for_replication(4, 0, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(held.code, error_code::REQUEST_TIMED_OUT);
    }

    #[tokio::test]
    async fn losing_leadership_fails_waiting_producers() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2]);
        partition.append_unsynced(batch(1), -1).unwrap();
        let partition = Arc::new(partition);
        let waiting = {
            let partition = partition.clone();
            tokio::spawn(async move {
                partition
                    .wait_for_replication(1, 0, Duration::from_secs(10))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let change = partition.apply_assignment(assignment(2, 1, 1, &[2]));
        assert_eq!(
            change,
            RoleChange::BecameFollower {
                leader: 2,
                leader_epoch: 1
            }
        );
        let result = waiting.await.unwrap().unwrap_err();
        assert_eq!(result.code, error_code::NOT_LEADER_OR_FOLLOWER);
        let refused = partition.append_unsynced(batch(1), 1).unwrap_err();
        assert_eq!(refused.code, error_code::NOT_LEADER_OR_FOLLOWER);
    }

    #[test]
    fn a_pending_shrink_holds_the_high_watermark_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        partition.append_unsynced(batch(4), -1).unwrap();
        fetch(&partition, 2, 4);
        fetch(&partition, 3, 1);
        assert_eq!(partition.high_watermark(), 1);
        std::thread::sleep(Duration::from_millis(30));
        fetch(&partition, 2, 4); // follower 2 stays caught up
        let proposal = partition
            .propose_isr_shrink(Duration::from_millis(20))
            .expect("follower 3 lags");
        assert_eq!(proposal.isr, vec![1, 2]);
        assert_eq!(proposal.partition_epoch, 0);
        // Not committed yet: follower 3 still counts.
        fetch(&partition, 2, 4);
        assert_eq!(partition.high_watermark(), 1);
        assert!(partition
            .propose_isr_shrink(Duration::from_millis(20))
            .is_none());
        // The controller commits it; the image brings it back.
        partition.apply_assignment(assignment(ME, 0, 1, &[1, 2]));
        assert_eq!(partition.high_watermark(), 4);
    }

    #[test]
    fn a_follower_rejoins_only_when_caught_up_and_refusals_back_off() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1]);
        partition.append_unsynced(batch(4), -1).unwrap();
        assert_eq!(partition.high_watermark(), 4);
        assert_eq!(fetch(&partition, 2, 2), None, "behind the high watermark");
        let proposal = fetch(&partition, 2, 4).expect("caught up");
        assert_eq!(proposal.isr, vec![1, 2]);
        partition.abandon_isr_proposal(); // e.g. the controller said INELIGIBLE_REPLICA
        assert_eq!(fetch(&partition, 2, 4), None, "backing off");
    }

    /// The power-loss nemesis found it: with flush.messages=1 a follower's copy reached
    /// its disk only if a background flush happened to run, so a power cut on every
    /// replica could elect one whose acknowledged records were gone. A follower append
    /// now hands the fetcher a sync to finish before its next fetch reports the offset.
    #[tokio::test]
    async fn a_flush_before_ack_follower_syncs_before_it_reports() {
        for (durability, expect_sync) in [
            (Durability::FlushBeforeAck, true),
            (Durability::PageCache, false),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (mut logs, _) =
                LogManager::open(&[dir.path()], LogManagerOptions::default()).unwrap();
            let tp = TopicPartition::new("t", 0);
            let config = LogConfig {
                durability,
                ..LogConfig::default()
            };
            let log = logs.get_or_create(&tp, Some(Arc::new(config))).unwrap();
            let partition = Partition::new(tp, log, 1, ME, assignment(2, 1, 1, &[1, 2, 3]));
            let appended = partition
                .append_as_follower(1, &batch(3), 3)
                .unwrap()
                .expect("a follower at epoch 1");
            assert_eq!(appended.info.map(|i| i.last_offset), Some(2));
            let gate = partition.log().sync_gate();
            assert_eq!(gate.durable_end_offset(), 0, "written, not yet synced");
            assert_eq!(appended.durable.is_some(), expect_sync, "{durability:?}");
            if let Some(durable) = appended.durable {
                durable.start().finish().await.unwrap();
                assert_eq!(gate.durable_end_offset(), 3);
            }
        }
    }

    /// The simulator found it (seed 1864183091, once syncs took time): with flush before
    /// ack the high watermark passed records its followers had synced but the leader had
    /// not; the followers left the ISR (a power cut each, unclean), the leader lost power
    /// too and was elected again without records consumers had read. A record is now
    /// committed only once on the leader's disk too; the acks=all wait (and an acks=1
    /// answer, and the task following acks=0 syncs) moves the high watermark after it.
    #[tokio::test]
    async fn a_flush_before_ack_leader_commits_only_what_it_synced() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = flush_before_ack_partition(dir.path(), 2, &[1, 2]);
        let (info, durable) = partition.append_unsynced(batch(3), -1).unwrap();
        assert_eq!(info.last_offset, 2);
        fetch(&partition, 2, 3); // the follower has the three records (and synced them)
        assert_eq!(
            partition.high_watermark(),
            0,
            "not on the leader's disk yet"
        );
        durable
            .expect("flush before ack")
            .start()
            .finish()
            .await
            .unwrap();
        partition
            .wait_for_replication(3, 0, std::time::Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(partition.high_watermark(), 3, "committed once synced");
    }

    /// The simulator found it (seed 2347528027): a leader's appends whose syncs had not
    /// run when it became a follower were reported to the new leader by its first fetch
    /// (its log end), counted as committed, and lost with this replica's power. The
    /// fetcher now finishes such a tail's sync first.
    #[tokio::test]
    async fn a_follower_syncs_what_it_wrote_as_leader_before_it_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = flush_before_ack_partition(dir.path(), 2, &[1, 2]);
        let (_, durable) = partition.append_unsynced(batch(3), -1).unwrap();
        drop(durable); // its wait was given up with the leadership
        partition.apply_assignment(assignment(2, 1, 1, &[1, 2]));
        let tail = partition
            .unsynced_tail()
            .expect("three records not on disk");
        tail.start().finish().await.unwrap();
        assert_eq!(partition.log().durable_end_offset(), 3);
        assert!(partition.unsynced_tail().is_none());
    }

    /// A follower elected while its last sync still ran: nothing else would move the
    /// high watermark past that tail once synced (a coordinator's load waits on it).
    #[tokio::test]
    async fn a_new_leader_counts_its_follower_tail_once_synced() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = flush_before_ack_partition(dir.path(), 1, &[1]);
        let partition = Arc::new(partition);
        let durable = followed(&partition, 1, &[1, 2], 0);
        assert!(durable.is_some(), "its sync not run");
        let change = partition.apply_assignment(assignment(ME, 2, 2, &[1]));
        assert_eq!(change, RoleChange::BecameLeader);
        assert_eq!(partition.high_watermark(), 0, "the tail is not on disk");
        partition.follow_unsynced_tail();
        high_watermark_reaches(&partition, 3).await;
    }

    /// acks=0 on a flush-before-ack topic: no answer waits for the sync, so a task
    /// follows it and moves the high watermark (without it a single replica's last
    /// records stayed invisible until the next append).
    #[tokio::test]
    async fn an_unanswered_sync_still_moves_the_high_watermark() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = flush_before_ack_partition(dir.path(), 1, &[1]);
        let partition = Arc::new(partition);
        let (_, durable) = partition.append_unsynced(batch(3), 0).unwrap();
        assert_eq!(partition.high_watermark(), 0);
        partition.follow_unanswered_sync(durable.expect("flush before ack"));
        high_watermark_reaches(&partition, 3).await;
    }

    /// The nemesis found it: a fetcher's answer arriving after the partition became
    /// leader truncated the new leader's log. Follower writes now check the role.
    #[test]
    fn a_late_fetcher_answer_cannot_touch_a_leaders_log() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        partition.apply_assignment(assignment(2, 1, 1, &[1, 2, 3]));
        // As a follower at epoch 1 it takes records from the leader.
        let leader_batch = batch(3); // base offset 0, as the leader stored it
        let appended = partition.append_as_follower(1, &leader_batch, 3).unwrap();
        assert!(appended.is_some_and(|a| a.info.is_some()));
        assert_eq!(partition.log().log_end_offset(), 3);
        // It becomes leader at epoch 2; the old fetcher's late answers change nothing.
        partition.apply_assignment(assignment(ME, 2, 2, &[1, 2, 3]));
        assert_eq!(partition.truncate_as_follower(1, |_| 0).unwrap(), None);
        assert!(partition
            .append_as_follower(1, &leader_batch, 3)
            .unwrap()
            .is_none());
        assert_eq!(partition.log().log_end_offset(), 3);
        // A follower of another epoch is refused too.
        partition.apply_assignment(assignment(3, 3, 3, &[1, 2, 3]));
        assert_eq!(partition.truncate_as_follower(1, |_| 0).unwrap(), None);
        assert_eq!(
            partition.truncate_as_follower(3, |_| 1).unwrap(),
            Some((3, 0))
        );
    }

    /// The race review found: a leader append checked its role, released the lock, and
    /// appended; a demotion plus the new follower's truncation in between left a batch of
    /// the old epoch in a follower's log, beyond what the new leader has. The hook puts
    /// exactly that demotion between the check and the write.
    #[test]
    fn a_demotion_cannot_come_between_a_leader_appends_check_and_write() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1, 2, 3]);
        let partition = Arc::new(partition);
        partition.append_unsynced(batch(2), 1).unwrap();
        // What the new leader (node 2, epoch 1) has: the first two records only.
        let new_leaders_end = 2;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let demoting = partition.clone();
        let demotion = std::sync::Arc::new(Mutex::new(None));
        let demotion_slot = demotion.clone();
        *partition.before_leader_write.0.lock().unwrap() = Some(Box::new(move || {
            let handle = std::thread::spawn(move || {
                demoting.apply_assignment(assignment(2, 1, 1, &[1, 2, 3]));
                let truncated = demoting
                    .truncate_as_follower(1, |_| new_leaders_end)
                    .unwrap();
                let _ = done_tx.send(()); // the hook may have stopped waiting
                truncated
            });
            // With the check and the write under one lock the demotion cannot finish
            // now; before, it did, and the write went to a follower's log.
            let _ = done_rx.recv_timeout(Duration::from_millis(300));
            *demotion_slot.lock().unwrap() = Some(handle);
        }));
        let appended = partition.append_unsynced(batch(1), 1);
        let handle = demotion.lock().unwrap().take().expect("the hook ran");
        handle.join().unwrap();
        assert!(!partition.is_leader());
        assert_eq!(
            partition.log().log_end_offset(),
            new_leaders_end,
            "no batch of the old epoch beyond the new leader's log (append: {appended:?})"
        );
    }

    #[test]
    fn epochs_are_checked_like_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let (_logs, partition) = partition(dir.path(), 1, &[1]);
        partition.apply_assignment(assignment(ME, 3, 1, &[1]));
        assert_eq!(partition.check_leader_epoch(-1), Ok(()));
        assert_eq!(partition.check_leader_epoch(3), Ok(()));
        assert_eq!(
            partition.check_leader_epoch(2),
            Err(error_code::FENCED_LEADER_EPOCH)
        );
        assert_eq!(
            partition.check_leader_epoch(4),
            Err(error_code::UNKNOWN_LEADER_EPOCH)
        );
    }
}
