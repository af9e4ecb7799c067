//! `strand group list|describe|reset-offsets|delete`: what kafka-consumer-groups does,
//! without a JVM. Groups live on their coordinators, so listing asks every broker;
//! describing reads the members (DescribeGroups for classic groups, ConsumerGroupDescribe
//! for KIP-848 ones, StreamsGroupDescribe for Kafka Streams' KIP-1071 ones) and the
//! committed offsets with each partition's lag.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DeleteGroupsRequest,
    DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest,
    ListGroupsResponse, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
};
use serde::Serialize;
use serde_json::json;

use super::client::{check, kafka_error, Client, KafkaError};
use super::group_member::decode_assignment;
use super::group_offsets::{self, group_id, Offsets};
use super::offsets::{list_offsets, EARLIEST, LATEST};
use super::output::{print_json, table};
use super::Target;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const GROUP_ID_NOT_FOUND: i16 = 69;

#[derive(clap::Args, Debug)]
pub struct GroupArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(clap::Subcommand, Debug)]
enum GroupCommand {
    /// List the consumer groups of every broker.
    List,
    /// Members, assignments, committed offsets and lag of groups.
    Describe {
        #[arg(required = true)]
        groups: Vec<String>,
    },
    /// Move a group's committed offsets (the group must have no active members). Prints
    /// the plan; commits it only with --execute.
    ResetOffsets(ResetArgs),
    /// Delete groups (with their committed offsets); they must have no active members.
    Delete {
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("scope").required(true).args(["topics", "all_topics"]))]
#[command(group = clap::ArgGroup::new("target").required(true)
    .args(["to_earliest", "to_latest", "to_offset", "to_timestamp", "shift_by"]))]
struct ResetArgs {
    group: String,
    /// A topic, or TOPIC:P,P,... for some of its partitions (repeatable).
    #[arg(long = "topic")]
    topics: Vec<String>,
    /// Every topic the group has committed offsets for.
    #[arg(long)]
    all_topics: bool,
    #[arg(long)]
    to_earliest: bool,
    #[arg(long)]
    to_latest: bool,
    /// An offset, kept within each partition's log.
    #[arg(long)]
    to_offset: Option<i64>,
    /// The first offset at or after this time (ms since the epoch).
    #[arg(long)]
    to_timestamp: Option<i64>,
    /// Move the committed offsets by N (negative: back), kept within the log.
    #[arg(long, allow_negative_numbers = true)]
    shift_by: Option<i64>,
    /// Commit the plan (without it, only print it).
    #[arg(long)]
    execute: bool,
}

pub async fn run(args: GroupArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    let json_output = args.target.json;
    match args.command {
        GroupCommand::List => list(&client, json_output).await,
        GroupCommand::Describe { groups } => {
            let mut described = Vec::new();
            for group in &groups {
                described.push(describe(&client, group).await?);
            }
            if json_output {
                print_json(&serde_json::Value::Array(
                    described.iter().map(Described::to_json).collect(),
                ));
            } else {
                for group in &described {
                    println!("{}\n", group.to_table());
                }
            }
            Ok(())
        }
        GroupCommand::ResetOffsets(reset) => reset_offsets(&client, reset, json_output).await,
        GroupCommand::Delete { groups } => delete(&client, &groups).await,
    }
}

/// A group as ListGroups names it.
#[derive(Debug, Clone, Serialize)]
pub struct ListedGroup {
    pub group: String,
    pub state: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol_type: String,
}

/// Every group of the cluster, from each broker's ListGroups, sorted by id.
pub async fn list_groups(client: &Client) -> anyhow::Result<Vec<ListedGroup>> {
    let version = client.version(ApiKey::ListGroups, 5)?;
    let metadata = client.metadata(Some(&[])).await?;
    let mut groups = BTreeMap::new();
    for broker in &metadata.brokers {
        let response: ListGroupsResponse = client
            .call_node(
                broker.node_id.0,
                ApiKey::ListGroups,
                version,
                &ListGroupsRequest::default(),
            )
            .await?;
        check(
            response.error_code,
            None,
            &format!("listing the groups of broker {}", broker.node_id.0),
        )?;
        for g in response.groups {
            let group = g.group_id.0.to_string();
            groups.insert(
                group.clone(),
                ListedGroup {
                    group,
                    state: g.group_state.to_string(),
                    kind: g.group_type.to_lowercase(),
                    protocol_type: g.protocol_type.to_string(),
                },
            );
        }
    }
    Ok(groups.into_values().collect())
}

async fn list(client: &Client, json_output: bool) -> anyhow::Result<()> {
    let groups = list_groups(client).await?;
    if json_output {
        print_json(&serde_json::to_value(&groups)?);
    } else {
        let rows = groups
            .into_iter()
            .map(|g| vec![g.group, g.state, g.kind, g.protocol_type])
            .collect();
        println!(
            "{}",
            table(&["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"], rows)
        );
    }
    Ok(())
}

struct Member {
    member_id: String,
    client_id: String,
    host: String,
    /// topic -> partitions
    assignment: BTreeMap<String, Vec<i32>>,
}

struct OffsetRow {
    topic: String,
    partition: i32,
    committed: Option<i64>,
    log_end: Option<i64>,
    member_id: Option<String>,
}

pub struct Described {
    pub group: String,
    state: String,
    kind: &'static str,
    coordinator: i32,
    members: Vec<Member>,
    offsets: Vec<OffsetRow>,
}

impl Described {
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "group": self.group,
            "state": self.state,
            "type": self.kind,
            "coordinator": self.coordinator,
            "members": self.members.iter().map(|m| json!({
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": m.assignment.iter()
                    .map(|(topic, partitions)| json!({"topic": topic, "partitions": partitions}))
                    .collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "offsets": self.offsets.iter().map(|o| json!({
                "topic": o.topic,
                "partition": o.partition,
                "committed_offset": o.committed,
                "log_end_offset": o.log_end,
                "lag": o.lag(),
                "member_id": o.member_id,
            })).collect::<Vec<_>>(),
        })
    }

    fn to_table(&self) -> String {
        let dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_string());
        let mut printed = format!(
            "Group {} ({}, {}), coordinator {}, {} members\n\n",
            self.group,
            self.state,
            self.kind,
            self.coordinator,
            self.members.len()
        );
        let rows = self
            .offsets
            .iter()
            .map(|o| {
                let member = self
                    .members
                    .iter()
                    .find(|m| Some(&m.member_id) == o.member_id.as_ref());
                vec![
                    o.topic.clone(),
                    o.partition.to_string(),
                    dash(o.committed.map(|c| c.to_string())),
                    dash(o.log_end.map(|c| c.to_string())),
                    dash(o.lag().map(|c| c.to_string())),
                    dash(o.member_id.clone()),
                    dash(member.map(|m| m.host.clone())),
                    dash(member.map(|m| m.client_id.clone())),
                ]
            })
            .collect();
        printed.push_str(&table(
            &[
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            rows,
        ));
        printed
    }
}

impl OffsetRow {
    fn lag(&self) -> Option<i64> {
        Some((self.log_end? - self.committed?).max(0))
    }
}

/// A group's members and offsets; GROUP_ID_NOT_FOUND when it does not exist.
pub async fn describe(client: &Client, group: &str) -> anyhow::Result<Described> {
    let coordinator = client.group_coordinator(group).await?;
    // Each kind of group answers only its own describe.
    let mut found = describe_classic(client, coordinator, group).await?;
    if found.is_none() {
        found = describe_consumer(client, coordinator, group).await?;
    }
    if found.is_none() {
        found = describe_streams(client, coordinator, group).await?;
    }
    let (state, kind, members) =
        found.ok_or_else(|| kafka_error(GROUP_ID_NOT_FOUND, &format!("group {group}")))?;
    let committed = group_offsets::fetch_committed(client, coordinator, group, None).await?;
    let mut owners: BTreeMap<(String, i32), String> = BTreeMap::new();
    for member in &members {
        for (topic, partitions) in &member.assignment {
            for &partition in partitions {
                owners.insert((topic.clone(), partition), member.member_id.clone());
            }
        }
    }
    // Every partition with a commit or an owner, with its log end.
    let mut keys: Vec<(String, i32)> = committed.keys().chain(owners.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let ends = log_ends(client, keys.iter().map(|(t, _)| t.as_str())).await?;
    let offsets = keys
        .into_iter()
        .map(|(topic, partition)| OffsetRow {
            committed: committed.get(&(topic.clone(), partition)).copied(),
            log_end: ends.get(&(topic.clone(), partition)).copied(),
            member_id: owners.get(&(topic.clone(), partition)).cloned(),
            topic,
            partition,
        })
        .collect();
    Ok(Described {
        group: group.to_string(),
        state,
        kind,
        coordinator,
        members,
        offsets,
    })
}

type GroupState = (String, &'static str, Vec<Member>);

/// A classic group as DescribeGroups reports it; None when the broker has no classic
/// group of that name (it may be a KIP-848 one).
async fn describe_classic(
    client: &Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<Option<GroupState>> {
    let version = client.version(ApiKey::DescribeGroups, 5)?;
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let response: DescribeGroupsResponse = client
        .call_node(coordinator, ApiKey::DescribeGroups, version, &request)
        .await?;
    let Some(found) = response.groups.into_iter().next() else {
        bail!("group {group}: DescribeGroups answered nothing");
    };
    if !exists(
        group,
        found.error_code,
        &found.group_state,
        found.error_message.as_deref(),
    )? {
        return Ok(None);
    }
    let consumer = found.protocol_type.as_str() == "consumer";
    let members = found
        .members
        .into_iter()
        .map(|m| Member {
            assignment: if consumer {
                decode_assignment(&m.member_assignment).unwrap_or_default()
            } else {
                BTreeMap::new()
            },
            member_id: m.member_id.to_string(),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
        })
        .collect();
    Ok(Some((found.group_state.to_string(), "classic", members)))
}

/// Whether a described group exists: not when the broker says GROUP_ID_NOT_FOUND or Dead
/// (older brokers' way of saying it), an error for any other error code.
fn exists(group: &str, code: i16, state: &str, message: Option<&str>) -> anyhow::Result<bool> {
    if code == GROUP_ID_NOT_FOUND || state == "Dead" {
        return Ok(false);
    }
    check(code, message, &format!("group {group}"))?;
    Ok(true)
}

/// A KIP-848 consumer group as ConsumerGroupDescribe reports it, when the broker has one.
async fn describe_consumer(
    client: &Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<Option<GroupState>> {
    if !client.supports(ApiKey::ConsumerGroupDescribe) {
        return Ok(None);
    }
    let version = client.version(ApiKey::ConsumerGroupDescribe, 1)?;
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
    let response: ConsumerGroupDescribeResponse = client
        .call_node(
            coordinator,
            ApiKey::ConsumerGroupDescribe,
            version,
            &request,
        )
        .await?;
    let Some(found) = response.groups.into_iter().next() else {
        return Ok(None);
    };
    if !exists(
        group,
        found.error_code,
        &found.group_state,
        found.error_message.as_deref(),
    )? {
        return Ok(None);
    }
    let members = found
        .members
        .into_iter()
        .map(|m| Member {
            assignment: m
                .assignment
                .topic_partitions
                .iter()
                .map(|tp| (tp.topic_name.0.to_string(), tp.partitions.clone()))
                .collect(),
            member_id: m.member_id.to_string(),
            client_id: m.client_id.to_string(),
            host: m.client_host.to_string(),
        })
        .collect();
    Ok(Some((found.group_state.to_string(), "consumer", members)))
}

/// A Kafka Streams group (KIP-1071) as StreamsGroupDescribe reports it, when the broker
/// has one. A member's partitions are those its active tasks read: partition p of each
/// source and repartition topic of the task's subtopology.
async fn describe_streams(
    client: &Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<Option<GroupState>> {
    if !client.supports(ApiKey::StreamsGroupDescribe) {
        return Ok(None);
    }
    let version = client.version(ApiKey::StreamsGroupDescribe, 1)?;
    let request = StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
    let response: StreamsGroupDescribeResponse = client
        .call_node(coordinator, ApiKey::StreamsGroupDescribe, version, &request)
        .await?;
    let Some(found) = response.groups.into_iter().next() else {
        return Ok(None);
    };
    if !exists(
        group,
        found.error_code,
        &found.group_state,
        found.error_message.as_deref(),
    )? {
        return Ok(None);
    }
    // Subtopology -> the topics its tasks read.
    let inputs: BTreeMap<String, Vec<String>> = found
        .topology
        .iter()
        .flat_map(|t| t.subtopologies.iter().flatten())
        .map(|s| {
            let topics = s
                .source_topics
                .iter()
                .map(|t| t.0.to_string())
                .chain(
                    s.repartition_source_topics
                        .iter()
                        .map(|t| t.name.0.to_string()),
                )
                .collect();
            (s.subtopology_id.to_string(), topics)
        })
        .collect();
    let members = found
        .members
        .into_iter()
        .map(|m| {
            let mut assignment: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for task in &m.assignment.active_tasks {
                for topic in inputs
                    .get(task.subtopology_id.as_str())
                    .into_iter()
                    .flatten()
                {
                    assignment
                        .entry(topic.clone())
                        .or_default()
                        .extend(task.partitions.iter().copied());
                }
            }
            Member {
                assignment: assignment
                    .into_iter()
                    .map(|(topic, mut partitions)| {
                        partitions.sort_unstable();
                        (topic, partitions)
                    })
                    .collect(),
                member_id: m.member_id.to_string(),
                client_id: m.client_id.to_string(),
                host: m.client_host.to_string(),
            }
        })
        .collect();
    Ok(Some((found.group_state.to_string(), "streams", members)))
}

/// (topic, partition) -> log end offset for every partition of `topics`.
async fn log_ends<'t>(
    client: &Client,
    topics: impl Iterator<Item = &'t str>,
) -> anyhow::Result<Offsets> {
    bounds(client, topics, LATEST).await
}

/// (topic, partition) -> the offset at `timestamp` (EARLIEST, LATEST or a time) for every
/// partition of `topics`; a topic that no longer exists is left out.
async fn bounds<'t>(
    client: &Client,
    topics: impl Iterator<Item = &'t str>,
    timestamp: i64,
) -> anyhow::Result<Offsets> {
    let mut names: Vec<&str> = topics.collect();
    names.sort_unstable();
    names.dedup();
    let mut offsets = Offsets::new();
    for topic in names {
        let leaders = match client.leaders(topic, false).await {
            Ok(leaders) => leaders,
            Err(error) if KafkaError::code_of(&error) == Some(UNKNOWN_TOPIC_OR_PARTITION) => {
                continue
            }
            Err(error) => return Err(error),
        };
        for (partition, offset) in list_offsets(client, topic, &leaders, timestamp).await? {
            offsets.insert((topic.to_string(), partition), offset);
        }
    }
    Ok(offsets)
}

async fn reset_offsets(client: &Client, args: ResetArgs, json_output: bool) -> anyhow::Result<()> {
    let group = args.group.as_str();
    let coordinator = client.group_coordinator(group).await?;
    // As kafka-consumer-groups: only a group nobody consumes in can be moved.
    let state = match describe_classic(client, coordinator, group).await? {
        Some((state, _, members)) => Some((state, members.len())),
        None => describe_consumer(client, coordinator, group)
            .await?
            .map(|(state, _, members)| (state, members.len())),
    };
    if let Some((state, members)) =
        state.filter(|(state, members)| state != "Empty" || *members > 0)
    {
        bail!(
            "offsets of group {group} can only be reset while it is inactive, but it is {state} \
             with {members} members (NON_EMPTY_GROUP)"
        );
    }
    let committed = group_offsets::fetch_committed(client, coordinator, group, None).await?;
    // The partitions to move: the named ones, or every one the group has commits for.
    let mut wanted: Vec<(String, i32)> = Vec::new();
    if args.all_topics {
        wanted.extend(committed.keys().cloned());
    }
    for spec in &args.topics {
        let (topic, partitions) = match spec.split_once(':') {
            Some((topic, list)) => {
                let partitions = list
                    .split(',')
                    .map(|p| p.trim().parse::<i32>())
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("--topic {spec}: partitions must be numbers"))?;
                (topic, Some(partitions))
            }
            None => (spec.as_str(), None),
        };
        let leaders = client.leaders(topic, false).await?;
        match partitions {
            Some(partitions) => {
                for partition in partitions {
                    if !leaders.contains_key(&partition) {
                        bail!("{topic} has no partition {partition}");
                    }
                    wanted.push((topic.to_string(), partition));
                }
            }
            None => wanted.extend(leaders.keys().map(|&p| (topic.to_string(), p))),
        }
    }
    wanted.sort();
    wanted.dedup();
    let topics = || wanted.iter().map(|(t, _)| t.as_str());
    let earliest = bounds(client, topics(), EARLIEST).await?;
    let latest = bounds(client, topics(), LATEST).await?;
    let at_time = match args.to_timestamp {
        Some(timestamp) => Some(bounds(client, topics(), timestamp).await?),
        None => None,
    };
    let mut plan = Offsets::new();
    for key in &wanted {
        let (Some(&low), Some(&high)) = (earliest.get(key), latest.get(key)) else {
            continue; // the topic is gone
        };
        let target = if args.to_earliest {
            low
        } else if args.to_latest {
            high
        } else if let Some(offset) = args.to_offset {
            offset
        } else if let Some(found) = &at_time {
            // No record at or after the time: the end, as Kafka's tool does.
            found.get(key).copied().filter(|&o| o >= 0).unwrap_or(high)
        } else {
            let shift = args.shift_by.unwrap_or(0);
            committed.get(key).copied().unwrap_or(low) + shift
        };
        plan.insert(key.clone(), target.clamp(low, high));
    }
    if args.execute {
        group_offsets::commit(client, coordinator, group, -1, "", &plan).await?;
    }
    if json_output {
        print_json(&serde_json::Value::Array(
            plan.iter()
                .map(|((topic, partition), offset)| {
                    json!({"topic": topic, "partition": partition, "offset": offset})
                })
                .collect(),
        ));
    } else {
        let rows = plan
            .iter()
            .map(|((topic, partition), offset)| {
                vec![
                    group.to_string(),
                    topic.clone(),
                    partition.to_string(),
                    offset.to_string(),
                ]
            })
            .collect();
        println!(
            "{}",
            table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
        );
        if !args.execute {
            eprintln!("dry run: nothing committed (add --execute to commit the plan)");
        }
    }
    Ok(())
}

async fn delete(client: &Client, groups: &[String]) -> anyhow::Result<()> {
    let version = client.version(ApiKey::DeleteGroups, 2)?;
    for group in groups {
        let coordinator = client.group_coordinator(group).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
        let response: DeleteGroupsResponse = client
            .call_node(coordinator, ApiKey::DeleteGroups, version, &request)
            .await?;
        for result in response.results {
            check(result.error_code, None, &format!("deleting group {group}"))?;
        }
        eprintln!("deleted group {group}");
    }
    Ok(())
}
