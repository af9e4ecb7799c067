//! SyncGroup (14): the leader's assignment reaches every member; followers wait for it.

use std::sync::Arc;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::group::classic::SyncResult;
use crate::group::coordinator::SyncRequest;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: SyncGroupRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let assignments = body
        .assignments
        .iter()
        .map(|a| (a.member_id.as_str().to_string(), a.assignment.clone()))
        .collect();
    let sync = SyncRequest {
        member_id: body.member_id.as_str(),
        group_instance_id: body.group_instance_id.as_ref().map(|i| i.as_str()),
        generation_id: body.generation_id,
        protocol_type: body.protocol_type.as_ref().map(|t| t.as_str()),
        protocol_name: body.protocol_name.as_ref().map(|n| n.as_str()),
        assignments,
    };
    // Kafka's check: READ on the group.
    let group = body.group_id.as_str();
    let result = if broker
        .authorization(context)
        .allows_group(AclOperation::Read, group)
    {
        broker.groups.sync(broker, group, sync).await
    } else {
        SyncResult::error(error_code::GROUP_AUTHORIZATION_FAILED)
    };
    let response = SyncGroupResponse::default()
        .with_error_code(result.error_code)
        .with_assignment(result.assignment);
    let response = if version >= 5 {
        response
            .with_protocol_type(result.protocol_type.map(str_bytes))
            .with_protocol_name(result.protocol_name.map(str_bytes))
    } else {
        response
    };
    respond(&request, &response)
}
