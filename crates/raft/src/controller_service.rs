//! The active controller's work besides Raft itself. Any quorum node answers broker
//! requests, but only the Raft leader acts; others say who leads (`NotController`).
//!
//! - Writes: decided here, one at a time, by a `Proposer` holding the image as it will be
//!   once every entry proposed so far applies, so a decision need not wait for the one
//!   before it to commit (Raft still batches them). The records go to the log as chained
//!   entries; the reply is returned once they apply. A proposer serves one term; after a
//!   write whose outcome is unknown, the next write waits until the image holds every
//!   entry in the log and starts a new proposer from it (an entry of the old one that
//!   lands later is stale and applies nowhere).
//! - Heartbeats: kept in memory (as Kafka's controller does), never in the log. A broker
//!   whose session expires is fenced (`FenceBroker`: its leaderships move, it leaves
//!   ISRs); a fenced broker heartbeating with its current incarnation and caught up is
//!   unfenced; one asking to shut down gets `ControlledShutdown` and hears when it leads
//!   nothing.
//! - Preferred leaders: periodically moves leadership back to first replicas
//!   (auto.leader.rebalance.enable).
//! - Voters: promotes learners and demotes voters (`voters.rs` decides, openraft's joint
//!   consensus changes the membership); registration records each node's metadata
//!   directory id, its half of KIP-853's replica key, and records the new one of a node
//!   whose metadata log was lost or replaced (`replica_keys.rs`: until then it takes no
//!   part in the quorum).
//!
//! Thread-safe: sessions behind a mutex; Raft is internally synchronised.
//!
//! Time and timeouts go through openraft's runtime (`C`), so the simulator runs this
//! service as it is, on virtual time (crates/sim); production's is tokio's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::ClientWriteError;
use openraft::type_config::TypeConfigExt;
use openraft::{AsyncRuntime, ChangeMembers, Instant as _, RaftTypeConfig};
use strand_metadata::{BrokerId, ControllerCommand, DecisionId, MetadataImage, Proposer, Replayed};
use tokio::sync::watch;
use uuid::Uuid;

use crate::quorum_state::FollowerContacts;
use crate::rpc::{ControllerRequest, ControllerResponse};
use crate::state_machine::Published;
use crate::voters::{QuorumView, ReplicaKey, VoterChangeError};
use crate::{MetadataRaft, NodeId, QuorumPeer, TypeConfig};

/// Whether the write of a decision heard its entries applied.
type LatestOutcome = watch::Receiver<bool>;

/// A point in time on the runtime of `C`.
type InstantOf<C> = <<C as RaftTypeConfig>::AsyncRuntime as AsyncRuntime>::Instant;

/// Longest a heartbeat's answer or a fencing waits for a quorum to confirm this node
/// still leads.
const LEADERSHIP_CONFIRM_TIMEOUT: Duration = Duration::from_secs(1);
/// How often the active controller checks sessions.
const SESSION_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// A write's deadline from its arrival to its records applied (brokers give each attempt
/// `client::ATTEMPT_TIMEOUT`; past that nobody waits for the answer).
const WRITE_DEADLINE: Duration = Duration::from_secs(5);
/// Bytes of records per log entry: the entry cap less room for the entry's own fields.
const ENTRY_RECORDS_BYTES: usize = crate::rpc::ENTRY_MAX_BYTES - 4096;
/// Longest a voter change (both steps of the joint consensus) may take, within the
/// broker's deadline for a controller request.
const VOTER_CHANGE_TIMEOUT: Duration = Duration::from_secs(15);
/// A learner is caught up for AddRaftVoter if an acknowledgement covered the leader's
/// whole log this recently (Kafka's check: caught up within its fetch timeout).
const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(5);
/// A node that acknowledged this leader within it still runs on its recorded directory: a
/// registration naming another for it is refused meanwhile (a second process with its
/// node id). One that lost its disk acknowledges nothing addressed to the old directory.
const LIVE_ON_RECORDED_DIRECTORY_WITHIN: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// broker.session.timeout.ms
    pub session_timeout: Duration,
    /// leader.imbalance.check.interval.seconds; None: auto.leader.rebalance.enable=false
    pub preferred_leader_check: Option<Duration>,
    /// min.insync.replicas at start, recorded cluster-wide when this node names the
    /// cluster (None: not recorded).
    pub min_insync_replicas: Option<i32>,
}

#[derive(Debug, Clone, Copy)]
struct Session<I> {
    incarnation: Uuid,
    last_seen: I,
    /// The broker itself named this incarnation to this controller in its current term
    /// (a registration or heartbeat); otherwise it was taken from the image.
    heard: bool,
}

/// `C`: the runtime's Raft types (`MetadataRaft`); production's by default.
pub struct ControllerService<C: MetadataRaft = TypeConfig> {
    node_id: NodeId,
    raft: openraft::Raft<C>,
    published: watch::Receiver<Published>,
    sessions: Mutex<HashMap<BrokerId, Session<InstantOf<C>>>>,
    config: ServiceConfig,
    /// Proposed as the cluster's id if this node is the first active controller.
    new_cluster_id: String,
    /// Held while deciding and proposing one command: the proposer and its generation.
    /// None: the next write starts a new proposer from the applied image.
    proposer: tokio::sync::Mutex<Option<(u64, Proposer)>>,
    /// The newest proposer's generation.
    generation: AtomicU64,
    /// Brokers whose expired session is being fenced (`fence_expired`).
    fencing: Mutex<BTreeSet<BrokerId>>,
    /// The last decision written and whether its write heard it applied, for the
    /// decisions that write nothing and rely on it.
    latest_write: Mutex<Option<(DecisionId, LatestOutcome)>>,
    /// Sequence numbers of decisions only grow within a term, across proposers.
    next_seq: AtomicU64,
    /// Followers' acknowledgements, for DescribeQuorum.
    contacts: Arc<FollowerContacts>,
    /// This leader removed itself from the voters and is handing leadership over: it
    /// answers as a follower meanwhile.
    resigning: std::sync::atomic::AtomicBool,
}

impl<C: MetadataRaft> ControllerService<C> {
    pub fn new(
        node_id: NodeId,
        raft: openraft::Raft<C>,
        published: watch::Receiver<Published>,
        config: ServiceConfig,
        contacts: Arc<FollowerContacts>,
    ) -> ControllerService<C> {
        ControllerService {
            node_id,
            raft,
            published,
            sessions: Mutex::new(HashMap::new()),
            config,
            new_cluster_id: config_cluster_id(),
            proposer: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            latest_write: Mutex::new(None),
            fencing: Mutex::new(BTreeSet::new()),
            next_seq: AtomicU64::new(0),
            contacts,
            resigning: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The cluster id proposed if this node is the first active controller (instead of
    /// a random one: the simulator's runs replay).
    pub fn with_new_cluster_id(mut self, cluster_id: String) -> Self {
        self.new_cluster_id = cluster_id;
        self
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
        metrics.current_leader == Some(self.node_id)
            && metrics.state.is_leader()
            && !self.resigning.load(Ordering::Relaxed)
    }

    /// Whether this node is a voter in the membership it holds.
    fn is_voter(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let voter = metrics
            .membership_config
            .membership()
            .voter_ids()
            .any(|id| id == self.node_id);
        voter
    }

    /// Whether a quorum confirms this node still leads, its image holding every entry
    /// committed before (a read index, openraft's `ensure_linearizable`).
    async fn leadership_confirmed(&self) -> bool {
        let confirmed =
            within::<C, _>(LEADERSHIP_CONFIRM_TIMEOUT, self.raft.ensure_linearizable()).await;
        matches!(confirmed, Some(Ok(_)))
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<BrokerId, Session<InstantOf<C>>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn saw(&self, id: BrokerId, incarnation: Uuid) {
        self.sessions().insert(
            id,
            Session {
                incarnation,
                last_seen: C::now(),
                heard: true,
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
            ControllerRequest::DescribeQuorum => {
                let metrics = self.raft.metrics().borrow().clone();
                ControllerResponse::Quorum(self.contacts.describe(&metrics))
            }
            ControllerRequest::Register {
                command,
                raft_address,
                directory_id,
            } => {
                if let ControllerCommand::RegisterBroker {
                    id, incarnation, ..
                } = &command
                {
                    self.saw(*id, *incarnation);
                    if let Err(error) = self
                        .join_quorum(*id as NodeId, raft_address, directory_id)
                        .await
                    {
                        return ControllerResponse::Unavailable(format!(
                            "adding broker {id} as a metadata learner: {error:?}"
                        ));
                    }
                }
                self.write(command).await
            }
            ControllerRequest::AddVoter {
                id,
                directory_id,
                listener_ports,
            } => ControllerResponse::VoterChange(
                self.add_voter(ReplicaKey { id, directory_id }, &listener_ports)
                    .await,
            ),
            ControllerRequest::RemoveVoter { id, directory_id } => ControllerResponse::VoterChange(
                self.remove_voter(ReplicaKey { id, directory_id }).await,
            ),
            ControllerRequest::UnregisterController { id } => {
                ControllerResponse::VoterChange(self.unregister_controller(id).await)
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

    /// A registering node receives the metadata log: a node outside the membership joins
    /// it as a learner; one already in it with the same address gets the directory id it
    /// runs on recorded: a voter named at start has none yet, and a node whose metadata
    /// log was lost or replaced comes back on a new one. Until then the others address
    /// it by the old one and it refuses their messages (`replica_keys.rs`); once recorded,
    /// a leader holding the record was elected after the old log was lost, so it takes
    /// the log from there and votes again. A voter's address is not changed here: one
    /// registering from another address than the membership's (`--controllers` naming a
    /// host name, the listener an address) has its directory recorded under the
    /// membership's. Bounded as every membership change (`change_membership`).
    async fn join_quorum(
        &self,
        node: NodeId,
        raft_address: String,
        directory_id: Uuid,
    ) -> Result<(), VoterChangeError> {
        let (known, is_voter) = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            let membership = metrics.membership_config.membership();
            (
                membership.get_node(&node).cloned(),
                membership.voter_ids().any(|v| v == node),
            )
        };
        match known {
            Some(known) if known.addr == raft_address || is_voter => {
                if known.directory_id != directory_id && !directory_id.is_nil() {
                    if !known.directory_id.is_nil()
                        && self
                            .contacts
                            .acknowledged_within(node, LIVE_ON_RECORDED_DIRECTORY_WITHIN)
                    {
                        return Err(VoterChangeError::TimedOut(format!(
                            "node {node} registers on metadata directory {directory_id}, but it acknowledged this controller on {} within the last {} s: two processes with one node id?",
                            known.directory_id,
                            LIVE_ON_RECORDED_DIRECTORY_WITHIN.as_secs()
                        )));
                    }
                    // A leader deposed without knowing it must not record it: the node
                    // would take its appends (its lost log forgot voting for the new
                    // leader) and help it commit over what the new one committed. A
                    // quorum confirming this leadership now cannot count the node (it
                    // refuses what is addressed to its old directory, and by nil once it
                    // knows it replaced a lost one), so no later term was elected before,
                    // and none can be after without this record in its log. A first
                    // record (nil before) is confirmed too: the old directory may have
                    // been recorded in a term this leader never heard of.
                    if !self.leadership_confirmed().await {
                        return Err(VoterChangeError::TimedOut(format!(
                            "recording node {node}'s metadata directory: no quorum confirmed this controller's leadership"
                        )));
                    }
                    if !known.directory_id.is_nil() {
                        tracing::warn!(
                            node,
                            old = %known.directory_id,
                            new = %directory_id,
                            "a member's metadata log directory was replaced: recording the new one"
                        );
                    }
                    let peer = BTreeMap::from([(node, QuorumPeer::new(known.addr, directory_id))]);
                    self.change_membership(ChangeMembers::SetNodes(peer))
                        .await?;
                }
                Ok(())
            }
            // What openraft's add_learner does, without waiting for it to catch up.
            _ => {
                let peer = BTreeMap::from([(node, QuorumPeer::new(raft_address, directory_id))]);
                self.change_membership(ChangeMembers::AddNodes(peer)).await
            }
        }
    }

    /// The membership as this leader holds it; changing while a joint configuration or
    /// a membership entry not yet applied is in the log.
    fn quorum_view(&self) -> QuorumView {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let stored = &metrics.membership_config;
        let membership = stored.membership();
        let voter_ids: BTreeSet<NodeId> = membership.voter_ids().collect();
        let mut view = QuorumView {
            changing: membership.get_joint_config().len() > 1
                || stored.log_id().as_ref() > metrics.last_applied.as_ref(),
            ..QuorumView::default()
        };
        for (id, peer) in membership.nodes() {
            if voter_ids.contains(id) {
                view.voters.insert(*id, peer.clone());
            } else {
                view.learners.insert(*id, peer.clone());
            }
        }
        view
    }

    async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, QuorumPeer>,
    ) -> Result<(), VoterChangeError> {
        match within::<C, _>(
            VOTER_CHANGE_TIMEOUT,
            self.raft.change_membership(change, true),
        )
        .await
        {
            Some(Ok(_)) => Ok(()),
            Some(Err(error)) => Err(VoterChangeError::TimedOut(format!(
                "the membership change failed: {error}"
            ))),
            None => Err(VoterChangeError::TimedOut(format!(
                "the membership change did not commit within {VOTER_CHANGE_TIMEOUT:?}"
            ))),
        }
    }

    async fn add_voter(
        &self,
        key: ReplicaKey,
        listener_ports: &[u16],
    ) -> Result<(), VoterChangeError> {
        let plan = self.quorum_view().check_add(key, listener_ports, |node| {
            self.contacts.caught_up_within(node, CAUGHT_UP_WITHIN)
        })?;
        if let Some(peer) = plan.set_directory {
            self.change_membership(ChangeMembers::SetNodes(BTreeMap::from([(plan.id, peer)])))
                .await?;
        }
        self.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([plan.id])))
            .await
    }

    async fn remove_voter(&self, key: ReplicaKey) -> Result<(), VoterChangeError> {
        let id = self.quorum_view().check_remove(key)?;
        self.change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])))
            .await?;
        if id == self.node_id {
            self.resign().await;
        }
        Ok(())
    }

    /// Hands leadership to the voters after this leader removed itself, as Kafka's
    /// resigns. openraft lets a leader that is only a learner go on leading; stopping its
    /// heartbeats (and answering as a follower) lets the voters' election timers run out
    /// and elect one of them, whose higher term makes this node follow.
    async fn resign(&self) {
        self.resigning.store(true, Ordering::Relaxed);
        self.raft.runtime_config().heartbeat(false);
        let mut metrics = self.raft.metrics();
        let handed_over = within::<C, _>(
            VOTER_CHANGE_TIMEOUT,
            metrics.wait_for(|m| m.current_leader.is_some_and(|l| l != self.node_id)),
        )
        .await;
        if handed_over.is_none() {
            tracing::warn!(
                "no other voter took the leadership over within {VOTER_CHANGE_TIMEOUT:?}"
            );
        }
        self.raft.runtime_config().heartbeat(true);
        self.resigning.store(false, Ordering::Relaxed);
    }

    async fn unregister_controller(&self, id: NodeId) -> Result<(), VoterChangeError> {
        let is_broker = self.image().brokers.contains_key(&(id as BrokerId));
        let id = self.quorum_view().check_unregister(id, is_broker)?;
        self.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])))
            .await
    }

    async fn write(&self, command: ControllerCommand) -> ControllerResponse {
        let deadline = C::now() + WRITE_DEADLINE;
        self.decide_and_write(&command, deadline).await
    }

    fn timed_out() -> ControllerResponse {
        ControllerResponse::Unavailable(format!(
            "the metadata write was not applied within {WRITE_DEADLINE:?}"
        ))
    }

    async fn decide_and_write(
        &self,
        command: &ControllerCommand,
        deadline: InstantOf<C>,
    ) -> ControllerResponse {
        let (generation, reply, receivers, written, relies_on) = {
            let Some(mut guard) = until::<C, _>(deadline, self.proposer.lock()).await else {
                return Self::timed_out();
            };
            let term = self.raft.metrics().borrow().current_term;
            if guard.as_ref().map(|(_, p)| p.term()) != Some(term) {
                match self.new_proposer(term, deadline).await {
                    Ok(fresh) => {
                        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
                        *guard = Some((generation, fresh));
                        // The new proposer starts from the applied image: nothing it
                        // relies on is still being written.
                        *self.latest_write() = None;
                    }
                    Err(response) => return response,
                }
            }
            let (generation, proposer) = guard.as_mut().expect("set above");
            let generation = *generation;
            let (reply, entries) = match proposer.propose(command) {
                Ok(decided) => decided,
                Err(too_large) => return ControllerResponse::Refused(too_large.to_string()),
            };
            self.next_seq
                .fetch_max(proposer.next_seq(), Ordering::Relaxed);
            // A decision that writes nothing was still decided on what this proposer has
            // proposed: it is answered once that has applied, as the write that proposed
            // it hears. The chain of applied decisions cannot tell: a later controller's
            // decisions follow it whether it applied or was lost (and openraft lets two
            // nodes lead one term in turn, so even an id seen applied may be another's).
            // Nothing registered: it is the proposer's starting point, applied already.
            let (written, relies_on) = if entries.is_empty() {
                let relies_on = proposer.last().and_then(|last| {
                    self.latest_write()
                        .as_ref()
                        .filter(|(id, _)| *id == last)
                        .map(|(_, outcome)| outcome.clone())
                });
                (None, relies_on)
            } else {
                let (written, outcome) = watch::channel(false);
                *self.latest_write() = Some((proposer.last().expect("just proposed"), outcome));
                (Some(written), None)
            };
            let mut receivers = Vec::with_capacity(entries.len());
            for entry in entries {
                match self.raft.client_write_ff(entry).await {
                    Ok(receiver) => receivers.push(receiver),
                    Err(fatal) => {
                        *guard = None;
                        *self.latest_write() = None;
                        return ControllerResponse::Unavailable(fatal.to_string());
                    }
                }
            }
            (generation, reply, receivers, written, relies_on)
        };
        // Entries are in Raft's queue in order; the next command may be decided meanwhile.
        for receiver in receivers {
            let outcome = match until::<C, _>(deadline, receiver).await {
                Some(Ok(Ok(response))) => response.data,
                Some(Ok(Err(ClientWriteError::ForwardToLeader(forward)))) => {
                    self.forget_proposer(generation).await;
                    return ControllerResponse::NotController {
                        leader: forward.leader_id,
                    };
                }
                Some(Ok(Err(error))) => {
                    self.forget_proposer(generation).await;
                    return ControllerResponse::Unavailable(error.to_string());
                }
                Some(Err(dropped)) => {
                    self.forget_proposer(generation).await;
                    return ControllerResponse::Unavailable(dropped.to_string());
                }
                None => {
                    self.forget_proposer(generation).await;
                    return Self::timed_out();
                }
            };
            if outcome == Replayed::Stale {
                // Decided after an entry that did not reach the log: retried, it is
                // decided afresh.
                self.forget_proposer(generation).await;
                return ControllerResponse::Unavailable(
                    "the metadata changed under this write; retry".into(),
                );
            }
        }
        if let Some(written) = written {
            written.send_replace(true);
        }
        if let Some(outcome) = relies_on {
            if let Err(response) = Self::relied_on_applied(outcome, deadline).await {
                // Whether the proposer's last decision applied is unknown (its write may
                // have been cancelled with its request): the next write starts afresh.
                self.forget_proposer(generation).await;
                return response;
            }
        }
        ControllerResponse::Reply(reply)
    }

    /// Waits for the write a decision that writes nothing relied on to hear its entries
    /// applied; a write that ends otherwise (failed, timed out, cancelled) drops its
    /// sender, and whether it applied is unknown.
    async fn relied_on_applied(
        mut outcome: LatestOutcome,
        deadline: InstantOf<C>,
    ) -> Result<(), ControllerResponse> {
        loop {
            if *outcome.borrow_and_update() {
                return Ok(());
            }
            match until::<C, _>(deadline, outcome.changed()).await {
                Some(Ok(())) => {}
                Some(Err(_)) => break,
                None => return Err(Self::timed_out()),
            }
        }
        Err(ControllerResponse::Unavailable(
            "the metadata changed under this write; retry".into(),
        ))
    }

    fn latest_write(&self) -> std::sync::MutexGuard<'_, Option<(DecisionId, LatestOutcome)>> {
        self.latest_write.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A proposer for `term`, once the image holds every entry in this node's log (those
    /// of earlier terms and any this node proposed before with an unknown outcome).
    async fn new_proposer(
        &self,
        term: u64,
        deadline: InstantOf<C>,
    ) -> Result<Proposer, ControllerResponse> {
        // Not openraft's `Raft::wait`: its `select!` is unbiased, drawing from tokio's
        // unseeded RNG, which the simulator could not replay.
        let mut watched = self.raft.metrics();
        let metrics = loop {
            let metrics = watched.borrow_and_update().clone();
            if metrics.current_term != term
                || !metrics.state.is_leader()
                || metrics.last_applied.map_or(0, |id| id.index)
                    >= metrics.last_log_index.unwrap_or(0)
            {
                break metrics;
            }
            match until::<C, _>(deadline, watched.changed()).await {
                Some(Ok(())) => {}
                Some(Err(_)) => {
                    return Err(ControllerResponse::Unavailable("Raft has stopped".into()))
                }
                None => {
                    return Err(ControllerResponse::Unavailable(
                        "the metadata image did not reach the end of the log within the \
                         write's deadline"
                            .into(),
                    ))
                }
            }
        };
        if metrics.current_term != term || !metrics.state.is_leader() {
            return Err(ControllerResponse::NotController {
                leader: metrics.current_leader.filter(|&l| l != self.node_id),
            });
        }
        let published = self.published.borrow().clone();
        // After a restart the same term may lead again (openraft keeps a vote): continue
        // past the log's sequence numbers of this term.
        let after_log = published
            .last_decision
            .filter(|last| last.term == term)
            .map_or(0, |last| last.seq + 1);
        let first_seq = self.next_seq.load(Ordering::Relaxed).max(after_log);
        Ok(Proposer::new(
            (*published.image).clone(),
            published.last_decision,
            term,
            first_seq,
            ENTRY_RECORDS_BYTES,
        ))
    }

    /// After a write whose outcome is unknown: the next write starts from the applied
    /// image, unless a newer proposer than the write's (`generation`) took over already.
    async fn forget_proposer(&self, generation: u64) {
        let mut guard = self.proposer.lock().await;
        if guard.as_ref().is_some_and(|(g, _)| *g == generation) {
            *guard = None;
        }
    }

    async fn heartbeat(
        &self,
        id: BrokerId,
        incarnation: Uuid,
        caught_up: bool,
        shutting_down: bool,
    ) -> ControllerResponse {
        // A controller deposed without knowing it yet (frozen, cut off) must not answer
        // from its image: a broker renews its leadership lease on this answer, and would
        // keep answering as a leader it no longer is. Confirmed with a quorum first.
        if !self.leadership_confirmed().await {
            return ControllerResponse::NotController { leader: None };
        }
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
                metadata_index: 0,
            };
        };
        self.saw(id, incarnation);
        if self.fencing().contains(&id) {
            // Its session expired and a fence may already be on its way: an answer now
            // would renew a lease the fence is about to break. The broker asks again.
            return ControllerResponse::Unavailable(format!(
                "broker {id}'s session expired and it is being fenced; heartbeat again"
            ));
        }
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
        // Every entry proposed so far, committed or not: a broker that has applied this
        // far has seen every decision this controller made before answering.
        let metadata_index = self.raft.metrics().borrow().last_log_index.unwrap_or(0);
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
            metadata_index,
        }
    }

    /// Session expiry and preferred-leader elections, while this node leads. Runs until
    /// the process ends.
    pub async fn run_duties(self: Arc<Self>) {
        // The Raft term of the last leadership whose sessions were refreshed. Keyed on the
        // term, not on a leader/not-leader edge: a tick can be late (a fence write takes
        // up to its deadline, SIGSTOP freezes it), and a step-down followed by a new
        // leadership between two ticks must still refresh, or the new leader judges the
        // brokers by heartbeats from its previous term and fences them all at once.
        let mut refreshed_term = None;
        let mut last_preferred_check = C::now();
        // A tick every interval, late ticks caught up (tokio's `interval`).
        let mut next_tick = C::now();
        loop {
            C::sleep_until(next_tick).await;
            next_tick += SESSION_CHECK_INTERVAL;
            let leader = self.is_leader();
            let term = self.raft.metrics().borrow().current_term;
            if leader && refreshed_term != Some(term) {
                refreshed_term = Some(term);
                // A new active controller has seen no heartbeat yet: every broker gets a
                // full session from now before it can be fenced.
                // What brokers said in an earlier term no longer names their incarnation:
                // one may have registered again with another controller since, and this
                // one's image may not show it yet (a session taken from an image that old
                // would fence the new incarnation at once; the simulator found it).
                // Brokers with no session get one, from the image, when first checked.
                let now = C::now();
                for session in self.sessions().values_mut() {
                    session.last_seen = now;
                    session.heard = false;
                }
            }
            if !leader {
                continue;
            }
            if !self.is_voter() {
                // A leader outside the voters: a removal of itself it proposed committed
                // (perhaps after its request timed out, once a voter came back). Hand over.
                self.resign().await;
                continue;
            }
            if self.image().cluster_id.is_none() {
                let cluster_id = self.new_cluster_id.clone();
                let _ = self
                    .write(ControllerCommand::InitCluster {
                        cluster_id,
                        min_insync_replicas: self.config.min_insync_replicas,
                    })
                    .await;
            }
            self.fence_expired().await;
            if let Some(interval) = self.config.preferred_leader_check {
                if last_preferred_check.elapsed() >= interval {
                    last_preferred_check = C::now();
                    if preferred_leaders_movable(&self.image()) {
                        let _ = self.write(ControllerCommand::ElectPreferredLeaders).await;
                    }
                }
            }
        }
    }

    async fn fence_expired(&self) {
        let image = self.image();
        let mut expired = Vec::new();
        {
            let mut sessions = self.sessions();
            for broker in image.brokers.values().filter(|b| !b.fenced) {
                if self.session_expired(&mut sessions, broker.id, broker.incarnation) {
                    expired.push((broker.id, broker.incarnation));
                }
            }
        }
        if expired.is_empty() {
            return;
        }
        // A leader frozen or cut off past the session timeout sees every session expired
        // when it wakes up, though another controller has been hearing the heartbeats:
        // it fences only once a quorum confirms it still leads.
        if !self.leadership_confirmed().await {
            return;
        }
        for (id, incarnation) in expired {
            // A heartbeat answered while leadership was being confirmed renewed the
            // session, and the broker's lease with it: marked as being fenced first, then
            // checked again, so a heartbeat either renewed the session before this check
            // or sees the mark and is not answered (`heartbeat`).
            self.fencing().insert(id);
            let still_expired = {
                let mut sessions = self.sessions();
                self.session_expired(&mut sessions, id, incarnation)
            };
            if still_expired {
                tracing::warn!(broker = id, "broker session expired: fencing");
                let _ = self
                    .write(ControllerCommand::FenceBroker { id, incarnation })
                    .await;
            }
            self.fencing().remove(&id);
        }
    }

    /// Whether `id`'s session (of `incarnation`, the one the image holds) has expired, or
    /// belongs to another incarnation. A broker never seen gets a session from now.
    fn session_expired(
        &self,
        sessions: &mut HashMap<BrokerId, Session<InstantOf<C>>>,
        id: BrokerId,
        incarnation: Uuid,
    ) -> bool {
        let now = C::now();
        let session = sessions.entry(id).or_insert(Session {
            incarnation,
            last_seen: now,
            heard: false,
        });
        if session.incarnation != incarnation {
            if session.heard {
                // The broker itself named another incarnation: the image's is gone.
                return true;
            }
            // Taken from an older image: the image's incarnation gets a full session.
            *session = Session {
                incarnation,
                last_seen: now,
                heard: false,
            };
            return false;
        }
        now - session.last_seen > self.config.session_timeout
    }

    fn fencing(&self) -> std::sync::MutexGuard<'_, BTreeSet<BrokerId>> {
        self.fencing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `future` until `deadline` on the runtime of `C` (None: the deadline came first). Not
/// openraft's `timeout_at`, whose generic output type makes a future holding a borrow
/// (a lock guard, a watch's `Ref`) unprovably `Send`; polled as tokio's `timeout` is,
/// the future first.
async fn until<C: MetadataRaft, F: std::future::Future>(
    deadline: InstantOf<C>,
    future: F,
) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = future => Some(out),
        () = C::sleep_until(deadline) => None,
    }
}

/// `future` for at most `timeout` on the runtime of `C`.
async fn within<C: MetadataRaft, F: std::future::Future>(
    timeout: Duration,
    future: F,
) -> Option<F::Output> {
    until::<C, _>(C::now() + timeout, future).await
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
    strand_types::kafka_uuid::to_text(&Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
    use strand_metadata::{MetadataEntry, NewTopic};

    use super::*;
    use crate::TypeConfig;

    #[test]
    fn the_parts_of_a_large_decision_each_fit_an_entry() {
        let mut image = MetadataImage::default();
        for id in 1..=3 {
            let incarnation = Uuid::from_u128(id as u128);
            for command in [
                ControllerCommand::RegisterBroker {
                    id,
                    host: "127.0.0.1".into(),
                    port: 9092,
                    rack: Some("a-rack-with-a-long-name".into()),
                    incarnation,
                    listeners: Vec::new(),
                    unclean_shutdown: false,
                },
                ControllerCommand::UnfenceBroker { id, incarnation },
            ] {
                strand_metadata::apply(&mut image, &command);
            }
        }
        let mut proposer =
            Proposer::new(image, None, u64::MAX, u64::MAX - 1_000, ENTRY_RECORDS_BYTES);
        let create = ControllerCommand::CreateTopics {
            topics: vec![NewTopic {
                name: "t".repeat(249),
                id: Uuid::from_u128(7),
                partitions: strand_metadata::controller::PARTITIONS_PER_TOPIC_MAX,
                replication_factor: 3,
                assignments: Vec::new(),
                configs: BTreeMap::from([("retention.ms".to_string(), "-1".to_string())]),
            }],
        };
        let (_, entries) = proposer.propose(&create).unwrap();
        assert!(entries.len() > 1);
        for payload in entries {
            assert!(matches!(&payload, MetadataEntry::Records(r) if r.part.is_some()));
            let entry: Entry<TypeConfig> = Entry {
                log_id: LogId::new(CommittedLeaderId::new(u64::MAX, u64::MAX), u64::MAX),
                payload: EntryPayload::Normal(payload),
            };
            let bytes = serde_json::to_vec(&entry).unwrap().len();
            assert!(bytes <= crate::rpc::ENTRY_MAX_BYTES, "{bytes} bytes");
        }
    }
}
