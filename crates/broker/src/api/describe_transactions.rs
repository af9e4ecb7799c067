//! DescribeTransactions (65): the committed state of each transactional id this broker
//! coordinates (docs/design/transactions.md §8).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};

use super::{str_bytes, topic_name};
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
    let body: DescribeTransactionsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let mut states = Vec::with_capacity(body.transactional_ids.len());
    // Kafka's checks: DESCRIBE on each transactional id (else
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED); topics the principal may not describe are
    // left out of the answer.
    let authorization = broker.authorization(context);
    for id in &body.transactional_ids {
        let entry = TransactionState::default().with_transactional_id(id.clone());
        let described = if authorization.allows_transactional_id(AclOperation::Describe, id) {
            broker.txns.describe(broker, id.as_str()).await
        } else {
            Err(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        };
        states.push(match described {
            Err(code) => entry
                .with_error_code(code)
                .with_transaction_state(str_bytes(""))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1),
            Ok(described) => {
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, partition) in described
                    .partitions
                    .into_iter()
                    .filter(|(topic, _)| authorization.allows_topic(AclOperation::Describe, topic))
                {
                    by_topic.entry(topic).or_default().push(partition);
                }
                entry
                    .with_error_code(error_code::NONE)
                    .with_transaction_state(str_bytes(described.state.name()))
                    .with_transaction_timeout_ms(described.timeout_ms)
                    .with_transaction_start_time_ms(described.start_ms)
                    .with_producer_id(ProducerId(described.producer_id))
                    .with_producer_epoch(described.producer_epoch)
                    .with_topics(
                        by_topic
                            .into_iter()
                            .map(|(topic, partitions)| {
                                TopicData::default()
                                    .with_topic(topic_name(&topic))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    )
            }
        });
    }
    respond(
        &request,
        &DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}
