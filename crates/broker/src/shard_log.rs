//! A coordinator shard's partition, as both coordinators (groups on `__consumer_offsets`,
//! transactions on `__transaction_state`) use it: writes appended as leader in the leader
//! epoch the shard was loaded for, committed once durable (flush-before-ack topics) and
//! on every in-sync replica, within the coordinator's write timeout; and the replay of the
//! partition that loads a shard.

use std::sync::Arc;
use std::time::Duration;

use strand_coordinator::runtime::{Commit, ShardLog, Write};
use strand_records::{
    read_end_txn_marker, walk_stored_records, BatchBuilder, BatchHeader, BatchView, EndTxnMarker,
    Record, TxnResult, WalkLimits,
};

use crate::error_code;
use crate::partition::{Durable, Partition, Refusal};

pub struct PartitionShardLog {
    pub partition: Arc<Partition>,
    pub leader_epoch: i32,
    /// offsets.commit.timeout.ms / the transaction's write timeout: bounds the whole
    /// write, the disk's part included.
    pub timeout: Duration,
}

/// How often a shard just loaded looks whether its followers confirmed its log.
const LOADED_TAIL_POLL: Duration = Duration::from_millis(10);

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn records_batch(
    builder: BatchBuilder,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    now: i64,
) -> Vec<u8> {
    let mut builder = builder;
    for (key, value) in records {
        builder.push(Record::new(Some(key), value, now));
    }
    builder.build()
}

/// Appends a shard's write to its partition as leader, only in `leader_epoch` (the epoch
/// the shard was loaded for: a stale shard must not write), at `now` (ms): the batch's
/// offsets and what to wait on for its durability. Committing it (durable, on every
/// in-sync replica) is the caller's. (Public for the simulator, which writes a shard's
/// records as the broker does.)
pub fn append_write(
    partition: &Partition,
    leader_epoch: i32,
    write: Write,
    now: i64,
) -> Result<(strand_log::AppendInfo, Option<Durable>), Refusal> {
    match write {
        Write::Records(records) => partition.append_unsynced_in_epoch(
            records_batch(BatchBuilder::new(0, now), records, now),
            -1,
            leader_epoch,
        ),
        Write::Transactional {
            producer_id,
            producer_epoch,
            records,
        } => partition.append_for_coordinator_in_epoch(
            records_batch(
                BatchBuilder::new(0, now)
                    .producer(producer_id, producer_epoch, -1)
                    .transactional(),
                records,
                now,
            ),
            leader_epoch,
        ),
        Write::Marker {
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        } => partition.append_marker_in(
            producer_id,
            producer_epoch,
            EndTxnMarker {
                result: if commit {
                    TxnResult::Commit
                } else {
                    TxnResult::Abort
                },
                coordinator_epoch,
            },
            Some(leader_epoch),
        ),
    }
}

impl ShardLog for PartitionShardLog {
    /// Waits, for as long as this epoch leads, until the high watermark passes the log
    /// end the load replayed to and every in-sync follower has confirmed it in this
    /// epoch (so none still holds an older epoch's tail an election could bring back).
    fn loaded(&self) -> Option<Commit> {
        let end = self.partition.log().log_end_offset();
        if self.partition.confirmed_through(end) {
            return None;
        }
        let partition = self.partition.clone();
        let epoch = self.leader_epoch;
        Some(Box::pin(async move {
            loop {
                if partition.leader_epoch_if_leader() != Some(epoch) {
                    return Err(error_code::NOT_LEADER_OR_FOLLOWER);
                }
                if partition.confirmed_through(end) {
                    return Ok(());
                }
                // Followers fetch continuously; their progress moves no watch the
                // high watermark has not, so this looks again shortly.
                tokio::time::sleep(LOADED_TAIL_POLL).await;
            }
        }))
    }

    fn append(&self, write: Write) -> Result<Commit, i16> {
        let tp = &self.partition.tp;
        let refused = |refusal: Refusal| {
            tracing::error!(code = refusal.code, message = ?refusal.message, partition = %tp, "a coordinator write was refused");
            refusal.code
        };
        let (info, durable) =
            append_write(&self.partition, self.leader_epoch, write, now_ms()).map_err(refused)?;
        let partition = self.partition.clone();
        let epoch = self.leader_epoch;
        let timeout = self.timeout;
        let committed = async move {
            if let Some(durable) = durable {
                let wait = durable.start_for(partition.clone());
                wait.finish().await.map_err(|error| {
                    tracing::error!(%error, partition = %partition.tp, "syncing a coordinator write failed");
                    error.kafka_error_code()
                })?;
            }
            partition
                .wait_for_replication(info.last_offset + 1, epoch, timeout)
                .await
                .map_err(|refusal| {
                    tracing::warn!(code = refusal.code, message = ?refusal.message, partition = %partition.tp, "a coordinator write did not commit");
                    refusal.code
                })
        };
        Ok(Box::pin(async move {
            tokio::time::timeout(timeout, committed)
                .await
                .unwrap_or(Err(error_code::REQUEST_TIMED_OUT))
        }))
    }
}

/// One record of a coordinator partition as the replay sees it.
pub enum Replayed<'a> {
    /// A record of a plain or a producer's transactional batch.
    Record {
        header: &'a BatchHeader,
        key: &'a [u8],
        value: Option<&'a [u8]>,
    },
    /// A transaction marker.
    Marker { producer_id: i64, commit: bool },
}

/// Replays a coordinator partition from its log start to its log end, record by record.
/// Returns how many records it visited; an error stops the replay where it is.
pub fn replay(partition: &Partition, mut visit: impl FnMut(Replayed<'_>)) -> anyhow::Result<usize> {
    let mut visited = 0usize;
    let log = partition.log();
    let end = log.log_end_offset();
    let mut next = log.log_start_offset();
    while next < end {
        let Some(slice) = log.read(next, 1 << 20, end, true)?.slice else {
            break;
        };
        let bytes = slice.read_to_vec()?;
        let mut rest = &bytes[..];
        let before = next;
        while let Ok(view) = BatchView::parse(rest) {
            let header = view.header;
            if header.next_offset() > next {
                if header.attributes.is_control() {
                    if let Ok(Some(marker)) = read_end_txn_marker(&view) {
                        visit(Replayed::Marker {
                            producer_id: header.producer_id,
                            commit: marker.result == TxnResult::Commit,
                        });
                        visited += 1;
                    }
                } else {
                    walk_stored_records(&view, WalkLimits::default(), |record| {
                        let offset = header.base_offset + record.offset_delta as i64;
                        if offset < next {
                            return;
                        }
                        if let Some(key) = record.key {
                            visit(Replayed::Record {
                                header: &header,
                                key,
                                value: record.value,
                            });
                            visited += 1;
                        }
                    })?;
                }
            }
            next = next.max(header.next_offset());
            rest = &rest[view.bytes.len()..];
        }
        if next == before {
            break;
        }
    }
    Ok(visited)
}

/// Creates a coordinator's topic if it does not exist yet. In a cluster its replication
/// factor is `replication_factor` (3) or the number of live brokers if fewer (Kafka
/// refuses until 3 exist; a 1- or 2-broker Strand cluster works, replicated as far as it
/// can), and `min_isr` (if any) is capped by it.
pub async fn ensure_coordinator_topic(
    broker: &crate::broker::Broker,
    name: &str,
    partitions: i32,
    replication_factor: usize,
    min_isr: Option<usize>,
    mut configs: std::collections::BTreeMap<String, String>,
) -> Result<(), crate::broker::ApiError> {
    if broker.topic(name).is_some() {
        return Ok(());
    }
    let replicas = match broker.cluster() {
        None => 1,
        Some(cluster) => cluster
            .image()
            .brokers
            .values()
            .filter(|b| b.is_eligible())
            .count()
            .clamp(1, replication_factor),
    };
    if let Some(min_isr) = min_isr {
        configs.insert(
            "min.insync.replicas".to_string(),
            min_isr.min(replicas).to_string(),
        );
    }
    let created = broker
        .create_topic(
            name,
            partitions,
            replicas as i16,
            Vec::new(),
            configs,
            false,
        )
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(error) if error.code == error_code::TOPIC_ALREADY_EXISTS => Ok(()),
        Err(error) => Err(error),
    }
}
