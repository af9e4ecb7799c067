//! UpdateFeatures (57, kafka-features upgrade/downgrade, Admin.updateFeatures): changes the
//! cluster's finalized feature levels (features.rs), all or none, with Kafka 4.4's checks
//! and messages. v0's allow_downgrade is a safe downgrade; v1 adds validate_only; below
//! v2 a success lists each feature with NONE (and the message "NONE", as Kafka sends) and
//! a failure lists none.

use std::sync::Arc;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use strand_metadata::features::{FeatureUpdate, UpgradeType};

use super::str_bytes;
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
    let body: UpdateFeaturesRequest = match decode(&request) {
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
            &UpdateFeaturesResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    let version = request.header.request_api_version;
    let updates: Vec<FeatureUpdate> = body
        .feature_updates
        .iter()
        .map(|update| FeatureUpdate {
            name: update.feature.as_str().to_string(),
            level: update.max_version_level,
            upgrade_type: match version {
                0 if update.allow_downgrade => UpgradeType::SafeDowngrade,
                0 => UpgradeType::Upgrade,
                _ => UpgradeType::from_code(update.upgrade_type),
            },
        })
        .collect();
    let validate_only = version >= 1 && body.validate_only;
    let outcome = broker.update_features(&updates, validate_only).await;
    let mut response = UpdateFeaturesResponse::default().with_error_message(None);
    match outcome {
        Ok(()) => {
            if version < 2 {
                response = response.with_results(
                    updates
                        .iter()
                        .map(|update| {
                            UpdatableFeatureResult::default()
                                .with_feature(str_bytes(update.name.clone()))
                                .with_error_code(error_code::NONE)
                                .with_error_message(Some(str_bytes("NONE")))
                        })
                        .collect(),
                );
            }
        }
        Err(error) => {
            response = response
                .with_error_code(error.code)
                .with_error_message(error.message.map(str_bytes));
        }
    }
    respond(&request, &response)
}
