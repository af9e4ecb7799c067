//! DescribeGroups (15): state, protocol, and members with their subscription and
//! assignment. An unknown group is Dead (v0-v5) or GROUP_ID_NOT_FOUND (v6), as in Kafka.

use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use super::str_bytes;
use crate::authorization::{AclOperation, ResourceType, OMITTED};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeGroupsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let mut groups = Vec::with_capacity(body.groups.len());
    // Kafka's check: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    for group_id in &body.groups {
        let described = DescribedGroup::default()
            .with_group_id(group_id.clone())
            .with_authorized_operations(authorization.operations(
                version >= 3 && body.include_authorized_operations,
                ResourceType::Group,
                group_id.as_str(),
            ));
        if !authorization.allows_group(AclOperation::Describe, group_id.as_str()) {
            groups.push(
                described
                    .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
                    .with_authorized_operations(OMITTED),
            );
            continue;
        }
        if !broker.groups.coordinates(broker, group_id.as_str()) {
            groups.push(described.with_error_code(error_code::NOT_COORDINATOR));
            continue;
        }
        let described = match broker.groups.describe(broker, group_id.as_str()).await {
            Err(code) => described.with_error_code(code),
            Ok(None) if version >= 6 => described
                .with_error_code(error_code::GROUP_ID_NOT_FOUND)
                .with_error_message(Some(str_bytes(format!(
                    "Group {} not found.",
                    group_id.as_str()
                ))))
                .with_group_state(str_bytes("Dead")),
            Ok(None) => described
                .with_error_code(error_code::NONE)
                .with_group_state(str_bytes("Dead")),
            // Kafka describes classic groups only: a share or streams group is "not a
            // classic group".
            Ok(Some(group)) if matches!(group.group_type, "share" | "streams") && version >= 6 => {
                described
                    .with_error_code(error_code::GROUP_ID_NOT_FOUND)
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} is not a classic group.",
                        group_id.as_str()
                    ))))
                    .with_group_state(str_bytes("Dead"))
            }
            Ok(Some(group)) if matches!(group.group_type, "share" | "streams") => described
                .with_error_code(error_code::NONE)
                .with_group_state(str_bytes("Dead")),
            Ok(Some(group)) => described
                .with_error_code(error_code::NONE)
                .with_group_state(str_bytes(group.state.name()))
                .with_protocol_type(str_bytes(group.protocol_type))
                .with_protocol_data(str_bytes(group.protocol_name))
                .with_members(
                    group
                        .members
                        .into_iter()
                        .map(
                            |(
                                member_id,
                                instance,
                                client_id,
                                client_host,
                                metadata,
                                assignment,
                            )| {
                                let member = DescribedGroupMember::default()
                                    .with_member_id(str_bytes(member_id))
                                    .with_client_id(str_bytes(client_id))
                                    .with_client_host(str_bytes(client_host))
                                    .with_member_metadata(metadata)
                                    .with_member_assignment(assignment);
                                if version >= 4 {
                                    member.with_group_instance_id(instance.map(str_bytes))
                                } else {
                                    member
                                }
                            },
                        )
                        .collect(),
                ),
        };
        groups.push(described);
    }
    respond(
        &request,
        &DescribeGroupsResponse::default().with_groups(groups),
    )
}
