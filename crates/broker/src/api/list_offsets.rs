//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), earliest local
//! (-4), or the first offset at or after a timestamp. Consumers (replica id -1) see only
//! up to the high watermark.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use strand_log::TopicPartition;

use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

pub fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: ListOffsetsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // leader_epoch exists from v4; kafka-protocol refuses to encode it set below that.
    let with_epoch = request.header.request_api_version >= 4;
    let topics = body
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let tp = TopicPartition::new(topic.name.as_str(), partition.partition_index);
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(partition.partition_index);
                    match lookup(
                        broker,
                        &tp,
                        partition.timestamp,
                        partition.current_leader_epoch,
                    ) {
                        Ok((timestamp, offset, leader_epoch)) => response
                            .with_error_code(error_code::NONE)
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(if with_epoch { leader_epoch } else { -1 }),
                        Err(code) => response
                            .with_error_code(code)
                            .with_timestamp(-1)
                            .with_offset(-1)
                            .with_leader_epoch(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &ListOffsetsResponse::default().with_topics(topics),
    )
}

/// (timestamp, offset, the leader's epoch) for one partition, or an error code.
fn lookup(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    timestamp: i64,
    current_leader_epoch: i32,
) -> Result<(i64, i64, i32), i16> {
    let partition = broker
        .partition(tp)
        .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION)?;
    if !partition.is_leader() {
        return Err(error_code::NOT_LEADER_OR_FOLLOWER);
    }
    partition.check_leader_epoch(current_leader_epoch)?;
    let epoch = partition.leader_epoch_if_leader().unwrap_or(-1);
    let log = partition.log();
    let visible_end = log.high_watermark();
    let storage = |error: strand_log::LogError| error.kafka_error_code();
    let found = match timestamp {
        LATEST | LATEST_TIERED => Ok((-1, visible_end)),
        EARLIEST | EARLIEST_LOCAL => Ok((-1, log.log_start_offset())),
        MAX_TIMESTAMP => Ok(match log.max_timestamp_offset().map_err(storage)? {
            Some(found) if found.offset < visible_end => (found.timestamp, found.offset),
            _ => (-1, -1),
        }),
        timestamp if timestamp >= 0 => Ok(
            match log.offset_for_timestamp(timestamp).map_err(storage)? {
                Some(found) if found.offset < visible_end => (found.timestamp, found.offset),
                _ => (-1, -1),
            },
        ),
        _ => Err(error_code::INVALID_REQUEST),
    }?;
    // Nothing found carries no epoch, as in Kafka.
    Ok((found.0, found.1, if found.1 >= 0 { epoch } else { -1 }))
}
