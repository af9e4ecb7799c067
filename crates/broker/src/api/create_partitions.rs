//! CreatePartitions (37): grows a topic; on a single node every new replica lives here.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::quotas::MutationQuota;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: CreatePartitionsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: ALTER on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let alterable: Vec<bool> = {
        let authorization = broker.authorization(context);
        body.topics
            .iter()
            .map(|t| authorization.allows_topic(AclOperation::Alter, t.name.as_str()))
            .collect()
    };
    let mut seen = HashSet::new();
    let duplicated: HashSet<String> = body
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.as_str()))
        .map(|t| t.name.as_str().to_string())
        .collect();
    // controller_mutation_rate (KIP-599): strict from v3, counted per topic once valid.
    let client_id = request.client_id();
    let strict = request.header.request_api_version >= 3;
    let mut quota = broker.mutation_quota(context, client_id, strict);
    let mut results = Vec::with_capacity(body.topics.len());
    for (topic, alterable) in body.topics.iter().zip(alterable) {
        let name = topic.name.as_str();
        let result = if duplicated.contains(name) {
            Err(ApiError::new(
                error_code::INVALID_REQUEST,
                "Duplicate topic in request.",
            ))
        } else if !alterable {
            Err(ApiError {
                code: error_code::TOPIC_AUTHORIZATION_FAILED,
                message: None,
            })
        } else {
            match check_assignments(broker, topic) {
                Ok(()) => {
                    add_partitions(broker, name, topic.count, body.validate_only, &mut quota).await
                }
                Err(error) => Err(error),
            }
        };
        let result_entry = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match result {
            Ok(()) => result_entry.with_error_code(error_code::NONE),
            Err(error) => result_entry
                .with_error_code(error.code)
                .with_error_message(error.message.map(str_bytes)),
        });
    }
    context.throttle.mute_for(quota.throttle_ms());
    respond(
        &request,
        &CreatePartitionsResponse::default()
            .with_results(results)
            .with_throttle_time_ms(quota.throttle_ms() as i32),
    )
}

/// Grows `name` to `count` partitions, the new ones counted against `quota` once the
/// change is valid.
async fn add_partitions(
    broker: &Arc<Broker>,
    name: &str,
    count: i32,
    validate_only: bool,
    quota: &mut MutationQuota,
) -> Result<(), ApiError> {
    if quota.is_bounded() {
        broker.add_partitions(name, count, true).await?;
        let current = broker.topic(name).map_or(count, |topic| topic.partitions);
        broker.admit_mutation(quota, count - current)?;
    }
    broker.add_partitions(name, count, validate_only).await
}

fn check_assignments(
    broker: &Arc<Broker>,
    topic: &kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic,
) -> Result<(), ApiError> {
    let Some(assignments) = &topic.assignments else {
        return Ok(());
    };
    let current = broker
        .topic(topic.name.as_str())
        .map_or(0, |t| t.partitions);
    if assignments.len() as i64 != topic.count as i64 - current as i64 {
        return Err(ApiError::new(
            error_code::INVALID_REPLICA_ASSIGNMENT,
            format!(
                "Increasing the number of partitions by {} but {} assignments provided.",
                topic.count - current,
                assignments.len()
            ),
        ));
    }
    for assignment in assignments {
        if assignment.broker_ids.len() != 1 || assignment.broker_ids[0].0 != broker.node_id() {
            return Err(ApiError::new(
                error_code::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Unknown broker(s) in assignment; only {} exists.",
                    broker.node_id()
                ),
            ));
        }
    }
    Ok(())
}
