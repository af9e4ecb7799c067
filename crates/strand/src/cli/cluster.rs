//! `strand cluster info`: the cluster at a glance, as Metadata shows it: its id, the
//! controller, the brokers, how many topics and partitions it holds and which partitions
//! are under-replicated or offline.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
use kafka_protocol::messages::{
    ApiKey, DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
    DescribeQuorumResponse,
};
use serde::Serialize;

use super::client::{topic_name, Client};

/// The metadata log's topic, as DescribeQuorum names it.
const METADATA_TOPIC: &str = "__cluster_metadata";
use super::output::{id_list, print_json, table};
use super::Target;

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    target: Target,
}

/// A node of the cluster: a broker (in Metadata, or fenced), a controller (a voter of the
/// metadata quorum), or both.
#[derive(Debug, Serialize)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// "broker", "controller" or "broker,controller" (process.roles).
    pub roles: String,
    /// A broker: "running" (unfenced, serving) or "fenced"; a controller-only node:
    /// "leader" or "voter".
    pub state: String,
    /// Replicas it hosts and partitions it leads.
    pub replicas: usize,
    pub leaders: usize,
    /// In the metadata quorum: "leader", "voter" or "observer", and how many records of
    /// the metadata log it is behind the leader.
    pub quorum_role: Option<String>,
    pub quorum_lag: Option<i64>,
}

/// The metadata quorum as DescribeQuorum shows it.
#[derive(Debug, Serialize)]
pub struct Quorum {
    pub leader: i32,
    pub epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<i32>,
}

/// A partition that is not fully replicated, or has no leader.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Degraded {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// A partition as Metadata shows it: offline without a leader, under-replicated when led
/// with fewer replicas in sync than assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    InSync,
    UnderReplicated,
    Offline,
}

pub fn health(partition: &MetadataResponsePartition) -> Health {
    if partition.leader_id.0 < 0 {
        Health::Offline
    } else if partition.isr_nodes.len() < partition.replica_nodes.len() {
        Health::UnderReplicated
    } else {
        Health::InSync
    }
}

/// The cluster as Metadata shows it.
#[derive(Debug, Serialize)]
pub struct ClusterState {
    pub cluster_id: String,
    pub controller: i32,
    pub brokers: Vec<Broker>,
    pub quorum: Option<Quorum>,
    pub topics: usize,
    pub partitions: usize,
    pub under_replicated: Vec<Degraded>,
    pub offline: Vec<Degraded>,
}

/// Reads the cluster's state from one Metadata answer: the cluster id, the controller id
/// clients are given (DescribeCluster answers the same), the live brokers, and every
/// partition's replicas.
pub async fn cluster_state(client: &Client) -> anyhow::Result<ClusterState> {
    let metadata = client.metadata(None).await?;
    let mut brokers: Vec<Broker> = metadata
        .brokers
        .iter()
        .map(|b| Broker {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
            roles: "broker".into(),
            state: "running".into(),
            replicas: 0,
            leaders: 0,
            quorum_role: None,
            quorum_lag: None,
        })
        .collect();
    brokers.extend(fenced_brokers(client).await);
    let quorum = quorum(client, &mut brokers).await;
    brokers.sort_by_key(|b| b.id);
    let mut partitions = 0usize;
    let mut under_replicated = Vec::new();
    let mut offline = Vec::new();
    for topic in metadata.topics.iter().filter(|t| t.error_code == 0) {
        let name = topic
            .name
            .as_ref()
            .map(|n| n.0.to_string())
            .unwrap_or_default();
        for partition in &topic.partitions {
            partitions += 1;
            let entry = Degraded {
                topic: name.clone(),
                partition: partition.partition_index,
                leader: partition.leader_id.0,
                replicas: partition.replica_nodes.iter().map(|r| r.0).collect(),
                isr: partition.isr_nodes.iter().map(|r| r.0).collect(),
            };
            for broker in brokers.iter_mut() {
                broker.replicas += usize::from(entry.replicas.contains(&broker.id));
                broker.leaders += usize::from(entry.leader == broker.id);
            }
            match health(partition) {
                Health::Offline => offline.push(entry),
                Health::UnderReplicated => under_replicated.push(entry),
                Health::InSync => {}
            }
        }
    }
    under_replicated.sort();
    offline.sort();
    Ok(ClusterState {
        cluster_id: metadata
            .cluster_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        controller: metadata.controller_id.0,
        brokers,
        quorum,
        topics: metadata.topics.iter().filter(|t| t.error_code == 0).count(),
        partitions,
        under_replicated,
        offline,
    })
}

/// Brokers registered but fenced (DescribeCluster v2 and later list them; Metadata never
/// does). Nothing when the cluster cannot say.
async fn fenced_brokers(client: &Client) -> Vec<Broker> {
    let Ok(2..) = client.version(ApiKey::DescribeCluster, 2) else {
        return Vec::new();
    };
    let request = DescribeClusterRequest::default().with_include_fenced_brokers(true);
    let Ok(response) = client
        .call::<_, DescribeClusterResponse>(ApiKey::DescribeCluster, 2, &request)
        .await
    else {
        return Vec::new();
    };
    response
        .brokers
        .iter()
        .filter(|b| b.is_fenced)
        .map(|b| Broker {
            id: b.broker_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
            roles: "broker".into(),
            state: "fenced".into(),
            replicas: 0,
            leaders: 0,
            quorum_role: None,
            quorum_lag: None,
        })
        .collect()
}

/// The metadata quorum (DescribeQuorum), marking each node's place in it and adding the
/// controller-only nodes to `nodes`; None when the cluster does not answer it.
async fn quorum(client: &Client, nodes: &mut Vec<Broker>) -> Option<Quorum> {
    let version = client.version(ApiKey::DescribeQuorum, 2).ok()?;
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let response: DescribeQuorumResponse = client
        .call(ApiKey::DescribeQuorum, version, &request)
        .await
        .ok()?;
    if response.error_code != 0 {
        return None;
    }
    let partition = response.topics.first()?.partitions.first()?;
    if partition.error_code != 0 {
        return None;
    }
    let leader = partition.leader_id.0;
    let leader_end = partition
        .current_voters
        .iter()
        .find(|v| v.replica_id.0 == leader)
        .map_or(partition.high_watermark, |v| v.log_end_offset);
    let members = partition
        .current_voters
        .iter()
        .map(|v| (v, true))
        .chain(partition.observers.iter().map(|o| (o, false)));
    for (member, voter) in members {
        let id = member.replica_id.0;
        let role = match (id == leader, voter) {
            (true, _) => "leader",
            (false, true) => "voter",
            (false, false) => "observer",
        };
        let lag = (member.log_end_offset >= 0).then(|| (leader_end - member.log_end_offset).max(0));
        let node = match nodes.iter_mut().position(|n| n.id == id) {
            Some(index) => &mut nodes[index],
            None if voter => {
                // A controller-only node: reachable on its quorum listener.
                let endpoint = response
                    .nodes
                    .iter()
                    .find(|n| n.node_id.0 == id)
                    .and_then(|n| n.listeners.first());
                nodes.push(Broker {
                    id,
                    host: endpoint.map(|l| l.host.to_string()).unwrap_or_default(),
                    port: endpoint.map_or(0, |l| i32::from(l.port)),
                    rack: None,
                    roles: "controller".into(),
                    state: role.into(),
                    replicas: 0,
                    leaders: 0,
                    quorum_role: None,
                    quorum_lag: None,
                });
                nodes.last_mut().expect("just pushed")
            }
            None => continue,
        };
        if voter && node.roles == "broker" {
            node.roles = "broker,controller".into();
        }
        node.quorum_role = Some(role.into());
        node.quorum_lag = lag;
    }
    Some(Quorum {
        leader,
        epoch: partition.leader_epoch,
        high_watermark: partition.high_watermark,
        voters: partition
            .current_voters
            .iter()
            .map(|v| v.replica_id.0)
            .collect(),
    })
}

pub async fn info(args: InfoArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    let state = cluster_state(&client).await?;
    if args.target.json {
        print_json(&serde_json::to_value(&state)?);
        return Ok(());
    }
    let ClusterState {
        cluster_id,
        controller,
        brokers,
        quorum,
        topics,
        partitions,
        under_replicated,
        offline,
    } = state;
    println!("Cluster id:  {cluster_id}");
    println!("Controller:  {controller}");
    if let Some(quorum) = quorum {
        println!(
            "Quorum:      leader {}, epoch {}, voters {}",
            quorum.leader,
            quorum.epoch,
            id_list(&quorum.voters)
        );
    }
    println!("Topics:      {topics} ({partitions} partitions)\n");
    let rows = brokers
        .iter()
        .map(|b| {
            vec![
                b.id.to_string(),
                b.roles.clone(),
                b.state.clone(),
                b.host.clone(),
                b.port.to_string(),
                b.rack.clone().unwrap_or_else(|| "-".into()),
                if b.id == controller { "yes" } else { "" }.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        table(
            &["ID", "ROLES", "STATE", "HOST", "PORT", "RACK", "CONTROLLER"],
            rows
        )
    );
    for (title, entries) in [
        ("Under-replicated", &under_replicated),
        ("Offline", &offline),
    ] {
        if entries.is_empty() {
            println!("\n{title} partitions: none");
            continue;
        }
        println!("\n{title} partitions:");
        let rows = entries
            .iter()
            .map(|d| {
                vec![
                    d.topic.clone(),
                    d.partition.to_string(),
                    id_list(&d.replicas),
                    id_list(&d.isr),
                ]
            })
            .collect();
        println!(
            "{}",
            table(&["TOPIC", "PARTITION", "REPLICAS", "ISR"], rows)
        );
    }
    Ok(())
}
