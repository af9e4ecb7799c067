//! AlterPartitionReassignments (45, kafka-reassign-partitions --execute / --cancel,
//! Admin.alterPartitionReassignments): starts, replaces or cancels (null replicas) the
//! reassignment of each partition named. The active controller decides
//! (`strand_metadata::reassignment`) and answers once the change is committed; the answer
//! then waits (bounded) until this broker's image shows each accepted partition changed or
//! at its target, so a ListPartitionReassignments or Metadata right after usually sees it.
//! (An unrelated change to the partition, or the wait's deadline, ends the wait early: the
//! controller's reply does not carry the new partition epoch to wait for.)
//!
//! A single node decides against its own image (itself the only registered broker): a
//! target of just itself changes nothing, any other broker is not registered.

use std::sync::Arc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};
use strand_metadata::{
    decide, ControllerCommand, ControllerReply, ItemResult, MetadataImage, PartitionState,
    Reassignment,
};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AlterPartitionReassignmentsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: ALTER on the cluster.
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter)
    {
        return respond(
            &request,
            &AlterPartitionReassignmentsResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let reassignments: Vec<Reassignment> = body
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| Reassignment {
                topic: topic.name.0.to_string(),
                partition: p.partition_index,
                target: p
                    .replicas
                    .as_ref()
                    .map(|r| r.iter().map(|id| id.0).collect()),
            })
        })
        .collect();
    let command = ControllerCommand::AlterPartitionReassignments {
        reassignments: reassignments.clone(),
        allow_replication_factor_change: body.allow_replication_factor_change,
    };
    let results = match broker.cluster() {
        Some(cluster) => {
            let before = cluster.image();
            match cluster.write(command).await {
                Ok(ControllerReply::Results(results)) if results.len() == reassignments.len() => {
                    let accepted: Vec<&Reassignment> = reassignments
                        .iter()
                        .zip(&results)
                        .filter(|(_, result)| result.is_ok())
                        .map(|(r, _)| r)
                        .collect();
                    cluster
                        .wait_for_image(|image| accepted.iter().all(|r| shows(&before, image, r)))
                        .await;
                    Ok(results)
                }
                Ok(other) => Err(ApiError::new(
                    error_code::UNKNOWN_SERVER_ERROR,
                    format!("unexpected controller reply {other:?}"),
                )),
                Err(error) => Err(error),
            }
        }
        None => match decide(&broker.metadata_image(), &command).0 {
            ControllerReply::Results(results) => Ok(results),
            other => Err(ApiError::new(
                error_code::UNKNOWN_SERVER_ERROR,
                format!("unexpected reply {other:?}"),
            )),
        },
    };
    answer(
        &request,
        body.allow_replication_factor_change,
        &reassignments,
        results,
    )
}

/// Whether `image` shows the effect of an accepted `reassignment` decided after `before`:
/// the partition changed, or it was at the target already (a target it had, the same
/// reassignment again) or is gone.
fn shows(before: &MetadataImage, image: &MetadataImage, reassignment: &Reassignment) -> bool {
    let (topic, partition) = (&reassignment.topic, reassignment.partition);
    let Some(now) = image.partition(topic, partition) else {
        return true;
    };
    if before.partition(topic, partition) != Some(now) {
        return true;
    }
    at_target(now, reassignment.target.as_deref())
}

fn at_target(state: &PartitionState, target: Option<&[i32]>) -> bool {
    match target {
        Some(target) => {
            state.replicas.starts_with(target)
                && (state.replicas.len() == target.len() || state.is_reassigning())
        }
        None => !state.is_reassigning(),
    }
}

/// Each partition's result, grouped by topic in the order first named; a failure of the whole
/// request (no controller) is the top-level error and every partition's, as Kafka's
/// error response has it.
fn answer(
    request: &strand_protocol::ParsedRequest,
    allow_replication_factor_change: bool,
    reassignments: &[Reassignment],
    results: Result<Vec<ItemResult>, ApiError>,
) -> Outcome {
    let (top, results) = match results {
        Ok(results) => (ItemResult::ok(), results),
        Err(error) => {
            let failed = ItemResult {
                code: error.code,
                message: error.message,
            };
            (failed.clone(), vec![failed; reassignments.len()])
        }
    };
    let mut responses: Vec<ReassignableTopicResponse> = Vec::new();
    for (reassignment, result) in reassignments.iter().zip(results) {
        let partition = ReassignablePartitionResponse::default()
            .with_partition_index(reassignment.partition)
            .with_error_code(result.code)
            .with_error_message(result.message.map(str_bytes));
        match responses
            .iter_mut()
            .find(|t| t.name.as_str() == reassignment.topic)
        {
            Some(topic) => topic.partitions.push(partition),
            None => responses.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(str_bytes(reassignment.topic.clone())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_replication_factor_change)
        .with_error_code(top.code)
        .with_error_message(top.message.map(str_bytes))
        .with_responses(responses);
    respond(request, &response)
}
