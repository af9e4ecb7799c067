//! Messages between quorum nodes and from brokers to the active controller, and their
//! framing: `[u32 length][JSON]`, the length checked against `FRAME_MAX_BYTES` before
//! anything is allocated, the body read against a memory budget and a deadline.

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteResponse,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use strand_metadata::{BrokerId, ControllerCommand, ControllerReply};
use strand_protocol::RequestMemory;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::quorum_state::QuorumDescription;
use crate::replica_keys::{Addressed, AddressedVote, Refusal};
use crate::voters::VoterChangeError;
use crate::{NodeId, TypeConfig};

/// Largest frame either side accepts. Metadata is small: the largest frames are snapshot
/// chunks (`SNAPSHOT_CHUNK_BYTES`, about 3.6 times that as JSON) and AppendEntries of
/// `APPEND_ENTRIES_MAX` entries of at most `ENTRY_MAX_BYTES` each.
pub const FRAME_MAX_BYTES: u32 = 16 * 1024 * 1024;
/// openraft's snapshot_max_chunk_size for this transport.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;
/// openraft's max_payload_entries for this transport.
pub const APPEND_ENTRIES_MAX: u64 = 16;
/// Largest log entry (JSON): a decision with more records is stored in several entries
/// (`strand_metadata::proposer`).
pub const ENTRY_MAX_BYTES: usize = 512 * 1024;

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(Addressed<AppendEntriesRequest<TypeConfig>>),
    Vote(AddressedVote),
    InstallSnapshot(Addressed<InstallSnapshotRequest<TypeConfig>>),
    Controller(ControllerRequest),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Controller(ControllerResponse),
    /// The message was not considered: the replica keys do not match (`replica_keys.rs`).
    Refused(Refusal),
}

/// What a broker asks of the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// Register this broker (a `RegisterBroker` command); `raft_address` is where a node
    /// outside the voters receives the metadata log as a learner.
    Register {
        command: ControllerCommand,
        raft_address: String,
        /// The directory id of the node's metadata log (nil from nodes older than it).
        #[serde(default)]
        directory_id: Uuid,
    },
    /// Promote a learner to voter (AddRaftVoter); `listener_ports` are the ports of the
    /// endpoints the request names.
    AddVoter {
        id: NodeId,
        directory_id: Uuid,
        listener_ports: Vec<u16>,
    },
    /// Demote a voter to learner (RemoveRaftVoter).
    RemoveVoter {
        id: NodeId,
        directory_id: Uuid,
    },
    /// Drop a node that is neither voter nor broker from the membership
    /// (UnregisterController).
    UnregisterController {
        id: NodeId,
    },
    Write(ControllerCommand),
    /// The quorum's leader, voters and observers with their log ends (DescribeQuorum).
    DescribeQuorum,
    Heartbeat {
        id: BrokerId,
        incarnation: Uuid,
        /// The broker has applied the metadata up to its own registration.
        caught_up: bool,
        /// The broker wants to stop: move its leaderships away first.
        shutting_down: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    Reply(ControllerReply),
    /// Ask the leader instead (if known).
    NotController {
        leader: Option<NodeId>,
    },
    Heartbeat {
        registered: bool,
        fenced: bool,
        /// Controlled shutdown finished: the broker leads nothing and may exit.
        shutdown_complete: bool,
        /// The metadata log's last index on the controller when it answered: every
        /// decision made so far. A broker that has applied this far knows of every
        /// leadership taken from it before the heartbeat (its leadership lease).
        #[serde(default)]
        metadata_index: u64,
    },
    Quorum(QuorumDescription),
    /// The outcome of AddVoter, RemoveVoter or UnregisterController.
    VoterChange(Result<(), VoterChangeError>),
    Unavailable(String),
    /// Will never succeed as asked (too large); not worth retrying.
    Refused(String),
}

pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> std::io::Result<()>
where
    W: AsyncWriteExt + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    if body.len() > FRAME_MAX_BYTES as usize {
        return Err(std::io::Error::other(format!(
            "frame of {} bytes exceeds {FRAME_MAX_BYTES}",
            body.len()
        )));
    }
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    writer.write_all(&out).await?;
    writer.flush().await
}

/// Reads one frame: its length checked against `FRAME_MAX_BYTES`, its body against
/// `memory` (the listener's budget, or an unbounded one for answers a caller waits for),
/// all of it by `deadline`.
pub async fn read_frame<R, T>(
    reader: &mut R,
    memory: &RequestMemory,
    deadline: tokio::time::Instant,
) -> std::io::Result<T>
where
    R: AsyncReadExt + Unpin,
    T: DeserializeOwned,
{
    let length = tokio::time::timeout_at(deadline, reader.read_u32())
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "frame size timed out"))??;
    if length > FRAME_MAX_BYTES {
        return Err(std::io::Error::other(format!(
            "frame of {length} bytes exceeds {FRAME_MAX_BYTES}"
        )));
    }
    let (body, _reservation) = memory
        .read_body(reader, length as usize, deadline)
        .await
        .map_err(std::io::Error::other)?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}
