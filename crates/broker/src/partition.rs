//! One partition on this broker: its log, and the fetches parked waiting for new data
//! (the long-poll purgatory). On a single node the leader is always here and the ISR is
//! this node alone, so the high watermark is the log end offset.
//!
//! Thread-safe: the log behind a std mutex held only for the in-memory work and one
//! page-cache write; durability waits happen outside it on a blocking thread.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use strand_log::{
    AppendInfo, Durability, Log, LogConfig, LogError, LogResult, ReadResult, TopicPartition,
};
use tokio::sync::Notify;

/// A pending durability wait: everything below `end` must reach the disk.
#[derive(Debug)]
pub struct Durable {
    gate: Arc<strand_log::SyncGate>,
    end: i64,
}

impl Durable {
    /// Waits on a blocking thread (the gate blocks) until the data is synced.
    pub async fn wait(self) -> LogResult<()> {
        let Durable { gate, end } = self;
        tokio::task::spawn_blocking(move || gate.wait_durable(end))
            .await
            .map_err(|error| LogError::Io(std::io::Error::other(error)))??;
        Ok(())
    }
}

/// Fetches that may wait on one partition at once: one per connection at most, so this
/// is reached only with that many connections fetching the same partition.
pub const PARKED_FETCHES_MAX: usize = 10_000;

#[derive(Debug)]
pub struct Partition {
    pub tp: TopicPartition,
    log: Arc<Mutex<Log>>,
    parked_fetches: Mutex<Vec<Arc<Notify>>>,
    /// min.insync.replicas of the topic (changed by AlterConfigs).
    min_insync_replicas: AtomicI32,
}

impl Partition {
    pub fn new(tp: TopicPartition, log: Arc<Mutex<Log>>, min_insync_replicas: i32) -> Partition {
        Partition {
            tp,
            log,
            parked_fetches: Mutex::new(Vec::new()),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
        }
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

    /// Appends a producer's batch; in flush-before-ack mode waits (off the async
    /// runtime, outside the log lock) until it is on disk. The high watermark follows the
    /// log end offset (this node is the whole ISR).
    pub async fn append(&self, batch: Vec<u8>, wait_for_durability: bool) -> LogResult<AppendInfo> {
        let (info, durable) = self.append_unsynced(batch)?;
        if let (true, Some(durable)) = (wait_for_durability, durable) {
            durable.wait().await?;
        }
        Ok(info)
    }

    /// Appends without waiting for the disk; for flush-before-ack topics also returns
    /// what to wait on, so a request touching several partitions waits for all their
    /// syncs at once instead of one after another.
    pub fn append_unsynced(&self, mut batch: Vec<u8>) -> LogResult<(AppendInfo, Option<Durable>)> {
        let (info, gate, durability) = {
            let mut log = self.log();
            let info = log.append_as_leader(&mut batch, 0)?;
            let end = log.log_end_offset();
            log.set_high_watermark(end);
            (info, log.sync_gate(), log.config().durability)
        };
        self.wake_parked_fetches();
        let durable = (durability == Durability::FlushBeforeAck).then(|| Durable {
            gate,
            end: info.last_offset + 1,
        });
        Ok((info, durable))
    }

    pub fn read(&self, offset: i64, max_bytes: u64, min_one_batch: bool) -> LogResult<ReadResult> {
        let log = self.log();
        log.read(offset, max_bytes, log.high_watermark(), min_one_batch)
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

    fn wake_parked_fetches(&self) {
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
