//! AddPartitionsToTxn (24). v0-3 come from producers: the partitions join the
//! producer's transaction (docs/design/transactions.md §3.1). v4+ come from partition
//! leaders, several transactions at once, usually to verify only (KIP-890 part 1: a
//! transactional produce is appended only into a transaction the coordinator knows
//! has that partition).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::topic_name;
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
    let body: AddPartitionsToTxnRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let authorization = broker.authorization(context);
    if version <= 3 {
        // Kafka's checks: WRITE on the transactional id (else every partition
        // TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic.
        let partitions = flatten(&body.v3_and_below_topics);
        let id_allowed = authorization.allows_transactional_id(
            AclOperation::Write,
            body.v3_and_below_transactional_id.as_str(),
        );
        let may_write = |topic: &str| authorization.allows_topic(AclOperation::Write, topic);
        let checked = if id_allowed {
            known(broker, &partitions, Some(&may_write))
        } else {
            Some(vec![
                error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
                partitions.len()
            ])
        };
        let codes = match checked {
            Some(codes) => codes,
            None => {
                let code = broker
                    .txns
                    .add_partitions(
                        broker,
                        body.v3_and_below_transactional_id.as_str(),
                        body.v3_and_below_producer_id.0,
                        body.v3_and_below_producer_epoch,
                        partitions.clone(),
                        0,
                    )
                    .await;
                // v0-1 cannot read PRODUCER_FENCED.
                let code = if code == error_code::PRODUCER_FENCED && version <= 1 {
                    error_code::INVALID_PRODUCER_EPOCH
                } else {
                    code
                };
                vec![code; partitions.len()]
            }
        };
        let response = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(results(&partitions, &codes));
        return respond(&request, &response);
    }
    // A broker's request: Kafka's check is CLUSTER_ACTION on the cluster.
    if !authorization.allows_cluster(AclOperation::ClusterAction) {
        return respond(
            &request,
            &AddPartitionsToTxnResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    drop(authorization);
    let mut answers = Vec::with_capacity(body.transactions.len());
    for transaction in &body.transactions {
        let partitions = flatten(&transaction.topics);
        let id = transaction.transactional_id.as_str();
        // A broker's request: no topic authorization, internal topics included (a
        // TxnOffsetCommit verifies its `__consumer_offsets` partition this way).
        let codes = match known(broker, &partitions, None) {
            Some(codes) => codes,
            None if transaction.verify_only => match broker
                .txns
                .verify(
                    broker,
                    id,
                    transaction.producer_id.0,
                    transaction.producer_epoch,
                    partitions.clone(),
                )
                .await
            {
                Ok(codes) => codes,
                Err(code) => vec![code; partitions.len()],
            },
            None => {
                let code = broker
                    .txns
                    .add_partitions(
                        broker,
                        id,
                        transaction.producer_id.0,
                        transaction.producer_epoch,
                        partitions.clone(),
                        2,
                    )
                    .await;
                vec![code; partitions.len()]
            }
        };
        // v4 cannot read TRANSACTION_ABORTABLE (Kafka 3.x answered INVALID_TXN_STATE).
        let codes = codes
            .into_iter()
            .map(|code| {
                if code == error_code::TRANSACTION_ABORTABLE && version < 5 {
                    error_code::INVALID_TXN_STATE
                } else {
                    code
                }
            })
            .collect::<Vec<_>>();
        answers.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(transaction.transactional_id.clone())
                .with_topic_results(results(&partitions, &codes)),
        );
    }
    respond(
        &request,
        &AddPartitionsToTxnResponse::default().with_results_by_transaction(answers),
    )
}

fn flatten(topics: &[AddPartitionsToTxnTopic]) -> Vec<(String, i32)> {
    topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|p| (topic.name.as_str().to_string(), *p))
        })
        .collect()
}

/// Kafka's check before the coordinator: partitions the metadata does not know get
/// UNKNOWN_TOPIC_OR_PARTITION, internal topics TOPIC_AUTHORIZATION_FAILED when a client
/// names them (`from_client`: v0-3), and then every other one OPERATION_NOT_ATTEMPTED
/// (nothing is added). None when all are fine.
fn known(
    broker: &Broker,
    partitions: &[(String, i32)],
    client_may_write: Option<&dyn Fn(&str) -> bool>,
) -> Option<Vec<i16>> {
    let codes: Vec<i16> = partitions
        .iter()
        .map(|(topic, index)| {
            let refused = client_may_write.is_some_and(|may_write| {
                crate::topics::INTERNAL_TOPICS.contains(&topic.as_str()) || !may_write(topic)
            });
            if refused {
                error_code::TOPIC_AUTHORIZATION_FAILED
            } else if broker
                .topic(topic)
                .is_some_and(|t| (0..t.partitions).contains(index))
            {
                error_code::NONE
            } else {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            }
        })
        .collect();
    if codes.iter().all(|c| *c == error_code::NONE) {
        return None;
    }
    Some(
        codes
            .into_iter()
            .map(|c| {
                if c == error_code::NONE {
                    error_code::OPERATION_NOT_ATTEMPTED
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// Codes per partition, grouped by topic.
pub fn results(partitions: &[(String, i32)], codes: &[i16]) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: BTreeMap<&str, Vec<AddPartitionsToTxnPartitionResult>> = BTreeMap::new();
    for ((topic, index), code) in partitions.iter().zip(codes) {
        by_topic.entry(topic).or_default().push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*index)
                .with_partition_error_code(*code),
        );
    }
    by_topic
        .into_iter()
        .map(|(topic, results)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic_name(topic))
                .with_results_by_partition(results)
        })
        .collect()
}
