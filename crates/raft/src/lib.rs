//! The metadata quorum: openraft with Strand's storage and network adapters.
//!
//! - `log_store.rs`: the Raft log in one append-only file of checksummed frames, the vote
//!   and the purge point in atomically replaced files.
//! - `state_machine.rs`: replays committed entries (`strand_metadata::replay_entry`: the
//!   records the active controller decided) and publishes each new image; snapshots are
//!   the image.
//! - `rpc.rs`, `network.rs`: length-prefixed JSON over TCP for Raft's RPCs and for brokers'
//!   requests to the active controller.
//! - `node.rs`: starts a node's Raft, listener and duties; `client.rs`: brokers' way to
//!   the active controller.
//! - `quorum_state.rs`: the quorum as its leader sees it (DescribeQuorum).
//! - `voters.rs`: adding and removing voters (AddRaftVoter, RemoveRaftVoter, KIP-853).
//! - `replica_keys.rs`: a voter whose metadata log was lost does not vote until it has
//!   it back.
//! - `controller_service.rs`: what the active controller does besides Raft: broker
//!   heartbeats, fencing expired sessions, unfencing caught-up brokers, deciding writes,
//!   preferred leader election.

pub mod client;
pub mod controller_service;
pub mod log_store;
pub mod network;
pub mod node;
pub mod quorum_state;
pub mod replica_keys;
pub mod rpc;
pub mod state_machine;
pub mod voters;

use std::io::Cursor;

use serde::{Deserialize, Serialize};
use strand_metadata::{MetadataEntry, Replayed};
use uuid::Uuid;

pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Raft types of the metadata quorum: entries carry the records the active controller
    /// decided (or, in logs written before that, commands); applying one says what it did.
    pub TypeConfig:
        D = MetadataEntry,
        R = Replayed,
        NodeId = NodeId,
        Node = QuorumPeer,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;

/// The metadata quorum's Raft types on any async runtime: production names tokio
/// (`TypeConfig`); the simulator its own deterministic executor (crates/sim). The log
/// store, state machine and controller service are generic over it, so the simulator
/// runs them as they are.
pub trait MetadataRaft:
    openraft::RaftTypeConfig<
    D = MetadataEntry,
    R = Replayed,
    NodeId = NodeId,
    Node = QuorumPeer,
    Entry = openraft::Entry<Self>,
    SnapshotData = Cursor<Vec<u8>>,
    Responder = openraft::impls::OneshotResponder<Self>,
>
{
}

impl<C> MetadataRaft for C where
    C: openraft::RaftTypeConfig<
        D = MetadataEntry,
        R = Replayed,
        NodeId = NodeId,
        Node = QuorumPeer,
        Entry = openraft::Entry<C>,
        SnapshotData = Cursor<Vec<u8>>,
        Responder = openraft::impls::OneshotResponder<C>,
    >
{
}

/// A member of the metadata quorum, voter or learner: its quorum address and the id of
/// its metadata log directory (the `directory.id` of the `meta.properties` there), which
/// with the node id is KIP-853's replica key. Nil for the voters named at start
/// (`--controllers`) until they register, as Kafka's static voters have none.
///
/// Serialised as openraft's `BasicNode` was, plus the directory id: logs and snapshots
/// written before it existed read as nil.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumPeer {
    pub addr: String,
    #[serde(default, skip_serializing_if = "Uuid::is_nil")]
    pub directory_id: Uuid,
}

impl QuorumPeer {
    pub fn new(addr: impl Into<String>, directory_id: Uuid) -> QuorumPeer {
        QuorumPeer {
            addr: addr.into(),
            directory_id,
        }
    }
}
pub type StorageError = openraft::StorageError<NodeId>;

fn io_error(
    subject: openraft::ErrorSubject<NodeId>,
    verb: openraft::ErrorVerb,
    error: impl std::fmt::Display,
) -> StorageError {
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::error(error.to_string()))
        .into()
}
