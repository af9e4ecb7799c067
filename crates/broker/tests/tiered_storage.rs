//! Tiered storage on one node with a local-directory store: sealed segments are copied,
//! local retention deletes the copied ones, consumers read below the local log start
//! through Fetch, ListOffsets answers the tiered offsets, remote retention deletes copies
//! and moves the log start, and deleting the topic deletes its objects.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strand_records::BatchView;
use tokio::net::TcpStream;

mod common;
use common::*;

const EARLIEST: i64 = -2;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const RECORDS: i64 = 200;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

async fn tiered_broker(store: &Path) -> TestBroker {
    let url = format!("file://{}", store.display());
    start_with(|config| {
        config.remote_log_storage_system_enable = true;
        config.remote_storage_url = Some(url);
        config.remote_log_manager_task_interval_ms = 50;
        config.retention_check_interval_ms = 50;
    })
    .await
}

async fn alter_topic(client: &mut TcpStream, name: &str, configs: &[(&str, &str)]) {
    let configs = configs
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(text(name))
                .with_value(Some(text(value)))
        })
        .collect();
    let altered: AlterConfigsResponse = call(
        client,
        ApiKey::AlterConfigs,
        2,
        &AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text(name))
            .with_configs(configs)]),
    )
    .await;
    assert_eq!(altered.responses[0].error_code, 0, "{altered:?}");
}

/// Record n has the timestamp 1_000 + n (of 1970: older than any retention).
async fn produce_all(client: &mut TcpStream, topic: &str) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    for n in 0..RECORDS {
        let mut builder = strand_records::BatchBuilder::new(0, 1_000 + n);
        builder.push(strand_records::Record::new(
            None,
            Some(vec![n as u8; 100]),
            1_000 + n,
        ));
        let request = kafka_protocol::messages::ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(text(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::from(builder.build())))])]);
        let response: ProduceResponse = call(client, ApiKey::Produce, 9, &request).await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
}

/// ListOffsets v9 for `timestamp`: (error code, offset).
async fn list_offset(client: &mut TcpStream, topic: &str, timestamp: i64) -> (i16, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(text(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let response: ListOffsetsResponse = call(client, ApiKey::ListOffsets, 9, &request).await;
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.offset)
}

/// Polls `check` until it holds (a guard against hangs, not a timing assertion).
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < HANG_GUARD, "waited too long for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls ListOffsets for `timestamp` until its offset passes `check`.
async fn until_offset(
    client: &mut TcpStream,
    topic: &str,
    timestamp: i64,
    check: impl Fn(i64) -> bool,
) {
    let started = Instant::now();
    loop {
        let (code, offset) = list_offset(client, topic, timestamp).await;
        if code == 0 && check(offset) {
            return;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "ListOffsets {timestamp} stayed at {offset} ({code})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Fetches from `from` until the high watermark: (error code of the first refusal, the
/// offsets of every batch read, in order).
async fn read_all(client: &mut TcpStream, topic: &str, from: i64) -> (i16, Vec<i64>) {
    let mut offsets = Vec::new();
    let mut next = from;
    let started = Instant::now();
    while next < RECORDS {
        assert!(started.elapsed() < HANG_GUARD, "reading stalled at {next}");
        let response: FetchResponse =
            call(client, ApiKey::Fetch, 12, &fetch_request(topic, next, 500)).await;
        let partition = &response.responses[0].partitions[0];
        if partition.error_code != 0 {
            return (partition.error_code, offsets);
        }
        let mut records = partition.records.clone().unwrap_or_default();
        while let Ok(view) = BatchView::parse(&records) {
            let (base, last) = (
                view.header.base_offset,
                view.header.base_offset + i64::from(view.header.last_offset_delta),
            );
            if last >= next {
                offsets.extend(base.max(next)..=last);
                next = last + 1;
            }
            let length = view.bytes.len();
            records = records.slice(length..);
        }
    }
    (0, offsets)
}

/// The objects in the store whose names end in `suffix`.
fn objects(store: &Path, suffix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, suffix, out);
            } else if path.to_string_lossy().ends_with(suffix) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(store, suffix, &mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_read_below_the_local_log_start_from_the_remote_store() {
    let store = tempfile::tempdir().unwrap();
    let broker = tiered_broker(store.path()).await;
    let mut client = TcpStream::connect(broker.address).await.unwrap();
    let configs = [
        ("remote.storage.enable", "true"),
        ("internal.segment.bytes", "2000"),
        ("retention.ms", "-1"),
        ("local.retention.ms", "0"),
    ];
    assert_eq!(
        create_topic_with(&mut client, "tiered", &configs).await.0,
        0
    );
    produce_all(&mut client, "tiered").await;
    until_offset(&mut client, "tiered", EARLIEST_LOCAL, |start| {
        start > RECORDS / 2
    })
    .await;
    let (code, local_start) = list_offset(&mut client, "tiered", EARLIEST_LOCAL).await;
    assert_eq!(code, 0);
    let (_, tiered_end) = list_offset(&mut client, "tiered", LATEST_TIERED).await;
    assert!(
        tiered_end >= local_start - 1,
        "the store reaches the local start"
    );
    assert_eq!(list_offset(&mut client, "tiered", EARLIEST).await, (0, 0));
    let copies = objects(store.path(), ".json");
    assert!(!copies.is_empty());
    // A copy writes its data before its metadata: one may be under way.
    assert!(objects(store.path(), ".log").len() >= copies.len());
    // Every record from offset 0, in order: the first ones from the store.
    let (code, offsets) = read_all(&mut client, "tiered", 0).await;
    assert_eq!(code, 0);
    assert_eq!(offsets, (0..RECORDS).collect::<Vec<_>>());
    // From the middle of a copied segment too.
    let (_, offsets) = read_all(&mut client, "tiered", 17).await;
    assert_eq!(offsets, (17..RECORDS).collect::<Vec<_>>());

    // By timestamp: in the store below the local log start, locally above it.
    assert_eq!(list_offset(&mut client, "tiered", 1_057).await, (0, 57));
    assert_eq!(list_offset(&mut client, "tiered", 0).await, (0, 0));
    assert_eq!(
        list_offset(&mut client, "tiered", 1_000 + RECORDS - 1).await,
        (0, RECORDS - 1)
    );
    assert_eq!(
        list_offset(&mut client, "tiered", 1_000 + RECORDS).await,
        (0, -1)
    );

    // DeleteRecords below the local log start: the store's copy goes too.
    let deleted: DeleteRecordsResponse = call(
        &mut client,
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default()
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(text("tiered")))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(30)])])
            .with_timeout_ms(5_000),
    )
    .await;
    let result = &deleted.topics[0].partitions[0];
    assert_eq!((result.error_code, result.low_watermark), (0, 30));
    assert_eq!(list_offset(&mut client, "tiered", EARLIEST).await, (0, 30));
    assert_eq!(
        list_offset(&mut client, "tiered", 1_010).await,
        (0, 30),
        "not below the start"
    );
    let (code, _) = read_all(&mut client, "tiered", 0).await;
    assert_eq!(code, 1, "OFFSET_OUT_OF_RANGE below the deleted records");
    let (_, offsets) = read_all(&mut client, "tiered", 30).await;
    assert_eq!(offsets, (30..RECORDS).collect::<Vec<_>>());
    until("copies wholly below 30 deleted", || async {
        objects(store.path(), ".json")
            .iter()
            .all(|key| !key.to_string_lossy().contains("/00000000000000000000-"))
    })
    .await;

    // Remote retention: every record is older than a second (timestamps of 1970).
    alter_topic(
        &mut client,
        "tiered",
        &[
            ("remote.storage.enable", "true"),
            ("internal.segment.bytes", "2000"),
            ("retention.ms", "1000"),
            ("local.retention.ms", "0"),
        ],
    )
    .await;
    until("remote copies expired", || async {
        objects(store.path(), ".json").is_empty()
    })
    .await;
    until_offset(&mut client, "tiered", EARLIEST, |start| start > tiered_end).await;
    let (code, _) = read_all(&mut client, "tiered", 0).await;
    assert_eq!(code, 1, "OFFSET_OUT_OF_RANGE below the new log start");
    until("the expired copies' data deleted", || async {
        objects(store.path(), ".log").is_empty()
    })
    .await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_tiered_topic_deletes_its_remote_objects() {
    let store = tempfile::tempdir().unwrap();
    let broker = tiered_broker(store.path()).await;
    let mut client = TcpStream::connect(broker.address).await.unwrap();
    let configs = [
        ("remote.storage.enable", "true"),
        ("internal.segment.bytes", "2000"),
        ("retention.ms", "-1"),
    ];
    assert_eq!(
        create_topic_with(&mut client, "doomed", &configs).await.0,
        0
    );
    produce_all(&mut client, "doomed").await;
    until("segments copied", || async {
        objects(store.path(), ".json").len() >= 3
    })
    .await;
    let deleted: DeleteTopicsResponse = call(
        &mut client,
        ApiKey::DeleteTopics,
        4,
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(text("doomed"))])
            .with_timeout_ms(5_000),
    )
    .await;
    assert_eq!(deleted.responses[0].error_code, 0);
    until("remote objects deleted", || async {
        objects(store.path(), "").is_empty()
    })
    .await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiered_topics_are_refused_without_tiered_storage_as_kafka_refuses_them() {
    let broker = start().await;
    let mut client = TcpStream::connect(broker.address).await.unwrap();
    let (code, message) =
        create_topic_with(&mut client, "t", &[("remote.storage.enable", "true")]).await;
    assert_eq!(code, 40, "INVALID_CONFIG");
    assert_eq!(
        message,
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    );
    broker.stop().await;
}
