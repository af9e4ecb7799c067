//! What Kafka's request metrics cost a request: the path every Produce takes through
//! RequestMetrics (start, handled, counted, written: its clock reads, its requests
//! counter, eight summaries) and its partition's BrokerTopicMetrics counts; and a
//! consumer's Fetch, counted as Fetch and FetchConsumer. Divided by the broker's CPU
//! per request under W1 (BENCHMARKS.md), the share of the produce path metrics take.
//! Run: `cargo bench -p strand-broker --bench request_metrics`.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use kafka_protocol::messages::ApiKey;
use strand_broker::metrics::topic::PartitionCounters;
use strand_broker::metrics::Metrics;

fn request(metrics: &Metrics, api_key: ApiKey, version: i16) {
    let read = Instant::now();
    let mut times =
        metrics
            .requests
            .start(metrics.recorder(), api_key, version, false, read, 16_600);
    times.handled(Duration::from_micros(12));
    metrics.requests.count(&times);
    let writing = Instant::now();
    metrics
        .requests
        .written(times, None, writing, Instant::now());
}

fn request_metrics(c: &mut Criterion) {
    let metrics = Metrics::new();
    let partition = PartitionCounters::new(&metrics, "bench");
    c.bench_function("produce request metrics (one partition)", |b| {
        b.iter(|| {
            request(&metrics, ApiKey::Produce, 9);
            partition.produce_requested();
            partition.appended(16, 16_500);
        })
    });
    c.bench_function("fetch request metrics (one partition)", |b| {
        b.iter(|| {
            request(&metrics, ApiKey::Fetch, 12);
            partition.fetched(16_500, false);
        })
    });
}

criterion_group!(benches, request_metrics);
criterion_main!(benches);
