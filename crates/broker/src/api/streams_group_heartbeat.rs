//! StreamsGroupHeartbeat (88): Kafka Streams' own rebalance protocol (KIP-1071,
//! `group.protocol=streams`). The topology's topics are checked here as Kafka's KafkaApis
//! does (internal topics, names, DESCRIBE authorization); the group's state machine is
//! strand_coordinator's streams.rs; the internal topics it asks for are created here,
//! after the answer, with the caller's rights (group/streams_topics.rs).

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::streams_group_heartbeat_request::{TaskIds as WireTasks, TaskOffset};
use kafka_protocol::messages::streams_group_heartbeat_response::{
    Endpoint, EndpointToPartitions, Status, TaskIds, TopicPartition,
};
use kafka_protocol::messages::{StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse};

use super::{str_bytes, topic_name};
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use strand_coordinator::group::streams::{self, StreamsHeartbeat, Tasks, TopicPartitions};
use strand_coordinator::group::streams_records::{
    StoredCopartitionGroup, StoredSubtopology, StoredTopicInfo, StoredTopology, TaskIds as Ids,
};
use strand_coordinator::group::streams_topology::{self, STATUS_MISSING_INTERNAL_TOPICS};

/// Topics a Streams topology may never name (Kafka's internal topics).
const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];

fn refuse(code: i16, message: Option<String>) -> StreamsGroupHeartbeatResponse {
    StreamsGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(message.map(str_bytes))
}

fn ids(list: &[WireTasks]) -> Ids {
    let mut out = Ids::new();
    for task in list {
        out.entry(task.subtopology_id.to_string())
            .or_default()
            .extend(task.partitions.iter().copied());
    }
    out.retain(|_, partitions| !partitions.is_empty());
    out
}

fn wire_ids(ids: &Ids) -> Vec<TaskIds> {
    ids.iter()
        .map(|(s, ps)| {
            TaskIds::default()
                .with_subtopology_id(str_bytes(s.clone()))
                .with_partitions(ps.iter().copied().collect())
        })
        .collect()
}

fn offsets(list: &Option<Vec<TaskOffset>>) -> Option<Vec<(String, i32, i64)>> {
    list.as_ref().map(|list| {
        list.iter()
            .map(|o| (o.subtopology_id.to_string(), o.partition, o.offset))
            .collect()
    })
}

fn wire_partitions(partitions: &TopicPartitions) -> Vec<TopicPartition> {
    partitions
        .iter()
        .map(|(topic, ps)| {
            TopicPartition::default()
                .with_topic(topic_name(topic))
                .with_partitions(ps.iter().copied().collect())
        })
        .collect()
}

/// The request's topology in the form the group keeps (and writes) it.
fn topology_of(body: &StreamsGroupHeartbeatRequest) -> Option<StoredTopology> {
    let topology = body.topology.as_ref()?;
    let info = |t: &kafka_protocol::messages::streams_group_heartbeat_request::TopicInfo| {
        StoredTopicInfo {
            name: t.name.to_string(),
            partitions: t.partitions,
            replication_factor: t.replication_factor,
            configs: t
                .topic_configs
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect(),
        }
    };
    Some(StoredTopology {
        epoch: topology.epoch,
        subtopologies: topology
            .subtopologies
            .iter()
            .map(|s| StoredSubtopology {
                id: s.subtopology_id.to_string(),
                source_topics: s.source_topics.iter().map(|t| t.to_string()).collect(),
                source_topic_regex: s.source_topic_regex.iter().map(|t| t.to_string()).collect(),
                state_changelog_topics: s.state_changelog_topics.iter().map(info).collect(),
                repartition_sink_topics: s
                    .repartition_sink_topics
                    .iter()
                    .map(|t| t.to_string())
                    .collect(),
                repartition_source_topics: s.repartition_source_topics.iter().map(info).collect(),
                copartition_groups: s
                    .copartition_groups
                    .iter()
                    .map(|g| StoredCopartitionGroup {
                        source_topics: g.source_topics.clone(),
                        source_topic_regex: g.source_topic_regex.clone(),
                        repartition_source_topics: g.repartition_source_topics.clone(),
                    })
                    .collect(),
            })
            .collect(),
    })
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: StreamsGroupHeartbeatRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // streams.version 0 (kafka-features): the streams protocol is off, as on Kafka.
    if !broker.streams_groups_enabled() {
        return respond(&request, &refuse(error_code::UNSUPPORTED_VERSION, None));
    }
    let authorization = broker.authorization(context);
    if !authorization.allows_group(AclOperation::Read, body.group_id.as_str()) {
        return respond(
            &request,
            &refuse(error_code::GROUP_AUTHORIZATION_FAILED, None),
        );
    }
    let topology = topology_of(&body);
    if let Some(topology) = &topology {
        let names = streams_topology::topology_topics(topology);
        let internal: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|t| INTERNAL_TOPICS.contains(t))
            .collect();
        if !internal.is_empty() {
            return respond(
                &request,
                &refuse(
                    error_code::STREAMS_INVALID_TOPOLOGY,
                    Some(format!(
                        "Use of Kafka internal topics {} in a Kafka Streams topology is prohibited.",
                        internal.join(",")
                    )),
                ),
            );
        }
        let invalid: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|t| !streams_topology::valid_topic_name(t))
            .collect();
        if !invalid.is_empty() {
            return respond(
                &request,
                &refuse(
                    error_code::STREAMS_INVALID_TOPOLOGY,
                    Some(format!(
                        "Topic names {} are not valid topic names.",
                        invalid.join(",")
                    )),
                ),
            );
        }
        if names
            .iter()
            .any(|t| !authorization.allows_topic(AclOperation::Describe, t))
        {
            return respond(
                &request,
                &refuse(error_code::TOPIC_AUTHORIZATION_FAILED, None),
            );
        }
    }
    let lists = [&body.active_tasks, &body.standby_tasks, &body.warmup_tasks];
    let tasks = match lists {
        [Some(active), Some(standby), Some(warmup)] => Some(Tasks {
            active: ids(active),
            standby: ids(standby),
            warmup: ids(warmup),
        }),
        _ => None,
    };
    let partial_task_lists = if tasks.is_none() && lists.iter().any(|l| l.is_some()) {
        lists.map(|l| l.is_some())
    } else {
        [false; 3]
    };
    let heartbeat = StreamsHeartbeat {
        member_id: body.member_id.to_string(),
        member_epoch: body.member_epoch,
        endpoint_information_epoch: body.endpoint_information_epoch,
        instance_id: body.instance_id.as_ref().map(|i| i.to_string()),
        rack_id: body.rack_id.as_ref().map(|r| r.to_string()),
        rebalance_timeout_ms: body.rebalance_timeout_ms,
        topology,
        owned: tasks,
        partial_task_lists,
        process_id: body.process_id.as_ref().map(|p| p.to_string()),
        user_endpoint: body
            .user_endpoint
            .as_ref()
            .map(|e| (e.host.to_string(), e.port)),
        client_tags: body.client_tags.as_ref().map(|tags| {
            tags.iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect()
        }),
        task_offsets: offsets(&body.task_offsets),
        task_end_offsets: offsets(&body.task_end_offsets),
        shutdown_application: body.shutdown_application,
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", context.peer.ip()),
    };
    if let Err(e) = streams::validate(&heartbeat, body.group_id.as_str()) {
        return respond(&request, &refuse(e.code, Some(e.message)));
    }
    let response = match broker
        .groups
        .streams_heartbeat(broker, body.group_id.as_str(), heartbeat)
        .await
    {
        Err(e) => refuse(e.code, Some(e.message)),
        Ok(mut result) => {
            if !result.topics_to_create.is_empty() {
                // Kafka creates them only if the caller may: CREATE on the cluster or on
                // every one of them; then in the background, the answer does not wait.
                let topics = std::mem::take(&mut result.topics_to_create);
                let may_create = authorization.allows_cluster(AclOperation::Create)
                    || topics
                        .iter()
                        .all(|t| authorization.allows_topic(AclOperation::Create, &t.name));
                let note = if may_create {
                    broker.groups.streams_topics.create(broker, topics)
                } else {
                    let names: BTreeSet<&str> = topics.iter().map(|t| t.name.as_str()).collect();
                    Some(format!(
                        "; Unauthorized to CREATE on topics {}.",
                        names.into_iter().collect::<Vec<_>>().join(", ")
                    ))
                };
                if let Some(note) = note {
                    if let Some(status) = result
                        .statuses
                        .iter_mut()
                        .find(|(code, _)| *code == STATUS_MISSING_INTERNAL_TOPICS)
                    {
                        status.1.push_str(&note);
                    }
                }
            }
            let mut response = StreamsGroupHeartbeatResponse::default()
                .with_member_id(str_bytes(result.member_id))
                .with_member_epoch(result.member_epoch)
                .with_heartbeat_interval_ms(result.heartbeat_interval_ms)
                .with_task_offset_interval_ms(result.task_offset_interval_ms)
                .with_acceptable_recovery_lag(result.acceptable_recovery_lag)
                .with_status(Some(
                    result
                        .statuses
                        .into_iter()
                        .map(|(code, detail)| {
                            Status::default()
                                .with_status_code(code)
                                .with_status_detail(str_bytes(detail))
                        })
                        .collect(),
                ))
                .with_endpoint_information_epoch(result.endpoint_information_epoch);
            if let Some(tasks) = result.tasks {
                response = response
                    .with_active_tasks(Some(wire_ids(&tasks.active)))
                    .with_standby_tasks(Some(wire_ids(&tasks.standby)))
                    .with_warmup_tasks(Some(wire_ids(&tasks.warmup)));
            }
            if let Some(endpoints) = result.endpoints {
                response = response.with_partitions_by_user_endpoint(Some(
                    endpoints
                        .iter()
                        .map(|e| {
                            EndpointToPartitions::default()
                                .with_user_endpoint(
                                    Endpoint::default()
                                        .with_host(str_bytes(e.endpoint.0.clone()))
                                        .with_port(e.endpoint.1),
                                )
                                .with_active_partitions(wire_partitions(&e.active))
                                .with_standby_partitions(wire_partitions(&e.standby))
                        })
                        .collect(),
                ));
            }
            response
        }
    };
    respond(&request, &response)
}
