//! OffsetCommit (8): committed offsets go to `__consumer_offsets` before the answer, so a
//! restarted broker still has them. Members are fenced by generation and member id; a
//! simple consumer (generation -1, no member id) may commit while the group is empty.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::broker::Broker;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: OffsetCommitRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = body
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                (
                    topic.name.as_str().to_string(),
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
            request.header.request_api_version,
            body.group_id.as_str(),
            body.generation_id_or_member_epoch,
            body.member_id.as_str(),
            body.group_instance_id.as_ref().map(|i| i.as_str()),
            &offsets,
        )
        .await;
    let mut codes = codes.into_iter();
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(codes.next().unwrap_or_default())
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &OffsetCommitResponse::default().with_topics(topics),
    )
}
