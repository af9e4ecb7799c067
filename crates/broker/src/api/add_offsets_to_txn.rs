//! AddOffsetsToTxn (25): adds the group's `__consumer_offsets` partition to the
//! producer's transaction, so its TxnOffsetCommit is committed or aborted with it (the
//! marker goes to that partition too).

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::broker::Broker;
use crate::error_code;
use crate::group::records::{partition_for, OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS};
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AddOffsetsToTxnRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    // Kafka's checks: WRITE on the transactional id, READ on the group.
    let refused = broker
        .authorization(context)
        .refuses_transactional_offsets(body.transactional_id.as_str(), body.group_id.as_str());
    let ensured = match refused {
        Some(code) => Err(crate::broker::ApiError {
            code,
            message: None,
        }),
        None => broker.groups.ensure_offsets_topic(broker).await,
    };
    let code = match ensured {
        Err(error) => error.code,
        Ok(()) => {
            let partition = partition_for(body.group_id.as_str(), OFFSETS_TOPIC_PARTITIONS);
            broker
                .txns
                .add_partitions(
                    broker,
                    body.transactional_id.as_str(),
                    body.producer_id.0,
                    body.producer_epoch,
                    vec![(OFFSETS_TOPIC.to_string(), partition)],
                    0,
                )
                .await
        }
    };
    // v0-1 cannot read PRODUCER_FENCED.
    let code = if code == error_code::PRODUCER_FENCED && version <= 1 {
        error_code::INVALID_PRODUCER_EPOCH
    } else {
        code
    };
    respond(
        &request,
        &AddOffsetsToTxnResponse::default().with_error_code(code),
    )
}
