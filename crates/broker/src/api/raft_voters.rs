//! AddRaftVoter (80), RemoveRaftVoter (81) and UnregisterController (94): changing who
//! votes in the metadata quorum (KIP-853; `kafka-metadata-quorum add-controller`,
//! `remove-controller [--unregister]`). Kafka's brokers forward them to the active
//! controller; here the broker asks it (`strand_raft::voters` decides, with Kafka's
//! checks and messages). ALTER on the cluster, and a cluster id that is not this
//! cluster's is INCONSISTENT_CLUSTER_ID, as on Kafka.
//!
//! A single node has no quorum to change: it answers as a Kafka quorum of static voters
//! (kraft.version 0) does.

use std::sync::Arc;

use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
    UnregisterControllerRequest, UnregisterControllerResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_raft::rpc::ControllerRequest;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

/// Kafka's checks before the quorum's: ALTER on the cluster, the cluster id if given.
fn precheck(
    broker: &Broker,
    context: &RequestContext,
    cluster_id: Option<&StrBytes>,
) -> Result<(), ApiError> {
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Alter)
    {
        return Err(ApiError {
            code: error_code::CLUSTER_AUTHORIZATION_FAILED,
            message: None,
        });
    }
    let ours = broker.cluster_id();
    match cluster_id {
        Some(given) if given.as_str() != ours => Err(ApiError::new(
            error_code::INCONSISTENT_CLUSTER_ID,
            format!(
                "The given id \"{}\" doesn't match the cluster id \"{ours}\"",
                given.as_str()
            ),
        )),
        _ => Ok(()),
    }
}

/// A single node's answer: no voter set to change.
fn static_voters(verb: &str) -> ApiError {
    ApiError::new(
        error_code::UNSUPPORTED_VERSION,
        format!("Cluster doesn't support {verb} voter because the kraft.version feature is 0"),
    )
}

/// (error code, message) as the responses carry them: a success has none.
fn outcome(result: Result<(), ApiError>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (error_code::NONE, None),
        Err(error) => (error.code, error.message.map(str_bytes)),
    }
}

pub async fn add(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AddRaftVoterRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let result = match precheck(broker, context, body.cluster_id.as_ref()) {
        Err(error) => Err(error),
        Ok(()) if body.voter_id < 0 || body.voter_directory_id.is_nil() => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Add voter request didn't include a valid voter",
        )),
        Ok(()) => match broker.cluster() {
            None => Err(static_voters("adding")),
            Some(cluster) => {
                cluster
                    .change_voters(ControllerRequest::AddVoter {
                        id: body.voter_id as u64,
                        directory_id: body.voter_directory_id,
                        listener_ports: body.listeners.iter().map(|l| l.port).collect(),
                    })
                    .await
            }
        },
    };
    let (code, message) = outcome(result);
    respond(
        &request,
        &AddRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message),
    )
}

pub async fn remove(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: RemoveRaftVoterRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let result = match precheck(broker, context, body.cluster_id.as_ref()) {
        Err(error) => Err(error),
        Ok(()) if body.voter_id < 0 || body.voter_directory_id.is_nil() => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Remove voter request didn't include a valid voter",
        )),
        Ok(()) => match broker.cluster() {
            None => Err(static_voters("removing")),
            Some(cluster) => {
                cluster
                    .change_voters(ControllerRequest::RemoveVoter {
                        id: body.voter_id as u64,
                        directory_id: body.voter_directory_id,
                    })
                    .await
            }
        },
    };
    let (code, message) = outcome(result);
    respond(
        &request,
        &RemoveRaftVoterResponse::default()
            .with_error_code(code)
            .with_error_message(message),
    )
}

pub async fn unregister_controller(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: UnregisterControllerRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let id = body.controller_id;
    let result = match precheck(broker, context, None) {
        Err(error) => Err(error),
        Ok(()) => match broker.cluster() {
            Some(cluster) if id >= 0 => {
                cluster
                    .change_voters(ControllerRequest::UnregisterController { id: id as u64 })
                    .await
            }
            // A single node is its own only voter.
            None if id == broker.node_id() => Err(ApiError::new(
                error_code::INVALID_REQUEST,
                format!(
                    "Controller {id} is a voter of the metadata quorum: remove it with RemoveRaftVoter first."
                ),
            )),
            _ => Err(ApiError::new(
                error_code::CONTROLLER_ID_NOT_REGISTERED,
                format!("Controller ID {id} is not currently registered."),
            )),
        },
    };
    let (code, message) = outcome(result);
    respond(
        &request,
        &UnregisterControllerResponse::default()
            .with_error_code(code)
            .with_error_message(message),
    )
}
