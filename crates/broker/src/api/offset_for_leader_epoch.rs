//! OffsetForLeaderEpoch (23): the end offset of a leader epoch, from the leader's epoch
//! cache (what followers truncate by after a leader change, and consumers use to detect
//! truncation). Only the leader answers; `current_leader_epoch` is checked as Fetch does.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use strand_log::TopicPartition;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: OffsetForLeaderEpochRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: CLUSTER_ACTION on the cluster (a follower), else DESCRIBE on each
    // topic (else TOPIC_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    let every_topic = authorization.allows_cluster(AclOperation::ClusterAction);
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let described = every_topic
                || authorization.allows_topic(AclOperation::Describe, topic.topic.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let result = EpochEndOffset::default().with_partition(p.partition);
                    let tp = TopicPartition::new(topic.topic.as_str(), p.partition);
                    if !described {
                        return result
                            .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    }
                    let Some(partition) = broker.partition(&tp) else {
                        return result
                            .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    };
                    let refused = if partition.is_leader() {
                        partition.check_leader_epoch(p.current_leader_epoch).err()
                    } else {
                        Some(error_code::NOT_LEADER_OR_FOLLOWER)
                    };
                    if let Some(code) = refused {
                        return result
                            .with_error_code(code)
                            .with_leader_epoch(-1)
                            .with_end_offset(-1);
                    }
                    let (epoch, end_offset) = partition.log().end_offset_for_epoch(p.leader_epoch);
                    result
                        .with_error_code(error_code::NONE)
                        .with_leader_epoch(epoch)
                        .with_end_offset(end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &OffsetForLeaderEpochResponse::default().with_topics(topics),
    )
}
