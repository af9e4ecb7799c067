//! Broker configs that are topic defaults (message.max.bytes, log.segment.bytes,
//! log.retention.bytes) change at runtime, as Kafka's dynamic broker configs do: set on the
//! cluster default or this broker, they reach every topic without its own value at once,
//! DescribeConfigs shows them with Kafka 4.4's sources and synonyms, and deleting them
//! restores the start's value. Kafka 4.4.0's answers for the same steps are quoted below.

mod common;

use std::collections::BTreeMap;

use common::{call, metadata, open_broker, produce_request};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_broker::serve;
use tokio::net::TcpStream;

const MESSAGE_TOO_LARGE: i16 = 10;
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn produce_code(stream: &mut TcpStream) -> i16 {
    let answer: ProduceResponse = call(
        stream,
        ApiKey::Produce,
        9,
        &produce_request("t", 0, 1, &[7u8; 200]),
    )
    .await;
    answer.responses[0].partition_responses[0].error_code
}

/// (value, source, synonyms as (value, source)) of one config.
type Described = (Option<String>, i8, Vec<(Option<String>, i8)>);

async fn describe(stream: &mut TcpStream, resource_type: i8, name: &str, key: &str) -> Described {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(
                key.to_string(),
            )]))]);
    let answer: DescribeConfigsResponse = call(stream, ApiKey::DescribeConfigs, 4, &request).await;
    let config = &answer.results[0].configs[0];
    (
        config.value.as_ref().map(|v| v.to_string()),
        config.config_source,
        config
            .synonyms
            .iter()
            .map(|s| (s.value.as_ref().map(|v| v.to_string()), s.source))
            .collect(),
    )
}

fn some(value: &str) -> Option<String> {
    Some(value.to_string())
}

#[tokio::test]
async fn topic_defaults_set_dynamically_reach_topics_at_once_and_describe_as_on_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    let (address, _handle, server) = serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    metadata(&mut stream, "t", 1).await;
    assert_eq!(produce_code(&mut stream).await, 0);

    // The cluster default, then this broker's own value over it.
    broker
        .set_dynamic_configs(
            None,
            set(&[
                ("message.max.bytes", "500000"),
                ("log.retention.bytes", "7777777"),
            ]),
            false,
        )
        .await
        .unwrap();
    broker
        .set_dynamic_configs(Some(1), set(&[("message.max.bytes", "100")]), false)
        .await
        .unwrap();
    assert_eq!(
        produce_code(&mut stream).await,
        MESSAGE_TOO_LARGE,
        "applied at once"
    );

    // Kafka 4.4.0: max.message.bytes 600000 DYNAMIC_BROKER_CONFIG, synonyms
    // [600000 DYNAMIC_BROKER_CONFIG, 500000 DYNAMIC_DEFAULT_BROKER_CONFIG, 1048588 DEFAULT_CONFIG].
    assert_eq!(
        describe(&mut stream, TOPIC, "t", "max.message.bytes").await,
        (
            some("100"),
            2,
            vec![(some("100"), 2), (some("500000"), 3), (some("1048588"), 5)]
        )
    );
    // Kafka 4.4.0: retention.bytes 7777777 DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms
    // [7777777 DYNAMIC_DEFAULT_BROKER_CONFIG, -1 DEFAULT_CONFIG].
    assert_eq!(
        describe(&mut stream, TOPIC, "t", "retention.bytes").await,
        (
            some("7777777"),
            3,
            vec![(some("7777777"), 3), (some("-1"), 5)]
        )
    );
    // The broker's entry: the same layers; the cluster default entity: its own value.
    assert_eq!(
        describe(&mut stream, BROKER, "1", "message.max.bytes").await,
        (
            some("100"),
            2,
            vec![(some("100"), 2), (some("500000"), 3), (some("1048588"), 5)]
        )
    );
    assert_eq!(
        describe(&mut stream, BROKER, "", "message.max.bytes").await,
        (some("500000"), 3, vec![(some("500000"), 3)])
    );

    // A time default in its finest unit, the only one Kafka takes at runtime. Kafka 4.4.0:
    // retention.ms 12345 DYNAMIC_BROKER_CONFIG, synonyms [log.retention.ms=12345
    // DYNAMIC_BROKER_CONFIG, log.retention.hours=168 DEFAULT_CONFIG].
    broker
        .set_dynamic_configs(
            Some(1),
            set(&[("message.max.bytes", "100"), ("log.retention.ms", "12345")]),
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        describe(&mut stream, TOPIC, "t", "retention.ms").await,
        (some("12345"), 2, vec![(some("12345"), 2), (some("168"), 5)])
    );
    let partition = broker
        .partition(&strand_log::TopicPartition::new("t", 0))
        .unwrap();
    assert_eq!(partition.log().config().retention_ms, Some(12345));

    // Deleted: the start's value again, at once.
    broker
        .set_dynamic_configs(Some(1), BTreeMap::new(), false)
        .await
        .unwrap();
    broker
        .set_dynamic_configs(None, BTreeMap::new(), false)
        .await
        .unwrap();
    assert_eq!(produce_code(&mut stream).await, 0);
    assert_eq!(
        describe(&mut stream, TOPIC, "t", "max.message.bytes").await,
        (some("1048588"), 5, vec![(some("1048588"), 5)])
    );
}

#[tokio::test]
async fn a_dynamic_topic_default_holds_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open_broker(dir.path(), |_| {});
        broker
            .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
            .await
            .unwrap();
        broker
            .set_dynamic_configs(None, set(&[("message.max.bytes", "100")]), false)
            .await
            .unwrap();
        broker.shutdown().unwrap();
    }
    let broker = open_broker(dir.path(), |_| {});
    let (address, _handle, server) = serve(broker).await.unwrap();
    tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    assert_eq!(produce_code(&mut stream).await, MESSAGE_TOO_LARGE);
}

async fn acks_all(stream: &mut TcpStream) -> i16 {
    let request = produce_request("t", 0, -1, b"v");
    let answer: ProduceResponse = call(stream, ApiKey::Produce, 9, &request).await;
    answer.responses[0].partition_responses[0].error_code
}

/// min.insync.replicas is a broker config too, the default of the topic config: from
/// server.properties, then cluster-wide at runtime. While eligible leader replicas are on
/// (KIP-966, the default), Kafka refuses a per-broker value and the removal of the
/// cluster-wide one, INVALID_CONFIG with these messages.
#[tokio::test]
async fn min_insync_replicas_is_a_broker_default_cluster_wide_only_with_elr() {
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    const INVALID_CONFIG: i16 = 40;
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |config| {
        // As `min.insync.replicas=2` in server.properties sets it.
        config.min_insync_replicas = 2;
        config.explicit.insert("min.insync.replicas".into());
    });
    let (address, _handle, server) = serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    metadata(&mut stream, "t", 1).await;
    // One replica, min ISR 2 from the start setting: acks=all is refused, as on Kafka.
    assert_eq!(acks_all(&mut stream).await, NOT_ENOUGH_REPLICAS);
    let (value, source, _) = describe(&mut stream, TOPIC, "t", "min.insync.replicas").await;
    assert_eq!((value, source), (some("2"), 4), "STATIC_BROKER_CONFIG");

    broker
        .set_dynamic_configs(None, set(&[("min.insync.replicas", "1")]), false)
        .await
        .unwrap();
    assert_eq!(
        acks_all(&mut stream).await,
        0,
        "the cluster-wide value applies at once"
    );
    let (value, source, _) = describe(&mut stream, TOPIC, "t", "min.insync.replicas").await;
    assert_eq!(
        (value, source),
        (some("1"), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );

    let per_broker = broker
        .set_dynamic_configs(Some(1), set(&[("min.insync.replicas", "1")]), false)
        .await
        .unwrap_err();
    assert_eq!(per_broker.code, INVALID_CONFIG);
    assert_eq!(
        per_broker.message.as_deref(),
        Some("Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    );
    let removal = broker
        .set_dynamic_configs(None, BTreeMap::new(), false)
        .await
        .unwrap_err();
    assert_eq!(removal.code, INVALID_CONFIG);
    assert_eq!(
        removal.message.as_deref(),
        Some("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    );
}
