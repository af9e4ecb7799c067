//! LeaveGroup (13): one member (v0-v2) or a batch of members by id or instance id (v3+).

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

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
    let body: LeaveGroupRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        body.members
            .iter()
            .map(|m| {
                (
                    m.member_id.as_str().to_string(),
                    m.group_instance_id.as_ref().map(|i| i.as_str().to_string()),
                )
            })
            .collect()
    } else {
        vec![(body.member_id.as_str().to_string(), None)]
    };
    // Kafka's check: READ on the group.
    let allowed = broker
        .authorization(context)
        .allows_group(AclOperation::Read, body.group_id.as_str());
    let left = if allowed {
        broker
            .groups
            .leave(broker, body.group_id.as_str(), &members)
            .await
    } else {
        Err(error_code::GROUP_AUTHORIZATION_FAILED)
    };
    let response = match left {
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
        Ok(codes) if version >= 3 => LeaveGroupResponse::default()
            .with_error_code(error_code::NONE)
            .with_members(
                members
                    .into_iter()
                    .zip(codes)
                    .map(|((member_id, instance), code)| {
                        MemberResponse::default()
                            .with_member_id(super::str_bytes(member_id))
                            .with_group_instance_id(instance.map(super::str_bytes))
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        Ok(codes) => LeaveGroupResponse::default().with_error_code(codes[0]),
    };
    respond(&request, &response)
}
