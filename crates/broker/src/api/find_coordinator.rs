//! FindCoordinator (10): a group's coordinator is the leader of its `__consumer_offsets`
//! partition, a transactional id's the leader of its `__transaction_state` partition (on
//! a single node, this broker). v4+ batches keys. The first lookup of each kind creates
//! its topic.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::records::{partition_for, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS};
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::txn::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};
use strand_coordinator::share::{SHARE_STATE_PARTITIONS, SHARE_STATE_TOPIC};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
/// A share-partition's share coordinator: "group:topicId:partition" (KIP-932).
const KEY_TYPE_SHARE: i8 = 2;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: FindCoordinatorRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let response = if version >= 4 {
        let mut coordinators = Vec::with_capacity(body.coordinator_keys.len());
        for key in &body.coordinator_keys {
            let entry = Coordinator::default().with_key(key.clone());
            coordinators.push(
                match lookup(broker, context, body.key_type, key.as_str()).await {
                    Ok((node, host, port)) => entry
                        .with_node_id(BrokerId(node))
                        .with_host(str_bytes(host))
                        .with_port(port)
                        .with_error_code(error_code::NONE),
                    Err((code, message)) => entry
                        .with_node_id(BrokerId(-1))
                        .with_host(str_bytes(String::new()))
                        .with_port(-1)
                        .with_error_code(code)
                        .with_error_message(message.map(str_bytes)),
                },
            );
        }
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let (response, message) =
            match lookup(broker, context, body.key_type, body.key.as_str()).await {
                Ok((node, host, port)) => (
                    FindCoordinatorResponse::default()
                        .with_error_code(error_code::NONE)
                        .with_node_id(BrokerId(node))
                        .with_host(str_bytes(host))
                        .with_port(port),
                    None,
                ),
                Err((code, message)) => (
                    FindCoordinatorResponse::default()
                        .with_error_code(code)
                        .with_node_id(BrokerId(-1))
                        .with_host(str_bytes(String::new()))
                        .with_port(-1),
                    message,
                ),
            };
        if version >= 1 {
            response.with_error_message(message.map(str_bytes))
        } else {
            response
        }
    };
    respond(&request, &response)
}

/// (node id, host, port) of the coordinator for `key`.
async fn lookup(
    broker: &Arc<Broker>,
    context: &RequestContext,
    key_type: i8,
    key: &str,
) -> Result<(i32, String, i32), (i16, Option<String>)> {
    // Kafka's checks: DESCRIBE on the group or the transactional id.
    let authorization = broker.authorization(context);
    if key_type == KEY_TYPE_GROUP && !authorization.allows_group(AclOperation::Describe, key) {
        return Err((error_code::GROUP_AUTHORIZATION_FAILED, None));
    }
    if key_type == KEY_TYPE_TRANSACTION
        && !authorization.allows_transactional_id(AclOperation::Describe, key)
    {
        return Err((error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None));
    }
    drop(authorization);
    let (topic, partitions) = match key_type {
        KEY_TYPE_GROUP => {
            broker
                .groups
                .ensure_offsets_topic(broker)
                .await
                .map_err(|error| (error.code, error.message))?;
            (OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS)
        }
        KEY_TYPE_TRANSACTION => {
            if key.is_empty() {
                return Err((error_code::INVALID_REQUEST, None));
            }
            broker
                .txns
                .ensure_topic(broker)
                .await
                .map_err(|error| (error.code, error.message))?;
            (TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_PARTITIONS)
        }
        KEY_TYPE_SHARE => {
            // Kafka's check for the brokers' own lookups: CLUSTER_ACTION.
            if !broker
                .authorization(context)
                .allows_cluster(AclOperation::ClusterAction)
            {
                return Err((error_code::CLUSTER_AUTHORIZATION_FAILED, None));
            }
            let parts: Vec<&str> = key.rsplitn(3, ':').collect();
            if parts.len() != 3 || parts[0].parse::<i32>().is_err() || parts[2].is_empty() {
                return Err((
                    error_code::INVALID_REQUEST,
                    Some(format!("Invalid coordinator key {key}")),
                ));
            }
            broker
                .share_coordinator
                .ensure_topic(broker)
                .await
                .map_err(|error| (error.code, error.message))?;
            (SHARE_STATE_TOPIC, SHARE_STATE_PARTITIONS)
        }
        other => {
            return Err((
                error_code::INVALID_REQUEST,
                Some(format!("Unknown coordinator type {other}")),
            ))
        }
    };
    let Some(cluster) = broker.cluster() else {
        let (host, port) = super::own_endpoint(context);
        return Ok((broker.node_id(), host, port as i32));
    };
    // A broker without the leadership lease may hold an image from before a failover
    // (cluster/lease.rs): it would name a coordinator that is no longer one.
    if !cluster.holds_leadership_lease() {
        return Err((
            error_code::COORDINATOR_NOT_AVAILABLE,
            Some("The coordinator is not available.".into()),
        ));
    }
    let image = cluster.image();
    let index = partition_for(key, partitions);
    image
        .partition(topic, index)
        .and_then(|p| image.brokers.get(&p.leader))
        .filter(|b| !b.fenced)
        .and_then(|b| {
            let (host, port) = b.endpoint(context.listener_name(), &broker.config.listener_name)?;
            Some((b.id, host.to_string(), port as i32))
        })
        .ok_or((
            error_code::COORDINATOR_NOT_AVAILABLE,
            Some("The coordinator is not available.".into()),
        ))
}
