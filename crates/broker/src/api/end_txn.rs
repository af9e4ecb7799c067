//! EndTxn (26): commits or aborts the producer's transaction. The reply goes out once
//! the decision (PrepareCommit / PrepareAbort) is durable in `__transaction_state`; the
//! markers follow (docs/design/transactions.md §3.3-3.4). v5 follows transaction
//! version 2 (an epoch bump on every transaction, returned to the client).

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

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
    let body: EndTxnRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let client_tv = if version >= 5 { 2 } else { 0 };
    // Kafka's check: WRITE on the transactional id.
    if !broker
        .authorization(context)
        .allows_transactional_id(AclOperation::Write, body.transactional_id.as_str())
    {
        return respond(
            &request,
            &EndTxnResponse::default()
                .with_error_code(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
    }
    let reply = broker
        .txns
        .end_txn(
            broker,
            body.transactional_id.as_str(),
            body.producer_id.0,
            body.producer_epoch,
            body.committed,
            client_tv,
        )
        .await;
    // v0-1 cannot read PRODUCER_FENCED.
    let code = if reply.code == error_code::PRODUCER_FENCED && version <= 1 {
        error_code::INVALID_PRODUCER_EPOCH
    } else {
        reply.code
    };
    let response = EndTxnResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(reply.producer_id))
        .with_producer_epoch(reply.producer_epoch);
    respond(&request, &response)
}
