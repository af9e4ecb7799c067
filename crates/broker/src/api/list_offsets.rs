//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3, v7+), earliest
//! local (-4, v8+), latest tiered (-5, v9+), earliest pending upload (-6, v11+), or the
//! first offset at or after a timestamp. Consumers (replica id -1) see only up to the high
//! watermark (read_committed: the last stable offset). Without tiered storage the tiered
//! ones answer as Kafka's do with remote storage off: earliest local is earliest, the
//! others find nothing. On a tiered partition earliest is the remote store's first
//! offset, latest tiered its last, earliest pending upload the one after that; before the
//! broker has read what the store holds, OFFSET_NOT_AVAILABLE (retriable). Lookups by
//! timestamp search the local log only. Another negative timestamp, or one the version predates, is
//! UNSUPPORTED_VERSION for its partition, as on Kafka 4.4.
//!
//! Lookups by timestamp read the time index and batches on the runtime worker without
//! waiting for the disk; what the page cache lacks is read into it off the runtime
//! (`cold_reads::warm_now`), holding no lock, and the lookup runs again; the whole
//! request waits at most `WARM_WAIT_MAX` for the disk (then REQUEST_TIMED_OUT).

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strand_log::read_mode::Miss;
use strand_log::TopicPartition;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::partition::Partition;
use crate::router::{decode, respond, Outcome};
use crate::tiered::reader::{ChunkWanted, TimestampRead};
use crate::tiered::remote_log::RemoteLog;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// Whether a request of `version` may ask for the offset of `timestamp` (each special
/// timestamp came with a version, KIP-734, KIP-405, KIP-1005, KIP-1023).
fn timestamp_supported(timestamp: i64, version: i16) -> bool {
    match timestamp {
        LATEST | EARLIEST => true,
        MAX_TIMESTAMP => version >= 7,
        EARLIEST_LOCAL => version >= 8,
        LATEST_TIERED => version >= 9,
        EARLIEST_PENDING_UPLOAD => version >= 11,
        timestamp => timestamp >= 0,
    }
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ListOffsetsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let described: Vec<bool> = {
        let authorization = broker.authorization(context);
        body.topics
            .iter()
            .map(|t| authorization.allows_topic(AclOperation::Describe, t.name.as_str()))
            .collect()
    };
    // leader_epoch exists from v4; kafka-protocol refuses to encode it set below that.
    let version = request.header.request_api_version;
    let with_epoch = version >= 4;
    let deadline = tokio::time::Instant::now() + WARM_WAIT_MAX;
    let read_committed = body.isolation_level == 1;
    let mut topics = Vec::with_capacity(body.topics.len());
    for (topic, described) in body.topics.into_iter().zip(described) {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for partition in &topic.partitions {
            let tp = TopicPartition::new(topic.name.as_str(), partition.partition_index);
            let response = ListOffsetsPartitionResponse::default()
                .with_partition_index(partition.partition_index);
            let found = if !described {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else if timestamp_supported(partition.timestamp, version) {
                lookup_without_waiting(
                    broker,
                    &tp,
                    partition.timestamp,
                    partition.current_leader_epoch,
                    read_committed,
                    deadline,
                )
                .await
            } else {
                Err(error_code::UNSUPPORTED_VERSION)
            };
            partitions.push(match found {
                Ok((timestamp, offset, leader_epoch)) => response
                    .with_error_code(error_code::NONE)
                    .with_timestamp(timestamp)
                    .with_offset(offset)
                    .with_leader_epoch(if with_epoch { leader_epoch } else { -1 }),
                Err(code) => response
                    .with_error_code(code)
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_leader_epoch(-1),
            });
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    respond(
        &request,
        &ListOffsetsResponse::default().with_topics(topics),
    )
}

/// Lookups that find something new missing from the page cache each time (a cache too
/// small for the index and its batches) give up after this many warms. A lookup in a
/// remote copy needs its time index, its offset index, then its batches: three or four.
const WARM_ROUNDS: usize = 8;
/// Longest a request waits for the disk (clients' request.timeout.ms is 30 s).
const WARM_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// `lookup` without waiting for the disk on this worker: what the page cache lacks is
/// read into it off the runtime, then the lookup runs again.
async fn lookup_without_waiting(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    timestamp: i64,
    current_leader_epoch: i32,
    read_committed: bool,
    deadline: tokio::time::Instant,
) -> Result<(i64, i64, i32), i16> {
    for _ in 0..WARM_ROUNDS {
        let found = strand_log::read_mode::without_waiting(|| {
            lookup(broker, tp, timestamp, current_leader_epoch, read_committed)
        });
        match found {
            Ok(found) => return Ok(found),
            Err(Refusal::Error(code)) => return Err(code),
            Err(Refusal::WouldWait(partition, Some(miss))) => {
                crate::cold_reads::warm_now(&partition, miss, deadline).await?
            }
            // The miss could not be kept (no descriptor left to copy the file's into).
            Err(Refusal::WouldWait(_, None)) => break,
            Err(Refusal::RemoteWait(remote, partition, wanted)) => {
                let Some(tiered) = broker.tiered() else { break };
                tiered
                    .get_chunks_now(remote, partition, wanted, deadline)
                    .await?
            }
        }
    }
    Err(error_code::REQUEST_TIMED_OUT)
}

enum Refusal {
    Error(i16),
    /// The read would wait for the disk: the partition and what it missed.
    WouldWait(Arc<Partition>, Option<Miss>),
    /// A lookup in the remote copies lacks these chunks.
    RemoteWait(Arc<RemoteLog>, Arc<Partition>, Vec<ChunkWanted>),
}

impl From<i16> for Refusal {
    fn from(code: i16) -> Refusal {
        Refusal::Error(code)
    }
}

/// (timestamp, offset, the leader's epoch) for one partition, or why not. A
/// read_committed client sees up to the last stable offset, others the high watermark.
fn lookup(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    timestamp: i64,
    current_leader_epoch: i32,
    read_committed: bool,
) -> Result<(i64, i64, i32), Refusal> {
    let partition = broker
        .partition(tp)
        .ok_or(Refusal::Error(error_code::UNKNOWN_TOPIC_OR_PARTITION))?;
    if !partition.is_leader() {
        return Err(Refusal::Error(error_code::NOT_LEADER_OR_FOLLOWER));
    }
    partition.check_leader_epoch(current_leader_epoch)?;
    let epoch = partition.leader_epoch_if_leader().unwrap_or(-1);
    let log = partition.log();
    let visible_end = if read_committed {
        log.last_stable_offset()
    } else {
        log.high_watermark()
    };
    let storage = |error: strand_log::LogError| {
        if strand_log::read_mode::would_block(&error) {
            Refusal::WouldWait(partition.clone(), strand_log::read_mode::take_miss())
        } else {
            Refusal::Error(error.kafka_error_code())
        }
    };
    let local_start = log.log_start_offset();
    // Tiered storage: what the remote store holds (Ok(None): the partition is not tiered;
    // Err: not known yet, as just after a start: retriable, never a wrong offset).
    let remote = || match broker.tiered() {
        Some(tiered) if log.config().remote_storage => match tiered.remote_log(tp) {
            Some(remote) if remote.is_loaded() => Ok(Some(remote)),
            _ => Err(Refusal::Error(error_code::OFFSET_NOT_AVAILABLE)),
        },
        _ => Ok(None),
    };
    let found = match timestamp {
        LATEST => Ok((-1, visible_end)),
        EARLIEST => remote().map(|remote| {
            (
                -1,
                remote.map_or(local_start, |r| r.log_start_offset(local_start)),
            )
        }),
        EARLIEST_LOCAL => Ok((-1, local_start)),
        // The last offset the store holds (-1: none, or not tiered).
        LATEST_TIERED => {
            remote().map(|remote| (-1, remote.and_then(|r| r.end_offset()).unwrap_or(-1)))
        }
        // The first offset not copied yet: the local start while nothing is (-1: not
        // tiered).
        EARLIEST_PENDING_UPLOAD => remote().map(|remote| {
            (
                -1,
                remote.map_or(-1, |r| r.end_offset().map_or(local_start, |end| end + 1)),
            )
        }),
        MAX_TIMESTAMP => Ok(match log.max_timestamp_offset().map_err(storage)? {
            Some(found) if found.offset < visible_end => (found.timestamp, found.offset),
            _ => (-1, -1),
        }),
        timestamp if timestamp >= 0 => {
            // Older than the local log: the remote copies answer.
            if let (Some(remote), Some(tiered)) = (remote()?, broker.tiered()) {
                let mut wanted = Vec::new();
                let limits = log.config().walk_limits;
                match tiered.offset_for_timestamp(
                    &remote,
                    timestamp,
                    local_start,
                    limits,
                    &mut wanted,
                ) {
                    TimestampRead::Found(found, offset) if offset < visible_end => {
                        return Ok((found, offset, epoch));
                    }
                    TimestampRead::Missing => {
                        return Err(Refusal::RemoteWait(remote, partition.clone(), wanted));
                    }
                    _ => {}
                }
            }
            Ok(
                match log.offset_for_timestamp(timestamp).map_err(storage)? {
                    Some(found) if found.offset < visible_end => (found.timestamp, found.offset),
                    _ => (-1, -1),
                },
            )
        }
        _ => Err(Refusal::Error(error_code::UNSUPPORTED_VERSION)),
    }?;
    // Nothing found carries no epoch, as in Kafka.
    Ok((found.0, found.1, if found.1 >= 0 { epoch } else { -1 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_special_timestamp_needs_its_version_as_on_kafka() {
        for (timestamp, first) in [
            (LATEST, 1),
            (EARLIEST, 1),
            (MAX_TIMESTAMP, 7),
            (EARLIEST_LOCAL, 8),
            (LATEST_TIERED, 9),
            (EARLIEST_PENDING_UPLOAD, 11),
            (0, 1),
        ] {
            assert!(!timestamp_supported(timestamp, first - 1) || first == 1);
            assert!(
                timestamp_supported(timestamp, first),
                "{timestamp} at v{first}"
            );
        }
        assert!(!timestamp_supported(-7, 11));
    }
}
