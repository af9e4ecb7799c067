//! The controller's decisions, as a pure function of the image and a command:
//! `decide(image, command) -> (reply, records)`. The active controller decides each
//! command once and stores the records in the Raft log (`proposer`, `entry`); every node
//! replays them, so all images agree and a new active controller continues from the same
//! state. Nothing here reads a clock or draws randomness: what must vary (topic ids, broker
//! incarnations) arrives inside the command, and heartbeat timing stays with the active
//! controller, which proposes `FenceBroker` when a broker's session expires.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use strand_security::authorizer::{AclBinding, AclFilter};
use uuid::Uuid;

use crate::eligible_leaders;
use crate::error_code;
use crate::image::{
    BrokerEndpoint, BrokerInfo, MetadataImage, PartitionState, ScramCredentialRecord,
};
use crate::placement::{assign_replicas, rack_alternated};
use crate::reassignment::{self, check_replica_list};
use crate::records::MetadataRecord;
use crate::{BrokerId, NO_LEADER};

/// Partitions one topic may have (CreateTopics, CreatePartitions).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
    /// Explicit replica lists per partition (CreateTopics `assignments`); empty: placed here.
    pub assignments: Vec<Vec<BrokerId>>,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerCommand {
    RegisterBroker {
        id: BrokerId,
        host: String,
        port: u16,
        rack: Option<String>,
        incarnation: Uuid,
        /// Every listener of the broker (older brokers send none).
        #[serde(default)]
        listeners: Vec<BrokerEndpoint>,
        /// The broker's previous process did not stop cleanly (its logs were recovered):
        /// with eligible leader replicas on, it may have lost unflushed records, so it
        /// leaves every ISR and ELR (Kafka's previousBrokerEpoch check). Older brokers send
        /// none: clean.
        #[serde(default)]
        unclean_shutdown: bool,
    },
    /// Proposed by the active controller when a broker's session expired.
    FenceBroker {
        id: BrokerId,
        incarnation: Uuid,
    },
    /// Proposed by the active controller when a fenced broker heartbeats, caught up.
    UnfenceBroker {
        id: BrokerId,
        incarnation: Uuid,
    },
    ControlledShutdown {
        id: BrokerId,
        incarnation: Uuid,
    },
    /// UnregisterBroker (API 64, kafka-cluster unregister): forgets a broker's
    /// registration, its leaderships and ISR places moved away first as for a fenced
    /// broker (Kafka's handleBrokerUnregistered). Meant for brokers gone for good; one
    /// still running registers again at its next heartbeat (Kafka 4.4's stays out of
    /// Metadata until restarted: deliberately friendlier, docs/ARCHITECTURE.md).
    UnregisterBroker {
        id: BrokerId,
    },
    CreateTopics {
        topics: Vec<NewTopic>,
    },
    DeleteTopics {
        names: Vec<String>,
    },
    CreatePartitions {
        name: String,
        count: i32,
    },
    SetTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// Finalized feature levels (UpdateFeatures), checked by the broker that took the
    /// request (`features::check_updates`).
    SetFeatures {
        levels: BTreeMap<String, i16>,
    },
    /// A group's configs (IncrementalAlterConfigs on a GROUP resource), checked by the
    /// broker that took the request.
    SetGroupConfigs {
        group: String,
        configs: BTreeMap<String, String>,
    },
    /// AlterUserScramCredentials, its per-user checks that need no state (names,
    /// mechanisms, iterations, one alteration per user) done by the broker that took the
    /// request: the controller refuses deleting what does not exist. One result per
    /// user, in the order of `users`.
    AlterScramCredentials {
        users: Vec<String>,
        deletions: Vec<(String, String)>,
        upsertions: Vec<(String, String, ScramCredentialRecord)>,
    },
    /// CreateAcls, each ACL checked by the broker that took the request: one result per
    /// ACL. An ACL that exists already succeeds and adds nothing, as on Kafka.
    CreateAcls {
        acls: Vec<AclBinding>,
    },
    /// AlterClientQuotas: per alteration, the entity as the request lists it and its
    /// operations (key, None to remove), checked here as Kafka's controller checks them;
    /// one result per alteration.
    AlterClientQuotas {
        alterations: Vec<QuotaAlteration>,
    },
    /// DeleteAcls: every ACL a filter matches is removed; the reply lists them per filter.
    DeleteAcls {
        filters: Vec<AclFilter>,
    },
    /// Dynamic broker configs (IncrementalAlterConfigs on a BROKER resource), checked by
    /// the broker that took the request; None: the cluster-wide default.
    SetBrokerConfigs {
        broker: Option<BrokerId>,
        configs: BTreeMap<String, String>,
    },
    /// A leader's ISR change (Kafka's AlterPartition).
    AlterPartition {
        topic: String,
        partition: i32,
        leader: BrokerId,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<BrokerId>,
    },
    /// A broker's replica of a partition failed: its log went offline after a storage
    /// error, or a read found a damaged batch. It leaves the ISR, and leadership moves to
    /// another in-sync replica, if there is one (Kafka moves leaders off a failed log
    /// directory); a sole in-sync replica stays, serving what it still can.
    ReplicaFailed {
        id: BrokerId,
        incarnation: Uuid,
        topic: String,
        partition: i32,
    },
    /// Moves leadership back to each partition's first replica where it is in the ISR
    /// (the periodic auto.leader.rebalance.enable check).
    ElectPreferredLeaders,
    /// ElectLeaders (API 43, kafka-leader-election): a preferred or unclean election for
    /// the partitions named, or every partition when None.
    ElectLeaders {
        election: Election,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// AlterPartitionReassignments (API 45, kafka-reassign-partitions): starts, replaces
    /// or (target None) cancels each partition's reassignment (reassignment.rs).
    AlterPartitionReassignments {
        reassignments: Vec<Reassignment>,
        allow_replication_factor_change: bool,
    },
    AllocateProducerIds {
        count: i64,
    },
    /// Names the cluster, if it has no name yet (the first active controller does).
    InitCluster {
        cluster_id: String,
        /// The active controller's min.insync.replicas start setting, recorded as the
        /// cluster-wide dynamic value while eligible leader replicas are on (Kafka's format
        /// records it: the controller's ISR rules read it).
        #[serde(default)]
        min_insync_replicas: Option<i32>,
    },
}

/// One partition's target replicas in an AlterPartitionReassignments (None: cancel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<BrokerId>>,
}

/// ElectLeaders' election types (KIP-460): 0 preferred, 1 unclean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Election {
    /// Leadership to the first replica, if it is in the ISR and eligible.
    Preferred,
    /// A leader for a leaderless partition: an eligible ISR member if any, else any
    /// eligible replica (which may lack committed records), whatever the topic's
    /// unclean.leader.election.enable says.
    Unclean,
}

/// ElectLeaders' answer for one topic: each partition's outcome (none, for a topic of
/// an all-partitions election where nothing was needed, as Kafka lists it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicElections {
    pub topic: String,
    pub partitions: Vec<(i32, ItemResult)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemResult {
    pub code: i16,
    pub message: Option<String>,
}

impl ItemResult {
    pub fn ok() -> ItemResult {
        ItemResult {
            code: error_code::NONE,
            message: None,
        }
    }

    pub fn error(code: i16, message: impl Into<String>) -> ItemResult {
        ItemResult {
            code,
            message: Some(message.into()),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.code == error_code::NONE
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerReply {
    /// One result per item of the command (topics), or one for single-item commands.
    Results(Vec<ItemResult>),
    /// The partition as it is after an AlterPartition.
    Partition(Result<PartitionState, ItemResult>),
    ProducerIds {
        first: i64,
        count: i64,
    },
    /// ElectLeaders: per topic in the order asked, one result per partition asked for
    /// (every partition: every topic, with only the partitions where an election was
    /// needed, as Kafka answers).
    Elections(Vec<TopicElections>),
    /// DeleteAcls: per filter, the ACLs it matched (all of them removed), or why none was.
    DeletedAcls(Result<Vec<Vec<AclBinding>>, ItemResult>),
}

impl ControllerReply {
    fn single(result: ItemResult) -> ControllerReply {
        ControllerReply::Results(vec![result])
    }
}

/// The most records one user operation (CreateAcls, DeleteAcls, AlterClientQuotas) may
/// write, Kafka's MAX_RECORDS_PER_USER_OP: a count read from the wire cannot make one
/// unbounded decision.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Kafka's refusal of an operation over MAX_RECORDS_PER_USER_OP.
fn excessive_batch() -> ItemResult {
    ItemResult::error(
        error_code::POLICY_VIOLATION,
        "Unable to perform excessively large batch operation.",
    )
}

/// `results`, or every item refused (and nothing written) when the operation's records
/// exceed MAX_RECORDS_PER_USER_OP.
fn bounded(records: &mut Vec<MetadataRecord>, results: Vec<ItemResult>) -> ControllerReply {
    if records.len() > MAX_RECORDS_PER_USER_OP {
        records.clear();
        return ControllerReply::Results(results.iter().map(|_| excessive_batch()).collect());
    }
    ControllerReply::Results(results)
}

/// One AlterClientQuotas entry: the entity as listed (type, name or None for the default)
/// and the operations (key, value or None to remove).
pub type QuotaAlteration = (
    crate::client_quotas::ListedEntity,
    Vec<(String, Option<crate::client_quotas::QuotaValue>)>,
);

/// Decides a command against `image` and returns the reply and the records to replay.
/// Records are listed in order; replaying them in order onto `image` is the change.
pub fn decide(
    image: &MetadataImage,
    command: &ControllerCommand,
) -> (ControllerReply, Vec<MetadataRecord>) {
    let mut records = Vec::new();
    let reply = match command {
        ControllerCommand::RegisterBroker {
            id,
            host,
            port,
            rack,
            incarnation,
            listeners,
            unclean_shutdown,
        } => {
            match image.brokers.get(id) {
                Some(existing) if existing.incarnation == *incarnation => {}
                previous => {
                    // A new incarnation: the old one's leaderships and ISR places go
                    // first, as if it had been fenced; after an unclean shutdown (with
                    // ELR on) its ELR places too. A broker with no registration on record
                    // (new, or unregistered and back, perhaps on a new disk) cannot have
                    // shut down cleanly as far as the controller knows (Kafka's stored
                    // epoch -2): it leaves any ELR it was left in.
                    let elr_on = eligible_leaders::enabled(&image.features);
                    if previous.is_some() {
                        records.push(MetadataRecord::FenceBroker { id: *id });
                        move_away(image, *id, *unclean_shutdown && elr_on, &mut records);
                    } else if elr_on {
                        move_away(image, *id, true, &mut records);
                    }
                    records.push(MetadataRecord::RegisterBroker(BrokerInfo {
                        id: *id,
                        host: host.clone(),
                        port: *port,
                        rack: rack.clone(),
                        incarnation: *incarnation,
                        fenced: true,
                        in_controlled_shutdown: false,
                        listeners: listeners.clone(),
                    }));
                }
            }
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::FenceBroker { id, incarnation } => {
            match image.brokers.get(id) {
                Some(broker) if broker.incarnation == *incarnation && !broker.fenced => {
                    records.push(MetadataRecord::FenceBroker { id: *id });
                    move_away(image, *id, false, &mut records);
                }
                _ => {}
            }
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::UnregisterBroker { id } => {
            if image.brokers.contains_key(id) {
                move_away(image, *id, false, &mut records);
                records.push(MetadataRecord::UnregisterBroker { id: *id });
                ControllerReply::single(ItemResult::ok())
            } else {
                ControllerReply::single(ItemResult::error(
                    error_code::BROKER_ID_NOT_REGISTERED,
                    format!("Broker ID {id} is not currently registered"),
                ))
            }
        }
        ControllerCommand::UnfenceBroker { id, incarnation } => match image.brokers.get(id) {
            Some(broker) if broker.incarnation == *incarnation => {
                if broker.fenced || broker.in_controlled_shutdown {
                    records.push(MetadataRecord::UnfenceBroker { id: *id });
                    let mut after = image.clone();
                    after.replay(records.last().expect("just pushed"));
                    elect_leaderless(&after, &mut records);
                }
                ControllerReply::single(ItemResult::ok())
            }
            _ => ControllerReply::single(ItemResult::error(
                error_code::STALE_BROKER_EPOCH,
                format!("broker {id} is not registered with this incarnation"),
            )),
        },
        ControllerCommand::ControlledShutdown { id, incarnation } => match image.brokers.get(id) {
            Some(broker) if broker.incarnation == *incarnation => {
                if !broker.in_controlled_shutdown {
                    records.push(MetadataRecord::ControlledShutdown { id: *id });
                    move_away(image, *id, false, &mut records);
                }
                ControllerReply::single(ItemResult::ok())
            }
            _ => ControllerReply::single(ItemResult::error(
                error_code::STALE_BROKER_EPOCH,
                format!("broker {id} is not registered with this incarnation"),
            )),
        },
        ControllerCommand::CreateTopics { topics } => {
            // Topics of one request see each other (a duplicate name in one request fails).
            let mut scratch = image.clone();
            let results = topics
                .iter()
                .map(|topic| match create_topic(&scratch, topic) {
                    Ok(record) => {
                        scratch.replay(&record);
                        records.push(record);
                        ItemResult::ok()
                    }
                    Err(error) => error,
                })
                .collect();
            ControllerReply::Results(results)
        }
        ControllerCommand::DeleteTopics { names } => {
            let mut deleted = std::collections::BTreeSet::new();
            let results = names
                .iter()
                .map(|name| {
                    if image.topic(name).is_some() && deleted.insert(name.clone()) {
                        records.push(MetadataRecord::DeleteTopic { name: name.clone() });
                        ItemResult::ok()
                    } else {
                        ItemResult::error(
                            error_code::UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        )
                    }
                })
                .collect();
            ControllerReply::Results(results)
        }
        ControllerCommand::CreatePartitions { name, count } => {
            ControllerReply::single(match add_partitions(image, name, *count) {
                Ok(record) => {
                    records.push(record);
                    ItemResult::ok()
                }
                Err(error) => error,
            })
        }
        ControllerCommand::SetTopicConfigs { name, configs } => {
            ControllerReply::single(if let Some(topic) = image.topic(name) {
                records.push(MetadataRecord::SetTopicConfigs {
                    name: name.clone(),
                    configs: configs.clone(),
                });
                let min_isr = eligible_leaders::MIN_INSYNC_REPLICAS;
                if topic.configs.get(min_isr) != configs.get(min_isr) {
                    clear_elr(image, Some(name), &mut records);
                }
                ItemResult::ok()
            } else {
                ItemResult::error(
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("The topic '{name}' does not exist."),
                )
            })
        }
        ControllerCommand::SetFeatures { levels } => {
            records.push(MetadataRecord::SetFeatures {
                levels: levels.clone(),
            });
            let elr = crate::features::ELIGIBLE_LEADER_REPLICAS_VERSION;
            let turned_on = levels.get(elr).is_some_and(|level| *level >= 1)
                && !eligible_leaders::enabled(&image.features);
            if turned_on {
                // Kafka's maybeGenerateElrSafetyRecords: no broker keeps its own
                // min.insync.replicas once the controller's ELR relies on one value.
                for (broker, configs) in eligible_leaders::without_per_broker_min_isr(image) {
                    records.push(MetadataRecord::SetBrokerConfigs {
                        broker: Some(broker),
                        configs,
                    });
                }
            }
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::SetGroupConfigs { group, configs } => {
            records.push(MetadataRecord::SetGroupConfigs {
                group: group.clone(),
                configs: configs.clone(),
            });
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::AlterScramCredentials {
            users,
            deletions,
            upsertions,
        } => {
            let mut results = Vec::with_capacity(users.len());
            for user in users {
                let deleting: Vec<&(String, String)> =
                    deletions.iter().filter(|(u, _)| u == user).collect();
                let missing = deleting.iter().any(|(u, mechanism)| {
                    !image
                        .scram_credentials
                        .get(u)
                        .is_some_and(|m| m.contains_key(mechanism))
                });
                if missing {
                    results.push(ItemResult::error(
                        error_code::RESOURCE_NOT_FOUND,
                        "Attempt to delete a user credential that does not exist",
                    ));
                    continue;
                }
                for (user, mechanism) in deleting {
                    records.push(MetadataRecord::SetUserScramCredential {
                        user: user.clone(),
                        mechanism: mechanism.clone(),
                        credential: None,
                    });
                }
                for (user, mechanism, credential) in upsertions.iter().filter(|(u, ..)| u == user) {
                    records.push(MetadataRecord::SetUserScramCredential {
                        user: user.clone(),
                        mechanism: mechanism.clone(),
                        credential: Some(credential.clone()),
                    });
                }
                results.push(ItemResult::ok());
            }
            ControllerReply::Results(results)
        }
        ControllerCommand::AlterClientQuotas { alterations } => {
            // As Kafka: an entity altered twice keeps the first alteration's changes and
            // answers the second's refusal.
            let mut quotas = image.client_quotas.clone();
            let mut seen = std::collections::BTreeSet::new();
            let results = alterations
                .iter()
                .map(|(entity, ops)| {
                    let named: crate::client_quotas::QuotaEntity = entity.iter().cloned().collect();
                    if !seen.insert(named) {
                        return ItemResult::error(
                            error_code::INVALID_REQUEST,
                            format!(
                                "Ignoring duplicate entity {}",
                                crate::client_quotas::entity_text(entity)
                            ),
                        );
                    }
                    match quotas.check_alteration(entity, ops) {
                        Err((code, message)) => ItemResult::error(code, message),
                        Ok((entity, changes)) => {
                            for (key, value) in changes {
                                quotas.set(&entity, &key, value);
                                records.push(MetadataRecord::SetClientQuota {
                                    entity: entity.clone(),
                                    key,
                                    value,
                                });
                            }
                            ItemResult::ok()
                        }
                    }
                })
                .collect::<Vec<_>>();
            bounded(&mut records, results)
        }
        ControllerCommand::CreateAcls { acls } => {
            let mut added = std::collections::BTreeSet::new();
            for acl in acls {
                if !image.acls.contains(acl) && added.insert(acl) {
                    records.push(MetadataRecord::CreateAcl(acl.clone()));
                }
            }
            bounded(
                &mut records,
                acls.iter().map(|_| ItemResult::ok()).collect(),
            )
        }
        ControllerCommand::DeleteAcls { filters } => {
            let mut removed = std::collections::BTreeSet::new();
            let matched = filters
                .iter()
                .map(|filter| {
                    let acls: Vec<AclBinding> = image.acls.matching(filter).cloned().collect();
                    for acl in &acls {
                        if removed.insert(acl.clone()) {
                            records.push(MetadataRecord::DeleteAcl(acl.clone()));
                        }
                    }
                    acls
                })
                .collect();
            if records.len() > MAX_RECORDS_PER_USER_OP {
                records.clear();
                ControllerReply::DeletedAcls(Err(excessive_batch()))
            } else {
                ControllerReply::DeletedAcls(Ok(matched))
            }
        }
        ControllerCommand::SetBrokerConfigs { broker, configs } => {
            records.push(MetadataRecord::SetBrokerConfigs {
                broker: *broker,
                configs: configs.clone(),
            });
            let min_isr = eligible_leaders::MIN_INSYNC_REPLICAS;
            if broker.is_none() && image.default_broker_configs.get(min_isr) != configs.get(min_isr)
            {
                clear_elr(image, None, &mut records);
            }
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::AlterPartition {
            topic,
            partition,
            leader,
            leader_epoch,
            partition_epoch,
            isr,
        } => ControllerReply::Partition(
            alter_partition(
                image,
                topic,
                *partition,
                *leader,
                *leader_epoch,
                *partition_epoch,
                isr,
            )
            .inspect(|state| {
                records.push(MetadataRecord::ChangePartition {
                    topic: topic.clone(),
                    partition: *partition,
                    state: state.clone(),
                });
            }),
        ),
        ControllerCommand::ReplicaFailed {
            id,
            incarnation,
            topic,
            partition,
        } => {
            let registered = image
                .brokers
                .get(id)
                .is_some_and(|b| b.incarnation == *incarnation);
            let state = image.partition(topic, *partition);
            ControllerReply::single(match (registered, state) {
                (false, _) => ItemResult::error(
                    error_code::STALE_BROKER_EPOCH,
                    format!("broker {id} is not registered with this incarnation"),
                ),
                (true, None) => ItemResult::error(
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("{topic}-{partition} does not exist"),
                ),
                (true, Some(state)) => {
                    if let Some(next) = without_failed_replica(image, topic, state, *id) {
                        records.push(change(topic, *partition as usize, next));
                    }
                    ItemResult::ok()
                }
            })
        }
        ControllerCommand::ElectPreferredLeaders => {
            elect_leaders(image, Election::Preferred, None, &mut records);
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::ElectLeaders {
            election,
            partitions,
        } => ControllerReply::Elections(elect_leaders(
            image,
            *election,
            partitions.as_deref(),
            &mut records,
        )),
        ControllerCommand::AlterPartitionReassignments {
            reassignments,
            allow_replication_factor_change,
        } => {
            // Partitions of one request see each other's changes (one named twice).
            let mut scratch = image.clone();
            let results = reassignments
                .iter()
                .map(
                    |r| match alter_reassignment(&scratch, r, *allow_replication_factor_change) {
                        Ok(Some(mut state)) => {
                            if let Some(prev) = scratch.partition(&r.topic, r.partition) {
                                let rules = eligible_leaders::rules(&scratch, &r.topic);
                                // A cancel may elect uncleanly (a topic allowing it, no
                                // original replica in sync): a leader from outside the
                                // replicas known to hold every committed record.
                                let unclean = state.leader != prev.leader
                                    && state.leader != NO_LEADER
                                    && !prev.isr.contains(&state.leader)
                                    && !prev.elr.contains(&state.leader);
                                eligible_leaders::populate(prev, &mut state, rules, None);
                                eligible_leaders::finish(prev, &mut state, rules, unclean);
                            }
                            let record = change(&r.topic, r.partition as usize, state);
                            scratch.replay(&record);
                            records.push(record);
                            ItemResult::ok()
                        }
                        Ok(None) => ItemResult::ok(),
                        Err(error) => error,
                    },
                )
                .collect();
            ControllerReply::Results(results)
        }
        ControllerCommand::InitCluster {
            cluster_id,
            min_insync_replicas,
        } => {
            if image.cluster_id.is_none() {
                records.push(MetadataRecord::ClusterId {
                    id: cluster_id.clone(),
                });
                let min_isr = eligible_leaders::MIN_INSYNC_REPLICAS;
                let record = eligible_leaders::enabled(&image.features)
                    && !image.default_broker_configs.contains_key(min_isr);
                if let (true, Some(value)) = (record, min_insync_replicas) {
                    let mut configs = image.default_broker_configs.clone();
                    configs.insert(min_isr.to_string(), value.to_string());
                    records.push(MetadataRecord::SetBrokerConfigs {
                        broker: None,
                        configs,
                    });
                }
            }
            ControllerReply::single(ItemResult::ok())
        }
        ControllerCommand::AllocateProducerIds { count } => {
            let first = image.next_producer_id;
            let count = (*count).clamp(1, 1 << 20);
            records.push(MetadataRecord::ProducerIds {
                next: first + count,
            });
            ControllerReply::ProducerIds { first, count }
        }
    };
    (reply, records)
}

/// Decides `command` and replays its records onto `image`: how a command stored by an
/// older Strand replays, and a decision and its replay in one step for tests.
pub fn apply(
    image: &mut MetadataImage,
    command: &ControllerCommand,
) -> (ControllerReply, Vec<MetadataRecord>) {
    let (reply, records) = decide(image, command);
    for record in &records {
        image.replay(record);
    }
    (reply, records)
}

/// One partition of an AlterPartitionReassignments, with Kafka's errors for a topic or
/// partition that does not exist.
fn alter_reassignment(
    image: &MetadataImage,
    reassignment: &Reassignment,
    allow_replication_factor_change: bool,
) -> Result<Option<PartitionState>, ItemResult> {
    let Reassignment {
        topic,
        partition,
        target,
    } = reassignment;
    let Some(topic_image) = image.topic(topic) else {
        return Err(ItemResult::error(
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("Unable to find a topic named {topic}."),
        ));
    };
    let Some(state) = usize::try_from(*partition)
        .ok()
        .and_then(|index| topic_image.partitions.get(index))
    else {
        return Err(ItemResult::error(
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("Unable to find partition {topic}:{partition}."),
        ));
    };
    match target {
        Some(target) => {
            reassignment::reassign(image, state, target, allow_replication_factor_change)
        }
        None => reassignment::cancel(
            image,
            topic,
            *partition,
            state,
            unclean_allowed(image, topic),
        ),
    }
}

/// Elections for `partitions` (None: every partition, answering only those where one was
/// needed), with Kafka's outcomes: UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED (the
/// preferred replica leads already; for unclean, the partition has a leader),
/// PREFERRED_LEADER_NOT_AVAILABLE (not in the ISR or not eligible),
/// ELIGIBLE_LEADERS_NOT_AVAILABLE (no eligible replica at all).
fn elect_leaders(
    image: &MetadataImage,
    election: Election,
    partitions: Option<&[(String, i32)]>,
    records: &mut Vec<MetadataRecord>,
) -> Vec<TopicElections> {
    let all = partitions.is_none();
    let asked = match partitions {
        Some(list) => by_topic(list),
        None => image
            .topics
            .iter()
            .map(|(name, topic)| (name.clone(), (0..topic.partitions.len() as i32).collect()))
            .collect(),
    };
    asked
        .into_iter()
        .map(|(topic, partitions)| {
            let mut results = Vec::new();
            for partition in partitions {
                let result = match image.partition(&topic, partition) {
                    None => unknown_partition(&topic, partition, image.topic(&topic).is_some()),
                    Some(state) => match elected(image, &topic, state, election) {
                        Ok(next) => {
                            records.push(change(&topic, partition as usize, next));
                            ItemResult::ok()
                        }
                        Err(code) => ItemResult::error(code, election_message(code)),
                    },
                };
                if !(all && result.code == error_code::ELECTION_NOT_NEEDED) {
                    results.push((partition, result));
                }
            }
            TopicElections {
                topic,
                partitions: results,
            }
        })
        .collect()
}

/// (topic, partition) pairs grouped by topic, topics in the order first named.
pub fn by_topic(partitions: &[(String, i32)]) -> Vec<(String, Vec<i32>)> {
    let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|(t, _)| t == topic) {
            Some((_, list)) => list.push(*partition),
            None => topics.push((topic.clone(), vec![*partition])),
        }
    }
    topics
}

/// The partition after `election`, or why there is none.
fn elected(
    image: &MetadataImage,
    topic: &str,
    state: &PartitionState,
    election: Election,
) -> Result<PartitionState, i16> {
    let rules = eligible_leaders::rules(image, topic);
    let eligible = |id: BrokerId| image.is_eligible(id);
    let mut next = state.clone();
    eligible_leaders::populate(state, &mut next, rules, None);
    let mut unclean = false;
    match election {
        Election::Preferred => {
            let preferred = state.replicas.first().copied().unwrap_or(NO_LEADER);
            if state.leader == preferred {
                return Err(error_code::ELECTION_NOT_NEEDED);
            }
            if !eligible_leaders::valid_new_leader(&next, preferred, rules.enabled, eligible) {
                return Err(error_code::PREFERRED_LEADER_NOT_AVAILABLE);
            }
            eligible_leaders::take_leader(&mut next, preferred);
        }
        Election::Unclean => {
            if state.leader != NO_LEADER {
                return Err(error_code::ELECTION_NOT_NEEDED);
            }
            unclean = elect_any(&mut next, eligible, rules.enabled, true)
                .ok_or(error_code::ELIGIBLE_LEADERS_NOT_AVAILABLE)?;
        }
    }
    next.leader_epoch += 1;
    next.partition_epoch += 1;
    eligible_leaders::finish(state, &mut next, rules, unclean);
    Ok(next)
}

/// Kafka's electAnyLeader for `next`, whose ISR is as the change leaves it: the first
/// valid new leader in replica order (an ISR member, or an ELR member while the ISR is
/// empty), else the last known leader, else (`unclean_allowed`) the first eligible
/// replica. Sets the leader and the ISR; Some(whether the election was unclean), None
/// when nobody may lead.
fn elect_any(
    next: &mut PartitionState,
    eligible: impl Fn(BrokerId) -> bool + Copy,
    elr_enabled: bool,
    unclean_allowed: bool,
) -> Option<bool> {
    let clean = next
        .replicas
        .iter()
        .copied()
        .find(|&id| eligible_leaders::valid_new_leader(next, id, elr_enabled, eligible));
    if let Some(leader) = clean {
        eligible_leaders::take_leader(next, leader);
        return Some(false);
    }
    let unclean =
        eligible_leaders::last_known_leader(next, elr_enabled, eligible).or_else(|| {
            unclean_allowed
                .then(|| next.replicas.iter().copied().find(|&id| eligible(id)))
                .flatten()
        })?;
    next.leader = unclean;
    next.isr = vec![unclean];
    // An ISR of the target alone may complete a reassignment.
    reassignment::complete_if_in_sync(next);
    Some(true)
}

/// ElectLeaders' answer for a partition that does not exist, in Kafka's words.
pub fn unknown_partition(topic: &str, partition: i32, topic_exists: bool) -> ItemResult {
    let message = if topic_exists {
        format!("No such partition as {topic}-{partition}")
    } else {
        format!("No such topic as {topic}")
    };
    ItemResult::error(error_code::UNKNOWN_TOPIC_OR_PARTITION, message)
}

/// ElectLeaders' answer where the wanted leader leads already.
pub fn election_not_needed() -> ItemResult {
    let code = error_code::ELECTION_NOT_NEEDED;
    ItemResult::error(code, election_message(code))
}

/// Kafka's default messages of the election errors (ApiError without a message).
fn election_message(code: i16) -> &'static str {
    match code {
        error_code::ELECTION_NOT_NEEDED => "Leader election not needed for topic partition.",
        error_code::PREFERRED_LEADER_NOT_AVAILABLE => "The preferred leader was not available.",
        _ => "Eligible topic partition leaders are not available.",
    }
}

fn change(topic: &str, index: usize, state: PartitionState) -> MetadataRecord {
    MetadataRecord::ChangePartition {
        topic: topic.to_string(),
        partition: index as i32,
        state,
    }
}

fn unclean_allowed(image: &MetadataImage, topic: &str) -> bool {
    image
        .topic(topic)
        .and_then(|t| t.configs.get("unclean.leader.election.enable"))
        .is_some_and(|value| value == "true")
}

/// `broker` may no longer lead or stay in ISRs (fenced, shutting down, or a new
/// incarnation): removes it from every ISR and moves each of its leaderships to the first
/// eligible ISR member in replica order (or ELR member, the ISR being empty; or the last
/// known leader; or, where the topic allows unclean election, any eligible replica).
/// Without eligible leader replicas, the last ISR member stays in the ISR of a partition
/// left without a leader (the last replica known to have every committed record); with
/// them, it leaves the ISR for the ELR. `unclean_shutdown`: the broker restarted without
/// a clean shutdown, so it leaves the ELRs too.
fn move_away(
    image: &MetadataImage,
    broker: BrokerId,
    unclean_shutdown: bool,
    records: &mut Vec<MetadataRecord>,
) {
    let eligible = |id: BrokerId| id != broker && image.is_eligible(id);
    for (name, topic) in &image.topics {
        let rules = eligible_leaders::rules(image, name);
        for (index, state) in topic.partitions.iter().enumerate() {
            let leads = state.leader == broker;
            let in_isr = state.isr.contains(&broker);
            let in_elr = unclean_shutdown && state.elr.contains(&broker);
            if !leads && !in_isr && !in_elr {
                continue;
            }
            let mut next = state.clone();
            if in_isr && (state.isr.len() > 1 || rules.enabled) {
                next.isr.retain(|&id| id != broker);
            }
            eligible_leaders::populate(state, &mut next, rules, unclean_shutdown.then_some(broker));
            // Kafka elects for every partition it changes: one this broker led, and one
            // without a leader whose ELR or last known leader the change may free.
            let mut unclean = false;
            if leads || state.leader == NO_LEADER {
                let allowed = unclean_allowed(image, name);
                match elect_any(&mut next, eligible, rules.enabled, allowed) {
                    Some(was_unclean) => {
                        unclean = was_unclean;
                        next.leader_epoch += 1;
                    }
                    None if leads => {
                        next.leader = NO_LEADER;
                        next.leader_epoch += 1;
                    }
                    None => {}
                }
            }
            eligible_leaders::finish(state, &mut next, rules, unclean);
            if next != *state {
                next.partition_epoch += 1;
                records.push(change(name, index, next));
            }
        }
    }
}

/// A partition without `broker`'s failed replica: out of the ISR and the ELR (it may have
/// lost records) and, if it led, led by the first other in-sync, eligible replica (or,
/// the ISR being empty, ELR member). None when nothing changes: the broker is in neither,
/// or it is the only replica that may lead (taking it out would leave the partition
/// without a leader and lose what it still serves).
fn without_failed_replica(
    image: &MetadataImage,
    topic: &str,
    state: &PartitionState,
    broker: BrokerId,
) -> Option<PartitionState> {
    let in_isr = state.isr.contains(&broker);
    if !in_isr && !state.elr.contains(&broker) {
        return None;
    }
    let rules = eligible_leaders::rules(image, topic);
    let mut next = state.clone();
    next.isr.retain(|&id| id != broker);
    eligible_leaders::populate(state, &mut next, rules, Some(broker));
    let mut unclean = false;
    if state.leader == broker {
        let eligible = |id: BrokerId| id != broker && image.is_eligible(id);
        unclean = elect_any(&mut next, eligible, rules.enabled, false)?;
        next.leader_epoch += 1;
    } else if in_isr && next.isr.is_empty() {
        return None;
    }
    eligible_leaders::finish(state, &mut next, rules, unclean);
    next.partition_epoch += 1;
    Some(next)
}

/// Gives leaderless partitions a leader where an ISR member (or, the ISR being empty, an
/// ELR member or the last known leader) is eligible again, or, for topics allowing
/// unclean election, any eligible replica.
fn elect_leaderless(image: &MetadataImage, records: &mut Vec<MetadataRecord>) {
    let eligible = |id: BrokerId| image.is_eligible(id);
    for (name, topic) in &image.topics {
        let rules = eligible_leaders::rules(image, name);
        for (index, state) in topic.partitions.iter().enumerate() {
            if state.leader != NO_LEADER {
                continue;
            }
            let mut next = state.clone();
            eligible_leaders::populate(state, &mut next, rules, None);
            let Some(unclean) = elect_any(
                &mut next,
                eligible,
                rules.enabled,
                unclean_allowed(image, name),
            ) else {
                continue;
            };
            next.leader_epoch += 1;
            next.partition_epoch += 1;
            eligible_leaders::finish(state, &mut next, rules, unclean);
            records.push(change(name, index, next));
        }
    }
}

/// The ELR of `topic`'s partitions (None: every topic's) cleared, as Kafka's
/// ClearElrRecord after a change of min.insync.replicas.
fn clear_elr(image: &MetadataImage, topic: Option<&String>, records: &mut Vec<MetadataRecord>) {
    for (name, topic_image) in &image.topics {
        if topic.is_some_and(|only| only != name) {
            continue;
        }
        for (index, state) in topic_image.partitions.iter().enumerate() {
            if let Some(next) = eligible_leaders::cleared(state) {
                records.push(change(name, index, next));
            }
        }
    }
}

fn placement_brokers(image: &MetadataImage) -> Vec<(BrokerId, Option<String>)> {
    let live: Vec<(BrokerId, Option<String>)> = image
        .brokers
        .values()
        .filter(|b| b.is_eligible())
        .map(|b| (b.id, b.rack.clone()))
        .collect();
    rack_alternated(&live)
}

fn seed_of(id: &Uuid) -> u64 {
    let bytes = id.as_bytes();
    u64::from_be_bytes(bytes[..8].try_into().expect("a uuid has 16 bytes"))
}

fn create_topic(image: &MetadataImage, topic: &NewTopic) -> Result<MetadataRecord, ItemResult> {
    if image.topic(&topic.name).is_some() {
        return Err(ItemResult::error(
            error_code::TOPIC_ALREADY_EXISTS,
            format!("Topic '{}' already exists.", topic.name),
        ));
    }
    let collision = |name: &str| name.replace('.', "_");
    if let Some(colliding) = image
        .topics
        .keys()
        .find(|name| collision(name) == collision(&topic.name))
    {
        return Err(ItemResult::error(
            error_code::INVALID_TOPIC_EXCEPTION,
            format!(
                "Topic '{}' collides with existing topic: {colliding}",
                topic.name
            ),
        ));
    }
    let replicas = if topic.assignments.is_empty() {
        if topic.partitions <= 0 {
            return Err(ItemResult::error(
                error_code::INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            ));
        }
        if topic.partitions > PARTITIONS_PER_TOPIC_MAX {
            return Err(ItemResult::error(
                error_code::INVALID_PARTITIONS,
                format!(
                    "Number of partitions {} exceeds the limit of {PARTITIONS_PER_TOPIC_MAX}.",
                    topic.partitions
                ),
            ));
        }
        let rf = topic.replication_factor;
        if rf <= 0 {
            return Err(ItemResult::error(
                error_code::INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            ));
        }
        let brokers = placement_brokers(image);
        if rf as usize > brokers.len() {
            return Err(ItemResult::error(
                error_code::INVALID_REPLICATION_FACTOR,
                format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered or some brokers have all their log directories cordoned.", brokers.len()),
            ));
        }
        assign_replicas(
            &brokers,
            0,
            topic.partitions as usize,
            rf as usize,
            seed_of(&topic.id),
        )
    } else {
        check_assignments(image, &topic.assignments)?;
        topic.assignments.clone()
    };
    Ok(MetadataRecord::CreateTopic {
        name: topic.name.clone(),
        id: topic.id,
        configs: topic.configs.clone(),
        partitions: replicas.into_iter().map(PartitionState::new).collect(),
    })
}

fn check_assignments(
    image: &MetadataImage,
    assignments: &[Vec<BrokerId>],
) -> Result<(), ItemResult> {
    if assignments.len() > PARTITIONS_PER_TOPIC_MAX as usize {
        return Err(ItemResult::error(
            error_code::INVALID_PARTITIONS,
            "Too many partitions in the assignment.",
        ));
    }
    let first_len = assignments.first().map(Vec::len);
    assignments
        .iter()
        .try_for_each(|replicas| check_replica_list(image, replicas, first_len))
}

fn add_partitions(
    image: &MetadataImage,
    name: &str,
    count: i32,
) -> Result<MetadataRecord, ItemResult> {
    let Some(topic) = image.topic(name) else {
        return Err(ItemResult::error(
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        ));
    };
    let current = topic.partitions.len() as i32;
    if count == current {
        return Err(ItemResult::error(
            error_code::INVALID_PARTITIONS,
            format!("Topic already has {count} partitions."),
        ));
    }
    if count < current {
        return Err(ItemResult::error(
            error_code::INVALID_PARTITIONS,
            format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
        ));
    }
    if count > PARTITIONS_PER_TOPIC_MAX {
        return Err(ItemResult::error(
            error_code::INVALID_PARTITIONS,
            format!(
                "Number of partitions {count} exceeds the limit of {PARTITIONS_PER_TOPIC_MAX}."
            ),
        ));
    }
    // The replication factor the first partition has once any reassignment is done (Kafka
    // counts the replicas being removed too, and would place more).
    let rf = topic
        .partitions
        .first()
        .map_or(1, |p| p.replicas.len() - p.removing_replicas.len());
    let brokers = placement_brokers(image);
    if rf > brokers.len() {
        return Err(ItemResult::error(
            error_code::INVALID_REPLICATION_FACTOR,
            format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered or some brokers have all their log directories cordoned.", brokers.len()),
        ));
    }
    let replicas = assign_replicas(
        &brokers,
        current as usize,
        (count - current) as usize,
        rf,
        seed_of(&topic.id),
    );
    Ok(MetadataRecord::AddPartitions {
        name: name.to_string(),
        partitions: replicas.into_iter().map(PartitionState::new).collect(),
    })
}

fn alter_partition(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    leader: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: &[BrokerId],
) -> Result<PartitionState, ItemResult> {
    let Some(state) = image.partition(topic, partition) else {
        return Err(ItemResult::error(
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{topic}-{partition} does not exist"),
        ));
    };
    if leader_epoch < state.leader_epoch || leader != state.leader {
        return Err(ItemResult::error(
            error_code::FENCED_LEADER_EPOCH,
            format!(
                "leader {leader} epoch {leader_epoch} is not the current leader {} epoch {}",
                state.leader, state.leader_epoch
            ),
        ));
    }
    if partition_epoch != state.partition_epoch || leader_epoch != state.leader_epoch {
        return Err(ItemResult::error(
            error_code::INVALID_UPDATE_VERSION,
            format!(
                "partition epoch {partition_epoch} is not the current {}",
                state.partition_epoch
            ),
        ));
    }
    let mut unique = isr.to_vec();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != isr.len()
        || !isr.contains(&leader)
        || isr.iter().any(|id| !state.replicas.contains(id))
    {
        return Err(ItemResult::error(
            error_code::INVALID_REQUEST,
            format!(
                "ISR {isr:?} must hold the leader and only replicas {:?}",
                state.replicas
            ),
        ));
    }
    if let Some(ineligible) = isr
        .iter()
        .find(|id| !state.isr.contains(id) && !image.is_eligible(**id))
    {
        return Err(ItemResult::error(
            error_code::INELIGIBLE_REPLICA,
            format!("broker {ineligible} is fenced or shutting down and cannot join the ISR"),
        ));
    }
    let mut next = state.clone();
    next.isr = isr.to_vec();
    // The ISR may now complete a reassignment in progress, which can move leadership.
    let mut next = reassignment::settle(image, state, next, false).unwrap_or_else(|| {
        let mut same = state.clone();
        same.partition_epoch += 1;
        same
    });
    eligible_leaders::record_change(state, &mut next, eligible_leaders::rules(image, topic));
    Ok(next)
}

#[cfg(test)]
mod tests;
