//! InitProducerId (22). Without a transactional id: a fresh producer id at epoch 0 each
//! time, as Kafka answers (it ignores any producer id and epoch sent with it). With one:
//! the transaction coordinator of that id (docs/design/transactions.md §2), which bumps
//! the epoch, fences an older instance and aborts its open transaction.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::authorization::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: InitProducerIdRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's checks: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the
    // cluster or WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED).
    let refused = {
        let authorization = broker.authorization(context);
        match body.transactional_id.as_ref() {
            Some(id) if !authorization.allows_transactional_id(AclOperation::Write, id) => {
                Some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            }
            None if !authorization.allows_cluster(AclOperation::IdempotentWrite)
                && !authorization.allows_some(AclOperation::Write, ResourceType::Topic) =>
            {
                Some(error_code::CLUSTER_AUTHORIZATION_FAILED)
            }
            _ => None,
        }
    };
    let version = request.header.request_api_version;
    let answer = |code: i16, producer_id: i64, producer_epoch: i16| {
        // v0-3 cannot read PRODUCER_FENCED.
        let code = if code == error_code::PRODUCER_FENCED && version <= 3 {
            error_code::INVALID_PRODUCER_EPOCH
        } else {
            code
        };
        let (producer_id, producer_epoch) = if code == error_code::NONE {
            (producer_id, producer_epoch)
        } else {
            (-1, -1)
        };
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
    };
    let response = match body.transactional_id.as_ref() {
        _ if refused.is_some() => answer(refused.unwrap_or_default(), -1, -1),
        Some(transactional_id) => {
            let expected = match (body.producer_id.0, body.producer_epoch) {
                (-1, -1) => Ok(None),
                (-1, _) | (_, -1) => Err(error_code::INVALID_REQUEST),
                (pid, epoch) => Ok(Some((pid, epoch))),
            };
            match expected {
                Err(code) => answer(code, -1, -1),
                Ok(expected) => {
                    let reply = broker
                        .txns
                        .init_producer_id(
                            broker,
                            transactional_id.as_str(),
                            body.transaction_timeout_ms,
                            expected,
                        )
                        .await;
                    answer(reply.code, reply.producer_id, reply.producer_epoch)
                }
            }
        }
        None => match next_producer_id(broker).await {
            Ok(id) => answer(error_code::NONE, id, 0),
            Err(error) => {
                tracing::error!(%error, "cannot allocate a producer id");
                answer(error_code::KAFKA_STORAGE_ERROR, -1, -1)
            }
        },
    };
    respond(&request, &response)
}

/// A single node allocates ids itself; a cluster member takes them from blocks the
/// controller hands out.
async fn next_producer_id(broker: &Broker) -> anyhow::Result<i64> {
    if broker.cluster().is_none() {
        return broker.producer_ids.next_id();
    }
    loop {
        if let Some(id) = broker.producer_ids.take_from_block() {
            return Ok(id);
        }
        crate::txn::coordinator::refill_producer_ids(broker).await?;
    }
}
