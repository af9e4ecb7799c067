//! What the quorum tests share: free ports and a test node's settings.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use strand_metadata::{ControllerCommand, NewTopic};
use strand_raft::client::QuorumClient;
use strand_raft::controller_service::ServiceConfig;
use strand_raft::network::QuorumTls;
use strand_raft::node::{QuorumConfig, QuorumNode};
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use uuid::Uuid;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts voter `id` of `voters` with its data under `root` (fast heartbeats and sessions).
#[allow(dead_code)] // Each test binary compiles this module; not all use each helper.
pub async fn start_node(
    id: u64,
    voters: &BTreeMap<u64, String>,
    root: &Path,
    tls: Option<QuorumTls>,
) -> QuorumNode {
    start_member(id, voters, &voters[&id], root, tls).await
}

/// Starts node `id`, listening on `listen`, in the quorum `voters` started with (it
/// need not be one of them).
#[allow(dead_code)]
pub async fn start_member(
    id: u64,
    voters: &BTreeMap<u64, String>,
    listen: &str,
    root: &Path,
    tls: Option<QuorumTls>,
) -> QuorumNode {
    start_keyed(id, voters, listen, root, tls, Uuid::nil()).await
}

/// `start_member` with the metadata directory id `directory_id` (votes checked by it).
#[allow(dead_code)]
pub async fn start_keyed(
    id: u64,
    voters: &BTreeMap<u64, String>,
    listen: &str,
    root: &Path,
    tls: Option<QuorumTls>,
    directory_id: Uuid,
) -> QuorumNode {
    QuorumNode::start(QuorumConfig {
        node_id: id,
        voters: voters.clone(),
        listen: listen.parse().unwrap(),
        dir: root.join(format!("node-{id}")),
        directory_id,
        service: ServiceConfig {
            session_timeout: Duration::from_millis(1500),
            preferred_leader_check: None,
            min_insync_replicas: None,
        },
        heartbeat_interval: Duration::from_millis(50),
        tls,
    })
    .await
    .unwrap()
}

/// Polls `check` until it holds, failing the test after 30 seconds.
#[allow(dead_code)]
pub async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Three voters on free ports, started, as a list (node i at index i - 1).
#[allow(dead_code)]
pub async fn three_nodes(root: &Path) -> (BTreeMap<u64, String>, Vec<QuorumNode>) {
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, &voters, root, None).await);
    }
    (voters, nodes)
}

/// A CreateTopics of `name` (a new id, no assignments, no configs).
#[allow(dead_code)]
pub fn create_topic_request(
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> ControllerRequest {
    ControllerRequest::Write(ControllerCommand::CreateTopics {
        topics: vec![NewTopic {
            name: name.into(),
            id: Uuid::new_v4(),
            partitions,
            replication_factor,
            assignments: Vec::new(),
            configs: BTreeMap::new(),
        }],
    })
}

/// The registration of broker `id` (incarnation `incarnation`), receiving the metadata
/// log at `raft_address` with metadata directory `directory_id`.
pub fn register_request(
    id: i32,
    incarnation: Uuid,
    raft_address: String,
    directory_id: Uuid,
) -> ControllerRequest {
    ControllerRequest::Register {
        command: ControllerCommand::RegisterBroker {
            id,
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
            rack: None,
            incarnation,
            listeners: Vec::new(),
            unclean_shutdown: false,
        },
        raft_address,
        directory_id,
    }
}

/// Registers broker `id` as `register_request` says; the registration must succeed.
#[allow(dead_code)]
pub async fn register_broker(
    client: &QuorumClient,
    id: i32,
    incarnation: Uuid,
    raft_address: String,
    directory_id: Uuid,
) {
    let request = register_request(id, incarnation, raft_address, directory_id);
    let response = client
        .request(request, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(
        matches!(response, ControllerResponse::Reply(_)),
        "{response:?}"
    );
}
