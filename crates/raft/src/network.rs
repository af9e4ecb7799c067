//! TCP transport: `Peer` is one connection to a node, used for Raft RPCs and broker
//! requests alike (one request at a time, reconnecting after any error); `serve` answers
//! both kinds on a node's quorum address.

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
use openraft::BasicNode;
use tokio::net::{TcpListener, TcpStream};

use crate::controller_service::ControllerService;
use crate::rpc::{read_frame, write_frame, Request, Response};
use crate::{NodeId, Raft, TypeConfig};

/// Connections accepted at once on a quorum address.
const CONNECTIONS_MAX: usize = 1024;

/// One connection to another node; reconnects lazily.
#[derive(Debug)]
pub struct Peer {
    address: String,
    stream: Option<TcpStream>,
}

impl Peer {
    pub fn new(address: String) -> Peer {
        Peer {
            address,
            stream: None,
        }
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
        let result = tokio::time::timeout(timeout, async {
            if self.stream.is_none() {
                let stream = TcpStream::connect(&self.address).await?;
                stream.set_nodelay(true)?;
                self.stream = Some(stream);
            }
            let stream = self.stream.as_mut().expect("connected above");
            write_frame(stream, request).await?;
            read_frame::<_, Response>(stream).await
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

/// openraft's view of the network: a `Peer` per target.
#[derive(Debug, Clone, Default)]
pub struct Network;

pub struct Connection {
    target: NodeId,
    peer: Peer,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            target,
            peer: Peer::new(node.addr.clone()),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl Connection {
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
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    let error = std::io::Error::other(format!("unexpected answer {response:?}"));
    RPCError::Network(NetworkError::new(&error))
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        match self.call(Request::AppendEntries(rpc), &option).await? {
            Response::AppendEntries(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.call(Request::InstallSnapshot(rpc), &option).await? {
            Response::InstallSnapshot(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        match self.call(Request::Vote(rpc), &option).await? {
            Response::Vote(result) => {
                result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(unexpected(other)),
        }
    }
}

/// Answers Raft RPCs and broker requests on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, raft: Raft, service: Arc<ControllerService>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (mut stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "quorum listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (raft, service) = (raft.clone(), service.clone());
        tokio::spawn(async move {
            let _permit = permit;
            while let Ok(request) = read_frame::<_, Request>(&mut stream).await {
                let response = match request {
                    Request::AppendEntries(rpc) => {
                        Response::AppendEntries(raft.append_entries(rpc).await)
                    }
                    Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
                    Request::InstallSnapshot(rpc) => {
                        Response::InstallSnapshot(raft.install_snapshot(rpc).await)
                    }
                    Request::Controller(request) => {
                        Response::Controller(service.handle(request).await)
                    }
                };
                if write_frame(&mut stream, &response).await.is_err() {
                    return;
                }
            }
        });
    }
}
