//! The active controller's work besides Raft itself. Any quorum node answers broker
//! requests, but only the Raft leader acts; others say who leads (`NotController`).
//!
//! - Writes: proposed to Raft; the reply is what `strand_metadata::apply` answered.
//! - Heartbeats: kept in memory (as Kafka's controller does), never in the log. A broker
//!   whose session expires is fenced (`FenceBroker`: its leaderships move, it leaves
//!   ISRs); a fenced broker heartbeating with its current incarnation and caught up is
//!   unfenced; one asking to shut down gets `ControlledShutdown` and hears when it leads
//!   nothing.
//! - Preferred leaders: periodically moves leadership back to first replicas
//!   (auto.leader.rebalance.enable).
//!
//! Thread-safe: sessions behind a mutex; Raft is internally synchronised.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::BasicNode;
use strand_metadata::{BrokerId, ControllerCommand, MetadataImage};
use tokio::sync::watch;
use uuid::Uuid;

use crate::rpc::{ControllerRequest, ControllerResponse};
use crate::state_machine::Published;
use crate::{NodeId, Raft};

/// How often the active controller checks sessions.
const SESSION_CHECK_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// broker.session.timeout.ms
    pub session_timeout: Duration,
    /// leader.imbalance.check.interval.seconds; None: auto.leader.rebalance.enable=false
    pub preferred_leader_check: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Session {
    incarnation: Uuid,
    last_seen: Instant,
}

pub struct ControllerService {
    node_id: NodeId,
    voters: BTreeSet<NodeId>,
    raft: Raft,
    published: watch::Receiver<Published>,
    sessions: Mutex<HashMap<BrokerId, Session>>,
    config: ServiceConfig,
    /// Proposed as the cluster's id if this node is the first active controller.
    new_cluster_id: String,
}

impl ControllerService {
    pub fn new(
        node_id: NodeId,
        voters: BTreeSet<NodeId>,
        raft: Raft,
        published: watch::Receiver<Published>,
        config: ServiceConfig,
    ) -> ControllerService {
        ControllerService {
            node_id,
            voters,
            raft,
            published,
            sessions: Mutex::new(HashMap::new()),
            config,
            new_cluster_id: config_cluster_id(),
        }
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.published.borrow().image.clone()
    }

    fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    fn is_leader(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics.current_leader == Some(self.node_id) && metrics.state.is_leader()
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<BrokerId, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn saw(&self, id: BrokerId, incarnation: Uuid) {
        self.sessions().insert(
            id,
            Session {
                incarnation,
                last_seen: Instant::now(),
            },
        );
    }

    pub async fn handle(&self, request: ControllerRequest) -> ControllerResponse {
        if !self.is_leader() {
            return ControllerResponse::NotController {
                leader: self.leader().filter(|&l| l != self.node_id),
            };
        }
        match request {
            ControllerRequest::Write(command) => self.write(command).await,
            ControllerRequest::Register {
                command,
                raft_address,
            } => {
                if let ControllerCommand::RegisterBroker {
                    id, incarnation, ..
                } = &command
                {
                    self.saw(*id, *incarnation);
                    let node = *id as NodeId;
                    if !self.voters.contains(&node) {
                        let known = self
                            .raft
                            .metrics()
                            .borrow()
                            .membership_config
                            .nodes()
                            .any(|(n, b)| *n == node && b.addr == raft_address);
                        if !known {
                            if let Err(error) = self
                                .raft
                                .add_learner(node, BasicNode::new(raft_address), false)
                                .await
                            {
                                return ControllerResponse::Unavailable(format!(
                                    "adding broker {id} as a metadata learner: {error}"
                                ));
                            }
                        }
                    }
                }
                self.write(command).await
            }
            ControllerRequest::Heartbeat {
                id,
                incarnation,
                caught_up,
                shutting_down,
            } => {
                self.heartbeat(id, incarnation, caught_up, shutting_down)
                    .await
            }
        }
    }

    async fn write(&self, command: ControllerCommand) -> ControllerResponse {
        // Every entry must fit an AppendEntries frame with its neighbours.
        let encoded_bytes = serde_json::to_vec(&command).map_or(usize::MAX, |json| json.len());
        if encoded_bytes > crate::rpc::ENTRY_MAX_BYTES {
            return ControllerResponse::Refused(format!(
                "a metadata command of {encoded_bytes} bytes exceeds {} bytes",
                crate::rpc::ENTRY_MAX_BYTES
            ));
        }
        match self.raft.client_write(command).await {
            Ok(response) => ControllerResponse::Reply(response.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                ControllerResponse::NotController {
                    leader: forward.leader_id,
                }
            }
            Err(error) => ControllerResponse::Unavailable(error.to_string()),
        }
    }

    async fn heartbeat(
        &self,
        id: BrokerId,
        incarnation: Uuid,
        caught_up: bool,
        shutting_down: bool,
    ) -> ControllerResponse {
        let image = self.image();
        let Some(broker) = image
            .brokers
            .get(&id)
            .filter(|b| b.incarnation == incarnation)
        else {
            return ControllerResponse::Heartbeat {
                registered: false,
                fenced: true,
                shutdown_complete: false,
            };
        };
        self.saw(id, incarnation);
        let command = if shutting_down && !broker.in_controlled_shutdown {
            Some(ControllerCommand::ControlledShutdown { id, incarnation })
        } else if !shutting_down && caught_up && (broker.fenced || broker.in_controlled_shutdown) {
            Some(ControllerCommand::UnfenceBroker { id, incarnation })
        } else {
            None
        };
        if let Some(command) = command {
            if let response @ (ControllerResponse::NotController { .. }
            | ControllerResponse::Unavailable(_)
            | ControllerResponse::Refused(_)) = self.write(command).await
            {
                return response;
            }
        }
        let image = self.image();
        let broker = image.brokers.get(&id);
        let leads_something = image
            .topics
            .values()
            .any(|t| t.partitions.iter().any(|p| p.leader == id));
        ControllerResponse::Heartbeat {
            registered: true,
            fenced: broker.is_none_or(|b| b.fenced),
            shutdown_complete: broker.is_some_and(|b| b.in_controlled_shutdown) && !leads_something,
        }
    }

    /// Session expiry and preferred-leader elections, while this node leads. Runs until
    /// the process ends.
    pub async fn run_duties(self: Arc<Self>) {
        let mut was_leader = false;
        let mut last_preferred_check = Instant::now();
        let mut ticker = tokio::time::interval(SESSION_CHECK_INTERVAL);
        loop {
            ticker.tick().await;
            let leader = self.is_leader();
            if leader && !was_leader {
                // A new active controller has seen no heartbeat yet: every broker gets a
                // full session from now before it can be fenced.
                let now = Instant::now();
                for session in self.sessions().values_mut() {
                    session.last_seen = now;
                }
                for broker in self.image().brokers.values() {
                    self.sessions().entry(broker.id).or_insert(Session {
                        incarnation: broker.incarnation,
                        last_seen: now,
                    });
                }
            }
            was_leader = leader;
            if !leader {
                continue;
            }
            if self.image().cluster_id.is_none() {
                let cluster_id = self.new_cluster_id.clone();
                let _ = self
                    .write(ControllerCommand::InitCluster { cluster_id })
                    .await;
            }
            self.fence_expired().await;
            if let Some(interval) = self.config.preferred_leader_check {
                if last_preferred_check.elapsed() >= interval {
                    last_preferred_check = Instant::now();
                    if preferred_leaders_movable(&self.image()) {
                        let _ = self.write(ControllerCommand::ElectPreferredLeaders).await;
                    }
                }
            }
        }
    }

    async fn fence_expired(&self) {
        let image = self.image();
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut sessions = self.sessions();
            for broker in image.brokers.values().filter(|b| !b.fenced) {
                let session = sessions.entry(broker.id).or_insert(Session {
                    incarnation: broker.incarnation,
                    last_seen: now,
                });
                let stale = session.incarnation != broker.incarnation
                    || now.duration_since(session.last_seen) > self.config.session_timeout;
                if stale {
                    expired.push((broker.id, broker.incarnation));
                }
            }
        }
        for (id, incarnation) in expired {
            tracing::warn!(broker = id, "broker session expired: fencing");
            let _ = self
                .write(ControllerCommand::FenceBroker { id, incarnation })
                .await;
        }
    }
}

fn preferred_leaders_movable(image: &MetadataImage) -> bool {
    image.topics.values().flat_map(|t| &t.partitions).any(|p| {
        p.replicas.first().is_some_and(|&preferred| {
            p.leader != preferred && p.isr.contains(&preferred) && image.is_eligible(preferred)
        })
    })
}

/// A fresh cluster id, printed as Kafka prints them (22 characters of URL-safe base64).
fn config_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let value = Uuid::new_v4().as_u128();
    (0..22)
        .map(|i| ALPHABET[((value >> (6 * i)) & 63) as usize] as char)
        .collect()
}
