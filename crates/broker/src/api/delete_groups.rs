//! DeleteGroups (42): removes empty groups and their offsets (NON_EMPTY_GROUP otherwise);
//! a share group's share state goes first, as on Kafka.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DeleteGroupsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let mut results = Vec::with_capacity(body.groups_names.len());
    // Kafka's check: DELETE on each group (else GROUP_AUTHORIZATION_FAILED).
    let authorization = broker.authorization(context);
    for group_id in &body.groups_names {
        let code = if authorization.allows_group(AclOperation::Delete, group_id.as_str()) {
            match crate::share::admin::delete_group_state(broker, group_id.as_str()).await {
                Ok(()) => broker.groups.delete_group(broker, group_id.as_str()).await,
                Err(code) => code,
            }
        } else {
            crate::error_code::GROUP_AUTHORIZATION_FAILED
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(code),
        );
    }
    respond(
        &request,
        &DeleteGroupsResponse::default().with_results(results),
    )
}
