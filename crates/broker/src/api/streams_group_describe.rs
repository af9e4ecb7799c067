//! StreamsGroupDescribe (89) and StreamsGroupTopologyDescriptionUpdate (93): streams
//! groups with their topology (its internal topics' partition counts once configured),
//! members, and each member's current and target tasks. Strand has no topology
//! description plugin, so API 93 answers UNSUPPORTED_VERSION as Kafka does without one,
//! and a describe that asks for the description gets status NOT_STORED.

use std::sync::Arc;

use kafka_protocol::messages::streams_group_describe_response::{
    Assignment, DescribedGroup, Endpoint, KeyValue, Member, Subtopology, TaskIds, TaskOffset,
    TopicInfo, Topology,
};
use kafka_protocol::messages::{
    StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
    StreamsGroupTopologyDescriptionUpdateResponse,
};

use super::{str_bytes, topic_name};
use crate::authorization::{AclOperation, ResourceType, OMITTED};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use strand_coordinator::group::streams::{StreamsGroup, Tasks, ASSIGNOR_STICKY};
use strand_coordinator::group::streams_records::{StoredTopicInfo, TaskIds as Ids};

/// TopologyDescriptionStatus: not asked for, or asked and none stored (no plugin).
const DESCRIPTION_NOT_REQUESTED: i8 = 0;
const DESCRIPTION_NOT_STORED: i8 = 1;

fn wire_ids(ids: &Ids) -> Vec<TaskIds> {
    ids.iter()
        .map(|(s, ps)| {
            TaskIds::default()
                .with_subtopology_id(str_bytes(s.clone()))
                .with_partitions(ps.iter().copied().collect())
        })
        .collect()
}

fn assignment(tasks: &Tasks) -> Assignment {
    Assignment::default()
        .with_active_tasks(wire_ids(&tasks.active))
        .with_standby_tasks(wire_ids(&tasks.standby))
        .with_warmup_tasks(wire_ids(&tasks.warmup))
}

fn offsets(map: &std::collections::BTreeMap<(String, i32), i64>) -> Vec<TaskOffset> {
    map.iter()
        .map(|((s, p), o)| {
            TaskOffset::default()
                .with_subtopology_id(str_bytes(s.clone()))
                .with_partition(*p)
                .with_offset(*o)
        })
        .collect()
}

/// The topology as described: once configured (ready) with the internal topics' decided
/// partition counts, else as the application sent it; sorted as Kafka sorts it.
fn topology(group: &StreamsGroup) -> Option<Topology> {
    let stored = group.topology.as_ref()?;
    let configured = group.configured().filter(|c| c.ready);
    let info = |t: &StoredTopicInfo, decided: Option<i32>| {
        TopicInfo::default()
            .with_name(topic_name(&t.name))
            .with_partitions(decided.unwrap_or(t.partitions))
            .with_replication_factor(t.replication_factor)
            .with_topic_configs(
                t.configs
                    .iter()
                    .map(|(k, v)| {
                        KeyValue::default()
                            .with_key(str_bytes(k.clone()))
                            .with_value(str_bytes(v.clone()))
                    })
                    .collect(),
            )
    };
    let mut subtopologies: Vec<Subtopology> = stored
        .subtopologies
        .iter()
        .map(|s| {
            let decided = configured.and_then(|c| c.subtopologies.get(&s.id));
            let mut sources = s.source_topics.clone();
            sources.sort();
            let mut sinks = s.repartition_sink_topics.clone();
            sinks.sort();
            let mut changelogs: Vec<TopicInfo> = s
                .state_changelog_topics
                .iter()
                .map(|t| {
                    info(
                        t,
                        decided.and_then(|d| d.changelog_topics.get(&t.name).copied()),
                    )
                })
                .collect();
            changelogs.sort_by(|a, b| a.name.cmp(&b.name));
            let mut repartition: Vec<TopicInfo> = s
                .repartition_source_topics
                .iter()
                .map(|t| {
                    info(
                        t,
                        decided.and_then(|d| d.repartition_source_topics.get(&t.name).copied()),
                    )
                })
                .collect();
            repartition.sort_by(|a, b| a.name.cmp(&b.name));
            Subtopology::default()
                .with_subtopology_id(str_bytes(s.id.clone()))
                .with_source_topics(sources.iter().map(|t| topic_name(t)).collect())
                .with_repartition_sink_topics(sinks.iter().map(|t| topic_name(t)).collect())
                .with_state_changelog_topics(changelogs)
                .with_repartition_source_topics(repartition)
        })
        .collect();
    subtopologies.sort_by(|a, b| a.subtopology_id.cmp(&b.subtopology_id));
    Some(
        Topology::default()
            .with_epoch(stored.epoch)
            .with_subtopologies(Some(subtopologies)),
    )
}

fn described(group: &StreamsGroup) -> DescribedGroup {
    DescribedGroup::default()
        .with_error_code(error_code::NONE)
        .with_group_state(str_bytes(group.state().name()))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_topology(topology(group))
        .with_assignor_name(Some(str_bytes(ASSIGNOR_STICKY)))
        .with_members(
            group
                .members
                .values()
                .map(|m| {
                    Member::default()
                        .with_member_id(str_bytes(m.member_id.clone()))
                        .with_member_epoch(m.member_epoch)
                        .with_instance_id(m.instance_id.clone().map(str_bytes))
                        .with_rack_id(m.rack_id.clone().map(str_bytes))
                        .with_client_id(str_bytes(m.client_id.clone()))
                        .with_client_host(str_bytes(m.client_host.clone()))
                        .with_topology_epoch(m.topology_epoch)
                        .with_process_id(str_bytes(m.process_id.clone()))
                        .with_user_endpoint(m.user_endpoint.as_ref().map(|(host, port)| {
                            Endpoint::default()
                                .with_host(str_bytes(host.clone()))
                                .with_port(*port)
                        }))
                        .with_client_tags(
                            m.client_tags
                                .iter()
                                .map(|(k, v)| {
                                    KeyValue::default()
                                        .with_key(str_bytes(k.clone()))
                                        .with_value(str_bytes(v.clone()))
                                })
                                .collect(),
                        )
                        .with_task_offsets(offsets(&m.task_offsets))
                        .with_task_end_offsets(offsets(&m.task_end_offsets))
                        .with_assignment(assignment(&m.assigned))
                        .with_target_assignment(assignment(
                            &group.target.get(&m.member_id).cloned().unwrap_or_default(),
                        ))
                        .with_is_classic(false)
                })
                .collect(),
        )
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: StreamsGroupDescribeRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let enabled = broker.streams_groups_enabled();
    let authorization = broker.authorization(context);
    let mut groups = Vec::with_capacity(body.group_ids.len());
    for group_id in &body.group_ids {
        let entry = DescribedGroup::default()
            .with_group_id(group_id.clone())
            .with_authorized_operations(OMITTED);
        if !enabled {
            groups.push(entry.with_error_code(error_code::UNSUPPORTED_VERSION));
            continue;
        }
        if !authorization.allows_group(AclOperation::Describe, group_id.as_str()) {
            groups.push(entry.with_error_code(error_code::GROUP_AUTHORIZATION_FAILED));
            continue;
        }
        if group_id.is_empty() {
            groups.push(entry.with_error_code(error_code::INVALID_GROUP_ID));
            continue;
        }
        let described_group = match broker
            .groups
            .describe_streams_group(broker, group_id.as_str())
            .await
        {
            Err((code, message)) => entry
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
            Ok(group) => {
                let topics = group
                    .topology
                    .as_ref()
                    .map(strand_coordinator::group::streams_topology::topology_topics)
                    .unwrap_or_default();
                if topics
                    .iter()
                    .any(|t| !authorization.allows_topic(AclOperation::Describe, t))
                {
                    entry
                        .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                        .with_error_message(Some(str_bytes(
                            "The described group uses topics that the client is not authorized to describe.",
                        )))
                } else {
                    described(&group)
                        .with_group_id(group_id.clone())
                        .with_authorized_operations(authorization.operations(
                            body.include_authorized_operations,
                            ResourceType::Group,
                            group_id.as_str(),
                        ))
                        .with_topology_description_status(if body.include_topology_description {
                            DESCRIPTION_NOT_STORED
                        } else {
                            DESCRIPTION_NOT_REQUESTED
                        })
                }
            }
        };
        groups.push(described_group);
    }
    respond(
        &request,
        &StreamsGroupDescribeResponse::default().with_groups(groups),
    )
}

/// StreamsGroupTopologyDescriptionUpdate (93): only with a topology description plugin,
/// which Strand does not have (Kafka answers the same without one).
pub async fn topology_description_update(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    _context: &RequestContext,
) -> Outcome {
    let message = broker.streams_groups_enabled().then(|| {
        str_bytes("The broker has no streams group topology description plugin configured.")
    });
    respond(
        &request,
        &StreamsGroupTopologyDescriptionUpdateResponse::default()
            .with_error_code(error_code::UNSUPPORTED_VERSION)
            .with_error_message(message),
    )
}
