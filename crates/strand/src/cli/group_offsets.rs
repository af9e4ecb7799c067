//! A consumer group's committed offsets, read (OffsetFetch) and written (OffsetCommit) at
//! its coordinator: by `strand consume -g` as a member, and by `strand group` as an admin
//! (generation -1 and no member id, which Kafka accepts only while the group is empty).

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::client::{check, topic_name, Client};

/// (topic, partition) -> offset.
pub type Offsets = BTreeMap<(String, i32), i64>;

pub fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

/// The committed offsets of `group` (for `topics`, or every topic when None); partitions
/// without a commit are left out.
pub async fn fetch_committed(
    client: &Client,
    coordinator: i32,
    group: &str,
    topics: Option<&BTreeMap<String, Vec<i32>>>,
) -> anyhow::Result<Offsets> {
    // v8 batches groups; up to v7 the request names one group, which is all the CLI needs.
    let version = client.version(ApiKey::OffsetFetch, 7)?;
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_require_stable(version >= 7)
        .with_topics(topics.map(|topics| {
            topics
                .iter()
                .map(|(topic, partitions)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partition_indexes(partitions.clone())
                })
                .collect()
        }));
    let response: OffsetFetchResponse = client
        .call_node(coordinator, ApiKey::OffsetFetch, version, &request)
        .await?;
    check(
        response.error_code,
        None,
        &format!("committed offsets of group {group}"),
    )?;
    let mut offsets = Offsets::new();
    for topic in response.topics {
        for partition in topic.partitions {
            check(
                partition.error_code,
                None,
                &format!(
                    "committed offset of {}-{}",
                    topic.name.0, partition.partition_index
                ),
            )?;
            if partition.committed_offset >= 0 {
                offsets.insert(
                    (topic.name.0.to_string(), partition.partition_index),
                    partition.committed_offset,
                );
            }
        }
    }
    Ok(offsets)
}

/// Commits `offsets` for `group` as member `member_id` of `generation` (-1 and "" for an
/// admin commit); the first partition error fails it with Kafka's error name.
pub async fn commit(
    client: &Client,
    coordinator: i32,
    group: &str,
    generation: i32,
    member_id: &str,
    offsets: &Offsets,
) -> anyhow::Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    // v9 is the KIP-848 member epoch and v10 topic ids; v8 is the classic shape.
    let version = client.version(ApiKey::OffsetCommit, 8)?;
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        topics.entry(topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_retention_time_ms(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response: OffsetCommitResponse = client
        .call_node(coordinator, ApiKey::OffsetCommit, version, &request)
        .await?;
    for topic in response.topics {
        for partition in topic.partitions {
            check(
                partition.error_code,
                None,
                &format!(
                    "committing the offset of {}-{} for group {group}",
                    topic.name.0, partition.partition_index
                ),
            )?;
        }
    }
    Ok(())
}
