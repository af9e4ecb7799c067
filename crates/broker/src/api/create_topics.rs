//! CreateTopics (key 19): validated as Kafka validates (name, partitions, replication
//! factor, assignments, configs), optionally only validated (validate_only). v5+ answers
//! with the partition count, replication factor and configs; v7 with the topic id.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::{str_bytes, topic_name};
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::quotas::MutationQuota;
use crate::router::{decode, respond, Outcome};
use crate::topic_config::effective_topic_configs;

/// Kafka's ConfigSource values.
const SOURCE_TOPIC_CONFIG: i8 = 1;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: CreateTopicsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's checks: CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED
    // "Authorization failed."); the configs of the answer need DESCRIBE_CONFIGS on it.
    let (creatable, describable): (Vec<bool>, Vec<bool>) = {
        let authorization = broker.authorization(context);
        let on_cluster = authorization.allows_cluster(AclOperation::Create);
        body.topics
            .iter()
            .map(|t| {
                let name = t.name.as_str();
                (
                    on_cluster || authorization.allows_topic(AclOperation::Create, name),
                    authorization.allows_topic(AclOperation::DescribeConfigs, name),
                )
            })
            .unzip()
    };
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = body
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.as_str().to_string()))
        .map(|t| t.name.as_str().to_string())
        .collect();
    // controller_mutation_rate (KIP-599): strict from v6, counted per topic once valid.
    let client_id = request.client_id();
    let strict = request.header.request_api_version >= 6;
    let mut quota = broker.mutation_quota(context, client_id, strict);
    let mut results = Vec::with_capacity(body.topics.len());
    for (index, topic) in body.topics.into_iter().enumerate() {
        let name = topic.name.as_str().to_string();
        let result = if duplicates.contains(&name) {
            Err(ApiError::new(
                error_code::INVALID_REQUEST,
                format!(
                    "Create topics request from client contains multiple requests for topic {name}"
                ),
            ))
        } else if !creatable[index] {
            Err(ApiError::new(
                error_code::TOPIC_AUTHORIZATION_FAILED,
                "Authorization failed.",
            ))
        } else {
            create_one(broker, &topic, body.validate_only, &mut quota).await
        };
        // What Kafka answers: the replication factor asked for, that of the assignment
        // given, or default.replication.factor.
        let replication_factor = match (topic.replication_factor, topic.assignments.first()) {
            (-1, Some(assignment)) => assignment.broker_ids.len() as i16,
            (-1, None) => broker.config.default_replication_factor,
            (asked, _) => asked,
        };
        results.push(match result {
            Ok(created) if !describable[index] => CreatableTopicResult::default()
                .with_name(topic_name(&name))
                .with_topic_id(created.id)
                .with_error_code(error_code::NONE)
                .with_error_message(None)
                .with_topic_config_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                .with_num_partitions(created.partitions)
                .with_replication_factor(replication_factor)
                .with_configs(Some(Vec::new())),
            Ok(created) => {
                let configs = effective_topic_configs(&broker.topic_defaults(), &created.configs)
                    .into_iter()
                    .map(|config| {
                        CreatableTopicConfigs::default()
                            .with_name(str_bytes(config.def.name.to_string()))
                            .with_value(Some(str_bytes(config.value)))
                            .with_config_source(if config.overridden {
                                SOURCE_TOPIC_CONFIG
                            } else {
                                SOURCE_DEFAULT_CONFIG
                            })
                    })
                    .collect();
                CreatableTopicResult::default()
                    .with_name(topic_name(&name))
                    .with_topic_id(created.id)
                    .with_error_code(error_code::NONE)
                    .with_error_message(None)
                    .with_num_partitions(created.partitions)
                    .with_replication_factor(replication_factor)
                    .with_configs(Some(configs))
            }
            Err(error) => CreatableTopicResult::default()
                .with_name(topic_name(&name))
                .with_error_code(error.code)
                .with_error_message(error.message.map(str_bytes))
                .with_num_partitions(-1)
                .with_replication_factor(-1),
        });
    }
    context.throttle.mute_for(quota.throttle_ms());
    respond(
        &request,
        &CreateTopicsResponse::default()
            .with_topics(results)
            .with_throttle_time_ms(quota.throttle_ms() as i32),
    )
}

async fn create_one(
    broker: &Arc<Broker>,
    topic: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    validate_only: bool,
    quota: &mut MutationQuota,
) -> Result<crate::topics::TopicInfo, ApiError> {
    let mut partitions = topic.num_partitions;
    let mut replication_factor = topic.replication_factor;
    let mut assignments = Vec::new();
    if !topic.assignments.is_empty() {
        if partitions != -1 || replication_factor != -1 {
            return Err(ApiError::new(
                error_code::INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            ));
        }
        let mut indexes: Vec<i32> = topic
            .assignments
            .iter()
            .map(|a| a.partition_index)
            .collect();
        indexes.sort_unstable();
        if indexes
            .iter()
            .enumerate()
            .any(|(i, index)| *index != i as i32)
        {
            return Err(ApiError::new(
                error_code::INVALID_REPLICA_ASSIGNMENT,
                "Partitions must be numbered 0..N-1 without gaps.",
            ));
        }
        let mut by_index: Vec<_> = topic.assignments.iter().collect();
        by_index.sort_by_key(|a| a.partition_index);
        for assignment in &by_index {
            assignments.push(assignment.broker_ids.iter().map(|b| b.0).collect());
        }
        // A single node checks here; a cluster's controller checks against its brokers.
        for assignment in by_index.iter().filter(|_| broker.cluster().is_none()) {
            if assignment
                .broker_ids
                .iter()
                .any(|id| id.0 != broker.node_id())
                || assignment.broker_ids.len() != 1
            {
                return Err(ApiError::new(
                    error_code::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "Replica assignment {:?} names brokers other than {}.",
                        assignment
                            .broker_ids
                            .iter()
                            .map(|b| b.0)
                            .collect::<Vec<_>>(),
                        broker.node_id()
                    ),
                ));
            }
        }
        partitions = topic.assignments.len() as i32;
        replication_factor = topic.assignments[0].broker_ids.len() as i16;
    }
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        let Some(value) = &config.value else {
            return Err(ApiError::new(
                error_code::INVALID_CONFIG,
                format!(
                    "Null value not supported for topic configs: {}",
                    config.name.as_str()
                ),
            ));
        };
        configs.insert(config.name.as_str().to_string(), value.as_str().to_string());
    }
    let create = |validate_only: bool| {
        broker.create_topic(
            topic.name.as_str(),
            partitions,
            replication_factor,
            assignments.clone(),
            configs.clone(),
            validate_only,
        )
    };
    if quota.is_bounded() {
        // Kafka counts a topic's partitions once it is valid, validate_only or not.
        let valid = create(true).await?;
        broker.admit_mutation(quota, valid.partitions)?;
    }
    create(validate_only).await
}
