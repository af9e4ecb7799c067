//! OffsetDelete (47): removes committed offsets of topics the group no longer consumes
//! (GROUP_SUBSCRIBED_TO_TOPIC for those it does).

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: OffsetDeleteRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's checks: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
    // topic (else its partitions TOPIC_AUTHORIZATION_FAILED, their offsets kept).
    let (group_allowed, readable): (bool, Vec<bool>) = {
        let authorization = broker.authorization(context);
        (
            authorization.allows_group(AclOperation::Delete, body.group_id.as_str()),
            body.topics
                .iter()
                .map(|t| authorization.allows_topic(AclOperation::Read, t.name.as_str()))
                .collect(),
        )
    };
    if !group_allowed {
        return respond(
            &request,
            &OffsetDeleteResponse::default()
                .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
        );
    }
    let partitions: Vec<(String, i32)> = body
        .topics
        .iter()
        .zip(&readable)
        .filter(|(_, readable)| **readable)
        .map(|(t, _)| t)
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.as_str().to_string(), p.partition_index))
        })
        .collect();
    let response = match broker
        .groups
        .delete_offsets(broker, body.group_id.as_str(), &partitions)
        .await
    {
        Err(code) => OffsetDeleteResponse::default().with_error_code(code),
        Ok(codes) => {
            let mut codes = codes.into_iter();
            let topics = body
                .topics
                .iter()
                .zip(readable)
                .map(|(t, readable)| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(if readable {
                                            codes.next().unwrap_or_default()
                                        } else {
                                            error_code::TOPIC_AUTHORIZATION_FAILED
                                        })
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetDeleteResponse::default()
                .with_error_code(error_code::NONE)
                .with_topics(topics)
        }
    };
    respond(&request, &response)
}
