//! The cluster's finalized features (`strand_metadata::features`): in a cluster they are
//! in the metadata image (`SetFeatures`), on a single node in `features.json`.
//! UpdateFeatures changes them, ApiVersions reports them, and the broker follows them:
//! - `transaction.version` sets the transaction coordinator's level (the
//!   `__transaction_state` value version and the rules of the aborts it starts).
//! - `group.version` 0 turns the KIP-848 consumer protocol off (ConsumerGroupHeartbeat
//!   answers UNSUPPORTED_VERSION, as on Kafka).

use std::path::Path;
use std::sync::Mutex;

use strand_metadata::features::{
    check_updates, FeatureUpdate, FinalizedFeatures, GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION,
    TRANSACTION_VERSION,
};
use strand_metadata::ControllerCommand;

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::local_json;

const FEATURES_FILE: &str = "features.json";

/// A single node's finalized features.
#[derive(Debug)]
pub struct LocalFeatures {
    features: Mutex<FinalizedFeatures>,
    /// One change at a time writes the file.
    writer: tokio::sync::Mutex<()>,
}

impl LocalFeatures {
    pub fn load(data_dir: &Path) -> anyhow::Result<LocalFeatures> {
        Ok(LocalFeatures {
            features: Mutex::new(local_json::load(&data_dir.join(FEATURES_FILE))?),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    fn features(&self) -> std::sync::MutexGuard<'_, FinalizedFeatures> {
        self.features.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Broker {
    /// The finalized features this broker answers with.
    pub fn finalized_features(&self) -> FinalizedFeatures {
        match self.cluster() {
            Some(cluster) => cluster.image().features.clone(),
            None => self.features.features().clone(),
        }
    }

    /// Whether KIP-848's consumer protocol is on (`group.version` 1).
    pub fn consumer_protocol_enabled(&self) -> bool {
        self.finalized_features().level(GROUP_VERSION) >= 1
    }

    /// `share.version` 1 or more: share groups (KIP-932) are served.
    pub fn share_groups_enabled(&self) -> bool {
        self.finalized_features().level(SHARE_VERSION) >= 1
    }

    /// `streams.version` 1 or more: streams groups (KIP-1071) are served.
    pub fn streams_groups_enabled(&self) -> bool {
        self.finalized_features().level(STREAMS_VERSION) >= 1
    }

    /// UpdateFeatures: Kafka's checks, then in a cluster through the controller (answered
    /// once this broker's image has the levels), on a single node in its file.
    pub async fn update_features(
        &self,
        updates: &[FeatureUpdate],
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let controller = match self.cluster() {
            Some(cluster) => cluster.controller_id().await.unwrap_or(self.node_id()),
            None => self.node_id(),
        };
        let levels = check_updates(&self.finalized_features(), updates, controller)
            .map_err(|message| ApiError::new(error_code::INVALID_UPDATE_VERSION, message))?;
        if validate_only || levels.is_empty() {
            return Ok(());
        }
        if let Some(cluster) = self.cluster() {
            let wanted = levels.clone();
            let command = ControllerCommand::SetFeatures { levels };
            return cluster
                .write_and_wait(command, |image| {
                    wanted
                        .iter()
                        .all(|(name, level)| image.features.level(name) == *level)
                })
                .await;
        }
        let _writer = self.features.writer.lock().await;
        let mut next = self.features.features().clone();
        next.apply(&levels);
        let path = self.config.data_dir.join(FEATURES_FILE);
        local_json::store(path, &next, "finalized features").await?;
        self.follow_features(&next);
        *self.features.features() = next;
        Ok(())
    }

    /// Makes the broker act on `features` (at start, and whenever they change).
    pub fn follow_features(&self, features: &FinalizedFeatures) {
        self.txns
            .set_transaction_version(features.level(TRANSACTION_VERSION));
    }
}
