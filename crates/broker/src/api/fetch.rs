//! Fetch (key 1): reads from each requested partition up to the high watermark, within
//! partition_max_bytes and the response's max_bytes (the first partition with data returns
//! at least one whole batch, KIP-74). When fewer than min_bytes are ready it parks on the
//! partitions until an append wakes it or max_wait_ms passes: no busy loop. Fetch
//! sessions are declined (session id 0): clients then send full fetch requests, which
//! every client supports. v13+ addresses topics by id.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use strand_log::{LogError, TopicPartition};
use tokio::sync::Notify;
use uuid::Uuid;

use super::topic_name;
use crate::broker::Broker;
use crate::error_code;
use crate::partition::Partition;
use crate::router::{decode, respond, Outcome};

/// Longest a fetch may wait, whatever it asks for.
const FETCH_WAIT_MAX: Duration = Duration::from_secs(300);
const LEADER_EPOCH: i32 = 0;

struct Target {
    name: Option<String>,
    topic_id: Uuid,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    current_leader_epoch: i32,
    partition: Result<Arc<Partition>, i16>,
}

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: FetchRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let targets = resolve(broker, &body, version);
    let wait = Duration::from_millis(body.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MAX);
    let deadline = tokio::time::Instant::now() + wait;
    let read_committed = body.isolation_level == 1;
    let responses = loop {
        let waiter = Arc::new(Notify::new());
        let parked: Vec<&Arc<Partition>> = targets
            .iter()
            .filter_map(|t| t.partition.as_ref().ok())
            .filter(|p| p.park_fetch(&waiter))
            .collect();
        let (responses, bytes, errors) = read_all(&targets, body.max_bytes, read_committed);
        let done = bytes >= body.min_bytes.max(1) as u64
            || errors
            || tokio::time::Instant::now() >= deadline;
        if !done {
            let _ = tokio::time::timeout_at(deadline, waiter.notified()).await;
        }
        for partition in parked {
            partition.unpark_fetch(&waiter);
        }
        if done {
            break responses;
        }
    };
    let response = FetchResponse::default()
        .with_error_code(error_code::NONE)
        .with_session_id(0)
        .with_responses(responses);
    respond(&request, &response)
}

fn resolve(broker: &Arc<Broker>, body: &FetchRequest, version: i16) -> Vec<Target> {
    let mut targets = Vec::new();
    for topic in &body.topics {
        let (name, unknown) = if version >= 13 {
            (
                broker.topic_by_id(&topic.topic_id).map(|t| t.name),
                error_code::UNKNOWN_TOPIC_ID,
            )
        } else {
            (
                Some(topic.topic.as_str().to_string()),
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
            )
        };
        for partition in &topic.partitions {
            let resolved = match &name {
                None => Err(unknown),
                Some(name) => broker
                    .partition(&TopicPartition::new(name.clone(), partition.partition))
                    .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            };
            targets.push(Target {
                name: name.clone(),
                topic_id: topic.topic_id,
                index: partition.partition,
                fetch_offset: partition.fetch_offset,
                partition_max_bytes: partition.partition_max_bytes,
                current_leader_epoch: partition.current_leader_epoch,
                partition: resolved,
            });
        }
    }
    targets
}

/// Reads every target once. Returns the topic responses, the record bytes read, and
/// whether any partition had an error (which ends the wait, as in Kafka).
fn read_all(
    targets: &[Target],
    max_bytes: i32,
    read_committed: bool,
) -> (Vec<FetchableTopicResponse>, u64, bool) {
    let mut budget = max_bytes.max(0) as u64;
    let mut total = 0u64;
    let mut errors = false;
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for target in targets {
        let data = PartitionData::default()
            .with_partition_index(target.index)
            .with_preferred_read_replica(BrokerId(-1))
            .with_aborted_transactions(read_committed.then(Vec::new));
        let data = match read_one(target, budget, total == 0) {
            Ok((records, high_watermark, log_start_offset)) => {
                let length = records.len() as u64;
                total += length;
                budget = budget.saturating_sub(length);
                data.with_error_code(error_code::NONE)
                    .with_high_watermark(high_watermark)
                    .with_last_stable_offset(high_watermark)
                    .with_log_start_offset(log_start_offset)
                    .with_records(Some(records))
            }
            Err((code, high_watermark, log_start_offset)) => {
                errors = true;
                data.with_error_code(code)
                    .with_high_watermark(high_watermark)
                    .with_last_stable_offset(high_watermark)
                    .with_log_start_offset(log_start_offset)
                    .with_records(Some(Bytes::new())) // librdkafka rejects null records
            }
        };
        let same_topic = topics.last().is_some_and(|t| {
            t.topic_id == target.topic_id
                && t.topic.as_str() == target.name.as_deref().unwrap_or("")
        });
        if !same_topic {
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(topic_name(target.name.as_deref().unwrap_or("")))
                    .with_topic_id(target.topic_id),
            );
        }
        topics
            .last_mut()
            .expect("pushed above")
            .partitions
            .push(data);
    }
    (topics, total, errors)
}

/// (records, high watermark, log start offset) or (error code, hw, log start).
fn read_one(
    target: &Target,
    budget: u64,
    first: bool,
) -> Result<(Bytes, i64, i64), (i16, i64, i64)> {
    let partition = target.partition.as_ref().map_err(|code| (*code, -1, -1))?;
    if target.current_leader_epoch > LEADER_EPOCH {
        return Err((error_code::UNKNOWN_LEADER_EPOCH, -1, -1));
    }
    let limit = budget.min(target.partition_max_bytes.max(0) as u64);
    match partition.read(target.fetch_offset, limit, first) {
        Ok(result) => {
            let records = match result.slice {
                Some(slice) if limit > 0 || first => Bytes::from(
                    slice
                        .read_to_vec()
                        .map_err(|_| (error_code::KAFKA_STORAGE_ERROR, -1, -1))?,
                ),
                _ => Bytes::new(),
            };
            Ok((records, result.high_watermark, result.log_start_offset))
        }
        Err(LogError::OffsetOutOfRange {
            log_start_offset, ..
        }) => {
            let high_watermark = partition.log().high_watermark();
            Err((
                error_code::OFFSET_OUT_OF_RANGE,
                high_watermark,
                log_start_offset,
            ))
        }
        Err(error) => Err((error.kafka_error_code(), -1, -1)),
    }
}
