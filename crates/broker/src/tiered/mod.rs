//! Tiered storage (Kafka's KIP-405): sealed segments of topics with
//! remote.storage.enable=true are copied to a remote object store, local retention
//! (local.retention.ms / .bytes) then deletes local segments only once copied, and
//! reads below the local log start are served from the store through the normal Fetch
//! path. retention.ms / retention.bytes apply to the remote copy.
//!
//! Where Kafka keeps which offsets are remote in the `__remote_log_metadata` topic,
//! Strand keeps each copy's metadata as an object beside its data, written last; the
//! store is the one copy every broker sees, so a new leader (or a follower deciding what
//! it may delete locally) reads the listing. See docs/ARCHITECTURE.md, "Tiered storage".
//!
//! One task per broker runs a pass every remote.log.manager.task.interval.ms: as leader
//! of a tiered partition it loads the listing (once per leader epoch), copies the sealed
//! segments below the high watermark and last stable offset, and applies remote
//! retention; as follower it reads the listing again, so its local retention may delete
//! what the leader copied. A store that is down stops copies, and so local deletion: the
//! disk fills as it would without tiering, nothing is lost, and the next pass resumes.

pub mod reader;
pub mod remote_log;
pub mod remote_segments;
pub mod store;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use strand_log::log_manager::TopicPartition;
use tokio::sync::Semaphore;

use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::partition::Partition;
use futures_util::StreamExt;
use reader::{ChunkCache, ChunkWanted, RemoteRead, TimestampRead, GETS_MAX};
use remote_log::RemoteLog;
use store::{RemoteStore, StoreResult};
use strand_log::throttle::Throttle;

/// Objects of a copy without metadata are deleted once this old: far longer than a copy
/// takes, so a deposed leader's copy still under way is not cut from under it.
const ORPHAN_AGE_MS: i64 = 24 * 60 * 60 * 1000;

/// Segments one partition copies in one pass before the others get their turn.
const COPIES_PER_PASS: usize = 4;

#[derive(Debug)]
pub struct TieredStorage {
    store: RemoteStore,
    /// Read by every fetch of every partition while tiered storage is on: a shared lock.
    logs: RwLock<HashMap<TopicPartition, Arc<RemoteLog>>>,
    cache: ChunkCache,
    gets: Arc<Semaphore>,
    interval: Duration,
    node_id: i32,
    /// remote.log.manager.copy.max.bytes.per.second, over every copy of the broker.
    copy_throttle: std::sync::Mutex<Throttle>,
    /// remote.log.manager.copier.thread.pool.size: partitions passed at once.
    copiers: usize,
}

impl TieredStorage {
    /// The broker's tiered storage: None unless remote.log.storage.system.enable.
    pub fn open(config: &BrokerConfig) -> Result<Option<Arc<TieredStorage>>, String> {
        if !config.remote_log_storage_system_enable {
            return Ok(None);
        }
        let url = config.remote_storage_url.as_deref().ok_or(
            "remote.log.storage.system.enable=true needs the remote store: strand.remote.storage.url (remote_storage_url in TOML), e.g. s3://BUCKET/PREFIX",
        )?;
        Ok(Some(Arc::new(TieredStorage {
            store: RemoteStore::open(url)?,
            logs: RwLock::new(HashMap::new()),
            cache: ChunkCache::default(),
            gets: Arc::new(Semaphore::new(GETS_MAX)),
            interval: Duration::from_millis(config.remote_log_manager_task_interval_ms.max(1)),
            node_id: config.node_id,
            copy_throttle: std::sync::Mutex::new(Throttle::new(
                Some(config.remote_log_manager_copy_max_bytes_per_second)
                    .filter(|rate| *rate > 0 && *rate < i64::MAX)
                    .map(|rate| rate as u64),
            )),
            copiers: config.remote_log_manager_copier_thread_pool_size.max(1) as usize,
        })))
    }

    pub fn store(&self) -> &RemoteStore {
        &self.store
    }

    /// The partition's remote side, if the partition is tiered.
    pub fn remote_log(&self, tp: &TopicPartition) -> Option<Arc<RemoteLog>> {
        self.logs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp)
            .cloned()
    }

    /// Passes until the broker stops.
    pub async fn run(self: Arc<Self>, broker: Arc<Broker>) {
        let mut shutdown = broker.shutdown_signal();
        loop {
            self.pass(&broker).await;
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// One pass over every hosted partition, remote.log.manager.copier.thread.pool.size
    /// of them at a time.
    pub async fn pass(&self, broker: &Arc<Broker>) {
        futures_util::stream::iter(broker.hosted_partitions())
            .for_each_concurrent(self.copiers, |partition| {
                self.partition_turn(broker, partition)
            })
            .await;
    }

    /// One partition's turn in a pass: its remote side created or dropped as its config
    /// says, then, unless a turn of it is still under way, its pass.
    async fn partition_turn(&self, broker: &Arc<Broker>, partition: Arc<Partition>) {
        let tiered = partition.log().config().remote_storage;
        let existing = self.remote_log(&partition.tp);
        let remote = match (tiered, existing) {
            (true, Some(remote)) => remote,
            (true, None) => {
                let Some(topic) = broker.topic(&partition.tp.topic) else {
                    return;
                };
                let remote = Arc::new(RemoteLog::new(partition.tp.clone(), topic.id));
                self.logs
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(partition.tp.clone(), remote.clone());
                remote
            }
            (false, Some(remote)) => {
                // Turned off: Kafka requires remote.log.delete.on.disable, so the
                // leader deletes the remote data.
                if partition.is_leader() {
                    if let Err(error) = remote.delete_all(&self.store).await {
                        tracing::warn!(partition = %partition.tp, %error, "deleting remote data failed; retried next pass");
                        return;
                    }
                }
                self.forget(&partition.tp);
                return;
            }
            (false, None) => return,
        };
        let Ok(_busy) = remote.busy.try_lock() else {
            return;
        };
        // Unhosted meanwhile (its topic deleted): its remote data is being deleted.
        let hosted = broker.partition(&partition.tp);
        if !hosted.is_some_and(|hosted| Arc::ptr_eq(&hosted, &partition)) {
            return;
        }
        if let Err(error) = self.partition_pass(&partition, &remote).await {
            tracing::warn!(partition = %partition.tp, store = self.store.url(), %error, "tiered storage pass failed; retried next pass");
        }
    }

    fn forget(&self, tp: &TopicPartition) {
        self.logs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp);
    }

    async fn partition_pass(
        &self,
        partition: &Arc<Partition>,
        remote: &RemoteLog,
    ) -> StoreResult<()> {
        use std::sync::atomic::Ordering;
        let Some(epoch) = partition.leader_epoch_if_leader() else {
            // A follower lists the store only when it must: first, when local retention
            // waits on a copy it does not know of, or when its fetcher asks (every pass
            // was a LIST per partition per follower, a cost at object-store prices).
            remote.loaded_as_leader_in.store(-1, Ordering::Release);
            let wanted = remote.take_listing_wanted();
            if wanted || !remote.is_loaded() || partition.log().retention_waits_on_remote() {
                remote.refresh(&self.store).await?;
            }
            note_remote_end(partition, remote);
            return Ok(());
        };
        if remote.loaded_as_leader_in.load(Ordering::Acquire) != epoch {
            remote.refresh(&self.store).await?;
            remote.loaded_as_leader_in.store(epoch, Ordering::Release);
            // Once per leadership: what crashed copies left behind.
            let collected = remote
                .collect_orphans(&self.store, now_ms() - ORPHAN_AGE_MS)
                .await?;
            if collected > 0 {
                tracing::info!(partition = %partition.tp, objects = collected, "deleted objects of unfinished copies");
            }
        }
        note_remote_end(partition, remote);
        let config = partition.log().config().clone();
        if config.tiered() {
            for _ in 0..COPIES_PER_PASS {
                let from = remote.end_offset().map_or(i64::MIN, |end| end + 1);
                let candidates = partition.log().copy_candidates(from, 1);
                let candidates = candidates.map_err(|e| object_store::Error::Generic {
                    store: "local log",
                    source: Box::new(e),
                })?;
                let Some(sealed) = candidates.into_iter().next() else {
                    break;
                };
                // remote.log.manager.copy.max.bytes.per.second, shared by the copies of
                // every partition.
                let copied = remote
                    .copy(
                        &self.store,
                        &sealed,
                        self.node_id,
                        epoch,
                        now_ms(),
                        &self.copy_throttle,
                    )
                    .await;
                let counters = partition.counters();
                counters.remote_copied(copied.as_ref().ok().map(|_| sealed.size_bytes));
                let copied = copied?;
                tracing::debug!(partition = %partition.tp, base = copied.base_offset, end = copied.end_offset, bytes = copied.size_bytes, "segment copied to the remote store");
                note_remote_end(partition, remote);
                if partition.leader_epoch_if_leader() != Some(epoch) {
                    return Ok(());
                }
            }
        }
        self.expire(partition, remote, &config).await?;
        Ok(())
    }

    /// retention.ms / retention.bytes on the remote copy; the log start follows.
    async fn expire(
        &self,
        partition: &Arc<Partition>,
        remote: &RemoteLog,
        config: &strand_log::LogConfig,
    ) -> StoreResult<()> {
        let expired = expired_copies(partition, remote, config);
        let Some(last) = expired.iter().map(|s| s.end_offset).max() else {
            return Ok(());
        };
        for segment in &expired {
            remote.delete(&self.store, segment).await?;
        }
        let new_start = last + 1;
        let mut log = partition.log();
        if new_start > log.log_start_offset() && new_start <= log.high_watermark() {
            if let Err(error) = log.delete_before(new_start) {
                tracing::warn!(partition = %partition.tp, %error, "moving the log start after remote retention failed");
            }
        }
        tracing::info!(partition = %partition.tp, copies = expired.len(), log_start = remote.log_start_offset(log.log_start_offset()), "remote retention deleted copies");
        Ok(())
    }

    /// A read below the local log start, from the cache; what it lacks and the read-ahead
    /// come back in `wanted` for `get_chunks`.
    pub fn read(
        &self,
        remote: &RemoteLog,
        offset: i64,
        limit: u64,
        first: bool,
        wanted: &mut Vec<ChunkWanted>,
    ) -> RemoteRead {
        remote
            .with(|segments| {
                self.cache
                    .read(&remote.dir, segments, offset, limit, first, wanted)
            })
            .unwrap_or(RemoteRead::Missing)
    }

    /// ListOffsets by timestamp on a tiered partition: the remote copies' answer below
    /// the local log start (`TimestampRead::NotRemote`: the local log's).
    pub fn offset_for_timestamp(
        &self,
        remote: &RemoteLog,
        timestamp: i64,
        local_start: i64,
        limits: strand_records::WalkLimits,
        wanted: &mut Vec<ChunkWanted>,
    ) -> TimestampRead {
        let log_start = remote.log_start_offset(local_start);
        remote
            .with(|segments| {
                self.cache.offset_for_timestamp(
                    &remote.dir,
                    segments,
                    timestamp,
                    log_start,
                    local_start,
                    limits,
                    wanted,
                )
            })
            .unwrap_or(TimestampRead::Missing)
    }

    /// Gets `wanted` and waits for it (ListOffsets, which cannot answer without it), at
    /// most until `deadline` (then REQUEST_TIMED_OUT); a failed GET is KAFKA_STORAGE_ERROR.
    pub async fn get_chunks_now(
        self: &Arc<Self>,
        remote: Arc<RemoteLog>,
        partition: Arc<Partition>,
        wanted: Vec<ChunkWanted>,
        deadline: tokio::time::Instant,
    ) -> Result<(), i16> {
        let keys: Vec<_> = wanted.iter().map(|w| w.key).collect();
        self.get_chunks(remote.clone(), partition, wanted);
        loop {
            if remote.take_read_failure() {
                return Err(crate::error_code::KAFKA_STORAGE_ERROR);
            }
            if keys.iter().all(|key| self.cache.contains(key)) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(crate::error_code::REQUEST_TIMED_OUT);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// What a follower starting its log at `start` (where the copies end) takes from the
    /// store (Kafka's remote log auxiliary state): the leader epochs of the copies below
    /// it, in offset order, and the producer snapshot of the copy that ends there.
    pub async fn auxiliary_state(
        &self,
        remote: &RemoteLog,
        start: i64,
    ) -> StoreResult<(Vec<(i32, i64)>, Option<bytes::Bytes>)> {
        let (epochs, last) = remote
            .with(|segments| {
                let mut epochs: Vec<(i32, i64)> = segments
                    .iter()
                    .filter(|copy| copy.base_offset < start)
                    .flat_map(|copy| copy.leader_epochs.iter().copied())
                    .collect();
                epochs.sort_by_key(|(epoch, offset)| (*epoch, *offset));
                epochs.dedup_by_key(|(epoch, _)| *epoch); // each epoch from its first start
                epochs.sort_by_key(|(_, offset)| *offset);
                let last = segments
                    .iter()
                    .filter(|copy| copy.end_offset + 1 == start && copy.producer_snapshot)
                    .max_by_key(|copy| copy.copied_at_ms)
                    .cloned();
                (epochs, last)
            })
            .unwrap_or_default();
        let snapshot = match last {
            Some(copy) => {
                let key = copy.key(&remote.dir, remote_segments::PRODUCER_SNAPSHOT);
                match self.store.get(&key).await {
                    Ok(bytes) => Some(bytes),
                    Err(object_store::Error::NotFound { .. }) => None,
                    Err(error) => return Err(error),
                }
            }
            None => None,
        };
        Ok((epochs, snapshot))
    }

    /// Gets chunks a read wanted (those neither cached nor being got), each on its own
    /// task under the broker-wide bound, waking the partition's parked fetches as each
    /// arrives. A failed GET makes the partition's next read answer KAFKA_STORAGE_ERROR.
    pub fn get_chunks(
        self: &Arc<Self>,
        remote: Arc<RemoteLog>,
        partition: Arc<Partition>,
        wanted: Vec<ChunkWanted>,
    ) {
        for chunk in wanted {
            if !self.cache.claim(chunk.key) {
                continue;
            }
            let (tiered, remote, partition) = (self.clone(), remote.clone(), partition.clone());
            tokio::spawn(async move {
                let got = match tiered.gets.clone().acquire_owned().await {
                    Ok(_permit) => {
                        tiered
                            .store
                            .get_range(&chunk.object, chunk.range.clone())
                            .await
                    }
                    Err(_) => return,
                };
                let counters = partition.counters();
                counters.remote_fetched(got.as_ref().ok().map(|bytes| bytes.len() as u64));
                match got {
                    Ok(bytes) => tiered.cache.insert(chunk.key, bytes),
                    Err(error) => {
                        tracing::warn!(partition = %remote.tp, object = chunk.object, %error, "reading from the remote store failed");
                        remote.note_read_failure();
                    }
                }
                tiered.cache.release(&chunk.key);
                partition.wake_parked_fetches();
            });
        }
    }

    /// DeleteRecords on a tiered partition this broker leads, after the local log took
    /// it (`Partition::delete_records`, which checked leadership and the high watermark):
    /// records below `offset` are gone from the store's copy too. Returns the new log start.
    pub async fn delete_records(&self, partition: &Partition, offset: i64) -> StoreResult<i64> {
        let local_start = partition.log().log_start_offset();
        let Some(remote) = self.remote_log(&partition.tp).filter(|r| r.is_loaded()) else {
            return Ok(local_start);
        };
        if offset > remote.log_start_offset(local_start) {
            remote.delete_below(&self.store, offset).await?;
        }
        Ok(remote.log_start_offset(partition.log().log_start_offset()))
    }

    /// Topic deletion: every remote object of the partition goes, on a task, once a copy
    /// under way has finished (a store down at the time leaves them behind, logged).
    pub fn delete_partition(self: &Arc<Self>, tp: &TopicPartition, topic_id: uuid::Uuid) {
        // The partition's own (a pass may be copying into it), else one for its directory.
        let remote = self
            .logs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp)
            .unwrap_or_else(|| Arc::new(RemoteLog::new(tp.clone(), topic_id)));
        let tiered = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(partition = %tp, "no runtime to delete the remote data of a deleted topic on; its objects stay in the store");
            return;
        };
        runtime.spawn(async move {
            // After a copy under way: what it writes would otherwise outlive the topic.
            let _busy = remote.busy.lock().await;
            if let Err(error) = remote.delete_all(&tiered.store).await {
                tracing::warn!(partition = %remote.tp, %error, "deleting the remote data of a deleted topic failed; its objects stay in the store");
            }
        });
    }
}

/// The partition's log learns how far the store reaches: local retention may delete below.
fn note_remote_end(partition: &Partition, remote: &RemoteLog) {
    partition
        .log()
        .set_remote_end(remote.end_offset().map(|end| end + 1));
}

/// The copies remote retention deletes now: older than retention.ms, or the oldest while
/// the partition (remote plus local bytes not copied) is over retention.bytes, and those
/// DeleteRecords put wholly below the log start. What a pass deletes, and what the
/// RemoteDeleteLag metrics count until it has.
pub fn expired_copies(
    partition: &Partition,
    remote: &RemoteLog,
    config: &strand_log::LogConfig,
) -> Vec<Arc<remote_segments::RemoteSegment>> {
    let remote_end = remote.end_offset().unwrap_or(-1);
    let local_only: u64 = partition
        .log()
        .segment_summaries()
        .iter()
        .filter(|(base, _)| *base > remote_end)
        .map(|(_, size)| size)
        .sum();
    // Retention by time and size needs cleanup.policy=delete; DeleteRecords does not.
    let (retention_ms, retention_bytes) = if config.cleanup_delete {
        (config.retention_ms, config.retention_bytes)
    } else {
        (None, None)
    };
    let deleted_below = remote.deleted_below();
    remote
        .with(|s| {
            let mut expired = s.expired(now_ms(), retention_ms, retention_bytes, local_only);
            for copy in s.iter().filter(|c| c.end_offset < deleted_below) {
                if !expired.iter().any(|e| e.id == copy.id) {
                    expired.push(copy.clone());
                }
            }
            expired
        })
        .unwrap_or_default()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
