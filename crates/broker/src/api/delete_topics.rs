//! DeleteTopics (key 20): by name (v0-v5) or by name or topic id (v6).

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub async fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: DeleteTopicsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
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
    let mut results = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        let resolved = match (&name, id.is_nil()) {
            (Some(name), _) => broker
                .topic(name)
                .map(|t| t.name)
                .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            (None, false) => broker
                .topic_by_id(&id)
                .map(|t| t.name)
                .ok_or(error_code::UNKNOWN_TOPIC_ID),
            (None, true) => Err(error_code::INVALID_REQUEST),
        };
        let result = match resolved {
            Ok(resolved) => broker
                .delete_topic(&resolved)
                .await
                .map_err(|error| error.code),
            Err(code) => Err(code),
        };
        let (code, topic_id, name) = match result {
            Ok(topic) => (error_code::NONE, topic.id, Some(topic.name)),
            Err(code) => (code, id, name),
        };
        let message = (code == error_code::UNKNOWN_TOPIC_OR_PARTITION)
            .then(|| str_bytes("This server does not host this topic-partition."));
        results.push(
            DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(topic_id)
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    respond(
        &request,
        &DeleteTopicsResponse::default().with_responses(results),
    )
}
