//! Cluster features (KIP-584) as Kafka's ApiVersions and UpdateFeatures know them: the
//! ones Strand implements, the range of levels it supports, the level a new cluster
//! starts at, and the rules of an update, with Kafka 4.4's messages
//! (interop/kafka/reference-4.4/update_features.json).
//!
//! Strand lists only the features whose levels it acts on: `transaction.version` (the
//! transaction protocol clients speak, KIP-890), `group.version` (the KIP-848 consumer
//! protocol), `share.version` (KIP-932 share groups, up to 1: level 2 adds Kafka's
//! share-group dead-letter queue, which Strand does not have), `streams.version`
//! (KIP-1071 streams groups) and `eligible.leader.replicas.version` (KIP-966, the
//! controller's eligible leader replicas: `eligible_leaders.rs`). Kafka 4.4 also lists
//! metadata.version and kraft.version: they gate Kafka's own metadata records and the
//! reconfiguration of its quorum (Strand's can always change voters, from any start), so
//! Strand does not claim them (docs/ARCHITECTURE.md, deliberate differences).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const TRANSACTION_VERSION: &str = "transaction.version";
pub const GROUP_VERSION: &str = "group.version";
pub const SHARE_VERSION: &str = "share.version";
pub const STREAMS_VERSION: &str = "streams.version";
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";

/// A feature Strand implements: the levels it supports and a new cluster's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min_level: i16,
    pub max_level: i16,
    pub default_level: i16,
}

/// Kafka 4.4's ranges and defaults for the features Strand implements.
pub const FEATURES: &[Feature] = &[
    // KIP-966 eligible leader replicas: on from level 1, which a new Kafka 4.4 cluster
    // finalizes.
    Feature {
        name: ELIGIBLE_LEADER_REPLICAS_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
    },
    Feature {
        name: GROUP_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
    },
    // KIP-932 share groups: on from level 1. Kafka 4.4 goes to 2 (and finalizes 2 in a
    // new cluster), which adds only the share groups' dead-letter queue (KIP-1191): Strand
    // does not have it, so it supports and finalizes 1.
    Feature {
        name: SHARE_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
    },
    // KIP-1071 streams groups (Kafka Streams' group.protocol=streams): on from level 1,
    // which a new Kafka 4.4 cluster finalizes.
    Feature {
        name: STREAMS_VERSION,
        min_level: 0,
        max_level: 1,
        default_level: 1,
    },
    Feature {
        name: TRANSACTION_VERSION,
        min_level: 0,
        max_level: 2,
        default_level: 2,
    },
];

pub fn feature(name: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.name == name)
}

/// The finalized feature levels and the epoch of their last change (ApiVersions'
/// finalized_features_epoch: it only grows, so clients can tell newer answers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalizedFeatures {
    /// Levels set by UpdateFeatures; a feature not here is at its default level.
    #[serde(default)]
    pub levels: BTreeMap<String, i16>,
    #[serde(default)]
    pub epoch: i64,
}

impl FinalizedFeatures {
    /// A feature's finalized level (0: off, not listed as finalized).
    pub fn level(&self, name: &str) -> i16 {
        match self.levels.get(name) {
            Some(level) => *level,
            None => feature(name).map_or(0, |f| f.default_level),
        }
    }

    /// (name, level) of every finalized feature (level 0 is not finalized), by name.
    pub fn finalized(&self) -> Vec<(&'static str, i16)> {
        FEATURES
            .iter()
            .map(|f| (f.name, self.level(f.name)))
            .filter(|(_, level)| *level > 0)
            .collect()
    }

    /// Applies levels an update decided (`check_updates`) and moves the epoch on.
    pub fn apply(&mut self, levels: &BTreeMap<String, i16>) {
        self.levels
            .extend(levels.iter().map(|(k, v)| (k.clone(), *v)));
        self.epoch += 1;
    }
}

/// UpdateFeatures' upgrade type (v1+; v0's allow_downgrade is a safe downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

impl UpgradeType {
    pub fn from_code(code: i8) -> UpgradeType {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// One feature of an UpdateFeatures request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade_type: UpgradeType,
}

/// The levels `updates` set, or Kafka's message for the first update that may not be
/// made (all or nothing, as Kafka: "The update failed for all features since ...").
/// `controller` is the node id Kafka's messages name as the local controller.
pub fn check_updates(
    finalized: &FinalizedFeatures,
    updates: &[FeatureUpdate],
    controller: i32,
) -> Result<BTreeMap<String, i16>, String> {
    let mut levels = BTreeMap::new();
    for update in updates {
        check_update(finalized, update, controller).map_err(|reason| {
            format!(
                "The update failed for all features since the following feature had an \
                 error: Invalid update version {} for feature {}. {reason}",
                update.level, update.name
            )
        })?;
        levels.insert(update.name.clone(), update.level);
    }
    Ok(levels)
}

fn check_update(
    finalized: &FinalizedFeatures,
    update: &FeatureUpdate,
    controller: i32,
) -> Result<(), String> {
    if update.upgrade_type == UpgradeType::Unknown {
        return Err("The controller does not support the given upgrade type.".into());
    }
    if update.level < 0 {
        return Err("A feature version cannot be less than 0.".into());
    }
    let Some(supported) = feature(&update.name) else {
        return Err(if update.level == 0 {
            format!("Feature {} not found.", update.name)
        } else {
            format!("Local controller {controller} does not support this feature.")
        });
    };
    if update.level < supported.min_level || update.level > supported.max_level {
        return Err(format!(
            "Local controller {controller} only supports versions {}-{}",
            supported.min_level, supported.max_level
        ));
    }
    if update.level < finalized.level(&update.name) && update.upgrade_type == UpgradeType::Upgrade {
        return Err(
            "Can't downgrade the version of this feature without setting the upgrade \
                    type to either safe or unsafe downgrade."
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(name: &str, level: i16, code: i8) -> FeatureUpdate {
        FeatureUpdate {
            name: name.into(),
            level,
            upgrade_type: UpgradeType::from_code(code),
        }
    }

    fn message(updates: &[FeatureUpdate]) -> Option<String> {
        check_updates(&FinalizedFeatures::default(), updates, 1).err()
    }

    /// Kafka 4.4.0's answers (update_features.json and the same broker asked more).
    #[test]
    fn kafkas_rules_in_kafkas_words() {
        let prefix =
            "The update failed for all features since the following feature had an error: ";
        let cases: &[(FeatureUpdate, Option<&str>)] = &[
            (update(TRANSACTION_VERSION, 2, 1), None),
            (update(TRANSACTION_VERSION, 1, 2), None),
            (update(TRANSACTION_VERSION, 0, 3), None),
            (update(GROUP_VERSION, 0, 2), None),
            (update(TRANSACTION_VERSION, 9, 1), Some("Invalid update version 9 for feature transaction.version. Local controller 1 only supports versions 0-2")),
            (update(GROUP_VERSION, 0, 1), Some("Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")),
            (update("no.such.feature", 1, 1), Some("Invalid update version 1 for feature no.such.feature. Local controller 1 does not support this feature.")),
            (update("no.such", 0, 2), Some("Invalid update version 0 for feature no.such. Feature no.such not found.")),
            (update(TRANSACTION_VERSION, 2, 7), Some("Invalid update version 2 for feature transaction.version. The controller does not support the given upgrade type.")),
            (update(TRANSACTION_VERSION, 2, 0), Some("Invalid update version 2 for feature transaction.version. The controller does not support the given upgrade type.")),
            (update(TRANSACTION_VERSION, -1, 2), Some("Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0.")),
        ];
        for (case, expected) in cases {
            let expected = expected.map(|m| format!("{prefix}{m}"));
            assert_eq!(message(std::slice::from_ref(case)), expected, "{case:?}");
        }
        // The first failing update is named, and nothing is set.
        let several = [
            update(TRANSACTION_VERSION, 2, 1),
            update("no.such.feature", 1, 1),
            update(GROUP_VERSION, 5, 1),
        ];
        assert!(message(&several).unwrap().contains("no.such.feature"));
    }

    #[test]
    fn levels_start_at_kafkas_defaults_and_zero_is_not_finalized() {
        let mut features = FinalizedFeatures::default();
        assert_eq!(
            features.finalized(),
            [
                (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
                (GROUP_VERSION, 1),
                (SHARE_VERSION, 1),
                (STREAMS_VERSION, 1),
                (TRANSACTION_VERSION, 2)
            ]
        );
        let levels = check_updates(&features, &[update(TRANSACTION_VERSION, 0, 3)], 1).unwrap();
        features.apply(&levels);
        assert_eq!(
            features.finalized(),
            [
                (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
                (GROUP_VERSION, 1),
                (SHARE_VERSION, 1),
                (STREAMS_VERSION, 1)
            ]
        );
        assert_eq!(features.level(TRANSACTION_VERSION), 0);
        assert_eq!(features.epoch, 1);
        // Back up, as an upgrade.
        let levels = check_updates(&features, &[update(TRANSACTION_VERSION, 2, 1)], 1).unwrap();
        features.apply(&levels);
        assert_eq!(features.level(TRANSACTION_VERSION), 2);
        assert_eq!(features.epoch, 2);
    }
}
