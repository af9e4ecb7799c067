//! Shared by the broker's socket tests: a broker on a free port and a raw protocol
//! client (encode a request, read a response frame).
#![allow(dead_code)] // each test binary uses its own subset

pub mod listeners;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, ProduceRequest, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use strand_broker::{serve, Broker, BrokerConfig};
use strand_records::{BatchBuilder, Record};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A guard against hangs, not a performance assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(30);

pub struct TestBroker {
    pub address: std::net::SocketAddr,
    pub _dir: tempfile::TempDir,
    pub handle: strand_broker::ServerHandle,
    pub served: tokio::task::JoinHandle<()>,
}

impl TestBroker {
    /// Stops serving and waits until the broker has let go of its data directory.
    pub async fn stop(self) {
        self.handle.shutdown();
        tokio::time::timeout(HANG_GUARD, self.served)
            .await
            .expect("the broker stops")
            .unwrap();
    }
}

pub async fn start() -> TestBroker {
    start_with(|_| {}).await
}

/// A broker with the test defaults, then `adjust` applied to its config.
pub async fn start_with(adjust: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        group_initial_rebalance_delay_ms: 0,
        ..BrokerConfig::default()
    };
    adjust(&mut config);
    let broker = Broker::open(config).unwrap();
    let (address, handle, server) = serve(broker).await.unwrap();
    let served = tokio::spawn(async move {
        let _ = server.await;
    });
    TestBroker {
        address,
        _dir: dir,
        handle,
        served,
    }
}

/// A broker on `dir` with the defaults and `adjust` applied, not serving yet (tests that
/// drive partitions directly, or serve it themselves).
pub fn open_broker(
    dir: &std::path::Path,
    adjust: impl FnOnce(&mut BrokerConfig),
) -> std::sync::Arc<Broker> {
    let mut config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    };
    adjust(&mut config);
    Broker::open(config).unwrap()
}

pub fn encode_request<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Bytes {
    encode_request_from("raw-test", key, version, correlation_id, body)
}

/// A request frame from the client `client_id`.
pub fn encode_request_from<T: Encodable>(
    client_id: &str,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut payload = BytesMut::new();
    header
        .encode(&mut payload, key.request_header_version(version))
        .unwrap();
    body.encode(&mut payload, version)
        .unwrap_or_else(|e| panic!("encoding {key:?} v{version}: {e}"));
    let mut frame = BytesMut::new();
    frame.put_i32(payload.len() as i32);
    frame.extend_from_slice(&payload);
    frame.freeze()
}

/// Reads one response frame; returns (correlation id, body) decoded with `header_version`.
pub async fn read_response(stream: &mut TcpStream, header_version: i16) -> Option<(i32, Bytes)> {
    let size = stream.read_i32().await.ok()?;
    let mut frame = vec![0u8; size as usize];
    stream.read_exact(&mut frame).await.ok()?;
    let mut frame = Bytes::from(frame);
    let header = ResponseHeader::decode(&mut frame, header_version).unwrap();
    Some((header.correlation_id, frame))
}

/// A consumer's Fetch of partition 0 of `topic` from `offset` (1 MiB, min_bytes 1).
pub fn fetch_request(
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    kafka_protocol::messages::FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

pub fn produce_request(topic: &str, partition: i32, acks: i16, value: &[u8]) -> ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let mut builder = BatchBuilder::new(0, 1_000);
    builder.push(Record::new(None, Some(value.to_vec()), 1_000));
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(builder.build())))])])
}

pub async fn metadata(
    stream: &mut TcpStream,
    topic: &str,
    correlation_id: i32,
) -> MetadataResponse {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]))
        .with_allow_auto_topic_creation(true);
    stream
        .write_all(&encode_request(
            ApiKey::Metadata,
            12,
            correlation_id,
            &request,
        ))
        .await
        .unwrap();
    let (id, mut body) = read_response(stream, 1).await.expect("metadata response");
    assert_eq!(id, correlation_id);
    MetadataResponse::decode(&mut body, 12).unwrap()
}

/// Sends `request` at `version` and decodes its answer (a hang or a closed connection
/// fails the test).
pub async fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    call_from(stream, "raw-test", key, version, request).await
}

/// `call` from the client `client_id`.
pub async fn call_from<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    client_id: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    stream
        .write_all(&encode_request_from(client_id, key, version, 1, request))
        .await
        .unwrap();
    let header_version = key.response_header_version(version);
    let (_, mut body) = tokio::time::timeout(HANG_GUARD, read_response(stream, header_version))
        .await
        .expect("no hang")
        .expect("a response");
    Resp::decode(&mut body, version).unwrap()
}

/// CreateTopics v7 of one partition, replication factor 1, with `configs`: (error code,
/// error message).
pub async fn create_topic_with(
    stream: &mut TcpStream,
    name: &str,
    configs: &[(&str, &str)],
) -> (i16, String) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let text = |value: &str| StrBytes::from_string(value.to_string());
    let configs = configs
        .iter()
        .map(|(name, value)| {
            CreatableTopicConfig::default()
                .with_name(text(name))
                .with_value(Some(text(value)))
        })
        .collect();
    let created: CreateTopicsResponse = call(
        stream,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(text(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(configs)]),
    )
    .await;
    let topic = &created.topics[0];
    let message = topic.error_message.as_ref().map(|m| m.to_string());
    (topic.error_code, message.unwrap_or_default())
}
