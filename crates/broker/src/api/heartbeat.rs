//! Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS tells it to rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

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
    let body: HeartbeatRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: READ on the group.
    if !broker
        .authorization(context)
        .allows_group(AclOperation::Read, body.group_id.as_str())
    {
        return respond(
            &request,
            &HeartbeatResponse::default().with_error_code(error_code::GROUP_AUTHORIZATION_FAILED),
        );
    }
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
