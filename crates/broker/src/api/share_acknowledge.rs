//! ShareAcknowledge (79): a share group member settles records it acquired, without
//! fetching (accept, release, reject, gap, renew; `share::partition_state`). Each
//! partition's outcome is its error_code; the changes are durable before the answer.
//! Epoch -1 closes the member's share session after the acknowledgements, and what it
//! still holds goes back to the others.

use std::sync::Arc;

use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};

use super::share_fetch::{acknowledge, member_of};
use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::share::partition_state::check_batches;
use crate::share::{self, GroupShareSettings};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ShareAcknowledgeRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let top = |code: i16, message: Option<&str>| {
        respond(
            &request,
            &ShareAcknowledgeResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        )
    };
    let (group_id, member_id) = match member_of(
        broker,
        context,
        body.group_id.as_ref().map(|g| g.as_str()),
        body.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(ids) => ids,
        Err((code, message)) => return top(code, message),
    };
    let authorization = broker.authorization(context);
    let renew = request.header.request_api_version >= 2 && body.is_renew_ack;
    let now = crate::shard_log::now_ms();
    let session_key = (group_id.clone(), member_id.clone());
    let open = match broker
        .share
        .sessions
        .acknowledge(&session_key, body.share_session_epoch)
    {
        Ok(open) => open,
        Err(code) => return top(code, None),
    };
    // Kafka's READ on each topic, checked before anything waits.
    let checked: Vec<_> = body
        .topics
        .iter()
        .map(|topic| {
            let allowed = match broker.topic_by_id(&topic.topic_id) {
                None => Err(error_code::UNKNOWN_TOPIC_ID),
                Some(t) if !authorization.allows_topic(AclOperation::Read, &t.name) => {
                    Err(error_code::TOPIC_AUTHORIZATION_FAILED)
                }
                Some(_) => Ok(()),
            };
            (topic, allowed)
        })
        .collect();
    drop(authorization);
    let settings = GroupShareSettings::of(broker, &group_id);
    let mut responses = Vec::with_capacity(checked.len());
    // Where leaders are, for the partitions answered NOT_LEADER_OR_FOLLOWER.
    let mut endpoints: std::collections::BTreeMap<i32, NodeEndpoint> = Default::default();
    for (topic, allowed) in checked {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for partition in &topic.partitions {
            let key = (topic.topic_id, partition.partition_index);
            let batches: Vec<(i64, i64, Vec<i8>)> = partition
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                .collect();
            let resolved = allowed
                .and_then(|()| check_batches(&batches, renew))
                .and_then(|()| share::partition_of(broker, &key.0, key.1));
            let (code, leader) = match resolved {
                Err(code) => (code, None),
                Ok(p) => {
                    let leader = p.leader_epoch_if_leader().map(|e| (broker.node_id(), e));
                    let code = acknowledge(
                        broker, &group_id, &member_id, key, &p, &settings, &batches, now,
                    )
                    .await
                    .err()
                    .unwrap_or(error_code::NONE);
                    (code, leader)
                }
            };
            let leader = match leader {
                None if code == error_code::NOT_LEADER_OR_FOLLOWER => {
                    share::leader_hint(broker, &key.0, key.1, context.listener_name()).map(
                        |(leader, epoch, endpoint)| {
                            if let Some((host, port, rack)) = endpoint {
                                endpoints.insert(
                                    leader,
                                    NodeEndpoint::default()
                                        .with_node_id(leader.into())
                                        .with_host(str_bytes(host))
                                        .with_port(port)
                                        .with_rack(rack.map(str_bytes)),
                                );
                            }
                            (leader, epoch)
                        },
                    )
                }
                other => other,
            };
            let (leader_id, leader_epoch) = leader.unwrap_or((-1, -1));
            partitions.push(
                PartitionData::default()
                    .with_partition_index(partition.partition_index)
                    .with_error_code(code)
                    .with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(leader_id)
                            .with_leader_epoch(leader_epoch),
                    ),
            );
        }
        responses.push(
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    if !open {
        broker
            .share
            .release_member(broker, &group_id, &member_id, None)
            .await;
    }
    respond(
        &request,
        &ShareAcknowledgeResponse::default()
            .with_error_code(error_code::NONE)
            .with_acquisition_lock_timeout_ms(settings.limits.lock_duration_ms as i32)
            .with_responses(responses)
            .with_node_endpoints(endpoints.into_values().collect()),
    )
}
