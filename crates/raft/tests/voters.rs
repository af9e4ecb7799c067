//! Voters come and go (KIP-853's AddRaftVoter and RemoveRaftVoter, UnregisterController):
//! a caught-up learner is promoted with its directory id and stays a voter across a
//! restart; refusals carry Kafka's errors; removing the leader hands leadership to the
//! others, which keep deciding; a node that is neither voter nor broker is forgotten.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

mod common;

use common::{
    create_topic_request, free_port, register_broker, start_member, three_nodes, wait_until,
};
use strand_metadata::{ControllerCommand, ControllerReply};
use strand_raft::client::QuorumClient;
use strand_raft::node::QuorumNode;
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use strand_raft::voters::VoterChangeError;
use uuid::Uuid;

const TIMEOUT: Duration = Duration::from_secs(30);

struct Member {
    address: String,
    directory_id: Uuid,
}

async fn register(client: &QuorumClient, id: u64, member: &Member) -> Uuid {
    let incarnation = Uuid::new_v4();
    let address = member.address.clone();
    register_broker(client, id as i32, incarnation, address, member.directory_id).await;
    incarnation
}

async fn change(client: &QuorumClient, request: ControllerRequest) -> Result<(), VoterChangeError> {
    match client.request(request, TIMEOUT).await.unwrap() {
        ControllerResponse::VoterChange(outcome) => outcome,
        other => panic!("answered {other:?}"),
    }
}

fn port_of(address: &str) -> u16 {
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

fn voters_of(node: &QuorumNode) -> BTreeSet<u64> {
    node.raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect()
}

fn is_member(node: &QuorumNode, id: u64) -> bool {
    node.raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .get_node(&id)
        .is_some()
}

async fn start(
    id: u64,
    voters: &BTreeMap<u64, String>,
    members: &BTreeMap<u64, Member>,
    root: &Path,
) -> QuorumNode {
    start_member(id, voters, &members[&id].address, root, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voters_are_added_and_removed_and_the_quorum_keeps_deciding() {
    let root = tempfile::tempdir().unwrap();
    let members: BTreeMap<u64, Member> = (1..=5)
        .map(|id| {
            let member = Member {
                address: format!("127.0.0.1:{}", free_port()),
                directory_id: Uuid::new_v4(),
            };
            (id, member)
        })
        .collect();
    // Nodes 1-3 are the voters named at start; 4 and 5 join as learners.
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, members[&id].address.clone()))
        .collect();
    let mut nodes = BTreeMap::new();
    for id in 1..=5 {
        nodes.insert(id, start(id, &voters, &members, root.path()).await);
    }
    let client = QuorumClient::new(voters.clone(), None).following(nodes[&5].raft.metrics());
    let mut incarnations = BTreeMap::new();
    for (&id, member) in &members {
        incarnations.insert(id, register(&client, id, member).await);
    }
    let leader_of = |node: &QuorumNode| node.raft.metrics().borrow().current_leader;
    for node in nodes.values() {
        wait_until("every member known everywhere", || {
            (1..=5).all(|id| is_member(node, id))
        })
        .await;
    }

    // Refusals, as Kafka's.
    let add = |id: u64, directory_id: Uuid, port: u16| ControllerRequest::AddVoter {
        id,
        directory_id,
        listener_ports: vec![port],
    };
    let port4 = port_of(&members[&4].address);
    assert!(matches!(
        change(
            &client,
            add(2, members[&2].directory_id, port_of(&members[&2].address))
        )
        .await,
        Err(VoterChangeError::Duplicate(_))
    ));
    assert_eq!(
        change(&client, add(4, Uuid::nil(), port4)).await,
        Err(VoterChangeError::Invalid(
            "Add voter request didn't include a valid voter".into()
        ))
    );
    assert!(matches!(
        change(&client, add(4, Uuid::new_v4(), port4)).await,
        Err(VoterChangeError::TimedOut(message)) if message.contains("lagging behind")
    ));
    assert!(matches!(
        change(&client, add(4, members[&4].directory_id, 1)).await,
        Err(VoterChangeError::Invalid(_))
    ));
    assert!(matches!(
        change(&client, add(9, Uuid::new_v4(), 1)).await,
        Err(VoterChangeError::TimedOut(_))
    ));

    // Node 4 is promoted once the leader has seen it caught up.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match change(&client, add(4, members[&4].directory_id, port4)).await {
            Ok(()) => break,
            Err(VoterChangeError::TimedOut(message)) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(%message, "not yet");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("adding voter 4: {error:?}"),
        }
    }
    for node in nodes.values() {
        wait_until("four voters everywhere", || {
            voters_of(node) == BTreeSet::from([1, 2, 3, 4])
        })
        .await;
    }
    let quorum = match client
        .request(ControllerRequest::DescribeQuorum, TIMEOUT)
        .await
        .unwrap()
    {
        ControllerResponse::Quorum(quorum) => quorum,
        other => panic!("{other:?}"),
    };
    let described: BTreeMap<i32, Uuid> = quorum
        .voters
        .iter()
        .map(|v| (v.id, v.directory_id))
        .collect();
    let registered: BTreeMap<i32, Uuid> = (1..=4)
        .map(|id| (id as i32, members[&id].directory_id))
        .collect();
    assert_eq!(
        described, registered,
        "each voter with the directory id it registered"
    );
    assert_eq!(
        quorum.observers.iter().map(|o| o.id).collect::<Vec<_>>(),
        vec![5]
    );

    // Node 4 restarts: not among the voters named at start, still a voter.
    nodes.remove(&4).unwrap().shutdown().await;
    nodes.insert(4, start(4, &voters, &members, root.path()).await);
    wait_until("node 4 a voter after its restart", || {
        voters_of(&nodes[&4]) == BTreeSet::from([1, 2, 3, 4])
    })
    .await;

    // Removing: the exact replica, then the leader itself.
    let remove = |id: u64, directory_id: Uuid| ControllerRequest::RemoveVoter { id, directory_id };
    assert!(matches!(
        change(&client, remove(2, Uuid::new_v4())).await,
        Err(VoterChangeError::NotFound(_))
    ));
    let leader = leader_of(&nodes[&5]).unwrap();
    change(&client, remove(leader, members[&leader].directory_id))
        .await
        .unwrap();
    let rest: BTreeSet<u64> = (1..=4).filter(|&id| id != leader).collect();
    for node in nodes.values() {
        wait_until("the leader removed everywhere", || voters_of(node) == rest).await;
    }
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !leader_of(&nodes[&5]).is_some_and(|l| rest.contains(&l)) {
        if tokio::time::Instant::now() > deadline {
            for (id, node) in &nodes {
                let m = node.raft.metrics().borrow().clone();
                eprintln!(
                    "node {id}: {:?} leader {:?} term {} membership {:?}",
                    m.state, m.current_leader, m.current_term, m.membership_config
                );
            }
            panic!("no new leader among {rest:?} (removed {leader})");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        is_member(&nodes[&5], leader),
        "a removed voter stays a learner"
    );
    // The brokers heartbeat (unfenced), so the new leader can place a topic.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        for (&id, &incarnation) in &incarnations {
            let heartbeat = ControllerRequest::Heartbeat {
                id: id as i32,
                incarnation,
                caught_up: true,
                shutting_down: false,
            };
            client.request(heartbeat, TIMEOUT).await.unwrap();
        }
        let reply = client
            .request(create_topic_request("after-removal", 1, 1), TIMEOUT)
            .await
            .unwrap();
        match &reply {
            ControllerResponse::Reply(ControllerReply::Results(r)) if r[0].is_ok() => break,
            _ if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            _ => panic!("the new leader cannot create a topic: {reply:?}"),
        }
    }
    for node in nodes.values() {
        let metadata = node.metadata.clone();
        wait_until("the topic everywhere, the removed voter too", || {
            metadata.borrow().image.topic("after-removal").is_some()
        })
        .await;
    }

    // UnregisterController: voters and brokers are refused, strangers are unknown, and a
    // learner that is no broker any more is forgotten.
    let unregister = |id: u64| ControllerRequest::UnregisterController { id };
    let voter = *rest.iter().next().unwrap();
    assert!(matches!(
        change(&client, unregister(voter)).await,
        Err(VoterChangeError::Invalid(_))
    ));
    assert!(matches!(
        change(&client, unregister(5)).await,
        Err(VoterChangeError::Invalid(_))
    ));
    assert_eq!(
        change(&client, unregister(9)).await,
        Err(VoterChangeError::NotRegistered(
            "Controller ID 9 is not currently registered.".into()
        ))
    );
    nodes.remove(&5).unwrap().shutdown().await;
    let reply = client
        .request(
            ControllerRequest::Write(ControllerCommand::UnregisterBroker { id: 5 }),
            TIMEOUT,
        )
        .await
        .unwrap();
    assert!(matches!(reply, ControllerResponse::Reply(_)), "{reply:?}");
    change(&client, unregister(5)).await.unwrap();
    let observer = &nodes[&voter];
    wait_until("node 5 gone from the membership", || {
        !is_member(observer, 5)
    })
    .await;
    for (_, node) in nodes {
        node.shutdown().await;
    }
}

/// A leader that finds itself outside the voters hands leadership over even when the
/// removal did not come through RemoveRaftVoter (here: proposed to Raft directly, as a
/// removal whose request timed out and committed later would be).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_outside_the_voters_resigns() {
    let root = tempfile::tempdir().unwrap();
    let (_, nodes) = three_nodes(root.path()).await;
    let nodes: BTreeMap<u64, QuorumNode> = (1..=3).zip(nodes).collect();
    let leader_of = |node: &QuorumNode| node.raft.metrics().borrow().current_leader;
    // Proposed on whichever node leads (the first election may still be settling).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let leader = loop {
        wait_until("a leader", || leader_of(&nodes[&1]).is_some()).await;
        let leader = leader_of(&nodes[&1]).unwrap();
        let removal = openraft::ChangeMembers::RemoveVoters(BTreeSet::from([leader]));
        match nodes[&leader].raft.change_membership(removal, true).await {
            Ok(_) => break leader,
            Err(error) => {
                assert!(tokio::time::Instant::now() < deadline, "{error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let rest: BTreeSet<u64> = (1..=3).filter(|&id| id != leader).collect();
    for node in nodes.values() {
        wait_until("another voter leads", || {
            leader_of(node).is_some_and(|l| rest.contains(&l))
        })
        .await;
    }
    for (_, node) in nodes {
        node.shutdown().await;
    }
}
