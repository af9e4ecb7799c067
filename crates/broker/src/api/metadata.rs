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
use crate::broker::{validate_topic_name, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::topics::TopicInfo;

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
    let mut topics = Vec::new();
    if all_topics {
        for topic in broker.topics() {
            topics.push(describe(broker, &topic));
        }
    } else {
        for requested in body.topics.unwrap_or_default() {
            // By id whenever one is given (the Java client sends an empty name with it),
            // as Kafka does; by name otherwise.
            topics.push(if !requested.topic_id.is_nil() {
                match broker.topic_by_id(&requested.topic_id) {
                    Some(topic) => describe(broker, &topic),
                    None => error_topic(None, requested.topic_id, error_code::UNKNOWN_TOPIC_ID),
                }
            } else {
                match requested.name {
                    Some(name) => describe_by_name(broker, name.as_str(), allow_auto_create).await,
                    None => error_topic(None, requested.topic_id, error_code::UNKNOWN_TOPIC_ID),
                }
            });
        }
    }
    if version >= 8 && body.include_topic_authorized_operations {
        for topic in topics
            .iter_mut()
            .filter(|t| t.error_code == error_code::NONE)
        {
            topic.topic_authorized_operations = super::authorized_operations::topic(true);
        }
    }
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
        .with_cluster_authorized_operations(if (8..=10).contains(&version) {
            super::authorized_operations::cluster(body.include_cluster_authorized_operations)
        } else {
            super::authorized_operations::OMITTED
        });
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
        .with_topic_authorized_operations(super::authorized_operations::OMITTED)
}

fn error_topic(name: Option<&str>, id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(topic_name))
        .with_topic_id(id)
        .with_topic_authorized_operations(super::authorized_operations::OMITTED)
}
