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
use uuid::Uuid;

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

/// The voter change a request asks for, as Kafka's messages name it.
#[derive(Clone, Copy)]
enum Change {
    Add,
    Remove,
}

/// AddRaftVoter's and RemoveRaftVoter's common path: Kafka's checks in its order (access
/// and cluster id, a replica key with a directory id, a quorum that can change), then
/// `asked` of the active controller.
async fn change_voters(
    broker: &Broker,
    context: &RequestContext,
    cluster_id: Option<&StrBytes>,
    voter: (i32, Uuid),
    change: Change,
    asked: ControllerRequest,
) -> Result<(), ApiError> {
    precheck(broker, context, cluster_id)?;
    let (noun, verb) = match change {
        Change::Add => ("Add", "adding"),
        Change::Remove => ("Remove", "removing"),
    };
    if voter.0 < 0 || voter.1.is_nil() {
        return Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!("{noun} voter request didn't include a valid voter"),
        ));
    }
    match broker.cluster() {
        Some(cluster) => cluster.change_voters(asked).await,
        // A single node has no voter set to change: Kafka's static quorum's answer.
        None => Err(ApiError::new(
            error_code::UNSUPPORTED_VERSION,
            format!("Cluster doesn't support {verb} voter because the kraft.version feature is 0"),
        )),
    }
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
    let asked = ControllerRequest::AddVoter {
        id: body.voter_id as u64,
        directory_id: body.voter_directory_id,
        listener_ports: body.listeners.iter().map(|l| l.port).collect(),
    };
    let voter = (body.voter_id, body.voter_directory_id);
    let result = change_voters(
        broker,
        context,
        body.cluster_id.as_ref(),
        voter,
        Change::Add,
        asked,
    );
    let (code, message) = outcome(result.await);
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
    let asked = ControllerRequest::RemoveVoter {
        id: body.voter_id as u64,
        directory_id: body.voter_directory_id,
    };
    let voter = (body.voter_id, body.voter_directory_id);
    let cluster_id = body.cluster_id.as_ref();
    let result = change_voters(broker, context, cluster_id, voter, Change::Remove, asked);
    let (code, message) = outcome(result.await);
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
