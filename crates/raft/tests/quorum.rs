//! Three quorum nodes on loopback: formation, broker registration and fencing, topic
//! creation replicated to every image, losing the Raft leader, and a restart that
//! rebuilds the image from disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod common;

use common::{
    create_topic_request, free_port, register_broker, start_node, three_nodes, wait_until,
};
use strand_metadata::{ControllerCommand, ControllerReply, NewTopic, NO_LEADER};
use strand_raft::client::QuorumClient;
use strand_raft::node::QuorumNode;
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(20);

async fn start(id: u64, voters: &BTreeMap<u64, String>, root: &Path) -> QuorumNode {
    start_node(id, voters, root, None).await
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
    let client = QuorumClient::new(voters.clone(), None);
    let incarnations: BTreeMap<i32, Uuid> = (1..=3).map(|id| (id, Uuid::new_v4())).collect();
    for (&id, &incarnation) in &incarnations {
        register(&client, &voters, id, incarnation).await;
        let response = heartbeat(&client, id, incarnation).await;
        assert!(
            matches!(
                response,
                ControllerResponse::Heartbeat {
                    registered: true,
                    fenced: false,
                    shutdown_complete: false,
                    metadata_index,
                } if metadata_index > 0
            ),
            "{response:?}"
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

/// The quorum port under a flood: frames over the cap are closed, huge announced frames
/// that stall hold no memory, and more idle connections than the port admits do not
/// keep a broker from registering (before: 1,100 idle sockets locked it out for 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_quorum_port_still_serves_its_peers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let root = tempfile::tempdir().unwrap();
    let voters: BTreeMap<u64, String> = BTreeMap::from([(1, format!("127.0.0.1:{}", free_port()))]);
    let node = start(1, &voters, root.path()).await;
    let address = voters[&1].clone();
    let register = |id: i32| ControllerRequest::Register {
        command: ControllerCommand::RegisterBroker {
            id,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            incarnation: Uuid::new_v4(),
            listeners: Vec::new(),
            unclean_shutdown: false,
        },
        raft_address: address.clone(),
        directory_id: Uuid::new_v4(),
    };
    let client = QuorumClient::new(voters.clone(), None);
    client.request(register(1), TIMEOUT).await.unwrap();

    let mut oversized = Vec::new();
    for _ in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(&(200u32 << 20).to_be_bytes())
            .await
            .unwrap();
        oversized.push(stream);
    }
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(&strand_raft::rpc::FRAME_MAX_BYTES.to_be_bytes())
            .await
            .unwrap();
        stream.write_all(b"{\"Vote\":").await.unwrap();
        stalled.push(stream);
    }
    let mut idle = Vec::new();
    for _ in 0..1_100 {
        idle.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    for stream in &mut oversized {
        let mut buffer = [0u8; 8];
        let read = tokio::time::timeout(TIMEOUT, stream.read(&mut buffer)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "a frame over the cap closes its connection"
        );
    }
    // Long enough for the flood to count as idle, so a live peer may evict it.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let newcomer = QuorumClient::new(voters.clone(), None);
    newcomer
        .request(register(2), Duration::from_secs(5))
        .await
        .expect("a broker registers through the flood");
    assert!(matches!(
        newcomer
            .request(
                ControllerRequest::Heartbeat {
                    id: 2,
                    incarnation: Uuid::new_v4(),
                    caught_up: true,
                    shutting_down: false,
                },
                Duration::from_secs(5),
            )
            .await
            .unwrap(),
        ControllerResponse::Heartbeat { .. }
    ));
    drop((oversized, stalled, idle));
    node.shutdown().await;
}

/// A broker registered with another node's quorum address (here the only voter's own):
/// the leader's appends to it as a learner reach the leader itself, which refuses them as
/// meant for another node. Before, the leader took its own appends as a follower does,
/// and openraft stopped on its assertion that a leader has no follower's work (in a
/// release build, without the assertion, it would act on them as both): no controller
/// answered. Addressed elsewhere, the same mistake would count one node's
/// acknowledgements as another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_registered_with_another_nodes_quorum_address_stops_nothing() {
    let root = tempfile::tempdir().unwrap();
    let voters: BTreeMap<u64, String> = BTreeMap::from([(1, format!("127.0.0.1:{}", free_port()))]);
    let node = start(1, &voters, root.path()).await;
    let client = QuorumClient::new(voters.clone(), None);
    let incarnation = Uuid::new_v4();
    register(&client, &voters, 1, incarnation).await;
    heartbeat(&client, 1, incarnation).await; // unfenced: the topic's replica
                                              // Broker 2 names node 1's quorum address as its own.
    register_broker(
        &client,
        2,
        Uuid::new_v4(),
        voters[&1].clone(),
        Uuid::new_v4(),
    )
    .await;
    // The leader's replication to "node 2" runs for many heartbeats.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reply = client
        .request(create_topic_request("after", 1, 1), TIMEOUT)
        .await
        .unwrap();
    assert!(
        matches!(&reply, ControllerResponse::Reply(ControllerReply::Results(r)) if r[0].is_ok()),
        "{reply:?}"
    );
    node.shutdown().await;
}

async fn register(
    client: &QuorumClient,
    voters: &BTreeMap<u64, String>,
    id: i32,
    incarnation: Uuid,
) {
    let address = voters[&(id as u64)].clone();
    register_broker(client, id, incarnation, address, Uuid::new_v4()).await;
}

async fn create_topic(client: &QuorumClient, name: &str, partitions: i32) -> ControllerResponse {
    client
        .request(create_topic_request(name, partitions, 3), TIMEOUT)
        .await
        .unwrap()
}

/// The metadata log holds decided records: concurrent writes decided one after another
/// without waiting for each other's commit, a topic and a fence too large for one log
/// entry (stored in parts, applied whole), and every node's image equal, after a
/// restart of the whole quorum too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_concurrent_decisions_replay_to_one_image_on_every_node() {
    let root = tempfile::tempdir().unwrap();
    let (voters, nodes) = three_nodes(root.path()).await;
    let client = std::sync::Arc::new(QuorumClient::new(voters.clone(), None));
    let incarnations: BTreeMap<i32, Uuid> = (1..=3).map(|id| (id, Uuid::new_v4())).collect();
    for (&id, &incarnation) in &incarnations {
        register(&client, &voters, id, incarnation).await;
        heartbeat(&client, id, incarnation).await;
    }
    // Brokers 1 and 2 stay alive; broker 3 stops heartbeating after the topics exist.
    let beating = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let heartbeats = {
        let (client, beating) = (client.clone(), beating.clone());
        let incarnations = incarnations.clone();
        tokio::spawn(async move {
            loop {
                for (&id, &incarnation) in &incarnations {
                    if id != 3 || beating.load(std::sync::atomic::Ordering::Relaxed) {
                        heartbeat(&client, id, incarnation).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    const BIG: i32 = 20_000; // about 2 MiB of records: several entries of 512 KiB
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..40 {
        let client = client.clone();
        writes.spawn(async move { create_topic(&client, &format!("small-{i}"), 2).await });
    }
    {
        let client = client.clone();
        writes.spawn(async move { create_topic(&client, "big", BIG).await });
    }
    while let Some(reply) = writes.join_next().await {
        let reply = reply.unwrap();
        assert!(
            matches!(&reply, ControllerResponse::Reply(ControllerReply::Results(r)) if r[0].is_ok()),
            "{reply:?}"
        );
    }
    for node in &nodes {
        let metadata = node.metadata.clone();
        wait_until("every topic on every node", || {
            let image = &metadata.borrow().image;
            image.topics.len() == 41 && image.topic("big").unwrap().partitions.len() == BIG as usize
        })
        .await;
    }

    // Fencing broker 3 moves about 6,700 leaderships: more records than one entry holds.
    beating.store(false, std::sync::atomic::Ordering::Relaxed);
    for node in &nodes {
        let metadata = node.metadata.clone();
        wait_until("broker 3 fenced and leading nothing, on every node", || {
            let image = &metadata.borrow().image;
            image.brokers[&3].fenced
                && image
                    .topics
                    .values()
                    .flat_map(|t| &t.partitions)
                    .all(|p| p.leader != 3 && !p.isr.contains(&3))
        })
        .await;
    }
    heartbeats.abort();
    let images: Vec<_> = nodes
        .iter()
        .map(|n| n.metadata.borrow().image.clone())
        .collect();
    assert!(images.iter().all(|image| image.topics == images[0].topics));

    // The whole quorum restarts from its directories and replays to the same image.
    let before = images[0].topics.clone();
    for node in nodes {
        node.shutdown().await;
    }
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start(id, &voters, root.path()).await);
    }
    for node in &nodes {
        let metadata = node.metadata.clone();
        wait_until("the image replayed after the restart", || {
            metadata.borrow().image.topics == before
        })
        .await;
    }
    for node in nodes {
        node.shutdown().await;
    }
}

/// A decision that changes nothing is answered only once what it was decided on has
/// applied: of concurrent CreateTopics of one name, one creates it and the others hear
/// TOPIC_ALREADY_EXISTS, each only when the topic is in the active controller's image
/// (before, a duplicate could be answered while the creation was still uncommitted, and
/// lost with a leadership change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_changes_nothing_waits_for_what_it_relied_on() {
    let root = tempfile::tempdir().unwrap();
    let (voters, nodes) = three_nodes(root.path()).await;
    let client = std::sync::Arc::new(QuorumClient::new(voters.clone(), None));
    for id in 1..=3 {
        let incarnation = Uuid::new_v4();
        register(&client, &voters, id, incarnation).await;
        heartbeat(&client, id, incarnation).await;
    }
    let images: Vec<_> = nodes.iter().map(|n| n.metadata.clone()).collect();
    for round in 0..5 {
        let name = format!("dup-{round}");
        let mut writes = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let (client, name, images) = (client.clone(), name.clone(), images.clone());
            writes.spawn(async move {
                let reply = create_topic(&client, &name, 1).await;
                let ControllerResponse::Reply(ControllerReply::Results(results)) = &reply else {
                    panic!("{reply:?}")
                };
                let seen = images
                    .iter()
                    .any(|image| image.borrow().image.topic(&name).is_some());
                (results[0].code, seen)
            });
        }
        let mut created = 0;
        while let Some(outcome) = writes.join_next().await {
            let (code, seen) = outcome.unwrap();
            match code {
                0 => created += 1,
                36 => assert!(
                    seen,
                    "TOPIC_ALREADY_EXISTS before the topic was applied anywhere"
                ),
                other => panic!("error {other}"),
            }
        }
        assert_eq!(created, 1);
    }
    for node in nodes {
        node.shutdown().await;
    }
}

/// The active controller answers `client` (DescribeQuorum) within `deadline`.
async fn assert_answers(client: &QuorumClient, deadline: Duration, what: &str) {
    let answer = client
        .request(ControllerRequest::DescribeQuorum, deadline)
        .await;
    assert!(
        matches!(answer, Ok(ControllerResponse::Quorum(_))),
        "{what}: {answer:?}"
    );
}

/// A controller that accepts connections and never answers (frozen, or cut off after the
/// handshake): the kernel completes connections on a listener nobody accepts from.
fn frozen_controller() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (listener, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_the_quorum_past_a_frozen_controller_within_a_heartbeats_deadline() {
    let root = tempfile::tempdir().unwrap();
    // The quorum: voters 1 and 3 on loopback.
    let voters: BTreeMap<u64, String> = [1, 3]
        .into_iter()
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let _nodes = [
        start(1, &voters, root.path()).await,
        start(3, &voters, root.path()).await,
    ];
    assert_answers(
        &QuorumClient::new(voters.clone(), None),
        TIMEOUT,
        "the quorum",
    )
    .await;
    // A broker's heartbeat has one session timeout; here 2 s. Before, a client without a
    // leader hint always tried the second controller first and gave that one attempt the
    // whole deadline, so a frozen controller there made every heartbeat fail (and the
    // new leader fenced every broker). Two layouts: the frozen one second, then first.
    let (_frozen, frozen_address) = frozen_controller();
    let deadline = Duration::from_secs(2);
    for frozen_id in [2, 1] {
        let mut controllers = BTreeMap::new();
        let mut real = voters.values();
        for id in 1..=3 {
            let address = if id == frozen_id {
                frozen_address.clone()
            } else {
                real.next().unwrap().clone()
            };
            controllers.insert(id, address);
        }
        let client = QuorumClient::new(controllers, None);
        let what = format!("frozen controller {frozen_id}");
        assert_answers(&client, deadline, &what).await;
    }
}
