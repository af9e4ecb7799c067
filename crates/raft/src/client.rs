//! A broker's way to the active controller: tries the last known leader, follows
//! `NotController` hints, retries other controllers until a deadline.
//!
//! Thread-safe: connections are pooled per controller, one request per connection.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use crate::network::Peer;
use crate::rpc::{ControllerRequest, ControllerResponse, Request, Response};
use crate::NodeId;

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
    pool: Mutex<HashMap<NodeId, Vec<Peer>>>,
}

impl QuorumClient {
    pub fn new(controllers: BTreeMap<NodeId, String>) -> QuorumClient {
        assert!(
            !controllers.is_empty(),
            "a cluster has at least one controller"
        );
        QuorumClient {
            controllers,
            leader_hint: Mutex::new(None),
            pool: Mutex::new(HashMap::new()),
        }
    }

    fn take_peer(&self, node: NodeId) -> Peer {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&node)
            .and_then(Vec::pop)
            .unwrap_or_else(|| Peer::new(self.controllers[&node].clone()))
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
        let ids: Vec<NodeId> = self.controllers.keys().copied().collect();
        let mut next = 0usize;
        let message = Request::Controller(request);
        let mut last_error = String::from("no controller answered");
        while tokio::time::Instant::now() < deadline {
            let hint = *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner());
            let target = hint.unwrap_or_else(|| {
                next += 1;
                ids[next % ids.len()]
            });
            let mut peer = self.take_peer(target);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let answer = peer.call(&message, ATTEMPT_TIMEOUT.min(left)).await;
            let forget_hint = || *self.leader_hint.lock().unwrap_or_else(|p| p.into_inner()) = None;
            match answer {
                Ok(Response::Controller(ControllerResponse::NotController { leader })) => {
                    self.return_peer(target, peer);
                    match leader.filter(|l| self.controllers.contains_key(l) && *l != target) {
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
