//! OffsetFetch (9): committed offsets, -1 where none; one group (v1-v7) or several (v8+);
//! null topics means every committed partition of the group.

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::error_code;
use crate::group::coordinator::FetchedOffsets as Fetched;
use crate::group::records::CommittedOffset;
use crate::router::{decode, respond, Outcome};

type Unstable = std::collections::BTreeSet<(String, i32)>;
/// Per topic: (partition, committed offset) rows.
type ByTopic = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: OffsetFetchRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
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
            if !broker.groups.coordinates(broker, group.group_id.as_str()) {
                groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(group.group_id.clone())
                        .with_error_code(error_code::NOT_COORDINATOR),
                );
                continue;
            }
            let topics = group.topics.clone().map(|list| {
                list.into_iter()
                    .map(|t| (t.name, t.partition_indexes))
                    .collect()
            });
            let (fetched, unstable): (Fetched, Unstable) = match broker
                .groups
                .fetch_stable_offsets(
                    broker,
                    group.group_id.as_str(),
                    wanted(topics),
                    body.require_stable,
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
            let topics = grouped(stable(fetched, &unstable))
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(partition, offset)| {
                                    let code = error_of(&unstable, &topic, partition);
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
                        )
                })
                .collect();
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
    let (fetched, unstable) = match broker
        .groups
        .fetch_stable_offsets(
            broker,
            body.group_id.as_str(),
            wanted(topics),
            require_stable,
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
    let topics = grouped(stable(fetched, &unstable))
        .into_iter()
        .map(|(topic, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(partition, offset)| {
                            let code = error_of(&unstable, &topic, partition);
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

fn error_of(unstable: &Unstable, topic: &str, partition: i32) -> i16 {
    if unstable.contains(&(topic.to_string(), partition)) {
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
