//! The state gauges, read from the broker at each scrape: replica manager and controller
//! counts, each hosted log's size and offsets, consumer lag of the groups coordinated
//! here, waiting requests, the request-memory pool and connections per listener.
//! Nothing on the request path keeps them.

use metrics::Label;
use std::collections::BTreeMap;

use metrics_exporter_prometheus::PrometheusRecorder;

use super::{gauge, names, Metrics};
use crate::Broker;

/// What a scrape reads from the broker before it sets the gauges: the parts that need to
/// wait (the quorum's view, the group coordinator's shards).
#[derive(Debug, Default)]
pub struct Gathered {
    /// This node is the quorum's leader (a single node is its own controller).
    pub active_controller: bool,
    /// Each group's committed offsets: group -> (topic, partition) -> offset.
    pub group_offsets: BTreeMap<String, BTreeMap<(String, i32), i64>>,
    /// The quorum's replica keys: messages refused, awaiting its directory's record.
    pub replica_keys: Option<(u64, bool)>,
}

impl Gathered {
    pub async fn read(broker: &Broker) -> Gathered {
        let (active_controller, replica_keys) = match broker.cluster() {
            None => (true, None),
            Some(cluster) => (
                cluster.controller_id().await == Some(broker.node_id()),
                cluster.replica_keys().await,
            ),
        };
        let mut group_offsets = BTreeMap::new();
        for group in broker.groups.list(broker).await {
            let Ok(offsets) = broker
                .groups
                .fetch_offsets(broker, &group.group_id, None)
                .await
            else {
                continue;
            };
            let committed: BTreeMap<(String, i32), i64> = offsets
                .into_iter()
                .filter_map(|(topic, partition, offset)| Some(((topic, partition), offset?.offset)))
                .collect();
            group_offsets.insert(group.group_id, committed);
        }
        Gathered {
            active_controller,
            group_offsets,
            replica_keys,
        }
    }
}

pub(super) fn collect(metrics: &Metrics, broker: &Broker, observed: &Gathered) {
    let recorder = metrics.recorder();
    let set = |name: &'static str, labels: Vec<Label>, value: f64| {
        gauge(recorder, name, labels).set(value);
    };
    let tp_labels = |topic: &str, partition: i32| {
        vec![
            Label::new("topic", topic.to_string()),
            Label::new("partition", partition.to_string()),
        ]
    };
    let node = broker.node_id();
    let partitions = broker.hosted_partitions();
    let (mut leaders, mut under_replicated, mut under_min_isr, mut at_min_isr, mut offline) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut parked_fetches = 0usize;
    let mut high_watermarks = BTreeMap::new();
    for partition in &partitions {
        let assignment = partition.assignment();
        let min_isr = partition.min_insync_replicas().max(1) as usize;
        if assignment.leader == node {
            leaders += 1;
            under_replicated += u64::from(assignment.isr.len() < assignment.replicas.len());
            under_min_isr += u64::from(assignment.isr.len() < min_isr);
            at_min_isr += u64::from(assignment.isr.len() == min_isr);
        }
        parked_fetches += partition.parked_fetch_count();
        let tp = &partition.tp;
        let (size, start, end, segments, high_watermark, is_offline) = {
            let log = partition.log();
            (
                log.size_bytes(),
                log.log_start_offset(),
                log.log_end_offset(),
                log.segment_count(),
                log.high_watermark(),
                log.offline_reason().is_some(),
            )
        };
        offline += u64::from(is_offline);
        if assignment.leader >= 0 && assignment.leader != node {
            // As Kafka's fetcher: the leader's high watermark less this replica's end.
            let lag = (partition.leader_high_watermark() - end).max(0);
            let mut labels = vec![Label::new(
                "clientid",
                format!("ReplicaFetcherThread-0-{}", assignment.leader),
            )];
            labels.extend(tp_labels(&tp.topic, tp.partition));
            set(names::FOLLOWER_LAG, labels, lag as f64);
        }
        if !observed.group_offsets.is_empty() {
            high_watermarks.insert((tp.topic.clone(), tp.partition), high_watermark);
        }
        let log_gauges = [
            (names::LOG_SIZE, size as f64),
            (names::LOG_START_OFFSET, start as f64),
            (names::LOG_END_OFFSET, end as f64),
            (names::LOG_SEGMENTS, segments as f64),
        ];
        for (name, value) in log_gauges {
            set(name, tp_labels(&tp.topic, tp.partition), value);
        }
    }
    if let Some(tiered) = broker.tiered() {
        // Per topic, over the partitions this broker leads (each copy counted once):
        // what the store holds, and the sealed segments above its end (Kafka's copy lag:
        // the local-only segments but the active one).
        let mut remote: BTreeMap<&str, [u64; 6]> = BTreeMap::new();
        for partition in partitions.iter().filter(|p| p.assignment().leader == node) {
            let Some(remote_log) = tiered.remote_log(&partition.tp) else {
                continue;
            };
            let Some((held_bytes, held_copies, end)) =
                remote_log.with(|s| (s.size_bytes(), s.len(), s.end_offset()))
            else {
                continue;
            };
            let summaries = partition.log().segment_summaries();
            let sealed = &summaries[..summaries.len().saturating_sub(1)];
            let uncopied = sealed
                .iter()
                .filter(|(base, _)| end.is_none_or(|end| *base > end));
            let (lag_bytes, lag_segments) = uncopied.fold((0, 0), |(bytes, count), (_, size)| {
                (bytes + size, count + 1)
            });
            let config = partition.log().config().clone();
            let expired = crate::tiered::expired_copies(partition, &remote_log, &config);
            let delete_lag_bytes: u64 = expired.iter().map(|c| c.size_bytes).sum();
            let topic = remote.entry(partition.tp.topic.as_str()).or_default();
            let values = [
                held_bytes,
                held_copies as u64,
                lag_bytes,
                lag_segments,
                delete_lag_bytes,
                expired.len() as u64,
            ];
            for (sum, value) in topic.iter_mut().zip(values) {
                *sum += value;
            }
        }
        let series = [
            names::REMOTE_LOG_SIZE,
            names::REMOTE_LOG_METADATA_COUNT,
            names::REMOTE_COPY_LAG_BYTES,
            names::REMOTE_COPY_LAG_SEGMENTS,
            names::REMOTE_DELETE_LAG_BYTES,
            names::REMOTE_DELETE_LAG_SEGMENTS,
        ];
        for (topic, values) in remote {
            for (name, value) in series.into_iter().zip(values) {
                set(
                    name,
                    vec![Label::new("topic", topic.to_string())],
                    value as f64,
                );
            }
        }
    }
    set(names::PARTITION_COUNT, Vec::new(), partitions.len() as f64);
    set(names::LEADER_COUNT, Vec::new(), leaders as f64);
    set(names::UNDER_REPLICATED, Vec::new(), under_replicated as f64);
    set(names::UNDER_MIN_ISR, Vec::new(), under_min_isr as f64);
    set(names::AT_MIN_ISR, Vec::new(), at_min_isr as f64);
    set(names::OFFLINE_REPLICAS, Vec::new(), offline as f64);

    ControllerCounts::of_broker(broker, observed.active_controller).set(&set);
    if let Some((refusals, awaiting)) = observed.replica_keys {
        super::counter(recorder, names::REPLICA_KEY_REFUSALS, Vec::new()).absolute(refusals);
        set(
            names::AWAITING_DIRECTORY_RECORD,
            Vec::new(),
            f64::from(u8::from(awaiting)),
        );
    }

    let operation = |name: &str| vec![Label::new("delayedoperation", name.to_string())];
    let waiting_produces = metrics
        .waiting_produces
        .load(std::sync::atomic::Ordering::Relaxed)
        .max(0);
    set(
        names::PURGATORY_SIZE,
        operation("Produce"),
        waiting_produces as f64,
    );
    set(
        names::PURGATORY_SIZE,
        operation("Fetch"),
        parked_fetches as f64,
    );

    if let Some(network) = metrics.network.get() {
        let available = network.request_memory.available_bytes();
        let used = network.request_memory.used_bytes();
        set(names::MEMORY_POOL_AVAILABLE, Vec::new(), available as f64);
        set(names::MEMORY_POOL_USED, Vec::new(), used as f64);
        for listener in &network.listeners {
            let labels = vec![Label::new("listener", listener.spec.name.clone())];
            set(
                names::CONNECTIONS,
                labels,
                listener.connection_count() as f64,
            );
        }
    }

    // Lag as kafka-lag-exporter reports it: the high watermark less the committed offset,
    // for the partitions hosted here.
    for (group, offsets) in &observed.group_offsets {
        let (mut max_lag, mut sum_lag) = (0i64, 0i64);
        for ((topic, partition), offset) in offsets {
            let group_labels = || {
                let mut labels = vec![Label::new("group", group.clone())];
                labels.extend(tp_labels(topic, *partition));
                labels
            };
            set(names::GROUP_OFFSET, group_labels(), *offset as f64);
            let Some(high_watermark) = high_watermarks.get(&(topic.clone(), *partition)) else {
                continue;
            };
            let lag = (high_watermark - offset).max(0);
            max_lag = max_lag.max(lag);
            sum_lag += lag;
            set(names::GROUP_LAG, group_labels(), lag as f64);
        }
        let labels = || vec![Label::new("group", group.clone())];
        set(names::GROUP_MAX_LAG, labels(), max_lag as f64);
        set(names::GROUP_SUM_LAG, labels(), sum_lag as f64);
    }
}

/// What the KafkaController gauges count. As on Kafka, only the active controller
/// reports the cluster's counts; the others report zeros.
#[derive(Debug, Default, Clone, Copy)]
pub struct ControllerCounts {
    pub active: bool,
    topics: usize,
    partitions: usize,
    offline: usize,
    brokers: usize,
    fenced: usize,
}

impl ControllerCounts {
    /// The counts of `image` as its active controller reports them.
    pub fn active(image: &strand_metadata::MetadataImage) -> ControllerCounts {
        let partitions = image.topics.values().flat_map(|topic| &topic.partitions);
        let fenced = image.brokers.values().filter(|b| b.fenced).count();
        ControllerCounts {
            active: true,
            topics: image.topics.len(),
            partitions: partitions.clone().count(),
            offline: partitions.filter(|p| p.leader < 0).count(),
            brokers: image.brokers.len() - fenced,
            fenced,
        }
    }

    /// A node that is not the active controller.
    pub fn inactive() -> ControllerCounts {
        ControllerCounts::default()
    }

    fn of_broker(broker: &Broker, active: bool) -> ControllerCounts {
        if !active {
            return ControllerCounts::inactive();
        }
        match broker.cluster() {
            Some(cluster) => ControllerCounts::active(&cluster.image()),
            None => {
                // A single node is its own controller, over its topic registry.
                let registry = broker.registry();
                ControllerCounts {
                    active: true,
                    topics: registry.all().count(),
                    partitions: registry.all().map(|t| t.partitions.max(0) as usize).sum(),
                    offline: 0,
                    brokers: 1,
                    fenced: 0,
                }
            }
        }
    }

    /// Sets the KafkaController gauges in `recorder`.
    pub fn export(&self, recorder: &PrometheusRecorder) {
        self.set(&|name, labels, value| gauge(recorder, name, labels).set(value));
    }

    fn set(&self, set: &impl Fn(&'static str, Vec<Label>, f64)) {
        set(
            names::ACTIVE_CONTROLLER,
            Vec::new(),
            f64::from(u8::from(self.active)),
        );
        set(names::GLOBAL_TOPICS, Vec::new(), self.topics as f64);
        set(names::GLOBAL_PARTITIONS, Vec::new(), self.partitions as f64);
        set(names::OFFLINE_PARTITIONS, Vec::new(), self.offline as f64);
        set(names::ACTIVE_BROKERS, Vec::new(), self.brokers as f64);
        set(names::FENCED_BROKERS, Vec::new(), self.fenced as f64);
    }
}
