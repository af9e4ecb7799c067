//! Starting a node's part of the quorum: the Raft instance over this node's storage, the
//! quorum listener, and the active-controller duties. The voters named at start
//! (controllers) initialise the quorum on first start; other nodes wait to be added as
//! learners when they register, and then receive the metadata log like everyone else
//! (and may be made voters: `voters.rs`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::controller_service::{ControllerService, ServiceConfig};
use crate::log_store::LogStore;
use crate::network::{Network, QuorumTls};
use crate::quorum_state::FollowerContacts;
use crate::replica_keys::{elect_only_as_recorded, ReplicaKeyGuard};
use crate::state_machine::{Published, StateMachine};
use crate::{NodeId, QuorumPeer, Raft};

#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node_id: NodeId,
    /// Controller node ids and their quorum addresses (`--controllers`).
    pub voters: BTreeMap<NodeId, String>,
    /// Where this node's quorum listener binds.
    pub listen: SocketAddr,
    /// Directory of the Raft log and snapshots.
    pub dir: PathBuf,
    /// That directory's id (`directory.id` in its `meta.properties`); nil if unknown,
    /// and then no Raft message is refused for being addressed to another
    /// (`replica_keys.rs`).
    pub directory_id: Uuid,
    pub service: ServiceConfig,
    /// Raft heartbeat interval; elections time out after 5 to 10 of them.
    pub heartbeat_interval: Duration,
    /// Mutual TLS between nodes (None: the quorum talks in the clear).
    pub tls: Option<QuorumTls>,
}

/// openraft's configuration of a quorum node (before `validate`; the simulator runs
/// with it too).
pub fn raft_config(heartbeat_interval: Duration) -> Config {
    let heartbeat_ms = heartbeat_interval.as_millis().max(10) as u64;
    Config {
        cluster_name: "strand-metadata".into(),
        heartbeat_interval: heartbeat_ms,
        election_timeout_min: heartbeat_ms * 5,
        election_timeout_max: heartbeat_ms * 10,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(2_000),
        max_in_snapshot_log_to_keep: 500,
        // Sized so that no frame exceeds the transport's cap (rpc::FRAME_MAX_BYTES).
        snapshot_max_chunk_size: crate::rpc::SNAPSHOT_CHUNK_BYTES,
        max_payload_entries: crate::rpc::APPEND_ENTRIES_MAX,
        ..Config::default()
    }
}

pub struct QuorumNode {
    pub raft: Raft,
    pub service: Arc<ControllerService>,
    pub metadata: watch::Receiver<Published>,
    /// This node's replica keys: what it refused, whether it knows it was replaced.
    pub keys: ReplicaKeyGuard,
    tasks: Vec<JoinHandle<()>>,
}

impl QuorumNode {
    pub async fn start(config: QuorumConfig) -> anyhow::Result<QuorumNode> {
        let log_store = LogStore::open(&config.dir)?;
        let state_machine = StateMachine::open(&config.dir)?;
        let metadata = state_machine.subscribe();
        let raft_config = raft_config(config.heartbeat_interval).validate()?;
        let contacts = Arc::new(FollowerContacts::default());
        let keys = ReplicaKeyGuard::open(config.directory_id, &config.dir);
        let raft = Raft::new(
            config.node_id,
            Arc::new(raft_config),
            Network {
                contacts: contacts.clone(),
                tls: config.tls.clone(),
                keys: keys.clone(),
            },
            log_store,
            state_machine,
        )
        .await?;
        contacts.watch(raft.metrics());
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|error| {
                anyhow::anyhow!("cannot listen on {} (quorum): {error}", config.listen)
            })?;
        let service = Arc::new(ControllerService::new(
            config.node_id,
            raft.clone(),
            metadata.clone(),
            config.service.clone(),
            contacts,
        ));
        let mut tasks = vec![tokio::spawn(crate::network::serve(
            listener,
            raft.clone(),
            service.clone(),
            config.tls.clone(),
            keys.clone(),
        ))];
        tasks.push(tokio::spawn(elect_only_as_recorded(
            raft.clone(),
            keys.clone(),
        )));
        if config.voters.contains_key(&config.node_id) && !raft.is_initialized().await? {
            // Directory ids nil: every voter must propose the very same first entry, and
            // none knows the others' (each records its own when it registers).
            let members: BTreeMap<NodeId, QuorumPeer> = config
                .voters
                .iter()
                .map(|(id, address)| (*id, QuorumPeer::new(address.clone(), Uuid::nil())))
                .collect();
            // Every voter may propose the same initial membership; all but the first
            // to win are told it is already initialised, which is fine.
            if let Err(error) = raft.initialize(members).await {
                tracing::debug!(%error, "quorum already initialised");
            }
        }
        // On every node: a learner may be made a voter (AddRaftVoter) and then lead.
        tasks.push(tokio::spawn(service.clone().run_duties()));
        Ok(QuorumNode {
            raft,
            service,
            metadata,
            keys,
            tasks,
        })
    }

    /// Whether this node takes no part in the quorum for now: it runs on a metadata
    /// directory that replaced a lost one, and its membership does not record it yet
    /// (`strand_raft_awaiting_directory_record`).
    pub fn awaiting_directory_record(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        self.keys.takes_no_part(
            metrics.membership_config.membership(),
            metrics.id,
            self.keys.replaced.is_raised(),
        )
    }

    /// Stops Raft and the listener.
    pub async fn shutdown(self) {
        for task in &self.tasks {
            task.abort();
        }
        let _ = self.raft.shutdown().await;
    }
}
