//! The metadata quorum's network under the simulator: openraft's RPCs between nodes as
//! messages on a simulated wire (`Wire`), delayed, lost, duplicated and reordered by the
//! seed, and cut one way or both. A request is handled on the receiving node as a task
//! of that node (so its crash drops it unanswered); its answer crosses the wire back.
//!
//! A request lost, or its answer lost, is silence: the caller hears nothing until its
//! deadline (openraft's own timeout on every RPC). Failures are `NetworkError`s, not
//! `Unreachable`: openraft backs off from an unreachable peer in a `select!` that draws
//! from tokio's unseeded RNG, which a replay could not follow.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{RaftNetwork, RaftNetworkFactory};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strand_raft::quorum_state::FollowerContacts;
use strand_raft::replica_keys::{Addressed, AddressedVote, Refusal, ReplicaKeyGuard};
use strand_raft::{NodeId, QuorumPeer};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::runtime::SimInstant;
use super::SimTypes;

pub enum Rpc {
    Append(Addressed<AppendEntriesRequest<SimTypes>>),
    Vote(AddressedVote),
    Snapshot(Addressed<InstallSnapshotRequest<SimTypes>>),
}

pub enum Answer {
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// The message was not considered: the replica keys do not match.
    Refused(Refusal),
}

impl Rpc {
    fn kind(&self) -> &'static str {
        match self {
            Rpc::Append(_) => "append",
            Rpc::Vote(_) => "vote",
            Rpc::Snapshot(_) => "snapshot",
        }
    }

    /// A copy of the request (the wire duplicating it).
    fn duplicate(&self) -> Rpc {
        match self {
            Rpc::Append(r) => Rpc::Append(r.clone()),
            Rpc::Vote(r) => Rpc::Vote(r.clone()),
            Rpc::Snapshot(r) => Rpc::Snapshot(r.clone()),
        }
    }
}

pub enum Message {
    Request {
        rpc: Rpc,
        reply: oneshot::Sender<Answer>,
    },
    Answer {
        answer: Answer,
        reply: oneshot::Sender<Answer>,
    },
}

pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub message: Message,
}

/// Messages in flight, by delivery time.
pub struct Wire {
    rng: ChaCha8Rng,
    in_flight: BTreeMap<(Duration, u64), Envelope>,
    sent: u64,
    /// One-way links that lose everything sent over them: (from, to).
    pub cut: BTreeSet<(NodeId, NodeId)>,
    pub lost: u64,
    pub duplicated: u64,
}

/// Milliseconds a message may take.
const DELAY_MS: u64 = 20;
/// Per mille of messages lost, and of requests delivered twice.
const LOSS: u32 = 20;
const DUPLICATION: u32 = 10;

impl Wire {
    pub fn new(seed: u64) -> Arc<Mutex<Wire>> {
        Arc::new(Mutex::new(Wire {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5749_5245),
            in_flight: BTreeMap::new(),
            sent: 0,
            cut: BTreeSet::new(),
            lost: 0,
            duplicated: 0,
        }))
    }

    fn send(&mut self, envelope: Envelope) {
        if self.cut.contains(&(envelope.from, envelope.to)) || self.rng.gen_ratio(LOSS, 1000) {
            self.lost += 1;
            return; // dropped, and with it the reply channel: the caller waits it out
        }
        let now = <SimInstant as openraft::Instant>::now().0;
        if let Message::Request { rpc, .. } = &envelope.message {
            if self.rng.gen_ratio(DUPLICATION, 1000) {
                self.duplicated += 1;
                let (reply, _unheard) = oneshot::channel();
                let copy = Envelope {
                    from: envelope.from,
                    to: envelope.to,
                    message: Message::Request {
                        rpc: rpc.duplicate(),
                        reply,
                    },
                };
                self.queue(now, copy);
            }
        }
        self.queue(now, envelope);
    }

    fn queue(&mut self, now: Duration, envelope: Envelope) {
        let delay = Duration::from_millis(self.rng.gen_range(0..=DELAY_MS));
        self.sent += 1;
        self.in_flight.insert((now + delay, self.sent), envelope);
    }

    /// Answers `reply` from `from` to `to` over the wire.
    pub fn answer(
        &mut self,
        from: NodeId,
        to: NodeId,
        answer: Answer,
        reply: oneshot::Sender<Answer>,
    ) {
        self.send(Envelope {
            from,
            to,
            message: Message::Answer { answer, reply },
        });
    }

    /// When the next message arrives.
    pub fn next_delivery(&self) -> Option<Duration> {
        self.in_flight.keys().next().map(|(at, _)| *at)
    }

    /// The next message due by `now`, if any.
    pub fn deliver(&mut self, now: Duration) -> Option<Envelope> {
        let (&key, _) = self.in_flight.iter().next()?;
        (key.0 <= now).then(|| self.in_flight.remove(&key).expect("just seen"))
    }

    /// Everything in flight to or from `node` is gone (its connections reset by a
    /// crash).
    pub fn reset(&mut self, node: NodeId) {
        self.in_flight.retain(|_, e| e.from != node && e.to != node);
    }
}

/// Describes a request for the trace.
pub fn describe(envelope: &Envelope) -> (NodeId, NodeId, &'static str) {
    let kind = match &envelope.message {
        Message::Request { rpc, .. } => rpc.kind(),
        Message::Answer { answer, .. } => match answer {
            Answer::Append(_) => "append answer",
            Answer::Vote(_) => "vote answer",
            Answer::Snapshot(_) => "snapshot answer",
            Answer::Refused(_) => "refused",
        },
    };
    (envelope.from, envelope.to, kind)
}

/// A node's way onto the wire (openraft's network factory).
pub struct Network {
    pub from: NodeId,
    pub wire: Arc<Mutex<Wire>>,
    /// The leader's record of acknowledgements (AddRaftVoter's caught-up check), kept as
    /// production's network keeps it.
    pub contacts: Arc<FollowerContacts>,
    /// The node's replica key: its directory id is sent with every message.
    pub keys: ReplicaKeyGuard,
}

pub struct Connection {
    from: NodeId,
    target: NodeId,
    target_directory: Uuid,
    keys: ReplicaKeyGuard,
    wire: Arc<Mutex<Wire>>,
    contacts: Arc<FollowerContacts>,
}

impl RaftNetworkFactory<SimTypes> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &QuorumPeer) -> Connection {
        Connection {
            from: self.from,
            target,
            target_directory: node.directory_id,
            keys: self.keys.clone(),
            wire: self.wire.clone(),
            contacts: self.contacts.clone(),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, QuorumPeer, RaftError<NodeId, E>>>;

fn unanswered<E: std::error::Error>() -> RPCError<NodeId, QuorumPeer, RaftError<NodeId, E>> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(
        "no answer (simulated)",
    )))
}

impl Connection {
    fn addressed<T>(&self, rpc: T) -> Addressed<T> {
        self.keys.address(rpc, self.target, self.target_directory)
    }

    /// Sends `rpc` and waits for its answer; silence until the RPC's deadline if either
    /// is lost (openraft times the call out first).
    async fn call(&mut self, rpc: Rpc, option: &RPCOption) -> Option<Answer> {
        let (reply, answer) = oneshot::channel();
        self.wire
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Envelope {
                from: self.from,
                to: self.target,
                message: Message::Request { rpc, reply },
            });
        match answer.await {
            Ok(answer) => Some(answer),
            Err(_) => {
                <super::runtime::SimRuntime as openraft::AsyncRuntime>::sleep(option.hard_ttl())
                    .await;
                None
            }
        }
    }
}

impl RaftNetwork<SimTypes> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<SimTypes>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        let sent_end = FollowerContacts::sent_end(&rpc);
        match self.call(Rpc::Append(self.addressed(rpc)), &option).await {
            Some(Answer::Append(result)) => {
                if let Ok(response) = &result {
                    self.contacts
                        .append_answered(self.target, sent_end, response);
                }
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Some(Answer::Refused(refusal)) => Err(self.keys.refused(refusal)),
            _ => Err(unanswered()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<SimTypes>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.call(Rpc::Snapshot(self.addressed(rpc)), &option).await {
            Some(Answer::Snapshot(result)) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Some(Answer::Refused(refusal)) => Err(self.keys.refused(refusal)),
            _ => Err(unanswered()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        match self.call(Rpc::Vote(self.addressed(rpc)), &option).await {
            Some(Answer::Vote(result)) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Some(Answer::Refused(refusal)) => Err(self.keys.refused(refusal)),
            _ => Err(unanswered()),
        }
    }
}
