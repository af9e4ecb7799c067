//! BrokerTopicMetrics: what producers and consumers moved, per topic and for all topics,
//! counted where Kafka's ReplicaManager and KafkaApis count it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metrics::{Counter, Label};
use metrics_exporter_prometheus::PrometheusRecorder;

use super::summary::{Summary, Unit};
use super::{counter, names};
use strand_types::error_code;

/// What BrokerTopicMetrics counts, each a series.
#[derive(Debug, Clone, Copy)]
enum Count {
    MessagesIn,
    BytesIn,
    BytesOut,
    ReplicationBytesIn,
    ReplicationBytesOut,
    FailedProduce,
    FailedFetch,
    TotalProduce,
    TotalFetch,
    RemoteCopyBytes,
    RemoteCopyRequests,
    RemoteCopyErrors,
    RemoteFetchBytes,
    RemoteFetchRequests,
    RemoteFetchErrors,
}

const COUNTS: usize = 15;

/// Each count's series, and whether Kafka reports it per topic (the replication bytes
/// are for all topics only).
const SERIES: [(Count, &str, bool); COUNTS] = [
    (Count::MessagesIn, names::MESSAGES_IN, true),
    (Count::BytesIn, names::BYTES_IN, true),
    (Count::BytesOut, names::BYTES_OUT, true),
    (
        Count::ReplicationBytesIn,
        names::REPLICATION_BYTES_IN,
        false,
    ),
    (
        Count::ReplicationBytesOut,
        names::REPLICATION_BYTES_OUT,
        false,
    ),
    (Count::FailedProduce, names::FAILED_PRODUCE, true),
    (Count::FailedFetch, names::FAILED_FETCH, true),
    (Count::TotalProduce, names::TOTAL_PRODUCE, true),
    (Count::TotalFetch, names::TOTAL_FETCH, true),
    (Count::RemoteCopyBytes, names::REMOTE_COPY_BYTES, true),
    (Count::RemoteCopyRequests, names::REMOTE_COPY_REQUESTS, true),
    (Count::RemoteCopyErrors, names::REMOTE_COPY_ERRORS, true),
    (Count::RemoteFetchBytes, names::REMOTE_FETCH_BYTES, true),
    (
        Count::RemoteFetchRequests,
        names::REMOTE_FETCH_REQUESTS,
        true,
    ),
    (Count::RemoteFetchErrors, names::REMOTE_FETCH_ERRORS, true),
];

/// One topic's counts. The request path adds to plain atomics of the topic's own; a
/// scrape copies them into the exported counters and sums them into the all-topics ones
/// (`export`), so an append pays three uncontended adds, not a shared counter per event.
#[derive(Debug)]
pub struct TopicMetrics {
    counts: [AtomicU64; COUNTS],
    exported: [Counter; COUNTS],
}

impl TopicMetrics {
    /// `topic`'s counters, registered.
    pub fn register(recorder: &PrometheusRecorder, topic: &str) -> TopicMetrics {
        TopicMetrics {
            counts: Default::default(),
            exported: SERIES.map(|(_, name, per_topic)| {
                if per_topic {
                    counter(recorder, name, vec![Label::new("topic", topic.to_string())])
                } else {
                    Counter::noop()
                }
            }),
        }
    }

    /// Counts that go nowhere (a partition made outside a broker, in tests).
    pub fn detached() -> TopicMetrics {
        TopicMetrics {
            counts: Default::default(),
            exported: SERIES.map(|_| Counter::noop()),
        }
    }

    fn add(&self, count: Count, value: u64) {
        self.counts[count as usize].fetch_add(value, Ordering::Relaxed);
    }

    /// Copies the counts into the exported series, adding them to `totals`.
    fn export(&self, totals: &mut [u64; COUNTS]) {
        for (index, (count, exported)) in self.counts.iter().zip(&self.exported).enumerate() {
            let value = count.load(Ordering::Relaxed);
            exported.absolute(value);
            totals[index] += value;
        }
    }
}

/// The all-topics series of BrokerTopicMetrics (no topic label).
#[derive(Debug)]
pub struct AllTopics([Counter; COUNTS]);

impl AllTopics {
    pub fn register(recorder: &PrometheusRecorder) -> AllTopics {
        AllTopics(SERIES.map(|(_, name, _)| counter(recorder, name, Vec::new())))
    }

    /// Exports every topic's counts, and their sums as the all-topics series (a deleted
    /// topic's counts stay in the sums: counters never go down).
    pub fn export<'a>(&self, topics: impl Iterator<Item = &'a Arc<TopicMetrics>>) {
        let mut totals = [0u64; COUNTS];
        for topic in topics {
            topic.export(&mut totals);
        }
        for (counter, total) in self.0.iter().zip(totals) {
            counter.absolute(total);
        }
    }
}

/// A partition's counters: its topic's BrokerTopicMetrics, and the broker-wide ones
/// its events feed.
#[derive(Debug, Clone)]
pub struct PartitionCounters {
    topic: Arc<TopicMetrics>,
    isr_shrinks: Counter,
    isr_expands: Counter,
    /// LogFlushRateAndTimeMs
    pub flush_ms: Arc<Summary>,
}

impl PartitionCounters {
    pub fn new(metrics: &super::Metrics, topic: &str) -> PartitionCounters {
        PartitionCounters {
            topic: metrics.topic(topic),
            isr_shrinks: metrics.isr_shrinks.clone(),
            isr_expands: metrics.isr_expands.clone(),
            flush_ms: metrics.log_flush_ms.clone(),
        }
    }

    pub fn detached() -> PartitionCounters {
        PartitionCounters {
            topic: Arc::new(TopicMetrics::detached()),
            isr_shrinks: Counter::noop(),
            isr_expands: Counter::noop(),
            flush_ms: Arc::new(Summary::new(Unit::Millis)),
        }
    }

    pub fn isr_shrunk(&self) {
        self.isr_shrinks.increment(1);
    }

    pub fn isr_expanded(&self) {
        self.isr_expands.increment(1);
    }

    /// A producer's batch for this partition, before the append.
    pub fn produce_requested(&self) {
        self.topic.add(Count::TotalProduce, 1);
    }

    /// A producer's batch appended.
    pub fn appended(&self, records: u64, bytes: u64) {
        self.topic.add(Count::MessagesIn, records);
        self.topic.add(Count::BytesIn, bytes);
    }

    /// A producer's batch refused with `code`. As Kafka, the refusals that are a
    /// client's ordinary news (leadership moved, too large, corrupt, storage) are not
    /// failures of the broker and are not counted.
    pub fn append_refused(&self, code: i16) {
        if !EXPECTED_PRODUCE_ERRORS.contains(&code) {
            self.topic.add(Count::FailedProduce, 1);
        }
    }

    /// A partition's read answered: `bytes` of records to a consumer or a follower.
    pub fn fetched(&self, bytes: u64, follower: bool) {
        self.topic.add(Count::TotalFetch, 1);
        let count = if follower {
            Count::ReplicationBytesOut
        } else {
            Count::BytesOut
        };
        self.topic.add(count, bytes);
    }

    /// A partition's read failed with `code`: only an unexpected failure counts
    /// (Kafka's ReplicaManager.readFromLog).
    pub fn fetch_failed(&self, code: i16) {
        if !EXPECTED_FETCH_ERRORS.contains(&code) {
            self.topic.add(Count::FailedFetch, 1);
        }
    }

    /// A follower appended `bytes` fetched from its leader.
    pub fn replicated_in(&self, bytes: u64) {
        self.topic.add(Count::ReplicationBytesIn, bytes);
    }

    /// Tiered storage copied a segment of `bytes` (its log) to the remote store, or
    /// failed to (`bytes` None).
    pub fn remote_copied(&self, bytes: Option<u64>) {
        self.topic.add(Count::RemoteCopyRequests, 1);
        match bytes {
            Some(bytes) => self.topic.add(Count::RemoteCopyBytes, bytes),
            None => self.topic.add(Count::RemoteCopyErrors, 1),
        }
    }

    /// A read of the remote store got `bytes`, or failed (`bytes` None).
    pub fn remote_fetched(&self, bytes: Option<u64>) {
        self.topic.add(Count::RemoteFetchRequests, 1);
        match bytes {
            Some(bytes) => self.topic.add(Count::RemoteFetchBytes, bytes),
            None => self.topic.add(Count::RemoteFetchErrors, 1),
        }
    }
}

/// Kafka's appendToLocalLog marks no failure for these.
const EXPECTED_PRODUCE_ERRORS: [i16; 6] = [
    error_code::UNKNOWN_TOPIC_OR_PARTITION,
    error_code::NOT_LEADER_OR_FOLLOWER,
    error_code::MESSAGE_TOO_LARGE,
    error_code::RECORD_LIST_TOO_LARGE,
    error_code::CORRUPT_MESSAGE,
    error_code::KAFKA_STORAGE_ERROR,
];

/// Kafka's readFromLog marks no failure for these.
const EXPECTED_FETCH_ERRORS: [i16; 10] = [
    error_code::UNKNOWN_TOPIC_OR_PARTITION,
    error_code::NOT_LEADER_OR_FOLLOWER,
    error_code::UNKNOWN_LEADER_EPOCH,
    error_code::FENCED_LEADER_EPOCH,
    error_code::REPLICA_NOT_AVAILABLE,
    error_code::KAFKA_STORAGE_ERROR,
    error_code::INCONSISTENT_TOPIC_ID,
    error_code::OFFSET_OUT_OF_RANGE,
    error_code::UNKNOWN_TOPIC_ID,
    error_code::OFFSET_MOVED_TO_TIERED_STORAGE,
];
