//! The broker over real sockets with a raw protocol client: pipelining, acks=0, hostile
//! frames, version negotiation, long-poll wake-ups.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, MetadataRequest,
    MetadataResponse, ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use strand_broker::{serve, Broker, BrokerConfig};
use strand_protocol::alloc_guard::HugeAllocationGuard;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static ALLOCATOR: HugeAllocationGuard = HugeAllocationGuard;

mod common;
use common::*;

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let mut burst = BytesMut::new();
    for id in 1..=20 {
        burst.extend_from_slice(&encode_request(
            ApiKey::ApiVersions,
            3,
            id,
            &ApiVersionsRequest::default(),
        ));
    }
    stream.write_all(&burst).await.unwrap();
    for id in 1..=20 {
        let (correlation_id, mut body) =
            tokio::time::timeout(HANG_GUARD, read_response(&mut stream, 0))
                .await
                .unwrap()
                .unwrap();
        assert_eq!(correlation_id, id);
        let response = ApiVersionsResponse::decode(&mut body, 3).unwrap();
        assert_eq!(response.error_code, 0);
        assert!(response
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::Fetch as i16));
    }
    broker.handle.shutdown();
}

#[tokio::test]
async fn a_newer_api_versions_gets_unsupported_version_in_v0() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    stream
        .write_all(&encode_request(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default())[..])
        .await
        .unwrap();
    read_response(&mut stream, 0).await.unwrap();
    // Hand-made v99 request: header v2 layout with no body.
    let mut payload = BytesMut::new();
    payload.put_i16(ApiKey::ApiVersions as i16);
    payload.put_i16(99);
    payload.put_i32(8);
    payload.put_i16(-1); // null client id
    payload.put_u8(0); // no tagged fields
    let mut frame = BytesMut::new();
    frame.put_i32(payload.len() as i32);
    frame.extend_from_slice(&payload);
    stream.write_all(&frame).await.unwrap();
    let (id, mut body) = read_response(&mut stream, 0).await.unwrap();
    assert_eq!(id, 8);
    let response = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    assert_eq!(response.api_keys.len(), 1);
    assert_eq!(response.api_keys[0].max_version, 5);
}

#[tokio::test]
async fn acks_zero_gets_no_response_and_later_requests_still_match() {
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut stream, "quiet", 1).await;
    stream
        .write_all(&encode_request(
            ApiKey::Produce,
            9,
            2,
            &produce_request("quiet", 0, 0, b"v"),
        ))
        .await
        .unwrap();
    stream
        .write_all(&encode_request(
            ApiKey::Produce,
            9,
            3,
            &produce_request("quiet", 0, 1, b"w"),
        ))
        .await
        .unwrap();
    let (id, mut body) = tokio::time::timeout(HANG_GUARD, read_response(&mut stream, 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id, 3, "the acks=0 request got no response");
    let response = ProduceResponse::decode(&mut body, 9).unwrap();
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(
        (partition.error_code, partition.base_offset),
        (0, 1),
        "the acks=0 record was written first"
    );
}

#[tokio::test]
async fn hostile_frames_close_only_their_connection() {
    let broker = start().await;
    for hostile in [
        (200 * 1024 * 1024i32).to_be_bytes().to_vec(), // over socket.request.max.bytes
        (-5i32).to_be_bytes().to_vec(),                // negative size
        [&12i32.to_be_bytes()[..], &[0xff; 12]].concat(), // unknown api key
        [&6i32.to_be_bytes()[..], &[0, 3, 0, 12, 0, 0]].concat(), // too short for a header
    ] {
        let mut bad = TcpStream::connect(broker.address).await.unwrap();
        bad.write_all(&hostile).await.unwrap();
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(HANG_GUARD, bad.read(&mut buffer))
            .await
            .unwrap();
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "the hostile connection is closed"
        );
    }
    // A Produce whose topic count claims two billion entries.
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i16(1);
    body.put_i32(1000);
    body.put_i32(i32::MAX);
    let header = RequestHeader::default()
        .with_request_api_key(0)
        .with_request_api_version(3)
        .with_correlation_id(1);
    let mut payload = BytesMut::new();
    header.encode(&mut payload, 1).unwrap();
    payload.extend_from_slice(&body);
    let mut frame = BytesMut::new();
    frame.put_i32(payload.len() as i32);
    frame.extend_from_slice(&payload);
    let mut bomb = TcpStream::connect(broker.address).await.unwrap();
    bomb.write_all(&frame).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(HANG_GUARD, bomb.read(&mut buffer))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)));

    let mut good = TcpStream::connect(broker.address).await.unwrap();
    let response = metadata(&mut good, "still-alive", 1).await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "other clients are unaffected"
    );
}

#[tokio::test]
async fn a_parked_fetch_wakes_when_data_arrives() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let broker = start().await;
    let mut consumer = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut consumer, "wake", 1).await;
    let fetch = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(120_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("wake")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    consumer
        .write_all(&encode_request(ApiKey::Fetch, 11, 2, &fetch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut producer = TcpStream::connect(broker.address).await.unwrap();
    producer
        .write_all(&encode_request(
            ApiKey::Produce,
            9,
            1,
            &produce_request("wake", 0, 1, b"hello"),
        ))
        .await
        .unwrap();
    read_response(&mut producer, 1).await.unwrap();
    // The fetch asked to wait two minutes: only a wake-up returns it within the guard.
    let header_version = ApiKey::Fetch.response_header_version(11);
    let (id, mut body) =
        tokio::time::timeout(HANG_GUARD, read_response(&mut consumer, header_version))
            .await
            .expect("fetch woke")
            .unwrap();
    assert_eq!(id, 2);
    let response = FetchResponse::decode(&mut body, 11).unwrap();
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.high_watermark, 1);
    assert!(partition
        .records
        .as_ref()
        .is_some_and(|r| r.remaining() > 0));
}

#[tokio::test]
async fn fuzzed_request_bodies_never_take_the_broker_down() {
    let broker = start().await;
    let apis = strand_protocol::SUPPORTED_APIS;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut answered = (0u32, 0u32);
    for round in 0..300 {
        let api = apis[(next() % apis.len() as u64) as usize];
        let version =
            api.min_version + (next() % (api.max_version - api.min_version + 1) as u64) as i16;
        let length = (next() % 200) as usize;
        let body: Vec<u8> = (0..length).map(|_| next() as u8).collect();
        let header = RequestHeader::default()
            .with_request_api_key(api.key as i16)
            .with_request_api_version(version)
            .with_correlation_id(round);
        let mut payload = BytesMut::new();
        header
            .encode(&mut payload, api.key.request_header_version(version))
            .unwrap();
        payload.extend_from_slice(&body);
        let mut frame = BytesMut::new();
        frame.put_i32(payload.len() as i32);
        frame.extend_from_slice(&payload);
        let mut stream = TcpStream::connect(broker.address).await.unwrap();
        stream.write_all(&frame).await.unwrap();
        // Either a whole answer to this request or a closed connection; never a hang, a
        // stray frame or half an answer.
        let mut size = [0u8; 4];
        let read = tokio::time::timeout(HANG_GUARD, stream.read_exact(&mut size))
            .await
            .expect("no hang on a fuzzed request");
        if read.is_err() {
            answered.1 += 1;
            continue; // closed
        }
        let size = i32::from_be_bytes(size);
        assert!(size >= 4, "{api:?} v{version}: answer of {size} bytes");
        let mut answer = vec![0u8; size as usize];
        tokio::time::timeout(HANG_GUARD, stream.read_exact(&mut answer))
            .await
            .expect("no hang inside an answer")
            .unwrap_or_else(|e| panic!("{api:?} v{version}: answer cut short: {e}"));
        let correlation = i32::from_be_bytes(answer[..4].try_into().unwrap());
        assert_eq!(
            correlation, round,
            "{api:?} v{version}: answer to another request"
        );
        // A connection that answered still serves.
        stream
            .write_all(&encode_request(
                ApiKey::ApiVersions,
                3,
                -round,
                &ApiVersionsRequest::default(),
            ))
            .await
            .unwrap();
        let (id, _) = tokio::time::timeout(HANG_GUARD, read_response(&mut stream, 0))
            .await
            .expect("no hang after an answered fuzzed request")
            .unwrap_or_else(|| panic!("{api:?} v{version}: answered, then closed"));
        assert_eq!(id, -round);
        answered.0 += 1;
    }
    // Both outcomes happen (a fuzzer that only ever closed would check little).
    assert!(
        answered.0 > 0 && answered.1 > 0,
        "answered, closed: {answered:?}"
    );
    let mut good = TcpStream::connect(broker.address).await.unwrap();
    assert_eq!(
        metadata(&mut good, "after-fuzz", 1).await.topics[0].error_code,
        0
    );
}

#[tokio::test]
async fn shutdown_returns_parked_fetches_and_stops() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(config).unwrap();
    let (address, handle, server) = serve(broker).await.unwrap();
    let server = tokio::spawn(server);
    let mut consumer = TcpStream::connect(address).await.unwrap();
    metadata(&mut consumer, "parked", 1).await;
    let fetch = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(600_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("parked")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    consumer
        .write_all(&encode_request(ApiKey::Fetch, 11, 2, &fetch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.shutdown();
    // A ten-minute long poll must not hold the shutdown.
    tokio::time::timeout(HANG_GUARD, server)
        .await
        .expect("shutdown finished")
        .unwrap()
        .unwrap();
    assert!(dir.path().join(".strand_clean_shutdown").exists());
}

/// Every advertised version of every API, with a request that reaches its success path,
/// gets an answer: a field set that a version lacks makes kafka-protocol refuse to encode,
/// which would silently close the connection for clients on that version.
#[tokio::test]
async fn every_advertised_version_of_every_api_answers() {
    use kafka_protocol::messages::*;
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let meta = metadata(&mut stream, "t", 1).await;
    let topic_id = meta.topics[0].topic_id;
    let name = || TopicName(StrBytes::from_static_str("t"));
    let mut correlation = 100;
    for api in strand_protocol::SUPPORTED_APIS {
        for version in api.min_version..=api.max_version {
            correlation += 1;
            let frame = match api.key {
                ApiKey::Produce => {
                    let mut request = produce_request("t", 0, 1, b"v");
                    request.topic_data[0].topic_id = topic_id;
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::Fetch => {
                    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
                    let request = FetchRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_max_bytes(1 << 20)
                        .with_topics(vec![FetchTopic::default()
                            .with_topic(if version < 13 {
                                name()
                            } else {
                                TopicName::default()
                            })
                            .with_topic_id(if version >= 13 {
                                topic_id
                            } else {
                                uuid::Uuid::nil()
                            })
                            .with_partitions(vec![FetchPartition::default()
                                .with_partition(0)
                                .with_partition_max_bytes(1 << 20)])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ListOffsets => {
                    use kafka_protocol::messages::list_offsets_request::{
                        ListOffsetsPartition, ListOffsetsTopic,
                    };
                    let request = ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![ListOffsetsTopic::default()
                            .with_name(name())
                            .with_partitions(vec![
                                ListOffsetsPartition::default()
                                    .with_partition_index(0)
                                    .with_timestamp(-1),
                                ListOffsetsPartition::default()
                                    .with_partition_index(0)
                                    .with_timestamp(0),
                            ])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::Metadata => {
                    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
                    let request = MetadataRequest::default().with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(name())),
                    ]));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ApiVersions => encode_request(
                    api.key,
                    version,
                    correlation,
                    &ApiVersionsRequest::default(),
                ),
                ApiKey::CreateTopics => {
                    use kafka_protocol::messages::create_topics_request::CreatableTopic;
                    let request =
                        CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(format!(
                                "created-{version}"
                            ))))
                            .with_num_partitions(1)
                            .with_replication_factor(1)]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteTopics => {
                    let request = if version < 6 {
                        DeleteTopicsRequest::default().with_topic_names(vec![TopicName(
                            StrBytes::from_string(format!("created-{}", 2 + version % 6)),
                        )])
                    } else {
                        use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
                        DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default(
                        )
                        .with_name(Some(TopicName(StrBytes::from_static_str("created-7"))))])
                    };
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteRecords => {
                    use kafka_protocol::messages::delete_records_request::{
                        DeleteRecordsPartition, DeleteRecordsTopic,
                    };
                    let request = DeleteRecordsRequest::default().with_topics(vec![
                        DeleteRecordsTopic::default()
                            .with_name(name())
                            .with_partitions(vec![DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(0)]),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::InitProducerId => encode_request(
                    api.key,
                    version,
                    correlation,
                    &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
                ),
                ApiKey::OffsetForLeaderEpoch => {
                    use kafka_protocol::messages::offset_for_leader_epoch_request::{
                        OffsetForLeaderPartition, OffsetForLeaderTopic,
                    };
                    let request = OffsetForLeaderEpochRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![OffsetForLeaderTopic::default()
                            .with_topic(name())
                            .with_partitions(vec![OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_leader_epoch(0)])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeConfigs => {
                    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
                    let request = DescribeConfigsRequest::default()
                        .with_include_synonyms(version >= 1)
                        .with_resources(vec![
                            DescribeConfigsResource::default()
                                .with_resource_type(2)
                                .with_resource_name(StrBytes::from_static_str("t")),
                            DescribeConfigsResource::default()
                                .with_resource_type(4)
                                .with_resource_name(StrBytes::from_static_str("1")),
                        ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterConfigs => {
                    use kafka_protocol::messages::alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let request = AlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t"))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("retention.ms"))
                                .with_value(Some(StrBytes::from_static_str("100000")))]),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::CreatePartitions => {
                    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
                    let request = CreatePartitionsRequest::default().with_topics(vec![
                        CreatePartitionsTopic::default()
                            .with_name(name())
                            .with_count(1),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::IncrementalAlterConfigs => {
                    use kafka_protocol::messages::incremental_alter_configs_request::{
                        AlterConfigsResource, AlterableConfig,
                    };
                    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
                        AlterConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t"))
                            .with_configs(vec![AlterableConfig::default()
                                .with_name(StrBytes::from_static_str("retention.ms"))
                                .with_value(Some(StrBytes::from_static_str("200000")))]),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeCluster => encode_request(
                    api.key,
                    version,
                    correlation,
                    &DescribeClusterRequest::default().with_endpoint_type(1),
                ),
                ApiKey::FindCoordinator => {
                    let request = FindCoordinatorRequest::default()
                        .with_key(if version < 4 {
                            StrBytes::from_static_str("g")
                        } else {
                            StrBytes::default()
                        })
                        .with_coordinator_keys(if version >= 4 {
                            vec![StrBytes::from_static_str("g")]
                        } else {
                            vec![]
                        });
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::JoinGroup => {
                    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
                    // Static members (v5+) and v0-v3 members join at once, reaching the
                    // success path with a member list; v4 answers MEMBER_ID_REQUIRED.
                    let request = JoinGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(format!("g-{version}"))))
                        .with_session_timeout_ms(10_000)
                        .with_rebalance_timeout_ms(10_000)
                        .with_group_instance_id(
                            (version >= 5).then(|| StrBytes::from_static_str("instance")),
                        )
                        .with_protocol_type(StrBytes::from_static_str("consumer"))
                        .with_protocols(vec![JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str("range"))
                            .with_metadata(Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't']))]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::SyncGroup => {
                    let request = SyncGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("g-9")))
                        .with_member_id(StrBytes::from_static_str("nobody"));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::Heartbeat => {
                    let request = HeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("g-9")))
                        .with_member_id(StrBytes::from_static_str("nobody"));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::LeaveGroup => {
                    use kafka_protocol::messages::leave_group_request::MemberIdentity;
                    let request = LeaveGroupRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("g-9")))
                        .with_member_id(if version < 3 {
                            StrBytes::from_static_str("nobody")
                        } else {
                            StrBytes::default()
                        })
                        .with_members(if version >= 3 {
                            vec![MemberIdentity::default()
                                .with_member_id(StrBytes::from_static_str("nobody"))]
                        } else {
                            vec![]
                        });
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::OffsetCommit => {
                    use kafka_protocol::messages::offset_commit_request::{
                        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
                    };
                    let request = OffsetCommitRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("simple")))
                        .with_generation_id_or_member_epoch(-1)
                        .with_topics(vec![OffsetCommitRequestTopic::default()
                            .with_name(name())
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1)])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::OffsetFetch => {
                    let request = if version >= 8 {
                        use kafka_protocol::messages::offset_fetch_request::{
                            OffsetFetchRequestGroup, OffsetFetchRequestTopics,
                        };
                        OffsetFetchRequest::default().with_groups(vec![
                            OffsetFetchRequestGroup::default()
                                .with_group_id(GroupId(StrBytes::from_static_str("simple")))
                                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                                    .with_name(name())
                                    .with_partition_indexes(vec![0, 1])])),
                        ])
                    } else {
                        use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
                        OffsetFetchRequest::default()
                            .with_group_id(GroupId(StrBytes::from_static_str("simple")))
                            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                                .with_name(name())
                                .with_partition_indexes(vec![0, 1])]))
                    };
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ListGroups => {
                    encode_request(api.key, version, correlation, &ListGroupsRequest::default())
                }
                ApiKey::DescribeGroups => {
                    let request = DescribeGroupsRequest::default().with_groups(vec![
                        GroupId(StrBytes::from_static_str("g-9")),
                        GroupId(StrBytes::from_static_str("simple")),
                        GroupId(StrBytes::from_static_str("missing")),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteGroups => {
                    let request = DeleteGroupsRequest::default()
                        .with_groups_names(vec![GroupId(StrBytes::from_static_str("missing"))]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::OffsetDelete => {
                    use kafka_protocol::messages::offset_delete_request::{
                        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
                    };
                    let request = OffsetDeleteRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("simple")))
                        .with_topics(vec![OffsetDeleteRequestTopic::default()
                            .with_name(name())
                            .with_partitions(vec![
                                OffsetDeleteRequestPartition::default().with_partition_index(1)
                            ])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ConsumerGroupHeartbeat => {
                    let request = ConsumerGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_string(format!("kip848-{version}"))))
                        .with_member_id(StrBytes::from_string(format!("member-{version}")))
                        .with_member_epoch(0)
                        .with_rebalance_timeout_ms(30_000)
                        .with_subscribed_topic_names(Some(vec![name()]))
                        .with_topic_partitions(Some(vec![]));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ConsumerGroupDescribe => {
                    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![
                        GroupId(StrBytes::from_static_str("kip848-0")),
                        GroupId(StrBytes::from_static_str("missing")),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AddPartitionsToTxn => {
                    use kafka_protocol::messages::add_partitions_to_txn_request::{
                        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
                    };
                    let topics = vec![AddPartitionsToTxnTopic::default()
                        .with_name(name())
                        .with_partitions(vec![0])];
                    let id = TransactionalId(StrBytes::from_static_str("txn"));
                    let request = if version >= 4 {
                        AddPartitionsToTxnRequest::default().with_transactions(vec![
                            AddPartitionsToTxnTransaction::default()
                                .with_transactional_id(id)
                                .with_producer_id(ProducerId(1))
                                .with_verify_only(true)
                                .with_topics(topics),
                        ])
                    } else {
                        AddPartitionsToTxnRequest::default()
                            .with_v3_and_below_transactional_id(id)
                            .with_v3_and_below_producer_id(ProducerId(1))
                            .with_v3_and_below_topics(topics)
                    };
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AddOffsetsToTxn => {
                    let request = AddOffsetsToTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                        .with_producer_id(ProducerId(1))
                        .with_group_id(GroupId(StrBytes::from_static_str("simple")));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::EndTxn => {
                    let request = EndTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                        .with_producer_id(ProducerId(1));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::WriteTxnMarkers => {
                    use kafka_protocol::messages::write_txn_markers_request::{
                        WritableTxnMarker, WritableTxnMarkerTopic,
                    };
                    let request = WriteTxnMarkersRequest::default().with_markers(vec![
                        WritableTxnMarker::default()
                            .with_producer_id(ProducerId(424_242))
                            .with_topics(vec![WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_static_str("missing")))
                                .with_partition_indexes(vec![0])]),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::TxnOffsetCommit => {
                    use kafka_protocol::messages::txn_offset_commit_request::{
                        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
                    };
                    let request = TxnOffsetCommitRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_static_str("txn")))
                        .with_group_id(GroupId(StrBytes::from_static_str("simple")))
                        .with_producer_id(ProducerId(1))
                        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                            .with_name(name())
                            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1)])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeProducers => {
                    use kafka_protocol::messages::describe_producers_request::TopicRequest;
                    let request = DescribeProducersRequest::default().with_topics(vec![
                        TopicRequest::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 9]),
                    ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeTransactions => {
                    let request =
                        DescribeTransactionsRequest::default().with_transactional_ids(vec![
                            TransactionalId(StrBytes::from_static_str("txn")),
                        ]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ListTransactions => encode_request(
                    api.key,
                    version,
                    correlation,
                    &ListTransactionsRequest::default().with_duration_filter(-1),
                ),
                ApiKey::DescribeLogDirs => {
                    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
                    let request = kafka_protocol::messages::DescribeLogDirsRequest::default()
                        .with_topics(Some(vec![DescribableLogDirTopic::default()
                            .with_topic(name())
                            .with_partitions(vec![0])]));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::UnregisterBroker => {
                    // An id never registered: BROKER_ID_NOT_REGISTERED.
                    let request = kafka_protocol::messages::UnregisterBrokerRequest::default()
                        .with_broker_id(kafka_protocol::messages::BrokerId(99));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterReplicaLogDirs => {
                    use kafka_protocol::messages::alter_replica_log_dirs_request::{
                        AlterReplicaLogDir, AlterReplicaLogDirTopic,
                    };
                    // A path that is not a log directory: LOG_DIR_NOT_FOUND.
                    let request = kafka_protocol::messages::AlterReplicaLogDirsRequest::default()
                        .with_dirs(vec![AlterReplicaLogDir::default()
                            .with_path(StrBytes::from_static_str("/nowhere"))
                            .with_topics(vec![AlterReplicaLogDirTopic::default()
                                .with_name(name())
                                .with_partitions(vec![0])])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeTopicPartitions => {
                    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
                    let request =
                        kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                            .with_topics(vec![TopicRequest::default().with_name(name())])
                            .with_response_partition_limit(1);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ElectLeaders => {
                    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
                    let request = kafka_protocol::messages::ElectLeadersRequest::default()
                        .with_topic_partitions(Some(vec![TopicPartitions::default()
                            .with_topic(name())
                            .with_partitions(vec![0])]))
                        .with_timeout_ms(1_000);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeQuorum => {
                    use kafka_protocol::messages::describe_quorum_request::{
                        PartitionData, TopicData,
                    };
                    let request = kafka_protocol::messages::DescribeQuorumRequest::default()
                        .with_topics(vec![TopicData::default()
                            .with_topic_name(kafka_protocol::messages::TopicName(
                                StrBytes::from_static_str("__cluster_metadata"),
                            ))
                            .with_partitions(vec![PartitionData::default()])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterPartitionReassignments => {
                    use kafka_protocol::messages::alter_partition_reassignments_request::{
                        ReassignablePartition, ReassignableTopic,
                    };
                    let request =
                        kafka_protocol::messages::AlterPartitionReassignmentsRequest::default()
                            .with_topics(vec![ReassignableTopic::default()
                                .with_name(name())
                                .with_partitions(vec![ReassignablePartition::default()
                                    .with_partition_index(0)
                                    .with_replicas(Some(vec![
                                        kafka_protocol::messages::BrokerId(1),
                                    ]))])]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ListPartitionReassignments => {
                    let request =
                        kafka_protocol::messages::ListPartitionReassignmentsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::UpdateFeatures => {
                    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
                    // At the current level: a no-op (v0 has no validate_only).
                    let request = kafka_protocol::messages::UpdateFeaturesRequest::default()
                        .with_validate_only(version >= 1)
                        .with_feature_updates(vec![FeatureUpdateKey::default()
                            .with_feature(StrBytes::from_static_str("transaction.version"))
                            .with_max_version_level(2)]);
                    encode_request(api.key, version, correlation, &request)
                }
                // On a PLAINTEXT listener both answer ILLEGAL_SASL_STATE, as Kafka's do.
                ApiKey::SaslHandshake => {
                    let request = kafka_protocol::messages::SaslHandshakeRequest::default()
                        .with_mechanism(StrBytes::from_static_str("PLAIN"));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::SaslAuthenticate => {
                    let request = kafka_protocol::messages::SaslAuthenticateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeUserScramCredentials => {
                    let request =
                        kafka_protocol::messages::DescribeUserScramCredentialsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterUserScramCredentials => {
                    let request =
                        kafka_protocol::messages::AlterUserScramCredentialsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeAcls => {
                    let request = kafka_protocol::messages::DescribeAclsRequest::default()
                        .with_resource_type_filter(1)
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::CreateAcls => {
                    let request = kafka_protocol::messages::CreateAclsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteAcls => {
                    let request = kafka_protocol::messages::DeleteAclsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeClientQuotas => {
                    let request = kafka_protocol::messages::DescribeClientQuotasRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterClientQuotas => {
                    let request = kafka_protocol::messages::AlterClientQuotasRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ShareGroupHeartbeat => {
                    let request = kafka_protocol::messages::ShareGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("share")))
                        .with_member_id(StrBytes::from_static_str("m"))
                        .with_subscribed_topic_names(Some(vec![]));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ShareGroupDescribe => {
                    let request = kafka_protocol::messages::ShareGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(StrBytes::from_static_str("share"))]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ShareFetch => {
                    let request = kafka_protocol::messages::ShareFetchRequest::default()
                        .with_group_id(Some(GroupId(StrBytes::from_static_str("share"))))
                        .with_member_id(Some(StrBytes::from_static_str("m")))
                        .with_share_session_epoch(-1);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ShareAcknowledge => {
                    let request = kafka_protocol::messages::ShareAcknowledgeRequest::default()
                        .with_group_id(Some(GroupId(StrBytes::from_static_str("share"))))
                        .with_member_id(Some(StrBytes::from_static_str("m")))
                        .with_share_session_epoch(-1);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DescribeShareGroupOffsets => {
                    let request =
                        kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::AlterShareGroupOffsets => {
                    let request =
                        kafka_protocol::messages::AlterShareGroupOffsetsRequest::default()
                            .with_group_id(GroupId(StrBytes::from_static_str("share")));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteShareGroupOffsets => {
                    let request =
                        kafka_protocol::messages::DeleteShareGroupOffsetsRequest::default()
                            .with_group_id(GroupId(StrBytes::from_static_str("share")));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::InitializeShareGroupState => {
                    let request =
                        kafka_protocol::messages::InitializeShareGroupStateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ReadShareGroupState => {
                    let request = kafka_protocol::messages::ReadShareGroupStateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::WriteShareGroupState => {
                    let request = kafka_protocol::messages::WriteShareGroupStateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::DeleteShareGroupState => {
                    let request = kafka_protocol::messages::DeleteShareGroupStateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::ReadShareGroupStateSummary => {
                    let request =
                        kafka_protocol::messages::ReadShareGroupStateSummaryRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::StreamsGroupHeartbeat => {
                    let request = kafka_protocol::messages::StreamsGroupHeartbeatRequest::default()
                        .with_group_id(GroupId(StrBytes::from_static_str("streams-group")))
                        .with_member_id(StrBytes::from_static_str("m"));
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::StreamsGroupDescribe => {
                    let request = kafka_protocol::messages::StreamsGroupDescribeRequest::default()
                        .with_group_ids(vec![GroupId(StrBytes::from_static_str("streams-group"))]);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::StreamsGroupTopologyDescriptionUpdate => {
                    let request = kafka_protocol::messages::StreamsGroupTopologyDescriptionUpdateRequest::default();
                    encode_request(api.key, version, correlation, &request)
                }
                // A single node has static voters: UNSUPPORTED_VERSION, as Kafka's.
                ApiKey::AddRaftVoter => {
                    let request =
                        kafka_protocol::messages::AddRaftVoterRequest::default().with_voter_id(2);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::RemoveRaftVoter => {
                    let request = kafka_protocol::messages::RemoveRaftVoterRequest::default()
                        .with_voter_id(2);
                    encode_request(api.key, version, correlation, &request)
                }
                ApiKey::UnregisterController => {
                    let request = kafka_protocol::messages::UnregisterControllerRequest::default()
                        .with_controller_id(2);
                    encode_request(api.key, version, correlation, &request)
                }
                other => panic!("add a request for {other:?} to this test"),
            };
            stream.write_all(&frame).await.unwrap();
            let header_version = if api.key == ApiKey::ApiVersions {
                0
            } else {
                api.key.response_header_version(version)
            };
            let response =
                tokio::time::timeout(HANG_GUARD, read_response(&mut stream, header_version))
                    .await
                    .unwrap();
            let (id, _) = response.unwrap_or_else(|| {
                panic!(
                    "{:?} v{version}: connection closed instead of an answer",
                    api.key
                )
            });
            assert_eq!(id, correlation, "{:?} v{version}", api.key);
        }
    }
}

#[tokio::test]
async fn metadata_by_topic_id_ignores_an_empty_name() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let created = metadata(&mut stream, "by-id", 1).await;
    let id = created.topics[0].topic_id;
    // The Java client asks by id with name "" (not null).
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_topic_id(id)
            .with_name(Some(TopicName(StrBytes::from_static_str(""))))]));
    stream
        .write_all(&encode_request(ApiKey::Metadata, 12, 2, &request))
        .await
        .unwrap();
    let (_, mut body) = read_response(&mut stream, 1).await.unwrap();
    let response = MetadataResponse::decode(&mut body, 12).unwrap();
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(
        response.topics[0].name.as_ref().map(|n| n.as_str()),
        Some("by-id")
    );
    assert_eq!(response.topics[0].topic_id, id);
}

/// A produce to a flush-before-ack topic starts its sync when it is handled, not when the
/// connection's writer reaches its answer: pipelined produces to other partitions then
/// sync alongside it (before, each waited for the previous answer, one sync at a time).
#[tokio::test]
async fn a_deferred_produce_syncs_before_its_answer_is_awaited() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        flush: strand_broker::config::FlushMode::EveryBatch,
        ..BrokerConfig::default()
    };
    let broker = Broker::open(config).unwrap();
    broker
        .create_topic(
            "durable",
            2,
            1,
            Vec::new(),
            std::collections::BTreeMap::new(),
            false,
        )
        .await
        .unwrap();
    let peer: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    let mut answers = Vec::new();
    for partition in 0..2 {
        let frame = encode_request(
            ApiKey::Produce,
            9,
            partition,
            &produce_request("durable", partition, 1, b"v"),
        );
        let parsed = strand_protocol::parse_request_header(frame.slice(4..));
        let outcome = strand_broker::router::route(
            &broker,
            parsed,
            &strand_broker::net::RequestContext::plaintext("PLAINTEXT", peer),
        )
        .await;
        assert!(matches!(
            outcome,
            strand_broker::router::Outcome::Deferred(_)
        ));
        answers.push(outcome); // held, never polled
    }
    let guard = std::time::Instant::now() + HANG_GUARD;
    for partition in 0..2 {
        let tp = strand_log::TopicPartition::new("durable", partition);
        let gate = broker.partition(&tp).unwrap().log().sync_gate();
        while gate.durable_end_offset() < 1 {
            assert!(
                std::time::Instant::now() < guard,
                "partition {partition} never synced while its answer waited"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    drop(answers);
}

/// An answer that waits (here for its sync) keeps nothing of its request: before, the
/// deferred produce held the whole frame (up to socket.request.max.bytes) after its pool
/// reservation was returned, up to eight of them per connection.
#[tokio::test]
async fn a_deferred_produce_does_not_keep_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        flush: strand_broker::config::FlushMode::EveryBatch,
        ..BrokerConfig::default()
    };
    let broker = Broker::open(config).unwrap();
    broker
        .create_topic("kept", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let frame = encode_request(
        ApiKey::Produce,
        9,
        1,
        &produce_request("kept", 0, 1, &[7u8; 100_000]),
    );
    // A buffer of its own, as the connection reads one (not a slice of `frame`).
    let body = Bytes::copy_from_slice(&frame[4..]);
    let parsed = strand_protocol::parse_request_header(body.clone());
    let peer: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    let outcome = strand_broker::router::route(
        &broker,
        parsed,
        &strand_broker::net::RequestContext::plaintext("PLAINTEXT", peer),
    )
    .await;
    let strand_broker::router::Outcome::Deferred(answer) = outcome else {
        panic!("a flush-before-ack produce answers later");
    };
    assert!(
        body.is_unique(),
        "the waiting answer holds no reference to the request's buffer"
    );
    let strand_broker::router::Outcome::Respond(bytes) =
        tokio::time::timeout(HANG_GUARD, answer).await.unwrap()
    else {
        panic!("answered");
    };
    let mut bytes = bytes.slice(4..);
    let header = kafka_protocol::messages::ResponseHeader::decode(&mut bytes, 1).unwrap();
    assert_eq!(header.correlation_id, 1);
    let response = ProduceResponse::decode(&mut bytes, 9).unwrap();
    assert_eq!(response.responses[0].name.as_str(), "kept");
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
}

/// KIP-320 on the leader: a fetch whose last fetched epoch ends before its fetch offset
/// in our log is told the diverging epoch, with no records and no error; one that agrees
/// reads on.
#[tokio::test]
async fn a_fetch_past_its_epochs_end_gets_the_diverging_epoch() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let broker = start().await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut stream, "epochs", 1).await;
    for id in 2..5 {
        let request = encode_request(
            ApiKey::Produce,
            9,
            id,
            &produce_request("epochs", 0, 1, b"v"),
        );
        stream.write_all(&request).await.unwrap();
        read_response(&mut stream, 1).await.unwrap();
    }
    let fetch = |offset: i64, last_fetched_epoch: i32| {
        FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("epochs")))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(last_fetched_epoch)
                    .with_partition_max_bytes(1 << 20)])])
    };
    for (id, offset, last_epoch, diverging) in [
        (10, 10, 0, Some((0, 3))), // epoch 0 ends at 3 here: truncate to 3
        (11, 1, 0, None),          // agrees: records
        (12, 1, 7, None),          // an epoch newer than ours: undefined, read on
    ] {
        let request = encode_request(ApiKey::Fetch, 12, id, &fetch(offset, last_epoch));
        stream.write_all(&request).await.unwrap();
        let (_, mut body) = read_response(&mut stream, 1).await.unwrap();
        let response = FetchResponse::decode(&mut body, 12).unwrap();
        let partition = &response.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        let got = (partition.diverging_epoch.epoch >= 0).then_some((
            partition.diverging_epoch.epoch,
            partition.diverging_epoch.end_offset,
        ));
        assert_eq!(got, diverging, "fetch at {offset} after epoch {last_epoch}");
        let has_records = partition.records.as_ref().is_some_and(|r| !r.is_empty());
        assert_eq!(has_records, diverging.is_none());
        assert_eq!(partition.high_watermark, 3);
    }
}
