//! The versions Kafka 4.4 added over 4.1, over a socket: OffsetCommit/OffsetFetch v10 and
//! their topic ids, ListOffsets v11, ApiVersions v5's cluster and node ids. The same cases
//! are byte-compared with Kafka 4.4.0's answers by the `reference` interop driver
//! (interop/kafka/reference-4.4/kafka44_versions.json).

mod common;

use common::{call, metadata, start};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, GroupId, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;
use uuid::Uuid;

const NONE: i16 = 0;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC_ID: i16 = 100;
const REBOOTSTRAP_REQUIRED: i16 = 129;

fn group() -> GroupId {
    GroupId(StrBytes::from_static_str("g"))
}

fn commit_topic(id: Uuid) -> OffsetCommitRequestTopic {
    OffsetCommitRequestTopic::default()
        .with_topic_id(id)
        .with_partitions(vec![OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(5)])
}

fn fetch(topics: Option<Vec<OffsetFetchRequestTopics>>) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(group())
        .with_member_epoch(-1)
        .with_topics(topics)])
}

#[tokio::test]
async fn offsets_are_committed_and_fetched_by_topic_id_from_v10() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let topic_id = metadata(&mut stream, "t", 1).await.topics[0].topic_id;
    let unknown = Uuid::from_bytes(*b"strand-unknownid");

    let request = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![commit_topic(topic_id), commit_topic(unknown)]);
    let committed: OffsetCommitResponse =
        call(&mut stream, ApiKey::OffsetCommit, 10, &request).await;
    // Kafka answers the unknown ids first, then the coordinator's answer.
    let answers: Vec<(Uuid, i16)> = committed
        .topics
        .iter()
        .map(|t| (t.topic_id, t.partitions[0].error_code))
        .collect();
    assert_eq!(answers, [(unknown, UNKNOWN_TOPIC_ID), (topic_id, NONE)]);

    let by_id = fetch(Some(vec![
        OffsetFetchRequestTopics::default()
            .with_topic_id(topic_id)
            .with_partition_indexes(vec![0]),
        OffsetFetchRequestTopics::default()
            .with_topic_id(unknown)
            .with_partition_indexes(vec![0]),
    ]));
    let fetched: OffsetFetchResponse = call(&mut stream, ApiKey::OffsetFetch, 10, &by_id).await;
    let answers: Vec<(Uuid, i64, i16)> = fetched.groups[0]
        .topics
        .iter()
        .map(|t| {
            let p = &t.partitions[0];
            (t.topic_id, p.committed_offset, p.error_code)
        })
        .collect();
    assert_eq!(
        answers,
        [(topic_id, 5, NONE), (unknown, -1, UNKNOWN_TOPIC_ID)]
    );

    // Every committed topic, by id; and the same offset by name at v9.
    let all: OffsetFetchResponse = call(&mut stream, ApiKey::OffsetFetch, 10, &fetch(None)).await;
    assert_eq!(all.groups[0].topics.len(), 1);
    assert_eq!(all.groups[0].topics[0].topic_id, topic_id);
    let by_name = fetch(Some(vec![OffsetFetchRequestTopics::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partition_indexes(vec![0])]));
    let v9: OffsetFetchResponse = call(&mut stream, ApiKey::OffsetFetch, 9, &by_name).await;
    assert_eq!(v9.groups[0].topics[0].partitions[0].committed_offset, 5);
}

#[tokio::test]
async fn list_offsets_answers_each_special_timestamp_from_its_version() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut stream, "t", 1).await;
    let request = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])])
    };
    for (version, timestamp, code, offset) in [
        // Earliest pending upload: nothing is tiered, so nothing waits to be.
        (11, -6, NONE, -1),
        (10, -6, UNSUPPORTED_VERSION, -1),
        (11, -5, NONE, -1),
        (8, -5, UNSUPPORTED_VERSION, -1),
        (11, -4, NONE, 0),
        (11, -7, UNSUPPORTED_VERSION, -1),
    ] {
        let answer: ListOffsetsResponse = call(
            &mut stream,
            ApiKey::ListOffsets,
            version,
            &request(timestamp),
        )
        .await;
        let partition = &answer.topics[0].partitions[0];
        assert_eq!(
            (partition.error_code, partition.offset),
            (code, offset),
            "timestamp {timestamp} at v{version}"
        );
    }
}

#[tokio::test]
async fn api_versions_v5_checks_the_cluster_and_node_the_client_meant() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let described = metadata(&mut stream, "t", 1).await;
    let cluster_id = described.cluster_id.clone().unwrap();
    let node_id = described.brokers[0].node_id.0;
    let other = StrBytes::from_static_str("another-cluster");
    for (cluster, node, code) in [
        (None, -1, NONE),
        (Some(cluster_id.clone()), node_id, NONE),
        (Some(other.clone()), node_id, REBOOTSTRAP_REQUIRED),
        (Some(cluster_id.clone()), node_id + 1, REBOOTSTRAP_REQUIRED),
        (Some(cluster_id.clone()), -1, INVALID_REQUEST),
        (None, node_id, INVALID_REQUEST),
    ] {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("test"))
            .with_client_software_version(StrBytes::from_static_str("1"))
            .with_cluster_id(cluster.clone())
            .with_node_id(node);
        let answer: ApiVersionsResponse = call(&mut stream, ApiKey::ApiVersions, 5, &request).await;
        assert_eq!(answer.error_code, code, "{cluster:?} {node}");
        assert_eq!(answer.api_keys.is_empty(), code != NONE);
    }
}
