//! Where each partition's leader is. The benchmark sends produces, fetches and offset
//! lookups straight to the leader, as Kafka clients do, so it runs against a replicated
//! cluster as well as against one broker. Leaders are looked up once: a leadership change
//! during a run fails it (NOT_LEADER_OR_FOLLOWER) rather than being retried, since a
//! benchmark that silently rerouted would measure something else.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use strand_protocol::client::Connection;

const METADATA_VERSION: i16 = 12;

#[derive(Debug, Clone)]
pub struct Leaders {
    /// partition -> "host:port" of its leader.
    addresses: HashMap<i32, String>,
}

impl Leaders {
    /// Asks for the topic's metadata until each of its `partitions` has a leader (a
    /// topic created a moment ago may have none yet), for at most `timeout`.
    pub async fn wait_for(
        connection: &Connection,
        topic: &str,
        partitions: i32,
        timeout: Duration,
    ) -> anyhow::Result<Leaders> {
        let deadline = Instant::now() + timeout;
        loop {
            let (leaders, missing) = Leaders::ask(connection, topic, partitions).await?;
            if missing.is_empty() {
                return Ok(leaders);
            }
            if Instant::now() >= deadline {
                bail!(
                    "partitions {missing:?} of {topic} have no leader after {:?}",
                    timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One metadata request: the leaders known, and the partitions without one.
    async fn ask(
        connection: &Connection,
        topic: &str,
        partitions: i32,
    ) -> anyhow::Result<(Leaders, Vec<i32>)> {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_string())),
            ))]))
            .with_allow_auto_topic_creation(false);
        let response: MetadataResponse = connection
            .call(ApiKey::Metadata, METADATA_VERSION, &request)
            .await?;
        let brokers: HashMap<i32, String> = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut addresses = HashMap::new();
        for t in response
            .topics
            .iter()
            .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        {
            for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                if let Some(address) = brokers.get(&p.leader_id.0) {
                    addresses.insert(p.partition_index, address.clone());
                }
            }
        }
        let missing = (0..partitions)
            .filter(|p| !addresses.contains_key(p))
            .collect();
        Ok((Leaders { addresses }, missing))
    }

    /// The leader's address of `partition` (one that `wait_for` covered).
    pub fn of(&self, partition: i32) -> &str {
        &self.addresses[&partition]
    }

    /// `partitions` grouped by their leader's address.
    pub fn group(&self, partitions: &[i32]) -> BTreeMap<String, Vec<i32>> {
        let mut groups: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for p in partitions {
            groups.entry(self.of(*p).to_string()).or_default().push(*p);
        }
        groups
    }

    /// One connection to each distinct leader of `partitions`, keyed by address.
    pub async fn connect(
        &self,
        partitions: &[i32],
        in_flight: usize,
    ) -> anyhow::Result<HashMap<String, Arc<Connection>>> {
        let mut connections = HashMap::new();
        for address in self.group(partitions).into_keys() {
            let connection = Arc::new(Connection::connect(&address, in_flight).await?);
            connections.insert(address, connection);
        }
        Ok(connections)
    }
}
