//! TCP transport: `Peer` is one connection to a node, used for Raft RPCs and broker
//! requests alike (one request at a time, reconnecting after any error or a long pause);
//! `serve` answers both kinds on a node's quorum address.
//!
//! The quorum port is bounded as the client port is: a small frame cap
//! (`rpc::FRAME_MAX_BYTES`), one memory budget for the bodies being read
//! (`REQUEST_MEMORY_BYTES`, reserved as bytes arrive), a deadline for each body, an idle
//! timeout, and a connection limit at which the idlest connection is evicted, so a
//! flood of idle sockets cannot lock out the peers (they talk every heartbeat).
//!
//! With [`QuorumTls`] (the controller listener mapped to SSL) every connection is mutual
//! TLS: a node presents its certificate and accepts only peers whose certificates its
//! trust store signs, in both directions, so a process without a member's certificate can
//! neither vote, nor append to the metadata log, nor register as a broker.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use strand_security::tls::{server_name_of, ReloadingClientConfig, ReloadingServerConfig};
use strand_security::KafkaPrincipal;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

use strand_protocol::connection_limits::{
    ConnectionLimits, ConnectionLimitsConfig, ConnectionSlot,
};
use strand_protocol::RequestMemory;

use crate::controller_service::ControllerService;
use crate::quorum_state::FollowerContacts;
use crate::replica_keys::{Addressed, ReplicaKeyGuard};
use crate::rpc::{read_frame, write_frame, Request, Response};
use crate::{NodeId, QuorumPeer, Raft, TypeConfig};

/// Connections held at once on a quorum address.
const CONNECTIONS_MAX: usize = 1024;
/// At `CONNECTIONS_MAX`, a new connection evicts the one idle longest if it has been
/// idle at least this long (live peers talk at least every broker heartbeat).
const EVICTABLE_AFTER_IDLE: Duration = Duration::from_secs(2);
/// A connection with no request for this long is closed.
const IDLE_MAX: Duration = Duration::from_secs(60);
/// A `Peer` reconnects rather than reuse a connection it left unused this long, so it
/// never writes into one the other side is closing for idleness.
const REUSE_AFTER_IDLE_MAX: Duration = Duration::from_secs(30);
/// Bytes of request bodies read at once across all connections of the quorum port.
const REQUEST_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Votes, heartbeats and broker requests are this small; they never wait for the budget.
const UNPOOLED_BYTES_PER_REQUEST: usize = 16 * 1024;
/// A request's body must arrive within this long of its length.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS handshake must be done within this long of the connection.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Mutual TLS on the quorum transport: the server side requires a client certificate.
#[derive(Clone)]
pub struct QuorumTls {
    pub server: Arc<ReloadingServerConfig>,
    pub client: Arc<ReloadingClientConfig>,
    /// The principals (`User:NAME`, from a certificate's subject through the listener's
    /// ssl.principal.mapping.rules) accepted as peers: super.users when ACLs are on, since
    /// a peer may write anything to the metadata log; None (ACLs off): any certificate
    /// the trust store signs.
    pub members: Option<Arc<BTreeSet<String>>>,
}

impl QuorumTls {
    /// Whether the peer at the other end of a finished handshake is a member.
    fn admit(&self, stream: &tokio_rustls::server::TlsStream<TcpStream>) -> Result<(), String> {
        let Some(members) = &self.members else {
            return Ok(());
        };
        let principal: KafkaPrincipal = self
            .server
            .settings()
            .principal_of(stream.get_ref().1.peer_certificates())?;
        if members.contains(&principal.to_string()) {
            Ok(())
        } else {
            Err(format!("{principal} is not in super.users"))
        }
    }
}

impl std::fmt::Debug for QuorumTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QuorumTls")
    }
}

/// The bytes of a quorum connection, in the clear or under TLS.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Stream for T {}

/// One connection to another node; reconnects lazily.
pub struct Peer {
    address: String,
    tls: Option<QuorumTls>,
    stream: Option<Box<dyn Stream>>,
    last_used: tokio::time::Instant,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("address", &self.address)
            .field("connected", &self.stream.is_some())
            .finish()
    }
}

impl Peer {
    pub fn new(address: String, tls: Option<QuorumTls>) -> Peer {
        Peer {
            address,
            tls,
            stream: None,
            last_used: tokio::time::Instant::now(),
        }
    }

    /// Opens the connection: TCP, then the TLS handshake when the quorum uses TLS.
    async fn connect(&self) -> std::io::Result<Box<dyn Stream>> {
        let stream = TcpStream::connect(&self.address).await?;
        stream.set_nodelay(true)?;
        let Some(tls) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let name = server_name_of(&self.address).map_err(std::io::Error::other)?;
        let stream = tokio_rustls::TlsConnector::from(tls.client.current())
            .connect(name, stream)
            .await?;
        Ok(Box::new(stream))
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// Sends `request` and waits for the answer, within `timeout`.
    pub async fn call(
        &mut self,
        request: &Request,
        timeout: Duration,
    ) -> std::io::Result<Response> {
        if self.last_used.elapsed() > REUSE_AFTER_IDLE_MAX {
            self.stream = None;
        }
        self.last_used = tokio::time::Instant::now();
        let deadline = self.last_used + timeout;
        // Answers come from the node we asked, within our own deadline: no shared budget.
        let memory = RequestMemory::new(None, UNPOOLED_BYTES_PER_REQUEST);
        let result = tokio::time::timeout(timeout, async {
            if self.stream.is_none() {
                self.stream = Some(self.connect().await?);
            }
            let stream = self.stream.as_mut().expect("connected above");
            write_frame(stream, request).await?;
            read_frame::<_, Response>(stream, &memory, deadline).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ))
        });
        if result.is_err() {
            self.stream = None;
        }
        result
    }
}

/// openraft's view of the network: a `Peer` per target. Acknowledged AppendEntries are
/// recorded in `contacts` (DescribeQuorum's fetch and caught-up times).
#[derive(Debug, Clone)]
pub struct Network {
    pub contacts: Arc<FollowerContacts>,
    pub tls: Option<QuorumTls>,
    /// This node's replica key: its directory id is sent with every Raft message.
    pub keys: ReplicaKeyGuard,
}

pub struct Connection {
    target: NodeId,
    /// The directory id the membership records for the target.
    target_directory: Uuid,
    keys: ReplicaKeyGuard,
    peer: Peer,
    contacts: Arc<FollowerContacts>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &QuorumPeer) -> Connection {
        Connection {
            target,
            target_directory: node.directory_id,
            keys: self.keys.clone(),
            peer: Peer::new(node.addr.clone(), self.tls.clone()),
            contacts: self.contacts.clone(),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, QuorumPeer, RaftError<NodeId, E>>>;

impl Connection {
    fn addressed<T>(&self, rpc: T) -> Addressed<T> {
        self.keys.address(rpc, self.target, self.target_directory)
    }

    async fn call(
        &mut self,
        request: Request,
        option: &RPCOption,
    ) -> Result<Response, Unreachable> {
        self.peer
            .call(&request, option.hard_ttl())
            .await
            .map_err(|error| Unreachable::new(&error))
    }
}

fn unexpected<E: std::error::Error>(
    response: Response,
) -> RPCError<NodeId, QuorumPeer, RaftError<NodeId, E>> {
    let error = std::io::Error::other(format!("unexpected answer {response:?}"));
    RPCError::Network(NetworkError::new(&error))
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        let sent_end = FollowerContacts::sent_end(&rpc);
        let request = Request::AppendEntries(self.addressed(rpc));
        match self.call(request, &option).await? {
            Response::AppendEntries(result) => {
                if let Ok(response) = &result {
                    self.contacts
                        .append_answered(self.target, sent_end, response);
                }
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Response::Refused(refusal) => Err(self.keys.refused(refusal)),
            other => Err(unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let request = Request::InstallSnapshot(self.addressed(rpc));
        match self.call(request, &option).await? {
            Response::InstallSnapshot(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Response::Refused(refusal) => Err(self.keys.refused(refusal)),
            other => Err(unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        match self
            .call(Request::Vote(self.addressed(rpc)), &option)
            .await?
        {
            Response::Vote(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Response::Refused(refusal) => Err(self.keys.refused(refusal)),
            other => Err(unexpected(other)),
        }
    }
}

/// Answers Raft RPCs and broker requests on `listener` until the task is dropped;
/// Raft messages addressed to another metadata directory than `keys.own` are refused
/// (`replica_keys.rs`).
pub async fn serve(
    listener: TcpListener,
    raft: Raft,
    service: Arc<ControllerService>,
    tls: Option<QuorumTls>,
    keys: ReplicaKeyGuard,
) {
    let limits = ConnectionLimits::new(ConnectionLimitsConfig::total_only(CONNECTIONS_MAX));
    let memory = Arc::new(RequestMemory::new(
        Some(REQUEST_MEMORY_BYTES),
        UNPOOLED_BYTES_PER_REQUEST,
    ));
    // Each connection's task is owned here: when this task is dropped (the node shut
    // down), its connections close with it, rather than go on answering for a Raft that
    // stopped (a node started again on the same address in one process would otherwise
    // leave its peers talking to the stopped one).
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "quorum listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = match limits.admit_evicting_idlest(peer.ip(), EVICTABLE_AFTER_IDLE) {
            Ok(slot) => slot,
            Err(refusal) => {
                tracing::debug!(%peer, %refusal, "quorum listener: closing new connection");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (raft, service, memory) = (raft.clone(), service.clone(), memory.clone());
        let (tls, keys) = (tls.clone(), keys.clone());
        connections.spawn(async move {
            let stream: Box<dyn Stream> = match tls {
                None => Box::new(stream),
                Some(tls) => match accept(&tls, stream, &slot).await {
                    Ok(stream) => Box::new(stream),
                    Err(refusal) => {
                        tracing::info!(%peer, %refusal, "quorum listener: peer refused; closing");
                        return;
                    }
                },
            };
            serve_connection(BufReader::new(stream), slot, raft, service, memory, keys).await
        });
    }
}

/// The TLS handshake of a new connection and the member check, bounded, and given up
/// when the slot is evicted (a flood of silent handshakes holds no more sockets than the
/// connection limit).
async fn accept(
    tls: &QuorumTls,
    stream: TcpStream,
    slot: &ConnectionSlot,
) -> Result<tokio_rustls::server::TlsStream<TcpStream>, String> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.current());
    let stream = tokio::select! {
        accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)) => match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(format!("TLS handshake failed: {error}")),
            Err(_) => return Err("TLS handshake timed out".into()),
        },
        _ = slot.activity.evicted() => return Err("evicted during its TLS handshake".into()),
    };
    tls.admit(&stream)?;
    slot.activity.touch();
    Ok(stream)
}

async fn serve_connection(
    mut stream: BufReader<Box<dyn Stream>>,
    slot: ConnectionSlot,
    raft: Raft,
    service: Arc<ControllerService>,
    memory: Arc<RequestMemory>,
    keys: ReplicaKeyGuard,
) {
    loop {
        // Waits for the first byte of a request, bounded by the idle timeout and eviction.
        // (Buffered: what fill_buf reads stays for read_frame, and under TLS the bytes
        // may already be decrypted, where the socket's readiness would say nothing.)
        tokio::select! {
            filled = stream.fill_buf() => match filled {
                Ok(bytes) if !bytes.is_empty() => {}
                _ => return,
            },
            _ = tokio::time::sleep(IDLE_MAX) => return,
            _ = slot.activity.evicted() => return,
        }
        let deadline = tokio::time::Instant::now() + BODY_READ_TIMEOUT;
        let request = match read_frame::<_, Request>(&mut stream, &memory, deadline).await {
            Ok(request) => request,
            Err(error) => {
                if error.kind() != std::io::ErrorKind::UnexpectedEof {
                    tracing::debug!(%error, "quorum listener: closing connection");
                }
                return;
            }
        };
        slot.activity.touch();
        let answer = match request {
            Request::AppendEntries(rpc) => keys
                .answer_append(&raft, rpc)
                .await
                .map(Response::AppendEntries),
            Request::Vote(vote) => keys.answer_vote(&raft, vote).await.map(Response::Vote),
            Request::InstallSnapshot(rpc) => keys
                .answer_snapshot(&raft, rpc)
                .await
                .map(Response::InstallSnapshot),
            Request::Controller(request) => Ok(Response::Controller(service.handle(request).await)),
        };
        let response = answer.unwrap_or_else(|refusal| {
            tracing::info!(why = %refusal.why, "a Raft message refused on its replica keys");
            Response::Refused(refusal)
        });
        // A peer that stops reading its answers is dropped, not waited for.
        match tokio::time::timeout(BODY_READ_TIMEOUT, write_frame(&mut stream, &response)).await {
            Ok(Ok(())) => slot.activity.touch(),
            _ => return,
        }
    }
}
