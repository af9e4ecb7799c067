//! TxnOffsetCommit (28): offsets committed inside the producer's transaction, visible to
//! OffsetFetch once the transaction commits (docs/design/transactions.md §3.5). The group
//! coordinator first checks with the transaction coordinator that the group's partition
//! is in the producer's transaction (AddOffsetsToTxn added it), as Kafka 4 does. v6
//! names topics by id (an unknown id: UNKNOWN_TOPIC_ID) and answers the KIP-848 errors.

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use strand_log::TopicPartition;

use super::topic_ids;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::coordinator::TxnCommitter;
use crate::group::records::{partition_for, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS};
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::txn::verification::Operation;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: TxnOffsetCommitRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let by_id = version >= 6;
    let names = topic_ids::resolve_all(
        broker,
        by_id,
        body.topics.iter().map(|t| (&t.name, &t.topic_id)),
    );
    // Kafka's checks: WRITE on the transactional id, READ on the group (either refused
    // fails every partition), READ on each topic (else TOPIC_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    let refused = authorization
        .refuses_transactional_offsets(body.transactional_id.as_str(), body.group_id.as_str());
    let status: Vec<Result<String, i16>> = names
        .iter()
        .map(|name| match (refused, name) {
            (Some(code), _) => Err(code),
            (None, None) => Err(error_code::UNKNOWN_TOPIC_ID),
            (None, Some(name)) if !authorization.allows_topic(AclOperation::Read, name) => {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            (None, Some(name)) => Ok(name.clone()),
        })
        .collect();
    drop(authorization);
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = body
        .topics
        .iter()
        .zip(&status)
        .filter_map(|(topic, name)| Some((topic, name.clone().ok()?)))
        .flat_map(|(topic, name)| {
            topic.partitions.iter().map(move |p| {
                (
                    name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata
                        .as_ref()
                        .map(|m| m.as_str().to_string()),
                )
            })
        })
        .collect();
    let group_id = body.group_id.as_str();
    let index = partition_for(group_id, OFFSETS_TOPIC_PARTITIONS);
    let verified = if let Some(code) = refused {
        Err(code)
    } else if group_id.is_empty() {
        Err(error_code::INVALID_GROUP_ID)
    } else {
        crate::txn::verification::verify(
            broker,
            body.transactional_id.as_str(),
            body.producer_id.0,
            body.producer_epoch,
            &TopicPartition::new(OFFSETS_TOPIC, index),
            // v5 is transaction version 2: the offsets partition joins by this commit.
            if version >= 5 {
                Operation::Add
            } else {
                Operation::Verify
            },
        )
        .await
    };
    // The group shard's write is not guarded against a marker landing in between (its
    // pending offsets end with the marker anyway).
    let codes = match verified {
        Err(code) => vec![code; offsets.len()],
        Ok(_guard) => {
            let committer = TxnCommitter {
                producer_id: body.producer_id.0,
                producer_epoch: body.producer_epoch,
                generation_id: body.generation_id_or_member_epoch,
                member_id: body.member_id.as_str().to_string(),
                group_instance_id: body
                    .group_instance_id
                    .as_ref()
                    .map(|i| i.as_str().to_string()),
                api_version: version,
            };
            broker
                .groups
                .txn_commit(broker, group_id, committer, &offsets)
                .await
        }
    };
    let mut codes = codes.into_iter().map(|code| match code {
        // v0-1 know neither.
        error_code::COORDINATOR_LOAD_IN_PROGRESS if version < 2 => {
            error_code::COORDINATOR_NOT_AVAILABLE
        }
        error_code::TRANSACTION_ABORTABLE if version < 4 => error_code::INVALID_TXN_STATE,
        code => code,
    });
    let answered: Vec<(bool, TxnOffsetCommitResponseTopic)> = body
        .topics
        .iter()
        .zip(&status)
        .map(|(topic, name)| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = match name {
                        Ok(_) => codes.next().unwrap_or_default(),
                        Err(code) => *code,
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            let answer = TxnOffsetCommitResponseTopic::default().with_partitions(partitions);
            let answer = if by_id {
                answer.with_topic_id(topic.topic_id)
            } else {
                answer.with_name(topic.name.clone())
            };
            (*name != Err(error_code::UNKNOWN_TOPIC_ID), answer)
        })
        .collect();
    let topics = topic_ids::unknown_first(answered);
    respond(
        &request,
        &TxnOffsetCommitResponse::default().with_topics(topics),
    )
}
