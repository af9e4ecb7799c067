//! `strand topic create|list|describe|alter-config|delete`: what kafka-topics and
//! kafka-configs --entity-type topics do, without a JVM.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{check, topic_name, Client};
use super::output::{id_list, print_json, table};
use super::Target;

const TOPIC_RESOURCE: i8 = 2;
const ADMIN_TIMEOUT_MS: i32 = 30_000;

#[derive(clap::Args, Debug)]
pub struct TopicArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(clap::Subcommand, Debug)]
enum TopicCommand {
    /// Create a topic.
    Create {
        name: String,
        /// Partitions (-1: the broker's num.partitions).
        #[arg(short, long, default_value_t = -1, allow_negative_numbers = true)]
        partitions: i32,
        /// Replication factor (-1: the broker's default.replication.factor).
        #[arg(short, long, default_value_t = -1, allow_negative_numbers = true)]
        replication_factor: i16,
        /// A topic config, NAME=VALUE (Kafka's names: cleanup.policy=compact, ...).
        #[arg(short, long = "config", value_parser = parse_setting)]
        configs: Vec<(String, String)>,
    },
    /// List topics: partitions and replication factor.
    List {
        /// Include internal topics (__consumer_offsets, __transaction_state).
        #[arg(long)]
        internal: bool,
    },
    /// Partitions (leader, replicas, ISR, offsets) and configs of topics.
    Describe {
        #[arg(required = true)]
        names: Vec<String>,
        /// Every config with its source, not only those set on the topic.
        #[arg(long)]
        all_configs: bool,
    },
    /// Set or remove topic configs (kafka-configs --alter).
    AlterConfig {
        name: String,
        /// NAME=VALUE to set.
        #[arg(long = "set", value_parser = parse_setting)]
        set: Vec<(String, String)>,
        /// NAME to remove (back to the broker's default).
        #[arg(long = "delete")]
        delete: Vec<String>,
    },
    /// Delete topics.
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
}

pub fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("expected NAME=VALUE, not {text:?}")),
    }
}

pub async fn run(args: TopicArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    let json = args.target.json;
    match args.command {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            let created =
                create_topic(&client, &name, partitions, replication_factor, configs).await?;
            if json {
                print_json(&serde_json::to_value(&created)?);
            } else {
                println!("created topic {name}");
            }
            Ok(())
        }
        TopicCommand::List { internal } => list(&client, json, internal).await,
        TopicCommand::Describe { names, all_configs } => {
            describe(&client, json, &names, all_configs).await
        }
        TopicCommand::AlterConfig { name, set, delete } => {
            alter_topic_configs(&client, &name, set, delete).await?;
            println!("altered the configs of topic {name}");
            Ok(())
        }
        TopicCommand::Delete { names } => {
            let mut failed = Vec::new();
            for (name, result) in delete_topics(&client, &names).await? {
                match result {
                    Ok(()) => println!("deleted topic {name}"),
                    Err(error) => failed.push(error.to_string()),
                }
            }
            if !failed.is_empty() {
                bail!("{}", failed.join("; "));
            }
            Ok(())
        }
    }
}

/// What CreateTopics answered for a created topic.
#[derive(Debug, Serialize)]
pub struct CreatedTopic {
    pub topic: String,
    pub partitions: i32,
    pub replication_factor: i16,
}

/// Creates a topic; -1 partitions or replication factor take the broker's defaults.
pub async fn create_topic(
    client: &Client,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: Vec<(String, String)>,
) -> anyhow::Result<CreatedTopic> {
    let version = client.version(ApiKey::CreateTopics, 7)?;
    let topic = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(
            configs
                .into_iter()
                .map(|(name, value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(name))
                        .with_value(Some(StrBytes::from_string(value)))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let response: CreateTopicsResponse =
        client.call(ApiKey::CreateTopics, version, &request).await?;
    let result = response
        .topics
        .first()
        .context("CreateTopics answered no topic")?;
    check(
        result.error_code,
        result.error_message.as_deref(),
        &format!("creating topic {name}"),
    )?;
    Ok(CreatedTopic {
        topic: name.to_string(),
        partitions: result.num_partitions,
        replication_factor: result.replication_factor,
    })
}

/// A topic as Metadata lists it.
#[derive(Debug, Serialize)]
pub struct ListedTopic {
    pub name: String,
    pub id: String,
    pub partitions: usize,
    pub replication_factor: usize,
    pub internal: bool,
}

impl ListedTopic {
    pub fn of(topic: &MetadataResponseTopic) -> ListedTopic {
        ListedTopic {
            name: name_of(topic),
            id: topic.topic_id.to_string(),
            partitions: topic.partitions.len(),
            replication_factor: replication_factor(topic),
            internal: topic.is_internal,
        }
    }
}

async fn list(client: &Client, json: bool, internal: bool) -> anyhow::Result<()> {
    let metadata = client.metadata(None).await?;
    let mut topics: Vec<ListedTopic> = metadata
        .topics
        .iter()
        .filter(|topic| internal || !topic.is_internal)
        .map(ListedTopic::of)
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    if json {
        print_json(&serde_json::to_value(&topics)?);
    } else {
        let rows = topics
            .iter()
            .map(|topic| {
                vec![
                    topic.name.clone(),
                    topic.partitions.to_string(),
                    topic.replication_factor.to_string(),
                ]
            })
            .collect();
        println!("{}", table(&["NAME", "PARTITIONS", "REPLICAS"], rows));
    }
    Ok(())
}

pub fn name_of(topic: &MetadataResponseTopic) -> String {
    topic
        .name
        .as_ref()
        .map(|n| n.0.to_string())
        .unwrap_or_default()
}

fn replication_factor(topic: &MetadataResponseTopic) -> usize {
    topic
        .partitions
        .iter()
        .map(|p| p.replica_nodes.len())
        .max()
        .unwrap_or(0)
}

/// A topic's partitions with their offsets, and its configs.
#[derive(Debug, Serialize)]
pub struct TopicDescription {
    pub name: String,
    pub id: String,
    pub internal: bool,
    pub partitions: Vec<PartitionDescription>,
    pub configs: Vec<TopicConfig>,
}

#[derive(Debug, Serialize)]
pub struct PartitionDescription {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct TopicConfig {
    pub name: String,
    /// None when sensitive or unset.
    pub value: Option<String>,
    /// Kafka's name of where the value comes from (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG...).
    pub source: String,
}

/// Describes one topic: Metadata, its offsets from each leader, and its configs (all of
/// them, or those set on it).
pub async fn describe_topic(
    client: &Client,
    name: &str,
    all_configs: bool,
) -> anyhow::Result<TopicDescription> {
    let metadata = client.metadata(Some(&[name.to_string()])).await?;
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
        .with_context(|| format!("topic {name} missing from the Metadata answer"))?;
    check(topic.error_code, None, &format!("describing topic {name}"))?;
    let leaders: BTreeMap<i32, i32> = topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    let earliest =
        super::offsets::list_offsets(client, name, &leaders, super::offsets::EARLIEST).await?;
    let latest =
        super::offsets::list_offsets(client, name, &leaders, super::offsets::LATEST).await?;
    let configs = topic_configs(client, name, all_configs).await?;
    let ids = |nodes: &[kafka_protocol::messages::BrokerId]| nodes.iter().map(|b| b.0).collect();
    let mut partitions: Vec<PartitionDescription> = topic
        .partitions
        .iter()
        .map(|p| PartitionDescription {
            partition: p.partition_index,
            leader: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            replicas: ids(&p.replica_nodes),
            isr: ids(&p.isr_nodes),
            offline: ids(&p.offline_replicas),
            log_start_offset: earliest.get(&p.partition_index).copied(),
            high_watermark: latest.get(&p.partition_index).copied(),
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(TopicDescription {
        name: name_of(topic),
        id: topic.topic_id.to_string(),
        internal: topic.is_internal,
        partitions,
        configs,
    })
}

async fn describe(
    client: &Client,
    json: bool,
    names: &[String],
    all_configs: bool,
) -> anyhow::Result<()> {
    let mut described = Vec::new();
    for name in names {
        described.push(describe_topic(client, name, all_configs).await?);
    }
    if json {
        print_json(&serde_json::to_value(&described)?);
        return Ok(());
    }
    for (index, topic) in described.iter().enumerate() {
        if index > 0 {
            println!();
        }
        let replicas = topic
            .partitions
            .iter()
            .map(|p| p.replicas.len())
            .max()
            .unwrap_or(0);
        println!("NAME        {}", topic.name);
        println!("ID          {}", topic.id);
        println!("INTERNAL    {}", topic.internal);
        println!("PARTITIONS  {}", topic.partitions.len());
        println!("REPLICAS    {replicas}");
        println!();
        if !topic.configs.is_empty() {
            let rows = topic
                .configs
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        c.value.clone().unwrap_or_default(),
                        c.source.clone(),
                    ]
                })
                .collect();
            println!("{}", table(&["CONFIG", "VALUE", "SOURCE"], rows));
            println!();
        }
        let offset =
            |offset: Option<i64>| offset.map(|o| o.to_string()).unwrap_or_else(|| "-".into());
        let rows = topic
            .partitions
            .iter()
            .map(|p| {
                vec![
                    p.partition.to_string(),
                    p.leader.to_string(),
                    p.leader_epoch.to_string(),
                    id_list(&p.replicas),
                    id_list(&p.isr),
                    id_list(&p.offline),
                    offset(p.log_start_offset),
                    offset(p.high_watermark),
                ]
            })
            .collect();
        println!(
            "{}",
            table(
                &[
                    "PARTITION",
                    "LEADER",
                    "EPOCH",
                    "REPLICAS",
                    "ISR",
                    "OFFLINE",
                    "LOG-START-OFFSET",
                    "HIGH-WATERMARK"
                ],
                rows
            )
        );
    }
    Ok(())
}

/// The topic's configs: those set on it, or all of them, sorted by name.
async fn topic_configs(client: &Client, name: &str, all: bool) -> anyhow::Result<Vec<TopicConfig>> {
    let version = client.version(ApiKey::DescribeConfigs, 4)?;
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse = client
        .call(ApiKey::DescribeConfigs, version, &request)
        .await?;
    let result = response
        .results
        .first()
        .context("DescribeConfigs answered no resource")?;
    check(
        result.error_code,
        result.error_message.as_deref(),
        &format!("describing the configs of {name}"),
    )?;
    let mut configs: Vec<TopicConfig> = result
        .configs
        .iter()
        .filter(|config| all || config.config_source == 1)
        .map(|config| TopicConfig {
            name: config.name.to_string(),
            value: if config.is_sensitive {
                None
            } else {
                config.value.as_ref().map(|v| v.to_string())
            },
            source: config_source_name(config.config_source).to_string(),
        })
        .collect();
    configs.sort();
    Ok(configs)
}

/// Kafka's names of DescribeConfigs sources (ConfigSource in the protocol).
fn config_source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// Sets and removes configs of a topic (IncrementalAlterConfigs).
pub async fn alter_topic_configs(
    client: &Client,
    name: &str,
    set: Vec<(String, String)>,
    delete: Vec<String>,
) -> anyhow::Result<()> {
    if set.is_empty() && delete.is_empty() {
        bail!("nothing to change: give --set NAME=VALUE or --delete NAME");
    }
    let version = client.version(ApiKey::IncrementalAlterConfigs, 1)?;
    // Kafka's AlterConfigOp: 0 SET, 1 DELETE.
    let mut configs: Vec<AlterableConfig> = set
        .into_iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(name))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value)))
        })
        .collect();
    configs.extend(delete.into_iter().map(|name| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(name))
            .with_config_operation(1)
            .with_value(None)
    }));
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs),
    ]);
    let response: IncrementalAlterConfigsResponse = client
        .call(ApiKey::IncrementalAlterConfigs, version, &request)
        .await?;
    let result = response
        .responses
        .first()
        .context("IncrementalAlterConfigs answered no resource")?;
    check(
        result.error_code,
        result.error_message.as_deref(),
        &format!("altering the configs of {name}"),
    )
}

/// Deletes topics: each name with whether its deletion succeeded.
pub async fn delete_topics(
    client: &Client,
    names: &[String],
) -> anyhow::Result<Vec<(String, anyhow::Result<()>)>> {
    let version = client.version(ApiKey::DeleteTopics, 6)?;
    let mut request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
    if version >= 6 {
        request.topics = names
            .iter()
            .map(|name| DeleteTopicState::default().with_name(Some(topic_name(name))))
            .collect();
    } else {
        request.topic_names = names.iter().map(|name| topic_name(name)).collect();
    }
    let response: DeleteTopicsResponse =
        client.call(ApiKey::DeleteTopics, version, &request).await?;
    Ok(response
        .responses
        .iter()
        .map(|result| {
            let name = result
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .unwrap_or_default();
            let outcome = check(
                result.error_code,
                result.error_message.as_deref(),
                &format!("deleting topic {name}"),
            );
            (name, outcome)
        })
        .collect())
}
