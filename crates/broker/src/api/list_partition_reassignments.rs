//! ListPartitionReassignments (46, kafka-reassign-partitions --verify / --list,
//! Admin.listPartitionReassignments): the partitions whose reassignment is in progress,
//! with their full replica list and the replicas being added and removed. Topics not
//! named (null: every topic) and partitions not reassigning are left out, as are topics
//! that do not exist, as Kafka does. Answered from this broker's image.

use std::sync::Arc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use strand_metadata::TopicImage;

use super::str_bytes;
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
    let body: ListPartitionReassignmentsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: DESCRIBE on the cluster.
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Describe)
    {
        return respond(
            &request,
            &ListPartitionReassignmentsResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let image = broker.metadata_image();
    let topics: Vec<OngoingTopicReassignment> = match &body.topics {
        None => image
            .topics
            .values()
            .filter_map(|topic| ongoing(topic, 0..topic.partitions.len() as i32))
            .collect(),
        Some(asked) => asked
            .iter()
            .filter_map(|t| {
                let topic = image.topic(t.name.as_str())?;
                ongoing(topic, t.partition_indexes.iter().copied())
            })
            .collect(),
    };
    let response = ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics);
    respond(&request, &response)
}

/// The reassigning partitions of `topic` among `partitions`; None if there are none.
fn ongoing(
    topic: &TopicImage,
    partitions: impl Iterator<Item = i32>,
) -> Option<OngoingTopicReassignment> {
    let ids = |list: &[i32]| list.iter().map(|&id| BrokerId(id)).collect::<Vec<_>>();
    let reassigning: Vec<OngoingPartitionReassignment> = partitions
        .filter_map(|index| {
            let state = topic.partitions.get(usize::try_from(index).ok()?)?;
            state.is_reassigning().then(|| {
                OngoingPartitionReassignment::default()
                    .with_partition_index(index)
                    .with_replicas(ids(&state.replicas))
                    .with_adding_replicas(ids(&state.adding_replicas))
                    .with_removing_replicas(ids(&state.removing_replicas))
            })
        })
        .collect();
    (!reassigning.is_empty()).then(|| {
        OngoingTopicReassignment::default()
            .with_name(TopicName(str_bytes(topic.name.clone())))
            .with_partitions(reassigning)
    })
}
