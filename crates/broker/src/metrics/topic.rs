//! BrokerTopicMetrics: what producers and consumers moved, per topic and for all topics,
//! counted where Kafka's ReplicaManager and KafkaApis count it.

use std::sync::Arc;

use metrics::{Counter, Histogram, Label};
use metrics_exporter_prometheus::PrometheusRecorder;

use super::{counter, names};
use strand_types::error_code;

#[derive(Debug)]
pub struct TopicMetrics {
    pub messages_in: Counter,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub replication_bytes_out: Counter,
    pub failed_produce: Counter,
    pub failed_fetch: Counter,
    pub total_produce: Counter,
    pub total_fetch: Counter,
}

impl TopicMetrics {
    /// Registers `topic`'s counters (None: the all-topics ones, without a label).
    pub fn register(recorder: &PrometheusRecorder, topic: Option<&str>) -> TopicMetrics {
        let labels = || -> Vec<Label> {
            topic
                .map(|t| vec![Label::new("topic", t.to_string())])
                .unwrap_or_default()
        };
        TopicMetrics {
            messages_in: counter(recorder, names::MESSAGES_IN, labels()),
            bytes_in: counter(recorder, names::BYTES_IN, labels()),
            bytes_out: counter(recorder, names::BYTES_OUT, labels()),
            replication_bytes_out: counter(recorder, names::REPLICATION_BYTES_OUT, labels()),
            failed_produce: counter(recorder, names::FAILED_PRODUCE, labels()),
            failed_fetch: counter(recorder, names::FAILED_FETCH, labels()),
            total_produce: counter(recorder, names::TOTAL_PRODUCE, labels()),
            total_fetch: counter(recorder, names::TOTAL_FETCH, labels()),
        }
    }

    /// Counters that count nothing (a partition made outside a broker, in tests).
    pub fn detached() -> TopicMetrics {
        TopicMetrics {
            messages_in: Counter::noop(),
            bytes_in: Counter::noop(),
            bytes_out: Counter::noop(),
            replication_bytes_out: Counter::noop(),
            failed_produce: Counter::noop(),
            failed_fetch: Counter::noop(),
            total_produce: Counter::noop(),
            total_fetch: Counter::noop(),
        }
    }
}

/// A partition's counters: its topic's and the all-topics ones, each event counted in
/// both as Kafka does; and the broker-wide ones a partition's events feed.
#[derive(Debug, Clone)]
pub struct PartitionCounters {
    topic: Arc<TopicMetrics>,
    all: Arc<TopicMetrics>,
    isr_shrinks: Counter,
    isr_expands: Counter,
    /// LogFlushRateAndTimeMs
    pub flush_ms: Histogram,
}

impl PartitionCounters {
    pub fn new(metrics: &super::Metrics, topic: &str) -> PartitionCounters {
        PartitionCounters {
            topic: metrics.topic(topic),
            all: metrics.all_topics.clone(),
            isr_shrinks: metrics.isr_shrinks.clone(),
            isr_expands: metrics.isr_expands.clone(),
            flush_ms: metrics.log_flush_ms.clone(),
        }
    }

    pub fn detached() -> PartitionCounters {
        let none = Arc::new(TopicMetrics::detached());
        PartitionCounters {
            topic: none.clone(),
            all: none,
            isr_shrinks: Counter::noop(),
            isr_expands: Counter::noop(),
            flush_ms: Histogram::noop(),
        }
    }

    pub fn isr_shrunk(&self) {
        self.isr_shrinks.increment(1);
    }

    pub fn isr_expanded(&self) {
        self.isr_expands.increment(1);
    }

    fn both(&self, count: impl Fn(&TopicMetrics)) {
        count(&self.topic);
        count(&self.all);
    }

    /// A producer's batch for this partition, before the append.
    pub fn produce_requested(&self) {
        self.both(|m| m.total_produce.increment(1));
    }

    /// A producer's batch appended.
    pub fn appended(&self, records: u64, bytes: u64) {
        self.both(|m| {
            m.messages_in.increment(records);
            m.bytes_in.increment(bytes);
        });
    }

    /// A producer's batch refused with `code`. As Kafka, the refusals that are a
    /// client's ordinary news (leadership moved, too large, corrupt, storage) are not
    /// failures of the broker and are not counted.
    pub fn append_refused(&self, code: i16) {
        if !EXPECTED_PRODUCE_ERRORS.contains(&code) {
            self.both(|m| m.failed_produce.increment(1));
        }
    }

    /// A partition's read answered: `bytes` of records to a consumer or a follower.
    pub fn fetched(&self, bytes: u64, follower: bool) {
        self.both(|m| {
            m.total_fetch.increment(1);
            if follower {
                m.replication_bytes_out.increment(bytes);
            } else {
                m.bytes_out.increment(bytes);
            }
        });
    }

    /// A partition's read failed with `code`: only an unexpected failure counts
    /// (Kafka's ReplicaManager.readFromLog).
    pub fn fetch_failed(&self, code: i16) {
        if !EXPECTED_FETCH_ERRORS.contains(&code) {
            self.both(|m| m.failed_fetch.increment(1));
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
const EXPECTED_FETCH_ERRORS: [i16; 9] = [
    error_code::UNKNOWN_TOPIC_OR_PARTITION,
    error_code::NOT_LEADER_OR_FOLLOWER,
    error_code::UNKNOWN_LEADER_EPOCH,
    error_code::FENCED_LEADER_EPOCH,
    error_code::REPLICA_NOT_AVAILABLE,
    error_code::KAFKA_STORAGE_ERROR,
    error_code::INCONSISTENT_TOPIC_ID,
    error_code::OFFSET_OUT_OF_RANGE,
    error_code::UNKNOWN_TOPIC_ID,
];
