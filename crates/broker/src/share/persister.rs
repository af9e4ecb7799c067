//! How a share-partition leader keeps its state durable: with the share coordinator of
//! its key (`coordinator`), this broker's own shard or a peer's, asked with Kafka's
//! Read/Write/InitializeShareGroupState. Retriable answers (the coordinator moving or
//! loading) are retried until a deadline; every other error reaches the caller.

use std::time::Duration;

use kafka_protocol::messages::{
    delete_share_group_state_request, initialize_share_group_state_request,
    read_share_group_state_request, read_share_group_state_summary_request,
    write_share_group_state_request, ApiKey, DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use strand_coordinator::share::{ShareStateKey, Snapshot, StateBatch as StoredBatch, Summary};

use super::partition_state::{Persisted, RecordState, StateBatch};
use crate::api::str_bytes;
use crate::broker::Broker;
use crate::error_code;

/// How long a leader keeps trying to reach the share coordinator.
const PERSIST_DEADLINE: Duration = Duration::from_secs(10);
const RETRY_BACKOFF: Duration = Duration::from_millis(50);

/// Answers that mean "the share coordinator is moving or loading: try again".
pub fn retriable(code: i16) -> bool {
    matches!(
        code,
        error_code::NOT_COORDINATOR
            | error_code::COORDINATOR_NOT_AVAILABLE
            | error_code::COORDINATOR_LOAD_IN_PROGRESS
            | error_code::NETWORK_EXCEPTION
            | error_code::REQUEST_TIMED_OUT
            | error_code::UNKNOWN_TOPIC_OR_PARTITION
    )
}

/// Runs `attempt` until it gives a final answer or the deadline passes.
async fn with_retries<T, F, Fut>(mut attempt: F) -> Result<T, i16>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, i16>>,
{
    let deadline = tokio::time::Instant::now() + PERSIST_DEADLINE;
    loop {
        match attempt().await {
            Err(code) if retriable(code) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            Err(code) if retriable(code) => return Err(error_code::COORDINATOR_NOT_AVAILABLE),
            other => return other,
        }
    }
}

/// The share state as the coordinator stores it.
pub fn to_stored(persisted: &Persisted) -> Vec<StoredBatch> {
    persisted
        .batches
        .iter()
        .map(|b| StoredBatch {
            first_offset: b.first,
            last_offset: b.last,
            delivery_state: b.state.id(),
            delivery_count: b.delivery_count,
        })
        .collect()
}

/// The share state from what the coordinator stores (an unknown state id is taken as
/// available: the record is delivered again rather than lost).
pub fn from_stored(start_offset: i64, batches: &[StoredBatch]) -> Persisted {
    Persisted {
        start_offset,
        batches: batches
            .iter()
            .map(|b| StateBatch {
                first: b.first_offset,
                last: b.last_offset,
                delivery_count: b.delivery_count,
                state: RecordState::from_id(b.delivery_state).unwrap_or(RecordState::Available),
            })
            .collect(),
    }
}

/// A peer's answer for the one partition asked about (none: the peer said nothing).
fn outcome(mut codes: impl Iterator<Item = i16>) -> Result<(), i16> {
    match codes.next().unwrap_or(error_code::NETWORK_EXCEPTION) {
        error_code::NONE => Ok(()),
        code => Err(code),
    }
}

enum Route {
    Local,
    Peer(i32),
}

/// Where `key`'s share coordinator is, creating `__share_group_state` first if this is
/// the cluster's first share state.
async fn route(broker: &Broker, key: &ShareStateKey) -> Result<Route, i16> {
    if broker
        .topic(strand_coordinator::share::SHARE_STATE_TOPIC)
        .is_none()
    {
        broker
            .share_coordinator
            .ensure_topic(broker)
            .await
            .map_err(|e| e.code)?;
    }
    let node = broker
        .share_coordinator
        .coordinator_node(broker, key)
        .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
    Ok(if node == broker.node_id() {
        Route::Local
    } else {
        Route::Peer(node)
    })
}

async fn call_peer<Req, Resp>(
    broker: &Broker,
    node: i32,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Result<Resp, i16>
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    let cluster = broker
        .cluster()
        .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
    broker
        .txns
        .peers()
        .call(cluster, node, key, version, body, PERSIST_DEADLINE)
        .await
        .map_err(|error| {
            tracing::debug!(node, %error, "asking the share coordinator failed");
            error_code::NETWORK_EXCEPTION
        })
}

/// The share-partition's state and its state epoch, or None if it has none yet. Reading
/// as leader in `leader_epoch` fences older leaders.
pub async fn read(
    broker: &Broker,
    key: &ShareStateKey,
    leader_epoch: i32,
) -> Result<Option<(i32, Persisted)>, i16> {
    with_retries(|| async {
        match route(broker, key).await? {
            Route::Local => {
                let k = key.clone();
                let now = crate::shard_log::now_ms();
                let snapshot: Option<Snapshot> = broker
                    .share_coordinator
                    .call(broker, key, true, move |state| {
                        state.read(k, leader_epoch, now)
                    })
                    .await??;
                Ok(snapshot.map(|s| (s.state_epoch, from_stored(s.start_offset, &s.batches))))
            }
            Route::Peer(node) => {
                let request = ReadShareGroupStateRequest::default()
                    .with_group_id(str_bytes(key.0.clone()))
                    .with_topics(vec![
                        read_share_group_state_request::ReadStateData::default()
                            .with_topic_id(key.1)
                            .with_partitions(vec![
                                read_share_group_state_request::PartitionData::default()
                                    .with_partition(key.2)
                                    .with_leader_epoch(leader_epoch),
                            ]),
                    ]);
                let response: ReadShareGroupStateResponse =
                    call_peer(broker, node, ApiKey::ReadShareGroupState, 0, &request).await?;
                let result = response
                    .results
                    .into_iter()
                    .flat_map(|r| r.partitions)
                    .next()
                    .ok_or(error_code::NETWORK_EXCEPTION)?;
                match result.error_code {
                    error_code::NONE if result.state_epoch < 0 => Ok(None),
                    error_code::NONE => {
                        let batches: Vec<StoredBatch> = result
                            .state_batches
                            .iter()
                            .map(|b| StoredBatch {
                                first_offset: b.first_offset,
                                last_offset: b.last_offset,
                                delivery_state: b.delivery_state,
                                delivery_count: b.delivery_count,
                            })
                            .collect();
                        Ok(Some((
                            result.state_epoch,
                            from_stored(result.start_offset, &batches),
                        )))
                    }
                    // Kafka answers a share-partition without state this way.
                    error_code::UNKNOWN_TOPIC_OR_PARTITION => Ok(None),
                    code => Err(code),
                }
            }
        }
    })
    .await
}

/// A share-partition's first state (or a reset), under `state_epoch`.
pub async fn initialize(
    broker: &Broker,
    key: &ShareStateKey,
    state_epoch: i32,
    start_offset: i64,
) -> Result<(), i16> {
    with_retries(|| async {
        match route(broker, key).await? {
            Route::Local => {
                let k = key.clone();
                let now = crate::shard_log::now_ms();
                broker
                    .share_coordinator
                    .call(broker, key, true, move |state| {
                        state.initialize(k, state_epoch, start_offset, now)
                    })
                    .await?
            }
            Route::Peer(node) => {
                let request = InitializeShareGroupStateRequest::default()
                    .with_group_id(str_bytes(key.0.clone()))
                    .with_topics(vec![
                        initialize_share_group_state_request::InitializeStateData::default()
                            .with_topic_id(key.1)
                            .with_partitions(vec![
                                initialize_share_group_state_request::PartitionData::default()
                                    .with_partition(key.2)
                                    .with_state_epoch(state_epoch)
                                    .with_start_offset(start_offset),
                            ]),
                    ]);
                let response: InitializeShareGroupStateResponse =
                    call_peer(broker, node, ApiKey::InitializeShareGroupState, 0, &request).await?;
                outcome(
                    response
                        .results
                        .iter()
                        .flat_map(|r| r.partitions.iter())
                        .map(|p| p.error_code),
                )
            }
        }
    })
    .await
}

/// The leader's new state of the share-partition.
pub async fn write(
    broker: &Broker,
    key: &ShareStateKey,
    state_epoch: i32,
    leader_epoch: i32,
    persisted: &Persisted,
) -> Result<(), i16> {
    let batches = to_stored(persisted);
    let start_offset = persisted.start_offset;
    with_retries(|| async {
        match route(broker, key).await? {
            Route::Local => {
                let k = key.clone();
                let now = crate::shard_log::now_ms();
                let batches = batches.clone();
                broker
                    .share_coordinator
                    .call(broker, key, true, move |state| {
                        state.write(k, state_epoch, leader_epoch, start_offset, batches, now)
                    })
                    .await?
            }
            Route::Peer(node) => {
                let request = WriteShareGroupStateRequest::default()
                    .with_group_id(str_bytes(key.0.clone()))
                    .with_topics(vec![
                        write_share_group_state_request::WriteStateData::default()
                            .with_topic_id(key.1)
                            .with_partitions(vec![
                                write_share_group_state_request::PartitionData::default()
                                    .with_partition(key.2)
                                    .with_state_epoch(state_epoch)
                                    .with_leader_epoch(leader_epoch)
                                    .with_start_offset(start_offset)
                                    .with_state_batches(
                                        batches
                                            .iter()
                                            .map(|b| {
                                                write_share_group_state_request::StateBatch::default()
                                                    .with_first_offset(b.first_offset)
                                                    .with_last_offset(b.last_offset)
                                                    .with_delivery_state(b.delivery_state)
                                                    .with_delivery_count(b.delivery_count)
                                            })
                                            .collect(),
                                    ),
                            ]),
                    ]);
                let response: WriteShareGroupStateResponse =
                    call_peer(broker, node, ApiKey::WriteShareGroupState, 0, &request).await?;
                outcome(
                    response
                        .results
                        .iter()
                        .flat_map(|r| r.partitions.iter())
                        .map(|p| p.error_code),
                )
            }
        }
    })
    .await
}

/// The summary of a share-partition's state (None: it has none), without fencing anyone.
pub async fn summary(broker: &Broker, key: &ShareStateKey) -> Result<Option<Summary>, i16> {
    with_retries(|| async {
        match route(broker, key).await? {
            Route::Local => {
                let k = key.clone();
                match broker
                    .share_coordinator
                    .read(broker, key, move |state| state.summary(&k))
                    .await
                {
                    // No share state at all yet: nothing to summarize.
                    Err(error_code::COORDINATOR_NOT_AVAILABLE)
                        if broker
                            .topic(strand_coordinator::share::SHARE_STATE_TOPIC)
                            .is_none() =>
                    {
                        Ok(None)
                    }
                    other => other,
                }
            }
            Route::Peer(node) => {
                let request = ReadShareGroupStateSummaryRequest::default()
                    .with_group_id(str_bytes(key.0.clone()))
                    .with_topics(vec![
                        read_share_group_state_summary_request::ReadStateSummaryData::default()
                            .with_topic_id(key.1)
                            .with_partitions(vec![
                                read_share_group_state_summary_request::PartitionData::default()
                                    .with_partition(key.2)
                                    .with_leader_epoch(-1),
                            ]),
                    ]);
                let response: ReadShareGroupStateSummaryResponse = call_peer(
                    broker,
                    node,
                    ApiKey::ReadShareGroupStateSummary,
                    1,
                    &request,
                )
                .await?;
                let result = response
                    .results
                    .into_iter()
                    .flat_map(|r| r.partitions)
                    .next()
                    .ok_or(error_code::NETWORK_EXCEPTION)?;
                match result.error_code {
                    error_code::NONE if result.start_offset < 0 => Ok(None),
                    error_code::NONE => Ok(Some(Summary {
                        state_epoch: result.state_epoch,
                        leader_epoch: result.leader_epoch,
                        start_offset: result.start_offset,
                        delivery_complete_count: result.delivery_complete_count,
                    })),
                    code => Err(code),
                }
            }
        }
    })
    .await
}

/// Removes a share-partition's state (DeleteShareGroupState).
pub async fn delete(broker: &Broker, key: &ShareStateKey) -> Result<(), i16> {
    with_retries(|| async {
        match route(broker, key).await? {
            Route::Local => {
                if broker
                    .topic(strand_coordinator::share::SHARE_STATE_TOPIC)
                    .is_none()
                {
                    return Ok(());
                }
                let k = key.clone();
                broker
                    .share_coordinator
                    .call(broker, key, false, move |state| state.delete(k))
                    .await?
            }
            Route::Peer(node) => {
                let request = DeleteShareGroupStateRequest::default()
                    .with_group_id(str_bytes(key.0.clone()))
                    .with_topics(vec![
                        delete_share_group_state_request::DeleteStateData::default()
                            .with_topic_id(key.1)
                            .with_partitions(vec![
                                delete_share_group_state_request::PartitionData::default()
                                    .with_partition(key.2),
                            ]),
                    ]);
                let response: DeleteShareGroupStateResponse =
                    call_peer(broker, node, ApiKey::DeleteShareGroupState, 0, &request).await?;
                outcome(
                    response
                        .results
                        .iter()
                        .flat_map(|r| r.partitions.iter())
                        .map(|p| p.error_code),
                )
            }
        }
    })
    .await
}
