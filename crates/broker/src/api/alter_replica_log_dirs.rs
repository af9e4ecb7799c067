//! AlterReplicaLogDirs (34): moves replicas hosted here to another of this broker's log
//! directories (kafka-reassign-partitions with "log_dirs", Admin.alterReplicaLogDirs).
//! Answered at once; the move runs on the log mover thread and shows in DescribeLogDirs
//! as a future replica until it is done. Per partition, with Kafka's codes and in Kafka's
//! order of checks: INVALID_TOPIC_EXCEPTION for a name too long for the move's directory,
//! LOG_DIR_NOT_FOUND for a path that is not one of log.dirs, KAFKA_STORAGE_ERROR for an
//! offline directory or replica, REPLICA_NOT_AVAILABLE for a partition of a known topic
//! not hosted here (remembered: created here later, it goes to that directory), and
//! UNKNOWN_TOPIC_OR_PARTITION otherwise. A partition named twice takes the last path, as
//! Kafka's map of partition to directory does.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
use strand_log::log_manager::MoveRefused;
use strand_log::TopicPartition;

use super::topic_name;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

/// Kafka's limit on the future log's directory name, `<topic>-<partition>.<32 hex
/// digits>-future` (KAFKA-4893).
const FUTURE_DIR_NAME_MAX: usize = 255;

pub fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AlterReplicaLogDirsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let mut wanted: BTreeMap<(String, i32), String> = BTreeMap::new();
    for dir in &body.dirs {
        for topic in &dir.topics {
            for &partition in &topic.partitions {
                wanted.insert(
                    (topic.name.as_str().to_string(), partition),
                    dir.path.as_str().to_string(),
                );
            }
        }
    }
    let mut by_topic: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    // Kafka's check: ALTER on the cluster (else every partition
    // CLUSTER_AUTHORIZATION_FAILED).
    let allowed = broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter);
    for ((topic, partition), path) in wanted {
        let code = if allowed {
            alter_one(
                broker,
                &TopicPartition::new(topic.clone(), partition),
                &path,
            )
        } else {
            error_code::CLUSTER_AUTHORIZATION_FAILED
        };
        by_topic.entry(topic).or_default().push(
            AlterReplicaLogDirPartitionResult::default()
                .with_partition_index(partition)
                .with_error_code(code),
        );
    }
    let results = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    respond(
        &request,
        &AlterReplicaLogDirsResponse::default().with_results(results),
    )
}

fn alter_one(broker: &Arc<Broker>, tp: &TopicPartition, path: &str) -> i16 {
    if format!("{tp}.{:032}-future", 0).len() > FUTURE_DIR_NAME_MAX {
        return error_code::INVALID_TOPIC_EXCEPTION;
    }
    match broker.move_log(tp, Path::new(path)) {
        Ok(()) => error_code::NONE,
        Err(MoveRefused::UnknownDir) => error_code::LOG_DIR_NOT_FOUND,
        Err(MoveRefused::Offline) => error_code::KAFKA_STORAGE_ERROR,
        Err(MoveRefused::NotHosted) => {
            let known = broker
                .topic(&tp.topic)
                .is_some_and(|topic| (0..topic.partitions).contains(&tp.partition));
            if known {
                // Remembered: created here later, the replica goes to that directory.
                if broker.prefer_log_dir(tp, Path::new(path)).is_err() {
                    return error_code::KAFKA_STORAGE_ERROR;
                }
                error_code::REPLICA_NOT_AVAILABLE
            } else {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            }
        }
    }
}
