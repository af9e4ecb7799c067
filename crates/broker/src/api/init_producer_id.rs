//! InitProducerId (22) for idempotent producers: a fresh producer id at epoch 0 each
//! time, as Kafka answers a request without a transactional id (it ignores any producer
//! id and epoch sent with it). Transactional ids need the transaction coordinator, which
//! Strand does not have yet: those get TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an error
//! clients treat as fatal, rather than a retriable one they would loop on.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use strand_metadata::{ControllerCommand, ControllerReply};

use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: InitProducerIdRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let response = InitProducerIdResponse::default();
    let response = if body.transactional_id.is_some() {
        response
            .with_error_code(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    } else {
        match next_producer_id(broker).await {
            Ok(id) => response
                .with_error_code(error_code::NONE)
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(error) => {
                tracing::error!(%error, "cannot allocate a producer id");
                response
                    .with_error_code(error_code::KAFKA_STORAGE_ERROR)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            }
        }
    };
    respond(&request, &response)
}

/// A single node allocates ids itself; a cluster member takes them from blocks the
/// controller hands out.
async fn next_producer_id(broker: &Broker) -> anyhow::Result<i64> {
    let Some(cluster) = broker.cluster() else {
        return broker.producer_ids.next_id();
    };
    loop {
        if let Some(id) = broker.producer_ids.take_from_block() {
            return Ok(id);
        }
        let command = ControllerCommand::AllocateProducerIds {
            count: crate::producer_ids::PRODUCER_ID_BLOCK_SIZE,
        };
        match cluster.write(command).await {
            Ok(ControllerReply::ProducerIds { first, count }) => {
                broker.producer_ids.install_block(first, count)
            }
            Ok(other) => anyhow::bail!("unexpected controller reply {other:?}"),
            Err(error) => anyhow::bail!("no producer id block: {error:?}"),
        }
    }
}
