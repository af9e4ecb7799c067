//! A broker's way to the active controller: tries the last known leader, follows
//! `NotController` hints, retries other controllers until a deadline. The controllers are
//! those named at start and, once this node follows the metadata log, the voters its
//! membership names (voters come and go: AddRaftVoter, RemoveRaftVoter).
//!
//! Thread-safe: connections are pooled per controller, one request per connection.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use openraft::RaftMetrics;
use tokio::sync::watch;

use crate::network::{Peer, QuorumTls};
use crate::rpc::{ControllerRequest, ControllerResponse, Request, Response};
use crate::{NodeId, QuorumPeer};

/// One attempt at one controller.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before trying again when no controller knows a leader.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Idle connections kept per controller.
const POOLED_PER_CONTROLLER_MAX: usize = 4;

#[derive(Debug)]
pub struct QuorumClient {
    controllers: BTreeMap<NodeId, String>,
    leader_hint: Mutex<Option<NodeId>>,
    /// Where the search for a leader goes next without a hint. Kept across requests: a
    /// search that started at the same controller every time would spend every
    /// heartbeat's deadline on one that is cut off.
    next: AtomicUsize,
    pool: Mutex<HashMap<NodeId, Vec<Peer>>>,
    tls: Option<QuorumTls>,
    /// This node's view of the quorum, once it has one.
    membership: Option<watch::Receiver<RaftMetrics<NodeId, QuorumPeer>>>,
}

impl QuorumClient {
    pub fn new(controllers: BTreeMap<NodeId, String>, tls: Option<QuorumTls>) -> QuorumClient {
        assert!(
            !controllers.is_empty(),
            "a cluster has at least one controller"
        );
        QuorumClient {
            controllers,
            leader_hint: Mutex::new(None),
            next: AtomicUsize::new(0),
            pool: Mutex::new(HashMap::new()),
            tls,
            membership: None,
        }
    }

    /// Also asks the voters `metrics` (this node's Raft) names.
    pub fn following(mut self, metrics: watch::Receiver<RaftMetrics<NodeId, QuorumPeer>>) -> Self {
        self.membership = Some(metrics);
        self
    }

    /// The controllers to ask with their quorum addresses: the current voters, and those
    /// named at start (a voter removed since answers with a hint).
    fn controllers(&self) -> BTreeMap<NodeId, String> {
        let mut controllers = self.controllers.clone();
        if let Some(metrics) = &self.membership {
            let metrics = metrics.borrow();
            let membership = metrics.membership_config.membership();
            for id in membership.voter_ids() {
                if let Some(peer) = membership.get_node(&id) {
                    controllers.insert(id, peer.addr.clone());
                }
            }
        }
        controllers
    }

    fn take_peer(&self, node: NodeId, address: &str) -> Peer {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&node)
            .and_then(Vec::pop)
            .filter(|peer| peer.address() == address)
            .unwrap_or_else(|| Peer::new(address.to_string(), self.tls.clone()))
    }

    fn return_peer(&self, node: NodeId, peer: Peer) {
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let idle = pool.entry(node).or_default();
        if idle.len() < POOLED_PER_CONTROLLER_MAX {
            idle.push(peer);
        }
    }

    /// Sends `request` to the active controller, retrying until `timeout` has passed.
    pub async fn request(
        &self,
        request: ControllerRequest,
        timeout: Duration,
    ) -> anyhow::Result<ControllerResponse> {
        let deadline = tokio::time::Instant::now() + timeout;
        let controllers = self.controllers();
        let ids: Vec<NodeId> = controllers.keys().copied().collect();
        // With several controllers no single attempt takes the whole deadline: a leader
        // cut off (or frozen) holds its attempt until it times out, and a short request
        // (a heartbeat, within a session timeout) must still reach the one that took over.
        let attempt_max = if ids.len() > 1 {
            ATTEMPT_TIMEOUT.min(timeout / 2)
        } else {
            ATTEMPT_TIMEOUT
        };
        let message = Request::Controller(request);
        let mut last_error = String::from("no controller answered");
        while tokio::time::Instant::now() < deadline {
            let hint = *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner());
            let target =
                hint.unwrap_or_else(|| ids[self.next.fetch_add(1, Ordering::Relaxed) % ids.len()]);
            let Some(address) = controllers.get(&target) else {
                *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner()) = None;
                continue;
            };
            let mut peer = self.take_peer(target, address);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let answer = peer.call(&message, attempt_max.min(left)).await;
            let forget_hint = || *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner()) = None;
            match answer {
                Ok(Response::Controller(ControllerResponse::NotController { leader })) => {
                    self.return_peer(target, peer);
                    match leader.filter(|l| controllers.contains_key(l) && *l != target) {
                        Some(leader) => {
                            *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(leader);
                            continue;
                        }
                        None => {
                            forget_hint();
                            last_error = format!("controller {target} knows no leader");
                        }
                    }
                }
                Ok(Response::Controller(ControllerResponse::Refused(reason))) => {
                    self.return_peer(target, peer);
                    anyhow::bail!("controller {target} refused: {reason}");
                }
                Ok(Response::Controller(ControllerResponse::Unavailable(reason))) => {
                    self.return_peer(target, peer);
                    last_error = format!("controller {target}: {reason}");
                }
                Ok(Response::Controller(response)) => {
                    self.return_peer(target, peer);
                    *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner()) = Some(target);
                    return Ok(response);
                }
                Ok(other) => {
                    forget_hint();
                    last_error = format!("controller {target} answered {other:?}");
                }
                Err(error) => {
                    forget_hint();
                    last_error = format!("controller {target} at {}: {error}", peer.address());
                }
            }
            tokio::time::sleep(
                RETRY_BACKOFF.min(deadline.saturating_duration_since(tokio::time::Instant::now())),
            )
            .await;
        }
        anyhow::bail!("no active controller within {timeout:?}: {last_error}")
    }
}
