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
    let version = client.version(ApiKey::ListOffsets, 7)?;
    let mut by_leader: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&partition, &leader) in leaders {
        by_leader.entry(leader).or_default().push(partition);
    }
    let mut offsets = BTreeMap::new();
    for (leader, partitions) in by_leader {
        if leader < 0 {
            anyhow::bail!(
                "partitions {partitions:?} of {topic} have no leader (LEADER_NOT_AVAILABLE)"
            );
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
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
                )]);
        let response: ListOffsetsResponse = client
            .call_node(leader, ApiKey::ListOffsets, version, &request)
            .await?;
        for topic_response in response.topics {
            for partition in topic_response.partitions {
                check(
                    partition.error_code,
                    None,
                    &format!("offsets of {topic}-{}", partition.partition_index),
                )?;
                offsets.insert(partition.partition_index, partition.offset);
            }
        }
    }
    Ok(offsets)
}
