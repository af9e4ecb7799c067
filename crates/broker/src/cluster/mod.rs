//! A broker in a replicated cluster: its part of the metadata quorum (a voter if it is a
//! controller, a learner otherwise), registration and heartbeats to the active controller,
//! following the metadata image (topics, partitions, leaders, ISRs) into local state, the
//! follower fetchers, and ISR changes proposed to the controller.
//!
//! Lifecycle: `start` joins the quorum and registers (a new incarnation starts fenced);
//! heartbeats report when this broker has caught up with the metadata, and the controller
//! unfences it; `shutdown` asks for a controlled shutdown (leaderships move away first),
//! then stops.

pub mod fetcher;
pub mod inter_broker;
pub mod lease;
pub mod peers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use strand_log::TopicPartition;
use strand_metadata::{ControllerCommand, ControllerReply, ItemResult, MetadataImage};
use strand_raft::client::QuorumClient;
use strand_raft::controller_service::ServiceConfig;
use strand_raft::network::QuorumTls;
use strand_raft::node::{QuorumConfig, QuorumNode};
use strand_raft::quorum_state::QuorumDescription;
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use strand_raft::state_machine::Published;
use tokio::sync::watch;
use uuid::Uuid;

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::partition::{IsrProposal, RoleChange};
use fetcher::Fetchers;
use inter_broker::InterBrokerSecurity;
use lease::LeadershipLease;

/// How long a request to the controller may take (retries included).
const CONTROLLER_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a controlled shutdown waits for leaderships to move.
const CONTROLLED_SHUTDOWN_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// False for a controller-only node: it holds the metadata quorum and nothing else.
    pub broker_role: bool,
    /// Controller node ids and quorum addresses (`--controllers 1@host:port,...`).
    pub controllers: BTreeMap<i32, String>,
    /// This node's quorum address: its entry in `controllers`, or where a broker-only
    /// node receives the metadata log.
    pub quorum_listen: SocketAddr,
    /// broker.rack
    pub rack: Option<String>,
    pub broker_heartbeat_interval: Duration,
    pub broker_session_timeout: Duration,
    /// replica.lag.time.max.ms
    pub replica_lag_time_max: Duration,
    /// None: auto.leader.rebalance.enable=false.
    pub leader_imbalance_check_interval: Option<Duration>,
    /// Raft heartbeat interval of the quorum.
    pub raft_heartbeat_interval: Duration,
    /// min.insync.replicas at start: recorded cluster-wide by the first active controller
    /// (eligible_leaders.rs).
    pub min_insync_replicas: i32,
    /// Mutual TLS between nodes (the controller listener mapped to SSL).
    pub quorum_tls: Option<QuorumTls>,
    /// How connections to peers are opened (the inter-broker listener's TLS and SASL).
    pub inter_broker: Arc<InterBrokerSecurity>,
}

pub struct Cluster {
    node_id: i32,
    incarnation: Uuid,
    /// The directory id of this node's metadata log (`broker::metadata_directory_id`).
    directory_id: Uuid,
    config: ClusterConfig,
    quorum: tokio::sync::Mutex<Option<QuorumNode>>,
    client: QuorumClient,
    metadata: watch::Receiver<Published>,
    /// The image this broker has reconciled to (what its APIs answer from).
    reconciled: watch::Sender<Arc<MetadataImage>>,
    /// The metadata log index of `reconciled`.
    reconciled_index: watch::Sender<u64>,
    /// Renewed by heartbeats: whether the image's leaderships are still this broker's.
    lease: LeadershipLease,
    fetchers: Fetchers,
    /// How connections to peers are opened (the inter-broker listener's TLS and SASL).
    pub inter_broker: Arc<InterBrokerSecurity>,
    shutting_down: AtomicBool,
    broker: Weak<Broker>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.node_id)
            .field("incarnation", &self.incarnation)
            .finish()
    }
}

/// A controller's answer to a one-item command.
fn unexpected_answer(answer: ControllerResponse) -> ApiError {
    ApiError::new(
        error_code::UNKNOWN_SERVER_ERROR,
        format!("unexpected controller answer {answer:?}"),
    )
}

pub fn single_result(reply: ControllerReply) -> Result<(), ApiError> {
    match reply {
        ControllerReply::Results(mut results) if results.len() == 1 => {
            item_result(results.remove(0))
        }
        other => Err(unexpected_reply(other)),
    }
}

/// One item's result of a controller decision as the broker answers it.
pub fn item_result(ItemResult { code, message }: ItemResult) -> Result<(), ApiError> {
    if code == error_code::NONE {
        Ok(())
    } else {
        Err(ApiError { code, message })
    }
}

/// A controller reply of another shape than the command asks for.
pub fn unexpected_reply(reply: ControllerReply) -> ApiError {
    ApiError::new(
        error_code::UNKNOWN_SERVER_ERROR,
        format!("unexpected controller reply {reply:?}"),
    )
}

/// A controller-only node: its part of the quorum, no Kafka listener, no partitions.
pub async fn start_controller_only(
    node_id: i32,
    data_dir: &std::path::Path,
    config: &ClusterConfig,
) -> anyhow::Result<QuorumNode> {
    // A controller-only node has no broker to register its directory with, so it checks
    // no Raft message against its own (`replica_keys.rs`).
    QuorumNode::start(quorum_config(node_id, data_dir, config, Uuid::nil())).await
}

/// Where a node keeps the metadata log (Kafka's metadata.log.dir).
fn metadata_log_dir(data_dir: &std::path::Path) -> std::path::PathBuf {
    data_dir.join("__cluster_metadata")
}

/// `directory_id`: the metadata log directory's (`broker::metadata_directory_id`), or nil.
fn quorum_config(
    node_id: i32,
    data_dir: &std::path::Path,
    config: &ClusterConfig,
    directory_id: Uuid,
) -> QuorumConfig {
    QuorumConfig {
        node_id: node_id as u64,
        voters: config
            .controllers
            .iter()
            .map(|(id, address)| (*id as u64, address.clone()))
            .collect(),
        listen: config.quorum_listen,
        dir: metadata_log_dir(data_dir),
        directory_id,
        service: ServiceConfig {
            session_timeout: config.broker_session_timeout,
            preferred_leader_check: config.leader_imbalance_check_interval,
            min_insync_replicas: Some(config.min_insync_replicas),
        },
        heartbeat_interval: config.raft_heartbeat_interval,
        tls: config.quorum_tls.clone(),
    }
}

impl Cluster {
    /// Joins the quorum, registers this broker and starts following the metadata.
    pub async fn start(
        broker: &Arc<Broker>,
        config: ClusterConfig,
    ) -> anyhow::Result<Arc<Cluster>> {
        let node_id = broker.node_id();
        let metadata_dir = metadata_log_dir(&broker.config.data_dir);
        let directory_id =
            crate::broker::metadata_directory_id(&metadata_dir, &broker.cluster_id(), node_id)?;
        crate::broker::remember_metadata_directory(
            &broker.config.data_dir,
            &metadata_dir,
            directory_id,
        )?;
        let quorum_config = quorum_config(node_id, &broker.config.data_dir, &config, directory_id);
        let voters = quorum_config.voters.clone();
        let inter_broker = config.inter_broker.clone();
        let quorum = QuorumNode::start(quorum_config).await?;
        let quorum_client =
            QuorumClient::new(voters, config.quorum_tls.clone()).following(quorum.raft.metrics());
        let metadata = quorum.metadata.clone();
        let cluster = Arc::new(Cluster {
            node_id,
            incarnation: Uuid::new_v4(),
            directory_id,
            config,
            quorum: tokio::sync::Mutex::new(Some(quorum)),
            client: quorum_client,
            metadata: metadata.clone(),
            reconciled: watch::Sender::new(Arc::new(MetadataImage::default())),
            reconciled_index: watch::Sender::new(0),
            lease: LeadershipLease::default(),
            fetchers: Fetchers::new(
                node_id,
                metadata,
                broker.dynamic.follower_throttle.clone(),
                inter_broker.clone(),
                broker.tiered().cloned(),
            ),
            inter_broker,
            shutting_down: AtomicBool::new(false),
            broker: Arc::downgrade(broker),
        });
        broker.attach_cluster(cluster.clone());
        tokio::spawn(cluster.clone().follow_metadata());
        tokio::spawn(cluster.clone().heartbeat_loop());
        tokio::spawn(cluster.clone().isr_shrink_loop());
        Ok(cluster)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The metadata image as this broker has applied it.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.reconciled.borrow().clone()
    }

    /// Waits until the reconciled image satisfies `ready` (e.g. a new topic is there).
    pub async fn wait_for_image(&self, ready: impl Fn(&MetadataImage) -> bool) -> bool {
        let mut receiver = self.reconciled.subscribe();
        tokio::time::timeout(
            CONTROLLER_REQUEST_TIMEOUT,
            receiver.wait_for(|image| ready(image)),
        )
        .await
        .is_ok_and(|r| r.is_ok())
    }

    /// Whether this incarnation is registered and unfenced in the applied image. Until
    /// then the images applied are the metadata log replayed from before this process
    /// started: leaderships in them are history, not this broker's to act on.
    pub fn is_unfenced(&self) -> bool {
        self.reconciled
            .borrow()
            .brokers
            .get(&self.node_id)
            .is_some_and(|b| b.incarnation == self.incarnation && !b.fenced)
    }

    /// Resolves once this incarnation is registered and unfenced in the applied image.
    pub async fn wait_until_unfenced(&self) {
        let mut receiver = self.reconciled.subscribe();
        let _ = receiver
            .wait_for(|image| {
                image
                    .brokers
                    .get(&self.node_id)
                    .is_some_and(|b| b.incarnation == self.incarnation && !b.fenced)
            })
            .await;
    }

    /// Whether this broker may still answer from its image as the leader it shows
    /// (lease.rs): false from a session timeout after its last heartbeat the controller
    /// answered, until a new one is answered and the metadata applied up to that answer.
    pub fn holds_leadership_lease(&self) -> bool {
        self.lease.held(std::time::Instant::now())
    }

    /// A heartbeat sent at `sent` was answered unfenced at metadata index `index`: the
    /// lease is renewed once the image has caught up with that index (within the lease).
    fn renew_lease(self: &Arc<Self>, sent: std::time::Instant, index: u64) {
        let session_timeout = self.config.broker_session_timeout;
        if *self.reconciled_index.borrow() >= index {
            self.lease.renew(sent, session_timeout);
            return;
        }
        let deadline = LeadershipLease::deadline(sent, session_timeout);
        let cluster = self.clone();
        tokio::spawn(async move {
            let mut applied = cluster.reconciled_index.subscribe();
            let caught_up = tokio::time::timeout_at(
                deadline.into(),
                applied.wait_for(|applied| *applied >= index),
            )
            .await;
            if matches!(caught_up, Ok(Ok(_))) {
                cluster.lease.renew(sent, session_timeout);
            }
        });
    }

    /// Raft messages refused on the replica keys, and whether this node awaits its
    /// metadata directory's record (`strand_raft::replica_keys`); None once stopped.
    pub async fn replica_keys(&self) -> Option<(u64, bool)> {
        let quorum = self.quorum.lock().await;
        quorum
            .as_ref()
            .map(|q| (q.keys.refusals(), q.awaiting_directory_record()))
    }

    /// The active controller's id, as far as this node knows.
    pub async fn controller_id(&self) -> Option<i32> {
        let quorum = self.quorum.lock().await;
        quorum
            .as_ref()
            .and_then(|q| q.raft.metrics().borrow().current_leader)
            .map(|id| id as i32)
    }

    async fn register(&self) -> anyhow::Result<()> {
        let broker = self
            .broker
            .upgrade()
            .ok_or_else(|| anyhow::anyhow!("broker gone"))?;
        let command = ControllerCommand::RegisterBroker {
            id: self.node_id,
            host: broker.advertised_host.clone(),
            port: broker.advertised_port,
            rack: self.config.rack.clone(),
            incarnation: self.incarnation,
            unclean_shutdown: !broker.previous_shutdown_clean(),
            listeners: broker
                .config
                .listeners()
                .map_err(anyhow::Error::msg)?
                .into_iter()
                .map(|spec| strand_metadata::BrokerEndpoint {
                    name: spec.name,
                    host: spec.advertised_host,
                    port: spec.advertised_port,
                })
                .collect(),
        };
        let response = self
            .client
            .request(
                ControllerRequest::Register {
                    command,
                    raft_address: self.config.quorum_listen.to_string(),
                    directory_id: self.directory_id,
                },
                CONTROLLER_REQUEST_TIMEOUT,
            )
            .await?;
        match response {
            ControllerResponse::Reply(reply) => {
                single_result(reply).map_err(|e| anyhow::anyhow!("{e:?}"))
            }
            other => anyhow::bail!("registration answered {other:?}"),
        }
    }

    /// Sends a command to the active controller and returns its reply.
    pub async fn write(&self, command: ControllerCommand) -> Result<ControllerReply, ApiError> {
        match self.ask(ControllerRequest::Write(command)).await? {
            ControllerResponse::Reply(reply) => Ok(reply),
            other => Err(unexpected_answer(other)),
        }
    }

    /// The metadata quorum as its leader sees it (DescribeQuorum).
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ApiError> {
        match self.ask(ControllerRequest::DescribeQuorum).await? {
            ControllerResponse::Quorum(description) => Ok(description),
            other => Err(unexpected_answer(other)),
        }
    }

    /// Adds, removes or forgets a voter (AddRaftVoter, RemoveRaftVoter,
    /// UnregisterController), with Kafka's error for a refusal.
    pub async fn change_voters(&self, request: ControllerRequest) -> Result<(), ApiError> {
        match self.ask(request).await? {
            ControllerResponse::VoterChange(Ok(())) => Ok(()),
            ControllerResponse::VoterChange(Err(error)) => {
                let (code, message) = error.into_kafka_error();
                Err(ApiError::new(code, message))
            }
            other => Err(unexpected_answer(other)),
        }
    }

    /// Asks the active controller, wherever it is, within the controller deadline.
    async fn ask(&self, request: ControllerRequest) -> Result<ControllerResponse, ApiError> {
        self.client
            .request(request, CONTROLLER_REQUEST_TIMEOUT)
            .await
            .map_err(|error| ApiError::new(error_code::REQUEST_TIMED_OUT, error.to_string()))
    }

    /// Writes a one-item command and waits until this broker's image shows its effect.
    pub async fn write_and_wait(
        &self,
        command: ControllerCommand,
        applied: impl Fn(&MetadataImage) -> bool,
    ) -> Result<(), ApiError> {
        single_result(self.write(command).await?)?;
        if self.wait_for_image(applied).await {
            Ok(())
        } else {
            Err(ApiError::new(
                error_code::REQUEST_TIMED_OUT,
                "the change is committed but not yet visible on this broker",
            ))
        }
    }

    fn caught_up(&self) -> bool {
        let image = self.reconciled.borrow().clone();
        image
            .brokers
            .get(&self.node_id)
            .is_some_and(|b| b.incarnation == self.incarnation)
    }

    async fn heartbeat_loop(self: Arc<Self>) {
        let mut registered = false;
        loop {
            if !registered {
                match self.register().await {
                    Ok(()) => {
                        tracing::info!(node = self.node_id, "registered with the controller");
                        registered = true;
                    }
                    Err(error) => {
                        tracing::warn!(node = self.node_id, %error, "registration with the controller failed; retrying");
                        tokio::time::sleep(self.config.broker_heartbeat_interval).await;
                        continue;
                    }
                }
            }
            let request = ControllerRequest::Heartbeat {
                id: self.node_id,
                incarnation: self.incarnation,
                caught_up: self.caught_up(),
                shutting_down: self.shutting_down.load(Ordering::Relaxed),
            };
            let timeout = self.config.broker_session_timeout;
            let sent = std::time::Instant::now();
            match self.client.request(request, timeout).await {
                Ok(ControllerResponse::Heartbeat {
                    registered: false, ..
                }) => registered = false,
                Ok(ControllerResponse::Heartbeat {
                    fenced: false,
                    metadata_index,
                    ..
                }) => self.renew_lease(sent, metadata_index),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(node = self.node_id, %error, "heartbeat to the controller failed")
                }
            }
            tokio::time::sleep(self.config.broker_heartbeat_interval).await;
        }
    }

    /// Applies every new image to the broker: topics, partitions, roles, fetchers.
    async fn follow_metadata(self: Arc<Self>) {
        let mut metadata = self.metadata.clone();
        let mut was_unfenced = false;
        let mut caught_up = false;
        loop {
            let (image, index) = {
                let published = metadata.borrow_and_update();
                (published.image.clone(), published.applied_index)
            };
            // Kafka's broker publishes no metadata until it has caught up with the log.
            // Before this incarnation's registration is in the image, the images are the
            // quorum replaying history (from a snapshot, or from the start when a power
            // cut took the commit hint): a topic created since is missing from them, and
            // acting on one would delete its logs here as "deleted", or follow a leader of
            // long ago. The registration was written after this process started, so an
            // image holding it holds everything before it.
            caught_up = caught_up
                || image
                    .brokers
                    .get(&self.node_id)
                    .is_some_and(|b| b.incarnation == self.incarnation);
            if !caught_up {
                if metadata.changed().await.is_err() {
                    return;
                }
                continue;
            }
            let Some(broker) = self.broker.upgrade() else {
                return;
            };
            let applied = {
                let image = image.clone();
                let broker = broker.clone();
                tokio::task::spawn_blocking(move || broker.reconcile(&image)).await
            };
            match applied {
                Ok(changes) => {
                    for (tp, partition, change) in changes.roles {
                        match change {
                            RoleChange::BecameFollower {
                                leader,
                                leader_epoch,
                            } => self.fetchers.follow(tp, partition, leader, leader_epoch),
                            RoleChange::BecameLeader => self.fetchers.unfollow(&tp),
                            RoleChange::Unchanged => {}
                        }
                    }
                    for tp in changes.removed {
                        self.fetchers.unfollow(&tp);
                    }
                    broker
                        .groups
                        .leadership_changed(&broker, &changes.offsets_leadership)
                        .await;
                    broker
                        .txns
                        .leadership_changed(&broker, &changes.txn_leadership);
                    // The first image that unfences this incarnation: coordinators start on
                    // the transaction partitions it leads (changes seen before were held).
                    let unfenced = image
                        .brokers
                        .get(&self.node_id)
                        .is_some_and(|b| b.incarnation == self.incarnation && !b.fenced);
                    if unfenced && !was_unfenced {
                        broker.txns.start_led(&broker);
                    }
                    was_unfenced = unfenced;
                }
                Err(error) => tracing::error!(%error, "applying metadata failed"),
            }
            self.reconciled.send_replace(image);
            self.reconciled_index.send_replace(index);
            drop(broker);
            if metadata.changed().await.is_err() {
                return;
            }
        }
    }

    /// Leaders drop followers that stopped keeping up (replica.lag.time.max.ms); replicas
    /// whose log failed are reported to the controller.
    async fn isr_shrink_loop(self: Arc<Self>) {
        let lag_max = self.config.replica_lag_time_max;
        let mut ticker = tokio::time::interval((lag_max / 2).max(Duration::from_millis(100)));
        loop {
            ticker.tick().await;
            let Some(broker) = self.broker.upgrade() else {
                return;
            };
            let hosted = broker.hosted_partitions();
            let proposals: Vec<(TopicPartition, IsrProposal)> = hosted
                .iter()
                .filter_map(|p| {
                    p.propose_isr_shrink(lag_max)
                        .map(|proposal| (p.tp.clone(), proposal))
                })
                .collect();
            if !proposals.is_empty() {
                self.clone().send_isr_proposals(proposals);
            }
            let failed: Vec<(TopicPartition, String)> = hosted
                .iter()
                .filter_map(|p| p.failure_to_report().map(|reason| (p.tp.clone(), reason)))
                .collect();
            if !failed.is_empty() {
                self.clone().report_failed_replicas(failed);
            }
        }
    }

    /// Tells the controller which of this broker's replicas failed, so leadership moves
    /// to a healthy in-sync replica (as Kafka's controller moves leaders off a failed log
    /// directory) and clients read from it.
    fn report_failed_replicas(self: Arc<Self>, failed: Vec<(TopicPartition, String)>) {
        tokio::spawn(async move {
            for (tp, reason) in failed {
                tracing::warn!(partition = %tp, %reason, "replica failed: asking the controller to move it out of the ISR");
                let command = ControllerCommand::ReplicaFailed {
                    id: self.node_id,
                    incarnation: self.incarnation,
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                };
                if let Err(error) = self.write(command).await {
                    tracing::warn!(partition = %tp, ?error, "reporting a failed replica failed");
                    if let Some(partition) = self.broker.upgrade().and_then(|b| b.partition(&tp)) {
                        partition.forget_failure_report();
                    }
                }
            }
        });
    }

    /// Sends ISR changes to the controller; the image brings the outcome.
    pub fn send_isr_proposals(self: Arc<Self>, proposals: Vec<(TopicPartition, IsrProposal)>) {
        tokio::spawn(async move {
            for (tp, proposal) in proposals {
                tracing::info!(partition = %tp, isr = ?proposal.isr, "proposing ISR change");
                let command = ControllerCommand::AlterPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    leader: self.node_id,
                    leader_epoch: proposal.leader_epoch,
                    partition_epoch: proposal.partition_epoch,
                    isr: proposal.isr.clone(),
                };
                let accepted = matches!(
                    self.write(command).await,
                    Ok(ControllerReply::Partition(Ok(_)))
                );
                if !accepted {
                    if let Some(partition) = self.broker.upgrade().and_then(|b| b.partition(&tp)) {
                        partition.abandon_isr_proposal();
                    }
                }
            }
        });
    }

    /// Controlled shutdown: asks the controller to move this broker's leaderships away
    /// and waits (bounded) until it leads nothing, then leaves the quorum.
    pub async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + CONTROLLED_SHUTDOWN_MAX;
        while tokio::time::Instant::now() < deadline {
            let request = ControllerRequest::Heartbeat {
                id: self.node_id,
                incarnation: self.incarnation,
                caught_up: true,
                shutting_down: true,
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.client.request(request, left).await {
                Ok(ControllerResponse::Heartbeat {
                    shutdown_complete: true,
                    ..
                }) => {
                    tracing::info!("controlled shutdown complete");
                    break;
                }
                Ok(ControllerResponse::Heartbeat {
                    registered: false, ..
                }) => break,
                Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(error) => {
                    tracing::warn!(%error, "controlled shutdown: no controller; stopping anyway");
                    break;
                }
            }
        }
        self.fetchers.stop();
        if let Some(quorum) = self.quorum.lock().await.take() {
            quorum.shutdown().await;
        }
    }
}
