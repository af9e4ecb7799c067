//! The HTTP listener as Prometheus and an orchestrator meet it: /metrics reports, under
//! the JMX exporter's Kafka names, exactly what a client produced and fetched (records,
//! bytes, requests by API and version, failures), the logs' sizes and offsets, waiting
//! fetches and connections; a deleted topic's gauges leave the output; /health and
//! /ready answer; other paths and methods are refused.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{
    call, call_from, create_topic_with, fetch_request, open_broker, produce_request, HANG_GUARD,
};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DeleteTopicsRequest,
    DeleteTopicsResponse, FetchResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strand_broker::Broker;
use strand_records::{BatchBuilder, Record};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Served {
    kafka: SocketAddr,
    http: SocketAddr,
    _handle: strand_broker::ServerHandle,
    _stop_http: tokio::sync::watch::Sender<bool>,
    _broker: Arc<Broker>,
    _dir: tempfile::TempDir,
}

async fn serve_with_http() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    let (kafka, handle, server) = strand_broker::serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = listener.local_addr().unwrap();
    let (stop_http, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(strand_broker::http::serve(
        broker.clone(),
        None,
        listener,
        stopping,
    ));
    Served {
        kafka,
        http,
        _handle: handle,
        _stop_http: stop_http,
        _broker: broker,
        _dir: dir,
    }
}

/// A plain HTTP/1.1 exchange: (status, body).
async fn http(address: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut answer))
        .await
        .expect("no hang")
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

async fn scrape(address: SocketAddr) -> String {
    let (status, body) = http(address, "GET", "/metrics").await;
    assert_eq!(status, 200);
    body
}

/// The value of one series (`name{labels}` exactly as printed), if present.
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.trim().parse().ok()
    })
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

async fn create_topic(stream: &mut TcpStream, name: &str, configs: &[(&str, &str)]) {
    let (code, message) = create_topic_with(stream, name, configs).await;
    assert_eq!(code, 0, "{message}");
}

fn produce(topic: &str, batch: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(text(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_what_clients_sent() {
    let served = serve_with_http().await;
    let mut stream = TcpStream::connect(served.kafka).await.unwrap();
    create_topic(&mut stream, "m", &[]).await;
    // 20 batches of 1..=20 records of growing size.
    let (mut records, mut bytes) = (0u64, 0u64);
    for batch_index in 1..=20u64 {
        let mut builder = BatchBuilder::new(0, 1_000);
        for i in 0..batch_index {
            builder.push(Record::new(
                None,
                Some(vec![b'x'; (10 * i) as usize]),
                1_000,
            ));
        }
        let batch = builder.build();
        records += batch_index;
        bytes += batch.len() as u64;
        let answer: ProduceResponse =
            call(&mut stream, ApiKey::Produce, 9, &produce("m", batch)).await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    // A record without a key on a compacted topic is refused (INVALID_RECORD): a failed
    // produce, as Kafka counts it.
    create_topic(&mut stream, "c", &[("cleanup.policy", "compact")]).await;
    let mut keyless = BatchBuilder::new(0, 1_000);
    keyless.push(Record::new(None, Some(b"v".to_vec()), 1_000));
    let answer: ProduceResponse = call(
        &mut stream,
        ApiKey::Produce,
        9,
        &produce("c", keyless.build()),
    )
    .await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 87);
    let fetched: FetchResponse =
        call(&mut stream, ApiKey::Fetch, 12, &fetch_request("m", 0, 0)).await;
    let sent_out = fetched.responses[0].partitions[0]
        .records
        .as_ref()
        .map_or(0, |r| r.len() as u64);
    assert_eq!(sent_out, bytes, "one fetch of 1 MiB reads everything");

    let metrics = scrape(served.http).await;
    let topic = |name: &str| value(&metrics, &format!("{name}{{topic=\"m\"}}"));
    let all = |name: &str| value(&metrics, name);
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_messagesin_total"),
        Some(records as f64)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_bytesin_total"),
        Some(bytes as f64)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_bytesout_total"),
        Some(bytes as f64)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_totalproducerequests_total"),
        Some(20.0)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_failedproducerequests_total"),
        Some(0.0)
    );
    let compacted = |name: &str| value(&metrics, &format!("{name}{{topic=\"c\"}}"));
    assert_eq!(
        compacted("kafka_server_brokertopicmetrics_totalproducerequests_total"),
        Some(1.0)
    );
    assert_eq!(
        compacted("kafka_server_brokertopicmetrics_failedproducerequests_total"),
        Some(1.0)
    );
    assert_eq!(
        compacted("kafka_server_brokertopicmetrics_messagesin_total"),
        Some(0.0)
    );
    assert_eq!(
        all("kafka_server_brokertopicmetrics_failedproducerequests_total"),
        Some(1.0)
    );
    assert_eq!(
        topic("kafka_server_brokertopicmetrics_totalfetchrequests_total"),
        Some(1.0)
    );
    assert_eq!(
        all("kafka_server_brokertopicmetrics_messagesin_total"),
        Some(records as f64)
    );
    assert_eq!(
        value(
            &metrics,
            "kafka_network_requestmetrics_requests_total{request=\"Produce\",version=\"9\"}"
        ),
        Some(21.0)
    );
    assert_eq!(
        value(
            &metrics,
            "kafka_network_requestmetrics_requests_total{request=\"FetchConsumer\",version=\"12\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &metrics,
            "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"}"
        ),
        Some(21.0)
    );
    assert!(metrics.contains(
        "kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"0.50\"}"
    ));
    assert!(metrics.contains(
        "kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"0.999\"}"
    ));
    // RequestBytes: each produce's frame, its batch and a little framing.
    let request_bytes = |series: &str| {
        value(
            &metrics,
            &format!("kafka_network_requestmetrics_requestbytes{series}{{request=\"Produce\"}}"),
        )
        .unwrap()
    };
    assert_eq!(request_bytes("_count"), 21.0);
    let framing = request_bytes("_sum") - bytes as f64;
    assert!((21.0 * 20.0..21.0 * 200.0).contains(&framing), "{framing}");
    assert_eq!(
        value(
            &metrics,
            "kafka_network_requestmetrics_throttletimems_sum{request=\"Produce\"}"
        ),
        Some(0.0)
    );
    let log = |name: &str| value(&metrics, &format!("{name}{{topic=\"m\",partition=\"0\"}}"));
    assert_eq!(log("kafka_log_log_logendoffset"), Some(records as f64));
    assert_eq!(log("kafka_log_log_logstartoffset"), Some(0.0));
    assert_eq!(log("kafka_log_log_size"), Some(bytes as f64));
    assert_eq!(all("kafka_server_replicamanager_partitioncount"), Some(2.0));
    assert_eq!(all("kafka_server_replicamanager_leadercount"), Some(2.0));
    assert_eq!(
        all("kafka_server_replicamanager_underreplicatedpartitions"),
        Some(0.0)
    );
    assert_eq!(
        all("kafka_controller_kafkacontroller_activecontrollercount"),
        Some(1.0)
    );
    assert_eq!(
        value(
            &metrics,
            "kafka_server_socket_server_metrics_connection_count{listener=\"PLAINTEXT\"}"
        ),
        Some(1.0)
    );
    assert!(metrics.contains("# HELP kafka_server_brokertopicmetrics_messagesin_total kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"));

    // A consumer waiting at the end is in the fetch purgatory while it waits.
    let mut waiting = TcpStream::connect(served.kafka).await.unwrap();
    let mut request = Vec::new();
    request.extend(common::encode_request(
        ApiKey::Fetch,
        12,
        7,
        &fetch_request("m", records as i64, 20_000),
    ));
    waiting.write_all(&request).await.unwrap();
    let parked = "kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation=\"Fetch\"}";
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let metrics = scrape(served.http).await;
        if value(&metrics, parked) == Some(1.0) {
            assert_eq!(
                value(
                    &metrics,
                    "kafka_server_socket_server_metrics_connection_count{listener=\"PLAINTEXT\"}"
                ),
                Some(2.0)
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the waiting fetch is never counted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    drop(waiting);

    // A deleted topic's gauges leave the output.
    let deleted: DeleteTopicsResponse = call(
        &mut stream,
        ApiKey::DeleteTopics,
        6,
        &DeleteTopicsRequest::default()
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(TopicName(text("m"))))
            ])
            .with_timeout_ms(10_000),
    )
    .await;
    assert_eq!(deleted.responses[0].error_code, 0);
    let metrics = scrape(served.http).await;
    assert_eq!(
        value(&metrics, "kafka_log_log_size{topic=\"m\",partition=\"0\"}"),
        None
    );
    assert_eq!(
        value(&metrics, "kafka_server_replicamanager_partitioncount"),
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_answer_and_other_requests_are_refused() {
    let served = serve_with_http().await;
    assert_eq!(
        http(served.http, "GET", "/health").await,
        (200, "ok\n".into())
    );
    assert_eq!(
        http(served.http, "GET", "/ready").await,
        (200, "ready\n".into())
    );
    assert_eq!(http(served.http, "GET", "/nothing").await.0, 404);
    assert_eq!(http(served.http, "POST", "/metrics").await.0, 405);
    // A silent connection does not hold the listener: the others are still answered.
    let _silent = TcpStream::connect(served.http).await.unwrap();
    assert_eq!(http(served.http, "GET", "/health").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_not_serving_yet_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    assert_eq!(
        broker.readiness(),
        Err("the Kafka listeners do not serve yet".to_string())
    );
    let (_address, _handle, server) = strand_broker::serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while broker.readiness().is_err() {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// ThrottleTimeMs: a producer over its byte rate is throttled, and its request's summary
/// says for how long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_request_reports_its_throttle_time() {
    let served = serve_with_http().await;
    let mut admin = TcpStream::connect(served.kafka).await.unwrap();
    create_topic(&mut admin, "q", &[]).await;
    let quota = EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(text("client-id"))
            .with_entity_name(Some(text("slow")))])
        .with_ops(vec![OpData::default()
            .with_key(text("producer_byte_rate"))
            .with_value(100_000.0)]);
    let altered: AlterClientQuotasResponse = call(
        &mut admin,
        ApiKey::AlterClientQuotas,
        1,
        &AlterClientQuotasRequest::default().with_entries(vec![quota]),
    )
    .await;
    assert_eq!(altered.entries[0].error_code, 0);
    // 1.2 MB in the 10 s window is 20% over 100 KB/s: a throttle of about 2 s.
    let mut slow = TcpStream::connect(served.kafka).await.unwrap();
    let value_bytes = vec![7u8; 600_000];
    let mut throttled_ms = 0;
    for _ in 0..2 {
        let answer: ProduceResponse = call_from(
            &mut slow,
            "slow",
            ApiKey::Produce,
            9,
            &produce_request("q", 0, 1, &value_bytes),
        )
        .await;
        throttled_ms += answer.throttle_time_ms;
    }
    assert!(throttled_ms >= 1_000, "{throttled_ms}");
    let metrics = scrape(served.http).await;
    let series = |name: &str| value(&metrics, &format!("{name}{{request=\"Produce\"}}"));
    assert_eq!(
        series("kafka_network_requestmetrics_throttletimems_sum"),
        Some(f64::from(throttled_ms))
    );
    let worst = value(
        &metrics,
        "kafka_network_requestmetrics_throttletimems{request=\"Produce\",quantile=\"0.999\"}",
    )
    .unwrap();
    let throttled = f64::from(throttled_ms);
    assert!(
        worst >= throttled && worst <= throttled * 1.07,
        "{worst} vs {throttled}"
    );
}
