//! Streams groups (KIP-1071) over the wire: a topology sent by StreamsGroupHeartbeat, the
//! internal topics the broker creates for it, tasks handed out once they exist, the
//! group as StreamsGroupDescribe and ListGroups show it, the offset-commit rules of its
//! members, Kafka's refusals, and the group surviving a restart (its records in
//! __consumer_offsets).

mod common;

use std::time::Duration;

use common::{call, open_broker};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::streams_group_heartbeat_request::{
    Subtopology, TaskIds, TopicInfo, Topology,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId,
    ListGroupsRequest, ListGroupsResponse, MetadataRequest, MetadataResponse, OffsetCommitRequest,
    OffsetCommitResponse, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse,
    StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strand_broker::serve;
use tokio::net::TcpStream;

const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNSUPPORTED_VERSION: i16 = 35;
const STALE_MEMBER_EPOCH: i16 = 113;
const UNKNOWN_MEMBER_ID: i16 = 25;
const STREAMS_INVALID_TOPOLOGY: i16 = 130;
const STATUS_MISSING_INTERNAL_TOPICS: i8 = 3;
const REPARTITION: &str = "wc-counts-repartition";
const CHANGELOG: &str = "wc-counts-changelog";

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// Kafka Streams' word count: read "in", repartition by word, count into a store.
fn word_count() -> Topology {
    let internal = |name: &str, policy: &str| {
        TopicInfo::default()
            .with_name(TopicName(s(name)))
            .with_replication_factor(-1)
            .with_topic_configs(vec![
                kafka_protocol::messages::streams_group_heartbeat_request::KeyValue::default()
                    .with_key(s("cleanup.policy"))
                    .with_value(s(policy)),
            ])
    };
    Topology::default().with_subtopologies(vec![
        Subtopology::default()
            .with_subtopology_id(s("0"))
            .with_source_topics(vec![TopicName(s("in"))])
            .with_repartition_sink_topics(vec![TopicName(s(REPARTITION))]),
        Subtopology::default()
            .with_subtopology_id(s("1"))
            .with_repartition_source_topics(vec![internal(REPARTITION, "delete")])
            .with_state_changelog_topics(vec![internal(CHANGELOG, "compact")]),
    ])
}

fn join(member: &str) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("wc")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_endpoint_information_epoch(-1)
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(word_count()))
        .with_process_id(Some(s(&format!("process-{member}"))))
        .with_active_tasks(Some(vec![]))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(vec![]))
}

fn beat(member: &str, epoch: i32, active: Option<Vec<TaskIds>>) -> StreamsGroupHeartbeatRequest {
    let request = StreamsGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("wc")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_endpoint_information_epoch(0)
        .with_rebalance_timeout_ms(-1);
    match active {
        Some(active) => request
            .with_active_tasks(Some(active))
            .with_standby_tasks(Some(vec![]))
            .with_warmup_tasks(Some(vec![])),
        None => request,
    }
}

async fn heartbeat(
    stream: &mut TcpStream,
    request: &StreamsGroupHeartbeatRequest,
) -> StreamsGroupHeartbeatResponse {
    call(stream, ApiKey::StreamsGroupHeartbeat, 1, request).await
}

async fn topic_partitions(stream: &mut TcpStream, topic: &str) -> Option<usize> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let response: MetadataResponse = call(
        stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
            ]))
            .with_allow_auto_topic_creation(false),
    )
    .await;
    let topic = &response.topics[0];
    (topic.error_code == 0).then_some(topic.partitions.len())
}

fn task_count(
    tasks: &Option<Vec<kafka_protocol::messages::streams_group_heartbeat_response::TaskIds>>,
) -> usize {
    tasks.iter().flatten().map(|t| t.partitions.len()).sum()
}

fn wire_tasks(
    tasks: &Option<Vec<kafka_protocol::messages::streams_group_heartbeat_response::TaskIds>>,
) -> Vec<TaskIds> {
    tasks
        .iter()
        .flatten()
        .map(|t| {
            TaskIds::default()
                .with_subtopology_id(t.subtopology_id.clone())
                .with_partitions(t.partitions.clone())
        })
        .collect()
}

async fn commit(stream: &mut TcpStream, member: &str, epoch: i32) -> i16 {
    let response: OffsetCommitResponse = call(
        stream,
        ApiKey::OffsetCommit,
        9,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(s("wc")))
            .with_member_id(s(member))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])]),
    )
    .await;
    response.topics[0].partitions[0].error_code
}

/// OffsetFetch v9 of "in"-0 for group "wc" as `member` at `epoch`: (group error, offset).
async fn fetch(stream: &mut TcpStream, member: Option<&str>, epoch: i32) -> (i16, i64) {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
    let response: OffsetFetchResponse = call(
        stream,
        ApiKey::OffsetFetch,
        9,
        &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("wc")))
            .with_member_id(member.map(s))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(s("in")))
                .with_partition_indexes(vec![0])]))]),
    )
    .await;
    let group = &response.groups[0];
    let offset = group
        .topics
        .first()
        .map_or(-1, |t| t.partitions[0].committed_offset);
    (group.error_code, offset)
}

async fn describe(stream: &mut TcpStream) -> StreamsGroupDescribeResponse {
    call(
        stream,
        ApiKey::StreamsGroupDescribe,
        1,
        &StreamsGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("wc")), GroupId(s("nope"))])
            .with_include_topology_description(true),
    )
    .await
}

#[tokio::test]
async fn a_streams_application_gets_its_internal_topics_and_tasks_and_keeps_them_across_a_restart()
{
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |c| {
        c.group_streams_initial_rebalance_delay_ms = 0;
        c.group_streams_assignment_interval_ms = 0;
    });
    broker
        .create_topic("in", 3, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();

    // Refusals first, in Kafka's words.
    let mut bad = join("m1");
    bad.active_tasks = None;
    let refused = heartbeat(&mut a, &bad).await;
    assert_eq!(
        (
            refused.error_code,
            refused.error_message.as_ref().map(|m| m.as_str())
        ),
        (
            INVALID_REQUEST,
            Some("ActiveTasks must be empty when (re-)joining.")
        )
    );
    let partial = beat("m1", 3, None).with_standby_tasks(Some(vec![]));
    let refused = heartbeat(&mut a, &partial).await;
    assert_eq!(
        refused.error_message.as_ref().map(|m| m.as_str()),
        Some("If one task-type is non-null, all must be non-null.")
    );
    let mut internal = join("m1");
    internal.topology.as_mut().unwrap().subtopologies[0].source_topics =
        vec![TopicName(s("__consumer_offsets"))];
    let refused = heartbeat(&mut a, &internal).await;
    assert_eq!(refused.error_code, STREAMS_INVALID_TOPOLOGY);
    let unknown = heartbeat(&mut a, &beat("m1", 3, None)).await;
    assert_eq!(
        (
            unknown.error_code,
            unknown.error_message.as_ref().map(|m| m.as_str())
        ),
        (GROUP_ID_NOT_FOUND, Some("Streams group wc not found."))
    );

    // The first join: no tasks yet, the internal topics are missing and being created.
    let joined = heartbeat(&mut a, &join("m1")).await;
    // Without an initial delay the (empty) target is computed at once: the join's epoch.
    assert_eq!((joined.error_code, joined.member_epoch), (0, 2));
    let statuses: Vec<i8> = joined
        .status
        .iter()
        .flatten()
        .map(|st| st.status_code)
        .collect();
    assert_eq!(statuses, [STATUS_MISSING_INTERNAL_TOPICS]);
    assert_eq!(task_count(&joined.active_tasks), 0);
    assert_eq!(joined.acceptable_recovery_lag, 10_000);
    let mut created = false;
    for _ in 0..200 {
        if topic_partitions(&mut a, REPARTITION).await == Some(3)
            && topic_partitions(&mut a, CHANGELOG).await == Some(3)
        {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        created,
        "the broker created both internal topics with 3 partitions"
    );

    // Now ready: every task (3 per subtopology) at a new epoch.
    let ready = heartbeat(&mut a, &beat("m1", 2, Some(vec![]))).await;
    assert_eq!(ready.error_code, 0);
    assert!(ready.status.iter().flatten().next().is_none());
    assert_eq!(task_count(&ready.active_tasks), 6);
    let epoch = ready.member_epoch;
    assert!(epoch > 2, "the topics' arrival is a new epoch");
    assert_eq!(commit(&mut a, "m1", epoch).await, 0);
    assert_eq!(commit(&mut a, "m1", epoch + 1).await, STALE_MEMBER_EPOCH);
    // OffsetFetch v9+ naming a member: it must be one, at its epoch (an admin names none).
    assert_eq!(fetch(&mut a, Some("m1"), epoch).await, (0, 5));
    assert_eq!(
        fetch(&mut a, Some("m1"), epoch - 1).await.0,
        STALE_MEMBER_EPOCH
    );
    assert_eq!(fetch(&mut a, Some("m9"), epoch).await.0, UNKNOWN_MEMBER_ID);
    assert_eq!(fetch(&mut a, None, -1).await, (0, 5));

    let described = describe(&mut a).await;
    let group = &described.groups[0];
    assert_eq!(
        (
            group.error_code,
            group.group_state.as_str(),
            group.group_epoch,
            group.members.len()
        ),
        (0, "Stable", epoch, 1)
    );
    assert_eq!(group.assignor_name.as_ref().unwrap().as_str(), "sticky");
    assert_eq!(
        group.topology_description_status, 1,
        "no description stored"
    );
    let subtopologies = group
        .topology
        .as_ref()
        .unwrap()
        .subtopologies
        .as_ref()
        .unwrap();
    assert_eq!(subtopologies[1].state_changelog_topics[0].partitions, 3);
    assert_eq!(
        (
            described.groups[1].error_code,
            described.groups[1]
                .error_message
                .as_ref()
                .map(|m| m.as_str())
        ),
        (GROUP_ID_NOT_FOUND, Some("Group nope not found."))
    );
    let listed: ListGroupsResponse = call(
        &mut a,
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![s("Streams")]),
    )
    .await;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(
        (
            listed.groups[0].group_type.as_str(),
            listed.groups[0].protocol_type.as_str()
        ),
        ("streams", "streams")
    );

    // Another kind of group may not take the id.
    let consumer: ConsumerGroupHeartbeatResponse = call(
        &mut a,
        ApiKey::ConsumerGroupHeartbeat,
        1,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s("wc")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(1000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("in"))])),
    )
    .await;
    assert_eq!(consumer.error_code, GROUP_ID_NOT_FOUND);
    let update: StreamsGroupTopologyDescriptionUpdateResponse = call(
        &mut a,
        ApiKey::StreamsGroupTopologyDescriptionUpdate,
        0,
        &StreamsGroupTopologyDescriptionUpdateRequest::default()
            .with_group_id(GroupId(s("wc")))
            .with_member_id(s("m1")),
    )
    .await;
    assert_eq!(update.error_code, UNSUPPORTED_VERSION);

    drop(a);
    handle.shutdown();
    served.await.unwrap().unwrap();
    drop(broker);

    // After a restart the member carries on at its epoch with its tasks: the group was
    // rebuilt from its records.
    let broker = open_broker(dir.path(), |c| {
        c.group_streams_initial_rebalance_delay_ms = 0;
        c.group_streams_assignment_interval_ms = 0;
    });
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut b = TcpStream::connect(address).await.unwrap();
    let owned = wire_tasks(&ready.active_tasks);
    let again = heartbeat(&mut b, &beat("m1", epoch, Some(owned))).await;
    assert_eq!((again.error_code, again.member_epoch), (0, epoch));
    assert_eq!(again.active_tasks, None, "nothing changed");
    let described = describe(&mut b).await;
    assert_eq!(described.groups[0].members.len(), 1);
    let assigned = &described.groups[0].members[0].assignment.active_tasks;
    assert_eq!(
        assigned.iter().map(|t| t.partitions.len()).sum::<usize>(),
        6
    );
    // Leaving empties the group; the next join finds the same topology.
    let left = heartbeat(&mut b, &beat("m1", -1, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    assert_eq!(
        describe(&mut b).await.groups[0].group_state.as_str(),
        "Empty"
    );
    drop(b);
    handle.shutdown();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_streams_protocol_is_off_while_streams_version_is_zero() {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();
    let downgraded: UpdateFeaturesResponse = call(
        &mut a,
        ApiKey::UpdateFeatures,
        1,
        &UpdateFeaturesRequest::default().with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(s("streams.version"))
            .with_max_version_level(0)
            .with_upgrade_type(2)]),
    )
    .await;
    assert_eq!(downgraded.error_code, 0);
    assert_eq!(
        heartbeat(&mut a, &join("m1")).await.error_code,
        UNSUPPORTED_VERSION
    );
    let described = describe(&mut a).await;
    assert_eq!(described.groups[0].error_code, UNSUPPORTED_VERSION);
    drop(a);
    handle.shutdown();
    served.await.unwrap().unwrap();
}
