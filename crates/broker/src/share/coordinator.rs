//! The share coordinator service: routes each share-state request to the shard of its
//! `__share_group_state` partition (`strand_coordinator::share`, one event loop per
//! partition this broker leads) and is that shard's edge to the broker, as the group
//! coordinator is for `__consumer_offsets`. A shard belongs to one leader epoch of its
//! partition; a request finding the epoch moved starts a fresh one, loaded from the log.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strand_coordinator::codec::partition_for;
use strand_coordinator::runtime::{Records, Shard};
use strand_coordinator::share::{
    coordinator_key, Answer, ShareStateKey, ShareStateShard, SHARE_STATE_PARTITIONS,
    SHARE_STATE_TOPIC,
};
use strand_log::TopicPartition;

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::partition::Partition;
use crate::shard_log::{self, PartitionShardLog, Replayed};

/// share.coordinator.state.topic.replication.factor
const REPLICATION_FACTOR: usize = 3;
/// share.coordinator.state.topic.min.isr
const MIN_ISR: usize = 2;
/// share.coordinator.write.timeout.ms
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// share.coordinator.state.topic.segment.bytes
const SEGMENT_BYTES: u64 = 100 * 1024 * 1024;

struct Slot {
    leader_epoch: i32,
    shard: Arc<Shard<ShareStateShard>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shard.stop();
    }
}

#[derive(Default)]
pub struct ShareCoordinator {
    shards: Mutex<HashMap<i32, Slot>>,
}

impl std::fmt::Debug for ShareCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareCoordinator").finish()
    }
}

/// A shard's state replayed from its partition's log (the simulator loads its shards so
/// too).
pub fn load(partition: &Partition, mut state: ShareStateShard) -> ShareStateShard {
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
            tracing::info!(partition = %partition.tp, records, skipped, "loaded share state")
        }
        Err(error) => {
            tracing::error!(partition = %partition.tp, %error, "loading share state failed")
        }
    }
    state
}

/// The `__share_group_state` partition of a share-partition.
pub fn index_of(key: &ShareStateKey) -> i32 {
    partition_for(&coordinator_key(key), SHARE_STATE_PARTITIONS)
}

impl ShareCoordinator {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Slot>> {
        self.shards.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates `__share_group_state` if it does not exist yet: compacted, as Kafka's.
    pub async fn ensure_topic(&self, broker: &Broker) -> Result<(), ApiError> {
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("segment.bytes".to_string(), SEGMENT_BYTES.to_string());
        shard_log::ensure_coordinator_topic(
            broker,
            SHARE_STATE_TOPIC,
            SHARE_STATE_PARTITIONS,
            REPLICATION_FACTOR,
            Some(MIN_ISR),
            configs,
        )
        .await
    }

    /// The node coordinating `key` now, if known (this one on a single node).
    pub fn coordinator_node(&self, broker: &Broker, key: &ShareStateKey) -> Option<i32> {
        let Some(cluster) = broker.cluster() else {
            return Some(broker.node_id());
        };
        let image = cluster.image();
        image
            .partition(SHARE_STATE_TOPIC, index_of(key))
            .map(|p| p.leader)
            .filter(|leader| image.is_eligible(*leader))
    }

    /// The shard of partition `index`, started (and loaded) for the current leader epoch.
    fn shard_of(&self, broker: &Broker, index: i32) -> Result<Arc<Shard<ShareStateShard>>, i16> {
        if broker.cluster().is_some_and(|c| !c.is_unfenced()) {
            return Err(error_code::NOT_COORDINATOR);
        }
        let partition = broker
            .partition(&TopicPartition::new(SHARE_STATE_TOPIC, index))
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
        let log = Arc::new(PartitionShardLog {
            partition: partition.clone(),
            leader_epoch: epoch,
            timeout: WRITE_TIMEOUT,
        });
        let loaded = partition.clone();
        let shard = Arc::new(Shard::start(
            move || load(&loaded, ShareStateShard::default()),
            log,
        ));
        slots.insert(
            index,
            Slot {
                leader_epoch: epoch,
                shard: shard.clone(),
            },
        );
        Ok(shard)
    }

    /// Runs `op` on the shard holding `key` here: NOT_COORDINATOR if another broker
    /// holds it (or the topic is not there yet and `create` is false).
    pub async fn call<R: Send + 'static>(
        &self,
        broker: &Broker,
        key: &ShareStateKey,
        create: bool,
        op: impl FnOnce(&mut ShareStateShard) -> (Records, Answer<R>) + Send + 'static,
    ) -> Result<R, i16> {
        if broker.topic(SHARE_STATE_TOPIC).is_none() {
            if !create {
                return Err(error_code::COORDINATOR_NOT_AVAILABLE);
            }
            self.ensure_topic(broker).await.map_err(|e| e.code)?;
        }
        if !broker.holds_leadership_lease() {
            return Err(error_code::NOT_COORDINATOR);
        }
        let shard = self.shard_of(broker, index_of(key))?;
        shard.call(op).await
    }

    /// Runs `op` on the shard holding `key` here without writing anything (a summary):
    /// NOT_COORDINATOR if another broker holds it, COORDINATOR_NOT_AVAILABLE before the
    /// topic exists.
    pub async fn read<R: Send + 'static>(
        &self,
        broker: &Broker,
        key: &ShareStateKey,
        op: impl FnOnce(&mut ShareStateShard) -> R + Send + 'static,
    ) -> Result<R, i16> {
        if broker.topic(SHARE_STATE_TOPIC).is_none() {
            return Err(error_code::COORDINATOR_NOT_AVAILABLE);
        }
        let shard = self.shard_of(broker, index_of(key))?;
        shard.read(op).await
    }
}
