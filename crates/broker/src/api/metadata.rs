//! Metadata (key 3): the brokers, the cluster id, and topics with ids, partitions,
//! leader, leader epoch, replicas, ISR and offline replicas. On a single node this broker
//! is everything; in a cluster the answer comes from the metadata image (live brokers
//! only; a partition without a leader says LEADER_NOT_AVAILABLE). Unknown topics are
//! created when the client allows it and auto.create.topics.enable is on, as Kafka does.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::partition_views::partition_views;
use super::{str_bytes, topic_name};
use crate::authorization::{AclOperation, ResourceType, OMITTED};
use crate::broker::{validate_topic_name, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::topics::TopicInfo;
use strand_security::authorizer::CLUSTER_NAME;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: MetadataRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all_topics =
        body.topics.is_none() || (version == 0 && body.topics.as_ref().is_some_and(Vec::is_empty));
    let allow_auto_create =
        (version < 4 || body.allow_auto_topic_creation) && broker.config.auto_create_topics;
    // Kafka's checks: DESCRIBE on each topic (all topics: the others are left out; named
    // ones: TOPIC_AUTHORIZATION_FAILED), and CREATE on the cluster or the topic to create
    // one that does not exist.
    let authorization = broker.authorization(context);
    let may_create = |name: &str| {
        authorization.allows_cluster(AclOperation::Create)
            || authorization.allows_topic(AclOperation::Create, name)
    };
    let mut topics = Vec::new();
    if all_topics {
        for topic in broker.topics() {
            if authorization.allows_topic(AclOperation::Describe, &topic.name) {
                topics.push(describe(broker, &topic));
            }
        }
    } else {
        for requested in body.topics.unwrap_or_default() {
            // By id whenever one is given (the Java client sends an empty name with it),
            // as Kafka does; by name otherwise.
            topics.push(if !requested.topic_id.is_nil() {
                match broker.topic_by_id(&requested.topic_id) {
                    Some(topic)
                        if !authorization.allows_topic(AclOperation::Describe, &topic.name) =>
                    {
                        // Ids are not secret: the refusal names the id, not the topic.
                        error_topic(
                            None,
                            requested.topic_id,
                            error_code::TOPIC_AUTHORIZATION_FAILED,
                        )
                    }
                    Some(topic) => describe(broker, &topic),
                    None => error_topic(None, requested.topic_id, error_code::UNKNOWN_TOPIC_ID),
                }
            } else {
                match requested.name {
                    Some(name)
                        if !authorization.allows_topic(AclOperation::Describe, name.as_str()) =>
                    {
                        error_topic(
                            Some(name.as_str()),
                            Uuid::nil(),
                            error_code::TOPIC_AUTHORIZATION_FAILED,
                        )
                    }
                    Some(name) => {
                        let create = allow_auto_create && may_create(name.as_str());
                        let refused = allow_auto_create && !create;
                        let mut topic = describe_by_name(broker, name.as_str(), create).await;
                        if refused && topic.error_code == error_code::UNKNOWN_TOPIC_OR_PARTITION {
                            topic.error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
                        }
                        topic
                    }
                    None => error_topic(None, requested.topic_id, error_code::UNKNOWN_TOPIC_ID),
                }
            });
        }
    }
    if version >= 8 && body.include_topic_authorized_operations {
        for topic in topics.iter_mut().filter(|t| {
            t.error_code != error_code::TOPIC_AUTHORIZATION_FAILED
                && t.error_code != error_code::UNKNOWN_TOPIC_ID
        }) {
            let name = topic.name.as_ref().map_or("", |n| n.as_str());
            topic.topic_authorized_operations =
                authorization.operations(true, ResourceType::Topic, name);
        }
    }
    let cluster_authorized_operations =
        if (8..=10).contains(&version) && body.include_cluster_authorized_operations {
            if authorization.allows_cluster(AclOperation::Describe) {
                authorization.operations(true, ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            }
        } else {
            OMITTED
        };
    drop(authorization);
    let (live, controller_id) = super::live_brokers(broker, context).await;
    let brokers = live
        .into_iter()
        .map(|(id, host, port, rack)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(port as i32)
                .with_rack(rack.map(str_bytes))
        })
        .collect();
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(broker.cluster_id())))
        .with_controller_id(BrokerId(controller_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_authorized_operations);
    respond(&request, &response)
}

async fn describe_by_name(
    broker: &Arc<Broker>,
    name: &str,
    allow_auto_create: bool,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.topic(name) {
        return describe(broker, &topic);
    }
    if let Err(error) = validate_topic_name(name) {
        return error_topic(Some(name), Uuid::nil(), error.code);
    }
    if !allow_auto_create {
        return error_topic(
            Some(name),
            Uuid::nil(),
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
        );
    }
    match broker
        .create_topic(name, -1, -1, Vec::new(), BTreeMap::new(), false)
        .await
    {
        Ok(topic) => describe(broker, &topic),
        // Lost a race with another creator: describe what exists.
        Err(error) if error.code == error_code::TOPIC_ALREADY_EXISTS => match broker.topic(name) {
            Some(topic) => describe(broker, &topic),
            None => error_topic(Some(name), Uuid::nil(), error_code::LEADER_NOT_AVAILABLE),
        },
        Err(error) => error_topic(Some(name), Uuid::nil(), error.code),
    }
}

fn describe(broker: &Arc<Broker>, topic: &TopicInfo) -> MetadataResponseTopic {
    let ids = |list: &[i32]| list.iter().map(|&id| BrokerId(id)).collect::<Vec<_>>();
    let partitions: Vec<MetadataResponsePartition> = partition_views(broker, topic, 0)
        .into_iter()
        .map(|view| {
            MetadataResponsePartition::default()
                .with_partition_index(view.index)
                .with_error_code(view.error_code)
                .with_leader_id(BrokerId(view.leader))
                .with_leader_epoch(view.leader_epoch)
                .with_replica_nodes(ids(&view.replicas))
                .with_isr_nodes(ids(&view.isr))
                .with_offline_replicas(ids(&view.offline))
        })
        .collect();
    if partitions.is_empty() && topic.partitions > 0 {
        return error_topic(
            Some(&topic.name),
            topic.id,
            error_code::LEADER_NOT_AVAILABLE,
        );
    }
    MetadataResponseTopic::default()
        .with_error_code(error_code::NONE)
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.is_internal())
        .with_partitions(partitions)
        .with_topic_authorized_operations(OMITTED)
}

fn error_topic(name: Option<&str>, id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(topic_name))
        .with_topic_id(id)
        .with_topic_authorized_operations(OMITTED)
}
