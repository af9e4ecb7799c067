//! Three quorum nodes on loopback: formation, broker registration and fencing, topic
//! creation replicated to every image, losing the Raft leader, and a restart that
//! rebuilds the image from disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use strand_metadata::{ControllerCommand, ControllerReply, NewTopic, NO_LEADER};
use strand_raft::client::QuorumClient;
use strand_raft::controller_service::ServiceConfig;
use strand_raft::node::{QuorumConfig, QuorumNode};
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start(id: u64, voters: &BTreeMap<u64, String>, root: &Path) -> QuorumNode {
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
    })
    .await
    .unwrap()
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn heartbeat(client: &QuorumClient, id: i32, incarnation: Uuid) -> ControllerResponse {
    client
        .request(
            ControllerRequest::Heartbeat {
                id,
                incarnation,
                caught_up: true,
                shutting_down: false,
            },
            TIMEOUT,
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_forms_fences_fails_over_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(id, &voters, root.path()).await);
    }
    let client = QuorumClient::new(voters.clone());
    let incarnations: BTreeMap<i32, Uuid> = (1..=3).map(|id| (id, Uuid::new_v4())).collect();
    for (&id, &incarnation) in &incarnations {
        let response = client
            .request(
                ControllerRequest::Register {
                    command: ControllerCommand::RegisterBroker {
                        id,
                        host: "127.0.0.1".into(),
                        port: 9000 + id as u16,
                        rack: None,
                        incarnation,
                    },
                    raft_address: voters[&(id as u64)].clone(),
                },
                TIMEOUT,
            )
            .await
            .unwrap();
        assert!(
            matches!(response, ControllerResponse::Reply(_)),
            "{response:?}"
        );
        let response = heartbeat(&client, id, incarnation).await;
        assert_eq!(
            response,
            ControllerResponse::Heartbeat {
                registered: true,
                fenced: false,
                shutdown_complete: false
            }
        );
    }
    let reply = client
        .request(
            ControllerRequest::Write(ControllerCommand::CreateTopics {
                topics: vec![NewTopic {
                    name: "orders".into(),
                    id: Uuid::new_v4(),
                    partitions: 3,
                    replication_factor: 3,
                    assignments: Vec::new(),
                    configs: BTreeMap::new(),
                }],
            }),
            TIMEOUT,
        )
        .await
        .unwrap();
    assert!(
        matches!(&reply, ControllerResponse::Reply(ControllerReply::Results(r)) if r[0].is_ok()),
        "{reply:?}"
    );
    for node in nodes.values() {
        let metadata = node.metadata.clone();
        wait_until("the topic on every node", || {
            metadata.borrow().image.topic("orders").is_some()
        })
        .await;
    }

    // Stop the Raft leader's node. Its broker stops heartbeating too; the others keep on.
    let raft_leader = nodes[&1].raft.metrics().borrow().current_leader.unwrap();
    let stopped = nodes.remove(&raft_leader).unwrap();
    stopped.shutdown().await;
    let survivors: Vec<i32> = incarnations
        .keys()
        .copied()
        .filter(|&id| id as u64 != raft_leader)
        .collect();
    let observer = nodes.values().next().unwrap().metadata.clone();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        for &id in &survivors {
            heartbeat(&client, id, incarnations[&id]).await;
        }
        let image = observer.borrow().image.clone();
        let dead = raft_leader as i32;
        let fenced = image.brokers[&dead].fenced;
        let moved = image
            .topic("orders")
            .unwrap()
            .partitions
            .iter()
            .all(|p| p.leader != dead && p.leader != NO_LEADER && !p.isr.contains(&dead));
        if fenced && moved {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no failover: {image:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Restart it from its directory: it rebuilds the image and catches up.
    let restarted = start(raft_leader, &voters, root.path()).await;
    let metadata = restarted.metadata.clone();
    wait_until("the restarted node to see the fence", || {
        let image = metadata.borrow().image.clone();
        image.topic("orders").is_some() && image.brokers[&(raft_leader as i32)].fenced
    })
    .await;
    restarted.shutdown().await;
    for (_, node) in nodes {
        node.shutdown().await;
    }
}
