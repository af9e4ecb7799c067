//! DescribeLogDirs (35): the log directory with every partition hosted in it (or those
//! asked for), each with its size on disk, and (v4+) the directory's total and usable
//! bytes from statvfs. Strand keeps one log directory; the future-replica fields (used
//! by AlterReplicaLogDirs) are always empty.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: DescribeLogDirsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let wanted: Option<HashMap<String, HashSet<i32>>> = body.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| {
                (
                    t.topic.as_str().to_string(),
                    t.partitions.iter().copied().collect(),
                )
            })
            .collect()
    });
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for partition in broker.hosted_partitions() {
        let tp = &partition.tp;
        let asked = wanted.as_ref().is_none_or(|wanted| {
            wanted
                .get(tp.topic.as_str())
                .is_some_and(|partitions| partitions.contains(&tp.partition))
        });
        if !asked {
            continue;
        }
        let size = partition.log().size_bytes();
        by_topic.entry(tp.topic.to_string()).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(tp.partition)
                .with_partition_size(size as i64)
                .with_offset_lag(0)
                .with_is_future_key(false),
        );
    }
    let dir = &broker.config.data_dir;
    let log_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
    let (total_bytes, usable_bytes) = match rustix::fs::statvfs(dir) {
        Ok(stat) => (
            (stat.f_blocks * stat.f_frsize) as i64,
            (stat.f_bavail * stat.f_frsize) as i64,
        ),
        Err(_) => (-1, -1),
    };
    let topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    let result = DescribeLogDirsResult::default()
        .with_error_code(error_code::NONE)
        .with_log_dir(str_bytes(log_dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total_bytes)
        .with_usable_bytes(usable_bytes);
    respond(
        &request,
        &DescribeLogDirsResponse::default()
            .with_error_code(error_code::NONE)
            .with_results(vec![result]),
    )
}
