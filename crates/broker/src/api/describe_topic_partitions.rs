//! DescribeTopicPartitions (75, KIP-966): Metadata's partition view, paged. Topics (the
//! requested ones, or all when none are named) go in name order from the cursor's
//! topic and partition, at most `response_partition_limit` partitions per answer (at
//! least one; at most Kafka's max.request.partition.size.limit, 2000), with the cursor
//! to continue from when more remain. As Kafka 4.4: an unknown topic answers
//! UNKNOWN_TOPIC_OR_PARTITION and counts no partition; a cursor on a topic not asked for
//! is INVALID_REQUEST for every topic.

use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use uuid::Uuid;

use super::partition_views::partition_views;
use super::topic_name;
use crate::authorization::{AclOperation, ResourceType, OMITTED};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

/// Kafka's max.request.partition.size.limit default.
const PARTITIONS_PER_RESPONSE_MAX: i32 = 2000;

pub fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeTopicPartitionsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let mut names: Vec<String> = if body.topics.is_empty() {
        broker.topics().into_iter().map(|t| t.name).collect()
    } else {
        body.topics
            .iter()
            .map(|t| t.name.as_str().to_string())
            .collect()
    };
    names.sort_unstable();
    names.dedup();
    // Kafka's check: DESCRIBE on each topic; listing every topic leaves out the others,
    // a topic named answers TOPIC_AUTHORIZATION_FAILED.
    let authorization = broker.authorization(context);
    if body.topics.is_empty() {
        names.retain(|name| authorization.allows_topic(AclOperation::Describe, name));
    }
    let cursor = body
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.as_str().to_string(), c.partition_index));
    if let Some((topic, _)) = &cursor {
        if !names.contains(topic) {
            let topics = names
                .iter()
                .map(|name| {
                    error_topic(name, error_code::INVALID_REQUEST)
                        .with_topic_authorized_operations(OMITTED)
                })
                .collect();
            return respond(
                &request,
                &DescribeTopicPartitionsResponse::default().with_topics(topics),
            );
        }
    }
    let mut remaining = body
        .response_partition_limit
        .clamp(1, PARTITIONS_PER_RESPONSE_MAX);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    let start = cursor.as_ref().map_or("", |(topic, _)| topic.as_str());
    for name in names.iter().filter(|name| name.as_str() >= start) {
        if remaining == 0 {
            next_cursor = Some((name.clone(), 0));
            break;
        }
        if !authorization.allows_topic(AclOperation::Describe, name) {
            topics.push(error_topic(name, error_code::TOPIC_AUTHORIZATION_FAILED));
            continue;
        }
        let Some(topic) = broker.topic(name) else {
            topics.push(error_topic(name, error_code::UNKNOWN_TOPIC_OR_PARTITION));
            continue;
        };
        let first = match &cursor {
            Some((cursor_topic, partition)) if cursor_topic == name => *partition,
            _ => 0,
        };
        let ids = |list: &[i32]| list.iter().map(|&id| BrokerId(id)).collect::<Vec<_>>();
        let mut partitions = Vec::new();
        for view in partition_views(broker, &topic, first) {
            if remaining == 0 {
                next_cursor = Some((name.clone(), view.index));
                break;
            }
            remaining -= 1;
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_error_code(view.error_code)
                    .with_partition_index(view.index)
                    .with_leader_id(BrokerId(view.leader))
                    .with_leader_epoch(view.leader_epoch)
                    .with_replica_nodes(ids(&view.replicas))
                    .with_isr_nodes(ids(&view.isr))
                    .with_eligible_leader_replicas(Some(ids(&view.elr)))
                    .with_last_known_elr(Some(ids(&view.last_known_elr)))
                    .with_offline_replicas(ids(&view.offline)),
            );
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(error_code::NONE)
                .with_name(Some(topic_name(name)))
                .with_topic_id(topic.id)
                .with_is_internal(topic.is_internal())
                .with_partitions(partitions)
                .with_topic_authorized_operations(authorization.operations(
                    true,
                    ResourceType::Topic,
                    name,
                )),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    let response = DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor.map(|(topic, partition)| {
            Cursor::default()
                .with_topic_name(topic_name(&topic))
                .with_partition_index(partition)
        }));
    respond(&request, &response)
}

fn error_topic(name: &str, code: i16) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code)
        .with_name(Some(topic_name(name)))
        .with_topic_id(Uuid::nil())
        .with_topic_authorized_operations(ResourceType::operation_bits(
            ResourceType::Topic.operations(),
        ))
}
