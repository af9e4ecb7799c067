//! ListGroups (16): every group, with its state (v4+, filterable) and type (v5+, "classic").

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
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
    let body: ListGroupsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    // Compared without case or underscores: Kafka's Admin sends "NotReady" for a streams
    // group's state and Kafka 4.4 matches "not_ready"; both are taken here.
    let normal = |state: &str| state.to_lowercase().replace('_', "");
    let states: Vec<String> = body
        .states_filter
        .iter()
        .map(|s| normal(s.as_str()))
        .collect();
    let types: Vec<String> = body
        .types_filter
        .iter()
        .map(|t| t.as_str().to_lowercase())
        .collect();
    // Kafka's check: DESCRIBE on the cluster lists every group, else the groups the
    // principal may describe.
    let listed = broker.groups.list(broker).await;
    let authorization = broker.authorization(context);
    let every_group = authorization.allows_cluster(AclOperation::Describe);
    let groups = listed
        .into_iter()
        .filter(|g| every_group || authorization.allows_group(AclOperation::Describe, &g.group_id))
        .filter(|g| states.is_empty() || states.contains(&normal(g.state_name)))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.group_type))
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_protocol_type(str_bytes(g.protocol_type));
            let listed = if version >= 4 {
                listed.with_group_state(str_bytes(g.state_name))
            } else {
                listed
            };
            if version >= 5 {
                listed.with_group_type(str_bytes(g.group_type))
            } else {
                listed
            }
        })
        .collect();
    respond(
        &request,
        &ListGroupsResponse::default()
            .with_error_code(error_code::NONE)
            .with_groups(groups),
    )
}
