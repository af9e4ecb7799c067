//! What the quorum tests share: free ports and a test node's settings.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use strand_raft::controller_service::ServiceConfig;
use strand_raft::network::QuorumTls;
use strand_raft::node::{QuorumConfig, QuorumNode};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts voter `id` of `voters` with its data under `root` (fast heartbeats and sessions).
pub async fn start_node(
    id: u64,
    voters: &BTreeMap<u64, String>,
    root: &Path,
    tls: Option<QuorumTls>,
) -> QuorumNode {
    QuorumNode::start(QuorumConfig {
        node_id: id,
        voters: voters.clone(),
        listen: voters[&id].parse().unwrap(),
        dir: root.join(format!("node-{id}")),
        service: ServiceConfig {
            session_timeout: Duration::from_millis(1500),
            preferred_leader_check: None,
        },
        heartbeat_interval: Duration::from_millis(50),
        tls,
    })
    .await
    .unwrap()
}
