//! Client quotas as a Kafka client meets them: AlterClientQuotas and DescribeClientQuotas
//! with Kafka's checks, filters and precedence (kept across a restart), and quotas
//! enforced: a producer or consumer over its byte rate is answered with a throttle time
//! (a throttled fetch with no records), while another client is not held back.

mod common;

use common::{call_from, fetch_request, produce_request, start_with};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, FetchResponse, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const INVALID_REQUEST: i16 = 42;
const CLIENT: &str = "raw-test";

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// An alteration: the entity ((type, name or None for the default)) and (key, value or
/// None to remove).
fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(text(t))
                        .with_entity_name(n.map(text))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(key, value)| {
                    OpData::default()
                        .with_key(text(key))
                        .with_value(value.unwrap_or(0.0))
                        .with_remove(value.is_none())
                })
                .collect(),
        )
}

async fn alter(
    stream: &mut TcpStream,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> AlterClientQuotasResponse {
    call_from(
        stream,
        CLIENT,
        ApiKey::AlterClientQuotas,
        1,
        &AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only),
    )
    .await
}

/// Entities found by a filter of (entity type, match type, match).
async fn describe(
    stream: &mut TcpStream,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Vec<(Vec<(String, Option<String>)>, Vec<(String, f64)>)> {
    let response: DescribeClientQuotasResponse = call_from(
        stream,
        CLIENT,
        ApiKey::DescribeClientQuotas,
        1,
        &DescribeClientQuotasRequest::default()
            .with_components(
                components
                    .iter()
                    .map(|(t, m, n)| {
                        ComponentData::default()
                            .with_entity_type(text(t))
                            .with_match_type(*m)
                            .with_match(n.map(text))
                    })
                    .collect(),
            )
            .with_strict(strict),
    )
    .await;
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    let mut found: Vec<_> = response
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let mut entity: Vec<(String, Option<String>)> = e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            entity.sort();
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn named(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
        .collect()
}

#[tokio::test]
async fn quotas_are_altered_and_described_as_on_kafka_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_path_buf();
    let broker = start_with(|c| c.data_dir = data_dir.clone()).await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();

    let answer = alter(
        &mut stream,
        vec![
            entry(
                &[("user", Some("alice"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            entry(
                &[("client-id", None)],
                &[("consumer_byte_rate", Some(2048.0))],
            ),
            entry(
                &[("user", None), ("client-id", Some("app"))],
                &[("request_percentage", Some(50.5))],
            ),
            entry(
                &[("user", Some("bob"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(
                &[("ip", Some("10.0.0.1"))],
                &[("connection_creation_rate", Some(10.0))],
            ),
        ],
        false,
    )
    .await;
    let codes: Vec<i16> = answer.entries.iter().map(|e| e.error_code).collect();
    assert_eq!(codes, vec![0, 0, 0, INVALID_REQUEST, 0]);
    assert_eq!(
        answer.entries[3].error_message.as_deref(),
        Some("producer_byte_rate cannot be a fractional value.")
    );

    // validate_only checks and stores nothing.
    let checked = alter(
        &mut stream,
        vec![entry(
            &[("user", Some("carol"))],
            &[("consumer_byte_rate", Some(10.0))],
        )],
        true,
    )
    .await;
    assert_eq!(checked.entries[0].error_code, 0);

    let everything = describe(&mut stream, &[], false).await;
    assert_eq!(everything.len(), 4, "{everything:?}");
    assert_eq!(
        describe(&mut stream, &[("user", 0, Some("alice"))], true).await,
        vec![(
            named(&[("user", Some("alice"))]),
            vec![("producer_byte_rate".to_string(), 1024.0)]
        )]
    );
    // Any user: alice's and the default user's with client app.
    assert_eq!(
        describe(&mut stream, &[("user", 2, None)], false)
            .await
            .len(),
        2
    );
    assert_eq!(
        describe(&mut stream, &[("client-id", 1, None)], true)
            .await
            .len(),
        1
    );

    // The quotas are kept across a restart, and removing one removes its entity.
    drop(stream);
    broker.stop().await;
    let data_dir = dir.path().to_path_buf();
    let broker = start_with(|c| c.data_dir = data_dir.clone()).await;
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    assert_eq!(describe(&mut stream, &[], false).await.len(), 4);
    let removed = alter(
        &mut stream,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
        false,
    )
    .await;
    assert_eq!(removed.entries[0].error_code, 0);
    assert_eq!(describe(&mut stream, &[], false).await.len(), 3);
}

#[tokio::test]
async fn a_client_over_its_byte_rate_is_throttled_and_another_is_not() {
    let broker = start_with(|_| {}).await;
    let mut admin = TcpStream::connect(broker.address).await.unwrap();
    // 100 KB/s for the producer "slow" and the consumer "reader".
    let answer = alter(
        &mut admin,
        vec![
            entry(
                &[("client-id", Some("slow"))],
                &[("producer_byte_rate", Some(100_000.0))],
            ),
            entry(
                &[("client-id", Some("reader"))],
                &[("consumer_byte_rate", Some(100_000.0))],
            ),
        ],
        false,
    )
    .await;
    assert!(answer.entries.iter().all(|e| e.error_code == 0));
    common::metadata(&mut admin, "quota-topic", 2).await;
    let value = vec![7u8; 600_000];

    // The first 600 KB is 60 KB/s over the 10 s window; the second brings it to 120 KB/s:
    // 20% over, so 20% of the window (2 s) to wait.
    let mut slow = TcpStream::connect(broker.address).await.unwrap();
    let throttles = {
        let mut throttles = Vec::new();
        for _ in 0..2 {
            let response: ProduceResponse = call_from(
                &mut slow,
                "slow",
                ApiKey::Produce,
                9,
                &produce_request("quota-topic", 0, 1, &value),
            )
            .await;
            assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
            throttles.push(response.throttle_time_ms);
        }
        throttles
    };
    assert_eq!(throttles[0], 0);
    assert!(
        (1_900..=2_100).contains(&throttles[1]),
        "the throttle that brings the rate back to the quota: {throttles:?}"
    );
    // Another client is not held back.
    let mut fast = TcpStream::connect(broker.address).await.unwrap();
    for _ in 0..2 {
        let response: ProduceResponse = call_from(
            &mut fast,
            "fast",
            ApiKey::Produce,
            9,
            &produce_request("quota-topic", 0, 1, &value),
        )
        .await;
        assert_eq!(response.throttle_time_ms, 0);
    }

    // The reader's first fetch would be 1 MiB, over 100 KB/s across the window: it gets no
    // records and a throttle time; another consumer gets them.
    let mut reader = TcpStream::connect(broker.address).await.unwrap();
    let fetched: FetchResponse = call_from(
        &mut reader,
        "reader",
        ApiKey::Fetch,
        12,
        &fetch_request("quota-topic", 0, 0),
    )
    .await;
    assert!(fetched.throttle_time_ms > 0);
    assert!(fetched.responses.iter().all(|t| t
        .partitions
        .iter()
        .all(|p| p.records.as_ref().is_none_or(|r| r.is_empty()))));
    let mut other = TcpStream::connect(broker.address).await.unwrap();
    let fetched: FetchResponse = call_from(
        &mut other,
        "other",
        ApiKey::Fetch,
        12,
        &fetch_request("quota-topic", 0, 0),
    )
    .await;
    assert_eq!(fetched.throttle_time_ms, 0);
    let records = fetched.responses[0].partitions[0].records.as_ref().unwrap();
    assert!(records.len() > 500_000);
}

#[tokio::test]
async fn an_address_over_its_connection_creation_rate_is_closed() {
    let broker = start_with(|_| {}).await;
    let mut admin = TcpStream::connect(broker.address).await.unwrap();
    let answer = alter(
        &mut admin,
        vec![entry(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", Some(1.0))],
        )],
        false,
    )
    .await;
    assert_eq!(answer.entries[0].error_code, 0);
    // One a second over at least ten windows: the first ten new connections are served,
    // the next ones closed (after at most a second) without an answer.
    let mut served = 0;
    let mut closed = 0;
    for _ in 0..15 {
        let mut stream = TcpStream::connect(broker.address).await.unwrap();
        stream
            .write_all(&common::encode_request(
                ApiKey::ApiVersions,
                3,
                1,
                &kafka_protocol::messages::ApiVersionsRequest::default(),
            ))
            .await
            .unwrap();
        let answered =
            tokio::time::timeout(common::HANG_GUARD, common::read_response(&mut stream, 0))
                .await
                .expect("answered or closed");
        match answered {
            Some(_) => served += 1,
            None => closed += 1,
        }
    }
    assert!(
        served >= 1 && closed >= 1,
        "served {served}, closed {closed}"
    );
    // Without the quota, the address is served again.
    let answer = alter(
        &mut admin,
        vec![entry(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", None)],
        )],
        false,
    )
    .await;
    assert_eq!(answer.entries[0].error_code, 0);
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let _: kafka_protocol::messages::ApiVersionsResponse = call_from(
        &mut stream,
        CLIENT,
        ApiKey::ApiVersions,
        3,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    )
    .await;
}

#[tokio::test]
async fn a_client_over_its_request_percentage_is_throttled_on_any_api_and_another_is_not() {
    let broker = start_with(|_| {}).await;
    let mut admin = TcpStream::connect(broker.address).await.unwrap();
    common::metadata(&mut admin, "busy-topic", 1).await;
    let stored: ProduceResponse = call_from(
        &mut admin,
        "calm",
        ApiKey::Produce,
        9,
        &produce_request("busy-topic", 0, 1, b"stored"),
    )
    .await;
    assert_eq!(stored.responses[0].partition_responses[0].error_code, 0);
    // A hundred-millionth of a percent of a thread (0.1 us a second over the quota's
    // ten-second window): any request's time is over it. (A ten-thousandth let a
    // Metadata answered in 10 us through.)
    let answer = alter(
        &mut admin,
        vec![entry(
            &[("client-id", Some("busy"))],
            &[("request_percentage", Some(0.000_000_01))],
        )],
        false,
    )
    .await;
    assert!(answer.entries.iter().all(|e| e.error_code == 0));
    // Metadata (throttle time first in the body), Fetch (answered in parts) and Produce
    // (throttle time after the partitions, set by its handler) all carry it; the throttle
    // is at most one window (1 s).
    let mut busy = TcpStream::connect(broker.address).await.unwrap();
    let metadata: kafka_protocol::messages::MetadataResponse = call_from(
        &mut busy,
        "busy",
        ApiKey::Metadata,
        12,
        &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
    )
    .await;
    assert!(
        (1..=1_000).contains(&metadata.throttle_time_ms),
        "{}",
        metadata.throttle_time_ms
    );
    assert!(!metadata.brokers.is_empty(), "the answer itself is whole");
    let fetched: FetchResponse = call_from(
        &mut busy,
        "busy",
        ApiKey::Fetch,
        12,
        &fetch_request("busy-topic", 0, 0),
    )
    .await;
    assert!(
        (1..=1_000).contains(&fetched.throttle_time_ms),
        "{}",
        fetched.throttle_time_ms
    );
    // Over its request quota, a fetch answers no records, as Kafka's does.
    assert!(fetched.responses.iter().all(|t| t
        .partitions
        .iter()
        .all(|p| p.records.as_ref().is_none_or(|r| r.is_empty()))));
    let produced: ProduceResponse = call_from(
        &mut busy,
        "busy",
        ApiKey::Produce,
        9,
        &produce_request("busy-topic", 0, 1, b"v"),
    )
    .await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    assert!(
        (1..=1_000).contains(&produced.throttle_time_ms),
        "{}",
        produced.throttle_time_ms
    );
    // Another client is not held back: it reads the record.
    let mut calm = TcpStream::connect(broker.address).await.unwrap();
    let metadata: kafka_protocol::messages::MetadataResponse = call_from(
        &mut calm,
        "calm",
        ApiKey::Metadata,
        12,
        &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
    )
    .await;
    assert_eq!(metadata.throttle_time_ms, 0);
    let fetched: FetchResponse = call_from(
        &mut calm,
        "calm",
        ApiKey::Fetch,
        12,
        &fetch_request("busy-topic", 0, 0),
    )
    .await;
    assert_eq!(fetched.throttle_time_ms, 0);
    assert!(fetched.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| !r.is_empty()));
}

#[tokio::test]
async fn a_client_over_its_controller_mutation_rate_is_refused_new_topics_as_on_kafka() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::{
        CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
        TopicName,
    };
    const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
    let broker = start_with(|_| {}).await;
    let mut admin = TcpStream::connect(broker.address).await.unwrap();
    // One partition a second: a bucket of 11.
    let answer = alter(
        &mut admin,
        vec![entry(
            &[("client-id", Some("creator"))],
            &[("controller_mutation_rate", Some(1.0))],
        )],
        false,
    )
    .await;
    assert!(answer.entries.iter().all(|e| e.error_code == 0));
    let topic = |name: &str, partitions: i32| {
        CreatableTopic::default()
            .with_name(TopicName(text(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
    };
    let create = |version: i16, topics: Vec<CreatableTopic>| {
        let address = broker.address;
        async move {
            // A fresh connection each time: a throttled one is muted for the throttle.
            let mut stream = TcpStream::connect(address).await.unwrap();
            let response: CreateTopicsResponse = call_from(
                &mut stream,
                "creator",
                ApiKey::CreateTopics,
                version,
                &CreateTopicsRequest::default()
                    .with_topics(topics)
                    .with_timeout_ms(10_000),
            )
            .await;
            response
        }
    };
    // An invalid topic costs nothing; 10 then 5 partitions are created (the bucket was
    // not empty before either), and then the bucket is below zero: refused, with the
    // time until it is back at zero.
    let answer = create(
        7,
        vec![
            topic("bad name!", 50),
            topic("m1", 10),
            topic("m2", 5),
            topic("m3", 1),
        ],
    )
    .await;
    let codes: Vec<i16> = answer.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![17, 0, 0, THROTTLING_QUOTA_EXCEEDED],
        "{answer:?}"
    );
    assert_eq!(
        answer.topics[3].error_message.as_deref(),
        Some("The throttling quota has been exceeded.")
    );
    assert!(
        (3_000..=4_000).contains(&answer.throttle_time_ms),
        "{}",
        answer.throttle_time_ms
    );
    // Before v6 the quota is permissive: created, and throttled.
    let answer = create(5, vec![topic("m4", 2)]).await;
    assert_eq!(answer.topics[0].error_code, 0, "{answer:?}");
    assert!(answer.throttle_time_ms > 0);
    // Deleting counts too.
    let mut stream = TcpStream::connect(broker.address).await.unwrap();
    let deleted: DeleteTopicsResponse = call_from(
        &mut stream,
        "creator",
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(TopicName(text("m1"))))
            ])
            .with_timeout_ms(10_000),
    )
    .await;
    assert_eq!(deleted.responses[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(deleted.throttle_time_ms > 0);
    // Another client is not held back.
    let mut other = TcpStream::connect(broker.address).await.unwrap();
    let response: CreateTopicsResponse = call_from(
        &mut other,
        "other",
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![topic("o1", 20)]),
    )
    .await;
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.throttle_time_ms, 0);
}
