//! DescribeLogDirs (35): each log directory (log.dirs) with every partition hosted in it
//! (or those asked for), each with its size on disk, and (v4+) the directory's total and
//! usable bytes from statvfs. An offline directory is answered KAFKA_STORAGE_ERROR with no
//! partitions, as Kafka does. A log being moved to another directory (AlterReplicaLogDirs)
//! is listed there too, as Kafka's future replica: is_future_key, the bytes copied so far,
//! and the offsets not copied yet as its lag.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use super::{str_bytes, topic_name};
use strand_log::TopicPartition;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

/// A directory's partitions: topic -> partitions.
type DirPartitions = BTreeMap<String, Vec<DescribeLogDirsPartition>>;

pub fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeLogDirsRequest = match decode(&request) {
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
            &DescribeLogDirsResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
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
    let asked = |tp: &TopicPartition| {
        wanted.as_ref().is_none_or(|wanted| {
            wanted
                .get(tp.topic.as_str())
                .is_some_and(|partitions| partitions.contains(&tp.partition))
        })
    };
    let mut by_dir: HashMap<PathBuf, DirPartitions> = HashMap::new();
    for partition in broker.hosted_partitions() {
        let tp = &partition.tp;
        if !asked(tp) {
            continue;
        }
        let (dir, size) = {
            let log = partition.log();
            let dir = log
                .dir()
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            (dir, log.size_bytes())
        };
        list_in(&mut by_dir, dir, tp, size as i64, 0, false);
    }
    // A log on its way to another directory shows there as a future replica, lagging by
    // the offsets not copied yet.
    for (tp, destination, progress) in broker.log_moves() {
        let Some(partition) = broker.partition(&tp).filter(|_| asked(&tp)) else {
            continue;
        };
        let end = partition.log().log_end_offset();
        let lag = (end - progress.end_offset).max(0);
        list_in(
            &mut by_dir,
            destination,
            &tp,
            progress.bytes as i64,
            lag,
            true,
        );
    }
    let results = broker
        .log_dir_states()
        .iter()
        .map(|dir| {
            let shown = std::fs::canonicalize(&dir.path).unwrap_or_else(|_| dir.path.clone());
            let result = DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(shown.display().to_string()))
                .with_total_bytes(-1)
                .with_usable_bytes(-1);
            if dir.failure().is_some() {
                return result.with_error_code(error_code::KAFKA_STORAGE_ERROR);
            }
            let (total_bytes, usable_bytes) = space(&dir.path);
            let topics = by_dir
                .remove(&dir.path)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| p.partition_index);
                    DescribeLogDirsTopic::default()
                        .with_name(topic_name(&name))
                        .with_partitions(partitions)
                })
                .collect();
            result
                .with_error_code(error_code::NONE)
                .with_topics(topics)
                .with_total_bytes(total_bytes)
                .with_usable_bytes(usable_bytes)
        })
        .collect();
    respond(
        &request,
        &DescribeLogDirsResponse::default()
            .with_error_code(error_code::NONE)
            .with_results(results),
    )
}

/// Lists a replica (the current one, or a future one being moved there) under `dir`.
fn list_in(
    by_dir: &mut HashMap<PathBuf, DirPartitions>,
    dir: PathBuf,
    tp: &TopicPartition,
    size: i64,
    offset_lag: i64,
    is_future: bool,
) {
    by_dir
        .entry(dir)
        .or_default()
        .entry(tp.topic.to_string())
        .or_default()
        .push(
            DescribeLogDirsPartition::default()
                .with_partition_index(tp.partition)
                .with_partition_size(size)
                .with_offset_lag(offset_lag)
                .with_is_future_key(is_future),
        );
}

/// (total, usable) bytes of the file system holding `dir` (-1 when unknown).
fn space(dir: &Path) -> (i64, i64) {
    match rustix::fs::statvfs(dir) {
        Ok(stat) => (
            (stat.f_blocks * stat.f_frsize) as i64,
            (stat.f_bavail * stat.f_frsize) as i64,
        ),
        Err(_) => (-1, -1),
    }
}
