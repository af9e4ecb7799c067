//! Produce (key 0): one batch per partition, appended as leader. acks must be 0, 1 or -1
//! (INVALID_REQUIRED_ACKS); on this single node acks=-1 completes when the batch is
//! appended (and synced, for flush-before-ack topics), and is refused with
//! NOT_ENOUGH_REPLICAS when the topic's min.insync.replicas exceeds the one replica.
//! acks=0 gets no response; if any partition failed, the connection is closed instead,
//! which is how Kafka tells an acks=0 producer that something went wrong.
//! v13 addresses topics by id. Idempotent producers (a producer id in the batch) are
//! deduplicated by the log: a retried batch is answered with its original offsets.

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use strand_log::TopicPartition;
use strand_records::BatchHeader;

use super::str_bytes;
use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: ProduceRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let acks = body.acks;
    let mut any_error = false;
    let mut topics = Vec::with_capacity(body.topic_data.len());
    for topic in body.topic_data {
        let resolved = if version >= 13 {
            broker
                .topic_by_id(&topic.topic_id)
                .map(|t| t.name)
                .ok_or(error_code::UNKNOWN_TOPIC_ID)
        } else {
            Ok(topic.name.as_str().to_string())
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let result = match &resolved {
                Err(code) => Err((*code, None)),
                Ok(name) => {
                    let tp = TopicPartition::new(name.clone(), data.index);
                    append_one(
                        broker,
                        &tp,
                        acks,
                        body.transactional_id.is_some(),
                        data.records,
                    )
                    .await
                }
            };
            let response = PartitionProduceResponse::default().with_index(data.index);
            partitions.push(match result {
                Ok(info) => response
                    .with_error_code(error_code::NONE)
                    .with_base_offset(info.first_offset)
                    .with_log_append_time_ms(info.log_append_time_ms)
                    .with_log_start_offset(info.log_start_offset),
                Err((code, message)) => {
                    any_error = true;
                    response
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                        .with_error_message(message.map(str_bytes))
                }
            });
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if acks == 0 {
        return if any_error {
            Outcome::Close("acks=0 produce failed".into())
        } else {
            Outcome::NoResponse
        };
    }
    respond(&request, &ProduceResponse::default().with_responses(topics))
}

type AppendResult = Result<strand_log::AppendInfo, (i16, Option<String>)>;

async fn append_one(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    acks: i16,
    transactional: bool,
    records: Option<bytes::Bytes>,
) -> AppendResult {
    if !matches!(acks, -1..=1) {
        return Err((error_code::INVALID_REQUIRED_ACKS, None));
    }
    let partition = broker
        .partition(tp)
        .ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, None))?;
    if transactional {
        return Err((
            error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            Some("transactions are not supported yet".into()),
        ));
    }
    let records = records.unwrap_or_default();
    if let Ok(header) = BatchHeader::parse(&records) {
        if header.attributes.is_transactional() {
            return Err((
                error_code::INVALID_RECORD,
                Some("transactional batches are not supported yet".into()),
            ));
        }
        if header.attributes.is_control() {
            return Err((
                error_code::INVALID_RECORD,
                Some("Client produce requests should not have control records".into()),
            ));
        }
    }
    if acks == -1 && partition.min_insync_replicas() > 1 {
        return Err((
            error_code::NOT_ENOUGH_REPLICAS,
            Some(format!(
                "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of {} for partition {tp}",
                partition.min_insync_replicas()
            )),
        ));
    }
    partition
        .append(records.to_vec(), acks != 0)
        .await
        .map_err(|error| (error.kafka_error_code(), Some(error.to_string())))
}
