//! ListTransactions (66): the transactional ids this broker coordinates, filtered by
//! state, producer id, (v1) how long their transaction has run and (v2, KIP-1152) a
//! regular expression the whole id must match (RE2 syntax, as Kafka's RE2/J); the admin
//! client asks every broker (docs/design/transactions.md §8).

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::TransactionalId;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId};
use strand_coordinator::txn::shard::ListFilter;
use strand_coordinator::txn::state::TxnState;

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
    let body: ListTransactionsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let states: Vec<String> = body
        .state_filters
        .iter()
        .map(|s| s.as_str().to_string())
        .collect();
    let unknown: Vec<_> = states
        .iter()
        .filter(|name| TxnState::from_name(name).is_none())
        .map(|name| str_bytes(name.as_str()))
        .collect();
    let filter = ListFilter {
        states,
        producer_ids: body.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_ms: if request.header.request_api_version >= 1 {
            body.duration_filter
        } else {
            -1
        },
    };
    // An empty or null pattern filters nothing; a bad one is INVALID_REGULAR_EXPRESSION.
    let pattern = match body
        .transactional_id_pattern
        .as_ref()
        .filter(|p| request.header.request_api_version >= 2 && !p.is_empty())
    {
        None => None,
        Some(pattern) => match regex::Regex::new(&format!("^(?:{})$", pattern.as_str())) {
            Ok(pattern) => Some(pattern),
            Err(_) => {
                return respond(
                    &request,
                    &ListTransactionsResponse::default()
                        .with_error_code(error_code::INVALID_REGULAR_EXPRESSION),
                )
            }
        },
    };
    let mut listed = broker.txns.list(broker, filter).await;
    if let Some(pattern) = &pattern {
        listed.retain(|(id, _, _)| pattern.is_match(id));
    }
    // Kafka's check: only the transactional ids the principal may describe are listed.
    let authorization = broker.authorization(context);
    listed.retain(|(id, _, _)| authorization.allows_transactional_id(AclOperation::Describe, id));
    let response = ListTransactionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_unknown_state_filters(unknown)
        .with_transaction_states(
            listed
                .into_iter()
                .map(|(id, producer_id, state)| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(str_bytes(id)))
                        .with_producer_id(ProducerId(producer_id))
                        .with_transaction_state(str_bytes(state.name()))
                })
                .collect(),
        );
    respond(&request, &response)
}
