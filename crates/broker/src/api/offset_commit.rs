//! OffsetCommit (8): committed offsets go to `__consumer_offsets` before the answer, so a
//! restarted broker still has them. Members are fenced by generation and member id; a
//! simple consumer (generation -1, no member id) may commit while the group is empty.
//! v10 names topics by id (an unknown id: UNKNOWN_TOPIC_ID).

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::topic_ids;
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
    let body: OffsetCommitRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let by_id = version >= 10;
    let names = topic_ids::resolve_all(
        broker,
        by_id,
        body.topics.iter().map(|t| (&t.name, &t.topic_id)),
    );
    // Kafka's checks: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED)
    // and on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    let group_refused = !authorization.allows_group(AclOperation::Read, body.group_id.as_str());
    let status: Vec<Result<String, i16>> = names
        .iter()
        .map(|name| match name {
            _ if group_refused => Err(error_code::GROUP_AUTHORIZATION_FAILED),
            None => Err(error_code::UNKNOWN_TOPIC_ID),
            Some(name) if !authorization.allows_topic(AclOperation::Read, name) => {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            Some(name) => Ok(name.clone()),
        })
        .collect();
    drop(authorization);
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = body
        .topics
        .iter()
        .zip(&status)
        .filter_map(|(topic, name)| Some((topic, name.clone().ok()?)))
        .flat_map(|(topic, name)| {
            topic.partitions.iter().map(move |p| {
                (
                    name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata
                        .as_ref()
                        .map(|m| m.as_str().to_string()),
                )
            })
        })
        .collect();
    let codes = if group_refused {
        Vec::new()
    } else {
        broker
            .groups
            .commit(
                broker,
                version,
                body.group_id.as_str(),
                body.generation_id_or_member_epoch,
                body.member_id.as_str(),
                body.group_instance_id.as_ref().map(|i| i.as_str()),
                &offsets,
            )
            .await
    };
    let mut codes = codes.into_iter();
    let answered: Vec<(bool, OffsetCommitResponseTopic)> = body
        .topics
        .iter()
        .zip(&status)
        .map(|(topic, name)| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = match name {
                        Ok(_) => codes.next().unwrap_or_default(),
                        Err(code) => *code,
                    };
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            let answer = OffsetCommitResponseTopic::default().with_partitions(partitions);
            let answer = if by_id {
                answer.with_topic_id(topic.topic_id)
            } else {
                answer.with_name(topic.name.clone())
            };
            (*name != Err(error_code::UNKNOWN_TOPIC_ID), answer)
        })
        .collect();
    let topics = topic_ids::unknown_first(answered);
    respond(
        &request,
        &OffsetCommitResponse::default().with_topics(topics),
    )
}
