//! `strand cluster info`: the cluster at a glance, as Metadata shows it: its id, the
//! controller, the brokers, how many topics and partitions it holds and which partitions
//! are under-replicated or offline.

use serde_json::json;

use super::client::Client;
use super::output::{id_list, print_json, table};
use super::Target;

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    target: Target,
}

struct Broker {
    id: i32,
    host: String,
    port: i32,
    rack: Option<String>,
}

/// A partition that is not fully replicated: (topic, partition, replicas, isr).
type Degraded = (String, i32, Vec<i32>, Vec<i32>);

pub async fn info(args: InfoArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    // Metadata carries all of it: the cluster id, the controller id clients are given
    // (DescribeCluster answers the same) and the live brokers.
    let metadata = client.metadata(None).await?;
    let cluster_id = metadata
        .cluster_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let controller = metadata.controller_id.0;
    let mut brokers: Vec<Broker> = metadata
        .brokers
        .iter()
        .map(|b| Broker {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let mut partitions = 0usize;
    let mut under_replicated: Vec<Degraded> = Vec::new();
    let mut offline: Vec<Degraded> = Vec::new();
    for topic in metadata.topics.iter().filter(|t| t.error_code == 0) {
        let name = topic
            .name
            .as_ref()
            .map(|n| n.0.to_string())
            .unwrap_or_default();
        for partition in &topic.partitions {
            partitions += 1;
            let replicas: Vec<i32> = partition.replica_nodes.iter().map(|r| r.0).collect();
            let isr: Vec<i32> = partition.isr_nodes.iter().map(|r| r.0).collect();
            let entry = (name.clone(), partition.partition_index, replicas, isr);
            if partition.leader_id.0 < 0 {
                offline.push(entry);
            } else if entry.3.len() < entry.2.len() {
                under_replicated.push(entry);
            }
        }
    }
    under_replicated.sort();
    offline.sort();
    let topics = metadata.topics.iter().filter(|t| t.error_code == 0).count();
    if args.target.json {
        let listed = |entries: &[Degraded]| -> Vec<serde_json::Value> {
            entries
                .iter()
                .map(|(topic, partition, replicas, isr)| {
                    json!({"topic": topic, "partition": partition, "replicas": replicas, "isr": isr})
                })
                .collect()
        };
        print_json(&json!({
            "cluster_id": cluster_id,
            "controller": controller,
            "brokers": brokers.iter().map(|b| json!({
                "id": b.id, "host": b.host, "port": b.port, "rack": b.rack,
            })).collect::<Vec<_>>(),
            "topics": topics,
            "partitions": partitions,
            "under_replicated": listed(&under_replicated),
            "offline": listed(&offline),
        }));
        return Ok(());
    }
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
            .map(|(topic, partition, replicas, isr)| {
                vec![
                    topic.clone(),
                    partition.to_string(),
                    id_list(replicas),
                    id_list(isr),
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
