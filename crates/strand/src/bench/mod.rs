//! `strand bench`: a load generator for any Kafka broker (Strand or Apache Kafka).
//! Producers and consumers with configurable record size, batch size, linger, acks,
//! partitions, compression, rate and duration; a live progress line; at the end
//! throughput and latency percentiles (HdrHistogram) for produce acknowledgement and end
//! to end, optionally as JSON. Requests go to each partition's leader, so it runs
//! against a cluster as well as one broker.

mod consumer;
mod leaders;
mod producer;
mod stats;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, ListOffsetsRequest,
    ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strand_records::Compression;

use crate::cli::produce::{parse_acks, parse_compression};
use leaders::Leaders;
use stats::{Report, Stats};
use strand_protocol::client::Connection;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Broker to benchmark (any Kafka broker).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    #[arg(long, default_value = "strand-bench")]
    pub topic: String,
    /// Partitions of the topic (created if missing).
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Replication factor of the topic if it is created (-1: the broker's default).
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Bytes of records per batch (batch.size).
    #[arg(long, default_value_t = 16 * 1024)]
    pub batch_size: usize,
    /// With --rate: the longest a batch waits to fill (linger.ms).
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// 0, 1 or all (-1).
    #[arg(long, default_value = "1", value_parser = parse_acks)]
    pub acks: i16,
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumers reading the topic while (or after) it is written.
    #[arg(long, default_value_t = 0)]
    pub consumers: usize,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    pub compression: Compression,
    /// Records per second across all producers (default: as fast as possible).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Records to produce in all (default: as many as the duration allows).
    #[arg(long)]
    pub records: Option<u64>,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Consumers start at the earliest offset instead of the end.
    #[arg(long)]
    pub from_beginning: bool,
    /// Write the report as JSON to this file ("-": standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<Report> {
    if args.record_size < 8 {
        bail!("--record-size must be at least 8 (the value carries its creation time)");
    }
    let admin = Connection::connect(&args.bootstrap, 1).await?;
    ensure_topic(
        &admin,
        &args.topic,
        args.partitions,
        args.replication_factor,
    )
    .await?;
    let leaders = Leaders::wait_for(&admin, &args.topic, args.partitions, LEADERS_TIMEOUT).await?;
    let partitions: Vec<i32> = (0..args.partitions).collect();
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();

    for index in 0..args.consumers {
        let mine: Vec<i32> = partitions
            .iter()
            .copied()
            .filter(|p| *p as usize % args.consumers == index)
            .collect();
        // One fetch loop per leader of this consumer's partitions.
        for (address, group) in leaders.group(&mine) {
            let connection = Arc::new(Connection::connect(&address, 1).await?);
            let start = start_offsets(
                &connection,
                &args.topic,
                &group,
                if args.from_beginning { -2 } else { -1 },
            )
            .await?;
            let plan = consumer::ConsumerPlan {
                topic: args.topic.clone(),
                start,
                measure_latency: args.producers > 0,
            };
            tasks.push(tokio::spawn(consumer::run(
                connection,
                plan,
                stats.clone(),
                stop.clone(),
            )));
        }
    }

    let budget = Arc::new(AtomicU64::new(args.records.unwrap_or(u64::MAX)));
    let per_batch_by_size = (args.batch_size / args.record_size).max(1);
    let mut producers = Vec::new();
    for index in 0..args.producers {
        let rate = args.rate.map(|r| r / args.producers as f64);
        let records_per_batch = match rate {
            Some(rate) => {
                per_batch_by_size.min(((rate * args.linger_ms as f64 / 1000.0) as usize).max(1))
            }
            None => per_batch_by_size,
        };
        let mut rotated = partitions.clone();
        rotated.rotate_left(index % partitions.len().max(1));
        let plan = producer::ProducerPlan {
            topic: args.topic.clone(),
            partitions: rotated,
            record_bytes: args.record_size,
            records_per_batch,
            acks: args.acks,
            compression: args.compression,
            rate,
            budget: budget.clone(),
        };
        let by_leader = leaders.connect(&plan.partitions, args.in_flight).await?;
        let connections = plan
            .partitions
            .iter()
            .map(|p| (*p, by_leader[leaders.of(*p)].clone()))
            .collect();
        producers.push(tokio::spawn(producer::run(
            connections,
            plan,
            stats.clone(),
            stop.clone(),
        )));
    }

    let started = Instant::now();
    let started_us = producer::now_micros();
    let deadline = started + Duration::from_secs(args.duration_secs);
    let progress = (!args.quiet).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let elapsed = started.elapsed().as_secs_f64().max(1e-3);
        let produced = stats.produced_records.load(Ordering::Relaxed);
        let consumed = stats.consumed_records.load(Ordering::Relaxed);
        if let Some(bar) = &progress {
            bar.set_message(format!(
                "{elapsed:.0}s  produced {produced} ({:.0}/s)  consumed {consumed} ({:.0}/s)",
                produced as f64 / elapsed,
                consumed as f64 / elapsed
            ));
        }
        let producers_done = producers.iter().all(|p| p.is_finished());
        // Consumers only stop when told to: one that finished has failed (reported below).
        let consumer_failed = tasks.iter().any(|t| t.is_finished());
        let finished = if args.producers > 0 {
            producers_done && (args.consumers == 0 || consumed >= produced)
        } else {
            args.records.is_some_and(|wanted| consumed >= wanted)
        };
        if Instant::now() >= deadline || consumer_failed || finished {
            break;
        }
    }
    let finished_by_count = Instant::now() < deadline;
    let seconds = match stats.last_event_us.load(Ordering::Relaxed) {
        // Done by count: the run ended at its last acknowledgement or read, not at the
        // progress loop's next tick (which would add up to 250 ms).
        last if finished_by_count && last > started_us => (last - started_us) as f64 / 1e6,
        _ => started.elapsed().as_secs_f64(),
    };
    stop.store(true, Ordering::Relaxed);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    for task in producers.into_iter().chain(tasks) {
        task.await.context("benchmark task panicked")??;
    }
    let report = Report::from(&stats, seconds);
    report.print();
    match &args.json {
        Some(path) if path.as_os_str() == "-" => {
            println!("{}", serde_json::to_string_pretty(&report)?)
        }
        Some(path) => std::fs::write(path, serde_json::to_vec_pretty(&report)?)?,
        None => {}
    }
    Ok(report)
}

/// How long a new topic's partitions may take to get leaders.
const LEADERS_TIMEOUT: Duration = Duration::from_secs(30);

async fn ensure_topic(
    connection: &Connection,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> anyhow::Result<()> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)]);
    let response: CreateTopicsResponse = connection.call(ApiKey::CreateTopics, 5, &request).await?;
    for result in &response.topics {
        // 36: TOPIC_ALREADY_EXISTS is fine: the benchmark reuses it.
        if result.error_code != 0 && result.error_code != 36 {
            bail!(
                "creating topic {topic} failed with error {}",
                result.error_code
            );
        }
    }
    Ok(())
}

async fn start_offsets(
    connection: &Connection,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<HashMap<i32, i64>> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(*p)
                            .with_timestamp(timestamp)
                    })
                    .collect(),
            )]);
    let response: ListOffsetsResponse = connection.call(ApiKey::ListOffsets, 5, &request).await?;
    let mut offsets = HashMap::new();
    for topic in &response.topics {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                bail!(
                    "listing offsets of partition {} failed with error {}",
                    partition.partition_index,
                    partition.error_code
                );
            }
            offsets.insert(partition.partition_index, partition.offset);
        }
    }
    Ok(offsets)
}

pub fn run_blocking(args: BenchArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args)).map(|_| ())
}

/// A short self-check against a broker started in-process (used by the tests).
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn produces_and_consumes_against_a_real_broker() {
        let dir = std::env::temp_dir().join(format!("strand-bench-test-{}", std::process::id()));
        // A fixed free port: the broker advertises its configured address, and the bench
        // connects to the leaders the metadata names.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = strand_broker::BrokerConfig {
            listen: format!("127.0.0.1:{port}").parse().unwrap(),
            data_dir: dir.clone(),
            ..Default::default()
        };
        let broker = strand_broker::Broker::open(config).unwrap();
        let (address, handle, server) = strand_broker::serve(broker).await.unwrap();
        tokio::spawn(server);
        let args = BenchArgs {
            bootstrap: address.to_string(),
            topic: "bench".into(),
            partitions: 3,
            replication_factor: 1,
            record_size: 100,
            batch_size: 1000,
            linger_ms: 5,
            acks: -1,
            producers: 2,
            consumers: 2,
            compression: Compression::Lz4,
            rate: None,
            records: Some(3_000),
            duration_secs: 60,
            in_flight: 5,
            from_beginning: false,
            json: None,
            quiet: true,
        };
        let report = run(args).await.unwrap();
        assert_eq!(report.produced_records, 3_000);
        assert_eq!(
            report.consumed_records, 3_000,
            "every produced record was consumed"
        );
        assert!(report.produce_latency.is_some() && report.end_to_end_latency.is_some());
        handle.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }
}
