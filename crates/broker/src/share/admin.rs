//! A share group's offsets as admins see them (KIP-932): DescribeShareGroupOffsets reads
//! each initialized share-partition's start offset from the share coordinator (with
//! KIP-1226's lag), AlterShareGroupOffsets sets start offsets, DeleteShareGroupOffsets
//! and DeleteGroups remove share state. The group's coordinator keeps which partitions
//! have state; the share coordinator keeps the state.

use std::collections::{BTreeMap, BTreeSet};

use strand_coordinator::share::ShareStateKey;
use strand_log::TopicPartition;
use uuid::Uuid;

use super::persister;
use crate::broker::Broker;
use crate::error_code;

/// One partition of DescribeShareGroupOffsets: (partition, start offset, leader epoch,
/// lag, error code).
pub type DescribedPartition = (i32, i64, i32, i64, i16);

/// Lag as Kafka 4.4 reports it: the partition's end (its high watermark, from its leader:
/// this broker, or a ListOffsets LATEST to the one that leads it) minus the start offset
/// minus the records after it already settled; -1 when the end cannot be had.
async fn lag(broker: &Broker, topic: &str, partition: i32, start: i64, complete: i32) -> i64 {
    if start < 0 || complete < 0 {
        return -1;
    }
    let end = match broker.partition(&TopicPartition::new(topic, partition)) {
        Some(p) if p.is_leader() => Some(p.high_watermark()),
        _ => remote_end(broker, topic, partition).await,
    };
    end.map_or(-1, |end| (end - start - complete as i64).max(0))
}

/// The high watermark of a partition another broker leads (ListOffsets LATEST).
async fn remote_end(broker: &Broker, topic: &str, partition: i32) -> Option<i64> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse};
    let cluster = broker.cluster()?;
    let leader = cluster.image().partition(topic, partition)?.leader;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(crate::api::topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = broker
        .txns
        .peers()
        .call(
            cluster,
            leader,
            ApiKey::ListOffsets,
            7,
            &request,
            LAG_TIMEOUT,
        )
        .await
        .ok()?;
    let answer = response.topics.first()?.partitions.first()?;
    (answer.error_code == error_code::NONE).then_some(answer.offset)
}

/// How long DescribeShareGroupOffsets waits for a partition's end from its leader.
const LAG_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// DescribeShareGroupOffsets for one group: the asked partitions (None: every
/// initialized one), by topic. An unknown group is no error: nothing is listed.
pub async fn describe_offsets(
    broker: &Broker,
    group_id: &str,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Vec<(String, Uuid, Vec<DescribedPartition>)>, i16> {
    let view = broker.groups.share_group_view(broker, group_id).await?;
    let initialized = view
        .map(|(_, _, initialized)| initialized)
        .unwrap_or_default();
    let wanted: Vec<(String, Vec<i32>)> = match asked {
        Some(asked) => asked,
        None => initialized
            .iter()
            .map(|(topic, partitions)| (topic.clone(), partitions.iter().copied().collect()))
            .collect(),
    };
    let mut out = Vec::with_capacity(wanted.len());
    for (topic, partitions) in wanted {
        let Some(info) = broker.topic(&topic) else {
            // Kafka: an unknown topic's partitions have no start offset, and no error.
            let rows = partitions
                .iter()
                .map(|p| (*p, -1, -1, -1, error_code::NONE))
                .collect();
            out.push((topic, Uuid::nil(), rows));
            continue;
        };
        let mut rows = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let known = initialized
                .get(&topic)
                .is_some_and(|ids| ids.contains(&partition));
            if !known {
                rows.push((partition, -1, 0, -1, error_code::NONE));
                continue;
            }
            let key: ShareStateKey = (group_id.to_string(), info.id, partition);
            rows.push(match persister::summary(broker, &key).await {
                Ok(Some(summary)) => (
                    partition,
                    summary.start_offset,
                    summary.leader_epoch,
                    lag(
                        broker,
                        &topic,
                        partition,
                        summary.start_offset,
                        summary.delivery_complete_count,
                    )
                    .await,
                    error_code::NONE,
                ),
                Ok(None) => (partition, -1, 0, -1, error_code::NONE),
                Err(code) => (partition, -1, -1, -1, code),
            });
        }
        out.push((topic, info.id, rows));
    }
    Ok(out)
}

/// AlterShareGroupOffsets: each partition's share state starts again at the offset
/// given, under a new state epoch (so a leader still holding the old state is fenced
/// at its next write). The group must be empty; it is created if it does not exist.
pub async fn alter_offsets(
    broker: &Broker,
    group_id: &str,
    topics: Vec<(String, Vec<(i32, i64)>)>,
) -> Result<Vec<(String, Uuid, Vec<(i32, i16)>)>, i16> {
    let mut valid: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for (topic, partitions) in &topics {
        if let Some(info) = broker.topic(topic) {
            valid.entry(topic.clone()).or_default().extend(
                partitions
                    .iter()
                    .map(|(p, _)| *p)
                    .filter(|p| (0..info.partitions).contains(p)),
            );
        }
    }
    let group_epoch = broker
        .groups
        .share_alter(broker, group_id, valid.clone())
        .await?;
    let mut out = Vec::with_capacity(topics.len());
    for (topic, partitions) in topics {
        let id = broker.topic(&topic).map_or(Uuid::nil(), |t| t.id);
        let mut rows = Vec::with_capacity(partitions.len());
        for (partition, start) in partitions {
            let known = valid
                .get(&topic)
                .is_some_and(|ids| ids.contains(&partition));
            if !known {
                rows.push((partition, error_code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            }
            let key: ShareStateKey = (group_id.to_string(), id, partition);
            let code = match reset(broker, &key, group_epoch, start).await {
                Ok(()) => error_code::NONE,
                Err(code) => code,
            };
            rows.push((partition, code));
        }
        out.push((topic, id, rows));
    }
    Ok(out)
}

/// Initializes `key` at `start` under a state epoch newer than the one it has, and drops
/// this broker's copy of the share-partition, which is loaded afresh at its next use.
async fn reset(
    broker: &Broker,
    key: &ShareStateKey,
    group_epoch: i32,
    start: i64,
) -> Result<(), i16> {
    let current = persister::summary(broker, key).await?;
    let state_epoch = current.map_or(group_epoch, |s| {
        s.state_epoch.saturating_add(1).max(group_epoch)
    });
    persister::initialize(broker, key, state_epoch, start).await?;
    broker.share.unload_where(|k| k == key).await;
    Ok(())
}

/// DeleteShareGroupOffsets: the share state of each topic's partitions goes. A topic the
/// group has no state for is UNKNOWN_TOPIC_OR_PARTITION, as on Kafka.
pub async fn delete_offsets(
    broker: &Broker,
    group_id: &str,
    topics: Vec<String>,
) -> Result<Vec<(String, Uuid, i16)>, i16> {
    let forgotten = broker.groups.share_forget(broker, group_id, topics).await?;
    let mut out = Vec::with_capacity(forgotten.len());
    for (topic, had) in forgotten {
        let id = broker.topic(&topic).map_or(Uuid::nil(), |t| t.id);
        let code = match had {
            None => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some(partitions) => delete_state(broker, group_id, id, &partitions).await,
        };
        out.push((topic, id, code));
    }
    Ok(out)
}

async fn delete_state(
    broker: &Broker,
    group_id: &str,
    id: Uuid,
    partitions: &BTreeSet<i32>,
) -> i16 {
    for partition in partitions {
        let key: ShareStateKey = (group_id.to_string(), id, *partition);
        broker.share.unload_where(|k| k == &key).await;
        if let Err(code) = persister::delete(broker, &key).await {
            return code;
        }
    }
    error_code::NONE
}

/// DeleteGroups of a share group: its share state goes first (Kafka's order), then the
/// group. Not a share group: nothing to do here.
pub async fn delete_group_state(broker: &Broker, group_id: &str) -> Result<(), i16> {
    let Some((has_members, _, initialized)) =
        broker.groups.share_group_view(broker, group_id).await?
    else {
        return Ok(());
    };
    if has_members {
        return Err(error_code::NON_EMPTY_GROUP);
    }
    for (topic, partitions) in initialized {
        let Some(info) = broker.topic(&topic) else {
            continue;
        };
        let code = delete_state(broker, group_id, info.id, &partitions).await;
        if code != error_code::NONE {
            return Err(code);
        }
    }
    Ok(())
}
