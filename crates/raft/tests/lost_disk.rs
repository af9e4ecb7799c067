//! A voter that loses its metadata disk comes back on a new directory (KIP-853's replica
//! key, `strand_raft::replica_keys`): the others still address it by the old one until its
//! registration records the new one; then it takes the log from the leader and votes
//! again, so the quorum elects a leader with it when the old leader stops. (That it takes
//! no part before is shown deterministically by the simulator's
//! `a_voter_that_lost_its_disk_does_not_vote_until_it_has_the_log_back`.) The brokers
//! register their quorum address spelled otherwise than the voters named at start (a
//! host name there, an address here, as `--controllers` and a listener may differ): the
//! directories are recorded all the same.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod common;

use common::{create_topic_request, free_port, start_keyed, wait_until};
use strand_metadata::ControllerReply;
use strand_raft::client::QuorumClient;
use strand_raft::node::QuorumNode;
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn start(
    id: u64,
    voters: &BTreeMap<u64, String>,
    root: &Path,
    directory_id: Uuid,
) -> QuorumNode {
    start_keyed(id, voters, &voters[&id], root, None, directory_id).await
}

/// The directory `node`'s membership records for `member`.
fn recorded(node: &QuorumNode, member: u64) -> Option<Uuid> {
    let metrics = node.raft.metrics();
    let metrics = metrics.borrow();
    let membership = metrics.membership_config.membership();
    membership.get_node(&member).map(|peer| peer.directory_id)
}

fn leader_of(node: &QuorumNode) -> Option<u64> {
    node.raft.metrics().borrow().current_leader
}

/// The brokers of `nodes` (incarnations and directories as given) and the quorum.
struct Cluster {
    nodes: BTreeMap<u64, QuorumNode>,
    incarnations: BTreeMap<u64, Uuid>,
    directories: BTreeMap<u64, Uuid>,
}

impl Cluster {
    /// Registers broker `id` of a node at `address` (`127.0.0.1:PORT`), as a new
    /// incarnation, naming it `localhost:PORT` (the client asks again while the
    /// controller answers unavailable, as a node back on a new disk is while its last
    /// acknowledgement on the old one is recent).
    async fn register(&mut self, client: &QuorumClient, id: u64, address: &str) {
        let incarnation = Uuid::new_v4();
        let directory = self.directories[&id];
        let reply = register_request(client, id, incarnation, address, directory, TIMEOUT).await;
        assert!(
            matches!(reply, Ok(ControllerResponse::Reply(_))),
            "{reply:?}"
        );
        self.incarnations.insert(id, incarnation);
    }

    async fn heartbeat_all(&self, client: &QuorumClient) {
        for (&id, node) in &self.nodes {
            if let Some(&incarnation) = self.incarnations.get(&id) {
                heartbeat(client, node, id, incarnation).await;
            }
        }
    }
}

/// Registers broker `id` at `address` (spelled `localhost:PORT`) on `directory`.
async fn register_request(
    client: &QuorumClient,
    id: u64,
    incarnation: Uuid,
    address: &str,
    directory: Uuid,
    timeout: Duration,
) -> anyhow::Result<ControllerResponse> {
    let address = address.replace("127.0.0.1", "localhost");
    let request = common::register_request(id as i32, incarnation, address, directory);
    client.request(request, timeout).await
}

/// Creates `name`, the brokers heartbeating (unfenced), retrying while leadership moves.
async fn create_topic(client: &QuorumClient, cluster: &Cluster, name: &str) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        cluster.heartbeat_all(client).await;
        let reply = client
            .request(create_topic_request(name, 1, 1), TIMEOUT)
            .await;
        match &reply {
            Ok(ControllerResponse::Reply(ControllerReply::Results(r))) if r[0].is_ok() => return,
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            _ => panic!("cannot create {name}: {reply:?}"),
        }
    }
}

/// Heartbeats broker `id` as a broker does: caught up once its node's image holds its
/// registration.
async fn heartbeat(client: &QuorumClient, node: &QuorumNode, id: u64, incarnation: Uuid) {
    let caught_up = node
        .metadata
        .borrow()
        .image
        .brokers
        .get(&(id as i32))
        .is_some_and(|b| b.incarnation == incarnation);
    let request = ControllerRequest::Heartbeat {
        id: id as i32,
        incarnation,
        caught_up,
        shutting_down: false,
    };
    let _ = client.request(request, TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_back_on_a_new_disk_takes_part_once_its_registration_records_it() {
    let root = tempfile::tempdir().unwrap();
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let mut cluster = Cluster {
        nodes: BTreeMap::new(),
        incarnations: BTreeMap::new(),
        directories: (1..=3).map(|id| (id, Uuid::new_v4())).collect(),
    };
    for id in 1..=3 {
        let node = start(id, &voters, root.path(), cluster.directories[&id]).await;
        cluster.nodes.insert(id, node);
    }
    let client = QuorumClient::new(voters.clone(), None);
    for id in 1..=3u64 {
        cluster.register(&client, id, &voters[&id]).await;
    }
    for node in cluster.nodes.values() {
        wait_until("every voter's directory recorded", || {
            (1..=3).all(|id| recorded(node, id) == Some(cluster.directories[&id]))
        })
        .await;
    }
    create_topic(&client, &cluster, "before").await;

    // A follower loses its disk and comes back on a new one; its broker is not running
    // yet, so nothing has recorded the new directory.
    let leader = leader_of(&cluster.nodes[&1]).expect("a leader");
    let victim = (1..=3).find(|&id| id != leader).unwrap();
    let old = cluster.directories[&victim];
    // A second process with the victim's node id, on another directory, is refused while
    // the victim acknowledges the leader on its recorded one.
    let impostor = register_request(
        &client,
        victim,
        Uuid::new_v4(),
        &voters[&victim],
        Uuid::new_v4(),
        Duration::from_secs(2),
    )
    .await;
    assert!(
        matches!(&impostor, Err(why) if why.to_string().contains("two processes with one node id")),
        "{impostor:?}"
    );
    assert_eq!(recorded(&cluster.nodes[&leader], victim), Some(old));
    cluster.nodes.remove(&victim).unwrap().shutdown().await;
    cluster.incarnations.remove(&victim);
    let dir = root.path().join(format!("node-{victim}"));
    std::fs::remove_dir_all(&dir).unwrap();
    // As its broker marks a directory made again while the data directory survived.
    std::fs::create_dir_all(&dir).unwrap();
    strand_raft::replica_keys::mark_replaced(&dir).unwrap();
    let new = Uuid::new_v4();
    cluster.directories.insert(victim, new);
    let node = start(victim, &voters, root.path(), new).await;
    cluster.nodes.insert(victim, node);
    create_topic(&client, &cluster, "while-replaced").await;
    assert_eq!(recorded(&cluster.nodes[&leader], victim), Some(old));
    // What its metrics show (strand_raft_awaiting_directory_record, the refusals).
    assert!(cluster.nodes[&victim].awaiting_directory_record());
    wait_until("the leader's appends refused", || {
        cluster.nodes[&victim].keys.refusals() > 0
    })
    .await;

    // Its broker registers: the new directory is recorded, and the node takes the log.
    cluster.register(&client, victim, &voters[&victim]).await;
    for node in cluster.nodes.values() {
        wait_until("the new directory recorded", || {
            recorded(node, victim) == Some(new)
        })
        .await;
    }
    wait_until("the node takes part", || {
        !cluster.nodes[&victim].awaiting_directory_record()
    })
    .await;
    let metadata = cluster.nodes[&victim].metadata.clone();
    wait_until("the new disk holds the log", || {
        let image = &metadata.borrow().image;
        image.topic("before").is_some() && image.topic("while-replaced").is_some()
    })
    .await;

    // It votes again: with the leader gone, it and the third voter elect one of them.
    cluster.nodes.remove(&leader).unwrap().shutdown().await;
    cluster.incarnations.remove(&leader);
    let rest: Vec<u64> = cluster.nodes.keys().copied().collect();
    wait_until("a leader among the two left", || {
        cluster
            .nodes
            .values()
            .all(|n| leader_of(n).is_some_and(|l| rest.contains(&l)))
    })
    .await;
    let client = QuorumClient::new(
        rest.iter().map(|id| (*id, voters[id].clone())).collect(),
        None,
    );
    create_topic(&client, &cluster, "after").await;
    for node in cluster.nodes.values() {
        let metadata = node.metadata.clone();
        wait_until("both topics on the two left", || {
            let image = &metadata.borrow().image;
            image.topic("before").is_some() && image.topic("after").is_some()
        })
        .await;
    }
    for node in std::mem::take(&mut cluster.nodes).into_values() {
        node.shutdown().await;
    }
}
