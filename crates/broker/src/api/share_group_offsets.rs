//! A share group's offsets (KIP-932): DescribeShareGroupOffsets (90),
//! AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), with Kafka's checks
//! (`share::admin` does the work).

use std::sync::Arc;

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::share::admin;

/// The first checks of Alter/DeleteShareGroupOffsets: share groups on, `operation` on the
/// group, this broker its coordinator. The topics among `topics` the client may not READ,
/// or the request's top-level error.
fn checked(
    broker: &Broker,
    context: &RequestContext,
    group_id: &str,
    operation: AclOperation,
    topics: &[String],
) -> Result<Vec<String>, i16> {
    if !broker.share_groups_enabled() {
        return Err(error_code::UNSUPPORTED_VERSION);
    }
    let authorization = broker.authorization(context);
    if !authorization.allows_group(operation, group_id) {
        return Err(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    let refused = topics
        .iter()
        .filter(|t| !authorization.allows_topic(AclOperation::Read, t))
        .cloned()
        .collect();
    drop(authorization);
    if !broker.groups.coordinates(broker, group_id) {
        return Err(error_code::NOT_COORDINATOR);
    }
    Ok(refused)
}

pub async fn describe(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeShareGroupOffsetsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let mut groups = Vec::with_capacity(body.groups.len());
    for group in &body.groups {
        let group_id = group.group_id.as_str();
        let out =
            DescribeShareGroupOffsetsResponseGroup::default().with_group_id(group.group_id.clone());
        if !broker.share_groups_enabled() {
            groups.push(out.with_error_code(error_code::UNSUPPORTED_VERSION));
            continue;
        }
        // Kafka's checks: DESCRIBE on the group; each topic's partitions need DESCRIBE on
        // the topic (else TOPIC_AUTHORIZATION_FAILED, start offset -1, topic id zero).
        let (allowed_group, refused): (bool, Vec<String>) = {
            let authorization = broker.authorization(context);
            let allowed = authorization.allows_group(AclOperation::Describe, group_id);
            let refused = group
                .topics
                .iter()
                .flatten()
                .map(|t| t.topic_name.to_string())
                .filter(|t| !authorization.allows_topic(AclOperation::Describe, t))
                .collect();
            (allowed, refused)
        };
        if !allowed_group {
            groups.push(out.with_error_code(error_code::GROUP_AUTHORIZATION_FAILED));
            continue;
        }
        if !broker.groups.coordinates(broker, group_id) {
            groups.push(out.with_error_code(error_code::NOT_COORDINATOR));
            continue;
        }
        let asked = group.topics.as_ref().map(|topics| {
            topics
                .iter()
                .filter(|t| !refused.contains(&t.topic_name.to_string()))
                .map(|t| (t.topic_name.to_string(), t.partitions.clone()))
                .collect()
        });
        let mut topics: Vec<DescribeShareGroupOffsetsResponseTopic> = Vec::new();
        for t in group.topics.iter().flatten() {
            if refused.contains(&t.topic_name.to_string()) {
                topics.push(
                    DescribeShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(t.topic_name.clone())
                        .with_topic_id(Uuid::nil())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    DescribeShareGroupOffsetsResponsePartition::default()
                                        .with_partition_index(*p)
                                        .with_start_offset(-1)
                                        .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                                })
                                .collect(),
                        ),
                );
            }
        }
        match admin::describe_offsets(broker, group_id, asked).await {
            Err(code) => groups.push(out.with_error_code(code)),
            Ok(described) => {
                for (topic, id, rows) in described {
                    topics.push(
                        DescribeShareGroupOffsetsResponseTopic::default()
                            .with_topic_name(topic_name(&topic))
                            .with_topic_id(id)
                            .with_partitions(
                                rows.into_iter()
                                    .map(|(partition, start, leader_epoch, lag, code)| {
                                        DescribeShareGroupOffsetsResponsePartition::default()
                                            .with_partition_index(partition)
                                            .with_start_offset(start)
                                            .with_leader_epoch(leader_epoch)
                                            .with_lag(lag)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            ),
                    );
                }
                groups.push(out.with_error_code(error_code::NONE).with_topics(topics));
            }
        }
    }
    respond(
        &request,
        &DescribeShareGroupOffsetsResponse::default().with_groups(groups),
    )
}

pub async fn alter(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AlterShareGroupOffsetsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let top = |code: i16, message: Option<&str>| {
        respond(
            &request,
            &AlterShareGroupOffsetsResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        )
    };
    let group_id = body.group_id.as_str();
    // Kafka's checks: READ on the group; READ on each topic.
    let topics: Vec<String> = body
        .topics
        .iter()
        .map(|t| t.topic_name.to_string())
        .collect();
    let refused = match checked(broker, context, group_id, AclOperation::Read, &topics) {
        Ok(refused) => refused,
        Err(code) => return top(code, None),
    };
    let mut responses = Vec::new();
    let mut wanted = Vec::new();
    for topic in &body.topics {
        let name = topic.topic_name.to_string();
        if refused.contains(&name) {
            responses.push(
                AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(topic.topic_name.clone())
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|p| {
                                AlterShareGroupOffsetsResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                            })
                            .collect(),
                    ),
            );
        } else {
            wanted.push((
                name,
                topic
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.start_offset))
                    .collect(),
            ));
        }
    }
    match admin::alter_offsets(broker, group_id, wanted).await {
        Err(error_code::NON_EMPTY_GROUP) => {
            top(error_code::NON_EMPTY_GROUP, Some("The group is not empty."))
        }
        Err(code) => top(code, None),
        Ok(altered) => {
            for (topic, id, rows) in altered {
                responses.push(
                    AlterShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(topic_name(&topic))
                        .with_topic_id(id)
                        .with_partitions(
                            rows.into_iter()
                                .map(|(partition, code)| {
                                    AlterShareGroupOffsetsResponsePartition::default()
                                        .with_partition_index(partition)
                                        .with_error_code(code)
                                })
                                .collect(),
                        ),
                );
            }
            respond(
                &request,
                &AlterShareGroupOffsetsResponse::default()
                    .with_error_code(error_code::NONE)
                    .with_responses(responses),
            )
        }
    }
}

pub async fn delete(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DeleteShareGroupOffsetsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let top = |code: i16, message: Option<&str>| {
        respond(
            &request,
            &DeleteShareGroupOffsetsResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        )
    };
    let group_id = body.group_id.as_str();
    // Kafka's checks: DELETE on the group; READ on each topic.
    let topics: Vec<String> = body
        .topics
        .iter()
        .map(|t| t.topic_name.to_string())
        .collect();
    let refused = match checked(broker, context, group_id, AclOperation::Delete, &topics) {
        Ok(refused) => refused,
        Err(code) => return top(code, None),
    };
    let wanted: Vec<String> = body
        .topics
        .iter()
        .map(|t| t.topic_name.to_string())
        .filter(|t| !refused.contains(t) && broker.topic(t).is_some())
        .collect();
    let deleted = match admin::delete_offsets(broker, group_id, wanted).await {
        Err(error_code::NON_EMPTY_GROUP) => {
            return top(error_code::NON_EMPTY_GROUP, Some("The group is not empty."))
        }
        Err(code) => return top(code, None),
        Ok(deleted) => deleted,
    };
    let responses = body
        .topics
        .iter()
        .map(|t| {
            let name = t.topic_name.to_string();
            let out = DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name.clone());
            if refused.contains(&name) {
                return out.with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED);
            }
            match deleted.iter().find(|(topic, _, _)| *topic == name) {
                Some((_, id, code)) => {
                    let out = out.with_topic_id(*id).with_error_code(*code);
                    if *code == error_code::UNKNOWN_TOPIC_OR_PARTITION {
                        out.with_error_message(Some(str_bytes(
                            "There is no offset information to delete.",
                        )))
                    } else {
                        out
                    }
                }
                None => out.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            }
        })
        .collect();
    respond(
        &request,
        &DeleteShareGroupOffsetsResponse::default()
            .with_error_code(error_code::NONE)
            .with_responses(responses),
    )
}
