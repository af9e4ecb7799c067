//! OffsetFetch (9): committed offsets, -1 where none; one group (v1-v7) or several (v8+);
//! null topics means every committed partition of the group. v10 names topics by id:
//! an unknown id is answered UNKNOWN_TOPIC_ID after the group's topics, and the offsets
//! of a topic that no longer exists are left out of "all topics" (no id to name it by).

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::{str_bytes, topic_ids, topic_name};
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::coordinator::FetchedOffsets as Fetched;
use crate::group::records::CommittedOffset;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

type Unstable = std::collections::BTreeSet<(String, i32)>;
/// Per topic: (partition, committed offset) rows.
type ByTopic = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: OffsetFetchRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's checks: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on each
    // topic: a named one refused answers TOPIC_AUTHORIZATION_FAILED, and "all topics"
    // leaves out the ones the principal may not describe.
    let authorization = broker.authorization(context);
    let may_describe_group =
        |group: &str| authorization.allows_group(AclOperation::Describe, group);
    let may_describe_topic =
        |topic: &str| authorization.allows_topic(AclOperation::Describe, topic);
    // The partitions of named topics refused, and the offsets kept of the rest.
    let authorize = |wanted: Option<Vec<(String, i32)>>| -> (Option<Vec<(String, i32)>>, Unstable) {
        let Some(wanted) = wanted else {
            return (None, Unstable::new());
        };
        let (allowed, refused): (Vec<_>, Vec<_>) =
            wanted.into_iter().partition(|(t, _)| may_describe_topic(t));
        (Some(allowed), refused.into_iter().collect())
    };
    let visible = |fetched: Fetched, refused: &Unstable| -> Fetched {
        let mut rows: Fetched = fetched
            .into_iter()
            .filter(|(topic, _, _)| may_describe_topic(topic))
            .collect();
        rows.extend(refused.iter().map(|(t, p)| (t.clone(), *p, None)));
        rows
    };
    let version = request.header.request_api_version;
    let wanted = |topics: Option<Vec<(TopicName, Vec<i32>)>>| -> Option<Vec<(String, i32)>> {
        topics.map(|list| {
            list.into_iter()
                .flat_map(|(name, partitions)| {
                    partitions
                        .into_iter()
                        .map(move |p| (name.as_str().to_string(), p))
                })
                .collect()
        })
    };
    let epoch = |offset: &Option<CommittedOffset>| {
        if version >= 5 {
            offset.as_ref().map_or(-1, |o| o.leader_epoch)
        } else {
            -1
        }
    };
    if version >= 8 {
        let mut groups = Vec::with_capacity(body.groups.len());
        for group in &body.groups {
            if !may_describe_group(group.group_id.as_str()) {
                groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(group.group_id.clone())
                        .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
                );
                continue;
            }
            if !broker.groups.coordinates(broker, group.group_id.as_str()) {
                groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(group.group_id.clone())
                        .with_error_code(error_code::NOT_COORDINATOR),
                );
                continue;
            }
            let by_id = version >= 10;
            let mut unknown_ids = Vec::new();
            let topics = group.topics.clone().map(|list| {
                list.into_iter()
                    .filter_map(
                        |t| match topic_ids::resolve(broker, by_id, &t.name, &t.topic_id) {
                            Some(name) => Some((topic_name(&name), t.partition_indexes)),
                            None => {
                                unknown_ids.push((t.topic_id, t.partition_indexes));
                                None
                            }
                        },
                    )
                    .collect()
            });
            let (wanted, refused) = authorize(wanted(topics));
            let (fetched, unstable): (Fetched, Unstable) = match broker
                .groups
                .fetch_stable_offsets(
                    broker,
                    group.group_id.as_str(),
                    wanted,
                    body.require_stable,
                    (
                        group.member_id.as_ref().map(|m| m.to_string()),
                        group.member_epoch,
                    ),
                )
                .await
            {
                Ok(answer) => answer,
                Err(code) => {
                    groups.push(
                        OffsetFetchResponseGroup::default()
                            .with_group_id(group.group_id.clone())
                            .with_error_code(code),
                    );
                    continue;
                }
            };
            let fetched = visible(fetched, &refused);
            let known = grouped(stable(fetched, &unstable)).into_iter().filter_map(
                |(topic, partitions)| {
                    let answer = if by_id {
                        let id = topic_ids::id_of(broker, &topic);
                        if id.is_nil() {
                            return None;
                        }
                        OffsetFetchResponseTopics::default().with_topic_id(id)
                    } else {
                        OffsetFetchResponseTopics::default().with_name(topic_name(&topic))
                    };
                    Some(
                        answer.with_partitions(
                            partitions
                                .into_iter()
                                .map(|(partition, offset)| {
                                    let code = error_of(&unstable, &refused, &topic, partition);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(partition)
                                        .with_committed_offset(
                                            offset.as_ref().map_or(-1, |o| o.offset),
                                        )
                                        .with_committed_leader_epoch(epoch(&offset))
                                        .with_metadata(Some(str_bytes(
                                            offset.map(|o| o.metadata).unwrap_or_default(),
                                        )))
                                        .with_error_code(code)
                                })
                                .collect(),
                        ),
                    )
                },
            );
            let unknown = unknown_ids.into_iter().map(|(id, partitions)| {
                OffsetFetchResponseTopics::default()
                    .with_topic_id(id)
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|partition| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(partition)
                                    .with_committed_offset(-1)
                                    .with_committed_leader_epoch(-1)
                                    .with_metadata(Some(str_bytes("")))
                                    .with_error_code(error_code::UNKNOWN_TOPIC_ID)
                            })
                            .collect(),
                    )
            });
            let topics = known.chain(unknown).collect();
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id.clone())
                    .with_topics(topics)
                    .with_error_code(error_code::NONE),
            );
        }
        return respond(
            &request,
            &OffsetFetchResponse::default().with_groups(groups),
        );
    }
    if !may_describe_group(body.group_id.as_str()) {
        return respond(
            &request,
            &OffsetFetchResponse::default().with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
        );
    }
    if !broker.groups.coordinates(broker, body.group_id.as_str()) {
        return respond(
            &request,
            &OffsetFetchResponse::default().with_error_code(error_code::NOT_COORDINATOR),
        );
    }
    let topics = body.topics.clone().map(|list| {
        list.into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    let require_stable = version >= 7 && body.require_stable;
    let (wanted, refused) = authorize(wanted(topics));
    let (fetched, unstable) = match broker
        .groups
        .fetch_stable_offsets(
            broker,
            body.group_id.as_str(),
            wanted,
            require_stable,
            (None, -1),
        )
        .await
    {
        Ok(answer) => answer,
        Err(code) => {
            return respond(
                &request,
                &OffsetFetchResponse::default().with_error_code(code),
            )
        }
    };
    let fetched = visible(fetched, &refused);
    let topics = grouped(stable(fetched, &unstable))
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(partition, offset)| {
                            let code = error_of(&unstable, &refused, &topic, partition);
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset.as_ref().map_or(-1, |o| o.offset))
                                .with_committed_leader_epoch(epoch(&offset))
                                .with_metadata(Some(str_bytes(
                                    offset.map(|o| o.metadata).unwrap_or_default(),
                                )))
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    let response = OffsetFetchResponse::default().with_topics(topics);
    respond(
        &request,
        &if version >= 2 {
            response.with_error_code(error_code::NONE)
        } else {
            response
        },
    )
}

/// Hides the offsets of unstable partitions (Kafka answers them -1).
fn stable(fetched: Fetched, unstable: &Unstable) -> Fetched {
    fetched
        .into_iter()
        .map(|(topic, partition, offset)| {
            let offset = offset.filter(|_| !unstable.contains(&(topic.clone(), partition)));
            (topic, partition, offset)
        })
        .collect()
}

fn error_of(unstable: &Unstable, refused: &Unstable, topic: &str, partition: i32) -> i16 {
    let key = (topic.to_string(), partition);
    if refused.contains(&key) {
        error_code::TOPIC_AUTHORIZATION_FAILED
    } else if unstable.contains(&key) {
        error_code::UNSTABLE_OFFSET_COMMIT
    } else {
        error_code::NONE
    }
}

/// Groups (topic, partition, offset) rows by topic, keeping first-seen order.
fn grouped(rows: Fetched) -> ByTopic {
    let mut out: ByTopic = Vec::new();
    for (topic, partition, offset) in rows {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, partitions)) => partitions.push((partition, offset)),
            None => out.push((topic, vec![(partition, offset)])),
        }
    }
    out
}
