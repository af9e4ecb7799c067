//! The share coordinator's APIs (KIP-932), which brokers send each other:
//! InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
//! DeleteShareGroupState (86) and ReadShareGroupStateSummary (87). Each partition is
//! answered by the shard of `__share_group_state` holding it (`share::coordinator`);
//! NOT_COORDINATOR if another broker holds it. Kafka's check: CLUSTER_ACTION.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::{
    delete_share_group_state_response, initialize_share_group_state_response,
    read_share_group_state_response, read_share_group_state_summary_response,
    write_share_group_state_response, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest, ReadShareGroupStateResponse, ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use strand_coordinator::share::{ShareStateKey, Snapshot, StateBatch, Summary};
use strand_protocol::ParsedRequest;
use uuid::Uuid;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::shard_log::now_ms;

/// (topic id, [(partition, what the request says of it)])
type Asked<D> = Vec<(Uuid, Vec<(i32, D)>)>;
/// (topic id, [(partition, its outcome)])
type Answered<R> = Vec<(Uuid, Vec<(i32, Result<R, i16>)>)>;

/// Runs `op` for every partition of a request, in its order; without CLUSTER_ACTION every
/// partition is CLUSTER_AUTHORIZATION_FAILED.
async fn each_partition<D, R, F, Fut>(
    broker: &Broker,
    context: &RequestContext,
    group_id: &str,
    asked: Asked<D>,
    op: F,
) -> Answered<R>
where
    F: Fn(ShareStateKey, D) -> Fut,
    Fut: Future<Output = Result<R, i16>>,
{
    let permitted = broker
        .authorization(context)
        .allows_cluster(AclOperation::ClusterAction);
    let mut answered = Vec::with_capacity(asked.len());
    for (topic_id, partitions) in asked {
        let mut results = Vec::with_capacity(partitions.len());
        for (partition, data) in partitions {
            let result = if permitted {
                op((group_id.to_string(), topic_id, partition), data).await
            } else {
                Err(error_code::CLUSTER_AUTHORIZATION_FAILED)
            };
            results.push((partition, result));
        }
        answered.push((topic_id, results));
    }
    answered
}

fn code_of<R>(result: &Result<R, i16>) -> i16 {
    result.as_ref().err().copied().unwrap_or(error_code::NONE)
}

pub async fn initialize(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: InitializeShareGroupStateRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let asked = body
        .topics
        .iter()
        .map(|t| {
            let parts = t
                .partitions
                .iter()
                .map(|p| (p.partition, (p.state_epoch, p.start_offset)));
            (t.topic_id, parts.collect())
        })
        .collect();
    let answered = each_partition(
        broker,
        context,
        &body.group_id,
        asked,
        |key, (epoch, start)| {
            let k = key.clone();
            async move {
                broker
                    .share_coordinator
                    .call(broker, &key, true, move |s| {
                        s.initialize(k, epoch, start, now_ms())
                    })
                    .await?
            }
        },
    )
    .await;
    let results = answered
        .into_iter()
        .map(|(topic_id, partitions)| {
            initialize_share_group_state_response::InitializeStateResult::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(partition, result)| {
                            initialize_share_group_state_response::PartitionResult::default()
                                .with_partition(*partition)
                                .with_error_code(code_of(result))
                        })
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &InitializeShareGroupStateResponse::default().with_results(results),
    )
}

pub async fn read(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ReadShareGroupStateRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let asked = body
        .topics
        .iter()
        .map(|t| {
            let parts = t.partitions.iter().map(|p| (p.partition, p.leader_epoch));
            (t.topic_id, parts.collect())
        })
        .collect();
    let answered = each_partition(
        broker,
        context,
        &body.group_id,
        asked,
        |key, leader_epoch| {
            let k = key.clone();
            async move {
                broker
                    .share_coordinator
                    .call(broker, &key, true, move |s| {
                        s.read(k, leader_epoch, now_ms())
                    })
                    .await?
            }
        },
    )
    .await;
    let results = answered
        .into_iter()
        .map(|(topic_id, partitions)| {
            read_share_group_state_response::ReadStateResult::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, r)| read_result(p, r))
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &ReadShareGroupStateResponse::default().with_results(results),
    )
}

fn read_result(
    partition: i32,
    result: Result<Option<Snapshot>, i16>,
) -> read_share_group_state_response::PartitionResult {
    let out = read_share_group_state_response::PartitionResult::default()
        .with_partition(partition)
        .with_state_epoch(-1)
        .with_start_offset(-1);
    match result {
        Err(code) => out.with_error_code(code),
        // Strand's persister takes this as "no state yet" (Kafka answers INVALID_REQUEST).
        Ok(None) => out.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
        Ok(Some(snapshot)) => out
            .with_error_code(error_code::NONE)
            .with_state_epoch(snapshot.state_epoch)
            .with_start_offset(snapshot.start_offset)
            .with_state_batches(
                snapshot
                    .batches
                    .iter()
                    .map(|b| {
                        read_share_group_state_response::StateBatch::default()
                            .with_first_offset(b.first_offset)
                            .with_last_offset(b.last_offset)
                            .with_delivery_state(b.delivery_state)
                            .with_delivery_count(b.delivery_count)
                    })
                    .collect(),
            ),
    }
}

pub async fn write(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: WriteShareGroupStateRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let asked = body
        .topics
        .iter()
        .map(|t| {
            let parts = t.partitions.iter().map(|p| {
                let batches: Vec<StateBatch> = p
                    .state_batches
                    .iter()
                    .map(|b| StateBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        delivery_state: b.delivery_state,
                        delivery_count: b.delivery_count,
                    })
                    .collect();
                (
                    p.partition,
                    (p.state_epoch, p.leader_epoch, p.start_offset, batches),
                )
            });
            (t.topic_id, parts.collect())
        })
        .collect();
    let answered = each_partition(
        broker,
        context,
        &body.group_id,
        asked,
        |key, (state_epoch, leader_epoch, start, batches)| {
            let k = key.clone();
            async move {
                broker
                    .share_coordinator
                    .call(broker, &key, true, move |s| {
                        s.write(k, state_epoch, leader_epoch, start, batches, now_ms())
                    })
                    .await?
            }
        },
    )
    .await;
    let results = answered
        .into_iter()
        .map(|(topic_id, partitions)| {
            write_share_group_state_response::WriteStateResult::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(partition, result)| {
                            write_share_group_state_response::PartitionResult::default()
                                .with_partition(*partition)
                                .with_error_code(code_of(result))
                        })
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &WriteShareGroupStateResponse::default().with_results(results),
    )
}

pub async fn delete(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DeleteShareGroupStateRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let asked = body
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions.iter().map(|p| (p.partition, ())).collect(),
            )
        })
        .collect();
    let answered = each_partition(broker, context, &body.group_id, asked, |key, ()| {
        let k = key.clone();
        async move {
            broker
                .share_coordinator
                .call(broker, &key, false, move |s| s.delete(k))
                .await?
        }
    })
    .await;
    let results = answered
        .into_iter()
        .map(|(topic_id, partitions)| {
            delete_share_group_state_response::DeleteStateResult::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(partition, result)| {
                            delete_share_group_state_response::PartitionResult::default()
                                .with_partition(*partition)
                                .with_error_code(code_of(result))
                        })
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &DeleteShareGroupStateResponse::default().with_results(results),
    )
}

pub async fn read_summary(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ReadShareGroupStateSummaryRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let asked = body
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions.iter().map(|p| (p.partition, ())).collect(),
            )
        })
        .collect();
    let answered = each_partition(broker, context, &body.group_id, asked, |key, ()| {
        let k = key.clone();
        async move {
            broker
                .share_coordinator
                .read(broker, &key, move |s| s.summary(&k))
                .await
        }
    })
    .await;
    let results = answered
        .into_iter()
        .map(|(topic_id, partitions)| {
            read_share_group_state_summary_response::ReadStateSummaryResult::default()
                .with_topic_id(topic_id)
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(partition, result)| summary_result(partition, result))
                        .collect(),
                )
        })
        .collect();
    respond(
        &request,
        &ReadShareGroupStateSummaryResponse::default().with_results(results),
    )
}

fn summary_result(
    partition: i32,
    result: Result<Option<Summary>, i16>,
) -> read_share_group_state_summary_response::PartitionResult {
    let out = read_share_group_state_summary_response::PartitionResult::default()
        .with_partition(partition)
        .with_state_epoch(-1)
        .with_leader_epoch(-1)
        .with_start_offset(-1);
    match result {
        Err(code) => out.with_error_code(code),
        // Kafka: a share-partition without state is no error.
        Ok(None) => out
            .with_error_code(error_code::NONE)
            .with_state_epoch(0)
            .with_leader_epoch(0)
            .with_delivery_complete_count(-1),
        Ok(Some(summary)) => out
            .with_error_code(error_code::NONE)
            .with_state_epoch(summary.state_epoch)
            .with_leader_epoch(summary.leader_epoch)
            .with_start_offset(summary.start_offset)
            .with_delivery_complete_count(summary.delivery_complete_count),
    }
}
