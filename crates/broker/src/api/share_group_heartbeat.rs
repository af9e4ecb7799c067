//! ShareGroupHeartbeat (76): KIP-932 share group membership. Topic ids on the wire are
//! resolved to names for the state machine and back for the answer.

use std::sync::Arc;

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use strand_coordinator::group::share::ShareHeartbeat;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ShareGroupHeartbeatRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let refuse = |code: i16| {
        respond(
            &request,
            &ShareGroupHeartbeatResponse::default().with_error_code(code),
        )
    };
    // share.version 0 (kafka-features): share groups are off, as on Kafka.
    if !broker.share_groups_enabled() {
        return refuse(error_code::UNSUPPORTED_VERSION);
    }
    // Kafka's checks: READ on the group, then DESCRIBE on each subscribed topic.
    let authorization = broker.authorization(context);
    if !authorization.allows_group(AclOperation::Read, body.group_id.as_str()) {
        return refuse(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    if !super::share_fetch::member_id_valid(body.member_id.as_str()) {
        return respond(
            &request,
            &ShareGroupHeartbeatResponse::default()
                .with_error_code(error_code::INVALID_REQUEST)
                .with_error_message(Some(str_bytes("Invalid member id in the request."))),
        );
    }
    if let Some(names) = &body.subscribed_topic_names {
        if names
            .iter()
            .any(|t| !authorization.allows_topic(AclOperation::Describe, t.as_str()))
        {
            return refuse(error_code::TOPIC_AUTHORIZATION_FAILED);
        }
    }
    drop(authorization);
    let heartbeat = ShareHeartbeat {
        member_id: body.member_id.as_str().to_string(),
        member_epoch: body.member_epoch,
        rack_id: body.rack_id.as_ref().map(|r| r.as_str().to_string()),
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", context.peer.ip()),
        subscribed_topics: body
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.as_str().to_string()).collect()),
    };
    let response = match broker
        .groups
        .share_heartbeat(broker, body.group_id.as_str(), heartbeat)
        .await
    {
        Ok(result) => {
            let assignment = result.assignment.map(|assignment| {
                Assignment::default().with_topic_partitions(
                    assignment
                        .into_iter()
                        .filter_map(|(topic, partitions)| {
                            broker.topic(&topic).map(|t| {
                                TopicPartitions::default()
                                    .with_topic_id(t.id)
                                    .with_partitions(partitions.into_iter().collect())
                            })
                        })
                        .collect(),
                )
            });
            ShareGroupHeartbeatResponse::default()
                .with_error_code(error_code::NONE)
                .with_member_id(Some(str_bytes(result.member_id)))
                .with_member_epoch(result.member_epoch)
                .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
                .with_assignment(assignment)
        }
        Err(error) => ShareGroupHeartbeatResponse::default()
            .with_error_code(error.code)
            .with_error_message(Some(str_bytes(error.message))),
    };
    respond(&request, &response)
}
