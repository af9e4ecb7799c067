//! Group configs (KIP-848, `kafka-configs --entity-type groups`): per-group overrides of
//! the broker's group.* settings, set with IncrementalAlterConfigs / AlterConfigs on a
//! GROUP resource (type 32) and described with Kafka's 21 names, types, defaults (the
//! broker config behind each, as synonym) and documentation (kafka_group_configs.tsv,
//! generated from Kafka 4.4.0's answer).
//!
//! Kafka's checks, in its words: an unknown name INVALID_CONFIG "Unknown group config
//! name"; a value not of the type; consumer.session.timeout.ms and
//! consumer.heartbeat.interval.ms at least 1 and within the broker's range (Kafka's
//! group.consumer.min/max.* defaults, widened to include this broker's own setting);
//! share.auto.offset.reset one of Kafka's forms. A group need not exist.
//!
//! What takes effect: a KIP-848 group's session timeout and heartbeat interval, at each
//! member's next heartbeat; a share group's session timeout and heartbeat interval, and
//! on its share-partitions the lock duration, delivery count limit, in-flight limit,
//! auto offset reset, isolation level and renew switch (`share::GroupShareSettings`).
//! A streams group's session timeout, heartbeat interval, standby replicas, initial
//! rebalance delay and assignment interval (`streams_limits`). The errors.* (dead-letter
//! queue) configs are stored and described; Strand has no share-group dead-letter queue
//! yet, so they change nothing.
//!
//! Where they live: in a cluster, the metadata log (`SetGroupConfigs`); on a single node,
//! `group_configs.json` in the data directory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{LazyLock, Mutex};

use strand_coordinator::group::consumer::ConsumerGroupLimits;
use strand_coordinator::group::share::ShareGroupLimits;
use strand_coordinator::group::streams::{StreamsGroupLimits, ASSIGNOR_STICKY};
use strand_metadata::ControllerCommand;

use crate::broker::{ApiError, Broker};
use crate::config::BrokerConfig;
use crate::error_code;
use crate::local_json;

/// The single node's file of group configs.
pub const GROUP_CONFIGS_FILE: &str = "group_configs.json";
pub const CONSUMER_SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
/// Kafka's group.consumer.min/max.session.timeout.ms and .heartbeat.interval.ms defaults.
const SESSION_RANGE: (i32, i32) = (45_000, 60_000);
const HEARTBEAT_RANGE: (i32, i32) = (5_000, 15_000);

#[derive(Debug, Clone)]
pub struct GroupConfigDef {
    pub name: &'static str,
    /// Kafka's type name (INT, STRING, BOOLEAN, LIST).
    pub type_name: &'static str,
    /// The broker config that gives the default (its synonym in DescribeConfigs).
    pub broker_synonym: &'static str,
    pub default: String,
    pub documentation: String,
}

impl GroupConfigDef {
    /// Kafka's DescribeConfigs type code.
    pub fn type_code(&self) -> i8 {
        match self.type_name {
            "BOOLEAN" => 1,
            "STRING" => 2,
            "INT" => 3,
            "LIST" => 7,
            _ => 0,
        }
    }

    /// The default on this broker: its own group.consumer.* setting where Strand has one.
    pub fn default_on(&self, config: &BrokerConfig) -> String {
        match self.name {
            CONSUMER_SESSION_TIMEOUT => config.group_consumer_session_timeout_ms.to_string(),
            CONSUMER_HEARTBEAT_INTERVAL => config.group_consumer_heartbeat_interval_ms.to_string(),
            _ => self.default.clone(),
        }
    }
}

/// Kafka 4.4.0's group configs, by name.
pub static GROUP_CONFIGS: LazyLock<Vec<GroupConfigDef>> = LazyLock::new(|| {
    include_str!("kafka_group_configs.tsv")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let fields: Vec<&'static str> = line.split('\t').collect();
            let [name, type_name, broker_synonym, default, documentation] = fields[..] else {
                return None;
            };
            Some(GroupConfigDef {
                name,
                type_name,
                broker_synonym,
                default: serde_json::from_str(default).ok()?,
                documentation: serde_json::from_str(documentation).ok()?,
            })
        })
        .collect()
});

pub fn group_config(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

fn invalid(message: String) -> ApiError {
    ApiError::new(error_code::INVALID_CONFIG, message)
}

/// `(low, high)` widened to include the broker's own setting.
fn range_with(range: (i32, i32), setting: i32) -> (i32, i32) {
    (range.0.min(setting), range.1.max(setting))
}

/// Checks a group's new configs as Kafka does.
pub fn validate(configs: &BTreeMap<String, String>, broker: &BrokerConfig) -> Result<(), ApiError> {
    for (name, value) in configs {
        let def = group_config(name)
            .ok_or_else(|| invalid(format!("Unknown group config name: {name}")))?;
        let bad = |why: String| {
            invalid(format!(
                "Invalid value {value} for configuration {name}: {why}"
            ))
        };
        let trimmed = value.trim();
        match def.type_name {
            "INT" => {
                let number: i32 = trimmed
                    .parse()
                    .map_err(|_| bad("Not a number of type INT".into()))?;
                let range = match def.name {
                    CONSUMER_SESSION_TIMEOUT => Some(range_with(
                        SESSION_RANGE,
                        broker.group_consumer_session_timeout_ms,
                    )),
                    CONSUMER_HEARTBEAT_INTERVAL => Some(range_with(
                        HEARTBEAT_RANGE,
                        broker.group_consumer_heartbeat_interval_ms,
                    )),
                    // Kafka's group.share.min/max.* defaults, widened likewise.
                    "share.session.timeout.ms" => Some(range_with(
                        SESSION_RANGE,
                        broker.group_share_session_timeout_ms,
                    )),
                    "share.heartbeat.interval.ms" => Some(range_with(
                        HEARTBEAT_RANGE,
                        broker.group_share_heartbeat_interval_ms,
                    )),
                    "share.record.lock.duration.ms" => Some(range_with(
                        (15_000, 60_000),
                        broker.group_share_record_lock_duration_ms,
                    )),
                    "share.delivery.count.limit" => {
                        Some(range_with((2, 10), broker.group_share_delivery_count_limit))
                    }
                    "share.partition.max.record.locks" => Some(range_with(
                        (100, 4_000),
                        broker.group_share_partition_max_record_locks,
                    )),
                    "share.assignment.interval.ms" => Some((0, 15_000)),
                    // Kafka's group.streams.min/max.* defaults, widened likewise.
                    "streams.session.timeout.ms" => Some(range_with(
                        SESSION_RANGE,
                        broker.group_streams_session_timeout_ms,
                    )),
                    "streams.heartbeat.interval.ms" => Some(range_with(
                        HEARTBEAT_RANGE,
                        broker.group_streams_heartbeat_interval_ms,
                    )),
                    // group.streams.max.standby.replicas
                    "streams.num.standby.replicas" => Some(range_with(
                        (0, 2),
                        broker.group_streams_num_standby_replicas,
                    )),
                    "streams.assignment.interval.ms" => Some((0, 15_000)),
                    "streams.initial.rebalance.delay.ms" => Some((0, i32::MAX)),
                    _ => None,
                };
                if let Some((low, high)) = range {
                    let least = if low == 0 { 0 } else { 1 };
                    if number < least {
                        return Err(bad(format!("Value must be at least {least}")));
                    }
                    if number < low || number > high {
                        return Err(invalid(format!(
                            "{name} must be in the range {low} to {high} inclusive."
                        )));
                    }
                }
            }
            "BOOLEAN" if !matches!(trimmed.to_ascii_lowercase().as_str(), "true" | "false") => {
                return Err(bad("Expected value to be either true or false".into()));
            }
            _ if def.name == "share.isolation.level"
                && !matches!(trimmed, "read_committed" | "read_uncommitted") =>
            {
                return Err(bad(
                    "String must be one of: read_committed, read_uncommitted".into(),
                ));
            }
            _ if def.name == "streams.assignor.name" && trimmed != ASSIGNOR_STICKY => {
                return Err(invalid(format!(
                    "{name} '{value}' is not a registered task assignor. Registered assignors are: [{ASSIGNOR_STICKY}]."
                )));
            }
            _ if def.name == "share.auto.offset.reset" => {
                // The parser the share-partitions use, so a value accepted here is one
                // they understand.
                let by_duration = trimmed
                    .strip_prefix("by_duration:")
                    .and_then(crate::share::parse_duration_ms)
                    .is_some();
                if !matches!(trimmed, "earliest" | "latest") && !by_duration {
                    return Err(bad(format!(
                        "Invalid value `{value}` for configuration {name}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A KIP-848 group's limits: the broker's, with the group's overrides.
pub fn consumer_limits(
    base: ConsumerGroupLimits,
    configs: &BTreeMap<String, String>,
) -> ConsumerGroupLimits {
    let get = |name: &str| configs.get(name).and_then(|v| v.trim().parse::<i32>().ok());
    ConsumerGroupLimits {
        session_timeout_ms: get(CONSUMER_SESSION_TIMEOUT).unwrap_or(base.session_timeout_ms),
        heartbeat_interval_ms: get(CONSUMER_HEARTBEAT_INTERVAL)
            .unwrap_or(base.heartbeat_interval_ms),
        ..base
    }
}

/// A share group's limits: the broker's, with the group's overrides.
pub fn share_limits(
    base: ShareGroupLimits,
    configs: &BTreeMap<String, String>,
) -> ShareGroupLimits {
    let get = |name: &str| configs.get(name).and_then(|v| v.trim().parse::<i32>().ok());
    ShareGroupLimits {
        session_timeout_ms: get("share.session.timeout.ms").unwrap_or(base.session_timeout_ms),
        heartbeat_interval_ms: get("share.heartbeat.interval.ms")
            .unwrap_or(base.heartbeat_interval_ms),
        ..base
    }
}

/// The broker's settings for streams groups (group.streams.*).
pub fn streams_limits_of(broker: &BrokerConfig) -> StreamsGroupLimits {
    StreamsGroupLimits {
        session_timeout_ms: broker.group_streams_session_timeout_ms,
        heartbeat_interval_ms: broker.group_streams_heartbeat_interval_ms,
        max_size: broker.group_streams_max_size.max(1) as usize,
        num_standby_replicas: broker.group_streams_num_standby_replicas.max(0) as u32,
        initial_rebalance_delay_ms: broker.group_streams_initial_rebalance_delay_ms.max(0),
        assignment_interval_ms: broker.group_streams_assignment_interval_ms.max(0),
        ..StreamsGroupLimits::default()
    }
}

/// A streams group's limits: the broker's, with the group's streams.* overrides.
pub fn streams_limits(
    base: StreamsGroupLimits,
    configs: &BTreeMap<String, String>,
) -> StreamsGroupLimits {
    let get = |name: &str| configs.get(name).and_then(|v| v.trim().parse::<i32>().ok());
    StreamsGroupLimits {
        session_timeout_ms: get("streams.session.timeout.ms").unwrap_or(base.session_timeout_ms),
        heartbeat_interval_ms: get("streams.heartbeat.interval.ms")
            .unwrap_or(base.heartbeat_interval_ms),
        num_standby_replicas: get("streams.num.standby.replicas")
            .map_or(base.num_standby_replicas, |n| n.max(0) as u32),
        initial_rebalance_delay_ms: get("streams.initial.rebalance.delay.ms")
            .map_or(base.initial_rebalance_delay_ms, |n| n.max(0)),
        assignment_interval_ms: get("streams.assignment.interval.ms")
            .map_or(base.assignment_interval_ms, |n| n.max(0)),
        ..base
    }
}

/// A single node's group configs (a cluster keeps them in its metadata log).
#[derive(Debug, Default)]
pub struct LocalGroupConfigs {
    /// Read at every KIP-848 heartbeat: never held across a file write.
    groups: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// One change at a time writes the file.
    writer: tokio::sync::Mutex<()>,
}

impl LocalGroupConfigs {
    pub fn load(data_dir: &Path) -> anyhow::Result<LocalGroupConfigs> {
        let groups = local_json::load(&data_dir.join(GROUP_CONFIGS_FILE))?;
        Ok(LocalGroupConfigs {
            groups: Mutex::new(groups),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<String, String>>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Broker {
    /// The configs set for `group` (empty: none).
    pub fn group_configs_of(&self, group: &str) -> BTreeMap<String, String> {
        match self.cluster() {
            Some(cluster) => cluster
                .image()
                .group_configs
                .get(group)
                .cloned()
                .unwrap_or_default(),
            None => self
                .group_configs
                .groups()
                .get(group)
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// Replaces `group`'s configs after Kafka's checks: in a cluster through the
    /// controller (answered once this broker's image has them), on a single node in its
    /// file.
    pub async fn set_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        validate(&configs, &self.config)?;
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = self.cluster() {
            let wanted = configs.clone();
            let name = group.to_string();
            let command = ControllerCommand::SetGroupConfigs {
                group: group.to_string(),
                configs,
            };
            return cluster
                .write_and_wait(command, |image| {
                    image.group_configs.get(&name).cloned().unwrap_or_default() == wanted
                })
                .await;
        }
        let _writer = self.group_configs.writer.lock().await;
        let mut next = self.group_configs.groups().clone();
        if configs.is_empty() {
            next.remove(group);
        } else {
            next.insert(group.to_string(), configs);
        }
        let path = self.config.data_dir.join(GROUP_CONFIGS_FILE);
        local_json::store(path, &next, "group configs").await?;
        *self.group_configs.groups() = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(name: &str, value: &str) -> Option<String> {
        let configs = BTreeMap::from([(name.to_string(), value.to_string())]);
        validate(&configs, &BrokerConfig::default())
            .err()
            .map(|e| e.message.unwrap_or_default())
    }

    /// Kafka 4.4.0's answers, from interop/kafka/reference-4.4/group_configs.json.
    #[test]
    fn kafkas_checks_in_kafkas_words() {
        assert_eq!(GROUP_CONFIGS.len(), 21);
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("consumer.session.timeout.ms", "50000", None),
            ("consumer.session.timeout.ms", "60000", None),
            ("consumer.heartbeat.interval.ms", "15000", None),
            ("consumer.session.timeout.ms", "abc", Some("Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT")),
            ("consumer.session.timeout.ms", "-5", Some("Invalid value -5 for configuration consumer.session.timeout.ms: Value must be at least 1")),
            ("consumer.session.timeout.ms", "1000", Some("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")),
            ("consumer.session.timeout.ms", "600000", Some("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")),
            ("consumer.heartbeat.interval.ms", "100", Some("consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.")),
            ("share.auto.offset.reset", "by_duration:PT1H30M", None),
            ("share.auto.offset.reset", "by_duration:PXYZ", Some("Invalid value by_duration:PXYZ for configuration share.auto.offset.reset: Invalid value `by_duration:PXYZ` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")),
            ("share.auto.offset.reset", "bogus", Some("Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")),
            ("share.session.timeout.ms", "50000", None),
            ("share.record.lock.duration.ms", "15000", None),
            ("share.record.lock.duration.ms", "1000", Some("share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.")),
            ("share.delivery.count.limit", "11", Some("share.delivery.count.limit must be in the range 2 to 10 inclusive.")),
            ("share.partition.max.record.locks", "5000", Some("share.partition.max.record.locks must be in the range 100 to 4000 inclusive.")),
            ("share.assignment.interval.ms", "0", None),
            ("share.isolation.level", "read_committed", None),
            ("share.isolation.level", "serializable", Some("Invalid value serializable for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted")),
            ("streams.num.standby.replicas", "1", None),
            ("retention.ms", "1000", Some("Unknown group config name: retention.ms")),
        ];
        for (name, value, expected) in cases {
            assert_eq!(message(name, value).as_deref(), *expected, "{name}={value}");
        }
    }

    #[test]
    fn overrides_change_a_groups_session_and_heartbeat_only() {
        let base = ConsumerGroupLimits::default();
        let configs = BTreeMap::from([
            (CONSUMER_SESSION_TIMEOUT.to_string(), "50000".to_string()),
            ("share.session.timeout.ms".to_string(), "1".to_string()),
        ]);
        let limits = consumer_limits(base, &configs);
        assert_eq!(limits.session_timeout_ms, 50_000);
        assert_eq!(limits.heartbeat_interval_ms, base.heartbeat_interval_ms);
        assert_eq!(limits.max_size, base.max_size);
    }
}
