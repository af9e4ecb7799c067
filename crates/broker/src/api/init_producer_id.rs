//! InitProducerId (22) for idempotent producers: a fresh producer id at epoch 0 each
//! time, as Kafka answers a request without a transactional id (it ignores any producer
//! id and epoch sent with it). Transactional ids need the transaction coordinator, which
//! Strand does not have yet: those get TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an error
//! clients treat as fatal, rather than a retriable one they would loop on.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
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
        match broker.producer_ids.next_id() {
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
