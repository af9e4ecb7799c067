//! Every metric's name, as the Prometheus JMX exporter's standard Kafka rules
//! (lowercaseOutputName, `kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count` ->
//! `kafka_$1_$2_$3_total`, `...><>Value` -> `kafka_$1_$2_$3`, percentiles -> a `quantile`
//! label) print the Kafka MBean it stands for; each one's HELP names that MBean. Consumer
//! lag follows kafka-lag-exporter's names, which Kafka has no MBean for; the two
//! `strand_raft_` metrics of the replica keys have no Kafka counterpart.

use metrics::Recorder;
use metrics_exporter_prometheus::PrometheusRecorder;

pub const MESSAGES_IN: &str = "kafka_server_brokertopicmetrics_messagesin_total";
pub const BYTES_IN: &str = "kafka_server_brokertopicmetrics_bytesin_total";
pub const BYTES_OUT: &str = "kafka_server_brokertopicmetrics_bytesout_total";
pub const REPLICATION_BYTES_IN: &str = "kafka_server_brokertopicmetrics_replicationbytesin_total";
pub const REPLICATION_BYTES_OUT: &str = "kafka_server_brokertopicmetrics_replicationbytesout_total";
pub const FAILED_PRODUCE: &str = "kafka_server_brokertopicmetrics_failedproducerequests_total";
pub const FAILED_FETCH: &str = "kafka_server_brokertopicmetrics_failedfetchrequests_total";
pub const TOTAL_PRODUCE: &str = "kafka_server_brokertopicmetrics_totalproducerequests_total";
pub const TOTAL_FETCH: &str = "kafka_server_brokertopicmetrics_totalfetchrequests_total";
pub const REMOTE_COPY_BYTES: &str = "kafka_server_brokertopicmetrics_remotecopybytes_total";
pub const REMOTE_COPY_REQUESTS: &str = "kafka_server_brokertopicmetrics_remotecopyrequests_total";
pub const REMOTE_COPY_ERRORS: &str = "kafka_server_brokertopicmetrics_remotecopyerrors_total";
pub const REMOTE_FETCH_BYTES: &str = "kafka_server_brokertopicmetrics_remotefetchbytes_total";
pub const REMOTE_FETCH_REQUESTS: &str = "kafka_server_brokertopicmetrics_remotefetchrequests_total";
pub const REMOTE_FETCH_ERRORS: &str = "kafka_server_brokertopicmetrics_remotefetcherrors_total";
pub const REMOTE_LOG_SIZE: &str = "kafka_server_brokertopicmetrics_remotelogsizebytes";
pub const REMOTE_COPY_LAG_BYTES: &str = "kafka_server_brokertopicmetrics_remotecopylagbytes";
pub const REMOTE_COPY_LAG_SEGMENTS: &str = "kafka_server_brokertopicmetrics_remotecopylagsegments";
pub const REMOTE_DELETE_LAG_BYTES: &str = "kafka_server_brokertopicmetrics_remotedeletelagbytes";
pub const REMOTE_DELETE_LAG_SEGMENTS: &str =
    "kafka_server_brokertopicmetrics_remotedeletelagsegments";
pub const REMOTE_LOG_METADATA_COUNT: &str =
    "kafka_server_brokertopicmetrics_remotelogmetadatacount";

pub const REQUESTS: &str = "kafka_network_requestmetrics_requests_total";
pub const TOTAL_TIME_MS: &str = "kafka_network_requestmetrics_totaltimems";
pub const REQUEST_QUEUE_TIME_MS: &str = "kafka_network_requestmetrics_requestqueuetimems";
pub const LOCAL_TIME_MS: &str = "kafka_network_requestmetrics_localtimems";
pub const REMOTE_TIME_MS: &str = "kafka_network_requestmetrics_remotetimems";
pub const RESPONSE_QUEUE_TIME_MS: &str = "kafka_network_requestmetrics_responsequeuetimems";
pub const RESPONSE_SEND_TIME_MS: &str = "kafka_network_requestmetrics_responsesendtimems";
pub const THROTTLE_TIME_MS: &str = "kafka_network_requestmetrics_throttletimems";
pub const REQUEST_BYTES: &str = "kafka_network_requestmetrics_requestbytes";

pub const PARTITION_COUNT: &str = "kafka_server_replicamanager_partitioncount";
pub const LEADER_COUNT: &str = "kafka_server_replicamanager_leadercount";
pub const UNDER_REPLICATED: &str = "kafka_server_replicamanager_underreplicatedpartitions";
pub const UNDER_MIN_ISR: &str = "kafka_server_replicamanager_underminisrpartitioncount";
pub const AT_MIN_ISR: &str = "kafka_server_replicamanager_atminisrpartitioncount";
pub const OFFLINE_REPLICAS: &str = "kafka_server_replicamanager_offlinereplicacount";
pub const ISR_SHRINKS: &str = "kafka_server_replicamanager_isrshrinks_total";
pub const ISR_EXPANDS: &str = "kafka_server_replicamanager_isrexpands_total";

pub const ACTIVE_CONTROLLER: &str = "kafka_controller_kafkacontroller_activecontrollercount";
pub const OFFLINE_PARTITIONS: &str = "kafka_controller_kafkacontroller_offlinepartitionscount";
pub const GLOBAL_TOPICS: &str = "kafka_controller_kafkacontroller_globaltopiccount";
pub const GLOBAL_PARTITIONS: &str = "kafka_controller_kafkacontroller_globalpartitioncount";
pub const ACTIVE_BROKERS: &str = "kafka_controller_kafkacontroller_activebrokercount";
pub const FENCED_BROKERS: &str = "kafka_controller_kafkacontroller_fencedbrokercount";

pub const LOG_SIZE: &str = "kafka_log_log_size";
pub const LOG_START_OFFSET: &str = "kafka_log_log_logstartoffset";
pub const LOG_END_OFFSET: &str = "kafka_log_log_logendoffset";
pub const LOG_SEGMENTS: &str = "kafka_log_log_numlogsegments";
pub const LOG_FLUSH_MS: &str = "kafka_log_logflushstats_logflushrateandtimems";

pub const FOLLOWER_LAG: &str = "kafka_server_fetcherlagmetrics_consumerlag";
pub const PURGATORY_SIZE: &str = "kafka_server_delayedoperationpurgatory_purgatorysize";
pub const MEMORY_POOL_AVAILABLE: &str = "kafka_network_socketserver_memorypoolavailable";
pub const MEMORY_POOL_USED: &str = "kafka_network_socketserver_memorypoolused";
pub const CONNECTIONS: &str = "kafka_server_socket_server_metrics_connection_count";

pub const REPLICA_KEY_REFUSALS: &str = "strand_raft_replica_key_refusals_total";
pub const AWAITING_DIRECTORY_RECORD: &str = "strand_raft_awaiting_directory_record";

pub const GROUP_OFFSET: &str = "kafka_consumergroup_group_offset";
pub const GROUP_LAG: &str = "kafka_consumergroup_group_lag";
pub const GROUP_MAX_LAG: &str = "kafka_consumergroup_group_max_lag";
pub const GROUP_SUM_LAG: &str = "kafka_consumergroup_group_sum_lag";

/// (kind, name, the Kafka MBean or tool it stands for).
const DESCRIPTIONS: &[(Kind, &str, &str)] = &[
    (Kind::Counter, MESSAGES_IN, "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec: records appended by producers"),
    (Kind::Counter, BYTES_IN, "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec: record bytes appended by producers"),
    (Kind::Counter, BYTES_OUT, "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec: record bytes sent to consumers"),
    (Kind::Counter, REPLICATION_BYTES_IN, "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec: record bytes appended by followers here (all topics)"),
    (Kind::Counter, REPLICATION_BYTES_OUT, "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec: record bytes sent to followers (all topics)"),
    (Kind::Counter, FAILED_PRODUCE, "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec: partition appends refused for a reason other than leadership, size, corruption or storage"),
    (Kind::Counter, FAILED_FETCH, "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec: partition reads failed unexpectedly"),
    (Kind::Counter, TOTAL_PRODUCE, "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec: partition appends asked for"),
    (Kind::Counter, TOTAL_FETCH, "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec: partition reads answered"),
    (Kind::Counter, REMOTE_COPY_BYTES, "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec: segment bytes copied to the remote store (tiered storage)"),
    (Kind::Counter, REMOTE_COPY_REQUESTS, "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyRequestsPerSec: segment copies to the remote store started"),
    (Kind::Counter, REMOTE_COPY_ERRORS, "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyErrorsPerSec: segment copies to the remote store that failed"),
    (Kind::Counter, REMOTE_FETCH_BYTES, "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchBytesPerSec: bytes read from the remote store"),
    (Kind::Counter, REMOTE_FETCH_REQUESTS, "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchRequestsPerSec: reads of the remote store"),
    (Kind::Counter, REMOTE_FETCH_ERRORS, "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchErrorsPerSec: reads of the remote store that failed"),
    (Kind::Gauge, REMOTE_LOG_SIZE, "kafka.server:type=BrokerTopicMetrics,name=RemoteLogSizeBytes: bytes the remote store holds of the partitions this broker leads"),
    (Kind::Gauge, REMOTE_COPY_LAG_BYTES, "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagBytes: bytes of sealed segments not yet copied to the remote store, of the partitions this broker leads"),
    (Kind::Gauge, REMOTE_COPY_LAG_SEGMENTS, "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagSegments: sealed segments not yet copied to the remote store, of the partitions this broker leads"),
    (Kind::Gauge, REMOTE_DELETE_LAG_BYTES, "kafka.server:type=BrokerTopicMetrics,name=RemoteDeleteLagBytes: bytes of remote copies past retention not yet deleted, of the partitions this broker leads"),
    (Kind::Gauge, REMOTE_DELETE_LAG_SEGMENTS, "kafka.server:type=BrokerTopicMetrics,name=RemoteDeleteLagSegments: remote copies past retention not yet deleted, of the partitions this broker leads"),
    (Kind::Gauge, REMOTE_LOG_METADATA_COUNT, "kafka.server:type=BrokerTopicMetrics,name=RemoteLogMetadataCount: segment copies the remote store holds of the partitions this broker leads"),
    (Kind::Counter, REQUESTS, "kafka.network:type=RequestMetrics,name=RequestsPerSec: requests by API and version"),
    (Kind::Summary, TOTAL_TIME_MS, "kafka.network:type=RequestMetrics,name=TotalTimeMs: from the request read to its answer written"),
    (Kind::Summary, REQUEST_QUEUE_TIME_MS, "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs: from the request read to its handling"),
    (Kind::Summary, LOCAL_TIME_MS, "kafka.network:type=RequestMetrics,name=LocalTimeMs: time the handler kept a thread busy"),
    (Kind::Summary, REMOTE_TIME_MS, "kafka.network:type=RequestMetrics,name=RemoteTimeMs: time waiting (syncs, replication, a fetch's long poll)"),
    (Kind::Summary, RESPONSE_QUEUE_TIME_MS, "kafka.network:type=RequestMetrics,name=ResponseQueueTimeMs: from the answer ready to its writing"),
    (Kind::Summary, RESPONSE_SEND_TIME_MS, "kafka.network:type=RequestMetrics,name=ResponseSendTimeMs: writing the answer"),
    (Kind::Summary, THROTTLE_TIME_MS, "kafka.network:type=RequestMetrics,name=ThrottleTimeMs: how long the client was throttled for this request (its quotas)"),
    (Kind::Summary, REQUEST_BYTES, "kafka.network:type=RequestMetrics,name=RequestBytes: the request's size"),
    (Kind::Gauge, PARTITION_COUNT, "kafka.server:type=ReplicaManager,name=PartitionCount: partitions hosted here"),
    (Kind::Gauge, LEADER_COUNT, "kafka.server:type=ReplicaManager,name=LeaderCount: partitions led here"),
    (Kind::Gauge, UNDER_REPLICATED, "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions: partitions led here whose ISR is smaller than their replicas"),
    (Kind::Gauge, UNDER_MIN_ISR, "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount: partitions led here with fewer in sync than min.insync.replicas"),
    (Kind::Gauge, AT_MIN_ISR, "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount: partitions led here with exactly min.insync.replicas in sync"),
    (Kind::Gauge, OFFLINE_REPLICAS, "kafka.server:type=ReplicaManager,name=OfflineReplicaCount: replicas hosted here on an offline log directory"),
    (Kind::Counter, ISR_SHRINKS, "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec: ISR shrinks of partitions led here"),
    (Kind::Counter, ISR_EXPANDS, "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec: ISR expansions of partitions led here"),
    (Kind::Gauge, ACTIVE_CONTROLLER, "kafka.controller:type=KafkaController,name=ActiveControllerCount: 1 on the active controller"),
    (Kind::Gauge, OFFLINE_PARTITIONS, "kafka.controller:type=KafkaController,name=OfflinePartitionsCount: partitions without a leader (active controller only)"),
    (Kind::Gauge, GLOBAL_TOPICS, "kafka.controller:type=KafkaController,name=GlobalTopicCount"),
    (Kind::Gauge, GLOBAL_PARTITIONS, "kafka.controller:type=KafkaController,name=GlobalPartitionCount"),
    (Kind::Gauge, ACTIVE_BROKERS, "kafka.controller:type=KafkaController,name=ActiveBrokerCount: registered, unfenced brokers"),
    (Kind::Gauge, FENCED_BROKERS, "kafka.controller:type=KafkaController,name=FencedBrokerCount"),
    (Kind::Gauge, LOG_SIZE, "kafka.log:type=Log,name=Size: bytes of the partition's segments"),
    (Kind::Gauge, LOG_START_OFFSET, "kafka.log:type=Log,name=LogStartOffset"),
    (Kind::Gauge, LOG_END_OFFSET, "kafka.log:type=Log,name=LogEndOffset"),
    (Kind::Gauge, LOG_SEGMENTS, "kafka.log:type=Log,name=NumLogSegments"),
    (Kind::Summary, LOG_FLUSH_MS, "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs: time of each log flush (fsync)"),
    (Kind::Gauge, FOLLOWER_LAG, "kafka.server:type=FetcherLagMetrics,name=ConsumerLag: records a follower replica here is behind its leader"),
    (Kind::Gauge, PURGATORY_SIZE, "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize: requests waiting (Produce: syncs or replication; Fetch: min.bytes)"),
    (Kind::Gauge, MEMORY_POOL_AVAILABLE, "kafka.network:type=SocketServer,name=MemoryPoolAvailable: bytes of queued.max.request.bytes free"),
    (Kind::Gauge, MEMORY_POOL_USED, "kafka.network:type=SocketServer,name=MemoryPoolUsed: bytes of queued.max.request.bytes holding request bodies"),
    (Kind::Gauge, CONNECTIONS, "kafka.server:type=socket-server-metrics,listener=L: connection-count"),
    (Kind::Counter, REPLICA_KEY_REFUSALS, "Strand only (Kafka has no MBean for it): Raft messages this node refused on KIP-853's replica keys (addressed to another metadata directory or node, by nil to a node back on a new directory, or a candidate on another directory than the one recorded)"),
    (Kind::Gauge, AWAITING_DIRECTORY_RECORD, "Strand only (Kafka shows such a node an observer): 1 while this node takes no part in the metadata quorum, back on a metadata directory that replaced a lost one and not yet recorded"),
    (Kind::Gauge, GROUP_OFFSET, "kafka-lag-exporter: the group's committed offset"),
    (Kind::Gauge, GROUP_LAG, "kafka-lag-exporter: records between the group's committed offset and the high watermark"),
    (Kind::Gauge, GROUP_MAX_LAG, "kafka-lag-exporter: the group's largest partition lag"),
    (Kind::Gauge, GROUP_SUM_LAG, "kafka-lag-exporter: the group's lag over all its partitions"),
];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

/// Gives each metric the exporter renders its HELP line (summaries are rendered by
/// `summary`, which asks `help`).
pub fn describe(recorder: &PrometheusRecorder) {
    for (kind, name, help) in DESCRIPTIONS {
        let (name, help) = (metrics::KeyName::from_const_str(name), (*help).into());
        match kind {
            Kind::Counter => recorder.describe_counter(name, None, help),
            Kind::Gauge => recorder.describe_gauge(name, None, help),
            Kind::Summary => {}
        }
    }
}

/// The HELP line of `name`.
pub fn help(name: &str) -> &'static str {
    DESCRIPTIONS
        .iter()
        .find(|(_, described, _)| *described == name)
        .map_or("", |(_, _, help)| help)
}

#[cfg(test)]
mod tests {
    use super::DESCRIPTIONS;

    /// The Grafana dashboard in docs/ asks only for series Strand serves (a summary's
    /// `_count` and `_sum` included).
    #[test]
    fn the_dashboard_uses_only_served_names() {
        let dashboard: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../docs/grafana/strand-dashboard.json"
        ))
        .expect("the dashboard is JSON");
        let served: Vec<&str> = DESCRIPTIONS.iter().map(|(_, name, _)| *name).collect();
        let names = regex::Regex::new(r"kafka_[a-z_]+").unwrap();
        let mut checked = 0;
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                for name in names.find_iter(expr).map(|m| m.as_str()) {
                    let base = name
                        .strip_suffix("_count")
                        .or_else(|| name.strip_suffix("_sum"))
                        .filter(|base| served.contains(base))
                        .unwrap_or(name);
                    assert!(served.contains(&base), "{expr}: {name} is not served");
                    checked += 1;
                }
            }
        }
        assert!(checked > 20, "only {checked} names found");
    }
}
