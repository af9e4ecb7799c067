//! The broker's shared state: identity (node id, cluster id, advertised address), the
//! topic registry, the log manager and the partitions hosted here; topic creation and
//! deletion; startup and clean shutdown. API handlers reach everything through `Broker`.
//!
//! Thread-safe: registry and log manager behind mutexes (topic changes are rare and
//! serialised), the partition map behind an RwLock read on every request.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use strand_log::log_manager::{is_valid_topic_name, LogManagerOptions};
use strand_log::{FileCache, LogConfig, LogManager, TopicPartition};
use strand_metadata::{
    ControllerCommand, ControllerReply, MetadataImage, MetadataRecord, NewTopic,
};
use uuid::Uuid;

use crate::cluster::Cluster;
use crate::config::BrokerConfig;
use crate::error_code;
use crate::log_dirs::LogDirCreator;
use crate::metrics::topic::PartitionCounters;
use crate::partition::{Assignment, IsrProposal, Partition, RoleChange};
use crate::topic_config::{
    log_config_for, min_insync_replicas, validate_tiering, validate_topic_config,
};
use crate::topics::{TopicInfo, TopicRegistry};
use strand_types::kafka_uuid;

const META_PROPERTIES_FILE: &str = "meta.properties";
/// Partitions one CreateTopics or CreatePartitions may ask for on this node.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 100_000;

/// An error for one item of a request: a Kafka error code and an optional message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: i16,
    pub message: Option<String>,
}

impl ApiError {
    pub fn new(code: i16, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: Some(message.into()),
        }
    }
}

#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    /// max.connections and the per-address limits, host names resolved once at open.
    pub connection_limits: strand_protocol::connection_limits::ConnectionLimitsConfig,
    pub cluster_id: String,
    pub advertised_host: String,
    pub advertised_port: u16,
    topics: Arc<Mutex<TopicRegistry>>,
    logs: Mutex<LogManager>,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    pub producer_ids: Arc<crate::producer_ids::ProducerIdManager>,
    pub groups: crate::group::GroupCoordinator,
    pub txns: crate::txn::TxnCoordinator,
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// Share groups' share-partitions and share sessions on this broker (KIP-932).
    pub share: crate::share::ShareManager,
    /// The share coordinator's shards of `__share_group_state` this broker leads.
    pub share_coordinator: crate::share::coordinator::ShareCoordinator,
    /// Flips to true when shutdown begins, so parked fetches return at once.
    shutting_down: tokio::sync::watch::Sender<bool>,
    /// Set once, at startup, when the node is part of a replicated cluster.
    cluster: std::sync::OnceLock<Arc<Cluster>>,
    /// Makes new partitions' directories after their creation has been answered.
    log_dirs: LogDirCreator,
    log_mover: crate::log_mover::LogMover,
    /// The log directories and their health, as opened (they never change after).
    log_dir_states: Vec<strand_log::log_manager::LogDirState>,
    /// Dynamic broker configs (kafka-configs --entity-type brokers) and the replication
    /// throttles they set.
    pub dynamic: crate::dynamic_broker_configs::DynamicConfigs,
    /// A single node's group configs (a cluster's are in its image).
    pub group_configs: crate::group_configs::LocalGroupConfigs,
    /// A single node's SCRAM credentials (a cluster's are in its image).
    pub scram: crate::local_state::LocalState<crate::scram_credentials::Credentials>,
    /// A single node's finalized features (a cluster's are in its image).
    pub features: crate::features::LocalFeatures,
    /// A single node's ACLs (a cluster's are in its image).
    pub local_acls: crate::local_state::LocalState<strand_security::authorizer::Acls>,
    /// A single node's client quotas (a cluster's are in its image).
    pub local_quotas: crate::local_state::LocalState<strand_metadata::client_quotas::ClientQuotas>,
    /// The clients' usage against their quotas.
    pub quota_sensors: crate::quotas::QuotaSensors,
    /// authorizer.class.name with super.users and allow.everyone.if.no.acl.found; None:
    /// ACLs are off and every request is allowed.
    pub authorizer: Option<strand_security::authorizer::Authorizer>,
    /// What /metrics reports (Kafka's metric names).
    pub metrics: crate::metrics::Metrics,
    /// The Kafka listeners accept connections (set by the server as it starts).
    serving: std::sync::atomic::AtomicBool,
    /// Tiered storage, when remote.log.storage.system.enable.
    tiered: Option<Arc<crate::tiered::TieredStorage>>,
}

/// What applying a metadata image changed on this broker.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Every hosted partition with how its role changed.
    pub roles: Vec<(TopicPartition, Arc<Partition>, RoleChange)>,
    /// Partitions no longer hosted here (topic deleted, or not a replica any more).
    pub removed: Vec<TopicPartition>,
    /// `__consumer_offsets` partitions whose leadership changed: (index, now leads).
    pub offsets_leadership: Vec<(i32, bool)>,
    /// `__transaction_state` partitions whose leadership changed: (index, now leads).
    pub txn_leadership: Vec<(i32, bool)>,
}

impl Broker {
    /// Opens the data directory (creating it), recovering logs if the last stop was unclean.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        config.validate().map_err(anyhow::Error::msg)?;
        let tiered = crate::tiered::TieredStorage::open(&config).map_err(anyhow::Error::msg)?;
        let connection_limits = config.connection_limits().map_err(anyhow::Error::msg)?;
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir).map_err(|error| {
            anyhow::anyhow!(
                "cannot create data directory {}: {error}",
                data_dir.display()
            )
        })?;
        let cluster_id = load_or_create_identity(&data_dir, config.node_id)?;
        let options = LogManagerOptions {
            default_config: Arc::new(log_config_for(&config, &BTreeMap::new())),
            file_cache_segments: config.open_segments_max,
            ..LogManagerOptions::default()
        };
        let (mut logs, recovered) = LogManager::open(&config.log_dirs(), options)
            .map_err(|error| anyhow::anyhow!("cannot open the log directories: {error}"))?;
        claim_log_dirs(&logs, &cluster_id, config.node_id)?;
        for (tp, report) in &recovered {
            tracing::info!(partition = %tp, ?report, "recovered log");
        }
        let topics = TopicRegistry::load(&data_dir)?;
        let mut partitions = HashMap::new();
        // In a cluster the metadata image says which partitions are hosted here and in
        // which role; they are opened when it is first applied.
        let single_node = config.controllers.is_none();
        let log_dirs = LogDirCreator::start()?;
        let dynamic = crate::dynamic_broker_configs::DynamicConfigs::open(&data_dir, single_node)?;
        let topic_defaults = dynamic.topic_defaults(&config);
        let mut recreated = Vec::new();
        let metrics = crate::metrics::Metrics::new();
        for topic in topics.all().filter(|_| single_node) {
            let log_config = Arc::new(log_config_for(&topic_defaults, &topic.configs));
            for index in 0..topic.partitions {
                let tp = TopicPartition::new(topic.name.clone(), index);
                // An empty log lost to a crash (or never created) is made again.
                let log = logs.get_or_create_deferred(&tp, Some(log_config.clone()))?;
                recreated.push(log.clone());
                {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    log.set_config(log_config.clone());
                    // This node is the whole ISR, so everything in the log is committed;
                    // the checkpointed high watermark may lag it after a crash.
                    let end = log.log_end_offset();
                    log.set_high_watermark(end);
                }
                partitions.insert(
                    tp.clone(),
                    Arc::new(
                        Partition::new(
                            tp,
                            log,
                            min_insync_replicas(&topic_defaults, &topic.configs),
                            config.node_id,
                            Assignment::local(config.node_id),
                        )
                        .with_counters(PartitionCounters::new(&metrics, &topic.name)),
                    ),
                );
            }
        }
        for tp in logs.partitions().filter(|_| single_node) {
            if !partitions.contains_key(tp) {
                tracing::warn!(partition = %tp, "log directory belongs to no known topic; left untouched");
            }
        }
        let (advertised_host, advertised_port) = config.advertised().map_err(anyhow::Error::msg)?;
        let log_dir_states = logs.dirs();
        let topics = Arc::new(Mutex::new(topics));
        let share_sessions_max = config.group_share_max_share_sessions.max(1) as usize;
        let group_settings = strand_coordinator::group::shard::GroupSettings {
            classic: crate::group::classic::GroupLimits {
                min_session_timeout_ms: config.group_min_session_timeout_ms,
                max_session_timeout_ms: config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
                max_size: config.group_max_size,
            },
            consumer: crate::group::consumer::ConsumerGroupLimits {
                session_timeout_ms: config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
                max_size: config.group_max_size,
            },
            share: strand_coordinator::group::share::ShareGroupLimits {
                session_timeout_ms: config.group_share_session_timeout_ms,
                heartbeat_interval_ms: config.group_share_heartbeat_interval_ms,
                max_size: config.group_share_max_size.max(1) as usize,
            },
            streams: crate::group_configs::streams_limits_of(&config),
            offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
        };
        let txn_settings = strand_coordinator::txn::shard::TxnSettings {
            max_timeout_ms: config.transaction_max_timeout_ms,
            id_expiration_ms: config.transactional_id_expiration_ms,
            transaction_version: strand_protocol::api_versions::TRANSACTION_VERSION,
        };
        let group_configs = crate::group_configs::LocalGroupConfigs::load(&data_dir)?;
        let scram = crate::local_state::LocalState::load(
            &data_dir,
            crate::scram_credentials::SCRAM_CREDENTIALS_FILE,
            "SCRAM credentials",
        )?;
        let features = crate::features::LocalFeatures::load(&data_dir)?;
        let local_acls =
            crate::local_state::LocalState::load(&data_dir, crate::acls::ACLS_FILE, "ACLs")?;
        let local_quotas = crate::local_state::LocalState::load(
            &data_dir,
            crate::quotas::CLIENT_QUOTAS_FILE,
            "client quotas",
        )?;
        let authorizer = config.authorizer();
        let broker = Arc::new(Broker {
            local_acls,
            local_quotas,
            quota_sensors: crate::quotas::QuotaSensors::default(),
            authorizer,
            dynamic,
            group_configs,
            scram,
            features,
            config,
            connection_limits,
            cluster_id,
            advertised_host,
            advertised_port,
            topics: topics.clone(),
            logs: Mutex::new(logs),
            partitions: RwLock::new(partitions),
            producer_ids: Arc::new(crate::producer_ids::ProducerIdManager::open(&data_dir)?),
            groups: crate::group::GroupCoordinator::new(
                group_settings,
                crate::group::coordinator::RegistryTopics(topics.clone()),
            ),
            txns: crate::txn::TxnCoordinator::new(txn_settings),
            share: crate::share::ShareManager::new(share_sessions_max),
            share_coordinator: Default::default(),
            fetch_sessions: crate::fetch_session::FetchSessionCache::new(
                crate::fetch_session::FETCH_SESSION_SLOTS_DEFAULT,
            ),
            shutting_down: tokio::sync::watch::Sender::new(false),
            cluster: std::sync::OnceLock::new(),
            log_dirs,
            log_mover: crate::log_mover::LogMover::start()?,
            log_dir_states,
            metrics,
            serving: std::sync::atomic::AtomicBool::new(false),
            tiered,
        });
        broker.log_dirs.create_later(recreated);
        // A single node's stored features; a cluster member follows its image's later.
        broker.follow_features(&broker.finalized_features());
        if broker.logs().has_queued_moves() {
            broker.log_mover.wake(Arc::downgrade(&broker));
        }
        Ok(broker)
    }

    /// Tells waiting requests (parked fetches) that the broker is stopping.
    pub fn begin_shutdown(&self) {
        self.shutting_down.send_replace(true);
    }

    /// A receiver that changes when shutdown begins.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutting_down.subscribe()
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The cluster id clients see: the quorum's in a cluster, meta.properties' otherwise.
    pub fn cluster_id(&self) -> String {
        self.cluster()
            .and_then(|c| c.image().cluster_id.clone())
            .unwrap_or_else(|| self.cluster_id.clone())
    }

    /// The settings topic configs default to: the start's, with the dynamic broker
    /// configs that are topic defaults over them (dynamic_broker_configs::TOPIC_DEFAULTS).
    pub fn topic_defaults(&self) -> BrokerConfig {
        self.dynamic.topic_defaults(&self.config)
    }

    /// Computes every hosted partition's log settings again (a topic default changed).
    pub fn reapply_topic_configs(&self) {
        let defaults = self.topic_defaults();
        for topic in self.topics() {
            self.apply_topic_configs(&defaults, &topic);
        }
    }

    /// Gives `topic`'s hosted partitions the log settings of its configs over `defaults`.
    fn apply_topic_configs(&self, defaults: &BrokerConfig, topic: &TopicInfo) {
        let log_config = Arc::new(log_config_for(defaults, &topic.configs));
        let min_insync = min_insync_replicas(defaults, &topic.configs);
        for index in 0..topic.partitions {
            if let Some(partition) = self.partition(&TopicPartition::new(&topic.name, index)) {
                partition.apply_configs(log_config.clone(), min_insync);
            }
        }
    }

    /// The cluster this broker belongs to; None on a single node.
    /// Tiered storage, when remote.log.storage.system.enable.
    pub fn tiered(&self) -> Option<&Arc<crate::tiered::TieredStorage>> {
        self.tiered.as_ref()
    }

    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.get()
    }

    /// Whether the coordinators may answer from the leaderships this broker's image
    /// shows (cluster/lease.rs); always on a single node.
    pub fn holds_leadership_lease(&self) -> bool {
        self.cluster().is_none_or(|c| c.holds_leadership_lease())
    }

    pub(crate) fn attach_cluster(&self, cluster: Arc<Cluster>) {
        if self.cluster.set(cluster).is_err() {
            tracing::error!("a broker joins one cluster only");
        }
    }

    /// Every partition hosted here.
    /// Starts moving `tp`'s log to the log directory `dir` (AlterReplicaLogDirs): queued
    /// for the mover thread; Ok if it is there or on its way already.
    pub fn move_log(
        self: &Arc<Self>,
        tp: &TopicPartition,
        dir: &Path,
    ) -> Result<(), strand_log::log_manager::MoveRefused> {
        let queued = self.logs().begin_move(tp, dir)?;
        if queued {
            self.log_mover.wake(Arc::downgrade(self));
        }
        Ok(())
    }

    /// Remembers the log directory for a partition of a known topic not hosted here yet.
    pub fn prefer_log_dir(
        &self,
        tp: &TopicPartition,
        dir: &Path,
    ) -> Result<(), strand_log::log_manager::MoveRefused> {
        self.logs().prefer_dir(tp, dir)
    }

    /// The next queued move between log directories (the mover thread).
    pub fn next_log_move(&self) -> Option<strand_log::log_manager::MoveJob> {
        self.logs().next_move()
    }

    /// Whether every log directory was shut down cleanly before this start (registration
    /// tells the controller: eligible_leaders.rs).
    pub fn previous_shutdown_clean(&self) -> bool {
        self.logs().previous_shutdown_clean()
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, LogManager> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records how a move ended (the mover thread).
    pub fn finish_log_move(
        &self,
        job: &strand_log::log_manager::MoveJob,
        outcome: &strand_log::LogResult<strand_log::log_move::MoveOutcome>,
    ) {
        self.logs().finish_move(job, outcome);
    }

    /// The moves between log directories under way: (partition, destination, progress).
    pub fn log_moves(
        &self,
    ) -> Vec<(
        TopicPartition,
        std::path::PathBuf,
        strand_log::log_move::MoveProgress,
    )> {
        self.logs().moves()
    }

    /// Every log directory (log.dirs) with its health.
    pub fn log_dir_states(&self) -> &[strand_log::log_manager::LogDirState] {
        &self.log_dir_states
    }

    /// Whether a log directory is offline (read without any lock: the Metadata path
    /// asks it for every topic).
    pub fn any_log_dir_offline(&self) -> bool {
        self.log_dir_states
            .iter()
            .any(|dir| dir.failure().is_some())
    }

    /// The server accepts clients from now on.
    pub fn set_serving(&self) {
        self.serving
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether this broker is ready for clients (/ready): it serves them, a cluster's
    /// controller has unfenced it, and it is in the ISR of every partition it hosts
    /// (after a restart, once its followers have caught up). Err(why not).
    pub fn readiness(&self) -> Result<(), String> {
        if !self.serving.load(std::sync::atomic::Ordering::Acquire) {
            return Err("the Kafka listeners do not serve yet".into());
        }
        if self.cluster().is_some_and(|cluster| !cluster.is_unfenced()) {
            return Err("the controller has not unfenced this broker yet".into());
        }
        let node = self.node_id();
        let hosted = self.hosted_partitions();
        let mut behind = hosted.iter().filter(|partition| {
            let assignment = partition.assignment();
            assignment.replicas.contains(&node) && !assignment.isr.contains(&node)
        });
        let shown: Vec<String> = behind.by_ref().take(5).map(|p| p.tp.to_string()).collect();
        if shown.is_empty() {
            return Ok(());
        }
        let more = behind.count();
        Err(format!(
            "{} partition(s) not caught up with their leader: {}{}",
            shown.len() + more,
            shown.join(", "),
            if more > 0 { ", ..." } else { "" }
        ))
    }

    pub fn hosted_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Sends ISR changes a leader decided on to the controller (cluster only).
    pub fn propose_isr_changes(&self, proposals: Vec<(TopicPartition, IsrProposal)>) {
        match self.cluster() {
            Some(cluster) => cluster.clone().send_isr_proposals(proposals),
            None => {
                for (tp, _) in proposals {
                    if let Some(partition) = self.partition(&tp) {
                        partition.abandon_isr_proposal();
                    }
                }
            }
        }
    }

    /// Makes local state match a metadata image: the topic registry, the partitions
    /// hosted here (opened or deleted), and each one's assignment (leader, epoch, ISR).
    pub fn reconcile(&self, image: &MetadataImage) -> Reconciled {
        let node = self.config.node_id;
        let mut out = Reconciled::default();
        let defaults_changed = self.dynamic.apply(image.dynamic_broker_configs(node));
        self.follow_features(&image.features);
        let topic_defaults = self.topic_defaults();
        let mut registry = self.registry();
        let stale: Vec<TopicInfo> = registry
            .all()
            .filter(|t| image.topic(&t.name).is_none_or(|now| now.id != t.id))
            .cloned()
            .collect();
        for topic in stale {
            if let Err(error) = registry.remove(&topic.name) {
                tracing::error!(%error, topic = topic.name, "updating topics.json failed");
            }
            for index in 0..topic.partitions {
                let tp = TopicPartition::new(topic.name.clone(), index);
                if self.unhost(&tp) {
                    out.removed.push(tp);
                }
            }
            // Every replica asks; deleting what is already gone is no error.
            self.delete_remote_data(&topic);
            tracing::info!(topic = topic.name, "topic deleted");
        }
        for topic in image.topics.values() {
            let info = TopicInfo {
                name: topic.name.clone(),
                id: topic.id,
                partitions: topic.partitions.len() as i32,
                configs: topic.configs.clone(),
            };
            let configs_changed = match registry.get(&topic.name) {
                None => {
                    if let Err(error) = registry.insert(info) {
                        tracing::error!(%error, topic = topic.name, "updating topics.json failed");
                    }
                    false
                }
                Some(existing) if *existing != info => {
                    let changed = existing.configs != info.configs;
                    if let Err(error) = registry.update(info) {
                        tracing::error!(%error, topic = topic.name, "updating topics.json failed");
                    }
                    changed
                }
                Some(_) => false,
            };
            let log_config = Arc::new(log_config_for(&topic_defaults, &topic.configs));
            let min_insync = min_insync_replicas(&topic_defaults, &topic.configs);
            for (index, state) in topic.partitions.iter().enumerate() {
                let tp = TopicPartition::new(topic.name.clone(), index as i32);
                if !state.replicas.contains(&node) {
                    if self.unhost(&tp) {
                        if topic.name == crate::group::records::OFFSETS_TOPIC {
                            // Moved off this broker: its groups' shard stops too.
                            out.offsets_leadership.push((index as i32, false));
                        }
                        if topic.name == crate::txn::TRANSACTION_STATE_TOPIC {
                            out.txn_leadership.push((index as i32, false));
                        }
                        out.removed.push(tp);
                    }
                    continue;
                }
                let partition = match self.partition(&tp) {
                    Some(partition) => {
                        if configs_changed || defaults_changed {
                            partition.apply_configs(log_config.clone(), min_insync);
                            partition.follow_unsynced_tail(); // turned flush-before-ack
                        }
                        partition
                    }
                    None => match self.host(&tp, log_config.clone(), min_insync) {
                        Ok(partition) => partition,
                        Err(error) => {
                            tracing::error!(partition = %tp, %error, "cannot open partition");
                            continue;
                        }
                    },
                };
                let change = partition.apply_assignment(Assignment::from(state));
                if change == RoleChange::BecameLeader {
                    // A sync it started as a follower may still run: its end counts in
                    // the high watermark once done.
                    partition.follow_unsynced_tail();
                }
                if change != RoleChange::Unchanged {
                    tracing::info!(partition = %tp, ?change, epoch = state.leader_epoch, "role changed");
                    if topic.name == crate::group::records::OFFSETS_TOPIC {
                        out.offsets_leadership
                            .push((index as i32, change == RoleChange::BecameLeader));
                    }
                    if topic.name == crate::txn::TRANSACTION_STATE_TOPIC {
                        out.txn_leadership
                            .push((index as i32, change == RoleChange::BecameLeader));
                    }
                }
                out.roles.push((tp, partition, change));
            }
        }
        out
    }

    /// Opens (creating) a partition's log and hosts it, with no assignment yet.
    fn host(
        &self,
        tp: &TopicPartition,
        log_config: Arc<LogConfig>,
        min_insync: i32,
    ) -> anyhow::Result<Arc<Partition>> {
        let log = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_create_deferred(tp, Some(log_config.clone()))?;
        log.lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_config(log_config);
        self.log_dirs.create_later(vec![log.clone()]);
        let partition = Arc::new(
            Partition::new(
                tp.clone(),
                log,
                min_insync,
                self.config.node_id,
                Assignment::none(),
            )
            .with_counters(PartitionCounters::new(&self.metrics, &tp.topic)),
        );
        self.partitions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tp.clone(), partition.clone());
        Ok(partition)
    }

    /// A deleted topic's objects in the remote store go too (tiered topics only).
    fn delete_remote_data(&self, topic: &TopicInfo) {
        let tiered_topic = topic
            .configs
            .get("remote.storage.enable")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if let (Some(tiered), true) = (self.tiered(), tiered_topic) {
            for index in 0..topic.partitions {
                let tp = TopicPartition::new(topic.name.clone(), index);
                tiered.delete_partition(&tp, topic.id);
            }
        }
    }

    /// Stops hosting a partition and deletes its log. Returns whether it was hosted.
    fn unhost(&self, tp: &TopicPartition) -> bool {
        let removed = self
            .partitions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tp);
        if let Err(error) = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .delete(tp)
        {
            tracing::error!(partition = %tp, %error, "deleting log failed");
        }
        removed.is_some()
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp)
            .cloned()
    }

    pub fn topic(&self, name: &str) -> Option<TopicInfo> {
        self.registry().get(name).cloned()
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<TopicInfo> {
        self.registry().get_by_id(id).cloned()
    }

    pub fn topics(&self) -> Vec<TopicInfo> {
        self.registry().all().cloned().collect()
    }

    /// The metadata this broker answers from: the cluster's image, or on a single node
    /// the image of one broker (itself, the only replica of every partition) with its
    /// topics, so that metadata questions have one answer path.
    pub fn metadata_image(&self) -> Arc<MetadataImage> {
        if let Some(cluster) = self.cluster() {
            return cluster.image();
        }
        let node = self.config.node_id;
        let mut image = MetadataImage::default();
        image.brokers.insert(
            node,
            strand_metadata::BrokerInfo {
                id: node,
                host: self.advertised_host.clone(),
                port: self.advertised_port,
                rack: None,
                incarnation: Uuid::nil(),
                fenced: false,
                in_controlled_shutdown: false,
                listeners: Vec::new(),
            },
        );
        for topic in self.topics() {
            let partitions = (0..topic.partitions)
                .map(|_| strand_metadata::PartitionState::new(vec![node]))
                .collect();
            image.topics.insert(
                topic.name.clone(),
                strand_metadata::TopicImage {
                    name: topic.name,
                    id: topic.id,
                    configs: topic.configs,
                    partitions,
                },
            );
        }
        image.reindex();
        Arc::new(image)
    }

    pub(crate) fn registry(&self) -> std::sync::MutexGuard<'_, TopicRegistry> {
        self.topics.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates and (unless `validate_only`) creates a topic, as CreateTopics and topic
    /// auto-creation do. `partitions` and `replication_factor` of -1 take the defaults;
    /// `assignments` (replica lists per partition) replace both when given. In a cluster
    /// the controller decides, and this returns once this broker's image has the topic.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        assignments: Vec<Vec<i32>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicInfo, ApiError> {
        let (partitions, replication_factor) =
            self.check_new_topic(name, partitions, replication_factor, &assignments, &configs)?;
        let Some(cluster) = self.cluster() else {
            return self.create_topic_locally(
                name,
                partitions,
                replication_factor,
                configs,
                validate_only,
            );
        };
        let command = ControllerCommand::CreateTopics {
            topics: vec![NewTopic {
                name: name.to_string(),
                id: Uuid::new_v4(),
                partitions,
                replication_factor,
                assignments,
                configs: configs.clone(),
            }],
        };
        if validate_only {
            // The controller's decision is a pure function: try it on this broker's image.
            let (reply, records) = strand_metadata::decide(&cluster.image(), &command);
            return match (reply, records.first()) {
                (_, Some(MetadataRecord::CreateTopic { id, partitions, .. })) => Ok(TopicInfo {
                    name: name.to_string(),
                    id: *id,
                    partitions: partitions.len() as i32,
                    configs,
                }),
                (ControllerReply::Results(mut results), None) if !results.is_empty() => {
                    let result = results.remove(0);
                    Err(ApiError {
                        code: result.code,
                        message: result.message,
                    })
                }
                (other, _) => Err(ApiError::new(
                    error_code::UNKNOWN_SERVER_ERROR,
                    format!("unexpected controller decision {other:?}"),
                )),
            };
        }
        cluster
            .write_and_wait(command, |image| image.topic(name).is_some())
            .await?;
        self.topic(name).ok_or_else(|| {
            ApiError::new(
                error_code::UNKNOWN_SERVER_ERROR,
                "created topic is not in the registry",
            )
        })
    }

    /// Checks what needs no metadata (name, counts, configs) and resolves the defaults.
    fn check_new_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        assignments: &[Vec<i32>],
        configs: &BTreeMap<String, String>,
    ) -> Result<(i32, i16), ApiError> {
        validate_topic_name(name)?;
        let (partitions, replication_factor) = if assignments.is_empty() {
            (
                if partitions == -1 {
                    self.config.num_partitions
                } else {
                    partitions
                },
                if replication_factor == -1 {
                    self.config.default_replication_factor
                } else {
                    replication_factor
                },
            )
        } else {
            (assignments.len() as i32, assignments[0].len() as i16)
        };
        if partitions <= 0 {
            return Err(ApiError::new(
                error_code::INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if partitions > PARTITIONS_PER_TOPIC_MAX {
            return Err(ApiError::new(
                error_code::INVALID_PARTITIONS,
                format!("Number of partitions {partitions} exceeds the limit of {PARTITIONS_PER_TOPIC_MAX}."),
            ));
        }
        if replication_factor <= 0 {
            return Err(ApiError::new(
                error_code::INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        for (key, value) in configs {
            validate_topic_config(key, Some(value))
                .map_err(|message| ApiError::new(error_code::INVALID_CONFIG, message))?;
        }
        validate_tiering(&self.topic_defaults(), configs, None)
            .map_err(|message| ApiError::new(error_code::INVALID_CONFIG, message))?;
        Ok((partitions, replication_factor))
    }

    /// A single node's topic creation: registry and logs here.
    fn create_topic_locally(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicInfo, ApiError> {
        if replication_factor > 1 {
            return Err(ApiError::new(
                error_code::INVALID_REPLICATION_FACTOR,
                format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned."),
            ));
        }
        let mut registry = self.registry();
        if registry.get(name).is_some() {
            return Err(ApiError::new(
                error_code::TOPIC_ALREADY_EXISTS,
                format!("Topic '{name}' already exists."),
            ));
        }
        if let Some(colliding) = registry
            .all()
            .find(|t| t.name != name && collision_key(&t.name) == collision_key(name))
        {
            return Err(ApiError::new(
                error_code::INVALID_TOPIC_EXCEPTION,
                format!(
                    "Topic '{name}' collides with existing topic: {}",
                    colliding.name
                ),
            ));
        }
        let topic = TopicInfo {
            name: name.to_string(),
            id: Uuid::new_v4(),
            partitions,
            configs,
        };
        if validate_only {
            return Ok(topic);
        }
        registry.insert(topic.clone()).map_err(storage_error)?;
        self.open_partitions(&topic, 0).map_err(storage_error)?;
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Creates the logs of partitions `from..topic.partitions` and hosts them; their
    /// files are made in the background (or by their first write).
    fn open_partitions(&self, topic: &TopicInfo, from: i32) -> anyhow::Result<()> {
        let defaults = self.topic_defaults();
        let log_config: Arc<LogConfig> = Arc::new(log_config_for(&defaults, &topic.configs));
        let min_insync = min_insync_replicas(&defaults, &topic.configs);
        let mut logs = self.logs();
        let mut partitions = self.partitions.write().unwrap_or_else(|p| p.into_inner());
        let mut created = Vec::new();
        for index in from..topic.partitions {
            let tp = TopicPartition::new(topic.name.clone(), index);
            let log = logs.get_or_create_deferred(&tp, Some(log_config.clone()))?;
            created.push(log.clone());
            partitions.insert(
                tp.clone(),
                Arc::new(
                    Partition::new(
                        tp,
                        log,
                        min_insync,
                        self.config.node_id,
                        Assignment::local(self.config.node_id),
                    )
                    .with_counters(PartitionCounters::new(&self.metrics, &topic.name)),
                ),
            );
        }
        drop((partitions, logs));
        self.log_dirs.create_later(created);
        Ok(())
    }

    /// CreatePartitions: grows a topic to `count` partitions.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        if let Some(cluster) = self.cluster() {
            let command = ControllerCommand::CreatePartitions {
                name: name.to_string(),
                count,
            };
            if validate_only {
                let (reply, _) = strand_metadata::decide(&cluster.image(), &command);
                return crate::cluster::single_result(reply);
            }
            return cluster
                .write_and_wait(command, |image| {
                    image
                        .topic(name)
                        .is_some_and(|t| t.partitions.len() as i32 >= count)
                })
                .await;
        }
        let mut registry = self.registry();
        let Some(topic) = registry.get(name).cloned() else {
            return Err(ApiError::new(
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("The topic '{name}' does not exist."),
            ));
        };
        if count == topic.partitions {
            return Err(ApiError::new(
                error_code::INVALID_PARTITIONS,
                format!("Topic already has {count} partitions."),
            ));
        }
        if count < topic.partitions {
            return Err(ApiError::new(
                error_code::INVALID_PARTITIONS,
                format!(
                    "Topic currently has {} partitions, which is higher than the requested {count}.",
                    topic.partitions
                ),
            ));
        }
        if count > PARTITIONS_PER_TOPIC_MAX {
            return Err(ApiError::new(
                error_code::INVALID_PARTITIONS,
                format!(
                    "Number of partitions {count} exceeds the limit of {PARTITIONS_PER_TOPIC_MAX}."
                ),
            ));
        }
        if validate_only {
            return Ok(());
        }
        let from = topic.partitions;
        let grown = TopicInfo {
            partitions: count,
            ..topic
        };
        registry.update(grown.clone()).map_err(storage_error)?;
        self.open_partitions(&grown, from).map_err(storage_error)?;
        tracing::info!(topic = name, from, to = count, "added partitions");
        Ok(())
    }

    /// AlterConfigs / IncrementalAlterConfigs on a topic: validates every config, then
    /// replaces the topic's overrides and applies them to its partitions at once.
    pub async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        for (key, value) in &configs {
            validate_topic_config(key, Some(value))
                .map_err(|message| ApiError::new(error_code::INVALID_CONFIG, message))?;
        }
        let before = self.topic(name).map(|topic| topic.configs);
        validate_tiering(&self.topic_defaults(), &configs, before.as_ref())
            .map_err(|message| ApiError::new(error_code::INVALID_CONFIG, message))?;
        if let Some(cluster) = self.cluster() {
            let command = ControllerCommand::SetTopicConfigs {
                name: name.to_string(),
                configs: configs.clone(),
            };
            if validate_only {
                let (reply, _) = strand_metadata::decide(&cluster.image(), &command);
                return crate::cluster::single_result(reply);
            }
            return cluster
                .write_and_wait(command, |image| {
                    image.topic(name).is_some_and(|t| t.configs == configs)
                })
                .await;
        }
        let mut registry = self.registry();
        let Some(topic) = registry.get(name).cloned() else {
            return Err(ApiError::new(
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("The topic '{name}' does not exist."),
            ));
        };
        if validate_only {
            return Ok(());
        }
        let updated = TopicInfo { configs, ..topic };
        registry.update(updated.clone()).map_err(storage_error)?;
        self.apply_topic_configs(&self.topic_defaults(), &updated);
        tracing::info!(topic = name, configs = ?updated.configs, "changed topic configs");
        Ok(())
    }

    pub async fn delete_topic(&self, name: &str) -> Result<TopicInfo, ApiError> {
        if let Some(cluster) = self.cluster() {
            let existing = self.topic(name);
            let command = ControllerCommand::DeleteTopics {
                names: vec![name.to_string()],
            };
            cluster
                .write_and_wait(command, |image| image.topic(name).is_none())
                .await?;
            return existing.ok_or(ApiError {
                code: error_code::UNKNOWN_TOPIC_OR_PARTITION,
                message: None,
            });
        }
        let mut registry = self.registry();
        let Some(topic) = registry.remove(name).map_err(storage_error)? else {
            return Err(ApiError {
                code: error_code::UNKNOWN_TOPIC_OR_PARTITION,
                message: None,
            });
        };
        let mut logs = self.logs();
        let mut partitions = self.partitions.write().unwrap_or_else(|p| p.into_inner());
        for index in 0..topic.partitions {
            let tp = TopicPartition::new(topic.name.clone(), index);
            partitions.remove(&tp);
            if let Err(error) = logs.delete(&tp) {
                tracing::error!(partition = %tp, %error, "deleting log failed");
            }
        }
        self.delete_remote_data(&topic);
        tracing::info!(topic = name, "deleted topic");
        Ok(topic)
    }

    /// Periodic log work: flush.ms / flush.messages flushes (each log's fsyncs without
    /// its lock or the log manager's), removal of deleted segments' files (as Kafka's
    /// file.delete.delay.ms, here the checkpoint interval), then the checkpoints.
    pub fn maintenance(&self) {
        let logs = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .all_logs();
        for (tp, log) in logs {
            // strand_log::upkeep's work, the flush timed (LogFlushRateAndTimeMs).
            if let Err(error) =
                crate::partition::flush_if_due_timed(&log, &self.metrics.log_flush_ms)
            {
                tracing::error!(partition = %tp, %error, "flush failed");
            }
            strand_log::remove_doomed(&log);
        }
        if let Err(error) = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .checkpoint()
        {
            tracing::error!(%error, "writing log checkpoints failed");
        }
    }

    /// Retention (cleanup.policy=delete) across every log.
    pub fn apply_retention(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.logs().apply_retention(now);
    }

    /// One compaction pass over the compacted topics. The log manager is locked only to
    /// list the logs; each log only during its own pass.
    pub fn clean_logs(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let limits = strand_log::CleanerLimits {
            io_max_bytes_per_second: self.config.cleaner_io_max_bytes_per_second,
            ..strand_log::CleanerLimits::default()
        };
        let logs = self
            .logs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .all_logs();
        strand_log::log_manager::clean_logs(&logs, now, limits);
    }

    /// Flushes and closes every log and writes the clean-shutdown marker.
    pub fn shutdown(&self) -> anyhow::Result<()> {
        self.logs().shutdown()?;
        Ok(())
    }

    /// The shared open-file cache (for diagnostics).
    pub fn file_cache(&self) -> Arc<FileCache> {
        self.logs().file_cache().clone()
    }
}

fn storage_error(error: impl std::fmt::Display) -> ApiError {
    tracing::error!(%error, "storage failure");
    ApiError::new(error_code::KAFKA_STORAGE_ERROR, error.to_string())
}

/// Kafka's topic name rules, with its messages.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::new(
            error_code::INVALID_TOPIC_EXCEPTION,
            "Topic name is illegal, it can't be empty",
        ));
    }
    if name == "." || name == ".." {
        return Err(ApiError::new(
            error_code::INVALID_TOPIC_EXCEPTION,
            "Topic name cannot be \".\" or \"..\"",
        ));
    }
    if name.len() > 249 {
        return Err(ApiError::new(
            error_code::INVALID_TOPIC_EXCEPTION,
            format!(
                "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
            ),
        ));
    }
    if !is_valid_topic_name(name) {
        return Err(ApiError::new(
            error_code::INVALID_TOPIC_EXCEPTION,
            format!("Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ));
    }
    Ok(())
}

/// '.' and '_' collide in metric names, so Kafka refuses topics differing only by them.
fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// Gives every other online log directory the first's `meta.properties`, or checks the
/// one it has: a directory of another cluster or node is refused (as Kafka does), one
/// whose file cannot be read or written goes offline.
fn claim_log_dirs(logs: &LogManager, cluster_id: &str, node_id: i32) -> anyhow::Result<()> {
    for dir in logs.dirs().into_iter().skip(1) {
        if dir.failure().is_some() {
            continue;
        }
        let path = dir.path.join(META_PROPERTIES_FILE);
        match read_identity(&path) {
            Ok(Some((cluster, node))) => anyhow::ensure!(
                cluster == cluster_id && node == node_id,
                "log directory {} belongs to cluster {cluster} node {node}, not cluster {cluster_id} node {node_id}",
                dir.path.display()
            ),
            Ok(None) => {
                if let Err(error) = write_identity(&path, cluster_id, node_id, None) {
                    logs.fail_dir(&dir.path, &error.to_string());
                }
            }
            Err(error) => {
                logs.fail_dir(&dir.path, &error.to_string());
            }
        }
    }
    Ok(())
}

/// The text of a `meta.properties`, None if there is none.
fn read_meta_properties(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => anyhow::bail!("cannot read {}: {error}", path.display()),
    }
}

/// One `key=value` of a `meta.properties`.
fn meta_property<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
    })
}

/// The (cluster id, node id) of a `meta.properties`, None if there is none.
fn read_identity(path: &Path) -> anyhow::Result<Option<(String, i32)>> {
    let Some(text) = read_meta_properties(path)? else {
        return Ok(None);
    };
    let cluster_id = meta_property(&text, "cluster.id")
        .ok_or_else(|| anyhow::anyhow!("{} has no cluster.id", path.display()))?;
    let node_id: i32 = meta_property(&text, "node.id")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{} has no node.id", path.display()))?;
    Ok(Some((cluster_id.to_string(), node_id)))
}

/// The directory id of this node's metadata log (`dir`, the Raft log's directory): the
/// `directory.id` of the `meta.properties` there, made on first start, in Kafka's format
/// so that `kafka-metadata-quorum add-controller` reads it (its config's
/// `metadata.log.dir` naming `dir`). With the node id it is the replica key of KIP-853.
pub fn metadata_directory_id(dir: &Path, cluster_id: &str, node_id: i32) -> anyhow::Result<Uuid> {
    let path = dir.join(META_PROPERTIES_FILE);
    if let Some(text) = read_meta_properties(&path)? {
        let id = meta_property(&text, "directory.id")
            .ok_or_else(|| anyhow::anyhow!("{} has no directory.id", path.display()))?;
        return kafka_uuid::from_text(id)
            .ok_or_else(|| anyhow::anyhow!("{}: directory.id {id} is no uuid", path.display()));
    }
    std::fs::create_dir_all(dir)
        .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", dir.display()))?;
    let directory_id = kafka_uuid::random();
    write_identity(&path, cluster_id, node_id, Some(directory_id))?;
    Ok(directory_id)
}

/// The file of the data directory that remembers the metadata log directory's id.
const METADATA_DIRECTORY_REMEMBERED: &str = "metadata-directory.id";

/// Has the data directory (`data_dir`) remember the metadata log directory's id, and
/// marks that directory (`metadata_dir`) as replacing a lost one when the data directory
/// remembers another: its Raft log was lost while this node's data survived, so it votes
/// for nobody until its registration records it (`strand_raft::replica_keys`). Run on
/// every start, so a crash between the new directory's making and its marking is made
/// good at the next. (Nothing remembered yet: a first start, or a node of an older
/// Strand; nothing is marked.)
pub fn remember_metadata_directory(
    data_dir: &Path,
    metadata_dir: &Path,
    directory_id: Uuid,
) -> anyhow::Result<()> {
    let path = data_dir.join(METADATA_DIRECTORY_REMEMBERED);
    let remembered = match std::fs::read(&path) {
        // Unreadable: taken as another directory's, the safe side (a node wrongly marked
        // only refuses what is addressed by nil, and stands for election once recorded).
        Ok(bytes) => Some(kafka_uuid::from_text(String::from_utf8_lossy(&bytes).trim()).unwrap_or_else(|| {
            tracing::warn!(file = %path.display(), "unreadable: taken as naming another metadata directory");
            Uuid::nil()
        })),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => anyhow::bail!("cannot read {}: {error}", path.display()),
    };
    if remembered == Some(directory_id) {
        return Ok(());
    }
    if let Some(lost) = remembered {
        tracing::warn!(
            lost = %kafka_uuid::to_text(&lost),
            new = %kafka_uuid::to_text(&directory_id),
            dir = %metadata_dir.display(),
            "the metadata log directory was lost and made again: this node takes no part in the quorum until its registration records the new one"
        );
        strand_raft::replica_keys::mark_replaced(metadata_dir)
            .map_err(|error| anyhow::anyhow!("cannot mark {}: {error}", metadata_dir.display()))?;
    }
    strand_log::checkpoint::write_atomically(&path, kafka_uuid::to_text(&directory_id).as_bytes())
        .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))
}

/// Writes a `meta.properties` (version 1, as Kafka's), with a `directory.id` if given.
fn write_identity(
    path: &Path,
    cluster_id: &str,
    node_id: i32,
    directory_id: Option<Uuid>,
) -> anyhow::Result<()> {
    let mut text =
        format!("#Written by strand\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n");
    if let Some(id) = directory_id {
        text.push_str(&format!("directory.id={}\n", kafka_uuid::to_text(&id)));
    }
    strand_log::checkpoint::write_atomically(path, text.as_bytes())
        .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))
}

/// Reads `meta.properties` (cluster id, node id), creating it on first start.
fn load_or_create_identity(data_dir: &Path, node_id: i32) -> anyhow::Result<String> {
    let path = data_dir.join(META_PROPERTIES_FILE);
    match read_identity(&path)? {
        Some((cluster_id, stored)) => {
            anyhow::ensure!(
                stored == node_id,
                "data directory {} belongs to node {stored}, not node {node_id}",
                data_dir.display()
            );
            Ok(cluster_id)
        }
        None => {
            let cluster_id = kafka_uuid::to_text(&Uuid::new_v4());
            write_identity(&path, &cluster_id, node_id, None)?;
            Ok(cluster_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CreateTopics answers before the partitions' files exist: the background creator
    /// makes them, a produce meanwhile finds a working log, and a restart before the
    /// creator ran brings the partitions back from the topic metadata.
    #[tokio::test]
    async fn new_partitions_are_written_to_disk_after_the_answer() {
        let dir = tempfile::tempdir().unwrap();
        let config = BrokerConfig {
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        };
        let broker = Broker::open(config.clone()).unwrap();
        broker
            .create_topic("wide", 300, 1, Vec::new(), BTreeMap::new(), false)
            .await
            .unwrap();
        let last = TopicPartition::new("wide", 299);
        let mut batch = strand_records::BatchBuilder::new(0, 1_000);
        batch.push(strand_records::Record::new(
            None,
            Some(b"v".to_vec()),
            1_000,
        ));
        let info = broker
            .partition(&last)
            .expect("hosted as soon as created")
            .append(batch.build(), true, std::time::Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(info.first_offset, 0);
        assert!(dir
            .path()
            .join("wide-299")
            .join("00000000000000000000.log")
            .exists());
        // The rest appear without any write (no fixed delay: poll up to a guard).
        let guard = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while (0..300).any(|p| !dir.path().join(format!("wide-{p}")).is_dir()) {
            assert!(
                std::time::Instant::now() < guard,
                "directories never appeared"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        drop(broker);

        // A topic whose directories are gone (a crash before the creator's turn) is
        // hosted again, empty, from topics.json.
        std::fs::remove_dir_all(dir.path().join("wide-7")).unwrap();
        let broker = Broker::open(config).unwrap();
        let reopened = broker.partition(&TopicPartition::new("wide", 7)).unwrap();
        assert_eq!(reopened.log().log_end_offset(), 0);
        assert_eq!(broker.partition(&last).unwrap().log().log_end_offset(), 1);
    }

    #[test]
    fn a_metadata_directory_made_again_is_marked_as_replacing_the_lost_one() {
        use strand_raft::replica_keys::is_marked_replaced;
        let data = tempfile::tempdir().unwrap();
        let metadata = data.path().join("__cluster_metadata");
        let first = metadata_directory_id(&metadata, "c", 1).unwrap();
        remember_metadata_directory(data.path(), &metadata, first).unwrap();
        assert!(
            !is_marked_replaced(&metadata),
            "a first start replaces nothing"
        );
        // A restart on the same directory.
        assert_eq!(metadata_directory_id(&metadata, "c", 1).unwrap(), first);
        remember_metadata_directory(data.path(), &metadata, first).unwrap();
        assert!(!is_marked_replaced(&metadata));
        // The metadata log's disk is lost; the data directory survives.
        std::fs::remove_dir_all(&metadata).unwrap();
        let second = metadata_directory_id(&metadata, "c", 1).unwrap();
        assert_ne!(second, first);
        remember_metadata_directory(data.path(), &metadata, second).unwrap();
        assert!(is_marked_replaced(&metadata));
        // The marker stays for the directory's life.
        remember_metadata_directory(data.path(), &metadata, second).unwrap();
        assert!(is_marked_replaced(&metadata));
    }

    #[test]
    fn a_node_of_an_older_strand_is_not_taken_for_one_that_lost_its_metadata() {
        // Its data directory remembers no metadata directory.
        let data = tempfile::tempdir().unwrap();
        let metadata = data.path().join("__cluster_metadata");
        std::fs::create_dir_all(&metadata).unwrap();
        std::fs::write(metadata.join("raft.log"), b"").unwrap();
        let id = metadata_directory_id(&metadata, "c", 1).unwrap();
        remember_metadata_directory(data.path(), &metadata, id).unwrap();
        assert!(!strand_raft::replica_keys::is_marked_replaced(&metadata));
    }

    #[test]
    fn cluster_ids_look_like_kafkas() {
        assert_eq!(kafka_uuid::to_text(&Uuid::nil()).len(), 22);
        let mut bytes = [0u8; 16];
        bytes[..2].copy_from_slice(b"\xfb\xff");
        assert!(kafka_uuid::to_text(&Uuid::from_bytes(bytes)).starts_with("-_8"));
    }

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_topic_name("orders.v1_eu-2").is_ok());
        assert_eq!(
            validate_topic_name("").unwrap_err().code,
            error_code::INVALID_TOPIC_EXCEPTION
        );
        assert_eq!(
            validate_topic_name("a b").unwrap_err().code,
            error_code::INVALID_TOPIC_EXCEPTION
        );
        assert_eq!(
            validate_topic_name(&"x".repeat(250)).unwrap_err().code,
            error_code::INVALID_TOPIC_EXCEPTION
        );
    }
}
