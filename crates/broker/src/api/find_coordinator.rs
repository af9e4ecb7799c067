//! FindCoordinator (10): this broker coordinates every group. v4+ batches keys. The
//! first lookup creates `__consumer_offsets`. Transaction coordinators (key type 1) do
//! not exist yet: COORDINATOR_NOT_AVAILABLE.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::str_bytes;
use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

const KEY_TYPE_GROUP: i8 = 0;

pub fn handle(broker: &Arc<Broker>, request: strand_protocol::ParsedRequest) -> Outcome {
    let body: FindCoordinatorRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let lookup = |_key: &str| -> (i16, Option<String>) {
        if body.key_type != KEY_TYPE_GROUP {
            return (
                error_code::COORDINATOR_NOT_AVAILABLE,
                Some("Strand has no transaction coordinator yet".into()),
            );
        }
        match broker.groups.ensure_offsets_topic(broker) {
            Ok(()) => (error_code::NONE, None),
            Err(error) => (error.code, error.message),
        }
    };
    let (host, port, node) = (
        broker.advertised_host.clone(),
        broker.advertised_port as i32,
        BrokerId(broker.node_id()),
    );
    let response = if version >= 4 {
        let coordinators = body
            .coordinator_keys
            .iter()
            .map(|key| {
                let (code, message) = lookup(key.as_str());
                let found = code == error_code::NONE;
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(if found { node } else { BrokerId(-1) })
                    .with_host(str_bytes(if found { host.clone() } else { String::new() }))
                    .with_port(if found { port } else { -1 })
                    .with_error_code(code)
                    .with_error_message(message.map(str_bytes))
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let (code, message) = lookup(body.key.as_str());
        let found = code == error_code::NONE;
        let response = FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_node_id(if found { node } else { BrokerId(-1) })
            .with_host(str_bytes(if found { host } else { String::new() }))
            .with_port(if found { port } else { -1 });
        if version >= 1 {
            response.with_error_message(message.map(str_bytes))
        } else {
            response
        }
    };
    respond(&request, &response)
}
