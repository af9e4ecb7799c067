//! Share groups (KIP-932) over the wire: membership by ShareGroupHeartbeat, records
//! handed to one member at a time by ShareFetch, settled by acknowledgements, released
//! by a closed session, and the share-partition's state surviving a restart (kept by
//! the share coordinator in __share_group_state).

mod common;

use common::{call, open_broker, produce_request};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteGroupsRequest,
    DeleteGroupsResponse, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, ListGroupsRequest,
    ListGroupsResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetCommitResponse, ProduceResponse,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use strand_broker::serve;
use tokio::net::TcpStream;

use uuid::Uuid;

const INVALID_REQUEST: i16 = 42;
const GROUP_ID_NOT_FOUND: i16 = 69;
const INVALID_RECORD_STATE: i16 = 121;
const SHARE_SESSION_NOT_FOUND: i16 = 122;
const INVALID_SHARE_SESSION_EPOCH: i16 = 123;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn topic_id(stream: &mut TcpStream, topic: &str) -> Uuid {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let response: MetadataResponse = call(
        stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
        ])),
    )
    .await;
    response.topics[0].topic_id
}

async fn produce(stream: &mut TcpStream, topic: &str, values: &[&str]) {
    for value in values {
        let response: ProduceResponse = call(
            stream,
            ApiKey::Produce,
            9,
            &produce_request(topic, 0, -1, value.as_bytes()),
        )
        .await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
}

async fn heartbeat(
    stream: &mut TcpStream,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatResponse {
    call(
        stream,
        ApiKey::ShareGroupHeartbeat,
        1,
        &ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(s(member))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(
                topics.map(|t| t.iter().map(|n| TopicName(s(n))).collect()),
            ),
    )
    .await
}

/// A ShareFetch of partition 0 of `topic` for `member` at `epoch`, carrying `acks`.
async fn share_fetch(
    stream: &mut TcpStream,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: Vec<(i64, i64, Vec<i8>)>,
    max_records: i32,
) -> ShareFetchResponse {
    call(
        stream,
        ApiKey::ShareFetch,
        1,
        &ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s("g"))))
            .with_member_id(Some(s(member)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(max_records)
            .with_batch_size(max_records)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(
                        acks.into_iter()
                            .map(|(first, last, types)| {
                                AcknowledgementBatch::default()
                                    .with_first_offset(first)
                                    .with_last_offset(last)
                                    .with_acknowledge_types(types)
                            })
                            .collect(),
                    )])]),
    )
    .await
}

async fn share_ack(
    stream: &mut TcpStream,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: Vec<(i64, i64, Vec<i8>)>,
) -> ShareAcknowledgeResponse {
    call(
        stream,
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("g"))))
            .with_member_id(Some(s(member)))
            .with_share_session_epoch(epoch)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(
                        acks.into_iter()
                            .map(|(first, last, types)| {
                                AckBatch::default()
                                    .with_first_offset(first)
                                    .with_last_offset(last)
                                    .with_acknowledge_types(types)
                            })
                            .collect(),
                    )])]),
    )
    .await
}

/// (first, last, delivery count) of what a fetch acquired on its one partition.
fn acquired(response: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(response.error_code, 0, "{response:?}");
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.acquired_records.iter())
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

#[tokio::test]
async fn records_go_to_one_member_at_a_time_and_their_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();
    let mut b = TcpStream::connect(address).await.unwrap();
    let topic = topic_id(&mut a, "t").await;

    // Membership: both members get partition 0 (one partition, two members: shared).
    let joined = heartbeat(&mut a, "member-a", 0, Some(&["t"])).await;
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1));
    let assignment = joined.assignment.expect("sent on join");
    assert_eq!(assignment.topic_partitions[0].topic_id, topic);
    let joined = heartbeat(&mut b, "member-b", 0, Some(&["t"])).await;
    assert_eq!(
        joined.assignment.unwrap().topic_partitions[0].partitions,
        [0]
    );
    let described: ShareGroupDescribeResponse = call(
        &mut a,
        ApiKey::ShareGroupDescribe,
        1,
        &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
    )
    .await;
    let group = &described.groups[0];
    assert_eq!(
        (
            group.error_code,
            group.group_state.as_str(),
            group.members.len()
        ),
        (0, "Stable", 2)
    );
    assert_eq!(group.assignor_name.as_str(), "simple");

    // share.auto.offset.reset=latest: a share-partition starts at the end of the log,
    // so only what is produced after the first fetch is delivered.
    produce(&mut a, "t", &["before"]).await;
    assert!(acquired(&share_fetch(&mut a, "member-a", 0, topic, vec![], 500).await).is_empty());
    assert!(acquired(&share_fetch(&mut b, "member-b", 0, topic, vec![], 500).await).is_empty());
    produce(&mut a, "t", &["r1", "r2", "r3", "r4", "r5", "r6"]).await;

    // Each produce made a batch of one record: a takes three, b the next three.
    let got = share_fetch(&mut a, "member-a", 1, topic, vec![], 3).await;
    assert_eq!(acquired(&got), [(1, 3, 1)]);
    let records = got.responses[0].partitions[0].records.clone().unwrap();
    assert!(!records.is_empty());
    assert_eq!(got.acquisition_lock_timeout_ms, 30_000);
    assert_eq!(
        acquired(&share_fetch(&mut b, "member-b", 1, topic, vec![], 500).await),
        [(4, 6, 1)]
    );

    // b may not settle a's records; a releases 1 and accepts 2..3 (one type per offset).
    let refused = share_ack(&mut b, "member-b", 2, topic, vec![(1, 1, vec![1])]).await;
    assert_eq!(
        refused.responses[0].partitions[0].error_code,
        INVALID_RECORD_STATE
    );
    let settled = share_ack(&mut a, "member-a", 2, topic, vec![(1, 3, vec![2, 1, 1])]).await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);
    // The released record goes to b, delivered a second time; b's own acks ride along.
    let got = share_fetch(&mut b, "member-b", 3, topic, vec![(4, 5, vec![1])], 500).await;
    assert_eq!(acquired(&got), [(1, 1, 2)]);
    assert_eq!(got.responses[0].partitions[0].acknowledge_error_code, 0);

    // Session rules, as Kafka answers them.
    let wrong_epoch = share_fetch(&mut a, "member-a", 7, topic, vec![], 500).await;
    assert_eq!(wrong_epoch.error_code, INVALID_SHARE_SESSION_EPOCH);
    let no_session = share_fetch(&mut a, "member-x", 1, topic, vec![], 500).await;
    assert_eq!(no_session.error_code, SHARE_SESSION_NOT_FOUND);
    let acks_on_open = share_fetch(&mut a, "member-x", 0, topic, vec![(1, 1, vec![1])], 500).await;
    assert_eq!(acks_on_open.error_code, INVALID_REQUEST);

    // b closes its session holding 1 and 6: they go back to the others.
    let closed = share_ack(&mut b, "member-b", -1, topic, vec![]).await;
    assert_eq!(closed.error_code, 0);
    let got = share_fetch(&mut a, "member-a", 3, topic, vec![], 500).await;
    assert_eq!(acquired(&got), [(1, 1, 3), (6, 6, 2)]);
    let settled = share_ack(&mut a, "member-a", 4, topic, vec![(1, 1, vec![1])]).await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);

    // Another id's group kinds stay apart: a share group id is not a consumer group.
    let commit: OffsetCommitResponse = call(
        &mut a,
        ApiKey::OffsetCommit,
        9,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1),
                    ]),
            ]),
    )
    .await;
    assert_eq!(
        commit.topics[0].partitions[0].error_code,
        GROUP_ID_NOT_FOUND
    );
    let described: DescribeGroupsResponse = call(
        &mut a,
        ApiKey::DescribeGroups,
        6,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
    )
    .await;
    assert_eq!(
        (
            described.groups[0].error_code,
            described.groups[0].group_state.as_str()
        ),
        (GROUP_ID_NOT_FOUND, "Dead")
    );

    drop((a, b));
    handle.shutdown();
    served.await.unwrap().unwrap();
    drop(broker);

    // After a restart the share-partition resumes from its persisted state: 1..5 are
    // settled, 6 was held by a (whose lock did not survive) and is delivered again, with
    // the deliveries counted so far.
    let broker = open_broker(dir.path(), |_| {});
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut c = TcpStream::connect(address).await.unwrap();
    produce(&mut c, "t", &["r7"]).await;
    let mut got = acquired(&share_fetch(&mut c, "member-c", 0, topic, vec![], 500).await);
    if got.len() == 1 {
        // The restart rolled a segment: one read stops at its end, as Fetch's does.
        got.extend(acquired(
            &share_fetch(&mut c, "member-c", 1, topic, vec![], 500).await,
        ));
    }
    assert_eq!(got, [(6, 6, 3), (7, 7, 1)]);
    drop(c);
    handle.shutdown();
    served.await.unwrap().unwrap();
}

/// (partition, start offset, lag) of group "g" on its one topic, as
/// DescribeShareGroupOffsets answers (every initialized partition).
async fn start_offsets(stream: &mut TcpStream) -> Vec<(i32, i64, i64)> {
    let described: DescribeShareGroupOffsetsResponse = call(
        stream,
        ApiKey::DescribeShareGroupOffsets,
        1,
        &DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(s("g")))
                .with_topics(None),
        ]),
    )
    .await;
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    group
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.start_offset, p.lag))
        .collect()
}

#[tokio::test]
async fn admins_describe_reset_and_delete_a_share_groups_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();
    let topic = topic_id(&mut a, "t").await;
    heartbeat(&mut a, "member-a", 0, Some(&["t"])).await;
    assert!(acquired(&share_fetch(&mut a, "member-a", 0, topic, vec![], 500).await).is_empty());
    produce(&mut a, "t", &["r0", "r1", "r2", "r3"]).await;
    assert_eq!(
        acquired(&share_fetch(&mut a, "member-a", 1, topic, vec![], 2).await),
        [(0, 1, 1)]
    );
    let settled = share_ack(&mut a, "member-a", 2, topic, vec![(0, 1, vec![1])]).await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);
    // Start offset 2; lag = 4 (end) - 2 - 0 settled after it.
    assert_eq!(start_offsets(&mut a).await, [(0, 2, 2)]);

    // The group is listed as a share group; with a member it cannot be reset.
    let listed: ListGroupsResponse = call(
        &mut a,
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default().with_types_filter(vec![s("share")]),
    )
    .await;
    let listed: Vec<(&str, &str, &str)> = listed
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.as_str(),
                g.group_type.as_str(),
                g.group_state.as_str(),
            )
        })
        .collect();
    assert_eq!(listed, [("g", "share", "Stable")]);
    let alter = |offset: i64| {
        AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s("t")))
                .with_partitions(vec![
                    AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(0)
                        .with_start_offset(offset),
                ])])
    };
    let refused: AlterShareGroupOffsetsResponse =
        call(&mut a, ApiKey::AlterShareGroupOffsets, 0, &alter(0)).await;
    assert_eq!(refused.error_code, 68, "NON_EMPTY_GROUP");
    let left = heartbeat(&mut a, "member-a", -1, None).await;
    assert_eq!(left.member_epoch, -1);
    drop(a);

    // Empty: reset to 1, and the records from there are delivered again.
    let mut b = TcpStream::connect(address).await.unwrap();
    let altered: AlterShareGroupOffsetsResponse =
        call(&mut b, ApiKey::AlterShareGroupOffsets, 0, &alter(1)).await;
    assert_eq!(altered.error_code, 0);
    assert_eq!(altered.responses[0].partitions[0].error_code, 0);
    assert_eq!(start_offsets(&mut b).await, [(0, 1, 3)]);
    let got = share_fetch(&mut b, "member-b", 0, topic, vec![], 500).await;
    assert_eq!(acquired(&got), [(1, 3, 1)]);
    let closed = share_ack(&mut b, "member-b", -1, topic, vec![(1, 3, vec![1])]).await;
    assert_eq!(closed.responses[0].partitions[0].error_code, 0);
    drop(b);
    handle.shutdown();
    served.await.unwrap().unwrap();
    drop(broker);

    // The group and its start offset survive a restart; then its offsets and the group
    // are deleted.
    let broker = open_broker(dir.path(), |_| {});
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut c = TcpStream::connect(address).await.unwrap();
    assert_eq!(start_offsets(&mut c).await, [(0, 4, 0)]);
    let deleted: DeleteShareGroupOffsetsResponse = call(
        &mut c,
        ApiKey::DeleteShareGroupOffsets,
        0,
        &DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![
                DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(TopicName(s("t")))
            ]),
    )
    .await;
    assert_eq!(
        (deleted.error_code, deleted.responses[0].error_code),
        (0, 0)
    );
    assert!(start_offsets(&mut c).await.is_empty());
    let again: DeleteShareGroupOffsetsResponse = call(
        &mut c,
        ApiKey::DeleteShareGroupOffsets,
        0,
        &DeleteShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![
                DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(TopicName(s("t")))
            ]),
    )
    .await;
    assert_eq!(
        again.responses[0].error_code, 3,
        "no offsets left to delete"
    );
    let gone: DeleteGroupsResponse = call(
        &mut c,
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]),
    )
    .await;
    assert_eq!(gone.results[0].error_code, 0);
    let listed: ListGroupsResponse =
        call(&mut c, ApiKey::ListGroups, 5, &ListGroupsRequest::default()).await;
    assert!(listed.groups.is_empty());
    drop(c);
    handle.shutdown();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn members_loading_a_share_partition_at_once_never_get_the_same_record() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();
    let topic = topic_id(&mut a, "t").await;
    assert!(acquired(&share_fetch(&mut a, "member-a", 0, topic, vec![], 500).await).is_empty());
    produce(
        &mut a,
        "t",
        &["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"],
    )
    .await;
    // The group's last session here closes: its share-partitions are unloaded.
    assert_eq!(
        share_ack(&mut a, "member-a", -1, topic, vec![])
            .await
            .error_code,
        0
    );
    for round in 0..5 {
        let mut b = TcpStream::connect(address).await.unwrap();
        let mut c = TcpStream::connect(address).await.unwrap();
        let (got_b, got_c) = tokio::join!(
            share_fetch(&mut b, "member-b", 0, topic, vec![], 500),
            share_fetch(&mut c, "member-c", 0, topic, vec![], 500),
        );
        let (got_b, got_c) = (acquired(&got_b), acquired(&got_c));
        let offsets = |runs: &[(i64, i64, i16)]| -> Vec<i64> {
            runs.iter().flat_map(|(f, l, _)| *f..=*l).collect()
        };
        let (ob, oc) = (offsets(&got_b), offsets(&got_c));
        assert!(
            ob.iter().all(|o| !oc.contains(o)),
            "round {round}: {ob:?} and {oc:?}"
        );
        assert_eq!(
            ob.len() + oc.len(),
            8,
            "round {round}: every record to one of them"
        );
        // Both sessions close: everything goes back, and the share-partition is unloaded.
        assert_eq!(
            share_ack(&mut b, "member-b", -1, topic, vec![])
                .await
                .error_code,
            0
        );
        assert_eq!(
            share_ack(&mut c, "member-c", -1, topic, vec![])
                .await
                .error_code,
            0
        );
    }
    drop(a);
    handle.shutdown();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_share_fetch_of_data_not_in_the_page_cache_never_waits_for_the_disk_on_a_worker() {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // Reads of this test's partition miss the page cache until one has missed: a read
    // allowed to wait (the warm, on a blocking thread) then finds it cached.
    let cold = Arc::new(AtomicBool::new(true));
    let misses = Arc::new(AtomicUsize::new(0));
    let (hook_cold, hook_misses) = (cold.clone(), misses.clone());
    strand_log::fault_injection::set_read_hook(Some(Box::new(move |file, no_wait| {
        let path =
            std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or_default();
        if !path.to_string_lossy().contains("cold-share-0") || !hook_cold.load(Ordering::SeqCst) {
            return true;
        }
        if no_wait {
            hook_misses.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        hook_cold.store(false, Ordering::SeqCst);
        true
    })));
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    broker
        .create_topic("cold-share", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let served = tokio::spawn(server);
    let mut a = TcpStream::connect(address).await.unwrap();
    let topic = topic_id(&mut a, "cold-share").await;
    cold.store(false, Ordering::SeqCst);
    assert!(acquired(&share_fetch(&mut a, "member-a", 0, topic, vec![], 500).await).is_empty());
    produce(&mut a, "cold-share", &["r0", "r1"]).await;
    cold.store(true, Ordering::SeqCst);
    // The read misses, its data is warmed off the worker, and the parked fetch wakes to
    // acquire it.
    let got = share_fetch(&mut a, "member-a", 1, topic, vec![], 500).await;
    strand_log::fault_injection::set_read_hook(None);
    assert_eq!(acquired(&got), [(0, 1, 1)]);
    assert!(
        misses.load(Ordering::SeqCst) >= 1,
        "the share read went to the disk on a runtime worker"
    );
    drop(a);
    handle.shutdown();
    served.await.unwrap().unwrap();
}
