//! UnregisterBroker (64, kafka-cluster unregister, Admin.unregisterBroker): the controller
//! forgets a broker's registration (its leaderships and ISR places moved away first), as
//! Kafka's does; a broker still running registers again at its next heartbeat (Kafka
//! 4.4's stays out of Metadata until restarted). An id
//! never registered is BROKER_ID_NOT_REGISTERED with Kafka's message; a success carries
//! an empty message, as Kafka 4.4's answer does. A single node knows only itself:
//! unregistered, it is registered again at once.

use std::sync::Arc;

use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use strand_metadata::controller::ControllerCommand;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::cluster::single_result;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: UnregisterBrokerRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: ALTER on the cluster.
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter)
    {
        return respond(
            &request,
            &UnregisterBrokerResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let id = body.broker_id.0;
    let outcome = match broker.cluster() {
        Some(cluster) => cluster
            .write(ControllerCommand::UnregisterBroker { id })
            .await
            .and_then(single_result),
        None if id == broker.node_id() => Ok(()),
        None => Err(ApiError::new(
            error_code::BROKER_ID_NOT_REGISTERED,
            format!("Broker ID {id} is not currently registered"),
        )),
    };
    let (code, message) = match outcome {
        Ok(()) => (error_code::NONE, String::new()),
        Err(error) => (error.code, error.message.unwrap_or_default()),
    };
    respond(
        &request,
        &UnregisterBrokerResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    )
}
