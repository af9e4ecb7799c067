//! ElectLeaders (43, kafka-leader-election, Admin.electLeaders): a preferred or unclean
//! leader election, decided by the active controller (`strand_metadata::decide`) and
//! answered once this broker's metadata shows the new leaders. On a single node every
//! partition is led by its only, preferred replica, so no election is ever needed.

use std::sync::Arc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use strand_metadata::{
    by_topic, election_not_needed, unknown_partition, ControllerCommand, ControllerReply, Election,
    ItemResult, TopicElections,
};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ElectLeadersRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let partitions: Option<Vec<(String, i32)>> = body.topic_partitions.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |&p| (t.topic.0.to_string(), p))
            })
            .collect()
    });
    // Kafka's check: ALTER on the cluster (every partition asked for answers the error).
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter)
    {
        let code = error_code::CLUSTER_AUTHORIZATION_FAILED;
        return answer(&request, code, failed(&partitions, code, ""));
    }
    // v0 has no election type: preferred.
    let election = match body.election_type {
        0 => Election::Preferred,
        1 => Election::Unclean,
        other => {
            let message = format!("Unknown election type {other}");
            let code = error_code::INVALID_REQUEST;
            return answer(&request, code, failed(&partitions, code, &message));
        }
    };
    let (code, results) = match broker.cluster() {
        Some(cluster) => {
            let command = ControllerCommand::ElectLeaders {
                election,
                partitions: partitions.clone(),
            };
            let before = cluster.image();
            match cluster.write(command).await {
                Ok(ControllerReply::Elections(results)) => {
                    // Answered once this broker routes to the new leaders, so that a
                    // Metadata request right after shows them.
                    let elected: Vec<(&str, i32, i32)> = results
                        .iter()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .filter(|(_, r)| r.is_ok())
                                .map(|(p, _)| {
                                    let epoch = before
                                        .partition(&t.topic, *p)
                                        .map_or(-1, |s| s.leader_epoch);
                                    (t.topic.as_str(), *p, epoch)
                                })
                        })
                        .collect();
                    cluster
                        .wait_for_image(|image| {
                            elected.iter().all(|(t, p, epoch)| {
                                image
                                    .partition(t, *p)
                                    .is_some_and(|s| s.leader_epoch > *epoch)
                            })
                        })
                        .await;
                    (error_code::NONE, results)
                }
                Ok(other) => {
                    let code = error_code::UNKNOWN_SERVER_ERROR;
                    (code, failed(&partitions, code, &format!("{other:?}")))
                }
                Err(error) => {
                    let message = error.message.unwrap_or_default();
                    (error.code, failed(&partitions, error.code, &message))
                }
            }
        }
        None => (error_code::NONE, single_node(broker, &partitions)),
    };
    answer(&request, code, results)
}

fn answer(
    request: &strand_protocol::ParsedRequest,
    code: i16,
    results: Vec<TopicElections>,
) -> Outcome {
    // v0 has no top-level error code; its partitions carry the error alone.
    let code = if request.header.request_api_version >= 1 {
        code
    } else {
        error_code::NONE
    };
    let response = ElectLeadersResponse::default()
        .with_error_code(code)
        .with_replica_election_results(
            results
                .into_iter()
                .map(|topic| {
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(str_bytes(topic.topic)))
                        .with_partition_result(
                            topic
                                .partitions
                                .into_iter()
                                .map(|(partition, result)| {
                                    PartitionResult::default()
                                        .with_partition_id(partition)
                                        .with_error_code(result.code)
                                        .with_error_message(result.message.map(str_bytes))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    respond(request, &response)
}

/// Partitions asked for, grouped by topic in the order asked, each with `result(topic,
/// partition)`.
fn per_partition(
    partitions: &Option<Vec<(String, i32)>>,
    mut result: impl FnMut(&str, i32) -> ItemResult,
) -> Vec<TopicElections> {
    by_topic(partitions.as_deref().unwrap_or_default())
        .into_iter()
        .map(|(topic, indexes)| TopicElections {
            partitions: indexes
                .into_iter()
                .map(|p| (p, result(&topic, p)))
                .collect(),
            topic,
        })
        .collect()
}

/// The same error for every partition asked.
fn failed(
    partitions: &Option<Vec<(String, i32)>>,
    code: i16,
    message: &str,
) -> Vec<TopicElections> {
    per_partition(partitions, |_, _| ItemResult::error(code, message))
}

/// One broker: its partitions are led by their only replica already. All partitions:
/// every topic, none needing an election.
fn single_node(broker: &Broker, partitions: &Option<Vec<(String, i32)>>) -> Vec<TopicElections> {
    if partitions.is_none() {
        return broker
            .topics()
            .into_iter()
            .map(|topic| TopicElections {
                topic: topic.name,
                partitions: Vec::new(),
            })
            .collect();
    }
    per_partition(partitions, |topic, partition| match broker.topic(topic) {
        Some(info) if (0..info.partitions).contains(&partition) => election_not_needed(),
        known => unknown_partition(topic, partition, known.is_some()),
    })
}
