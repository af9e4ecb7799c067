//! The transaction coordinator service: routes each transactional id to the shard of its
//! `__transaction_state` partition (`strand_coordinator`'s runtime, one event loop per
//! partition this broker leads) and is that runtime's edge to the broker: the shard's
//! log, its load, producer ids, the timers, and the markers a committed PrepareCommit or
//! PrepareAbort queues (written to the transaction's partitions, then the completion).
//!
//! A shard belongs to one leader epoch of its partition (the coordinator epoch every
//! marker carries): a request finding the epoch moved starts a fresh shard, reloaded
//! from the log, which completes the transactions the log left prepared; losing
//! leadership drops the shard and its marker tasks stop.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strand_coordinator::codec::partition_for;
use strand_coordinator::runtime::{Event, Records, Shard, Step};
use strand_coordinator::txn::shard::{
    Answerer, Completion, ListFilter, MarkerJob, MarkersOutcome, ProducerIdSource, ProducerReply,
    TxnDescription, TxnSettings, TxnShard,
};
use strand_coordinator::txn::state::TxnState;
use strand_log::TopicPartition;
use strand_metadata::{ControllerCommand, ControllerReply};

use super::markers;
use super::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};
use crate::broker::{ApiError, Broker};
use crate::cluster::peers::Peers;
use crate::error_code;
use crate::partition::Partition;
use crate::producer_ids::ProducerIdManager;
use crate::shard_log::{self, now_ms, PartitionShardLog, Replayed};

/// transaction.state.log.replication.factor
const REPLICATION_FACTOR: usize = 3;
/// transaction.state.log.min.isr
const MIN_ISR: usize = 2;
/// transaction.state.log.segment.bytes
const SEGMENT_BYTES: u64 = 100 * 1024 * 1024;
/// How long a `__transaction_state` write waits for the disk and the in-sync replicas
/// (Kafka uses the transaction's timeout; a bound that does not depend on the client).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Between rounds of markers that must be retried, growing to the maximum.
const MARKER_RETRY_MIN: Duration = Duration::from_millis(50);
const MARKER_RETRY_MAX: Duration = Duration::from_secs(2);

/// Producer ids for the shards: a single node allocates them itself; a cluster member
/// takes them from its current block (refilled before requests that may need one).
struct BrokerProducerIds {
    ids: Arc<ProducerIdManager>,
    clustered: bool,
}

impl ProducerIdSource for BrokerProducerIds {
    fn allocate(&self) -> Result<i64, i16> {
        if self.clustered {
            return self
                .ids
                .take_from_block()
                .ok_or(error_code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        self.ids.next_id().map_err(|error| {
            tracing::error!(%error, "cannot allocate a producer id");
            error_code::KAFKA_STORAGE_ERROR
        })
    }
}

/// A cluster member's next producer id block, asked of the controller once the current
/// one is used up.
pub async fn refill_producer_ids(broker: &Broker) -> anyhow::Result<()> {
    let Some(cluster) = broker.cluster() else {
        return Ok(());
    };
    if broker.producer_ids.has_ids() {
        return Ok(());
    }
    let command = ControllerCommand::AllocateProducerIds {
        count: crate::producer_ids::PRODUCER_ID_BLOCK_SIZE,
    };
    match cluster.write(command).await {
        Ok(ControllerReply::ProducerIds { first, count }) => {
            broker.producer_ids.install_block(first, count);
            Ok(())
        }
        Ok(other) => anyhow::bail!("unexpected controller reply {other:?}"),
        Err(error) => anyhow::bail!("no producer id block: {error:?}"),
    }
}

struct TxnSlot {
    leader_epoch: i32,
    shard: Arc<Shard<TxnShard>>,
    tick_queued: Arc<AtomicBool>,
}

impl Drop for TxnSlot {
    fn drop(&mut self) {
        self.shard.stop();
    }
}

pub struct TxnCoordinator {
    settings: TxnSettings,
    /// The finalized `transaction.version` (features.rs), for shards started from now on.
    transaction_version: std::sync::atomic::AtomicI16,
    shards: Mutex<HashMap<i32, TxnSlot>>,
    peers: Peers,
}

impl std::fmt::Debug for TxnCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnCoordinator")
            .field("settings", &self.settings)
            .finish()
    }
}

/// Replays a `__transaction_state` partition into a fresh shard, then queues the markers
/// of every transaction it left prepared (public for the simulator, which hosts shards
/// as this coordinator does).
pub fn load(partition: &Partition, mut state: TxnShard) -> TxnShard {
    let mut skipped = 0usize;
    let result = shard_log::replay(partition, |replayed| {
        if let Replayed::Record { key, value, .. } = replayed {
            if !state.replay(key, value) {
                skipped += 1;
            }
        }
    });
    match result {
        Ok(0) => {}
        Ok(records) => {
            tracing::info!(partition = %partition.tp, records, skipped, "loaded transactions")
        }
        Err(error) => {
            tracing::error!(partition = %partition.tp, %error, "loading transactions failed")
        }
    }
    if skipped > 0 {
        tracing::warn!(partition = %partition.tp, skipped, "records of __transaction_state that are not a transaction's were skipped");
    }
    state.resume_prepared();
    state
}

impl TxnCoordinator {
    pub fn new(settings: TxnSettings) -> TxnCoordinator {
        TxnCoordinator {
            transaction_version: std::sync::atomic::AtomicI16::new(settings.transaction_version),
            settings,
            shards: Mutex::new(HashMap::new()),
            peers: Peers::default(),
        }
    }

    /// The `transaction.version` the coordinator acts on.
    pub fn transaction_version(&self) -> i16 {
        self.transaction_version.load(Ordering::Relaxed)
    }

    /// Follows the finalized `transaction.version`: shards started from now on use it,
    /// and the running ones are told in their event order.
    pub fn set_transaction_version(&self, level: i16) {
        if self.transaction_version.swap(level, Ordering::Relaxed) == level {
            return;
        }
        let shards: Vec<Arc<Shard<TxnShard>>> = self
            .slots()
            .values()
            .map(|slot| slot.shard.clone())
            .collect();
        for shard in shards {
            let event: Event<TxnShard> = Box::new(move |state: &mut TxnShard| {
                state.set_transaction_version(level);
                Step::reply(|_| {})
            });
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        let _ = shard.submit(event).await;
                    });
                }
                Err(_) => {
                    shard.try_submit(event);
                }
            }
        }
    }

    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<i32, TxnSlot>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shard of a `__transaction_state` partition this broker leads, started (and
    /// loaded) for the current leader epoch if it is not running yet.
    fn shard_of(&self, broker: &Arc<Broker>, index: i32) -> Result<Arc<Shard<TxnShard>>, i16> {
        // A restarted cluster member replays old metadata first, where it may still lead
        // the partition: a shard loaded then would send markers under a coordinator epoch
        // that is history (and decisions its log may lose). Nothing runs until this
        // incarnation is unfenced.
        if broker.cluster().is_some_and(|c| !c.is_unfenced()) {
            return Err(error_code::NOT_COORDINATOR);
        }
        let partition = broker
            .partition(&TopicPartition::new(TRANSACTION_STATE_TOPIC, index))
            .ok_or(error_code::NOT_COORDINATOR)?;
        let epoch = partition
            .leader_epoch_if_leader()
            .ok_or(error_code::NOT_COORDINATOR)?;
        let mut slots = self.slots();
        if let Some(slot) = slots
            .get(&index)
            .filter(|s| s.leader_epoch == epoch && s.shard.is_running())
        {
            return Ok(slot.shard.clone());
        }
        let ids = Arc::new(BrokerProducerIds {
            ids: broker.producer_ids.clone(),
            clustered: broker.cluster().is_some(),
        });
        let settings = TxnSettings {
            transaction_version: self.transaction_version.load(Ordering::Relaxed),
            ..self.settings
        };
        let state = TxnShard::new(settings, epoch, ids);
        let log = Arc::new(PartitionShardLog {
            partition: partition.clone(),
            leader_epoch: epoch,
            timeout: WRITE_TIMEOUT,
        });
        let loaded = partition.clone();
        let shard = Arc::new(Shard::start(move || load(&loaded, state), log));
        slots.insert(
            index,
            TxnSlot {
                leader_epoch: epoch,
                shard: shard.clone(),
                tick_queued: Arc::new(AtomicBool::new(false)),
            },
        );
        drop(slots);
        if partition.leader_epoch_if_leader() != Some(epoch) {
            let mut slots = self.slots();
            if slots.get(&index).is_some_and(|s| s.leader_epoch == epoch) {
                slots.remove(&index);
            }
            return Err(error_code::NOT_COORDINATOR);
        }
        // The markers of the transactions the log left prepared go out once it loaded.
        let resumed = shard.clone();
        let broker = broker.clone();
        tokio::spawn(async move {
            if let Ok(jobs) = resumed
                .read(|state: &mut TxnShard| state.take_markers())
                .await
            {
                broker.txns.send_markers(&broker, &resumed, jobs);
            }
        });
        Ok(shard)
    }

    fn index_of(transactional_id: &str) -> i32 {
        partition_for(transactional_id, TRANSACTION_STATE_PARTITIONS)
    }

    /// The shard coordinating `transactional_id`: NOT_COORDINATOR if another broker does
    /// (or the topic does not exist yet: FindCoordinator creates it).
    fn shard_for(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
    ) -> Result<Arc<Shard<TxnShard>>, i16> {
        // A broker that may have been deposed without knowing it yet answers nothing
        // from the state it last had (cluster/lease.rs).
        if broker.topic(TRANSACTION_STATE_TOPIC).is_none() || !broker.holds_leadership_lease() {
            return Err(error_code::NOT_COORDINATOR);
        }
        self.shard_of(broker, Self::index_of(transactional_id))
    }

    /// Creates `__transaction_state` if it does not exist yet (FindCoordinator for a
    /// transactional id): compacted, replication factor min(3, live brokers) and
    /// min.insync.replicas min(2, replication factor).
    pub async fn ensure_topic(&self, broker: &Broker) -> Result<(), ApiError> {
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("compression.type".to_string(), "uncompressed".to_string());
        configs.insert("segment.bytes".to_string(), SEGMENT_BYTES.to_string());
        shard_log::ensure_coordinator_topic(
            broker,
            TRANSACTION_STATE_TOPIC,
            TRANSACTION_STATE_PARTITIONS,
            REPLICATION_FACTOR,
            Some(MIN_ISR),
            configs,
        )
        .await
    }

    /// Runs `op` on the shard of `transactional_id` and sends the markers it queued.
    async fn call<R: Send + 'static>(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
        op: impl FnOnce(&mut TxnShard) -> (Records, Answerer<R>) + Send + 'static,
    ) -> Result<R, i16> {
        let shard = self.shard_for(broker, transactional_id)?;
        self.call_on(broker, &shard, op).await
    }

    async fn call_on<R: Send + 'static>(
        &self,
        broker: &Arc<Broker>,
        shard: &Arc<Shard<TxnShard>>,
        op: impl FnOnce(&mut TxnShard) -> (Records, Answerer<R>) + Send + 'static,
    ) -> Result<R, i16> {
        let (reply, jobs) = shard
            .call(move |state: &mut TxnShard| {
                let (records, answer) = op(state);
                (records, move |state: &mut TxnShard, written| {
                    let reply = answer(state, written);
                    (reply, state.take_markers())
                })
            })
            .await?;
        self.send_markers(broker, shard, jobs);
        Ok(reply)
    }

    /// InitProducerId with a transactional id.
    pub async fn init_producer_id(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> ProducerReply {
        if let Err(error) = refill_producer_ids(broker).await {
            tracing::warn!(%error, "no producer ids for InitProducerId");
            return ProducerReply::error(error_code::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let id = transactional_id.to_string();
        self.call(broker, transactional_id, move |state| {
            state.init_producer_id(&id, timeout_ms, expected, now_ms())
        })
        .await
        .unwrap_or_else(ProducerReply::error)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: one code for the transaction.
    pub async fn add_partitions(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
        client_tv: i16,
    ) -> i16 {
        let id = transactional_id.to_string();
        self.call(broker, transactional_id, move |state| {
            state.add_partitions(
                &id,
                producer_id,
                producer_epoch,
                partitions,
                client_tv,
                now_ms(),
            )
        })
        .await
        .unwrap_or_else(|code| code)
    }

    /// KIP-890 verification: a code per partition, or one for the transaction.
    pub async fn verify(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<i16>, i16> {
        let shard = self.shard_for(broker, transactional_id)?;
        let id = transactional_id.to_string();
        shard
            .read(move |state: &mut TxnShard| {
                state.verify(&id, producer_id, producer_epoch, &partitions)
            })
            .await?
    }

    pub async fn end_txn(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_tv: i16,
    ) -> ProducerReply {
        if let Err(error) = refill_producer_ids(broker).await {
            tracing::warn!(%error, "no producer ids for EndTxn");
        }
        let id = transactional_id.to_string();
        self.call(broker, transactional_id, move |state| {
            state.end_txn(
                &id,
                producer_id,
                producer_epoch,
                commit,
                client_tv,
                now_ms(),
            )
        })
        .await
        .unwrap_or_else(ProducerReply::error)
    }

    pub async fn describe(
        &self,
        broker: &Arc<Broker>,
        transactional_id: &str,
    ) -> Result<TxnDescription, i16> {
        if transactional_id.is_empty() {
            return Err(error_code::INVALID_REQUEST);
        }
        let shard = self.shard_for(broker, transactional_id)?;
        let id = transactional_id.to_string();
        shard
            .read(move |state: &mut TxnShard| state.describe(&id))
            .await?
    }

    /// ListTransactions over every partition this broker coordinates, sorted by id.
    pub async fn list(
        &self,
        broker: &Arc<Broker>,
        filter: ListFilter,
    ) -> Vec<(String, i64, TxnState)> {
        let mut listed = Vec::new();
        if broker.topic(TRANSACTION_STATE_TOPIC).is_none() {
            return listed;
        }
        let filter = Arc::new(filter);
        for index in 0..TRANSACTION_STATE_PARTITIONS {
            let Ok(shard) = self.shard_of(broker, index) else {
                continue;
            };
            let filter = filter.clone();
            if let Ok(found) = shard
                .read(move |state: &mut TxnShard| state.list(&filter, now_ms()))
                .await
            {
                listed.extend(found);
            }
        }
        listed.sort();
        listed
    }

    /// A `__transaction_state` partition's leadership changed: one led now starts
    /// loading (and completes what its log left prepared); one no longer led stops.
    pub fn leadership_changed(&self, broker: &Arc<Broker>, changes: &[(i32, bool)]) {
        for &(index, leads) in changes {
            if leads {
                if let Err(code) = self.shard_of(broker, index) {
                    tracing::warn!(partition = index, code, "not loading transactions");
                }
            } else {
                self.slots().remove(&index);
            }
        }
    }

    /// Starts the shard of every `__transaction_state` partition this broker leads (once
    /// it is unfenced: leaderships applied before were not acted on).
    pub fn start_led(&self, broker: &Arc<Broker>) {
        if broker.topic(TRANSACTION_STATE_TOPIC).is_none() {
            return;
        }
        for index in 0..TRANSACTION_STATE_PARTITIONS {
            let led = broker
                .partition(&TopicPartition::new(TRANSACTION_STATE_TOPIC, index))
                .is_some_and(|p| p.is_leader());
            if led {
                if let Err(code) = self.shard_of(broker, index) {
                    tracing::warn!(partition = index, code, "not loading transactions");
                }
            }
        }
    }

    /// transaction.abort.timed.out.transaction.cleanup.interval.ms: aborts the
    /// transactions past their timeout on every running shard (one queued sweep per
    /// shard at a time).
    pub fn abort_timed_out(&self, broker: &Arc<Broker>) {
        let slots: Vec<_> = self
            .slots()
            .values()
            .map(|s| (s.shard.clone(), s.tick_queued.clone()))
            .collect();
        for (shard, queued) in slots {
            if queued.swap(true, Ordering::SeqCst) {
                continue;
            }
            let broker = broker.clone();
            tokio::spawn(async move {
                let txns = &broker.txns;
                let _ = txns
                    .call_on(&broker, &shard, |state| state.abort_timed_out(now_ms()))
                    .await;
                queued.store(false, Ordering::SeqCst);
            });
        }
    }

    /// transaction.remove.expired.transaction.cleanup.interval.ms: removes ids idle
    /// longer than transactional.id.expiration.ms.
    pub async fn expire_ids(&self) {
        let shards: Vec<_> = self.slots().values().map(|s| s.shard.clone()).collect();
        for shard in shards {
            let _ = shard
                .call(|state: &mut TxnShard| state.expire_ids(now_ms()))
                .await;
        }
    }

    /// Writes each job's markers (retrying what can be retried while the shard runs),
    /// then its completion.
    pub fn send_markers(
        &self,
        broker: &Arc<Broker>,
        shard: &Arc<Shard<TxnShard>>,
        jobs: Vec<MarkerJob>,
    ) {
        for job in jobs {
            let broker = broker.clone();
            let shard = shard.clone();
            tokio::spawn(async move { complete(broker, shard, job).await });
        }
    }
}

/// One transaction's markers, then its CompleteCommit / CompleteAbort. Retries while its
/// shard runs (the coordinator keeps the transaction prepared until it completes; a
/// successor redoes it after a move).
async fn complete(broker: Arc<Broker>, shard: Arc<Shard<TxnShard>>, job: MarkerJob) {
    let mut remaining: BTreeSet<(String, i32)> = job.partitions.iter().cloned().collect();
    let mut backoff = MARKER_RETRY_MIN;
    let mut outcome = MarkersOutcome::Written;
    while !remaining.is_empty() {
        if !shard.is_running() {
            return;
        }
        let wanted: Vec<_> = remaining.iter().cloned().collect();
        for (tp, code) in markers::write(&broker, &job, &wanted).await {
            match code {
                error_code::NONE
                | error_code::UNSUPPORTED_FOR_MESSAGE_FORMAT
                | error_code::UNSUPPORTED_VERSION => {
                    remaining.remove(&tp);
                }
                error_code::INVALID_PRODUCER_EPOCH | error_code::TRANSACTION_COORDINATOR_FENCED => {
                    tracing::warn!(transactional_id = %job.transactional_id, partition = ?tp, code, "a newer producer or coordinator owns this transaction; not completing it");
                    outcome = MarkersOutcome::Fenced;
                }
                code => {
                    tracing::debug!(transactional_id = %job.transactional_id, partition = ?tp, code, "a transaction marker will be retried")
                }
            }
        }
        if outcome == MarkersOutcome::Fenced {
            break;
        }
        if !remaining.is_empty() {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MARKER_RETRY_MAX);
        }
    }
    loop {
        let written = job.clone();
        let completion = shard
            .call(move |state: &mut TxnShard| state.markers_written(&written, outcome, now_ms()))
            .await;
        match completion {
            Ok(Completion::Retry) if shard.is_running() => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MARKER_RETRY_MAX);
            }
            _ => return,
        }
    }
}
