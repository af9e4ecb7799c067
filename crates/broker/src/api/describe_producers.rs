//! DescribeProducers (61): the producers a partition's replica knows (their epoch, last
//! sequence and open transaction), answered by any replica, as Kafka does (the
//! `kafka-transactions describe-producers` and `find-hanging` tools read it).

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use strand_log::TopicPartition;

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
    let body: DescribeProducersRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: READ on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.as_str();
            let readable = authorization.allows_topic(AclOperation::Read, name);
            let known = broker.topic(name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    let tp = TopicPartition::new(name, index);
                    if !readable {
                        return answer.with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED);
                    }
                    match broker.partition(&tp) {
                        Some(partition) => {
                            let log = partition.log();
                            let producers = log
                                .producer_state()
                                .producers()
                                .map(|(id, entry)| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(id))
                                        .with_producer_epoch(entry.epoch as i32)
                                        .with_last_sequence(entry.last_sequence().unwrap_or(-1))
                                        .with_last_timestamp(entry.last_timestamp)
                                        .with_coordinator_epoch(entry.coordinator_epoch)
                                        .with_current_txn_start_offset(
                                            entry.current_txn_first_offset.unwrap_or(-1),
                                        )
                                })
                                .collect();
                            answer
                                .with_error_code(error_code::NONE)
                                .with_active_producers(producers)
                        }
                        None if known
                            .as_ref()
                            .is_some_and(|t| (0..t.partitions).contains(&index)) =>
                        {
                            answer.with_error_code(error_code::NOT_LEADER_OR_FOLLOWER)
                        }
                        None => answer.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &DescribeProducersResponse::default().with_topics(topics),
    )
}
