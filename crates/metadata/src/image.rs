//! The metadata image: what the metadata log says now. Every node replays the same records
//! in the same order, so every image agrees at the same log position. Not thread-safe;
//! owners share it as an immutable `Arc` snapshot per change.

use std::collections::{BTreeMap, HashMap};

use crate::features::FinalizedFeatures;
use serde::{Deserialize, Serialize};
use strand_security::authorizer::Acls;

use crate::client_quotas::ClientQuotas;
use uuid::Uuid;

use crate::records::MetadataRecord;
use crate::{BrokerId, NO_LEADER};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Changes at every process start; Kafka's broker epoch plays this part.
    pub incarnation: Uuid,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// Every listener clients may reach it on (Kafka's broker registration endpoints);
    /// `host`/`port` are the inter-broker one's. Empty in registrations written before
    /// brokers had several listeners: then only the inter-broker listener is known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<BrokerEndpoint>,
}

/// One named listener of a broker, as clients of that listener reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl BrokerInfo {
    /// (host, port) of the listener `name`; the inter-broker address when the
    /// registration names no listeners and `name` is `inter_broker`.
    pub fn endpoint(&self, name: &str, inter_broker: &str) -> Option<(&str, u16)> {
        if self.listeners.is_empty() {
            return (name == inter_broker).then_some((self.host.as_str(), self.port));
        }
        self.listeners
            .iter()
            .find(|listener| listener.name == name)
            .map(|listener| (listener.host.as_str(), listener.port))
    }

    /// May lead partitions and join ISRs.
    pub fn is_eligible(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Replica brokers; the first is the preferred leader.
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// `NO_LEADER` when no eligible ISR member is left.
    pub leader: BrokerId,
    /// Bumped at every leader change; followers truncate by it.
    pub leader_epoch: i32,
    /// Bumped at every change (leader, ISR, replicas): AlterPartition names the version it
    /// edits.
    pub partition_epoch: i32,
    /// A reassignment in progress (reassignment.rs): replicas being added, which are in
    /// `replicas` and catch up as followers until the ISR holds them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<BrokerId>,
    /// Replicas the reassignment removes once the added ones are in sync; in `replicas`
    /// until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966, eligible_leaders.rs): replicas out of the ISR
    /// that still hold every committed record, because the ISR has been below min ISR
    /// (so the high watermark has not moved) since they left it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elr: Vec<BrokerId>,
    /// The leader before the partition lost it, while it has none (KIP-966's last known
    /// ELR): elected uncleanly if it returns while the ISR and the ELR are empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_known_elr: Vec<BrokerId>,
}

impl PartitionState {
    pub fn new(replicas: Vec<BrokerId>) -> PartitionState {
        PartitionState {
            leader: replicas.first().copied().unwrap_or(NO_LEADER),
            isr: replicas.clone(),
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    /// Whether a reassignment is moving this partition's replicas.
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub configs: BTreeMap<String, String>,
    pub partitions: Vec<PartitionState>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    pub brokers: BTreeMap<BrokerId, BrokerInfo>,
    pub topics: BTreeMap<String, TopicImage>,
    #[serde(skip)]
    topic_names_by_id: HashMap<Uuid, String>,
    /// The next producer id the controller hands out.
    pub next_producer_id: i64,
    /// Set once by the first active controller; every broker reports it.
    pub cluster_id: Option<String>,
    /// Dynamic broker configs for every broker (kafka-configs --entity-default).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub default_broker_configs: BTreeMap<String, String>,
    /// Dynamic broker configs per broker (kafka-configs --entity-name ID).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<BrokerId, BTreeMap<String, String>>,
    /// Group configs by group id (kafka-configs --entity-type groups).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Finalized feature levels (kafka-features), and the epoch of their last change.
    #[serde(default, skip_serializing_if = "is_default")]
    pub features: FinalizedFeatures,
    /// SCRAM credentials: user -> mechanism name (SCRAM-SHA-256, SCRAM-SHA-512) ->
    /// credential (kafka-configs --entity-type users).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram_credentials: BTreeMap<String, BTreeMap<String, ScramCredentialRecord>>,
    /// ACLs (kafka-acls), enforced by every broker when authorizer.class.name is set.
    #[serde(default, skip_serializing_if = "Acls::is_empty")]
    pub acls: Acls,
    /// Client quotas (kafka-configs --entity-type users/clients/ips).
    #[serde(default, skip_serializing_if = "ClientQuotas::is_empty")]
    pub client_quotas: ClientQuotas,
}

/// What is kept of a user's password for one SCRAM mechanism: the salt, the iterations
/// and the two keys RFC 5802 derives, never the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredentialRecord {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredentialRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentialRecord")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicImage> {
        self.topic_names_by_id
            .get(id)
            .and_then(|name| self.topics.get(name))
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(usize::try_from(partition).ok()?))
    }

    /// A broker's dynamic configs: its own over the cluster-wide defaults.
    pub fn dynamic_broker_configs(&self, broker: BrokerId) -> BTreeMap<String, String> {
        let mut configs = self.default_broker_configs.clone();
        if let Some(own) = self.broker_configs.get(&broker) {
            configs.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        configs
    }

    pub fn is_eligible(&self, broker: BrokerId) -> bool {
        self.brokers
            .get(&broker)
            .is_some_and(BrokerInfo::is_eligible)
    }

    /// Rebuilds the derived index after deserialising a snapshot.
    pub fn reindex(&mut self) {
        self.topic_names_by_id = self
            .topics
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
    }

    /// Applies one record. Records come from `controller::decide`, which checked them
    /// against this same image, so a record naming something missing is a bug upstream;
    /// it is ignored rather than allowed to bring every node down.
    pub fn replay(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker(info) => {
                self.brokers.insert(info.id, info.clone());
            }
            MetadataRecord::FenceBroker { id } => {
                if let Some(broker) = self.brokers.get_mut(id) {
                    broker.fenced = true;
                }
            }
            MetadataRecord::UnfenceBroker { id } => {
                if let Some(broker) = self.brokers.get_mut(id) {
                    broker.fenced = false;
                    broker.in_controlled_shutdown = false;
                }
            }
            MetadataRecord::ControlledShutdown { id } => {
                if let Some(broker) = self.brokers.get_mut(id) {
                    broker.in_controlled_shutdown = true;
                }
            }
            MetadataRecord::UnregisterBroker { id } => {
                self.brokers.remove(id);
            }
            MetadataRecord::CreateTopic {
                name,
                id,
                configs,
                partitions,
            } => {
                self.topic_names_by_id.insert(*id, name.clone());
                self.topics.insert(
                    name.clone(),
                    TopicImage {
                        name: name.clone(),
                        id: *id,
                        configs: configs.clone(),
                        partitions: partitions.clone(),
                    },
                );
            }
            MetadataRecord::AddPartitions { name, partitions } => {
                if let Some(topic) = self.topics.get_mut(name) {
                    topic.partitions.extend(partitions.iter().cloned());
                }
            }
            MetadataRecord::ChangePartition {
                topic,
                partition,
                state,
            } => {
                let slot = self
                    .topics
                    .get_mut(topic)
                    .and_then(|t| t.partitions.get_mut(usize::try_from(*partition).ok()?));
                if let Some(slot) = slot {
                    *slot = state.clone();
                }
            }
            MetadataRecord::SetTopicConfigs { name, configs } => {
                if let Some(topic) = self.topics.get_mut(name) {
                    topic.configs = configs.clone();
                }
            }
            MetadataRecord::DeleteTopic { name } => {
                if let Some(topic) = self.topics.remove(name) {
                    self.topic_names_by_id.remove(&topic.id);
                }
            }
            MetadataRecord::SetFeatures { levels } => self.features.apply(levels),
            MetadataRecord::SetGroupConfigs { group, configs } => {
                if configs.is_empty() {
                    self.group_configs.remove(group);
                } else {
                    self.group_configs.insert(group.clone(), configs.clone());
                }
            }
            MetadataRecord::SetUserScramCredential {
                user,
                mechanism,
                credential,
            } => match credential {
                Some(credential) => {
                    self.scram_credentials
                        .entry(user.clone())
                        .or_default()
                        .insert(mechanism.clone(), credential.clone());
                }
                None => {
                    if let Some(mechanisms) = self.scram_credentials.get_mut(user) {
                        mechanisms.remove(mechanism);
                        if mechanisms.is_empty() {
                            self.scram_credentials.remove(user);
                        }
                    }
                }
            },
            MetadataRecord::SetClientQuota { entity, key, value } => {
                self.client_quotas.set(entity, key, *value)
            }
            MetadataRecord::CreateAcl(binding) => self.acls.add(binding.clone()),
            MetadataRecord::DeleteAcl(binding) => {
                self.acls.remove(binding);
            }
            MetadataRecord::SetBrokerConfigs { broker, configs } => {
                let slot = match broker {
                    None => &mut self.default_broker_configs,
                    Some(id) => self.broker_configs.entry(*id).or_default(),
                };
                *slot = configs.clone();
                if let Some(id) = broker.filter(|_| configs.is_empty()) {
                    self.broker_configs.remove(&id);
                }
            }
            MetadataRecord::ClusterId { id } => {
                self.cluster_id.get_or_insert_with(|| id.clone());
            }
            MetadataRecord::ProducerIds { next } => {
                self.next_producer_id = self.next_producer_id.max(*next);
            }
        }
    }
}
