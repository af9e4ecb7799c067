//! JoinGroup (11): through the group coordinator's classic state machine. The answer may
//! wait until the rebalance's join phase completes (every member rejoined, or the
//! rebalance timeout passed). v4+ members first get MEMBER_ID_REQUIRED with their id.

use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::classic::JoinRequest;
use crate::group::classic::JoinResult;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let peer = context.peer;
    let body: JoinGroupRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let join = JoinRequest {
        member_id: body.member_id.as_str().to_string(),
        group_instance_id: body
            .group_instance_id
            .as_ref()
            .map(|i| i.as_str().to_string()),
        client_id: request
            .header
            .client_id
            .as_ref()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", peer.ip()),
        session_timeout_ms: body.session_timeout_ms,
        // v0 had no rebalance timeout: it was the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            body.rebalance_timeout_ms
        } else {
            body.session_timeout_ms
        },
        protocol_type: body.protocol_type.as_str().to_string(),
        protocols: body
            .protocols
            .iter()
            .map(|p| (p.name.as_str().to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    // Kafka's check: READ on the group.
    let group = body.group_id.as_str();
    let result = if broker
        .authorization(context)
        .allows_group(AclOperation::Read, group)
    {
        broker.groups.join(broker, group, join).await
    } else {
        JoinResult::error(error_code::GROUP_AUTHORIZATION_FAILED, "")
    };
    let members = result
        .members
        .into_iter()
        .map(|(member_id, instance, metadata)| {
            let member = JoinGroupResponseMember::default()
                .with_member_id(str_bytes(member_id))
                .with_metadata(metadata);
            if version >= 5 {
                member.with_group_instance_id(instance.map(str_bytes))
            } else {
                member
            }
        })
        .collect();
    let mut response = JoinGroupResponse::default()
        .with_error_code(result.error_code)
        .with_generation_id(result.generation_id)
        .with_leader(str_bytes(result.leader))
        .with_member_id(str_bytes(result.member_id))
        .with_members(members);
    if version >= 9 {
        response = response.with_skip_assignment(result.skip_assignment);
    }
    // The protocol name is a plain string before v7 and nullable after; the type only v7+.
    response = if version >= 7 {
        response
            .with_protocol_type(result.protocol_type.map(str_bytes))
            .with_protocol_name(result.protocol_name.map(str_bytes))
    } else {
        response.with_protocol_name(Some(str_bytes(result.protocol_name.unwrap_or_default())))
    };
    respond(&request, &response)
}
