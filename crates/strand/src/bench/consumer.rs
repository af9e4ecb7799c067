//! One consumer task: fetches its partitions from an offset in a loop (long poll), counts
//! records and bytes, and reads each record's creation time from the first 8 bytes of its
//! value for end-to-end latency.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::bail;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use strand_records::{walk_stored_records, BatchView, WalkLimits};

use super::producer::now_micros;
use super::stats::Stats;
use strand_protocol::client::Connection;

pub const FETCH_VERSION: i16 = 12;
const FETCH_MAX_BYTES: i32 = 50 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 8 * 1024 * 1024;

pub struct ConsumerPlan {
    pub topic: String,
    /// partition -> first offset to read.
    pub start: HashMap<i32, i64>,
    pub measure_latency: bool,
}

pub async fn run(
    connection: Arc<Connection>,
    plan: ConsumerPlan,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut positions = plan.start.clone();
    let topic = TopicName(StrBytes::from_string(plan.topic.clone()));
    while !stop.load(Ordering::Relaxed) {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(200)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic.clone())
                .with_partitions(
                    positions
                        .iter()
                        .map(|(partition, offset)| {
                            FetchPartition::default()
                                .with_partition(*partition)
                                .with_fetch_offset(*offset)
                                .with_partition_max_bytes(PARTITION_MAX_BYTES)
                        })
                        .collect(),
                )]);
        let response: FetchResponse = connection
            .call(ApiKey::Fetch, FETCH_VERSION, &request)
            .await?;
        for topic in &response.responses {
            for partition in &topic.partitions {
                if partition.error_code != 0 {
                    bail!(
                        "fetch from partition {} failed with error {}",
                        partition.partition_index,
                        partition.error_code
                    );
                }
                let Some(records) = &partition.records else {
                    continue;
                };
                stats
                    .fetched_batch_bytes
                    .fetch_add(records.len() as u64, Ordering::Relaxed);
                let position = positions
                    .get_mut(&partition.partition_index)
                    .expect("asked for it");
                let mut rest = &records[..];
                let mut latencies = Vec::new();
                let mut count = 0u64;
                let mut bytes = 0u64;
                let now = now_micros();
                while let Ok(view) = BatchView::parse(rest) {
                    rest = &rest[view.bytes.len()..];
                    if view.header.last_offset() < *position {
                        continue;
                    }
                    let base = view.header.base_offset;
                    let from = *position;
                    walk_stored_records(&view, WalkLimits::default(), |record| {
                        if base + (record.offset_delta as i64) < from {
                            return;
                        }
                        count += 1;
                        let value = record.value.unwrap_or_default();
                        bytes += value.len() as u64;
                        if plan.measure_latency && value.len() >= 8 {
                            let created =
                                u64::from_be_bytes(value[..8].try_into().expect("eight bytes"));
                            latencies.push(now.saturating_sub(created));
                        }
                    })?;
                    *position = view.header.next_offset();
                }
                stats.record_consume(count, bytes, &latencies);
            }
        }
    }
    Ok(())
}
