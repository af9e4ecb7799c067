//! The transaction coordinator of one `__transaction_state` partition: a plain state
//! machine fed one event at a time by its shard's loop (`crate::runtime`), answering with
//! the records to write and what to reply once they settled. The rules are Kafka 4.x's
//! (docs/design/transactions.md, sections 1-5, cited as §n below).
//!
//! Every transition is two-phase (§1.1): the event computes the target metadata (a
//! transit), marks the id pending and writes the target; the target replaces the
//! metadata only when the write commits. While an id is pending every other transition
//! answers CONCURRENT_TRANSACTIONS.
//!
//! Markers are the one thing the state machine cannot do itself: once a PrepareCommit or
//! PrepareAbort commits it queues a [`MarkerJob`] (`take_markers`); the broker writes the
//! markers to the transaction's partitions and reports back with `markers_written`,
//! which writes the CompleteCommit / CompleteAbort record.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use strand_types::error_code;

use super::records::{self, StoredTxn};
use super::state::{epoch_exhausted, TxnState};
use crate::runtime::Records;

/// transaction.max.timeout.ms
pub const TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;
/// transactional.id.expiration.ms (7 days).
pub const TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 604_800_000;
/// Tombstones one expiry sweep writes at most (the next sweep takes the rest), so one
/// write stays well inside a batch's size limit.
pub const EXPIRED_PER_SWEEP_MAX: usize = 1_000;
/// Transactional ids one partition holds at most: InitProducerId for a new id beyond it
/// is answered COORDINATOR_NOT_AVAILABLE, so a client minting ids cannot exhaust memory.
pub const TRANSACTIONAL_IDS_MAX: usize = 200_000;
/// Partitions one transaction may hold.
pub const TRANSACTION_PARTITIONS_MAX: usize = 100_000;

/// Hands out producer ids that never repeat. Synchronous: a source that has none at
/// hand (a cluster member waiting for its next block) answers an error code
/// (COORDINATOR_LOAD_IN_PROGRESS, as Kafka), which the client retries.
pub trait ProducerIdSource: Send + Sync {
    fn allocate(&self) -> Result<i64, i16>;
}

#[derive(Debug, Clone, Copy)]
pub struct TxnSettings {
    pub max_timeout_ms: i32,
    pub id_expiration_ms: i64,
    /// The cluster's transaction version: the `__transaction_state` value version (0 for
    /// 0, else 1) and the rules of the aborts the coordinator starts itself.
    pub transaction_version: i16,
}

impl Default for TxnSettings {
    fn default() -> TxnSettings {
        TxnSettings {
            max_timeout_ms: TRANSACTION_MAX_TIMEOUT_MS,
            id_expiration_ms: TRANSACTIONAL_ID_EXPIRATION_MS,
            transaction_version: 0,
        }
    }
}

/// One transactional id's metadata (§1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub prev_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId is recognised; never
    /// stored (-1 after a load).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    /// -1 in Empty.
    pub start_ms: i64,
    pub last_update_ms: i64,
    pub client_tv: i16,
    /// The state a write in flight moves to.
    pub pending: Option<TxnState>,
    /// The last fence's write failed: its epoch bump is already here, do not bump again.
    pub failed_fence: bool,
}

impl TxnMetadata {
    fn fresh(producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnMetadata {
        TxnMetadata {
            producer_id,
            prev_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_tv: 0,
            pending: None,
            failed_fence: false,
        }
    }

    fn stored(&self) -> StoredTxn {
        let mut partitions: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for (topic, partition) in &self.partitions {
            partitions
                .entry(topic.clone())
                .or_default()
                .insert(*partition);
        }
        StoredTxn {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions,
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            previous_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            client_transaction_version: self.client_tv,
        }
    }

    fn from_stored(stored: StoredTxn) -> TxnMetadata {
        let partitions = if stored.state == TxnState::Empty {
            BTreeSet::new()
        } else {
            stored
                .partitions
                .into_iter()
                .flat_map(|(topic, partitions)| {
                    partitions.into_iter().map(move |p| (topic.clone(), p))
                })
                .collect()
        };
        TxnMetadata {
            producer_id: stored.producer_id,
            prev_producer_id: stored.previous_producer_id,
            next_producer_id: stored.next_producer_id,
            producer_epoch: stored.producer_epoch,
            last_producer_epoch: -1,
            timeout_ms: stored.timeout_ms,
            state: stored.state,
            partitions,
            start_ms: stored.start_ms,
            last_update_ms: stored.last_update_ms,
            client_tv: stored.client_transaction_version,
            pending: None,
            failed_fence: false,
        }
    }

    /// Takes the committed fields of `transit` (what its write made durable).
    fn apply(&mut self, transit: &TxnMetadata) {
        let failed_fence = self.failed_fence;
        *self = transit.clone();
        self.pending = None;
        self.failed_fence = failed_fence;
    }
}

/// Markers to write for one transaction, queued once its PrepareX committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    /// Empty for a transaction with no partitions (it completes at once).
    pub partitions: Vec<(String, i32)>,
}

/// How the markers of a job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkersOutcome {
    /// Every partition has its marker.
    Written,
    /// A partition answered that someone newer owns the producer or the partition
    /// (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED): stop, never complete.
    Fenced,
}

/// What became of a completion write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    Done,
    /// The write failed retriably (COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR while
    /// this coordinator still runs): ask again later.
    Retry,
    /// Nothing to complete, or this coordinator is no longer the owner.
    GiveUp,
}

/// InitProducerId and EndTxn's answer: an error code, or the producer id and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerReply {
    pub code: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl ProducerReply {
    pub fn error(code: i16) -> ProducerReply {
        ProducerReply {
            code,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
    fn ok(producer_id: i64, producer_epoch: i16) -> ProducerReply {
        ProducerReply {
            code: error_code::NONE,
            producer_id,
            producer_epoch,
        }
    }
}

/// DescribeTransactions of one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    pub transactional_id: String,
    pub state: TxnState,
    pub timeout_ms: i32,
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
}

/// ListTransactions' filters (empty lists and a negative duration filter nothing).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    pub duration_ms: i64,
}

/// What runs once a write settled, with the shard and the write's outcome.
pub type Answerer<R> = Box<dyn FnOnce(&mut TxnShard, Result<(), i16>) -> R + Send>;

fn answer_now<R: Send + 'static>(reply: R) -> (Records, Answerer<R>) {
    (Vec::new(), Box::new(move |_, _| reply))
}

/// §4.4: what a client is answered when a `__transaction_state` write failed.
pub fn coordinator_error_for_append(code: i16) -> i16 {
    match code {
        error_code::UNKNOWN_TOPIC_OR_PARTITION
        | error_code::NOT_ENOUGH_REPLICAS
        | error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | error_code::REQUEST_TIMED_OUT => error_code::COORDINATOR_NOT_AVAILABLE,
        error_code::NOT_LEADER_OR_FOLLOWER | error_code::KAFKA_STORAGE_ERROR => {
            error_code::NOT_COORDINATOR
        }
        error_code::MESSAGE_TOO_LARGE | error_code::RECORD_LIST_TOO_LARGE => {
            error_code::UNKNOWN_SERVER_ERROR
        }
        other => other,
    }
}

pub struct TxnShard {
    txns: HashMap<String, TxnMetadata>,
    settings: TxnSettings,
    /// The leader epoch of the partition when this shard took it over: every marker
    /// carries it, so partitions refuse an older coordinator's.
    coordinator_epoch: i32,
    producer_ids: Arc<dyn ProducerIdSource>,
    markers: Vec<MarkerJob>,
}

impl std::fmt::Debug for TxnShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnShard")
            .field("txns", &self.txns.len())
            .field("coordinator_epoch", &self.coordinator_epoch)
            .finish()
    }
}

impl TxnShard {
    pub fn new(
        settings: TxnSettings,
        coordinator_epoch: i32,
        producer_ids: Arc<dyn ProducerIdSource>,
    ) -> TxnShard {
        TxnShard {
            txns: HashMap::new(),
            settings,
            coordinator_epoch,
            producer_ids,
            markers: Vec::new(),
        }
    }

    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The metadata of an id, as committed (with its pending state).
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Replays one record of the partition (§6.6): the latest value of a key wins, a
    /// tombstone removes the id. False for a record that is not a transaction's (an
    /// unknown key version, skipped as Kafka does) or whose value does not decode.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        let Some(id) = records::decode_key(key) else {
            return false;
        };
        match value {
            None => {
                self.txns.remove(&id);
                true
            }
            Some(value) => match records::decode_value(value) {
                Some(stored) if stored.state.may_be_stored() => {
                    self.txns.insert(id, TxnMetadata::from_stored(stored));
                    true
                }
                _ => false,
            },
        }
    }

    /// After the load: every transaction the log left prepared is completed again by
    /// this coordinator (§4.5), its markers queued.
    pub fn resume_prepared(&mut self) {
        let mut prepared: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(id, _)| id.clone())
            .collect();
        // In id order, not the map's: the same log gives the same markers in the same
        // order (the simulator replays a seed only so).
        prepared.sort();
        for id in prepared {
            self.start_completion(&id);
        }
    }

    /// The cluster's transaction version changed (kafka-features): records written from
    /// now on use its value version, and the aborts this coordinator starts its rules.
    pub fn set_transaction_version(&mut self, level: i16) {
        self.settings.transaction_version = level;
    }

    /// The marker jobs queued since the last call.
    pub fn take_markers(&mut self) -> Vec<MarkerJob> {
        std::mem::take(&mut self.markers)
    }

    fn value_version(&self) -> i16 {
        if self.settings.transaction_version >= 1 {
            1
        } else {
            0
        }
    }

    fn record(&self, id: &str, transit: &TxnMetadata) -> Records {
        vec![(
            records::key(id),
            Some(records::value(&transit.stored(), self.value_version())),
        )]
    }

    /// Writes `transit` for `id` (marked pending until it settles); `answer` gets the
    /// write's outcome once the transit is applied (or dropped on failure).
    fn write_transit<R: Send + 'static>(
        &mut self,
        id: &str,
        transit: TxnMetadata,
        answer: impl FnOnce(&mut TxnShard, Result<(), i16>) -> R + Send + 'static,
    ) -> (Records, Answerer<R>) {
        let records = self.record(id, &transit);
        if let Some(metadata) = self.txns.get_mut(id) {
            // Kafka's table, checked as it is: a move it does not allow is a bug here.
            if !(transit.state == metadata.state || transit.state.may_follow(metadata.state)) {
                tracing::error!(transactional_id = id, from = ?metadata.state, to = ?transit.state, "a transition Kafka's table does not allow");
            }
            metadata.pending = Some(transit.state);
        }
        let id = id.to_string();
        (
            records,
            Box::new(move |shard, written| {
                let written = written.map_err(coordinator_error_for_append);
                if let Some(metadata) = shard.txns.get_mut(&id) {
                    if metadata.pending == Some(transit.state) {
                        match written {
                            Ok(()) => metadata.apply(&transit),
                            Err(_) => metadata.pending = None,
                        }
                    }
                }
                answer(shard, written)
            }),
        )
    }

    fn allocate_producer_id(&self) -> Result<i64, i16> {
        self.producer_ids.allocate()
    }

    /// InitProducerId with a transactional id (§2). `expected`: the producer id and
    /// epoch the client already has (v3+; KIP-360).
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
    ) -> (Records, Answerer<ProducerReply>) {
        let fail = |code| answer_now(ProducerReply::error(code));
        if transactional_id.is_empty() {
            return fail(error_code::INVALID_REQUEST);
        }
        if timeout_ms <= 0 || timeout_ms > self.settings.max_timeout_ms {
            return fail(error_code::INVALID_TRANSACTION_TIMEOUT);
        }
        if !self.txns.contains_key(transactional_id) {
            if self.txns.len() >= TRANSACTIONAL_IDS_MAX {
                return fail(error_code::COORDINATOR_NOT_AVAILABLE);
            }
            let producer_id = match self.allocate_producer_id() {
                Ok(id) => id,
                Err(code) => return fail(code),
            };
            // Cached before it is written, as Kafka does: a failed write leaves an
            // entry at epoch -1 the next attempt reuses.
            self.txns.insert(
                transactional_id.to_string(),
                TxnMetadata::fresh(producer_id, timeout_ms, now_ms),
            );
        }
        let metadata = &self.txns[transactional_id];
        if metadata.pending.is_some() {
            return fail(error_code::CONCURRENT_TRANSACTIONS);
        }
        if let Some((pid, epoch)) = expected {
            let known = metadata.producer_epoch == -1
                || pid == metadata.producer_id
                || (pid == metadata.prev_producer_id && epoch_exhausted(epoch));
            if !known {
                return fail(error_code::PRODUCER_FENCED);
            }
        }
        match metadata.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                fail(error_code::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut transit = metadata.clone();
                let rotate = epoch_exhausted(metadata.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == metadata.producer_epoch);
                if rotate {
                    let producer_id = match self.allocate_producer_id() {
                        Ok(id) => id,
                        Err(code) => return fail(code),
                    };
                    transit.prev_producer_id = metadata.producer_id;
                    transit.producer_id = producer_id;
                    transit.producer_epoch = 0;
                    transit.last_producer_epoch = if expected.is_some() {
                        metadata.producer_epoch
                    } else {
                        -1
                    };
                } else {
                    if epoch_exhausted(metadata.producer_epoch) {
                        return fail(error_code::UNKNOWN_SERVER_ERROR);
                    }
                    let current = metadata.producer_epoch;
                    let (epoch, last) = match expected.map(|(_, epoch)| epoch) {
                        None => (current + 1, -1),
                        Some(epoch) if current == -1 || epoch == current => (current + 1, current),
                        Some(epoch) if epoch == metadata.last_producer_epoch => {
                            (current, metadata.last_producer_epoch)
                        }
                        Some(_) => return fail(error_code::PRODUCER_FENCED),
                    };
                    transit.prev_producer_id = metadata.producer_id;
                    transit.producer_epoch = epoch;
                    transit.last_producer_epoch = last;
                }
                transit.state = TxnState::Empty;
                transit.partitions.clear();
                transit.start_ms = -1;
                transit.timeout_ms = timeout_ms;
                transit.last_update_ms = now_ms.max(metadata.last_update_ms);
                let reply = ProducerReply::ok(transit.producer_id, transit.producer_epoch);
                self.write_transit(transactional_id, transit, move |_, written| match written {
                    Ok(()) => reply,
                    Err(code) => ProducerReply::error(code),
                })
            }
            TxnState::Ongoing => {
                let (records, answer) = self.fence(transactional_id, now_ms);
                (
                    records,
                    Box::new(move |shard, written| {
                        ProducerReply::error(match answer(shard, written) {
                            Ok(()) => error_code::CONCURRENT_TRANSACTIONS,
                            Err(code) => code,
                        })
                    }),
                )
            }
            TxnState::Dead | TxnState::PrepareEpochFence => fail(error_code::UNKNOWN_SERVER_ERROR),
        }
    }

    /// Fences the producer of an Ongoing transaction and aborts it (§2.5), in one write
    /// whose PrepareAbort carries the epoch after the producer's, so its markers fence it
    /// at every partition. Under transaction version 0 the bumped epoch is taken in memory
    /// at once (the old producer is fenced even if the write fails, and a retry does not
    /// bump again). Under version 2 the bump is the abort's own, as every TV2 end is, and
    /// memory changes only once it is written: one bump, not a fence bump and then an
    /// end bump (Kafka 4.0.0 bumped twice; KAFKA-19367 fixed it in 4.0.1, and 4.1 and 4.4
    /// bump once, so a late EndTxn v5 from the fenced producer reads as a retry).
    fn fence(&mut self, id: &str, now_ms: i64) -> (Records, Answerer<Result<(), i16>>) {
        let server_tv2 = self.settings.transaction_version >= 2;
        let metadata = self.txns.get_mut(id).expect("fencing a known id");
        let mut transit = metadata.clone();
        if server_tv2 {
            if metadata.producer_epoch < i16::MAX {
                transit.producer_epoch = metadata.producer_epoch + 1;
                transit.last_producer_epoch = metadata.producer_epoch;
            }
        } else {
            let fence_epoch = if metadata.failed_fence || metadata.producer_epoch == i16::MAX {
                metadata.producer_epoch
            } else {
                metadata.producer_epoch + 1
            };
            metadata.producer_epoch = fence_epoch;
            metadata.last_producer_epoch = -1;
            transit.producer_epoch = fence_epoch;
            transit.last_producer_epoch = -1;
        }
        transit.state = TxnState::PrepareAbort;
        transit.last_update_ms = now_ms.max(metadata.last_update_ms);
        transit.client_tv = if server_tv2 { 2 } else { 0 };
        let id_owned = id.to_string();
        self.write_transit(id, transit, move |shard, written| {
            match written {
                Ok(()) => shard.start_completion(&id_owned),
                Err(_) => {
                    if let Some(metadata) = shard.txns.get_mut(&id_owned) {
                        metadata.failed_fence = true;
                    }
                }
            }
            written
        })
    }

    /// The PrepareX of `id` committed: CompleteX is pending until its markers are out.
    fn start_completion(&mut self, id: &str) {
        let coordinator_epoch = self.coordinator_epoch;
        let Some(metadata) = self.txns.get_mut(id) else {
            return;
        };
        let commit = metadata.state == TxnState::PrepareCommit;
        metadata.pending = Some(if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        });
        self.markers.push(MarkerJob {
            transactional_id: id.to_string(),
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            commit,
            coordinator_epoch,
            partitions: metadata.partitions.iter().cloned().collect(),
        });
    }

    /// AddPartitionsToTxn from a client (v0-3, transaction version 0) or a broker adding
    /// for a produce (v5, transaction version 2), and AddOffsetsToTxn (§3.1, §3.2): one
    /// error code for all the partitions.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
        client_tv: i16,
        now_ms: i64,
    ) -> (Records, Answerer<i16>) {
        if transactional_id.is_empty() {
            return answer_now(error_code::INVALID_REQUEST);
        }
        let Some(metadata) = self.txns.get(transactional_id) else {
            return answer_now(error_code::INVALID_PRODUCER_ID_MAPPING);
        };
        if metadata.pending.is_some() {
            return answer_now(error_code::CONCURRENT_TRANSACTIONS);
        }
        if metadata.producer_id != producer_id {
            return answer_now(error_code::INVALID_PRODUCER_ID_MAPPING);
        }
        if metadata.producer_epoch != producer_epoch {
            return answer_now(error_code::PRODUCER_FENCED);
        }
        match metadata.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return answer_now(error_code::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Ongoing if partitions.iter().all(|tp| metadata.partitions.contains(tp)) => {
                return answer_now(error_code::NONE)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                return answer_now(error_code::UNKNOWN_SERVER_ERROR)
            }
            _ => {}
        }
        let mut transit = metadata.clone();
        transit.partitions.extend(partitions);
        if transit.partitions.len() > TRANSACTION_PARTITIONS_MAX {
            return answer_now(error_code::INVALID_REQUEST);
        }
        if metadata.state != TxnState::Ongoing {
            transit.start_ms = now_ms;
        }
        transit.state = TxnState::Ongoing;
        transit.last_update_ms = now_ms.max(metadata.last_update_ms);
        transit.client_tv = client_tv;
        self.write_transit(transactional_id, transit, |_, written| match written {
            Ok(()) => error_code::NONE,
            Err(code) => code,
        })
    }

    /// KIP-890 part 1 (§3.1, verify only): whether each partition is in the ongoing
    /// transaction of this producer. Nothing is written.
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let metadata = self
            .txns
            .get(transactional_id)
            .filter(|m| m.producer_id == producer_id)
            .ok_or(error_code::INVALID_PRODUCER_ID_MAPPING)?;
        if metadata.producer_epoch != producer_epoch {
            return Err(error_code::PRODUCER_FENCED);
        }
        if matches!(
            metadata.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            return Err(error_code::CONCURRENT_TRANSACTIONS);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                if metadata.state == TxnState::Ongoing && metadata.partitions.contains(tp) {
                    error_code::NONE
                } else {
                    error_code::TRANSACTION_ABORTABLE
                }
            })
            .collect())
    }

    /// EndTxn (§3.4). `client_tv`: 2 for EndTxn v5+, else 0.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_tv: i16,
        now_ms: i64,
    ) -> (Records, Answerer<ProducerReply>) {
        let fail = |code| answer_now(ProducerReply::error(code));
        if transactional_id.is_empty() {
            return fail(error_code::INVALID_REQUEST);
        }
        let Some(metadata) = self.txns.get(transactional_id) else {
            return fail(error_code::INVALID_PRODUCER_ID_MAPPING);
        };
        use TxnState::*;
        let tv2 = client_tv >= 2;
        let state = metadata.state;
        if !tv2 {
            if metadata.producer_id != producer_id {
                return fail(error_code::INVALID_PRODUCER_ID_MAPPING);
            }
            if metadata.producer_epoch != producer_epoch {
                return fail(error_code::PRODUCER_FENCED);
            }
            if metadata.pending.is_some() {
                return fail(error_code::CONCURRENT_TRANSACTIONS);
            }
            return match (state, commit) {
                (Ongoing, _) => self.prepare_end(transactional_id, commit, client_tv, now_ms),
                (PrepareCommit, true) | (PrepareAbort, false) => {
                    fail(error_code::CONCURRENT_TRANSACTIONS)
                }
                (CompleteCommit, true) | (CompleteAbort, false) => {
                    answer_now(ProducerReply::error(error_code::NONE))
                }
                _ => fail(error_code::INVALID_TXN_STATE),
            };
        }
        // Transaction version 2: every EndTxn bumps the epoch, so a retry carries the
        // epoch one below the stored one (or the last epoch of a rotated producer id).
        // A transition in flight (the markers of the last EndTxn, say) comes first, as
        // Kafka 4 checks it (KAFKA-18464): the producer already holds the bumped epoch, so
        // its next EndTxn must wait (CONCURRENT_TRANSACTIONS, retried), not be fenced.
        if metadata
            .pending
            .is_some_and(|pending| pending != PrepareEpochFence)
        {
            return fail(error_code::CONCURRENT_TRANSACTIONS);
        }
        let retry_on_bump = metadata.producer_epoch as i32 == producer_epoch as i32 + 1;
        let retry_on_overflow = metadata.prev_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && metadata.producer_epoch == 0;
        let is_retry = retry_on_bump || retry_on_overflow;
        if metadata.producer_id != producer_id && !retry_on_overflow {
            return fail(error_code::INVALID_PRODUCER_ID_MAPPING);
        }
        let same_epoch = metadata.producer_epoch == producer_epoch;
        let epoch_valid = match state {
            Ongoing | Empty => same_epoch,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => is_retry || same_epoch,
            Dead | PrepareEpochFence => false,
        };
        if !epoch_valid {
            return fail(error_code::PRODUCER_FENCED);
        }
        if metadata.pending.is_some() {
            return fail(error_code::CONCURRENT_TRANSACTIONS);
        }
        let current = ProducerReply::ok(metadata.producer_id, metadata.producer_epoch);
        match (state, commit, is_retry) {
            (Ongoing, _, false) => self.prepare_end(transactional_id, commit, client_tv, now_ms),
            (PrepareCommit, true, _) | (PrepareAbort, false, _) => {
                fail(error_code::CONCURRENT_TRANSACTIONS)
            }
            (CompleteCommit, true, true) | (CompleteAbort, false, true) => answer_now(current),
            (Empty | CompleteCommit | CompleteAbort, false, false) => {
                self.prepare_end(transactional_id, false, client_tv, now_ms)
            }
            _ => fail(error_code::INVALID_TXN_STATE),
        }
    }

    /// Writes PrepareCommit / PrepareAbort (§1.3); once it commits, the reply goes out and
    /// the markers are queued (§3.4.3).
    fn prepare_end(
        &mut self,
        id: &str,
        commit: bool,
        client_tv: i16,
        now_ms: i64,
    ) -> (Records, Answerer<ProducerReply>) {
        let metadata = &self.txns[id];
        let mut transit = metadata.clone();
        transit.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        transit.client_tv = client_tv;
        transit.last_update_ms = now_ms.max(metadata.last_update_ms);
        let tv2 = client_tv >= 2;
        if tv2 {
            if epoch_exhausted(metadata.producer_epoch) {
                match self.allocate_producer_id() {
                    Ok(next) => transit.next_producer_id = next,
                    Err(code) => return answer_now(ProducerReply::error(code)),
                }
            }
            if transit.producer_epoch < i16::MAX {
                transit.last_producer_epoch = metadata.producer_epoch;
                transit.producer_epoch += 1;
            }
            if metadata.state != TxnState::Ongoing {
                // An abort with nothing in it (TV2 lets a client abort when unsure).
                transit.start_ms = now_ms;
                transit.partitions.clear();
            }
        }
        let id_owned = id.to_string();
        self.write_transit(id, transit, move |shard, written| {
            if let Err(code) = written {
                return ProducerReply::error(code);
            }
            shard.start_completion(&id_owned);
            if !tv2 {
                return ProducerReply::error(error_code::NONE);
            }
            let metadata = &shard.txns[&id_owned];
            if metadata.next_producer_id >= 0 {
                ProducerReply::ok(metadata.next_producer_id, 0)
            } else {
                ProducerReply::ok(metadata.producer_id, metadata.producer_epoch)
            }
        })
    }

    /// The broker reports on a marker job (§4.3): with every marker written, CompleteX
    /// is written.
    pub fn markers_written(
        &mut self,
        job: &MarkerJob,
        outcome: MarkersOutcome,
        now_ms: i64,
    ) -> (Records, Answerer<Completion>) {
        let id = job.transactional_id.as_str();
        let Some(metadata) = self.txns.get(id) else {
            return answer_now(Completion::GiveUp);
        };
        let target = if job.commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        let prepared = if job.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if metadata.state != prepared
            || metadata.pending != Some(target)
            || metadata.producer_id != job.producer_id
            || metadata.producer_epoch != job.producer_epoch
            || job.coordinator_epoch != self.coordinator_epoch
        {
            return answer_now(Completion::GiveUp);
        }
        if outcome == MarkersOutcome::Fenced {
            // Someone newer owns the producer: never complete here (a reload will).
            return answer_now(Completion::GiveUp);
        }
        let mut transit = metadata.clone();
        transit.state = target;
        transit.partitions.clear();
        transit.last_update_ms = now_ms.max(metadata.last_update_ms);
        if metadata.next_producer_id >= 0 {
            transit.prev_producer_id = metadata.producer_id;
            transit.producer_id = metadata.next_producer_id;
            transit.producer_epoch = 0;
        }
        transit.next_producer_id = -1;
        let records = self.record(id, &transit);
        let id = id.to_string();
        (
            records,
            Box::new(move |shard, written| {
                let Some(metadata) = shard.txns.get_mut(&id) else {
                    return Completion::GiveUp;
                };
                if metadata.pending != Some(target) {
                    return Completion::GiveUp;
                }
                match written.map_err(coordinator_error_for_append) {
                    Ok(()) => {
                        metadata.apply(&transit);
                        metadata.failed_fence = false;
                        Completion::Done
                    }
                    // The pending state stays: the retry writes the same record.
                    // NOT_COORDINATOR too (a deliberate difference from Kafka, which
                    // retries only COORDINATOR_NOT_AVAILABLE): a storage error maps to it,
                    // which in Kafka means the log directory went offline and leadership
                    // moves to a successor that resumes the transaction; Strand keeps a
                    // log on a full disk up (the write cut back), so the coordinator
                    // still owns the partition and nobody else would ever complete it
                    // (the simulator found the transaction stuck prepared, its producer
                    // answered CONCURRENT_TRANSACTIONS for good). A coordinator that
                    // really lost the partition is stopped, which ends its retries.
                    Err(error_code::COORDINATOR_NOT_AVAILABLE | error_code::NOT_COORDINATOR) => {
                        Completion::Retry
                    }
                    Err(_) => Completion::GiveUp,
                }
            }),
        )
    }

    /// §5.1: fences and aborts every Ongoing transaction past its timeout. Returns how
    /// many it aborted (their markers are queued as their writes commit).
    pub fn abort_timed_out(&mut self, now_ms: i64) -> (Records, Answerer<usize>) {
        let mut expired: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                m.pending.is_none()
                    && m.state == TxnState::Ongoing
                    && m.start_ms.saturating_add(m.timeout_ms as i64) < now_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        expired.sort();
        let mut records = Vec::new();
        let mut answers = Vec::new();
        for id in expired {
            tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
            let (written, answer) = self.fence(&id, now_ms);
            records.extend(written);
            answers.push(answer);
        }
        (
            records,
            Box::new(move |shard, written| {
                // Every answer runs, so a failed write clears each pending state.
                answers
                    .into_iter()
                    .map(|answer| answer(shard, written))
                    .filter(Result::is_ok)
                    .count()
            }),
        )
    }

    /// §5.2: tombstones for ids idle longer than transactional.id.expiration.ms. Returns
    /// how many were removed.
    pub fn expire_ids(&mut self, now_ms: i64) -> (Records, Answerer<usize>) {
        let horizon = now_ms.saturating_sub(self.settings.id_expiration_ms);
        let mut expired: Vec<(String, i16)> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                m.pending.is_none() && m.state.may_expire() && m.last_update_ms <= horizon
            })
            .map(|(id, m)| (id.clone(), m.producer_epoch))
            .collect();
        expired.sort();
        expired.truncate(EXPIRED_PER_SWEEP_MAX);
        let mut records = Vec::with_capacity(expired.len());
        for (id, _) in &expired {
            self.txns.get_mut(id).expect("listed above").pending = Some(TxnState::Dead);
            records.push((records::key(id), None));
        }
        (
            records,
            Box::new(move |shard, written| {
                let mut removed = 0;
                for (id, epoch) in expired {
                    let Some(metadata) = shard.txns.get_mut(&id) else {
                        continue;
                    };
                    if metadata.pending != Some(TxnState::Dead) {
                        continue;
                    }
                    if written.is_ok() && metadata.producer_epoch == epoch {
                        shard.txns.remove(&id);
                        removed += 1;
                    } else {
                        metadata.pending = None;
                    }
                }
                removed
            }),
        )
    }

    /// DescribeTransactions of one id (§8): the committed metadata.
    pub fn describe(&self, transactional_id: &str) -> Result<TxnDescription, i16> {
        if transactional_id.is_empty() {
            return Err(error_code::INVALID_REQUEST);
        }
        let metadata = self
            .txns
            .get(transactional_id)
            .filter(|m| m.state != TxnState::Dead)
            .ok_or(error_code::TRANSACTIONAL_ID_NOT_FOUND)?;
        Ok(TxnDescription {
            transactional_id: transactional_id.to_string(),
            state: metadata.state,
            timeout_ms: metadata.timeout_ms,
            start_ms: metadata.start_ms,
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            partitions: metadata.partitions.iter().cloned().collect(),
        })
    }

    /// ListTransactions on this partition (§8): (transactional id, producer id, state).
    pub fn list(&self, filter: &ListFilter, now_ms: i64) -> Vec<(String, i64, TxnState)> {
        let states: Vec<TxnState> = filter
            .states
            .iter()
            .filter_map(|name| TxnState::from_name(name))
            .collect();
        let mut listed: Vec<_> = self
            .txns
            .iter()
            .filter(|(_, m)| m.state != TxnState::Dead)
            .filter(|(_, m)| {
                filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id)
            })
            .filter(|(_, m)| filter.states.is_empty() || states.contains(&m.state))
            .filter(|(_, m)| {
                filter.duration_ms < 0 || now_ms.saturating_sub(m.start_ms) > filter.duration_ms
            })
            .map(|(id, m)| (id.clone(), m.producer_id, m.state))
            .collect();
        listed.sort();
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Mutex;

    struct Counter(AtomicI64, Mutex<Option<i16>>);

    impl ProducerIdSource for Counter {
        fn allocate(&self) -> Result<i64, i16> {
            if let Some(code) = *self.1.lock().unwrap() {
                return Err(code);
            }
            Ok(self.0.fetch_add(1, Ordering::SeqCst))
        }
    }

    const NOW: i64 = 1_000_000;
    const TIMEOUT: i32 = 60_000;

    fn shard() -> TxnShard {
        shard_with(TxnSettings::default())
    }

    fn shard_with(settings: TxnSettings) -> TxnShard {
        TxnShard::new(
            settings,
            7,
            Arc::new(Counter(AtomicI64::new(1000), Mutex::new(None))),
        )
    }

    /// Runs a step whose write commits (or fails with `written`), returning the records
    /// and the answer.
    fn settle<R>(
        shard: &mut TxnShard,
        step: (Records, Answerer<R>),
        written: Result<(), i16>,
    ) -> (Records, R) {
        let (records, answer) = step;
        let reply = answer(shard, written);
        (records, reply)
    }

    fn ok<R>(shard: &mut TxnShard, step: (Records, Answerer<R>)) -> R {
        settle(shard, step, Ok(())).1
    }

    fn init(shard: &mut TxnShard, id: &str) -> ProducerReply {
        let step = shard.init_producer_id(id, TIMEOUT, None, NOW);
        ok(shard, step)
    }

    fn tp(topic: &str, partition: i32) -> (String, i32) {
        (topic.to_string(), partition)
    }

    fn add(
        shard: &mut TxnShard,
        id: &str,
        reply: ProducerReply,
        partitions: &[(&str, i32)],
    ) -> i16 {
        let partitions = partitions.iter().map(|(t, p)| tp(t, *p)).collect();
        let step = shard.add_partitions(
            id,
            reply.producer_id,
            reply.producer_epoch,
            partitions,
            0,
            NOW,
        );
        ok(shard, step)
    }

    fn end(
        shard: &mut TxnShard,
        id: &str,
        reply: ProducerReply,
        commit: bool,
        tv: i16,
    ) -> ProducerReply {
        let step = shard.end_txn(id, reply.producer_id, reply.producer_epoch, commit, tv, NOW);
        ok(shard, step)
    }

    /// Writes the markers of every queued job and the completion.
    fn complete(shard: &mut TxnShard) -> Vec<MarkerJob> {
        let jobs = shard.take_markers();
        for job in &jobs {
            let step = shard.markers_written(job, MarkersOutcome::Written, NOW);
            assert_eq!(ok(shard, step), Completion::Done);
        }
        jobs
    }

    fn state(shard: &TxnShard, id: &str) -> TxnState {
        shard.get(id).unwrap().state
    }

    #[test]
    fn init_with_empty_id_is_invalid_request() {
        let mut shard = shard();
        assert_eq!(init(&mut shard, "").code, error_code::INVALID_REQUEST);
    }

    #[test]
    fn init_timeout_above_max_or_non_positive_is_invalid_transaction_timeout() {
        let mut shard = shard();
        for timeout in [0, -1, TRANSACTION_MAX_TIMEOUT_MS + 1] {
            let step = shard.init_producer_id("t", timeout, None, NOW);
            let (records, reply) = settle(&mut shard, step, Ok(()));
            assert_eq!(reply.code, error_code::INVALID_TRANSACTION_TIMEOUT);
            assert!(records.is_empty());
        }
    }

    #[test]
    fn init_new_id_writes_empty_at_epoch_0() {
        let mut shard = shard();
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (records, reply) = settle(&mut shard, step, Ok(()));
        assert_eq!(reply, ProducerReply::ok(1000, 0));
        assert_eq!(records.len(), 1);
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!((stored.state, stored.producer_epoch), (TxnState::Empty, 0));
        assert_eq!(records::decode_key(&records[0].0).as_deref(), Some("t"));
    }

    #[test]
    fn init_new_id_whose_write_fails_is_kept_at_epoch_minus_1_and_reused() {
        let mut shard = shard();
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (_, reply) = settle(&mut shard, step, Err(error_code::REQUEST_TIMED_OUT));
        assert_eq!(reply.code, error_code::COORDINATOR_NOT_AVAILABLE);
        assert_eq!(shard.get("t").unwrap().producer_epoch, -1);
        assert_eq!(init(&mut shard, "t"), ProducerReply::ok(1000, 0));
    }

    #[test]
    fn init_with_expected_pid_epoch_of_a_new_id_gets_fresh_pid() {
        let mut shard = shard();
        let step = shard.init_producer_id("t", TIMEOUT, Some((55, 3)), NOW);
        assert_eq!(ok(&mut shard, step), ProducerReply::ok(1000, 0));
    }

    #[test]
    fn init_bumps_epoch_from_empty_complete_commit_complete_abort() {
        let mut shard = shard();
        let first = init(&mut shard, "t");
        let second = init(&mut shard, "t");
        assert_eq!(second, ProducerReply::ok(first.producer_id, 1));
        for commit in [true, false] {
            let current = init(&mut shard, "t");
            assert_eq!(add(&mut shard, "t", current, &[("a", 0)]), error_code::NONE);
            assert_eq!(
                end(&mut shard, "t", current, commit, 0).code,
                error_code::NONE
            );
            complete(&mut shard);
            let expected = if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            assert_eq!(state(&shard, "t"), expected);
            let next = init(&mut shard, "t");
            assert_eq!(next.producer_epoch, current.producer_epoch + 1);
            assert_eq!(state(&shard, "t"), TxnState::Empty);
        }
    }

    #[test]
    fn init_in_prepare_commit_or_abort_is_concurrent_transactions() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        end(&mut shard, "t", reply, true, 0);
        assert_eq!(state(&shard, "t"), TxnState::PrepareCommit);
        assert_eq!(
            init(&mut shard, "t").code,
            error_code::CONCURRENT_TRANSACTIONS
        );
    }

    #[test]
    fn init_with_pending_transition_is_concurrent_transactions() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        let (_records, _pending) =
            shard.add_partitions("t", reply.producer_id, 0, vec![tp("a", 0)], 0, NOW);
        assert_eq!(
            init(&mut shard, "t").code,
            error_code::CONCURRENT_TRANSACTIONS
        );
    }

    #[test]
    fn init_on_ongoing_fences_writes_prepare_abort_and_returns_concurrent_transactions() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0), ("b", 1)]);
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (records, answer) = settle(&mut shard, step, Ok(()));
        assert_eq!(answer.code, error_code::CONCURRENT_TRANSACTIONS);
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!(
            (stored.state, stored.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        let jobs = complete(&mut shard);
        assert_eq!(jobs.len(), 1);
        assert!(!jobs[0].commit);
        assert_eq!(jobs[0].producer_epoch, 1, "markers fence the old epoch");
        assert_eq!(jobs[0].partitions, vec![tp("a", 0), tp("b", 1)]);
        assert_eq!(jobs[0].coordinator_epoch, 7);
        // The new instance retries and gets the epoch after the fence.
        assert_eq!(
            init(&mut shard, "t"),
            ProducerReply::ok(reply.producer_id, 2)
        );
        // The old one is fenced.
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::PRODUCER_FENCED
        );
    }

    #[test]
    fn init_fence_write_failure_does_not_bump_twice_on_retry() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (_, failed) = settle(&mut shard, step, Err(error_code::NOT_ENOUGH_REPLICAS));
        assert_eq!(failed.code, error_code::COORDINATOR_NOT_AVAILABLE);
        let metadata = shard.get("t").unwrap();
        assert_eq!(
            (metadata.state, metadata.producer_epoch),
            (TxnState::Ongoing, 1)
        );
        assert!(metadata.failed_fence);
        // The old producer is fenced already, in memory.
        assert_eq!(
            add(&mut shard, "t", reply, &[("b", 0)]),
            error_code::PRODUCER_FENCED
        );
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (records, _) = settle(&mut shard, step, Ok(()));
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!(
            stored.producer_epoch, 1,
            "the retry reuses the fence's epoch"
        );
    }

    #[test]
    fn init_rotates_pid_when_epoch_exhausted() {
        let mut shard = shard();
        let first = init(&mut shard, "t");
        shard.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
        let rotated = init(&mut shard, "t");
        assert_ne!(rotated.producer_id, first.producer_id);
        assert_eq!(rotated.producer_epoch, 0);
        assert_eq!(shard.get("t").unwrap().prev_producer_id, first.producer_id);
    }

    #[test]
    fn init_retry_after_rotation_with_old_pid_returns_new_pid() {
        let mut shard = shard();
        let first = init(&mut shard, "t");
        shard.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
        let expected = Some((first.producer_id, i16::MAX - 1));
        let step = shard.init_producer_id("t", TIMEOUT, expected, NOW);
        let rotated = ok(&mut shard, step);
        assert_eq!(rotated.producer_epoch, 0);
        // The reply was lost: the client retries with what it had.
        let step = shard.init_producer_id("t", TIMEOUT, expected, NOW);
        assert_eq!(ok(&mut shard, step), rotated);
        // A stale epoch with the old pid is fenced.
        let step = shard.init_producer_id("t", TIMEOUT, Some((first.producer_id, 3)), NOW);
        assert_eq!(ok(&mut shard, step).code, error_code::PRODUCER_FENCED);
    }

    #[test]
    fn init_with_current_expected_epoch_bumps_and_retry_with_last_epoch_returns_same() {
        let mut shard = shard();
        let first = init(&mut shard, "t");
        let expected = Some((first.producer_id, first.producer_epoch));
        let step = shard.init_producer_id("t", TIMEOUT, expected, NOW);
        let bumped = ok(&mut shard, step);
        assert_eq!(bumped.producer_epoch, 1);
        assert_eq!(shard.get("t").unwrap().last_producer_epoch, 0);
        let step = shard.init_producer_id("t", TIMEOUT, expected, NOW);
        assert_eq!(ok(&mut shard, step), bumped, "a retry of the bump");
        let step = shard.init_producer_id("t", TIMEOUT, Some((first.producer_id, 9)), NOW);
        assert_eq!(ok(&mut shard, step).code, error_code::PRODUCER_FENCED);
        let step = shard.init_producer_id("t", TIMEOUT, Some((4242, 1)), NOW);
        assert_eq!(ok(&mut shard, step).code, error_code::PRODUCER_FENCED);
    }

    #[test]
    fn init_without_producer_ids_is_answered_with_the_sources_error() {
        let counter = Arc::new(Counter(
            AtomicI64::new(0),
            Mutex::new(Some(error_code::COORDINATOR_LOAD_IN_PROGRESS)),
        ));
        let mut shard = TxnShard::new(TxnSettings::default(), 0, counter);
        assert_eq!(
            init(&mut shard, "t").code,
            error_code::COORDINATOR_LOAD_IN_PROGRESS
        );
        assert!(shard.get("t").is_none());
    }

    #[test]
    fn add_unknown_id_is_invalid_producer_id_mapping_and_empty_is_invalid_request() {
        let mut shard = shard();
        let reply = ProducerReply::ok(1, 0);
        assert_eq!(
            add(&mut shard, "nope", reply, &[("a", 0)]),
            error_code::INVALID_PRODUCER_ID_MAPPING
        );
        assert_eq!(
            add(&mut shard, "", reply, &[("a", 0)]),
            error_code::INVALID_REQUEST
        );
        let real = init(&mut shard, "t");
        let other_pid = ProducerReply::ok(real.producer_id + 1, 0);
        assert_eq!(
            add(&mut shard, "t", other_pid, &[("a", 0)]),
            error_code::INVALID_PRODUCER_ID_MAPPING
        );
    }

    #[test]
    fn add_wrong_epoch_is_producer_fenced() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        let stale = ProducerReply::ok(reply.producer_id, reply.producer_epoch + 1);
        assert_eq!(
            add(&mut shard, "t", stale, &[("a", 0)]),
            error_code::PRODUCER_FENCED
        );
    }

    #[test]
    fn add_new_partitions_writes_ongoing_and_known_ones_write_nothing() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        let step = shard.add_partitions("t", reply.producer_id, 0, vec![tp("a", 0)], 0, NOW + 5);
        let (records, code) = settle(&mut shard, step, Ok(()));
        assert_eq!((records.len(), code), (1, error_code::NONE));
        let metadata = shard.get("t").unwrap();
        assert_eq!(
            (metadata.state, metadata.start_ms),
            (TxnState::Ongoing, NOW + 5)
        );
        let step = shard.add_partitions("t", reply.producer_id, 0, vec![tp("a", 0)], 0, NOW + 9);
        let (records, code) = settle(&mut shard, step, Ok(()));
        assert_eq!((records.len(), code), (0, error_code::NONE));
        let step = shard.add_partitions("t", reply.producer_id, 0, vec![tp("b", 2)], 0, NOW + 9);
        let (records, _) = settle(&mut shard, step, Ok(()));
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!(stored.start_ms, NOW + 5, "the start is the first add's");
        assert_eq!(shard.get("t").unwrap().partitions.len(), 2);
    }

    #[test]
    fn add_in_prepare_states_is_concurrent_transactions() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        end(&mut shard, "t", reply, false, 0);
        // Pending CompleteAbort while markers go out.
        assert_eq!(
            add(&mut shard, "t", reply, &[("a", 0)]),
            error_code::CONCURRENT_TRANSACTIONS
        );
        shard.txns.get_mut("t").unwrap().pending = None;
        assert_eq!(
            add(&mut shard, "t", reply, &[("a", 0)]),
            error_code::CONCURRENT_TRANSACTIONS
        );
    }

    #[test]
    fn a_failed_add_leaves_the_metadata_as_it_was() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        let step = shard.add_partitions("t", reply.producer_id, 0, vec![tp("a", 0)], 0, NOW);
        let (_, code) = settle(&mut shard, step, Err(error_code::KAFKA_STORAGE_ERROR));
        assert_eq!(code, error_code::NOT_COORDINATOR);
        let metadata = shard.get("t").unwrap();
        assert_eq!((metadata.state, metadata.pending), (TxnState::Empty, None));
        assert!(metadata.partitions.is_empty());
    }

    #[test]
    fn verify_only_known_partitions_is_none_others_transaction_abortable() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        assert_eq!(
            shard.verify("t", reply.producer_id, 0, &[tp("a", 0), tp("a", 1)]),
            Ok(vec![error_code::NONE, error_code::TRANSACTION_ABORTABLE])
        );
        assert_eq!(
            shard.verify("t", reply.producer_id, 1, &[tp("a", 0)]),
            Err(error_code::PRODUCER_FENCED)
        );
        assert_eq!(
            shard.verify("t", 1, 0, &[tp("a", 0)]),
            Err(error_code::INVALID_PRODUCER_ID_MAPPING)
        );
        end(&mut shard, "t", reply, true, 0);
        assert_eq!(
            shard.verify("t", reply.producer_id, 0, &[tp("a", 0)]),
            Err(error_code::CONCURRENT_TRANSACTIONS)
        );
        complete(&mut shard);
        assert_eq!(
            shard.verify("t", reply.producer_id, 0, &[tp("a", 0)]),
            Ok(vec![error_code::TRANSACTION_ABORTABLE]),
            "a late write after the commit joins no transaction"
        );
    }

    #[test]
    fn end_unknown_id_or_other_pid_is_invalid_producer_id_mapping() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        assert_eq!(
            end(&mut shard, "x", reply, true, 0).code,
            error_code::INVALID_PRODUCER_ID_MAPPING
        );
        let other = ProducerReply::ok(reply.producer_id + 1, 0);
        assert_eq!(
            end(&mut shard, "t", other, true, 0).code,
            error_code::INVALID_PRODUCER_ID_MAPPING
        );
    }

    #[test]
    fn end_wrong_epoch_is_producer_fenced_tv0() {
        let mut shard = shard();
        init(&mut shard, "t");
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        for epoch in [0, 2] {
            let wrong = ProducerReply::ok(reply.producer_id, epoch);
            assert_eq!(
                end(&mut shard, "t", wrong, true, 0).code,
                error_code::PRODUCER_FENCED
            );
        }
    }

    #[test]
    fn end_tv0_state_table() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::INVALID_TXN_STATE,
            "empty"
        );
        assert_eq!(
            end(&mut shard, "t", reply, false, 0).code,
            error_code::INVALID_TXN_STATE,
            "empty"
        );
        add(&mut shard, "t", reply, &[("a", 0)]);
        let step = shard.end_txn("t", reply.producer_id, 0, true, 0, NOW);
        let (records, answer) = settle(&mut shard, step, Ok(()));
        assert_eq!(
            answer,
            ProducerReply::error(error_code::NONE),
            "replied before the markers"
        );
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!(
            (stored.state, stored.producer_epoch),
            (TxnState::PrepareCommit, 0)
        );
        shard.txns.get_mut("t").unwrap().pending = None;
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            end(&mut shard, "t", reply, false, 0).code,
            error_code::INVALID_TXN_STATE
        );
        shard.txns.get_mut("t").unwrap().pending = Some(TxnState::CompleteCommit);
        complete(&mut shard);
        assert_eq!(state(&shard, "t"), TxnState::CompleteCommit);
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::NONE,
            "a retry"
        );
        assert_eq!(
            end(&mut shard, "t", reply, false, 0).code,
            error_code::INVALID_TXN_STATE
        );
    }

    #[test]
    fn tv2_an_end_txn_while_the_last_ones_markers_are_out_waits() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let bumped = end(&mut shard, "t", reply, true, 2);
        assert_eq!(bumped.producer_epoch, reply.producer_epoch + 1);
        // The markers are not written yet; the client, at its new epoch, aborts an
        // empty transaction (franz-go does when nothing it produced succeeded).
        assert_eq!(
            end(&mut shard, "t", bumped, false, 2).code,
            error_code::CONCURRENT_TRANSACTIONS
        );
        complete(&mut shard);
        let aborted = end(&mut shard, "t", bumped, false, 2);
        assert_eq!(aborted.code, error_code::NONE);
        assert_eq!(aborted.producer_epoch, bumped.producer_epoch + 1);
    }

    #[test]
    fn end_tv2_bumps_epoch_and_returns_new_epoch() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let answer = end(&mut shard, "t", reply, true, 2);
        assert_eq!(answer, ProducerReply::ok(reply.producer_id, 1));
        let jobs = complete(&mut shard);
        assert_eq!(jobs[0].producer_epoch, 1, "markers carry the bumped epoch");
        assert_eq!(state(&shard, "t"), TxnState::CompleteCommit);
        // A retry with the old epoch answers the current one.
        assert_eq!(end(&mut shard, "t", reply, true, 2), answer);
        // Same epoch commit after the commit: nothing to commit.
        assert_eq!(
            end(&mut shard, "t", answer, true, 2).code,
            error_code::INVALID_TXN_STATE
        );
    }

    #[test]
    fn end_abort_from_empty_or_complete_writes_prepare_abort_tv2() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        assert_eq!(
            end(&mut shard, "t", reply, true, 2).code,
            error_code::INVALID_TXN_STATE
        );
        let aborted = end(&mut shard, "t", reply, false, 2);
        assert_eq!(aborted, ProducerReply::ok(reply.producer_id, 1));
        let jobs = complete(&mut shard);
        assert!(jobs[0].partitions.is_empty());
        assert_eq!(state(&shard, "t"), TxnState::CompleteAbort);
        // A retry with the epoch before is fenced in Empty, answered in CompleteAbort.
        assert_eq!(end(&mut shard, "t", reply, false, 2), aborted);
    }

    #[test]
    fn end_tv2_overflow_allocates_next_pid_and_completes_with_epoch_0() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        shard.txns.get_mut("t").unwrap().producer_epoch = i16::MAX - 1;
        let at_edge = ProducerReply::ok(reply.producer_id, i16::MAX - 1);
        add(&mut shard, "t", at_edge, &[("a", 0)]);
        let answer = end(&mut shard, "t", at_edge, true, 2);
        assert_ne!(answer.producer_id, reply.producer_id);
        assert_eq!(answer.producer_epoch, 0);
        let jobs = complete(&mut shard);
        assert_eq!(
            (jobs[0].producer_id, jobs[0].producer_epoch),
            (reply.producer_id, i16::MAX)
        );
        let metadata = shard.get("t").unwrap();
        assert_eq!(
            (metadata.producer_id, metadata.producer_epoch),
            (answer.producer_id, 0)
        );
        assert_eq!(metadata.prev_producer_id, reply.producer_id);
        assert_eq!(
            end(&mut shard, "t", at_edge, true, 2),
            answer,
            "retry on overflow"
        );
    }

    #[test]
    fn end_request_version_not_stored_version_decides_rules() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let answer = end(&mut shard, "t", reply, true, 2);
        complete(&mut shard);
        // A TV0 request after a TV2 commit: TV0 rules, the old epoch is fenced.
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::PRODUCER_FENCED
        );
        assert_eq!(end(&mut shard, "t", answer, true, 0).code, error_code::NONE);
    }

    #[test]
    fn a_failed_prepare_keeps_the_transaction_ongoing() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let step = shard.end_txn("t", reply.producer_id, 0, true, 0, NOW);
        let (_, answer) = settle(&mut shard, step, Err(error_code::NOT_LEADER_OR_FOLLOWER));
        assert_eq!(answer.code, error_code::NOT_COORDINATOR);
        assert_eq!(state(&shard, "t"), TxnState::Ongoing);
        assert!(shard.take_markers().is_empty());
    }

    /// "t"'s transaction on partition a-0, prepared to commit: its marker job.
    fn committed_job(shard: &mut TxnShard) -> MarkerJob {
        let reply = init(shard, "t");
        add(shard, "t", reply, &[("a", 0)]);
        end(shard, "t", reply, true, 0);
        shard.take_markers().pop().unwrap()
    }

    #[test]
    fn coordinator_not_available_keeps_pending_state_for_retry() {
        let mut shard = shard();
        let job = committed_job(&mut shard);
        let step = shard.markers_written(&job, MarkersOutcome::Written, NOW);
        let (_, completion) = settle(&mut shard, step, Err(error_code::REQUEST_TIMED_OUT));
        assert_eq!(completion, Completion::Retry);
        assert_eq!(
            shard.get("t").unwrap().pending,
            Some(TxnState::CompleteCommit)
        );
        let step = shard.markers_written(&job, MarkersOutcome::Written, NOW);
        assert_eq!(ok(&mut shard, step), Completion::Done);
        assert_eq!(state(&shard, "t"), TxnState::CompleteCommit);
        assert!(shard.get("t").unwrap().partitions.is_empty());
    }

    /// The simulator replays a seed only if the same state gives the same records in the
    /// same order: timed-out transactions are fenced, and their markers queued, in id
    /// order, not the map's (which differs from one shard to the next).
    #[test]
    fn timeouts_fence_in_transactional_id_order() {
        let mut shard = shard();
        let ids: Vec<String> = (0..20).map(|i| format!("t{i:02}")).collect();
        for id in &ids {
            let reply = init(&mut shard, id);
            add(&mut shard, id, reply, &[("a", 0)]);
        }
        let (records, answer) = shard.abort_timed_out(i64::MAX / 2);
        let fenced: Vec<String> = records
            .iter()
            .filter_map(|(key, _)| records::decode_key(key))
            .collect();
        assert_eq!(fenced, ids);
        answer(&mut shard, Ok(()));
        let queued: Vec<String> = shard
            .take_markers()
            .into_iter()
            .map(|job| job.transactional_id)
            .collect();
        assert_eq!(queued, ids);
    }

    /// Found by the simulator: a full disk refused the CompleteCommit write with a
    /// storage error while the log stayed up; the completion was given up and the
    /// transaction stayed prepared for as long as this coordinator led.
    #[test]
    fn a_completion_refused_by_a_full_disk_is_retried() {
        let mut shard = shard();
        let job = committed_job(&mut shard);
        let step = shard.markers_written(&job, MarkersOutcome::Written, NOW);
        let (_, completion) = settle(&mut shard, step, Err(error_code::KAFKA_STORAGE_ERROR));
        assert_eq!(completion, Completion::Retry);
        let step = shard.markers_written(&job, MarkersOutcome::Written, NOW);
        assert_eq!(ok(&mut shard, step), Completion::Done);
        assert_eq!(state(&shard, "t"), TxnState::CompleteCommit);
    }

    #[test]
    fn marker_invalid_epoch_or_coordinator_fenced_stops_sending() {
        let mut shard = shard();
        let job = committed_job(&mut shard);
        let step = shard.markers_written(&job, MarkersOutcome::Fenced, NOW);
        let (records, completion) = settle(&mut shard, step, Ok(()));
        assert_eq!((records.len(), completion), (0, Completion::GiveUp));
        assert_eq!(state(&shard, "t"), TxnState::PrepareCommit);
    }

    #[test]
    fn load_resumes_markers_for_prepare_commit_and_prepare_abort() {
        let mut shard = shard();
        let a = init(&mut shard, "a");
        add(&mut shard, "a", a, &[("x", 0)]);
        let b = init(&mut shard, "b");
        add(&mut shard, "b", b, &[("y", 1)]);
        let c = init(&mut shard, "c");
        add(&mut shard, "c", c, &[("z", 2)]);
        let mut log: Records = Vec::new();
        for (id, reply, commit) in [("a", a, true), ("b", b, false)] {
            let step = shard.end_txn(id, reply.producer_id, 0, commit, 0, NOW);
            log.extend(settle(&mut shard, step, Ok(())).0);
        }
        let mut loaded = TxnShard::new(
            TxnSettings::default(),
            8,
            Arc::new(Counter(AtomicI64::new(5000), Mutex::new(None))),
        );
        for (key, value) in &log {
            assert!(loaded.replay(key, value.as_deref()));
        }
        let step = shard.add_partitions("c", c.producer_id, 0, vec![tp("w", 0)], 0, NOW);
        for (key, value) in settle(&mut shard, step, Ok(())).0 {
            loaded.replay(&key, value.as_deref());
        }
        loaded.resume_prepared();
        let mut jobs = loaded.take_markers();
        jobs.sort_by(|x, y| x.transactional_id.cmp(&y.transactional_id));
        assert_eq!(jobs.len(), 2, "the Ongoing one is left to its timeout");
        assert!(jobs[0].commit && !jobs[1].commit);
        assert!(jobs.iter().all(|j| j.coordinator_epoch == 8));
        assert_eq!(loaded.get("a").unwrap().last_producer_epoch, -1);
    }

    #[test]
    fn load_applies_tombstones_and_skips_unknown_key_versions() {
        let mut shard = shard();
        init(&mut shard, "t");
        let mut loaded = self::shard();
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        for (key, value) in settle(&mut shard, step, Ok(())).0 {
            assert!(loaded.replay(&key, value.as_deref()));
        }
        assert!(loaded.get("t").is_some());
        assert!(loaded.replay(&records::key("t"), None));
        assert!(loaded.get("t").is_none());
        let mut other_version = records::key("t");
        other_version[1] = 1;
        assert!(!loaded.replay(&other_version, Some(b"whatever")));
    }

    #[test]
    fn timeout_aborts_ongoing_and_bumps_epoch() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let idle = init(&mut shard, "idle");
        let step = shard.abort_timed_out(NOW + TIMEOUT as i64);
        let (records, aborted) = settle(&mut shard, step, Ok(()));
        assert_eq!((records.len(), aborted), (0, 0), "not past the timeout yet");
        let step = shard.abort_timed_out(NOW + TIMEOUT as i64 + 1);
        let (records, aborted) = settle(&mut shard, step, Ok(()));
        assert_eq!((records.len(), aborted), (1, 1), "only Ongoing times out");
        let jobs = complete(&mut shard);
        assert_eq!((jobs[0].producer_epoch, jobs[0].commit), (1, false));
        assert_eq!(state(&shard, "t"), TxnState::CompleteAbort);
        assert_eq!(
            end(&mut shard, "t", reply, true, 0).code,
            error_code::PRODUCER_FENCED
        );
        assert_eq!(state(&shard, "idle"), TxnState::Empty);
        let _ = idle;
    }

    #[test]
    fn timeout_skips_pending_transition_and_failure_sets_failed_fence() {
        let mut shard = shard();
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let later = NOW + TIMEOUT as i64 + 1;
        let (_, _pending) =
            shard.add_partitions("t", reply.producer_id, 0, vec![tp("b", 0)], 0, NOW);
        let step = shard.abort_timed_out(later);
        assert_eq!(settle(&mut shard, step, Ok(())).0.len(), 0);
        shard.txns.get_mut("t").unwrap().pending = None;
        let step = shard.abort_timed_out(later);
        let (_, aborted) = settle(&mut shard, step, Err(error_code::NOT_ENOUGH_REPLICAS));
        assert_eq!(aborted, 0);
        let metadata = shard.get("t").unwrap();
        assert!(metadata.failed_fence);
        assert_eq!(
            (metadata.producer_epoch, metadata.state),
            (1, TxnState::Ongoing)
        );
    }

    #[test]
    fn server_tv2_fence_bumps_the_epoch_once_as_kafka_since_4_0_1() {
        let mut shard = shard_with(TxnSettings {
            transaction_version: 2,
            ..TxnSettings::default()
        });
        let reply = init(&mut shard, "t");
        add(&mut shard, "t", reply, &[("a", 0)]);
        let step = shard.init_producer_id("t", TIMEOUT, None, NOW);
        let (records, _) = settle(&mut shard, step, Ok(()));
        let stored = records::decode_value(records[0].1.as_ref().unwrap()).unwrap();
        assert_eq!(
            (stored.producer_epoch, stored.state),
            (1, TxnState::PrepareAbort)
        );
        let jobs = complete(&mut shard);
        assert_eq!(jobs[0].producer_epoch, 1, "the markers fence epoch 0");
        // The fenced producer's late commit (EndTxn v5 at its epoch) reads as a retry of
        // the abort: INVALID_TXN_STATE, as Kafka 4.4 answers it.
        assert_eq!(
            end(&mut shard, "t", reply, true, 2).code,
            error_code::INVALID_TXN_STATE
        );
        assert_eq!(
            init(&mut shard, "t").producer_epoch,
            2,
            "the new instance's epoch"
        );
        assert_eq!(
            u16::from_be_bytes([
                records[0].1.as_ref().unwrap()[0],
                records[0].1.as_ref().unwrap()[1]
            ]),
            1,
            "value version 1"
        );
    }

    #[test]
    fn expire_empty_and_complete_after_expiration_and_keep_ongoing() {
        let mut shard = shard();
        init(&mut shard, "empty");
        let reply = init(&mut shard, "ongoing");
        add(&mut shard, "ongoing", reply, &[("a", 0)]);
        let later = NOW + TRANSACTIONAL_ID_EXPIRATION_MS;
        let step = shard.expire_ids(later - 1);
        assert_eq!(ok(&mut shard, step), 0);
        let step = shard.expire_ids(later);
        let (records, removed) = settle(&mut shard, step, Ok(()));
        assert_eq!(removed, 1);
        assert_eq!(records, vec![(records::key("empty"), None)]);
        assert!(shard.get("empty").is_none() && shard.get("ongoing").is_some());
    }

    #[test]
    fn expire_keeps_entry_when_tombstone_write_fails() {
        let mut shard = shard();
        init(&mut shard, "t");
        let step = shard.expire_ids(NOW + TRANSACTIONAL_ID_EXPIRATION_MS);
        let (_, removed) = settle(&mut shard, step, Err(error_code::REQUEST_TIMED_OUT));
        assert_eq!(removed, 0);
        assert_eq!(shard.get("t").unwrap().pending, None);
    }

    #[test]
    fn list_filters_by_state_pid_duration_and_describe_unknown_is_not_found() {
        let mut shard = shard();
        let a = init(&mut shard, "a");
        add(&mut shard, "a", a, &[("x", 0)]);
        let b = init(&mut shard, "b");
        let all = shard.list(
            &ListFilter {
                duration_ms: -1,
                ..ListFilter::default()
            },
            NOW,
        );
        assert_eq!(all.len(), 2);
        let ongoing = shard.list(
            &ListFilter {
                states: vec!["Ongoing".into(), "Bogus".into()],
                duration_ms: -1,
                ..ListFilter::default()
            },
            NOW,
        );
        assert_eq!(
            ongoing,
            vec![("a".to_string(), a.producer_id, TxnState::Ongoing)]
        );
        let by_pid = shard.list(
            &ListFilter {
                producer_ids: vec![b.producer_id],
                duration_ms: -1,
                ..ListFilter::default()
            },
            NOW,
        );
        assert_eq!(by_pid.len(), 1);
        let long_running = shard.list(
            &ListFilter {
                duration_ms: 10,
                ..ListFilter::default()
            },
            NOW + 11,
        );
        // The Empty one has start -1: it always passes the duration filter (as Kafka).
        assert_eq!(long_running.len(), 2);
        let none = shard.list(
            &ListFilter {
                duration_ms: 10,
                ..ListFilter::default()
            },
            NOW + 5,
        );
        assert_eq!(none.len(), 1);
        assert_eq!(
            shard.describe("zzz"),
            Err(error_code::TRANSACTIONAL_ID_NOT_FOUND)
        );
        let described = shard.describe("a").unwrap();
        assert_eq!(
            (described.state, described.partitions.len()),
            (TxnState::Ongoing, 1)
        );
    }

    #[test]
    fn append_error_mapping_to_coordinator_errors() {
        for (from, to) in [
            (
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                error_code::COORDINATOR_NOT_AVAILABLE,
            ),
            (
                error_code::NOT_ENOUGH_REPLICAS,
                error_code::COORDINATOR_NOT_AVAILABLE,
            ),
            (
                error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                error_code::COORDINATOR_NOT_AVAILABLE,
            ),
            (
                error_code::REQUEST_TIMED_OUT,
                error_code::COORDINATOR_NOT_AVAILABLE,
            ),
            (
                error_code::NOT_LEADER_OR_FOLLOWER,
                error_code::NOT_COORDINATOR,
            ),
            (error_code::KAFKA_STORAGE_ERROR, error_code::NOT_COORDINATOR),
            (
                error_code::MESSAGE_TOO_LARGE,
                error_code::UNKNOWN_SERVER_ERROR,
            ),
            (
                error_code::RECORD_LIST_TOO_LARGE,
                error_code::UNKNOWN_SERVER_ERROR,
            ),
            (error_code::INVALID_REQUEST, error_code::INVALID_REQUEST),
        ] {
            assert_eq!(coordinator_error_for_append(from), to);
        }
    }
}
