//! Messages between quorum nodes and from brokers to the active controller, and their
//! framing: `[u32 length][JSON]`, the length checked against `FRAME_MAX_BYTES` before
//! anything is allocated.

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use strand_metadata::{BrokerId, ControllerCommand, ControllerReply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::{NodeId, TypeConfig};

/// Largest frame either side accepts (a snapshot chunk or a big CreateTopics).
pub const FRAME_MAX_BYTES: u32 = 256 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
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
}

/// What a broker asks of the active controller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// Register this broker (a `RegisterBroker` command); `raft_address` is where a node
    /// outside the voters receives the metadata log as a learner.
    Register {
        command: ControllerCommand,
        raft_address: String,
    },
    Write(ControllerCommand),
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
    },
    Unavailable(String),
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

pub async fn read_frame<R, T>(reader: &mut R) -> std::io::Result<T>
where
    R: AsyncReadExt + Unpin,
    T: DeserializeOwned,
{
    let length = reader.read_u32().await?;
    if length > FRAME_MAX_BYTES {
        return Err(std::io::Error::other(format!(
            "frame of {length} bytes exceeds {FRAME_MAX_BYTES}"
        )));
    }
    let mut body = vec![0u8; length as usize];
    reader.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}
