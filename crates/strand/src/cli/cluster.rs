//! `strand cluster info`: the cluster at a glance, as Metadata shows it: its id, the
//! controller, the brokers, how many topics and partitions it holds and which partitions
//! are under-replicated or offline.

use serde::Serialize;

use super::client::Client;
use super::output::{id_list, print_json, table};
use super::Target;

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Serialize)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Replicas it hosts and partitions it leads.
    pub replicas: usize,
    pub leaders: usize,
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

/// The cluster as Metadata shows it.
#[derive(Debug, Serialize)]
pub struct ClusterState {
    pub cluster_id: String,
    pub controller: i32,
    pub brokers: Vec<Broker>,
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
            replicas: 0,
            leaders: 0,
        })
        .collect();
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
            if entry.leader < 0 {
                offline.push(entry);
            } else if entry.isr.len() < entry.replicas.len() {
                under_replicated.push(entry);
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
        topics: metadata.topics.iter().filter(|t| t.error_code == 0).count(),
        partitions,
        under_replicated,
        offline,
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
        topics,
        partitions,
        under_replicated,
        offline,
    } = state;
    println!("Cluster id:  {cluster_id}");
    println!("Controller:  {controller}");
    println!("Topics:      {topics} ({partitions} partitions)\n");
    let rows = brokers
        .iter()
        .map(|b| {
            vec![
                b.id.to_string(),
                b.host.clone(),
                b.port.to_string(),
                b.rack.clone().unwrap_or_else(|| "-".into()),
                if b.id == controller { "yes" } else { "" }.to_string(),
            ]
        })
        .collect();
    println!(
        "{}",
        table(&["ID", "HOST", "PORT", "RACK", "CONTROLLER"], rows)
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
