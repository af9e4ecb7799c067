//! The broker's metrics, under the names the Prometheus JMX exporter's standard Kafka
//! rules give Kafka's MBeans (`kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,
//! topic=t` is `kafka_server_brokertopicmetrics_messagesin_total{topic="t"}`), so the
//! dashboards and alerts written for Kafka work on Strand unchanged.
//!
//! Request counters are handles of the `metrics` crate registered once (per API and
//! version) and kept where they are counted; request times and sizes are summaries of
//! atomic buckets (`summary.rs`) kept per API the same way; a topic's counts are atomics
//! of its own, exported at the scrape (`topic.rs`). So the request path pays atomic adds,
//! not lookups. Everything that is a state rather than an event (partition counts, log sizes,
//! consumer lag, purgatory sizes) is read from the broker when /metrics is scraped
//! (`gauges.rs`), so the request path pays nothing for it. The registry is the node's
//! own (`Exposition`), not a process-wide one: tests run several brokers in one process.

mod gauges;
pub mod names;
pub mod requests;
pub mod summary;
pub mod topic;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use metrics::{Counter, Gauge, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use metrics_util::MetricKindMask;
use strand_protocol::RequestMemory;

use crate::net::listener::Listener;
pub use gauges::ControllerCounts;
pub use requests::{RequestMetrics, RequestTimes};
pub use summary::{Summary, Unit};
pub use topic::TopicMetrics;

/// Where registered handles come from.
static METADATA: Metadata<'static> =
    Metadata::new("strand", metrics::Level::INFO, Some(module_path!()));

/// A node's registry and its Prometheus text rendering.
pub struct Exposition {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// One scrape at a time: a scrape sets every state gauge and then renders, and a
    /// gauge not set by it (a deleted partition's) is dropped from the output.
    scrape: Mutex<()>,
}

impl Default for Exposition {
    fn default() -> Self {
        Exposition::new()
    }
}

impl Exposition {
    pub fn new() -> Exposition {
        let recorder = PrometheusBuilder::new()
            // The state gauges are all set by each scrape: one it did not set is gone.
            .idle_timeout(MetricKindMask::GAUGE, Some(Duration::ZERO))
            .build_recorder();
        names::describe(&recorder);
        Exposition {
            handle: recorder.handle(),
            recorder,
            scrape: Mutex::new(()),
        }
    }

    pub fn recorder(&self) -> &PrometheusRecorder {
        &self.recorder
    }

    /// The text exposition: `collect` sets the state gauges (and exports what is
    /// counted outside the registry), then everything is rendered, and `summaries`
    /// write theirs after it.
    pub fn render(&self, collect: impl FnOnce(), summaries: impl FnOnce(&mut String)) -> String {
        let _scrape = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        collect();
        let mut text = self.handle.render();
        summaries(&mut text);
        text
    }

    /// Drops what the scrape no longer sets (see `new`).
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

pub struct Metrics {
    exposition: Exposition,
    /// BrokerTopicMetrics without a topic label: all topics.
    all_topics: topic::AllTopics,
    topics: Mutex<HashMap<String, Arc<TopicMetrics>>>,
    pub requests: RequestMetrics,
    /// kafka.server:type=ReplicaManager,name=IsrShrinksPerSec / IsrExpandsPerSec
    pub isr_shrinks: Counter,
    pub isr_expands: Counter,
    /// kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs: each log flush's fsyncs.
    pub log_flush_ms: Arc<Summary>,
    /// Produce requests waiting for their syncs or replication (Kafka's produce
    /// purgatory).
    waiting_produces: Arc<AtomicI64>,
    /// The listeners and the request-memory pool, once the server runs.
    network: OnceLock<Network>,
}

/// Counts a produce request in the purgatory size while it lives.
pub struct WaitingProduce(Arc<AtomicI64>);

impl Drop for WaitingProduce {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Network {
    listeners: Vec<Arc<Listener>>,
    request_memory: Arc<RequestMemory>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let exposition = Exposition::new();
        let recorder = exposition.recorder();
        let all_topics = topic::AllTopics::register(recorder);
        let requests = RequestMetrics::new();
        let isr_shrinks = counter(recorder, names::ISR_SHRINKS, Vec::new());
        let isr_expands = counter(recorder, names::ISR_EXPANDS, Vec::new());
        let log_flush_ms = Arc::new(Summary::new(Unit::Millis));
        Metrics {
            exposition,
            all_topics,
            topics: Mutex::new(HashMap::new()),
            requests,
            isr_shrinks,
            isr_expands,
            log_flush_ms,
            waiting_produces: Arc::new(AtomicI64::new(0)),
            network: OnceLock::new(),
        }
    }

    /// The BrokerTopicMetrics of `topic`, shared by its partitions.
    pub fn topic(&self, topic: &str) -> Arc<TopicMetrics> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        topics
            .entry(topic.to_string())
            .or_insert_with(|| Arc::new(TopicMetrics::register(self.recorder(), topic)))
            .clone()
    }

    /// A produce request starts waiting; it is counted until the guard is dropped.
    pub fn produce_waiting(&self) -> WaitingProduce {
        self.waiting_produces.fetch_add(1, Ordering::Relaxed);
        WaitingProduce(self.waiting_produces.clone())
    }

    /// The server's listeners and request-memory pool, reported from now on.
    pub fn watch_network(&self, listeners: Vec<Arc<Listener>>, request_memory: Arc<RequestMemory>) {
        let _ = self.network.set(Network {
            listeners,
            request_memory,
        });
    }

    pub fn upkeep(&self) {
        self.exposition.upkeep();
        let now = std::time::Instant::now();
        self.requests.upkeep(now);
        self.log_flush_ms.upkeep(now);
    }

    /// The Prometheus text exposition of everything, the broker's state read now.
    pub async fn render(&self, broker: &crate::Broker) -> String {
        let gathered = gauges::Gathered::read(broker).await;
        self.exposition.render(
            || {
                gauges::collect(self, broker, &gathered);
                let topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
                self.all_topics.export(topics.values());
            },
            |out| {
                self.requests.render(out);
                let flush = [("", &*self.log_flush_ms)];
                let help = names::help(names::LOG_FLUSH_MS);
                summary::render(out, names::LOG_FLUSH_MS, help, flush);
            },
        )
    }

    pub fn recorder(&self) -> &PrometheusRecorder {
        self.exposition.recorder()
    }
}

pub(crate) fn key(name: &'static str, labels: Vec<Label>) -> Key {
    Key::from_parts(name, labels)
}

pub(crate) fn counter(
    recorder: &PrometheusRecorder,
    name: &'static str,
    labels: Vec<Label>,
) -> Counter {
    recorder.register_counter(&key(name, labels), &METADATA)
}

pub(crate) fn gauge(
    recorder: &PrometheusRecorder,
    name: &'static str,
    labels: Vec<Label>,
) -> Gauge {
    recorder.register_gauge(&key(name, labels), &METADATA)
}
