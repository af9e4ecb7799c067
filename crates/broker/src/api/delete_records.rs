//! DeleteRecords (21): moves a partition's log start offset up (offset -1 means the high
//! watermark); whole segments below it are deleted. Beyond the high watermark:
//! OFFSET_OUT_OF_RANGE. On a tiered partition the new start is written to the remote
//! store before the answer (also below the local log start), and the copies wholly below
//! it are deleted by the next tiering pass.

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
    let wanted: Vec<(_, bool, Vec<(i32, i64)>)> = body
        .topics
        .iter()
        .map(|topic| {
            let deletable = authorization.allows_topic(AclOperation::Delete, topic.name.as_str());
            let partitions = topic
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.offset))
                .collect();
            (topic.name.clone(), deletable, partitions)
        })
        .collect();
    // Deferred: a tiered partition's new log start is written to the remote store first.
    let broker = broker.clone();
    Outcome::Deferred(Box::pin(async move {
        let mut topics = Vec::with_capacity(wanted.len());
        for (name, deletable, partitions) in wanted {
            let mut results = Vec::with_capacity(partitions.len());
            for (index, offset) in partitions {
                let tp = TopicPartition::new(name.as_str(), index);
                let (code, low_watermark) = if deletable {
                    delete(&broker, &tp, offset).await
                } else {
                    (error_code::TOPIC_AUTHORIZATION_FAILED, -1)
                };
                results.push(
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                        .with_low_watermark(low_watermark),
                );
            }
            topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(name)
                    .with_partitions(results),
            );
        }
        respond(
            &request,
            &DeleteRecordsResponse::default().with_topics(topics),
        )
    }))
}

async fn delete(broker: &Arc<Broker>, tp: &TopicPartition, offset: i64) -> (i16, i64) {
    let Some(partition) = broker.partition(tp) else {
        return (error_code::UNKNOWN_TOPIC_OR_PARTITION, -1);
    };
    let high_watermark = partition.log().high_watermark();
    let log_start = match partition.delete_records(offset) {
        Ok(log_start) => log_start,
        Err(code) => return (code, -1),
    };
    // A tiered partition: the store's copy too (also below the local log start).
    match broker.tiered() {
        Some(tiered) if partition.log().config().remote_storage => {
            let target = if offset == -1 { high_watermark } else { offset };
            match tiered.delete_records(&partition, target).await {
                Ok(log_start) => (error_code::NONE, log_start),
                Err(error) => {
                    tracing::warn!(partition = %tp, %error, "DeleteRecords: writing the log start to the remote store failed");
                    (error_code::KAFKA_STORAGE_ERROR, -1)
                }
            }
        }
        _ => (error_code::NONE, log_start),
    }
}
