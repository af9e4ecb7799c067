//! Broker settings: defaults that make `strand serve` with no arguments a working
//! single-node broker, overridable from a TOML file and the command line.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use strand_protocol::SOCKET_REQUEST_MAX_BYTES_DEFAULT;
use strand_security::tls::{ClientAuth, ReloadingClientConfig, ReloadingServerConfig, TlsSettings};
use strand_security::SecurityProtocol;

/// A listener besides the first (`listen`): its name, address and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraListener {
    pub name: String,
    pub listen: SocketAddr,
    /// host:port clients of this listener are told to connect to; defaults to `listen`.
    #[serde(default)]
    pub advertise: Option<String>,
}

/// One listener as the broker serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub listen: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
}

/// How appended data reaches the disk by default (topics can override with flush.messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushMode {
    /// Kafka's default: page cache; replication gives durability.
    PageCache,
    /// fdatasync before acknowledging (group commit); same as flush.messages=1.
    EveryBatch,
}

/// Whether the HTTP listener serves the web console, and whether it may change anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsoleMode {
    On,
    ReadOnly,
    Off,
}

impl std::str::FromStr for ConsoleMode {
    type Err = String;

    fn from_str(value: &str) -> Result<ConsoleMode, String> {
        match value {
            "on" => Ok(ConsoleMode::On),
            "read-only" => Ok(ConsoleMode::ReadOnly),
            "off" => Ok(ConsoleMode::Off),
            other => Err(format!(
                "unknown console mode {other:?}: use on, read-only or off"
            )),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: SocketAddr,
    /// host:port clients are told to connect to; defaults to `listen`.
    pub advertise: Option<String>,
    /// The name of the `listen` listener (listeners): the inter-broker listener
    /// (inter.broker.listener.name), PLAINTEXT unless named otherwise.
    pub listener_name: String,
    /// The other listeners of `listeners`, each on its own port.
    pub extra_listeners: Vec<ExtraListener>,
    /// controller.listener.names (its first name): the listener of the quorum address;
    /// mapped to SSL in listener.security.protocol.map, nodes talk over mutual TLS with
    /// its ssl.* settings (`quorum_tls`).
    pub controller_listener_name: Option<String>,
    /// listener.security.protocol.map, `NAME:PROTOCOL,...` (unset: PLAINTEXT, SSL,
    /// SASL_PLAINTEXT and SASL_SSL each name their own protocol, as Kafka's default).
    pub listener_security_protocol_map: Option<String>,
    /// The security settings by their Kafka names (ssl.*, sasl.*, listener.name.*,
    /// connections.max.reauth.ms, connection.failed.authentication.delay.ms), read per
    /// listener by [`BrokerConfig::security_setting`].
    pub security: std::collections::BTreeMap<String, String>,
    /// authorizer.class.name: Kafka's StandardAuthorizer turns ACLs on (empty: off, every
    /// request allowed, as on Kafka).
    pub authorizer_class_name: String,
    /// The first log directory (log.dirs), which also holds the broker's metadata.
    pub data_dir: PathBuf,
    /// The other log directories of log.dirs: partitions spread over all of them.
    pub extra_log_dirs: Vec<PathBuf>,
    /// auto.create.topics.enable
    pub auto_create_topics: bool,
    /// num.partitions for auto-created topics and CreateTopics with -1.
    pub num_partitions: i32,
    /// default.replication.factor
    pub default_replication_factor: i16,
    /// message.max.bytes: the broker default for max.message.bytes.
    pub message_max_bytes: i32,
    /// min.insync.replicas: the default of the topic config of that name. Also the
    /// cluster-wide value the first active controller records when eligible leader
    /// replicas are on (as Kafka's format does), which the controller's ISR rules read.
    pub min_insync_replicas: i32,
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
    /// socket.send.buffer.bytes: SO_SNDBUF of client connections (-1: the OS default).
    /// Kafka's 100 KiB keeps what sendfile has queued small enough to stay in the CPU
    /// caches until the receiver copies it: on loopback, fetches of page-cached data ran
    /// 2.05 GB/s with the OS default (autotuned up to 4 MiB) and 2.78 GB/s with it.
    pub socket_send_buffer_bytes: i32,
    /// max.connections: a connection over it is closed at once.
    pub max_connections: usize,
    /// max.connections.per.ip
    pub max_connections_per_ip: usize,
    /// max.connections.per.ip.overrides: `host:count,...`
    pub max_connections_per_ip_overrides: String,
    /// connections.max.idle.ms: a connection with nothing read or written and no request
    /// in flight for this long is closed (negative: never).
    pub connections_max_idle_ms: i64,
    /// Bytes of request bodies held in memory at once across all connections
    /// (queued.max.request.bytes; 0 or less: unbounded, Kafka's default is -1; Strand's is
    /// 512 MiB).
    pub queued_request_max_bytes: i64,
    /// Strand only (Kafka has no such deadline): a request's body must arrive within this
    /// long of its size, waits for request memory included, or the connection is closed.
    /// Clients give up on a request after request.timeout.ms (30 s) anyway.
    pub request_read_timeout_ms: u64,
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
    /// transaction.max.timeout.ms
    pub transaction_max_timeout_ms: i32,
    /// transactional.id.expiration.ms
    pub transactional_id_expiration_ms: i64,
    /// transaction.abort.timed.out.transaction.cleanup.interval.ms
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// transaction.remove.expired.transaction.cleanup.interval.ms
    pub transaction_remove_expired_transaction_cleanup_interval_ms: u64,
    /// group.consumer.session.timeout.ms (KIP-848 groups)
    pub group_consumer_session_timeout_ms: i32,
    /// group.consumer.heartbeat.interval.ms (KIP-848 groups)
    pub group_consumer_heartbeat_interval_ms: i32,
    /// group.share.session.timeout.ms (KIP-932 share groups)
    pub group_share_session_timeout_ms: i32,
    /// group.share.heartbeat.interval.ms
    pub group_share_heartbeat_interval_ms: i32,
    /// group.share.max.size
    pub group_share_max_size: i32,
    /// group.share.record.lock.duration.ms: how long a member holds the records it
    /// acquired before they go back to the others.
    pub group_share_record_lock_duration_ms: i32,
    /// group.share.delivery.count.limit: deliveries of a record before it is archived.
    pub group_share_delivery_count_limit: i32,
    /// group.share.partition.max.record.locks: records in flight per share-partition.
    pub group_share_partition_max_record_locks: i32,
    /// group.share.max.share.sessions: share sessions this broker keeps.
    pub group_share_max_share_sessions: i32,
    /// group.streams.session.timeout.ms (KIP-1071 streams groups)
    pub group_streams_session_timeout_ms: i32,
    /// group.streams.heartbeat.interval.ms
    pub group_streams_heartbeat_interval_ms: i32,
    /// group.streams.max.size
    pub group_streams_max_size: i32,
    /// group.streams.num.standby.replicas: standby tasks per stateful task.
    pub group_streams_num_standby_replicas: i32,
    /// group.streams.initial.rebalance.delay.ms: how long a new group waits for more
    /// members before its first assignment.
    pub group_streams_initial_rebalance_delay_ms: i32,
    /// group.streams.assignment.interval.ms: the least time between two assignments.
    pub group_streams_assignment_interval_ms: i32,
    /// The metadata quorum, `ID@HOST:PORT,...` (controller.quorum.voters). Unset: a
    /// single node with its metadata in topics.json.
    pub controllers: Option<String>,
    /// This node's quorum address when it is not one of `controllers` (a broker-only node
    /// receives the metadata log there).
    pub quorum_listen: Option<SocketAddr>,
    /// process.roles: "broker", "controller" or "broker,controller". Unset: both for a
    /// node listed in `controllers`, broker for any other.
    pub process_roles: Option<String>,
    /// broker.rack: replicas of a partition go to different racks where possible.
    pub rack: Option<String>,
    /// remote.log.storage.system.enable: tiered storage may be turned on for topics.
    pub remote_log_storage_system_enable: bool,
    /// The remote store of tiered storage (`strand.remote.storage.url`): `s3://BUCKET/PREFIX`
    /// (credentials, endpoint and region from the AWS environment), `gs://`, `az://` (with
    /// the `gcs-azure` feature),
    /// `file:///DIR` or `memory://`. Kafka names a plugin class here instead.
    pub remote_storage_url: Option<String>,
    /// remote.log.manager.task.interval.ms: how often each tiered partition copies its
    /// sealed segments and applies remote retention.
    pub remote_log_manager_task_interval_ms: u64,
    /// remote.log.manager.copier.thread.pool.size: partitions whose segments are being
    /// copied at once (Kafka's copier threads; default 10).
    pub remote_log_manager_copier_thread_pool_size: i32,
    /// remote.log.manager.copy.max.bytes.per.second: the rate copies to the remote store
    /// may take (i64::MAX: no limit, Kafka's default).
    pub remote_log_manager_copy_max_bytes_per_second: i64,
    /// broker.heartbeat.interval.ms
    pub broker_heartbeat_interval_ms: u64,
    /// broker.session.timeout.ms: a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// auto.leader.rebalance.enable
    pub auto_leader_rebalance_enable: bool,
    /// leader.imbalance.check.interval.seconds
    pub leader_imbalance_check_interval_seconds: u64,
    /// Raft heartbeat of the metadata quorum; elections time out after 5-10 of them.
    pub quorum_heartbeat_interval_ms: u64,
    /// Strand only (Kafka serves metrics through JMX): the HTTP listener of /metrics,
    /// /health and /ready, `HOST:PORT` or `none` (`--http-listen`).
    pub http_listen: String,
    /// Strand only (Kafka ships no console): the web console on the HTTP listener,
    /// `on`, `read-only` or `off` (`--console`).
    pub console: ConsoleMode,
    /// The Kafka names of the settings given explicitly (file or command line), which
    /// DescribeConfigs reports as STATIC_BROKER_CONFIG; the others are defaults.
    #[serde(skip)]
    pub explicit: std::collections::BTreeSet<String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            listen: "127.0.0.1:9092".parse().expect("static address"),
            advertise: None,
            listener_name: "PLAINTEXT".into(),
            extra_listeners: Vec::new(),
            controller_listener_name: None,
            listener_security_protocol_map: None,
            security: Default::default(),
            authorizer_class_name: String::new(),
            data_dir: PathBuf::from("strand-data"),
            extra_log_dirs: Vec::new(),
            auto_create_topics: true,
            num_partitions: 1,
            default_replication_factor: 1,
            message_max_bytes: 1024 * 1024 + 12,
            min_insync_replicas: 1,
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush: FlushMode::PageCache,
            socket_request_max_bytes: SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            socket_send_buffer_bytes: 100 * 1024,
            max_connections: 10_000,
            max_connections_per_ip: i32::MAX as usize,
            max_connections_per_ip_overrides: String::new(),
            connections_max_idle_ms: 600_000,
            queued_request_max_bytes: 512 * 1024 * 1024,
            request_read_timeout_ms: 30_000,
            http_listen: crate::http::HttpListen::DEFAULT.to_string(),
            console: ConsoleMode::On,
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
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            transaction_remove_expired_transaction_cleanup_interval_ms: 3_600_000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_share_session_timeout_ms: 45_000,
            group_share_heartbeat_interval_ms: 5_000,
            group_share_max_size: 200,
            group_share_record_lock_duration_ms: 30_000,
            group_share_delivery_count_limit: 5,
            group_share_partition_max_record_locks: 2_000,
            group_share_max_share_sessions: 2_000,
            group_streams_session_timeout_ms: 45_000,
            group_streams_heartbeat_interval_ms: 5_000,
            group_streams_max_size: i32::MAX,
            group_streams_num_standby_replicas: 0,
            group_streams_initial_rebalance_delay_ms: 3_000,
            group_streams_assignment_interval_ms: 1_000,
            controllers: None,
            quorum_listen: None,
            process_roles: None,
            rack: None,
            remote_log_storage_system_enable: false,
            remote_storage_url: None,
            remote_log_manager_task_interval_ms: 30_000,
            remote_log_manager_copier_thread_pool_size: 10,
            remote_log_manager_copy_max_bytes_per_second: i64::MAX,
            broker_heartbeat_interval_ms: 500,
            broker_session_timeout_ms: 9_000,
            replica_lag_time_max_ms: 30_000,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            quorum_heartbeat_interval_ms: 100,
            explicit: Default::default(),
        }
    }
}

impl BrokerConfig {
    /// The HTTP listener asked for: given explicitly (`--http-listen`, or an address
    /// other than the default) it must be bound; the default may be taken.
    pub fn http_listen(&self) -> Result<crate::http::HttpListen, String> {
        let given = self.explicit.contains("http_listen")
            || self.http_listen != crate::http::HttpListen::DEFAULT;
        crate::http::HttpListen::parse(&self.http_listen, given)
            .map_err(|error| format!("http_listen: {error}"))
    }

    /// Reads a config file: a Kafka server.properties (any name not ending in .toml;
    /// see `broker_configs`) or Strand's TOML. Returns the config and the Kafka names the
    /// file gave that Strand does not implement.
    pub fn from_file(path: &Path) -> Result<(BrokerConfig, Vec<String>), String> {
        if path.extension().is_some_and(|ext| ext == "toml") {
            return Ok((BrokerConfig::from_toml_file(path)?, Vec::new()));
        }
        let mut config = BrokerConfig::default();
        let ignored = crate::broker_configs::apply_properties_file(&mut config, path)?;
        Ok((config, ignored))
    }

    /// Reads a TOML file of the fields above (snake_case keys). Validation waits until
    /// command-line options are applied (they may complete it, e.g. --controllers).
    pub fn from_toml_file(path: &Path) -> Result<BrokerConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read config {}: {error}", path.display()))?;
        let mut config: BrokerConfig = toml::from_str(&text)
            .map_err(|error| format!("bad config {}: {}", path.display(), error.message()))?;
        let keys: std::collections::BTreeSet<String> = toml::from_str::<toml::Table>(&text)
            .map(|table| table.keys().cloned().collect())
            .unwrap_or_default();
        config.explicit = crate::broker_configs::explicit_from_toml(&keys);
        Ok(config)
    }

    /// Every log directory, the metadata's first (Kafka's log.dirs in order).
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.data_dir.clone())
            .chain(self.extra_log_dirs.iter().cloned())
            .collect()
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
        if self.min_insync_replicas < 1 {
            return Err(format!(
                "min_insync_replicas must be >= 1, got {}",
                self.min_insync_replicas
            ));
        }
        if self.controllers.is_none() && self.default_replication_factor != 1 {
            return Err("default_replication_factor must be 1 on a single node".into());
        }
        if self.default_replication_factor < 1 {
            return Err("default_replication_factor must be >= 1".into());
        }
        self.listeners()?;
        if self.controllers.is_some() {
            // Also loads what brokers and nodes connect to each other with (stores, login).
            self.cluster_config()?;
        } else if let Some(roles) = &self.process_roles {
            // A single node is broker and controller at once; other roles need a quorum.
            let (broker, controller) = parse_process_roles(roles)?;
            if !(broker && controller) {
                return Err(format!(
                    "process_roles {roles:?} needs controllers (a quorum to join); a single node is broker,controller"
                ));
            }
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
        if self.socket_send_buffer_bytes != -1 && self.socket_send_buffer_bytes < 1024 {
            return Err("socket_send_buffer_bytes must be -1 (OS default) or at least 1024".into());
        }
        // Kafka's rule: a positive budget must hold the largest request.
        if self.queued_request_max_bytes > 0
            && self.queued_request_max_bytes < self.socket_request_max_bytes as i64
        {
            return Err(
                "queued_request_max_bytes must be <= 0 (unbounded) or at least socket_request_max_bytes"
                    .into(),
            );
        }
        if self.max_connections == 0 || self.open_segments_max == 0 {
            return Err("max_connections and open_segments_max must be positive".into());
        }
        if self.request_read_timeout_ms == 0 {
            return Err("request_read_timeout_ms must be positive".into());
        }
        self.http_listen()?;
        // max.connections.per.ip.overrides is checked (and its host names resolved, once)
        // by `connection_limits`, which the broker calls as it opens.
        self.advertised().map(|_| ())
    }

    /// The cluster settings, when `controllers` is set.
    pub fn cluster_config(&self) -> Result<Option<crate::cluster::ClusterConfig>, String> {
        let Some(list) = &self.controllers else {
            return Ok(None);
        };
        let mut controllers = std::collections::BTreeMap::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (id, address) = entry
                .split_once('@')
                .ok_or_else(|| format!("controllers entry {entry:?} is not ID@HOST:PORT"))?;
            let id: i32 = id
                .parse()
                .map_err(|_| format!("controllers entry {entry:?}: bad node id"))?;
            if !address.contains(':') {
                return Err(format!("controllers entry {entry:?} is not ID@HOST:PORT"));
            }
            if controllers.insert(id, address.to_string()).is_some() {
                return Err(format!("controllers lists node {id} twice"));
            }
        }
        if controllers.is_empty() {
            return Err("controllers is empty".into());
        }
        let quorum_listen = match (self.quorum_listen, controllers.get(&self.node_id)) {
            (Some(address), _) => address,
            (None, Some(address)) => address
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| format!("cannot resolve this node's quorum address {address}"))?,
            (None, None) => {
                return Err(format!(
                    "node {} is not a controller: give quorum_listen (where it receives the metadata log)",
                    self.node_id
                ))
            }
        };
        let listed = controllers.contains_key(&self.node_id);
        let (broker, controller) = match &self.process_roles {
            None => (true, listed),
            Some(roles) => parse_process_roles(roles)?,
        };
        if controller != listed {
            return Err(format!(
                "node {} {} in controllers but its roles say {}",
                self.node_id,
                if listed { "is" } else { "is not" },
                if controller {
                    "controller"
                } else {
                    "broker only"
                }
            ));
        }
        if self.broker_session_timeout_ms <= self.broker_heartbeat_interval_ms {
            return Err(
                "broker_session_timeout_ms must exceed broker_heartbeat_interval_ms".into(),
            );
        }
        let ms = std::time::Duration::from_millis;
        Ok(Some(crate::cluster::ClusterConfig {
            quorum_tls: self.quorum_tls()?,
            // Brokers connect to each other with the inter-broker listener's protocol:
            // what they need for it (trust store, login) must be there at start.
            inter_broker: std::sync::Arc::new(
                crate::cluster::inter_broker::InterBrokerSecurity::from_config(self)?,
            ),
            broker_role: broker,
            controllers,
            quorum_listen,
            rack: self.rack.clone(),
            broker_heartbeat_interval: ms(self.broker_heartbeat_interval_ms),
            broker_session_timeout: ms(self.broker_session_timeout_ms),
            replica_lag_time_max: ms(self.replica_lag_time_max_ms.max(100)),
            leader_imbalance_check_interval: self.auto_leader_rebalance_enable.then(|| {
                std::time::Duration::from_secs(self.leader_imbalance_check_interval_seconds.max(1))
            }),
            raft_heartbeat_interval: ms(self.quorum_heartbeat_interval_ms.max(10)),
            min_insync_replicas: self.min_insync_replicas,
        }))
    }

    /// Mutual TLS between the nodes of the quorum, when the controller listener is mapped
    /// to SSL: with that listener's ssl.* settings, each node presents its key store's
    /// certificate and accepts only peers its trust store signs and, with ACLs on, whose
    /// principal (through ssl.principal.mapping.rules) is in super.users. A client
    /// certificate is required whatever ssl.client.auth says: the quorum transport carries
    /// the metadata log itself, so the certificate is what makes a node a member (Kafka's
    /// controllers instead authorize CLUSTER_ACTION per request).
    pub fn quorum_tls(&self) -> Result<Option<strand_raft::network::QuorumTls>, String> {
        let Some(name) = &self.controller_listener_name else {
            return Ok(None);
        };
        match self.protocol_of(name)? {
            SecurityProtocol::Plaintext => Ok(None),
            SecurityProtocol::Ssl => {
                let setting = |key: &str| self.security_setting(name, key);
                let in_listener = |e: String| format!("controller listener {name}: {e}");
                let mut settings = TlsSettings::from_config(&setting).map_err(in_listener)?;
                settings.client_auth = ClientAuth::Required;
                let client = ReloadingClientConfig::client(settings.clone()).map_err(in_listener)?;
                let server = ReloadingServerConfig::new(settings).map_err(in_listener)?;
                Ok(Some(strand_raft::network::QuorumTls {
                    server: std::sync::Arc::new(server),
                    client: std::sync::Arc::new(client),
                    // With ACLs on, only super users: a peer may write anything to the
                    // metadata log (ACLs, credentials), so a client certificate from the
                    // same CA must not make a member.
                    members: self
                        .authorizer()
                        .map(|authorizer| std::sync::Arc::new(authorizer.super_users)),
                }))
            }
            other => Err(format!(
                "the controller listener {name} is {other}: Strand's quorum authenticates nodes with mutual TLS; map it to SSL (or PLAINTEXT)"
            )),
        }
    }

    /// max.connections, max.connections.per.ip and its overrides (host names resolved).
    pub fn connection_limits(
        &self,
    ) -> Result<strand_protocol::connection_limits::ConnectionLimitsConfig, String> {
        Ok(strand_protocol::connection_limits::ConnectionLimitsConfig {
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            per_ip_overrides: strand_protocol::connection_limits::parse_per_ip_overrides(
                &self.max_connections_per_ip_overrides,
            )?,
        })
    }

    /// connections.max.idle.ms as a duration (`None`: idle connections stay).
    pub fn connections_max_idle(&self) -> Option<std::time::Duration> {
        u64::try_from(self.connections_max_idle_ms)
            .ok()
            .map(std::time::Duration::from_millis)
    }

    /// The request-memory budget (`None`: unbounded, as Kafka reads 0 or less).
    pub fn request_memory_bytes(&self) -> Option<usize> {
        usize::try_from(self.queued_request_max_bytes)
            .ok()
            .filter(|bytes| *bytes > 0)
    }

    /// (host, port) clients are told to use.
    pub fn advertised(&self) -> Result<(String, u16), String> {
        advertised_address(self.listen, self.advertise.as_deref())
    }

    /// The security protocol of a listener name: listener.security.protocol.map, else
    /// Kafka's default map (each protocol's name stands for itself).
    pub fn protocol_of(&self, listener: &str) -> Result<SecurityProtocol, String> {
        let mapped = match &self.listener_security_protocol_map {
            Some(map) => map
                .split(',')
                .filter_map(|pair| pair.split_once(':'))
                .find(|(name, _)| name.trim() == listener)
                .map(|(_, protocol)| protocol.trim().to_string()),
            None => Some(listener.to_string()),
        };
        mapped
            .as_deref()
            .and_then(SecurityProtocol::parse)
            .ok_or_else(|| format!("No security protocol defined for listener {listener}"))
    }

    /// Every listener clients (and brokers) connect to, the inter-broker one first.
    pub fn listeners(&self) -> Result<Vec<ListenerSpec>, String> {
        let first = ExtraListener {
            name: self.listener_name.clone(),
            listen: self.listen,
            advertise: self.advertise.clone(),
        };
        let mut specs: Vec<ListenerSpec> = Vec::new();
        for listener in std::iter::once(&first).chain(&self.extra_listeners) {
            if specs.iter().any(|s| s.name == listener.name) {
                return Err(format!(
                    "Each listener must have a different name: {} is given twice",
                    listener.name
                ));
            }
            let (advertised_host, advertised_port) =
                advertised_address(listener.listen, listener.advertise.as_deref())?;
            specs.push(ListenerSpec {
                name: listener.name.clone(),
                protocol: self.protocol_of(&listener.name)?,
                listen: listener.listen,
                advertised_host,
                advertised_port,
            });
        }
        Ok(specs)
    }

    /// The authorizer (authorizer.class.name, super.users, allow.everyone.if.no.acl.found),
    /// or None when ACLs are off.
    pub fn authorizer(&self) -> Option<strand_security::authorizer::Authorizer> {
        if self.authorizer_class_name.is_empty() {
            return None;
        }
        let setting = |name: &str| self.security.get(name).map(|v| v.trim().to_string());
        Some(strand_security::authorizer::Authorizer {
            super_users: strand_security::authorizer::Authorizer::parse_super_users(
                &setting("super.users").unwrap_or_default(),
            ),
            allow_everyone_if_no_acl_found: setting("allow.everyone.if.no.acl.found")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        })
    }

    /// A security setting for one listener: `listener.name.LISTENER.NAME` (the listener
    /// in lower case, as Kafka prefixes it) before the plain `NAME`.
    pub fn security_setting(&self, listener: &str, name: &str) -> Option<String> {
        let prefixed = format!("listener.name.{}.{name}", listener.to_lowercase());
        self.security
            .get(&prefixed)
            .or_else(|| self.security.get(name))
            .cloned()
    }
}

/// (host, port) a listener on `listen` advertises: `advertise` (HOST:PORT) or its own
/// address.
fn advertised_address(
    listen: SocketAddr,
    advertise: Option<&str>,
) -> Result<(String, u16), String> {
    match advertise {
        None => Ok((listen.ip().to_string(), listen.port())),
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

/// process.roles as (broker, controller).
fn parse_process_roles(roles: &str) -> Result<(bool, bool), String> {
    let mut parsed = (false, false);
    for role in roles.split(',').map(str::trim) {
        match role {
            "broker" if !parsed.0 => parsed.0 = true,
            "controller" if !parsed.1 => parsed.1 = true,
            _ => {
                return Err(format!(
                    "process_roles must be broker, controller or broker,controller, got {roles:?}"
                ))
            }
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_buffer_defaults_to_kafkas_and_can_be_left_to_the_os() {
        let config = BrokerConfig::default();
        assert_eq!(config.socket_send_buffer_bytes, 102_400);
        assert!(config.validate().is_ok());
        let os_default = BrokerConfig {
            socket_send_buffer_bytes: -1,
            ..BrokerConfig::default()
        };
        assert!(os_default.validate().is_ok());
        let tiny = BrokerConfig {
            socket_send_buffer_bytes: 0,
            ..BrokerConfig::default()
        };
        assert!(tiny.validate().is_err());
    }

    #[test]
    fn process_roles_are_checked_with_or_without_a_quorum() {
        let single = |roles: &str| BrokerConfig {
            process_roles: Some(roles.into()),
            ..BrokerConfig::default()
        };
        assert!(single("chef").validate().is_err());
        assert!(
            single("broker").validate().is_err(),
            "a lone broker needs a quorum"
        );
        assert!(single("broker,broker").validate().is_err());
        assert!(single("broker,controller").validate().is_ok());
        assert!(single(" controller , broker").validate().is_ok());
        let cluster = |roles: &str| BrokerConfig {
            controllers: Some("1@127.0.0.1:19093".into()),
            process_roles: Some(roles.into()),
            ..BrokerConfig::default()
        };
        assert!(cluster("chef").validate().is_err());
        assert!(cluster("broker,controller").validate().is_ok());
    }
}
