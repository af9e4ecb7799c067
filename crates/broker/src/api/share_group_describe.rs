//! ShareGroupDescribe (77): share groups with their epochs, assignor, and each member's
//! subscription and assignment.

use std::sync::Arc;

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse};

use super::{str_bytes, topic_name};
use crate::authorization::{AclOperation, ResourceType, OMITTED};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use strand_coordinator::group::consumer::Assignment as Partitions;
use strand_coordinator::group::share::ASSIGNOR_SIMPLE;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ShareGroupDescribeRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let wire = |assignment: &Partitions| {
        Assignment::default().with_topic_partitions(
            assignment
                .iter()
                .filter_map(|(topic, partitions)| {
                    broker.topic(topic).map(|t| {
                        TopicPartitions::default()
                            .with_topic_id(t.id)
                            .with_topic_name(topic_name(topic))
                            .with_partitions(partitions.iter().copied().collect())
                    })
                })
                .collect(),
        )
    };
    let mut groups = Vec::with_capacity(body.group_ids.len());
    // Kafka's check: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    for group_id in &body.group_ids {
        if !authorization.allows_group(AclOperation::Describe, group_id.as_str()) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(group_id.clone())
                    .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
                    .with_authorized_operations(OMITTED),
            );
            continue;
        }
        let described = DescribedGroup::default()
            .with_group_id(group_id.clone())
            .with_authorized_operations(authorization.operations(
                body.include_authorized_operations,
                ResourceType::Group,
                group_id.as_str(),
            ));
        groups.push(
            match broker
                .groups
                .describe_share_group(broker, group_id.as_str())
                .await
            {
                Err(code) => described.with_error_code(code),
                Ok(None) => described
                    .with_error_code(error_code::GROUP_ID_NOT_FOUND)
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} not found.",
                        group_id.as_str()
                    )))),
                Ok(Some(group)) => described
                    .with_error_code(error_code::NONE)
                    .with_group_state(str_bytes(group.state().name()))
                    .with_group_epoch(group.group_epoch)
                    .with_assignment_epoch(group.assignment_epoch)
                    .with_assignor_name(str_bytes(ASSIGNOR_SIMPLE))
                    .with_members(
                        group
                            .members
                            .values()
                            .map(|m| {
                                Member::default()
                                    .with_member_id(str_bytes(m.member_id.clone()))
                                    .with_rack_id(m.rack_id.clone().map(str_bytes))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(str_bytes(m.client_id.clone()))
                                    .with_client_host(str_bytes(m.client_host.clone()))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topics.iter().map(|t| topic_name(t)).collect(),
                                    )
                                    .with_assignment(wire(&m.assigned))
                            })
                            .collect(),
                    ),
            },
        );
    }
    respond(
        &request,
        &ShareGroupDescribeResponse::default().with_groups(groups),
    )
}
