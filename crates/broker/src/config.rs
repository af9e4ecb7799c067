//! Broker settings: defaults that make `strand serve` with no arguments a working
//! single-node broker, overridable from a TOML file and the command line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use strand_protocol::SOCKET_REQUEST_MAX_BYTES_DEFAULT;

/// How appended data reaches the disk by default (topics can override with flush.messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushMode {
    /// Kafka's default: page cache; replication gives durability.
    PageCache,
    /// fdatasync before acknowledging (group commit); same as flush.messages=1.
    EveryBatch,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: SocketAddr,
    /// host:port clients are told to connect to; defaults to `listen`.
    pub advertise: Option<String>,
    pub data_dir: PathBuf,
    /// auto.create.topics.enable
    pub auto_create_topics: bool,
    /// num.partitions for auto-created topics and CreateTopics with -1.
    pub num_partitions: i32,
    /// default.replication.factor
    pub default_replication_factor: i16,
    /// message.max.bytes: the broker default for max.message.bytes.
    pub message_max_bytes: i32,
    /// log.segment.bytes
    pub segment_bytes: i32,
    /// log.roll.ms
    pub segment_ms: i64,
    /// log.retention.ms (-1: forever)
    pub retention_ms: i64,
    /// log.retention.bytes (-1: unlimited)
    pub retention_bytes: i64,
    pub flush: FlushMode,
    /// socket.request.max.bytes
    pub socket_request_max_bytes: usize,
    /// max.connections
    pub max_connections: usize,
    /// Bytes of requests held in memory at once across all connections
    /// (queued.max.request.bytes; Kafka's default is unbounded, Strand's is not).
    pub queued_request_max_bytes: usize,
    /// Segments whose files stay open across all partitions.
    pub open_segments_max: usize,
    /// Interval of checkpoints and flush.ms checks.
    pub checkpoint_interval_ms: u64,
    /// log.retention.check.interval.ms
    pub retention_check_interval_ms: u64,
    /// log.cleaner.backoff.ms: pause between compaction passes.
    pub cleaner_backoff_ms: u64,
    /// log.cleaner.io.max.bytes.per.second (unset: unthrottled).
    pub cleaner_io_max_bytes_per_second: Option<u64>,
    /// group.initial.rebalance.delay.ms
    pub group_initial_rebalance_delay_ms: i64,
    /// group.min.session.timeout.ms
    pub group_min_session_timeout_ms: i32,
    /// group.max.session.timeout.ms
    pub group_max_session_timeout_ms: i32,
    /// group.max.size
    pub group_max_size: usize,
    /// offsets.retention.minutes
    pub offsets_retention_minutes: i64,
    /// offsets.retention.check.interval.ms
    pub offsets_retention_check_interval_ms: u64,
    /// group.consumer.session.timeout.ms (KIP-848 groups)
    pub group_consumer_session_timeout_ms: i32,
    /// group.consumer.heartbeat.interval.ms (KIP-848 groups)
    pub group_consumer_heartbeat_interval_ms: i32,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            listen: "127.0.0.1:9092".parse().expect("static address"),
            advertise: None,
            data_dir: PathBuf::from("strand-data"),
            auto_create_topics: true,
            num_partitions: 1,
            default_replication_factor: 1,
            message_max_bytes: 1024 * 1024 + 12,
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush: FlushMode::PageCache,
            socket_request_max_bytes: SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            max_connections: 10_000,
            queued_request_max_bytes: 512 * 1024 * 1024,
            open_segments_max: 1024,
            checkpoint_interval_ms: 60_000,
            retention_check_interval_ms: 300_000,
            cleaner_backoff_ms: 15_000,
            cleaner_io_max_bytes_per_second: None,
            group_initial_rebalance_delay_ms: 3_000,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: 1_000,
            offsets_retention_minutes: 7 * 24 * 60,
            offsets_retention_check_interval_ms: 600_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
        }
    }
}

impl BrokerConfig {
    /// Reads a TOML file of the fields above (snake_case keys).
    pub fn from_toml_file(path: &Path) -> Result<BrokerConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read config {}: {error}", path.display()))?;
        let config: BrokerConfig = toml::from_str(&text)
            .map_err(|error| format!("bad config {}: {}", path.display(), error.message()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.node_id < 0 {
            return Err(format!("node_id must be >= 0, got {}", self.node_id));
        }
        if self.num_partitions < 1 {
            return Err(format!(
                "num_partitions must be >= 1, got {}",
                self.num_partitions
            ));
        }
        if self.default_replication_factor != 1 {
            return Err("default_replication_factor must be 1 on a single node".into());
        }
        if self.message_max_bytes < 0 {
            return Err("message_max_bytes must be >= 0".into());
        }
        if self.segment_bytes < 14 {
            return Err("segment_bytes must be >= 14".into());
        }
        if self.socket_request_max_bytes < 1024 || self.socket_request_max_bytes > i32::MAX as usize
        {
            return Err("socket_request_max_bytes must be between 1 KiB and 2 GiB".into());
        }
        if self.queued_request_max_bytes < self.socket_request_max_bytes {
            return Err(
                "queued_request_max_bytes must be at least socket_request_max_bytes".into(),
            );
        }
        if self.max_connections == 0 || self.open_segments_max == 0 {
            return Err("max_connections and open_segments_max must be positive".into());
        }
        self.advertised().map(|_| ())
    }

    /// (host, port) clients are told to use.
    pub fn advertised(&self) -> Result<(String, u16), String> {
        match &self.advertise {
            None => Ok((self.listen.ip().to_string(), self.listen.port())),
            Some(address) => {
                let (host, port) = address
                    .rsplit_once(':')
                    .ok_or_else(|| format!("advertise must be HOST:PORT, got {address:?}"))?;
                let port = port
                    .parse()
                    .map_err(|_| format!("bad port in advertise {address:?}"))?;
                if host.is_empty() {
                    return Err(format!("advertise must be HOST:PORT, got {address:?}"));
                }
                Ok((host.to_string(), port))
            }
        }
    }
}
