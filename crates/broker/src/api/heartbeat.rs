//! Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::broker::Broker;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: HeartbeatRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let code = broker
        .groups
        .heartbeat(
            broker,
            body.group_id.as_str(),
            body.member_id.as_str(),
            body.group_instance_id.as_ref().map(|i| i.as_str()),
            body.generation_id,
        )
        .await;
    respond(
        &request,
        &HeartbeatResponse::default().with_error_code(code),
    )
}
