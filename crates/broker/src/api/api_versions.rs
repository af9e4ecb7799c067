//! ApiVersions (key 18): the table in `strand_protocol::api_versions`. A version newer
//! than Strand's gets UNSUPPORTED_VERSION in the v0 format with only ApiVersions listed,
//! as Kafka answers, so the client retries with a version both know.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use strand_protocol::api_versions::{FINALIZED_FEATURES_EPOCH, TRANSACTION_VERSION};
use strand_protocol::{encode_response, supported_versions, ParsedRequest, SUPPORTED_APIS};

use crate::error_code;
use crate::router::{respond, Outcome};

pub fn handle(request: &ParsedRequest) -> Outcome {
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
    // The body (client software name and version, v3+) is informational.
    let api_keys = SUPPORTED_APIS
        .iter()
        .map(|api| {
            ApiVersion::default()
                .with_api_key(api.key as i16)
                .with_min_version(api.min_version)
                .with_max_version(api.max_version)
        })
        .collect();
    // v3+ carries the features: transaction.version decides whether 4.x clients use
    // transaction version 2.
    let response = ApiVersionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_api_keys(api_keys)
        .with_supported_features(vec![SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str("transaction.version"))
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION)])
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(StrBytes::from_static_str("transaction.version"))
            .with_min_version_level(TRANSACTION_VERSION)
            .with_max_version_level(TRANSACTION_VERSION)]);
    respond(request, &response)
}
