//! Offset lookups by time (ListOffsets) for a topic's partitions, each asked of its
//! leader: the earliest and latest offsets, or the first offset at or after a timestamp.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse};

use super::client::{check, topic_name, Client};

/// ListOffsets' special timestamps.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;

/// partition -> offset at `timestamp` for the partitions in `leaders` (partition ->
/// leader). A timestamp after the last record gives -1, as Kafka answers.
pub async fn list_offsets(
    client: &Client,
    topic: &str,
    leaders: &BTreeMap<i32, i32>,
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let leaderless: Vec<i32> = leaders
        .iter()
        .filter(|(_, &leader)| leader < 0)
        .map(|(&p, _)| p)
        .collect();
    if !leaderless.is_empty() {
        anyhow::bail!("partitions {leaderless:?} of {topic} have no leader (LEADER_NOT_AVAILABLE)");
    }
    let many = leaders
        .iter()
        .map(|(&partition, &leader)| ((topic.to_string(), partition), leader))
        .collect();
    Ok(list_offsets_of(client, &many, timestamp)
        .await?
        .into_iter()
        .map(|((_, partition), offset)| (partition, offset))
        .collect())
}

/// (topic, partition) -> offset at `timestamp` for the partitions of any topics in
/// `leaders` ((topic, partition) -> leader): one request per leader. Partitions without
/// a leader are left out; an error for any other fails the call.
pub async fn list_offsets_of(
    client: &Client,
    leaders: &BTreeMap<(String, i32), i32>,
    timestamp: i64,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let version = client.version(ApiKey::ListOffsets, 7)?;
    let mut by_leader: HashMap<i32, BTreeMap<&str, Vec<i32>>> = HashMap::new();
    for ((topic, partition), &leader) in leaders.iter().filter(|(_, &leader)| leader >= 0) {
        by_leader
            .entry(leader)
            .or_default()
            .entry(topic.as_str())
            .or_default()
            .push(*partition);
    }
    let mut offsets = BTreeMap::new();
    for (leader, topics) in by_leader {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(topic))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|&p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response: ListOffsetsResponse = client
            .call_node(leader, ApiKey::ListOffsets, version, &request)
            .await?;
        for topic_response in response.topics {
            let topic = topic_response.name.0.to_string();
            for partition in topic_response.partitions {
                check(
                    partition.error_code,
                    None,
                    &format!("offsets of {topic}-{}", partition.partition_index),
                )?;
                offsets.insert((topic.clone(), partition.partition_index), partition.offset);
            }
        }
    }
    Ok(offsets)
}
