//! DescribeCluster (60): the live brokers, the cluster id and the controller id clients
//! see (`api::live_brokers`).

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::str_bytes;
use crate::authorization::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use strand_security::authorizer::CLUSTER_NAME;

const ENDPOINT_TYPE_BROKER: i8 = 1;

/// As Kafka: what the principal may do to the cluster if it may describe it, else 0.
fn cluster_operations(broker: &Broker, context: &RequestContext, requested: bool) -> i32 {
    let authorization = broker.authorization(context);
    if requested && !authorization.allows_cluster(AclOperation::Describe) {
        return 0;
    }
    authorization.operations(requested, ResourceType::Cluster, CLUSTER_NAME)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeClusterRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let (live, controller_id) = super::live_brokers(broker, context).await;
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(body.endpoint_type)
        .with_cluster_id(str_bytes(broker.cluster_id()))
        .with_controller_id(BrokerId(controller_id))
        .with_cluster_authorized_operations(cluster_operations(
            broker,
            context,
            body.include_cluster_authorized_operations,
        ));
    let response = if body.endpoint_type != ENDPOINT_TYPE_BROKER {
        response
            .with_error_code(error_code::UNSUPPORTED_ENDPOINT_TYPE)
            .with_error_message(Some(str_bytes("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")))
    } else {
        response.with_error_code(error_code::NONE).with_brokers(
            live.into_iter()
                .map(|(id, host, port, rack)| {
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(id))
                        .with_host(str_bytes(host))
                        .with_port(port as i32)
                        .with_rack(rack.map(str_bytes))
                })
                .collect(),
        )
    };
    respond(&request, &response)
}
