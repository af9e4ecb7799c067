//! One producer task: batches of `record_bytes` records to partitions in turn, each sent
//! to its partition's leader, up to `in_flight` requests pipelined per connection, paced
//! by an optional rate. Each
//! record's value starts with its creation time (microseconds since the Unix epoch) so a
//! consumer anywhere on the machine can measure end-to-end latency.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use strand_records::{BatchBuilder, Compression, Record};

use super::stats::Stats;
use strand_protocol::client::{decode_response, Connection};

pub const PRODUCE_VERSION: i16 = 9;

pub struct ProducerPlan {
    pub topic: String,
    pub partitions: Vec<i32>,
    pub record_bytes: usize,
    pub records_per_batch: usize,
    pub acks: i16,
    pub compression: Compression,
    /// Records per second for this producer (None: as fast as it can).
    pub rate: Option<f64>,
    /// Records this producer sends at most (shared budget across producers).
    pub budget: Arc<AtomicU64>,
}

pub fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// `connections`: each of the plan's partitions -> a connection to its leader.
pub async fn run(
    connections: HashMap<i32, Arc<Connection>>,
    plan: ProducerPlan,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let filler: Vec<u8> = (0..plan.record_bytes.max(8))
        .map(|i| (i * 131 % 251) as u8)
        .collect();
    let started = Instant::now();
    let mut sent_records = 0u64;
    let mut next = 0usize;
    let mut pending = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let batch_records = claim(&plan.budget, plan.records_per_batch as u64);
        if batch_records == 0 {
            break;
        }
        if let Some(rate) = plan.rate {
            // Pace: the batch goes when its records are due.
            let due =
                started + Duration::from_secs_f64((sent_records + batch_records) as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let partition = plan.partitions[next % plan.partitions.len()];
        next += 1;
        let now = now_micros();
        let mut builder = BatchBuilder::new(0, (now / 1000) as i64).compression(plan.compression);
        for _ in 0..batch_records {
            let mut value = filler.clone();
            value[..8].copy_from_slice(&now.to_be_bytes());
            builder.push(Record::new(None, Some(value), (now / 1000) as i64));
        }
        let batch = Bytes::from(builder.build());
        let bytes = batch_records * plan.record_bytes as u64;
        let batch_bytes = batch.len() as u64;
        let request = ProduceRequest::default()
            .with_acks(plan.acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(plan.topic.clone())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(batch))])]);
        sent_records += batch_records;
        let connection = &connections[&partition];
        let slot = connection.slot().await;
        let sent_at = Instant::now();
        let receiver = connection
            .send(ApiKey::Produce, PRODUCE_VERSION, &request)
            .await?;
        if plan.acks == 0 {
            drop(slot);
            drop(receiver);
            stats.record_produce(batch_records, bytes, None);
            stats
                .produced_batch_bytes
                .fetch_add(batch_bytes, Ordering::Relaxed);
            continue;
        }
        let stats = stats.clone();
        pending.push(tokio::spawn(async move {
            let frame = receiver.await??;
            drop(slot);
            let response: ProduceResponse =
                decode_response(frame, ApiKey::Produce, PRODUCE_VERSION)?;
            for topic in &response.responses {
                for partition in &topic.partition_responses {
                    if partition.error_code != 0 {
                        bail!(
                            "produce to partition {} failed with error {}",
                            partition.index,
                            partition.error_code
                        );
                    }
                }
            }
            stats.record_produce(
                batch_records,
                bytes,
                Some(sent_at.elapsed().as_micros() as u64),
            );
            stats
                .produced_batch_bytes
                .fetch_add(batch_bytes, Ordering::Relaxed);
            Ok(())
        }));
        if pending.len() >= 1024 {
            for task in pending.drain(..pending.len() - 256) {
                task.await??;
            }
        }
    }
    for task in pending {
        task.await??;
    }
    Ok(())
}

/// Takes up to `wanted` records from the shared budget.
fn claim(budget: &AtomicU64, wanted: u64) -> u64 {
    let mut current = budget.load(Ordering::Relaxed);
    loop {
        let take = current.min(wanted);
        if take == 0 {
            return 0;
        }
        match budget.compare_exchange_weak(
            current,
            current - take,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return take,
            Err(actual) => current = actual,
        }
    }
}
