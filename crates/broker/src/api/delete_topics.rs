//! DeleteTopics (key 20): by name (v0-v5) or by name or topic id (v6).

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
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
    let body: DeleteTopicsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's checks (ControllerApis): DELETE on the cluster allows every topic; else a
    // topic needs DESCRIBE (or its name is not even looked up) and DELETE. A topic named
    // by id the principal may not describe is refused without its name.
    let authorization = broker.authorization(context);
    let on_cluster = authorization.allows_cluster(AclOperation::Delete);
    let may = |operation, name: &str| on_cluster || authorization.allows_topic(operation, name);
    let mut targets: Vec<(Option<String>, Uuid)> = body
        .topic_names
        .iter()
        .map(|name| (Some(name.as_str().to_string()), Uuid::nil()))
        .collect();
    targets.extend(
        body.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.as_str().to_string()), t.topic_id)),
    );
    // controller_mutation_rate (KIP-599): strict from v5, a topic's partitions counted.
    let client_id = request.client_id();
    let strict = request.header.request_api_version >= 5;
    let mut quota = broker.mutation_quota(context, client_id, strict);
    let mut results = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        let mut name = name;
        let resolved = match (&name, id.is_nil()) {
            (Some(named), _) if !may(AclOperation::Describe, named) => {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            (Some(named), _) => broker
                .topic(named)
                .map(|t| t.name)
                .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            (None, false) => match broker.topic_by_id(&id) {
                Some(topic) if !may(AclOperation::Describe, &topic.name) => {
                    Err(error_code::TOPIC_AUTHORIZATION_FAILED)
                }
                Some(topic) => {
                    name = Some(topic.name.clone());
                    Ok(topic.name)
                }
                None => Err(error_code::UNKNOWN_TOPIC_ID),
            },
            (None, true) => Err(error_code::INVALID_REQUEST),
        };
        let resolved = resolved.and_then(|resolved| {
            if may(AclOperation::Delete, &resolved) {
                Ok(resolved)
            } else {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
        });
        let result = match resolved {
            Ok(resolved) => {
                let partitions = broker.topic(&resolved).map_or(0, |topic| topic.partitions);
                match broker.admit_mutation(&mut quota, partitions) {
                    Ok(()) => broker.delete_topic(&resolved).await,
                    Err(error) => Err(error),
                }
                .map_err(|error| error.code)
            }
            Err(code) => Err(code),
        };
        let (code, topic_id, name) = match result {
            Ok(topic) => (error_code::NONE, topic.id, Some(topic.name)),
            Err(code) => (code, id, name),
        };
        let message = match code {
            error_code::UNKNOWN_TOPIC_OR_PARTITION => {
                Some(str_bytes("This server does not host this topic-partition."))
            }
            error_code::THROTTLING_QUOTA_EXCEEDED => {
                Some(str_bytes("The throttling quota has been exceeded."))
            }
            _ => None,
        };
        results.push(
            DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(topic_id)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    context.throttle.mute_for(quota.throttle_ms());
    respond(
        &request,
        &DeleteTopicsResponse::default()
            .with_responses(results)
            .with_throttle_time_ms(quota.throttle_ms() as i32),
    )
}
