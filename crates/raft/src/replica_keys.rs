//! A voter that lost its metadata log must not vote until it has it back (KIP-853's
//! replica keys).
//!
//! Raft's safety rests on every voter remembering what it acknowledged. A voter whose
//! disk was lost or replaced comes back with an empty log under the same node id; were
//! it to vote, it could elect a candidate that lacks entries committed with the old
//! log's acknowledgement, and those entries would be lost (entry X committed on A and B;
//! B loses its disk; with A down, C, which never had X, wins B's vote and overwrites X).
//!
//! The metadata directory id (`directory.id` in its `meta.properties`, new with every
//! new directory) tells the two lives apart. The membership records each member's id once
//! it registers (`controller_service.rs`), and every vote request carries both halves:
//! - the directory the candidate's membership records for the voter asked: a voter
//!   running on another directory refuses (it is not the voter the candidate counts);
//! - the candidate's own directory: a voter whose membership records another for the
//!   candidate refuses (the candidate's log may lack what its old directory
//!   acknowledged).
//!
//! A replaced node does not stand for election either (openraft's `elect` switch, as
//! `elect_only_as_recorded` sets it): once a voter refused its candidacy on these grounds,
//! or someone asked it as its old directory, or its membership records the old one. Its
//! candidacies could never win, but their ever higher terms would depose each leader
//! that reached it with an append, and it would never take the log.
//!
//! Appends are not refused: a replaced node takes the log from the leader like any
//! follower, and an acknowledgement it gives covers the whole prefix it now holds, so
//! counting it is sound. Once its broker heartbeats caught up (its own registration
//! applied, so every entry committed before its restart is in its log), the active
//! controller records its new directory and it votes again (Kafka asks the operator to
//! remove the old replica key and add the new one instead; `docs/COMPATIBILITY.md`).
//!
//! A nil directory id on either side means unknown (voters named at start before they
//! register, nodes older than this check): nothing is refused on it.

use std::sync::Arc;

use openraft::raft::VoteRequest;
use openraft::Membership;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use crate::{MetadataRaft, NodeId, QuorumPeer};

/// A vote request with the replica keys of both ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddressedVote {
    pub rpc: VoteRequest<NodeId>,
    /// The candidate's own metadata directory id.
    pub candidate_directory: Uuid,
    /// The directory id the candidate's membership records for the voter asked.
    pub voter_directory: Uuid,
}

/// A vote request not considered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub why: String,
    /// The candidate runs on another directory than the one recorded for it: it should
    /// stop standing for election (`ReplacedSignal`).
    pub candidate_replaced: bool,
}

/// Why a node running on directory `own`, holding `membership`, refuses `vote` (None:
/// Raft decides it as usual).
pub fn vote_refusal(
    membership: &Membership<NodeId, QuorumPeer>,
    own: Uuid,
    vote: &AddressedVote,
) -> Option<Refusal> {
    let known = |id: Uuid| !id.is_nil();
    if known(own) && known(vote.voter_directory) && vote.voter_directory != own {
        return Some(Refusal {
            why: format!(
                "asked as metadata directory {}, but this node runs on {own} (its log was lost or replaced): it votes again once the controller records its new directory",
                vote.voter_directory
            ),
            candidate_replaced: false,
        });
    }
    let candidate = vote.rpc.vote.leader_id.node_id;
    let recorded = membership
        .get_node(&candidate)
        .map_or(Uuid::nil(), |peer| peer.directory_id);
    if known(recorded) && known(vote.candidate_directory) && recorded != vote.candidate_directory {
        return Some(Refusal {
            why: format!(
                "candidate {candidate} runs on metadata directory {}, but the membership records {recorded}: its log may lack what the old one acknowledged",
                vote.candidate_directory
            ),
            candidate_replaced: true,
        });
    }
    None
}

/// `vote_refusal` against the membership `raft` holds now; a refusal because this node
/// is not the one asked raises `replaced`.
pub fn refuses_vote<C: MetadataRaft>(
    raft: &openraft::Raft<C>,
    own: Uuid,
    vote: &AddressedVote,
    replaced: &ReplacedSignal,
) -> Option<Refusal> {
    let refusal = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        vote_refusal(metrics.membership_config.membership(), own, vote)
    };
    if refusal.as_ref().is_some_and(|r| !r.candidate_replaced) {
        replaced.raise();
    }
    refusal
}

/// Raised when this node learns that others know it by another metadata directory (a
/// candidacy refused as replaced, a vote asked of its old directory).
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
}

/// Keeps this node out of elections while it runs on another metadata directory than
/// the one recorded for it: its membership records another, or (its membership
/// recording none, as the one it started with after losing its disk) `replaced` was
/// raised. Runs until Raft stops.
pub async fn elect_only_as_recorded<C: MetadataRaft>(
    raft: openraft::Raft<C>,
    own: Uuid,
    replaced: ReplacedSignal,
) {
    if own.is_nil() {
        return;
    }
    let mut told = replaced.subscribe();
    let mut metrics = raft.metrics();
    let mut electing = true;
    loop {
        let stand_aside = {
            let metrics = metrics.borrow_and_update();
            let membership = metrics.membership_config.membership();
            match membership
                .get_node(&metrics.id)
                .map(|peer| peer.directory_id)
            {
                Some(recorded) if !recorded.is_nil() => recorded != own,
                _ => *told.borrow_and_update(),
            }
        };
        if stand_aside == electing {
            electing = !stand_aside;
            raft.runtime_config().elect(electing);
            let what = match electing {
                true => "this node's metadata directory is recorded: it stands for election again",
                false => "this node runs on another metadata directory than the one recorded for it: it stands for election once its new one is recorded",
            };
            tracing::info!(directory = %own, "{what}");
        }
        // Biased: the simulator replays it (no draw from tokio's unseeded RNG).
        tokio::select! {
            biased;
            changed = metrics.changed() => if changed.is_err() { return },
            changed = told.changed() => if changed.is_err() { return },
        }
    }
}

/// The directory `membership` records for `node` when it is known and differs from
/// `running`, the one the node reports it runs on: its metadata log was replaced.
pub fn replaced_directory(
    membership: &Membership<NodeId, QuorumPeer>,
    node: NodeId,
    running: Uuid,
) -> Option<Uuid> {
    let recorded = membership.get_node(&node)?.directory_id;
    (!recorded.is_nil() && !running.is_nil() && recorded != running).then_some(recorded)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::{LeaderId, Vote};

    use super::*;

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

    fn vote(candidate: NodeId, candidate_directory: Uuid, voter_directory: Uuid) -> AddressedVote {
        AddressedVote {
            rpc: VoteRequest {
                vote: Vote {
                    leader_id: LeaderId {
                        term: 5,
                        node_id: candidate,
                    },
                    committed: false,
                },
                last_log_id: None,
            },
            candidate_directory,
            voter_directory,
        }
    }

    #[test]
    fn a_voter_running_on_another_directory_than_the_one_asked_refuses() {
        // Voter 2 lost its disk: it now runs on 23; candidate 1 asks for 22.
        let refusal = vote_refusal(&membership(), dir(23), &vote(1, dir(11), dir(22))).unwrap();
        assert!(refusal.why.contains("runs on") && !refusal.candidate_replaced);
        // The same voter on its recorded directory decides as Raft does.
        assert_eq!(
            vote_refusal(&membership(), dir(22), &vote(1, dir(11), dir(22))),
            None
        );
    }

    #[test]
    fn a_candidate_on_another_directory_than_the_recorded_one_is_refused() {
        // Candidate 2 came back on 23; voter 1's membership records 22.
        let refusal = vote_refusal(&membership(), dir(11), &vote(2, dir(23), dir(11))).unwrap();
        assert!(refusal.why.contains("candidate 2") && refusal.candidate_replaced);
    }

    #[test]
    fn unknown_directories_refuse_nothing() {
        // Node 3 never registered (nil in the membership): its candidacy is judged by Raft.
        assert_eq!(
            vote_refusal(&membership(), dir(11), &vote(3, dir(33), dir(11))),
            None
        );
        // A candidate that does not know the voter's directory, or its own.
        assert_eq!(
            vote_refusal(&membership(), dir(23), &vote(1, dir(11), Uuid::nil())),
            None
        );
        assert_eq!(
            vote_refusal(&membership(), dir(11), &vote(2, Uuid::nil(), dir(11))),
            None
        );
        // A node that does not know its own.
        assert_eq!(
            vote_refusal(&membership(), Uuid::nil(), &vote(1, dir(11), dir(22))),
            None
        );
    }

    #[test]
    fn a_replaced_directory_is_the_recorded_one_when_both_are_known_and_differ() {
        let m = membership();
        assert_eq!(replaced_directory(&m, 2, dir(23)), Some(dir(22)));
        assert_eq!(replaced_directory(&m, 2, dir(22)), None);
        assert_eq!(replaced_directory(&m, 3, dir(33)), None, "nil recorded");
        assert_eq!(replaced_directory(&m, 2, Uuid::nil()), None, "nil reported");
        assert_eq!(replaced_directory(&m, 9, dir(99)), None, "not a member");
    }
}
