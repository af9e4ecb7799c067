//! ConsumerGroupHeartbeat (68): the KIP-848 consumer group protocol. Topic ids on the
//! wire are resolved to names for the state machine and back for the answer. Refused with
//! UNSUPPORTED_VERSION while `group.version` is finalized at 0.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::consumer::{self, Heartbeat};
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let peer = context.peer;
    let body: ConsumerGroupHeartbeatRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // group.version 0 (kafka-features): the consumer protocol is off, as on Kafka.
    if !broker.consumer_protocol_enabled() {
        return respond(
            &request,
            &ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error_code::UNSUPPORTED_VERSION),
        );
    }
    // Kafka's check: READ on the group.
    if !broker
        .authorization(context)
        .allows_group(AclOperation::Read, body.group_id.as_str())
    {
        return respond(
            &request,
            &ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
        );
    }
    let owned = body.topic_partitions.as_ref().map(|list| {
        let mut owned = consumer::Assignment::new();
        for tp in list {
            // Partitions of a topic deleted meanwhile are simply no longer owned.
            if let Some(topic) = broker.topic_by_id(&tp.topic_id) {
                owned
                    .entry(topic.name)
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        owned
    });
    let heartbeat = Heartbeat {
        member_id: body.member_id.as_str().to_string(),
        member_epoch: body.member_epoch,
        instance_id: body.instance_id.as_ref().map(|i| i.as_str().to_string()),
        rack_id: body.rack_id.as_ref().map(|r| r.as_str().to_string()),
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", peer.ip()),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        subscribed_topics: body
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.as_str().to_string()).collect()),
        subscribed_regex: body
            .subscribed_topic_regex
            .as_ref()
            .map(|r| r.as_str().to_string())
            .filter(|r| !r.is_empty()),
        server_assignor: body
            .server_assignor
            .as_ref()
            .map(|a| a.as_str().to_string()),
        owned,
    };
    let response = match broker
        .groups
        .consumer_heartbeat(broker, body.group_id.as_str(), heartbeat)
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
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error_code::NONE)
                .with_member_id(Some(str_bytes(result.member_id)))
                .with_member_epoch(result.member_epoch)
                .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
                .with_assignment(assignment)
        }
        // Kafka's error answers leave the member id and epoch at their defaults.
        Err(error) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(error.code)
            .with_error_message(Some(str_bytes(error.message))),
    };
    respond(&request, &response)
}
