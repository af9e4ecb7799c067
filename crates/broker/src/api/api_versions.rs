//! ApiVersions (key 18): the table in `strand_protocol::api_versions`. A version newer
//! than Strand's gets UNSUPPORTED_VERSION in the v0 format with only ApiVersions listed,
//! as Kafka answers, so the client retries with a version both know. v5 (KIP-1242)
//! carries the cluster and node the client means to reach: both or neither (else
//! INVALID_REQUEST), and a client that reached another cluster or node is told
//! REBOOTSTRAP_REQUIRED, as Kafka 4.4 answers.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use strand_metadata::features::FEATURES;
use strand_protocol::{encode_response, supported_versions, ParsedRequest, SUPPORTED_APIS};

use crate::broker::Broker;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

pub fn handle(broker: &Broker, request: &ParsedRequest) -> Outcome {
    let version = request.header.request_api_version;
    let (min, max) = supported_versions(ApiKey::ApiVersions).expect("ApiVersions is always served");
    if version > max || version < min {
        let response = ApiVersionsResponse::default()
            .with_error_code(error_code::UNSUPPORTED_VERSION)
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions as i16)
                .with_min_version(min)
                .with_max_version(max)]);
        return match encode_response(
            ApiKey::ApiVersions,
            0,
            request.header.correlation_id,
            &response,
        ) {
            Ok(bytes) => Outcome::Respond(bytes),
            Err(error) => Outcome::Close(error.to_string()),
        };
    }
    if version >= 5 {
        let body: ApiVersionsRequest = match decode(request) {
            Ok(body) => body,
            Err(outcome) => return outcome,
        };
        if let Err(code) = check_destination(broker, &body) {
            return respond(
                request,
                &ApiVersionsResponse::default().with_error_code(code),
            );
        }
    }
    // The client software name and version (v3+) are informational.
    let api_keys = SUPPORTED_APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min_version)
                .with_max_version(api.max_version)
        })
        .collect();
    // v3+ carries the features (features.rs): transaction.version decides whether 4.x
    // clients use transaction version 2, group.version whether KIP-848 is on. The epoch
    // only grows (a cluster's counts its changes); 0 is "no epoch" to clients, so it
    // starts at 1.
    let features = broker.finalized_features();
    let response = ApiVersionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_api_keys(api_keys)
        .with_supported_features(
            FEATURES
                .iter()
                .map(|f| {
                    SupportedFeatureKey::default()
                        .with_name(StrBytes::from_static_str(f.name))
                        .with_min_version(f.min_level)
                        .with_max_version(f.max_level)
                })
                .collect(),
        )
        .with_finalized_features_epoch(features.epoch + 1)
        .with_finalized_features(
            features
                .finalized()
                .into_iter()
                .map(|(name, level)| {
                    FinalizedFeatureKey::default()
                        .with_name(StrBytes::from_static_str(name))
                        .with_min_version_level(level)
                        .with_max_version_level(level)
                })
                .collect(),
        );
    respond(request, &response)
}

/// KIP-1242: the cluster id and node id a v5 client expects to reach (a client given a
/// reused address finds out it reached another broker and bootstraps again).
fn check_destination(broker: &Broker, body: &ApiVersionsRequest) -> Result<(), i16> {
    let cluster_id = body.cluster_id.as_ref().map(|id| id.as_str());
    let node_id = (body.node_id >= 0).then_some(body.node_id);
    match (cluster_id, node_id) {
        (None, None) => Ok(()),
        (Some(cluster_id), Some(node_id)) => {
            if cluster_id == broker.cluster_id() && node_id == broker.node_id() {
                Ok(())
            } else {
                Err(error_code::REBOOTSTRAP_REQUIRED)
            }
        }
        _ => Err(error_code::INVALID_REQUEST),
    }
}
