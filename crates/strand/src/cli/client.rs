//! The CLI's view of a Kafka cluster (Strand or any other Kafka broker): a bootstrap
//! connection, the API versions the cluster speaks, the brokers it names in Metadata and one
//! connection per broker, opened when first needed. Each request goes at the highest
//! version both the CLI and the broker know, capped where the CLI's code expects a
//! particular shape (names rather than topic ids, single-group OffsetFetch).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use strand_protocol::client::Connection;

const CLIENT_ID: &str = "strand-cli";
/// How long a request waits for its answer before the command gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a retriable condition (no coordinator yet, no leader yet) is retried.
pub const RETRY_DEADLINE: Duration = Duration::from_secs(15);
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Opens a connection to a broker at "host:port": plain TCP for the CLI; TLS and SASL
/// for the console acting as the person signed in.
pub type Connector = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = anyhow::Result<Connection>> + Send>>
        + Send
        + Sync,
>;

/// A connector of plain TCP connections naming themselves `client_id`.
pub fn plain_connector(client_id: &'static str) -> Connector {
    Arc::new(move |address: String| {
        Box::pin(async move { Connection::connect_as(&address, 8, client_id).await })
    })
}

pub struct Client {
    connector: Connector,
    bootstrap: Arc<Connection>,
    /// api key -> (min, max) version the cluster serves.
    versions: HashMap<i16, (i16, i16)>,
    /// node id -> "host:port", from the last Metadata answer.
    brokers: Mutex<HashMap<i32, String>>,
    connections: tokio::sync::Mutex<HashMap<i32, Arc<Connection>>>,
}

impl Client {
    /// Connects to the first answering address of a comma-separated bootstrap list and
    /// asks which API versions the cluster speaks.
    pub async fn connect(bootstrap: &str) -> anyhow::Result<Client> {
        Client::connect_via(bootstrap, plain_connector(CLIENT_ID)).await
    }

    /// As `connect`, opening every connection with `connector`.
    pub async fn connect_via(bootstrap: &str, connector: Connector) -> anyhow::Result<Client> {
        let mut last_error = None;
        for address in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            match Self::connect_one(address, connector.clone()).await {
                Ok(client) => return Ok(client),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no bootstrap server given")))
    }

    async fn connect_one(address: &str, connector: Connector) -> anyhow::Result<Client> {
        let connection = connector(address.to_string()).await?;
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strand-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response: ApiVersionsResponse =
            timed(connection.call(ApiKey::ApiVersions, 3, &request)).await?;
        let response = if response.error_code != 0 {
            // A broker older than ApiVersions v3 answers in v0 with its range: ask again in v0.
            timed(connection.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())).await?
        } else {
            response
        };
        check(response.error_code, None, "ApiVersions")?;
        let versions = response
            .api_keys
            .iter()
            .map(|key| (key.api_key, (key.min_version, key.max_version)))
            .collect();
        Ok(Client {
            connector,
            bootstrap: Arc::new(connection),
            versions,
            brokers: Mutex::default(),
            connections: tokio::sync::Mutex::default(),
        })
    }

    /// Whether the cluster serves `key` at all.
    pub fn supports(&self, key: ApiKey) -> bool {
        self.versions.contains_key(&(key as i16))
    }

    /// The version to send `key` at: the broker's highest, at most `preferred`.
    pub fn version(&self, key: ApiKey, preferred: i16) -> anyhow::Result<i16> {
        let Some(&(min, max)) = self.versions.get(&(key as i16)) else {
            bail!("the broker does not serve {key:?}");
        };
        let version = max.min(preferred);
        if version < min {
            bail!(
                "the broker serves {key:?} at versions {min}-{max}, this CLI at most {preferred}"
            );
        }
        Ok(version)
    }

    /// Sends a request to the bootstrap broker (any broker will do).
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<Resp> {
        timed(self.bootstrap.call(key, version, request)).await
    }

    /// Sends a request to broker `node` (a partition's leader, a group's coordinator).
    pub async fn call_node<Req: Encodable, Resp: Decodable>(
        &self,
        node: i32,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<Resp> {
        let connection = self.node(node).await?;
        timed(connection.call(key, version, request)).await
    }

    /// Sends a request broker `node` does not answer (Produce with acks=0).
    pub async fn send_node<Req: Encodable>(
        &self,
        node: i32,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<()> {
        let connection = self.node(node).await?;
        timed(connection.send_unanswered(key, version, request)).await
    }

    async fn node(&self, node: i32) -> anyhow::Result<Arc<Connection>> {
        let mut connections = self.connections.lock().await;
        if let Some(connection) = connections.get(&node).filter(|c| !c.is_closed()) {
            return Ok(connection.clone());
        }
        let address = self.brokers.lock().unwrap().get(&node).cloned();
        let address = match address {
            Some(address) => address,
            None => {
                drop(connections);
                self.metadata(Some(&[])).await?;
                connections = self.connections.lock().await;
                self.brokers
                    .lock()
                    .unwrap()
                    .get(&node)
                    .cloned()
                    .with_context(|| format!("broker {node} is not in the cluster's metadata"))?
            }
        };
        let connection = Arc::new((self.connector)(address).await?);
        connections.insert(node, connection.clone());
        Ok(connection)
    }

    /// Metadata for `topics` (None: every topic; an empty slice: brokers only). Remembers
    /// the brokers' addresses.
    pub async fn metadata(&self, topics: Option<&[String]>) -> anyhow::Result<MetadataResponse> {
        let version = self.version(ApiKey::Metadata, 12)?;
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let response: MetadataResponse = self.call(ApiKey::Metadata, version, &request).await?;
        self.remember_brokers(&response);
        Ok(response)
    }

    fn remember_brokers(&self, response: &MetadataResponse) {
        let mut brokers = self.brokers.lock().unwrap();
        for broker in &response.brokers {
            brokers.insert(broker.node_id.0, format!("{}:{}", broker.host, broker.port));
        }
    }

    /// partition -> leader of `topic`, waiting (within the retry deadline) until every
    /// partition has one; `auto_create` lets a broker with auto.create.topics.enable
    /// create a missing topic, as a producer's Metadata request does.
    pub async fn leaders(
        &self,
        topic: &str,
        auto_create: bool,
    ) -> anyhow::Result<std::collections::BTreeMap<i32, i32>> {
        let version = self.version(ApiKey::Metadata, 12)?;
        let deadline = Instant::now() + RETRY_DEADLINE;
        loop {
            let request = MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
                ]))
                .with_allow_auto_topic_creation(auto_create);
            let response: MetadataResponse = self.call(ApiKey::Metadata, version, &request).await?;
            self.remember_brokers(&response);
            let found = response
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
            let code = found.map_or(UNKNOWN_TOPIC_OR_PARTITION, |t| t.error_code);
            if let Some(found) = found.filter(|t| t.error_code == 0 && !t.partitions.is_empty()) {
                if found.partitions.iter().all(|p| p.leader_id.0 >= 0) {
                    return Ok(found
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, p.leader_id.0))
                        .collect());
                }
            } else {
                // A missing topic is only worth waiting for when it is being created.
                let wait = retriable(code) && (auto_create || code != UNKNOWN_TOPIC_OR_PARTITION);
                if !wait || Instant::now() >= deadline {
                    check(code, None, &format!("topic {topic}"))?;
                }
            }
            if Instant::now() >= deadline {
                bail!("topic {topic}: partitions without a leader (LEADER_NOT_AVAILABLE)");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The coordinator of `group`, retried while the cluster has none yet (a fresh
    /// cluster creates __consumer_offsets on the first lookup).
    pub async fn group_coordinator(&self, group: &str) -> anyhow::Result<i32> {
        let version = self.version(ApiKey::FindCoordinator, 3)?;
        let deadline = Instant::now() + RETRY_DEADLINE;
        loop {
            let request = FindCoordinatorRequest::default()
                .with_key(StrBytes::from_string(group.to_string()))
                .with_key_type(0);
            let response: FindCoordinatorResponse = self
                .call(ApiKey::FindCoordinator, version, &request)
                .await?;
            if response.error_code == 0 {
                self.brokers.lock().unwrap().insert(
                    response.node_id.0,
                    format!("{}:{}", response.host, response.port),
                );
                return Ok(response.node_id.0);
            }
            if !retriable(response.error_code) || Instant::now() >= deadline {
                check(
                    response.error_code,
                    response.error_message.as_deref(),
                    &format!("finding the coordinator of group {group}"),
                )?;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Bounds one request's wait for its answer.
async fn timed<T>(call: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::time::timeout(REQUEST_TIMEOUT, call)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {REQUEST_TIMEOUT:?}"))?
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Kafka's name of an error code, as its tools print it (TOPIC_ALREADY_EXISTS).
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(code)) => format!("UNKNOWN_ERROR_CODE_{code}"),
        Some(error) => {
            let camel = format!("{error:?}");
            let mut name = String::with_capacity(camel.len() + 8);
            for (index, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && index > 0 {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            name
        }
    }
}

/// Whether a client retries on `code` (Kafka's RetriableException family).
pub fn retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|error| error.is_retriable())
}

/// An error a broker answered, shown with Kafka's error name; callers that treat one code
/// specially find it with `KafkaError::code_of`.
#[derive(Debug)]
pub struct KafkaError {
    pub code: i16,
    what: String,
    message: Option<String>,
}

impl KafkaError {
    /// The Kafka error code behind `error`, if a broker answered it.
    pub fn code_of(error: &anyhow::Error) -> Option<i16> {
        error.downcast_ref::<KafkaError>().map(|e| e.code)
    }
}

impl std::fmt::Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, error_name(self.code))?;
        match &self.message {
            Some(message) => write!(f, " ({message})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for KafkaError {}

/// Fails with Kafka's error name and the broker's message when `code` is an error.
pub fn check(code: i16, message: Option<&str>, what: &str) -> anyhow::Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(KafkaError {
        code,
        what: what.to_string(),
        message: message.filter(|m| !m.is_empty()).map(str::to_string),
    }
    .into())
}

/// The error a Kafka broker would answer for `what`, found without asking one (a
/// partition the topic does not have, a group nobody knows).
pub fn kafka_error(code: i16, what: &str) -> anyhow::Error {
    KafkaError {
        code,
        what: what.to_string(),
        message: None,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(69), "GROUP_ID_NOT_FOUND");
        assert_eq!(error_name(0), "NONE");
    }

    #[test]
    fn checked_errors_carry_their_code_and_kafkas_name() {
        let error = check(3, Some("gone"), "describing t").unwrap_err();
        assert_eq!(KafkaError::code_of(&error), Some(3));
        assert_eq!(
            error.to_string(),
            "describing t: UNKNOWN_TOPIC_OR_PARTITION (gone)"
        );
        assert_eq!(
            check(36, Some(""), "creating t").unwrap_err().to_string(),
            "creating t: TOPIC_ALREADY_EXISTS"
        );
        assert!(check(0, None, "fine").is_ok());
    }

    #[test]
    fn retriable_follows_kafka() {
        assert!(retriable(15)); // COORDINATOR_NOT_AVAILABLE
        assert!(!retriable(36));
    }
}
