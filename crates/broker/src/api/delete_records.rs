//! DeleteRecords (21): moves a partition's log start offset up (offset -1 means the high
//! watermark); whole segments below it are deleted. Beyond the high watermark:
//! OFFSET_OUT_OF_RANGE.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
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
    let body: DeleteRecordsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: DELETE on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let deletable = authorization.allows_topic(AclOperation::Delete, topic.name.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                    let (code, low_watermark) = if deletable {
                        delete(broker, &tp, p.offset)
                    } else {
                        (error_code::TOPIC_AUTHORIZATION_FAILED, -1)
                    };
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_low_watermark(low_watermark)
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &DeleteRecordsResponse::default().with_topics(topics),
    )
}

fn delete(broker: &Arc<Broker>, tp: &TopicPartition, offset: i64) -> (i16, i64) {
    let Some(partition) = broker.partition(tp) else {
        return (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1);
    };
    match partition.delete_records(offset) {
        Ok(log_start) => (error_code::NONE, log_start),
        Err(code) => (code, -1),
    }
}
