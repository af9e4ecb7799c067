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
use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
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
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = body
        .topics
        .iter()
        .zip(&names)
        .filter_map(|(topic, name)| Some((topic, name.clone()?)))
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
    let codes = broker
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
        .await;
    let mut codes = codes.into_iter();
    let answered: Vec<(bool, OffsetCommitResponseTopic)> = body
        .topics
        .iter()
        .zip(&names)
        .map(|(topic, name)| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = match name {
                        Some(_) => codes.next().unwrap_or_default(),
                        None => error_code::UNKNOWN_TOPIC_ID,
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
            (name.is_some(), answer)
        })
        .collect();
    let topics = topic_ids::unknown_first(answered);
    respond(
        &request,
        &OffsetCommitResponse::default().with_topics(topics),
    )
}
