//! A voter that lost its metadata log must take no part in the quorum until the
//! membership knows it by its new directory (KIP-853's replica keys).
//!
//! Raft's safety rests on every voter remembering what it acknowledged and whom it voted
//! for. A voter whose disk was lost or replaced comes back with an empty log and no vote
//! under the same node id. Were it to vote, it could elect a candidate that lacks entries
//! committed with the old log's acknowledgement (entry X committed on A and B; B loses its
//! disk; with A down, C, which never had X, wins B's vote). Were its acknowledgements
//! counted, a deposed leader of an older term, which B no longer knows it voted against,
//! could commit other entries at X's index with B's help.
//!
//! The metadata directory id (`directory.id` in its `meta.properties`, new with every new
//! directory) tells the two lives apart. The membership records each member's id when it
//! registers (`controller_service.rs`), and every Raft message names the directory the
//! sender's membership records for the recipient; the recipient refuses one addressed to
//! another directory than its own. So a replaced node votes for nobody and acknowledges
//! nothing until its registration records its new directory. Any leader that addresses it
//! by the new one holds that record in its log, so it was appended after the old log was
//! lost: its term is past every vote the old log cast, and its log holds every entry the
//! old log helped commit. From then on the node takes the log and votes as any follower.
//! (Kafka keeps such a node an observer until an operator removes the old replica key and
//! adds the new one; `docs/ARCHITECTURE.md`, deliberate differences.)
//!
//! Votes also name the candidate's own directory, and a voter whose membership records
//! another one for the candidate refuses it. A replaced node also stops standing for
//! election (openraft's `elect` switch, `elect_only_as_recorded`): its candidacies could
//! not win, but their ever higher terms would depose every leader that reached it.
//!
//! A nil directory id means unknown: voters named at start before they register,
//! controller-only nodes. A sender whose membership records none for the recipient
//! addresses it by nil, and a node refuses that only once it knows its directory replaced
//! a lost one (`ReplacedSignal`): a candidate cut off since before the node's first
//! registration would otherwise win its vote with a log lacking what the old directory
//! acknowledged (simulator seed 881912749). It knows so from the marker its broker leaves
//! in a new metadata directory when the data directory remembers an older one
//! (`mark_replaced`), or from a message addressed to another directory. A node that lost
//! its data directory too has nothing to tell it: it cannot tell itself from a new node,
//! and votes as one (`docs/FAULTS.md`). Refusing nil for good once replaced is safe: a
//! sender that knows the node by no directory lacks the registration recording the new
//! one, so it is no leader elected after that registration was committed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::Membership;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use crate::{MetadataRaft, NodeId, QuorumPeer};

/// A Raft message with the replica keys of both ends. (Not flattened into the message:
/// serde's flattening buffers the whole message, and openraft's entries do not survive
/// it. Quorum nodes of versions before the keys cannot talk to these.)
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Addressed<T> {
    pub rpc: T,
    /// The sender's own metadata directory id.
    #[serde(default)]
    pub sender_directory: Uuid,
    /// The directory id the sender's membership records for the recipient.
    #[serde(default)]
    pub recipient_directory: Uuid,
    /// The node the sender meant it for: the address recorded for one node may reach
    /// another (a broker registered with another node's quorum address), whose
    /// acknowledgements would then count as the first's, or a leader's as its own.
    #[serde(default)]
    pub recipient: Option<NodeId>,
}

pub type AddressedVote = Addressed<VoteRequest<NodeId>>;

/// A message not considered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub why: String,
    /// The candidate runs on another directory than the one recorded for it: it should
    /// stop standing for election (`ReplacedSignal`).
    pub candidate_replaced: bool,
}

fn known(id: Uuid) -> bool {
    !id.is_nil()
}

/// The marker a broker leaves in a new metadata directory that replaces a lost one.
const REPLACED_MARKER: &str = "replaces-a-lost-directory";

/// Marks `dir`, a new metadata directory, as replacing a lost one: the node refuses what
/// is addressed by nil too, for as long as the directory lives (`ReplicaKeyGuard::open`).
pub fn mark_replaced(dir: &Path) -> std::io::Result<()> {
    strand_log::checkpoint::write_atomically(
        &dir.join(REPLACED_MARKER),
        b"this metadata directory replaces one that was lost: Raft messages that do not address it by its directory id are refused\n",
    )
}

pub fn is_marked_replaced(dir: &Path) -> bool {
    dir.join(REPLACED_MARKER).exists()
}

/// Why a node running on directory `own` refuses a message addressed to `recipient`;
/// `replaced`: it knows its directory replaced a lost one.
pub fn misaddressed(own: Uuid, recipient: Uuid, replaced: bool) -> Option<Refusal> {
    if !known(own) {
        return None;
    }
    let why = if known(recipient) && recipient != own {
        format!(
            "addressed to metadata directory {recipient}, but this node runs on {own} (its log was lost or replaced): it takes part again once its registration records the new directory"
        )
    } else if !known(recipient) && replaced {
        format!(
            "the sender knows this node by no metadata directory, and this node's ({own}) replaced a lost one: it takes part again once its registration records the new directory, with a sender that knows it"
        )
    } else {
        return None;
    };
    Some(Refusal {
        why,
        candidate_replaced: false,
    })
}

/// Why a voter holding `membership` refuses `vote` for its candidate: the candidate runs
/// on another directory than the one recorded for it.
fn candidate_refusal(
    membership: &Membership<NodeId, QuorumPeer>,
    vote: &AddressedVote,
) -> Option<Refusal> {
    let candidate = vote.rpc.vote.leader_id.node_id;
    let candidate_recorded = membership
        .get_node(&candidate)
        .map_or(Uuid::nil(), |peer| peer.directory_id);
    if known(candidate_recorded)
        && known(vote.sender_directory)
        && candidate_recorded != vote.sender_directory
    {
        return Some(Refusal {
            why: format!(
                "candidate {candidate} runs on metadata directory {}, but the membership records {candidate_recorded}: its log may lack what the old one acknowledged",
                vote.sender_directory
            ),
            candidate_replaced: true,
        });
    }
    None
}

/// This node's half of the replica keys: its directory, and the signal it raises when
/// it learns that others know it by another one.
#[derive(Debug, Clone, Default)]
pub struct ReplicaKeyGuard {
    pub own: Uuid,
    pub replaced: ReplacedSignal,
    /// Raft messages this node refused on the keys (`strand_raft_replica_key_refusals_total`).
    refusals: Arc<AtomicU64>,
}

impl ReplicaKeyGuard {
    pub fn new(own: Uuid) -> ReplicaKeyGuard {
        ReplicaKeyGuard {
            own,
            replaced: ReplacedSignal::default(),
            refusals: Arc::default(),
        }
    }

    fn counted(&self, refusal: Refusal) -> Refusal {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        refusal
    }

    /// Raft messages this node refused on the keys since it started.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Whether node `id`, holding `membership`, takes no part in the quorum: it runs on
    /// another directory than the one recorded for it, or (none recorded, as in the
    /// membership it started with after losing its disk) it was `told` it replaced a lost
    /// one. Once its membership records its own directory, that decides. A node that
    /// knows no directory of its own always takes part.
    pub fn takes_no_part(
        &self,
        membership: &Membership<NodeId, QuorumPeer>,
        id: NodeId,
        told: bool,
    ) -> bool {
        if !known(self.own) {
            return false;
        }
        match membership.get_node(&id).map(|peer| peer.directory_id) {
            Some(recorded) if known(recorded) => recorded != self.own,
            _ => told,
        }
    }

    /// The guard of a node running on directory `own` at `dir`: the signal raised from
    /// the start if the directory is marked as replacing a lost one (`mark_replaced`).
    pub fn open(own: Uuid, dir: &Path) -> ReplicaKeyGuard {
        let guard = ReplicaKeyGuard::new(own);
        if known(own) && is_marked_replaced(dir) {
            tracing::warn!(
                directory = %own,
                marker = %dir.join(REPLACED_MARKER).display(),
                "this metadata directory replaces a lost one: this node votes for nobody and takes no log until its registration records the new directory (if every node's metadata log was deleted on purpose, to form the quorum anew, no node can record another: remove the marker on each)"
            );
            guard.replaced.raise();
        }
        guard
    }

    /// `rpc` addressed from this node to node `recipient`, whose directory the
    /// membership records as `directory`.
    pub fn address<T>(&self, rpc: T, recipient: NodeId, directory: Uuid) -> Addressed<T> {
        Addressed {
            rpc,
            sender_directory: self.own,
            recipient_directory: directory,
            recipient: Some(recipient),
        }
    }

    /// A refusal this node heard, as openraft is told it: the message did not arrive. A
    /// candidacy refused as replaced raises the signal.
    pub fn refused<E: std::error::Error>(
        &self,
        refusal: Refusal,
    ) -> RPCError<NodeId, QuorumPeer, RaftError<NodeId, E>> {
        if refusal.candidate_replaced {
            self.replaced.raise();
        }
        RPCError::Network(NetworkError::new(&std::io::Error::other(refusal.why)))
    }

    /// `message` refused on the keys (counted): meant for another node, or addressed to
    /// another directory (`misaddressed`).
    fn screen<C: MetadataRaft, T>(
        &self,
        raft: &openraft::Raft<C>,
        message: &Addressed<T>,
    ) -> Result<(), Refusal> {
        match Self::another_node(raft, message)
            .or_else(|| self.misaddressed(message.recipient_directory))
        {
            Some(refusal) => Err(self.counted(refusal)),
            None => Ok(()),
        }
    }

    /// A message meant for another node than `raft`'s (its address recorded for the
    /// wrong node).
    fn another_node<C: MetadataRaft, T>(
        raft: &openraft::Raft<C>,
        message: &Addressed<T>,
    ) -> Option<Refusal> {
        let own = raft.metrics().borrow().id;
        let meant = message.recipient.filter(|&meant| meant != own)?;
        Some(Refusal {
            why: format!(
                "meant for node {meant}, but this is node {own}: the quorum address recorded for node {meant} reaches this node"
            ),
            candidate_replaced: false,
        })
    }

    /// A message addressed to another directory than this node's, or by nil to a node
    /// that knows it replaced a lost one: refused, and the signal raised (others know
    /// this node by another directory).
    fn misaddressed(&self, recipient: Uuid) -> Option<Refusal> {
        let refusal = misaddressed(self.own, recipient, self.replaced.is_raised());
        if refusal.is_some() {
            self.replaced.raise();
        }
        refusal
    }

    /// A vote request, as the quorum listener answers it: refused on the replica keys,
    /// or decided by Raft.
    pub async fn answer_vote<C: MetadataRaft>(
        &self,
        raft: &openraft::Raft<C>,
        vote: AddressedVote,
    ) -> Result<Result<VoteResponse<NodeId>, RaftError<NodeId>>, Refusal> {
        self.screen(raft, &vote)?;
        let refusal = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            candidate_refusal(metrics.membership_config.membership(), &vote)
        };
        match refusal {
            Some(refusal) => Err(self.counted(refusal)),
            None => Ok(raft.vote(vote.rpc).await),
        }
    }

    pub async fn answer_append<C: MetadataRaft>(
        &self,
        raft: &openraft::Raft<C>,
        append: Addressed<AppendEntriesRequest<C>>,
    ) -> Result<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>, Refusal> {
        self.screen(raft, &append)?;
        Ok(raft.append_entries(append.rpc).await)
    }

    #[allow(clippy::type_complexity)]
    pub async fn answer_snapshot<C: MetadataRaft>(
        &self,
        raft: &openraft::Raft<C>,
        snapshot: Addressed<InstallSnapshotRequest<C>>,
    ) -> Result<
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
        Refusal,
    > {
        self.screen(raft, &snapshot)?;
        Ok(raft.install_snapshot(snapshot.rpc).await)
    }
}

/// Raised when this node learns that others know it by another metadata directory (a
/// candidacy refused as replaced, a message addressed to its old directory).
#[derive(Debug, Clone)]
pub struct ReplacedSignal(Arc<watch::Sender<bool>>);

impl Default for ReplacedSignal {
    fn default() -> ReplacedSignal {
        ReplacedSignal(Arc::new(watch::Sender::new(false)))
    }
}

impl ReplacedSignal {
    pub fn raise(&self) {
        self.0
            .send_if_modified(|raised| !std::mem::replace(raised, true));
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }

    pub fn is_raised(&self) -> bool {
        *self.0.borrow()
    }
}

/// Keeps this node out of elections while it runs on another metadata directory than
/// the one recorded for it: its membership records another, or (its membership
/// recording none, as the one it started with after losing its disk) the signal was
/// raised. Once its membership records its own directory, that decides, whatever the
/// signal said before. Runs until Raft stops.
pub async fn elect_only_as_recorded<C: MetadataRaft>(
    raft: openraft::Raft<C>,
    guard: ReplicaKeyGuard,
) {
    if guard.own.is_nil() {
        return;
    }
    let mut told = guard.replaced.subscribe();
    let mut metrics = raft.metrics();
    let mut electing = true;
    loop {
        let stand_aside = {
            let metrics = metrics.borrow_and_update();
            let membership = metrics.membership_config.membership();
            guard.takes_no_part(membership, metrics.id, *told.borrow_and_update())
        };
        if stand_aside == electing {
            electing = !stand_aside;
            raft.runtime_config().elect(electing);
            let what = match electing {
                true => "this node's metadata directory is recorded: it stands for election again",
                false => "this node runs on another metadata directory than the one recorded for it: it stands for election once its new one is recorded",
            };
            tracing::info!(directory = %guard.own, "{what}");
        }
        // Biased: the simulator replays it (no draw from tokio's unseeded RNG).
        tokio::select! {
            biased;
            changed = metrics.changed() => if changed.is_err() { return },
            changed = told.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::{CommittedLeaderId, LeaderId, LogId, Vote};

    use super::*;

    /// Why a node running on directory `own` (`replaced`: a replacement of a lost one),
    /// holding `membership`, refuses `vote` on the keys, as `answer_vote` decides it.
    fn vote_refusal(
        membership: &Membership<NodeId, QuorumPeer>,
        own: Uuid,
        replaced: bool,
        vote: &AddressedVote,
    ) -> Option<Refusal> {
        misaddressed(own, vote.recipient_directory, replaced)
            .or_else(|| candidate_refusal(membership, vote))
    }

    fn dir(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    /// Voters 1, 2, 3; 1 and 2 recorded with directories 11 and 22, 3 not yet.
    fn membership() -> Membership<NodeId, QuorumPeer> {
        let nodes = BTreeMap::from([
            (1, QuorumPeer::new("a:1", dir(11))),
            (2, QuorumPeer::new("b:1", dir(22))),
            (3, QuorumPeer::new("c:1", Uuid::nil())),
        ]);
        Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
    }

    /// A vote asked by `candidate` (last log at `last_index`) running on `sender`, of a
    /// voter it knows as `recipient`.
    fn vote(candidate: NodeId, sender: Uuid, recipient: Uuid, last_index: u64) -> AddressedVote {
        AddressedVote {
            rpc: VoteRequest {
                vote: Vote {
                    leader_id: LeaderId {
                        term: 5,
                        node_id: candidate,
                    },
                    committed: false,
                },
                last_log_id: Some(LogId::new(CommittedLeaderId::new(4, candidate), last_index)),
            },
            sender_directory: sender,
            recipient_directory: recipient,
            recipient: Some(2),
        }
    }

    #[test]
    fn a_voter_running_on_another_directory_than_the_one_asked_refuses() {
        // Voter 2 lost its disk: it now runs on 23; candidate 1 asks for 22.
        let refusal = vote_refusal(&membership(), dir(23), false, &vote(1, dir(11), dir(22), 9));
        let refusal = refusal.unwrap();
        assert!(refusal.why.contains("runs on") && !refusal.candidate_replaced);
        // The same voter on its recorded directory decides as Raft does.
        assert_eq!(
            vote_refusal(&membership(), dir(22), false, &vote(1, dir(11), dir(22), 9)),
            None
        );
    }

    #[test]
    fn a_candidate_on_another_directory_than_the_recorded_one_is_refused() {
        // Candidate 2 came back on 23; voter 1's membership records 22.
        let refusal = vote_refusal(&membership(), dir(11), false, &vote(2, dir(23), dir(11), 9));
        let refusal = refusal.unwrap();
        assert!(refusal.why.contains("candidate 2") && refusal.candidate_replaced);
    }

    #[test]
    fn unknown_directories_refuse_nothing() {
        // Node 3 never registered (nil in the membership): its candidacy is judged by Raft.
        assert_eq!(
            vote_refusal(&membership(), dir(11), false, &vote(3, dir(33), dir(11), 9)),
            None
        );
        // A candidate that does not know the voter's directory, or its own.
        assert_eq!(
            vote_refusal(
                &membership(),
                dir(11),
                false,
                &vote(2, Uuid::nil(), Uuid::nil(), 9)
            ),
            None
        );
        // A node that does not know its own (controller-only).
        assert_eq!(
            vote_refusal(
                &membership(),
                Uuid::nil(),
                false,
                &vote(1, dir(11), dir(22), 9)
            ),
            None
        );
        assert_eq!(misaddressed(Uuid::nil(), dir(22), false), None);
        assert_eq!(misaddressed(dir(23), Uuid::nil(), false), None);
    }

    #[test]
    fn a_node_that_knows_it_replaced_a_lost_directory_refuses_what_is_addressed_by_nil() {
        // Voter 2 came back on 23 and knows it; candidate 1, cut off since before 2's first
        // registration, knows it by no directory.
        let refusal = vote_refusal(
            &membership(),
            dir(23),
            true,
            &vote(1, dir(11), Uuid::nil(), 9),
        );
        assert!(refusal
            .unwrap()
            .why
            .contains("knows this node by no metadata directory"));
        assert!(misaddressed(dir(23), Uuid::nil(), true).is_some());
        // Addressed by its new directory, it takes part.
        assert_eq!(misaddressed(dir(23), dir(23), true), None);
        // A node that knows no directory of its own refuses nothing.
        assert_eq!(misaddressed(Uuid::nil(), Uuid::nil(), true), None);
    }

    #[test]
    fn a_marked_directory_raises_the_signal_from_the_start() {
        let marked = tempfile::tempdir().unwrap();
        mark_replaced(marked.path()).unwrap();
        assert!(ReplicaKeyGuard::open(dir(23), marked.path())
            .replaced
            .is_raised());
        let fresh = tempfile::tempdir().unwrap();
        let guard = ReplicaKeyGuard::open(dir(23), fresh.path());
        assert!(!guard.replaced.is_raised());
        // Until a message addressed to its old directory tells it.
        assert!(guard.misaddressed(Uuid::nil()).is_none());
        assert!(guard.misaddressed(dir(22)).is_some());
        assert!(guard.replaced.is_raised() && guard.misaddressed(Uuid::nil()).is_some());
    }

    #[test]
    fn appends_addressed_to_another_directory_are_refused() {
        assert!(misaddressed(dir(23), dir(22), false).is_some());
        assert_eq!(misaddressed(dir(22), dir(22), false), None);
    }

    #[test]
    fn addressed_messages_read_back_with_their_keys() {
        let addressed = vote(1, dir(11), dir(22), 9);
        let json = serde_json::to_string(&addressed).unwrap();
        let read: AddressedVote = serde_json::from_str(&json).unwrap();
        assert_eq!(read.rpc, addressed.rpc);
        assert_eq!(
            (read.sender_directory, read.recipient_directory),
            (dir(11), dir(22))
        );
    }
}
